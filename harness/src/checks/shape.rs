//! `budget_recorded` and `retryable_as_declared`: the shape every response of an interruptible
//! command keeps, judged on **every** response of a step (each copy, each hop of a continue
//! loop), not only on its last. A hop in the middle of a loop is as much a response of the
//! command as the one that ends it (REQ-F-080: every response; REQ-F-082: every INCOMPLETE).
//!
//! Each check gives one finding per step however many of its responses break the rule, naming
//! them all: a tool that never records its budget has one cause, and should read as one.

use serde_json::Value;

use super::StepFacts;
use crate::discover::Commands;
use crate::observe::INCOMPLETE;
use crate::observe::Observation;
use crate::outcome::{Finding, FindingKind};
use crate::scenario::Expect;

/// A command a step's responses may answer for, with what its INCOMPLETE entry declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredEntry {
    /// The command's path, e.g. `analyze` or `job.wait`.
    pub command: String,
    /// `retryable` of its `"14"` exit-code entry; `None` when it declares none.
    pub retryable: Option<bool>,
}

/// The commands whose INCOMPLETE entry a step's responses may copy: the one the step invoked
/// (`argv`, the role's or the step's own arguments), and when that is a `job.*` built-in or the
/// step continues a detaching command through `job wait`, both the job's command (`job_command`,
/// the role's argv) and the built-in: docs/contract.md §9 leaves it open which of the two a `job wait`
/// copies. A built-in without a `"14"` entry counts as read-only (retryable), as its work is.
pub fn declared_entries(
    commands: &Commands,
    argv: &[String],
    job_command: Option<&[String]>,
    continued: bool,
) -> Vec<DeclaredEntry> {
    let entry = |(path, info): (&str, &crate::discover::CommandInfo)| DeclaredEntry {
        command: path.to_owned(),
        retryable: info.incomplete_retryable.or(info.builtin.then_some(true)),
    };
    let invoked = commands.command_for_args(argv);
    let job_runtime = |path: &str| path == "job" || path.starts_with("job.");
    let mut entries: Vec<DeclaredEntry> = invoked.map(entry).into_iter().collect();
    let through_job_wait = continued && invoked.is_some_and(|(_, info)| info.detach == Some(true));
    let answers_for_a_job = invoked.is_some_and(|(path, _)| job_runtime(path));
    if through_job_wait {
        entries.extend(
            commands.by_path.get_key_value("job.wait").map(|(p, i)| entry((p.as_str(), i))),
        );
    }
    if answers_for_a_job && let Some(job) = job_command.and_then(|a| commands.command_for_args(a)) {
        entries.push(entry(job));
    }
    entries.dedup();
    entries
}

/// `budget_recorded`: every response of the step has `meta.budget_ms`, a whole number of
/// milliseconds (0 when the budget is off). An observation without a response is the response
/// checks' to report.
///
/// One exception, where the spec contradicts itself: an ending that `job wait` or `job status`
/// relays ([`StepFacts::relayed`], any exit but INCOMPLETE: the job's stored final response,
/// JOB_LOST, STALLED, a cancelled job's ending) may leave the field out. REQ-F-080 asks for it
/// on every response of an interruptible command, but REQ-F-081's own examples of a stored
/// final response and of JOB_LOST carry none, and the envelope schema has it absent where no
/// budget applies (docs/contract.md §9). When such a response has it, it is a whole number still. The
/// command's own responses, and every INCOMPLETE (REQ-F-082 lists `meta.budget_ms` among what
/// it carries), keep it.
pub(super) fn budget_recorded(
    _expect: &Expect,
    observations: &[&Observation],
    facts: &StepFacts,
) -> Vec<Finding> {
    let with_response: Vec<(usize, &Observation, &Value)> = observations
        .iter()
        .enumerate()
        .filter_map(|(rank, o)| o.response().map(|r| (rank, *o, r)))
        .collect();
    let may_omit = |rank: usize, o: &Observation| {
        facts.relayed.contains(&rank) && o.exit_code() != Some(INCOMPLETE)
    };
    let lacking: Vec<String> = with_response
        .iter()
        .filter(|(rank, o, r)| match r.pointer("/meta/budget_ms") {
            None => !may_omit(*rank, o),
            Some(value) => value.as_u64().is_none(),
        })
        .map(|(_, o, r)| {
            let value = r.pointer("/meta/budget_ms").map_or("absent".into(), Value::to_string);
            format!("{} (exit {}): meta.budget_ms {value}", o.record.name, exit_word(o))
        })
        .collect();
    if lacking.is_empty() {
        return Vec::new();
    }
    vec![
        Finding::new(
            FindingKind::BudgetMeta,
            format!(
                "{} of the {} responses of the step do not record the budget in force",
                lacking.len(),
                with_response.len()
            ),
        )
        .expected("meta.budget_ms, a whole number of milliseconds, in every response")
        .actual(lacking.join("\n")),
    ]
}

/// `retryable_as_declared`: every INCOMPLETE (exit 14) response of the step has an
/// `error.retryable` that one of the step's [`DeclaredEntry`]s declares. With no entry
/// declaring `retryable`, there is nothing to copy, and the manifest scenarios judge that.
pub(super) fn retryable_as_declared(
    _expect: &Expect,
    observations: &[&Observation],
    facts: &StepFacts,
) -> Vec<Finding> {
    let declared: Vec<(&str, bool)> = facts
        .incomplete_entries
        .iter()
        .filter_map(|e| e.retryable.map(|r| (e.command.as_str(), r)))
        .collect();
    if declared.is_empty() {
        return Vec::new();
    }
    let incomplete: Vec<(&Observation, &Value)> = observations
        .iter()
        .filter(|o| o.exit_code() == Some(INCOMPLETE))
        .filter_map(|o| o.response().map(|r| (*o, r)))
        .collect();
    let wrong: Vec<String> = incomplete
        .iter()
        .filter_map(|(o, r)| {
            let value = r.pointer("/error/retryable");
            let copied = value
                .and_then(Value::as_bool)
                .is_some_and(|v| declared.iter().any(|&(_, d)| d == v));
            (!copied).then(|| {
                let shown = value.map_or("absent".into(), Value::to_string);
                format!("{}: error.retryable {shown}", o.record.name)
            })
        })
        .collect();
    if wrong.is_empty() {
        return Vec::new();
    }
    let expected: Vec<String> = declared
        .iter()
        .map(|(command, r)| format!("{r} (the \"14\" entry of `{command}`)"))
        .collect();
    vec![
        Finding::new(
            FindingKind::IncompleteRetryable,
            format!(
                "{} of the {} INCOMPLETE responses of the step do not copy `retryable` from the declared \"14\" entry",
                wrong.len(),
                incomplete.len()
            ),
        )
        .expected(format!("error.retryable {}", expected.join(" or ")))
        .actual(wrong.join("\n")),
    ]
}

fn exit_word(obs: &Observation) -> String {
    obs.exit_code().map_or_else(|| "none".to_owned(), |c| c.to_string())
}
