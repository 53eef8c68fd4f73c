//! The dispatch path: argv in, one response out.
//!
//! [`App::run`] never writes and never exits: it returns a [`Finished`] that `main` writes in one
//! `write_all` and turns into the exit status. The stages, in order:
//!
//! 1. modes (JSON or text, interactive or not), decided once;
//! 2. the detached worker (`__worker <job dir>`) and other hidden entry points, before clap;
//! 3. parse (clap) → ARG_ERROR, help or `--version`;
//! 4. validation of framework flags and environment (durations, instance, pacing, state dir);
//! 5. idempotency: a finished call with the same key answers from the store;
//! 6. interruptible, async and `job` commands: the job runtime ([`super::interrupt`]);
//! 7. the work, on its own thread, bounded by the wall-clock limit and SIGTERM;
//! 8. the response: declared-exit checks, retryable from the declared entry, meta.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::cli::{self, Early, Parsed};
use super::context::{Args, Ctx, Failure, Invocation};
use super::envelope::Response;
use super::exit::Exit;
use super::manifest::{self, canonical_json};
use super::modes::{Modes, OutputMode};
use super::registry::{CommandSpec, DEFAULT_TIMEOUT_MS, DangerLevel, RegistrationError, Registry};
use super::state::{
    DEFAULT_INSTANCE, FRAMEWORK_MIGRATIONS, Migration, StateConfig, StateDb, key_reused,
    validate_instance_id,
};
use super::stop::{StopReason, StopToken};
use super::stream::{StreamEnd, StreamSink};
use crate::duration::parse_duration;
use crate::runtime::budget::ResolvedBudget;
use crate::runtime::worker::WORKER_ARG;

/// How long the work gets to acknowledge a stop (and roll back) before the framework answers
/// without it. The process exits right after answering, which ends the work's thread too.
pub const STOP_GRACE: Duration = Duration::from_millis(1000);
/// How long the framework waits for work that claimed its commit when a stop came too late.
pub const COMMIT_GRACE: Duration = Duration::from_secs(10);
/// How often the supervisor looks at the clock and the signal flag.
const POLL: Duration = Duration::from_millis(5);

/// A hidden entry point run before clap (`__worker`): gets argv, returns the exit status.
pub type HiddenEntry = Arc<dyn Fn(&[OsString]) -> u8 + Send + Sync>;

/// What to write and how to exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// Bytes for stdout (written in one go).
    pub stdout: Vec<u8>,
    /// Text for stderr.
    pub stderr: String,
    /// The exit status.
    pub exit: u8,
}

/// A tool: its registry and the framework's settings.
pub struct App {
    name: String,
    version: String,
    about: String,
    registry: Registry,
    migrations: Vec<Migration>,
    hidden: BTreeMap<String, HiddenEntry>,
    sigterm: Arc<AtomicBool>,
    sigint: Arc<AtomicBool>,
}

impl App {
    /// A tool with the built-ins `manifest` and `version` registered.
    pub fn new(name: &str, version: &str, about: &str) -> Result<App, RegistrationError> {
        let mut app = App {
            name: name.to_owned(),
            version: version.to_owned(),
            about: about.to_owned(),
            registry: Registry::new(),
            migrations: FRAMEWORK_MIGRATIONS.to_vec(),
            hidden: BTreeMap::new(),
            sigterm: Arc::new(AtomicBool::new(false)),
            sigint: Arc::new(AtomicBool::new(false)),
        };
        app.register(crate::commands::manifest::spec())?;
        app.register(crate::commands::version::spec())?;
        Ok(app)
    }

    /// Registers a command (see [`Registry::register`]).
    pub fn register(&mut self, spec: CommandSpec) -> Result<(), RegistrationError> {
        self.registry.register(spec)
    }

    /// Appends migrations of the state database (part 2: job tables).
    pub fn add_state_migrations(&mut self, migrations: &[Migration]) {
        self.migrations.extend_from_slice(migrations);
    }

