//! What a command's work receives ([`Ctx`]) and what it returns (`Result<Value, Failure>`).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{BufRead, IsTerminal, Write};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::exit::Exit;
use super::failure::{Failure, Phase, Warning};
use super::modes::Modes;
use super::state::{FRAMEWORK_MIGRATIONS, Migration, StateConfig, StateDb, StateError};
use super::stop::StopToken;

/// One argument value as parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgValue {
    /// A string (or whole number kept as text until asked for).
    Text(String),
    /// A switch.
    Switch(bool),
}

/// The command's own arguments (flags and positionals), by name; framework flags excluded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Args {
    /// Values by name; absent when not given.
    pub values: BTreeMap<String, ArgValue>,
}

impl Args {
    /// A text value.
    pub fn text(&self, name: &str) -> Option<&str> {
        match self.values.get(name) {
            Some(ArgValue::Text(text)) => Some(text),
            _ => None,
        }
    }

    /// A switch (false when absent).
    pub fn switch(&self, name: &str) -> bool {
        matches!(self.values.get(name), Some(ArgValue::Switch(true)))
    }

    /// The arguments as canonical JSON (sorted keys), used for idempotency and job identity.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        for (name, value) in &self.values {
            let value = match value {
                ArgValue::Text(text) => Value::String(text.clone()),
                ArgValue::Switch(on) => Value::Bool(*on),
            };
            map.insert(name.clone(), value);
        }
        Value::Object(map)
    }
}

/// Framework-owned settings of this invocation.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// argv as invoked, `argv[0]` included (the INCOMPLETE `continue_command` is built from it).
    pub argv: Vec<OsString>,
    /// The command path (`job.wait`).
    pub path: String,
    /// The wall-clock limit in force; `None` when switched off with `--timeout 0`.
    pub timeout: Option<Duration>,
    /// Whether `--timeout` was given (else the command's default, or `max_lifetime_ms`).
    pub timeout_explicit: bool,
    /// `--budget` as given (parsed), for interruptible commands; resolution is part 2's.
    pub budget_flag: Option<Duration>,
    /// `--idempotency-key`, for writers.
    pub idempotency_key: Option<String>,
    /// Output and interaction modes.
    pub modes: Modes,
    /// `REFTOOL_PACE_MS`: sleep per unit of work.
    pub pace: Duration,
    /// `REFTOOL_CLEANUP_MS`: how long the cleanup after SIGINT or SIGHUP takes.
    pub cleanup: Duration,
    /// `REFTOOL_TEST_MODE=1`: extra self-checks.
    pub test_mode: bool,
    /// `--stream`: items go to stdout as JSONL while the work runs ([`super::stream`]).
    pub stream: bool,
    /// When the process started.
    pub started: Instant,
}

/// What a command's work receives.
pub struct Ctx {
    /// The command's arguments.
    pub args: Args,
    /// Framework-owned settings.
    pub invocation: Invocation,
    /// The state directory and instance.
    pub state: StateConfig,
    stop: StopToken,
    warnings: Vec<Warning>,
    meta: Map<String, Value>,
    last_progress: Option<(u64, Option<u64>, Option<String>)>,
    manifest: Option<Value>,
    migrations: Vec<Migration>,
    sink: Option<super::stream::StreamSink>,
}

impl Ctx {
    /// A context (the framework builds it; tests may too).
    pub fn new(args: Args, invocation: Invocation, state: StateConfig, stop: StopToken) -> Self {
        Ctx {
            args,
            invocation,
            state,
            stop,
            warnings: Vec::new(),
            meta: Map::new(),
            last_progress: None,
            manifest: None,
            migrations: FRAMEWORK_MIGRATIONS.to_vec(),
            sink: None,
        }
    }

    /// Whether the framework asked the work to stop; check at every safe point.
    pub fn should_stop(&self) -> bool {
        self.stop.should_stop()
    }

    /// `Err` with the stop failure when a stop was requested, for `?` at safe points.
    pub fn check_stop(&self) -> Result<(), Failure> {
        match self.stop.stop_reason() {
            Some(reason) => Err(Failure::stopped(reason)),
            None => Ok(()),
        }
    }

    /// The stop token (part 2 hands it to the runtime).
    pub fn stop_token(&self) -> &StopToken {
        &self.stop
    }

    /// Claims the commit (see [`StopToken::begin_commit`]); `Err` means roll back.
    pub fn begin_commit(&self) -> Result<(), Failure> {
        if self.stop.begin_commit() {
            Ok(())
        } else {
            Err(self.check_stop().err().unwrap_or_else(|| Failure::internal("commit refused")))
        }
    }

