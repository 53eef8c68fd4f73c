//! A scenario's timeline as a picture: each call a bar on one time axis from its start to its
//! end, its budget and how long it could hold its caller as marks, a hand-off (exit 14) as a
//! striped bar ending in an arrow, a kill as a cross, a signal as a diamond, the pipes a call
//! left open as a dashed tail, the time a call held its caller past its bound hatched, and
//! under each bar, in words, how it ended and the progress it reported.
//!
//! [`Timeline`] is the model (lanes of spans and marks on a millisecond axis), built from a
//! scenario's evidence by [`Timeline::of_scenario`] or by hand (a campaign's shrunk schedule);
//! [`Timeline::svg`] draws it as an inline SVG with its text alternative (`role="img"`, a
//! `<title>`, a `<desc>` saying every lane in words), and [`Timeline::table`] gives the same as
//! a table. Nothing is told by colour alone: each kind of bar has its own pattern, each mark
//! its own shape, and every one is said in the words under its bar.

use std::fmt::Write as _;

use serde_json::Value;

use super::view::{EvidenceView, ScenarioView};
use super::{Html, attr, esc};
use crate::outcome::{ActionKind, Ended, ReproCommand, SignalTarget};
use crate::report::human_duration;

/// The exit code of a hand-off (INCOMPLETE).
const HAND_OFF: i32 = 14;

/// How a span is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// A call that ended by itself (any exit but 14): a solid bar.
    Call,
    /// A call that handed its work off (exit 14): a striped bar ending in an arrow.
    HandOff,
    /// A call that a signal or conform's limit ended: a cross-hatched bar ending in a cross.
    Killed,
    /// A step of conform's own (a pause, a kill of the job's workers, a shell line): an
    /// outlined bar.
    Conform,
}

impl SpanKind {
    fn class(self) -> &'static str {
        match self {
            SpanKind::Call => "call",
            SpanKind::HandOff => "handoff",
            SpanKind::Killed => "killed",
            SpanKind::Conform => "conform",
        }
    }
}

/// A mark at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkKind {
    /// The budget of a call ran out: a solid line under a triangle.
    Budget,
    /// The longest a call could hold its caller: a dashed line under a bar.
    Bound,
    /// A signal conform sent: a diamond.
    Signal,
    /// A kill (of a job's workers, or by conform at a limit): a cross.
    Kill,
}

impl MarkKind {
    fn class(self) -> &'static str {
        match self {
            MarkKind::Budget => "budget",
            MarkKind::Bound => "bound",
            MarkKind::Signal => "signal",
            MarkKind::Kill => "kill",
        }
    }
}

/// A mark on a lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// When, from the start of the timeline.
    pub at_ms: u64,
    /// Its shape.
    pub kind: MarkKind,
    /// What it is, in words (`budget 670 ms`).
    pub label: String,
}

/// A bar on a lane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Span {
    /// Its start, from the start of the timeline.
    pub start_ms: u64,
    /// Its end.
    pub end_ms: u64,
    /// How it is drawn.
    pub kind: SpanKind,
    /// What happened, in words: how it ended, its progress, its budget (the text under it).
    pub label: String,
    /// From `over_from_ms` to the end the call held its caller past its bound: hatched.
    pub over_from_ms: Option<u64>,
    /// After its end, its pipes stayed open until then (`Some(None)`: still open when conform
    /// stopped waiting): a dashed tail.
    pub pipes_open_until: Option<Option<u64>>,
    /// Its marks.
    pub marks: Vec<Mark>,
}

/// A row of the timeline: the runs of one step (the hops of a continue loop share one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lane {
    /// The step's name.
    pub label: String,
    /// What it ran, short (`analyze data.csv --budget 670ms`).
    pub detail: String,
    /// Its bars, in time order.
    pub spans: Vec<Span>,
    /// The kind of the finding that names this step, when one does: the lane is emphasised.
    pub finding: Option<String>,
}

/// A picture of what happened when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeline {
    /// A name unique in the page (the SVG's element ids derive from it).
    pub id: String,
    /// What it shows, one line (the SVG's `<title>`).
    pub title: String,
    /// Its rows, top to bottom.
    pub lanes: Vec<Lane>,
}

