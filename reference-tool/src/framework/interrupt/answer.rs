//! How a caller learns about a job: its final response, relayed with the job's own exit
//! code, or INCOMPLETE (`running` with `job wait` as `continue_command`, `paused` with the
//! original invocation). Waiting on a job up to a deadline (the budget, `--timeout` for
//! `job wait`) or a SIGTERM, with a progress bar when stderr is a terminal, ends here too.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use rusqlite::Connection;
use serde_json::{Value, json};

use super::host::Host;
use super::store::{Jobs, job_failure};
use crate::framework::context::Invocation;
use crate::framework::envelope::Response;
use crate::framework::exit::Exit;
use crate::framework::failure::{Failure, Phase, Warning};
use crate::framework::state::DEFAULT_INSTANCE;
use crate::runtime::ids::JobId;
use crate::runtime::incomplete::{self, IncompleteState};
use crate::runtime::jobs::{self, JobOutcome, JobStatus, JobStore, JobView};
use crate::runtime::wake::{self, WaitOutcome};

/// `argv[0]` as invoked, plus `--instance-id` when a non-default instance is in force.
pub(super) fn tool_prefix(invocation: &Invocation, instance: &str) -> Vec<OsString> {
    let argv0 = invocation.argv.first().cloned().unwrap_or_else(|| OsString::from("reftool"));
    let instance = (instance != DEFAULT_INSTANCE).then_some(instance);
    incomplete::tool_prefix(&argv0, instance)
}

/// Rebuilds a [`Response`] from an envelope stored as a job's outcome; meta is this call's.
pub(super) fn response_from_envelope(envelope: &Value, exit_code: u8) -> Response {
    let exit = Exit(exit_code);
    let data = envelope.get("data").cloned().unwrap_or(Value::Null);
    let warnings = envelope
        .get("warnings")
        .and_then(Value::as_array)
        .map(|ws| {
            ws.iter()
                .map(|w| Warning {
                    code: w.get("code").and_then(Value::as_str).unwrap_or("WARNING").to_owned(),
                    message: w.get("message").and_then(Value::as_str).unwrap_or("").to_owned(),
                })
                .collect()
        })
        .unwrap_or_default();
    let mut response = match envelope.get("error").filter(|e| e.is_object()) {
        None => Response::success(data),
        Some(error) => {
            let text = |k: &str| error.get(k).and_then(Value::as_str).map(str::to_owned);
            let mut failure = Failure::new(
                exit,
                &text("code").unwrap_or_else(|| "GENERAL_ERROR".into()),
                text("message").unwrap_or_default(),
            );
            failure.detail = text("detail");
            failure.suggestion = text("suggestion");
            failure.context = error.get("context").cloned();
            failure.retryable = error.get("retryable").and_then(Value::as_bool);
            failure.retry_after_ms = error.get("retry_after_ms").and_then(Value::as_u64);
            failure.phase = match text("phase").as_deref() {
                Some("validation") => Phase::Validation,
                Some("cleanup") => Phase::Cleanup,
                _ => Phase::Execution,
            };
            if !data.is_null() {
                failure.data = Some(data);
            }
            Response::failure(failure)
        }
    };
    response.exit = exit;
    response.warnings = warnings;
    if let Some(hit) = envelope.pointer("/meta/idempotency_hit") {
        response.meta.insert("idempotency_hit".into(), hit.clone());
    }
    response
}

/// How a caller learns about a job: the final answer, or INCOMPLETE.
pub(super) struct Answering<'a> {
    pub(super) host: &'a Host<'a>,
    pub(super) tool: Vec<OsString>,
    /// `meta.budget_ms` of an INCOMPLETE answer (for its message).
    pub(super) budget_ms: Option<u64>,
}

