//! `--snapshots DIR [--update]`: catch changes in what a tool answers.
//!
//! For every step of a scenario whose stdout was a JSON object, conform normalizes the envelope
//! with the redaction rules, snapshot rules included (`redact`, told every job id the scenario
//! saw, so `[JOB_ID]` names the same job in all its steps), and keeps it as
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
//! **Continuation chains.** How many times `continue_command` must run before the work ends
//! depends on the machine. conform names the runs of a loop `<step>#1`, `<step>#2`, …; when
//! every run of such a group but the last answered INCOMPLETE (exit 14) and the last did not,
//! the group is one chain, and only its final response is kept, as `<step>.json`. Other groups
//! (concurrent runs, which all start at once) keep one file per run, `<step>_<n>.json`.
//!
//! **Portable.** Snapshots are meant to be committed and compared in CI on other machines, so
//! `conform run` also tells the redactor where things are on this one ([`Redactor::with_tool`],
//! [`Redactor::with_host`]): the tool's path as invoked and as resolved becomes `[TOOL]`, its
//! directory `[TOOL_DIR]`, conform's working directory `[CWD]`, conform's `HOME` `[HOME]`, and
//! the sandbox `[SANDBOX]` as everywhere (also single-quoted, as a shell-ready
//! `continue_command` writes a path with a space). A snapshot recorded with the tool at one
//! path compares equal with the tool at another, run from another directory.
//!
//! Skipped scenarios and harness errors are left alone. Files of steps that no longer exist
//! are not removed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::observe::INCOMPLETE;
use crate::outcome::FindingKind;
use crate::outcome::{Ended, Finding, Note, ReproCommand, ScenarioResult, Status, StepRecord};
use crate::redact::{Redactor, job_ids_in_command};

/// The most conform reads of a stored snapshot: a normalized response, at most what a capture
/// holds ([`crate::exec::DEFAULT_CAPTURE_LIMIT`]) and its pretty-printing.
pub const SNAPSHOT_LIMIT: u64 = 16 << 20;

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
        let stored = match crate::input::read_text(&path, SNAPSHOT_LIMIT) {
            Ok(text) => Some(text),
            Err(e) if e.is_not_found() => None,
            Err(e) => {
                return Err(SnapshotError {
                    action: "read",
                    path,
                    source: std::io::Error::other(e),
                });
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
        let redactor = scenario_redactor(result, redactor);
        for (name, step) in snapshot_targets(&result.steps) {
            let Some(envelope) = &step.envelope else {
                continue;
            };
            let normalized = redactor.redact_for_snapshot(envelope);
            let path = self.path_for(&result.id, &name);
            match self.compare(&result.id, &name, &normalized)? {
                Comparison::Matched => {}
                Comparison::Drifted { stored, current } => findings.push(
                    Finding::new(
                        FindingKind::SnapshotDrift,
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
                        FindingKind::SnapshotMissing,
                        format!(
                            "no snapshot {} yet (run with --update to record it)",
                            path.display()
                        ),
                    )
                    .actual(snapshot_text(&normalized))
                    .at_step(&step.name),
                ),
                Comparison::Written => {
                    notes.push(Note::SnapshotWritten { path: path.display().to_string() });
                }
                Comparison::Updated => {
                    notes.push(Note::SnapshotUpdated { path: path.display().to_string() });
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

/// The steps to snapshot and the names of their files: a continuation chain collapses to its
/// final run (see the module docs).
pub fn snapshot_targets(steps: &[StepRecord]) -> Vec<(String, &StepRecord)> {
    let group_of = |name: &str| -> Option<String> {
        let (base, n) = name.rsplit_once('#')?;
        n.parse::<u32>().ok().map(|_| base.to_owned())
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < steps.len() {
        let Some(base) = group_of(&steps[i].name) else {
            out.push((steps[i].name.clone(), &steps[i]));
            i += 1;
            continue;
        };
        let mut end = i;
        while end < steps.len() && group_of(&steps[end].name).as_deref() == Some(base.as_str()) {
            end += 1;
        }
        let group = &steps[i..end];
        let incomplete = |s: &StepRecord| s.ended == Ended::Exited { code: INCOMPLETE };
        let Some((last, before)) = group.split_last() else {
            break;
        };
        if before.iter().all(incomplete) && !incomplete(last) {
            out.push((base, last));
        } else {
            out.extend(group.iter().map(|s| (s.name.clone(), s)));
        }
        i = end;
    }
    out
}

/// `redactor` taught every job id the scenario saw, in the order it saw them: under `job_id`
/// keys of its responses and in `job wait|status|cancel <id>` command lines it ran.
fn scenario_redactor(result: &ScenarioResult, redactor: &Redactor) -> Redactor {
    let mut redactor = redactor.clone();
    for step in &result.steps {
        let words: Vec<String> = match &step.repro.command {
            ReproCommand::Argv(argv) => argv.clone(),
            ReproCommand::Shell(line) => line.split_whitespace().map(str::to_owned).collect(),
        };
        for id in job_ids_in_command(&words) {
            redactor = redactor.with_job_id(id);
        }
        if let Some(envelope) = &step.envelope {
            let mut ids = Vec::new();
            collect_job_ids(envelope, &mut ids);
            for id in ids {
                redactor = redactor.with_job_id(id);
            }
        }
    }
    redactor
}

fn collect_job_ids(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match v {
                    Value::String(id) if key == "job_id" => out.push(id.clone()),
                    _ => collect_job_ids(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_job_ids(v, out)),
        _ => {}
    }
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
