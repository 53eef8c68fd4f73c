//! The mutant matrix: proof that every scenario of conform's catalogue can fail.
//!
//! A check that cannot fail is a defect (docs/design.md, "Sensitivity"). Each row of the matrix is a
//! test of its own, named after the row, that runs the real `conform` binary (`--format json`)
//! against one tool:
//!
//! - `reftool::correct`: the reference tool, which must pass every scenario (skips allowed);
//! - `reftool::<fault>`: the faulty reftool (`reftool-faulty`, built by the crate `faults/`)
//!   with each of its faults (one broken rule each, selected by `REFTOOL_FAULT` in a copy of
//!   `reference-tool/conform.toml`'s `[tool.env]`), e.g. `reftool::env_beats_flag` for
//!   `REFTOOL_FAULT=env-beats-flag`;
//! - `pyagent::correct` and `pyagent::<fault>`: pyagent, the independent Python implementation,
//!   correct and with each of its faults (`PYAGENT_FAULT`,
//!   `tests/fixtures/tools/pyagent/README.md`).
//!
//! A fault's row runs the scenarios this file names as its targets and asserts that they fail
//! (a pyagent target its profile skips is let through, a reftool one is not: reftool's profile
//! fills every role); a correct tool's row runs the whole catalogue and asserts that nothing
//! fails (pyagent: exactly [`PYAGENT_KNOWN_FAILURES`]). The rows come from `Fault::ALL` and
//! [`PYAGENT_FAULTS`], so this target has its own test harness (libtest-mimic,
//! `harness = false`) that lists one test per row; a new fault is a new test.
//!
//! The correct rows keep their line of the matrix (tool, every scenario that failed) as an
//! insta snapshot, `snapshots/mutants__<tool>__correct.snap`. What else a fault fails beside
//! its targets (how many headlines one fault gets) is for review: `CONFORM_MATRIX=whole` runs
//! the whole catalogue under every fault and prints each row with all it failed. One more
//! test, [`COVERAGE_TEST`], runs no tool: it checks that every scenario `conform list` gives
//! is the target of at least one reftool fault and that every target is a scenario, and keeps
//! the scenario → faults table as the snapshot `snapshots/mutants__coverage.snap`.
//!
//! The narrow-window faults ([`Fault::is_narrow_window`]: a kill between two commits, two
//! invocations within one unlocked lookup) have no row: one run catches them only when its
//! interruption lands in a window of milliseconds, so no scenario can be their target. The
//! coverage table lists them as campaign-only; `conform campaign` is their proof (issue 26,
//! `scripts/bench-campaign.py`).
//!
//! # Running rows
//!
//! The rows are slow: each is named under the module `heavy` (`heavy::reftool::correct`;
//! `alone::pyagent::correct`, which runs with nothing beside it), so nextest's default profile
//! (the edit loop) leaves them out and its `ci` profile runs them (`.config/nextest.toml`,
//! which also bounds how many run at once). Select rows with nextest's filters, e.g.
//!
//! ```sh
//! cargo nextest run --profile ci --test mutants reftool::correct reftool::env_beats_flag
//! ```
//!
//! (this replaces the old `CONFORM_MUTANTS=a,b` variable). `cargo test --test mutants` runs them
//! too, with libtest's own thread pool.
//!
//! # The faulty build
//!
//! The correct row runs reftool itself; the fault rows run `reftool-faulty`, reftool built
//! from its library with the faults of the crate `faults/` (`reftool_faults`), which a
//! workspace test build (`cargo test --workspace`, `cargo nextest run --workspace`) builds
//! beside it. reftool's own source holds no fault, so its release build and its test build are
//! the same code.
//!
//! # Cost
//!
//! A fault's row calibrates the roles its targets use and runs them: seconds, mostly sleeping
//! in paced work (`reftool::dead_worker_looks_alive` longer, sitting out a `job wait`). The
//! correct rows run the whole catalogue: reftool's about 40 s at `-j 8` (its critical path is
//! the opt-in `long_work` role: an 18 s calibration, then its two scenarios beside the rest),
//! pyagent's about a minute of Python start-ups (its `long_work` is 24 s).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "fixtures_paths.rs"]
mod fixtures_paths;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use conform_workspace::whole_run::{
    REFTOOL_CONFORM_JOBS, first_attempt, reftool_whole_run, run_conform,
};
use conform_workspace::{workspace_bin, workspace_root};
use fixtures_paths::absolute_fixtures;
use libtest_mimic::{Arguments, Failed, Trial};
use reftool_faults::{FAULT_ENV, Fault};

