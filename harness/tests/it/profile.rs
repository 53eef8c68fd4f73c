//! Profiles: a good one loads and validates against `schemas/profile.json`; a bad one is an
//! ARG_ERROR (2) with file, line and column, and nothing runs.

use std::path::Path;

use conform::profile::Profile;
use rstest::rstest;

use crate::support::{code, conform, errors, stdout_json, validator};

const GOOD: &str = r#"
[tool]
env = { PACE = "10" }
instance_env = "TOOL_INSTANCE_ID"

[roles.detach]
argv = ["analyze", "data.csv"]
fixtures = ["data.csv"]
setup = ["true"]

[roles.resume_writer]
argv = ["import", "data.csv", "--db", "x.db"]
env = { DB = "x.db" }
stdin = "closed"

[kit]
read = [["version"]]
invalid = [["analyze", "--no-such-flag"]]
setup = ["mkdir -p state"]
fixtures = ["data.csv"]

[[kit.destructive]]
argv = ["drop", "all"]
dry_run_flag = "--dry-run"
setup = ["touch all.db"]
fixtures = ["probe.csv"]
"#;

fn in_dir(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data.csv"), "a,b\n1,2\n").unwrap();
    std::fs::write(dir.path().join("probe.csv"), "a\n1\n").unwrap();
    let path = dir.path().join("conform.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn toml_json(text: &str) -> serde_json::Value {
    serde_json::to_value(toml::from_str::<toml::Value>(text).unwrap()).unwrap()
}

#[test]
fn a_good_profile_loads_and_validates() {
    let (_dir, path) = in_dir(GOOD);
    let profile = Profile::load(&path).unwrap();
    assert_eq!(profile.role("detach").unwrap().argv, ["analyze", "data.csv"]);
    assert!(profile.role("async").is_none());
    assert!(profile.selects_instances());
    assert!(errors(&validator("profile.json"), &toml_json(GOOD)).is_empty());
}

#[rstest]
#[case::unknown_role("[roles.detach]", "[roles.detached]", Some(6), true)]
#[case::unknown_key("setup = [\"true\"]", "setup = [\"true\"]\nsetpu = []", Some(10), true)]
#[case::empty_argv("argv = [\"analyze\", \"data.csv\"]", "argv = []", Some(6), true)]
#[case::missing_fixture("fixtures = [\"data.csv\"]", "fixtures = [\"nope.csv\"]", Some(8), false)]
#[case::stdin_twice("stdin = \"closed\"", "stdin = \"closed\"\nstdin_text = \"x\"", Some(11), true)]
#[case::bad_stdin("stdin = \"closed\"", "stdin = \"maybe\"", Some(14), true)]
#[case::bad_env_name("PACE = \"10\"", "\"BAD NAME\" = \"10\"", Some(3), true)]
#[case::confirming_probe("[\"drop\", \"all\"]", "[\"drop\", \"all\", \"--yes\"]", Some(23), true)]
#[case::short_confirming_probe(
    "[\"drop\", \"all\"]",
    "[\"drop\", \"all\", \"-y\"]",
    Some(23),
    true
)]
#[case::confirm_destructive(
    "[\"drop\", \"all\"]",
    "[\"drop\", \"all\", \"--confirm-destructive\"]",
    Some(23),
    true
)]
#[case::confirm_with_value(
    "[\"drop\", \"all\"]",
    "[\"drop\", \"all\", \"--force=true\"]",
    Some(23),
    true
)]
#[case::confirming_invalid_probe("\"--no-such-flag\"", "\"--yes\"", Some(18), true)]
#[case::probe_without_preview("dry_run_flag = \"--dry-run\"", "", Some(22), true)]
#[case::missing_probe_fixture("\"probe.csv\"", "\"nope.csv\"", Some(26), false)]
#[case::blank_probe_setup("\"touch all.db\"", "\" \"", Some(22), false)]
#[case::missing_kit_fixture(
    "fixtures = [\"data.csv\"]\n\n[[",
    "fixtures = [\"gone.csv\"]\n\n[[",
    Some(20),
    false
)]
#[case::blank_kit_setup("\"mkdir -p state\"", "\"\"", Some(16), true)]
fn a_bad_profile_is_refused_with_its_place(
    #[case] from: &str,
    #[case] to: &str,
    #[case] line: Option<usize>,
    #[case] schema_too: bool,
) {
    assert!(GOOD.contains(from));
    let text = GOOD.replacen(from, to, 1);
    let (_dir, path) = in_dir(&text);
    let err = Profile::load(&path).unwrap_err();
    assert_eq!(err.location.map(|(l, _)| l), line, "{err}");
    assert!(err.to_string().contains("conform.toml:"), "{err}");
    if schema_too && let Ok(v) = toml::from_str::<toml::Value>(&text) {
        let errs = errors(&validator("profile.json"), &serde_json::to_value(v).unwrap());
        assert!(!errs.is_empty(), "the schema accepted:\n{text}");
    }
}

