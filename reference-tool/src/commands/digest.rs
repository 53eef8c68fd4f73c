//! `reftool digest FILE`: the SHA-256 of a file, read in chunks of [`CHUNK_BYTES`].
//!
//! Safe, `interruption: {detach: false, resume: true}`: the work runs in the caller's process
//! and, once the budget is spent, stops at its next checkpoint (INCOMPLETE `paused`); the
//! identical invocation continues.
//!
//! **The checkpoint.** sha2's hasher state cannot be serialized, so the checkpoint holds the
//! offset reached and the SHA-256 of the prefix up to it. A resumed run re-hashes the prefix
//! (unpaced: reading is cheap, the pacing stands for expensive work) and checks it against
//! the saved prefix digest before going on; a mismatch (the file changed in place without a
//! new size, mtime or inode) discards the checkpoint with `CHECKPOINT_DISCARDED` and starts
//! over. The result is therefore the real SHA-256 of the file, the value `sha256sum` prints,
//! whether or not the work was interrupted.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::work::{Cadence, existing, hex, pace, progress, read_failure, required, safe_point};
use crate::framework::{CommandSpec, Ctx, Exit, Failure, Interruption, SideEffects, ValueType};
use crate::runtime::checkpoint::{FileCheckpoints, file_fingerprint};
use crate::runtime::context::JobContext;

/// Bytes hashed per unit of work.
pub const CHUNK_BYTES: usize = 64 * 1024;

/// The declaration.
pub fn spec() -> CommandSpec {
    CommandSpec::with_job_work("digest", "Compute the SHA-256 of a file, in chunks", work)
        .positional("file", ValueType::String, true, "The file to hash")
        .interruption(Interruption {
            detach: false,
            resume: true,
            idle_timeout_ms: None,
            max_lifetime_ms: None,
        })
        .exit(Exit::SUCCESS, "The digest is computed", false, SideEffects::Complete)
        .exit(Exit::NOT_FOUND, "The file does not exist", false, SideEffects::None)
        .exit(Exit::PRECONDITION, "The file cannot be read", false, SideEffects::None)
        .exit(
            Exit::INCOMPLETE,
            "Paused at a checkpoint; run data.continue_command to go on",
            true,
            SideEffects::None,
        )
}

/// The checkpointed state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DigestState {
    /// Bytes hashed.
    pub offset: u64,
    /// SHA-256 (hex) of those bytes.
    pub prefix_sha256: String,
}

fn work(ctx: &mut Ctx, job: &mut JobContext<'_>) -> Result<Value, Failure> {
    let file = required(ctx, "file")?.to_owned();
    let path = existing(&file)?;
    let meta = std::fs::metadata(&path).map_err(|e| read_failure(&path, &e))?;
    if !meta.is_file() {
        return Err(Failure::new(
            Exit::PRECONDITION,
            "NOT_A_FILE",
            format!("{file} is not a regular file"),
        ));
    }
    let total = meta.len();
    let fingerprint = file_fingerprint(&path).map_err(|e| read_failure(&path, &e))?;
    let checkpoints = job.file_checkpoints(fingerprint);
    let restored = checkpoints
        .restore::<DigestState>()
        .map_err(|e| Failure::internal(format!("failed to read the checkpoint: {e}")))?;
    for w in &restored.warnings {
        ctx.warn(w.code, w.message.clone());
    }
    let mut input = File::open(&path).map_err(|e| read_failure(&path, &e))?;
    let mut cadence = Cadence::new(ctx);
    let mut buf = vec![0u8; CHUNK_BYTES];
    let resumed = Resume { path: &path, checkpoints: &checkpoints, saved: restored.state };
    let (mut hasher, mut offset) = resumed.run(ctx, job, &mut input, &mut buf)?;
    loop {
        pace(ctx, job)?;
        let n = input.read(&mut buf).map_err(|e| read_failure(&path, &e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        offset += n as u64;
        progress(job, offset, Some(total.max(offset)), "bytes")?;
        if cadence.due(job) {
            let state = DigestState { offset, prefix_sha256: hex(&hasher.clone().finalize()) };
            safe_point(job.checkpoint(&checkpoints, &state, offset))?;
        }
    }
    let _ = checkpoints.remove();
    Ok(json!({"file": file, "bytes": offset, "sha256": hex(&hasher.finalize())}))
}

/// Where a run starts: after the checkpointed prefix, when the file still has it.
struct Resume<'a> {
    path: &'a Path,
    checkpoints: &'a FileCheckpoints,
    saved: Option<DigestState>,
}

impl Resume<'_> {
    /// Re-hashes the checkpointed prefix of `input`: a match goes on after it, a mismatch (the
    /// file changed in place) discards the checkpoint and starts over. Returns the hasher and
    /// the offset to go on from.
    fn run(
        self,
        ctx: &mut Ctx,
        job: &mut JobContext<'_>,
        input: &mut File,
        buf: &mut [u8],
    ) -> Result<(Sha256, u64), Failure> {
        let path = self.path;
        let mut hasher = Sha256::new();
        let Some(saved) = self.saved else {
            return Ok((hasher, 0));
        };
        let mut prefix = (&mut *input).take(saved.offset);
        let mut hashed = 0u64;
        loop {
            let n = prefix.read(buf).map_err(|e| read_failure(path, &e))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            hashed += n as u64;
        }
        if hashed == saved.offset && hex(&hasher.clone().finalize()) == saved.prefix_sha256 {
            job.resume_from(saved.offset).map_err(|e| Failure::internal(e.to_string()))?;
            return Ok((hasher, saved.offset));
        }
        ctx.warn(
            "CHECKPOINT_DISCARDED",
            "The file's content changed since the checkpoint; started over",
        );
        let _ = self.checkpoints.remove();
        *input = File::open(path).map_err(|e| read_failure(path, &e))?;
        Ok((Sha256::new(), 0))
    }
}
