//! Stage: checks. Judges what a step did against its `expect` table.
//!
//! Every check is independent and produces [`Finding`]s (data, never panics); a check whose
//! subject is missing (no JSON on stdout, a pointer that is not there) says so as a finding.
//! The vocabulary is listed in the manual (crate docs, "Checks").

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

use crate::discover::{check_rule, compact};
use crate::exec::{Outcome, Termination};
use crate::outcome::{Finding, ReproCommand, StepRecord, millis};
use crate::redact::Redactor;
use crate::scenario::{Expect, PointerCheck, Stream, UNLIKE_MIN_CHARS, template_vars};
use crate::schemas;

/// After the process exited, stdout and stderr must reach end-of-file within this long for the
/// caller to count as released (generous: the machine may be busy).
pub const PIPE_RELEASE_GRACE: Duration = Duration::from_millis(1000);

/// Why stdout did not hold one JSON document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdoutProblem {
    /// Nothing was written.
    Empty,
    /// The bytes are not UTF-8 (at this offset).
    NotUtf8(usize),
    /// The text is not exactly one JSON document.
    NotJson(String),
    /// More was written than conform keeps.
    Truncated(u64),
    /// A stream step's stdout has no terminal line (its response).
    NoStreamTerminal,
}

/// One process a step ran, with stdout already parsed.
#[derive(Debug, Clone)]
pub struct Observation {
    /// The evidence (name, repro, excerpts).
    pub record: StepRecord,
    /// What the driver saw.
    pub outcome: Outcome,
    /// stdout as one JSON document, or why not.
    pub json: Result<Value, StdoutProblem>,
    /// The sandbox root it ran in (for redaction).
    pub sandbox_root: std::path::PathBuf,
}

impl Observation {
    /// The exit code, when the process exited by itself.
    pub fn exit_code(&self) -> Option<i32> {
        match self.outcome.termination {
            Termination::Exited(c) => Some(c),
            Termination::Signaled(_) | Termination::TimedOut => None,
        }
    }

    /// The parsed response, if stdout held one.
    pub fn response(&self) -> Option<&Value> {
        self.json.as_ref().ok()
    }

    /// A string at a pointer of the response.
    pub fn str_at(&self, pointer: &str) -> Option<&str> {
        self.response()?.pointer(pointer)?.as_str()
    }
}

/// Parses stdout as exactly one JSON document.
pub fn parse_stdout(outcome: &Outcome) -> Result<Value, StdoutProblem> {
    if outcome.stdout.truncated() {
        return Err(StdoutProblem::Truncated(outcome.stdout.total_len));
    }
    let bytes = &outcome.stdout.bytes;
    let text = std::str::from_utf8(bytes).map_err(|e| StdoutProblem::NotUtf8(e.valid_up_to()))?;
    if text.trim().is_empty() {
        return Err(StdoutProblem::Empty);
    }
    serde_json::from_str(text).map_err(|e| StdoutProblem::NotJson(e.to_string()))
}

fn stdout_finding(problem: &StdoutProblem, obs: &Observation) -> Finding {
    let excerpt = obs.record.stdout.text.chars().take(300).collect::<String>();
    match problem {
        StdoutProblem::Empty => Finding::new("stdout-not-json", "stdout is empty")
            .expected("one JSON envelope on stdout")
            .actual("nothing"),
        StdoutProblem::NotUtf8(at) => Finding::new(
            "stdout-not-utf8",
            format!("stdout is not UTF-8 (bad byte at offset {at})"),
        )
        .expected("one JSON envelope on stdout")
        .actual(excerpt),
        StdoutProblem::NotJson(e) => {
            Finding::new("stdout-not-json", format!("stdout is not one JSON document: {e}"))
                .expected("one JSON envelope on stdout")
                .actual(excerpt)
        }
        StdoutProblem::Truncated(n) => Finding::new(
            "stdout-not-json",
            format!("stdout is {n} bytes, more than conform keeps; not one envelope"),
        ),
        StdoutProblem::NoStreamTerminal => Finding::new(
            "stdout-not-json",
            "the stream has no terminal line (a `_summary` or an error envelope) to judge",
        )
        .expected("a stream ending in a terminal line")
        .actual(excerpt),
    }
}

