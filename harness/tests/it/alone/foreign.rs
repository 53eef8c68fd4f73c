//! conform on a tool unlike reftool: `tests/fixtures/tools/foreign/notes`, a CLI that behaves as
//! one built with another framework (schema 3.19, signal exits in every command's exit codes,
//! `--timeout` in seconds, a 2 s SIGINT grace, a slow start-up, bare-name job commands, no
//! interruption). Every one of those is a legal choice; its one true defect is `job status`
//! exiting 3 for a running job (REQ-C-022 says 14). conform must report exactly that, with a
//! message that says what to fix, and call §79 not applicable: no command declares interruption.

use std::path::{Path, PathBuf};

use crate::support::{code, conform, stdout_json};

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tools/foreign")
}

#[test]
fn a_foreign_framework_gets_exactly_its_true_defect() {
    let dir = fixture_dir();
    // Its job commands name the program by its bare name, as an installed tool's would.
    let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
    let cwd = tempfile::tempdir().unwrap();
    let out = conform()
        .current_dir(cwd.path())
        .env("PATH", path)
        .arg("run")
        .arg("--profile")
        .arg(dir.join("conform.toml"))
        .args(["--format", "json", "-j", "2"])
        .output()
        .unwrap();
    let report = stdout_json(&out);
    assert_eq!(code(&out), 80, "{report:#}");
    let scenarios = report["data"]["scenarios"].as_array().unwrap();
    let failed: Vec<&str> = scenarios
        .iter()
        .filter(|s| s["status"] == "fail" || s["status"] == "error")
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["async-job-status-exits-14"], "{report:#}");
    let defect = scenarios.iter().find(|s| s["id"] == "async-job-status-exits-14").unwrap();
    let first = &defect["findings"][0];
    assert_eq!(first["check"], "exit-code", "{defect:#}");
    assert_eq!(first["message"], "exit 3, expected exit 14", "{defect:#}");
    // The legal choices are judged, not skipped: each of these ran and passed.
    for id in [
        "manifest-valid",
        "plain-command-times-out-honestly",
        "sigint-cancels-with-130",
        "async-returns-a-job-descriptor",
        "repeat-with-key-is-a-noop",
        "read-probes-answer-one-envelope",
        "invalid-probes-are-arg-errors",
        "destructive-refuses-unconfirmed",
    ] {
        let s = scenarios.iter().find(|s| s["id"] == id).unwrap();
        assert_eq!(s["status"], "pass", "{s:#}");
    }
    // §79 governs declarations this tool never makes: nothing to claim, and nothing to fill in.
    let claims = report["data"]["claims"].as_array().unwrap();
    let claim = |id: &str| claims.iter().find(|c| c["claim"] == id).unwrap();
    let interruption = claim("interruption");
    assert_eq!(interruption["verdict"], "not-applicable", "{interruption:#}");
    assert_eq!(
        interruption["reasons"],
        serde_json::json!(["no command of the manifest declares `interruption`"])
    );
    // The defect is REQ-C-022's, a Level 2 requirement; Level 1 holds.
    assert_eq!(claim("level-1")["verdict"], "pass", "{:#}", report["data"]["claims"]);
    assert_eq!(claim("level-2")["verdict"], "fail", "{:#}", report["data"]["claims"]);
    let detach = scenarios.iter().find(|s| s["id"] == "detach-hands-off-running").unwrap();
    let reason = detach["reason"].as_str().unwrap_or("");
    assert!(
        reason.starts_with("not applicable: no command of the manifest declares"),
        "{detach:#}"
    );
}
