//! The front process of an interruptible command: the call the caller waits on.
//!
//! 1. The state DB and job store are opened; for a command that reads stdin
//!    ([`CommandSpec::reads_stdin`]), an argument `-` spools stdin into the state dir first,
//!    and its digest joins the identity. The spool is part of the call: it is capped
//!    ([`super::limits::MAX_STDIN_ENV`], default 64 MiB) and ends at the call's deadline (its
//!    budget, else its wall-clock limit, both counted from the call's start) or on SIGTERM;
//!    each of these ends the call with nothing started and no spool left (see
//!    [`spool_failure`] for the answers).
//! 2. The identity (command, normalized argv, cwd, version, stdin digest, idempotency key —
//!    for a writer the effective key, given or derived — and instance) is claimed:
//!    - the identical invocation's job runs: this call behaves as `job wait` with its budget;
//!    - `detach: true`: a worker is spawned (`<exe> __worker <job dir>`, its own session, its
//!      own stdio) and the call waits on the job until its budget, a SIGTERM, or the job's
//!      end; then it answers the final response or INCOMPLETE `running`. The front never
//!      waits on the worker process and exits at once, which releases the caller's pipes;
//!    - `resume: true` only: the work runs here ([`super::inline`]).

use serde_json::{Value, json};

use super::answer::{Answering, tool_prefix, wait_and_answer};
use super::host::{Call, Host};
use super::inline::{InlineRun, run_inline};
use super::limits::{Deadlines, idle_timeout_ms, lifetime_ms, max_lifetime_knob, max_stdin_bytes};
use super::store::{Jobs, io_failure, job_failure};
use super::sweep::sweep_stale_checkpoint_temps;
use crate::framework::context::{Args, Invocation};
use crate::framework::envelope::Response;
use crate::framework::exit::Exit;
use crate::framework::failure::{Failure, Phase, Warning};
use crate::framework::registry::{CommandSpec, Interruption};
use crate::framework::state::{StateConfig, StateDb};
use crate::runtime::checkpoint::SavedCheckpoint;
use crate::runtime::fsutil::read_json;
use crate::runtime::identity::{InvocationIdentity, normalize_args};
use crate::runtime::ids::JobId;
use crate::runtime::jobs::{
    self, Claim, JobError, JobOutcome, JobStatus, JobStore, JobView, NewJob, Spool,
};
use crate::runtime::process::ProcessIdentity;
use crate::runtime::spool::{SpoolError, SpoolLimits};
use crate::runtime::wake;

/// The call of an interruptible command.
pub(super) fn front(
    host: &Host<'_>,
    spec: &CommandSpec,
    call: Call<'_>,
) -> Result<Response, Failure> {
    let Call { args, invocation, state, budget, idempotency } = call;
    let interruption = spec.interruption.ok_or_else(|| Failure::internal("not interruptible"))?;
    let budget_deadline = budget.and_then(|b| b.budget).map(|b| invocation.started + b);
    let idle_ms = idle_timeout_ms(spec)?;
    max_lifetime_knob()?;
    let mut jobs = Jobs::open(host, &state)?;
    let instance = state.instance.clone();
    let spool = if reads_stdin(spec, &args) {
        let timeout = invocation.timeout.map(|t| invocation.started + t);
        let deadlines = Deadlines { budget: budget_deadline, timeout };
        Some(spool_stdin(host, &jobs, &instance, deadlines, budget.and_then(|b| b.meta_budget_ms))?)
    } else {
        None
    };
    let stdin_digest = spool.as_ref().map(|s| s.digest.clone());
    let identity = identity(host, spec, &invocation, &instance, stdin_digest)?;
    let owner = ProcessIdentity::current().map_err(|e| io_failure("no process identity", &e))?;
    let new = NewJob {
        identity,
        argv: invocation.argv.clone(),
        owner,
        lifetime_ms: lifetime_ms(&invocation),
        idle_timeout_ms: idle_ms,
        stdin_spool: spool.map(|s| s.path),
        extra: Value::Null,
    };
    let answering = Answering {
        host,
        tool: tool_prefix(&invocation, &instance),
        budget_ms: budget.and_then(|b| b.meta_budget_ms),
    };
    let store = jobs.store.clone();
    let mut replaced = None;
    let claim = match wake::claim(&store, jobs.conn(), new.clone(), budget_deadline) {
        // The active job's files are unreadable: it is ended, and a new job replaces it.
        Err(JobError::Unreadable { id, path, reason }) => {
            if !store.end_unreadable(jobs.conn(), &instance, &id).map_err(job_failure)? {
                if let Some(spool) = &new.stdin_spool {
                    let _ = std::fs::remove_file(spool);
                }
                return Err(job_failure(JobError::Unreadable { id, path, reason }));
            }
            replaced = Some(Warning {
                code: jobs::JOB_STATE_UNREADABLE.to_owned(),
                message: format!(
                    "job {id} was ended, its state file {} being unreadable ({reason}); this \
                     call's job replaces it and continues from the last checkpoint, if any",
                    path.display()
                ),
            });
            wake::claim(&store, jobs.conn(), new, budget_deadline)
        }
        claimed => claimed,
    }
    .map_err(job_failure)?;
    let mut response = answer_claim(
        host,
        spec,
        claim,
        Claimed { args, invocation, state, budget_deadline, idempotency, interruption },
        &mut jobs,
        &answering,
    )?;
    response.warnings.extend(replaced);
    Ok(response)
}

