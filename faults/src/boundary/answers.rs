//! Faults in the answer: the response's envelope (exit code, `error`, `data`, `meta`) changed
//! after reftool made it, before it is rendered; help sent to stdout.

use reftool::duration::{millis, parse_duration};
use reftool::framework::budget::{BUDGET_ENV, resolve};
use reftool::framework::exit::Exit;
use reftool::framework::{Answer, Failure, Response};
use reftool::runtime::jobs::{JOB_LOST, JobStatus, JobView, STALLED, TIMEOUT};
use reftool::runtime::quote::quote_argv;
use serde_json::{Value, json};

use crate::Fault;
use crate::invocation::Call;
use crate::jobs::{answered_job, frozen_wait_progress, hand_off_progress, named_job};

/// The answer as `fault` makes it.
pub fn edit(fault: Fault, call: &Call<'_>, answer: &mut Answer) {
    match answer {
        Answer::Help { stdout_is_terminal, .. } if fault == Fault::HelpOnStdout => {
            *stdout_is_terminal = true;
        }
        Answer::Response { response, .. } => {
            edit_response(fault, call, response);
            // As reftool does: a new error's `retryable` is the command's declared entry's.
            if let (Some(error), Some(spec)) = (&mut response.error, call.spec)
                && error.retryable.is_none()
            {
                error.retryable = spec.entry(error.exit).map(|e| e.retryable);
            }
        }
        _ => {}
    }
}

/// The job an answer is about: the one its `data.job_id` names, else the one a `job`
/// built-in names.
fn job_of(call: &Call<'_>, response: &Response) -> Option<JobView> {
    answered_job(call, response).or_else(|| named_job(call))
}

/// Whether the job's command writes.
fn job_writes(call: &Call<'_>, job: &JobView) -> bool {
    call.app.registry().get(&job.record.command_path).is_some_and(|s| s.danger_level.writes())
}

