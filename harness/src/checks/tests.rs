//! Every check judged in-process on observations built from parts, with a context of plain
//! data: no process runs, no tool is needed.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::embedded::SCHEMA_FILES;
use crate::exec::{Captured, Outcome, Termination};
use crate::observe::{Observation, StdoutProblem, parse_stdout};
use crate::outcome::{Finding, Repro, ReproCommand, ReproStdin, StepRecord};
use crate::scenario::{Expect, Var, walk_template};

/// The parts of an observation a check can look at.
struct Parts {
    name: &'static str,
    termination: Termination,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    elapsed_ms: u64,
    pipes_closed_after_ms: Option<u64>,
    /// `None`: stdout parsed as one JSON document, as the runner does.
    json: Option<Result<Value, StdoutProblem>>,
    command: ReproCommand,
    sandbox_root: &'static str,
}

impl Default for Parts {
    fn default() -> Self {
        Parts {
            name: "call",
            termination: Termination::Exited(0),
            stdout: Vec::new(),
            stderr: Vec::new(),
            elapsed_ms: 10,
            pipes_closed_after_ms: Some(10),
            json: None,
            command: ReproCommand::Argv(vec!["/bin/tool".into(), "analyze".into(), "a.csv".into()]),
            sandbox_root: "/tmp/sandbox-a",
        }
    }
}

impl Parts {
    fn build(self) -> Observation {
        let captured = |bytes: Vec<u8>| Captured { total_len: bytes.len() as u64, bytes };
        let outcome = Outcome {
            termination: self.termination,
            stdout_lines: self.stdout.iter().filter(|&&b| b == b'\n').count() as u64,
            stdout: captured(self.stdout),
            stderr: captured(self.stderr),
            started: std::time::Instant::now(),
            elapsed: Duration::from_millis(self.elapsed_ms),
            pipes_closed_after: self.pipes_closed_after_ms.map(Duration::from_millis),
            pid: 4242,
            usage: None,
            line_signal_sent_after: None,
        };
        let json = self.json.unwrap_or_else(|| parse_stdout(&outcome));
        let repro = Repro {
            env: BTreeMap::new(),
            command: self.command,
            stdin: ReproStdin::Closed,
            cwd: None,
        };
        let record = StepRecord::from_exec(self.name, repro, &outcome, json.as_ref().ok());
        Observation { record, outcome, json, sandbox_root: PathBuf::from(self.sandbox_root) }
    }
}

/// A process that exited with `code` after writing `stdout`.
fn exited(code: i32, stdout: &str) -> Observation {
    Parts {
        termination: Termination::Exited(code),
        stdout: stdout.as_bytes().to_vec(),
        ..Parts::default()
    }
    .build()
}

/// The run `name` of a step (a hop, a copy) that exited with `code` after answering `response`.
fn named_run(name: &'static str, code: i32, response: &Value) -> Observation {
    Parts {
        name,
        termination: Termination::Exited(code),
        stdout: response.to_string().into_bytes(),
        ..Parts::default()
    }
    .build()
}

/// A process that answered `response` on stdout with its `meta.exit_code` (0 if none).
fn responding(response: Value) -> Observation {
    let code = response.pointer("/meta/exit_code").and_then(Value::as_i64).unwrap_or(0);
    exited(i32::try_from(code).unwrap(), &response.to_string())
}

/// A valid success envelope with this `data`.
fn envelope(data: Value) -> Value {
    json!({ "ok": true, "data": data, "error": null, "warnings": [],
            "meta": { "exit_code": 0, "duration_ms": 5 } })
}

fn expect(v: Value) -> Expect {
    serde_json::from_value(v).unwrap()
}

/// Templates the test resolver knows: `{budget}` is 42, `{@first/data/id}` is `abc`.
fn text(template: &str) -> Result<String, String> {
    walk_template(template, |var| match var {
        Var::Calibration(name) if name == "budget" => Some("42".into()),
        Var::StepValue { step, pointer } if step == "first" && pointer == "/data/id" => {
            Some("abc".into())
        }
        _ => None,
    })
}

/// `Nms` or `Ns`; anything else fails.
fn duration(expr: &str) -> Result<Duration, String> {
    let bad = || format!("not a duration: {expr}");
    if let Some(ms) = expr.strip_suffix("ms") {
        return ms.parse().map(Duration::from_millis).map_err(|_| bad());
    }
    let s = expr.strip_suffix('s').ok_or_else(bad)?;
    s.parse().map(Duration::from_secs).map_err(|_| bad())
}

/// Words by whitespace (what `sh` makes of lines without quotes); a `(` fails, as `sh` would.
fn split(line: &str) -> Result<Vec<String>, String> {
    if line.contains('(') {
        return Err(format!("sh could not split `{line}` into words"));
    }
    Ok(line.split_whitespace().map(str::to_owned).collect())
}

/// No word names a program file (the checks then compare program words as words).
fn no_program(_: &str, _: Naming) -> Option<PathBuf> {
    None
}

/// The scenario as the checks see it: earlier observations and the calibrated response.
#[derive(Default)]
struct World {
    history: Vec<Observation>,
    last: BTreeMap<String, usize>,
    calibrated: Option<(Value, PathBuf)>,
}

impl World {
    /// With `obs` as the last observation of step `step`.
    fn with(mut self, step: &str, obs: Observation) -> Self {
        self.history.push(obs);
        self.last.insert(step.to_owned(), self.history.len() - 1);
        self
    }

    fn calibrated(mut self, response: Value, root: &str) -> Self {
        self.calibrated = Some((response, PathBuf::from(root)));
        self
    }

    fn judge_with(&self, expect: &Expect, obs: &Observation, resolved: &Resolved) -> Vec<Finding> {
        let calibrated = match &self.calibrated {
            Some((v, root)) => Ok((v, root.as_path())),
            None => Err("the scenario has no calibrated role".to_owned()),
        };
        check_one(expect, obs, &resolved.context(&self.history, &self.last, calibrated))
    }

    /// `check_one`, with the context resolved by the test resolvers.
    fn judge(&self, expect: &Expect, obs: &Observation) -> Vec<Finding> {
        self.judge_with(expect, obs, &Resolved::new(expect, obs, text, duration, split, no_program))
    }
}

fn judge(expect: &Expect, obs: &Observation) -> Vec<Finding> {
    World::default().judge(expect, obs)
}

fn names(findings: &[Finding]) -> Vec<&str> {
    findings.iter().map(|f| f.check.as_str()).collect()
}

/// The one finding there is.
fn only(findings: Vec<Finding>) -> Finding {
    assert_eq!(findings.len(), 1, "{findings:#?}");
    findings.into_iter().next().unwrap()
}

// ---- the table ----

fn schema_keys() -> BTreeSet<String> {
    let (_, text) = SCHEMA_FILES.iter().find(|(f, _)| *f == "scenario.json").unwrap();
    let schema: Value = serde_json::from_str(text).unwrap();
    schema["definitions"]["Expect"]["properties"].as_object().unwrap().keys().cloned().collect()
}

fn table_keys() -> BTreeSet<String> {
    CHECKS.iter().filter_map(|c| c.key).map(str::to_owned).collect()
}

#[test]
fn the_table_has_one_row_for_every_key_of_expect() {
    let serde_keys: BTreeSet<String> = serde_json::to_value(Expect::default())
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(table_keys(), schema_keys());
    assert_eq!(table_keys(), serde_keys);
    let keyed = CHECKS.iter().filter(|c| c.key.is_some()).count();
    assert_eq!(keyed, table_keys().len(), "a key has two rows");
}

/// A value for each key, turning on its check.
fn sample(key: &str) -> Value {
    match key {
        "exit" => json!(0),
        "exit_not" => json!([1]),
        "schema" => json!("envelope"),
        "json" => json!([{ "pointer": "/ok", "equals": true }]),
        "elapsed_max" | "elapsed_min" => json!("1s"),
        "same" => json!(["/ok"]),
        "manifest_rules" => json!(["detach-or-resume"]),
        "differs_from" => json!([{ "step": "other", "pointer": "/data/id" }]),
        "no_ansi" => json!(["stdout"]),
        "warnings" => json!(["W"]),
        "envelope" => json!("required"),
        "stalls_below" => json!(3),
        "same_response_as"
        | "same_stdout_as"
        | "stdout_differs_from"
        | "same_data_as"
        | "data_differs_from" => json!("other"),
        _ => json!(true),
    }
}

