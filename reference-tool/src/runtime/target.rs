//! A writer's claim on its target: one writer fills a target at a time, and a writer's
//! checkpoint holds only for the target as that writer left it (REQ-C-035).
//!
//! A resumable writer records which units it committed (its checkpoint, `checkpoint.rs`). That
//! record describes the target too: "rows 1 to 1200 of this file are in this table". Another
//! writer that empties the table and fills it with other rows, a `drop-table`, anything that
//! changes the table between a pause and its continuation, makes the record false, and a
//! continuation that trusted it would answer success over a table holding other rows.
//!
//! So a writer **claims** its target when it starts from the beginning: a row of
//! `reftool_targets` in the target's own database, written in the transaction that empties the
//! target, names the target, the writer (its identity and job) and a fresh random **stamp**.
//!
//! - **One writer at a time.** A fresh start is refused ([`ClaimError::Held`]) while the target
//!   is claimed by another writer whose work is unfinished and still held by a live job (one
//!   running, or paused waiting for its continuation: the caller says, see
//!   `JobStore::holds_work`). A finished writer, or one whose job ended (cancelled, lost), no
//!   longer holds it.
//! - **A checkpoint names its target's state.** The writer puts the stamp and how far the target
//!   is filled into its checkpoint's fingerprint; a continuation recomputes both from the target
//!   ([`TargetClaims::state_of`]) and restores only when they match. Otherwise the checkpoint is
//!   discarded with CHECKPOINT_DISCARDED and the work starts over.
//! - **Every commit checks the claim.** Each transaction of the writer first checks, holding the
//!   database's write lock, that the target still carries its stamp ([`TargetClaims::verify`]);
//!   a writer that lost its target (another process took it outside these rules, or dropped it)
//!   stops with [`ClaimError::Changed`] and never answers success.

use rusqlite::{Connection, OptionalExtension, params};

use super::identity::IdentityKey;
use super::ids::JobId;

/// SQL creating the claims table in a writer's target database.
pub const TARGETS_TABLE_SQL: &str = "CREATE TABLE IF NOT EXISTS reftool_targets (
    target    TEXT PRIMARY KEY NOT NULL,
    identity  TEXT NOT NULL,
    job_id    TEXT NOT NULL,
    stamp     TEXT NOT NULL,
    completed INTEGER NOT NULL DEFAULT 0
)";

/// The claim on a target (a row of `reftool_targets`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// The identity key of the writer that claimed it.
    pub identity: String,
    /// That writer's job (the latest one working on it).
    pub job_id: String,
    /// Drawn at the claim: names this filling of the target.
    pub stamp: String,
    /// Whether that writer finished.
    pub completed: bool,
}

/// Why a writer may not go on with its target.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// Another writer's unfinished work, held by a live job, claims the target.
    #[error("the target is being filled by another writer (job {job_id})")]
    Held {
        /// That writer's job.
        job_id: String,
    },
    /// The target no longer carries this writer's claim: it was dropped or claimed since.
    #[error("the target was dropped or claimed by another writer since this writer claimed it")]
    Changed,
    /// The target database failed.
    #[error("failed to read the claim of the target: {0}")]
    Db(#[from] rusqlite::Error),
}

/// The claims of one writer (identity and job) on one target of its database.
#[derive(Debug, Clone)]
pub struct TargetClaims {
    target: String,
    identity: IdentityKey,
    job_id: JobId,
}

impl TargetClaims {
    /// The claims of the writer `identity`, working as job `job_id`, on the table `target`.
    pub fn new(target: impl Into<String>, identity: IdentityKey, job_id: JobId) -> Self {
        TargetClaims { target: target.into(), identity, job_id }
    }

    /// Creates the claims table if needed.
    pub fn ensure_table(conn: &Connection) -> rusqlite::Result<()> {
        conn.execute_batch(TARGETS_TABLE_SQL)
    }

    /// Whether the target table exists.
    fn exists(&self, conn: &Connection) -> rusqlite::Result<bool> {
        conn.query_row(
            "SELECT EXISTS(SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
            params![self.target],
            |r| r.get(0),
        )
    }

    /// The claim on the target, if it exists and is claimed.
    pub fn current(&self, conn: &Connection) -> rusqlite::Result<Option<Claim>> {
        Self::ensure_table(conn)?;
        if !self.exists(conn)? {
            return Ok(None);
        }
        conn.query_row(
            "SELECT identity, job_id, stamp, completed FROM reftool_targets WHERE target = ?1",
            params![self.target],
            |r| {
                Ok(Claim {
                    identity: r.get(0)?,
                    job_id: r.get(1)?,
                    stamp: r.get(2)?,
                    completed: r.get::<_, i64>(3)? != 0,
                })
            },
        )
        .optional()
    }

    /// The target's state for a checkpoint's fingerprint: its claim's stamp and how far it is
    /// filled (`filled`, read by the caller from the target itself): `claim=<stamp>;filled=<n>`,
    /// or `claim=none` for a target that does not exist or was never claimed.
    pub fn state_of(&self, conn: &Connection, filled: u64) -> rusqlite::Result<String> {
        Ok(match self.current(conn)? {
            Some(claim) => Self::state(&claim.stamp, filled),
            None => "claim=none".to_owned(),
        })
    }

    /// [`TargetClaims::state_of`] as this writer's checkpoint records it: its stamp, `filled`.
    pub fn state(stamp: &str, filled: u64) -> String {
        format!("claim={stamp};filled={filled}")
    }

