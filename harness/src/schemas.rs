//! The wire-format JSON Schemas (`schemas/*.json`, draft-07), embedded at build time and
//! compiled once per process, on first use.
//!
//! Each schema file is self-contained (its `definitions` carry everything it refers to), so
//! they load one by one without a registry. A schema that is missing from the build or does
//! not compile is a fault of conform itself ([`SchemaError`]), never a finding about the tool.
//! [`parse_json`] reads a document the tool printed, nested as deep as a valid envelope may
//! be ([`MAX_DEPTH`]), past the parser's own guard of 128 levels.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::Value;

use serde::{Deserialize, Serialize};

use crate::embedded::SCHEMA_FILES;

/// A schema conform needs could not be loaded.
#[derive(Debug, Clone, thiserror::Error)]
#[error("failed to load schema `{file}`: {message}")]
pub struct SchemaError {
    /// The schema file.
    pub file: String,
    /// What went wrong.
    pub message: String,
}

type Compiled = Result<jsonschema::Validator, SchemaError>;

fn compiled() -> &'static BTreeMap<&'static str, Compiled> {
    static CACHE: OnceLock<BTreeMap<&'static str, Compiled>> = OnceLock::new();
    CACHE.get_or_init(|| {
        SCHEMA_FILES
            .iter()
            .map(|(file, text)| {
                let fail = |message: String| SchemaError { file: (*file).to_owned(), message };
                let compiled = serde_json::from_str::<Value>(text)
                    .map_err(|e| fail(format!("not JSON: {e}")))
                    .and_then(|schema| {
                        jsonschema::draft7::new(&schema).map_err(|e| fail(e.to_string()))
                    });
                (*file, compiled)
            })
            .collect()
    })
}

/// The compiled validator of a schema file (e.g. `response-envelope.json`).
pub fn validator(file: &str) -> Result<&'static jsonschema::Validator, SchemaError> {
    match compiled().get(file) {
        Some(Ok(v)) => Ok(v),
        Some(Err(e)) => Err(e.clone()),
        None => Err(SchemaError {
            file: file.to_owned(),
            message: "not embedded in this build (is it in schemas/?)".into(),
        }),
    }
}

/// The INCOMPLETE response of a job no budget applies to: `incomplete-response.json` without
/// its requirement of `meta.budget_ms` (compiled once). `job status` of an async command's
/// job answers REQ-F-082's response (REQ-C-022), but the command declares no interruption,
/// so no budget is in force to record (REQ-F-080 asks for `meta.budget_ms` on the responses
/// of interruptible commands, and the envelope schema has it absent where no budget applies).
fn incomplete_without_budget() -> Result<&'static jsonschema::Validator, SchemaError> {
    static CACHE: OnceLock<Result<jsonschema::Validator, SchemaError>> = OnceLock::new();
    let file = SchemaName::Incomplete.file();
    let compiled = CACHE.get_or_init(|| {
        let fail = |message: String| SchemaError { file: file.to_owned(), message };
        let text = SCHEMA_FILES
            .iter()
            .find(|(f, _)| *f == file)
            .map(|(_, text)| *text)
            .ok_or_else(|| fail("not embedded in this build".into()))?;
        let mut schema: Value =
            serde_json::from_str(text).map_err(|e| fail(format!("not JSON: {e}")))?;
        let required = schema
            .pointer_mut("/allOf/1/properties/meta/required")
            .and_then(Value::as_array_mut)
            .ok_or_else(|| fail("no `meta.required` in its second `allOf` branch".into()))?;
        required.retain(|k| k != "budget_ms");
        jsonschema::draft7::new(&schema).map_err(|e| fail(e.to_string()))
    });
    compiled.as_ref().map_err(Clone::clone)
}

/// The manifest schema version conform judges: the one that brings §79's `interruption`.
pub const SCHEMA_VERSION: &str = "3.20";