#[test]
fn each_key_alone_turns_on_its_row_and_no_other() {
    for key in schema_keys() {
        let e = expect(Value::Object([(key.clone(), sample(&key))].into_iter().collect()));
        let on: Vec<Option<&str>> =
            CHECKS.iter().filter(|c| (c.active)(&e)).map(|c| c.key).collect();
        let keyed: Vec<&str> = on.iter().flatten().copied().collect();
        assert_eq!(keyed, [key.as_str()], "`{key}` alone");
        assert!(on.contains(&None), "the timeout is always judged");
    }
    let nothing = Expect::default();
    assert!(CHECKS.iter().filter(|c| (c.active)(&nothing)).all(|c| c.key.is_none()));
    let off = expect(json!({ "stream": false, "no_prose": false, "continues_verbatim": false }));
    assert!(CHECKS.iter().filter(|c| (c.active)(&off)).all(|c| c.key.is_none()));
}

#[test]
fn the_checks_that_need_a_response_are_those_that_always_did() {
    let needing: BTreeSet<&str> =
        CHECKS.iter().filter(|c| c.needs_response).filter_map(|c| c.key).collect();
    let before = [
        "schema",
        "same_data_as",
        "data_differs_from",
        "continues_verbatim",
        "differs_from",
        "json",
        "matches_calibrated",
        "same_response_as",
        "same",
        "manifest_rules",
        "budget_recorded",
        "retryable_as_declared",
        "ends_as_calibrated",
    ];
    assert_eq!(needing, before.into_iter().collect());
    for c in CHECKS {
        if let Judge::Response(_) = c.judge {
            assert!(c.needs_response, "{:?} judges the response but does not need it", c.key);
        }
    }
    assert!(needs_response(&expect(json!({ "same": ["/ok"] }))));
    assert!(!needs_response(&expect(json!({ "exit": 0, "warnings": ["W"] }))));
}

#[test]
fn findings_come_in_the_order_of_the_table() {
    // Everything wrong at once with a non-JSON stdout.
    let obs = Parts {
        termination: Termination::Exited(3),
        stdout: b"\x1b[1mhello\n".to_vec(),
        elapsed_ms: 50,
        pipes_closed_after_ms: None,
        ..Parts::default()
    }
    .build();
    let e = expect(json!({
        "exit": 0, "exit_not": [3], "stream": true, "same_stdout_as": "gone",
        "schema": "envelope", "json": [{ "pointer": "/ok", "equals": true }],
        "elapsed_max": "1ms", "pipes_released": true, "no_ansi": ["stdout"], "no_prose": true,
    }));
    let found = judge(&e, &obs);
    let mut order = names(&found);
    order.dedup();
    assert_eq!(
        order,
        [
            "exit-code",
            "stream",
            "same-stdout",
            "stdout-not-json",
            "elapsed",
            "pipes-released",
            "ansi",
            "prose"
        ]
    );
    assert_eq!(found.iter().filter(|f| f.check == "exit-code").count(), 2);
    assert!(found.iter().all(|f| f.step.as_deref() == Some("call")));

    // Everything wrong at once with a JSON response.
    let obs = responding(json!({ "ok": "yes" }));
    let e = expect(json!({
        "schema": "envelope", "json": [{ "pointer": "/ok", "equals": true }],
        "continues_verbatim": true, "differs_from": [{ "step": "gone", "pointer": "/id" }],
        "manifest_rules": ["detach-or-resume"], "matches_calibrated": true,
        "same_response_as": "gone",
    }));
    assert_eq!(
        names(&judge(&e, &obs)),
        [
            "schema",
            "json-pointer",
            "continue-command",
            "unlike",
            "manifest-rule",
            "calibrated-equality",
            "same-response"
        ]
    );
}

#[test]
fn stdout_without_a_response_is_one_finding_however_many_checks_need_one() {
    let e = expect(json!({
        "exit": 0, "schema": "envelope", "json": [{ "pointer": "/ok", "present": true }],
        "same_data_as": "earlier", "same": ["/ok"],
    }));
    let world = World::default().with("earlier", responding(envelope(json!({ "n": 1 }))));
    let found = world.judge(&e, &exited(0, "not json"));
    assert_eq!(names(&found), ["same-data", "stdout-not-json"]);
    assert!(found[1].message.starts_with("stdout is not one JSON document"));
    // Only `same` needs a response: the finding still comes where the response checks start.
    let e = expect(json!({ "same": ["/ok"], "elapsed_max": "1ms" }));
    let empty = Parts { elapsed_ms: 5, ..Parts::default() }.build();
    let found = judge(&e, &empty);
    assert_eq!(names(&found), ["stdout-not-json", "elapsed"]);
    assert_eq!(found[0].message, "stdout is empty");
    assert_eq!(found[0].actual.as_deref(), Some("nothing"));
    // A check that needs none says nothing about stdout.
    assert!(judge(&expect(json!({ "exit": 0 })), &empty).is_empty());
}

#[test]
fn each_kind_of_stdout_problem_has_its_own_finding() {
    let e = expect(json!({ "schema": "envelope" }));
    let problem = |json: StdoutProblem| {
        only(judge(
            &e,
            &Parts { stdout: b"\xff".to_vec(), json: Some(Err(json)), ..Parts::default() }.build(),
        ))
    };
    assert_eq!(problem(StdoutProblem::NotUtf8(0)).check, "stdout-not-utf8");
    assert!(problem(StdoutProblem::Truncated(9)).message.contains("9 bytes"));
    assert!(problem(StdoutProblem::NoStreamTerminal).message.contains("no terminal line"));
}

// ---- what the step stage resolves ----

