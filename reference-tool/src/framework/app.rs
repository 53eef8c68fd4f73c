//! The dispatch path: argv in, one answer out.
//!
//! [`App::answer`] never writes and never exits: it returns an [`Answer`] that [`App::run`]
//! renders into a [`Finished`], which `main` writes in one `write_all` and turns into the exit
//! status. The stages, in order:
//!
//! 1. modes (JSON or text, interactive or not), decided once;
//! 2. the detached worker (`__worker <job dir>`) and other hidden entry points, before clap;
//! 3. parse (clap) → ARG_ERROR, help or `--version`;
//! 4. validation of framework flags and environment ([`super::prepare`]);
//! 5. idempotency: the key's first use reserves it for the call's arguments; a finished call
//!    with the same key answers from the store, other arguments under it are refused;
//! 6. interruptible, async and `job` commands: the job runtime ([`super::interrupt`]), with
//!    the call budget resolved first ([`super::budget`]);
//! 7. the work, on its own thread, bounded by the wall-clock limit and SIGTERM;
//! 8. the response ([`super::respond`]): declared-exit checks, retryable from the declared
//!    entry, meta.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::budget::{CallBudget, resolve_call_budget, stamp_budget};
use super::cli::{self, Early};
use super::context::{Args, Ctx, Invocation};
use super::envelope::Response;
use super::exit::Exit;
use super::failure::Failure;
use super::interrupt::{self, Host};
use super::manifest;
use super::modes::{Modes, OutputMode};
use super::prepare::{Prepared, prepare};
use super::registry::{CommandSpec, DEFAULT_TIMEOUT_MS, RegistrationError, Registry};
use super::respond::{IdempotencyRecord, args_digest, respond};
use super::state::{
    DEFAULT_INSTANCE, FRAMEWORK_MIGRATIONS, KeyUse, Migration, StateConfig, StateDb, key_reused,
};
use super::stop::{StopReason, StopToken};
use super::stream::{StreamEnd, StreamSink};
use crate::runtime::Parts;
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

impl Finished {
    /// Writes stderr, then stdout in one go, and gives the exit status: GENERAL_ERROR when
    /// a success could not be written.
    pub fn write(self) -> ExitCode {
        if !self.stderr.is_empty() {
            let _ = std::io::stderr().lock().write_all(self.stderr.as_bytes());
        }
        let mut stdout = std::io::stdout().lock();
        let written = stdout.write_all(&self.stdout).and_then(|()| stdout.flush());
        if written.is_err() && self.exit == Exit::SUCCESS.code() {
            return ExitCode::from(Exit::GENERAL_ERROR.code());
        }
        ExitCode::from(self.exit)
    }
}

/// What an invocation answers, before it is rendered.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A response, rendered for `mode`; `usage` goes to stderr before the response's own
    /// stderr text (clap's rendering of a refused invocation).
    Response {
        /// The response.
        response: Box<Response>,
        /// The output mode it is rendered in.
        mode: OutputMode,
        /// Text for stderr ahead of the response's.
        usage: String,
    },
    /// Help asked for: for a person, so on stdout only when stdout is a terminal, else on
    /// stderr (REQ-F-048), exit 0.
    Help {
        /// The help text.
        text: String,
        /// Whether stdout is a terminal.
        stdout_is_terminal: bool,
    },
    /// Already rendered: a worker's or hidden entry's exit, the `--version` line.
    Finished(Finished),
}

impl Answer {
    fn response(response: Response, mode: OutputMode) -> Answer {
        Answer::Response { response: Box::new(response), mode, usage: String::new() }
    }