fn edit_response(fault: Fault, call: &Call<'_>, response: &mut Response) {
    let exit = response.exit;
    let incomplete = exit == Exit::INCOMPLETE;
    let state = response.data.get("state").and_then(Value::as_str).map(str::to_owned);
    let code = response.error.as_ref().map(|e| e.code.clone());
    let code = code.as_deref();
    let stamped = call.has_budget();
    match fault {
        Fault::UnknownFlagExits1 if call.refused() => response.exit = Exit::GENERAL_ERROR,
        // The budget's record in `meta.budget_ms`.
        Fault::BudgetMetaOnTerminal
            if stamped && call.interactive && !response.meta.contains_key("budget_ms") =>
        {
            response.meta.insert("budget_ms".into(), json!(0));
        }
        Fault::NoBudgetMetaOnSuccess if stamped && exit == Exit::SUCCESS => {
            response.meta.remove("budget_ms");
        }
        Fault::NoBudgetMetaOnEndings if stamped && exit != Exit::SUCCESS && !incomplete => {
            response.meta.remove("budget_ms");
        }
        // The wait records the budget it was given, and ignored.
        Fault::JobWaitBlocks if call.is("job.wait") => {
            let Ok(parsed) = &call.parsed else { return };
            let flag = parsed.budget.as_deref().and_then(|b| parse_duration(b).ok());
            let env = std::env::var_os(BUDGET_ENV);
            let given = resolve(flag, env.as_deref(), call.interactive);
            response.meta.remove("budget_ms");
            if let Some(ms) = given.meta_budget_ms {
                response.meta.insert("budget_ms".into(), json!(ms));
            }
            response.warnings.extend(given.warning);
        }
        Fault::NoBudgetMetaOnHops if call.is("job.wait") && incomplete => {
            response.meta.remove("budget_ms");
        }
        Fault::PlainCommandsReadBudgetEnv if call.spec.is_some() && !stamped => {
            let env = std::env::var(BUDGET_ENV).ok();
            if let Some(d) = env.and_then(|v| parse_duration(&v).ok()) {
                response.meta.insert("budget_ms".into(), json!(millis(d)));
            }
        }
        // INCOMPLETE's commands and retryable.
        Fault::WriterContinueWithoutKey if incomplete && state.as_deref() == Some("paused") => {
            if let Some(job) = job_of(call, response).filter(|j| job_writes(call, j)) {
                set_text(response, "continue_command", quote_argv(job.record.argv_os()));
            }
        }
        Fault::PausedContinueAddsFlag
            if incomplete
                && state.as_deref() == Some("paused")
                && job_of(call, response).is_some_and(|j| !job_writes(call, &j)) =>
        {
            append(response, "continue_command", " --output json");
        }
        Fault::RunningContinueWithExtraFlag
            if incomplete && state.as_deref() == Some("running") =>
        {
            append(response, "continue_command", " --output json");
        }
        Fault::WriterIncompleteRetryable | Fault::ReaderIncompleteNotRetryable if incomplete => {
            let Some(job) = job_of(call, response) else { return };
            let writes = job_writes(call, &job);
            if let Some(error) = &mut response.error {
                match fault {
                    Fault::WriterIncompleteRetryable if writes => error.retryable = Some(true),
                    Fault::ReaderIncompleteNotRetryable if !writes => error.retryable = Some(false),
                    _ => {}
                }
            }
        }
        Fault::UnquotedCommands => {
            for key in ["continue_command", "cancel_command", "status_command", "wait_command"] {
                if let Some(line) = response.data.get(key).and_then(Value::as_str) {
                    let unquoted = unquote(line).join(" ");
                    set_text(response, key, unquoted);
                }
            }
        }
        // `job wait`.
        Fault::RelayedResultLosesData if call.is("job.wait") && exit == Exit::SUCCESS => {
            response.data = Value::Null;
        }
        Fault::JobWaitStaleProgress if call.is("job.wait") && incomplete => {
            if let Some(done) = response.data.pointer_mut("/progress/done") {
                *done = json!(0);
            }
        }
        Fault::StaleProgressOnWait if call.is("job.wait") && incomplete => {
            let id = response.data.get("job_id").and_then(Value::as_str).map(str::to_owned);
            if let (Some(first), Some(progress)) =
                (id.and_then(|id| hand_off_progress(call, &id)), response.data.get_mut("progress"))
            {
                *progress = first;
            }
        }
        Fault::JobWaitFreezesAfterThreeSeconds if call.is("job.wait") && incomplete => {
            let current = response.data.get("progress").cloned().unwrap_or(Value::Null);
            if let (Some(frozen), Some(progress)) =
                (frozen_wait_progress(call, &current), response.data.get_mut("progress"))
            {
                *progress = frozen;
            }
        }
        // The job's own exit, which the runtime's own endings (1, 10) do not show.
        Fault::FailedJobWaitExits1
            if call.is("job.wait")
                && ![Exit::SUCCESS, Exit::GENERAL_ERROR, Exit::TIMEOUT, Exit::INCOMPLETE]
                    .contains(&exit) =>
        {
            response.exit = Exit::GENERAL_ERROR;
        }
        Fault::LostJobWithoutDetail
            if (call.is("job.wait") || call.is("job.status")) && code == Some(JOB_LOST) =>
        {
            if let Some(error) = &mut response.error {
                error.detail = None;
            }
        }
        // `job status`.
        Fault::LostJobStatusRunning if call.is("job.status") && code == Some(JOB_LOST) => {
            let meta = std::mem::take(&mut response.meta);
            *response = Response::failure(Failure::new(
                Exit::INCOMPLETE,
                "INCOMPLETE",
                "the job is still running",
            ));
            response.meta = meta;
        }
        Fault::FailedJobStatusExits0
            if call.is("job.status")
                && named_job(call).is_some_and(|j| j.status == JobStatus::Failed) =>
        {
            response.exit = Exit::SUCCESS;
        }
        Fault::EndedJobStatusExits3 if call.is("job.status") && exit == Exit::SUCCESS => {
            response.exit = Exit::PARTIAL_FAILURE;
        }
        Fault::AsyncStatusExits3 | Fault::AsyncWaitExits3
            if incomplete
                && call.is(if fault == Fault::AsyncStatusExits3 {
                    "job.status"
                } else {
                    "job.wait"
                })
                && named_job_is_async(call) =>
        {
            response.exit = Exit::PARTIAL_FAILURE;
        }
        Fault::StallReportedAsTimeout if code == Some(STALLED) => {
            if let Some(error) = &mut response.error {
                error.code = TIMEOUT.to_owned();
            }
        }
        // The plain supervised run's endings.
        Fault::PlainTimeoutIsGeneralError
            if !call.interruptible() && exit == Exit::TIMEOUT && code == Some(TIMEOUT) =>
        {
            response.exit = Exit::GENERAL_ERROR;
        }
        Fault::NoTimeoutMeta if call.spec.is_some() && !stamped => {
            response.timeout_ms = None;
            response.meta.remove("timeout_ms");
        }
        Fault::SigintExits1 if exit == Exit::SIGINT && code == Some("CANCELLED") => {
            response.exit = Exit::GENERAL_ERROR;
        }
        Fault::SigintNotPartial if exit == Exit::SIGINT && code == Some("CANCELLED") => {
            response.data = json!({"partial": false});
            if let Some(error) = &mut response.error {
                error.data = Some(response.data.clone());
            }
        }
        Fault::AsyncDescriptorWithoutTerminal
            if call.spec.is_some_and(|s| s.is_async) && exit == Exit::SUCCESS =>
        {
            if let Some(data) = response.data.as_object_mut() {
                data.remove("terminal");
            }
        }
        _ if call.is("manifest") && exit == Exit::SUCCESS => {
            edit_manifest(fault, &mut response.data)
        }
        _ => {}
    }
}

