//! The call budget (REQ-F-080) and the INCOMPLETE response (REQ-F-082) on real commands:
//! resolution order, the terminal rule on a real pty, both INCOMPLETE shapes against
//! `schemas/incomplete-response.json`, and the continue loop through `sh -c`.

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{Run, Sandbox, assert_valid};

/// Milliseconds of pacing per unit in these tests.
pub const PACE: &str = "50";
/// Rows of the analyze fixture: about 40 chunks of 16 KiB, so about 2 s at [`PACE`].
pub const ROWS: u64 = 45_000;

/// A sandbox with `data.csv` for analyze.
pub fn analyze_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    sandbox.csv("data.csv", ROWS);
    sandbox
}

/// A file of about 40 chunks of 64 KiB for digest.
pub fn digest_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    let text: String = (1..=330_000u32).map(|n| format!("{n}\n")).collect();
    std::fs::write(sandbox.path().join("big.txt"), text).unwrap();
    sandbox
}

pub fn paced(sandbox: &Sandbox, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut all = vec![("REFTOOL_PACE_MS", PACE)];
    all.extend_from_slice(env);
    sandbox.run_env(args, &all)
}

/// The INCOMPLETE envelope is valid against its schema and consistent.
pub fn assert_incomplete(run: &Run, state: &str) {
    assert_eq!(run.exit, 14, "{}\n{}", run.stdout, run.stderr);
    run.envelope();
    assert_valid("incomplete-response.json", &run.json);
    assert_eq!(run.json["data"]["state"], state);
    assert_eq!(run.code(), "INCOMPLETE");
}

/// `ok`, `data`, `error` and the exit, with ids and paths of jobs taken out.
pub fn comparable(run: &Run) -> Value {
    serde_json::json!({"exit": run.exit, "ok": run.json["ok"], "data": run.json["data"],
        "error": run.json["error"]})
}

/// Runs `line` with `sh -c` in the sandbox's environment (plus `env`) until it exits with
/// something else than 14; every response on the way.
pub fn continue_loop(sandbox: &Sandbox, first: &Run, env: &[(&str, &str)]) -> Vec<Run> {
    let mut runs = Vec::new();
    let mut line = first.json["data"]["continue_command"].as_str().unwrap().to_owned();
    for _ in 0..100 {
        let mut cmd = sandbox.command(&[]);
        let exe = assert_cmd::cargo::cargo_bin("reftool");
        let dir = exe.parent().unwrap().to_owned();
        let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
        cmd.env("PATH", path).env("REFTOOL_PACE_MS", PACE);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut sh = std::process::Command::new("sh");
        sh.arg("-c").arg(&line).current_dir(sandbox.path()).env_clear();
        for (k, v) in cmd.get_envs() {
            if let Some(v) = v {
                sh.env(k, v);
            }
        }
        sh.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let run = sandbox.finish(sh.output().unwrap());
        let again = run.exit == 14;
        if again {
            line = run.json["data"]["continue_command"].as_str().unwrap().to_owned();
        }
        runs.push(run);
        if !again {
            return runs;
        }
    }
    panic!("continue_command still exits 14 after 100 hops");
}

#[test]
fn the_flag_beats_the_environment_which_beats_the_default() {
    let sandbox = analyze_sandbox();
    let started = Instant::now();
    let run = paced(
        &sandbox,
        &["analyze", "data.csv", "--budget", "400ms"],
        &[("AGENT_CALL_BUDGET_MS", "20000")],
    );
    assert_incomplete(&run, "running");
    assert_eq!(run.json["meta"]["budget_ms"], 400);
    assert!(started.elapsed() < Duration::from_millis(3000), "{:?}", started.elapsed());

    let started = Instant::now();
    let run = paced(&sandbox, &["analyze", "data.csv"], &[("AGENT_CALL_BUDGET_MS", "400")]);
    assert_incomplete(&run, "running");
    assert_eq!(run.json["meta"]["budget_ms"], 400);
    assert!(started.elapsed() < Duration::from_millis(3000), "{:?}", started.elapsed());
    // The same invocation attached to the same job both times (the budget is no identity).
    let first = run.json["data"]["job_id"].clone();
    let wait = paced(&sandbox, &["job", "wait", first.as_str().unwrap(), "--budget", "0"], &[]);
    assert_eq!(wait.exit, 0, "{}", wait.stdout);
}