/// What the checks need from the running scenario.
pub trait Resolve {
    /// Evaluates a duration expression (`{budget} + {slack}`).
    fn duration(&self, expr: &str) -> Result<Duration, String>;
    /// Interpolates a template (`{@call/data/job_id}`).
    fn text(&self, template: &str) -> Result<String, String>;
    /// The last observation of an earlier step.
    fn last_of(&self, step: &str) -> Option<&Observation>;
    /// Every observation of the scenario so far, in order (this step's included).
    fn history(&self) -> &[Observation];
    /// The calibrated response of the role this step ran, with its sandbox root.
    fn calibrated(&self) -> Result<(&Value, &std::path::Path), String>;
    /// The words `sh` makes of a command line (without running the command).
    fn shell_words(&self, line: &str) -> Result<Vec<String>, String>;
}

/// Judges one observation of a step (a copy, or the last hop of a loop) against `expect`.
pub fn check_one(expect: &Expect, obs: &Observation, resolve: &dyn Resolve) -> Vec<Finding> {
    let mut findings = Vec::new();
    let step = obs.record.name.clone();
    let ended = obs.record.ended.to_string();

    if let Some(spec) = &expect.exit {
        let codes = spec.codes();
        if !obs.exit_code().is_some_and(|c| codes.contains(&c)) {
            findings.push(
                Finding::new("exit-code", format!("{ended}, expected {}", show_codes(&codes)))
                    .expected(show_codes(&codes))
                    .actual(ended.clone()),
            );
        }
    }
    if !expect.exit_not.is_empty() {
        match obs.exit_code() {
            Some(c) if expect.exit_not.contains(&c) => findings.push(
                Finding::new("exit-code", format!("exit {c} is one it must not be"))
                    .expected(format!("not {}", show_codes(&expect.exit_not)))
                    .actual(ended.clone()),
            ),
            Some(_) => {}
            None => findings.push(
                Finding::new("exit-code", format!("the process did not exit by itself ({ended})"))
                    .expected(format!("an exit code other than {}", show_codes(&expect.exit_not)))
                    .actual(ended.clone()),
            ),
        }
    }

    if obs.outcome.termination == Termination::TimedOut {
        findings.push(
            Finding::new(
                "timeout",
                format!(
                    "the step outlived its limit (the scenario's, or the profile's kit timeout_seconds) and its process group was killed after {} ms",
                    millis(obs.outcome.elapsed)
                ),
            )
            .expected("the command ends by itself")
            .actual("still running at the limit"),
        );
    }
    if expect.stream == Some(true) {
        findings.extend(stream_findings(obs));
    }
    findings.extend(output_comparisons(expect, obs, resolve));
    let needs_json = expect.schema.is_some()
        || expect.same_data_as.is_some()
        || expect.data_differs_from.is_some()
        || expect.continues_verbatim == Some(true)
        || !expect.differs_from.is_empty()
        || !expect.json.is_empty()
        || expect.matches_calibrated == Some(true)
        || expect.same_response_as.is_some()
        || !expect.same.is_empty()
        || !expect.manifest_rules.is_empty();
    if needs_json {
        match &obs.json {
            Err(problem) => findings.push(stdout_finding(problem, obs)),
            Ok(response) => json_checks(expect, obs, response, resolve, &mut findings),
        }
    }

    if let Some(expr) = &expect.elapsed_max {
        match resolve.duration(expr) {
            Ok(max) if obs.outcome.elapsed > max => findings.push(
                Finding::new(
                    "elapsed",
                    format!(
                        "took {} ms, more than {expr} = {} ms",
                        millis(obs.outcome.elapsed),
                        millis(max)
                    ),
                )
                .expected(format!("≤ {} ms", millis(max)))
                .actual(format!("{} ms", millis(obs.outcome.elapsed))),
            ),
            Ok(_) => {}
            Err(e) => findings.push(Finding::new("elapsed", e)),
        }
    }
    if let Some(expr) = &expect.elapsed_min {
        match resolve.duration(expr) {
            Ok(min) if obs.outcome.elapsed < min => findings.push(
                Finding::new(
                    "elapsed",
                    format!(
                        "took {} ms, less than {expr} = {} ms",
                        millis(obs.outcome.elapsed),
                        millis(min)
                    ),
                )
                .expected(format!("≥ {} ms", millis(min)))
                .actual(format!("{} ms", millis(obs.outcome.elapsed))),
            ),
            Ok(_) => {}
            Err(e) => findings.push(Finding::new("elapsed", e)),
        }
    }
    if expect.pipes_released == Some(true) {
        match obs.outcome.pipes_closed_after {
            Some(closed) if closed <= obs.outcome.elapsed + PIPE_RELEASE_GRACE => {}
            Some(closed) => findings.push(
                Finding::new(
                    "pipes-released",
                    format!(
                        "stdout/stderr closed {} ms after the process exited",
                        millis(closed.saturating_sub(obs.outcome.elapsed))
                    ),
                )
                .expected(format!("closed within {} ms of the exit", millis(PIPE_RELEASE_GRACE)))
                .actual(format!("closed after {} ms", millis(closed))),
            ),
            None => findings.push(
                Finding::new(
                    "pipes-released",
                    "stdout/stderr stayed open after the process exited: the caller is not released",
                )
                .expected("end-of-file on stdout and stderr when the command returns")
                .actual(format!("still open after the exit at {} ms", millis(obs.outcome.elapsed))),
            ),
        }
    }
    for stream in &expect.no_ansi {
        let (label, captured) = match stream {
            Stream::Stdout => ("stdout", &obs.outcome.stdout),
            Stream::Stderr => ("stderr", &obs.outcome.stderr),
        };
        if let Some(at) = captured.bytes.windows(2).position(|w| w == b"\x1b[") {
            let from = at.saturating_sub(40);
            let excerpt =
                String::from_utf8_lossy(&captured.bytes[from..(at + 40).min(captured.bytes.len())])
                    .replace('\x1b', "\\e");
            findings.push(
                Finding::new("ansi", format!("{label} holds an ANSI escape sequence at byte {at}"))
                    .expected(format!("plain text on {label}"))
                    .actual(excerpt),
            );
        }
    }
    if expect.progress_monotonic == Some(true) {
        findings.extend(progress_findings(resolve.history()));
    }
    if expect.no_prose == Some(true) {
        match &obs.json {
            Ok(_) | Err(StdoutProblem::Empty) => {}
            Err(_) => findings.push(
                Finding::new("prose", "stdout holds text that is not one JSON document")
                    .expected("nothing on stdout, or one JSON document (prose belongs on stderr)")
                    .actual(obs.record.stdout.text.chars().take(300).collect::<String>()),
            ),
        }
    }
    findings
        .into_iter()
        .map(|f| if f.step.is_some() { f } else { f.at_step(step.clone()) })
        .collect()
}