/// Whether the job a `job` built-in names is an async command's.
fn named_job_is_async(call: &Call<'_>) -> bool {
    let job = named_job(call);
    let spec = job.and_then(|j| call.app.registry().get(&j.record.command_path).cloned());
    spec.is_some_and(|s| s.is_async)
}

/// Sets the text `key` of `data`.
fn set_text(response: &mut Response, key: &str, text: String) {
    if let Some(data) = response.data.as_object_mut() {
        data.insert(key.to_owned(), json!(text));
    }
}

/// Appends `tail` to the text `key` of `data`.
fn append(response: &mut Response, key: &str, tail: &str) {
    if let Some(line) = response.data.get(key).and_then(Value::as_str) {
        let longer = format!("{line}{tail}");
        set_text(response, key, longer);
    }
}

/// The words of a POSIX shell line as reftool quotes them (single quotes, backslashes, double
/// quotes), for [`Fault::UnquotedCommands`], which joins them with spaces again.
fn unquote(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => word.extend(chars.next()),
                        _ => word.push(q),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.extend(chars.next());
            }
            ' ' | '\t' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            _ => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// The manifest faults, on the manifest's `data`.
fn edit_manifest(fault: Fault, manifest: &mut Value) {
    fn command<'a>(manifest: &'a mut Value, path: &str) -> Option<&'a mut Value> {
        manifest.get_mut("commands")?.get_mut(path)
    }
    match fault {
        Fault::ManifestNeitherDetachNorResume => {
            if let Some(interruption) =
                command(manifest, "analyze").and_then(|c| c.get_mut("interruption"))
            {
                interruption["detach"] = json!(false);
                interruption["resume"] = json!(false);
            }
        }
        Fault::ManifestNoIncompleteEntry => {
            if let Some(Value::Object(codes)) =
                command(manifest, "analyze").and_then(|c| c.get_mut("exit_codes"))
            {
                codes.remove("14");
            }
        }
        Fault::ManifestInterruptionWithAsync => {
            if let Some(Value::Object(entry)) = command(manifest, "digest") {
                entry.insert("async".into(), json!(true));
            }
        }
        Fault::ManifestWriterWithoutKey => {
            if let Some(Value::Object(flags)) =
                command(manifest, "import").and_then(|c| c.get_mut("flags"))
            {
                flags.remove("idempotency-key");
            }
        }
        Fault::ManifestWriterEntryRetryable => {
            if let Some(entry) = command(manifest, "import")
                .and_then(|c| c.get_mut("exit_codes"))
                .and_then(|codes| codes.get_mut("14"))
            {
                entry["retryable"] = json!(true);
                entry["side_effects"] = json!("none");
            }
        }
        Fault::ManifestWithoutSchemaVersion => {
            if let Value::Object(top) = manifest {
                top.remove("schema_version");
            }
        }
        Fault::ManifestWithout130 => {
            if let Some(Value::Object(commands)) = manifest.get_mut("commands") {
                for entry in commands.values_mut() {
                    if let Some(Value::Object(codes)) = entry.get_mut("exit_codes") {
                        codes.remove("130");
                    }
                }
            }
        }
        // `migrate` lists the `--budget` flag every interruptible command has.
        Fault::BudgetFlagOnPlainCommand => {
            let budget =
                command(manifest, "analyze").and_then(|c| c.pointer("/flags/budget")).cloned();
            if let (Some(budget), Some(Value::Object(flags))) =
                (budget, command(manifest, "migrate").and_then(|c| c.get_mut("flags")))
            {
                flags.insert("budget".into(), budget);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_lines_come_apart_into_their_words() {
        let line = quote_argv(["/tmp/a b/reftool", "job", "wait", "it's", "a\"b", "$x"]);
        assert_eq!(unquote(&line), ["/tmp/a b/reftool", "job", "wait", "it's", "a\"b", "$x"]);
        assert_eq!(unquote("a '' b"), ["a", "", "b"]);
    }
}
