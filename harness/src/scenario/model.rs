//! The scenario model: a scenario, its steps and their `expect` tables, as serde reads them
//! from a scenario file (`deny_unknown_fields` throughout).

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::SchemaName;
use super::template::{
    IDLE_TIMEOUT, INTERRUPTION_VARS, MAX_LIFETIME, UNCALIBRATED_VARS, Var, template_vars,
};

/// The role names a scenario may need and a profile may define (the manual says what each
/// promises).
pub const ROLE_NAMES: [&str; 12] = [
    "detach",
    "detach_stdin",
    "resume_reader",
    "resume_writer",
    "detach_only",
    "plain_slow",
    "async",
    "stalling",
    "idempotent_writer",
    "failing",
    "short_lifetime",
    "long_work",
];

/// Roles a vendor opts into: a profile without one leaves its scenarios skipped and named in
/// the report, but not unjudged ([`crate::outcome::SkipReason::vendor_can_fix`]). `long_work`
/// is work longer than REQ-C-034's 10 s between two progress reports: many tools have none,
/// a tool whose every work ends within 10 s keeps that bound by construction, and conform
/// cannot tell from a manifest whether some input would run longer.
pub const OPT_IN_ROLES: [&str; 1] = ["long_work"];

/// What a scenario needs some command of the manifest to declare before it can judge anything:
/// without such a command the criterion is **not applicable** to the tool (a rule over zero
/// declarations holds vacuously, and no profile role could ever fill it), which is a different
/// answer from a profile that forgot a role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Declaration {
    /// `interruption`, in any form.
    Interruption,
    /// `interruption` with `detach: true`.
    Detach,
    /// `interruption` with `detach: true, resume: false`.
    DetachOnly,
    /// `interruption` with `detach: true, resume: true`: a detached job that also resumes
    /// from its checkpoints (REQ-F-081's "with `resume: true` too").
    DetachResume,
    /// `interruption` with `resume: true, detach: false`, on a command that does not write.
    ResumeReader,
    /// `interruption` with `resume: true, detach: false`, on a command that writes.
    ResumeWriter,
    /// `async: true`.
    Async,
    /// A writing command with an `idempotency-key` flag.
    IdempotencyKey,
    /// A command with `danger_level: destructive` (what the kit's destructive probes and
    /// dry-run previews are made of).
    Destructive,
    /// A command that streams (`supports_streaming` or `streaming_default`), what the kit's
    /// stream probes are made of.
    Streaming,
}

impl Declaration {
    /// The declaration in the manifest's words, for a sentence.
    pub fn describe(self) -> &'static str {
        match self {
            Declaration::Interruption => "`interruption`",
            Declaration::Detach => "`interruption` with `detach: true`",
            Declaration::DetachOnly => "`interruption` with `detach: true, resume: false`",
            Declaration::DetachResume => "`interruption` with `detach: true, resume: true`",
            Declaration::ResumeReader => {
                "`interruption` with `resume: true, detach: false` on a read-only command"
            }
            Declaration::ResumeWriter => {
                "`interruption` with `resume: true, detach: false` on a writing command"
            }
            Declaration::Async => "`async: true`",
            Declaration::IdempotencyKey => "an `idempotency-key` flag on a writing command",
            Declaration::Destructive => "`danger_level: destructive`",
            Declaration::Streaming => "`supports_streaming` or `streaming_default`",
        }
    }
}

/// What a role's command must declare ([`Declaration`]); `None` for a role any command can
/// fill (`plain_slow`: a command without interruption).
pub fn role_declaration(role: &str) -> Option<Declaration> {
    match role {
        "detach" | "detach_stdin" | "long_work" => Some(Declaration::Detach),
        "detach_only" => Some(Declaration::DetachOnly),
        "resume_reader" => Some(Declaration::ResumeReader),
        "resume_writer" => Some(Declaration::ResumeWriter),
        // The idle watchdog is the background job's (REQ-F-081, REQ-C-034): a resume-only
        // command runs in its caller and has none.
        "stalling" => Some(Declaration::Detach),
        "async" => Some(Declaration::Async),
        "idempotent_writer" => Some(Declaration::IdempotencyKey),
        // Its failure is seen through `job wait`, so its work must be able to detach.
        "failing" => Some(Declaration::Detach),
        // Any interruptible command: without `--timeout`, `max_lifetime_ms` bounds its whole
        // work, detached or resumed (REQ-F-011, REQ-C-033).
        "short_lifetime" => Some(Declaration::Interruption),
        _ => None,
    }
}

/// Whether a role's work ends in a failure of its command's own (a non-zero exit other than
/// INCOMPLETE), not in success: its calibration run must fail, every other role's succeed.
pub fn role_fails(role: &str) -> bool {
    role == "failing"
}

/// Whether a calibration run of `role` that exited `code` ended as the role's work must: in
/// success, or for a [`role_fails`] role in a failure of its own (neither 0 nor INCOMPLETE 14,
/// which is no ending).
pub fn calibration_exit_fits(role: &str, code: i32) -> bool {
    if role_fails(role) { code != 0 && code != 14 } else { code == 0 }
}

/// How strongly the contract asks for a criterion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Obligation {
    /// Required: a failure makes the tool not conformant.
    Must,
    /// Recommended: a failure is reported but does not fail the run.
    Should,
    /// Optional behaviour: checked only when present.
    May,
}

impl Obligation {
    /// The lowercase word used in scenario files and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Obligation::Must => "must",
            Obligation::Should => "should",
            Obligation::May => "may",
        }
    }
}

