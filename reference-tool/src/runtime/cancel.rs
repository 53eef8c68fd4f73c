//! How a call hears the signals that cancel it, SIGINT and SIGHUP (REQ-F-069): the first asks
//! the work to stop at its next safe point and the call answers the cancellation envelope;
//! a second, while the call is still cleaning up after the first, ends the process at once.
//! reftool's way is [`SecondSignalExits`].

use std::fmt::Debug;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize};

use signal_hook::consts::{SIGHUP, SIGINT};

/// See the module docs.
pub trait CancelSignals: Send + Sync + Debug {
    /// Installs the handlers: each signal stores its number in `heard` and, when given, raises
    /// `also`.
    fn listen(&self, heard: &Arc<AtomicUsize>, also: Option<&Arc<AtomicBool>>) -> io::Result<()>;
}

/// reftool's: the first SIGINT or SIGHUP is recorded for the call to answer; the next one
/// exits with 128 + its number at once, from the handler, writing nothing more. The handler
/// is re-entrant safe, as REQ-F-069 asks: "a second SIGINT during cleanup exits immediately
/// without a double-write".
#[derive(Debug)]
pub struct SecondSignalExits;

impl CancelSignals for SecondSignalExits {
    fn listen(&self, heard: &Arc<AtomicUsize>, also: Option<&Arc<AtomicBool>>) -> io::Result<()> {
        let armed = Arc::new(AtomicBool::new(false));
        for signal in [SIGINT, SIGHUP] {
            // The exit goes first, so the signal that arms it does not also fire it
            // (signal-hook runs a signal's actions in the order they were registered).
            signal_hook::flag::register_conditional_shutdown(
                signal,
                128 + signal,
                Arc::clone(&armed),
            )?;
            record(signal, heard, also)?;
            signal_hook::flag::register(signal, Arc::clone(&armed))?;
        }
        Ok(())
    }
}

/// The actions every way of listening shares: `signal` stored in `heard`, `also` raised.
pub fn record(
    signal: i32,
    heard: &Arc<AtomicUsize>,
    also: Option<&Arc<AtomicBool>>,
) -> io::Result<()> {
    let number = usize::try_from(signal).unwrap_or(0);
    signal_hook::flag::register_usize(signal, Arc::clone(heard), number)?;
    if let Some(flag) = also {
        signal_hook::flag::register(signal, Arc::clone(flag))?;
    }
    Ok(())
}