/// What a claim is answered with, beside the claim itself.
struct Claimed {
    args: Args,
    invocation: Invocation,
    state: StateConfig,
    budget_deadline: Option<std::time::Instant>,
    idempotency: Option<StateDb>,
    interruption: Interruption,
}

/// The answer of a claimed job: attached, ended, handed to a worker, or run here.
fn answer_claim(
    host: &Host<'_>,
    spec: &CommandSpec,
    claim: Claim,
    claimed: Claimed,
    jobs: &mut Jobs,
    answering: &Answering<'_>,
) -> Result<Response, Failure> {
    let Claimed { args, invocation, state, budget_deadline, idempotency, interruption } = claimed;
    let instance = state.instance.clone();
    let view = match claim {
        Claim::Attached(view) => {
            return wait_and_answer(
                jobs,
                answering,
                &view.record.instance,
                &view.record.job_id,
                budget_deadline,
            );
        }
        Claim::Ended(view) => return Ok(answering.answer(&view)),
        Claim::Created(view) => {
            // Retention is enforced whenever a job is born, not only when someone asks about
            // jobs: an agent that never runs a `job` command leaves no pile behind.
            let _ = jobs.store.clone().cleanup_expired(jobs.conn(), jobs::RETENTION_MS);
            view
        }
        Claim::Resumed(view) => view,
    };
    sweep_stale_checkpoint_temps(&jobs.store, &view);
    if interruption.detach {
        if interruption.resume {
            seed_progress(spec, &args, &jobs.store, &view);
        }
        let id = hand_off(host, jobs, &instance, &view)?;
        return wait_and_answer(jobs, answering, &instance, &id, budget_deadline);
    }
    run_inline(
        host,
        spec,
        InlineRun { args, invocation, state, budget_deadline, idempotency },
        jobs,
        answering,
        view,
    )
}

/// Whether this call reads stdin: the command declares an argument that does, and its value
/// is `-`.
fn reads_stdin(spec: &CommandSpec, args: &Args) -> bool {
    spec.stdin_arg.as_deref().is_some_and(|name| args.text(name) == Some("-"))
}

/// Copies stdin into a spool, within the cap and before the first of `deadlines`.
fn spool_stdin(
    host: &Host<'_>,
    jobs: &Jobs,
    instance: &str,
    deadlines: Deadlines,
    budget_ms: Option<u64>,
) -> Result<Spool, Failure> {
    let sigterm = std::sync::Arc::clone(host.sigterm);
    let limits = SpoolLimits {
        max_bytes: max_stdin_bytes()?,
        deadline: deadlines.first(),
        interrupt: Some(&sigterm),
    };
    let spooled = jobs.store.spool_stdin(instance, &mut std::io::stdin().lock(), limits);
    spooled.map_err(|e| match (e, host.cancelled_by()) {
        (SpoolError::Interrupted { .. }, Some(signal)) => {
            Failure::cancelled_by(signal, "nothing was started")
        }
        (e, _) => spool_failure(e, deadlines, budget_ms),
    })
}

