//! A state database that another process keeps locked: a call with a budget waits for it no
//! longer than its budget (it used to wait the whole busy timeout, 5 s), `job status` does not
//! wait at all, and a detached worker waits it out instead of dying (its job was JOB_LOST).

use std::time::{Duration, Instant};

use crate::budget::{ROWS, analyze_sandbox, assert_incomplete, paced};
use crate::support::Sandbox;

/// Holds the write lock of the sandbox's state database until dropped.
struct Lock(rusqlite::Connection);

impl Lock {
    fn take(sandbox: &Sandbox) -> Lock {
        let conn = rusqlite::Connection::open(sandbox.state_dir().join("state.db")).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        Lock(conn)
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = self.0.execute_batch("COMMIT");
    }
}

#[test]
fn a_locked_state_database_costs_a_call_its_budget_not_the_busy_timeout() {
    let sandbox = analyze_sandbox();
    sandbox.csv("rows.csv", 300);
    assert_eq!(sandbox.run(&["digest", "rows.csv"]).exit, 0, "the state database exists");
    let lock = Lock::take(&sandbox);
    let budget = Duration::from_millis(200);
    for args in [
        vec!["digest", "rows.csv", "--budget", "200ms"],
        vec!["analyze", "data.csv", "--budget", "200ms"],
        vec!["import", "rows.csv", "--db", "rows.db", "--budget", "200ms"],
        vec![
            "import",
            "rows.csv",
            "--db",
            "rows.db",
            "--budget",
            "200ms",
            "--idempotency-key",
            "k",
        ],
    ] {
        let started = Instant::now();
        let run = sandbox.run(&args);
        let took = started.elapsed();
        assert!(took < budget + Duration::from_millis(400), "{args:?} took {took:?}");
        assert_eq!((run.exit, run.code()), (12, "STATE_BUSY"), "{args:?}: {}", run.stdout);
        run.envelope();
        assert_eq!(run.json["error"]["retryable"], true);
        assert_eq!(run.json["meta"]["budget_ms"], 200);
    }
    drop(lock);
    let run = sandbox.run(&["digest", "rows.csv", "--budget", "200ms"]);
    assert_eq!(run.exit, 0, "the lock released, the call works: {}", run.stdout);
}

#[test]
fn job_status_does_not_wait_for_a_locked_state_database() {
    let sandbox = analyze_sandbox();
    let first = paced(&sandbox, &["analyze", "data.csv", "--budget", "300ms"], &[]);
    assert_incomplete(&first, "running");
    let id = first.json["data"]["job_id"].as_str().unwrap().to_owned();
    let lock = Lock::take(&sandbox);
    let started = Instant::now();
    let status = sandbox.run(&["job", "status", &id]);
    let took = started.elapsed();
    drop(lock);
    assert!(took < Duration::from_secs(1), "job status waited {took:?}");
    assert_incomplete(&status, "running");
    assert_eq!(status.json["data"]["job_id"], id.as_str());
    let end = sandbox.run(&["job", "wait", &id, "--budget", "0"]);
    assert_eq!(end.exit, 0, "{}", end.stdout);
}

/// Out of the edit lane (`.config/nextest.toml`): these wait out paced work, a budget or a watchdog.
mod heavy {
    use super::*;

    /// The worker's work ends while the state database is locked for longer than its busy timeout
    /// (5 s): it waits the lock out and records its outcome, so the job ends well, not JOB_LOST.
    #[test]
    fn a_worker_waits_out_a_locked_state_database() {
        let sandbox = analyze_sandbox();
        let first = paced(&sandbox, &["analyze", "data.csv", "--budget", "300ms"], &[]);
        assert_incomplete(&first, "running");
        let id = first.json["data"]["job_id"].as_str().unwrap().to_owned();
        let lock = Lock::take(&sandbox);
        // The work ends after about 2 s; the lock is held 10 s, twice the busy timeout past it.
        std::thread::sleep(Duration::from_secs(10));
        assert_eq!(sandbox.workers_of(Some(&id)).len(), 1, "the worker is still there, waiting");
        drop(lock);
        let end = sandbox.run(&["job", "wait", &id, "--budget", "20s"]);
        assert_eq!(end.exit, 0, "{}", end.stdout);
        assert_eq!(end.json["data"]["rows"], ROWS);
    }
}
