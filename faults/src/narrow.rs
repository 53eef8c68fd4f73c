//! The narrow-window faults ([`Fault::is_narrow_window`]): crash-consistency bugs whose window
//! is a few milliseconds, so one interruption at one moment catches them only sometimes.
//!
//! Each makes two steps of what reftool does in one (one transaction, one atomic write, one
//! locked lookup-and-create) and leaves [`WINDOW`] between them. The gap stands for what
//! separates the two steps in a tool that has this bug: the first step's fsync, the second's
//! own writes. It is widened to a realistic disk's 15 ms, no more, so that a kill drawn at
//! random over the work lands in it in a fraction of cases (the work's units take 100 ms in
//! the profiles: about one kill in seven).

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use reftool::framework::state::{StateConfig, StateDb};
use reftool::runtime::checkpoint::{CheckpointCommit, CheckpointError, SavedCheckpoint};
use reftool::runtime::fsutil::{read_json, write_json_atomic};
use reftool::runtime::identity::{IdentityKey, InvocationIdentity, JobNaming};
use reftool::runtime::ids::{JobId, JobIdError};
use rusqlite::{Connection, OptionalExtension, Transaction, params};
use serde::{Deserialize, Serialize};

use crate::Fault;

/// The gap between the two steps of a narrow-window fault: one fsync of a slow disk.
pub const WINDOW: Duration = Duration::from_millis(15);

/// The checkpoint commit of [`Fault::TwoTransactionCommit`], [`Fault::CheckpointFirst`] and
/// [`Fault::StaleCheckpointTotals`]; reftool's ([`reftool::runtime::checkpoint::OneStep`])
/// for what the fault leaves alone.
#[derive(Debug)]
pub struct SplitCommit {
    /// The fault.
    pub fault: Fault,
}

impl CheckpointCommit for SplitCommit {
    fn write_file(&self, path: &Path, saved: &SavedCheckpoint) -> io::Result<()> {
        if self.fault == Fault::StaleCheckpointTotals
            && let Some(first) = new_offset_old_totals(path, saved)
        {
            write_json_atomic(path, &first)?;
            std::thread::sleep(WINDOW);
        }
        write_json_atomic(path, saved)
    }

    fn commit_units(
        &self,
        tx: Transaction<'_>,
        identity: &IdentityKey,
        saved: &SavedCheckpoint,
        save: &dyn Fn(&Connection) -> Result<(), CheckpointError>,
    ) -> Result<(), CheckpointError> {
        match self.fault {
            Fault::TwoTransactionCommit => {
                // The rows alone, then the checkpoint in a transaction of its own.
                tx.execute_batch("COMMIT")?;
                std::thread::sleep(WINDOW);
                tx.execute_batch("BEGIN IMMEDIATE")?;
                save(&tx)?;
                tx.commit()?;
            }
            Fault::CheckpointFirst => {
                // The checkpoint first, durable in a file of its own, then the rows with it.
                let ahead = tx.path().map(|db| ahead_path(Path::new(db)));
                if let Some(ahead) = &ahead {
                    let file = Ahead { identity: identity.clone(), saved: saved.clone() };
                    write_json_atomic(ahead, &file)?;
                    std::thread::sleep(WINDOW);
                }
                save(&tx)?;
                tx.commit()?;
                if let Some(ahead) = &ahead {
                    let _ = std::fs::remove_file(ahead);
                }
            }
            _ => {
                save(&tx)?;
                tx.commit()?;
            }
        }
        Ok(())
    }
}

/// [`Fault::StaleCheckpointTotals`]'s first write: `saved` with the state of the checkpoint
/// at `path` but its offset, when there is one of the same input.
fn new_offset_old_totals(path: &Path, saved: &SavedCheckpoint) -> Option<SavedCheckpoint> {
    let before: SavedCheckpoint = read_json(path).ok()??;
    if before.fingerprint != saved.fingerprint {
        return None;
    }
    let offset = saved.state.get("offset")?.clone();
    let mut state = before.state;
    *state.as_object_mut()?.get_mut("offset")? = offset;
    Some(SavedCheckpoint { state, ..saved.clone() })
}

