//! One event stream, many reporters.
//!
//! The runner describes a run as a sequence of [`Event`]s; every output (the terminal report,
//! the JSON envelope, JUnit XML, the Markdown summary, progress lines) is a [`Reporter`] that
//! consumes the same sequence. Worker threads send events through an [`EventSender`]; one
//! reporter thread, owned by [`EventStream`], hands each event to every reporter in turn, so
//! outputs never interleave and reporters need no locking.
//!
//! ```no_run
//! # use conform::event::*;
//! # fn reporters() -> Vec<Box<dyn Reporter>> { Vec::new() }
//! let stream = EventStream::start(reporters());
//! let sender = stream.sender();
//! std::thread::scope(|s| {
//!     s.spawn(|| sender.send(Event::ScenarioStarted { id: "x".into() }));
//! });
//! drop(sender);
//! stream.finish()?;
//! # Ok::<(), ReportError>(())
//! ```

use std::sync::mpsc;
use std::thread::JoinHandle;

use crate::outcome::ScenarioResult;
use crate::summary::RunSummary;

/// What is known when a run starts.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RunInfo {
    /// The tool under test, as given on the command line.
    pub tool: String,
    /// The contract's schema version conform checks, e.g. `3.20`.
    pub spec_version: String,
    /// How many scenarios the plan holds (skipped ones included).
    pub scenario_count: usize,
    /// How many scenarios run at once at most (`-j`, or the pace's ceiling).
    pub jobs: usize,
    /// When the pace decides how many run at once (no `-j`): how many it lets in first
    /// (see [`crate::pace`]).
    pub paced_from: Option<usize>,
}

/// One thing that happened in a run.
// The run's summary is sent once per run; boxing it would save nothing worth the noise.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Event {
    /// The plan is made; nothing has run yet.
    RunStarted(RunInfo),
    /// A scenario began (not sent for skipped scenarios).
    ScenarioStarted {
        /// Its id.
        id: String,
    },
    /// A role was calibrated (sent once per role and run, by the scenario that needed it
    /// first): its `--budget 0` duration, or why it could not be measured.
    Calibrated {
        /// The role.
        role: String,
        /// Its duration D in milliseconds, or the calibration's error.
        outcome: Result<u64, String>,
    },
    /// A scenario's sandbox could not be prepared (a fixture, a setup line): the scenario
    /// ends in a harness error naming it.
    SetupFailed {
        /// The scenario.
        id: String,
        /// What failed.
        error: String,
    },
    /// A scenario's first run ended in a verdict that may be the machine's load (a failure
    /// that depends on timing, a premise the run did not meet): it runs again alone once
    /// every other scenario has ended, and that run's [`Event::ScenarioFinished`] gives the
    /// verdict.
    ScenarioToConfirm(Box<ScenarioResult>),
    /// A scenario ended (or was skipped), baseline and snapshots applied.
    ScenarioFinished(Box<ScenarioResult>),
    /// Every scenario has finished.
    RunFinished(RunSummary),
}

/// A reporter could not write its output.
#[derive(Debug, thiserror::Error)]
#[error("failed to {action}: {source}")]
pub struct ReportError {
    /// What was attempted, e.g. "write the JUnit report to out.xml".
    pub action: String,
    /// The underlying error.
    #[source]
    pub source: std::io::Error,
}

impl ReportError {
    /// A report error for this action.
    pub fn new(action: impl Into<String>, source: std::io::Error) -> Self {
        ReportError { action: action.into(), source }
    }
}

/// Something that turns events into output.
pub trait Reporter: Send {
    /// Consumes one event.
    fn handle(&mut self, event: &Event) -> Result<(), ReportError>;

    /// Called once after the last event (flush files and the like).
    fn finish(&mut self) -> Result<(), ReportError> {
        Ok(())
    }
}

/// Several reporters as one: each event goes to each reporter, in order. An error of one
/// reporter does not stop the others; the first error is returned.
#[derive(Default)]
pub struct FanOut {
    reporters: Vec<Box<dyn Reporter>>,
}

impl FanOut {
    /// A fan-out to these reporters.
    pub fn new(reporters: Vec<Box<dyn Reporter>>) -> Self {
        FanOut { reporters }
    }

    /// Adds a reporter.
    pub fn push(&mut self, reporter: Box<dyn Reporter>) {
        self.reporters.push(reporter);
    }

    fn each(
        &mut self,
        mut f: impl FnMut(&mut dyn Reporter) -> Result<(), ReportError>,
    ) -> Result<(), ReportError> {
        let mut first = None;
        for reporter in &mut self.reporters {
            if let Err(e) = f(reporter.as_mut()) {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }
}

impl Reporter for FanOut {
    fn handle(&mut self, event: &Event) -> Result<(), ReportError> {
        self.each(|r| r.handle(event))
    }

    fn finish(&mut self) -> Result<(), ReportError> {
        self.each(|r| r.finish())
    }
}

/// A cloneable, thread-safe handle for sending events to an [`EventStream`].
#[derive(Clone)]
pub struct EventSender {
    inner: mpsc::Sender<Event>,
}

impl EventSender {
    /// A sender whose events go nowhere (a scenario run outside a reported run).
    pub fn discarding() -> Self {
        let (inner, _) = mpsc::channel();
        EventSender { inner }
    }

    /// Sends an event. Never blocks; if the reporter thread is gone, the event is dropped (the
    /// error surfaces from [`EventStream::finish`]).
    pub fn send(&self, event: Event) {
        // A send fails only when the reporter thread ended, whose error `finish` reports.
        let _ = self.inner.send(event);
    }
}

/// The reporter thread and its channel.
pub struct EventStream {
    sender: mpsc::Sender<Event>,
    thread: JoinHandle<Result<(), ReportError>>,
}

impl EventStream {
    /// Starts the reporter thread feeding these reporters.
    pub fn start(reporters: Vec<Box<dyn Reporter>>) -> Self {
        let (sender, receiver) = mpsc::channel::<Event>();
        let thread = std::thread::spawn(move || {
            let mut fan_out = FanOut::new(reporters);
            let mut first: Option<ReportError> = None;
            // Keep draining after an error so that senders never notice, and the other
            // reporters still get every event.
            for event in receiver {
                if let Err(e) = fan_out.handle(&event) {
                    first.get_or_insert(e);
                }
            }
            if let Err(e) = fan_out.finish() {
                first.get_or_insert(e);
            }
            first.map_or(Ok(()), Err)
        });
        EventStream { sender, thread }
    }

    /// A handle for sending events (clone it for each worker thread).
    pub fn sender(&self) -> EventSender {
        EventSender { inner: self.sender.clone() }
    }

    /// Closes the stream and waits until every reporter has handled every event and finished.
    /// Drop every [`EventSender`] first, or this waits for them.
    pub fn finish(self) -> Result<(), ReportError> {
        drop(self.sender);
        match self.thread.join() {
            Ok(result) => result,
            Err(_) => Err(ReportError::new(
                "run the reporters",
                std::io::Error::other("a reporter panicked"),
            )),
        }
    }
}
