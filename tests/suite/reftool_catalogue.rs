//! The whole catalogue against reftool, one test case per scenario: each asserts that its
//! scenario passed in conform's run of reftool's whole catalogue with its profile
//! `reference-tool/conform.toml` (`--format json`), or, where reftool's profile lacks a probe,
//! that it was skipped for that reason (or, for a known defect of reftool listed in
//! `KNOWN_FAILURES`, that it still fails with the finding that names the defect). A failure
//! shows conform's findings and the evidence of each step.
//!
//! The run is one for all the cases and the mutant matrix's `reftool::correct` row
//! ([`conform_workspace::whole_run`]): ninety-odd runs of one scenario each, every one
//! calibrating its roles afresh, were most of CI's time, and asked the same of the same tool.
//! A case's retry (nextest's second attempt) runs its scenario alone (`--only <id>`) with a
//! calibration of its own, so a verdict bent once by a loaded machine is judged again apart.
//!
//! The list below must equal `conform list`: a scenario added to `scenarios/` without a case
//! here fails [`the_list_is_the_catalogue`]. The cases are in the module `heavy` (the edit
//! lane leaves them out, `.config/nextest.toml`): the first of them waits for the whole run.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::process::{Command, Output};

use conform_workspace::whole_run::{first_attempt, reftool_whole_run, run_conform};
use conform_workspace::{workspace_bin, workspace_root};
use serde_json::Value;

/// Scenarios that reftool's profile cannot run, with the skip reason conform must give.
/// None: its destructive probe (`drop-table`) gets its database from the probe's setup.
const SKIPPED: &[(&str, &str)] = &[];

/// Scenarios reftool is known to fail, each with the finding conform must report and why.
/// The case asserts the failure, so a fix shows up as a test to update: remove the entry then.
const KNOWN_FAILURES: &[(&str, &str, &str)] = &[];

/// Variables of the caller's environment that would change what conform or reftool does.
const CALLER_ENV: &[&str] = &[
    "AGENT_CALL_BUDGET_MS",
    "REFTOOL_FAULT",
    "REFTOOL_STATE_DIR",
    "REFTOOL_INSTANCE_ID",
    "REFTOOL_PACE_MS",
    "CI",
];

fn conform_json(args: &[&std::ffi::OsStr]) -> (Output, Value) {
    let dir = tempfile::tempdir().expect("a temporary working directory");
    let mut command = Command::new(workspace_bin("conform"));
    command.args(args).current_dir(dir.path());
    for name in CALLER_ENV {
        command.env_remove(name);
    }
    let out = command.output().expect("conform runs");
    let envelope = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "conform printed no JSON envelope ({e}); exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, envelope)
}

/// The verdict of one scenario against reftool: from the shared whole run on a first attempt,
/// from a run of this scenario alone on a retry. Returns conform's exit code, its envelope and
/// which run it was.
fn reftool_report(id: &str) -> (Option<i32>, Value, String) {
    let (out, which) = if first_attempt() {
        (reftool_whole_run(), "the whole catalogue's run".to_owned())
    } else {
        let reftool = workspace_bin("reftool");
        let profile = workspace_root().join("reference-tool").join("conform.toml");
        let text = |p: &std::path::Path| p.to_str().expect("UTF-8 paths").to_owned();
        let args = [
            "run",
            &text(&reftool),
            "--profile",
            &text(&profile),
            "--only",
            id,
            "--format",
            "json",
        ]
        .map(str::to_owned);
        let dir = tempfile::tempdir().expect("a temporary working directory");
        (run_conform(&args, dir.path()), format!("a run of `{id}` alone (a retry)"))
    };
    let envelope = serde_json::from_str(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "conform printed no JSON envelope in {which} ({e}); exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
            out.code, out.stdout, out.stderr
        )
    });
    (out.code, envelope, which)
}

