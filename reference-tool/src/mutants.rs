//! Mutants: test-only faults, one rule of the contract broken per switch.
//!
//! A conformance suite must be able to fail (DESIGN.md, "Sensitivity"). Each [`Mutant`] turns
//! reftool into a tool that breaks exactly one rule; the workspace test
//! `tests/suite/mutants.rs` runs `conform` against every one of them and checks that the
//! scenario meant to catch it fails, and that no unrelated scenario does.
//!
//! # Switching one on
//!
//! The switches exist only when the crate is built with the cargo feature `mutants`. Without
//! it (every release build, `cargo build -p reftool`, `cargo install`) [`active`] is a
//! constant `false` and the compiler removes every switch point. With it, `REFTOOL_MUTANT=<name>`
//! ([`MUTANT_ENV`], read once per process and inherited by detached workers) activates one
//! mutant by its [`Mutant::name`]; unset or unknown, none is active and reftool behaves as the
//! reference.
//!
//! The workspace's root package dev-depends on reftool with `features = ["mutants"]`, so the
//! binaries of a workspace test build (`cargo test --workspace`, `cargo nextest run
//! --workspace`) carry the switches, inactive unless the variable is set, while `cargo build
//! --release -p reftool` has none ([`COMPILED_IN`] says which build this is).
//!
//! # Where they act
//!
//! The reference path stays readable: a function a mutant alters carries one hook line, a
//! call into this module that hands over what the reference computed and gets back what the
//! mutant makes of it (or, for a step a mutant skips, asks whether to skip it). Every
//! deviation is written here, grouped by concern; faults of what goes in and comes out act at
//! the process boundary ([`at_the_boundary`]), around the whole invocation.
//!
//! ```sh
//! cargo build -p reftool --features mutants
//! REFTOOL_MUTANT=env-beats-flag target/debug/reftool analyze data.csv --budget 1s
//! ```

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;

use rusqlite::Connection;
use serde_json::{Value, json};

use crate::duration::parse_duration;
use crate::framework::cli::Parsed;
use crate::framework::modes::OutputValue;
use crate::framework::options::{self, Token};
use crate::framework::registry::{CommandSpec, FlagOwner};
use crate::framework::{App, Exit, Failure, Finished, Response};
use crate::runtime::budget::{
    self, BudgetError, BudgetInputs, BudgetSource, ResolvedBudget, resolve_budget,
};
use crate::runtime::context::JobContext;
use crate::runtime::identity::IdentityKey;
use crate::runtime::ids::JobId;
use crate::runtime::jobs::{
    self, CancelOutcome, JobError, JobOutcome, JobStatus, JobStore, JobView,
};
use crate::runtime::progress::Progress;
use crate::runtime::stop::StopControl;

/// The environment variable that names the active mutant.
pub const MUTANT_ENV: &str = "REFTOOL_MUTANT";

/// Whether this build carries the switches (the cargo feature `mutants`).
pub const COMPILED_IN: bool = cfg!(feature = "mutants");

macro_rules! mutants {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, )*) => {
        /// One fault; see each variant for the rule it breaks.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Mutant {
            $( $(#[$doc])* $variant, )*
        }

        impl Mutant {
            /// Every mutant, in catalogue order.
            pub const ALL: &'static [Mutant] = &[$( Mutant::$variant, )*];

            /// The name `REFTOOL_MUTANT` takes.
            pub const fn name(self) -> &'static str {
                match self {
                    $( Mutant::$variant => $name, )*
                }
            }
        }
    };
}

