//! The generic job store, shared by every detaching command and by `async` commands.
//!
//! # Layout
//!
//! ```text
//! <state_dir>/jobs/<instance_dir>/<job_id>/   one directory per job (0700 parents)
//!     job.json        JobRecord: id, identity, command path, argv as invoked, cwd, ...
//!     progress.json   ProgressFile: {done, total?, unit?, updated_at_ms, changed_at_ms}
//!     result.json     JobOutcome: status, exit code, the final envelope or the failure
//!     log             the worker's stdout + stderr
//!     stdin           the spooled stdin (when the command reads stdin)
//!     waiters/        one FIFO per waiting process, rung when the job ends or pauses
//! <state_dir>/jobs/<instance_dir>/.spool-*     stdin being spooled, before its job exists
//! <state_dir>/checkpoints/<instance_dir>/<identity>.json   file checkpoints (checkpoint.rs)
//! ```
//!
//! `<instance_dir>` is [`instance_dir_name`]. Every file is written atomically (temp + fsync +
//! rename). A job dir also holds `waiters/`, one FIFO per process waiting on the job: every
//! path that ends a job ([`JobStore::finish`], a cancel, settling a lost / stalled / timed-out
//! job) rings them right after writing `result.json`, and [`JobStore::pause`] after its
//! commit (see `doorbell.rs`, `wake.rs`).
//!
//! # The state-DB table
//!
//! [`migrations`] creates `reftool_jobs` (one row per job: status, owner pid + start time,
//! cancel flag, deadlines) with a UNIQUE partial index on `(instance, identity)` over *active*
//! jobs (`running`, `paused`). Every state change runs in a `BEGIN IMMEDIATE` transaction, so
//! "8 identical invocations at once" yield exactly one job and seven attachments, and exactly
//! one party (the worker completing, a waiter finding it dead or stalled, a cancel) writes the
//! job's final outcome.
//!
//! The row holds the mutable state (status, owner, cancel flag); the files hold the payloads. If
//! a process dies between writing `result.json` and committing, the file wins: readers treat a
//! present `result.json` as the end of the job and repair the row.
//!
//! # Unreadable files
//!
//! Every file is written atomically and fsynced, `progress.json` included (an unsynced rename
//! can leave an empty file after a crash of the machine). A job file that is missing or does
//! not parse all the same (a disk's damage, an edit) makes the job's state unknown: reading
//! it is [`JobError::Unreadable`], naming the file, never a guess. `job cancel` still ends
//! such a job from its row ([`JobStore::request_cancel`]), and the identical invocation ends it
//! as lost with `JOB_STATE_UNREADABLE` ([`JobStore::end_unreadable`]) and starts a new job,
//! which resumes from the invocation's checkpoint when that is intact (checkpoints are files of
//! their own, see `checkpoint.rs`; an unreadable one is discarded with CHECKPOINT_DISCARDED).
//!
//! # Statuses
//!
//! `running` (someone works on it: the detached worker, or the front process of a resume-only
//! command), `paused` (stopped at a checkpoint, waiting for the identical invocation, which
//! takes it over with the same job id so `done` keeps growing), and the ended ones
//! `succeeded`, `failed`, `cancelled`, `lost`, `stalled`, `timed_out`.
//!
//! # Cancel is scoped to its job
//!
//! [`JobStore::request_cancel`] sets a flag in THIS job's row only, and only while it is
//! `running` with a live owner; a paused job, or one whose owner is gone, is ended as
//! `cancelled` at once (and its file checkpoint removed). A cancel of an ended job is
//! [`JobError::JobEnded`] and changes nothing. A job can only be paused while its flag is clear
//! ([`JobStore::pause`]), so a flag never survives into a continuation, and a new job is a new
//! row. Nothing a cancel does can stop a later job.

use std::ffi::OsString;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::sys::signal::Signal;
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};
use serde::{Deserialize, Serialize};

use super::checkpoint::{CheckpointCommit, OneStep};
use super::fsutil::{now_ms, read_json, tail, write_json_atomic};
use super::identity::{IdentityKey, InvocationIdentity, JobNaming, RandomIds, digest_file};
use super::ids::{JobId, JobIdError, instance_dir_name};
use super::process::ProcessIdentity;
use super::progress::{
    PROGRESS_FILE, Progress, ProgressFile, ProgressJson, ProgressReporter, ProgressSink,
};
use super::spool::{SpoolError, SpoolLimits, copy_bounded};

/// Default `idle_timeout_ms`: a job whose `done` has not changed this long is stalled.
pub const DEFAULT_IDLE_TIMEOUT_MS: u64 = 300_000;
/// Default `max_lifetime_ms`: the bound on the whole work when no `--timeout` was given.
pub const DEFAULT_MAX_LIFETIME_MS: u64 = 3_600_000;
/// How long finished jobs are kept.
pub const RETENTION_MS: u64 = 24 * 60 * 60 * 1000;
/// How many bytes of the log a JOB_LOST failure carries.
pub const LOG_TAIL_BYTES: usize = 2000;

/// Exit code GENERAL_ERROR (a lost or cancelled job).
pub const EXIT_GENERAL_ERROR: u8 = 1;
/// Exit code TIMEOUT (a stalled job, or one past its lifetime).
pub const EXIT_TIMEOUT: u8 = 10;

/// Error code of a job whose worker died without a result.
pub const JOB_LOST: &str = "JOB_LOST";
/// Error code of a job ended by the idle watchdog.
pub const STALLED: &str = "STALLED";
/// Error code of a job that exceeded `--timeout` / `max_lifetime_ms`.
pub const TIMEOUT: &str = "TIMEOUT";
/// Error code of a cancelled job.
pub const CANCELLED: &str = "CANCELLED";
/// Error code of a job ended because its state files were unreadable.
pub const JOB_STATE_UNREADABLE: &str = "JOB_STATE_UNREADABLE";

