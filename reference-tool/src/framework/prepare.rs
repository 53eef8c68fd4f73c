//! Stage 4 of dispatch: everything about a parsed invocation that can be wrong before any
//! work (durations, instance, idempotency key, pacing, state directory), each an ARG_ERROR 2
//! in the validation phase; what passes becomes a `Prepared` invocation.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use super::cli::{self, Early, Parsed};
use super::context::{Args, Invocation};
use super::failure::Failure;
use super::modes::Modes;
use super::registry::{CommandSpec, Registry};
use super::state::{DEFAULT_INSTANCE, StateConfig, validate_instance_id};
use crate::duration::parse_duration;
use crate::runtime::jobs::DEFAULT_MAX_LIFETIME_MS;

/// A parsed, validated invocation (stage 4), ready for stages 5–8.
pub(crate) struct Prepared {
    pub(crate) args: Args,
    pub(crate) invocation: Invocation,
    pub(crate) state: StateConfig,
    pub(crate) timeout_ms: u64,
}

/// Stage 4: everything about the invocation that can be wrong before any work.
pub(crate) fn prepare(
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
    let (pace, cleanup) = match pace_from_env().and_then(|p| Ok((p, cleanup_from_env()?))) {
        Ok(knobs) => knobs,
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
        cleanup,
        test_mode: test_mode(),
        stream: parsed.stream,
        started,
    };
    Ok(Prepared { args: parsed.args, invocation, state, timeout_ms })
}

/// Stages 3–4 for argv that must name a command (a detached worker re-running its job's
/// argv), parsed with `command` (the registry's, [`cli::build`]).
pub(crate) fn prepare_argv(
    registry: &Registry,
    command: clap::Command,
    argv: Vec<OsString>,
) -> Result<(&CommandSpec, Prepared), Box<Failure>> {
    let modes = Modes::detect(&argv);
    let parsed = cli::parse(command, registry, &argv).map_err(|early| match early {
        Early::Invalid { failure, .. } => failure,
        _ => Box::new(Failure::internal("the job's argv does not name a command")),
    })?;
    let spec = registry
        .get(&parsed.path)
        .ok_or_else(|| Box::new(Failure::internal("the job's command is not registered")))?;
    let prepared = prepare(spec, parsed, argv, modes, Instant::now()).map_err(|(f, _)| f)?;
    Ok((spec, prepared))
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

/// `REFTOOL_PACE_MS`: milliseconds of sleep per unit of work (default 0).
pub fn pace_from_env() -> Result<Duration, Failure> {
    millis_from_env("REFTOOL_PACE_MS")
}

/// `REFTOOL_CLEANUP_MS`: how long a command outside the job runtime, cancelled by SIGINT or
/// SIGHUP, takes to clean up before it answers (default 0).
pub fn cleanup_from_env() -> Result<Duration, Failure> {
    millis_from_env("REFTOOL_CLEANUP_MS")
}

/// A knob of whole milliseconds up to a minute; absent is 0.
fn millis_from_env(name: &str) -> Result<Duration, Failure> {
    match std::env::var(name) {
        Err(std::env::VarError::NotPresent) => Ok(Duration::ZERO),
        Err(std::env::VarError::NotUnicode(_)) => {
            Err(Failure::arg("ENV_INVALID", format!("{name} is not UTF-8")))
        }
        Ok(text) => match text.trim().parse::<u64>() {
            Ok(ms) if ms <= 60_000 => Ok(Duration::from_millis(ms)),
            _ => Err(Failure::arg(
                "ENV_INVALID",
                format!("{name} must be whole milliseconds up to 60000, got {text:?}"),
            )),
        },
    }
}

/// `REFTOOL_TEST_MODE=1`.
pub fn test_mode() -> bool {
    std::env::var("REFTOOL_TEST_MODE").is_ok_and(|v| v == "1")
}
