//! `reftool migrate`: one transaction, an honest TIMEOUT with the database unchanged.

use std::time::{Duration, Instant};

use crate::snapshot;
use crate::support::Sandbox;

fn schema_of(path: &std::path::Path) -> (i64, Vec<String>) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let version = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    let mut stmt = conn.prepare("SELECT name FROM sqlite_master ORDER BY name").unwrap();
    let names = stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    (version, names)
}

#[test]
fn migrate_applies_the_schema_then_is_a_noop() {
    let sandbox = Sandbox::new();
    let db = sandbox.fresh_db("app.db");
    let run = sandbox.run(&["migrate", "--db", "app.db"]);
    assert_eq!(run.exit, 0, "{}", run.stdout);
    assert_eq!(run.json["data"]["effect"], "updated");
    snapshot!("migrate_updated", run);
    let (version, names) = schema_of(&db);
    assert_eq!(version, 1);
    assert!(names.contains(&"orders".to_owned()));

    let again = sandbox.run(&["migrate", "--db", "app.db"]);
    assert_eq!(again.exit, 0);
    assert_eq!(again.json["data"]["effect"], "noop");
    snapshot!("migrate_noop", again);
}

#[test]
fn at_its_wall_clock_limit_migrate_times_out_honestly_and_changes_nothing() {
    let sandbox = Sandbox::new();
    let db = sandbox.fresh_db("app.db");
    let before = schema_of(&db);
    let started = Instant::now();
    let run = sandbox.run_env(
        &["migrate", "--db", "app.db", "--timeout", "600ms"],
        &[("REFTOOL_PACE_MS", "300")],
    );
    let elapsed = started.elapsed();
    assert_eq!(run.exit, 10, "{}", run.stdout);
    assert_eq!(run.code(), "TIMEOUT");
    assert_eq!(run.json["error"]["retryable"], false, "copied from the declared entry 10");
    assert_eq!(run.json["meta"]["timeout_ms"], 600);
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    assert_eq!(schema_of(&db), before, "the transaction was rolled back");
    snapshot!("migrate_timeout", run);

    // The same call with room to finish succeeds.
    let run = sandbox
        .run_env(&["migrate", "--db", "app.db", "--timeout", "30s"], &[("REFTOOL_PACE_MS", "10")]);
    assert_eq!(run.exit, 0);
}

#[test]
fn the_default_timeout_is_reported() {
    let sandbox = Sandbox::new();
    sandbox.fresh_db("app.db");
    let run = sandbox.run(&["migrate", "--db", "app.db"]);
    assert_eq!(run.json["meta"]["timeout_ms"], 60_000);
    let run = sandbox.run(&["version"]);
    assert_eq!(run.json["meta"]["timeout_ms"], 30_000);
    let run = sandbox.run(&["version", "--timeout", "0"]);
    assert_eq!(run.json["meta"]["timeout_ms"], 0);
}

#[test]
fn a_missing_database_is_not_found() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["migrate", "--db", "nowhere.db"]);
    assert_eq!(run.exit, 5);
    assert_eq!(run.code(), "DB_NOT_FOUND");
    assert!(!sandbox.path().join("nowhere.db").exists());
    snapshot!("migrate_not_found", run);
}

#[test]
fn a_file_that_is_not_a_database_is_a_precondition_failure_and_stays_untouched() {
    let sandbox = Sandbox::new();
    let path = sandbox.path().join("notes.db");
    std::fs::write(&path, "these are not pages of a database\n".repeat(100)).unwrap();
    let before = std::fs::read(&path).unwrap();
    let run = sandbox.run(&["migrate", "--db", "notes.db"]);
    assert_eq!(run.exit, 4);
    assert_eq!(run.code(), "DB_INVALID");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    snapshot!("migrate_invalid_db", run);

    let run = sandbox.run(&["migrate", "--db", "."]);
    assert_eq!(run.exit, 4);
}

#[test]
fn without_db_and_without_a_terminal_it_never_prompts() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["migrate"]);
    assert_eq!(run.exit, 4);
    assert_eq!(run.code(), "INPUT_REQUIRED");
    snapshot!("input_required", run);
}

#[test]
fn a_database_locked_by_another_writer_is_unavailable_and_unchanged() {
    let sandbox = Sandbox::new();
    let db = sandbox.fresh_db("app.db");
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE; INSERT INTO existing VALUES (1);").unwrap();
    let run = sandbox.run(&["migrate", "--db", "app.db"]);
    assert_eq!(run.exit, 12, "{}", run.stdout);
    assert_eq!(run.code(), "DB_BUSY");
    assert_eq!(run.json["error"]["retryable"], true);
    snapshot!("migrate_busy", run);
    holder.execute_batch("ROLLBACK").unwrap();
    assert_eq!(schema_of(&db).0, 0);
}

#[test]
fn a_newer_schema_is_left_alone_with_a_warning() {
    let sandbox = Sandbox::new();
    let db = sandbox.fresh_db("app.db");
    rusqlite::Connection::open(&db).unwrap().execute_batch("PRAGMA user_version = 7").unwrap();
    let run = sandbox.run(&["migrate", "--db", "app.db"]);
    assert_eq!(run.exit, 0);
    assert_eq!(run.json["data"]["effect"], "noop");
    assert_eq!(run.json["warnings"][0]["code"], "DB_SCHEMA_NEWER");
    snapshot!("migrate_warning", run);
    assert_eq!(schema_of(&db).0, 7);
}
