//! Stage: report. Turns the event stream of a run into the outputs people and machines read.
//!
//! | output                   | reporter                    | where                      |
//! |--------------------------|-----------------------------|----------------------------|
//! | human report             | [`human::HumanReporter`]    | stdout (`--format human`)  |
//! | one JSON envelope        | [`json::JsonReporter`]      | stdout (`--format json`)   |
//! | JUnit XML                | [`junit::JunitReporter`]    | `--junit FILE`             |
//! | Markdown summary         | [`markdown::MarkdownReporter`] | `--summary-md FILE`     |
//! | one HTML page            | [`html::HtmlReporter`]      | `--html FILE`              |
//! | progress while running   | [`progress::ProgressReporter`] | stderr                  |
//!
//! Every reporter consumes the same [`crate::event::Event`]s. The end-of-run reports are also
//! available as pure functions (`human::render`, `json::envelope`, `junit::render`,
//! `markdown::render`) of a [`RunReport`], which is what the tests snapshot.
//!
//! Colour: the human report is coloured only when stdout is a terminal and `NO_COLOR` is unset
//! or empty ([`colour_for_stdout`]); the progress reporter decides the same for stderr.

pub mod html;
pub mod human;
pub mod json;
pub mod junit;
pub mod markdown;
pub mod progress;

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};

use crate::event::{Event, ReportError, Reporter, RunInfo};
use crate::outcome::ScenarioResult;
use crate::summary::RunSummary;

/// Everything an end-of-run report shows.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// What was run.
    pub info: RunInfo,
    /// Every scenario's result, sorted by requirement, then scenario id.
    pub results: Vec<ScenarioResult>,
    /// The verdicts.
    pub summary: RunSummary,
}

impl RunReport {
    /// A report of these results; sorts them by requirement, then id.
    pub fn new(info: RunInfo, mut results: Vec<ScenarioResult>, summary: RunSummary) -> Self {
        results.sort_by(|a, b| (&a.requirement, &a.id).cmp(&(&b.requirement, &b.id)));
        RunReport { info, results, summary }
    }

    /// The results grouped by requirement, in order.
    pub fn by_requirement(&self) -> Vec<(&str, Vec<&ScenarioResult>)> {
        let mut groups: Vec<(&str, Vec<&ScenarioResult>)> = Vec::new();
        for r in &self.results {
            match groups.last_mut() {
                Some((req, group)) if *req == r.requirement => group.push(r),
                _ => groups.push((&r.requirement, vec![r])),
            }
        }
        groups
    }
}

/// Gathers events until the run finishes; shared by the end-of-run reporters.
#[derive(Debug, Default)]
pub struct Collector {
    info: Option<RunInfo>,
    results: Vec<ScenarioResult>,
}

impl Collector {
    /// Records an event; returns the complete report when the event ends the run.
    pub fn record(&mut self, event: &Event) -> Option<RunReport> {
        match event {
            Event::RunStarted(info) => self.info = Some(info.clone()),
            // The report is made of results; calibrations and setups show in their notes and errors.
            // A result to confirm comes again, final, as `ScenarioFinished`.
            Event::ScenarioStarted { .. }
            | Event::Calibrated { .. }
            | Event::SetupFailed { .. }
            | Event::ScenarioToConfirm(_) => {}
            Event::ScenarioFinished(result) => self.results.push((**result).clone()),
            Event::RunFinished(summary) => {
                let info = self.info.take().unwrap_or_else(|| RunInfo {
                    tool: String::new(),
                    spec_version: SPEC_VERSION.to_owned(),
                    scenario_count: self.results.len(),
                    jobs: 1,
                    paced_from: None,
                });
                let results = std::mem::take(&mut self.results);
                return Some(RunReport::new(info, results, summary.clone()));
            }
        }
        None
    }
}

/// The schema version of the contract conform checks.
pub const SPEC_VERSION: &str = "3.20";

