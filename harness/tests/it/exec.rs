//! The process driver against real processes.
//!
//! Every test runs its steps in a sandbox, so that whatever a step leaves behind is found (and
//! killed) by the sweep; most tests assert that nothing was left. Timing bounds are generous:
//! the machine is shared and noisy; exact figures belong to the `exec_overhead` bench.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::{Duration, Instant};

use conform::exec::{self, Captured, Graces, Invocation, Program, StdinMode, Termination};
use conform::sandbox::Sandbox;
use nix::sys::signal::Signal;

/// A bound that no correct run comes near, however loaded the machine.
const SLACK: Duration = Duration::from_secs(10);

fn sh(line: &str) -> Program {
    Program::Shell(line.to_owned())
}

fn run_in(sandbox: &Sandbox, program: Program) -> exec::Outcome {
    exec::run(&sandbox.invocation(program)).expect("the driver runs the step")
}

fn text(captured: &Captured) -> String {
    String::from_utf8(captured.bytes.clone()).expect("utf-8 output")
}

/// Fails when the step left a process behind in the sandbox.
fn assert_nothing_left(sandbox: &Sandbox) {
    let leaked = sandbox.sweep();
    assert!(leaked.is_empty(), "processes left behind: {leaked:?}");
}

#[test]
fn exit_codes_are_reported() {
    let sandbox = Sandbox::new().unwrap();
    for code in [0, 1, 3, 14, 125] {
        let outcome = run_in(&sandbox, sh(&format!("exit {code}")));
        assert_eq!(outcome.termination, Termination::Exited(code));
    }
    let outcome = run_in(&sandbox, Program::argv(["false"]));
    assert_eq!(outcome.termination, Termination::Exited(1));
    assert_nothing_left(&sandbox);
}

#[test]
fn an_argument_vector_is_passed_without_a_shell() {
    let sandbox = Sandbox::new().unwrap();
    let outcome = run_in(&sandbox, Program::argv(["printf", "[%s]", "a b", "c'd", "$HOME", "*"]));
    assert_eq!(outcome.termination, Termination::Exited(0));
    assert_eq!(text(&outcome.stdout), "[a b][c'd][$HOME][*]");
}

#[test]
fn a_shell_line_runs_verbatim_with_its_quotes() {
    let sandbox = Sandbox::new().unwrap();
    let line = r#"printf '%s\n' "two words" 'a "quoted" one' it\'s; exit 7"#;
    let outcome = run_in(&sandbox, sh(line));
    assert_eq!(outcome.termination, Termination::Exited(7));
    assert_eq!(text(&outcome.stdout), "two words\na \"quoted\" one\nit's\n");
}

#[test]
fn the_environment_is_exactly_the_given_one_and_the_cwd_is_set() {
    let sandbox = Sandbox::new().unwrap();
    let mut env = BTreeMap::new();
    env.insert(OsString::from("ONLY_THIS"), OsString::from("x y"));
    let mut invocation = Invocation::new(Program::argv(["/usr/bin/env"]), env, sandbox.work());
    let outcome = exec::run(&invocation).unwrap();
    assert_eq!(text(&outcome.stdout), "ONLY_THIS=x y\n");

    invocation.program = Program::argv(["/bin/pwd"]);
    let outcome = exec::run(&invocation).unwrap();
    let work = sandbox.work().canonicalize().unwrap();
    assert_eq!(text(&outcome.stdout).trim_end(), work.to_str().unwrap());
}

#[test]
fn stdout_and_stderr_are_captured_apart() {
    let sandbox = Sandbox::new().unwrap();
    let outcome = run_in(&sandbox, sh("printf out; printf err >&2; printf more"));
    assert_eq!(text(&outcome.stdout), "outmore");
    assert_eq!(text(&outcome.stderr), "err");
    assert!(!outcome.stdout.truncated());
    assert_eq!(outcome.stdout.total_len, 7);
}

#[test]
fn capture_keeps_the_first_bytes_up_to_the_limit_and_counts_the_rest() {
    let sandbox = Sandbox::new().unwrap();
    let mut invocation = sandbox.invocation(sh("seq 1 100000; seq 1 50000 >&2"));
    invocation.capture_limit = 1000;
    let outcome = exec::run(&invocation).unwrap();
    assert_eq!(outcome.termination, Termination::Exited(0));
    assert_eq!(outcome.stdout.bytes.len(), 1000);
    assert!(outcome.stdout.truncated());
    // `seq 1 100000` prints 588895 bytes; the first ones are "1\n2\n3\n".
    assert_eq!(outcome.stdout.total_len, 588_895);
    assert!(outcome.stdout.bytes.starts_with(b"1\n2\n3\n"));
    assert_eq!(outcome.stderr.bytes.len(), 1000);
    assert_eq!(outcome.stderr.total_len, 288_894);

    invocation.capture_limit = 0;
    let outcome = exec::run(&invocation).unwrap();
    assert!(outcome.stdout.bytes.is_empty());
    assert_eq!(outcome.stdout.total_len, 588_895);
}

