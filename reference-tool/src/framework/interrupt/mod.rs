//! Stage 6: the interruption runtime wired into dispatch ("Work Outlives the Caller's Budget",
//! docs/contract.md §3–§6).
//!
//! [`handles`] picks the commands that go through here instead of the plain supervised run:
//! every command declaring `interruption`, every `async` command, and the `job` built-ins;
//! `dispatch` sends each to its part:
//!
//! - `front`: an interruptible command's call, which claims the job of its invocation and
//!   waits on it, hands it to a detached worker, or runs it `inline` up to a checkpoint;
//! - `async_start`: an `async` command, which answers a job descriptor at once;
//! - `job_builtins`: `job wait`, `job status`, `job cancel`;
//! - `worker`: the detached worker that runs a job's work after the caller left;
//! - `answer`: how any of them answers from a job (final response or INCOMPLETE);
//! - `limits`, `store`, `sweep`: a job's limits, the call's job store and its errors,
//!   and the leftovers of killed processes.
//!
//! The call budget is resolved before dispatch ([`super::budget`]). What the runtime needs of
//! the tool comes in a `Host` (`host.rs`), never the whole application.

mod answer;
mod async_start;
mod front;
mod host;
mod inline;
mod job_builtins;
mod limits;
mod store;
mod sweep;
mod worker;

pub use async_start::POLL_INTERVAL_MS;
pub use job_builtins::CANCEL_ACK_WAIT;
pub use limits::{IDLE_TIMEOUT_ENV, MAX_LIFETIME_ENV};
pub(crate) use worker::run_worker;

pub(crate) use host::{Call, Host};

use super::envelope::Response;
use super::failure::Failure;
use super::registry::CommandSpec;
use super::state::Migration;
use crate::runtime::jobs;

/// Whether stage 6 takes this command over.
pub fn handles(spec: &CommandSpec) -> bool {
    spec.interruption.is_some() || spec.is_async || spec.path.starts_with("job.")
}

/// Stage 6 for a command [`handles`] accepts.
pub(crate) fn dispatch(host: &Host<'_>, spec: &CommandSpec, call: Call<'_>) -> Response {
    let result = match spec.path.as_str() {
        "job.wait" => job_builtins::job_wait(host, &call),
        "job.status" => job_builtins::job_status(host, &call),
        "job.cancel" => job_builtins::job_cancel(host, &call),
        _ if spec.is_async => async_start::start_async(host, spec, &call),
        _ => front::front(host, spec, call),
    };
    result.unwrap_or_else(Response::failure)
}

/// The runtime's migrations, in the framework's form, for
/// [`super::App::add_state_migrations`].
pub fn runtime_migrations() -> Vec<Migration> {
    jobs::migrations().iter().map(|m| Migration { id: m.name, sql: m.sql }).collect()
}

/// Maps a work-level error of the runtime (checkpoint or progress) to a failure.
pub fn runtime_failure(error: impl std::fmt::Display) -> Failure {
    Failure::internal(format!("the job runtime failed: {error}"))
}
