//! The handle a command's work gets: progress, safe points, stop requests, its job's files.
//!
//! One [`JobContext`] type serves both places work runs: the detached worker (built by
//! [`super::worker::worker_main`]) and the front process of a resume-only command (built by
//! the framework with [`JobContext::new`] after [`super::jobs::JobStore::create_or_attach`]
//! returned `Created` or `Resumed`). The command's code is the same in both.
//!
//! A resume command calls, in order: `restore` on its checkpoint store (through
//! [`JobContext::file_checkpoints`] or [`JobContext::sqlite_checkpoints`]),
//! [`JobContext::resume_from`] with the restored `done`, then per unit
//! [`JobContext::progress`] and, at safe points, [`JobContext::checkpoint`] (files) or
//! [`JobContext::commit_with`] (its own SQLite transaction). A [`Flow::Stop`] means: return
//! at once; the framework turns the reason into INCOMPLETE `paused`, a cancel, or TIMEOUT.
//! A detach-only command (no checkpoints) asks [`JobContext::should_stop`] after its progress
//! reports, which is where a cancel reaches it.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use rusqlite::{Connection, Transaction};
use serde::Serialize;

use super::checkpoint::{CheckpointError, FileCheckpoints, Flow, SqliteCheckpoints};
use super::jobs::{JobStore, JobView, STDIN_FILE};
use super::progress::{Progress, ProgressError, ProgressReporter};
use super::stop::{StopControl, StopReason};

/// See the module docs.
#[derive(Debug)]
pub struct JobContext<'a> {
    job: JobView,
    checkpoint_path: PathBuf,
    progress: ProgressReporter,
    stop: StopControl<'a>,
    /// Added to the work's own counts when it restarted below what the job had already
    /// published (see [`JobContext::resume_from`]).
    restart_offset: u64,
}

impl<'a> JobContext<'a> {
    /// A context for `job` (the caller owns it: `Created` / `Resumed`, or the worker).
    pub fn new(store: &JobStore, job: JobView, stop: StopControl<'a>) -> Self {
        let progress = store.progress_reporter(&job);
        JobContext {
            checkpoint_path: store.checkpoint_path(&job.record.instance, &job.record.identity),
            job,
            progress,
            stop,
            restart_offset: 0,
        }
    }

