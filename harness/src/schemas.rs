//! The wire-format JSON Schemas (`schemas/*.json`, draft-07), embedded at build time and
//! compiled once per process, on first use.
//!
//! Each schema file is self-contained (its `definitions` carry everything it refers to), so
//! they load one by one without a registry. A schema that is missing from the build or does
//! not compile is a fault of conform itself ([`SchemaError`]), never a finding about the tool.

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

/// How many violations [`violations`] words; the rest are counted.
pub const VIOLATIONS_SHOWN: usize = 8;

/// The violations of `instance` against `schema`, one line each (`at <pointer>: <message>`):
/// the first [`VIOLATIONS_SHOWN`], then a line counting the rest (a manifest of 45,000
/// commands each missing a field is eight lines and a count, not 135,000 lines held at once);
/// empty when it is valid. For [`SchemaName::Manifest`], an envelope-wrapped manifest is
/// validated through its `data`; [`SchemaName::JobDescriptor`] always applies to `data`.
pub fn violations(schema: SchemaName, instance: &Value) -> Result<Vec<String>, SchemaError> {
    let validator = match schema {
        SchemaName::IncompleteJob => incomplete_without_budget()?,
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
/// wrapped in an envelope (both forms are accepted, CONTRACT §2).
pub fn unwrap_manifest(response: &Value) -> &Value {
    match response.get("data") {
        Some(data) if response.get("commands").is_none() && data.is_object() => data,
        _ => response,
    }
}

/// The entry for `code` in a command's effective exit-code table: its own `exit_codes`, else the
/// manifest's root `exit_codes` it inherits (the manifest schema: with a root table present, a
/// command lists only its additions and overrides). `manifest` is the bare manifest.
pub fn effective_entry<'a>(manifest: &'a Value, command: &'a Value, code: &str) -> Option<&'a Value> {
    let own = command.get("exit_codes").and_then(|c| c.get(code));
    own.or_else(|| manifest.get("exit_codes").and_then(|c| c.get(code)))
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
