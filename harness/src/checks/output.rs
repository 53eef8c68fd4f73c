//! What the process wrote and how long it took: `no_ansi`, `no_prose`, `pipes_released`,
//! `elapsed_max`, `elapsed_min`.

use std::time::Duration;

use serde_json::json;

use super::{Check, Context, Judge, no_validation};
use crate::observe::{Observation, StdoutProblem};
use crate::outcome::FindingKind;
use crate::outcome::{Finding, millis};
use crate::scenario::{Expect, Stream};

/// After the process exited, stdout and stderr must reach end-of-file within this long for the
/// caller to count as released (generous: the machine may be busy).
pub const PIPE_RELEASE_GRACE: Duration = Duration::from_millis(1000);

/// `elapsed_max`: the step took at most this long.
pub(super) fn elapsed_max(expect: &Expect, obs: &Observation, ctx: &Context<'_>) -> Vec<Finding> {
    let Some(expr) = &expect.elapsed_max else { return Vec::new() };
    let elapsed = obs.outcome.elapsed;
    match ctx.duration(expr) {
        Ok(max) if elapsed > max => vec![
            Finding::new(
                FindingKind::Elapsed,
                format!(
                    "took {} ms, more than {} ms{}",
                    millis(elapsed),
                    millis(max),
                    terms(expr, ctx)
                ),
            )
            .expected(format!("≤ {} ms", millis(max)))
            .actual(format!("{} ms", millis(elapsed))),
        ],
        Ok(_) => Vec::new(),
        Err(e) => vec![Finding::new(FindingKind::Elapsed, e)],
    }
}

/// `exit_after_signal_max`: the process ended within this long after the last signal conform
/// sent it. A run conform sent no signal, or whose group had gone before the signal, passes.
pub(super) fn exit_after_signal_max(
    expect: &Expect,
    obs: &Observation,
    ctx: &Context<'_>,
) -> Vec<Finding> {
    let Some(expr) = &expect.exit_after_signal_max else { return Vec::new() };
    let Some(sent) = &obs.record.signal else { return Vec::new() };
    let elapsed = millis(obs.outcome.elapsed);
    let after = elapsed.saturating_sub(sent.last_ms());
    let which = if sent.again_ms.is_some() { "the second" } else { "the" };
    match ctx.duration(expr) {
        Ok(max) if after > millis(max) => vec![
            Finding::new(
                FindingKind::ExitAfterSignal,
                format!(
                    "ended {after} ms after {which} {} (sent at {} ms, ended at {elapsed} ms), more than {} ms{}",
                    sent.signal,
                    sent.last_ms(),
                    millis(max),
                    terms(expr, ctx)
                ),
            )
            .expected(format!("the end ≤ {} ms after {which} {}", millis(max), sent.signal))
            .actual(format!("{after} ms")),
        ],
        Ok(_) => Vec::new(),
        Err(e) => vec![Finding::new(FindingKind::ExitAfterSignal, e)],
    }
}

/// The terms of a bound as measured for this tool (` (920 + 1500 ms)`), when it has several
/// or names a measured value; never the names of the variables.
fn terms(expr: &str, ctx: &Context<'_>) -> String {
    match ctx.texts.get(expr) {
        Some(Ok(values)) if values != expr && values.contains('+') => {
            // A variable's value comes as bare milliseconds; a literal keeps its unit.
            let shown: Vec<String> = values
                .split('+')
                .map(str::trim)
                .map(|t| {
                    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
                    match t.split_once('*').map(|(n, v)| (n.trim(), v.trim())) {
                        Some((n, v)) if digits(v) => format!("{n} × {v} ms"),
                        _ if digits(t) => format!("{t} ms"),
                        _ => t.to_owned(),
                    }
                })
                .collect();
            format!(" ({})", shown.join(" + "))
        }
        _ => String::new(),
    }
}

