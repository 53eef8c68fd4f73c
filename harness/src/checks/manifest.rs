//! `manifest_rules`: the static registration rules of docs/contract.md §2, judged on a manifest
//! response (bare, or wrapped in an envelope as `data`).
//!
//! One broken rule is one root cause however many commands break it: a single command gets a
//! finding of its own, several get one finding that counts them and names the first
//! [`NAMED`] (a manifest of 45,000 writers without an idempotency key is one headline, not a
//! wall of 45,000 findings in every scenario that judges the rule).

use serde_json::{Value, json};

use super::{Check, Context, Judge, no_validation};
use crate::observe::Observation;
use crate::outcome::FindingKind;
use crate::outcome::{Finding, compact};
use crate::scenario::{Expect, ManifestRule};
use crate::schemas::{effective_entry, unwrap_manifest};

/// `manifest_rules`: every listed rule, in the order listed.
pub(super) fn manifest_rules(
    expect: &Expect,
    _obs: &Observation,
    response: &Value,
    _ctx: &Context<'_>,
) -> Vec<Finding> {
    expect.manifest_rules.iter().flat_map(|rule| check_rule(*rule, response)).collect()
}

/// How many offending commands a finding of several names.
pub const NAMED: usize = 5;

/// One command that breaks a rule.
struct Violation {
    /// The command's path.
    path: String,
    /// What is wrong with it, in a sentence about it alone.
    message: String,
    /// What the rule asks (the same for every violation of one kind).
    expected: String,
    /// What the command declares.
    actual: String,
    /// What is wrong, said of several commands ("declare interruption with neither ...").
    plural: &'static str,
}

/// The findings of a rule's violations: one per kind of violation (its `expected`), naming
/// the command when it is alone, else counting them and naming the first [`NAMED`].
fn findings_of(violations: Vec<Violation>) -> Vec<Finding> {
    let mut kinds: Vec<(String, Vec<Violation>)> = Vec::new();
    for v in violations {
        match kinds.iter_mut().find(|(expected, _)| *expected == v.expected) {
            Some((_, group)) => group.push(v),
            None => kinds.push((v.expected.clone(), vec![v])),
        }
    }
    kinds
        .into_iter()
        .filter_map(|(expected, mut group)| {
            if group.len() == 1 {
                let v = group.pop()?;
                let message = format!("command `{}`: {}", v.path, v.message);
                return Some(
                    Finding::new(FindingKind::ManifestRule, message)
                        .expected(expected)
                        .actual(v.actual),
                );
            }
            let first = group.first()?;
            let names: Vec<String> =
                group.iter().take(NAMED).map(|v| format!("`{}`", v.path)).collect();
            let mut message =
                format!("{} commands {}: {}", group.len(), first.plural, names.join(", "));
            if group.len() > NAMED {
                message.push_str(&format!(" and {} more", group.len() - NAMED));
            }
            Some(
                Finding::new(FindingKind::ManifestRule, message)
                    .expected(expected)
                    .actual(format!("`{}` (the first): {}", first.path, first.actual)),
            )
        })
        .collect()
}