/// The ids of the patterns a timeline's bars are filled with: [`patterns`] defines them once
/// per page ([`super::Page::render`] does).
pub const PATTERN_PREFIX: &str = "pattern-";

/// The patterns the bars of every timeline and histogram of a page are filled with, as an
/// invisible SVG of definitions: hand-offs striped, kills cross-hatched, an overrun densely
/// hatched, so that no kind of bar is told by colour alone.
pub fn patterns() -> Html {
    let p = PATTERN_PREFIX;
    Html(format!(
        "<svg width=\"0\" height=\"0\" aria-hidden=\"true\" class=\"defs\" xmlns=\"http://www.w3.org/2000/svg\"><defs>\
         <pattern id=\"{p}stripes\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" class=\"p-bg-handoff\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" class=\"p-line\"/></pattern>\
         <pattern id=\"{p}cross\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\"><rect width=\"6\" height=\"6\" class=\"p-bg-killed\"/><path d=\"M0,0 L6,6 M6,0 L0,6\" class=\"p-line\"/></pattern>\
         <pattern id=\"{p}over\" width=\"4\" height=\"4\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(-45)\"><rect width=\"4\" height=\"4\" class=\"p-bg-over\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"4\" class=\"p-line-over\"/></pattern>\
         </defs></svg>"
    ))
}

/// Width of the picture (SVG user units, which the page scales to its column).
const WIDTH: u64 = 960;
/// The column of lane names.
const LABEL_WIDTH: u64 = 170;
/// The right margin.
const MARGIN: u64 = 24;
/// One lane's height: the bar, then a line of words.
const LANE_HEIGHT: u64 = 44;
/// The axis' height, at the top.
const AXIS_HEIGHT: u64 = 26;
/// The most characters of words under a bar.
const LABEL_CHARS: usize = 150;

impl Timeline {
    /// The timeline of a scenario: a lane per step (the hops of a continue loop, the probes
    /// of a step in one lane; copies run at once each in their own), the steps of conform's
    /// own beside them, in the order they began.
    pub fn of_scenario(scenario: &ScenarioView, id: &str) -> Timeline {
        let mut lanes: Vec<(u64, Lane)> = Vec::new();
        for record in &scenario.evidence {
            let span = record_span(record);
            let name = &record.record.name;
            let base = name.split('#').next().unwrap_or(name).to_owned();
            let reusable = lanes.iter_mut().rev().find(|(_, lane)| {
                lane.label == base
                    && lane.spans.last().is_some_and(|last| last.end_ms <= span.start_ms)
            });
            match reusable {
                Some((_, lane)) => lane.spans.push(span),
                None => {
                    let finding = scenario
                        .findings
                        .iter()
                        .find(|f| {
                            f.step.as_deref().is_some_and(|s| s == name || s == base.as_str())
                        })
                        .map(|f| f.check.as_str().to_owned());
                    let lane = Lane {
                        label: base,
                        detail: command_words(&record.record.repro.command),
                        spans: vec![span],
                        finding,
                    };
                    lanes.push((lane.spans[0].start_ms, lane));
                }
            }
        }
        for action in &scenario.actions {
            let end = action.started_ms + action.elapsed_ms;
            let marks = match action.action {
                ActionKind::KillWorker => vec![Mark {
                    at_ms: action.started_ms,
                    kind: MarkKind::Kill,
                    label: action.detail.clone(),
                }],
                _ => Vec::new(),
            };
            let finding = scenario
                .findings
                .iter()
                .find(|f| f.step.as_deref() == Some(action.step.as_str()))
                .map(|f| f.check.as_str().to_owned());
            let lane = Lane {
                label: action.step.clone(),
                detail: format!("conform: {}", action.action.as_str()),
                spans: vec![Span {
                    start_ms: action.started_ms,
                    end_ms: end,
                    kind: SpanKind::Conform,
                    label: format!("{} ({})", action.detail, human_duration(action.elapsed_ms)),
                    over_from_ms: None,
                    pipes_open_until: None,
                    marks,
                }],
                finding,
            };
            lanes.push((action.started_ms, lane));
        }
        lanes.sort_by_key(|(start, _)| *start);
        Timeline {
            id: id.to_owned(),
            title: format!("Timeline of {}", scenario.id),
            lanes: lanes.into_iter().map(|(_, lane)| lane).collect(),
        }
    }

