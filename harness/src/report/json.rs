//! `--format json`: conform answers like the tools it checks, with one response envelope on
//! stdout.
//!
//! * `data` is the report (schema `schemas/conform-report-data.json`): `tool`, `spec_version`,
//!   `conform_version`, `jobs`, `conformant`, `counts`, `levels`, `requirements`, `claims`
//!   (the spec's Level 1-3 and §79, see [`crate::levels`]), `kit_checks` (the spec kit's
//!   fourteen checks, each `pass`, `fail` or `skip`, with the scenarios that make it), `coverage`,
//!   `baseline` and `scenarios`; each scenario has its `id`, `requirement`, `criterion`,
//!   `level`, `tags`, `status` (with `reason` for a skip and `message` for a harness error),
//!   `findings`, `notes`, `evidence` (one record per process run, with its repro) and
//!   `duration_ms`. `data` is present on failure too: conform declares the report as its
//!   failure payload.
//! * Sized for CI: nothing large is said twice. A record whose stdout was one JSON document
//!   has it as `envelope` and no `stdout.text` (only its formatting is lost); the tool's
//!   manifest, which a dozen scenarios print, is `data.manifest` once, and each record that
//!   printed it carries `"stdout_ref": "manifest"` with the document left out of its `envelope`
//!   (the envelope's `data`, or the whole envelope for a bare manifest). A reader puts it back
//!   with [`restore_manifest`]. The envelope is printed on one line.
//! * Like a test runner, which keeps no output of a passing test, the records of a passing
//!   scenario keep what was run and how it ended (`repro`, `ended`, the times, the byte counts)
//!   without the tool's output: no `envelope`, no `stdout_ref`, no `stdout.text` or
//!   `stderr.text`, and `"output_omitted": true` says so. Every scenario that did not pass keeps
//!   its records whole. `data.evidence` names the rule: `failures` (the default), or `all`
//!   with `conform run --evidence all`, which keeps every record whole ([`Evidence`]).
//! * `ok` is true exactly when `meta.exit_code` is 0 (see `exit`).
//! * `error` is null on success, otherwise `{code, message, context}` with code
//!   `NOT_CONFORMANT`, `BASELINE_MISMATCH` or `HARNESS_ERROR`.
//! * `warnings` lists the profile roles that were missing (`ROLE_MISSING`), each of which left
//!   scenarios unjudged.
//! * `meta` holds `exit_code` and `duration_ms`.

use serde_json::{Value, json};

use super::{Collector, RunReport, Sink};
use crate::event::{Event, ReportError, Reporter};
use crate::exit;
use crate::outcome::{ScenarioResult, SkipReason, Status, StepRecord};
use crate::schemas::unwrap_manifest;

/// Which records of the report keep the tool's output (`conform run --evidence`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Evidence {
    /// Only the records of scenarios that did not pass: a passing one's are kept without
    /// the tool's output, which is most of a report's size.
    #[default]
    Failures,
    /// Every record, whole.
    All,
}

impl Evidence {
    /// How `data.evidence` names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Evidence::Failures => "failures",
            Evidence::All => "all",
        }
    }

    /// Whether the records of a scenario with this status keep the tool's output.
    fn keeps_output_of(self, status: &Status) -> bool {
        self == Evidence::All || *status != Status::Pass
    }
}

/// Writes the envelope when the run finishes.
pub struct JsonReporter {
    sink: Sink,
    evidence: Evidence,
    collector: Collector,
}

impl JsonReporter {
    /// A reporter writing to `sink`, keeping the tool's output in the records `evidence` says.
    pub fn new(sink: Sink, evidence: Evidence) -> Self {
        JsonReporter { sink, evidence, collector: Collector::default() }
    }
}

impl Reporter for JsonReporter {
    fn handle(&mut self, event: &Event) -> Result<(), ReportError> {
        match self.collector.record(event) {
            Some(report) => {
                // One line: a CI artifact is read by programs (`jq` indents it for people).
                let text = format!("{}\n", envelope(&report, self.evidence));
                self.sink.write_all(&text)
            }
            None => Ok(()),
        }
    }
}

