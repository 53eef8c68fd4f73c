//! Command registration: what a command author declares, and the rules the framework enforces
//! before a command may exist (docs/contract.md §2, REQ-C-033, REQ-C-007).
//!
//! A command is a [`CommandSpec`] built with its builder methods and handed to
//! [`Registry::register`]. Registration adds the flags the framework owns and refuses, with a
//! [`RegistrationError`], every declaration the contract forbids. A refused command never runs.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::context::Ctx;
use super::exit::{Exit, ExitCodeEntry, SideEffects};
use super::failure::Failure;
use crate::runtime::context::JobContext;

/// Mutation risk of a command (REQ-C-002).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DangerLevel {
    /// Reads only.
    Safe,
    /// Changes state.
    Mutating,
    /// Removes or overwrites state that cannot be recovered.
    Destructive,
}

impl DangerLevel {
    /// The manifest spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            DangerLevel::Safe => "safe",
            DangerLevel::Mutating => "mutating",
            DangerLevel::Destructive => "destructive",
        }
    }

    /// Mutating or destructive.
    pub fn writes(self) -> bool {
        !matches!(self, DangerLevel::Safe)
    }
}

/// What stdout carries for a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdoutKind {
    /// One envelope (the default).
    Envelope,
    /// A protocol served over stdio (REQ-C-032); stdout never carries an envelope.
    Protocol,
}

/// How a command's work survives the caller's call budget (REQ-C-033).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interruption {
    /// The work may continue in a background job.
    pub detach: bool,
    /// The work checkpoints; the identical invocation continues it.
    pub resume: bool,
    /// How long a job may go without progress.
    pub idle_timeout_ms: Option<u64>,
    /// Bound on the whole work when no `--timeout` is given.
    pub max_lifetime_ms: Option<u64>,
}

/// Value type of a flag or positional, as the manifest names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    /// Any UTF-8 text.
    String,
    /// A whole number.
    Integer,
    /// Present or absent; takes no value.
    Boolean,
}

impl ValueType {
    /// The manifest spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ValueType::String => "string",
            ValueType::Integer => "integer",
            ValueType::Boolean => "boolean",
        }
    }
}

/// Who owns a flag: the command author, or the framework (which adds and parses it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagOwner {
    /// Declared by the command.
    Command,
    /// Added by the framework at registration.
    Framework,
}

/// A `--name value` option of one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlagSpec {
    /// Long name without `--`.
    pub name: String,
    /// Value type.
    pub value_type: ValueType,
    /// Must be given.
    pub required: bool,
    /// What it controls.
    pub description: String,
    /// Environment variable read when the flag is absent.
    pub env: Option<String>,
    /// Who added it.
    pub owner: FlagOwner,
}

impl FlagSpec {
    /// An optional string flag.
    pub fn string(name: &str, description: &str) -> Self {
        FlagSpec {
            name: name.to_owned(),
            value_type: ValueType::String,
            required: false,
            description: description.to_owned(),
            env: None,
            owner: FlagOwner::Command,
        }
    }

    /// An optional whole-number flag.
    pub fn integer(name: &str, description: &str) -> Self {
        FlagSpec { value_type: ValueType::Integer, ..FlagSpec::string(name, description) }
    }

    /// A switch.
    pub fn boolean(name: &str, description: &str) -> Self {
        FlagSpec { value_type: ValueType::Boolean, ..FlagSpec::string(name, description) }
    }

    /// Marks the flag as required.
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// Reads `var` when the flag is absent.
    pub fn env(mut self, var: &str) -> Self {
        self.env = Some(var.to_owned());
        self
    }

    fn framework(mut self) -> Self {
        self.owner = FlagOwner::Framework;
        self
    }
}

/// A positional argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PositionalSpec {
    /// Name shown in help and errors.
    pub name: String,
    /// Value type (string or integer).
    pub value_type: ValueType,
    /// Must be given.
    pub required: bool,
    /// What it selects.
    pub description: String,
}

