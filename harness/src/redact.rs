//! Redaction: the one place that decides which parts of a response are volatile.
//!
//! Two responses of the same work differ in durations, ids and paths even when the tool behaves
//! identically. Before conform compares a continuation's final response with the calibrated one,
//! and before it stores or compares a snapshot, it normalizes both with [`Redactor::redact`],
//! which applies these rules in this order (each is also a public function):
//!
//! 1. **Sandbox paths** ([`redact_sandbox`]): every occurrence of the scenario's sandbox
//!    directory (as given and as canonicalized) inside any string becomes `[SANDBOX]`.
//!    **Host paths** ([`redact_host_paths`]), when the redactor was told them
//!    ([`Redactor::with_tool`], [`Redactor::with_host`]): the tool's path as invoked and as
//!    resolved (`[TOOL]`), its directory (`[TOOL_DIR]`), conform's working directory (`[CWD]`)
//!    and conform's `HOME` (`[HOME]`), each as given, canonicalized and single-quoted for a
//!    shell (`'/opt/my tool/t'` is `[TOOL]` as a whole), the longest first. A path is replaced
//!    only as a whole path: not inside a longer file name (`/home/u` is not `[HOME]` in
//!    `/home/user`), nor as the tail of another path; `/` itself never is. Snapshots use them,
//!    so that what a tool says about where it runs compares equal on every machine.
//! 2. **Durations** ([`redact_durations`]): the value of every `duration_ms` key (above all
//!    `meta.duration_ms`) becomes `"[DURATION_MS]"`.
//! 3. **Timestamps** ([`redact_timestamps`]): a string that is an RFC 3339 date-time
//!    (`2026-11-29T20:44:04Z`, `…T20:44:04.123+01:00`) becomes `"[TIMESTAMP]"`, and so does
//!    the value of a key named `timestamp` or ending in `_at` (epoch numbers included).
//! 4. **Job ids** ([`redact_job_ids`]): the value of every `job_id` key becomes `"[JOB_ID]"`,
//!    and the same id is replaced wherever else it appears inside a string, e.g. in
//!    `continue_command` (`tool job wait [JOB_ID]`) and `cancel_command`. Distinct ids get
//!    distinct placeholders in order of appearance (`[JOB_ID]`, `[JOB_ID_2]`, …) so that a
//!    response mixing two jobs does not compare equal to one naming a single job.
//! 5. **Idempotency keys** ([`redact_idempotency_keys`]): the value of every `idempotency_key`
//!    key and the word after `--idempotency-key` (or `--idempotency-key=`) in any string
//!    become `[IDEMPOTENCY_KEY]`, also wherever else the same key appears.
//! 6. **Etags** ([`redact_etags`]): the value of every `etag` key becomes `"[ETAG]"`, also
//!    wherever else it appears inside a string (e.g. a suggested `--etag <value>`).
//! 7. **Process ids** ([`redact_pids`]): the value of a key named `pid`, `pids` or ending in
//!    `_pid` becomes `"[PID]"` (each element, for an array).
//! 8. **The profile's own fields** ([`redact_pointers`], [`Redactor::with_pointers`]): the
//!    value at each JSON pointer a role's `redact` lists (`/data/slept_ms`) becomes
//!    `"[REDACTED]"` where the response has it: a value the tool measures anew on every run,
//!    which the vendor names because no rule above can know it.
//!
//! A literal shorter than [`MIN_LITERAL_LEN`] characters is only redacted where its key holds
//! it, never searched for inside other strings: a short value would match by accident.
//!
//! Job ids a response does not name under a `job_id` key (a `job wait <id>` that answers
//! `JOB_LOST` names its job only in the message) are redacted too when the redactor was told
//! about them ([`Redactor::with_job_id`]); snapshots tell it every job id their scenario saw,
//! in order, so `[JOB_ID]` means the same job in every step of a scenario.
//!
//! Everything else is kept: exit codes, `ok`, `error.code`, progress, `meta.budget_ms`, data.
//!
//! ## Snapshot rules
//!
//! Snapshots compare responses across runs, on machines of different speeds, where conform
//! derives budgets from a calibration. [`Redactor::redact_for_snapshot`] therefore applies, after
//! the rules above, three more that only concern timing:
//!
//! 9. **Budgets and timeouts** ([`redact_budgets`]): a non-zero `meta.budget_ms` becomes
//!    `"[BUDGET_MS]"`, a non-zero `meta.timeout_ms` `"[TIMEOUT_MS]"` (0, "off", is kept, and so is
//!    absence), and the word after `--budget` / `--timeout` in any string becomes `[BUDGET]` /
//!    `[TIMEOUT]` (a paused command's `continue_command` repeats the budget it was given).
//! 10. **Progress of interrupted work** ([`redact_interrupted_progress`]): in an INCOMPLETE
//!     response (`error.code` is `INCOMPLETE`), `data.progress.done` becomes `"[PROGRESS]"`:
//!     where a budget runs out depends on the machine. `total` and `unit` are kept.
//! 11. **Prose and raw text** ([`redact_prose_numbers`]): in `error.message` and every
//!     `warnings[].message`, each run of digits becomes `[N]`: messages are for people and never
//!     parsed, so their wording is compared but not their figures (budgets, percentages).
//!     `error.detail`, raw text from below such as a dead worker's log tail, becomes
//!     `"[DETAIL]"` (present or absent still shows).
//!
//! Rules are pure functions on `serde_json::Value`.

