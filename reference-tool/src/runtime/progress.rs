//! Progress reporting (REQ-C-034): `progress(done, total?, unit?)`.
//!
//! A [`ProgressReporter`] keeps the latest values and persists them to the job's
//! `progress.json` ([`ProgressFile`], written atomically and fsynced: a rename whose data
//! was not on disk can leave an empty file after a crash of the machine, and a job whose
//! progress cannot be read has an unknown state), throttled to at most one write per
//! [`WRITE_INTERVAL`] while the count grows, plus a final write in [`ProgressReporter::flush`].
//! A handler may therefore report on every chunk. Writes do not wake `job wait`: a waiter
//! re-reads the file at its deadline.
//!
//! `done` never decreases within one job, across continuations and resumes: the reporter
//! starts from a floor (the job's last persisted `done`, see [`ProgressReporter::with_floor`]).
//! A report below the last one is a framework error in test mode ([`TEST_MODE_ENV`] = `1`):
//! [`ProgressError::Backwards`]; outside test mode it is ignored (the published value stays).
//!
//! `changed_at_ms` in the file records when `done` last changed: the idle watchdog
//! ([`super::jobs`]) ends a job whose `done` has not changed for `idle_timeout_ms`.
//!
//! Where the values go is a [`ProgressSink`]: reftool's is [`ProgressJson`], the job's
//! `progress.json`; the job store hands each job's work the sink it was built with
//! ([`super::jobs::JobStore::progress_reporter`]).
//!
//! On a terminal (stderr is a TTY) the reporter also draws an `indicatif` bar on stderr;
//! otherwise it draws nothing. Nothing is ever written to stdout.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};

use super::fsutil::{Durability, now_ms, read_json, write_atomic_with};

/// Set to `1` to turn framework contract slips (a decreasing `done`) into errors.
pub const TEST_MODE_ENV: &str = "REFTOOL_TEST_MODE";
/// The minimum time between two writes of `progress.json` while work advances.
pub const WRITE_INTERVAL: Duration = Duration::from_millis(100);
/// File name of the progress file in a job directory.
pub const PROGRESS_FILE: &str = "progress.json";

/// Whether [`TEST_MODE_ENV`] is set to `1` in this process.
pub fn test_mode() -> bool {
    std::env::var_os(TEST_MODE_ENV).is_some_and(|v| v == "1")
}

/// The wire shape of `data.progress`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Completed units, never decreasing for one job.
    pub done: u64,
    /// Expected units, when known.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub total: Option<u64>,
    /// The unit's name (`bytes`, `rows`), when meaningful.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub unit: Option<String>,
}

/// Content of `progress.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgressFile {
    /// The latest report.
    #[serde(flatten)]
    pub progress: Progress,
    /// When this file was written.
    pub updated_at_ms: u64,
    /// When `done` last changed (feeds the idle watchdog).
    pub changed_at_ms: u64,
}

impl ProgressFile {
    /// Reads a job's progress file (`None` when no progress was reported yet).
    pub fn read(job_dir: &std::path::Path) -> std::io::Result<Option<Self>> {
        read_json(&job_dir.join(PROGRESS_FILE))
    }
}

/// A report below the previous one, refused in test mode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProgressError {
    /// `done` went backwards.
    #[error("progress went backwards: done {got} after {previous} (framework error in test mode)")]
    Backwards {
        /// The last published `done`.
        previous: u64,
        /// The refused value.
        got: u64,
    },
    /// The progress file could not be written.
    #[error("failed to write progress: {0}")]
    Io(String),
}

/// Where a job's progress is published, for the waiters and the idle watchdog to read.
pub trait ProgressSink: Send + Sync {
    /// Publishes `file` as the progress of the job in `job_dir`, whose work started from
    /// `start` (what the job had published before it).
    fn publish(&self, job_dir: &Path, start: &Progress, file: &ProgressFile)
    -> std::io::Result<()>;
}

impl std::fmt::Debug for dyn ProgressSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressSink")
    }
}

/// reftool's sink: `<job dir>/progress.json`, written atomically and durably (at most one
/// write per [`WRITE_INTERVAL`], so the fsync costs little).
#[derive(Debug, Clone, Copy, Default)]
pub struct ProgressJson;

impl ProgressSink for ProgressJson {
    fn publish(
        &self,
        job_dir: &Path,
        _start: &Progress,
        file: &ProgressFile,
    ) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(file).map_err(std::io::Error::other)?;
        write_atomic_with(&job_dir.join(PROGRESS_FILE), &bytes, Durability::Durable)
    }
}