/// The faulty reftool (the crate `faults/`).
const FAULTY_REFTOOL: &str = "reftool-faulty";
/// The name of the test that checks the rows' targets against the catalogue.
const COVERAGE_TEST: &str = "coverage::every_scenario_is_the_target_of_a_reftool_fault";
/// conform's parallelism within a run: reftool's is the whole run's (native, it mostly sleeps);
/// pyagent pays a Python start-up per call, and more at once pushes its quick steps past
/// conform's slack.
const PYAGENT_CONFORM_JOBS: &str = "4";
/// Set to `whole` to run the whole catalogue under every fault too, and print each fault's
/// row with everything it failed (the targets are still asserted; only the correct rows and
/// the coverage table are snapshots).
const WHOLE_MATRIX_ENV: &str = "CONFORM_MATRIX";

fn whole_matrix() -> bool {
    std::env::var(WHOLE_MATRIX_ENV).is_ok_and(|v| v == "whole")
}

/// conform's exit codes (harness/src/exit.rs): every `must` passed, or not conformant.
/// The most a correct tool's whole-catalogue JSON report may weigh: it is a CI artifact, and
/// a passing scenario's records keep no output by default (`--evidence failures`), so the
/// report of a tool that passes grows with the catalogue only by what each run was.
const CORRECT_REPORT_LIMIT: usize = 300_000;

const CONFORM_PASSED: i32 = 0;
const CONFORM_NOT_CONFORMANT: i32 = 80;

fn main() -> ExitCode {
    let arguments = Arguments::from_args();
    let mut trials = vec![Trial::test(COVERAGE_TEST, check_coverage)];
    trials.extend(
        rows().into_iter().map(|row| Trial::test(row.trial_name(), move || check_row(&row))),
    );
    libtest_mimic::run(&arguments, trials).exit_code()
}

/// The tool a row runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Tool {
    Reftool,
    Pyagent,
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Tool::Reftool => "reftool",
            Tool::Pyagent => "pyagent",
        }
    }

    /// The variable that selects a fault.
    fn fault_env(self) -> &'static str {
        match self {
            Tool::Reftool => FAULT_ENV,
            Tool::Pyagent => "PYAGENT_FAULT",
        }
    }

    /// The tool with `fault` (`None`: the correct tool).
    fn binary(self, fault: Option<&str>) -> PathBuf {
        match (self, fault) {
            (Tool::Reftool, None) => workspace_bin("reftool"),
            (Tool::Reftool, Some(_)) => workspace_bin(FAULTY_REFTOOL),
            (Tool::Pyagent, _) => pyagent_dir().join("pyagent.py"),
        }
    }

    fn conform_jobs(self) -> &'static str {
        match self {
            Tool::Reftool => REFTOOL_CONFORM_JOBS,
            Tool::Pyagent => PYAGENT_CONFORM_JOBS,
        }
    }

    /// Whether its runs accept musts its profile cannot reach ([`Row`]'s runs).
    fn allows_unjudged(self) -> bool {
        match self {
            Tool::Reftool => false,
            Tool::Pyagent => true,
        }
    }

    fn profile(self) -> PathBuf {
        match self {
            Tool::Reftool => workspace_root().join("reference-tool").join("conform.toml"),
            Tool::Pyagent => pyagent_dir().join("fixtures").join("conform.toml"),
        }
    }
}

/// A path as an argument.
fn text_of(path: &Path) -> String {
    path.to_str().expect("UTF-8 paths").to_owned()
}

fn pyagent_dir() -> PathBuf {
    workspace_root().join("tests").join("fixtures").join("tools").join("pyagent")
}

/// One row of the matrix: a tool, its fault (`None`: the correct tool) and the scenarios the
/// fault is meant to fail.
#[derive(Debug, Clone)]
struct Row {
    tool: Tool,
    fault: Option<&'static str>,
    targets: &'static [&'static str],
}