    /// The state database migrations in force.
    pub fn state_migrations(&self) -> &[Migration] {
        &self.migrations
    }

    /// Adds a hidden entry point, run when `argv[1]` is `name`, before clap.
    pub fn add_hidden_entry(&mut self, name: &str, entry: HiddenEntry) {
        self.hidden.insert(name.to_owned(), entry);
    }

    /// The tool's name (`reftool`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tool's version (part of a job's identity).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The manifest data.
    pub fn manifest(&self) -> Value {
        manifest::manifest(&self.registry, &self.version)
    }

    /// The flag SIGTERM raises (part 2: a front process waiting on a job hands off at once).
    pub fn sigterm_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.sigterm)
    }

    /// Installs the SIGTERM handler: it only raises a flag that the supervisor polls, so a
    /// second SIGTERM changes nothing and never causes a second write (REQ-F-013).
    pub fn install_signal_handlers(&self) -> std::io::Result<()> {
        if crate::mutants::sigterm_kills_the_call() {
            return Ok(());
        }
        signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&self.sigterm))?;
        Ok(())
    }

    /// Runs one invocation.
    pub fn run(&self, argv: Vec<OsString>) -> Finished {
        let started = Instant::now();
        let modes = Modes::detect(&argv);
        if argv.get(1).is_some_and(|a| a == WORKER_ARG) {
            return Finished {
                stdout: Vec::new(),
                stderr: String::new(),
                exit: super::interrupt::run_worker(self, &argv),
            };
        }
        if let Some(entry) = argv.get(1).and_then(|a| a.to_str()).and_then(|a| self.hidden.get(a)) {
            return Finished { stdout: Vec::new(), stderr: String::new(), exit: entry(&argv) };
        }
        let command = cli::build(&self.registry, &self.name, &self.version, &self.about);
        let parsed = match cli::parse(command, &self.registry, &argv) {
            Ok(parsed) => parsed,
            Err(Early::Help(text)) => return help(text, modes),
            Err(Early::Version) => {
                if modes.output == OutputMode::Text {
                    let line = format!("{} {}\n", self.name, self.version);
                    return Finished { stdout: line.into_bytes(), stderr: String::new(), exit: 0 };
                }
                let mut response = Response::success(crate::commands::version::data());
                response.duration_ms = elapsed_ms(started);
                response.timeout_ms = Some(DEFAULT_TIMEOUT_MS);
                return finish(response, modes.output, String::new());
            }
            Err(Early::Invalid { failure, usage }) => {
                let mut response = crate::mutants::refused_invocation(Response::failure(*failure));
                response.duration_ms = elapsed_ms(started);
                response.timeout_ms = Some(DEFAULT_TIMEOUT_MS);
                return finish(response, modes.output, usage);
            }
        };
        let Some(spec) = self.registry.get(&parsed.path) else {
            let response = Response::failure(Failure::internal("parsed an unregistered command"));
            return finish(response, modes.output, String::new());
        };
        let (response, timeout_ms) = match self.prepare(spec, parsed, argv, modes, started) {
            Ok(prepared) => {
                let timeout_ms = prepared.timeout_ms;
                (self.dispatch(spec, prepared), Some(timeout_ms))
            }
            Err((failure, timeout_ms)) => (Response::failure(*failure), timeout_ms),
        };
        let mut response = response;
        response.timeout_ms = timeout_ms;
        if let Some(failure) = &mut response.error
            && failure.retryable.is_none()
        {
            failure.retryable = spec.entry(failure.exit).map(|e| e.retryable);
        }
        response.duration_ms = elapsed_ms(started);
        finish(response, modes.output, String::new())
    }

    /// Stages 3–4 for a detached worker re-running a job's argv.
    pub(crate) fn prepare_for_worker(
        &self,
        argv: Vec<OsString>,
    ) -> Result<(&CommandSpec, Prepared), Box<Failure>> {
        let modes = Modes::detect(&argv);
        let command = cli::build(&self.registry, &self.name, &self.version, &self.about);
        let parsed = cli::parse(command, &self.registry, &argv).map_err(|early| match early {
            Early::Invalid { failure, .. } => failure,
            _ => Box::new(Failure::internal("the job's argv does not name a command")),
        })?;
        let spec = self
            .registry
            .get(&parsed.path)
            .ok_or_else(|| Box::new(Failure::internal("the job's command is not registered")))?;
        let prepared =
            self.prepare(spec, parsed, argv, modes, Instant::now()).map_err(|(f, _)| f)?;
        Ok((spec, prepared))
    }

    /// Stage 4: everything about the invocation that can be wrong before any work.
    pub(crate) fn prepare(
        &self,
        spec: &CommandSpec,
        parsed: Parsed,
        argv: Vec<OsString>,
        modes: Modes,
        started: Instant,
    ) -> Result<Prepared, (Box<Failure>, Option<u64>)> {
        let bad = |failure: Failure, timeout_ms| Err((Box::new(failure), timeout_ms));
        let default_ms = default_timeout_ms(spec);
        let timeout = match parsed.timeout.as_deref().map(parse_duration) {
            None => Some(Duration::from_millis(default_ms)),
            Some(Ok(d)) if d.is_zero() => None,
            Some(Ok(d)) => Some(d),
            Some(Err(e)) => {
                return bad(
                    Failure::arg("INVALID_DURATION", format!("--timeout: {e}")),
                    Some(default_ms),
                );
            }
        };
        let timeout_ms = timeout.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let budget_flag = match parsed.budget.as_deref().map(parse_duration) {
            None => None,
            Some(Ok(d)) => Some(d),
            Some(Err(e)) => {
                return bad(
                    Failure::arg("INVALID_DURATION", format!("--budget: {e}")),
                    Some(timeout_ms),
                );
            }
        };
        let instance = parsed.instance_id.clone().unwrap_or_else(|| DEFAULT_INSTANCE.to_owned());
        if let Err(e) = validate_instance_id(&instance) {
            return bad(
                Failure::arg("INVALID_INSTANCE_ID", e.to_string())
                    .suggestion("use e.g. --instance-id ci-1"),
                Some(timeout_ms),
            );
        }
        if let Some(key) = &parsed.idempotency_key {
            let printable = key.chars().all(|c| !c.is_control());
            if key.is_empty() || key.len() > 200 || !printable {
                return bad(
                    Failure::arg(
                        "INVALID_IDEMPOTENCY_KEY",
                        "--idempotency-key must be 1-200 printable characters",
                    ),
                    Some(timeout_ms),
                );
            }
        }
        let pace = match pace_from_env() {
            Ok(pace) => pace,
            Err(failure) => return bad(failure, Some(timeout_ms)),
        };
        let state = match StateConfig::from_env(instance) {
            Ok(state) => state,
            Err(failure) => return bad(failure, Some(timeout_ms)),
        };
        let invocation = Invocation {
            argv,
            path: parsed.path.clone(),
            timeout,
            timeout_explicit: parsed.timeout.is_some(),
            budget_flag,
            idempotency_key: parsed.idempotency_key.clone(),
            modes,
            pace,
            test_mode: test_mode(),
            stream: parsed.stream,
            started,
        };
        Ok(Prepared { args: parsed.args, invocation, state, timeout_ms })
    }

    /// Stages 5–8, with the call budget of an interruptible command (or `job wait`) resolved
    /// first, so that every response after validation records it in `meta.budget_ms`.
    fn dispatch(&self, spec: &CommandSpec, prepared: Prepared) -> Response {
        let budget = (spec.interruption.is_some() || spec.takes_budget)
            .then(|| super::interrupt::resolve_call_budget(&prepared.invocation));
        let mut response = self.dispatch_inner(spec, prepared, budget.as_ref());
        match &budget {
            Some(budget) => {
                super::interrupt::stamp_budget(&mut response, budget);
                crate::mutants::budget_meta_dropped(&spec.path, &mut response);
            }
            None => crate::mutants::plain_budget_meta(&mut response),
        }
        response
    }

    fn dispatch_inner(
        &self,
        spec: &CommandSpec,
        prepared: Prepared,
        budget: Option<&ResolvedBudget>,
    ) -> Response {
        let Prepared { args, invocation, state, .. } = prepared;
        let digest = args_digest(&spec.path, &args);
        let key = invocation.idempotency_key.clone();
        let instance = state.instance.clone();

        // Stage 5: a finished call with the same key answers from the store.
        let mut db = None;
        if let (true, Some(key)) = (spec.danger_level.writes(), &key) {
            let mut opened = match StateDb::open(&state, &self.migrations) {
                Ok(opened) => opened,
                Err(e) => return Response::failure(e.to_failure()),
            };
            let lookup = opened.idempotency_lookup(&state.instance, &spec.path, key);
            match crate::mutants::idempotency_lookup(lookup) {
                Err(e) => return Response::failure(e.to_failure()),
                Ok(Some((stored_digest, data))) if stored_digest == digest => {
                    let mut data = data;
                    if let Some(map) = data.as_object_mut() {
                        map.insert("effect".into(), json!("noop"));
                    }
                    let mut response = Response::success(data);
                    response.meta.insert("idempotency_hit".into(), json!(true));
                    return response;
                }
                Ok(Some(_)) => return Response::failure(key_reused(key)),
                Ok(None) => {}
            }
            db = Some(opened);
        }

        // Stage 6: interruptible, async and `job` commands go through the job runtime
        // (`interrupt`): attach to the identical invocation's job, hand off to a detached
        // worker, or run here up to a checkpoint past the budget. The budget was resolved in
        // `dispatch`. Every other command runs below under its plain wall-clock limit.
        if super::interrupt::handles(spec) {
            return super::interrupt::dispatch(
                self,
                spec,
                super::interrupt::Call { args, invocation, state, budget, idempotency: db },
            );
        }

        // Stage 7: the work.
        let stop = StopToken::new();
        let test_mode = invocation.test_mode;
        let timeout = invocation.timeout;
        let started = invocation.started;
        let sink = invocation.stream.then(StreamSink::new);
        let mut ctx = Ctx::new(args, invocation, state, stop.clone());
        if let Some(sink) = &sink {
            ctx.set_sink(sink.clone());
        }
        if spec.path == "manifest" {
            ctx.set_manifest(self.manifest());
        }
        ctx.set_state_migrations(self.migrations.clone());
        let outcome = self.supervise(spec, ctx, &stop, timeout, started, sink.as_ref());

        // Stage 8: the response.
        let (result, warnings, meta) = match outcome {
            Supervised::Done { result, mut ctx } => (*result, ctx.take_warnings(), ctx.take_meta()),
            Supervised::Stopped(reason) => {
                (Err(stop_failure(spec, reason, timeout)), Vec::new(), Default::default())
            }
            Supervised::Interrupted => (Err(sigint_failure()), Vec::new(), Default::default()),
        };
        let record = db.as_mut().zip(key.as_deref()).map(|(db, key)| IdempotencyRecord {
            db,
            instance: &instance,
            key,
            digest: &digest,
        });
        let mut response = respond(spec, result, warnings, meta, test_mode, record);
        if let Some(sink) = &sink {
            // The terminal line: no item line may follow it.
            let (emitted, last_seq) = sink.close();
            if response.exit != Exit::SUCCESS {
                response.meta.insert("items_emitted".into(), json!(last_seq));
            }
            response.stream = Some(StreamEnd { emitted, last_seq });
        }
        response
    }

    /// Runs the work on its own thread and watches the clock, SIGTERM and SIGINT. SIGINT is
    /// answered here only (REQ-F-069): commands run by the job runtime keep its default.
    fn supervise(
        &self,
        spec: &CommandSpec,
        mut ctx: Ctx,
        stop: &StopToken,
        timeout: Option<Duration>,
        started: Instant,
        sink: Option<&StreamSink>,
    ) -> Supervised {
        if let Err(e) =
            signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&self.sigint))
        {
            ctx.warn("SIGINT_NOT_HANDLED", format!("no SIGINT handler: {e}"));
        }
        let mut interrupted = false;
        let (tx, rx) = mpsc::channel();
        let run = Arc::clone(&spec.run);
        let fault = test_fault();
        let spawned = std::thread::Builder::new().name("work".into()).spawn(move || {
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| match fault.as_deref() {
                Some("panic") => panic!("injected fault (REFTOOL_TEST_FAULT=panic)"),
                // Work that ignores every stop request (blocked I/O): the wall-clock limit
                // must still end the call.
                Some("hang") => loop {
                    std::thread::sleep(Duration::from_secs(3600));
                },
                Some("undeclared-exit") => {
                    Err(Failure::new(Exit(99), "INJECTED", "injected undeclared exit"))
                }
                _ => run(&mut ctx),
            }))
            .unwrap_or_else(|panic| {
                let text = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_owned());
                Err(Failure::internal("internal error: the command panicked").detail(text))
            });
            let _ = tx.send((result, ctx));
        });
        if let Err(e) = spawned {
            return Supervised::lost(format!("failed to start the work: {e}"), started);
        }
        let deadline = timeout.map(|t| started + t);
        let mut stopped_at: Option<(Instant, StopReason)> = None;
        let mut stop_attempt: Option<Instant> = None;
        loop {
            match rx.recv_timeout(POLL) {
                Ok((result, ctx)) => {
                    return match stopped_at {
                        Some(_) if interrupted => Supervised::Interrupted,
                        Some((_, reason)) => Supervised::Stopped(reason),
                        None => Supervised::Done { result: Box::new(result), ctx: Box::new(ctx) },
                    };
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Supervised::lost("the work ended without an answer".into(), started);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            let now = Instant::now();
            if stopped_at.is_none() && !interrupted && self.sigint.load(Ordering::SeqCst) {
                interrupted = true;
                if let Some(sink) = sink {
                    // A stream stops at once: the sink is closed before anything else, so the
                    // cancellation is the next and last line.
                    sink.close();
                    stop.request_stop(StopReason::Signal);
                    return Supervised::Interrupted;
                }
            }
            if stopped_at.is_none() {
                let reason = if self.sigterm.load(Ordering::SeqCst) || interrupted {
                    Some(StopReason::Signal)
                } else if deadline.is_some_and(|d| now >= d) {
                    Some(StopReason::Timeout)
                } else {
                    None
                };
                if let Some(reason) = reason {
                    stop_attempt.get_or_insert(now);
                    if stop.request_stop(reason) {
                        stopped_at = Some((now, reason));
                    }
                }
            }
            if let Some((at, reason)) = stopped_at
                && now.duration_since(at) >= STOP_GRACE
            {
                // The work did not acknowledge; answer without it. Nothing was committed
                // (the stop won the commit gate), so the answer is honest.
                return if interrupted {
                    Supervised::Interrupted
                } else {
                    Supervised::Stopped(reason)
                };
            }
            if let Some(at) = stop_attempt
                && stopped_at.is_none()
                && now.duration_since(at) >= COMMIT_GRACE
            {
                return Supervised::lost(
                    "the work claimed its commit but did not finish; its outcome is unknown".into(),
                    started,
                );
            }
        }
    }
}