/// The function that does a command's work. It gets the context and returns `data` or a
/// failure; it never sets the exit code of a success, never writes stdout.
pub type RunFn = Arc<dyn Fn(&mut Ctx) -> Result<Value, Failure> + Send + Sync>;

/// The work of an interruptible or `async` command: the same function runs in the detached
/// worker and in the front process of a resume-only command. It gets the framework's [`Ctx`]
/// (arguments, warnings, pacing) and the runtime's [`JobContext`] (progress, checkpoints,
/// stop requests); a stop met at a safe point is returned as [`Failure::job_stopped`].
pub type JobRunFn =
    Arc<dyn Fn(&mut Ctx, &mut JobContext<'_>) -> Result<Value, Failure> + Send + Sync>;

/// The input fingerprint a resume command keys its file checkpoint with, computed from its
/// arguments and the spooled stdin (if any): `None` when it cannot tell. The framework uses
/// it to publish a new job's progress from a valid checkpoint before the worker restores it,
/// so the first answer of a resumed detached job is never below its checkpoint.
pub type FingerprintFn =
    Arc<dyn Fn(&super::context::Args, Option<&std::path::Path>) -> Option<String> + Send + Sync>;

/// Flag names the framework owns: a command may not declare them itself.
pub const FRAMEWORK_FLAGS: &[&str] =
    &["output", "timeout", "instance-id", "idempotency-key", "budget", "stream", "help", "version"];

/// The framework's default wall-clock limit for a command that declares none (REQ-F-011).
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;

/// Everything a command declares.
#[derive(Clone)]
pub struct CommandSpec {
    /// Dot-separated path, e.g. `job.wait`.
    pub path: String,
    /// One-sentence summary.
    pub description: String,
    /// Mutation risk.
    pub danger_level: DangerLevel,
    /// Permission strings, most critical first.
    pub required_scopes: Vec<String>,
    /// Command-local flags (the framework's are added at registration).
    pub flags: Vec<FlagSpec>,
    /// Positional arguments in call order.
    pub positionals: Vec<PositionalSpec>,
    /// Declared exits, keyed by code.
    pub exit_codes: BTreeMap<Exit, ExitCodeEntry>,
    /// Interruption declaration, if any.
    pub interruption: Option<Interruption>,
    /// Returns a job descriptor at once (REQ-C-022).
    pub is_async: bool,
    /// Streams JSONL by default (REQ-O-004).
    pub streaming_default: bool,
    /// Can stream (REQ-O-004).
    pub supports_streaming: bool,
    /// What stdout carries.
    pub stdout: StdoutKind,
    /// Registered by the framework itself.
    pub builtin: bool,
    /// Accepts `--idempotency-key` (default: true for writers, added by the framework).
    pub idempotency_key: bool,
    /// Default wall-clock limit.
    pub default_timeout_ms: u64,
    /// The job work of an interruptible or `async` command ([`CommandSpec::job_work`]).
    pub job_run: Option<JobRunFn>,
    /// A `job` built-in that waits and so takes `--budget` without declaring interruption.
    pub takes_budget: bool,
    /// The input fingerprint of a resume command's file checkpoint ([`FingerprintFn`]).
    pub checkpoint_fingerprint: Option<FingerprintFn>,
    /// The positional whose value `-` reads stdin ([`CommandSpec::reads_stdin`]).
    pub stdin_arg: Option<String>,
    /// The work.
    pub run: RunFn,
}

impl std::fmt::Debug for CommandSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandSpec").field("path", &self.path).finish_non_exhaustive()
    }
}

impl CommandSpec {
    /// A safe command with no flags and the given work; declare the rest with the builders.
    pub fn new(
        path: &str,
        description: &str,
        run: impl Fn(&mut Ctx) -> Result<Value, Failure> + Send + Sync + 'static,
    ) -> Self {
        CommandSpec {
            path: path.to_owned(),
            description: description.to_owned(),
            danger_level: DangerLevel::Safe,
            required_scopes: Vec::new(),
            flags: Vec::new(),
            positionals: Vec::new(),
            exit_codes: BTreeMap::new(),
            interruption: None,
            is_async: false,
            streaming_default: false,
            supports_streaming: false,
            stdout: StdoutKind::Envelope,
            builtin: false,
            idempotency_key: true,
            default_timeout_ms: DEFAULT_TIMEOUT_MS,
            job_run: None,
            takes_budget: false,
            checkpoint_fingerprint: None,
            stdin_arg: None,
            run: Arc::new(run),
        }
    }