#[test]
fn closed_stdin_is_end_of_file_at_once() {
    let sandbox = Sandbox::new().unwrap();
    let mut invocation = sandbox.invocation(Program::argv(["cat"]));
    invocation.timeout = Duration::from_secs(30);
    let outcome = exec::run(&invocation).unwrap();
    assert_eq!(outcome.termination, Termination::Exited(0));
    assert_eq!(outcome.stdout.total_len, 0);
    assert!(outcome.elapsed < SLACK);
}

#[test]
fn bytes_on_stdin_round_trip() {
    let sandbox = Sandbox::new().unwrap();
    // Larger than any pipe buffer, and not text.
    let data: Vec<u8> = (0..3_000_000_u32).map(|i| (i * 7 % 251) as u8).collect();
    let mut invocation = sandbox.invocation(Program::argv(["cat"]));
    invocation.stdin = StdinMode::Bytes(data.clone());
    invocation.capture_limit = data.len();
    let outcome = exec::run(&invocation).unwrap();
    assert_eq!(outcome.termination, Termination::Exited(0));
    assert_eq!(outcome.stdout.total_len, data.len() as u64);
    assert!(outcome.stdout.bytes == data, "stdin came back altered");

    invocation.stdin = StdinMode::Bytes(Vec::new());
    let outcome = exec::run(&invocation).unwrap();
    assert_eq!(outcome.termination, Termination::Exited(0));
    assert_eq!(outcome.stdout.total_len, 0);
}

#[test]
fn bytes_that_are_never_read_do_not_stall_the_driver() {
    let sandbox = Sandbox::new().unwrap();
    let mut invocation = sandbox.invocation(sh("sleep 0.2; echo done"));
    invocation.stdin = StdinMode::Bytes(vec![b'x'; 4 << 20]);
    invocation.timeout = Duration::from_secs(30);
    let outcome = exec::run(&invocation).unwrap();
    assert_eq!(outcome.termination, Termination::Exited(0));
    assert_eq!(text(&outcome.stdout), "done\n");
    assert!(outcome.elapsed < SLACK);
}

#[test]
fn an_open_stdin_pipe_makes_a_reader_hang_until_the_timeout() {
    let sandbox = Sandbox::new().unwrap();
    let mut invocation = sandbox.invocation(Program::argv(["cat"]));
    invocation.stdin = StdinMode::OpenPipe;
    invocation.timeout = Duration::from_millis(500);
    let began = Instant::now();
    let outcome = exec::run(&invocation).unwrap();
    assert_eq!(outcome.termination, Termination::TimedOut);
    assert!(outcome.elapsed >= Duration::from_millis(500), "{outcome:?}");
    assert!(began.elapsed() < SLACK);
    assert_nothing_left(&sandbox);
}

#[test]
fn a_pty_stdin_is_a_terminal_and_the_other_streams_are_not() {
    let sandbox = Sandbox::new().unwrap();
    let mut invocation = sandbox.invocation(sh(
        "if test -t 0; then echo in-tty; fi; if test -t 1; then echo out-tty; fi; \
         if test -t 2; then echo err-tty; fi; echo end",
    ));
    invocation.stdin = StdinMode::Pty;
    let outcome = exec::run(&invocation).unwrap();
    assert_eq!(outcome.termination, Termination::Exited(0));
    assert_eq!(text(&outcome.stdout), "in-tty\nend\n");

    invocation.stdin = StdinMode::Closed;
    let outcome = exec::run(&invocation).unwrap();
    assert_eq!(text(&outcome.stdout), "end\n");
    for stdin in [StdinMode::OpenPipe, StdinMode::Bytes(b"x".to_vec())] {
        invocation.stdin = stdin;
        let outcome = exec::run(&invocation).unwrap();
        assert_eq!(text(&outcome.stdout), "end\n");
    }
}

