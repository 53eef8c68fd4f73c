//! Stage: run. Executes scenarios: one sandbox each, steps in order, checks after each step,
//! then the clean-up that makes leaks visible; `-j N` scenarios at once on plain threads
//! pulling from one queue.
//!
//! After the steps (whether they passed or not), conform cancels every job it saw (each
//! `data.cancel_command` of an INCOMPLETE response; `TOOL job cancel <id>` for a job id seen
//! without one, when the manifest has `job.cancel`), gives the tool [`CLEANUP_GRACE`] to let its
//! workers stop, then sweeps the sandbox: a process still carrying the sandbox marker is a
//! `leaked-process` finding, and is killed. A scenario stops at its first step with a finding:
//! later steps build on earlier ones and would only repeat the news.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::killpg;
use nix::unistd::Pid;
use serde_json::Value;

use crate::calibrate::{Calibration, Calibrator, SLACK};
use crate::checks::{self, Resolved};
use crate::discover::Commands;
use crate::event::{Event, EventSender};
use crate::exec::{self, Invocation, Program, StdinMode, Termination};
use crate::interrupt::Registration;
use crate::observe::{self, Observation, StdoutProblem};
use crate::outcome::{Finding, Repro, ScenarioResult, Status, StepRecord, millis};
use crate::plan::Planned;
use crate::profile::{Profile, Role, StreamProbe};
use crate::sandbox::{self, Sandbox};
use crate::scenario::{
    CONSTANT_SLACK, Expect, ProbeKind, RunStep, Scenario, ShellCommandStep, ShellStep, StdinKind,
    Step, Var, eval_duration, signal_by_name, walk_template,
};

/// How long workers get to stop after their jobs were cancelled, before the sweep.
pub const CLEANUP_GRACE: Duration = Duration::from_secs(5);
/// Bound on `TOOL manifest` at discovery (a manifest that takes longer is broken anyway).
pub const DISCOVERY_LIMIT: Duration = Duration::from_secs(10);
/// Default bound on a step without calibration.
pub const DEFAULT_STEP_LIMIT: Duration = Duration::from_secs(30);
/// Bound on a calibration run.
pub const CALIBRATION_LIMIT: Duration = Duration::from_secs(600);
/// Bound on a setup command.
pub const SETUP_LIMIT: Duration = Duration::from_secs(120);

/// The variable that gives setup commands (of roles and kit probes) the tool's path, so a
/// setup can prepare state with the tool itself (`"$CONFORM_TOOL" migrate --db shop.db`).
pub const TOOL_ENV: &str = "CONFORM_TOOL";
/// The tool's exit code INCOMPLETE (CONTRACT §1): the work goes on, run `continue_command`.
pub const INCOMPLETE: i32 = 14;
/// Default hop limit of a continue loop.
pub const DEFAULT_MAX_HOPS: u32 = 100;

/// A sandbox registered for clean-up should conform itself be interrupted (see
/// [`crate::interrupt`]); it derefs to the sandbox.
struct Guarded {
    sandbox: Sandbox,
    _registration: Registration,
}

impl std::ops::Deref for Guarded {
    type Target = Sandbox;
    fn deref(&self) -> &Sandbox {
        &self.sandbox
    }
}

impl std::ops::DerefMut for Guarded {
    fn deref_mut(&mut self) -> &mut Sandbox {
        &mut self.sandbox
    }
}

/// What happens to each result before it is reported: `(result, sandbox root if it ran)`.
pub type Finisher<'a> = dyn Fn(&mut ScenarioResult, Option<&Path>) + Sync + 'a;

/// Everything the scenarios of one run share.
pub struct Engine {
    /// The tool under test (absolute when it was given as a path).
    pub tool: PathBuf,
    /// Arguments before every other argument of every invocation of the tool (the rest of the
    /// profile's `[tool] command`, when the tool came from there).
    pub leading_args: Vec<String>,
    /// The profile (possibly empty).
    pub profile: Profile,
    /// The commands the manifest declares (empty when it could not be read).
    pub commands: Commands,
    /// Role calibrations, computed once.
    pub calibrator: Calibrator,
    /// Keep sandbox directories (`--keep-sandboxes`).
    pub keep_sandboxes: bool,
}

impl Engine {
    /// An engine for this tool and profile; reads the manifest once.
    pub fn new(tool: PathBuf, profile: Profile, keep_sandboxes: bool) -> Self {
        Self::with_command(tool, Vec::new(), profile, keep_sandboxes)
    }

    /// An engine whose every invocation of the tool starts with `leading_args` (the profile's
    /// `[tool] command` after its first element); reads the manifest once.
    pub fn with_command(
        tool: PathBuf,
        leading_args: Vec<String>,
        profile: Profile,
        keep_sandboxes: bool,
    ) -> Self {
        let mut engine = Engine {
            tool,
            leading_args,
            profile,
            commands: Commands::default(),
            calibrator: Calibrator::new(),
            keep_sandboxes,
        };
        engine.commands = engine.discover();
        engine
    }

