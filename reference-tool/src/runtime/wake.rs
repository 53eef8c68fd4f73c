//! Waiting for a job: prompt wake-up on its end, liveness checks while waiting.
//!
//! A waiter installs a [`Doorbell`] (a FIFO in the job's `waiters/` directory, see
//! [`super::doorbell`]) and sleeps in `poll(2)` on it; whoever ends or pauses the job rings
//! every doorbell right after the state change is on disk ([`JobStore`] does it in every path
//! that ends or pauses a job), so the waiter wakes within a scheduler tick, with no polling
//! interval to wait out, and its FIFO closes in microseconds when it exits (an inotify instance
//! would hold the exit for a kernel grace period: see the doorbell module and
//! `benches/wake.rs`, `benches/job_wait.rs`).
//!
//! [`wait_for_job`] is `job wait` (and the front process of a detach command waiting out its
//! budget): it returns [`WaitOutcome::Ended`] as soon as the job has an outcome, or
//! [`WaitOutcome::Pending`] with fresh progress (re-read at that moment) at the deadline.
//! Every [`LIVENESS_INTERVAL`] it also settles the job through [`JobStore::get`], so a dead
//! worker turns into `JOB_LOST` (and a silent one into `STALLED`) within that interval instead
//! of a hang; the same check catches an end whose ringer died before ringing. A paused job is
//! returned at once: nobody works on it, only its continuation does.
//!
//! The doorbell is installed before the first look at the job, so an end that happens between
//! the look and the sleep is never missed.
//!
//! A waiter with a deadline never waits for the state database past it (plus
//! [`SETTLE_GRACE`]): while another process keeps the database locked, it reads the job as last
//! written instead of settling it, and answers on time.

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use super::doorbell::Doorbell;
use super::ids::JobId;
use super::jobs::{JobError, JobStatus, JobStore, JobView};

/// How often a waiter re-checks that the job's owner is alive.
pub const LIVENESS_INTERVAL: Duration = Duration::from_millis(150);
/// How long past its deadline a waiter may still wait for the state database, to settle the
/// job's last state before it answers.
pub const SETTLE_GRACE: Duration = Duration::from_millis(50);

/// Bounds the state database's waits by the waiter's `deadline` (plus [`SETTLE_GRACE`]): a
/// database another process keeps locked holds a waiter up to its deadline, never its whole
/// busy timeout. Without a deadline the connection's own busy timeout applies.
fn bound_waits(conn: &Connection, deadline: Option<Instant>) {
    if let Some(deadline) = deadline {
        let left = deadline.saturating_duration_since(Instant::now());
        let _ = conn.busy_timeout(left.max(SETTLE_GRACE));
    }
}

/// The job as it stands at the waiter's deadline: settled, or when the state database stays
/// locked past [`SETTLE_GRACE`], as last written (a plain read never waits on a writer).
fn at_deadline(
    store: &JobStore,
    conn: &Connection,
    instance: &str,
    id: &JobId,
    deadline: Option<Instant>,
) -> Result<JobView, JobError> {
    bound_waits(conn, deadline);
    match store.get(conn, instance, id) {
        Err(JobError::Db(e)) if is_busy(&e) => store.peek(conn, instance, id),
        other => other,
    }
}

/// Whether a state database error is a lock held too long.
fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// A waiter's registration on one job directory: the job's end or pause wakes it.
#[derive(Debug)]
pub struct JobWatcher {
    bell: Doorbell,
}

impl JobWatcher {
    /// Registers a waiter on the job whose directory is `dir` (see [`Doorbell::install`]).
    pub fn new(dir: &Path) -> io::Result<Self> {
        Ok(JobWatcher { bell: Doorbell::install(dir)? })
    }

    /// Sleeps until the job is ended or paused (its doorbell rings), a signal arrives, or
    /// `timeout` passes. Returns whether it rang.
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        self.bell.wait(timeout)
    }
}

/// The answer of [`wait_for_job`].
#[derive(Debug, Clone, PartialEq)]
pub enum WaitOutcome {
    /// The job has an outcome (`view.outcome` is `Some`).
    Ended(JobView),
    /// The deadline came first, or the job is paused: answer INCOMPLETE with `view.progress`.
    Pending(JobView),
}

/// Waits for a job of `instance` to end, until `deadline` (`None`: no deadline).
pub fn wait_for_job(
    store: &JobStore,
    conn: &Connection,
    instance: &str,
    id: &JobId,
    deadline: Option<Instant>,
) -> Result<WaitOutcome, JobError> {
    wait_for_job_interruptible(store, conn, instance, id, deadline, &AtomicBool::new(false))
}