#[test]
fn a_pty_is_drained_and_a_terminal_reader_waits_like_for_a_person() {
    let sandbox = Sandbox::new().unwrap();
    // Writing a lot to the terminal must not block the tool: the driver drains the master.
    let mut invocation = sandbox.invocation(sh("seq 1 200000 >&0; echo written"));
    invocation.stdin = StdinMode::Pty;
    invocation.timeout = Duration::from_secs(60);
    let outcome = exec::run(&invocation).unwrap();
    assert_eq!(outcome.termination, Termination::Exited(0));
    assert_eq!(text(&outcome.stdout), "written\n");

    // Nobody types: a read from the terminal waits until the timeout.
    invocation.program = sh("read line; echo got");
    invocation.timeout = Duration::from_millis(500);
    let outcome = exec::run(&invocation).unwrap();
    assert_eq!(outcome.termination, Termination::TimedOut);
    assert_eq!(outcome.stdout.total_len, 0);
    assert_nothing_left(&sandbox);
}

#[test]
fn the_timeout_kills_the_whole_group_even_a_child_ignoring_sigterm() {
    let sandbox = Sandbox::new().unwrap();
    // The shell runs a child that ignores SIGTERM and keeps stdout open, then waits.
    let mut invocation =
        sandbox.invocation(sh("(trap '' TERM; exec sleep 100) & echo started; wait"));
    invocation.timeout = Duration::from_millis(300);
    let began = Instant::now();
    let outcome = exec::run_with(
        &invocation,
        Graces { kill: Duration::from_secs(6), pipes: Duration::from_secs(6) },
    )
    .unwrap();
    assert_eq!(outcome.termination, Termination::TimedOut);
    assert_eq!(text(&outcome.stdout), "started\n");
    // The shell dies of the SIGTERM; the SIGKILL then follows at once, not after the 6 s kill
    // grace, and the child's death is what closes the pipes.
    let closed = outcome.pipes_closed_after.expect("the pipes closed");
    assert!(closed < Duration::from_secs(4), "{outcome:?}");
    assert!(began.elapsed() < SLACK);
    assert_nothing_left(&sandbox);
}

#[test]
fn a_leader_ignoring_sigterm_gets_sigkill_after_the_grace() {
    let sandbox = Sandbox::new().unwrap();
    let mut invocation = sandbox.invocation(sh("trap '' TERM; while :; do sleep 1; done"));
    invocation.timeout = Duration::from_millis(300);
    let grace = Duration::from_millis(700);
    let outcome =
        exec::run_with(&invocation, Graces { kill: grace, pipes: Duration::from_secs(2) }).unwrap();
    assert_eq!(outcome.termination, Termination::TimedOut);
    assert!(outcome.elapsed >= Duration::from_millis(300) + grace, "{outcome:?}");
    assert!(outcome.elapsed < SLACK);
    assert_nothing_left(&sandbox);
}

#[test]
fn a_signal_death_is_reported_as_such() {
    let sandbox = Sandbox::new().unwrap();
    let outcome = run_in(&sandbox, sh("kill -KILL $$"));
    assert_eq!(outcome.termination, Termination::Signaled(libc::SIGKILL));
    let outcome = run_in(&sandbox, sh("kill -TERM $$"));
    assert_eq!(outcome.termination, Termination::Signaled(libc::SIGTERM));
}

#[test]
fn the_pipes_close_with_an_ordinary_exit() {
    let sandbox = Sandbox::new().unwrap();
    let outcome = run_in(&sandbox, sh("echo hi"));
    let closed = outcome.pipes_closed_after.expect("the pipes closed");
    // End-of-file comes with the exit, give or take scheduling.
    assert!(closed <= outcome.elapsed + Duration::from_secs(1), "{outcome:?}");
}

#[test]
fn a_detached_grandchild_holding_stdout_does_not_hold_the_driver() {
    let sandbox = Sandbox::new().unwrap();
    let invocation = sandbox.invocation(sh("(sleep 30 &) ; echo hi"));
    let began = Instant::now();
    let outcome = exec::run_with(
        &invocation,
        Graces { kill: Duration::from_secs(1), pipes: Duration::from_millis(500) },
    )
    .unwrap();
    let took = began.elapsed();
    assert_eq!(outcome.termination, Termination::Exited(0));
    assert_eq!(text(&outcome.stdout), "hi\n");
    assert_eq!(outcome.pipes_closed_after, None, "{outcome:?}");
    assert!(took >= Duration::from_millis(500), "the driver waited for the pipes: {took:?}");
    assert!(took < SLACK, "{took:?}");
    // The grandchild is a leak: the sweep finds exactly it.
    let leaked = sandbox.sweep();
    assert_eq!(leaked.len(), 1, "{leaked:?}");
    assert_eq!(leaked[0].cmdline, ["sleep", "30"]);
}

