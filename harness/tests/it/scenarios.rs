//! The scenario catalogue: every file parses, validates against `schemas/scenario.json`, sits
//! where its requirement says, and the model and the schema agree on what is invalid.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use conform::catalogue::{Catalogue, parse_scenario};
use conform::scenario::{SCENARIO_FILES, Step, Var, eval_duration, template_vars, walk_template};
use rstest::rstest;

use crate::support::{errors, validator};

fn toml_to_json(text: &str) -> serde_json::Value {
    let value: toml::Value = toml::from_str(text).unwrap();
    serde_json::to_value(value).unwrap()
}

#[test]
fn every_embedded_scenario_parses() {
    let catalogue = Catalogue::embedded().unwrap_or_else(|errors| {
        panic!("{}", errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))
    });
    assert!(catalogue.scenarios.len() >= 25, "only {} scenarios", catalogue.scenarios.len());
}

#[test]
fn the_embedded_list_is_the_scenarios_directory() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut on_disk = BTreeSet::new();
    for dir in std::fs::read_dir(&root).unwrap() {
        let dir = dir.unwrap().path();
        if dir.is_file() {
            // scenarios/README.md, the criterion-to-scenario map, is documentation.
            assert_eq!(dir.file_name().and_then(|n| n.to_str()), Some("README.md"));
            continue;
        }
        for file in std::fs::read_dir(&dir).unwrap() {
            let file = file.unwrap().path();
            assert_eq!(
                file.extension().and_then(|e| e.to_str()),
                Some("toml"),
                "{}",
                file.display()
            );
            on_disk.insert(file.strip_prefix(&root).unwrap().display().to_string());
        }
    }
    let embedded: BTreeSet<String> = SCENARIO_FILES.iter().map(|(p, _)| (*p).to_owned()).collect();
    assert_eq!(embedded, on_disk);
}

#[test]
fn every_scenario_validates_against_the_schema() {
    let v = validator("scenario.json");
    for (path, text) in SCENARIO_FILES {
        let errs = errors(&v, &toml_to_json(text));
        assert!(errs.is_empty(), "{path}:\n{}", errs.join("\n"));
    }
}

#[test]
fn ids_are_unique_and_directories_match_requirements() {
    let catalogue = Catalogue::embedded().unwrap();
    let mut ids = BTreeSet::new();
    for s in &catalogue.scenarios {
        assert!(ids.insert(&s.id), "{} twice", s.id);
    }
    for (path, _) in SCENARIO_FILES {
        let (dir, file) = path.split_once('/').unwrap();
        let s = catalogue.get(file.trim_end_matches(".toml")).unwrap();
        assert_eq!(s.requirement, dir);
    }
}

#[test]
fn the_catalogue_uses_every_step_and_check_kind() {
    let catalogue = Catalogue::embedded().unwrap();
    let mut actions = BTreeSet::new();
    let mut checks = BTreeSet::new();
    for s in &catalogue.scenarios {
        for step in &s.steps {
            actions.insert(step.action());
            if let Step::Run(r) = step {
                if r.count.is_some() {
                    actions.insert("run.count");
                }
                if r.kill_group.is_some() {
                    actions.insert("run.kill_group");
                }
                if r.probe.is_some() {
                    actions.insert("run.probe");
                }
                if r.tool_dir.is_some() {
                    actions.insert("run.tool_dir");
                }
                if r.order.is_some() {
                    actions.insert("run.order");
                }
                if matches!(r.probe, Some(conform::scenario::ProbeKind::StreamSignal)) {
                    actions.insert("run.probe.stream-signal");
                }
                if let Some(stdin) = r.stdin {
                    actions.insert(match stdin {
                        conform::scenario::StdinKind::Closed => "stdin.closed",
                        conform::scenario::StdinKind::Open => "stdin.open",
                        conform::scenario::StdinKind::Pty => "stdin.pty",
                    });
                }
            }
            let Some(e) = step.expect() else { continue };
            let json = serde_json::to_value(e).unwrap();
            for (k, v) in json.as_object().unwrap() {
                let used = !(v.is_null() || v.as_array().is_some_and(Vec::is_empty));
                if used {
                    checks.insert(k.clone());
                }
            }
        }
    }
    for a in [
        "run",
        "continue",
        "cancel",
        "kill-worker",
        "sleep",
        "shell",
        "no-processes",
        "elapsed-since",
        "run.count",
        "run.kill_group",
        "run.probe",
        "run.tool_dir",
        "run.order",
        "run.probe.stream-signal",
        "stdin.pty",
        "stdin.open",
        "stdin.closed",
    ] {
        assert!(actions.contains(a), "no scenario uses {a}");
    }
    for c in [
        "exit",
        "exit_not",
        "schema",
        "json",
        "elapsed_max",
        "pipes_released",
        "progress_monotonic",
        "matches_calibrated",
        "warnings",
        "envelope",
        "exit_matches_meta",
        "same_response_as",
        "same",
        "manifest_rules",
        "no_ansi",
        "differs_from",
        "continues_verbatim",
        "stream",
        "same_stdout_as",
        "stdout_differs_from",
        "same_data_as",
        "data_differs_from",
    ] {
        assert!(checks.contains(c), "no scenario uses the check {c}");
    }
}

