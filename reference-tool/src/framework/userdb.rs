//! What every command that opens a user's SQLite database (`--db FILE`) shares: how long it
//! waits for another writer, how a SQLite error becomes a [`Failure`], and the exit codes those
//! failures use, declared once so the manifest and the errors cannot drift apart.
//!
//! | SQLite says | code | exit |
//! |---|---|---|
//! | busy, locked (after [`DB_BUSY_TIMEOUT`]) | `DB_BUSY`, retryable after 1 s | UNAVAILABLE |
//! | not a database, corrupt | `DB_INVALID` | PRECONDITION |
//! | cannot open, read-only, permission denied | `DB_UNWRITABLE` | PRECONDITION |
//! | cannot open, no file descriptor left | `TOO_MANY_OPEN_FILES` | PRECONDITION |
//! | disk full, I/O error (a write past `ulimit -f` too) | `DB_WRITE_FAILED` | GENERAL_ERROR |
//! | anything else | `DB_ERROR` | GENERAL_ERROR |
//!
//! **A `--db` is the path of a file.** SQLite gives some names a meaning of their own: the
//! empty string and `:memory:` open a database that lives in memory (or a temporary file)
//! and is gone at the close, and with URI names on, `file:...` is read as a URI (which can
//! also ask for memory). An import into such a database answered success while storing
//! nothing, and its checkpoint vanished with it, so a continuation started over every time.
//! So [`db_path`] refuses the empty name (ARG_ERROR 2 `INVALID_DB_PATH`: no file has it), and
//! every other name is a file path, made absolute before SQLite sees it (`:memory:` is then
//! the file `./:memory:`, `file:x.db` the file `./file:x.db`); [`open`] never passes
//! `SQLITE_OPEN_URI`, and refuses any connection that is not backed by a file all the same.

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags};
use serde_json::json;

use super::exit::{Exit, SideEffects};
use super::failure::Failure;
use super::registry::CommandSpec;

/// How long to wait for another writer of the target database.
pub const DB_BUSY_TIMEOUT: Duration = Duration::from_millis(2000);

/// How long a caller told `DB_BUSY` should wait before trying again.
const DB_BUSY_RETRY_AFTER_MS: u64 = 1000;

/// The failure a SQLite error on the database at `path` answers.
pub fn db_failure(error: &rusqlite::Error, path: &Path) -> Failure {
    let shown = path.display();
    if error.sqlite_error_code() == Some(ErrorCode::CannotOpen)
        && crate::runtime::fsutil::out_of_descriptors_now()
    {
        // SQLite says only "unable to open database file"; the descriptor limit is why.
        return Failure::too_many_open_files(&format!("failed to open {shown}"), error);
    }
    match error.sqlite_error_code() {
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => Failure::new(
            Exit::UNAVAILABLE,
            "DB_BUSY",
            format!("{shown} stayed locked by another writer; nothing changed"),
        )
        .retryable(true)
        .retry_after_ms(DB_BUSY_RETRY_AFTER_MS),
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => Failure::new(
            Exit::PRECONDITION,
            "DB_INVALID",
            format!("{shown} is not a SQLite database"),
        ),
        Some(ErrorCode::CannotOpen | ErrorCode::ReadOnly | ErrorCode::PermissionDenied) => {
            Failure::new(
                Exit::PRECONDITION,
                "DB_UNWRITABLE",
                format!("cannot write {shown}: {error}"),
            )
        }
        Some(ErrorCode::DiskFull | ErrorCode::SystemIoFailure) => {
            // A full disk, or a write past the file-size limit (`ulimit -f`: EFBIG, which
            // SQLite reports as an I/O error).
            let limit = crate::runtime::fsutil::file_size_limit()
                .map(|bytes| format!(" (this process may write files of {bytes} bytes at most)"))
                .unwrap_or_default();
            Failure::new(
                Exit::GENERAL_ERROR,
                "DB_WRITE_FAILED",
                format!("a write to {shown} failed: {error}{limit}"),
            )
            .suggestion("free disk space, or raise the file-size limit (ulimit -f), then repeat")
        }
        _ => Failure::new(Exit::GENERAL_ERROR, "DB_ERROR", format!("{shown}: {error}")),
    }
}

/// The refusal of a `--db` that names no file.
fn invalid_db_path(message: String) -> Failure {
    Failure::arg("INVALID_DB_PATH", message)
        .context(json!({"flag": "db"}))
        .suggestion("pass the path of a database file to --db")
}

/// The `--db` argument `given` as the absolute path of a file (see the module docs): the
/// empty name is ARG_ERROR 2 `INVALID_DB_PATH`.
pub fn db_path(given: &str) -> Result<PathBuf, Failure> {
    if given.is_empty() {
        return Err(invalid_db_path("--db is empty; it must name a database file".into()));
    }
    std::path::absolute(given)
        .map_err(|e| invalid_db_path(format!("--db {given:?} is not a usable path: {e}")))
}

/// Opens the database file at `path` (from [`db_path`]) with `flags`, never as a URI, waiting
/// up to [`DB_BUSY_TIMEOUT`] for another writer; every error already mapped by
/// [`db_failure`]. A connection SQLite did not back with a file is refused
/// (`INVALID_DB_PATH`): nothing written to it would last.
pub fn open(path: &Path, flags: OpenFlags) -> Result<Connection, Failure> {
    let fail = |e: rusqlite::Error| db_failure(&e, path);
    let flags = flags.difference(OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_MEMORY);
    let conn = Connection::open_with_flags(path, flags).map_err(fail)?;
    if conn.path().is_none_or(str::is_empty) {
        return Err(invalid_db_path(format!(
            "{} does not name a database file (SQLite opened no file for it)",
            path.display()
        )));
    }
    conn.busy_timeout(DB_BUSY_TIMEOUT).map_err(fail)?;
    Ok(conn)
}

/// What each database exit means for one command, in its own words.
pub struct DbExits<'a> {
    /// PRECONDITION 4: the file is no SQLite database (or cannot be written, or was not named).
    pub precondition: &'a str,
    /// NOT_FOUND 5: the database (or something in it) does not exist.
    pub not_found: &'a str,
    /// UNAVAILABLE: another writer held the database past [`DB_BUSY_TIMEOUT`].
    pub unavailable: &'a str,
}

/// Declares the exits [`db_failure`] and a missing database file produce, on a command that
/// opens a user's database. None of them changed anything; only UNAVAILABLE (a busy database)
/// is worth retrying.
pub trait DeclareDbExits {
    /// Adds PRECONDITION, NOT_FOUND and UNAVAILABLE with this command's descriptions.
    #[must_use]
    fn db_exits(self, exits: &DbExits<'_>) -> Self;
}

impl DeclareDbExits for CommandSpec {
    fn db_exits(self, exits: &DbExits<'_>) -> Self {
        self.exit(Exit::PRECONDITION, exits.precondition, false, SideEffects::None)
            .exit(Exit::NOT_FOUND, exits.not_found, false, SideEffects::None)
            .exit(Exit::UNAVAILABLE, exits.unavailable, true, SideEffects::None)
    }
}