/// [`wait_for_job`] that also returns [`WaitOutcome::Pending`] as soon as `interrupt` is set:
/// pass the framework's SIGTERM flag, so a front process waiting out its budget hands off at
/// once. A signal delivered to the process interrupts the `poll` (EINTR), so the flag is seen
/// immediately; in any case within [`LIVENESS_INTERVAL`].
pub fn wait_for_job_interruptible(
    store: &JobStore,
    conn: &Connection,
    instance: &str,
    id: &JobId,
    deadline: Option<Instant>,
    interrupt: &AtomicBool,
) -> Result<WaitOutcome, JobError> {
    wait_with_liveness(store, conn, instance, id, deadline, interrupt, LIVENESS_INTERVAL)
}

/// The wait, with the liveness interval as a parameter (tests stretch it to prove that the
/// ring, not the liveness check, wakes the waiter).
fn wait_with_liveness(
    store: &JobStore,
    conn: &Connection,
    instance: &str,
    id: &JobId,
    deadline: Option<Instant>,
    interrupt: &AtomicBool,
    liveness: Duration,
) -> Result<WaitOutcome, JobError> {
    // The row decides whether the job exists in this instance before anything is created in
    // its directory; an ended job needs no doorbell.
    bound_waits(conn, deadline);
    let first = store.peek(conn, instance, id)?;
    let watcher = match first.outcome {
        Some(_) => None,
        // A doorbell that cannot be made (a full or read-only state dir) costs promptness,
        // never the answer: the waiter then naps and relies on its liveness checks.
        None => Some(JobWatcher::new(&first.dir).ok()),
    };
    let mut view = match store.get(conn, instance, id) {
        Err(JobError::Db(e)) if is_busy(&e) => store.peek(conn, instance, id)?,
        other => other?,
    };
    let mut last_settle = Instant::now();
    loop {
        if view.outcome.is_some() {
            return Ok(WaitOutcome::Ended(view));
        }
        if view.status == JobStatus::Paused {
            return Ok(WaitOutcome::Pending(view));
        }
        let Some(bell) = &watcher else {
            // Only reachable if an outcome file vanished: settle like a liveness check.
            return Ok(WaitOutcome::Pending(at_deadline(store, conn, instance, id, deadline)?));
        };
        let now = Instant::now();
        let remaining = deadline.map(|d| d.saturating_duration_since(now));
        if remaining == Some(Duration::ZERO) || interrupt.load(Ordering::SeqCst) {
            // Fresh progress: progress writes do not ring, so read it now.
            return Ok(WaitOutcome::Pending(at_deadline(store, conn, instance, id, deadline)?));
        }
        let until_settle = liveness.saturating_sub(last_settle.elapsed());
        let nap = remaining.map_or(until_settle, |r| r.min(until_settle));
        let rang = match bell {
            Some(bell) => bell.wait(nap)?,
            None => nap_interruptibly(nap),
        };
        if rang {
            // Rung: the job ended or paused. A plain read answers; no transaction needed.
            view = store.peek(conn, instance, id)?;
            continue;
        }
        if last_settle.elapsed() >= liveness {
            bound_waits(conn, deadline);
            view = match store.get(conn, instance, id) {
                // Locked by someone else: settle at the next check, or at the deadline.
                Err(JobError::Db(e)) if is_busy(&e) => store.peek(conn, instance, id)?,
                other => other?,
            };
            last_settle = Instant::now();
        }
    }
}

/// Sleeps `nap` without a doorbell; a signal ends the sleep early. Never reports a ring.
fn nap_interruptibly(nap: Duration) -> bool {
    let ms = u16::try_from(nap.as_millis()).unwrap_or(u16::MAX);
    let _ = nix::poll::poll(&mut [], nix::poll::PollTimeout::from(ms));
    false
}

/// [`JobStore::create_or_attach`], except that a running job with a pending cancel is not
/// attached to: the call waits (until `deadline`) for that job to end and then claims again,
/// so "cancel, then the identical invocation starts from the beginning" holds even while the
/// worker has not yet reached its next safe point. If the deadline comes first, the
/// `Attached` claim is returned as is.
pub fn claim(
    store: &JobStore,
    conn: &Connection,
    new: super::jobs::NewJob,
    deadline: Option<Instant>,
) -> Result<super::jobs::Claim, JobError> {
    use super::jobs::Claim;
    loop {
        let claim = store.create_or_attach(conn, new.clone())?;
        let Claim::Attached(view) = &claim else { return Ok(claim) };
        if !view.cancel_requested || deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(claim);
        }
        let instance = view.record.instance.clone();
        let id = view.record.job_id.clone();
        if let WaitOutcome::Pending(_) = wait_for_job(store, conn, &instance, &id, deadline)? {
            return Ok(claim);
        }
    }
}

/// Set-up shared by the runtime's job tests (here and in [`super::context`]).
#[cfg(test)]
pub(crate) mod test_jobs {
    use super::JobView;
    use crate::runtime::jobs::Claim;
    use crate::runtime::jobs::tests::{Fixture, identity, new_job};
    use crate::runtime::process::ProcessIdentity;

