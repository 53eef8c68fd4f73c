//! conform's command line: list, explain, completions and bad invocations.

use conform::scenario::SCENARIO_FILES;

use crate::support::{code, conform, errors, faketool, stdout_json, validator};

#[test]
fn list_shows_every_scenario_as_a_table() {
    let out = conform().arg("list").output().unwrap();
    assert_eq!(code(&out), 0);
    let text = String::from_utf8(out.stdout).unwrap();
    let first = text.lines().next().unwrap();
    for column in ["ID", "REQUIREMENT", "LEVEL", "ROLES", "CRITERION"] {
        assert!(first.contains(column), "{first}");
    }
    for (path, _) in SCENARIO_FILES {
        let id = path.rsplit('/').next().unwrap().trim_end_matches(".toml");
        assert!(text.lines().any(|l| l.starts_with(&format!("{id} "))), "{id} missing:\n{text}");
    }
    assert!(text.ends_with(&format!("{} scenarios\n", SCENARIO_FILES.len())));
}

#[test]
fn list_as_json_is_an_envelope() {
    let out = conform().args(["list", "--format", "json"]).output().unwrap();
    assert_eq!(code(&out), 0);
    let envelope = stdout_json(&out);
    assert!(errors(&validator("response-envelope.json"), &envelope).is_empty());
    let scenarios = envelope["data"]["scenarios"].as_array().unwrap();
    assert_eq!(scenarios.len(), SCENARIO_FILES.len());
    let s = scenarios.iter().find(|s| s["id"] == "budget-flag-beats-env").unwrap();
    assert_eq!(s["requirement"], "REQ-F-080");
    assert_eq!(s["level"], "must");
    assert_eq!(s["roles"], serde_json::json!(["detach"]));
}

#[test]
fn explain_shows_the_scenario_and_its_source() {
    let out = conform().args(["explain", "dead-worker-is-job-lost"]).output().unwrap();
    assert_eq!(code(&out), 0);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("dead-worker-is-job-lost (REQ-F-081, must)"), "{text}");
    assert!(text.contains("action = \"kill-worker\""), "{text}");

    let out = conform()
        .args(["explain", "dead-worker-is-job-lost", "--format", "json"])
        .output()
        .unwrap();
    let envelope = stdout_json(&out);
    assert_eq!(envelope["data"]["scenario"]["steps"][1]["action"], "kill-worker");
}

/// The scenario of the newcomer's walk: "--budget takes precedence over AGENT_CALL_BUDGET_MS".
const WALKED: &str = "budget-flag-beats-env";

#[test]
fn explain_shows_each_step_s_argv_variables_and_checks() {
    let out = conform().args(["explain", WALKED]).output().unwrap();
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    insta::assert_snapshot!("explain_without_a_tool", String::from_utf8(out.stdout).unwrap());

    let out = conform().args(["explain", WALKED, "--format", "json"]).output().unwrap();
    let envelope = stdout_json(&out);
    assert!(errors(&validator("response-envelope.json"), &envelope).is_empty());
    let data = &envelope["data"];
    assert_eq!(data["variables"][0]["name"], "{budget}");
    assert!(data["variables"][0]["value"].is_null(), "no tool, no value: {data}");
    assert_eq!(data["variables"][1]["value"], "1500 ms", "{{slack}} needs no tool");
    let step = &data["steps"][0];
    assert_eq!(step["argv"][0], "TOOL");
    assert_eq!(step["env"][0], "AGENT_CALL_BUDGET_MS=600000");
    let keys: Vec<&str> =
        step["checks"].as_array().unwrap().iter().filter_map(|c| c["key"].as_str()).collect();
    assert_eq!(keys, ["exit", "json", "elapsed_max"]);
    assert_eq!(step["checks"][2]["defined_in"], "harness/src/checks/json.rs");
}

/// reftool beside this test binary (a workspace build makes it).
fn reftool() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(std::path::Path::parent).unwrap();
    dir.join("reftool").canonicalize().expect("build reftool first (cargo build -p reftool)")
}