    /// The usual stop sources: the job's lifetime, its cancel flag (read from `conn`), an
    /// optional SIGTERM flag and an optional budget deadline (front process only).
    pub fn standard_stop(
        store: &'a JobStore,
        conn: &'a Connection,
        job: &JobView,
        terminate: Option<Arc<AtomicBool>>,
        budget_deadline: Option<Instant>,
    ) -> StopControl<'a> {
        let id = job.record.job_id.clone();
        let mut stop = StopControl::new()
            .with_lifetime_deadline(Some(StopControl::instant_from_epoch_ms(
                job.record.deadline_at_ms,
            )))
            .with_budget_deadline(budget_deadline)
            .with_cancel_probe(move || store.cancel_requested(conn, &id).unwrap_or(false));
        if let Some(flag) = terminate {
            stop = stop.with_terminate_flag(flag);
        }
        stop
    }

    /// The job this work belongs to.
    pub fn job(&self) -> &JobView {
        &self.job
    }

    /// The spooled stdin, when the command reads stdin.
    pub fn stdin_path(&self) -> Option<PathBuf> {
        let p = self.job.dir.join(STDIN_FILE);
        p.exists().then_some(p)
    }

    /// Reports progress (throttled; never below the job's last `done`).
    pub fn progress(
        &mut self,
        done: u64,
        total: Option<u64>,
        unit: Option<&str>,
    ) -> Result<(), ProgressError> {
        let offset = self.restart_offset;
        self.progress.report(
            done.saturating_add(offset),
            total.map(|t| t.saturating_add(offset)),
            unit,
        )
    }

    /// Tells where the work resumes: `done` is the restored checkpoint's (0 when it starts
    /// over). Call it once, after restoring, before the first [`JobContext::progress`].
    ///
    /// Above the job's published `done`, the floor rises to it (a resumed run never reports
    /// below its checkpoint). Below it, the work restarts under a value the job already
    /// published: its first answer was seeded from a checkpoint that the worker then found
    /// stale (`CHECKPOINT_DISCARDED`), or a paused job's input changed. `done` never decreases
    /// for one job (docs/contract.md §4), so the job's count goes on from what it published: every
    /// later report adds the difference to `done` and to `total`. The published `done` then
    /// counts the units this job has worked, the discarded ones included, and grows with real
    /// work (so the idle watchdog sees it move); `total` grows by the same amount, so the
    /// job ends with `done == total` as usual.
    pub fn resume_from(&mut self, done: u64) -> Result<(), ProgressError> {
        let published = self.progress.latest().done;
        if done > published {
            let (total, unit) = (self.progress.latest().total, self.progress.latest().unit.clone());
            self.progress.report(done, total, unit.as_deref())?;
        } else {
            self.restart_offset = published - done;
        }
        Ok(())
    }

    /// The latest progress (for `data.progress`).
    pub fn latest_progress(&self) -> &Progress {
        self.progress.latest()
    }

    /// Writes any unwritten progress now.
    pub fn flush_progress(&mut self) -> Result<(), ProgressError> {
        self.progress.flush()
    }

    /// A stop check for work without checkpoints (call it after a progress report).
    pub fn should_stop(&mut self) -> Option<StopReason> {
        let reason = self.stop.check();
        if reason.is_some() {
            let _ = self.progress.flush();
        }
        reason
    }

    /// The stop sources, for custom safe points.
    pub fn stop_control(&mut self) -> &mut StopControl<'a> {
        &mut self.stop
    }

    /// The file checkpoint store of this invocation for the input `fingerprint`.
    pub fn file_checkpoints(&self, fingerprint: impl Into<String>) -> FileCheckpoints {
        FileCheckpoints::new(
            self.checkpoint_path.clone(),
            fingerprint,
            self.job.record.job_id.clone(),
        )
    }

    /// The target-DB checkpoint store of this invocation for the input `fingerprint`.
    pub fn sqlite_checkpoints(&self, fingerprint: impl Into<String>) -> SqliteCheckpoints {
        SqliteCheckpoints::new(
            self.job.record.identity.clone(),
            fingerprint,
            self.job.record.job_id.clone(),
        )
    }

    /// A safe point with a file checkpoint: progress flushed, state saved, then stop check.
    pub fn checkpoint<T: Serialize>(
        &mut self,
        store: &FileCheckpoints,
        state: &T,
        done: u64,
    ) -> Result<Flow, CheckpointError> {
        self.flush_before_checkpoint()?;
        store.checkpoint(state, done, &mut self.stop)
    }

    /// A writer's safe point: checkpoint saved on `tx`, committed with the units, then stop
    /// check.
    pub fn commit_with<T: Serialize>(
        &mut self,
        store: &SqliteCheckpoints,
        tx: Transaction<'_>,
        state: &T,
        done: u64,
    ) -> Result<Flow, CheckpointError> {
        self.flush_before_checkpoint()?;
        store.commit_with(tx, state, done, &mut self.stop)
    }

    /// The progress flush every safe point starts with, failing as a checkpoint error.
    fn flush_before_checkpoint(&mut self) -> Result<(), CheckpointError> {
        self.progress.flush().map_err(|e| CheckpointError::Io(std::io::Error::other(e.to_string())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::checkpoint::Restored;
    use crate::runtime::incomplete::{IncompleteData, IncompleteState, paused, tool_prefix};
    use crate::runtime::jobs::tests::{Fixture, identity, new_job};
    use crate::runtime::jobs::{Claim, JobOutcome, JobStatus, PauseOutcome};
    use crate::runtime::process::ProcessIdentity;
    use crate::runtime::wake::test_jobs::create_own_job;
    use std::ffi::OsString;
    use std::time::Duration;

    #[derive(Debug, Default, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Sum {
        next: u64,
        sum: u64,
    }

    const ITEMS: u64 = 40;

    enum Answer {
        Incomplete(IncompleteData),
        Done { job: String, sum: u64 },
    }

    /// A resume-only command's front process, composed the way the framework will.
    fn run_front(f: &Fixture, budget: Duration) -> Answer {
        let conn = f.conn();
        let argv: Vec<OsString> = vec!["reftool".into(), "sum".into(), "items.txt".into()];
        let view = match f
            .store
            .create_or_attach(
                &conn,
                new_job(identity(&["items.txt"], "default"), ProcessIdentity::current().unwrap()),
            )
            .unwrap()
        {
            Claim::Created(v) | Claim::Resumed(v) => v,
            other => panic!("{other:?}"),
        };
        let id = view.record.job_id.clone();
        let stop =
            JobContext::standard_stop(&f.store, &conn, &view, None, Some(Instant::now() + budget));
        let mut ctx = JobContext::new(&f.store, view, stop);
        let cp = ctx.file_checkpoints("items-v1");
        let restored: Restored<Sum> = cp.restore().unwrap();
        ctx.resume_from(restored.done).unwrap();
        let mut state = restored.state.unwrap_or_default();
        while state.next < ITEMS {
            std::thread::sleep(Duration::from_millis(10));
            state.sum += state.next;
            state.next += 1;
            ctx.progress(state.next, Some(ITEMS), Some("items")).unwrap();
            if let Flow::Stop(reason) = ctx.checkpoint(&cp, &state, state.next).unwrap() {
                assert_eq!(reason, StopReason::Budget);
                assert_eq!(f.store.pause(&conn, "default", &id).unwrap(), PauseOutcome::Paused);
                let tool = tool_prefix(argv[0].as_os_str(), None);
                return Answer::Incomplete(paused(
                    &argv,
                    &tool,
                    &id,
                    ctx.latest_progress().clone(),
                    None,
                ));
            }
        }
        cp.remove().unwrap();
        f.store
            .finish(
                &conn,
                "default",
                &id,
                &JobOutcome::finished(0, serde_json::json!({"sum": state.sum})),
            )
            .unwrap();
        Answer::Done { job: id.to_string(), sum: state.sum }
    }

    #[test]
    fn a_restart_below_the_published_progress_continues_the_count() {
        let f = Fixture::new();
        let conn = f.conn();
        let view = create_own_job(&f, &["seeded"]);
        // The front published the checkpoint's progress before the worker started.
        let mut seed =
            crate::runtime::progress::ProgressReporter::new(Some(view.dir.clone())).strict(true);
        seed.report(500, Some(1000), Some("items")).unwrap();
        seed.flush().unwrap();
        let seeded_at =
            crate::runtime::progress::ProgressFile::read(&view.dir).unwrap().unwrap().changed_at_ms;
        let view = f.store.peek(&conn, "default", &view.record.job_id).unwrap();
        let old = ctx_checkpoints(&f, &view, "input-v1");
        old.save(&Sum { next: 500, sum: 1 }, 500).unwrap();

        // The worker finds the input changed: the checkpoint is discarded, work restarts at 0.
        let stop = JobContext::standard_stop(&f.store, &conn, &view, None, None);
        let mut ctx = JobContext::new(&f.store, view.clone(), stop);
        let restored: Restored<Sum> = ctx.file_checkpoints("input-v2").restore().unwrap();
        assert_eq!(restored.done, 0);
        assert_eq!(restored.warnings.len(), 1, "CHECKPOINT_DISCARDED");
        ctx.resume_from(restored.done).unwrap();
        std::thread::sleep(Duration::from_millis(5));
        // Strict (test mode): none of these is a backwards report.
        for done in [1, 10, 400] {
            ctx.progress(done, Some(800), Some("items")).unwrap();
        }
        assert_eq!(ctx.latest_progress().done, 900);
        assert_eq!(ctx.latest_progress().total, Some(1300));
        ctx.progress(800, Some(800), Some("items")).unwrap();
        ctx.flush_progress().unwrap();
        let file = crate::runtime::progress::ProgressFile::read(&view.dir).unwrap().unwrap();
        assert_eq!((file.progress.done, file.progress.total), (1300, Some(1300)));
        assert!(file.changed_at_ms > seeded_at, "real work moves the idle clock");
    }

    #[test]
    fn a_resume_at_the_published_progress_adds_nothing() {
        let f = Fixture::new();
        let conn = f.conn();
        let view = create_own_job(&f, &["plain"]);
        let stop = JobContext::standard_stop(&f.store, &conn, &view, None, None);
        let mut ctx = JobContext::new(&f.store, view, stop);
        ctx.resume_from(0).unwrap();
        ctx.progress(7, Some(10), None).unwrap();
        assert_eq!((ctx.latest_progress().done, ctx.latest_progress().total), (7, Some(10)));
        ctx.resume_from(7).unwrap();
        ctx.progress(9, Some(10), None).unwrap();
        assert_eq!((ctx.latest_progress().done, ctx.latest_progress().total), (9, Some(10)));
    }

    fn ctx_checkpoints(f: &Fixture, view: &JobView, fingerprint: &str) -> FileCheckpoints {
        FileCheckpoints::new(
            f.store.checkpoint_path(&view.record.instance, &view.record.identity),
            fingerprint,
            view.record.job_id.clone(),
        )
    }

    #[test]
    fn paused_work_continues_with_the_same_job_and_growing_progress() {
        let f = Fixture::new();
        let mut job_ids = std::collections::HashSet::new();
        let mut last_done = 0;
        let mut hops = 0;
        let (job, sum) = loop {
            match run_front(&f, Duration::from_millis(80)) {
                Answer::Incomplete(data) => {
                    assert_eq!(data.state, IncompleteState::Paused);
                    assert_eq!(data.continue_command, "reftool sum items.txt");
                    assert!(data.progress.done >= last_done, "never decreasing");
                    assert!(data.progress.done > 0);
                    last_done = data.progress.done;
                    job_ids.insert(data.job_id);
                    hops += 1;
                    assert!(hops < 100);
                }
                Answer::Done { job, sum } => break (job, sum),
            }
        };
        assert!(hops >= 2, "the budget really interrupted the work ({hops} hops)");
        assert_eq!(sum, (0..ITEMS).sum::<u64>(), "no item lost or counted twice");
        assert_eq!(job_ids.len(), 1);
        assert!(job_ids.contains(&job), "one job across every continuation");
        let view = f
            .store
            .get(&f.conn(), "default", &crate::runtime::ids::JobId::parse(&job).unwrap())
            .unwrap();
        assert_eq!((view.status, view.progress.done), (JobStatus::Succeeded, ITEMS));
        // After completion the identical invocation starts fresh: a new job, from zero.
        match run_front(&f, Duration::from_millis(30)) {
            Answer::Incomplete(data) => {
                assert_ne!(data.job_id, job);
                assert!(data.progress.done < ITEMS / 2, "{:?}", data.progress);
            }
            Answer::Done { .. } => panic!("a fresh run cannot finish within 30 ms"),
        }
    }
}
