//! Stage: discover. What the tool says about itself: `TOOL manifest`, read once per run. (The
//! static registration rules of CONTRACT §2 checked on it are checks: `checks::manifest`.)
//!
//! The manifest is accepted bare (as the seeds print it) or wrapped in an envelope as `data`.
//! From it conform learns which commands are interruptible and which write, so that it never
//! runs a mutating or destructive command the profile did not name.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

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