use std::path::Path;

use serde_json::Value;

/// Placeholder for the sandbox directory.
pub const SANDBOX: &str = "[SANDBOX]";
/// Placeholder for the tool's path (as invoked or resolved).
pub const TOOL: &str = "[TOOL]";
/// Placeholder for the directory holding the tool.
pub const TOOL_DIR: &str = "[TOOL_DIR]";
/// Placeholder for conform's working directory.
pub const CWD: &str = "[CWD]";
/// Placeholder for conform's `HOME` (the sandbox's own HOME is under `[SANDBOX]`).
pub const HOME: &str = "[HOME]";
/// Placeholder for a duration.
pub const DURATION: &str = "[DURATION_MS]";
/// Placeholder for a timestamp.
pub const TIMESTAMP: &str = "[TIMESTAMP]";
/// Placeholder for a job id (the second distinct id is `[JOB_ID_2]`, and so on).
pub const JOB_ID: &str = "JOB_ID";
/// Placeholder for an idempotency key.
pub const IDEMPOTENCY_KEY: &str = "IDEMPOTENCY_KEY";
/// Placeholder for an etag.
pub const ETAG: &str = "ETAG";
/// Placeholder for a process id.
pub const PID: &str = "[PID]";
/// Placeholder for a value the profile names (a role's `redact`).
pub const REDACTED: &str = "[REDACTED]";
/// Literals shorter than this are not searched for inside other strings.
pub const MIN_LITERAL_LEN: usize = 6;

/// Applies every redaction rule; configured with the sandbox directories of a scenario.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    sandbox_roots: Vec<String>,
    /// Host paths and their placeholders, longest path first.
    host_paths: Vec<(String, &'static str)>,
    job_ids: Vec<String>,
    /// JSON pointers whose values are replaced (a role's `redact`).
    pointers: Vec<String>,
}

impl Redactor {
    /// A redactor that knows no sandbox directory.
    pub fn new() -> Self {
        Redactor::default()
    }

    /// Adds a sandbox directory (and its canonical form, when it differs, e.g. `/tmp` being a
    /// symlink) to replace with `[SANDBOX]`.
    #[must_use]
    pub fn with_sandbox_root(mut self, root: impl AsRef<Path>) -> Self {
        let root = root.as_ref();
        let mut forms = vec![root.to_string_lossy().into_owned()];
        if let Ok(canonical) = root.canonicalize() {
            forms.push(canonical.to_string_lossy().into_owned());
        }
        for form in forms {
            let form = form.trim_end_matches('/').to_owned();
            if !form.is_empty() && !self.sandbox_roots.contains(&form) {
                self.sandbox_roots.push(form);
            }
        }
        // Longest first, so that a root inside another is not half-replaced.
        self.sandbox_roots.sort_by_key(|r| std::cmp::Reverse(r.len()));
        self
    }

    /// Adds the tool's paths: `invoked` as given on the command line and `resolved`, the
    /// program conform runs, as `[TOOL]`; the directory of each as `[TOOL_DIR]`.
    #[must_use]
    pub fn with_tool(mut self, invoked: impl AsRef<Path>, resolved: impl AsRef<Path>) -> Self {
        for path in [invoked.as_ref(), resolved.as_ref()] {
            self.add_host_path(path, TOOL);
            if let Some(dir) = path.parent() {
                self.add_host_path(dir, TOOL_DIR);
            }
            if let Some(dir) = path.canonicalize().ok().as_deref().and_then(Path::parent) {
                self.add_host_path(dir, TOOL_DIR);
            }
        }
        self
    }

    /// Adds conform's working directory (`[CWD]`) and `HOME` (`[HOME]`), as this process has
    /// them.
    #[must_use]
    pub fn with_host(mut self) -> Self {
        if let Ok(cwd) = std::env::current_dir() {
            self.add_host_path(&cwd, CWD);
        }
        if let Some(home) = std::env::var_os("HOME") {
            self.add_host_path(Path::new(&home), HOME);
        }
        self
    }