impl fmt::Display for Obligation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One scenario: one acceptance criterion of one requirement.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Unique id, equal to the file's stem.
    pub id: String,
    /// The requirement, e.g. `REQ-F-080`; equal to the file's directory.
    pub requirement: String,
    /// The acceptance criterion, in our words.
    pub criterion: String,
    /// must / should / may.
    pub level: Obligation,
    /// Profile roles the scenario needs; the first is its primary role (whose calibration the
    /// duration variables refer to). A missing role skips the scenario with the reason.
    #[serde(default)]
    pub roles: Vec<String>,
    /// Free labels for `--only` / `--skip`.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Why the scenario is built the way it is (shown by `conform explain`).
    #[serde(default)]
    pub notes: Option<String>,
    /// A declaration the scenario judges without a role (a manifest rule over interruptible
    /// commands): with no command declaring it, the scenario is not applicable. Its roles add
    /// theirs ([`Scenario::declarations`]).
    #[serde(default)]
    pub applies_to: Option<Declaration>,
    /// A declaration the primary role's command must make beyond the role's own (a `detach`
    /// role whose command also declares `resume: true`): with no command declaring it the
    /// scenario is not applicable, and a role whose command lacks it is skipped saying which
    /// commands have it.
    #[serde(default)]
    pub role_declares: Option<Declaration>,
    /// How many times a run tries the scenario: it fails on the first attempt that fails and
    /// passes only when every attempt passes. For a race or a kill window that shows in some
    /// runs only (a failure `conform campaign` kept, with the rate it measured): judged once,
    /// such a scenario would be a red that turns green on retry.
    #[serde(default)]
    pub attempts: Option<u32>,
    /// What to do, in order.
    pub steps: Vec<Step>,
}

/// One step of a scenario, chosen by its `action` key.
// A scenario holds a handful of steps, parsed once per run: boxing the run step would cost
// every match a dereference and save nothing measurable.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Step {
    /// Run the tool (once, or `count` times at once).
    Run(RunStep),
    /// Run `data.continue_command` of an earlier step's last response through `sh -c`,
    /// verbatim, again and again while it exits 14.
    Continue(ShellStep),
    /// Run `data.cancel_command` of an earlier step's last response through `sh -c`.
    Cancel(ShellStep),
    /// Find the detached worker (a process carrying the sandbox marker that is not a step's
    /// direct child) and send it a signal.
    KillWorker(KillWorkerStep),
    /// Wait.
    Sleep(SleepStep),
    /// Run a command line with `sh -c` in the sandbox's working directory (e.g. to change the
    /// input between two calls); a non-zero exit is a `shell` finding.
    Shell(ShellCommandStep),
    /// Run the primary role's `verify` command (the effect oracle) and compare what it prints
    /// with what it printed after the uninterrupted calibration run.
    Verify(VerifyStep),
    /// Wait (bounded) until no process carrying the sandbox marker is alive: the work and
    /// every process it started are gone.
    NoProcesses(NoProcessesStep),
    /// The time from the start of an earlier step to now is at most a bound (e.g. a continue
    /// loop measured from the first call).
    ElapsedSince(ElapsedSinceStep),
}

/// `action = "run"`: one invocation of the tool.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunStep {
    /// Name, unique in the scenario; later steps refer to it.
    pub name: String,
    /// The profile role whose `argv` follows the tool; without it, only `args` follow.
    #[serde(default)]
    pub role: Option<String>,
    /// Arguments after the role's argv (or after the tool). `{var}` and `{@step/pointer}` are
    /// replaced (see the manual).
    #[serde(default)]
    pub args: Vec<String>,
    /// Appends `--budget <value>`: a duration expression (`"{budget}"`, `"2s"`, `"0"`).
    #[serde(default)]
    pub budget: Option<String>,
    /// Appends `--timeout <value>`: a duration expression.
    #[serde(default)]
    pub timeout: Option<String>,
    /// Extra environment for this step (values interpolated).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables removed from the environment.
    #[serde(default)]
    pub env_remove: Vec<String>,
    /// How stdin is wired; default: the role's `stdin`, else closed.
    #[serde(default)]
    pub stdin: Option<StdinKind>,
    /// Bytes written to stdin (then closed); excludes `stdin`.
    #[serde(default)]
    pub stdin_text: Option<String>,
    /// Selects this instance name through the profile's `instance_env` / `instance_flag`.
    #[serde(default)]
    pub instance: Option<String>,
    /// Run this many identical copies at once (default 1).
    #[serde(default)]
    pub count: Option<u32>,
    /// Send a signal to the step's process group this long after the start.
    #[serde(default)]
    pub kill_group: Option<KillGroup>,
    /// Run the tool through a symbolic link in this directory (relative to the sandbox, e.g.
    /// `"odd dir/it's \"here\""`), so that its `argv[0]` holds spaces and quotes: a command
    /// line the tool builds from it must quote it to work.
    #[serde(default)]
    pub tool_dir: Option<String>,
    /// Run the tool in this directory of the sandbox's working directory (relative, without
    /// `.` or `..`; an earlier step makes it) instead of the working directory itself: the same
    /// argv from another working directory is another invocation (REQ-F-081's job identity).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Instead of a role: run once for each kit probe of this kind in the profile (in order;
    /// `args` follow the probe's argv). A step whose kind the profile has no probes of runs
    /// nothing; a scenario none of whose probe steps has any is skipped.
    #[serde(default)]
    pub probe: Option<ProbeKind>,
    /// A run of this step that outlives its limit is judged where the spec kit judges it:
    /// here only when the kit would charge the hang to this scenario (see
    /// [`crate::step`]'s hang charges); otherwise it is left out of this step's verdict, and a
    /// scenario with nothing else wrong is skipped naming the scenario that judges the hang.
    #[serde(default)]
    pub kit_hangs: Option<bool>,
    /// Instead of a role or a probe: the argv of the profile's `[kit.argument_order]` in this
    /// placement (`args` follow). A profile without it (or without its `positional`, for the
    /// placements that use one) skips the scenario.
    #[serde(default)]
    pub order: Option<Placement>,
    /// conform's own bound on the step (duration expression); the process group is killed
    /// after it. Default: generous, derived from the calibration when there is one.
    #[serde(default)]
    pub limit: Option<String>,
    /// What this step's response must show for the criterion to be judged at all (the job
    /// still running, some progress made): checked before `expect`; when it does not hold,
    /// the scenario stops, skipped as its premise not met, naming the step and what it saw.
    /// For what a loaded machine can stretch (a job that ended before the next call), never
    /// for what the criterion itself asserts.
    #[serde(default)]
    pub premise: Option<Expect>,
    /// What this step's response must show for the criterion to apply to the tool at all,
    /// where the spec lets the tool choose otherwise (a job id derived from the invocation,
    /// where the criterion needs a new one): checked after the call's hold and before the
    /// `premise`; when it does not hold, the scenario stops and is skipped as not applicable
    /// to the tool's choice, which is no gap of the profile and keeps no claim from a verdict.
    #[serde(default)]
    pub applies_when: Option<Expect>,
    /// What must hold.
    #[serde(default)]
    pub expect: Expect,
}

