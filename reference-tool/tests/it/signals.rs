//! SIGTERM (REQ-F-013): one cancellation envelope, exit 143, even with a second SIGTERM.

use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::snapshot;
use crate::support::Sandbox;

#[test]
fn sigterm_mid_work_gives_one_cancellation_envelope_and_143_and_rolls_back() {
    let sandbox = Sandbox::new();
    let db = sandbox.fresh_db("app.db");
    let mut cmd = sandbox.command(&["migrate", "--db", "app.db"]);
    cmd.env("REFTOOL_PACE_MS", "400");
    let child = cmd.spawn().unwrap();
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
    std::thread::sleep(Duration::from_millis(700));
    kill(pid, Signal::SIGTERM).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let _ = kill(pid, Signal::SIGTERM);
    let run = sandbox.finish(child.wait_with_output().unwrap());
    assert_eq!(run.exit, 143, "{} {}", run.stdout, run.stderr);
    assert_eq!(run.code(), "CANCELLED");
    assert_eq!(run.json["data"]["partial"], true);
    snapshot!("sigterm", run);
    let version: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 0);
}

/// Spawns `args` paced at 50 ms per unit, sends `signal` after `after`, and returns the run
/// and how long the signal took to answer.
fn signalled(
    sandbox: &Sandbox,
    args: &[&str],
    signal: Signal,
    after: Duration,
) -> (crate::support::Run, Duration) {
    let mut cmd = sandbox.command(args);
    cmd.env("REFTOOL_PACE_MS", "50");
    let child = cmd.spawn().unwrap();
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
    std::thread::sleep(after);
    kill(pid, signal).unwrap();
    let sent = std::time::Instant::now();
    let run = sandbox.finish(child.wait_with_output().unwrap());
    (run, sent.elapsed())
}

/// REQ-F-069 on a resume-only call: SIGINT (130) and SIGHUP (129) end it with one cancellation
/// envelope instead of a death by the signal; the work stops at its checkpoint, saved, so
/// `data.continue_command` goes on to the uninterrupted result with every row once.
#[test]
fn sigint_and_sighup_cancel_a_resume_only_call_with_its_work_saved() {
    use crate::budget::continue_loop;
    let sandbox = Sandbox::new();
    sandbox.csv("rows.csv", 2500);
    for (signal, exit, name) in [(Signal::SIGINT, 130, "SIGINT"), (Signal::SIGHUP, 129, "SIGHUP")] {
        let db = format!("{name}.db");
        let args = ["import", "rows.csv", "--db", db.as_str()];
        let (run, took) = signalled(&sandbox, &args, signal, Duration::from_millis(600));
        assert_eq!(run.exit, exit, "{name}: {} {}", run.stdout, run.stderr);
        run.envelope();
        assert_eq!(run.code(), "CANCELLED");
        assert_eq!(run.json["error"]["context"]["signal"], name);
        assert_eq!(run.json["data"]["partial"], true);
        assert_eq!(run.json["data"]["state"], "paused", "{}", run.stdout);
        assert!(took < Duration::from_secs(2), "{name} answered after {took:?}");
        let runs = continue_loop(&sandbox, &run, &[]);
        let last = runs.last().unwrap();
        assert_eq!(last.exit, 0, "{}", last.stdout);
        assert_eq!(last.json["data"]["rows"], 2500);
        let (count, distinct): (i64, i64) = rusqlite::Connection::open(sandbox.path().join(&db))
            .unwrap()
            .query_row("SELECT count(*), count(DISTINCT _line) FROM rows", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!((count, distinct), (2500, 2500), "{name}: every row once");
    }
}

/// REQ-F-069's re-entrant handler: a SIGINT answers the cancellation after the command's cleanup
/// (`REFTOOL_CLEANUP_MS`); a second one during that cleanup ends the process at once with 130,
/// writing nothing more, and the migration is rolled back all the same.
#[test]
fn a_second_sigint_during_the_cleanup_exits_130_at_once() {
    for twice in [false, true] {
        let sandbox = Sandbox::new();
        let db = sandbox.fresh_db("app.db");
        let mut cmd = sandbox.command(&["migrate", "--db", "app.db"]);
        cmd.env("REFTOOL_PACE_MS", "400").env("REFTOOL_CLEANUP_MS", "3000");
        let child = cmd.spawn().unwrap();
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
        std::thread::sleep(Duration::from_millis(700));
        kill(pid, Signal::SIGINT).unwrap();
        let first = std::time::Instant::now();
        std::thread::sleep(Duration::from_millis(300));
        let second = std::time::Instant::now();
        if twice {
            kill(pid, Signal::SIGINT).unwrap();
        }
        let run = sandbox.finish(child.wait_with_output().unwrap());
        assert_eq!(run.exit, 130, "{} {}", run.stdout, run.stderr);
        if twice {
            assert!(second.elapsed() < Duration::from_secs(2), "{:?} after", second.elapsed());
            assert_eq!(run.stdout, "", "nothing written after the second SIGINT");
        } else {
            assert!(first.elapsed() >= Duration::from_secs(3), "the cleanup took its time");
            assert_eq!(run.code(), "CANCELLED");
        }
        let version: i64 = rusqlite::Connection::open(&db)
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, 0, "rolled back (twice: {twice})");
    }
}

