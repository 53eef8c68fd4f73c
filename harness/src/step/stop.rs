//! What ends a step short of its findings: a skip of the scenario ([`Stop::Skip`]), which the
//! tool's legal behaviour or the profile decides, or a fault of conform ([`StepError`]), which
//! is never a verdict on the tool. A step that ends normally yields its findings instead.

use crate::exec::ExecError;
use crate::outcome::SkipReason;

/// A fault of conform itself while it ran a step: the scenario errs, naming the step.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The scenario asks for what this run cannot give it: a template or duration expression
    /// that does not resolve, an earlier step, a role or a calibration that is not there.
    #[error("{0}")]
    Scenario(String),
    /// A process of the step could not be started or waited for.
    #[error(transparent)]
    Exec(#[from] ExecError),
    /// A file or directory of the sandbox the step needs could not be made or read.
    #[error("{what}: {source}")]
    Io {
        /// What the step was doing.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// conform was interrupted (Ctrl-C) before the step started a process.
    #[error(transparent)]
    Interrupted(#[from] crate::interrupt::Interrupted),
}

/// Why a step ends without its findings.
#[derive(Debug)]
pub enum Stop {
    /// The scenario cannot be judged as it stands, and stops here: an argument conform would
    /// add that the tool refused or does not declare, a premise the tool missed legally, a
    /// choice of the tool's that the criterion does not apply to.
    Skip(SkipReason),
    /// A fault of conform.
    Error(StepError),
}

impl From<StepError> for Stop {
    fn from(e: StepError) -> Self {
        Stop::Error(e)
    }
}

impl From<ExecError> for Stop {
    fn from(e: ExecError) -> Self {
        Stop::Error(StepError::Exec(e))
    }
}

/// The messages of the scenario's own language (templates, durations, references, signal
/// names), which are text for the person who wrote the scenario.
impl From<String> for Stop {
    fn from(message: String) -> Self {
        Stop::Error(StepError::Scenario(message))
    }
}

impl From<&str> for Stop {
    fn from(message: &str) -> Self {
        Stop::Error(StepError::Scenario(message.to_owned()))
    }
}

/// `Err` once conform is interrupted: checked before a step starts a process.
pub fn gate() -> Result<(), StepError> {
    Ok(crate::interrupt::gate()?)
}

/// What a step that ran to its verdict yields, or why it stopped.
pub type StepResult = Result<Vec<crate::outcome::Finding>, Stop>;