    /// Adds one host path in its forms (as given, canonical, single-quoted), keeping the
    /// longest first. A path already known keeps its first placeholder; a relative path
    /// counts only when it has a directory part (a bare name would match words of prose).
    fn add_host_path(&mut self, path: &Path, placeholder: &'static str) {
        let given = path.to_string_lossy().trim_end_matches('/').to_owned();
        if given.is_empty() || (!given.starts_with('/') && !given.contains('/')) {
            return;
        }
        let mut forms = vec![given];
        if let Ok(canonical) = path.canonicalize() {
            forms.push(canonical.to_string_lossy().trim_end_matches('/').to_owned());
        }
        let quoted: Vec<String> =
            forms.iter().map(|f| format!("'{}'", f.replace('\'', "'\\''"))).collect();
        for form in forms.into_iter().chain(quoted) {
            if !form.is_empty() && !self.host_paths.iter().any(|(known, _)| *known == form) {
                self.host_paths.push((form, placeholder));
            }
        }
        self.host_paths.sort_by_key(|(form, _)| std::cmp::Reverse(form.len()));
    }

    /// Adds a job id to redact wherever it appears, numbered before the ids found in the
    /// response (the first id added is `[JOB_ID]`, the second `[JOB_ID_2]`, ...).
    #[must_use]
    pub fn with_job_id(mut self, id: impl Into<String>) -> Self {
        let id = id.into();
        if !id.is_empty() && !self.job_ids.contains(&id) {
            self.job_ids.push(id);
        }
        self
    }

    /// Adds JSON pointers whose values become `[REDACTED]` (a role's `redact`).
    #[must_use]
    pub fn with_pointers(mut self, pointers: &[String]) -> Self {
        for p in pointers {
            if !self.pointers.contains(p) {
                self.pointers.push(p.clone());
            }
        }
        self
    }

    /// A normalized copy of `value` (see the module docs for the rules and their order).
    pub fn redact(&self, value: &Value) -> Value {
        let mut v = value.clone();
        redact_pointers(&mut v, &self.pointers);
        redact_sandbox(&mut v, &self.sandbox_roots);
        redact_host_paths(&mut v, &self.host_paths);
        redact_durations(&mut v);
        redact_timestamps(&mut v);
        redact_job_ids_with(&mut v, &self.job_ids);
        redact_idempotency_keys(&mut v);
        redact_etags(&mut v);
        redact_pids(&mut v);
        v
    }

    /// [`Redactor::redact`] plus the snapshot rules (budgets, interrupted progress, numbers in
    /// prose), for comparisons across runs.
    pub fn redact_for_snapshot(&self, value: &Value) -> Value {
        let mut v = self.redact(value);
        redact_budgets(&mut v);
        redact_interrupted_progress(&mut v);
        redact_prose_numbers(&mut v);
        v
    }

    /// Replaces the sandbox directories in a piece of text (stderr, a repro line).
    pub fn redact_text(&self, text: &str) -> String {
        let mut s = text.to_owned();
        replace_roots(&mut s, &self.sandbox_roots);
        replace_host_paths(&mut s, &self.host_paths);
        s
    }
}

/// Rule 8: the value at each of these JSON pointers becomes `[REDACTED]`, where there is one
/// (applied first, so that what it replaces is not half-redacted by another rule).
pub fn redact_pointers(value: &mut Value, pointers: &[String]) {
    for p in pointers {
        if let Some(v) = value.pointer_mut(p) {
            *v = Value::String(REDACTED.to_owned());
        }
    }
}

/// Rule 1: sandbox directories inside strings become `[SANDBOX]`.
pub fn redact_sandbox(value: &mut Value, roots: &[String]) {
    for_each_string(value, &mut |s| replace_roots(s, roots));
}

fn replace_roots(s: &mut String, roots: &[String]) {
    for root in roots {
        if !root.is_empty() && s.contains(root.as_str()) {
            *s = s.replace(root.as_str(), SANDBOX);
        }
    }
}