#[test]
fn explain_with_a_tool_shows_the_values_run_would_use() {
    let profile =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../reference-tool/conform.toml");
    let tool = reftool();
    let out = conform()
        .args(["explain", WALKED])
        .arg(&tool)
        .arg("--profile")
        .arg(&profile)
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    // What the calibration measured varies from run to run; its formulas do not.
    let escaped = regex::escape(&tool.display().to_string());
    insta::with_settings!({ filters => vec![
        (escaped.as_str(), "[TOOL]"),
        (r"D = \d+ ms", "D = [D] ms"),
        (r"\{budget\} = \d+ ms", "{budget} = [BUDGET] ms"),
        (r"--budget \d+m?s\b", "--budget [BUDGET]"),
        (r#""\{budget\}" -> \d+"#, r#""{budget}" -> [BUDGET]"#),
        (r"-> \d+ \+ 1500 = \d+ ms", "-> [BUDGET] + 1500 = [BUDGET + 1500] ms"),
    ]}, {
        insta::assert_snapshot!("explain_with_reftool", text);
    });
}

#[test]
fn explain_of_an_unknown_id_is_arg_error_with_a_hint() {
    let out = conform().args(["explain", "dead-worker"]).output().unwrap();
    assert_eq!(code(&out), 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("did you mean: dead-worker-is-job-lost"), "{stderr}");
}

#[test]
fn completions_are_printed() {
    let out = conform().args(["completions", "bash"]).output().unwrap();
    assert_eq!(code(&out), 0);
    assert!(String::from_utf8_lossy(&out.stdout).contains("conform"));
}

#[test]
fn a_bad_invocation_is_arg_error_also_as_json() {
    let out = conform().args(["run"]).output().unwrap();
    assert_eq!(code(&out), 2);
    let out = conform().args(["run", "--format", "json", "--bogus"]).output().unwrap();
    assert_eq!(code(&out), 2);
    let envelope = stdout_json(&out);
    assert_eq!(envelope["error"]["code"], "ARG_ERROR");
    assert!(errors(&validator("response-envelope.json"), &envelope).is_empty());
}

#[test]
fn a_filter_matching_nothing_is_arg_error() {
    let out = conform().arg("run").arg(faketool()).args(["--only", "REQ-X-999"]).output().unwrap();
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("matches no scenario"));
}

#[test]
fn a_missing_tool_is_arg_error() {
    let out = conform().args(["run", "./no/such/tool"]).output().unwrap();
    assert_eq!(code(&out), 2);
}

#[test]
fn a_tool_that_is_not_executable_is_arg_error() {
    let dir = tempfile::tempdir().unwrap();
    let tool = dir.path().join("notes.txt");
    std::fs::write(&tool, "not a program").unwrap();
    let out = conform().arg("run").arg(&tool).output().unwrap();
    assert_eq!(code(&out), 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an executable file"));
}

#[test]
fn keep_sandboxes_keeps_each_scenario_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = conform()
        .current_dir(dir.path())
        .env("TMPDIR", dir.path())
        .arg("run")
        .arg(faketool())
        .args(["--only", "manifest-valid", "--keep-sandboxes"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let kept: Vec<&str> =
        stderr.lines().filter_map(|l| l.strip_prefix("conform: kept the sandbox at ")).collect();
    assert_eq!(kept.len(), 1, "{stderr}");
    assert!(std::path::Path::new(kept[0]).join("work").is_dir(), "{stderr}");
}

#[test]
fn init_drafts_a_valid_profile_from_the_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("conform.toml");
    let out = conform().arg("init").arg(faketool()).arg("--output").arg(&path).output().unwrap();
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&path).unwrap();
    // The fake tool's resumable, read-only `count` is offered as the resume_reader role.
    assert!(text.contains("# [roles.resume_reader]\n# argv = [\"count\", \"<ARGS>\"]"), "{text}");
    assert!(text.contains("wipe"), "the destructive command is offered as a probe: {text}");
    // As drafted, it is a valid profile.
    conform::profile::Profile::load(&path).unwrap();
    assert!(
        errors(
            &validator("profile.json"),
            &serde_json::to_value(toml::from_str::<toml::Value>(&text).unwrap()).unwrap()
        )
        .is_empty()
    );
    // It never overwrites.
    let out = conform().arg("init").arg(faketool()).arg("--output").arg(&path).output().unwrap();
    assert_eq!(code(&out), 2);
}

