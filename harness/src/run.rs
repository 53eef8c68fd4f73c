//! Stage: run. The engine: it schedules scenarios (`-j N` at once, on plain threads pulling
//! from one queue) and takes each through the stages in order: calibrate its primary role
//! ([`crate::calibrate`]), prepare its sandbox ([`crate::prepare`]), run its steps
//! ([`crate::step`], judged by [`crate::checks`]), then sweep the sandbox: a process still
//! carrying the sandbox marker after the steps' clean-up is a `leaked-process` finding, and is
//! killed.
//!
//! The engine holds only what every scenario of the run shares (the [`Subject`], the
//! calibrations) and no stage logic of its own.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use crate::calibrate::{self, Calibration, Calibrator};
use crate::discover::{DiscoveryRun, HEADLINE_TAG, LimitsProblem, Subject};
use crate::event::{Event, EventSender};
use crate::outcome::FindingKind;
use crate::outcome::{Finding, Note, ScenarioResult, SkipReason, Status, millis};
use crate::pace::Gate;
use crate::plan::{self, Planned};
use crate::prepare::{self, Needs};
use crate::profile::Profile;
use crate::scenario::{Declaration, Scenario};
use crate::step;
use crate::tool::Tool;

/// What happens to each result before it is reported: `(result, sandbox root if it ran)`.
pub type Finisher<'a> = dyn Fn(&mut ScenarioResult, Option<&Path>) + Sync + 'a;

/// Everything the scenarios of one run share.
pub struct Engine {
    /// The tool, its profile and its manifest's commands.
    pub subject: Subject,
    /// The manifest command's one run (a failed one skips what it makes pointless).
    pub discovery: DiscoveryRun,
    /// Role calibrations, computed once.
    pub calibrator: Calibrator,
    /// Keep sandbox directories (`--keep-sandboxes`).
    pub keep_sandboxes: bool,
    /// The roles the profile left out that another of its roles plays ([`plan::fill_roles`]).
    pub role_fills: Vec<plan::RoleFill>,
    /// The places outside the sandboxes looked at before and after each scenario.
    pub outside: crate::sandbox::Places,
}

impl Engine {
    /// An engine for this tool and profile; reads the manifest once.
    pub fn new(tool: PathBuf, profile: Profile, keep_sandboxes: bool) -> Self {
        Self::for_tool(Tool::new(tool), profile, keep_sandboxes)
    }

    /// An engine for this invocation of the tool; reads the manifest once (a tool without a
    /// usable manifest has no commands, and the scenarios judging it say so).
    pub fn for_tool(tool: Tool, mut profile: Profile, keep_sandboxes: bool) -> Self {
        let discovery = crate::discover::discover(&tool, &profile);
        let commands = discovery.commands();
        let role_fills = plan::fill_roles(&mut profile, &commands);
        let profile_dir = profile.path.as_ref().map(|_| profile.base_dir());
        let outside = crate::sandbox::Places::for_run(&tool.path, profile_dir.as_deref());
        Engine {
            outside,
            subject: Subject { tool, profile, commands, startup: discovery.startup() },
            discovery,
            calibrator: Calibrator::new(),
            keep_sandboxes,
            role_fills,
        }
    }

    /// The calibration of a role, from `calibrator` (computed once per calibrator, and
    /// announced when it is). The run of the calibration takes a place among the scenarios
    /// running (`gate`): it is work the machine does like theirs.
    pub fn calibration(
        &self,
        calibrator: &Calibrator,
        role: &str,
        events: &EventSender,
        gate: &Gate,
    ) -> Result<Arc<Calibration>, String> {
        calibrator.get(role, || {
            let _place = gate.admit();
            let measured = calibrate::measure(&self.subject, role, self.keep_sandboxes);
            let outcome = measured.as_ref().map(|c| millis(c.duration)).map_err(Clone::clone);
            events.send(Event::Calibrated { role: role.to_owned(), outcome });
            measured
        })
    }

    /// Whether some command of the manifest makes this declaration (`None` when no manifest
    /// was read).
    pub fn declares(&self, declaration: Declaration) -> Option<bool> {
        self.discovery
            .result
            .is_ok()
            .then(|| !self.subject.commands.declaring(declaration).is_empty())
    }

