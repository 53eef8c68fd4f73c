//! Hostile tools (`tests/fixtures/hostile/*.sh`) against the driver and the sandbox.
//!
//! For each: the step ends within its bounds, the termination and the capture facts are right,
//! memory stays bounded (the capture cap holds whatever the tool prints), and no process is
//! left behind (the sandbox's sweep finds nothing, or finds exactly the process the tool forked
//! away and kills it). Judging those facts ("stdout is not JSON", "a process leaked") is the
//! checks' business; here the facts themselves are under test.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use conform::exec::{self, Graces, Invocation, Outcome, Program, StdinMode, Termination};
use conform::sandbox::{self, FoundBy, Sandbox};

use crate::sandbox::{KillOnDrop, processes_running, unique_digits};

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

// A grandchild that clears its environment (no marker), leaves the session, ignores SIGTERM
// and holds the step's pipes: `env-cleared-grandchild.sh`.

/// The grandchild's command line for a tag.
fn grandchild(tag: &str) -> String {
    format!("sleep 401.{tag}")
}

/// Waits (a bounded while) until at least `count` processes run `argv`; returns how many do.
fn wait_for(argv: &str, count: usize) -> usize {
    let deadline = Instant::now() + SLACK * 3;
    loop {
        let running = processes_running(argv).len();
        if running >= count || Instant::now() >= deadline {
            return running;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs the hostile tool's `greet` in `sandbox`; checks it answered and held the pipes.
fn run_env_cleared(sandbox: &Sandbox, tag: &str) {
    let mut inv = invocation(sandbox, "env-cleared-grandchild.sh", Duration::from_secs(30));
    inv.program = Program::argv([fixture("env-cleared-grandchild.sh"), "greet".into()]);
    inv.env.insert("HOSTILE_TAG".into(), tag.into());
    let graces = Graces { kill: Duration::from_millis(500), pipes: Duration::from_millis(500) };
    let began = Instant::now();
    let outcome = exec::run_with(&inv, graces).unwrap();
    assert!(began.elapsed() < SLACK, "the held pipes held the driver");
    assert_eq!(outcome.termination, Termination::Exited(0), "{outcome:?}");
    assert!(String::from_utf8_lossy(&outcome.stdout.bytes).contains("hello world"));
    assert_eq!(outcome.pipes_closed_after, None, "the grandchild holds the pipes");
}

/// A sandbox whose step left an env-cleared, setsid'd grandchild running: its argv, the guard
/// that kills it whatever the test does, and the sandbox.
fn an_env_cleared_grandchild() -> (String, KillOnDrop, Sandbox) {
    let tag = unique_digits();
    let argv = grandchild(&tag);
    let guard = KillOnDrop(argv.clone());
    let sandbox = Sandbox::new().unwrap();
    run_env_cleared(&sandbox, &tag);
    assert_eq!(wait_for(&argv, 1), 1);
    (argv, guard, sandbox)
}

#[test]
fn a_grandchild_that_cleared_its_environment_is_found_and_killed() {
    let (argv, _guard, sandbox) = an_env_cleared_grandchild();
    // The marker alone cannot see it: its environment is empty.
    assert!(!sandbox::scan(sandbox.marker()).iter().any(|p| p.cmdline.join(" ") == argv));
    let leaked = sandbox.sweep();
    let caught: Vec<_> = leaked.iter().filter(|p| p.cmdline.join(" ") == argv).collect();
    assert_eq!(caught.len(), 1, "{leaked:?}");
    assert_ne!(caught[0].found_by, FoundBy::Marker);
    assert_eq!(processes_running(&argv), Vec::<u32>::new(), "left after the sweep");
    assert_nothing_left(&sandbox);
}

/// A step still running in one sandbox is never taken for a leak of another, even with its
/// environment cleared (it looks like nothing but a child of conform then).
#[test]
fn a_live_step_of_another_sandbox_is_never_swept() {
    let tag = unique_digits();
    let argv = format!("sleep 403.{tag}");
    let _guard = KillOnDrop(argv.clone());
    let sweeping = Sandbox::new().unwrap();
    let running = Sandbox::new().unwrap();
    let step =
        exec::spawn(&running.invocation(Program::Shell(format!("exec env -i {argv}")))).unwrap();
    assert_eq!(wait_for(&argv, 1), 1);
    sweeping.enter();
    assert!(sweeping.sweep().is_empty());
    assert_eq!(processes_running(&argv).len(), 1, "the other sandbox's step was killed");
    drop(step);
    drop(running);
    assert_eq!(processes_running(&argv), Vec::<u32>::new());
}

/// Runs this very test again in a fresh process of the test binary with
/// `CONFORM_ISOLATION=subreaper` (the choice is made once per process), so that the fallback
/// to a child subreaper is tested wherever cgroups are there too. Returns `true` inside that
/// process, where the body runs.
fn as_subreaper(test: &str) -> bool {
    const INSIDE: &str = "CONFORM_TEST_AS_SUBREAPER";
    if std::env::var_os(INSIDE).is_some() {
        let isolation = sandbox::isolation();
        assert!(matches!(isolation, sandbox::Isolation::Subreaper { .. }), "{isolation}");
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads", "1"])
        .env(INSIDE, "1")
        .env(sandbox::ISOLATION_VAR, "subreaper")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "the test did not run: {stdout}\n{stderr}");
    false
}

/// Zombie children of this process: adopted orphans that were killed but never reaped.
fn zombie_children() -> Vec<u32> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                let fields: Vec<&str> =
                    stat.rsplit_once(')').map_or("", |(_, r)| r).split_whitespace().collect();
                fields.first() == Some(&"Z") && fields.get(1) == Some(&me.as_str())
            })
        })
        .collect()
}

