//! `--html FILE`: one self-contained page of a run, for a person and for a bug report.
//!
//! The page needs nothing beside itself (no script, no font, no image, no network: its
//! Content-Security-Policy forbids them all, so it works the same opened from a CI artifact):
//! the verdicts first, then every failure with its timeline, findings and evidence, then each
//! requirement with its scenarios (folded), each scenario with its timeline and its steps
//! (folded: the command that reproduces each, its stdout and stderr). A scenario's timeline
//! ([`timeline`]) draws its calls on one time axis with their budgets, hand-offs, signals,
//! kills and exit codes, and says the same in words for a screen reader and as a table.
//!
//! Every byte that came from the tool (its output, command lines, paths, names in its
//! manifest) is made inert ([`crate::inert`]) and then escaped for HTML before it is written,
//! through [`esc`]; conform's own markup is the only markup on the page.
//!
//! # Building other pages
//!
//! The page is built from a [`view::RunView`] (a run's JSON report read back, or a finished
//! run: [`view::RunView::from_report`]) by [`run_page`], which returns a [`Page`] of
//! [`Section`]s; another command adds sections of its own before [`Page::render`]:
//!
//! ```
//! use conform::report::html::{Html, Page, Section, chart, timeline};
//! let mut page = Page::new("conform campaign: mytool");
//! let schedule = timeline::Timeline {
//!     id: "schedule".into(),
//!     title: "The shrunk schedule".into(),
//!     lanes: Vec::new(),
//! };
//! let bins = [chart::Bin { label: "0-100 ms".into(), count: 3 }];
//! let mut body = schedule.svg();
//! body.push(chart::histogram("kills", "Where the kills fell", "kills", &bins));
//! body.push(Html::paragraph("Each kill at its offset from the call's start."));
//! page.push(Section::new("schedule", "Schedule", body));
//! let text = page.render();
//! assert!(text.starts_with("<!DOCTYPE html>"));
//! ```
//!
//! `conform matrix` builds its pages the same way: one [`run_page`] per tool, and
//! [`matrix::page`] for the table of them all.

pub mod chart;
pub mod matrix;
pub mod timeline;
pub mod view;

use std::fmt::{self, Write as _};

use serde_json::Value;

use super::{Collector, Sink, human_duration, json};
use crate::event::{Event, ReportError, Reporter};
use crate::exit;
use crate::inert;
use crate::levels::{Claim, KitStatus};
use crate::outcome::{BaselineMark, Finding};
use view::{EvidenceView, RunView, ScenarioView, StatusWord};

/// Markup conform wrote, safe to put in a page: made only by this module's functions, which
/// escape everything they are given that is not conform's own markup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Html(String);

impl Html {
    /// Text, made inert and escaped.
    pub fn text(text: &str) -> Html {
        Html(esc(text))
    }

    /// A paragraph of text.
    pub fn paragraph(text: &str) -> Html {
        Html(format!("<p>{}</p>", esc(text)))
    }

    /// A link to `href` (a relative one: the page loads nothing) saying `text`.
    pub fn link(href: &str, text: &str) -> Html {
        Html(format!("<a href=\"{}\">{}</a>", attr(href), esc(text)))
    }

    /// Text as preformatted code.
    pub fn pre(text: &str) -> Html {
        Html(format!("<pre>{}</pre>", esc(text)))
    }

    /// Appends more markup.
    pub fn push(&mut self, more: Html) {
        self.0.push_str(&more.0);
    }

    /// The markup.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// conform's own markup, written here, never a tool's bytes.
    fn own(markup: impl Into<String>) -> Html {
        Html(markup.into())
    }
}