#[test]
fn the_step_stage_resolves_everything_the_checks_ask_for() {
    let e = expect(json!({
        "json": [
            { "pointer": "/data/n", "equals": "{budget}", "not_equals": "{@first/data/id}", "less_than": "100",
              "at_least": "{budget}", "greater_than": 0 },
            { "pointer": "/data/id", "equals": "abc", "matches": "^{@first/data/id}$" },
        ],
        "elapsed_max": "5s", "elapsed_min": "1ms", "continues_verbatim": true,
    }));
    let obs = Parts {
        stdout: envelope(json!({ "n": 42, "id": "abc", "continue_command": "/bin/tool go --x" }))
            .to_string()
            .into_bytes(),
        command: ReproCommand::Shell("/bin/tool go --x".into()),
        ..Parts::default()
    }
    .build();
    let asked = RefCell::new(Vec::new());
    let resolved = Resolved::new(
        &e,
        &obs,
        |t| {
            asked.borrow_mut().push(format!("text {t}"));
            text(t)
        },
        |d| {
            asked.borrow_mut().push(format!("duration {d}"));
            duration(d)
        },
        |l| {
            asked.borrow_mut().push(format!("split {l}"));
            split(l)
        },
        |w, naming| {
            asked.borrow_mut().push(format!("locate {w} as {naming:?}"));
            None
        },
    );
    // Each thing once, even when it is asked for twice.
    assert_eq!(
        asked.into_inner(),
        [
            "text {budget}",
            "text {@first/data/id}",
            "text 100",
            "text ^{@first/data/id}$",
            "text abc",
            "duration 5s",
            "text 5s",
            "duration 1ms",
            "text 1ms",
            "split /bin/tool go --x",
            "locate /bin/tool as Program",
            "locate go as Script"
        ]
    );
    let found = World::default().judge_with(&e, &obs, &resolved);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn what_the_step_stage_did_not_resolve_is_a_finding_about_conform() {
    let e = expect(json!({
        "json": [{ "pointer": "/data/n", "equals": "{budget}" }],
        "elapsed_max": "5s", "continues_verbatim": true,
    }));
    let obs =
        responding(envelope(json!({ "n": 42, "continue_command": "/bin/tool analyze a.csv" })));
    let found = World::default().judge_with(&e, &obs, &Resolved::default());
    assert_eq!(names(&found), ["json-pointer", "continue-command", "elapsed"]);
    for f in &found {
        assert!(f.message.contains("did not resolve") && f.message.contains("bug of conform"));
    }
    assert!(found[0].message.contains("`{budget}`"));
}

#[test]
fn only_continues_verbatim_asks_sh_for_words() {
    let response = envelope(json!({ "continue_command": "/bin/tool analyze a.csv" }));
    let argv = responding(response.clone());
    let on = expect(json!({ "continues_verbatim": true }));
    assert_eq!(lines_to_split(&on, &argv), ["/bin/tool analyze a.csv"]);
    assert!(lines_to_split(&expect(json!({ "continues_verbatim": false })), &argv).is_empty());
    assert!(lines_to_split(&Expect::default(), &argv).is_empty());
    assert!(lines_to_split(&on, &exited(0, "")).is_empty());
    let shell = Parts {
        stdout: response.to_string().into_bytes(),
        command: ReproCommand::Shell("cd w && tool analyze".into()),
        ..Parts::default()
    }
    .build();
    assert_eq!(lines_to_split(&on, &shell), ["cd w && tool analyze", "/bin/tool analyze a.csv"]);
}

// ---- exit.rs ----

#[test]
fn exit_holds_for_the_code_or_one_of_the_list() {
    assert!(judge(&expect(json!({ "exit": 0 })), &exited(0, "")).is_empty());
    assert!(judge(&expect(json!({ "exit": [0, 14] })), &exited(14, "")).is_empty());
    let f = only(judge(&expect(json!({ "exit": 0 })), &exited(2, "")));
    assert_eq!((f.check.as_str(), f.message.as_str()), ("exit-code", "exit 2, expected exit 0"));
    let f = only(judge(&expect(json!({ "exit": [0, 14] })), &exited(1, "")));
    assert_eq!(f.expected.as_deref(), Some("exit in [0, 14]"));
    let signaled = Parts { termination: Termination::Signaled(9), ..Parts::default() }.build();
    assert_eq!(
        only(judge(&expect(json!({ "exit": 0 })), &signaled)).actual.as_deref(),
        Some("signal 9")
    );
}

#[test]
fn exit_not_wants_an_exit_by_itself_with_another_code() {
    let e = expect(json!({ "exit_not": [1, 2] }));
    assert!(judge(&e, &exited(0, "")).is_empty());
    let f = only(judge(&e, &exited(2, "")));
    assert_eq!(f.message, "exit 2 is one it must not be");
    assert_eq!(f.expected.as_deref(), Some("not exit in [1, 2]"));
    let killed = Parts { termination: Termination::Signaled(15), ..Parts::default() }.build();
    assert_eq!(only(judge(&e, &killed)).message, "the process did not exit by itself (signal 15)");
}

#[test]
fn every_step_is_judged_on_its_timeout() {
    assert!(judge(&Expect::default(), &exited(1, "")).is_empty());
    let timed_out =
        Parts { termination: Termination::TimedOut, elapsed_ms: 3000, ..Parts::default() }.build();
    let f = only(judge(&Expect::default(), &timed_out));
    assert_eq!(f.check, "timeout");
    assert!(f.message.ends_with("killed after 3000 ms"));
}

// ---- output.rs ----

#[test]
fn elapsed_bounds_hold_inclusively() {
    let obs = Parts { elapsed_ms: 100, ..Parts::default() }.build();
    assert!(
        judge(&expect(json!({ "elapsed_max": "100ms", "elapsed_min": "100ms" })), &obs).is_empty()
    );
    let f = only(judge(&expect(json!({ "elapsed_max": "99ms" })), &obs));
    assert_eq!(f.message, "took 100 ms, more than 99 ms");
    assert_eq!((f.expected.as_deref(), f.actual.as_deref()), (Some("≤ 99 ms"), Some("100 ms")));
    let f = only(judge(&expect(json!({ "elapsed_min": "1s" })), &obs));
    assert_eq!(f.message, "took 100 ms, less than 1000 ms");
    // A bound of several terms shows each as measured, never a variable's name.
    let w = World::default();
    let e = expect(json!({ "elapsed_max": "{budget} + 50ms" }));
    let resolved =
        Resolved::new(&e, &obs, text, |_| Ok(Duration::from_millis(92)), split, no_program);
    let f = only(w.judge_with(&e, &obs, &resolved));
    assert_eq!(f.message, "took 100 ms, more than 92 ms (42 ms + 50ms)");
    let f = only(judge(&expect(json!({ "elapsed_max": "soon" })), &obs));
    assert_eq!((f.check.as_str(), f.message.as_str()), ("elapsed", "not a duration: soon"));
}

#[test]
fn pipes_released_allows_a_grace_after_the_exit() {
    let e = expect(json!({ "pipes_released": true }));
    let closing = |after: Option<u64>| {
        Parts { elapsed_ms: 100, pipes_closed_after_ms: after, ..Parts::default() }.build()
    };
    assert!(judge(&e, &closing(Some(1100))).is_empty());
    let f = only(judge(&e, &closing(Some(1101))));
    assert_eq!(f.message, "stdout/stderr closed 1001 ms after the process exited");
    let f = only(judge(&e, &closing(None)));
    assert_eq!(f.actual.as_deref(), Some("still open after the exit at 100 ms"));
    assert!(judge(&expect(json!({ "pipes_released": false })), &closing(None)).is_empty());
}

#[test]
fn no_ansi_finds_an_escape_on_the_streams_named() {
    let obs =
        Parts { stdout: b"{}".to_vec(), stderr: b"warn \x1b[31mred".to_vec(), ..Parts::default() }
            .build();
    assert!(judge(&expect(json!({ "no_ansi": ["stdout"] })), &obs).is_empty());
    let f = only(judge(&expect(json!({ "no_ansi": ["stdout", "stderr"] })), &obs));
    assert_eq!(f.message, "stderr holds an ANSI escape sequence at byte 5");
    assert_eq!(f.actual.as_deref(), Some("warn \\e[31mred"));
}

#[test]
fn no_prose_allows_nothing_or_one_document() {
    let e = expect(json!({ "no_prose": true }));
    assert!(judge(&e, &exited(0, "")).is_empty());
    assert!(judge(&e, &exited(0, "{\"ok\":true}")).is_empty());
    let f = only(judge(&e, &exited(0, "Usage: tool [OPTIONS]")));
    assert_eq!((f.check.as_str(), f.actual.as_deref()), ("prose", Some("Usage: tool [OPTIONS]")));
}

// ---- json.rs ----

#[test]
fn schema_validates_the_response_against_each_schema_named() {
    let good = responding(envelope(json!({ "n": 1 })));
    assert!(judge(&expect(json!({ "schema": "envelope" })), &good).is_empty());
    assert!(judge(&expect(json!({ "schema": ["envelope"] })), &good).is_empty());
    let f =
        only(judge(&expect(json!({ "schema": "envelope" })), &responding(json!({ "ok": true }))));
    assert_eq!(f.message, "the response does not validate against response-envelope.json");
    assert!(f.actual.unwrap().contains("at `/`"));
}

/// `job status` of an async command's running job answers REQ-F-082's INCOMPLETE response
/// (REQ-C-022), but no budget applies to that job: `incomplete-job` does not ask for
/// `meta.budget_ms`, `incomplete` does; a budget that is there is a whole number in both.
#[test]
fn incomplete_job_leaves_the_budget_out_of_the_incomplete_schema() {
    let running = |meta: Value| {
        responding(json!({ "ok": false, "warnings": [], "meta": meta,
            "error": { "code": "INCOMPLETE", "message": "running", "retryable": true },
            "data": { "state": "running", "job_id": "j1", "progress": { "done": 3 },
                      "continue_command": "tool job wait j1", "cancel_command": "tool job cancel j1" } }))
    };
    let bare = running(json!({ "exit_code": 14, "duration_ms": 5 }));
    assert!(judge(&expect(json!({ "schema": "incomplete-job" })), &bare).is_empty());
    let f = only(judge(&expect(json!({ "schema": "incomplete" })), &bare));
    assert!(f.actual.unwrap().contains("budget_ms"));
    let text = running(json!({ "exit_code": 14, "duration_ms": 5, "budget_ms": "30s" }));
    let f = only(judge(&expect(json!({ "schema": "incomplete-job" })), &text));
    assert_eq!(
        f.message,
        "the response does not validate against incomplete-response.json (meta.budget_ms optional)"
    );
}

/// A valid error envelope saying `code` in `meta.exit_code`.
fn error_envelope(code: i64) -> Value {
    json!({ "ok": false, "data": null, "warnings": [],
            "error": { "code": "ARG_ERROR", "message": "bad", "retryable": false, "phase": "validation" },
            "meta": { "exit_code": code, "duration_ms": 5 } })
}

#[test]
fn exit_matches_meta_compares_a_valid_envelopes_exit_code_with_the_process() {
    let e = expect(json!({ "exit_matches_meta": true }));
    assert!(judge(&e, &exited(2, &error_envelope(2).to_string())).is_empty());
    assert!(judge(&e, &responding(envelope(json!({})))).is_empty());
    // The classic "always exit 0": the right error envelope, the wrong status.
    let f = only(judge(&e, &exited(0, &error_envelope(5).to_string())));
    assert_eq!(f.check.as_str(), "exit-code");
    assert_eq!(f.message, "the process exited 0 but its envelope says meta.exit_code 5");
    let f = only(judge(&e, &exited(2, &error_envelope(1).to_string())));
    assert_eq!(f.expected.as_deref(), Some("meta.exit_code 2, the exit code"));
    // No valid envelope, or no exit: the envelope checks and the timeout say so, not this.
    assert!(judge(&e, &exited(3, "{\"meta\": {\"exit_code\": 0}}")).is_empty());
    assert!(judge(&e, &exited(0, "prose")).is_empty());
    let timed_out = Parts {
        termination: Termination::TimedOut,
        stdout: error_envelope(1).to_string().into_bytes(),
        ..Parts::default()
    };
    assert_eq!(names(&judge(&e, &timed_out.build())), ["timeout"]);
}

#[test]
fn envelope_wants_one_valid_envelope_with_the_allowance_named() {
    let required = expect(json!({ "envelope": "required" }));
    let or_empty = expect(json!({ "envelope": "or-empty" }));
    let good = responding(envelope(json!({ "n": 1 })));
    assert!(judge(&required, &good).is_empty());
    assert!(judge(&or_empty, &good).is_empty());
    assert!(judge(&or_empty, &exited(0, "")).is_empty());
    assert_eq!(names(&judge(&required, &exited(0, ""))), ["stdout-not-json"]);
    assert_eq!(names(&judge(&or_empty, &exited(0, "usage: tool"))), ["stdout-not-json"]);
    // Beside a check that needs the response, the stdout problem is one finding, not two.
    let with_schema = expect(json!({ "envelope": "required", "schema": "manifest" }));
    assert_eq!(names(&judge(&with_schema, &exited(0, "usage: tool"))), ["stdout-not-json"]);
    // Any JSON value is not enough: the envelope's shape is the schema's.
    let no_warnings = json!({ "ok": true, "data": {}, "error": null, "meta": { "exit_code": 0, "duration_ms": 1 } });
    for shape in [json!({ "version": "1.2" }), json!([]), json!(42), no_warnings] {
        let f = only(judge(&or_empty, &exited(0, &shape.to_string())));
        assert_eq!(f.message, "the response does not validate against response-envelope.json");
    }
}

#[test]
fn envelope_lets_a_bare_manifest_through_only_from_the_manifest_command() {
    let e = expect(json!({ "envelope": "or-bare-manifest" }));
    let manifest = json!({ "schema_version": "3.20", "commands": {} });
    let bare = exited(0, &manifest.to_string());
    let mut resolved = Resolved::new(&e, &bare, text, duration, split, no_program);
    assert_eq!(names(&World::default().judge_with(&e, &bare, &resolved)), ["schema"]);
    resolved.manifest_command = true;
    let findings = World::default().judge_with(&e, &bare, &resolved);
    assert!(
        findings.is_empty() || findings[0].message.contains("manifest-response.json"),
        "{findings:#?}"
    );
    // The manifest command's envelope is still an envelope, judged as one.
    let wrapped_badly = json!({ "ok": true, "data": manifest, "meta": { "exit_code": 0 } });
    let obs = exited(0, &wrapped_badly.to_string());
    let f = only(World::default().judge_with(&e, &obs, &resolved));
    assert_eq!(f.message, "the response does not validate against response-envelope.json");
}

#[test]
fn pointer_checks_compare_present_equal_and_unequal_values() {
    let obs = responding(envelope(json!({ "state": "done", "n": 42, "id": "abc" })));
    let pass = expect(json!({ "json": [
        { "pointer": "/data/state", "present": true, "equals": "done", "not_equals": "running" },
        { "pointer": "/data/gone", "present": false },
        { "pointer": "/data/n", "equals": "{budget}" },
        { "pointer": "/data/id", "equals": "{@first/data/id}", "matches": "^a.c$" },
    ] }));
    assert!(judge(&pass, &obs).is_empty(), "{:#?}", judge(&pass, &obs));
    let fail = expect(json!({ "json": [
        { "pointer": "/data/gone", "present": true },
        { "pointer": "/data/state", "present": false },
        { "pointer": "/data/state", "equals": "running" },
        { "pointer": "/data/gone", "equals": 1 },
        { "pointer": "/data/n", "not_equals": "{budget}" },
        { "pointer": "/data/n", "equals": "42" },
        { "pointer": "/data/id", "matches": "^x" },
    ] }));
    let messages: Vec<String> = judge(&fail, &obs).into_iter().map(|f| f.message).collect();
    assert_eq!(
        messages,
        [
            "`/data/gone` is absent",
            "`/data/state` is present",
            "`/data/state` has the wrong value",
            "`/data/gone` is absent",
            "`/data/n` has the value it must not have",
            // Text read as a number only when it came from a template.
            "`/data/n` has the wrong value",
            "`/data/id` does not match /^x/",
        ]
    );
}

#[test]
fn pointer_checks_compare_numbers_with_numbers_or_templates() {
    let obs = responding(envelope(json!({ "n": 5 })));
    let pass = expect(json!({ "json": [
        { "pointer": "/data/n", "less_than": "{budget}", "at_least": 5, "greater_than": "4" },
    ] }));
    assert!(judge(&pass, &obs).is_empty());
    let fail = expect(json!({ "json": [
        { "pointer": "/data/n", "less_than": 5, "at_least": "6", "greater_than": "{budget}" },
        { "pointer": "/data/gone", "at_least": 0 },
        { "pointer": "/data/n", "less_than": "{@first/data/id}" },
        { "pointer": "/data/n", "equals": "{@gone/x}", "less_than": 9 },
        { "pointer": "/data/n", "matches": "(" },
    ] }));
    let messages: Vec<String> = judge(&fail, &obs).into_iter().map(|f| f.message).collect();
    assert_eq!(
        messages[..4],
        [
            "`/data/n` is not less than 5",
            "`/data/n` is not at least 6",
            "`/data/n` is not greater than 42",
            "`/data/gone` is not at least 0",
        ]
    );
    assert_eq!(messages[4], "`less_than` of `/data/n` is not a number: \"abc\"");
    // A template that does not resolve ends that pointer's check.
    assert_eq!(messages[5], "no value for `{@gone/x}`");
    assert!(messages[6].starts_with("bad pattern: "), "{messages:#?}");
    assert_eq!(messages.len(), 7);
}

#[test]
fn warnings_wants_each_code_in_some_response_of_the_step() {
    let warned = |code: &str| {
        let mut r = envelope(json!({}));
        r["warnings"] = json!([{ "code": code, "message": "m" }]);
        responding(r)
    };
    let (a, b) = (warned("SLOW"), responding(envelope(json!({}))));
    let e = expect(json!({ "warnings": ["SLOW"] }));
    assert!(check_all(&e, "step", &[&b, &a], &StepFacts::default()).is_empty());
    let f = only(check_all(
        &expect(json!({ "warnings": ["LATE"] })),
        "step",
        &[&a, &b],
        &StepFacts::default(),
    ));
    assert_eq!(f.message, "no response of the step warns `LATE`");
    assert_eq!(f.actual.as_deref(), Some("[{\"code\":\"SLOW\",\"message\":\"m\"}]\n[]"));
    assert_eq!(f.step.as_deref(), Some("step"));
}

#[test]
fn same_wants_one_value_in_every_response_of_the_step() {
    let job = |id: &str| responding(envelope(json!({ "job_id": id })));
    let e = expect(json!({ "same": ["/data/job_id"] }));
    let (a, b, c) = (job("j1"), job("j1"), job("j2"));
    assert!(check_all(&e, "copies", &[&a, &b], &StepFacts::default()).is_empty());
    let f = only(check_all(&e, "copies", &[&a, &b, &c], &StepFacts::default()));
    assert_eq!(f.message, "`/data/job_id` differs across the 3 responses of the step");
    assert_eq!(f.actual.as_deref(), Some("\"j1\"\n\"j2\""));
    let none = exited(0, "");
    assert_eq!(
        only(check_all(&e, "copies", &[&a, &none], &StepFacts::default())).actual.as_deref(),
        Some("\"j1\"\nabsent")
    );
    // check_one leaves `same` to check_all.
    assert_eq!(names(&judge(&e, &a)), Vec::<&str>::new());
}

// ---- shape.rs ----

/// An observation named `name` of a response exiting `code` with this `meta.budget_ms` (none
/// when `None`) and, for an INCOMPLETE, this `error.retryable`.
fn hop(
    name: &'static str,
    code: i32,
    budget: Option<Value>,
    retryable: Option<bool>,
) -> Observation {
    let mut meta = json!({ "exit_code": code, "duration_ms": 5 });
    if let Some(b) = budget {
        meta["budget_ms"] = b;
    }
    let error = retryable
        .map_or(Value::Null, |r| json!({ "code": "INCOMPLETE", "message": "m", "retryable": r }));
    let response =
        json!({ "ok": code == 0, "data": {}, "error": error, "warnings": [], "meta": meta });
    named_run(name, code, &response)
}

fn entries(list: &[(&str, Option<bool>)]) -> StepFacts {
    let incomplete_entries = list
        .iter()
        .map(|(c, r)| DeclaredEntry { command: (*c).to_owned(), retryable: *r })
        .collect();
    StepFacts { incomplete_entries, ..StepFacts::default() }
}

#[test]
fn budget_recorded_judges_every_hop_in_one_finding() {
    let e = expect(json!({ "budget_recorded": true }));
    let none = StepFacts::default();
    let first = hop("wait#1", 14, Some(json!(700)), Some(true));
    let last = hop("wait#2", 0, Some(json!(0)), None);
    assert!(check_all(&e, "wait", &[&first, &last], &none).is_empty());
    // A middle hop without it is found, though the last hop has it.
    let bare = hop("wait#1", 14, None, Some(true));
    let text = hop("wait#2", 14, Some(json!("700")), Some(true));
    let f = only(check_all(&e, "wait", &[&bare, &text, &last], &none));
    assert_eq!(f.check, FindingKind::BudgetMeta);
    assert_eq!(f.message, "2 of the 3 responses of the step do not record the budget in force");
    assert_eq!(
        f.actual.as_deref(),
        Some("wait#1 (exit 14): meta.budget_ms absent\nwait#2 (exit 14): meta.budget_ms \"700\"")
    );
    assert_eq!(f.step.as_deref(), Some("wait"));
    // An ending other than 0 and 14 is a response too.
    let lost = hop("wait#1", 1, None, None);
    assert_eq!(names(&check_all(&e, "wait", &[&lost], &none)), ["budget-meta"]);
    // No response is the response checks' to report, once.
    assert!(check_all(&e, "wait", &[&exited(1, "")], &none).is_empty());
    assert_eq!(names(&judge(&e, &exited(1, ""))), ["stdout-not-json"]);
}

/// REQ-F-080 asks for `meta.budget_ms` on every response of an interruptible command, but
/// REQ-F-081's own examples of a relayed final response and of JOB_LOST carry none (docs/contract.md
/// §9): an ending that `job wait` relays may leave it out; its INCOMPLETE answers, and the
/// command's own responses, may not.
#[test]
fn budget_recorded_lets_a_relayed_ending_leave_the_budget_out() {
    let e = expect(json!({ "budget_recorded": true }));
    let waits = StepFacts { relayed: [0, 1].into_iter().collect(), ..StepFacts::default() };
    let hop_14 = hop("wait#1", 14, Some(json!(700)), Some(true));
    let relayed_end = hop("wait#2", 0, None, None);
    let lost = hop("wait#2", 1, None, None);
    assert!(check_all(&e, "wait", &[&hop_14, &relayed_end], &waits).is_empty());
    assert!(check_all(&e, "wait", &[&hop_14, &lost], &waits).is_empty());
    // Kept, it is a whole number still.
    let text = hop("wait#2", 1, Some(json!("700")), None);
    assert_eq!(names(&check_all(&e, "wait", &[&hop_14, &text], &waits)), ["budget-meta"]);
    // An INCOMPLETE that job wait gives carries it (REQ-F-082).
    let bare_14 = hop("wait#1", 14, None, Some(true));
    assert_eq!(names(&check_all(&e, "wait", &[&bare_14, &relayed_end], &waits)), ["budget-meta"]);
    // The command's own ending keeps it: the same responses, not relayed.
    let own = StepFacts::default();
    assert_eq!(names(&check_all(&e, "call", &[&hop_14, &lost], &own)), ["budget-meta"]);
}

#[test]
fn retryable_as_declared_wants_every_incomplete_to_copy_a_declared_entry() {
    let e = expect(json!({ "retryable_as_declared": true }));
    let reader = entries(&[("analyze", Some(true))]);
    let yes = hop("call", 14, Some(json!(700)), Some(true));
    let no = hop("continue#1", 14, Some(json!(700)), Some(false));
    let done = hop("continue#2", 0, Some(json!(700)), None);
    assert!(check_all(&e, "s", &[&yes, &done], &reader).is_empty());
    let f = only(check_all(&e, "s", &[&yes, &no, &done], &reader));
    assert_eq!(f.check, FindingKind::IncompleteRetryable);
    assert_eq!(
        f.message,
        "1 of the 2 INCOMPLETE responses of the step do not copy `retryable` from the declared \"14\" entry"
    );
    assert_eq!(f.expected.as_deref(), Some("error.retryable true (the \"14\" entry of `analyze`)"));
    assert_eq!(f.actual.as_deref(), Some("continue#1: error.retryable false"));
    // A writer's job waited on may copy either its own entry or job wait's (docs/contract.md §9).
    let either = entries(&[("deploy", Some(false)), ("job.wait", Some(true))]);
    assert!(check_all(&e, "s", &[&yes, &no], &either).is_empty());
    let writer = entries(&[("import", Some(false))]);
    assert_eq!(names(&check_all(&e, "s", &[&yes], &writer)), ["incomplete-retryable"]);
    // An INCOMPLETE without the boolean copies nothing.
    let absent = hop("call", 14, Some(json!(700)), None);
    assert_eq!(names(&check_all(&e, "s", &[&absent], &reader)), ["incomplete-retryable"]);
    // Nothing declared, nothing to copy: the manifest scenarios judge the missing entry.
    assert!(check_all(&e, "s", &[&no], &entries(&[("analyze", None)])).is_empty());
}

#[test]
fn the_declared_entries_follow_the_command_a_response_answers_for() {
    let manifest = json!({ "commands": {
        "analyze": { "danger_level": "safe", "interruption": { "detach": true, "resume": false },
                     "exit_codes": { "14": { "description": "d", "retryable": true, "side_effects": "none" } } },
        "import": { "danger_level": "mutating", "interruption": { "detach": false, "resume": true },
                    "exit_codes": { "14": { "description": "d", "retryable": false, "side_effects": "partial" } } },
        "job.wait": { "danger_level": "safe", "exit_codes": {} },
    } });
    let commands = crate::discover::Commands::from_manifest(&manifest);
    let argv = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
    let found = |argv: &[String], job: Option<&[String]>, continued| {
        declared_entries(&commands, argv, job, continued)
            .into_iter()
            .map(|e| (e.command, e.retryable))
            .collect::<Vec<_>>()
    };
    let analyze = argv(&["analyze", "data.csv"]);
    let import = argv(&["import", "rows.csv", "--db", "rows.db"]);
    let own = |c: &str, r: bool| (c.to_owned(), Some(r));
    assert_eq!(found(&analyze, None, false), [own("analyze", true)]);
    // Continuing a detaching command runs `job wait`, whose own entry (none: read-only) counts.
    assert_eq!(found(&analyze, None, true), [own("analyze", true), own("job.wait", true)]);
    // A resume-only command's continuation is the invocation itself.
    assert_eq!(found(&import, None, true), [own("import", false)]);
    // `job wait <id>` as a step's own arguments answers for the scenario's role too.
    let wait = argv(&["job", "wait", "abc"]);
    assert_eq!(found(&wait, Some(&import), false), [own("job.wait", true), own("import", false)]);
    assert!(found(&argv(&["nothing"]), None, true).is_empty());
}

// ---- compare.rs ----

#[test]
fn same_response_as_compares_after_redaction() {
    let at = |root: &'static str| {
        let r = envelope(json!({ "out": format!("{root}/work/out.csv") }));
        Parts { stdout: r.to_string().into_bytes(), sandbox_root: root, ..Parts::default() }.build()
    };
    let world = World::default().with("first", at("/tmp/sandbox-b"));
    let e = expect(json!({ "same_response_as": "first" }));
    assert!(world.judge(&e, &at("/tmp/sandbox-a")).is_empty());
    let other = responding(envelope(json!({ "out": "elsewhere" })));
    let f = only(world.judge(&e, &other));
    assert_eq!(f.message, "the response differs from step `first`'s");
    let f = only(World::default().judge(&e, &other));
    assert_eq!(f.message, "step `first` has no JSON response to compare with");
}

