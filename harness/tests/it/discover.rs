//! The static registration rules of docs/contract.md §2, each shown failing on a manifest that breaks
//! it and passing on one that keeps it, bare or wrapped in an envelope.

use conform::checks::check_rule;
use conform::discover::Commands;
use conform::scenario::ManifestRule;
use rstest::rstest;
use serde_json::{Value, json};

fn good() -> Value {
    json!({
        "schema_version": "3.20",
        "framework_version": "1.0.0",
        "etag": "sha256:abc",
        "exit_codes": {
            "130": { "description": "cancelled by SIGINT", "retryable": false, "side_effects": "partial" }
        },
        "commands": {
            "analyze": {
                "description": "d", "danger_level": "safe", "required_scopes": [],
                "interruption": { "detach": true, "resume": true },
                "flags": { "budget": { "type": "string", "required": false, "description": "b" } },
                "exit_codes": {
                    "0": { "description": "ok", "retryable": false, "side_effects": "complete" },
                    "14": { "description": "inc", "retryable": true, "side_effects": "none" }
                }
            },
            "import": {
                "description": "d", "danger_level": "mutating", "required_scopes": [],
                "interruption": { "detach": false, "resume": true },
                "flags": {
                    "budget": { "type": "string", "required": false, "description": "b" },
                    "idempotency-key": { "type": "string", "required": false, "description": "k" }
                },
                "exit_codes": {
                    "14": { "description": "inc", "retryable": false, "side_effects": "partial" }
                }
            },
            "migrate": {
                "description": "d", "danger_level": "mutating", "required_scopes": [],
                "flags": {}, "exit_codes": {}
            },
            "job.wait": {
                "description": "d", "danger_level": "safe", "required_scopes": [],
                "flags": { "budget": { "type": "string", "required": false, "description": "b" } },
                "exit_codes": {}
            }
        }
    })
}

fn break_it(rule: ManifestRule) -> Value {
    let mut m = good();
    let c = &mut m["commands"];
    match rule {
        ManifestRule::DetachOrResume => {
            c["analyze"]["interruption"] = json!({ "detach": false, "resume": false });
        }
        ManifestRule::IncompleteEntry => {
            c["analyze"]["exit_codes"].as_object_mut().unwrap().remove("14");
        }
        ManifestRule::IncompleteEntryShape => {
            c["import"]["exit_codes"]["14"] =
                json!({ "description": "inc", "retryable": true, "side_effects": "none" });
        }
        ManifestRule::NotAsyncOrStreaming => c["analyze"]["async"] = json!(true),
        ManifestRule::ResumableWriterHasKey => {
            c["import"]["flags"].as_object_mut().unwrap().remove("idempotency-key");
        }
        ManifestRule::BudgetFlagOnlyWhenInterruptible => {
            c["migrate"]["flags"]["budget"] =
                json!({ "type": "string", "required": false, "description": "b" });
        }
        ManifestRule::SigintExitEntry => {
            // The root table's entry goes; every command but `migrate` declares its own.
            let entry = m["exit_codes"].as_object_mut().unwrap().remove("130").unwrap();
            for command in ["analyze", "import", "job.wait"] {
                m["commands"][command]["exit_codes"]["130"] = entry.clone();
            }
        }
    }
    m
}

#[test]
fn a_good_manifest_keeps_every_rule_bare_and_wrapped() {
    let wrapped = json!({ "ok": true, "data": good(), "error": null, "warnings": [], "meta": { "exit_code": 0, "duration_ms": 1 } });
    for rule in ManifestRule::ALL {
        assert_eq!(check_rule(rule, &good()), vec![], "{rule:?}");
        assert_eq!(check_rule(rule, &wrapped), vec![], "{rule:?} (wrapped)");
    }
}

