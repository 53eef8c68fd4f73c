//! conform against the kit fixtures (`tests/fixtures/tools/kit/`): tiny tools that each break
//! one check of the spec's conformance kit. Each must fail the scenario meant for its check,
//! and the fixture without a fault must pass every kit scenario, so a kit scenario that stops
//! looking (or starts failing honest tools) is caught here.
//!
//! Three faults are subtler than a wrong exit code, and each has its scenario: `dry-run-acts`
//! (a preview that deletes) is caught by `dry-run-changes-nothing`, `help-on-stdout` by
//! `help-keeps-stdout-clean` (REQ-F-048), and `refuses-with-4` by
//! `destructive-refuses-unconfirmed`, which asks for ARG_ERROR 2 as REQ-O-021 and the spec kit
//! do.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use rstest::rstest;

use crate::support::{code, conform, status_of, stdout_json};

/// Every scenario tagged `kit` in the catalogue.
const KIT_SCENARIOS: &[&str] = &[
    "read-probes-end-with-stdin-closed",
    "read-probes-end-with-stdin-open",
    "read-probes-keep-ansi-off-stdout",
    "no-color-is-honoured",
    "invalid-probes-are-arg-errors",
    "dry-run-previews",
    "destructive-refuses-unconfirmed",
    "help-keeps-stdout-clean",
    "dry-run-changes-nothing",
    "read-probes-answer-one-envelope",
    "probe-exits-are-standard-codes",
];

fn kit_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tools/kit")
}

/// `conform run <fixture> --profile kit/conform.toml --format json <args>`: exit and report.
fn run_kit(fixture: &str, args: &[&str]) -> (i32, serde_json::Value) {
    let cwd = tempfile::tempdir().unwrap();
    let out = conform()
        .arg("run")
        .arg(kit_dir().join(fixture))
        .arg("--profile")
        .arg(kit_dir().join("conform.toml"))
        .args(["--format", "json"])
        .args(args)
        .current_dir(cwd.path())
        .output()
        .unwrap();
    (code(&out), stdout_json(&out))
}

/// The fixture run directly in a fresh home, stdin closed.
fn fixture(name: &str, home: &Path, args: &[&str]) -> Output {
    Command::new(kit_dir().join(name))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn the_fixture_without_a_fault_passes_every_kit_scenario() {
    let (exit, report) = run_kit("good", &["--only", "kit", "-j", "4"]);
    assert_eq!(exit, 0, "{report:#}");
    for id in KIT_SCENARIOS {
        assert_eq!(status_of(&report, id), "pass", "{id}: {report:#}");
    }
    let ran = report["data"]["scenarios"].as_array().unwrap();
    assert_eq!(ran.len(), KIT_SCENARIOS.len(), "a kit scenario is missing from this list");
}

/// Each fault fails the scenario meant for it; where named, a neighbouring scenario still
/// passes, so the failure is the fault's and not a broken fixture's.
#[rstest]
#[case::pager_on_open_stdin(
    "pager-on-open-stdin",
    "read-probes-end-with-stdin-open",
    Some("read-probes-end-with-stdin-closed")
)]
#[case::prompt_on_closed_stdin("prompt-on-closed-stdin", "read-probes-end-with-stdin-closed", None)]
#[case::ansi_stdout("ansi-stdout", "read-probes-keep-ansi-off-stdout", None)]
#[case::no_color_ignored(
    "no-color-ignored",
    "no-color-is-honoured",
    Some("read-probes-keep-ansi-off-stdout")
)]
#[case::invalid_exits_1("invalid-exits-1", "invalid-probes-are-arg-errors", None)]
#[case::destructive_unconfirmed(
    "destructive-unconfirmed",
    "destructive-refuses-unconfirmed",
    Some("dry-run-previews")
)]
#[case::two_documents(
    "two-documents",
    "read-probes-answer-one-envelope",
    Some("read-probes-end-with-stdin-closed")
)]
#[case::exits_127_on_invalid(
    "exits-127-on-invalid",
    "probe-exits-are-standard-codes",
    Some("read-probes-answer-one-envelope")
)]
fn each_fault_fails_the_scenario_of_its_kit_check(
    #[case] name: &str,
    #[case] fails: &str,
    #[case] still_passes: Option<&str>,
) {
    let mut args = vec!["--only", fails, "-j", "2"];
    if let Some(other) = still_passes {
        args.extend(["--only", other]);
    }
    let (exit, report) = run_kit(name, &args);
    assert_eq!(exit, 80, "{name}: NOT_CONFORMANT expected: {report:#}");
    assert_eq!(status_of(&report, fails), "fail", "{name}: {report:#}");
    if let Some(other) = still_passes {
        assert_eq!(status_of(&report, other), "pass", "{name}: {other}: {report:#}");
    }
}

