//! This step against another: an earlier step (`same_response_as`, `same_stdout_as`,
//! `stdout_differs_from`, `same_data_as`, `data_differs_from`, `differs_from`), the role's
//! calibrated response (`matches_calibrated`), or the invocation itself
//! (`continues_verbatim`).

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{Check, Context, Judge, Site, no_validation};
use crate::observe::Observation;
use crate::outcome::FindingKind;
use crate::outcome::{Finding, ReproCommand, compact};
use crate::redact::Redactor;
use crate::scenario::{Expect, Step, UNLIKE_MIN_CHARS};

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

// ---- the checks of this family ----

/// The `same_stdout_as` check.
pub(super) const SAME_STDOUT_AS: Check = Check {
    defined_in: file!(),
    key: Some("same_stdout_as"),
    active: |e| e.same_stdout_as.is_some(),
    needs_response: false,
    judge: Judge::Observation(same_stdout_as),
    holds: "stdout is byte for byte that step's last stdout",
    findings: &[FindingKind::SameStdout],
    cites: &[],
    value: || json!({"$ref": "#/definitions/Name"}),
    validate: |e, site| runs_something("same_stdout_as", e.same_stdout_as.as_deref(), site),
};

/// The `stdout_differs_from` check.
pub(super) const STDOUT_DIFFERS_FROM: Check = Check {
    defined_in: file!(),
    key: Some("stdout_differs_from"),
    active: |e| e.stdout_differs_from.is_some(),
    needs_response: false,
    judge: Judge::Observation(stdout_differs_from),
    holds: "stdout differs from that step's",
    findings: &[FindingKind::StdoutDiffers],
    cites: &[],
    value: || json!({"$ref": "#/definitions/Name"}),
    validate: |e, site| {
        runs_something("stdout_differs_from", e.stdout_differs_from.as_deref(), site)
    },
};

/// The `same_data_as` check.
// These two compare `/data` whether or not stdout held one (saying which side lacks it),
// and also want stdout to hold one.
pub(super) const SAME_DATA_AS: Check = Check {
    defined_in: file!(),
    key: Some("same_data_as"),
    active: |e| e.same_data_as.is_some(),
    needs_response: true,
    judge: Judge::Observation(same_data_as),
    holds: "the response's `/data` equals that step's",
    findings: &[FindingKind::SameData],
    cites: &[],
    value: || json!({"$ref": "#/definitions/Name"}),
    validate: |e, site| runs_something("same_data_as", e.same_data_as.as_deref(), site),
};

/// The `data_differs_from` check.
pub(super) const DATA_DIFFERS_FROM: Check = Check {
    defined_in: file!(),
    key: Some("data_differs_from"),
    active: |e| e.data_differs_from.is_some(),
    needs_response: true,
    judge: Judge::Observation(data_differs_from),
    holds: "the response's `/data` differs from that step's",
    findings: &[FindingKind::DataDiffers],
    cites: &[],
    value: || json!({"$ref": "#/definitions/Name"}),
    validate: |e, site| runs_something("data_differs_from", e.data_differs_from.as_deref(), site),
};

/// The `continues_verbatim` check.
pub(super) const CONTINUES_VERBATIM: Check = Check {
    defined_in: file!(),
    key: Some("continues_verbatim"),
    active: |e| e.continues_verbatim == Some(true),
    needs_response: true,
    judge: Judge::Response(continues_verbatim),
    holds: "`data.continue_command`, split into words by `sh`, is the very invocation: the program may be named another way (the same file after links, a bare name found on `PATH`, an interpreter and its script), `--budget` and its value may be kept or dropped, an `--idempotency-key <k>` may be added, one the call gave must stay",
    findings: &[FindingKind::ContinueCommand],
    cites: &[],
    value: || json!({"type": "boolean"}),
    validate: no_validation,
};

/// The `differs_from` check.
pub(super) const DIFFERS_FROM: Check = Check {
    defined_in: file!(),
    key: Some("differs_from"),
    active: |e| !e.differs_from.is_empty(),
    needs_response: true,
    judge: Judge::Response(differs_from),
    holds: "`[{ step, pointer }]`: the string differs from that step's in ≥ 8 positions (random ids, not counters)",
    findings: &[FindingKind::Unlike],
    cites: &[],
    value: || {
        json!({
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": false,
                "required": ["step", "pointer"],
                "properties": {
                    "step": {"$ref": "#/definitions/Name"},
                    "pointer": {"description": "A JSON pointer.", "type": "string", "pattern": "^/"}
                }
            }
        })
    },
    validate: |e, site| {
        for d in &e.differs_from {
            site.refer(&d.step, "`differs_from`")?;
            if !d.pointer.starts_with('/') {
                return Err(site.fail(format!("`{}` is not a JSON pointer", d.pointer)));
            }
        }
        Ok(())
    },
};

