//! Writers that meet on one table (REQ-C-035: a checkpoint holds only for the state it
//! records): another import, a `drop-table`, a race. An import answers success only when the
//! table holds exactly its file's rows; another import of a table an unfinished import holds
//! is refused, nothing written; a continuation that finds its table changed starts over.

use std::path::Path;
use std::process::Stdio;

use crate::budget::{assert_incomplete, continue_loop, paced};
use crate::support::{Run, Sandbox};

/// `a.csv` (3000 rows, values `a<n>`) and `b.csv` (1000 rows, `b<n>`).
pub fn two_files(sandbox: &Sandbox) {
    for (name, rows, tag) in [("a.csv", 3000, "a"), ("b.csv", 1000, "b")] {
        let mut text = String::from("n,v\n");
        for n in 1..=rows {
            text.push_str(&format!("{n},{tag}{n}\n"));
        }
        std::fs::write(sandbox.path().join(name), text).unwrap();
    }
}

/// `(rows, distinct lines, rows of a.csv, rows of b.csv, rows exactly as in their file)` of the
/// `rows` table of `db`.
pub fn contents(db: &Path) -> (i64, i64, i64, i64, i64) {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row(
            "SELECT count(*), count(DISTINCT _line), coalesce(sum(v LIKE 'a%'), 0),
                    coalesce(sum(v LIKE 'b%'), 0),
                    coalesce(sum(CAST(n AS INTEGER) = _line AND substr(v, 2) = n), 0)
             FROM rows",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )
        .unwrap_or((0, 0, 0, 0, 0))
}

/// The table holds exactly the rows of `file` (`a.csv` or `b.csv`).
pub fn assert_holds(db: &Path, file: &str) {
    let (rows, distinct, a, b, exact) = contents(db);
    let want =
        if file == "a.csv" { (3000, 3000, 3000, 0, 3000) } else { (1000, 1000, 0, 1000, 1000) };
    assert_eq!((rows, distinct, a, b, exact), want, "{} holds {file} exactly", db.display());
}

/// The continue_command of `run` with its `--budget 600ms` made `--budget 0`.
fn with_budget_zero(run: &Run) -> String {
    let line = run.json["data"]["continue_command"].as_str().unwrap();
    assert!(line.contains("--budget 600ms"), "{line}");
    line.replace("--budget 600ms", "--budget 0")
}

/// The first reproduction: `import a.csv` paused at 1200 rows, `import b.csv` into the
/// same table, the first continued. It answered `rows: 3000` over a table of 1800 a-rows and
/// 1000 b-rows. Now the second is refused (the paused import holds the table) and the first's
/// continuation ends with exactly a.csv's rows.
#[test]
fn another_import_of_a_table_a_paused_import_holds_is_refused_and_the_first_ends_exactly() {
    let sandbox = Sandbox::new();
    two_files(&sandbox);
    let db = sandbox.path().join("x.db");
    let first = paced(&sandbox, &["import", "a.csv", "--db", "x.db", "--budget", "600ms"], &[]);
    assert_incomplete(&first, "paused");
    let before = contents(&db);

    for instance in [None, Some("elsewhere")] {
        let mut args = vec!["import", "b.csv", "--db", "x.db", "--budget", "0"];
        args.extend(instance.iter().flat_map(|i| ["--instance-id", *i]));
        let second = sandbox.run(&args);
        assert_eq!((second.exit, second.code()), (6, "TABLE_IN_USE"), "{}", second.stdout);
        second.envelope();
        assert_eq!(second.json["error"]["phase"], "validation");
        assert_eq!(contents(&db), before, "the refused import wrote nothing");
    }

    let runs = continue_loop(&sandbox, &first, &[]);
    let last = runs.last().unwrap();
    assert_eq!((last.exit, &last.json["data"]["rows"]), (0, &3000.into()), "{}", last.stdout);
    assert_holds(&db, "a.csv");
    // Done, it holds the table no longer: another import now fills it.
    let second = sandbox.run(&["import", "b.csv", "--db", "x.db"]);
    assert_eq!(second.exit, 0, "{}", second.stdout);
    assert_holds(&db, "b.csv");
}

/// A paused import whose job ended (cancelled, or lost: killed) holds nothing: another import
/// takes the table, and the first's identical invocation finds its checkpoint void or its
/// fingerprint changed, starts over, and ends with exactly its rows.
#[test]
fn a_table_freed_by_an_ended_job_is_taken_and_the_first_starts_over_exactly() {
    let sandbox = Sandbox::new();
    two_files(&sandbox);
    // Cancelled.
    let first = paced(&sandbox, &["import", "a.csv", "--db", "c.db", "--budget", "600ms"], &[]);
    assert_incomplete(&first, "paused");
    let id = first.json["data"]["job_id"].as_str().unwrap();
    assert_eq!(sandbox.run(&["job", "cancel", id]).exit, 0);
    let second = sandbox.run(&["import", "b.csv", "--db", "c.db"]);
    assert_eq!(second.exit, 0, "{}", second.stdout);
    assert_holds(&sandbox.path().join("c.db"), "b.csv");
    let again = sandbox.run(&["import", "a.csv", "--db", "c.db", "--budget", "0"]);
    assert_eq!(again.exit, 0, "{}", again.stdout);
    assert_holds(&sandbox.path().join("c.db"), "a.csv");

    // Lost: the first is killed mid-run.
    let mut cmd = sandbox.command(&["import", "a.csv", "--db", "k.db", "--budget", "0"]);
    cmd.env("REFTOOL_PACE_MS", "50").stdout(Stdio::null()).stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(700));
    child.kill().unwrap();
    child.wait().unwrap();
    let (committed, ..) = contents(&sandbox.path().join("k.db"));
    assert!(committed > 0, "the killed import committed rows first");
    let second = sandbox.run(&["import", "b.csv", "--db", "k.db"]);
    assert_eq!(second.exit, 0, "a lost job holds nothing: {}", second.stdout);
    assert_holds(&sandbox.path().join("k.db"), "b.csv");
    let again = sandbox.run(&["import", "a.csv", "--db", "k.db", "--budget", "0"]);
    assert_eq!(again.exit, 0, "{}", again.stdout);
    assert_eq!(again.json["warnings"][0]["code"], "CHECKPOINT_DISCARDED", "{}", again.stdout);
    assert_holds(&sandbox.path().join("k.db"), "a.csv");
}

