//! `conform run` end to end against the fake tool: the quick checks without a profile, the
//! role scenarios with one, and each planted fault caught by the scenario meant for it.

use rstest::rstest;

use crate::support::{
    code, conform, errors, fake_profile, faketool, pyagent_with, status_of, stdout_json, validator,
};

/// A profile of this text in a directory of its own (kept while the guard lives).
fn profile_with(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("conform.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn run_json(args: &[&str], profile: Option<&std::path::Path>) -> (i32, serde_json::Value) {
    let mut cmd = conform();
    cmd.arg("run").arg(faketool()).args(["--format", "json"]).args(args);
    if let Some(p) = profile {
        cmd.arg("--profile").arg(p);
    }
    // No conform.toml may be picked up from the test's working directory.
    let cwd = tempfile::tempdir().unwrap();
    let out = cmd.current_dir(cwd.path()).output().unwrap();
    (code(&out), stdout_json(&out))
}

fn findings_of<'a>(report: &'a serde_json::Value, id: &str) -> Vec<&'a str> {
    report["data"]["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .map(|s| {
            s["findings"].as_array().unwrap().iter().filter_map(|f| f["check"].as_str()).collect()
        })
        .unwrap_or_default()
}

/// The skip reason of a scenario in a JSON report.
fn reason_of(report: &serde_json::Value, id: &str) -> String {
    let scenarios = report["data"]["scenarios"].as_array().unwrap();
    let scenario = scenarios.iter().find(|s| s["id"] == id).unwrap();
    scenario["reason"].as_str().unwrap().to_owned()
}

#[test]
fn without_a_profile_the_quick_checks_run_and_pass() {
    // Nothing fails, but the musts that need roles went unjudged: not green (82), unless the
    // gate accepts it.
    let (code, report) = run_json(&["-j", "3"], None);
    assert_eq!(code, i32::from(conform::exit::UNJUDGED), "{report:#}");
    assert!(!report["data"]["coverage"]["unjudged_musts"].as_array().unwrap().is_empty());
    assert_eq!(report["data"]["conformant"], true);
    let (allowed, _) = run_json(&["-j", "3", "--allow-unjudged", "--only", "REQ-C-033"], None);
    assert_eq!(allowed, 0);
    assert!(errors(&validator("response-envelope.json"), &report).is_empty());
    assert!(errors(&validator("conform-report-data.json"), &report["data"]).is_empty());
    for id in [
        "manifest-valid",
        "interruption-has-detach-or-resume",
        "budget-flag-listed-where-interruptible",
        "unknown-flag-is-arg-error",
        "plain-command-ignores-budget-env",
    ] {
        assert_eq!(status_of(&report, id), "pass", "{id}: {report:#}");
    }
    assert_eq!(status_of(&report, "detach-hands-off-running"), "skip");
    let reason = reason_of(&report, "detach-hands-off-running");
    // The fake tool has no `detach: true` command, so no profile could fill the role.
    assert!(reason.starts_with("not applicable: no command of the manifest declares"), "{reason}");
    let reason = reason_of(&report, "killed-reader-resumes-from-its-checkpoint");
    // Its resumable `count` could be the `resume_reader`: a gap in the (missing) profile.
    assert!(
        reason.starts_with(
            "no profile (conform.toml), so no `resume_reader` role; the manifest's `count`"
        ),
        "{reason}"
    );
}

/// A plain command that takes `--budget` fails the behaviour (a `must`, so the run is not
/// conformant) and the listing (a `should`).
#[test]
fn a_plain_command_taking_budget_is_caught_by_its_behaviour() {
    let dir = tempfile::tempdir().unwrap();
    let profile = fake_profile(dir.path(), ", FAKETOOL_FAULT = \"budget-flag-on-plain\"");
    let text = std::fs::read_to_string(&profile).unwrap();
    std::fs::write(&profile, format!("{text}\n[roles.plain_slow]\nargv = [\"greet\"]\n")).unwrap();
    let only = [
        "--only",
        "budget-flag-only-when-interruptible",
        "--only",
        "budget-flag-listed-where-interruptible",
    ];
    let (code, report) = run_json(&only, Some(&profile));
    assert_eq!(code, 80, "{report:#}");
    assert_eq!(status_of(&report, "budget-flag-only-when-interruptible"), "fail");
    assert!(findings_of(&report, "budget-flag-only-when-interruptible").contains(&"exit-code"));
    assert_eq!(status_of(&report, "budget-flag-listed-where-interruptible"), "fail");
    assert!(
        findings_of(&report, "budget-flag-listed-where-interruptible").contains(&"manifest-rule")
    );
}

