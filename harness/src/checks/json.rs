//! What the response says: `schema`, the `json` pointer checks, and across the responses of a
//! step, `same` and `warnings`.

use serde_json::{Value, json};

use super::{Check, Context, Judge, Site, no_validation};
use crate::observe::Observation;
use crate::observe::StdoutProblem;
use crate::outcome::FindingKind;
use crate::outcome::{Finding, compact};
use crate::scenario::{EnvelopeRule, Expect, PointerCheck, template_vars};
use crate::schemas::{self, SchemaName};

/// `schema`: the response validates against each named schema.
pub(super) fn schema(
    expect: &Expect,
    _obs: &Observation,
    response: &Value,
    _ctx: &Context<'_>,
) -> Vec<Finding> {
    let Some(spec) = &expect.schema else { return Vec::new() };
    let mut findings = Vec::new();
    for name in spec.names() {
        match schemas::violations(name, response) {
            Ok(v) if v.is_empty() => {}
            Ok(v) => findings.push(
                Finding::new(
                    FindingKind::Schema,
                    format!("the response does not validate against {}", name.label()),
                )
                .expected(format!("a valid {}", name.label()))
                .actual(v.join("\n")),
            ),
            Err(e) => findings.push(Finding::new(FindingKind::Schema, e.to_string())),
        }
    }
    findings
}

/// `exit_matches_meta`: a valid envelope's `meta.exit_code` is the process's exit code. An
/// invalid envelope (or none) is the envelope checks' to report; a process that did not exit
/// by itself has no code to compare (the timeout, or `exit`, says so).
pub(super) fn exit_matches_meta(
    expect: &Expect,
    obs: &Observation,
    _ctx: &Context<'_>,
) -> Vec<Finding> {
    if expect.exit_matches_meta != Some(true) {
        return Vec::new();
    }
    let (Some(code), Some(response)) = (obs.exit_code(), obs.response()) else {
        return Vec::new();
    };
    if !schemas::violations(SchemaName::Envelope, response).is_ok_and(|v| v.is_empty()) {
        return Vec::new();
    }
    let meta = response.pointer("/meta/exit_code").and_then(Value::as_i64);
    if meta == Some(i64::from(code)) {
        return Vec::new();
    }
    let said =
        meta.map_or_else(|| "no meta.exit_code".to_owned(), |m| format!("meta.exit_code {m}"));
    vec![
        Finding::new(
            FindingKind::ExitCode,
            format!("the process exited {code} but its envelope says {said}"),
        )
        .expected(format!("meta.exit_code {code}, the exit code"))
        .actual(said),
    ]
}

/// `envelope`: stdout is one valid response envelope, or what the rule also accepts (empty;
/// a bare manifest from the manifest command).
pub(super) fn envelope(expect: &Expect, obs: &Observation, ctx: &Context<'_>) -> Vec<Finding> {
    let Some(rule) = expect.envelope else { return Vec::new() };
    let response = match &obs.json {
        Ok(response) => response,
        Err(StdoutProblem::Empty) if rule == EnvelopeRule::OrEmpty => return Vec::new(),
        // A response check of the same step reports the stdout problem once for all.
        Err(_) if super::needs_response(expect) => return Vec::new(),
        Err(problem) => return vec![super::stdout_finding(problem, obs)],
    };
    let bare_manifest = rule == EnvelopeRule::OrBareManifest
        && ctx.manifest_command
        && response.get("ok").is_none()
        && response.get("commands").is_some();
    let name = if bare_manifest { SchemaName::Manifest } else { SchemaName::Envelope };
    match schemas::violations(name, response) {
        Ok(v) if v.is_empty() => Vec::new(),
        Ok(v) => vec![
            Finding::new(
                FindingKind::Schema,
                format!("the response does not validate against {}", name.file()),
            )
            .expected(match rule {
                EnvelopeRule::Required => "one valid response envelope on stdout".to_owned(),
                EnvelopeRule::OrEmpty => {
                    "nothing on stdout, or one valid response envelope".to_owned()
                }
                EnvelopeRule::OrBareManifest if bare_manifest => {
                    "a valid manifest (bare, as the manifest command may answer)".to_owned()
                }
                EnvelopeRule::OrBareManifest => "one valid response envelope on stdout".to_owned(),
            })
            .actual(v.join("\n")),
        ],
        Err(e) => vec![Finding::new(FindingKind::Schema, e.to_string())],
    }
}

