//! A correct tool must not fail: each test runs conform against a tool that makes one choice the
//! spec leaves open differently from reftool, and asserts that the
//! scenarios about it pass (or do not apply, where the choice makes the criterion moot). The
//! tools are pyagent with a legal variant switched on (`PYAGENT_VARIANT`, its README lists them)
//! and the foreign-framework fixture `notes` with its spec-conforming job status.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{code, conform, errors, pyagent_with, stdout_json, validator};

/// pyagent with these variants (`PYAGENT_VARIANT`, comma-separated), and a copy of its profile
/// (its fixtures beside it) edited by `edit`: the temporary directory, the tool, the profile.
fn pyagent(variants: &str, edit: impl Fn(&str) -> String) -> (tempfile::TempDir, PathBuf, PathBuf) {
    pyagent_with(|text| {
        assert!(text.contains("[tool.env]\n"), "the profile's [tool.env] table moved");
        edit(
            &text.replace("[tool.env]\n", &format!("[tool.env]\nPYAGENT_VARIANT = {variants:?}\n")),
        )
    })
}

/// conform's JSON report of `tool` under `profile`, limited to `only`, with `args`.
fn run(tool: &Path, profile: &Path, only: &[&str], args: &[&str]) -> (i32, Value) {
    let out = conform()
        .arg("run")
        .arg(tool)
        .arg("--profile")
        .arg(profile)
        .args(only.iter().flat_map(|id| ["--only", id]))
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let report = stdout_json(&out);
    let problems = errors(&validator("conform-report-data.json"), &report["data"]);
    assert!(problems.is_empty(), "{problems:#?}");
    (code(&out), report)
}

fn scenario<'a>(report: &'a Value, id: &str) -> &'a Value {
    let all = report["data"]["scenarios"].as_array().unwrap();
    all.iter().find(|s| s["id"] == id).unwrap_or_else(|| panic!("no {id} in {report:#}"))
}

/// Every scenario named passed.
fn assert_pass(report: &Value, ids: &[&str]) {
    for id in ids {
        let s = scenario(report, id);
        assert_eq!(s["status"], "pass", "{id}: {s:#}");
    }
}

/// Item 2: an ending that `job wait` relays (the stored final response, JOB_LOST, STALLED, a
/// cancelled job's) carries no `meta.budget_ms`, as REQ-F-081's own examples show it; its
/// INCOMPLETE answers and the command's own responses keep it.
#[test]
fn relayed_endings_without_a_budget_pass() {
    let (_dir, tool, profile) = pyagent("bare-relay", str::to_owned);
    let ids = [
        "dead-worker-is-job-lost",
        "stalled-job-times-out",
        "cancel-stops-the-job",
        "continue-loop-ends-in-calibrated-response",
    ];
    let (exit, report) = run(&tool, &profile, &ids, &["-j", "2"]);
    assert_eq!(exit, 0, "{report:#}");
    assert_pass(&report, &ids);
}

/// Item 3: a detach-only command restarts a lost job from zero (REQ-F-081 resumes from the last
/// checkpoint only "with `resume: true` too"): the lost-job resume does not apply to it, and
/// JOB_LOST and a fresh start after a cancel still pass.
#[test]
fn a_detach_only_command_is_not_asked_to_resume_a_lost_job() {
    let (_dir, tool, profile) = pyagent("detach-only", str::to_owned);
    let ids = [
        "lost-job-resumes-from-its-checkpoint",
        "dead-worker-is-job-lost",
        "cancelled-invocation-starts-fresh",
    ];
    let (exit, report) = run(&tool, &profile, &ids, &["-j", "2"]);
    assert_eq!(exit, 0, "{report:#}");
    let lost = scenario(&report, "lost-job-resumes-from-its-checkpoint");
    assert_eq!(lost["status"], "skip", "{lost:#}");
    let reason = lost["reason"].as_str().unwrap();
    assert!(reason.starts_with("not applicable: no command of the manifest declares `interruption` with `detach: true, resume: true`"), "{reason}");
    assert_pass(&report, &ids[1..]);
}

