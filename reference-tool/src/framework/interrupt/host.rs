//! What the job runtime gets: of the tool, a [`Host`] (never the whole application); of a
//! call, a [`Call`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::framework::budget::CallBudget;
use crate::framework::context::{Args, Invocation};
use crate::framework::registry::Registry;
use crate::framework::state::{Migration, StateConfig, StateDb};
use crate::runtime::Parts;

/// What the job runtime needs of the tool it runs in.
pub(crate) struct Host<'a> {
    /// The commands (a job's command is looked up by its path).
    pub(crate) registry: &'a Registry,
    /// The tool's name and about, for re-parsing a job's argv.
    pub(crate) name: &'a str,
    /// The tool's version (part of a job's identity).
    pub(crate) version: &'a str,
    /// See `name`.
    pub(crate) about: &'a str,
    /// The state database's migrations.
    pub(crate) migrations: &'a [Migration],
    /// The flag SIGTERM raises: a front process waiting on a job hands off at once. SIGINT
    /// and SIGHUP raise it too, so the work stops at its next safe point as on SIGTERM.
    pub(crate) sigterm: &'a Arc<AtomicBool>,
    /// The signal that cancelled the call (SIGINT or SIGHUP), 0 while none came: the call
    /// then answers the cancellation envelope (REQ-F-069) instead of INCOMPLETE.
    pub(crate) cancel_signal: &'a Arc<AtomicUsize>,
    /// The runtime's parts: job naming, the progress sink, the worker launcher.
    pub(crate) parts: &'a Parts,
}

impl Host<'_> {
    /// The signal that cancelled the call, if one came.
    pub(crate) fn cancelled_by(&self) -> Option<i32> {
        let signal = self.cancel_signal.load(Ordering::SeqCst);
        (signal != 0).then(|| i32::try_from(signal).unwrap_or(libc::SIGINT))
    }
}

/// What dispatch hands over after validation and the idempotency check.
pub(crate) struct Call<'a> {
    pub(crate) args: Args,
    pub(crate) invocation: Invocation,
    pub(crate) state: StateConfig,
    pub(crate) budget: Option<&'a CallBudget>,
    /// The state DB, opened by stage 5 when a writer gave an idempotency key.
    pub(crate) idempotency: Option<StateDb>,
}
