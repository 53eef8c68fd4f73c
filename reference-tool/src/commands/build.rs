//! `reftool build [--src DIR]`: an index of a source tree (files, bytes, and a tree digest:
//! SHA-256 over `<path>\0<sha256 of the file>\n` in sorted path order), computed as a
//! background job.
//!
//! `async: true` (REQ-C-022): the call answers a job descriptor at once
//! (`schemas/job-descriptor.json`); `job status ID` exits 14 while the job runs and gives the
//! final response once it ended; `job wait ID` waits for it within its budget. No
//! interruption is declared (an async command never does). One unit of pacing per file.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::work::{existing, hex, list_files, pace, progress, read_failure, stop_point};
use crate::framework::{CommandSpec, Ctx, Exit, Failure, FlagSpec, Phase, SideEffects};
use crate::runtime::context::JobContext;

/// The declaration.
pub fn spec() -> CommandSpec {
    CommandSpec::with_job_work(
        "build",
        "Index a source tree (files, bytes, tree digest) as a background job",
        work,
    )
    .flag(FlagSpec::string("src", "The source directory (default: the working directory)"))
    .asynchronous()
    .timeout_ms(3_600_000)
    .exit(
        Exit::SUCCESS,
        "The job is started: data is its job descriptor (and, from job wait, the index)",
        false,
        SideEffects::None,
    )
    .exit(Exit::NOT_FOUND, "The source directory does not exist", false, SideEffects::None)
    .exit(
        Exit::PRECONDITION,
        "The source is not a readable directory",
        false,
        SideEffects::None,
    )
}

fn work(ctx: &mut Ctx, job: &mut JobContext<'_>) -> Result<Value, Failure> {
    let src = ctx.args.text("src").unwrap_or(".").to_owned();
    let root = existing(&src)?;
    if !root.is_dir() {
        return Err(Failure::new(
            Exit::PRECONDITION,
            "NOT_A_DIRECTORY",
            format!("{src} is not a directory"),
        )
        .phase(Phase::Validation));
    }
    let files = list_files(&root)?;
    let total = files.len() as u64;
    progress(job, 0, Some(total), "files")?;
    let mut tree = Sha256::new();
    let mut bytes = 0u64;
    for (i, rel) in files.iter().enumerate() {
        pace(ctx, job)?;
        let full = root.join(rel);
        let content = std::fs::read(&full).map_err(|e| read_failure(&full, &e))?;
        bytes += content.len() as u64;
        tree.update(rel.to_string_lossy().as_bytes());
        tree.update(b"\0");
        tree.update(hex(&Sha256::digest(&content)).as_bytes());
        tree.update(b"\n");
        progress(job, i as u64 + 1, Some(total), "files")?;
        stop_point(job)?;
    }
    Ok(json!({"src": src, "files": total, "bytes": bytes, "tree_sha256": hex(&tree.finalize())}))
}
