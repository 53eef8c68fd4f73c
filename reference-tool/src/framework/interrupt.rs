//! Stage 6: the interruption runtime wired into dispatch ("Work Outlives the Caller's Budget",
//! CONTRACT §3–§6).
//!
//! [`handles`] picks the commands that go through here instead of the plain supervised run:
//! every command declaring `interruption`, every `async` command, and the `job` built-ins.
//!
//! # The call budget (REQ-F-080)
//!
//! [`resolve_call_budget`]: `--budget` > `AGENT_CALL_BUDGET_MS` > 30000 ms, `0` switches it off,
//! and a call with stdin on a terminal and no `--budget` has none (and no `meta.budget_ms`).
//! [`stamp_budget`] writes `meta.budget_ms` into every response after validation, the
//! idempotency replay included, and adds the `BUDGET_ENV_INVALID` warning when the variable was
//! malformed. The budget never changes the work, so it is not part of a job's identity.
//!
//! # An interruptible command's call (the front process)
//!
//! 1. The state DB and job store are opened; an argument `-` (read stdin) spools stdin into the
//!    state dir first, and its digest joins the identity.
//! 2. The identity (command, normalized argv, cwd, version, stdin digest, idempotency key —
//!    for a writer the effective key, given or derived — and instance) is claimed:
//!    - the identical invocation's job runs: this call behaves as `job wait` with its budget;
//!    - `detach: true`: a worker is spawned (`<exe> __worker <job dir>`, its own session, its
//!      own stdio) and the call waits on the job until its budget, a SIGTERM, or the job's
//!      end; then it answers the final response or INCOMPLETE `running`. The front never
//!      waits on the worker process and exits at once, which releases the caller's pipes;
//!    - `resume: true` only: the work runs here, stopping at its next checkpoint once the
//!      budget is spent (or on SIGTERM): INCOMPLETE `paused` with the original invocation as
//!      `continue_command` (plus `--idempotency-key <effective key>` for a writer).
//! 3. The job's limits: `--timeout` (or `max_lifetime_ms`, default one hour) from the job's
//!    creation, across continuations; `idle_timeout_ms` (default 300000) for the watchdog. The
//!    test knob `REFTOOL_IDLE_TIMEOUT_MS` overrides a command's idle timeout (tests provoke
//!    STALLED with it in seconds, not minutes).
//!
//! # The worker
//!
//! `reftool __worker <job dir>` (recognized before clap; `main` detaches it first): re-parses
//! the job's argv, runs the same job work, and records the final envelope as the job's
//! outcome, which rings every waiter's doorbell (a FIFO per waiter).
//!
//! # `async` commands (REQ-C-022)
//!
//! The call creates (or attaches to) the job, spawns the worker and answers the job descriptor
//! at once (`schemas/job-descriptor.json`); `job status` exits 14 while it runs.
//!
//! # The `job` built-ins
//!
//! `job wait ID` holds the caller up to its budget (the final response with the job's own exit
//! code, or INCOMPLETE with fresh progress); `job status ID` never waits (`meta.budget_ms` 0);
//! `job cancel ID` stops the job at its next safe point and discards its checkpoint (exit 0,
//! `state` `cancelled`, or `cancelling` when the worker did not acknowledge within
//! [`CANCEL_ACK_WAIT`]). A malformed id is ARG_ERROR 2 (`INVALID_JOB_ID`), an unknown id or
//! another instance's job NOT_FOUND 5 (`JOB_NOT_FOUND`), a cancel of an ended job PRECONDITION 4
//! (`JOB_ENDED`) that changes nothing. Ended jobs are removed after 24 h (every `job` command
//! sweeps). A dead worker is JOB_LOST (exit 1, the log tail in `error.detail`), a job whose
//! progress stopped STALLED (exit 10), one past its limit TIMEOUT (exit 10), a cancelled one
//! CANCELLED (exit 1).

use std::ffi::OsString;
use std::io::IsTerminal;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::{Value, json};

use super::app::{App, IdempotencyRecord, args_digest, respond};
use super::context::{Args, Ctx, Failure, Invocation, Phase, Warning};
use super::envelope::Response;
use super::exit::Exit;
use super::registry::CommandSpec;
use super::state::{DEFAULT_INSTANCE, Migration, StateConfig, StateDb, StateError};
use super::stop::StopToken;
use crate::runtime::budget::{BUDGET_ENV, BudgetInputs, ResolvedBudget, resolve_budget};
use crate::runtime::checkpoint::SavedCheckpoint;
use crate::runtime::context::JobContext;
use crate::runtime::fsutil::read_json;
use crate::runtime::identity::{InvocationIdentity, normalize_args};
use crate::runtime::ids::JobId;
use crate::runtime::incomplete::{self, IncompleteState};
use crate::runtime::jobs::{
    self, CancelOutcome, Claim, JOB_FILE, JobError, JobOutcome, JobRecord, JobStatus, JobStore,
    JobView, NewJob, PauseOutcome,
};
use crate::runtime::process::ProcessIdentity;
use crate::runtime::progress::ProgressReporter;
use crate::runtime::stop::StopReason;
use crate::runtime::wake::{self, WaitOutcome};
use crate::runtime::worker::{self, WorkEnd};