#[test]
fn as_subreaper_an_env_cleared_grandchild_is_adopted_charged_and_reaped() {
    if !as_subreaper(
        "hostile::as_subreaper_an_env_cleared_grandchild_is_adopted_charged_and_reaped",
    ) {
        return;
    }
    let (argv, _guard, sandbox) = an_env_cleared_grandchild();
    let leaked = sandbox.sweep();
    let caught: Vec<_> = leaked.iter().filter(|p| p.cmdline.join(" ") == argv).collect();
    assert_eq!(caught.len(), 1, "{leaked:?}");
    // It works in the sandbox's directory.
    assert_eq!(caught[0].found_by, FoundBy::OrphanInSandbox);
    assert_eq!(processes_running(&argv), Vec::<u32>::new());
    assert_eq!(zombie_children(), Vec::<u32>::new(), "killed orphans were not reaped");
    drop(sandbox);
    assert!(sandbox::end_of_run().is_empty());
}

/// An orphan that ends on its own is reaped at once, without waiting for a sweep: a tool that
/// asks whether its worker still runs must not see a zombie of conform's.
#[test]
fn as_subreaper_an_orphan_that_ends_is_reaped_at_once() {
    if !as_subreaper("hostile::as_subreaper_an_orphan_that_ends_is_reaped_at_once") {
        return;
    }
    let sandbox = Sandbox::new().unwrap();
    let line = "setsid sh -c 'sleep 0.3' </dev/null >/dev/null 2>&1 & echo $!";
    let outcome = exec::run(&sandbox.invocation(Program::Shell(line.to_owned()))).unwrap();
    let pid: u32 = String::from_utf8_lossy(&outcome.stdout.bytes).trim().parse().unwrap();
    let parent_of = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|stat| {
            stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse::<u32>().ok()
        })
    };
    // It became this process's child when its parent, the step, ended.
    assert_eq!(parent_of(pid), Some(std::process::id()));
    let deadline = Instant::now() + SLACK;
    while parent_of(pid).is_some() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(parent_of(pid), None, "it ended but stayed a zombie");
    assert!(sandbox.sweep().is_empty());
}

/// `cd /` first: the working directory tells nothing then.
fn leave_elsewhere(sandbox: &Sandbox, argv: &str) {
    let line = format!("cd / && setsid env -i sh -c 'exec {argv}' </dev/null >/dev/null 2>&1 &");
    let outcome = exec::run(&sandbox.invocation(Program::Shell(line))).unwrap();
    assert_eq!(outcome.termination, Termination::Exited(0));
}

#[test]
fn as_subreaper_an_orphan_started_while_alone_is_charged_to_its_sandbox() {
    if !as_subreaper(
        "hostile::as_subreaper_an_orphan_started_while_alone_is_charged_to_its_sandbox",
    ) {
        return;
    }
    let argv = format!("sleep 404.{}", unique_digits());
    let _guard = KillOnDrop(argv.clone());
    let sandbox = Sandbox::new().unwrap();
    leave_elsewhere(&sandbox, &argv);
    assert_eq!(wait_for(&argv, 1), 1);
    let leaked = sandbox.sweep();
    assert_eq!(leaked.len(), 1, "{leaked:?}");
    assert_eq!(leaked[0].cmdline.join(" "), argv);
    assert_eq!(leaked[0].found_by, FoundBy::OrphanStartedAlone);
    assert_eq!(processes_running(&argv), Vec::<u32>::new());
}

/// Started while two sandboxes lived, working elsewhere: no sandbox can be charged with it,
/// and it may be the other's (a detached worker that scenario still needs), so it goes only
/// once neither lives, as a leak of the run.
#[test]
fn as_subreaper_an_orphan_no_sandbox_can_claim_is_a_leak_of_the_run() {
    if !as_subreaper("hostile::as_subreaper_an_orphan_no_sandbox_can_claim_is_a_leak_of_the_run") {
        return;
    }
    let argv = format!("sleep 405.{}", unique_digits());
    let _guard = KillOnDrop(argv.clone());
    let first = Sandbox::new().unwrap();
    let second = Sandbox::new().unwrap();
    leave_elsewhere(&first, &argv);
    assert_eq!(wait_for(&argv, 1), 1);
    assert!(first.sweep().is_empty());
    assert!(second.sweep().is_empty());
    drop(first);
    assert_eq!(processes_running(&argv).len(), 1, "killed while `second` may need it");
    drop(second);
    assert_eq!(processes_running(&argv), Vec::<u32>::new(), "not killed with the last sandbox");
    let of_the_run = sandbox::end_of_run();
    assert_eq!(of_the_run.len(), 1, "{of_the_run:?}");
    assert_eq!(of_the_run[0].cmdline.join(" "), argv);
    assert_eq!(of_the_run[0].found_by, FoundBy::OrphanOfTheRun);
    assert!(sandbox::end_of_run().is_empty(), "reported twice");
    assert_eq!(zombie_children(), Vec::<u32>::new());
}