/// `json`: every pointer check, in the order written.
pub(super) fn json(
    expect: &Expect,
    _obs: &Observation,
    response: &Value,
    ctx: &Context<'_>,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for check in &expect.json {
        pointer_check(check, response, ctx, &mut findings);
    }
    findings
}

fn pointer_check(
    check: &PointerCheck,
    response: &Value,
    ctx: &Context<'_>,
    findings: &mut Vec<Finding>,
) {
    let p = &check.pointer;
    let value = response.pointer(p);
    if let Some(present) = check.present {
        match (present, value) {
            (true, None) => findings.push(
                Finding::new(FindingKind::JsonPointer, format!("`{p}` is absent"))
                    .expected(format!("`{p}` present"))
                    .actual("absent"),
            ),
            (false, Some(v)) => findings.push(
                Finding::new(FindingKind::JsonPointer, format!("`{p}` is present"))
                    .expected(format!("`{p}` absent"))
                    .actual(compact(v)),
            ),
            _ => {}
        }
    }
    if let Some(want) = &check.equals {
        let templated = matches!(want, Value::String(s) if !template_vars(s).is_empty());
        let want = match resolved(want, ctx) {
            Ok(v) => v,
            Err(e) => {
                findings.push(Finding::new(FindingKind::JsonPointer, e));
                return;
            }
        };
        // A template yields text; where the response holds a number (`{budget}` against
        // `meta.budget_ms`), the text is read as that number.
        let numeric_match = templated
            && matches!((value, &want), (Some(Value::Number(n)), Value::String(t)) if n.to_string() == *t);
        if value != Some(&want) && !numeric_match {
            findings.push(
                Finding::new(
                    FindingKind::JsonPointer,
                    match value {
                        Some(_) => format!("`{p}` has the wrong value"),
                        None => format!("`{p}` is absent"),
                    },
                )
                .expected(compact(&want))
                .actual(value.map_or_else(|| "absent".to_owned(), compact)),
            );
        }
    }
    if let Some(unwanted) = &check.not_equals {
        let unwanted = match resolved(unwanted, ctx) {
            Ok(v) => v,
            Err(e) => {
                findings.push(Finding::new(FindingKind::JsonPointer, e));
                return;
            }
        };
        let same_number = matches!((value, &unwanted), (Some(Value::Number(n)), Value::String(t)) if n.to_string() == *t);
        if value == Some(&unwanted) || same_number {
            findings.push(
                Finding::new(
                    FindingKind::JsonPointer,
                    format!("`{p}` has the value it must not have"),
                )
                .expected(format!("anything but {}", compact(&unwanted)))
                .actual(compact(&unwanted)),
            );
        }
    }
    for (key, bound, holds) in check.comparisons() {
        let bound = match bound {
            Value::String(t) => ctx.text(t).and_then(|t| {
                t.trim()
                    .parse::<f64>()
                    .map_err(|_| format!("`{key}` of `{p}` is not a number: {t:?}"))
            }),
            other => other.as_f64().ok_or_else(|| format!("`{key}` of `{p}` is not a number")),
        };
        let bound = match bound {
            Ok(b) => b,
            Err(e) => {
                findings.push(Finding::new(FindingKind::JsonPointer, e));
                continue;
            }
        };
        let relation = key.replace('_', " ");
        match value.and_then(Value::as_f64) {
            Some(n) if n.partial_cmp(&bound).is_some_and(holds) => {}
            _ => findings.push(
                Finding::new(FindingKind::JsonPointer, format!("`{p}` is not {relation} {bound}"))
                    .expected(format!("a number {relation} {bound}"))
                    .actual(value.map_or_else(|| "absent".to_owned(), compact)),
            ),
        }
    }
    if let Some(pattern) = &check.matches {
        let regex =
            ctx.text(pattern).and_then(|p| regex::Regex::new(&p).map_err(|e| e.to_string()));
        match (regex, value.and_then(Value::as_str)) {
            (Err(e), _) => {
                findings.push(Finding::new(FindingKind::JsonPointer, format!("bad pattern: {e}")))
            }
            (Ok(re), Some(s)) if re.is_match(s) => {}
            (Ok(re), _) => findings.push(
                Finding::new(FindingKind::JsonPointer, format!("`{p}` does not match /{re}/"))
                    .expected(format!("a string matching /{re}/"))
                    .actual(value.map_or_else(|| "absent".to_owned(), compact)),
            ),
        }
    }
}