/// A job's progress target: its directory, the sink, and where its work started.
#[derive(Debug)]
struct Target {
    job_dir: PathBuf,
    start: Progress,
    sink: Arc<dyn ProgressSink>,
}

/// Records and publishes progress; see the module docs.
#[derive(Debug)]
pub struct ProgressReporter {
    target: Option<Target>,
    latest: Progress,
    changed_at_ms: u64,
    last_write: Option<Instant>,
    dirty: bool,
    strict: bool,
    bar: Option<ProgressBar>,
}

impl ProgressReporter {
    /// A reporter writing to `<job_dir>/progress.json` (or nowhere with `None`), strict when
    /// [`test_mode`] is on, with a bar when stderr is a terminal.
    pub fn new(job_dir: Option<PathBuf>) -> Self {
        let target = job_dir.map(|job_dir| Target {
            job_dir,
            start: Progress::default(),
            sink: Arc::new(ProgressJson),
        });
        Self::with_target(target)
    }

    /// A reporter for the work of the job in `job_dir`, which had published `start`: it
    /// publishes through `sink` and starts from `start` (see [`ProgressReporter::with_floor`]).
    pub fn for_job(job_dir: &Path, start: Progress, sink: Arc<dyn ProgressSink>) -> Self {
        let target = Target { job_dir: job_dir.to_owned(), start: start.clone(), sink };
        Self::with_target(Some(target)).with_floor(start)
    }

    fn with_target(target: Option<Target>) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template("{spinner} {pos}/{len} {msg} {elapsed}")
            {
                bar.set_style(style);
            }
            bar
        });
        ProgressReporter {
            target,
            latest: Progress::default(),
            changed_at_ms: now_ms(),
            last_write: None,
            dirty: false,
            strict: test_mode(),
            bar,
        }
    }

    /// Starts from the job's persisted progress (a continuation), so `done` never decreases.
    pub fn with_floor(mut self, floor: Progress) -> Self {
        self.latest = floor;
        self
    }

    /// Overrides the test-mode strictness (tests and explicit framework choice).
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Records a report; writes `progress.json` at most every [`WRITE_INTERVAL`].
    pub fn report(
        &mut self,
        done: u64,
        total: Option<u64>,
        unit: Option<&str>,
    ) -> Result<(), ProgressError> {
        if done < self.latest.done {
            if self.strict {
                return Err(ProgressError::Backwards { previous: self.latest.done, got: done });
            }
        } else if done > self.latest.done {
            self.latest.done = done;
            self.changed_at_ms = now_ms();
            self.dirty = true;
        }
        if total.is_some() && total != self.latest.total {
            self.latest.total = total;
            self.dirty = true;
        }
        if let Some(u) = unit {
            if self.latest.unit.as_deref() != Some(u) {
                self.latest.unit = Some(u.to_owned());
                self.dirty = true;
            }
        }
        if let Some(bar) = &self.bar {
            if let Some(t) = self.latest.total {
                bar.set_length(t);
            }
            bar.set_position(self.latest.done);
            if let Some(u) = &self.latest.unit {
                bar.set_message(u.clone());
            }
        }
        let due = self.last_write.is_none_or(|t| t.elapsed() >= WRITE_INTERVAL);
        if self.dirty && due {
            self.write()?;
        }
        Ok(())
    }

    /// Writes any unwritten report now (call on the last report, before pausing or ending).
    pub fn flush(&mut self) -> Result<(), ProgressError> {
        if self.dirty || self.last_write.is_none() {
            self.write()?;
        }
        Ok(())
    }

    /// The latest values (what `data.progress` shows).
    pub fn latest(&self) -> &Progress {
        &self.latest
    }

    fn write(&mut self) -> Result<(), ProgressError> {
        if let Some(target) = &self.target {
            let file = ProgressFile {
                progress: self.latest.clone(),
                updated_at_ms: now_ms(),
                changed_at_ms: self.changed_at_ms,
            };
            target
                .sink
                .publish(&target.job_dir, &target.start, &file)
                .map_err(|e| ProgressError::Io(e.to_string()))?;
        }
        self.last_write = Some(Instant::now());
        self.dirty = false;
        Ok(())
    }
}