#[test]
fn as_subreaper_a_live_step_of_another_sandbox_is_never_swept() {
    if as_subreaper("hostile::as_subreaper_a_live_step_of_another_sandbox_is_never_swept") {
        a_live_step_of_another_sandbox_is_never_swept();
    }
}

// The same grandchild through `conform run`: every scenario's leak is its own finding, and
// nothing is left, whichever isolation is in force, one scenario at a time or three.

/// Three quick scenarios that need no role: each calls the tool, so each leaves a grandchild.
const QUICK: [&str; 3] =
    ["manifest-valid", "unknown-flag-is-arg-error", "plain-command-ignores-budget-env"];

/// A directory for one conform run: a profile giving the tool `HOSTILE_TAG`, and a private
/// TMPDIR for its sandboxes.
struct RunDir {
    dir: tempfile::TempDir,
}

impl RunDir {
    fn new(tag: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("tmp")).unwrap();
        std::fs::write(
            dir.path().join("conform.toml"),
            format!("[tool]\nenv = {{ HOSTILE_TAG = \"{tag}\" }}\n"),
        )
        .unwrap();
        RunDir { dir }
    }

    fn tmp(&self) -> PathBuf {
        self.dir.path().join("tmp")
    }

    fn conform(&self, isolation: &str) -> std::process::Command {
        let mut cmd = crate::support::conform();
        cmd.current_dir(self.dir.path())
            .env("TMPDIR", self.tmp())
            .env(sandbox::ISOLATION_VAR, isolation)
            .arg("run")
            .arg(fixture("env-cleared-grandchild.sh"))
            .arg("--profile")
            .arg(self.dir.path().join("conform.toml"));
        cmd
    }

    /// conform's JSON report of `manifest-valid` alone on the fixture `name`, under this
    /// directory's profile and temporary directory.
    fn manifest_valid_of(&self, name: &str) -> serde_json::Value {
        let out = crate::support::conform()
            .current_dir(self.dir.path())
            .env("TMPDIR", self.tmp())
            .arg("run")
            .arg(fixture(name))
            .arg("--profile")
            .arg(self.dir.path().join("conform.toml"))
            .args(["--only", "manifest-valid", "--format", "json"])
            .output()
            .unwrap();
        crate::support::stdout_json(&out)
    }

    fn left_in_tmp(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.tmp()).unwrap().flatten().map(|e| e.path()).collect()
    }
}

/// Run groups of the conform process `pid` still in the cgroup tree (where there is one).
fn run_groups_of(pid: u32) -> Vec<PathBuf> {
    let prefix = format!("conform-{pid}-");
    let Ok(mountinfo) = std::fs::read_to_string("/proc/self/mountinfo") else { return Vec::new() };
    let mut found = Vec::new();
    for line in mountinfo.lines().filter(|l| l.contains(" - cgroup2 ")) {
        let Some(mount) = line.split_whitespace().nth(4) else { continue };
        let mut stack = vec![PathBuf::from(mount)];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    if entry.file_name().to_string_lossy().starts_with(&prefix) {
                        found.push(entry.path());
                    }
                    stack.push(entry.path());
                }
            }
        }
    }
    found
}