/// A manifest with a streaming list and a global `--format json|plain`: `conform init` drafts
/// the stream probes and the argument order, and uncommenting them gives a valid profile.
#[test]
fn init_drafts_stream_probes_and_the_argument_order() {
    let manifest = serde_json::json!({
        "schema_version": "3.20",
        "flags": { "format": { "type": "enum", "enum_values": ["json", "plain"] } },
        "commands": {
            "list": {
                "danger_level": "safe",
                "supports_streaming": true,
                "flags": {
                    "stream": { "type": "boolean" },
                    "limit": { "type": "integer" }
                },
                "positionals": [{ "name": "prefix", "type": "string" }]
            },
            "sync": { "danger_level": "safe", "interruption": { "detach": true, "resume": true },
                      "flags": { "budget": { "type": "string" } } }
        }
    });
    let text = conform::init::skeleton("mytool", &manifest);
    assert!(text.contains("# argv = [\"list\", \"<ARGS>\", \"--stream\"]"), "{text}");
    assert!(text.contains("# command_path = [\"list\"]"), "{text}");
    assert!(text.contains("# local_args = [\"--limit\", \"<VALUE>\"]"), "{text}");
    assert!(text.contains("# global_flag = \"--format\""), "{text}");
    assert!(text.contains("# alternate_value = \"plain\""), "{text}");
    assert!(text.contains("# positional = \"<PREFIX>\""), "{text}");
    // Uncommented, the drafted blocks are a valid profile.
    let start = text.find("# [[kit.stream]]").expect("a stream block");
    let uncommented: String = text[start..]
        .lines()
        .map(|l| l.strip_prefix("# ").filter(|l| !l.starts_with(['S', 'A'])).unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("conform.toml");
    std::fs::write(&path, format!("{}\n{uncommented}\n", &text[..start])).unwrap();
    let profile = conform::profile::Profile::load(&path).unwrap();
    assert_eq!(profile.file.kit.stream.len(), 2);
    assert_eq!(profile.file.kit.stream[1].after_lines, Some(3));
    assert!(profile.file.kit.argument_order.is_some());
}

#[test]
fn version_names_conform_and_the_spec_it_judges() {
    for flag in ["--version", "-V"] {
        let out = conform().arg(flag).output().unwrap();
        assert_eq!(code(&out), 0);
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(text, format!("{}\n", conform::cli::version_text()));
        assert!(text.starts_with(&format!("conform {} ", env!("CARGO_PKG_VERSION"))), "{text}");
        assert!(text.contains(&format!("schema version {}", conform::report::SPEC_VERSION)));
    }
}

/// `conform --help` and the drafted profile point to the manual; `run --help` gives the `-j`
/// default this machine gets and says how it is chosen.
#[test]
fn help_and_init_point_to_the_manual() {
    let out = conform().arg("--help").output().unwrap();
    assert_eq!(code(&out), 0);
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("conform manual"), "{help}");
    let out = conform().args(["run", "--help"]).output().unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    assert!(help.contains("eight per core"), "{help}");
    let manifest = serde_json::json!({ "schema_version": "3.20", "commands": {} });
    let text = conform::init::skeleton("mytool", &manifest);
    assert!(text.contains("`conform manual profile`"), "{text}");
}

/// Without `-j` the pace decides between one scenario per core and a ceiling that follows
/// the cores, lower for a tool slow to start.
#[test]
fn the_pace_bounds_follow_the_cores_and_the_start_up() {
    use std::time::Duration;
    let cores = std::thread::available_parallelism().unwrap().get();
    let fast = conform::cli::pace_bounds(Duration::from_millis(20));
    assert_eq!((fast.floor, fast.ceiling), (cores, (8 * cores).clamp(64, 96)));
    let slow = conform::cli::pace_bounds(conform::cli::SLOW_STARTUP);
    assert_eq!((slow.floor, slow.ceiling), (cores, (2 * cores).clamp(4, 16)));
    assert!(slow.ceiling < fast.ceiling);
    use clap::Parser;
    let conform::cli::Command::Run(run) =
        conform::cli::Cli::try_parse_from(["conform", "run", "t"]).unwrap().command
    else {
        panic!("not a run")
    };
    assert_eq!(run.jobs, None, "the default waits for the measured start-up");
}

