//! Faults in the runtime's parts: the job naming (how an invocation is keyed, how a job is
//! named), the progress sink, the worker launcher, the checkpoint commit (see
//! [`crate::narrow`]), how a call hears SIGINT. reftool's parts are [`reftool::runtime::Parts::default`]; a fault
//! replaces one.

use std::collections::BTreeSet;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use reftool::runtime::Parts;
use reftool::runtime::cancel::{self, CancelSignals};
use reftool::runtime::fsutil::now_ms;
use reftool::runtime::identity::{IdentityKey, InvocationIdentity, JobNaming};
use reftool::runtime::ids::{JOB_ID_HEX_LEN, JOB_ID_PREFIX, JobId, JobIdError};
use reftool::runtime::progress::{Progress, ProgressFile, ProgressJson, ProgressSink};
use reftool::runtime::worker::{Launcher, worker_command};

use crate::Fault;
use crate::narrow::{SplitCommit, UnlockedLookup};

/// The runtime's parts of `fault`: reftool's, with the one the fault replaces.
pub fn parts(fault: Option<Fault>) -> Parts {
    let mut parts = Parts::default();
    match fault {
        Some(
            fault @ (Fault::IdentityIgnoresCwd
            | Fault::IdentityIgnoresStdin
            | Fault::IdentityIgnoresKey
            | Fault::NoAttach
            | Fault::ClockJobIds),
        ) => parts.naming = Arc::new(FaultyNaming { fault, detaching: detaching_commands() }),
        Some(Fault::ProgressNotPublished) => parts.progress = Arc::new(Unpublished),
        Some(Fault::ProgressRestartsOnResume) => parts.progress = Arc::new(CountedFromResume),
        Some(Fault::WorkerHoldsCallerPipes) => parts.launcher = Arc::new(InheritingStdio),
        Some(Fault::WatchdogOff) => parts.progress = Arc::new(BesideTheHeartbeat),
        Some(Fault::ProgressFreezesAfterThreeSeconds) => {
            parts.progress = Arc::new(FreezingAfter { first_ms: OnceLock::new() });
        }
        Some(
            fault @ (Fault::TwoTransactionCommit
            | Fault::CheckpointFirst
            | Fault::StaleCheckpointTotals),
        ) => parts.checkpoints = Arc::new(SplitCommit { fault }),
        Some(Fault::IdentityCheckThenCreate) => parts.naming = Arc::new(UnlockedLookup),
        Some(Fault::SecondSigintIgnored) => parts.cancel = Arc::new(EverySignalRecorded),
        _ => {}
    }
    parts
}

/// The paths of reftool's commands that detach.
fn detaching_commands() -> BTreeSet<String> {
    reftool::commands::specs()
        .into_iter()
        .filter(|s| s.interruption.is_some_and(|i| i.detach))
        .map(|s| s.path)
        .collect()
}

/// reftool's naming with one fault: a key without the working directory
/// ([`Fault::IdentityIgnoresCwd`]), the stdin digest ([`Fault::IdentityIgnoresStdin`]) or the
/// idempotency key ([`Fault::IdentityIgnoresKey`]), a key
/// of its own for every call of a detaching command ([`Fault::NoAttach`]), or ids that count
/// milliseconds ([`Fault::ClockJobIds`]).
#[derive(Debug)]
struct FaultyNaming {
    fault: Fault,
    detaching: BTreeSet<String>,
}

impl JobNaming for FaultyNaming {
    fn key(&self, identity: &InvocationIdentity) -> IdentityKey {
        let mut keyed = identity.clone();
        match self.fault {
            Fault::IdentityIgnoresCwd => keyed.cwd = PathBuf::new(),
            Fault::IdentityIgnoresStdin => keyed.stdin_digest = None,
            Fault::IdentityIgnoresKey => keyed.idempotency_key = None,
            // Resume-only commands keep their key: without it their continuations (the
            // identical invocation) could never find their checkpoint, and the fault would
            // break far more than the attach rule.
            Fault::NoAttach if self.detaching.contains(&keyed.command_path) => {
                let nanos = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos());
                keyed.tool_version =
                    format!("{}+{}.{nanos}", keyed.tool_version, std::process::id());
            }
            _ => {}
        }
        keyed.key()
    }

    fn new_id(&self) -> Result<JobId, JobIdError> {
        if self.fault != Fault::ClockJobIds {
            return JobId::generate();
        }
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        JobId::parse(&format!("{JOB_ID_PREFIX}{millis:0JOB_ID_HEX_LEN$x}"))
    }
}

/// [`Fault::ProgressNotPublished`]: progress goes nowhere, so a job's published `done` stays
/// where it was when its work started.
#[derive(Debug)]
struct Unpublished;