/// The report, as the envelope's `data`, its records kept as `evidence` says.
pub fn data(report: &RunReport, evidence: Evidence) -> Value {
    let s = &report.summary;
    let manifest = shared_manifest(report);
    let scenarios: Vec<Value> =
        report.results.iter().map(|r| scenario_value(r, manifest, evidence)).collect();
    json!({
        "tool": report.info.tool,
        "spec_version": report.info.spec_version,
        "conform_version": env!("CARGO_PKG_VERSION"),
        "jobs": report.info.jobs,
        "pace": s.pace,
        "conformant": s.conformant,
        "strict": s.strict,
        "allow_unjudged": s.allow_unjudged,
        "confirmation": s.confirmation,
        "counts": s.counts,
        "levels": s.levels,
        "requirements": s.requirements,
        "claims": s.claims,
        "kit_checks": s.kit_checks,
        "coverage": s.coverage,
        "baseline": s.baseline,
        "partial": s.interrupted,
        "manifest": manifest,
        "evidence": evidence.as_str(),
        "scenarios": scenarios,
    })
}

/// What `stdout_ref` says of a record whose stdout held `data.manifest`.
pub const MANIFEST_REF: &str = "manifest";

/// The manifest document printed by the most step records (the first of them on a tie):
/// the one [`data`] stores once.
pub fn shared_manifest(report: &RunReport) -> Option<&Value> {
    let mut candidates: Vec<(&Value, usize)> = Vec::new();
    for step in report.results.iter().flat_map(|r| &r.steps) {
        let Some(document) = step.envelope.as_ref().map(unwrap_manifest) else {
            continue;
        };
        if document.get("commands").is_none() {
            continue;
        }
        match candidates.iter_mut().find(|(seen, _)| *seen == document) {
            Some((_, count)) => *count += 1,
            None => candidates.push((document, 1)),
        }
    }
    let most = candidates.iter().map(|(_, n)| *n).max()?;
    candidates.into_iter().find(|(_, n)| *n == most).map(|(document, _)| document)
}

/// One scenario as the report shows it: its evidence without repeats, and without the tool's
/// output when it passed and `evidence` keeps only failures' (see the module docs).
fn scenario_value(result: &ScenarioResult, manifest: Option<&Value>, evidence: Evidence) -> Value {
    let mut value = serde_json::to_value(result).unwrap_or(Value::Null);
    let keep_output = evidence.keeps_output_of(&result.status);
    let evidence: Vec<Value> = result
        .steps
        .iter()
        .map(|s| if keep_output { evidence_value(s, manifest) } else { record_without_output(s) })
        .collect();
    if let Some(object) = value.as_object_mut() {
        object.insert("evidence".to_owned(), Value::Array(evidence));
    }
    value
}

/// One step record: `stdout.text` left out when `envelope` holds the document, and the
/// manifest replaced by `stdout_ref`.
pub fn evidence_value(step: &StepRecord, manifest: Option<&Value>) -> Value {
    let mut value = serde_json::to_value(step).unwrap_or(Value::Null);
    let Some(envelope) = &step.envelope else {
        return value;
    };
    let Some(record) = value.as_object_mut() else {
        return value;
    };
    if let Some(stdout) = record.get_mut("stdout").and_then(Value::as_object_mut) {
        stdout.remove("text");
    }
    let document = unwrap_manifest(envelope);
    if manifest.is_some_and(|m| m == document) {
        record.insert("stdout_ref".to_owned(), Value::from(MANIFEST_REF));
        if std::ptr::eq(document, envelope) {
            record.remove("envelope");
        } else if let Some(wrapped) = record.get_mut("envelope").and_then(Value::as_object_mut) {
            wrapped.remove("data");
        }
    }
    value
}

/// One step record without the tool's output: what was run, how it ended, how much it wrote.
fn record_without_output(step: &StepRecord) -> Value {
    let mut value = serde_json::to_value(step).unwrap_or(Value::Null);
    if let Some(record) = value.as_object_mut() {
        record.remove("envelope");
        for stream in ["stdout", "stderr"] {
            if let Some(excerpt) = record.get_mut(stream).and_then(Value::as_object_mut) {
                excerpt.remove("text");
            }
        }
        record.insert("output_omitted".to_owned(), Value::Bool(true));
    }
    value
}

/// Puts `data.manifest` back into every record of a report's `data` that refers to it, so the
/// records read as if the manifest were repeated (the inverse of the sharing above).
pub fn restore_manifest(data: &mut Value) {
    let Some(manifest) = data.get("manifest").cloned().filter(|m| !m.is_null()) else {
        return;
    };
    let Some(scenarios) = data.get_mut("scenarios").and_then(Value::as_array_mut) else {
        return;
    };
    let records = scenarios
        .iter_mut()
        .filter_map(|s| s.get_mut("evidence").and_then(Value::as_array_mut))
        .flatten();
    for record in records {
        let Some(object) = record.as_object_mut() else {
            continue;
        };
        if object.get("stdout_ref").and_then(Value::as_str) != Some(MANIFEST_REF) {
            continue;
        }
        object.remove("stdout_ref");
        match object.get_mut("envelope").and_then(Value::as_object_mut) {
            Some(wrapped) => {
                wrapped.insert("data".to_owned(), manifest.clone());
            }
            None => {
                object.insert("envelope".to_owned(), manifest.clone());
            }
        }
    }
}

