//! The detached worker: `reftool __worker <job dir>` (recognized before clap; `main`
//! detaches it first) re-parses the job's argv, runs the same job work as the front of a
//! resume command, and records the final envelope as the job's outcome, which rings every
//! waiter's doorbell (a FIFO per waiter).

use std::ffi::OsString;
use std::panic::AssertUnwindSafe;
use std::path::Path;

use rusqlite::Connection;

use super::host::Host;
use crate::framework::cli;
use crate::framework::context::Ctx;
use crate::framework::envelope::Response;
use crate::framework::exit::Exit;
use crate::framework::failure::Failure;
use crate::framework::prepare::{Prepared, prepare_argv};
use crate::framework::respond::{IdempotencyRecord, args_digest, fill_retryable, respond};
use crate::framework::state::{StateConfig, StateDb, StateError};
use crate::framework::stop::StopToken;
use crate::runtime::context::JobContext;
use crate::runtime::fsutil::read_json;
use crate::runtime::jobs::{JOB_FILE, JobRecord};
use crate::runtime::stop::StopControl;
use crate::runtime::worker::{self, WorkEnd};

/// `reftool __worker <job dir>`: runs a job's work and records its outcome; the exit status.
pub(crate) fn run_worker(host: &Host<'_>, argv: &[OsString]) -> u8 {
    let Some(dir) = worker::worker_job_dir(argv) else {
        return Exit::ARG_ERROR.code();
    };
    match worker_inner(host, &dir) {
        Ok(code) => code,
        Err(message) => {
            use std::io::Write;
            let _ = writeln!(std::io::stderr().lock(), "reftool worker: {message}");
            Exit::GENERAL_ERROR.code()
        }
    }
}

fn worker_inner(host: &Host<'_>, dir: &Path) -> Result<u8, String> {
    let record: JobRecord = read_json(&dir.join(JOB_FILE))
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("{} is not a job directory", dir.display()))?;
    let state = StateConfig::from_env(record.instance.clone()).map_err(|f| f.message)?;
    // A worker has no caller to answer on time: it waits out a locked state database (up to
    // its job's lifetime) rather than die and lose the job.
    let deadline = StopControl::instant_from_epoch_ms(record.deadline_at_ms);
    let mut db = loop {
        match StateDb::open(&state, host.migrations) {
            Err(StateError::Busy { .. }) if std::time::Instant::now() < deadline => {
                std::thread::sleep(worker::BUSY_RETRY_PAUSE);
            }
            opened => break opened.map_err(|e| e.to_string())?,
        }
    };
    let store = host.parts.job_store(state.ensure_dir().map_err(|e| e.to_string())?);
    let sigterm = std::sync::Arc::clone(host.sigterm);
    {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr().lock(),
            "reftool worker {}: job {} ({}) started",
            std::process::id(),
            record.job_id,
            record.command_path
        );
    }
    let conn: &Connection = db.conn();
    worker::worker_main(&store, conn, dir, Some(sigterm), |job| worker_work(host, job))
        .map_err(|e| e.to_string())
}

/// The job's work in the worker: the same function the front of a resume command runs.
fn worker_work(host: &Host<'_>, job: &mut JobContext<'_>) -> WorkEnd {
    let argv = job.job().record.argv_os();
    let finished = |response: Response| WorkEnd::Finished {
        exit_code: response.exit.code(),
        response: response.to_json(),
    };
    let command = cli::build(host.registry, host.name, host.version, host.about);
    let prepared = match prepare_argv(host.registry, command, argv) {
        Ok(prepared) => prepared,
        Err(failure) => return finished(Response::failure(*failure)),
    };
    let (spec, prepared) = prepared;
    let Some(work) = spec.job_run.clone() else {
        return finished(Response::failure(Failure::internal("the job's command has no job work")));
    };
    let Prepared { args, invocation, state, .. } = prepared;
    let test_mode = invocation.test_mode;
    let key = invocation.idempotency_key.clone();
    let digest = args_digest(&spec.path, &args);
    let instance = state.instance.clone();
    let mut ctx = Ctx::new(args, invocation, state.clone(), StopToken::new());
    ctx.set_state_migrations(host.migrations.to_vec());
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| work(&mut ctx, job)))
        .unwrap_or_else(|_| Err(Failure::internal("internal error: the command panicked")));
    if let Err(failure) = &result
        && let Some(reason) = failure.job_stop
    {
        return WorkEnd::Stopped(reason);
    }
    let mut idempotency = match (&key, spec.danger_level.writes()) {
        (Some(_), true) => StateDb::open(&state, host.migrations).ok(),
        _ => None,
    };
    let record = idempotency.as_mut().zip(key.as_deref()).map(|(db, key)| IdempotencyRecord {
        db,
        instance: &instance,
        key,
        digest: &digest,
    });
    let mut response =
        respond(spec, result, ctx.take_warnings(), ctx.take_meta(), test_mode, record);
    fill_retryable(spec, &mut response);
    finished(response)
}
