//! The human report: grouped by requirement, one line per scenario, then every failure with its
//! evidence and the command that reproduces it, then the verdicts.

use std::fmt::Write as _;

use super::{Collector, RunReport, Sink, human_duration};
use crate::event::{Event, ReportError, Reporter};
use crate::exit;
use crate::inert::Styles;
use crate::levels::{Claim, ClaimVerdict, KitCheckVerdict, KitStatus};
use crate::outcome::{BaselineMark, Note, ScenarioResult, Status, StepRecord};
use crate::scenario::Obligation;
use crate::summary::Verdict;

/// How many lines of a step's stderr the failure section shows.
pub const STDERR_LINES: usize = 8;

/// Writes the human report when the run finishes.
pub struct HumanReporter {
    sink: Sink,
    colour: bool,
    collector: Collector,
}

impl HumanReporter {
    /// A reporter writing to `sink`, with ANSI colours when `colour` is true.
    pub fn new(sink: Sink, colour: bool) -> Self {
        HumanReporter { sink, colour, collector: Collector::default() }
    }
}

impl Reporter for HumanReporter {
    fn handle(&mut self, event: &Event) -> Result<(), ReportError> {
        match self.collector.record(event) {
            Some(report) => self.sink.write_all(&render(&report, self.colour)),
            None => Ok(()),
        }
    }
}

/// ANSI styling that is a no-op when colour is off; its sequences carry the key of the
/// report's [`Styles`], so that only they survive the report's [`Styles::finish`].
#[derive(Debug, Clone, Copy)]
struct Paint(Option<Styles>);

impl Paint {
    fn wrap(self, code: &str, text: &str) -> String {
        match self.0 {
            Some(styles) => styles.wrap(code, text),
            None => text.to_owned(),
        }
    }
    fn red(self, t: &str) -> String {
        self.wrap("1;31", t)
    }
    fn green(self, t: &str) -> String {
        self.wrap("32", t)
    }
    fn yellow(self, t: &str) -> String {
        self.wrap("33", t)
    }
    fn dim(self, t: &str) -> String {
        self.wrap("2", t)
    }
    fn bold(self, t: &str) -> String {
        self.wrap("1", t)
    }
    fn status(self, r: &ScenarioResult) -> String {
        let word = format!("{:<6}", r.display_status());
        match (&r.status, r.is_expected_failure()) {
            (_, true) => self.yellow(&word),
            (Status::Pass, _) => self.green(&word),
            (Status::Fail, _) => self.red(&word.to_uppercase()),
            (Status::Skip { .. }, _) => self.dim(&word),
            (Status::Error { .. }, _) => self.red(&word.to_uppercase()),
        }
    }
    fn claim(self, c: Claim) -> String {
        match c {
            Claim::Pass => self.green(c.as_str()),
            Claim::Fail => self.red(c.as_str()),
            Claim::Incomplete => self.yellow(c.as_str()),
            Claim::NotApplicable => self.dim(c.as_str()),
        }
    }
    fn verdict(self, v: Verdict) -> String {
        match v {
            Verdict::Pass => self.green(v.as_str()),
            Verdict::Fail => self.red(v.as_str()),
            Verdict::Partial => self.yellow(v.as_str()),
            Verdict::Skipped => self.dim(v.as_str()),
        }
    }
}

