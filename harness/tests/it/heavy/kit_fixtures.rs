//! conform against the kit fixtures (`tests/fixtures/tools/kit/`): tiny tools that each break
//! one check of the spec's conformance kit. Each must fail the scenario meant for its check,
//! and the fixture without a fault must pass every kit scenario, so a kit scenario that stops
//! looking (or starts failing honest tools) is caught here.
//!
//! Three faults are subtler than a wrong exit code, and each has its scenario: `dry-run-acts`
//! (a preview that deletes) is caught by `dry-run-changes-nothing`, `help-on-stdout` by
//! `help-keeps-stdout-clean` (REQ-F-048), and `refuses-with-4` by
//! `destructive-refuses-unconfirmed`, which asks for ARG_ERROR 2 as REQ-O-021 and the spec kit
//! do.
//!
//! The kit's last three checks have fixtures too: argument order (`last-wins`, `posix-options`,
//! ...), the stream contract (`stream-*`) and SIGINT on a stream (`sigint-*`). Two of them never
//! end by themselves (`stream-stalls`, `sigint-hangs`): conform must kill them at the stream's
//! deadline and leave nothing running. `kit-profile.json` describes the same tool in the spec
//! kit's JSON format, naming `good` as its command, so conform runs it without a TOOL argument.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rstest::rstest;

use conform::step::NO_HANG_CLOSED;

use crate::support::{code, conform, status_of, stdout_json};

/// Every scenario tagged `kit` in the catalogue.
const KIT_SCENARIOS: &[&str] = &[
    "read-probes-end-with-stdin-closed",
    "read-probes-end-with-stdin-open",
    "read-probes-keep-ansi-off-stdout",
    "no-color-is-honoured",
    "invalid-probes-are-arg-errors",
    "dry-run-previews",
    "destructive-refuses-unconfirmed",
    "help-keeps-stdout-clean",
    "dry-run-changes-nothing",
    "read-probes-answer-one-envelope",
    "probe-exits-are-standard-codes",
    "manifest-valid",
    "global-option-means-the-same-anywhere",
    "global-option-value-survives-the-command",
    "conflicting-repeats-are-arg-errors",
    "same-value-repeats-are-accepted",
    "options-after-positionals-take-effect",
    "stream-lines-keep-the-contract",
    "sigint-ends-the-stream-cancelled",
];

/// The scenario of the kit's stream_contract check.
const STREAM_CONTRACT: &str = "stream-lines-keep-the-contract";
/// The scenario of the kit's stream_sigint check.
const STREAM_SIGINT: &str = "sigint-ends-the-stream-cancelled";

fn kit_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tools/kit")
}

/// `conform run <fixture> --profile kit/conform.toml --format json <args>`: exit and report.
fn run_kit(fixture: &str, args: &[&str]) -> (i32, serde_json::Value) {
    let cwd = tempfile::tempdir().unwrap();
    let out = conform()
        .arg("run")
        .arg(kit_dir().join(fixture))
        .arg("--profile")
        .arg(kit_dir().join("conform.toml"))
        .args(["--format", "json"])
        .args(args)
        .current_dir(cwd.path())
        .output()
        .unwrap();
    (code(&out), stdout_json(&out))
}

/// The fixture run directly in a fresh home, stdin closed.
fn fixture(name: &str, home: &Path, args: &[&str]) -> Output {
    Command::new(kit_dir().join(name))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn the_fixture_without_a_fault_passes_every_kit_scenario() {
    let (exit, report) = run_kit("good", &["--only", "kit", "-j", "4"]);
    assert_eq!(exit, 0, "{report:#}");
    for id in KIT_SCENARIOS {
        assert_eq!(status_of(&report, id), "pass", "{id}: {report:#}");
    }
    let ran = report["data"]["scenarios"].as_array().unwrap();
    assert_eq!(ran.len(), KIT_SCENARIOS.len(), "a kit scenario is missing from this list");
}

/// The kit's checks as a report answers them, by id.
fn kit_check_statuses(report: &serde_json::Value) -> Vec<(String, String)> {
    report["data"]["kit_checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| {
            (k["check"].as_str().unwrap().to_owned(), k["status"].as_str().unwrap().to_owned())
        })
        .collect()
}

