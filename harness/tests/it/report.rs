//! The reporters on a synthetic run: human and Markdown text (insta snapshots), JUnit XML
//! (parsed back and counted), the JSON envelope (validated against the envelope schema and
//! conform's report schema), the event stream, exit codes and repro lines.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use conform::event::{Event, EventStream, FanOut, ReportError, Reporter, RunInfo};
use conform::exit;
use conform::outcome::FindingKind;
use conform::outcome::{
    ActionKind, ActionRecord, BaselineMark, Ended, Excerpt, Finding, Note, Repro, ReproCommand,
    ReproStdin, ScenarioResult, SentSignal, SignalTarget, SkipReason, Status, StepRecord,
};
use conform::report::{self, RunReport, Sink, html, human, json, junit, markdown, progress};
use conform::scenario::Obligation;
use conform::summary::{RunFacts, RunSummary, Verdict};
use serde_json::{Value, json};

/// A writer the test can read back.
#[derive(Clone, Default)]
pub struct SharedBuf(pub Arc<Mutex<Vec<u8>>>);

impl Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl SharedBuf {
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
    pub fn sink(&self) -> Sink {
        Sink::writer("buffer", Box::new(self.clone()))
    }
}

pub fn step(name: &str, argv: &[&str], code: i32, envelope: Option<Value>) -> StepRecord {
    StepRecord {
        name: name.to_owned(),
        repro: Repro {
            env: BTreeMap::from([("AGENT_CALL_BUDGET_MS".to_owned(), "60000".to_owned())]),
            command: ReproCommand::Argv(argv.iter().map(|s| (*s).to_owned()).collect()),
            stdin: ReproStdin::Closed,
            cwd: Some("/tmp/conform-sbx".to_owned()),
        },
        ended: Ended::Exited { code },
        elapsed_ms: 2013,
        pipes_closed_after_ms: Some(2014),
        stdout: Excerpt {
            text: envelope.as_ref().map(ToString::to_string).unwrap_or_default(),
            total_bytes: 120,
            truncated: false,
        },
        stderr: Excerpt {
            text: "analyzing big file.csv\nrow 1000 of 4000\n".to_owned(),
            total_bytes: 40,
            truncated: false,
        },
        envelope,
        started_ms: Some(5),
        budget_ms: None,
        may_hold_ms: None,
        signal: None,
    }
}

pub fn result(id: &str, requirement: &str, level: Obligation, status: Status) -> ScenarioResult {
    ScenarioResult {
        id: id.to_owned(),
        requirement: requirement.to_owned(),
        criterion: format!("criterion of {id}"),
        level,
        tags: vec!["quick".to_owned()],
        status,
        findings: Vec::new(),
        notes: Vec::new(),
        steps: Vec::new(),
        actions: Vec::new(),
        duration_ms: 120,
        baseline: None,
        first_run: None,
    }
}

fn ok_envelope() -> Value {
    json!({"ok": true, "data": {"rows": 4000}, "error": null, "warnings": [],
           "meta": {"exit_code": 0, "duration_ms": 15}})
}

/// The note a scenario of role `detach` carries about its calibration.
fn calibrated_detach() -> Note {
    Note::Calibrated { role: "detach".into(), took_ms: 2000, exit_code: 0, budget_ms: 500 }
}

/// Six scenarios over four requirements: pass, fail (two findings, one with a multi-line
/// diff), skip, harness error, a `should` failure, a `may` pass.
pub fn sample_results() -> Vec<ScenarioResult> {
    let mut manifest = result("manifest-valid", "REQ-C-033", Obligation::Must, Status::Pass);
    manifest.notes = vec![calibrated_detach()];
    manifest.steps = vec![step("manifest", &["./mytool", "manifest"], 0, Some(ok_envelope()))];

    let mut budget = result("budget-flag-beats-env", "REQ-F-080", Obligation::Must, Status::Fail);
    budget.duration_ms = 2030;
    budget.steps = vec![step(
        "run",
        &["./mytool", "analyze", "big file.csv", "--budget", "2s"],
        0,
        Some(ok_envelope()),
    )];
    // What the timeline draws: the call's budget and bound, a signal sent into it, a pause.
    budget.steps[0].budget_ms = Some(2000);
    budget.steps[0].may_hold_ms = Some(3620);
    budget.steps[0].signal = Some(SentSignal {
        signal: "SIGTERM".into(),
        after_ms: 1500,
        to: SignalTarget::Group,
        again_ms: None,
    });
    budget.actions = vec![ActionRecord {
        step: "pause".into(),
        action: ActionKind::Sleep,
        started_ms: 2020,
        elapsed_ms: 5,
        detail: "waited 5 ms".into(),
    }];
    budget.findings = vec![
        Finding::new(FindingKind::ExitCode, "the budget ran out but the tool did not hand off")
            .expected("14 (INCOMPLETE)")
            .actual("0")
            .at_step("run"),
        Finding::new(FindingKind::JsonPointer, "/meta differs from what a 2 s budget requires")
            .expected("{\n  \"budget_ms\": 2000,\n  \"exit_code\": 14\n}")
            .actual("{\n  \"budget_ms\": 60000,\n  \"exit_code\": 0\n}")
            .at_step("run"),
    ];

    let pty = result(
        "pty-no-budget",
        "REQ-F-080",
        Obligation::Should,
        Status::Skip {
            reason: SkipReason::MissingRoles {
                roles: vec!["detach".into()],
                profile: true,
                candidates: Vec::new(),
            },
        },
    );

    let mut pipes = result(
        "pipes-released",
        "REQ-F-081",
        Obligation::Must,
        Status::Error { message: "failed to spawn ./mytool: No such file or directory".to_owned() },
    );
    pipes.duration_ms = 3;

    let cancel = result("cancel-scoped", "REQ-F-081", Obligation::May, Status::Pass);

    let mut progress = result("progress-monotonic", "REQ-F-082", Obligation::Should, Status::Fail);
    progress.findings = vec![
        Finding::new(FindingKind::ProgressMonotonic, "progress.done went backwards")
            .expected("done >= 40")
            .actual("done = 12")
            .at_step("continue-2"),
    ];
    progress.notes = vec![
        Note::Advisory("`error.retryable` of `job wait` taken from its own entry".to_owned()),
        calibrated_detach(),
        Note::SnapshotWritten { path: "snaps/progress-monotonic/call.json".to_owned() },
    ];
    progress.steps = vec![step("continue-2", &["sh", "-c", "./mytool job wait j-1"], 14, None)];

    vec![manifest, budget, pty, pipes, cancel, progress]
}

pub fn info() -> RunInfo {
    RunInfo {
        tool: "./mytool".to_owned(),
        spec_version: report::SPEC_VERSION.to_owned(),
        scenario_count: 6,
        jobs: 2,
        paced_from: None,
    }
}