/// `warnings`: each code is the `code` of a `warnings` entry in at least one response.
pub(super) fn warnings(
    expect: &Expect,
    observations: &[&Observation],
    _facts: &super::StepFacts,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for code in &expect.warnings {
        let seen = observations.iter().filter_map(|o| o.response()).any(|r| {
            r.get("warnings").and_then(Value::as_array).is_some_and(|list| {
                list.iter().any(|w| w.get("code").and_then(Value::as_str) == Some(code.as_str()))
            })
        });
        if !seen {
            let actual: Vec<String> = observations
                .iter()
                .map(|o| {
                    o.response()
                        .and_then(|r| r.get("warnings"))
                        .map_or_else(|| "no warnings".to_owned(), compact)
                })
                .collect();
            findings.push(
                Finding::new(
                    FindingKind::Warning,
                    format!("no response of the step warns `{code}`"),
                )
                .expected(format!("a warnings entry with code {code}"))
                .actual(actual.join("\n")),
            );
        }
    }
    findings
}

/// `same`: each pointer has one value across the responses (copies, hops).
pub(super) fn same(
    expect: &Expect,
    observations: &[&Observation],
    _facts: &super::StepFacts,
) -> Vec<Finding> {
    one_value_across(&expect.same, observations, "responses")
}

/// `same_among_handoffs`: each pointer has one value across the responses that hand off
/// (exit 14). A copy that answered otherwise (refused while the state was busy, or ended) is
/// not compared: only hand-offs name the job a copy attached to (REQ-F-081).
pub(super) fn same_among_handoffs(
    expect: &Expect,
    observations: &[&Observation],
    _facts: &super::StepFacts,
) -> Vec<Finding> {
    let handoffs: Vec<&Observation> = observations
        .iter()
        .copied()
        .filter(|o| o.exit_code() == Some(crate::observe::INCOMPLETE))
        .collect();
    one_value_across(&expect.same_among_handoffs, &handoffs, "hand-offs")
}

/// Each pointer has one value, present, in every one of `observations` (`what` names them).
fn one_value_across(
    pointers: &[String],
    observations: &[&Observation],
    what: &str,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for pointer in pointers {
        let values: Vec<Option<&Value>> =
            observations.iter().map(|o| o.response().and_then(|r| r.pointer(pointer))).collect();
        let distinct: Vec<String> = {
            let mut v: Vec<String> =
                values.iter().map(|v| v.map_or_else(|| "absent".into(), compact)).collect();
            v.sort();
            v.dedup();
            v
        };
        if values.iter().any(Option::is_none) || distinct.len() > 1 {
            findings.push(
                Finding::new(
                    FindingKind::SameValue,
                    format!("`{pointer}` differs across the {} {what} of the step", values.len()),
                )
                .expected(format!("one value in each of the {what}"))
                .actual(distinct.join("\n")),
            );
        }
    }
    findings
}

/// A pointer check's value as the step resolved it: a string is a template, anything else is
/// taken as written.
fn resolved(value: &Value, ctx: &Context<'_>) -> Result<Value, String> {
    match value {
        Value::String(s) => ctx.text(s).map(Value::String),
        other => Ok(other.clone()),
    }
}

// ---- the checks of this family ----

/// The `exit_matches_meta` check.
pub(super) const EXIT_MATCHES_META: Check = Check {
    defined_in: file!(),
    key: Some("exit_matches_meta"),
    active: |e| e.exit_matches_meta == Some(true),
    needs_response: false,
    judge: Judge::Observation(exit_matches_meta),
    holds: "when stdout is a valid envelope, its `meta.exit_code` is the process's exit code (no valid envelope is `envelope`'s to report, as in the kit)",
    findings: &[FindingKind::ExitCode],
    cites: &["REQ-F-001"],
    value: || json!({"type": "boolean"}),
    validate: no_validation,
};