/// Which kit probes of the profile a step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProbeKind {
    /// `kit.read`: safe invocations.
    Read,
    /// `kit.invalid`: invocations that must be refused with ARG_ERROR.
    Invalid,
    /// `kit.destructive`, run as written: without confirmation.
    Destructive,
    /// `kit.destructive` with its `dry_run_flag` appended.
    DestructivePreview,
    /// `kit.stream`: every stream probe (with its signal when it declares one).
    Stream,
    /// `kit.stream`: the stream probes that declare a `signal`.
    StreamSignal,
    /// The manifest command: the profile's `[kit] manifest` arguments, else `manifest`. Always
    /// there, so a tool whose manifest is `--schema` is judged on its own manifest.
    Manifest,
    /// `--help`, as the kit runs it (under the kit's timeout when the profile sets one).
    /// Always there.
    Help,
    /// Every non-stream probe as written: `kit.read`, then `kit.invalid`, then
    /// `kit.destructive` without confirmation (the runs the kit judges most checks on).
    Any,
}

impl ProbeKind {
    /// The word used in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Invalid => "invalid",
            Self::Destructive => "destructive",
            Self::DestructivePreview => "destructive-preview",
            Self::Stream => "stream",
            Self::StreamSignal => "stream-signal",
            Self::Manifest => "manifest",
            Self::Help => "help",
            Self::Any => "any",
        }
    }

    /// Whether every profile has this probe (the tool itself provides it).
    pub fn always_there(self) -> bool {
        matches!(self, Self::Manifest | Self::Help)
    }

    /// Whether the step runs the profile's destructive probes (so their setup must be done).
    pub fn runs_destructive(self) -> bool {
        matches!(self, Self::Destructive | Self::DestructivePreview | Self::Any)
    }
}

/// Where `[kit.argument_order]`'s global option goes, for `order = "..."`. With F the global
/// flag, V its value, A the alternate value, P the command path, L the local arguments and X
/// the positional, each placement is the argv in its doc.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// F V P L
    ValueBeforePath,
    /// P F V L
    ValueBetween,
    /// P L F V
    ValueAfterLocal,
    /// F A P L
    AlternateBeforePath,
    /// P F A L
    AlternateBetween,
    /// P L F A
    AlternateAfterLocal,
    /// F V P L F A
    ConflictingRepeat,
    /// F V P L F V
    SameValueRepeat,
    /// P X L
    PositionalThenLocal,
    /// P L X
    LocalThenPositional,
    /// P X
    PositionalAlone,
}

impl Placement {
    /// Every placement.
    pub const ALL: [Placement; 11] = [
        Self::ValueBeforePath,
        Self::ValueBetween,
        Self::ValueAfterLocal,
        Self::AlternateBeforePath,
        Self::AlternateBetween,
        Self::AlternateAfterLocal,
        Self::ConflictingRepeat,
        Self::SameValueRepeat,
        Self::PositionalThenLocal,
        Self::LocalThenPositional,
        Self::PositionalAlone,
    ];

    /// The word used in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ValueBeforePath => "value-before-path",
            Self::ValueBetween => "value-between",
            Self::ValueAfterLocal => "value-after-local",
            Self::AlternateBeforePath => "alternate-before-path",
            Self::AlternateBetween => "alternate-between",
            Self::AlternateAfterLocal => "alternate-after-local",
            Self::ConflictingRepeat => "conflicting-repeat",
            Self::SameValueRepeat => "same-value-repeat",
            Self::PositionalThenLocal => "positional-then-local",
            Self::LocalThenPositional => "local-then-positional",
            Self::PositionalAlone => "positional-alone",
        }
    }

    /// Whether the placement needs the profile's `positional`.
    pub fn needs_positional(self) -> bool {
        matches!(
            self,
            Self::PositionalThenLocal | Self::LocalThenPositional | Self::PositionalAlone
        )
    }
}