/// A tool that leaves a mark when it runs at all.
fn marking_tool(dir: &Path) -> std::path::PathBuf {
    let tool = dir.join("tool");
    let mark = dir.join("ran");
    crate::support::write_executable(
        &tool,
        format!("#!/bin/sh\ntouch '{}'\nexit 0\n", mark.display()),
    );
    tool
}

#[test]
fn an_invalid_profile_is_arg_error_and_nothing_runs() {
    let (dir, path) = in_dir(&GOOD.replacen("[roles.detach]", "[roles.detachh]", 1));
    let tool = marking_tool(dir.path());
    let out = conform().arg("run").arg(&tool).arg("--profile").arg(&path).output().unwrap();
    assert_eq!(code(&out), 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("conform.toml:6:"), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(!dir.path().join("ran").exists(), "the tool ran");

    let out = conform()
        .arg("run")
        .arg(&tool)
        .arg("--profile")
        .arg(&path)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    let envelope = stdout_json(&out);
    assert_eq!(envelope["error"]["code"], "ARG_ERROR");
    assert_eq!(envelope["meta"]["exit_code"], 2);
    assert!(envelope["error"]["message"].as_str().unwrap().contains("conform.toml:6:"));
    assert!(errors(&validator("response-envelope.json"), &envelope).is_empty());
    assert!(!dir.path().join("ran").exists(), "the tool ran");
}

#[test]
fn conform_toml_in_the_working_directory_is_read() {
    let (dir, _path) = in_dir(&GOOD.replacen("[roles.detach]", "[roles.nope]", 1));
    let tool = marking_tool(dir.path());
    let out = conform().current_dir(dir.path()).arg("run").arg(&tool).output().unwrap();
    assert_eq!(code(&out), 2, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!dir.path().join("ran").exists(), "the tool ran");
}

/// A profile of the spec's conformance kit, for the fake tool (its JSON format).
const KIT_PROFILE: &str = r#"{
  "schema_version": "1.0",
  "tool": "faketool",
  "command": ["faketool"],
  "timeout_seconds": 5,
  "manifest": ["manifest"],
  "probes": [
    { "name": "greet", "argv": ["greet"], "kind": "read" },
    { "name": "manifest", "argv": ["manifest"], "kind": "read" },
    { "name": "unknown flag", "argv": ["greet", "--bogus"], "kind": "invalid" },
    { "name": "wipe", "argv": ["wipe"], "kind": "destructive", "dry_run_flag": "--dry-run" }
  ]
}"#;

fn kit_in_dir(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kit-profile.json");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

#[test]
fn a_kit_profile_maps_its_probes_onto_the_kit() {
    let (_dir, path) = kit_in_dir(KIT_PROFILE);
    let profile = Profile::load(&path).unwrap();
    let kit = &profile.file.kit;
    assert_eq!(kit.read, [vec!["greet"], vec!["manifest"]]);
    assert_eq!(kit.invalid, [vec!["greet", "--bogus"]]);
    assert_eq!(kit.destructive.len(), 1);
    assert_eq!(kit.destructive[0].argv, ["wipe"]);
    assert_eq!(kit.destructive[0].dry_run_flag, "--dry-run");
    assert!(profile.role("detach").is_none(), "a kit profile names no roles");
}

#[rstest]
#[case::no_dry_run_flag(r#", "dry_run_flag": "--dry-run" }"#, " }", "dry_run_flag")]
#[case::duplicate_name(r#""name": "manifest""#, r#""name": "greet""#, "two probes")]
#[case::bad_version(r#""schema_version": "1.0""#, r#""schema_version": "2.0""#, "version")]
#[case::bad_timeout(r#""timeout_seconds": 5"#, r#""timeout_seconds": 0"#, "timeout_seconds")]
#[case::unknown_kind(r#""kind": "read" }"#, r#""kind": "mutating" }"#, "kit profile")]
#[case::unknown_key(r#""tool": "faketool","#, r#""tool": "faketool", "tools": 1,"#, "kit profile")]
#[case::confirming_probe(r#""argv": ["wipe"]"#, r#""argv": ["wipe", "--yes"]"#, "confirm")]
#[case::confirm_destructive(
    r#""argv": ["wipe"]"#,
    r#""argv": ["wipe", "--confirm-destructive"]"#,
    "confirm"
)]
fn a_broken_kit_profile_is_an_arg_error(#[case] from: &str, #[case] to: &str, #[case] says: &str) {
    assert!(KIT_PROFILE.contains(from), "{from}");
    let (dir, path) = kit_in_dir(&KIT_PROFILE.replacen(from, to, 1));
    let err = Profile::load(&path).unwrap_err();
    assert!(err.to_string().contains(says), "{err}");
    let out = conform()
        .current_dir(dir.path())
        .arg("run")
        .arg(crate::support::faketool())
        .arg("--profile")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", String::from_utf8_lossy(&out.stderr));
}