    /// Sets the danger level.
    pub fn danger(mut self, level: DangerLevel) -> Self {
        self.danger_level = level;
        self
    }

    /// Adds a required scope.
    pub fn scope(mut self, scope: &str) -> Self {
        self.required_scopes.push(scope.to_owned());
        self
    }

    /// Adds a flag.
    pub fn flag(mut self, flag: FlagSpec) -> Self {
        self.flags.push(flag);
        self
    }

    /// Adds a positional argument.
    pub fn positional(
        mut self,
        name: &str,
        value_type: ValueType,
        required: bool,
        description: &str,
    ) -> Self {
        self.positionals.push(PositionalSpec {
            name: name.to_owned(),
            value_type,
            required,
            description: description.to_owned(),
        });
        self
    }

    /// Declares an exit.
    pub fn exit(
        mut self,
        exit: Exit,
        description: &str,
        retryable: bool,
        side_effects: SideEffects,
    ) -> Self {
        self.exit_codes
            .insert(exit, ExitCodeEntry::new(exit, description, retryable, side_effects));
        self
    }

    /// Declares an exit with a full entry (command-specific names).
    pub fn exit_entry(mut self, exit: Exit, entry: ExitCodeEntry) -> Self {
        self.exit_codes.insert(exit, entry);
        self
    }

    /// Declares interruption.
    pub fn interruption(mut self, interruption: Interruption) -> Self {
        self.interruption = Some(interruption);
        self
    }

    /// Marks the command async (REQ-C-022).
    pub fn asynchronous(mut self) -> Self {
        self.is_async = true;
        self
    }

    /// Declares streaming (`streaming_default`, `supports_streaming`).
    pub fn streaming(mut self, default: bool, supported: bool) -> Self {
        self.streaming_default = default;
        self.supports_streaming = supported;
        self
    }

    /// Declares what stdout carries.
    pub fn stdout(mut self, kind: StdoutKind) -> Self {
        self.stdout = kind;
        self
    }

    /// Marks the command as a framework built-in.
    pub fn builtin(mut self) -> Self {
        self.builtin = true;
        self
    }

    /// Opts out of `--idempotency-key`. Registration refuses this for writers; it exists so
    /// that the refusal is real and testable.
    pub fn without_idempotency_key(mut self) -> Self {
        self.idempotency_key = false;
        self
    }

    /// Sets the default wall-clock limit (REQ-F-011).
    pub fn timeout_ms(mut self, ms: u64) -> Self {
        self.default_timeout_ms = ms;
        self
    }