/// Item 4: job ids derived from the invocation are legal (REQ-F-082 fixes only "the job or
/// checkpoint identifier"): the late cancel of the rejected-cancel scenario would name the
/// running job, so that criterion does not apply; the fresh start, the stale cancel and the
/// attaching repeat pass.
#[test]
fn ids_derived_from_the_invocation_are_legal() {
    let (_dir, tool, profile) = pyagent("derived-ids", str::to_owned);
    let moot = ["rejected-cancel-leaves-continuation-running", "job-ids-are-not-guessable"];
    let judged = [
        "cancelled-invocation-starts-fresh",
        "stale-cancel-leaves-nothing-behind",
        "identical-invocations-share-one-job",
        "repeat-attaches-to-running-job",
    ];
    let only: Vec<&str> = moot.iter().chain(&judged).copied().collect();
    let (exit, report) = run(&tool, &profile, &only, &["-j", "2"]);
    assert_eq!(exit, 0, "{report:#}");
    for id in moot {
        let s = scenario(&report, id);
        assert_eq!(s["status"], "skip", "{s:#}");
        let reason = s["reason"].as_str().unwrap();
        assert!(
            reason.starts_with("not applicable to the tool's choice at step `second`"),
            "{reason}"
        );
    }
    assert_pass(&report, &judged);
    // A choice the spec leaves open is no gap of the profile: nothing is unjudged.
    assert_eq!(report["data"]["coverage"]["unjudged_musts"], serde_json::json!([]), "{report:#}");
}

/// Item 5: the manifest's root exit-code table is inherited (a command lists only codes absent
/// from it or differing from it): a "14" there counts for every interruptible command.
#[test]
fn an_incomplete_entry_in_the_root_table_counts() {
    let (_dir, tool, profile) = pyagent("root-exit-codes", str::to_owned);
    let ids = [
        "manifest-valid",
        "interruption-declares-incomplete-exit",
        "incomplete-entry-matches-danger",
        "detach-hands-off-running",
        "paused-writer-continues-with-key",
    ];
    let (exit, report) = run(&tool, &profile, &ids, &["-j", "2"]);
    assert_eq!(exit, 0, "{report:#}");
    assert_pass(&report, &ids);
}

/// Item 6: a framework whose watchdog sees `--timeout` on a tick of its own ends the call
/// within REQ-F-011's "timeout + 5 s", later than conform's own slack.
#[test]
fn a_timeout_seen_on_a_coarse_tick_is_within_the_spec_s_margin() {
    let (_dir, tool, profile) = pyagent("coarse-timeout", |text| {
        // Five seconds of work, so the tick (4 s) comes before the end.
        let slow = text.replace(
            "env = { PYAGENT_CLEANUP_MS = \"2000\" }\n",
            "env = { PYAGENT_CLEANUP_MS = \"2000\", PYAGENT_PACE_MS = \"500\" }\n",
        );
        assert_ne!(slow, text, "the profile's plain_slow role has moved");
        slow
    });
    let id = "plain-command-times-out-honestly";
    let (exit, report) = run(&tool, &profile, &[id], &[]);
    assert_eq!(exit, 0, "{report:#}");
    assert_pass(&report, &[id]);
    // It took well past the timeout plus conform's slack: the spec's margin is what held it.
    let took = scenario(&report, id)["evidence"][0]["elapsed_ms"].as_u64().unwrap();
    assert!(took >= 3500, "the call ended after {took} ms");
}

/// Item 7: `--budget` in seconds with their unit only (`0.75s`, `5s`), no milliseconds: with
/// `[tool] budget_format = "seconds"` conform writes every budget so; without it, the refusal
/// is a profile problem that names the knob, not a failure.
#[test]
fn a_budget_in_seconds_only_is_written_so() {
    let ids = [
        "budget-flag-exits-14-within-budget",
        "budget-in-seconds-is-understood",
        "work-within-budget-is-ordinary",
        "budget-zero-runs-to-the-end",
        "budget-flag-beats-env",
    ];
    let (_dir, tool, profile) = pyagent("budget-seconds", |text| {
        text.replace("[tool]\n", "[tool]\nbudget_format = \"seconds\"\n")
    });
    let (exit, report) = run(&tool, &profile, &ids, &["-j", "2"]);
    assert_eq!(exit, 0, "{report:#}");
    assert_pass(&report, &ids);
    let (_dir, tool, profile) = pyagent("budget-seconds", str::to_owned);
    let (exit, report) = run(&tool, &profile, &ids[..1], &[]);
    assert_eq!(exit, i32::from(conform::exit::UNJUDGED), "{report:#}");
    let s = scenario(&report, ids[0]);
    let reason = s["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("profile problem: the tool refused conform's `--budget"),
        "{reason}"
    );
    assert!(reason.contains("budget_format"), "{reason}");
}

