//! The job store and state database of one call, and the store's errors as the answers the
//! contract gives them (JOB_NOT_FOUND 5, JOB_ENDED 4, INVALID_JOB_ID 2, STATE_BUSY 12,
//! JOB_STATE_UNREADABLE 1 naming the file).

use rusqlite::Connection;
use serde_json::json;

use super::host::Host;
use crate::framework::exit::Exit;
use crate::framework::failure::Failure;
use crate::framework::state::{StateConfig, StateDb};
use crate::runtime::fsutil::is_out_of_descriptors;
use crate::runtime::jobs::{self, JobError, JobStore};

/// The job store and the state DB of one call.
pub(super) struct Jobs {
    pub(super) store: JobStore,
    db: StateDb,
}

impl Jobs {
    pub(super) fn open(host: &Host<'_>, state: &StateConfig) -> Result<Jobs, Failure> {
        let db = StateDb::open(state, host.migrations)?;
        let dir = state.ensure_dir()?;
        Ok(Jobs { store: host.parts.job_store(dir), db })
    }

    /// The state database, its waits bounded from now on (see [`StateDb::conn`]).
    pub(super) fn conn(&mut self) -> &Connection {
        self.db.conn()
    }

    /// The state database as it is armed, for a borrow that lasts the whole work; call
    /// [`Jobs::rearm`] before a write made late with it.
    pub(super) fn held(&self) -> &Connection {
        self.db.connection()
    }

    /// Bounds the next waits of the state database by the call's deadline as of now.
    pub(super) fn rearm(&self) {
        self.db.rearm();
    }
}

/// A job-store error as the answer the contract asks for.
pub(super) fn job_failure(error: JobError) -> Failure {
    match error {
        JobError::NotFound(id) => {
            Failure::new(Exit::NOT_FOUND, "JOB_NOT_FOUND", format!("no job {id} in this instance"))
                .retryable(false)
                .suggestion("check the id and --instance-id; finished jobs are kept for 24 hours")
        }
        JobError::JobEnded { id, status } => Failure::new(
            Exit::PRECONDITION,
            "JOB_ENDED",
            format!("job {id} already ended ({}); nothing was changed", status.as_str()),
        )
        .retryable(false)
        .context(json!({"job_id": id.as_str(), "status": status.as_str()})),
        JobError::Id(e) => Failure::arg("INVALID_JOB_ID", e.to_string())
            .suggestion("use the job_id of an INCOMPLETE response or a job descriptor"),
        JobError::Db(e) => {
            let busy = matches!(
                e.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
            );
            if busy {
                Failure::new(
                    Exit::UNAVAILABLE,
                    "STATE_BUSY",
                    format!("the job table stayed locked: {e}"),
                )
                .retryable(true)
                .retry_after_ms(1000)
            } else {
                Failure::internal(format!("the job table failed: {e}"))
            }
        }
        JobError::Unreadable { id, path, reason } => Failure::new(
            Exit::GENERAL_ERROR,
            jobs::JOB_STATE_UNREADABLE,
            format!("job {id}'s state file {} is unreadable: {reason}", path.display()),
        )
        .retryable(false)
        .context(json!({"job_id": id.as_str(), "file": path.display().to_string()}))
        .suggestion(format!(
            "end it with `job cancel {id}`, or run the identical invocation: it replaces the job \
             and continues from the last checkpoint"
        )),
        JobError::Io(e) if is_out_of_descriptors(&e) => {
            Failure::too_many_open_files("failed to use the job's files", e)
        }
        other => Failure::internal(other.to_string()),
    }
}

/// An I/O error of the runtime as an internal error, saying what failed (the descriptor
/// limit is told apart).
pub(super) fn io_failure(what: &str, error: &std::io::Error) -> Failure {
    if is_out_of_descriptors(error) {
        return Failure::too_many_open_files(what, error);
    }
    Failure::internal(format!("{what}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::ids::JobId;
    use crate::runtime::jobs::JobStatus;

    #[test]
    fn job_store_errors_become_the_contracts_answers() {
        let id = JobId::generate().unwrap();
        let cases = [
            (job_failure(JobError::NotFound(id.to_string())), Exit::NOT_FOUND, "JOB_NOT_FOUND"),
            (
                job_failure(JobError::JobEnded { id: id.clone(), status: JobStatus::Succeeded }),
                Exit::PRECONDITION,
                "JOB_ENDED",
            ),
            (
                job_failure(JobError::Id(JobId::parse("../x").unwrap_err())),
                Exit::ARG_ERROR,
                "INVALID_JOB_ID",
            ),
        ];
        for (failure, exit, code) in cases {
            assert_eq!((failure.exit, failure.code.as_str()), (exit, code));
        }
    }
}