    /// A command whose work runs through the job runtime (interruptible or `async`): its
    /// plain `run` is never called, [`CommandSpec::job_work`] is set to `work`.
    pub fn with_job_work(
        path: &str,
        description: &str,
        work: impl Fn(&mut Ctx, &mut JobContext<'_>) -> Result<Value, Failure> + Send + Sync + 'static,
    ) -> Self {
        CommandSpec::new(path, description, |_ctx| {
            Err(Failure::internal("this command runs only through the job runtime"))
        })
        .job_work(work)
    }

    /// The work of an interruptible or `async` command, run through the job runtime (see
    /// [`JobRunFn`]). Such a command's plain `run` is never called.
    pub fn job_work(
        mut self,
        work: impl Fn(&mut Ctx, &mut JobContext<'_>) -> Result<Value, Failure> + Send + Sync + 'static,
    ) -> Self {
        self.job_run = Some(Arc::new(work));
        self
    }

    /// Declares how the command's file checkpoint fingerprints its input (see
    /// [`FingerprintFn`]).
    pub fn fingerprint(
        mut self,
        fingerprint: impl Fn(&super::context::Args, Option<&std::path::Path>) -> Option<String>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.checkpoint_fingerprint = Some(Arc::new(fingerprint));
        self
    }

    /// Declares that the value `-` of the positional `name` reads stdin (REQ-F-054's stdin
    /// input). Only an interruptible command may: its front process spools stdin, bounded,
    /// before the job exists ([`crate::runtime::spool`]); an argument `-` of any other
    /// positional is an ordinary value and stdin is never read.
    pub fn reads_stdin(mut self, name: &str) -> Self {
        self.stdin_arg = Some(name.to_owned());
        self
    }

    /// A `job` built-in that holds its caller (`job wait`): it takes `--budget` although it
    /// declares no interruption (docs/contract.md §9 leaves that open; the manifest rule exempts
    /// `job.*`). Refused on anything but a built-in.
    pub fn budget_flag(mut self) -> Self {
        self.takes_budget = true;
        self
    }

    /// The clap-level words of the path (`job.wait` → `["job", "wait"]`).
    pub fn words(&self) -> Vec<&str> {
        self.path.split('.').collect()
    }

    /// Whether the command accepts `--idempotency-key`.
    pub fn accepts_idempotency_key(&self) -> bool {
        self.flags.iter().any(|f| f.name == "idempotency-key")
    }

    /// Whether the command accepts `--budget` (exactly the interruptible ones).
    pub fn accepts_budget(&self) -> bool {
        self.flags.iter().any(|f| f.name == "budget")
    }

    /// The declared entry of an exit.
    pub fn entry(&self, exit: Exit) -> Option<&ExitCodeEntry> {
        self.exit_codes.get(&exit)
    }
}

/// Why a command could not be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistrationError {
    /// The path is empty, has empty segments, or uses characters outside `a-z0-9-`.
    #[error("failed to register {0:?}: a path is dot-separated lowercase words (a-z, 0-9, -)")]
    InvalidPath(String),
    /// The path is taken.
    #[error("failed to register {0:?}: the path is already registered")]
    DuplicatePath(String),
    /// The path is the framework's (`job.*`, `manifest`, `version`, `__worker`).
    #[error("failed to register {0:?}: the path is reserved for the framework's built-ins")]
    ReservedPath(String),
    /// A path is both a command and the parent of another.
    #[error("failed to register {0:?}: a command path cannot also be a group of commands")]
    PathCollision(String),
    /// No description.
    #[error("failed to register {0:?}: the description is empty")]
    EmptyDescription(String),
    /// No `0` entry.
    #[error("failed to register {0:?}: exit code 0 (SUCCESS) is not declared")]
    MissingSuccessEntry(String),
    /// A code outside 0–14 and 79–125.
    #[error("failed to register {path:?}: exit code {code} may not be declared (0-14 or 79-125)")]
    UndeclarableExitCode {
        /// Command path.
        path: String,
        /// The code.
        code: u8,
    },
    /// A standard code under another name.
    #[error("failed to register {path:?}: exit code {code} must be named {expected}")]
    ExitCodeMisnamed {
        /// Command path.
        path: String,
        /// The code.
        code: u8,
        /// Its standard name.
        expected: &'static str,
    },
    /// `retryable: true` together with side effects.
    #[error(
        "failed to register {path:?}: exit code {code} is retryable but leaves side effects; \
         retryable entries must have side_effects none"
    )]
    RetryableWithSideEffects {
        /// Command path.
        path: String,
        /// The code.
        code: u8,
    },
    /// A flag name the framework owns, or not a valid flag name.
    #[error("failed to register {path:?}: flag --{flag} is owned by the framework or malformed")]
    ReservedOrInvalidFlag {
        /// Command path.
        path: String,
        /// The flag.
        flag: String,
    },
    /// The same flag or positional name twice.
    #[error("failed to register {path:?}: argument {name:?} is declared twice")]
    DuplicateArgument {
        /// Command path.
        path: String,
        /// The name.
        name: String,
    },
    /// A required positional after an optional one.
    #[error("failed to register {path:?}: required positional {name:?} follows an optional one")]
    PositionalOrder {
        /// Command path.
        path: String,
        /// The positional.
        name: String,
    },
    /// A mutating or destructive command without `--idempotency-key` (REQ-C-007).
    #[error(
        "failed to register {0:?}: a mutating or destructive command must accept --idempotency-key"
    )]
    WriterWithoutIdempotencyKey(String),
    /// `interruption` with both properties false.
    #[error("failed to register {0:?}: interruption needs detach or resume (or both) to be true")]
    InterruptionNeitherDetachNorResume(String),
    /// `interruption` without an INCOMPLETE (14) entry.
    #[error("failed to register {0:?}: interruption requires an INCOMPLETE (14) exit-code entry")]
    InterruptionWithoutIncompleteEntry(String),
    /// The INCOMPLETE entry does not match the danger level.
    #[error(
        "failed to register {0:?}: the INCOMPLETE (14) entry must be retryable/none for \
         read-only work and not retryable/partial for work that writes"
    )]
    IncompleteEntryMismatch(String),
    /// `interruption` with `async: true`.
    #[error("failed to register {0:?}: interruption cannot be combined with async: true")]
    InterruptionWithAsync(String),
    /// `interruption` with a streaming declaration.
    #[error("failed to register {0:?}: interruption cannot be combined with streaming")]
    InterruptionWithStreaming(String),
    /// `interruption` with `stdout: "protocol"`.
    #[error("failed to register {0:?}: interruption cannot be combined with stdout: protocol")]
    InterruptionWithProtocolStdout(String),
    /// `resume: true` on a writer without `--idempotency-key`.
    #[error(
        "failed to register {0:?}: a resumable mutating or destructive command must accept \
         --idempotency-key"
    )]
    ResumeWriterWithoutIdempotencyKey(String),
    /// A zero `idle_timeout_ms` or `max_lifetime_ms`.
    #[error("failed to register {0:?}: interruption limits must be greater than zero")]
    ZeroInterruptionLimit(String),
    /// A zero default timeout.
    #[error("failed to register {0:?}: the default timeout must be greater than zero")]
    ZeroDefaultTimeout(String),
    /// An interruptible or `async` command without its job work ([`CommandSpec::job_work`]).
    #[error("failed to register {0:?}: an interruptible or async command needs job_work")]
    MissingJobWork(String),
    /// [`CommandSpec::reads_stdin`] names no positional, or the command is not interruptible.
    #[error(
        "failed to register {path:?}: stdin is read through a positional {name:?} of an \
         interruptible command, and there is none"
    )]
    InvalidStdinArgument {
        /// Command path.
        path: String,
        /// The name given.
        name: String,
    },
}

