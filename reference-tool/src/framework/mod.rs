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
//!   on interruptible ones (and on no other).
//! - Adds the exits it may produce itself when the command did not declare them: 1, 2, 4, 10,
//!   and for writers 6 (`IDEMPOTENCY_KEY_REUSED`) and 12 (`STATE_BUSY`).
//! - Writes exactly one envelope (JSON mode) with `ok` and `meta.exit_code` derived from the
//!   exit, `meta.duration_ms` and `meta.timeout_ms` always, warnings as objects; text for a
//!   person at a terminal. Panics become a GENERAL_ERROR envelope.
//! - Bounds the work by its wall-clock limit (TIMEOUT 10, `retryable` from the declared "10")
//!   and answers SIGTERM with a cancellation envelope and exit 143, once.
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
//! | `REFTOOL_TEST_FAULT` | test mode only: `panic` or `undeclared-exit` injected into the work |
//!
//! A malformed value of any of these is ARG_ERROR 2 (`ENV_INVALID`), nothing done.

//! # For part 2 (interruption)
//!
//! - The dispatch hook is in [`app`]: `App::dispatch`, the comment "Stage 6 — PART 2 HOOK".
//!   It runs after argument validation and the idempotency check, before the work starts, with
//!   the [`CommandSpec`] (its `interruption` and exit entries) and the [`Invocation`] (argv as
//!   invoked with `argv[0]`, `budget_flag`, `timeout`/`timeout_explicit`, `idempotency_key`,
//!   `modes.interactive`) at hand. Without `--timeout`, an interruptible command's limit is
//!   already `max_lifetime_ms` (default 3600000).
//! - The work polls [`StopToken`]; [`StopReason::Budget`] exists for the call budget. A failure
//!   with a payload (`Failure::with_data`) is how INCOMPLETE carries `data`; `retryable` left
//!   `None` is filled from the command's declared entry. `Ctx::set_meta("budget_ms", ..)` adds
//!   to `meta`. `Ctx::progress` and `Ctx::checkpoint` are the hook points.
//! - State: [`App::add_state_migrations`] appends migrations; [`Ctx::open_state`] opens the
//!   database with all of them; [`StateConfig::instance_dir`] is the instance's own directory.
//! - Hidden entry points before clap: [`App::add_hidden_entry`] (`__worker`). The path `job`
//!   is reserved: register `job.wait` etc. with `CommandSpec::builtin()`.
//! - SIGTERM: [`App::sigterm_flag`] is the flag the handler raises.

pub mod app;
pub mod cli;
pub mod context;
pub mod envelope;
pub mod exit;
pub mod interrupt;
pub mod manifest;
pub mod modes;
pub mod registry;
pub mod state;
pub mod stop;

pub use app::{App, Finished, HiddenEntry};
pub use context::{ArgValue, Args, Ctx, Failure, Invocation, Phase, Warning};
pub use envelope::Response;
pub use exit::{Exit, ExitCodeEntry, SideEffects};
pub use modes::{Modes, OutputMode};
pub use registry::{
    CommandSpec, DangerLevel, FlagSpec, Interruption, RegistrationError, Registry, StdoutKind,
    ValueType,
};
pub use state::{Migration, StateConfig, StateDb, StateError};
pub use stop::{StopReason, StopToken};

#[cfg(test)]
mod registry_tests;