#[rstest]
#[case(ManifestRule::DetachOrResume, "analyze")]
#[case(ManifestRule::IncompleteEntry, "analyze")]
#[case(ManifestRule::IncompleteEntryShape, "import")]
#[case(ManifestRule::NotAsyncOrStreaming, "analyze")]
#[case(ManifestRule::ResumableWriterHasKey, "import")]
#[case(ManifestRule::BudgetFlagOnlyWhenInterruptible, "migrate")]
#[case(ManifestRule::SigintExitEntry, "migrate")]
fn each_rule_catches_its_violation(#[case] rule: ManifestRule, #[case] command: &str) {
    let findings = check_rule(rule, &break_it(rule));
    assert_eq!(findings.len(), 1, "{rule:?}: {findings:?}");
    assert!(findings[0].message.contains(&format!("`{command}`")), "{}", findings[0]);
    assert!(findings[0].expected.is_some() && findings[0].actual.is_some());
    // Only the rule broken fails: the others still pass on the broken manifest.
    for other in ManifestRule::ALL.into_iter().filter(|r| *r != rule) {
        if rule == ManifestRule::IncompleteEntry && other == ManifestRule::IncompleteEntryShape {
            continue;
        }
        assert_eq!(
            check_rule(other, &break_it(rule)),
            vec![],
            "{other:?} on a manifest breaking {rule:?}"
        );
    }
}

#[test]
fn commands_are_found_by_their_longest_path() {
    let commands = Commands::from_manifest(&good());
    let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let (path, info) = commands.command_for_args(&args(&["job", "wait", "job_1"])).unwrap();
    assert_eq!(path, "job.wait");
    assert!(!info.writes());
    let (path, info) =
        commands.command_for_args(&args(&["import", "rows.csv", "--db", "x"])).unwrap();
    assert_eq!(path, "import");
    assert!(info.writes() && info.interruptible());
    assert!(commands.command_for_args(&args(&["--help"])).is_none());
}

/// One root cause, one headline: the tool's manifest command decides once what else can run.
mod one_headline {
    use std::path::Path;
    use std::time::{Duration, Instant};

    use crate::support::{code, conform, status_of, stdout_json, write_executable};

    fn hostile(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hostile").join(name)
    }