/// The scenarios each reftool fault is meant to fail. An exhaustive match: a new fault does
/// not compile until it names its target here.
fn reftool_targets(fault: Fault) -> &'static [&'static str] {
    match fault {
        Fault::ExitZeroOnIncomplete => {
            &["budget-flag-exits-14-within-budget", "detached-writer-leaves-the-same-effect"]
        }
        Fault::EnvBeatsFlag => &["budget-flag-beats-env", "budget-flag-beats-a-smaller-env"],
        Fault::DefaultBudget20s => &["default-budget-is-30-seconds"],
        Fault::EnvBudgetIgnored => &["env-budget-applies"],
        Fault::ZeroBudgetDefersToEnv => &["budget-zero-runs-to-the-end"],
        Fault::BudgetOnTerminal => &["terminal-without-budget-is-synchronous"],
        Fault::BudgetMetaOnTerminal => &["terminal-without-budget-is-synchronous"],
        // A response `job wait` relays (the job's stored ending) may leave the budget out
        // (F-081's own examples do), so only the command's own answers catch these two.
        Fault::NoBudgetMetaOnSuccess => &[
            "work-within-budget-is-ordinary",
            "paused-continue-is-the-original-invocation",
            "changed-input-discards-checkpoint",
        ],
        Fault::NoBudgetMetaOnEndings => &["timeout-spans-resumed-calls"],
        Fault::NoBudgetMetaOnHops => &["continue-loop-ends-in-calibrated-response"],
        Fault::BudgetFlagOnPlainCommand => {
            &["budget-flag-only-when-interruptible", "budget-flag-listed-where-interruptible"]
        }
        Fault::PlainCommandsReadBudgetEnv => {
            &["plain-command-ignores-budget-env", "plain-slow-ignores-budget-env"]
        }
        Fault::WriterContinueWithoutKey => &["paused-writer-continues-with-key"],
        Fault::WriterIncompleteRetryable => &["paused-writer-continues-with-key"],
        Fault::ReaderIncompleteNotRetryable => &[
            "detach-hands-off-running",
            "continue-loop-ends-in-calibrated-response",
            "paused-continue-is-the-original-invocation",
        ],
        Fault::ProgressRestartsOnResume => &[
            "progress-never-decreases",
            "resumed-writer-progress-never-decreases",
            "resume-only-pauses-within-budget",
        ],
        Fault::CheckpointLagsItsRows => &["killed-writer-resumes-to-the-same-result"],
        // Killed or paused, a writer that skips a chunk on resume leaves fewer rows: the effect
        // oracle tells it on both paths.
        Fault::ResumeSkipsAChunk => &[
            "killed-writer-resumes-to-the-same-result",
            "paused-writer-continues-with-key",
            "resumed-writer-progress-never-decreases",
        ],
        Fault::EndedJobStatusExits3 => &["job-status-tells-ended-from-unknown"],
        Fault::SecondsReadAsMillis => &["budget-in-seconds-is-understood"],
        Fault::ResultDeliveredOnce => &["job-wait-after-the-end-repeats-the-result"],
        Fault::WorkerHoldsCallerPipes => {
            &["pipes-released-on-handoff", "pipes-released-stdin-open"]
        }
        // A hangup reaches a worker left in the caller's group as a kill does: no fault tells
        // the two apart, since a signal to a group never reaches a process outside it.
        Fault::WorkerInCallerGroup => {
            &["caller-group-kill-spares-the-job", "caller-hangup-spares-the-job"]
        }
        Fault::DeadWorkerLooksAlive => &["dead-worker-is-job-lost"],
        Fault::StaleCancelMarker => &["stale-cancel-leaves-nothing-behind"],
        Fault::ForeignInstanceCancel => &["jobs-are-owned-by-their-instance"],
        Fault::ClockJobIds => &["job-ids-are-not-guessable"],
        Fault::UnquotedCommands => &["continue-command-is-shell-ready"],
        Fault::ManifestNeitherDetachNorResume => &["interruption-has-detach-or-resume"],
        Fault::ManifestNoIncompleteEntry => &["interruption-declares-incomplete-exit"],
        Fault::ManifestInterruptionWithAsync => &["interruption-excludes-async-and-streaming"],
        Fault::ManifestWriterWithoutKey => &["resumable-writer-takes-idempotency-key"],
        Fault::ManifestWriterEntryRetryable => &["incomplete-entry-matches-danger"],
        Fault::ManifestWithoutSchemaVersion => &["manifest-valid"],
        Fault::IdempotencyKeyIgnored => &["repeat-with-key-is-a-noop"],
        Fault::AsyncDescriptorWithoutTerminal => &["async-returns-a-job-descriptor"],
        Fault::AsyncStatusExits3 => &["async-job-status-exits-14"],
        Fault::AsyncWaitExits3 => &["job-wait-on-a-running-async-job-exits-14"],
        Fault::CancelIgnored => &["cancel-stops-the-job"],
        Fault::NoAttach => {
            &["identical-invocations-share-one-job", "repeat-attaches-to-running-job"]
        }
        Fault::JobStatusWaits => &["job-status-never-waits"],
        // Every job wait is held to its budget, so the waits of the progress scenarios catch
        // it too; their margin over the slack is a few hundred milliseconds on reftool's
        // 2.5 s of work, so the row asserts the scenario built to have room.
        Fault::JobWaitBlocks => &["job-wait-holds-its-caller-to-the-budget"],
        Fault::SigtermKillsTheCall => &["sigterm-hands-off-at-once"],
        Fault::StallReportedAsTimeout => &["stalled-job-times-out"],
        Fault::WatchdogOff => &["stalled-job-times-out"],
        Fault::RunningContinueWithExtraFlag => &["detach-hands-off-running"],
        Fault::PausedContinueAddsFlag => &["paused-continue-is-the-original-invocation"],
        Fault::RelayedResultLosesData => &["continue-loop-ends-in-calibrated-response"],
        Fault::PlainTimeoutIsGeneralError => &["plain-command-times-out-honestly"],
        Fault::NoTimeoutMeta => &["timeout-is-recorded-in-meta"],
        Fault::UnknownFlagExits1 => &["unknown-flag-is-arg-error", "invalid-probes-are-arg-errors"],
        Fault::AnsiOnStdout => &["read-probes-keep-ansi-off-stdout"],
        Fault::NoColorIgnored => &["no-color-is-honoured"],
        Fault::ReadProbesWaitForStdin => &["read-probes-end-with-stdin-open"],
        Fault::ReadProbesNeedInput => &["read-probes-end-with-stdin-closed"],
        Fault::CancelKeepsCheckpoint => {
            &["cancelled-invocation-starts-fresh", "paused-cancel-discards-the-checkpoint"]
        }
        Fault::ChangedInputKeepsCheckpoint => &["changed-input-discards-checkpoint"],
        Fault::CompletedCheckpointKept => &["completed-work-starts-fresh"],
        Fault::HelpOnStdout => &["help-keeps-stdout-clean"],
        Fault::JobWaitStaleProgress => {
            &["job-wait-reports-growing-progress", "progress-is-reported"]
        }
        Fault::ProgressNotPublished => &["progress-grows-between-status-calls"],
        Fault::RejectedCancelStillFires => &["rejected-cancel-leaves-continuation-running"],
        Fault::DryRunIgnored => &["dry-run-previews"],
        Fault::DryRunActs => &["dry-run-changes-nothing"],
        Fault::KilledReaderStartsOver => &["killed-reader-resumes-from-its-checkpoint"],
        Fault::UnconfirmedDrops => &["destructive-refuses-unconfirmed"],
        Fault::ArgErrorExits127 => &["probe-exits-are-standard-codes"],
        Fault::VersionPrintsProgressFirst => &["read-probes-answer-one-envelope"],
        Fault::GlobalOptionAfterPathRefused => &["global-option-means-the-same-anywhere"],
        Fault::SubcommandDefaultOverridesGlobal => &["global-option-value-survives-the-command"],
        Fault::ConflictingRepeatLastWins => &["conflicting-repeats-are-arg-errors"],
        Fault::SameValueRepeatRefused => &["same-value-repeats-are-accepted"],
        Fault::OptionsStopAtPositional => &["options-after-positionals-take-effect"],
        Fault::StreamWithoutSummary | Fault::StreamSeqSkips => &["stream-lines-keep-the-contract"],
        Fault::SigintExits1 => &["sigint-ends-the-stream-cancelled", "sigint-cancels-with-130"],
        Fault::SigintNotPartial => &["sigint-ends-the-stream-cancelled"],
        Fault::SecondSigintIgnored => &["second-sigint-exits-at-once"],
        Fault::ManifestWithout130 => &["every-command-lists-130"],
        Fault::JobTimeoutSpansOneCall => {
            &["timeout-spans-resumed-calls", "timeout-ends-the-detached-job"]
        }
        Fault::ZeroBudgetIgnoresTimeout => &["budget-zero-stops-at-the-timeout"],
        Fault::LifetimeIgnored => &["lifetime-bounds-the-work-without-timeout"],
        Fault::CancelMarksOnly => &["cancelled-writer-stops-its-effect"],
        Fault::CancelledWorkerLingers => {
            &["cancel-leaves-no-worker", "cancelled-writer-stops-its-effect"]
        }
        Fault::LostJobRestartsFromZero | Fault::LostJobStatusRunning => {
            &["lost-job-resumes-from-its-checkpoint"]
        }
        Fault::LostJobWithoutDetail => &["lost-job-tells-its-log-tail"],
        Fault::FailedJobWaitExits1 => &["failed-job-wait-keeps-its-exit"],
        Fault::FailedJobStatusExits0 => &["job-status-tells-a-failed-job"],
        Fault::AsyncJobWaitRefused => &["job-wait-ends-an-async-job"],
        // `progress-is-reported` sees it too, but only when the job moved between the hand-off
        // and the wait (it missed once in CI): the rows assert what every run catches.
        Fault::StaleProgressOnWait => &[
            "job-wait-reports-growing-progress",
            "job-wait-progress-grows",
            "continue-loop-shows-growing-progress",
        ],
        Fault::IdentityIgnoresCwd => &["another-directory-starts-its-own-job"],
        Fault::IdentityIgnoresStdin => &["other-stdin-starts-its-own-job"],
        Fault::IdentityIgnoresInstance => &["another-instance-starts-its-own-job"],
        Fault::IdentityIgnoresKey => &["another-idempotency-key-starts-its-own-job"],
        // Both leave work shorter than their 3 s untouched: only the `long_work` role's 18 s
        // shows them, as a flat stretch longer than 10 s.
        Fault::ProgressFreezesAfterThreeSeconds => &["progress-advances-every-ten-seconds"],
        Fault::JobWaitFreezesAfterThreeSeconds => &["job-wait-keeps-up-with-the-job"],
        // Narrow-window faults: no row (see `rows`), `conform campaign` catches them.
        Fault::TwoTransactionCommit
        | Fault::CheckpointFirst
        | Fault::StaleCheckpointTotals
        | Fault::IdentityCheckThenCreate => &[],
    }
}

