//! The plain envelope kinds: success, the framework's internal errors.

use crate::snapshot;
use crate::support::Sandbox;

#[test]
fn version_is_a_success_envelope() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["version"]);
    assert_eq!(run.exit, 0);
    assert_eq!(run.json["data"]["version"], env!("CARGO_PKG_VERSION"));
    snapshot!("version", run);
}

#[test]
fn dash_dash_version_in_json_mode_is_the_same_envelope() {
    let sandbox = Sandbox::new();
    let flag = sandbox.run(&["--version"]);
    let command = sandbox.run(&["version"]);
    assert_eq!(flag.exit, 0);
    assert_eq!(flag.envelope()["data"], command.envelope()["data"]);
}

#[test]
fn a_panic_in_the_work_is_a_general_error_envelope_and_stderr_gets_the_report() {
    let sandbox = Sandbox::new();
    let run = sandbox
        .run_env(&["version"], &[("REFTOOL_TEST_MODE", "1"), ("REFTOOL_TEST_FAULT", "panic")]);
    assert_eq!(run.exit, 1);
    assert_eq!(run.code(), "INTERNAL_ERROR");
    assert!(run.stderr.contains("internal error"), "{}", run.stderr);
    snapshot!("panic", run);
}

#[test]
fn faults_are_ignored_outside_test_mode() {
    let sandbox = Sandbox::new();
    let run = sandbox.run_env(&["version"], &[("REFTOOL_TEST_FAULT", "panic")]);
    assert_eq!(run.exit, 0);
}

#[test]
fn an_undeclared_exit_code_is_refused_in_test_mode() {
    let sandbox = Sandbox::new();
    let run = sandbox.run_env(
        &["version"],
        &[("REFTOOL_TEST_MODE", "1"), ("REFTOOL_TEST_FAULT", "undeclared-exit")],
    );
    assert_eq!(run.exit, 1);
    assert_eq!(run.json["error"]["context"]["check"], "UNDECLARED_EXIT_CODE");
    snapshot!("undeclared_exit", run);
}

#[test]
fn work_that_ignores_the_stop_still_ends_at_the_wall_clock_limit() {
    let sandbox = Sandbox::new();
    let started = std::time::Instant::now();
    let run = sandbox.run_env(
        &["version", "--timeout", "300ms"],
        &[("REFTOOL_TEST_MODE", "1"), ("REFTOOL_TEST_FAULT", "hang")],
    );
    let elapsed = started.elapsed();
    assert_eq!(run.exit, 10, "{}", run.stdout);
    assert_eq!(run.code(), "TIMEOUT");
    assert!(elapsed < std::time::Duration::from_secs(10), "{elapsed:?}");
    snapshot!("timeout_blocked_work", run);
}
