//! `reftool digest FILE`: the SHA-256 of a file, read in chunks of [`CHUNK_BYTES`].
//!
//! Safe, `interruption: {detach: false, resume: true}`: the work runs in the caller's process
//! and, once the budget is spent, stops at its next checkpoint (INCOMPLETE `paused`); the
//! identical invocation continues.
//!
//! **The checkpoint.** It holds the offset reached and the SHA-256 computation's own state at
//! that offset (the chaining value, the length and an unfinished block: [`Sha256State`], a
//! hundred bytes), so a resumed run seeks to the offset and goes on hashing: each call does
//! the work its budget pays for, however far into a large file it resumes. (It used to hold
//! the digest of the prefix, which `sha2` cannot resume from: every continuation hashed the
//! whole prefix again, and on a large file a call's budget went to that alone.) The input is
//! recognised by its fingerprint (size, modification time, inode: a changed file discards the
//! checkpoint with `CHECKPOINT_DISCARDED` and starts over); a state that cannot be restored
//! is discarded the same way. The result is the real SHA-256 of the file, the value
//! `sha256sum` prints, whether or not the work was interrupted.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::work::{Cadence, existing, hex, pace, progress, read_failure, required, safe_point};
use crate::framework::{CommandSpec, Ctx, Exit, Failure, Interruption, SideEffects, ValueType};
use crate::runtime::checkpoint::file_fingerprint;
use crate::runtime::context::JobContext;
use crate::runtime::sha256::{Sha256, Sha256State};

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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DigestState {
    /// Bytes hashed.
    pub offset: u64,
    /// The SHA-256 computation after those bytes.
    pub sha256: Sha256State,
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
    let (mut hasher, mut offset) = match restored.state {
        None => (Sha256::new(), 0),
        Some(saved) => match Sha256::from_state(&saved.sha256) {
            Ok(hasher) if hasher.length() == saved.offset => {
                input.seek(SeekFrom::Start(saved.offset)).map_err(|e| read_failure(&path, &e))?;
                job.resume_from(saved.offset).map_err(|e| Failure::internal(e.to_string()))?;
                (hasher, saved.offset)
            }
            _ => {
                ctx.warn(
                    "CHECKPOINT_DISCARDED",
                    format!(
                        "The checkpoint {} holds no hash state to resume from; started over",
                        checkpoints.path().display()
                    ),
                );
                let _ = checkpoints.remove();
                (Sha256::new(), 0)
            }
        },
    };
    let mut cadence = Cadence::new(ctx);
    let mut buf = vec![0u8; CHUNK_BYTES];
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
            let state = DigestState { offset, sha256: hasher.state() };
            safe_point(job.checkpoint(&checkpoints, &state, offset))?;
        }
    }
    let _ = checkpoints.remove();
    Ok(json!({"file": file, "bytes": offset, "sha256": hex(&hasher.finalize())}))
}
