//! Hostile input to the job runtime: job ids, budgets and keys that must be refused with a
//! clear ARG_ERROR, touching nothing outside the state directory.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use crate::support::Sandbox;

/// Every path under `dir`, sorted.
fn tree(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            out.push(e.path());
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                out.extend(tree(&e.path()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn hostile_job_ids_are_argument_errors_and_touch_nothing() {
    let sandbox = Sandbox::new();
    let outside = sandbox.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("passwd"), "keep me").unwrap();
    let before = tree(sandbox.path());
    let huge = "a".repeat(100_000);
    let hostile: Vec<&OsStr> = vec![
        OsStr::new("../../etc/passwd"),
        OsStr::new("../outside/passwd"),
        OsStr::new(""),
        OsStr::new(&huge),
        OsStr::from_bytes(b"job_\xff\xfe"),
        OsStr::new("job_0123456789ABCDEF0123456789ABCDEF"),
        OsStr::new("job_0123456789abcdef0123456789abcdef/.."),
    ];
    for verb in ["wait", "status", "cancel"] {
        for id in &hostile {
            let mut cmd = sandbox.command(&["job", verb]);
            cmd.arg(id);
            let run = sandbox.run_cmd(cmd);
            assert_eq!(
                run.exit,
                2,
                "job {verb} {:?}: {}",
                id.to_string_lossy().get(..40),
                run.stdout
            );
            run.envelope();
            assert!(run.stdout.len() < 4096, "the answer echoes a bounded part of the id");
        }
    }
    let after: Vec<_> =
        tree(sandbox.path()).into_iter().filter(|p| !p.starts_with(sandbox.state_dir())).collect();
    assert_eq!(before, after, "nothing outside the state dir changed");
    assert_eq!(std::fs::read_to_string(outside.join("passwd")).unwrap(), "keep me");
}

#[test]
fn hostile_budgets_are_argument_errors() {
    let sandbox = Sandbox::new();
    sandbox.csv("small.csv", 5);
    for budget in ["-1", "-5s", "soon", "1e3", "", "99999999999999999999", "5 s", "1.5s"] {
        let run = sandbox.run(&["analyze", "small.csv", "--budget", budget]);
        assert_eq!(run.exit, 2, "--budget {budget:?}: {}", run.stdout);
        assert_eq!(run.envelope()["error"]["code"], "INVALID_DURATION");
        assert_eq!(run.json["error"]["phase"], "validation");
    }
    // The job wait budget too.
    let run =
        sandbox.run(&["job", "wait", "job_0123456789abcdef0123456789abcdef", "--budget", "-1"]);
    assert_eq!(run.exit, 2);
    // A malformed variable is the environment's: a warning, the default applies.
    for env in ["-1", "soon", "99999999999999999999"] {
        let run = sandbox.run_env(&["analyze", "small.csv"], &[("AGENT_CALL_BUDGET_MS", env)]);
        assert_eq!(run.exit, 0, "{env:?}");
        assert_eq!(run.json["meta"]["budget_ms"], 30_000);
        assert_eq!(run.json["warnings"][0]["code"], "BUDGET_ENV_INVALID");
    }
    let run = sandbox.run_env(&["analyze", "small.csv"], &[("REFTOOL_IDLE_TIMEOUT_MS", "never")]);
    assert_eq!((run.exit, run.code()), (2, "ENV_INVALID"));
    let run = sandbox.run_env(&["analyze", "small.csv"], &[("REFTOOL_MAX_LIFETIME_MS", "0")]);
    assert_eq!((run.exit, run.code()), (2, "ENV_INVALID"));
}

#[test]
fn a_key_of_100_kb_is_refused_and_nothing_is_written() {
    let sandbox = Sandbox::new();
    sandbox.csv("rows.csv", 5);
    let key = "k".repeat(100_000);
    let run = sandbox.run(&["import", "rows.csv", "--db", "r.db", "--idempotency-key", &key]);
    assert_eq!(run.exit, 2);
    assert_eq!(run.envelope()["error"]["code"], "INVALID_IDEMPOTENCY_KEY");
    assert!(!sandbox.path().join("r.db").exists(), "the target was not created");
    assert!(!sandbox.state_dir().join("jobs").exists(), "no job was created");
}
