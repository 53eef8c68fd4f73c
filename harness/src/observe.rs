//! What one process of a step left behind, as the stages after exec see it: the evidence, the
//! driver's outcome and stdout read as one JSON document (or why not).
//!
//! Discovery, calibration, the runner and the checks all read observations, so this sits below
//! them, next to [`crate::exec`] and [`crate::outcome`] and depending on nothing else.

use serde_json::Value;

use crate::exec::{Outcome, Termination};
use crate::outcome::StepRecord;

/// The tool's exit code INCOMPLETE (docs/contract.md §1): the work goes on, run `continue_command`.
pub const INCOMPLETE: i32 = 14;

/// Why stdout did not hold one JSON document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdoutProblem {
    /// Nothing was written.
    Empty,
    /// The bytes are not UTF-8 (at this offset).
    NotUtf8(usize),
    /// The text is not exactly one JSON document.
    NotJson(String),
    /// More was written than conform keeps.
    Truncated(u64),
    /// A stream step's stdout has no terminal line (its response).
    NoStreamTerminal,
}

/// One process a step ran, with stdout already parsed.
#[derive(Debug, Clone)]
pub struct Observation {
    /// The evidence (name, repro, excerpts).
    pub record: StepRecord,
    /// What the driver saw.
    pub outcome: Outcome,
    /// stdout as one JSON document, or why not.
    pub json: Result<Value, StdoutProblem>,
    /// The sandbox root it ran in (for redaction).
    pub sandbox_root: std::path::PathBuf,
}

impl Observation {
    /// The exit code, when the process exited by itself.
    pub fn exit_code(&self) -> Option<i32> {
        match self.outcome.termination {
            Termination::Exited(c) => Some(c),
            Termination::Signaled(_) | Termination::TimedOut => None,
        }
    }

    /// The parsed response, if stdout held one.
    pub fn response(&self) -> Option<&Value> {
        self.json.as_ref().ok()
    }

    /// A string at a pointer of the response.
    pub fn str_at(&self, pointer: &str) -> Option<&str> {
        self.response()?.pointer(pointer)?.as_str()
    }
}

/// Parses stdout as exactly one JSON document.
pub fn parse_stdout(outcome: &Outcome) -> Result<Value, StdoutProblem> {
    if outcome.stdout.truncated() {
        return Err(StdoutProblem::Truncated(outcome.stdout.total_len));
    }
    let bytes = &outcome.stdout.bytes;
    let text = std::str::from_utf8(bytes).map_err(|e| StdoutProblem::NotUtf8(e.valid_up_to()))?;
    if text.trim().is_empty() {
        return Err(StdoutProblem::Empty);
    }
    crate::schemas::parse_json(text).map_err(StdoutProblem::NotJson)
}
