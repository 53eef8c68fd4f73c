//! The framework: command authors declare, the framework enforces.
//!
//! # Adding a command
//!
//! ```no_run
//! use reftool::framework::{CommandSpec, DangerLevel, Exit, FlagSpec, SideEffects};
//! use serde_json::json;
//!
//! let spec = CommandSpec::new("greet", "Say hello to someone", |ctx| {
//!     let name = ctx.args.text("name").unwrap_or("world").to_owned();
//!     Ok(json!({ "greeting": format!("hello, {name}") }))
//! })
//! .flag(FlagSpec::string("name", "Who to greet"))
//! .exit(Exit::SUCCESS, "Greeted", false, SideEffects::None);
//! # let _ = spec;
//! ```
//!
//! Register it with [`App::register`]; registration refuses every declaration the contract
//! forbids ([`RegistrationError`]). The work returns `Ok(data)` or `Err(Failure)`; it never
//! writes stdout and never picks the exit code of a success.
//!
//! # What the framework does for every command
//!
//! - Adds the global options `--output json|text`, `--timeout <duration>` and
//!   `--instance-id <id>`; `--idempotency-key` on mutating and destructive commands; `--budget`
//!   on interruptible ones (and on no other); `--stream` on commands that declare
//!   `supports_streaming` ([`stream`]: JSONL items with `_seq`, then one terminal line).
//! - Accepts options anywhere and a scalar option repeated with the same value; different
//!   values are ARG_ERROR 2 `CONFLICTING_OPTION` ([`options`]).
//! - Adds the exits it may produce itself when the command did not declare them: 1, 2, 4, 10,
//!   and for writers 6 (`IDEMPOTENCY_KEY_REUSED`) and 12 (`STATE_BUSY`).
//! - Writes exactly one envelope (JSON mode) with `ok` and `meta.exit_code` derived from the
//!   exit, `meta.duration_ms` and `meta.timeout_ms` always, warnings as objects; text for a
//!   person at a terminal. Panics become a GENERAL_ERROR envelope.
//! - Bounds the work by its wall-clock limit (TIMEOUT 10, `retryable` from the declared "10")
//!   and answers SIGTERM with a cancellation envelope and exit 143, once; SIGINT with CANCELLED,
//!   `data.partial: true` and exit 130 (commands outside the job runtime; a stream stops at
//!   once) after the command's cleanup, which a second SIGINT cuts short with an exit 130 at
//!   once (REQ-F-069); lists "130" in every command's exit codes.
//! - Answers a repeated writer call with the same `--idempotency-key` from its store.
//!
//! # Environment
//!
//! | Variable | Meaning |
//! |---|---|
//! | `CI`, `NO_COLOR` | set: JSON mode even at a terminal |
//! | `REFTOOL_INSTANCE_ID` | instance when `--instance-id` is absent |
//! | `REFTOOL_STATE_DIR` | state directory (absolute); else `$XDG_STATE_HOME/reftool`, else `$HOME/.local/state/reftool` |
//! | `REFTOOL_STATE_BUSY_MS` | busy timeout of the state database (default 5000) |
//! | `REFTOOL_PACE_MS` | the project-wide pacing knob: milliseconds of sleep per unit of work (0–60000, default 0), so small fixtures take seconds and limits can be provoked reliably |
//! | `REFTOOL_TEST_MODE=1` | self-checks: undeclared exit codes, missing `effect`, progress going backwards become GENERAL_ERROR |
//! | `AGENT_CALL_BUDGET_MS` | the call budget of interruptible commands when `--budget` is absent (malformed: a warning, the default 30000 ms) |
//! | `REFTOOL_IDLE_TIMEOUT_MS` | test knob: overrides every command's `idle_timeout_ms` (1–86400000) |
//! | `REFTOOL_CLEANUP_MS` | test knob: how long a command outside the job runtime, cancelled by SIGINT or SIGHUP, cleans up before it answers (0–60000, default 0), so a second SIGINT can land during the cleanup |
//!
//! A malformed value of any of these (but `AGENT_CALL_BUDGET_MS`) is ARG_ERROR 2
//! (`ENV_INVALID`), nothing done.