/// A profile whose kit setup leaves a trace in `log` (outside the sandboxes): `[kit]`'s line,
/// then the destructive probe's line with the tool's path, and a fixture it checks for.
fn kit_setup_profile(dir: &Path, probe_setup: &str) -> std::path::PathBuf {
    std::fs::write(dir.join("seed.txt"), "seed\n").unwrap();
    let log = dir.join("setup.log");
    let text = format!(
        r#"
[kit]
read = [["greet"]]
setup = ["echo kit >> '{log}'"]

[[kit.destructive]]
argv = ["wipe"]
dry_run_flag = "--dry-run"
fixtures = ["seed.txt"]
setup = ['test -f seed.txt && echo "probe $CONFORM_TOOL" >> "{log}"', {probe_setup:?}]
"#,
        log = log.display()
    );
    let path = dir.join("conform.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn run_only(dir: &Path, profile: &Path, id: &str) -> serde_json::Value {
    let out = conform()
        .current_dir(dir)
        .arg("run")
        .arg(crate::support::faketool())
        .arg("--profile")
        .arg(profile)
        .args(["--only", id, "--format", "json"])
        .output()
        .unwrap();
    stdout_json(&out)
}

#[test]
fn kit_setup_prepares_the_sandbox_of_scenarios_that_run_probes() {
    let dir = tempfile::tempdir().unwrap();
    let profile = kit_setup_profile(dir.path(), "true");
    let log = dir.path().join("setup.log");
    // A scenario without kit probes gets no kit setup.
    let report = run_only(dir.path(), &profile, "help-keeps-stdout-clean");
    assert_eq!(crate::support::status_of(&report, "help-keeps-stdout-clean"), "pass");
    assert!(!log.exists(), "{}", std::fs::read_to_string(&log).unwrap_or_default());
    // A destructive-probe scenario gets the kit's, then the probe's (its fixture copied first,
    // the tool's absolute path in CONFORM_TOOL).
    let report = run_only(dir.path(), &profile, "dry-run-previews");
    assert_eq!(crate::support::status_of(&report, "dry-run-previews"), "pass", "{report:#}");
    let tool = std::fs::canonicalize(crate::support::faketool()).unwrap();
    assert_eq!(std::fs::read_to_string(&log).unwrap(), format!("kit\nprobe {}\n", tool.display()));
    // A scenario over every non-stream probe (`any`) runs the destructive one too: both again.
    let report = run_only(dir.path(), &profile, "read-probes-end-with-stdin-closed");
    assert_eq!(crate::support::status_of(&report, "read-probes-end-with-stdin-closed"), "pass");
    assert_eq!(
        std::fs::read_to_string(&log).unwrap(),
        format!("kit\nprobe {0}\nkit\nprobe {0}\n", tool.display())
    );
}

#[test]
fn a_failing_kit_setup_is_an_error_of_the_scenario_not_a_verdict_on_the_tool() {
    let dir = tempfile::tempdir().unwrap();
    let profile = kit_setup_profile(dir.path(), "exit 3");
    let report = run_only(dir.path(), &profile, "dry-run-previews");
    assert_eq!(crate::support::status_of(&report, "dry-run-previews"), "error", "{report:#}");
    let scenario = &report["data"]["scenarios"][0];
    let message = scenario["message"].as_str().unwrap_or_default();
    assert!(message.contains("destructive probe 1") && message.contains("exit 3"), "{report:#}");
}

#[test]
fn reftools_profile_loads_and_validates_against_the_schema() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../reference-tool/conform.toml");
    let profile = Profile::load(&path).unwrap();
    assert_eq!(profile.file.kit.destructive.len(), 1, "reftool's drop-table probe");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(errors(&validator("profile.json"), &toml_json(&text)).is_empty());
}