/// The `envelope` check.
// It judges stdout itself (an empty one may pass), so it needs no response.
pub(super) const ENVELOPE: Check = Check {
    defined_in: file!(),
    key: Some("envelope"),
    active: |e| e.envelope.is_some(),
    needs_response: false,
    judge: Judge::Observation(envelope),
    holds: "stdout is one valid response envelope: `required`; `or-empty` also passes an empty stdout (`--help`); `or-bare-manifest` also passes a bare manifest valid against the manifest schema when the step ran the manifest command (docs/contract.md §2; an advisory note says the spec kit would refuse it)",
    findings: &[FindingKind::Schema, FindingKind::StdoutNotJson, FindingKind::StdoutNotUtf8],
    cites: &[],
    value: || json!({"enum": ["required", "or-empty", "or-bare-manifest"]}),
    validate: no_validation,
};

/// The `schema` check.
pub(super) const SCHEMA: Check = Check {
    defined_in: file!(),
    key: Some("schema"),
    active: |e| e.schema.is_some(),
    needs_response: true,
    judge: Judge::Response(schema),
    holds: "stdout is one JSON document valid against `envelope`, `incomplete`, `incomplete-job` (the INCOMPLETE schema without its `meta.budget_ms`: a job no budget applies to, an async command's), `manifest` (bare or as `data`; a manifest that says a newer minor version than 3.20 is held to what 3.20 requires, and the fields conform does not know are named in an advisory note), `job-descriptor` (its `data`), or all listed",
    findings: &[FindingKind::Schema, FindingKind::StdoutNotJson, FindingKind::StdoutNotUtf8],
    cites: &[],
    value: || {
        json!({
            "oneOf": [
                {"$ref": "#/definitions/SchemaName"},
                {
                    "type": "array",
                    "items": {"$ref": "#/definitions/SchemaName"},
                    "minItems": 1
                }
            ]
        })
    },
    validate: no_validation,
};

/// The `json` check.
pub(super) const JSON: Check = Check {
    defined_in: file!(),
    key: Some("json"),
    active: |e| !e.json.is_empty(),
    needs_response: true,
    judge: Judge::Response(json),
    holds: "`[{ pointer, equals | not_equals | matches | present | less_than | at_most | at_least | greater_than }]` on the response; the comparisons take a number or a template giving one (`\"{@call/data/progress/done}\"`)",
    findings: &[FindingKind::JsonPointer],
    cites: &[],
    value: || {
        json!({
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": false,
                "required": ["pointer"],
                "anyOf": [
                    {"required": ["equals"]},
                    {"required": ["not_equals"]},
                    {"required": ["matches"]},
                    {"required": ["present"]},
                    {"required": ["less_than"]},
                    {"required": ["at_most"]},
                    {"required": ["at_least"]},
                    {"required": ["greater_than"]}
                ],
                "properties": {
                    "pointer": {
                        "description": "An RFC 6901 JSON pointer, e.g. /data/state.",
                        "type": "string",
                        "pattern": "^(/.*)?$"
                    },
                    "equals": {
                        "description": "The value must equal this (strings are templates; a template compared with a number is read as one)."
                    },
                    "matches": {
                        "description": "The value must be a string matching this regular expression (a template).",
                        "type": "string"
                    },
                    "present": {
                        "description": "true: the value must be there; false: absent.",
                        "type": "boolean"
                    },
                    "not_equals": {
                        "description": "The value must differ from this (strings are templates)."
                    },
                    "less_than": {
                        "description": "The value must be a number below this one (a number or a template giving one).",
                        "type": ["number", "string"]
                    },
                    "at_most": {
                        "description": "The value must be a number at most this one (a number or a template giving one).",
                        "type": ["number", "string"]
                    },
                    "at_least": {
                        "description": "The value must be a number at least this one (a number or a template giving one).",
                        "type": ["number", "string"]
                    },
                    "greater_than": {
                        "description": "The value must be a number above this one (a number or a template giving one).",
                        "type": ["number", "string"]
                    }
                }
            }
        })
    },
    validate: validate_json,
};

