//! The kit of the checks' unit tests: observations built from parts, a context of plain data
//! (no process runs, no tool is needed), and the tests of the table of checks as a whole. Each
//! check's own tests sit beside it, in its family module (`use crate::checks::tests::*`).

pub(super) use std::cell::RefCell;
pub(super) use std::collections::{BTreeMap, BTreeSet};
pub(super) use std::path::PathBuf;
pub(super) use std::time::Duration;

pub(super) use serde_json::{Value, json};

pub(super) use super::*;
pub(super) use crate::embedded::SCHEMA_FILES;
pub(super) use crate::exec::{Captured, Outcome, Termination};
pub(super) use crate::observe::{Observation, StdoutProblem, parse_stdout};
pub(super) use crate::outcome::{Finding, Repro, ReproCommand, ReproStdin, StepRecord};
pub(super) use crate::scenario::{Expect, Var, walk_template};

/// The parts of an observation a check can look at.
pub(super) struct Parts {
    pub(super) name: &'static str,
    pub(super) termination: Termination,
    pub(super) stdout: Vec<u8>,
    pub(super) stderr: Vec<u8>,
    pub(super) elapsed_ms: u64,
    pub(super) pipes_closed_after_ms: Option<u64>,
    /// `None`: stdout parsed as one JSON document, as the runner does.
    pub(super) json: Option<Result<Value, StdoutProblem>>,
    pub(super) command: ReproCommand,
    pub(super) sandbox_root: &'static str,
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
    pub(super) fn build(self) -> Observation {
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
pub(super) fn exited(code: i32, stdout: &str) -> Observation {
    Parts {
        termination: Termination::Exited(code),
        stdout: stdout.as_bytes().to_vec(),
        ..Parts::default()
    }
    .build()
}

/// The run `name` of a step (a hop, a copy) that exited with `code` after answering `response`.
pub(super) fn named_run(name: &'static str, code: i32, response: &Value) -> Observation {
    Parts {
        name,
        termination: Termination::Exited(code),
        stdout: response.to_string().into_bytes(),
        ..Parts::default()
    }
    .build()
}

/// A process that answered `response` on stdout with its `meta.exit_code` (0 if none).
pub(super) fn responding(response: Value) -> Observation {
    let code = response.pointer("/meta/exit_code").and_then(Value::as_i64).unwrap_or(0);
    exited(i32::try_from(code).unwrap(), &response.to_string())
}

/// A valid success envelope with this `data`.
pub(super) fn envelope(data: Value) -> Value {
    json!({ "ok": true, "data": data, "error": null, "warnings": [],
            "meta": { "exit_code": 0, "duration_ms": 5 } })
}

pub(super) fn expect(v: Value) -> Expect {
    serde_json::from_value(v).unwrap()
}

/// Templates the test resolver knows: `{budget}` is 42, `{@first/data/id}` is `abc`.
pub(super) fn text(template: &str) -> Result<String, String> {
    walk_template(template, |var| match var {
        Var::Calibration(name) if name == "budget" => Some("42".into()),
        Var::StepValue { step, pointer } if step == "first" && pointer == "/data/id" => {
            Some("abc".into())
        }
        _ => None,
    })
}

/// `Nms` or `Ns`; anything else fails.
pub(super) fn duration(expr: &str) -> Result<Duration, String> {
    let bad = || format!("not a duration: {expr}");
    if let Some(ms) = expr.strip_suffix("ms") {
        return ms.parse().map(Duration::from_millis).map_err(|_| bad());
    }
    let s = expr.strip_suffix('s').ok_or_else(bad)?;
    s.parse().map(Duration::from_secs).map_err(|_| bad())
}

/// Words by whitespace (what `sh` makes of lines without quotes); a `(` fails, as `sh` would.
pub(super) fn split(line: &str) -> Result<Vec<String>, String> {
    if line.contains('(') {
        return Err(format!("sh could not split `{line}` into words"));
    }
    Ok(line.split_whitespace().map(str::to_owned).collect())
}

/// No word names a program file (the checks then compare program words as words).
pub(super) fn no_program(_: &str, _: Naming) -> Option<PathBuf> {
    None
}

/// The scenario as the checks see it: earlier observations and the calibrated response.
#[derive(Default)]
pub(super) struct World {
    pub(super) history: Vec<Observation>,
    pub(super) last: BTreeMap<String, usize>,
    pub(super) calibrated: Option<(Value, PathBuf)>,
}

impl World {
    /// With `obs` as the last observation of step `step`.
    pub(super) fn with(mut self, step: &str, obs: Observation) -> Self {
        self.history.push(obs);
        self.last.insert(step.to_owned(), self.history.len() - 1);
        self
    }

    pub(super) fn calibrated(mut self, response: Value, root: &str) -> Self {
        self.calibrated = Some((response, PathBuf::from(root)));
        self
    }

    pub(super) fn judge_with(
        &self,
        expect: &Expect,
        obs: &Observation,
        resolved: &Resolved,
    ) -> Vec<Finding> {
        let calibrated = match &self.calibrated {
            Some((v, root)) => Ok((v, root.as_path())),
            None => Err("the scenario has no calibrated role".to_owned()),
        };
        check_one(expect, obs, &resolved.context(&self.history, &self.last, calibrated))
    }

    /// `check_one`, with the context resolved by the test resolvers.
    pub(super) fn judge(&self, expect: &Expect, obs: &Observation) -> Vec<Finding> {
        self.judge_with(expect, obs, &Resolved::new(expect, obs, text, duration, split, no_program))
    }
}

pub(super) fn judge(expect: &Expect, obs: &Observation) -> Vec<Finding> {
    World::default().judge(expect, obs)
}

pub(super) fn names(findings: &[Finding]) -> Vec<&str> {
    findings.iter().map(|f| f.check.as_str()).collect()
}

/// The one finding there is.
pub(super) fn only(findings: Vec<Finding>) -> Finding {
    assert_eq!(findings.len(), 1, "{findings:#?}");
    findings.into_iter().next().unwrap()
}

// ---- the table ----

pub(super) fn schema_keys() -> BTreeSet<String> {
    let (_, text) = SCHEMA_FILES.iter().find(|(f, _)| *f == "scenario.json").unwrap();
    let schema: Value = serde_json::from_str(text).unwrap();
    schema["definitions"]["Expect"]["properties"].as_object().unwrap().keys().cloned().collect()
}

pub(super) fn table_keys() -> BTreeSet<String> {
    CHECKS.iter().filter_map(|c| c.key).map(str::to_owned).collect()
}

#[test]
pub(super) fn the_table_has_one_row_for_every_key_of_expect() {
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
pub(super) fn sample(key: &str) -> Value {
    match key {
        "exit" => json!(0),
        "exit_not" => json!([1]),
        "schema" => json!("envelope"),
        "json" => json!([{ "pointer": "/ok", "equals": true }]),
        "elapsed_max"
        | "elapsed_min"
        | "watched_progress_grows_within"
        | "waited_progress_grows_within"
        | "exit_after_signal_max" => json!("1s"),
        "same" | "same_among_handoffs" => json!(["/ok"]),
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
pub(super) fn each_key_alone_turns_on_its_row_and_no_other() {
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
pub(super) fn the_checks_that_need_a_response_are_those_that_always_did() {
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
pub(super) fn findings_come_in_the_order_of_the_table() {
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
pub(super) fn stdout_without_a_response_is_one_finding_however_many_checks_need_one() {
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
pub(super) fn each_kind_of_stdout_problem_has_its_own_finding() {
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
pub(super) fn the_step_stage_resolves_everything_the_checks_ask_for() {
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
pub(super) fn what_the_step_stage_did_not_resolve_is_a_finding_about_conform() {
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
pub(super) fn only_continues_verbatim_asks_sh_for_words() {
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