/// Every planted fault fails the run (NOT_CONFORMANT 80) through the scenario meant for it.
#[rstest]
#[case::unknown_flag("unknown-flag-exit-1", "unknown-flag-is-arg-error", "exit-code")]
#[case::budget_env("budget-env-on-plain", "plain-command-ignores-budget-env", "json-pointer")]
#[case::ansi("ansi-on-stdout", "read-probes-keep-ansi-off-stdout", "ansi")]
#[case::not_verbatim(
    "continue-not-verbatim",
    "paused-continue-is-the-original-invocation",
    "continue-command"
)]
#[case::invalid_probe("unknown-flag-exit-1", "invalid-probes-are-arg-errors", "exit-code")]
#[case::unconfirmed("wipe-unconfirmed", "destructive-refuses-unconfirmed", "exit-code")]
fn a_planted_fault_is_caught(#[case] fault: &str, #[case] scenario: &str, #[case] check: &str) {
    planted_fault_is_caught(fault, scenario, check);
}

/// conform run against faketool with `fault`: `scenario` fails with a `check` finding.
fn planted_fault_is_caught(fault: &str, scenario: &str, check: &str) {
    let dir = tempfile::tempdir().unwrap();
    let profile = fake_profile(dir.path(), &format!(", FAKETOOL_FAULT = \"{fault}\""));
    let (code, report) = run_json(&["--only", scenario], Some(&profile));
    assert_eq!(code, 80, "{report:#}");
    assert_eq!(status_of(&report, scenario), "fail");
    assert!(findings_of(&report, scenario).contains(&check), "{report:#}");
}

#[test]
fn a_role_too_fast_to_interrupt_is_skipped_with_the_reason() {
    let (_dir, path) = profile_with(
        "[tool]\nenv = { FAKETOOL_PACE_MS = \"5\" }\n[roles.resume_reader]\nargv = [\"count\", \"--units\", \"3\"]\n",
    );
    let (code, report) = run_json(&["--only", "progress-never-decreases"], Some(&path));
    // A role with too little work is the profile's to fix: the must went unjudged.
    assert_eq!(code, i32::from(conform::exit::UNJUDGED), "{report:#}");
    let s = &report["data"]["scenarios"][0];
    assert_eq!(s["status"], "skip");
    assert!(s["reason"].as_str().unwrap().contains("too fast to interrupt"), "{s:#}");
    assert_eq!(report["data"]["coverage"]["unjudged_musts"][0], "progress-never-decreases");
}

/// The opt-in `long_work` lane, on pyagent (whose `count` detaches): a profile without the
/// role is not held at 82 for it, and the reason names the role to add (the heavy twin holds a
/// role too short for the lane at 82).
#[test]
fn a_missing_long_work_role_is_named_but_not_unjudged() {
    let without = |text: &str| {
        let start = text.find("[roles.long_work]").unwrap();
        let end = start + text[start..].find("\n[").unwrap() + 1;
        format!("{}{}", &text[..start], &text[end..])
    };
    let (_dir, tool, profile) = pyagent_with(without);
    let (code, report) = run_tool_json(&tool, &profile, "long_work");
    assert_eq!(code, 0, "{report:#}");
    let scenarios = report["data"]["scenarios"].as_array().unwrap();
    assert_eq!(scenarios.len(), 2, "{report:#}");
    for s in scenarios {
        assert_eq!(s["status"], "skip", "{s:#}");
        let reason = s["reason"].as_str().unwrap();
        assert!(reason.contains("[roles.long_work]") && reason.contains("12 s"), "{reason}");
    }
    assert_eq!(report["data"]["coverage"]["unjudged_musts"], serde_json::json!([]));
}