#[test]
fn matches_calibrated_compares_ok_data_error_and_exit_code() {
    let e = expect(json!({ "matches_calibrated": true }));
    let mut calibrated = envelope(json!({ "rows": 3 }));
    calibrated["meta"]["duration_ms"] = json!(9000);
    let world = World::default().calibrated(calibrated, "/tmp/calibration");
    assert!(world.judge(&e, &responding(envelope(json!({ "rows": 3 })))).is_empty());
    let f = only(world.judge(&e, &responding(envelope(json!({ "rows": 2 })))));
    assert_eq!(f.check, "calibrated-equality");
    assert!(f.expected.unwrap().contains("\"rows\": 3"));
    // The same response under another exit is no match (a tool that relays the work's
    // envelope but exits 1, say).
    let same = envelope(json!({ "rows": 3 })).to_string();
    let f = only(world.judge(&e, &exited(1, &same)));
    assert_eq!(
        f.message,
        "the response is the one the work gives with --budget 0, but not its exit"
    );
    assert_eq!(f.actual.as_deref(), Some("exit 1"));
    let f = only(judge(&e, &responding(envelope(json!({})))));
    assert_eq!(f.message, "the scenario has no calibrated role");
}

/// A command's data may carry what it measured (a slept time): the role names it in its
/// `redact`, and the rest is compared.
#[test]
fn matches_calibrated_leaves_out_what_the_role_redacts() {
    let e = expect(json!({ "matches_calibrated": true }));
    let world = World::default()
        .calibrated(envelope(json!({ "rows": 3, "slept_ms": 2004 })), "/tmp/calibration");
    let measured = responding(envelope(json!({ "rows": 3, "slept_ms": 1997 })));
    assert_eq!(names(&world.judge(&e, &measured)), ["calibrated-equality"]);
    let mut resolved = Resolved::new(&e, &measured, text, duration, split, no_program);
    resolved.redact = vec!["/data/slept_ms".to_owned()];
    assert!(world.judge_with(&e, &measured, &resolved).is_empty());
    let wrong = responding(envelope(json!({ "rows": 2, "slept_ms": 1997 })));
    assert_eq!(names(&world.judge_with(&e, &wrong, &resolved)), ["calibrated-equality"]);
}