    /// A new running job of instance `default` for the invocation `args`, owned by `owner`;
    /// panics unless the claim created it.
    pub(crate) fn create_job(f: &Fixture, owner: ProcessIdentity, args: &[&str]) -> JobView {
        match f
            .store
            .create_or_attach(&f.conn(), new_job(identity(args, "default"), owner))
            .unwrap()
        {
            Claim::Created(v) => v,
            other => panic!("{other:?}"),
        }
    }

    /// [`create_job`] owned by this (live) test process.
    pub(crate) fn create_own_job(f: &Fixture, args: &[&str]) -> JobView {
        create_job(f, ProcessIdentity::current().unwrap(), args)
    }
}

#[cfg(test)]
mod tests {
    use super::test_jobs::{create_job, create_own_job};
    use super::*;
    use crate::runtime::jobs::tests::{Fixture, identity, new_job};
    use crate::runtime::jobs::{Claim, JobOutcome};
    use crate::runtime::process::ProcessIdentity;
    use crate::runtime::progress::ProgressReporter;
    use std::process::Command;

    /// Waits on `id` of instance `default` for up to 20 s with the liveness check stretched
    /// to 60 s, so only the doorbell can wake the waiter in time.
    fn wait_for_ring(f: &Fixture, id: &JobId) -> WaitOutcome {
        let conn = f.conn();
        wait_with_liveness(
            &f.store,
            &conn,
            "default",
            id,
            Some(Instant::now() + Duration::from_secs(20)),
            &AtomicBool::new(false),
            Duration::from_secs(60),
        )
        .unwrap()
    }

    #[test]
    fn a_waiter_wakes_promptly_when_the_job_ends() {
        let f = Fixture::new();
        let job = create_own_job(&f, &["w"]);
        let id = job.record.job_id.clone();
        let ended_at = std::thread::scope(|s| {
            let writer = s.spawn(|| {
                std::thread::sleep(Duration::from_millis(300));
                let conn = f.conn();
                let t = Instant::now();
                f.store
                    .finish(
                        &conn,
                        "default",
                        &id,
                        &JobOutcome::finished(0, serde_json::json!({"ok": true})),
                    )
                    .unwrap();
                t
            });
            // No liveness check within the test: only the ring can wake the waiter in time.
            let out = wait_for_ring(&f, &id);
            let returned = Instant::now();
            assert!(
                matches!(out, WaitOutcome::Ended(ref v) if v.status == JobStatus::Succeeded),
                "{out:?}"
            );
            let wrote = writer.join().unwrap();
            returned.saturating_duration_since(wrote)
        });
        // Generous bound for a shared machine (the benchmark measures the real figure); far
        // below the 20 s a waiter that was not rung would sleep.
        assert!(ended_at < Duration::from_secs(5), "woke {ended_at:?} after the end");
        let waiters = job.dir.join(crate::runtime::doorbell::WAITERS_DIR);
        assert_eq!(std::fs::read_dir(waiters).unwrap().count(), 0, "the waiter removed its FIFO");
    }