/// `drop-table` between a pause and its continuation made every later import of the file fail
/// DB_ERROR for good (its checkpoint pointed into a table that was gone). Now the continuation
/// discards the checkpoint and starts over; and `job cancel` of the paused job works too.
#[test]
fn a_drop_table_between_a_pause_and_its_continuation_starts_the_work_over() {
    let sandbox = Sandbox::new();
    two_files(&sandbox);
    let first = paced(&sandbox, &["import", "a.csv", "--db", "d.db", "--budget", "600ms"], &[]);
    assert_incomplete(&first, "paused");
    let drop = sandbox.run(&["drop-table", "--db", "d.db", "--table", "rows", "--yes"]);
    assert_eq!(drop.exit, 0, "{}", drop.stdout);
    let run = sandbox.finish(
        std::process::Command::new("sh")
            .arg("-c")
            .arg(with_budget_zero(&first))
            .current_dir(sandbox.path())
            .env_clear()
            .envs(sandbox.command(&[]).get_envs().filter_map(|(k, v)| Some((k, v?))))
            .output()
            .unwrap(),
    );
    assert_eq!(run.exit, 0, "{}", run.stdout);
    assert_eq!(run.json["warnings"][0]["code"], "CHECKPOINT_DISCARDED", "{}", run.stdout);
    assert_holds(&sandbox.path().join("d.db"), "a.csv");

    let first = paced(&sandbox, &["import", "a.csv", "--db", "e.db", "--budget", "600ms"], &[]);
    assert_incomplete(&first, "paused");
    let id = first.json["data"]["job_id"].as_str().unwrap();
    assert_eq!(sandbox.run(&["drop-table", "--db", "e.db", "--table", "rows", "--yes"]).exit, 0);
    let cancel = sandbox.run(&["job", "cancel", id]);
    assert_eq!((cancel.exit, &cancel.json["data"]["state"]), (0, &"cancelled".into()));
    let again = sandbox.run(&["import", "a.csv", "--db", "e.db"]);
    assert_eq!(again.exit, 0, "{}", again.stdout);
    assert_holds(&sandbox.path().join("e.db"), "a.csv");
}

/// A writer that loses its table while it runs (dropped under it) stops with TABLE_CHANGED at
/// its next transaction: never a success over rows that are gone.
#[test]
fn an_import_whose_table_is_dropped_under_it_never_answers_success() {
    let sandbox = Sandbox::new();
    two_files(&sandbox);
    let mut cmd = sandbox.command(&["import", "a.csv", "--db", "g.db", "--budget", "0"]);
    cmd.env("REFTOOL_PACE_MS", "50");
    let child = cmd.spawn().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(600));
    let drop = sandbox.run(&["drop-table", "--db", "g.db", "--table", "rows", "--yes"]);
    assert_eq!(drop.exit, 0, "{}", drop.stdout);
    let run = sandbox.finish(child.wait_with_output().unwrap());
    assert_eq!((run.exit, run.code()), (6, "TABLE_CHANGED"), "{}", run.stdout);
    run.envelope();
}

/// Two imports of different files into one table, started together (across instances too):
/// one fills it, the other is refused with nothing written; the table holds the winner's
/// rows exactly.
#[test]
fn two_imports_racing_on_one_table_fill_it_once() {
    let sandbox = Sandbox::new();
    two_files(&sandbox);
    for (round, instances) in [(None, None), (Some("one"), Some("two"))].iter().enumerate() {
        let db = format!("race{round}.db");
        let (a, b) = race(&sandbox, &db, *instances, 20);
        let winners: Vec<&str> = [(&a, "a.csv"), (&b, "b.csv")]
            .iter()
            .filter(|(run, _)| run.exit == 0)
            .map(|(_, f)| *f)
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {} / {}", a.stdout, b.stdout);
        let loser = if winners[0] == "a.csv" { &b } else { &a };
        assert_eq!((loser.exit, loser.code()), (6, "TABLE_IN_USE"), "{}", loser.stdout);
        assert_holds(&sandbox.path().join(&db), winners[0]);
    }
}

/// `import a.csv` and `import b.csv` into `db`, started together, paced at `pace_ms`, without a
/// budget, each under its instance (or the default).
pub fn race(
    sandbox: &Sandbox,
    db: &str,
    instances: (Option<&str>, Option<&str>),
    pace_ms: u64,
) -> (Run, Run) {
    let spawn = |file: &str, instance: Option<&str>| {
        let mut args = vec!["import", file, "--db", db, "--budget", "0"];
        args.extend(instance.iter().flat_map(|i| ["--instance-id", *i]));
        let mut cmd = sandbox.command(&args);
        cmd.env("REFTOOL_PACE_MS", pace_ms.to_string());
        cmd.spawn().unwrap()
    };
    let a = spawn("a.csv", instances.0);
    let b = spawn("b.csv", instances.1);
    let a = sandbox.finish(a.wait_with_output().unwrap());
    let b = sandbox.finish(b.wait_with_output().unwrap());
    (a, b)
}
