//! How long a call may hold its caller, whatever the scenario asks of it.
//!
//! A call of an interruptible command returns within its budget (REQ-F-080: the budget bounds
//! the synchronous call; a resume-only command stops at its next checkpoint past it, REQ-C-035
//! allowing up to 10 s of work between two), and so does `job wait` (REQ-F-081: it holds its
//! caller up to the sync call budget); `job status` never waits at all (REQ-F-081). Every run
//! of such a call in every scenario is held to that, each hop of a continue loop included,
//! before anything else of its step is judged: a premise that the call missed cannot hide a
//! call that held its caller too long (a `job wait` that blocks until the job ends answers its
//! final response, which a premise waiting for a running job would otherwise take as "the job
//! ended first").
//!
//! The budget is the one the tool must have resolved (REQ-F-080): `--budget` on the command
//! line, else `AGENT_CALL_BUDGET_MS`, else 30000 ms; none with `--budget 0`, and none for a
//! caller at a terminal that passed no `--budget`. The bound adds the tool's measured start-up
//! and `{slack}`: the margin every timing check of conform allows.

use std::ffi::OsStr;
use std::time::Duration;

use super::ScenarioState;
use crate::calibrate::{SLACK, SPEC_CADENCE};
use crate::exec::{Invocation, Program, StdinMode, Termination};
use crate::outcome::{Finding, FindingKind, millis};
use crate::scenario::parse_duration_literal;

/// The budget variable (REQ-F-080).
pub const BUDGET_ENV: &str = "AGENT_CALL_BUDGET_MS";
/// The budget when neither the flag nor the variable gives one (REQ-F-080).
pub const DEFAULT_BUDGET: Duration = Duration::from_secs(30);

/// Where a call's budget came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BudgetFrom {
    /// `--budget` on its command line, as written there.
    Flag(String),
    /// The environment variable, as set.
    Env(String),
    /// Neither: the default.
    Default,
}

/// What bounds one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// A call with a budget: an interruptible command or `job wait`.
    Budget {
        /// The budget.
        budget: Duration,
        /// Where it came from.
        from: BudgetFrom,
        /// The command path (`job.wait`, `analyze`, ...).
        command: String,
        /// What a resume-only command may add to reach its next checkpoint (zero otherwise).
        to_checkpoint: Duration,
    },
    /// `job status`, which never waits.
    AtOnce,
}

impl Hold {
    /// The budget the call had to keep (none for `job status`, which has no budget).
    pub fn budget(&self) -> Option<Duration> {
        match self {
            Hold::Budget { budget, .. } => Some(*budget),
            Hold::AtOnce => None,
        }
    }

    /// How long the call may hold its caller, for a tool whose start-up took `startup`: the
    /// budget, the next checkpoint and the start-up, or "at once" (two start-ups) for `job
    /// status`; and the slack either way.
    pub fn bound(&self, startup: Duration) -> Duration {
        match self {
            Hold::AtOnce => startup * 2 + SLACK,
            Hold::Budget { budget, to_checkpoint, .. } => {
                *budget + *to_checkpoint + startup + SLACK
            }
        }
    }
}

/// The budget of a call's words (after the program) and environment: `None` when no bound
/// applies (no budget, `--budget 0`, a budget conform cannot read).
pub fn resolve_budget(
    words: &[String],
    env_value: Option<&OsStr>,
    at_terminal: bool,
) -> Option<(Duration, BudgetFrom)> {
    let flag = words.iter().enumerate().find_map(|(i, w)| match w.strip_prefix("--budget") {
        Some("") => Some(words.get(i + 1).cloned().unwrap_or_default()),
        Some(rest) => rest.strip_prefix('=').map(str::to_owned),
        None => None,
    });
    let (budget, from) = match (flag, env_value) {
        (Some(value), _) => (parse_duration_literal(&value)?, BudgetFrom::Flag(value)),
        // A caller at a terminal that passed no --budget has none (REQ-F-080).
        (None, _) if at_terminal => return None,
        (None, Some(value)) => {
            let text = value.to_str()?.trim().to_owned();
            let ms: u64 = text.parse().ok()?;
            (Duration::from_millis(ms), BudgetFrom::Env(text))
        }
        (None, None) => (DEFAULT_BUDGET, BudgetFrom::Default),
    };
    (!budget.is_zero()).then_some((budget, from))
}