/// The minor version a manifest says it follows (`schema_version` `3.MINOR`), when it says one.
pub fn manifest_minor(response: &Value) -> Option<u32> {
    let version = unwrap_manifest(response).get("schema_version")?.as_str()?;
    version.strip_prefix("3.")?.parse().ok()
}

/// Whether a manifest says it follows a newer minor version than [`SCHEMA_VERSION`]: a minor
/// version only adds (`3.21` adds `requires_person` and `error_codes`), so conform judges what
/// its own version requires and lets the fields it does not know through, naming them in an
/// advisory note ([`unknown_fields`]).
pub fn manifest_is_newer(response: &Value) -> bool {
    let ours = SCHEMA_VERSION.strip_prefix("3.").and_then(|m| m.parse::<u32>().ok());
    matches!((manifest_minor(response), ours), (Some(theirs), Some(ours)) if theirs > ours)
}

/// `manifest-response.json` with every `additionalProperties: false` taken out (compiled once):
/// what a manifest of a newer minor version must keep of conform's version, its fields aside.
fn open_manifest() -> Result<&'static jsonschema::Validator, SchemaError> {
    static CACHE: OnceLock<Result<jsonschema::Validator, SchemaError>> = OnceLock::new();
    let file = SchemaName::Manifest.file();
    let compiled = CACHE.get_or_init(|| {
        let fail = |message: String| SchemaError { file: file.to_owned(), message };
        let text = SCHEMA_FILES
            .iter()
            .find(|(f, _)| *f == file)
            .map(|(_, text)| *text)
            .ok_or_else(|| fail("not embedded in this build".into()))?;
        let mut schema: Value =
            serde_json::from_str(text).map_err(|e| fail(format!("not JSON: {e}")))?;
        open_up(&mut schema);
        jsonschema::draft7::new(&schema).map_err(|e| fail(e.to_string()))
    });
    compiled.as_ref().map_err(Clone::clone)
}

/// Removes every `additionalProperties: false` of a schema (a schema-valued one stays).
fn open_up(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            if map.get("additionalProperties") == Some(&Value::Bool(false)) {
                map.remove("additionalProperties");
            }
            map.values_mut().for_each(open_up);
        }
        Value::Array(items) => items.iter_mut().for_each(open_up),
        _ => {}
    }
}

/// The fields of a manifest that conform's manifest schema does not know, one line each
/// (`` at `/commands/deploy`: requires_person ``), for the advisory note on a newer manifest:
/// the first [`VIOLATIONS_SHOWN`] places, then a line counting the rest.
pub fn unknown_fields(response: &Value) -> Result<Vec<String>, SchemaError> {
    let strict = validator(SchemaName::Manifest.file())?;
    let mut places = strict.iter_errors(unwrap_manifest(response)).filter_map(|e| match e.kind() {
        jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } => {
            let at = e.instance_path().to_string();
            let at = if at.is_empty() { "/".to_owned() } else { at };
            Some(format!("at `{at}`: {}", unexpected.join(", ")))
        }
        _ => None,
    });
    let mut lines: Vec<String> = places.by_ref().take(VIOLATIONS_SHOWN).collect();
    let rest = places.count();
    if rest > 0 {
        lines.push(format!("and {rest} more place(s)"));
    }
    Ok(lines)
}

/// How many violations [`violations`] words; the rest are counted.
pub const VIOLATIONS_SHOWN: usize = 8;

