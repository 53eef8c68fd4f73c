//! Checkpoints (REQ-C-035): restore by input fingerprint, save at safe points, stop only there.
//!
//! **Key.** A checkpoint is keyed exactly like a job: the [`IdentityKey`] of the invocation,
//! which includes the instance and the (effective) idempotency key, see
//! [`super::identity`]. So the identical invocation, its continuation, and a plain repeat after
//! a `kill -9` find it; another instance never does.
//!
//! **Two stores.**
//! - [`FileCheckpoints`]: one JSON file per identity under
//!   `<state_dir>/checkpoints/<instance_dir>/<identity>.json`, written atomically. For
//!   readers (`analyze`, `digest`) and any work whose units are not written anywhere.
//! - [`SqliteCheckpoints`]: a row in a `reftool_checkpoints` table inside the WRITER's own
//!   target database, saved on the same [`rusqlite::Transaction`] as the units it records.
//!   One commit covers both, so a `kill -9` at any instant neither loses nor repeats a unit.
//!   (Two databases joined by `ATTACH` do not commit atomically in WAL mode, which is why the
//!   checkpoint cannot live in the state DB.)
//!
//! **Fingerprint.** `restore` compares the saved fingerprint with the current one (see
//! [`file_fingerprint`]); a mismatch discards the checkpoint with a
//! [`CHECKPOINT_DISCARDED`] warning and the work starts over. A state that no longer
//! deserializes is discarded the same way. A writer's fingerprint covers its target too (the
//! state of the table it fills, see [`super::target`]): its checkpoint records units committed
//! there, and holds only while they are.
//!
//! **Safe points.** [`FileCheckpoints::checkpoint`] and [`SqliteCheckpoints::commit_with`]
//! save first, then ask the [`StopControl`]; a stop request (budget, SIGTERM, cancel, lifetime)
//! therefore takes effect only after the state that covers every finished unit is durable.
//! How the state is made durable is the job store's [`CheckpointCommit`] (reftool's
//! [`OneStep`]: one atomic write, one transaction).
//!
//! **Removal.** Remove on completion ([`FileCheckpoints::remove`],
//! [`SqliteCheckpoints::remove`]) and on cancel. A cancel of a paused job removes a file
//! checkpoint itself (the job store knows its path); a target-DB checkpoint written by a job that
//! was later cancelled is void: pass [`super::jobs::JobStore::was_cancelled`] as `is_void` to
//! [`SqliteCheckpoints::restore`], which then discards it.

use std::fmt::Debug;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, Transaction, params};
use serde::{Deserialize, Serialize, de::DeserializeOwned};

use super::fsutil::{now_ms, read_json, write_json_atomic};
use super::identity::IdentityKey;
use super::ids::JobId;
use super::stop::{StopControl, StopReason};
use super::warning::{CHECKPOINT_DISCARDED, RuntimeWarning};

/// SQL creating the checkpoint table in a writer's target database.
pub const CHECKPOINT_TABLE_SQL: &str = "CREATE TABLE IF NOT EXISTS reftool_checkpoints (
    identity    TEXT PRIMARY KEY NOT NULL,
    fingerprint TEXT NOT NULL,
    job_id      TEXT NOT NULL,
    done        INTEGER NOT NULL,
    state       TEXT NOT NULL,
    saved_at_ms INTEGER NOT NULL,
    completed   INTEGER NOT NULL DEFAULT 0
)";

/// What a safe point tells the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Go on.
    Continue,
    /// The state is saved; stop now for this reason.
    Stop(StopReason),
}

/// How a safe point makes its checkpoint durable: a reader's checkpoint file written, a
/// writer's units committed with the checkpoint that records them. The job store holds one
/// (a part of the runtime, [`super::Parts`]); reftool's is [`OneStep`].
pub trait CheckpointCommit: Debug + Send + Sync {
    /// Writes the file checkpoint `saved` to `path`.
    fn write_file(&self, path: &Path, saved: &SavedCheckpoint) -> io::Result<()>;

    /// Commits `tx`, which holds a writer's units, with their checkpoint `saved` of the
    /// writer `identity`, which `save` writes on the connection it is given.
    fn commit_units(
        &self,
        tx: Transaction<'_>,
        identity: &IdentityKey,
        saved: &SavedCheckpoint,
        save: &dyn Fn(&Connection) -> Result<(), CheckpointError>,
    ) -> Result<(), CheckpointError>;
}

