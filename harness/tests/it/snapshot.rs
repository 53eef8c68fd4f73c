//! Snapshots: normalized envelopes are stored per scenario and step, drift is a finding with a
//! diff, `--update` rewrites, a missing snapshot is reported (written only with `--update`).

use conform::outcome::{Note, SkipReason, Status};
use conform::redact::Redactor;
use conform::scenario::Obligation;
use conform::snapshot::{Comparison, SnapshotStore, file_safe, snapshot_text, sort_keys};
use serde_json::json;

use super::report::{result, step};

fn scenario_with(envelope: serde_json::Value) -> conform::outcome::ScenarioResult {
    let mut r = result("paused-writer", "REQ-F-082", Obligation::Must, Status::Pass);
    r.steps = vec![step("run", &["./t", "import"], 14, Some(envelope))];
    r
}

fn paused(done: u64, job: &str, retryable: bool) -> serde_json::Value {
    json!({
        "ok": false,
        "data": {"state": "paused", "job_id": job, "progress": {"done": done, "total": 100},
                 "continue_command": "t import /tmp/sbx-9/in.csv --idempotency-key k-1234567",
                 "cancel_command": format!("t job cancel {job}")},
        "error": {"code": "INCOMPLETE", "message": format!("budget spent at {done}%"), "retryable": retryable},
        "warnings": [],
        "meta": {"exit_code": 14, "duration_ms": done * 7 + 1, "budget_ms": 500 + done}
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
    let mut r = scenario_with(paused(40, "j-aaaaaaaaaaaa", false));
    store.apply(&mut r, &redactor).unwrap();
    assert_eq!(r.status, Status::Pass);
    assert!(matches!(r.notes[0], Note::SnapshotWritten { .. }), "{:?}", r.notes);
    let file = snaps.join("paused-writer").join("run.json");
    let stored = std::fs::read_to_string(&file).unwrap();
    assert!(stored.contains("\"job_id\": \"[JOB_ID]\""), "{stored}");
    assert!(stored.contains("[SANDBOX]/in.csv --idempotency-key [IDEMPOTENCY_KEY]"));
    assert!(stored.ends_with("}\n"));
    assert!(stored.contains("\"done\": \"[PROGRESS]\""), "{stored}");
    assert!(stored.contains("\"message\": \"budget spent at [N]%\""), "{stored}");
    // Keys sorted: "data" before "error" before "meta" before "ok".
    let positions: Vec<usize> = ["\"data\"", "\"error\"", "\"meta\"", "\"ok\"", "\"warnings\""]
        .iter()
        .map(|k| stored.find(k).unwrap())
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{stored}");

    // Second run, other ids, durations, budget and progress (timing), same behaviour: no
    // finding.
    let store = SnapshotStore::open(&snaps, false).unwrap();
    let mut r = scenario_with(paused(73, "j-bbbbbbbbbbbb", false));
    store.apply(&mut r, &redactor).unwrap();
    assert_eq!((r.status.clone(), r.findings.len(), r.notes.len()), (Status::Pass, 0, 0));

    // Third run, the tool now calls the paused work retryable: drift with a diff.
    let mut r = scenario_with(paused(12, "j-cccccccccccc", true));
    store.apply(&mut r, &redactor).unwrap();
    assert_eq!(r.status, Status::Fail);
    assert_eq!(r.findings.len(), 1);
    let finding = &r.findings[0];
    assert_eq!(finding.check, "snapshot-drift");
    assert_eq!(finding.step.as_deref(), Some("run"));
    let diff = finding.diff().unwrap();
    assert!(diff.contains("-    \"retryable\": false"), "{diff}");
    assert!(diff.contains("+    \"retryable\": true"), "{diff}");
    // The file is unchanged without --update.
    assert_eq!(std::fs::read_to_string(&file).unwrap(), stored);

    // --update accepts the change.
    let store = SnapshotStore::open(&snaps, true).unwrap();
    let mut r = scenario_with(paused(12, "j-cccccccccccc", true));
    store.apply(&mut r, &redactor).unwrap();
    assert_eq!(r.status, Status::Pass);
    assert!(matches!(r.notes[0], Note::SnapshotUpdated { .. }), "{:?}", r.notes);
    assert!(std::fs::read_to_string(&file).unwrap().contains("\"retryable\": true"));
}

#[test]
fn a_missing_snapshot_without_update_is_a_finding_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::open(dir.path(), false).unwrap();
    let mut r = scenario_with(paused(1, "j-aaaaaaaaaaaa", false));
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
    let mut skipped = result(
        "s",
        "R",
        Obligation::Must,
        Status::Skip { reason: SkipReason::NoInstanceSelection },
    );
    skipped.steps = vec![step("run", &["t"], 0, Some(json!({"a": 1})))];
    store.apply(&mut skipped, &Redactor::new()).unwrap();
    let mut no_json = result("n", "R", Obligation::Must, Status::Pass);
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

#[test]
fn a_job_named_only_in_a_command_line_is_redacted_in_every_step() {
    let dir = tempfile::tempdir().unwrap();
    let store = SnapshotStore::open(dir.path(), true).unwrap();
    let mut r = result("lost", "REQ-F-081", Obligation::Must, Status::Pass);
    r.steps = vec![step(
        "wait",
        &["./t", "job", "wait", "8c182ae3ba173c37"],
        1,
        Some(json!({"ok": false, "data": null, "warnings": [], "meta": {"exit_code": 1},
            "error": {"code": "JOB_LOST", "message": "the worker of job 8c182ae3ba173c37 died"}})),
    )];
    store.apply(&mut r, &Redactor::new()).unwrap();
    let text = std::fs::read_to_string(dir.path().join("lost/wait.json")).unwrap();
    assert!(text.contains("the worker of job [JOB_ID] died"), "{text}");
}

#[test]
fn a_continuation_chain_is_stored_as_its_final_response() {
    let names = |steps: &[conform::outcome::StepRecord]| -> Vec<(String, String)> {
        conform::snapshot::snapshot_targets(steps)
            .into_iter()
            .map(|(file, s)| (file, s.name.clone()))
            .collect()
    };
    let ok = Some(json!({"ok": true}));
    let incomplete = Some(json!({"ok": false}));
    // Two hops in one run, three in another: the same file, the final response.
    let short = vec![
        step("call", &["t"], 14, incomplete.clone()),
        step("continue#1", &["t"], 14, incomplete.clone()),
        step("continue#2", &["t"], 0, ok.clone()),
    ];
    let long = vec![
        step("call", &["t"], 14, incomplete.clone()),
        step("continue#1", &["t"], 14, incomplete.clone()),
        step("continue#2", &["t"], 14, incomplete.clone()),
        step("continue#3", &["t"], 0, ok.clone()),
    ];
    let want = |last: &str| {
        vec![("call".to_owned(), "call".to_owned()), ("continue".to_owned(), last.to_owned())]
    };
    assert_eq!(names(&short), want("continue#2"));
    assert_eq!(names(&long), want("continue#3"));
    // Concurrent runs that all handed off keep one file each.
    let concurrent = vec![
        step("same#1", &["t"], 14, incomplete.clone()),
        step("same#2", &["t"], 14, incomplete),
        step("after", &["t"], 0, ok),
    ];
    assert_eq!(
        names(&concurrent),
        vec![
            ("same#1".to_owned(), "same#1".to_owned()),
            ("same#2".to_owned(), "same#2".to_owned()),
            ("after".to_owned(), "after".to_owned()),
        ]
    );
}

/// `conform run --snapshots` end to end against the fixture tool: record, rerun clean, then a
/// hand-edited snapshot is reported as drift with a diff.
#[test]
fn conform_records_compares_and_reports_drift() {
    let dir = tempfile::tempdir().unwrap();
    let tool =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tools/faketool");
    let snaps = dir.path().join("snaps");
    let run = |extra: &[&str]| {
        let out = assert_cmd::Command::cargo_bin("conform")
            .unwrap()
            .current_dir(dir.path())
            .arg("run")
            .arg(&tool)
            .args(["--only", "REQ-F-004", "--allow-unjudged", "--format", "json", "--snapshots"])
            .arg(&snaps)
            .args(extra)
            .timeout(std::time::Duration::from_secs(120))
            .output()
            .unwrap();
        let envelope: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code().unwrap(), envelope)
    };
    // Without --update and without snapshots: the directory must exist.
    let (code, _) = run(&[]);
    assert_eq!(code, i32::from(conform::exit::ARG_ERROR));

    let (code, envelope) = run(&["--update"]);
    assert_eq!(code, 0, "{envelope:#}");
    let files: Vec<std::path::PathBuf> = walk(&snaps);
    assert!(!files.is_empty());

    let (code, envelope) = run(&[]);
    assert_eq!(code, 0, "an unchanged tool must not drift: {envelope:#}");

    // Edit one snapshot: the next run reports drift on that scenario's step.
    let file = &files[0];
    let text = std::fs::read_to_string(file).unwrap();
    let edited = text.replacen("\"ok\": false", "\"ok\": true", 1);
    assert_ne!(text, edited, "{text}");
    std::fs::write(file, edited).unwrap();
    let (code, envelope) = run(&[]);
    assert_eq!(code, i32::from(conform::exit::NOT_CONFORMANT), "{envelope:#}");
    let drift: Vec<&serde_json::Value> = envelope["data"]["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["findings"].as_array().unwrap())
        .filter(|f| f["check"] == "snapshot-drift")
        .collect();
    assert_eq!(drift.len(), 1, "{envelope:#}");
    let expected = drift[0]["expected"].as_str().unwrap();
    assert!(expected.contains("\"ok\": true"), "{expected}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}