const GOOD: &str = r#"
id = "x"
requirement = "REQ-F-080"
criterion = "c"
level = "must"
roles = ["detach"]

[[steps]]
action = "run"
name = "call"
role = "detach"
budget = "{budget}"
expect = { exit = 14 }
"#;

#[test]
fn a_good_scenario_passes_model_and_schema() {
    parse_scenario("REQ-F-080/x.toml", GOOD).unwrap();
    assert!(errors(&validator("scenario.json"), &toml_to_json(GOOD)).is_empty());
}

/// Each edit breaks the good scenario; the model must refuse it, and so must the schema when
/// `schema_too` (some rules, like references between steps, are beyond JSON Schema).
#[rstest]
#[case::unknown_key("level = \"must\"", "level = \"must\"\nlevl = \"x\"", true)]
#[case::bad_level("level = \"must\"", "level = \"shall\"", true)]
#[case::unknown_role("roles = [\"detach\"]", "roles = [\"detach\", \"teleport\"]", true)]
#[case::unknown_action("action = \"run\"", "action = \"fly\"", true)]
#[case::unknown_step_key("role = \"detach\"", "role = \"detach\"\nrolle = 1", true)]
#[case::unknown_check("exit = 14", "exit = 14, exitt = 1", true)]
#[case::bad_schema_name("exit = 14", "exit = 14, schema = \"yaml\"", true)]
#[case::bad_rule("exit = 14", "exit = 14, manifest_rules = [\"be-nice\"]", true)]
#[case::bad_step_name("name = \"call\"", "name = \"Call Me\"", true)]
#[case::missing_criterion("criterion = \"c\"\n", "", true)]
#[case::unknown_variable("budget = \"{budget}\"", "budget = \"{budgte}\"", false)]
#[case::bad_duration("budget = \"{budget}\"", "budget = \"soon\"", false)]
#[case::role_not_listed("roles = [\"detach\"]", "roles = [\"resume_reader\"]", false)]
#[case::forward_reference("exit = 14", "exit = 14, same_response_as = \"later\"", false)]
#[case::bad_pointer("exit = 14", "exit = 14, same = [\"data\"]", true)]
#[case::bad_regex("exit = 14", "exit = 14, json = [{ pointer = \"/a\", matches = \"(\" }]", false)]
#[case::empty_pointer_check("exit = 14", "exit = 14, json = [{ pointer = \"/a\" }]", true)]
#[case::comparison_not_a_number(
    "exit = 14",
    "exit = 14, json = [{ pointer = \"/a\", less_than = true }]",
    true
)]
#[case::comparison_not_numeric_text(
    "exit = 14",
    "exit = 14, json = [{ pointer = \"/a\", at_least = \"lots\" }]",
    false
)]
fn a_broken_scenario_is_refused(#[case] from: &str, #[case] to: &str, #[case] schema_too: bool) {
    assert!(GOOD.contains(from));
    let text = GOOD.replacen(from, to, 1);
    let err = parse_scenario("REQ-F-080/x.toml", &text);
    assert!(err.is_err(), "the model accepted:\n{text}");
    if schema_too {
        let json: Result<toml::Value, _> = toml::from_str(&text);
        if let Ok(json) = json {
            let errs = errors(&validator("scenario.json"), &serde_json::to_value(json).unwrap());
            assert!(!errs.is_empty(), "the schema accepted:\n{text}");
        }
    }
}