    fn discover(&self) -> Commands {
        // Only scenario and calibration sandboxes are worth keeping for a look.
        let Ok(sandbox) = self.sandbox_for(&[], &[], false, false) else {
            return Commands::default();
        };
        let mut argv = self.tool_argv(&self.tool);
        match &self.profile.file.kit.manifest {
            Some(args) => argv.extend(args.iter().cloned()),
            None => argv.push("manifest".to_owned()),
        }
        let mut inv =
            sandbox.invocation(Program::Argv(argv.into_iter().map(OsString::from).collect()));
        inv.timeout = DISCOVERY_LIMIT;
        match exec::run(&inv).ok().and_then(|o| observe::parse_stdout(&o).ok()) {
            Some(response) => Commands::from_manifest(&response),
            None => Commands::default(),
        }
    }

    /// The tool and the leading arguments of every invocation of it.
    fn tool_argv(&self, tool: &Path) -> Vec<String> {
        let mut argv = vec![tool.display().to_string()];
        argv.extend(self.leading_args.iter().cloned());
        argv
    }

    /// A sandbox prepared for these roles and kit probes: tool env, fixtures copied, setup run;
    /// `keep` keeps its directory afterwards.
    fn sandbox_for(
        &self,
        roles: &[&str],
        probes: &[ProbeKind],
        argument_order: bool,
        keep: bool,
    ) -> Result<Guarded, String> {
        crate::interrupt::gate()?;
        let mut sandbox = Sandbox::new().map_err(|e| e.to_string())?;
        if keep {
            sandbox.keep();
        }
        let registration =
            Registration::new(sandbox.marker(), (!keep).then(|| sandbox.root().to_path_buf()));
        let mut sandbox = Guarded { sandbox, _registration: registration };
        let tool_env = self.tool_for_setup(&sandbox)?;
        for (k, v) in &self.profile.file.tool.env {
            sandbox.set_env(k, v);
        }
        for name in roles {
            let Some(role) = self.profile.role(name) else { continue };
            for fixture in &role.fixtures {
                let source = self.profile.fixture_path(fixture);
                let dest = Path::new(fixture).file_name().map(PathBuf::from).unwrap_or_default();
                sandbox
                    .copy_in(&source, &dest)
                    .map_err(|e| format!("role `{name}`: fixture `{fixture}`: {e}"))?;
            }
        }
        for name in roles {
            let Some(role) = self.profile.role(name) else { continue };
            let mut setup_env = Vec::new();
            for (k, v) in &role.env {
                setup_env.push((k.clone(), v.clone()));
            }
            for line in &role.setup {
                // Setup sees the role's environment too (e.g. a pacing knob or a database path).
                let mut inv = sandbox.invocation(Program::Shell(line.clone()));
                inv.timeout = SETUP_LIMIT;
                inv.env.insert(TOOL_ENV.into(), tool_env.clone().into());
                for (k, v) in &setup_env {
                    inv.env.insert(k.into(), v.into());
                }
                crate::interrupt::gate()?;
                let outcome = exec::run(&inv).map_err(|e| format!("role `{name}` setup: {e}"))?;
                if outcome.termination != Termination::Exited(0) {
                    return Err(format!(
                        "role `{name}`: setup command `{line}` failed ({:?}): {}",
                        outcome.termination,
                        String::from_utf8_lossy(&outcome.stderr.bytes).trim()
                    ));
                }
            }
        }
        self.prepare_kit(&sandbox, probes, argument_order, &tool_env)?;
        Ok(sandbox)
    }

    /// What setup lines find in `CONFORM_TOOL`: the tool itself, or, when the profile's command
    /// has leading arguments (`["python3", "cli.py"]`), a small script in the sandbox (outside
    /// the working directory) that runs the whole command, so `"$CONFORM_TOOL" migrate` works
    /// either way.
    fn tool_for_setup(&self, sandbox: &Guarded) -> Result<PathBuf, String> {
        if self.leading_args.is_empty() {
            return Ok(self.tool.clone());
        }
        let words: Vec<String> =
            self.tool_argv(&self.tool).iter().map(|w| crate::outcome::shell_quote(w)).collect();
        let script = sandbox.root().join("conform-tool");
        let body = format!("#!/bin/sh\nexec {} \"$@\"\n", words.join(" "));
        let written = std::fs::write(&script, body).and_then(|()| {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
        });
        written.map_err(|e| format!("writing {}: {e}", script.display()))?;
        Ok(script)
    }

    /// The kit's fixtures and setup, then each destructive probe's when destructive probes run,
    /// each stream probe's when stream probes run, and `[kit.argument_order]`'s when it is used.
    fn prepare_kit(
        &self,
        sandbox: &Guarded,
        probes: &[ProbeKind],
        argument_order: bool,
        tool_env: &Path,
    ) -> Result<(), String> {
        if probes.is_empty() && !argument_order {
            return Ok(());
        }
        let kit = &self.profile.file.kit;
        let mut parts = vec![("`[kit]`".to_owned(), &kit.fixtures, &kit.setup)];
        if probes
            .iter()
            .any(|k| matches!(k, ProbeKind::Destructive | ProbeKind::DestructivePreview))
        {
            for (n, probe) in kit.destructive.iter().enumerate() {
                parts.push((format!("destructive probe {}", n + 1), &probe.fixtures, &probe.setup));
            }
        }
        if probes.iter().any(|k| matches!(k, ProbeKind::Stream | ProbeKind::StreamSignal)) {
            for (n, probe) in kit.stream.iter().enumerate() {
                parts.push((format!("stream probe {}", n + 1), &probe.fixtures, &probe.setup));
            }
        }
        if argument_order && let Some(order) = &kit.argument_order {
            parts.push(("`[kit.argument_order]`".to_owned(), &order.fixtures, &order.setup));
        }
        for (owner, fixtures, _) in &parts {
            for fixture in fixtures.iter() {
                let source = self.profile.fixture_path(fixture);
                let dest = Path::new(fixture).file_name().map(PathBuf::from).unwrap_or_default();
                sandbox
                    .copy_in(&source, &dest)
                    .map_err(|e| format!("{owner}: fixture `{fixture}`: {e}"))?;
            }
        }
        for (owner, _, setup) in &parts {
            for line in setup.iter() {
                let mut inv = sandbox.invocation(Program::Shell(line.clone()));
                inv.timeout = SETUP_LIMIT;
                inv.env.insert(TOOL_ENV.into(), tool_env.into());
                crate::interrupt::gate()?;
                let outcome = exec::run(&inv).map_err(|e| format!("{owner} setup: {e}"))?;
                if outcome.termination != Termination::Exited(0) {
                    return Err(format!(
                        "{owner}: setup command `{line}` failed ({:?}): {}",
                        outcome.termination,
                        String::from_utf8_lossy(&outcome.stderr.bytes).trim()
                    ));
                }
            }
        }
        Ok(())
    }

