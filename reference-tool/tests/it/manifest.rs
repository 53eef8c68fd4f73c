//! `reftool manifest`: generated, valid, deterministic, cacheable by etag.

use serde_json::Value;

use crate::snapshot;
use crate::support::{Sandbox, assert_valid};

#[test]
fn the_manifest_is_valid_and_wrapped_in_the_envelope() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["manifest"]);
    assert_eq!(run.exit, 0);
    let data = &run.envelope()["data"];
    assert_valid("manifest-response.json", data);
    assert_eq!(data["schema_version"], "3.20");
    assert!(data["etag"].as_str().unwrap().starts_with("sha256:"));
    for builtin in ["manifest", "version"] {
        assert_eq!(data["commands"][builtin]["builtin"], true, "{builtin}");
    }
    snapshot!("manifest", run);
}

#[test]
fn the_etag_is_deterministic() {
    let sandbox = Sandbox::new();
    let first = sandbox.run(&["manifest"]);
    let second = sandbox.run(&["manifest", "--instance-id", "other"]);
    assert_eq!(first.json["data"], second.json["data"]);
}

#[test]
fn the_current_etag_answers_not_modified() {
    let sandbox = Sandbox::new();
    let full = sandbox.run(&["manifest"]);
    let etag = full.json["data"]["etag"].as_str().unwrap().to_owned();
    let run = sandbox.run(&["manifest", "--etag", &etag]);
    assert_eq!(run.exit, 0);
    assert_eq!(run.envelope()["data"], Value::Null);
    assert_eq!(run.json["meta"]["not_modified"], true);
    snapshot!("manifest_not_modified", run);

    let stale = sandbox.run(&["manifest", "--etag", "sha256:0000"]);
    assert_eq!(stale.json["data"]["etag"], etag.as_str());
    assert!(stale.json["meta"].get("not_modified").is_none());
}

#[test]
fn writers_take_an_idempotency_key_and_only_interruptible_commands_a_budget() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["manifest"]);
    let commands = run.json["data"]["commands"].as_object().unwrap();
    for (path, entry) in commands {
        let flags = entry["flags"].as_object().unwrap();
        let writes = entry["danger_level"] != "safe";
        assert_eq!(flags.contains_key("idempotency-key"), writes, "{path}");
        if !path.starts_with("job.") {
            assert_eq!(flags.contains_key("budget"), entry.get("interruption").is_some(), "{path}");
        }
        if entry.get("interruption").is_some() {
            assert!(entry["exit_codes"].get("14").is_some(), "{path}");
        }
        for (code, exit) in entry["exit_codes"].as_object().unwrap() {
            if exit["retryable"] == true {
                assert_eq!(exit["side_effects"], "none", "{path} {code}");
            }
        }
    }
    let migrate = &commands["migrate"];
    assert_eq!(migrate["danger_level"], "mutating");
    assert!(migrate.get("interruption").is_none());
    assert_eq!(migrate["exit_codes"]["10"]["side_effects"], "none");
}
