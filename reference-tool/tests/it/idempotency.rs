//! `--idempotency-key` (REQ-C-007): a repeat answers from the store; another use conflicts.

use crate::snapshot;
use crate::support::Sandbox;

#[test]
fn a_repeat_with_the_same_key_returns_the_original_data_as_noop() {
    let sandbox = Sandbox::new();
    let db = sandbox.fresh_db("app.db");
    let first = sandbox.run(&["migrate", "--db", "app.db", "--idempotency-key", "mig-1"]);
    assert_eq!(first.exit, 0);
    assert_eq!(first.json["data"]["effect"], "updated");
    assert!(first.json["meta"].get("idempotency_hit").is_none());

    // Make the database different: a real re-run would now report other data.
    rusqlite::Connection::open(&db).unwrap().execute_batch("PRAGMA user_version = 7").unwrap();
    let second = sandbox.run(&["migrate", "--db", "app.db", "--idempotency-key", "mig-1"]);
    assert_eq!(second.exit, 0);
    assert_eq!(second.json["meta"]["idempotency_hit"], true);
    let mut expected = first.json["data"].clone();
    expected["effect"] = "noop".into();
    assert_eq!(second.json["data"], expected);
    snapshot!("idempotency_hit", second);
}

#[test]
fn the_same_key_with_other_arguments_conflicts_and_writes_nothing() {
    let sandbox = Sandbox::new();
    sandbox.fresh_db("app.db");
    let other = sandbox.fresh_db("other.db");
    assert_eq!(sandbox.run(&["migrate", "--db", "app.db", "--idempotency-key", "k"]).exit, 0);
    let run = sandbox.run(&["migrate", "--db", "other.db", "--idempotency-key", "k"]);
    assert_eq!(run.exit, 6);
    assert_eq!(run.code(), "IDEMPOTENCY_KEY_REUSED");
    snapshot!("idempotency_conflict", run);
    let version: i64 = rusqlite::Connection::open(&other)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 0);
}

#[test]
fn keys_are_scoped_to_the_instance() {
    let sandbox = Sandbox::new();
    sandbox.fresh_db("app.db");
    sandbox.fresh_db("other.db");
    assert_eq!(sandbox.run(&["migrate", "--db", "app.db", "--idempotency-key", "k"]).exit, 0);
    let run = sandbox.run(&[
        "migrate",
        "--db",
        "other.db",
        "--idempotency-key",
        "k",
        "--instance-id",
        "ci-2",
    ]);
    assert_eq!(run.exit, 0, "{}", run.stdout);
    assert!(run.json["meta"].get("idempotency_hit").is_none());
}

#[test]
fn a_failed_call_is_not_recorded() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["migrate", "--db", "later.db", "--idempotency-key", "k"]);
    assert_eq!(run.exit, 5);
    sandbox.fresh_db("later.db");
    let run = sandbox.run(&["migrate", "--db", "later.db", "--idempotency-key", "k"]);
    assert_eq!(run.exit, 0);
    assert_eq!(run.json["data"]["effect"], "updated");
}
