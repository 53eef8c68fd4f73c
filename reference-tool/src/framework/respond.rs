//! Stage 8 of dispatch: the response of finished work, wherever it ran (the front process,
//! a resume-only call's inline run, a detached worker): the framework's checks, the
//! idempotency record, warnings and meta.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::context::Args;
use super::envelope::Response;
use super::exit::Exit;
use super::failure::{Failure, Warning};
use super::manifest::canonical_json;
use super::registry::{CommandSpec, DangerLevel};
use super::state::StateDb;

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
    warnings: Vec<Warning>,
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
                    response.warnings.push(Warning {
                        code: "IDEMPOTENCY_NOT_RECORDED".into(),
                        message: e.to_string(),
                    });
                }
                response
            }
        }
        Err(failure) => Response::failure(failure),
    };
    let signal_exit = [Exit::SIGTERM, Exit::SIGINT, Exit::SIGHUP].contains(&response.exit);
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

/// sha256 of the canonical JSON of the command path and its arguments.
pub fn args_digest(path: &str, args: &Args) -> String {
    let canonical = canonical_json(&json!({"command": path, "args": args.to_json()}));
    let digest = Sha256::digest(canonical.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Fills `error.retryable` from the command's declared exit entry when the answer left it open.
pub(crate) fn fill_retryable(spec: &CommandSpec, response: &mut Response) {
    if let Some(failure) = &mut response.error
        && failure.retryable.is_none()
    {
        failure.retryable = spec.entry(failure.exit).map(|e| e.retryable);
    }
}