/// Test knob: overrides every command's `idle_timeout_ms` (milliseconds, 1–86400000).
pub const IDLE_TIMEOUT_ENV: &str = "REFTOOL_IDLE_TIMEOUT_MS";
/// How long `job cancel` waits for the worker to acknowledge before answering `cancelling`.
pub const CANCEL_ACK_WAIT: Duration = Duration::from_secs(3);
/// The poll interval an async job descriptor suggests.
pub const POLL_INTERVAL_MS: u64 = 500;
/// A lifetime that never ends in practice (`--timeout 0`): a hundred years.
const UNBOUNDED_LIFETIME_MS: u64 = 100 * 365 * 24 * 3600 * 1000;

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

/// Resolves the call budget of an invocation (see the module docs).
pub fn resolve_call_budget(invocation: &Invocation) -> ResolvedBudget {
    let flag = invocation.budget_flag.map(|d| d.as_millis().to_string());
    let env = std::env::var_os(BUDGET_ENV).map(|v| v.to_string_lossy().into_owned());
    let inputs = BudgetInputs {
        flag: flag.as_deref(),
        env: env.as_deref(),
        stdin_is_terminal: invocation.modes.interactive,
    };
    // The flag was already parsed as a duration in validation, so this cannot fail; stay
    // unbounded-but-recorded if it ever did.
    resolve_budget(&inputs).unwrap_or(ResolvedBudget {
        budget: None,
        meta_budget_ms: Some(0),
        source: crate::runtime::budget::BudgetSource::Flag,
        warnings: Vec::new(),
    })
}

/// Records the budget in force in `meta.budget_ms` (unless the answer set its own) and adds
/// the budget's warnings.
pub fn stamp_budget(response: &mut Response, budget: &ResolvedBudget) {
    if let Some(ms) = crate::mutants::stamped_budget_ms(response, budget.meta_budget_ms) {
        response.meta.entry("budget_ms").or_insert(json!(ms));
    }
    for w in &budget.warnings {
        response.warnings.push(Warning { code: w.code.to_owned(), message: w.message.clone() });
    }
}

/// Stage 6 for a command [`handles`] accepts.
pub(crate) fn dispatch(app: &App, spec: &CommandSpec, call: Call<'_>) -> Response {
    let result = match spec.path.as_str() {
        "job.wait" => job_wait(app, &call),
        "job.status" if crate::mutants::job_status_waits() => job_wait(app, &call),
        "job.status" => job_status(app, &call),
        "job.cancel" => job_cancel(app, &call),
        _ if spec.is_async => start_async(app, spec, &call),
        _ => front(app, spec, call),
    };
    result.unwrap_or_else(Response::failure)
}

// ---------------------------------------------------------------------------------------------
// Shared pieces

/// The job store and the state DB of one call.
struct Jobs {
    store: JobStore,
    db: StateDb,
}

impl Jobs {
    fn open(app: &App, state: &StateConfig) -> Result<Jobs, Failure> {
        let db = StateDb::open(state, app.state_migrations())?;
        let dir = state.ensure_dir()?;
        Ok(Jobs { store: JobStore::new(dir), db })
    }

    fn conn(&mut self) -> &Connection {
        self.db.conn()
    }
}

/// The runtime's migrations, in the framework's form, for [`App::add_state_migrations`].
pub fn runtime_migrations() -> Vec<Migration> {
    jobs::migrations().iter().map(|m| Migration { id: m.name, sql: m.sql }).collect()
}

