//! This step against another: an earlier step (`same_response_as`, `same_stdout_as`,
//! `stdout_differs_from`, `same_data_as`, `data_differs_from`, `differs_from`), the role's
//! calibrated response (`matches_calibrated`), or the invocation itself
//! (`continues_verbatim`).

use std::path::{Path, PathBuf};

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
    same_response(obs, response, other, ctx.last_of(other), ctx.redact).into_iter().collect()
}

/// `same_response_as`: after redaction (the role's own `redact` pointers included),
/// `response` (of `obs`) equals the response of `theirs`, an observation of step `other`.
pub fn same_response(
    obs: &Observation,
    response: &Value,
    other: &str,
    theirs: Option<&Observation>,
    redact: &[String],
) -> Option<Finding> {
    match theirs.map(|o| (o.response(), &o.sandbox_root)) {
        Some((Some(theirs), root)) => {
            let redactor = || Redactor::new().with_pointers(redact);
            let want = core(&redactor().with_sandbox_root(root).redact(theirs));
            let got = core(&redactor().with_sandbox_root(&obs.sandbox_root).redact(response));
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

/// `matches_calibrated`: after redaction, the response equals the role's `--budget 0` one, and
/// the process exits as that run did (REQ-F-082: the work's own response *with its own exit
/// code*; a right envelope under a wrong exit is no match): with its `meta.exit_code`, 0 for
/// every role but `failing`, whose calibration fails with a code of its own.
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
            let redactor = || Redactor::new().with_pointers(ctx.redact);
            let want = core(&redactor().with_sandbox_root(root).redact(calibrated));
            let got = core(&redactor().with_sandbox_root(&obs.sandbox_root).redact(response));
            if want == got {
                let calibrated_exit = want["exit_code"].as_i64().unwrap_or(0);
                return match obs.exit_code() {
                    Some(code) if i64::from(code) == calibrated_exit => Vec::new(),
                    _ => vec![
                        Finding::new(
                            FindingKind::CalibratedEquality,
                            "the response is the one the work gives with --budget 0, but not its exit",
                        )
                        .expected(format!("exit {calibrated_exit}, as the --budget 0 run"))
                        .actual(obs.record.ended.to_string()),
                    ],
                };
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

/// `ends_as_calibrated`: the response ends as the role's `--budget 0` one in what measured
/// values cannot change: the process exits with the calibrated exit, `ok` and `error.code`
/// are the calibrated ones, and `data` has the calibrated shape ([`shape_of`]: keys, JSON
/// types and array lengths, all the way down), whatever values it holds. For a criterion
/// about how the work ends (it ran to its end, it did not hand off), not what it computed:
/// a command's data may carry what it measured (a slept time, a rate), docs/contract.md §9.
pub(super) fn ends_as_calibrated(
    expect: &Expect,
    obs: &Observation,
    response: &Value,
    ctx: &Context<'_>,
) -> Vec<Finding> {
    if expect.ends_as_calibrated != Some(true) {
        return Vec::new();
    }
    let (calibrated, _) = match &ctx.calibrated {
        Ok(c) => *c,
        Err(e) => return vec![Finding::new(FindingKind::CalibratedEquality, e.clone())],
    };
    let ending = |r: &Value, exit: Option<i64>| {
        serde_json::json!({
            "exit_code": exit,
            "ok": r.get("ok"),
            "error.code": r.pointer("/error/code"),
            "data": shape_of(r.get("data").unwrap_or(&Value::Null)),
        })
    };
    let want = ending(calibrated, calibrated.pointer("/meta/exit_code").and_then(Value::as_i64));
    let got = ending(response, obs.exit_code().map(i64::from));
    if want == got {
        return Vec::new();
    }
    vec![
        Finding::new(
            FindingKind::CalibratedEquality,
            "the response does not end as the one the work gives with --budget 0 (exit, ok, error.code, or the shape of data)",
        )
        .expected(pretty(&want))
        .actual(pretty(&got)),
    ]
}

/// The shape of a JSON value: the same value with every string, number and boolean replaced
/// by its type's name, keys and array lengths kept.
pub fn shape_of(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), shape_of(v))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(shape_of).collect()),
        Value::String(_) => Value::String("<string>".into()),
        Value::Number(_) => Value::String("<number>".into()),
        Value::Bool(_) => Value::String("<boolean>".into()),
        Value::Null => Value::Null,
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

/// `continues_verbatim`: `data.continue_command` is the invocation itself (REQ-F-082: a paused
/// call continues with the original invocation, a writer's with `--idempotency-key` appended).
/// Both are compared as the words `sh` makes of them, with the choices the spec leaves open
/// accepted:
///
/// - the program may be named another way: the same file after resolving symbolic links, the
///   same name as a bare word found on `PATH` (an installed tool names itself so), or an
///   interpreter followed by the script (what a Python or Node tool sees of itself:
///   `sys.executable` and the script's path);
/// - `--budget` with its value may be there or not, whatever the call had (the spec does not
///   say whether the budget belongs to the invocation);
/// - the key may be added when the call had none; one the call gave must stay.
///
/// Other arguments, a missing or changed one, a different program or a dropped key still fail.
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
    match same_invocation(&original, &words, ctx.programs) {
        Ok(()) => Vec::new(),
        Err(why) => vec![
            Finding::new(
                FindingKind::ContinueCommand,
                format!(
                    "data.continue_command is not the original invocation ({why}; the program's \
                     spelling, --budget and an added idempotency key aside)"
                ),
            )
            .expected(original.join("\n"))
            .actual(words.join("\n")),
        ],
    }
}

/// How a word names a file: as the program of a command line (a bare name is looked up on
/// `PATH`), or as the script an interpreter runs (from the working directory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Naming {
    /// The first word of a command line.
    Program,
    /// The word after an interpreter.
    Script,
}

