//! Tests of checkpoints: real files, real SQLite, a real writer process killed with SIGKILL.

use super::*;
use std::process::Command;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct State {
    offset: u64,
}

fn job() -> JobId {
    JobId::generate().unwrap()
}

#[test]
fn file_checkpoint_round_trip_and_fingerprint_change() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cp").join("id.json");
    let cp = FileCheckpoints::new(path.clone(), "fp-1", job());
    let fresh: Restored<State> = cp.restore().unwrap();
    assert_eq!((fresh.state, fresh.done, fresh.warnings.len()), (None, 0, 0));
    cp.save(&State { offset: 40 }, 40).unwrap();
    let back: Restored<State> = cp.restore().unwrap();
    assert_eq!((back.state, back.done), (Some(State { offset: 40 }), 40));
    // The input changed: discarded with a warning, and gone.
    let other = FileCheckpoints::new(path.clone(), "fp-2", job());
    let changed: Restored<State> = other.restore().unwrap();
    assert_eq!(changed.state, None);
    assert_eq!(changed.warnings.len(), 1);
    assert_eq!(changed.warnings[0].code, CHECKPOINT_DISCARDED);
    assert!(!path.exists());
    // Garbage is discarded too.
    std::fs::write(&path, "{not json").unwrap();
    let garbage: Restored<State> = cp.restore().unwrap();
    assert_eq!((garbage.state, garbage.warnings.len()), (None, 1));
    cp.remove().unwrap();
    cp.remove().unwrap();
}

#[test]
fn a_stop_takes_effect_only_after_the_save() {
    let dir = tempfile::tempdir().unwrap();
    let cp = FileCheckpoints::new(dir.path().join("x.json"), "fp", job());
    let mut stop = StopControl::new().with_budget_deadline(Some(Instant::now()));
    assert_eq!(
        cp.checkpoint(&State { offset: 7 }, 7, &mut stop).unwrap(),
        Flow::Stop(StopReason::Budget)
    );
    let saved: Restored<State> = cp.restore().unwrap();
    assert_eq!(saved.state, Some(State { offset: 7 }), "saved before stopping");
    let mut go = StopControl::new();
    assert_eq!(cp.checkpoint(&State { offset: 8 }, 8, &mut go).unwrap(), Flow::Continue);
}

#[test]
fn file_fingerprint_changes_with_the_content() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("in.csv");
    std::fs::write(&f, "a\n").unwrap();
    let one = file_fingerprint(&f).unwrap();
    assert_eq!(one, file_fingerprint(&f).unwrap());
    std::fs::write(&f, "a\nb\n").unwrap();
    assert_ne!(one, file_fingerprint(&f).unwrap());
}

#[test]
fn sqlite_checkpoint_commits_with_the_units_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let mut conn = Connection::open(dir.path().join("t.db")).unwrap();
    conn.execute_batch("CREATE TABLE units (unit INTEGER NOT NULL)").unwrap();
    let id = IdentityKey("k".repeat(64));
    let cp = SqliteCheckpoints::new(id.clone(), "fp", job());
    let none: Restored<State> = cp.restore(&conn, |_| false).unwrap();
    assert_eq!(none.state, None);
    // A transaction rolled back takes its checkpoint with it.
    {
        let tx = conn.transaction().unwrap();
        tx.execute("INSERT INTO units VALUES (1)", []).unwrap();
        cp.save_in(&tx, &State { offset: 1 }, 1).unwrap();
        tx.rollback().unwrap();
    }
    let still_none: Restored<State> = cp.restore(&conn, |_| false).unwrap();
    assert_eq!(still_none.state, None);
    let tx = conn.transaction().unwrap();
    tx.execute("INSERT INTO units VALUES (1)", []).unwrap();
    assert_eq!(
        cp.commit_with(tx, &State { offset: 1 }, 1, &mut StopControl::new()).unwrap(),
        Flow::Continue
    );
    let back: Restored<State> = cp.restore(&conn, |_| false).unwrap();
    assert_eq!((back.state, back.done), (Some(State { offset: 1 }), 1));
    // Written by a cancelled job: void, silently.
    let void: Restored<State> = cp.restore(&conn, |_| true).unwrap();
    assert_eq!((void.state, void.warnings.len()), (None, 0));
    let gone: Restored<State> = cp.restore(&conn, |_| false).unwrap();
    assert_eq!(gone.state, None);
    // Fingerprint mismatch: warning.
    let tx = conn.transaction().unwrap();
    cp.save_in(&tx, &State { offset: 2 }, 2).unwrap();
    tx.commit().unwrap();
    let other = SqliteCheckpoints::new(id, "fp-changed", job());
    let changed: Restored<State> = other.restore(&conn, |_| false).unwrap();
    assert_eq!(changed.warnings[0].code, CHECKPOINT_DISCARDED);
}

