//! Stage: outcome. What a run found, as plain data.
//!
//! Checks never panic and never return `Err` for a tool's misbehaviour: they produce
//! [`Finding`]s, which make up a [`ScenarioResult`]; the results of a run make up a
//! [`crate::summary::RunSummary`]. `Result::Err` is kept for faults of conform itself, which end up as
//! [`Status::Error`] (the harness failed, not the tool).
//!
//! Everything here is colour-free and serializable: reporters (`report/`) decide how it looks.
//!
//! (For lib.rs: this stage comes with `pub mod outcome; pub mod event; pub mod redact;
//! pub mod report; pub mod baseline; pub mod snapshot; pub mod exit;`.)
//!
//! ## Verdicts
//!
//! * A scenario **counts against conformance** when its level is `must`, its status is
//!   [`Status::Fail`], and no baseline entry expected the failure.
//! * A run is **conformant** when no scenario counts against conformance and no `must`
//!   scenario ended in a harness error (a criterion conform could not judge cannot be claimed).
//!   Skipped scenarios never fail a run; the coverage section says what could not be judged
//!   and why.
//! * A requirement's verdict ([`crate::summary::Verdict`]): `skipped` when none of its scenarios ran; `fail`
//!   when a scenario of it counts against conformance; `pass` when every one of its scenarios
//!   ran and passed; `partial` otherwise (a `should`/`may` failure, an expected failure, a
//!   harness error on a non-`must` scenario, or some scenarios skipped). The same rule gives
//!   the per-level verdicts.
//! * The spec's conformance levels (1, 2, 3) and §79 get their own verdicts, `pass`, `fail` or
//!   `incomplete`, over their `must` scenarios ([`crate::levels`]).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::exec;
use crate::scenario::{Declaration, Obligation, Scenario};

/// Why a scenario did not run. Reports show its sentence (its `Display`, also its JSON form);
/// coverage reads the kind ([`crate::summary`] derives the missing roles from it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// The profile defines none of these roles (`profile`: whether there is a profile at all).
    MissingRoles {
        /// The roles, in the scenario's order.
        roles: Vec<String>,
        /// Whether a profile was read.
        profile: bool,
        /// Commands of the manifest that declare what the first missing role needs (could
        /// fill it), sorted; empty when the manifest is unknown or the role needs nothing.
        candidates: Vec<String>,
    },
    /// No command of the manifest makes the declaration the scenario judges: the criterion
    /// does not apply to this tool. Not a gap in the profile, and it keeps no claim from a
    /// verdict ([`SkipReason::is_not_applicable`]).
    NotApplicable {
        /// What no command declares.
        needs: Declaration,
        /// The role that would need it, when a role does.
        role: Option<String>,
    },
    /// The profile's role runs a command that lacks the declaration the role needs: the
    /// scenario would judge the wrong command.
    RoleLacksDeclaration {
        /// The role.
        role: String,
        /// The command its argv invokes.
        command: String,
        /// What the role needs the command to declare.
        needs: Declaration,
        /// Commands that do declare it, sorted.
        candidates: Vec<String>,
    },
    /// The profile's kit lacks what the steps run (`what`: e.g. "`read` probes").
    MissingKit {
        /// The part of the kit, as the sentence names it.
        what: String,
        /// Whether a profile was read.
        profile: bool,
    },
    /// `[kit.argument_order]` names no `positional`, which this placement needs.
    NoPositional {
        /// The placement.
        placement: String,
    },
    /// The scenario selects instances and the profile says not how.
    NoInstanceSelection,
    /// The role's work ends before any budget could interrupt it.
    TooFastToInterrupt {
        /// The role.
        role: String,
        /// Its calibrated duration.
        took_ms: u64,
        /// The floor it is below.
        floor_ms: u64,
        /// Whether it was measured with `--budget 0` (its command declares interruption);
        /// a plain command's run is measured as it is.
        with_budget_zero: bool,
    },
    /// The manifest command gave no manifest, so nothing judges one but the headline.
    NoManifest {
        /// What the manifest command did.
        why: String,
    },
    /// The manifest command hung, died or could not start: every other call would too.
    ToolUnusable {
        /// What the manifest command did.
        why: String,
    },
    /// The profile asks for something the tool cannot take (an argument conform would add,
    /// refused or undeclared): the scenario judges nothing until the profile says otherwise.
    ProfileProblem {
        /// What happened and what to set.
        why: String,
    },
    /// The scenario waits out the lifetime a role's command declares (`max_lifetime_ms`, the
    /// bound on the whole work without `--timeout`), and the profile gives it none short
    /// enough to wait for: no such role, or one whose command declares over `max_ms` with the
    /// role's environment. The spec asks no tool for a way to shorten its lifetime, so a tool
    /// without one is not charged with it: not a reason of the vendor's
    /// ([`SkipReason::vendor_can_fix`]), though the coverage lists the skip.
    NoShortLifetime {
        /// The role.
        role: String,
        /// The lifetime its command declares with the role's environment; `None` when the
        /// profile defines no such role.
        declared_ms: Option<u64>,
        /// The longest lifetime conform waits out.
        max_ms: u64,
    },
    /// conform was interrupted (Ctrl-C, SIGTERM) before the scenario finished: what it saw
    /// is not a verdict.
    Interrupted,
    /// No word of the role's argv names a file the scenario could change.
    NoInputFile {
        /// The role.
        role: String,
    },
    /// A step's response did not show what the criterion presupposes (the job still running
    /// at the second look, progress made before a comparison): on this run, on this machine,
    /// the criterion could not be judged. Not a verdict; a rerun (or a role with more work)
    /// may judge it.
    PremiseNotMet {
        /// The step whose response missed the premise.
        step: String,
        /// What the premise asked and what the step showed (the first unmet check).
        why: String,
    },
    /// The tool made a choice the spec leaves open (a job id derived from the invocation),
    /// and the criterion presupposes the other one: a step's `applies_when` did not hold. The
    /// criterion does not apply to this tool, as with [`SkipReason::NotApplicable`].
    ToolsChoice {
        /// The step whose response showed the choice.
        step: String,
        /// What `applies_when` asked and what the step showed (the first unmet check).
        why: String,
    },
    /// Probe runs outlived their limit, and the spec kit charges such a hang to other
    /// scenarios' checks alone; nothing else of this scenario failed.
    HangJudgedElsewhere {
        /// The runs that hung (step names with their rank).
        runs: Vec<String>,
        /// The scenarios that judge the hangs.
        scenarios: Vec<String>,
    },
}