/// The whole human report as text. Everything in it that conform did not write (the tool's
/// output, command lines, paths) is made inert ([`crate::inert`]): only conform's own colours
/// reach the terminal as escape sequences.
pub fn render(report: &RunReport, colour: bool) -> String {
    let styles = Styles::new();
    let p = Paint(colour.then_some(styles));
    let mut out = String::new();
    let info = &report.info;
    let _ = writeln!(
        out,
        "{} {} against the CLI Agent Spec {} ({} scenarios, {})",
        p.bold("conform:"),
        info.tool,
        info.spec_version,
        info.scenario_count,
        super::progress::at_a_time(info)
    );
    let id_width = report.results.iter().map(|r| r.id.len()).max().unwrap_or(0).max(20);
    for (requirement, group) in report.by_requirement() {
        let verdict = report
            .summary
            .requirements
            .iter()
            .find(|v| v.requirement == requirement)
            .map_or(Verdict::of(group.iter().copied()), |v| v.verdict);
        let _ = writeln!(out, "\n{} ({})", p.bold(requirement), p.verdict(verdict));
        for r in group {
            let _ = write!(out, "  {} {:<6} {:<id_width$}", p.status(r), r.level.as_str(), r.id);
            let tail = match (&r.status, &r.baseline) {
                (Status::Skip { reason }, _) => p.dim(&reason.to_string()),
                (Status::Error { message }, _) => {
                    format!("{}  harness error: {message}", human_duration(r.duration_ms))
                }
                (_, Some(BaselineMark::ExpectedFailure { reason })) => {
                    format!("{}  baseline: {reason}", human_duration(r.duration_ms))
                }
                (_, Some(BaselineMark::Stale { reason })) => format!(
                    "{}  {}",
                    human_duration(r.duration_ms),
                    p.red(&format!("stale baseline entry (now passes; remove it): {reason}"))
                ),
                (_, Some(BaselineMark::Unexpected)) => {
                    format!("{}  {}", human_duration(r.duration_ms), p.red("not in the baseline"))
                }
                (_, None) => human_duration(r.duration_ms),
            };
            let _ = writeln!(out, " {}", tail.trim_end());
        }
    }

    let failed: Vec<&ScenarioResult> = report
        .results
        .iter()
        .filter(|r| matches!(r.status, Status::Fail | Status::Error { .. }))
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(out, "\n{}", p.bold("Failures"));
        let mut any_repro = false;
        for r in failed {
            any_repro |= render_failure(&mut out, p, r);
        }
        if any_repro {
            let _ = writeln!(
                out,
                "\n{}",
                p.dim(
                    "The commands ran in the scenario's sandbox (its directory, with HOME, XDG_* \
                     and TMPDIR inside it), removed afterwards unless \
                     `conform run --keep-sandboxes` kept it."
                )
            );
        }
    }
    let flaky: Vec<&ScenarioResult> = report.results.iter().filter(|r| r.is_flaky()).collect();
    if !flaky.is_empty() {
        let _ = writeln!(out, "\n{}", p.bold("Flaky (failed beside the others, passed alone)"));
        for r in flaky {
            let first = r.first_run.as_ref().and_then(|f| f.findings.first());
            let why = first.map_or_else(String::new, |f| format!(": [{}] {}", f.check, f.message));
            let _ = writeln!(out, "  {} ({}, {}){why}", r.id, r.requirement, r.level);
        }
    }
    render_notes(&mut out, p, report);
    render_summary(&mut out, p, report);
    styles.finish(&out)
}

/// How many scenario ids a note lists before it only counts them.
const NOTE_IDS: usize = 3;

/// Advisory notes, each once with the scenarios it concerns; snapshot writes as counts.
fn render_notes(out: &mut String, p: Paint, report: &RunReport) {
    let mut notes: Vec<(&Note, Vec<&str>)> = Vec::new();
    let (mut written, mut updated) = (0, 0);
    for r in &report.results {
        for note in &r.notes {
            match note {
                Note::SnapshotWritten { .. } => written += 1,
                Note::SnapshotUpdated { .. } => updated += 1,
                _ => match notes.iter_mut().find(|(n, _)| *n == note) {
                    Some((_, ids)) => ids.push(&r.id),
                    None => notes.push((note, vec![&r.id])),
                },
            }
        }
    }
    if notes.is_empty() && written + updated == 0 {
        return;
    }
    let _ = writeln!(out, "\n{}", p.bold("Notes"));
    for (note, ids) in notes {
        let whom =
            if ids.len() <= NOTE_IDS { ids.join(", ") } else { format!("{} scenarios", ids.len()) };
        let _ = writeln!(out, "  {note} {}", p.dim(&format!("({whom})")));
    }
    if written + updated > 0 {
        let _ = writeln!(out, "  snapshots: {written} written, {updated} updated");
    }
}

