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
    let fingerprint = file_fingerprint(&path).map_err(|e| read_failure(&path, &e))?;
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
    let checkpoints = job.sqlite_checkpoints(fingerprint);
    let mut state_db = ctx.open_state()?;
    let store = JobStore::new(ctx.state.ensure_dir()?);
    let state_conn: &Connection = state_db.conn();
    let restored = checkpoints
        .restore::<ImportState>(&db, |id| store.was_cancelled(state_conn, id).unwrap_or(false))
        .map_err(|e| checkpoint_failure(&e, "read", &db_file))?;
    for w in &restored.warnings {
        ctx.warn(w.code, w.message.clone());
    }
    if let Some(result) = restored.completed {
        // The identical invocation after completion: the result, nothing written again.
        return Ok(result);
    }
    let fresh = restored.state.is_none();
    let mut state = restored.state.unwrap_or(ImportState { offset: header_len, rows: 0 });
    job.resume_from(state.rows).map_err(|e| Failure::internal(e.to_string()))?;
    input.seek(SeekFrom::Start(state.offset)).map_err(|e| read_failure(&path, &e))?;

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
    let mut first = fresh;
    let mut cadence = Cadence::new(ctx);
    // The transaction being filled, between two checkpoints.
    let mut filling: Option<Transaction<'_>> = None;
    loop {
        pace(ctx, job).map_err(|f| discard_on_cancel(f, &checkpoints, &db))?;
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
            None => Transaction::new_unchecked(&db, TransactionBehavior::Immediate)
                .map_err(|e| db_failure(&e))?,
        };
        if first {
            tx.execute_batch(&create).map_err(|e| db_failure(&e))?;
            tx.execute(&format!("DELETE FROM {}", quote_ident(&table)), [])
                .map_err(|e| db_failure(&e))?;
            first = false;
        }
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
            tx.commit().map_err(|e| db_failure(&e))?;
            progress(job, state.rows, Some(state.rows), "rows")?;
            return Ok(result);
        }
        progress(job, state.rows, None, "rows")?;
        if !cadence.due(job) {
            filling = Some(tx);
            continue;
        }
        let flow = job.commit_with(&checkpoints, tx, &state, state.rows);
        safe_point(flow).map_err(|f| discard_on_cancel(f, &checkpoints, &db))?;
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