/// A job-store error as the answer the contract asks for.
fn job_failure(error: JobError) -> Failure {
    match error {
        JobError::NotFound(id) => {
            Failure::new(Exit::NOT_FOUND, "JOB_NOT_FOUND", format!("no job {id} in this instance"))
                .retryable(false)
                .suggestion("check the id and --instance-id; finished jobs are kept for 24 hours")
        }
        JobError::JobEnded { id, status } => Failure::new(
            Exit::PRECONDITION,
            "JOB_ENDED",
            format!("job {id} already ended ({}); nothing was changed", status.as_str()),
        )
        .retryable(false)
        .context(json!({"job_id": id.as_str(), "status": status.as_str()})),
        JobError::Id(e) => Failure::arg("INVALID_JOB_ID", e.to_string())
            .suggestion("use the job_id of an INCOMPLETE response or a job descriptor"),
        JobError::Db(e) => {
            let busy = matches!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
            );
            if busy {
                Failure::new(
                    Exit::UNAVAILABLE,
                    "STATE_BUSY",
                    format!("the job table stayed locked: {e}"),
                )
                .retryable(true)
                .retry_after_ms(1000)
            } else {
                Failure::internal(format!("the job table failed: {e}"))
            }
        }
        other => Failure::internal(other.to_string()),
    }
}

fn io_failure(what: &str, error: &std::io::Error) -> Failure {
    Failure::internal(format!("{what}: {error}"))
}

/// `argv[0]` as invoked, plus `--instance-id` when a non-default instance is in force.
fn tool_prefix(invocation: &Invocation, instance: &str) -> Vec<OsString> {
    let argv0 = invocation.argv.first().cloned().unwrap_or_else(|| OsString::from("reftool"));
    let instance = (instance != DEFAULT_INSTANCE).then_some(instance);
    incomplete::tool_prefix(&argv0, instance)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The job's idle timeout: the test knob, else the declaration, else the default.
fn idle_timeout_ms(spec: &CommandSpec) -> Result<u64, Failure> {
    if let Some(raw) = std::env::var_os(IDLE_TIMEOUT_ENV) {
        let text = raw.to_string_lossy();
        return match text.trim().parse::<u64>() {
            Ok(ms) if (1..=86_400_000).contains(&ms) => Ok(ms),
            _ => Err(Failure::arg(
                "ENV_INVALID",
                format!("{IDLE_TIMEOUT_ENV} must be whole milliseconds, 1-86400000, got {text:?}"),
            )),
        };
    }
    Ok(spec.interruption.and_then(|i| i.idle_timeout_ms).unwrap_or(jobs::DEFAULT_IDLE_TIMEOUT_MS))
}

/// Whether the command reads stdin: an argument `-`.
fn reads_stdin(args: &Args) -> bool {
    args.values.values().any(|v| matches!(v, super::context::ArgValue::Text(t) if t == "-"))
}

/// Rebuilds a [`Response`] from an envelope stored as a job's outcome; meta is this call's.
fn response_from_envelope(envelope: &Value, exit_code: u8) -> Response {
    let exit = Exit(exit_code);
    let data = envelope.get("data").cloned().unwrap_or(Value::Null);
    let warnings = envelope
        .get("warnings")
        .and_then(Value::as_array)
        .map(|ws| {
            ws.iter()
                .map(|w| Warning {
                    code: w.get("code").and_then(Value::as_str).unwrap_or("WARNING").to_owned(),
                    message: w.get("message").and_then(Value::as_str).unwrap_or("").to_owned(),
                })
                .collect()
        })
        .unwrap_or_default();
    let mut response = match envelope.get("error").filter(|e| e.is_object()) {
        None => Response::success(data),
        Some(error) => {
            let text = |k: &str| error.get(k).and_then(Value::as_str).map(str::to_owned);
            let mut failure = Failure::new(
                exit,
                &text("code").unwrap_or_else(|| "GENERAL_ERROR".into()),
                text("message").unwrap_or_default(),
            );
            failure.detail = text("detail");
            failure.suggestion = text("suggestion");
            failure.context = error.get("context").cloned();
            failure.retryable = error.get("retryable").and_then(Value::as_bool);
            failure.retry_after_ms = error.get("retry_after_ms").and_then(Value::as_u64);
            failure.phase = match text("phase").as_deref() {
                Some("validation") => Phase::Validation,
                Some("cleanup") => Phase::Cleanup,
                _ => Phase::Execution,
            };
            if !data.is_null() {
                failure.data = Some(data);
            }
            Response::failure(failure)
        }
    };
    response.exit = exit;
    response.warnings = warnings;
    if let Some(hit) = envelope.pointer("/meta/idempotency_hit") {
        response.meta.insert("idempotency_hit".into(), hit.clone());
    }
    response
}

/// How a caller learns about a job: the final answer, or INCOMPLETE.
struct Answering<'a> {
    app: &'a App,
    tool: Vec<OsString>,
    /// `meta.budget_ms` of an INCOMPLETE answer (for its message).
    budget_ms: Option<u64>,
}