/// The whole envelope of a finished run, its records kept as `evidence` says.
pub fn envelope(report: &RunReport, evidence: Evidence) -> Value {
    let s = &report.summary;
    let error = match s.exit_code {
        exit::SUCCESS => Value::Null,
        exit::NOT_CONFORMANT => {
            let failed: Vec<&str> = report
                .results
                .iter()
                .filter(|r| r.counts_against_conformance())
                .map(|r| r.id.as_str())
                .collect();
            json!({
                "code": "NOT_CONFORMANT",
                "message": format!(
                    "{} `must` scenario(s) failed: {}",
                    failed.len(),
                    failed.join(", ")
                ),
                "context": {"failed": failed},
                "suggestion": "read each failed scenario's findings and run the repro of its evidence",
            })
        }
        exit::INTERRUPTED => {
            let unfinished = report
                .results
                .iter()
                .filter(|r| matches!(r.status, Status::Skip { reason: SkipReason::Interrupted }))
                .count();
            json!({
                "code": "CANCELLED",
                "message": format!(
                    "conform was interrupted: {unfinished} of {} scenario(s) did not finish; the report holds the rest",
                    report.results.len()
                ),
                "retryable": true,
                "context": {"partial": true, "unfinished": unfinished},
                "suggestion": "run conform again to the end for a full verdict",
            })
        }
        exit::BASELINE_MISMATCH => json!({
            "code": "BASELINE_MISMATCH",
            "message": format!(
                "the baseline does not match: {} unexpected failure(s), {} stale entr(ies)",
                s.baseline.unexpected_failures.len(),
                s.baseline.stale.len()
            ),
            "context": {
                "unexpected_failures": s.baseline.unexpected_failures,
                "stale": s.baseline.stale,
            },
            "suggestion": "remove stale entries; fix unexpected failures or list them with a reason",
        }),
        _ => {
            let errored: Vec<Value> = report
                .results
                .iter()
                .filter_map(|r| match &r.status {
                    Status::Error { message } if !r.is_expected_failure() => {
                        Some(json!({"scenario": r.id, "message": message}))
                    }
                    _ => None,
                })
                .collect();
            json!({
                "code": "HARNESS_ERROR",
                "message": format!("conform failed in {} scenario(s)", errored.len()),
                "context": {"errors": errored},
            })
        }
    };
    let warnings: Vec<Value> = s
        .coverage
        .roles_missing
        .iter()
        .map(|role| {
            json!({
                "code": "ROLE_MISSING",
                "message": format!("the profile names no `{role}` role; its scenarios were skipped"),
                "context": {"role": role},
            })
        })
        .collect();
    envelope_of(data(report, evidence), error, warnings, s.exit_code, s.duration_ms)
}

/// The envelope of a command that succeeded (`list`, `explain`): `data` as given.
pub fn success_envelope(data: Value, duration_ms: u64) -> Value {
    envelope_of(data, Value::Null, Vec::new(), exit::SUCCESS, duration_ms)
}

/// The envelope of a run that could not start (bad invocation, invalid profile or baseline):
/// `data` null, `error.code` as given (e.g. `ARG_ERROR`), `error.phase` `validation`; retrying
/// the same invocation would fail the same way.
pub fn error_envelope(code: &str, message: &str, exit_code: u8, duration_ms: u64) -> Value {
    let error =
        json!({"code": code, "message": message, "retryable": false, "phase": "validation"});
    envelope_of(Value::Null, error, Vec::new(), exit_code, duration_ms)
}

/// Every envelope conform prints: the five keys, `ok` true exactly when the exit is 0, and the
/// exit code repeated in `meta` (REQ-F-004, the contract conform itself keeps).
fn envelope_of(
    data: Value,
    error: Value,
    warnings: Vec<Value>,
    exit_code: u8,
    duration_ms: u64,
) -> Value {
    json!({
        "ok": exit_code == exit::SUCCESS,
        "data": data,
        "error": error,
        "warnings": warnings,
        "meta": {"exit_code": exit_code, "duration_ms": duration_ms},
    })
}
