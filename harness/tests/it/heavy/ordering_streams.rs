//! The engine on argument order and streams: scenarios of our own (not the catalogue's) run
//! against `streamtool`, a small tool of these tests, healthy and with one planted fault.

use std::path::{Path, PathBuf};

use conform::catalogue::parse_scenario;
use conform::outcome::{ScenarioResult, SkipReason, Status};
use conform::plan::static_skip;
use conform::profile::Profile;
use conform::run::Engine;
use rstest::rstest;

fn streamtool() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tools/streamtool")
}

const ORDER_PROFILE: &str = crate::support::ARGUMENT_ORDER_TOML;

const ORDER_SCENARIO: &str = r#"
id = "x"
requirement = "REQ-F-079"
criterion = "the global option means the same wherever it stands"
level = "must"
tags = ["kit"]

[[steps]]
action = "run"
name = "after-local"
order = "value-after-local"
expect = { exit = 0, schema = "envelope" }

[[steps]]
action = "run"
name = "before-path"
order = "value-before-path"
expect = { exit = 0, same_data_as = "after-local", same_stdout_as = "after-local" }

[[steps]]
action = "run"
name = "between"
order = "value-between"
expect = { exit = 0, same_data_as = "after-local" }

[[steps]]
action = "run"
name = "alternate-after"
order = "alternate-after-local"
expect = { exit = 0, stdout_differs_from = "after-local" }

[[steps]]
action = "run"
name = "alternate-before"
order = "alternate-before-path"
expect = { exit = 0, same_stdout_as = "alternate-after" }

[[steps]]
action = "run"
name = "alternate-between"
order = "alternate-between"
expect = { exit = 0, same_stdout_as = "alternate-after" }

[[steps]]
action = "run"
name = "repeat"
order = "same-value-repeat"
expect = { exit = 0, same_data_as = "after-local" }

[[steps]]
action = "run"
name = "conflict"
order = "conflicting-repeat"
expect = { exit = 2 }

[[steps]]
action = "run"
name = "positional-first"
order = "positional-then-local"
expect = { exit = 0 }

[[steps]]
action = "run"
name = "positional-last"
order = "local-then-positional"
expect = { exit = 0, same_data_as = "positional-first" }

[[steps]]
action = "run"
name = "positional-alone"
order = "positional-alone"
expect = { exit = 0, data_differs_from = "positional-first" }
"#;

/// A profile in a temporary directory (with `[tool] env` from `env`).
fn profile(text: &str, env: &str) -> (tempfile::TempDir, Profile) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("conform.toml");
    std::fs::write(&path, format!("[tool]\nenv = {{ {env} }}\n{text}")).unwrap();
    let profile = Profile::load(&path).unwrap();
    (dir, profile)
}

fn run(scenario_rel: &str, scenario: &str, profile: Profile) -> ScenarioResult {
    let scenario = parse_scenario(scenario_rel, scenario).unwrap();
    assert_eq!(static_skip(&scenario, &profile), None);
    Engine::new(streamtool(), profile, false).run_scenario(&scenario)
}

fn findings(result: &ScenarioResult) -> Vec<String> {
    result
        .findings
        .iter()
        .map(|f| format!("[{}] {} {:?}", f.check, f.message, f.expected))
        .collect()
}

#[test]
fn every_placement_runs_the_argv_of_the_table() {
    let (_dir, profile) = profile(ORDER_PROFILE, "");
    let result = run("REQ-F-079/x.toml", ORDER_SCENARIO, profile);
    assert_eq!(result.status, Status::Pass, "{:#?}", result);
    let argv: Vec<String> = result
        .steps
        .iter()
        .map(|s| match &s.repro.command {
            conform::outcome::ReproCommand::Argv(a) => a[1..].join(" "),
            conform::outcome::ReproCommand::Shell(l) => l.clone(),
        })
        .collect();
    assert_eq!(
        argv,
        [
            "files --limit 3 --output json",
            "--output json files --limit 3",
            "files --output json --limit 3",
            "files --limit 3 --output text",
            "--output text files --limit 3",
            "files --output text --limit 3",
            "--output json files --limit 3 --output json",
            "--output json files --limit 3 --output text",
            "files site --limit 3",
            "files --limit 3 site",
            "files site",
        ]
    );
}