impl SkipReason {
    /// Whether the criterion does not apply to the tool at all (as opposed to a run that could
    /// not judge it): such a skip leaves a claim's verdict alone.
    pub fn is_not_applicable(&self) -> bool {
        matches!(self, SkipReason::NotApplicable { .. } | SkipReason::ToolsChoice { .. })
    }

    /// Whether the vendor can change it (a profile's missing role, probe or setting, a role
    /// with too little work, a premise its run did not meet even alone): a `must` skipped so
    /// was not judged for a reason of the vendor's, and the run is not green
    /// ([`crate::exit::UNJUDGED`]). A criterion that does not apply, a hang judged by another
    /// scenario, a tool without a manifest (the headline fails) or an interrupted run are
    /// not such reasons.
    pub fn vendor_can_fix(&self) -> bool {
        match self {
            // A role the vendor opts into (work longer than 10 s) is no gap of the profile:
            // the report names it, the gate does not count it.
            SkipReason::MissingRoles { roles, .. } => {
                !roles.iter().all(|r| crate::scenario::OPT_IN_ROLES.contains(&r.as_str()))
            }
            SkipReason::RoleLacksDeclaration { .. }
            | SkipReason::MissingKit { .. }
            | SkipReason::NoPositional { .. }
            | SkipReason::NoInstanceSelection
            | SkipReason::TooFastToInterrupt { .. }
            | SkipReason::ProfileProblem { .. }
            | SkipReason::NoInputFile { .. }
            | SkipReason::PremiseNotMet { .. } => true,
            SkipReason::NotApplicable { .. }
            | SkipReason::ToolsChoice { .. }
            | SkipReason::NoManifest { .. }
            | SkipReason::ToolUnusable { .. }
            | SkipReason::Interrupted
            | SkipReason::NoShortLifetime { .. }
            | SkipReason::HangJudgedElsewhere { .. } => false,
        }
    }

    /// The roles a `MissingRoles` reason names (none for the other kinds).
    pub fn missing_roles(&self) -> &[String] {
        match self {
            SkipReason::MissingRoles { roles, .. } => roles,
            _ => &[],
        }
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::MissingRoles { roles, profile, candidates } => {
                let names = roles.iter().map(|r| format!("`{r}`")).collect::<Vec<_>>().join(", ");
                let word = if roles.len() == 1 { "role" } else { "roles" };
                match profile {
                    true => write!(f, "profile names no {names} {word}")?,
                    false => write!(f, "no profile (conform.toml), so no {names} {word}")?,
                }
                if !candidates.is_empty() {
                    write!(
                        f,
                        "; the manifest's {} could fill `{}` (`conform init` drafts it)",
                        code_list(candidates),
                        roles.first().map_or("", String::as_str)
                    )?;
                }
                if roles.iter().all(|r| crate::scenario::OPT_IN_ROLES.contains(&r.as_str())) {
                    f.write_str(
                        "; an opt-in role, not counted as unjudged: name `[roles.long_work]`, a `detach: true` command whose uninterrupted work takes over 12 s, to judge the 10 s bound between progress reports",
                    )?;
                }
                Ok(())
            }
            SkipReason::NotApplicable { needs, role } => {
                write!(
                    f,
                    "not applicable: no command of the manifest declares {}",
                    needs.describe()
                )?;
                match role {
                    Some(role) => write!(f, ", so no command can be the `{role}` role"),
                    None => f.write_str(", so the rule has nothing to judge"),
                }
            }
            SkipReason::RoleLacksDeclaration { role, command, needs, candidates } => {
                write!(
                    f,
                    "the `{role}` role runs `{command}`, which does not declare {}",
                    needs.describe()
                )?;
                match candidates.is_empty() {
                    true => f.write_str("; no command of the manifest does"),
                    false => write!(f, "; point it at {}", code_list(candidates)),
                }
            }
            SkipReason::MissingKit { what, profile: true } => {
                write!(f, "profile names no kit {what}")
            }
            SkipReason::MissingKit { what, profile: false } => {
                write!(f, "no profile (conform.toml), so no kit {what}")
            }
            SkipReason::NoPositional { placement } => write!(
                f,
                "the profile's `[kit.argument_order]` names no `positional`, which placement `{placement}` needs"
            ),
            SkipReason::NoInstanceSelection => f.write_str(
                "profile says not how to select an instance (`instance_env` / `instance_flag`)",
            ),
            SkipReason::TooFastToInterrupt { role, took_ms, floor_ms, with_budget_zero: true }
                if crate::scenario::OPT_IN_ROLES.contains(&role.as_str()) =>
            {
                write!(
                    f,
                    "role `{role}` is too short for its scenarios: its work took {took_ms} ms with --budget 0, below {floor_ms} ms, so no 10 s between two progress reports can be judged; give it a larger input or a slower pace"
                )
            }
            SkipReason::TooFastToInterrupt { role, took_ms, floor_ms, with_budget_zero: true } => {
                write!(
                    f,
                    "role `{role}` is too fast to interrupt: its work took {took_ms} ms with --budget 0, below {floor_ms} ms; give it more work"
                )
            }
            SkipReason::TooFastToInterrupt { role, took_ms, floor_ms, with_budget_zero: false } => {
                write!(
                    f,
                    "role `{role}` is too short to send a signal or a timeout into: its run took {took_ms} ms (its command declares no interruption, so it ran without --budget), below {floor_ms} ms; give it more work"
                )
            }
            SkipReason::NoManifest { why } => {
                write!(f, "no manifest to judge ({why}; `manifest-valid` reports it)")
            }
            SkipReason::ToolUnusable { why } => write!(
                f,
                "not run: {why}, so the tool's other calls would fail the same way (`manifest-valid` reports it)"
            ),
            SkipReason::ProfileProblem { why } => write!(f, "profile problem: {why}"),
            SkipReason::NoShortLifetime { role, declared_ms: None, max_ms } => write!(
                f,
                "no lifetime to wait out: the profile names no `{role}` role; to judge it, define one whose environment sets a setting of the tool's own that makes its command declare `interruption.max_lifetime_ms` of a few seconds (at most {max_ms} ms), shorter than its work (not required of a tool: this skip does not hold the gate)"
            ),
            SkipReason::NoShortLifetime { role, declared_ms: Some(declared), max_ms } => write!(
                f,
                "role `{role}`'s command declares a lifetime (`max_lifetime_ms`) of {declared} ms with the role's environment, too long to wait out (at most {max_ms} ms); give the role an environment whose setting of the tool's own makes it declare a few seconds (not required of a tool: this skip does not hold the gate)"
            ),
            SkipReason::Interrupted => f.write_str("not finished: conform was interrupted"),
            SkipReason::NoInputFile { role } => write!(
                f,
                "no word of role `{role}`'s argv names a file in the sandbox, so the scenario cannot change its input"
            ),
            SkipReason::PremiseNotMet { step, why } => write!(
                f,
                "premise not met at step `{step}` ({why}), so the criterion could not be judged on this run; a role with more work gives it room"
            ),
            SkipReason::ToolsChoice { step, why } => write!(
                f,
                "not applicable to the tool's choice at step `{step}` ({why}): the spec lets it choose so, and the criterion presupposes the other choice"
            ),
            SkipReason::HangJudgedElsewhere { runs, scenarios } => {
                let list = |v: &[String]| {
                    v.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
                };
                write!(
                    f,
                    "{} outlived the limit; as in the spec kit, that hang is judged by {} alone",
                    list(runs),
                    list(scenarios)
                )
            }
        }
    }
}

