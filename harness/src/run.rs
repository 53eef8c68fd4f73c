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
use crate::discover::{DiscoveryRun, HEADLINE_TAG, Subject};
use crate::event::{Event, EventSender};
use crate::outcome::FindingKind;
use crate::outcome::{Finding, Note, ScenarioResult, SkipReason, Status, millis};
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
}

impl Engine {
    /// An engine for this tool and profile; reads the manifest once.
    pub fn new(tool: PathBuf, profile: Profile, keep_sandboxes: bool) -> Self {
        Self::for_tool(Tool::new(tool), profile, keep_sandboxes)
    }

    /// An engine for this invocation of the tool; reads the manifest once (a tool without a
    /// usable manifest has no commands, and the scenarios judging it say so).
    pub fn for_tool(tool: Tool, profile: Profile, keep_sandboxes: bool) -> Self {
        let discovery = crate::discover::discover(&tool, &profile);
        Engine {
            subject: Subject {
                tool,
                profile,
                commands: discovery.commands(),
                startup: discovery.startup(),
            },
            discovery,
            calibrator: Calibrator::new(),
            keep_sandboxes,
        }
    }

    /// The calibration of a role (computed once per run, and announced when it is).
    pub fn calibration(
        &self,
        role: &str,
        events: &EventSender,
    ) -> Result<Arc<Calibration>, String> {
        self.calibrator.get(role, || {
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

    /// Runs the plan with `jobs` worker threads, sending events; returns the results in plan
    /// order.
    /// `finish` sees each result before it is reported (baseline marks, snapshot comparison),
    /// with the root of the scenario's sandbox when it ran.
    pub fn run_plan(
        &self,
        planned: &[Planned<'_>],
        jobs: usize,
        events: &EventSender,
        finish: &Finisher<'_>,
    ) -> Vec<ScenarioResult> {
        let next = AtomicUsize::new(0);
        let results: Vec<std::sync::Mutex<Option<ScenarioResult>>> =
            planned.iter().map(|_| std::sync::Mutex::new(None)).collect();
        std::thread::scope(|scope| {
            for _ in 0..jobs.max(1).min(planned.len().max(1)) {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        let Some(p) = planned.get(i) else { break };
                        let skip = self.skip_for(p);
                        let (mut result, root) = match skip {
                            Some(reason) => (result_for(p.scenario, Status::Skip { reason }), None),
                            None => {
                                events.send(Event::ScenarioStarted { id: p.scenario.id.clone() });
                                self.run_scenario_rooted(p.scenario, events)
                            }
                        };
                        // A scenario that ended after the signal had its processes killed under
                        // it: what it saw is no verdict.
                        if crate::interrupt::interrupted() && result.status.ran() {
                            result.status = Status::Skip { reason: SkipReason::Interrupted };
                            result.findings.clear();
                        }
                        finish(&mut result, root.as_deref());
                        events.send(Event::ScenarioFinished(Box::new(result.clone())));
                        if let Ok(mut slot) = results[i].lock() {
                            *slot = Some(result);
                        }
                    }
                });
            }
        });
        results
            .into_iter()
            .zip(planned)
            .map(|(slot, p)| {
                slot.into_inner().ok().flatten().unwrap_or_else(|| {
                    let message = "the scenario's worker thread failed".to_owned();
                    result_for(p.scenario, Status::Error { message })
                })
            })
            .collect()
    }

    /// Runs one scenario to its result (never panics on the tool's behaviour).
    pub fn run_scenario(&self, scenario: &Scenario) -> ScenarioResult {
        self.run_scenario_rooted(scenario, &EventSender::discarding()).0
    }

    /// Runs one scenario; also returns the root of the sandbox it ran in (gone by now, but its
    /// path redacts the evidence), when it got that far.
    fn run_scenario_rooted(
        &self,
        scenario: &Scenario,
        events: &EventSender,
    ) -> (ScenarioResult, Option<PathBuf>) {
        let started = Instant::now();
        // Every path below sets the status it ends with.
        let mut result = result_for(scenario, Status::Pass);
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
            match self.calibration(role, events) {
                Ok(c) => {
                    notes.push(c.describe());
                    if scenario.needs_interruptible() && !c.interruptible() {
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
        let steps = step::run_steps(&self.subject, scenario, &sandbox, calibration, input);
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
        notes.extend(steps.failed_cancels.into_iter().map(Note::CancelFailed));
        result.steps = steps.records;
        notes.extend(steps.notes);
        result.status = match (harness_error, steps.skip, findings.is_empty()) {
            (Some(message), _, _) => Status::Error { message },
            // A leak is news about the tool even when the profile kept the rest from a verdict.
            (None, Some(reason), true) => Status::Skip { reason },
            (None, _, true) => Status::Pass,
            (None, _, false) => Status::Fail,
        };
        result.findings = findings;
        result.notes = notes;
        result.duration_ms = millis(started.elapsed());
        let root = sandbox.root().to_path_buf();
        drop(sandbox);
        (result, Some(root))
    }
}

/// A result of this scenario with this status and nothing else yet.
fn result_for(s: &Scenario, status: Status) -> ScenarioResult {
    ScenarioResult {
        id: s.id.clone(),
        requirement: s.requirement.clone(),
        criterion: s.criterion.clone(),
        level: s.level,
        tags: s.tags.clone(),
        status,
        findings: Vec::new(),
        notes: Vec::new(),
        steps: Vec::new(),
        duration_ms: 0,
        baseline: None,
    }
}
