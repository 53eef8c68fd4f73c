//! Stage: step. The interpreter of a scenario's steps: each step runs the tool (or a
//! continuation, a cancel, a signal, a shell line) in the scenario's sandbox, records what it
//! saw as an [`Observation`], resolves what the step's `expect` table refers to (templates,
//! duration expressions, calibrated values, earlier steps) and hands that to [`crate::checks`].
//!
//! A scenario stops at its first step with a finding: later steps build on earlier ones and
//! would only repeat the news. After the steps, passed or not, the clean-up cancels every job
//! the scenario saw, so the sandbox sweep that follows shows only true leaks.
//!
//! It is its own stage, between the sandbox and the checks, so that the engine only schedules
//! and the checks only judge.

mod cleanup;
mod continuation;
mod held;
mod invoke;
mod lifetime;
mod stop;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
pub use stop::{StepError, StepResult, Stop};

use nix::unistd::Pid;
use serde_json::Value;

use crate::calibrate::{self, Calibration, SLACK};
use crate::checks::{self, Resolved};
use crate::discover::DeclaredLimits;
use crate::discover::Subject;
use crate::exec::{self, Invocation, Program, Termination};
use crate::observe::{self, Observation, StdoutProblem};
use crate::outcome::FindingKind;
use crate::outcome::{
    ActionKind, ActionRecord, FailedCancel, Finding, Note, Repro, ReproCommand, SkipReason,
    StepRecord, millis,
};
use crate::prepare::SETUP_LIMIT;
use crate::sandbox::{self, Sandbox};
use crate::scenario::{
    CONSTANT_SLACK, EnvelopeRule, Expect, IDLE_TIMEOUT, MAX_LIFETIME, STARTUP, Scenario,
    ShellCommandStep, Step, Var, VerifyStep, eval_duration, signal_by_name, walk_template,
};

/// Default bound on a step without calibration.
pub const DEFAULT_STEP_LIMIT: Duration = Duration::from_secs(30);
pub use crate::observe::INCOMPLETE;
/// The fewest hops a continue loop without `max_hops` allows (see `continuation::hop_limit`).
pub const DEFAULT_MAX_HOPS: u32 = 100;

/// The scenario of the kit's `no_hang_stdin_closed`: a probe that hangs with stdin closed.
pub const NO_HANG_CLOSED: &str = "read-probes-end-with-stdin-closed";
/// The scenario of the kit's `no_hang_stdin_open`.
pub const NO_HANG_OPEN: &str = "read-probes-end-with-stdin-open";
/// The scenario of the kit's `dry_run_preview`: a preview that hangs on its own.
pub const DRY_RUN_PREVIEWS: &str = "dry-run-previews";

/// What decides where a probe run that outlived its limit is judged.
#[derive(Debug, Clone, Copy)]
pub struct HangFacts<'a> {
    /// The run was a destructive probe's preview.
    pub preview: bool,
    /// (A preview.) The destructive probe, run unconfirmed with stdin closed, hangs too.
    pub unconfirmed_hangs: bool,
    /// The probe run the kit's first way (stdin closed, nothing added) hangs too; for a
    /// preview, the preview so run.
    pub plain_hangs: bool,
    /// The run differed from the kit's first run only by an open, silent stdin.
    pub open_stdin: bool,
    /// The scenario of the run.
    pub scenario: &'a str,
}

/// The scenario that judges a probe run that outlived its limit, in the kit's order: the kit
/// runs a probe with stdin closed first and judges nothing else of it when that hangs
/// ([`NO_HANG_CLOSED`]); then with stdin open ([`NO_HANG_OPEN`]), with NO_COLOR (the colour
/// scenario itself), and previews a destructive probe last ([`DRY_RUN_PREVIEWS`]). A hang
/// that only this scenario's way of running provokes is the scenario's own.
pub fn hang_charge<'a>(facts: HangFacts<'a>) -> &'a str {
    match facts {
        HangFacts { preview: true, unconfirmed_hangs: true, .. } => NO_HANG_CLOSED,
        HangFacts { preview: true, plain_hangs: true, .. } => DRY_RUN_PREVIEWS,
        HangFacts { preview: false, plain_hangs: true, .. } => NO_HANG_CLOSED,
        HangFacts { preview: false, open_stdin: true, .. } => NO_HANG_OPEN,
        HangFacts { scenario, .. } => scenario,
    }
}

/// The advisory note on a manifest answered bare.
pub const BARE_MANIFEST_NOTE: &str = "the manifest command answers the manifest bare: conform accepts it (docs/contract.md §2), the spec kit's manifest_valid and json_envelope refuse it (they want it as the data of an envelope)";

