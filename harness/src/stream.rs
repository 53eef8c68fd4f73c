//! Stage: stream. Judges a JSONL stream on stdout against REQ-O-004, for `expect.stream`.
//!
//! The stream is parsed into data first ([`parse`]): each line classified, the terminal line
//! kept (it is the step's response), every broken rule listed as a [`StreamProblem`] with its
//! line number. The rules:
//!
//! - every line is one JSON object (a blank line, non-JSON, an array or a scalar is a problem);
//! - a line with `"heartbeat": true` is a heartbeat: an ordinary line, neither item nor end;
//! - exactly one terminal line, the last: a summary (`"_summary": true`) or an error envelope
//!   (an object with a boolean `ok` and an `error` key) that validates against the envelope
//!   schema with `ok: false`; a line after it is a problem, and so is a stream without one;
//! - numbering: when the first item line carries `_seq`, the item lines carry `_seq` 1, 2, 3,
//!   ... in order, heartbeats and the terminal line carry none, a summary's `_count` is the
//!   number of item lines and an error envelope's `meta.items_emitted` the last `_seq`; when
//!   the first item line carries none, no line may.
//!
//! [`exit_problems`] adds the rules that need the process's end: it exited by itself (not
//! killed at the deadline), with 0 after a summary, with the error envelope's
//! `meta.exit_code` after one.

use serde_json::Value;

use crate::exec::Termination;
use crate::schemas;
use crate::schemas::SchemaName;