/// `conform run TOOL --format json --only ONLY --profile PROFILE` from an empty directory.
fn run_tool_json(
    tool: &std::path::Path,
    profile: &std::path::Path,
    only: &str,
) -> (i32, serde_json::Value) {
    let cwd = tempfile::tempdir().unwrap();
    let out = conform()
        .current_dir(cwd.path())
        .arg("run")
        .arg(tool)
        .args(["--format", "json", "--only", only, "--profile"])
        .arg(profile)
        .output()
        .unwrap();
    (code(&out), stdout_json(&out))
}

#[test]
fn a_baseline_turns_a_known_failure_into_an_expected_one_and_flags_stale_entries() {
    let dir = tempfile::tempdir().unwrap();
    let profile = fake_profile(dir.path(), ", FAKETOOL_FAULT = \"unknown-flag-exit-1\"");
    let baseline = dir.path().join("baseline.toml");
    std::fs::write(
        &baseline,
        "[[expected_failures]]\nscenario = \"unknown-flag-is-arg-error\"\nreason = \"known\"\n",
    )
    .unwrap();
    let b = baseline.to_str().unwrap();
    let (code, _) = run_json(&["--only", "REQ-F-004", "--baseline", b], Some(&profile));
    assert_eq!(code, 0);
    let (code, _) = run_json(&["--only", "REQ-F-004", "--baseline", b], None);
    assert_eq!(code, 81, "a stale entry must fail the run");
}

#[test]
fn junit_and_markdown_reports_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("report.xml");
    let md = dir.path().join("summary.md");
    let out = conform()
        .current_dir(dir.path())
        .arg("run")
        .arg(faketool())
        .args(["--only", "REQ-C-033", "--allow-unjudged", "--junit"])
        .arg(&junit)
        .arg("--summary-md")
        .arg(&md)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(xml.contains("manifest-valid"), "{xml}");
    assert!(std::fs::read_to_string(&md).unwrap().contains("REQ-C-033"));
}

#[test]
fn a_tool_printing_prose_fails_with_the_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let tool = dir.path().join("prose");
    crate::support::write_executable(
        &tool,
        "#!/bin/sh\necho 'Hello! I am a friendly tool.'\nexit 0\n",
    );
    let out = conform()
        .current_dir(dir.path())
        .arg("run")
        .arg(&tool)
        .args(["--only", "manifest-valid", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 80);
    let report = stdout_json(&out);
    assert_eq!(findings_of(&report, "manifest-valid"), ["stdout-not-json"]);
    let evidence = &report["data"]["scenarios"][0]["evidence"][0];
    assert!(evidence["stdout"]["text"].as_str().unwrap().contains("friendly tool"), "{evidence:#}");
}

/// conform refuses to run a writing command the profile did not name, even when a scenario
/// asks for it: the scenario is a harness error, and the tool never sees the call.
#[test]
fn a_destructive_command_outside_the_profile_is_never_run() {
    use conform::catalogue::parse_scenario;
    use conform::profile::Profile;
    use conform::run::Engine;

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.log");
    let profile_path = dir.path().join("conform.toml");
    let profile_text = format!("[tool]\nenv = {{ FAKETOOL_LOG = \"{}\" }}\n", log.display());
    let profile = Profile::parse(&profile_path, &profile_text).unwrap();
    let engine = Engine::new(faketool(), profile, false);
    let scenario = parse_scenario(
        "REQ-F-004/wipe.toml",
        "id = \"wipe\"\nrequirement = \"REQ-F-004\"\ncriterion = \"c\"\nlevel = \"must\"\n\
         [[steps]]\naction = \"run\"\nname = \"wipe\"\nargs = [\"wipe\"]\nexpect = { exit = 0 }\n",
    )
    .unwrap();
    let result = engine.run_scenario(&scenario);
    match &result.status {
        conform::outcome::Status::Error { message } => {
            assert!(message.contains("refusing to run `wipe`"), "{message}");
        }
        other => panic!("expected a harness error, got {other:?}"),
    }
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(calls.lines().all(|l| l == "manifest"), "the tool saw: {calls}");
    assert!(calls.contains("manifest"), "discovery must have run: {calls:?}");
}