#[test]
fn an_option_ignored_after_the_path_is_caught_with_both_invocations() {
    let (_dir, profile) = profile(ORDER_PROFILE, "STREAMTOOL_FAULT = \"global-before-path-only\"");
    let result = run("REQ-F-079/x.toml", ORDER_SCENARIO, profile);
    assert_eq!(result.status, Status::Fail, "{:#?}", result);
    let f = &result.findings[0];
    assert_eq!(f.check, "stdout-differs", "{:#?}", findings(&result));
    let expected = f.expected.clone().unwrap_or_default();
    assert!(
        expected.contains("files --limit 3 --output text")
            && expected.contains("files --limit 3 --output json"),
        "{expected}"
    );
}

#[test]
fn a_missing_argument_order_or_positional_skips_with_the_reason() {
    let scenario = parse_scenario("REQ-F-079/x.toml", ORDER_SCENARIO).unwrap();
    let (_dir, without) = profile("", "");
    let reason = static_skip(&scenario, &without).unwrap();
    let what = "`argument_order`".to_owned();
    assert_eq!(reason, SkipReason::MissingKit { what, profile: true });
    let (_dir, no_positional) = profile(&ORDER_PROFILE.replace("positional = \"site\"\n", ""), "");
    let reason = static_skip(&scenario, &no_positional).unwrap();
    let placement = "positional-then-local".to_owned();
    assert_eq!(reason, SkipReason::NoPositional { placement });
    assert!(reason.to_string().contains("names no `positional`"), "{reason}");
}

const STREAM_PROFILE: &str = r#"
[[kit.stream]]
argv = ["files", "site", "--stream", "--limit", "4"]
deadline_seconds = 20

[[kit.stream]]
argv = ["files", "site", "--stream"]
deadline_seconds = 2.5
signal = "INT"
after_lines = 3
"#;

const STREAM_SCENARIO: &str = r#"
id = "y"
requirement = "REQ-O-004"
criterion = "stream lines keep the contract"
level = "must"
tags = ["kit"]

[[steps]]
action = "run"
name = "stream"
probe = "stream"
expect = { stream = true }
"#;

const SIGINT_SCENARIO: &str = r#"
id = "z"
requirement = "REQ-O-004"
criterion = "SIGINT ends the stream cancelled"
level = "must"
tags = ["kit"]

[[steps]]
action = "run"
name = "interrupted"
probe = "stream-signal"
expect = { exit = 130, stream = true, schema = "envelope", json = [
  { pointer = "/error/code", equals = "CANCELLED" },
  { pointer = "/data/partial", equals = true },
] }
"#;

#[test]
fn a_healthy_stream_passes_and_sigint_ends_it_cancelled() {
    let (_dir, p) = profile(STREAM_PROFILE, "STREAMTOOL_ITEMS = \"60\"");
    let result = run("REQ-O-004/y.toml", STREAM_SCENARIO, p.clone());
    assert_eq!(result.status, Status::Pass, "{:#?}", findings(&result));
    // Both probes ran: the plain one to its summary, the signalled one to its CANCELLED end.
    assert_eq!(result.steps.len(), 2);
    assert_eq!(result.steps[0].envelope.as_ref().unwrap()["_count"], 4);
    let result = run("REQ-O-004/z.toml", SIGINT_SCENARIO, p);
    assert_eq!(result.status, Status::Pass, "{:#?}", findings(&result));
    assert_eq!(result.steps.len(), 1, "only the probe with a signal");
    let terminal = result.steps[0].envelope.as_ref().unwrap();
    assert!(terminal["meta"]["items_emitted"].as_u64().unwrap() >= 3, "{terminal}");
}

