//! `reftool drop-table`: the destructive command. A preview changes nothing, an unconfirmed
//! call refuses and changes nothing, a confirmed one drops the table in one transaction, and a
//! repeat with the same idempotency key does nothing again. Real SQLite files, the real binary,
//! a real pseudo-terminal for the person who answers the prompt.

use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use crate::support::{Run, Sandbox};

/// A database `shop.db` with a table `orders` of `rows` rows and a table `keep` of one row.
fn shop(sandbox: &Sandbox, rows: i64) -> std::path::PathBuf {
    let path = sandbox.path().join("shop.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("CREATE TABLE orders (id INTEGER PRIMARY KEY, cents INTEGER); CREATE TABLE keep (x); INSERT INTO keep VALUES (1);")
        .unwrap();
    for id in 1..=rows {
        conn.execute("INSERT INTO orders (id, cents) VALUES (?1, ?2)", [id, id * 100]).unwrap();
    }
    path
}

/// The tables of a database with their row counts, sorted.
fn tables(path: &Path) -> Vec<(String, i64)> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let names: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    names
        .into_iter()
        .map(|name| {
            let n = conn.query_row(&format!("SELECT count(*) FROM \"{name}\""), [], |r| r.get(0));
            (name, n.unwrap())
        })
        .collect()
}

const DROP: &[&str] = &["drop-table", "--db", "shop.db", "--table", "orders"];

fn with(extra: &[&'static str]) -> Vec<&'static str> {
    DROP.iter().copied().chain(extra.iter().copied()).collect()
}

#[test]
fn the_manifest_declares_it_destructive_with_its_preview_and_confirmation_flags() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["manifest"]);
    let entry = &run.envelope()["data"]["commands"]["drop-table"];
    assert_eq!(entry["danger_level"], "destructive");
    for flag in ["db", "table", "dry-run", "confirm-destructive", "yes", "idempotency-key"] {
        assert!(entry["flags"][flag].is_object(), "no --{flag}: {entry}");
    }
    assert!(entry.get("interruption").is_none() && entry["flags"].get("budget").is_none());
}

#[test]
fn dry_run_previews_what_would_go_and_changes_nothing() {
    let sandbox = Sandbox::new();
    let db = shop(&sandbox, 7);
    let before = tables(&db);
    let run = sandbox.run(&with(&["--dry-run"]));
    assert_eq!(run.exit, 0, "{}", run.stdout);
    let data = &run.envelope()["data"];
    assert_eq!(data["dry_run"], true);
    assert_eq!(data["effect"], "noop");
    assert_eq!(data["would_delete"]["table"], "orders");
    assert_eq!(data["would_delete"]["rows"], 7);
    assert_eq!(tables(&db), before);
}

#[test]
fn without_confirmation_it_refuses_and_changes_nothing() {
    let sandbox = Sandbox::new();
    let db = shop(&sandbox, 3);
    let before = tables(&db);
    // stdin closed (the support default), and also an open pipe nobody writes: no prompt.
    let closed = sandbox.run(DROP);
    let mut cmd = sandbox.command(DROP);
    cmd.stdin(Stdio::piped());
    let child = cmd.spawn().unwrap();
    let open = sandbox.finish(child.wait_with_output().unwrap());
    for run in [&closed, &open] {
        assert_eq!(run.exit, 2, "{}", run.stdout);
        assert_eq!(run.code(), "CONFIRMATION_REQUIRED");
        let error = &run.envelope()["error"];
        assert_eq!(error["phase"], "validation");
        assert_eq!(error["context"]["danger_level"], "destructive");
        assert_eq!(error["context"]["would_affect"][0]["table"], "orders");
        assert_eq!(error["context"]["would_affect"][0]["rows"], 3);
        assert!(!run.stderr.contains("[y/N]"), "no prompt off a terminal: {}", run.stderr);
    }
    assert_eq!(tables(&db), before);
}

#[test]
fn confirmed_it_drops_the_table_and_only_that_table() {
    for confirm in ["--confirm-destructive", "--yes"] {
        let sandbox = Sandbox::new();
        let db = shop(&sandbox, 5);
        let run = sandbox.run(&with(&[confirm]));
        assert_eq!(run.exit, 0, "{confirm}: {}", run.stdout);
        let envelope = run.envelope();
        assert_eq!(envelope["data"]["effect"], "deleted");
        assert_eq!(envelope["data"]["rows_deleted"], 5);
        assert_eq!(envelope["meta"]["confirmed"], true);
        assert_eq!(tables(&db), vec![("keep".to_owned(), 1)], "{confirm}");
    }
}

#[test]
fn a_repeat_with_the_same_key_does_nothing_again() {
    let sandbox = Sandbox::new();
    let db = shop(&sandbox, 4);
    let first = sandbox.run(&with(&["--yes", "--idempotency-key", "drop-1"]));
    assert_eq!(first.exit, 0, "{}", first.stdout);
    // A new `orders` appears; the replay must answer from the record, not drop it.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE orders (id INTEGER); INSERT INTO orders VALUES (9);")
        .unwrap();
    let again = sandbox.run(&with(&["--yes", "--idempotency-key", "drop-1"]));
    assert_eq!(again.exit, 0, "{}", again.stdout);
    let envelope = again.envelope();
    assert_eq!(envelope["data"]["effect"], "noop");
    assert_eq!(envelope["data"]["rows_deleted"], 4, "the original data");
    assert_eq!(envelope["meta"]["idempotency_hit"], true);
    assert!(tables(&db).contains(&("orders".to_owned(), 1)), "nothing dropped again");
    // Without the key the same call really drops the new table.
    let fresh = sandbox.run(&with(&["--yes"]));
    assert_eq!(fresh.envelope()["data"]["effect"], "deleted");
    assert_eq!(tables(&db), vec![("keep".to_owned(), 1)]);
}