/// The words of a command line that may name what it runs (a program, or an interpreter and
/// its script), each with how it names it: the step stage finds the file each names before
/// judging ([`Context::programs`]).
pub(super) fn program_words(words: &[String]) -> impl Iterator<Item = (Naming, &String)> {
    [Naming::Program, Naming::Script].into_iter().zip(words)
}

/// The file each program word names ([`Context::programs`]).
type Programs = std::collections::BTreeMap<(Naming, String), Option<PathBuf>>;

/// Why `cont` is not the invocation `original` again, if it is not.
fn same_invocation(
    original: &[String],
    cont: &[String],
    file: &Programs,
) -> Result<(), &'static str> {
    let (original_key, original) = take_key(original);
    let (cont_key, cont) = take_key(cont);
    if original_key.is_some() && cont_key != original_key {
        return Err("the idempotency key of the call is missing or changed");
    }
    let (original, cont) = (without_budget(&original), without_budget(&cont));
    let mut program_differs = false;
    for (ko, kc) in [(1, 1), (1, 2), (2, 1), (2, 2)] {
        if original.len() < ko || cont.len() < kc {
            continue;
        }
        let (o_program, o_rest) = original.split_at(ko);
        let (c_program, c_rest) = cont.split_at(kc);
        if o_rest != c_rest {
            continue;
        }
        if same_program(o_program, c_program, file) {
            return Ok(());
        }
        program_differs = true;
    }
    Err(if program_differs { "another program" } else { "other arguments" })
}

/// Whether two program parts (a program, or an interpreter and its script) run the same thing.
fn same_program(a: &[String], b: &[String], file: &Programs) -> bool {
    if a == b {
        return true;
    }
    match (a, b) {
        ([a], [b]) => same_program_word(a, b, file),
        // An interpreter and a script, named each its own way.
        ([ai, a], [bi, b]) => {
            same_program_word(ai, bi, file)
                && same_file((Naming::Script, a), (Naming::Script, b), file)
        }
        // A script run by its `#!` line on one side, through its interpreter on the other.
        ([script], [interpreter, b]) | ([interpreter, b], [script]) => {
            located(file, (Naming::Program, interpreter)).is_some()
                && same_file((Naming::Program, script), (Naming::Script, b), file)
        }
        _ => false,
    }
}

/// Whether two words name one program: the same word, the same file, or a bare name found on
/// `PATH` that is the other word's file name.
fn same_program_word(a: &str, b: &str, file: &Programs) -> bool {
    let bare_match = |bare: &str, other: &str| {
        !bare.contains('/')
            && located(file, (Naming::Program, bare)).is_some()
            && Path::new(other).file_name().is_some_and(|n| n == bare)
    };
    a == b
        || same_file((Naming::Program, a), (Naming::Program, b), file)
        || bare_match(a, b)
        || bare_match(b, a)
}

/// Whether two words, each named its way, name one existing file.
fn same_file(a: (Naming, &str), b: (Naming, &str), file: &Programs) -> bool {
    matches!((located(file, a), located(file, b)), (Some(x), Some(y)) if x == y)
}

fn located<'a>(file: &'a Programs, (naming, word): (Naming, &str)) -> Option<&'a Path> {
    file.get(&(naming, word.to_owned())).and_then(|p| p.as_deref())
}

/// The file a word names, symbolic links resolved, or `None`: as a program the shell finds it (a
/// word with a `/` from `cwd`, a bare name as an executable file on `path`), as a script from
/// `cwd`.
pub fn locate_program(
    word: &str,
    naming: Naming,
    cwd: &Path,
    path: Option<&std::ffi::OsStr>,
) -> Option<PathBuf> {
    if word.is_empty() {
        return None;
    }
    if word.contains('/') || naming == Naming::Script {
        let file = std::fs::canonicalize(cwd.join(word)).ok()?;
        return file.is_file().then_some(file);
    }
    std::env::split_paths(path?).find_map(|dir| {
        use std::os::unix::fs::PermissionsExt as _;
        let file = std::fs::canonicalize(cwd.join(dir).join(word)).ok()?;
        let meta = std::fs::metadata(&file).ok()?;
        (meta.is_file() && meta.permissions().mode() & 0o111 != 0).then_some(file)
    })
}

/// The `data.continue_command` of a response, if it has one.
pub(super) fn continue_command(response: &Value) -> Option<&str> {
    response.pointer("/data/continue_command").and_then(Value::as_str)
}

/// The value of the first `--idempotency-key K` / `--idempotency-key=K`, and the other words.
fn take_key(words: &[String]) -> (Option<String>, Vec<String>) {
    let mut out = Vec::with_capacity(words.len());
    let mut key = None;
    let mut iter = words.iter();
    while let Some(w) = iter.next() {
        if key.is_none() && w == "--idempotency-key" {
            key = Some(iter.next().cloned().unwrap_or_default());
        } else if let (None, Some(k)) = (&key, w.strip_prefix("--idempotency-key=")) {
            key = Some(k.to_owned());
        } else {
            out.push(w.clone());
        }
    }
    (key, out)
}

/// The words without any `--budget V` / `--budget=V`.
fn without_budget(words: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(words.len());
    let mut iter = words.iter();
    while let Some(w) = iter.next() {
        if w == "--budget" {
            iter.next();
        } else if !w.starts_with("--budget=") {
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
