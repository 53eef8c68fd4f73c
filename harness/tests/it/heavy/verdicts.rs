//! Verdicts that hold on the vendor's machine: a timing failure is confirmed alone before it
//! fails a tool, a premise never hides the violation it waits for, a must left unjudged for a
//! reason the profile can fix keeps the run from green, and a role the profile left out is
//! played by one that declares what it needs.

use crate::support::{
    code, conform, errors, fake_profile, faketool, pyagent_with, status_of, stdout_json, validator,
};

/// conform's JSON report of `tool` under `profile` with `args`.
fn run(
    tool: &std::path::Path,
    profile: &std::path::Path,
    args: &[&str],
) -> (i32, serde_json::Value) {
    let out = conform()
        .arg("run")
        .arg(tool)
        .arg("--profile")
        .arg(profile)
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let report = stdout_json(&out);
    assert!(
        errors(&validator("conform-report-data.json"), &report["data"]).is_empty(),
        "{:#?}",
        errors(&validator("conform-report-data.json"), &report["data"])
    );
    (code(&out), report)
}

fn scenario<'a>(report: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    let all = report["data"]["scenarios"].as_array().unwrap();
    all.iter().find(|s| s["id"] == id).unwrap_or_else(|| panic!("no {id} in {report:#}"))
}

const PAUSES: &str = "resume-only-pauses-within-budget";

/// A pause that held its caller past the bound once, as a loaded machine makes a correct tool
/// do, is run again alone: it passes there, so the run is green and reports it as flaky, with
/// the first run kept as evidence (and in JUnit as a flaky failure, as nextest writes one).
#[test]
fn a_timing_failure_that_does_not_repeat_alone_is_reported_flaky_and_not_counted() {
    let dir = tempfile::tempdir().unwrap();
    let once = dir.path().join("overstayed");
    let env = format!(
        ", FAKETOOL_OVERSTAY_MS = \"5000\", FAKETOOL_OVERSTAY_ONCE = \"{}\"",
        once.display()
    );
    let profile = fake_profile(dir.path(), &env);
    let junit = dir.path().join("report.xml");
    let (exit, report) =
        run(&faketool(), &profile, &["--only", PAUSES, "--junit", junit.to_str().unwrap()]);
    assert_eq!(exit, 0, "{report:#}");
    let s = scenario(&report, PAUSES);
    assert_eq!(s["status"], "pass", "{s:#}");
    assert_eq!(s["first_run"]["status"], "fail", "{s:#}");
    assert_eq!(s["first_run"]["findings"][0]["check"], "elapsed", "{s:#}");
    assert_eq!(report["data"]["confirmation"]["flaky"][0], PAUSES);
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("<flakyFailure"), "{xml}");
}

/// The same pause overstaying every time fails alone too: the failure stands, confirmed.
#[test]
fn a_timing_failure_that_repeats_alone_is_confirmed() {
    let dir = tempfile::tempdir().unwrap();
    let profile = fake_profile(dir.path(), ", FAKETOOL_OVERSTAY_MS = \"5000\"");
    let (exit, report) = run(&faketool(), &profile, &["--only", PAUSES]);
    assert_eq!(exit, 80, "{report:#}");
    let s = scenario(&report, PAUSES);
    assert_eq!(
        (s["status"].as_str(), s["first_run"]["status"].as_str()),
        (Some("fail"), Some("fail"))
    );
    assert_eq!(report["data"]["confirmation"]["confirmed"][0], PAUSES);
    // Every timing finding prints the measured time beside its bound.
    let finding = &s["findings"][0];
    assert_eq!(finding["check"], "elapsed", "{s:#}");
    assert!(finding["actual"].as_str().unwrap().ends_with(" ms"), "{finding:#}");
}

/// A `job wait` that blocks until the job ends answers the job's final response: a premise
/// waiting for a running job would take that for "the job ended first" and skip. The wait is
/// held to its budget before the premise is looked at, so the scenario fails, with the
/// measured time, on an implementation that conform was not written with.
#[test]
fn a_blocking_job_wait_fails_and_is_not_excused_by_the_premise() {
    let (_dir, tool, profile) = pyagent_with(|text| {
        text.replace("[tool.env]\n", "[tool.env]\nPYAGENT_FAULT = \"wait-blocks\"\n")
    });
    let id = "job-wait-holds-its-caller-to-the-budget";
    let (exit, report) = run(&tool, &profile, &["--only", id]);
    assert_eq!(exit, 80, "{report:#}");
    let s = scenario(&report, id);
    assert_eq!(s["status"], "fail", "{s:#}");
    let finding = &s["findings"][0];
    assert_eq!(finding["check"], "elapsed", "{s:#}");
    assert!(finding["message"].as_str().unwrap().contains("held its caller"), "{finding:#}");
    assert_eq!(report["data"]["confirmation"]["confirmed"][0], id);
}

/// A profile without `idempotent_writer` whose `resume_writer` runs a writer that takes
/// `--idempotency-key` (REQ-C-007's idempotent writer, whatever else it declares): the
/// idempotency scenario runs on it, and the coverage says which role played it.
#[test]
fn a_keyed_resume_writer_plays_the_missing_idempotent_writer() {
    let (_dir, tool, profile) = pyagent_with(|text| {
        let start = text.find("[roles.idempotent_writer]").expect("the role is in the profile");
        let end = start + text[start..].find("\n\n").expect("a blank line ends it");
        format!("{}{}", &text[..start], &text[end + 2..])
    });
    assert!(!std::fs::read_to_string(&profile).unwrap().contains("idempotent_writer"));
    let id = "repeat-with-key-is-a-noop";
    let (exit, report) = run(&tool, &profile, &["--only", id]);
    assert_eq!((exit, status_of(&report, id)), (0, "pass"), "{report:#}");
    let fills = &report["data"]["coverage"]["roles_filled"];
    assert_eq!(
        fills,
        &serde_json::json!([{ "role": "idempotent_writer", "by": "resume_writer", "command": "load" }])
    );
}

/// A must the profile cannot reach (its role is missing and nothing can play it) is not
/// judged: the run exits 82 UNJUDGED, not green, and names it; `[gate] allow_unjudged`
/// accepts the gap and the report still lists it.
#[test]
fn an_unjudged_must_keeps_the_run_from_green_unless_the_gate_allows_it() {
    let dir = tempfile::tempdir().unwrap();
    let profile = fake_profile(dir.path(), "");
    let only = ["--only", "plain-command-times-out-honestly"];
    let (exit, report) = run(&faketool(), &profile, &only);
    assert_eq!(exit, 82, "{report:#}");
    assert_eq!(report["data"]["coverage"]["unjudged_musts"][0], "plain-command-times-out-honestly");
    let text = std::fs::read_to_string(&profile).unwrap();
    std::fs::write(&profile, format!("[gate]\nallow_unjudged = true\n\n{text}")).unwrap();
    let (exit, report) = run(&faketool(), &profile, &only);
    assert_eq!(exit, 0, "{report:#}");
    assert_eq!(report["data"]["allow_unjudged"], true);
    assert_eq!(report["data"]["coverage"]["unjudged_musts"][0], "plain-command-times-out-honestly");
}