/// The advisory note on a manifest of a newer minor version that a step validates: conform
/// judged what its own version requires and let the fields it does not know through.
fn newer_manifest_note(expect: &Expect, obs: &Observation) -> Option<Note> {
    let names = expect.schema.as_ref()?.names();
    if !names.contains(&crate::schemas::SchemaName::Manifest) {
        return None;
    }
    let response = obs.response()?;
    if !crate::schemas::manifest_is_newer(response) {
        return None;
    }
    let unknown = crate::schemas::unknown_fields(response).ok()?;
    let minor = crate::schemas::manifest_minor(response)?;
    let fields = match unknown.as_slice() {
        [] => "none of its fields is new to conform".to_owned(),
        lines => format!("the fields conform does not know were let through: {}", lines.join("; ")),
    };
    Some(Note::Advisory(format!(
        "the manifest says schema_version 3.{minor}, newer than the {} conform judges: a minor version only adds, so it was validated against what {} requires, and {fields}",
        crate::schemas::SCHEMA_VERSION,
        crate::schemas::SCHEMA_VERSION
    )))
}

/// What must hold of a step's response before its `expect` is judged: `applies_when`, then
/// `premise`.
#[derive(Debug, Clone, Copy, Default)]
struct Conditions<'a> {
    /// The criterion applies to the tool's choice ([`ScenarioState::shows_other_choice`]).
    applies_when: Option<&'a Expect>,
    /// What the criterion presupposes ([`ScenarioState::misses_premise`]).
    premise: Option<&'a Expect>,
}

impl<'a> Conditions<'a> {
    /// A premise alone.
    fn premise(premise: Option<&'a Expect>) -> Self {
        Self { applies_when: None, premise }
    }
}

/// What a step's premise came to ([`ScenarioState::misses_premise`]).
enum Premise {
    /// Met, or the step has none.
    Met,
    /// Missed while the tool behaved legally: the scenario is skipped for this reason.
    MissedLegally(SkipReason),
    /// Missed, and what came instead breaks a rule: these findings.
    MissedIllegally(Vec<Finding>),
}

/// What the steps of a scenario came to.
#[derive(Debug, Default)]
pub struct StepsOutcome {
    /// The findings of the step that failed (none when every step passed) and of the clean-up.
    pub findings: Vec<Finding>,
    /// A fault of conform itself, and the step it stopped.
    pub harness_error: Option<(String, StepError)>,
    /// Every process the scenario ran, in order.
    pub records: Vec<StepRecord>,
    /// The steps that ran no process of the tool, in order.
    pub actions: Vec<ActionRecord>,
    /// Why the scenario could not be judged as the profile stands, when a step found out.
    pub skip: Option<SkipReason>,
    /// The clean-up's cancels that failed and matter (the `cleanup` module).
    pub failed_cancels: Vec<FailedCancel>,
    /// Advisory notes of the steps (a choice the spec kit would judge otherwise).
    pub notes: Vec<Note>,
}

/// Runs the scenario's steps in the prepared sandbox, then cancels every job they saw.
/// `origin` is the start of the scenario: the records' `started_ms` run from it.
pub fn run_steps(
    subject: &Subject,
    scenario: &Scenario,
    sandbox: &Sandbox,
    calibration: Option<Arc<Calibration>>,
    input: Option<String>,
    limits: DeclaredLimits,
    origin: Instant,
) -> StepsOutcome {
    let mut state = ScenarioState {
        origin,
        actions: Vec::new(),
        subject,
        input,
        scenario,
        sandbox_root: sandbox.root().to_path_buf(),
        work: sandbox.work(),
        base_env: sandbox.env(),
        marker: sandbox.marker().to_owned(),
        calibration,
        limits,
        observations: Vec::new(),
        last: BTreeMap::new(),
        step_observations: BTreeMap::new(),
        step_env: BTreeMap::new(),
        step_role: BTreeMap::new(),
        current_role: None,
        deferred_hangs: Vec::new(),
        notes: Vec::new(),
        started: BTreeMap::new(),
        effects: BTreeMap::new(),
        ended_unseen: BTreeSet::new(),
        holds: BTreeMap::new(),
        paths: BTreeMap::new(),
    };
    let mut outcome = StepsOutcome::default();
    for step in &scenario.steps {
        match state.run_step(step) {
            Ok(step_findings) => {
                let failed = !step_findings.is_empty();
                outcome.findings.extend(step_findings);
                if failed {
                    break;
                }
            }
            Err(Stop::Skip(reason)) => {
                outcome.skip = Some(reason);
                break;
            }
            Err(Stop::Error(e)) => {
                outcome.harness_error = Some((step.name().to_owned(), e));
                break;
            }
        }
    }
    // Nothing of the scenario failed, but a hang the kit charges elsewhere kept some runs
    // from a verdict: not a pass.
    if outcome.findings.is_empty()
        && outcome.harness_error.is_none()
        && outcome.skip.is_none()
        && !state.deferred_hangs.is_empty()
    {
        let runs = state.deferred_hangs.iter().map(|(run, _)| run.clone()).collect();
        let mut scenarios: Vec<String> =
            state.deferred_hangs.iter().map(|(_, s)| s.clone()).collect();
        scenarios.sort();
        scenarios.dedup();
        outcome.skip = Some(SkipReason::HangJudgedElsewhere { runs, scenarios });
    }
    outcome.notes = std::mem::take(&mut state.notes);
    outcome.failed_cancels = state.clean_up();
    // Moved, not cloned: a record may hold a response of megabytes (a large manifest).
    outcome.records =
        std::mem::take(&mut state.observations).into_iter().map(|o| o.record).collect();
    outcome.actions = std::mem::take(&mut state.actions);
    outcome
}