pub fn sample_report(results: Vec<ScenarioResult>) -> RunReport {
    let summary = RunSummary::compute(
        &results,
        &RunFacts { baseline_in_use: false, duration_ms: 4321, ..RunFacts::default() },
    );
    RunReport::new(info(), results, summary)
}

fn schemas_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas")
}

pub fn validator(file: &str) -> jsonschema::Validator {
    let text = std::fs::read_to_string(schemas_dir().join(file)).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

pub fn errors(v: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    v.iter_errors(instance).map(|e| format!("{}: {e}", e.instance_path())).collect()
}

#[test]
fn summary_counts_and_verdicts() {
    let report = sample_report(sample_results());
    let s = &report.summary;
    assert_eq!(
        (s.counts.total, s.counts.pass, s.counts.fail, s.counts.skip, s.counts.error),
        (6, 2, 2, 1, 1)
    );
    let verdicts: Vec<(&str, Verdict)> =
        s.requirements.iter().map(|r| (r.requirement.as_str(), r.verdict)).collect();
    assert_eq!(
        verdicts,
        vec![
            ("REQ-C-033", Verdict::Pass),
            ("REQ-F-080", Verdict::Fail),
            ("REQ-F-081", Verdict::Partial),
            ("REQ-F-082", Verdict::Partial),
        ]
    );
    assert!(!s.conformant);
    assert_eq!(s.exit_code, exit::NOT_CONFORMANT);
    assert_eq!(s.coverage.run, 5);
    assert_eq!(s.coverage.skip_reasons[0].scenarios, vec!["pty-no-budget"]);
}

#[test]
fn exit_codes_follow_the_documented_order() {
    let code = |results: &[ScenarioResult], baseline: bool| {
        RunSummary::compute(
            results,
            &RunFacts { baseline_in_use: baseline, duration_ms: 0, ..RunFacts::default() },
        )
        .exit_code
    };
    let pass = result("a", "R", Obligation::Must, Status::Pass);
    let must_fail = result("b", "R", Obligation::Must, Status::Fail);
    let should_fail = result("c", "R", Obligation::Should, Status::Fail);
    let error = result("d", "R", Obligation::Should, Status::Error { message: "x".into() });
    let mut stale = pass.clone();
    stale.baseline = Some(BaselineMark::Stale { reason: "r".into() });
    let mut expected = must_fail.clone();
    expected.baseline = Some(BaselineMark::ExpectedFailure { reason: "r".into() });

    assert_eq!(code(std::slice::from_ref(&pass), false), exit::SUCCESS);
    assert_eq!(code(&[pass.clone(), should_fail.clone()], false), exit::SUCCESS);
    assert_eq!(code(&[must_fail.clone(), error.clone()], false), exit::NOT_CONFORMANT);
    assert_eq!(code(&[pass.clone(), error], false), exit::GENERAL_ERROR);
    assert_eq!(code(&[stale, must_fail], true), exit::NOT_CONFORMANT);
    assert_eq!(code(&[expected.clone()], true), exit::SUCCESS);
    let mut stale_only = pass;
    stale_only.baseline = Some(BaselineMark::Stale { reason: "r".into() });
    assert_eq!(code(&[stale_only, expected], true), exit::BASELINE_MISMATCH);
    assert_eq!(exit::name(exit::NOT_CONFORMANT), "NOT_CONFORMANT");
}

#[test]
fn human_report() {
    let text = human::render(&sample_report(sample_results()), false);
    assert!(!text.contains('\x1b'), "no colour when asked for none");
    // The exact repro, with the argument holding a space quoted.
    assert!(text.contains(
        "cd /tmp/conform-sbx && AGENT_CALL_BUDGET_MS=60000 ./mytool analyze 'big file.csv' --budget 2s < /dev/null"
    ));
    // The multi-line finding is drawn as a diff.
    assert!(text.contains("-  \"budget_ms\": 2000,"));
    assert!(text.contains("+  \"budget_ms\": 60000,"));
    insta::assert_snapshot!("human", text);
}

#[test]
fn human_report_colours_only_on_request() {
    let text = human::render(&sample_report(sample_results()), true);
    assert!(text.contains("\x1b[1;31mFAIL"));
    assert!(text.contains("\x1b[32mpass"));
}

#[test]
fn markdown_summary() {
    let text = markdown::render(&sample_report(sample_results()));
    assert!(text.contains("| REQ-F-080 | fail | 0 | 1 | 0 | 1 | 0 |"));
    insta::assert_snapshot!("markdown", text);
}

#[test]
fn markdown_lists_expected_failures_with_their_reasons() {
    let mut results = sample_results();
    results[1].baseline =
        Some(BaselineMark::ExpectedFailure { reason: "issue 42 | parser".into() });
    let text = markdown::render(&sample_report(results));
    assert!(text.contains("### Expected failures (baseline)"), "{text}");
    assert!(text.contains("| `budget-flag-beats-env` | must | issue 42 \\| parser |"), "{text}");
    let plain = markdown::render(&sample_report(sample_results()));
    assert!(!plain.contains("Expected failures"));
}

#[test]
fn markdown_cells_escape_pipes() {
    let mut results = sample_results();
    results[1].findings[0].message = "a | b\nc".to_owned();
    results[1].steps[0].repro.command = ReproCommand::Shell("t | grep `x`".to_owned());
    let text = markdown::render(&sample_report(results));
    // One line per finding: the message's first line, its pipe escaped.
    assert!(text.contains("[exit-code] a \\| b | "), "{text}");
    assert!(!text.contains("a \\| b c"), "{text}");
    // The repro is a code span whose fence outlasts the backticks in it.
    assert!(
        text.contains("| `` AGENT_CALL_BUDGET_MS=60000 sh -c 't \\| grep `x`' < /dev/null `` |"),
        "{text}"
    );
}

/// A claim's row shows its first three reasons and counts the rest; the failures table gives
/// each finding with the repro of the step it names, env that differs included, no `cd`.
#[test]
fn markdown_claims_stay_short_and_failures_carry_their_repro() {
    let mut report = sample_report(sample_results());
    let claim = &mut report.summary.claims[2];
    claim.reasons = (1..=5).map(|n| format!("reason {n}")).collect();
    let text = markdown::render(&report);
    assert!(
        text.contains(
            "| Level 3 (Full spec) | fail | 1 | 1 | 1 | reason 1; reason 2; reason 3; and 2 more |"
        ),
        "{text}"
    );
    assert!(!text.contains("reason 4"), "{text}");
    let rows: Vec<&str> =
        text.lines().filter(|l| l.starts_with("| `budget-flag-beats-env`")).collect();
    assert_eq!(rows.len(), 2, "one row per finding: {text}");
    for row in rows {
        assert!(
            row.ends_with("| `AGENT_CALL_BUDGET_MS=60000 ./mytool analyze 'big file.csv' --budget 2s < /dev/null` |"),
            "{row}"
        );
        assert!(!row.contains("cd /tmp"), "{row}");
    }
}

#[test]
fn junit_parses_back_with_the_right_counts() {
    let mut results = sample_results();
    // An expected failure is a passing test case with a property.
    results.push({
        let mut r = result("stale-cancel", "REQ-F-081", Obligation::Must, Status::Fail);
        r.findings = vec![Finding::new(FindingKind::ExitCode, "x")];
        r.baseline = Some(BaselineMark::ExpectedFailure { reason: "issue 7".into() });
        r
    });
    let xml = junit::render(&sample_report(results)).unwrap();
    let parsed = quick_junit::Report::deserialize_from_str(&xml).unwrap();
    let suites: Vec<&str> = parsed.test_suites.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(suites, vec!["REQ-C-033", "REQ-F-080", "REQ-F-081", "REQ-F-082"]);
    let count = |pred: &dyn Fn(&quick_junit::TestCaseStatus) -> bool| {
        parsed.test_suites.iter().flat_map(|s| &s.test_cases).filter(|c| pred(&c.status)).count()
    };
    use quick_junit::{NonSuccessKind as K, TestCaseStatus as S};
    assert_eq!(count(&|_| true), 7);
    assert_eq!(count(&|s| matches!(s, S::Success { .. })), 3);
    assert_eq!(count(&|s| matches!(s, S::NonSuccess { kind: K::Failure, .. })), 2);
    assert_eq!(count(&|s| matches!(s, S::NonSuccess { kind: K::Error, .. })), 1);
    assert_eq!(count(&|s| matches!(s, S::Skipped { .. })), 1);
    // The failure carries every finding and the repro.
    let budget = parsed.test_suites[1]
        .test_cases
        .iter()
        .find(|c| c.name.as_str() == "budget-flag-beats-env")
        .unwrap();
    let S::NonSuccess { message, description, .. } = &budget.status else {
        panic!("not a failure");
    };
    assert_eq!(
        message.as_ref().unwrap().as_str(),
        "the budget ran out but the tool did not hand off"
    );
    let description = description.as_ref().unwrap().as_str();
    assert!(description.contains("[json-pointer]"));
    assert!(description.contains("./mytool analyze 'big file.csv' --budget 2s < /dev/null"));
    let skipped = parsed.test_suites[1]
        .test_cases
        .iter()
        .find(|c| c.name.as_str() == "pty-no-budget")
        .unwrap();
    assert!(matches!(&skipped.status, S::Skipped { message: Some(m), .. }
        if m.as_str() == "profile names no `detach` role"));
}

#[test]
fn json_envelope_validates_against_both_schemas() {
    let envelope_schema = validator("response-envelope.json");
    let report_schema = validator("conform-report-data.json");

    let failing = json::envelope(&sample_report(sample_results()), json::Evidence::Failures);
    assert_eq!(errors(&envelope_schema, &failing), Vec::<String>::new());
    assert_eq!(errors(&report_schema, &failing["data"]), Vec::<String>::new());
    assert_eq!(failing["ok"], false);
    assert_eq!(failing["meta"]["exit_code"], exit::NOT_CONFORMANT);
    assert_eq!(failing["error"]["code"], "NOT_CONFORMANT");
    assert_eq!(failing["error"]["context"]["failed"], json!(["budget-flag-beats-env"]));
    assert_eq!(failing["warnings"][0]["code"], "ROLE_MISSING");
    assert_eq!(failing["data"]["spec_version"], "3.20");
    let scenario = &failing["data"]["scenarios"][1];
    assert_eq!(scenario["id"], "budget-flag-beats-env");
    assert_eq!(scenario["status"], "fail");
    assert_eq!(scenario["evidence"][0]["repro"]["command"]["kind"], "argv");
    assert_eq!(scenario["evidence"][0]["started_ms"], 5);
    assert_eq!(scenario["evidence"][0]["signal"]["to"], "group");
    assert_eq!(scenario["actions"][0]["action"], "sleep");
    assert!(failing["data"]["scenarios"][0].get("actions").is_none(), "none, none said");

    let passing_results: Vec<ScenarioResult> =
        sample_results().into_iter().filter(|r| r.status == Status::Pass).collect();
    let passing = json::envelope(&sample_report(passing_results), json::Evidence::Failures);
    assert_eq!(errors(&envelope_schema, &passing), Vec::<String>::new());
    assert_eq!(errors(&report_schema, &passing["data"]), Vec::<String>::new());
    assert_eq!(passing["ok"], true);
    assert_eq!(passing["error"], Value::Null);
    assert_eq!(passing["meta"]["exit_code"], 0);

    // The schemas can fail: a skip without a reason, a report without scenarios.
    let mut broken = failing["data"].clone();
    broken["scenarios"][2].as_object_mut().unwrap().remove("reason");
    assert!(!errors(&report_schema, &broken).is_empty());
    broken.as_object_mut().unwrap().remove("scenarios");
    assert!(!errors(&report_schema, &broken).is_empty());
    let mut lying = failing.clone();
    lying["ok"] = json!(true);
    assert!(!errors(&envelope_schema, &lying).is_empty());

    let arg_error = json::error_envelope("ARG_ERROR", "no such profile", exit::ARG_ERROR, 1);
    assert_eq!(errors(&envelope_schema, &arg_error), Vec::<String>::new());
}

#[test]
fn stream_feeds_every_reporter_from_many_threads() {
    let json_out = SharedBuf::default();
    let progress_out = SharedBuf::default();
    let stream = EventStream::start(vec![
        Box::new(progress::ProgressReporter::new(progress_out.sink(), false)),
        Box::new(json::JsonReporter::new(json_out.sink(), json::Evidence::Failures)),
    ]);
    let sender = stream.sender();
    sender.send(Event::RunStarted(info()));
    let results = sample_results();
    std::thread::scope(|s| {
        for r in &results {
            let sender = sender.clone();
            s.spawn(move || {
                sender.send(Event::ScenarioStarted { id: r.id.clone() });
                sender.send(Event::ScenarioFinished(Box::new(r.clone())));
            });
        }
    });
    sender.send(Event::RunFinished(RunSummary::compute(
        &results,
        &RunFacts { baseline_in_use: false, duration_ms: 10, ..RunFacts::default() },
    )));
    drop(sender);
    stream.finish().unwrap();

    let envelope: Value = serde_json::from_str(&json_out.text()).unwrap();
    assert_eq!(envelope["data"]["scenarios"].as_array().unwrap().len(), 6);
    let progress = progress_out.text();
    let finished: Vec<&str> = progress.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(finished.len(), 6, "{progress}");
    assert!(finished.iter().any(|l| l.contains("FAIL") || l.contains("fail   must")));
    assert!(progress.lines().last().unwrap().contains("exit 80"));
}

#[test]
fn progress_bar_mode_counts_every_scenario() {
    let mut reporter = progress::ProgressReporter::bar(indicatif::ProgressDrawTarget::hidden());
    let results = sample_results();
    reporter.handle(&Event::RunStarted(info())).unwrap();
    for r in &results {
        reporter.handle(&Event::ScenarioStarted { id: r.id.clone() }).unwrap();
        reporter.handle(&Event::ScenarioFinished(Box::new(r.clone()))).unwrap();
    }
    let summary = RunSummary::compute(
        &results,
        &RunFacts { baseline_in_use: false, duration_ms: 1, ..RunFacts::default() },
    );
    reporter.handle(&Event::RunFinished(summary)).unwrap();
    assert_eq!(reporter.finished(), results.len());
}

#[test]
fn a_passing_run_with_skips_says_what_was_not_judged() {
    let results: Vec<ScenarioResult> = sample_results()
        .into_iter()
        .filter(|r| matches!(r.status, Status::Pass | Status::Skip { .. }))
        .collect();
    let report = sample_report(results);
    assert_eq!(report.summary.exit_code, exit::SUCCESS);
    let text = human::render(&report, false);
    assert!(
        text.contains(
            "verdict: CONFORMANT in what ran (1 of 3 scenarios not judged) (exit 0 SUCCESS)"
        ),
        "{text}"
    );
    let md = markdown::render(&report);
    assert!(
        md.starts_with(
            "## conform: `./mytool` is conformant in what ran (1 of 3 scenarios not judged)"
        ),
        "{md}"
    );
}

struct Broken;
impl Reporter for Broken {
    fn handle(&mut self, _: &Event) -> Result<(), ReportError> {
        Err(ReportError::new("write", std::io::Error::other("disk full")))
    }
}

#[test]
fn a_failing_reporter_does_not_starve_the_others() {
    let out = SharedBuf::default();
    let mut fan =
        FanOut::new(vec![Box::new(Broken), Box::new(markdown::MarkdownReporter::new(out.sink()))]);
    let results = sample_results();
    fan.handle(&Event::RunStarted(info())).unwrap_err();
    let summary = RunSummary::compute(
        &results,
        &RunFacts { baseline_in_use: false, duration_ms: 1, ..RunFacts::default() },
    );
    let err = fan.handle(&Event::RunFinished(summary)).unwrap_err();
    assert!(err.to_string().contains("disk full"));
    assert!(out.text().contains("## conform"));

    let stream = EventStream::start(vec![Box::new(Broken)]);
    stream.sender().send(Event::RunStarted(info()));
    assert!(stream.finish().is_err());
}

#[test]
fn repro_line_runs_the_same_argv_in_a_shell() {
    let dir = tempfile::tempdir().unwrap();
    let repro = Repro {
        env: BTreeMap::from([("GREETING".to_owned(), "it's here".to_owned())]),
        command: ReproCommand::Argv(vec![
            "sh".into(),
            "-c".into(),
            r#"printf '%s|' "$GREETING" "$@"; cat"#.into(),
            "argv0".into(),
            "a b".into(),
            "$HOME".into(),
            "q\"uote".into(),
        ]),
        stdin: ReproStdin::Bytes("fed".into()),
        cwd: Some(dir.path().display().to_string()),
    };
    let line = repro.to_string();
    let out = std::process::Command::new("sh").arg("-c").arg(&line).output().unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "it's here|a b|$HOME|q\"uote|fed", "{line}");
    let closed = Repro {
        stdin: ReproStdin::Closed,
        cwd: None,
        env: BTreeMap::new(),
        command: ReproCommand::Shell("tool job wait 'j 1'".into()),
    };
    assert_eq!(closed.to_string(), r#"sh -c 'tool job wait '\''j 1'\''' < /dev/null"#);
}

#[test]
fn repro_from_an_invocation_keeps_only_what_differs() {
    use conform::exec::{Invocation, Program, StdinMode};
    use std::ffi::OsString;
    let defaults: BTreeMap<OsString, OsString> =
        [("HOME", "/sbx/home"), ("PATH", "/usr/bin"), ("NO_COLOR", "1")]
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
    let mut env = defaults.clone();
    env.insert("AGENT_CALL_BUDGET_MS".into(), "500".into());
    env.insert("PATH".into(), "/opt/bin".into());
    let invocation = Invocation {
        program: Program::Argv(vec!["./t".into(), "run".into()]),
        env,
        cwd: "/sbx".into(),
        stdin: StdinMode::OpenPipe,
        timeout: std::time::Duration::from_secs(1),
        capture_limit: 10,
    };
    let repro = Repro::from_invocation(&invocation, &defaults);
    let names: Vec<&str> = repro.env.keys().map(String::as_str).collect();
    assert_eq!(names, vec!["AGENT_CALL_BUDGET_MS", "NO_COLOR", "PATH"]);
    assert_eq!(
        repro.to_string(),
        "cd /sbx && tail -f /dev/null | AGENT_CALL_BUDGET_MS=500 NO_COLOR=1 PATH=/opt/bin ./t run"
    );
}

#[test]
fn finding_display_draws_a_diff_only_for_multi_line_values() {
    let short = Finding::new(FindingKind::ExitCode, "wrong exit").expected("14").actual("0");
    assert_eq!(short.to_string(), "[exit-code] wrong exit\n  expected: 14\n  actual:   0");
    assert_eq!(short.diff(), None);
    let long = Finding::new(FindingKind::CalibratedEquality, "differs")
        .expected("a\nb\nc")
        .actual("a\nB\nc")
        .at_step("continue-3");
    let text = long.to_string();
    assert!(text.starts_with("[calibrated-equality] differs (step `continue-3`)\n"));
    assert!(text.contains("--- expected\n+++ actual\n"));
    assert!(text.contains("\n-b\n+B\n"), "{text}");
    let block =
        Finding::new(FindingKind::SnapshotMissing, "no snapshot").actual("{\n  \"a\": 1\n}\n");
    assert_eq!(
        block.to_string(),
        "[snapshot-missing] no snapshot\n  actual:\n    {\n      \"a\": 1\n    }"
    );
}

#[test]
fn results_serialize_with_their_status_and_a_skip_as_its_sentence() {
    for r in sample_results() {
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["id"], r.id.as_str());
        assert_eq!(json["status"], r.status.as_str());
        match &r.status {
            Status::Skip { reason } => assert_eq!(json["reason"], reason.to_string().as_str()),
            Status::Error { message } => assert_eq!(json["message"], message.as_str()),
            Status::Pass | Status::Fail => assert!(json.get("reason").is_none()),
        }
        assert_eq!(json["findings"].as_array().unwrap().len(), r.findings.len());
    }
}