/// `ends_as_calibrated` compares how the work ended, not what it computed: exit, `ok`,
/// `error.code`, and the shape of `data`.
#[test]
fn ends_as_calibrated_compares_the_ending_and_the_shape_of_data() {
    let e = expect(json!({ "ends_as_calibrated": true }));
    let world = World::default().calibrated(
        envelope(json!({ "file": "w.txt", "slept_ms": 2004, "parts": [1, 2] })),
        "/tmp/calibration",
    );
    let measured = envelope(json!({ "file": "w.txt", "slept_ms": 1890, "parts": [3, 4] }));
    assert!(world.judge(&e, &responding(measured.clone())).is_empty());
    // Another shape: a key missing, a type changed, an array of another length.
    for data in [
        json!({ "file": "w.txt", "parts": [1, 2] }),
        json!({ "file": "w.txt", "slept_ms": "2004", "parts": [1, 2] }),
        json!({ "file": "w.txt", "slept_ms": 2004, "parts": [1] }),
    ] {
        let f = only(world.judge(&e, &responding(envelope(data))));
        assert_eq!(f.check, "calibrated-equality");
    }
    // The same data under another exit, or a hand-off instead of the ending.
    assert_eq!(names(&world.judge(&e, &exited(1, &measured.to_string()))), ["calibrated-equality"]);
    let handoff = json!({ "ok": false, "data": { "state": "running" }, "warnings": [],
        "error": { "code": "INCOMPLETE", "message": "m", "retryable": true },
        "meta": { "exit_code": 14, "duration_ms": 5, "budget_ms": 700 } });
    assert_eq!(names(&world.judge(&e, &responding(handoff))), ["calibrated-equality"]);
}

