//! Hostile tools (`tests/fixtures/hostile/*.sh`) against the driver and the sandbox.
//!
//! For each: the step ends within its bounds, the termination and the capture facts are right,
//! memory stays bounded (the capture cap holds whatever the tool prints), and no process is
//! left behind (the sandbox's sweep finds nothing, or finds exactly the process the tool forked
//! away and kills it). Judging those facts ("stdout is not JSON", "a process leaked") is the
//! checks' business; here the facts themselves are under test.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use conform::exec::{self, Graces, Invocation, Outcome, Program, StdinMode, Termination};
use conform::sandbox::{self, Sandbox};

/// A bound that no correct run comes near, however loaded the machine.
const SLACK: Duration = Duration::from_secs(10);

/// A small capture cap, so that caps are visibly hit.
const CAP: usize = 64 * 1024;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hostile").join(name)
}

fn invocation(sandbox: &Sandbox, name: &str, timeout: Duration) -> Invocation {
    let mut invocation = sandbox.invocation(Program::argv([fixture(name)]));
    invocation.timeout = timeout;
    invocation.capture_limit = CAP;
    invocation
}

/// Runs a fixture with short graces and checks that the whole call stayed within
/// `timeout + graces + SLACK`.
fn run(sandbox: &Sandbox, name: &str, timeout: Duration) -> Outcome {
    let graces = Graces { kill: Duration::from_millis(500), pipes: Duration::from_millis(500) };
    let began = Instant::now();
    let outcome = exec::run_with(&invocation(sandbox, name, timeout), graces).unwrap();
    let took = began.elapsed();
    assert!(
        took < timeout + graces.kill + graces.pipes + SLACK,
        "{name} held the driver for {took:?}"
    );
    outcome
}

fn assert_nothing_left(sandbox: &Sandbox) {
    let leaked = sandbox.sweep();
    assert!(leaked.is_empty(), "processes left behind: {leaked:?}");
}

fn assert_capture_bounded(outcome: &Outcome) {
    for stream in [&outcome.stdout, &outcome.stderr] {
        assert!(stream.bytes.len() <= CAP);
        assert!(
            stream.bytes.capacity() <= 2 * CAP,
            "capture memory grew to {}",
            stream.bytes.capacity()
        );
    }
}

#[test]
fn a_tool_that_hangs_is_timed_out_and_its_group_killed() {
    let sandbox = Sandbox::new().unwrap();
    let timeout = Duration::from_millis(500);
    let outcome = run(&sandbox, "hang.sh", timeout);
    assert_eq!(outcome.termination, Termination::TimedOut);
    assert!(outcome.elapsed >= timeout);
    assert!(outcome.pipes_closed_after.is_some(), "{outcome:?}");
    assert_nothing_left(&sandbox);
}

#[test]
fn a_tool_that_hangs_on_an_open_stdin_is_timed_out() {
    let sandbox = Sandbox::new().unwrap();
    let mut invocation = sandbox.invocation(Program::argv(["sh", "-c", "read line"]));
    invocation.stdin = StdinMode::OpenPipe;
    invocation.timeout = Duration::from_millis(400);
    let outcome = exec::run(&invocation).unwrap();
    assert_eq!(outcome.termination, Termination::TimedOut);
    assert_nothing_left(&sandbox);
}

#[test]
fn a_tool_ignoring_sigterm_is_killed_after_the_grace() {
    let sandbox = Sandbox::new().unwrap();
    let timeout = Duration::from_millis(300);
    let outcome = run(&sandbox, "ignore-term.sh", timeout);
    assert_eq!(outcome.termination, Termination::TimedOut);
    // SIGTERM changed nothing: only the SIGKILL after the grace (500 ms) ended it.
    assert!(outcome.elapsed >= timeout + Duration::from_millis(500), "{outcome:?}");
    assert_nothing_left(&sandbox);
}

#[test]
fn a_gigabyte_on_stdout_is_counted_not_kept() {
    let sandbox = Sandbox::new().unwrap();
    let outcome = run(&sandbox, "flood.sh", Duration::from_secs(120));
    assert_eq!(outcome.termination, Termination::Exited(0));
    assert_eq!(outcome.stdout.bytes.len(), CAP);
    assert!(outcome.stdout.bytes.iter().all(|b| *b == 0));
    assert_eq!(outcome.stdout.total_len, 1_000_000_000);
    assert!(outcome.stdout.truncated());
    assert_capture_bounded(&outcome);
    assert!(outcome.pipes_closed_after.is_some());
    assert_nothing_left(&sandbox);
}

#[test]
fn a_flood_on_both_streams_is_counted_on_each() {
    let sandbox = Sandbox::new().unwrap();
    let outcome = run(&sandbox, "flood-both.sh", Duration::from_secs(120));
    assert_eq!(outcome.termination, Termination::Exited(0));
    assert_eq!(outcome.stdout.total_len, 100_000_000);
    assert_eq!(outcome.stderr.total_len, 100_000_000);
    assert_eq!(outcome.stdout.bytes.len(), CAP);
    assert_eq!(outcome.stderr.bytes.len(), CAP);
    assert_capture_bounded(&outcome);
    assert_nothing_left(&sandbox);
}

