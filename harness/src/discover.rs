//! Stage: discover. What the tool says about itself: `TOOL manifest`, read once per run, and
//! the static registration rules of CONTRACT §2 checked on it.
//!
//! The manifest is accepted bare (as the seeds print it) or wrapped in an envelope as `data`.
//! From it conform learns which commands are interruptible and which write, so that it never
//! runs a mutating or destructive command the profile did not name.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::outcome::Finding;
use crate::scenario::ManifestRule;
use crate::schemas::unwrap_manifest;

/// What conform knows about one command of the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandInfo {
    /// `safe`, `mutating` or `destructive` (as written; unknown values kept).
    pub danger_level: String,
    /// `interruption.detach`, when declared.
    pub detach: Option<bool>,
    /// `interruption.resume`, when declared.
    pub resume: Option<bool>,
    /// `async: true`.
    pub is_async: bool,
    /// The flag names it declares.
    pub flags: BTreeSet<String>,
}

impl CommandInfo {
    /// Whether it declares `interruption`.
    pub fn interruptible(&self) -> bool {
        self.detach.is_some() || self.resume.is_some()
    }

    /// Whether it writes (mutating or destructive).
    pub fn writes(&self) -> bool {
        matches!(self.danger_level.as_str(), "mutating" | "destructive")
    }
}

/// The commands of a manifest, by dot-separated path.
#[derive(Debug, Clone, Default)]
pub struct Commands {
    /// By path, e.g. `job.wait`.
    pub by_path: BTreeMap<String, CommandInfo>,
}

impl Commands {
    /// Reads the commands of a manifest response (bare or wrapped).
    pub fn from_manifest(response: &Value) -> Self {
        let manifest = unwrap_manifest(response);
        let mut by_path = BTreeMap::new();
        if let Some(commands) = manifest.get("commands").and_then(Value::as_object) {
            for (path, entry) in commands {
                let interruption = entry.get("interruption").filter(|v| v.is_object());
                let flag = |k: &str| interruption.and_then(|i| i.get(k)).and_then(Value::as_bool);
                by_path.insert(
                    path.clone(),
                    CommandInfo {
                        danger_level: entry
                            .get("danger_level")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                        detach: interruption.map(|_| flag("detach").unwrap_or(false)),
                        resume: interruption.map(|_| flag("resume").unwrap_or(false)),
                        is_async: entry.get("async").and_then(Value::as_bool).unwrap_or(false),
                        flags: entry
                            .get("flags")
                            .and_then(Value::as_object)
                            .map(|f| f.keys().cloned().collect())
                            .unwrap_or_default(),
                    },
                );
            }
        }
        Self { by_path }
    }

    /// The command an argument list invokes: the longest run of leading words (up to the first
    /// flag) that names a command path.
    pub fn command_for_args<'a>(&'a self, args: &[String]) -> Option<(&'a str, &'a CommandInfo)> {
        let words: Vec<&str> =
            args.iter().map(String::as_str).take_while(|a| !a.starts_with('-')).collect();
        (1..=words.len()).rev().find_map(|n| {
            let path = words[..n].join(".");
            self.by_path.get_key_value(&path).map(|(k, v)| (k.as_str(), v))
        })
    }
}

