//! Waiting for a job: prompt wake-up on its end, liveness checks while waiting.
//!
//! [`JobWatcher`] watches a job directory with inotify. Every state file is written by
//! rename, so the final `result.json` arrives as one `IN_MOVED_TO` event, and every progress
//! write as another: the waiter sleeps in `poll(2)` and wakes within a scheduler tick of the
//! job's end, with no polling interval to wait out (see `benches/wake.rs` for the figure).
//!
//! [`wait_for_job`] is `job wait` (and the front process of a detach command waiting out its
//! budget): it returns [`WaitOutcome::Ended`] as soon as the job has an outcome, or
//! [`WaitOutcome::Pending`] with fresh progress at the deadline. Every
//! [`LIVENESS_INTERVAL`] it also settles the job through [`JobStore::get`], so a dead worker
//! turns into `JOB_LOST` (and a silent one into `STALLED`) within that interval instead of a
//! hang. A paused job is returned at once: nobody works on it, only its continuation does.
//!
//! The watch is set up before the first look at the job, so an end that happens between the
//! look and the sleep is never missed.

use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use rusqlite::Connection;

use super::ids::JobId;
use super::jobs::{JobError, JobStatus, JobStore, JobView, RESULT_FILE};

/// How often a waiter re-checks that the job's owner is alive.
pub const LIVENESS_INTERVAL: Duration = Duration::from_millis(150);

/// An inotify watch on one job directory.
///
/// Closing an inotify instance that held a watch blocks for a kernel grace period (about
/// 8–25 ms, measured), longer than the whole wake-up; so the instance is closed on a short-lived
/// background thread when the watcher is dropped, and the waiter answers at once.
#[derive(Debug)]
pub struct JobWatcher {
    inotify: Option<Inotify>,
}

impl Drop for JobWatcher {
    fn drop(&mut self) {
        if let Some(inotify) = self.inotify.take() {
            // If no thread can be made, the closure (and the close) runs here instead.
            let closer = move || drop(inotify);
            let _ = std::thread::Builder::new().name("inotify-close".into()).spawn(closer);
        }
    }
}

impl JobWatcher {
    /// Watches `dir` for files moved in or written, and for its own removal.
    pub fn new(dir: &Path) -> io::Result<Self> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(io::Error::from)?;
        inotify
            .add_watch(
                dir,
                AddWatchFlags::IN_MOVED_TO
                    | AddWatchFlags::IN_CLOSE_WRITE
                    | AddWatchFlags::IN_DELETE_SELF
                    | AddWatchFlags::IN_ONLYDIR,
            )
            .map_err(io::Error::from)?;
        Ok(JobWatcher { inotify: Some(inotify) })
    }

    /// Sleeps until something changes in the directory or `timeout` passes. Returns whether
    /// anything changed. Pending events are drained.
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        let Some(inotify) = &self.inotify else { return Ok(false) };
        let ms = u16::try_from(timeout.as_millis().min(u128::from(u16::MAX))).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(inotify.as_fd(), PollFlags::POLLIN)];
        let ready = match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(n) => n > 0,
            Err(nix::errno::Errno::EINTR) => false,
            Err(e) => return Err(e.into()),
        };
        if ready {
            match inotify.read_events() {
                Ok(_) | Err(nix::errno::Errno::EAGAIN) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(ready)
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
    // The row decides whether the job exists in this instance before any path is watched.
    let first = store.peek(conn, instance, id)?;
    let watcher = JobWatcher::new(&first.dir)?;
    let mut view = store.get(conn, instance, id)?;
    let mut last_settle = Instant::now();
    loop {
        if view.outcome.is_some() {
            return Ok(WaitOutcome::Ended(view));
        }
        if view.status == JobStatus::Paused {
            return Ok(WaitOutcome::Pending(view));
        }
        let now = Instant::now();
        let remaining = deadline.map(|d| d.saturating_duration_since(now));
        if remaining == Some(Duration::ZERO) || interrupt.load(Ordering::SeqCst) {
            return Ok(WaitOutcome::Pending(store.get(conn, instance, id)?));
        }
        let until_settle = LIVENESS_INTERVAL.saturating_sub(last_settle.elapsed());
        let nap = remaining.map_or(until_settle, |r| r.min(until_settle));
        let changed = watcher.wait(nap)?;
        if changed && view.dir.join(RESULT_FILE).exists() {
            // The fast path: the outcome file is there; no transaction needed to answer.
            view = store.peek(conn, instance, id)?;
            continue;
        }
        if last_settle.elapsed() >= LIVENESS_INTERVAL {
            view = store.get(conn, instance, id)?;
            last_settle = Instant::now();
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::jobs::tests::{Fixture, identity, new_job};
    use crate::runtime::jobs::{Claim, JobOutcome};
    use crate::runtime::process::ProcessIdentity;
    use crate::runtime::progress::ProgressReporter;
    use std::process::Command;

    fn create(f: &Fixture, owner: ProcessIdentity, args: &[&str]) -> JobView {
        match f
            .store
            .create_or_attach(&f.conn(), new_job(identity(args, "default"), owner))
            .unwrap()
        {
            Claim::Created(v) => v,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_waiter_wakes_promptly_when_the_job_ends() {
        let f = Fixture::new();
        let job = create(&f, ProcessIdentity::current().unwrap(), &["w"]);
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
            let conn = f.conn();
            let start = Instant::now();
            let out = wait_for_job(
                &f.store,
                &conn,
                "default",
                &id,
                Some(start + Duration::from_secs(20)),
            )
            .unwrap();
            let returned = Instant::now();
            assert!(
                matches!(out, WaitOutcome::Ended(ref v) if v.status == JobStatus::Succeeded),
                "{out:?}"
            );
            let wrote = writer.join().unwrap();
            returned.saturating_duration_since(wrote)
        });
        // Generous bound for a shared machine; the benchmark measures the real figure.
        assert!(ended_at < Duration::from_millis(140), "woke {ended_at:?} after the end");
    }

    #[test]
    fn the_deadline_returns_fresh_progress() {
        let f = Fixture::new();
        let job = create(&f, ProcessIdentity::current().unwrap(), &["p"]);
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
        let job = create(&f, ProcessIdentity::of(child.id()).unwrap(), &["dead"]);
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
        let job = create(&f, ProcessIdentity::current().unwrap(), &["i"]);
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
        let job = create(&f, me, &["cc"]);
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
    fn another_instance_cannot_wait() {
        let f = Fixture::new();
        let job = create(&f, ProcessIdentity::current().unwrap(), &["o"]);
        let conn = f.conn();
        let r =
            wait_for_job(&f.store, &conn, "elsewhere", &job.record.job_id, Some(Instant::now()));
        assert!(matches!(r, Err(JobError::NotFound(_))));
    }
}