    /// The calibration of a role (computed once per run).
    pub fn calibration(&self, role: &str) -> Result<Arc<Calibration>, String> {
        self.calibrator.get(role, || self.measure(role))
    }

    fn measure(&self, role_name: &str) -> Result<Calibration, String> {
        let role = self.profile.role(role_name).ok_or_else(|| format!("no role `{role_name}`"))?;
        let sandbox = self.sandbox_for(&[role_name], &[], false, self.keep_sandboxes)?;
        let mut argv = self.tool_argv(&self.tool);
        argv.extend(role.argv.iter().cloned());
        // A role whose command declares no interruption has no --budget flag (CONTRACT §2):
        // its plain run is its calibration.
        let interruptible =
            self.commands.command_for_args(&role.argv).is_none_or(|(_, info)| info.interruptible());
        if interruptible {
            argv.extend(["--budget".to_owned(), "0".to_owned()]);
        }
        let mut inv = sandbox.invocation(Program::Argv(argv.iter().map(OsString::from).collect()));
        for (k, v) in &role.env {
            inv.env.insert(k.into(), v.into());
        }
        inv.stdin = role_stdin(role);
        inv.timeout = CALIBRATION_LIMIT;
        crate::interrupt::gate()?;
        let outcome =
            exec::run(&inv).map_err(|e| format!("calibration of role `{role_name}`: {e}"))?;
        let Termination::Exited(exit_code) = outcome.termination else {
            return Err(format!(
                "calibration of role `{role_name}` (--budget 0) did not exit by itself: {:?}",
                outcome.termination
            ));
        };
        let response = observe::parse_stdout(&outcome).map_err(|p| {
            format!("calibration of role `{role_name}` (--budget 0) gave no JSON response: {p:?}")
        })?;
        // A role is work that succeeds; a failing one is a profile (or tool) problem that
        // would make every comparison meaningless.
        if exit_code != 0 {
            let detail = response
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("no error message");
            return Err(format!(
                "calibration of role `{role_name}` (--budget 0) exited {exit_code}: {detail}; check the role's argv, fixtures and setup"
            ));
        }
        Ok(Calibration {
            role: role_name.to_owned(),
            duration: outcome.elapsed,
            exit_code,
            response,
            sandbox_root: sandbox.root().to_path_buf(),
        })
    }

    /// The input file of a role (`{input}`): the first word of its argv that names a regular
    /// file in the sandbox's working directory once fixtures and setup are in place.
    fn input_of(&self, role: &str, work: &Path) -> Option<String> {
        let role = self.profile.role(role)?;
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
                        let (mut result, root) = match &p.skip {
                            Some(reason) => (skipped(p.scenario, reason.clone()), None),
                            None => {
                                events.send(Event::ScenarioStarted { id: p.scenario.id.clone() });
                                self.run_scenario_rooted(p.scenario)
                            }
                        };
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
                slot.into_inner().ok().flatten().unwrap_or_else(|| ScenarioResult {
                    status: Status::Error { message: "the scenario's worker thread failed".into() },
                    ..skipped(p.scenario, String::new())
                })
            })
            .collect()
    }

    /// Runs one scenario to its result (never panics on the tool's behaviour).
    pub fn run_scenario(&self, scenario: &Scenario) -> ScenarioResult {
        self.run_scenario_rooted(scenario).0
    }

    /// Runs one scenario; also returns the root of the sandbox it ran in (gone by now, but its
    /// path redacts the evidence), when it got that far.
    fn run_scenario_rooted(&self, scenario: &Scenario) -> (ScenarioResult, Option<PathBuf>) {
        let started = Instant::now();
        let mut result = skipped(scenario, String::new());
        let mut notes = Vec::new();
        let calibration = if scenario.needs_calibration() {
            let Some(role) = scenario.primary_role() else {
                result.status = Status::Error {
                    message: "scenario needs calibration but names no role".into(),
                };
                return (result, None);
            };
            match self.calibration(role) {
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
        let sandbox = match self.sandbox_for(&roles, &probes, uses_order, self.keep_sandboxes) {
            Ok(s) => s,
            Err(e) => {
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
                    result.status = Status::Skip {
                        reason: format!(
                            "no word of role `{role}`'s argv names a file in the sandbox, so the scenario cannot change its input"
                        ),
                    };
                    result.notes = notes;
                    result.duration_ms = millis(started.elapsed());
                    return (result, None);
                }
            },
            None => None,
        };
        let mut state = ScenarioState {
            engine: self,
            input,
            scenario,
            sandbox_root: sandbox.root().to_path_buf(),
            work: sandbox.work(),
            base_env: sandbox.env(),
            marker: sandbox.marker().to_owned(),
            calibration,
            observations: Vec::new(),
            last: BTreeMap::new(),
            step_observations: BTreeMap::new(),
            step_env: BTreeMap::new(),
            step_role: BTreeMap::new(),
            current_role: None,
        };
        let mut findings = Vec::new();
        let mut harness_error = None;
        for step in &scenario.steps {
            match state.run_step(step) {
                Ok(step_findings) => {
                    let failed = !step_findings.is_empty();
                    findings.extend(step_findings);
                    if failed {
                        break;
                    }
                }
                Err(e) => {
                    harness_error = Some(format!("step `{}`: {e}", step.name()));
                    break;
                }
            }
        }
        findings.extend(state.clean_up());
        for leak in sandbox.sweep() {
            findings.push(
                Finding::new(
                    "leaked-process",
                    format!(
                        "process {} still ran after the scenario and its cancels (killed now)",
                        leak.pid
                    ),
                )
                .expected("no process of the scenario left once its jobs are cancelled")
                .actual(leak.cmdline.join(" ")),
            );
        }
        result.steps = state.observations.iter().map(|o| o.record.clone()).collect();
        result.status = match (harness_error, findings.is_empty()) {
            (Some(message), _) => Status::Error { message },
            (None, true) => Status::Pass,
            (None, false) => Status::Fail,
        };
        result.findings = findings;
        result.notes = notes;
        result.duration_ms = millis(started.elapsed());
        let root = sandbox.root().to_path_buf();
        drop(sandbox);
        (result, Some(root))
    }
}