/// Writes one failure; returns whether it showed a repro command.
fn render_failure(out: &mut String, p: Paint, r: &ScenarioResult) -> bool {
    let _ = writeln!(
        out,
        "\n{} {} ({}, {})",
        p.status(r).trim_end(),
        p.bold(&r.id),
        r.requirement,
        r.level
    );
    let _ = writeln!(out, "  criterion: {}", r.criterion);
    if let Some(BaselineMark::ExpectedFailure { reason }) = &r.baseline {
        let _ = writeln!(out, "  expected by the baseline: {reason}");
    }
    if let Status::Error { message } = &r.status {
        let _ = writeln!(out, "  conform failed: {message}");
    }
    if r.is_confirmed_failure() {
        let _ = writeln!(
            out,
            "  confirmed: it failed beside the other scenarios, and again alone with its role calibrated afresh (below: the run alone)"
        );
    }
    for finding in &r.findings {
        let text = finding.to_string();
        let mut lines = text.lines();
        if let Some(first) = lines.next() {
            let _ = writeln!(out, "  {first}");
        }
        for line in lines {
            // Evidence lines come indented by the finding's Display; re-indent uniformly.
            let line = line.strip_prefix("  ").unwrap_or(line);
            let _ = writeln!(out, "    {}", colour_diff_line(p, line));
        }
    }
    let steps = steps_to_show(r);
    for step in &steps {
        let _ = writeln!(out, "  reproduce `{}` ({}):", step.name, step.ended);
        let _ = writeln!(out, "    {}", step.repro);
        let stderr = step.stderr.text.trim_end();
        if !stderr.is_empty() {
            let lines: Vec<&str> = stderr.lines().collect();
            let shown = &lines[lines.len().saturating_sub(STDERR_LINES)..];
            let _ = writeln!(out, "  stderr of `{}` (last lines):", step.name);
            for line in shown {
                let _ = writeln!(out, "    {}", p.dim(line));
            }
        }
    }
    !steps.is_empty()
}

fn colour_diff_line(p: Paint, line: &str) -> String {
    if line.starts_with("+++") || line.starts_with("---") {
        p.bold(line)
    } else if line.starts_with('+') {
        p.green(line)
    } else if line.starts_with('-') {
        p.red(line)
    } else if line.starts_with("@@") {
        p.dim(line)
    } else {
        line.to_owned()
    }
}

/// The steps whose repro a failure shows: those its findings name, in order, or the last step
/// when no finding names one.
pub fn steps_to_show(r: &ScenarioResult) -> Vec<&StepRecord> {
    let mut shown: Vec<&StepRecord> = Vec::new();
    let mut unnamed = false;
    for finding in &r.findings {
        match &finding.step {
            Some(name) => {
                if let Some(step) = r.steps.iter().find(|s| &s.name == name) {
                    if !shown.iter().any(|s| s.name == step.name) {
                        shown.push(step);
                    }
                }
            }
            None => unnamed = true,
        }
    }
    if (unnamed || r.findings.is_empty()) && shown.is_empty() {
        if let Some(last) = r.steps.last() {
            shown.push(last);
        }
    }
    shown
}

/// The spec kit's checks on one line: how many passed, then the ones that failed or were
/// skipped, by the kit's id. `None` for a run without them.
pub(crate) fn kit_line(checks: &[KitCheckVerdict]) -> Option<String> {
    if checks.is_empty() {
        return None;
    }
    let named = |status: KitStatus| -> Vec<&str> {
        checks.iter().filter(|k| k.status == status).map(|k| k.check.as_str()).collect()
    };
    let mut parts = vec![format!("{} of {} pass", named(KitStatus::Pass).len(), checks.len())];
    for (status, word) in [(KitStatus::Fail, "fail"), (KitStatus::Skip, "skipped")] {
        let ids = named(status);
        if !ids.is_empty() {
            parts.push(format!("{word}: {}", ids.join(", ")));
        }
    }
    Some(format!("{} ({})", parts.join("; "), crate::levels::KIT_DIFFERENCE))
}

