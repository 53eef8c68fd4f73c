//! `reftool analyze FILE`: statistics over a CSV file (a header row, then data rows): the row
//! count, and per column the count, mean, min and max of its numeric values.
//!
//! Safe, `interruption: {detach: true, resume: true}`: the file is read in chunks of
//! [`CHUNK_BYTES`] (one unit of pacing each); after each chunk the work reports progress in
//! bytes read and, for a regular file, checkpoints its running totals and the offset of the
//! first line not yet counted (keyed by the file's fingerprint: size, mtime, inode). A resumed
//! run seeks to that offset and gives the result an uninterrupted run gives.
//!
//! Progress counts bytes read, not bytes of complete lines, so it moves inside a line of any
//! length (a line of hundreds of MB must not look idle to the watchdog). The checkpoint's
//! `done` is that count too; a run resumed inside a line reads the line's start again and
//! reports no less than the checkpoint's `done` meanwhile, so `done` never decreases. Each
//! byte is scanned for the end of a line once (the bytes of an unfinished line are not
//! scanned again as more of it arrives), so the work is linear in the line's length. `FILE` may be `-` (stdin, spooled
//! into the job first) or a named pipe: a pipe cannot be resumed, and a pipe whose writer goes
//! quiet stops the progress, which the idle watchdog ends with STALLED.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::work::{
    Cadence, existing, pace, progress, read_failure, required, safe_point, stop_point,
};
use crate::framework::{
    Args, CommandSpec, Ctx, Exit, Failure, Interruption, SideEffects, ValueType,
};
use crate::runtime::checkpoint::file_fingerprint;
use crate::runtime::context::JobContext;
use crate::runtime::identity::digest_file;

/// Bytes read per unit of work.
pub const CHUNK_BYTES: usize = 16 * 1024;

/// The declaration.
pub fn spec() -> CommandSpec {
    CommandSpec::with_job_work(
        "analyze",
        "Compute statistics over a CSV file: rows, and count/mean/min/max per numeric column",
        work,
    )
    .positional("file", ValueType::String, true, "The CSV file (header row first); - reads stdin")
    .fingerprint(fingerprint_of)
    .interruption(Interruption {
        detach: true,
        resume: true,
        idle_timeout_ms: None,
        max_lifetime_ms: None,
    })
    .exit(Exit::SUCCESS, "The statistics are computed", false, SideEffects::Complete)
    .exit(Exit::NOT_FOUND, "The file does not exist", false, SideEffects::None)
    .exit(
        Exit::PRECONDITION,
        "The file cannot be read, or is not UTF-8 CSV text",
        false,
        SideEffects::None,
    )
    .exit(
        Exit::TIMEOUT,
        "The work stopped: no progress for idle_timeout_ms (STALLED), or past --timeout",
        false,
        SideEffects::None,
    )
    .exit(
        Exit::INCOMPLETE,
        "The work continues in the background; run data.continue_command",
        true,
        SideEffects::None,
    )
}

/// Running statistics of one column.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ColumnStats {
    /// The header name.
    pub name: String,
    /// Numeric values seen.
    pub count: u64,
    /// Their sum.
    pub sum: f64,
    /// Smallest value.
    pub min: Option<f64>,
    /// Largest value.
    pub max: Option<f64>,
}

/// The checkpointed state: where the next line starts and the totals so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AnalyzeState {
    /// Bytes of complete lines consumed.
    pub offset: u64,
    /// Data rows seen.
    pub rows: u64,
    /// One entry per header column (empty until the header is read).
    pub columns: Vec<ColumnStats>,
}

impl AnalyzeState {
    fn line(&mut self, line: &[u8]) -> Result<(), Failure> {
        let text = std::str::from_utf8(line).map_err(|_| {
            Failure::new(Exit::PRECONDITION, "INPUT_NOT_TEXT", "the file is not UTF-8 text")
        })?;
        let text = text.trim_end_matches('\r');
        if self.columns.is_empty() {
            self.columns = text
                .split(',')
                .map(|name| ColumnStats { name: name.trim().to_owned(), ..ColumnStats::default() })
                .collect();
            return Ok(());
        }
        if text.trim().is_empty() {
            return Ok(());
        }
        self.rows += 1;
        for (column, field) in self.columns.iter_mut().zip(text.split(',')) {
            if let Ok(v) = field.trim().parse::<f64>()
                && v.is_finite()
            {
                column.count += 1;
                column.sum += v;
                column.min = Some(column.min.map_or(v, |m| m.min(v)));
                column.max = Some(column.max.map_or(v, |m| m.max(v)));
            }
        }
        Ok(())
    }