/// pyagent's faults and the scenario each is meant to fail (its README's table).
const PYAGENT_FAULTS: &[(&str, &[&str])] = &[
    ("exit-zero-incomplete", &["budget-flag-exits-14-within-budget"]),
    ("env-beats-flag", &["budget-flag-beats-env"]),
    ("no-budget-meta", &["work-within-budget-is-ordinary"]),
    ("no-key-in-continue", &["paused-writer-continues-with-key"]),
    ("progress-backwards", &["progress-never-decreases"]),
    ("pipes-held", &["pipes-released-on-handoff"]),
    ("stale-cancel", &["stale-cancel-leaves-nothing-behind"]),
    ("unscoped-jobs", &["jobs-are-owned-by-their-instance"]),
    ("sequential-ids", &["job-ids-are-not-guessable"]),
    ("bad-quoting", &["continue-command-is-shell-ready"]),
    ("timeout-per-call", &["timeout-spans-resumed-calls"]),
    ("wait-blocks", &["job-wait-holds-its-caller-to-the-budget"]),
    ("async-wait-exits-3", &["job-wait-on-a-running-async-job-exits-14"]),
    ("zero-budget-no-timeout", &["budget-zero-stops-at-the-timeout"]),
    ("lifetime-ignored", &["lifetime-bounds-the-work-without-timeout"]),
    ("no-timeout-meta", &["timeout-is-recorded-in-meta"]),
    ("progress-freezes-after-three-seconds", &["progress-advances-every-ten-seconds"]),
    ("job-wait-freezes-after-three-seconds", &["job-wait-keeps-up-with-the-job"]),
    ("second-sigint-ignored", &["second-sigint-exits-at-once"]),
    ("no-130-exit-code", &["every-command-lists-130"]),
    (
        "worker-in-caller-group",
        &["caller-hangup-spares-the-job", "caller-group-kill-spares-the-job"],
    ),
];

