//! Baseline semantics: expected failures, unexpected failures, stale entries, unknown ids, and
//! errors that point at the line and column.

use std::path::Path;

use conform::baseline::{Baseline, BaselineErrorKind, Syntax};
use conform::exit;
use conform::outcome::{BaselineMark, ScenarioResult, Status};
use conform::scenario::Obligation;
use conform::summary::{RunFacts, RunSummary};

use super::report::{result, sample_results};

const TOML: &str = r#"
# known failures of mytool
[[expected_failures]]
scenario = "budget-flag-beats-env"
reason = "the env variable still wins; issue 42"

[[expected_failures]]
scenario = "cancel-scoped"
reason = "was flaky"
"#;

fn parse(text: &str, syntax: Syntax) -> Result<Baseline, conform::baseline::BaselineError> {
    Baseline::parse(text, syntax, Path::new("conform-baseline.toml"))
}

fn summarize(
    baseline: &Baseline,
    mut results: Vec<ScenarioResult>,
) -> (Vec<ScenarioResult>, RunSummary) {
    for r in &mut results {
        baseline.apply(r);
    }
    let summary = RunSummary::compute(
        &results,
        &RunFacts { baseline_in_use: true, duration_ms: 0, ..RunFacts::default() },
    );
    (results, summary)
}

#[test]
fn expected_failure_does_not_count_but_a_stale_entry_fails_the_run() {
    let baseline = parse(TOML, Syntax::Toml).unwrap();
    let (results, summary) = summarize(&baseline, sample_results());
    let mark = |id: &str| results.iter().find(|r| r.id == id).unwrap().baseline.clone();
    assert_eq!(
        mark("budget-flag-beats-env"),
        Some(BaselineMark::ExpectedFailure {
            reason: "the env variable still wins; issue 42".into()
        })
    );
    // cancel-scoped passes now: its entry is stale.
    assert_eq!(mark("cancel-scoped"), Some(BaselineMark::Stale { reason: "was flaky".into() }));
    // A failure the baseline does not list.
    assert_eq!(mark("progress-monotonic"), Some(BaselineMark::Unexpected));
    // Skips and harness errors are left alone; so are passes without an entry.
    assert_eq!(mark("pty-no-budget"), None);
    assert_eq!(mark("pipes-released"), None);
    assert_eq!(mark("manifest-valid"), None);

    assert_eq!(summary.counts.expected_fail, 1);
    assert_eq!(summary.baseline.expected_failures, vec!["budget-flag-beats-env"]);
    assert_eq!(summary.baseline.stale, vec!["cancel-scoped"]);
    assert_eq!(summary.baseline.unexpected_failures, vec!["progress-monotonic"]);
    // The only `must` failure was expected, so conformance holds; the harness error wins.
    assert_eq!(summary.levels[0].counts.fail, 0);
    assert_eq!(summary.exit_code, exit::GENERAL_ERROR);
}

#[test]
fn exit_code_per_baseline_outcome() {
    let baseline = parse(TOML, Syntax::Toml).unwrap();
    let failing = |id: &str, level| result(id, "REQ-F-080", level, Status::Fail);

    // Only expected failures: success.
    let (_, s) = summarize(
        &baseline,
        vec![
            failing("budget-flag-beats-env", Obligation::Must),
            failing("cancel-scoped", Obligation::May),
        ],
    );
    assert_eq!(s.exit_code, exit::SUCCESS, "{s:?}");
    assert!(s.conformant);

    // A stale entry: baseline mismatch.
    let (_, s) = summarize(
        &baseline,
        vec![
            failing("budget-flag-beats-env", Obligation::Must),
            result("cancel-scoped", "REQ-F-081", Obligation::May, Status::Pass),
        ],
    );
    assert_eq!(s.exit_code, exit::BASELINE_MISMATCH);

    // An unexpected `should` failure: baseline mismatch (no conformance problem).
    let (_, s) = summarize(
        &baseline,
        vec![
            failing("budget-flag-beats-env", Obligation::Must),
            failing("cancel-scoped", Obligation::May),
            failing("new-should", Obligation::Should),
        ],
    );
    assert_eq!(s.exit_code, exit::BASELINE_MISMATCH);
    assert!(s.conformant);

    // An unexpected `must` failure: not conformant.
    let (_, s) = summarize(
        &baseline,
        vec![
            failing("budget-flag-beats-env", Obligation::Must),
            failing("cancel-scoped", Obligation::May),
            failing("new-must", Obligation::Must),
        ],
    );
    assert_eq!(s.exit_code, exit::NOT_CONFORMANT);
}