    /// Why a planned scenario will not run: with the manifest read, what its commands declare
    /// decides ([`plan::skip_with_manifest`]); without it, the profile's gaps and the failed
    /// discovery do.
    fn skip_for(&self, p: &Planned<'_>) -> Option<SkipReason> {
        match &self.discovery.result {
            Ok(_) => {
                plan::skip_with_manifest(p.scenario, &self.subject.profile, &self.subject.commands)
            }
            Err(_) => p.skip.clone().or_else(|| self.discovery.skip_for(p.scenario)),
        }
    }

    /// The input file of a role (`{input}`): the first word of its argv that names a regular
    /// file in the sandbox's working directory once fixtures and setup are in place.
    fn input_of(&self, role: &str, work: &Path) -> Option<String> {
        let role = self.subject.profile.role(role)?;
        role.argv.iter().find(|word| !word.starts_with('-') && work.join(word).is_file()).cloned()
    }

    /// Runs the plan with `workers` threads, as many at once as `gate` lets in, sending
    /// events; returns the results in plan order. Then every result whose verdict may be the
    /// machine's load ([`ScenarioResult::wants_confirmation`]) runs again, alone, with its role
    /// calibrated afresh, and that run gives the verdict (the first is kept beside it).
    /// `finish` sees each final result before it is reported (baseline marks, snapshot
    /// comparison), with the root of the scenario's sandbox when it ran.
    pub fn run_plan(
        &self,
        planned: &[Planned<'_>],
        workers: usize,
        gate: &Gate,
        events: &EventSender,
        finish: &Finisher<'_>,
    ) -> Vec<ScenarioResult> {
        let next = AtomicUsize::new(0);
        let results: Vec<std::sync::Mutex<Option<Ran>>> =
            planned.iter().map(|_| std::sync::Mutex::new(None)).collect();
        std::thread::scope(|scope| {
            for _ in 0..workers.max(1).min(planned.len().max(1)) {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        let Some(p) = planned.get(i) else { break };
                        let ran = self.run_planned(p, &self.calibrator, gate, events);
                        let ran = match ran.result.wants_confirmation(p.scenario.timed()) {
                            true if !crate::interrupt::interrupted() => {
                                events.send(Event::ScenarioToConfirm(Box::new(ran.result.clone())));
                                ran
                            }
                            _ => self.finished(ran, events, finish),
                        };
                        if let Ok(mut slot) = results[i].lock() {
                            *slot = Some(ran);
                        }
                    }
                });
            }
        });
        let mut ran: Vec<Option<Ran>> =
            results.into_iter().map(|slot| slot.into_inner().ok().flatten()).collect();
        // Alone now: every scenario of the plan has ended. A fresh calibration measures the
        // roles under the load the runs alone will meet.
        let again = Calibrator::new();
        for (slot, p) in ran.iter_mut().zip(planned) {
            let Some(first) = slot.take() else { continue };
            *slot = Some(match first.finished {
                true => first,
                false if crate::interrupt::interrupted() => self.finished(first, events, finish),
                false => {
                    let alone = self.run_planned(p, &again, &Gate::Open, events);
                    let confirmed = Ran {
                        result: alone.result.confirming(first.result),
                        root: alone.root,
                        finished: false,
                    };
                    self.finished(confirmed, events, finish)
                }
            });
        }
        ran.into_iter()
            .zip(planned)
            .map(|(slot, p)| match slot {
                Some(ran) => ran.result,
                None => {
                    let message = "the scenario's worker thread failed".to_owned();
                    ScenarioResult::of(p.scenario, Status::Error { message })
                }
            })
            .collect()
    }

    /// One planned scenario: skipped as planned, or run.
    fn run_planned(
        &self,
        p: &Planned<'_>,
        calibrator: &Calibrator,
        gate: &Gate,
        events: &EventSender,
    ) -> Ran {
        let (mut result, root) = match self.skip_for(p) {
            Some(reason) => (ScenarioResult::of(p.scenario, Status::Skip { reason }), None),
            None => self.run_attempts(p.scenario, events, calibrator, gate),
        };
        // A scenario that ended after the signal had its processes killed under it: what it
        // saw is no verdict.
        if crate::interrupt::interrupted() && result.status.ran() {
            result.status = Status::Skip { reason: SkipReason::Interrupted };
            result.findings.clear();
        }
        Ran { result, root, finished: false }
    }

    /// Runs the scenario as many times as its `attempts` ask, until one attempt does not
    /// pass: that attempt is the result, with a note of which it was.
    fn run_attempts(
        &self,
        scenario: &Scenario,
        events: &EventSender,
        calibrator: &Calibrator,
        gate: &Gate,
    ) -> (ScenarioResult, Option<PathBuf>) {
        let attempts = scenario.attempts.unwrap_or(1).max(1);
        let mut attempt = 1;
        loop {
            let (mut result, root) = self.run_scenario_rooted(scenario, events, calibrator, gate);
            let passed = result.status == Status::Pass;
            if attempts > 1 && (!passed || attempt == attempts) {
                result.notes.push(Note::Attempts { attempt, attempts, passed });
            }
            if !passed || attempt == attempts || crate::interrupt::interrupted() {
                return (result, root);
            }
            attempt += 1;
        }
    }

    /// A result that stands: finished (baseline, snapshots) and reported.
    fn finished(&self, mut ran: Ran, events: &EventSender, finish: &Finisher<'_>) -> Ran {
        finish(&mut ran.result, ran.root.as_deref());
        events.send(Event::ScenarioFinished(Box::new(ran.result.clone())));
        ran.finished = true;
        ran
    }

    /// Runs one scenario to its result (never panics on the tool's behaviour), alone.
    pub fn run_scenario(&self, scenario: &Scenario) -> ScenarioResult {
        let events = EventSender::discarding();
        self.run_attempts(scenario, &events, &self.calibrator, &Gate::Open).0
    }

    /// Runs one scenario; also returns the root of the sandbox it ran in (gone by now, but its
    /// path redacts the evidence), when it got that far. It takes its place among the running
    /// scenarios (`gate`) once its role is calibrated: waiting for another scenario's
    /// calibration costs the machine nothing.
    fn run_scenario_rooted(
        &self,
        scenario: &Scenario,
        events: &EventSender,
        calibrator: &Calibrator,
        gate: &Gate,
    ) -> (ScenarioResult, Option<PathBuf>) {
        let started = Instant::now();
        let outside_before = self.outside.look();
        // Every path below sets the status it ends with.
        let mut result = ScenarioResult::of(scenario, Status::Pass);
        // A manifest command that never answered is not run again: its run is the headline.
        if scenario.tags.iter().any(|t| t == HEADLINE_TAG)
            && let Some(finding) = self.discovery.headline_finding()
        {
            result.status = Status::Fail;
            result.findings = vec![finding];
            result.steps = self.discovery.record.iter().cloned().collect();
            return (result, None);
        }
        let mut notes = Vec::new();
        let calibration = if scenario.needs_calibration() {
            let Some(role) = scenario.primary_role() else {
                result.status = Status::Error {
                    message: "scenario needs calibration but names no role".into(),
                };
                return (result, None);
            };
            match self.calibration(calibrator, role, events, gate) {
                Ok(c) => {
                    notes.push(c.describe());
                    let long = crate::scenario::OPT_IN_ROLES.contains(&role);
                    if (scenario.needs_interruptible() || long) && !c.interruptible() {
                        result.status = Status::Skip { reason: c.too_fast_reason() };
                        result.notes = notes;
                        return (result, None);
                    }
                    Some(c)
                }
                Err(e) => {
                    result.status = Status::Error { message: e };
                    result.duration_ms = millis(started.elapsed());
                    return (result, None);
                }
            }
        } else {
            None
        };
        let limits = match crate::discover::declared_limits(&self.subject, scenario) {
            Ok(limits) => limits,
            Err(LimitsProblem::Skip(reason)) => {
                result.status = Status::Skip { reason };
                result.notes = notes;
                return (result, None);
            }
            Err(LimitsProblem::Error(message)) => {
                result.status = Status::Error { message };
                return (result, None);
            }
        };
        let _place = gate.admit();
        events.send(Event::ScenarioStarted { id: scenario.id.clone() });
        let started = Instant::now();
        let roles: Vec<&str> = scenario.roles.iter().map(String::as_str).collect();
        let uses_order = !scenario.placements().is_empty();
        let probes = scenario.probe_kinds();
        let needs = Needs { roles: &roles, probes: &probes, argument_order: uses_order };
        let prepared = prepare::prepare(
            &self.subject.tool,
            &self.subject.profile,
            &needs,
            self.keep_sandboxes,
        );
        let sandbox = match prepared {
            Ok(s) => s,
            Err(e) => {
                events.send(Event::SetupFailed { id: scenario.id.clone(), error: e.to_string() });
                result.status =
                    Status::Error { message: format!("failed to prepare the sandbox: {e}") };
                result.duration_ms = millis(started.elapsed());
                return (result, None);
            }
        };
        let input = match scenario.primary_role().filter(|_| scenario.uses_input()) {
            Some(role) => match self.input_of(role, &sandbox.work()) {
                Some(path) => Some(path),
                None => {
                    result.status =
                        Status::Skip { reason: SkipReason::NoInputFile { role: role.to_owned() } };
                    result.notes = notes;
                    result.duration_ms = millis(started.elapsed());
                    return (result, None);
                }
            },
            None => None,
        };
        let steps =
            step::run_steps(&self.subject, scenario, &sandbox, calibration, input, limits, started);
        let (mut findings, harness_error) = (steps.findings, steps.harness_error);
        // A leak after a cancel that failed is that cancel's doing: the finding says which.
        let after_cancels = match steps.failed_cancels.as_slice() {
            [] => "its cancels".to_owned(),
            failed => {
                let list: Vec<String> = failed.iter().map(ToString::to_string).collect();
                format!("its cancels (failed: {})", list.join("; "))
            }
        };
        for leak in sandbox.sweep() {
            findings.push(
                Finding::new(
                    FindingKind::LeakedProcess,
                    format!(
                        "process {} still ran after the scenario and {after_cancels} (killed now)",
                        leak.pid
                    ),
                )
                .expected("no process of the scenario left once its jobs are cancelled")
                .actual(leak.cmdline.join(" ")),
            );
        }
        let root = sandbox.root().to_path_buf();
        if let Err(left) = sandbox.close() {
            findings.push(
                Finding::new(
                    FindingKind::SandboxLeft,
                    format!(
                        "the scenario's sandbox could not be removed ({left}); the next conform run removes it"
                    ),
                )
                .expected("a sandbox conform can remove once the scenario ends")
                .actual(left.reason),
            );
        }
        notes.extend(steps.failed_cancels.into_iter().map(Note::CancelFailed));
        let outside = self.outside.look().changes_since(&outside_before);
        if !outside.is_empty() {
            notes.push(Note::OutsideWrites(outside.iter().map(ToString::to_string).collect()));
        }
        result.steps = steps.records;
        result.actions = steps.actions;
        notes.extend(steps.notes);
        result.status = match (harness_error, steps.skip, findings.is_empty()) {
            (Some((step, error)), _, _) => {
                Status::Error { message: format!("step `{step}`: {error}") }
            }
            // A leak is news about the tool even when the profile kept the rest from a verdict.
            (None, Some(reason), true) => Status::Skip { reason },
            (None, _, true) => Status::Pass,
            (None, _, false) => Status::Fail,
        };
        result.findings = crate::outcome::fold_repeats(findings);
        result.notes = notes;
        result.duration_ms = millis(started.elapsed());
        (result, Some(root))
    }
}

pub use crate::discover::MAX_IDLE_WAIT;

/// A scenario's result as the engine carries it between its first run and its verdict.
struct Ran {
    result: ScenarioResult,
    /// The root of the sandbox it ran in, when it got that far.
    root: Option<PathBuf>,
    /// Whether it was finished and reported.
    finished: bool,
}