#[test]
fn a_flood_cut_by_the_timeout_still_ends_in_time() {
    let sandbox = Sandbox::new().unwrap();
    let mut invocation = sandbox.invocation(Program::argv(["cat", "/dev/zero"]));
    invocation.timeout = Duration::from_millis(500);
    invocation.capture_limit = CAP;
    let began = Instant::now();
    let outcome = exec::run(&invocation).unwrap();
    assert!(began.elapsed() < SLACK);
    assert_eq!(outcome.termination, Termination::TimedOut);
    assert_eq!(outcome.stdout.bytes.len(), CAP);
    assert!(outcome.stdout.total_len > CAP as u64);
    assert_capture_bounded(&outcome);
    assert_nothing_left(&sandbox);
}

#[test]
fn invalid_utf8_is_kept_byte_for_byte() {
    let sandbox = Sandbox::new().unwrap();
    let outcome = run(&sandbox, "invalid-utf8.sh", Duration::from_secs(30));
    assert_eq!(outcome.termination, Termination::Exited(0));
    assert_eq!(outcome.stdout.bytes, b"{\"ok\": \x80\xc0\xaf\xff}\n");
    assert_eq!(outcome.stderr.bytes, b"log \xff\xfe\n");
    assert!(std::str::from_utf8(&outcome.stdout.bytes).is_err());
    assert_nothing_left(&sandbox);
}

#[test]
fn prose_instead_of_json_is_captured_as_it_came() {
    let sandbox = Sandbox::new().unwrap();
    let outcome = run(&sandbox, "prose.sh", Duration::from_secs(30));
    assert_eq!(outcome.termination, Termination::Exited(0));
    let stdout = String::from_utf8(outcome.stdout.bytes.clone()).unwrap();
    assert_eq!(stdout, "Done! Everything went fine, 3 rows imported.\nHave a nice day.\n");
    assert!(serde_json::from_str::<serde_json::Value>(&stdout).is_err());
    assert_nothing_left(&sandbox);
}

#[test]
fn a_child_forked_away_is_found_and_killed_by_the_sweep() {
    let sandbox = Sandbox::new().unwrap();
    let outcome = run(&sandbox, "fork-away.sh", Duration::from_secs(30));
    assert_eq!(outcome.termination, Termination::Exited(0));
    assert_eq!(outcome.stdout.bytes, b"{\"started\": true}\n");
    // It released its streams, so the caller was released.
    assert!(outcome.pipes_closed_after.is_some(), "{outcome:?}");

    // The step may end before `setsid` has made its session and exec'd the sleep: let it settle.
    let settled = Instant::now() + SLACK;
    while Instant::now() < settled
        && !sandbox::scan(sandbox.marker())
            .iter()
            .any(|p| p.cmdline == ["sleep", "300"] && p.pgid == Some(p.pid))
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let leaked = sandbox.sweep();
    assert_eq!(leaked.len(), 1, "{leaked:?}");
    assert_eq!(leaked[0].cmdline, ["sleep", "300"]);
    // setsid made it a session and group leader of its own.
    assert_eq!(leaked[0].pgid, Some(leaked[0].pid));
    assert!(leaked[0].age.is_some_and(|age| age < Duration::from_secs(60)));
    assert!(sandbox::scan(sandbox.marker()).is_empty());
    assert_nothing_left(&sandbox);
}

#[test]
fn a_child_forked_away_holding_the_pipes_does_not_hold_the_driver() {
    let sandbox = Sandbox::new().unwrap();
    let outcome = run(&sandbox, "fork-away-holding.sh", Duration::from_secs(30));
    assert_eq!(outcome.termination, Termination::Exited(0));
    assert_eq!(outcome.stdout.bytes, b"{\"started\": true}\n");
    assert_eq!(outcome.pipes_closed_after, None, "the caller was not released");
    let leaked = sandbox.sweep();
    assert_eq!(leaked.len(), 1, "{leaked:?}");
    assert_nothing_left(&sandbox);
}

#[test]
fn a_tool_dying_of_sigsegv_is_reported_as_signaled() {
    let sandbox = Sandbox::new().unwrap();
    let outcome = run(&sandbox, "segfault.sh", Duration::from_secs(30));
    assert_eq!(outcome.termination, Termination::Signaled(libc::SIGSEGV));
    assert_eq!(outcome.stdout.bytes, b"{\"ok\": tr");
    assert_nothing_left(&sandbox);
}

#[test]
fn a_tool_dying_of_sigkill_is_reported_as_signaled() {
    let sandbox = Sandbox::new().unwrap();
    let outcome = run(&sandbox, "sigkill-self.sh", Duration::from_secs(30));
    assert_eq!(outcome.termination, Termination::Signaled(libc::SIGKILL));
    assert_nothing_left(&sandbox);
}