/// Where a reporter writes.
pub struct Sink {
    label: String,
    writer: Box<dyn Write + Send>,
}

impl Sink {
    /// conform's stdout.
    pub fn stdout() -> Self {
        Sink { label: "stdout".to_owned(), writer: Box::new(std::io::stdout()) }
    }

    /// conform's stderr.
    pub fn stderr() -> Self {
        Sink { label: "stderr".to_owned(), writer: Box::new(std::io::stderr()) }
    }

    /// A file, created (or truncated) now so that a bad path fails before anything runs.
    pub fn create_file(path: &Path) -> Result<Self, ReportError> {
        let file = File::create(path)
            .map_err(|e| ReportError::new(format!("create {}", path.display()), e))?;
        Ok(Sink { label: path.display().to_string(), writer: Box::new(BufWriter::new(file)) })
    }

    /// Any writer (tests use a shared buffer).
    pub fn writer(label: impl Into<String>, writer: Box<dyn Write + Send>) -> Self {
        Sink { label: label.into(), writer }
    }

    /// Writes all of `text` and flushes.
    pub fn write_all(&mut self, text: &str) -> Result<(), ReportError> {
        self.writer
            .write_all(text.as_bytes())
            .and_then(|()| self.writer.flush())
            .map_err(|e| ReportError::new(format!("write to {}", self.label), e))
    }
}

/// Whether conform's stdout should be coloured: a terminal, and `NO_COLOR` unset or empty.
pub fn colour_for_stdout() -> bool {
    std::io::stdout().is_terminal() && no_color_unset()
}

/// Whether conform's stderr should be coloured: a terminal, and `NO_COLOR` unset or empty.
pub fn colour_for_stderr() -> bool {
    std::io::stderr().is_terminal() && no_color_unset()
}

fn no_color_unset() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The main report on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// The human report.
    #[default]
    Human,
    /// One JSON envelope.
    Json,
}

/// Which reports a run writes.
#[derive(Debug, Clone, Default)]
pub struct ReportOptions {
    /// The report on stdout.
    pub format: Format,
    /// `--junit FILE`.
    pub junit: Option<PathBuf>,
    /// `--summary-md FILE`.
    pub summary_md: Option<PathBuf>,
    /// Progress lines on stderr while running.
    pub progress: bool,
    /// `--evidence`: which records of the JSON report keep the tool's output.
    pub evidence: json::Evidence,
    /// `-v`: the human report lists every scenario, the progress lines every skip.
    pub verbose: bool,
    /// `--html FILE`.
    pub html: Option<PathBuf>,
}

/// The reporters for these options, in the order they get each event. Files are created now,
/// so a bad path is reported before anything runs.
pub fn reporters(options: &ReportOptions) -> Result<Vec<Box<dyn Reporter>>, ReportError> {
    let mut out: Vec<Box<dyn Reporter>> = Vec::new();
    if options.progress {
        out.push(Box::new(
            progress::ProgressReporter::stderr()
                .verbose(options.verbose)
                .report_follows(options.format == Format::Human),
        ));
    }
    match options.format {
        Format::Human => out.push(Box::new(
            human::HumanReporter::new(Sink::stdout(), colour_for_stdout()).verbose(options.verbose),
        )),
        Format::Json => {
            out.push(Box::new(json::JsonReporter::new(Sink::stdout(), options.evidence)))
        }
    }
    if let Some(path) = &options.junit {
        out.push(Box::new(junit::JunitReporter::new(Sink::create_file(path)?)));
    }
    if let Some(path) = &options.summary_md {
        out.push(Box::new(markdown::MarkdownReporter::new(Sink::create_file(path)?)));
    }
    if let Some(path) = &options.html {
        out.push(Box::new(html::HtmlReporter::new(Sink::create_file(path)?)));
    }
    Ok(out)
}

/// A duration for people: `850ms`, `2.03s`, `1m05s`.
pub fn human_duration(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{}.{:02}s", ms / 1000, (ms % 1000) / 10)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}
