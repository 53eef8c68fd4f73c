//! Stage 6: the interruption runtime wired into dispatch ("Work Outlives the Caller's Budget",
//! CONTRACT §3–§6).
//!
//! [`handles`] picks the commands that go through here instead of the plain supervised run:
//! every command declaring `interruption`, every `async` command, and the `job` built-ins;
//! `dispatch` sends each to its part:
//!
//! - `budget`: the call budget, resolved before dispatch and stamped on every answer;
//! - `front`: an interruptible command's call, which claims the job of its invocation and
//!   waits on it, hands it to a detached worker, or runs it `inline` up to a checkpoint;
//! - `async_start`: an `async` command, which answers a job descriptor at once;
//! - `job_builtins`: `job wait`, `job status`, `job cancel`;
//! - `worker`: the detached worker that runs a job's work after the caller left;
//! - `answer`: how any of them answers from a job (final response or INCOMPLETE);
//! - `limits`, `store`, `sweep`: a job's limits, the call's job store and its errors,
//!   and the leftovers of killed processes.

mod answer;
mod async_start;
mod budget;
mod front;
mod inline;
mod job_builtins;
mod limits;
mod store;
mod sweep;
mod worker;

pub use async_start::POLL_INTERVAL_MS;
pub use budget::{resolve_call_budget, stamp_budget};
pub use job_builtins::CANCEL_ACK_WAIT;
pub use limits::IDLE_TIMEOUT_ENV;
pub(crate) use worker::run_worker;

use super::app::App;
use super::context::{Args, Failure, Invocation};
use super::envelope::Response;
use super::registry::CommandSpec;
use super::state::{Migration, StateConfig, StateDb};
use crate::runtime::budget::ResolvedBudget;
use crate::runtime::jobs;

/// Whether stage 6 takes this command over.
pub fn handles(spec: &CommandSpec) -> bool {
    spec.interruption.is_some() || spec.is_async || spec.path.starts_with("job.")
}

/// What dispatch hands over after validation and the idempotency check.
pub(crate) struct Call<'a> {
    pub(crate) args: Args,
    pub(crate) invocation: Invocation,
    pub(crate) state: StateConfig,
    pub(crate) budget: Option<&'a ResolvedBudget>,
    /// The state DB, opened by stage 5 when a writer gave an idempotency key.
    pub(crate) idempotency: Option<StateDb>,
}

/// Stage 6 for a command [`handles`] accepts.
pub(crate) fn dispatch(app: &App, spec: &CommandSpec, call: Call<'_>) -> Response {
    let result = match spec.path.as_str() {
        "job.wait" => job_builtins::job_wait(app, &call),
        "job.status" if crate::mutants::job_status_waits() => job_builtins::job_wait(app, &call),
        "job.status" => job_builtins::job_status(app, &call),
        "job.cancel" => job_builtins::job_cancel(app, &call),
        _ if spec.is_async => async_start::start_async(app, spec, &call),
        _ => front::front(app, spec, call),
    };
    result.unwrap_or_else(Response::failure)
}

/// The runtime's migrations, in the framework's form, for [`App::add_state_migrations`].
pub fn runtime_migrations() -> Vec<Migration> {
    jobs::migrations().iter().map(|m| Migration { id: m.name, sql: m.sql }).collect()
}

/// Maps a work-level error of the runtime (checkpoint or progress) to a failure.
pub fn runtime_failure(error: impl std::fmt::Display) -> Failure {
    Failure::internal(format!("the job runtime failed: {error}"))
}
