//! `--baseline FILE`: failures a vendor already knows about.
//!
//! A baseline lets a tool that is not yet fully conformant gate its CI on "no new failures". It
//! is a TOML file (or JSON, when the name ends in `.json`) listing expected failures, each with
//! the scenario id and a reason; the reason is required and must not be empty:
//!
//! ```toml
//! # conform-baseline.toml
//! [[expected_failures]]
//! scenario = "budget-flag-beats-env"
//! reason = "the env variable still wins; fix tracked in issue 42"
//! ```
//!
//! ```json
//! {"expected_failures": [{"scenario": "budget-flag-beats-env", "reason": "issue 42"}]}
//! ```
//!
//! Applied to the results of a run ([`Baseline::apply`]):
//!
//! * a listed scenario that **fails** is an *expected failure*: it is reported as `xfail` and
//!   does not count against conformance;
//! * a scenario that fails and is **not listed** is an *unexpected failure*: it fails the run
//!   (a `must` one with `NOT_CONFORMANT`, any other with `BASELINE_MISMATCH`);
//! * a listed scenario that **passes** is a *stale entry*: it fails the run with
//!   `BASELINE_MISMATCH` until the entry is removed, so the baseline only ever shrinks;
//! * a listed scenario that was skipped or hit a harness error is left as it is (nothing was
//!   learned about it);
//! * an entry naming a scenario conform does not know is a bad invocation
//!   ([`Baseline::check_known`], exit `ARG_ERROR`), as is an unreadable or malformed file
//!   (reported with line and column), an empty scenario id or reason, or a scenario listed
//!   twice. `schemas/baseline.json` describes the file's shape.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::outcome::{BaselineMark, ScenarioResult, Status};

/// One expected failure.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The scenario id.
    pub scenario: String,
    /// Why the failure is accepted for now.
    pub reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    expected_failures: Vec<Entry>,
}

/// A parsed, validated baseline.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baseline {
    entries: Vec<Entry>,
}

/// Where in the file a problem is (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// The line.
    pub line: usize,
    /// The column (in characters).
    pub column: usize,
}

/// What is wrong with a baseline.
#[derive(Debug)]
pub enum BaselineErrorKind {
    /// The file could not be read (or is no regular file, or too large).
    Read(crate::input::InputError),
    /// The file is not valid TOML/JSON or has the wrong shape.
    Parse {
        /// Where, when known.
        position: Option<Position>,
        /// The parser's message.
        message: String,
    },
    /// An entry has an empty reason or repeats a scenario.
    Invalid(String),
    /// Entries name scenarios conform does not have.
    UnknownScenarios(Vec<String>),
}

/// A baseline that cannot be used; always a bad invocation (`ARG_ERROR`).
#[derive(Debug)]
pub struct BaselineError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong.
    pub kind: BaselineErrorKind,
}

impl fmt::Display for BaselineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match &self.kind {
            BaselineErrorKind::Read(e) => write!(f, "failed to read the baseline {path}: {e}"),
            BaselineErrorKind::Parse { position: Some(p), message } => write!(
                f,
                "failed to parse the baseline {path} at line {}, column {}: {message}",
                p.line, p.column
            ),
            BaselineErrorKind::Parse { position: None, message } => {
                write!(f, "failed to parse the baseline {path}: {message}")
            }
            BaselineErrorKind::Invalid(message) => {
                write!(f, "invalid baseline {path}: {message}")
            }
            BaselineErrorKind::UnknownScenarios(ids) => write!(
                f,
                "the baseline {path} names unknown scenario(s): {} (see `conform list`)",
                ids.join(", ")
            ),
        }
    }
}

impl std::error::Error for BaselineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            BaselineErrorKind::Read(e) => Some(e),
            _ => None,
        }
    }
}

/// The syntax of a baseline file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// TOML (the default).
    Toml,
    /// JSON (files ending in `.json`).
    Json,
}