/// Each fault, against every kit scenario: the scenario meant for it fails, the kit checks the
/// spec kit fails for that fault fail, and every other kit check passes, so one fault is
/// charged to the kit check the kit charges it to and to no other. A fault that hangs a probe
/// (`hangs`) leaves the other checks of that probe skipped, naming the no-hang scenario that
/// judges the hang (the kit judges nothing else of a probe that hangs with stdin closed).
/// Where a fault fails several kit checks, the kit fails all of them too (`ansi-stdout`'s
/// coloured envelope is no envelope; a refusal with the wrong code also breaks the
/// argument-order conflict); `dry-run-acts` and `repeat-refused` are where conform is
/// stricter than the kit, which passes both.
#[rstest]
#[case::pager_on_open_stdin(
    "pager-on-open-stdin",
    "read-probes-end-with-stdin-open",
    &["no_hang_stdin_open"],
    false
)]
#[case::prompt_on_open_stdin(
    "prompt-on-open-stdin",
    "read-probes-end-with-stdin-open",
    &["no_hang_stdin_open"],
    false
)]
#[case::prompt_on_closed_stdin(
    "prompt-on-closed-stdin",
    "read-probes-end-with-stdin-closed",
    &["no_hang_stdin_closed"],
    true
)]
#[case::ansi_stdout(
    "ansi-stdout",
    "read-probes-keep-ansi-off-stdout",
    &["json_envelope", "stdout_no_ansi", "no_color_honored"],
    false
)]
#[case::no_color_ignored("no-color-ignored", "no-color-is-honoured", &["no_color_honored"], false)]
#[case::error_colour_ignores_no_color(
    "error-colour-ignores-no-color",
    "no-color-is-honoured",
    &["no_color_honored"],
    false
)]
#[case::invalid_exits_1(
    "invalid-exits-1",
    "invalid-probes-are-arg-errors",
    &["invalid_input_exit_2", "argument_order"],
    false
)]
#[case::destructive_unconfirmed(
    "destructive-unconfirmed",
    "destructive-refuses-unconfirmed",
    &["destructive_refuses_unconfirmed"],
    false
)]
#[case::dry_run_acts("dry-run-acts", "dry-run-changes-nothing", &["dry_run_preview"], false)]
#[case::preview_refused("preview-refused", "dry-run-previews", &["dry_run_preview"], false)]
#[case::refuses_with_4(
    "refuses-with-4",
    "destructive-refuses-unconfirmed",
    &["destructive_refuses_unconfirmed"],
    false
)]
#[case::two_documents("two-documents", "read-probes-answer-one-envelope", &["json_envelope"], false)]
#[case::hello_without_warnings(
    "hello-without-warnings",
    "read-probes-answer-one-envelope",
    &["json_envelope"],
    false
)]
#[case::arg_error_as_prose(
    "arg-error-as-prose",
    "read-probes-answer-one-envelope",
    &["json_envelope"],
    false
)]
#[case::exits_127_on_invalid(
    "exits-127-on-invalid",
    "probe-exits-are-standard-codes",
    &["exit_code_contract", "invalid_input_exit_2", "argument_order"],
    false
)]
#[case::meta_exit_code_differs(
    "meta-exit-code-differs",
    "probe-exits-are-standard-codes",
    &["exit_code_contract"],
    false
)]
#[case::preview_meta_exit_3(
    "preview-meta-exit-3",
    "probe-exits-are-standard-codes",
    &["exit_code_contract"],
    false
)]
#[case::manifest_without_schema_version(
    "manifest-without-schema-version",
    "manifest-valid",
    &["manifest_valid"],
    false
)]
#[case::last_wins("last-wins", "conflicting-repeats-are-arg-errors", &["argument_order"], false)]
#[case::subcommand_default_overrides(
    "subcommand-default-overrides",
    "global-option-value-survives-the-command",
    &["argument_order"],
    false
)]
#[case::posix_options(
    "posix-options",
    "options-after-positionals-take-effect",
    &["argument_order"],
    false
)]
#[case::repeat_refused("repeat-refused", "same-value-repeats-are-accepted", &[], false)]
#[case::global_before_path_only(
    "global-before-path-only",
    "global-option-means-the-same-anywhere",
    &["argument_order"],
    false
)]
#[case::stream_no_terminal("stream-no-terminal", STREAM_CONTRACT, &["stream_contract"], false)]
#[case::stream_line_after_summary(
    "stream-line-after-summary",
    STREAM_CONTRACT,
    &["stream_contract"],
    false
)]
#[case::stream_prose_line("stream-prose-line", STREAM_CONTRACT, &["stream_contract"], false)]
#[case::stream_summary_exits_1(
    "stream-summary-exits-1",
    STREAM_CONTRACT,
    &["stream_contract"],
    false
)]
#[case::stream_stalls("stream-stalls", STREAM_CONTRACT, &["stream_contract"], false)]
#[case::stream_seq_skips("stream-seq-skips", STREAM_CONTRACT, &["stream_contract"], false)]
#[case::stream_seq_from_zero("stream-seq-from-zero", STREAM_CONTRACT, &["stream_contract"], false)]
#[case::stream_heartbeat_numbered(
    "stream-heartbeat-numbered",
    STREAM_CONTRACT,
    &["stream_contract"],
    false
)]
#[case::stream_count_wrong("stream-count-wrong", STREAM_CONTRACT, &["stream_contract"], false)]
#[case::stream_items_emitted_wrong(
    "stream-items-emitted-wrong",
    STREAM_CONTRACT,
    &["stream_contract"],
    false
)]
#[case::sigint_exits_1("sigint-exits-1", STREAM_SIGINT, &["stream_sigint"], false)]
#[case::sigint_other_code("sigint-other-code", STREAM_SIGINT, &["stream_sigint"], false)]
#[case::sigint_no_partial("sigint-no-partial", STREAM_SIGINT, &["stream_sigint"], false)]
#[case::sigint_ignored("sigint-ignored", STREAM_SIGINT, &["stream_sigint"], false)]
// A stream that never ends after SIGINT is also killed at its deadline, which the kit's
// stream_contract judges on the same signalled run.
#[case::sigint_hangs("sigint-hangs", STREAM_SIGINT, &["stream_contract", "stream_sigint"], false)]
fn each_fault_fails_the_kit_checks_the_kit_fails_and_no_other(
    #[case] name: &str,
    #[case] fails: &str,
    #[case] kit_fails: &[&str],
    #[case] hangs: bool,
) {
    let (exit, report) = run_kit(name, &["--only", "kit", "-j", "4"]);
    assert_eq!(exit, 80, "{name}: NOT_CONFORMANT expected: {report:#}");
    assert_eq!(status_of(&report, fails), "fail", "{name}: {report:#}");
    for (check, status) in kit_check_statuses(&report) {
        let want: &[&str] = if kit_fails.contains(&check.as_str()) {
            &["fail"]
        } else if hangs {
            &["pass", "skip"]
        } else {
            &["pass"]
        };
        assert!(want.contains(&status.as_str()), "{name}: {check} is {status}: {report:#}");
    }
    if hangs {
        for scenario in report["data"]["scenarios"].as_array().unwrap() {
            if scenario["status"] == "skip" {
                let reason = scenario["reason"].as_str().unwrap_or_default();
                assert!(reason.contains(NO_HANG_CLOSED), "{}: {reason}", scenario["id"]);
            }
        }
    }
}