/// Scenarios the correct pyagent fails today, each with the reason. The test insists on
/// exactly these, so a fix makes it ask for the entry's removal. (None since its `survey`
/// answers the full REQ-C-022 job descriptor.)
const PYAGENT_KNOWN_FAILURES: &[(&str, &str)] = &[];

fn rows() -> Vec<Row> {
    let mut rows = vec![Row { tool: Tool::Reftool, fault: None, targets: &[] }];
    rows.extend(Fault::ALL.iter().filter(|f| !f.is_narrow_window()).map(|f| Row {
        tool: Tool::Reftool,
        fault: Some(f.name()),
        targets: reftool_targets(*f),
    }));
    rows.push(Row { tool: Tool::Pyagent, fault: None, targets: &[] });
    rows.extend(PYAGENT_FAULTS.iter().map(|(fault, targets)| Row {
        tool: Tool::Pyagent,
        fault: Some(fault),
        targets,
    }));
    rows
}

impl Row {
    /// The row's test name: `<tool>::<fault>` (`correct` for the tool without one), in the
    /// snake case of a Rust test, e.g. `reftool::env_beats_flag`.
    fn test_name(&self) -> String {
        format!("{}::{}", self.tool.name(), self.fault.unwrap_or("correct").replace('-', "_"))
    }

    /// The row's test: its name under its lane's module, `heavy::reftool::env_beats_flag`, and
    /// `alone::pyagent::correct`, whose Python start-ups beside the other rows let jobs end
    /// before its cancels and status calls arrived (twice in CI): every row is a conform run
    /// over a tool, out of the edit lane (`.config/nextest.toml`).
    fn trial_name(&self) -> String {
        let lane = match (self.tool, self.fault) {
            (Tool::Pyagent, None) => "alone",
            _ => "heavy",
        };
        format!("{lane}::{}", self.test_name())
    }

