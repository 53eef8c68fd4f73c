//! `budget_recorded` and `retryable_as_declared`: the shape every response of an interruptible
//! command keeps, judged on **every** response of a step (each copy, each hop of a continue
//! loop), not only on its last. A hop in the middle of a loop is as much a response of the
//! command as the one that ends it (REQ-F-080: every response; REQ-F-082: every INCOMPLETE).
//!
//! Each check gives one finding per step however many of its responses break the rule, naming
//! them all: a tool that never records its budget has one cause, and should read as one.

use serde_json::{Value, json};

use super::{Check, Judge, StepFacts, no_validation};
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

// ---- the checks of this family ----

/// The `budget_recorded` check.
// Every response of the step, each hop of a loop included (the per-observation checks see a
// loop's last hop only).
pub(super) const BUDGET_RECORDED: Check = Check {
    defined_in: file!(),
    key: Some("budget_recorded"),
    active: |e| e.budget_recorded == Some(true),
    needs_response: true,
    judge: Judge::Step(budget_recorded),
    holds: "every response of the step (each copy, each hop of a continue loop, not only its last) has `meta.budget_ms`, a whole number; an ending that `job wait` / `job status` relays (any exit but 14: the stored final response, JOB_LOST, STALLED, a cancelled job's) may leave it out, where the spec contradicts itself (docs/contract.md §9), and is a whole number when there; one finding names every response without it",
    findings: &[FindingKind::BudgetMeta],
    cites: &["REQ-F-080"],
    value: || json!({"type": "boolean"}),
    validate: no_validation,
};

/// The `retryable_as_declared` check.
pub(super) const RETRYABLE_AS_DECLARED: Check = Check {
    defined_in: file!(),
    key: Some("retryable_as_declared"),
    active: |e| e.retryable_as_declared == Some(true),
    needs_response: true,
    judge: Judge::Step(retryable_as_declared),
    holds: "every INCOMPLETE (exit 14) response of the step (each copy, each hop) has the `error.retryable` of the `\"14\"` exit-code entry of the command it answers for: the role's (or the step's arguments'); a `job wait` continuing a detaching command, or a `job.*` step, may copy the built-in's own entry instead (none declared counts as read-only, retryable), docs/contract.md §9",
    findings: &[FindingKind::IncompleteRetryable],
    cites: &["REQ-F-082"],
    value: || json!({"type": "boolean"}),
    validate: no_validation,
};

#[cfg(test)]
mod tests {
    use crate::checks::tests::*;

    /// An observation named `name` of a response exiting `code` with this `meta.budget_ms` (none
    /// when `None`) and, for an INCOMPLETE, this `error.retryable`.
    fn hop(
        name: &'static str,
        code: i32,
        budget: Option<Value>,
        retryable: Option<bool>,
    ) -> Observation {
        let mut meta = json!({ "exit_code": code, "duration_ms": 5 });
        if let Some(b) = budget {
            meta["budget_ms"] = b;
        }
        let error = retryable.map_or(
            Value::Null,
            |r| json!({ "code": "INCOMPLETE", "message": "m", "retryable": r }),
        );
        let response =
            json!({ "ok": code == 0, "data": {}, "error": error, "warnings": [], "meta": meta });
        named_run(name, code, &response)
    }

    fn entries(list: &[(&str, Option<bool>)]) -> StepFacts {
        let incomplete_entries = list
            .iter()
            .map(|(c, r)| DeclaredEntry { command: (*c).to_owned(), retryable: *r })
            .collect();
        StepFacts { incomplete_entries, ..StepFacts::default() }
    }

    #[test]
    fn budget_recorded_judges_every_hop_in_one_finding() {
        let e = expect(json!({ "budget_recorded": true }));
        let none = StepFacts::default();
        let first = hop("wait#1", 14, Some(json!(700)), Some(true));
        let last = hop("wait#2", 0, Some(json!(0)), None);
        assert!(check_all(&e, "wait", &[&first, &last], &none).is_empty());
        // A middle hop without it is found, though the last hop has it.
        let bare = hop("wait#1", 14, None, Some(true));
        let text = hop("wait#2", 14, Some(json!("700")), Some(true));
        let f = only(check_all(&e, "wait", &[&bare, &text, &last], &none));
        assert_eq!(f.check, FindingKind::BudgetMeta);
        assert_eq!(f.message, "2 of the 3 responses of the step do not record the budget in force");
        assert_eq!(
            f.actual.as_deref(),
            Some(
                "wait#1 (exit 14): meta.budget_ms absent\nwait#2 (exit 14): meta.budget_ms \"700\""
            )
        );
        assert_eq!(f.step.as_deref(), Some("wait"));
        // An ending other than 0 and 14 is a response too.
        let lost = hop("wait#1", 1, None, None);
        assert_eq!(names(&check_all(&e, "wait", &[&lost], &none)), ["budget-meta"]);
        // No response is the response checks' to report, once.
        assert!(check_all(&e, "wait", &[&exited(1, "")], &none).is_empty());
        assert_eq!(names(&judge(&e, &exited(1, ""))), ["stdout-not-json"]);
    }

