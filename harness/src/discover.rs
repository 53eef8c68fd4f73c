//! Stage: discover. What the tool says about itself: `TOOL manifest`, read once per run. (The
//! static registration rules of CONTRACT §2 checked on it are checks: `checks::manifest`.)
//!
//! [`discover`] runs the manifest command once, in an empty prepared sandbox, bounded by
//! [`DISCOVERY_LIMIT`]; `conform run` and `conform init` both start here. What went wrong, when
//! it did, is a [`DiscoveryError`] that says whether the tool hung, failed or printed no JSON.
//! The manifest is accepted bare (as the seeds print it) or wrapped in an envelope as `data`.
//! From it conform learns which commands are interruptible and which write, so that it never
//! runs a mutating or destructive command the profile did not name.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::time::Duration;

use serde_json::Value;

use crate::exec::{self, Program, Termination};
use crate::observe::{self, StdoutProblem};
use crate::prepare::{self, Needs};
use crate::profile::Profile;
use crate::schemas::unwrap_manifest;
use crate::tool::Tool;

/// Bound on the manifest command (a manifest that takes longer is broken anyway).
pub const DISCOVERY_LIMIT: Duration = Duration::from_secs(10);

/// The subject of a run: the tool, the profile that describes it, and what its manifest said.
#[derive(Debug, Clone)]
pub struct Subject {
    /// How the tool is invoked.
    pub tool: Tool,
    /// The profile (possibly empty).
    pub profile: Profile,
    /// The commands the manifest declares (empty when it could not be read).
    pub commands: Commands,
}

/// The manifest, as the tool answered it.
#[derive(Debug, Clone)]
pub struct Discovery {
    /// The response (bare manifest or envelope).
    pub response: Value,
    /// Its commands.
    pub commands: Commands,
}

/// Why the manifest command gave no manifest.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// No sandbox to run it in, or conform was interrupted.
    #[error("failed to prepare a sandbox for the manifest command: {0}")]
    Prepare(#[from] prepare::PrepareError),
    /// The process could not be started.
    #[error("failed to run the manifest command: {0}")]
    Spawn(#[from] exec::ExecError),
    /// It was still running at the limit.
    #[error("the manifest command did not answer within {} ms", limit.as_millis())]
    Hung {
        /// The limit it outlived.
        limit: Duration,
    },
    /// It was killed by a signal.
    #[error("the manifest command was killed by signal {0}")]
    Signaled(i32),
    /// It exited without a JSON document on stdout.
    #[error("the manifest command exited {code} without one JSON document on stdout ({problem:?})")]
    NoJson {
        /// Its exit code.
        code: i32,
        /// What stdout held instead.
        problem: StdoutProblem,
    },
}

/// The argv of the manifest command: the profile's `[kit] manifest` arguments, or `manifest`.
pub fn manifest_argv(tool: &Tool, profile: &Profile) -> Vec<String> {
    let mut argv = tool.argv();
    match &profile.file.kit.manifest {
        Some(args) => argv.extend(args.iter().cloned()),
        None => argv.push("manifest".to_owned()),
    }
    argv
}

/// Runs the manifest command once in an empty sandbox and reads its commands.
pub fn discover(tool: &Tool, profile: &Profile) -> Result<Discovery, DiscoveryError> {
    // Only scenario and calibration sandboxes are worth keeping for a look.
    let sandbox = prepare::prepare(tool, profile, &Needs::default(), false)?;
    let argv = manifest_argv(tool, profile);
    let mut inv = sandbox.invocation(Program::Argv(argv.into_iter().map(OsString::from).collect()));
    inv.timeout = DISCOVERY_LIMIT;
    let outcome = exec::run(&inv)?;
    let code = match outcome.termination {
        Termination::Exited(code) => code,
        Termination::TimedOut => return Err(DiscoveryError::Hung { limit: DISCOVERY_LIMIT }),
        Termination::Signaled(signal) => return Err(DiscoveryError::Signaled(signal)),
    };
    let response = observe::parse_stdout(&outcome)
        .map_err(|problem| DiscoveryError::NoJson { code, problem })?;
    let commands = Commands::from_manifest(&response);
    Ok(Discovery { response, commands })
}

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