/// `elapsed_min`: the step took at least this long.
pub(super) fn elapsed_min(expect: &Expect, obs: &Observation, ctx: &Context<'_>) -> Vec<Finding> {
    let Some(expr) = &expect.elapsed_min else { return Vec::new() };
    let elapsed = obs.outcome.elapsed;
    match ctx.duration(expr) {
        Ok(min) if elapsed < min => vec![
            Finding::new(
                FindingKind::Elapsed,
                format!(
                    "took {} ms, less than {} ms{}",
                    millis(elapsed),
                    millis(min),
                    terms(expr, ctx)
                ),
            )
            .expected(format!("≥ {} ms", millis(min)))
            .actual(format!("{} ms", millis(elapsed))),
        ],
        Ok(_) => Vec::new(),
        Err(e) => vec![Finding::new(FindingKind::Elapsed, e)],
    }
}

/// `pipes_released`: stdout and stderr reached end-of-file soon after the exit.
pub(super) fn pipes_released(
    expect: &Expect,
    obs: &Observation,
    _ctx: &Context<'_>,
) -> Vec<Finding> {
    if expect.pipes_released != Some(true) {
        return Vec::new();
    }
    let elapsed = obs.outcome.elapsed;
    match obs.outcome.pipes_closed_after {
        Some(closed) if closed <= elapsed + PIPE_RELEASE_GRACE => Vec::new(),
        Some(closed) => vec![
            Finding::new(
                FindingKind::PipesReleased,
                format!(
                    "stdout/stderr closed {} ms after the process exited",
                    millis(closed.saturating_sub(elapsed))
                ),
            )
            .expected(format!("closed within {} ms of the exit", millis(PIPE_RELEASE_GRACE)))
            .actual(format!("closed after {} ms", millis(closed))),
        ],
        None => vec![
            Finding::new(
                FindingKind::PipesReleased,
                "stdout/stderr stayed open after the process exited: the caller is not released",
            )
            .expected("end-of-file on stdout and stderr when the command returns")
            .actual(format!("still open after the exit at {} ms", millis(elapsed))),
        ],
    }
}

/// `no_ansi`: these streams hold no ANSI escape sequence (one finding per stream, at the first).
pub(super) fn no_ansi(expect: &Expect, obs: &Observation, _ctx: &Context<'_>) -> Vec<Finding> {
    let mut findings = Vec::new();
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
                Finding::new(
                    FindingKind::Ansi,
                    format!("{label} holds an ANSI escape sequence at byte {at}"),
                )
                .expected(format!("plain text on {label}"))
                .actual(excerpt),
            );
        }
    }
    findings
}

/// `no_prose`: stdout is empty or one JSON document.
pub(super) fn no_prose(expect: &Expect, obs: &Observation, _ctx: &Context<'_>) -> Vec<Finding> {
    if expect.no_prose != Some(true) {
        return Vec::new();
    }
    match &obs.json {
        Ok(_) | Err(StdoutProblem::Empty) => Vec::new(),
        Err(_) => vec![
            Finding::new(FindingKind::Prose, "stdout holds text that is not one JSON document")
                .expected("nothing on stdout, or one JSON document (prose belongs on stderr)")
                .actual(obs.record.stdout.text.chars().take(300).collect::<String>()),
        ],
    }
}

// ---- the checks of this family ----

/// The `elapsed_max` check.
pub(super) const ELAPSED_MAX: Check = Check {
    defined_in: file!(),
    key: Some("elapsed_max"),
    active: |e| e.elapsed_max.is_some(),
    needs_response: false,
    judge: Judge::Observation(elapsed_max),
    holds: "the step took at most this long (a duration expression)",
    findings: &[FindingKind::Elapsed],
    cites: &[],
    value: || json!({"$ref": "#/definitions/DurationExpr"}),
    validate: no_validation,
};

/// The `exit_after_signal_max` check.
pub(super) const EXIT_AFTER_SIGNAL_MAX: Check = Check {
    defined_in: file!(),
    key: Some("exit_after_signal_max"),
    active: |e| e.exit_after_signal_max.is_some(),
    needs_response: false,
    judge: Judge::Observation(exit_after_signal_max),
    holds: "the process ended within this long (a duration expression) after the last signal conform sent it (`kill_group`, its `again_after` included); a run whose group had gone before passes",
    findings: &[FindingKind::ExitAfterSignal],
    cites: &["REQ-F-069"],
    value: || json!({"$ref": "#/definitions/DurationExpr"}),
    validate: no_validation,
};

