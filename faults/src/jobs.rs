//! Faults around an invocation that act on reftool's job store and state directory, through
//! reftool's own library: before the reference work runs ([`before`]) or after it answered
//! ([`after`]). What a fault keeps between calls (a delivered result, a hand-off's progress, a
//! stale cancel) lives in `<state dir>/faults/`.

use std::path::PathBuf;
use std::time::Duration;

use reftool::framework::Response;
use reftool::framework::exit::Exit;
use reftool::framework::state::StateDb;
use reftool::framework::userdb;
use reftool::runtime::fsutil::read_json;
use reftool::runtime::ids::{JobId, instance_dir_name};
use reftool::runtime::jobs::{JobOutcome, JobStatus, JobStore, JobView, RESULT_FILE};
use reftool::runtime::process::ProcessIdentity;
use reftool::runtime::worker::{WORKER_ARG, worker_job_dir};
use rusqlite::{Connection, OptionalExtension, params};

use crate::Fault;
use crate::invocation::Call;

/// The job store and state database of a call's instance.
pub struct Jobs {
    /// The store, with the application's parts.
    pub store: JobStore,
    db: StateDb,
    /// The call's instance.
    pub instance: String,
    state_dir: PathBuf,
}

impl Jobs {
    /// The call's job store, when its state directory is usable.
    pub fn open(call: &Call<'_>) -> Option<Jobs> {
        let state = call.state()?;
        let db = StateDb::open(&state, call.app.state_migrations()).ok()?;
        let state_dir = state.ensure_dir().ok()?;
        Some(Jobs {
            store: call.app.parts().job_store(&state_dir),
            db,
            instance: state.instance.clone(),
            state_dir,
        })
    }

    /// The state database.
    pub fn conn(&mut self) -> &Connection {
        self.db.conn()
    }

    /// Job `id` of the call's instance as it stands, without settling it.
    pub fn peek(&mut self, id: &JobId) -> Option<JobView> {
        let store = self.store.clone();
        let instance = self.instance.clone();
        store.peek(self.conn(), &instance, id).ok()
    }

    /// `<state dir>/faults/<kind>`, created.
    pub fn faults_dir(&self, kind: &str) -> PathBuf {
        let dir = self.state_dir.join("faults").join(kind);
        let _ = std::fs::create_dir_all(&dir);
        dir
    }

    /// The active job of `identity` in `instance`, if any.
    fn active_job(&mut self, instance: &str, identity: &str) -> Option<JobId> {
        let id: String = self
            .conn()
            .query_row(
                "SELECT job_id FROM reftool_jobs WHERE instance = ?1 AND identity = ?2
                   AND status IN ('running', 'paused')",
                [instance, identity],
                |r| r.get(0),
            )
            .optional()
            .ok()??;
        JobId::parse(&id).ok()
    }
}

/// The job a `job` built-in's call names, as it stands.
pub fn named_job(call: &Call<'_>) -> Option<JobView> {
    let id = call.job_id()?;
    Jobs::open(call)?.peek(&id)
}

/// The job whose id an answer carries (`data.job_id`), as it stands.
pub fn answered_job(call: &Call<'_>, response: &Response) -> Option<JobView> {
    let id = JobId::parse(response.data.get("job_id")?.as_str()?).ok()?;
    Jobs::open(call)?.peek(&id)
}

/// What [`before`] keeps for [`after`].
#[derive(Debug, Default)]
pub struct Kept {
    /// A checkpoint file and its bytes.
    checkpoint: Option<(PathBuf, Vec<u8>)>,
}

/// `fault`'s action before the reference work runs.
pub fn before(fault: Fault, call: &Call<'_>) -> Kept {
    let mut kept = Kept::default();
    match fault {
        // The stored answer is gone, so the repeat does the work again.
        Fault::IdempotencyKeyIgnored => forget_idempotent_answer(call),
        // The job built-in takes the job over: its owner is alive, since it is this process.
        Fault::DeadWorkerLooksAlive if call.is("job.wait") || call.is("job.status") => {
            own_a_dead_workers_job(call);
        }
        Fault::CancelKeepsCheckpoint if call.is("job.cancel") => {
            kept.checkpoint = checkpoint_of_the_named_job(call);
        }
        Fault::StaleCancelMarker if call.interruptible() => cancel_marked_jobs(call),
        Fault::WatchdogOff => {
            if let Some(dir) = worker_job_dir(&call.argv).filter(|_| is_worker(call)) {
                crate::parts::keep_progress_fresh(dir);
            }
        }
        _ => {}
    }
    kept
}