/// Item 8: REQ-F-081 keys jobs per user and names no instance: a profile that says not how to
/// select one leaves the instance scenarios unjudged without keeping the run from green, and a
/// tool whose jobs any instance can read fails a `should`, not the run.
#[test]
fn instances_are_recommended_not_required() {
    let (_dir, tool, profile) = pyagent("", |text| {
        text.replace("instance_flag = \"--instance-id\"\n", "")
            .replace("instance_env = \"PYAGENT_INSTANCE_ID\"\n", "")
    });
    let (exit, report) = run(&tool, &profile, &["instance"], &[]);
    assert_eq!(exit, 0, "{report:#}");
    for s in report["data"]["scenarios"].as_array().unwrap() {
        assert_eq!(
            (s["status"].as_str(), s["level"].as_str()),
            (Some("skip"), Some("should")),
            "{s:#}"
        );
    }
    let (_dir, tool, profile) = pyagent("", |text| {
        text.replace("[tool.env]\n", "[tool.env]\nPYAGENT_FAULT = \"unscoped-jobs\"\n")
    });
    let id = "jobs-are-owned-by-their-instance";
    let (exit, report) = run(&tool, &profile, &[id], &[]);
    assert_eq!(exit, 0, "{report:#}");
    assert_eq!(scenario(&report, id)["status"], "fail", "{report:#}");
}

/// Item 9: a dead worker seen through a heartbeat lease of 4 s, not its pid: JOB_LOST comes
/// "instead of waiting" within REQ-C-034's 10 s, where a quarter of the work was the bound.
#[test]
fn a_dead_worker_seen_through_a_lease_is_reported_in_time() {
    // The idle watchdog's limit outlasts the lease here (the profile's 3 s is the stalling
    // role's): a silent job is then seen dead by its lease before it could stall out.
    let (_dir, tool, profile) = pyagent("lease", |text| {
        text.replace("PYAGENT_IDLE_TIMEOUT_MS = \"3000\"", "PYAGENT_IDLE_TIMEOUT_MS = \"30000\"")
    });
    let ids = ["dead-worker-is-job-lost", "lost-job-resumes-from-its-checkpoint"];
    let (exit, report) = run(&tool, &profile, &ids, &["-j", "1"]);
    assert_eq!(exit, 0, "{report:#}");
    assert_pass(&report, &ids);
}

/// Item 11: a probe may exit with a command-specific code its command declares (REQ-F-001,
/// REQ-C-001), as the kit allows.
#[test]
fn a_declared_command_specific_exit_is_a_standard_one() {
    let (_dir, tool, profile) = pyagent("declared-exit", |text| {
        text.replace(
            "read = [[\"version\"], [\"manifest\"]]",
            "read = [[\"version\"], [\"manifest\"], [\"lookup\", \"nothing\"]]",
        )
    });
    let ids = ["probe-exits-are-standard-codes", "read-probes-answer-one-envelope"];
    let (exit, report) = run(&tool, &profile, &ids, &[]);
    assert_eq!(exit, 0, "{report:#}");
    assert_pass(&report, &ids);
}

/// Item 12: a short detach-only writer that reports progress only at its start and end (REQ-C-034
/// allows 10 s between reports) finishes its effect before the cancel takes effect: stopping
/// the effect is a `should`, and the run stays green.
#[test]
fn a_short_writer_may_finish_before_its_cancel_takes_effect() {
    let (_dir, tool, profile) = pyagent("lazy-archive", |text| {
        format!(
            "{text}\n[roles.detach_only]\nargv = [\"archive\", \"words.txt\", \"--out\", \"copy.txt\"]\nfixtures = [\"words.txt\"]\nverify = \"wc -c < copy.txt\"\n"
        )
    });
    let id = "cancelled-writer-stops-its-effect";
    let others = ["detached-writer-leaves-the-same-effect", "cancel-leaves-no-worker"];
    let only: Vec<&str> = std::iter::once(id).chain(others).collect();
    let (exit, report) = run(&tool, &profile, &only, &["-j", "2"]);
    assert_eq!(exit, 0, "{report:#}");
    let s = scenario(&report, id);
    assert_eq!(
        (s["status"].as_str(), s["level"].as_str()),
        (Some("fail"), Some("should")),
        "{s:#}"
    );
    assert_eq!(s["findings"][0]["check"], "effect", "{s:#}");
    assert_pass(&report, &others);
}

/// Item 13: `job wait <id>` followed by the instance the job belongs to.
#[test]
fn a_continuation_that_names_its_instance_hands_off() {
    let (_dir, tool, profile) = pyagent("always-select", str::to_owned);
    let ids = ["detach-hands-off-running", "continue-loop-ends-in-calibrated-response"];
    let (exit, report) = run(&tool, &profile, &ids, &["-j", "2"]);
    assert_eq!(exit, 0, "{report:#}");
    assert_pass(&report, &ids);
}