/// Paths only the framework may register.
pub const RESERVED_PATHS: &[&str] = &["manifest", "version", "job", "__worker"];

fn valid_word(word: &str) -> bool {
    let mut chars = word.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_lowercase())
        && word.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !word.ends_with('-')
}

fn valid_flag_name(name: &str) -> bool {
    valid_word(name) && name.len() <= 40
}

/// The commands of one tool, validated.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    commands: BTreeMap<String, CommandSpec>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Every registered command, by path.
    pub fn commands(&self) -> impl Iterator<Item = &CommandSpec> {
        self.commands.values()
    }

    /// One command by path.
    pub fn get(&self, path: &str) -> Option<&CommandSpec> {
        self.commands.get(path)
    }

    /// Validates `spec`, adds the framework's flags and exits, and registers it.
    pub fn register(&mut self, spec: CommandSpec) -> Result<(), RegistrationError> {
        let spec = validate(spec)?;
        let path = spec.path.clone();
        if self.commands.contains_key(&path) {
            return Err(RegistrationError::DuplicatePath(path));
        }
        let prefix = format!("{path}.");
        let collides = self.commands.keys().any(|existing| {
            existing.starts_with(&prefix) || path.starts_with(&format!("{existing}."))
        });
        if collides {
            return Err(RegistrationError::PathCollision(path));
        }
        self.commands.insert(path, spec);
        Ok(())
    }
}

