//! The detached worker: spawned by re-exec, in its own session, its state in the job dir.
//!
//! **Front side.** [`spawn_worker`] re-executes the current binary as
//! `<exe> __worker <job-dir>` in the caller's working directory, with stdin from the job's
//! stdin spool (or `/dev/null`) and stdout + stderr appended to the job's `log`, so the worker
//! never holds the caller's pipes (every other descriptor Rust opens is close-on-exec). The
//! front then records the worker as the job's owner ([`super::jobs::JobStore::set_owner`]
//! with [`ProcessIdentity::of`]`(child.id())`) and waits with
//! [`super::wake::wait_for_job`] until its budget; on SIGTERM it stops waiting at once and
//! answers INCOMPLETE `running` (the worker is unaffected: it is in another session).
//!
//! **Worker side.** `main` recognizes [`WORKER_ARG`] ([`worker_job_dir`]) before any other
//! parsing, calls [`detach_self`] at once (`setsid()`, then closes every inherited descriptor
//! above 2), opens the state DB, and calls [`worker_main`], which registers the process as the job's owner, starts a watchdog
//! thread (idle timeout and lifetime: it settles the job through the store, which ends a
//! silent worker as `STALLED` and kills it), runs the command's work through the closure the
//! framework gives, and writes the outcome atomically, which wakes every waiter. A state
//! database that another process keeps locked is waited out ([`patiently`], up to the job's
//! lifetime), never a reason to die: a dead worker's job is lost.

use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use rusqlite::Connection;

use super::context::JobContext;
use super::fsutil::{read_json, tail};
use super::jobs::{
    EXIT_GENERAL_ERROR, EXIT_TIMEOUT, JOB_FILE, JOB_LOST, JobError, JobOutcome, JobRecord,
    JobStatus, JobStore, LOG_FILE, LOG_TAIL_BYTES, STDIN_FILE, TIMEOUT,
};
use super::process::ProcessIdentity;
use super::stop::{StopControl, StopReason};

/// The hidden first argument that makes the binary a worker.
pub const WORKER_ARG: &str = "__worker";
/// How often the worker's watchdog looks at its own job.
pub const WATCHDOG_INTERVAL: Duration = Duration::from_millis(250);

/// How the work ended, as the closure reports it.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkEnd {
    /// The command finished: its envelope and exit code.
    Finished {
        /// The command's exit code.
        exit_code: u8,
        /// The command's final envelope.
        response: serde_json::Value,
    },
    /// A safe point answered `Stop`.
    Stopped(StopReason),
}

/// Failures of the worker's own machinery (not of the command).
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// The job dir is not a job of this store.
    #[error("{0} is not a job directory of this state dir")]
    NotAJob(PathBuf),
    /// The job store failed.
    #[error(transparent)]
    Job(#[from] JobError),
    /// Files or processes failed.
    #[error("worker i/o failed: {0}")]
    Io(#[from] io::Error),
}

/// How a job's worker starts: the process that runs the job in `job_dir`, in `cwd`, after its
/// caller has gone. The caller records it as the job's owner and never waits on it.
pub trait Launcher: Send + Sync {
    /// Starts the worker of the job in `job_dir`.
    fn launch(&self, job_dir: &Path, cwd: &Path) -> io::Result<Child>;
}

impl std::fmt::Debug for dyn Launcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Launcher")
    }
}

/// reftool's launcher: this binary again ([`spawn_worker`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Reexec;

impl Launcher for Reexec {
    fn launch(&self, job_dir: &Path, cwd: &Path) -> io::Result<Child> {
        spawn_worker(job_dir, cwd)
    }
}

/// Spawns `<current exe> __worker <job_dir>` in `cwd`; see the module docs.
pub fn spawn_worker(job_dir: &Path, cwd: &Path) -> io::Result<Child> {
    spawn_worker_command(&std::env::current_exe()?, &[], job_dir, cwd)
}

/// [`spawn_worker`] with an explicit executable and arguments placed before `__worker`.
pub fn spawn_worker_command(
    exe: &Path,
    leading_args: &[OsString],
    job_dir: &Path,
    cwd: &Path,
) -> io::Result<Child> {
    worker_command(exe, leading_args, job_dir, cwd)?.spawn()
}

/// The command [`spawn_worker_command`] runs: `exe`, `leading_args`, `__worker <job_dir>`, in
/// `cwd`, stdin from the job's stdin spool (or `/dev/null`), stdout and stderr appended to the
/// job's log.
pub fn worker_command(
    exe: &Path,
    leading_args: &[OsString],
    job_dir: &Path,
    cwd: &Path,
) -> io::Result<Command> {
    let stdin_path = job_dir.join(STDIN_FILE);
    let stdin =
        if stdin_path.exists() { Stdio::from(File::open(&stdin_path)?) } else { Stdio::null() };
    let log =
        OpenOptions::new().create(true).append(true).mode(0o600).open(job_dir.join(LOG_FILE))?;
    let log_err = log.try_clone()?;
    let mut command = Command::new(exe);
    command
        .args(leading_args)
        .arg(WORKER_ARG)
        .arg(job_dir)
        .current_dir(cwd)
        .stdin(stdin)
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log_err));
    Ok(command)
}

/// The job dir given after [`WORKER_ARG`] in an argv, if this process is a worker.
pub fn worker_job_dir(args: &[OsString]) -> Option<PathBuf> {
    let pos = args.iter().position(|a| a.as_os_str() == OsStr::new(WORKER_ARG))?;
    args.get(pos + 1).map(PathBuf::from)
}