/// `fault`'s action after the reference work answered `response`.
pub fn after(fault: Fault, call: &Call<'_>, response: Option<&Response>, kept: Kept) {
    if fault == Fault::CancelledWorkerLingers && is_worker(call) {
        linger_after_a_cancel(call);
        return;
    }
    let Some(response) = response else { return };
    match fault {
        Fault::ResultDeliveredOnce if call.is("job.wait") && response.exit != Exit::INCOMPLETE => {
            if let (Some(id), Some(jobs)) = (call.job_id(), Jobs::open(call)) {
                let _ = std::fs::write(jobs.faults_dir("delivered").join(id.as_str()), b"");
            }
        }
        Fault::StaleProgressOnWait
            if call.interruptible()
                && response.data.get("state").is_some_and(|s| s == "running") =>
        {
            record_hand_off_progress(call, response);
        }
        Fault::CancelKeepsCheckpoint => {
            if let Some((path, bytes)) = kept.checkpoint
                && !path.exists()
            {
                let _ = std::fs::write(path, bytes);
            }
        }
        Fault::StaleCancelMarker | Fault::RejectedCancelStillFires
            if call.is("job.cancel") && ended_job_refused(response) =>
        {
            after_a_refused_cancel(fault, call);
        }
        Fault::DryRunActs if call.is("drop-table") && response.exit == Exit::SUCCESS => {
            drop_the_previewed_table(call);
        }
        _ => {}
    }
}

/// The checkpoint file of the job a `job` built-in names, and its bytes.
fn checkpoint_of_the_named_job(call: &Call<'_>) -> Option<(PathBuf, Vec<u8>)> {
    let mut jobs = Jobs::open(call)?;
    let view = jobs.peek(&call.job_id()?)?;
    let path = jobs.store.checkpoint_path(&view.record.instance, &view.record.identity);
    std::fs::read(&path).ok().map(|bytes| (path, bytes))
}

/// Whether this process is a detached job's worker.
fn is_worker(call: &Call<'_>) -> bool {
    call.argv.get(1).is_some_and(|a| a == WORKER_ARG)
}

/// Whether `job cancel` refused because the job had ended.
fn ended_job_refused(response: &Response) -> bool {
    response.error.as_ref().is_some_and(|e| e.code == "JOB_ENDED")
}

/// [`Fault::IdempotencyKeyIgnored`]: deletes the answer stored under the call's key.
fn forget_idempotent_answer(call: &Call<'_>) {
    let Ok(parsed) = &call.parsed else { return };
    let Some(key) = &parsed.idempotency_key else { return };
    let Some(mut jobs) = Jobs::open(call) else { return };
    let instance = jobs.instance.clone();
    let _ = jobs.conn().execute(
        "DELETE FROM idempotency WHERE instance = ?1 AND command = ?2 AND key = ?3",
        params![instance, parsed.path, key],
    );
}

/// [`Fault::DeadWorkerLooksAlive`]: a running job whose owner is gone gets this process as
/// its owner, so this call sees it alive.
fn own_a_dead_workers_job(call: &Call<'_>) {
    let (Some(id), Some(mut jobs)) = (call.job_id(), Jobs::open(call)) else { return };
    let Some(view) = jobs.peek(&id) else { return };
    let dead = view.owner.is_none_or(|o| !o.is_alive());
    if view.status == JobStatus::Running
        && dead
        && let Ok(me) = ProcessIdentity::current()
    {
        let store = jobs.store.clone();
        let instance = jobs.instance.clone();
        let _ = store.set_owner(jobs.conn(), &instance, &id, me);
    }
}

/// [`Fault::StaleProgressOnWait`]: the progress of a detached job's hand-off, kept for every
/// later `job wait` of it.
fn record_hand_off_progress(call: &Call<'_>, response: &Response) {
    let (Some(id), Some(progress)) =
        (response.data.get("job_id").and_then(|v| v.as_str()), response.data.get("progress"))
    else {
        return;
    };
    let Some(jobs) = Jobs::open(call) else { return };
    let marker = jobs.faults_dir("hand-off").join(id);
    if !marker.exists() {
        let _ = std::fs::write(marker, progress.to_string());
    }
}