impl Answering<'_> {
    /// The answer for `view` as it stands.
    fn answer(&self, view: &JobView) -> Response {
        if let Some(outcome) = &view.outcome {
            return self.ended(view, outcome);
        }
        match view.status {
            JobStatus::Running => {
                Response::failure(self.incomplete(view, IncompleteState::Running))
            }
            JobStatus::Paused => Response::failure(self.incomplete(view, IncompleteState::Paused)),
            status => Response::failure(Failure::internal(format!(
                "job {} is {} but has no outcome",
                view.record.job_id,
                status.as_str()
            ))),
        }
    }

    fn ended(&self, view: &JobView, outcome: &JobOutcome) -> Response {
        if let Some(envelope) = &outcome.response {
            return response_from_envelope(envelope, outcome.exit_code);
        }
        let id = view.record.job_id.as_str();
        let Some(failure) = &outcome.failure else {
            return Response::failure(Failure::internal(format!(
                "job {id} ended without a result"
            )));
        };
        let resumable = self
            .app
            .registry()
            .get(&view.record.command_path)
            .and_then(|s| s.interruption)
            .is_some_and(|i| i.resume);
        let mut answer = Failure::new(Exit(outcome.exit_code), &failure.code, &failure.message)
            .retryable(false)
            .context(json!({"job_id": id, "status": outcome.status.as_str()}));
        if let Some(detail) = &failure.detail {
            answer = answer.detail(detail.clone());
        }
        let suggestion = match (failure.code.as_str(), resumable) {
            (jobs::JOB_LOST, true) => {
                Some("run the identical invocation again: it continues from the last checkpoint")
            }
            (jobs::JOB_LOST, false) => Some("run the identical invocation again"),
            (jobs::STALLED, _) => Some("check the input source: the work made no progress"),
            (jobs::TIMEOUT, _) => Some("raise --timeout if the work needs longer"),
            _ => None,
        };
        if let Some(s) = suggestion {
            answer = answer.suggestion(s);
        }
        Response::failure(answer)
    }

    fn incomplete(&self, view: &JobView, state: IncompleteState) -> Failure {
        let record = &view.record;
        let spec = self.app.registry().get(&record.command_path);
        let retryable = spec.and_then(|s| s.entry(Exit::INCOMPLETE)).is_none_or(|e| e.retryable);
        let writes = spec.is_some_and(|s| s.danger_level.writes());
        let data = match state {
            IncompleteState::Running => {
                incomplete::running(&self.tool, &record.job_id, view.progress.clone())
            }
            IncompleteState::Paused => incomplete::paused(
                &record.argv_os(),
                &self.tool,
                &record.job_id,
                view.progress.clone(),
                record.idempotency_key.as_deref().filter(|_| writes),
            ),
        };
        let data = serde_json::to_value(&data).unwrap_or(Value::Null);
        Failure::new(
            Exit::INCOMPLETE,
            "INCOMPLETE",
            incomplete::message(state, self.budget_ms, &view.progress),
        )
        .retryable(crate::mutants::incomplete_retryable(writes, retryable))
        .with_data(data)
    }
}

// ---------------------------------------------------------------------------------------------
// The front process of an interruptible command