/// `a`, `b` and `c` as code words in a sentence (at most five, then how many more).
fn code_list(items: &[String]) -> String {
    let mut words: Vec<String> = items.iter().take(5).map(|i| format!("`{i}`")).collect();
    if items.len() > 5 {
        words.push(format!("{} more", items.len() - 5));
    }
    match words.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

impl Serialize for SkipReason {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// An advisory remark on a scenario that never fails it. Reports show its sentence (its
/// `Display`, also its JSON form); the human summary counts snapshot writes instead of listing
/// them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// The calibration of the scenario's primary role.
    Calibrated {
        /// The role.
        role: String,
        /// D, its `--budget 0` duration.
        took_ms: u64,
        /// Its exit code.
        exit_code: i32,
        /// `{budget}` derived from D.
        budget_ms: u64,
    },
    /// `--update` recorded a snapshot that did not exist.
    SnapshotWritten {
        /// The snapshot file.
        path: String,
    },
    /// `--update` rewrote a snapshot that drifted.
    SnapshotUpdated {
        /// The snapshot file.
        path: String,
    },
    /// A choice the spec leaves open that the tool made one way (the sentence says which);
    /// conform accepts either.
    Advisory(String),
    /// A cancel the clean-up ran after the steps failed, and either it could not run at all or
    /// the scenario's processes outlived it: the likely cause of a `leaked-process` finding.
    CancelFailed(FailedCancel),
    /// Entries outside the sandbox that changed while the scenario ran (each `path (new
    /// file)`, `path (changed directory)`, ...): writes of the tool outside HOME, TMPDIR and
    /// its working directory, or of another process meanwhile (see `conform manual hostile`).
    OutsideWrites(Vec<String>),
    /// A scenario of several `attempts`: the one that gave the result (the first that did not
    /// pass, or the last).
    Attempts {
        /// Which attempt, from 1.
        attempt: u32,
        /// How many the scenario asks for.
        attempts: u32,
        /// Whether it passed (then every attempt did).
        passed: bool,
    },
}

/// How many outside entries a note names; the rest are counted.
pub const OUTSIDE_NAMED: usize = 5;

/// A cancel of the clean-up that did not do its work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedCancel {
    /// The command line (a response's `cancel_command`, or conform's `job cancel <id>`).
    pub command: String,
    /// How it ended, or why it could not start.
    pub ended: String,
    /// The last line of its stderr (empty when it wrote none).
    pub stderr_tail: String,
}