    /// Sleeps `REFTOOL_PACE_MS` for one unit of work, waking early when a stop is requested.
    pub fn pace(&self) -> Result<(), Failure> {
        let until = Instant::now() + self.invocation.pace;
        while Instant::now() < until {
            self.check_stop()?;
            let left = until.saturating_duration_since(Instant::now());
            std::thread::sleep(left.min(Duration::from_millis(5)));
        }
        self.check_stop()
    }

    /// Whether this invocation streams (`--stream`): items go through [`Ctx::emit`].
    pub fn streaming(&self) -> bool {
        self.sink.is_some()
    }

    /// Writes one item of a stream (a JSON object) to stdout at once, numbered with `_seq`.
    /// `Err` when the stream was ended (a stop) or stdout failed: return it.
    pub fn emit(&mut self, item: Value) -> Result<(), Failure> {
        self.check_stop()?;
        match &self.sink {
            Some(sink) => sink.emit(item),
            None => Err(Failure::internal("emit called on an invocation that does not stream")),
        }
    }

    pub(crate) fn set_sink(&mut self, sink: super::stream::StreamSink) {
        self.sink = Some(sink);
    }

    /// Adds a warning to the response.
    pub fn warn(&mut self, code: &str, message: impl Into<String>) {
        self.warnings.push(Warning { code: code.to_owned(), message: message.into() });
    }

    /// Sets an extra `meta` field (e.g. `not_modified`; part 2: `budget_ms`).
    pub fn set_meta(&mut self, name: &str, value: Value) {
        self.meta.insert(name.to_owned(), value);
    }

    /// Progress report hook (REQ-C-034). Part 2 feeds it to the job runtime; for now it keeps
    /// the last report and, in test mode, refuses a `done` that goes backwards.
    pub fn progress(
        &mut self,
        done: u64,
        total: Option<u64>,
        unit: Option<&str>,
    ) -> Result<(), Failure> {
        if self.invocation.test_mode
            && let Some((previous, _, _)) = &self.last_progress
            && done < *previous
        {
            return Err(Failure::internal(format!(
                "framework check: progress went backwards from {previous} to {done}"
            ))
            .context(serde_json::json!({"check": "PROGRESS_MONOTONIC"})));
        }
        self.last_progress = Some((done, total, unit.map(str::to_owned)));
        self.check_stop()
    }

    /// The last progress report.
    pub fn last_progress(&self) -> Option<&(u64, Option<u64>, Option<String>)> {
        self.last_progress.as_ref()
    }

    /// Checkpoint hook (REQ-C-035): a safe point. Part 2 saves `state` here; for now it is the
    /// place where a stop request takes effect.
    pub fn checkpoint(&mut self, _state: &Value) -> Result<(), Failure> {
        self.check_stop()
    }

    /// Asks a person for a line of input. Never prompts in non-interactive mode: that is
    /// PRECONDITION 4 `INPUT_REQUIRED`, naming the flag that supplies the value.
    pub fn require_input(&self, what: &str, flag: &str) -> Result<String, Failure> {
        let missing = || {
            Failure::new(Exit::PRECONDITION, "INPUT_REQUIRED", format!("{what} is required"))
                .suggestion(format!("pass --{flag} <value>"))
                .phase(Phase::Validation)
        };
        if !self.invocation.modes.interactive || !std::io::stderr().is_terminal() {
            return Err(missing());
        }
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "{what}: ");
        let _ = stderr.flush();
        let mut line = String::new();
        match std::io::stdin().lock().read_line(&mut line) {
            Ok(n) if n > 0 && !line.trim().is_empty() => Ok(line.trim().to_owned()),
            _ => Err(missing()),
        }
    }

    /// The manifest (set by the framework for the `manifest` built-in).
    pub fn manifest(&self) -> Option<&Value> {
        self.manifest.as_ref()
    }

    /// Opens the state database with every migration the app registered (framework's and
    /// part 2's), in this invocation's state directory.
    pub fn open_state(&self) -> Result<StateDb, StateError> {
        StateDb::open(&self.state, &self.migrations)
    }

    pub(crate) fn set_state_migrations(&mut self, migrations: Vec<Migration>) {
        self.migrations = migrations;
    }

    pub(crate) fn set_manifest(&mut self, manifest: Value) {
        self.manifest = Some(manifest);
    }

    pub(crate) fn take_warnings(&mut self) -> Vec<Warning> {
        std::mem::take(&mut self.warnings)
    }

    pub(crate) fn take_meta(&mut self) -> Map<String, Value> {
        std::mem::take(&mut self.meta)
    }
}