/// The head of [`k3`].
const K3_HEAD: &str = r#"
[tool]
command = ["./bin/tool", "--lead"]

[kit]
timeout_seconds = 5
manifest = ["describe"]

[[kit.stream]]
argv = ["files", ".", "--stream"]
deadline_seconds = 20
signal = "INT"
after_lines = 3
setup = ["true"]
fixtures = ["data.csv"]

"#;

/// A profile with every key of the kit's last three checks.
fn k3() -> String {
    format!("{K3_HEAD}{}", crate::support::ARGUMENT_ORDER_TOML)
}

#[test]
fn the_k3_keys_load_and_validate() {
    let (_dir, path) = in_dir(&k3());
    let profile = Profile::load(&path).unwrap();
    assert_eq!(profile.file.tool.command.as_deref().unwrap(), ["./bin/tool", "--lead"]);
    let kit = &profile.file.kit;
    assert_eq!(kit.timeout_seconds, Some(5.0));
    assert_eq!(kit.manifest.as_deref().unwrap(), ["describe"]);
    assert_eq!(kit.stream[0].after_lines, Some(3));
    assert_eq!(kit.argument_order.as_ref().unwrap().alternate_value, "text");
    assert!(errors(&validator("profile.json"), &toml_json(&k3())).is_empty());
}

#[rstest]
#[case::empty_command("[\"./bin/tool\", \"--lead\"]", "[]", Some(3), true)]
#[case::blank_command("\"--lead\"", "\" \"", Some(3), true)]
#[case::timeout_zero("timeout_seconds = 5", "timeout_seconds = 0", Some(6), true)]
#[case::timeout_too_long("timeout_seconds = 5", "timeout_seconds = 121", Some(6), true)]
#[case::empty_manifest("manifest = [\"describe\"]", "manifest = []", Some(7), true)]
#[case::stream_empty_argv("[\"files\", \".\", \"--stream\"]", "[]", Some(9), true)]
#[case::stream_confirms("\"--stream\"]", "\"--stream\", \"--yes\"]", Some(10), true)]
#[case::deadline_too_long("deadline_seconds = 20", "deadline_seconds = 601", Some(11), true)]
#[case::other_signal("signal = \"INT\"", "signal = \"TERM\"", Some(12), true)]
#[case::signal_alone("after_lines = 3\n", "", Some(12), true)]
#[case::lines_alone("signal = \"INT\"\n", "", Some(12), true)]
#[case::zero_lines("after_lines = 3", "after_lines = 0", Some(13), true)]
#[case::stream_fixture_missing("[\"data.csv\"]", "[\"gone.csv\"]", Some(15), false)]
#[case::stream_unknown_key("after_lines = 3", "after_lines = 3\nlines = 3", Some(14), true)]
#[case::empty_path("command_path = [\"files\"]", "command_path = []", Some(18), true)]
#[case::no_local_args("local_args = [\"--limit\", \"3\"]", "local_args = []", Some(19), true)]
#[case::short_global("global_flag = \"--output\"", "global_flag = \"-o\"", Some(20), true)]
#[case::same_values("alternate_value = \"text\"", "alternate_value = \"json\"", Some(22), false)]
#[case::empty_positional("positional = \"site\"", "positional = \"\"", Some(23), true)]
#[case::order_unknown_key(
    "positional = \"site\"",
    "positional = \"site\"\nother = 1",
    Some(24),
    true
)]
fn a_bad_k3_key_is_refused_with_its_place(
    #[case] from: &str,
    #[case] to: &str,
    #[case] line: Option<usize>,
    #[case] schema_too: bool,
) {
    assert!(k3().contains(from), "{from}");
    let text = k3().replacen(from, to, 1);
    let (_dir, path) = in_dir(&text);
    let err = Profile::load(&path).unwrap_err();
    assert_eq!(err.location.map(|(l, _)| l), line, "{err}");
    if schema_too && let Ok(v) = toml::from_str::<toml::Value>(&text) {
        let errs = errors(&validator("profile.json"), &serde_json::to_value(v).unwrap());
        assert!(!errs.is_empty(), "the schema accepted:\n{text}");
    }
}