#[test]
fn a_spawned_step_can_have_its_group_killed_midway() {
    let sandbox = Sandbox::new().unwrap();
    let mut invocation = sandbox.invocation(sh("sleep 100 & sleep 100; wait"));
    invocation.timeout = Duration::from_secs(60);
    let running = exec::spawn(&invocation).unwrap();
    assert!(running.pid() > 1);
    std::thread::sleep(Duration::from_millis(200));
    running.kill_group(Signal::SIGTERM).unwrap();
    let outcome = running.wait().unwrap();
    assert_eq!(outcome.termination, Termination::Signaled(libc::SIGTERM));
    assert!(outcome.elapsed < SLACK);
    assert_nothing_left(&sandbox);
}

#[test]
fn signalling_only_the_leader_spares_the_rest_of_the_group() {
    let sandbox = Sandbox::new().unwrap();
    let mut invocation = sandbox.invocation(sh("sleep 100 >/dev/null & exec sleep 100"));
    invocation.timeout = Duration::from_secs(60);
    let running = exec::spawn(&invocation).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    running.signal(Signal::SIGTERM).unwrap();
    let outcome = running.wait().unwrap();
    assert_eq!(outcome.termination, Termination::Signaled(libc::SIGTERM));
    let leaked = sandbox.sweep();
    assert_eq!(leaked.len(), 1, "the background sleep survives: {leaked:?}");
}

#[test]
fn dropping_a_running_step_kills_it() {
    let sandbox = Sandbox::new().unwrap();
    let mut invocation = sandbox.invocation(sh("sleep 100 & sleep 100"));
    invocation.timeout = Duration::from_secs(60);
    let running = exec::spawn(&invocation).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    drop(running);
    let deadline = Instant::now() + SLACK;
    while !conform::sandbox::scan(sandbox.marker()).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_nothing_left(&sandbox);
}

#[test]
fn steps_run_side_by_side() {
    let sandbox = Sandbox::new().unwrap();
    let began = Instant::now();
    let running: Vec<_> = (0..4)
        .map(|i| {
            let invocation = sandbox.invocation(sh(&format!("sleep 1; echo step{i}")));
            exec::spawn(&invocation).unwrap()
        })
        .collect();
    for (i, step) in running.into_iter().enumerate() {
        let outcome = step.wait().unwrap();
        assert_eq!(text(&outcome.stdout), format!("step{i}\n"));
    }
    // Four one-second steps side by side take far less than four seconds in sequence would.
    assert!(began.elapsed() < Duration::from_millis(3500), "{:?}", began.elapsed());
}

/// The descriptors conform itself holds without close-on-exec (inherited from whoever started
/// the test): a child inherits those whatever the driver does.
fn inheritable_descriptors_of_conform() -> Vec<u32> {
    const O_CLOEXEC_OCTAL: u32 = 0o2_000_000;
    let mut fds: Vec<u32> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|fd| *fd > 2)
        .filter(|fd| {
            let Ok(info) = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")) else {
                return false;
            };
            info.lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|f| u32::from_str_radix(f.trim(), 8).ok())
                .is_some_and(|flags| flags & O_CLOEXEC_OCTAL == 0)
        })
        .collect();
    fds.extend([0, 1, 2]);
    fds.sort_unstable();
    fds
}

#[test]
fn a_step_inherits_none_of_the_drivers_descriptors() {
    let sandbox = Sandbox::new().unwrap();
    // Start a neighbour first, so that its pipes and terminal exist while the step starts.
    let mut neighbour = sandbox.invocation(sh("sleep 1"));
    neighbour.stdin = StdinMode::Pty;
    let neighbour = exec::spawn(&neighbour).unwrap();
    for stdin in
        [StdinMode::Closed, StdinMode::OpenPipe, StdinMode::Pty, StdinMode::Bytes(b"x".to_vec())]
    {
        let expected = inheritable_descriptors_of_conform();
        let mut invocation = sandbox.invocation(sh("ls /proc/$$/fd"));
        invocation.stdin = stdin;
        let outcome = exec::run(&invocation).unwrap();
        let mut seen: Vec<u32> =
            text(&outcome.stdout).lines().map(|l| l.parse().unwrap()).collect();
        seen.sort_unstable();
        assert_eq!(seen, expected);
    }
    neighbour.wait().unwrap();
}