fn json_checks(
    expect: &Expect,
    obs: &Observation,
    response: &Value,
    resolve: &dyn Resolve,
    findings: &mut Vec<Finding>,
) {
    if let Some(spec) = &expect.schema {
        for name in spec.names() {
            match schemas::violations(name, response) {
                Ok(v) if v.is_empty() => {}
                Ok(v) => findings.push(
                    Finding::new(
                        "schema",
                        format!("the response does not validate against {}", name.file()),
                    )
                    .expected(format!("a valid {}", name.file()))
                    .actual(v.iter().take(8).cloned().collect::<Vec<_>>().join("\n")),
                ),
                Err(e) => findings.push(Finding::new("schema", e.to_string())),
            }
        }
    }
    for check in &expect.json {
        pointer_check(check, response, resolve, findings);
    }
    if expect.continues_verbatim == Some(true) {
        findings.extend(continues_verbatim(obs, response, resolve));
    }
    for d in &expect.differs_from {
        let mine = response.pointer(&d.pointer).and_then(Value::as_str);
        let theirs = resolve.last_of(&d.step).and_then(|o| o.str_at(&d.pointer));
        match (mine, theirs) {
            (Some(a), Some(b)) => {
                let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
                let differing = (0..a.len().max(b.len())).filter(|&i| a.get(i) != b.get(i)).count();
                if differing < UNLIKE_MIN_CHARS {
                    findings.push(
                        Finding::new(
                            "unlike",
                            format!(
                                "`{}` differs from step `{}`'s in only {differing} places: it looks counted or timed, not random",
                                d.pointer, d.step
                            ),
                        )
                        .expected(format!("at least {UNLIKE_MIN_CHARS} differing characters"))
                        .actual(format!("{} vs {}", a.iter().collect::<String>(), b.iter().collect::<String>())),
                    );
                }
            }
            _ => findings.push(Finding::new(
                "unlike",
                format!(
                    "`{}` is not a string in this response and in step `{}`'s",
                    d.pointer, d.step
                ),
            )),
        }
    }
    for rule in &expect.manifest_rules {
        findings.extend(check_rule(*rule, response));
    }
    if expect.matches_calibrated == Some(true) {
        match resolve.calibrated() {
            Ok((calibrated, root)) => {
                let want = core(&Redactor::new().with_sandbox_root(root).redact(calibrated));
                let got =
                    core(&Redactor::new().with_sandbox_root(&obs.sandbox_root).redact(response));
                if want != got {
                    findings.push(
                        Finding::new(
                            "calibrated-equality",
                            "the response differs from the one the work gives with --budget 0",
                        )
                        .expected(pretty(&want))
                        .actual(pretty(&got)),
                    );
                }
            }
            Err(e) => findings.push(Finding::new("calibrated-equality", e)),
        }
    }
    if let Some(other) = &expect.same_response_as {
        findings.extend(same_response(obs, response, other, resolve.last_of(other)));
    }
}