/// conform itself, end to end, against the fixture tool with one fault: the JSON envelope on
/// stdout validates against both schemas and the JUnit and Markdown files agree with it.
#[test]
fn conform_run_reports_a_faulty_tool_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let tool = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tools/faketool");
    let profile = dir.path().join("conform.toml");
    std::fs::write(&profile, "[tool]\nenv = { FAKETOOL_FAULT = \"unknown-flag-exit-1\" }\n")
        .unwrap();
    let junit_path = dir.path().join("junit.xml");
    let md_path = dir.path().join("summary.md");
    let out = assert_cmd::Command::cargo_bin("conform")
        .unwrap()
        .current_dir(dir.path())
        .args(["run", tool.to_str().unwrap(), "--profile"])
        .arg(&profile)
        .args(["--format", "json", "--only", "REQ-F-004", "--junit"])
        .arg(&junit_path)
        .arg("--summary-md")
        .arg(&md_path)
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(i32::from(exit::NOT_CONFORMANT)), "{stdout}\n{stderr}");
    assert_eq!(stdout.lines().count(), 1, "one envelope on one line: {stdout}");
    let envelope: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(errors(&validator("response-envelope.json"), &envelope), Vec::<String>::new());
    assert_eq!(
        errors(&validator("conform-report-data.json"), &envelope["data"]),
        Vec::<String>::new()
    );
    assert_eq!(envelope["error"]["code"], "NOT_CONFORMANT");
    assert_eq!(envelope["meta"]["exit_code"], exit::NOT_CONFORMANT);
    let scenarios = envelope["data"]["scenarios"].as_array().unwrap();
    let failed: Vec<&Value> = scenarios.iter().filter(|s| s["status"] == "fail").collect();
    assert!(!failed.is_empty(), "{stdout}");
    for s in &failed {
        assert_eq!(s["requirement"], "REQ-F-004");
        assert!(!s["findings"].as_array().unwrap().is_empty());
        assert!(!s["evidence"].as_array().unwrap().is_empty());
    }
    // Progress went to stderr, one line per scenario.
    assert_eq!(stderr.lines().filter(|l| l.starts_with('[')).count(), scenarios.len(), "{stderr}");

    let xml = std::fs::read_to_string(&junit_path).unwrap();
    let junit = quick_junit::Report::deserialize_from_str(&xml).unwrap();
    let failures = junit
        .test_suites
        .iter()
        .flat_map(|s| &s.test_cases)
        .filter(|c| matches!(c.status, quick_junit::TestCaseStatus::NonSuccess { .. }))
        .count();
    assert_eq!(failures, failed.len());

    let md = std::fs::read_to_string(&md_path).unwrap();
    assert!(md.starts_with("## conform: "), "{md}");
    assert!(md.contains("is NOT conformant"), "{md}");
    assert!(md.contains("| REQ-F-004 | fail |"), "{md}");

    // The claims, alike in every format: Level 1 fails with REQ-F-004 (which `--only` ran),
    // §79 is incomplete since none of its scenarios was selected.
    let claims = envelope["data"]["claims"].as_array().unwrap();
    let words: Vec<(&str, &str)> = claims
        .iter()
        .map(|c| (c["claim"].as_str().unwrap(), c["verdict"].as_str().unwrap()))
        .collect();
    assert_eq!(
        words,
        [
            ("level-1", "fail"),
            ("level-2", "fail"),
            ("level-3", "fail"),
            ("interruption", "incomplete")
        ]
    );
    assert!(claims[3]["reasons"][0].as_str().unwrap().contains("not selected"), "{stdout}");
    assert!(claims[3]["requirements"].as_array().unwrap().is_empty(), "{stdout}");
    for suite in &junit.test_suites {
        let property = |name: &str| {
            suite.properties.iter().find(|p| p.name.as_str() == name).map(|p| p.value.to_string())
        };
        assert_eq!(property("claim.level-1").as_deref(), Some("fail"));
        assert_eq!(property("claim.interruption").as_deref(), Some("incomplete"));
    }
    assert!(md.contains("| Level 1 (Agent-safe basics) | fail | "), "{md}");
    assert!(md.contains(" | `unknown-flag-is-arg-error` failed; "), "{md}");
    // Each finding's row reproduces its step with the tool's own path.
    assert!(md.contains(&format!("| `{}", tool.display())), "{md}");
    assert!(md.contains("| §79 (Work Outlives the Caller's Budget) | incomplete |"), "{md}");
}