/// REQ-F-001's table, the kit's signal exits, and a command-specific code only where its
/// command declares it (the kit takes any code of 79 to 125; conform is stricter).
#[test]
fn exit_in_table_takes_the_table_signals_and_declared_codes() {
    let e = expect(json!({ "exit_in_table": true }));
    for code in [0, 2, 13, 14, 130, 143] {
        assert!(judge(&e, &exited(code, "{}")).is_empty(), "exit {code}");
    }
    for code in [15, 64, 78, 126, 127, 141, 255] {
        let f = only(judge(&e, &exited(code, "{}")));
        assert_eq!(f.message, format!("exit {code} is outside the table"));
    }
    let undeclared = only(judge(&e, &exited(80, "{}")));
    assert!(undeclared.message.contains("does not declare"), "{}", undeclared.message);
    let obs = exited(80, "{}");
    let mut resolved = Resolved::new(&e, &obs, text, duration, split, no_program);
    resolved.declared_exits = Some([0, 80].into_iter().collect());
    assert!(World::default().judge_with(&e, &obs, &resolved).is_empty());
    let killed = Parts { termination: Termination::TimedOut, ..Parts::default() }.build();
    assert_eq!(names(&judge(&e, &killed)), ["timeout", "exit-code"]);
}

#[test]
fn matches_calibrated_wants_a_failing_role_s_own_exit() {
    let e = expect(json!({ "matches_calibrated": true }));
    let failure = json!({ "ok": false, "data": null, "warnings": [],
        "error": { "code": "INPUT_NOT_TEXT", "message": "not text" },
        "meta": { "exit_code": 4, "duration_ms": 5 } });
    let world = World::default().calibrated(failure.clone(), "/tmp/calibration");
    assert!(world.judge(&e, &responding(failure.clone())).is_empty());
    // The failure's envelope relayed under exit 1 (or 0) is no match.
    for code in [0, 1] {
        let f = only(world.judge(&e, &exited(code, &failure.to_string())));
        assert_eq!(f.expected.as_deref(), Some("exit 4, as the --budget 0 run"));
    }
}

#[test]
fn differs_from_wants_random_looking_strings() {
    let id = |s: &str| responding(envelope(json!({ "id": s })));
    let e = expect(json!({ "differs_from": [{ "step": "first", "pointer": "/data/id" }] }));
    let world = World::default().with("first", id("job-0a1b2c3d4e5f6071"));
    assert!(world.judge(&e, &id("job-f9e8d7c6b5a49382")).is_empty());
    let f = only(world.judge(&e, &id("job-0a1b2c3d4e5f6072")));
    assert_eq!(f.check, "unlike");
    assert!(f.message.contains("in only 1 places"));
    let f = only(World::default().judge(&e, &id("x")));
    assert_eq!(f.message, "`/data/id` is not a string in this response and in step `first`'s");
}

#[test]
fn continues_verbatim_wants_the_invocation_maybe_with_a_key() {
    let e = expect(json!({ "continues_verbatim": true }));
    let continuing = |line: &str| responding(envelope(json!({ "continue_command": line })));
    assert!(judge(&e, &continuing("/bin/tool analyze a.csv")).is_empty());
    assert!(judge(&e, &continuing("/bin/tool analyze a.csv --idempotency-key k1")).is_empty());
    assert!(judge(&e, &continuing("/bin/tool analyze --idempotency-key=k1 a.csv")).is_empty());
    let f = only(judge(&e, &continuing("/bin/tool analyze b.csv")));
    assert_eq!(f.expected.as_deref(), Some("/bin/tool\nanalyze\na.csv"));
    assert_eq!(f.actual.as_deref(), Some("/bin/tool\nanalyze\nb.csv"));
    let f = only(judge(&e, &continuing("/bin/tool analyze (")));
    assert_eq!(f.message, "sh could not split `/bin/tool analyze (` into words");
    let f = only(judge(&e, &responding(envelope(json!({})))));
    assert_eq!(f.message, "the response has no `data.continue_command`");
    // A continuation run through `sh` is compared as the words of its own line.
    let shell = |own: &str| {
        Parts {
            stdout: envelope(json!({ "continue_command": "tool go --budget 1s" }))
                .to_string()
                .into_bytes(),
            command: ReproCommand::Shell(own.into()),
            ..Parts::default()
        }
        .build()
    };
    assert!(judge(&e, &shell("tool  go --budget 1s")).is_empty());
    assert_eq!(only(judge(&e, &shell("tool go on"))).check, "continue-command");
}