fn front(app: &App, spec: &CommandSpec, call: Call<'_>) -> Result<Response, Failure> {
    let Call { args, invocation, state, budget, idempotency } = call;
    let interruption = spec.interruption.ok_or_else(|| Failure::internal("not interruptible"))?;
    let budget_deadline = budget.and_then(|b| b.budget).map(|b| invocation.started + b);
    let idle_ms = idle_timeout_ms(spec)?;
    let mut jobs = Jobs::open(app, &state)?;
    let instance = state.instance.clone();
    let spool = if reads_stdin(&args) {
        Some(
            jobs.store
                .spool_stdin(&instance, std::io::stdin().lock())
                .map_err(|e| io_failure("failed to spool stdin", &e))?,
        )
    } else {
        None
    };
    let cwd = std::env::current_dir().map_err(|e| io_failure("no working directory", &e))?;
    let identity = InvocationIdentity {
        command_path: spec.path.clone(),
        args: normalize_args(invocation.argv.get(1..).unwrap_or_default()),
        cwd,
        tool_version: crate::mutants::identity_version(app.version(), interruption.detach),
        stdin_digest: spool.as_ref().map(|s| s.digest.clone()),
        idempotency_key: invocation.idempotency_key.clone(),
        instance: instance.clone(),
    };
    let identity =
        if spec.danger_level.writes() { identity.with_effective_key() } else { identity };
    let owner = ProcessIdentity::current().map_err(|e| io_failure("no process identity", &e))?;
    let new = NewJob {
        identity,
        argv: invocation.argv.clone(),
        owner,
        lifetime_ms: invocation.timeout.map_or(UNBOUNDED_LIFETIME_MS, millis),
        idle_timeout_ms: idle_ms,
        stdin_spool: spool.map(|s| s.path),
        extra: Value::Null,
    };
    let answering = Answering {
        app,
        tool: tool_prefix(&invocation, &instance),
        budget_ms: budget.and_then(|b| b.meta_budget_ms),
    };
    let claim =
        wake::claim(&jobs.store.clone(), jobs.conn(), new, budget_deadline).map_err(job_failure)?;
    let view = match claim {
        Claim::Attached(view) => {
            return wait_and_answer(
                &mut jobs,
                &answering,
                &instance,
                &view.record.job_id,
                budget_deadline,
            );
        }
        Claim::Ended(view) => return Ok(answering.answer(&view)),
        Claim::Created(view) => {
            crate::mutants::stale_cancel_on_birth(
                &jobs.store.clone(),
                jobs.conn(),
                &instance,
                &view,
            );
            // Retention is enforced whenever a job is born, not only when someone asks about
            // jobs: an agent that never runs a `job` command leaves no pile behind.
            let _ = jobs.store.clone().cleanup_expired(jobs.conn(), jobs::RETENTION_MS);
            view
        }
        Claim::Resumed(view) => view,
    };
    sweep_stale_checkpoint_temps(&jobs.store, &view);
    if interruption.detach {
        let id = view.record.job_id.clone();
        if interruption.resume {
            seed_progress(spec, &args, &jobs.store, &view);
        }
        let child = worker::spawn_worker(&view.dir, &view.record.cwd_path());
        let child = match child {
            Ok(child) => child,
            Err(e) => {
                let outcome = JobOutcome::failed(
                    JobStatus::Lost,
                    jobs::EXIT_GENERAL_ERROR,
                    jobs::JOB_LOST,
                    format!("job {id} could not start its worker: {e}"),
                    None,
                );
                let _ = jobs.store.clone().finish(jobs.conn(), &instance, &id, &outcome);
                return Err(io_failure("failed to start the worker", &e));
            }
        };
        if let Some(worker) = ProcessIdentity::of(child.id()) {
            // JobEnded: the worker was faster and already finished. Fine.
            match jobs.store.clone().set_owner(jobs.conn(), &instance, &id, worker) {
                Ok(()) | Err(JobError::JobEnded { .. }) => {}
                Err(e) => return Err(job_failure(e)),
            }
        }
        // Never wait on the child: it runs on in its own session after this process exits.
        drop(child);
        return wait_and_answer(&mut jobs, &answering, &instance, &id, budget_deadline);
    }
    run_inline(
        app,
        spec,
        InlineRun { args, invocation, state, budget_deadline, idempotency },
        &mut jobs,
        &answering,
        view,
    )
}

