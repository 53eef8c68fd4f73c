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

/// Rows of `rows` in the database `path` (None when it has no such table or no file).
fn rows_in(path: &std::path::Path) -> Option<i64> {
    if !path.exists() {
        return None;
    }
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row("SELECT count(*) FROM rows", [], |r| r.get(0))
        .ok()
}

/// The first use of a key reserves it (REQ-C-007): while the call that used it waits paused,
/// a call with other arguments and the same key is refused, and the paused call's own
/// continuation goes on to its end; after it the key still belongs to it.
#[test]
fn a_key_in_use_by_a_paused_import_refuses_other_arguments_and_its_continuation_ends() {
    use crate::budget::{assert_incomplete, continue_loop, paced};
    let sandbox = Sandbox::new();
    sandbox.csv("a.csv", 2500);
    sandbox.csv("b.csv", 300);
    let first = paced(
        &sandbox,
        &["import", "a.csv", "--db", "x.db", "--budget", "300ms", "--idempotency-key", "K"],
        &[],
    );
    assert_incomplete(&first, "paused");

    let other = sandbox.run(&["import", "b.csv", "--db", "y.db", "--idempotency-key", "K"]);
    assert_eq!((other.exit, other.code()), (6, "IDEMPOTENCY_KEY_REUSED"), "{}", other.stdout);
    other.envelope();
    assert_eq!(other.json["error"]["context"]["in_progress"], true, "{}", other.stdout);
    assert_eq!(rows_in(&sandbox.path().join("y.db")), None, "the refused call wrote nothing");

    let runs = continue_loop(&sandbox, &first, &[]);
    let last = runs.last().unwrap();
    assert_eq!(last.exit, 0, "the first call's continuation keeps working: {}", last.stdout);
    assert_eq!(last.json["data"]["rows"], 2500);
    assert_eq!(rows_in(&sandbox.path().join("x.db")), Some(2500));

    let after = sandbox.run(&["import", "b.csv", "--db", "y.db", "--idempotency-key", "K"]);
    assert_eq!((after.exit, after.code()), (6, "IDEMPOTENCY_KEY_REUSED"), "{}", after.stdout);
    assert_eq!(after.json["error"]["context"]["in_progress"], false, "{}", after.stdout);
    let repeat = sandbox.run(&["import", "a.csv", "--db", "x.db", "--idempotency-key", "K"]);
    assert_eq!(repeat.exit, 0, "{}", repeat.stdout);
    assert_eq!(repeat.json["data"]["effect"], "noop");
}

/// Eight imports with one key and eight different databases, started at once: exactly one
/// does the work; the seven others are refused with nothing written, and none crashes.
#[test]
fn eight_imports_racing_with_one_key_run_once() {
    let sandbox = Sandbox::new();
    sandbox.csv("a.csv", 300);
    let runs = race_with_one_key(&sandbox, "K");
    let ran: Vec<usize> = (0..8).filter(|i| runs[*i].exit == 0).collect();
    assert_eq!(ran.len(), 1, "exactly one call ran: {:?}", exits(&runs));
    for (i, run) in runs.iter().enumerate() {
        run.envelope();
        if i != ran[0] {
            assert_eq!((run.exit, run.code()), (6, "IDEMPOTENCY_KEY_REUSED"), "{}", run.stdout);
            assert_eq!(rows_in(&sandbox.path().join(format!("y{i}.db"))), None);
        }
    }
}

/// Eight `import a.csv --db y<i>.db --idempotency-key <key>` started together; their answers.
pub fn race_with_one_key(sandbox: &Sandbox, key: &str) -> Vec<crate::support::Run> {
    let children: Vec<_> = (0..8)
        .map(|i| {
            let db = format!("y{i}.db");
            sandbox
                .command(&["import", "a.csv", "--db", &db, "--idempotency-key", key])
                .spawn()
                .unwrap()
        })
        .collect();
    children.into_iter().map(|c| sandbox.finish(c.wait_with_output().unwrap())).collect()
}

/// The exits of `runs`, for messages.
pub fn exits(runs: &[crate::support::Run]) -> Vec<(i32, String)> {
    runs.iter().map(|r| (r.exit, r.code().to_owned())).collect()
}
