//! The `job` built-ins.
//!
//! `job wait ID` holds the caller up to its budget (the final response with the job's own
//! exit code, or INCOMPLETE with fresh progress); `job status ID` never waits
//! (`meta.budget_ms` 0); `job cancel ID` stops the job at its next safe point and discards
//! its checkpoint (exit 0, `state` `cancelled`, or `cancelling` when the worker did not
//! acknowledge within [`CANCEL_ACK_WAIT`]). A malformed id is ARG_ERROR 2 (`INVALID_JOB_ID`),
//! an unknown id or another instance's job NOT_FOUND 5 (`JOB_NOT_FOUND`), a cancel of an
//! ended job PRECONDITION 4 (`JOB_ENDED`) that changes nothing. Every `job` command sweeps
//! what has expired first (ended jobs after 24 h, [`super::sweep`]). A dead worker is
//! JOB_LOST (exit 1, the log tail in `error.detail`), a job whose progress stopped STALLED
//! (exit 10), one past its limit TIMEOUT (exit 10), a cancelled one CANCELLED (exit 1).

use std::time::{Duration, Instant};

use serde_json::json;

use super::answer::{Answering, tool_prefix, wait_and_answer};
use super::host::{Call, Host};
use super::store::{Jobs, job_failure};
use super::sweep::sweep_ended;
use crate::framework::context::Args;
use crate::framework::envelope::Response;
use crate::framework::failure::Failure;
use crate::runtime::ids::JobId;
use crate::runtime::jobs::{CancelOutcome, JobError, JobStatus};
use crate::runtime::wake::{self, WaitOutcome};

/// How long `job cancel` waits for the worker to acknowledge before answering `cancelling`.
pub const CANCEL_ACK_WAIT: Duration = Duration::from_secs(3);

/// The `ID` argument as a job id; a malformed one is ARG_ERROR 2 (`INVALID_JOB_ID`).
fn job_id_arg(args: &Args) -> Result<JobId, Failure> {
    let text = args.text("id").unwrap_or_default();
    JobId::parse(text).map_err(|e| job_failure(JobError::Id(e)))
}

/// `job wait ID`: holds the caller up to its budget (or an explicit `--timeout`).
pub(super) fn job_wait(host: &Host<'_>, call: &Call<'_>) -> Result<Response, Failure> {
    let id = job_id_arg(&call.args)?;
    let mut jobs = Jobs::open(host, &call.state)?;
    let store = jobs.store.clone();
    sweep_ended(&store, jobs.conn());
    let budget_deadline = call.budget.and_then(|b| b.budget).map(|b| call.invocation.started + b);
    let timeout_deadline = call
        .invocation
        .timeout
        .filter(|_| call.invocation.timeout_explicit)
        .map(|t| call.invocation.started + t);
    let deadline = match (budget_deadline, timeout_deadline) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let answering = Answering {
        host,
        tool: tool_prefix(&call.invocation, &call.state.instance),
        budget_ms: call.budget.and_then(|b| b.meta_budget_ms),
    };
    wait_and_answer(&mut jobs, &answering, &call.state.instance, &id, deadline)
}

/// `job status ID`: the job as it stands, never waiting: not for the job, nor for a state
/// database that another process keeps locked (the job is then read as last written, without
/// settling it).
pub(super) fn job_status(host: &Host<'_>, call: &Call<'_>) -> Result<Response, Failure> {
    let id = job_id_arg(&call.args)?;
    let mut state = call.state.clone();
    state.deadline = Some(Instant::now());
    let mut jobs = Jobs::open(host, &state)?;
    let store = jobs.store.clone();
    sweep_ended(&store, jobs.conn());
    let view = match store.get(jobs.conn(), &call.state.instance, &id) {
        Err(e) if e.is_busy() => store.peek(jobs.conn(), &call.state.instance, &id),
        other => other,
    }
    .map_err(job_failure)?;
    let answering = Answering {
        host,
        tool: tool_prefix(&call.invocation, &call.state.instance),
        budget_ms: Some(0),
    };
    let mut response = answering.answer(&view);
    // It never waits: the budget in force for this call is none.
    response.meta.insert("budget_ms".into(), json!(0));
    Ok(response)
}

/// `job cancel ID`: asks the job to stop and waits briefly for the acknowledgement.
pub(super) fn job_cancel(host: &Host<'_>, call: &Call<'_>) -> Result<Response, Failure> {
    let id = job_id_arg(&call.args)?;
    let mut jobs = Jobs::open(host, &call.state)?;
    let store = jobs.store.clone();
    let instance = call.state.instance.as_str();
    sweep_ended(&store, jobs.conn());
    let state = match store.request_cancel(jobs.conn(), instance, &id).map_err(job_failure)? {
        CancelOutcome::Cancelled => "cancelled",
        CancelOutcome::Cancelling => {
            let deadline = Some(Instant::now() + CANCEL_ACK_WAIT);
            match wake::wait_for_job(&store, jobs.conn(), instance, &id, deadline) {
                Ok(WaitOutcome::Ended(view)) if view.status == JobStatus::Cancelled => "cancelled",
                // It ended another way while the cancel was on its way (finished, lost).
                Ok(WaitOutcome::Ended(_)) => "ended",
                _ => "cancelling",
            }
        }
    };
    Ok(Response::success(json!({
        "effect": "updated",
        "job_id": id.as_str(),
        "state": state,
    })))
}