/// A manifest as a tool prints it: wrapped in an envelope whose `meta` varies per call.
fn manifest_envelope(duration_ms: u64) -> Value {
    json!({"ok": true, "data": {"schema_version": "3.20", "tool": "mytool-unique-marker",
            "commands": {"analyze": {"description": "d", "danger_level": "safe"}}},
           "error": null, "warnings": [], "meta": {"exit_code": 0, "duration_ms": duration_ms}})
}

/// The manifest is stored once, every record that printed it refers to it, records whose stdout
/// was one JSON document keep it once (as `envelope`), and a reader gets every record back.
#[test]
fn the_json_report_says_the_manifest_once_and_a_reader_can_put_it_back() {
    let mut results = sample_results();
    let bare = manifest_envelope(0)["data"].clone();
    results[0].steps = vec![
        step("manifest", &["./mytool", "manifest"], 0, Some(manifest_envelope(12))),
        step("again", &["./mytool", "manifest"], 0, Some(manifest_envelope(40))),
        step("bare", &["./mytool", "manifest", "--bare"], 0, Some(bare.clone())),
    ];
    results[4].steps =
        vec![step("manifest", &["./mytool", "manifest"], 0, Some(manifest_envelope(7)))];
    let report = sample_report(results.clone());
    let envelope = json::envelope(&report, json::Evidence::All);
    let data = &envelope["data"];
    assert_eq!(errors(&validator("response-envelope.json"), &envelope), Vec::<String>::new());
    assert_eq!(errors(&validator("conform-report-data.json"), data), Vec::<String>::new());
    assert_eq!(data["manifest"], bare);
    assert_eq!(envelope.to_string().matches("mytool-unique-marker").count(), 1, "{envelope:#}");

    let evidence = &data["scenarios"][0]["evidence"];
    for record in evidence.as_array().unwrap() {
        assert_eq!(record["stdout_ref"], json::MANIFEST_REF, "{record:#}");
        assert!(record["stdout"].get("text").is_none(), "{record:#}");
        assert!(record["stdout"]["total_bytes"].is_u64());
    }
    assert_eq!(evidence[0]["envelope"]["meta"]["duration_ms"], 12, "what varies stays");
    assert!(evidence[0]["envelope"].get("data").is_none());
    assert!(evidence[2].get("envelope").is_none(), "a bare manifest is all in data.manifest");
    // A record without JSON on stdout keeps its text; one with JSON keeps it as `envelope`.
    let progress = &data["scenarios"][5]["evidence"][0];
    assert!(progress["stdout"].get("text").is_some() && progress.get("envelope").is_none());
    let budget = &data["scenarios"][1]["evidence"][0];
    assert!(budget["stdout"].get("text").is_none() && budget["envelope"]["ok"] == true);

    // The schema refuses a record that says its document twice or not at all.
    let mut twice = data.clone();
    twice["scenarios"][1]["evidence"][0]["stdout"]["text"] = json!("{}");
    assert!(!errors(&validator("conform-report-data.json"), &twice).is_empty());
    let mut neither = data.clone();
    neither["scenarios"][5]["evidence"][0]["stdout"].as_object_mut().unwrap().remove("text");
    assert!(!errors(&validator("conform-report-data.json"), &neither).is_empty());

    // Put back, every record holds what the step saw.
    let mut restored = data.clone();
    json::restore_manifest(&mut restored);
    let report = sample_report(results);
    for (scenario, result) in restored["scenarios"].as_array().unwrap().iter().zip(&report.results)
    {
        for (record, step) in scenario["evidence"].as_array().unwrap().iter().zip(&result.steps) {
            assert!(record.get("stdout_ref").is_none());
            assert_eq!(record.get("envelope"), step.envelope.as_ref(), "{}", step.name);
        }
    }
}