    fn result(&self, file: &str) -> Value {
        let columns: Vec<Value> = self
            .columns
            .iter()
            .map(|c| {
                let mean = (c.count > 0).then(|| c.sum / c.count as f64);
                json!({"name": c.name, "count": c.count, "mean": mean, "min": c.min, "max": c.max})
            })
            .collect();
        json!({"file": file, "rows": self.rows, "bytes": self.offset, "columns": columns})
    }
}

/// The checkpoint's input fingerprint: size, mtime and inode of a file; the content's digest
/// for stdin (its spool is renewed with each job).
fn input_fingerprint(file: &str, path: &Path) -> std::io::Result<String> {
    if file == "-" {
        digest_file(path).map(|d| format!("sha256:{d}"))
    } else {
        file_fingerprint(path)
    }
}

/// [`input_fingerprint`] from the arguments, for the framework (regular files only).
fn fingerprint_of(args: &Args, stdin: Option<&Path>) -> Option<String> {
    let file = args.text("file")?;
    let path = if file == "-" { stdin?.to_owned() } else { PathBuf::from(file) };
    if !std::fs::metadata(&path).ok()?.is_file() {
        return None;
    }
    input_fingerprint(file, &path).ok()
}

fn work(ctx: &mut Ctx, job: &mut JobContext<'_>) -> Result<Value, Failure> {
    let file = required(ctx, "file")?.to_owned();
    let path: PathBuf = if file == "-" {
        job.stdin_path().ok_or_else(|| Failure::internal("stdin was not spooled"))?
    } else {
        existing(&file)?
    };
    let meta = std::fs::metadata(&path).map_err(|e| read_failure(&path, &e))?;
    let regular = meta.is_file();
    let total = regular.then_some(meta.len());
    let fingerprint = input_fingerprint(&file, &path).map_err(|e| read_failure(&path, &e))?;
    let checkpoints = job.file_checkpoints(fingerprint);
    let mut state = AnalyzeState::default();
    // The checkpoint's `done`: the progress floor while the start of a line is read again.
    let mut resumed_done = 0;
    if regular {
        let restored = checkpoints
            .restore::<AnalyzeState>()
            .map_err(|e| Failure::internal(format!("failed to read the checkpoint: {e}")))?;
        for w in &restored.warnings {
            ctx.warn(w.code, w.message.clone());
        }
        if let Some(saved) = restored.state {
            state = saved;
        }
        resumed_done = restored.done.max(state.offset);
        job.resume_from(resumed_done).map_err(|e| Failure::internal(e.to_string()))?;
    }
    let mut input = File::open(&path).map_err(|e| read_failure(&path, &e))?;
    if state.offset > 0 {
        input.seek(SeekFrom::Start(state.offset)).map_err(|e| read_failure(&path, &e))?;
    }
    let mut pending: Vec<u8> = Vec::new();
    let mut cadence = Cadence::new(ctx);
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        pace(ctx, job)?;
        let n = input.read(&mut buf).map_err(|e| read_failure(&path, &e))?;
        if n == 0 {
            break;
        }
        // `pending` holds no line end before `scanned`: only the new bytes are searched.
        let scanned = pending.len();
        pending.extend_from_slice(&buf[..n]);
        let mut start = 0;
        let mut from = scanned;
        while let Some(pos) = pending[from..].iter().position(|b| *b == b'\n') {
            let end = from + pos;
            state.line(&pending[start..end])?;
            start = end + 1;
            from = start;
        }
        state.offset += start as u64;
        // At most one chunk is left after a line end, so moving it down stays linear.
        pending.drain(..start);
        let read = (state.offset + pending.len() as u64).max(resumed_done);
        progress(job, read, total, "bytes")?;
        if regular {
            if cadence.due(job) {
                safe_point(job.checkpoint(&checkpoints, &state, read))?;
            }
        } else {
            stop_point(job)?;
        }
    }
    if !pending.is_empty() {
        state.line(&pending)?;
        state.offset += pending.len() as u64;
    }
    progress(job, state.offset, total.or(Some(state.offset)), "bytes")?;
    let _ = checkpoints.remove();
    Ok(state.result(&file))
}