/// A tool that logs each invocation's arguments to `calls.log` beside it and answers a
/// manifest-less envelope.
fn logging_tool(dir: &Path, rel: &str) -> std::path::PathBuf {
    let tool = dir.join(rel);
    std::fs::create_dir_all(tool.parent().unwrap()).unwrap();
    let log = dir.join("calls.log");
    crate::support::write_executable(
        &tool,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nprintf '{{\"ok\":true,\"data\":{{}},\"error\":null,\"warnings\":[],\"meta\":{{}}}}\\n'\n",
            log.display()
        ),
    );
    tool
}

#[test]
fn without_a_tool_the_profile_command_runs_with_its_leading_arguments() {
    let dir = tempfile::tempdir().unwrap();
    logging_tool(dir.path(), "bin/tool");
    let profile = dir.path().join("conform.toml");
    std::fs::write(
        &profile,
        "[tool]\ncommand = [\"./bin/tool\", \"--lead\"]\n\n[kit]\nmanifest = [\"describe\", \"all\"]\nread = [[\"version\"]]\nsetup = ['\"$CONFORM_TOOL\" prepare it']\n",
    )
    .unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let out = conform()
        .current_dir(elsewhere.path())
        .args(["run", "--profile"])
        .arg(&profile)
        .args(["--only", "read-probes-end-with-stdin-closed", "--format", "json"])
        .output()
        .unwrap();
    let report = stdout_json(&out);
    assert_eq!(code(&out), 0, "{report:#}");
    let log = std::fs::read_to_string(dir.path().join("calls.log")).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.first(), Some(&"--lead describe all"), "discovery: {log}");
    assert!(lines.contains(&"--lead version"), "the probe: {log}");
    // Setup's `$CONFORM_TOOL` runs the whole command, leading arguments included.
    assert!(lines.contains(&"--lead prepare it"), "the setup: {log}");
    assert!(lines.iter().all(|l| l.starts_with("--lead ")), "{log}");
}

#[test]
fn without_a_tool_or_a_command_run_is_a_usage_error() {
    let (dir, path) = in_dir("[kit]\nread = [[\"version\"]]\n");
    let out = conform()
        .current_dir(dir.path())
        .args(["run", "--profile"])
        .arg(&path)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    let envelope = stdout_json(&out);
    assert_eq!(envelope["error"]["code"], "ARG_ERROR");
    assert!(envelope["error"]["message"].as_str().unwrap().contains("[tool] command"));
    // No profile at all: the same, in words.
    let empty = tempfile::tempdir().unwrap();
    let out = conform().current_dir(empty.path()).arg("run").output().unwrap();
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no TOOL"));
}

