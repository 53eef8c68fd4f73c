//! `lifetime-bounds-the-work-without-timeout` waits out the `max_lifetime_ms` the
//! `short_lifetime` role's command declares. Without that role, or with a lifetime too long to
//! wait for, it is skipped without holding the gate (the spec asks no tool for a setting that
//! shortens its lifetime, so a tool without one is neither failed nor left at 82 UNJUDGED); a
//! tool that ignores its lifetime with work longer than conform's limit fails, never skips for
//! running on.

#![allow(clippy::unwrap_used)]

use conform_workspace::{workspace_bin, workspace_root};
use reftool_faults::{FAULT_ENV, Fault};

const SCENARIO: &str = "lifetime-bounds-the-work-without-timeout";

/// reftool's profile, edited by `edit` (its `short_lifetime` role as a table), in `dir`.
fn profile_with(dir: &std::path::Path, edit: impl FnOnce(&mut toml::Table)) -> std::path::PathBuf {
    let reference = workspace_root().join("reference-tool");
    let text = std::fs::read_to_string(reference.join("conform.toml")).unwrap();
    let mut table: toml::Table = toml::from_str(&text).unwrap();
    crate::fixtures_paths::absolute_fixtures(&mut table, &reference);
    edit(&mut table);
    let profile = dir.join("conform.toml");
    std::fs::write(&profile, toml::to_string(&table).unwrap()).unwrap();
    profile
}

/// The `short_lifetime` role of a profile table.
fn role(table: &mut toml::Table) -> &mut toml::Table {
    let roles = table.get_mut("roles").and_then(toml::Value::as_table_mut).unwrap();
    roles.get_mut("short_lifetime").and_then(toml::Value::as_table_mut).unwrap()
}

/// Sets a variable of the role's environment.
fn set_env(table: &mut toml::Table, name: &str, value: &str) {
    let env = role(table).get_mut("env").and_then(toml::Value::as_table_mut).unwrap();
    env.insert(name.to_owned(), value.into());
}

/// conform's exit code and JSON report for the scenario against `tool` with `profile`.
fn run(tool: &str, profile: &std::path::Path) -> (Option<i32>, serde_json::Value) {
    let out = std::process::Command::new(workspace_bin("conform"))
        .arg("run")
        .arg(workspace_bin(tool))
        .arg("--profile")
        .arg(profile)
        .args(["--only", SCENARIO, "--format", "json"])
        .current_dir(profile.parent().unwrap())
        .output()
        .unwrap();
    (out.status.code(), serde_json::from_slice(&out.stdout).unwrap())
}

/// Asserts a skip that names `words` and leaves the run green and the must off the unjudged.
fn assert_skipped_without_the_gate(code: Option<i32>, report: &serde_json::Value, words: &str) {
    let scenario = &report["data"]["scenarios"][0];
    assert_eq!(scenario["status"], "skip", "{scenario:#}");
    let reason = scenario["reason"].as_str().unwrap();
    assert!(reason.contains(words), "{reason}");
    assert!(reason.contains("does not hold the gate"), "{reason}");
    assert_eq!(code, Some(0), "{report:#}");
    let unjudged = &report["data"]["coverage"]["unjudged_musts"];
    assert!(unjudged.as_array().is_none_or(|u| !u.iter().any(|s| s == SCENARIO)), "{report:#}");
}

#[test]
fn without_the_role_the_lifetime_is_skipped_without_holding_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let profile = profile_with(dir.path(), |table| {
        let roles = table.get_mut("roles").and_then(toml::Value::as_table_mut).unwrap();
        roles.remove("short_lifetime").unwrap();
    });
    let (code, report) = run("reftool", &profile);
    assert_skipped_without_the_gate(code, &report, "names no `short_lifetime` role");
}

#[test]
fn a_lifetime_over_a_minute_is_skipped_without_holding_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let profile =
        profile_with(dir.path(), |table| set_env(table, "REFTOOL_MAX_LIFETIME_MS", "90000"));
    let (code, report) = run("reftool", &profile);
    assert_skipped_without_the_gate(code, &report, "of 90000 ms");
}

mod heavy {
    use super::*;

    /// Work of about two minutes under a lifetime of 2 s that the tool ignores: conform kills
    /// the call at its limit, and that kill is no legal miss of the premise (the call lasted
    /// at least the lifetime), so the scenario fails instead of being skipped.
    #[test]
    fn work_that_runs_past_the_limit_fails_and_is_not_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let profile = profile_with(dir.path(), |table| {
            set_env(table, FAULT_ENV, Fault::LifetimeIgnored.name());
            set_env(table, "REFTOOL_PACE_MS", "5000");
        });
        let (code, report) = run("reftool-faulty", &profile);
        assert_eq!(code, Some(80), "{report:#}");
        let scenario = &report["data"]["scenarios"][0];
        let checks: Vec<&str> = scenario["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|f| f["check"].as_str())
            .collect();
        assert!(checks.contains(&"timeout"), "{scenario:#}");
    }
}
