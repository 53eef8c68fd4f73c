//! conform's own exit codes.
//!
//! conform follows the contract it checks: the generic codes keep their meaning, and the two
//! outcomes specific to `conform run` use declared command-specific codes from the range the
//! spec reserves for them (79–125).
//!
//! | code | name                | meaning                                                      |
//! |------|---------------------|--------------------------------------------------------------|
//! | 0    | `SUCCESS`           | every `must` scenario that ran passed, no baseline surprise  |
//! | 1    | `GENERAL_ERROR`     | conform itself failed (a harness error in some scenario, an I/O fault) |
//! | 2    | `ARG_ERROR`         | bad invocation of conform, invalid profile, baseline or snapshot directory; nothing ran |
//! | 80   | `NOT_CONFORMANT`    | a `must` scenario failed and no baseline expected it         |
//! | 130  | `CANCELLED`         | conform was interrupted; the report holds what finished, marked partial |
//! | 81   | `BASELINE_MISMATCH` | the tool is conformant, but the baseline is out of date: a failure it does not list, or an entry whose scenario now passes |
//! | 82   | `UNJUDGED`          | every `must` that ran passed, but some `must` scenarios were not judged for a reason the vendor can fix (a role the profile lacks, a role with too little work, a premise not met even alone); `--allow-unjudged` accepts it |
//!
//! When several apply, the first in this order wins: `CANCELLED`, `NOT_CONFORMANT`,
//! `GENERAL_ERROR`, `BASELINE_MISMATCH`, `UNJUDGED`. A non-conformance is the most useful news
//! even when something else also went wrong. The choice is made by [`crate::summary`], from a
//! run's results.
//!
//! Why `UNJUDGED` is not 0: a CI gate that is green says the tool keeps the contract. When a
//! `must` was skipped because the profile names no role the manifest could fill, or its role's
//! work is too short to interrupt, conform checked less than the gate claims, and nothing in
//! a green run would tell the vendor; a vendor who wrote half a profile would ship a blocking
//! `job wait` behind a green badge. It is not 80 either: nothing failed, and a vendor who knows
//! and accepts the gap (a profile being written, a role the tool cannot offer yet) says so
//! once with `--allow-unjudged` (or `[gate] allow_unjudged = true`), which turns 82 into 0
//! while the report still lists what was not judged.

/// Every `must` scenario that ran passed and the baseline (if any) matched.
pub const SUCCESS: u8 = 0;
/// conform itself failed; no verdict about the tool can be given.
pub const GENERAL_ERROR: u8 = 1;
/// Bad invocation of conform (flags, profile, baseline file); nothing ran.
pub const ARG_ERROR: u8 = 2;
/// The tool is not conformant: a `must` scenario failed unexpectedly.
pub const NOT_CONFORMANT: u8 = 80;
/// The baseline does not match the results (an unexpected failure or a stale entry).
pub const BASELINE_MISMATCH: u8 = 81;
/// Every `must` that ran passed, but `must` scenarios were not judged for reasons the vendor
/// can fix, and the gate does not allow that.
pub const UNJUDGED: u8 = 82;
/// A signal (Ctrl-C, SIGTERM, SIGHUP) interrupted the run: 128 + SIGINT, as shells report it.
/// The report still comes, marked partial, with what finished.
pub const INTERRUPTED: u8 = 130;

/// The name of one of conform's exit codes, e.g. `NOT_CONFORMANT` for 80.
pub fn name(code: u8) -> &'static str {
    match code {
        SUCCESS => "SUCCESS",
        GENERAL_ERROR => "GENERAL_ERROR",
        ARG_ERROR => "ARG_ERROR",
        NOT_CONFORMANT => "NOT_CONFORMANT",
        BASELINE_MISMATCH => "BASELINE_MISMATCH",
        UNJUDGED => "UNJUDGED",
        INTERRUPTED => "CANCELLED",
        _ => "UNKNOWN",
    }
}