#[test]
fn every_response_of_an_interruptible_command_records_its_budget() {
    let sandbox = Sandbox::new();
    sandbox.csv("small.csv", 10);
    let run = sandbox.run(&["analyze", "small.csv"]);
    assert_eq!(run.exit, 0, "{}", run.stdout);
    assert_eq!(run.envelope()["meta"]["budget_ms"], 30_000);
    assert_eq!(run.json["data"]["rows"], 10);

    let run = sandbox.run(&["analyze", "small.csv", "--budget", "0"]);
    assert_eq!((run.exit, run.json["meta"]["budget_ms"].clone()), (0, 0.into()));

    let run = sandbox.run_env(&["analyze", "small.csv"], &[("AGENT_CALL_BUDGET_MS", "soon")]);
    assert_eq!(run.exit, 0);
    assert_eq!(run.envelope()["meta"]["budget_ms"], 30_000);
    assert_eq!(run.json["warnings"][0]["code"], "BUDGET_ENV_INVALID");

    // Errors after validation carry it too.
    let run = sandbox.run_env(&["analyze", "missing.csv"], &[("AGENT_CALL_BUDGET_MS", "1500")]);
    assert_eq!(run.exit, 5);
    assert_eq!(run.envelope()["meta"]["budget_ms"], 1500);

    // A command without interruption has no --budget and ignores the variable.
    let run = sandbox.run(&["migrate", "--db", "x.db", "--budget", "1s"]);
    assert_eq!(run.exit, 2);
    sandbox.fresh_db("app.db");
    let run = sandbox.run_env(&["migrate", "--db", "app.db"], &[("AGENT_CALL_BUDGET_MS", "1")]);
    assert_eq!(run.exit, 0, "{}", run.stdout);
    assert!(run.envelope()["meta"].get("budget_ms").is_none());
}

/// Runs reftool with stdin on a real pseudo-terminal (stdout a pipe).
fn with_terminal_stdin(sandbox: &Sandbox, args: &[&str], env: &[(&str, &str)]) -> Run {
    let pty = nix::pty::openpty(None, None).unwrap();
    let mut cmd = sandbox.command(args);
    cmd.env("REFTOOL_PACE_MS", PACE);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdin(Stdio::from(pty.slave));
    let output = cmd.output().unwrap();
    drop(pty.master);
    sandbox.finish(output)
}

#[test]
fn at_a_terminal_without_budget_the_call_runs_to_the_end() {
    let sandbox = analyze_sandbox();
    let started = Instant::now();
    let run =
        with_terminal_stdin(&sandbox, &["analyze", "data.csv"], &[("AGENT_CALL_BUDGET_MS", "300")]);
    assert_eq!(run.exit, 0, "{}", run.stdout);
    assert!(run.envelope()["meta"].get("budget_ms").is_none(), "{}", run.stdout);
    assert!(started.elapsed() > Duration::from_millis(1000), "the work was not paced");
    assert_eq!(run.json["data"]["rows"], ROWS);

    let run = with_terminal_stdin(&sandbox, &["analyze", "data.csv", "--budget", "300ms"], &[]);
    assert_incomplete(&run, "running");
    assert_eq!(run.json["meta"]["budget_ms"], 300);
}

