//! `reftool drop-table --db FILE --table NAME`: drops one table of a SQLite database, rows and
//! all. reftool's destructive command, so the spec kit's two safety checks have something real
//! to hold: a preview that changes nothing, and a refusal when nobody confirmed.
//!
//! - `--dry-run` answers a successful preview (`effect: "noop"`, `dry_run: true`, the table
//!   and its row count under `would_delete`) and opens the database only to read.
//! - Without confirmation it refuses before writing anything: ARG_ERROR 2
//!   `CONFIRMATION_REQUIRED` (REQ-O-021 makes the missing confirmation a validation failure),
//!   with what would be affected in `error.context` (the implicit preview). Confirmation is
//!   `--confirm-destructive` (REQ-O-021's flag), `--yes`, or, for a person at a terminal (stdin
//!   and stderr both terminals), answering `y` to a prompt on stderr. Nothing ever prompts in
//!   non-interactive mode.
//! - Confirmed, it drops the table inside one immediate transaction (`effect: "deleted"`,
//!   `meta.confirmed: true`); a stop before the commit rolls back and leaves the table whole.
//!
//! Destructive, no interruption: dropping is one short transaction. It takes
//! `--idempotency-key` like every writer, so a repeated confirmed drop with the same key answers
//! the original `data` with `effect: "noop"` instead of NOT_FOUND. `REFTOOL_PACE_MS` sleeps
//! once inside the transaction, so a test can stop it mid-way.

use std::io::{BufRead, IsTerminal, Write};

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior};
use serde_json::{Value, json};

use crate::framework::{
    CommandSpec, Ctx, DangerLevel, Exit, Failure, FlagSpec, Phase, SideEffects,
};

use crate::framework::userdb::{self, DbExits, DeclareDbExits, db_failure};

/// The preview flag.
pub const DRY_RUN_FLAG: &str = "dry-run";
/// REQ-O-021's confirmation flag for automated callers.
pub const CONFIRM_FLAG: &str = "confirm-destructive";
/// The general "answer yes" flag, accepted as confirmation too.
pub const YES_FLAG: &str = "yes";

/// The declaration.
pub fn spec() -> CommandSpec {
    CommandSpec::new(
        "drop-table",
        "Drop one table of a SQLite database with all its rows (asks for confirmation)",
        run,
    )
    .danger(DangerLevel::Destructive)
    .scope("db:write")
    .flag(FlagSpec::string("db", "Path of the SQLite database (it must exist)").required())
    .flag(FlagSpec::string("table", "Name of the table to drop").required())
    .flag(FlagSpec::boolean(
        DRY_RUN_FLAG,
        "Preview: report the table and its row count, change nothing",
    ))
    .flag(FlagSpec::boolean(CONFIRM_FLAG, "Confirm the drop (required when not at a terminal)"))
    .flag(FlagSpec::boolean(YES_FLAG, "Answer yes to the confirmation"))
    .exit(
        Exit::SUCCESS,
        "The table was dropped, or (with --dry-run) the preview of the drop",
        false,
        SideEffects::Complete,
    )
    .db_exits(&DbExits {
        precondition: "The file is not a SQLite database, or it cannot be written",
        not_found: "The database or the table does not exist",
        unavailable: "The database stayed locked by another writer; nothing changed",
    })
}

/// A table name reftool will quote into SQL: a plain identifier, and not SQLite's own.
fn validate_table(name: &str) -> Result<(), Failure> {
    let mut chars = name.chars();
    let plain = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 128;
    if !plain {
        return Err(Failure::arg(
            "INVALID_TABLE",
            format!(
                "`{name}` is not a table name (letters, digits and _, not starting with a digit)"
            ),
        )
        .context(json!({"flag": "table"})));
    }
    if name.to_ascii_lowercase().starts_with("sqlite_") {
        return Err(Failure::arg(
            "INVALID_TABLE",
            format!("`{name}` belongs to SQLite itself and cannot be dropped"),
        )
        .context(json!({"flag": "table"})));
    }
    Ok(())
}

/// The row count of `table`, or `None` when the database has no such table.
fn count_rows(conn: &Connection, table: &str) -> rusqlite::Result<Option<u64>> {
    let exists: Option<String> = conn
        .query_row(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [table],
            |row| row.get(0),
        )
        .optional()?;
    if exists.is_none() {
        return Ok(None);
    }
    let rows: i64 =
        conn.query_row(&format!("SELECT count(*) FROM \"{table}\""), [], |row| row.get(0))?;
    Ok(Some(u64::try_from(rows).unwrap_or(0)))
}

