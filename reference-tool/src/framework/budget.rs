//! The sync call budget (REQ-F-080, docs/contract.md §3): how long one call of an interruptible
//! command (or `job wait`) may hold its caller.
//!
//! Order: the `--budget` flag, then [`BUDGET_ENV`] (`AGENT_CALL_BUDGET_MS`, read under exactly
//! that name), then [`DEFAULT_BUDGET_MS`]. Zero switches the budget off, and is recorded. When
//! stdin is a terminal and no `--budget` was given the call is interactive: no budget at all,
//! and `meta.budget_ms` is left out of the response.
//!
//! The flag is a duration parsed once, in validation ([`super::prepare`]): a malformed or
//! negative one is the caller's mistake, ARG_ERROR 2, and never gets here. The variable takes
//! the same forms ([`crate::duration::parse_duration`]: `5s`, `2000ms`, `1m`, bare
//! milliseconds); a malformed one is the environment's mistake: it is ignored with a
//! [`BUDGET_ENV_INVALID`] warning and the default applies.
//!
//! Only commands that declare `interruption`, and `job wait`, have a budget; every other
//! command has no `--budget` flag and never reads the variable. The budget is resolved once per
//! call, after validation, and every response from then on records it ([`stamp_budget`]), the
//! idempotency replay included. It never changes the work, so it is not part of a job's
//! identity.

use std::ffi::OsStr;
use std::time::Duration;

use serde_json::json;

use super::context::Invocation;
use super::envelope::Response;
use super::failure::Warning;
use crate::duration::{millis, parse_duration};

/// The environment variable a caller's harness sets once for every tool it runs.
pub const BUDGET_ENV: &str = "AGENT_CALL_BUDGET_MS";
/// The budget when neither the flag nor the variable gives one.
pub const DEFAULT_BUDGET_MS: u64 = 30_000;
/// The warning code of a malformed [`BUDGET_ENV`].
pub const BUDGET_ENV_INVALID: &str = "BUDGET_ENV_INVALID";

/// The budget of one call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallBudget {
    /// How long the call may hold its caller; `None`: unbounded (switched off, or
    /// interactive).
    pub budget: Option<Duration>,
    /// `meta.budget_ms`: `None` leaves the key out (interactive), `Some(0)` says switched off.
    pub meta_budget_ms: Option<u64>,
    /// The warning a malformed [`BUDGET_ENV`] earns.
    pub warning: Option<Warning>,
}

impl CallBudget {
    /// A budget of `ms` milliseconds (`0`: switched off, still recorded).
    fn of_ms(ms: u64) -> CallBudget {
        CallBudget {
            budget: (ms > 0).then(|| Duration::from_millis(ms)),
            meta_budget_ms: Some(ms),
            warning: None,
        }
    }
}

/// The budget of a call: `flag` is `--budget` as parsed, `env` the raw [`BUDGET_ENV`] value,
/// `stdin_is_terminal` REQ-F-009's interactive test (see the module docs).
pub fn resolve(flag: Option<Duration>, env: Option<&OsStr>, stdin_is_terminal: bool) -> CallBudget {
    if let Some(flag) = flag {
        return CallBudget::of_ms(millis(flag));
    }
    if stdin_is_terminal {
        return CallBudget { budget: None, meta_budget_ms: None, warning: None };
    }
    let Some(env) = env else {
        return CallBudget::of_ms(DEFAULT_BUDGET_MS);
    };
    // A value that is not even text is as malformed as any other.
    let text = env.to_string_lossy();
    match parse_duration(&text) {
        Ok(d) => CallBudget::of_ms(millis(d)),
        Err(e) => CallBudget {
            warning: Some(Warning {
                code: BUDGET_ENV_INVALID.into(),
                message: format!(
                    "{BUDGET_ENV} is ignored ({e}); the default budget of {DEFAULT_BUDGET_MS}ms \
                     applies"
                ),
            }),
            ..CallBudget::of_ms(DEFAULT_BUDGET_MS)
        },
    }
}

/// The budget of `invocation`, read from its flag, this process's environment and its modes.
pub fn resolve_call_budget(invocation: &Invocation) -> CallBudget {
    let env = std::env::var_os(BUDGET_ENV);
    resolve(invocation.budget_flag, env.as_deref(), invocation.modes.interactive)
}

/// Records the budget in `meta.budget_ms` (unless the answer set its own) and adds its warning.
pub fn stamp_budget(response: &mut Response, budget: &CallBudget) {
    if let Some(ms) = budget.meta_budget_ms {
        response.meta.entry("budget_ms").or_insert(json!(ms));
    }
    response.warnings.extend(budget.warning.clone());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(flag: Option<u64>, env: Option<&str>, tty: bool) -> CallBudget {
        resolve(flag.map(Duration::from_millis), env.map(OsStr::new), tty)
    }

    #[test]
    fn flag_beats_env_beats_default() {
        let b = run(Some(5000), Some("2000"), false);
        assert_eq!((b.budget, b.meta_budget_ms), (Some(Duration::from_secs(5)), Some(5000)));
        let b = run(None, Some("2s"), false);
        assert_eq!((b.budget, b.meta_budget_ms), (Some(Duration::from_secs(2)), Some(2000)));
        let b = run(None, None, false);
        assert_eq!((b.budget, b.meta_budget_ms), (Some(Duration::from_secs(30)), Some(30_000)));
        assert!(b.warning.is_none());
    }

    #[test]
    fn zero_switches_off_but_is_recorded() {
        let b = run(Some(0), Some("2000"), false);
        assert_eq!((b.budget, b.meta_budget_ms), (None, Some(0)));
        let b = run(None, Some("0"), false);
        assert_eq!((b.budget, b.meta_budget_ms), (None, Some(0)));
        let b = run(Some(0), None, true);
        assert_eq!((b.budget, b.meta_budget_ms), (None, Some(0)));
    }

    #[test]
    fn terminal_without_flag_has_no_budget_and_no_meta() {
        let b = run(None, Some("2000"), true);
        assert_eq!((b.budget, b.meta_budget_ms), (None, None));
        let b = run(Some(60_000), None, true);
        assert_eq!(b.meta_budget_ms, Some(60_000));
    }

    #[test]
    fn malformed_env_warns_and_defaults() {
        for bad in ["-1", "soon", "", "12parsecs"] {
            let b = run(None, Some(bad), false);
            assert_eq!(b.meta_budget_ms, Some(DEFAULT_BUDGET_MS), "{bad}");
            assert_eq!(b.warning.map(|w| w.code), Some(BUDGET_ENV_INVALID.to_owned()));
        }
    }

    #[test]
    fn the_budget_is_stamped_once_with_its_warning() {
        let budget = run(None, Some("soon"), false);
        let mut response = Response::success(json!({}));
        response.meta.insert("budget_ms".into(), json!(0));
        stamp_budget(&mut response, &budget);
        assert_eq!(response.meta["budget_ms"], 0, "an answer's own value stands");
        assert_eq!(response.warnings[0].code, BUDGET_ENV_INVALID);
        let mut response = Response::success(json!({}));
        stamp_budget(&mut response, &run(None, None, true));
        assert!(!response.meta.contains_key("budget_ms"));
    }
}
