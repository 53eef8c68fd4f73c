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
//! The temporary file `.<name>.partial-<pid>-<start time>-<random>` sits beside `DEST`, in a
//! directory others may write to, so it is created exclusively (`O_CREAT|O_EXCL|O_NOFOLLOW`):
//! a file or symlink planted under that name is never written through nor renamed into place
//! (another name is drawn). It names the process that writes it (pid and start time, see
//! `runtime::process`): a worker killed mid-write cannot remove its partial archive, so the
//! next deploy to `DEST` removes every partial of `DEST` whose writer no longer runs, when it
//! is a regular file of this user. A live deploy's partial, and anything else, is left alone.
//!
//! **Mode.** An archive replacing an existing `DEST` keeps `DEST`'s permission bits (a 0600
//! destination stays 0600; the partial is created with them, so the content is never more
//! readable than the destination was); a new `DEST` gets a new file's mode (0666 less the
//! umask). The rename is made durable by an fsync of the directory.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::work::{existing, hex, list_files, pace, progress, read_failure, required, stop_point};
use crate::framework::{
    CommandSpec, Ctx, DangerLevel, Exit, Failure, FlagSpec, Interruption, Phase, SideEffects,
    ValueType,
};
use crate::runtime::context::JobContext;
use crate::runtime::process::ProcessIdentity;

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
    sweep_leftovers(dir, &name);
    // An existing destination keeps its permission bits.
    let keep_mode = std::fs::symlink_metadata(&dest_path)
        .ok()
        .filter(std::fs::Metadata::is_file)
        .map(|meta| meta.mode() & 0o777);
    let (temp, out) = create_partial(dir, &name, keep_mode)?;
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
    // The rename itself survives a crash once the directory is on disk.
    if let Ok(handle) = File::open(dir) {
        let _ = handle.sync_all();
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

/// What every partial archive of the destination `name` starts with.
fn partial_prefix(name: &str) -> String {
    format!(".{name}.partial-")
}

/// Creates the temporary archive beside the destination, exclusively: its path and the open
/// file. A name already taken (by anything, a planted symlink included) is left alone and
/// another is drawn. With `mode` (the destination's bits) it gets exactly those; without, a
/// new file's.
fn create_partial(dir: &Path, name: &str, mode: Option<u32>) -> Result<(PathBuf, File), Failure> {
    let me = ProcessIdentity::current()
        .map_err(|e| Failure::internal(format!("no process identity: {e}")))?;
    for _ in 0..PARTIAL_NAME_TRIES {
        let mut random = [0u8; 8];
        getrandom::fill(&mut random)
            .map_err(|e| Failure::internal(format!("no randomness for a file name: {e}")))?;
        let temp = dir.join(format!(
            "{}{}-{}-{}",
            partial_prefix(name),
            me.pid,
            me.start_time,
            hex(&random)
        ));
        let created = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode.unwrap_or(0o666))
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&temp);
        match created {
            Ok(file) => {
                if let Some(mode) = mode {
                    // The umask narrowed it at creation; the destination's bits are the rule.
                    let kept = file.set_permissions(std::fs::Permissions::from_mode(mode));
                    if let Err(e) = kept {
                        let _ = std::fs::remove_file(&temp);
                        return Err(write_failure(&temp, &e));
                    }
                }
                return Ok((temp, file));
            }
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

/// Removes the partial archives of `name` in `dir` that a killed deploy left: regular files of
/// this user whose writer, named in the file name, no longer runs. Best effort.
fn sweep_leftovers(dir: &Path, name: &str) {
    let prefix = partial_prefix(name);
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let uid = nix::unistd::geteuid().as_raw();
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name.to_str().and_then(|n| n.strip_prefix(&prefix)) else {
            continue;
        };
        let mut fields = rest.splitn(3, '-');
        let writer = match (fields.next(), fields.next()) {
            (Some(pid), Some(start)) => match (pid.parse(), start.parse()) {
                (Ok(pid), Ok(start_time)) => ProcessIdentity { pid, start_time },
                _ => continue,
            },
            _ => continue,
        };
        let ours = std::fs::symlink_metadata(entry.path())
            .is_ok_and(|meta| meta.file_type().is_file() && meta.uid() == uid);
        if ours && !writer.is_alive() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
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