/// Without a manifest on any stdout, `data.manifest` is null and nothing refers to it.
#[test]
fn a_report_without_a_manifest_has_a_null_one() {
    let mut results = sample_results();
    results[0].steps.clear();
    let data = json::data(&sample_report(results), json::Evidence::All);
    assert_eq!(data["manifest"], Value::Null);
    assert!(!data.to_string().contains("stdout_ref"));
    assert_eq!(errors(&validator("conform-report-data.json"), &data), Vec::<String>::new());
}

/// By default a passing scenario's records keep what was run and how it ended, not the tool's
/// output (as a test runner keeps no output of a passing test); a failed one keeps everything;
/// `--evidence all` keeps every record whole. The schema knows both.
#[test]
fn a_passing_scenario_keeps_its_runs_without_their_output_unless_all_is_asked() {
    let report = sample_report(sample_results());
    let schema = validator("conform-report-data.json");
    let failures = json::data(&report, json::Evidence::Failures);
    assert_eq!(errors(&schema, &failures), Vec::<String>::new());
    assert_eq!(failures["evidence"], "failures");
    let passed = &failures["scenarios"][0];
    assert_eq!((&passed["id"], &passed["status"]), (&json!("manifest-valid"), &json!("pass")));
    let record = &passed["evidence"][0];
    assert_eq!(record["output_omitted"], true, "{record:#}");
    assert!(record.get("envelope").is_none() && record.get("stdout_ref").is_none(), "{record:#}");
    assert!(record["stdout"].get("text").is_none() && record["stderr"].get("text").is_none());
    assert_eq!(record["stdout"]["total_bytes"], 120, "how much it wrote stays");
    assert_eq!(record["repro"]["command"]["value"], json!(["./mytool", "manifest"]));
    assert_eq!(record["ended"]["code"], 0);

    let failed = &failures["scenarios"][1];
    assert_eq!(failed["status"], "fail");
    let record = &failed["evidence"][0];
    assert!(record.get("output_omitted").is_none(), "{record:#}");
    assert_eq!(record["envelope"]["data"]["rows"], 4000);
    assert!(record["stderr"]["text"].as_str().unwrap().contains("row 1000"));

    let all = json::data(&report, json::Evidence::All);
    assert_eq!(errors(&schema, &all), Vec::<String>::new());
    assert_eq!(all["evidence"], "all");
    let record = &all["scenarios"][0]["evidence"][0];
    assert!(record.get("output_omitted").is_none(), "{record:#}");
    assert_eq!(record["envelope"]["data"]["rows"], 4000);
    assert!(record["stderr"]["text"].is_string());

    // The schema refuses a record that says it left the output out and still holds it.
    let mut both = failures.clone();
    both["scenarios"][0]["evidence"][0]["stderr"]["text"] = json!("row 1\n");
    assert!(!errors(&schema, &both).is_empty());
    let mut both = failures;
    both["scenarios"][0]["evidence"][0]["envelope"] = ok_envelope();
    assert!(!errors(&schema, &both).is_empty());
}