#[test]
fn a_parse_error_has_line_and_column() {
    let text = GOOD.replacen("level = \"must\"", "level = \"must\"\nlevl = \"x\"", 1);
    let err = parse_scenario("REQ-F-080/x.toml", &text).unwrap_err();
    assert_eq!(err.location.map(|(l, _)| l), Some(6), "{err}");
    assert!(err.to_string().starts_with("REQ-F-080/x.toml:6:"), "{err}");
}

#[rstest]
#[case::id_differs("REQ-F-080/y.toml", "file name")]
#[case::directory_differs("REQ-F-081/x.toml", "directory")]
fn a_misplaced_scenario_is_refused(#[case] path: &str, #[case] says: &str) {
    let err = parse_scenario(path, GOOD).unwrap_err();
    assert!(err.to_string().contains(says), "{err}");
}

#[test]
fn duplicate_ids_are_refused() {
    let other = GOOD.replacen("REQ-F-080", "REQ-F-081", 1);
    let errs =
        Catalogue::from_files([("REQ-F-080/x.toml", GOOD), ("REQ-F-081/x.toml", other.as_str())])
            .unwrap_err();
    assert!(errs.iter().any(|e| e.message.contains("used twice")), "{errs:?}");
}

#[test]
fn duration_expressions_add_up() {
    let vars = |n: &str| match n {
        "budget" => Some(Duration::from_millis(850)),
        _ => None,
    };
    assert_eq!(eval_duration("{budget} + 1500ms", vars), Ok(Duration::from_millis(2350)));
    assert_eq!(eval_duration("2 * {budget} + 1s", vars), Ok(Duration::from_millis(2700)));
    assert_eq!(eval_duration("1m", vars), Ok(Duration::from_secs(60)));
    assert_eq!(eval_duration("250", vars), Ok(Duration::from_millis(250)));
    assert!(eval_duration("{nope}", vars).is_err());
    assert!(eval_duration("-5s", vars).is_err());
}

#[test]
fn templates_replace_variables_and_keep_escaped_braces() {
    let out = walk_template("a {budget} {{x}} {@call/data/job_id}", |v| {
        Some(match v {
            Var::Calibration(n) => format!("<{n}>"),
            Var::StepValue { step, pointer } => format!("<{step}{pointer}>"),
            Var::Builtin(n) => n.clone(),
        })
    });
    assert_eq!(out.as_deref(), Ok("a <budget> {x} <call/data/job_id>"));
    assert_eq!(template_vars("{tool} {work}").len(), 2);
    assert!(walk_template("{oops", |_| Some(String::new())).is_err());
    assert!(walk_template("{nosuch}", |_| Some(String::new())).is_err());
}