/// `stream = true`: one finding per broken rule of the stream (see [`crate::stream`]). Being
/// killed at the deadline is the runner's `stream-deadline` finding, not repeated here.
fn stream_findings(obs: &Observation) -> Vec<Finding> {
    let mut problems = Vec::new();
    if obs.outcome.stdout.truncated() {
        problems.push(format!(
            "stdout is {} bytes, more than conform keeps: the end of the stream was not seen",
            obs.outcome.stdout.total_len
        ));
    }
    let parsed = crate::stream::parse(&obs.outcome.stdout.bytes);
    problems.extend(parsed.problems.iter().map(ToString::to_string));
    if obs.outcome.termination != Termination::TimedOut {
        let ended = crate::stream::exit_problems(&parsed, obs.outcome.termination);
        problems.extend(ended.iter().map(ToString::to_string));
    }
    problems
        .into_iter()
        .map(|message| {
            Finding::new("stream", message)
                .expected("a JSONL stream keeping REQ-O-004")
                .actual(obs.record.stdout.text.chars().take(300).collect::<String>())
        })
        .collect()
}

/// The invocation of an observation, as words (for findings comparing two steps).
fn invocation_words(obs: &Observation) -> String {
    match &obs.record.repro.command {
        ReproCommand::Argv(argv) => argv.iter().skip(1).cloned().collect::<Vec<_>>().join(" "),
        ReproCommand::Shell(line) => line.clone(),
    }
}

