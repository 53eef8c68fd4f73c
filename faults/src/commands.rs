//! Faults in a command's work: reftool's command, its work wrapped, so that its checkpoint is
//! moved, kept or dropped around the reference work.
//!
//! The wrapper runs in the process that runs the work (a resume-only call's front, or a
//! detached job's worker) with the same job context, before or after reftool's work.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::Arc;

use reftool::commands::digest::DigestState;
use reftool::commands::import::{CHUNK_ROWS, DEFAULT_TABLE, ImportState};
use reftool::framework::registry::JobRunFn;
use reftool::framework::userdb;
use reftool::framework::{CommandSpec, Ctx, Failure};
use reftool::runtime::checkpoint::{SavedCheckpoint, file_fingerprint};
use reftool::runtime::context::JobContext;
use reftool::runtime::fsutil::{read_json, write_json_atomic};
use reftool::runtime::sha256::Sha256;
use reftool::runtime::target::TargetClaims;
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;

use crate::Fault;
use crate::narrow::{Ahead, ahead_path};

/// reftool's commands with the work of `fault`'s command wrapped.
pub fn specs(fault: Option<Fault>) -> Vec<CommandSpec> {
    let mut specs = reftool::commands::specs();
    let Some(fault) = fault else { return specs };
    for spec in &mut specs {
        match (spec.path.as_str(), fault) {
            (
                "digest",
                Fault::CompletedCheckpointKept
                | Fault::KilledReaderStartsOver
                | Fault::ChangedInputKeepsCheckpoint,
            )
            | (
                "import",
                Fault::CheckpointLagsItsRows
                | Fault::ResumeSkipsAChunk
                | Fault::TwoTransactionCommit
                | Fault::CheckpointFirst,
            ) => {
                wrap(spec, fault);
            }
            ("analyze", Fault::LostJobRestartsFromZero) => {
                // No fingerprint: the front seeds no progress from the checkpoint of a new
                // job, and the worker (below) throws the checkpoint away.
                spec.checkpoint_fingerprint = None;
                wrap(spec, fault);
            }
            _ => {}
        }
    }
    specs
}

/// Wraps the job work of `spec` in `fault`'s.
fn wrap(spec: &mut CommandSpec, fault: Fault) {
    let Some(reference) = spec.job_run.clone() else { return };
    let wrapped: JobRunFn = Arc::new(move |ctx, job| around(fault, &reference, ctx, job));
    spec.job_run = Some(wrapped);
}

/// The reference work `work` with `fault` before and after it.
fn around(
    fault: Fault,
    work: &JobRunFn,
    ctx: &mut Ctx,
    job: &mut JobContext<'_>,
) -> Result<Value, Failure> {
    let file = ctx.args.text("file").unwrap_or_default().to_owned();
    match fault {
        // A new job (nothing published yet: the one after a killed run) starts over.
        Fault::KilledReaderStartsOver if job.job().progress.done == 0 => {
            let _ = job.file_checkpoints("").remove();
        }
        // Every worker starts over, the one after a lost job included.
        Fault::LostJobRestartsFromZero => {
            let _ = job.file_checkpoints("").remove();
        }
        Fault::ChangedInputKeepsCheckpoint => keep_for_the_input(job, Path::new(&file)),
        Fault::CheckpointLagsItsRows | Fault::ResumeSkipsAChunk => {
            let db = ctx.args.text("db").unwrap_or_default().to_owned();
            let moved = if fault == Fault::CheckpointLagsItsRows { -1 } else { 1 };
            let _ = move_import_checkpoint(job, Path::new(&file), &db, moved);
        }
        Fault::TwoTransactionCommit | Fault::CheckpointFirst => {
            let db = ctx.args.text("db").unwrap_or_default().to_owned();
            let table = ctx.args.text("table").unwrap_or(DEFAULT_TABLE).to_owned();
            let _ = trust_own_checkpoint(job, &db, &table, fault == Fault::CheckpointFirst);
        }
        _ => {}
    }
    let result = work(ctx, job);
    if fault == Fault::CompletedCheckpointKept
        && let Ok(data) = &result
    {
        keep_completed_digest(job, Path::new(&file), data);
    }
    result
}

/// [`Fault::ChangedInputKeepsCheckpoint`]: the saved checkpoint is made the current input's,
/// so a changed input resumes from it.
fn keep_for_the_input(job: &JobContext<'_>, input: &Path) {
    let Ok(fingerprint) = file_fingerprint(input) else { return };
    let checkpoints = job.file_checkpoints(fingerprint.clone());
    let Ok(Some(mut saved)) = read_json::<SavedCheckpoint>(checkpoints.path()) else { return };
    if saved.fingerprint != fingerprint {
        saved.fingerprint = fingerprint;
        let _ = write_json_atomic(checkpoints.path(), &saved);
    }
}

/// [`Fault::CompletedCheckpointKept`]: `digest` saves the state it ends in as its checkpoint,
/// so the identical invocation finishes at once from it.
fn keep_completed_digest(job: &JobContext<'_>, input: &Path, data: &Value) {
    let Some(bytes) = data.get("bytes").and_then(Value::as_u64) else { return };
    let Ok(fingerprint) = file_fingerprint(input) else { return };
    // The hash state at the end of the input: the input hashed again, to its end.
    let Ok(mut file) = File::open(input) else { return };
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(_) => return,
        }
    }
    if hasher.length() != bytes {
        return;
    }
    let state = DigestState { offset: bytes, sha256: hasher.state() };
    let _ = job.file_checkpoints(fingerprint).save(&state, bytes);
}