/// The progress of job `id`'s hand-off, kept by [`after`].
pub fn hand_off_progress(call: &Call<'_>, id: &str) -> Option<serde_json::Value> {
    let jobs = Jobs::open(call)?;
    let bytes = std::fs::read(jobs.faults_dir("hand-off").join(id)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// [`Fault::JobWaitFreezesAfterThreeSeconds`]: the progress a `job wait` of a running job
/// answers instead of `current`, once the job has run [`crate::parts::FREEZE_AFTER_MS`]: the
/// progress the first wait after that moment answered, kept in a marker (`None`: answer
/// `current`).
pub fn frozen_wait_progress(
    call: &Call<'_>,
    current: &serde_json::Value,
) -> Option<serde_json::Value> {
    let job = named_job(call)?;
    let jobs = Jobs::open(call)?;
    let marker = jobs.faults_dir("frozen-wait").join(job.record.job_id.as_str());
    if let Ok(bytes) = std::fs::read(&marker) {
        return serde_json::from_slice(&bytes).ok();
    }
    let age = reftool::runtime::fsutil::now_ms().saturating_sub(job.record.created_at_ms);
    if age >= crate::parts::FREEZE_AFTER_MS {
        let _ = std::fs::write(marker, current.to_string());
    }
    None
}

/// Whether `job wait` has delivered job `id`'s result before ([`Fault::ResultDeliveredOnce`]).
pub fn delivered(call: &Call<'_>, id: &JobId) -> bool {
    Jobs::open(call).is_some_and(|jobs| jobs.faults_dir("delivered").join(id.as_str()).exists())
}

/// [`Fault::StaleCancelMarker`] leaves a marker that cancels the next job of the ended job's
/// identity; [`Fault::RejectedCancelStillFires`] cancels the active job of that identity now.
fn after_a_refused_cancel(fault: Fault, call: &Call<'_>) {
    let (Some(id), Some(mut jobs)) = (call.job_id(), Jobs::open(call)) else { return };
    let Some(view) = jobs.peek(&id) else { return };
    let (instance, identity) = (view.record.instance.clone(), view.record.identity.0.clone());
    if fault == Fault::StaleCancelMarker {
        let marker = jobs.faults_dir("stale-cancel").join(stale_marker_name(&instance, &identity));
        let _ = std::fs::write(marker, format!("{instance}\n{identity}"));
        return;
    }
    if let Some(other) = jobs.active_job(&instance, &identity) {
        let store = jobs.store.clone();
        let _ = store.request_cancel(jobs.conn(), &instance, &other);
    }
}

fn stale_marker_name(instance: &str, identity: &str) -> String {
    format!("{}-{identity}", instance_dir_name(instance))
}

/// [`Fault::StaleCancelMarker`]: a front process cancels the job a marker names as soon as it
/// exists (the job this call creates, when it is of the marked identity), taking the marker.
fn cancel_marked_jobs(call: &Call<'_>) {
    let Some(mut jobs) = Jobs::open(call) else { return };
    let dir = jobs.faults_dir("stale-cancel");
    if std::fs::read_dir(&dir).map_or(true, |mut d| d.next().is_none()) {
        return;
    }
    std::thread::spawn(move || {
        loop {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let Ok(text) = std::fs::read_to_string(entry.path()) else { continue };
                let Some((instance, identity)) = text.split_once('\n') else { continue };
                let Some(id) = jobs.active_job(instance, identity) else { continue };
                if std::fs::remove_file(entry.path()).is_ok() {
                    let store = jobs.store.clone();
                    let _ = store.request_cancel(jobs.conn(), instance, &id);
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
}

/// [`Fault::DryRunActs`]: the table a dry run previewed is dropped after the preview.
fn drop_the_previewed_table(call: &Call<'_>) {
    let Ok(parsed) = &call.parsed else { return };
    if !parsed.args.switch("dry-run") {
        return;
    }
    let (Some(db), Some(table)) = (parsed.args.text("db"), parsed.args.text("table")) else {
        return;
    };
    let Ok(path) = userdb::db_path(db) else { return };
    if let Ok(conn) = Connection::open(path) {
        let _ = conn.execute(&format!("DROP TABLE IF EXISTS \"{table}\""), []);
    }
}

/// [`Fault::CancelledWorkerLingers`]: a worker whose job ended cancelled stays alive, idle,
/// for ten minutes (a conform run's sweep ends it).
fn linger_after_a_cancel(call: &Call<'_>) {
    let Some(dir) = worker_job_dir(&call.argv) else { return };
    let ended: Option<JobOutcome> = read_json(&dir.join(RESULT_FILE)).ok().flatten();
    if ended.is_some_and(|o| o.status == JobStatus::Cancelled) {
        std::thread::sleep(Duration::from_secs(600));
    }
}