/// Asserts one scenario's verdict against reftool.
fn check(id: &str) {
    let (code, envelope, which) = reftool_report(id);
    let scenarios = envelope["data"]["scenarios"].as_array().unwrap_or_else(|| {
        panic!("no data.scenarios in conform's answer in {which} (exit {code:?}):\n{envelope:#}")
    });
    let result = scenarios.iter().find(|s| s["id"] == id).unwrap_or_else(|| {
        panic!("conform did not run `{id}` in {which}:\n{envelope:#}");
    });
    let status = result["status"].as_str().unwrap_or_default();
    let shown = || {
        format!(
            "scenario `{id}` in {which}: {status}\n--- findings\n{:#}\n--- notes\n{:#}\n--- evidence\n{:#}\n--- status detail\n{}",
            result["findings"],
            result["notes"],
            result["evidence"],
            result.get("reason").or_else(|| result.get("message")).unwrap_or(&Value::Null)
        )
    };
    if let Some((_, reason)) = SKIPPED.iter().find(|(skipped, _)| *skipped == id) {
        assert_eq!(status, "skip", "{}", shown());
        assert_eq!(result["reason"].as_str(), Some(*reason), "{}", shown());
    } else if let Some((_, check, why)) = KNOWN_FAILURES.iter().find(|(known, ..)| *known == id) {
        assert_eq!(
            status,
            "fail",
            "known failure ({why}) no longer fails: remove it from KNOWN_FAILURES\n{}",
            shown()
        );
        let checks: Vec<&str> = result["findings"]
            .as_array()
            .map(|f| f.iter().filter_map(|f| f["check"].as_str()).collect())
            .unwrap_or_default();
        assert!(checks.contains(check), "expected a `{check}` finding ({why})\n{}", shown());
    } else {
        assert_eq!(status, "pass", "{}", shown());
    }
}

macro_rules! catalogue {
    ($($name:ident => $id:literal,)*) => {
        /// Every scenario id with a test case, in `conform list` order.
        pub(super) const CASES: &[&str] = &[$($id),*];
        $(
            #[test]
            fn $name() {
                check($id);
            }
        )*
    };
}

/// The cases, and the Level 1 claim below, wait for whole runs of conform over reftool: the
/// edit lane leaves them out.
mod heavy {
    use super::*;

