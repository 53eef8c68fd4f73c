//! Snapshots recorded on one machine compare equal on another: reftool copied to one path and
//! run from one working directory records them, a copy at another path (one that needs
//! quoting) run from elsewhere compares clean, and a faulty reftool still drifts.

// The helpers are test code outside a #[test]: a failed unwrap is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use conform_workspace::{workspace_bin, workspace_root};
use reftool_faults::{FAULT_ENV, Fault};
use serde_json::Value;

use crate::fixtures_paths::absolute_fixtures;

/// Quick scenarios whose responses name the tool's path (`continue_command`, `cancel_command`)
/// and the sandbox's.
const SCENARIOS: [&str; 3] =
    ["detach-hands-off-running", "paused-continue-is-the-original-invocation", "dry-run-previews"];

/// reftool's profile, with absolute fixture paths and, when given, a fault in `[tool] env`.
fn profile_in(dir: &Path, fault: Option<Fault>) -> PathBuf {
    let original = workspace_root().join("reference-tool/conform.toml");
    let mut profile: toml::Table =
        toml::from_str(&std::fs::read_to_string(&original).unwrap()).unwrap();
    absolute_fixtures(&mut profile, original.parent().unwrap());
    if let Some(fault) = fault {
        let tool = profile.entry("tool").or_insert_with(|| toml::Table::new().into());
        let env =
            tool.as_table_mut().unwrap().entry("env").or_insert_with(|| toml::Table::new().into());
        env.as_table_mut().unwrap().insert(FAULT_ENV.into(), fault.name().into());
    }
    let path = dir.join("conform.toml");
    std::fs::write(&path, toml::to_string(&profile).unwrap()).unwrap();
    path
}

/// A copy of the workspace's binary `built` at `dir/<sub>/reftool`.
fn reftool_at(dir: &Path, sub: &str, built: &str) -> PathBuf {
    let bin = dir.join(sub);
    std::fs::create_dir_all(&bin).unwrap();
    let copy = bin.join("reftool");
    std::fs::copy(workspace_bin(built), &copy).unwrap();
    copy
}

/// `conform run TOOL --snapshots SNAPS` from `cwd`, the tool named relative to `cwd`.
fn run(cwd: &Path, tool: &Path, profile: &Path, snaps: &Path, update: bool) -> (i32, Value) {
    let relative = tool.strip_prefix(cwd).unwrap();
    let mut command = Command::new(workspace_bin("conform"));
    command.current_dir(cwd).arg("run").arg(relative).arg("--profile").arg(profile);
    for id in SCENARIOS {
        command.args(["--only", id]);
    }
    command.args(["--format", "json", "-j", "3", "--snapshots"]).arg(snaps);
    if update {
        command.arg("--update");
    }
    let out = command.output().unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), report)
}

fn findings<'a>(report: &'a Value, check: &str) -> Vec<&'a Value> {
    report["data"]["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["findings"].as_array().unwrap())
        .filter(|f| f["check"] == check)
        .collect()
}

fn snapshot_files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(snapshot_files(&path));
        } else {
            out.push((path.clone(), std::fs::read_to_string(&path).unwrap()));
        }
    }
    out.sort();
    out
}

/// Out of the edit lane (`.config/nextest.toml`): each takes ten seconds or more.
mod heavy {
    use super::*;

    #[test]
    fn snapshots_recorded_anywhere_compare_equal_on_another_machine_and_a_fault_still_drifts() {
        let here = tempfile::tempdir().unwrap();
        let there = tempfile::tempdir().unwrap();
        let snaps = here.path().join("snaps");
        let profile = profile_in(here.path(), None);

        // Recorded with reftool at one path, from one working directory.
        let first = reftool_at(here.path(), "tools", "reftool");
        let (code, report) = run(here.path(), &first, &profile, &snaps, true);
        assert_eq!(code, 0, "{report:#}");
        let files = snapshot_files(&snaps);
        assert!(files.len() >= SCENARIOS.len(), "{files:#?}");
        let all: String = files.iter().map(|(_, text)| text.as_str()).collect();
        // No path of this machine is left in them; the tool is named by its placeholder.
        for machine in [here.path(), &first, &std::env::current_dir().unwrap()] {
            assert!(!all.contains(machine.to_str().unwrap()), "{} in {all}", machine.display());
        }
        assert!(all.contains("[TOOL] job wait"), "{all}");

        // Compared with a copy elsewhere (a directory that needs quoting), from another directory.
        let second = reftool_at(there.path(), "other bin's", "reftool");
        let (code, report) = run(there.path(), &second, &profile, &snaps, false);
        assert_eq!(code, 0, "portable snapshots must not drift: {report:#}");
        assert!(findings(&report, "snapshot-drift").is_empty());
        assert_eq!(snapshot_files(&snaps), files, "a clean compare writes nothing");

        // A fault that changes what the tool answers still drifts.
        let fault = Fault::RunningContinueWithExtraFlag;
        let faulty = reftool_at(there.path(), "faulty bin", "reftool-faulty");
        let fault_profile = profile_in(there.path(), Some(fault));
        let (code, report) = run(there.path(), &faulty, &fault_profile, &snaps, false);
        assert_eq!(code, 80, "{report:#}");
        let drift = findings(&report, "snapshot-drift");
        assert!(!drift.is_empty(), "{} drifted nowhere: {report:#}", fault.name());
        assert!(drift.iter().any(|f| f["step"] == "call"), "{drift:#?}");
    }
}