/// File names inside a job directory.
pub const JOB_FILE: &str = "job.json";
/// See [`JOB_FILE`].
pub const RESULT_FILE: &str = "result.json";
/// See [`JOB_FILE`].
pub const LOG_FILE: &str = "log";
/// See [`JOB_FILE`].
pub const STDIN_FILE: &str = "stdin";

/// One schema migration of the state DB.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Stable name, for the framework's migration bookkeeping.
    pub name: &'static str,
    /// SQL to run once (idempotent too: `IF NOT EXISTS`).
    pub sql: &'static str,
}

const MIGRATIONS: &[Migration] = &[Migration {
    name: "runtime-0001-jobs",
    sql: "CREATE TABLE IF NOT EXISTS reftool_jobs (
            job_id           TEXT PRIMARY KEY NOT NULL,
            instance         TEXT NOT NULL,
            identity         TEXT NOT NULL,
            command_path     TEXT NOT NULL,
            status           TEXT NOT NULL CHECK (status IN ('running','paused','succeeded',
                               'failed','cancelled','lost','stalled','timed_out')),
            owner_pid        INTEGER,
            owner_start_time INTEGER,
            cancel_requested INTEGER NOT NULL DEFAULT 0,
            created_at_ms    INTEGER NOT NULL,
            deadline_at_ms   INTEGER NOT NULL,
            idle_timeout_ms  INTEGER NOT NULL,
            ended_at_ms      INTEGER
          );
          CREATE UNIQUE INDEX IF NOT EXISTS reftool_jobs_one_active
            ON reftool_jobs (instance, identity) WHERE status IN ('running', 'paused');
          CREATE INDEX IF NOT EXISTS reftool_jobs_by_end
            ON reftool_jobs (ended_at_ms) WHERE ended_at_ms IS NOT NULL;",
}];

/// The SQL the framework runs on its state DB, in order.
pub fn migrations() -> &'static [Migration] {
    MIGRATIONS
}

/// Runs every migration (all idempotent); convenient for tests and simple setups.
pub fn ensure_schema(conn: &Connection) -> rusqlite::Result<()> {
    for m in MIGRATIONS {
        conn.execute_batch(m.sql)?;
    }
    Ok(())
}

/// Status of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Someone works on it.
    Running,
    /// Stopped at a checkpoint; the identical invocation continues it.
    Paused,
    /// Ended with exit 0.
    Succeeded,
    /// Ended with a non-zero exit of the command itself.
    Failed,
    /// Ended by `job cancel`.
    Cancelled,
    /// Its worker died without a result.
    Lost,
    /// Ended by the idle watchdog.
    Stalled,
    /// Ended by `--timeout` / `max_lifetime_ms`.
    TimedOut,
}

impl JobStatus {
    /// The text stored in the DB.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Running => "running",
            JobStatus::Paused => "paused",
            JobStatus::Succeeded => "succeeded",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled => "cancelled",
            JobStatus::Lost => "lost",
            JobStatus::Stalled => "stalled",
            JobStatus::TimedOut => "timed_out",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "running" => JobStatus::Running,
            "paused" => JobStatus::Paused,
            "succeeded" => JobStatus::Succeeded,
            "failed" => JobStatus::Failed,
            "cancelled" => JobStatus::Cancelled,
            "lost" => JobStatus::Lost,
            "stalled" => JobStatus::Stalled,
            "timed_out" => JobStatus::TimedOut,
            _ => return None,
        })
    }

    /// Running or paused.
    pub fn is_active(self) -> bool {
        matches!(self, JobStatus::Running | JobStatus::Paused)
    }
}

/// An argument that survives JSON whatever its bytes: text, or hex of raw bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StoredArg {
    /// Valid UTF-8.
    Text(String),
    /// Anything else.
    Bytes {
        /// Lowercase hex of the bytes.
        hex: String,
    },
}

impl From<&std::ffi::OsStr> for StoredArg {
    fn from(arg: &std::ffi::OsStr) -> Self {
        match arg.to_str() {
            Some(t) => StoredArg::Text(t.to_owned()),
            None => StoredArg::Bytes {
                hex: arg.as_bytes().iter().map(|b| format!("{b:02x}")).collect(),
            },
        }
    }
}

impl StoredArg {
    /// Back to the exact argument.
    pub fn to_os_string(&self) -> OsString {
        match self {
            StoredArg::Text(t) => OsString::from(t),
            StoredArg::Bytes { hex } => OsString::from_vec(
                (0..hex.len() / 2)
                    .filter_map(|i| {
                        hex.get(2 * i..2 * i + 2).and_then(|h| u8::from_str_radix(h, 16).ok())
                    })
                    .collect(),
            ),
        }
    }
}

/// The static description of a job (`job.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobRecord {
    /// The job's id.
    pub job_id: JobId,
    /// The instance that owns it.
    pub instance: String,
    /// The identity key of the invocation.
    pub identity: IdentityKey,
    /// Dot-separated command path.
    pub command_path: String,
    /// The argv as invoked (argv\[0\] included), for the worker and for `continue_command`.
    pub argv: Vec<StoredArg>,
    /// The working directory of the call.
    pub cwd: StoredArg,
    /// The tool version that created it.
    pub tool_version: String,
    /// The effective idempotency key, if any.
    pub idempotency_key: Option<String>,
    /// Creation time.
    pub created_at_ms: u64,
    /// The work must end by then (`--timeout` or `max_lifetime_ms`, across continuations).
    pub deadline_at_ms: u64,
    /// The idle watchdog's limit.
    pub idle_timeout_ms: u64,
    /// Whatever else the framework needs to run the job (free-form).
    #[serde(default)]
    pub extra: serde_json::Value,
}