impl fmt::Display for Html {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// `text` made inert ([`inert::text`]: every control character a visible escape, newlines
/// kept) and escaped for an HTML text node or an attribute value in double quotes.
pub fn esc(text: &str) -> String {
    escape_html(&inert::text(text))
}

/// `text` on one line ([`inert::line`]) and escaped, for an attribute value.
pub fn attr(text: &str) -> String {
    escape_html(&inert::line(text))
}

/// The HTML escape of `text`; the blanks that end a line are written as character references,
/// which show the same (a tool's output keeps them) and leave no trailing blank in the page.
fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for (n, line) in text.split('\n').enumerate() {
        if n > 0 {
            out.push('\n');
        }
        let kept = line.trim_end_matches([' ', '\t']);
        for c in kept.chars() {
            match c {
                '&' => out.push_str("&amp;"),
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                // Every attribute conform writes is in double quotes.
                '"' => out.push_str("&quot;"),
                _ => out.push(c),
            }
        }
        for c in line[kept.len()..].chars() {
            out.push_str(if c == '\t' { "&#9;" } else { "&#32;" });
        }
    }
    out
}

/// A part of a page: a heading and what is under it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// Its id in the page (the contents link to it).
    pub id: String,
    /// Its heading.
    pub heading: String,
    /// What it holds.
    pub body: Html,
}

impl Section {
    /// A section.
    pub fn new(id: impl Into<String>, heading: impl Into<String>, body: Html) -> Section {
        Section { id: id.into(), heading: heading.into(), body }
    }
}

/// One self-contained page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The document's title.
    pub title: String,
    /// What comes first: the heading and the verdict.
    pub header: Html,
    /// The sections, in order; the contents list them.
    pub sections: Vec<Section>,
}

/// The most characters of a page's `<title>`.
const TITLE_CHARS: usize = 64;

/// The page's style sheet.
const STYLE: &str = include_str!("style.css");

/// Nothing loads from anywhere: no script, no font, no image, no connection; only the page's
/// own style sheet applies.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; base-uri 'none'";

impl Page {
    /// An empty page with this title as its heading.
    pub fn new(title: &str) -> Page {
        Page {
            title: title.to_owned(),
            header: Html::own(format!("<h1>{}</h1>", esc(title))),
            sections: Vec::new(),
        }
    }

    /// Adds a section at the end.
    pub fn push(&mut self, section: Section) {
        self.sections.push(section);
    }

    /// The whole document.
    pub fn render(&self) -> String {
        let mut s = String::with_capacity(64 * 1024);
        let _ = write!(
            s,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <meta http-equiv=\"Content-Security-Policy\" content=\"{CONTENT_SECURITY_POLICY}\">\n\
             <meta name=\"generator\" content=\"conform {}\">\n<title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n{}\n<header>\n{}\n</header>\n",
            env!("CARGO_PKG_VERSION"),
            // A tab's or a window's title: short (the heading says it whole).
            esc(&timeline::cut(&self.title, TITLE_CHARS)),
            timeline::patterns(),
            self.header
        );
        if self.sections.len() > 1 {
            s.push_str("<nav class=\"contents\" aria-label=\"Contents\"><ul>");
            for section in &self.sections {
                let _ = write!(
                    s,
                    "<li><a href=\"#{}\">{}</a></li>",
                    attr(&section.id),
                    esc(&section.heading)
                );
            }
            s.push_str("</ul></nav>\n");
        }
        s.push_str("<main>\n");
        for section in &self.sections {
            let id = attr(&section.id);
            let _ = write!(
                s,
                "<section id=\"{id}\" aria-labelledby=\"h-{id}\">\n<h2 id=\"h-{id}\">{}</h2>\n{}\n</section>\n",
                esc(&section.heading),
                section.body
            );
        }
        s.push_str("</main>\n</body>\n</html>\n");
        s
    }
}

/// Writes the page when the run finishes (`conform run --html FILE`).
pub struct HtmlReporter {
    sink: Sink,
    collector: Collector,
}

impl HtmlReporter {
    /// A reporter writing the page to `sink`.
    pub fn new(sink: Sink) -> Self {
        HtmlReporter { sink, collector: Collector::default() }
    }
}

impl Reporter for HtmlReporter {
    fn handle(&mut self, event: &Event) -> Result<(), ReportError> {
        let Some(report) = self.collector.record(event) else { return Ok(()) };
        let view = view::RunView::from_report(&report)
            .map_err(|e| ReportError::new("build the HTML page", std::io::Error::other(e)))?;
        self.sink.write_all(&run_page(&view).render())
    }
}

