//! Basic reliability of the job runtime: `--timeout` across continuations, retention, stdin
//! spooled into the job, identical invocations at once, and repeated `kill -9`.
//!
//! Hooks for the heavy versions (20 random kill points, 8-way races under load): the sandbox's
//! `workers_of(job)` finds a job's worker by its argv, `concurrent` runs N copies released at
//! the same instant, `kill_and_resume` kills after a given delay and resumes.

use std::io::Write;
use std::process::Stdio;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crate::budget::{PACE, analyze_sandbox, assert_incomplete, comparable, continue_loop, paced};
use crate::support::{Run, Sandbox};

/// Runs `n` copies of the same invocation, released together.
pub fn concurrent(sandbox: &Sandbox, args: &[&str], n: usize) -> Vec<Run> {
    let barrier = Arc::new(Barrier::new(n));
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|_| {
                let barrier = Arc::clone(&barrier);
                s.spawn(move || {
                    let mut cmd = sandbox.command(args);
                    cmd.env("REFTOOL_PACE_MS", PACE);
                    barrier.wait();
                    sandbox.run_cmd(cmd)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Starts `args` with no budget, `kill -9`s the process after `after`.
pub fn kill_after(sandbox: &Sandbox, args: &[&str], after: Duration) {
    let mut cmd = sandbox.command(args);
    cmd.env("REFTOOL_PACE_MS", PACE);
    let mut child = cmd.spawn().unwrap();
    std::thread::sleep(after);
    let _ = child.kill();
    child.wait().unwrap();
}

#[test]
fn timeout_bounds_the_whole_work_across_continuations() {
    let sandbox = crate::budget::digest_sandbox();
    let run =
        paced(&sandbox, &["digest", "big.txt", "--budget", "300ms", "--timeout", "1200ms"], &[]);
    assert_incomplete(&run, "paused");
    let hops = continue_loop(&sandbox, &run, &[]);
    let last = hops.last().unwrap();
    assert_eq!(last.exit, 10, "{}", last.stdout);
    assert_eq!(last.envelope()["error"]["code"], "TIMEOUT");

    // A detached job too: its worker stops at the limit, job wait answers TIMEOUT.
    let sandbox = analyze_sandbox();
    let run =
        paced(&sandbox, &["analyze", "data.csv", "--budget", "300ms", "--timeout", "1s"], &[]);
    assert_incomplete(&run, "running");
    let id = run.json["data"]["job_id"].as_str().unwrap();
    let wait = sandbox.run(&["job", "wait", id, "--budget", "0"]);
    assert_eq!((wait.exit, wait.code()), (10, "TIMEOUT"), "{}", wait.stdout);
}

#[test]
fn ended_jobs_are_removed_after_the_retention_period() {
    let sandbox = Sandbox::new();
    sandbox.csv("small.csv", 10);
    assert_eq!(sandbox.run(&["analyze", "small.csv"]).exit, 0);
    let jobs = sandbox.state_dir().join("jobs").join("n-default");
    let id = std::fs::read_dir(&jobs)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("job_"))
        .unwrap();
    assert_eq!(sandbox.run(&["job", "status", &id]).exit, 0);
    // Age it past 24 hours.
    let conn = rusqlite::Connection::open(sandbox.state_dir().join("state.db")).unwrap();
    conn.execute("UPDATE reftool_jobs SET ended_at_ms = 1000 WHERE job_id = ?1", [&id]).unwrap();
    drop(conn);
    // A temp file a killed writer left beside a checkpoint, an hour ago; and a fresh one.
    let checkpoints = sandbox.state_dir().join("checkpoints").join("n-default");
    std::fs::create_dir_all(&checkpoints).unwrap();
    let stale = checkpoints.join(".abc.json.tmp-0011");
    let fresh = checkpoints.join(".def.json.tmp-2233");
    std::fs::write(&stale, b"{").unwrap();
    std::fs::write(&fresh, b"{").unwrap();
    let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options().write(true).open(&stale).unwrap().set_modified(hour_ago).unwrap();
    // A new job's birth enforces retention...
    assert_eq!(sandbox.run(&["analyze", "small.csv"]).exit, 0);
    assert!(!jobs.join(&id).exists(), "the expired job directory is removed");
    // ...and so does every job command.
    let gone = sandbox.run(&["job", "status", &id]);
    assert_eq!((gone.exit, gone.code()), (5, "JOB_NOT_FOUND"));
    assert!(!stale.exists() && fresh.exists(), "only the old temp file is swept");
}

#[test]
fn identical_invocations_at_once_share_one_job() {
    let sandbox = analyze_sandbox();
    let runs = concurrent(&sandbox, &["analyze", "data.csv", "--budget", "500ms"], 6);
    let ids: std::collections::BTreeSet<String> = runs
        .iter()
        .map(|r| {
            assert_incomplete(r, "running");
            r.json["data"]["job_id"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(sandbox.workers().len(), 1);
    let id = ids.into_iter().next().unwrap();
    assert_eq!(sandbox.run(&["job", "wait", &id, "--budget", "0"]).exit, 0);
}

#[test]
fn a_writer_killed_again_and_again_commits_every_row_exactly_once() {
    let reference = Sandbox::new();
    let make = |sandbox: &Sandbox| {
        let mut text = String::from("n,label\n");
        for n in 1..=3000 {
            text.push_str(&format!("{n},row {n}\n"));
        }
        std::fs::write(sandbox.path().join("rows.csv"), text).unwrap();
    };
    make(&reference);
    let unbudgeted =
        paced(&reference, &["import", "rows.csv", "--db", "r.db", "--budget", "0"], &[]);

    let sandbox = Sandbox::new();
    make(&sandbox);
    let args = ["import", "rows.csv", "--db", "r.db", "--budget", "0"];
    let started = Instant::now();
    for after in [230u64, 410, 170, 530] {
        kill_after(&sandbox, &args, Duration::from_millis(after));
    }
    assert!(started.elapsed() < Duration::from_secs(20));
    let end = paced(&sandbox, &args, &[]);
    assert_eq!(comparable(&end), comparable(&unbudgeted));
    let (count, distinct): (i64, i64) = rusqlite::Connection::open(sandbox.path().join("r.db"))
        .unwrap()
        .query_row("SELECT count(*), count(DISTINCT _line) FROM rows", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((count, distinct), (3000, 3000));
}

/// Out of the edit lane (`.config/nextest.toml`): these wait out paced work, a budget or a watchdog.
mod heavy {
    use super::*;

    #[test]
    fn stdin_is_spooled_into_the_job_and_is_part_of_its_identity() {
        let sandbox = Sandbox::new();
        let csv = sandbox.csv("data.csv", 45_000);
        let run_with_stdin = |budget: &str| {
            let mut cmd = sandbox.command(&["analyze", "-", "--budget", budget]);
            cmd.env("REFTOOL_PACE_MS", PACE).stdin(Stdio::piped());
            let mut child = cmd.spawn().unwrap();
            let bytes = std::fs::read(&csv).unwrap();
            child.stdin.take().unwrap().write_all(&bytes).unwrap();
            sandbox.finish(child.wait_with_output().unwrap())
        };
        let first = run_with_stdin("300ms");
        assert_incomplete(&first, "running");
        let spool = sandbox
            .state_dir()
            .join("jobs/n-default")
            .join(first.json["data"]["job_id"].as_str().unwrap())
            .join("stdin");
        assert_eq!(std::fs::read(&spool).unwrap(), std::fs::read(&csv).unwrap());
        // The same bytes on stdin: the identical invocation attaches.
        let second = run_with_stdin("0");
        assert_eq!(second.exit, 0, "{}", second.stdout);
        assert_eq!(second.json["data"]["rows"], 45_000);
        let by_file = paced(&sandbox, &["analyze", "data.csv", "--budget", "0"], &[]);
        assert_eq!(by_file.json["data"]["columns"], second.json["data"]["columns"]);
    }
}
