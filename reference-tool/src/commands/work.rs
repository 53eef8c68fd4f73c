//! Helpers the job work of reftool's commands shares: safe points as `?`, input files, pacing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::framework::{Ctx, Exit, Failure, Phase};
use crate::runtime::checkpoint::{CheckpointError, Flow};
use crate::runtime::context::JobContext;
use crate::runtime::progress::ProgressError;

/// A progress report; going backwards in test mode is a framework error.
pub fn progress(
    job: &mut JobContext<'_>,
    done: u64,
    total: Option<u64>,
    unit: &str,
) -> Result<(), Failure> {
    job.progress(done, total, Some(unit)).map_err(progress_failure)
}

fn progress_failure(error: ProgressError) -> Failure {
    match error {
        ProgressError::Backwards { .. } => Failure::internal(format!("framework check: {error}"))
            .context(serde_json::json!({"check": "PROGRESS_MONOTONIC"})),
        ProgressError::Io(_) => Failure::internal(error.to_string()),
    }
}

/// The outcome of a safe point: `Err(job_stopped)` when the runtime asked the work to stop.
pub fn safe_point(flow: Result<Flow, CheckpointError>) -> Result<(), Failure> {
    match flow {
        Ok(Flow::Continue) => Ok(()),
        Ok(Flow::Stop(reason)) => Err(Failure::job_stopped(reason)),
        Err(e) => Err(Failure::internal(format!("failed to save the checkpoint: {e}"))),
    }
}

/// A stop check for work without checkpoints (detach-only), after a progress report.
pub fn stop_point(job: &mut JobContext<'_>) -> Result<(), Failure> {
    match job.should_stop() {
        Some(reason) => Err(Failure::job_stopped(reason)),
        None => Ok(()),
    }
}

/// How often a paced sleep looks for a stop request.
const PACE_SLICE: Duration = Duration::from_millis(5);

/// Sleeps `REFTOOL_PACE_MS` before one unit of work. Paced work checkpoints after every unit
/// (see [`Cadence`]), so the sleep is a safe point too: a stop requested meanwhile (budget,
/// SIGTERM, cancel) is honoured within milliseconds instead of after one more unit. Unpaced
/// work does not stop here (its state may be ahead of its last checkpoint).
pub fn pace(ctx: &Ctx, job: &mut JobContext<'_>) -> Result<(), Failure> {
    if ctx.invocation.pace.is_zero() {
        return Ok(());
    }
    let until = Instant::now() + ctx.invocation.pace;
    loop {
        stop_point(job)?;
        let now = Instant::now();
        if now >= until {
            return Ok(());
        }
        std::thread::sleep((until - now).min(PACE_SLICE));
    }
}

/// The longest unpaced work goes between two checkpoints.
pub const CHECKPOINT_EVERY: Duration = Duration::from_millis(250);

/// When to checkpoint: after every unit of paced work, else every [`CHECKPOINT_EVERY`], and
/// at once when a stop is pending (the checkpoint is where it takes effect). A checkpoint per
/// 16 KiB chunk would cost an fsync each; this keeps large unpaced inputs fast.
#[derive(Debug)]
pub struct Cadence {
    last: Instant,
    paced: bool,
}

impl Cadence {
    /// A cadence for this invocation.
    pub fn new(ctx: &Ctx) -> Self {
        Cadence { last: Instant::now(), paced: !ctx.invocation.pace.is_zero() }
    }

    /// Whether to checkpoint now (and, if so, the clock restarts).
    pub fn due(&mut self, job: &mut JobContext<'_>) -> bool {
        let due =
            self.paced || self.last.elapsed() >= CHECKPOINT_EVERY || job.should_stop().is_some();
        if due {
            self.last = Instant::now();
        }
        due
    }
}

/// A required text argument.
pub fn required<'a>(ctx: &'a Ctx, name: &str) -> Result<&'a str, Failure> {
    ctx.args
        .text(name)
        .ok_or_else(|| Failure::arg("MISSING_ARGUMENT", format!("{name} is required")))
}

/// An input path that must exist: NOT_FOUND 5 otherwise.
pub fn existing(path: &str) -> Result<PathBuf, Failure> {
    let p = PathBuf::from(path);
    if std::fs::symlink_metadata(&p).is_err() {
        return Err(Failure::new(
            Exit::NOT_FOUND,
            "FILE_NOT_FOUND",
            format!("{path} does not exist"),
        )
        .phase(Phase::Validation)
        .retryable(false));
    }
    Ok(p)
}

/// A read failure of an input (the descriptor limit is told apart: no input is at fault).
pub fn read_failure(path: &Path, error: &std::io::Error) -> Failure {
    if crate::runtime::fsutil::is_out_of_descriptors(error) {
        return Failure::too_many_open_files(&format!("cannot read {}", path.display()), error);
    }
    Failure::new(
        Exit::PRECONDITION,
        "INPUT_UNREADABLE",
        format!("cannot read {}: {error}", path.display()),
    )
    .retryable(false)
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every regular file under `root`, as sorted relative paths (symlinks are not followed).
pub fn list_files(root: &Path) -> Result<Vec<PathBuf>, Failure> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            let path = entry.path();
            if kind.is_dir() {
                walk(root, &path, out)?;
            } else if kind.is_file() {
                out.push(path.strip_prefix(root).unwrap_or(&path).to_owned());
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk(root, root, &mut files).map_err(|e| read_failure(root, &e))?;
    files.sort();
    Ok(files)
}