/// The anchor of a scenario's evidence in a run's page (`#s-<id>`, what `conform matrix`
/// links to).
pub fn scenario_anchor(id: &str) -> String {
    format!("s-{id}")
}

/// The page of a run: its verdicts, its failures with their timelines, every requirement's
/// scenarios, and how to read a timeline.
pub fn run_page(run: &RunView) -> Page {
    let mut page = Page::new(&format!("conform: {}", run.tool));
    page.header = Html::own(format!(
        "<h1>conform: <code>{}</code></h1>\n<p class=\"verdict\">{}</p>\n<p class=\"muted\">{} · CLI Agent Spec {} · conform {}{}</p>",
        esc(&run.tool),
        esc(&verdict_text(run)),
        esc(&counts_text(run)),
        esc(&run.spec_version),
        esc(&run.conform_version),
        if run.partial { " · interrupted: a partial report" } else { "" }
    ));
    page.push(Section::new("summary", "Summary", summary(run)));
    let failed: Vec<&ScenarioView> = run.scenarios.iter().filter(|s| s.failed()).collect();
    if !failed.is_empty() {
        let mut body = Html::default();
        for s in failed {
            let anchor = attr(&scenario_anchor(&s.id));
            body.push(Html::own(format!(
                "<article class=\"failure\" aria-labelledby=\"h-{anchor}\">\n<h3 id=\"h-{anchor}\">{} {} <span class=\"muted\">({}, {})</span></h3>\n<div id=\"{anchor}\">",
                status_badge(s.status_word()),
                esc(&s.id),
                esc(&s.requirement),
                s.level.as_str()
            )));
            body.push(scenario_body(run, s));
            body.push(Html::own("</div>\n</article>\n"));
        }
        page.push(Section::new("failures", "Failures", body));
    }
    page.push(Section::new("requirements", "Requirements and scenarios", requirements(run)));
    page.push(Section::new("legend", "How to read a timeline", legend()));
    page
}

/// The verdict, in the words of the human report.
fn verdict_text(run: &RunView) -> String {
    let skipped = run.coverage.skipped;
    let total = run.coverage.run + skipped;
    match run.exit_code {
        Some(exit::SUCCESS) if skipped > 0 => {
            format!("CONFORMANT in what ran ({skipped} of {total} scenarios not judged)")
        }
        Some(exit::SUCCESS) => "CONFORMANT".to_owned(),
        Some(exit::NOT_CONFORMANT) => "NOT CONFORMANT (exit 80)".to_owned(),
        Some(exit::BASELINE_MISMATCH) => {
            "CONFORMANT, BUT THE BASELINE DOES NOT MATCH (exit 81)".to_owned()
        }
        Some(exit::UNJUDGED) => format!(
            "NOT JUDGED: {} `must` scenario(s) could not be judged, for reasons the profile can fix (exit 82)",
            run.coverage.unjudged_musts.len()
        ),
        Some(exit::INTERRUPTED) => "INTERRUPTED: a partial report of what finished".to_owned(),
        Some(code) => format!("NO VERDICT (conform failed, exit {code} {})", exit::name(code)),
        None if run.conformant => "conformant".to_owned(),
        None => "NOT CONFORMANT".to_owned(),
    }
}

fn counts_text(run: &RunView) -> String {
    let c = &run.counts;
    let mut parts = vec![format!("{} passed", c.pass), format!("{} failed", c.fail)];
    if c.expected_fail > 0 {
        parts.push(format!("{} expected failures", c.expected_fail));
    }
    parts.push(format!("{} skipped", c.skip));
    if c.error > 0 {
        parts.push(format!("{} harness errors", c.error));
    }
    format!("{} of {} scenarios", parts.join(", "), c.total)
}

/// A status word as a badge: its text says it, its border and colour repeat it.
fn status_badge(word: &str) -> String {
    let class = word.replace(' ', "-");
    format!("<span class=\"status s-{}\">{}</span>", attr(&class), esc(word))
}