/// A result for a scenario that did not run.
fn skipped(s: &Scenario, reason: String) -> ScenarioResult {
    ScenarioResult {
        id: s.id.clone(),
        requirement: s.requirement.clone(),
        criterion: s.criterion.clone(),
        level: s.level,
        tags: s.tags.clone(),
        status: Status::Skip { reason },
        findings: Vec::new(),
        notes: Vec::new(),
        steps: Vec::new(),
        duration_ms: 0,
        baseline: None,
    }
}

/// The argument lists of the profile's kit probes of one kind (a preview appends the probe's
/// `dry_run_flag`).
pub fn probe_argvs(profile: &Profile, kind: ProbeKind) -> Vec<Vec<String>> {
    let kit = &profile.file.kit;
    match kind {
        ProbeKind::Read => kit.read.clone(),
        ProbeKind::Invalid => kit.invalid.clone(),
        ProbeKind::Destructive => kit.destructive.iter().map(|p| p.argv.clone()).collect(),
        ProbeKind::DestructivePreview => kit
            .destructive
            .iter()
            .map(|p| p.argv.iter().cloned().chain([p.dry_run_flag.clone()]).collect())
            .collect(),
        ProbeKind::Stream => kit.stream.iter().map(|p| p.argv.clone()).collect(),
        ProbeKind::StreamSignal => {
            kit.stream.iter().filter(|p| p.signal.is_some()).map(|p| p.argv.clone()).collect()
        }
    }
}

/// The stream probes a step of this kind runs (in order).
fn stream_probes(profile: &Profile, kind: ProbeKind) -> Vec<&StreamProbe> {
    let all = profile.file.kit.stream.iter();
    match kind {
        ProbeKind::Stream => all.collect(),
        ProbeKind::StreamSignal => all.filter(|p| p.signal.is_some()).collect(),
        _ => Vec::new(),
    }
}

/// How one invocation of a run step starts, beside what the step itself says.
#[derive(Debug, Default)]
struct Launch {
    /// Arguments between the tool and the step's `args` (a role's, a probe's, a placement's).
    prefix: Vec<String>,
    /// Numbers the observations of a step of several probes.
    rank: Option<usize>,
    /// The invocation comes from the profile's kit (a probe or the argument order): it may
    /// write, and runs under the kit's timeout.
    from_kit: bool,
    /// A stream probe's deadline, instead of any other limit.
    deadline: Option<Duration>,
    /// A stream probe's signal after so many lines.
    line_signal: Option<exec::LineSignal>,
}

fn role_stdin(role: &Role) -> StdinMode {
    match (&role.stdin_text, role.stdin) {
        (Some(text), _) => StdinMode::Bytes(text.clone().into_bytes()),
        (None, Some(kind)) => stdin_mode(kind),
        (None, None) => StdinMode::Closed,
    }
}

fn stdin_mode(kind: StdinKind) -> StdinMode {
    match kind {
        StdinKind::Closed => StdinMode::Closed,
        StdinKind::Open => StdinMode::OpenPipe,
        StdinKind::Pty => StdinMode::Pty,
    }
}

/// How a duration goes into `--budget` / `--timeout`: `0`, or milliseconds with their unit.
fn duration_arg(d: Duration) -> String {
    match millis(d) {
        0 => "0".to_owned(),
        ms => format!("{ms}ms"),
    }
}

