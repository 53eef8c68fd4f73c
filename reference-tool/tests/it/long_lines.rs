//! analyze on a CSV whose one line is tens of MB long: linear time, and progress that moves
//! inside the line (the idle watchdog must not take a long line for a stall).

use std::time::{Duration, Instant};

use crate::budget::assert_incomplete;
use crate::support::Sandbox;

/// The long line's length.
const LINE_BYTES: usize = 20 * 1024 * 1024;

/// `n,blob`, a first row whose blob is [`LINE_BYTES`] long, and a short row: the file's size.
fn long_line_csv(sandbox: &Sandbox) -> u64 {
    let mut text = String::with_capacity(LINE_BYTES + 64);
    text.push_str("n,blob\n7,");
    text.extend(std::iter::repeat_n('x', LINE_BYTES));
    text.push_str("\n8,9\n");
    std::fs::write(sandbox.path().join("long.csv"), &text).unwrap();
    text.len() as u64
}

fn assert_long_line_result(data: &serde_json::Value, size: u64) {
    assert_eq!(data["rows"], 2, "{data}");
    assert_eq!(data["bytes"], size);
    assert_eq!(data["columns"][0]["count"], 2);
    assert_eq!(data["columns"][0]["max"], 8.0);
    assert_eq!(data["columns"][1]["count"], 1, "only the short row's blob is a number");
}

#[test]
fn a_20_mb_line_is_analyzed_in_linear_time() {
    let sandbox = Sandbox::new();
    let size = long_line_csv(&sandbox);
    let started = Instant::now();
    let run = sandbox.run(&["analyze", "long.csv", "--budget", "0"]);
    let took = started.elapsed();
    assert_eq!(run.exit, 0, "{}", run.stdout);
    assert_long_line_result(&run.envelope()["data"], size);
    // Linear work reads 20 MB in well under a second even unoptimized; rescanning the
    // unfinished line after every 16 KiB chunk took about 15 s optimized.
    assert!(took < Duration::from_secs(5), "20 MB in one line took {took:?}");
}

/// Waits on job `id` until it ends, checking that its progress never goes back from `from`.
fn wait_to_end(
    sandbox: &Sandbox,
    id: &str,
    from: u64,
    env: &[(&str, &str)],
) -> crate::support::Run {
    let mut last = from;
    loop {
        let run = sandbox.run_env(&["job", "wait", id, "--budget", "300ms"], env);
        let now = run.json["data"]["progress"]["done"].as_u64().unwrap_or(last);
        assert!(now >= last, "progress went back from {last} to {now}");
        last = now;
        if run.exit != 14 {
            return run;
        }
    }
}

/// Out of the edit lane (`.config/nextest.toml`): each takes ten seconds or more.
mod heavy {
    use super::*;

    #[test]
    fn a_worker_killed_inside_a_long_line_resumes_from_its_checkpoint() {
        let sandbox = Sandbox::new();
        let size = long_line_csv(&sandbox);
        let env = [("REFTOOL_PACE_MS", "2"), ("REFTOOL_TEST_MODE", "1")];
        let args = ["analyze", "long.csv", "--budget", "500ms"];
        let first = sandbox.run_env(&args, &env);
        assert_incomplete(&first, "running");
        let workers = sandbox.workers();
        assert_eq!(workers.len(), 1, "one worker: {workers:?}");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(workers[0]),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !sandbox.workers().is_empty() {
            assert!(Instant::now() < deadline, "the killed worker is still there");
            std::thread::sleep(Duration::from_millis(10));
        }
        let killed_at = first.json["data"]["progress"]["done"].as_u64().unwrap();
        let lost = sandbox.run(&["job", "wait", first.json["data"]["job_id"].as_str().unwrap()]);
        assert_eq!(lost.code(), "JOB_LOST", "{}", lost.stdout);

        // The identical invocation resumes inside the line: from the checkpoint's bytes, read
        // again from the line's start without going back, to the uninterrupted result.
        let again = sandbox.run_env(&args, &env);
        assert_incomplete(&again, "running");
        let resumed = again.json["data"]["progress"]["done"].as_u64().unwrap();
        assert!(resumed >= killed_at, "resumed at {resumed}, below {killed_at}");
        let end =
            wait_to_end(&sandbox, again.json["data"]["job_id"].as_str().unwrap(), resumed, &env);
        assert_eq!(end.exit, 0, "{}", end.stdout);
        assert_long_line_result(&end.envelope()["data"], size);
    }
    #[test]
    fn progress_moves_inside_a_long_line_and_never_goes_back() {
        let sandbox = Sandbox::new();
        let size = long_line_csv(&sandbox);
        // 2 ms per 16 KiB chunk: about 2.6 s for the line, so the budget ends inside it.
        let env = [("REFTOOL_PACE_MS", "2"), ("REFTOOL_TEST_MODE", "1")];
        let first = sandbox.run_env(&["analyze", "long.csv", "--budget", "500ms"], &env);
        assert_incomplete(&first, "running");
        let done = first.json["data"]["progress"]["done"].as_u64().unwrap();
        // Before the line ends only its header's 7 bytes would count as done.
        assert!(done > 64 * 1024, "progress moved inside the line: done {done}");
        assert!(done < LINE_BYTES as u64, "the budget ended inside the line: done {done}");
        let id = first.json["data"]["job_id"].as_str().unwrap().to_owned();
        let end = wait_to_end(&sandbox, &id, done, &env);
        assert_eq!(end.exit, 0, "{}", end.stdout);
        assert_long_line_result(&end.envelope()["data"], size);
    }
}