impl ProgressSink for Unpublished {
    fn publish(&self, _job_dir: &Path, _start: &Progress, _file: &ProgressFile) -> io::Result<()> {
        Ok(())
    }
}

/// [`Fault::ProgressRestartsOnResume`]: `progress.json` counts from where the work resumed,
/// not from the job's start, so a resumed job's `done` falls below what it published.
#[derive(Debug)]
struct CountedFromResume;

impl ProgressSink for CountedFromResume {
    fn publish(&self, job_dir: &Path, start: &Progress, file: &ProgressFile) -> io::Result<()> {
        let mut counted = file.clone();
        counted.progress.done = file.progress.done.saturating_sub(start.done);
        ProgressJson.publish(job_dir, start, &counted)
    }
}

/// How long into a job the freezing faults let progress through
/// ([`Fault::ProgressFreezesAfterThreeSeconds`], [`Fault::JobWaitFreezesAfterThreeSeconds`]):
/// longer than reftool's short roles' work (about 2.5 s), so only work longer than it (the
/// `long_work` role's 18 s) shows the fault, as a flat stretch longer than 10 s.
pub const FREEZE_AFTER_MS: u64 = 3_000;

/// [`Fault::ProgressFreezesAfterThreeSeconds`]: reftool's `progress.json` for the first
/// [`FREEZE_AFTER_MS`] of the work this process publishes (a worker is one job's), then nothing.
#[derive(Debug)]
struct FreezingAfter {
    first_ms: OnceLock<u64>,
}

impl ProgressSink for FreezingAfter {
    fn publish(&self, job_dir: &Path, start: &Progress, file: &ProgressFile) -> io::Result<()> {
        let first = *self.first_ms.get_or_init(now_ms);
        if now_ms().saturating_sub(first) >= FREEZE_AFTER_MS {
            return Ok(());
        }
        ProgressJson.publish(job_dir, start, file)
    }
}

/// One writer of `progress.json` at a time in this process: the work's reports and the
/// heartbeat of [`Fault::WatchdogOff`].
static PUBLISHING: Mutex<()> = Mutex::new(());

/// [`Fault::WatchdogOff`]'s sink: reftool's `progress.json`, never written beside the
/// heartbeat ([`keep_progress_fresh`]), which could otherwise put back an older `done`.
#[derive(Debug)]
struct BesideTheHeartbeat;

impl ProgressSink for BesideTheHeartbeat {
    fn publish(&self, job_dir: &Path, start: &Progress, file: &ProgressFile) -> io::Result<()> {
        let _one = PUBLISHING.lock().unwrap_or_else(PoisonError::into_inner);
        ProgressJson.publish(job_dir, start, file)
    }
}

/// [`Fault::WatchdogOff`]: every 100 ms the job in `job_dir` publishes its progress again as
/// just changed, so the idle watchdog, which ends a job whose `done` has not changed for its
/// idle timeout, never finds it idle.
pub fn keep_progress_fresh(job_dir: PathBuf) {
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let _one = PUBLISHING.lock().unwrap_or_else(PoisonError::into_inner);
            let now = now_ms();
            let mut file = ProgressFile::read(&job_dir).ok().flatten().unwrap_or(ProgressFile {
                progress: Progress::default(),
                updated_at_ms: now,
                changed_at_ms: now,
            });
            file.updated_at_ms = now;
            file.changed_at_ms = now;
            let _ = ProgressJson.publish(&job_dir, &Progress::default(), &file);
        }
    });
}

/// [`Fault::WorkerHoldsCallerPipes`]: reftool's worker, with the caller's stdout and stderr
/// instead of its log.
#[derive(Debug)]
struct InheritingStdio;

impl Launcher for InheritingStdio {
    fn launch(&self, job_dir: &Path, cwd: &Path) -> io::Result<Child> {
        let exe = std::env::current_exe()?;
        let mut command = worker_command(&exe, &[], job_dir, cwd)?;
        command.stdout(Stdio::inherit()).stderr(Stdio::inherit()).spawn()
    }
}

/// Every SIGINT or SIGHUP only recorded ([`Fault::SecondSigintIgnored`]): a second one while
/// the call cleans up does not end it.
#[derive(Debug)]
struct EverySignalRecorded;

impl CancelSignals for EverySignalRecorded {
    fn listen(&self, heard: &Arc<AtomicUsize>, also: Option<&Arc<AtomicBool>>) -> io::Result<()> {
        for signal in [nix::libc::SIGINT, nix::libc::SIGHUP] {
            cancel::record(signal, heard, also)?;
        }
        Ok(())
    }
}