/// The violations of `instance` against `schema`, one line each (`at <pointer>: <message>`):
/// the first [`VIOLATIONS_SHOWN`], then a line counting the rest (a manifest of 45,000
/// commands each missing a field is eight lines and a count, not 135,000 lines held at once);
/// empty when it is valid. For [`SchemaName::Manifest`], an envelope-wrapped manifest is
/// validated through its `data`, and one of a newer minor version ([`manifest_is_newer`]) without
/// refusing the fields conform does not know; [`SchemaName::JobDescriptor`] always applies to
/// `data`.
pub fn violations(schema: SchemaName, instance: &Value) -> Result<Vec<String>, SchemaError> {
    let validator = match schema {
        SchemaName::IncompleteJob => incomplete_without_budget()?,
        SchemaName::Manifest if manifest_is_newer(instance) => open_manifest()?,
        _ => validator(schema.file())?,
    };
    let target = match schema {
        SchemaName::Manifest => unwrap_manifest(instance),
        SchemaName::JobDescriptor => instance.get("data").unwrap_or(&Value::Null),
        SchemaName::Envelope | SchemaName::Incomplete | SchemaName::IncompleteJob => instance,
    };
    let mut errors = validator.iter_errors(target);
    let mut lines: Vec<String> = errors
        .by_ref()
        .take(VIOLATIONS_SHOWN)
        .map(|e| {
            let at = e.instance_path().to_string();
            format!("at `{}`: {e}", if at.is_empty() { "/" } else { &at })
        })
        .collect();
    let rest = errors.count();
    if rest > 0 {
        lines.push(format!("and {rest} more violation(s)"));
    }
    Ok(lines)
}

/// The manifest inside a response: the response itself when it is bare, its `data` when it is
/// wrapped in an envelope (both forms are accepted, docs/contract.md §2).
pub fn unwrap_manifest(response: &Value) -> &Value {
    match response.get("data") {
        Some(data) if response.get("commands").is_none() && data.is_object() => data,
        _ => response,
    }
}

/// The entry for `code` in a command's effective exit-code table: its own `exit_codes`, else the
/// manifest's root `exit_codes` it inherits (the manifest schema: with a root table present, a
/// command lists only its additions and overrides). `manifest` is the bare manifest.
pub fn effective_entry<'a>(
    manifest: &'a Value,
    command: &'a Value,
    code: &str,
) -> Option<&'a Value> {
    let own = command.get("exit_codes").and_then(|c| c.get(code));
    own.or_else(|| manifest.get("exit_codes").and_then(|c| c.get(code)))
}

/// How deep a document conform reads may nest (objects and arrays within each other). A
/// valid envelope may carry data nested deeper than a JSON parser's usual guard of 128
/// levels; past this bound it is refused as not one document (a tool that nests deeper is
/// flooding, not answering).
pub const MAX_DEPTH: usize = 512;

/// Below this depth the parser's own guard never trips, and no stack of its own is needed.
const PARSER_GUARD: usize = 120;

/// `text` as exactly one JSON document, nested up to [`MAX_DEPTH`] levels; the error says
/// why not. A document deeper than the parser's own guard is read with the guard off, on a
/// thread with a stack sized for it, once its depth was counted and found within the bound.
pub fn parse_json(text: &str) -> Result<Value, String> {
    let depth = depth_of(text);
    if depth <= PARSER_GUARD {
        return serde_json::from_str(text).map_err(|e| e.to_string());
    }
    if depth > MAX_DEPTH {
        return Err(format!("nested {depth} levels deep, more than the {MAX_DEPTH} conform reads"));
    }
    let owned = text.to_owned();
    let deep = move || {
        let mut de = serde_json::Deserializer::from_str(&owned);
        de.disable_recursion_limit();
        let value = serde::Deserialize::deserialize(&mut de)
            .map_err(|e: serde_json::Error| e.to_string())?;
        de.end().map_err(|e| e.to_string())?;
        Ok(value)
    };
    std::thread::Builder::new()
        .name("conform-deep-json".to_owned())
        .stack_size(64 << 20)
        .spawn(deep)
        .map_err(|e| format!("failed to start a thread to read a deep document: {e}"))?
        .join()
        .unwrap_or_else(|_| Err("the deep document's reader panicked".to_owned()))
}