impl fmt::Display for FailedCancel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` ({})", self.command, self.ended)?;
        match self.stderr_tail.is_empty() {
            true => Ok(()),
            false => write!(f, ": {}", self.stderr_tail),
        }
    }
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Note::Calibrated { role, took_ms, exit_code, budget_ms } => write!(
                f,
                "calibrated role `{role}`: --budget 0 took {took_ms} ms (exit {exit_code}), {{budget}} = {budget_ms} ms"
            ),
            Note::SnapshotWritten { path } => write!(f, "new snapshot written: {path}"),
            Note::SnapshotUpdated { path } => write!(f, "snapshot updated: {path}"),
            Note::Advisory(text) => f.write_str(text),
            Note::CancelFailed(cancel) => write!(f, "clean-up: a cancel failed: {cancel}"),
            Note::Attempts { attempts, passed: true, .. } => {
                write!(f, "passed all {attempts} attempts")
            }
            Note::Attempts { attempt: 1, attempts, passed: false } => {
                write!(f, "failed on its first attempt of {attempts}")
            }
            Note::Attempts { attempt, attempts, passed: false } => write!(
                f,
                "failed on attempt {attempt} of {attempts}, after {} that passed: the failure shows in some runs only",
                attempt - 1
            ),
            Note::OutsideWrites(changes) => {
                let named: Vec<&str> =
                    changes.iter().take(OUTSIDE_NAMED).map(String::as_str).collect();
                write!(f, "outside the sandbox, while the scenario ran: {}", named.join(", "))?;
                if changes.len() > OUTSIDE_NAMED {
                    write!(f, " and {} more", changes.len() - OUTSIDE_NAMED)?;
                }
                f.write_str(
                    "; a tool should write only in its HOME, TMPDIR, XDG_* directories and working directory (`conform manual hostile`)",
                )
            }
        }
    }
}

impl Serialize for Note {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// The result of one scenario.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Status {
    /// Every check held.
    Pass,
    /// At least one check failed; the findings say which.
    Fail,
    /// Not run, for this reason (e.g. "profile names no `detach` role").
    Skip {
        /// Why the scenario could not run.
        reason: SkipReason,
    },
    /// conform itself failed (could not spawn, could not create the sandbox, ...): no verdict
    /// about the tool.
    Error {
        /// What went wrong in the harness.
        message: String,
    },
}

impl Status {
    /// The lowercase word for the status (`pass`, `fail`, `skip`, `error`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail => "fail",
            Status::Skip { .. } => "skip",
            Status::Error { .. } => "error",
        }
    }

    /// Whether the scenario ran to a verdict or was attempted (everything but a skip).
    pub fn ran(&self) -> bool {
        !matches!(self, Status::Skip { .. })
    }
}

/// What kind of check a finding comes from. Its kebab-case word (`exit-code`, `schema`, ...)
/// is the finding's `check` in every report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    /// An ANSI escape sequence where plain text is due.
    Ansi,
    /// A response of an interruptible command without `meta.budget_ms`.
    BudgetMeta,
    /// A response unlike the one the work gives with `--budget 0`.
    CalibratedEquality,
    /// `data.continue_command` is not the original invocation.
    ContinueCommand,
    /// The work did not end within the hop limit of a continue loop.
    ContinueLoop,
    /// `/data` equal where it must differ.
    DataDiffers,
    /// A step took longer (or shorter) than its bound.
    Elapsed,
    /// An exit code other than the one due.
    ExitCode,
    /// An INCOMPLETE response whose `error.retryable` is not its declared `"14"` entry's.
    IncompleteRetryable,
    /// A value of the response is absent, present or wrong.
    JsonPointer,
    /// No detached worker to kill was found.
    KillWorker,
    /// A process of the scenario outlived it and its cancels.
    LeakedProcess,
    /// The process outlived its bound after the last signal conform sent it (a second SIGINT
    /// that did not end it at once, REQ-F-069).
    ExitAfterSignal,
    /// A static registration rule the manifest breaks.
    ManifestRule,
    /// A response lacks the command line a step runs next.
    MissingCommand,
    /// stdout/stderr stayed open after the process exited.
    PipesReleased,
    /// `data.progress.done` went back or is not a whole number.
    ProgressMonotonic,
    /// A process of the scenario was still alive at the end of the bound a step gave it.
    ProcessesAlive,
    /// Continuations stayed flat as often as the agent's loop cancels after, while the work
    /// went on to its end.
    ProgressStalls,
    /// `data.progress.done` showed no growth for longer than its bound while the job ran
    /// (REQ-C-034's 10 s between reports), or a `job wait` answered progress older than that
    /// (REQ-F-081's fresh progress).
    ProgressCadence,
    /// Prose on stdout.
    Prose,
    /// `/data` differs where it must be equal.
    SameData,
    /// A response differs from an earlier step's.
    SameResponse,
    /// stdout differs from an earlier step's.
    SameStdout,
    /// A pointer has more than one value across a step's responses.
    SameValue,
    /// The scenario's sandbox could not be removed (a mount conform may not undo, say).
    SandboxLeft,
    /// A response does not validate against its schema.
    Schema,
    /// A scenario's shell line failed.
    Shell,
    /// The state the work left (the role's `verify` output) differs from the uninterrupted
    /// run's.
    Effect,
    /// A normalized response drifted from its snapshot.
    SnapshotDrift,
    /// No snapshot was recorded yet.
    SnapshotMissing,
    /// stdout equal where it must differ.
    StdoutDiffers,
    /// stdout does not hold one JSON document.
    StdoutNotJson,
    /// stdout is not UTF-8.
    StdoutNotUtf8,
    /// A JSONL stream breaks its contract.
    Stream,
    /// A stream still ran at its deadline.
    StreamDeadline,
    /// A stream ended before its signal could be sent.
    StreamSignal,
    /// A step outlived its limit and was killed.
    Timeout,
    /// Ids that look counted or timed, not random.
    Unlike,
    /// An expected warning code is missing.
    Warning,
}

impl FindingKind {
    /// The kebab-case word reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::Ansi => "ansi",
            FindingKind::BudgetMeta => "budget-meta",
            FindingKind::CalibratedEquality => "calibrated-equality",
            FindingKind::ContinueCommand => "continue-command",
            FindingKind::ContinueLoop => "continue-loop",
            FindingKind::DataDiffers => "data-differs",
            FindingKind::Elapsed => "elapsed",
            FindingKind::ExitCode => "exit-code",
            FindingKind::ExitAfterSignal => "exit-after-signal",
            FindingKind::IncompleteRetryable => "incomplete-retryable",
            FindingKind::JsonPointer => "json-pointer",
            FindingKind::KillWorker => "kill-worker",
            FindingKind::LeakedProcess => "leaked-process",
            FindingKind::ManifestRule => "manifest-rule",
            FindingKind::MissingCommand => "missing-command",
            FindingKind::PipesReleased => "pipes-released",
            FindingKind::ProgressMonotonic => "progress-monotonic",
            FindingKind::ProcessesAlive => "processes-alive",
            FindingKind::ProgressStalls => "progress-stalls",
            FindingKind::ProgressCadence => "progress-cadence",
            FindingKind::Prose => "prose",
            FindingKind::SameData => "same-data",
            FindingKind::SameResponse => "same-response",
            FindingKind::SameStdout => "same-stdout",
            FindingKind::SameValue => "same-value",
            FindingKind::SandboxLeft => "sandbox-left",
            FindingKind::Schema => "schema",
            FindingKind::Shell => "shell",
            FindingKind::Effect => "effect",
            FindingKind::SnapshotDrift => "snapshot-drift",
            FindingKind::SnapshotMissing => "snapshot-missing",
            FindingKind::StdoutDiffers => "stdout-differs",
            FindingKind::StdoutNotJson => "stdout-not-json",
            FindingKind::StdoutNotUtf8 => "stdout-not-utf8",
            FindingKind::Stream => "stream",
            FindingKind::StreamDeadline => "stream-deadline",
            FindingKind::StreamSignal => "stream-signal",
            FindingKind::Timeout => "timeout",
            FindingKind::Unlike => "unlike",
            FindingKind::Warning => "warning",
        }
    }

    /// Whether such a finding may come from when things happened rather than from what the
    /// tool does: a bound on time, a process looked for at a moment, a deadline. A failure
    /// with one is run again alone before it stands.
    pub fn depends_on_timing(self) -> bool {
        matches!(
            self,
            FindingKind::Elapsed
                | FindingKind::ExitAfterSignal
                | FindingKind::Timeout
                | FindingKind::ContinueLoop
                | FindingKind::KillWorker
                | FindingKind::LeakedProcess
                | FindingKind::PipesReleased
                | FindingKind::ProcessesAlive
                | FindingKind::ProgressStalls
                | FindingKind::ProgressCadence
                | FindingKind::StreamDeadline
                | FindingKind::StreamSignal
        )
    }
}

impl fmt::Display for FindingKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for FindingKind {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// One failed check, with its evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// The kind of check.
    pub check: FindingKind,
    /// What was wrong, in one sentence.
    pub message: String,
    /// What the contract asks for, if it can be shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// What the tool did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual: Option<String>,
    /// The name of the step where it was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
}

impl Finding {
    /// A finding of kind `check` with this message and no evidence yet.
    pub fn new(check: FindingKind, message: impl Into<String>) -> Self {
        Finding { check, message: message.into(), expected: None, actual: None, step: None }
    }

    /// Adds what was expected.
    #[must_use]
    pub fn expected(mut self, expected: impl Into<String>) -> Self {
        self.expected = Some(expected.into());
        self
    }

    /// Adds what was seen.
    #[must_use]
    pub fn actual(mut self, actual: impl Into<String>) -> Self {
        self.actual = Some(actual.into());
        self
    }

    /// Names the step where it was seen.
    #[must_use]
    pub fn at_step(mut self, step: impl Into<String>) -> Self {
        self.step = Some(step.into());
        self
    }

    /// A unified diff from `expected` to `actual`, when both are present and at least one
    /// spans several lines (single-line values read better side by side).
    pub fn diff(&self) -> Option<String> {
        let (expected, actual) = (self.expected.as_deref()?, self.actual.as_deref()?);
        if !expected.contains('\n') && !actual.contains('\n') {
            return None;
        }
        Some(unified_diff(expected, actual))
    }
}

/// A unified diff (`-` expected, `+` actual) with three lines of context, colour-free.
pub fn unified_diff(expected: &str, actual: &str) -> String {
    let mut expected = expected.to_owned();
    let mut actual = actual.to_owned();
    // A missing final newline would otherwise show up as a spurious change on the last line.
    for text in [&mut expected, &mut actual] {
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    similar::TextDiff::from_lines(&expected, &actual)
        .unified_diff()
        .context_radius(3)
        .header("expected", "actual")
        .to_string()
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.check, self.message)?;
        if let Some(step) = &self.step {
            write!(f, " (step `{step}`)")?;
        }
        if let Some(diff) = self.diff() {
            write!(f, "\n{}", diff.trim_end_matches('\n'))?;
            return Ok(());
        }
        for (label, value) in [("expected: ", &self.expected), ("actual:   ", &self.actual)] {
            match value {
                Some(v) if v.contains('\n') => {
                    write!(f, "\n  {}", label.trim_end())?;
                    for line in v.trim_end_matches('\n').lines() {
                        write!(f, "\n    {line}")?;
                    }
                }
                Some(v) => write!(f, "\n  {label}{v}")?,
                None => {}
            }
        }
        Ok(())
    }
}

/// What a step runs, for the repro line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum ReproCommand {
    /// An argument vector (`argv[0]` first).
    Argv(Vec<String>),
    /// A line run with `sh -c`.
    Shell(String),
}

/// How a step's stdin was wired, for the repro line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum ReproStdin {
    /// `/dev/null`.
    Closed,
    /// A pipe fed these bytes (lossily decoded), then closed.
    Bytes(String),
    /// A pipe held open and never written.
    OpenPipe,
    /// A pseudo-terminal.
    Pty,
}

/// Environment variables always shown in a repro line when the step set them, even when their
/// value equals the sandbox's default: they change what the contract asks of the tool.
pub const IMPORTANT_ENV: &[&str] = &["AGENT_CALL_BUDGET_MS", "CI", "NO_COLOR", "TERM"];

/// The exact way to run a step again by hand.
///
/// Its `Display` is a copy-pasteable shell command, e.g.
/// `cd /tmp/x && AGENT_CALL_BUDGET_MS=500 ./mytool analyze big.csv < /dev/null`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Repro {
    /// Variables that differ from conform's sandbox defaults, plus the [`IMPORTANT_ENV`] ones.
    pub env: BTreeMap<String, String>,
    /// What was run.
    pub command: ReproCommand,
    /// How stdin was wired.
    pub stdin: ReproStdin,
    /// The working directory, if it matters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

impl Repro {
    /// The repro of an invocation. `defaults` is the sandbox's base environment: a variable
    /// with the same value there is left out unless it is in [`IMPORTANT_ENV`].
    pub fn from_invocation(
        invocation: &exec::Invocation,
        defaults: &BTreeMap<OsString, OsString>,
    ) -> Self {
        let env = invocation
            .env
            .iter()
            .filter(|(name, value)| {
                defaults.get(*name) != Some(*value)
                    || name.to_str().is_some_and(|n| IMPORTANT_ENV.contains(&n))
            })
            .map(|(name, value)| {
                (name.to_string_lossy().into_owned(), value.to_string_lossy().into_owned())
            })
            .collect();
        let command = match &invocation.program {
            exec::Program::Argv(argv) => {
                ReproCommand::Argv(argv.iter().map(|a| a.to_string_lossy().into_owned()).collect())
            }
            exec::Program::Shell(line) => ReproCommand::Shell(line.clone()),
        };
        let stdin = match &invocation.stdin {
            exec::StdinMode::Closed => ReproStdin::Closed,
            exec::StdinMode::Bytes(bytes) => {
                ReproStdin::Bytes(String::from_utf8_lossy(bytes).into_owned())
            }
            exec::StdinMode::OpenPipe => ReproStdin::OpenPipe,
            exec::StdinMode::Pty => ReproStdin::Pty,
        };
        Repro { env, command, stdin, cwd: Some(invocation.cwd.to_string_lossy().into_owned()) }
    }
}

/// Quotes a word for a POSIX shell: unchanged when it is made of safe characters only,
/// otherwise in single quotes with embedded single quotes written as `'\''`.
pub fn shell_quote(word: &str) -> String {
    let safe = !word.is_empty()
        && word.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%^".contains(&b));
    if safe { word.to_owned() } else { format!("'{}'", word.replace('\'', r"'\''")) }
}

impl fmt::Display for Repro {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(cwd) = &self.cwd {
            write!(f, "cd {} && ", shell_quote(cwd))?;
        }
        match &self.stdin {
            ReproStdin::Bytes(text) => write!(f, "printf '%s' {} | ", shell_quote(text))?,
            ReproStdin::OpenPipe => f.write_str("tail -f /dev/null | ")?,
            ReproStdin::Closed | ReproStdin::Pty => {}
        }
        for (name, value) in &self.env {
            write!(f, "{name}={} ", shell_quote(value))?;
        }
        match &self.command {
            ReproCommand::Argv(argv) => {
                let words: Vec<String> = argv.iter().map(|a| shell_quote(a)).collect();
                f.write_str(&words.join(" "))?;
            }
            ReproCommand::Shell(line) => write!(f, "sh -c {}", shell_quote(line))?,
        }
        match &self.stdin {
            ReproStdin::Closed => f.write_str(" < /dev/null"),
            ReproStdin::Pty => f.write_str("  # stdin: a terminal (run it in one)"),
            ReproStdin::Bytes(_) | ReproStdin::OpenPipe => Ok(()),
        }
    }
}

/// How a step's process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Ended {
    /// It exited with this code.
    Exited {
        /// The exit code.
        code: i32,
    },
    /// A signal it did not get from conform ended it.
    Signaled {
        /// The signal number.
        signal: i32,
    },
    /// It outlived the step's timeout and conform killed its process group.
    TimedOut,
}

impl From<exec::Termination> for Ended {
    fn from(t: exec::Termination) -> Self {
        match t {
            exec::Termination::Exited(code) => Ended::Exited { code },
            exec::Termination::Signaled(signal) => Ended::Signaled { signal },
            exec::Termination::TimedOut => Ended::TimedOut,
        }
    }
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ended::Exited { code } => write!(f, "exit {code}"),
            Ended::Signaled { signal } => write!(f, "signal {signal}"),
            Ended::TimedOut => f.write_str("timed out"),
        }
    }
}

/// How many bytes of stdout a [`StepRecord`] keeps (from the start).
pub const STDOUT_EXCERPT_BYTES: usize = 4096;
/// How many bytes of stderr a [`StepRecord`] keeps (from the end).
pub const STDERR_TAIL_BYTES: usize = 2048;

/// Part of a captured stream, lossily decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Excerpt {
    /// The kept text (a report leaves it out where the record's `envelope` holds it, or
    /// where it keeps no output of the tool: read back, it is empty).
    #[serde(default)]
    pub text: String,
    /// How many bytes the process wrote in all.
    pub total_bytes: u64,
    /// Whether `text` is less than what was written.
    pub truncated: bool,
}

impl Excerpt {
    /// The first `limit` bytes of a capture.
    pub fn head(captured: &exec::Captured, limit: usize) -> Self {
        let kept = &captured.bytes[..captured.bytes.len().min(limit)];
        Excerpt {
            text: String::from_utf8_lossy(kept).into_owned(),
            total_bytes: captured.total_len,
            truncated: captured.total_len > kept.len() as u64,
        }
    }

    /// The last `limit` bytes of a capture (of what was captured).
    pub fn tail(captured: &exec::Captured, limit: usize) -> Self {
        let start = captured.bytes.len().saturating_sub(limit);
        let kept = &captured.bytes[start..];
        Excerpt {
            text: String::from_utf8_lossy(kept).into_owned(),
            total_bytes: captured.total_len,
            truncated: captured.total_len > kept.len() as u64,
        }
    }
}

/// The evidence of one process run by a scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// The step's name, unique within its scenario (e.g. `run`, `continue-2`).
    pub name: String,
    /// How to run it again.
    pub repro: Repro,
    /// How it ended.
    pub ended: Ended,
    /// From spawn to exit.
    pub elapsed_ms: u64,
    /// From spawn to end-of-file on stdout and stderr; `None` when they stayed open.
    pub pipes_closed_after_ms: Option<u64>,
    /// The start of stdout.
    pub stdout: Excerpt,
    /// The end of stderr.
    pub stderr: Excerpt,
    /// The JSON object stdout held, when it held one of at most [`RECORD_ENVELOPE_BYTES`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envelope: Option<Value>,
    /// When the process was spawned, from the start of its scenario (the clock of the
    /// scenario's `duration_ms`): with `elapsed_ms`, where the call sits on the scenario's
    /// timeline. `None` for a run outside a scenario (the discovery run a headline shows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
    /// The budget the call had to keep, as the tool must have resolved it (`--budget`, else
    /// `AGENT_CALL_BUDGET_MS`, else 30 s; REQ-F-080), for a call of an interruptible command or
    /// `job wait`; `None` for any other call, and for one without a budget (`--budget 0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_ms: Option<u64>,
    /// How long the call could hold its caller before conform failed it: the budget, the
    /// next checkpoint of a resume-only command, the tool's start-up and the slack; "at once"
    /// for `job status` (see `conform manual scenarios`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub may_hold_ms: Option<u64>,
    /// A signal conform sent into the run while it went on (a step's `kill_group`, a stream's
    /// signal after its lines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<SentSignal>,
}

