//! Support code for the workspace-level tests in `tests/`.
//!
//! The root package exists so that `tests/` compiles (a virtual workspace never builds a root
//! `tests/`). It holds no product code: `conform` lives in `harness/`, `reftool` in
//! `reference-tool/`, and the two share nothing but the wire-format schemas in `schemas/`.

use std::path::{Path, PathBuf};

/// The workspace root (where this crate's `Cargo.toml` is).
pub fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Path of a binary built by this workspace (`conform`, `reftool`) in the same target profile
/// as the running test. `cargo test --workspace` and `cargo nextest run --workspace` build every
/// member's binaries before they run any test.
pub fn workspace_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("no current exe: {e}"));
    // target/<profile>/deps/<test>-<hash>  ->  target/<profile>/<name>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| panic!("unexpected test binary location {}", exe.display()));
    profile_dir.join(name)
}

/// Reads and parses one of the wire-format schemas in `schemas/` by file name.
pub fn schema_json(file: &str) -> serde_json::Value {
    let path = workspace_root().join("schemas").join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The wire-format schemas in `schemas/`, by file name.
///
/// # Loading them
///
/// Every file is a self-contained JSON Schema draft-07 document (`$schema` is
/// `http://json-schema.org/draft-07/schema#`) with the `$id`
/// `https://conform.dev/schemas/<file name>`. No file refers to another: the pieces two schemas
/// share are repeated under `definitions` (the envelope's in `incomplete-response.json`, the
/// exit-code entry in `manifest-response.json`) and tests keep the copies identical. So a
/// consumer loads any one of them alone, with no registry and no retrieval:
///
/// ```
/// let schema: serde_json::Value =
///     serde_json::from_str(include_str!("../schemas/incomplete-response.json"))?;
/// let validator = jsonschema::draft7::new(&schema)?;
/// assert!(!validator.is_valid(&serde_json::json!({ "ok": true })));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Which schemas apply to a document: an envelope is checked against `response-envelope.json`;
/// an INCOMPLETE one (exit 14) against `incomplete-response.json` as well; a manifest printed bare
/// against `manifest-response.json`, and a manifest wrapped in an envelope against
/// `response-envelope.json` with `manifest-response.json` applied to its `data`. [`WireKind`]
/// encodes exactly this.
pub const SCHEMA_FILES: [&str; 6] = [
    "exit-code.json",
    "exit-code-entry.json",
    "response-envelope.json",
    "incomplete-response.json",
    "manifest-response.json",
    "job-descriptor.json",
];

/// A draft-07 validator for one of the schemas in `schemas/`, by file name.
pub fn schema_validator(file: &str) -> jsonschema::Validator {
    jsonschema::draft7::new(&schema_json(file))
        .unwrap_or_else(|e| panic!("schemas/{file} does not compile as draft-07: {e}"))
}

/// One wire example of the spec's requirement texts, kept in `tests/fixtures/spec-examples/`.
#[derive(Debug, Clone)]
pub struct SpecExample {
    /// File name, `<requirement>-<n>.json`: the requirement whose text shows it, and its place
    /// among that text's examples.
    pub file: String,
    /// The example.
    pub value: serde_json::Value,
}

/// Every wire example of `tests/fixtures/spec-examples/`, in file-name order. Panics with the
/// file when one does not parse, so that a broken fixture is never read as "no examples".
pub fn spec_examples() -> Vec<SpecExample> {
    let dir = workspace_root().join("tests/fixtures/spec-examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display())))
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
            let file =
                path.file_name().map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            let value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: not JSON: {e}"));
            SpecExample { file, value }
        })
        .collect()
}

/// What a JSON document is, judged by its shape, so that it can be checked against the right
/// schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireKind {
    /// A bare manifest (`commands` and `schema_version` at the top):
    /// `manifest-response.json`.
    Manifest,
    /// An envelope whose `error.code` is `INCOMPLETE` or whose `meta.exit_code` is 14:
    /// `response-envelope.json` and `incomplete-response.json`.
    IncompleteEnvelope,
    /// An envelope wrapping a manifest as its `data`: `response-envelope.json`, and
    /// `manifest-response.json` applied to `data`.
    ManifestEnvelope,
    /// Any other envelope (it has `ok` and `meta`): `response-envelope.json`.
    Envelope,
    /// None of the above.
    Other,
}

impl WireKind {
    /// Classifies a document by its shape.
    pub fn of(value: &serde_json::Value) -> WireKind {
        let is_manifest = |v: &serde_json::Value| {
            v.get("commands").is_some() && v.get("schema_version").is_some()
        };
        if is_manifest(value) {
            WireKind::Manifest
        } else if value.get("ok").is_none() || value.get("meta").is_none() {
            WireKind::Other
        } else if value.pointer("/error/code").and_then(serde_json::Value::as_str)
            == Some("INCOMPLETE")
            || value.pointer("/meta/exit_code").and_then(serde_json::Value::as_u64) == Some(14)
        {
            WireKind::IncompleteEnvelope
        } else if value.get("data").is_some_and(is_manifest) {
            WireKind::ManifestEnvelope
        } else {
            WireKind::Envelope
        }
    }

    /// The schemas a document of this kind must satisfy, each with the JSON pointer of the part
    /// it applies to (`""` for the whole document).
    pub fn schemas(self) -> &'static [(&'static str, &'static str)] {
        match self {
            WireKind::Manifest => &[("manifest-response.json", "")],
            WireKind::IncompleteEnvelope => {
                &[("response-envelope.json", ""), ("incomplete-response.json", "")]
            }
            WireKind::ManifestEnvelope => {
                &[("response-envelope.json", ""), ("manifest-response.json", "/data")]
            }
            WireKind::Envelope => &[("response-envelope.json", "")],
            WireKind::Other => &[],
        }
    }
}
