//! conform's command line: list, explain, completions and bad invocations.

use conform::scenario::SCENARIO_FILES;

use crate::support::{code, conform, errors, faketool, stdout_json, validator};

#[test]
fn list_shows_every_scenario_as_a_table() {
    let out = conform().arg("list").output().unwrap();
    assert_eq!(code(&out), 0);
    let text = String::from_utf8(out.stdout).unwrap();
    let first = text.lines().next().unwrap();
    for column in ["ID", "REQUIREMENT", "LEVEL", "ROLES", "CRITERION"] {
        assert!(first.contains(column), "{first}");
    }
    for (path, _) in SCENARIO_FILES {
        let id = path.rsplit('/').next().unwrap().trim_end_matches(".toml");
        assert!(text.lines().any(|l| l.starts_with(&format!("{id} "))), "{id} missing:\n{text}");
    }
    assert!(text.ends_with(&format!("{} scenarios\n", SCENARIO_FILES.len())));
}

#[test]
fn list_as_json_is_an_envelope() {
    let out = conform().args(["list", "--format", "json"]).output().unwrap();
    assert_eq!(code(&out), 0);
    let envelope = stdout_json(&out);
    assert!(errors(&validator("response-envelope.json"), &envelope).is_empty());
    let scenarios = envelope["data"]["scenarios"].as_array().unwrap();
    assert_eq!(scenarios.len(), SCENARIO_FILES.len());
    let s = scenarios.iter().find(|s| s["id"] == "budget-flag-beats-env").unwrap();
    assert_eq!(s["requirement"], "REQ-F-080");
    assert_eq!(s["level"], "must");
    assert_eq!(s["roles"], serde_json::json!(["detach"]));
}

#[test]
fn explain_shows_the_scenario_and_its_source() {
    let out = conform().args(["explain", "dead-worker-is-job-lost"]).output().unwrap();
    assert_eq!(code(&out), 0);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("dead-worker-is-job-lost (REQ-F-081, must)"), "{text}");
    assert!(text.contains("action = \"kill-worker\""), "{text}");

    let out = conform()
        .args(["explain", "dead-worker-is-job-lost", "--format", "json"])
        .output()
        .unwrap();
    let envelope = stdout_json(&out);
    assert_eq!(envelope["data"]["scenario"]["steps"][1]["action"], "kill-worker");
}

#[test]
fn explain_of_an_unknown_id_is_arg_error_with_a_hint() {
    let out = conform().args(["explain", "dead-worker"]).output().unwrap();
    assert_eq!(code(&out), 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("did you mean: dead-worker-is-job-lost"), "{stderr}");
}

#[test]
fn completions_are_printed() {
    let out = conform().args(["completions", "bash"]).output().unwrap();
    assert_eq!(code(&out), 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("conform"));
}

#[test]
fn a_bad_invocation_is_arg_error_also_as_json() {
    let out = conform().args(["run"]).output().unwrap();
    assert_eq!(code(&out), 2);
    let out = conform().args(["run", "--format", "json", "--bogus"]).output().unwrap();
    assert_eq!(code(&out), 2);
    let envelope = stdout_json(&out);
    assert_eq!(envelope["error"]["code"], "ARG_ERROR");
    assert!(errors(&validator("response-envelope.json"), &envelope).is_empty());
}

#[test]
fn a_filter_matching_nothing_is_arg_error() {
    let out = conform().arg("run").arg(faketool()).args(["--only", "REQ-X-999"]).output().unwrap();
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("matches no scenario"));
}

#[test]
fn a_missing_tool_is_arg_error() {
    let out = conform().args(["run", "./no/such/tool"]).output().unwrap();
    assert_eq!(code(&out), 2);
}

#[test]
fn a_tool_that_is_not_executable_is_arg_error() {
    let dir = tempfile::tempdir().unwrap();
    let tool = dir.path().join("notes.txt");
    std::fs::write(&tool, "not a program").unwrap();
    let out = conform().arg("run").arg(&tool).output().unwrap();
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an executable file"));
}

#[test]
fn keep_sandboxes_keeps_each_scenario_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = conform()
        .current_dir(dir.path())
        .env("TMPDIR", dir.path())
        .arg("run")
        .arg(faketool())
        .args(["--only", "manifest-valid", "--keep-sandboxes"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let kept: Vec<&str> =
        stderr.lines().filter_map(|l| l.strip_prefix("conform: kept the sandbox at ")).collect();
    assert_eq!(kept.len(), 1, "{stderr}");
    assert!(std::path::Path::new(kept[0]).join("work").is_dir(), "{stderr}");
}
