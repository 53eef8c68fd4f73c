//! Snapshots: normalized envelopes are stored per scenario and step, drift is a finding with a
//! diff, `--update` rewrites, a missing snapshot is reported (written only with `--update`).

use conform::outcome::{Level, Status};
use conform::redact::Redactor;
use conform::snapshot::{Comparison, SnapshotStore, file_safe, snapshot_text, sort_keys};
use serde_json::json;

use super::report::{result, step};

fn scenario_with(envelope: serde_json::Value) -> conform::outcome::ScenarioResult {
    let mut r = result("paused-writer", "REQ-F-082", Level::Must, Status::Pass);
    r.steps = vec![step("run", &["./t", "import"], 14, Some(envelope))];
    r
}

fn paused(done: u64, job: &str, duration: u64) -> serde_json::Value {
    json!({
        "ok": false,
        "data": {"state": "paused", "job_id": job, "progress": {"done": done},
                 "continue_command": "t import /tmp/sbx-9/in.csv --idempotency-key k-1234567",
                 "cancel_command": format!("t job cancel {job}")},
        "error": {"code": "INCOMPLETE", "message": "budget spent", "retryable": false},
        "warnings": [],
        "meta": {"exit_code": 14, "duration_ms": duration, "budget_ms": 500}
    })
}

#[test]
fn missing_then_written_then_matched_then_drift() {
    let dir = tempfile::tempdir().unwrap();
    let snaps = dir.path().join("snaps");
    let redactor = Redactor::new().with_sandbox_root("/tmp/sbx-9");

    // Without --update the directory must exist.
    assert!(SnapshotStore::open(&snaps, false).is_err());

    // First run with --update: written, reported as new.
    let store = SnapshotStore::open(&snaps, true).unwrap();
    let mut r = scenario_with(paused(40, "j-aaaaaaaaaaaa", 501));
    store.apply(&mut r, &redactor).unwrap();
    assert_eq!(r.status, Status::Pass);
    assert!(r.notes[0].starts_with("new snapshot written"), "{:?}", r.notes);
    let file = snaps.join("paused-writer").join("run.json");
    let stored = std::fs::read_to_string(&file).unwrap();
    assert!(stored.contains("\"job_id\": \"[JOB_ID]\""), "{stored}");
    assert!(stored.contains("[SANDBOX]/in.csv --idempotency-key [IDEMPOTENCY_KEY]"));
    assert!(stored.ends_with("}\n"));
    // Keys sorted: "data" before "error" before "meta" before "ok".
    let positions: Vec<usize> = ["\"data\"", "\"error\"", "\"meta\"", "\"ok\"", "\"warnings\""]
        .iter()
        .map(|k| stored.find(k).unwrap())
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{stored}");

    // Second run, other ids and durations, same behaviour: no finding.
    let store = SnapshotStore::open(&snaps, false).unwrap();
    let mut r = scenario_with(paused(40, "j-bbbbbbbbbbbb", 733));
    store.apply(&mut r, &redactor).unwrap();
    assert_eq!((r.status.clone(), r.findings.len(), r.notes.len()), (Status::Pass, 0, 0));

    // Third run, the tool now reports different progress: drift with a diff.
    let mut r = scenario_with(paused(12, "j-cccccccccccc", 733));
    store.apply(&mut r, &redactor).unwrap();
    assert_eq!(r.status, Status::Fail);
    assert_eq!(r.findings.len(), 1);
    let finding = &r.findings[0];
    assert_eq!(finding.check, "snapshot-drift");
    assert_eq!(finding.step.as_deref(), Some("run"));
    let diff = finding.diff().unwrap();
    assert!(diff.contains("-      \"done\": 40"), "{diff}");
    assert!(diff.contains("+      \"done\": 12"), "{diff}");
    // The file is unchanged without --update.
    assert_eq!(std::fs::read_to_string(&file).unwrap(), stored);

    // --update accepts the change.
    let store = SnapshotStore::open(&snaps, true).unwrap();
    let mut r = scenario_with(paused(12, "j-cccccccccccc", 733));
    store.apply(&mut r, &redactor).unwrap();
    assert_eq!(r.status, Status::Pass);
    assert!(r.notes[0].starts_with("snapshot updated"));
    assert!(std::fs::read_to_string(&file).unwrap().contains("\"done\": 12"));
}

#[test]
fn a_missing_snapshot_without_update_is_a_finding_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::open(dir.path(), false).unwrap();
    let mut r = scenario_with(paused(1, "j-aaaaaaaaaaaa", 1));
    store.apply(&mut r, &Redactor::new()).unwrap();
    assert_eq!(r.status, Status::Fail);
    assert_eq!(r.findings[0].check, "snapshot-missing");
    assert!(!dir.path().join("paused-writer").exists());
    assert_eq!(store.compare("paused-writer", "run", &json!({})).unwrap(), Comparison::Missing);
}

#[test]
fn skipped_scenarios_and_steps_without_json_are_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::open(dir.path(), true).unwrap();
    let mut skipped = result("s", "R", Level::Must, Status::Skip { reason: "no role".into() });
    skipped.steps = vec![step("run", &["t"], 0, Some(json!({"a": 1})))];
    store.apply(&mut skipped, &Redactor::new()).unwrap();
    let mut no_json = result("n", "R", Level::Must, Status::Pass);
    no_json.steps = vec![step("run", &["t"], 0, None)];
    store.apply(&mut no_json, &Redactor::new()).unwrap();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn formatting_of_a_stored_snapshot_does_not_matter() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::open(dir.path(), false).unwrap();
    let value = json!({"b": 1, "a": [1, 2]});
    std::fs::create_dir_all(dir.path().join("x")).unwrap();
    std::fs::write(dir.path().join("x/step.json"), r#"{"a":[1,2],"b":1}"#).unwrap();
    assert_eq!(store.compare("x", "step", &value).unwrap(), Comparison::Matched);
    assert_eq!(snapshot_text(&value), "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": 1\n}\n");
    assert_eq!(sort_keys(&value).to_string(), r#"{"a":[1,2],"b":1}"#);
}

#[test]
fn file_names_are_safe() {
    assert_eq!(file_safe("continue#2/../x"), "continue_2_.._x");
    assert_eq!(file_safe(".."), "_..");
    assert_eq!(file_safe("run-1.a_b"), "run-1.a_b");
}
