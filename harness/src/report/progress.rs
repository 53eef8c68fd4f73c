//! Progress on stderr while a run goes on: one line per finished scenario,
//! `[ 3/12] pass   must   REQ-F-080 budget-flag-beats-env 2.03s`, so a long run is never
//! silent and stdout stays reserved for the report.

use super::{Sink, colour_for_stderr, human_duration};
use crate::event::{Event, ReportError, Reporter};
use crate::outcome::Status;

/// Writes a line per finished scenario.
pub struct ProgressReporter {
    sink: Sink,
    colour: bool,
    total: usize,
    done: usize,
}

impl ProgressReporter {
    /// Progress on conform's stderr, coloured when it is a terminal and `NO_COLOR` is unset.
    pub fn stderr() -> Self {
        ProgressReporter::new(Sink::stderr(), colour_for_stderr())
    }

    /// Progress on any sink.
    pub fn new(sink: Sink, colour: bool) -> Self {
        ProgressReporter { sink, colour, total: 0, done: 0 }
    }
}

impl Reporter for ProgressReporter {
    fn handle(&mut self, event: &Event) -> Result<(), ReportError> {
        match event {
            Event::RunStarted(info) => {
                self.total = info.scenario_count;
                self.sink.write_all(&format!(
                    "conform: {} scenarios against {}, {} at a time\n",
                    info.scenario_count, info.tool, info.jobs
                ))
            }
            Event::ScenarioStarted { .. } => Ok(()),
            Event::ScenarioFinished(r) => {
                self.done += 1;
                let width = self.total.max(self.done).to_string().len();
                let word = format!("{:<6}", r.display_status());
                let word = match (&r.status, self.colour) {
                    (_, false) => word,
                    (_, true) if r.is_expected_failure() => format!("\x1b[33m{word}\x1b[0m"),
                    (Status::Pass, true) => format!("\x1b[32m{word}\x1b[0m"),
                    (Status::Skip { .. }, true) => format!("\x1b[2m{word}\x1b[0m"),
                    (Status::Fail | Status::Error { .. }, true) => {
                        format!("\x1b[1;31m{word}\x1b[0m")
                    }
                };
                let tail = match &r.status {
                    Status::Skip { reason } => reason.clone(),
                    _ => human_duration(r.duration_ms),
                };
                self.sink.write_all(&format!(
                    "[{:>width$}/{}] {word} {:<6} {} {} {tail}\n",
                    self.done,
                    self.total.max(self.done),
                    r.level.as_str(),
                    r.requirement,
                    r.id,
                ))
            }
            Event::RunFinished(summary) => self.sink.write_all(&format!(
                "conform: finished in {} (exit {})\n",
                human_duration(summary.duration_ms),
                summary.exit_code
            )),
        }
    }
}