/// SIGINT to the front of a detached call waiting out its budget: the call ends at once with
/// the cancellation envelope naming its running job, which goes on to its end.
#[test]
fn sigint_ends_a_detached_call_and_its_job_goes_on() {
    let sandbox = crate::budget::analyze_sandbox();
    let (run, took) = signalled(
        &sandbox,
        &["analyze", "data.csv", "--budget", "20s"],
        Signal::SIGINT,
        Duration::from_millis(600),
    );
    assert_eq!((run.exit, run.code()), (130, "CANCELLED"), "{} {}", run.stdout, run.stderr);
    run.envelope();
    assert_eq!(run.json["data"]["state"], "running");
    assert!(took < Duration::from_secs(2), "SIGINT answered after {took:?}");
    let id = run.json["data"]["job_id"].as_str().unwrap();
    let end = sandbox.run(&["job", "wait", id, "--budget", "0"]);
    assert_eq!(end.exit, 0, "{}", end.stdout);
    assert_eq!(end.json["data"]["rows"], crate::budget::ROWS);
}

/// Past a file-size limit (`ulimit -f`) a write fails instead of killing the process with
/// SIGXFSZ: import answers an error envelope naming the limit, keeps every committed row
/// recorded by its checkpoint, and the identical invocation without the limit ends exactly.
#[test]
fn a_file_size_limit_is_an_error_envelope_not_a_signal() {
    let sandbox = Sandbox::new();
    let mut text = String::from("n,payload\n");
    for n in 1..=20_000 {
        text.push_str(&format!("{n},{}\n", "x".repeat(100)));
    }
    std::fs::write(sandbox.path().join("big.csv"), text).unwrap();
    let exe = assert_cmd::cargo::cargo_bin("reftool");
    let base = sandbox.command(&[]);
    let mut sh = std::process::Command::new("sh");
    sh.env_clear().envs(base.get_envs().filter_map(|(k, v)| Some((k, v?))));
    sh.arg("-c")
        .arg(format!("ulimit -f 200; exec '{}' import big.csv --db big.db", exe.display()))
        .current_dir(sandbox.path())
        .stdin(std::process::Stdio::null());
    let run = sandbox.finish(sh.output().unwrap());
    assert_eq!((run.exit, run.code()), (1, "DB_WRITE_FAILED"), "{} {}", run.stdout, run.stderr);
    run.envelope();
    assert!(
        run.json["error"]["message"].as_str().unwrap().contains("bytes at most"),
        "{}",
        run.stdout
    );
    let again = sandbox.run(&["import", "big.csv", "--db", "big.db"]);
    assert_eq!(again.exit, 0, "{}", again.stdout);
    let (count, distinct): (i64, i64) = rusqlite::Connection::open(sandbox.path().join("big.db"))
        .unwrap()
        .query_row("SELECT count(*), count(DISTINCT _line) FROM rows", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((count, distinct), (20_000, 20_000));
}

/// Out of file descriptors (`ulimit -n`), a call says so and names the limit, whichever
/// open fails first; it never blames the state directory.
#[test]
fn running_out_of_file_descriptors_is_named_as_such() {
    let sandbox = Sandbox::new();
    sandbox.csv("data.csv", 100);
    let exe = assert_cmd::cargo::cargo_bin("reftool");
    let mut named = 0;
    for limit in 4..=16 {
        for args in ["digest data.csv --budget 1s", "import data.csv --db l.db", "analyze data.csv"]
        {
            let mut sh = std::process::Command::new("sh");
            sh.arg("-c")
                .arg(format!("ulimit -n {limit}; exec '{}' {args}", exe.display()))
                .current_dir(sandbox.path())
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("HOME", sandbox.path())
                .env("REFTOOL_STATE_DIR", sandbox.state_dir())
                .stdin(std::process::Stdio::null());
            let run = sandbox.finish(sh.output().unwrap());
            if run.exit == 0 {
                continue;
            }
            run.envelope();
            assert_eq!(
                (run.exit, run.code()),
                (4, "TOO_MANY_OPEN_FILES"),
                "ulimit -n {limit}, {args}: {}",
                run.stdout
            );
            let suggestion = run.json["error"]["suggestion"].as_str().unwrap();
            assert!(suggestion.contains("ulimit -n"), "{suggestion}");
            named += 1;
        }
    }
    assert!(named > 0, "no limit was low enough to matter");
}
