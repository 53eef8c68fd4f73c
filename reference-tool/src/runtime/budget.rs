//! Resolution of the sync call budget (REQ-F-080, CONTRACT §3).
//!
//! Order: the `--budget` flag, then [`BUDGET_ENV`] (`AGENT_CALL_BUDGET_MS`, read under exactly
//! that name), then [`DEFAULT_BUDGET_MS`]. A value of zero switches the budget off. When stdin is
//! a terminal and no `--budget` flag was given the call is interactive: no budget at all, and
//! `meta.budget_ms` is left out of the response.
//!
//! Both the flag and the variable accept the forms of [`crate::duration::parse_duration`]
//! (`5s`, `2000ms`, `1m`, bare milliseconds). A malformed or negative flag is the caller's
//! mistake: [`BudgetError`], which the framework answers with ARG_ERROR (2) in the validation
//! phase. A malformed variable is the environment's: it is ignored with a
//! [`BUDGET_ENV_INVALID`] warning and the default applies.
//!
//! Only commands that declare `interruption` call this; every other command has no `--budget`
//! flag and never reads the variable.
//!
//! ```
//! use reftool::runtime::budget::{resolve_budget, BudgetInputs};
//! let b = resolve_budget(&BudgetInputs { flag: Some("5s"), env: Some("2000"), stdin_is_terminal: false }).unwrap();
//! assert_eq!(b.meta_budget_ms, Some(5000));
//! ```

use std::io::IsTerminal;
use std::time::Duration;

use super::warning::{BUDGET_ENV_INVALID, RuntimeWarning};
use crate::duration::{DurationError, parse_duration};

/// The environment variable a caller's harness sets once for every tool it runs.
pub const BUDGET_ENV: &str = "AGENT_CALL_BUDGET_MS";
/// The framework default when neither flag nor variable is given.
pub const DEFAULT_BUDGET_MS: u64 = 30_000;

/// What the resolution looks at.
#[derive(Debug, Clone, Copy, Default)]
pub struct BudgetInputs<'a> {
    /// The raw `--budget` value, if the flag was given.
    pub flag: Option<&'a str>,
    /// The raw value of [`BUDGET_ENV`], if set (`None` also when it is not valid Unicode:
    /// use [`BudgetInputs::from_process`] to get that case reported).
    pub env: Option<&'a str>,
    /// Whether stdin is a terminal (REQ-F-009's interactive test).
    pub stdin_is_terminal: bool,
}

/// Where the budget in force came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetSource {
    /// The `--budget` flag.
    Flag,
    /// `AGENT_CALL_BUDGET_MS`.
    Env,
    /// [`DEFAULT_BUDGET_MS`].
    Default,
    /// Interactive call without a flag: no budget.
    Interactive,
}

/// The resolved budget.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvedBudget {
    /// How long the call may hold its caller; `None` = unbounded (off or interactive).
    pub budget: Option<Duration>,
    /// The value for `meta.budget_ms`: `None` = leave the key out (interactive), `Some(0)` =
    /// switched off, otherwise the budget in milliseconds.
    pub meta_budget_ms: Option<u64>,
    /// Where it came from.
    pub source: BudgetSource,
    /// Warnings for the response (a malformed environment value).
    pub warnings: Vec<RuntimeWarning>,
}

