//! `--summary-md FILE`: a Markdown summary for CI step summaries (e.g. append it to
//! `$GITHUB_STEP_SUMMARY`): the verdict, a table of requirements, a compact table of the
//! spec's claims (verdict, counts, the first three reasons and how many more), a table of
//! failures with one row per finding (its first line and the command that reproduces its
//! step), and what was skipped and why.

use std::fmt::Write as _;

use super::{Collector, RunReport, Sink, human_duration};
use crate::event::{Event, ReportError, Reporter};
use crate::exit;
use crate::inert;
use crate::outcome::{BaselineMark, Repro, ScenarioResult, Status, StepRecord};

/// Writes the Markdown summary when the run finishes.
pub struct MarkdownReporter {
    sink: Sink,
    collector: Collector,
}

impl MarkdownReporter {
    /// A reporter writing to `sink`.
    pub fn new(sink: Sink) -> Self {
        MarkdownReporter { sink, collector: Collector::default() }
    }
}

impl Reporter for MarkdownReporter {
    fn handle(&mut self, event: &Event) -> Result<(), ReportError> {
        match self.collector.record(event) {
            Some(report) => self.sink.write_all(&render(&report)),
            None => Ok(()),
        }
    }
}

/// Makes text safe inside a table cell: no pipes, no line breaks, no control character
/// ([`inert::line`]).
fn cell(text: &str) -> String {
    inert::line(&text.replace('|', "\\|").replace(['\n', '\r'], " ")).into_owned()
}

/// How many of a claim's reasons the claim table shows; the rest are counted.
pub const CLAIM_REASONS_SHOWN: usize = 3;

/// The first [`CLAIM_REASONS_SHOWN`] reasons, then how many more there are.
fn first_reasons(reasons: &[String]) -> String {
    let shown: Vec<&str> = reasons.iter().take(CLAIM_REASONS_SHOWN).map(String::as_str).collect();
    let mut text = shown.join("; ");
    let rest = reasons.len().saturating_sub(CLAIM_REASONS_SHOWN);
    if rest > 0 {
        let _ = write!(text, "; and {rest} more");
    }
    text
}

/// The rows of a failed scenario: each finding's first line with the step it names (the last
/// step when it names none), or the one line of a harness error or a stale baseline entry.
fn failure_lines(r: &ScenarioResult) -> Vec<(String, Option<&StepRecord>)> {
    let last = r.steps.last();
    match (&r.status, &r.baseline) {
        (_, Some(BaselineMark::Stale { reason })) => {
            vec![(format!("stale baseline entry (passes now): {reason}"), None)]
        }
        (Status::Error { message }, _) => vec![(format!("harness error: {message}"), last)],
        _ => r
            .findings
            .iter()
            .map(|f| {
                let line = f.message.lines().next().unwrap_or_default();
                let step = match &f.step {
                    Some(name) => r.steps.iter().find(|s| &s.name == name).or(last),
                    None => last,
                };
                (format!("[{}] {line}", f.check), step)
            })
            .collect(),
    }
}

/// The command that runs a step again: the variables that differ from the sandbox's, the argv
/// shell-quoted, stdin as it was. The working directory is left out: the sandbox is gone.
pub fn repro_command(repro: &Repro) -> String {
    Repro { cwd: None, ..repro.clone() }.to_string()
}

/// Text as an inline code span inside a table cell: pipes escaped, a line break a space, and a
/// fence longer than any run of backticks in it.
fn code(text: &str) -> String {
    let text = cell(text);
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    if longest == 0 { format!("{fence}{text}{fence}") } else { format!("{fence} {text} {fence}") }
}