/// `same_stdout_as`, `stdout_differs_from`, `same_data_as`, `data_differs_from`: this
/// observation against the last one of an earlier step; each finding shows both invocations
/// and where they part.
fn output_comparisons(expect: &Expect, obs: &Observation, resolve: &dyn Resolve) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mine = invocation_words(obs);
    let missing = |check: &str, other: &str| {
        Finding::new(check, format!("step `{other}` produced nothing to compare with"))
    };
    for (key, other) in expect.output_references() {
        let Some(theirs) = resolve.last_of(other) else {
            let check = key.replace('_', "-");
            findings.push(missing(&check, other));
            continue;
        };
        let both = format!(
            "this step: {mine}
step `{other}`: {}",
            invocation_words(theirs)
        );
        match key {
            "same_stdout_as" | "stdout_differs_from" => {
                let (a, b) = (&obs.outcome.stdout.bytes, &theirs.outcome.stdout.bytes);
                let equal = a == b && !obs.outcome.stdout.truncated();
                if key == "same_stdout_as" && !equal {
                    let at = a
                        .iter()
                        .zip(b.iter())
                        .position(|(x, y)| x != y)
                        .unwrap_or(a.len().min(b.len()));
                    findings.push(
                        Finding::new(
                            "same-stdout",
                            format!(
                                "stdout differs from step `{other}`'s from byte {at} on ({} vs {} bytes)",
                                a.len(),
                                b.len()
                            ),
                        )
                        .expected(format!("{both}
stdout from byte {at}: {}", bytes_excerpt(b, at)))
                        .actual(format!("stdout from byte {at}: {}", bytes_excerpt(a, at))),
                    );
                } else if key == "stdout_differs_from" && equal {
                    findings.push(
                        Finding::new(
                            "stdout-differs",
                            format!("stdout is byte for byte step `{other}`'s ({} bytes)", a.len()),
                        )
                        .expected(format!(
                            "{both}
different stdout"
                        ))
                        .actual(bytes_excerpt(a, 0)),
                    );
                }
            }
            _ => {
                let my_data = obs.response().and_then(|r| r.get("data"));
                let their_data = theirs.response().and_then(|r| r.get("data"));
                let (Some(a), Some(b)) = (my_data, their_data) else {
                    let check = if key == "same_data_as" { "same-data" } else { "data-differs" };
                    findings.push(
                        Finding::new(check, format!("no `/data` to compare with step `{other}`'s"))
                            .expected(both)
                            .actual(format!(
                                "this step's data: {}; step `{other}`'s: {}",
                                my_data.map_or_else(|| "absent".into(), compact),
                                their_data.map_or_else(|| "absent".into(), compact)
                            )),
                    );
                    continue;
                };
                if key == "same_data_as" && a != b {
                    let at = first_difference(a, b, String::new());
                    findings.push(
                        Finding::new(
                            "same-data",
                            format!("`/data` differs from step `{other}`'s at `/data{at}`"),
                        )
                        .expected(format!(
                            "{both}
{}",
                            excerpt_of(b)
                        ))
                        .actual(excerpt_of(a)),
                    );
                } else if key == "data_differs_from" && a == b {
                    findings.push(
                        Finding::new(
                            "data-differs",
                            format!("`/data` is the same as step `{other}`'s"),
                        )
                        .expected(format!(
                            "{both}
a different `/data`"
                        ))
                        .actual(excerpt_of(a)),
                    );
                }
            }
        }
    }
    findings
}

/// The pointer (below the compared values) of the first place two JSON values differ.
fn first_difference(a: &Value, b: &Value, at: String) -> String {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let here = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) if p == q => {}
                    (Some(p), Some(q)) => return first_difference(p, q, here),
                    _ => return here,
                }
            }
            at
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                if p != q {
                    return first_difference(p, q, format!("{at}/{i}"));
                }
            }
            format!("{at}/{}", x.len().min(y.len()))
        }
        _ => at,
    }
}

fn excerpt_of(v: &Value) -> String {
    compact(v).chars().take(400).collect()
}

/// Up to 80 bytes of `bytes` from `at`, lossily as text.
fn bytes_excerpt(bytes: &[u8], at: usize) -> String {
    let end = (at + 80).min(bytes.len());
    let part = bytes.get(at..end).unwrap_or_default();
    if part.is_empty() {
        "(nothing)".to_owned()
    } else {
        String::from_utf8_lossy(part).into_owned()
    }
}

/// `same_response_as`: after redaction, `response` (of `obs`) equals the response of `theirs`,
/// an observation of step `other`.
pub fn same_response(
    obs: &Observation,
    response: &Value,
    other: &str,
    theirs: Option<&Observation>,
) -> Option<Finding> {
    match theirs.map(|o| (o.response(), &o.sandbox_root)) {
        Some((Some(theirs), root)) => {
            let want = core(&Redactor::new().with_sandbox_root(root).redact(theirs));
            let got = core(&Redactor::new().with_sandbox_root(&obs.sandbox_root).redact(response));
            (want != got).then(|| {
                Finding::new("same-response", format!("the response differs from step `{other}`'s"))
                    .expected(pretty(&want))
                    .actual(pretty(&got))
            })
        }
        _ => Some(Finding::new(
            "same-response",
            format!("step `{other}` has no JSON response to compare with"),
        )),
    }
}