/// Rule 1, host paths: each path (longest first) becomes its placeholder wherever it stands
/// as a whole path inside a string.
pub fn redact_host_paths(value: &mut Value, paths: &[(String, &'static str)]) {
    if paths.is_empty() {
        return;
    }
    for_each_string(value, &mut |s| replace_host_paths(s, paths));
}

fn replace_host_paths(s: &mut String, paths: &[(String, &'static str)]) {
    for (path, placeholder) in paths {
        if path != "/" && s.contains(path.as_str()) {
            *s = replace_whole_path(s, path, placeholder);
        }
    }
}

/// Characters that continue a file name: a path followed or preceded by one is part of a
/// longer name, not itself.
fn continues_name(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// `text` with every whole-path occurrence of `path` replaced: not preceded by a name
/// character or `/` (the tail of another path), not followed by a name character (a longer
/// name); a following `/` is fine (a file under it). A quoted form ends in its quote and is
/// bounded by it.
fn replace_whole_path(text: &str, path: &str, placeholder: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    while let Some(pos) = text[from..].find(path) {
        let start = from + pos;
        let end = start + path.len();
        let before = text[..start].chars().next_back();
        let after = text[end..].chars().next();
        let quoted = path.starts_with('\'');
        let whole = quoted
            || (before.is_none_or(|c| !continues_name(c) && c != '/')
                && after.is_none_or(|c| !continues_name(c)));
        if whole {
            out.push_str(&text[from..start]);
            out.push_str(placeholder);
            from = end;
        } else {
            let step = path.chars().next().map_or(1, char::len_utf8);
            out.push_str(&text[from..start + step]);
            from = start + step;
        }
    }
    out.push_str(&text[from..]);
    out
}

/// Rule 2: every `duration_ms` value becomes `"[DURATION_MS]"`.
pub fn redact_durations(value: &mut Value) {
    for_each_entry(value, &mut |key, v| {
        if key == "duration_ms" {
            *v = Value::String(DURATION.to_owned());
        }
    });
}

/// Rule 3: RFC 3339 strings, and the values of `timestamp` / `*_at` keys, become
/// `"[TIMESTAMP]"`.
pub fn redact_timestamps(value: &mut Value) {
    for_each_entry(value, &mut |key, v| {
        let named = key == "timestamp" || key.ends_with("_at");
        if named && (v.is_string() || v.is_number()) {
            *v = Value::String(TIMESTAMP.to_owned());
        }
    });
    for_each_string(value, &mut |s| {
        if is_rfc3339(s) {
            TIMESTAMP.clone_into(s);
        }
    });
}

/// Rule 4: job ids become `[JOB_ID]`, `[JOB_ID_2]`, … wherever they appear.
pub fn redact_job_ids(value: &mut Value) {
    redact_job_ids_with(value, &[]);
}

/// Rule 4 with job ids known beforehand, numbered first.
pub fn redact_job_ids_with(value: &mut Value, known: &[String]) {
    let mut ids = known.to_vec();
    collect_key_strings(value, &|k| k == "job_id", &mut ids);
    replace_literals(value, &ids, JOB_ID, &|k| k == "job_id");
}

/// The job ids a command line names: the word after `job wait`, `job status` or
/// `job cancel`.
pub fn job_ids_in_command(words: &[String]) -> Vec<String> {
    words
        .windows(3)
        .filter(|w| w[0] == "job" && matches!(w[1].as_str(), "wait" | "status" | "cancel"))
        .map(|w| unquote(&w[2]))
        .filter(|id| !id.starts_with('-'))
        .collect()
}

/// Rule 5: idempotency keys become `[IDEMPOTENCY_KEY]` wherever they appear.
pub fn redact_idempotency_keys(value: &mut Value) {
    let mut keys = Vec::new();
    collect_key_strings(value, &|k| k == "idempotency_key", &mut keys);
    let mut from_flags = Vec::new();
    for_each_string(value, &mut |s| from_flags.extend(flag_values(s, "--idempotency-key")));
    for key in from_flags {
        if !keys.contains(&key) {
            keys.push(key);
        }
    }
    // All keys share one placeholder: which key a paused writer got is never meaningful.
    replace_literals_same(value, &keys, IDEMPOTENCY_KEY, &|k| k == "idempotency_key");
    // A flag value too short to search for is still replaced right after its flag.
    for_each_string(value, &mut |s| {
        *s = replace_flag_values(s, "--idempotency-key", &format!("[{IDEMPOTENCY_KEY}]"));
    });
}

/// Rule 6: etags become `[ETAG]` wherever they appear.
pub fn redact_etags(value: &mut Value) {
    let mut etags = Vec::new();
    collect_key_strings(value, &|k| k == "etag", &mut etags);
    replace_literals_same(value, &etags, ETAG, &|k| k == "etag");
}

/// Rule 7: process ids become `"[PID]"`.
pub fn redact_pids(value: &mut Value) {
    for_each_entry(value, &mut |key, v| {
        if key == "pid" || key == "pids" || key.ends_with("_pid") {
            match v {
                Value::Array(items) => {
                    for item in items {
                        if item.is_number() || item.is_string() {
                            *item = Value::String(PID.to_owned());
                        }
                    }
                }
                Value::Number(_) | Value::String(_) => *v = Value::String(PID.to_owned()),
                _ => {}
            }
        }
    });
}

/// Snapshot rule 8: budgets and timeouts conform chose become placeholders.
pub fn redact_budgets(value: &mut Value) {
    if let Some(meta) = value.get_mut("meta").and_then(Value::as_object_mut) {
        for (key, placeholder) in [("budget_ms", "[BUDGET_MS]"), ("timeout_ms", "[TIMEOUT_MS]")] {
            if let Some(v) = meta.get_mut(key) {
                if v.as_u64() != Some(0) && !v.is_null() {
                    *v = Value::String(placeholder.to_owned());
                }
            }
        }
    }
    for_each_string(value, &mut |s| {
        for (flag, placeholder) in [("--budget", "[BUDGET]"), ("--timeout", "[TIMEOUT]")] {
            if s.contains(flag) {
                *s = replace_flag_values(s, flag, placeholder);
            }
        }
    });
}

/// Snapshot rule 9: `data.progress.done` of an INCOMPLETE response becomes `"[PROGRESS]"`.
pub fn redact_interrupted_progress(value: &mut Value) {
    let incomplete = value.pointer("/error/code").and_then(Value::as_str) == Some("INCOMPLETE");
    if incomplete {
        if let Some(done) = value.pointer_mut("/data/progress/done") {
            *done = Value::String("[PROGRESS]".to_owned());
        }
    }
}

/// Snapshot rule 10: digit runs in `error.message` and `warnings[].message` become `[N]`;
/// `error.detail` becomes `"[DETAIL]"`.
pub fn redact_prose_numbers(value: &mut Value) {
    if let Some(error) = value.get_mut("error").and_then(Value::as_object_mut) {
        if let Some(Value::String(s)) = error.get_mut("message") {
            *s = numbers_to_placeholder(s);
        }
        if let Some(detail) = error.get_mut("detail") {
            if !detail.is_null() {
                *detail = Value::String("[DETAIL]".to_owned());
            }
        }
    }
    if let Some(warnings) = value.get_mut("warnings").and_then(Value::as_array_mut) {
        for w in warnings {
            if let Some(Value::String(s)) = w.get_mut("message") {
                *s = numbers_to_placeholder(s);
            }
        }
    }
}

fn numbers_to_placeholder(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_number = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                out.push_str("[N]");
                in_number = true;
            }
        } else {
            in_number = false;
            out.push(c);
        }
    }
    out
}

/// Whether `s` is an RFC 3339 date-time: `YYYY-MM-DD`, `T` (or `t` or a space),
/// `HH:MM:SS`, optional fraction, then `Z` or `±HH:MM`.
pub fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        b.get(range.clone())
            .is_some_and(|d| d.len() == range.len() && d.iter().all(u8::is_ascii_digit))
    };
    let at = |i: usize, set: &[u8]| b.get(i).is_some_and(|c| set.contains(c));
    if !(digits(0..4)
        && at(4, b"-")
        && digits(5..7)
        && at(7, b"-")
        && digits(8..10)
        && at(10, b"Tt ")
        && digits(11..13)
        && at(13, b":")
        && digits(14..16)
        && at(16, b":")
        && digits(17..19))
    {
        return false;
    }
    let mut i = 19;
    if at(i, b".") {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match b.get(i) {
        Some(b'Z' | b'z') => i + 1 == b.len(),
        Some(b'+' | b'-') => {
            digits(i + 1..i + 3) && at(i + 3, b":") && digits(i + 4..i + 6) && i + 6 == b.len()
        }
        _ => false,
    }
}

/// The words that follow `flag` (as `flag value` or `flag=value`) in a shell-ready command
/// line, unquoted.
pub fn flag_values(line: &str, flag: &str) -> Vec<String> {
    flag_value_spans(line, flag)
        .into_iter()
        .map(|(start, end)| unquote(&line[start..end]))
        .collect()
}

/// Byte ranges of the words that follow `flag` in `line`.
fn flag_value_spans(line: &str, flag: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut from = 0;
    while let Some(pos) = line[from..].find(flag) {
        let after = from + pos + flag.len();
        from = after;
        let rest = &line[after..];
        let skip = match rest.chars().next() {
            Some('=') => 1,
            Some(c) if c.is_whitespace() => rest.len() - rest.trim_start().len(),
            _ => continue,
        };
        let start = after + skip;
        let word = &line[start..];
        let len = match word.chars().next() {
            Some(q @ ('\'' | '"')) => word[1..].find(q).map_or(word.len(), |e| e + 2),
            Some(_) => word.find(char::is_whitespace).unwrap_or(word.len()),
            None => 0,
        };
        if len > 0 {
            spans.push((start, start + len));
            from = start + len;
        }
    }
    spans
}

fn replace_flag_values(line: &str, flag: &str, placeholder: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut last = 0;
    for (start, end) in flag_value_spans(line, flag) {
        out.push_str(&line[last..start]);
        out.push_str(placeholder);
        last = end;
    }
    out.push_str(&line[last..]);
    out
}

fn unquote(word: &str) -> String {
    let w = word.trim();
    for q in ['\'', '"'] {
        if let Some(inner) = w.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner.to_owned();
        }
    }
    w.to_owned()
}

