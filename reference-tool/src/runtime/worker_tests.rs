//! Tests of the worker: real re-exec of this test binary, real sessions, real signals.

use super::*;
use crate::runtime::checkpoint::Flow;
use crate::runtime::jobs::tests::{Fixture, identity, new_job};
use crate::runtime::jobs::{CancelOutcome, Claim, JobView};
use crate::runtime::wake::{WaitOutcome, wait_for_job};
use std::io::Write;
use std::time::Instant;

const CHILD_TEST: &str = "runtime::worker::tests::worker_child_process";

fn child_args() -> Vec<OsString> {
    [CHILD_TEST, "--exact", "-q", "--test-threads=1", "--nocapture"]
        .iter()
        .map(OsString::from)
        .collect()
}

/// The worker process of the tests below: does nothing unless started as a worker.
#[test]
fn worker_child_process() {
    let args: Vec<OsString> = std::env::args_os().collect();
    let Some(job_dir) = worker_job_dir(&args) else { return };
    detach_self().unwrap();
    let state_dir = job_dir.ancestors().nth(3).unwrap().to_owned();
    let store = JobStore::new(&state_dir);
    let conn = Connection::open(state_dir.join("state.db")).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    let code = worker_main(&store, &conn, &job_dir, None, |ctx| {
        let mode = ctx.job().record.extra["mode"].as_str().unwrap_or("finish").to_owned();
        let _ = writeln!(io::stdout(), "hello from worker, mode {mode}");
        let _ = writeln!(io::stderr(), "worker stderr line");
        match mode.as_str() {
            "finish" | "finish_slow" => {
                let (steps, pause) = if mode == "finish" { (5, 20) } else { (20, 50) };
                for i in 1..=steps {
                    std::thread::sleep(Duration::from_millis(pause));
                    ctx.progress(i, Some(steps), Some("steps")).unwrap();
                    if let Some(r) = ctx.should_stop() {
                        return WorkEnd::Stopped(r);
                    }
                }
                let me = nix::unistd::getpid();
                let sid = nix::unistd::getsid(None).unwrap();
                let fd1 = std::fs::read_link("/proc/self/fd/1").unwrap();
                let fd0 = std::fs::read_link("/proc/self/fd/0").unwrap();
                let open_fds = std::fs::read_dir("/proc/self/fd").unwrap().count();
                WorkEnd::Finished {
                    exit_code: 0,
                    response: serde_json::json!({
                        "ok": true,
                        "data": {"pid": me.as_raw(), "sid": sid.as_raw(), "fd1": fd1, "fd0": fd0, "open_fds": open_fds}
                    }),
                }
            }
            "loop" => {
                let cp = ctx.file_checkpoints("fp");
                for i in 1..100_000u64 {
                    std::thread::sleep(Duration::from_millis(20));
                    ctx.progress(i, None, Some("steps")).unwrap();
                    match ctx.checkpoint(&cp, &serde_json::json!({"i": i}), i).unwrap() {
                        Flow::Continue => {}
                        Flow::Stop(r) => return WorkEnd::Stopped(r),
                    }
                }
                WorkEnd::Finished { exit_code: 0, response: serde_json::json!({}) }
            }
            _ => {
                // Silent: alive, no progress.
                std::thread::sleep(Duration::from_secs(60));
                WorkEnd::Finished { exit_code: 0, response: serde_json::json!({}) }
            }
        }
    })
    .unwrap();
    std::process::exit(i32::from(code));
}

fn start(f: &Fixture, mode: &str, idle_timeout_ms: u64) -> (JobView, std::process::Child) {
    let mut nj = new_job(identity(&[mode], "default"), ProcessIdentity::current().unwrap());
    nj.extra = serde_json::json!({ "mode": mode });
    nj.idle_timeout_ms = idle_timeout_ms;
    let view = match f.store.create_or_attach(&f.conn(), nj).unwrap() {
        Claim::Created(v) => v,
        other => panic!("{other:?}"),
    };
    let exe = std::env::current_exe().unwrap();
    let child = spawn_worker_command(&exe, &child_args(), &view.dir, f.store.state_dir()).unwrap();
    f.store
        .set_owner(
            &f.conn(),
            "default",
            &view.record.job_id,
            ProcessIdentity::of(child.id()).unwrap(),
        )
        .unwrap();
    (view, child)
}

fn wait_end(f: &Fixture, view: &JobView, limit: Duration) -> JobView {
    match wait_for_job(
        &f.store,
        &f.conn(),
        "default",
        &view.record.job_id,
        Some(Instant::now() + limit),
    )
    .unwrap()
    {
        WaitOutcome::Ended(v) => v,
        WaitOutcome::Pending(v) => panic!("still pending: {v:?}"),
    }
}