mutants! {
    /// An INCOMPLETE answer exits 0 while its envelope still says 14 (exit 14 where due).
    ExitZeroOnIncomplete = "exit-zero-on-incomplete",
    /// A valid `AGENT_CALL_BUDGET_MS` wins over `--budget` (the flag takes precedence).
    EnvBeatsFlag = "env-beats-flag",
    /// The default budget is 20000 ms (it is 30000).
    DefaultBudget20s = "default-budget-20s",
    /// `AGENT_CALL_BUDGET_MS` is never read (it bounds a call without `--budget`).
    EnvBudgetIgnored = "env-budget-ignored",
    /// `--budget 0` counts as no flag, so the variable applies (0 switches the budget off).
    ZeroBudgetDefersToEnv = "zero-budget-defers-to-env",
    /// On a terminal without `--budget` the variable still applies (no budget there).
    BudgetOnTerminal = "budget-on-terminal",
    /// On a terminal without `--budget`, `meta.budget_ms` says 0 (it must be absent).
    BudgetMetaOnTerminal = "budget-meta-on-terminal",
    /// Successful responses of interruptible commands lack `meta.budget_ms` (every response
    /// carries it).
    NoBudgetMetaOnSuccess = "no-budget-meta-on-success",
    /// The error endings of interruptible commands and `job wait` (STALLED, JOB_LOST,
    /// CANCELLED, any exit but 0 and 14) lack `meta.budget_ms` (every response carries it).
    NoBudgetMetaOnEndings = "no-budget-meta-on-endings",
    /// `job wait`'s INCOMPLETE answers, the middle hops of a continue loop, lack
    /// `meta.budget_ms` (the hand-off and the final answer keep it).
    NoBudgetMetaOnHops = "no-budget-meta-on-hops",
    /// `migrate`, which declares no interruption, takes `--budget` (only interruptible
    /// commands have one).
    BudgetFlagOnPlainCommand = "budget-flag-on-plain-command",
    /// Commands without interruption record `AGENT_CALL_BUDGET_MS` in `meta.budget_ms` (they
    /// ignore it).
    PlainCommandsReadBudgetEnv = "plain-commands-read-budget-env",
    /// A paused writer's `continue_command` lacks the `--idempotency-key` it must carry.
    WriterContinueWithoutKey = "writer-continue-without-key",
    /// A writer's INCOMPLETE says `retryable: true` (its "14" entry says false).
    WriterIncompleteRetryable = "writer-incomplete-retryable",
    /// A read-only command's INCOMPLETE says `retryable: false` (its "14" entry says true).
    ReaderIncompleteNotRetryable = "reader-incomplete-not-retryable",
    /// A resumed run counts `progress.done` from where it resumed, so it goes backwards.
    ProgressRestartsOnResume = "progress-restarts-on-resume",
    /// The import's checkpoint, committed with a chunk's rows, still points before them: a
    /// resume (after a kill or a pause) writes those rows twice.
    CheckpointLagsItsRows = "checkpoint-lags-its-rows",
    /// `job status` of a job that succeeded exits 3, not 0.
    EndedJobStatusExits3 = "ended-job-status-exits-3",
    /// A duration's `s` unit is read as milliseconds: `--budget 1s` is a budget of 1 ms.
    SecondsReadAsMillis = "seconds-read-as-millis",
    /// `job wait` forgets a job once it has delivered its result: a second wait on the ended
    /// job answers NOT_FOUND.
    ResultDeliveredOnce = "result-delivered-once",
    /// The mirror fault: a resumed import goes on one chunk past its checkpoint, so that
    /// chunk's rows are never written, while its count and response are those of a correct
    /// run. Only the state the work leaves shows it (the role's `verify`).
    ResumeSkipsAChunk = "resume-skips-a-chunk",
    /// The worker inherits the caller's stdout and stderr, so the caller's pipes stay open
    /// after the hand-off.
    WorkerHoldsCallerPipes = "worker-holds-caller-pipes",
    /// The worker stays in the caller's session and process group, so killing the caller's
    /// group kills the work.
    WorkerInCallerGroup = "worker-in-caller-group",
    /// A dead worker counts as alive to the `job` built-ins: `job wait` waits out its budget
    /// instead of answering JOB_LOST.
    DeadWorkerLooksAlive = "dead-worker-looks-alive",
    /// A cancel of an ended job leaves a marker that cancels the next identical invocation.
    StaleCancelMarker = "stale-cancel-marker",
    /// `job cancel` finds a job in any instance (jobs are owned by their instance).
    ForeignInstanceCancel = "foreign-instance-cancel",
    /// Job ids count up with the clock, in milliseconds (they must carry 64 random bits).
    ClockJobIds = "clock-job-ids",
    /// `continue_command` and `cancel_command` join the argv with spaces, unquoted.
    UnquotedCommands = "unquoted-commands",
    /// The manifest declares an interruption with `detach` and `resume` both false.
    ManifestNeitherDetachNorResume = "manifest-neither-detach-nor-resume",
    /// The manifest drops the "14" entry of an interruptible command.
    ManifestNoIncompleteEntry = "manifest-no-incomplete-entry",
    /// The manifest declares an interruptible command `async: true` too.
    ManifestInterruptionWithAsync = "manifest-interruption-with-async",
    /// The manifest's resumable writer has no `idempotency-key` flag.
    ManifestWriterWithoutKey = "manifest-writer-without-key",
    /// The writer's "14" entry is `retryable: true, side_effects: "none"` (read-only shape).
    ManifestWriterEntryRetryable = "manifest-writer-entry-retryable",
    /// The manifest lacks `schema_version`, so it does not validate.
    ManifestWithoutSchemaVersion = "manifest-without-schema-version",
    /// A repeat with the same idempotency key does the work again (it must be a no-op).
    IdempotencyKeyIgnored = "idempotency-key-ignored",
    /// An async command's job descriptor lacks `terminal`.
    AsyncDescriptorWithoutTerminal = "async-descriptor-without-terminal",
    /// `job status` of a running async job exits 3 (it exits 14).
    AsyncStatusExits3 = "async-status-exits-3",
    /// `job cancel` answers 0 but leaves the job running.
    CancelIgnored = "cancel-ignored",
    /// Every invocation starts its own job (the identical invocation attaches).
    NoAttach = "no-attach",
    /// `job status` waits like `job wait` (it never waits).
    JobStatusWaits = "job-status-waits",
    /// `job wait` ignores its budget and holds its caller until the job ends (it holds it at
    /// most up to the budget).
    JobWaitBlocks = "job-wait-blocks",
    /// No SIGTERM handler: the signal kills the front process instead of a hand-off.
    SigtermKillsTheCall = "sigterm-kills-the-call",
    /// A stalled job ends with `error.code` TIMEOUT (it is STALLED).
    StallReportedAsTimeout = "stall-reported-as-timeout",
    /// The idle watchdog never ends a stalled job: it runs on, silent (it ends with STALLED
    /// after `idle_timeout_ms` without progress).
    WatchdogOff = "watchdog-off",
    /// A `running` hand-off's `continue_command` is `job wait <id> --output json` (it is
    /// exactly `<tool> job wait <id>`).
    RunningContinueWithExtraFlag = "running-continue-with-extra-flag",
    /// A paused reader's `continue_command` adds `--output json` (it is the invocation
    /// verbatim).
    PausedContinueAddsFlag = "paused-continue-adds-flag",
    /// `job wait` relays a finished job's response with `data` null (it is the job's response).
    RelayedResultLosesData = "relayed-result-loses-data",
    /// A command without interruption at its `--timeout` exits 1 GENERAL_ERROR (TIMEOUT 10).
    PlainTimeoutIsGeneralError = "plain-timeout-is-general-error",
    /// An unknown flag or command exits 1 (ARG_ERROR 2).
    UnknownFlagExits1 = "unknown-flag-exits-1",
    /// `version` ends stdout with an ANSI reset though stdout is no terminal.
    AnsiOnStdout = "ansi-on-stdout",
    /// Every command colours stderr, NO_COLOR or not.
    NoColorIgnored = "no-color-ignored",
    /// `version` reads stdin to its end when it is not a terminal, so an open silent pipe
    /// hangs it.
    ReadProbesWaitForStdin = "read-probes-wait-for-stdin",
    /// `job cancel` leaves the job's checkpoint, so the identical invocation resumes the
    /// cancelled work (it starts from the beginning).
    CancelKeepsCheckpoint = "cancel-keeps-checkpoint",
    /// A checkpoint whose input fingerprint no longer matches is restored anyway (a changed
    /// input discards it).
    ChangedInputKeepsCheckpoint = "changed-input-keeps-checkpoint",
    /// `digest` keeps its last checkpoint after completing, so the identical invocation
    /// finishes at once from it (completed work starts fresh).
    CompletedCheckpointKept = "completed-checkpoint-kept",
    /// `--help` goes to stdout even when stdout is not a terminal.
    HelpOnStdout = "help-on-stdout",
    /// `job wait`'s INCOMPLETE reports `progress.done` 0 (fresh progress, never behind).
    JobWaitStaleProgress = "job-wait-stale-progress",
    /// Progress is never reported: `progress.done` stays 0 while the work runs.
    ProgressNotPublished = "progress-not-published",
    /// A cancel of an ended job (still answered 4 JOB_ENDED) cancels the running job of the
    /// same invocation.
    RejectedCancelStillFires = "rejected-cancel-still-fires",
    /// `drop-table --dry-run` ignores the flag and goes on as a real call (a dry run previews).
    DryRunIgnored = "dry-run-ignored",
    /// `drop-table --dry-run` drops the table, then answers the preview (a dry run changes
    /// nothing).
    DryRunActs = "dry-run-acts",
    /// A reader's new job (after a killed run) ignores the checkpoint it finds and starts
    /// over (the identical invocation resumes from the last checkpoint).
    KilledReaderStartsOver = "killed-reader-starts-over",
    /// `drop-table` drops without confirmation (an unconfirmed destructive call refuses).
    UnconfirmedDrops = "unconfirmed-drops",
    /// An ARG_ERROR exits 127, a shell's code, instead of 2 (probes exit with standard codes).
    ArgErrorExits127 = "arg-error-exits-127",
    /// `version` prints a progress object before its envelope (one JSON document on stdout).
    VersionPrintsProgressFirst = "version-prints-progress-first",
    /// `version` waits for an answer on stdin and asks again at every end of input, so with
    /// stdin `/dev/null` it never ends (a read command needs no input).
    ReadProbesNeedInput = "read-probes-need-input",
    /// The global `--output` after the command path is refused as an unknown flag (global
    /// options mean the same anywhere).
    GlobalOptionAfterPathRefused = "global-option-after-path-refused",
    /// A global option given before the command path is replaced by the command's default
    /// (its value survives the command).
    SubcommandDefaultOverridesGlobal = "subcommand-default-overrides-global",
    /// A scalar option repeated with different values: the last one wins (it is ARG_ERROR 2).
    ConflictingRepeatLastWins = "conflicting-repeat-last-wins",
    /// A scalar option repeated with the same value is refused (it is accepted).
    SameValueRepeatRefused = "same-value-repeat-refused",
    /// An optional command-local option after the first positional is ignored, so its default
    /// applies (it takes effect).
    OptionsStopAtPositional = "options-stop-at-positional",
    /// A stream ends without its summary line (it ends with exactly one terminal line).
    StreamWithoutSummary = "stream-without-summary",
    /// A stream's `_seq` skips from 2 to 4 (it counts 1, 2, 3, ...).
    StreamSeqSkips = "stream-seq-skips",
    /// SIGINT during a stream exits 1 (it is 130).
    SigintExits1 = "sigint-exits-1",
    /// SIGINT during a stream says `data.partial: false` (the stream stopped part-way).
    SigintNotPartial = "sigint-not-partial",
    /// `--timeout` bounds only the call it is given to, never the job: the job lives
    /// `max_lifetime_ms`, so work continued past `--timeout` runs on to its end (it bounds the
    /// whole work across continuations).
    JobTimeoutSpansOneCall = "job-timeout-spans-one-call",
    /// `job cancel` of a running job records it `cancelled` and exits 0, but the worker is
    /// never told: it runs on and finishes its effect (the job stops at its next safe point).
    CancelMarksOnly = "cancel-marks-only",
    /// A cancelled job's worker stops the work and records the end, but its process lives on
    /// (no process of a stopped job is left).
    CancelledWorkerLingers = "cancelled-worker-lingers",
    /// `analyze` ignores the checkpoint a lost job left, so the identical invocation after
    /// JOB_LOST starts over from zero (it continues from the last checkpoint).
    LostJobRestartsFromZero = "lost-job-restarts-from-zero",
    /// `job status` of a lost job answers 14 as if it still ran (it is 1 JOB_LOST, like
    /// `job wait`).
    LostJobStatusRunning = "lost-job-status-running",
    /// `job wait` on a job that failed with its command's own exit answers 1 instead (it
    /// relays the command's own exit code).
    FailedJobWaitExits1 = "failed-job-wait-exits-1",
    /// `job status` of a job that failed exits 0, as if it had succeeded.
    FailedJobStatusExits0 = "failed-job-status-exits-0",
    /// `job wait` and `job status` of a lost job leave out `error.detail` (it holds the tail
    /// of the job's log).
    LostJobWithoutDetail = "lost-job-without-detail",
    /// `job wait` refuses a job of an async command (one runtime serves every background
    /// job: it waits for it like for a detached one).
    AsyncJobWaitRefused = "async-job-wait-refused",
    /// `job wait` answers, while the job runs, the progress of the job's hand-off, never
    /// refreshed (it answers fresh progress).
    StaleProgressOnWait = "stale-progress-on-wait",
    /// The invocation identity leaves out the working directory, so the same argv from
    /// another directory attaches to this directory's job (jobs are keyed by it too).
    IdentityIgnoresCwd = "identity-ignores-cwd",
    /// The invocation identity leaves out the stdin digest, so the same argv over other stdin
    /// bytes attaches to the job of the first bytes.
    IdentityIgnoresStdin = "identity-ignores-stdin",
    /// The invocation identity leaves out the instance and an invocation attaches to a
    /// running job of any instance (jobs are owned by their instance).
    IdentityIgnoresInstance = "identity-ignores-instance",
}