/// The `warnings` check.
pub(super) const WARNINGS: Check = Check {
    defined_in: file!(),
    key: Some("warnings"),
    active: |e| !e.warnings.is_empty(),
    needs_response: false,
    judge: Judge::Step(warnings),
    holds: "each code is the `code` of a `warnings` entry in at least one response of the step",
    findings: &[FindingKind::Warning],
    cites: &[],
    value: || json!({"type": "array", "items": {"type": "string", "pattern": "^[A-Z][A-Z0-9_]+$"}}),
    validate: no_validation,
};

/// The `same` check.
// Judged across the step, but each observation without a response is a finding of its own.
pub(super) const SAME: Check = Check {
    defined_in: file!(),
    key: Some("same"),
    active: |e| !e.same.is_empty(),
    needs_response: true,
    judge: Judge::Step(same),
    holds: "these pointers have one value across all responses of the step (copies, hops)",
    findings: &[FindingKind::SameValue],
    cites: &[],
    value: || json!({"type": "array", "items": {"type": "string", "pattern": "^(/.*)?$"}}),
    validate: |e, site| e.same.iter().try_for_each(|p| json_pointer(p, site)),
};

/// The `same_among_handoffs` check.
pub(super) const SAME_AMONG_HANDOFFS: Check = Check {
    defined_in: file!(),
    key: Some("same_among_handoffs"),
    active: |e| !e.same_among_handoffs.is_empty(),
    needs_response: false,
    judge: Judge::Step(same_among_handoffs),
    holds: "these pointers have one value across the responses of the step that exit 14; responses with another exit are not compared",
    findings: &[FindingKind::SameValue],
    cites: &["REQ-F-081"],
    value: || json!({"type": "array", "items": {"type": "string", "pattern": "^(/.*)?$"}}),
    validate: |e, site| e.same_among_handoffs.iter().try_for_each(|p| json_pointer(p, site)),
};

/// A pointer of `json` or `same`: empty (the whole document) or starting with `/`.
fn json_pointer(p: &str, site: &Site<'_>) -> Result<(), String> {
    if p.is_empty() || p.starts_with('/') {
        Ok(())
    } else {
        Err(site.fail(format!("`{p}` is not a JSON pointer")))
    }
}

