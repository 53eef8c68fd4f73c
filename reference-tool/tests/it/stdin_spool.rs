//! The stdin spool is part of the call (REQ-F-080, REQ-F-081, REQ-F-054's cap pattern): the
//! budget bounds it from the call's start, a command that does not read stdin never waits
//! on it, a stdin past the cap (`REFTOOL_MAX_STDIN_BYTES`) is refused, and no `.spool-*`
//! file outlives a refused call. The writers are real processes on a real pipe.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{Run, Sandbox};

/// What a call may take beyond its budget: start-up, the answer, a loaded machine.
const MARGIN: Duration = Duration::from_millis(2500);

/// A process writing `script`'s output to a pipe; the pipe's read end is for reftool's stdin.
struct Writer {
    child: Child,
}

impl Writer {
    /// `sh -c script`, its stdout a pipe.
    fn spawn(script: &str) -> Writer {
        let child = Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        Writer { child }
    }

    /// The read end of the pipe (this process keeps no write end).
    fn pipe(&mut self) -> Stdio {
        Stdio::from(self.child.stdout.take().unwrap())
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs reftool with `stdin`; the run and how long it took.
fn timed(sandbox: &Sandbox, args: &[&str], env: &[(&str, &str)], stdin: Stdio) -> (Run, Duration) {
    let mut cmd = sandbox.command(args);
    cmd.stdin(stdin);
    for (name, value) in env {
        cmd.env(name, value);
    }
    let started = Instant::now();
    let output = cmd.output().unwrap();
    (sandbox.finish(output), started.elapsed())
}

/// Every `.spool-*` file under `dir`.
fn spools(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return found };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(spools(&path));
        } else if entry.file_name().to_string_lossy().starts_with(".spool-") {
            found.push(path);
        }
    }
    found
}

/// The job directories of the default instance.
fn jobs(sandbox: &Sandbox) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(sandbox.state_dir().join("jobs/n-default")) else {
        return Vec::new();
    };
    entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect()
}

/// A refused call: nothing started, nothing left behind.
fn assert_nothing_left(sandbox: &Sandbox) {
    assert_eq!(spools(&sandbox.state_dir()), Vec::<PathBuf>::new(), "no spool is left");
    assert_eq!(jobs(sandbox), Vec::<PathBuf>::new(), "no job was created");
}

#[test]
fn a_command_that_does_not_read_stdin_never_waits_for_it() {
    // `sleep 12 | reftool digest - --budget 1s`: digest's FILE is a path, `-` a file name.
    let sandbox = Sandbox::new();
    let mut writer = Writer::spawn("exec sleep 12");
    let (run, took) = timed(&sandbox, &["digest", "-", "--budget", "1s"], &[], writer.pipe());
    assert!(took < Duration::from_secs(1) + MARGIN, "held its caller {took:?}");
    run.envelope();
    assert_eq!((run.exit, run.code()), (5, "FILE_NOT_FOUND"), "{}", run.stdout);
    assert_eq!(spools(&sandbox.state_dir()), Vec::<PathBuf>::new());
}

#[test]
fn a_stdin_that_does_not_end_within_the_budget_ends_the_call_at_it() {
    // A writer that sends a header and a row, then stalls.
    let sandbox = Sandbox::new();
    let mut writer = Writer::spawn("printf 'n,square\\n1,1\\n'; exec sleep 12");
    let (run, took) = timed(&sandbox, &["analyze", "-", "--budget", "1s"], &[], writer.pipe());
    assert!(took < Duration::from_secs(1) + MARGIN, "held its caller {took:?}");
    assert!(took >= Duration::from_secs(1), "ended before its budget: {took:?}");
    let envelope = run.envelope();
    assert_eq!((run.exit, run.code()), (2, "STDIN_TOO_SLOW"), "{}", run.stdout);
    assert_eq!(envelope["error"]["retryable"], false);
    assert_eq!(envelope["error"]["context"]["received_bytes"], 13);
    assert_eq!(envelope["error"]["context"]["budget_ms"], 1000);
    assert_eq!(envelope["meta"]["budget_ms"], 1000);
    assert!(envelope["error"]["suggestion"].as_str().unwrap().contains("file"));
    assert_nothing_left(&sandbox);
}

#[test]
fn a_silent_writer_holds_the_call_no_longer_than_its_budget() {
    // `sleep 3 | reftool analyze - --budget 1s`: nothing ever arrives.
    let sandbox = Sandbox::new();
    let mut writer = Writer::spawn("exec sleep 3");
    let (run, took) = timed(&sandbox, &["analyze", "-", "--budget", "1s"], &[], writer.pipe());
    assert!(took < Duration::from_millis(2500), "held its caller {took:?}");
    run.envelope();
    assert_eq!((run.exit, run.code()), (2, "STDIN_TOO_SLOW"), "{}", run.stdout);
    assert_eq!(run.json["error"]["context"]["received_bytes"], 0);
    assert_nothing_left(&sandbox);
}