/// Checks every rule and completes the declaration with the framework's parts.
pub fn validate(mut spec: CommandSpec) -> Result<CommandSpec, RegistrationError> {
    let path = spec.path.clone();
    let err_path = || path.clone();
    let words: Vec<&str> = path.split('.').collect();
    let is_worker = path == "__worker";
    if path.is_empty() || (!is_worker && !words.iter().all(|w| valid_word(w))) {
        return Err(RegistrationError::InvalidPath(err_path()));
    }
    if !spec.builtin && words.first().is_some_and(|w| RESERVED_PATHS.contains(w)) {
        return Err(RegistrationError::ReservedPath(err_path()));
    }
    if spec.description.trim().is_empty() {
        return Err(RegistrationError::EmptyDescription(err_path()));
    }
    if spec.default_timeout_ms == 0 {
        return Err(RegistrationError::ZeroDefaultTimeout(err_path()));
    }

    // Exit codes.
    if !spec.exit_codes.contains_key(&Exit::SUCCESS) {
        return Err(RegistrationError::MissingSuccessEntry(err_path()));
    }
    for (exit, entry) in &spec.exit_codes {
        if !exit.declarable() {
            return Err(RegistrationError::UndeclarableExitCode { path: err_path(), code: exit.0 });
        }
        if let Some(expected) = exit.standard_name()
            && entry.name != expected
        {
            return Err(RegistrationError::ExitCodeMisnamed {
                path: err_path(),
                code: exit.0,
                expected,
            });
        }
        if entry.retryable && entry.side_effects != SideEffects::None {
            return Err(RegistrationError::RetryableWithSideEffects {
                path: err_path(),
                code: exit.0,
            });
        }
    }

    // Arguments.
    let mut seen: Vec<&str> = Vec::new();
    for flag in &spec.flags {
        if FRAMEWORK_FLAGS.contains(&flag.name.as_str()) || !valid_flag_name(&flag.name) {
            return Err(RegistrationError::ReservedOrInvalidFlag {
                path: err_path(),
                flag: flag.name.clone(),
            });
        }
        if seen.contains(&flag.name.as_str()) {
            return Err(RegistrationError::DuplicateArgument {
                path: err_path(),
                name: flag.name.clone(),
            });
        }
        seen.push(&flag.name);
    }
    let mut optional_seen = false;
    for positional in &spec.positionals {
        if seen.contains(&positional.name.as_str()) || !valid_flag_name(&positional.name) {
            return Err(RegistrationError::DuplicateArgument {
                path: err_path(),
                name: positional.name.clone(),
            });
        }
        seen.push(&positional.name);
        if positional.required && optional_seen {
            return Err(RegistrationError::PositionalOrder {
                path: err_path(),
                name: positional.name.clone(),
            });
        }
        optional_seen |= !positional.required;
    }

    // Interruption (REQ-C-033).
    if let Some(interruption) = spec.interruption {
        if !interruption.detach && !interruption.resume {
            return Err(RegistrationError::InterruptionNeitherDetachNorResume(err_path()));
        }
        let Some(incomplete) = spec.exit_codes.get(&Exit::INCOMPLETE) else {
            return Err(RegistrationError::InterruptionWithoutIncompleteEntry(err_path()));
        };
        let expected = if spec.danger_level.writes() {
            (false, SideEffects::Partial)
        } else {
            (true, SideEffects::None)
        };
        if (incomplete.retryable, incomplete.side_effects) != expected {
            return Err(RegistrationError::IncompleteEntryMismatch(err_path()));
        }
        if spec.is_async {
            return Err(RegistrationError::InterruptionWithAsync(err_path()));
        }
        if spec.streaming_default || spec.supports_streaming {
            return Err(RegistrationError::InterruptionWithStreaming(err_path()));
        }
        if spec.stdout == StdoutKind::Protocol {
            return Err(RegistrationError::InterruptionWithProtocolStdout(err_path()));
        }
        if interruption.resume && spec.danger_level.writes() && !spec.idempotency_key {
            return Err(RegistrationError::ResumeWriterWithoutIdempotencyKey(err_path()));
        }
        if interruption.idle_timeout_ms == Some(0) || interruption.max_lifetime_ms == Some(0) {
            return Err(RegistrationError::ZeroInterruptionLimit(err_path()));
        }
    }
    if spec.danger_level.writes() && !spec.idempotency_key {
        return Err(RegistrationError::WriterWithoutIdempotencyKey(err_path()));
    }

    // The framework's parts.
    if spec.danger_level.writes() {
        spec.flags.push(
            FlagSpec::string(
                "idempotency-key",
                "Key that makes a repeat of this call return the original result instead of \
                 doing the work again",
            )
            .framework(),
        );
    }
    if spec.takes_budget && (!spec.builtin || spec.interruption.is_some()) {
        return Err(RegistrationError::ReservedOrInvalidFlag {
            path: err_path(),
            flag: "budget".into(),
        });
    }
    if (spec.interruption.is_some() || spec.is_async) && spec.job_run.is_none() {
        return Err(RegistrationError::MissingJobWork(err_path()));
    }
    if let Some(name) = &spec.stdin_arg
        && (spec.interruption.is_none() || !spec.positionals.iter().any(|p| &p.name == name))
    {
        return Err(RegistrationError::InvalidStdinArgument {
            path: err_path(),
            name: name.clone(),
        });
    }
    if spec.interruption.is_some() || spec.takes_budget {
        spec.flags.push(
            FlagSpec::string(
                "budget",
                "Sync call budget: 5s, 2000ms, 1m or milliseconds; 0 turns it off",
            )
            .env(super::budget::BUDGET_ENV)
            .framework(),
        );
    }
    if spec.supports_streaming {
        spec.flags.push(
            FlagSpec::boolean(
                "stream",
                "Write one JSON object per line as items are produced, then a summary line",
            )
            .framework(),
        );
    }
    add_framework_exits(&mut spec);
    Ok(spec)
}