/// A scenario of several attempts fails on the first attempt that fails and passes only when
/// every attempt passes; the note says which attempt gave the verdict.
#[test]
fn a_scenario_of_several_attempts_fails_on_the_first_that_fails() {
    use conform::catalogue::parse_scenario;
    use conform::outcome::Status;
    use conform::profile::Profile;
    use conform::run::Engine;

    let dir = tempfile::tempdir().unwrap();
    let profile = Profile::parse(&dir.path().join("conform.toml"), "").unwrap();
    let engine = Engine::new(faketool(), profile, false);
    // Each attempt counts itself in a file outside its sandbox; the step fails once the
    // count reaches `fails_from`.
    let run = |name: &str, fails_from: u32| {
        let counter = dir.path().join(name);
        let text = format!(
            "id = \"s\"\nrequirement = \"REQ-F-080\"\ncriterion = \"c\"\nlevel = \"must\"\nattempts = 3\n\
             [[steps]]\naction = \"shell\"\nname = \"count\"\n\
             command = \"n=$(( $(cat {c} 2>/dev/null || echo 0) + 1 )); echo $n > {c}; test $n -lt {fails_from}\"\n",
            c = counter.display()
        );
        let result = engine.run_scenario(&parse_scenario("REQ-F-080/s.toml", &text).unwrap());
        let count = std::fs::read_to_string(&counter).unwrap().trim().parse::<u32>().unwrap();
        let notes: Vec<String> = result.notes.iter().map(ToString::to_string).collect();
        (result.status, count, notes.join("; "))
    };
    let (status, count, notes) = run("fails-second", 2);
    assert_eq!(status, Status::Fail, "{notes}");
    assert_eq!(count, 2, "the attempt after the failing one never runs");
    assert!(notes.contains("failed on attempt 2 of 3"), "{notes}");
    let (status, count, notes) = run("never-fails", 9);
    assert_eq!(status, Status::Pass, "{notes}");
    assert_eq!(count, 3, "every attempt runs");
    assert!(notes.contains("passed all 3 attempts"), "{notes}");
    let (status, count, notes) = run("fails-first", 1);
    assert_eq!((status, count), (Status::Fail, 1), "{notes}");
    assert!(notes.contains("failed on its first attempt of 3"), "{notes}");
}

/// pyagent, the independent Python implementation in the workspace's fixtures.
fn pyagent() -> (std::path::PathBuf, std::path::PathBuf) {
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tools/pyagent");
    (root.join("pyagent.py"), root.join("fixtures/conform.toml"))
}

/// Every process a scenario runs is placed on the scenario's timeline: when it started, from
/// the scenario's start, and how long its call could hold the caller; a run that passes keeps
/// these in the JSON report too, and they validate against the report's schema.
#[test]
fn each_call_is_placed_on_the_scenario_s_timeline() {
    let dir = tempfile::tempdir().unwrap();
    let profile = fake_profile(dir.path(), "");
    let id = "paused-continue-is-the-original-invocation";
    let (code, report) = run_json(&["--only", id, "--evidence", "all"], Some(&profile));
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(
        errors(&validator("conform-report-data.json"), &report["data"]),
        Vec::<String>::new()
    );
    let scenario = report["data"]["scenarios"].as_array().unwrap().iter().find(|s| s["id"] == id);
    let scenario = scenario.unwrap();
    let duration = scenario["duration_ms"].as_u64().unwrap();
    let mut last_start = 0;
    let records = scenario["evidence"].as_array().unwrap();
    assert!(records.len() >= 2, "{scenario:#}");
    for record in records {
        let started = record["started_ms"].as_u64().unwrap_or_else(|| panic!("{record:#}"));
        let elapsed = record["elapsed_ms"].as_u64().unwrap();
        assert!(started >= last_start, "the steps ran one after the other: {scenario:#}");
        assert!(started + elapsed <= duration, "within the scenario: {scenario:#}");
        last_start = started;
    }
    // The call with a budget says it, and how long it could hold its caller; the budget is
    // the one conform passed.
    let call =
        records.iter().find(|r| r["budget_ms"].is_u64()).unwrap_or_else(|| panic!("{scenario:#}"));
    let argv: Vec<&str> = call["repro"]["command"]["value"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str())
        .collect();
    let flag = argv.iter().position(|w| *w == "--budget").unwrap();
    assert_eq!(format!("{}ms", call["budget_ms"]), argv[flag + 1], "{call:#}");
    assert!(call["may_hold_ms"].as_u64().unwrap() > call["budget_ms"].as_u64().unwrap());
}