/// The TOML examples of the manual (crate docs) parse: the scenario as a scenario of the
/// catalogue's format, the profile as a profile (structure only; its fixtures are examples),
/// the matrix file as a matrix file.
#[test]
fn the_manual_examples_parse() {
    // The crate docs are the files of `harness/docs/`, which lib.rs includes.
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs");
    let mut files: Vec<_> = std::fs::read_dir(docs).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let manual: String = files.iter().map(|f| std::fs::read_to_string(f).unwrap()).collect();
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in manual.lines() {
        match (&mut current, line) {
            (None, "```toml") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), text) => {
                block.push_str(text);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    assert_eq!(blocks.len(), 3, "expected a profile, a scenario and a matrix example");
    let mut seen = 0;
    for block in &blocks {
        let first = block.lines().next().unwrap();
        if let Some(path) = first.strip_prefix("# scenario ") {
            parse_scenario(path, block).unwrap();
            assert!(errors(&validator("scenario.json"), &toml_to_json(block)).is_empty());
            seen += 1;
        } else if first == "# conform.toml" {
            let _: conform::profile::ProfileFile = toml::from_str(block).unwrap();
            assert!(errors(&validator("profile.json"), &toml_to_json(block)).is_empty());
            seen += 1;
        } else if first == "# matrix.toml" {
            let matrix: conform::matrix::MatrixFile = toml::from_str(block).unwrap();
            assert_eq!(matrix.tools.len(), 3);
            seen += 1;
        }
    }
    assert_eq!(seen, 3);
}

/// `scenarios/README.md` maps the criteria to scenarios: every scenario appears in it, so a new
/// one cannot be left out of the map.
#[test]
fn the_criterion_map_names_every_scenario() {
    let map = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/README.md"),
    )
    .unwrap();
    let catalogue = Catalogue::embedded().unwrap();
    let missing: Vec<&str> = catalogue
        .scenarios
        .iter()
        .map(|s| s.id.as_str())
        .filter(|id| !map.contains(&format!("`{id}`")))
        .collect();
    assert!(missing.is_empty(), "scenarios/README.md does not name {missing:?}");
}

const ORDERED: &str = r#"
id = "x"
requirement = "REQ-F-079"
criterion = "c"
level = "must"

[[steps]]
action = "run"
name = "first"
order = "value-after-local"
expect = { exit = 0 }

[[steps]]
action = "run"
name = "second"
order = "value-before-path"
expect = { exit = 0, same_data_as = "first", same_stdout_as = "first" }

[[steps]]
action = "run"
name = "streamed"
probe = "stream"
expect = { stream = true, stdout_differs_from = "first", data_differs_from = "second" }
"#;

#[test]
fn order_stream_and_output_comparisons_pass_model_and_schema() {
    let s = parse_scenario("REQ-F-079/x.toml", ORDERED).unwrap();
    assert_eq!(s.placements().len(), 2);
    assert!(errors(&validator("scenario.json"), &toml_to_json(ORDERED)).is_empty());
    // Every placement's word is accepted by both.
    for p in conform::scenario::Placement::ALL {
        let text = ORDERED.replacen("value-after-local", p.as_str(), 1);
        parse_scenario("REQ-F-079/x.toml", &text).unwrap();
        assert!(errors(&validator("scenario.json"), &toml_to_json(&text)).is_empty(), "{p:?}");
    }
}

#[rstest]
#[case::order_with_role(
    "order = \"value-after-local\"",
    "order = \"value-after-local\"\nrole = \"detach\"",
    Some(9),
    true
)]
#[case::order_with_probe(
    "order = \"value-before-path\"",
    "order = \"value-before-path\"\nprobe = \"read\"",
    Some(15),
    true
)]
#[case::unknown_placement("\"value-before-path\"", "\"value-anywhere\"", Some(16), true)]
#[case::forward_same_stdout(
    "same_stdout_as = \"first\"",
    "same_stdout_as = \"streamed\"",
    Some(15),
    false
)]
#[case::unknown_same_data("same_data_as = \"first\"", "same_data_as = \"nobody\"", Some(15), false)]
#[case::self_differs(
    "stdout_differs_from = \"first\"",
    "stdout_differs_from = \"streamed\"",
    Some(21),
    false
)]
#[case::stream_on_order_step(
    "expect = { exit = 0 }",
    "expect = { exit = 0, stream = true }",
    Some(9),
    false
)]
#[case::unknown_probe("probe = \"stream\"", "probe = \"streams\"", Some(22), true)]
fn a_broken_order_or_stream_step_is_refused_with_its_place(
    #[case] from: &str,
    #[case] to: &str,
    #[case] line: Option<usize>,
    #[case] schema_too: bool,
) {
    assert!(ORDERED.contains(from), "{from}");
    let text = ORDERED.replacen(from, to, 1);
    let err = parse_scenario("REQ-F-079/x.toml", &text).unwrap_err();
    assert_eq!(err.location.map(|(l, _)| l), line, "{err}");
    if schema_too {
        let errs = errors(&validator("scenario.json"), &toml_to_json(&text));
        assert!(!errs.is_empty(), "the schema accepted:\n{text}");
    }
}
