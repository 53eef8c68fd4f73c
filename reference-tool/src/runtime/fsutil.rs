//! Small file-system and clock helpers shared by the runtime modules.
//!
//! Every state file is written with [`write_atomic`]: the bytes go to a temporary file in the
//! same directory, are flushed to disk, and the temporary file is renamed over the target. A
//! reader (or a `kill -9` at any instant) sees either the old content or the new one, never a
//! torn file. The temporary file is created exclusively (`O_CREAT|O_EXCL`, so never through a
//! symlink planted under its name) with mode 0600: state files are the user's alone.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch (0 if the clock is before 1970).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The mode of every state file [`write_atomic`] writes.
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// Writes `bytes` to `path` atomically (temp file in the same directory + fsync + rename).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, bytes, Durability::Durable)
}

/// Whether an atomic write also survives a power loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// fsync the data before the rename and the directory after it: job records, outcomes,
    /// checkpoints.
    Durable,
    /// Rename only: still atomic for every reader and against `kill -9`, but a power loss may
    /// lose it. For progress, rewritten many times a second and worthless after a reboot.
    Volatile,
}

/// [`write_atomic`] with a choice of [`Durability`].
pub fn write_atomic_with(path: &Path, bytes: &[u8], durability: Durability) -> io::Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no parent"))?;
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let mut suffix = [0u8; 8];
    getrandom::fill(&mut suffix).map_err(|e| io::Error::other(e.to_string()))?;
    let tmp_name = format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        suffix.iter().map(|b| format!("{b:02x}")).collect::<String>()
    );
    let tmp = dir.join(tmp_name);
    let durable = durability == Durability::Durable;
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(PRIVATE_FILE_MODE)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)?;
        file.write_all(bytes)?;
        if durable {
            file.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        if durable {
            // Persist the rename itself; a failure here is not worth failing the write for.
            if let Ok(d) = File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Writes `value` as JSON with [`write_atomic`].
pub fn write_json_atomic<T: serde::Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let bytes = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    write_atomic(path, &bytes)
}

/// Reads a JSON file; `Ok(None)` when it does not exist.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> io::Result<Option<T>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The last `max_bytes` of a file, as lossy UTF-8 starting at a line boundary when possible.
/// Only the tail is read, however large the file.
pub fn tail(path: &Path, max_bytes: usize) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = File::open(path) else {
        return String::new();
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(max_bytes as u64);
    let mut bytes = Vec::with_capacity(max_bytes.min(1 << 20));
    if file.seek(SeekFrom::Start(start)).is_err()
        || file.take(max_bytes as u64).read_to_end(&mut bytes).is_err()
    {
        return String::new();
    }
    let mut slice = &bytes[..];
    if start > 0 {
        if let Some(nl) = slice.iter().position(|b| *b == b'\n') {
            slice = &slice[nl + 1..];
        }
    }
    String::from_utf8_lossy(slice).into_owned()
}

/// Whether `error` is the process (EMFILE) or the system (ENFILE) running out of file
/// descriptors: no path or permission is at fault, and the answer must say so.
pub fn is_out_of_descriptors(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

/// Whether this process can open no file right now (it tries `/dev/null`): how to tell the
/// descriptor limit behind an error that does not carry its errno (SQLite's "unable to open
/// database file").
pub fn out_of_descriptors_now() -> bool {
    File::open("/dev/null").is_err_and(|e| is_out_of_descriptors(&e))
}

/// The soft limit on open files of this process (`ulimit -n`), when it can be read.
pub fn descriptor_limit() -> Option<u64> {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).ok().map(|l| l.0)
}

/// The soft limit on the size of a file this process writes (`ulimit -f`), in bytes, when one
/// is set.
pub fn file_size_limit() -> Option<u64> {
    nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_FSIZE)
        .ok()
        .map(|l| l.0)
        .filter(|&bytes| bytes != nix::sys::resource::RLIM_INFINITY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        write_atomic(&path, b"one").unwrap();
        write_atomic(&path, b"two").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"two");
        let names: Vec<_> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }

    #[test]
    fn atomic_writes_are_private_and_never_follow_a_planted_symlink() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("job.json");
        write_atomic(&path, b"{}").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, PRIVATE_FILE_MODE, "{mode:o}");
        // A symlink where the target goes is replaced, not written through.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join("progress.json")).unwrap();
        write_atomic(&dir.path().join("progress.json"), b"{}").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(!std::fs::symlink_metadata(dir.path().join("progress.json")).unwrap().is_symlink());
    }

    #[test]
    fn tail_starts_at_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        std::fs::write(&path, "first line\nsecond line\nthird\n").unwrap();
        assert_eq!(tail(&path, 15), "third\n");
        assert_eq!(tail(&path, 1000), "first line\nsecond line\nthird\n");
        assert_eq!(tail(&dir.path().join("missing"), 10), "");
    }
}
