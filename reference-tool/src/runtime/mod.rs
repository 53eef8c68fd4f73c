//! The interruption runtime: call budgets, detached jobs, progress, checkpoints and the
//! INCOMPLETE response ("Work Outlives the Caller's Budget", docs/contract.md §3–§6).
//!
//! The runtime knows nothing of the framework: it takes plain values, paths, a
//! `&rusqlite::Connection` to the state DB, and closures. One generic job store serves every
//! detaching command, every resume-only command (its paused state is a job too) and every
//! `async` command; no command keeps a private task protocol.
//!
//! # Modules
//!
//! | module | concern |
//! |---|---|
//! | [`quote`] | POSIX quoting of an argv, so `sh -c "$line"` runs exactly it |
//! | [`ids`] | job ids (`job_` + 32 hex, 128 random bits), strict validation, instance dir names |
//! | [`identity`] | the identity key of an invocation; normalized args; derived idempotency keys |
//! | [`process`] | a process as pid + start time (a reused pid is not the worker) |
//! | [`jobs`] | the job store: job dirs, the `reftool_jobs` table, claim / pause / finish / cancel / settle / retention |
//! | [`wake`] | `job wait`: doorbell wake-up on the job's end or pause, liveness checks while waiting |
//! | [`doorbell`] | per-waiter FIFOs in `<job dir>/waiters/`, rung by whoever ends or pauses the job |
//! | [`worker`] | spawning the detached worker by re-exec; `worker_main` |
//! | [`context`] | [`context::JobContext`]: what a command's work gets (progress, safe points, stops) |
//! | [`progress`] | throttled, monotonic progress; `progress.json`; a bar on a terminal |
//! | [`checkpoint`] | file checkpoints, and checkpoints inside a writer's own SQLite transaction |
//! | [`target`] | a writer's claim on its target: one writer at a time, checkpoints that name the target's state |
//! | [`stop`] | stop requests (budget, SIGTERM, cancel, lifetime), honoured at safe points |
//! | [`incomplete`] | `data` and `error.message` of the INCOMPLETE response |
//! | [`fsutil`], [`warning`] | atomic writes, clock; envelope-shaped warnings |
//! | [`sha256`] | SHA-256 whose running state a checkpoint can hold |
//! | [`parts`] | what a tool chooses: job naming, the progress sink, the worker launcher, the checkpoint commit |
//!
//! # State on disk
//!
//! The state DB gets the table of [`jobs::migrations`] (`reftool_jobs`, with a UNIQUE index on
//! `(instance, identity)` over running/paused jobs); job directories live under
//! `<state_dir>/jobs/<instance_dir>/<job_id>/` (`job.json`, `progress.json`, `result.json`,
//! `log`, `stdin`, `waiters/`), file checkpoints under
//! `<state_dir>/checkpoints/<instance_dir>/`; a writer's checkpoint is a row of
//! `reftool_checkpoints` in its target database. See [`jobs`].
//!
//! # Wiring it into the framework
//!
//! The framework builds its job stores and starts its workers from the tool's [`Parts`].
//!
//! **Every interruptible command, front process.**
//! 1. Validation phase: the call budget (the framework's, `framework::budget`).
//! 2. Open the state DB (busy timeout, WAL), run [`jobs::migrations`] once, and now and then
//!    [`jobs::JobStore::cleanup_expired`]`(conn, `[`jobs::RETENTION_MS`]`)`.
//! 3. A command reading stdin: [`jobs::JobStore::spool_stdin`] first (its digest is part of
//!    the identity), bounded by a size cap and the call's deadline ([`spool`]).
//! 4. Identity: [`identity::InvocationIdentity`] with [`identity::normalize_args`] of the
//!    arguments after argv\[0\], the cwd, the version, the stdin digest, the caller's
//!    `--idempotency-key`, the instance; for a writer
//!    [`identity::InvocationIdentity::with_effective_key`].
//! 5. [`wake::claim`] (= [`jobs::JobStore::create_or_attach`], but never attaching to a job
//!    with a pending cancel; deadline = the budget's) with `owner = ProcessIdentity::current()`,
//!    `lifetime_ms` = `--timeout` or `max_lifetime_ms` (default
//!    [`jobs::DEFAULT_MAX_LIFETIME_MS`]), `idle_timeout_ms` (default
//!    [`jobs::DEFAULT_IDLE_TIMEOUT_MS`]), the spool. Then by [`jobs::Claim`]:
//!    - `Attached`: behave exactly as `job wait <id>` with this call's budget.
//!    - `Ended`: answer with the job's outcome (see "answering from a job" below).
//!    - `Created`/`Resumed`, **`detach: true`**: the [`worker::Launcher`]'s
//!      `launch(&view.dir, &cwd)` ([`worker::spawn_worker`] in reftool),
//!      [`jobs::JobStore::set_owner`] with [`process::ProcessIdentity::of`]`(child.id())`, then
//!      [`wake::wait_for_job_interruptible`] with the budget's deadline (`None` when off) and
//!      the SIGTERM flag. `Ended` → answer from the job; `Pending` → INCOMPLETE
//!      [`incomplete::running`] (exit 14). Never wait on the child: it runs on.
//!    - `Created`/`Resumed`, **resume only**: run the work here:
//!      `JobContext::new(&store, view, JobContext::standard_stop(&store, &conn, &view,
//!      Some(sigterm), budget_deadline))` and the same work function the worker runs. Its
//!      [`worker::WorkEnd`]: `Finished` → [`jobs::JobStore::finish`] and print;
//!      `Stopped(Budget | Terminated)` → [`jobs::JobStore::pause`]: `Paused` → INCOMPLETE
//!      [`incomplete::paused`]`(argv, tool, id, ctx.latest_progress(), writer_key)`,
//!      `CancelRequested` → as `Cancelled`; `Stopped(Cancelled)` →
//!      [`jobs::JobStore::finish_cancelled`] (a writer also removes its target-DB checkpoint);
//!      `Stopped(Lifetime)` → finish with TIMEOUT (10).
//!    - **`async: true`** commands: `Created` → spawn the worker as above and answer the job
//!      descriptor at once; `Attached` → the same descriptor.
//!
//! **The worker.** In `main`, before clap: if [`worker::worker_job_dir`] finds
//! `__worker DIR`, call [`worker::detach_self`] FIRST, then open the state DB, install the SIGTERM
//! flag, and exit with [`worker::worker_main`]`(&store, &conn, &dir, Some(flag), |ctx| ...)`;
//! the closure re-parses `ctx.job().record.argv_os()` and runs the command's work.
//!
//! **A command's work** (same code in worker and front): restore
//! (`ctx.file_checkpoints(fp).restore()` or `ctx.sqlite_checkpoints(fp).restore(&db,
//! |id| store.was_cancelled(&conn, id).unwrap_or(false))`), add its warnings to the response,
//! `ctx.resume_from(restored.done)`, then per unit `ctx.progress(..)` and at safe points
//! `ctx.checkpoint(..)` / `ctx.commit_with(..)`; on `Flow::Stop(r)` return
//! `WorkEnd::Stopped(r)`. A detach-only command asks `ctx.should_stop()` after its progress
//! reports. On completion remove the file checkpoint; a writer calls
//! [`checkpoint::SqliteCheckpoints::finish_in`] on its last transaction, and replays
//! `restored.completed` instead of writing again. A `ProgressError::Backwards` (test mode,
//! `REFTOOL_TEST_MODE=1`) is a framework error.
//!
//! **`job wait <id>`**: [`ids::JobId::parse_os`] (ARG_ERROR 2); resolve its budget; the
//! instance; [`wake::wait_for_job_interruptible`]. `job status <id>`: [`jobs::JobStore::get`]
//! (never waits). `job cancel <id>`: [`jobs::JobStore::request_cancel`]: `Cancelled` /
//! `Cancelling` → exit 0; [`jobs::JobError::JobEnded`] → PRECONDITION 4 `JOB_ENDED`;
//! `NotFound` → NOT_FOUND 5. After `Cancelling`, waiting briefly for the job's end
//! ([`wake::wait_for_job`]) lets the answer say `cancelled`. A front's own
//! [`jobs::JobStore::set_owner`] may meet `JobEnded` (the worker was faster): ignore it.
//!
//! **Answering from a job** ([`jobs::JobView`]): `outcome.response` present → print it
//! verbatim with `outcome.exit_code`; `outcome.failure` present → an error envelope with
//! `failure.code` (`JOB_LOST` exit 1 with the log tail as `error.detail`, `STALLED` / `TIMEOUT`
//! exit 10, `CANCELLED` exit 1); no outcome → INCOMPLETE: `running` ([`incomplete::running`])
//! when `status` is running, `paused` ([`incomplete::paused`] with `record.argv_os()` and
//! `record.idempotency_key` for a writer) when paused; `data.progress` = `view.progress`.
//!
//! `tool` in the INCOMPLETE builders is [`incomplete::tool_prefix`]`(argv0, instance)`: pass
//! the instance whenever a non-default one is in force, flag or environment.

pub mod cancel;
pub mod checkpoint;
pub mod context;
pub mod doorbell;
pub mod fsutil;
pub mod identity;
pub mod ids;
pub mod incomplete;
pub mod jobs;
pub mod parts;
pub mod process;
pub mod progress;
pub mod quote;
pub mod sha256;
pub mod spool;
pub mod stop;
pub mod target;
pub mod wake;
pub mod warning;
pub mod worker;

pub use parts::Parts;