/// Exits the framework itself may produce for every command, added when the command did not
/// declare them: an internal error, invalid arguments, the wall-clock limit, for writers the
/// idempotency conflict, and for every command that uses the state database (writers,
/// interruptible and async commands, the `job` built-ins) its unavailability.
fn add_framework_exits(spec: &mut CommandSpec) {
    let writes = spec.danger_level.writes();
    let defaults = [
        (
            Exit::GENERAL_ERROR,
            "An internal error; see error.detail and stderr",
            false,
            if writes { SideEffects::Partial } else { SideEffects::None },
        ),
        (Exit::ARG_ERROR, "The invocation is invalid; nothing was done", false, SideEffects::None),
        (
            Exit::PRECONDITION,
            "A precondition does not hold (e.g. input would need a prompt)",
            false,
            SideEffects::None,
        ),
        (
            Exit::TIMEOUT,
            "The wall-clock limit ran out and the work stopped",
            false,
            if writes { SideEffects::Partial } else { SideEffects::None },
        ),
    ];
    for (exit, description, retryable, side_effects) in defaults {
        spec.exit_codes
            .entry(exit)
            .or_insert_with(|| ExitCodeEntry::new(exit, description, retryable, side_effects));
    }
    if writes {
        spec.exit_codes.entry(Exit::CONFLICT).or_insert_with(|| {
            ExitCodeEntry::new(
                Exit::CONFLICT,
                "The idempotency key belongs to a call with other arguments; nothing was done",
                false,
                SideEffects::None,
            )
        });
    }
    let stateful =
        writes || spec.interruption.is_some() || spec.is_async || spec.path.starts_with("job.");
    if stateful {
        spec.exit_codes.entry(Exit::UNAVAILABLE).or_insert_with(|| {
            ExitCodeEntry::new(
                Exit::UNAVAILABLE,
                "The state database stayed locked; nothing was done",
                true,
                SideEffects::None,
            )
        });
    }
}
