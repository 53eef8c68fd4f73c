//! The one response writer (REQ-F-004, docs/contract.md §1).
//!
//! Every outcome becomes one [`Response`]; [`Response::to_json`] builds the whole envelope and
//! [`Response::render`] turns it into the bytes for stdout: exactly one JSON object (and a
//! newline) in JSON mode, readable text in text mode. `ok` and `meta.exit_code` are derived
//! from the exit code here and nowhere else.

use serde_json::{Map, Value, json};

use super::exit::Exit;
use super::failure::{Failure, Warning};
use super::modes::OutputMode;
use super::stream::StreamEnd;

/// A finished invocation, ready to be written.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The exit code.
    pub exit: Exit,
    /// `data` (success) or the failure payload.
    pub data: Value,
    /// The error, for every non-zero exit.
    pub error: Option<Failure>,
    /// Warnings, in order.
    pub warnings: Vec<Warning>,
    /// `meta.duration_ms`.
    pub duration_ms: u64,
    /// `meta.timeout_ms`, when a command was resolved.
    pub timeout_ms: Option<u64>,
    /// Extra `meta` fields (`not_modified`, `idempotency_hit`, `budget_ms`, ...).
    pub meta: Map<String, Value>,
    /// Set when this response ends a JSONL stream ([`super::stream`]): rendered as the summary
    /// line (success) or a JSON error envelope whatever the output mode.
    pub stream: Option<StreamEnd>,
}

impl Response {
    /// A success.
    pub fn success(data: Value) -> Self {
        Response {
            exit: Exit::SUCCESS,
            data,
            error: None,
            warnings: Vec::new(),
            duration_ms: 0,
            timeout_ms: None,
            meta: Map::new(),
            stream: None,
        }
    }

    /// A failure; `data` is the failure payload or null.
    pub fn failure(failure: Failure) -> Self {
        let data = failure.data.clone().unwrap_or(Value::Null);
        Response {
            exit: failure.exit,
            data,
            error: Some(failure),
            warnings: Vec::new(),
            duration_ms: 0,
            timeout_ms: None,
            meta: Map::new(),
            stream: None,
        }
    }

    /// The summary line that ends a successful stream (REQ-O-004): `_count` item lines and
    /// the command's `meta.pagination`.
    pub fn summary(&self, emitted: u64) -> Value {
        let mut summary = Map::new();
        summary.insert("_summary".into(), json!(true));
        summary.insert("_count".into(), json!(emitted));
        if let Some(pagination) = self.meta.get("pagination") {
            summary.insert("pagination".into(), pagination.clone());
        }
        summary.insert("exit_code".into(), json!(self.exit.code()));
        summary.insert("duration_ms".into(), json!(self.duration_ms));
        Value::Object(summary)
    }

    /// The envelope.
    pub fn to_json(&self) -> Value {
        let error = match &self.error {
            None => Value::Null,
            Some(failure) => {
                let mut error = Map::new();
                error.insert("code".into(), json!(failure.code));
                error.insert("message".into(), json!(failure.message));
                if let Some(detail) = &failure.detail {
                    error.insert("detail".into(), json!(detail));
                }
                if let Some(context) = &failure.context {
                    error.insert("context".into(), context.clone());
                }
                if let Some(retryable) = failure.retryable {
                    error.insert("retryable".into(), json!(retryable));
                }
                if let Some(ms) = failure.retry_after_ms {
                    error.insert("retry_after_ms".into(), json!(ms));
                }
                error.insert("phase".into(), json!(failure.phase.as_str()));
                if let Some(suggestion) = &failure.suggestion {
                    error.insert("suggestion".into(), json!(suggestion));
                }
                Value::Object(error)
            }
        };
        let warnings: Vec<Value> =
            self.warnings.iter().map(|w| json!({"code": w.code, "message": w.message})).collect();
        let mut meta = Map::new();
        meta.insert("exit_code".into(), json!(self.exit.code()));
        meta.insert("duration_ms".into(), json!(self.duration_ms));
        if let Some(timeout_ms) = self.timeout_ms {
            meta.insert("timeout_ms".into(), json!(timeout_ms));
        }
        for (name, value) in &self.meta {
            meta.insert(name.clone(), value.clone());
        }
        json!({
            "ok": self.exit == Exit::SUCCESS,
            "data": self.data,
            "error": error,
            "warnings": warnings,
            "meta": meta,
        })
    }