    /// The row's snapshot: `mutants__<tool>__<fault>.snap`.
    fn snapshot_name(&self) -> String {
        self.test_name().replace("::", "__")
    }

    /// What the row runs, for messages: "reftool fault env-beats-flag", "the correct pyagent".
    fn label(&self) -> String {
        match self.fault {
            Some(fault) => format!("{} fault {fault}", self.tool.name()),
            None => format!("the correct {}", self.tool.name()),
        }
    }

    /// The scenarios a run is limited to (`--only`): a fault's targets, and nothing (the whole
    /// catalogue) for a correct tool or when [`WHOLE_MATRIX_ENV`] asks for the whole matrix.
    ///
    /// A fault's row proves that its targets can fail; the correct rows prove that nothing
    /// fails on a correct tool. What else a fault fails (one fault, how many headlines) is
    /// review material, not a property of the catalogue: running the whole catalogue under
    /// each of some eighty faults cost most of CI's half hour on two cores, and its collateral
    /// verdicts, timing under that load, flapped from run to run.
    fn only_targets(&self) -> &'static [&'static str] {
        match self.fault {
            Some(_) if !whole_matrix() => self.targets,
            _ => &[],
        }
    }
}

/// What one conform run reported.
#[derive(Debug, Clone, Default)]
struct Outcome {
    /// Scenario id → status (`pass`, `fail`, `error`, `skip`, ...).
    statuses: BTreeMap<String, String>,
    /// Scenario id → the reason of a skip.
    skip_reasons: BTreeMap<String, String>,
    /// Scenario id → the first finding's message, for a failure.
    first_findings: BTreeMap<String, String>,
    /// Scenarios that failed beside the others and passed alone (conform's `flaky`): the
    /// fault showed, once.
    flaky: BTreeSet<String>,
    elapsed: Duration,
    /// The size of conform's stdout, the JSON report.
    report_bytes: usize,
}

impl Outcome {
    /// What a fault's row counts as caught: a failure, or a failure conform saw beside the
    /// other scenarios that did not repeat alone (a fault that shows at some moments only is
    /// still shown; `conform campaign` is what makes it repeat).
    fn caught(&self) -> BTreeSet<String> {
        self.failed().union(&self.flaky).cloned().collect()
    }

    fn failed(&self) -> BTreeSet<String> {
        self.statuses
            .iter()
            .filter(|(_, s)| matches!(s.as_str(), "fail" | "error"))
            .map(|(id, _)| id.clone())
            .collect()
    }
}

/// A copy of the tool's profile with the fault in `[tool.env]` and every fixture path made
/// absolute (they are relative to the profile, which now lives elsewhere).
fn write_profile(row: &Row, dir: &Path) -> PathBuf {
    let original = row.tool.profile();
    let base = original.parent().unwrap().to_path_buf();
    let text = std::fs::read_to_string(&original).unwrap();
    let mut profile: toml::Table = toml::from_str(&text).unwrap();
    if let Some(fault) = row.fault {
        let tool = profile.entry("tool").or_insert_with(|| toml::Table::new().into());
        let env =
            tool.as_table_mut().unwrap().entry("env").or_insert_with(|| toml::Table::new().into());
        env.as_table_mut().unwrap().insert(row.tool.fault_env().into(), fault.into());
    }
    absolute_fixtures(&mut profile, &base);
    let path = dir.join("conform.toml");
    std::fs::write(&path, toml::to_string(&profile).unwrap()).unwrap();
    path
}