/// reftool's [`CheckpointCommit`]: a checkpoint file is one atomic write (temp file, fsync,
/// rename), and a writer's checkpoint is saved on the transaction that holds its units, so one
/// commit makes both durable.
#[derive(Debug, Clone, Copy, Default)]
pub struct OneStep;

impl CheckpointCommit for OneStep {
    fn write_file(&self, path: &Path, saved: &SavedCheckpoint) -> io::Result<()> {
        write_json_atomic(path, saved)
    }

    fn commit_units(
        &self,
        tx: Transaction<'_>,
        _identity: &IdentityKey,
        _saved: &SavedCheckpoint,
        save: &dyn Fn(&Connection) -> Result<(), CheckpointError>,
    ) -> Result<(), CheckpointError> {
        save(&tx)?;
        tx.commit()?;
        Ok(())
    }
}

/// A saved checkpoint (file content / row).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedCheckpoint {
    /// The input fingerprint it belongs to.
    pub fingerprint: String,
    /// The job that saved it.
    pub job_id: String,
    /// `progress.done` at the checkpoint.
    pub done: u64,
    /// The command's state.
    pub state: serde_json::Value,
    /// When it was saved.
    pub saved_at_ms: u64,
}

/// The answer of `restore`.
#[derive(Debug, Clone, PartialEq)]
pub struct Restored<T> {
    /// The state to continue from, `None` = start from the beginning.
    pub state: Option<T>,
    /// `progress.done` at the checkpoint (0 when starting over): the progress floor.
    pub done: u64,
    /// A `CHECKPOINT_DISCARDED` warning when a checkpoint was thrown away.
    pub warnings: Vec<RuntimeWarning>,
    /// [`SqliteCheckpoints`] only: the work already completed (see
    /// [`SqliteCheckpoints::finish_in`]); this is its recorded result. Do not write again.
    pub completed: Option<serde_json::Value>,
}