    /// The bytes and exit status of this answer.
    pub fn finish(self) -> Finished {
        match self {
            Answer::Response { response, mode, usage } => {
                let (stdout, stderr) = response.render(mode);
                Finished { stdout, stderr: usage + &stderr, exit: response.exit.code() }
            }
            Answer::Help { text, stdout_is_terminal: true } => {
                Finished { stdout: text.into_bytes(), stderr: String::new(), exit: 0 }
            }
            Answer::Help { text, stdout_is_terminal: false } => {
                Finished { stdout: Vec::new(), stderr: text, exit: 0 }
            }
            Answer::Finished(finished) => finished,
        }
    }
}

/// A tool: its registry, the framework's settings and the job runtime's parts.
pub struct App {
    name: String,
    version: String,
    about: String,
    registry: Registry,
    migrations: Vec<Migration>,
    hidden: BTreeMap<String, HiddenEntry>,
    parts: Parts,
    sigterm: Arc<AtomicBool>,
    /// The signal that cancelled the call, SIGINT or SIGHUP (REQ-F-069); 0 while none came.
    cancel_signal: Arc<AtomicUsize>,
}

impl App {
    /// A tool without commands, on reftool's runtime parts ([`Parts::default`]).
    pub fn new(name: &str, version: &str, about: &str) -> App {
        App {
            name: name.to_owned(),
            version: version.to_owned(),
            about: about.to_owned(),
            registry: Registry::new(),
            migrations: FRAMEWORK_MIGRATIONS.to_vec(),
            hidden: BTreeMap::new(),
            parts: Parts::default(),
            sigterm: Arc::new(AtomicBool::new(false)),
            cancel_signal: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// This tool on the runtime parts `parts` (how its jobs are named, where their progress
    /// goes, how their worker starts).
    pub fn with_parts(mut self, parts: Parts) -> App {
        self.parts = parts;
        self
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

    /// One line on what the tool is for (its help's header).
    pub fn about(&self) -> &str {
        &self.about
    }

    /// The registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The runtime's parts.
    pub fn parts(&self) -> &Parts {
        &self.parts
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
    ///
    /// SIGXFSZ gets a handler that does nothing: past a file-size limit (`ulimit -f`) a write
    /// then fails with EFBIG, which the command answers with an error envelope, where the
    /// signal's default action killed the process without one.
    pub fn install_signal_handlers(&self) -> std::io::Result<()> {
        signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&self.sigterm))?;
        signal_hook::flag::register(
            signal_hook::consts::SIGXFSZ,
            Arc::new(AtomicBool::new(false)),
        )?;
        Ok(())
    }

    /// Installs the handlers of the signals that cancel a call, SIGINT and SIGHUP (REQ-F-069),
    /// the tool's way ([`Parts::cancel`]): each records its number in `cancel_signal` and, for
    /// the job runtime, raises `also` (the SIGTERM flag: the work stops at its next safe point,
    /// a wait ends at once).
    fn listen_for_cancel(&self, also: Option<&Arc<AtomicBool>>) -> std::io::Result<()> {
        self.parts.cancel.listen(&self.cancel_signal, also)
    }

    /// Runs one invocation: its answer, rendered.
    pub fn run(&self, argv: Vec<OsString>) -> Finished {
        self.answer(argv).finish()
    }

    /// Runs one invocation up to its answer.
    pub fn answer(&self, argv: Vec<OsString>) -> Answer {
        let started = Instant::now();
        let modes = Modes::detect(&argv);
        if argv.get(1).is_some_and(|a| a == WORKER_ARG) {
            return Answer::Finished(Finished {
                stdout: Vec::new(),
                stderr: String::new(),
                exit: interrupt::run_worker(&self.host(), &argv),
            });
        }
        if let Some(entry) = argv.get(1).and_then(|a| a.to_str()).and_then(|a| self.hidden.get(a)) {
            let exit = entry(&argv);
            return Answer::Finished(Finished { stdout: Vec::new(), stderr: String::new(), exit });
        }
        let command = cli::build(&self.registry, &self.name, &self.version, &self.about);
        let parsed = match cli::parse(command, &self.registry, &argv) {
            Ok(parsed) => parsed,
            Err(Early::Help(text)) => {
                return Answer::Help { text, stdout_is_terminal: modes.stdout_is_terminal };
            }
            Err(Early::Version) => {
                if modes.output == OutputMode::Text {
                    let line = format!("{} {}\n", self.name, self.version);
                    let stdout = line.into_bytes();
                    return Answer::Finished(Finished { stdout, stderr: String::new(), exit: 0 });
                }
                let mut response =
                    Response::success(manifest::version_data(&self.name, &self.version));
                response.duration_ms = elapsed_ms(started);
                response.timeout_ms = Some(DEFAULT_TIMEOUT_MS);
                return Answer::response(response, modes.output);
            }
            Err(Early::Invalid { failure, usage }) => {
                let mut response = Response::failure(*failure);
                response.duration_ms = elapsed_ms(started);
                response.timeout_ms = Some(DEFAULT_TIMEOUT_MS);
                return Answer::Response {
                    response: Box::new(response),
                    mode: modes.output,
                    usage,
                };
            }
        };
        let Some(spec) = self.registry.get(&parsed.path) else {
            let response = Response::failure(Failure::internal("parsed an unregistered command"));
            return Answer::response(response, modes.output);
        };
        let (response, timeout_ms) = match prepare(spec, parsed, argv, modes, started) {
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
        Answer::response(response, modes.output)
    }

    /// What the job runtime gets of this tool.
    fn host(&self) -> Host<'_> {
        Host {
            registry: &self.registry,
            name: &self.name,
            version: &self.version,
            about: &self.about,
            migrations: &self.migrations,
            sigterm: &self.sigterm,
            cancel_signal: &self.cancel_signal,
            parts: &self.parts,
        }
    }

    /// Stages 5–8, with the call budget of an interruptible command (or `job wait`) resolved
    /// first, so that every response after validation records it in `meta.budget_ms`.
    fn dispatch(&self, spec: &CommandSpec, prepared: Prepared) -> Response {
        let budget = (spec.interruption.is_some() || spec.takes_budget)
            .then(|| resolve_call_budget(&prepared.invocation));
        let mut response = self.dispatch_inner(spec, prepared, budget.as_ref());
        if let Some(budget) = &budget {
            stamp_budget(&mut response, budget);
        }
        response
    }

    fn dispatch_inner(
        &self,
        spec: &CommandSpec,
        prepared: Prepared,
        budget: Option<&CallBudget>,
    ) -> Response {
        let Prepared { args, invocation, mut state, .. } = prepared;
        // A call with a budget waits for the state database no longer than its budget.
        state.deadline = budget.and_then(|b| b.budget).map(|b| invocation.started + b);
        let digest = args_digest(&spec.path, &args);
        let key = invocation.idempotency_key.clone();
        let instance = state.instance.clone();

        // Stage 5: the key is claimed: its first use reserves it for these arguments; a
        // finished call with the same key answers from the store, one with other arguments
        // (finished or still running) is refused, and the first call's continuation goes on.
        let mut db = None;
        if let (true, Some(key)) = (spec.danger_level.writes(), &key) {
            let mut opened = match StateDb::open(&state, &self.migrations) {
                Ok(opened) => opened,
                Err(e) => return Response::failure(e.to_failure()),
            };
            match opened.idempotency_claim(&state.instance, &spec.path, key, &digest) {
                Err(e) => return Response::failure(e.to_failure()),
                Ok(KeyUse::Finished(data)) => {
                    let mut data = data;
                    if let Some(map) = data.as_object_mut() {
                        map.insert("effect".into(), json!("noop"));
                    }
                    let mut response = Response::success(data);
                    response.meta.insert("idempotency_hit".into(), json!(true));
                    return response;
                }
                Ok(KeyUse::Conflict { in_progress }) => {
                    return Response::failure(key_reused(key, in_progress));
                }
                Ok(KeyUse::Reserved | KeyUse::InProgress) => {}
            }
            db = Some(opened);
        }

        // Stage 6: interruptible, async and `job` commands go through the job runtime
        // (`interrupt`): attach to the identical invocation's job, hand off to a detached
        // worker, or run here up to a checkpoint past the budget. The budget was resolved in
        // `dispatch`. Every other command runs below under its plain wall-clock limit.
        if interrupt::handles(spec) {
            // SIGINT and SIGHUP stop the work at its next safe point, as SIGTERM does, and the
            // call answers the cancellation envelope (REQ-F-069), saying where the job stands.
            if let Err(e) = self.listen_for_cancel(Some(&self.sigterm)) {
                let _ = writeln!(std::io::stderr().lock(), "reftool: no SIGINT handler: {e}");
            }
            let call = interrupt::Call { args, invocation, state, budget, idempotency: db };
            return interrupt::dispatch(&self.host(), spec, call);
        }

        // Stage 7: the work.
        let stop = StopToken::new();
        let test_mode = invocation.test_mode;
        let cleanup = invocation.cleanup;
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
            Supervised::Interrupted => {
                // The command's cleanup runs before the cancellation is answered (REQ-F-069);
                // a second SIGINT meanwhile ends the process at once (`CancelSignals`).
                // reftool's commands roll back in their own transaction and have nothing left
                // to clean; REFTOOL_CLEANUP_MS makes the cleanup take that long, as a tool's
                // with temporary files to remove would.
                std::thread::sleep(cleanup);
                let signal = i32::try_from(self.cancel_signal.load(Ordering::SeqCst)).unwrap_or(0);
                (
                    Err(Failure::cancelled_by(signal, "the work stopped")),
                    Vec::new(),
                    Default::default(),
                )
            }
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

    /// Runs the work on its own thread and watches the clock, SIGTERM, SIGINT and SIGHUP
    /// (REQ-F-069: a cancellation envelope, 130 or 129; the job runtime answers them in its
    /// own way, see `interrupt`).
    fn supervise(
        &self,
        spec: &CommandSpec,
        mut ctx: Ctx,
        stop: &StopToken,
        timeout: Option<Duration>,
        started: Instant,
        sink: Option<&StreamSink>,
    ) -> Supervised {
        if let Err(e) = self.listen_for_cancel(None) {
            ctx.warn("SIGINT_NOT_HANDLED", format!("no SIGINT handler: {e}"));
        }
        let mut interrupted = false;
        let (tx, rx) = mpsc::channel();
        let run = Arc::clone(&spec.run);
        let spawned = std::thread::Builder::new().name("work".into()).spawn(move || {
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| run(&mut ctx)))
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
            if stopped_at.is_none()
                && !interrupted
                && self.cancel_signal.load(Ordering::SeqCst) != 0
            {
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

enum Supervised {
    Done {
        result: Box<Result<Value, Failure>>,
        ctx: Box<Ctx>,
    },
    Stopped(StopReason),
    /// SIGINT or SIGHUP stopped the work.
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
                    deadline: None,
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
        cleanup: Duration::ZERO,
        test_mode: false,
        stream: false,
        started,
    }
}

/// The honest envelope of work the framework stopped.
fn stop_failure(spec: &CommandSpec, reason: StopReason, timeout: Option<Duration>) -> Failure {
    match reason {
        StopReason::Timeout => {
            let ms = timeout.map_or(0, |d| d.as_millis());
            let retryable = spec.entry(Exit::TIMEOUT).map(|e| e.retryable).unwrap_or(false);
            Failure::new(
                Exit::TIMEOUT,
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

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// The GENERAL_ERROR answer when everything else failed (a panic outside the work).
pub fn internal_error_finish(mode: OutputMode, message: &str) -> Finished {
    let failure = Failure::internal("internal error").detail(message).retryable(false);
    Answer::response(Response::failure(failure), mode).finish()
}
