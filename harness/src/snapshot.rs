//! `--snapshots DIR [--update]`: catch changes in what a tool answers.
//!
//! For every step of a scenario whose stdout was a JSON object, conform normalizes the envelope
//! with the redaction rules (`redact`), and keeps it as
//! `DIR/<scenario-id>/<step-name>.json`: pretty JSON, keys sorted, a final newline, so that the
//! files diff well in review. (Characters other than letters, digits, `.`, `_` and `-` in ids
//! and step names become `_`.)
//!
//! On a later run each step's normalized envelope is compared with its file:
//!
//! * equal (as JSON values; formatting does not matter): nothing is reported;
//! * different: a `snapshot-drift` finding with a diff from the stored to the new envelope, and
//!   the scenario fails; with `--update` the file is rewritten instead and a note says so;
//! * no file yet: a `snapshot-missing` finding (the scenario fails, so a snapshot directory in
//!   CI never silently grows); with `--update` the file is written and a note says it is new.
//!
//! Skipped scenarios and harness errors are left alone. Files of steps that no longer exist
//! are not removed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::outcome::{Finding, ScenarioResult, Status, unified_diff};
use crate::redact::Redactor;

/// The snapshot directory and whether to rewrite it.
#[derive(Debug, Clone)]
pub struct SnapshotStore {
    dir: PathBuf,
    update: bool,
}

/// What comparing one step with its snapshot found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Comparison {
    /// The stored snapshot matches.
    Matched,
    /// Different; `stored` and `current` are the two pretty texts.
    Drifted {
        /// The file's content.
        stored: String,
        /// The new normalized envelope.
        current: String,
    },
    /// No file yet (and not written: no `--update`).
    Missing,
    /// `--update`: the file was created.
    Written,
    /// `--update`: the file differed and was rewritten.
    Updated,
}

/// A snapshot file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("failed to {action} {}: {source}", path.display())]
pub struct SnapshotError {
    /// What was attempted ("read", "write", "create").
    pub action: &'static str,
    /// The file or directory.
    pub path: PathBuf,
    /// The underlying error.
    #[source]
    pub source: std::io::Error,
}

/// Replaces every character that is unsafe in a file name with `_`.
pub fn file_safe(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
        .collect();
    // Neither empty nor a path of its own (`.`, `..`).
    if safe.chars().all(|c| c == '.') { format!("_{safe}") } else { safe }
}

/// A copy of `value` whose objects have their keys in sorted order.
pub fn sort_keys(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let sorted: BTreeMap<&String, Value> =
                map.iter().map(|(k, v)| (k, sort_keys(v))).collect();
            Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(sort_keys).collect()),
        other => other.clone(),
    }
}

/// The text a snapshot file holds for a normalized envelope.
pub fn snapshot_text(normalized: &Value) -> String {
    let mut text = format!("{:#}", sort_keys(normalized));
    text.push('\n');
    text
}

impl SnapshotStore {
    /// A store in `dir`. Without `update` the directory must exist; with it, it is created.
    pub fn open(dir: &Path, update: bool) -> Result<Self, SnapshotError> {
        let result = if update {
            std::fs::create_dir_all(dir)
        } else {
            match std::fs::metadata(dir) {
                Ok(m) if m.is_dir() => Ok(()),
                Ok(_) => Err(std::io::Error::other("not a directory")),
                Err(e) => Err(e),
            }
        };
        result.map_err(|source| SnapshotError {
            action: if update { "create" } else { "open" },
            path: dir.to_owned(),
            source,
        })?;
        Ok(SnapshotStore { dir: dir.to_owned(), update })
    }

    /// Whether files are rewritten.
    pub fn updating(&self) -> bool {
        self.update
    }

    /// The file of one step.
    pub fn path_for(&self, scenario_id: &str, step: &str) -> PathBuf {
        self.dir.join(file_safe(scenario_id)).join(format!("{}.json", file_safe(step)))
    }

    /// Compares one step's normalized envelope with its file (writing it with `--update`).
    pub fn compare(
        &self,
        scenario_id: &str,
        step: &str,
        normalized: &Value,
    ) -> Result<Comparison, SnapshotError> {
        let path = self.path_for(scenario_id, step);
        let current = snapshot_text(normalized);
        let stored = match std::fs::read_to_string(&path) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(SnapshotError { action: "read", path, source });
            }
        };
        let comparison = match stored {
            None if self.update => Comparison::Written,
            None => return Ok(Comparison::Missing),
            Some(stored) => {
                let same = stored == current
                    || serde_json::from_str::<Value>(&stored).is_ok_and(|v| &v == normalized);
                match (same, self.update) {
                    (true, _) => return Ok(Comparison::Matched),
                    (false, true) => Comparison::Updated,
                    (false, false) => return Ok(Comparison::Drifted { stored, current }),
                }
            }
        };
        write_atomically(&path, &current)?;
        Ok(comparison)
    }

    /// Compares every step of a finished scenario that printed a JSON object, normalized with
    /// `redactor` (which knows the scenario's sandbox), and records drift as findings (the
    /// scenario then fails) and writes as notes.
    pub fn apply(
        &self,
        result: &mut ScenarioResult,
        redactor: &Redactor,
    ) -> Result<(), SnapshotError> {
        if !matches!(result.status, Status::Pass | Status::Fail) {
            return Ok(());
        }
        let mut findings = Vec::new();
        let mut notes = Vec::new();
        for step in &result.steps {
            let Some(envelope) = &step.envelope else {
                continue;
            };
            let normalized = redactor.redact(envelope);
            let path = self.path_for(&result.id, &step.name);
            match self.compare(&result.id, &step.name, &normalized)? {
                Comparison::Matched => {}
                Comparison::Drifted { stored, current } => findings.push(
                    Finding::new(
                        "snapshot-drift",
                        format!(
                            "the normalized response differs from the snapshot {} (run with --update to accept it)",
                            path.display()
                        ),
                    )
                    .expected(stored)
                    .actual(current)
                    .at_step(&step.name),
                ),
                Comparison::Missing => findings.push(
                    Finding::new(
                        "snapshot-missing",
                        format!(
                            "no snapshot {} yet (run with --update to record it)",
                            path.display()
                        ),
                    )
                    .actual(snapshot_text(&normalized))
                    .at_step(&step.name),
                ),
                Comparison::Written => {
                    notes.push(format!("new snapshot written: {}", path.display()));
                }
                Comparison::Updated => {
                    notes.push(format!("snapshot updated: {}", path.display()));
                }
            }
        }
        if !findings.is_empty() {
            result.status = Status::Fail;
            result.findings.extend(findings);
        }
        result.notes.extend(notes);
        Ok(())
    }
}

/// The diff a `snapshot-drift` finding shows, from stored to current.
pub fn drift_diff(stored: &str, current: &str) -> String {
    unified_diff(stored, current)
}

/// Writes through a temporary file in the same directory and renames it into place, so an
/// interrupted run never leaves half a snapshot.
fn write_atomically(path: &Path, text: &str) -> Result<(), SnapshotError> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let fail = |action, source| SnapshotError { action, path: path.to_owned(), source };
    std::fs::create_dir_all(dir).map_err(|e| fail("create the directory of", e))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| fail("write", e))?;
    std::io::Write::write_all(&mut tmp, text.as_bytes()).map_err(|e| fail("write", e))?;
    tmp.persist(path).map_err(|e| fail("write", e.error))?;
    Ok(())
}