#[test]
fn stdout_comparisons_go_byte_for_byte() {
    let world = World::default().with("first", exited(0, "abc\n"));
    let same = expect(json!({ "same_stdout_as": "first" }));
    let differs = expect(json!({ "stdout_differs_from": "first" }));
    assert!(world.judge(&same, &exited(0, "abc\n")).is_empty());
    assert!(world.judge(&differs, &exited(0, "abd\n")).is_empty());
    let f = only(world.judge(&same, &exited(0, "abd\n")));
    assert_eq!(f.message, "stdout differs from step `first`'s from byte 2 on (4 vs 4 bytes)");
    assert_eq!(
        f.expected.as_deref(),
        Some("this step: analyze a.csv\nstep `first`: analyze a.csv\nstdout from byte 2: c\n")
    );
    let f = only(world.judge(&differs, &exited(0, "abc\n")));
    assert_eq!(f.message, "stdout is byte for byte step `first`'s (4 bytes)");
    let f = only(World::default().judge(&differs, &exited(0, "")));
    assert_eq!(
        (f.check.as_str(), f.message.as_str()),
        ("stdout-differs", "step `first` produced nothing to compare with")
    );
}

#[test]
fn data_comparisons_show_where_data_parts() {
    let data = |d: Value| responding(envelope(d));
    let world = World::default().with("first", data(json!({ "a": { "b": [1, 2] }, "c": 1 })));
    let same = expect(json!({ "same_data_as": "first" }));
    let differs = expect(json!({ "data_differs_from": "first" }));
    assert!(world.judge(&same, &data(json!({ "c": 1, "a": { "b": [1, 2] } }))).is_empty());
    assert!(world.judge(&differs, &data(json!({ "c": 2 }))).is_empty());
    let f = only(world.judge(&same, &data(json!({ "a": { "b": [1, 3] }, "c": 1 }))));
    assert_eq!(f.message, "`/data` differs from step `first`'s at `/data/a/b/1`");
    let f = only(world.judge(&differs, &data(json!({ "a": { "b": [1, 2] }, "c": 1 }))));
    assert_eq!(f.message, "`/data` is the same as step `first`'s");
    let f = only(world.judge(&differs, &responding(json!({ "ok": true }))));
    assert_eq!(f.message, "no `/data` to compare with step `first`'s");
    assert!(f.actual.unwrap().starts_with("this step's data: absent; "));
}

// ---- progress.rs ----

#[test]
fn progress_never_goes_back_within_a_job() {
    let at = |name: &'static str, job: &str, done: Value| {
        let r = envelope(json!({ "job_id": job, "progress": { "done": done } }));
        Parts { name, stdout: r.to_string().into_bytes(), ..Parts::default() }.build()
    };
    let e = expect(json!({ "progress_monotonic": true }));
    let world = World::default()
        .with("a", at("a", "j1", json!(3)))
        .with("b", at("b", "j2", json!(1)))
        .with("c", at("c", "j1", json!(3)));
    let current = world.history[2].clone();
    assert!(world.judge(&e, &current).is_empty());
    let world = world.with("d", at("d", "j1", json!(2))).with("e", at("e", "j1", json!(-1)));
    let current = world.history[4].clone();
    let found = world.judge(&e, &current);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert_eq!(found[0].message, "`data.progress.done` went back from 3 (step `c`) to 2");
    assert_eq!(found[0].step.as_deref(), Some("d"), "named where it went back");
    assert_eq!(found[1].message, "`data.progress.done` is not a whole number ≥ 0");
    assert_eq!(found[1].step.as_deref(), Some("e"));
}

#[test]
fn flat_hops_of_a_loop_that_succeeds_are_stalls() {
    // Hops `h#1`... answering 14 at each of `dones`, then one more ending with `exit`.
    const NAMES: [&str; 5] = ["h#1", "h#2", "h#3", "h#4", "h#5"];
    let hops = |dones: &[u64], exit: i32| {
        let mut runs: Vec<_> = dones
            .iter()
            .enumerate()
            .map(|(i, done)| {
                let data = json!({ "state": "running", "progress": { "done": done } });
                named_run(NAMES[i], 14, &envelope(data))
            })
            .collect();
        runs.push(named_run(NAMES[dones.len()], exit, &envelope(json!({ "rows": 9 }))));
        runs
    };
    let judged = |runs: &[_]| {
        let e = expect(json!({ "stalls_below": 3 }));
        check_all(&e, "h", &runs.iter().collect::<Vec<_>>(), &StepFacts::default())
    };
    let f = only(judged(&hops(&[5, 5, 5, 4], 0)));
    assert_eq!(f.check, "progress-stalls");
    assert_eq!(f.actual.as_deref(), Some("`h#2` at 5, `h#3` at 5, `h#4` at 4"));
    // Two stalls are below the limit; growth in between resets nothing but is no stall.
    assert!(judged(&hops(&[5, 5, 6, 6], 0)).is_empty());
    // A loop that did not end in success had its flat hops for a reason: not judged.
    assert!(judged(&hops(&[5, 5, 5, 5], 10)).is_empty());
}

// ---- stream.rs ----

#[test]
fn stream_keeps_the_rules_of_a_jsonl_stream() {
    let e = expect(json!({ "stream": true }));
    let good = "{\"n\":1}\n{\"heartbeat\":true}\n{\"_summary\":true}\n";
    assert!(judge(&e, &exited(0, good)).is_empty());
    let found = judge(&e, &exited(3, good));
    assert_eq!(only(found).message, "line 3: a summary, but the exit is 3");
    let found = judge(&e, &exited(0, "{\"n\":1}\nnot json\n"));
    assert!(found.len() >= 2 && found.iter().all(|f| f.check == "stream"), "{found:#?}");
    assert_eq!(found[0].expected.as_deref(), Some("a JSONL stream keeping REQ-O-004"));
    // Killed at its deadline: the runner says so, the stream check does not repeat it.
    let killed = Parts {
        termination: Termination::TimedOut,
        stdout: b"{\"n\":1}\n".to_vec(),
        ..Parts::default()
    }
    .build();
    assert_eq!(names(&judge(&e, &killed)).iter().filter(|n| **n == "stream").count(), 1);
}

// ---- manifest.rs ----

#[test]
fn manifest_rules_judge_the_manifest_in_the_response() {
    let manifest = |interruption: Value| {
        responding(json!({ "commands": { "analyze": {
            "danger_level": "safe", "interruption": interruption,
        } } }))
    };
    let e = expect(json!({ "manifest_rules": ["detach-or-resume"] }));
    assert!(judge(&e, &manifest(json!({ "detach": true, "resume": false }))).is_empty());
    let f = only(judge(&e, &manifest(json!({ "detach": false, "resume": false }))));
    assert_eq!(
        f.message,
        "command `analyze`: declares interruption with neither detach nor resume"
    );
    let f = only(judge(&e, &responding(json!({ "name": "tool" }))));
    assert_eq!(f.message, "the manifest has no `commands` object");
}

/// The manifest schema lets a command inherit its exit codes from the root `exit_codes`
/// table (a command lists only codes absent from it or differing from it): an INCOMPLETE
/// entry there counts for every interruptible command that lists none of its own, and the
/// command's own one, when it has one, is the one judged.
#[test]
fn manifest_rules_read_the_effective_exit_code_table() {
    let entry = |retryable: bool, side: &str| json!({ "description": "d", "retryable": retryable, "side_effects": side });
    let manifest = |root: Value, own: Value| {
        responding(json!({ "exit_codes": root, "commands": {
            "analyze": { "danger_level": "safe", "exit_codes": own,
                         "interruption": { "detach": true, "resume": true } },
            "import": { "danger_level": "mutating", "exit_codes": { "14": entry(false, "partial") },
                        "interruption": { "detach": false, "resume": true } },
        } }))
    };
    let e = expect(json!({ "manifest_rules": ["incomplete-entry", "incomplete-entry-shape"] }));
    let inherited = manifest(json!({ "14": entry(true, "none") }), json!({}));
    assert!(judge(&e, &inherited).is_empty(), "{:#?}", judge(&e, &inherited));
    // Neither table has it.
    let f = only(judge(&e, &manifest(json!({ "0": entry(false, "complete") }), json!({}))));
    assert!(f.message.starts_with("command `analyze`: declares interruption"), "{}", f.message);
    assert_eq!(f.actual.as_deref(), Some("exit_codes keys: none; root exit_codes keys: 0"));
    // The command's own entry overrides the root's, and is the one whose shape is judged.
    let wrong =
        manifest(json!({ "14": entry(true, "none") }), json!({ "14": entry(false, "partial") }));
    let f = only(judge(&e, &wrong));
    assert_eq!(
        f.message,
        "command `analyze`: the \"14\" entry of a safe command has the wrong shape"
    );
    // What conform learns of the commands reads the same table.
    let commands = crate::discover::Commands::from_manifest(&inherited.json.clone().unwrap());
    let analyze = &commands.by_path["analyze"];
    assert_eq!(analyze.incomplete_retryable, Some(true));
    assert!(analyze.exit_codes.contains(&14));
}

