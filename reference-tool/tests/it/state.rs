//! The state directory and database: created on demand, and every way it can be unusable.

use crate::snapshot;
use crate::support::Sandbox;

fn keyed_migrate(sandbox: &Sandbox, env: &[(&str, &str)]) -> crate::support::Run {
    sandbox.fresh_db("app.db");
    sandbox.run_env(&["migrate", "--db", "app.db", "--idempotency-key", "k"], env)
}

#[test]
fn the_state_directory_is_created_with_a_wal_database() {
    let sandbox = Sandbox::new();
    let nested = sandbox.path().join("deep/er/state");
    let run = keyed_migrate(&sandbox, &[("REFTOOL_STATE_DIR", nested.to_str().unwrap())]);
    assert_eq!(run.exit, 0, "{}", run.stdout);
    let conn = rusqlite::Connection::open(nested.join("state.db")).unwrap();
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn xdg_state_home_then_home_locate_the_state() {
    let sandbox = Sandbox::new();
    sandbox.fresh_db("app.db");
    let mut cmd = sandbox.command(&["migrate", "--db", "app.db", "--idempotency-key", "x"]);
    cmd.env_remove("REFTOOL_STATE_DIR").env("XDG_STATE_HOME", sandbox.path().join("xdg"));
    assert_eq!(sandbox.run_cmd(cmd).exit, 0);
    assert!(sandbox.path().join("xdg/reftool/state.db").exists());

    let mut cmd = sandbox.command(&["migrate", "--db", "app.db", "--idempotency-key", "y"]);
    cmd.env_remove("REFTOOL_STATE_DIR");
    assert_eq!(sandbox.run_cmd(cmd).exit, 0);
    assert!(sandbox.path().join(".local/state/reftool/state.db").exists());
}

#[test]
fn an_unusable_state_directory_is_a_precondition_failure() {
    let sandbox = Sandbox::new();
    let file = sandbox.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let inside_a_file = file.join("state");
    let run = keyed_migrate(&sandbox, &[("REFTOOL_STATE_DIR", inside_a_file.to_str().unwrap())]);
    assert_eq!(run.exit, 4, "{}", run.stdout);
    assert_eq!(run.code(), "STATE_DIR_UNUSABLE");
    snapshot!("state_dir_unusable", run);
}

#[test]
fn a_corrupt_state_database_is_reported_and_left_alone() {
    let sandbox = Sandbox::new();
    std::fs::create_dir_all(sandbox.state_dir()).unwrap();
    let path = sandbox.state_dir().join("state.db");
    std::fs::write(&path, "garbage, not a database\n".repeat(200)).unwrap();
    let run = keyed_migrate(&sandbox, &[]);
    assert_eq!(run.exit, 4, "{}", run.stdout);
    assert_eq!(run.code(), "STATE_DB_CORRUPT");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "garbage, not a database\n".repeat(200));
    snapshot!("state_db_corrupt", run);
}

#[test]
fn a_locked_state_database_waits_then_is_unavailable_and_nothing_is_done() {
    let sandbox = Sandbox::new();
    // Create the state database, then hold its write lock.
    assert_eq!(keyed_migrate(&sandbox, &[]).exit, 0);
    let db = sandbox.path().join("app.db");
    rusqlite::Connection::open(&db).unwrap().execute_batch("PRAGMA user_version = 0").unwrap();
    let holder = rusqlite::Connection::open(sandbox.state_dir().join("state.db")).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let started = std::time::Instant::now();
    let run = sandbox.run_env(
        &["migrate", "--db", "app.db", "--idempotency-key", "other"],
        &[("REFTOOL_STATE_BUSY_MS", "300")],
    );
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    assert_eq!(run.exit, 12, "{}", run.stdout);
    assert_eq!(run.code(), "STATE_BUSY");
    assert_eq!(run.json["error"]["retryable"], true);
    snapshot!("state_busy", run);
    holder.execute_batch("ROLLBACK").unwrap();
    let version: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 0, "the work did not run");
}

#[test]
fn concurrent_invocations_queue_on_the_state_database() {
    let sandbox = Sandbox::new();
    let children: Vec<_> = (0..4)
        .map(|i| {
            let name = format!("db{i}.db");
            sandbox.fresh_db(&name);
            let key = format!("key-{i}");
            sandbox.command(&["migrate", "--db", &name, "--idempotency-key", &key]).spawn().unwrap()
        })
        .collect();
    for child in children {
        let run = sandbox.finish(child.wait_with_output().unwrap());
        assert_eq!(run.exit, 0, "{}", run.stdout);
    }
}