/// Calls `f` on every string value (not keys), depth first.
fn for_each_string(value: &mut Value, f: &mut impl FnMut(&mut String)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter_mut().for_each(|v| for_each_string(v, f)),
        Value::Object(map) => map.values_mut().for_each(|v| for_each_string(v, f)),
        _ => {}
    }
}

/// Calls `f` on every object entry, depth first (the entry before its children).
fn for_each_entry(value: &mut Value, f: &mut impl FnMut(&str, &mut Value)) {
    match value {
        Value::Array(items) => items.iter_mut().for_each(|v| for_each_entry(v, f)),
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                f(key, v);
                for_each_entry(v, f);
            }
        }
        _ => {}
    }
}

/// Collects the distinct string values of keys matching `is_key`, in document order.
fn collect_key_strings(value: &Value, is_key: &impl Fn(&str) -> bool, out: &mut Vec<String>) {
    match value {
        Value::Array(items) => items.iter().for_each(|v| collect_key_strings(v, is_key, out)),
        Value::Object(map) => {
            for (key, v) in map {
                if is_key(key) {
                    if let Value::String(s) = v {
                        if !s.is_empty() && !out.contains(s) {
                            out.push(s.clone());
                        }
                    }
                }
                collect_key_strings(v, is_key, out);
            }
        }
        _ => {}
    }
}