#[test]
fn the_worker_runs_detached_with_its_own_stdio_and_answers() {
    let f = Fixture::new();
    let (view, mut child) = start(&f, "finish", 300_000);
    let end = wait_end(&f, &view, Duration::from_secs(30));
    child.wait().unwrap();
    assert_eq!(end.status, JobStatus::Succeeded, "{:?}", end.outcome);
    let outcome = end.outcome.unwrap();
    assert_eq!(outcome.exit_code, 0);
    let data = &outcome.response.unwrap()["data"];
    assert_eq!(data["pid"], data["sid"], "the worker leads its own session");
    let our_sid = nix::unistd::getsid(None).unwrap().as_raw();
    assert_ne!(data["sid"].as_i64().unwrap(), i64::from(our_sid));
    assert!(data["fd1"].as_str().unwrap().ends_with("/log"), "{data}");
    assert_eq!(data["fd0"], "/dev/null");
    // stdin, stdout, stderr and the listing handle itself: nothing inherited.
    assert!(data["open_fds"].as_u64().unwrap() <= 8, "{data}");
    let log = std::fs::read_to_string(view.dir.join(LOG_FILE)).unwrap();
    assert!(log.contains("hello from worker") && log.contains("worker stderr line"), "{log}");
    assert_eq!(end.progress.done, 5);
}

#[test]
fn killing_the_callers_process_group_does_not_stop_the_worker() {
    let f = Fixture::new();
    let mut nj = new_job(identity(&["pg"], "default"), ProcessIdentity::current().unwrap());
    nj.extra = serde_json::json!({ "mode": "finish_slow" });
    let view = match f.store.create_or_attach(&f.conn(), nj).unwrap() {
        Claim::Created(v) => v,
        other => panic!("{other:?}"),
    };
    // A "caller" in its own process group starts the worker as a plain child, then the whole
    // group is killed.
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().unwrap();
    let mut caller = Command::new("sh")
        .arg("-c")
        .arg("\"$@\" </dev/null >/dev/null 2>&1 & sleep 30")
        .arg("sh")
        .arg(&exe)
        .args(child_args())
        .arg(WORKER_ARG)
        .arg(&view.dir)
        .process_group(0)
        .spawn()
        .unwrap();
    let caller_pgid = caller.id();
    // Wait for the worker to register itself (then it has called setsid).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = f.store.peek(&f.conn(), "default", &view.record.job_id).unwrap();
        if v.owner.is_some_and(|o| o.pid != std::process::id()) {
            break;
        }
        assert!(Instant::now() < deadline, "worker never registered");
        std::thread::sleep(Duration::from_millis(10));
    }
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(i32::try_from(caller_pgid).unwrap()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    caller.wait().unwrap();
    let end = wait_end(&f, &view, Duration::from_secs(30));
    assert_eq!(end.status, JobStatus::Succeeded, "{:?}", end.outcome);
    assert_eq!(end.progress.done, 20);
}

#[test]
fn a_cancel_stops_the_worker_at_its_next_checkpoint_and_discards_it() {
    let f = Fixture::new();
    let (view, mut child) = start(&f, "loop", 300_000);
    let id = view.record.job_id.clone();
    let deadline = Instant::now() + Duration::from_secs(20);
    while f.store.peek(&f.conn(), "default", &id).unwrap().progress.done < 3 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    let cp_path = f.store.checkpoint_path("default", &view.record.identity);
    assert!(cp_path.exists());
    assert_eq!(
        f.store.request_cancel(&f.conn(), "default", &id).unwrap(),
        CancelOutcome::Cancelling
    );
    let end = wait_end(&f, &view, Duration::from_secs(20));
    let status = child.wait().unwrap();
    assert_eq!(end.status, JobStatus::Cancelled);
    assert_eq!(status.code(), Some(i32::from(EXIT_GENERAL_ERROR)));
    assert!(!cp_path.exists(), "the checkpoint is discarded");
}

#[test]
fn a_silent_worker_is_ended_by_its_own_watchdog() {
    let f = Fixture::new();
    let (view, mut child) = start(&f, "silent", 400);
    // Nobody waits: the worker's watchdog alone must end it.
    let started = Instant::now();
    let status = child.wait().unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert_eq!(status.code(), Some(i32::from(EXIT_TIMEOUT)));
    let v = f.store.get(&f.conn(), "default", &view.record.job_id).unwrap();
    assert_eq!(v.status, JobStatus::Stalled);
}

#[test]
fn a_foreign_directory_is_not_a_job() {
    let f = Fixture::new();
    let other = tempfile::tempdir().unwrap();
    std::fs::write(
        other.path().join(JOB_FILE),
        serde_json::to_vec(&f.store.peek(&f.conn(), "default", &start_only(&f)).unwrap().record)
            .unwrap(),
    )
    .unwrap();
    // Not run through worker_main (it would setsid the test runner); the check itself:
    let record: JobRecord = read_json(&other.path().join(JOB_FILE)).unwrap().unwrap();
    let expected = f.store.job_dir(&record.instance, &record.job_id);
    assert_ne!(std::fs::canonicalize(&expected).ok(), std::fs::canonicalize(other.path()).ok());
}

fn start_only(f: &Fixture) -> crate::runtime::ids::JobId {
    match f
        .store
        .create_or_attach(
            &f.conn(),
            new_job(identity(&["only"], "default"), ProcessIdentity::current().unwrap()),
        )
        .unwrap()
    {
        Claim::Created(v) => v.record.job_id,
        other => panic!("{other:?}"),
    }
}