//! # Interruptible, async and job commands
//!
//! A command declaring `interruption`, or `async: true`, has its work registered with
//! [`CommandSpec::with_job_work`]: `Fn(&mut Ctx, &mut JobContext) -> Result<Value, Failure>`.
//! The same function runs in the detached worker and in the front process of a resume-only
//! command. It reports progress and saves checkpoints through the runtime's `JobContext`, and
//! returns [`Failure::job_stopped`] when a safe point answers `Stop`:
//!
//! ```no_run
//! use reftool::framework::{CommandSpec, Exit, Failure, Interruption, SideEffects};
//! use reftool::runtime::checkpoint::Flow;
//! use serde_json::json;
//!
//! let spec = CommandSpec::with_job_work("count", "Count to a thousand", |_ctx, job| {
//!     let store = job.file_checkpoints("v1");
//!     let mut n: u64 = store.restore::<u64>().ok().and_then(|r| r.state).unwrap_or(0);
//!     while n < 1000 {
//!         n += 1;
//!         let _ = job.progress(n, Some(1000), Some("numbers"));
//!         match job.checkpoint(&store, &n, n) {
//!             Ok(Flow::Continue) => {}
//!             Ok(Flow::Stop(reason)) => return Err(Failure::job_stopped(reason)),
//!             Err(e) => return Err(Failure::internal(e.to_string())),
//!         }
//!     }
//!     let _ = store.remove();
//!     Ok(json!({ "count": n }))
//! })
//! .interruption(Interruption { detach: true, resume: true, idle_timeout_ms: None, max_lifetime_ms: None })
//! .exit(Exit::SUCCESS, "Counted", false, SideEffects::Complete)
//! .exit(Exit::INCOMPLETE, "Continues; run data.continue_command", true, SideEffects::None);
//! # let _ = spec;
//! ```
//!
//! Stage 6 of dispatch ([`interrupt`]) takes such commands over, once the call budget is
//! resolved ([`budget`], the rule's one home): it claims the invocation's job (attaching to an identical one), spawns the worker or runs the
//! work here, and answers the final response or INCOMPLETE; [`interrupt`]'s docs are the
//! manual. The `job wait/status/cancel` built-ins are dispatched there too (their `run` is
//! never called); `job wait` takes `--budget` through [`CommandSpec::budget_flag`].
//! `reftool __worker <job dir>` is recognized before clap (`main` detaches it first). How jobs
//! are named, where their progress goes and how their worker starts are the application's
//! runtime parts ([`crate::runtime::Parts`], [`App::with_parts`]).
//!
//! The budget's environment: `AGENT_CALL_BUDGET_MS` (a malformed value is a
//! `BUDGET_ENV_INVALID` warning and the default 30000 ms), and the test knob
//! `REFTOOL_IDLE_TIMEOUT_MS` (overrides every `idle_timeout_ms`; malformed: ARG_ERROR); and
//! `REFTOOL_MAX_LIFETIME_MS` (becomes every declared `max_lifetime_ms`, the bound on the work
//! without `--timeout`; malformed: ARG_ERROR).

pub mod app;
pub mod budget;
pub mod cli;
pub mod context;
pub mod envelope;
pub mod exit;
pub mod failure;
pub mod interrupt;
pub mod manifest;
pub mod modes;
pub mod options;
pub mod prepare;
pub mod registry;
pub mod respond;
pub mod state;
pub mod stop;
pub mod stream;
pub mod userdb;

pub use app::{Answer, App, Finished, HiddenEntry};
pub use context::{ArgValue, Args, Ctx, Invocation};
pub use envelope::Response;
pub use exit::{Exit, ExitCodeEntry, SideEffects};
pub use failure::{Failure, Phase, Warning};
pub use modes::{Modes, OutputMode};
pub use registry::{
    CommandSpec, DangerLevel, FlagSpec, Interruption, RegistrationError, Registry, StdoutKind,
    ValueType,
};
pub use state::{Migration, StateConfig, StateDb, StateError};
pub use stop::{StopReason, StopToken};

#[cfg(test)]
mod registry_tests;
