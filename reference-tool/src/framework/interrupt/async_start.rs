//! An `async` command (REQ-C-022): the call creates the job (or attaches to the identical
//! invocation's), starts its worker and answers the job descriptor at once
//! (`schemas/job-descriptor.json`); `job status` exits 14 while the job runs.

use serde_json::{Value, json};

use super::answer::tool_prefix;
use super::host::{Call, Host};
use super::limits::{idle_timeout_ms, lifetime_ms};
use super::store::{Jobs, io_failure, job_failure};
use crate::framework::envelope::Response;
use crate::framework::failure::Failure;
use crate::framework::registry::CommandSpec;
use crate::runtime::identity::{InvocationIdentity, normalize_args};
use crate::runtime::jobs::{Claim, JobError, JobStatus, NewJob};
use crate::runtime::process::ProcessIdentity;

/// The poll interval an async job descriptor suggests.
pub const POLL_INTERVAL_MS: u64 = 500;

/// Starts (or attaches to) the job of an async command; the job descriptor.
pub(super) fn start_async(
    host: &Host<'_>,
    spec: &CommandSpec,
    call: &Call<'_>,
) -> Result<Response, Failure> {
    let Call { invocation, state, .. } = call;
    let mut jobs = Jobs::open(host, state)?;
    let instance = state.instance.clone();
    let cwd = std::env::current_dir().map_err(|e| io_failure("no working directory", &e))?;
    let identity = InvocationIdentity {
        command_path: spec.path.clone(),
        args: normalize_args(invocation.argv.get(1..).unwrap_or_default()),
        cwd,
        tool_version: host.version.to_owned(),
        stdin_digest: None,
        idempotency_key: invocation.idempotency_key.clone(),
        instance: instance.clone(),
    };
    let lifetime_ms = lifetime_ms(invocation);
    let new = NewJob {
        identity,
        argv: invocation.argv.clone(),
        owner: ProcessIdentity::current().map_err(|e| io_failure("no process identity", &e))?,
        lifetime_ms,
        idle_timeout_ms: idle_timeout_ms(spec)?,
        stdin_spool: None,
        extra: Value::Null,
    };
    let view = match jobs.store.clone().create_or_attach(jobs.conn(), new).map_err(job_failure)? {
        Claim::Created(view) | Claim::Resumed(view) => {
            let child = host
                .parts
                .launcher
                .launch(&view.dir, &view.record.cwd_path())
                .map_err(|e| io_failure("failed to start the worker", &e))?;
            if let Some(worker) = ProcessIdentity::of(child.id()) {
                match jobs.store.clone().set_owner(
                    jobs.conn(),
                    &instance,
                    &view.record.job_id,
                    worker,
                ) {
                    Ok(()) | Err(JobError::JobEnded { .. }) => {}
                    Err(e) => return Err(job_failure(e)),
                }
            }
            drop(child);
            view
        }
        Claim::Attached(view) | Claim::Ended(view) => view,
    };
    let tool = tool_prefix(invocation, &instance);
    let id = view.record.job_id.as_str();
    let command = |verb: &str| {
        let mut argv = tool.clone();
        argv.extend(["job".into(), verb.into(), id.into()]);
        crate::runtime::quote::quote_argv(&argv)
    };
    let status = match view.status {
        JobStatus::Running | JobStatus::Paused => "running",
        JobStatus::Succeeded => "complete",
        JobStatus::Cancelled => "cancelled",
        _ => "failed",
    };
    let descriptor = json!({
        "job_id": id,
        "status": status,
        "terminal": status != "running",
        "status_command": command("status"),
        "wait_command": command("wait"),
        "cancel_command": command("cancel"),
        "poll_interval_ms": POLL_INTERVAL_MS,
        "timeout_ms": lifetime_ms,
    });
    Ok(Response::success(descriptor))
}
