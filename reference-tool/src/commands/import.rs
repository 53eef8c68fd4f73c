//! `reftool import FILE --db DB [--table T]`: CSV rows into a SQLite table, in chunks.
//!
//! Mutating, `interruption: {detach: false, resume: true}`, takes `--idempotency-key`. The
//! table gets one TEXT column per header field plus `_line INTEGER PRIMARY KEY` (the data
//! row's number), so a row committed twice would be refused by the database itself. Rows go in
//! by chunks of [`CHUNK_ROWS`]; one transaction in the target database gathers chunks until
//! the checkpoint cadence (`work::Cadence`: after every chunk of paced work, else every
//! `work::CHECKPOINT_EVERY` of work, and at once when a stop is requested) commits them
//! together with the checkpoint (which rows are committed), written in that same transaction
//! (`reftool_checkpoints`, see `runtime::checkpoint`): a `kill -9` loses or repeats no row,
//! and a large unpaced import pays a commit (an fsync) a few times a second, not per chunk. A
//! fresh start (no checkpoint) first empties the table, so after an import the table holds
//! exactly the file's rows. On completion the checkpoint row is marked completed with the
//! result: the identical invocation replays that result instead of writing again. A cancelled
//! job's checkpoint is void.
//!
//! **One import per table, and checkpoints that name the table's state** (`runtime::target`).
//! A fresh start claims the table in the transaction that empties it. While another import's
//! unfinished work holds the table (its job runs, or waits paused for its continuation), a
//! fresh start is refused with CONFLICT 6 `TABLE_IN_USE`, nothing written; a job that ended
//! (finished, cancelled, lost) holds nothing. The checkpoint's fingerprint is the file's and
//! the table's (the claim that filled it, and its last `_line`): a continuation finding the
//! table dropped, refilled or changed discards its checkpoint with `CHECKPOINT_DISCARDED` and
//! starts over, instead of going on from rows that are no longer there. Every transaction
//! first checks, under the write lock, that the table still carries this import's claim; one
//! that lost it (to a writer outside these rules) stops with CONFLICT 6 `TABLE_CHANGED`. So an
//! import answers success only when the table holds exactly the file's rows. Two imports
//! racing on one table: one fills it, the other is refused (or, when its own job had ended,
//! finds its checkpoint void and starts over); across instances alike, since the claim lives
//! in the target database.
//!
//! `--db` is a file path, never a SQLite URI or `:memory:` (see `framework::userdb`): the rows
//! and the checkpoint must outlive the process, or a continuation would start over forever. A
//! file that is no SQLite database is PRECONDITION 4 `DB_INVALID`, whether SQLite notices it
//! opening the file or reading the checkpoint.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;

use rusqlite::{
    Connection, ErrorCode, OpenFlags, Transaction, TransactionBehavior, params_from_iter,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::work::{Cadence, existing, pace, progress, read_failure, required, safe_point};
use crate::framework::userdb;
use crate::framework::{
    CommandSpec, Ctx, DangerLevel, Exit, Failure, FlagSpec, Interruption, Phase, SideEffects,
    ValueType,
};
use crate::runtime::checkpoint::{CheckpointError, SqliteCheckpoints, file_fingerprint};
use crate::runtime::context::JobContext;
use crate::runtime::jobs::JobStore;
use crate::runtime::stop::StopReason;
use crate::runtime::target::{ClaimError, TargetClaims};

/// Rows per chunk (one unit of pacing; a transaction holds one chunk or more).
pub const CHUNK_ROWS: usize = 100;
/// The default table.
pub const DEFAULT_TABLE: &str = "rows";
/// How long to wait for another writer of the target database.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The declaration.
pub fn spec() -> CommandSpec {
    CommandSpec::with_job_work("import", "Import the rows of a CSV file into a SQLite table", work)
        .danger(DangerLevel::Mutating)
        .scope("rows:write")
        .positional("file", ValueType::String, true, "The CSV file (header row first)")
        .flag(
            FlagSpec::string("db", "The SQLite database to import into (created if missing)")
                .required(),
        )
        .flag(FlagSpec::string("table", "The table to fill (default rows)"))
        .interruption(Interruption {
            detach: false,
            resume: true,
            idle_timeout_ms: None,
            max_lifetime_ms: Some(7_200_000),
        })
        .exit(Exit::SUCCESS, "Every row is imported", false, SideEffects::Complete)
        .exit(Exit::NOT_FOUND, "The file does not exist", false, SideEffects::None)
        .exit(
            Exit::CONFLICT,
            "The idempotency key belongs to other arguments, or another import fills the table; none of this call's rows are left",
            false,
            SideEffects::None,
        )
        .exit(
            Exit::PRECONDITION,
            "The file cannot be read or has no header, or the database is no SQLite database or cannot be written",
            false,
            SideEffects::None,
        )
        .exit(
            Exit::INCOMPLETE,
            "Some rows are imported and the state is saved; run data.continue_command",
            false,
            SideEffects::Partial,
        )
}

/// The checkpointed state: how far the file is committed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ImportState {
    /// Byte offset of the next data row.
    pub offset: u64,
    /// Data rows committed.
    pub rows: u64,
}

