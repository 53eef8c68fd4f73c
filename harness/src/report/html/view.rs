//! What a page shows of a run, read from the run's JSON report (`data` of the envelope
//! `conform run --format json` prints, [`crate::report::json::data`]): the one model the
//! run's own `--html`, `conform matrix` (which reads the reports of other runs) and any other
//! page of conform's draw from.
//!
//! It is the report's schema (`schemas/conform-report-data.json`) read back, so a page can be
//! built from a report written by another conform run, on another machine, long after: the
//! skip reasons and notes are their sentences, the evidence records as the report keeps them
//! (the manifest once, as `data.manifest`; a passing scenario's records without the tool's
//! output unless the report was written with `--evidence all`).

use serde::Deserialize;
use serde_json::Value;

use crate::levels::{ClaimVerdict, KitCheckVerdict};
use crate::outcome::{ActionRecord, BaselineMark, Counts, Finding, StepRecord};
use crate::report::RunReport;
use crate::report::json::{self, Evidence};
use crate::scenario::Obligation;
use crate::summary::{Coverage, RequirementVerdict};

/// A run, as a page shows it.
#[derive(Debug, Clone, Deserialize)]
pub struct RunView {
    /// The tool under test, as given on the command line.
    pub tool: String,
    /// The contract's schema version conform checked.
    pub spec_version: String,
    /// The version of the conform that ran.
    #[serde(default)]
    pub conform_version: String,
    /// Whether no scenario counts against conformance.
    pub conformant: bool,
    /// All scenarios by status.
    pub counts: Counts,
    /// Verdicts per requirement.
    #[serde(default)]
    pub requirements: Vec<RequirementVerdict>,
    /// The spec's levels and §79.
    #[serde(default)]
    pub claims: Vec<ClaimVerdict>,
    /// The spec kit's checks.
    #[serde(default)]
    pub kit_checks: Vec<KitCheckVerdict>,
    /// What could and could not be judged.
    #[serde(default)]
    pub coverage: Coverage,
    /// The tool's manifest, once.
    #[serde(default)]
    pub manifest: Option<Value>,
    /// Whether the run was interrupted (a partial report).
    #[serde(default)]
    pub partial: bool,
    /// Every scenario's result.
    pub scenarios: Vec<ScenarioView>,
    /// conform's exit code for the run, when known (the envelope's `meta.exit_code`).
    #[serde(skip)]
    pub exit_code: Option<u8>,
}

/// One scenario's result, as a page shows it.
#[derive(Debug, Clone, Deserialize)]
pub struct ScenarioView {
    /// The scenario id.
    pub id: String,
    /// Its requirement.
    pub requirement: String,
    /// The acceptance criterion.
    pub criterion: String,
    /// must, should or may.
    pub level: Obligation,
    /// pass, fail, skip or error.
    pub status: StatusWord,
    /// Why it was skipped.
    #[serde(default)]
    pub reason: Option<String>,
    /// What failed in conform, for an error.
    #[serde(default)]
    pub message: Option<String>,
    /// The checks that failed.
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// Advisory notes.
    #[serde(default)]
    pub notes: Vec<String>,
    /// Every process it ran.
    #[serde(default)]
    pub evidence: Vec<EvidenceView>,
    /// The steps that ran no process of the tool.
    #[serde(default)]
    pub actions: Vec<ActionRecord>,
    /// Its wall-clock time.
    pub duration_ms: u64,
    /// What the baseline said.
    #[serde(default)]
    pub baseline: Option<BaselineMark>,
    /// Its first run, when conform ran it again alone.
    #[serde(default)]
    pub first_run: Option<FirstRunView>,
}

/// A scenario's status word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StatusWord {
    /// Every check held.
    Pass,
    /// A check failed.
    Fail,
    /// Not run.
    Skip,
    /// conform failed.
    Error,
}

/// The first run of a scenario run again alone.
#[derive(Debug, Clone, Deserialize)]
pub struct FirstRunView {
    /// fail or skip.
    pub status: StatusWord,
    /// Why it was skipped.
    #[serde(default)]
    pub reason: Option<String>,
    /// Its findings.
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// How long it took.
    pub duration_ms: u64,
}

/// One evidence record, as the report keeps it.
#[derive(Debug, Clone, Deserialize)]
pub struct EvidenceView {
    /// The record.
    #[serde(flatten)]
    pub record: StepRecord,
    /// `manifest` when stdout held the run's manifest (`RunView::manifest`).
    #[serde(default)]
    pub stdout_ref: Option<String>,
    /// The tool's output was left out (a passing scenario's, under `--evidence failures`).
    #[serde(default)]
    pub output_omitted: bool,
}

impl RunView {
    /// The view of a finished run, every record whole.
    pub fn from_report(report: &RunReport) -> Result<RunView, String> {
        let mut view = RunView::from_data(json::data(report, Evidence::All))?;
        view.exit_code = Some(report.summary.exit_code);
        Ok(view)
    }

    /// The view of a report's `data`.
    pub fn from_data(data: Value) -> Result<RunView, String> {
        serde_json::from_value(data).map_err(|e| format!("not a conform report: {e}"))
    }

    /// The view of a whole envelope as `conform run --format json` prints it: its `data`, and
    /// its `meta.exit_code`.
    pub fn from_envelope(envelope: Value) -> Result<RunView, String> {
        let exit_code = envelope
            .pointer("/meta/exit_code")
            .and_then(Value::as_u64)
            .and_then(|c| u8::try_from(c).ok());
        let data = match envelope {
            Value::Object(mut map) => map.remove("data").unwrap_or(Value::Null),
            _ => Value::Null,
        };
        if data.is_null() {
            return Err("the envelope holds no report (`data` is null)".to_owned());
        }
        let mut view = RunView::from_data(data)?;
        view.exit_code = exit_code;
        Ok(view)
    }

    /// The scenario of this id.
    pub fn scenario(&self, id: &str) -> Option<&ScenarioView> {
        self.scenarios.iter().find(|s| s.id == id)
    }
}

impl ScenarioView {
    /// Whether a baseline expected its failure.
    pub fn is_expected_failure(&self) -> bool {
        matches!(self.baseline, Some(BaselineMark::ExpectedFailure { .. }))
    }

    /// Whether it failed or conform failed on it (a failure a baseline expected included).
    pub fn failed(&self) -> bool {
        matches!(self.status, StatusWord::Fail | StatusWord::Error)
    }

    /// The status as reports show it: `xfail` for a failure the baseline expected.
    pub fn status_word(&self) -> &'static str {
        match (self.status, self.is_expected_failure()) {
            (StatusWord::Fail | StatusWord::Error, true) => "xfail",
            (StatusWord::Pass, _) => "pass",
            (StatusWord::Fail, _) => "fail",
            (StatusWord::Skip, _) => "skip",
            (StatusWord::Error, _) => "error",
        }
    }
}