impl Mutant {
    /// The mutant with this name.
    pub fn from_name(name: &str) -> Option<Mutant> {
        Mutant::ALL.iter().copied().find(|m| m.name() == name)
    }
}

/// The mutant this process runs as (read once).
#[cfg(feature = "mutants")]
fn current() -> Option<Mutant> {
    static CURRENT: std::sync::OnceLock<Option<Mutant>> = std::sync::OnceLock::new();
    *CURRENT.get_or_init(|| {
        std::env::var(MUTANT_ENV).ok().and_then(|name| Mutant::from_name(name.trim()))
    })
}

/// Whether `mutant` is the active one (always false without the feature).
#[cfg(feature = "mutants")]
pub fn active(mutant: Mutant) -> bool {
    current() == Some(mutant)
}

/// Whether `mutant` is the active one (always false without the feature).
#[cfg(not(feature = "mutants"))]
#[inline(always)]
pub const fn active(_mutant: Mutant) -> bool {
    false
}

// ---------------------------------------------------------------------------------------------
// The process boundary: argv in, bytes and exit status out

/// Runs `run` (the whole invocation) between the faults of the process boundary: the read
/// probes' stdin faults before it (they may end the process at once, writing nothing), and
/// the faults in what is written after it (the exit status, stray bytes on stdout and stderr).
pub fn at_the_boundary(
    argv: Vec<OsString>,
    run: impl FnOnce(Vec<OsString>) -> Finished,
) -> Finished {
    if !COMPILED_IN {
        return run(argv);
    }
    if let Some(exit) = before_run(&argv) {
        return Finished { stdout: Vec::new(), stderr: String::new(), exit };
    }
    let kept = argv.clone();
    let mut finished = run(argv);
    tamper_output(&kept, &mut finished);
    finished
}

/// Whether this invocation is `version`, the read probe the stdin mutants spoil (not
/// `manifest`: conform reads it in nearly every scenario, with stdin closed).
fn is_read_probe(argv: &[OsString]) -> bool {
    argv.get(1).is_some_and(|a| a == "version")
}

