//! After the steps: every job the scenario saw is cancelled (each `data.cancel_command` of a
//! response; `TOOL job cancel <id>` for a job id seen without one, when the manifest has
//! `job.cancel`), and the tool gets [`CLEANUP_GRACE`] to let its workers stop, so that the
//! sandbox sweep after it reports only processes that outlived their cancel.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::ScenarioState;
use crate::exec::{self, Invocation, Program};
use crate::outcome::Finding;
use crate::sandbox;

/// How long workers get to stop after their jobs were cancelled, before the sweep.
pub const CLEANUP_GRACE: Duration = Duration::from_secs(5);

impl ScenarioState<'_> {
    /// Cancels every job seen, then waits (bounded) for marked processes to go away. Returns
    /// findings only for faults of the clean-up itself (none today: a failing cancel of a job
    /// that already ended is normal).
    pub(super) fn clean_up(&mut self) -> Vec<Finding> {
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
