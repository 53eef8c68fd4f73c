//! The catalogue of faults: one rule of the contract broken per fault.

/// The environment variable that selects the fault, by its [`Fault::name`]; inherited by the
/// detached workers the faulty binary starts, so a job's worker is faulty too.
pub const FAULT_ENV: &str = "REFTOOL_FAULT";

macro_rules! faults {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, )*) => {
        /// One fault; each variant says the rule it breaks and where it acts.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Fault {
            $( $(#[$doc])* $variant, )*
        }

        impl Fault {
            /// Every fault, in catalogue order.
            pub const ALL: &'static [Fault] = &[$( Fault::$variant, )*];

            /// The name [`FAULT_ENV`] takes.
            pub const fn name(self) -> &'static str {
                match self {
                    $( Fault::$variant => $name, )*
                }
            }
        }
    };
}

faults! {
    /// An INCOMPLETE answer exits 0 while its envelope still says 14 (exit 14 where due).
    ///
    /// Acts: exit status out.
    ExitZeroOnIncomplete = "exit-zero-on-incomplete",
    /// A valid `AGENT_CALL_BUDGET_MS` wins over `--budget` (the flag takes precedence).
    ///
    /// Acts: argv in: `--budget` takes the variable's value.
    EnvBeatsFlag = "env-beats-flag",
    /// The default budget is 20000 ms (it is 30000).
    ///
    /// Acts: argv in: `--budget 20000` when neither flag nor variable gives one.
    DefaultBudget20s = "default-budget-20s",
    /// `AGENT_CALL_BUDGET_MS` is never read (it bounds a call without `--budget`).
    ///
    /// Acts: argv in: `--budget 30000` when only the variable gives one.
    EnvBudgetIgnored = "env-budget-ignored",
    /// `--budget 0` counts as no flag, so the variable applies (0 switches the budget off).
    ///
    /// Acts: argv in: a zero `--budget` is dropped.
    ZeroBudgetDefersToEnv = "zero-budget-defers-to-env",
    /// On a terminal without `--budget` the variable still applies (no budget there).
    ///
    /// Acts: argv in: on a terminal, `--budget` of the variable (or the default).
    BudgetOnTerminal = "budget-on-terminal",
    /// On a terminal without `--budget`, `meta.budget_ms` says 0 (it must be absent).
    ///
    /// Acts: envelope out.
    BudgetMetaOnTerminal = "budget-meta-on-terminal",
    /// Successful responses of interruptible commands lack `meta.budget_ms` (every response
    /// carries it).
    ///
    /// Acts: envelope out.
    NoBudgetMetaOnSuccess = "no-budget-meta-on-success",
    /// The error endings of interruptible commands and `job wait` (STALLED, JOB_LOST,
    /// CANCELLED, TIMEOUT, any exit but 0 and 14) lack `meta.budget_ms` (every response of
    /// the command carries it; a relayed job ending may legally leave it out, so the
    /// command's own TIMEOUT is where it shows).
    ///
    /// Acts: envelope out.
    NoBudgetMetaOnEndings = "no-budget-meta-on-endings",
    /// `job wait`'s INCOMPLETE answers, the middle hops of a continue loop, lack
    /// `meta.budget_ms` (the hand-off and the final answer keep it).
    ///
    /// Acts: envelope out.
    NoBudgetMetaOnHops = "no-budget-meta-on-hops",
    /// `migrate`, which declares no interruption, takes `--budget` (only interruptible
    /// commands have one).
    ///
    /// Acts: envelope out (the manifest) and argv in (`migrate`'s `--budget` dropped).
    BudgetFlagOnPlainCommand = "budget-flag-on-plain-command",
    /// Commands without interruption record `AGENT_CALL_BUDGET_MS` in `meta.budget_ms` (they
    /// ignore it).
    ///
    /// Acts: envelope out.
    PlainCommandsReadBudgetEnv = "plain-commands-read-budget-env",
    /// A paused writer's `continue_command` lacks the `--idempotency-key` it must carry.
    ///
    /// Acts: envelope out.
    WriterContinueWithoutKey = "writer-continue-without-key",
    /// A writer's INCOMPLETE says `retryable: true` (its "14" entry says false).
    ///
    /// Acts: envelope out.
    WriterIncompleteRetryable = "writer-incomplete-retryable",
    /// A read-only command's INCOMPLETE says `retryable: false` (its "14" entry says true).
    ///
    /// Acts: envelope out.
    ReaderIncompleteNotRetryable = "reader-incomplete-not-retryable",
    /// A resumed run counts `progress.done` from where it resumed, so it goes backwards.
    ///
    /// Acts: the progress sink.
    ProgressRestartsOnResume = "progress-restarts-on-resume",
    /// The import's checkpoint, committed with a chunk's rows, still points before them: a
    /// resume (after a kill or a pause) writes those rows twice.
    ///
    /// Acts: the command: `import` rewinds its checkpoint by a chunk before it resumes.
    CheckpointLagsItsRows = "checkpoint-lags-its-rows",
    /// `job status` of a job that succeeded exits 3, not 0.
    ///
    /// Acts: envelope out.
    EndedJobStatusExits3 = "ended-job-status-exits-3",
    /// A duration's `s` unit is read as milliseconds: `--budget 1s` is a budget of 1 ms.
    ///
    /// Acts: argv in: `Ns` becomes `N` (and a variable of seconds becomes a `--budget` of
    /// milliseconds).
    SecondsReadAsMillis = "seconds-read-as-millis",
    /// `job wait` forgets a job once it has delivered its result: a second wait on the ended
    /// job answers NOT_FOUND.
    ///
    /// Acts: around `job wait`: a marker in the state directory.
    ResultDeliveredOnce = "result-delivered-once",
    /// The mirror fault: a resumed import goes on one chunk past its checkpoint, so that
    /// chunk's rows are never written, while its count and response are those of a correct
    /// run. Only the state the work leaves shows it (the role's `verify`).
    ///
    /// Acts: the command: `import` advances its checkpoint by a chunk before it resumes.
    ResumeSkipsAChunk = "resume-skips-a-chunk",
    /// The worker inherits the caller's stdout and stderr, so the caller's pipes stay open
    /// after the hand-off.
    ///
    /// Acts: the worker launcher.
    WorkerHoldsCallerPipes = "worker-holds-caller-pipes",
    /// The worker stays in the caller's session and process group, so killing the caller's
    /// group kills the work.
    ///
    /// Acts: the worker's process set-up (no `setsid`).
    WorkerInCallerGroup = "worker-in-caller-group",
    /// A dead worker counts as alive to the `job` built-ins: `job wait` waits out its budget
    /// instead of answering JOB_LOST.
    ///
    /// Acts: around the `job` built-ins: they take over a dead worker's job.
    DeadWorkerLooksAlive = "dead-worker-looks-alive",
    /// A cancel of an ended job leaves a marker that cancels the next identical invocation.
    ///
    /// Acts: around `job cancel` (the marker) and a front process (which cancels the job the marker
    /// names).
    StaleCancelMarker = "stale-cancel-marker",
    /// `job cancel` finds a job in any instance (jobs are owned by their instance).
    ///
    /// Acts: argv in: `job cancel` gets the instance that owns the job.
    ForeignInstanceCancel = "foreign-instance-cancel",
    /// Job ids count up with the clock, in milliseconds (they must carry 64 random bits).
    ///
    /// Acts: the job naming.
    ClockJobIds = "clock-job-ids",
    /// `continue_command` and `cancel_command` join the argv with spaces, unquoted.
    ///
    /// Acts: envelope out.
    UnquotedCommands = "unquoted-commands",
    /// The manifest declares an interruption with `detach` and `resume` both false.
    ///
    /// Acts: envelope out (the manifest).
    ManifestNeitherDetachNorResume = "manifest-neither-detach-nor-resume",
    /// The manifest drops the "14" entry of an interruptible command.
    ///
    /// Acts: envelope out (the manifest).
    ManifestNoIncompleteEntry = "manifest-no-incomplete-entry",
    /// The manifest declares an interruptible command `async: true` too.
    ///
    /// Acts: envelope out (the manifest).
    ManifestInterruptionWithAsync = "manifest-interruption-with-async",
    /// The manifest's resumable writer has no `idempotency-key` flag.
    ///
    /// Acts: envelope out (the manifest).
    ManifestWriterWithoutKey = "manifest-writer-without-key",
    /// The writer's "14" entry is `retryable: true, side_effects: "none"` (read-only shape).
    ///
    /// Acts: envelope out (the manifest).
    ManifestWriterEntryRetryable = "manifest-writer-entry-retryable",
    /// The manifest lacks `schema_version`, so it does not validate.
    ///
    /// Acts: envelope out (the manifest).
    ManifestWithoutSchemaVersion = "manifest-without-schema-version",
    /// A repeat with the same idempotency key does the work again (it must be a no-op).
    ///
    /// Acts: around a writer's call: its stored answer is deleted first.
    IdempotencyKeyIgnored = "idempotency-key-ignored",
    /// An async command's job descriptor lacks `terminal`.
    ///
    /// Acts: envelope out.
    AsyncDescriptorWithoutTerminal = "async-descriptor-without-terminal",
    /// `job status` of a running async job exits 3 (it exits 14).
    ///
    /// Acts: envelope out.
    AsyncStatusExits3 = "async-status-exits-3",
    /// `job wait` on a running async job exits 3 once its budget runs out (it answers 14, as
    /// `job status` does).
    ///
    /// Acts: envelope out.
    AsyncWaitExits3 = "async-wait-exits-3",
    /// `job cancel` answers 0 but leaves the job running.
    ///
    /// Acts: around `job cancel`: it answers without cancelling.
    CancelIgnored = "cancel-ignored",
    /// Every invocation starts its own job (the identical invocation attaches).
    ///
    /// Acts: the job naming.
    NoAttach = "no-attach",
    /// `job status` waits like `job wait` (it never waits).
    ///
    /// Acts: argv in: `job status` becomes `job wait --budget 0`.
    JobStatusWaits = "job-status-waits",
    /// `job wait` ignores its budget and holds its caller until the job ends (it holds it at
    /// most up to the budget).
    ///
    /// Acts: argv in (`job wait` gets `--budget 0` and no `--timeout`) and envelope out (its
    /// `meta.budget_ms` is the budget it was given).
    JobWaitBlocks = "job-wait-blocks",
    /// No SIGTERM handler: the signal kills the front process instead of a hand-off.
    ///
    /// Acts: signal handlers: none is installed.
    SigtermKillsTheCall = "sigterm-kills-the-call",
    /// A stalled job ends with `error.code` TIMEOUT (it is STALLED).
    ///
    /// Acts: envelope out.
    StallReportedAsTimeout = "stall-reported-as-timeout",
    /// The idle watchdog never ends a stalled job: it runs on, silent (it ends with STALLED
    /// after `idle_timeout_ms` without progress).
    ///
    /// Acts: the progress sink and the worker's process: the worker republishes its progress
    /// as just changed every 100 ms, so its job never looks idle.
    WatchdogOff = "watchdog-off",
    /// A `running` hand-off's `continue_command` is `job wait <id> --output json` (it is
    /// exactly `<tool> job wait <id>`).
    ///
    /// Acts: envelope out.
    RunningContinueWithExtraFlag = "running-continue-with-extra-flag",
    /// A paused reader's `continue_command` adds `--output json` (it is the invocation
    /// verbatim).
    ///
    /// Acts: envelope out.
    PausedContinueAddsFlag = "paused-continue-adds-flag",
    /// `job wait` relays a finished job's response with `data` null (it is the job's response).
    ///
    /// Acts: envelope out.
    RelayedResultLosesData = "relayed-result-loses-data",
    /// A command without interruption at its `--timeout` exits 1 GENERAL_ERROR (TIMEOUT 10).
    ///
    /// Acts: envelope out.
    PlainTimeoutIsGeneralError = "plain-timeout-is-general-error",
    /// The responses of a command without interruption leave out `meta.timeout_ms` (the
    /// wall-clock limit of each execution is recorded there).
    ///
    /// Acts: envelope out.
    NoTimeoutMeta = "no-timeout-meta",
    /// An unknown flag or command exits 1 (ARG_ERROR 2).
    ///
    /// Acts: envelope out.
    UnknownFlagExits1 = "unknown-flag-exits-1",
    /// `version` ends stdout with an ANSI reset though stdout is no terminal.
    ///
    /// Acts: bytes out.
    AnsiOnStdout = "ansi-on-stdout",
    /// Every command colours stderr, NO_COLOR or not.
    ///
    /// Acts: bytes out (stderr).
    NoColorIgnored = "no-color-ignored",
    /// `version` reads stdin to its end when it is not a terminal, so an open silent pipe
    /// hangs it.
    ///
    /// Acts: stdin in.
    ReadProbesWaitForStdin = "read-probes-wait-for-stdin",
    /// `job cancel` leaves the job's checkpoint, so the identical invocation resumes the
    /// cancelled work (it starts from the beginning).
    ///
    /// Acts: around `job cancel`: the checkpoint is put back.
    CancelKeepsCheckpoint = "cancel-keeps-checkpoint",
    /// A checkpoint whose input fingerprint no longer matches is restored anyway (a changed
    /// input discards it).
    ///
    /// Acts: the command: `digest` re-keys its checkpoint to the input it finds.
    ChangedInputKeepsCheckpoint = "changed-input-keeps-checkpoint",
    /// `digest` keeps its last checkpoint after completing, so the identical invocation
    /// finishes at once from it (completed work starts fresh).
    ///
    /// Acts: the command: `digest` saves a checkpoint at its end.
    CompletedCheckpointKept = "completed-checkpoint-kept",
    /// `--help` goes to stdout even when stdout is not a terminal.
    ///
    /// Acts: the answer out.
    HelpOnStdout = "help-on-stdout",
    /// `job wait`'s INCOMPLETE reports `progress.done` 0 (fresh progress, never behind).
    ///
    /// Acts: envelope out.
    JobWaitStaleProgress = "job-wait-stale-progress",
    /// Progress is never reported: `progress.done` stays 0 while the work runs.
    ///
    /// Acts: the progress sink.
    ProgressNotPublished = "progress-not-published",
    /// A cancel of an ended job (still answered 4 JOB_ENDED) cancels the running job of the
    /// same invocation.
    ///
    /// Acts: around `job cancel`.
    RejectedCancelStillFires = "rejected-cancel-still-fires",
    /// `drop-table --dry-run` ignores the flag and goes on as a real call (a dry run previews).
    ///
    /// Acts: argv in.
    DryRunIgnored = "dry-run-ignored",
    /// `drop-table --dry-run` drops the table, then answers the preview (a dry run changes
    /// nothing).
    ///
    /// Acts: around `drop-table --dry-run`: the table is dropped after the preview.
    DryRunActs = "dry-run-acts",
    /// A reader's new job (after a killed run) ignores the checkpoint it finds and starts
    /// over (the identical invocation resumes from the last checkpoint).
    ///
    /// Acts: the command: a new `digest` job removes its checkpoint.
    KilledReaderStartsOver = "killed-reader-starts-over",
    /// `drop-table` drops without confirmation (an unconfirmed destructive call refuses).
    ///
    /// Acts: argv in.
    UnconfirmedDrops = "unconfirmed-drops",
    /// An ARG_ERROR exits 127, a shell's code, instead of 2 (probes exit with standard codes).
    ///
    /// Acts: exit status out.
    ArgErrorExits127 = "arg-error-exits-127",
    /// `version` prints a progress object before its envelope (one JSON document on stdout).
    ///
    /// Acts: bytes out.
    VersionPrintsProgressFirst = "version-prints-progress-first",
    /// `version` waits for an answer on stdin and asks again at every end of input, so with
    /// stdin `/dev/null` it never ends (a read command needs no input).
    ///
    /// Acts: stdin in.
    ReadProbesNeedInput = "read-probes-need-input",
    /// The global `--output` after the command path is refused as an unknown flag (global
    /// options mean the same anywhere).
    ///
    /// Acts: argv in: refused before it runs.
    GlobalOptionAfterPathRefused = "global-option-after-path-refused",
    /// A global option given before the command path is replaced by the command's default
    /// (its value survives the command).
    ///
    /// Acts: argv in.
    SubcommandDefaultOverridesGlobal = "subcommand-default-overrides-global",
    /// A scalar option repeated with different values: the last one wins (it is ARG_ERROR 2).
    ///
    /// Acts: argv in: all but the last value dropped.
    ConflictingRepeatLastWins = "conflicting-repeat-last-wins",
    /// A scalar option repeated with the same value is refused (it is accepted).
    ///
    /// Acts: argv in: refused before it runs.
    SameValueRepeatRefused = "same-value-repeat-refused",
    /// An optional command-local option after the first positional is ignored, so its default
    /// applies (it takes effect).
    ///
    /// Acts: argv in.
    OptionsStopAtPositional = "options-stop-at-positional",
    /// A stream ends without its summary line (it ends with exactly one terminal line).
    ///
    /// Acts: bytes out.
    StreamWithoutSummary = "stream-without-summary",
    /// A stream's `_seq` skips from 2 to 4 (it counts 1, 2, 3, ...).
    ///
    /// Acts: bytes out: stdout passes through a filter.
    StreamSeqSkips = "stream-seq-skips",
    /// SIGINT during a stream exits 1 (it is 130).
    ///
    /// Acts: envelope out.
    SigintExits1 = "sigint-exits-1",
    /// SIGINT during a stream says `data.partial: false` (the stream stopped part-way).
    ///
    /// Acts: envelope out.
    SigintNotPartial = "sigint-not-partial",
    /// A second SIGINT while a cancelled call cleans up is only recorded, like the first: the
    /// call ends when its cleanup does (it ends at once, exit 130).
    ///
    /// Acts: the signal handlers: SIGINT and SIGHUP are heard without the exit a second one
    /// arms ([`crate::parts`]).
    SecondSigintIgnored = "second-sigint-ignored",
    /// The manifest's commands lack the "130" exit-code entry (REQ-F-069 adds it to every
    /// command).
    ///
    /// Acts: envelope out (the manifest).
    ManifestWithout130 = "manifest-without-130",
    /// `--timeout` bounds only the call it is given to, never the job: the job lives
    /// `max_lifetime_ms`, so work continued past `--timeout` runs on to its end (it bounds the
    /// whole work across continuations).
    ///
    /// Acts: argv in: an interruptible command's `--timeout` is dropped.
    JobTimeoutSpansOneCall = "job-timeout-spans-one-call",
    /// Without `--timeout`, a detaching command's work is not bounded by the
    /// `max_lifetime_ms` it declares: it runs to its end however long that takes (without
    /// `--timeout`, the lifetime bounds the whole work).
    ///
    /// Acts: argv in: a detaching command without `--timeout` runs as with `--timeout 0`.
    LifetimeIgnored = "lifetime-ignored",
    /// With `--budget 0` an interruptible command drops its `--timeout` and runs to the end of
    /// the work (`--budget 0` returns when the work ends or `--timeout` fires).
    ///
    /// Acts: argv in: `--timeout` is dropped beside a zero `--budget`.
    ZeroBudgetIgnoresTimeout = "zero-budget-ignores-timeout",
    /// `job cancel` of a running job records it `cancelled` and exits 0, but the worker is
    /// never told: it runs on and finishes its effect (the job stops at its next safe point).
    ///
    /// Acts: around `job cancel`: it ends the job in the store itself.
    CancelMarksOnly = "cancel-marks-only",
    /// A cancelled job's worker stops the work and records the end, but its process lives on
    /// (no process of a stopped job is left).
    ///
    /// Acts: the worker's process: it sleeps after a cancelled end.
    CancelledWorkerLingers = "cancelled-worker-lingers",
    /// `analyze` ignores the checkpoint a lost job left, so the identical invocation after
    /// JOB_LOST starts over from zero (it continues from the last checkpoint).
    ///
    /// Acts: the command: `analyze` declares no checkpoint fingerprint (the front seeds no
    /// progress) and its worker removes the checkpoint.
    LostJobRestartsFromZero = "lost-job-restarts-from-zero",
    /// `job status` of a lost job answers 14 as if it still ran (it is 1 JOB_LOST, like
    /// `job wait`).
    ///
    /// Acts: envelope out.
    LostJobStatusRunning = "lost-job-status-running",
    /// `job wait` on a job that failed with its command's own exit answers 1 instead (it
    /// relays the command's own exit code).
    ///
    /// Acts: envelope out.
    FailedJobWaitExits1 = "failed-job-wait-exits-1",
    /// `job status` of a job that failed exits 0, as if it had succeeded.
    ///
    /// Acts: envelope out.
    FailedJobStatusExits0 = "failed-job-status-exits-0",
    /// `job wait` and `job status` of a lost job leave out `error.detail` (it holds the tail
    /// of the job's log).
    ///
    /// Acts: envelope out.
    LostJobWithoutDetail = "lost-job-without-detail",
    /// `job wait` refuses a job of an async command (one runtime serves every background
    /// job: it waits for it like for a detached one).
    ///
    /// Acts: around `job wait`: refused before it runs.
    AsyncJobWaitRefused = "async-job-wait-refused",
    /// `job wait` answers, while the job runs, the progress of the job's hand-off, never
    /// refreshed (it answers fresh progress).
    ///
    /// Acts: around the hand-off and `job wait`: a marker in the state directory.
    StaleProgressOnWait = "stale-progress-on-wait",
    /// A job's progress is published for its first [`crate::parts::FREEZE_AFTER_MS`] ms only:
    /// the reports after it go nowhere while the work goes on, so `job status` shows one `done`
    /// for the rest of a long work (a report at least every 10 s of work). Work shorter than
    /// that is untouched.
    ///
    /// Acts: the progress sink.
    ProgressFreezesAfterThreeSeconds = "progress-freezes-after-three-seconds",
    /// Once a job has run [`crate::parts::FREEZE_AFTER_MS`] ms, `job wait` answers, while it
    /// runs, the progress the first wait after that moment saw, never refreshed, while `job status`
    /// follows the job (fresh progress on `job wait`). A job shorter than that is untouched.
    ///
    /// Acts: envelope out of `job wait`: a marker in the state directory.
    JobWaitFreezesAfterThreeSeconds = "job-wait-freezes-after-three-seconds",
    /// The invocation identity leaves out the working directory, so the same argv from
    /// another directory attaches to this directory's job (jobs are keyed by it too).
    ///
    /// Acts: the job naming.
    IdentityIgnoresCwd = "identity-ignores-cwd",
    /// The invocation identity leaves out the stdin digest, so the same argv over other stdin
    /// bytes attaches to the job of the first bytes.
    ///
    /// Acts: the job naming.
    IdentityIgnoresStdin = "identity-ignores-stdin",
    /// The invocation identity leaves out the instance and an invocation attaches to a
    /// running job of any instance (jobs are owned by their instance).
    ///
    /// Acts: argv in: an interruptible command runs under the default instance.
    IdentityIgnoresInstance = "identity-ignores-instance",
    /// The invocation identity leaves out the idempotency key, so the same invocation with
    /// another key attaches to the running job of the first key (jobs are keyed by it too).
    ///
    /// Acts: the job naming.
    IdentityIgnoresKey = "identity-ignores-key",
    /// Narrow window. A chunk's rows and its checkpoint are committed in two transactions,
    /// the rows first, [`crate::narrow::WINDOW`] apart; the resume trusts its own claim's
    /// checkpoint whatever rows of that claim the table holds past it (reftool's checkpoint
    /// names the table's fill and would discard it). A kill between the two commits makes
    /// the resume write the chunk again (the table's `_line` key refuses it: the import fails
    /// where it should have finished).
    ///
    /// Acts: the checkpoint commit (two transactions) and the command: `import` re-keys the
    /// checkpoint it finds to the table's fill before it resumes.
    TwoTransactionCommit = "two-transaction-commit",
    /// Narrow window. The import's checkpoint moves on before the rows it claims are
    /// committed: it is written to a file of its own, [`crate::narrow::WINDOW`] before the
    /// transaction of the rows commits, and a resume takes it from there. A kill between the
    /// two loses the chunk: the import answers every row imported while the table lacks them.
    ///
    /// Acts: the checkpoint commit (the checkpoint file first) and the command: `import`
    /// resumes from that file when it is there, re-keyed to the table's fill.
    CheckpointFirst = "checkpoint-first",
    /// Narrow window. A file checkpoint is written in two steps: first the new offset with the
    /// old totals (`analyze`'s counts and sums, `digest`'s hash state), then, after
    /// [`crate::narrow::WINDOW`], the new totals. A kill between the two resumes from the new
    /// offset with the totals of the checkpoint before: the final answer is wrong.
    ///
    /// Acts: the checkpoint commit (a file checkpoint in two writes).
    StaleCheckpointTotals = "stale-checkpoint-totals",
    /// Narrow window. The identity lookup and the job creation hold no lock between them: an
    /// invocation that finds no active job of its identity waits [`crate::narrow::WINDOW`]
    /// (the creation's own writes) and creates one even if another invocation created it
    /// meanwhile. K identical invocations at once start two jobs and do the work twice when
    /// they arrive within the window of each other.
    ///
    /// Acts: the job naming: a lookup outside the store's transaction, and a key of its own
    /// for the job that the store's unique index would refuse.
    IdentityCheckThenCreate = "identity-check-then-create",
}