#[test]
fn a_kit_profile_maps_command_timeout_manifest_streams_and_argument_order() {
    let text = KIT_PROFILE
        .replacen(
            r#"{ "name": "greet", "argv": ["greet"], "kind": "read" },"#,
            r#"{ "name": "greet", "argv": ["greet"], "kind": "read" },
    { "name": "list", "argv": ["list", "--stream"], "kind": "stream", "deadline_seconds": 9, "signal": "INT", "after_lines": 2 },"#,
            1,
        )
        .replacen(
            r#""probes": ["#,
            r#""argument_order": { "command_path": ["list"], "local_args": ["--limit", "2"], "global_flag": "--output", "value": "json", "alternate_value": "text", "positional": "." },
  "probes": ["#,
            1,
        );
    let (_dir, path) = kit_in_dir(&text);
    let profile = Profile::load(&path).unwrap();
    assert_eq!(profile.file.tool.command.as_deref().unwrap(), ["faketool"]);
    let kit = &profile.file.kit;
    assert_eq!(kit.timeout_seconds, Some(5.0));
    assert_eq!(kit.manifest.as_deref().unwrap(), ["manifest"]);
    assert_eq!(kit.stream.len(), 1);
    assert_eq!(kit.stream[0].argv, ["list", "--stream"]);
    assert_eq!(kit.stream[0].deadline_seconds, Some(9.0));
    assert_eq!(kit.stream[0].signal.as_deref(), Some("INT"));
    assert_eq!(kit.stream[0].after_lines, Some(2));
    let order = kit.argument_order.as_ref().unwrap();
    assert_eq!(order.command_path, ["list"]);
    assert_eq!(order.positional.as_deref(), Some("."));
}

#[rstest]
#[case::signal_on_read(
    r#""kind": "read" }"#,
    r#""kind": "read", "signal": "INT", "after_lines": 1 }"#,
    "stream probes only"
)]
#[case::deadline_on_invalid(
    r#""kind": "invalid" }"#,
    r#""kind": "invalid", "deadline_seconds": 3 }"#,
    "stream probes only"
)]
#[case::dry_run_on_stream(
    r#""kind": "read" }"#,
    r#""kind": "stream", "dry_run_flag": "--dry-run" }"#,
    "dry_run_flag"
)]
#[case::signal_without_lines(
    r#""kind": "read" }"#,
    r#""kind": "stream", "signal": "INT" }"#,
    "after_lines"
)]
#[case::lines_without_signal(
    r#""kind": "read" }"#,
    r#""kind": "stream", "after_lines": 2 }"#,
    "signal"
)]
#[case::same_values(
    r#""probes": ["#,
    r#""argument_order": { "command_path": ["x"], "local_args": ["-n", "1"], "global_flag": "--output", "value": "json", "alternate_value": "json" }, "probes": ["#,
    "alternate_value"
)]
#[case::order_setup(
    r#""probes": ["#,
    r#""argument_order": { "command_path": ["x"], "local_args": ["-n", "1"], "global_flag": "--output", "value": "json", "alternate_value": "text", "setup": ["true"] }, "probes": ["#,
    "no `setup` or `fixtures`"
)]
fn a_broken_k3_kit_profile_is_refused(#[case] from: &str, #[case] to: &str, #[case] says: &str) {
    assert!(KIT_PROFILE.contains(from), "{from}");
    let (_dir, path) = kit_in_dir(&KIT_PROFILE.replacen(from, to, 1));
    let err = Profile::load(&path).unwrap_err();
    assert!(err.to_string().contains(says), "{err}");
}

/// `{sandbox}` and `{work}` in `env` values are the sandbox's own paths: a tool that keeps its
/// state under a variable of its own needs no wrapper. The fixture tool changes to `/` first,
/// as a daemon would, so only an absolute, per-sandbox `X_HOME` keeps two scenarios apart.
#[test]
fn env_values_name_the_sandbox_so_scenarios_keep_their_state_apart() {
    use conform::exec::{self, Program, Termination};
    use conform::prepare::{Needs, SANDBOX_DIR_ENV, prepare};
    use conform::tool::Tool;

    let dir = tempfile::tempdir().unwrap();
    let tool = dir.path().join("xtool");
    crate::support::write_executable(
        &tool,
        "#!/bin/sh\ncd / || exit 1\nmkdir -p \"$X_HOME\" && echo \"$1 in $X_WORK\" >> \"$X_HOME/log\" && cat \"$X_HOME/log\"\n",
    );
    let profile_path = dir.path().join("conform.toml");
    std::fs::write(
        &profile_path,
        format!(
            "[tool]\nenv = {{ X_HOME = \"{{sandbox}}/state\" }}\n\n\
             [roles.detach]\nargv = [\"run\"]\nenv = {{ X_WORK = \"{{work}}\", BRACES = \"{{{{sandbox}}}}\" }}\n\
             setup = ['\"$CONFORM_TOOL\" setup', 'test \"$X_HOME\" = \"${SANDBOX_DIR_ENV}/state\"', 'test \"$BRACES\" = \"{{sandbox}}\"']\n"
        ),
    )
    .unwrap();
    let profile = Profile::load(&profile_path).unwrap();
    let subject = Tool { path: tool, leading_args: Vec::new() };
    let roles = ["detach"];
    let needs = Needs { roles: &roles, ..Needs::default() };
    let run_in = |sandbox: &conform::sandbox::Sandbox| {
        let mut inv = sandbox
            .invocation(Program::Argv(vec![subject.path.clone().into_os_string(), "run".into()]));
        let role_env = conform::profile::render_env(
            &profile.role("detach").unwrap().env,
            sandbox.root(),
            &sandbox.work(),
        );
        inv.env.extend(role_env.into_iter().map(|(k, v)| (k.into(), v.into())));
        let out = exec::run(&inv).unwrap();
        assert_eq!(out.termination, Termination::Exited(0));
        String::from_utf8(out.stdout.bytes).unwrap()
    };
    let first = prepare(&subject, &profile, &needs, false).unwrap();
    let second = prepare(&subject, &profile, &needs, false).unwrap();
    for sandbox in [&first, &second] {
        let work = sandbox.work().display().to_string();
        // The setup line ran with the role's env, and the tool's run sees only its own sandbox's
        // state: one setup line and one run each, both in this sandbox.
        assert_eq!(run_in(sandbox), format!("setup in {work}\nrun in {work}\n"));
        assert!(sandbox.root().join("state/log").is_file(), "state is under the sandbox root");
    }
}

