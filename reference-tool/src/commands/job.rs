//! The `job` built-ins: `job wait ID`, `job status ID`, `job cancel ID`.
//!
//! Their declarations live here; their work is the framework's generic job runtime
//! (`framework::interrupt`), which dispatches them by path and never calls the plain `run`.
//! `job wait` takes `--budget` (it holds its caller) without declaring interruption.

use crate::framework::{CommandSpec, DangerLevel, Exit, Failure, SideEffects, ValueType};

fn runtime_only(path: &str, description: &str) -> CommandSpec {
    CommandSpec::new(path, description, |_ctx| {
        Err(Failure::internal("job commands run through the job runtime"))
    })
    .builtin()
    .positional("id", ValueType::String, true, "The job id (job_ followed by 32 hex digits)")
}

fn reading(spec: CommandSpec, success: &str) -> CommandSpec {
    spec.exit(Exit::SUCCESS, success, false, SideEffects::None)
        .exit(
            Exit::GENERAL_ERROR,
            "The job was lost (JOB_LOST, its log tail in error.detail) or cancelled \
             (CANCELLED), or its own command ended with 1",
            false,
            SideEffects::None,
        )
        .exit(
            Exit::ARG_ERROR,
            "The job id is malformed; nothing was read",
            false,
            SideEffects::None,
        )
        .exit(Exit::NOT_FOUND, "No such job in this instance", false, SideEffects::None)
        .exit(
            Exit::TIMEOUT,
            "The job made no progress for its idle timeout (STALLED) or outlived its time limit",
            false,
            SideEffects::None,
        )
        .exit(
            Exit::INCOMPLETE,
            "The job has not ended; run data.continue_command",
            true,
            SideEffects::None,
        )
}

/// The three built-ins.
pub fn specs() -> Vec<CommandSpec> {
    vec![
        reading(
            runtime_only(
                "job.wait",
                "Wait for a job within the call budget: its final response (with the job's own \
                 exit code), or INCOMPLETE with fresh progress",
            ),
            "The job ended with success: its final response",
        )
        .budget_flag(),
        reading(
            runtime_only(
                "job.status",
                "A job's state now, never waiting: INCOMPLETE (14) while it runs, else its final \
                 response with the job's own exit code",
            ),
            "The job ended with success: its final response",
        ),
        runtime_only("job.cancel", "Stop a job at its next safe point and discard its checkpoint")
            .danger(DangerLevel::Mutating)
            .exit(
                Exit::SUCCESS,
                "The job is cancelled (or cancelling)",
                false,
                SideEffects::Complete,
            )
            .exit(
                Exit::ARG_ERROR,
                "The job id is malformed; nothing changed",
                false,
                SideEffects::None,
            )
            .exit(
                Exit::PRECONDITION,
                "The job already ended (JOB_ENDED); nothing changed",
                false,
                SideEffects::None,
            )
            .exit(
                Exit::NOT_FOUND,
                "No such job in this instance; nothing changed",
                false,
                SideEffects::None,
            ),
    ]
}
