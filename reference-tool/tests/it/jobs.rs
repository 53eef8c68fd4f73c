//! The detached job runtime (REQ-F-081) through the real binary: released pipes, a worker
//! outliving its caller's process group, job wait / status / cancel, attach, JOB_LOST and
//! resume from the checkpoint, STALLED on a quiet pipe, instance scoping, async jobs.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::budget::{PACE, analyze_sandbox, assert_incomplete, comparable, paced};
use crate::support::{Sandbox, assert_valid};

fn job_id(run: &crate::support::Run) -> String {
    run.json["data"]["job_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no job id: {}", run.stdout))
        .to_owned()
}

fn checkpoint_files(sandbox: &Sandbox) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    if let Ok(instances) = std::fs::read_dir(sandbox.state_dir().join("checkpoints")) {
        for inst in instances.flatten() {
            for f in std::fs::read_dir(inst.path()).unwrap().flatten() {
                files.push(f.path());
            }
        }
    }
    files
}

#[test]
fn the_callers_pipes_are_released_at_the_budget() {
    let sandbox = analyze_sandbox();
    let exe = assert_cmd::cargo::cargo_bin("reftool");
    let started = Instant::now();
    let output = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("'{}' analyze data.csv --budget 400ms | cat", exe.display()))
        .current_dir(sandbox.path())
        .env("REFTOOL_STATE_DIR", sandbox.state_dir())
        // About 6 s of work: a held pipe could not end the pipeline within the bound below.
        .env("REFTOOL_PACE_MS", "150")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let took = started.elapsed();
    let run = sandbox.finish(output);
    // The pipeline's status is cat's; the envelope carries reftool's.
    assert_eq!(run.json["meta"]["exit_code"], 14, "{}", run.stdout);
    assert_valid("incomplete-response.json", &run.json);
    // `cat` sees end-of-file when the front exits: the worker holds none of the pipes.
    assert!(took < Duration::from_millis(3000), "| cat returned after {took:?}");
    assert_eq!(sandbox.workers().len(), 1, "the work goes on in one worker");
}