    catalogue! {
        dry_run_changes_nothing => "dry-run-changes-nothing",
        dry_run_previews => "dry-run-previews",
        destructive_refuses_unconfirmed => "destructive-refuses-unconfirmed",
        repeat_with_key_is_a_noop => "repeat-with-key-is-a-noop",
        async_job_status_exits_14 => "async-job-status-exits-14",
        async_returns_a_job_descriptor => "async-returns-a-job-descriptor",
        job_status_tells_a_failed_job => "job-status-tells-a-failed-job",
        job_status_tells_ended_from_unknown => "job-status-tells-ended-from-unknown",
        budget_flag_listed_where_interruptible => "budget-flag-listed-where-interruptible",
        budget_flag_only_when_interruptible => "budget-flag-only-when-interruptible",
        incomplete_entry_matches_danger => "incomplete-entry-matches-danger",
        interruption_declares_incomplete_exit => "interruption-declares-incomplete-exit",
        interruption_excludes_async_and_streaming => "interruption-excludes-async-and-streaming",
        interruption_has_detach_or_resume => "interruption-has-detach-or-resume",
        manifest_valid => "manifest-valid",
        plain_command_times_out_honestly => "plain-command-times-out-honestly",
        resumable_writer_takes_idempotency_key => "resumable-writer-takes-idempotency-key",
        progress_advances_every_ten_seconds => "progress-advances-every-ten-seconds",
        progress_grows_between_status_calls => "progress-grows-between-status-calls",
        progress_is_reported => "progress-is-reported",
        changed_input_discards_checkpoint => "changed-input-discards-checkpoint",
        completed_work_starts_fresh => "completed-work-starts-fresh",
        killed_reader_resumes_from_its_checkpoint => "killed-reader-resumes-from-its-checkpoint",
        killed_writer_resumes_to_the_same_result => "killed-writer-resumes-to-the-same-result",
        probe_exits_are_standard_codes => "probe-exits-are-standard-codes",
        invalid_probes_are_arg_errors => "invalid-probes-are-arg-errors",
        read_probes_answer_one_envelope => "read-probes-answer-one-envelope",
        unknown_flag_is_arg_error => "unknown-flag-is-arg-error",
        read_probes_keep_ansi_off_stdout => "read-probes-keep-ansi-off-stdout",
        no_color_is_honoured => "no-color-is-honoured",
        read_probes_end_with_stdin_closed => "read-probes-end-with-stdin-closed",
        read_probes_end_with_stdin_open => "read-probes-end-with-stdin-open",
        lifetime_bounds_the_work_without_timeout => "lifetime-bounds-the-work-without-timeout",
        timeout_is_recorded_in_meta => "timeout-is-recorded-in-meta",
        help_keeps_stdout_clean => "help-keeps-stdout-clean",
        conflicting_repeats_are_arg_errors => "conflicting-repeats-are-arg-errors",
        options_after_positionals_take_effect => "options-after-positionals-take-effect",
        same_value_repeats_are_accepted => "same-value-repeats-are-accepted",
        every_command_lists_130 => "every-command-lists-130",
        second_sigint_exits_at_once => "second-sigint-exits-at-once",
        sigint_cancels_with_130 => "sigint-cancels-with-130",
        global_option_means_the_same_anywhere => "global-option-means-the-same-anywhere",
        global_option_value_survives_the_command => "global-option-value-survives-the-command",
        budget_flag_beats_a_smaller_env => "budget-flag-beats-a-smaller-env",
        budget_flag_beats_env => "budget-flag-beats-env",
        budget_flag_exits_14_within_budget => "budget-flag-exits-14-within-budget",
        budget_in_seconds_is_understood => "budget-in-seconds-is-understood",
        budget_zero_runs_to_the_end => "budget-zero-runs-to-the-end",
        budget_zero_stops_at_the_timeout => "budget-zero-stops-at-the-timeout",
        default_budget_is_30_seconds => "default-budget-is-30-seconds",
        env_budget_applies => "env-budget-applies",
        plain_command_ignores_budget_env => "plain-command-ignores-budget-env",
        plain_slow_ignores_budget_env => "plain-slow-ignores-budget-env",
        resume_only_pauses_within_budget => "resume-only-pauses-within-budget",
        terminal_without_budget_is_synchronous => "terminal-without-budget-is-synchronous",
        timeout_spans_resumed_calls => "timeout-spans-resumed-calls",
        work_within_budget_is_ordinary => "work-within-budget-is-ordinary",
        another_directory_starts_its_own_job => "another-directory-starts-its-own-job",
        another_idempotency_key_starts_its_own_job => "another-idempotency-key-starts-its-own-job",
        another_instance_starts_its_own_job => "another-instance-starts-its-own-job",
        caller_group_kill_spares_the_job => "caller-group-kill-spares-the-job",
        caller_hangup_spares_the_job => "caller-hangup-spares-the-job",
        cancel_leaves_no_worker => "cancel-leaves-no-worker",
        cancel_stops_the_job => "cancel-stops-the-job",
        cancelled_invocation_starts_fresh => "cancelled-invocation-starts-fresh",
        cancelled_writer_stops_its_effect => "cancelled-writer-stops-its-effect",
        dead_worker_is_job_lost => "dead-worker-is-job-lost",
        detached_writer_leaves_the_same_effect => "detached-writer-leaves-the-same-effect",
        failed_job_wait_keeps_its_exit => "failed-job-wait-keeps-its-exit",
        identical_invocations_share_one_job => "identical-invocations-share-one-job",
        job_ids_are_not_guessable => "job-ids-are-not-guessable",
        job_status_never_waits => "job-status-never-waits",
        job_wait_after_the_end_repeats_the_result => "job-wait-after-the-end-repeats-the-result",
        job_wait_holds_its_caller_to_the_budget => "job-wait-holds-its-caller-to-the-budget",
        job_wait_keeps_up_with_the_job => "job-wait-keeps-up-with-the-job",
        job_wait_progress_grows => "job-wait-progress-grows",
        job_wait_reports_growing_progress => "job-wait-reports-growing-progress",
        jobs_are_owned_by_their_instance => "jobs-are-owned-by-their-instance",
        lost_job_resumes_from_its_checkpoint => "lost-job-resumes-from-its-checkpoint",
        lost_job_tells_its_log_tail => "lost-job-tells-its-log-tail",
        other_stdin_starts_its_own_job => "other-stdin-starts-its-own-job",
        pipes_released_on_handoff => "pipes-released-on-handoff",
        pipes_released_stdin_open => "pipes-released-stdin-open",
        rejected_cancel_leaves_continuation_running => "rejected-cancel-leaves-continuation-running",
        repeat_attaches_to_running_job => "repeat-attaches-to-running-job",
        sigterm_hands_off_at_once => "sigterm-hands-off-at-once",
        stale_cancel_leaves_nothing_behind => "stale-cancel-leaves-nothing-behind",
        stalled_job_times_out => "stalled-job-times-out",
        timeout_ends_the_detached_job => "timeout-ends-the-detached-job",
        continue_command_is_shell_ready => "continue-command-is-shell-ready",
        continue_loop_ends_in_calibrated_response => "continue-loop-ends-in-calibrated-response",
        continue_loop_shows_growing_progress => "continue-loop-shows-growing-progress",
        detach_hands_off_running => "detach-hands-off-running",
        job_wait_ends_an_async_job => "job-wait-ends-an-async-job",
        job_wait_on_a_running_async_job_exits_14 => "job-wait-on-a-running-async-job-exits-14",
        paused_cancel_discards_the_checkpoint => "paused-cancel-discards-the-checkpoint",
        paused_continue_is_the_original_invocation => "paused-continue-is-the-original-invocation",
        paused_writer_continues_with_key => "paused-writer-continues-with-key",
        progress_never_decreases => "progress-never-decreases",
        resumed_writer_progress_never_decreases => "resumed-writer-progress-never-decreases",
        sigint_ends_the_stream_cancelled => "sigint-ends-the-stream-cancelled",
        stream_lines_keep_the_contract => "stream-lines-keep-the-contract",
    }