    /// Whether there is nothing to draw.
    pub fn is_empty(&self) -> bool {
        self.lanes.iter().all(|l| l.spans.is_empty())
    }

    /// The last moment anything happens.
    fn end_ms(&self) -> u64 {
        let mut end = 1;
        for span in self.lanes.iter().flat_map(|l| &l.spans) {
            end = end.max(span.end_ms);
            if let Some(Some(until)) = span.pipes_open_until {
                end = end.max(until);
            }
            for mark in &span.marks {
                end = end.max(mark.at_ms);
            }
        }
        end
    }

    /// The lanes in words, one sentence each: the text alternative of the picture.
    pub fn description(&self) -> String {
        let mut out = String::new();
        for lane in &self.lanes {
            let _ = write!(out, "{}", lane_sentence(lane));
            out.push(' ');
        }
        out.trim_end().to_owned()
    }

    /// The timeline as an inline SVG image with its text alternative.
    pub fn svg(&self) -> Html {
        let end = self.end_ms();
        let chart = WIDTH - LABEL_WIDTH - MARGIN;
        let x = |ms: u64| -> f64 { LABEL_WIDTH as f64 + ms as f64 * chart as f64 / end as f64 };
        let height = AXIS_HEIGHT + LANE_HEIGHT * self.lanes.len() as u64 + 6;
        let id = attr(&self.id);
        let mut s = String::new();
        let _ = write!(
            s,
            "<svg class=\"timeline\" role=\"img\" aria-labelledby=\"{id}-t {id}-d\" viewBox=\"0 0 {WIDTH} {height}\" width=\"{WIDTH}\" height=\"{height}\" xmlns=\"http://www.w3.org/2000/svg\">\
             <title id=\"{id}-t\">{}</title><desc id=\"{id}-d\">{}</desc>",
            esc(&self.title),
            esc(&self.description())
        );
        // The axis: ticks at a round step, labelled.
        let step = tick_step(end);
        let mut t = 0;
        while t <= end {
            let tx = x(t);
            let _ = write!(
                s,
                "<line class=\"tick\" x1=\"{tx:.1}\" y1=\"{}\" x2=\"{tx:.1}\" y2=\"{height}\"/><text class=\"axis\" x=\"{tx:.1}\" y=\"{}\">{}</text>",
                AXIS_HEIGHT - 6,
                AXIS_HEIGHT - 10,
                esc(&human_duration(t))
            );
            t += step;
        }
        for (n, lane) in self.lanes.iter().enumerate() {
            let top = AXIS_HEIGHT + LANE_HEIGHT * n as u64;
            let bar_top = top + 6;
            let bar_height = 14;
            let flagged = if lane.finding.is_some() { " flagged" } else { "" };
            let _ = write!(s, "<g class=\"lane{flagged}\">");
            if lane.finding.is_some() {
                let _ = write!(
                    s,
                    "<rect class=\"flag\" x=\"0\" y=\"{top}\" width=\"4\" height=\"{}\"/>",
                    LANE_HEIGHT - 4
                );
            }
            let _ = write!(
                s,
                "<text class=\"lane-name\" x=\"10\" y=\"{}\">{}</text><text class=\"lane-detail\" x=\"10\" y=\"{}\">{}</text>",
                bar_top + 11,
                esc(&cut(&lane.label, 24)),
                bar_top + 27,
                esc(&cut(&lane.detail, 28))
            );
            for span in &lane.spans {
                let x0 = x(span.start_ms);
                let width = (x(span.end_ms) - x0).max(2.0);
                let fill = match span.kind {
                    SpanKind::HandOff => format!(" fill=\"url(#{PATTERN_PREFIX}stripes)\""),
                    SpanKind::Killed => format!(" fill=\"url(#{PATTERN_PREFIX}cross)\""),
                    SpanKind::Call | SpanKind::Conform => String::new(),
                };
                // Its words are under it, and in the picture's description.
                let _ = write!(
                    s,
                    "<rect class=\"bar {}\" x=\"{x0:.1}\" y=\"{bar_top}\" width=\"{width:.1}\" height=\"{bar_height}\"{fill}/>",
                    span.kind.class()
                );
                if let Some(from) = span.over_from_ms {
                    let ox = x(from);
                    let ow = (x(span.end_ms) - ox).max(2.0);
                    let _ = write!(
                        s,
                        "<rect class=\"over\" x=\"{ox:.1}\" y=\"{}\" width=\"{ow:.1}\" height=\"{}\" fill=\"url(#{PATTERN_PREFIX}over)\"><title>held its caller past its bound</title></rect>",
                        bar_top - 3,
                        bar_height + 6
                    );
                }
                let x1 = x0 + width;
                let mid = bar_top + bar_height / 2;
                match span.kind {
                    SpanKind::HandOff => {
                        let _ = write!(
                            s,
                            "<path class=\"arrow\" d=\"M{:.1},{} l8,{} l-8,{} z\"><title>handed off (exit 14)</title></path>",
                            x1 + 1.0,
                            mid - 6,
                            6,
                            6
                        );
                    }
                    SpanKind::Killed => {
                        let _ = write!(
                            s,
                            "<path class=\"cross\" d=\"M{:.1},{} l8,8 m0,-8 l-8,8\"><title>ended by a signal</title></path>",
                            x1 + 1.0,
                            mid - 4
                        );
                    }
                    SpanKind::Call | SpanKind::Conform => {}
                }
                if let Some(until) = span.pipes_open_until {
                    let end_x = until.map_or(x(end), &x);
                    let _ = write!(
                        s,
                        "<line class=\"pipes\" x1=\"{x1:.1}\" y1=\"{mid}\" x2=\"{end_x:.1}\" y2=\"{mid}\"><title>stdout and stderr still open</title></line>"
                    );
                }
                for mark in &span.marks {
                    let mx = x(mark.at_ms);
                    let label = esc(&mark.label);
                    let class = mark.kind.class();
                    let _ = match mark.kind {
                        MarkKind::Budget => write!(
                            s,
                            "<g class=\"mark {class}\"><title>{label}</title><line x1=\"{mx:.1}\" y1=\"{}\" x2=\"{mx:.1}\" y2=\"{}\"/><path d=\"M{:.1},{} l10,0 l-5,6 z\"/></g>",
                            bar_top - 4,
                            bar_top + bar_height + 3,
                            mx - 5.0,
                            bar_top - 6
                        ),
                        MarkKind::Bound => write!(
                            s,
                            "<g class=\"mark {class}\"><title>{label}</title><line x1=\"{mx:.1}\" y1=\"{}\" x2=\"{mx:.1}\" y2=\"{}\"/><line x1=\"{:.1}\" y1=\"{}\" x2=\"{:.1}\" y2=\"{}\"/></g>",
                            bar_top - 5,
                            bar_top + bar_height + 4,
                            mx - 4.0,
                            bar_top - 5,
                            mx + 4.0,
                            bar_top - 5
                        ),
                        MarkKind::Signal => write!(
                            s,
                            "<g class=\"mark {class}\"><title>{label}</title><path d=\"M{mx:.1},{} l6,7 l-6,7 l-6,-7 z\"/></g>",
                            bar_top
                        ),
                        MarkKind::Kill => write!(
                            s,
                            "<g class=\"mark {class}\"><title>{label}</title><path d=\"M{:.1},{} l12,12 m0,-12 l-12,12\"/></g>",
                            mx - 6.0,
                            bar_top + 1
                        ),
                    };
                }
            }
            // The words under the bar, from where its first bar starts (kept inside the
            // picture).
            let words = cut(&lane_words(lane), LABEL_CHARS);
            let first = lane.spans.first().map_or(0, |s| s.start_ms);
            let room = (WIDTH - MARGIN) as f64 - x(first);
            let fits = room >= words.chars().count() as f64 * 5.6;
            let (tx, anchor) = match fits {
                true => (x(first), "start"),
                false => ((WIDTH - MARGIN) as f64, "end"),
            };
            let _ = write!(
                s,
                "<text class=\"words\" x=\"{tx:.1}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text></g>",
                bar_top + bar_height + 15,
                esc(&words)
            );
        }
        s.push_str("</svg>");
        Html(s)
    }