/// Where a writer's successful answer is recorded under its idempotency key.
pub(crate) struct IdempotencyRecord<'a> {
    pub(crate) db: &'a mut StateDb,
    pub(crate) instance: &'a str,
    pub(crate) key: &'a str,
    pub(crate) digest: &'a str,
}

/// Stage 8: the response of finished work: the `effect` check for writers and the
/// undeclared-exit check (test mode), the idempotency record, warnings and extra meta.
pub(crate) fn respond(
    spec: &CommandSpec,
    result: Result<Value, Failure>,
    warnings: Vec<super::context::Warning>,
    meta: serde_json::Map<String, Value>,
    test_mode: bool,
    record: Option<IdempotencyRecord<'_>>,
) -> Response {
    let mut response = match result {
        Ok(data) => {
            let effect_ok = spec.danger_level == DangerLevel::Safe
                || matches!(
                    data.get("effect").and_then(Value::as_str),
                    Some("created" | "updated" | "deleted" | "noop")
                );
            if test_mode && !effect_ok {
                Response::failure(
                    Failure::internal(format!(
                        "framework check: {} writes but its data has no valid effect",
                        spec.path
                    ))
                    .context(json!({"check": "EFFECT_FIELD"})),
                )
            } else {
                let mut response = Response::success(data);
                if let Some(record) = record
                    && let Err(e) = record.db.idempotency_record(
                        record.instance,
                        &spec.path,
                        record.key,
                        record.digest,
                        &response.data,
                    )
                {
                    response.warnings.push(super::context::Warning {
                        code: "IDEMPOTENCY_NOT_RECORDED".into(),
                        message: e.to_string(),
                    });
                }
                response
            }
        }
        Err(failure) => Response::failure(failure),
    };
    let signal_exit = response.exit == Exit::SIGTERM || response.exit == Exit::SIGINT;
    if test_mode && !signal_exit && spec.entry(response.exit).is_none() {
        response = Response::failure(
            Failure::internal(format!(
                "framework check: {} exited {} which it does not declare",
                spec.path,
                response.exit.code()
            ))
            .context(json!({"check": "UNDECLARED_EXIT_CODE", "exit_code": response.exit.code()})),
        );
    }
    let mut all_warnings = warnings;
    all_warnings.append(&mut response.warnings);
    response.warnings = all_warnings;
    for (name, value) in meta {
        response.meta.insert(name, value);
    }
    response
}