impl JobRecord {
    /// The argv as `OsString`s.
    pub fn argv_os(&self) -> Vec<OsString> {
        self.argv.iter().map(StoredArg::to_os_string).collect()
    }

    /// The working directory as a path.
    pub fn cwd_path(&self) -> PathBuf {
        PathBuf::from(self.cwd.to_os_string())
    }
}

/// Why a job ended without a response of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobFailure {
    /// `JOB_LOST`, `STALLED`, `TIMEOUT`, `CANCELLED`.
    pub code: String,
    /// One sentence.
    pub message: String,
    /// E.g. the log tail of a lost job.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub detail: Option<String>,
}

/// The end of a job (`result.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobOutcome {
    /// The final status (never `running`/`paused`).
    pub status: JobStatus,
    /// The exit code `job wait` answers with.
    pub exit_code: u8,
    /// The command's own final envelope, when it produced one.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub response: Option<serde_json::Value>,
    /// The runtime's reason, when the command produced no envelope.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub failure: Option<JobFailure>,
    /// When it ended.
    pub ended_at_ms: u64,
}

impl JobOutcome {
    /// The command finished and gave `response` with `exit_code`.
    pub fn finished(exit_code: u8, response: serde_json::Value) -> Self {
        JobOutcome {
            status: if exit_code == 0 { JobStatus::Succeeded } else { JobStatus::Failed },
            exit_code,
            response: Some(response),
            failure: None,
            ended_at_ms: now_ms(),
        }
    }

    /// A runtime-made end.
    pub fn failed(
        status: JobStatus,
        exit_code: u8,
        code: &str,
        message: String,
        detail: Option<String>,
    ) -> Self {
        JobOutcome {
            status,
            exit_code,
            response: None,
            failure: Some(JobFailure { code: code.to_owned(), message, detail }),
            ended_at_ms: now_ms(),
        }
    }

    /// A cancelled job.
    pub fn cancelled(id: &JobId) -> Self {
        Self::failed(
            JobStatus::Cancelled,
            EXIT_GENERAL_ERROR,
            CANCELLED,
            format!("job {id} was cancelled"),
            None,
        )
    }
}

/// Everything known about a job right now.
#[derive(Debug, Clone, PartialEq)]
pub struct JobView {
    /// `job.json`.
    pub record: JobRecord,
    /// The status (from `result.json` when present, else the row).
    pub status: JobStatus,
    /// Latest persisted progress (zero when none was reported yet).
    pub progress: Progress,
    /// When `done` last changed (creation time when never).
    pub progress_changed_at_ms: u64,
    /// The outcome, once ended.
    pub outcome: Option<JobOutcome>,
    /// Whether a cancel is pending.
    pub cancel_requested: bool,
    /// Who runs it (while running).
    pub owner: Option<ProcessIdentity>,
    /// The job directory.
    pub dir: PathBuf,
}