/// Removes the temporary files a killed owner left beside this invocation's file checkpoint
/// (an atomic write is a temp file renamed into place; `kill -9` between the two leaves the
/// temp). The caller now owns the job, so no other process writes this checkpoint.
fn sweep_stale_checkpoint_temps(store: &JobStore, view: &JobView) {
    let path = store.checkpoint_path(&view.record.instance, &view.record.identity);
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else { return };
    let prefix = format!(".{}.tmp-", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// How old a temp file beside a checkpoint must be before any `job` command removes it (a
/// live atomic write lasts milliseconds).
const STALE_TEMP_AGE: Duration = Duration::from_secs(600);

/// The `job` commands' sweep (beside the runtime's retention): temp files of atomic
/// checkpoint writes whose writer was killed and whose invocation was never repeated.
fn sweep_old_checkpoint_temps(store: &JobStore) {
    let Ok(instances) = std::fs::read_dir(store.state_dir().join("checkpoints")) else { return };
    for instance in instances.flatten() {
        let Ok(entries) = std::fs::read_dir(instance.path()) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age >= STALE_TEMP_AGE);
            if name.starts_with('.') && name.contains(".tmp-") && old {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
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
        let mut reporter = ProgressReporter::new(Some(view.dir.clone()))
            .with_floor(view.progress.clone())
            .strict(false);
        let _ = reporter.report(saved.done, view.progress.total, view.progress.unit.as_deref());
        let _ = reporter.flush();
    }
}

/// Waits on a job until `deadline` (or SIGTERM) and answers from it.
fn wait_and_answer(
    jobs: &mut Jobs,
    answering: &Answering<'_>,
    instance: &str,
    id: &JobId,
    deadline: Option<Instant>,
) -> Result<Response, Failure> {
    let sigterm = answering.app.sigterm_flag();
    let store = jobs.store.clone();
    let view = if std::io::stderr().is_terminal() {
        wait_with_bar(&store, jobs.conn(), instance, id, deadline, &sigterm)?
    } else {
        match wake::wait_for_job_interruptible(
            &store,
            jobs.conn(),
            instance,
            id,
            deadline,
            &sigterm,
        )
        .map_err(job_failure)?
        {
            WaitOutcome::Ended(view) | WaitOutcome::Pending(view) => view,
        }
    };
    if sigterm.load(std::sync::atomic::Ordering::SeqCst) {
        // Handed off on SIGTERM, not at the budget: the message must not claim otherwise.
        let handed_off =
            Answering { app: answering.app, tool: answering.tool.clone(), budget_ms: None };
        return Ok(handed_off.answer(&view));
    }
    Ok(answering.answer(&view))
}

/// How often a person's progress bar follows a job it waits on.
const BAR_REFRESH: Duration = Duration::from_millis(200);

/// [`wake::wait_for_job_interruptible`] in short slices, drawing the job's progress on stderr
/// (a terminal) between them: a person waiting on a detached job sees it advance.
fn wait_with_bar(
    store: &JobStore,
    conn: &Connection,
    instance: &str,
    id: &JobId,
    deadline: Option<Instant>,
    sigterm: &std::sync::atomic::AtomicBool,
) -> Result<JobView, Failure> {
    let bar =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{spinner} {pos}/{len} {msg} {elapsed}")
    {
        bar.set_style(style);
    }
    loop {
        let slice = Instant::now() + BAR_REFRESH;
        let until = deadline.map_or(slice, |d| d.min(slice));
        let outcome =
            wake::wait_for_job_interruptible(store, conn, instance, id, Some(until), sigterm)
                .map_err(job_failure)?;
        let view = match outcome {
            WaitOutcome::Ended(view) => {
                bar.finish_and_clear();
                return Ok(view);
            }
            WaitOutcome::Pending(view) => view,
        };
        if let Some(total) = view.progress.total {
            bar.set_length(total);
        }
        bar.set_position(view.progress.done);
        if let Some(unit) = &view.progress.unit {
            bar.set_message(unit.clone());
        }
        let out_of_time = deadline.is_some_and(|d| Instant::now() >= d);
        let interrupted = sigterm.load(std::sync::atomic::Ordering::SeqCst);
        if out_of_time || interrupted || view.status == JobStatus::Paused {
            bar.abandon();
            return Ok(view);
        }
    }
}

struct InlineRun {
    args: Args,
    invocation: Invocation,
    state: StateConfig,
    budget_deadline: Option<Instant>,
    idempotency: Option<StateDb>,
}

/// A resume-only command: the work runs in this process, stopping at a checkpoint.
fn run_inline(
    app: &App,
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
    let conn = jobs.conn();
    let stop =
        JobContext::standard_stop(&store, conn, &view, Some(app.sigterm_flag()), budget_deadline);
    let mut job = JobContext::new(&store, view, stop);
    let mut ctx = Ctx::new(args, invocation, state, StopToken::new());
    ctx.set_state_migrations(app.state_migrations().to_vec());
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| work(&mut ctx, &mut job)))
        .unwrap_or_else(|_| Err(Failure::internal("internal error: the command panicked")));
    let _ = job.flush_progress();
    drop(job);
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
            let mut response = if reason == StopReason::Terminated {
                // Paused on SIGTERM, not at the budget: the message must not claim otherwise.
                let paused =
                    Answering { app: answering.app, tool: answering.tool.clone(), budget_ms: None };
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

fn fill_retryable(spec: &CommandSpec, response: &mut Response) {
    if let Some(failure) = &mut response.error
        && failure.retryable.is_none()
    {
        failure.retryable = spec.entry(failure.exit).map(|e| e.retryable);
    }
}

// ---------------------------------------------------------------------------------------------
// async commands

fn start_async(app: &App, spec: &CommandSpec, call: &Call<'_>) -> Result<Response, Failure> {
    let Call { invocation, state, .. } = call;
    let mut jobs = Jobs::open(app, state)?;
    let instance = state.instance.clone();
    let cwd = std::env::current_dir().map_err(|e| io_failure("no working directory", &e))?;
    let identity = InvocationIdentity {
        command_path: spec.path.clone(),
        args: normalize_args(invocation.argv.get(1..).unwrap_or_default()),
        cwd,
        tool_version: app.version().to_owned(),
        stdin_digest: None,
        idempotency_key: invocation.idempotency_key.clone(),
        instance: instance.clone(),
    };
    let lifetime_ms = invocation.timeout.map_or(UNBOUNDED_LIFETIME_MS, millis);
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
            let child = worker::spawn_worker(&view.dir, &view.record.cwd_path())
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
    Ok(Response::success(crate::mutants::async_descriptor(descriptor)))
}

// ---------------------------------------------------------------------------------------------
// The job built-ins

fn job_id_arg(args: &Args) -> Result<JobId, Failure> {
    let text = args.text("id").unwrap_or_default();
    JobId::parse(text).map_err(|e| job_failure(JobError::Id(e)))
}

fn job_wait(app: &App, call: &Call<'_>) -> Result<Response, Failure> {
    let id = job_id_arg(&call.args)?;
    let mut jobs = Jobs::open(app, &call.state)?;
    let _ = jobs.store.clone().cleanup_expired(jobs.conn(), jobs::RETENTION_MS);
    sweep_old_checkpoint_temps(&jobs.store);
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
        app,
        tool: tool_prefix(&call.invocation, &call.state.instance),
        budget_ms: call.budget.and_then(|b| b.meta_budget_ms),
    };
    let answer = wait_and_answer(&mut jobs, &answering, &call.state.instance, &id, deadline);
    answer.map(crate::mutants::job_wait_answer)
}

fn job_status(app: &App, call: &Call<'_>) -> Result<Response, Failure> {
    let id = job_id_arg(&call.args)?;
    let mut jobs = Jobs::open(app, &call.state)?;
    let store = jobs.store.clone();
    let _ = store.cleanup_expired(jobs.conn(), jobs::RETENTION_MS);
    sweep_old_checkpoint_temps(&store);
    let view = store.get(jobs.conn(), &call.state.instance, &id).map_err(job_failure)?;
    let answering = Answering {
        app,
        tool: tool_prefix(&call.invocation, &call.state.instance),
        budget_ms: Some(0),
    };
    let mut response = crate::mutants::job_status_answer(app, &view, answering.answer(&view));
    // It never waits: the budget in force for this call is none.
    response.meta.insert("budget_ms".into(), json!(0));
    Ok(response)
}

fn job_cancel(app: &App, call: &Call<'_>) -> Result<Response, Failure> {
    let id = job_id_arg(&call.args)?;
    let mut jobs = Jobs::open(app, &call.state)?;
    let store = jobs.store.clone();
    let instance = crate::mutants::cancel_instance(jobs.conn(), &id, &call.state.instance);
    let instance = instance.as_str();
    let _ = store.cleanup_expired(jobs.conn(), jobs::RETENTION_MS);
    sweep_old_checkpoint_temps(&store);
    let state = match request_cancel(&store, jobs.conn(), instance, &id).map_err(job_failure)? {
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

/// Asks job `id` to stop at its next safe point; a job that already ended refuses
/// (`JobEnded`) and nothing changes.
fn request_cancel(
    store: &JobStore,
    conn: &Connection,
    instance: &str,
    id: &JobId,
) -> Result<CancelOutcome, JobError> {
    let requested = store.request_cancel(conn, instance, id);
    crate::mutants::after_cancel_request(store, conn, instance, id, &requested);
    requested
}

// ---------------------------------------------------------------------------------------------
// The worker

/// `reftool __worker <job dir>`: runs a job's work and records its outcome; the exit status.
pub(crate) fn run_worker(app: &App, argv: &[OsString]) -> u8 {
    let Some(dir) = worker::worker_job_dir(argv) else {
        return Exit::ARG_ERROR.code();
    };
    match worker_inner(app, &dir) {
        Ok(code) => code,
        Err(message) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr().lock(), "reftool worker: {message}");
            Exit::GENERAL_ERROR.code()
        }
    }
}

fn worker_inner(app: &App, dir: &Path) -> Result<u8, String> {
    let record: JobRecord = read_json(&dir.join(JOB_FILE))
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{} is not a job directory", dir.display()))?;
    let state = StateConfig::from_env(record.instance.clone()).map_err(|f| f.message)?;
    let mut db =
        StateDb::open(&state, app.state_migrations()).map_err(|e: StateError| e.to_string())?;
    let store = JobStore::new(state.ensure_dir().map_err(|e| e.to_string())?);
    let sigterm = app.sigterm_flag();
    {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr().lock(),
            "reftool worker {}: job {} ({}) started",
            std::process::id(),
            record.job_id,
            record.command_path
        );
    }
    let conn: &Connection = db.conn();
    worker::worker_main(&store, conn, dir, Some(sigterm), |job| worker_work(app, job))
        .map_err(|e| e.to_string())
}

