//! `--format json`: conform answers like the tools it checks, with one response envelope on
//! stdout.
//!
//! * `data` is the report (schema `schemas/conform-report.json`): `tool`, `spec_version`,
//!   `conform_version`, `jobs`, `conformant`, `counts`, `levels`, `requirements`, `claims`
//!   (the spec's Level 1-3 and §79, see [`crate::levels`]), `kit_checks` (the spec kit's
//!   fourteen checks, each `pass`, `fail` or `skip`, with the scenarios that make it), `coverage`,
//!   `baseline` and `scenarios`; each scenario has its `id`, `requirement`, `criterion`,
//!   `level`, `tags`, `status` (with `reason` for a skip and `message` for a harness error),
//!   `findings`, `notes`, `evidence` (one record per process run, with its repro) and
//!   `duration_ms`. `data` is present on failure too: conform declares the report as its
//!   failure payload.
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
use crate::outcome::SkipReason;
use crate::outcome::Status;

/// Writes the envelope when the run finishes.
pub struct JsonReporter {
    sink: Sink,
    collector: Collector,
}

impl JsonReporter {
    /// A reporter writing to `sink`.
    pub fn new(sink: Sink) -> Self {
        JsonReporter { sink, collector: Collector::default() }
    }
}

impl Reporter for JsonReporter {
    fn handle(&mut self, event: &Event) -> Result<(), ReportError> {
        match self.collector.record(event) {
            Some(report) => {
                let text = format!("{:#}\n", envelope(&report));
                self.sink.write_all(&text)
            }
            None => Ok(()),
        }
    }
}

/// The report, as the envelope's `data`.
pub fn data(report: &RunReport) -> Value {
    let s = &report.summary;
    json!({
        "tool": report.info.tool,
        "spec_version": report.info.spec_version,
        "conform_version": env!("CARGO_PKG_VERSION"),
        "jobs": report.info.jobs,
        "conformant": s.conformant,
        "counts": s.counts,
        "levels": s.levels,
        "requirements": s.requirements,
        "claims": s.claims,
        "kit_checks": s.kit_checks,
        "coverage": s.coverage,
        "baseline": s.baseline,
        "partial": s.interrupted,
        "scenarios": report.results,
    })
}

/// The whole envelope of a finished run.
pub fn envelope(report: &RunReport) -> Value {
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
    envelope_of(data(report), error, warnings, s.exit_code, s.duration_ms)
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