    /// The timeline as a table: one row per bar, with what happened in words.
    pub fn table(&self) -> Html {
        let mut s = String::from(
            "<table class=\"timeline-table\"><thead><tr><th scope=\"col\">step</th><th scope=\"col\">ran</th><th scope=\"col\">from</th><th scope=\"col\">to</th><th scope=\"col\">what happened</th></tr></thead><tbody>",
        );
        for lane in &self.lanes {
            for span in &lane.spans {
                let _ = write!(
                    s,
                    "<tr><td><code>{}</code></td><td><code>{}</code></td><td>{} ms</td><td>{} ms</td><td>{}</td></tr>",
                    esc(&lane.label),
                    esc(&lane.detail),
                    span.start_ms,
                    span.end_ms,
                    esc(&span.label)
                );
            }
        }
        s.push_str("</tbody></table>");
        Html(s)
    }
}

/// A round step for the axis' ticks: at most about ten over `end`.
fn tick_step(end: u64) -> u64 {
    const STEPS: &[u64] = &[
        1, 2, 5, 10, 20, 50, 100, 200, 250, 500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000,
        120_000, 300_000, 600_000,
    ];
    STEPS.iter().copied().find(|s| end / s <= 10).unwrap_or(end.div_ceil(10).max(1))
}

/// At most `n` characters of `text`, `…` marking a cut.
pub(super) fn cut(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(n.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The words of what a step ran: the tool's arguments (its program by its file name only), or
/// the shell line.
fn command_words(command: &ReproCommand) -> String {
    match command {
        ReproCommand::Argv(argv) => {
            let program = argv.first().map_or("", |p| p.rsplit('/').next().unwrap_or(p));
            std::iter::once(program)
                .chain(argv.iter().skip(1).map(String::as_str))
                .collect::<Vec<_>>()
                .join(" ")
        }
        // A continue_command: its program by its file name too.
        ReproCommand::Shell(line) => {
            let mut words = line.split(' ');
            let program = words.next().unwrap_or_default();
            let program = program.rsplit('/').next().unwrap_or(program);
            std::iter::once(program).chain(words).collect::<Vec<_>>().join(" ")
        }
    }
}

/// The progress a response reported: `done 12 of 25`.
fn progress_of(envelope: Option<&Value>) -> Option<String> {
    let progress = envelope?.pointer("/data/progress")?;
    let done = progress.get("done")?;
    Some(match progress.get("total").filter(|t| !t.is_null()) {
        Some(total) => format!("done {done} of {total}"),
        None => format!("done {done}"),
    })
}

/// The bar of one evidence record.
fn record_span(evidence: &EvidenceView) -> Span {
    let r = &evidence.record;
    let start = r.started_ms.unwrap_or(0);
    let end = start + r.elapsed_ms;
    let mut words = Vec::new();
    let kind = match r.ended {
        Ended::Exited { code: HAND_OFF } => {
            let job = r
                .envelope
                .as_ref()
                .and_then(|e| e.pointer("/data/job_id"))
                .and_then(Value::as_str)
                .map_or_else(String::new, |id| format!(", job {}", cut(id, 14)));
            words.push(format!("exit 14, handed off{job}"));
            SpanKind::HandOff
        }
        Ended::Exited { code } => {
            words.push(format!("exit {code}"));
            SpanKind::Call
        }
        Ended::Signaled { signal } => {
            words.push(format!("ended by signal {signal}"));
            SpanKind::Killed
        }
        Ended::TimedOut => {
            words.push("killed by conform at its limit".to_owned());
            SpanKind::Killed
        }
    };
    words.push(format!("after {}", human_duration(r.elapsed_ms)));
    if let Some(progress) = progress_of(r.envelope.as_ref()) {
        words.push(progress);
    }
    let mut marks = Vec::new();
    if let Some(budget) = r.budget_ms {
        words.push(format!("budget {budget} ms"));
        marks.push(Mark {
            at_ms: start + budget,
            kind: MarkKind::Budget,
            label: format!("budget {budget} ms"),
        });
    }
    let mut over_from = None;
    if let Some(bound) = r.may_hold_ms {
        marks.push(Mark {
            at_ms: start + bound,
            kind: MarkKind::Bound,
            label: format!("may hold its caller {bound} ms"),
        });
        if r.elapsed_ms > bound && matches!(r.ended, Ended::Exited { .. }) {
            words.push(format!(
                "held its caller {} ms past the {bound} ms it may",
                r.elapsed_ms - bound
            ));
            over_from = Some(start + bound);
        } else {
            words.push(format!("may hold {bound} ms"));
        }
    }
    if let Some(signal) = &r.signal {
        let to = match signal.to {
            SignalTarget::Process => "the process",
            SignalTarget::Group => "its process group",
        };
        let label = format!("{} to {to} at {} ms", signal.signal, signal.after_ms);
        words.push(label.clone());
        marks.push(Mark { at_ms: start + signal.after_ms, kind: MarkKind::Signal, label });
    }
    if r.ended == Ended::TimedOut {
        marks.push(Mark { at_ms: end, kind: MarkKind::Kill, label: "killed at its limit".into() });
    }
    let pipes_open_until = match r.pipes_closed_after_ms {
        None => {
            words.push("stdout and stderr still open when conform stopped waiting".to_owned());
            Some(None)
        }
        Some(closed) if closed > r.elapsed_ms + 100 => {
            words.push(format!("pipes open {} ms after the exit", closed - r.elapsed_ms));
            Some(Some(start + closed))
        }
        Some(_) => None,
    };
    Span {
        start_ms: start,
        end_ms: end,
        kind,
        label: words.join(", "),
        over_from_ms: over_from,
        pipes_open_until,
        marks,
    }
}

/// The words under a lane's bars: one bar's own, or for several (the hops of a loop) how
/// many ended how, and the progress they reported.
fn lane_words(lane: &Lane) -> String {
    let finding = lane.finding.as_ref().map_or_else(String::new, |f| format!("finding [{f}]: "));
    match lane.spans.as_slice() {
        [one] => format!("{finding}{}", one.label),
        spans => {
            let handed = spans.iter().filter(|s| s.kind == SpanKind::HandOff).count();
            let last = spans.last().map_or_else(String::new, |s| {
                s.label.split(", ").next().unwrap_or_default().to_owned()
            });
            let progress: Vec<String> = spans
                .iter()
                .filter_map(|s| {
                    s.label.split(", ").find(|w| w.starts_with("done ")).map(str::to_owned)
                })
                .collect();
            let mut words =
                format!("{finding}{} runs: {handed} handed off, the last {last}", spans.len());
            if !progress.is_empty() {
                let _ = write!(words, "; {}", progress.join(", "));
            }
            words
        }
    }
}

/// A lane as a sentence of the text alternative.
fn lane_sentence(lane: &Lane) -> String {
    let (start, end) = match (lane.spans.first(), lane.spans.last()) {
        (Some(first), Some(last)) => (first.start_ms, last.end_ms),
        _ => (0, 0),
    };
    format!(
        "{} ({}), from {} ms to {} ms: {}.",
        lane.label,
        lane.detail,
        start,
        end,
        lane_words(lane)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_few() {
        assert_eq!(tick_step(900), 100);
        assert_eq!(tick_step(2600), 250);
        assert_eq!(tick_step(31_000), 5000);
        assert!(tick_step(100_000_000) >= 10_000_000);
    }

    #[test]
    fn words_are_cut_with_an_ellipsis() {
        assert_eq!(cut("analyze", 10), "analyze");
        assert_eq!(cut("analyze data.csv", 8), "analyze…");
    }
}