/// [`Fault::CheckpointLagsItsRows`] (`chunks` -1) and [`Fault::ResumeSkipsAChunk`] (+1): the
/// import's checkpoint, committed with the rows it records, is moved by a chunk before the
/// import resumes from it, so the resume writes a chunk again or never writes it.
fn move_import_checkpoint(
    job: &JobContext<'_>,
    csv: &Path,
    db: &str,
    chunks: i64,
) -> Result<(), Box<dyn std::error::Error>> {
    let db = userdb::db_path(db).map_err(|f| f.message)?;
    if !db.is_file() {
        return Ok(());
    }
    let conn = Connection::open(db)?;
    let identity = job.job().record.identity.as_str();
    let row: Option<(String, i64)> = conn
        .query_row(
            "SELECT state, completed FROM reftool_checkpoints WHERE identity = ?1",
            params![identity],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((state, 0)) = row else { return Ok(()) };
    let state: ImportState = serde_json::from_str(&state)?;
    let chunk = CHUNK_ROWS as u64;
    let wanted = if chunks < 0 { state.rows.saturating_sub(chunk) } else { state.rows + chunk };
    let (offset, rows) = offset_of_row(csv, wanted)?;
    let moved = ImportState { offset, rows };
    conn.execute(
        "UPDATE reftool_checkpoints SET state = ?2, done = ?3 WHERE identity = ?1",
        params![identity, serde_json::to_string(&moved)?, i64::try_from(moved.rows)?],
    )?;
    Ok(())
}

/// The byte offset in `csv` after its header and `rows` data rows (blank lines are no rows),
/// as the import counts it, and the rows before it (fewer at the end of the file).
fn offset_of_row(csv: &Path, rows: u64) -> std::io::Result<(u64, u64)> {
    let mut input = BufReader::new(File::open(csv)?);
    let mut line = String::new();
    let mut offset = input.read_line(&mut line)? as u64;
    let mut seen = 0;
    while seen < rows {
        line.clear();
        let n = input.read_line(&mut line)?;
        if n == 0 {
            break;
        }
        offset += n as u64;
        if !line.trim().is_empty() {
            seen += 1;
        }
    }
    Ok((offset, seen))
}

/// [`Fault::TwoTransactionCommit`] and [`Fault::CheckpointFirst`]: before the import resumes,
/// its checkpoint is taken from the file the checkpoint was written to first, when it is
/// there (`ahead`), and a checkpoint of this writer's own claim on the table is re-keyed to
/// the rows the table holds: the resume trusts its checkpoint where reftool's, naming the
/// table's fill, would be discarded.
fn trust_own_checkpoint(
    job: &JobContext<'_>,
    db: &str,
    table: &str,
    ahead: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let db = userdb::db_path(db).map_err(|f| f.message)?;
    if !db.is_file() {
        return Ok(());
    }
    let conn = Connection::open(&db)?;
    let record = &job.job().record;
    let identity = record.identity.as_str();
    let first = ahead_path(&db);
    if ahead && let Ok(Some(file)) = read_json::<Ahead>(&first) {
        if file.identity.as_str() == identity {
            let saved = file.saved;
            conn.execute(
                "UPDATE reftool_checkpoints SET fingerprint = ?2, job_id = ?3, done = ?4,
                     state = ?5, saved_at_ms = ?6, completed = 0 WHERE identity = ?1",
                params![
                    identity,
                    saved.fingerprint,
                    saved.job_id,
                    i64::try_from(saved.done)?,
                    serde_json::to_string(&saved.state)?,
                    i64::try_from(saved.saved_at_ms)?
                ],
            )?;
        }
        std::fs::remove_file(&first)?;
    }
    let row: Option<(String, i64)> = conn
        .query_row(
            "SELECT fingerprint, completed FROM reftool_checkpoints WHERE identity = ?1",
            params![identity],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let Some((fingerprint, 0)) = row else { return Ok(()) };
    let target = TargetClaims::new(table, record.identity.clone(), record.job_id.clone());
    let Some(claim) = target.current(&conn)? else { return Ok(()) };
    let Some((input, _)) = fingerprint.split_once(";claim=") else { return Ok(()) };
    // `claim=<stamp>;filled=`: the state of this claim, whatever its fill.
    let any_fill = TargetClaims::state(&claim.stamp, 0);
    let any_fill = any_fill.strip_suffix('0').unwrap_or(&any_fill);
    if !fingerprint.starts_with(&format!("{input};{any_fill}")) {
        // Another claim's table (refilled, dropped): reftool's own rule discards it.
        return Ok(());
    }
    let sql = format!("SELECT coalesce(max(_line), 0) FROM \"{}\"", table.replace('"', "\"\""));
    let filled: i64 = conn.query_row(&sql, [], |r| r.get(0))?;
    let rekeyed = format!("{input};{}", TargetClaims::state(&claim.stamp, u64::try_from(filled)?));
    conn.execute(
        "UPDATE reftool_checkpoints SET fingerprint = ?2 WHERE identity = ?1",
        params![identity, rekeyed],
    )?;
    Ok(())
}