/// Faults before anything runs: the read probes' stdin mutants. `Some(exit)` ends the
/// process at once with that status.
fn before_run(argv: &[OsString]) -> Option<u8> {
    use std::io::{IsTerminal, Read};
    use std::os::unix::fs::FileTypeExt;
    const GENERAL_ERROR: u8 = 1;
    if !is_read_probe(argv) || std::io::stdin().is_terminal() {
        return None;
    }
    if active(Mutant::ReadProbesWaitForStdin) {
        let mut input = Vec::new();
        let _ = std::io::stdin().lock().read_to_end(&mut input);
    }
    // `/dev/null` (what a closed stdin usually is) is a character device, a pipe is not.
    let stdin_is_null =
        std::fs::metadata("/dev/stdin").is_ok_and(|m| m.file_type().is_char_device());
    if active(Mutant::ReadProbesNeedInput) && stdin_is_null {
        // Every read of /dev/null is an empty answer: ask again, for ever (the caller's limit
        // ends it).
        loop {
            let mut answer = [0_u8; 1];
            if std::io::stdin().lock().read(&mut answer).is_ok_and(|n| n > 0) {
                return Some(GENERAL_ERROR);
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }
    None
}

/// Faults in what is written: the exit status and stray escape sequences.
fn tamper_output(argv: &[OsString], finished: &mut Finished) {
    let Finished { stdout, stderr, exit } = finished;
    const INCOMPLETE: u8 = 14;
    if active(Mutant::ExitZeroOnIncomplete) && *exit == INCOMPLETE {
        *exit = 0;
    }
    const ARG_ERROR: u8 = 2;
    const SHELL_NOT_FOUND: u8 = 127;
    if active(Mutant::ArgErrorExits127) && *exit == ARG_ERROR {
        *exit = SHELL_NOT_FOUND;
    }
    if active(Mutant::VersionPrintsProgressFirst) && argv.get(1).is_some_and(|a| a == "version") {
        let mut first = b"{\"progress\":{\"done\":1}}\n".to_vec();
        first.append(stdout);
        *stdout = first;
    }
    if active(Mutant::AnsiOnStdout) && argv.get(1).is_some_and(|a| a == "version") {
        stdout.extend_from_slice(b"\x1b[0m");
    }
    if active(Mutant::NoColorIgnored) {
        stderr.push_str("\x1b[2mreftool\x1b[0m\n");
    }
}

/// For [`Mutant::SigtermKillsTheCall`]: whether SIGTERM keeps its default action (no handler).
pub fn sigterm_kills_the_call() -> bool {
    active(Mutant::SigtermKillsTheCall)
}

// ---------------------------------------------------------------------------------------------
// Parsing: options, the output mode, help and argument errors

/// The repeat check of the options (reference: `reference`, the first conflicting repeat).
/// [`Mutant::ConflictingRepeatLastWins`] accepts every repeat; [`Mutant::SameValueRepeatRefused`]
/// refuses the first repeat of either kind.
pub fn repeat_check(tokens: &[Token], reference: Result<(), Failure>) -> Result<(), Failure> {
    if active(Mutant::ConflictingRepeatLastWins) {
        return Ok(());
    }
    if active(Mutant::SameValueRepeatRefused)
        && let Some((name, first, value)) = options::repeats(tokens).first()
        && first == value
    {
        // The first repeat has the same value (a conflicting one the reference refuses already).
        return Err(Failure::arg(
            "CONFLICTING_OPTION",
            format!("--{name} cannot be used multiple times"),
        ));
    }
    reference
}

/// The `--output` values that decide the output mode (reference: every one in argv).
/// [`Mutant::SubcommandDefaultOverridesGlobal`] drops those before the command path;
/// [`Mutant::ConflictingRepeatLastWins`] keeps only the last.
pub fn output_values(mut values: Vec<OutputValue>) -> Vec<OutputValue> {
    if active(Mutant::SubcommandDefaultOverridesGlobal) {
        values.retain(|v| !v.before_path);
    }
    if active(Mutant::ConflictingRepeatLastWins) {
        values = values.split_off(values.len().saturating_sub(1));
    }
    values
}

/// A parse result (reference: `parsed`). [`Mutant::GlobalOptionAfterPathRefused`] refuses
/// `--output` after the first command word; [`Mutant::OptionsStopAtPositional`] drops the
/// optional command-local options given after the first positional.
pub fn parsed_options(
    spec: &CommandSpec,
    tokens: &[Token],
    path_words: usize,
    mut parsed: Parsed,
) -> Result<Parsed, Failure> {
    if active(Mutant::GlobalOptionAfterPathRefused)
        && let Some(first) = options::first_word(tokens)
        && let Some(name) = tokens.iter().find_map(|t| match t {
            Token::Option { name, index, .. } if *index > first && name == "output" => Some(name),
            _ => None,
        })
    {
        return Err(Failure::arg("UNKNOWN_FLAG", format!("unexpected argument '--{name}' found")));
    }
    if active(Mutant::OptionsStopAtPositional)
        && let Some(positional) = options::first_positional(tokens, path_words)
    {
        for token in tokens {
            if let Token::Option { name, index, .. } = token
                && *index > positional
                && spec
                    .flags
                    .iter()
                    .any(|f| &f.name == name && f.owner == FlagOwner::Command && !f.required)
            {
                parsed.args.values.remove(name);
            }
        }
    }
    Ok(parsed)
}

/// The answer to an invocation the parser refused. [`Mutant::UnknownFlagExits1`] exits 1.
pub fn refused_invocation(mut response: Response) -> Response {
    if active(Mutant::UnknownFlagExits1) {
        response.exit = Exit::GENERAL_ERROR;
    }
    response
}

/// Whether help goes to stdout (reference: only to a terminal). [`Mutant::HelpOnStdout`]:
/// always.
pub fn help_on_stdout(stdout_is_terminal: bool) -> bool {
    stdout_is_terminal || active(Mutant::HelpOnStdout)
}

// ---------------------------------------------------------------------------------------------
// The call budget

/// The budget faults, applied to the reference resolution `resolved` of `inputs`.
///
/// The three faults that spoil an input resolve again from the spoiled input, through
/// [`resolve_budget`]; a spoiled input no longer meets its fault's condition, so that second
/// resolution is the reference's.
pub fn budget_override(
    inputs: &BudgetInputs<'_>,
    resolved: Result<ResolvedBudget, BudgetError>,
) -> Result<ResolvedBudget, BudgetError> {
    if active(Mutant::EnvBeatsFlag)
        && inputs.flag.is_some()
        && let Some(Ok(d)) = inputs.env.map(parse_duration)
    {
        return Ok(ResolvedBudget::of_ms(budget::millis(d), BudgetSource::Env));
    }
    let zero_flag = inputs.flag.is_some_and(|f| parse_duration(f).is_ok_and(|d| d.is_zero()));
    if active(Mutant::ZeroBudgetDefersToEnv) && zero_flag {
        return resolve_budget(&BudgetInputs { flag: None, ..*inputs });
    }
    if active(Mutant::BudgetOnTerminal) && inputs.flag.is_none() && inputs.stdin_is_terminal {
        return resolve_budget(&BudgetInputs { stdin_is_terminal: false, ..*inputs });
    }
    if active(Mutant::EnvBudgetIgnored) && inputs.env.is_some() {
        return resolve_budget(&BudgetInputs { env: None, ..*inputs });
    }
    let mut resolved = resolved?;
    if active(Mutant::BudgetMetaOnTerminal) && resolved.source == BudgetSource::Interactive {
        resolved.meta_budget_ms = Some(0);
    }
    // The default when the variable is unset (a malformed one still falls back to 30000 ms).
    if active(Mutant::DefaultBudget20s)
        && resolved.source == BudgetSource::Default
        && resolved.warnings.is_empty()
    {
        resolved = ResolvedBudget::of_ms(20_000, BudgetSource::Default);
    }
    Ok(resolved)
}

/// The `meta.budget_ms` stamped on `response` (reference: `budget_ms`).
/// [`Mutant::NoBudgetMetaOnSuccess`] stamps none on a success.
pub fn stamped_budget_ms(response: &Response, budget_ms: Option<u64>) -> Option<u64> {
    budget_ms.filter(|_| !(active(Mutant::NoBudgetMetaOnSuccess) && response.exit == Exit::SUCCESS))
}

/// For [`Mutant::NoBudgetMetaOnEndings`] and [`Mutant::NoBudgetMetaOnHops`]: takes the
/// stamped `meta.budget_ms` off the responses of `path` they leave without it (reference: none).
pub fn budget_meta_dropped(path: &str, response: &mut Response) {
    let ending = response.exit != Exit::SUCCESS && response.exit != Exit::INCOMPLETE;
    let hop = path == "job.wait" && response.exit == Exit::INCOMPLETE;
    if (ending && active(Mutant::NoBudgetMetaOnEndings))
        || (hop && active(Mutant::NoBudgetMetaOnHops))
    {
        response.meta.remove("budget_ms");
    }
}

/// For [`Mutant::PlainCommandsReadBudgetEnv`]: records `AGENT_CALL_BUDGET_MS` in
/// `meta.budget_ms` of a command without interruption (which has no budget).
pub fn plain_budget_meta(response: &mut Response) {
    if !active(Mutant::PlainCommandsReadBudgetEnv) {
        return;
    }
    let ms = std::env::var(budget::BUDGET_ENV)
        .ok()
        .and_then(|raw| parse_duration(&raw).ok())
        .and_then(|d| u64::try_from(d.as_millis()).ok());
    if let Some(ms) = ms {
        response.meta.insert("budget_ms".into(), json!(ms));
    }
}

/// For [`Mutant::BudgetFlagOnPlainCommand`]: whether the command at `path`, which declares no
/// interruption, takes `--budget` all the same.
pub fn plain_command_takes_budget(path: &str) -> bool {
    active(Mutant::BudgetFlagOnPlainCommand) && path == "migrate"
}

// ---------------------------------------------------------------------------------------------
// Answers: INCOMPLETE, timeouts, signals, streams

/// The argv of a `running` hand-off's `continue_command` (reference: `<tool> job wait <id>`).
/// [`Mutant::RunningContinueWithExtraFlag`] adds `--output json`.
pub fn running_continue(mut argv: Vec<OsString>) -> Vec<OsString> {
    if active(Mutant::RunningContinueWithExtraFlag) {
        argv.extend(["--output".into(), "json".into()]);
    }
    argv
}

/// The argv of a paused job's `continue_command` (reference: `argv`, the original invocation
/// plus a writer's key). [`Mutant::PausedContinueAddsFlag`] adds `--output json` to a reader's;
/// [`Mutant::WriterContinueWithoutKey`] leaves a writer's key out.
pub fn paused_continue(
    original: &[OsString],
    writer_key: Option<&str>,
    mut argv: Vec<OsString>,
) -> Vec<OsString> {
    if active(Mutant::PausedContinueAddsFlag) && writer_key.is_none() {
        argv.extend(["--output".into(), "json".into()]);
    }
    if active(Mutant::WriterContinueWithoutKey) {
        return original.to_vec();
    }
    argv
}

/// `retryable` of an INCOMPLETE answer (reference: the "14" entry's). For
/// [`Mutant::WriterIncompleteRetryable`] a writer's says true; for
/// [`Mutant::ReaderIncompleteNotRetryable`] a reader's says false.
pub fn incomplete_retryable(writes: bool, retryable: bool) -> bool {
    if !writes && active(Mutant::ReaderIncompleteNotRetryable) {
        return false;
    }
    retryable || (writes && active(Mutant::WriterIncompleteRetryable))
}

/// The lines a resumed import passes over unwritten, as (bytes, rows) (reference: none).
/// [`Mutant::ResumeSkipsAChunk`]: one chunk of `chunk` rows, counted as if written.
pub fn skipped_on_resume(
    input: &mut impl std::io::BufRead,
    fresh: bool,
    chunk: usize,
) -> std::io::Result<(u64, u64)> {
    let (mut bytes, mut rows) = (0, 0);
    if fresh || !active(Mutant::ResumeSkipsAChunk) {
        return Ok((bytes, rows));
    }
    let mut line = String::new();
    while rows < chunk as u64 {
        line.clear();
        match input.read_line(&mut line)? {
            0 => break,
            n => bytes += n as u64,
        }
        rows += 1;
    }
    Ok((bytes, rows))
}

/// Milliseconds per unit of a duration (reference: `per_unit_ms`).
/// [`Mutant::SecondsReadAsMillis`]: 1 for `s`.
pub fn unit_ms(unit: &str, per_unit_ms: u64) -> u64 {
    if unit == "s" && active(Mutant::SecondsReadAsMillis) { 1 } else { per_unit_ms }
}

/// The exit of a plain command at its `--timeout` (reference: TIMEOUT 10).
/// [`Mutant::PlainTimeoutIsGeneralError`]: 1.
pub fn plain_timeout_exit(exit: Exit) -> Exit {
    if active(Mutant::PlainTimeoutIsGeneralError) { Exit::GENERAL_ERROR } else { exit }
}

/// The cancellation after SIGINT (reference: `failure`, exit 130 with `data.partial: true`).
/// [`Mutant::SigintExits1`] exits 1; [`Mutant::SigintNotPartial`] says `partial: false`.
pub fn sigint_failure(mut failure: Failure) -> Failure {
    if active(Mutant::SigintExits1) {
        failure.exit = Exit::GENERAL_ERROR;
    }
    if active(Mutant::SigintNotPartial) {
        failure.data = Some(json!({"partial": false}));
    }
    failure
}

/// A stream item's `_seq` (reference: one more than the last). [`Mutant::StreamSeqSkips`]
/// skips 3.
pub fn stream_seq(seq: u64) -> u64 {
    if active(Mutant::StreamSeqSkips) && seq == 3 { seq + 1 } else { seq }
}

/// A successful stream's summary line (reference: `line`). [`Mutant::StreamWithoutSummary`]
/// writes none.
pub fn stream_summary(line: Vec<u8>) -> Vec<u8> {
    if active(Mutant::StreamWithoutSummary) { Vec::new() } else { line }
}

// ---------------------------------------------------------------------------------------------
// The manifest and the writers' safety

/// Applies the active manifest mutant to the manifest `data`.
pub fn mutate_manifest(manifest: &mut Value) {
    fn command<'a>(manifest: &'a mut Value, path: &str) -> Option<&'a mut Value> {
        manifest.get_mut("commands")?.get_mut(path)
    }
    if active(Mutant::ManifestNeitherDetachNorResume)
        && let Some(interruption) =
            command(manifest, "analyze").and_then(|c| c.get_mut("interruption"))
    {
        interruption["detach"] = json!(false);
        interruption["resume"] = json!(false);
    }
    if active(Mutant::ManifestNoIncompleteEntry)
        && let Some(Value::Object(codes)) =
            command(manifest, "analyze").and_then(|c| c.get_mut("exit_codes"))
    {
        codes.remove("14");
    }
    if active(Mutant::ManifestInterruptionWithAsync)
        && let Some(Value::Object(entry)) = command(manifest, "digest")
    {
        entry.insert("async".into(), json!(true));
    }
    if active(Mutant::ManifestWriterWithoutKey)
        && let Some(Value::Object(flags)) =
            command(manifest, "import").and_then(|c| c.get_mut("flags"))
    {
        flags.remove("idempotency-key");
    }
    if active(Mutant::ManifestWriterEntryRetryable)
        && let Some(entry) = command(manifest, "import")
            .and_then(|c| c.get_mut("exit_codes"))
            .and_then(|codes| codes.get_mut("14"))
    {
        entry["retryable"] = json!(true);
        entry["side_effects"] = json!("none");
    }
    if active(Mutant::ManifestWithoutSchemaVersion)
        && let Value::Object(top) = manifest
    {
        top.remove("schema_version");
    }
}

