//! The wire-format schemas in `schemas/`: they are valid draft-07, documented, consistent with
//! one another, accept every wire example of the spec's requirement texts
//! (`tests/fixtures/spec-examples/`, one file per example), accept our positive fixtures and reject
//! each negative fixture for the reason its file name gives.
//!
//! Fixtures live in `tests/fixtures/schemas/<schema file stem>/{valid,invalid}/`. A negative
//! fixture is named `<rule>--<keywords>.json`, where `<keywords>` lists, joined by `+`, exactly
//! the JSON Schema keywords its validation errors come from (`required`, `const`, `not`, ...).
//! Adding a file adds a case; no code changes.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use conform_workspace::{
    SCHEMA_FILES, WireKind, schema_json, schema_validator, spec_examples, workspace_bin,
    workspace_root,
};
use serde_json::{Value, json};

const DRAFT_07: &str = "http://json-schema.org/draft-07/schema#";
const ID_BASE: &str = "https://conform.dev/schemas/";

/// The spec's texts this project started from hold exactly these examples: one bare manifest
/// (REQ-C-033), two INCOMPLETE envelopes (REQ-F-082) and one success envelope (REQ-F-080).
const EXAMPLE_MANIFESTS: usize = 1;
const EXAMPLE_INCOMPLETE_ENVELOPES: usize = 2;
const EXAMPLE_OTHER_ENVELOPES: usize = 1;

fn stem(file: &str) -> &str {
    file.strip_suffix(".json").unwrap_or(file)
}

