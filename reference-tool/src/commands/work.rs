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

/// Sleeps `REFTOOL_PACE_MS` before one unit of work, and is a safe point itself: call it only
/// where the state equals the last checkpoint (before the first unit, or right after a
/// checkpoint), so a stop requested meanwhile (budget, SIGTERM, cancel) is honoured at once
/// instead of after one more unit.
pub fn pace(ctx: &Ctx, job: &mut JobContext<'_>) -> Result<(), Failure> {
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

/// A read failure of an input.
pub fn read_failure(path: &Path, error: &std::io::Error) -> Failure {
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
