//! A call's limits. A job's, fixed when it is created: its lifetime (`--timeout`, else
//! `max_lifetime_ms`, default one hour, counted from the job's creation across
//! continuations) and its idle timeout for the watchdog (`idle_timeout_ms`, default 300000).
//! The test knob [`IDLE_TIMEOUT_ENV`] overrides a command's idle timeout, so that tests
//! provoke STALLED in seconds, not minutes; [`MAX_LIFETIME_ENV`] its declared lifetime, so
//! that they see work without `--timeout` end at its lifetime in seconds, not an hour. And the bounds of the stdin a call spools before
//! its job exists: a size cap ([`MAX_STDIN_ENV`], default 64 MiB) and the call's deadline.

use std::time::Instant;

use crate::duration::millis;
use crate::framework::context::Invocation;
use crate::framework::failure::Failure;
use crate::framework::registry::CommandSpec;
use crate::runtime::jobs;
pub use crate::runtime::spool::MAX_STDIN_ENV;

/// Test knob: overrides every command's `idle_timeout_ms` (milliseconds, 1–86400000).
pub const IDLE_TIMEOUT_ENV: &str = "REFTOOL_IDLE_TIMEOUT_MS";
/// Test knob: becomes every interruptible command's declared `max_lifetime_ms` (milliseconds,
/// 1–86400000), the bound on its whole work when no `--timeout` is given.
pub const MAX_LIFETIME_ENV: &str = "REFTOOL_MAX_LIFETIME_MS";
/// A lifetime that never ends in practice (`--timeout 0`): a hundred years.
const UNBOUNDED_LIFETIME_MS: u64 = 100 * 365 * 24 * 3600 * 1000;

/// The lifetime of a job this invocation creates, in milliseconds.
pub(super) fn lifetime_ms(invocation: &Invocation) -> u64 {
    invocation.timeout.map_or(UNBOUNDED_LIFETIME_MS, millis)
}

/// The job's idle timeout: the test knob, else the declaration, else the default.
pub(super) fn idle_timeout_ms(spec: &CommandSpec) -> Result<u64, Failure> {
    if let Some(raw) = std::env::var_os(IDLE_TIMEOUT_ENV) {
        let text = raw.to_string_lossy();
        return match text.trim().parse::<u64>() {
            Ok(ms) if (1..=86_400_000).contains(&ms) => Ok(ms),
            _ => Err(Failure::arg(
                "ENV_INVALID",
                format!("{IDLE_TIMEOUT_ENV} must be whole milliseconds, 1-86400000, got {text:?}"),
            )),
        };
    }
    Ok(spec.interruption.and_then(|i| i.idle_timeout_ms).unwrap_or(jobs::DEFAULT_IDLE_TIMEOUT_MS))
}

/// The lifetime knob's value ([`MAX_LIFETIME_ENV`]): `None` when unset; a malformed value is
/// the environment's mistake, refused before the work starts. (The declaration carries a
/// valid one: `commands::specs`; the limit then follows from it as from any declaration.)
pub(super) fn max_lifetime_knob() -> Result<Option<u64>, Failure> {
    let Some(raw) = std::env::var_os(MAX_LIFETIME_ENV) else { return Ok(None) };
    let text = raw.to_string_lossy();
    match text.trim().parse::<u64>() {
        Ok(ms) if (1..=86_400_000).contains(&ms) => Ok(Some(ms)),
        _ => Err(Failure::arg(
            "ENV_INVALID",
            format!("{MAX_LIFETIME_ENV} must be whole milliseconds, 1-86400000, got {text:?}"),
        )),
    }
}

/// The most bytes of stdin a call spools: [`MAX_STDIN_ENV`], else 64 MiB. A malformed value
/// is the environment's mistake, refused before anything is read.
pub(super) fn max_stdin_bytes() -> Result<u64, Failure> {
    crate::runtime::spool::max_stdin_bytes().map_err(|text| {
        Failure::arg(
            "ENV_INVALID",
            format!("{MAX_STDIN_ENV} must be a whole number of bytes, at least 1, got {text:?}"),
        )
    })
}

/// When a call must be done, from its start: its budget's end and its wall-clock limit's.
#[derive(Debug, Clone, Copy)]
pub(super) struct Deadlines {
    /// The end of the call budget (`None`: no budget).
    pub(super) budget: Option<Instant>,
    /// The end of the wall-clock limit (`None`: `--timeout 0`).
    pub(super) timeout: Option<Instant>,
}

impl Deadlines {
    /// The earlier of the two.
    pub(super) fn first(&self) -> Option<Instant> {
        match (self.budget, self.timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether the budget ends first (or alone).
    pub(super) fn budget_first(&self) -> bool {
        self.budget.is_some() && self.first() == self.budget
    }
}