/// Keywords of every validation error, with a readable account of each.
fn errors_of(file: &str, instance: &Value) -> Vec<(String, String)> {
    schema_validator(file)
        .iter_errors(instance)
        .map(|e| {
            let keyword = e.kind().keyword().to_owned();
            let account = format!(
                "{keyword} at instance {:?}, schema {:?}: {e}",
                e.instance_path().as_str(),
                e.schema_path().as_str()
            );
            (keyword, account)
        })
        .collect()
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

fn json_files_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|entry| entry.expect("readable fixture directory").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_schema_is_draft_07_with_its_id_and_compiles() {
    for file in SCHEMA_FILES {
        let schema = schema_json(file);
        assert_eq!(schema["$schema"], DRAFT_07, "schemas/{file}: `$schema` must be draft-07");
        assert_eq!(
            schema["$id"],
            format!("{ID_BASE}{file}"),
            "schemas/{file}: `$id` must be {ID_BASE}{file}"
        );
        for key in ["title", "description"] {
            assert!(schema[key].is_string(), "schemas/{file}: top-level `{key}` missing");
        }
        let meta_errors: Vec<String> = jsonschema::draft7::meta::validator()
            .iter_errors(&schema)
            .map(|e| format!("{} at {}", e, e.instance_path().as_str()))
            .collect();
        assert!(meta_errors.is_empty(), "schemas/{file} is not valid draft-07: {meta_errors:#?}");
        schema_validator(file);
    }
}

/// Walks a schema and collects the location of every property (under `properties` or
/// `patternProperties`) that has no `description`.
fn undescribed(node: &Value, at: &str, missing: &mut Vec<String>) {
    match node {
        Value::Object(map) => {
            for (key, child) in map {
                let here = format!("{at}/{key}");
                if key == "properties" || key == "patternProperties" {
                    if let Value::Object(props) = child {
                        for (name, prop) in props {
                            if prop.get("description").is_none_or(|d| !d.is_string()) {
                                missing.push(format!("{here}/{name}"));
                            }
                        }
                    }
                }
                undescribed(child, &here, missing);
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                undescribed(item, &format!("{at}/{index}"), missing);
            }
        }
        _ => {}
    }
}

#[test]
fn every_property_has_a_description() {
    for file in SCHEMA_FILES {
        let mut missing = Vec::new();
        undescribed(&schema_json(file), "", &mut missing);
        assert!(
            missing.is_empty(),
            "schemas/{file}: properties without a description: {missing:#?}"
        );
    }
}

/// The self-contained files repeat shared definitions; each copy must equal its source.
#[test]
fn repeated_definitions_equal_their_source() {
    let copies = [
        ("response-envelope.json", "incomplete-response.json", None),
        ("exit-code-entry.json", "manifest-response.json", Some("ExitCodeEntry")),
    ];
    for (source, copy, only) in copies {
        let source_defs = schema_json(source)["definitions"].clone();
        let copy_defs = schema_json(copy)["definitions"].clone();
        let names: Vec<String> = match only {
            Some(name) => vec![name.to_owned()],
            None => source_defs.as_object().expect("definitions object").keys().cloned().collect(),
        };
        assert!(!names.is_empty(), "schemas/{source} has no definitions to share");
        for name in names {
            assert_eq!(
                copy_defs.get(&name),
                source_defs.get(&name),
                "definitions/{name} in schemas/{copy} differs from schemas/{source}: \
                 change both together"
            );
        }
    }
}

/// The manifest accepts as `exit_codes` keys exactly the codes exit-code.json accepts.
#[test]
fn manifest_exit_code_keys_are_the_codes_exit_code_schema_accepts() {
    let exit_code = schema_validator("exit-code.json");
    let manifest = schema_validator("manifest-response.json");
    let mut disagreements = Vec::new();
    for code in 0..=255u16 {
        let as_status = exit_code.is_valid(&Value::from(code));
        let entry = serde_json::json!({
            "name": "SOME_NAME", "description": "d", "retryable": false, "side_effects": "none"
        });
        let doc = serde_json::json!({
            "schema_version": "3.20", "framework_version": "1", "etag": "e",
            "commands": { "c": {
                "description": "d", "danger_level": "safe", "required_scopes": [], "flags": {},
                "exit_codes": { code.to_string(): entry }
            } }
        });
        if as_status != manifest.is_valid(&doc) {
            disagreements.push(code);
        }
    }
    assert!(disagreements.is_empty(), "codes the two schemas disagree on: {disagreements:?}");
}

/// A one-command manifest whose command has the given exit-code table and extra fields.
fn manifest_with(exit_codes: Value, extra: Value) -> Value {
    let mut command = json!({
        "description": "List every command of the tool", "danger_level": "safe",
        "required_scopes": [], "flags": {}, "exit_codes": exit_codes
    });
    if let (Some(command), Value::Object(extra)) = (command.as_object_mut(), extra) {
        command.extend(extra);
    }
    json!({
        "schema_version": "3.20", "framework_version": "1", "etag": "e",
        "commands": { "manifest": command }
    })
}

fn exit_entry(description: &str) -> Value {
    json!({ "description": description, "retryable": false, "side_effects": "partial" })
}

fn keywords_of(file: &str, instance: &Value) -> BTreeSet<String> {
    errors_of(file, instance).into_iter().map(|(keyword, _)| keyword).collect()
}

/// REQ-F-069 has every command declare "130", REQ-F-013 exits 143, docs/contract.md §10 names 141:
/// signal exits 128+N are legal keys; the shell's own 126-128 and codes past 159 are not.
#[test]
fn signal_exits_are_legal_exit_code_keys_and_the_shell_codes_are_not() {
    let signals = manifest_with(
        json!({
            "0": { "description": "Done", "retryable": false, "side_effects": "complete" },
            "130": exit_entry("SIGINT ended the call"),
            "141": exit_entry("The reader of stdout went away"),
            "143": exit_entry("SIGTERM ended the call")
        }),
        json!({}),
    );
    let errors: Vec<String> =
        errors_of("manifest-response.json", &signals).into_iter().map(|(_, a)| a).collect();
    assert!(errors.is_empty(), "signal exits refused: {errors:#?}");
    for code in ["126", "127", "128", "160", "255"] {
        let doc = manifest_with(json!({ code: exit_entry("The shell's own") }), json!({}));
        assert_eq!(
            keywords_of("manifest-response.json", &doc),
            BTreeSet::from(["propertyNames".to_owned()]),
            "exit code {code} must be refused as a key"
        );
    }
}

/// CommandEntry is closed, as in the spec's schema: a key no requirement names is refused.
#[test]
fn a_command_entry_with_an_unknown_key_is_refused() {
    let known = manifest_with(json!({}), json!({ "idempotent": true, "builtin": true }));
    assert!(errors_of("manifest-response.json", &known).is_empty(), "spec fields refused");
    let unknown = manifest_with(json!({}), json!({ "cost": "cheap" }));
    assert_eq!(
        keywords_of("manifest-response.json", &unknown),
        BTreeSet::from(["additionalProperties".to_owned()])
    );
}

/// The spec caps an exit-code entry's description at 120 characters, in both schemas that
/// hold the entry.
#[test]
fn an_exit_code_description_over_120_characters_is_refused() {
    let at_limit = "d".repeat(120);
    let over = "d".repeat(121);
    assert!(errors_of("exit-code-entry.json", &exit_entry(&at_limit)).is_empty());
    assert_eq!(
        keywords_of("exit-code-entry.json", &exit_entry(&over)),
        BTreeSet::from(["maxLength".to_owned()])
    );
    let manifest = manifest_with(json!({ "1": exit_entry(&over) }), json!({}));
    assert_eq!(
        keywords_of("manifest-response.json", &manifest),
        BTreeSet::from(["maxLength".to_owned()])
    );
}

/// Runs `program args` with its state kept in a fresh directory and returns its stdout as JSON.
fn manifest_of(program: &Path, args: &[&str]) -> Value {
    let state = tempfile::tempdir().expect("temporary state directory");
    let output = Command::new(program)
        .args(args)
        .env("HOME", state.path())
        .env("XDG_STATE_HOME", state.path())
        .env("XDG_CACHE_HOME", state.path())
        .env("REFTOOL_STATE_DIR", state.path())
        .env("PYAGENT_STATE_DIR", state.path())
        .env_remove("REFTOOL_FAULT")
        .env_remove("PYAGENT_FAULT")
        .current_dir(state.path())
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()));
    assert!(output.status.success(), "{} {args:?}: {:?}", program.display(), output);
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{} {args:?} printed no JSON: {e}", program.display()))
}

