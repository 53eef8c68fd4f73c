//! Stage: discover. What the tool says about itself: `TOOL manifest`, read once per run. (The
//! static registration rules of docs/contract.md §2 checked on it are checks: `checks::manifest`.)
//!
//! [`discover`] runs the manifest command once, in an empty prepared sandbox, bounded by
//! [`DISCOVERY_LIMIT`]; `conform run` and `conform init` both start here. What went wrong, when
//! it did, is a [`DiscoveryError`] that says whether the tool hung, failed or printed no JSON.
//! The manifest is accepted bare (as the spec's examples print it) or wrapped in an envelope as `data`.
//! From it conform learns which commands are interruptible and which write, so that it never
//! runs a mutating or destructive command the profile did not name.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::time::Duration;

use serde_json::Value;

use crate::exec::{self, Program, Termination};
use crate::observe::{self, StdoutProblem};
use crate::outcome::{Finding, FindingKind, Repro, SkipReason, StepRecord};
use crate::prepare::{self, Needs};
use crate::profile::Profile;
use crate::scenario::{Declaration, Scenario};
use crate::schemas::{effective_entry, unwrap_manifest};
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
    /// `{startup}`: how long the manifest command took (zero when it did not answer).
    pub startup: Duration,
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
    /// It answered JSON that holds no `commands` object.
    #[error("the manifest command exited {code} with JSON that holds no `commands`")]
    NoCommands {
        /// Its exit code.
        code: i32,
    },
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
    argv.extend(profile.manifest_args());
    argv
}

/// The manifest command's one run: what it came to, and its evidence when it ran.
#[derive(Debug)]
pub struct DiscoveryRun {
    /// The manifest, or why there is none.
    pub result: Result<Discovery, DiscoveryError>,
    /// The invocation and what it did (none when it could not be started).
    pub record: Option<StepRecord>,
    /// The CPU time the manifest command took (its main process; `None` where the kernel
    /// keeps no scheduler statistics): what one call of the tool costs the machine.
    pub cpu_per_call: Option<Duration>,
}

impl DiscoveryRun {
    /// `{startup}`: how long the manifest command took, when it answered.
    pub fn startup(&self) -> Duration {
        match (&self.result, &self.record) {
            (Ok(_), Some(r)) => Duration::from_millis(r.elapsed_ms),
            _ => Duration::ZERO,
        }
    }

    /// The commands the manifest declares (none without a manifest).
    pub fn commands(&self) -> Commands {
        self.result.as_ref().map(|d| d.commands.clone()).unwrap_or_default()
    }

    /// Why a scenario does not run because of the manifest command: after a hang, a signal or
    /// a tool that cannot start, nothing but the headline runs (each call would only hang or
    /// fail the same way); without a manifest, the scenarios that judge one are skipped. The
    /// headline (the scenario tagged [`HEADLINE_TAG`]) always runs and carries the news.
    pub fn skip_for(&self, scenario: &Scenario) -> Option<SkipReason> {
        let Err(error) = &self.result else { return None };
        if scenario.tags.iter().any(|t| t == HEADLINE_TAG) {
            return None;
        }
        let why = error.to_string();
        match error {
            DiscoveryError::Prepare(_) => None,
            DiscoveryError::Hung { .. }
            | DiscoveryError::Signaled(_)
            | DiscoveryError::Spawn(_) => Some(SkipReason::ToolUnusable { why }),
            DiscoveryError::NoJson { .. } | DiscoveryError::NoCommands { .. } => scenario
                .tags
                .iter()
                .any(|t| t == "manifest")
                .then_some(SkipReason::NoManifest { why }),
        }
    }