impl Answering<'_> {
    /// The answer for `view` as it stands.
    pub(super) fn answer(&self, view: &JobView) -> Response {
        if let Some(outcome) = &view.outcome {
            return self.ended(view, outcome);
        }
        match view.status {
            JobStatus::Running => {
                Response::failure(self.incomplete(view, IncompleteState::Running))
            }
            JobStatus::Paused => Response::failure(self.incomplete(view, IncompleteState::Paused)),
            status => Response::failure(Failure::internal(format!(
                "job {} is {} but has no outcome",
                view.record.job_id,
                status.as_str()
            ))),
        }
    }

    fn ended(&self, view: &JobView, outcome: &JobOutcome) -> Response {
        if let Some(envelope) = &outcome.response {
            return response_from_envelope(envelope, outcome.exit_code);
        }
        let id = view.record.job_id.as_str();
        let Some(failure) = &outcome.failure else {
            return Response::failure(Failure::internal(format!(
                "job {id} ended without a result"
            )));
        };
        let resumable = self
            .host
            .registry
            .get(&view.record.command_path)
            .and_then(|s| s.interruption)
            .is_some_and(|i| i.resume);
        let mut answer = Failure::new(Exit(outcome.exit_code), &failure.code, &failure.message)
            .retryable(false)
            .context(json!({"job_id": id, "status": outcome.status.as_str()}));
        if let Some(detail) = &failure.detail {
            answer = answer.detail(detail.clone());
        }
        let suggestion = match (failure.code.as_str(), resumable) {
            (jobs::JOB_LOST, true) => {
                Some("run the identical invocation again: it continues from the last checkpoint")
            }
            (jobs::JOB_LOST, false) => Some("run the identical invocation again"),
            (jobs::STALLED, _) => Some("check the input source: the work made no progress"),
            (jobs::TIMEOUT, _) => Some("raise --timeout if the work needs longer"),
            _ => None,
        };
        if let Some(s) = suggestion {
            answer = answer.suggestion(s);
        }
        Response::failure(answer)
    }

    /// The answer of a call cancelled by `signal` (SIGINT, SIGHUP) while its job is unfinished:
    /// the cancellation envelope (REQ-F-069), whose `data` says where the job stands, as an
    /// INCOMPLETE answer would (`partial: true` beside it). Nothing of the work is lost: a
    /// paused job (stopped at its checkpoint) continues with `continue_command`, a running one
    /// goes on in the background; `cancel_command` ends either. A job that ended meanwhile
    /// answers its end.
    pub(super) fn cancelled(&self, view: &JobView, signal: i32) -> Response {
        let state = match (&view.outcome, view.status) {
            (None, JobStatus::Running) => IncompleteState::Running,
            (None, JobStatus::Paused) => IncompleteState::Paused,
            _ => return self.answer(view),
        };
        let what = match state {
            IncompleteState::Paused => {
                "the work stopped at its checkpoint and is saved: data.continue_command goes on, \
                 data.cancel_command discards it"
            }
            IncompleteState::Running => {
                "this call stopped waiting; the job goes on in the background: \
                 data.continue_command waits for it, data.cancel_command stops it"
            }
        };
        let mut data = self.incomplete(view, state).data.unwrap_or(Value::Null);
        if let Some(map) = data.as_object_mut() {
            map.insert("partial".into(), json!(true));
        }
        Response::failure(Failure::cancelled_by(signal, what).with_data(data))
    }

    fn incomplete(&self, view: &JobView, state: IncompleteState) -> Failure {
        let record = &view.record;
        let spec = self.host.registry.get(&record.command_path);
        let retryable = spec.and_then(|s| s.entry(Exit::INCOMPLETE)).is_none_or(|e| e.retryable);
        let writes = spec.is_some_and(|s| s.danger_level.writes());
        let data = match state {
            IncompleteState::Running => {
                incomplete::running(&self.tool, &record.job_id, view.progress.clone())
            }
            IncompleteState::Paused => incomplete::paused(
                &record.argv_os(),
                &self.tool,
                &record.job_id,
                view.progress.clone(),
                record.idempotency_key.as_deref().filter(|_| writes),
            ),
        };
        let data = serde_json::to_value(&data).unwrap_or(Value::Null);
        Failure::new(
            Exit::INCOMPLETE,
            "INCOMPLETE",
            incomplete::message(state, self.budget_ms, &view.progress),
        )
        .retryable(retryable)
        .with_data(data)
    }
}