#[test]
fn json_syntax_is_accepted() {
    let text = r#"{"expected_failures": [{"scenario": "a", "reason": "b"}]}"#;
    let baseline = parse(text, Syntax::Json).unwrap();
    assert_eq!(baseline.entries().len(), 1);
    assert_eq!(Syntax::of(Path::new("x.JSON")), Syntax::Json);
    assert_eq!(Syntax::of(Path::new("x.toml")), Syntax::Toml);
}

#[test]
fn unknown_scenario_is_an_argument_error() {
    let baseline = parse(TOML, Syntax::Toml).unwrap();
    let known = ["budget-flag-beats-env", "manifest-valid"];
    let err = baseline.check_known(known, Path::new("b.toml")).unwrap_err();
    assert!(
        matches!(&err.kind, BaselineErrorKind::UnknownScenarios(ids) if ids == &["cancel-scoped"])
    );
    assert!(err.to_string().contains("unknown scenario(s): cancel-scoped"), "{err}");
    baseline.check_known(["budget-flag-beats-env", "cancel-scoped"], Path::new("b.toml")).unwrap();
}

#[test]
fn errors_point_at_line_and_column() {
    // A missing reason.
    let text = "[[expected_failures]]\nscenario = \"a\"\n";
    let err = parse(text, Syntax::Toml).unwrap_err();
    let BaselineErrorKind::Parse { position: Some(p), message } = &err.kind else {
        panic!("{err:?}");
    };
    assert_eq!(p.line, 1, "{err}");
    assert!(message.contains("reason"), "{message}");

    // An unknown key, on line 3.
    let text = "[[expected_failures]]\nscenario = \"a\"\nreasn = \"typo\"\n";
    let err = parse(text, Syntax::Toml).unwrap_err();
    let BaselineErrorKind::Parse { position: Some(p), .. } = &err.kind else {
        panic!("{err:?}");
    };
    assert_eq!((p.line, p.column), (3, 1), "{err}");
    assert!(err.to_string().contains("line 3, column 1"), "{err}");

    // JSON syntax error.
    let err = parse("{\n  \"expected_failures\": [,]\n}", Syntax::Json).unwrap_err();
    let BaselineErrorKind::Parse { position: Some(p), .. } = &err.kind else {
        panic!("{err:?}");
    };
    assert_eq!(p.line, 2);

    // Empty reason, duplicate entry.
    let err = parse("[[expected_failures]]\nscenario = \"a\"\nreason = \" \"\n", Syntax::Toml)
        .unwrap_err();
    assert!(err.to_string().contains("empty reason"), "{err}");
    let err = parse(
        "[[expected_failures]]\nscenario = \"a\"\nreason = \"x\"\n[[expected_failures]]\nscenario = \"a\"\nreason = \"y\"\n",
        Syntax::Toml,
    )
    .unwrap_err();
    assert!(err.to_string().contains("listed twice"), "{err}");
}

#[test]
fn load_reads_files_and_reports_missing_ones() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("baseline.toml");
    std::fs::write(&path, TOML).unwrap();
    assert_eq!(Baseline::load(&path).unwrap().entries().len(), 2);
    let err = Baseline::load(&dir.path().join("nope.toml")).unwrap_err();
    assert!(matches!(err.kind, BaselineErrorKind::Read(_)));
    assert!(err.to_string().starts_with("failed to read the baseline"), "{err}");
}

/// `schemas/baseline.json` and the parser agree on what a baseline file may hold.
#[test]
fn the_schema_and_the_parser_agree() {
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas/baseline.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let cases = [
        (TOML, true),
        ("", true),
        ("expected_failures = []\n", true),
        ("[[expected_failures]]\nscenario = \"a\"\n", false),
        ("[[expected_failures]]\nscenario = \"a\"\nreason = \" \"\n", false),
        ("[[expected_failures]]\nscenario = \"a\"\nreason = \"r\"\nwhy = \"x\"\n", false),
        ("[[expected_failures]]\nscenario = \"\"\nreason = \"r\"\n", false),
        ("expected = []\n", false),
    ];
    for (text, valid) in cases {
        let as_json: serde_json::Value = toml::from_str(text).unwrap();
        assert_eq!(validator.is_valid(&as_json), valid, "schema on {text:?}");
        let parsed = parse(text, Syntax::Toml);
        assert_eq!(parsed.is_ok(), valid, "parser on {text:?}: {parsed:?}");
    }
}