    /// A fresh start, inside the transaction that empties the target: the target becomes this
    /// writer's, under a new stamp (returned). Refused ([`ClaimError::Held`], nothing changed)
    /// while another writer's unfinished claim holds it: `holds(job_id)` says whether that
    /// writer's job still runs or waits paused.
    pub fn take(
        &self,
        tx: &Connection,
        holds: impl Fn(&str) -> bool,
    ) -> Result<String, ClaimError> {
        Self::ensure_table(tx)?;
        let other: Option<(String, String, i64)> = tx
            .query_row(
                "SELECT identity, job_id, completed FROM reftool_targets WHERE target = ?1",
                params![self.target],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        if let Some((identity, job_id, completed)) = other
            && identity != self.identity.as_str()
            && completed == 0
            && holds(&job_id)
        {
            return Err(ClaimError::Held { job_id });
        }
        let stamp = new_stamp()?;
        tx.execute(
            "INSERT INTO reftool_targets (target, identity, job_id, stamp, completed)
             VALUES (?1, ?2, ?3, ?4, 0)
             ON CONFLICT(target) DO UPDATE SET identity = excluded.identity,
                 job_id = excluded.job_id, stamp = excluded.stamp, completed = 0",
            params![self.target, self.identity.as_str(), self.job_id.as_str(), stamp],
        )?;
        Ok(stamp)
    }

    /// A resume, inside the writer's first transaction: the target still carries `stamp`
    /// ([`TargetClaims::verify`]), and the claim now names this writer's job (a job that
    /// replaced a lost one continues the work).
    pub fn adopt(&self, tx: &Connection, stamp: &str) -> Result<(), ClaimError> {
        self.verify(tx, stamp)?;
        tx.execute(
            "UPDATE reftool_targets SET job_id = ?2 WHERE target = ?1",
            params![self.target, self.job_id.as_str()],
        )?;
        Ok(())
    }

    /// Whether the target still exists and carries this writer's claim `stamp`: call it in each
    /// transaction, before writing ([`ClaimError::Changed`] when not).
    pub fn verify(&self, tx: &Connection, stamp: &str) -> Result<(), ClaimError> {
        match self.current(tx)? {
            Some(claim) if claim.stamp == stamp && claim.identity == self.identity.as_str() => {
                Ok(())
            }
            _ => Err(ClaimError::Changed),
        }
    }

    /// Completion, in the writer's last transaction: its claim no longer holds the target.
    pub fn complete(&self, tx: &Connection, stamp: &str) -> Result<(), ClaimError> {
        tx.execute(
            "UPDATE reftool_targets SET completed = 1 WHERE target = ?1 AND stamp = ?2",
            params![self.target, stamp],
        )?;
        Ok(())
    }
}

/// Sixteen random hex digits.
fn new_stamp() -> rusqlite::Result<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| {
        rusqlite::Error::ToSqlConversionFailure(Box::new(std::io::Error::other(e.to_string())))
    })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn writer(name: &str) -> TargetClaims {
        TargetClaims::new("rows", IdentityKey(name.repeat(4)), JobId::generate().unwrap())
    }

    fn db() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE rows (_line INTEGER PRIMARY KEY)").unwrap();
        conn
    }

    #[test]
    fn a_fresh_start_claims_the_target_and_names_it_in_the_state() {
        let conn = db();
        let a = writer("a");
        assert_eq!(a.state_of(&conn, 0).unwrap(), "claim=none");
        let stamp = a.take(&conn, |_| true).unwrap();
        assert_eq!(a.state_of(&conn, 1200).unwrap(), TargetClaims::state(&stamp, 1200));
        a.verify(&conn, &stamp).unwrap();
        // Its own fresh start again (a restart) takes it anew, under a new stamp.
        let again = a.take(&conn, |_| true).unwrap();
        assert_ne!(again, stamp);
        assert!(matches!(a.verify(&conn, &stamp), Err(ClaimError::Changed)));
    }

    #[test]
    fn another_writer_is_refused_while_the_holder_works_and_takes_over_after() {
        let conn = db();
        let (a, b) = (writer("a"), writer("b"));
        let stamp = a.take(&conn, |_| true).unwrap();
        match b.take(&conn, |_| true) {
            Err(ClaimError::Held { job_id }) => assert_eq!(job_id, a.job_id.as_str()),
            other => panic!("{other:?}"),
        }
        a.verify(&conn, &stamp).unwrap();
        // A's job no longer holds it (cancelled, lost): B takes over, A's claim is gone.
        let taken = b.take(&conn, |_| false).unwrap();
        assert!(matches!(a.verify(&conn, &stamp), Err(ClaimError::Changed)));
        // After B completes, anyone may start over on it.
        b.complete(&conn, &taken).unwrap();
        a.take(&conn, |_| true).unwrap();
    }

    #[test]
    fn a_dropped_target_is_no_longer_claimed() {
        let conn = db();
        let a = writer("a");
        let stamp = a.take(&conn, |_| true).unwrap();
        conn.execute_batch("DROP TABLE rows").unwrap();
        assert_eq!(a.state_of(&conn, 1200).unwrap(), "claim=none");
        assert!(matches!(a.verify(&conn, &stamp), Err(ClaimError::Changed)));
        assert!(matches!(a.adopt(&conn, &stamp), Err(ClaimError::Changed)));
    }
}