/// The idempotency store's answer for a key (reference: `lookup`).
/// [`Mutant::IdempotencyKeyIgnored`] never finds one.
pub fn idempotency_lookup<T, E>(lookup: Result<Option<T>, E>) -> Result<Option<T>, E> {
    if active(Mutant::IdempotencyKeyIgnored) { lookup.map(|_| None) } else { lookup }
}

/// Whether `drop-table` answers the preview (reference: `dry_run`). [`Mutant::DryRunActs`]
/// drops the table first; [`Mutant::DryRunIgnored`] goes on as a real call.
pub fn previews(dry_run: bool, path: &std::path::Path, table: &str) -> bool {
    if dry_run && active(Mutant::DryRunActs) {
        if let Ok(conn) = rusqlite::Connection::open(path) {
            let _ = conn.execute(&format!("DROP TABLE IF EXISTS \"{table}\""), []);
        }
    }
    dry_run && !active(Mutant::DryRunIgnored)
}

/// Whether `drop-table` was confirmed by a flag (reference: `flagged`).
/// [`Mutant::UnconfirmedDrops`]: always.
pub fn confirmed_by_flag(flagged: bool) -> bool {
    flagged || active(Mutant::UnconfirmedDrops)
}

// ---------------------------------------------------------------------------------------------
// The job runtime: identity, ids, the front process, the worker