    /// The bytes for stdout (JSON mode: the envelope; text mode: the data, the error going to
    /// the returned stderr text) and the text for stderr.
    pub fn render(&self, mode: OutputMode) -> (Vec<u8>, String) {
        if let Some(end) = self.stream {
            if self.exit == Exit::SUCCESS {
                let mut line = serde_json::to_vec(&self.summary(end.emitted))
                    .unwrap_or_else(|_| b"{\"_summary\":true}".to_vec());
                line.push(b'\n');
                return (line, String::new());
            }
            return self.render_json();
        }
        match mode {
            OutputMode::Json => self.render_json(),
            OutputMode::Text => self.render_text(),
        }
    }

    fn render_json(&self) -> (Vec<u8>, String) {
        let mut bytes =
            serde_json::to_vec(&self.to_json()).unwrap_or_else(|_| b"{\"ok\":false}".to_vec());
        bytes.push(b'\n');
        // A one-line summary for a person watching stderr; stdout stays pure JSON.
        let stderr = match &self.error {
            Some(failure) => format!("error: {}: {}\n", failure.code, failure.message),
            None => String::new(),
        };
        (bytes, stderr)
    }

    fn render_text(&self) -> (Vec<u8>, String) {
        let mut stderr = String::new();
        for warning in &self.warnings {
            stderr.push_str(&format!("warning: {}: {}\n", warning.code, warning.message));
        }
        let stdout = match &self.error {
            None => text_of(&self.data),
            Some(failure) => {
                stderr.push_str(&format!("error: {}: {}\n", failure.code, failure.message));
                if let Some(suggestion) = &failure.suggestion {
                    stderr.push_str(&format!("  suggestion: {suggestion}\n"));
                }
                if self.data.is_null() { String::new() } else { text_of(&self.data) }
            }
        };
        (stdout.into_bytes(), stderr)
    }
}

/// Readable text of a value: `key: value` lines for an object, pretty JSON for nested parts.
fn text_of(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::Object(map) => {
            let mut out = String::new();
            for (key, value) in map {
                let shown = match value {
                    Value::String(s) => s.clone(),
                    Value::Object(_) | Value::Array(_) => {
                        serde_json::to_string_pretty(value).unwrap_or_default()
                    }
                    other => other.to_string(),
                };
                out.push_str(&format!("{key}: {shown}\n"));
            }
            out
        }
        Value::String(s) => format!("{s}\n"),
        Value::Array(items) if items.iter().all(flat_object) => {
            items.iter().map(item_line).collect()
        }
        other => format!("{}\n", serde_json::to_string_pretty(other).unwrap_or_default()),
    }
}

/// An object of scalars only (a list command's item).
fn flat_object(value: &Value) -> bool {
    value.as_object().is_some_and(|map| map.values().all(|v| !v.is_object() && !v.is_array()))
}

/// One line per item of a list: its `key=value` pairs in order, strings bare.
fn item_line(item: &Value) -> String {
    let Some(map) = item.as_object() else { return String::new() };
    let pairs: Vec<String> = map
        .iter()
        .map(|(key, value)| match value {
            Value::String(s) => format!("{key}={s}"),
            other => format!("{key}={other}"),
        })
        .collect();
    format!("{}\n", pairs.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_flat_items_is_one_line_each_in_text() {
        let response = Response::success(json!([
            {"path": "a b.txt", "bytes": 3},
            {"path": "c", "bytes": 0}
        ]));
        let (stdout, _) = response.render(OutputMode::Text);
        assert_eq!(String::from_utf8(stdout).unwrap(), "path=a b.txt bytes=3\npath=c bytes=0\n");
    }

    #[test]
    fn ok_and_exit_code_follow_the_exit() {
        let envelope = Response::success(json!({"a": 1})).to_json();
        assert_eq!(envelope["ok"], json!(true));
        assert_eq!(envelope["meta"]["exit_code"], json!(0));
        assert_eq!(envelope["error"], Value::Null);
        let envelope =
            Response::failure(Failure::new(Exit::NOT_FOUND, "NOPE", "missing")).to_json();
        assert_eq!(envelope["ok"], json!(false));
        assert_eq!(envelope["meta"]["exit_code"], json!(5));
        assert_eq!(envelope["data"], Value::Null);
        assert_eq!(envelope["warnings"], json!([]));
    }
}