fn claim_word(claim: Claim) -> &'static str {
    match claim {
        Claim::Pass => "pass",
        Claim::Fail => "fail",
        Claim::Incomplete => "incomplete",
        Claim::NotApplicable => "not applicable",
    }
}

/// The claims, the kit's checks, what was skipped and why, the manifest.
fn summary(run: &RunView) -> Html {
    let mut s = String::new();
    if !run.claims.is_empty() {
        s.push_str("<table class=\"claims\"><caption>The spec's levels and §79, as this run judges them</caption><thead><tr><th scope=\"col\">claim</th><th scope=\"col\">verdict</th><th scope=\"col\">why</th></tr></thead><tbody>");
        for c in &run.claims {
            let mut why = Vec::new();
            if !c.failed.is_empty() {
                why.push(format!("failed: {}", c.failed.join(", ")));
            }
            if c.not_judged > 0 {
                why.push(format!("{} `must` scenario(s) not judged", c.not_judged));
            }
            if why.is_empty() && c.verdict != Claim::Pass {
                why.extend(c.reasons.iter().take(3).cloned());
            }
            let _ = write!(
                s,
                "<tr><th scope=\"row\">{}</th><td>{}</td><td>{}</td></tr>",
                esc(&c.name),
                status_badge(claim_word(c.verdict)),
                esc(&why.join("; "))
            );
        }
        s.push_str("</tbody></table>");
    }
    if !run.kit_checks.is_empty() {
        let passed = run.kit_checks.iter().filter(|k| k.status == KitStatus::Pass).count();
        let others: Vec<String> = run
            .kit_checks
            .iter()
            .filter(|k| k.status != KitStatus::Pass)
            .map(|k| {
                let word = if k.status == KitStatus::Fail { "fail" } else { "skip" };
                format!("{} ({word})", k.check)
            })
            .collect();
        let _ = write!(
            s,
            "<p>The spec kit's checks: {passed} of {} pass{}.</p>",
            run.kit_checks.len(),
            if others.is_empty() {
                String::new()
            } else {
                esc(&format!("; {}", others.join(", ")))
            }
        );
    }
    let _ = write!(
        s,
        "<p>Coverage: {} of {} scenarios ran.</p>",
        run.coverage.run,
        run.coverage.run + run.coverage.skipped
    );
    if !run.coverage.skip_reasons.is_empty() {
        s.push_str("<p>Skipped, by reason:</p><ul class=\"skips\">");
        for group in &run.coverage.skip_reasons {
            let _ = write!(
                s,
                "<li><details><summary>{} × {}</summary><p>{}</p></details></li>",
                group.scenarios.len(),
                esc(&group.reason),
                group
                    .scenarios
                    .iter()
                    .map(|id| scenario_link(run, id))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        s.push_str("</ul>");
    }
    if !run.coverage.roles_missing.is_empty() {
        let _ = write!(
            s,
            "<p>Roles missing from the profile: {}.</p>",
            esc(&run.coverage.roles_missing.join(", "))
        );
    }
    if let Some(manifest) = run.manifest.as_ref().filter(|m| !m.is_null()) {
        let _ = write!(
            s,
            "<details id=\"manifest\"><summary>The tool's manifest</summary>{}</details>",
            json_block(manifest)
        );
    }
    Html::own(s)
}

/// A link to a scenario's evidence in this page.
fn scenario_link(run: &RunView, id: &str) -> String {
    match run.scenario(id) {
        Some(_) => format!("<a href=\"#{}\">{}</a>", attr(&scenario_anchor(id)), esc(id)),
        None => esc(id),
    }
}

/// Every requirement, folded, with its scenarios, each folded with its evidence (a failed
/// one links to its failure above instead).
fn requirements(run: &RunView) -> Html {
    let mut groups: Vec<(&str, Vec<&ScenarioView>)> = Vec::new();
    for s in &run.scenarios {
        match groups.iter_mut().find(|(r, _)| *r == s.requirement) {
            Some((_, group)) => group.push(s),
            None => groups.push((&s.requirement, vec![s])),
        }
    }
    groups.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = Html::default();
    for (requirement, group) in groups {
        let verdict = run
            .requirements
            .iter()
            .find(|v| v.requirement == requirement)
            .map_or("skipped", |v| v.verdict.as_str());
        let open = if matches!(verdict, "fail") { " open" } else { "" };
        let count = |w: &str| group.iter().filter(|s| s.status_word() == w).count();
        let counts: Vec<String> = ["pass", "fail", "xfail", "skip", "error"]
            .iter()
            .filter_map(|w| match count(w) {
                0 => None,
                n => Some(format!("{n} {w}")),
            })
            .collect();
        out.push(Html::own(format!(
            "<details class=\"requirement\"{open}><summary>{} {} <span class=\"muted\">({})</span></summary><ul>",
            status_badge(verdict),
            esc(requirement),
            counts.join(", ")
        )));
        for s in group {
            let anchor = attr(&scenario_anchor(&s.id));
            let tail = match (&s.status, &s.reason) {
                (StatusWord::Skip, Some(reason)) => format!(" — {}", esc(reason)),
                _ => format!(" <span class=\"muted\">{}</span>", human_duration(s.duration_ms)),
            };
            if s.failed() {
                out.push(Html::own(format!(
                    "<li>{} <a href=\"#{anchor}\">{}</a> <span class=\"muted\">{}</span> (under Failures)</li>",
                    status_badge(s.status_word()),
                    esc(&s.id),
                    s.level.as_str()
                )));
                continue;
            }
            out.push(Html::own(format!(
                "<li><details class=\"scenario\"><summary>{} {} <span class=\"muted\">{}</span>{tail}</summary><div id=\"{anchor}\">",
                status_badge(s.status_word()),
                esc(&s.id),
                s.level.as_str()
            )));
            out.push(scenario_body(run, s));
            out.push(Html::own("</div></details></li>"));
        }
        out.push(Html::own("</ul></details>\n"));
    }
    out
}

/// A scenario's criterion, status, findings, timeline, notes and steps.
fn scenario_body(run: &RunView, s: &ScenarioView) -> Html {
    let mut out = String::new();
    let _ = write!(out, "<p class=\"criterion\">{}</p>", esc(&s.criterion));
    let mut facts = vec![format!("{}, {}", s.requirement, s.level.as_str())];
    facts.push(format!("took {}", human_duration(s.duration_ms)));
    let _ = write!(out, "<p class=\"muted\">{}</p>", esc(&facts.join(" · ")));
    if let Some(reason) = &s.reason {
        let _ = write!(out, "<p>Skipped: {}</p>", esc(reason));
    }
    if let Some(message) = &s.message {
        let _ = write!(out, "<p>conform failed: {}</p>", esc(message));
    }
    match &s.baseline {
        Some(BaselineMark::ExpectedFailure { reason }) => {
            let _ = write!(out, "<p>Expected by the baseline: {}</p>", esc(reason));
        }
        Some(BaselineMark::Stale { reason }) => {
            let _ = write!(
                out,
                "<p>A stale baseline entry (the scenario passes now; remove it): {}</p>",
                esc(reason)
            );
        }
        Some(BaselineMark::Unexpected) => out.push_str("<p>Not in the baseline.</p>"),
        None => {}
    }
    if let Some(first) = &s.first_run {
        let what = first.findings.first().map_or_else(
            || first.reason.clone().unwrap_or_default(),
            |f| format!("[{}] {}", f.check, f.message),
        );
        let word = if first.status == StatusWord::Fail { "failed" } else { "was skipped" };
        let _ = write!(
            out,
            "<p>Beside the other scenarios it {word} ({}); what follows is its run alone, with its role calibrated afresh.</p>",
            esc(&what)
        );
    }
    if !s.findings.is_empty() {
        out.push_str("<ul class=\"findings\">");
        for f in &s.findings {
            out.push_str(&finding_item(f));
        }
        out.push_str("</ul>");
    }
    let timeline = timeline::Timeline::of_scenario(s, &format!("t-{}", s.id));
    if !timeline.is_empty() {
        let _ = write!(
            out,
            "<figure class=\"timeline\">{}<figcaption class=\"muted\">The scenario's calls on one time axis (how to read it: <a href=\"#legend\">below</a>).</figcaption></figure><details><summary>The timeline as a table</summary>{}</details>",
            timeline.svg(),
            timeline.table()
        );
    }
    if !s.notes.is_empty() {
        out.push_str("<ul class=\"notes\">");
        for note in &s.notes {
            let _ = write!(out, "<li>{}</li>", esc(note));
        }
        out.push_str("</ul>");
    }
    for record in &s.evidence {
        let named =
            s.findings.iter().any(|f| f.step.as_deref() == Some(record.record.name.as_str()));
        out.push_str(&step_details(run, record, named));
    }
    Html::own(out)
}

/// One finding: its kind, its sentence, what was expected and what was seen (a diff for
/// values of several lines).
fn finding_item(f: &Finding) -> String {
    let mut out = format!("<li><strong>[{}]</strong> {}", esc(f.check.as_str()), esc(&f.message));
    if let Some(step) = &f.step {
        let _ = write!(out, " (step <code>{}</code>)", esc(step));
    }
    match f.diff() {
        Some(diff) => {
            let _ = write!(out, "<pre>{}</pre>", esc(&diff));
        }
        None => {
            for (label, value) in [("expected", &f.expected), ("actual", &f.actual)] {
                if let Some(v) = value {
                    let _ = write!(out, "<div>{label}:</div><pre>{}</pre>", esc(v));
                }
            }
        }
    }
    out.push_str("</li>");
    out
}

/// The most characters of one output a page shows; the JSON report keeps what conform kept.
const SHOWN_CHARS: usize = 16 * 1024;

fn capped(text: &str) -> String {
    if text.chars().count() <= SHOWN_CHARS {
        return text.to_owned();
    }
    let kept: String = text.chars().take(SHOWN_CHARS).collect();
    format!(
        "{kept}\n… ({} characters more: the JSON report has them)",
        text.chars().count() - SHOWN_CHARS
    )
}

/// A JSON document, indented, in a block.
fn json_block(value: &Value) -> String {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    format!("<pre>{}</pre>", esc(&capped(&text)))
}

/// One step's evidence, folded (open when a finding names it).
fn step_details(run: &RunView, e: &EvidenceView, open: bool) -> String {
    let r = &e.record;
    let open = if open { " open" } else { "" };
    let mut out = format!(
        "<details class=\"step\"{open}><summary><code>{}</code> {}, after {}</summary><div><dl class=\"record\"><dt>reproduce</dt><dd><pre><code>{}</code></pre></dd>",
        esc(&r.name),
        esc(&r.ended.to_string()),
        human_duration(r.elapsed_ms),
        esc(&r.repro.to_string())
    );
    let stdout = if e.output_omitted {
        format!(
            "<p class=\"muted\">{} bytes, left out: the scenario passed (<code>conform run --evidence all</code> keeps them)</p>",
            r.stdout.total_bytes
        )
    } else if e.stdout_ref.as_deref() == Some(json::MANIFEST_REF) {
        let rest = r.envelope.as_ref().map_or_else(String::new, json_block);
        let link = match run.manifest.is_some() {
            true => "<a href=\"#manifest\">the tool's manifest</a>",
            false => "the tool's manifest",
        };
        format!(
            "<p>{link}, as the summary shows it{}</p>{rest}",
            if rest.is_empty() { "" } else { "; around it:" }
        )
    } else if let Some(envelope) = &r.envelope {
        json_block(envelope)
    } else if r.stdout.text.is_empty() {
        "<p class=\"muted\">nothing</p>".to_owned()
    } else {
        let cut = if r.stdout.truncated {
            format!("<p class=\"muted\">the first part of {} bytes</p>", r.stdout.total_bytes)
        } else {
            String::new()
        };
        format!("{cut}<pre>{}</pre>", esc(&capped(&r.stdout.text)))
    };
    let _ = write!(out, "<dt>stdout</dt><dd>{stdout}</dd>");
    let stderr = if e.output_omitted {
        format!("<p class=\"muted\">{} bytes, left out</p>", r.stderr.total_bytes)
    } else if r.stderr.text.is_empty() {
        "<p class=\"muted\">nothing</p>".to_owned()
    } else {
        let cut = if r.stderr.truncated {
            format!("<p class=\"muted\">the last part of {} bytes</p>", r.stderr.total_bytes)
        } else {
            String::new()
        };
        format!("{cut}<pre>{}</pre>", esc(&capped(&r.stderr.text)))
    };
    let _ = write!(out, "<dt>stderr</dt><dd>{stderr}</dd></dl></div></details>");
    out
}

/// What each shape and pattern of a timeline means, each drawn as it is drawn there.
fn legend() -> Html {
    let items: [(&str, &str); 9] = [
        (
            "<rect class=\"bar call\" x=\"2\" y=\"4\" width=\"40\" height=\"12\"/>",
            "a call that ended by itself; the words under it say its exit code",
        ),
        (
            "<rect class=\"bar handoff\" x=\"2\" y=\"4\" width=\"40\" height=\"12\" fill=\"url(#pattern-stripes)\"/><path class=\"arrow\" d=\"M43,4 l8,6 l-8,6 z\"/>",
            "striped, ending in an arrow: a call that handed its work off (exit 14, INCOMPLETE)",
        ),
        (
            "<rect class=\"bar killed\" x=\"2\" y=\"4\" width=\"40\" height=\"12\" fill=\"url(#pattern-cross)\"/><path class=\"cross\" d=\"M43,6 l8,8 m0,-8 l-8,8\"/>",
            "cross-hatched, ending in a cross: a call ended by a signal, or killed by conform at its limit",
        ),
        (
            "<rect class=\"bar conform\" x=\"2\" y=\"4\" width=\"40\" height=\"12\"/>",
            "outlined: a step of conform's own (a pause, a shell line, the effect oracle, a wait)",
        ),
        (
            "<g class=\"mark budget\"><line x1=\"22\" y1=\"2\" x2=\"22\" y2=\"18\"/><path d=\"M17,0 l10,0 l-5,6 z\"/></g>",
            "a line under a triangle: where the call's budget ran out",
        ),
        (
            "<g class=\"mark bound\"><line x1=\"22\" y1=\"1\" x2=\"22\" y2=\"19\"/><line x1=\"18\" y1=\"1\" x2=\"26\" y2=\"1\"/></g>",
            "a dashed line: the longest the call could hold its caller (budget, next checkpoint, start-up, slack)",
        ),
        (
            "<rect class=\"over\" x=\"2\" y=\"2\" width=\"40\" height=\"16\" fill=\"url(#pattern-over)\"/>",
            "densely hatched: the time a call held its caller past that bound",
        ),
        (
            "<g class=\"mark signal\"><path d=\"M22,3 l6,7 l-6,7 l-6,-7 z\"/></g><g class=\"mark kill\"><path d=\"M34,4 l12,12 m0,-12 l-12,12\"/></g>",
            "a diamond: a signal conform sent into the call; a cross: a kill of the job's workers",
        ),
        (
            "<line class=\"pipes\" x1=\"2\" y1=\"10\" x2=\"50\" y2=\"10\"/>",
            "a dashed tail: stdout and stderr still open after the call exited (the caller not released)",
        ),
    ];
    let mut s = String::from(
        "<p>Each row is a step of the scenario (the hops of a continue loop share one), its bars on one time axis from the scenario's start. The step a finding names is marked red at its left edge and its name says so; under each bar, in words: how it ended, after how long, the progress it reported, its budget, how long it could hold its caller. Every picture has the same in words for screen readers, and as a table under it.</p>\
<ul class=\"legend\">",
    );
    for (shape, words) in items {
        let _ = write!(
            s,
            "<li><svg width=\"56\" height=\"20\" viewBox=\"0 0 56 20\" aria-hidden=\"true\">{shape}</svg>{}</li>",
            esc(words)
        );
    }
    s.push_str("</ul>");
    Html::own(s)
}