/// A read probe that fails with a valid envelope (NOT_FOUND, 5) is no fault of any kit check:
/// none demands that a read probe succeed, so conform fails none either.
#[test]
fn a_read_probe_failing_with_a_valid_envelope_fails_no_kit_check() {
    let (exit, report) = run_kit("hello-not-found", &["--only", "kit", "-j", "4"]);
    assert_eq!(exit, 0, "{report:#}");
    for (check, status) in kit_check_statuses(&report) {
        assert_eq!(status, "pass", "{check}: {report:#}");
    }
}

/// The scenario ids the runner charges hangs to are the catalogue's.
#[test]
fn the_scenarios_hangs_are_charged_to_exist() {
    let catalogue = conform::catalogue::Catalogue::embedded().unwrap();
    for id in [NO_HANG_CLOSED, conform::step::NO_HANG_OPEN, conform::step::DRY_RUN_PREVIEWS] {
        let scenario = catalogue.get(id).unwrap_or_else(|| panic!("no scenario {id}"));
        assert!(scenario.tags.iter().any(|t| t == "kit"), "{id}");
    }
}

#[test]
fn the_dry_run_of_dry_run_acts_really_deletes() {
    let home = tempfile::tempdir().unwrap();
    let first = stdout_json(&fixture("dry-run-acts", home.path(), &["purge", "--dry-run"]));
    assert_eq!(first["ok"], true, "it looks like an honest preview: {first}");
    assert_eq!(first["data"]["would_delete"].as_array().unwrap().len(), 3);
    let second = stdout_json(&fixture("dry-run-acts", home.path(), &["purge", "--dry-run"]));
    assert_eq!(second["data"]["would_delete"], serde_json::json!([]), "the first preview acted");
    // The honest fixture previews the same thing twice.
    let home = tempfile::tempdir().unwrap();
    let a = stdout_json(&fixture("good", home.path(), &["purge", "--dry-run"]));
    let b = stdout_json(&fixture("good", home.path(), &["purge", "--dry-run"]));
    assert_eq!(a["data"], b["data"]);
}

