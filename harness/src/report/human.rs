//! The human report, for a person at a terminal: what failed with its evidence and the command
//! that reproduces it, what was skipped and why (each reason once, with its count), the
//! verdicts; what passed only as a count per requirement. It fits a screen when the tool
//! passes. Verbose (`conform run -v`) lists every scenario under its requirement and the
//! scenarios of each skip reason, as the report did before it was brief.
//!
//! It does not repeat the progress lines ([`super::progress`]): those say as the run goes
//! which scenario finished and each role's calibration; the report says what the run came to.

use std::fmt::Write as _;

use super::{Collector, RunReport, Sink, human_duration};
use crate::event::{Event, ReportError, Reporter};
use crate::exit;
use crate::inert::Styles;
use crate::levels::{Claim, ClaimVerdict, KitCheckVerdict, KitStatus};
use crate::outcome::{BaselineMark, Note, ScenarioResult, SkipReason, Status, StepRecord};
use crate::scenario::Obligation;
use crate::summary::Verdict;

/// How many lines of a step's stderr the failure section shows.
pub const STDERR_LINES: usize = 8;

/// Writes the human report when the run finishes.
pub struct HumanReporter {
    sink: Sink,
    colour: bool,
    verbose: bool,
    collector: Collector,
}

impl HumanReporter {
    /// A reporter writing to `sink`, with ANSI colours when `colour` is true.
    pub fn new(sink: Sink, colour: bool) -> Self {
        HumanReporter { sink, colour, verbose: false, collector: Collector::default() }
    }

    /// The same, listing every scenario ([`render_with`]) when `verbose`.
    #[must_use]
    pub fn verbose(mut self, verbose: bool) -> Self {
        self.verbose = verbose;
        self
    }
}

impl Reporter for HumanReporter {
    fn handle(&mut self, event: &Event) -> Result<(), ReportError> {
        match self.collector.record(event) {
            Some(report) => self.sink.write_all(&render_with(&report, self.colour, self.verbose)),
            None => Ok(()),
        }
    }
}

/// The width of a requirement's verdict word and the space after it, in the brief list.
const VERDICT_WIDTH: usize = 9;

/// How wide a line of the report's lists may grow before it wraps.
const LIST_WIDTH: usize = 100;

/// `items` joined by `, ` on lines that begin with `first` (the first line; it shows
/// `first_width` characters, its colour aside) or `indent` spaces (the others), wrapped before
/// [`LIST_WIDTH`].
fn wrapped(first: &str, (first_width, indent): (usize, usize), items: &[String]) -> Vec<String> {
    let first_width = first_width.max(indent);
    let indent = " ".repeat(indent);
    let mut lines = Vec::new();
    let mut line = first.to_owned();
    let mut width = first_width;
    let mut empty = true;
    for (n, item) in items.iter().enumerate() {
        let piece = if n + 1 < items.len() { format!("{item},") } else { item.clone() };
        if !empty && width + 1 + piece.chars().count() > LIST_WIDTH {
            lines.push(std::mem::replace(&mut line, indent.clone()));
            width = indent.len();
            empty = true;
        }
        if !empty {
            line.push(' ');
            width += 1;
        }
        line.push_str(&piece);
        width += piece.chars().count();
        empty = false;
    }
    lines.push(line);
    lines
}