/// The state of one scenario's steps: what they saw so far, and where they run.
pub struct ScenarioState<'e> {
    /// The start of the scenario, which the records' and actions' times run from.
    origin: Instant,
    /// The steps so far that ran no process of the tool.
    actions: Vec<ActionRecord>,
    subject: &'e Subject,
    /// `{input}`: the primary role's input file, when the scenario uses it.
    input: Option<String>,
    scenario: &'e Scenario,
    sandbox_root: PathBuf,
    work: PathBuf,
    base_env: BTreeMap<OsString, OsString>,
    marker: String,
    calibration: Option<Arc<Calibration>>,
    /// `{idle_timeout}` and `{max_lifetime}`, when the scenario uses them.
    limits: DeclaredLimits,
    observations: Vec<Observation>,
    /// Index in `observations` of each step's last observation.
    last: BTreeMap<String, usize>,
    /// Indices in `observations` of every observation of each step, in order.
    step_observations: BTreeMap<String, Vec<usize>>,
    /// The environment each run/continue step ran with (a continuation inherits it).
    step_env: BTreeMap<String, BTreeMap<OsString, OsString>>,
    /// The role each step ran (a continuation's is its origin's).
    step_role: BTreeMap<String, Option<String>>,
    /// The role of the step being checked.
    current_role: Option<String>,
    /// The runs of `kit_hangs` steps that outlived their limit and are judged by another
    /// scenario, with that scenario's id.
    deferred_hangs: Vec<(String, String)>,
    /// Advisory notes the judging gave, each once.
    notes: Vec<Note>,
    /// When each step started (for `elapsed-since`).
    started: BTreeMap<String, Instant>,
    /// What each verify step's oracle answered: its output, or why it failed.
    effects: BTreeMap<String, Result<String, String>>,
    /// Signalled steps that ended the work though no response of theirs says so: the oracle
    /// read right after them answered the uninterrupted run's effect.
    ended_unseen: BTreeSet<String>,
    /// What bounds each observation's call, by index in `observations` (calls without a
    /// bound are absent).
    holds: BTreeMap<usize, held::Hold>,
    /// The command path each observation invoked (`job.wait`, `analyze`, ...), by index in
    /// `observations`, when its words name one.
    paths: BTreeMap<usize, String>,
}

/// What the checks look at, resolved from the scenario's state before they run.
impl ScenarioState<'_> {
    fn duration(&self, expr: &str) -> Result<Duration, String> {
        eval_duration(expr, |name| match name {
            CONSTANT_SLACK => Some(SLACK),
            STARTUP => Some(self.subject.startup),
            IDLE_TIMEOUT => self.limits.idle_timeout,
            MAX_LIFETIME => self.limits.max_lifetime,
            _ => self.calibration.as_ref().and_then(|c| c.var(name)),
        })
    }

    fn text(&self, template: &str) -> Result<String, String> {
        walk_template(template, |var| self.var_text(var))
    }

    fn last_of(&self, step: &str) -> Option<&Observation> {
        self.last.get(step).and_then(|&i| self.observations.get(i))
    }

    fn shell_words(&self, line: &str) -> Result<Vec<String>, String> {
        self.split_words(line).map_err(|e| e.to_string())
    }

    /// [`Self::shell_words`], typed: a line sh cannot split is the scenario's fault, a process
    /// that cannot run conform's.
    fn split_words(&self, line: &str) -> Result<Vec<String>, StepError> {
        // `eval "set -- $1"` makes sh split (and expand) the line exactly as `sh -c` would,
        // without running it; the words come back NUL-separated.
        let script = "eval \"set -- $1\" && printf '%s\\0' \"$@\"";
        let argv = [exec::SHELL, "-c", script, "sh", line].map(OsString::from).to_vec();
        let mut inv =
            Invocation::new(Program::Argv(argv), self.base_env.clone(), self.work.clone());
        inv.timeout = Duration::from_secs(10);
        stop::gate()?;
        let outcome = exec::run(&inv)?;
        if outcome.termination != Termination::Exited(0) {
            return Err(StepError::Scenario(format!(
                "sh could not split `{line}` into words: {}",
                String::from_utf8_lossy(&outcome.stderr.bytes).trim()
            )));
        }
        let text = String::from_utf8_lossy(&outcome.stdout.bytes).into_owned();
        Ok(text.split_terminator('\0').map(str::to_owned).collect())
    }

    fn calibrated(&self) -> Result<(&Value, &Path), String> {
        let role = self.current_role.as_deref().or(self.scenario.primary_role());
        match (&self.calibration, role) {
            (Some(c), Some(r)) if c.role == r => Ok((&c.response, c.sandbox_root.as_path())),
            (Some(_), Some(r)) => {
                // A scenario compares with its primary role only; another role's calibration is
                // computed on demand.
                Err(format!(
                    "no calibration of role `{r}` in this scenario (only its first role is calibrated)"
                ))
            }
            _ => Err("the scenario has no calibrated role".into()),
        }
    }

    /// Judges one observation against `expect`, with what its checks need resolved first.
    fn check_one(&self, expect: &Expect, obs: &Observation) -> Vec<Finding> {
        let mut resolved = Resolved::new(
            expect,
            obs,
            |t| self.text(t),
            |d| self.duration(d),
            |l| self.shell_words(l),
            |w, naming| {
                let path = self.base_env.get(std::ffi::OsStr::new("PATH"));
                checks::locate_program(w, naming, &self.work, path.map(OsString::as_os_str))
            },
        );
        resolved.manifest_command = self.ran_manifest_command(obs);
        resolved.redact = self.role_redact();
        resolved.declared_exits = self.declared_exits(obs);
        let ctx = resolved.context(&self.observations, &self.last, self.calibrated());
        checks::check_one(expect, obs, &ctx)
    }
}