    /// The spec's twelve Level 1 requirements.
    const LEVEL_1: [&str; 12] = [
        "REQ-F-001",
        "REQ-F-002",
        "REQ-F-003",
        "REQ-F-004",
        "REQ-F-006",
        "REQ-F-007",
        "REQ-F-008",
        "REQ-F-009",
        "REQ-F-010",
        "REQ-F-048",
        "REQ-C-004",
        "REQ-C-013",
    ];

    /// reftool claims Level 1: every scenario of a Level 1 requirement, selected by requirement,
    /// passes and the claim says `pass`; Level 2 and §79, whose scenarios were left out, say
    /// `incomplete` and never `pass`.
    #[test]
    fn reftool_claims_level_1_and_the_left_out_levels_stay_incomplete() {
        let reftool = workspace_bin("reftool");
        let profile = workspace_root().join("reference-tool").join("conform.toml");
        let mut args: Vec<&OsStr> = vec![
            OsStr::new("run"),
            reftool.as_os_str(),
            OsStr::new("--profile"),
            profile.as_os_str(),
        ];
        // The spec's Level 1 list (conform's `levels::LEVEL_1_REQUIREMENTS`), narrowed to those
        // with a scenario: `--only` refuses a value that selects nothing.
        let (_, list) = conform_json(&["list", "--format", "json"].map(OsStr::new));
        let with_scenarios: BTreeSet<String> = list["data"]["scenarios"]
            .as_array()
            .expect("conform list answers data.scenarios")
            .iter()
            .filter_map(|s| s["requirement"].as_str())
            .filter(|r| LEVEL_1.contains(r))
            .map(str::to_owned)
            .collect();
        assert!(with_scenarios.len() >= 8, "Level 1 lost scenarios: {with_scenarios:?}");
        for requirement in &with_scenarios {
            args.extend([OsStr::new("--only"), OsStr::new(requirement)]);
        }
        args.extend(["--format", "json", "-j", "2"].map(OsStr::new));
        let (out, envelope) = conform_json(&args);
        assert_eq!(out.status.code(), Some(0), "{envelope:#}");
        let verdict = |claim: &str| {
            envelope["data"]["claims"]
                .as_array()
                .and_then(|all| all.iter().find(|c| c["claim"] == claim))
                .map(|c| c["verdict"].as_str().unwrap_or_default().to_owned())
                .unwrap_or_else(|| panic!("no claim {claim}:\n{envelope:#}"))
        };
        assert_eq!(verdict("level-1"), "pass", "{:#}", envelope["data"]["claims"]);
        for claim in ["level-2", "level-3", "interruption"] {
            assert_eq!(verdict(claim), "incomplete", "{:#}", envelope["data"]["claims"]);
        }
    }
}

#[test]
fn the_list_is_the_catalogue() {
    let (out, envelope) = conform_json(&["list".as_ref(), "--format".as_ref(), "json".as_ref()]);
    assert_eq!(out.status.code(), Some(0), "conform list failed:\n{envelope:#}");
    let listed: Vec<&str> = envelope["data"]["scenarios"]
        .as_array()
        .expect("data.scenarios is an array")
        .iter()
        .map(|s| s["id"].as_str().expect("each scenario has an id"))
        .collect();
    let missing: BTreeSet<&&str> = listed.iter().filter(|id| !heavy::CASES.contains(id)).collect();
    let stale: BTreeSet<&&str> = heavy::CASES.iter().filter(|id| !listed.contains(id)).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "tests/suite/reftool_catalogue.rs is out of step with `conform list`: add a case for \
         {missing:?}, remove {stale:?}"
    );
    assert_eq!(listed, heavy::CASES, "keep the cases in `conform list` order");
    for id in SKIPPED.iter().map(|(id, _)| id).chain(KNOWN_FAILURES.iter().map(|(id, ..)| id)) {
        assert!(
            heavy::CASES.contains(id),
            "`{id}` is listed as skipped or failing but is not in the catalogue"
        );
    }
}