/// Out of the edit lane (`.config/nextest.toml`): these wait out timeouts or run conform over whole tools.
mod heavy {
    use super::*;

    /// A `long_work` role too short for its scenarios (pyagent's at 50 ms a chunk: about 1 s
    /// of work) is a gap the vendor opened: the must is unjudged (82), and the reason says so.
    #[test]
    fn a_long_work_role_too_short_for_the_lane_is_unjudged() {
        let short =
            |text: &str| text.replace("PYAGENT_PACE_MS = \"1200\"", "PYAGENT_PACE_MS = \"50\"");
        let (_dir, tool, profile) = pyagent_with(short);
        let (code, report) =
            super::run_tool_json(&tool, &profile, "progress-advances-every-ten-seconds");
        assert_eq!(code, i32::from(conform::exit::UNJUDGED), "{report:#}");
        let s = &report["data"]["scenarios"][0];
        let reason = s["reason"].as_str().unwrap();
        assert!(
            reason.contains("too short for its scenarios") && reason.contains("12000 ms"),
            "{s:#}"
        );
        let unjudged = &report["data"]["coverage"]["unjudged_musts"];
        assert_eq!(unjudged[0], "progress-advances-every-ten-seconds");
    }

    /// The planted faults whose scenarios wait on paced work or a leak's grace.
    #[rstest]
    #[case::progress("progress-backwards", "progress-never-decreases", "progress-monotonic")]
    #[case::final_response(
        "lost-final",
        "paused-continue-is-the-original-invocation",
        "calibrated-equality"
    )]
    #[case::leak("leak-on-manifest", "manifest-valid", "leaked-process")]
    fn a_planted_fault_is_caught(#[case] fault: &str, #[case] scenario: &str, #[case] check: &str) {
        planted_fault_is_caught(fault, scenario, check);
    }

    /// A tool that never answers is bounded: the step is killed at its limit, reported as a
    /// timeout, and nothing of it is left running.
    #[test]
    fn a_hanging_tool_is_bounded_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("hang");
        let pids = dir.path().join("pids");
        crate::support::write_executable(
            &tool,
            format!("#!/bin/sh\necho $$ >> '{}'\nexec sleep 600\n", pids.display()),
        );
        let started = std::time::Instant::now();
        let out = conform()
            .current_dir(dir.path())
            .arg("run")
            .arg(&tool)
            .args(["--only", "manifest-valid", "--format", "json"])
            .output()
            .unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(60), "{:?}", started.elapsed());
        assert_eq!(code(&out), 80);
        let report = stdout_json(&out);
        assert!(findings_of(&report, "manifest-valid").contains(&"timeout"), "{report:#}");
        for pid in std::fs::read_to_string(&pids).unwrap().lines() {
            assert!(!crate::support::alive(pid), "process {pid} survived");
        }
    }

    #[test]
    fn role_scenarios_pass_with_a_profile() {
        let dir = tempfile::tempdir().unwrap();
        let profile = fake_profile(dir.path(), "");
        let (code, report) = run_json(
            &["--only", "resume_reader", "--only", "kit", "-j", "2", "--allow-unjudged"],
            Some(&profile),
        );
        assert_eq!(code, 0, "{report:#}");
        for id in [
            "paused-continue-is-the-original-invocation",
            "progress-never-decreases",
            "read-probes-end-with-stdin-closed",
            "read-probes-end-with-stdin-open",
            "read-probes-keep-ansi-off-stdout",
            "no-color-is-honoured",
            "invalid-probes-are-arg-errors",
            "destructive-refuses-unconfirmed",
            "dry-run-previews",
        ] {
            assert_eq!(status_of(&report, id), "pass", "{id}: {report:#}");
        }
    }

    #[test]
    fn calibration_runs_once_per_role_even_in_parallel() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("calls.log");
        let profile = fake_profile(dir.path(), &format!(", FAKETOOL_LOG = \"{}\"", log.display()));
        // Three scenarios of the role that never run `--budget 0` themselves, so every such call
        // in the log is a calibration.
        let only = [
            "--only",
            "paused-continue-is-the-original-invocation",
            "--only",
            "progress-never-decreases",
            "--only",
            "resume-only-pauses-within-budget",
        ];
        let (code, _) = run_json(&[&only[..], &["-j", "3"]].concat(), Some(&profile));
        assert_eq!(code, 0);
        let calls = std::fs::read_to_string(&log).unwrap();
        let calibrations = calls.lines().filter(|l| l.ends_with("--budget\t0")).count();
        assert_eq!(calibrations, 1, "{calls}");
    }

    /// The fake tool names its checkpoints by their work (`count-0010`), as a counter would: the
    /// id check must see that a second job's id is the first one's.
    #[test]
    fn predictable_job_ids_are_caught() {
        let (_dir, path) = profile_with(
            "[tool]\nenv = { FAKETOOL_PACE_MS = \"150\" }\n[roles.detach]\nargv = [\"count\", \"--units\", \"10\"]\n",
        );
        let (code, report) = run_json(&["--only", "job-ids-are-not-guessable"], Some(&path));
        // The fake tool declares no `detach: true` command, so a `detach` role on its resumable
        // `count` judges nothing: the scenario does not apply (the id check itself is proven by
        // reftool's `clock-job-ids` row of the mutant matrix).
        assert_eq!(code, 0, "{report:#}");
        assert_eq!(status_of(&report, "job-ids-are-not-guessable"), "skip", "{report:#}");
        let reason = reason_of(&report, "job-ids-are-not-guessable");
        assert!(
            reason.starts_with("not applicable: no command of the manifest declares"),
            "{reason}"
        );
    }

    /// A criterion whose premise the run did not meet is skipped, not failed: a `count` whose
    /// start-up eats its whole first budget pauses at 0 done, so whether the cancel discarded the
    /// checkpoint (progress restarting below the first call's) cannot be seen. The same scenario
    /// passes when the first call made progress (`role_scenarios_pass_with_a_profile`'s run).
    #[test]
    fn a_premise_the_run_did_not_meet_skips_the_scenario_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        // Two seconds eat the first call's budget (about 0.8 s) but stay within what a call may
        // hold its caller (the budget, the next checkpoint, the start-up and the slack: about
        // 3.9 s), so the pause at 0 done is legal and only the premise is missed.
        let profile = fake_profile(dir.path(), ", FAKETOOL_BUDGETED_START_MS = \"2000\"");
        let id = "paused-cancel-discards-the-checkpoint";
        let (code, report) = run_json(&["--only", id], Some(&profile));
        assert_eq!(status_of(&report, id), "skip", "{report:#}");
        let reason = reason_of(&report, id);
        assert!(reason.starts_with("premise not met at step `call`"), "{reason}");
        assert!(reason.contains("/data/progress/done"), "{reason}");
        // The premise was not met alone either (the start-up eats the budget every time): no
        // failure, but a must the run could not judge, which the profile can fix (more work).
        assert_eq!(code, 82, "a skip is no failure, and no green run: {report:#}");
        let scenario =
            report["data"]["scenarios"].as_array().unwrap().iter().find(|s| s["id"] == id);
        assert_eq!(scenario.unwrap()["first_run"]["status"], "skip", "{report:#}");
        assert_eq!(report["data"]["confirmation"]["rerun_for_premise"][0], id);
    }

    /// A failed `should` alone leaves the run conformant; the strict gate, from the command line or
    /// from the profile's `[gate]`, makes it NOT_CONFORMANT (80) and says why.
    #[test]
    fn the_strict_gate_fails_a_run_on_a_failed_should() {
        let dir = tempfile::tempdir().unwrap();
        let profile = fake_profile(dir.path(), ", FAKETOOL_FAULT = \"budget-flag-on-plain\"");
        let id = "budget-flag-listed-where-interruptible";
        let (code, report) = run_json(&["--only", id], Some(&profile));
        assert_eq!((code, status_of(&report, id)), (0, "fail"), "{report:#}");
        assert_eq!(report["data"]["strict"], false);
        let (code, report) = run_json(&["--only", id, "--strict"], Some(&profile));
        assert_eq!(code, 80, "{report:#}");
        assert_eq!(
            (report["data"]["strict"].clone(), report["data"]["conformant"].clone()),
            (true.into(), false.into())
        );
        let text = std::fs::read_to_string(&profile).unwrap();
        std::fs::write(&profile, format!("[gate]\nstrict = true\n\n{text}")).unwrap();
        let (code, _) = run_json(&["--only", id], Some(&profile));
        assert_eq!(code, 80);
        let cwd = tempfile::tempdir().unwrap();
        let human = conform()
            .arg("run")
            .arg(faketool())
            .args(["--only", id, "--profile"])
            .arg(&profile)
            .current_dir(cwd.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&human.stdout);
        assert!(
            text.contains("NOT CONFORMANT under the strict gate (a `should` failed)"),
            "{text}"
        );
    }
}

