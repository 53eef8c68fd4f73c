//! conform's own interruption: Ctrl-C (SIGINT), SIGTERM or SIGHUP to conform must not leave
//! the tool's processes or the sandbox directories behind.
//!
//! Every step runs in its own process group, so a terminal's Ctrl-C reaches conform but not
//! the tool. Each live sandbox is therefore registered here (its marker and directory); when a
//! signal arrives, a watcher thread kills every process carrying a registered marker, removes
//! the directories (kept ones aside), says so on stderr and exits with [`INTERRUPTED`] (the
//! shell's 128 + SIGINT; conform's report is not written: the run did not finish).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock, PoisonError};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

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

/// Kills every process of every live sandbox and removes their directories; returns how many
/// processes it found.
pub fn clean_up() -> usize {
    let live = live().lock().unwrap_or_else(PoisonError::into_inner).clone();
    let mut found = 0;
    for (marker, root) in &live {
        // Repeat: a process may fork while its siblings die.
        for _ in 0..5 {
            let procs = sandbox::scan(marker);
            if procs.is_empty() {
                break;
            }
            found += procs.len();
            let own_group = nix::unistd::getpgrp();
            for p in procs {
                let _ =
                    kill(Pid::from_raw(i32::try_from(p.pid).unwrap_or(i32::MAX)), Signal::SIGKILL);
                if let Some(group) = p.pgid.and_then(|g| i32::try_from(g).ok()).map(Pid::from_raw)
                    && group != own_group
                {
                    let _ = killpg(group, Signal::SIGKILL);
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        if let Some(root) = root {
            let _ = std::fs::remove_dir_all(root);
        }
    }
    found
}
