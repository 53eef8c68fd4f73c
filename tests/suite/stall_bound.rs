//! A stalled job is judged within about twice its idle timeout: a tool whose idle watchdog
//! never fires (the faulty reftool's `watchdog-off`) answers `job wait` with 14 every couple of
//! seconds for ever, and the continue loop of `stalled-job-times-out` is bounded as a whole
//! (twice the declared `idle_timeout_ms`, plus the start-up and the slack), not hop by hop:
//! a conform of an earlier wave took 24.5 minutes and 732 waits to fail such a tool.

use std::time::{Duration, Instant};

use conform_workspace::{workspace_bin, workspace_root};
use reftool_faults::{FAULT_ENV, Fault};

/// Out of the edit lane (`.config/nextest.toml`): each takes ten seconds or more.
mod heavy {
    use super::*;

    #[test]
    fn a_stall_without_a_watchdog_is_judged_within_about_two_idle_timeouts() {
        let dir = tempfile::tempdir().unwrap();
        let reference = workspace_root().join("reference-tool");
        let text = std::fs::read_to_string(reference.join("conform.toml")).unwrap();
        let fault = format!("[tool.env]\n{FAULT_ENV} = \"{}\"\n", Fault::WatchdogOff.name());
        let faulty = text.replace("[tool.env]\n", &fault);
        assert!(faulty.contains(&fault), "reftool's profile has no [tool.env] table");
        let mut table: toml::Table = toml::from_str(&faulty).unwrap();
        crate::fixtures_paths::absolute_fixtures(&mut table, &reference);
        let profile = dir.path().join("conform.toml");
        std::fs::write(&profile, toml::to_string(&table).unwrap()).unwrap();
        let started = Instant::now();
        let out = std::process::Command::new(workspace_bin("conform"))
            .arg("run")
            .arg(workspace_bin("reftool-faulty"))
            .arg("--profile")
            .arg(&profile)
            .args(["--only", "stalled-job-times-out", "--format", "json"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        let took = started.elapsed();
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(out.status.code(), Some(80), "{report:#}");
        let scenario = &report["data"]["scenarios"][0];
        assert_eq!(scenario["findings"][0]["check"], "continue-loop", "{scenario:#}");
        // The profile's stalling role declares 2 s: the loop's bound is about 5.5 s; each of the
        // two runs (the first, and the one alone that confirms it) with its clean-up stays well
        // under a minute.
        assert!(took < Duration::from_secs(90), "took {took:?}: {report:#}");
        for run in [scenario, &scenario["first_run"]] {
            let ms = run["duration_ms"].as_u64().unwrap();
            assert!(ms < 45_000, "a run took {ms} ms: {scenario:#}");
        }
    }
}