fn pointer_check(
    check: &PointerCheck,
    response: &Value,
    resolve: &dyn Resolve,
    findings: &mut Vec<Finding>,
) {
    let p = &check.pointer;
    let value = response.pointer(p);
    if let Some(present) = check.present {
        match (present, value) {
            (true, None) => findings.push(
                Finding::new("json-pointer", format!("`{p}` is absent"))
                    .expected(format!("`{p}` present"))
                    .actual("absent"),
            ),
            (false, Some(v)) => findings.push(
                Finding::new("json-pointer", format!("`{p}` is present"))
                    .expected(format!("`{p}` absent"))
                    .actual(compact(v)),
            ),
            _ => {}
        }
    }
    if let Some(want) = &check.equals {
        let templated = matches!(want, Value::String(s) if !template_vars(s).is_empty());
        let want = match want {
            Value::String(s) => match resolve.text(s) {
                Ok(t) => Value::String(t),
                Err(e) => {
                    findings.push(Finding::new("json-pointer", e));
                    return;
                }
            },
            other => other.clone(),
        };
        // A template yields text; where the response holds a number (`{budget}` against
        // `meta.budget_ms`), the text is read as that number.
        let numeric_match = templated
            && matches!((value, &want), (Some(Value::Number(n)), Value::String(t)) if n.to_string() == *t);
        if value != Some(&want) && !numeric_match {
            findings.push(
                Finding::new(
                    "json-pointer",
                    match value {
                        Some(_) => format!("`{p}` has the wrong value"),
                        None => format!("`{p}` is absent"),
                    },
                )
                .expected(compact(&want))
                .actual(value.map_or_else(|| "absent".to_owned(), compact)),
            );
        }
    }
    if let Some(unwanted) = &check.not_equals {
        let unwanted = match unwanted {
            Value::String(s) => match resolve.text(s) {
                Ok(t) => Value::String(t),
                Err(e) => {
                    findings.push(Finding::new("json-pointer", e));
                    return;
                }
            },
            other => other.clone(),
        };
        let same_number = matches!((value, &unwanted), (Some(Value::Number(n)), Value::String(t)) if n.to_string() == *t);
        if value == Some(&unwanted) || same_number {
            findings.push(
                Finding::new("json-pointer", format!("`{p}` has the value it must not have"))
                    .expected(format!("anything but {}", compact(&unwanted)))
                    .actual(compact(&unwanted)),
            );
        }
    }
    for (key, bound, holds) in check.comparisons() {
        let bound = match bound {
            Value::String(t) => resolve.text(t).and_then(|t| {
                t.trim()
                    .parse::<f64>()
                    .map_err(|_| format!("`{key}` of `{p}` is not a number: {t:?}"))
            }),
            other => other.as_f64().ok_or_else(|| format!("`{key}` of `{p}` is not a number")),
        };
        let bound = match bound {
            Ok(b) => b,
            Err(e) => {
                findings.push(Finding::new("json-pointer", e));
                continue;
            }
        };
        let relation = key.replace('_', " ");
        match value.and_then(Value::as_f64) {
            Some(n) if n.partial_cmp(&bound).is_some_and(holds) => {}
            _ => findings.push(
                Finding::new("json-pointer", format!("`{p}` is not {relation} {bound}"))
                    .expected(format!("a number {relation} {bound}"))
                    .actual(value.map_or_else(|| "absent".to_owned(), compact)),
            ),
        }
    }
    if let Some(pattern) = &check.matches {
        let regex =
            resolve.text(pattern).and_then(|p| regex::Regex::new(&p).map_err(|e| e.to_string()));
        match (regex, value.and_then(Value::as_str)) {
            (Err(e), _) => findings.push(Finding::new("json-pointer", format!("bad pattern: {e}"))),
            (Ok(re), Some(s)) if re.is_match(s) => {}
            (Ok(re), _) => findings.push(
                Finding::new("json-pointer", format!("`{p}` does not match /{re}/"))
                    .expected(format!("a string matching /{re}/"))
                    .actual(value.map_or_else(|| "absent".to_owned(), compact)),
            ),
        }
    }
}

/// `data.continue_command` must be the invocation itself, maybe with an idempotency key added.
fn continues_verbatim(obs: &Observation, response: &Value, resolve: &dyn Resolve) -> Vec<Finding> {
    let Some(line) = response.pointer("/data/continue_command").and_then(Value::as_str) else {
        return vec![Finding::new(
            "continue-command",
            "the response has no `data.continue_command`",
        )];
    };
    let original = match &obs.record.repro.command {
        ReproCommand::Argv(argv) => Ok(argv.clone()),
        ReproCommand::Shell(own) => resolve.shell_words(own),
    };
    let (original, words) = match (original, resolve.shell_words(line)) {
        (Ok(o), Ok(w)) => (o, w),
        (Err(e), _) | (_, Err(e)) => return vec![Finding::new("continue-command", e)],
    };
    let without_key = strip_key(&words);
    if words == original || without_key == original {
        return Vec::new();
    }
    vec![
        Finding::new(
            "continue-command",
            "data.continue_command is not the original invocation (an idempotency key aside)",
        )
        .expected(original.join("\n"))
        .actual(words.join("\n")),
    ]
}

