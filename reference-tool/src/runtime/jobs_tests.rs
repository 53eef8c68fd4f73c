//! Tests of the job store: real SQLite files, real directories, real processes.

use super::*;
use std::process::{Child, Command};
use std::time::Duration;

pub(crate) struct Fixture {
    _tmp: tempfile::TempDir,
    pub store: JobStore,
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = JobStore::new(dir.path().join("state"));
        std::fs::create_dir_all(store.state_dir()).unwrap();
        let f = Fixture { _tmp: dir, store };
        ensure_schema(&f.conn()).unwrap();
        f
    }

    pub fn conn(&self) -> Connection {
        let c = Connection::open(self.store.state_dir().join("state.db")).unwrap();
        c.busy_timeout(Duration::from_secs(10)).unwrap();
        c.pragma_update(None, "journal_mode", "WAL").unwrap();
        c
    }
}

pub(crate) fn identity(args: &[&str], instance: &str) -> InvocationIdentity {
    InvocationIdentity {
        command_path: "analyze".into(),
        args: args.iter().map(OsString::from).collect(),
        cwd: "/tmp/work".into(),
        tool_version: "0.1.0".into(),
        stdin_digest: None,
        idempotency_key: None,
        instance: instance.into(),
    }
}

pub(crate) fn new_job(ident: InvocationIdentity, owner: ProcessIdentity) -> NewJob {
    NewJob {
        argv: vec!["reftool".into(), "analyze".into()],
        identity: ident,
        owner,
        lifetime_ms: DEFAULT_MAX_LIFETIME_MS,
        idle_timeout_ms: DEFAULT_IDLE_TIMEOUT_MS,
        stdin_spool: None,
        extra: serde_json::Value::Null,
    }
}

fn me() -> ProcessIdentity {
    ProcessIdentity::current().unwrap()
}

/// A `sleep` in its own session (so the store treats it as a detached worker).
struct Sleeper(Child);