/// Checkpoint failures.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The file store failed.
    #[error("failed to access the checkpoint: {0}")]
    Io(#[from] io::Error),
    /// The target database failed.
    #[error("failed to access the checkpoint table: {0}")]
    Db(#[from] rusqlite::Error),
    /// The state does not serialize.
    #[error("failed to serialize the checkpoint state: {0}")]
    Encode(#[from] serde_json::Error),
}

/// A fingerprint of an input file: size, modification time (ns) and inode.
pub fn file_fingerprint(path: &Path) -> io::Result<String> {
    let m = std::fs::metadata(path)?;
    Ok(format!("size={};mtime={}.{:09};ino={}", m.len(), m.mtime(), m.mtime_nsec(), m.ino()))
}

fn discarded<T>(job_id: &str, reason: &str) -> Restored<T> {
    Restored {
        state: None,
        done: 0,
        completed: None,
        warnings: vec![RuntimeWarning {
            code: CHECKPOINT_DISCARDED,
            message: format!("{reason}; started over"),
            context: Some(serde_json::json!({ "job_id": job_id })),
        }],
    }
}

fn decide<T: DeserializeOwned>(
    saved: SavedCheckpoint,
    fingerprint: &str,
    changed: &str,
    is_void: impl Fn(&str) -> bool,
) -> (Restored<T>, bool) {
    if is_void(&saved.job_id) {
        // Written by a cancelled job: not a resume point, and not worth a warning.
        return (Restored { state: None, done: 0, warnings: Vec::new(), completed: None }, true);
    }
    if saved.fingerprint != fingerprint {
        return (discarded(&saved.job_id, changed), true);
    }
    match serde_json::from_value::<T>(saved.state) {
        Ok(state) => (
            Restored {
                state: Some(state),
                done: saved.done,
                warnings: Vec::new(),
                completed: None,
            },
            false,
        ),
        Err(_) => (discarded(&saved.job_id, "The checkpoint state is unreadable"), true),
    }
}

/// File checkpoints of one invocation; see the module docs.
#[derive(Debug, Clone)]
pub struct FileCheckpoints {
    path: PathBuf,
    fingerprint: String,
    job_id: JobId,
    commit: Arc<dyn CheckpointCommit>,
}

impl FileCheckpoints {
    /// Checkpoints at `path` (use [`super::jobs::JobStore::checkpoint_path`]) for the input
    /// `fingerprint`, saved by job `job_id`.
    pub fn new(path: PathBuf, fingerprint: impl Into<String>, job_id: JobId) -> Self {
        FileCheckpoints { path, fingerprint: fingerprint.into(), job_id, commit: Arc::new(OneStep) }
    }

    /// These checkpoints, written by `commit` (reftool's is [`OneStep`]).
    pub fn committed_by(mut self, commit: Arc<dyn CheckpointCommit>) -> Self {
        self.commit = commit;
        self
    }

    /// The last state for this fingerprint, or a fresh start (with a warning when a mismatching
    /// or unreadable checkpoint was discarded).
    pub fn restore<T: DeserializeOwned>(&self) -> Result<Restored<T>, CheckpointError> {
        let saved: Option<SavedCheckpoint> = match read_json(&self.path) {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                self.remove()?;
                let reason =
                    format!("The checkpoint file {} is unreadable ({e})", self.path.display());
                return Ok(discarded(self.job_id.as_str(), &reason));
            }
            Err(e) => return Err(e.into()),
        };
        let Some(saved) = saved else {
            return Ok(Restored { state: None, done: 0, warnings: Vec::new(), completed: None });
        };
        let (restored, discard) =
            decide(saved, &self.fingerprint, "Input changed since the checkpoint", |_| false);
        if discard {
            self.remove()?;
        }
        Ok(restored)
    }

    /// Saves `state` with its `done`, atomically.
    pub fn save<T: Serialize>(&self, state: &T, done: u64) -> Result<(), CheckpointError> {
        if let Some(dir) = self.path.parent() {
            // State directories are the user's alone (0700), like the state directory itself.
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        }
        let saved = SavedCheckpoint {
            fingerprint: self.fingerprint.clone(),
            job_id: self.job_id.to_string(),
            done,
            state: serde_json::to_value(state)?,
            saved_at_ms: now_ms(),
        };
        self.commit.write_file(&self.path, &saved)?;
        Ok(())
    }

    /// A safe point: save, then ask `stop`.
    pub fn checkpoint<T: Serialize>(
        &self,
        state: &T,
        done: u64,
        stop: &mut StopControl<'_>,
    ) -> Result<Flow, CheckpointError> {
        self.save(state, done)?;
        Ok(stop.check().map_or(Flow::Continue, Flow::Stop))
    }

    /// Removes the checkpoint (completion, cancel). Absent is fine.
    pub fn remove(&self) -> Result<(), CheckpointError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Where the checkpoint lives.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Checkpoints kept in a writer's target database; see the module docs.
#[derive(Debug, Clone)]
pub struct SqliteCheckpoints {
    identity: IdentityKey,
    fingerprint: String,
    job_id: JobId,
    commit: Arc<dyn CheckpointCommit>,
}

impl SqliteCheckpoints {
    /// Checkpoints of `identity` for the input `fingerprint`, saved by job `job_id`.
    pub fn new(identity: IdentityKey, fingerprint: impl Into<String>, job_id: JobId) -> Self {
        SqliteCheckpoints {
            identity,
            fingerprint: fingerprint.into(),
            job_id,
            commit: Arc::new(OneStep),
        }
    }

    /// These checkpoints, committed by `commit` (reftool's is [`OneStep`]).
    pub fn committed_by(mut self, commit: Arc<dyn CheckpointCommit>) -> Self {
        self.commit = commit;
        self
    }

    /// Creates the `reftool_checkpoints` table in the target database if needed.
    pub fn ensure_table(conn: &Connection) -> rusqlite::Result<()> {
        conn.execute_batch(CHECKPOINT_TABLE_SQL)
    }

    /// The last state for this fingerprint, or a fresh start. `is_void(job_id)` says whether
    /// the job that saved it was cancelled (its checkpoint is then dropped silently).
    pub fn restore<T: DeserializeOwned>(
        &self,
        conn: &Connection,
        is_void: impl Fn(&str) -> bool,
    ) -> Result<Restored<T>, CheckpointError> {
        Self::ensure_table(conn)?;
        let row = conn
            .query_row(
                "SELECT fingerprint, job_id, done, state, saved_at_ms, completed FROM reftool_checkpoints
                 WHERE identity = ?1",
                params![self.identity.as_str()],
                |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, i64>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, i64>(4)?,
                        r.get::<_, i64>(5)?,
                    ))
                },
            )
            .optional()?;
        let Some((fingerprint, job_id, done, state, saved_at, completed)) = row else {
            return Ok(Restored { state: None, done: 0, warnings: Vec::new(), completed: None });
        };
        let state = serde_json::from_str(&state).unwrap_or(serde_json::Value::Null);
        if completed != 0 && fingerprint == self.fingerprint && !is_void(&job_id) {
            return Ok(Restored {
                state: None,
                done: u64::try_from(done).unwrap_or(0),
                warnings: Vec::new(),
                completed: Some(state),
            });
        }
        let saved = SavedCheckpoint {
            fingerprint,
            job_id,
            done: u64::try_from(done).unwrap_or(0),
            state,
            saved_at_ms: u64::try_from(saved_at).unwrap_or(0),
        };
        let changed = "The input or the target changed since the checkpoint";
        let (restored, discard) = decide(saved, &self.fingerprint, changed, is_void);
        if discard {
            self.remove(conn)?;
        }
        Ok(restored)
    }

    /// Saves the checkpoint on `tx`, the transaction that also holds the units it records.
    pub fn save_in<T: Serialize>(
        &self,
        tx: &Transaction<'_>,
        state: &T,
        done: u64,
    ) -> Result<(), CheckpointError> {
        self.save_on(tx, &serde_json::to_string(state)?, done)
    }

    /// Saves the checkpoint of the serialized `state` with the connection `conn`.
    fn save_on(&self, conn: &Connection, state: &str, done: u64) -> Result<(), CheckpointError> {
        conn.execute(
            "INSERT INTO reftool_checkpoints (identity, fingerprint, job_id, done, state, saved_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT(identity) DO UPDATE SET fingerprint = excluded.fingerprint,
                 job_id = excluded.job_id, done = excluded.done, state = excluded.state,
                 saved_at_ms = excluded.saved_at_ms, completed = 0",
            params![
                self.identity.as_str(),
                self.fingerprint,
                self.job_id.as_str(),
                i64::try_from(done).unwrap_or(i64::MAX),
                state,
                i64::try_from(now_ms()).unwrap_or(i64::MAX)
            ],
        )?;
        Ok(())
    }

    /// A safe point for a writer: save the checkpoint on `tx`, commit units and checkpoint
    /// together, then ask `stop`.
    pub fn commit_with<T: Serialize>(
        &self,
        tx: Transaction<'_>,
        state: &T,
        done: u64,
        stop: &mut StopControl<'_>,
    ) -> Result<Flow, CheckpointError> {
        let value = serde_json::to_value(state)?;
        let text = serde_json::to_string(&value)?;
        let saved = SavedCheckpoint {
            fingerprint: self.fingerprint.clone(),
            job_id: self.job_id.to_string(),
            done,
            state: value,
            saved_at_ms: now_ms(),
        };
        self.commit
            .commit_units(tx, &self.identity, &saved, &|conn| self.save_on(conn, &text, done))?;
        Ok(stop.check().map_or(Flow::Continue, Flow::Stop))
    }

    /// Completion of a writer, on the transaction holding its last units: the checkpoint row
    /// becomes a completion record carrying `result` (the response `data`, say). The commit
    /// makes units and completion durable together, so a kill after it never leads to a second
    /// run, and a kill before it resumes from the last checkpoint. `restore` then answers
    /// [`Restored::completed`]; the framework replays `result` (an idempotency hit) instead of
    /// writing again, and may drop the record with [`Self::remove`] once its own idempotency
    /// record is stored.
    pub fn finish_in<T: Serialize>(
        &self,
        tx: &Transaction<'_>,
        result: &T,
        done: u64,
    ) -> Result<(), CheckpointError> {
        self.save_in(tx, result, done)?;
        tx.execute(
            "UPDATE reftool_checkpoints SET completed = 1 WHERE identity = ?1",
            params![self.identity.as_str()],
        )?;
        Ok(())
    }

    /// Removes the checkpoint row (completion, cancel). Pass the final transaction's connection,
    /// or call inside the transaction that writes the last units.
    pub fn remove(&self, conn: &Connection) -> Result<(), CheckpointError> {
        Self::ensure_table(conn)?;
        conn.execute(
            "DELETE FROM reftool_checkpoints WHERE identity = ?1",
            params![self.identity.as_str()],
        )?;
        Ok(())
    }
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;
