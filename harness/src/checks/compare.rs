//! This step against another: an earlier step (`same_response_as`, `same_stdout_as`,
//! `stdout_differs_from`, `same_data_as`, `data_differs_from`, `differs_from`), the role's
//! calibrated response (`matches_calibrated`), or the invocation itself
//! (`continues_verbatim`).

use serde_json::Value;

use super::Context;
use crate::observe::Observation;
use crate::outcome::FindingKind;
use crate::outcome::{Finding, ReproCommand, compact};
use crate::redact::Redactor;
use crate::scenario::{Expect, UNLIKE_MIN_CHARS};

/// `same_response_as`: after redaction, the response equals that step's last one.
pub(super) fn same_response_as(
    expect: &Expect,
    obs: &Observation,
    response: &Value,
    ctx: &Context<'_>,
) -> Vec<Finding> {
    let Some(other) = &expect.same_response_as else { return Vec::new() };
    same_response(obs, response, other, ctx.last_of(other)).into_iter().collect()
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
                Finding::new(
                    FindingKind::SameResponse,
                    format!("the response differs from step `{other}`'s"),
                )
                .expected(pretty(&want))
                .actual(pretty(&got))
            })
        }
        _ => Some(Finding::new(
            FindingKind::SameResponse,
            format!("step `{other}` has no JSON response to compare with"),
        )),
    }
}