/// How many failed scenarios a failing claim names (the JSON report has them all).
const CLAIM_FAILURES_SHOWN: usize = 5;

/// The spec levels on one line, §79 on the next, then one line per claim that is not a pass:
/// the failures by id, and how many scenarios were not judged (the coverage lines say why).
fn render_claims(out: &mut String, p: Paint, claims: &[ClaimVerdict]) {
    let (levels, others): (Vec<&ClaimVerdict>, Vec<&ClaimVerdict>) =
        claims.iter().partition(|c| c.claim.starts_with("level-"));
    let line: Vec<String> =
        levels.iter().map(|c| format!("{} {}", c.name, p.claim(c.verdict))).collect();
    if !line.is_empty() {
        let _ = writeln!(out, "  spec levels: {}", line.join(", "));
    }
    for c in &others {
        let _ = writeln!(out, "  {}: {}", c.name, p.claim(c.verdict));
    }
    for c in claims.iter().filter(|c| c.verdict != Claim::Pass) {
        let mut why = Vec::new();
        if !c.failed.is_empty() {
            let mut shown: Vec<&str> =
                c.failed.iter().take(CLAIM_FAILURES_SHOWN).map(String::as_str).collect();
            let more = c.failed.len().saturating_sub(CLAIM_FAILURES_SHOWN);
            let extra = format!("and {more} more");
            if more > 0 {
                shown.push(&extra);
            }
            why.push(format!("failed {}", shown.join(", ")));
        }
        if c.not_judged > 0 {
            why.push(format!("{} `must` scenario(s) not judged", c.not_judged));
        }
        if why.is_empty() {
            why.extend(c.reasons.iter().cloned());
        }
        let _ = writeln!(out, "    {} {}: {}", c.claim, c.verdict.as_str(), why.join("; "));
    }
}

/// The verdicts conform ran again alone: the failures that repeated, those that did not.
fn render_confirmation(out: &mut String, s: &crate::summary::RunSummary) {
    let c = &s.confirmation;
    if !c.confirmed.is_empty() {
        let _ = writeln!(
            out,
            "  confirmed alone: {} failure(s) repeated when run again alone with the role calibrated afresh: {}",
            c.confirmed.len(),
            c.confirmed.join(", ")
        );
    }
    if !c.flaky.is_empty() {
        let _ = writeln!(
            out,
            "  flaky: {} scenario(s) failed beside the others and passed alone (not counted; the machine's load, or a fault that shows only under load): {}",
            c.flaky.len(),
            c.flaky.join(", ")
        );
    }
    if !c.rerun_for_premise.is_empty() {
        let _ = writeln!(
            out,
            "  run again alone for a premise the load denied: {}",
            c.rerun_for_premise.join(", ")
        );
    }
}

/// How the pace went, in one line.
fn pace_line(pace: &crate::pace::PaceSummary) -> String {
    let cpu = pace
        .cpu_per_call_us
        .map_or_else(|| "unmeasured".to_owned(), |us| format!("{:.1} ms", us as f64 / 1000.0));
    let wait = pace.mean_run_delay_us.map_or_else(
        || "unknown (no scheduler statistics)".to_owned(),
        |us| format!("{:.0} ms", us as f64 / 1000.0),
    );
    format!(
        "{} at once first (the tool's CPU per call: {cpu}), {} at most (of {}), {} at the end; cut {} time(s) when the machine stretched the processes; mean wait for a CPU {wait}",
        pace.first, pace.peak, pace.ceiling, pace.last, pace.falls
    )
}

