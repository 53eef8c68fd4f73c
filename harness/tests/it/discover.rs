//! The static registration rules of CONTRACT §2, each shown failing on a manifest that breaks
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