#[test]
fn driver_faults_are_errors_not_outcomes() {
    let sandbox = Sandbox::new().unwrap();
    let error = exec::run(&sandbox.invocation(Program::Argv(Vec::new()))).unwrap_err();
    assert_eq!(error.source.kind(), std::io::ErrorKind::InvalidInput);

    let error = exec::run(&sandbox.invocation(Program::argv(["/nonexistent/tool"]))).unwrap_err();
    assert_eq!(error.source.kind(), std::io::ErrorKind::NotFound);
    assert!(error.to_string().starts_with("failed to spawn /nonexistent/tool"), "{error}");

    let mut invocation = sandbox.invocation(Program::argv(["true"]));
    invocation.cwd = sandbox.root().join("missing");
    assert!(exec::run(&invocation).is_err());
}

#[test]
fn a_tool_that_exits_cleanly_on_sigterm_still_counts_as_timed_out() {
    let sandbox = Sandbox::new().unwrap();
    let mut invocation = sandbox.invocation(sh("trap 'exit 0' TERM; sleep 100 & wait"));
    invocation.timeout = Duration::from_millis(300);
    let outcome = exec::run(&invocation).unwrap();
    assert_eq!(outcome.termination, Termination::TimedOut);
    assert!(outcome.elapsed < SLACK);
    assert_nothing_left(&sandbox);
}

#[test]
fn signalling_a_step_that_already_ended_changes_nothing() {
    let sandbox = Sandbox::new().unwrap();
    let running = exec::spawn(&sandbox.invocation(sh("exit 5"))).unwrap();
    // Long enough for the exit, and usually for the pump to reap it as well.
    std::thread::sleep(Duration::from_millis(500));
    running.kill_group(Signal::SIGKILL).unwrap();
    running.signal(Signal::SIGKILL).unwrap();
    let outcome = running.wait().unwrap();
    assert_eq!(outcome.termination, Termination::Exited(5));
}

/// A stream printing a numbered line every 50 ms; on SIGINT it stops, prints which line it
/// had reached and exits 130. Without a signal it ends after `lines` lines.
fn counting_stream(lines: u32) -> Program {
    Program::argv([
        "python3".to_owned(),
        "-c".to_owned(),
        format!(
            r#"
import signal, sys, time
# The handler only raises a flag: a print from it could land inside the main flow's print.
stop = []
signal.signal(signal.SIGINT, lambda signum, frame: stop.append(signum))
printed = 0
for n in range({lines}):
    if stop:
        break
    print("line", n + 1, flush=True)
    printed = n + 1
    time.sleep(0.05)
if stop:
    print("interrupted after", printed, flush=True)
    sys.exit(130)
"#
        ),
    ])
}

/// Runs the counting stream of `lines` lines in `sandbox`, SIGINT once 3 lines were read.
fn sigint_after_3_lines(sandbox: &Sandbox, lines: u32) -> exec::Outcome {
    let mut invocation = sandbox.invocation(counting_stream(lines));
    invocation.timeout = SLACK;
    let line_signal = exec::LineSignal { after_lines: 3, signal: Signal::SIGINT };
    exec::spawn_watched(&invocation, Graces::default(), line_signal).unwrap().wait().unwrap()
}

#[test]
fn a_line_signal_arrives_once_enough_lines_were_read() {
    let sandbox = Sandbox::new().unwrap();
    let started = Instant::now();
    let outcome = sigint_after_3_lines(&sandbox, 200);
    assert_eq!(outcome.termination, Termination::Exited(130), "{}", text(&outcome.stderr));
    let out = text(&outcome.stdout);
    let reached: u32 = out
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("interrupted after "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no interruption line: {out}"));
    // Sent once the third line was read: the stream had printed at least 3 lines, and far
    // fewer than 200 (a late or missing signal would let it run on).
    assert!((3..60).contains(&reached), "interrupted after {reached} lines:\n{out}");
    let sent = outcome.line_signal_sent_after.expect("the signal was sent");
    assert!(sent >= Duration::from_millis(100), "sent after {sent:?}, before 3 lines could exist");
    assert!(started.elapsed() < SLACK);
    // The lines counted are the stream's plus the interruption line.
    assert_eq!(outcome.stdout_lines, u64::from(reached) + 1);
    assert_nothing_left(&sandbox);
}

#[test]
fn a_stream_ending_before_its_line_is_never_signalled() {
    let sandbox = Sandbox::new().unwrap();
    let outcome = sigint_after_3_lines(&sandbox, 2);
    assert_eq!(outcome.termination, Termination::Exited(0));
    assert_eq!(outcome.line_signal_sent_after, None);
    assert_eq!(outcome.stdout_lines, 2);
    assert_nothing_left(&sandbox);
}