/// The Markdown summary of a finished run.
pub fn render(report: &RunReport) -> String {
    let s = &report.summary;
    let c = &s.counts;
    let mut out = String::new();
    let partly = format!(
        "conformant in what ran ({} of {} scenarios not judged)",
        s.coverage.skipped,
        s.coverage.run + s.coverage.skipped
    );
    let unjudged = format!(
        "not judged: {} `must` scenario(s) skipped for reasons the profile can fix",
        s.coverage.unjudged_musts.len()
    );
    let verdict = match s.exit_code {
        exit::UNJUDGED => unjudged.as_str(),
        exit::SUCCESS if s.coverage.skipped > 0 => partly.as_str(),
        exit::SUCCESS => "conformant",
        exit::NOT_CONFORMANT => "NOT conformant",
        exit::BASELINE_MISMATCH => "conformant, but the baseline does not match",
        exit::INTERRUPTED => "not judged: conform was interrupted (partial report)",
        _ => "not judged: conform failed",
    };
    let _ = writeln!(out, "## conform: `{}` is {verdict}\n", cell(&report.info.tool));
    let _ = writeln!(
        out,
        "CLI Agent Spec {} · exit {} `{}` · {} passed, {} failed, {} expected failures, {} skipped, {} harness errors · {}\n",
        report.info.spec_version,
        s.exit_code,
        exit::name(s.exit_code),
        c.pass,
        c.fail,
        c.expected_fail,
        c.skip,
        c.error,
        human_duration(s.duration_ms)
    );
    let _ = writeln!(out, "| Requirement | Verdict | Pass | Fail | Expected fail | Skip | Error |");
    let _ = writeln!(out, "|---|---|---:|---:|---:|---:|---:|");
    for r in &s.requirements {
        let k = &r.counts;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            cell(&r.requirement),
            r.verdict,
            k.pass,
            k.fail,
            k.expected_fail,
            k.skip,
            k.error
        );
    }
    let _ = writeln!(out);
    let levels: Vec<String> =
        s.levels.iter().map(|l| format!("`{}` {}", l.level, l.verdict)).collect();
    if !levels.is_empty() {
        let _ = writeln!(out, "Levels: {}\n", levels.join(" · "));
    }
    if !s.claims.is_empty() {
        let _ = writeln!(out, "| Claim | Verdict | Pass | Fail | Not judged | Why not a pass |");
        let _ = writeln!(out, "|---|---|---:|---:|---:|---|");
        for c in &s.claims {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                cell(&c.name),
                c.verdict.as_str(),
                c.counts.pass,
                c.counts.fail,
                c.not_judged,
                cell(&first_reasons(&c.reasons))
            );
        }
        let _ = writeln!(out);
    }
    if let Some(line) = super::human::kit_line(&s.kit_checks) {
        let _ = writeln!(out, "Spec kit checks: {}\n", cell(&line));
    }

    let problems: Vec<_> = report
        .results
        .iter()
        .filter(|r| {
            matches!(r.status, Status::Fail | Status::Error { .. }) || r.is_baseline_surprise()
        })
        .collect();
    if !problems.is_empty() {
        let _ = writeln!(out, "### Failures\n");
        let _ = writeln!(out, "| Scenario | Level | Status | Finding | Reproduce |");
        let _ = writeln!(out, "|---|---|---|---|---|");
        for r in problems {
            for (message, step) in failure_lines(r) {
                let repro = step.map_or_else(String::new, |s| code(&repro_command(&s.repro)));
                let _ = writeln!(
                    out,
                    "| `{}` | {} | {} | {} | {} |",
                    cell(&r.id),
                    r.level,
                    r.display_status(),
                    cell(&message),
                    repro
                );
            }
        }
        let _ = writeln!(out);
    }

    let expected: Vec<_> = report
        .results
        .iter()
        .filter_map(|r| match &r.baseline {
            Some(BaselineMark::ExpectedFailure { reason }) => Some((r, reason)),
            _ => None,
        })
        .collect();
    if !expected.is_empty() {
        let _ = writeln!(out, "### Expected failures (baseline)\n");
        let _ = writeln!(out, "| Scenario | Level | Reason |");
        let _ = writeln!(out, "|---|---|---|");
        for (r, reason) in expected {
            let _ = writeln!(out, "| `{}` | {} | {} |", cell(&r.id), r.level, cell(reason));
        }
        let _ = writeln!(out);
    }

    if !s.confirmation.flaky.is_empty() {
        let ids: Vec<String> =
            s.confirmation.flaky.iter().map(|id| format!("`{}`", cell(id))).collect();
        let _ = writeln!(
            out,
            "Flaky (failed beside the other scenarios, passed alone; not counted): {}\n",
            ids.join(", ")
        );
    }

    if !s.coverage.skip_reasons.is_empty() {
        let _ = writeln!(
            out,
            "### Not judged ({} of {} scenarios skipped)\n",
            s.coverage.skipped,
            s.coverage.run + s.coverage.skipped
        );
        let _ = writeln!(out, "| Reason | Scenarios |");
        let _ = writeln!(out, "|---|---|");
        for group in &s.coverage.skip_reasons {
            let ids: Vec<String> =
                group.scenarios.iter().map(|id| format!("`{}`", cell(id))).collect();
            let _ = writeln!(out, "| {} | {} |", cell(&group.reason), ids.join(", "));
        }
        let _ = writeln!(out);
    }
    out
}