    /// The headline's result when the manifest command never answered: it is not run again
    /// (it would hang again); its one finding is the discovery's.
    pub fn headline_finding(&self) -> Option<Finding> {
        let error = self.result.as_ref().err()?;
        let kind = match error {
            DiscoveryError::Hung { .. } => FindingKind::Timeout,
            DiscoveryError::Signaled(_) | DiscoveryError::Spawn(_) => FindingKind::ExitCode,
            DiscoveryError::Prepare(_)
            | DiscoveryError::NoJson { .. }
            | DiscoveryError::NoCommands { .. } => return None,
        };
        Some(
            Finding::new(kind, error.to_string())
                .expected(format!(
                    "one manifest on stdout within {} ms",
                    DISCOVERY_LIMIT.as_millis()
                ))
                .actual(
                    self.record
                        .as_ref()
                        .map_or_else(|| "no process".to_owned(), |r| r.ended.to_string()),
                ),
        )
    }
}

/// The tag of the scenario that reports a manifest command that failed (`manifest-valid`).
pub const HEADLINE_TAG: &str = "discovery";

/// Runs the manifest command once in an empty sandbox and reads its commands.
pub fn discover(tool: &Tool, profile: &Profile) -> DiscoveryRun {
    // Only scenario and calibration sandboxes are worth keeping for a look.
    let sandbox = match prepare::prepare(tool, profile, &Needs::default(), false) {
        Ok(s) => s,
        Err(e) => return DiscoveryRun { result: Err(e.into()), record: None, cpu_per_call: None },
    };
    let argv = manifest_argv(tool, profile);
    let mut inv = sandbox.invocation(Program::Argv(argv.into_iter().map(OsString::from).collect()));
    inv.timeout = DISCOVERY_LIMIT;
    let outcome = match exec::run(&inv) {
        Ok(o) => o,
        Err(e) => return DiscoveryRun { result: Err(e.into()), record: None, cpu_per_call: None },
    };
    let json = observe::parse_stdout(&outcome);
    let repro = Repro::from_invocation(&inv, &sandbox.env());
    let record = StepRecord::from_exec("discovery", repro, &outcome, json.as_ref().ok());
    let result = match (outcome.termination, json) {
        (Termination::TimedOut, _) => Err(DiscoveryError::Hung { limit: DISCOVERY_LIMIT }),
        (Termination::Signaled(signal), _) => Err(DiscoveryError::Signaled(signal)),
        (Termination::Exited(code), Err(problem)) => Err(DiscoveryError::NoJson { code, problem }),
        (Termination::Exited(code), Ok(response)) => {
            match unwrap_manifest(&response).get("commands").filter(|c| c.is_object()) {
                Some(_) => Ok(Discovery { commands: Commands::from_manifest(&response), response }),
                None => Err(DiscoveryError::NoCommands { code }),
            }
        }
    };
    DiscoveryRun { result, record: Some(record), cpu_per_call: outcome.usage.map(|u| u.cpu) }
}

/// The idle timeout a job of a role's command has, as the manifest declares it when run with
/// the role's environment (a tool may let its environment shorten it, and declare what is in
/// force): `interruption.idle_timeout_ms` of the command, or REQ-F-081's default of 300000 ms
/// when it declares none. `Err` says why it could not be read.
pub fn idle_timeout_of(subject: &Subject, role_name: &str) -> Result<Duration, String> {
    declared_limit_of(subject, role_name, "/interruption/idle_timeout_ms", DEFAULT_IDLE_TIMEOUT)
}

/// The lifetime of a role's command's work without `--timeout`, as the manifest declares it
/// when run with the role's environment: `interruption.max_lifetime_ms`, or REQ-F-081's default
/// of 3600000 ms when it declares none.
pub fn max_lifetime_of(subject: &Subject, role_name: &str) -> Result<Duration, String> {
    declared_limit_of(subject, role_name, "/interruption/max_lifetime_ms", DEFAULT_MAX_LIFETIME)
}