/// Makes this process a session leader (a no-op when it already is one).
pub fn become_session_leader() -> io::Result<()> {
    let me = nix::unistd::getpid();
    if nix::unistd::getsid(None).map_err(io::Error::from)? != me {
        nix::unistd::setsid().map_err(io::Error::from)?;
    }
    Ok(())
}

/// [`become_session_leader`], then [`close_inherited_descriptors`], so nothing of the
/// caller's survives in the worker. Call it FIRST in `main` when [`worker_job_dir`] finds a
/// worker invocation, before opening the state DB or any file (it would close those too).
pub fn detach_self() -> io::Result<()> {
    become_session_leader()?;
    close_inherited_descriptors()
}

/// Closes every descriptor above 2 this process inherited.
pub fn close_inherited_descriptors() -> io::Result<()> {
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")?
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        // The directory handle used for the listing is already closed: EBADF is fine.
        let _ = nix::unistd::close(fd);
    }
    Ok(())
}

/// Runs a job in this (worker) process; returns the exit code to leave with. The process has
/// detached first ([`detach_self`]).
///
/// `terminate` is the framework's SIGTERM flag, if it installs one.
pub fn worker_main<F>(
    store: &JobStore,
    conn: &Connection,
    job_dir: &Path,
    terminate: Option<Arc<AtomicBool>>,
    work: F,
) -> Result<u8, WorkerError>
where
    F: FnOnce(&mut JobContext<'_>) -> WorkEnd,
{
    let record: JobRecord = read_json(&job_dir.join(JOB_FILE))?
        .ok_or_else(|| WorkerError::NotAJob(job_dir.to_owned()))?;
    let expected = store.job_dir(&record.instance, &record.job_id);
    let same = std::fs::canonicalize(&expected).ok() == std::fs::canonicalize(job_dir).ok();
    if !same {
        return Err(WorkerError::NotAJob(job_dir.to_owned()));
    }
    let (instance, id) = (record.instance.clone(), record.job_id.clone());
    let deadline = StopControl::instant_from_epoch_ms(record.deadline_at_ms);
    let me = ProcessIdentity::current()?;
    patiently(deadline, || store.set_owner(conn, &instance, &id, me))?;
    start_watchdog(store.clone(), conn.path().map(PathBuf::from), instance.clone(), id.clone());

    let view = patiently(deadline, || store.peek(conn, &instance, &id))?;
    let stop = JobContext::standard_stop(store, conn, &view, terminate, None);
    let mut ctx = JobContext::new(store, view, stop);
    let end = work(&mut ctx);
    let _ = ctx.flush_progress();
    drop(ctx);

    let outcome = match end {
        WorkEnd::Finished { exit_code, response } => JobOutcome::finished(exit_code, response),
        WorkEnd::Stopped(StopReason::Cancelled) => JobOutcome::cancelled(&id),
        WorkEnd::Stopped(StopReason::Lifetime) => JobOutcome::failed(
            JobStatus::TimedOut,
            EXIT_TIMEOUT,
            TIMEOUT,
            format!("job {id} exceeded its time limit"),
            None,
        ),
        WorkEnd::Stopped(StopReason::Terminated | StopReason::Budget) => JobOutcome::failed(
            JobStatus::Lost,
            EXIT_GENERAL_ERROR,
            JOB_LOST,
            format!("job {id} was terminated before it ended; its checkpoint, if any, is kept"),
            Some(tail(&job_dir.join(LOG_FILE), LOG_TAIL_BYTES)),
        ),
    };
    // The work is done: its outcome must be recorded, however long another process keeps the
    // state database locked (up to the job's lifetime).
    patiently(deadline, || store.finish(conn, &instance, &id, &outcome))?;
    // Whoever wrote the outcome first decides the exit code.
    let view = patiently(deadline, || store.peek(conn, &instance, &id))?;
    Ok(view.outcome.map_or(outcome.exit_code, |o| o.exit_code))
}

/// How long a worker waits before it tries a locked state database again.
pub const BUSY_RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Runs `op` until it is not refused by a locked state database, or `deadline` (the job's
/// lifetime) passes: a worker waits for the state database rather than die, which would lose
/// its job (JOB_LOST) with its work done or under way.
pub fn patiently<T>(
    deadline: std::time::Instant,
    mut op: impl FnMut() -> Result<T, JobError>,
) -> Result<T, JobError> {
    loop {
        match op() {
            Err(e) if e.is_busy() && std::time::Instant::now() < deadline => {
                std::thread::sleep(BUSY_RETRY_PAUSE);
            }
            other => return other,
        }
    }
}

/// A thread that settles this worker's own job now and then: a silent worker is ended as
/// `STALLED` and killed, one past its lifetime as `TIMEOUT`, even when nobody waits on it.
fn start_watchdog(store: JobStore, db: Option<PathBuf>, instance: String, id: super::ids::JobId) {
    let Some(db) = db else { return };
    std::thread::spawn(move || {
        let Ok(conn) = Connection::open(&db) else { return };
        let _ = conn.busy_timeout(Duration::from_secs(10));
        loop {
            std::thread::sleep(WATCHDOG_INTERVAL);
            match store.get(&conn, &instance, &id) {
                Ok(view) if view.status == JobStatus::Running => {}
                // Locked by another process: look again at the next round.
                Err(e) if e.is_busy() => {}
                // The outcome is on disk; the work itself is stuck, so leave without it.
                Ok(view) if matches!(view.status, JobStatus::Stalled | JobStatus::TimedOut) => {
                    std::process::exit(i32::from(EXIT_TIMEOUT))
                }
                _ => return,
            }
        }
    });
}

#[cfg(test)]
#[path = "worker_tests.rs"]
mod tests;