/// A signal conform sent to a step's process, or its process group, while it ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentSignal {
    /// The signal, e.g. `SIGTERM`.
    pub signal: String,
    /// When it was sent, from the spawn of the process.
    pub after_ms: u64,
    /// Whom it went to.
    pub to: SignalTarget,
    /// When the same signal went again, from the spawn (a step's `kill_group.again_after`,
    /// sent only while the group was still there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub again_ms: Option<u64>,
}

impl SentSignal {
    /// When the last signal went, from the spawn.
    pub fn last_ms(&self) -> u64 {
        self.again_ms.unwrap_or(self.after_ms)
    }
}

/// Whom conform sent a signal to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SignalTarget {
    /// The process conform started, alone (a stream's SIGINT, as an agent interrupts it).
    Process,
    /// Its whole process group (a caller killed with everything it started in the group).
    Group,
}

/// What a step that runs no process of the tool did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ActionKind {
    /// `sleep`: conform waited.
    Sleep,
    /// `kill-worker`: conform signalled every process carrying the sandbox marker.
    KillWorker,
    /// `shell`: a command line of the scenario, e.g. changing the input between two calls.
    Shell,
    /// `verify`: the role's effect oracle.
    Verify,
    /// `no-processes`: conform waited until no process of the sandbox was alive.
    NoProcesses,
    /// `elapsed-since`: conform measured the time since an earlier step began.
    ElapsedSince,
}

