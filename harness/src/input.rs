//! Foundation: the files a user hands conform (the profile, the baseline, stored snapshots),
//! read within bounds.
//!
//! `--profile /dev/zero` would otherwise grow without end, and a FIFO would block the read (or
//! its very opening) forever. [`read_text`] opens without blocking, takes only a regular file
//! (a symbolic link the user named is followed to one), reads at most its limit and says so when
//! the file is larger, and wants UTF-8: each way it fails is an [`InputError`], which the
//! caller reports as a bad invocation.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The most conform reads of a profile or a baseline: far more than any hand-written one.
pub const TEXT_LIMIT: u64 = 1 << 20;

/// Why a file conform was given cannot be read. The message names no path: the caller's
/// sentence does ("failed to read the baseline FILE: a FIFO, not a regular file").
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The system refused to open or read it.
    #[error("{0}")]
    Io(#[source] io::Error),
    /// It is a FIFO, a device, a socket or a directory.
    #[error("a {0}, not a regular file; give a file")]
    NotAFile(&'static str),
    /// It holds more than conform reads.
    #[error("larger than {0} bytes, the most conform reads of it")]
    TooLarge(u64),
    /// It is not UTF-8 text.
    #[error("not UTF-8 text")]
    NotText,
}

impl InputError {
    /// Whether the file is not there at all.
    pub fn is_not_found(&self) -> bool {
        matches!(self, InputError::Io(source) if source.kind() == io::ErrorKind::NotFound)
    }
}

/// What a file that is not a regular one is, for the message.
pub fn kind_of(file_type: std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "directory"
    } else if file_type.is_fifo() {
        "FIFO"
    } else if file_type.is_char_device() {
        "character device"
    } else if file_type.is_block_device() {
        "block device"
    } else if file_type.is_socket() {
        "socket"
    } else {
        "special file"
    }
}

/// Opens `path` for reading without blocking on a FIFO, and checks it is a regular file.
fn open_regular(path: &Path) -> Result<File, InputError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(InputError::Io)?;
    let file_type = file.metadata().map_err(InputError::Io)?.file_type();
    if !file_type.is_file() {
        return Err(InputError::NotAFile(kind_of(file_type)));
    }
    Ok(file)
}

/// The text of the regular file `path`, at most `limit` bytes of UTF-8.
pub fn read_text(path: &Path, limit: u64) -> Result<String, InputError> {
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes).map_err(InputError::Io)?;
    if bytes.len() as u64 > limit {
        return Err(InputError::TooLarge(limit));
    }
    String::from_utf8(bytes).map_err(|_| InputError::NotText)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regular_file_within_the_limit_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.toml");
        std::fs::write(&path, "x = 1\n").unwrap();
        assert_eq!(read_text(&path, 6).unwrap(), "x = 1\n");
        let err = read_text(&path, 5).unwrap_err();
        assert!(matches!(err, InputError::TooLarge(5)), "{err}");
        std::fs::write(&path, b"\xff").unwrap();
        assert!(matches!(read_text(&path, 5), Err(InputError::NotText)));
        assert!(read_text(&dir.path().join("none"), 5).unwrap_err().is_not_found());
    }

    #[test]
    fn a_device_a_fifo_and_a_directory_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        for (path, kind) in [
            (Path::new("/dev/zero"), "character device"),
            (fifo.as_path(), "FIFO"),
            (dir.path(), "directory"),
        ] {
            match read_text(path, TEXT_LIMIT) {
                Err(InputError::NotAFile(k)) => assert_eq!(k, kind),
                other => panic!("{}: {other:?}", path.display()),
            }
        }
    }
}
