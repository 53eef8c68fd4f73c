//! JSONL streams (REQ-O-004): `--stream` on a command that declares `supports_streaming`.
//!
//! The work hands each item to [`super::Ctx::emit`]; the [`StreamSink`] writes it at once as
//! one line on stdout, flushed, with `_seq` 1, 2, 3, ... added. The stream ends with exactly one
//! terminal line, written by the framework like any response (`Response::render`):
//!
//! - success: the summary `{"_summary": true, "_count": n, "pagination": {...}, "exit_code": 0,
//!   "duration_ms": ...}` (`pagination` is the command's `meta.pagination`), exit 0;
//! - failure (the work's error, the wall-clock limit, SIGTERM, SIGINT): the error envelope,
//!   always JSON, with `meta.items_emitted` = the last `_seq`, and its exit code. SIGINT is
//!   CANCELLED, `data.partial: true`, exit 130.
//!
//! Before the framework writes the terminal line it closes the sink ([`StreamSink::close`]),
//! under the same lock every item line is written with: no item line can follow the terminal
//! line, even when the work is still running (the process exits right after).

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Value, json};

use super::exit::Exit;
use super::failure::Failure;

#[derive(Debug, Default)]
struct SinkState {
    /// Item lines written so far.
    emitted: u64,
    /// The `_seq` of the last item line.
    last_seq: u64,
    /// The framework took over stdout for the terminal line.
    closed: bool,
}

/// The stdout of a streaming invocation; cheap to clone (the work and the supervisor share it).
#[derive(Debug, Clone, Default)]
pub struct StreamSink {
    state: Arc<Mutex<SinkState>>,
}

impl StreamSink {
    /// A sink nothing was written to.
    pub fn new() -> Self {
        StreamSink::default()
    }

    /// Writes `item` (an object) as the next line with its `_seq`, and flushes. After
    /// [`StreamSink::close`] nothing is written and the work is told to stop.
    pub fn emit(&self, item: Value) -> Result<(), Failure> {
        self.emit_to(item, &mut std::io::stdout().lock())
    }

    /// [`StreamSink::emit`] to any writer (tests).
    pub fn emit_to(&self, item: Value, out: &mut dyn Write) -> Result<(), Failure> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.closed {
            return Err(Failure::new(Exit::GENERAL_ERROR, "STREAM_CLOSED", "the stream ended"));
        }
        let Value::Object(mut map) = item else {
            return Err(Failure::internal("a stream item must be a JSON object"));
        };
        let seq = state.last_seq + 1;
        map.insert("_seq".into(), json!(seq));
        let mut line = serde_json::to_vec(&Value::Object(map))
            .map_err(|e| Failure::internal(format!("a stream item does not serialize: {e}")))?;
        line.push(b'\n');
        out.write_all(&line).and_then(|()| out.flush()).map_err(|e| {
            Failure::new(Exit::GENERAL_ERROR, "STDOUT_CLOSED", format!("stdout failed: {e}"))
        })?;
        state.emitted += 1;
        state.last_seq = seq;
        Ok(())
    }

    /// Ends the item lines (idempotent): returns how many were written and the last `_seq`.
    pub fn close(&self) -> (u64, u64) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.closed = true;
        (state.emitted, state.last_seq)
    }
}

/// How a response ends a stream: the counts of its item lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamEnd {
    /// Item lines written (`_count` of the summary).
    pub emitted: u64,
    /// The last `_seq` (`meta.items_emitted` of an error envelope).
    pub last_seq: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_numbered_from_one_and_nothing_follows_the_close() {
        let sink = StreamSink::new();
        let mut out = Vec::new();
        sink.emit_to(json!({"a": 1}), &mut out).unwrap();
        sink.emit_to(json!({"a": 2}), &mut out).unwrap();
        assert_eq!(sink.close(), (2, 2));
        assert!(sink.emit_to(json!({"a": 3}), &mut out).is_err());
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines, vec![json!({"a": 1, "_seq": 1}), json!({"a": 2, "_seq": 2})]);
    }

    #[test]
    fn a_non_object_item_is_refused() {
        let sink = StreamSink::new();
        assert!(sink.emit_to(json!([1]), &mut Vec::new()).is_err());
        assert_eq!(sink.close(), (0, 0));
    }
}