/// The manifests of the real tools the project runs conform against validate: reftool (built by
/// this workspace), pyagent and the kit fixture without a fault.
#[test]
fn the_manifests_of_the_project_tools_validate() {
    let tools = [
        workspace_bin("reftool"),
        workspace_root().join("tests/fixtures/tools/pyagent/pyagent.py"),
        workspace_root().join("harness/tests/fixtures/tools/kit/good"),
    ];
    let mut failures = Vec::new();
    for tool in &tools {
        let response = manifest_of(tool, &["manifest"]);
        let kind = WireKind::of(&response);
        if !matches!(kind, WireKind::Manifest | WireKind::ManifestEnvelope) {
            failures.push(format!("{}: not a manifest: {kind:?}", tool.display()));
        }
        for (file, pointer) in kind.schemas() {
            let part = response.pointer(pointer).unwrap_or(&Value::Null);
            for (_, account) in errors_of(file, part) {
                failures.push(format!("{} against {file}: {account}", tool.display()));
            }
        }
    }
    assert!(failures.is_empty(), "manifests rejected: {failures:#?}");
}

#[test]
fn spec_examples_validate_against_the_schemas_they_illustrate() {
    let examples = spec_examples();
    let mut counts = [0usize; 3];
    let mut failures = Vec::new();
    for example in &examples {
        let kind = WireKind::of(&example.value);
        match kind {
            WireKind::Manifest => counts[0] += 1,
            WireKind::IncompleteEnvelope => counts[1] += 1,
            WireKind::Envelope | WireKind::ManifestEnvelope => counts[2] += 1,
            WireKind::Other => failures.push(format!("{}: not a known wire format", example.file)),
        }
        for (file, pointer) in kind.schemas() {
            let part = example.value.pointer(pointer).unwrap_or(&Value::Null);
            for (_, account) in errors_of(file, part) {
                failures.push(format!("{} against {file}: {account}", example.file));
            }
        }
    }
    assert!(failures.is_empty(), "spec examples rejected: {failures:#?}");
    assert_eq!(
        counts,
        [EXAMPLE_MANIFESTS, EXAMPLE_INCOMPLETE_ENVELOPES, EXAMPLE_OTHER_ENVELOPES],
        "spec examples found as [manifests, INCOMPLETE envelopes, other envelopes] in {} files; \
         did tests/fixtures/spec-examples change?",
        examples.len()
    );
}

/// The keywords a negative fixture names: `<rule>--<k1>+<k2>.json`.
fn expected_keywords(path: &Path) -> BTreeSet<String> {
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let (_, keywords) = name.rsplit_once("--").unwrap_or_else(|| {
        panic!("{}: a negative fixture is named <rule>--<keyword>[+<keyword>].json", path.display())
    });
    keywords.split('+').map(str::to_owned).collect()
}

#[test]
fn fixtures_meet_their_expectations() {
    let root = workspace_root().join("tests/fixtures/schemas");
    let mut failures = Vec::new();
    let mut cases = 0;
    for file in SCHEMA_FILES {
        let dir = root.join(stem(file));
        let valid = json_files_in(&dir.join("valid"));
        let invalid = json_files_in(&dir.join("invalid"));
        if valid.is_empty() || invalid.is_empty() {
            failures.push(format!("{}: needs valid/ and invalid/ fixtures", dir.display()));
        }
        for path in &valid {
            cases += 1;
            let instance = read_json(path);
            let name = path.strip_prefix(&root).unwrap_or(path).display().to_string();
            for (_, account) in errors_of(file, &instance) {
                failures.push(format!("{name} should be valid against {file}: {account}"));
            }
            // A valid envelope or manifest also meets whatever its shape implies (an
            // INCOMPLETE envelope is an envelope too; a wrapped manifest is a manifest).
            for (other, pointer) in WireKind::of(&instance).schemas() {
                let part = instance.pointer(pointer).unwrap_or(&Value::Null);
                for (_, account) in errors_of(other, part) {
                    failures.push(format!("{name} should be valid against {other}: {account}"));
                }
            }
        }
        for path in &invalid {
            cases += 1;
            let instance = read_json(path);
            let name = path.strip_prefix(&root).unwrap_or(path).display().to_string();
            let expected = expected_keywords(path);
            let errors = errors_of(file, &instance);
            let actual: BTreeSet<String> = errors.iter().map(|(k, _)| k.clone()).collect();
            if errors.is_empty() {
                failures.push(format!("{name} should be rejected by {file} but is accepted"));
            } else if actual != expected {
                let accounts: Vec<&String> = errors.iter().map(|(_, a)| a).collect();
                failures.push(format!(
                    "{name}: expected errors from {expected:?}, got {actual:?}: {accounts:#?}"
                ));
            }
        }
    }
    // Unknown fixture directories are probably misnamed and would silently test nothing.
    for entry in std::fs::read_dir(&root).expect("fixture root exists") {
        let name = entry.expect("readable fixture root").file_name().to_string_lossy().into_owned();
        if !SCHEMA_FILES.iter().any(|file| stem(file) == name) {
            failures.push(format!("tests/fixtures/schemas/{name} names no schema"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {cases} fixture cases failed: {failures:#?}",
        failures.len()
    );
}
