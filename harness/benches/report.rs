//! Figures for the result pipeline: how long each end-of-run report takes for a large run,
//! how fast redaction normalizes a response, and what a snapshot comparison costs per step.
//! Run with `cargo bench -p conform --bench report`; it prints figures, it asserts nothing.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Instant;

use conform::event::RunInfo;
use conform::outcome::FindingKind;
use conform::outcome::{
    Ended, Excerpt, Finding, Repro, ReproCommand, ReproStdin, ScenarioResult, Status, StepRecord,
};
use conform::redact::Redactor;
use conform::report::{RunReport, human, json, junit, markdown};
use conform::scenario::Obligation;
use conform::snapshot::SnapshotStore;
use conform::summary::{RunFacts, RunSummary};
use serde_json::{Value, json};

const SCENARIOS: usize = 2000;
const STEPS: usize = 3;

fn envelope(i: usize) -> Value {
    json!({
        "ok": false,
        "data": {"state": "paused", "job_id": format!("j-{i:016x}"),
                 "progress": {"done": i % 100, "total": 100, "unit": "rows"},
                 "continue_command": format!("/tmp/sbx-{i}/tool import in.csv --budget 630ms --idempotency-key k-{i:012}"),
                 "cancel_command": format!("/tmp/sbx-{i}/tool job cancel j-{i:016x}")},
        "error": {"code": "INCOMPLETE", "message": format!("budget of 630ms reached at {}%", i % 100), "retryable": false},
        "warnings": [],
        "meta": {"exit_code": 14, "duration_ms": 631 + i % 7, "budget_ms": 630}
    })
}

fn results() -> Vec<ScenarioResult> {
    (0..SCENARIOS)
        .map(|i| {
            let steps = (0..STEPS)
                .map(|s| StepRecord {
                    name: format!("step{s}"),
                    repro: Repro {
                        env: BTreeMap::from([("AGENT_CALL_BUDGET_MS".into(), "500".into())]),
                        command: ReproCommand::Argv(vec![
                            "./tool".into(),
                            "import".into(),
                            "in file.csv".into(),
                        ]),
                        stdin: ReproStdin::Closed,
                        cwd: Some(format!("/tmp/sbx-{i}")),
                    },
                    ended: Ended::Exited { code: 14 },
                    elapsed_ms: 630,
                    pipes_closed_after_ms: Some(631),
                    stdout: Excerpt {
                        text: envelope(i).to_string(),
                        total_bytes: 400,
                        truncated: false,
                    },
                    stderr: Excerpt {
                        text: "working\n".repeat(20),
                        total_bytes: 160,
                        truncated: false,
                    },
                    envelope: Some(envelope(i)),
                    started_ms: Some(s as u64 * 640),
                    budget_ms: Some(500),
                    may_hold_ms: Some(2010),
                    signal: None,
                })
                .collect();
            let status = if i % 10 == 0 { Status::Fail } else { Status::Pass };
            let findings = if status == Status::Fail {
                vec![
                    Finding::new(FindingKind::CalibratedEquality, "differs")
                        .expected("{\n  \"a\": 1,\n  \"b\": 2\n}")
                        .actual("{\n  \"a\": 1,\n  \"b\": 3\n}")
                        .at_step("step1"),
                ]
            } else {
                Vec::new()
            };
            ScenarioResult {
                id: format!("scenario-{i:04}"),
                requirement: format!("REQ-F-{:03}", 80 + i % 4),
                criterion: "a criterion".into(),
                level: if i % 3 == 0 { Obligation::Should } else { Obligation::Must },
                tags: Vec::new(),
                status,
                findings,
                notes: Vec::new(),
                steps,
                actions: Vec::new(),
                duration_ms: 700,
                baseline: None,
                first_run: None,
            }
        })
        .collect()
}

fn time<T>(label: &str, per: usize, unit: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(
        stdout,
        "{label:<42} {:>9.2} ms  ({:>8.2} µs per {unit})",
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e6 / per as f64
    );
    out
}

fn main() {
    let results = results();
    let summary = time("summary of 2000 scenarios", SCENARIOS, "scenario", || {
        RunSummary::compute(
            &results,
            &RunFacts { baseline_in_use: false, duration_ms: 1, ..RunFacts::default() },
        )
    });
    let info = RunInfo {
        tool: "./tool".into(),
        spec_version: "3.20".into(),
        scenario_count: SCENARIOS,
        jobs: 4,
        paced_from: None,
    };
    let report = RunReport::new(info, results.clone(), summary);
    let h = time("human report", SCENARIOS, "scenario", || human::render(&report, false));
    let j = time("JSON envelope (serialized)", SCENARIOS, "scenario", || {
        format!("{:#}", json::envelope(&report, json::Evidence::All))
    });
    let x = time("JUnit XML", SCENARIOS, "scenario", || junit::render(&report).unwrap_or_default());
    let m = time("Markdown summary", SCENARIOS, "scenario", || markdown::render(&report));
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(
        stdout,
        "sizes: human {} KiB, JSON {} KiB, JUnit {} KiB, Markdown {} KiB",
        h.len() / 1024,
        j.len() / 1024,
        x.len() / 1024,
        m.len() / 1024
    );
    drop(stdout);

    let envelopes: Vec<Value> = (0..10_000).map(envelope).collect();
    let redactor = Redactor::new().with_sandbox_root("/tmp/sbx-1");
    time("redact 10000 INCOMPLETE responses", envelopes.len(), "response", || {
        std::hint::black_box(envelopes.iter().map(|e| redactor.redact(e)).collect::<Vec<_>>())
    });
    time("redact_for_snapshot 10000 responses", envelopes.len(), "response", || {
        std::hint::black_box(
            envelopes.iter().map(|e| redactor.redact_for_snapshot(e)).collect::<Vec<_>>(),
        )
    });

    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let write = SnapshotStore::open(dir.path(), true).unwrap_or_else(|e| panic!("{e}"));
    let mut some: Vec<ScenarioResult> = results.iter().take(500).cloned().collect();
    time("snapshots: write 500 scenarios x 3 steps", 500 * STEPS, "step", || {
        for r in &mut some {
            let _ = write.apply(r, &Redactor::new());
        }
    });
    let compare = SnapshotStore::open(dir.path(), false).unwrap_or_else(|e| panic!("{e}"));
    let mut again: Vec<ScenarioResult> = results.iter().take(500).cloned().collect();
    time("snapshots: compare 500 scenarios x 3 steps", 500 * STEPS, "step", || {
        for r in &mut again {
            let _ = compare.apply(r, &Redactor::new());
        }
    });
    let drifted = again
        .iter()
        .filter(|r| {
            r.findings.iter().any(|f| {
                matches!(f.check, FindingKind::SnapshotDrift | FindingKind::SnapshotMissing)
            })
        })
        .count();
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "snapshot findings on an unchanged rerun: {drifted} (want 0)");
}