/// A SQLite error on the target `db`: what every `--db` command answers for a busy, foreign
/// or unwritable file (`userdb::db_failure`), and PRECONDITION 4 `DB_ERROR` for the rest (an
/// existing table of other columns, say).
fn db_failure(e: &rusqlite::Error, db: &Path) -> Failure {
    match e.sqlite_error_code() {
        Some(
            ErrorCode::DatabaseBusy
            | ErrorCode::DatabaseLocked
            | ErrorCode::NotADatabase
            | ErrorCode::DatabaseCorrupt
            | ErrorCode::CannotOpen
            | ErrorCode::ReadOnly
            | ErrorCode::PermissionDenied
            | ErrorCode::DiskFull
            | ErrorCode::SystemIoFailure,
        ) => userdb::db_failure(e, db),
        _ => Failure::new(Exit::PRECONDITION, "DB_ERROR", format!("the database failed: {e}")),
    }
}

/// A checkpoint that could not be read or saved: the database's failure when the database
/// said no, else an internal error.
fn checkpoint_failure(e: &CheckpointError, what: &str, db: &Path) -> Failure {
    match e {
        CheckpointError::Db(e) => db_failure(e, db),
        other => Failure::internal(format!("failed to {what} the checkpoint: {other}")),
    }
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn valid_table(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn work(ctx: &mut Ctx, job: &mut JobContext<'_>) -> Result<Value, Failure> {
    let file = required(ctx, "file")?.to_owned();
    let db_path = required(ctx, "db")?.to_owned();
    let db_file = userdb::db_path(&db_path)?;
    let table = ctx.args.text("table").unwrap_or(DEFAULT_TABLE).to_owned();
    if !valid_table(&table) {
        return Err(Failure::arg(
            "INVALID_TABLE",
            "--table must be 1-64 characters of letters, digits and _, not starting with a digit",
        ));
    }
    let path = existing(&file)?;
    let file_print = file_fingerprint(&path).map_err(|e| read_failure(&path, &e))?;
    let mut input = BufReader::new(File::open(&path).map_err(|e| read_failure(&path, &e))?);
    let mut header = String::new();
    let header_len = input.read_line(&mut header).map_err(|e| read_failure(&path, &e))? as u64;
    let columns: Vec<String> = header
        .trim_end_matches(['\n', '\r'])
        .split(',')
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty())
        .collect();
    if columns.is_empty() {
        return Err(Failure::new(
            Exit::PRECONDITION,
            "NO_HEADER",
            format!("{file} has no header row"),
        )
        .phase(Phase::Validation));
    }

    let db = userdb::open(
        &db_file,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    let db_failure = |e: &rusqlite::Error| db_failure(e, &db_file);
    db.busy_timeout(BUSY_TIMEOUT).map_err(|e| db_failure(&e))?;
    let mut state_db = ctx.open_state()?;
    let store = JobStore::new(ctx.state.ensure_dir()?);
    let state_conn: &Connection = state_db.conn();

    // The checkpoint records rows committed to the table, so it holds only for the table as
    // this import left it: its fingerprint is the file's and the table's (the claim that
    // filled it and how far), recomputed here from the table itself.
    let record = &job.job().record;
    let target = TargetClaims::new(&table, record.identity.clone(), record.job_id.clone());
    let claim = target.current(&db).map_err(|e| db_failure(&e))?;
    let filled = filled_rows(&db, &table).map_err(|e| db_failure(&e))?;
    let now_fingerprint =
        format!("{file_print};{}", target.state_of(&db, filled).map_err(|e| db_failure(&e))?);
    let restored = job
        .sqlite_checkpoints(now_fingerprint)
        .restore::<ImportState>(&db, |id| store.was_cancelled(state_conn, id).unwrap_or(false))
        .map_err(|e| checkpoint_failure(&e, "read", &db_file))?;
    for w in &restored.warnings {
        ctx.warn(w.code, w.message.clone());
    }
    if let Some(result) = restored.completed {
        // The identical invocation after completion, the table as it left it: the result,
        // nothing written again.
        return Ok(result);
    }
    // Resumed: the table carries this import's claim (the fingerprint matched).
    let mut stamp = restored.state.as_ref().and(claim.map(|c| c.stamp));
    let mut state = restored.state.unwrap_or(ImportState { offset: header_len, rows: 0 });
    job.resume_from(state.rows).map_err(|e| Failure::internal(e.to_string()))?;
    input.seek(SeekFrom::Start(state.offset)).map_err(|e| read_failure(&path, &e))?;
    // Whether this run's first transaction is still to come.
    let mut first = true;
    // A writer's checkpoint as of a commit: the file's fingerprint, the table's state after it.
    let checkpoint_at = |job: &JobContext<'_>, stamp: &str, rows: u64| {
        job.sqlite_checkpoints(format!("{file_print};{}", TargetClaims::state(stamp, rows)))
    };

    let quoted: Vec<String> = columns.iter().map(|c| quote_ident(c)).collect();
    let create = format!(
        "CREATE TABLE IF NOT EXISTS {} (_line INTEGER PRIMARY KEY, {})",
        quote_ident(&table),
        quoted.iter().map(|c| format!("{c} TEXT")).collect::<Vec<_>>().join(", ")
    );
    let insert = format!(
        "INSERT INTO {} (_line, {}) VALUES (?1, {})",
        quote_ident(&table),
        quoted.join(", "),
        (2..=columns.len() + 1).map(|i| format!("?{i}")).collect::<Vec<_>>().join(", ")
    );
    let mut cadence = Cadence::new(ctx);
    // The transaction being filled, between two checkpoints, and the claim's stamp.
    let mut filling: Option<Transaction<'_>> = None;
    loop {
        pace(ctx, job).map_err(|f| discard_on_cancel(f, &job.sqlite_checkpoints(""), &db))?;
        let mut chunk: Vec<Vec<String>> = Vec::with_capacity(CHUNK_ROWS);
        let mut consumed = 0u64;
        let mut line = String::new();
        while chunk.len() < CHUNK_ROWS {
            line.clear();
            let n = input.read_line(&mut line).map_err(|e| read_failure(&path, &e))?;
            if n == 0 {
                break;
            }
            consumed += n as u64;
            let text = line.trim_end_matches(['\n', '\r']);
            if text.trim().is_empty() {
                continue;
            }
            let mut fields: Vec<String> = text.split(',').map(str::to_owned).collect();
            fields.resize(columns.len(), String::new());
            chunk.push(fields);
        }
        let end = chunk.is_empty();
        let tx = match filling.take() {
            Some(tx) => tx,
            None => {
                let tx = Transaction::new_unchecked(&db, TransactionBehavior::Immediate)
                    .map_err(|e| db_failure(&e))?;
                // Holding the write lock: the table is still this import's, or it is claimed
                // now (a fresh start empties it in this same transaction).
                let claimed = match stamp.as_deref() {
                    None => target
                        .take(&tx, |job| store.holds_work(state_conn, job).unwrap_or(true))
                        .map(Some),
                    Some(own) if first => target.adopt(&tx, own).map(|()| None),
                    Some(own) => target.verify(&tx, own).map(|()| None),
                };
                match claimed {
                    Ok(Some(taken)) => {
                        tx.execute_batch(&create).map_err(|e| db_failure(&e))?;
                        tx.execute(&format!("DELETE FROM {}", quote_ident(&table)), [])
                            .map_err(|e| db_failure(&e))?;
                        stamp = Some(taken);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        drop(tx);
                        return Err(claim_failure(e, &table, &db_file, state.rows));
                    }
                }
                first = false;
                tx
            }
        };
        let own = stamp.clone().unwrap_or_default();
        {
            let mut stmt = tx.prepare_cached(&insert).map_err(|e| db_failure(&e))?;
            for fields in &chunk {
                state.rows += 1;
                let line_no = i64::try_from(state.rows).unwrap_or(i64::MAX);
                let values = std::iter::once(rusqlite::types::Value::Integer(line_no))
                    .chain(fields.iter().map(|f| rusqlite::types::Value::Text(f.clone())));
                stmt.execute(params_from_iter(values)).map_err(|e| db_failure(&e))?;
            }
        }
        state.offset += consumed;
        let checkpoints = checkpoint_at(job, &own, state.rows);
        if end {
            let result = json!({
                "effect": "created",
                "file": file,
                "db": db_path,
                "table": table,
                "rows": state.rows,
            });
            checkpoints
                .finish_in(&tx, &result, state.rows)
                .map_err(|e| checkpoint_failure(&e, "save", &db_file))?;
            target.complete(&tx, &own).map_err(|e| claim_failure(e, &table, &db_file, 0))?;
            tx.commit().map_err(|e| db_failure(&e))?;
            progress(job, state.rows, Some(state.rows), "rows")?;
            return Ok(result);
        }
        progress(job, state.rows, None, "rows")?;
        if !cadence.due(job) {
            filling = Some(tx);
            continue;
        }
        // A commit that fails is the target database's failure (a full disk, a write past
        // `ulimit -f`), said as such rather than as reftool's own.
        let flow = job
            .commit_with(&checkpoints, tx, &state, state.rows)
            .map_err(|e| checkpoint_failure(&e, "save", &db_file))?;
        safe_point(Ok(flow)).map_err(|f| discard_on_cancel(f, &checkpoints, &db))?;
    }
}

/// How far the table is filled: the number of its last data row (0 when it is empty or
/// missing). `_line` is the primary key, so this costs a lookup, not a scan.
fn filled_rows(db: &Connection, table: &str) -> rusqlite::Result<u64> {
    let exists: bool = db.query_row(
        "SELECT EXISTS(SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
        [table],
        |r| r.get(0),
    )?;
    if !exists {
        return Ok(0);
    }
    let sql = format!("SELECT coalesce(max(_line), 0) FROM {}", quote_ident(table));
    match db.query_row(&sql, [], |r| r.get::<_, i64>(0)) {
        Ok(n) => Ok(u64::try_from(n).unwrap_or(0)),
        // A table of the same name without `_line` is no import's: nothing of it counts.
        Err(rusqlite::Error::SqliteFailure(_, Some(message)))
            if message.contains("no such column") =>
        {
            Ok(0)
        }
        Err(e) => Err(e),
    }
}

/// The answer when the table is not this import's to fill: CONFLICT 6, nothing of this call's
/// left in it.
fn claim_failure(error: ClaimError, table: &str, db_file: &Path, committed: u64) -> Failure {
    let db = db_file.display().to_string();
    match error {
        ClaimError::Held { job_id } => Failure::new(
            Exit::CONFLICT,
            "TABLE_IN_USE",
            format!(
                "table `{table}` of {db} is being filled by another import (job {job_id}); \
                 nothing was written"
            ),
        )
        .retryable(false)
        .phase(Phase::Validation)
        .context(json!({"db": db, "table": table, "holder_job_id": job_id}))
        .suggestion(format!(
            "wait for that import to finish, or end it with `job cancel {job_id}` (from its \
             instance), then repeat"
        )),
        ClaimError::Changed => Failure::new(
            Exit::CONFLICT,
            "TABLE_CHANGED",
            format!(
                "table `{table}` of {db} was dropped or refilled by another writer while this \
                 import ran ({committed} rows committed before); the import stopped and the \
                 table holds none of them"
            ),
        )
        .retryable(false)
        .context(json!({"db": db, "table": table}))
        .suggestion("repeat the import once the other writer is done: it starts over"),
        ClaimError::Db(e) => db_failure(&e, db_file),
    }
}

/// A cancel discards the checkpoint (the rows already committed stay).
fn discard_on_cancel(
    failure: Failure,
    checkpoints: &SqliteCheckpoints,
    db: &Connection,
) -> Failure {
    if failure.job_stop == Some(StopReason::Cancelled) {
        let _ = checkpoints.remove(db);
    }
    failure
}