/// What a hostile tool may put in every string a report shows: a screen clear, a window title,
/// a colour, a C1 CSI and a right-to-left override.
const HOSTILE: &str = "\u{1b}[2J\u{1b}]0;PWNED\u{7}\u{1b}[31m\u{9b}1m\u{202e}x\r";

/// Every string of the sample results that can come from a tool, replaced by [`HOSTILE`].
fn hostile_results() -> Vec<ScenarioResult> {
    let mut results = sample_results();
    for r in &mut results {
        for f in &mut r.findings {
            f.message = format!("{} {HOSTILE}", f.message);
            f.expected = Some(format!("line one\n{HOSTILE}"));
            f.actual = Some(HOSTILE.to_owned());
        }
        for s in &mut r.steps {
            s.stderr.text = format!("{HOSTILE}\nlast {HOSTILE}\n");
            s.stdout.text = HOSTILE.to_owned();
            s.repro.command = ReproCommand::Shell(format!("./mytool job wait {HOSTILE}"));
            s.repro.env.insert("X".to_owned(), HOSTILE.to_owned());
            s.repro.cwd = Some(format!("/tmp/{HOSTILE}"));
        }
        r.notes.push(Note::Advisory(HOSTILE.to_owned()));
        match &mut r.status {
            Status::Error { message } => *message = HOSTILE.to_owned(),
            Status::Skip { reason } => {
                *reason = SkipReason::PremiseNotMet { step: "call".into(), why: HOSTILE.into() }
            }
            _ => {}
        }
    }
    results[1].baseline = Some(BaselineMark::ExpectedFailure { reason: HOSTILE.to_owned() });
    results
}

/// The escape sequences in `text` that conform's own colours did not write.
fn foreign_escapes(text: &str) -> Vec<String> {
    let own = regex::Regex::new(r"\x1b\[[0-9;]+m").unwrap();
    own.replace_all(text, "")
        .lines()
        .filter(|l| {
            l.chars().any(|c| matches!(c, '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{202e}'))
        })
        .map(|l| format!("{l:?}"))
        .collect()
}

