//! Copying the caller's stdin into a spool, within bounds.
//!
//! A command that reads stdin (an argument `-` where it declares one) gets it as a file: the
//! front process copies stdin into a spool in the state dir before the job exists, because
//! the digest of those bytes joins the job's identity and a detached worker reads the copy
//! after the caller has gone. The copy is part of the call, so it is bounded like the call:
//!
//! - by a size cap, [`SpoolLimits::max_bytes`] ([`MAX_STDIN_ENV`], default
//!   [`DEFAULT_MAX_STDIN_BYTES`]): an input past it ends the copy with
//!   [`SpoolError::TooLarge`] (REQ-F-054's pattern: such an input belongs in a file passed
//!   by name);
//! - by a deadline, the call budget or the wall-clock limit from the call's start: a stdin
//!   that has not ended by then ends the copy with [`SpoolError::TooSlow`];
//! - by SIGTERM ([`SpoolError::Interrupted`]).
//!
//! Every error leaves no spool behind ([`crate::runtime::jobs::JobStore::spool_stdin`]
//! removes it).

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// The environment variable that sets the cap, in bytes (tests lower it).
pub const MAX_STDIN_ENV: &str = "REFTOOL_MAX_STDIN_BYTES";
/// The cap when [`MAX_STDIN_ENV`] is unset: 64 MiB.
pub const DEFAULT_MAX_STDIN_BYTES: u64 = 64 * 1024 * 1024;
/// How long one wait for input lasts at most, so that a SIGTERM is seen promptly.
const WAIT_SLICE: Duration = Duration::from_millis(100);
/// Bytes read at once.
const CHUNK: usize = 64 * 1024;

/// The bounds of one copy.
#[derive(Debug, Clone, Copy)]
pub struct SpoolLimits<'a> {
    /// The most bytes stdin may hold.
    pub max_bytes: u64,
    /// When stdin must have ended; `None`: no deadline.
    pub deadline: Option<Instant>,
    /// A flag that stops the copy when raised (SIGTERM).
    pub interrupt: Option<&'a AtomicBool>,
}

/// Why a copy ended without the whole of stdin.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    /// stdin holds more than the cap.
    #[error("stdin holds more than {limit} bytes")]
    TooLarge {
        /// The cap.
        limit: u64,
    },
    /// stdin did not end before the deadline.
    #[error("stdin did not end in time ({received} bytes read)")]
    TooSlow {
        /// Bytes read until then.
        received: u64,
    },
    /// The interrupt flag was raised.
    #[error("interrupted while reading stdin ({received} bytes read)")]
    Interrupted {
        /// Bytes read until then.
        received: u64,
    },
    /// Reading stdin or writing the spool failed.
    #[error("failed to spool stdin: {0}")]
    Io(#[from] io::Error),
}

/// A cap from [`MAX_STDIN_ENV`], a whole number of bytes of at least 1, or the default.
/// `Err` holds the malformed value.
pub fn max_stdin_bytes() -> Result<u64, String> {
    let Some(raw) = std::env::var_os(MAX_STDIN_ENV) else {
        return Ok(DEFAULT_MAX_STDIN_BYTES);
    };
    let text = raw.to_string_lossy();
    text.trim().parse::<u64>().ok().filter(|&n| n > 0).ok_or_else(|| text.into_owned())
}

/// Copies `input` to `out` until its end, within `limits`; the number of bytes copied.
/// Waits for input with `poll(2)`, so a deadline holds even when nothing arrives.
pub fn copy_bounded(
    input: &mut (impl Read + AsFd),
    out: &mut impl Write,
    limits: SpoolLimits<'_>,
) -> Result<u64, SpoolError> {
    let mut buf = vec![0u8; CHUNK];
    let mut copied = 0u64;
    loop {
        if limits.interrupt.is_some_and(|flag| flag.load(Ordering::SeqCst)) {
            return Err(SpoolError::Interrupted { received: copied });
        }
        let now = Instant::now();
        if limits.deadline.is_some_and(|d| now >= d) {
            return Err(SpoolError::TooSlow { received: copied });
        }
        let wait = limits.deadline.map_or(WAIT_SLICE, |d| (d - now).min(WAIT_SLICE));
        if !readable(input, wait)? {
            continue;
        }
        // At most one byte past the cap: enough to know it is exceeded.
        let room = limits.max_bytes.saturating_sub(copied).saturating_add(1);
        let want = usize::try_from(room).map_or(buf.len(), |room| room.min(buf.len()));
        let n = match input.read(&mut buf[..want]) {
            Ok(0) => return Ok(copied),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        copied += n as u64;
        if copied > limits.max_bytes {
            return Err(SpoolError::TooLarge { limit: limits.max_bytes });
        }
        out.write_all(&buf[..n])?;
    }
}

/// Whether `input` has something to read (data, or its end) within `wait`.
fn readable(input: &impl AsFd, wait: Duration) -> io::Result<bool> {
    let millis = u16::try_from(wait.as_millis().max(1)).unwrap_or(u16::MAX);
    let mut fds = [PollFd::new(input.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::from(millis)) {
        Ok(0) => Ok(false),
        Ok(_) => Ok(true),
        Err(nix::errno::Errno::EINTR) => Ok(false),
        Err(e) => Err(io::Error::from(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_bytes: u64, deadline: Option<Instant>) -> SpoolLimits<'static> {
        SpoolLimits { max_bytes, deadline, interrupt: None }
    }

    fn file_with(bytes: &[u8]) -> std::fs::File {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(bytes).unwrap();
        use std::io::Seek;
        file.rewind().unwrap();
        file
    }

    /// A pipe: its read end and its write end.
    fn pipe() -> (std::fs::File, std::fs::File) {
        let (read, write) = nix::unistd::pipe().unwrap();
        (std::fs::File::from(read), std::fs::File::from(write))
    }

    #[test]
    fn the_whole_input_up_to_the_cap_is_copied() {
        let mut out = Vec::new();
        let copied = copy_bounded(&mut file_with(b"0123456789"), &mut out, limits(10, None));
        assert_eq!(copied.unwrap(), 10);
        assert_eq!(out, b"0123456789");
    }

    #[test]
    fn one_byte_past_the_cap_is_too_large() {
        let mut out = Vec::new();
        let copied = copy_bounded(&mut file_with(b"0123456789"), &mut out, limits(9, None));
        assert!(matches!(copied, Err(SpoolError::TooLarge { limit: 9 })), "{copied:?}");
        assert!(out.len() <= 9, "nothing past the cap is written");
    }

    #[test]
    fn a_silent_pipe_ends_at_the_deadline() {
        let (mut read, mut write) = pipe();
        write.write_all(b"abc").unwrap();
        let started = Instant::now();
        let deadline = Some(started + Duration::from_millis(300));
        let mut out = Vec::new();
        let copied = copy_bounded(&mut read, &mut out, limits(1000, deadline));
        assert!(matches!(copied, Err(SpoolError::TooSlow { received: 3 })), "{copied:?}");
        let elapsed = started.elapsed();
        assert!(elapsed < Duration::from_millis(600), "{elapsed:?}");
        drop(write);
    }

    #[test]
    fn a_raised_flag_stops_the_copy() {
        let (mut read, _write) = pipe();
        let flag = AtomicBool::new(true);
        let mut out = Vec::new();
        let limits = SpoolLimits { max_bytes: 10, deadline: None, interrupt: Some(&flag) };
        let copied = copy_bounded(&mut read, &mut out, limits);
        assert!(matches!(copied, Err(SpoolError::Interrupted { received: 0 })), "{copied:?}");
    }
}