#[test]
fn the_dry_run_of_dry_run_acts_really_deletes() {
    let home = tempfile::tempdir().unwrap();
    let first = stdout_json(&fixture("dry-run-acts", home.path(), &["purge", "--dry-run"]));
    assert_eq!(first["ok"], true, "it looks like an honest preview: {first}");
    assert_eq!(first["data"]["would_delete"].as_array().unwrap().len(), 3);
    let second = stdout_json(&fixture("dry-run-acts", home.path(), &["purge", "--dry-run"]));
    assert_eq!(second["data"]["would_delete"], serde_json::json!([]), "the first preview acted");
    // The honest fixture previews the same thing twice.
    let home = tempfile::tempdir().unwrap();
    let a = stdout_json(&fixture("good", home.path(), &["purge", "--dry-run"]));
    let b = stdout_json(&fixture("good", home.path(), &["purge", "--dry-run"]));
    assert_eq!(a["data"], b["data"]);
}

#[test]
fn a_dry_run_that_acts_fails_a_kit_scenario() {
    let (exit, report) = run_kit("dry-run-acts", &["--only", "safety"]);
    assert_eq!(exit, 80, "{report:#}");
    assert_eq!(status_of(&report, "dry-run-changes-nothing"), "fail", "{report:#}");
}

#[test]
fn help_on_stdout_is_a_real_fault_and_fails_its_scenario_once_there_is_one() {
    let home = tempfile::tempdir().unwrap();
    let bad = fixture("help-on-stdout", home.path(), &["--help"]);
    assert_eq!(bad.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&bad.stdout).contains("usage:"), "{bad:?}");
    let good = fixture("good", home.path(), &["--help"]);
    assert_eq!(good.status.code(), Some(0));
    assert!(good.stdout.is_empty() && String::from_utf8_lossy(&good.stderr).contains("usage:"));

    let cwd = tempfile::tempdir().unwrap();
    let list = conform().args(["list", "--format", "json"]).current_dir(cwd.path()).output();
    let list = stdout_json(&list.unwrap());
    let help_scenarios: Vec<&str> = list["data"]["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["requirement"] == "REQ-F-048")
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert!(!help_scenarios.is_empty(), "REQ-F-048 has no scenario");
    for id in help_scenarios {
        let (_, report) = run_kit("help-on-stdout", &["--only", id]);
        assert_eq!(status_of(&report, id), "fail", "{id}: {report:#}");
        let (_, report) = run_kit("good", &["--only", id]);
        assert_eq!(status_of(&report, id), "pass", "{id}: {report:#}");
    }
}

#[test]
fn refuses_with_4_refuses_without_acting_but_not_with_arg_error() {
    let home = tempfile::tempdir().unwrap();
    let refused = fixture("refuses-with-4", home.path(), &["purge"]);
    assert_eq!(refused.status.code(), Some(4));
    assert_eq!(stdout_json(&refused)["error"]["code"], "CONFIRMATION_REQUIRED");
    let preview = stdout_json(&fixture("refuses-with-4", home.path(), &["purge", "--dry-run"]));
    assert_eq!(preview["data"]["would_delete"].as_array().unwrap().len(), 3, "nothing deleted");
}

#[test]
fn a_refusal_with_another_exit_than_2_fails_the_kit_scenario() {
    let (exit, report) = run_kit("refuses-with-4", &["--only", "destructive-refuses-unconfirmed"]);
    assert_eq!(exit, 80, "{report:#}");
    assert_eq!(status_of(&report, "destructive-refuses-unconfirmed"), "fail", "{report:#}");
}