#[test]
fn a_continuation_that_finds_its_input_changed_says_so_even_when_it_pauses_again() {
    let sandbox = digest_sandbox();
    let first = paced(&sandbox, &["digest", "big.txt", "--budget", "500ms"], &[]);
    assert_incomplete(&first, "paused");
    let path = sandbox.path().join("big.txt");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("one more line\n");
    std::fs::write(&path, text).unwrap();

    let changed = paced(&sandbox, &["digest", "big.txt", "--budget", "300ms"], &[]);
    assert_incomplete(&changed, "paused");
    let codes: Vec<&str> = changed.json["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["code"].as_str())
        .collect();
    assert!(codes.contains(&"CHECKPOINT_DISCARDED"), "warnings: {codes:?}");
    let hops = continue_loop(&sandbox, &changed, &[]);
    let last = hops.last().unwrap();
    assert_eq!(last.exit, 0, "{}", last.stdout);
    let expected = {
        use sha2::Digest;
        let bytes = std::fs::read(&path).unwrap();
        sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    assert_eq!(last.json["data"]["sha256"], expected.as_str());
}

/// REQ-F-082: a continue_command continues the same work wherever it is run verbatim. The
/// instance chosen by `REFTOOL_INSTANCE_ID` is part of the work's identity, so a paused
/// reader's and a paused writer's continuation name it: run in an environment without the
/// variable, each continues its own job to the uninterrupted end, and the default instance
/// gets no job of its own.
#[test]
fn a_paused_continuation_keeps_an_instance_chosen_by_the_environment() {
    let sandbox = digest_sandbox();
    sandbox.csv("rows.csv", 2500);
    let env = [("REFTOOL_INSTANCE_ID", "team-a")];
    for args in [
        vec!["digest", "big.txt", "--budget", "300ms"],
        vec!["import", "rows.csv", "--db", "rows.db", "--budget", "300ms"],
    ] {
        let first = paced(&sandbox, &args, &env);
        assert_incomplete(&first, "paused");
        let line = first.json["data"]["continue_command"].as_str().unwrap();
        assert!(line.contains("--instance-id team-a"), "the instance is named: {line}");
        // The loop runs without REFTOOL_INSTANCE_ID (the sandbox's environment has none).
        let runs = continue_loop(&sandbox, &first, &[]);
        let last = runs.last().unwrap();
        assert_eq!(last.exit, 0, "{:?}: {}", args, last.stdout);
        for run in &runs[..runs.len() - 1] {
            assert_eq!(run.json["data"]["job_id"], first.json["data"]["job_id"], "the same job");
        }
        let id = first.json["data"]["job_id"].as_str().unwrap();
        let status = sandbox.run(&["job", "status", id]);
        assert_eq!(status.code(), "JOB_NOT_FOUND", "the job is team-a's, not the default's");
        let status = sandbox.run(&["job", "status", id, "--instance-id", "team-a"]);
        assert_eq!(status.exit, 0, "team-a's job ended well: {}", status.stdout);
    }
}

/// A digest's checkpoint holds the hash state itself, so each continuation does the work its
/// budget pays for, however far into a large file it resumes (it used to hash the whole prefix
/// again at every resume, and on a large file the budget went to that alone: progress
/// stalled). On a 20 GB sparse file with a 300 ms budget: every call answers within its
/// budget, and the five continuations together move at least half as far as the first call.
#[test]
fn each_continuation_of_a_large_digest_moves_as_far_as_its_budget_pays_for() {
    let sandbox = Sandbox::new();
    let big = sandbox.path().join("sparse.bin");
    std::fs::File::create(&big).unwrap().set_len(20 << 30).unwrap();
    let budget = Duration::from_millis(300);
    let mut dones = vec![0u64];
    let mut took = Vec::new();
    for _ in 0..6 {
        let started = Instant::now();
        let run = sandbox.run(&["digest", "sparse.bin", "--budget", "300ms"]);
        took.push(started.elapsed());
        assert_incomplete(&run, "paused");
        dones.push(run.json["data"]["progress"]["done"].as_u64().unwrap());
    }
    let gains: Vec<u64> = dones.windows(2).map(|w| w[1] - w[0]).collect();
    eprintln!("bytes per call: {gains:?}, durations: {took:?}");
    for (call, t) in took.iter().enumerate() {
        assert!(*t < budget + Duration::from_millis(1000), "call {call} took {t:?}");
    }
    for (call, gain) in gains.iter().enumerate() {
        assert!(*gain >= 1 << 20, "call {call} moved {gain} bytes: {gains:?}");
    }
    let later: u64 = gains[1..].iter().sum();
    assert!(later >= gains[0] / 2, "the continuations stalled: {gains:?}");
    // The checkpoint stays a few hundred bytes, wherever the work stands.
    let checkpoints = sandbox.state_dir().join("checkpoints");
    for dir in std::fs::read_dir(checkpoints).unwrap().flatten() {
        for file in std::fs::read_dir(dir.path()).unwrap().flatten() {
            let size = file.metadata().unwrap().len();
            assert!(size < 1024, "{}: {size} bytes", file.path().display());
        }
    }
}

/// Out of the edit lane (`.config/nextest.toml`): these wait out paced work, a budget or a watchdog.
mod heavy {
    use super::*;

    #[test]
    fn a_detached_call_hands_off_running_and_the_loop_ends_in_the_unbudgeted_response() {
        let reference = analyze_sandbox();
        let unbudgeted = paced(&reference, &["analyze", "data.csv", "--budget", "0"], &[]);
        assert_eq!(unbudgeted.exit, 0);

        let sandbox = analyze_sandbox();
        let run = paced(&sandbox, &["analyze", "data.csv", "--budget", "300ms"], &[]);
        assert_incomplete(&run, "running");
        let id = run.json["data"]["job_id"].as_str().unwrap().to_owned();
        assert!(id.starts_with("job_") && id.len() == 36, "{id}");
        let line = run.json["data"]["continue_command"].as_str().unwrap();
        assert!(line.ends_with(&format!("job wait {id}")), "{line}");
        assert!(
            run.json["data"]["cancel_command"]
                .as_str()
                .unwrap()
                .ends_with(&format!("job cancel {id}"))
        );
        assert_eq!(run.json["error"]["retryable"], true);

        let hops = continue_loop(&sandbox, &run, &[("AGENT_CALL_BUDGET_MS", "400")]);
        let last = hops.last().unwrap();
        assert_eq!(comparable(last), comparable(&unbudgeted));
        let mut done = run.json["data"]["progress"]["done"].as_u64().unwrap();
        for hop in &hops[..hops.len() - 1] {
            assert_incomplete(hop, "running");
            assert_eq!(hop.json["data"]["job_id"], id.as_str());
            let now = hop.json["data"]["progress"]["done"].as_u64().unwrap();
            assert!(now >= done, "progress went from {done} to {now}");
            done = now;
        }
    }

    #[test]
    fn a_resume_only_call_pauses_and_continues_with_the_original_invocation() {
        let reference = digest_sandbox();
        let unbudgeted = paced(&reference, &["digest", "big.txt", "--budget", "0"], &[]);
        assert_eq!(unbudgeted.exit, 0);
        let expected = {
            use sha2::Digest;
            let bytes = std::fs::read(reference.path().join("big.txt")).unwrap();
            sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect::<String>()
        };
        assert_eq!(unbudgeted.json["data"]["sha256"], expected.as_str());

        let sandbox = digest_sandbox();
        let started = Instant::now();
        let run = paced(&sandbox, &["digest", "big.txt", "--budget", "500ms"], &[]);
        let took = started.elapsed();
        assert_incomplete(&run, "paused");
        assert!(took < Duration::from_millis(3000), "a 500 ms budget took {took:?}");
        assert_eq!(
            run.json["data"]["continue_command"].as_str().unwrap(),
            format!(
                "{} digest big.txt --budget 500ms",
                assert_cmd::cargo::cargo_bin("reftool").display()
            )
        );
        assert_eq!(run.json["error"]["retryable"], true);
        assert!(run.json["data"]["progress"]["done"].as_u64().unwrap() > 0);

        let hops = continue_loop(&sandbox, &run, &[]);
        assert!(hops.len() >= 2, "the work should need more than one continuation");
        assert_eq!(comparable(hops.last().unwrap()), comparable(&unbudgeted));
        let mut done = 0;
        for hop in &hops[..hops.len() - 1] {
            assert_incomplete(hop, "paused");
            let now = hop.json["data"]["progress"]["done"].as_u64().unwrap();
            assert!(now >= done, "progress went from {done} to {now}");
            done = now;
        }
    }

    #[test]
    fn a_paused_writer_continues_with_its_key_and_commits_no_row_twice() {
        let make = || {
            let sandbox = Sandbox::new();
            let mut text = String::from("n,label\n");
            for n in 1..=3000 {
                text.push_str(&format!("{n},row {n}\n"));
            }
            std::fs::write(sandbox.path().join("rows with space.csv"), text).unwrap();
            sandbox
        };
        let reference = make();
        let unbudgeted = paced(
            &reference,
            &["import", "rows with space.csv", "--db", "r.db", "--budget", "0"],
            &[],
        );
        assert_eq!(unbudgeted.exit, 0, "{}", unbudgeted.stdout);

        let sandbox = make();
        let run = paced(
            &sandbox,
            &["import", "rows with space.csv", "--db", "r.db", "--budget", "400ms"],
            &[],
        );
        assert_incomplete(&run, "paused");
        assert_eq!(run.json["error"]["retryable"], false);
        let line = run.json["data"]["continue_command"].as_str().unwrap();
        assert!(line.contains("'rows with space.csv'"), "{line}");
        assert!(line.contains("--idempotency-key ik-"), "{line}");

        let hops = continue_loop(&sandbox, &run, &[]);
        assert_eq!(comparable(hops.last().unwrap()), comparable(&unbudgeted));
        let conn = rusqlite::Connection::open(sandbox.path().join("r.db")).unwrap();
        let (count, distinct, max): (i64, i64, i64) = conn
            .query_row("SELECT count(*), count(DISTINCT _line), max(_line) FROM rows", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .unwrap();
        assert_eq!((count, distinct, max), (3000, 3000, 3000));
    }
}