/// `action = "continue"` / `"cancel"`: a command line taken from an earlier response.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShellStep {
    /// Name, unique in the scenario.
    pub name: String,
    /// The earlier step whose last response carries the command.
    pub from: String,
    /// Continue only: the most hops before the loop is a finding (default 100).
    #[serde(default)]
    pub max_hops: Option<u32>,
    /// Continue only: arguments of the tool (templates, e.g. `["job", "status",
    /// "{@call/data/job_id}"]`) run after every hop that exits 14, as a run step without a role
    /// named `<step>-watch#<hop>`: what the job itself reports beside what the hops answer.
    /// Its responses are among the step's, marked as watched for the checks that tell them apart.
    #[serde(default)]
    pub watch: Vec<String>,
    /// Extra environment on top of the `from` step's environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Variables removed from the environment.
    #[serde(default)]
    pub env_remove: Vec<String>,
    /// conform's bound on each hop (duration expression).
    #[serde(default)]
    pub limit: Option<String>,
    /// What this step's (last) response must show for the criterion to be judged at all (the job
    /// still running, some progress made): checked before `expect`; when it does not hold,
    /// the scenario stops, skipped as its premise not met, naming the step and what it saw.
    /// For what a loaded machine can stretch (a job that ended before the next call), never
    /// for what the criterion itself asserts.
    #[serde(default)]
    pub premise: Option<Expect>,
    /// What must hold (of the last response; `progress_monotonic` and `same` see all).
    #[serde(default)]
    pub expect: Expect,
}

/// `action = "kill-worker"`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KillWorkerStep {
    /// Name, unique in the scenario.
    pub name: String,
    /// Signal name (`KILL`, `TERM`, `INT`); default `KILL`.
    #[serde(default)]
    pub signal: Option<String>,
}

/// `action = "sleep"`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SleepStep {
    /// Name, unique in the scenario.
    pub name: String,
    /// How long (duration expression).
    pub duration: String,
}

/// `action = "shell"`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShellCommandStep {
    /// Name, unique in the scenario.
    pub name: String,
    /// The command line (a template: `{input}` is the primary role's input file).
    pub command: String,
}

/// `action = "verify"`: the state the role's work left, compared with the calibration's
/// (by default), or with an earlier verify step's.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyStep {
    /// Name, unique in the scenario.
    pub name: String,
    /// The oracle must answer what it answered at this earlier verify step (a failing oracle
    /// answers its failure): the state did not move since. Replaces the comparison with the
    /// calibration.
    #[serde(default)]
    pub same_as: Option<String>,
    /// `true`: the oracle must answer otherwise than after the uninterrupted calibration run
    /// (a failing oracle counts as otherwise): the work did not leave its whole effect.
    /// Replaces the comparison with the calibration.
    #[serde(default)]
    pub unlike_calibrated: Option<bool>,
    /// An earlier run step: the step judges only when a response of that step ended the work
    /// (exited as the uninterrupted run did, never INCOMPLETE): the oracle is read at the
    /// moment the work ended. A step that sends a signal (`kill_group`) also ended the work
    /// when the oracle read here answers the uninterrupted effect: the signal came after the
    /// work's last commit, before its response. Otherwise the step reads the oracle and
    /// judges nothing; so too when that step ran several identical copies (`count`): one copy
    /// may wait for another and start afresh once the other ended the work, so what the
    /// oracle reads is no one run's effect.
    #[serde(default)]
    pub when_ended: Option<String>,
    /// Earlier run steps: the step judges nothing when a response of one of them ended the
    /// work. After completion the identical invocation starts fresh (docs/contract.md §6),
    /// and a writer without an idempotency key may legally do its work again: the effect
    /// was to be judged when the work ended (`when_ended`), not after a later call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unless_ended: Vec<String>,
}

impl VerifyStep {
    /// Whether the step compares with the calibration's effect (no other comparison named).
    pub fn compares_with_calibration(&self) -> bool {
        self.same_as.is_none() && self.unlike_calibrated != Some(true)
    }
}

/// `action = "no-processes"`: no process of the scenario's sandbox is alive within a bound.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoProcessesStep {
    /// Name, unique in the scenario.
    pub name: String,
    /// How long the processes get to go (duration expression), from the step's start.
    pub within: String,
}

/// `action = "elapsed-since"`: a bound on the time from an earlier step's start to now.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ElapsedSinceStep {
    /// Name, unique in the scenario.
    pub name: String,
    /// The earlier step whose start the time is measured from.
    pub since: String,
    /// The most the time may be (duration expression).
    pub at_most: String,
}

/// How a step's standard input is wired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StdinKind {
    /// `/dev/null`.
    Closed,
    /// A pipe held open and never written.
    Open,
    /// A pseudo-terminal (interactive mode).
    Pty,
}

impl StdinKind {
    /// How the process driver wires it.
    pub fn mode(self) -> crate::exec::StdinMode {
        use crate::exec::StdinMode;
        match self {
            StdinKind::Closed => StdinMode::Closed,
            StdinKind::Open => StdinMode::OpenPipe,
            StdinKind::Pty => StdinMode::Pty,
        }
    }
}

/// A signal to the step's process group, `after` its start, and optionally once more.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KillGroup {
    /// Duration expression from the start of the step.
    pub after: String,
    /// Signal name (`KILL`, `TERM`, `INT`); default `TERM`.
    #[serde(default)]
    pub signal: Option<String>,
    /// Duration expression: the same signal again this long after the first (a second Ctrl-C
    /// while the tool cleans up, REQ-F-069). Not sent when the group has already gone.
    #[serde(default)]
    pub again_after: Option<String>,
}

/// Exit code expectation: one code or a set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ExitSpec {
    /// Exactly this code.
    One(i32),
    /// Any of these codes.
    AnyOf(Vec<i32>),
}

