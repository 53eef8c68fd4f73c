//! Doorbells: how whoever ends or pauses a job wakes the processes waiting on it.
//!
//! A waiter ([`Doorbell::install`]) makes a FIFO `<job dir>/waiters/<pid>-<random>` and opens
//! it for reading (non-blocking), plus one writing descriptor of its own, so the FIFO never
//! reports a hang-up while no ringer is connected and `poll(2)` sleeps instead of spinning.
//! Whoever ends or pauses the job ([`ring`], called by the job store right after the state
//! change is on disk) opens every FIFO in `waiters/` for writing, non-blocking, and writes one
//! byte: the waiter's `poll` returns at once. A FIFO whose reader is gone (its waiter was
//! killed) refuses the open with `ENXIO`; the ringer removes it. A waiter removes its own FIFO
//! when it stops waiting.
//!
//! Why not inotify: closing an inotify instance that held a watch waits for a kernel grace
//! period (8–25 ms measured), and process exit waits for it too, wherever the close is
//! issued. A waiter answers and then exits; that exit was most of `job wait`'s latency and of
//! a detach front's overshoot past its budget. A FIFO closes in microseconds.
//!
//! Order matters on the waiter's side: install the doorbell FIRST, then look at the job. An
//! end that lands before the doorbell exists is seen by the look; one that lands after rings.
//! Progress writes do not ring (they are frequent and a waiter only needs progress at its
//! deadline, when it re-reads the progress file).

use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::stat::Mode;

/// The directory of a job dir that holds its waiters' FIFOs.
pub const WAITERS_DIR: &str = "waiters";

/// A waiter's FIFO, removed when dropped.
#[derive(Debug)]
pub struct Doorbell {
    path: PathBuf,
    reader: File,
    /// Held so the FIFO always has a writer: no `POLLHUP` between two rings.
    _writer: File,
}

impl Doorbell {
    /// Installs a doorbell for the job whose directory is `job_dir`.
    pub fn install(job_dir: &Path) -> io::Result<Self> {
        let dir = job_dir.join(WAITERS_DIR);
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).map_err(|e| io::Error::other(e.to_string()))?;
        let suffix: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let path = dir.join(format!("{}-{suffix}", std::process::id()));
        nix::unistd::mkfifo(&path, Mode::S_IRUSR | Mode::S_IWUSR).map_err(io::Error::from)?;
        let opened = (|| -> io::Result<(File, File)> {
            // Non-blocking: opening a FIFO for reading would otherwise wait for a writer.
            let reader =
                OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&path)?;
            let writer =
                OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(&path)?;
            Ok((reader, writer))
        })();
        match opened {
            Ok((reader, writer)) => Ok(Doorbell { path, reader, _writer: writer }),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(e)
            }
        }
    }

    /// The FIFO's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Sleeps until the doorbell rings or `timeout` passes (a signal also ends the sleep).
    /// Returns whether it rang; pending rings are drained.
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(self.reader.as_fd(), PollFlags::POLLIN)];
        let ready = match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(n) => n > 0,
            Err(nix::errno::Errno::EINTR) => false,
            Err(e) => return Err(e.into()),
        };
        if ready {
            self.drain()?;
        }
        Ok(ready)
    }

    fn drain(&self) -> io::Result<()> {
        let mut buf = [0u8; 64];
        loop {
            match (&self.reader).read(&mut buf) {
                Ok(0) => return Ok(()),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

impl Drop for Doorbell {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Rings every doorbell of the job whose directory is `job_dir`; returns how many rang.
/// Never blocks and never fails: a waiter that is gone has its FIFO removed, and a waiter
/// that cannot be reached still finds the end at its next liveness check.
pub fn ring(job_dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(job_dir.join(WAITERS_DIR)) else { return 0 };
    let mut rang = 0;
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_fifo()) {
            continue;
        }
        let path = entry.path();
        let opened = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW)
            .open(&path);
        match opened {
            Ok(mut fifo) => {
                // A full pipe (EAGAIN) has rung already.
                match fifo.write(&[1]) {
                    Ok(_) => rang += 1,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => rang += 1,
                    Err(_) => {}
                }
            }
            // No reader: its waiter died without removing it.
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                let _ = std::fs::remove_file(&path);
            }
            Err(_) => {}
        }
    }
    rang
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_ring_wakes_the_waiter_and_silence_does_not() {
        let job = tempfile::tempdir().unwrap();
        let bell = Doorbell::install(job.path()).unwrap();
        let start = Instant::now();
        assert!(!bell.wait(Duration::from_millis(100)).unwrap(), "nobody rang");
        assert!(start.elapsed() >= Duration::from_millis(90), "{:?}", start.elapsed());
        assert_eq!(ring(job.path()), 1);
        assert!(bell.wait(Duration::from_secs(10)).unwrap());
        // Drained: the next wait sleeps again.
        assert!(!bell.wait(Duration::from_millis(20)).unwrap());
    }

    #[test]
    fn a_ring_from_another_thread_ends_the_sleep_at_once() {
        let job = tempfile::tempdir().unwrap();
        let bell = Doorbell::install(job.path()).unwrap();
        let rung_at = std::thread::scope(|s| {
            let ringer = s.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                let t = Instant::now();
                assert_eq!(ring(job.path()), 1);
                t
            });
            assert!(bell.wait(Duration::from_secs(20)).unwrap());
            let woke = Instant::now();
            woke.saturating_duration_since(ringer.join().unwrap())
        });
        assert!(rung_at < Duration::from_secs(5), "{rung_at:?}");
    }

    #[test]
    fn a_waiter_removes_its_fifo_and_a_dead_waiters_fifo_is_swept_by_the_ring() {
        let job = tempfile::tempdir().unwrap();
        let bell = Doorbell::install(job.path()).unwrap();
        let path = bell.path().to_owned();
        assert!(path.exists());
        drop(bell);
        assert!(!path.exists());
        // A FIFO nobody reads: what a waiter killed with SIGKILL leaves behind.
        let orphan = job.path().join(WAITERS_DIR).join("1-dead");
        nix::unistd::mkfifo(&orphan, Mode::S_IRUSR | Mode::S_IWUSR).unwrap();
        let live = Doorbell::install(job.path()).unwrap();
        assert_eq!(ring(job.path()), 1, "only the live waiter rings");
        assert!(!orphan.exists(), "the orphan is removed");
        assert!(live.wait(Duration::from_secs(5)).unwrap());
    }

    #[test]
    fn ringing_a_job_without_waiters_is_a_no_op() {
        let job = tempfile::tempdir().unwrap();
        assert_eq!(ring(job.path()), 0);
        assert_eq!(ring(&job.path().join("missing")), 0);
    }
}