fn table_not_found(conn: &Connection, table: &str, shown: &str) -> Failure {
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .and_then(|mut stmt| {
            stmt.query_map([], |row| row.get::<_, String>(0))?.collect::<Result<Vec<_>, _>>()
        })
        .unwrap_or_default();
    Failure::new(Exit::NOT_FOUND, "TABLE_NOT_FOUND", format!("{shown} has no table `{table}`"))
        .phase(Phase::Validation)
        .context(json!({"db": shown, "table": table, "tables": tables}))
}

/// Whether the drop is confirmed: by a flag, or by a person at a terminal.
fn confirmed(ctx: &Ctx, table: &str, rows: u64, shown: &str) -> bool {
    let flagged = ctx.args.switch(CONFIRM_FLAG) || ctx.args.switch(YES_FLAG);
    flagged || confirmed_at_terminal(ctx, table, rows, shown)
}

/// Asks a person at a terminal; `false` for anything but yes, and always `false` when
/// stdin or stderr is not a terminal.
fn confirmed_at_terminal(ctx: &Ctx, table: &str, rows: u64, shown: &str) -> bool {
    if !ctx.invocation.modes.interactive
        || !std::io::stdin().is_terminal()
        || !std::io::stderr().is_terminal()
    {
        return false;
    }
    let mut stderr = std::io::stderr().lock();
    let _ = write!(stderr, "Drop table `{table}` ({rows} rows) from {shown}? [y/N] ");
    let _ = stderr.flush();
    let mut line = String::new();
    match std::io::stdin().lock().read_line(&mut line) {
        Ok(n) if n > 0 => matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes"),
        _ => false,
    }
}

fn run(ctx: &mut Ctx) -> Result<Value, Failure> {
    let given_db = ctx.args.text("db").unwrap_or_default().to_owned();
    let table = ctx.args.text("table").unwrap_or_default().to_owned();
    validate_table(&table)?;
    let dry_run = ctx.args.switch(DRY_RUN_FLAG);
    let path = userdb::db_path(&given_db)?;
    let shown = path.display().to_string();
    if !path.is_file() {
        let (exit, code) = if path.exists() {
            (Exit::PRECONDITION, "DB_INVALID")
        } else {
            (Exit::NOT_FOUND, "DB_NOT_FOUND")
        };
        return Err(Failure::new(exit, code, format!("{shown} is not an existing database file"))
            .phase(Phase::Validation)
            .suggestion("check the path given to --db"));
    }
    let fail = |e: rusqlite::Error| db_failure(&e, &path);

    // Look before asking: the preview, the refusal and the prompt all name what would go.
    let rows = {
        let reader = userdb::open(&path, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        match count_rows(&reader, &table).map_err(fail)? {
            Some(rows) => rows,
            None => return Err(table_not_found(&reader, &table, &shown)),
        }
    };
    let would_delete = json!({"db": shown, "table": table, "rows": rows});
    if dry_run {
        return Ok(json!({
            "effect": "noop",
            "dry_run": true,
            "db": shown,
            "table": table,
            "would_delete": would_delete,
        }));
    }
    if !confirmed(ctx, &table, rows, &shown) {
        return Err(Failure::arg(
            "CONFIRMATION_REQUIRED",
            format!("dropping `{table}` ({rows} rows) needs confirmation; nothing was changed"),
        )
        .context(json!({"would_affect": [would_delete], "danger_level": "destructive"}))
        .suggestion(format!(
            "pass --{CONFIRM_FLAG} (or --{YES_FLAG}) to drop it, or --{DRY_RUN_FLAG} to preview"
        )));
    }

    let mut conn = userdb::open(&path, OpenFlags::SQLITE_OPEN_READ_WRITE)?;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(fail)?;
    // Count again under the write lock: another writer may have changed it since the look.
    let Some(rows) = count_rows(&tx, &table).map_err(fail)? else {
        return Err(table_not_found(&tx, &table, &shown));
    };
    tx.execute_batch(&format!("DROP TABLE \"{table}\"")).map_err(fail)?;
    // A stop (timeout, SIGTERM) here drops `tx`, which rolls the drop back.
    ctx.pace()?;
    ctx.begin_commit()?;
    tx.commit().map_err(fail)?;
    ctx.set_meta("confirmed", json!(true));
    Ok(json!({
        "effect": "deleted",
        "db": shown,
        "table": table,
        "rows_deleted": rows,
    }))
}