/// Replaces each literal with a numbered placeholder (`[NAME]`, `[NAME_2]`, …): whole values
/// of keys matching `is_key`, and occurrences inside any string when long enough.
fn replace_literals(
    value: &mut Value,
    literals: &[String],
    name: &str,
    is_key: &impl Fn(&str) -> bool,
) {
    let placeholders: Vec<String> = (0..literals.len())
        .map(|i| if i == 0 { format!("[{name}]") } else { format!("[{name}_{}]", i + 1) })
        .collect();
    replace_with(value, literals, &placeholders, is_key);
}

/// Like [`replace_literals`], but every literal gets the same placeholder `[NAME]`.
fn replace_literals_same(
    value: &mut Value,
    literals: &[String],
    name: &str,
    is_key: &impl Fn(&str) -> bool,
) {
    let placeholders = vec![format!("[{name}]"); literals.len()];
    replace_with(value, literals, &placeholders, is_key);
}

fn replace_with(
    value: &mut Value,
    literals: &[String],
    placeholders: &[String],
    is_key: &impl Fn(&str) -> bool,
) {
    // Whole values first, keyed.
    for_each_entry(value, &mut |key, v| {
        if is_key(key) {
            if let Value::String(s) = v {
                if let Some(i) = literals.iter().position(|l| l == s) {
                    s.clone_from(&placeholders[i]);
                }
            }
        }
    });
    // Then occurrences inside other strings, longest literal first.
    let mut order: Vec<usize> =
        (0..literals.len()).filter(|&i| literals[i].chars().count() >= MIN_LITERAL_LEN).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(literals[i].len()));
    for_each_string(value, &mut |s| {
        for &i in &order {
            if s.contains(literals[i].as_str()) {
                *s = s.replace(literals[i].as_str(), &placeholders[i]);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_profile_s_pointers_are_redacted_where_the_response_has_them() {
        let redactor = Redactor::new().with_pointers(&["/data/slept_ms".into(), "/data/no".into()]);
        let v = redactor.redact(&json!({"data": {"slept_ms": 2004, "rows": 3}}));
        assert_eq!(v, json!({"data": {"slept_ms": REDACTED, "rows": 3}}));
    }

    #[test]
    fn rfc3339_forms() {
        assert!(is_rfc3339("2026-11-29T20:44:04Z"));
        assert!(is_rfc3339("2026-11-29T20:44:04.123456+01:00"));
        assert!(is_rfc3339("2026-11-29 20:44:04-05:30"));
        assert!(!is_rfc3339("2026-11-29"));
        assert!(!is_rfc3339("2026-11-29T20:44:04"));
        assert!(!is_rfc3339("2026-11-29T20:44:04Zextra"));
        assert!(!is_rfc3339("2026-11-29T20:44:04.Z"));
        assert!(!is_rfc3339("build 2026-11-29T20:44:04Z"));
    }

    #[test]
    fn flag_values_in_command_lines() {
        assert_eq!(
            flag_values("tool import a.csv --idempotency-key k1 --x", "--idempotency-key"),
            vec!["k1"]
        );
        assert_eq!(flag_values("tool --idempotency-key='a b' x", "--idempotency-key"), vec!["a b"]);
        assert_eq!(
            flag_values("tool --idempotency-keyless x", "--idempotency-key"),
            Vec::<String>::new()
        );
        assert_eq!(
            replace_flag_values("t --idempotency-key \"q r\" z", "--idempotency-key", "[K]"),
            "t --idempotency-key [K] z"
        );
    }

    #[test]
    fn short_literals_are_only_replaced_under_their_key() {
        let mut v = json!({"job_id": "ab", "note": "ab is here"});
        redact_job_ids(&mut v);
        assert_eq!(v, json!({"job_id": "[JOB_ID]", "note": "ab is here"}));
    }

    #[test]
    fn pid_arrays_and_suffixes() {
        let mut v = json!({"worker_pid": 7, "pids": [1, 2], "pidfile": "x"});
        redact_pids(&mut v);
        assert_eq!(v, json!({"worker_pid": "[PID]", "pids": ["[PID]", "[PID]"], "pidfile": "x"}));
    }

    /// A response of a paused writer, as a tool might print it.
    fn paused() -> Value {
        json!({
            "ok": false,
            "data": {
                "state": "paused",
                "job_id": "j-7f3a9c2e41d0b865",
                "progress": {"done": 40, "total": 100, "unit": "rows"},
                "continue_command": "tool import /tmp/sbx-1/in.csv --idempotency-key k-93ab71c2",
                "cancel_command": "tool job cancel j-7f3a9c2e41d0b865",
                "started_at": "2026-11-29T20:44:04.5Z",
                "worker_pid": 4242,
                "etag": "sha256:0badc0ffee"
            },
            "error": {"code": "INCOMPLETE", "message": "budget spent", "retryable": false},
            "warnings": [],
            "meta": {"exit_code": 14, "duration_ms": 2013, "budget_ms": 2000}
        })
    }

    #[test]
    fn each_rule_changes_what_it_names_and_nothing_else() {
        let original = paused();
        type Rule = fn(&mut Value);
        let cases: Vec<(&str, Rule, &str, Value)> = vec![
            ("durations", redact_durations, "/meta/duration_ms", json!("[DURATION_MS]")),
            ("timestamps", redact_timestamps, "/data/started_at", json!("[TIMESTAMP]")),
            ("job ids", redact_job_ids, "/data/job_id", json!("[JOB_ID]")),
            (
                "job ids in cancel_command",
                redact_job_ids,
                "/data/cancel_command",
                json!("tool job cancel [JOB_ID]"),
            ),
            (
                "idempotency keys",
                redact_idempotency_keys,
                "/data/continue_command",
                json!("tool import /tmp/sbx-1/in.csv --idempotency-key [IDEMPOTENCY_KEY]"),
            ),
            ("etags", redact_etags, "/data/etag", json!("[ETAG]")),
            ("pids", redact_pids, "/data/worker_pid", json!("[PID]")),
        ];
        for (rule, apply, pointer, expected) in cases {
            let mut v = original.clone();
            apply(&mut v);
            assert_eq!(v.pointer(pointer), Some(&expected), "rule {rule}");
            // Kept: what the contract is about.
            assert_eq!(v["meta"]["budget_ms"], 2000, "rule {rule}");
            assert_eq!(v["data"]["progress"]["done"], 40, "rule {rule}");
            assert_eq!(v["error"]["code"], "INCOMPLETE", "rule {rule}");
        }
    }

    #[test]
    fn sandbox_root_becomes_a_placeholder() {
        let mut v = paused();
        redact_sandbox(&mut v, &["/tmp/sbx-1".to_owned()]);
        assert_eq!(
            v["data"]["continue_command"],
            "tool import [SANDBOX]/in.csv --idempotency-key k-93ab71c2"
        );
    }

    #[test]
    fn two_runs_of_the_same_work_compare_equal_after_redaction() {
        let first = paused();
        let mut second = paused();
        second["data"]["job_id"] = json!("j-00000000deadbeef");
        second["data"]["cancel_command"] = json!("tool job cancel j-00000000deadbeef");
        second["data"]["continue_command"] =
            json!("tool import /tmp/sbx-2/in.csv --idempotency-key k-11112222");
        second["data"]["started_at"] = json!("2026-11-30T01:02:03+02:00");
        second["data"]["worker_pid"] = json!(99);
        second["data"]["etag"] = json!("sha256:feedface00");
        second["meta"]["duration_ms"] = json!(1999);
        assert_ne!(first, second);
        let a = Redactor::new().with_sandbox_root("/tmp/sbx-1").redact(&first);
        let b = Redactor::new().with_sandbox_root("/tmp/sbx-2").redact(&second);
        assert_eq!(a, b);
        // A real difference survives.
        second["data"]["progress"]["done"] = json!(41);
        let c = Redactor::new().with_sandbox_root("/tmp/sbx-2").redact(&second);
        assert_ne!(a, c);
    }

    #[test]
    fn known_job_ids_are_redacted_in_prose_and_numbered_first() {
        let mut v = json!({"error": {"code": "JOB_LOST",
            "message": "the worker of job 8c182ae3ba173c37 died"}, "data": {"job_id": "j-bbbbbbbbbbbb"}});
        redact_job_ids_with(&mut v, &["8c182ae3ba173c37".to_owned()]);
        assert_eq!(v["error"]["message"], "the worker of job [JOB_ID] died");
        assert_eq!(v["data"]["job_id"], "[JOB_ID_2]");
        let words: Vec<String> = ["tool", "job", "wait", "'abc123'", "--budget", "1s"]
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(job_ids_in_command(&words), vec!["abc123"]);
    }

    #[test]
    fn snapshot_rules_hide_timing_and_keep_the_rest() {
        let mut v = paused();
        v["data"]["continue_command"] = json!("tool import in.csv --budget 630ms --timeout=5s");
        v["warnings"] = json!([{"code": "W", "message": "took 12 of 40 s"}]);
        let mut budgets = v.clone();
        redact_budgets(&mut budgets);
        assert_eq!(budgets["meta"]["budget_ms"], "[BUDGET_MS]");
        assert_eq!(
            budgets["data"]["continue_command"],
            "tool import in.csv --budget [BUDGET] --timeout=[TIMEOUT]"
        );
        let mut off = json!({"meta": {"budget_ms": 0}});
        redact_budgets(&mut off);
        assert_eq!(off["meta"]["budget_ms"], 0);

        let mut progress = v.clone();
        redact_interrupted_progress(&mut progress);
        assert_eq!(progress["data"]["progress"]["done"], "[PROGRESS]");
        assert_eq!(progress["data"]["progress"]["total"], 100);
        let mut finished = json!({"error": null, "data": {"progress": {"done": 5}}});
        redact_interrupted_progress(&mut finished);
        assert_eq!(finished["data"]["progress"]["done"], 5);

        let mut prose = v.clone();
        prose["error"]["message"] = json!("Call budget of 720ms reached at 19%");
        prose["error"]["detail"] = json!("20:58:50 [716] worker started");
        redact_prose_numbers(&mut prose);
        assert_eq!(prose["error"]["message"], "Call budget of [N]ms reached at [N]%");
        assert_eq!(prose["warnings"][0]["message"], "took [N] of [N] s");
        assert_eq!(prose["error"]["detail"], "[DETAIL]");
        assert_eq!(prose["data"]["progress"]["done"], 40, "data is not prose");

        // The plain redaction keeps all of it.
        let plain = Redactor::new().redact(&v);
        assert_eq!(plain["meta"]["budget_ms"], 2000);
        assert_eq!(plain["data"]["progress"]["done"], 40);
        let snap = Redactor::new().redact_for_snapshot(&v);
        assert_eq!(snap["meta"]["budget_ms"], "[BUDGET_MS]");
    }

    #[test]
    fn host_paths_are_replaced_as_whole_paths_only() {
        let mut r = Redactor::new().with_tool("bin/t", "/opt/my tool/bin/t");
        r.add_host_path(Path::new("/home/u"), HOME);
        r.add_host_path(Path::new("/"), CWD);
        let mut v = json!({
            "continue_command": "'/opt/my tool/bin/t' job wait j-1",
            "plain": "/opt/my tool/bin/t --help; see /opt/my tool/bin/t.conf",
            "dir": "/opt/my tool/bin/data.csv",
            "relative": "ran bin/t and /x/bin/t",
            "home": "/home/u/.cache and /home/user and /home/u",
            "root": "/etc/passwd",
        });
        redact_host_paths(&mut v, &r.host_paths);
        assert_eq!(
            v,
            json!({
                "continue_command": "[TOOL] job wait j-1",
                "plain": "[TOOL] --help; see [TOOL_DIR]/t.conf",
                "dir": "[TOOL_DIR]/data.csv",
                "relative": "ran [TOOL] and /x/bin/t",
                "home": "[HOME]/.cache and /home/user and [HOME]",
                "root": "/etc/passwd",
            })
        );
    }

    #[test]
    fn distinct_job_ids_stay_distinct() {
        let mut v = json!({"jobs": [{"job_id": "j-aaaaaaaaaaaa"}, {"job_id": "j-bbbbbbbbbbbb"}],
                           "note": "j-bbbbbbbbbbbb waits"});
        redact_job_ids(&mut v);
        assert_eq!(
            v,
            json!({"jobs": [{"job_id": "[JOB_ID]"}, {"job_id": "[JOB_ID_2]"}],
                   "note": "[JOB_ID_2] waits"})
        );
    }
}