impl ActionKind {
    /// The step action's word, as scenario files write it.
    pub fn as_str(self) -> &'static str {
        match self {
            ActionKind::Sleep => "sleep",
            ActionKind::KillWorker => "kill-worker",
            ActionKind::Shell => "shell",
            ActionKind::Verify => "verify",
            ActionKind::NoProcesses => "no-processes",
            ActionKind::ElapsedSince => "elapsed-since",
        }
    }
}

/// The record of a step that ran no process of the tool (a pause, a kill of the job's workers,
/// a shell line, the effect oracle, a wait, a bound measured): where it sits on the scenario's
/// timeline, beside the [`StepRecord`]s of the calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionRecord {
    /// The step's name.
    pub step: String,
    /// What it did.
    pub action: ActionKind,
    /// When it began, from the start of its scenario.
    pub started_ms: u64,
    /// How long it took.
    pub elapsed_ms: u64,
    /// What it did, in a few words (`SIGKILL to 2 processes: 4242, 4243`, `slept 600 ms`).
    pub detail: String,
}

/// The largest stdout whose parsed document a [`StepRecord`] keeps. The checks judge a larger
/// one in full; the record, which lives for the whole run and is copied to every reporter,
/// keeps only its [`STDOUT_EXCERPT_BYTES`] excerpt (a manifest of 45,000 commands is 3 MB of
/// text and some 30 MB parsed: ten records of it held a run at over a gigabyte).
pub const RECORD_ENVELOPE_BYTES: usize = 256 * 1024;