/// Checks one registration rule on a manifest response. A command that breaks it is a finding
/// naming the command and showing the offending entry; several are one finding that counts
/// them (the first five by name) and shows the first one's entry.
pub fn check_rule(rule: ManifestRule, response: &Value) -> Vec<Finding> {
    let manifest = unwrap_manifest(response);
    let Some(commands) = manifest.get("commands").and_then(Value::as_object) else {
        return vec![
            Finding::new(FindingKind::ManifestRule, "the manifest has no `commands` object")
                .actual(compact(manifest)),
        ];
    };
    let mut violations = Vec::new();
    for (path, entry) in commands {
        let interruption = entry.get("interruption").filter(|v| !v.is_null());
        let danger = entry.get("danger_level").and_then(Value::as_str).unwrap_or("");
        let writes = matches!(danger, "mutating" | "destructive");
        let flags = entry.get("flags").and_then(Value::as_object);
        let has_flag = |name: &str| flags.is_some_and(|f| f.contains_key(name));
        let get_bool =
            |v: Option<&Value>, k: &str| v.and_then(|v| v.get(k)).and_then(Value::as_bool);
        let mut fail = |plural: &'static str, message: String, expected: &str, actual: String| {
            violations.push(Violation {
                path: path.clone(),
                message,
                expected: expected.to_owned(),
                actual,
                plural,
            });
        };
        match rule {
            ManifestRule::DetachOrResume => {
                if let Some(i) = interruption
                    && get_bool(Some(i), "detach") != Some(true)
                    && get_bool(Some(i), "resume") != Some(true)
                {
                    fail(
                        "declare interruption with neither detach nor resume",
                        "declares interruption with neither detach nor resume".into(),
                        "detach: true or resume: true",
                        compact(i),
                    );
                }
            }
            ManifestRule::IncompleteEntry => {
                if let Some(i) = interruption
                    && effective_entry(manifest, entry, "14").is_none()
                {
                    fail(
                        "declare interruption but no exit code \"14\"",
                        format!("declares interruption {} but no exit code \"14\"", compact(i)),
                        "an exit_codes entry \"14\" (INCOMPLETE), its own or the root table's",
                        format!(
                            "exit_codes keys: {}; root exit_codes keys: {}",
                            keys(entry.get("exit_codes")),
                            keys(manifest.get("exit_codes"))
                        ),
                    );
                }
            }
            ManifestRule::IncompleteEntryShape => {
                if interruption.is_some()
                    && let Some(e14) = effective_entry(manifest, entry, "14")
                {
                    let retryable = e14.get("retryable").and_then(Value::as_bool);
                    let side = e14.get("side_effects").and_then(Value::as_str);
                    let (want_r, want_s) = if writes { (false, "partial") } else { (true, "none") };
                    if retryable != Some(want_r) || side != Some(want_s) {
                        fail(
                            "have a \"14\" entry of the wrong shape for their danger level",
                            format!("the \"14\" entry of a {danger} command has the wrong shape"),
                            &format!("retryable: {want_r}, side_effects: \"{want_s}\""),
                            compact(e14),
                        );
                    }
                }
            }
            ManifestRule::NotAsyncOrStreaming => {
                if interruption.is_some() {
                    let mut bad = Vec::new();
                    for key in ["async", "streaming_default", "supports_streaming"] {
                        if entry.get(key).and_then(Value::as_bool) == Some(true) {
                            bad.push(format!("{key}: true"));
                        }
                    }
                    if entry.get("stdout").and_then(Value::as_str) == Some("protocol") {
                        bad.push("stdout: \"protocol\"".into());
                    }
                    if !bad.is_empty() {
                        fail(
                            "declare interruption together with a declaration that excludes it",
                            "declares interruption together with a declaration that excludes it"
                                .into(),
                            "no async, streaming or protocol stdout beside interruption",
                            bad.join(", "),
                        );
                    }
                }
            }
            ManifestRule::ResumableWriterHasKey => {
                if writes
                    && get_bool(interruption, "resume") == Some(true)
                    && !has_flag("idempotency-key")
                {
                    fail(
                        "write, are resumable and have no idempotency-key flag",
                        format!("is {danger} and resumable but has no idempotency-key flag"),
                        "an `idempotency-key` flag",
                        format!(
                            "flags: {}",
                            flags
                                .map(|f| f.keys().cloned().collect::<Vec<_>>().join(", "))
                                .unwrap_or_default()
                        ),
                    );
                }
            }
            ManifestRule::BudgetFlagOnlyWhenInterruptible => {
                // docs/contract.md §9: the `job.*` built-ins may show `--budget` either way.
                if path == "job" || path.starts_with("job.") {
                    continue;
                }
                match (interruption.is_some(), has_flag("budget")) {
                    (true, false) => fail(
                        "declare interruption but have no budget flag",
                        "declares interruption but has no budget flag".into(),
                        "a `budget` flag",
                        "no `budget` flag".into(),
                    ),
                    (false, true) => fail(
                        "have a budget flag but declare no interruption",
                        "has a budget flag but declares no interruption".into(),
                        "no `budget` flag on a command without interruption",
                        compact(flags.and_then(|f| f.get("budget")).unwrap_or(&Value::Null)),
                    ),
                    _ => {}
                }
            }
            ManifestRule::SigintExitEntry => {
                // REQ-F-069: the framework adds "130" to every command's exit codes; the
                // manifest schema lets a command inherit it from the root table.
                if effective_entry(manifest, entry, "130").is_none() {
                    fail(
                        "have no exit code \"130\"",
                        "has no exit code \"130\" (SIGINT)".into(),
                        "an exit_codes entry \"130\", its own or the root table's",
                        format!(
                            "exit_codes keys: {}; root exit_codes keys: {}",
                            keys(entry.get("exit_codes")),
                            keys(manifest.get("exit_codes"))
                        ),
                    );
                }
            }
        }
    }
    findings_of(violations)
}