struct ScenarioState<'e> {
    engine: &'e Engine,
    /// `{input}`: the primary role's input file, when the scenario uses it.
    input: Option<String>,
    scenario: &'e Scenario,
    sandbox_root: PathBuf,
    work: PathBuf,
    base_env: BTreeMap<OsString, OsString>,
    marker: String,
    calibration: Option<Arc<Calibration>>,
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
}

/// What the checks look at, resolved from the scenario's state before they run.
impl ScenarioState<'_> {
    fn duration(&self, expr: &str) -> Result<Duration, String> {
        eval_duration(expr, |name| match name {
            CONSTANT_SLACK => Some(SLACK),
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
        // `eval "set -- $1"` makes sh split (and expand) the line exactly as `sh -c` would,
        // without running it; the words come back NUL-separated.
        let script = "eval \"set -- $1\" && printf '%s\\0' \"$@\"";
        let argv = [exec::SHELL, "-c", script, "sh", line].map(OsString::from).to_vec();
        let mut inv =
            Invocation::new(Program::Argv(argv), self.base_env.clone(), self.work.clone());
        inv.timeout = Duration::from_secs(10);
        crate::interrupt::gate()?;
        let outcome = exec::run(&inv).map_err(|e| e.to_string())?;
        if outcome.termination != Termination::Exited(0) {
            return Err(format!(
                "sh could not split `{line}` into words: {}",
                String::from_utf8_lossy(&outcome.stderr.bytes).trim()
            ));
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
        let resolved = Resolved::new(
            expect,
            obs,
            |t| self.text(t),
            |d| self.duration(d),
            |l| self.shell_words(l),
        );
        let ctx = resolved.context(&self.observations, &self.last, self.calibrated());
        checks::check_one(expect, obs, &ctx)
    }
}

impl ScenarioState<'_> {
    fn var_text(&self, var: &Var) -> Option<String> {
        match var {
            Var::Calibration(name) if name == CONSTANT_SLACK => Some(millis(SLACK).to_string()),
            Var::Calibration(name) => {
                self.calibration.as_ref()?.var(name).map(|d| millis(d).to_string())
            }
            Var::Builtin(name) => Some(match name.as_str() {
                "sandbox" => self.sandbox_root.display().to_string(),
                "work" => self.work.display().to_string(),
                "tool" => self.engine.tool.display().to_string(),
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
        let repro = Repro::from_invocation(inv, &self.base_env);
        let record = StepRecord::from_exec(name, repro, &outcome, json.as_ref().ok().cloned());
        self.observations.push(Observation {
            record,
            outcome,
            json,
            sandbox_root: self.sandbox_root.clone(),
        });
        let i = self.observations.len() - 1;
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

    /// Runs one step; `Ok(findings)` (empty when it passed), `Err` for a harness fault.
    fn run_step(&mut self, step: &Step) -> Result<Vec<Finding>, String> {
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
                            "kill-worker",
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
                // Let the kill land before the next step looks at the job.
                std::thread::sleep(Duration::from_millis(200));
                Ok(Vec::new())
            }
            Step::Sleep(s) => {
                std::thread::sleep(self.duration(&s.duration)?);
                Ok(Vec::new())
            }
            Step::Shell(s) => self.run_shell(s),
        }
    }

    /// `action = "shell"`: the command line with `sh -c` in the working directory, with the
    /// sandbox's environment; it must exit 0.
    fn run_shell(&mut self, s: &ShellCommandStep) -> Result<Vec<Finding>, String> {
        let line = self.text(&s.command)?;
        let mut inv =
            Invocation::new(Program::Shell(line.clone()), self.base_env.clone(), self.work.clone());
        inv.timeout = SETUP_LIMIT;
        crate::interrupt::gate()?;
        let outcome = exec::run(&inv).map_err(|e| e.to_string())?;
        if outcome.termination == Termination::Exited(0) {
            return Ok(Vec::new());
        }
        Ok(vec![
            Finding::new("shell", format!("the command line `{line}` failed"))
                .expected("exit 0")
                .actual(format!(
                    "{:?}: {}",
                    outcome.termination,
                    String::from_utf8_lossy(&outcome.stderr.bytes).trim()
                ))
                .at_step(s.name.clone()),
        ])
    }

    fn run_tool(&mut self, r: &RunStep) -> Result<Vec<Finding>, String> {
        let profile = &self.engine.profile;
        if let Some(placement) = r.order {
            let order = profile.file.kit.argument_order.as_ref();
            let order = order.ok_or("the profile has no `[kit.argument_order]`")?;
            let prefix = placement.argv(order).ok_or_else(|| {
                format!("placement `{}` needs the profile's `positional`", placement.as_str())
            })?;
            let launch = Launch { prefix, from_kit: true, ..Launch::default() };
            let indices = self.invoke(r, launch)?;
            return Ok(self.judge(&r.name, &r.expect, &indices));
        }
        let Some(kind) = r.probe else {
            let prefix = match &r.role {
                Some(name) => {
                    let role = profile.role(name);
                    role.ok_or_else(|| format!("no role `{name}`"))?.argv.clone()
                }
                None => Vec::new(),
            };
            let indices = self.invoke(r, Launch { prefix, ..Launch::default() })?;
            return Ok(self.judge(&r.name, &r.expect, &indices));
        };
        if matches!(kind, ProbeKind::Stream | ProbeKind::StreamSignal) {
            return self.run_streams(r, kind);
        }
        let probes = probe_argvs(profile, kind);
        if probes.is_empty() {
            return Err(format!("the profile names no kit `{}` probes", kind.as_str()));
        }
        let mut indices = Vec::new();
        for (n, prefix) in probes.into_iter().enumerate() {
            let launch = Launch { prefix, rank: Some(n + 1), from_kit: true, ..Launch::default() };
            indices.extend(self.invoke(r, launch)?);
        }
        Ok(self.judge(&r.name, &r.expect, &indices))
    }

    /// A step of stream probes: each read line by line, signalled after its `after_lines`
    /// when it declares a signal, killed at its deadline; the response of each is its terminal
    /// line.
    fn run_streams(&mut self, r: &RunStep, kind: ProbeKind) -> Result<Vec<Finding>, String> {
        let engine = self.engine;
        let probes = stream_probes(&engine.profile, kind);
        if probes.is_empty() {
            return Err(format!("the profile names no kit `{}` probes", kind.as_str()));
        }
        let mut indices = Vec::new();
        let mut findings = Vec::new();
        for (n, probe) in probes.into_iter().enumerate() {
            let deadline = probe
                .deadline_seconds
                .or(engine.profile.file.kit.timeout_seconds)
                .map_or(DEFAULT_STEP_LIMIT, Duration::from_secs_f64);
            let line_signal = match (&probe.signal, probe.after_lines) {
                (Some(name), Some(after_lines)) => {
                    Some(exec::LineSignal { after_lines, signal: signal_by_name(name)? })
                }
                _ => None,
            };
            let launch = Launch {
                prefix: probe.argv.clone(),
                rank: Some(n + 1),
                from_kit: true,
                deadline: Some(deadline),
                line_signal,
            };
            let step_indices = self.invoke(r, launch)?;
            for &i in &step_indices {
                let obs = &self.observations[i];
                let at = obs.record.name.clone();
                // A signal never sent is the SIGINT scenario's failure; the stream itself may
                // still keep the contract (the kit judges it so too).
                if let Some(ls) = line_signal
                    && r.probe == Some(ProbeKind::StreamSignal)
                    && obs.outcome.line_signal_sent_after.is_none()
                {
                    let signal = probe.signal.as_deref().unwrap_or("INT");
                    let lines = obs.outcome.stdout_lines;
                    let how = if obs.outcome.termination == Termination::TimedOut {
                        format!("only {lines} of {} lines came before the deadline", ls.after_lines)
                    } else {
                        format!(
                            "the stream ended after {lines} lines, before the {} that trigger it",
                            ls.after_lines
                        )
                    };
                    findings.push(
                        Finding::new("stream-signal", format!("SIG{signal} was never sent: {how}"))
                            .expected(format!(
                                "at least {} lines, then SIG{signal}",
                                ls.after_lines
                            ))
                            .actual(format!("{lines} lines, {}", obs.record.ended))
                            .at_step(at.clone()),
                    );
                }
                if obs.outcome.termination == Termination::TimedOut {
                    findings.push(
                        Finding::new(
                            "stream-deadline",
                            format!(
                                "the stream was still running at its deadline of {} ms and its process group was killed",
                                millis(deadline)
                            ),
                        )
                        .expected("the stream ends by itself before its deadline")
                        .actual(format!("{} lines, then killed", obs.outcome.stdout_lines))
                        .at_step(at),
                    );
                }
            }
            indices.extend(step_indices);
        }
        // The deadline has its own finding: the generic timeout would only repeat it.
        findings.extend(
            self.judge(&r.name, &r.expect, &indices).into_iter().filter(|f| f.check != "timeout"),
        );
        Ok(findings)
    }

    /// Runs `TOOL <prefix> <args> [flags]` (`count` copies at once) and records each copy;
    /// `probe` numbers the observations of a probe step.
    fn invoke(&mut self, r: &RunStep, launch: Launch) -> Result<Vec<usize>, String> {
        let engine = self.engine;
        let role = match &r.role {
            Some(name) => {
                Some(engine.profile.role(name).ok_or_else(|| format!("no role `{name}`"))?)
            }
            None => None,
        };
        let args: Vec<String> = r.args.iter().map(|a| self.text(a)).collect::<Result<_, _>>()?;
        // The job built-ins only touch jobs this scenario started in its own sandbox; any other
        // writing command must come from the profile (a role or a kit probe).
        if role.is_none()
            && !launch.from_kit
            && let Some((path, info)) = engine.commands.command_for_args(&args)
            && info.writes()
            && !path.starts_with("job.")
        {
            return Err(format!(
                "refusing to run `{path}`: it is {} and the profile did not name it in a role",
                info.danger_level
            ));
        }
        let tool = match &r.tool_dir {
            Some(dir) => self.tool_link(dir)?,
            None => engine.tool.clone(),
        };
        let mut argv: Vec<String> = engine.tool_argv(&tool);
        argv.extend(launch.prefix.iter().cloned());
        argv.extend(args);
        let mut env = self.base_env.clone();
        if let Some(role) = role {
            for (k, v) in &role.env {
                env.insert(k.into(), v.into());
            }
        }
        if let Some(instance) = &r.instance {
            let tool = &engine.profile.file.tool;
            if let Some(flag) = &tool.instance_flag {
                argv.extend([flag.clone(), instance.clone()]);
            } else if let Some(var) = &tool.instance_env {
                env.insert(var.into(), instance.into());
            }
        }
        if let Some(b) = &r.budget {
            argv.extend(["--budget".to_owned(), duration_arg(self.duration(b)?)]);
        }
        if let Some(t) = &r.timeout {
            argv.extend(["--timeout".to_owned(), duration_arg(self.duration(t)?)]);
        }
        for (k, v) in &r.env {
            env.insert(k.into(), self.text(v)?.into());
        }
        for k in &r.env_remove {
            env.remove(&OsString::from(k));
        }
        let stdin = match (&r.stdin_text, r.stdin, role) {
            (Some(t), _, _) => StdinMode::Bytes(self.text(t)?.into_bytes()),
            (None, Some(kind), _) => stdin_mode(kind),
            (None, None, Some(role)) => role_stdin(role),
            (None, None, None) => StdinMode::Closed,
        };
        let mut inv = Invocation::new(
            Program::Argv(argv.iter().map(OsString::from).collect()),
            env.clone(),
            self.work.clone(),
        );
        inv.stdin = stdin;
        // A kit probe runs under the kit's limit when the profile sets one: a run still going
        // then is a hang, killed and failed, as the kit does.
        inv.timeout =
            match (launch.deadline, launch.from_kit, engine.profile.file.kit.timeout_seconds) {
                (Some(deadline), _, _) => deadline,
                (None, true, Some(seconds)) => Duration::from_secs_f64(seconds),
                _ => self.limit(r.limit.as_deref())?,
            };
        let kill = match &r.kill_group {
            Some(k) => Some((
                self.duration(&k.after)?,
                signal_by_name(k.signal.as_deref().unwrap_or("TERM"))?,
            )),
            None => None,
        };
        self.step_env.insert(r.name.clone(), env);
        self.step_role.insert(r.name.clone(), r.role.clone());
        self.current_role = r.role.clone();

        let count = r.count.unwrap_or(1) as usize;
        let start = Instant::now();
        crate::interrupt::gate()?;
        let mut running = Vec::with_capacity(count);
        for _ in 0..count {
            let run = match launch.line_signal {
                Some(ls) => exec::spawn_watched(&inv, exec::Graces::default(), ls),
                None => exec::spawn(&inv),
            };
            running.push(run.map_err(|e| e.to_string())?);
        }
        if let Some((after, signal)) = kill {
            std::thread::sleep(after.saturating_sub(start.elapsed()));
            for run in &running {
                // The group outlives its leader while any member (a worker that did not leave
                // the caller's process group) is alive, so signal the group id directly.
                let _ = killpg(Pid::from_raw(run.pid() as i32), signal);
            }
        }
        let mut indices = Vec::with_capacity(count);
        for (n, run) in running.into_iter().enumerate() {
            let outcome = run.wait().map_err(|e| e.to_string())?;
            let name = match (launch.rank, count) {
                (None, 1) => r.name.clone(),
                (None, _) => format!("{}#{}", r.name, n + 1),
                (Some(p), 1) => format!("{}#{p}", r.name),
                (Some(p), _) => format!("{}#{p}.{}", r.name, n + 1),
            };
            let i = self.record(&r.name, name, &inv, outcome);
            if launch.line_signal.is_some() || launch.deadline.is_some() {
                self.take_stream_response(i);
            }
            indices.push(i);
        }
        Ok(indices)
    }

    /// A symbolic link to the tool, under its own name, in `dir` inside the sandbox.
    fn tool_link(&self, dir: &str) -> Result<PathBuf, String> {
        let name = self.engine.tool.file_name().ok_or("the tool path has no file name")?;
        let dir = self.sandbox_root.join(dir);
        let link = dir.join(name);
        if !link.exists() {
            std::fs::create_dir_all(&dir)
                .and_then(|()| std::os::unix::fs::symlink(&self.engine.tool, &link))
                .map_err(|e| format!("failed to link the tool into {}: {e}", dir.display()))?;
        }
        Ok(link)
    }

    fn judge(&self, step: &str, expect: &Expect, indices: &[usize]) -> Vec<Finding> {
        let mut findings = Vec::new();
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
            if let Some((other, theirs)) = paired {
                let theirs = theirs.get(rank).and_then(|&t| self.observations.get(t));
                let finding = match obs.response() {
                    Some(response) => checks::same_response(obs, response, other, theirs),
                    None => Some(Finding::new("same-response", "no JSON response to compare")),
                };
                findings.extend(finding.map(|f| f.at_step(obs.record.name.clone())));
            }
        }
        let all: Vec<&Observation> = indices.iter().map(|&i| &self.observations[i]).collect();
        findings.extend(checks::check_all(expect, step, &all));
        findings
    }

    /// The command line at `pointer` of `from`'s last response, or a finding.
    fn command_from(&self, step: &str, from: &str, pointer: &str) -> Result<String, Finding> {
        let obs = self.last_of(from).ok_or_else(|| {
            Finding::new("missing-command", format!("step `{from}` produced no response"))
                .at_step(step)
        })?;
        match obs.str_at(pointer) {
            Some(line) if !line.trim().is_empty() => Ok(line.to_owned()),
            _ => Err(Finding::new(
                "missing-command",
                format!("the last response of step `{from}` has no `{pointer}`"),
            )
            .expected(format!("a non-empty string at `{pointer}`"))
            .actual(obs.record.stdout.text.chars().take(300).collect::<String>())
            .at_step(step)),
        }
    }

    fn shell_invocation(&mut self, c: &ShellStep, line: String) -> Result<Invocation, String> {
        let mut env = self.step_env.get(&c.from).cloned().unwrap_or_else(|| self.base_env.clone());
        for (k, v) in &c.env {
            env.insert(k.into(), self.text(v)?.into());
        }
        for k in &c.env_remove {
            env.remove(&OsString::from(k));
        }
        let mut inv = Invocation::new(Program::Shell(line), env, self.work.clone());
        inv.timeout = self.limit(c.limit.as_deref())?;
        let role = self.step_role.get(&c.from).cloned().flatten();
        self.step_env.insert(c.name.clone(), inv.env.clone());
        self.step_role.insert(c.name.clone(), role.clone());
        self.current_role = role;
        Ok(inv)
    }

    fn run_continue(&mut self, c: &ShellStep) -> Result<Vec<Finding>, String> {
        // The agent's loop runs while the exit is 14; when `from` already ended otherwise,
        // there is nothing to continue and its response is the one to judge.
        if let Some(&last) = self.last.get(&c.from)
            && self.observations[last].exit_code() != Some(INCOMPLETE)
        {
            self.step_env
                .insert(c.name.clone(), self.step_env.get(&c.from).cloned().unwrap_or_default());
            let role = self.step_role.get(&c.from).cloned().flatten();
            self.step_role.insert(c.name.clone(), role.clone());
            self.current_role = role;
            self.last.insert(c.name.clone(), last);
            return Ok(self.judge(&c.name, &c.expect, &[last]));
        }
        let mut line = match self.command_from(&c.name, &c.from, "/data/continue_command") {
            Ok(l) => l,
            Err(f) => return Ok(vec![f]),
        };
        let max_hops = c.max_hops.unwrap_or(DEFAULT_MAX_HOPS);
        let mut indices = Vec::new();
        for hop in 1..=max_hops {
            let inv = self.shell_invocation(c, line.clone())?;
            crate::interrupt::gate()?;
            let outcome = exec::run(&inv).map_err(|e| e.to_string())?;
            let i = self.record(&c.name, format!("{}#{hop}", c.name), &inv, outcome);
            indices.push(i);
            if self.observations[i].exit_code() != Some(INCOMPLETE) {
                let mut findings = self.check_one(&c.expect, &self.observations[i]);
                let all: Vec<&Observation> =
                    indices.iter().map(|&i| &self.observations[i]).collect();
                findings.extend(checks::check_all(&c.expect, &c.name, &all));
                return Ok(findings);
            }
            line = match self.command_from(&c.name, &c.name, "/data/continue_command") {
                Ok(l) => l,
                Err(f) => return Ok(vec![f]),
            };
        }
        Ok(vec![
            Finding::new(
                "continue-loop",
                format!("the work did not end within {max_hops} continuations"),
            )
            .expected(format!("an exit other than 14 within {max_hops} runs of continue_command"))
            .actual(format!("still 14 after {max_hops}: {line}"))
            .at_step(c.name.clone()),
        ])
    }

    fn run_cancel(&mut self, c: &ShellStep) -> Result<Vec<Finding>, String> {
        let line = match self.command_from(&c.name, &c.from, "/data/cancel_command") {
            Ok(l) => l,
            Err(f) => return Ok(vec![f]),
        };
        let inv = self.shell_invocation(c, line)?;
        crate::interrupt::gate()?;
        let outcome = exec::run(&inv).map_err(|e| e.to_string())?;
        let i = self.record(&c.name, c.name.clone(), &inv, outcome);
        Ok(self.judge(&c.name, &c.expect, &[i]))
    }

    /// Cancels every job seen, then waits (bounded) for marked processes to go away. Returns
    /// findings only for faults of the clean-up itself (none today: a failing cancel of a job
    /// that already ended is normal).
    fn clean_up(&mut self) -> Vec<Finding> {
        let mut lines: BTreeSet<String> = BTreeSet::new();
        let mut bare_ids: BTreeSet<String> = BTreeSet::new();
        for obs in &self.observations {
            let Some(r) = obs.response() else { continue };
            if let Some(line) = r.pointer("/data/cancel_command").and_then(Value::as_str) {
                lines.insert(line.to_owned());
            } else if let Some(id) = r.pointer("/data/job_id").and_then(Value::as_str) {
                bare_ids.insert(id.to_owned());
            }
        }
        let env = self.base_env.clone();
        let mut invocations: Vec<Invocation> = lines
            .into_iter()
            .map(|l| Invocation::new(Program::Shell(l), env.clone(), self.work.clone()))
            .collect();
        if self.engine.commands.by_path.contains_key("job.cancel") {
            for id in bare_ids {
                let mut argv: Vec<OsString> = self
                    .engine
                    .tool_argv(&self.engine.tool)
                    .into_iter()
                    .map(OsString::from)
                    .collect();
                argv.extend(["job".into(), "cancel".into(), id.into()]);
                invocations.push(Invocation::new(
                    Program::Argv(argv),
                    env.clone(),
                    self.work.clone(),
                ));
            }
        }
        for mut inv in invocations {
            if crate::interrupt::interrupted() {
                break;
            }
            inv.timeout = Duration::from_secs(15);
            let _ = exec::run(&inv);
        }
        let deadline = Instant::now() + CLEANUP_GRACE;
        while Instant::now() < deadline && !sandbox::scan(&self.marker).is_empty() {
            std::thread::sleep(Duration::from_millis(100));
        }
        Vec::new()
    }
}