/// Waits on a job until `deadline` (or SIGTERM) and answers from it.
pub(super) fn wait_and_answer(
    jobs: &mut Jobs,
    answering: &Answering<'_>,
    instance: &str,
    id: &JobId,
    deadline: Option<Instant>,
) -> Result<Response, Failure> {
    let sigterm = std::sync::Arc::clone(answering.host.sigterm);
    let store = jobs.store.clone();
    let view = if std::io::stderr().is_terminal() {
        wait_with_bar(&store, jobs.conn(), instance, id, deadline, &sigterm)?
    } else {
        match wake::wait_for_job_interruptible(
            &store,
            jobs.conn(),
            instance,
            id,
            deadline,
            &sigterm,
        )
        .map_err(job_failure)?
        {
            WaitOutcome::Ended(view) | WaitOutcome::Pending(view) => view,
        }
    };
    if let Some(signal) = answering.host.cancelled_by() {
        return Ok(answering.cancelled(&view, signal));
    }
    if sigterm.load(std::sync::atomic::Ordering::SeqCst) {
        // Handed off on SIGTERM, not at the budget: the message must not claim otherwise.
        let handed_off =
            Answering { host: answering.host, tool: answering.tool.clone(), budget_ms: None };
        return Ok(handed_off.answer(&view));
    }
    Ok(answering.answer(&view))
}

/// How often a person's progress bar follows a job it waits on.
const BAR_REFRESH: Duration = Duration::from_millis(200);

/// [`wake::wait_for_job_interruptible`] in short slices, drawing the job's progress on stderr
/// (a terminal) between them: a person waiting on a detached job sees it advance.
fn wait_with_bar(
    store: &JobStore,
    conn: &Connection,
    instance: &str,
    id: &JobId,
    deadline: Option<Instant>,
    sigterm: &std::sync::atomic::AtomicBool,
) -> Result<JobView, Failure> {
    let bar =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{spinner} {pos}/{len} {msg} {elapsed}")
    {
        bar.set_style(style);
    }
    loop {
        let slice = Instant::now() + BAR_REFRESH;
        let until = deadline.map_or(slice, |d| d.min(slice));
        let outcome =
            wake::wait_for_job_interruptible(store, conn, instance, id, Some(until), sigterm)
                .map_err(job_failure)?;
        let view = match outcome {
            WaitOutcome::Ended(view) => {
                bar.finish_and_clear();
                return Ok(view);
            }
            WaitOutcome::Pending(view) => view,
        };
        if let Some(total) = view.progress.total {
            bar.set_length(total);
        }
        bar.set_position(view.progress.done);
        if let Some(unit) = &view.progress.unit {
            bar.set_message(unit.clone());
        }
        let out_of_time = deadline.is_some_and(|d| Instant::now() >= d);
        let interrupted = sigterm.load(std::sync::atomic::Ordering::SeqCst);
        if out_of_time || interrupted || view.status == JobStatus::Paused {
            bar.abandon();
            return Ok(view);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_envelope_answers_again_as_it_was() {
        let mut failure = Failure::new(Exit::PRECONDITION, "INPUT_NOT_TEXT", "not text")
            .detail("byte 3")
            .suggestion("fix it")
            .context(json!({"line": 3}))
            .retryable(false)
            .phase(Phase::Validation);
        failure.retry_after_ms = Some(5);
        let mut original = Response::failure(failure);
        original.warnings.push(Warning { code: "W".into(), message: "w".into() });
        let envelope = original.to_json();
        let again = response_from_envelope(&envelope, 4);
        assert_eq!(again.to_json(), envelope);

        let ok = Response::success(json!({"rows": 3}));
        assert_eq!(response_from_envelope(&ok.to_json(), 0).to_json(), ok.to_json());
    }
}