    /// REQ-F-080 asks for `meta.budget_ms` on every response of an interruptible command, but
    /// REQ-F-081's own examples of a relayed final response and of JOB_LOST carry none
    /// (docs/contract.md §9): an ending that `job wait` relays may leave it out; its INCOMPLETE answers, and the
    /// command's own responses, may not.
    #[test]
    fn budget_recorded_lets_a_relayed_ending_leave_the_budget_out() {
        let e = expect(json!({ "budget_recorded": true }));
        let waits = StepFacts { relayed: [0, 1].into_iter().collect(), ..StepFacts::default() };
        let hop_14 = hop("wait#1", 14, Some(json!(700)), Some(true));
        let relayed_end = hop("wait#2", 0, None, None);
        let lost = hop("wait#2", 1, None, None);
        assert!(check_all(&e, "wait", &[&hop_14, &relayed_end], &waits).is_empty());
        assert!(check_all(&e, "wait", &[&hop_14, &lost], &waits).is_empty());
        // Kept, it is a whole number still.
        let text = hop("wait#2", 1, Some(json!("700")), None);
        assert_eq!(names(&check_all(&e, "wait", &[&hop_14, &text], &waits)), ["budget-meta"]);
        // An INCOMPLETE that job wait gives carries it (REQ-F-082).
        let bare_14 = hop("wait#1", 14, None, Some(true));
        assert_eq!(
            names(&check_all(&e, "wait", &[&bare_14, &relayed_end], &waits)),
            ["budget-meta"]
        );
        // The command's own ending keeps it: the same responses, not relayed.
        let own = StepFacts::default();
        assert_eq!(names(&check_all(&e, "call", &[&hop_14, &lost], &own)), ["budget-meta"]);
    }

    #[test]
    fn retryable_as_declared_wants_every_incomplete_to_copy_a_declared_entry() {
        let e = expect(json!({ "retryable_as_declared": true }));
        let reader = entries(&[("analyze", Some(true))]);
        let yes = hop("call", 14, Some(json!(700)), Some(true));
        let no = hop("continue#1", 14, Some(json!(700)), Some(false));
        let done = hop("continue#2", 0, Some(json!(700)), None);
        assert!(check_all(&e, "s", &[&yes, &done], &reader).is_empty());
        let f = only(check_all(&e, "s", &[&yes, &no, &done], &reader));
        assert_eq!(f.check, FindingKind::IncompleteRetryable);
        assert_eq!(
            f.message,
            "1 of the 2 INCOMPLETE responses of the step do not copy `retryable` from the declared \"14\" entry"
        );
        assert_eq!(
            f.expected.as_deref(),
            Some("error.retryable true (the \"14\" entry of `analyze`)")
        );
        assert_eq!(f.actual.as_deref(), Some("continue#1: error.retryable false"));
        // A writer's job waited on may copy either its own entry or job wait's (docs/contract.md §9).
        let either = entries(&[("deploy", Some(false)), ("job.wait", Some(true))]);
        assert!(check_all(&e, "s", &[&yes, &no], &either).is_empty());
        let writer = entries(&[("import", Some(false))]);
        assert_eq!(names(&check_all(&e, "s", &[&yes], &writer)), ["incomplete-retryable"]);
        // An INCOMPLETE without the boolean copies nothing.
        let absent = hop("call", 14, Some(json!(700)), None);
        assert_eq!(names(&check_all(&e, "s", &[&absent], &reader)), ["incomplete-retryable"]);
        // Nothing declared, nothing to copy: the manifest scenarios judge the missing entry.
        assert!(check_all(&e, "s", &[&no], &entries(&[("analyze", None)])).is_empty());
    }

    #[test]
    fn the_declared_entries_follow_the_command_a_response_answers_for() {
        let manifest = json!({ "commands": {
            "analyze": { "danger_level": "safe", "interruption": { "detach": true, "resume": false },
                         "exit_codes": { "14": { "description": "d", "retryable": true, "side_effects": "none" } } },
            "import": { "danger_level": "mutating", "interruption": { "detach": false, "resume": true },
                        "exit_codes": { "14": { "description": "d", "retryable": false, "side_effects": "partial" } } },
            "job.wait": { "danger_level": "safe", "exit_codes": {} },
        } });
        let commands = crate::discover::Commands::from_manifest(&manifest);
        let argv = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
        let found = |argv: &[String], job: Option<&[String]>, continued| {
            declared_entries(&commands, argv, job, continued)
                .into_iter()
                .map(|e| (e.command, e.retryable))
                .collect::<Vec<_>>()
        };
        let analyze = argv(&["analyze", "data.csv"]);
        let import = argv(&["import", "rows.csv", "--db", "rows.db"]);
        let own = |c: &str, r: bool| (c.to_owned(), Some(r));
        assert_eq!(found(&analyze, None, false), [own("analyze", true)]);
        // Continuing a detaching command runs `job wait`, whose own entry (none: read-only) counts.
        assert_eq!(found(&analyze, None, true), [own("analyze", true), own("job.wait", true)]);
        // A resume-only command's continuation is the invocation itself.
        assert_eq!(found(&import, None, true), [own("import", false)]);
        // `job wait <id>` as a step's own arguments answers for the scenario's role too.
        let wait = argv(&["job", "wait", "abc"]);
        assert_eq!(
            found(&wait, Some(&import), false),
            [own("job.wait", true), own("import", false)]
        );
        assert!(found(&argv(&["nothing"]), None, true).is_empty());
    }
}