const CHILD_DB_ENV: &str = "REFTOOL_TEST_CHECKPOINT_CHILD_DB";
const UNITS: u64 = 3000;
const BATCH: u64 = 7;

/// The writer process of `kill_9_at_any_instant_neither_loses_nor_repeats_a_unit`: does nothing
/// unless started by it.
#[test]
fn writer_child_process() {
    let Some(db) = std::env::var_os(CHILD_DB_ENV) else { return };
    let mut conn = Connection::open(db).unwrap();
    conn.busy_timeout(Duration::from_secs(10)).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.execute_batch("CREATE TABLE IF NOT EXISTS units (unit INTEGER NOT NULL)").unwrap();
    let cp = SqliteCheckpoints::new(IdentityKey("c".repeat(64)), "fp", job());
    let restored: Restored<State> = cp.restore(&conn, |_| false).unwrap();
    if restored.completed.is_some() {
        return;
    }
    let mut next = restored.state.map_or(0, |s| s.offset);
    let mut stop = StopControl::new();
    while next < UNITS {
        let tx = conn.transaction().unwrap();
        let end = (next + BATCH).min(UNITS);
        for unit in next..end {
            tx.execute("INSERT INTO units VALUES (?1)", [unit]).unwrap();
        }
        next = end;
        if next == UNITS {
            cp.finish_in(&tx, &serde_json::json!({"rows": UNITS}), next).unwrap();
            tx.commit().unwrap();
            break;
        }
        assert_eq!(
            cp.commit_with(tx, &State { offset: next }, next, &mut stop).unwrap(),
            Flow::Continue
        );
        // Paced so that a run lasts about a second and the kills land mid-work.
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn kill_9_at_any_instant_neither_loses_nor_repeats_a_unit() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("target.db");
    let exe = std::env::current_exe().unwrap();
    let run = || {
        Command::new(&exe)
            .args([
                "runtime::checkpoint::tests::writer_child_process",
                "--exact",
                "--test-threads=1",
                "-q",
            ])
            .env(CHILD_DB_ENV, &db)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut kills = 0;
    let mut finished = false;
    for _ in 0..20 {
        let mut child = run();
        let mut r = [0u8; 1];
        getrandom::fill(&mut r).unwrap();
        std::thread::sleep(Duration::from_millis(20 + u64::from(r[0]) % 120));
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap();
            kills += 1;
        }
        // A run that completed removed its checkpoint; a further run would start afresh.
        if child.wait().unwrap().success() {
            finished = true;
            break;
        }
    }
    if !finished {
        assert!(run().wait().unwrap().success());
    }
    assert!(kills >= 3, "the writer must really be interrupted ({kills} kills)");
    let conn = Connection::open(&db).unwrap();
    let (count, distinct, max): (i64, i64, i64) = conn
        .query_row("SELECT COUNT(*), COUNT(DISTINCT unit), MAX(unit) FROM units", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap();
    assert_eq!(
        (count, distinct, max),
        (UNITS as i64, UNITS as i64, UNITS as i64 - 1),
        "after {kills} kills"
    );
    let cp = SqliteCheckpoints::new(IdentityKey("c".repeat(64)), "fp", job());
    let end: Restored<State> = cp.restore(&conn, |_| false).unwrap();
    assert_eq!(end.completed, Some(serde_json::json!({"rows": UNITS})), "completion recorded");
    cp.remove(&conn).unwrap();
    let fresh: Restored<State> = cp.restore(&conn, |_| false).unwrap();
    assert_eq!((fresh.state, fresh.completed), (None, None));
    eprintln!("writer survived {kills} kill -9");
}