impl Syntax {
    /// The syntax a file name implies.
    pub fn of(path: &Path) -> Self {
        if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("json")) {
            Syntax::Json
        } else {
            Syntax::Toml
        }
    }
}

/// Line and column (1-based) of a byte offset.
fn position_of(text: &str, offset: usize) -> Position {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    Position { line, column }
}

impl Baseline {
    /// Reads and validates a baseline file (a regular file of at most
    /// [`crate::input::TEXT_LIMIT`] bytes).
    pub fn load(path: &Path) -> Result<Self, BaselineError> {
        let text = crate::input::read_text(path, crate::input::TEXT_LIMIT).map_err(|e| {
            BaselineError { path: path.to_owned(), kind: BaselineErrorKind::Read(e) }
        })?;
        Baseline::parse(&text, Syntax::of(path), path)
    }

    /// Parses and validates baseline text; `path` is only used in errors.
    pub fn parse(text: &str, syntax: Syntax, path: &Path) -> Result<Self, BaselineError> {
        let error = |kind| BaselineError { path: path.to_owned(), kind };
        let file: File = match syntax {
            Syntax::Toml => toml::from_str(text).map_err(|e| {
                error(BaselineErrorKind::Parse {
                    position: e.span().map(|s| position_of(text, s.start)),
                    message: e.message().to_owned(),
                })
            })?,
            Syntax::Json => serde_json::from_str(text).map_err(|e| {
                error(BaselineErrorKind::Parse {
                    position: Some(Position { line: e.line(), column: e.column() }),
                    message: e.to_string(),
                })
            })?,
        };
        let mut seen: Vec<&str> = Vec::new();
        for entry in &file.expected_failures {
            if entry.scenario.trim().is_empty() {
                return Err(error(BaselineErrorKind::Invalid(
                    "an entry has an empty scenario id".to_owned(),
                )));
            }
            if entry.reason.trim().is_empty() {
                return Err(error(BaselineErrorKind::Invalid(format!(
                    "the entry for `{}` has an empty reason; say why the failure is accepted",
                    entry.scenario
                ))));
            }
            if seen.contains(&entry.scenario.as_str()) {
                return Err(error(BaselineErrorKind::Invalid(format!(
                    "scenario `{}` is listed twice",
                    entry.scenario
                ))));
            }
            seen.push(&entry.scenario);
        }
        Ok(Baseline { entries: file.expected_failures })
    }

    /// The expected failures, in file order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The entry for a scenario.
    pub fn entry(&self, scenario: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.scenario == scenario)
    }

    /// Fails when an entry names a scenario not in `known` (the whole catalogue, not only the
    /// planned scenarios: a filter must not turn an entry into an error).
    pub fn check_known<'a>(
        &self,
        known: impl IntoIterator<Item = &'a str>,
        path: &Path,
    ) -> Result<(), BaselineError> {
        let known: Vec<&str> = known.into_iter().collect();
        let unknown: Vec<String> = self
            .entries
            .iter()
            .filter(|e| !known.contains(&e.scenario.as_str()))
            .map(|e| e.scenario.clone())
            .collect();
        if unknown.is_empty() {
            Ok(())
        } else {
            Err(BaselineError {
                path: path.to_owned(),
                kind: BaselineErrorKind::UnknownScenarios(unknown),
            })
        }
    }

    /// Marks one result (see the module docs). Call it before the result is reported.
    pub fn apply(&self, result: &mut ScenarioResult) {
        let entry = self.entry(&result.id);
        result.baseline = match (&result.status, entry) {
            (Status::Fail, Some(e)) => {
                Some(BaselineMark::ExpectedFailure { reason: e.reason.clone() })
            }
            (Status::Pass, Some(e)) => Some(BaselineMark::Stale { reason: e.reason.clone() }),
            (Status::Fail, None) => Some(BaselineMark::Unexpected),
            (Status::Skip { .. } | Status::Error { .. }, _) | (Status::Pass, None) => None,
        };
    }
}