/// What one line of the stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    /// An item (any object that is neither heartbeat nor terminal).
    Item,
    /// `"heartbeat": true`.
    Heartbeat,
    /// `"_summary": true`: the successful end.
    Summary,
    /// An object with a boolean `ok` and an `error`: the failed (or cancelled) end.
    ErrorEnvelope,
    /// Not one JSON object.
    Invalid,
}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamProblem {
    /// The 1-based line it is about; `None` for the stream as a whole.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for StreamProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(n) => write!(f, "line {n}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// A parsed stream.
#[derive(Debug, Clone, Default)]
pub struct StreamParse {
    /// Each line's kind, in order.
    pub kinds: Vec<LineKind>,
    /// The first terminal line: its 1-based number and value.
    pub terminal: Option<(usize, Value)>,
    /// How many item lines there were.
    pub items: usize,
    /// Whether the items are numbered (the first item line carries `_seq`).
    pub numbered: bool,
    /// The `_seq` of the last item line, when numbered.
    pub last_seq: Option<u64>,
    /// Every broken rule, in line order.
    pub problems: Vec<StreamProblem>,
}

/// Parses and judges the structure of a stream (the rules of the module docs but the exit).
pub fn parse(stdout: &[u8]) -> StreamParse {
    let mut out = StreamParse::default();
    let mut pieces: Vec<&[u8]> = stdout.split(|&b| b == b'\n').collect();
    if pieces.last().is_some_and(|last| last.is_empty()) {
        pieces.pop();
    }
    let mut values: Vec<Option<Value>> = Vec::with_capacity(pieces.len());
    for (i, piece) in pieces.iter().enumerate() {
        let n = i + 1;
        let (kind, value) = classify(piece);
        if let Err(message) = &kind {
            out.problems.push(StreamProblem { line: Some(n), message: message.clone() });
        }
        let kind = kind.unwrap_or(LineKind::Invalid);
        if let Some((t, _)) = &out.terminal {
            out.problems.push(StreamProblem {
                line: Some(n),
                message: format!("a line after the terminal line (line {t})"),
            });
        }
        match kind {
            LineKind::Summary | LineKind::ErrorEnvelope if out.terminal.is_none() => {
                if let Some(v) = &value {
                    out.terminal = Some((n, v.clone()));
                }
            }
            LineKind::Item => out.items += 1,
            _ => {}
        }
        out.kinds.push(kind);
        values.push(value);
    }
    match &out.terminal {
        None => out.problems.push(StreamProblem {
            line: None,
            message: format!(
                "no terminal line (a `_summary` or an error envelope) after {} lines",
                pieces.len()
            ),
        }),
        Some((n, v)) if out.kinds.get(n - 1) == Some(&LineKind::ErrorEnvelope) => {
            out.problems.extend(
                envelope_problems(v)
                    .into_iter()
                    .map(|message| StreamProblem { line: Some(*n), message }),
            );
        }
        Some(_) => {}
    }
    numbering(&mut out, &values);
    out.problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
    out
}

/// One line's kind and value, or why it is not a JSON object.
fn classify(piece: &[u8]) -> (Result<LineKind, String>, Option<Value>) {
    let Ok(text) = std::str::from_utf8(piece) else {
        return (Err("not UTF-8".into()), None);
    };
    if text.trim().is_empty() {
        return (Err("a blank line".into()), None);
    }
    let value: Value = match schemas::parse_json(text) {
        Ok(v) => v,
        Err(e) => return (Err(format!("not JSON ({e}): {}", excerpt(text))), None),
    };
    let Some(object) = value.as_object() else {
        return (Err(format!("JSON but not an object: {}", excerpt(text))), None);
    };
    let kind = if object.get("_summary") == Some(&Value::Bool(true)) {
        LineKind::Summary
    } else if object.get("ok").is_some_and(Value::is_boolean) && object.contains_key("error") {
        LineKind::ErrorEnvelope
    } else if object.get("heartbeat") == Some(&Value::Bool(true)) {
        LineKind::Heartbeat
    } else {
        LineKind::Item
    };
    (Ok(kind), Some(value))
}

/// Why an error-envelope terminal line is not a valid failed envelope.
fn envelope_problems(v: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if v.get("ok") != Some(&Value::Bool(false)) {
        problems.push("the error envelope says `ok: true`".to_owned());
    }
    match schemas::violations(SchemaName::Envelope, v) {
        Ok(violations) => problems.extend(
            violations
                .into_iter()
                .take(5)
                .map(|e| format!("the error envelope does not validate: {e}")),
        ),
        Err(e) => problems.push(e.to_string()),
    }
    problems
}

/// The numbering rules over the classified lines.
fn numbering(out: &mut StreamParse, values: &[Option<Value>]) {
    let seq_of = |v: &Value| v.get("_seq").cloned();
    let first_item = out.kinds.iter().position(|k| *k == LineKind::Item);
    out.numbered = first_item
        .and_then(|i| values.get(i).and_then(Option::as_ref))
        .is_some_and(|v| v.get("_seq").is_some());
    let mut expected: u64 = 1;
    for (i, (kind, value)) in out.kinds.iter().zip(values).enumerate() {
        let Some(value) = value else { continue };
        let n = i + 1;
        let seq = seq_of(value);
        let problem = match (kind, out.numbered, &seq) {
            (LineKind::Item, true, Some(s)) if s.as_u64() == Some(expected) => {
                out.last_seq = Some(expected);
                expected += 1;
                None
            }
            (LineKind::Item, true, Some(s)) => {
                let message = format!("`_seq` is {s}, expected {expected}");
                // Resynchronise on the number given, so one gap is one problem.
                expected = s.as_u64().map_or(expected + 1, |s| s + 1);
                out.last_seq = Some(expected - 1);
                Some(message)
            }
            (LineKind::Item, true, None) => {
                Some(format!("an item without `_seq` (expected {expected}) in a numbered stream"))
            }
            (LineKind::Heartbeat, true, Some(_)) => Some("a heartbeat carries `_seq`".to_owned()),
            (LineKind::Summary | LineKind::ErrorEnvelope, true, Some(_)) => {
                Some("the terminal line carries `_seq`".to_owned())
            }
            (_, false, Some(_)) => Some(
                "`_seq` on a line of an unnumbered stream (the first item has none)".to_owned(),
            ),
            _ => None,
        };
        if let Some(message) = problem {
            out.problems.push(StreamProblem { line: Some(n), message });
        }
    }
    if !out.numbered {
        return;
    }
    let Some((n, terminal)) = out.terminal.clone() else { return };
    let items = out.items as u64;
    let last = out.last_seq.unwrap_or(0);
    let (pointer, want, what) = match out.kinds.get(n - 1) {
        Some(LineKind::Summary) => ("/_count", items, "the number of item lines"),
        _ => ("/meta/items_emitted", last, "the last `_seq`"),
    };
    let found = terminal.pointer(pointer);
    if found.and_then(Value::as_u64) != Some(want) {
        out.problems.push(StreamProblem {
            line: Some(n),
            message: format!(
                "`{}` is {}, expected {want} ({what})",
                pointer.trim_start_matches('/').replace('/', "."),
                found.map_or_else(|| "absent".to_owned(), Value::to_string)
            ),
        });
    }
}

/// The rules that need the process's end.
pub fn exit_problems(parsed: &StreamParse, termination: Termination) -> Vec<StreamProblem> {
    let code = match termination {
        Termination::Exited(code) => code,
        Termination::TimedOut => {
            return vec![StreamProblem {
                line: None,
                message: "the stream was still running at its deadline and was killed".into(),
            }];
        }
        Termination::Signaled(signal) => {
            return vec![StreamProblem {
                line: None,
                message: format!("the process was ended by signal {signal}, it did not exit"),
            }];
        }
    };
    let Some((n, terminal)) = &parsed.terminal else { return Vec::new() };
    let problem = match parsed.kinds.get(n - 1) {
        Some(LineKind::Summary) if code != 0 => Some(format!("a summary, but the exit is {code}")),
        Some(LineKind::ErrorEnvelope) => {
            let said = terminal.pointer("/meta/exit_code");
            (said.and_then(Value::as_i64) != Some(i64::from(code))).then(|| {
                format!(
                    "`meta.exit_code` is {}, but the exit is {code}",
                    said.map_or_else(|| "absent".to_owned(), Value::to_string)
                )
            })
        }
        _ => None,
    };
    problem.map(|message| StreamProblem { line: Some(*n), message }).into_iter().collect()
}

fn excerpt(text: &str) -> String {
    let mut short: String = text.chars().take(80).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENVELOPE_META: &str =
        r#""warnings":[],"meta":{"exit_code":130,"duration_ms":5,"items_emitted":2}"#;

    fn cancelled(items_emitted: u64, exit_code: i32) -> String {
        format!(
            r#"{{"ok":false,"data":{{"partial":true}},"error":{{"code":"CANCELLED","message":"stopped","retryable":true}},"warnings":[],"meta":{{"exit_code":{exit_code},"duration_ms":5,"items_emitted":{items_emitted}}}}}"#
        )
    }

    fn problems(text: &str) -> Vec<String> {
        parse(text.as_bytes()).problems.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_numbered_stream_with_a_summary_passes() {
        let text = "{\"_seq\":1,\"path\":\"a\"}\n{\"heartbeat\":true}\n{\"_seq\":2,\"path\":\"b\"}\n{\"_summary\":true,\"_count\":2}\n";
        let parsed = parse(text.as_bytes());
        assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
        assert!(parsed.numbered);
        assert_eq!(parsed.items, 2);
        assert_eq!(parsed.terminal.as_ref().map(|(n, _)| *n), Some(4));
        assert_eq!(
            parsed.kinds,
            [LineKind::Item, LineKind::Heartbeat, LineKind::Item, LineKind::Summary]
        );
        assert!(exit_problems(&parsed, Termination::Exited(0)).is_empty());
    }

    #[test]
    fn an_unnumbered_stream_passes_and_may_not_number_later_lines() {
        assert!(problems("{\"a\":1}\n{\"a\":2}\n{\"_summary\":true}\n").is_empty());
        let p = problems("{\"a\":1}\n{\"a\":2,\"_seq\":2}\n{\"_summary\":true}\n");
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].starts_with("line 2:") && p[0].contains("unnumbered"), "{p:?}");
    }

    #[test]
    fn blank_prose_and_non_object_lines_fail_with_their_numbers() {
        let p = problems("{\"a\":1}\n\nhello\n[1]\n{\"_summary\":true}\n");
        assert_eq!(p.len(), 3, "{p:?}");
        assert!(p[0].starts_with("line 2:") && p[0].contains("blank"));
        assert!(p[1].starts_with("line 3:") && p[1].contains("not JSON"));
        assert!(p[2].starts_with("line 4:") && p[2].contains("not an object"));
    }

    #[test]
    fn a_stream_without_a_terminal_line_fails() {
        let parsed = parse(b"{\"_seq\":1}\n{\"_seq\":2}\n");
        assert!(parsed.terminal.is_none());
        let p: Vec<String> = parsed.problems.iter().map(ToString::to_string).collect();
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("no terminal line"), "{p:?}");
        assert!(problems("").iter().any(|p| p.contains("no terminal line")));
    }

    #[test]
    fn a_line_after_the_terminal_line_fails() {
        let p = problems("{\"a\":1}\n{\"_summary\":true}\n{\"a\":2}\n");
        assert_eq!(p, ["line 3: a line after the terminal line (line 2)"]);
        let p = problems("{\"_summary\":true}\n{\"_summary\":true}\n");
        assert_eq!(p, ["line 2: a line after the terminal line (line 1)"]);
    }

    #[test]
    fn heartbeats_are_ordinary_lines_but_carry_no_seq() {
        let ok = "{\"heartbeat\":true}\n{\"_seq\":1}\n{\"heartbeat\":true}\n{\"_summary\":true,\"_count\":1}\n";
        assert!(problems(ok).is_empty(), "{:?}", problems(ok));
        let p = problems(
            "{\"_seq\":1}\n{\"heartbeat\":true,\"_seq\":2}\n{\"_summary\":true,\"_count\":1}\n",
        );
        assert_eq!(p, ["line 2: a heartbeat carries `_seq`"]);
    }

    #[test]
    fn numbering_must_run_one_two_three() {
        let p = problems("{\"_seq\":1}\n{\"_seq\":3}\n{\"_summary\":true,\"_count\":2}\n");
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].starts_with("line 2: `_seq` is 3"), "{p:?}");
        let p = problems("{\"_seq\":0}\n{\"_seq\":1}\n{\"_summary\":true,\"_count\":2}\n");
        assert!(p[0].starts_with("line 1: `_seq` is 0"), "{p:?}");
        let p = problems("{\"_seq\":1}\n{\"x\":1}\n{\"_summary\":true,\"_count\":2}\n");
        assert!(p[0].starts_with("line 2: an item without `_seq`"), "{p:?}");
    }

    #[test]
    fn a_summary_counts_the_items_and_carries_no_seq() {
        let p = problems("{\"_seq\":1}\n{\"_seq\":2}\n{\"_summary\":true,\"_count\":3}\n");
        assert_eq!(p, ["line 3: `_count` is 3, expected 2 (the number of item lines)"]);
        let p = problems("{\"_seq\":1}\n{\"_summary\":true}\n");
        assert!(p[0].contains("`_count` is absent"), "{p:?}");
        let p = problems("{\"_seq\":1}\n{\"_summary\":true,\"_count\":1,\"_seq\":2}\n");
        assert_eq!(p, ["line 2: the terminal line carries `_seq`"]);
    }

    #[test]
    fn an_error_terminal_validates_counts_and_matches_the_exit() {
        let text = format!("{{\"_seq\":1}}\n{{\"_seq\":2}}\n{}\n", cancelled(2, 130));
        let parsed = parse(text.as_bytes());
        assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
        assert_eq!(parsed.kinds[2], LineKind::ErrorEnvelope);
        assert!(exit_problems(&parsed, Termination::Exited(130)).is_empty());
        let wrong_exit = exit_problems(&parsed, Termination::Exited(1));
        assert_eq!(wrong_exit.len(), 1);
        assert!(wrong_exit[0].to_string().starts_with("line 3: `meta.exit_code` is 130"));

        let text = format!("{{\"_seq\":1}}\n{{\"_seq\":2}}\n{}\n", cancelled(5, 130));
        let p = problems(&text);
        assert_eq!(p, ["line 3: `meta.items_emitted` is 5, expected 2 (the last `_seq`)"]);

        let p = problems(&format!("{{\"ok\":true,\"error\":null,{ENVELOPE_META}}}\n"));
        assert!(p.iter().any(|p| p.contains("ok: true")), "{p:?}");
        let p = problems("{\"ok\":false,\"error\":{}}\n");
        assert!(p.iter().any(|p| p.contains("does not validate")), "{p:?}");
    }

    #[test]
    fn the_end_of_the_process_is_judged() {
        let parsed = parse(b"{\"a\":1}\n{\"_summary\":true}\n");
        let p = exit_problems(&parsed, Termination::Exited(1));
        assert_eq!(p[0].to_string(), "line 2: a summary, but the exit is 1");
        let p = exit_problems(&parsed, Termination::TimedOut);
        assert!(p[0].to_string().contains("deadline"));
        let p = exit_problems(&parsed, Termination::Signaled(2));
        assert!(p[0].to_string().contains("signal 2"));
    }

    #[test]
    fn the_last_line_may_lack_its_newline() {
        assert!(problems("{\"a\":1}\n{\"_summary\":true}").is_empty());
    }
}
