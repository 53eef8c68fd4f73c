//! `conform campaign` end to end (issue 26): a campaign on the faulty reftool finds a
//! narrow-window fault, shrinks it and keeps it as a scenario file; that scenario fails `conform
//! run` on the faulty tool and passes on the correct one. A fault of milliseconds fails its kept
//! scenario only as often as it reproduces: the kept scenario asks for several attempts, and
//! the correct tool must pass every one.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use conform_workspace::{workspace_bin, workspace_root};
use reftool_faults::{FAULT_ENV, Fault};

/// reftool's profile, with `fault` in `[tool.env]` when given and absolute fixture paths,
/// written into `dir`.
fn profile(dir: &Path, fault: Option<Fault>) -> PathBuf {
    let reference = workspace_root().join("reference-tool");
    let mut text =
        std::fs::read_to_string(reference.join("conform.toml")).expect("reftool's profile");
    if let Some(fault) = fault {
        let line = format!("[tool.env]\n{FAULT_ENV} = \"{}\"\n", fault.name());
        text = text.replace("[tool.env]\n", &line);
        assert!(text.contains(&line), "reftool's profile has no [tool.env] table");
    }
    let mut table: toml::Table = toml::from_str(&text).expect("reftool's profile is TOML");
    crate::fixtures_paths::absolute_fixtures(&mut table, &reference);
    let name = fault.map_or("correct.toml".to_owned(), |f| format!("{}.toml", f.name()));
    let path = dir.join(name);
    let text = toml::to_string(&table).expect("a TOML table");
    std::fs::write(&path, text).expect("the profile's copy");
    path
}

fn conform(dir: &Path, args: &[&str]) -> Output {
    Command::new(workspace_bin("conform"))
        .args(args)
        .current_dir(dir)
        .env_remove(FAULT_ENV)
        .output()
        .expect("conform runs")
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Whole campaigns and conform runs: the edit lane leaves them out.
mod heavy {
    use super::*;

    #[test]
    fn a_kept_failure_fails_the_faulty_tool_and_passes_the_correct_one() {
        let dir = tempfile::tempdir().unwrap();
        let fault = Fault::IdentityCheckThenCreate;
        let faulty_profile = profile(dir.path(), Some(fault));
        let correct_profile = profile(dir.path(), None);
        let kept = dir.path().join("kept");
        let faulty = workspace_bin("reftool-faulty");
        let reftool = workspace_bin("reftool");
        let out = conform(
            dir.path(),
            &[
                "campaign",
                faulty.to_str().unwrap(),
                "--profile",
                faulty_profile.to_str().unwrap(),
                "--role",
                "detach",
                "--seed",
                "26",
                "--minutes",
                "2",
                "--format",
                "json",
                "--save-failures",
                kept.to_str().unwrap(),
            ],
        );
        let report = json(&out);
        assert_eq!(out.status.code(), Some(80), "{report:#}");
        let failure = &report["data"]["failures"][0];
        assert_eq!(failure["invariant"], "one-job", "{failure:#}");
        assert!(failure["minimal"]["events"].as_array().unwrap().len() <= 3, "{failure:#}");
        let scenario = PathBuf::from(failure["scenario_file"].as_str().unwrap());
        assert!(scenario.is_file(), "{failure:#}");
        let id = scenario.file_stem().unwrap().to_str().unwrap().to_owned();
        let run = |tool: &Path, profile: &Path| {
            conform(
                dir.path(),
                &[
                    "run",
                    tool.to_str().unwrap(),
                    "--profile",
                    profile.to_str().unwrap(),
                    "--scenarios",
                    kept.to_str().unwrap(),
                    "--only",
                    &id,
                    "--format",
                    "json",
                ],
            )
        };
        // The kept scenario asks for as many attempts as the rate the campaign measured
        // needs, so that a red stays red; a campaign on a loaded machine may measure a rate a
        // later run under other load does not meet, so the faulty tool gets a few runs.
        let text = std::fs::read_to_string(&scenario).unwrap();
        assert!(text.contains("\nattempts = "), "{text}");
        let failed =
            (0..3).map(|_| run(&faulty, &faulty_profile)).find(|o| o.status.code() == Some(80));
        let failed =
            failed.unwrap_or_else(|| panic!("the kept scenario never failed on {fault:?}: {text}"));
        let result = &json(&failed)["data"]["scenarios"][0];
        assert_eq!(result["id"], id.as_str());
        assert!(result.get("first_run").is_none(), "no run alone turns it green: {result:#}");
        // The correct tool passes every attempt.
        let out = run(&reftool, &correct_profile);
        let report = json(&out);
        assert_eq!(out.status.code(), Some(0), "{report:#}");
        let notes = report["data"]["scenarios"][0]["notes"].to_string();
        assert!(notes.contains("passed all"), "{notes}");
    }
}