/// The job's work in the worker: the same function the front of a resume command runs.
fn worker_work(app: &App, job: &mut JobContext<'_>) -> WorkEnd {
    let argv = job.job().record.argv_os();
    let finished = |response: Response| WorkEnd::Finished {
        exit_code: response.exit.code(),
        response: response.to_json(),
    };
    let prepared = match app.prepare_for_worker(argv) {
        Ok(prepared) => prepared,
        Err(failure) => return finished(Response::failure(*failure)),
    };
    let (spec, prepared) = prepared;
    let Some(work) = spec.job_run.clone() else {
        return finished(Response::failure(Failure::internal("the job's command has no job work")));
    };
    let super::app::Prepared { args, invocation, state, .. } = prepared;
    let test_mode = invocation.test_mode;
    let key = invocation.idempotency_key.clone();
    let digest = args_digest(&spec.path, &args);
    let instance = state.instance.clone();
    let mut ctx = Ctx::new(args, invocation, state.clone(), StopToken::new());
    ctx.set_state_migrations(app.state_migrations().to_vec());
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| work(&mut ctx, job)))
        .unwrap_or_else(|_| Err(Failure::internal("internal error: the command panicked")));
    if let Err(failure) = &result
        && let Some(reason) = failure.job_stop
    {
        return WorkEnd::Stopped(reason);
    }
    let mut idempotency = match (&key, spec.danger_level.writes()) {
        (Some(_), true) => StateDb::open(&state, app.state_migrations()).ok(),
        _ => None,
    };
    let record = idempotency.as_mut().zip(key.as_deref()).map(|(db, key)| IdempotencyRecord {
        db,
        instance: &instance,
        key,
        digest: &digest,
    });
    let mut response =
        respond(spec, result, ctx.take_warnings(), ctx.take_meta(), test_mode, record);
    fill_retryable(spec, &mut response);
    finished(response)
}