/// The answer when stdin could not be spooled. Nothing was started and no spool is left; the
/// part of stdin that was read is gone, so repeating the same call cannot help, and every
/// answer says so (`retryable: false`). What helps is the input as a file, passed by its path:
///
/// - past the cap: ARG_ERROR 2 `STDIN_TOO_LARGE` (REQ-F-054's code and pattern);
/// - at the end of the budget: ARG_ERROR 2 `STDIN_TOO_SLOW`: a piped input the call cannot
///   read within its budget is the wrong form of input for it (a file is read by the job at
///   its own pace, and the budget then hands off as usual);
/// - at the end of the wall-clock limit: TIMEOUT 10, as the limit always answers;
/// - on SIGTERM: 143 `CANCELLED`.
fn spool_failure(error: SpoolError, deadlines: Deadlines, budget_ms: Option<u64>) -> Failure {
    const USE_A_FILE: &str = "write the whole input to a file and pass its path instead of - (this call consumed \
         part of stdin)";
    match error {
        SpoolError::TooLarge { limit } => Failure::arg(
            "STDIN_TOO_LARGE",
            format!(
                "stdin holds more than {limit} bytes, the most a call reads; nothing was started"
            ),
        )
        .context(json!({"limit_bytes": limit}))
        .suggestion(USE_A_FILE),
        SpoolError::TooSlow { received } if deadlines.budget_first() => Failure::arg(
            "STDIN_TOO_SLOW",
            format!(
                "stdin did not end within the call budget of {} ms ({received} bytes read); \
                 nothing was started",
                budget_ms.unwrap_or(0)
            ),
        )
        .context(json!({"budget_ms": budget_ms, "received_bytes": received}))
        .suggestion(USE_A_FILE),
        SpoolError::TooSlow { received } => Failure::new(
            Exit::TIMEOUT,
            "TIMEOUT",
            format!(
                "the wall-clock limit ran out while stdin was read ({received} bytes); nothing \
                 was started"
            ),
        )
        .phase(Phase::Validation)
        .retryable(false)
        .context(json!({"received_bytes": received}))
        .suggestion(USE_A_FILE),
        SpoolError::Interrupted { .. } => Failure::new(
            Exit::SIGTERM,
            "CANCELLED",
            "cancelled by SIGTERM while stdin was read; nothing was started",
        )
        .retryable(false),
        SpoolError::Io(e) => io_failure("failed to spool stdin", &e),
    }
}

/// The identity of an interruptible command's invocation; a writer's carries its effective
/// idempotency key (given or derived).
fn identity(
    host: &Host<'_>,
    spec: &CommandSpec,
    invocation: &Invocation,
    instance: &str,
    stdin_digest: Option<String>,
) -> Result<InvocationIdentity, Failure> {
    let cwd = std::env::current_dir().map_err(|e| io_failure("no working directory", &e))?;
    let identity = InvocationIdentity {
        command_path: spec.path.clone(),
        args: normalize_args(invocation.argv.get(1..).unwrap_or_default()),
        cwd,
        tool_version: host.version.to_owned(),
        stdin_digest,
        idempotency_key: invocation.idempotency_key.clone(),
        instance: instance.to_owned(),
    };
    Ok(if spec.danger_level.writes() { identity.with_effective_key() } else { identity })
}

/// Starts the job's worker and records it as the job's owner; the job's id. A worker that
/// cannot start ends the job as JOB_LOST.
fn hand_off(
    host: &Host<'_>,
    jobs: &mut Jobs,
    instance: &str,
    view: &JobView,
) -> Result<JobId, Failure> {
    let id = view.record.job_id.clone();
    let child = match host.parts.launcher.launch(&view.dir, &view.record.cwd_path()) {
        Ok(child) => child,
        Err(e) => {
            let outcome = JobOutcome::failed(
                JobStatus::Lost,
                jobs::EXIT_GENERAL_ERROR,
                jobs::JOB_LOST,
                format!("job {id} could not start its worker: {e}"),
                None,
            );
            let _ = jobs.store.clone().finish(jobs.conn(), instance, &id, &outcome);
            return Err(io_failure("failed to start the worker", &e));
        }
    };
    if let Some(worker) = ProcessIdentity::of(child.id()) {
        // JobEnded: the worker was faster and already finished. Fine.
        match jobs.store.clone().set_owner(jobs.conn(), instance, &id, worker) {
            Ok(()) | Err(JobError::JobEnded { .. }) => {}
            Err(e) => return Err(job_failure(e)),
        }
    }
    // Never wait on the child: it runs on in its own session after this process exits.
    drop(child);
    Ok(id)
}

/// A new detached job of a resume command starts where its valid file checkpoint stands:
/// its progress is published from the checkpoint before the worker starts (the worker then
/// restores the same checkpoint and never reports below it).
fn seed_progress(spec: &CommandSpec, args: &Args, store: &JobStore, view: &JobView) {
    let Some(fingerprint_of) = &spec.checkpoint_fingerprint else { return };
    let stdin = view.dir.join(jobs::STDIN_FILE);
    let stdin = stdin.exists().then_some(stdin);
    let Some(fingerprint) = fingerprint_of(args, stdin.as_deref()) else { return };
    let path = store.checkpoint_path(&view.record.instance, &view.record.identity);
    let saved: Option<SavedCheckpoint> = read_json(&path).ok().flatten();
    let Some(saved) = saved.filter(|s| s.fingerprint == fingerprint) else { return };
    if saved.done > view.progress.done {
        let mut reporter = store.progress_reporter(view).strict(false);
        let _ = reporter.report(saved.done, view.progress.total, view.progress.unit.as_deref());
        let _ = reporter.flush();
    }
}