/// The validation of `json`: pointers, each check saying something, comparisons with numbers
/// (or templates giving one), patterns that compile.
fn validate_json(e: &Expect, site: &Site<'_>) -> Result<(), String> {
    for p in &e.json {
        json_pointer(&p.pointer, site)?;
    }
    for p in &e.json {
        if p.is_empty() {
            return Err(site.fail(format!(
                "the check of `{}` says neither equals, not_equals, matches, present, less_than, at_most, at_least nor greater_than",
                p.pointer
            )));
        }
        for (key, bound, _) in p.comparisons() {
            let ok = match bound {
                Value::Number(_) => true,
                Value::String(t) => !template_vars(t).is_empty() || t.trim().parse::<f64>().is_ok(),
                _ => false,
            };
            if !ok {
                return Err(site.fail(format!(
                    "`{key}` of `{}` must be a number or a template giving one",
                    p.pointer
                )));
            }
        }
        if let Some(m) = &p.matches
            && template_vars(m).is_empty()
        {
            regex::Regex::new(m).map_err(|e| site.fail(format!("bad regex: {e}")))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::checks::tests::*;

    #[test]
    fn schema_validates_the_response_against_each_schema_named() {
        let good = responding(envelope(json!({ "n": 1 })));
        assert!(judge(&expect(json!({ "schema": "envelope" })), &good).is_empty());
        assert!(judge(&expect(json!({ "schema": ["envelope"] })), &good).is_empty());
        let f = only(judge(
            &expect(json!({ "schema": "envelope" })),
            &responding(json!({ "ok": true })),
        ));
        assert_eq!(f.message, "the response does not validate against response-envelope.json");
        assert!(f.actual.unwrap().contains("at `/`"));
    }

    /// `job status` of an async command's running job answers REQ-F-082's INCOMPLETE response
    /// (REQ-C-022), but no budget applies to that job: `incomplete-job` does not ask for
    /// `meta.budget_ms`, `incomplete` does; a budget that is there is a whole number in both.
    #[test]
    fn incomplete_job_leaves_the_budget_out_of_the_incomplete_schema() {
        let running = |meta: Value| {
            responding(json!({ "ok": false, "warnings": [], "meta": meta,
                "error": { "code": "INCOMPLETE", "message": "running", "retryable": true },
                "data": { "state": "running", "job_id": "j1", "progress": { "done": 3 },
                          "continue_command": "tool job wait j1", "cancel_command": "tool job cancel j1" } }))
        };
        let bare = running(json!({ "exit_code": 14, "duration_ms": 5 }));
        assert!(judge(&expect(json!({ "schema": "incomplete-job" })), &bare).is_empty());
        let f = only(judge(&expect(json!({ "schema": "incomplete" })), &bare));
        assert!(f.actual.unwrap().contains("budget_ms"));
        let text = running(json!({ "exit_code": 14, "duration_ms": 5, "budget_ms": "30s" }));
        let f = only(judge(&expect(json!({ "schema": "incomplete-job" })), &text));
        assert_eq!(
            f.message,
            "the response does not validate against incomplete-response.json (meta.budget_ms optional)"
        );
    }

    /// A valid error envelope saying `code` in `meta.exit_code`.
    fn error_envelope(code: i64) -> Value {
        json!({ "ok": false, "data": null, "warnings": [],
                "error": { "code": "ARG_ERROR", "message": "bad", "retryable": false, "phase": "validation" },
                "meta": { "exit_code": code, "duration_ms": 5 } })
    }

    #[test]
    fn exit_matches_meta_compares_a_valid_envelopes_exit_code_with_the_process() {
        let e = expect(json!({ "exit_matches_meta": true }));
        assert!(judge(&e, &exited(2, &error_envelope(2).to_string())).is_empty());
        assert!(judge(&e, &responding(envelope(json!({})))).is_empty());
        // The classic "always exit 0": the right error envelope, the wrong status.
        let f = only(judge(&e, &exited(0, &error_envelope(5).to_string())));
        assert_eq!(f.check.as_str(), "exit-code");
        assert_eq!(f.message, "the process exited 0 but its envelope says meta.exit_code 5");
        let f = only(judge(&e, &exited(2, &error_envelope(1).to_string())));
        assert_eq!(f.expected.as_deref(), Some("meta.exit_code 2, the exit code"));
        // No valid envelope, or no exit: the envelope checks and the timeout say so, not this.
        assert!(judge(&e, &exited(3, "{\"meta\": {\"exit_code\": 0}}")).is_empty());
        assert!(judge(&e, &exited(0, "prose")).is_empty());
        let timed_out = Parts {
            termination: Termination::TimedOut,
            stdout: error_envelope(1).to_string().into_bytes(),
            ..Parts::default()
        };
        assert_eq!(names(&judge(&e, &timed_out.build())), ["timeout"]);
    }

    #[test]
    fn envelope_wants_one_valid_envelope_with_the_allowance_named() {
        let required = expect(json!({ "envelope": "required" }));
        let or_empty = expect(json!({ "envelope": "or-empty" }));
        let good = responding(envelope(json!({ "n": 1 })));
        assert!(judge(&required, &good).is_empty());
        assert!(judge(&or_empty, &good).is_empty());
        assert!(judge(&or_empty, &exited(0, "")).is_empty());
        assert_eq!(names(&judge(&required, &exited(0, ""))), ["stdout-not-json"]);
        assert_eq!(names(&judge(&or_empty, &exited(0, "usage: tool"))), ["stdout-not-json"]);
        // Beside a check that needs the response, the stdout problem is one finding, not two.
        let with_schema = expect(json!({ "envelope": "required", "schema": "manifest" }));
        assert_eq!(names(&judge(&with_schema, &exited(0, "usage: tool"))), ["stdout-not-json"]);
        // Any JSON value is not enough: the envelope's shape is the schema's.
        let no_warnings = json!({ "ok": true, "data": {}, "error": null, "meta": { "exit_code": 0, "duration_ms": 1 } });
        for shape in [json!({ "version": "1.2" }), json!([]), json!(42), no_warnings] {
            let f = only(judge(&or_empty, &exited(0, &shape.to_string())));
            assert_eq!(f.message, "the response does not validate against response-envelope.json");
        }
    }

    #[test]
    fn envelope_lets_a_bare_manifest_through_only_from_the_manifest_command() {
        let e = expect(json!({ "envelope": "or-bare-manifest" }));
        let manifest = json!({ "schema_version": "3.20", "commands": {} });
        let bare = exited(0, &manifest.to_string());
        let mut resolved = Resolved::new(&e, &bare, text, duration, split, no_program);
        assert_eq!(names(&World::default().judge_with(&e, &bare, &resolved)), ["schema"]);
        resolved.manifest_command = true;
        let findings = World::default().judge_with(&e, &bare, &resolved);
        assert!(
            findings.is_empty() || findings[0].message.contains("manifest-response.json"),
            "{findings:#?}"
        );
        // The manifest command's envelope is still an envelope, judged as one.
        let wrapped_badly = json!({ "ok": true, "data": manifest, "meta": { "exit_code": 0 } });
        let obs = exited(0, &wrapped_badly.to_string());
        let f = only(World::default().judge_with(&e, &obs, &resolved));
        assert_eq!(f.message, "the response does not validate against response-envelope.json");
    }

    #[test]
    fn pointer_checks_compare_present_equal_and_unequal_values() {
        let obs = responding(envelope(json!({ "state": "done", "n": 42, "id": "abc" })));
        let pass = expect(json!({ "json": [
            { "pointer": "/data/state", "present": true, "equals": "done", "not_equals": "running" },
            { "pointer": "/data/gone", "present": false },
            { "pointer": "/data/n", "equals": "{budget}" },
            { "pointer": "/data/id", "equals": "{@first/data/id}", "matches": "^a.c$" },
        ] }));
        assert!(judge(&pass, &obs).is_empty(), "{:#?}", judge(&pass, &obs));
        let fail = expect(json!({ "json": [
            { "pointer": "/data/gone", "present": true },
            { "pointer": "/data/state", "present": false },
            { "pointer": "/data/state", "equals": "running" },
            { "pointer": "/data/gone", "equals": 1 },
            { "pointer": "/data/n", "not_equals": "{budget}" },
            { "pointer": "/data/n", "equals": "42" },
            { "pointer": "/data/id", "matches": "^x" },
        ] }));
        let messages: Vec<String> = judge(&fail, &obs).into_iter().map(|f| f.message).collect();
        assert_eq!(
            messages,
            [
                "`/data/gone` is absent",
                "`/data/state` is present",
                "`/data/state` has the wrong value",
                "`/data/gone` is absent",
                "`/data/n` has the value it must not have",
                // Text read as a number only when it came from a template.
                "`/data/n` has the wrong value",
                "`/data/id` does not match /^x/",
            ]
        );
    }

    #[test]
    fn pointer_checks_compare_numbers_with_numbers_or_templates() {
        let obs = responding(envelope(json!({ "n": 5 })));
        let pass = expect(json!({ "json": [
            { "pointer": "/data/n", "less_than": "{budget}", "at_least": 5, "greater_than": "4" },
        ] }));
        assert!(judge(&pass, &obs).is_empty());
        let fail = expect(json!({ "json": [
            { "pointer": "/data/n", "less_than": 5, "at_least": "6", "greater_than": "{budget}" },
            { "pointer": "/data/gone", "at_least": 0 },
            { "pointer": "/data/n", "less_than": "{@first/data/id}" },
            { "pointer": "/data/n", "equals": "{@gone/x}", "less_than": 9 },
            { "pointer": "/data/n", "matches": "(" },
        ] }));
        let messages: Vec<String> = judge(&fail, &obs).into_iter().map(|f| f.message).collect();
        assert_eq!(
            messages[..4],
            [
                "`/data/n` is not less than 5",
                "`/data/n` is not at least 6",
                "`/data/n` is not greater than 42",
                "`/data/gone` is not at least 0",
            ]
        );
        assert_eq!(messages[4], "`less_than` of `/data/n` is not a number: \"abc\"");
        // A template that does not resolve ends that pointer's check.
        assert_eq!(messages[5], "no value for `{@gone/x}`");
        assert!(messages[6].starts_with("bad pattern: "), "{messages:#?}");
        assert_eq!(messages.len(), 7);
    }

    #[test]
    fn warnings_wants_each_code_in_some_response_of_the_step() {
        let warned = |code: &str| {
            let mut r = envelope(json!({}));
            r["warnings"] = json!([{ "code": code, "message": "m" }]);
            responding(r)
        };
        let (a, b) = (warned("SLOW"), responding(envelope(json!({}))));
        let e = expect(json!({ "warnings": ["SLOW"] }));
        assert!(check_all(&e, "step", &[&b, &a], &StepFacts::default()).is_empty());
        let f = only(check_all(
            &expect(json!({ "warnings": ["LATE"] })),
            "step",
            &[&a, &b],
            &StepFacts::default(),
        ));
        assert_eq!(f.message, "no response of the step warns `LATE`");
        assert_eq!(f.actual.as_deref(), Some("[{\"code\":\"SLOW\",\"message\":\"m\"}]\n[]"));
        assert_eq!(f.step.as_deref(), Some("step"));
    }

    #[test]
    fn same_wants_one_value_in_every_response_of_the_step() {
        let job = |id: &str| responding(envelope(json!({ "job_id": id })));
        let e = expect(json!({ "same": ["/data/job_id"] }));
        let (a, b, c) = (job("j1"), job("j1"), job("j2"));
        assert!(check_all(&e, "copies", &[&a, &b], &StepFacts::default()).is_empty());
        let f = only(check_all(&e, "copies", &[&a, &b, &c], &StepFacts::default()));
        assert_eq!(f.message, "`/data/job_id` differs across the 3 responses of the step");
        assert_eq!(f.actual.as_deref(), Some("\"j1\"\n\"j2\""));
        let none = exited(0, "");
        assert_eq!(
            only(check_all(&e, "copies", &[&a, &none], &StepFacts::default())).actual.as_deref(),
            Some("\"j1\"\nabsent")
        );
        // check_one leaves `same` to check_all.
        assert_eq!(names(&judge(&e, &a)), Vec::<&str>::new());
    }

    #[test]
    fn same_among_handoffs_compares_only_the_copies_that_exit_14() {
        let handoff = |id: &str| exited(14, &json!({ "data": { "job_id": id } }).to_string());
        let busy =
            exited(12, &json!({ "ok": false, "error": { "code": "STATE_BUSY" } }).to_string());
        let e = expect(json!({ "same_among_handoffs": ["/data/job_id"] }));
        let (a, b, c) = (handoff("j1"), handoff("j1"), handoff("j2"));
        // A copy refused while the state was busy names no job, legally.
        assert!(check_all(&e, "copies", &[&a, &busy, &b], &StepFacts::default()).is_empty());
        // So does a step where no copy handed off at all.
        assert!(check_all(&e, "copies", &[&busy], &StepFacts::default()).is_empty());
        let f = only(check_all(&e, "copies", &[&a, &busy, &c], &StepFacts::default()));
        assert_eq!(f.message, "`/data/job_id` differs across the 2 hand-offs of the step");
        assert_eq!(f.actual.as_deref(), Some("\"j1\"\n\"j2\""));
        // A hand-off without the id is judged.
        let bare = exited(14, &json!({ "data": {} }).to_string());
        assert_eq!(
            only(check_all(&e, "copies", &[&a, &bare], &StepFacts::default())).actual.as_deref(),
            Some("\"j1\"\nabsent")
        );
        // `same` itself still wants the id of every copy.
        let strict = expect(json!({ "same": ["/data/job_id"] }));
        assert_eq!(check_all(&strict, "copies", &[&a, &busy], &StepFacts::default()).len(), 1);
    }
}