fn render_summary(out: &mut String, p: Paint, report: &RunReport) {
    let s = &report.summary;
    let c = &s.counts;
    let _ = writeln!(out, "\n{}", p.bold("Summary"));
    let mut parts = vec![format!("{} passed", c.pass), format!("{} failed", c.fail)];
    if c.expected_fail > 0 {
        parts.push(format!("{} expected failures", c.expected_fail));
    }
    parts.push(format!("{} skipped", c.skip));
    if c.error > 0 {
        parts.push(format!("{} harness errors", c.error));
    }
    let _ = writeln!(
        out,
        "  scenarios: {} ({} in all, {})",
        parts.join(", "),
        c.total,
        human_duration(s.duration_ms)
    );
    let levels: Vec<String> =
        s.levels.iter().map(|l| format!("{} {}", l.level, p.verdict(l.verdict))).collect();
    if !levels.is_empty() {
        let _ = writeln!(out, "  levels: {}", levels.join(", "));
    }
    render_claims(out, p, &s.claims);
    if let Some(line) = kit_line(&s.kit_checks) {
        let _ = writeln!(out, "  spec kit checks: {line}");
    }
    let _ = writeln!(
        out,
        "  coverage: {} of {} scenarios ran",
        s.coverage.run,
        s.coverage.run + s.coverage.skipped
    );
    for group in &s.coverage.skip_reasons {
        let _ = writeln!(out, "    skipped ({}): {}", group.reason, group.scenarios.join(", "));
    }
    if !s.coverage.roles_missing.is_empty() {
        let _ = writeln!(
            out,
            "    roles missing from the profile: {}",
            s.coverage.roles_missing.join(", ")
        );
    }
    for fill in &s.coverage.roles_filled {
        let _ = writeln!(
            out,
            "    role `{}` played by the profile's `{}` (`{}` declares what it needs)",
            fill.role, fill.by, fill.command
        );
    }
    let unjudged = &s.coverage.unjudged_musts;
    if !unjudged.is_empty() {
        let what =
            if s.allow_unjudged { "accepted by the gate" } else { "so the run is not green" };
        let _ = writeln!(
            out,
            "    {} `must` scenario(s) not judged for a reason the profile can fix ({what}; the skip reasons above say how)",
            unjudged.len()
        );
    }
    render_confirmation(out, s);
    if let Some(pace) = &s.pace {
        let _ = writeln!(out, "  pace: {}", pace_line(pace));
    }
    if s.baseline.in_use {
        let _ = writeln!(
            out,
            "  baseline: {} expected failures, {} unexpected failures, {} stale entries",
            s.baseline.expected_failures.len(),
            s.baseline.unexpected_failures.len(),
            s.baseline.stale.len()
        );
        if !s.baseline.stale.is_empty() {
            let _ = writeln!(
                out,
                "    stale (these pass now; remove them from the baseline): {}",
                s.baseline.stale.join(", ")
            );
        }
        if !s.baseline.unexpected_failures.is_empty() {
            let _ = writeln!(
                out,
                "    unexpected (fix them or add them to the baseline with a reason): {}",
                s.baseline.unexpected_failures.join(", ")
            );
        }
    }
    let verdict = match s.exit_code {
        exit::SUCCESS if s.coverage.skipped > 0 => p.green(&format!(
            "CONFORMANT in what ran ({} of {} scenarios not judged)",
            s.coverage.skipped,
            s.coverage.run + s.coverage.skipped
        )),
        exit::SUCCESS => p.green("CONFORMANT"),
        exit::NOT_CONFORMANT if !s.failed_at(Obligation::Must) => {
            p.red("NOT CONFORMANT under the strict gate (a `should` failed)")
        }
        exit::NOT_CONFORMANT => p.red("NOT CONFORMANT"),
        exit::BASELINE_MISMATCH => p.red("CONFORMANT, BUT THE BASELINE DOES NOT MATCH"),
        exit::UNJUDGED => p.red(&format!(
            "NOT JUDGED: {} `must` scenario(s) could not be judged, for reasons the profile can fix",
            s.coverage.unjudged_musts.len()
        )),
        exit::INTERRUPTED => p.red("INTERRUPTED: a partial report of what finished"),
        _ => p.red("NO VERDICT (conform failed)"),
    };
    let _ =
        writeln!(out, "  verdict: {verdict} (exit {} {})", s.exit_code, exit::name(s.exit_code));
}