#[rstest]
#[case::prose("prose-line", STREAM_SCENARIO, "stream", "line 2: not JSON")]
#[case::seq_skips("seq-skips", STREAM_SCENARIO, "stream", "line 2: `_seq` is 3, expected 2")]
#[case::no_terminal("no-terminal", STREAM_SCENARIO, "stream", "no terminal line")]
#[case::count_wrong("count-wrong", STREAM_SCENARIO, "stream", "line 5: `_count` is 5, expected 4")]
#[case::sigint_ignored("sigint-ignored", SIGINT_SCENARIO, "stream-deadline", "deadline of 2500 ms")]
fn a_stream_breaking_the_contract_fails_with_the_line(
    #[case] fault: &str,
    #[case] scenario: &str,
    #[case] check: &str,
    #[case] says: &str,
) {
    let (_dir, p) = profile(
        STREAM_PROFILE,
        &format!("STREAMTOOL_ITEMS = \"60\", STREAMTOOL_FAULT = \"{fault}\""),
    );
    let rel = if scenario == STREAM_SCENARIO { "REQ-O-004/y.toml" } else { "REQ-O-004/z.toml" };
    let result = run(rel, scenario, p);
    assert_eq!(result.status, Status::Fail, "{:#?}", findings(&result));
    assert!(
        result.findings.iter().any(|f| f.check == check && f.message.contains(says)),
        "{:#?}",
        findings(&result)
    );
    assert!(
        result.findings.iter().all(|f| f.check != "leaked-process"),
        "{:#?}",
        findings(&result)
    );
}

#[test]
fn a_stream_ending_before_its_signal_line_says_sigint_was_never_sent() {
    let text = STREAM_PROFILE.replace("after_lines = 3", "after_lines = 500");
    let (_dir, p) = profile(&text, "STREAMTOOL_ITEMS = \"5\"");
    let result = run("REQ-O-004/z.toml", SIGINT_SCENARIO, p);
    assert_eq!(result.status, Status::Fail);
    let f = result
        .findings
        .iter()
        .find(|f| f.check == "stream-signal")
        .expect("a stream-signal finding");
    assert!(
        f.message.contains("never sent") && f.message.contains("after 6 lines"),
        "{}",
        f.message
    );
}

/// The same short stream under the contract scenario: its lines keep the contract, so it passes
/// there (as the kit's stream_contract would); only the SIGINT scenario fails it.
#[test]
fn a_stream_too_short_for_its_signal_still_keeps_the_contract() {
    let text = STREAM_PROFILE.replace("after_lines = 3", "after_lines = 500");
    let (_dir, p) = profile(&text, "STREAMTOOL_ITEMS = \"5\"");
    let result = run("REQ-O-004/y.toml", STREAM_SCENARIO, p);
    assert_eq!(result.status, Status::Pass, "{:#?}", findings(&result));
}

#[test]
fn a_profile_without_signalled_streams_skips_the_signal_scenario() {
    let scenario = parse_scenario("REQ-O-004/z.toml", SIGINT_SCENARIO).unwrap();
    let (_dir, p) = profile(&STREAM_PROFILE.replace("signal = \"INT\"\nafter_lines = 3\n", ""), "");
    let reason = static_skip(&scenario, &p).unwrap();
    assert!(reason.to_string().contains("`stream` probes with a `signal`"), "{reason}");
}

#[test]
fn argument_order_and_stream_probes_prepare_only_the_sandboxes_that_use_them() {
    let log_dir = tempfile::tempdir().unwrap();
    let log = log_dir.path().join("setup.log");
    let order = ORDER_PROFILE.replace(
        "positional = \"site\"\n",
        &format!("positional = \"site\"\nsetup = [\"echo order >> '{}'\"]\n", log.display()),
    );
    let stream = STREAM_PROFILE.replacen(
        "deadline_seconds = 20\n",
        &format!("deadline_seconds = 20\nsetup = [\"echo stream >> '{}'\"]\n", log.display()),
        1,
    );
    let (_dir, p) = profile(&format!("{order}\n{stream}"), "");
    let result = run("REQ-F-079/x.toml", ORDER_SCENARIO, p.clone());
    assert_eq!(result.status, Status::Pass, "{:#?}", findings(&result));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "order\n");
    let result = run("REQ-O-004/y.toml", STREAM_SCENARIO, p);
    assert_eq!(result.status, Status::Pass, "{:#?}", findings(&result));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "order\nstream\n");
}