/// For [`Mutant::NoAttach`]: the tool version that joins a job's identity, made unique per
/// process for a detaching command so that no two of its invocations are ever identical.
/// (Resume-only commands keep theirs: without it their continuations, the identical
/// invocation, could never find their checkpoint, and the mutant would break far more than
/// the attach rule.)
pub fn identity_version(version: &str, detaches: bool) -> String {
    if !active(Mutant::NoAttach) || !detaches {
        return version.to_owned();
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{version}+{}.{nanos}", std::process::id())
}

/// For [`Mutant::ClockJobIds`]: an id in the job-id format that counts up with the clock.
pub fn clock_job_id(prefix: &str, hex_len: usize) -> Option<String> {
    if !active(Mutant::ClockJobIds) {
        return None;
    }
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    Some(format!("{prefix}{millis:0hex_len$x}"))
}

/// For [`Mutant::StaleCancelMarker`]: the marker file of an invocation identity.
fn stale_marker(state_dir: &std::path::Path, identity: &str) -> std::path::PathBuf {
    let name: String =
        identity.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    state_dir.join(format!("mutant-stale-cancel-{name}"))
}

/// For [`Mutant::StaleCancelMarker`]: a job just born finds (and takes) the marker a cancel
/// of an ended job of its identity left, which then cancels it.
pub fn stale_cancel_on_birth(store: &JobStore, conn: &Connection, instance: &str, view: &JobView) {
    if active(Mutant::StaleCancelMarker)
        && std::fs::remove_file(stale_marker(store.state_dir(), view.record.identity.as_str()))
            .is_ok()
    {
        let _ = store.request_cancel(conn, instance, &view.record.job_id);
    }
}

/// The quoted `continue_command` / `cancel_command` (reference: `quoted`).
/// [`Mutant::UnquotedCommands`] joins the words with spaces, unquoted.
pub fn quoted_command<S: AsRef<std::ffi::OsStr>>(argv: &[S], quoted: String) -> String {
    if !active(Mutant::UnquotedCommands) {
        return quoted;
    }
    let words: Vec<String> =
        argv.iter().map(|a| a.as_ref().to_string_lossy().into_owned()).collect();
    words.join(" ")
}

/// The worker's stdout and stderr (reference: its log). [`Mutant::WorkerHoldsCallerPipes`]:
/// the caller's, inherited.
pub fn worker_stdio(stdout: Stdio, stderr: Stdio) -> (Stdio, Stdio) {
    if active(Mutant::WorkerHoldsCallerPipes) {
        (Stdio::inherit(), Stdio::inherit())
    } else {
        (stdout, stderr)
    }
}

/// For [`Mutant::WorkerInCallerGroup`]: whether the worker stays in the caller's session.
pub fn worker_in_caller_group() -> bool {
    active(Mutant::WorkerInCallerGroup)
}

/// For [`Mutant::DeadWorkerLooksAlive`]: whether this process (a `job` built-in) takes a dead
/// worker for a live one. Other invocations still see it dead, so a resume after a killed
/// front process is not blocked too.
pub fn dead_worker_looks_alive() -> bool {
    active(Mutant::DeadWorkerLooksAlive) && std::env::args_os().nth(1).is_some_and(|a| a == "job")
}

/// How the watchdog ends an active job (reference: `verdict`). For
/// [`Mutant::StallReportedAsTimeout`] a stalled job's `error.code` says TIMEOUT; for
/// [`Mutant::WatchdogOff`] a stalled job is not ended at all.
pub fn watchdog_verdict(mut verdict: Option<JobOutcome>) -> Option<JobOutcome> {
    if active(Mutant::WatchdogOff)
        && verdict.as_ref().is_some_and(|outcome| outcome.status == JobStatus::Stalled)
    {
        return None;
    }
    if active(Mutant::StallReportedAsTimeout)
        && let Some(outcome) = &mut verdict
        && outcome.status == JobStatus::Stalled
        && let Some(failure) = &mut outcome.failure
    {
        failure.code = jobs::TIMEOUT.to_owned();
    }
    verdict
}

/// The lifetime of a job a call creates (reference: `lifetime_ms`, from `--timeout`). For
/// [`Mutant::JobTimeoutSpansOneCall`] it is the command's `max_lifetime_ms` (`default_ms`):
/// `--timeout` reaches no job ([`call_lifetime`] bounds the call itself).
pub fn job_lifetime_ms(lifetime_ms: u64, default_ms: u64) -> u64 {
    if active(Mutant::JobTimeoutSpansOneCall) { default_ms } else { lifetime_ms }
}

/// The stop sources of a resume-only call's work (reference: the job's, its lifetime
/// included). For [`Mutant::JobTimeoutSpansOneCall`] the lifetime deadline is this call's
/// start plus its `--timeout`: each call is bounded on its own.
pub fn call_lifetime<'a>(
    stop: StopControl<'a>,
    invocation: &crate::framework::context::Invocation,
) -> StopControl<'a> {
    if !active(Mutant::JobTimeoutSpansOneCall) {
        return stop;
    }
    stop.with_lifetime_deadline(invocation.timeout.map(|t| invocation.started + t))
}

/// For [`Mutant::CancelMarksOnly`]: whether `job cancel` of a running job ends it `cancelled`
/// at once instead of asking its worker to stop (the worker, never told, runs on).
pub fn cancel_marks_only() -> bool {
    active(Mutant::CancelMarksOnly)
}

/// After a worker recorded its job's end (reference: it exits). For
/// [`Mutant::CancelledWorkerLingers`] a cancelled job's worker stays alive, idle, for ten
/// minutes (a conform run's sweep ends it).
pub fn after_worker_end(outcome: &JobOutcome) {
    if active(Mutant::CancelledWorkerLingers) && outcome.status == JobStatus::Cancelled {
        std::thread::sleep(std::time::Duration::from_secs(600));
    }
}

/// For [`Mutant::CancelKeepsCheckpoint`]: whether a cancelled job keeps its checkpoint.
pub fn cancel_keeps_checkpoint() -> bool {
    active(Mutant::CancelKeepsCheckpoint)
}

