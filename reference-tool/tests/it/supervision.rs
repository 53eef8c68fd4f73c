//! The framework supervises a command's work whatever the work does: a panic becomes an
//! INTERNAL_ERROR envelope, work that ignores every stop request still ends at the wall-clock
//! limit, and an exit code the command does not declare is refused in test mode.
//!
//! reftool's own commands do none of this, and reftool keeps no switch to make them: the
//! misbehaving work is a command of this test's, registered on reftool's application
//! ([`reftool::commands::app_of`]) and run in a child process of this test binary, with the
//! environment a sandbox gives reftool. The child writes what reftool would print into the
//! sandbox, so the test harness's own output cannot mix with it.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use reftool::framework::{CommandSpec, Exit, Failure, SideEffects};
use reftool::runtime::Parts;

use crate::snapshot;
use crate::support::{Run, Sandbox};

/// Names the misbehaviour for the child; unset in the parent.
const CHILD_ENV: &str = "REFTOOL_SUPERVISION_CHILD";
/// The sandbox directory the child answers into.
const ANSWER_DIR_ENV: &str = "REFTOOL_SUPERVISION_ANSWER_DIR";

/// The work of the `misbehave` command, as the child was asked.
fn misbehaving_spec(kind: &str) -> CommandSpec {
    let spec = match kind {
        "panic" => CommandSpec::new("misbehave", "Work that panics", |_ctx| {
            panic!("the work panicked on purpose")
        }),
        // Work blocked where no stop request reaches it (a read that never returns).
        "hang" => CommandSpec::new("misbehave", "Work that ignores every stop", |_ctx| {
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }),
        "undeclared-exit" => {
            CommandSpec::new("misbehave", "Work with an undeclared exit", |_ctx| {
                Err(Failure::new(
                    Exit(99),
                    "UNDECLARED",
                    "an exit code the command does not declare",
                ))
            })
        }
        other => panic!("no misbehaviour {other}"),
    };
    spec.exit(Exit::SUCCESS, "Never reached", false, SideEffects::None)
}

/// The child: reftool's application with the misbehaving command, answering into the sandbox.
#[test]
fn misbehaving_child() {
    let Ok(kind) = std::env::var(CHILD_ENV) else { return };
    let dir = std::path::PathBuf::from(std::env::var_os(ANSWER_DIR_ENV).expect("answer dir"));
    let app = reftool::commands::app_of(vec![misbehaving_spec(&kind)], Parts::default())
        .expect("the misbehaving command registers");
    let mut argv: Vec<OsString> = vec!["reftool".into(), "misbehave".into()];
    argv.extend(
        std::env::var("REFTOOL_SUPERVISION_ARGS")
            .unwrap_or_default()
            .split_whitespace()
            .map(OsString::from),
    );
    let finished = app.run(argv);
    std::fs::write(dir.join("stdout"), &finished.stdout).expect("stdout written");
    std::fs::write(dir.join("stderr"), &finished.stderr).expect("stderr written");
    std::fs::write(dir.join("exit"), finished.exit.to_string()).expect("exit written");
}

/// Runs the misbehaving command `kind` with `args` in a child, as reftool in `sandbox`.
fn misbehave(sandbox: &Sandbox, kind: &str, args: &str, test_mode: bool) -> Run {
    let answers = sandbox.path().join("answer");
    std::fs::create_dir_all(&answers).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args(["supervision::misbehaving_child", "--exact", "-q", "--nocapture"])
        .current_dir(sandbox.path())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", sandbox.path())
        .env("REFTOOL_STATE_DIR", sandbox.state_dir())
        .env(CHILD_ENV, kind)
        .env(ANSWER_DIR_ENV, &answers)
        .env("REFTOOL_SUPERVISION_ARGS", args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if test_mode {
        child.env("REFTOOL_TEST_MODE", "1");
    }
    let status = child.status().unwrap();
    assert!(status.success(), "the child test itself failed: {status}");
    let exit: i32 = std::fs::read_to_string(answers.join("exit")).unwrap().parse().unwrap();
    sandbox.finish(Output {
        status: ExitStatus::from_raw(exit << 8),
        stdout: std::fs::read(answers.join("stdout")).unwrap(),
        stderr: std::fs::read(answers.join("stderr")).unwrap(),
    })
}

#[test]
fn a_panic_in_the_work_is_an_internal_error_envelope() {
    let sandbox = Sandbox::new();
    let run = misbehave(&sandbox, "panic", "", false);
    assert_eq!(run.exit, 1);
    assert_eq!(run.code(), "INTERNAL_ERROR");
    assert_eq!(run.json["error"]["detail"], "the work panicked on purpose");
    snapshot!("panic", run);
}

#[test]
fn an_undeclared_exit_code_is_refused_in_test_mode_and_kept_otherwise() {
    let sandbox = Sandbox::new();
    let run = misbehave(&sandbox, "undeclared-exit", "", true);
    assert_eq!(run.exit, 1);
    assert_eq!(run.json["error"]["context"]["check"], "UNDECLARED_EXIT_CODE");
    snapshot!("undeclared_exit", run);
    let run = misbehave(&sandbox, "undeclared-exit", "", false);
    assert_eq!(run.exit, 99, "{}", run.stdout);
}

#[test]
fn work_that_ignores_the_stop_still_ends_at_the_wall_clock_limit() {
    let sandbox = Sandbox::new();
    let started = Instant::now();
    let run = misbehave(&sandbox, "hang", "--timeout 300ms", false);
    let elapsed = started.elapsed();
    assert_eq!(run.exit, 10, "{}", run.stdout);
    assert_eq!(run.code(), "TIMEOUT");
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    snapshot!("timeout_blocked_work", run);
}