impl ScenarioState<'_> {
    /// The `redact` pointers of the role the step being judged ran (else the primary role).
    fn role_redact(&self) -> Vec<String> {
        let role = self.current_role.as_deref().or(self.scenario.primary_role());
        let role = role.and_then(|r| self.subject.profile.role(r));
        role.map(|r| r.redact.clone()).unwrap_or_default()
    }

    /// The codes of the effective exit-code table of the command the observation invoked.
    fn declared_exits(&self, obs: &Observation) -> Option<std::collections::BTreeSet<i32>> {
        let words: Vec<String> = match &obs.record.repro.command {
            ReproCommand::Argv(argv) => {
                let tool = self.subject.tool.argv_at(&self.subject.tool.path).len();
                argv.iter().skip(tool).cloned().collect()
            }
            ReproCommand::Shell(line) => line.split_ascii_whitespace().map(str::to_owned).collect(),
        };
        let commands = &self.subject.commands;
        (0..words.len()).find_map(|start| {
            commands.command_for_args(&words[start..]).map(|(_, info)| info.exit_codes.clone())
        })
    }

    /// Whether the observation ran the tool with exactly the manifest command's arguments.
    fn ran_manifest_command(&self, obs: &Observation) -> bool {
        let ReproCommand::Argv(argv) = &obs.record.repro.command else { return false };
        let tool = self.subject.tool.argv_at(&self.subject.tool.path).len();
        argv.get(tool..).is_some_and(|words| words == self.subject.profile.manifest_args())
    }

    fn var_text(&self, var: &Var) -> Option<String> {
        match var {
            Var::Calibration(name) if name == CONSTANT_SLACK => Some(millis(SLACK).to_string()),
            Var::Calibration(name) if name == IDLE_TIMEOUT => {
                self.limits.idle_timeout.map(|d| millis(d).to_string())
            }
            Var::Calibration(name) if name == MAX_LIFETIME => {
                self.limits.max_lifetime.map(|d| millis(d).to_string())
            }
            Var::Calibration(name) if name == STARTUP => {
                Some(millis(self.subject.startup).to_string())
            }
            Var::Calibration(name) => {
                self.calibration.as_ref()?.var(name).map(|d| millis(d).to_string())
            }
            Var::Builtin(name) => Some(match name.as_str() {
                "sandbox" => self.sandbox_root.display().to_string(),
                "work" => self.work.display().to_string(),
                "tool" => self.subject.tool.path.display().to_string(),
                "input" => self.input.clone()?,
                _ => return None,
            }),
            Var::StepValue { step, pointer } => {
                let v = self.last_of(step)?.response()?.pointer(pointer)?;
                Some(match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
            }
        }
    }

    fn record(
        &mut self,
        step: &str,
        name: String,
        inv: &Invocation,
        outcome: exec::Outcome,
    ) -> usize {
        let json = observe::parse_stdout(&outcome);
        let hold = self.hold_of(inv);
        let path = self.invoked(inv).map(|(_, _, path)| path);
        let repro = Repro::from_invocation(inv, &self.base_env);
        let mut record = StepRecord::from_exec(name, repro, &outcome, json.as_ref().ok());
        record.started_ms = Some(millis(outcome.started.saturating_duration_since(self.origin)));
        if let Some(hold) = &hold {
            record.budget_ms = hold.budget().map(millis);
            record.may_hold_ms = Some(millis(hold.bound(self.subject.startup)));
        }
        self.observations.push(Observation {
            record,
            outcome,
            json,
            sandbox_root: self.sandbox_root.clone(),
        });
        let i = self.observations.len() - 1;
        if let Some(hold) = hold {
            self.holds.insert(i, hold);
        }
        if let Some(path) = path {
            self.paths.insert(i, path);
        }
        self.last.insert(step.to_owned(), i);
        self.step_observations.entry(step.to_owned()).or_default().push(i);
        i
    }

    /// A stream's response is its terminal line, not stdout as one document.
    fn take_stream_response(&mut self, i: usize) {
        let obs = &mut self.observations[i];
        let parsed = crate::stream::parse(&obs.outcome.stdout.bytes);
        obs.json = match parsed.terminal {
            Some((_, terminal)) => Ok(terminal),
            None => Err(StdoutProblem::NoStreamTerminal),
        };
        obs.record.envelope = obs.json.as_ref().ok().cloned();
    }

    fn limit(&self, expr: Option<&str>) -> Result<Duration, String> {
        match expr {
            Some(e) => self.duration(e),
            None => Ok(match &self.calibration {
                Some(c) => (c.duration * 3 + Duration::from_secs(30)).max(DEFAULT_STEP_LIMIT),
                None => DEFAULT_STEP_LIMIT,
            }),
        }
    }

    /// Runs one step: its findings (empty when it passed), or why it stopped short of them
    /// ([`Stop`]). A step that runs no process of the tool leaves an [`ActionRecord`] for the
    /// timeline.
    fn run_step(&mut self, step: &Step) -> StepResult {
        let began = Instant::now();
        self.started.insert(step.name().to_owned(), began);
        let mut detail = String::new();
        let ran = self.run_step_at(step, &mut detail);
        let kind = match step {
            Step::Sleep(_) => Some(ActionKind::Sleep),
            Step::KillWorker(_) => Some(ActionKind::KillWorker),
            Step::Shell(_) => Some(ActionKind::Shell),
            Step::Verify(_) => Some(ActionKind::Verify),
            Step::NoProcesses(_) => Some(ActionKind::NoProcesses),
            Step::ElapsedSince(_) => Some(ActionKind::ElapsedSince),
            Step::Run(_) | Step::Continue(_) | Step::Cancel(_) => None,
        };
        if let Some(action) = kind {
            self.actions.push(ActionRecord {
                step: step.name().to_owned(),
                action,
                started_ms: millis(began.saturating_duration_since(self.origin)),
                elapsed_ms: millis(began.elapsed()),
                detail,
            });
        }
        ran
    }

    /// [`Self::run_step`]'s work; `detail` says in a few words what a step that runs no
    /// process of the tool did.
    fn run_step_at(&mut self, step: &Step, detail: &mut String) -> StepResult {
        match step {
            Step::Run(r) => self.run_tool(r),
            Step::Continue(c) => self.run_continue(c),
            Step::Cancel(c) => self.run_cancel(c),
            Step::KillWorker(k) => {
                let signal = signal_by_name(k.signal.as_deref().unwrap_or("KILL"))?;
                let found = sandbox::scan(&self.marker);
                if found.is_empty() {
                    return Ok(vec![
                        Finding::new(
                            FindingKind::KillWorker,
                            "no detached worker carrying the sandbox marker was found",
                        )
                        .expected("a background worker process running the job")
                        .actual("no marked process")
                        .at_step(k.name.clone()),
                    ]);
                }
                for p in &found {
                    let _ = nix::sys::signal::kill(Pid::from_raw(p.pid as i32), signal);
                }
                let pids: Vec<String> = found.iter().map(|p| p.pid.to_string()).collect();
                *detail = format!(
                    "{} to {} process(es) of the sandbox: {}",
                    signal.as_str(),
                    found.len(),
                    pids.join(", ")
                );
                // Let the kill land before the next step looks at the job.
                std::thread::sleep(Duration::from_millis(200));
                Ok(Vec::new())
            }
            Step::Sleep(s) => {
                let pause = self.duration(&s.duration)?;
                *detail = format!("waited {} ms", millis(pause));
                std::thread::sleep(pause);
                Ok(Vec::new())
            }
            Step::Shell(s) => {
                *detail = self.text(&s.command).unwrap_or_else(|_| s.command.clone());
                self.run_shell(s)
            }
            Step::Verify(v) => {
                *detail = "the role's effect oracle (`verify`)".to_owned();
                self.run_verify(v)
            }
            Step::NoProcesses(s) => {
                *detail = "waited for the sandbox's processes to end".to_owned();
                self.run_no_processes(s)
            }
            Step::ElapsedSince(s) => {
                *detail = format!("the time since step `{}` began", s.since);
                self.run_elapsed_since(s)
            }
        }
    }

    /// `action = "verify"`: the primary role's `verify` command, run in the sandbox now, must
    /// print what it printed after the uninterrupted calibration run: the work left the same
    /// observable state (no unit committed twice or lost). With `same_as` it must answer what
    /// that earlier verify step's oracle answered (the state did not move since), with
    /// `unlike_calibrated` otherwise than the calibration (the work did not leave its whole
    /// effect); a failing oracle answers its failure then. A role without `verify` has no
    /// oracle, and the step judges nothing.
    fn run_verify(&mut self, v: &VerifyStep) -> StepResult {
        let Some(role) = self.scenario.primary_role() else { return Ok(Vec::new()) };
        let Some(line) = self.subject.profile.role(role).and_then(|r| r.verify.clone()) else {
            return Ok(Vec::new());
        };
        let Some(calibrated) = self.calibration.as_ref().and_then(|c| c.effect.clone()) else {
            return Err(format!("role `{role}` has `verify` but its calibration ran none").into());
        };
        let calibrated = calibrated
            .map_err(|why| format!("role `{role}`'s verify after the calibration run: {why}"))?;
        stop::gate()?;
        let now = calibrate::effect_of(&line, &self.base_env, &self.work);
        self.effects.insert(v.name.clone(), now.clone());
        // A signal that lands after the work's last commit and before its response leaves the
        // work done with no response that says so (an exit of 130, 143 or 137). The oracle read
        // right after the signalled step then answers the uninterrupted effect: that is where
        // the work ended, and the identical invocation after it may legally start afresh.
        if let Some(step) = &v.when_ended
            && self.scenario.signals(step)
            && now.as_ref() == Ok(&calibrated)
        {
            self.ended_unseen.insert(step.clone());
        }
        let ended = |step: &String| self.ended_the_work(step);
        // Identical copies started at once: one may end the work while another, waiting its
        // turn, then starts afresh, as the identical invocation after completion does
        // (docs/contract.md §6). The state read after them is then no one run's: a writer
        // without an idempotency key may legally have written again. Nothing is judged.
        if v.when_ended.as_ref().is_some_and(|step| !ended(step) || self.scenario.runs_copies(step))
            || v.unless_ended.iter().any(ended)
        {
            return Ok(Vec::new());
        }
        let shown = |answer: &Result<String, String>| match answer {
            Ok(out) => out.clone(),
            Err(why) => format!("(`verify` failed: {why})"),
        };
        let finding = |message: String, expected: String| {
            Finding::new(FindingKind::Effect, message)
                .expected(expected)
                .actual(shown(&now))
                .at_step(v.name.clone())
        };
        let mut findings = Vec::new();
        if let Some(other) = &v.same_as {
            let before = self
                .effects
                .get(other)
                .cloned()
                .unwrap_or_else(|| Err(format!("step `{other}` ran no oracle")));
            if before != now {
                findings.push(finding(
                    format!("the state moved after step `{other}`: `{line}` answers otherwise now"),
                    shown(&before),
                ));
            }
        }
        if v.unlike_calibrated == Some(true) && now.as_ref() == Ok(&calibrated) {
            findings.push(finding(
                format!(
                    "the work left the whole effect of the uninterrupted run: `{line}` printed what it printed after it"
                ),
                format!("anything but {calibrated}"),
            ));
        }
        if v.compares_with_calibration() {
            match &now {
                Ok(out) if *out == calibrated => {}
                Ok(_) => findings.push(finding(
                    format!(
                        "the work left another state than the uninterrupted run: `{line}` printed otherwise"
                    ),
                    calibrated.clone(),
                )),
                Err(_) => findings.push(finding(
                    format!("`{line}` failed after the work"),
                    calibrated.clone(),
                )),
            }
        }
        Ok(findings)
    }

    /// Whether `step` ended the work: a response of it exited as the uninterrupted
    /// calibration run did, and not INCOMPLETE, or it was signalled and the oracle read right
    /// after it answered the uninterrupted effect (`ended_unseen`).
    fn ended_the_work(&self, step: &str) -> bool {
        if self.ended_unseen.contains(step) {
            return true;
        }
        let Some(calibrated) = self.calibration.as_ref().map(|c| c.exit_code) else {
            return false;
        };
        self.step_observations.get(step).is_some_and(|seen| {
            seen.iter().any(|&i| {
                let exit = self.observations[i].exit_code();
                exit == Some(calibrated) && exit != Some(INCOMPLETE)
            })
        })
    }

    /// `action = "shell"`: the command line with `sh -c` in the working directory, with the
    /// sandbox's environment; it must exit 0.
    fn run_shell(&mut self, s: &ShellCommandStep) -> StepResult {
        let line = self.text(&s.command)?;
        let mut inv =
            Invocation::new(Program::Shell(line.clone()), self.base_env.clone(), self.work.clone());
        inv.timeout = SETUP_LIMIT;
        stop::gate()?;
        let outcome = exec::run(&inv)?;
        if outcome.termination == Termination::Exited(0) {
            return Ok(Vec::new());
        }
        Ok(vec![
            Finding::new(FindingKind::Shell, format!("the command line `{line}` failed"))
                .expected("exit 0")
                .actual(format!(
                    "{:?}: {}",
                    outcome.termination,
                    String::from_utf8_lossy(&outcome.stderr.bytes).trim()
                ))
                .at_step(s.name.clone()),
        ])
    }

    /// [`Self::judge`], after the step's `applies_when` ([`Self::shows_other_choice`]) and
    /// `premise` ([`Self::misses_premise`]); `from` is the step whose job a cancel step stops.
    fn judge_step(
        &mut self,
        step: &str,
        conditions: Conditions<'_>,
        expect: &Expect,
        indices: &[usize],
        from: Option<&str>,
    ) -> StepResult {
        // No premise excuses a call that held its caller past its bound.
        let held: Vec<Finding> = indices.iter().filter_map(|&i| self.held_too_long(i)).collect();
        if !held.is_empty() {
            return Ok(held);
        }
        let Some(&last) = indices.last() else { return Ok(self.judge(step, expect, indices)) };
        if let Some(choice) = self.shows_other_choice(step, conditions.applies_when, last) {
            return Err(Stop::Skip(choice));
        }
        match self.misses_premise(step, conditions.premise, last, from) {
            Premise::Met => Ok(self.judge(step, expect, indices)),
            Premise::MissedLegally(reason) => Err(Stop::Skip(reason)),
            Premise::MissedIllegally(mut findings) => {
                let mut judged = self.judge(step, expect, indices);
                judged.append(&mut findings);
                Ok(judged)
            }
        }
    }

    /// When observation `i` shows a choice the spec leaves to the tool that the criterion
    /// does not apply to (the step's `applies_when` does not hold), the skip that says so: the
    /// scenario stops, not applicable to that choice ([`SkipReason::ToolsChoice`]).
    fn shows_other_choice(
        &self,
        step: &str,
        applies_when: Option<&Expect>,
        i: usize,
    ) -> Option<SkipReason> {
        let condition = applies_when?;
        let missed = self.check_one(condition, &self.observations[i]).into_iter().next()?;
        let why = match &missed.actual {
            Some(actual) => format!("{}; saw {actual}", missed.message),
            None => missed.message,
        };
        Some(SkipReason::ToolsChoice { step: step.to_owned(), why })
    }

    /// Whether observation `i` met the step's `premise`. A miss skips the scenario
    /// ([`SkipReason::PremiseNotMet`], naming the first unmet check) only when the tool behaved
    /// legally: a premise waits for something the tool may legally not show on a loaded
    /// machine (a job still running, progress before a hand-off), never for what the
    /// criterion requires. So when the job ended instead, that ending must be the work's own
    /// (the calibrated response, read from the call itself or, after a refused cancel, from
    /// `job status`); otherwise the miss is judged as a failure with those findings.
    fn misses_premise(
        &mut self,
        step: &str,
        premise: Option<&Expect>,
        i: usize,
        from: Option<&str>,
    ) -> Premise {
        let Some(premise) = premise else { return Premise::Met };
        let Some(missed) = self.check_one(premise, &self.observations[i]).into_iter().next() else {
            return Premise::Met;
        };
        // A call conform killed at its limit did not end by itself: no legal miss, whatever
        // the premise waited for (a tool that ignores its lifetime would otherwise be skipped
        // for running on). The step's own checks report the kill.
        if missed.check == FindingKind::Timeout {
            return Premise::MissedIllegally(Vec::new());
        }
        let illegal = match from {
            Some(origin) => self.cancelled_job_ended_on_its_own(step, origin),
            None if self.observations[i].exit_code() != Some(INCOMPLETE) => {
                self.ended_as_calibrated(i)
            }
            None => Vec::new(),
        };
        if !illegal.is_empty() {
            return Premise::MissedIllegally(illegal);
        }
        let why = match &missed.actual {
            Some(actual) => format!("{}; saw {actual}", missed.message),
            None => missed.message,
        };
        Premise::MissedLegally(SkipReason::PremiseNotMet { step: step.to_owned(), why })
    }

    /// Findings when observation `i`, a response that ended the job, is not the ending the
    /// work gives uninterrupted (none when the scenario has no calibration to compare with).
    fn ended_as_calibrated(&self, i: usize) -> Vec<Finding> {
        if self.calibrated().is_err() {
            return Vec::new();
        }
        let expect = Expect { matches_calibrated: Some(true), ..Expect::default() };
        self.check_one(&expect, &self.observations[i])
    }

    /// After a cancel of `origin`'s job was refused: findings when the job had not ended on
    /// its own, as `job status` (run now, and recorded) tells: it still runs, or it ended
    /// otherwise than the uninterrupted work.
    fn cancelled_job_ended_on_its_own(&mut self, step: &str, origin: &str) -> Vec<Finding> {
        let Some(id) = self.last_of(origin).and_then(|o| o.str_at("/data/job_id")) else {
            return Vec::new();
        };
        let mut argv = self.subject.tool.argv();
        argv.extend(["job".to_owned(), "status".to_owned(), id.to_owned()]);
        let env = self.step_env.get(origin).cloned().unwrap_or_else(|| self.base_env.clone());
        let mut inv = Invocation::new(
            Program::Argv(argv.iter().map(OsString::from).collect()),
            env,
            self.work.clone(),
        );
        inv.timeout = DEFAULT_STEP_LIMIT;
        let Ok(outcome) = stop::gate().and_then(|()| Ok(exec::run(&inv)?)) else {
            return Vec::new();
        };
        let status_step = format!("{step}-status");
        let i = self.record(&status_step, status_step.clone(), &inv, outcome);
        if self.observations[i].exit_code() == Some(INCOMPLETE) {
            return vec![
                Finding::new(
                    FindingKind::ExitCode,
                    "job cancel was refused as if the job had ended, but job status says it still runs",
                )
                .expected("the job stopped by the cancel (REQ-F-081), or a job that had ended")
                .actual("job status exits 14: running")
                .at_step(status_step),
            ];
        }
        self.ended_as_calibrated(i)
    }

    /// Adds an advisory note, once.
    fn note_once(&mut self, note: Note) {
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
    }

    fn judge(&mut self, step: &str, expect: &Expect, indices: &[usize]) -> Vec<Finding> {
        let mut findings = Vec::new();
        let mut notes = Vec::new();
        // A step of several probes or copies compared with a step of as many: each with the
        // one of the same rank (the same probe), not all with that step's last.
        let paired = expect.same_response_as.as_ref().and_then(|other| {
            let theirs = self.step_observations.get(other)?;
            (indices.len() > 1 && theirs.len() == indices.len()).then_some((other, theirs))
        });
        let unpaired;
        let expect_one = match paired {
            Some(_) => {
                unpaired = Expect { same_response_as: None, ..expect.clone() };
                &unpaired
            }
            None => expect,
        };
        for (rank, &i) in indices.iter().enumerate() {
            let obs = &self.observations[i];
            findings.extend(self.check_one(expect_one, obs));
            if expect.envelope == Some(EnvelopeRule::OrBareManifest)
                && self.ran_manifest_command(obs)
                && obs
                    .response()
                    .is_some_and(|r| r.get("ok").is_none() && r.get("commands").is_some())
            {
                notes.push(Note::Advisory(BARE_MANIFEST_NOTE.to_owned()));
            }
            notes.extend(newer_manifest_note(expect, obs));
            if let Some((other, theirs)) = paired {
                let theirs = theirs.get(rank).and_then(|&t| self.observations.get(t));
                let finding = match obs.response() {
                    Some(response) => {
                        checks::same_response(obs, response, other, theirs, &self.role_redact())
                    }
                    None => {
                        Some(Finding::new(FindingKind::SameResponse, "no JSON response to compare"))
                    }
                };
                findings.extend(finding.map(|f| f.at_step(obs.record.name.clone())));
            }
        }
        // An explicit bound on the step's time says at least as much as the call's own.
        if expect.elapsed_max.is_none() {
            findings.extend(indices.iter().filter_map(|&i| self.held_too_long(i)));
        }
        let all: Vec<&Observation> = indices.iter().map(|&i| &self.observations[i]).collect();
        let facts = self.step_facts(step, expect, indices);
        findings.extend(checks::check_all(expect, step, &all, &facts));
        for note in notes {
            self.note_once(note);
        }
        findings
    }

    /// What the step checks need beside the observations: the commands whose INCOMPLETE entry
    /// the step's responses may copy (its role's command, or the one its arguments invoke; a
    /// continuation's hops answer for its origin's role).
    fn step_facts(&self, step: &str, expect: &Expect, indices: &[usize]) -> checks::StepFacts {
        // Which responses `job wait` / `job status` gave: they relay the job's stored ending.
        let relayed = indices
            .iter()
            .enumerate()
            .filter(|(_, i)| {
                self.paths.get(i).is_some_and(|p| p == "job.wait" || p == "job.status")
            })
            .map(|(rank, _)| rank)
            .collect();
        let durations: BTreeMap<String, Result<Duration, String>> =
            expect.durations().into_iter().map(|d| (d.to_owned(), self.duration(d))).collect();
        if expect.retryable_as_declared != Some(true) {
            return checks::StepFacts { relayed, durations, ..checks::StepFacts::default() };
        }
        let profile = &self.subject.profile;
        let argv_of = |role: &str| profile.role(role).map(|r| r.argv.clone());
        let role_argv = self.step_role.get(step).cloned().flatten().and_then(|r| argv_of(&r));
        let definition = self.scenario.steps.iter().find(|s| s.name() == step);
        let argv = match (definition, role_argv) {
            (_, Some(argv)) => argv,
            (Some(Step::Run(r)), None) => {
                r.args.iter().map(|a| self.text(a).unwrap_or_else(|_| a.clone())).collect()
            }
            _ => Vec::new(),
        };
        let primary = self.scenario.primary_role().and_then(argv_of);
        let continued = matches!(definition, Some(Step::Continue(_)));
        let incomplete_entries =
            checks::declared_entries(&self.subject.commands, &argv, primary.as_deref(), continued);
        checks::StepFacts { incomplete_entries, relayed, durations, ..checks::StepFacts::default() }
    }
}