impl ExitSpec {
    /// The accepted codes.
    pub fn codes(&self) -> Vec<i32> {
        match self {
            Self::One(c) => vec![*c],
            Self::AnyOf(v) => v.clone(),
        }
    }
}

/// How many character positions two random ids must differ in at least: a counter or a clock
/// changes a few, 64 random bits change about 15 of 16 hex digits.
pub const UNLIKE_MIN_CHARS: usize = 8;

/// A value of an earlier step's last response.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepPointer {
    /// The earlier step.
    pub step: String,
    /// The JSON pointer, e.g. `/data/job_id`.
    pub pointer: String,
}

/// A captured output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// One schema or several.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SchemaSpec {
    /// One schema.
    One(SchemaName),
    /// All of these.
    All(Vec<SchemaName>),
}

impl SchemaSpec {
    /// The schemas named.
    pub fn names(&self) -> Vec<SchemaName> {
        match self {
            Self::One(s) => vec![*s],
            Self::All(v) => v.clone(),
        }
    }
}

/// The static registration rules of the manifest (docs/contract.md §2), each checkable on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ManifestRule {
    /// `interruption` never has both `detach` and `resume` false.
    DetachOrResume,
    /// `interruption` comes with an exit-code entry `"14"`.
    IncompleteEntry,
    /// The `"14"` entry is `retryable: true, side_effects: "none"` on safe commands and
    /// `retryable: false, side_effects: "partial"` on writers.
    IncompleteEntryShape,
    /// No `interruption` with `async: true`, a streaming declaration or `stdout: "protocol"`.
    NotAsyncOrStreaming,
    /// `resume: true` on a mutating/destructive command has an `idempotency-key` flag.
    ResumableWriterHasKey,
    /// Interruptible commands have a `budget` flag; others (`job.*` built-ins aside) none.
    BudgetFlagOnlyWhenInterruptible,
    /// Every command has an exit-code entry `"130"` (SIGINT), its own or the root table's.
    SigintExitEntry,
}

impl ManifestRule {
    /// Every rule.
    pub const ALL: [ManifestRule; 7] = [
        Self::DetachOrResume,
        Self::IncompleteEntry,
        Self::IncompleteEntryShape,
        Self::NotAsyncOrStreaming,
        Self::ResumableWriterHasKey,
        Self::BudgetFlagOnlyWhenInterruptible,
        Self::SigintExitEntry,
    ];
}

/// A check of one JSON value in a response, addressed by a JSON pointer (RFC 6901).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PointerCheck {
    /// The JSON pointer, e.g. `/data/state`.
    pub pointer: String,
    /// The value must equal this (strings are interpolated first).
    #[serde(default)]
    pub equals: Option<serde_json::Value>,
    /// The value must be a string matching this regular expression (interpolated first).
    #[serde(default)]
    pub matches: Option<String>,
    /// `true`: the value must be there; `false`: it must be absent.
    #[serde(default)]
    pub present: Option<bool>,
    /// The value must differ from this (strings are interpolated first).
    #[serde(default)]
    pub not_equals: Option<serde_json::Value>,
    /// The value must be a number below this one (a number, or a template giving one).
    #[serde(default)]
    pub less_than: Option<serde_json::Value>,
    /// The value must be a number at most this one (a number, or a template giving one).
    #[serde(default)]
    pub at_most: Option<serde_json::Value>,
    /// The value must be a number at least this one (a number, or a template giving one).
    #[serde(default)]
    pub at_least: Option<serde_json::Value>,
    /// The value must be a number above this one (a number, or a template giving one).
    #[serde(default)]
    pub greater_than: Option<serde_json::Value>,
}

/// One numeric comparison of a [`PointerCheck`]: its key, its bound, and whether the ordering
/// of a value against the bound passes.
pub type Comparison<'a> = (&'static str, &'a serde_json::Value, fn(std::cmp::Ordering) -> bool);

impl PointerCheck {
    /// The numeric comparisons of the check, each with its key, its bound, and whether the
    /// ordering of a value against the bound passes.
    pub fn comparisons(&self) -> Vec<Comparison<'_>> {
        let holds: [fn(std::cmp::Ordering) -> bool; 4] = [
            std::cmp::Ordering::is_lt,
            std::cmp::Ordering::is_le,
            std::cmp::Ordering::is_ge,
            std::cmp::Ordering::is_gt,
        ];
        let all = [
            ("less_than", &self.less_than),
            ("at_most", &self.at_most),
            ("at_least", &self.at_least),
            ("greater_than", &self.greater_than),
        ];
        all.into_iter()
            .zip(holds)
            .filter_map(|((key, bound), holds)| bound.as_ref().map(|b| (key, b, holds)))
            .collect()
    }

    /// Whether the check checks anything.
    pub(crate) fn is_empty(&self) -> bool {
        self.equals.is_none()
            && self.matches.is_none()
            && self.present.is_none()
            && self.not_equals.is_none()
            && self.comparisons().is_empty()
    }
}