// ---------------------------------------------------------------------------------------------
// Progress and checkpoints

/// For [`Mutant::ProgressNotPublished`]: whether progress reports are dropped.
pub fn progress_not_published() -> bool {
    active(Mutant::ProgressNotPublished)
}

/// The floor of a job's progress reporter (reference: the job's published progress). For
/// [`Mutant::ProgressRestartsOnResume`] it is zero.
pub fn progress_floor(published: Progress) -> Progress {
    if active(Mutant::ProgressRestartsOnResume) { Progress::default() } else { published }
}

/// The `done` a resumed run reports (reference: `done`, its own count). For
/// [`Mutant::ProgressRestartsOnResume`] it counts from where the job stood, so it goes
/// backwards.
pub fn reported_done(done: u64, published: u64) -> u64 {
    if active(Mutant::ProgressRestartsOnResume) { done.saturating_sub(published) } else { done }
}

/// For [`Mutant::ProgressRestartsOnResume`]: whether a resume leaves the reporter's floor as
/// it is (no raise to the checkpoint, no offset below it).
pub fn resume_keeps_floor() -> bool {
    active(Mutant::ProgressRestartsOnResume)
}

/// For [`Mutant::ChangedInputKeepsCheckpoint`]: whether a checkpoint of another input is
/// restored all the same.
pub fn changed_input_keeps_checkpoint() -> bool {
    active(Mutant::ChangedInputKeepsCheckpoint)
}

/// The checkpointed state a reader resumes from (reference: `restored`). For
/// [`Mutant::KilledReaderStartsOver`] a new job (the one after a killed run: nothing
/// published yet) starts over.
pub fn reader_resumes_from<T>(job: &JobContext<'_>, restored: Option<T>) -> Option<T> {
    let starts_over = active(Mutant::KilledReaderStartsOver) && job.job().progress.done == 0;
    restored.filter(|_| !starts_over)
}

/// For [`Mutant::LostJobRestartsFromZero`]: an invocation of a detached resume command throws
/// the checkpoint of its identity away before its job is seeded from it, so a new job after a
/// lost one (the only new job that finds one: completion and cancel remove it) starts over.
pub fn new_detached_job_drops_checkpoint(store: &JobStore, view: &JobView) {
    if active(Mutant::LostJobRestartsFromZero) {
        let _ = std::fs::remove_file(
            store.checkpoint_path(&view.record.instance, &view.record.identity),
        );
    }
}

/// For [`Mutant::CompletedCheckpointKept`]: whether completed work keeps its last checkpoint.
pub fn completed_checkpoint_kept() -> bool {
    active(Mutant::CompletedCheckpointKept)
}

// ---------------------------------------------------------------------------------------------
// The `job` built-ins and async commands

/// An async command's job descriptor (reference: `descriptor`).
/// [`Mutant::AsyncDescriptorWithoutTerminal`] drops `terminal`.
pub fn async_descriptor(mut descriptor: Value) -> Value {
    if active(Mutant::AsyncDescriptorWithoutTerminal)
        && let Some(map) = descriptor.as_object_mut()
    {
        map.remove("terminal");
    }
    descriptor
}

/// `job wait`'s answer (reference: `response`). [`Mutant::RelayedResultLosesData`] relays a
/// success with `data` null; [`Mutant::JobWaitStaleProgress`] reports `progress.done` 0;
/// [`Mutant::StaleProgressOnWait`] the progress of the job's hand-off;
/// [`Mutant::ResultDeliveredOnce`] answers a second wait on an ended job with NOT_FOUND (it
/// marks job `id` delivered in the state directory `state`); [`Mutant::FailedJobWaitExits1`]
/// answers a job that failed with its command's own exit with 1.
pub fn job_wait_answer(mut response: Response, state: Option<PathBuf>, id: &JobId) -> Response {
    if active(Mutant::ResultDeliveredOnce)
        && response.exit != Exit::INCOMPLETE
        && let Some(dir) = state.as_ref()
    {
        let marker = dir.join(format!("delivered-{}", id.as_str()));
        if marker.exists() {
            return Response::failure(Failure::new(
                Exit::NOT_FOUND,
                "JOB_NOT_FOUND",
                "no such job (its result was delivered)",
            ));
        }
        let _ = std::fs::write(marker, b"");
    }
    if active(Mutant::RelayedResultLosesData) && response.exit == Exit::SUCCESS {
        response.data = Value::Null;
    }
    response = lost_job_detail(response);
    // The runtime's own endings (1 JOB_LOST / CANCELLED, 10 STALLED / TIMEOUT) stay.
    let runtime_exits = [Exit::SUCCESS, Exit::GENERAL_ERROR, Exit::TIMEOUT, Exit::INCOMPLETE];
    if active(Mutant::FailedJobWaitExits1) && !runtime_exits.contains(&response.exit) {
        response.exit = Exit::GENERAL_ERROR;
    }
    if active(Mutant::JobWaitStaleProgress)
        && response.exit == Exit::INCOMPLETE
        && let Some(done) = response.data.pointer_mut("/progress/done")
    {
        *done = json!(0);
    }
    if active(Mutant::StaleProgressOnWait) && response.exit == Exit::INCOMPLETE {
        stale_wait_progress(&mut response, state, id);
    }
    response
}

/// A `job` built-in's answer (reference: `response`). [`Mutant::LostJobWithoutDetail`] drops
/// a JOB_LOST answer's `error.detail`.
fn lost_job_detail(mut response: Response) -> Response {
    if active(Mutant::LostJobWithoutDetail)
        && let Some(error) = &mut response.error
        && error.code == jobs::JOB_LOST
    {
        error.detail = None;
    }
    response
}

/// For [`Mutant::StaleProgressOnWait`]: the marker holding the progress of job `id`'s
/// hand-off, in the state directory `dir`.
fn hand_off_marker(dir: &std::path::Path, id: &JobId) -> PathBuf {
    dir.join(format!("mutant-hand-off-progress-{}", id.as_str()))
}

/// The hand-off's answer for job `id` (reference: `response`, unchanged).
/// [`Mutant::StaleProgressOnWait`] records its progress in the state directory `state`.
pub fn hand_off_answer(response: Response, state: Option<PathBuf>, id: &JobId) -> Response {
    if active(Mutant::StaleProgressOnWait)
        && let (Some(dir), Some(progress)) = (state, response.data.get("progress"))
    {
        let _ = std::fs::write(hand_off_marker(&dir, id), progress.to_string());
    }
    response
}

/// For [`Mutant::AsyncJobWaitRefused`]: `job wait` on job `id` of an async command is
/// refused with PRECONDITION 4.
pub fn async_job_wait(
    app: &App,
    store: &JobStore,
    conn: &Connection,
    instance: &str,
    id: &JobId,
) -> Result<(), Failure> {
    if !active(Mutant::AsyncJobWaitRefused) {
        return Ok(());
    }
    let Ok(view) = store.get(conn, instance, id) else { return Ok(()) };
    if app.registry().get(&view.record.command_path).is_some_and(|s| s.is_async) {
        return Err(Failure::new(
            Exit::PRECONDITION,
            "NOT_A_DETACHED_JOB",
            "job wait serves detached jobs; ask job status",
        ));
    }
    Ok(())
}