    fn reftool_profile() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../reference-tool/conform.toml")
    }

    fn scenarios(report: &serde_json::Value) -> &Vec<serde_json::Value> {
        report["data"]["scenarios"].as_array().unwrap()
    }

    fn run(tool: &Path, profile: Option<&Path>) -> (i32, serde_json::Value, Duration) {
        let cwd = tempfile::tempdir().unwrap();
        let mut cmd = conform();
        cmd.arg("run").arg(tool).args(["--format", "json", "-j", "8"]).current_dir(cwd.path());
        if let Some(p) = profile {
            cmd.arg("--profile").arg(p);
        }
        let started = Instant::now();
        let out = cmd.output().unwrap();
        (code(&out), stdout_json(&out), started.elapsed())
    }

    #[test]
    fn without_a_manifest_only_the_headline_judges_one() {
        // prose.sh answers every call in prose: no manifest, but the tool does run, so the
        // scenarios that do not judge the manifest still run.
        let (exit, report, _) = run(&hostile("prose.sh"), None);
        assert_eq!(exit, 80, "{report:#}");
        assert_eq!(status_of(&report, "manifest-valid"), "fail");
        for s in scenarios(&report) {
            let judges_manifest = s["tags"].as_array().unwrap().iter().any(|t| t == "manifest");
            if judges_manifest && s["id"] != "manifest-valid" {
                assert_eq!(s["status"], "skip", "{s:#}");
                assert!(s["reason"].as_str().unwrap().starts_with("no manifest to judge"), "{s:#}");
            }
        }
        assert_eq!(status_of(&report, "unknown-flag-is-arg-error"), "fail", "it still runs");
    }

    #[test]
    fn the_profile_names_the_manifest_command_everywhere() {
        // A tool whose manifest is `--schema`: with the profile saying so, the manifest
        // scenarios judge that command, not `manifest`.
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("schematool");
        let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tools/faketool");
        write_executable(
            &tool,
            format!(
                "#!/bin/sh\nif [ \"$1\" = --schema ]; then shift; exec {} manifest \"$@\"; fi\nexec {} \"$@\"\n",
                real.display(),
                real.display()
            ),
        );
        let profile = dir.path().join("conform.toml");
        std::fs::write(&profile, "[kit]\nmanifest = [\"--schema\"]\n").unwrap();
        let (_, report, _) = run(&tool, Some(&profile));
        for id in [
            "manifest-valid",
            "interruption-has-detach-or-resume",
            "incomplete-entry-matches-danger",
        ] {
            assert_eq!(status_of(&report, id), "pass", "{id}: {report:#}");
            let s = scenarios(&report).iter().find(|s| s["id"] == id).unwrap();
            let argv = s["evidence"][0]["repro"]["command"]["value"].as_array().unwrap();
            assert_eq!(argv[1], "--schema", "{s:#}");
        }
    }

    /// Waits out the hanging manifest's limit: out of the edit lane.
    mod heavy {
        use super::*;

        #[test]
        fn a_hanging_manifest_is_one_failure_and_nothing_else_runs() {
            // With a full profile, every role's calibration and setup would each wait out its
            // limit on a tool that never answers (over 15 minutes before the headline existed).
            let (exit, report, took) = run(&hostile("hang.sh"), Some(&reftool_profile()));
            assert_eq!(exit, 80, "{report:#}");
            assert!(took < Duration::from_secs(120), "a hanging tool held conform for {took:?}");
            let failed: Vec<&serde_json::Value> =
                scenarios(&report).iter().filter(|s| s["status"] == "fail").collect();
            assert_eq!(failed.len(), 1, "{report:#}");
            assert_eq!(failed[0]["id"], "manifest-valid");
            let finding = &failed[0]["findings"][0];
            assert_eq!(finding["check"], "timeout");
            assert!(finding["message"].as_str().unwrap().contains("did not answer"), "{finding:#}");
            assert_eq!(failed[0]["evidence"].as_array().unwrap().len(), 1, "its one run is shown");
            for s in scenarios(&report).iter().filter(|s| s["id"] != "manifest-valid") {
                assert_eq!(s["status"], "skip", "{s:#}");
                assert!(
                    s["reason"].as_str().unwrap().contains("`manifest-valid` reports it"),
                    "{s:#}"
                );
            }
        }
    }
}

/// Every command breaking a rule is one finding when alone; several are one finding that
/// counts them and names the first five.
#[test]
fn many_commands_breaking_one_rule_are_one_finding() {
    let mut commands = serde_json::Map::new();
    for i in 1..=45_000 {
        commands.insert(
            format!("w{i}"),
            json!({"danger_level": "mutating", "interruption": {"resume": true}}),
        );
    }
    let manifest = json!({"schema_version": "1.0", "commands": commands});
    let findings = check_rule(ManifestRule::ResumableWriterHasKey, &manifest);
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(
        findings[0].message,
        "45000 commands write, are resumable and have no idempotency-key flag: `w1`, `w2`, `w3`, `w4`, `w5` and 44995 more"
    );
    assert_eq!(findings[0].actual.as_deref(), Some("`w1` (the first): flags: "));
    let two = json!({"commands": {
        "a": {"danger_level": "mutating", "interruption": {"resume": true}},
        "b": {"danger_level": "destructive", "interruption": {"resume": true}},
    }});
    let findings = check_rule(ManifestRule::ResumableWriterHasKey, &two);
    assert_eq!(findings.len(), 1);
    assert!(findings[0].message.starts_with("2 commands write, are resumable"), "{findings:?}");
}

/// The manifest schema version conform judges a newer manifest against is the one its reports
/// name.
#[test]
fn the_schema_version_judged_is_the_one_reported() {
    assert_eq!(conform::schemas::SCHEMA_VERSION, conform::report::SPEC_VERSION);
}