/// Out of the edit lane, and alone in CI: they load the machine, or time a tool that the load of other tests would stretch.
mod alone {
    use super::*;

    /// The detach scenarios (kill of the worker, of the caller's group, concurrent copies, pipes,
    /// cancels, instances) against a real detaching tool written apart from conform; then the same
    /// with the tool's worker holding the caller's stdout, which the pipes check must catch.
    #[test]
    fn the_detach_scenarios_pass_on_an_independent_implementation_and_catch_held_pipes() {
        let (tool, profile) = pyagent();
        let out = conform()
            .arg("run")
            .arg(&tool)
            .arg("--profile")
            .arg(&profile)
            // Its profile has no `failing` role: that must goes unjudged, accepted here.
            .args(["--only", "REQ-F-081", "-j", "2", "--allow-unjudged", "--format", "json"])
            .output()
            .unwrap();
        let report = stdout_json(&out);
        assert_eq!(code(&out), 0, "{report:#}");
        let passed = report["data"]["counts"]["pass"].as_u64().unwrap();
        assert!(passed >= 10, "only {passed} passed: {report:#}");

        let dir = tempfile::tempdir().unwrap();
        let faulty = dir.path().join("conform.toml");
        let text = std::fs::read_to_string(&profile)
            .unwrap()
            .replace("[tool.env]\n", "[tool.env]\nPYAGENT_FAULT = \"pipes-held\"\n");
        assert!(text.contains("pipes-held"), "the profile's [tool.env] table moved");
        std::fs::write(&faulty, text).unwrap();
        // Its fixtures are relative to the profile: bring every one of them along.
        for entry in std::fs::read_dir(profile.parent().unwrap()).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() && path.file_name() != profile.file_name() {
                std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
            }
        }
        let out = conform()
            .arg("run")
            .arg(&tool)
            .arg("--profile")
            .arg(&faulty)
            .args(["--only", "pipes-released-on-handoff", "--format", "json"])
            .output()
            .unwrap();
        let report = stdout_json(&out);
        assert_eq!(code(&out), 80, "{report:#}");
        assert_eq!(findings_of(&report, "pipes-released-on-handoff"), ["pipes-released"]);
    }
}
