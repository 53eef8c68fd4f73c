//! The call budget of an interruptible command or `job wait` (REQ-F-080).
//!
//! The rule itself is [`crate::runtime::budget::resolve_budget`]: `--budget`, else
//! `AGENT_CALL_BUDGET_MS`, else 30000 ms; `0` switches it off; a call with stdin on a
//! terminal and no `--budget` has none (and no `meta.budget_ms`). This module feeds it the
//! invocation and writes the outcome into every response after validation, the idempotency
//! replay included ([`stamp_budget`]), with the `BUDGET_ENV_INVALID` warning when the
//! variable was malformed. The budget never changes the work, so it is not part of a job's
//! identity.

use serde_json::json;

use crate::framework::context::{Invocation, Warning};
use crate::framework::envelope::Response;
use crate::runtime::budget::{
    BUDGET_ENV, BudgetInputs, BudgetSource, ResolvedBudget, resolve_budget,
};

/// Resolves the call budget of an invocation .
pub fn resolve_call_budget(invocation: &Invocation) -> ResolvedBudget {
    let flag = invocation.budget_flag.map(|d| d.as_millis().to_string());
    let env = std::env::var_os(BUDGET_ENV).map(|v| v.to_string_lossy().into_owned());
    let inputs = BudgetInputs {
        flag: flag.as_deref(),
        env: env.as_deref(),
        stdin_is_terminal: invocation.modes.interactive,
    };
    // The flag was already parsed as a duration in validation, so this cannot fail; stay
    // unbounded-but-recorded if it ever did.
    resolve_budget(&inputs).unwrap_or(ResolvedBudget {
        budget: None,
        meta_budget_ms: Some(0),
        source: BudgetSource::Flag,
        warnings: Vec::new(),
    })
}

/// Records the budget in force in `meta.budget_ms` (unless the answer set its own) and adds
/// the budget's warnings.
pub fn stamp_budget(response: &mut Response, budget: &ResolvedBudget) {
    if let Some(ms) = crate::mutants::stamped_budget_ms(response, budget.meta_budget_ms) {
        response.meta.entry("budget_ms").or_insert(json!(ms));
    }
    for w in &budget.warnings {
        response.warnings.push(Warning { code: w.code.to_owned(), message: w.message.clone() });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::warning::{BUDGET_ENV_INVALID, RuntimeWarning};

    #[test]
    fn the_budget_is_stamped_once_with_its_warnings() {
        let budget = ResolvedBudget {
            budget: None,
            meta_budget_ms: Some(30_000),
            source: BudgetSource::Default,
            warnings: vec![RuntimeWarning {
                code: BUDGET_ENV_INVALID,
                message: "ignored".into(),
                context: None,
            }],
        };
        let mut response = Response::success(json!({}));
        response.meta.insert("budget_ms".into(), json!(0));
        stamp_budget(&mut response, &budget);
        assert_eq!(response.meta["budget_ms"], 0, "an answer's own value stands");
        assert_eq!(response.warnings[0].code, "BUDGET_ENV_INVALID");
        let terminal = ResolvedBudget { meta_budget_ms: None, warnings: vec![], ..budget };
        let mut response = Response::success(json!({}));
        stamp_budget(&mut response, &terminal);
        assert!(!response.meta.contains_key("budget_ms"));
    }
}