/// Item 14: a Level 2 tool without §79 answers `job status` of its running async job with the
/// INCOMPLETE response and no `meta.budget_ms` (its commands declare no interruption, so no
/// budget applies): REQ-C-022's criterion holds.
#[test]
fn an_async_status_without_a_budget_is_incomplete_enough() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/tools/foreign")
        .canonicalize()
        .unwrap();
    let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
    let cwd = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(dir.join("conform.toml")).unwrap();
    let notes = format!("command = [{:?}]", dir.join("notes").display().to_string());
    assert!(text.contains("command = [\"./notes\"]") && text.contains("[tool.env]\n"));
    let text = text
        .replace("command = [\"./notes\"]", &notes)
        .replace("[tool.env]\n", "[tool.env]\nNOTES_RUNNING_EXIT = \"14\"\n");
    let profile = cwd.path().join("conform.toml");
    std::fs::write(&profile, text).unwrap();
    let id = "async-job-status-exits-14";
    let out = conform()
        .current_dir(cwd.path())
        .env("PATH", path)
        .args(["run", "--profile"])
        .arg(&profile)
        .args(["--only", id, "--format", "json"])
        .output()
        .unwrap();
    let report = stdout_json(&out);
    assert_eq!(code(&out), 0, "{report:#}");
    assert_pass(&report, &[id]);
}

/// Item 15: a command whose data carries what it measured (`elapsed_ms`): the plain command's
/// ending is compared by its shape, and a role names its measured value in `redact` for the
/// calibrated comparison of the continue loop.
#[test]
fn measured_values_in_data_are_compared_as_the_criterion_needs() {
    let plain = "plain-slow-ignores-budget-env";
    let loop_end = "continue-loop-ends-in-calibrated-response";
    let (_dir, tool, profile) = pyagent("measured-data", str::to_owned);
    let (exit, report) = run(&tool, &profile, &[plain, loop_end], &["-j", "2"]);
    assert_eq!(exit, 80, "{report:#}");
    assert_pass(&report, &[plain]);
    assert_eq!(scenario(&report, loop_end)["findings"][0]["check"], "calibrated-equality");
    let (_dir, tool, profile) = pyagent("measured-data", |text| {
        text.replace(
            "[roles.detach]\nargv = [\"count\", \"words.txt\"]\n",
            "[roles.detach]\nargv = [\"count\", \"words.txt\"]\nredact = [\"/data/elapsed_ms\"]\n",
        )
    });
    let (exit, report) = run(&tool, &profile, &[loop_end], &[]);
    assert_eq!(exit, 0, "{report:#}");
    assert_pass(&report, &[loop_end]);
}

/// Item 16: a command that hands off after its first chunk (REQ-F-080: it MAY, from a cheap
/// estimate) reports the same progress at every fresh start.
#[test]
fn a_hand_off_after_the_first_chunk_starts_fresh_as_well() {
    let (_dir, tool, profile) = pyagent("early-handoff", str::to_owned);
    let ids = [
        "cancelled-invocation-starts-fresh",
        "detach-hands-off-running",
        "continue-loop-ends-in-calibrated-response",
        "lost-job-resumes-from-its-checkpoint",
    ];
    let (exit, report) = run(&tool, &profile, &ids, &["-j", "2"]);
    assert_eq!(exit, 0, "{report:#}");
    assert_pass(&report, &ids);
}

/// Item 17: a valid envelope whose data nests 128 levels deep is one JSON document.
#[test]
fn an_envelope_nested_128_deep_is_one_document() {
    let (_dir, tool, profile) = pyagent("deep-data", str::to_owned);
    let ids = ["read-probes-answer-one-envelope", "probe-exits-are-standard-codes"];
    let (exit, report) = run(&tool, &profile, &ids, &[]);
    assert_eq!(exit, 0, "{report:#}");
    assert_pass(&report, &ids);
}

/// Item 18: a manifest of schema version 3.21 with a root field 3.20 does not know: valid on
/// what 3.20 requires, the new field named in an advisory note.
#[test]
fn a_newer_manifest_with_additive_fields_is_valid() {
    let (_dir, tool, profile) = pyagent("schema-3-21", str::to_owned);
    let id = "manifest-valid";
    let (exit, report) = run(&tool, &profile, &[id], &[]);
    assert_eq!(exit, 0, "{report:#}");
    let s = scenario(&report, id);
    assert_eq!(s["status"], "pass", "{s:#}");
    let notes: Vec<&str> =
        s["notes"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("schema_version 3.21") && n.contains("at `/`: error_codes")),
        "{notes:#?}"
    );
}
