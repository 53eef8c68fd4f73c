//! Progress on stderr while a run goes on, so a long run is never silent and stdout stays
//! reserved for the report.
//!
//! * When stderr is a terminal: a progress bar (indicatif) with the last finished scenario,
//!   and a line above it for each failure or harness error as soon as it happens.
//! * Otherwise (CI logs, pipes): one line per finished scenario,
//!   `[ 3/12] pass   must   REQ-F-080 budget-flag-beats-env 2.03s`.
//!
//! Whatever a line quotes that conform did not write (a skip reason quoting a response, a
//! calibration's error, the tool's path) is made inert and kept on the line ([`inert::line`]).

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{Sink, colour_for_stderr, human_duration};
use crate::event::{Event, ReportError, Reporter};
use crate::inert;
use crate::outcome::{ScenarioResult, Status};

enum Mode {
    Lines { sink: Sink, colour: bool },
    Bar(ProgressBar),
}

/// Reports progress while scenarios finish.
pub struct ProgressReporter {
    mode: Mode,
    total: usize,
    done: usize,
}

impl ProgressReporter {
    /// Progress on conform's stderr: a bar on a terminal, lines otherwise.
    pub fn stderr() -> Self {
        if std::io::stderr().is_terminal() {
            ProgressReporter::bar(ProgressDrawTarget::stderr())
        } else {
            ProgressReporter::new(Sink::stderr(), colour_for_stderr())
        }
    }

    /// One line per finished scenario on any sink.
    pub fn new(sink: Sink, colour: bool) -> Self {
        ProgressReporter { mode: Mode::Lines { sink, colour }, total: 0, done: 0 }
    }

    /// A progress bar drawn on `target`.
    pub fn bar(target: ProgressDrawTarget) -> Self {
        let bar = ProgressBar::with_draw_target(Some(0), target);
        if let Ok(style) =
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {wide_msg}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        ProgressReporter { mode: Mode::Bar(bar), total: 0, done: 0 }
    }

    /// How many scenarios have finished so far.
    pub fn finished(&self) -> usize {
        self.done
    }

    /// A line about the run itself (a calibration, a failed setup), between scenario lines;
    /// what it quotes of the tool is made inert, on one line.
    fn note(&mut self, line: &str) -> Result<(), ReportError> {
        let line = inert::line(line);
        match &mut self.mode {
            Mode::Lines { sink, .. } => sink.write_all(&format!("{line}\n")),
            Mode::Bar(bar) => {
                bar.println(line);
                Ok(())
            }
        }
    }

    fn line(&self, r: &ScenarioResult, colour: bool) -> String {
        let width = self.total.max(self.done).to_string().len();
        let word = format!("{:<6}", r.display_status());
        let word = match (&r.status, colour) {
            (_, false) => word,
            (_, true) if r.is_expected_failure() => format!("\x1b[33m{word}\x1b[0m"),
            (Status::Pass, true) => format!("\x1b[32m{word}\x1b[0m"),
            (Status::Skip { .. }, true) => format!("\x1b[2m{word}\x1b[0m"),
            (Status::Fail | Status::Error { .. }, true) => format!("\x1b[1;31m{word}\x1b[0m"),
        };
        let tail = match &r.status {
            Status::Skip { reason } => inert::line(&reason.to_string()).into_owned(),
            _ => human_duration(r.duration_ms),
        };
        format!(
            "[{:>width$}/{}] {word} {:<6} {} {} {tail}",
            self.done,
            self.total.max(self.done),
            r.level.as_str(),
            r.requirement,
            r.id,
        )
    }
}

/// How many scenarios run at once, in words.
pub fn at_a_time(info: &crate::event::RunInfo) -> String {
    match info.paced_from {
        Some(first) => {
            format!("up to {} at a time as the machine allows (first {first})", info.jobs)
        }
        None => format!("{} at a time", info.jobs),
    }
}

impl Reporter for ProgressReporter {
    fn handle(&mut self, event: &Event) -> Result<(), ReportError> {
        match event {
            Event::RunStarted(info) => {
                self.total = info.scenario_count;
                match &mut self.mode {
                    Mode::Lines { sink, .. } => sink.write_all(&format!(
                        "conform: {} scenarios against {}, {}\n",
                        info.scenario_count,
                        inert::line(&info.tool),
                        at_a_time(info)
                    )),
                    Mode::Bar(bar) => {
                        bar.set_length(info.scenario_count as u64);
                        bar.set_message(format!("against {}", inert::line(&info.tool)));
                        Ok(())
                    }
                }
            }
            Event::ScenarioToConfirm(r) => {
                let first = match r.findings.first() {
                    Some(f) => format!(" ({}: {})", f.check, f.message),
                    None => String::new(),
                };
                self.note(&format!(
                    "conform: {} {} beside the other scenarios{first}; it runs again alone once they are done, and that run gives its verdict",
                    r.id,
                    match r.status {
                        Status::Fail => "failed",
                        _ => "could not be judged",
                    }
                ))
            }
            Event::ScenarioStarted { id } => {
                if let Mode::Bar(bar) = &self.mode {
                    bar.set_message(id.clone());
                }
                Ok(())
            }
            Event::Calibrated { role, outcome } => {
                let line = match outcome {
                    Ok(ms) => format!("conform: calibrated role `{role}`: {ms} ms with --budget 0"),
                    Err(e) => format!("conform: calibration of role `{role}` failed: {e}"),
                };
                self.note(&line)
            }
            Event::SetupFailed { id, error } => {
                self.note(&format!("conform: {id}: failed to prepare the sandbox: {error}"))
            }
            Event::ScenarioFinished(r) => {
                self.done += 1;
                match &self.mode {
                    Mode::Lines { colour, .. } => {
                        let line = self.line(r, *colour);
                        match &mut self.mode {
                            Mode::Lines { sink, .. } => sink.write_all(&format!("{line}\n")),
                            Mode::Bar(_) => Ok(()),
                        }
                    }
                    Mode::Bar(bar) => {
                        if matches!(r.status, Status::Fail | Status::Error { .. }) {
                            bar.println(self.line(r, colour_for_stderr()));
                        }
                        bar.set_position(self.done as u64);
                        Ok(())
                    }
                }
            }
            Event::RunFinished(summary) => match &mut self.mode {
                Mode::Lines { sink, .. } => sink.write_all(&format!(
                    "conform: finished in {} (exit {})\n",
                    human_duration(summary.duration_ms),
                    summary.exit_code
                )),
                Mode::Bar(bar) => {
                    bar.finish_and_clear();
                    Ok(())
                }
            },
        }
    }
}