impl StepRecord {
    /// The record of a finished process. `envelope` is stdout parsed as JSON, if it was; the
    /// record keeps a copy when stdout is at most [`RECORD_ENVELOPE_BYTES`].
    pub fn from_exec(
        name: impl Into<String>,
        repro: Repro,
        outcome: &exec::Outcome,
        envelope: Option<&Value>,
    ) -> Self {
        let envelope =
            envelope.filter(|_| outcome.stdout.bytes.len() <= RECORD_ENVELOPE_BYTES).cloned();
        StepRecord {
            name: name.into(),
            repro,
            ended: outcome.termination.into(),
            elapsed_ms: millis(outcome.elapsed),
            pipes_closed_after_ms: outcome.pipes_closed_after.map(millis),
            stdout: Excerpt::head(&outcome.stdout, STDOUT_EXCERPT_BYTES),
            stderr: Excerpt::tail(&outcome.stderr, STDERR_TAIL_BYTES),
            envelope,
            started_ms: None,
            budget_ms: None,
            may_hold_ms: None,
            signal: None,
        }
    }
}

/// Whole milliseconds of a duration, saturating.
pub fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// How many findings of one kind at one step a scenario keeps; the rest are counted.
pub const SAME_KIND_KEPT: usize = 20;

/// Bounds a scenario's findings: of each kind at each step (a leak per process of a fork
/// bomb, one per line of a flood), the first [`SAME_KIND_KEPT`] are kept and the rest become
/// one finding that counts them, so a report stays bounded whatever the tool does. Order is
/// kept; the count stands where the first left-out finding stood.
pub fn fold_repeats(findings: Vec<Finding>) -> Vec<Finding> {
    let mut seen: BTreeMap<(FindingKind, Option<String>), usize> = BTreeMap::new();
    for f in &findings {
        *seen.entry((f.check, f.step.clone())).or_default() += 1;
    }
    if seen.values().all(|n| *n <= SAME_KIND_KEPT) {
        return findings;
    }
    let mut kept: BTreeMap<(FindingKind, Option<String>), usize> = BTreeMap::new();
    let mut out = Vec::new();
    for f in findings {
        let key = (f.check, f.step.clone());
        let rank = kept.entry(key.clone()).or_default();
        *rank += 1;
        if *rank <= SAME_KIND_KEPT {
            out.push(f);
        } else if *rank == SAME_KIND_KEPT + 1 {
            let rest = seen.get(&key).copied().unwrap_or(0) - SAME_KIND_KEPT;
            let mut folded = Finding::new(
                f.check,
                format!("and {rest} more `{}` finding(s) like the {SAME_KIND_KEPT} above", f.check),
            );
            folded.step = f.step;
            out.push(folded);
        }
    }
    out
}

/// A JSON value on one line, cut at a readable length (for a finding's evidence).
pub fn compact(value: &Value) -> String {
    let text = value.to_string();
    if text.len() > 400 {
        let mut end = 400;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &text[..end])
    } else {
        text
    }
}

/// What a baseline file said about a scenario (set by `baseline::Baseline::apply`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BaselineMark {
    /// The baseline expects this failure: it does not count against conformance.
    ExpectedFailure {
        /// The reason the baseline gives.
        reason: String,
    },
    /// The baseline expects a failure but the scenario passed: the entry is stale and the run
    /// fails until it is removed.
    Stale {
        /// The reason the baseline gives.
        reason: String,
    },
    /// The scenario failed and a baseline is in use that does not list it.
    Unexpected,
}