/// The deepest nesting of objects and arrays in `text`, outside strings (a count over the
/// bytes, whatever else is wrong with the text: the parser says that).
pub fn depth_of(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Wire-format schema names a response can be checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchemaName {
    /// `schemas/response-envelope.json`.
    Envelope,
    /// `schemas/incomplete-response.json`.
    Incomplete,
    /// `schemas/incomplete-response.json` without its requirement of `meta.budget_ms`: the
    /// INCOMPLETE answer for a job no budget applies to (an async command's, REQ-C-022).
    #[serde(rename = "incomplete-job")]
    IncompleteJob,
    /// `schemas/manifest-response.json` (bare, or the `data` of an envelope).
    Manifest,
    /// `schemas/job-descriptor.json`, applied to the response's `data` (an async command's
    /// answer).
    #[serde(rename = "job-descriptor")]
    JobDescriptor,
}

impl SchemaName {
    /// The file in `schemas/`.
    pub fn file(self) -> &'static str {
        match self {
            Self::Envelope => "response-envelope.json",
            Self::Incomplete | Self::IncompleteJob => "incomplete-response.json",
            Self::Manifest => "manifest-response.json",
            Self::JobDescriptor => "job-descriptor.json",
        }
    }

    /// The schema as a finding names it: its file, and what conform leaves out of it.
    pub fn label(self) -> String {
        match self {
            Self::IncompleteJob => format!("{} (meta.budget_ms optional)", self.file()),
            _ => self.file().to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(levels: usize) -> String {
        let data = format!("{}{}", "[".repeat(levels), "]".repeat(levels));
        format!(
            r#"{{"ok":true,"data":{{"deep":{data}}},"error":null,"warnings":[],"meta":{{"exit_code":0,"duration_ms":1}}}}"#
        )
    }

    fn manifest(version: &str) -> Value {
        serde_json::json!({
            "schema_version": version, "framework_version": "1.0", "etag": "e1",
            "error_codes": { "NOTE_LOCKED": { "description": "d" } },
            "commands": { "note.add": {
                "description": "Adds a note.", "danger_level": "mutating", "required_scopes": [],
                "flags": {}, "exit_codes": {}, "deploy_window": "night",
            } },
        })
    }

    /// A minor version only adds: a 3.21 manifest is judged on what 3.20 requires, its new
    /// fields let through and named; the same fields under 3.20 are refused (closed entries).
    #[test]
    fn a_newer_manifest_is_judged_on_what_this_version_requires() {
        let newer = manifest("3.21");
        assert!(manifest_is_newer(&newer));
        assert_eq!(violations(SchemaName::Manifest, &newer).unwrap(), Vec::<String>::new());
        assert_eq!(
            unknown_fields(&newer).unwrap(),
            ["at `/commands/note.add`: deploy_window", "at `/`: error_codes"]
        );
        let ours = manifest("3.20");
        assert!(!manifest_is_newer(&ours));
        assert_eq!(violations(SchemaName::Manifest, &ours).unwrap().len(), 2);
        // What this version requires still holds a newer manifest to it.
        let mut broken = manifest("3.22");
        broken["commands"]["note.add"].as_object_mut().unwrap().remove("danger_level");
        assert_eq!(violations(SchemaName::Manifest, &broken).unwrap().len(), 1);
    }

    /// A valid envelope whose data nests 128 levels (and more) is one JSON document; the
    /// parser's own guard of 128 is no rule of the spec.
    #[test]
    fn a_valid_envelope_nested_deep_is_one_document() {
        for levels in [126, 128, 400] {
            let text = nested(levels);
            assert_eq!(depth_of(&text), levels + 2);
            let value = parse_json(&text).unwrap_or_else(|e| panic!("{levels} levels: {e}"));
            assert_eq!(value["meta"]["exit_code"], 0);
        }
        let too_deep = parse_json(&nested(MAX_DEPTH)).unwrap_err();
        assert!(too_deep.contains("more than the 512"), "{too_deep}");
        // Brackets inside strings do not count; what else is wrong the parser says.
        assert_eq!(depth_of(r#"{"a":"[[[\"]]]"}"#), 1);
        assert!(parse_json(&format!("{} x", nested(200))).unwrap_err().contains("trailing"));
    }
}