#[test]
fn help_on_stdout_is_a_real_fault_and_fails_its_scenario_once_there_is_one() {
    let home = tempfile::tempdir().unwrap();
    let bad = fixture("help-on-stdout", home.path(), &["--help"]);
    assert_eq!(bad.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&bad.stdout).contains("usage:"), "{bad:?}");
    let good = fixture("good", home.path(), &["--help"]);
    assert_eq!(good.status.code(), Some(0));
    assert!(good.stdout.is_empty() && String::from_utf8_lossy(&good.stderr).contains("usage:"));

    let cwd = tempfile::tempdir().unwrap();
    let list = conform().args(["list", "--format", "json"]).current_dir(cwd.path()).output();
    let list = stdout_json(&list.unwrap());
    let help_scenarios: Vec<&str> = list["data"]["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["requirement"] == "REQ-F-048")
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert!(!help_scenarios.is_empty(), "REQ-F-048 has no scenario");
    for id in help_scenarios {
        let (_, report) = run_kit("help-on-stdout", &["--only", id]);
        assert_eq!(status_of(&report, id), "fail", "{id}: {report:#}");
        let (_, report) = run_kit("good", &["--only", id]);
        assert_eq!(status_of(&report, id), "pass", "{id}: {report:#}");
    }
}

#[test]
fn refuses_with_4_refuses_without_acting_but_not_with_arg_error() {
    let home = tempfile::tempdir().unwrap();
    let refused = fixture("refuses-with-4", home.path(), &["purge"]);
    assert_eq!(refused.status.code(), Some(4));
    assert_eq!(stdout_json(&refused)["error"]["code"], "CONFIRMATION_REQUIRED");
    let preview = stdout_json(&fixture("refuses-with-4", home.path(), &["purge", "--dry-run"]));
    assert_eq!(preview["data"]["would_delete"].as_array().unwrap().len(), 3, "nothing deleted");
}