#[test]
fn every_text_report_shows_a_tools_control_characters_as_visible_escapes() {
    let report = sample_report(hostile_results());
    let coloured = human::render(&report, true);
    assert!(coloured.contains("\x1b[1;31mFAIL"), "conform's own colours stay");
    for (what, text) in [
        ("the human report", human::render(&report, false)),
        ("the coloured human report", coloured),
        ("the Markdown summary", markdown::render(&report)),
        ("the JUnit report", junit::render(&report).unwrap()),
    ] {
        assert_eq!(foreign_escapes(&text), Vec::<String>::new(), "{what}:\n{text}");
        assert!(text.contains(r"\e]0;PWNED\x07"), "{what} does not show the sequence:\n{text}");
    }
    let buf = SharedBuf::default();
    let mut reporter = progress::ProgressReporter::new(buf.sink(), true);
    reporter.handle(&Event::RunStarted(info())).unwrap();
    reporter
        .handle(&Event::Calibrated { role: "detach".into(), outcome: Err(HOSTILE.into()) })
        .unwrap();
    reporter
        .handle(&Event::SetupFailed { id: "x".into(), error: format!("{HOSTILE}\n{HOSTILE}") })
        .unwrap();
    for r in report.results {
        reporter.handle(&Event::ScenarioFinished(Box::new(r))).unwrap();
    }
    let lines = buf.text();
    assert_eq!(foreign_escapes(&lines), Vec::<String>::new(), "progress:\n{lines}");
    assert_eq!(lines.lines().count(), 9, "one line per event:\n{lines}");
}

/// A run as a tool without a profile gets it: 87 of 91 scenarios skipped over ten roles and
/// the kit's probes, across 21 requirements, the rest passed.
fn unprofiled_results() -> Vec<ScenarioResult> {
    let roles = ["async", "detach", "detach_only", "failing", "plain_slow", "resume_reader"];
    (0..91)
        .map(|n| {
            let requirement = format!("REQ-F-{:03}", n % 21);
            let id = format!("scenario-{n:02}");
            let status = match n {
                0..=3 => Status::Pass,
                4..=9 => Status::Skip {
                    reason: SkipReason::MissingKit { what: "`read` probes".into(), profile: false },
                },
                _ => Status::Skip {
                    reason: SkipReason::MissingRoles {
                        roles: vec![roles[n % roles.len()].to_owned()],
                        profile: false,
                        candidates: vec!["analyze".to_owned(), "deploy".to_owned()],
                    },
                },
            };
            result(&id, &requirement, Obligation::Must, status)
        })
        .collect()
}

/// Every line a run writes to a terminal that is not one: the progress lines, then the report.
fn terminal_lines(report: &RunReport, verbose: bool) -> (String, String) {
    let buf = SharedBuf::default();
    let mut progress =
        progress::ProgressReporter::new(buf.sink(), false).verbose(verbose).report_follows(true);
    progress.handle(&Event::RunStarted(report.info.clone())).unwrap();
    for r in &report.results {
        progress.handle(&Event::ScenarioFinished(Box::new(r.clone()))).unwrap();
    }
    progress.handle(&Event::RunFinished(report.summary.clone())).unwrap();
    (buf.text(), human::render_with(report, false, verbose))
}

/// Without a profile the reason is said once, at the top, with what to do; the skips are one
/// line per reason, the progress lines one per run of skips; the whole is at most 40 lines.
#[test]
fn a_run_without_a_profile_says_so_once_and_fits_forty_lines() {
    let mut info = info();
    info.scenario_count = 91;
    let results = unprofiled_results();
    let summary = RunSummary::compute(&results, &RunFacts::default());
    let report = RunReport::new(info, results, summary);
    let (progress, text) = terminal_lines(&report, false);
    let lines = progress.lines().count() + text.lines().count();
    assert!(lines <= 40, "{lines} lines:\n{progress}{text}");
    assert!(
        text.contains(
            "no profile: 87 of 91 scenarios need roles or kit probes that only a profile names; `conform init ./mytool` drafts one"
        ),
        "{text}"
    );
    assert!(text.contains("87  no profile (above): the roles and the kit probes a profile names"));
    // No sentence of a skip is repeated: not per scenario, not in the coverage lines.
    assert_eq!(text.matches("no profile").count(), 2, "{text}");
    assert!(!text.contains("scenario-50"), "the brief report names no skipped scenario: {text}");
    assert!(!progress.contains("no profile"), "progress lines give no reasons: {progress}");
    // The skips between two scenarios that ran are one line, counted, the first three named.
    assert!(
        progress.contains(
            "[91/91] skip   75 scenarios: scenario-24, scenario-45, scenario-66 and 72 more"
        ),
        "{progress}"
    );
    assert!(
        progress.contains(
            "[ 5/91] skip   4 scenarios: scenario-21, scenario-42, scenario-63 and 1 more"
        )
    );
    assert!(!progress.contains("finished in"), "the report's verdict line says how it ended");
    assert!(text.contains("verdict: NOT JUDGED"), "{text}");

    // -v lists every scenario, and each skip reason with its scenarios, once.
    let (progress, verbose) = terminal_lines(&report, true);
    assert_eq!(progress.lines().filter(|l| l.contains("] skip ")).count(), 87, "{progress}");
    assert!(!progress.contains("no profile"), "{progress}");
    let reason = "no profile (conform.toml), so no `detach` role; the manifest's `analyze` or `deploy` could fill `detach` (`conform init` drafts it)";
    assert_eq!(verbose.matches(reason).count(), 1, "{verbose}");
    for r in &report.results {
        assert!(verbose.contains(&r.id), "{} not listed:\n{verbose}", r.id);
    }
}

/// A passing run with its profile: the summary fits a screen, whatever the catalogue's size.
#[test]
fn a_passing_run_fits_a_screen() {
    let results: Vec<ScenarioResult> = (0..91)
        .map(|n| {
            let mut r = result(
                &format!("scenario-{n:02}"),
                &format!("REQ-F-{:03}", n % 21),
                Obligation::Must,
                Status::Pass,
            );
            r.notes = vec![
                calibrated_detach(),
                Note::OutsideWrites(vec![format!("/tmp/.tmp{n} (new directory)")]),
            ];
            r
        })
        .collect();
    let report = sample_report(results);
    let text = human::render(&report, false);
    assert!(text.lines().count() <= 25, "{} lines:\n{text}", text.lines().count());
    assert!(text.contains("verdict: CONFORMANT (exit 0 SUCCESS)"), "{text}");
    assert!(text.contains("  pass     REQ-F-000, REQ-F-001,"), "{text}");
    assert!(!text.contains("calibrated role"), "the progress lines gave the calibrations: {text}");
    // The writes outside the sandbox are one line, whatever each scenario saw.
    assert!(
        text.contains("outside the sandbox, while scenarios ran: /tmp/.tmp0 (new directory), /tmp/.tmp21 (new directory), /tmp/.tmp42 (new directory) and 88 more;"),
        "{text}"
    );
    let verbose = human::render_with(&report, false, true);
    assert!(verbose.contains("calibrated role `detach`"), "{verbose}");
    assert_eq!(verbose.matches("  pass   must   scenario-").count(), 91, "{verbose}");
}