/// `conform run --baseline` end to end against the fixture tool.
mod end_to_end {
    use std::path::{Path, PathBuf};

    use conform::exit;
    use serde_json::Value;

    fn faketool() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tools/faketool")
    }

    /// Runs `conform run faketool --only REQ-F-004 --format json` with an optional fault and a
    /// baseline; returns the exit code and the envelope.
    fn run(fault: Option<&str>, baseline: &str, name: &str) -> (i32, Value) {
        let dir = tempfile::tempdir().unwrap();
        let profile = dir.path().join("conform.toml");
        let env = fault.map_or_else(String::new, |f| {
            format!("[tool]\nenv = {{ FAKETOOL_FAULT = \"{f}\" }}\n")
        });
        std::fs::write(&profile, env).unwrap();
        let baseline_path = dir.path().join(name);
        std::fs::write(&baseline_path, baseline).unwrap();
        let out = assert_cmd::Command::cargo_bin("conform")
            .unwrap()
            .current_dir(dir.path())
            .arg("run")
            .arg(faketool())
            .arg("--profile")
            .arg(&profile)
            // The probes no profile names leave musts unjudged: accepted, the baseline is
            // what these runs are about.
            .args(["--only", "REQ-F-004", "--allow-unjudged", "--format", "json", "--baseline"])
            .arg(&baseline_path)
            .timeout(std::time::Duration::from_secs(120))
            .output()
            .unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let envelope = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
        (out.status.code().unwrap(), envelope)
    }

    const EXPECTS_ARG_ERROR_FAULT: &str = "[[expected_failures]]\nscenario = \"unknown-flag-is-arg-error\"\nreason = \"exit 1 until the parser rewrite\"\n";

    fn scenario<'a>(envelope: &'a Value, id: &str) -> &'a Value {
        envelope["data"]["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == id)
            .unwrap_or_else(|| panic!("no {id} in {envelope:#}"))
    }

    #[test]
    fn an_expected_failure_passes_the_run() {
        let (code, envelope) =
            run(Some("unknown-flag-exit-1"), EXPECTS_ARG_ERROR_FAULT, "baseline.toml");
        assert_eq!(code, i32::from(exit::SUCCESS), "{envelope:#}");
        let s = scenario(&envelope, "unknown-flag-is-arg-error");
        assert_eq!(s["status"], "fail");
        assert_eq!(s["baseline"]["kind"], "expected_failure");
        assert_eq!(envelope["data"]["counts"]["expected_fail"], 1);
        assert_eq!(envelope["ok"], true);
        use crate::report::{errors, validator};
        assert_eq!(errors(&validator("response-envelope.json"), &envelope), Vec::<String>::new());
        assert_eq!(
            errors(&validator("conform-report-data.json"), &envelope["data"]),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_stale_entry_fails_the_run() {
        let (code, envelope) = run(None, EXPECTS_ARG_ERROR_FAULT, "baseline.toml");
        assert_eq!(code, i32::from(exit::BASELINE_MISMATCH), "{envelope:#}");
        assert_eq!(envelope["error"]["code"], "BASELINE_MISMATCH");
        assert_eq!(
            envelope["data"]["baseline"]["stale"],
            serde_json::json!(["unknown-flag-is-arg-error"])
        );
    }

    #[test]
    fn an_unknown_scenario_or_a_malformed_file_is_an_argument_error() {
        let (code, envelope) = run(
            None,
            "{\"expected_failures\": [{\"scenario\": \"no-such-scenario\", \"reason\": \"x\"}]}",
            "baseline.json",
        );
        assert_eq!(code, i32::from(exit::ARG_ERROR), "{envelope:#}");
        let message = envelope["error"]["message"].as_str().unwrap();
        assert!(message.contains("no-such-scenario"), "{message}");

        let (code, envelope) = run(None, "[[expected_failures]]\nscenario = 3\n", "b.toml");
        assert_eq!(code, i32::from(exit::ARG_ERROR), "{envelope:#}");
        let message = envelope["error"]["message"].as_str().unwrap();
        assert!(message.contains("line 2"), "{message}");
    }
}