/// Checks one registration rule on a manifest response; each violation is a finding naming the
/// command and showing the offending entry.
pub fn check_rule(rule: ManifestRule, response: &Value) -> Vec<Finding> {
    let manifest = unwrap_manifest(response);
    let Some(commands) = manifest.get("commands").and_then(Value::as_object) else {
        return vec![
            Finding::new("manifest-rule", "the manifest has no `commands` object")
                .actual(compact(manifest)),
        ];
    };
    let mut findings = Vec::new();
    for (path, entry) in commands {
        let interruption = entry.get("interruption").filter(|v| !v.is_null());
        let danger = entry.get("danger_level").and_then(Value::as_str).unwrap_or("");
        let writes = matches!(danger, "mutating" | "destructive");
        let flags = entry.get("flags").and_then(Value::as_object);
        let has_flag = |name: &str| flags.is_some_and(|f| f.contains_key(name));
        let get_bool =
            |v: Option<&Value>, k: &str| v.and_then(|v| v.get(k)).and_then(Value::as_bool);
        let mut fail = |message: String, expected: &str, actual: String| {
            findings.push(
                Finding::new("manifest-rule", format!("command `{path}`: {message}"))
                    .expected(expected.to_owned())
                    .actual(actual),
            );
        };
        match rule {
            ManifestRule::DetachOrResume => {
                if let Some(i) = interruption
                    && get_bool(Some(i), "detach") != Some(true)
                    && get_bool(Some(i), "resume") != Some(true)
                {
                    fail(
                        "declares interruption with neither detach nor resume".into(),
                        "detach: true or resume: true",
                        compact(i),
                    );
                }
            }
            ManifestRule::IncompleteEntry => {
                if let Some(i) = interruption
                    && entry.get("exit_codes").and_then(|c| c.get("14")).is_none()
                {
                    fail(
                        format!("declares interruption {} but no exit code \"14\"", compact(i)),
                        "an exit_codes entry \"14\" (INCOMPLETE)",
                        format!(
                            "exit_codes keys: {}",
                            entry
                                .get("exit_codes")
                                .and_then(Value::as_object)
                                .map(|c| c.keys().cloned().collect::<Vec<_>>().join(", "))
                                .unwrap_or_else(|| "none".into())
                        ),
                    );
                }
            }
            ManifestRule::IncompleteEntryShape => {
                if interruption.is_some()
                    && let Some(e14) = entry.get("exit_codes").and_then(|c| c.get("14"))
                {
                    let retryable = e14.get("retryable").and_then(Value::as_bool);
                    let side = e14.get("side_effects").and_then(Value::as_str);
                    let (want_r, want_s) = if writes { (false, "partial") } else { (true, "none") };
                    if retryable != Some(want_r) || side != Some(want_s) {
                        fail(
                            format!("the \"14\" entry of a {danger} command has the wrong shape"),
                            &format!("retryable: {want_r}, side_effects: \"{want_s}\""),
                            compact(e14),
                        );
                    }
                }
            }
            ManifestRule::NotAsyncOrStreaming => {
                if interruption.is_some() {
                    let mut bad = Vec::new();
                    for key in ["async", "streaming_default", "supports_streaming"] {
                        if entry.get(key).and_then(Value::as_bool) == Some(true) {
                            bad.push(format!("{key}: true"));
                        }
                    }
                    if entry.get("stdout").and_then(Value::as_str) == Some("protocol") {
                        bad.push("stdout: \"protocol\"".into());
                    }
                    if !bad.is_empty() {
                        fail(
                            "declares interruption together with a declaration that excludes it"
                                .into(),
                            "no async, streaming or protocol stdout beside interruption",
                            bad.join(", "),
                        );
                    }
                }
            }
            ManifestRule::ResumableWriterHasKey => {
                if writes
                    && get_bool(interruption, "resume") == Some(true)
                    && !has_flag("idempotency-key")
                {
                    fail(
                        format!("is {danger} and resumable but has no idempotency-key flag"),
                        "an `idempotency-key` flag",
                        format!(
                            "flags: {}",
                            flags
                                .map(|f| f.keys().cloned().collect::<Vec<_>>().join(", "))
                                .unwrap_or_default()
                        ),
                    );
                }
            }
            ManifestRule::BudgetFlagOnlyWhenInterruptible => {
                // CONTRACT §9: the `job.*` built-ins may show `--budget` either way.
                if path == "job" || path.starts_with("job.") {
                    continue;
                }
                match (interruption.is_some(), has_flag("budget")) {
                    (true, false) => fail(
                        "declares interruption but has no budget flag".into(),
                        "a `budget` flag",
                        "no `budget` flag".into(),
                    ),
                    (false, true) => fail(
                        "has a budget flag but declares no interruption".into(),
                        "no `budget` flag on a command without interruption",
                        compact(flags.and_then(|f| f.get("budget")).unwrap_or(&Value::Null)),
                    ),
                    _ => {}
                }
            }
        }
    }
    findings
}

/// A JSON value on one line, cut at a readable length.
pub fn compact(value: &Value) -> String {
    let text = value.to_string();
    if text.len() > 400 {
        let mut end = 400;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &text[..end])
    } else {
        text
    }
}
