//! Hostile `--db` arguments, through the real binary: names SQLite would read as something
//! else than a file (`:memory:`, `file:` URIs, the empty name), and a file that is no SQLite
//! database, for every command that takes `--db`.

use std::path::Path;

use rusqlite::OpenFlags;

use crate::budget::{assert_incomplete, continue_loop, paced};
use crate::support::Sandbox;

/// Rows in the import fixture: 25 chunks of 100.
const ROWS: u64 = 2500;

/// The rows of `table` in the database file at `path`, opened as a plain file (no URI).
fn table_rows(path: &Path, table: &str) -> i64 {
    let conn = rusqlite::Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap_or_else(|e| panic!("{} is no database: {e}", path.display()));
    conn.query_row(&format!("SELECT count(*) FROM \"{table}\""), [], |r| r.get(0)).unwrap()
}

#[test]
fn special_sqlite_names_are_plain_files_and_an_empty_db_is_refused() {
    let sandbox = Sandbox::new();
    sandbox.csv("rows.csv", ROWS);
    for name in [":memory:", "file::memory:", "file:x.db?mode=memory", "file:y.db"] {
        let run = sandbox.run(&["import", "rows.csv", "--db", name]);
        assert_eq!(run.exit, 0, "--db {name}: {}", run.stdout);
        assert_eq!(run.envelope()["data"]["rows"], ROWS);
        let file = sandbox.path().join(name);
        assert!(file.is_file(), "--db {name} is the file ./{name}");
        assert_eq!(table_rows(&file, "rows"), ROWS as i64, "the rows are in ./{name}");
    }
    for uri_target in ["x.db", "y.db"] {
        assert!(!sandbox.path().join(uri_target).exists(), "no name was read as a URI");
    }
    let migrate_target = sandbox.path().join(":memory:");
    let run = sandbox.run(&["migrate", "--db", ":memory:"]);
    assert_eq!(run.exit, 0, "migrate --db :memory: migrates ./:memory: {}", run.stdout);
    let version: i64 =
        rusqlite::Connection::open_with_flags(&migrate_target, OpenFlags::SQLITE_OPEN_READ_ONLY)
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
    assert_eq!(version, 1);

    for args in [
        vec!["import", "rows.csv", "--db", ""],
        vec!["migrate", "--db", ""],
        vec!["drop-table", "--db", "", "--table", "rows", "--yes"],
    ] {
        let run = sandbox.run(&args);
        assert_eq!((run.exit, run.code()), (2, "INVALID_DB_PATH"), "{args:?}: {}", run.stdout);
        assert_eq!(run.envelope()["error"]["phase"], "validation");
    }
}

#[test]
fn a_budgeted_import_into_memory_named_file_continues_to_its_end() {
    let sandbox = Sandbox::new();
    sandbox.csv("rows.csv", ROWS);
    let first =
        paced(&sandbox, &["import", "rows.csv", "--db", ":memory:", "--budget", "300ms"], &[]);
    assert_incomplete(&first, "paused");
    let runs = continue_loop(&sandbox, &first, &[]);
    assert!(runs.len() < 20, "about 1.3 s of work in 300 ms calls took {} calls", runs.len());
    for run in &runs {
        let done = run.json["data"]["progress"]["done"].as_u64().unwrap_or(0);
        assert!(done <= ROWS, "progress {done} beyond the file's {ROWS} rows: {}", run.stdout);
    }
    let last = runs.last().unwrap();
    assert_eq!(last.exit, 0, "{}", last.stdout);
    assert_eq!(last.json["data"]["rows"], ROWS);
    assert_eq!(table_rows(&sandbox.path().join(":memory:"), "rows"), ROWS as i64);
}

#[test]
fn a_db_that_is_no_sqlite_database_is_a_precondition_failure_for_every_command() {
    let sandbox = Sandbox::new();
    sandbox.csv("rows.csv", 10);
    let text = "just some notes, not a database\n".repeat(100);
    std::fs::write(sandbox.path().join("notes.txt"), &text).unwrap();
    for args in [
        vec!["import", "rows.csv", "--db", "notes.txt"],
        vec!["migrate", "--db", "notes.txt"],
        vec!["drop-table", "--db", "notes.txt", "--table", "rows", "--yes"],
        vec!["drop-table", "--db", "notes.txt", "--table", "rows", "--dry-run"],
    ] {
        let run = sandbox.run(&args);
        assert_eq!((run.exit, run.code()), (4, "DB_INVALID"), "{args:?}: {}", run.stdout);
        run.envelope();
        assert_eq!(std::fs::read_to_string(sandbox.path().join("notes.txt")).unwrap(), text);
    }
}