#[test]
fn without_a_budget_the_wall_clock_limit_ends_the_spool() {
    let sandbox = Sandbox::new();
    let mut writer = Writer::spawn("exec sleep 12");
    let args = ["analyze", "-", "--budget", "0", "--timeout", "1s"];
    let (run, took) = timed(&sandbox, &args, &[], writer.pipe());
    assert!(took < Duration::from_secs(1) + MARGIN, "held its caller {took:?}");
    run.envelope();
    assert_eq!((run.exit, run.code()), (10, "TIMEOUT"), "{}", run.stdout);
    assert_eq!(run.json["error"]["retryable"], false);
    assert_nothing_left(&sandbox);
}

#[test]
fn sigterm_while_stdin_is_read_cancels_the_call() {
    let sandbox = Sandbox::new();
    let mut writer = Writer::spawn("exec sleep 12");
    let mut cmd = sandbox.command(&["analyze", "-", "--budget", "0"]);
    let child = cmd.stdin(writer.pipe()).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let signalled = Instant::now();
    let run = sandbox.finish(child.wait_with_output().unwrap());
    assert!(signalled.elapsed() < MARGIN, "{:?}", signalled.elapsed());
    run.envelope();
    assert_eq!((run.exit, run.code()), (143, "CANCELLED"), "{}", run.stdout);
    assert_nothing_left(&sandbox);
}

/// 300 000 bytes of CSV into `analyze -` with the cap at 64 KiB, written by a thread that
/// stops at the first error (reftool closes the pipe when it refuses).
#[test]
fn a_stdin_past_the_cap_is_refused_and_leaves_no_spool() {
    let sandbox = Sandbox::new();
    let mut text = String::from("n,square\n");
    let mut n = 0u64;
    while text.len() < 300_000 {
        n += 1;
        text.push_str(&format!("{n},{}\n", n * n));
    }
    let mut cmd = sandbox.command(&["analyze", "-", "--budget", "0"]);
    cmd.env("REFTOOL_MAX_STDIN_BYTES", "65536").stdin(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(text.as_bytes());
    });
    let run = sandbox.finish(child.wait_with_output().unwrap());
    feeder.join().unwrap();
    let envelope = run.envelope();
    assert_eq!((run.exit, run.code()), (2, "STDIN_TOO_LARGE"), "{}", run.stdout);
    assert_eq!(envelope["error"]["context"]["limit_bytes"], 65536);
    assert_eq!(envelope["error"]["phase"], "validation");
    assert_eq!(envelope["error"]["retryable"], false);
    assert!(envelope["error"]["suggestion"].as_str().unwrap().contains("file"));
    assert_nothing_left(&sandbox);
}

#[test]
fn a_stdin_exactly_at_the_cap_is_read() {
    let sandbox = Sandbox::new();
    let csv = std::fs::read(sandbox.csv("data.csv", 2_000)).unwrap();
    let cap = csv.len().to_string();
    let file = std::fs::File::open(sandbox.path().join("data.csv")).unwrap();
    let env = [("REFTOOL_MAX_STDIN_BYTES", cap.as_str())];
    let (run, _) = timed(&sandbox, &["analyze", "-", "--budget", "0"], &env, Stdio::from(file));
    assert_eq!(run.exit, 0, "{}", run.stdout);
    assert_eq!(run.json["data"]["rows"], 2_000);
    let one_less = (csv.len() - 1).to_string();
    let file = std::fs::File::open(sandbox.path().join("data.csv")).unwrap();
    let env = [("REFTOOL_MAX_STDIN_BYTES", one_less.as_str())];
    let (run, _) = timed(&sandbox, &["analyze", "-", "--budget", "0"], &env, Stdio::from(file));
    assert_eq!((run.exit, run.code()), (2, "STDIN_TOO_LARGE"), "{}", run.stdout);
}

#[test]
fn a_malformed_cap_is_refused_before_stdin_is_read() {
    let sandbox = Sandbox::new();
    for bad in ["lots", "0", "-5", ""] {
        let env = [("REFTOOL_MAX_STDIN_BYTES", bad)];
        let (run, _) = timed(&sandbox, &["analyze", "-", "--budget", "0"], &env, Stdio::null());
        assert_eq!((run.exit, run.code()), (2, "ENV_INVALID"), "{bad:?}: {}", run.stdout);
    }
    assert_nothing_left(&sandbox);
}