/// The HTML page: self-contained, the verdict first, the failures before the rest, each
/// failing scenario with its timeline (a picture with its text alternative), every scenario
/// reachable by its anchor.
#[test]
fn the_html_page_shows_failures_first_each_with_its_timeline() {
    let report = sample_report(sample_results());
    let view = html::view::RunView::from_report(&report).unwrap();
    let page = html::run_page(&view).render();
    assert!(page.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"), "{page}");
    assert!(page.contains("<p class=\"verdict\">NOT CONFORMANT (exit 80)</p>"), "{page}");
    // Self-contained: nothing to load, no script, and a policy that forbids both.
    assert!(!page.contains("<script") && !page.contains(" src="), "{page}");
    let outside =
        page.replace("xmlns=\"http://www.w3.org/2000/svg\"", "").replace("http-equiv", "");
    assert!(!outside.contains("http") && !outside.contains("//"), "a link out");
    assert!(page.contains("content=\"default-src 'none'; style-src 'unsafe-inline';"));
    let failures = page.find("<h2 id=\"h-failures\">").unwrap();
    let requirements = page.find("<h2 id=\"h-requirements\">").unwrap();
    assert!(failures < requirements, "failures first");
    for r in &report.results {
        assert!(page.contains(&format!("id=\"s-{}\"", r.id)), "{} has no anchor", r.id);
    }
    // Every failure's article holds its timeline, with a title and a description.
    for id in ["budget-flag-beats-env", "progress-monotonic"] {
        let start = page.find(&format!("<div id=\"s-{id}\">")).unwrap();
        let article = &page[start..start + page[start..].find("</article>").unwrap()];
        assert!(article.contains("<svg class=\"timeline\" role=\"img\""), "{id}: {article}");
        assert!(article.contains(&format!("<title id=\"t-{id}-t\">Timeline of {id}</title>")));
        assert!(article.contains(&format!("<desc id=\"t-{id}-d\">")), "{article}");
        assert!(article.contains("<table class=\"timeline-table\">"), "{article}");
    }
    // The budget's call: its bar, its budget, its bound and the signal, in words too.
    let start = page.find("<desc id=\"t-budget-flag-beats-env-d\">").unwrap();
    let desc = &page[start..start + page[start..].find("</desc>").unwrap()];
    for words in [
        "run (mytool analyze big file.csv --budget 2s), from 5 ms to 2018 ms",
        "exit 0",
        "budget 2000 ms",
        "may hold 3620 ms",
        "SIGTERM to its process group at 1500 ms",
        "pause (conform: sleep)",
    ] {
        assert!(desc.contains(words), "`{words}` not in {desc}");
    }
    assert!(page.contains("class=\"mark budget\"") && page.contains("class=\"mark signal\""));
    // The skip reason and the harness error are said, the repro is there.
    assert!(page.contains("Skipped: profile names no `detach` role"), "{page}");
    assert!(page.contains("conform failed: failed to spawn ./mytool"), "{page}");
    assert!(
        page.contains("AGENT_CALL_BUDGET_MS=60000 ./mytool analyze 'big file.csv' --budget 2s")
    );
}

/// A report read back from its JSON gives the same page as the run itself (what `conform
/// matrix` does with other runs' reports), the manifest said once.
#[test]
fn the_html_page_of_a_json_report_is_the_page_of_the_run() {
    let mut results = sample_results();
    results[0].steps =
        vec![step("manifest", &["./mytool", "manifest"], 0, Some(manifest_envelope(12)))];
    let report = sample_report(results);
    let from_run = html::run_page(&html::view::RunView::from_report(&report).unwrap()).render();
    let envelope = json::envelope(&report, json::Evidence::All);
    let read = html::view::RunView::from_envelope(envelope).unwrap();
    assert_eq!(read.exit_code, Some(exit::NOT_CONFORMANT));
    assert_eq!(html::run_page(&read).render(), from_run);
    assert_eq!(from_run.matches("mytool-unique-marker").count(), 1, "the manifest once");
    assert!(from_run.contains("<a href=\"#manifest\">the tool's manifest</a>"), "{from_run}");
    // Under `--evidence failures` a passing scenario's output is said to be left out.
    let brief = json::envelope(&report, json::Evidence::Failures);
    let page = html::run_page(&html::view::RunView::from_envelope(brief).unwrap()).render();
    assert!(page.contains("left out: the scenario passed"), "{page}");
    assert!(html::view::RunView::from_envelope(json!({"data": null})).is_err());
}

/// What a tool prints cannot become markup, or a control character, on the page.
#[test]
fn the_html_page_shows_a_tools_bytes_inert_and_escaped() {
    let mut results = hostile_results();
    let markup = "<script>alert(1)</script>\"><img src=x onerror=alert(1)>";
    results[1].steps[0].stdout.text = markup.to_owned();
    results[1].steps[0].envelope = None;
    results[1].findings[0].message = markup.to_owned();
    results[1].steps[0].repro.command = ReproCommand::Shell(markup.to_owned());
    let page = html::run_page(&html::view::RunView::from_report(&sample_report(results)).unwrap())
        .render();
    assert!(!page.contains("<script") && !page.contains("<img"), "markup got through");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&gt;&lt;img src=x"));
    assert_eq!(foreign_escapes(&page), Vec::<String>::new());
    assert!(!page.contains('\u{1b}'));
    assert!(page.contains(r"\e]0;PWNED\x07"), "the sequence is shown");
}

/// The pieces another command builds its page from: a page of its own sections, a timeline
/// drawn by hand, a histogram, each picture with its text alternative.
#[test]
fn other_pages_are_built_from_the_same_pieces() {
    use html::timeline::{Lane, Mark, MarkKind, Span, SpanKind, Timeline};
    let schedule = Timeline {
        id: "schedule".into(),
        title: "The shrunk schedule".into(),
        lanes: vec![Lane {
            label: "call".into(),
            detail: "import rows.csv".into(),
            spans: vec![Span {
                start_ms: 0,
                end_ms: 800,
                kind: SpanKind::Killed,
                label: "killed by SIGKILL at 412 ms".into(),
                over_from_ms: None,
                pipes_open_until: None,
                marks: vec![Mark { at_ms: 412, kind: MarkKind::Kill, label: "SIGKILL".into() }],
            }],
            finding: Some("effect".into()),
        }],
    };
    let mut body = schedule.svg();
    let bins = [
        html::chart::Bin { label: "0-200 ms".into(), count: 3 },
        html::chart::Bin { label: "200-400 ms".into(), count: 9 },
    ];
    body.push(html::chart::histogram("kills", "Where the kills fell", "kills", &bins));
    let mut page = html::Page::new("conform campaign: <mytool>");
    page.push(html::Section::new("schedule", "The shrunk schedule", body));
    let text = page.render();
    assert!(text.contains("<title>conform campaign: &lt;mytool&gt;</title>"), "{text}");
    assert!(text.contains("call (import rows.csv), from 0 ms to 800 ms: finding [effect]: killed by SIGKILL at 412 ms."), "{text}");
    assert!(
        text.contains("<desc id=\"kills-d\">0-200 ms: 3 kills; 200-400 ms: 9 kills</desc>"),
        "{text}"
    );
}
