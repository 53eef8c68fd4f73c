//! Stop requests, honoured only at safe points.
//!
//! A [`StopControl`] gathers every reason a piece of work may have to stop: the call budget
//! running out (front process only), SIGTERM (a flag the framework's signal handler sets), a
//! `job cancel` (a probe of THIS job's cancel flag, throttled to one DB read per
//! [`CANCEL_PROBE_INTERVAL`]) and the lifetime bound (`--timeout` / `max_lifetime_ms`).
//!
//! The work never sees a stop between a write and the checkpoint that records it: the
//! checkpoint calls ([`super::checkpoint`]) save first and only then ask
//! [`StopControl::check`]. A detach-only command without checkpoints asks at its progress
//! reports instead.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The minimum time between two reads of the cancel flag.
pub const CANCEL_PROBE_INTERVAL: Duration = Duration::from_millis(100);

/// Why work stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StopReason {
    /// `job cancel`: end the job as cancelled and discard its checkpoint.
    Cancelled,
    /// `--timeout` / `max_lifetime_ms` is over: TIMEOUT (10).
    Lifetime,
    /// SIGTERM: hand off (detach) or pause at once.
    Terminated,
    /// The call budget ran out: pause (resume-only commands).
    Budget,
}

/// Sources of stop requests; see the module docs.
pub struct StopControl<'a> {
    budget_deadline: Option<Instant>,
    lifetime_deadline: Option<Instant>,
    terminate: Option<Arc<AtomicBool>>,
    cancel_probe: Option<Box<dyn FnMut() -> bool + 'a>>,
    last_probe: Option<Instant>,
    cancelled: bool,
}

impl std::fmt::Debug for StopControl<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StopControl")
            .field("budget_deadline", &self.budget_deadline)
            .field("lifetime_deadline", &self.lifetime_deadline)
            .field("cancelled", &self.cancelled)
            .finish_non_exhaustive()
    }
}

impl Default for StopControl<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> StopControl<'a> {
    /// Never stops until a source is added.
    pub fn new() -> Self {
        StopControl {
            budget_deadline: None,
            lifetime_deadline: None,
            terminate: None,
            cancel_probe: None,
            last_probe: None,
            cancelled: false,
        }
    }

    /// Stop with [`StopReason::Budget`] from `deadline` on.
    pub fn with_budget_deadline(mut self, deadline: Option<Instant>) -> Self {
        self.budget_deadline = deadline;
        self
    }

    /// Stop with [`StopReason::Lifetime`] from `deadline` on.
    pub fn with_lifetime_deadline(mut self, deadline: Option<Instant>) -> Self {
        self.lifetime_deadline = deadline;
        self
    }

    /// Stop with [`StopReason::Terminated`] once `flag` is set (by a SIGTERM handler).
    pub fn with_terminate_flag(mut self, flag: Arc<AtomicBool>) -> Self {
        self.terminate = Some(flag);
        self
    }

    /// Stop with [`StopReason::Cancelled`] once `probe` returns true (it reads the job's flag).
    pub fn with_cancel_probe(mut self, probe: impl FnMut() -> bool + 'a) -> Self {
        self.cancel_probe = Some(Box::new(probe));
        self
    }

    /// Converts an epoch-milliseconds deadline (as stored in a job record) to an `Instant`.
    pub fn instant_from_epoch_ms(deadline_ms: u64) -> Instant {
        let now_ms = super::fsutil::now_ms();
        let now = Instant::now();
        if deadline_ms <= now_ms { now } else { now + Duration::from_millis(deadline_ms - now_ms) }
    }

    /// Whether to stop now, and why. Cancel wins over everything, then lifetime, SIGTERM,
    /// budget.
    pub fn check(&mut self) -> Option<StopReason> {
        if !self.cancelled {
            if let Some(probe) = self.cancel_probe.as_mut() {
                if self.last_probe.is_none_or(|t| t.elapsed() >= CANCEL_PROBE_INTERVAL) {
                    self.last_probe = Some(Instant::now());
                    self.cancelled = probe();
                }
            }
        }
        let now = Instant::now();
        if self.cancelled {
            Some(StopReason::Cancelled)
        } else if self.lifetime_deadline.is_some_and(|d| now >= d) {
            Some(StopReason::Lifetime)
        } else if self.terminate.as_ref().is_some_and(|f| f.load(Ordering::SeqCst)) {
            Some(StopReason::Terminated)
        } else if self.budget_deadline.is_some_and(|d| now >= d) {
            Some(StopReason::Budget)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn nothing_stops_a_bare_control() {
        assert_eq!(StopControl::new().check(), None);
    }

    #[test]
    fn each_source_stops_and_cancel_wins() {
        let past = Instant::now() - Duration::from_millis(1);
        assert_eq!(
            StopControl::new().with_budget_deadline(Some(past)).check(),
            Some(StopReason::Budget)
        );
        assert_eq!(
            StopControl::new().with_lifetime_deadline(Some(past)).check(),
            Some(StopReason::Lifetime)
        );
        let flag = Arc::new(AtomicBool::new(false));
        let mut c =
            StopControl::new().with_terminate_flag(flag.clone()).with_budget_deadline(Some(past));
        assert_eq!(c.check(), Some(StopReason::Budget));
        flag.store(true, Ordering::SeqCst);
        assert_eq!(c.check(), Some(StopReason::Terminated));
        let mut c =
            StopControl::new().with_lifetime_deadline(Some(past)).with_cancel_probe(|| true);
        assert_eq!(c.check(), Some(StopReason::Cancelled));
    }

    #[test]
    fn the_cancel_probe_is_throttled() {
        let calls = Cell::new(0);
        let mut c = StopControl::new().with_cancel_probe(|| {
            calls.set(calls.get() + 1);
            false
        });
        for _ in 0..100 {
            assert_eq!(c.check(), None);
        }
        assert_eq!(calls.get(), 1);
        std::thread::sleep(CANCEL_PROBE_INTERVAL + Duration::from_millis(10));
        c.check();
        assert_eq!(calls.get(), 2);
    }
}
