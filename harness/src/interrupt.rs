//! conform's own interruption: Ctrl-C (SIGINT), SIGTERM or SIGHUP to conform must not leave
//! the tool's processes or the sandbox directories behind.
//!
//! Every step runs in its own process group, so a terminal's Ctrl-C reaches conform but not
//! the tool. Each live sandbox is therefore registered here (its marker and directory); when a
//! signal arrives, a watcher thread kills every process of the tool (those carrying a
//! registered marker, those in a sandbox's cgroup, and, as child subreaper, every orphan
//! conform adopted: see [`crate::sandbox`]), removes the directories (kept ones aside) and
//! conform's cgroups, and says so on stderr; the run then writes its report of what finished
//! (partial: `CANCELLED` in `--format json`, marked in JUnit and Markdown), and conform exits
//! with [`INTERRUPTED`] (the shell's 128 + SIGINT), within ten seconds (`REPORT_GRACE`)
//! even when the report does not come.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::sandbox;

/// conform's exit code when a signal interrupted the run (128 + SIGINT, as shells report it).
pub const INTERRUPTED: u8 = crate::exit::INTERRUPTED;

/// A live sandbox: its marker and, unless kept, the directory to remove.
type Live = BTreeMap<String, Option<PathBuf>>;

fn live() -> &'static Mutex<Live> {
    static LIVE: OnceLock<Mutex<Live>> = OnceLock::new();
    LIVE.get_or_init(|| Mutex::new(BTreeMap::new()))
}

/// Keeps a sandbox in the registry while it lives.
#[derive(Debug)]
pub struct Registration {
    marker: String,
}

impl Registration {
    /// Registers a sandbox by its marker; `root` is removed on interruption (`None`: kept).
    pub fn new(marker: &str, root: Option<PathBuf>) -> Self {
        live().lock().unwrap_or_else(PoisonError::into_inner).insert(marker.to_owned(), root);
        Registration { marker: marker.to_owned() }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        live().lock().unwrap_or_else(PoisonError::into_inner).remove(&self.marker);
    }
}

/// Starts the watcher thread (once per process). Failing to install it only loses the
/// clean-up on interruption, so the error is returned for a warning, not a failure.
pub fn install() -> Result<(), String> {
    static INSTALLED: OnceLock<Result<(), String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
            let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
                .map_err(|e| format!("failed to watch for Ctrl-C: {e}"))?;
            std::thread::Builder::new()
                .name("conform-interrupt".into())
                .spawn(move || {
                    if let Some(signal) = signals.forever().next() {
                        let cleaned = clean_up();
                        // stderr may be gone (a closed pipe): a failed write must not end this
                        // thread before it ends the process.
                        let _ = writeln!(
                            std::io::stderr(),
                            "conform: interrupted by signal {signal}; stopped {cleaned} process(es) of the tool and removed the sandboxes"
                        );
                        CLEANED.store(true, Ordering::SeqCst);
                        // The run reports what finished (a partial report), then says so; a
                        // run that does not within the bound is ended all the same.
                        let deadline = std::time::Instant::now() + REPORT_GRACE;
                        while !REPORTED.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                            std::thread::sleep(std::time::Duration::from_millis(20));
                        }
                        std::process::exit(i32::from(INTERRUPTED));
                    }
                })
                .map(|_| ())
                .map_err(|e| format!("failed to start the interrupt watcher: {e}"))
        })
        .clone()
}

/// Whether conform was interrupted: the runner starts no new process then.
pub fn interrupted() -> bool {
    STOPPING.load(Ordering::SeqCst)
}

/// conform was interrupted (Ctrl-C, SIGTERM, SIGHUP): nothing more may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("conform was interrupted")]
pub struct Interrupted;

/// `Err` once conform is interrupted, for the runner to check before it starts a process.
pub fn gate() -> Result<(), Interrupted> {
    if interrupted() { Err(Interrupted) } else { Ok(()) }
}

/// Called by the run once its scenarios ended: when conform was interrupted, waits until the
/// watcher has stopped the tool's processes and removed the sandboxes, and says so, so that
/// the run reports (partially) what finished; `false` when the run was not interrupted.
pub fn wait_for_clean_up() -> bool {
    if !interrupted() {
        return false;
    }
    while !CLEANED.load(Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    true
}

/// Called once the reporters have written everything: an interrupted run may now end.
pub fn reported() {
    REPORTED.store(true, Ordering::SeqCst);
}

/// How long the watcher lets an interrupted run write its partial report before it ends
/// conform anyway.
const REPORT_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

static STOPPING: AtomicBool = AtomicBool::new(false);
static CLEANED: AtomicBool = AtomicBool::new(false);
static REPORTED: AtomicBool = AtomicBool::new(false);

/// Quiet scans in a row after which no process of the run is left (a step that passed the
/// [`gate`] just before the signal shows its marker once its program is loaded).
const QUIET_SCANS: usize = 4;

/// Stops the runner from starting processes, kills every process of every live sandbox (those
/// in its cgroup or carrying its marker, and every orphan conform adopted: see
/// [`crate::sandbox`]) until several scans in a row find none, removes the directories and
/// conform's cgroups; returns how many processes it killed.
pub fn clean_up() -> usize {
    STOPPING.store(true, Ordering::SeqCst);
    let mut found = 0;
    let mut quiet = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    while quiet < QUIET_SCANS && std::time::Instant::now() < deadline {
        let markers: Vec<String> =
            live().lock().unwrap_or_else(PoisonError::into_inner).keys().cloned().collect();
        match sandbox::kill_everything(&markers) {
            0 => quiet += 1,
            killed => {
                quiet = 0;
                found += killed;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let live = live().lock().unwrap_or_else(PoisonError::into_inner).clone();
    for root in live.values().flatten() {
        let _ = sandbox::remove_tree(root);
    }
    sandbox::release_everything();
    found
}