/// A limit in milliseconds at `pointer` of the entry of the role's command in the manifest the
/// tool prints with the role's environment, or `default` when the entry declares none.
fn declared_limit_of(
    subject: &Subject,
    role_name: &str,
    pointer: &str,
    default: Duration,
) -> Result<Duration, String> {
    let profile = &subject.profile;
    let role = profile.role(role_name).ok_or_else(|| format!("no role `{role_name}`"))?;
    let (path, _) = subject
        .commands
        .command_for_args(&role.argv)
        .ok_or_else(|| format!("role `{role_name}` runs no command of the manifest"))?;
    let sandbox = prepare::prepare(&subject.tool, profile, &Needs::default(), false)
        .map_err(|e| e.to_string())?;
    let argv = manifest_argv(&subject.tool, profile);
    let mut inv = sandbox.invocation(Program::Argv(argv.into_iter().map(OsString::from).collect()));
    for (k, v) in crate::profile::render_env(&role.env, sandbox.root(), &sandbox.work()) {
        inv.env.insert(k.into(), v.into());
    }
    inv.timeout = DISCOVERY_LIMIT;
    let outcome = exec::run(&inv).map_err(|e| e.to_string())?;
    let response = observe::parse_stdout(&outcome).map_err(|p| {
        format!(
            "the manifest command with role `{role_name}`'s environment gave no manifest: {p:?}"
        )
    })?;
    let declared = unwrap_manifest(&response)
        .get("commands")
        .and_then(|c| c.get(path))
        .and_then(|c| c.pointer(pointer))
        .and_then(Value::as_u64);
    Ok(declared.map_or(default, Duration::from_millis))
}

/// REQ-F-081's idle timeout of a job whose command declares none.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);

/// REQ-F-081's lifetime of work whose command declares none (one hour).
pub const DEFAULT_MAX_LIFETIME: Duration = Duration::from_secs(3600);

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
    /// `supports_streaming` or `streaming_default` is true.
    pub streams: bool,
    /// The flag names it declares.
    pub flags: BTreeSet<String>,
    /// `retryable` of its INCOMPLETE (`"14"`) exit-code entry, when it declares one: what an
    /// INCOMPLETE response of the command copies into `error.retryable` (REQ-F-082). The entry
    /// is the command's effective one: its own, else the root table's it inherits.
    pub incomplete_retryable: Option<bool>,
    /// The codes of its effective exit-code table: the manifest's root `exit_codes` overlaid
    /// with its own (the manifest schema: a command lists only codes absent from the root
    /// table or differing from it).
    pub exit_codes: BTreeSet<i32>,
    /// A framework built-in (`"builtin": true`, or the job runtime's, `manifest`, `version`,
    /// `help`): no vendor's work, so never a role's command or a probe `init` proposes.
    pub builtin: bool,
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

    /// Whether it makes this declaration.
    pub fn declares(&self, declaration: Declaration) -> bool {
        let resume_only = self.resume == Some(true) && self.detach != Some(true);
        match declaration {
            Declaration::Interruption => self.interruptible(),
            Declaration::Detach => self.detach == Some(true),
            Declaration::DetachOnly => self.detach == Some(true) && self.resume != Some(true),
            Declaration::DetachResume => self.detach == Some(true) && self.resume == Some(true),
            Declaration::ResumeReader => resume_only && !self.writes(),
            Declaration::ResumeWriter => resume_only && self.writes(),
            Declaration::Async => self.is_async,
            Declaration::IdempotencyKey => self.writes() && self.flags.contains("idempotency-key"),
            Declaration::Destructive => self.danger_level == "destructive",
            Declaration::Streaming => self.streams,
        }
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
        let root_codes = manifest.get("exit_codes").and_then(Value::as_object);
        let codes_of = |table: Option<&serde_json::Map<String, Value>>| -> BTreeSet<i32> {
            table.into_iter().flat_map(|t| t.keys()).filter_map(|k| k.parse().ok()).collect()
        };
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
                        streams: ["supports_streaming", "streaming_default"]
                            .iter()
                            .any(|k| entry.get(*k).and_then(Value::as_bool) == Some(true)),
                        builtin: entry.get("builtin").and_then(Value::as_bool) == Some(true)
                            || matches!(path.as_str(), "manifest" | "version" | "help" | "job")
                            || path.starts_with("job."),
                        flags: entry
                            .get("flags")
                            .and_then(Value::as_object)
                            .map(|f| f.keys().cloned().collect())
                            .unwrap_or_default(),
                        incomplete_retryable: effective_entry(manifest, entry, "14")
                            .and_then(|e| e.get("retryable"))
                            .and_then(Value::as_bool),
                        exit_codes: codes_of(root_codes)
                            .union(&codes_of(entry.get("exit_codes").and_then(Value::as_object)))
                            .copied()
                            .collect(),
                    },
                );
            }
        }
        Self { by_path }
    }

    /// The paths of the commands that make this declaration, sorted.
    pub fn declaring(&self, declaration: Declaration) -> Vec<&str> {
        self.by_path
            .iter()
            .filter(|(_, info)| info.declares(declaration))
            .map(|(path, _)| path.as_str())
            .collect()
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

/// The longest idle timeout conform waits out to see a stalled job end (`{idle_timeout}`):
/// a minute, so a stall is judged within about two.
pub const MAX_IDLE_WAIT: Duration = Duration::from_secs(60);

/// The longest lifetime conform waits out to see work ended by it (`{max_lifetime}`): a
/// minute, as for a stall.
pub const MAX_LIFETIME_WAIT: Duration = Duration::from_secs(60);

/// The limits a scenario's templates read from the manifest its primary role's command
/// declares with the role's environment: `{idle_timeout}` and `{max_lifetime}`, each only when
/// the scenario uses it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeclaredLimits {
    /// `{idle_timeout}`.
    pub idle_timeout: Option<Duration>,
    /// `{max_lifetime}`.
    pub max_lifetime: Option<Duration>,
}