#[test]
fn a_missing_table_or_database_is_not_found_and_creates_nothing() {
    let sandbox = Sandbox::new();
    let db = shop(&sandbox, 1);
    for extra in [&["--yes"][..], &["--dry-run"], &[]] {
        let mut args = vec!["drop-table", "--db", "shop.db", "--table", "nowhere"];
        args.extend_from_slice(extra);
        let run: Run = sandbox.run(&args);
        assert_eq!(run.exit, 5, "{extra:?}: {}", run.stdout);
        assert_eq!(run.code(), "TABLE_NOT_FOUND");
        assert_eq!(run.envelope()["error"]["context"]["tables"][1], "orders");
    }
    let run = sandbox.run(&["drop-table", "--db", "gone.db", "--table", "orders", "--yes"]);
    assert_eq!(run.exit, 5);
    assert_eq!(run.code(), "DB_NOT_FOUND");
    run.envelope();
    assert!(!sandbox.path().join("gone.db").exists());
    assert_eq!(tables(&db).len(), 2);
}

#[test]
fn bad_arguments_are_arg_errors_before_anything_is_touched() {
    let sandbox = Sandbox::new();
    let db = shop(&sandbox, 2);
    let before = tables(&db);
    let cases: &[&[&str]] = &[
        &["drop-table", "--db", "shop.db"],
        &["drop-table", "--table", "orders", "--yes"],
        &["drop-table", "--db", "shop.db", "--table", "orders; DROP TABLE keep", "--yes"],
        &["drop-table", "--db", "shop.db", "--table", "sqlite_master", "--yes"],
        &["drop-table", "--db", "shop.db", "--table", "9lives", "--yes"],
        &["drop-table", "--db", "shop.db", "--table", "orders", "--yes", "--no-such-flag"],
    ];
    for args in cases {
        let run = sandbox.run(args);
        assert_eq!(run.exit, 2, "{args:?}: {}", run.stdout);
        assert_eq!(run.envelope()["error"]["phase"], "validation", "{args:?}");
    }
    assert_eq!(tables(&db), before);
}

/// Runs a drop with stdin and stderr on a real pseudo-terminal, `answer` typed in advance;
/// stdout stays a pipe (JSON).
fn at_a_terminal(sandbox: &Sandbox, answer: &str) -> (Run, String) {
    let pty = nix::pty::openpty(None, None).unwrap();
    let mut master = std::fs::File::from(pty.master);
    master.write_all(answer.as_bytes()).unwrap();
    let mut cmd = sandbox.command(DROP);
    let slave = std::fs::File::from(pty.slave);
    cmd.stdin(Stdio::from(slave.try_clone().unwrap())).stderr(Stdio::from(slave));
    let child = cmd.spawn().unwrap();
    drop(cmd);
    let output = child.wait_with_output().unwrap();
    // The prompt may arrive in several writes (stderr is unbuffered): read until the terminal
    // is drained, which ends in EIO once the child and every copy of the slave are gone.
    let mut screen = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = std::io::Read::read(&mut master, &mut buf) {
        screen.extend_from_slice(&buf[..n]);
    }
    (sandbox.finish(output), String::from_utf8_lossy(&screen).into_owned())
}

#[test]
fn a_person_at_a_terminal_confirms_by_answering_the_prompt() {
    let sandbox = Sandbox::new();
    let db = shop(&sandbox, 2);
    let (run, screen) = at_a_terminal(&sandbox, "n\n");
    assert_eq!(run.exit, 2, "{}", run.stdout);
    assert_eq!(run.code(), "CONFIRMATION_REQUIRED");
    assert!(screen.contains("Drop table `orders` (2 rows)"), "{screen:?}");
    assert_eq!(tables(&db).len(), 2);

    let (run, _) = at_a_terminal(&sandbox, "y\n");
    assert_eq!(run.exit, 0, "{}", run.stdout);
    assert_eq!(run.envelope()["data"]["effect"], "deleted");
    assert_eq!(tables(&db), vec![("keep".to_owned(), 1)]);
}

#[test]
fn a_drop_stopped_by_its_timeout_rolls_back_and_leaves_the_table_whole() {
    let sandbox = Sandbox::new();
    let db = shop(&sandbox, 6);
    let before = tables(&db);
    // The pace sleeps after the DROP and before the commit: the limit lands in between.
    let run =
        sandbox.run_env(&with(&["--yes", "--timeout", "300ms"]), &[("REFTOOL_PACE_MS", "3000")]);
    assert_eq!(run.exit, 10, "{}", run.stdout);
    assert_eq!(run.code(), "TIMEOUT");
    run.envelope();
    assert_eq!(tables(&db), before, "the drop was rolled back");
}