/// What must hold after a step. Every field is one independent check; absent fields check
/// nothing. This is only the value each key is read into: what a key asserts, what it cites,
/// its schema and its validation are its check's, defined once beside its judge in
/// `harness/src/checks/` (a test keeps the two lists of keys equal).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The exit code (one, or any of a list).
    #[serde(default)]
    pub exit: Option<ExitSpec>,
    /// Exit codes that are wrong.
    #[serde(default)]
    pub exit_not: Vec<i32>,
    /// stdout is one JSON document valid against this schema (or all of these).
    #[serde(default)]
    pub schema: Option<SchemaSpec>,
    /// Pointer checks on the response.
    #[serde(default)]
    pub json: Vec<PointerCheck>,
    /// The step took at most this long (duration expression).
    #[serde(default)]
    pub elapsed_max: Option<String>,
    /// The step took at least this long (duration expression).
    #[serde(default)]
    pub elapsed_min: Option<String>,
    /// stdout and stderr reached end-of-file soon after the process exited.
    #[serde(default)]
    pub pipes_released: Option<bool>,
    /// `data.progress.done` never decreases across the scenario's responses so far (per job).
    #[serde(default)]
    pub progress_monotonic: Option<bool>,
    /// Continue only: fewer than this many hops are stalls, as REQ-F-082's agent loop counts
    /// them (a hop that exits 14 with a `data.progress.done` not above the hop before it),
    /// when the loop ends with exit 0: the work went on, so an agent cancelling at that many
    /// stalls would have cancelled live work.
    #[serde(default)]
    pub stalls_below: Option<u32>,
    /// Continue with `watch` only: the watched responses (`job status`) show a larger
    /// `data.progress.done` within every stretch longer than this duration expression while
    /// the job runs (REQ-C-034: a report at least every 10 s of work).
    #[serde(default)]
    pub watched_progress_grows_within: Option<String>,
    /// Continue with `watch` only: no two hops (`job wait`) answer one `data.progress.done`
    /// more than this duration expression apart while a watched response between them showed
    /// the job past it (REQ-F-081: `job wait` exits 14 with a larger done while the job runs).
    #[serde(default)]
    pub waited_progress_grows_within: Option<String>,
    /// After redaction, the response equals the calibrated (`--budget 0`) response of the role.
    #[serde(default)]
    pub matches_calibrated: Option<bool>,
    /// After redaction, the response equals that earlier step's last response.
    #[serde(default)]
    pub same_response_as: Option<String>,
    /// These pointers have one value across all responses of the step (copies, hops).
    #[serde(default)]
    pub same: Vec<String>,
    /// The process ended within this long (a duration expression) after the last signal
    /// conform sent into it (`kill_group`, its `again_after` included); a process that had
    /// ended before the signal passes.
    #[serde(default)]
    pub exit_after_signal_max: Option<String>,
    /// These pointers have one value across the responses of the step that exit 14 (copies
    /// that hand off); a copy that answered with another exit is not compared.
    #[serde(default)]
    pub same_among_handoffs: Vec<String>,
    /// `data.continue_command`, split into words by `sh`, is exactly the invocation that gave
    /// the response (for a paused, resume-only command), with at most `--idempotency-key <k>`
    /// added (a writer's).
    #[serde(default)]
    pub continues_verbatim: Option<bool>,
    /// The static registration rules the (manifest) response must keep.
    #[serde(default)]
    pub manifest_rules: Vec<ManifestRule>,
    /// The string at each pointer differs from the one at the same pointer of that earlier
    /// step's last response in at least [`UNLIKE_MIN_CHARS`] positions (ids that are random,
    /// not counters or clocks).
    #[serde(default)]
    pub differs_from: Vec<StepPointer>,
    /// These streams (`stdout`, `stderr`) hold no ANSI escape sequence.
    #[serde(default)]
    pub no_ansi: Vec<Stream>,
    /// stdout holds no prose: it is empty or one JSON document.
    #[serde(default)]
    pub no_prose: Option<bool>,
    /// Each of these warning codes is the `code` of an entry of `warnings` in at least one
    /// response of the step (a copy, a hop).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// stdout is a JSONL stream keeping the contract of REQ-O-004 (see [`crate::stream`]);
    /// the step's response is then the stream's terminal line.
    #[serde(default)]
    pub stream: Option<bool>,
    /// stdout is byte for byte that earlier step's last stdout.
    #[serde(default)]
    pub same_stdout_as: Option<String>,
    /// stdout differs from that earlier step's last stdout.
    #[serde(default)]
    pub stdout_differs_from: Option<String>,
    /// The response's `/data` equals that earlier step's (JSON equality).
    #[serde(default)]
    pub same_data_as: Option<String>,
    /// The response's `/data` differs from that earlier step's.
    #[serde(default)]
    pub data_differs_from: Option<String>,
    /// When stdout is a valid response envelope, its `meta.exit_code` is the process's exit
    /// code (REQ-F-001, REQ-F-004). A stdout that is no valid envelope is left to the envelope
    /// checks, as the spec kit does.
    #[serde(default)]
    pub exit_matches_meta: Option<bool>,
    /// The process exited by itself with a code an agent may meet: REQ-F-001's table (0 to
    /// 14), a signal handler's 130 or 143, or a command-specific code (79 to 125) that the
    /// invoked command's effective exit-code table declares (REQ-C-001).
    #[serde(default)]
    pub exit_in_table: Option<bool>,
    /// The response ends as the role's calibrated one in what a run's measured values cannot
    /// change: the same exit, `ok`, `error.code`, and a `data` of the same shape (the same
    /// keys, the same JSON types, arrays of the same length, all the way down), while values
    /// may differ (a slept time, a timestamp).
    #[serde(default)]
    pub ends_as_calibrated: Option<bool>,
    /// stdout is one valid response envelope, with the allowance named (see [`EnvelopeRule`]).
    #[serde(default)]
    pub envelope: Option<EnvelopeRule>,
    /// Every response of the step (each copy, each hop of a continue loop) records the budget
    /// in force as a whole number in `meta.budget_ms` (REQ-F-080).
    #[serde(default)]
    pub budget_recorded: Option<bool>,
    /// Every INCOMPLETE (exit 14) response of the step (each copy, each hop) has the
    /// `error.retryable` of its command's declared `"14"` exit-code entry (REQ-F-082); a `job
    /// wait` answering for a job may copy `job wait`'s own entry instead (docs/contract.md §9).
    #[serde(default)]
    pub retryable_as_declared: Option<bool>,
}