/// Errors of the job store.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// No such job in this instance (also: another instance's job; never leaked).
    #[error("no job {0} in this instance")]
    NotFound(String),
    /// The job already ended; nothing was changed.
    #[error("job {id} already ended ({})", status.as_str())]
    JobEnded {
        /// The job.
        id: JobId,
        /// How it ended.
        status: JobStatus,
    },
    /// A malformed id.
    #[error(transparent)]
    Id(#[from] JobIdError),
    /// The state DB failed.
    #[error("failed to use the job table: {0}")]
    Db(#[from] rusqlite::Error),
    /// A job file could not be read or written.
    #[error("failed to access job files: {0}")]
    Io(#[from] io::Error),
    /// A job row holds something unreadable.
    #[error("corrupt job state: {0}")]
    Corrupt(String),
    /// A file of the job's directory is missing or unreadable (torn by a crash, emptied,
    /// edited): the job's state is unknown. `job cancel` ends such a job, and the identical
    /// invocation replaces it ([`JobStore::end_unreadable`]).
    #[error("job {id}'s state file {} is unreadable: {reason}", path.display())]
    Unreadable {
        /// The job.
        id: JobId,
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

impl JobError {
    /// Whether the state database stayed locked (by another process) past the wait allowed.
    pub fn is_busy(&self) -> bool {
        matches!(self, JobError::Db(e) if matches!(
            e.sqlite_error_code(),
            Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
        ))
    }
}

/// What the caller asks to run.
#[derive(Debug, Clone)]
pub struct NewJob {
    /// The identity (its key and fields are stored).
    pub identity: InvocationIdentity,
    /// The argv as invoked.
    pub argv: Vec<OsString>,
    /// Who works on it at first (usually the calling process; the worker re-registers itself).
    pub owner: ProcessIdentity,
    /// `--timeout` if given, else `max_lifetime_ms` (default [`DEFAULT_MAX_LIFETIME_MS`]).
    pub lifetime_ms: u64,
    /// `idle_timeout_ms` (default [`DEFAULT_IDLE_TIMEOUT_MS`]).
    pub idle_timeout_ms: u64,
    /// A stdin spool made by [`JobStore::spool_stdin`]: moved into the job dir on creation,
    /// deleted otherwise.
    pub stdin_spool: Option<PathBuf>,
    /// Free-form data for the worker.
    pub extra: serde_json::Value,
}

/// The answer of [`JobStore::create_or_attach`].
#[derive(Debug, Clone, PartialEq)]
pub enum Claim {
    /// A new job; the caller owns it and must start the work.
    Created(JobView),
    /// The identical invocation is running elsewhere: behave as `job wait`.
    Attached(JobView),
    /// A paused job is now running again, owned by the caller: restore its checkpoint and go on.
    Resumed(JobView),
    /// The active job had to be ended now (its lifetime is over); answer with its outcome.
    Ended(JobView),
}

/// The answer of [`JobStore::request_cancel`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelOutcome {
    /// The job is ended as cancelled (it was paused, or nobody was running it).
    Cancelled,
    /// The flag is set; the owner stops at its next checkpoint or progress report.
    Cancelling,
}

/// The answer of [`JobStore::pause`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PauseOutcome {
    /// Paused; answer INCOMPLETE `paused`.
    Paused,
    /// A cancel arrived first: end the job with [`JobStore::finish_cancelled`] instead.
    CancelRequested,
}

/// A stdin spool: a file in the state dir and the digest of its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spool {
    /// The spool file (same file system as the job dirs).
    pub path: PathBuf,
    /// sha256 hex of the content (for [`InvocationIdentity::stdin_digest`]).
    pub digest: String,
}

fn immediate(conn: &Connection) -> rusqlite::Result<Transaction<'_>> {
    Transaction::new_unchecked(conn, TransactionBehavior::Immediate)
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn to_u64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

struct Row {
    status: JobStatus,
    owner: Option<ProcessIdentity>,
    cancel_requested: bool,
    identity: IdentityKey,
}

/// The job store rooted at a state directory, with the naming of its jobs, the sink of their
/// progress and how their checkpoints are made durable.
#[derive(Debug, Clone)]
pub struct JobStore {
    state_dir: PathBuf,
    naming: Arc<dyn JobNaming>,
    progress: Arc<dyn ProgressSink>,
    checkpoints: Arc<dyn CheckpointCommit>,
}

impl JobStore {
    /// A store under `state_dir` (the framework's per-user state dir), with reftool's naming
    /// ([`RandomIds`]), progress files ([`ProgressJson`]) and checkpoints ([`OneStep`]).
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        JobStore {
            state_dir: state_dir.into(),
            naming: Arc::new(RandomIds),
            progress: Arc::new(ProgressJson),
            checkpoints: Arc::new(OneStep),
        }
    }

    /// This store, making its jobs' checkpoints durable with `checkpoints`.
    pub fn committing_with(mut self, checkpoints: Arc<dyn CheckpointCommit>) -> Self {
        self.checkpoints = checkpoints;
        self
    }

    /// How this store's jobs make their checkpoints durable.
    pub fn checkpoint_commit(&self) -> Arc<dyn CheckpointCommit> {
        Arc::clone(&self.checkpoints)
    }

    /// This store, keying and naming its jobs with `naming`.
    pub fn named_by(mut self, naming: Arc<dyn JobNaming>) -> Self {
        self.naming = naming;
        self
    }

    /// This store, publishing its jobs' progress through `progress`.
    pub fn publishing_to(mut self, progress: Arc<dyn ProgressSink>) -> Self {
        self.progress = progress;
        self
    }

    /// The progress reporter of work on `job`: it starts from what the job published and
    /// publishes through this store's sink.
    pub fn progress_reporter(&self, job: &JobView) -> ProgressReporter {
        ProgressReporter::for_job(&job.dir, job.progress.clone(), Arc::clone(&self.progress))
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// `<state_dir>/jobs/<instance_dir>`.
    pub fn instance_dir(&self, instance: &str) -> PathBuf {
        self.state_dir.join("jobs").join(instance_dir_name(instance))
    }

    /// `<state_dir>/jobs/<instance_dir>/<job_id>`.
    pub fn job_dir(&self, instance: &str, id: &JobId) -> PathBuf {
        self.instance_dir(instance).join(id.as_str())
    }

    /// `<state_dir>/checkpoints/<instance_dir>/<identity>.json`, where file checkpoints live.
    pub fn checkpoint_path(&self, instance: &str, identity: &IdentityKey) -> PathBuf {
        self.state_dir
            .join("checkpoints")
            .join(instance_dir_name(instance))
            .join(format!("{}.json", identity.as_str()))
    }

    fn ensure_dir(path: &Path) -> io::Result<()> {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(path)
    }

    /// Copies `input` (the caller's stdin) into a spool file within `limits` and digests it,
    /// before the job exists (the digest is part of the identity). On any error the spool is
    /// removed: nothing is left behind ([`super::spool`]).
    pub fn spool_stdin(
        &self,
        instance: &str,
        input: &mut (impl io::Read + AsFd),
        limits: SpoolLimits<'_>,
    ) -> Result<Spool, SpoolError> {
        let dir = self.instance_dir(instance);
        Self::ensure_dir(&dir)?;
        let mut suffix = [0u8; 8];
        getrandom::fill(&mut suffix).map_err(|e| io::Error::other(e.to_string()))?;
        let name: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
        let path = dir.join(format!(".spool-{name}"));
        let mut file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
        let spooled = copy_bounded(input, &mut file, limits)
            .and_then(|_| file.sync_all().map_err(SpoolError::Io))
            .and_then(|()| digest_file(&path).map_err(SpoolError::Io));
        match spooled {
            Ok(digest) => Ok(Spool { path, digest }),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(e)
            }
        }
    }

    fn read_row(tx: &Connection, instance: &str, id: &JobId) -> Result<Option<Row>, JobError> {
        let row = tx
            .query_row(
                "SELECT status, owner_pid, owner_start_time, cancel_requested, identity
                 FROM reftool_jobs WHERE job_id = ?1 AND instance = ?2",
                params![id.as_str(), instance],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, Option<i64>>(1)?,
                        r.get::<_, Option<i64>>(2)?,
                        r.get::<_, i64>(3)?,
                        r.get::<_, String>(4)?,
                    ))
                },
            )
            .optional()?;
        let Some((status, pid, start, cancel, identity)) = row else {
            return Ok(None);
        };
        let status = JobStatus::parse(&status)
            .ok_or_else(|| JobError::Corrupt(format!("status {status:?}")))?;
        let owner = match (pid, start) {
            (Some(pid), Some(start)) => Some(ProcessIdentity {
                pid: u32::try_from(pid).map_err(|_| JobError::Corrupt("owner pid".into()))?,
                start_time: to_u64(start),
            }),
            _ => None,
        };
        Ok(Some(Row {
            status,
            owner,
            cancel_requested: cancel != 0,
            identity: IdentityKey(identity),
        }))
    }

    fn view(&self, instance: &str, id: &JobId, row: &Row) -> Result<JobView, JobError> {
        let dir = self.job_dir(instance, id);
        let record: JobRecord =
            read_job_file(id, &dir, JOB_FILE)?.ok_or_else(|| JobError::Unreadable {
                id: id.clone(),
                path: dir.join(JOB_FILE),
                reason: "it is missing".into(),
            })?;
        let outcome: Option<JobOutcome> = read_job_file(id, &dir, RESULT_FILE)?;
        let progress: Option<ProgressFile> = read_job_file(id, &dir, PROGRESS_FILE)?;
        Ok(JobView {
            status: outcome.as_ref().map_or(row.status, |o| o.status),
            progress_changed_at_ms: progress
                .as_ref()
                .map_or(record.created_at_ms, |p| p.changed_at_ms),
            progress: progress.map(|p| p.progress).unwrap_or_default(),
            outcome,
            cancel_requested: row.cancel_requested,
            owner: row.owner,
            record,
            dir,
        })
    }

    /// Writes the outcome and ends the row, inside `tx`. Returns false if the job had already
    /// ended (then nothing is written).
    fn end_in(
        &self,
        tx: &Connection,
        instance: &str,
        id: &JobId,
        outcome: &JobOutcome,
    ) -> Result<bool, JobError> {
        let Some(row) = Self::read_row(tx, instance, id)? else {
            return Err(JobError::NotFound(id.to_string()));
        };
        let dir = self.job_dir(instance, id);
        if !row.status.is_active() {
            return Ok(false);
        }
        // An unreadable outcome file is no outcome: this one replaces it.
        if let Ok(Some(existing)) = read_json::<JobOutcome>(&dir.join(RESULT_FILE)) {
            // The file won an earlier race with a crash: repair the row.
            self.set_ended(tx, id, &existing)?;
            return Ok(false);
        }
        Self::ensure_dir(&dir)?;
        write_json_atomic(&dir.join(RESULT_FILE), outcome)?;
        // The outcome file is what a waiter answers from: wake them now, not at the commit.
        super::doorbell::ring(&dir);
        self.set_ended(tx, id, outcome)?;
        if ProgressFile::read(&dir).is_err() {
            // An ended job's progress is final; an unreadable one must not hide its outcome.
            let _ = std::fs::remove_file(dir.join(PROGRESS_FILE));
        }
        if outcome.status == JobStatus::Cancelled {
            let _ = std::fs::remove_file(self.checkpoint_path(instance, &row.identity));
        }
        Ok(true)
    }

    fn set_ended(&self, tx: &Connection, id: &JobId, outcome: &JobOutcome) -> Result<(), JobError> {
        tx.execute(
            "UPDATE reftool_jobs SET status = ?2, ended_at_ms = ?3, owner_pid = NULL,
                 owner_start_time = NULL WHERE job_id = ?1",
            params![id.as_str(), outcome.status.as_str(), to_i64(outcome.ended_at_ms)],
        )?;
        Ok(())
    }

    /// Decides, inside `tx`, whether an active job must end now (result file present, owner
    /// dead, stalled, past its deadline) and ends it. Returns the up-to-date view.
    fn settle(
        &self,
        tx: &Connection,
        instance: &str,
        id: &JobId,
        now: u64,
    ) -> Result<JobView, JobError> {
        let row =
            Self::read_row(tx, instance, id)?.ok_or_else(|| JobError::NotFound(id.to_string()))?;
        let view = self.view(instance, id, &row)?;
        if !row.status.is_active() {
            return Ok(view);
        }
        if let Some(outcome) = &view.outcome {
            self.set_ended(tx, id, outcome)?;
            return Ok(view);
        }
        let Some(outcome) = Self::verdict(&row, &view, id, now) else {
            return Ok(view);
        };
        let won = self.end_in(tx, instance, id, &outcome)?;
        if won && matches!(outcome.status, JobStatus::Stalled | JobStatus::TimedOut) {
            // Only a detached worker (a session leader) is killed, and only after its outcome
            // is on disk (the worker's own watchdog may be the one killing it); a front process
            // is the caller's own process and learns of the end at its next safe point.
            if let Some(owner) =
                row.owner.filter(|o| o.pid != std::process::id() && is_session_leader(o.pid))
            {
                owner.signal_if_alive(Signal::SIGKILL);
            }
        }
        let row =
            Self::read_row(tx, instance, id)?.ok_or_else(|| JobError::NotFound(id.to_string()))?;
        self.view(instance, id, &row)
    }

    /// Whether an active job must end now, and how: its worker exited without a result
    /// (JOB_LOST, or CANCELLED when a cancel was pending), it is past its deadline (TIMEOUT),
    /// or its progress stopped for its idle timeout (STALLED).
    fn verdict(row: &Row, view: &JobView, id: &JobId, now: u64) -> Option<JobOutcome> {
        let owner_alive = row.owner.is_some_and(|o| o.is_alive());
        if row.status == JobStatus::Running && !owner_alive {
            Some(if row.cancel_requested {
                JobOutcome::cancelled(id)
            } else {
                JobOutcome::failed(
                    JobStatus::Lost,
                    EXIT_GENERAL_ERROR,
                    JOB_LOST,
                    format!("job {id} ended without a result; its worker exited"),
                    Some(tail(&view.dir.join(LOG_FILE), LOG_TAIL_BYTES)),
                )
            })
        } else if now >= view.record.deadline_at_ms {
            Some(JobOutcome::failed(
                JobStatus::TimedOut,
                EXIT_TIMEOUT,
                TIMEOUT,
                format!("job {id} exceeded its time limit"),
                None,
            ))
        } else if row.status == JobStatus::Running
            && now.saturating_sub(view.progress_changed_at_ms) >= view.record.idle_timeout_ms
        {
            Some(JobOutcome::failed(
                JobStatus::Stalled,
                EXIT_TIMEOUT,
                STALLED,
                format!(
                    "job {id} reported no progress for {}ms; it was stopped",
                    view.record.idle_timeout_ms
                ),
                None,
            ))
        } else {
            None
        }
    }

    /// Creates a job for `new`, or attaches to / resumes the active job of the same identity.
    /// Race-free across processes (one `BEGIN IMMEDIATE` transaction).
    pub fn create_or_attach(&self, conn: &Connection, new: NewJob) -> Result<Claim, JobError> {
        let result = self.create_or_attach_inner(conn, &new);
        if let Some(spool) = &new.stdin_spool
            && !matches!(result, Err(JobError::Unreadable { .. }))
        {
            // Moved into the job dir on creation; otherwise it is not needed (except by the
            // claim that follows the replacement of an unreadable job: `end_unreadable`).
            let _ = std::fs::remove_file(spool);
        }
        result
    }

    fn create_or_attach_inner(&self, conn: &Connection, new: &NewJob) -> Result<Claim, JobError> {
        let instance = new.identity.instance.as_str();
        let key = self.naming.key(&new.identity);
        let now = now_ms();
        let tx = immediate(conn)?;
        // An invocation attaches only to a job of its own instance.
        let active: Option<String> = tx
            .query_row(
                "SELECT job_id FROM reftool_jobs WHERE instance = ?1 AND identity = ?2
                   AND status IN ('running', 'paused')",
                params![instance, key.as_str()],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(active) = active {
            let id = JobId::parse(&active)?;
            let view = self.settle(&tx, instance, &id, now)?;
            match view.status {
                JobStatus::Running => {
                    tx.commit()?;
                    return Ok(Claim::Attached(view));
                }
                JobStatus::Paused => {
                    tx.execute(
                        "UPDATE reftool_jobs SET status = 'running', owner_pid = ?2,
                             owner_start_time = ?3 WHERE job_id = ?1",
                        params![id.as_str(), new.owner.pid, to_i64(new.owner.start_time)],
                    )?;
                    // The idle clock restarts: the time spent paused is nobody's silence.
                    let restarted = ProgressFile {
                        progress: view.progress.clone(),
                        updated_at_ms: now,
                        changed_at_ms: now,
                    };
                    write_json_atomic(&view.dir.join(PROGRESS_FILE), &restarted)?;
                    let row = Self::read_row(&tx, instance, &id)?
                        .ok_or_else(|| JobError::NotFound(active.clone()))?;
                    let view = self.view(instance, &id, &row)?;
                    tx.commit()?;
                    return Ok(Claim::Resumed(view));
                }
                JobStatus::TimedOut => {
                    tx.commit()?;
                    return Ok(Claim::Ended(view));
                }
                // Lost / cancelled / ended meanwhile: a new job takes over (resume commands
                // continue from their checkpoint).
                _ => {}
            }
        }
        let id = self.naming.new_id()?;
        let dir = self.job_dir(instance, &id);
        Self::ensure_dir(&self.instance_dir(instance))?;
        std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
        let created = (|| -> Result<JobView, JobError> {
            let record = JobRecord {
                job_id: id.clone(),
                instance: instance.to_owned(),
                identity: key.clone(),
                command_path: new.identity.command_path.clone(),
                argv: new.argv.iter().map(|a| StoredArg::from(a.as_os_str())).collect(),
                cwd: StoredArg::from(new.identity.cwd.as_os_str()),
                tool_version: new.identity.tool_version.clone(),
                idempotency_key: new.identity.idempotency_key.clone(),
                created_at_ms: now,
                deadline_at_ms: now.saturating_add(new.lifetime_ms),
                idle_timeout_ms: new.idle_timeout_ms,
                extra: new.extra.clone(),
            };
            if let Some(spool) = &new.stdin_spool {
                std::fs::rename(spool, dir.join(STDIN_FILE))?;
            }
            write_json_atomic(&dir.join(JOB_FILE), &record)?;
            tx.execute(
                "INSERT INTO reftool_jobs (job_id, instance, identity, command_path, status,
                     owner_pid, owner_start_time, created_at_ms, deadline_at_ms, idle_timeout_ms)
                 VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?6, ?7, ?8, ?9)",
                params![
                    id.as_str(),
                    instance,
                    key.as_str(),
                    record.command_path,
                    new.owner.pid,
                    to_i64(new.owner.start_time),
                    to_i64(now),
                    to_i64(record.deadline_at_ms),
                    to_i64(record.idle_timeout_ms)
                ],
            )?;
            let row = Self::read_row(&tx, instance, &id)?
                .ok_or_else(|| JobError::NotFound(id.to_string()))?;
            self.view(instance, &id, &row)
        })();
        match created {
            Ok(view) => {
                tx.commit()?;
                Ok(Claim::Created(view))
            }
            Err(e) => {
                drop(tx);
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    /// Reads a job of this instance, settling it first (lost, stalled, timed out are ended
    /// now, never waited on). Another instance's job is [`JobError::NotFound`].
    pub fn get(&self, conn: &Connection, instance: &str, id: &JobId) -> Result<JobView, JobError> {
        let tx = immediate(conn)?;
        let view = self.settle(&tx, instance, id, now_ms())?;
        tx.commit()?;
        Ok(view)
    }

    /// Reads a job without changing anything (no settling).
    pub fn peek(&self, conn: &Connection, instance: &str, id: &JobId) -> Result<JobView, JobError> {
        let row = Self::read_row(conn, instance, id)?
            .ok_or_else(|| JobError::NotFound(id.to_string()))?;
        self.view(instance, id, &row)
    }

    /// Records who works on a running job (the worker registers itself after `setsid`).
    pub fn set_owner(
        &self,
        conn: &Connection,
        instance: &str,
        id: &JobId,
        owner: ProcessIdentity,
    ) -> Result<(), JobError> {
        let n = conn.execute(
            "UPDATE reftool_jobs SET owner_pid = ?3, owner_start_time = ?4
             WHERE job_id = ?1 AND instance = ?2 AND status = 'running'",
            params![id.as_str(), instance, owner.pid, to_i64(owner.start_time)],
        )?;
        if n == 1 { Ok(()) } else { Err(self.ended_or_missing(conn, instance, id)) }
    }

    fn ended_or_missing(&self, conn: &Connection, instance: &str, id: &JobId) -> JobError {
        match Self::read_row(conn, instance, id) {
            Ok(Some(row)) => JobError::JobEnded { id: id.clone(), status: row.status },
            Ok(None) => JobError::NotFound(id.to_string()),
            Err(e) => e,
        }
    }

    /// Ends a job with its outcome. Returns false when it had already ended (someone else —
    /// a waiter that found it stalled, a cancel — wrote the outcome first).
    pub fn finish(
        &self,
        conn: &Connection,
        instance: &str,
        id: &JobId,
        outcome: &JobOutcome,
    ) -> Result<bool, JobError> {
        let tx = immediate(conn)?;
        let won = self.end_in(&tx, instance, id, outcome)?;
        tx.commit()?;
        Ok(won)
    }

    /// Ends a job as cancelled and removes its file checkpoint (the owner saw the flag).
    pub fn finish_cancelled(
        &self,
        conn: &Connection,
        instance: &str,
        id: &JobId,
    ) -> Result<bool, JobError> {
        self.finish(conn, instance, id, &JobOutcome::cancelled(id))
    }

    /// A resume-only front process stops at a checkpoint: the job becomes `paused`, unless a
    /// cancel was requested first.
    pub fn pause(
        &self,
        conn: &Connection,
        instance: &str,
        id: &JobId,
    ) -> Result<PauseOutcome, JobError> {
        let tx = immediate(conn)?;
        let row =
            Self::read_row(&tx, instance, id)?.ok_or_else(|| JobError::NotFound(id.to_string()))?;
        if row.status != JobStatus::Running {
            return Err(JobError::JobEnded { id: id.clone(), status: row.status });
        }
        if row.cancel_requested {
            return Ok(PauseOutcome::CancelRequested);
        }
        tx.execute(
            "UPDATE reftool_jobs SET status = 'paused', owner_pid = NULL, owner_start_time = NULL
             WHERE job_id = ?1",
            params![id.as_str()],
        )?;
        tx.commit()?;
        // Waiters (an attached identical invocation) answer `paused` at once.
        super::doorbell::ring(&self.job_dir(instance, id));
        Ok(PauseOutcome::Paused)
    }

    /// `job cancel`: see the module docs.
    pub fn request_cancel(
        &self,
        conn: &Connection,
        instance: &str,
        id: &JobId,
    ) -> Result<CancelOutcome, JobError> {
        let tx = immediate(conn)?;
        let status = match self.settle(&tx, instance, id, now_ms()) {
            Ok(view) => view.status,
            // Its files are unreadable, its row is not: the row decides.
            Err(JobError::Unreadable { .. }) => {
                let row = Self::read_row(&tx, instance, id)?
                    .ok_or_else(|| JobError::NotFound(id.to_string()))?;
                let nobody_works = row.owner.is_none_or(|o| !o.is_alive());
                if row.status == JobStatus::Running && nobody_works {
                    JobStatus::Paused
                } else {
                    row.status
                }
            }
            Err(e) => return Err(e),
        };
        match status {
            JobStatus::Paused => {
                self.end_in(&tx, instance, id, &JobOutcome::cancelled(id))?;
                tx.commit()?;
                Ok(CancelOutcome::Cancelled)
            }
            JobStatus::Running => {
                tx.execute(
                    "UPDATE reftool_jobs SET cancel_requested = 1 WHERE job_id = ?1 AND status = 'running'",
                    params![id.as_str()],
                )?;
                tx.commit()?;
                Ok(CancelOutcome::Cancelling)
            }
            status => {
                // An ended job keeps its outcome and gets no flag. What settling found (a lost
                // or stalled job) is kept, as any other read would record it.
                let _ = tx.commit();
                Err(JobError::JobEnded { id: id.clone(), status })
            }
        }
    }

    /// Ends a job whose files are unreadable ([`JobError::Unreadable`]) and that nobody works on
    /// (paused, or its owner gone), as lost with `JOB_STATE_UNREADABLE`, so that the identical
    /// invocation can start a new job (which resumes from the invocation's checkpoint when that
    /// is intact). Returns false, changing nothing, when a live process still runs it (it
    /// rewrites its progress soon) or it ended meanwhile.
    pub fn end_unreadable(
        &self,
        conn: &Connection,
        instance: &str,
        id: &JobId,
    ) -> Result<bool, JobError> {
        let tx = immediate(conn)?;
        let row =
            Self::read_row(&tx, instance, id)?.ok_or_else(|| JobError::NotFound(id.to_string()))?;
        let worked_on = row.status == JobStatus::Running && row.owner.is_some_and(|o| o.is_alive());
        if worked_on {
            return Ok(false);
        }
        let outcome = JobOutcome::failed(
            JobStatus::Lost,
            EXIT_GENERAL_ERROR,
            JOB_STATE_UNREADABLE,
            format!("job {id} was ended: its state files were unreadable"),
            None,
        );
        let won = self.end_in(&tx, instance, id, &outcome)?;
        tx.commit()?;
        Ok(won)
    }

    /// Whether a cancel is pending for this job (the owner polls this at safe points).
    pub fn cancel_requested(&self, conn: &Connection, id: &JobId) -> Result<bool, JobError> {
        let flag: Option<i64> = conn
            .query_row(
                "SELECT cancel_requested FROM reftool_jobs WHERE job_id = ?1 AND status = 'running'",
                params![id.as_str()],
                |r| r.get(0),
            )
            .optional()?;
        Ok(flag.is_some_and(|f| f != 0))
    }

    /// Whether job `id` (of any instance of this state directory) still holds its work: it
    /// runs with a live owner, or waits paused within its lifetime for its continuation. A job
    /// that ended, or one this store does not know (another state directory's), holds nothing.
    pub fn holds_work(&self, conn: &Connection, id: &str) -> Result<bool, JobError> {
        let row: Option<(String, Option<i64>, Option<i64>, i64)> = conn
            .query_row(
                "SELECT status, owner_pid, owner_start_time, deadline_at_ms FROM reftool_jobs
                 WHERE job_id = ?1",
                params![id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .optional()?;
        let Some((status, pid, start, deadline)) = row else { return Ok(false) };
        Ok(match JobStatus::parse(&status) {
            Some(JobStatus::Running) => match (pid, start) {
                (Some(pid), Some(start)) => u32::try_from(pid)
                    .is_ok_and(|pid| ProcessIdentity { pid, start_time: to_u64(start) }.is_alive()),
                _ => false,
            },
            Some(JobStatus::Paused) => now_ms() < to_u64(deadline),
            _ => false,
        })
    }

    /// Whether a job ended cancelled (a checkpoint it wrote is then void).
    pub fn was_cancelled(&self, conn: &Connection, id: &str) -> Result<bool, JobError> {
        let status: Option<String> = conn
            .query_row("SELECT status FROM reftool_jobs WHERE job_id = ?1", params![id], |r| {
                r.get(0)
            })
            .optional()?;
        Ok(status.as_deref() == Some(JobStatus::Cancelled.as_str()))
    }

    /// Removes ended jobs older than `retention_ms` (rows and directories) and stale stdin
    /// spools. Cheap; run it opportunistically (e.g. on every `job` command).
    pub fn cleanup_expired(&self, conn: &Connection, retention_ms: u64) -> Result<usize, JobError> {
        let cutoff = now_ms().saturating_sub(retention_ms);
        let expired: Vec<(String, String)> = {
            let mut stmt = conn.prepare(
                "SELECT job_id, instance FROM reftool_jobs WHERE ended_at_ms IS NOT NULL AND ended_at_ms < ?1",
            )?;
            let rows = stmt.query_map(params![to_i64(cutoff)], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect::<Result<_, _>>()?
        };
        let mut removed = 0;
        for (job_id, instance) in expired {
            // The row goes first: a crash in between leaves an orphan directory (harmless),
            // never a row whose files are gone.
            removed +=
                conn.execute("DELETE FROM reftool_jobs WHERE job_id = ?1", params![job_id])?;
            // Only a well-formed id ever becomes a path.
            if let Ok(id) = JobId::parse(&job_id) {
                let _ = std::fs::remove_dir_all(self.job_dir(&instance, &id));
            }
        }
        // Spools whose front died before creating its job.
        if let Ok(instances) = std::fs::read_dir(self.state_dir.join("jobs")) {
            for inst in instances.flatten() {
                let Ok(entries) = std::fs::read_dir(inst.path()) else { continue };
                for e in entries.flatten() {
                    let stale = e.file_name().as_bytes().starts_with(b".spool-")
                        && e.metadata()
                            .and_then(|m| m.modified())
                            .ok()
                            .and_then(|t| t.elapsed().ok())
                            .is_some_and(|age| {
                                age.as_millis() > u128::from(retention_ms.min(3_600_000))
                            });
                    if stale {
                        let _ = std::fs::remove_file(e.path());
                    }
                }
            }
        }
        Ok(removed)
    }
}

/// Reads the file `name` of job `id`'s directory `dir`: `None` when absent, and a file that does
/// not parse is [`JobError::Unreadable`], naming it (other I/O errors are the disk's).
fn read_job_file<T: serde::de::DeserializeOwned>(
    id: &JobId,
    dir: &Path,
    name: &str,
) -> Result<Option<T>, JobError> {
    read_json(&dir.join(name)).map_err(|e| match e.kind() {
        io::ErrorKind::InvalidData => {
            JobError::Unreadable { id: id.clone(), path: dir.join(name), reason: e.to_string() }
        }
        _ => JobError::Io(e),
    })
}

fn is_session_leader(pid: u32) -> bool {
    let Ok(raw) = i32::try_from(pid) else { return false };
    let pid = nix::unistd::Pid::from_raw(raw);
    nix::unistd::getsid(Some(pid)).is_ok_and(|sid| sid == pid)
}

#[cfg(test)]
#[path = "jobs_tests.rs"]
pub(crate) mod tests;
