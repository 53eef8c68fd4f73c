//! A resume-only command (`interruption: {detach: false, resume: true}`): the work runs in
//! the front process, stopping at its next checkpoint once the budget is spent or on
//! SIGTERM, SIGINT or SIGHUP. The job is then paused (INCOMPLETE `paused`, the original
//! invocation as `continue_command`, plus `--idempotency-key <effective key>` for a writer;
//! after SIGINT or SIGHUP the call answers the cancellation envelope instead, 130 or 129,
//! REQ-F-069, with the same `data`) or, when a cancel or its lifetime came first, ended; work
//! that finishes answers its final response and records it as the job's outcome.

use std::panic::AssertUnwindSafe;
use std::time::Instant;

use super::answer::Answering;
use super::host::Host;
use super::store::{Jobs, job_failure};
use crate::framework::context::{Args, Ctx, Invocation};
use crate::framework::envelope::Response;
use crate::framework::failure::Failure;
use crate::framework::registry::CommandSpec;
use crate::framework::respond::{IdempotencyRecord, args_digest, fill_retryable, respond};
use crate::framework::state::{StateConfig, StateDb};
use crate::framework::stop::StopToken;
use crate::runtime::context::JobContext;
use crate::runtime::jobs::{self, JobError, JobOutcome, JobStatus, JobView, PauseOutcome};
use crate::runtime::stop::StopReason;

/// What the front process hands to the inline run.
pub(super) struct InlineRun {
    pub(super) args: Args,
    pub(super) invocation: Invocation,
    pub(super) state: StateConfig,
    pub(super) budget_deadline: Option<Instant>,
    pub(super) idempotency: Option<StateDb>,
}

/// A resume-only command: the work runs in this process, stopping at a checkpoint.
pub(super) fn run_inline(
    host: &Host<'_>,
    spec: &CommandSpec,
    run: InlineRun,
    jobs: &mut Jobs,
    answering: &Answering<'_>,
    view: JobView,
) -> Result<Response, Failure> {
    let InlineRun { args, invocation, state, budget_deadline, mut idempotency } = run;
    let work = spec.job_run.clone().ok_or_else(|| Failure::internal("no job work"))?;
    let instance = state.instance.clone();
    let id = view.record.job_id.clone();
    let test_mode = invocation.test_mode;
    let key = invocation.idempotency_key.clone();
    let digest = args_digest(&spec.path, &args);
    let store = jobs.store.clone();
    jobs.rearm();
    let conn = jobs.held();
    let sigterm = std::sync::Arc::clone(host.sigterm);
    let stop = JobContext::standard_stop(&store, conn, &view, Some(sigterm), budget_deadline);
    let mut job = JobContext::new(&store, view, stop);
    let mut ctx = Ctx::new(args, invocation, state, StopToken::new());
    ctx.set_state_migrations(host.migrations.to_vec());
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| work(&mut ctx, &mut job)))
        .unwrap_or_else(|_| Err(Failure::internal("internal error: the command panicked")));
    let _ = job.flush_progress();
    drop(job);
    // Where the work stands is recorded late in the call: its waits end with the budget.
    jobs.rearm();
    match result {
        Err(failure) if failure.job_stop.is_some() => {
            let reason = failure.job_stop.unwrap_or(StopReason::Budget);
            // Record how the job stands now; the answer is then read back from the store
            // (someone else may have ended it first: a waiter that found it stalled).
            match reason {
                StopReason::Budget | StopReason::Terminated => {
                    match store.pause(conn, &instance, &id) {
                        Ok(PauseOutcome::Paused) | Err(JobError::JobEnded { .. }) => {}
                        Ok(PauseOutcome::CancelRequested) => {
                            store.finish_cancelled(conn, &instance, &id).map_err(job_failure)?;
                        }
                        Err(e) => return Err(job_failure(e)),
                    }
                }
                StopReason::Cancelled => {
                    store.finish_cancelled(conn, &instance, &id).map_err(job_failure)?;
                }
                StopReason::Lifetime => {
                    let outcome = JobOutcome::failed(
                        JobStatus::TimedOut,
                        jobs::EXIT_TIMEOUT,
                        jobs::TIMEOUT,
                        format!("job {id} exceeded its time limit"),
                        None,
                    );
                    store.finish(conn, &instance, &id, &outcome).map_err(job_failure)?;
                }
            }
            let view = store.get(conn, &instance, &id).map_err(job_failure)?;
            let cancelled =
                answering.host.cancelled_by().filter(|_| reason == StopReason::Terminated);
            let mut response = if let Some(signal) = cancelled {
                // SIGINT or SIGHUP: the cancellation envelope, the job paused as on SIGTERM.
                answering.cancelled(&view, signal)
            } else if reason == StopReason::Terminated {
                // Paused on SIGTERM, not at the budget: the message must not claim otherwise.
                let paused = Answering {
                    host: answering.host,
                    tool: answering.tool.clone(),
                    budget_ms: None,
                };
                paused.answer(&view)
            } else {
                answering.answer(&view)
            };
            // What the work warned of before it stopped (a discarded checkpoint, say) belongs
            // to this answer too: the caller would otherwise never learn it started over.
            response.warnings.extend(ctx.take_warnings());
            Ok(response)
        }
        result => {
            let warnings = ctx.take_warnings();
            let meta = ctx.take_meta();
            let record = idempotency.as_mut().zip(key.as_deref()).map(|(db, key)| {
                IdempotencyRecord { db, instance: &instance, key, digest: &digest }
            });
            let mut response = respond(spec, result, warnings, meta, test_mode, record);
            fill_retryable(spec, &mut response);
            let outcome = JobOutcome::finished(response.exit.code(), response.to_json());
            store.finish(conn, &instance, &id, &outcome).map_err(job_failure)?;
            Ok(response)
        }
    }
}