/// Whether a skip is the profile's absence: a role or kit probe that only a profile names.
fn for_want_of_a_profile(reason: &SkipReason) -> bool {
    matches!(
        reason,
        SkipReason::MissingRoles { profile: false, .. }
            | SkipReason::MissingKit { profile: false, .. }
    )
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
    /// A requirement's verdict as the first word of a line, padded (and in capitals when it
    /// fails, like a failed scenario).
    fn verdict_word(self, v: Verdict) -> String {
        let word =
            format!("{:<VERDICT_WIDTH$}", if v == Verdict::Fail { "FAIL" } else { v.as_str() });
        match v {
            Verdict::Pass => self.green(&word),
            Verdict::Fail => self.red(&word),
            Verdict::Partial => self.yellow(&word),
            Verdict::Skipped => self.dim(&word),
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

/// The whole human report as text, brief. Everything in it that conform did not write (the
/// tool's output, command lines, paths) is made inert ([`crate::inert`]): only conform's own
/// colours reach the terminal as escape sequences.
pub fn render(report: &RunReport, colour: bool) -> String {
    render_with(report, colour, false)
}

/// The human report, brief or (`verbose`) listing every scenario: under its requirement with
/// its status, and under its skip reason.
pub fn render_with(report: &RunReport, colour: bool, verbose: bool) -> String {
    let styles = Styles::new();
    let p = Paint(colour.then_some(styles));
    let mut out = String::new();
    let info = &report.info;
    // How many scenarios and how many at once: the progress lines said it as the run began,
    // and the summary says it again.
    let _ = writeln!(
        out,
        "{} {} against the CLI Agent Spec {}",
        p.bold("conform:"),
        info.tool,
        info.spec_version
    );
    let unprofiled = report
        .results
        .iter()
        .filter(|r| matches!(&r.status, Status::Skip { reason } if for_want_of_a_profile(reason)))
        .count();
    if unprofiled > 0 {
        let _ = writeln!(
            out,
            "no profile: {unprofiled} of {} scenarios need roles or kit probes that only a profile names; `conform init {}` drafts one (`conform manual profile`)",
            report.results.len(),
            crate::outcome::shell_quote(&info.tool)
        );
    }
    match verbose {
        true => render_scenarios(&mut out, p, report),
        false => render_requirements(&mut out, p, report),
    }
    render_failures(&mut out, p, report);
    render_skips(&mut out, p, report, verbose);
    render_notes(&mut out, p, report, verbose);
    render_summary(&mut out, p, report);
    styles.finish(&out)
}

/// The verdict on each requirement (as the summary computed it).
fn requirement_verdict(
    report: &RunReport,
    requirement: &str,
    group: &[&ScenarioResult],
) -> Verdict {
    report
        .summary
        .requirements
        .iter()
        .find(|v| v.requirement == requirement)
        .map_or(Verdict::of(group.iter().copied()), |v| v.verdict)
}

/// Brief: the requirements by verdict, a failing one with the scenarios that failed it.
fn render_requirements(out: &mut String, p: Paint, report: &RunReport) {
    let groups = report.by_requirement();
    let _ =
        writeln!(out, "\n{} ({}; `-v` lists every scenario)", p.bold("Requirements"), groups.len());
    let mut by_verdict: Vec<(Verdict, Vec<String>)> = Vec::new();
    for (requirement, group) in &groups {
        let verdict = requirement_verdict(report, requirement, group);
        if verdict == Verdict::Fail {
            let failed: Vec<String> = group
                .iter()
                .filter(|r| r.counts_against_conformance())
                .map(|r| r.id.clone())
                .collect();
            let tail = format!("{requirement}: {} of {} failed: ", failed.len(), group.len());
            let head = format!("  {}{tail}", p.verdict_word(verdict));
            let widths = (2 + VERDICT_WIDTH + tail.len(), 2 + VERDICT_WIDTH);
            for line in wrapped(&head, widths, &failed) {
                let _ = writeln!(out, "{line}");
            }
            continue;
        }
        match by_verdict.iter_mut().find(|(v, _)| *v == verdict) {
            Some((_, names)) => names.push((*requirement).to_owned()),
            None => by_verdict.push((verdict, vec![(*requirement).to_owned()])),
        }
    }
    by_verdict.sort_by_key(|(v, _)| match v {
        Verdict::Fail => 0,
        Verdict::Partial => 1,
        Verdict::Pass => 2,
        Verdict::Skipped => 3,
    });
    for (verdict, names) in by_verdict {
        let head = format!("  {}", p.verdict_word(verdict));
        for line in wrapped(&head, (2 + VERDICT_WIDTH, 2 + VERDICT_WIDTH), &names) {
            let _ = writeln!(out, "{line}");
        }
    }
}

/// Verbose: every scenario under its requirement, one line each.
fn render_scenarios(out: &mut String, p: Paint, report: &RunReport) {
    let id_width = report.results.iter().map(|r| r.id.len()).max().unwrap_or(0).max(20);
    for (requirement, group) in report.by_requirement() {
        let verdict = requirement_verdict(report, requirement, &group);
        let _ = writeln!(out, "\n{} ({})", p.bold(requirement), p.verdict(verdict));
        for r in &group {
            let _ = write!(out, "  {} {:<6} {:<id_width$}", p.status(r), r.level.as_str(), r.id);
            let tail = match (&r.status, &r.baseline) {
                // Its reason is said once, under Skipped, with the others it skipped.
                (Status::Skip { .. }, _) => String::new(),
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
}

/// Every failure and harness error with its evidence, then the flaky scenarios.
fn render_failures(out: &mut String, p: Paint, report: &RunReport) {
    let failed: Vec<&ScenarioResult> = report
        .results
        .iter()
        .filter(|r| matches!(r.status, Status::Fail | Status::Error { .. }))
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(out, "\n{}", p.bold("Failures"));
        let mut any_repro = false;
        for r in failed {
            any_repro |= render_failure(out, p, r);
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
}

/// The skipped scenarios, one line per reason with its count (verbose: and its scenarios);
/// the profile's absence, said at the top, is one line here whatever roles it left out.
fn render_skips(out: &mut String, p: Paint, report: &RunReport, verbose: bool) {
    let skipped: Vec<(&ScenarioResult, &SkipReason)> = report
        .results
        .iter()
        .filter_map(|r| match &r.status {
            Status::Skip { reason } => Some((r, reason)),
            _ => None,
        })
        .collect();
    if skipped.is_empty() {
        return;
    }
    let hint = if verbose { "" } else { "; `-v` lists them" };
    let count = match skipped.len() {
        1 => "1 scenario".to_owned(),
        n => format!("{n} scenarios"),
    };
    let _ = writeln!(out, "\n{} ({count}{hint})", p.bold("Skipped"));
    // Reasons in the order they first come, each with its scenarios.
    let mut reasons: Vec<(String, bool, Vec<&str>)> = Vec::new();
    for (r, reason) in &skipped {
        let text = reason.to_string();
        match reasons.iter_mut().find(|(t, _, _)| *t == text) {
            Some((_, _, ids)) => ids.push(&r.id),
            None => reasons.push((text, for_want_of_a_profile(reason), vec![&r.id])),
        }
    }
    let width = skipped.len().to_string().len();
    let unprofiled: usize =
        reasons.iter().filter(|(_, absent, _)| *absent).map(|(_, _, ids)| ids.len()).sum();
    if unprofiled > 0 {
        // Which roles: the summary's coverage lines name them.
        let roles = !report.summary.coverage.roles_missing.is_empty();
        let kit =
            skipped.iter().any(|(_, r)| matches!(r, SkipReason::MissingKit { profile: false, .. }));
        let what = match (roles, kit) {
            (true, true) => "the roles and the kit probes a profile names",
            (true, false) => "the roles a profile names",
            (false, _) => "the kit probes a profile names",
        };
        let _ = writeln!(out, "  {unprofiled:>width$}  no profile (above): {what}");
    }
    for (text, absent, ids) in &reasons {
        if *absent && !verbose {
            continue;
        }
        let indent = if *absent { "    " } else { "  " };
        let _ = writeln!(out, "{indent}{:>width$}  {}", ids.len(), p.dim(text));
        if verbose {
            let ids: Vec<String> = ids.iter().map(|id| (*id).to_owned()).collect();
            let head = format!("{indent}{}  ", " ".repeat(width));
            let widths = (head.len(), head.len());
            for line in wrapped(&head, widths, &ids) {
                let _ = writeln!(out, "{line}");
            }
        }
    }
}

/// How many scenario ids a note lists before it only counts them.
const NOTE_IDS: usize = 3;

/// How many entries outside the sandbox the brief report names.
const OUTSIDE_SHOWN: usize = 3;

/// Advisory notes, each once with the scenarios it concerns; snapshot writes as counts. Brief:
/// the writes outside the sandbox are one line (the entries of every scenario, merged), and
/// the calibrations, which the progress lines gave, are left out.
fn render_notes(out: &mut String, p: Paint, report: &RunReport, verbose: bool) {
    let mut notes: Vec<(&Note, Vec<&str>)> = Vec::new();
    let (mut written, mut updated) = (0, 0);
    let mut outside: Vec<&str> = Vec::new();
    let mut outside_ids: Vec<&str> = Vec::new();
    for r in &report.results {
        for note in &r.notes {
            match note {
                Note::SnapshotWritten { .. } => written += 1,
                Note::SnapshotUpdated { .. } => updated += 1,
                Note::Calibrated { .. } if !verbose => {}
                Note::OutsideWrites(entries) if !verbose => {
                    for entry in entries {
                        if !outside.contains(&entry.as_str()) {
                            outside.push(entry);
                        }
                    }
                    if outside_ids.last() != Some(&r.id.as_str()) {
                        outside_ids.push(&r.id);
                    }
                }
                _ => match notes.iter_mut().find(|(n, _)| *n == note) {
                    Some((_, ids)) => ids.push(&r.id),
                    None => notes.push((note, vec![&r.id])),
                },
            }
        }
    }
    if notes.is_empty() && outside.is_empty() && written + updated == 0 {
        return;
    }
    let hint = if verbose { "" } else { " (`-v` gives each with its scenarios)" };
    let _ = writeln!(out, "\n{}{hint}", p.bold("Notes"));
    let whom = |ids: &[&str]| {
        if ids.len() <= NOTE_IDS { ids.join(", ") } else { format!("{} scenarios", ids.len()) }
    };
    if !outside.is_empty() {
        let named: Vec<&str> = outside.iter().copied().take(OUTSIDE_SHOWN).collect();
        let more = match outside.len().saturating_sub(OUTSIDE_SHOWN) {
            0 => String::new(),
            n => format!(" and {n} more"),
        };
        let _ = writeln!(
            out,
            "  outside the sandbox, while scenarios ran: {}{more}; a tool should write only in its HOME, TMPDIR, XDG_* directories and working directory (`conform manual hostile`) {}",
            named.join(", "),
            p.dim(&format!("({})", whom(&outside_ids)))
        );
    }
    for (note, ids) in notes {
        let _ = writeln!(out, "  {note} {}", p.dim(&format!("({})", whom(&ids))));
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
    // Claims incomplete only for their unjudged scenarios: one line for them all.
    let only_unjudged = |c: &ClaimVerdict| {
        c.verdict == Claim::Incomplete && c.failed.is_empty() && c.not_judged > 0
    };
    let unjudged: Vec<String> = claims
        .iter()
        .filter(|c| only_unjudged(c))
        .map(|c| format!("{} {}", c.claim, c.not_judged))
        .collect();
    if !unjudged.is_empty() {
        let _ =
            writeln!(out, "    incomplete, `must` scenarios not judged: {}", unjudged.join(", "));
    }
    for c in claims.iter().filter(|c| c.verdict != Claim::Pass && !only_unjudged(c)) {
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
    // With a pace, its line says how many ran at once.
    let at_once = match s.pace {
        Some(_) => String::new(),
        None => format!(", {}", super::progress::at_a_time(&report.info)),
    };
    let _ = writeln!(
        out,
        "  scenarios: {} ({} in all, {}{at_once})",
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
        "  coverage: {} of {} scenarios ran{}",
        s.coverage.run,
        s.coverage.run + s.coverage.skipped,
        match s.coverage.skipped {
            0 => "",
            _ => " (the skipped ones by reason above)",
        }
    );
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