impl Fault {
    /// The fault with this name.
    pub fn from_name(name: &str) -> Option<Fault> {
        Fault::ALL.iter().copied().find(|f| f.name() == name)
    }

    /// Whether the fault shows only when an interruption lands in a window of milliseconds
    /// (a kill between two commits, two invocations within one lookup): no single scenario
    /// catches it reliably, so the mutant matrix holds no row for it; `conform campaign`,
    /// which draws many interruptions, is what must catch it (issue 26).
    pub const fn is_narrow_window(self) -> bool {
        matches!(
            self,
            Fault::TwoTransactionCommit
                | Fault::CheckpointFirst
                | Fault::StaleCheckpointTotals
                | Fault::IdentityCheckThenCreate
        )
    }

    /// The fault [`FAULT_ENV`] names in this process (none when unset or unknown).
    pub fn from_env() -> Option<Fault> {
        std::env::var(FAULT_ENV).ok().and_then(|name| Fault::from_name(name.trim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        let mut names: Vec<&str> = Fault::ALL.iter().map(|f| f.name()).collect();
        for f in Fault::ALL {
            assert_eq!(Fault::from_name(f.name()), Some(*f));
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Fault::ALL.len());
        assert_eq!(Fault::from_name("no-such-fault"), None);
    }
}