/// [`Fault::CheckpointFirst`]'s checkpoint file, beside the target database.
#[derive(Debug, Serialize, Deserialize)]
pub struct Ahead {
    /// The writer's identity.
    pub identity: IdentityKey,
    /// The checkpoint, as it will be in the target database.
    pub saved: SavedCheckpoint,
}

/// Where [`Fault::CheckpointFirst`] writes the checkpoint of the database `db` first.
pub fn ahead_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".checkpoint-first.json");
    db.with_file_name(name)
}

/// [`Fault::IdentityCheckThenCreate`]'s naming: reftool's keys, looked up first outside the
/// store's transaction.
#[derive(Debug)]
pub struct UnlockedLookup;

impl JobNaming for UnlockedLookup {
    fn key(&self, identity: &InvocationIdentity) -> IdentityKey {
        let key = identity.key();
        let Some(db) = state_db(&identity.instance) else { return key };
        let conn = db.connection();
        let instance = identity.instance.as_str();
        if active(conn, instance, &key) {
            // Found: the store attaches (or resumes) as reftool does.
            return key;
        }
        // Not found: the job is created, after the creation's own writes.
        std::thread::sleep(WINDOW);
        if active(conn, instance, &key) {
            // Another invocation created it meanwhile. Without a lock this one creates a
            // second job all the same; reftool's unique index would refuse two active jobs of
            // one key, so the second gets a key of its own.
            let mut second = identity.clone();
            second.tool_version = format!("{}+{}", second.tool_version, std::process::id());
            return second.key();
        }
        key
    }

    fn new_id(&self) -> Result<JobId, JobIdError> {
        JobId::generate()
    }
}

/// The state database of `instance`, as the environment locates it.
fn state_db(instance: &str) -> Option<StateDb> {
    let config = StateConfig::from_env(instance.to_owned()).ok()?;
    StateDb::open(&config, &[]).ok()
}

/// Whether `instance` has a running or paused job of `key`, read without a transaction.
fn active(conn: &Connection, instance: &str, key: &IdentityKey) -> bool {
    conn.query_row(
        "SELECT 1 FROM reftool_jobs WHERE instance = ?1 AND identity = ?2
           AND status IN ('running', 'paused')",
        params![instance, key.as_str()],
        |_| Ok(()),
    )
    .optional()
    .ok()
    .flatten()
    .is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn saved(state: serde_json::Value, fingerprint: &str) -> SavedCheckpoint {
        SavedCheckpoint {
            fingerprint: fingerprint.to_owned(),
            job_id: "job_1".to_owned(),
            done: 10,
            state,
            saved_at_ms: 1,
        }
    }

    #[test]
    fn the_first_write_has_the_new_offset_and_the_old_totals() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoint.json");
        let new = saved(serde_json::json!({"offset": 200, "rows": 20}), "f");
        assert_eq!(new_offset_old_totals(&path, &new), None, "no checkpoint before: one write");
        write_json_atomic(&path, &saved(serde_json::json!({"offset": 100, "rows": 10}), "f"))
            .unwrap();
        let first = new_offset_old_totals(&path, &new).unwrap();
        assert_eq!(first.state, serde_json::json!({"offset": 200, "rows": 10}));
        let other_input = saved(serde_json::json!({"offset": 200, "rows": 20}), "g");
        assert_eq!(new_offset_old_totals(&path, &other_input), None, "another input's");
    }

    #[test]
    fn the_checkpoint_first_file_sits_beside_the_database() {
        assert_eq!(
            ahead_path(Path::new("/d/rows.db")),
            Path::new("/d/rows.db.checkpoint-first.json")
        );
    }
}
