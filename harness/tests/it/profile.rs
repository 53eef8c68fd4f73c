//! Profiles: a good one loads and validates against `schemas/profile.json`; a bad one is an
//! ARG_ERROR (2) with file, line and column, and nothing runs.

use std::path::Path;

use conform::profile::Profile;
use rstest::rstest;

use crate::support::{code, conform, errors, stdout_json, validator};

const GOOD: &str = r#"
[tool]
env = { PACE = "10" }
instance_env = "TOOL_INSTANCE_ID"

[roles.detach]
argv = ["analyze", "data.csv"]
fixtures = ["data.csv"]
setup = ["true"]

[roles.resume_writer]
argv = ["import", "data.csv", "--db", "x.db"]
env = { DB = "x.db" }
stdin = "closed"

[kit]
read = [["version"]]
invalid = [["analyze", "--no-such-flag"]]
destructive = [{ argv = ["drop", "all"], dry_run_flag = "--dry-run" }]
"#;

fn in_dir(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data.csv"), "a,b\n1,2\n").unwrap();
    let path = dir.path().join("conform.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn toml_json(text: &str) -> serde_json::Value {
    serde_json::to_value(toml::from_str::<toml::Value>(text).unwrap()).unwrap()
}

#[test]
fn a_good_profile_loads_and_validates() {
    let (_dir, path) = in_dir(GOOD);
    let profile = Profile::load(&path).unwrap();
    assert_eq!(profile.role("detach").unwrap().argv, ["analyze", "data.csv"]);
    assert!(profile.role("async").is_none());
    assert!(profile.selects_instances());
    assert!(errors(&validator("profile.json"), &toml_json(GOOD)).is_empty());
}

#[rstest]
#[case::unknown_role("[roles.detach]", "[roles.detached]", Some(6), true)]
#[case::unknown_key("setup = [\"true\"]", "setup = [\"true\"]\nsetpu = []", Some(10), true)]
#[case::empty_argv("argv = [\"analyze\", \"data.csv\"]", "argv = []", Some(6), true)]
#[case::missing_fixture("fixtures = [\"data.csv\"]", "fixtures = [\"nope.csv\"]", Some(8), false)]
#[case::stdin_twice("stdin = \"closed\"", "stdin = \"closed\"\nstdin_text = \"x\"", Some(11), true)]
#[case::bad_stdin("stdin = \"closed\"", "stdin = \"maybe\"", Some(14), true)]
#[case::bad_env_name("PACE = \"10\"", "\"BAD NAME\" = \"10\"", Some(3), true)]
#[case::confirming_probe("[\"drop\", \"all\"]", "[\"drop\", \"all\", \"--yes\"]", Some(19), false)]
#[case::probe_without_preview(", dry_run_flag = \"--dry-run\"", "", Some(19), true)]
fn a_bad_profile_is_refused_with_its_place(
    #[case] from: &str,
    #[case] to: &str,
    #[case] line: Option<usize>,
    #[case] schema_too: bool,
) {
    assert!(GOOD.contains(from));
    let text = GOOD.replacen(from, to, 1);
    let (_dir, path) = in_dir(&text);
    let err = Profile::load(&path).unwrap_err();
    assert_eq!(err.location.map(|(l, _)| l), line, "{err}");
    assert!(err.to_string().contains("conform.toml:"), "{err}");
    if schema_too && let Ok(v) = toml::from_str::<toml::Value>(&text) {
        let errs = errors(&validator("profile.json"), &serde_json::to_value(v).unwrap());
        assert!(!errs.is_empty(), "the schema accepted:\n{text}");
    }
}

/// A tool that leaves a mark when it runs at all.
fn marking_tool(dir: &Path) -> std::path::PathBuf {
    let tool = dir.join("tool");
    let mark = dir.join("ran");
    std::fs::write(&tool, format!("#!/bin/sh\ntouch '{}'\nexit 0\n", mark.display())).unwrap();
    let mut perms = std::fs::metadata(&tool).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&tool, perms).unwrap();
    tool
}

#[test]
fn an_invalid_profile_is_arg_error_and_nothing_runs() {
    let (dir, path) = in_dir(&GOOD.replacen("[roles.detach]", "[roles.detachh]", 1));
    let tool = marking_tool(dir.path());
    let out = conform().arg("run").arg(&tool).arg("--profile").arg(&path).output().unwrap();
    assert_eq!(code(&out), 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("conform.toml:6:"), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(!dir.path().join("ran").exists(), "the tool ran");

    let out = conform()
        .arg("run")
        .arg(&tool)
        .arg("--profile")
        .arg(&path)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    let envelope = stdout_json(&out);
    assert_eq!(envelope["error"]["code"], "ARG_ERROR");
    assert_eq!(envelope["meta"]["exit_code"], 2);
    assert!(envelope["error"]["message"].as_str().unwrap().contains("conform.toml:6:"));
    assert!(errors(&validator("response-envelope.json"), &envelope).is_empty());
    assert!(!dir.path().join("ran").exists(), "the tool ran");
}

#[test]
fn conform_toml_in_the_working_directory_is_read() {
    let (dir, _path) = in_dir(&GOOD.replacen("[roles.detach]", "[roles.nope]", 1));
    let tool = marking_tool(dir.path());
    let out = conform().current_dir(dir.path()).arg("run").arg(&tool).output().unwrap();
    assert_eq!(code(&out), 2, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!dir.path().join("ran").exists(), "the tool ran");
}
