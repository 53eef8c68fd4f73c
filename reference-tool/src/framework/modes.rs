//! Output and interaction modes, decided once at start-up (REQ-F-003, REQ-F-009).
//!
//! - JSON mode when stdout is not a terminal, or `CI` or `NO_COLOR` is set (to anything);
//!   `--output json` forces it and `--output text` forces readable text.
//! - Interactive when stdin is a terminal. Nothing ever prompts in non-interactive mode.

use std::ffi::OsString;
use std::io::IsTerminal;

/// How the response is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputMode {
    /// One JSON envelope on stdout.
    Json,
    /// Readable text for a person.
    Text,
}

/// The modes of one invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Modes {
    /// How the response is written.
    pub output: OutputMode,
    /// stdin is a terminal.
    pub interactive: bool,
    /// stdout is a terminal.
    pub stdout_is_terminal: bool,
}

/// Reads `--output json|text` (or `--output=...`) from argv without parsing the rest, so that
/// even a parse error is written in the mode the caller asked for. An unknown value is left to
/// the parser, which refuses it.
pub fn output_override(argv: &[OsString]) -> Option<OutputMode> {
    let values = output_values(argv);
    let last = *values.last()?;
    // Two different values are refused by the parser (`super::options`); that refusal is
    // written as if no value had been given.
    values.iter().all(|v| *v == last).then_some(last)
}

/// Every valid `--output` value in argv, in order, up to `--`.
fn output_values(argv: &[OsString]) -> Vec<OutputMode> {
    let mut values = Vec::new();
    let mut iter = argv.iter().skip(1);
    while let Some(arg) = iter.next() {
        let Some(arg) = arg.to_str() else { continue };
        if arg == "--" {
            break;
        }
        let value = if arg == "--output" {
            iter.next().and_then(|v| v.to_str())
        } else {
            arg.strip_prefix("--output=")
        };
        let mode = match value {
            Some("json") => OutputMode::Json,
            Some("text") => OutputMode::Text,
            _ => continue,
        };
        values.push(mode);
    }
    values
}

impl Modes {
    /// Decides the modes from the real terminals and environment.
    pub fn detect(argv: &[OsString]) -> Modes {
        let stdout_is_terminal = std::io::stdout().is_terminal();
        let env_forces_json =
            std::env::var_os("CI").is_some() || std::env::var_os("NO_COLOR").is_some();
        Modes::decide(
            output_override(argv),
            stdout_is_terminal,
            env_forces_json,
            std::io::stdin().is_terminal(),
        )
    }

    /// The decision itself, from its inputs.
    pub fn decide(
        forced: Option<OutputMode>,
        stdout_is_terminal: bool,
        env_forces_json: bool,
        stdin_is_terminal: bool,
    ) -> Modes {
        let output = forced.unwrap_or(if !stdout_is_terminal || env_forces_json {
            OutputMode::Json
        } else {
            OutputMode::Text
        });
        Modes { output, interactive: stdin_is_terminal, stdout_is_terminal }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn json_unless_a_person_is_at_the_terminal() {
        assert_eq!(Modes::decide(None, false, false, false).output, OutputMode::Json);
        assert_eq!(Modes::decide(None, true, true, false).output, OutputMode::Json);
        assert_eq!(Modes::decide(None, true, false, true).output, OutputMode::Text);
        assert_eq!(
            Modes::decide(Some(OutputMode::Json), true, false, true).output,
            OutputMode::Json
        );
        assert_eq!(
            Modes::decide(Some(OutputMode::Text), false, false, false).output,
            OutputMode::Text
        );
    }

    #[test]
    fn the_override_is_found_in_either_spelling() {
        assert_eq!(
            output_override(&argv(&["t", "version", "--output", "text"])),
            Some(OutputMode::Text)
        );
        assert_eq!(output_override(&argv(&["t", "--output=json"])), Some(OutputMode::Json));
        assert_eq!(output_override(&argv(&["t", "--output", "xml"])), None);
        assert_eq!(output_override(&argv(&["t", "--", "--output=json"])), None);
        assert_eq!(
            output_override(&argv(&["t", "--output=text", "v", "--output", "text"])),
            Some(OutputMode::Text)
        );
        assert_eq!(output_override(&argv(&["t", "--output=text", "v", "--output", "json"])), None);
    }
}