/// The keys of an exit-code table, for a finding (`none` without one).
fn keys(table: Option<&Value>) -> String {
    match table.and_then(Value::as_object) {
        Some(t) if !t.is_empty() => t.keys().cloned().collect::<Vec<_>>().join(", "),
        _ => "none".into(),
    }
}

// ---- the checks of this family ----

/// The `manifest_rules` check.
pub(super) const MANIFEST_RULES: Check = Check {
    defined_in: file!(),
    key: Some("manifest_rules"),
    active: |e| !e.manifest_rules.is_empty(),
    needs_response: true,
    judge: Judge::Response(manifest_rules),
    holds: "the manifest keeps these registration rules: `detach-or-resume`, `incomplete-entry`, `incomplete-entry-shape`, `not-async-or-streaming`, `resumable-writer-has-key`, `budget-flag-only-when-interruptible`, `sigint-exit-entry`",
    findings: &[FindingKind::ManifestRule],
    cites: &[],
    value: || {
        json!({
            "type": "array",
            "items": {
                "enum": [
                    "detach-or-resume",
                    "incomplete-entry",
                    "incomplete-entry-shape",
                    "not-async-or-streaming",
                    "resumable-writer-has-key",
                    "budget-flag-only-when-interruptible",
                    "sigint-exit-entry"
                ]
            }
        })
    },
    validate: no_validation,
};

#[cfg(test)]
mod tests {
    use crate::checks::tests::*;

    #[test]
    fn manifest_rules_judge_the_manifest_in_the_response() {
        let manifest = |interruption: Value| {
            responding(json!({ "commands": { "analyze": {
                "danger_level": "safe", "interruption": interruption,
            } } }))
        };
        let e = expect(json!({ "manifest_rules": ["detach-or-resume"] }));
        assert!(judge(&e, &manifest(json!({ "detach": true, "resume": false }))).is_empty());
        let f = only(judge(&e, &manifest(json!({ "detach": false, "resume": false }))));
        assert_eq!(
            f.message,
            "command `analyze`: declares interruption with neither detach nor resume"
        );
        let f = only(judge(&e, &responding(json!({ "name": "tool" }))));
        assert_eq!(f.message, "the manifest has no `commands` object");
    }

    /// The manifest schema lets a command inherit its exit codes from the root `exit_codes`
    /// table (a command lists only codes absent from it or differing from it): an INCOMPLETE
    /// entry there counts for every interruptible command that lists none of its own, and the
    /// command's own one, when it has one, is the one judged.
    #[test]
    fn manifest_rules_read_the_effective_exit_code_table() {
        let entry = |retryable: bool, side: &str| json!({ "description": "d", "retryable": retryable, "side_effects": side });
        let manifest = |root: Value, own: Value| {
            responding(json!({ "exit_codes": root, "commands": {
                "analyze": { "danger_level": "safe", "exit_codes": own,
                             "interruption": { "detach": true, "resume": true } },
                "import": { "danger_level": "mutating", "exit_codes": { "14": entry(false, "partial") },
                            "interruption": { "detach": false, "resume": true } },
            } }))
        };
        let e = expect(json!({ "manifest_rules": ["incomplete-entry", "incomplete-entry-shape"] }));
        let inherited = manifest(json!({ "14": entry(true, "none") }), json!({}));
        assert!(judge(&e, &inherited).is_empty(), "{:#?}", judge(&e, &inherited));
        // Neither table has it.
        let f = only(judge(&e, &manifest(json!({ "0": entry(false, "complete") }), json!({}))));
        assert!(f.message.starts_with("command `analyze`: declares interruption"), "{}", f.message);
        assert_eq!(f.actual.as_deref(), Some("exit_codes keys: none; root exit_codes keys: 0"));
        // The command's own entry overrides the root's, and is the one whose shape is judged.
        let wrong = manifest(
            json!({ "14": entry(true, "none") }),
            json!({ "14": entry(false, "partial") }),
        );
        let f = only(judge(&e, &wrong));
        assert_eq!(
            f.message,
            "command `analyze`: the \"14\" entry of a safe command has the wrong shape"
        );
        // What conform learns of the commands reads the same table.
        let commands = crate::discover::Commands::from_manifest(&inherited.json.clone().unwrap());
        let analyze = &commands.by_path["analyze"];
        assert_eq!(analyze.incomplete_retryable, Some(true));
        assert!(analyze.exit_codes.contains(&14));
    }
}