impl ScenarioState<'_> {
    /// The command `inv` invokes: its words after the program, where the command's path
    /// starts among them, and the path (`job.wait`, `analyze`, ...); `None` when no run of its
    /// words names a command of the manifest.
    pub(super) fn invoked(&self, inv: &Invocation) -> Option<(Vec<String>, usize, String)> {
        let words: Vec<String> = match &inv.program {
            Program::Argv(argv) => {
                let tool = self.subject.tool.argv_at(&self.subject.tool.path).len();
                argv.iter().skip(tool).map(|w| w.to_string_lossy().into_owned()).collect()
            }
            // The program may be spelt any way (a path, a bare name, an interpreter and its
            // script): the command is the first run of words that names one.
            Program::Shell(line) => line.split_ascii_whitespace().map(str::to_owned).collect(),
        };
        let commands = &self.subject.commands;
        let (at, path) = (0..words.len()).find_map(|start| {
            let (path, _) = commands.command_for_args(&words[start..])?;
            Some((start, path.to_owned()))
        })?;
        Some((words, at, path))
    }

    /// What bounds the call `inv` runs (`None`: nothing, e.g. a command without interruption
    /// or one whose budget is off).
    pub(super) fn hold_of(&self, inv: &Invocation) -> Option<Hold> {
        let (words, at, path) = self.invoked(inv)?;
        let info = self.subject.commands.by_path.get(&path)?;
        let path = path.as_str();
        if path == "job.status" {
            return Some(Hold::AtOnce);
        }
        if path != "job.wait" && !info.interruptible() {
            return None;
        }
        let words = match &inv.program {
            // Quoting matters only to the value of --budget: split exactly when it is there.
            Program::Shell(line) if line.contains("--budget") => {
                self.shell_words(line).ok()?.into_iter().skip(at).collect()
            }
            _ => words[at..].to_vec(),
        };
        let (budget, from) = resolve_budget(
            &words,
            inv.env.get(OsStr::new(BUDGET_ENV)).map(|v| v.as_os_str()),
            inv.stdin == StdinMode::Pty,
        )?;
        let resume_only =
            path != "job.wait" && info.resume == Some(true) && info.detach != Some(true);
        let to_checkpoint = match resume_only {
            true => self.calibration.as_ref().map_or(SPEC_CADENCE, |c| c.cadence()),
            false => Duration::ZERO,
        };
        Some(Hold::Budget { budget, from, command: path.to_owned(), to_checkpoint })
    }

    /// A finding when observation `i` held its caller longer than its call may.
    pub(super) fn held_too_long(&self, i: usize) -> Option<Finding> {
        let hold = self.holds.get(&i)?;
        let obs = self.observations.get(i)?;
        // A call conform itself ended (killed, timed out) is judged by the step that did so.
        let Termination::Exited(_) = obs.outcome.termination else { return None };
        let took = obs.outcome.elapsed;
        let startup = self.subject.startup;
        let bound = hold.bound(startup);
        let (expected, why) = match hold {
            Hold::AtOnce => {
                let expected = format!(
                    "≤ {} ms (2 × start-up {} ms + slack {} ms)",
                    millis(bound),
                    millis(startup),
                    millis(SLACK)
                );
                (expected, "job status never waits (REQ-F-081)".to_owned())
            }
            Hold::Budget { budget, from, command, to_checkpoint } => {
                let from = match from {
                    BudgetFrom::Flag(value) => format!("--budget {value}"),
                    BudgetFrom::Env(value) => format!("{BUDGET_ENV}={value}"),
                    BudgetFrom::Default => "the default".to_owned(),
                };
                let checkpoint = match to_checkpoint.is_zero() {
                    true => String::new(),
                    false => format!(" + next checkpoint {} ms", millis(*to_checkpoint)),
                };
                let expected = format!(
                    "≤ {} ms (budget {} ms from {from}{checkpoint} + start-up {} ms + slack {} ms)",
                    millis(bound),
                    millis(*budget),
                    millis(startup),
                    millis(SLACK)
                );
                let why = match command.as_str() {
                    "job.wait" => {
                        "job wait holds its caller at most up to the sync call budget (REQ-F-081)"
                    }
                    _ => "a call of an interruptible command returns within its budget (REQ-F-080)",
                };
                (expected, why.to_owned())
            }
        };
        (took > bound).then(|| {
            Finding::new(
                FindingKind::Elapsed,
                format!("held its caller {} ms: {why}", millis(took)),
            )
            .expected(expected)
            .actual(format!("{} ms", millis(took)))
            .at_step(obs.record.name.clone())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn the_flag_beats_the_variable_and_the_default_is_thirty_seconds() {
        let ms = Duration::from_millis;
        let env = Some(OsStr::new("600000"));
        let flag = resolve_budget(&words("count x --budget 850ms"), env, false);
        assert_eq!(flag, Some((ms(850), BudgetFrom::Flag("850ms".into()))));
        let joined = resolve_budget(&words("count x --budget=2s"), None, false);
        assert_eq!(joined, Some((ms(2000), BudgetFrom::Flag("2s".into()))));
        let from_env = resolve_budget(&words("job wait 1f2e"), env, false);
        assert_eq!(from_env, Some((ms(600_000), BudgetFrom::Env("600000".into()))));
        let default = resolve_budget(&words("job wait 1f2e"), None, false);
        assert_eq!(default, Some((DEFAULT_BUDGET, BudgetFrom::Default)));
    }

    #[test]
    fn no_bound_without_a_budget_or_one_conform_cannot_read() {
        assert_eq!(resolve_budget(&words("count x --budget 0"), None, false), None);
        assert_eq!(resolve_budget(&words("count x"), Some(OsStr::new("0")), false), None);
        // At a terminal without --budget the call has no budget (REQ-F-080)...
        assert_eq!(resolve_budget(&words("count x"), Some(OsStr::new("500")), true), None);
        // ...but a --budget given there still binds it.
        assert!(resolve_budget(&words("count x --budget 1s"), None, true).is_some());
        // Seconds with a fraction are read too (`[tool] budget_format = "seconds"`).
        let half = resolve_budget(&words("count x --budget 0.5s"), None, false);
        assert_eq!(half.map(|(b, _)| b), Some(Duration::from_millis(500)));
        assert_eq!(resolve_budget(&words("count x --budget 0.5.1s"), None, false), None);
        assert_eq!(resolve_budget(&words("count x"), Some(OsStr::new("soon")), false), None);
    }
}