// ---- continues_verbatim: the choices the spec leaves open ----

/// A directory with a program `bin/tool`, a link `link/tool` to it, another program
/// `bin/other`, a script `cli.py`, and a `PATH` directory whose `tool` links to `bin/tool`.
struct Programs {
    dir: tempfile::TempDir,
}

impl Programs {
    fn new() -> Self {
        use std::os::unix::fs::{PermissionsExt as _, symlink};
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for sub in ["bin", "link", "path"] {
            std::fs::create_dir(root.join(sub)).unwrap();
        }
        for file in ["bin/tool", "bin/other"] {
            std::fs::write(root.join(file), "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(root.join(file), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        std::fs::write(root.join("cli.py"), "print()\n").unwrap();
        symlink(root.join("bin/tool"), root.join("link/tool")).unwrap();
        symlink(root.join("bin/tool"), root.join("path/tool")).unwrap();
        Programs { dir }
    }

    fn at(&self, rel: &str) -> String {
        self.dir.path().join(rel).display().to_string()
    }

    /// The findings of `continues_verbatim` for a call `argv` (run in the directory) that
    /// answered `line`, with `PATH` the directory's `path/` (or nothing).
    fn judge(&self, argv: &[String], line: &str, on_path: bool) -> Vec<Finding> {
        let e = expect(json!({ "continues_verbatim": true }));
        let obs = Parts {
            stdout: envelope(json!({ "continue_command": line })).to_string().into_bytes(),
            command: ReproCommand::Argv(argv.to_vec()),
            ..Parts::default()
        }
        .build();
        let path = self.dir.path().join("path");
        let locate = |w: &str, naming| {
            locate_program(w, naming, self.dir.path(), on_path.then_some(path.as_os_str()))
        };
        let resolved = Resolved::new(&e, &obs, text, duration, split, locate);
        World::default().judge_with(&e, &obs, &resolved)
    }
}

fn words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn continues_verbatim_accepts_the_program_named_another_way() {
    let p = Programs::new();
    let through_link = words(&format!("{} analyze a.csv", p.at("link/tool")));
    // The file the link points to, and the bare name an installed tool prints.
    assert!(
        p.judge(&through_link, &format!("{} analyze a.csv", p.at("bin/tool")), false).is_empty()
    );
    assert!(p.judge(&through_link, "tool analyze a.csv", true).is_empty());
    // A bare name nowhere on PATH names nothing.
    let f = only(p.judge(&through_link, "tool analyze a.csv", false));
    assert!(f.message.contains("another program"), "{}", f.message);
    // A script run by its #! line, continued through its interpreter, and the other way round.
    let script = words(&format!("{} count w.txt", p.at("cli.py")));
    assert!(p.judge(&script, &format!("/bin/sh {} count w.txt", p.at("cli.py")), false).is_empty());
    let interpreted = words("/bin/sh cli.py count w.txt");
    assert!(
        p.judge(&interpreted, &format!("/bin/sh {} count w.txt", p.at("cli.py")), false).is_empty()
    );
    assert!(p.judge(&interpreted, &format!("{} count w.txt", p.at("cli.py")), false).is_empty());
}

#[test]
fn continues_verbatim_still_fails_another_program() {
    let p = Programs::new();
    let call = words(&format!("{} analyze a.csv", p.at("bin/tool")));
    let f = only(p.judge(&call, &format!("{} analyze a.csv", p.at("bin/other")), true));
    assert_eq!(f.check, "continue-command");
    assert!(f.message.contains("another program"), "{}", f.message);
    // A name that is the program's but runs something else through an interpreter.
    let f = only(p.judge(&call, &format!("/bin/sh {} analyze a.csv", p.at("bin/other")), true));
    assert!(f.message.contains("another program"), "{}", f.message);
    // An argument naming a file does not make a program of it.
    let with_file = words(&format!("{} cli.py", p.at("bin/tool")));
    assert_eq!(
        only(p.judge(&with_file, &format!("{} cli.py", p.at("bin/other")), true)).check,
        "continue-command"
    );
}

#[test]
fn continues_verbatim_accepts_the_budget_pair_either_way() {
    let p = Programs::new();
    let tool = p.at("bin/tool");
    let with_budget = words(&format!("{tool} analyze a.csv --budget 300ms"));
    for line in [
        format!("{tool} analyze a.csv"),
        format!("{tool} analyze a.csv --budget 300ms"),
        format!("{tool} analyze --budget=1s a.csv"),
    ] {
        assert!(p.judge(&with_budget, &line, false).is_empty(), "{line}");
    }
    let without = words(&format!("{tool} analyze a.csv"));
    assert!(p.judge(&without, &format!("{tool} analyze a.csv --budget 300ms"), false).is_empty());
}

#[test]
fn continues_verbatim_still_fails_other_missing_arguments_and_a_dropped_key() {
    let p = Programs::new();
    let tool = p.at("bin/tool");
    let call = words(&format!("{tool} analyze a.csv --budget 300ms"));
    for line in [
        format!("{tool} analyze b.csv"),
        format!("{tool} analyze"),
        format!("{tool} analyze a.csv --verbose"),
        format!("{tool} a.csv analyze"),
    ] {
        let f = only(p.judge(&call, &line, false));
        assert!(f.message.contains("other arguments"), "{line}: {}", f.message);
    }
    // A key the caller gave must come back as it was; one the call lacked may be added.
    let keyed = words(&format!("{tool} import r.csv --idempotency-key k1"));
    assert!(
        p.judge(&keyed, &format!("{tool} import r.csv --idempotency-key=k1"), false).is_empty()
    );
    for line in
        [format!("{tool} import r.csv"), format!("{tool} import r.csv --idempotency-key k2")]
    {
        let f = only(p.judge(&keyed, &line, false));
        assert!(f.message.contains("idempotency key"), "{line}: {}", f.message);
    }
    let unkeyed = words(&format!("{tool} import r.csv"));
    assert!(
        p.judge(&unkeyed, &format!("{tool} import r.csv --idempotency-key k9"), false).is_empty()
    );
}

// ---- the §79 audit's rule over the catalogue ----

/// The requirements whose scenarios the audit went through.
const AUDITED: &[&str] = &[
    "REQ-F-080",
    "REQ-F-081",
    "REQ-F-082",
    "REQ-C-033",
    "REQ-C-034",
    "REQ-C-035",
    "REQ-C-007",
    "REQ-C-022",
    "REQ-F-069",
];

fn audited_scenarios() -> Vec<crate::scenario::Scenario> {
    let catalogue = crate::scenario::Catalogue::embedded().unwrap();
    catalogue.scenarios.into_iter().filter(|s| AUDITED.contains(&s.requirement.as_str())).collect()
}

#[test]
fn every_audited_scenario_cites_the_requirement_behind_it() {
    let uncited: Vec<String> = audited_scenarios()
        .into_iter()
        .filter(|s| s.id != "manifest-valid")
        .filter(|s| {
            let notes = s.notes.as_deref().unwrap_or_default();
            !(notes.contains("REQ-") || notes.contains("docs/contract.md §"))
        })
        .map(|s| s.id)
        .collect();
    assert!(uncited.is_empty(), "scenarios whose notes cite no requirement: {uncited:?}");
}

#[test]
fn no_scenario_requires_meta_idempotency_hit() {
    // REQ-C-007's criteria are `effect: "noop"` and the original data; the flag is only in
    // its wire example.
    let catalogue = crate::scenario::Catalogue::embedded().unwrap();
    for s in &catalogue.scenarios {
        for e in s.steps.iter().filter_map(crate::scenario::Step::expect) {
            for check in &e.json {
                assert!(!check.pointer.contains("idempotency_hit"), "{}: {}", s.id, check.pointer);
            }
        }
    }
}

#[test]
fn no_audited_scenario_needs_a_new_job_id_after_a_cancel() {
    // Ids derived from the invocation are legal: a restart after a cancel may keep the id.
    for s in audited_scenarios() {
        let cancels_at =
            s.steps.iter().position(|step| matches!(step, crate::scenario::Step::Cancel(_)));
        let Some(cancel) = cancels_at else { continue };
        for e in s.steps[cancel..].iter().filter_map(crate::scenario::Step::expect) {
            for check in e.json.iter().filter(|c| c.pointer == "/data/job_id") {
                let wanted = serde_json::to_value(check).unwrap();
                let differs = wanted.get("not_equals").is_some_and(|v| !v.is_null());
                assert!(!differs, "{}: {wanted}", s.id);
            }
        }
    }
}