/// The `matches_calibrated` check.
pub(super) const MATCHES_CALIBRATED: Check = Check {
    defined_in: file!(),
    key: Some("matches_calibrated"),
    active: |e| e.matches_calibrated == Some(true),
    needs_response: true,
    judge: Judge::Response(matches_calibrated),
    holds: "after redaction (the role's own `redact` pointers included), `ok`, `data`, `error` and the exit code equal the role's `--budget 0` response, and the process exits as that run did (0, or the `failing` role's own code)",
    findings: &[FindingKind::CalibratedEquality],
    cites: &[],
    value: || json!({"type": "boolean"}),
    validate: |_, site| needs_role("matches_calibrated", site),
};

/// The `ends_as_calibrated` check.
pub(super) const ENDS_AS_CALIBRATED: Check = Check {
    defined_in: file!(),
    key: Some("ends_as_calibrated"),
    active: |e| e.ends_as_calibrated == Some(true),
    needs_response: true,
    judge: Judge::Response(ends_as_calibrated),
    holds: "the response ends as the role's `--budget 0` one in what measured values cannot change: the same exit, `ok` and `error.code`, and a `data` of the same shape (keys, JSON types, array lengths, all the way down) whatever values it holds (a slept time, a rate): for criteria about how the work ends, not what it computed",
    findings: &[FindingKind::CalibratedEquality],
    cites: &[],
    value: || json!({"type": "boolean"}),
    validate: |_, site| needs_role("ends_as_calibrated", site),
};

/// The `same_response_as` check.
pub(super) const SAME_RESPONSE_AS: Check = Check {
    defined_in: file!(),
    key: Some("same_response_as"),
    active: |e| e.same_response_as.is_some(),
    needs_response: true,
    judge: Judge::Response(same_response_as),
    holds: "after redaction, `ok`, `data`, `error` and the exit code equal that earlier step's last response (a step of several probes or copies: each against the one of the same rank, when that step has as many)",
    findings: &[FindingKind::SameResponse],
    cites: &[],
    value: || json!({"$ref": "#/definitions/Name"}),
    validate: |e, site| {
        e.same_response_as
            .as_deref()
            .map_or(Ok(()), |other| site.refer(other, "`same_response_as`").map(|_| ()))
    },
};

/// The validation of a key naming an earlier step whose output it compares with: a step that
/// runs something.
fn runs_something(key: &str, other: Option<&str>, site: &Site<'_>) -> Result<(), String> {
    let Some(other) = other else { return Ok(()) };
    match site.refer(other, &format!("`{key}`"))? {
        Step::Run(_) | Step::Continue(_) | Step::Cancel(_) => Ok(()),
        _ => Err(site.fail(format!("`{key}` must name a step that runs something"))),
    }
}

/// The validation of a key comparing with the calibration: the scenario names a role.
fn needs_role(key: &str, site: &Site<'_>) -> Result<(), String> {
    match site.scenario.primary_role() {
        Some(_) => Ok(()),
        None => Err(site.fail(format!("`{key}` needs a role in `roles`"))),
    }
}

#[cfg(test)]
mod tests {
    use crate::checks::tests::*;

    #[test]
    fn same_response_as_compares_after_redaction() {
        let at = |root: &'static str| {
            let r = envelope(json!({ "out": format!("{root}/work/out.csv") }));
            Parts { stdout: r.to_string().into_bytes(), sandbox_root: root, ..Parts::default() }
                .build()
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
        assert_eq!(
            names(&world.judge(&e, &exited(1, &measured.to_string()))),
            ["calibrated-equality"]
        );
        let handoff = json!({ "ok": false, "data": { "state": "running" }, "warnings": [],
            "error": { "code": "INCOMPLETE", "message": "m", "retryable": true },
            "meta": { "exit_code": 14, "duration_ms": 5, "budget_ms": 700 } });
        assert_eq!(names(&world.judge(&e, &responding(handoff))), ["calibrated-equality"]);
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
            p.judge(&through_link, &format!("{} analyze a.csv", p.at("bin/tool")), false)
                .is_empty()
        );
        assert!(p.judge(&through_link, "tool analyze a.csv", true).is_empty());
        // A bare name nowhere on PATH names nothing.
        let f = only(p.judge(&through_link, "tool analyze a.csv", false));
        assert!(f.message.contains("another program"), "{}", f.message);
        // A script run by its #! line, continued through its interpreter, and the other way round.
        let script = words(&format!("{} count w.txt", p.at("cli.py")));
        assert!(
            p.judge(&script, &format!("/bin/sh {} count w.txt", p.at("cli.py")), false).is_empty()
        );
        let interpreted = words("/bin/sh cli.py count w.txt");
        assert!(
            p.judge(&interpreted, &format!("/bin/sh {} count w.txt", p.at("cli.py")), false)
                .is_empty()
        );
        assert!(
            p.judge(&interpreted, &format!("{} count w.txt", p.at("cli.py")), false).is_empty()
        );
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
        assert!(
            p.judge(&without, &format!("{tool} analyze a.csv --budget 300ms"), false).is_empty()
        );
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
            p.judge(&unkeyed, &format!("{tool} import r.csv --idempotency-key k9"), false)
                .is_empty()
        );
    }
}