/// A parsed, validated invocation (stage 4), ready for stages 5–8.
pub(crate) struct Prepared {
    pub(crate) args: Args,
    pub(crate) invocation: Invocation,
    pub(crate) state: StateConfig,
    pub(crate) timeout_ms: u64,
}

enum Supervised {
    Done {
        result: Box<Result<Value, Failure>>,
        ctx: Box<Ctx>,
    },
    Stopped(StopReason),
    /// SIGINT stopped the work.
    Interrupted,
}

impl Supervised {
    /// The work gave no context back (it could not start, or vanished): an internal error.
    fn lost(message: String, started: Instant) -> Supervised {
        Supervised::Done {
            result: Box::new(Err(Failure::internal(message))),
            ctx: Box::new(Ctx::new(
                Args::default(),
                placeholder_invocation(started),
                StateConfig {
                    dir: None,
                    instance: DEFAULT_INSTANCE.into(),
                    busy_timeout: Duration::ZERO,
                },
                StopToken::new(),
            )),
        }
    }
}

fn placeholder_invocation(started: Instant) -> Invocation {
    Invocation {
        argv: Vec::new(),
        path: String::new(),
        timeout: None,
        timeout_explicit: false,
        budget_flag: None,
        idempotency_key: None,
        modes: Modes::decide(Some(OutputMode::Json), false, true, false),
        pace: Duration::ZERO,
        test_mode: false,
        stream: false,
        started,
    }
}