/// The words without one `--idempotency-key K` / `--idempotency-key=K`.
fn strip_key(words: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(words.len());
    let mut iter = words.iter();
    let mut stripped = false;
    while let Some(w) = iter.next() {
        if !stripped && w == "--idempotency-key" {
            stripped = true;
            iter.next();
        } else if !stripped && w.starts_with("--idempotency-key=") {
            stripped = true;
        } else {
            out.push(w.clone());
        }
    }
    out
}

/// Judges the checks that look at all observations of one step together (`same`).
pub fn check_all(expect: &Expect, step: &str, observations: &[&Observation]) -> Vec<Finding> {
    let mut findings = Vec::new();
    for code in &expect.warnings {
        let seen = observations.iter().filter_map(|o| o.response()).any(|r| {
            r.get("warnings").and_then(Value::as_array).is_some_and(|list| {
                list.iter().any(|w| w.get("code").and_then(Value::as_str) == Some(code.as_str()))
            })
        });
        if !seen {
            let actual: Vec<String> = observations
                .iter()
                .map(|o| {
                    o.response()
                        .and_then(|r| r.get("warnings"))
                        .map_or_else(|| "no warnings".to_owned(), compact)
                })
                .collect();
            findings.push(
                Finding::new("warning", format!("no response of the step warns `{code}`"))
                    .expected(format!("a warnings entry with code {code}"))
                    .actual(actual.join("\n"))
                    .at_step(step),
            );
        }
    }
    for pointer in &expect.same {
        let values: Vec<Option<&Value>> =
            observations.iter().map(|o| o.response().and_then(|r| r.pointer(pointer))).collect();
        let distinct: Vec<String> = {
            let mut v: Vec<String> =
                values.iter().map(|v| v.map_or_else(|| "absent".into(), compact)).collect();
            v.sort();
            v.dedup();
            v
        };
        if values.iter().any(Option::is_none) || distinct.len() > 1 {
            findings.push(
                Finding::new(
                    "same-value",
                    format!(
                        "`{pointer}` differs across the {} responses of the step",
                        values.len()
                    ),
                )
                .expected("one value in every response")
                .actual(distinct.join("\n"))
                .at_step(step),
            );
        }
    }
    findings
}

/// `data.progress.done` of every response, grouped by `data.job_id`, must never decrease.
pub fn progress_findings(history: &[Observation]) -> Vec<Finding> {
    let mut last: BTreeMap<String, (u64, String)> = BTreeMap::new();
    let mut findings = Vec::new();
    for obs in history {
        let Some(r) = obs.response() else { continue };
        let Some(done) = r.pointer("/data/progress/done") else { continue };
        let job = r.pointer("/data/job_id").and_then(Value::as_str).unwrap_or("").to_owned();
        let Some(done) = done.as_u64() else {
            findings.push(
                Finding::new(
                    "progress-monotonic",
                    "`data.progress.done` is not a whole number ≥ 0",
                )
                .actual(compact(done))
                .at_step(obs.record.name.clone()),
            );
            continue;
        };
        if let Some((before, at)) = last.get(&job)
            && done < *before
        {
            findings.push(
                Finding::new(
                    "progress-monotonic",
                    format!("`data.progress.done` went back from {before} (step `{at}`) to {done}"),
                )
                .expected(format!("≥ {before}"))
                .actual(done.to_string())
                .at_step(obs.record.name.clone()),
            );
        }
        last.insert(job, (done, obs.record.name.clone()));
    }
    findings
}

/// The part of a response that must match across runs of the same work: `ok`, `data`, `error`
/// and the exit code (other `meta` and `warnings` may differ between calls).
pub fn core(response: &Value) -> Value {
    serde_json::json!({
        "ok": response.get("ok"),
        "data": response.get("data"),
        "error": response.get("error"),
        "exit_code": response.pointer("/meta/exit_code"),
    })
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

fn show_codes(codes: &[i32]) -> String {
    match codes {
        [one] => format!("exit {one}"),
        many => format!("exit in {many:?}"),
    }
}