#[rstest::rstest]
#[case::cgroups("auto")]
#[case::subreaper("subreaper")]
fn an_interrupted_conform_leaves_no_env_cleared_grandchild(#[case] isolation: &str) {
    let tag = unique_digits();
    let argv = grandchild(&tag);
    let _guard = KillOnDrop(argv.clone());
    let run = RunDir::new(&tag);
    let mut child = run
        .conform(isolation)
        .args(["-j", "4"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Discovery leaves one, then each scenario: wait until several run at once.
    let running = wait_for(&argv, 3);
    assert!(running >= 3, "only {running} grandchildren started");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
    let left = processes_running(&argv);
    assert_eq!(left, Vec::<u32>::new(), "{} left after Ctrl-C", left.len());
    assert_eq!(run.left_in_tmp(), Vec::<PathBuf>::new(), "sandboxes left");
    assert_eq!(run_groups_of(child.id()), Vec::<PathBuf>::new(), "cgroups left");
}

/// A cgroup of a test's own, beside the run groups of the conforms the test runner starts:
/// every conform sweeps the stale run groups beside its own, so a conform started in here is
/// the only one whose sweep can find the run group a conform killed in here left (another
/// test's conform, in the runner's cgroup, would otherwise take it first and say so on its own
/// stderr). Whatever is left in it is killed and it is removed on drop.
struct PrivateCgroup(PathBuf);

impl PrivateCgroup {
    /// Made beside `run_group`, the run group of this test process.
    fn beside(run_group: &std::path::Path, tag: &str) -> Self {
        let path = run_group.parent().unwrap().join(format!("hostile-{tag}"));
        std::fs::create_dir(&path).unwrap();
        PrivateCgroup(path)
    }

    /// `command`, started in this cgroup: a shell moves itself in, then becomes the program
    /// (same pid), so nothing of it ever runs outside.
    fn wrap(&self, command: &std::process::Command) -> std::process::Command {
        let mut wrapped = std::process::Command::new("/bin/sh");
        wrapped
            .args(["-c", r#"echo $$ > "$1/cgroup.procs" && shift && exec "$@""#, "sh"])
            .arg(&self.0)
            .arg(command.get_program())
            .args(command.get_args());
        for (key, value) in command.get_envs() {
            match value {
                Some(value) => wrapped.env(key, value),
                None => wrapped.env_remove(key),
            };
        }
        if let Some(dir) = command.get_current_dir() {
            wrapped.current_dir(dir);
        }
        wrapped
    }
}

impl Drop for PrivateCgroup {
    fn drop(&mut self) {
        // Deepest first: a cgroup is removed only once its children are.
        let mut groups = vec![self.0.clone()];
        let mut index = 0;
        while index < groups.len() {
            let children = std::fs::read_dir(&groups[index]).into_iter().flatten().flatten();
            groups.extend(children.filter(|e| e.path().is_dir()).map(|e| e.path()));
            index += 1;
        }
        for group in groups.iter().rev() {
            let _ = std::fs::write(group.join("cgroup.kill"), "1");
            for _ in 0..50 {
                if std::fs::remove_dir(group).is_ok() || !group.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// SIGKILL leaves conform's sandboxes (and, with cgroups, the grandchildren in its run group)
/// behind; the next run removes the sandboxes of the dead conform, kills what its cgroups
/// still held, and says so; a sandbox of a live conform (this test's) stays. Both conforms run
/// in a cgroup of the test's own where there are cgroups, so that no other conform on the
/// machine sweeps the killed one's first.
#[test]
fn the_next_run_removes_what_a_killed_conform_left() {
    let tag = unique_digits();
    let argv = grandchild(&tag);
    let _guard = KillOnDrop(argv.clone());
    let run = RunDir::new(&tag);
    // For a live conform's sandbox below: one owned by this process (a real sandbox's owner
    // file, the sandbox itself gone: a live one would put the next conform in this process's
    // cgroup). Made first: this process cleans up stale cgroups too.
    let owner = {
        let elsewhere = tempfile::tempdir().unwrap();
        let real = Sandbox::new_in(elsewhere.path()).unwrap();
        std::fs::read_to_string(real.root().join(sandbox::OWNER_FILE)).unwrap()
    };
    let here = sandbox::isolation();
    let private = match &here {
        sandbox::Isolation::Cgroup { run_group } => Some(PrivateCgroup::beside(run_group, &tag)),
        _ => None,
    };
    let started = |command: std::process::Command| match &private {
        Some(group) => group.wrap(&command),
        None => command,
    };
    let mut first = run.conform("auto");
    first.args(["-j", "2"]).stdout(std::process::Stdio::null());
    let mut killed = started(first).stderr(std::process::Stdio::null()).spawn().unwrap();
    assert!(wait_for(&argv, 2) >= 2);
    let had_cgroups = !run_groups_of(killed.id()).is_empty();
    // Where this process has cgroups, so had the conform it started.
    assert_eq!(had_cgroups, private.is_some(), "{here}");
    killed.kill().unwrap();
    killed.wait().unwrap();
    let stale: Vec<PathBuf> = run.left_in_tmp();
    assert!(!stale.is_empty(), "SIGKILL left no sandbox: nothing to test");
    let live_root = run.tmp().join("conform-alive1");
    std::fs::create_dir(&live_root).unwrap();
    std::fs::write(live_root.join(sandbox::OWNER_FILE), owner).unwrap();

    let mut next = crate::support::conform();
    next.current_dir(run.dir.path())
        .env("TMPDIR", run.tmp())
        .args(["run", "--only", "manifest-valid"])
        .arg(crate::support::faketool());
    let out = started(next).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(crate::support::code(&out), 0, "{stderr}");
    for dir in &stale {
        assert!(!dir.exists(), "{} stayed", dir.display());
        let line =
            format!("removed the sandbox {} of conform process {}", dir.display(), killed.id());
        assert!(stderr.contains(&line), "no line for {}: {stderr}", dir.display());
    }
    assert!(live_root.join(sandbox::OWNER_FILE).exists(), "the live conform's sandbox was removed");
    if had_cgroups {
        let group = private.as_ref().map(|g| g.0.join(format!("conform-{}-", killed.id())));
        let line = format!("removed the cgroup {}", group.unwrap().display());
        assert!(stderr.contains(&line), "no line `{line}…`: {stderr}");
        assert_eq!(run_groups_of(killed.id()), Vec::<PathBuf>::new());
        assert_eq!(processes_running(&argv), Vec::<u32>::new(), "the killed run's leaks live on");
    }
    std::fs::remove_dir_all(&live_root).unwrap();
}

/// The lines of `text` holding a character a terminal acts on: a C0 control other than a
/// newline or a tab, DEL, or a C1 control.
fn raw_controls(text: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(text)
        .lines()
        .filter(|l| {
            l.chars()
                .any(|c| matches!(c, '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}'))
        })
        .map(|l| format!("{l:?}"))
        .collect()
}

/// A tool writing escape sequences on stdout, on stderr and in its commands' names
/// (`escapes.sh`): conform's human report, its progress and messages on stderr, the JUnit
/// report, the Markdown summary and `conform init`'s draft show every one of them as a visible
/// escape (`\e]0;PWNED…`), never as the sequence itself.
#[test]
fn a_tools_escape_sequences_reach_no_terminal_and_no_text_report() {
    let dir = tempfile::tempdir().unwrap();
    let (junit, markdown) = (dir.path().join("junit.xml"), dir.path().join("summary.md"));
    let out = crate::support::conform()
        .env("TMPDIR", dir.path())
        .env_remove("NO_COLOR")
        .arg("run")
        .arg(fixture("escapes.sh"))
        .arg("--junit")
        .arg(&junit)
        .arg("--summary-md")
        .arg(&markdown)
        .output()
        .unwrap();
    assert_eq!(crate::support::code(&out), 80, "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The evidence is there, made visible: the title sequence of stdout, stderr and a name.
    for shown in [r"\e]0;PWNED-STDOUT\x07", r"\e]0;PWNED-STDERR\x07", r"\e]0;PWNED-NAME\x07"] {
        assert!(stdout.contains(shown), "`{shown}` not in the report:\n{stdout}");
    }
    let junit = std::fs::read(&junit).unwrap();
    assert!(String::from_utf8_lossy(&junit).contains(r"\e]0;PWNED-STDOUT\x07"));
    let init = crate::support::conform().arg("init").arg(fixture("escapes.sh")).output().unwrap();
    assert_eq!(crate::support::code(&init), 0, "{}", String::from_utf8_lossy(&init.stderr));
    for (what, bytes) in [
        ("stdout", out.stdout.clone()),
        ("stderr", out.stderr.clone()),
        ("the JUnit report", junit),
        ("the Markdown summary", std::fs::read(&markdown).unwrap()),
        ("conform init's draft", init.stdout),
    ] {
        let raw = raw_controls(&bytes);
        assert!(raw.is_empty(), "{what} holds raw control characters:\n{}", raw.join("\n"));
    }
}

/// Runs `cmd` to its end, reading its stdout and stderr, or kills it after `deadline`; returns
/// its output, the wall time and the peak resident memory in KiB of the largest child this
/// test process has waited for (nextest runs each test in a process of its own: conform's),
/// or `None` when it had to be killed.
fn run_measured(
    mut cmd: std::process::Command,
    deadline: Duration,
) -> Option<(std::process::Output, Duration, i64)> {
    use std::io::Read as _;
    let began = Instant::now();
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (mut stdout, mut stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let err = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        bytes
    });
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let output = std::process::Output {
                status,
                stdout: out.join().unwrap(),
                stderr: err.join().unwrap(),
            };
            // The largest child this test process waited for: conform (its own children
            // count in its own figure, never in the test's).
            let usage =
                nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
                    .unwrap();
            return Some((output, began.elapsed(), usage.max_rss()));
        }
        if began.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A profile or a baseline that is a device (`/dev/zero`), a FIFO, a directory or a file past
/// the limit is a bad invocation, refused at once in a few MiB, with the reason in the
/// envelope: before, `/dev/zero` grew conform to 1.5 GB in 3 s and a FIFO hung it.
#[test]
fn a_profile_or_baseline_that_is_no_regular_file_or_too_large_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let large = dir.path().join("large.toml");
    std::fs::write(&large, format!("# {}\n", "x".repeat(2 << 20))).unwrap();
    let cases: [(&std::path::Path, &str); 4] = [
        (std::path::Path::new("/dev/zero"), "a character device, not a regular file"),
        (&fifo, "a FIFO, not a regular file"),
        (dir.path(), "a directory, not a regular file"),
        (&large, "larger than 1048576 bytes"),
    ];
    for option in ["--profile", "--baseline"] {
        for (path, why) in cases {
            let mut cmd = crate::support::conform();
            cmd.arg("run").arg(crate::support::faketool()).arg(option).arg(path);
            cmd.args(["--format", "json"]);
            let Some((out, took, max_kib)) = run_measured(cmd, SLACK) else {
                panic!("{option} {}: conform still ran after {SLACK:?}", path.display());
            };
            let envelope = crate::support::stdout_json(&out);
            assert_eq!(crate::support::code(&out), 2, "{option} {}: {envelope:#}", path.display());
            assert_eq!(envelope["error"]["code"], "ARG_ERROR");
            let message = envelope["error"]["message"].as_str().unwrap();
            assert!(message.contains(why), "{option} {}: {message}", path.display());
            assert!(took < Duration::from_secs(5), "{option} {}: {took:?}", path.display());
            assert!(max_kib < 64 * 1024, "{option} {}: {max_kib} KiB", path.display());
        }
    }
}

/// 45,000 commands breaking three registration rules are three findings, one per rule, each
/// counting the commands and naming five; the JSON report stays small and conform's memory
/// bounded. Before: one finding per command and rule (135,000), a 29.6 MB report and 2.36 GB
/// of memory.
#[test]
fn a_manifest_of_45000_writers_is_one_finding_per_rule_in_a_bounded_report() {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = crate::support::conform();
    cmd.env("TMPDIR", dir.path()).arg("run").arg(fixture("many-writers.sh"));
    cmd.args(["--format", "json"]);
    let (out, _, max_kib) = run_measured(cmd, Duration::from_secs(120)).expect("conform hung");
    let report = crate::support::stdout_json(&out);
    assert_eq!(crate::support::code(&out), 80, "{report:#}");
    for id in [
        "resumable-writer-takes-idempotency-key",
        "interruption-declares-incomplete-exit",
        "budget-flag-listed-where-interruptible",
    ] {
        let scenario =
            report["data"]["scenarios"].as_array().unwrap().iter().find(|s| s["id"] == id).unwrap();
        let findings = scenario["findings"].as_array().unwrap();
        assert_eq!(findings.len(), 1, "{id}: {findings:#?}");
        let message = findings[0]["message"].as_str().unwrap();
        assert!(message.starts_with("45000 commands "), "{id}: {message}");
        assert!(message.ends_with("`w1`, `w2`, `w3`, `w4`, `w5` and 44995 more"), "{message}");
    }
    assert!(out.stdout.len() < 1 << 20, "a report of {} bytes", out.stdout.len());
    assert!(max_kib < 1_250_000, "conform grew to {max_kib} KiB");
}

/// `cmd` with its descriptor limit lowered to `limit` (soft and hard, as `ulimit -n` does).
fn with_fd_limit(cmd: &std::process::Command, limit: u32) -> std::process::Command {
    let mut wrapped = std::process::Command::new("/bin/sh");
    wrapped
        .args(["-c", &format!("ulimit -n {limit} && exec \"$@\""), "sh"])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(value) => wrapped.env(key, value),
            None => wrapped.env_remove(key),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        wrapped.current_dir(dir);
    }
    wrapped
}

/// The owner file of a sandbox made by a conform of another boot: certainly gone.
fn stale_owner_file() -> String {
    let elsewhere = tempfile::tempdir().unwrap();
    let real = Sandbox::new_in(elsewhere.path()).unwrap();
    let text = std::fs::read_to_string(real.root().join(sandbox::OWNER_FILE)).unwrap();
    text.lines()
        .map(|l| if l.starts_with("boot ") { "boot another-boot".to_owned() } else { l.to_owned() })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Makes `dir` and everything below it read-only, as `chmod -R a-w` does.
fn make_read_only(dir: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.file_type().unwrap().is_dir() {
            make_read_only(&entry.path());
        }
        let mode = entry.metadata().unwrap().permissions().mode() & !0o222;
        std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// As a user without privileges (`nobody` when the test runs as root), a tool that leaves a
/// read-only tree (Go's module cache: directories 0555) leaves no sandbox behind, and a stale
/// sandbox holding such a tree (of a conform of another boot) is removed by the next run.
/// Before: every scenario's sandbox stayed (6 of a run of `readonly-tree.sh`), and the stale
/// one for ever.
#[test]
fn a_read_only_tree_leaves_no_sandbox_behind_for_an_unprivileged_user() {
    let root = nix::unistd::geteuid().is_root();
    let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].into_iter().find(|p| Path::new(p).exists());
    if root && setpriv.is_none() {
        eprintln!("skipped: running as root without setpriv, no unprivileged user to test as");
        return;
    }
    if let Some(setpriv) = setpriv.filter(|_| root) {
        // The binary and the fixture must be within `nobody`'s reach (not under /root).
        let reach = std::process::Command::new(setpriv)
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh", "-c"])
            .arg(r#"test -x "$0" && test -r "$1""#)
            .arg(env!("CARGO_BIN_EXE_conform"))
            .arg(fixture("readonly-tree.sh"))
            .status()
            .unwrap();
        if !reach.success() {
            eprintln!("skipped: the build is out of reach of user nobody");
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    let stale = tmp.join("conform-stale1");
    std::fs::create_dir_all(stale.join("home/go/pkg/mod/m@v1/sub")).unwrap();
    std::fs::write(stale.join("home/go/pkg/mod/m@v1/sub/m.go"), "package m").unwrap();
    std::fs::write(stale.join(sandbox::OWNER_FILE), stale_owner_file()).unwrap();
    make_read_only(&stale.join("home/go"));
    let (user, group) = (nix::unistd::Uid::from_raw(65534), nix::unistd::Gid::from_raw(65534));
    if root {
        for path in [dir.path().to_path_buf(), tmp.clone()] {
            nix::unistd::chown(&path, Some(user), Some(group)).unwrap();
        }
        let status = std::process::Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(&stale)
            .status()
            .unwrap();
        assert!(status.success());
    }
    let mut cmd = match setpriv.filter(|_| root) {
        Some(setpriv) => {
            let mut cmd = std::process::Command::new(setpriv);
            cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"]);
            cmd.arg(env!("CARGO_BIN_EXE_conform"));
            cmd
        }
        None => crate::support::conform(),
    };
    cmd.current_dir(dir.path())
        .env("TMPDIR", &tmp)
        .env("PATH", "/usr/bin:/bin")
        .arg("run")
        .arg(fixture("readonly-tree.sh"));
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(crate::support::code(&out), 80, "{stderr}");
    assert!(stderr.contains("removed the sandbox"), "the stale one was not removed: {stderr}");
    let left: Vec<PathBuf> = std::fs::read_dir(&tmp).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(left, Vec::<PathBuf>::new(), "sandboxes left:\n{stderr}");
}

/// A tool running as root that mounts a file system in its sandbox, bind-mounts a directory
/// of the machine into it and makes a file immutable and a directory append-only leaves no
/// sandbox and no mount behind, and the directory it bind-mounted keeps its files. Before: both
/// sandboxes of the run stayed, with their four mounts.
#[test]
fn mounts_and_immutable_files_leave_no_sandbox_and_spare_what_was_mounted() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: mounting and chattr +i need root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (tmp, canary) = (dir.path().join("tmp"), dir.path().join("canary"));
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::create_dir_all(&canary).unwrap();
    std::fs::write(canary.join("keep"), "precious").unwrap();
    let profile = dir.path().join("conform.toml");
    std::fs::write(
        &profile,
        format!("[tool]\nenv = {{ HOSTILE_CANARY = \"{}\" }}\n", canary.display()),
    )
    .unwrap();
    // What the fixture can do here: a tool without the privilege would leave nothing to test.
    let probe = dir.path().join("probe");
    std::fs::create_dir(&probe).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "probe"])
        .arg(&probe)
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: this machine does not let root mount a tmpfs");
        return;
    }
    let _ = std::process::Command::new("umount").arg(&probe).status();
    let out = crate::support::conform()
        .current_dir(dir.path())
        .env("TMPDIR", &tmp)
        .arg("run")
        .arg(fixture("mounts-and-immutable.sh"))
        .arg("--profile")
        .arg(&profile)
        .args(["--only", "manifest-valid", "--format", "json"])
        .output()
        .unwrap();
    let report = crate::support::stdout_json(&out);
    assert_eq!(crate::support::status_of(&report, "manifest-valid"), "pass", "{report:#}");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let tmp_text = tmp.display().to_string();
    let left_mounted: Vec<&str> = mounts.lines().filter(|l| l.contains(&tmp_text)).collect();
    assert_eq!(left_mounted, Vec::<&str>::new(), "mounts left");
    let left: Vec<PathBuf> = std::fs::read_dir(&tmp).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(left, Vec::<PathBuf>::new(), "sandboxes left");
    assert_eq!(std::fs::read_to_string(canary.join("keep")).unwrap(), "precious");
}

/// Under `ulimit -n 64`, with the default `-j`, a tool that leaves a deep tree in each sandbox
/// (removing it holds a descriptor per level) leaves no sandbox behind: a removal that runs
/// out of descriptors is tried again once the run is over. Before: 3 to 6 sandboxes stayed.
#[test]
fn a_low_descriptor_limit_leaves_no_sandbox_behind() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let mut cmd = crate::support::conform();
    cmd.current_dir(dir.path()).env("TMPDIR", &tmp).arg("run").arg(fixture("deep-tree.sh"));
    let out = with_fd_limit(&cmd, 64).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), None, "{stderr}");
    let left: Vec<PathBuf> = std::fs::read_dir(&tmp).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(left, Vec::<PathBuf>::new(), "sandboxes left:\n{stderr}");
}

/// Removes on drop the files a test's tool wrote in /tmp (`/tmp/<prefix>*`).
struct RemoveOnDrop(String);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        for entry in std::fs::read_dir("/tmp").into_iter().flatten().flatten() {
            if entry.file_name().to_string_lossy().starts_with(&self.0) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}

/// A tool writing in /tmp and in `../..` from its working directory (conform's temporary
/// directory) at every call gets a note on the scenario naming both files: before, nothing
/// said so.
#[test]
fn writes_outside_the_sandbox_are_noted_on_the_scenario() {
    let tag = unique_digits();
    let _cleanup = RemoveOnDrop(format!("hostile-outside-{tag}-"));
    let run = RunDir::new(&tag);
    let report = run.manifest_valid_of("writes-outside.sh");
    let scenario = &report["data"]["scenarios"][0];
    let note = scenario["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .find(|n| n.starts_with("outside the sandbox, while the scenario ran: "))
        .unwrap_or_else(|| panic!("no note of the writes outside: {scenario:#}"));
    let tmp = run.tmp().canonicalize().unwrap();
    for place in [Path::new("/tmp").canonicalize().unwrap(), tmp] {
        let file = format!("{}/hostile-outside-{tag}-", place.display());
        assert!(note.contains(&file), "{file}… not in: {note}");
    }
    assert!(note.contains(" (new file)"), "{note}");
    // The files stay: conform reports what it did not make, and removes none of it.
    let left = run.left_in_tmp();
    assert_eq!(left.len(), 2, "{left:?}");
    assert!(left.iter().all(|p| p.to_string_lossy().contains("hostile-outside-")), "{left:?}");
}

/// Out of the edit lane, and alone in CI: they load the machine, or time a tool that the load of other tests would stretch.
mod alone {
    use super::*;

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
}

/// Out of the edit lane (`.config/nextest.toml`): each takes ten seconds or more.
mod heavy {
    use super::*;

    #[rstest::rstest]
    #[case::cgroups_one_at_a_time("auto", 1)]
    #[case::cgroups_three_at_once("auto", 3)]
    #[case::subreaper_one_at_a_time("subreaper", 1)]
    #[case::subreaper_three_at_once("subreaper", 3)]
    fn conform_reports_an_env_cleared_grandchild_on_its_scenario_and_leaves_nothing(
        #[case] isolation: &str,
        #[case] jobs: u8,
    ) {
        let tag = unique_digits();
        let argv = grandchild(&tag);
        let _guard = KillOnDrop(argv.clone());
        let run = RunDir::new(&tag);
        let mut cmd = run.conform(isolation);
        cmd.args(["--format", "json", "-j", &jobs.to_string()]);
        for id in QUICK {
            cmd.args(["--only", id]);
        }
        let began = Instant::now();
        let out = cmd.output().unwrap();
        let took = began.elapsed();
        let report = crate::support::stdout_json(&out);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(crate::support::code(&out), 80, "{report:#}\n{stderr}");
        for id in QUICK {
            assert_eq!(crate::support::status_of(&report, id), "fail", "{id}: {report:#}");
            let scenario = report["data"]["scenarios"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["id"] == id)
                .unwrap();
            let leaks: Vec<&serde_json::Value> = scenario["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["check"] == "leaked-process")
                .collect();
            assert!(
                leaks.iter().any(|f| f["actual"] == argv.as_str()),
                "{id} has no finding for its grandchild: {scenario:#}"
            );
        }
        // Each step waits out the pipe grace (2 s) for the held pipes, no more.
        assert!(took < Duration::from_secs(90), "conform took {took:?}");
        assert_eq!(processes_running(&argv), Vec::<u32>::new(), "left after the run");
        assert_eq!(run.left_in_tmp(), Vec::<PathBuf>::new(), "sandboxes left");
    }
    /// A job whose `cancel_command` cannot run (the program is not on PATH) outlives the scenario:
    /// the leak finding and a note say which cancel failed and how, so the vendor is sent to the
    /// cancel, not to a mystery process.
    #[test]
    fn a_cancel_that_cannot_run_is_named_by_the_leak_it_leaves() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool");
        crate::support::write_executable(
            &tool,
            r#"#!/bin/sh
    case "$1" in
    manifest) printf '{"schema_version":"1.0","commands":{"build":{"async":true,"danger_level":"safe"}}}\n' ;;
    build)
      sleep 120 >/dev/null 2>&1 &
      printf '{"ok":true,"data":{"job_id":"j1","status":"running","terminal":false,"status_command":"no-such-tool job status j1","cancel_command":"no-such-tool job cancel j1","poll_interval_ms":100,"timeout_ms":60000},"error":null,"warnings":[],"meta":{"exit_code":0,"duration_ms":1}}\n' ;;
    esac
    "#,
        );
        let profile = dir.path().join("conform.toml");
        std::fs::write(&profile, "[roles.async]\nargv = [\"build\"]\n").unwrap();
        let out = crate::support::conform()
            .arg("run")
            .arg(&tool)
            .arg("--profile")
            .arg(&profile)
            .args(["--only", "async-returns-a-job-descriptor", "--format", "json"])
            .output()
            .unwrap();
        let report = crate::support::stdout_json(&out);
        let scenario = &report["data"]["scenarios"][0];
        let leak = scenario["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["check"] == "leaked-process")
            .unwrap_or_else(|| panic!("no leak finding: {scenario:#}"));
        let message = leak["message"].as_str().unwrap();
        assert!(
            message.contains("its cancels (failed: `no-such-tool job cancel j1` (exit 127)"),
            "{message}"
        );
        let notes: Vec<&str> =
            scenario["notes"].as_array().unwrap().iter().filter_map(|n| n.as_str()).collect();
        assert!(
            notes.iter().any(|n| n.starts_with(
                "clean-up: a cancel failed: `no-such-tool job cancel j1` (exit 127): "
            ) && n.contains("not found")),
            "{notes:?}"
        );
    }
    /// A tool that leaves fifty processes behind gets twenty `leaked-process` findings and one
    /// that counts the other thirty, and none of the fifty outlives the run.
    #[test]
    fn fifty_leaked_processes_are_twenty_findings_and_a_count() {
        let tag = unique_digits();
        let argv = format!("sleep 402.{tag}");
        let _guard = KillOnDrop(argv.clone());
        let run = RunDir::new(&tag);
        let report = run.manifest_valid_of("many-leaks.sh");
        let scenario = &report["data"]["scenarios"][0];
        let leaks: Vec<&str> = scenario["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["check"] == "leaked-process")
            .map(|f| f["message"].as_str().unwrap())
            .collect();
        assert_eq!(leaks.len(), 21, "{scenario:#}");
        assert_eq!(leaks[20], "and 30 more `leaked-process` finding(s) like the 20 above");
        assert_eq!(processes_running(&argv), Vec::<u32>::new(), "left after the run");
        assert_eq!(run.left_in_tmp(), Vec::<PathBuf>::new(), "sandboxes left");
    }
}