/// `matches_calibrated`: after redaction, the response equals the role's `--budget 0` one.
pub(super) fn matches_calibrated(
    expect: &Expect,
    obs: &Observation,
    response: &Value,
    ctx: &Context<'_>,
) -> Vec<Finding> {
    if expect.matches_calibrated != Some(true) {
        return Vec::new();
    }
    match &ctx.calibrated {
        Ok((calibrated, root)) => {
            let want = core(&Redactor::new().with_sandbox_root(root).redact(calibrated));
            let got = core(&Redactor::new().with_sandbox_root(&obs.sandbox_root).redact(response));
            if want == got {
                return Vec::new();
            }
            vec![
                Finding::new(
                    FindingKind::CalibratedEquality,
                    "the response differs from the one the work gives with --budget 0",
                )
                .expected(pretty(&want))
                .actual(pretty(&got)),
            ]
        }
        Err(e) => vec![Finding::new(FindingKind::CalibratedEquality, e.clone())],
    }
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

/// `differs_from`: each string differs from the same pointer of that step's last response in
/// at least [`UNLIKE_MIN_CHARS`] positions.
pub(super) fn differs_from(
    expect: &Expect,
    _obs: &Observation,
    response: &Value,
    ctx: &Context<'_>,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for d in &expect.differs_from {
        let mine = response.pointer(&d.pointer).and_then(Value::as_str);
        let theirs = ctx.last_of(&d.step).and_then(|o| o.str_at(&d.pointer));
        match (mine, theirs) {
            (Some(a), Some(b)) => {
                let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
                let differing = (0..a.len().max(b.len())).filter(|&i| a.get(i) != b.get(i)).count();
                if differing < UNLIKE_MIN_CHARS {
                    findings.push(
                        Finding::new(
                            FindingKind::Unlike,
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
                FindingKind::Unlike,
                format!(
                    "`{}` is not a string in this response and in step `{}`'s",
                    d.pointer, d.step
                ),
            )),
        }
    }
    findings
}

/// `continues_verbatim`: `data.continue_command` is the invocation itself, maybe with an
/// idempotency key added. Both are compared as the words `sh` makes of them.
pub(super) fn continues_verbatim(
    expect: &Expect,
    obs: &Observation,
    response: &Value,
    ctx: &Context<'_>,
) -> Vec<Finding> {
    if expect.continues_verbatim != Some(true) {
        return Vec::new();
    }
    let Some(line) = continue_command(response) else {
        return vec![Finding::new(
            FindingKind::ContinueCommand,
            "the response has no `data.continue_command`",
        )];
    };
    let original = match &obs.record.repro.command {
        ReproCommand::Argv(argv) => Ok(argv.clone()),
        ReproCommand::Shell(own) => ctx.words(own),
    };
    let (original, words) = match (original, ctx.words(line)) {
        (Ok(o), Ok(w)) => (o, w),
        (Err(e), _) | (_, Err(e)) => return vec![Finding::new(FindingKind::ContinueCommand, e)],
    };
    let without_key = strip_key(&words);
    if words == original || without_key == original {
        return Vec::new();
    }
    vec![
        Finding::new(
            FindingKind::ContinueCommand,
            "data.continue_command is not the original invocation (an idempotency key aside)",
        )
        .expected(original.join("\n"))
        .actual(words.join("\n")),
    ]
}

/// The `data.continue_command` of a response, if it has one.
pub(super) fn continue_command(response: &Value) -> Option<&str> {
    response.pointer("/data/continue_command").and_then(Value::as_str)
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

/// `same_stdout_as`: stdout is byte for byte that step's last stdout.
pub(super) fn same_stdout_as(
    expect: &Expect,
    obs: &Observation,
    ctx: &Context<'_>,
) -> Vec<Finding> {
    let Some(other) = &expect.same_stdout_as else { return Vec::new() };
    compare_output("same_stdout_as", other, obs, ctx)
}

/// `stdout_differs_from`: stdout differs from that step's last stdout.
pub(super) fn stdout_differs_from(
    expect: &Expect,
    obs: &Observation,
    ctx: &Context<'_>,
) -> Vec<Finding> {
    let Some(other) = &expect.stdout_differs_from else { return Vec::new() };
    compare_output("stdout_differs_from", other, obs, ctx)
}

/// `same_data_as`: the response's `/data` equals that step's.
pub(super) fn same_data_as(expect: &Expect, obs: &Observation, ctx: &Context<'_>) -> Vec<Finding> {
    let Some(other) = &expect.same_data_as else { return Vec::new() };
    compare_output("same_data_as", other, obs, ctx)
}

/// `data_differs_from`: the response's `/data` differs from that step's.
pub(super) fn data_differs_from(
    expect: &Expect,
    obs: &Observation,
    ctx: &Context<'_>,
) -> Vec<Finding> {
    let Some(other) = &expect.data_differs_from else { return Vec::new() };
    compare_output("data_differs_from", other, obs, ctx)
}

/// The invocation of an observation, as words (for findings comparing two steps).
fn invocation_words(obs: &Observation) -> String {
    match &obs.record.repro.command {
        ReproCommand::Argv(argv) => argv.iter().skip(1).cloned().collect::<Vec<_>>().join(" "),
        ReproCommand::Shell(line) => line.clone(),
    }
}

/// The kind of the findings of one output comparison.
fn output_kind(key: &str) -> FindingKind {
    match key {
        "same_stdout_as" => FindingKind::SameStdout,
        "stdout_differs_from" => FindingKind::StdoutDiffers,
        "same_data_as" => FindingKind::SameData,
        _ => FindingKind::DataDiffers,
    }
}

/// One of the output comparisons (`key`) of this observation against the last one of step
/// `other`; each finding shows both invocations and where they part.
fn compare_output(key: &str, other: &str, obs: &Observation, ctx: &Context<'_>) -> Vec<Finding> {
    let Some(theirs) = ctx.last_of(other) else {
        return vec![Finding::new(
            output_kind(key),
            format!("step `{other}` produced nothing to compare with"),
        )];
    };
    let mine = invocation_words(obs);
    let both = format!("this step: {mine}\nstep `{other}`: {}", invocation_words(theirs));
    let mut findings = Vec::new();
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
                        FindingKind::SameStdout,
                        format!(
                            "stdout differs from step `{other}`'s from byte {at} on ({} vs {} bytes)",
                            a.len(),
                            b.len()
                        ),
                    )
                    .expected(format!("{both}\nstdout from byte {at}: {}", bytes_excerpt(b, at)))
                    .actual(format!("stdout from byte {at}: {}", bytes_excerpt(a, at))),
                );
            } else if key == "stdout_differs_from" && equal {
                findings.push(
                    Finding::new(
                        FindingKind::StdoutDiffers,
                        format!("stdout is byte for byte step `{other}`'s ({} bytes)", a.len()),
                    )
                    .expected(format!("{both}\ndifferent stdout"))
                    .actual(bytes_excerpt(a, 0)),
                );
            }
        }
        _ => {
            let my_data = obs.response().and_then(|r| r.get("data"));
            let their_data = theirs.response().and_then(|r| r.get("data"));
            let (Some(a), Some(b)) = (my_data, their_data) else {
                return vec![
                    Finding::new(
                        output_kind(key),
                        format!("no `/data` to compare with step `{other}`'s"),
                    )
                    .expected(both)
                    .actual(format!(
                        "this step's data: {}; step `{other}`'s: {}",
                        my_data.map_or_else(|| "absent".into(), compact),
                        their_data.map_or_else(|| "absent".into(), compact)
                    )),
                ];
            };
            if key == "same_data_as" && a != b {
                let at = first_difference(a, b, String::new());
                findings.push(
                    Finding::new(
                        FindingKind::SameData,
                        format!("`/data` differs from step `{other}`'s at `/data{at}`"),
                    )
                    .expected(format!("{both}\n{}", excerpt_of(b)))
                    .actual(excerpt_of(a)),
                );
            } else if key == "data_differs_from" && a == b {
                findings.push(
                    Finding::new(
                        FindingKind::DataDiffers,
                        format!("`/data` is the same as step `{other}`'s"),
                    )
                    .expected(format!("{both}\na different `/data`"))
                    .actual(excerpt_of(a)),
                );
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