/// Runs conform on one row and parses its JSON report. reftool's correct row reads the whole
/// catalogue's run that the per-scenario cases of `reftool_catalogue.rs` read too
/// ([`conform_workspace::whole_run`]), made once per test run; its retry runs its own.
fn run_row(row: &Row) -> Outcome {
    let label = row.label();
    let out = if row.tool == Tool::Reftool && row.fault.is_none() && first_attempt() {
        reftool_whole_run()
    } else {
        let dir = tempfile::tempdir().unwrap();
        let profile = write_profile(row, dir.path());
        let mut args: Vec<String> = vec!["run".into(), text_of(&row.tool.binary(row.fault))];
        args.extend(["--profile".into(), text_of(&profile)]);
        args.extend(["-j", row.tool.conform_jobs(), "--format", "json"].map(str::to_owned));
        // pyagent's profile cannot name every role (no `failing` work, no second output
        // format for the argument order): those musts go unjudged, which is the profile's
        // gap, not a fault of the matrix's.
        if row.tool.allows_unjudged() {
            args.push("--allow-unjudged".into());
        }
        for target in row.only_targets() {
            args.extend(["--only".into(), (*target).to_owned()]);
        }
        run_conform(&args, dir.path())
    };
    assert!(
        matches!(out.code, Some(CONFORM_PASSED | CONFORM_NOT_CONFORMANT)),
        "conform on {label} ended with {:?}:\n{}",
        out.code,
        out.stderr
    );
    let (elapsed, text) = (out.elapsed, out.stdout);
    let envelope: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("conform's report for {label} is not JSON ({e}):\n{text}"));
    let mut outcome = Outcome { elapsed, report_bytes: text.len(), ..Outcome::default() };
    for scenario in envelope["data"]["scenarios"].as_array().unwrap() {
        let id = scenario["id"].as_str().unwrap().to_owned();
        let status = scenario["status"].as_str().unwrap().to_owned();
        if status == "skip" {
            let reason = scenario["reason"].as_str().unwrap_or("(no reason)").to_owned();
            outcome.skip_reasons.insert(id.clone(), reason);
        }
        if let Some(finding) = scenario["findings"].get(0) {
            let message = format!(
                "[{}] {}",
                finding["check"].as_str().unwrap_or("?"),
                finding["message"].as_str().unwrap_or("?")
            );
            outcome.first_findings.insert(id.clone(), message);
        }
        if scenario["first_run"]["status"] == "fail" && status == "pass" {
            outcome.flaky.insert(id.clone());
        }
        outcome.statuses.insert(id, status);
    }
    outcome
}

/// One row: conform against its tool, the row's line of the matrix against its snapshot, and
/// its assertions. A failure names the row (the test's name) and says what it saw.
fn check_row(row: &Row) -> Result<(), Failed> {
    let conform = workspace_bin("conform");
    let tool = row.tool.binary(row.fault);
    if !conform.is_file() || !tool.is_file() {
        return Err(format!(
            "{}: build conform and the tool first (`cargo nextest run --workspace` builds \
             both; {} / {})",
            row.test_name(),
            conform.display(),
            tool.display()
        )
        .into());
    }
    let outcome = run_row(row);
    let line = render_row(row, &outcome);
    let problems = row_problems(row, &outcome);
    {
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(
            stdout,
            "{line}\n{} in {:.1?}, report {} bytes",
            row.label(),
            outcome.elapsed,
            outcome.report_bytes
        );
        for (id, reason) in &outcome.skip_reasons {
            let _ = writeln!(stdout, "  skipped {id}: {reason}");
        }
    }
    // A correct tool's line is a snapshot (what it fails);
    // a fault's row asserts its targets, its line is the record. insta panics on a
    // difference (after printing it, and writing `.snap.new` off CI); the row's own problems
    // are reported with it, not hidden by it.
    let snapshot = std::panic::catch_unwind(|| {
        if row.fault.is_none() {
            insta::assert_snapshot!(row.snapshot_name(), line);
        }
    });
    let mut failures = problems;
    if snapshot.is_err() {
        failures.push(format!(
            "its line differs from snapshots/mutants__{}.snap (the diff is above)",
            row.snapshot_name()
        ));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!("{} ({}):\n{}\n\n{line}", row.test_name(), row.label(), failures.join("\n"))
            .into())
    }
}

/// What a row's outcome breaks: a fault's target that did not fail, or a correct tool that
/// failed anything but its known failures.
fn row_problems(row: &Row, outcome: &Outcome) -> Vec<String> {
    let failed = outcome.failed();
    let mut problems = Vec::new();
    match row.fault {
        None => {
            let known: BTreeSet<String> = match row.tool {
                Tool::Reftool => BTreeSet::new(),
                Tool::Pyagent => {
                    PYAGENT_KNOWN_FAILURES.iter().map(|(id, _)| (*id).to_owned()).collect()
                }
            };
            if failed != known {
                let details: Vec<String> = failed
                    .iter()
                    .map(|id| format!("{id}: {}", outcome.first_findings.get(id).map_or("", |s| s)))
                    .collect();
                problems.push(format!(
                    "{} failed {failed:?} (expected exactly {known:?}): {details:#?}",
                    row.label()
                ));
            }
            if row.tool == Tool::Reftool && outcome.report_bytes > CORRECT_REPORT_LIMIT {
                problems.push(format!(
                    "the JSON report on {} is {} bytes, over the {CORRECT_REPORT_LIMIT} a CI \
                     artifact may weigh",
                    row.label(),
                    outcome.report_bytes
                ));
            }
        }
        Some(_) => {
            for target in row.targets {
                // A target pyagent's profile cannot run (skipped, with its reason in the row's
                // output) cannot catch anything. reftool's must run: the coverage test counts
                // every scenario its faults target as caught.
                let skipped = outcome.statuses.get(*target).is_some_and(|s| s == "skip");
                let excused = skipped && row.tool == Tool::Pyagent;
                if !outcome.caught().contains(*target) && !excused {
                    problems.push(format!(
                        "{} is not caught by {target} (status {})",
                        row.label(),
                        outcome.statuses.get(*target).map_or("absent", String::as_str)
                    ));
                }
            }
        }
    }
    problems
}

