//! Invalid invocations: ARG_ERROR 2 in the validation phase, nothing done.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use crate::snapshot;
use crate::support::Sandbox;

fn arg_error(sandbox: &Sandbox, args: &[&str], code: &str) -> crate::support::Run {
    let run = sandbox.run(args);
    assert_eq!(run.exit, 2, "{args:?}: {}", run.stdout);
    assert_eq!(run.code(), code, "{args:?}");
    assert_eq!(run.json["error"]["phase"], "validation");
    assert_eq!(run.json["error"]["retryable"], false);
    assert!(!run.stderr.is_empty(), "usage goes to stderr");
    assert!(!sandbox.state_dir().exists(), "nothing written for {args:?}");
    run
}

#[test]
fn an_unknown_command_suggests_the_near_one() {
    let sandbox = Sandbox::new();
    let run = arg_error(&sandbox, &["verson"], "UNKNOWN_COMMAND");
    assert!(run.json["error"]["suggestion"].as_str().unwrap().contains("'version'"));
    snapshot!("unknown_command", run);
}

#[test]
fn an_unknown_flag_is_an_arg_error() {
    let sandbox = Sandbox::new();
    let run = arg_error(&sandbox, &["manifest", "--etga", "x"], "UNKNOWN_FLAG");
    assert!(run.json["error"]["suggestion"].as_str().unwrap().contains("--etag"));
    snapshot!("unknown_flag", run);
}

#[test]
fn a_missing_value_is_an_arg_error() {
    let sandbox = Sandbox::new();
    let run = arg_error(&sandbox, &["migrate", "--db"], "INVALID_VALUE");
    snapshot!("missing_value", run);
}

#[test]
fn no_command_is_an_arg_error() {
    let sandbox = Sandbox::new();
    let run = arg_error(&sandbox, &[], "MISSING_COMMAND");
    snapshot!("missing_command", run);
}

#[test]
fn an_invalid_output_value_is_an_arg_error() {
    let sandbox = Sandbox::new();
    arg_error(&sandbox, &["version", "--output", "xml"], "INVALID_VALUE");
}

#[test]
fn malformed_timeouts_are_arg_errors() {
    let sandbox = Sandbox::new();
    for bad in ["-5s", "abc", "1.5s", "", "9999999h"] {
        let run = arg_error(&sandbox, &["version", "--timeout", bad], "INVALID_DURATION");
        if bad == "-5s" {
            snapshot!("invalid_timeout", run);
        }
    }
}

#[test]
fn budget_is_not_a_flag_of_a_command_without_interruption() {
    let sandbox = Sandbox::new();
    arg_error(&sandbox, &["migrate", "--db", "x.db", "--budget", "5s"], "UNKNOWN_FLAG");
}

#[test]
fn idempotency_key_is_not_a_flag_of_a_safe_command() {
    let sandbox = Sandbox::new();
    arg_error(&sandbox, &["version", "--idempotency-key", "k"], "UNKNOWN_FLAG");
}

#[test]
fn an_empty_idempotency_key_is_an_arg_error() {
    let sandbox = Sandbox::new();
    let db = sandbox.fresh_db("app.db");
    let run = sandbox.run(&["migrate", "--db", db.to_str().unwrap(), "--idempotency-key", ""]);
    assert_eq!(run.exit, 2);
    assert_eq!(run.code(), "INVALID_IDEMPOTENCY_KEY");
}

#[test]
fn non_utf8_arguments_are_arg_errors_not_panics() {
    let sandbox = Sandbox::new();
    let bad = OsStr::from_bytes(b"caf\xe9.db");
    for args in [
        vec![OsStr::new("migrate"), OsStr::new("--db"), bad],
        vec![bad],
        vec![OsStr::new("version"), bad],
    ] {
        let mut cmd = sandbox.command(&[]);
        cmd.args(&args);
        let run = sandbox.run_cmd(cmd);
        assert_eq!(run.exit, 2, "{args:?}: {}", run.stdout);
        run.envelope();
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }
    let mut cmd = sandbox.command(&["migrate", "--db"]);
    cmd.arg(bad);
    let run = sandbox.run_cmd(cmd);
    assert_eq!(run.code(), "INVALID_UTF8");
    snapshot!("non_utf8", run);
}

#[test]
fn malformed_environment_values_are_arg_errors() {
    let sandbox = Sandbox::new();
    for (name, value) in [
        ("REFTOOL_PACE_MS", "fast"),
        ("REFTOOL_PACE_MS", "-1"),
        ("REFTOOL_PACE_MS", "99999999"),
        ("REFTOOL_STATE_BUSY_MS", "soon"),
        ("REFTOOL_STATE_DIR", "relative/dir"),
    ] {
        let run = sandbox.run_env(&["version"], &[(name, value)]);
        assert_eq!(run.exit, 2, "{name}={value}");
        assert_eq!(run.code(), "ENV_INVALID", "{name}={value}");
        run.envelope();
    }
    let run = sandbox.run_env(&["version"], &[("REFTOOL_PACE_MS", "fast")]);
    snapshot!("env_invalid", run);
}

#[test]
fn malformed_instance_ids_are_arg_errors() {
    let sandbox = Sandbox::new();
    let long = "x".repeat(65);
    for bad in ["a/b", "../up", ".hidden", "sp ace", long.as_str()] {
        arg_error(&sandbox, &["version", "--instance-id", bad], "INVALID_INSTANCE_ID");
    }
    let run = sandbox.run_env(&["version"], &[("REFTOOL_INSTANCE_ID", "no/slash")]);
    assert_eq!(run.code(), "INVALID_INSTANCE_ID");
    snapshot!("invalid_instance", run);
}