impl Drop for ProgressReporter {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_are_throttled_and_flushed() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = ProgressReporter::new(Some(dir.path().to_owned())).strict(true);
        r.report(1, Some(100), Some("rows")).unwrap();
        let first = ProgressFile::read(dir.path()).unwrap().unwrap();
        assert_eq!(
            first.progress,
            Progress { done: 1, total: Some(100), unit: Some("rows".into()) }
        );
        for d in 2..=50 {
            r.report(d, Some(100), Some("rows")).unwrap();
        }
        // Within the interval nothing more is written...
        let mid = ProgressFile::read(dir.path()).unwrap().unwrap();
        assert!(mid.progress.done < 50, "throttled: {}", mid.progress.done);
        // ...and the last report always lands.
        r.flush().unwrap();
        assert_eq!(ProgressFile::read(dir.path()).unwrap().unwrap().progress.done, 50);
        std::thread::sleep(WRITE_INTERVAL + Duration::from_millis(20));
        r.report(60, None, None).unwrap();
        let late = ProgressFile::read(dir.path()).unwrap().unwrap();
        assert_eq!(late.progress.done, 60);
        assert_eq!(late.progress.total, Some(100), "total is kept when not repeated");
    }

    #[test]
    fn backwards_is_an_error_in_test_mode_and_ignored_otherwise() {
        let mut strict = ProgressReporter::new(None).strict(true);
        strict.report(10, None, None).unwrap();
        assert_eq!(
            strict.report(9, None, None),
            Err(ProgressError::Backwards { previous: 10, got: 9 })
        );
        let mut lax = ProgressReporter::new(None).strict(false);
        lax.report(10, None, None).unwrap();
        lax.report(9, None, None).unwrap();
        assert_eq!(lax.latest().done, 10);
    }

    #[test]
    fn a_continuation_starts_from_its_floor() {
        let mut r = ProgressReporter::new(None).strict(true).with_floor(Progress {
            done: 500,
            total: Some(1000),
            unit: None,
        });
        assert!(r.report(400, None, None).is_err());
        r.report(500, None, None).unwrap();
        assert_eq!(r.latest().total, Some(1000));
    }

    #[test]
    fn changed_at_moves_only_when_done_grows() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = ProgressReporter::new(Some(dir.path().to_owned())).strict(true);
        r.report(5, None, None).unwrap();
        let a = ProgressFile::read(dir.path()).unwrap().unwrap();
        std::thread::sleep(WRITE_INTERVAL + Duration::from_millis(30));
        r.report(5, Some(9), None).unwrap();
        let b = ProgressFile::read(dir.path()).unwrap().unwrap();
        assert_eq!(a.changed_at_ms, b.changed_at_ms);
        assert_eq!(b.progress.total, Some(9));
    }

    const BAR_CHILD_ENV: &str = "REFTOOL_TEST_PROGRESS_BAR_CHILD";

    /// The reporting process of `a_bar_is_drawn_on_a_terminal_and_nothing_otherwise`.
    #[test]
    fn bar_child_process() {
        if std::env::var_os(BAR_CHILD_ENV).is_none() {
            return;
        }
        let mut r = ProgressReporter::new(None).strict(true);
        for done in 1..=10 {
            r.report(done, Some(10), Some("rows")).unwrap();
            std::thread::sleep(Duration::from_millis(40));
        }
    }

    fn run_bar_child(stderr: std::process::Stdio) -> std::process::Child {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args(["runtime::progress::tests::bar_child_process", "--exact", "-q", "--nocapture"])
            .env(BAR_CHILD_ENV, "1")
            .env("TERM", "xterm")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap()
    }

    #[test]
    fn a_bar_is_drawn_on_a_terminal_and_nothing_otherwise() {
        use std::io::Read;
        let pty = nix::pty::openpty(None, None).unwrap();
        let mut child = run_bar_child(std::process::Stdio::from(pty.slave));
        let mut master = std::fs::File::from(pty.master);
        let reader = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut buf = [0u8; 4096];
            // The read fails with EIO once the child (the last holder of the slave) is gone.
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 {
                    break;
                }
                seen.extend_from_slice(&buf[..n]);
            }
            seen
        });
        assert!(child.wait().unwrap().success());
        let on_tty = String::from_utf8_lossy(&reader.join().unwrap()).into_owned();
        assert!(on_tty.contains("/10") && on_tty.contains("rows"), "{on_tty:?}");

        let out = run_bar_child(std::process::Stdio::piped()).wait_with_output().unwrap();
        assert!(out.status.success());
        assert!(
            out.stderr.is_empty(),
            "nothing on a pipe: {:?}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