    #[test]
    fn a_pause_wakes_an_attached_waiter() {
        let f = Fixture::new();
        let job = create_own_job(&f, &["pause"]);
        let id = job.record.job_id.clone();
        let (out, waited) = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(300));
                let paused = f.store.pause(&f.conn(), "default", &id).unwrap();
                assert_eq!(paused, crate::runtime::jobs::PauseOutcome::Paused);
            });
            let start = Instant::now();
            let out = wait_for_ring(&f, &id);
            (out, start.elapsed())
        });
        assert!(
            matches!(out, WaitOutcome::Pending(ref v) if v.status == JobStatus::Paused),
            "{out:?}"
        );
        assert!(waited < Duration::from_secs(8), "a rung waiter answers at once: {waited:?}");
    }

    #[test]
    fn a_cancel_of_a_paused_job_wakes_its_waiters() {
        let f = Fixture::new();
        let job = create_own_job(&f, &["cancel-paused"]);
        let id = job.record.job_id.clone();
        let bell = JobWatcher::new(&job.dir).unwrap();
        f.store.pause(&f.conn(), "default", &id).unwrap();
        assert!(bell.wait(Duration::from_secs(5)).unwrap(), "the pause rang");
        assert_eq!(
            f.store.request_cancel(&f.conn(), "default", &id).unwrap(),
            crate::runtime::jobs::CancelOutcome::Cancelled
        );
        assert!(bell.wait(Duration::from_secs(5)).unwrap(), "the cancel rang");
    }

    #[test]
    fn a_dead_worker_found_by_settling_rings_the_other_waiters() {
        let f = Fixture::new();
        let mut child = Command::new("setsid").arg("sleep").arg("60").spawn().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let job = create_job(&f, ProcessIdentity::of(child.id()).unwrap(), &["dead-ring"]);
        let bell = JobWatcher::new(&job.dir).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        let view = f.store.get(&f.conn(), "default", &job.record.job_id).unwrap();
        assert_eq!(view.status, JobStatus::Lost);
        assert!(bell.wait(Duration::from_secs(5)).unwrap(), "the settling party rang");
    }

    #[test]
    fn the_deadline_returns_fresh_progress() {
        let f = Fixture::new();
        let job = create_own_job(&f, &["p"]);
        let mut r = ProgressReporter::new(Some(job.dir.clone())).strict(true);
        r.report(42, Some(100), Some("rows")).unwrap();
        let conn = f.conn();
        let start = Instant::now();
        let out = wait_for_job(
            &f.store,
            &conn,
            "default",
            &job.record.job_id,
            Some(start + Duration::from_millis(250)),
        )
        .unwrap();
        let took = start.elapsed();
        match out {
            WaitOutcome::Pending(v) => assert_eq!(v.progress.done, 42),
            other => panic!("{other:?}"),
        }
        assert!(took >= Duration::from_millis(250) && took < Duration::from_secs(3), "{took:?}");
    }

    #[test]
    fn a_dead_worker_is_reported_not_waited_on() {
        let f = Fixture::new();
        let mut child = Command::new("setsid").arg("sleep").arg("60").spawn().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let job = create_job(&f, ProcessIdentity::of(child.id()).unwrap(), &["dead"]);
        let killer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            child.kill().unwrap();
            child.wait().unwrap();
        });
        let conn = f.conn();
        let start = Instant::now();
        let out = wait_for_job(&f.store, &conn, "default", &job.record.job_id, None).unwrap();
        killer.join().unwrap();
        match out {
            WaitOutcome::Ended(v) => assert_eq!(v.status, JobStatus::Lost),
            other => panic!("{other:?}"),
        }
        assert!(start.elapsed() < Duration::from_secs(3), "{:?}", start.elapsed());
    }

    #[test]
    fn an_interrupt_ends_the_wait_at_once() {
        let f = Fixture::new();
        let job = create_own_job(&f, &["i"]);
        let flag = AtomicBool::new(false);
        let conn = f.conn();
        let start = Instant::now();
        let out = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(200));
                flag.store(true, Ordering::SeqCst);
            });
            wait_for_job_interruptible(&f.store, &conn, "default", &job.record.job_id, None, &flag)
                .unwrap()
        });
        assert!(matches!(out, WaitOutcome::Pending(_)), "{out:?}");
        assert!(start.elapsed() < Duration::from_secs(3), "{:?}", start.elapsed());
    }

    #[test]
    fn a_claim_does_not_attach_to_a_job_being_cancelled() {
        let f = Fixture::new();
        let me = ProcessIdentity::current().unwrap();
        let job = create_job(&f, me, &["cc"]);
        let id = job.record.job_id.clone();
        let conn = f.conn();
        assert_eq!(
            f.store.request_cancel(&conn, "default", &id).unwrap(),
            crate::runtime::jobs::CancelOutcome::Cancelling
        );
        let claimed = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(200));
                f.store.finish_cancelled(&f.conn(), "default", &id).unwrap();
            });
            claim(
                &f.store,
                &conn,
                new_job(identity(&["cc"], "default"), me),
                Some(Instant::now() + Duration::from_secs(20)),
            )
            .unwrap()
        });
        match claimed {
            Claim::Created(v) => assert_ne!(v.record.job_id, id),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_waiter_without_a_doorbell_still_sees_the_end() {
        let f = Fixture::new();
        let job = create_own_job(&f, &["no-bell"]);
        let id = job.record.job_id.clone();
        // A file where `waiters/` should be: no doorbell can be made (even by root).
        std::fs::write(job.dir.join(crate::runtime::doorbell::WAITERS_DIR), b"").unwrap();
        assert!(JobWatcher::new(&job.dir).is_err());
        let out = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(200));
                let outcome = JobOutcome::finished(0, serde_json::json!({"ok": true}));
                f.store.finish(&f.conn(), "default", &id, &outcome).unwrap();
            });
            wait_for_job(
                &f.store,
                &f.conn(),
                "default",
                &id,
                Some(Instant::now() + Duration::from_secs(20)),
            )
            .unwrap()
        });
        assert!(matches!(out, WaitOutcome::Ended(_)), "{out:?}");
    }

    #[test]
    fn another_instance_cannot_wait() {
        let f = Fixture::new();
        let job = create_own_job(&f, &["o"]);
        let conn = f.conn();
        let r =
            wait_for_job(&f.store, &conn, "elsewhere", &job.record.job_id, Some(Instant::now()));
        assert!(matches!(r, Err(JobError::NotFound(_))));
    }
}