impl Sleeper {
    fn start() -> Self {
        Sleeper(Command::new("setsid").arg("sleep").arg("60").spawn().unwrap())
    }
    fn ident(&self) -> ProcessIdentity {
        // setsid may exec in place (same pid) once the session is made.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let sid_ok = is_session_leader(self.0.id());
            if sid_ok || std::time::Instant::now() > deadline {
                return ProcessIdentity::of(self.0.id()).unwrap();
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn created(c: Claim) -> JobView {
    match c {
        Claim::Created(v) => v,
        other => panic!("expected Created, got {other:?}"),
    }
}

#[test]
fn identical_invocation_attaches_and_another_instance_sees_nothing() {
    let f = Fixture::new();
    let conn = f.conn();
    let a = created(
        f.store.create_or_attach(&conn, new_job(identity(&["a.csv"], "one"), me())).unwrap(),
    );
    assert!(a.dir.join(JOB_FILE).exists());
    assert_eq!(a.status, JobStatus::Running);
    match f.store.create_or_attach(&conn, new_job(identity(&["a.csv"], "one"), me())).unwrap() {
        Claim::Attached(v) => assert_eq!(v.record.job_id, a.record.job_id),
        other => panic!("{other:?}"),
    }
    // Other arguments, or another instance: a new job.
    created(f.store.create_or_attach(&conn, new_job(identity(&["b.csv"], "one"), me())).unwrap());
    let other = created(
        f.store.create_or_attach(&conn, new_job(identity(&["a.csv"], "two"), me())).unwrap(),
    );
    assert_ne!(other.record.job_id, a.record.job_id);
    // Instance scoping: reading, cancelling across instances is NotFound.
    assert!(matches!(f.store.get(&conn, "two", &a.record.job_id), Err(JobError::NotFound(_))));
    assert!(matches!(
        f.store.request_cancel(&conn, "two", &a.record.job_id),
        Err(JobError::NotFound(_))
    ));
    assert!(!f.store.cancel_requested(&conn, &a.record.job_id).unwrap());
    assert_eq!(f.store.get(&conn, "one", &a.record.job_id).unwrap().status, JobStatus::Running);
}

#[test]
fn eight_identical_invocations_at_once_make_one_job() {
    let f = Fixture::new();
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
    let claims: Vec<Claim> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let barrier = barrier.clone();
                let f = &f;
                s.spawn(move || {
                    let conn = f.conn();
                    barrier.wait();
                    f.store
                        .create_or_attach(&conn, new_job(identity(&["big.csv"], "default"), me()))
                        .unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let created_n = claims.iter().filter(|c| matches!(c, Claim::Created(_))).count();
    let attached_n = claims.iter().filter(|c| matches!(c, Claim::Attached(_))).count();
    assert_eq!((created_n, attached_n), (1, 7));
    let ids: std::collections::HashSet<_> = claims
        .iter()
        .map(|c| match c {
            Claim::Created(v) | Claim::Attached(v) | Claim::Resumed(v) | Claim::Ended(v) => {
                v.record.job_id.clone()
            }
        })
        .collect();
    assert_eq!(ids.len(), 1);
    let dirs = std::fs::read_dir(f.store.instance_dir("default")).unwrap().count();
    assert_eq!(dirs, 1);
}

#[test]
fn a_dead_worker_is_lost_with_its_log_tail_and_a_new_job_takes_over() {
    let f = Fixture::new();
    let conn = f.conn();
    let sleeper = Sleeper::start();
    let job = created(
        f.store
            .create_or_attach(&conn, new_job(identity(&["x"], "default"), sleeper.ident()))
            .unwrap(),
    );
    std::fs::write(job.dir.join(LOG_FILE), "starting\nMemoryError at chunk 412\n").unwrap();
    assert_eq!(
        f.store.get(&conn, "default", &job.record.job_id).unwrap().status,
        JobStatus::Running
    );
    drop(sleeper);
    let view = f.store.get(&conn, "default", &job.record.job_id).unwrap();
    assert_eq!(view.status, JobStatus::Lost);
    let outcome = view.outcome.unwrap();
    assert_eq!(outcome.exit_code, EXIT_GENERAL_ERROR);
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.code, JOB_LOST);
    assert!(failure.detail.unwrap().contains("MemoryError at chunk 412"));
    let next = created(
        f.store.create_or_attach(&conn, new_job(identity(&["x"], "default"), me())).unwrap(),
    );
    assert_ne!(next.record.job_id, job.record.job_id);
}

#[test]
fn a_reused_pid_does_not_keep_a_job_alive() {
    let f = Fixture::new();
    let conn = f.conn();
    let real = me();
    let impostor = ProcessIdentity { pid: real.pid, start_time: real.start_time + 7 };
    let job = created(
        f.store.create_or_attach(&conn, new_job(identity(&["x"], "default"), impostor)).unwrap(),
    );
    assert_eq!(f.store.get(&conn, "default", &job.record.job_id).unwrap().status, JobStatus::Lost);
}

#[test]
fn cancel_is_scoped_to_its_job_and_never_outlives_it() {
    let f = Fixture::new();
    let conn = f.conn();
    let ident = identity(&["c"], "default");
    let job = created(f.store.create_or_attach(&conn, new_job(ident.clone(), me())).unwrap());
    let id = job.record.job_id.clone();
    assert_eq!(f.store.request_cancel(&conn, "default", &id).unwrap(), CancelOutcome::Cancelling);
    assert!(f.store.cancel_requested(&conn, &id).unwrap());
    // The owner cannot pause past a cancel...
    assert_eq!(f.store.pause(&conn, "default", &id).unwrap(), PauseOutcome::CancelRequested);
    // ...it ends the job as cancelled.
    std::fs::create_dir_all(f.store.checkpoint_path("default", &ident.key()).parent().unwrap())
        .unwrap();
    std::fs::write(f.store.checkpoint_path("default", &ident.key()), "{}").unwrap();
    assert!(f.store.finish_cancelled(&conn, "default", &id).unwrap());
    assert!(!f.store.checkpoint_path("default", &ident.key()).exists(), "checkpoint discarded");
    let view = f.store.get(&conn, "default", &id).unwrap();
    assert_eq!(view.status, JobStatus::Cancelled);
    assert!(f.store.was_cancelled(&conn, id.as_str()).unwrap());
    // A late cancel: JobEnded and nothing changes.
    let before = std::fs::read(view.dir.join(RESULT_FILE)).unwrap();
    assert!(matches!(
        f.store.request_cancel(&conn, "default", &id),
        Err(JobError::JobEnded { .. })
    ));
    assert_eq!(std::fs::read(view.dir.join(RESULT_FILE)).unwrap(), before);
    // The identical invocation starts afresh, with no flag.
    let next = created(f.store.create_or_attach(&conn, new_job(ident, me())).unwrap());
    assert!(!f.store.cancel_requested(&conn, &next.record.job_id).unwrap());
    assert_eq!(f.store.pause(&conn, "default", &next.record.job_id).unwrap(), PauseOutcome::Paused);
}

#[test]
fn a_cancel_of_a_finished_job_leaves_nothing_behind() {
    let f = Fixture::new();
    let conn = f.conn();
    let ident = identity(&["d"], "default");
    let job = created(f.store.create_or_attach(&conn, new_job(ident.clone(), me())).unwrap());
    let id = job.record.job_id.clone();
    let outcome = JobOutcome::finished(0, serde_json::json!({"ok": true}));
    assert!(f.store.finish(&conn, "default", &id, &outcome).unwrap());
    assert!(
        !f.store.finish(&conn, "default", &id, &JobOutcome::cancelled(&id)).unwrap(),
        "first end wins"
    );
    assert!(matches!(
        f.store.request_cancel(&conn, "default", &id),
        Err(JobError::JobEnded { status: JobStatus::Succeeded, .. })
    ));
    let flags: i64 =
        conn.query_row("SELECT SUM(cancel_requested) FROM reftool_jobs", [], |r| r.get(0)).unwrap();
    assert_eq!(flags, 0);
    assert_eq!(f.store.get(&conn, "default", &id).unwrap().outcome.unwrap(), outcome);
    let next = created(f.store.create_or_attach(&conn, new_job(ident, me())).unwrap());
    assert_eq!(f.store.pause(&conn, "default", &next.record.job_id).unwrap(), PauseOutcome::Paused);
}

#[test]
fn a_paused_job_is_resumed_with_its_id_and_cancelled_at_once() {
    let f = Fixture::new();
    let conn = f.conn();
    let ident = identity(&["p"], "default");
    let job = created(f.store.create_or_attach(&conn, new_job(ident.clone(), me())).unwrap());
    let id = job.record.job_id.clone();
    assert_eq!(f.store.pause(&conn, "default", &id).unwrap(), PauseOutcome::Paused);
    assert_eq!(
        f.store.get(&conn, "default", &id).unwrap().status,
        JobStatus::Paused,
        "paused is not lost"
    );
    match f.store.create_or_attach(&conn, new_job(ident.clone(), me())).unwrap() {
        Claim::Resumed(v) => assert_eq!(v.record.job_id, id),
        other => panic!("{other:?}"),
    }
    assert_eq!(f.store.pause(&conn, "default", &id).unwrap(), PauseOutcome::Paused);
    let cp = f.store.checkpoint_path("default", &ident.key());
    std::fs::create_dir_all(cp.parent().unwrap()).unwrap();
    std::fs::write(&cp, "{}").unwrap();
    assert_eq!(f.store.request_cancel(&conn, "default", &id).unwrap(), CancelOutcome::Cancelled);
    assert!(!cp.exists());
    assert_eq!(f.store.get(&conn, "default", &id).unwrap().status, JobStatus::Cancelled);
    created(f.store.create_or_attach(&conn, new_job(ident, me())).unwrap());
}

#[test]
fn a_silent_worker_is_stalled_and_killed() {
    let f = Fixture::new();
    let conn = f.conn();
    let mut sleeper = Sleeper::start();
    let owner = sleeper.ident();
    let mut nj = new_job(identity(&["s"], "default"), owner);
    nj.idle_timeout_ms = 100;
    let job = created(f.store.create_or_attach(&conn, nj).unwrap());
    assert_eq!(
        f.store.get(&conn, "default", &job.record.job_id).unwrap().status,
        JobStatus::Running
    );
    std::thread::sleep(Duration::from_millis(200));
    let view = f.store.get(&conn, "default", &job.record.job_id).unwrap();
    assert_eq!(view.status, JobStatus::Stalled);
    let outcome = view.outcome.unwrap();
    assert_eq!(
        (outcome.exit_code, outcome.failure.unwrap().code.as_str()),
        (EXIT_TIMEOUT, STALLED)
    );
    let status = sleeper.0.wait().unwrap();
    assert!(!status.success(), "the worker was killed");
}

#[test]
fn progress_keeps_a_job_from_stalling() {
    let f = Fixture::new();
    let conn = f.conn();
    let mut nj = new_job(identity(&["s2"], "default"), me());
    nj.idle_timeout_ms = 300;
    let job = created(f.store.create_or_attach(&conn, nj).unwrap());
    let mut reporter =
        super::super::progress::ProgressReporter::new(Some(job.dir.clone())).strict(true);
    for done in 1..=6 {
        std::thread::sleep(Duration::from_millis(100));
        reporter.report(done, Some(6), Some("steps")).unwrap();
        reporter.flush().unwrap();
        assert_eq!(
            f.store.get(&conn, "default", &job.record.job_id).unwrap().status,
            JobStatus::Running
        );
    }
    assert_eq!(f.store.get(&conn, "default", &job.record.job_id).unwrap().progress.done, 6);
}

#[test]
fn a_job_past_its_lifetime_times_out() {
    let f = Fixture::new();
    let conn = f.conn();
    let ident = identity(&["t"], "default");
    let mut nj = new_job(ident.clone(), me());
    nj.lifetime_ms = 0;
    let job = created(f.store.create_or_attach(&conn, nj).unwrap());
    let view = f.store.get(&conn, "default", &job.record.job_id).unwrap();
    assert_eq!(view.status, JobStatus::TimedOut);
    assert_eq!(view.outcome.unwrap().exit_code, EXIT_TIMEOUT);
    // A paused job past its lifetime is ended when its continuation arrives.
    let mut nj = new_job(identity(&["t2"], "default"), me());
    nj.lifetime_ms = 150;
    let job = created(f.store.create_or_attach(&conn, nj.clone()).unwrap());
    f.store.pause(&conn, "default", &job.record.job_id).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        matches!(f.store.create_or_attach(&conn, nj).unwrap(), Claim::Ended(v) if v.status == JobStatus::TimedOut)
    );
}

/// A file holding `bytes`, read from its start (stdin redirected from a file).
fn input(bytes: &[u8]) -> std::fs::File {
    use std::io::{Seek, Write};
    let mut file = tempfile::tempfile().unwrap();
    file.write_all(bytes).unwrap();
    file.rewind().unwrap();
    file
}

fn unbounded() -> crate::runtime::spool::SpoolLimits<'static> {
    crate::runtime::spool::SpoolLimits { max_bytes: u64::MAX, deadline: None, interrupt: None }
}

#[test]
fn stdin_spool_moves_into_the_job_and_is_dropped_on_attach() {
    let f = Fixture::new();
    let conn = f.conn();
    let spool = f.store.spool_stdin("default", &mut input(b"a,b\n1,2\n"), unbounded()).unwrap();
    assert_eq!(spool.digest, crate::runtime::identity::digest_reader(&b"a,b\n1,2\n"[..]).unwrap());
    let mut ident = identity(&["-"], "default");
    ident.stdin_digest = Some(spool.digest.clone());
    let mut nj = new_job(ident.clone(), me());
    nj.stdin_spool = Some(spool.path.clone());
    let job = created(f.store.create_or_attach(&conn, nj).unwrap());
    assert_eq!(std::fs::read(job.dir.join(STDIN_FILE)).unwrap(), b"a,b\n1,2\n");
    assert!(!spool.path.exists());
    let spool2 = f.store.spool_stdin("default", &mut input(b"a,b\n1,2\n"), unbounded()).unwrap();
    let mut nj = new_job(ident, me());
    nj.stdin_spool = Some(spool2.path.clone());
    assert!(matches!(f.store.create_or_attach(&conn, nj).unwrap(), Claim::Attached(_)));
    assert!(!spool2.path.exists());
}

#[test]
fn a_spool_past_its_cap_is_refused_and_removed() {
    let f = Fixture::new();
    let limits = crate::runtime::spool::SpoolLimits { max_bytes: 4, ..unbounded() };
    let spooled = f.store.spool_stdin("default", &mut input(b"a,b\n1,2\n"), limits);
    assert!(matches!(spooled, Err(crate::runtime::spool::SpoolError::TooLarge { limit: 4 })));
    let left: Vec<_> = std::fs::read_dir(f.store.instance_dir("default")).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn finished_jobs_are_removed_after_retention() {
    let f = Fixture::new();
    let conn = f.conn();
    let job = created(
        f.store.create_or_attach(&conn, new_job(identity(&["r"], "default"), me())).unwrap(),
    );
    let running = created(
        f.store.create_or_attach(&conn, new_job(identity(&["r2"], "default"), me())).unwrap(),
    );
    f.store
        .finish(
            &conn,
            "default",
            &job.record.job_id,
            &JobOutcome::finished(0, serde_json::json!({})),
        )
        .unwrap();
    assert_eq!(f.store.cleanup_expired(&conn, RETENTION_MS).unwrap(), 0);
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(f.store.cleanup_expired(&conn, 1).unwrap(), 1);
    assert!(!job.dir.exists());
    assert!(running.dir.exists(), "active jobs are never cleaned");
    assert!(matches!(
        f.store.get(&conn, "default", &job.record.job_id),
        Err(JobError::NotFound(_))
    ));
}

#[test]
fn argv_with_any_bytes_round_trips_through_the_record() {
    use std::os::unix::ffi::OsStringExt;
    let f = Fixture::new();
    let conn = f.conn();
    let mut nj = new_job(identity(&["b"], "default"), me());
    nj.argv =
        vec!["reftool".into(), "it's a file.csv".into(), OsString::from_vec(vec![0xff, b'x'])];
    let job = created(f.store.create_or_attach(&conn, nj.clone()).unwrap());
    assert_eq!(
        f.store.peek(&conn, "default", &job.record.job_id).unwrap().record.argv_os(),
        nj.argv
    );
}

#[test]
fn time_spent_paused_does_not_count_as_silence() {
    let f = Fixture::new();
    let conn = f.conn();
    let mut nj = new_job(identity(&["idle"], "default"), me());
    nj.idle_timeout_ms = 300;
    let job = created(f.store.create_or_attach(&conn, nj.clone()).unwrap());
    let mut reporter =
        super::super::progress::ProgressReporter::new(Some(job.dir.clone())).strict(true);
    reporter.report(3, None, None).unwrap();
    f.store.pause(&conn, "default", &job.record.job_id).unwrap();
    std::thread::sleep(Duration::from_millis(450));
    assert_eq!(
        f.store.get(&conn, "default", &job.record.job_id).unwrap().status,
        JobStatus::Paused
    );
    match f.store.create_or_attach(&conn, nj).unwrap() {
        Claim::Resumed(v) => assert_eq!(v.progress.done, 3, "progress survives the pause"),
        other => panic!("{other:?}"),
    }
    let view = f.store.get(&conn, "default", &job.record.job_id).unwrap();
    assert_eq!(view.status, JobStatus::Running, "the idle clock restarted on resume");
    std::thread::sleep(Duration::from_millis(450));
    assert_eq!(
        f.store.get(&conn, "default", &job.record.job_id).unwrap().status,
        JobStatus::Stalled
    );
}