/// For [`Mutant::StaleProgressOnWait`]: `job wait`'s INCOMPLETE for job `id` carries the
/// progress its hand-off answered, recorded in the state directory `state`.
fn stale_wait_progress(response: &mut Response, state: Option<PathBuf>, id: &JobId) {
    let (Some(dir), Some(progress)) = (state, response.data.get_mut("progress")) else { return };
    let marker = hand_off_marker(&dir, id);
    if let Some(first) =
        std::fs::read(marker).ok().and_then(|b| serde_json::from_slice::<Value>(&b).ok())
    {
        *progress = first;
    }
}

/// For [`Mutant::IdentityIgnoresCwd`]: the working directory the identity is keyed by
/// (reference: `cwd`; the mutant: nothing).
pub fn identity_cwd(cwd: &[u8]) -> &[u8] {
    if active(Mutant::IdentityIgnoresCwd) { b"" } else { cwd }
}

/// For [`Mutant::IdentityIgnoresStdin`]: the stdin digest the identity is keyed by
/// (reference: `digest`; the mutant: none).
pub fn identity_stdin(digest: Option<&str>) -> Option<&str> {
    if active(Mutant::IdentityIgnoresStdin) { None } else { digest }
}

/// For [`Mutant::IdentityIgnoresInstance`]: the instance the identity is keyed by
/// (reference: `instance`; the mutant: nothing).
pub fn identity_instance(instance: &[u8]) -> &[u8] {
    if active(Mutant::IdentityIgnoresInstance) { b"" } else { instance }
}

/// The instance whose running job of identity `key` an invocation under `instance` attaches
/// to (reference: `instance`). [`Mutant::IdentityIgnoresInstance`]: the instance of any
/// running or paused job of that identity.
pub fn attach_instance(conn: &Connection, instance: &str, key: &IdentityKey) -> String {
    if !active(Mutant::IdentityIgnoresInstance) {
        return instance.to_owned();
    }
    conn.query_row(
        "SELECT instance FROM reftool_jobs WHERE identity = ?1
           AND status IN ('running', 'paused') ORDER BY created_at_ms LIMIT 1",
        [key.as_str()],
        |r| r.get(0),
    )
    .unwrap_or_else(|_| instance.to_owned())
}

/// `job wait`'s deadline (reference: `deadline`, the budget's or `--timeout`'s); with
/// [`Mutant::JobWaitBlocks`] there is none, and the wait lasts until the job ends.
pub fn job_wait_deadline(deadline: Option<std::time::Instant>) -> Option<std::time::Instant> {
    if active(Mutant::JobWaitBlocks) { None } else { deadline }
}

/// For [`Mutant::JobStatusWaits`]: whether `job status` waits like `job wait`.
pub fn job_status_waits() -> bool {
    active(Mutant::JobStatusWaits)
}

/// `job status`'s answer for `view` (reference: `response`). [`Mutant::AsyncStatusExits3`]
/// exits 3 for a running async job; [`Mutant::EndedJobStatusExits3`] for any job that
/// succeeded; [`Mutant::LostJobStatusRunning`] answers a lost job with 14 INCOMPLETE;
/// [`Mutant::FailedJobStatusExits0`] answers a failed one with exit 0.
pub fn job_status_answer(app: &App, view: &JobView, mut response: Response) -> Response {
    if active(Mutant::LostJobStatusRunning) && view.status == JobStatus::Lost {
        response = Response::failure(Failure::new(
            Exit::INCOMPLETE,
            "INCOMPLETE",
            "the job is still running",
        ));
    }
    if active(Mutant::FailedJobStatusExits0) && view.status == JobStatus::Failed {
        response.exit = Exit::SUCCESS;
    }
    response = lost_job_detail(response);
    if active(Mutant::EndedJobStatusExits3) && response.exit == Exit::SUCCESS {
        response.exit = Exit::PARTIAL_FAILURE;
    }
    if active(Mutant::AsyncStatusExits3)
        && response.exit == Exit::INCOMPLETE
        && app.registry().get(&view.record.command_path).is_some_and(|s| s.is_async)
    {
        response.exit = Exit::PARTIAL_FAILURE;
    }
    response
}

/// The instance `job cancel` looks for job `id` in (reference: `instance`, the caller's).
/// [`Mutant::ForeignInstanceCancel`]: whichever instance owns it.
pub fn cancel_instance(conn: &Connection, id: &JobId, instance: &str) -> String {
    let foreign: Option<String> = active(Mutant::ForeignInstanceCancel)
        .then(|| {
            conn.query_row(
                "SELECT instance FROM reftool_jobs WHERE job_id = ?1",
                [id.as_str()],
                |r| r.get(0),
            )
            .ok()
        })
        .flatten();
    foreign.unwrap_or_else(|| instance.to_owned())
}

/// For [`Mutant::CancelIgnored`]: whether the job store drops a cancel request (and reports
/// the job cancelled).
pub fn cancel_ignored() -> bool {
    active(Mutant::CancelIgnored)
}

/// After `job cancel` asked job `id` to stop and was refused because it had ended
/// (`requested`): [`Mutant::StaleCancelMarker`] leaves a marker for the next job of its
/// identity ([`stale_cancel_on_birth`]); [`Mutant::RejectedCancelStillFires`] cancels the
/// running job of the same identity.
pub fn after_cancel_request(
    store: &JobStore,
    conn: &Connection,
    instance: &str,
    id: &JobId,
    requested: &Result<CancelOutcome, JobError>,
) {
    let faulty = active(Mutant::StaleCancelMarker) || active(Mutant::RejectedCancelStillFires);
    if !faulty || !matches!(requested, Err(JobError::JobEnded { .. })) {
        return;
    }
    let Ok(view) = store.get(conn, instance, id) else { return };
    let identity = view.record.identity.as_str();
    if active(Mutant::StaleCancelMarker) {
        let _ = std::fs::write(stale_marker(store.state_dir(), identity), b"cancel");
    }
    if active(Mutant::RejectedCancelStillFires)
        && let Some(other) = running_job_of(conn, instance, identity)
    {
        let _ = store.request_cancel(conn, instance, &other);
    }
}

/// The active job of an invocation identity, if any.
fn running_job_of(conn: &Connection, instance: &str, identity: &str) -> Option<JobId> {
    let id: String = conn
        .query_row(
            "SELECT job_id FROM reftool_jobs WHERE instance = ?1 AND identity = ?2
             AND status IN ('running', 'paused')",
            [instance, identity],
            |r| r.get(0),
        )
        .ok()?;
    JobId::parse(&id).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        let mut names: Vec<&str> = Mutant::ALL.iter().map(|m| m.name()).collect();
        for m in Mutant::ALL {
            assert_eq!(Mutant::from_name(m.name()), Some(*m));
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Mutant::ALL.len());
        assert_eq!(Mutant::from_name("no-such-mutant"), None);
    }

    #[test]
    fn without_the_variable_nothing_is_active() {
        // The test process never sets REFTOOL_MUTANT.
        if std::env::var_os(MUTANT_ENV).is_none() {
            assert!(Mutant::ALL.iter().all(|m| !active(*m)));
        }
    }
}