/// The wall-clock limit when no `--timeout` is given (REQ-F-011): an interruptible command's
/// limit bounds the whole work across continuations, so it is `max_lifetime_ms` (default one
/// hour); any other command has its declared per-command default.
pub fn default_timeout_ms(spec: &CommandSpec) -> u64 {
    match &spec.interruption {
        Some(interruption) => interruption.max_lifetime_ms.unwrap_or(DEFAULT_MAX_LIFETIME_MS),
        None => spec.default_timeout_ms,
    }
}

/// `max_lifetime_ms` of an interruptible command that declares none.
pub const DEFAULT_MAX_LIFETIME_MS: u64 = 3_600_000;

/// The honest envelope of work the framework stopped.
fn stop_failure(spec: &CommandSpec, reason: StopReason, timeout: Option<Duration>) -> Failure {
    match reason {
        StopReason::Timeout => {
            let ms = timeout.map_or(0, |d| d.as_millis());
            let retryable = spec.entry(Exit::TIMEOUT).map(|e| e.retryable).unwrap_or(false);
            Failure::new(
                crate::mutants::plain_timeout_exit(Exit::TIMEOUT),
                "TIMEOUT",
                format!("the wall-clock limit of {ms} ms ran out; the work stopped"),
            )
            .retryable(retryable)
            .context(json!({"timeout_ms": ms}))
            .suggestion("raise --timeout if the work needs longer")
        }
        StopReason::Signal => {
            Failure::new(Exit::SIGTERM, "CANCELLED", "cancelled by SIGTERM; the work stopped")
                .retryable(false)
                .with_data(json!({"partial": true}))
        }
        StopReason::Budget => Failure::stopped(StopReason::Budget),
    }
}