/// Maps a work-level error of the runtime (checkpoint or progress) to a failure.
pub fn runtime_failure(error: impl std::fmt::Display) -> Failure {
    Failure::internal(format!("the job runtime failed: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_envelope_answers_again_as_it_was() {
        let mut failure = Failure::new(Exit::PRECONDITION, "INPUT_NOT_TEXT", "not text")
            .detail("byte 3")
            .suggestion("fix it")
            .context(json!({"line": 3}))
            .retryable(false)
            .phase(Phase::Validation);
        failure.retry_after_ms = Some(5);
        let mut original = Response::failure(failure);
        original.warnings.push(Warning { code: "W".into(), message: "w".into() });
        let envelope = original.to_json();
        let again = response_from_envelope(&envelope, 4);
        assert_eq!(again.to_json(), envelope);

        let ok = Response::success(json!({"rows": 3}));
        assert_eq!(response_from_envelope(&ok.to_json(), 0).to_json(), ok.to_json());
    }

    #[test]
    fn job_store_errors_become_the_contracts_answers() {
        let id = JobId::generate().unwrap();
        let cases = [
            (job_failure(JobError::NotFound(id.to_string())), Exit::NOT_FOUND, "JOB_NOT_FOUND"),
            (
                job_failure(JobError::JobEnded { id: id.clone(), status: JobStatus::Succeeded }),
                Exit::PRECONDITION,
                "JOB_ENDED",
            ),
            (
                job_failure(JobError::Id(JobId::parse("../x").unwrap_err())),
                Exit::ARG_ERROR,
                "INVALID_JOB_ID",
            ),
        ];
        for (failure, exit, code) in cases {
            assert_eq!((failure.exit, failure.code.as_str()), (exit, code));
        }
    }

    #[test]
    fn the_budget_is_stamped_once_with_its_warnings() {
        let budget = ResolvedBudget {
            budget: None,
            meta_budget_ms: Some(30_000),
            source: crate::runtime::budget::BudgetSource::Default,
            warnings: vec![crate::runtime::warning::RuntimeWarning {
                code: crate::runtime::warning::BUDGET_ENV_INVALID,
                message: "ignored".into(),
                context: None,
            }],
        };
        let mut response = Response::success(json!({}));
        response.meta.insert("budget_ms".into(), json!(0));
        stamp_budget(&mut response, &budget);
        assert_eq!(response.meta["budget_ms"], 0, "an answer's own value stands");
        assert_eq!(response.warnings[0].code, "BUDGET_ENV_INVALID");
        let terminal = ResolvedBudget { meta_budget_ms: None, warnings: vec![], ..budget };
        let mut response = Response::success(json!({}));
        stamp_budget(&mut response, &terminal);
        assert!(!response.meta.contains_key("budget_ms"));
    }
}
