//! Running the tool: a role's invocation, a kit probe, an argument-order placement, a stream
//! probe; `count` copies at once, with the step's budget, timeout, instance and stdin.
//!
//! A step's `budget` becomes `--budget <value>` here, rendered in the profile's
//! `[tool] budget_format`, and its `env` (e.g. `AGENT_CALL_BUDGET_MS`) goes into the
//! invocation's environment; `conform explain ID TOOL` prints the argv this builds. The
//! reference tool's side of the rule that REQ-F-080's scenarios test is
//! `reference-tool/src/framework/budget.rs`.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nix::sys::signal::killpg;
use nix::unistd::Pid;
use serde_json::Value;

use super::{Conditions, DEFAULT_STEP_LIMIT, ScenarioState, StepError, StepResult, Stop};
use crate::exec::{self, Invocation, Program, StdinMode, Termination};
use crate::outcome::FindingKind;
use crate::outcome::{Finding, SentSignal, SignalTarget, SkipReason, millis};
use crate::scenario::{ProbeKind, RunStep, StdinKind, signal_by_name};

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

impl ScenarioState<'_> {
    /// Runs a continue step's `watch` (a run step without a role or premise), judged by its
    /// own `expect` alone: its `elapsed_max` replaces the call's hold, as it does in a step.
    pub(super) fn run_watch(&mut self, r: &RunStep) -> StepResult {
        let indices = self.invoke(r, Launch::default())?;
        Ok(self.judge(&r.name, &r.expect, &indices))
    }

    pub(super) fn run_tool(&mut self, r: &RunStep) -> StepResult {
        let profile = &self.subject.profile;
        if let Some(placement) = r.order {
            let order = profile.file.kit.argument_order.as_ref();
            let order = order.ok_or("the profile has no `[kit.argument_order]`")?;
            let prefix = order.argv(placement).ok_or_else(|| {
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
            let conditions =
                Conditions { applies_when: r.applies_when.as_ref(), premise: r.premise.as_ref() };
            return self.judge_step(&r.name, conditions, &r.expect, &indices, None);
        };
        if matches!(kind, ProbeKind::Stream | ProbeKind::StreamSignal) {
            return self.run_streams(r, kind);
        }
        // No probes of this kind: the step runs nothing (the plan skipped the scenario if none
        // of its probe steps has any).
        let probes = profile.probe_argvs(kind);
        let mut indices = Vec::new();
        for (n, prefix) in probes.into_iter().enumerate() {
            // The manifest command and `--help` are one invocation, named as their step.
            let rank = (!kind.always_there()).then_some(n + 1);
            let launch = Launch { prefix, rank, from_kit: true, ..Launch::default() };
            indices.extend(self.invoke(r, launch)?);
        }
        if r.kit_hangs == Some(true) {
            indices = self.charge_hangs(r, kind, indices)?;
        }
        Ok(self.judge(&r.name, &r.expect, &indices))
    }

    /// The observations of a `kit_hangs` step this scenario judges: a run that timed out is
    /// charged as the kit charges it ([`super::hang_charge`]), and one charged to another
    /// scenario is left out (noted in `deferred_hangs`). Deciding may take one more run of the
    /// probe: the kit's own (stdin closed, nothing added), or for a preview, the destructive
    /// probe unconfirmed (the kit previews only a probe whose refusal ended).
    fn charge_hangs(
        &mut self,
        r: &RunStep,
        kind: ProbeKind,
        indices: Vec<usize>,
    ) -> Result<Vec<usize>, Stop> {
        let plain = r.args.is_empty()
            && r.env.is_empty()
            && r.env_remove.is_empty()
            && r.stdin_text.is_none()
            && matches!(r.stdin, None | Some(StdinKind::Closed));
        let open_stdin = r.args.is_empty()
            && r.env.is_empty()
            && r.env_remove.is_empty()
            && r.stdin == Some(StdinKind::Open);
        let mut judged = Vec::new();
        for (rank, i) in indices.into_iter().enumerate() {
            if self.observations[i].outcome.termination != Termination::TimedOut {
                judged.push(i);
                continue;
            }
            let preview = kind == ProbeKind::DestructivePreview;
            let unconfirmed_hangs = preview && self.rerun_hangs(r, ProbeKind::Destructive, rank)?;
            let plain_hangs = match (plain, unconfirmed_hangs) {
                (_, true) => true,
                (true, false) => true,
                (false, false) => self.rerun_hangs(r, kind, rank)?,
            };
            let charge = super::hang_charge(super::HangFacts {
                preview,
                unconfirmed_hangs,
                plain_hangs,
                open_stdin,
                scenario: &self.scenario.id,
            });
            if charge == self.scenario.id {
                judged.push(i);
            } else {
                let run = self.observations[i].record.name.clone();
                self.deferred_hangs.push((run, charge.to_owned()));
            }
        }
        Ok(judged)
    }

    /// Runs the probe of this rank and kind once more, the kit's way (stdin closed, nothing
    /// added, the step's limit): whether it outlived the limit too.
    fn rerun_hangs(&mut self, r: &RunStep, kind: ProbeKind, rank: usize) -> Result<bool, Stop> {
        let Some(prefix) = self.subject.profile.probe_argvs(kind).into_iter().nth(rank) else {
            return Ok(false);
        };
        let suffix = if kind == ProbeKind::Destructive { "unconfirmed" } else { "plain" };
        let again = RunStep {
            name: format!("{}-{suffix}", r.name),
            probe: Some(kind),
            limit: r.limit.clone(),
            ..RunStep::default()
        };
        let launch = Launch { prefix, rank: Some(rank + 1), from_kit: true, ..Launch::default() };
        let ran = self.invoke(&again, launch)?;
        Ok(ran.iter().any(|&i| self.observations[i].outcome.termination == Termination::TimedOut))
    }

    /// A step of stream probes: each read line by line, signalled after its `after_lines`
    /// when it declares a signal, killed at its deadline; the response of each is its terminal
    /// line.
    fn run_streams(&mut self, r: &RunStep, kind: ProbeKind) -> StepResult {
        let subject = self.subject;
        let probes = subject.profile.stream_probes(kind);
        let mut indices = Vec::new();
        let mut findings = Vec::new();
        for (n, probe) in probes.into_iter().enumerate() {
            let deadline = probe
                .deadline_seconds
                .or(subject.profile.file.kit.timeout_seconds)
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
                        Finding::new(
                            FindingKind::StreamSignal,
                            format!("SIG{signal} was never sent: {how}"),
                        )
                        .expected(format!("at least {} lines, then SIG{signal}", ls.after_lines))
                        .actual(format!("{lines} lines, {}", obs.record.ended))
                        .at_step(at.clone()),
                    );
                }
                if obs.outcome.termination == Termination::TimedOut {
                    findings.push(
                        Finding::new(
                            FindingKind::StreamDeadline,
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
            self.judge(&r.name, &r.expect, &indices)
                .into_iter()
                .filter(|f| f.check != FindingKind::Timeout),
        );
        Ok(findings)
    }

    /// Runs `TOOL <prefix> <args> [flags]` (`count` copies at once) and records each copy;
    /// `probe` numbers the observations of a probe step.
    fn invoke(&mut self, r: &RunStep, launch: Launch) -> Result<Vec<usize>, Stop> {
        let subject = self.subject;
        let role = match &r.role {
            Some(name) => {
                Some(subject.profile.role(name).ok_or_else(|| format!("no role `{name}`"))?)
            }
            None => None,
        };
        let args: Vec<String> = r.args.iter().map(|a| self.text(a)).collect::<Result<_, _>>()?;
        // The job built-ins only touch jobs this scenario started in its own sandbox; any other
        // writing command must come from the profile (a role or a kit probe).
        if role.is_none()
            && !launch.from_kit
            && let Some((path, info)) = subject.commands.command_for_args(&args)
            && info.writes()
            && !path.starts_with("job.")
        {
            return Err(format!(
                "refusing to run `{path}`: it is {} and the profile did not name it in a role",
                info.danger_level
            )
            .into());
        }
        let tool = match &r.tool_dir {
            Some(dir) => self.tool_link(dir)?,
            None => subject.tool.path.clone(),
        };
        let words: Vec<String> = launch.prefix.iter().cloned().chain(args).collect();
        let mut argv: Vec<String> = subject.tool.argv_at(&tool);
        argv.extend(words.iter().cloned());
        let mut env = self.base_env.clone();
        if let Some(role) = role {
            for (k, v) in crate::profile::render_env(&role.env, &self.sandbox_root, &self.work) {
                env.insert(k.into(), v.into());
            }
        }
        if let Some(instance) = &r.instance {
            let tool = &subject.profile.file.tool;
            if let Some(flag) = &tool.instance_flag {
                argv.extend([flag.clone(), instance.clone()]);
            } else if let Some(var) = &tool.instance_env {
                env.insert(var.into(), instance.into());
            }
        }
        let mut added = Vec::new();
        if let Some(b) = &r.budget {
            // conform never passes an argument the command does not declare: only an
            // interruptible command has --budget (REQ-F-080). The job built-ins may list it
            // either way (docs/contract.md §9).
            if let Some((path, info)) = subject.commands.command_for_args(&words)
                && !info.interruptible()
                && !path.starts_with("job.")
            {
                return Err(Stop::Skip(SkipReason::ProfileProblem {
                    why: format!(
                        "step `{}` needs `{path}` to take --budget, but it declares no interruption, so it has none (REQ-F-080){}",
                        r.name,
                        r.role.as_ref().map_or_else(String::new, |role| format!(
                            "; give role `{role}` an interruptible command"
                        ))
                    ),
                }));
            }
            let format = subject.profile.file.tool.budget_format;
            added.push(("--budget", format.render(self.duration(b)?)));
        }
        if let Some(t) = &r.timeout {
            let format = subject.profile.file.tool.timeout_format;
            added.push(("--timeout", format.render(self.duration(t)?)));
        }
        for (flag, value) in &added {
            argv.extend([(*flag).to_owned(), value.clone()]);
        }
        for (k, v) in &r.env {
            env.insert(k.into(), self.text(v)?.into());
        }
        for k in &r.env_remove {
            env.remove(&OsString::from(k));
        }
        let stdin = match (&r.stdin_text, r.stdin, role) {
            (Some(t), _, _) => StdinMode::Bytes(self.text(t)?.into_bytes()),
            (None, Some(kind), _) => kind.mode(),
            (None, None, Some(role)) => role.stdin_mode(),
            (None, None, None) => StdinMode::Closed,
        };
        let mut inv = Invocation::new(
            Program::Argv(argv.iter().map(OsString::from).collect()),
            env.clone(),
            self.step_cwd(r.cwd.as_deref())?,
        );
        inv.stdin = stdin;
        // A kit probe runs under the kit's limit when the profile sets one: a run still going
        // then is a hang, killed and failed, as the kit does.
        inv.timeout =
            match (launch.deadline, launch.from_kit, subject.profile.file.kit.timeout_seconds) {
                (Some(deadline), _, _) => deadline,
                (None, true, Some(seconds)) => Duration::from_secs_f64(seconds),
                _ => self.limit(r.limit.as_deref())?,
            };
        let kill = match &r.kill_group {
            Some(k) => Some((
                self.duration(&k.after)?,
                signal_by_name(k.signal.as_deref().unwrap_or("TERM"))?,
                k.again_after.as_deref().map(|a| self.duration(a)).transpose()?,
            )),
            None => None,
        };
        self.step_env.insert(r.name.clone(), env);
        self.step_role.insert(r.name.clone(), r.role.clone());
        self.current_role = r.role.clone();

        let count = r.count.unwrap_or(1) as usize;
        let start = Instant::now();
        super::stop::gate()?;
        let mut running = Vec::with_capacity(count);
        for _ in 0..count {
            let run = match launch.line_signal {
                Some(ls) => exec::spawn_watched(&inv, exec::Graces::default(), ls),
                None => exec::spawn(&inv),
            };
            running.push(run?);
        }
        let mut sent = None;
        let mut again = None;
        if let Some((after, signal, again_after)) = kill {
            std::thread::sleep(after.saturating_sub(start.elapsed()));
            sent = Some((signal, Instant::now()));
            // The group outlives its leader while any member (a worker that did not leave
            // the caller's process group) is alive, so signal the group id directly.
            let signal_groups = || {
                running
                    .iter()
                    .filter(|run| killpg(Pid::from_raw(run.pid() as i32), signal).is_ok())
                    .count()
            };
            signal_groups();
            if let Some(again_after) = again_after {
                std::thread::sleep(again_after);
                let at = Instant::now();
                // A group that has gone took no second signal: nothing to judge after it.
                if signal_groups() > 0 {
                    again = Some(at);
                }
            }
        }
        let mut indices = Vec::with_capacity(count);
        for (n, run) in running.into_iter().enumerate() {
            let outcome = run.wait()?;
            // What conform sent into the run, for its timeline.
            let signal = match (sent, launch.line_signal, outcome.line_signal_sent_after) {
                (Some((signal, at)), _, _) => Some(SentSignal {
                    signal: signal.as_str().to_owned(),
                    after_ms: millis(at.saturating_duration_since(outcome.started)),
                    to: SignalTarget::Group,
                    again_ms: again.map(|at| millis(at.saturating_duration_since(outcome.started))),
                }),
                (None, Some(ls), Some(after)) => Some(SentSignal {
                    signal: ls.signal.as_str().to_owned(),
                    after_ms: millis(after),
                    to: SignalTarget::Process,
                    again_ms: None,
                }),
                _ => None,
            };
            let name = match (launch.rank, count) {
                (None, 1) => r.name.clone(),
                (None, _) => format!("{}#{}", r.name, n + 1),
                (Some(p), 1) => format!("{}#{p}", r.name),
                (Some(p), _) => format!("{}#{p}.{}", r.name, n + 1),
            };
            let i = self.record(&r.name, name, &inv, outcome);
            self.observations[i].record.signal = signal;
            if launch.line_signal.is_some() || launch.deadline.is_some() {
                self.take_stream_response(i);
            }
            indices.push(i);
        }
        match self.refusal(r, &added, &indices) {
            Some(reason) => Err(Stop::Skip(reason)),
            None => Ok(indices),
        }
    }

    /// A step that exits ARG_ERROR (2) where it was not asked to, after conform added
    /// `--budget` or `--timeout`, names the flag in its error: the tool refused conform's
    /// argument, which is the profile's problem to solve, not a verdict on the tool; the skip
    /// that says so.
    fn refusal(
        &self,
        r: &RunStep,
        added: &[(&str, String)],
        indices: &[usize],
    ) -> Option<SkipReason> {
        if added.is_empty() || r.expect.exit.as_ref().is_some_and(|e| e.codes().contains(&2)) {
            return None;
        }
        for &i in indices {
            let obs = &self.observations[i];
            if obs.exit_code() != Some(2) {
                continue;
            }
            let said =
                obs.response().and_then(|r| r.pointer("/error/message")).and_then(Value::as_str);
            let said = said.map_or_else(|| obs.record.stderr.text.trim().to_owned(), str::to_owned);
            let Some((flag, value)) =
                added.iter().find(|(flag, _)| said.contains(flag.trim_start_matches('-')))
            else {
                continue;
            };
            let fix = match *flag {
                "--timeout" => {
                    "set `[tool] timeout_format` (duration, milliseconds or seconds) to the form its --timeout takes"
                }
                _ => {
                    "name a role whose command declares interruption, or set `[tool] budget_format` (duration or seconds) to the form its --budget takes (REQ-F-080: a duration)"
                }
            };
            return Some(SkipReason::ProfileProblem {
                why: format!("the tool refused conform's `{flag} {value}` (exit 2: {said}); {fix}"),
            });
        }
        None
    }

    /// The working directory of a run step: the sandbox's, or its subdirectory `cwd`, which an
    /// earlier step made. A symbolic link is refused: the tool is never sent outside the
    /// sandbox.
    fn step_cwd(&self, cwd: Option<&str>) -> Result<PathBuf, StepError> {
        let Some(dir) = cwd else { return Ok(self.work.clone()) };
        let path = self.work.join(dir);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => Ok(path),
            Ok(_) => Err(StepError::Scenario(format!(
                "`cwd` {dir:?} is no directory of the working directory"
            ))),
            Err(source) => Err(StepError::Io {
                what: format!("`cwd` {dir:?} (make it in an earlier step)"),
                source,
            }),
        }
    }

    /// A symbolic link to the tool, under its own name, in `dir` inside the sandbox.
    fn tool_link(&self, dir: &str) -> Result<PathBuf, StepError> {
        let name = self
            .subject
            .tool
            .path
            .file_name()
            .ok_or_else(|| StepError::Scenario("the tool path has no file name".to_owned()))?;
        let dir = self.sandbox_root.join(dir);
        let link = dir.join(name);
        if !link.exists() {
            std::fs::create_dir_all(&dir)
                .and_then(|()| std::os::unix::fs::symlink(&self.subject.tool.path, &link))
                .map_err(|source| StepError::Io {
                    what: format!("linking the tool into {}", dir.display()),
                    source,
                })?;
        }
        Ok(link)
    }
}