/// Help is for a person: off stdout unless stdout is a terminal.
fn help(text: String, modes: Modes) -> Finished {
    if crate::mutants::help_on_stdout(modes.stdout_is_terminal) {
        Finished { stdout: text.into_bytes(), stderr: String::new(), exit: 0 }
    } else {
        Finished { stdout: Vec::new(), stderr: text, exit: 0 }
    }
}

/// The cancellation envelope after SIGINT (REQ-F-069): CANCELLED, exit 130, `data.partial`.
fn sigint_failure() -> Failure {
    let failure = Failure::new(Exit::SIGINT, "CANCELLED", "cancelled by SIGINT; the work stopped")
        .retryable(false)
        .context(json!({"signal": "SIGINT"}))
        .with_data(json!({"partial": true}));
    crate::mutants::sigint_failure(failure)
}

/// sha256 of the canonical JSON of the command path and its arguments.
pub fn args_digest(path: &str, args: &Args) -> String {
    let canonical = canonical_json(&json!({"command": path, "args": args.to_json()}));
    let digest = Sha256::digest(canonical.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// `REFTOOL_PACE_MS`: milliseconds of sleep per unit of work (default 0).
pub fn pace_from_env() -> Result<Duration, Failure> {
    match std::env::var("REFTOOL_PACE_MS") {
        Err(std::env::VarError::NotPresent) => Ok(Duration::ZERO),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(Failure::arg("ENV_INVALID", "REFTOOL_PACE_MS is not UTF-8"))
        }
        Ok(text) => match text.trim().parse::<u64>() {
            Ok(ms) if ms <= 60_000 => Ok(Duration::from_millis(ms)),
            _ => Err(Failure::arg(
                "ENV_INVALID",
                format!("REFTOOL_PACE_MS must be whole milliseconds up to 60000, got {text:?}"),
            )),
        },
    }
}

/// `REFTOOL_TEST_MODE=1`.
pub fn test_mode() -> bool {
    std::env::var("REFTOOL_TEST_MODE").is_ok_and(|v| v == "1")
}

fn test_fault() -> Option<String> {
    if test_mode() { std::env::var("REFTOOL_TEST_FAULT").ok() } else { None }
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn finish(response: Response, mode: OutputMode, extra_stderr: String) -> Finished {
    let (stdout, stderr) = response.render(mode);
    Finished { stdout, stderr: extra_stderr + &stderr, exit: response.exit.code() }
}

/// The GENERAL_ERROR answer when everything else failed (a panic outside the work).
pub fn internal_error_finish(mode: OutputMode, message: &str) -> Finished {
    finish(
        Response::failure(Failure::internal("internal error").detail(message).retryable(false)),
        mode,
        String::new(),
    )
}