/// The `elapsed_min` check.
pub(super) const ELAPSED_MIN: Check = Check {
    defined_in: file!(),
    key: Some("elapsed_min"),
    active: |e| e.elapsed_min.is_some(),
    needs_response: false,
    judge: Judge::Observation(elapsed_min),
    holds: "the step took at least this long (a duration expression)",
    findings: &[FindingKind::Elapsed],
    cites: &[],
    value: || json!({"$ref": "#/definitions/DurationExpr"}),
    validate: no_validation,
};

/// The `pipes_released` check.
pub(super) const PIPES_RELEASED: Check = Check {
    defined_in: file!(),
    key: Some("pipes_released"),
    active: |e| e.pipes_released == Some(true),
    needs_response: false,
    judge: Judge::Observation(pipes_released),
    holds: "stdout and stderr hit end-of-file within 1 s of the exit",
    findings: &[FindingKind::PipesReleased],
    cites: &[],
    value: || json!({"type": "boolean"}),
    validate: no_validation,
};

/// The `no_ansi` check.
pub(super) const NO_ANSI: Check = Check {
    defined_in: file!(),
    key: Some("no_ansi"),
    active: |e| !e.no_ansi.is_empty(),
    needs_response: false,
    judge: Judge::Observation(no_ansi),
    holds: "these streams (`stdout`, `stderr`) hold no ANSI escape",
    findings: &[FindingKind::Ansi],
    cites: &[],
    value: || json!({"type": "array", "items": {"enum": ["stdout", "stderr"]}}),
    validate: no_validation,
};

/// The `no_prose` check.
pub(super) const NO_PROSE: Check = Check {
    defined_in: file!(),
    key: Some("no_prose"),
    active: |e| e.no_prose == Some(true),
    needs_response: false,
    judge: Judge::Observation(no_prose),
    holds: "stdout is empty or one JSON document (help and prose go to stderr)",
    findings: &[FindingKind::Prose],
    cites: &[],
    value: || json!({"type": "boolean"}),
    validate: no_validation,
};

#[cfg(test)]
mod tests {
    use crate::checks::tests::*;

    #[test]
    fn elapsed_bounds_hold_inclusively() {
        let obs = Parts { elapsed_ms: 100, ..Parts::default() }.build();
        assert!(
            judge(&expect(json!({ "elapsed_max": "100ms", "elapsed_min": "100ms" })), &obs)
                .is_empty()
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
    fn exit_after_signal_max_measures_from_the_last_signal_sent() {
        use crate::outcome::{SentSignal, SignalTarget};
        let e = expect(json!({ "exit_after_signal_max": "500ms" }));
        let signalled = |elapsed_ms: u64, again_ms: Option<u64>| {
            let mut obs = Parts { elapsed_ms, ..Parts::default() }.build();
            obs.record.signal = Some(SentSignal {
                signal: "SIGINT".into(),
                after_ms: 1000,
                to: SignalTarget::Group,
                again_ms,
            });
            obs
        };
        // Ended 100 ms after the second SIGINT, though 2 s after the first: at once.
        assert!(judge(&e, &signalled(3100, Some(3000))).is_empty());
        // Ended 2.5 s after the second: the second did not end it.
        let f = only(judge(&e, &signalled(5500, Some(3000))));
        assert_eq!(f.check, "exit-after-signal");
        assert_eq!(
            f.message,
            "ended 2500 ms after the second SIGINT (sent at 3000 ms, ended at 5500 ms), more than 500 ms"
        );
        assert_eq!(f.actual.as_deref(), Some("2500 ms"));
        // One signal, the group gone before a second: measured from the first.
        assert!(judge(&e, &signalled(1500, None)).is_empty());
        assert_eq!(judge(&e, &signalled(1501, None)).len(), 1);
        // No signal sent: nothing to judge.
        assert!(judge(&e, &Parts { elapsed_ms: 9000, ..Parts::default() }.build()).is_empty());
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
        let obs = Parts {
            stdout: b"{}".to_vec(),
            stderr: b"warn \x1b[31mred".to_vec(),
            ..Parts::default()
        }
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
        assert_eq!(
            (f.check.as_str(), f.actual.as_deref()),
            ("prose", Some("Usage: tool [OPTIONS]"))
        );
    }
}
