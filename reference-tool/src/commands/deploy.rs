//! `reftool deploy SRC --to DEST`: packs the directory `SRC` into one archive and renames it
//! into place at `DEST` atomically: a step that cannot be cut and is not worth resuming.
//!
//! Mutating, `interruption: {detach: true, resume: false}`: past the budget the work goes on
//! in a detached worker. It reports progress per file packed and stops at the next report when
//! cancelled (the partial archive is removed, `DEST` untouched).
//!
//! **Archive format** (reftool's own, simple): the line `RTAR 1\n`, then per regular file in
//! sorted path order the line `<relative path>\t<size>\n` followed by exactly `size` bytes,
//! then the line `END\n`. `DEST` only ever holds a complete archive (temp file, fsync, rename).
//!
//! The temporary file `.<name>.partial-<pid>-<random>` sits beside `DEST`, in a directory
//! others may write to, so it is created exclusively (`O_CREAT|O_EXCL|O_NOFOLLOW`): a file or
//! symlink planted under that name is never written through nor renamed into place (another
//! name is drawn), and only the file this process created is ever removed.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::work::{existing, hex, list_files, pace, progress, read_failure, required, stop_point};
use crate::framework::{
    CommandSpec, Ctx, DangerLevel, Exit, Failure, FlagSpec, Interruption, Phase, SideEffects,
    ValueType,
};
use crate::runtime::context::JobContext;

/// The declaration.
pub fn spec() -> CommandSpec {
    CommandSpec::with_job_work(
        "deploy",
        "Pack a directory into one archive and move it into place atomically",
        work,
    )
    .danger(DangerLevel::Mutating)
    .scope("deploy:write")
    .positional("src", ValueType::String, true, "The directory to deploy")
    .flag(FlagSpec::string("to", "Where the archive goes (a file path)").required())
    .interruption(Interruption {
        detach: true,
        resume: false,
        idle_timeout_ms: None,
        max_lifetime_ms: None,
    })
    .exit(Exit::SUCCESS, "The archive is in place", false, SideEffects::Complete)
    .exit(Exit::NOT_FOUND, "The source directory does not exist", false, SideEffects::None)
    .exit(
        Exit::PRECONDITION,
        "The source is not a directory, or the destination cannot be written",
        false,
        SideEffects::None,
    )
    .exit(
        Exit::INCOMPLETE,
        "The deploy continues in the background; run data.continue_command",
        false,
        SideEffects::Partial,
    )
}

fn write_failure(path: &Path, e: &std::io::Error) -> Failure {
    Failure::new(
        Exit::PRECONDITION,
        "DEST_UNWRITABLE",
        format!("cannot write {}: {e}", path.display()),
    )
}

fn work(ctx: &mut Ctx, job: &mut JobContext<'_>) -> Result<Value, Failure> {
    let src = required(ctx, "src")?.to_owned();
    let dest = required(ctx, "to")?.to_owned();
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
    let dest_path = PathBuf::from(&dest);
    let dir = dest_path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = dest_path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if name.is_empty() {
        return Err(Failure::arg("INVALID_DEST", "--to must name a file"));
    }
    let (temp, out) = create_partial(dir, &name)?;
    let result = pack(ctx, job, &root, &files, &temp, out);
    let (bytes, digest) = match result {
        Ok(done) => done,
        Err(failure) => {
            let _ = std::fs::remove_file(&temp);
            return Err(failure);
        }
    };
    if let Err(e) = std::fs::rename(&temp, &dest_path) {
        let _ = std::fs::remove_file(&temp);
        return Err(write_failure(&dest_path, &e));
    }
    progress(job, total, Some(total), "files")?;
    Ok(json!({
        "effect": "created",
        "src": src,
        "dest": dest,
        "files": total,
        "bytes": bytes,
        "sha256": digest,
    }))
}

/// How many fresh names [`create_partial`] tries before it gives up.
const PARTIAL_NAME_TRIES: usize = 8;

/// Creates the temporary archive beside the destination, exclusively: its path and the open
/// file. A name already taken (by anything, a planted symlink included) is left alone and
/// another is drawn.
fn create_partial(dir: &Path, name: &str) -> Result<(PathBuf, File), Failure> {
    for _ in 0..PARTIAL_NAME_TRIES {
        let mut random = [0u8; 8];
        getrandom::fill(&mut random)
            .map_err(|e| Failure::internal(format!("no randomness for a file name: {e}")))?;
        let temp = dir.join(format!(".{name}.partial-{}-{}", std::process::id(), hex(&random)));
        let created = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&temp);
        match created {
            Ok(file) => return Ok((temp, file)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(write_failure(&temp, &e)),
        }
    }
    Err(Failure::new(
        Exit::PRECONDITION,
        "DEST_UNWRITABLE",
        format!(
            "cannot create a temporary file in {}: {PARTIAL_NAME_TRIES} fresh names were taken",
            dir.display()
        ),
    ))
}

/// Writes the archive to `out` (the file at `temp`): its size and SHA-256.
fn pack(
    ctx: &Ctx,
    job: &mut JobContext<'_>,
    root: &Path,
    files: &[PathBuf],
    temp: &Path,
    mut out: File,
) -> Result<(u64, String), Failure> {
    let total = files.len() as u64;
    let mut hasher = Sha256::new();
    let mut bytes = 0u64;
    let mut emit = |out: &mut File, chunk: &[u8]| -> Result<(), Failure> {
        out.write_all(chunk).map_err(|e| write_failure(temp, &e))?;
        hasher.update(chunk);
        bytes += chunk.len() as u64;
        Ok(())
    };
    emit(&mut out, b"RTAR 1\n")?;
    for (i, rel) in files.iter().enumerate() {
        pace(ctx, job)?;
        let full = root.join(rel);
        let content = std::fs::read(&full).map_err(|e| read_failure(&full, &e))?;
        let name = rel.to_string_lossy().replace(['\t', '\n'], " ");
        emit(&mut out, format!("{name}\t{}\n", content.len()).as_bytes())?;
        emit(&mut out, &content)?;
        progress(job, i as u64 + 1, Some(total), "files")?;
        stop_point(job)?;
    }
    emit(&mut out, b"END\n")?;
    out.sync_all().map_err(|e| write_failure(temp, &e))?;
    Ok((bytes, hex(&hasher.finalize())))
}
