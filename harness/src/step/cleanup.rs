//! After the steps: every job the scenario saw is cancelled (each `data.cancel_command` of a
//! response; `TOOL job cancel <id>` for a job id seen without one, when the manifest has
//! `job.cancel`), and the tool gets [`CLEANUP_GRACE`] (or, for a calibrated role, the work's
//! `{cadence}` plus `{slack}` when longer: a cancel stops the work at its next safe point,
//! which the spec lets be that far away) to let its workers stop, so that the
//! sandbox sweep after it reports only processes that outlived their cancel. A cancel that
//! could not run (a shell's 126/127, a signal, its own time limit) or that left the scenario's
//! processes running is reported ([`FailedCancel`]): a leak is then explained by its cancel.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::ScenarioState;
use crate::exec::{self, Invocation, Program, Termination};
use crate::outcome::FailedCancel;
use crate::sandbox;

/// How long workers get to stop after their jobs were cancelled, before the sweep.
pub const CLEANUP_GRACE: Duration = Duration::from_secs(5);

impl ScenarioState<'_> {
    /// Cancels every job seen, then waits (bounded) for marked processes to go away. Returns
    /// the cancels that failed and matter: those that could not run, and, when processes are
    /// left after the grace, every failed one (a failing cancel of a job that already ended is
    /// normal, and said nothing about).
    pub(super) fn clean_up(&mut self) -> Vec<FailedCancel> {
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
        if self.subject.commands.by_path.contains_key("job.cancel") {
            for id in bare_ids {
                let mut argv: Vec<OsString> =
                    self.subject.tool.argv().into_iter().map(OsString::from).collect();
                argv.extend(["job".into(), "cancel".into(), id.into()]);
                invocations.push(Invocation::new(
                    Program::Argv(argv),
                    env.clone(),
                    self.work.clone(),
                ));
            }
        }
        let mut failed: Vec<(FailedCancel, bool)> = Vec::new();
        for mut inv in invocations {
            if crate::interrupt::interrupted() {
                break;
            }
            inv.timeout = CANCEL_LIMIT;
            if let Some(fault) = judge_cancel(&inv, exec::run(&inv)) {
                failed.push(fault);
            }
        }
        let grace = self
            .calibration
            .as_ref()
            .map_or(CLEANUP_GRACE, |c| CLEANUP_GRACE.max(c.cadence() + crate::calibrate::SLACK));
        let deadline = Instant::now() + grace;
        let mut left = !sandbox::scan(&self.marker).is_empty();
        while left && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            left = !sandbox::scan(&self.marker).is_empty();
        }
        failed
            .into_iter()
            .filter(|(_, could_not_run)| *could_not_run || left)
            .map(|(f, _)| f)
            .collect()
    }
}

/// The bound on one cancel of the clean-up.
const CANCEL_LIMIT: Duration = Duration::from_secs(15);

/// A cancel that did not succeed, and whether it could not run at all (the shell found no
/// program or could not execute it, a signal ended it, it outlived [`CANCEL_LIMIT`]).
fn judge_cancel(
    inv: &Invocation,
    run: Result<exec::Outcome, exec::ExecError>,
) -> Option<(FailedCancel, bool)> {
    let command = match &inv.program {
        Program::Shell(line) => line.clone(),
        Program::Argv(argv) => {
            argv.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" ")
        }
    };
    let outcome = match run {
        Ok(outcome) => outcome,
        Err(e) => {
            let ended = format!("could not start: {e}");
            return Some((FailedCancel { command, ended, stderr_tail: String::new() }, true));
        }
    };
    let could_not_run = match outcome.termination {
        Termination::Exited(0) => return None,
        Termination::Exited(code) => matches!(code, 126 | 127),
        Termination::Signaled(_) | Termination::TimedOut => true,
    };
    let stderr = String::from_utf8_lossy(&outcome.stderr.bytes);
    let stderr_tail = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
    let ended = crate::outcome::Ended::from(outcome.termination).to_string();
    Some((
        FailedCancel { command, ended, stderr_tail: stderr_tail.chars().take(300).collect() },
        could_not_run,
    ))
}
