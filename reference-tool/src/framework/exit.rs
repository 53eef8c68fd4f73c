//! Exit codes and the exit-code entries a command declares (REQ-F-001, REQ-C-001).
//!
//! Codes 0–14 form the standard table; 79–125 are free for a command's own meanings and must be
//! declared like any other; 15–78 are unassigned and 126–255 belong to the shell, so a command
//! may declare neither. The framework's own signal exits (143 after SIGTERM, 130 after SIGINT,
//! 129 after SIGHUP) are not command exits; of them the manifest lists 130 for every command,
//! as REQ-F-069 asks of the framework.

use serde::Serialize;

/// A process exit code. Only the named constants below, or a command-specific code in
/// 79–125, are meaningful; code never writes a bare integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Exit(pub u8);

impl Exit {
    /// The operation completed as intended.
    pub const SUCCESS: Exit = Exit(0);
    /// Something went wrong that no other code describes (also: internal errors, panics).
    pub const GENERAL_ERROR: Exit = Exit(1);
    /// The invocation was invalid; nothing was done.
    pub const ARG_ERROR: Exit = Exit(2);
    /// Some of the work succeeded, some failed.
    pub const PARTIAL_FAILURE: Exit = Exit(3);
    /// A precondition does not hold (including input that would need a prompt).
    pub const PRECONDITION: Exit = Exit(4);
    /// The thing named does not exist.
    pub const NOT_FOUND: Exit = Exit(5);
    /// The request conflicts with existing state.
    pub const CONFLICT: Exit = Exit(6);
    /// The caller may not do this.
    pub const PERMISSION_DENIED: Exit = Exit(7);
    /// Credentials are needed.
    pub const AUTH_REQUIRED: Exit = Exit(8);
    /// Payment is needed.
    pub const PAYMENT_REQUIRED: Exit = Exit(9);
    /// The wall-clock limit ran out and the work stopped.
    pub const TIMEOUT: Exit = Exit(10);
    /// Too many requests.
    pub const RATE_LIMITED: Exit = Exit(11);
    /// A resource is temporarily unavailable (e.g. the state database stays locked).
    pub const UNAVAILABLE: Exit = Exit(12);
    /// The resource moved.
    pub const REDIRECTED: Exit = Exit(13);
    /// The work goes on (or is paused); run `data.continue_command`.
    pub const INCOMPLETE: Exit = Exit(14);
    /// 128 + SIGTERM: the process was asked to stop (REQ-F-013).
    pub const SIGTERM: Exit = Exit(143);
    /// 128 + SIGINT: the caller cancelled the call (REQ-F-069).
    pub const SIGINT: Exit = Exit(130);
    /// 128 + SIGHUP: the caller's terminal went away; answered like SIGINT.
    pub const SIGHUP: Exit = Exit(129);

    /// First and last code a command may give its own meaning.
    pub const COMMAND_SPECIFIC: std::ops::RangeInclusive<u8> = 79..=125;

    /// The standard name of a code in the table, if it has one.
    pub fn standard_name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "SUCCESS",
            1 => "GENERAL_ERROR",
            2 => "ARG_ERROR",
            3 => "PARTIAL_FAILURE",
            4 => "PRECONDITION",
            5 => "NOT_FOUND",
            6 => "CONFLICT",
            7 => "PERMISSION_DENIED",
            8 => "AUTH_REQUIRED",
            9 => "PAYMENT_REQUIRED",
            10 => "TIMEOUT",
            11 => "RATE_LIMITED",
            12 => "UNAVAILABLE",
            13 => "REDIRECTED",
            14 => "INCOMPLETE",
            _ => return None,
        })
    }

    /// Whether a command may declare this code at all.
    pub fn declarable(self) -> bool {
        self.standard_name().is_some() || Self::COMMAND_SPECIFIC.contains(&self.0)
    }

    /// The code as the process exit status.
    pub fn code(self) -> u8 {
        self.0
    }
}

/// What a failed or finished run left behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SideEffects {
    /// Nothing was changed.
    None,
    /// Some changes were made.
    Partial,
    /// All intended changes were made.
    Complete,
}

/// One entry of a command's `exit_codes` map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExitCodeEntry {
    /// The standard name, or the command's own for 79–125.
    pub name: String,
    /// What this exit means for this command.
    pub description: String,
    /// Whether repeating the identical call may succeed.
    pub retryable: bool,
    /// What the run left behind when it exits with this code.
    pub side_effects: SideEffects,
}

impl ExitCodeEntry {
    /// An entry named after the standard table (or `COMMAND_SPECIFIC` outside it).
    pub fn new(
        exit: Exit,
        description: impl Into<String>,
        retryable: bool,
        side_effects: SideEffects,
    ) -> Self {
        ExitCodeEntry {
            name: exit.standard_name().unwrap_or("COMMAND_SPECIFIC").to_owned(),
            description: description.into(),
            retryable,
            side_effects,
        }
    }

    /// Overrides the name (command-specific codes).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
}