#[test]
fn the_worker_survives_a_kill_of_the_callers_process_group() {
    let sandbox = analyze_sandbox();
    let exe = assert_cmd::cargo::cargo_bin("reftool");
    let mut caller = std::process::Command::new("sh");
    caller
        .arg("-c")
        .arg(format!("'{}' analyze data.csv --budget 300ms > first.json; sleep 30", exe.display()))
        .current_dir(sandbox.path())
        .env("REFTOOL_STATE_DIR", sandbox.state_dir())
        .env("REFTOOL_PACE_MS", PACE)
        .stdin(Stdio::null())
        .process_group(0);
    let mut child = caller.spawn().unwrap();
    let group = Pid::from_raw(i32::try_from(child.id()).unwrap());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sandbox.path().join("first.json").metadata().is_ok_and(|m| m.len() > 0) {
        assert!(Instant::now() < deadline, "the first call never answered");
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::killpg(group, Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    let first: serde_json::Value =
        serde_json::from_slice(&std::fs::read(sandbox.path().join("first.json")).unwrap()).unwrap();
    assert_eq!(first["meta"]["exit_code"], 14);
    let id = first["data"]["job_id"].as_str().unwrap();
    let wait = sandbox.run(&["job", "wait", id, "--budget", "0"]);
    assert_eq!(wait.exit, 0, "{}", wait.stdout);
    assert_eq!(wait.json["data"]["rows"], crate::budget::ROWS);
}

#[test]
fn job_wait_answers_with_the_jobs_own_exit_code() {
    let sandbox = Sandbox::new();
    // Valid CSV for about 20 chunks, then bytes that are not UTF-8: PRECONDITION 4 mid-way.
    let mut bytes = std::fs::read(sandbox.csv("bad.csv", 22_000)).unwrap();
    bytes.extend_from_slice(b"1,\xff\xfe\n");
    std::fs::write(sandbox.path().join("bad.csv"), bytes).unwrap();
    let run = paced(&sandbox, &["analyze", "bad.csv", "--budget", "300ms"], &[]);
    assert_incomplete(&run, "running");
    let id = job_id(&run);
    let status = sandbox.run(&["job", "status", &id]);
    assert_incomplete(&status, "running");
    assert_eq!(status.json["meta"]["budget_ms"], 0);
    let wait = sandbox.run(&["job", "wait", &id, "--budget", "0"]);
    assert_eq!(wait.exit, 4, "{}", wait.stdout);
    assert_eq!(wait.envelope()["error"]["code"], "INPUT_NOT_TEXT");
    assert_eq!(wait.json["meta"]["budget_ms"], 0);
    // An ended job answers the same to status, at once.
    let status = sandbox.run(&["job", "status", &id]);
    assert_eq!((status.exit, status.code()), (4, "INPUT_NOT_TEXT"));
}

#[test]
fn the_identical_invocation_attaches_to_the_running_job() {
    let sandbox = analyze_sandbox();
    let first = paced(&sandbox, &["analyze", "data.csv", "--budget", "300ms"], &[]);
    assert_incomplete(&first, "running");
    let second =
        paced(&sandbox, &["analyze", "data.csv", "--budget", "300ms", "--output", "json"], &[]);
    assert_incomplete(&second, "running");
    assert_eq!(job_id(&first), job_id(&second));
    assert_eq!(sandbox.workers().len(), 1, "one job, one worker");
    let third = paced(&sandbox, &["analyze", "data.csv", "--budget", "0"], &[]);
    assert_eq!(third.exit, 0);
    let jobs = std::fs::read_dir(sandbox.state_dir().join("jobs").join("n-default")).unwrap();
    let dirs =
        jobs.flatten().filter(|e| e.file_name().to_string_lossy().starts_with("job_")).count();
    assert_eq!(dirs, 1, "no second job was started");
}

#[test]
fn cancel_stops_the_job_discards_its_checkpoint_and_the_next_call_starts_afresh() {
    let sandbox = analyze_sandbox();
    let run = paced(&sandbox, &["analyze", "data.csv", "--budget", "600ms"], &[]);
    assert_incomplete(&run, "running");
    let id = job_id(&run);
    let cancel = sandbox.run(&["job", "cancel", &id]);
    assert_eq!(cancel.exit, 0, "{}", cancel.stdout);
    assert_eq!(cancel.envelope()["data"]["state"], "cancelled");
    let deadline = Instant::now() + Duration::from_secs(3);
    while !sandbox.workers_of(Some(&id)).is_empty() {
        assert!(Instant::now() < deadline, "the worker did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(checkpoint_files(&sandbox).is_empty(), "the checkpoint is discarded");
    let wait = sandbox.run(&["job", "wait", &id]);
    assert!(wait.exit != 0 && wait.exit != 14, "{}", wait.stdout);
    assert_eq!(wait.envelope()["error"]["code"], "CANCELLED");
    assert!(wait.json["meta"]["budget_ms"].is_u64(), "the budget in force: {}", wait.stdout);
    // A second cancel changes nothing.
    let again = sandbox.run(&["job", "cancel", &id]);
    assert_eq!((again.exit, again.code()), (4, "JOB_ENDED"));

    let fresh = paced(&sandbox, &["analyze", "data.csv", "--budget", "200ms"], &[]);
    assert_incomplete(&fresh, "running");
    assert_ne!(job_id(&fresh), id);
    let cancelled_at = run.json["data"]["progress"]["done"].as_u64().unwrap();
    assert!(
        fresh.json["data"]["progress"]["done"].as_u64().unwrap() < cancelled_at,
        "the fresh job started from the beginning"
    );
    sandbox.run(&["job", "cancel", &job_id(&fresh)]);
}

#[test]
fn a_stale_cancel_leaves_nothing_behind() {
    let sandbox = Sandbox::new();
    sandbox.csv("small.csv", 100);
    let done = sandbox.run(&["analyze", "small.csv"]);
    assert_eq!(done.exit, 0);
    // The job of that call ended; find it and cancel it late.
    let jobs = sandbox.state_dir().join("jobs").join("n-default");
    let id = std::fs::read_dir(&jobs)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("job_"))
        .unwrap();
    let cancel = sandbox.run(&["job", "cancel", &id]);
    assert_eq!((cancel.exit, cancel.code()), (4, "JOB_ENDED"));
    let status = sandbox.run(&["job", "status", &id]);
    assert_eq!(status.exit, 0, "the ended job keeps its outcome");
    // The next identical invocation runs normally, to the end.
    let again = paced(&sandbox, &["analyze", "small.csv", "--budget", "0"], &[]);
    assert_eq!(comparable(&again), comparable(&done));
}

#[test]
fn another_instance_can_neither_see_nor_cancel_a_job() {
    let sandbox = analyze_sandbox();
    let run = paced(
        &sandbox,
        &["analyze", "data.csv", "--budget", "300ms", "--instance-id", "team-a"],
        &[],
    );
    assert_incomplete(&run, "running");
    assert!(
        run.json["data"]["continue_command"].as_str().unwrap().contains("--instance-id team-a"),
        "{}",
        run.stdout
    );
    let id = job_id(&run);
    for verb in ["status", "wait", "cancel"] {
        let foreign = sandbox.run(&["job", verb, &id, "--instance-id", "team-b"]);
        assert_eq!((foreign.exit, foreign.code()), (5, "JOB_NOT_FOUND"), "{verb}");
        let default = sandbox.run(&["job", verb, &id]);
        assert_eq!(default.exit, 5, "{verb} from the default instance");
    }
    // The identical invocation under another instance is another job.
    let other = paced(
        &sandbox,
        &["analyze", "data.csv", "--budget", "300ms", "--instance-id", "team-b"],
        &[],
    );
    assert_ne!(job_id(&other), id);
    sandbox.run(&["job", "cancel", &job_id(&other), "--instance-id", "team-b"]);
    let own = sandbox.run(&["job", "wait", &id, "--budget", "0", "--instance-id", "team-a"]);
    assert_eq!(own.exit, 0, "{}", own.stdout);
}

#[test]
fn sigterm_before_the_budget_hands_off_at_once() {
    let sandbox = analyze_sandbox();
    let mut cmd = sandbox.command(&["analyze", "data.csv", "--budget", "20s"]);
    cmd.env("REFTOOL_PACE_MS", PACE);
    let child = cmd.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    kill(Pid::from_raw(i32::try_from(child.id()).unwrap()), Signal::SIGTERM).unwrap();
    let run = sandbox.finish(child.wait_with_output().unwrap());
    assert!(started.elapsed() < Duration::from_millis(2000), "{:?}", started.elapsed());
    assert_incomplete(&run, "running");
    assert_eq!(sandbox.workers().len(), 1, "the work goes on");
}

#[test]
fn an_async_command_returns_a_job_at_once() {
    let sandbox = Sandbox::new();
    std::fs::create_dir(sandbox.path().join("src")).unwrap();
    for i in 0..30 {
        std::fs::write(sandbox.path().join(format!("src/f{i}.txt")), format!("file {i}\n"))
            .unwrap();
    }
    let started = Instant::now();
    // About 4.5 s of work, answered at once.
    let run = sandbox.run_env(&["build", "--src", "src"], &[("REFTOOL_PACE_MS", "150")]);
    assert!(started.elapsed() < Duration::from_millis(2500));
    assert_eq!(run.exit, 0, "{}", run.stdout);
    let data = &run.envelope()["data"];
    assert_valid("job-descriptor.json", data);
    assert_eq!(
        (data["status"].as_str(), data["terminal"].as_bool()),
        (Some("running"), Some(false))
    );
    let id = data["job_id"].as_str().unwrap();
    let status = sandbox.run(&["job", "status", id]);
    assert_incomplete(&status, "running");
    assert_eq!(status.json["error"]["retryable"], true);
    let wait = sandbox.run(&["job", "wait", id, "--budget", "0"]);
    assert_eq!(wait.exit, 0, "{}", wait.stdout);
    assert_eq!(wait.envelope()["data"]["files"], 30);
}

#[test]
fn a_cancelled_deploy_leaves_no_partial_archive() {
    let sandbox = Sandbox::new();
    std::fs::create_dir(sandbox.path().join("site")).unwrap();
    for i in 0..40 {
        std::fs::write(sandbox.path().join(format!("site/p{i}.html")), "page\n").unwrap();
    }
    let run = paced(&sandbox, &["deploy", "site", "--to", "site.rtar", "--budget", "300ms"], &[]);
    assert_incomplete(&run, "running");
    assert_eq!(run.json["error"]["retryable"], false);
    let cancel = sandbox.run(&["job", "cancel", &job_id(&run)]);
    assert_eq!(cancel.exit, 0);
    let left: Vec<String> = std::fs::read_dir(sandbox.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("site.rtar"))
        .collect();
    assert!(left.is_empty(), "{left:?}");

    let done = paced(&sandbox, &["deploy", "site", "--to", "site.rtar", "--budget", "0"], &[]);
    assert_eq!(done.exit, 0, "{}", done.stdout);
    let archive = std::fs::read(sandbox.path().join("site.rtar")).unwrap();
    assert!(archive.starts_with(b"RTAR 1\n") && archive.ends_with(b"END\n"));
    assert_eq!(done.json["data"]["files"], 40);
}

#[test]
fn a_killed_resume_only_writer_continues_without_writing_a_row_twice() {
    let sandbox = Sandbox::new();
    let mut text = String::from("n,label\n");
    for n in 1..=3000 {
        text.push_str(&format!("{n},row {n}\n"));
    }
    std::fs::write(sandbox.path().join("rows.csv"), text).unwrap();
    let mut cmd = sandbox.command(&["import", "rows.csv", "--db", "r.db", "--budget", "0"]);
    cmd.env("REFTOOL_PACE_MS", PACE);
    let mut child = cmd.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(900));
    child.kill().unwrap();
    child.wait().unwrap();
    let committed: i64 = rusqlite::Connection::open(sandbox.path().join("r.db"))
        .unwrap()
        .query_row("SELECT count(*) FROM rows", [], |r| r.get(0))
        .unwrap();
    assert!(committed > 0 && committed < 3000, "killed mid-way: {committed} rows");
    let again = paced(&sandbox, &["import", "rows.csv", "--db", "r.db", "--budget", "0"], &[]);
    assert_eq!(again.exit, 0, "{}", again.stdout);
    assert_eq!(again.json["data"]["rows"], 3000);
    let (count, distinct): (i64, i64) = rusqlite::Connection::open(sandbox.path().join("r.db"))
        .unwrap()
        .query_row("SELECT count(*), count(DISTINCT _line) FROM rows", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((count, distinct), (3000, 3000));
}

#[test]
fn sigterm_pauses_a_resume_only_call_at_its_next_checkpoint() {
    let sandbox = crate::budget::digest_sandbox();
    let mut cmd = sandbox.command(&["digest", "big.txt", "--budget", "30s"]);
    cmd.env("REFTOOL_PACE_MS", PACE);
    let child = cmd.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let started = Instant::now();
    kill(Pid::from_raw(i32::try_from(child.id()).unwrap()), Signal::SIGTERM).unwrap();
    let run = sandbox.finish(child.wait_with_output().unwrap());
    assert!(started.elapsed() < Duration::from_millis(2000), "{:?}", started.elapsed());
    assert_incomplete(&run, "paused");
    let message = run.json["error"]["message"].as_str().unwrap();
    assert!(!message.contains("budget"), "a SIGTERM is no budget: {message}");
    assert_eq!(run.json["meta"]["budget_ms"], 30_000);
    let done = run.json["data"]["progress"]["done"].as_u64().unwrap();
    let again = paced(&sandbox, &["digest", "big.txt", "--budget", "200ms"], &[]);
    assert_incomplete(&again, "paused");
    assert_eq!(job_id(&again), job_id(&run), "the paused job continues under its id");
    assert!(again.json["data"]["progress"]["done"].as_u64().unwrap() >= done);
    sandbox.run(&["job", "cancel", &job_id(&again)]);
}

#[test]
fn a_person_waiting_on_a_detached_job_sees_its_progress_on_stderr() {
    use std::io::Read;
    let sandbox = analyze_sandbox();
    let pty = nix::pty::openpty(None, None).unwrap();
    let mut cmd = sandbox.command(&["analyze", "data.csv", "--budget", "0"]);
    // Without TERM, indicatif takes the terminal for a dumb one and draws nothing.
    cmd.env("REFTOOL_PACE_MS", PACE).env("TERM", "xterm").stderr(Stdio::from(pty.slave));
    let mut master = std::fs::File::from(pty.master);
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        // Ends with EIO once the last holder of the terminal's other side is gone.
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    let output = cmd.output().unwrap();
    drop(cmd);
    assert_eq!(output.status.code(), Some(0));
    let drawn = reader.join().unwrap();
    assert!(drawn.contains("bytes"), "no progress bar on the terminal: {drawn:?}");
    assert!(String::from_utf8(output.stdout).unwrap().starts_with("{\"ok\":true"));
}

/// Out of the edit lane (`.config/nextest.toml`): these wait out paced work, a budget or a watchdog.
/// Without `--timeout`, the declared `max_lifetime_ms` bounds the whole work (REQ-F-011,
/// REQ-F-081): the test knob declares 1 s, and `--budget 0` (held to the end of the work or its
/// wall-clock limit) ends with TIMEOUT after about that, its worker gone.
#[test]
fn the_declared_lifetime_ends_work_without_a_timeout() {
    let sandbox = Sandbox::new();
    sandbox.csv("data.csv", 26_000);
    let knob = [("REFTOOL_MAX_LIFETIME_MS", "1000"), ("REFTOOL_PACE_MS", "200")];
    let manifest = sandbox.run_env(&["manifest"], &knob);
    let analyze = &manifest.json["data"]["commands"]["analyze"]["interruption"];
    assert_eq!(analyze["max_lifetime_ms"], 1000, "the knob is declared: {analyze}");
    let started = Instant::now();
    let run = sandbox.run_env(&["analyze", "data.csv", "--budget", "0"], &knob);
    let took = started.elapsed();
    assert_eq!((run.exit, run.code()), (10, "TIMEOUT"), "{}", run.stdout);
    assert_eq!(run.json["meta"]["timeout_ms"], 1000, "the limit in force: {}", run.stdout);
    assert!(took >= Duration::from_millis(1000), "ended before its lifetime: {took:?}");
    assert!(took < Duration::from_secs(4), "the lifetime took {took:?}");
    let deadline = Instant::now() + Duration::from_secs(3);
    while !sandbox.workers().is_empty() {
        assert!(Instant::now() < deadline, "a worker outlived the ended work");
        std::thread::sleep(Duration::from_millis(50));
    }
    // An explicit --timeout replaces the lifetime.
    let run =
        sandbox.run_env(&["analyze", "data.csv", "--budget", "0", "--timeout", "300ms"], &knob);
    assert_eq!((run.exit, run.code()), (10, "TIMEOUT"), "{}", run.stdout);
    assert_eq!(run.json["meta"]["timeout_ms"], 300, "{}", run.stdout);
}

mod heavy {
    use super::*;

    #[test]
    fn a_dead_worker_is_job_lost_and_the_identical_invocation_resumes_from_the_checkpoint() {
        let reference = analyze_sandbox();
        let unbudgeted = paced(&reference, &["analyze", "data.csv", "--budget", "0"], &[]);

        let sandbox = analyze_sandbox();
        let run = paced(&sandbox, &["analyze", "data.csv", "--budget", "800ms"], &[]);
        assert_incomplete(&run, "running");
        let id = job_id(&run);
        let workers = sandbox.workers_of(Some(&id));
        assert_eq!(workers.len(), 1);
        kill(Pid::from_raw(workers[0]), Signal::SIGKILL).unwrap();
        let checkpoint: serde_json::Value = {
            // The kill may also have left a temp file of an atomic write (a dot file) beside it.
            let files: Vec<_> = checkpoint_files(&sandbox)
                .into_iter()
                .filter(|p| !p.file_name().unwrap().to_string_lossy().starts_with('.'))
                .collect();
            assert_eq!(files.len(), 1, "one checkpoint: {files:?}");
            // What a kill -9 between an atomic write and its rename leaves behind.
            let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
            std::fs::write(files[0].with_file_name(format!(".{name}.tmp-00112233")), b"{").unwrap();
            serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap()
        };
        let saved = checkpoint["done"].as_u64().unwrap();
        assert!(saved > 0);

        let started = Instant::now();
        let lost = sandbox.run(&["job", "wait", &id, "--budget", "20s"]);
        assert!(started.elapsed() < Duration::from_secs(5), "a dead worker must not be waited on");
        assert_eq!(lost.exit, 1, "{}", lost.stdout);
        assert_eq!(lost.envelope()["error"]["code"], "JOB_LOST");
        // Every response of the job's command records the budget in force, its endings too.
        assert_eq!(lost.json["meta"]["budget_ms"], 20_000, "{}", lost.stdout);
        let detail = lost.json["error"]["detail"].as_str().unwrap();
        assert!(detail.contains(&format!("job {id}")), "the log tail: {detail:?}");

        let again = paced(&sandbox, &["analyze", "data.csv", "--budget", "1"], &[]);
        assert_incomplete(&again, "running");
        assert_ne!(job_id(&again), id, "a lost job is not attached to");
        let first_done = again.json["data"]["progress"]["done"].as_u64().unwrap();
        assert!(first_done >= saved, "resumed below the checkpoint: {first_done} < {saved}");
        let end = sandbox.run(&["job", "wait", &job_id(&again), "--budget", "0"]);
        assert_eq!(comparable(&end), comparable(&unbudgeted));
        let left = checkpoint_files(&sandbox);
        assert!(
            left.is_empty(),
            "the checkpoint (and the killed worker's temp) are gone: {left:?}"
        );
    }

    #[test]
    fn a_quiet_pipe_stalls_and_the_watchdog_ends_the_job() {
        let sandbox = Sandbox::new();
        let fifo = sandbox.path().join("quiet.csv");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let writer = std::thread::spawn({
            let fifo = fifo.clone();
            move || {
                let mut w = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
                w.write_all(b"a,b\n1,2\n3,4\n").unwrap();
                // The writer goes quiet but keeps the pipe open.
                std::thread::sleep(Duration::from_secs(8));
            }
        });
        let started = Instant::now();
        let run = sandbox.run_env(
            &["analyze", "quiet.csv", "--budget", "0"],
            &[("REFTOOL_IDLE_TIMEOUT_MS", "1000")],
        );
        let took = started.elapsed();
        assert_eq!(run.exit, 10, "{}", run.stdout);
        assert_eq!(run.envelope()["error"]["code"], "STALLED");
        assert_eq!(run.json["meta"]["budget_ms"], 0, "the budget in force, off: {}", run.stdout);
        assert!(took < Duration::from_secs(6), "the watchdog took {took:?}");
        let deadline = Instant::now() + Duration::from_secs(3);
        while !sandbox.workers().is_empty() {
            assert!(Instant::now() < deadline, "the stalled worker was not ended");
            std::thread::sleep(Duration::from_millis(50));
        }
        writer.join().unwrap();
        // The knob is declared: the manifest says what the watchdog does.
        let manifest = sandbox.run_env(&["manifest"], &[("REFTOOL_IDLE_TIMEOUT_MS", "1000")]);
        assert_eq!(
            manifest.json["data"]["commands"]["analyze"]["interruption"]["idle_timeout_ms"],
            1000
        );
    }
}