/// What `envelope` accepts besides one valid response envelope on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EnvelopeRule {
    /// Nothing else.
    Required,
    /// An empty stdout (`--help`, whose text belongs on stderr).
    OrEmpty,
    /// A bare manifest, valid against the manifest schema, when the step ran the manifest
    /// command: docs/contract.md §2 accepts the manifest bare (the spec kit does not).
    OrBareManifest,
}

impl Expect {
    /// The earlier steps whose output this expectation compares with, with their keys.
    pub fn output_references(&self) -> Vec<(&'static str, &str)> {
        [
            ("same_stdout_as", &self.same_stdout_as),
            ("stdout_differs_from", &self.stdout_differs_from),
            ("same_data_as", &self.same_data_as),
            ("data_differs_from", &self.data_differs_from),
        ]
        .into_iter()
        .filter_map(|(key, step)| step.as_deref().map(|s| (key, s)))
        .collect()
    }

    /// The duration expressions (`elapsed_max`, `elapsed_min`), which are interpolated too.
    pub fn durations(&self) -> Vec<&str> {
        [
            &self.elapsed_max,
            &self.elapsed_min,
            &self.watched_progress_grows_within,
            &self.waited_progress_grows_within,
            &self.exit_after_signal_max,
        ]
        .into_iter()
        .filter_map(|e| e.as_deref())
        .collect()
    }

    /// The text templates of the pointer checks (string values and patterns), interpolated
    /// before they are compared; the duration expressions are [`Expect::durations`].
    pub fn templates(&self) -> Vec<&str> {
        let mut out = Vec::new();
        for p in &self.json {
            out.extend(p.matches.as_deref());
            let values =
                [&p.equals, &p.not_equals, &p.less_than, &p.at_most, &p.at_least, &p.greater_than];
            for value in values.into_iter().flatten() {
                if let serde_json::Value::String(s) = value {
                    out.push(s.as_str());
                }
            }
        }
        out
    }
}

impl Step {
    /// The step's name.
    pub fn name(&self) -> &str {
        match self {
            Self::Run(s) => &s.name,
            Self::Continue(s) | Self::Cancel(s) => &s.name,
            Self::KillWorker(s) => &s.name,
            Self::Sleep(s) => &s.name,
            Self::Shell(s) => &s.name,
            Self::Verify(s) => &s.name,
            Self::NoProcesses(s) => &s.name,
            Self::ElapsedSince(s) => &s.name,
        }
    }

    /// The step's action keyword.
    pub fn action(&self) -> &'static str {
        match self {
            Self::Run(_) => "run",
            Self::Continue(_) => "continue",
            Self::Cancel(_) => "cancel",
            Self::KillWorker(_) => "kill-worker",
            Self::Sleep(_) => "sleep",
            Self::Shell(_) => "shell",
            Self::Verify(_) => "verify",
            Self::NoProcesses(_) => "no-processes",
            Self::ElapsedSince(_) => "elapsed-since",
        }
    }

    /// The step's expectations, if it has any.
    pub fn expect(&self) -> Option<&Expect> {
        match self {
            Self::Run(s) => Some(&s.expect),
            Self::Continue(s) | Self::Cancel(s) => Some(&s.expect),
            Self::KillWorker(_)
            | Self::Sleep(_)
            | Self::Shell(_)
            | Self::Verify(_)
            | Self::NoProcesses(_)
            | Self::ElapsedSince(_) => None,
        }
    }

    /// Every string of the step that is interpolated, for validation.
    pub(crate) fn templates(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        match self {
            Self::Run(s) => {
                out.extend(s.args.iter().map(String::as_str));
                out.extend(s.env.values().map(String::as_str));
                out.extend(s.budget.as_deref());
                out.extend(s.timeout.as_deref());
                out.extend(s.limit.as_deref());
                out.extend(s.stdin_text.as_deref());
                if let Some(k) = &s.kill_group {
                    out.push(&k.after);
                    out.extend(k.again_after.as_deref());
                }
                out.extend(s.expect.durations());
                out.extend(s.expect.templates());
                if let Some(a) = &s.applies_when {
                    out.extend(a.templates());
                }
            }
            Self::Continue(s) | Self::Cancel(s) => {
                out.extend(s.env.values().map(String::as_str));
                out.extend(s.watch.iter().map(String::as_str));
                out.extend(s.limit.as_deref());
                out.extend(s.expect.durations());
                out.extend(s.expect.templates());
            }
            Self::KillWorker(_) | Self::Verify(_) => {}
            Self::Sleep(s) => out.push(&s.duration),
            Self::Shell(s) => out.push(&s.command),
            Self::NoProcesses(s) => out.push(&s.within),
            Self::ElapsedSince(s) => out.push(&s.at_most),
        }
        out
    }

    /// The duration expressions of the step (they must parse as such).
    pub(crate) fn duration_exprs(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        match self {
            Self::Run(s) => {
                out.extend(s.budget.as_deref());
                out.extend(s.timeout.as_deref());
                out.extend(s.limit.as_deref());
                if let Some(k) = &s.kill_group {
                    out.push(&k.after);
                    out.extend(k.again_after.as_deref());
                }
                out.extend(s.expect.durations());
            }
            Self::Continue(s) | Self::Cancel(s) => {
                out.extend(s.limit.as_deref());
                out.extend(s.expect.durations());
            }
            Self::KillWorker(_) | Self::Shell(_) | Self::Verify(_) => {}
            Self::Sleep(s) => out.push(&s.duration),
            Self::NoProcesses(s) => out.push(&s.within),
            Self::ElapsedSince(s) => out.push(&s.at_most),
        }
        out
    }
}