/// `good stream` with a real SIGINT after its third line: the stream a faultless tool gives,
/// read here without conform, so the fixture's own behaviour is pinned down independently of
/// the scenario that judges it.
#[test]
fn the_faultless_stream_ends_cancelled_on_sigint() {
    use std::io::{BufRead, BufReader};
    let home = tempfile::tempdir().unwrap();
    let mut child = Command::new(kit_dir().join("good"))
        .args(["stream", "--count", "40"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: Vec<String> = lines.by_ref().take(3).map(Result::unwrap).collect();
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{first:?} {rest:?}");
    for (n, line) in first.iter().enumerate() {
        let item: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(item["_seq"], n + 1, "{line}");
    }
    let terminal: serde_json::Value = serde_json::from_str(rest.last().unwrap()).unwrap();
    assert_eq!(terminal["error"]["code"], "CANCELLED", "{terminal}");
    assert_eq!(terminal["data"]["partial"], true, "{terminal}");
    assert_eq!(terminal["meta"]["exit_code"], 130, "{terminal}");
    let last_seq =
        rest.iter().rev().skip(1).find_map(|line| {
            serde_json::from_str::<serde_json::Value>(line).unwrap()["_seq"].as_u64()
        });
    assert_eq!(terminal["meta"]["items_emitted"], last_seq.unwrap_or(3), "{rest:?}");
    assert!(rest.len() < 10, "the stream went on after SIGINT: {rest:?}");
}

/// The processes whose `HOME` lies under `dir`: what a sandbox conform made there still runs.
fn processes_with_home_under(dir: &Path) -> Vec<String> {
    let marker = format!("HOME={}/", dir.display());
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let pid = entry.file_name().to_string_lossy().into_owned();
        if !pid.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
        if environ.split(|&b| b == 0).any(|var| var.starts_with(marker.as_bytes()))
            && crate::support::alive(&pid)
        {
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            found.push(format!("{pid}: {}", String::from_utf8_lossy(&cmdline).replace('\0', " ")));
        }
    }
    found
}

/// A stream that never ends by itself (stalled, or hung on SIGINT) fails its scenario, is
/// killed at the stream's deadline (10 s in the profile), and nothing of it outlives the run:
/// conform's sandboxes are put under a directory of this test's own, and afterwards no process
/// with its home there may run, nor may conform have had to sweep one up as a leak.
#[rstest]
#[case::stream_stalls("stream-stalls", STREAM_CONTRACT)]
#[case::sigint_hangs("sigint-hangs", STREAM_SIGINT)]
fn a_stream_that_never_ends_is_killed_at_its_deadline_and_leaves_nothing(
    #[case] name: &str,
    #[case] fails: &str,
) {
    let tmp = tempfile::tempdir().unwrap();
    let mut run = conform();
    run.arg("run").arg(kit_dir().join(name)).arg("--profile").arg(kit_dir().join("conform.toml"));
    let (report, took) = a_hang_fails(run, fails, tmp.path());
    // Killed at the 10 s deadline, not left to conform's 30 s step limit.
    assert!(took < Duration::from_secs(28), "{name} took {took:?}: {report:#}");
    let leaks: Vec<&serde_json::Value> = report["data"]["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["findings"].as_array().into_iter().flatten())
        .filter(|f| f["check"] == "leaked-process")
        .collect();
    assert!(leaks.is_empty(), "conform had to sweep up a leak: {leaks:?}");
}

/// Runs `conform` (already given `run`, the tool and the profile) on the one scenario `fails`
/// with its sandboxes under `dir`: the scenario must fail, and no process with its home under
/// `dir` may outlive the run. The report and how long the run took.
fn a_hang_fails(mut conform: Command, fails: &str, dir: &Path) -> (serde_json::Value, Duration) {
    let started = Instant::now();
    let out = conform
        .args(["--only", fails, "--format", "json"])
        .env("TMPDIR", dir)
        .current_dir(dir)
        .output()
        .unwrap();
    let took = started.elapsed();
    let report = stdout_json(&out);
    assert_eq!(code(&out), 80, "{report:#}");
    assert_eq!(status_of(&report, fails), "fail", "{report:#}");
    let left = processes_with_home_under(dir);
    assert!(left.is_empty(), "still running after conform ended: {left:?}");
    (report, took)
}

/// The spec kit's JSON profile beside the fixtures, its command pointed at `fixture` (a
/// symlink in a fresh directory, so `./<fixture>` resolves against the profile's directory as
/// the kit says): the profile's path and the directory holding it.
fn kit_json_profile(fixture: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(kit_dir().join("kit-profile.json")).unwrap();
    let mut profile: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        profile["command"],
        serde_json::json!(["./good"]),
        "the committed profile runs good"
    );
    profile["command"] = serde_json::json!([format!("./{fixture}")]);
    std::os::unix::fs::symlink(kit_dir().join(fixture), dir.path().join(fixture)).unwrap();
    let path = dir.path().join("kit-profile.json");
    std::fs::write(&path, serde_json::to_string_pretty(&profile).unwrap()).unwrap();
    (dir, path)
}

/// `conform run --profile kit-profile.json` with no TOOL: the kit's JSON profile names the
/// tool (`./good`, beside the profile), its stream probes and its argument order, and `good`
/// passes every kit scenario through it, none skipped.
#[test]
fn the_kit_json_profile_runs_its_own_command_through_every_kit_scenario() {
    let cwd = tempfile::tempdir().unwrap();
    let out = conform()
        .arg("run")
        .arg("--profile")
        .arg(kit_dir().join("kit-profile.json"))
        .args(["--only", "kit", "-j", "4", "--format", "json"])
        .current_dir(cwd.path())
        .output()
        .unwrap();
    let report = stdout_json(&out);
    assert_eq!(code(&out), 0, "{report:#}");
    for id in KIT_SCENARIOS {
        assert_eq!(status_of(&report, id), "pass", "{id}: {report:#}");
    }
    let ran = report["data"]["scenarios"].as_array().unwrap();
    assert_eq!(ran.len(), KIT_SCENARIOS.len(), "a kit scenario is missing from this list");
    // The kit's fourteen checks, reported one by one, all pass: none is left incomplete.
    let checks = report["data"]["kit_checks"].as_array().unwrap();
    assert_eq!(checks.len(), 14, "{checks:#?}");
    for check in checks {
        assert_eq!(check["status"], "pass", "{check}");
    }
    let argv = ran
        .iter()
        .flat_map(|s| s["evidence"].as_array().into_iter().flatten())
        .filter_map(|e| e["repro"]["command"]["value"][0].as_str())
        .collect::<Vec<_>>();
    assert!(!argv.is_empty(), "no evidence of a run: {report:#}");
    let good = std::fs::canonicalize(kit_dir().join("good")).unwrap();
    for program in argv {
        let program = std::fs::canonicalize(program).unwrap_or_else(|e| panic!("{program}: {e}"));
        assert_eq!(program, good, "a step ran something else than the profile's command");
    }
}

/// The same JSON profile with a fixture that never ends as its command: its `timeout_seconds`
/// (5) bounds every kit probe, the plain stream probe (which has no `deadline_seconds`) and a
/// read probe alike, so the hang fails its scenario once that passes, well before conform's
/// own step limit (30 s), and nothing is left running.
#[rstest]
#[case::stalled_stream("stream-stalls", STREAM_CONTRACT)]
#[case::prompt_on_closed_stdin("prompt-on-closed-stdin", "read-probes-end-with-stdin-closed")]
fn the_kit_json_profile_bounds_a_hang_by_its_timeout(#[case] fixture: &str, #[case] fails: &str) {
    let (dir, profile) = kit_json_profile(fixture);
    let mut run = conform();
    run.arg("run").arg("--profile").arg(&profile);
    let (_, took) = a_hang_fails(run, fails, dir.path());
    assert!(took >= Duration::from_secs(5), "the hang cannot fail before the timeout: {took:?}");
    assert!(took < Duration::from_secs(20), "not bounded by timeout_seconds 5: {took:?}");
}

/// A kit JSON profile's probes name files beside it, as the kit (which runs them there) allows:
/// every sandbox starts as a copy of the profile's directory, so `show notes.txt` finds the
/// file. A symbolic link beside it is not followed into the sandbox (its target lies outside,
/// and conform copies only what is there), and nothing is written back beside the profile.
#[test]
fn a_kit_json_profile_runs_its_probes_on_a_copy_of_its_directory() {
    let (dir, profile) = kit_json_profile("good");
    let mut text: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&profile).unwrap()).unwrap();
    text["probes"] = serde_json::json!([
        { "name": "beside", "argv": ["show", "notes.txt"], "kind": "read" },
        { "name": "through a link", "argv": ["show", "secret.txt"], "kind": "read" },
        { "name": "nested", "argv": ["show", "data/rows.txt"], "kind": "read" },
    ]);
    std::fs::write(&profile, text.to_string()).unwrap();
    std::fs::write(dir.path().join("notes.txt"), "one\ntwo\n").unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    std::fs::write(dir.path().join("data/rows.txt"), "a\nb\nc\n").unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "not for the tool\n").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), dir.path().join("secret.txt"))
        .unwrap();
    let before = std::fs::read_dir(dir.path()).unwrap().count();

    let cwd = tempfile::tempdir().unwrap();
    let out = conform()
        .arg("run")
        .arg("--profile")
        .arg(&profile)
        .args(["--only", "read-probes-answer-one-envelope", "--format", "json"])
        .args(["--evidence", "all"])
        .current_dir(cwd.path())
        .output()
        .unwrap();
    let report = stdout_json(&out);
    assert_eq!(status_of(&report, "read-probes-answer-one-envelope"), "pass", "{report:#}");
    let scenario = report["data"]["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == "read-probes-answer-one-envelope")
        .unwrap();
    let answer = |step: &str| {
        scenario["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == step)
            .unwrap_or_else(|| panic!("no step {step}: {scenario:#}"))["envelope"]
            .clone()
    };
    assert_eq!(answer("probe#1")["data"]["lines"], 2, "{scenario:#}");
    assert_eq!(answer("probe#2")["error"]["code"], "NOT_FOUND", "the link was followed");
    assert_eq!(answer("probe#3")["data"]["lines"], 3, "{scenario:#}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), before, "written beside it");
}

/// The scenarios of the kit's last three checks (argument_order, stream_contract,
/// stream_sigint), in the matrix's column order.
const ORDER_AND_STREAM_SCENARIOS: &[&str] = &[
    "global-option-means-the-same-anywhere",
    "global-option-value-survives-the-command",
    "conflicting-repeats-are-arg-errors",
    "same-value-repeats-are-accepted",
    "options-after-positionals-take-effect",
    STREAM_CONTRACT,
    STREAM_SIGINT,
];

/// The faults of those checks.
const ORDER_AND_STREAM_FAULTS: &[&str] = &[
    "last-wins",
    "subcommand-default-overrides",
    "posix-options",
    "repeat-refused",
    "global-before-path-only",
    "stream-no-terminal",
    "stream-line-after-summary",
    "stream-prose-line",
    "stream-summary-exits-1",
    "stream-stalls",
    "stream-seq-skips",
    "stream-seq-from-zero",
    "stream-heartbeat-numbered",
    "stream-count-wrong",
    "stream-items-emitted-wrong",
    "sigint-exits-1",
    "sigint-other-code",
    "sigint-no-partial",
    "sigint-ignored",
    "sigint-hangs",
];

/// Cells whose status is certain but whose first failing step is not: `value-before-path` and
/// the json that `subcommand-default-overrides` prints instead of plain are the same bytes
/// when both runs took the same whole milliseconds (`stdout-differs`), else the next step's
/// comparison of plain and json fails (`same-stdout`). The matrix names neither.
const RACY_CHECKS: &[(&str, &str)] =
    &[("subcommand-default-overrides", "global-option-value-survives-the-command")];

/// One fault's row: its status in each scenario, and the checks that failed where it failed.
fn matrix_row(fault: &str) -> String {
    let mut args = vec!["-j", "2"];
    for id in ORDER_AND_STREAM_SCENARIOS {
        args.extend(["--only", id]);
    }
    let (_, report) = run_kit(fault, &args);
    let mut cells = Vec::new();
    let mut failed = Vec::new();
    for (column, id) in ORDER_AND_STREAM_SCENARIOS.iter().enumerate() {
        let status = status_of(&report, id);
        cells.push(status.to_owned());
        if status == "fail" {
            let scenario = report["data"]["scenarios"]
                .as_array()
                .unwrap()
                .iter()
                .find(|s| s["id"] == *id)
                .unwrap();
            let mut checks: Vec<&str> = scenario["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|f| f["check"].as_str())
                .collect();
            checks.sort_unstable();
            checks.dedup();
            let checks = if RACY_CHECKS.contains(&(fault, id)) {
                "(the first comparison that sees it)".to_owned()
            } else {
                checks.join(", ")
            };
            failed.push(format!("    {} {id}: {checks}", column + 1));
        }
    }
    let mut row = format!("{fault:<28} {}", cells.join(" "));
    for line in failed {
        row.push('\n');
        row.push_str(&line);
    }
    row
}

/// The SIGINT conform sends a stream after its lines is on the run's record, for its
/// timeline: which signal, to the process alone, and when.
#[test]
fn the_sigint_sent_into_a_stream_is_on_its_record() {
    let (exit, report) = run_kit("good", &["--only", STREAM_SIGINT, "--evidence", "all"]);
    assert_eq!(exit, 0, "{report:#}");
    let scenarios = report["data"]["scenarios"].as_array().unwrap();
    let scenario = scenarios.iter().find(|s| s["id"] == STREAM_SIGINT).unwrap();
    let signalled: Vec<&serde_json::Value> = scenario["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r.get("signal").is_some())
        .collect();
    assert!(!signalled.is_empty(), "{scenario:#}");
    for record in signalled {
        assert_eq!(record["signal"]["signal"], "SIGINT", "{record:#}");
        assert_eq!(record["signal"]["to"], "process", "{record:#}");
        let after = record["signal"]["after_ms"].as_u64().unwrap();
        assert!(after <= record["elapsed_ms"].as_u64().unwrap(), "sent while it ran: {record:#}");
    }
}

/// Loads the machine on purpose: alone in CI.
mod alone {
    use super::*;

    /// Every fault of the last three checks against all seven of their scenarios: each fails the
    /// scenario of its rule (and those that share the rule's evidence) and passes the rest, so a
    /// fault that breaks more than it says, or a scenario that judges beyond its rule, shows here.
    /// The snapshot is the matrix with the checks that failed, for review.
    #[test]
    fn the_matrix_of_order_and_stream_faults() {
        // A few at a time: the stalled streams wait for their 10 s deadline, and SIGINT must
        // still land early in the interrupted streams of the others.
        const AT_ONCE: usize = 5;
        let next = AtomicUsize::new(0);
        let rows = Mutex::new(vec![String::new(); ORDER_AND_STREAM_FAULTS.len()]);
        std::thread::scope(|scope| {
            for _ in 0..AT_ONCE {
                scope.spawn(|| {
                    while let Some(fault) =
                        ORDER_AND_STREAM_FAULTS.get(next.fetch_add(1, Ordering::Relaxed))
                    {
                        let row = matrix_row(fault);
                        let at = ORDER_AND_STREAM_FAULTS.iter().position(|f| f == fault).unwrap();
                        rows.lock().unwrap()[at] = row;
                    }
                });
            }
        });
        let rows = rows.into_inner().unwrap();
        let header = ORDER_AND_STREAM_SCENARIOS
            .iter()
            .enumerate()
            .map(|(n, id)| format!("{} = {id}", n + 1))
            .collect::<Vec<_>>()
            .join("\n");
        insta::assert_snapshot!(format!("columns:\n{header}\n\n{}", rows.join("\n")));
    }
}