/// The result of one scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioResult {
    /// The scenario id, e.g. `budget-flag-beats-env`.
    pub id: String,
    /// The requirement it checks, e.g. `REQ-F-080`.
    pub requirement: String,
    /// The acceptance criterion, in conform's words.
    pub criterion: String,
    /// How strongly the contract asks for it.
    pub level: Obligation,
    /// Free tags for `--only` / `--skip`.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Pass, fail, skip or error.
    #[serde(flatten)]
    pub status: Status,
    /// The checks that failed (empty on pass).
    #[serde(default)]
    pub findings: Vec<Finding>,
    /// Advisory remarks that never fail a scenario (e.g. a `[ref]` choice of the contract
    /// that the tool made differently).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<Note>,
    /// Every process the scenario ran, in order (`evidence` in the JSON report).
    #[serde(default, rename = "evidence")]
    pub steps: Vec<StepRecord>,
    /// The steps that ran no process of the tool (pauses, kills of workers, shell lines, the
    /// effect oracle), in order: with `steps`, the scenario's timeline.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<ActionRecord>,
    /// Wall-clock time of the whole scenario.
    pub duration_ms: u64,
    /// What the baseline said, when one is in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineMark>,
    /// The first run of a scenario that conform ran again alone before giving its verdict
    /// (a failure that may be the machine's load, or a premise the load denied); this
    /// result is the run alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_run: Option<Box<FirstRun>>,
}

/// How a scenario's first run, beside the others, ended, when conform ran it again alone
/// before its verdict (see `conform manual running`, "Confirmed verdicts").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FirstRun {
    /// Its status: a failure, or a skip for a premise the run did not meet.
    #[serde(flatten)]
    pub status: Status,
    /// Its findings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// How long it took.
    pub duration_ms: u64,
}

impl ScenarioResult {
    /// A result of this scenario with this status and nothing else yet.
    pub fn of(s: &Scenario, status: Status) -> ScenarioResult {
        ScenarioResult {
            id: s.id.clone(),
            requirement: s.requirement.clone(),
            criterion: s.criterion.clone(),
            level: s.level,
            tags: s.tags.clone(),
            status,
            findings: Vec::new(),
            notes: Vec::new(),
            steps: Vec::new(),
            actions: Vec::new(),
            duration_ms: 0,
            baseline: None,
            first_run: None,
        }
    }

    /// Whether this result's verdict needs a run alone before it stands: a failure of a
    /// scenario whose outcome depends on timing (it calibrates a role's work, or a finding is
    /// about time), or a premise the load may have denied. `timed` says whether the scenario
    /// runs a calibrated role.
    pub fn wants_confirmation(&self, timed: bool) -> bool {
        match &self.status {
            Status::Fail => timed || self.findings.iter().any(|f| f.check.depends_on_timing()),
            Status::Skip { reason: SkipReason::PremiseNotMet { .. } } => true,
            _ => false,
        }
    }

    /// This result (the run alone) with the first run's kept beside it.
    pub fn confirming(mut self, first: ScenarioResult) -> ScenarioResult {
        self.first_run = Some(Box::new(FirstRun {
            status: first.status,
            findings: first.findings,
            duration_ms: first.duration_ms,
        }));
        self
    }

    /// Whether the scenario failed beside the others and passed alone: a failure that did not
    /// repeat, reported but not counted (as test runners report a flaky test).
    pub fn is_flaky(&self) -> bool {
        self.status == Status::Pass
            && self.first_run.as_ref().is_some_and(|f| f.status == Status::Fail)
    }

    /// Whether this is a `must` the run did not judge for a reason the vendor can fix
    /// ([`SkipReason::vendor_can_fix`]).
    pub fn is_unjudged_must(&self) -> bool {
        self.level == Obligation::Must
            && matches!(&self.status, Status::Skip { reason } if reason.vendor_can_fix())
    }

    /// Whether the scenario failed beside the others and again alone.
    pub fn is_confirmed_failure(&self) -> bool {
        self.status == Status::Fail
            && self.first_run.as_ref().is_some_and(|f| f.status == Status::Fail)
    }

    /// Whether this result makes the run not conformant (see the module docs).
    pub fn counts_against_conformance(&self) -> bool {
        self.level == Obligation::Must && self.status == Status::Fail && !self.is_expected_failure()
    }

    /// Whether this result fails a strict run (`--strict`): a `should` that failed and that
    /// no baseline expected.
    pub fn fails_the_strict_gate(&self) -> bool {
        self.level == Obligation::Should
            && self.status == Status::Fail
            && !self.is_expected_failure()
    }

    /// Whether a baseline expected this failure.
    pub fn is_expected_failure(&self) -> bool {
        matches!(self.baseline, Some(BaselineMark::ExpectedFailure { .. }))
    }

    /// Whether the baseline makes this result fail the run (stale or unexpected failure).
    pub fn is_baseline_surprise(&self) -> bool {
        matches!(self.baseline, Some(BaselineMark::Stale { .. } | BaselineMark::Unexpected))
    }

    /// The status as shown in reports: `xfail` for a failure the baseline expected,
    /// otherwise the status word.
    pub fn display_status(&self) -> &'static str {
        if self.is_expected_failure() { "xfail" } else { self.status.as_str() }
    }
}

/// Counts of results by status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Scenarios in all.
    pub total: usize,
    /// Passed.
    pub pass: usize,
    /// Failed (not counting expected failures).
    pub fail: usize,
    /// Failed as a baseline expected.
    pub expected_fail: usize,
    /// Skipped.
    pub skip: usize,
    /// Harness errors.
    pub error: usize,
}

impl Counts {
    /// Adds one result.
    pub fn add(&mut self, result: &ScenarioResult) {
        self.total += 1;
        match result.status {
            Status::Pass => self.pass += 1,
            Status::Fail if result.is_expected_failure() => self.expected_fail += 1,
            Status::Fail => self.fail += 1,
            Status::Skip { .. } => self.skip += 1,
            Status::Error { .. } if result.is_expected_failure() => self.expected_fail += 1,
            Status::Error { .. } => self.error += 1,
        }
    }
}