impl Scenario {
    /// The kinds of kit probe the scenario's steps run.
    pub fn probe_kinds(&self) -> Vec<ProbeKind> {
        let mut kinds: Vec<ProbeKind> = self
            .steps
            .iter()
            .filter_map(|s| match s {
                Step::Run(r) => r.probe,
                _ => None,
            })
            .collect();
        kinds.dedup();
        kinds
    }

    /// The argument-order placements the scenario's steps use.
    pub fn placements(&self) -> Vec<Placement> {
        self.steps
            .iter()
            .filter_map(|s| match s {
                Step::Run(r) => r.order,
                _ => None,
            })
            .collect()
    }

    /// The primary role (the first named), whose calibration the variables refer to.
    pub fn primary_role(&self) -> Option<&str> {
        self.roles.first().map(String::as_str)
    }

    /// Whether the run step `name` sends a signal to what it runs (`kill_group`).
    pub fn signals(&self, name: &str) -> bool {
        self.steps
            .iter()
            .any(|s| matches!(s, Step::Run(r) if r.name == name && r.kill_group.is_some()))
    }

    /// Whether the run step `name` runs several identical copies at once (`count`).
    pub fn runs_copies(&self, name: &str) -> bool {
        self.steps
            .iter()
            .any(|s| matches!(s, Step::Run(r) if r.name == name && r.count.is_some_and(|n| n > 1)))
    }

    /// The declarations some command must make for the scenario to apply: its `applies_to`,
    /// then each role's, each once.
    pub fn declarations(&self) -> Vec<Declaration> {
        let mut all: Vec<Declaration> = self.applies_to.into_iter().collect();
        let roles = self.roles.iter().filter_map(|r| role_declaration(r));
        for d in roles.chain(self.role_declares) {
            if !all.contains(&d) {
                all.push(d);
            }
        }
        all
    }

    /// Whether the scenario needs a calibrated role (it uses a calibration variable or compares
    /// with the calibrated response).
    pub fn needs_calibration(&self) -> bool {
        self.steps.iter().any(|s| {
            s.templates().iter().any(|t| {
                template_vars(t)
                    .iter()
                    .any(|v| matches!(v, Var::Calibration(name) if !UNCALIBRATED_VARS.contains(&name.as_str())))
            }) || s.expect().is_some_and(|e| {
                e.matches_calibrated == Some(true) || e.ends_as_calibrated == Some(true)
            })
                || matches!(s, Step::Verify(_))
        })
    }

    /// Whether a failure of the scenario may be the machine's load because it runs a
    /// calibrated role's work (then conform runs it again alone before its verdict). A
    /// scenario of several `attempts` already says that its failure shows in some runs only:
    /// a run alone that does not show it again proves nothing, so only a finding about time
    /// sends it back.
    pub fn timed(&self) -> bool {
        self.needs_calibration() && self.attempts.unwrap_or(1) <= 1
    }

    /// Whether a template of the scenario uses `{idle_timeout}`.
    pub fn uses_idle_timeout(&self) -> bool {
        self.uses_var(IDLE_TIMEOUT)
    }

    /// Whether a template of the scenario uses `{max_lifetime}`.
    pub fn uses_max_lifetime(&self) -> bool {
        self.uses_var(MAX_LIFETIME)
    }

    /// Whether a template of the scenario uses the variable `{name}` of the calibration list.
    fn uses_var(&self, name: &str) -> bool {
        self.steps.iter().any(|s| {
            s.templates().iter().any(|t| {
                template_vars(t).iter().any(|v| matches!(v, Var::Calibration(n) if n == name))
            })
        })
    }

    /// Whether a template of the scenario uses `{input}` (the primary role's input file).
    pub fn uses_input(&self) -> bool {
        self.steps.iter().any(|s| {
            s.templates().iter().any(|t| {
                template_vars(t).iter().any(|v| matches!(v, Var::Builtin(n) if n == "input"))
            })
        })
    }

    /// Whether the scenario interrupts the work (uses `{budget}` / `{half_budget}`), so a role
    /// too fast to interrupt skips it.
    pub fn needs_interruptible(&self) -> bool {
        self.steps.iter().any(|s| {
            s.templates().iter().any(|t| {
                template_vars(t).iter().any(|v| {
                    matches!(v, Var::Calibration(name) if INTERRUPTION_VARS.contains(&name.as_str()))
                })
            })
        })
    }
}

/// A signal number from its name (`TERM`, `SIGTERM`, `KILL`, `INT`, `HUP`, `QUIT`).
pub fn signal_by_name(name: &str) -> Result<nix::sys::signal::Signal, String> {
    use nix::sys::signal::Signal;
    let bare = name.strip_prefix("SIG").unwrap_or(name);
    Ok(match bare {
        "TERM" => Signal::SIGTERM,
        "KILL" => Signal::SIGKILL,
        "INT" => Signal::SIGINT,
        "HUP" => Signal::SIGHUP,
        "QUIT" => Signal::SIGQUIT,
        other => return Err(format!("unknown signal `{other}` (TERM, KILL, INT, HUP, QUIT)")),
    })
}