#[rstest]
#[case::unknown("X = \"{home}/x\"", "`{home}` is not a sandbox variable")]
#[case::calibration("X = \"{budget}\"", "`{budget}` is not a sandbox variable")]
#[case::tool("X = \"{tool}\"", "`{tool}` is not a sandbox variable")]
#[case::unclosed("X = \"{sandbox\"", "unclosed")]
fn an_unknown_env_template_is_a_profile_error(#[case] env: &str, #[case] message: &str) {
    let (dir, path) = in_dir(&format!("[tool]\nenv = {{ {env} }}\n"));
    let error = Profile::load(&path).unwrap_err();
    assert!(error.to_string().contains(message), "{error}");
    assert!(error.to_string().contains("`X` in `tool.env`"), "{error}");
    let out = conform()
        .current_dir(dir.path())
        .args(["run", "/bin/true", "--profile"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(code(&out), 2, "{}", String::from_utf8_lossy(&out.stderr));
    let role = format!("[roles.detach]\nargv = [\"run\"]\nenv = {{ {env} }}\n");
    let (_dir, path) = in_dir(&role);
    let error = Profile::load(&path).unwrap_err();
    assert!(error.to_string().contains("`roles.detach.env`"), "{error}");
}

/// Out of the edit lane (`.config/nextest.toml`): these wait out timeouts or run conform over whole tools.
mod heavy {
    use super::*;

    #[test]
    fn conform_runs_the_kit_checks_from_a_kit_profile() {
        let (dir, path) = kit_in_dir(KIT_PROFILE);
        let out = conform()
            .current_dir(dir.path())
            .args(["run"])
            .arg(crate::support::faketool())
            .arg("--profile")
            .arg(&path)
            // Two at once: a Python tool's start-up under the run's own load must stay within the
            // profile's 5 s kit timeout, whatever the default `-j`.
            .args(["--only", "kit", "--only", "detach", "-j", "2", "--format", "json"])
            .output()
            .unwrap();
        let report = stdout_json(&out);
        for id in [
            "dry-run-previews",
            "destructive-refuses-unconfirmed",
            "invalid-probes-are-arg-errors",
            "read-probes-keep-ansi-off-stdout",
            "no-color-is-honoured",
            "read-probes-end-with-stdin-closed",
            "read-probes-end-with-stdin-open",
        ] {
            assert_eq!(crate::support::status_of(&report, id), "pass", "{id}: {report:#}");
        }
        // No roles in a kit profile: the §79 scenarios needing one are skipped, never failed.
        assert_eq!(crate::support::status_of(&report, "detach-hands-off-running"), "skip");
    }

    #[test]
    fn a_kit_probe_beyond_the_kit_timeout_is_killed_and_fails() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("slow");
        // It answers its manifest (a tool hanging there is judged by the headline alone) and
        // hangs on the probe.
        crate::support::write_executable(
            &tool,
            format!(
                "#!/bin/sh\n[ \"$1\" = manifest ] && exec '{}' manifest\nsleep 20\n",
                crate::support::faketool().display()
            ),
        );
        let profile = dir.path().join("conform.toml");
        std::fs::write(&profile, "[kit]\ntimeout_seconds = 1\nread = [[\"version\"]]\n").unwrap();
        let started = std::time::Instant::now();
        let out = conform()
            .current_dir(dir.path())
            .arg("run")
            .arg(&tool)
            .args(["--profile"])
            .arg(&profile)
            .args(["--only", "read-probes-end-with-stdin-closed", "--format", "json"])
            .output()
            .unwrap();
        let report = stdout_json(&out);
        assert_eq!(crate::support::status_of(&report, "read-probes-end-with-stdin-closed"), "fail");
        let findings = report["data"]["scenarios"][0]["findings"].to_string();
        assert!(findings.contains("timeout"), "{report:#}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(18),
            "the kit's limit was not used"
        );
    }
}