/// Every file of `harness/docs/` is a topic of `conform manual` and a part of the crate docs
/// (included by lib.rs), so the two are one text; each topic prints that text.
#[test]
fn the_manual_is_the_crate_docs() {
    use conform::cli::manual::{TOPICS, plain};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(dir.join("src/lib.rs")).unwrap();
    let mut files: Vec<String> = std::fs::read_dir(dir.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    let mut topics: Vec<String> = TOPICS.iter().map(|t| format!("{}.md", t.name)).collect();
    topics.sort();
    assert_eq!(files, topics, "a file of harness/docs/ without a topic, or the reverse");
    for topic in TOPICS {
        let file = format!("{}.md", topic.name);
        let include = format!("#![doc = include_str!(\"../docs/{file}\")]");
        assert!(lib.contains(&include), "lib.rs does not include {file}");
        let on_disk = std::fs::read_to_string(dir.join("docs").join(&file)).unwrap();
        assert_eq!(topic.text, on_disk);
        let out = conform().args(["manual", topic.name]).output().unwrap();
        assert_eq!(code(&out), 0);
        let printed = String::from_utf8(out.stdout).unwrap();
        assert!(printed.trim().len() > 100, "{}: {printed}", topic.name);
        assert_eq!(printed, plain(&on_disk));
        assert!(!printed.contains("[`"), "{}: a rustdoc link left: {printed}", topic.name);
    }
    // The order of the topics is the order of the crate docs.
    let at: Vec<usize> =
        TOPICS.iter().map(|t| lib.find(&format!("../docs/{}.md", t.name)).unwrap()).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{at:?}");
}

#[test]
fn manual_without_a_topic_lists_them_and_an_unknown_one_is_arg_error() {
    use conform::cli::manual::TOPICS;
    let out = conform().arg("manual").output().unwrap();
    assert_eq!(code(&out), 0);
    let list = String::from_utf8(out.stdout).unwrap();
    for topic in TOPICS {
        assert!(list.lines().any(|l| l.trim_start().starts_with(topic.name)), "{list}");
    }
    let out = conform().args(["manual", "--format", "json"]).output().unwrap();
    let envelope = stdout_json(&out);
    assert!(errors(&validator("response-envelope.json"), &envelope).is_empty());
    assert_eq!(envelope["data"]["topics"].as_array().unwrap().len(), TOPICS.len());

    let out = conform().args(["manual", "no-such-topic"]).output().unwrap();
    assert_eq!(code(&out), 2);
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no manual topic `no-such-topic`") && stderr.contains("profile"));
    let out = conform().args(["manual", "no-such-topic", "--format", "json"]).output().unwrap();
    assert_eq!(code(&out), 2);
    let envelope = stdout_json(&out);
    assert!(errors(&validator("response-envelope.json"), &envelope).is_empty());
    assert_eq!(envelope["error"]["code"], "ARG_ERROR");
    assert!(envelope["error"]["message"].as_str().unwrap().contains("scenarios"));
    let out = conform().args(["manual", "profile", "--format", "json"]).output().unwrap();
    assert_eq!(stdout_json(&out)["data"]["topic"], "profile");
}

/// Out of the edit lane (`.config/nextest.toml`): these wait out timeouts or run conform over whole tools.
mod heavy {
    use super::*;

    /// Ctrl-C to conform stops the tool's processes (which live in their own process groups and
    /// never see the terminal's signal), removes the sandboxes, and still answers an agent that
    /// parses stdout: one envelope, exit 130, `CANCELLED`, the report of what finished marked
    /// partial (the JUnit file too).
    #[test]
    fn an_interrupted_run_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = dir.path().join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        let tool = dir.path().join("hang");
        let pids = dir.path().join("pids");
        // It answers its manifest (a tool that hangs there would only be judged by its headline)
        // and hangs on every other call.
        crate::support::write_executable(
            &tool,
            format!(
                "#!/bin/sh\n[ \"$1\" = manifest ] && exec '{}' manifest\necho $$ >> '{}'\nexec sleep 600\n",
                crate::support::faketool().display(),
                pids.display()
            ),
        );
        let mut child = conform()
            .current_dir(dir.path())
            .env("TMPDIR", &tmp)
            .arg("run")
            .arg(&tool)
            .args(["--format", "json", "--junit"])
            .arg(dir.path().join("junit.xml"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Wait until a scenario's step runs the tool (and hangs in it).
        let started = || std::fs::read_to_string(&pids).map_or(0, |t| t.lines().count());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(40);
        while started() < 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(started() >= 1, "no scenario ran the tool");
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
            nix::sys::signal::Signal::SIGINT,
        )
        .unwrap();
        let mut stdout = String::new();
        std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130));
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert!(stderr.contains("interrupted"), "{stderr}");
        let envelope: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON envelope");
        assert_eq!(envelope["ok"], false);
        assert_eq!(envelope["meta"]["exit_code"], 130);
        assert_eq!(envelope["error"]["code"], "CANCELLED", "{envelope:#}");
        assert_eq!(envelope["data"]["partial"], true);
        let unfinished = envelope["data"]["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["reason"] == "not finished: conform was interrupted")
            .count();
        assert!(unfinished >= 1, "{envelope:#}");
        let junit = std::fs::read_to_string(dir.path().join("junit.xml")).unwrap();
        assert!(junit.contains(r#"name="partial" value="true""#), "{junit}");
        for pid in std::fs::read_to_string(&pids).unwrap().lines() {
            assert!(!crate::support::alive(pid), "process {pid} survived");
        }
        let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
        assert!(left.is_empty(), "sandboxes left behind: {left:?}");
    }
}