/// A `--budget` value that is not a duration (ARG_ERROR).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid --budget: {0}")]
pub struct BudgetError(#[from] pub DurationError);

impl<'a> BudgetInputs<'a> {
    /// Inputs from this process: the given flag, the real environment and the real stdin.
    /// A non-Unicode variable is passed on as an (invalid) empty-looking value so that it is
    /// reported, not silently treated as unset.
    pub fn from_process(flag: Option<&'a str>, env_holder: &'a mut Option<String>) -> Self {
        *env_holder = std::env::var_os(BUDGET_ENV)
            .map(|v| v.into_string().unwrap_or_else(|raw| raw.to_string_lossy().into_owned()));
        BudgetInputs {
            flag,
            env: env_holder.as_deref(),
            stdin_is_terminal: std::io::stdin().is_terminal(),
        }
    }
}

impl ResolvedBudget {
    /// A budget of `ms` milliseconds from `source` (`0`: switched off, still recorded).
    pub fn of_ms(ms: u64, source: BudgetSource) -> ResolvedBudget {
        ResolvedBudget {
            budget: (ms > 0).then(|| Duration::from_millis(ms)),
            meta_budget_ms: Some(ms),
            source,
            warnings: Vec::new(),
        }
    }

    /// An interactive call's: no budget, and no `meta.budget_ms`.
    fn interactive() -> ResolvedBudget {
        ResolvedBudget {
            budget: None,
            meta_budget_ms: None,
            source: BudgetSource::Interactive,
            warnings: Vec::new(),
        }
    }
}

/// The milliseconds of a duration, saturating.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Resolves the budget: `--budget`, else a terminal's none, else [`BUDGET_ENV`], else
/// [`DEFAULT_BUDGET_MS`] (see the module docs).
pub fn resolve_budget(inputs: &BudgetInputs<'_>) -> Result<ResolvedBudget, BudgetError> {
    let resolved = if let Some(flag) = inputs.flag {
        parse_duration(flag).map(|d| ResolvedBudget::of_ms(millis(d), BudgetSource::Flag))
    } else if inputs.stdin_is_terminal {
        Ok(ResolvedBudget::interactive())
    } else if let Some(env) = inputs.env {
        Ok(from_env(env))
    } else {
        Ok(ResolvedBudget::of_ms(DEFAULT_BUDGET_MS, BudgetSource::Default))
    };
    crate::mutants::budget_override(inputs, resolved.map_err(BudgetError))
}

/// The budget [`BUDGET_ENV`] sets; a malformed value is ignored with a warning.
fn from_env(env: &str) -> ResolvedBudget {
    match parse_duration(env) {
        Ok(d) => ResolvedBudget::of_ms(millis(d), BudgetSource::Env),
        Err(e) => {
            let mut resolved = ResolvedBudget::of_ms(DEFAULT_BUDGET_MS, BudgetSource::Default);
            resolved.warnings.push(RuntimeWarning {
                code: BUDGET_ENV_INVALID,
                message: format!(
                    "{BUDGET_ENV} is ignored ({e}); the default budget of {DEFAULT_BUDGET_MS}ms applies"
                ),
                context: Some(serde_json::json!({ "value": env })),
            });
            resolved
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        flag: Option<&str>,
        env: Option<&str>,
        tty: bool,
    ) -> Result<ResolvedBudget, BudgetError> {
        resolve_budget(&BudgetInputs { flag, env, stdin_is_terminal: tty })
    }

    #[test]
    fn flag_beats_env_beats_default() {
        let b = run(Some("5s"), Some("2000"), false).unwrap();
        assert_eq!(
            (b.budget, b.meta_budget_ms, b.source),
            (Some(Duration::from_secs(5)), Some(5000), BudgetSource::Flag)
        );
        let b = run(None, Some("2000"), false).unwrap();
        assert_eq!(
            (b.budget, b.meta_budget_ms, b.source),
            (Some(Duration::from_secs(2)), Some(2000), BudgetSource::Env)
        );
        let b = run(None, None, false).unwrap();
        assert_eq!(
            (b.budget, b.meta_budget_ms, b.source),
            (Some(Duration::from_secs(30)), Some(30_000), BudgetSource::Default)
        );
        assert!(b.warnings.is_empty());
    }

    #[test]
    fn zero_switches_off_but_is_recorded() {
        let b = run(Some("0"), Some("2000"), false).unwrap();
        assert_eq!((b.budget, b.meta_budget_ms), (None, Some(0)));
        let b = run(None, Some("0"), false).unwrap();
        assert_eq!((b.budget, b.meta_budget_ms), (None, Some(0)));
        let b = run(Some("0ms"), None, true).unwrap();
        assert_eq!((b.budget, b.meta_budget_ms), (None, Some(0)));
    }

    #[test]
    fn terminal_without_flag_has_no_budget_and_no_meta() {
        let b = run(None, Some("2000"), true).unwrap();
        assert_eq!((b.budget, b.meta_budget_ms, b.source), (None, None, BudgetSource::Interactive));
        let b = run(Some("1m"), None, true).unwrap();
        assert_eq!(b.meta_budget_ms, Some(60_000));
    }

    #[test]
    fn malformed_flag_is_an_error() {
        for bad in ["-1", "-5s", "abc", "", "1.5s", "5d"] {
            assert!(run(Some(bad), None, false).is_err(), "{bad}");
        }
    }

    #[test]
    fn malformed_env_warns_and_defaults() {
        for bad in ["-1", "soon", "", "12parsecs"] {
            let b = run(None, Some(bad), false).unwrap();
            assert_eq!(b.meta_budget_ms, Some(DEFAULT_BUDGET_MS), "{bad}");
            assert_eq!(b.warnings.len(), 1);
            assert_eq!(b.warnings[0].code, BUDGET_ENV_INVALID);
        }
    }
}
