//! Cooperative stopping: the token a command's work polls, and the commit gate that makes a
//! stop and a commit mutually exclusive.
//!
//! The framework asks the work to stop (wall-clock limit, SIGTERM, and in part 2 the call
//! budget) by setting a reason on the [`StopToken`]. Work checks [`StopToken::should_stop`] at
//! its safe points. Before making its result permanent (a COMMIT), work calls
//! [`StopToken::begin_commit`]: it either wins, and the framework then waits for the work to
//! finish whatever the clock says, or it loses to a stop that came first and must roll back.
//! So a response never says TIMEOUT about work that was in fact committed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

/// Why the work is asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The wall-clock limit (`--timeout`) ran out.
    Timeout,
    /// SIGTERM arrived.
    Signal,
    /// The call budget ran out (part 2).
    Budget,
}

const RUNNING: u8 = 0;
const COMMITTING: u8 = 1;
const STOP_TIMEOUT: u8 = 2;
const STOP_SIGNAL: u8 = 3;
const STOP_BUDGET: u8 = 4;

/// Shared between the framework and the work; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct StopToken {
    state: Arc<AtomicU8>,
}

impl StopToken {
    /// A token nobody has stopped.
    pub fn new() -> Self {
        StopToken::default()
    }

    /// Asks the work to stop. Returns false when the work already began committing (then the
    /// framework must wait for its result) or another stop came first (the first reason wins).
    pub fn request_stop(&self, reason: StopReason) -> bool {
        let code = match reason {
            StopReason::Timeout => STOP_TIMEOUT,
            StopReason::Signal => STOP_SIGNAL,
            StopReason::Budget => STOP_BUDGET,
        };
        self.state.compare_exchange(RUNNING, code, Ordering::SeqCst, Ordering::SeqCst).is_ok()
    }

    /// The reason the work was asked to stop, if it was.
    pub fn stop_reason(&self) -> Option<StopReason> {
        match self.state.load(Ordering::SeqCst) {
            STOP_TIMEOUT => Some(StopReason::Timeout),
            STOP_SIGNAL => Some(StopReason::Signal),
            STOP_BUDGET => Some(StopReason::Budget),
            _ => None,
        }
    }

    /// Whether the work should stop at this safe point.
    pub fn should_stop(&self) -> bool {
        self.stop_reason().is_some()
    }

    /// Claims the right to commit. True: no stop can win any more, go ahead and commit.
    /// False: a stop came first; roll back.
    pub fn begin_commit(&self) -> bool {
        match self.state.compare_exchange(RUNNING, COMMITTING, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => true,
            Err(current) => current == COMMITTING,
        }
    }

    /// Whether the work claimed the commit.
    pub fn committing(&self) -> bool {
        self.state.load(Ordering::SeqCst) == COMMITTING
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_of_stop_and_commit_wins() {
        let token = StopToken::new();
        assert!(token.request_stop(StopReason::Timeout));
        assert!(!token.begin_commit());
        assert!(!token.request_stop(StopReason::Signal));
        assert_eq!(token.stop_reason(), Some(StopReason::Timeout));

        let token = StopToken::new();
        assert!(token.begin_commit());
        assert!(token.begin_commit());
        assert!(!token.request_stop(StopReason::Timeout));
        assert!(!token.should_stop());
    }
}