/// Why a scenario's declared limits give no value to wait for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LimitsProblem {
    /// Too long to wait for, as the profile stands: the scenario is skipped with this reason.
    Skip(SkipReason),
    /// The manifest could not be read with the role's environment: an error of the scenario.
    Error(String),
}

/// The limits `scenario` uses, read from the manifest with its primary role's environment.
/// A limit over a minute skips the scenario: an idle timeout as the profile's to shorten
/// ([`SkipReason::ProfileProblem`]), a lifetime as [`SkipReason::NoShortLifetime`], since the
/// spec asks no tool for a way to shorten its lifetime (the manual's "running", on the gate).
pub fn declared_limits(
    subject: &Subject,
    scenario: &Scenario,
) -> Result<DeclaredLimits, LimitsProblem> {
    let mut limits = DeclaredLimits::default();
    let Some(role) = scenario.primary_role() else { return Ok(limits) };
    if scenario.uses_idle_timeout() {
        let idle = idle_timeout_of(subject, role).map_err(LimitsProblem::Error)?;
        if idle > MAX_IDLE_WAIT {
            return Err(LimitsProblem::Skip(SkipReason::ProfileProblem {
                why: format!(
                    "role `{role}`'s command declares an idle timeout of {} ms with the role's environment, too long to wait for a stall (at most {} ms); give the role an environment under which the tool declares a shorter `idle_timeout_ms`",
                    idle.as_millis(),
                    MAX_IDLE_WAIT.as_millis()
                ),
            }));
        }
        limits.idle_timeout = Some(idle);
    }
    if scenario.uses_max_lifetime() {
        let lifetime = max_lifetime_of(subject, role).map_err(LimitsProblem::Error)?;
        if lifetime > MAX_LIFETIME_WAIT {
            return Err(LimitsProblem::Skip(SkipReason::NoShortLifetime {
                role: role.to_owned(),
                declared_ms: Some(u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX)),
                max_ms: u64::try_from(MAX_LIFETIME_WAIT.as_millis()).unwrap_or(u64::MAX),
            }));
        }
        limits.max_lifetime = Some(lifetime);
    }
    Ok(limits)
}
