//! `--summary-md FILE`: a Markdown summary for CI step summaries (e.g. append it to
//! `$GITHUB_STEP_SUMMARY`): the verdict, a table of requirements, a table of failures, and
//! what was skipped and why.

use std::fmt::Write as _;

use super::{Collector, RunReport, Sink, human_duration};
use crate::event::{Event, ReportError, Reporter};
use crate::exit;
use crate::outcome::{BaselineMark, Status};

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

/// Makes text safe inside a table cell: no pipes, no line breaks.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
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
    let verdict = match s.exit_code {
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
        let _ = writeln!(out, "| Claim | Verdict | Requirements | Why not a pass |");
        let _ = writeln!(out, "|---|---|---|---|");
        for c in &s.claims {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                cell(&c.name),
                c.verdict.as_str(),
                cell(&c.requirements.join(", ")),
                cell(&c.reasons.join("; "))
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
        let _ = writeln!(out, "| Scenario | Requirement | Level | Status | First finding |");
        let _ = writeln!(out, "|---|---|---|---|---|");
        for r in problems {
            let first = match (&r.status, &r.baseline) {
                (_, Some(BaselineMark::Stale { reason })) => {
                    format!("stale baseline entry (passes now): {reason}")
                }
                (Status::Error { message }, _) => format!("harness error: {message}"),
                _ => r
                    .findings
                    .first()
                    .map_or_else(String::new, |f| format!("[{}] {}", f.check, f.message)),
            };
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {} |",
                cell(&r.id),
                cell(&r.requirement),
                r.level,
                r.display_status(),
                cell(&first)
            );
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
