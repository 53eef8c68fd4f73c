//! A failed outcome ([`Failure`]) and a warning ([`Warning`]): what an envelope's `error` and
//! `warnings` will say.

use serde_json::Value;

use super::exit::Exit;
use super::stop::StopReason;

/// Phase of a failure (`error.phase`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Arguments were checked; nothing was done.
    Validation,
    /// The work ran.
    Execution,
    /// Cleaning up after the work.
    Cleanup,
}

impl Phase {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Validation => "validation",
            Phase::Execution => "execution",
            Phase::Cleanup => "cleanup",
        }
    }
}

/// A failed outcome: what the envelope's `error` (and, for a failure payload such as
/// INCOMPLETE, `data`) will say. `retryable` left `None` is filled in from the command's
/// declared entry for `exit`.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// The exit code (never SUCCESS).
    pub exit: Exit,
    /// `error.code`, `^[A-Z][A-Z0-9_]+$`.
    pub code: String,
    /// `error.message`.
    pub message: String,
    /// `error.detail`: longer prose (a log tail, a panic message).
    pub detail: Option<String>,
    /// `error.context`: structured facts about the failure.
    pub context: Option<Value>,
    /// `error.suggestion`.
    pub suggestion: Option<String>,
    /// `error.retryable`; `None` takes the declared entry's.
    pub retryable: Option<bool>,
    /// `error.retry_after_ms`.
    pub retry_after_ms: Option<u64>,
    /// `error.phase`.
    pub phase: Phase,
    /// `data` of a failure payload (INCOMPLETE); `None` writes `data: null`.
    pub data: Option<Value>,
    /// Set when job work stopped at a safe point on the runtime's request (budget, SIGTERM,
    /// cancel, lifetime): not an answer of its own, the framework turns it into INCOMPLETE
    /// `paused`, a cancellation or TIMEOUT.
    pub job_stop: Option<crate::runtime::stop::StopReason>,
}

impl Failure {
    /// A failure in the execution phase.
    pub fn new(exit: Exit, code: &str, message: impl Into<String>) -> Self {
        Failure {
            exit,
            code: code.to_owned(),
            message: message.into(),
            detail: None,
            context: None,
            suggestion: None,
            retryable: None,
            retry_after_ms: None,
            phase: Phase::Execution,
            data: None,
            job_stop: None,
        }
    }

    /// Job work met a stop request at a safe point (see [`Failure::job_stop`]); return it at
    /// once, nothing else.
    pub fn job_stopped(reason: crate::runtime::stop::StopReason) -> Self {
        let mut failure = Failure::new(Exit::INCOMPLETE, "INCOMPLETE", "the work stopped");
        failure.job_stop = Some(reason);
        failure
    }

    /// An ARG_ERROR in the validation phase.
    pub fn arg(code: &str, message: impl Into<String>) -> Self {
        Failure::new(Exit::ARG_ERROR, code, message).phase(Phase::Validation).retryable(false)
    }

    /// An internal error.
    pub fn internal(message: impl Into<String>) -> Self {
        Failure::new(Exit::GENERAL_ERROR, "INTERNAL_ERROR", message)
    }

    /// Sets `error.detail`.
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Sets `error.context`.
    pub fn context(mut self, context: Value) -> Self {
        self.context = Some(context);
        self
    }

    /// Sets `error.suggestion`.
    pub fn suggestion(mut self, suggestion: impl Into<String>) -> Self {
        self.suggestion = Some(suggestion.into());
        self
    }

    /// Sets `error.retryable` explicitly.
    pub fn retryable(mut self, retryable: bool) -> Self {
        self.retryable = Some(retryable);
        self
    }

    /// Sets `error.retry_after_ms`.
    pub fn retry_after_ms(mut self, ms: u64) -> Self {
        self.retry_after_ms = Some(ms);
        self
    }

    /// Sets `error.phase`.
    pub fn phase(mut self, phase: Phase) -> Self {
        self.phase = phase;
        self
    }

    /// Carries `data` (a failure payload such as INCOMPLETE's).
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// The cancellation answer after SIGINT or SIGHUP (REQ-F-069): `CANCELLED`, exit 128 + the
    /// signal (130, 129), `data.partial` true, `what` saying what became of the work.
    pub fn cancelled_by(signal: i32, what: &str) -> Self {
        let (exit, name) = if signal == libc::SIGHUP {
            (Exit::SIGHUP, "SIGHUP")
        } else {
            (Exit::SIGINT, "SIGINT")
        };
        Failure::new(exit, "CANCELLED", format!("cancelled by {name}; {what}"))
            .retryable(false)
            .context(serde_json::json!({"signal": name}))
            .with_data(serde_json::json!({"partial": true}))
    }

    /// The process ran out of file descriptors (EMFILE, or the system's ENFILE): `what` failed
    /// ("failed to open ..."): PRECONDITION 4 `TOO_MANY_OPEN_FILES`, naming the limit; no path
    /// is at fault, so the advice is the limit, not another directory.
    pub fn too_many_open_files(what: &str, error: impl std::fmt::Display) -> Self {
        let limit = crate::runtime::fsutil::descriptor_limit();
        let shown = limit.map_or_else(|| "unknown".to_owned(), |l| l.to_string());
        Failure::new(
            Exit::PRECONDITION,
            "TOO_MANY_OPEN_FILES",
            format!("{what}: the process may open no more files ({error})"),
        )
        .retryable(false)
        .context(serde_json::json!({"open_files_limit": limit}))
        .suggestion(format!(
            "raise the limit on open files (ulimit -n, now {shown}) or close the descriptors \
             passed down to reftool, then repeat the call"
        ))
    }

    /// The failure for work that stopped because the framework asked it to. The framework
    /// replaces it with the honest TIMEOUT or cancellation envelope; commands just return it.
    pub fn stopped(reason: StopReason) -> Self {
        match reason {
            StopReason::Timeout => Failure::new(Exit::TIMEOUT, "TIMEOUT", "the work stopped"),
            StopReason::Signal => Failure::new(Exit::SIGTERM, "CANCELLED", "the work stopped"),
            StopReason::Budget => Failure::new(Exit::INCOMPLETE, "INCOMPLETE", "the work paused"),
        }
    }
}

/// One warning (`warnings[]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    /// `^[A-Z][A-Z0-9_]+$`.
    pub code: String,
    /// What happened.
    pub message: String,
}