/// The row's line of the matrix, a Markdown table row: tool, fault, targets, and every
/// scenario that failed.
fn render_row(row: &Row, outcome: &Outcome) -> String {
    let failed: Vec<String> = outcome.failed().into_iter().collect();
    format!(
        "| {} | {} | {} | {} |",
        row.tool.name(),
        row.fault.unwrap_or("(none)"),
        if row.targets.is_empty() { "-".to_owned() } else { row.targets.join(", ") },
        if failed.is_empty() { "-".to_owned() } else { failed.join(", ") },
    )
}

/// The ids of conform's catalogue (`conform list --format json`).
fn catalogue() -> Result<BTreeSet<String>, Failed> {
    let output = Command::new(workspace_bin("conform"))
        .args(["list", "--format", "json"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("conform list does not run: {e}"))?;
    if output.status.code() != Some(CONFORM_PASSED) {
        return Err(format!("conform list ended with {}: {output:?}", output.status).into());
    }
    let envelope: serde_json::Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("conform list printed no JSON ({e})"))?;
    let scenarios = envelope["data"]["scenarios"]
        .as_array()
        .ok_or_else(|| format!("no data.scenarios in conform list's answer: {envelope:#}"))?;
    Ok(scenarios.iter().filter_map(|s| s["id"].as_str()).map(str::to_owned).collect())
}

/// Without running a tool: every scenario of the catalogue is the target of a reftool fault
/// (a stricter form of "every scenario the correct reftool runs", since reftool skips none),
/// every target and every allowance names a scenario of the catalogue, and no target is also
/// allowed to vary. Keeps the notes and the scenario → faults table as a snapshot.
fn check_coverage() -> Result<(), Failed> {
    let catalogue = catalogue()?;
    let rows = rows();
    let mut problems = Vec::new();
    for row in &rows {
        for target in row.targets {
            if !catalogue.contains(*target) {
                problems
                    .push(format!("{} targets {target}, which conform does not list", row.label()));
            }
        }
    }
    for (scenario, _) in PYAGENT_KNOWN_FAILURES {
        if !catalogue.contains(*scenario) {
            problems.push(format!("{scenario} is allowed to fail, but conform does not list it"));
        }
    }
    let targeted: BTreeSet<&str> = rows
        .iter()
        .filter(|row| row.tool == Tool::Reftool)
        .flat_map(|row| row.targets.iter().copied())
        .collect();
    for scenario in catalogue.iter().filter(|id| !targeted.contains(id.as_str())) {
        problems.push(format!("no reftool fault targets scenario {scenario}"));
    }
    let text = render_coverage(&rows, &catalogue);
    let snapshot = std::panic::catch_unwind(|| {
        insta::assert_snapshot!("coverage", text);
    });
    if snapshot.is_err() {
        problems.push(
            "the table differs from snapshots/mutants__coverage.snap (the diff is above)".into(),
        );
    }
    if problems.is_empty() { Ok(()) } else { Err(problems.join("\n").into()) }
}

/// Each scenario with the reftool faults that target it.
fn render_coverage(rows: &[Row], catalogue: &BTreeSet<String>) -> String {
    let mut out = String::new();
    out.push_str("| scenario | caught by (reftool faults targeting it) |\n|---|---|\n");
    for scenario in catalogue {
        let catchers: Vec<&str> = rows
            .iter()
            .filter(|row| row.tool == Tool::Reftool && row.targets.contains(&scenario.as_str()))
            .filter_map(|row| row.fault)
            .collect();
        let cell = if catchers.is_empty() { "(NONE)".to_owned() } else { catchers.join(", ") };
        let _ = writeln!(out, "| {scenario} | {cell} |");
    }
    let campaign: Vec<&str> =
        Fault::ALL.iter().filter(|f| f.is_narrow_window()).map(|f| f.name()).collect();
    let _ = writeln!(
        out,
        "\ncampaign-only (narrow window, no single scenario catches them reliably): {}",
        campaign.join(", ")
    );
    out
}
