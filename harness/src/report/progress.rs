//! Progress on stderr while a run goes on, so a long run is never silent and stdout stays
//! reserved for the report.
//!
//! * When stderr is a terminal: a progress bar (indicatif) with the last finished scenario,
//!   and a line above it for each failure or harness error as soon as it happens.
//! * Otherwise (CI logs, pipes): one line per scenario that ran,
//!   `[ 3/12] pass   must   REQ-F-080 budget-flag-beats-env 2.03s`, and one line for each run
//!   of skipped scenarios in a row, `[40/92] skip   37 scenarios: a, b, c and 34 more`
//!   (verbose, `conform run -v`: one line each). A skip's reason is the report's to say, once.
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
    /// One line per skipped scenario instead of one per run of them.
    verbose: bool,
    /// Skipped scenarios not said yet (lines mode), with the count of finished ones after the
    /// last of them.
    skipped: Vec<String>,
    skipped_done: usize,
    /// The human report follows: no line of how the run ended.
    report_follows: bool,
}

/// How many ids a line of skipped scenarios names.
const SKIPS_NAMED: usize = 3;

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
        ProgressReporter {
            mode: Mode::Lines { sink, colour },
            total: 0,
            done: 0,
            verbose: false,
            skipped: Vec::new(),
            skipped_done: 0,
            report_follows: false,
        }
    }

    /// A progress bar drawn on `target`.
    pub fn bar(target: ProgressDrawTarget) -> Self {
        let bar = ProgressBar::with_draw_target(Some(0), target);
        if let Ok(style) =
            ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {wide_msg}")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        ProgressReporter {
            mode: Mode::Bar(bar),
            total: 0,
            done: 0,
            verbose: false,
            skipped: Vec::new(),
            skipped_done: 0,
            report_follows: false,
        }
    }

    /// One line per skipped scenario when `verbose` (lines mode).
    #[must_use]
    pub fn verbose(mut self, verbose: bool) -> Self {
        self.verbose = verbose;
        self
    }

    /// Whether the human report follows the run (on stdout): then its verdict line says how
    /// the run ended, and the progress lines do not say it first.
    #[must_use]
    pub fn report_follows(mut self, follows: bool) -> Self {
        self.report_follows = follows;
        self
    }

    /// Says the skipped scenarios not said yet, on one line (lines mode).
    fn flush_skips(&mut self) -> Result<(), ReportError> {
        if self.skipped.is_empty() {
            return Ok(());
        }
        let ids = std::mem::take(&mut self.skipped);
        let width = self.total.max(self.skipped_done).to_string().len();
        let named: Vec<&str> = ids.iter().take(SKIPS_NAMED).map(String::as_str).collect();
        let what = match ids.len() {
            1 => named.join(""),
            n if n > SKIPS_NAMED => {
                format!("{n} scenarios: {} and {} more", named.join(", "), n - SKIPS_NAMED)
            }
            n => format!("{n} scenarios: {}", named.join(", ")),
        };
        let line = format!(
            "[{:>width$}/{}] skip   {}\n",
            self.skipped_done,
            self.total.max(self.skipped_done),
            inert::line(&what)
        );
        match &mut self.mode {
            Mode::Lines { sink, .. } => sink.write_all(&line),
            Mode::Bar(_) => Ok(()),
        }
    }

    /// How many scenarios have finished so far.
    pub fn finished(&self) -> usize {
        self.done
    }

    /// A line about the run itself (a calibration, a failed setup), between scenario lines;
    /// what it quotes of the tool is made inert, on one line.
    fn note(&mut self, line: &str) -> Result<(), ReportError> {
        self.flush_skips()?;
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
        // A skip's reason is the report's to say.
        let tail = match &r.status {
            Status::Skip { .. } => String::new(),
            _ => format!(" {}", human_duration(r.duration_ms)),
        };
        format!(
            "[{:>width$}/{}] {word} {:<6} {} {}{tail}",
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
                    Mode::Lines { .. } if self.report_follows => Ok(()),
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
                let skip = matches!(r.status, Status::Skip { .. });
                if let (Mode::Lines { .. }, true, false) = (&self.mode, skip, self.verbose) {
                    self.done += 1;
                    self.skipped.push(r.id.clone());
                    self.skipped_done = self.done;
                    return Ok(());
                }
                self.flush_skips()?;
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
            Event::RunFinished(summary) => {
                self.flush_skips()?;
                match &mut self.mode {
                    Mode::Lines { .. } if self.report_follows => Ok(()),
                    Mode::Lines { sink, .. } => sink.write_all(&format!(
                        "conform: finished in {} (exit {})\n",
                        human_duration(summary.duration_ms),
                        summary.exit_code
                    )),
                    Mode::Bar(bar) => {
                        bar.finish_and_clear();
                        Ok(())
                    }
                }
            }
        }
    }
}
