//! conform's own interruption: Ctrl-C (SIGINT), SIGTERM or SIGHUP to conform must not leave
//! the tool's processes or the sandbox directories behind.
//!
//! Every step runs in its own process group, so a terminal's Ctrl-C reaches conform but not
//! the tool. Each live sandbox is therefore registered here (its marker and directory); when a
//! signal arrives, a watcher thread kills every process of the tool (those carrying a
//! registered marker, those in a sandbox's cgroup, and, as child subreaper, every orphan
//! conform adopted: see [`crate::sandbox`]), removes the directories (kept ones aside) and
//! conform's cgroups, says so on stderr and exits with [`INTERRUPTED`] (the shell's
//! 128 + SIGINT; conform's report is not written: the run did not finish).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::sandbox;

/// conform's exit code when a signal interrupted the run (128 + SIGINT, as shells report it).
pub const INTERRUPTED: u8 = 130;

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
                        eprintln!(
                            "conform: interrupted by signal {signal}; stopped {cleaned} process(es) of the tool and removed the sandboxes"
                        );
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

/// `Err` once conform is interrupted, for the runner to check before it starts a process.
pub fn gate() -> Result<(), String> {
    if interrupted() { Err("conform was interrupted".into()) } else { Ok(()) }
}

/// Called by the run once its scenarios ended: when conform was interrupted, the watcher
/// thread is cleaning up and will end the process; the run must not report or exit first.
pub fn hold_if_interrupted() {
    while interrupted() {
        std::thread::park_timeout(std::time::Duration::from_secs(1));
    }
}

static STOPPING: AtomicBool = AtomicBool::new(false);

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
        let _ = std::fs::remove_dir_all(root);
    }
    sandbox::release_everything();
    found
}
