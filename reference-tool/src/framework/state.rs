//! The per-user state: directory, instance namespaces, the SQLite state database and its
//! migrations, and the idempotency store (REQ-C-007, REQ-O-036).
//!
//! - Directory: `REFTOOL_STATE_DIR` (absolute) if set, else `$XDG_STATE_HOME/reftool` (when
//!   absolute), else `$HOME/.local/state/reftool`. Created with mode 0700 on first use; one
//!   that exists with a looser mode is tightened to 0700 at every use. It must belong to the
//!   user running reftool (a symlink to such a directory is fine): a directory of another
//!   user, or a symlink to one, is refused with PRECONDITION 4 `STATE_DIR_UNSAFE`, since its
//!   owner could read the state or plant files in it.
//! - Files: every state file is created 0600 (the state database and its `-wal` / `-shm`
//!   are tightened to 0600 when found looser) and is never reached through a symlink: the
//!   write probe is created exclusively under a fresh name, and a `state.db` that is a symlink
//!   is refused (`STATE_DIR_UNSAFE`).
//! - Instance: `--instance-id`, else `REFTOOL_INSTANCE_ID`, else `default`; 1–64 characters of
//!   `A-Z a-z 0-9 . _ -`, starting with a letter or digit. Anything else is ARG_ERROR.
//!   Per-instance files live under `<dir>/instances/<id>/`; rows of the shared database carry
//!   the instance.
//! - Database: `<dir>/state.db`, WAL mode, a busy timeout (`REFTOOL_STATE_BUSY_MS`, default
//!   5000) so concurrent invocations queue; a call with a budget waits no longer than its
//!   budget (plus [`DEADLINE_GRACE`] to record where its work stands): a database locked by
//!   another process costs it its budget, then UNAVAILABLE 12 `STATE_BUSY`. A detached worker
//!   has no deadline and retries a busy database instead of dying. Migrations are a list of `(id, sql)` applied once
//!   each, in order, recorded in `reftool_migrations`; part 2 appends its own list.
//! - Failures: a directory that cannot be created or written, PRECONDITION 4
//!   `STATE_DIR_UNUSABLE`; a process that may open no more files (EMFILE, ENFILE), PRECONDITION
//!   4 `TOO_MANY_OPEN_FILES` with the limit (no directory is at fault); a file that is not a database or is damaged, PRECONDITION 4
//!   `STATE_DB_CORRUPT` (nothing is overwritten; move the file away); a database still locked
//!   when the busy timeout runs out, UNAVAILABLE 12 `STATE_BUSY`, retryable: the lock is held
//!   by another invocation that will finish.
//! - Idempotency keys (REQ-C-007): a writer's key is reserved by its first use, before its work
//!   runs, for the arguments of that call ([`StateDb::idempotency_claim`], one transaction, so
//!   of several calls racing with one key exactly one gets it). From then on, while the call
//!   runs or waits paused and after it answered, a call with other arguments under that key
//!   is CONFLICT 6 `IDEMPOTENCY_KEY_REUSED` and does nothing; the first call's continuation
//!   and its repeats go on (the job store attaches or resumes them), and once it succeeded a
//!   repeat answers its `data` with `effect: "noop"`.
//! - Concurrency: any number of reftool processes may use one state directory at once; every
//!   change is one SQLite transaction. The database files are never opened outside SQLite (see
//!   `prepare_private_db`: a plain descriptor closed in a process drops that process's SQLite
//!   locks).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior};
use serde_json::{Value, json};

use super::exit::Exit;
use super::failure::{Failure, Phase};

/// The default instance.
pub const DEFAULT_INSTANCE: &str = "default";
/// Default busy timeout of the state database.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_millis(5000);

/// One schema migration of the state database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migration {
    /// Unique, ordered id, e.g. `0001_idempotency`.
    pub id: &'static str,
    /// SQL run inside the migration's transaction.
    pub sql: &'static str,
}

/// The framework's own migrations. Part 2 passes its own list after these.
pub const FRAMEWORK_MIGRATIONS: &[Migration] = &[
    Migration {
        id: "0001_idempotency",
        sql: "CREATE TABLE idempotency (
              instance TEXT NOT NULL,
              command TEXT NOT NULL,
              key TEXT NOT NULL,
              args_digest TEXT NOT NULL,
              data TEXT NOT NULL,
              created_at_ms INTEGER NOT NULL,
              PRIMARY KEY (instance, command, key)
          );",
    },
    // A key is reserved by its first use, before the work runs: `pending` until the call's
    // answer is recorded (see `StateDb::idempotency_claim`).
    Migration {
        id: "0002_idempotency_reserved",
        sql: "ALTER TABLE idempotency ADD COLUMN pending INTEGER NOT NULL DEFAULT 0;",
    },
];

/// What an idempotency key says about a call (`StateDb::idempotency_claim`).
#[derive(Debug, Clone, PartialEq)]
pub enum KeyUse {
    /// The key was free: it is now reserved for this call's arguments.
    Reserved,
    /// The key is reserved for these arguments by a call that has not answered yet (the
    /// first call's continuation, or its repeat): go on, the job store attaches or resumes.
    InProgress,
    /// A call with these arguments finished under this key: its `data`.
    Finished(Value),
    /// The key belongs to other arguments, finished (`in_progress` false) or not.
    Conflict {
        /// Whether that call has not answered yet.
        in_progress: bool,
    },
}

/// Why a state directory or file is not safe to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnsafeReason {
    /// It belongs to another user (this uid).
    ForeignOwner(u32),
    /// A state file is a symlink.
    Symlink,
}

impl std::fmt::Display for UnsafeReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnsafeReason::ForeignOwner(uid) => {
                write!(f, "it belongs to uid {uid}, not to uid {}", nix::unistd::geteuid())
            }
            UnsafeReason::Symlink => f.write_str("it is a symlink"),
        }
    }
}

/// A state failure.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// No usable location (no `REFTOOL_STATE_DIR`, `XDG_STATE_HOME` or `HOME`).
    #[error("failed to locate the state directory: set REFTOOL_STATE_DIR or HOME")]
    NoLocation,
    /// The directory could not be created or written.
    #[error("failed to use the state directory {path}: {source}")]
    DirUnusable {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The directory (or a file in it) could be read or changed by someone else.
    #[error("refused to keep reftool's state in {path}: {reason}")]
    Unsafe {
        /// The directory or file.
        path: PathBuf,
        /// Why.
        reason: UnsafeReason,
    },
    /// The process may open no more files (EMFILE, or the system's ENFILE): no directory is
    /// at fault.
    #[error("failed to open {path}: the process may open no more files")]
    TooManyOpenFiles {
        /// What it tried to open.
        path: PathBuf,
    },
    /// The database file is damaged or not a database.
    #[error("failed to read the state database {path}: it is not a valid SQLite database")]
    Corrupt {
        /// The file.
        path: PathBuf,
    },
    /// Still locked when the busy timeout ran out.
    #[error("failed to lock the state database {path} within {timeout_ms} ms")]
    Busy {
        /// The file.
        path: PathBuf,
        /// The busy timeout.
        timeout_ms: u64,
    },
    /// The database could not be opened for writing.
    #[error("failed to open the state database {path}: {source}")]
    Unopenable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: rusqlite::Error,
    },
    /// Any other SQLite error.
    #[error("failed to use the state database: {0}")]
    Sqlite(rusqlite::Error),
}

impl StateError {
    /// A directory or file of the state that could not be made or used.
    fn unusable(path: &Path, source: std::io::Error) -> StateError {
        if crate::runtime::fsutil::is_out_of_descriptors(&source) {
            StateError::TooManyOpenFiles { path: path.to_owned() }
        } else {
            StateError::DirUnusable { path: path.to_owned(), source }
        }
    }

    fn from_sqlite(error: rusqlite::Error, path: &Path, busy: Duration) -> StateError {
        if error.sqlite_error_code() == Some(ErrorCode::CannotOpen)
            && crate::runtime::fsutil::out_of_descriptors_now()
        {
            // SQLite says only "unable to open database file"; the limit is why.
            return StateError::TooManyOpenFiles { path: path.to_owned() };
        }
        match error.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) => StateError::Busy {
                path: path.to_owned(),
                timeout_ms: u64::try_from(busy.as_millis()).unwrap_or(u64::MAX),
            },
            Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => {
                StateError::Corrupt { path: path.to_owned() }
            }
            Some(
                ErrorCode::CannotOpen
                | ErrorCode::ReadOnly
                | ErrorCode::PermissionDenied
                | ErrorCode::DiskFull
                | ErrorCode::SystemIoFailure,
            ) => StateError::Unopenable { path: path.to_owned(), source: error },
            _ => StateError::Sqlite(error),
        }
    }

    /// The response this failure gives.
    pub fn to_failure(&self) -> Failure {
        let message = self.to_string();
        match self {
            StateError::NoLocation
            | StateError::DirUnusable { .. }
            | StateError::Unopenable { .. } => {
                Failure::new(Exit::PRECONDITION, "STATE_DIR_UNUSABLE", message)
                    .suggestion("point REFTOOL_STATE_DIR at a writable directory")
            }
            StateError::TooManyOpenFiles { path } => Failure::too_many_open_files(
                &format!("failed to open {}", path.display()),
                "EMFILE",
            ),
            StateError::Unsafe { .. } => {
                Failure::new(Exit::PRECONDITION, "STATE_DIR_UNSAFE", message).suggestion(
                    "point REFTOOL_STATE_DIR at a directory of your own that no one else can write",
                )
            }
            StateError::Corrupt { path } => {
                Failure::new(Exit::PRECONDITION, "STATE_DB_CORRUPT", message).suggestion(format!(
                    "move {} away; reftool creates a fresh one",
                    path.display()
                ))
            }
            StateError::Busy { .. } => Failure::new(Exit::UNAVAILABLE, "STATE_BUSY", message)
                .retryable(true)
                .retry_after_ms(1000),
            StateError::Sqlite(_) => Failure::new(Exit::GENERAL_ERROR, "STATE_ERROR", message),
        }
    }
}

/// Why an instance id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid instance id {0:?}: use 1-64 characters of A-Z a-z 0-9 . _ -, starting with a letter or digit"
)]
pub struct InstanceIdError(pub String);

/// Checks an instance id.
pub fn validate_instance_id(id: &str) -> Result<(), InstanceIdError> {
    let mut chars = id.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphanumeric());
    let rest_ok = id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if first_ok && rest_ok && id.len() <= 64 { Ok(()) } else { Err(InstanceIdError(id.to_owned())) }
}

/// Where state lives for this invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateConfig {
    /// The state directory; `None` when no location could be derived.
    pub dir: Option<PathBuf>,
    /// The instance (validated).
    pub instance: String,
    /// Busy timeout of the state database.
    pub busy_timeout: Duration,
    /// When the call must answer (the end of its budget): a wait for the state database ends
    /// there too, not [`StateConfig::busy_timeout`] later ([`StateConfig::wait_limit`]).
    /// `None` for a call without a budget, and for a detached worker (which retries).
    pub deadline: Option<Instant>,
}

/// How long a wait for the state database may last once the call's deadline is near or past:
/// what recording where the work stands (a pause, an end) may still take.
pub const DEADLINE_GRACE: Duration = Duration::from_millis(100);

impl StateConfig {
    /// Resolves the directory from the environment (see the module docs). A set but relative
    /// or empty `REFTOOL_STATE_DIR` is an ARG_ERROR, as is a malformed `REFTOOL_STATE_BUSY_MS`.
    pub fn from_env(instance: String) -> Result<StateConfig, Failure> {
        let dir = match std::env::var_os("REFTOOL_STATE_DIR") {
            Some(value) => {
                let path = PathBuf::from(&value);
                if !path.is_absolute() {
                    return Err(Failure::arg(
                        "ENV_INVALID",
                        format!("REFTOOL_STATE_DIR must be an absolute path, got {value:?}"),
                    ));
                }
                Some(path)
            }
            None => std::env::var_os("XDG_STATE_HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|p| p.join("reftool"))
                .or_else(|| {
                    std::env::var_os("HOME")
                        .map(PathBuf::from)
                        .filter(|p| p.is_absolute())
                        .map(|p| p.join(".local/state/reftool"))
                }),
        };
        let busy_timeout = match std::env::var("REFTOOL_STATE_BUSY_MS") {
            Ok(text) => text.trim().parse::<u64>().map(Duration::from_millis).map_err(|_| {
                Failure::arg(
                    "ENV_INVALID",
                    format!("REFTOOL_STATE_BUSY_MS must be whole milliseconds, got {text:?}"),
                )
            })?,
            Err(std::env::VarError::NotPresent) => DEFAULT_BUSY_TIMEOUT,
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(Failure::arg("ENV_INVALID", "REFTOOL_STATE_BUSY_MS is not UTF-8"));
            }
        };
        Ok(StateConfig { dir, instance, busy_timeout, deadline: None })
    }

    /// How long a wait for the state database may last if it starts now: the busy timeout,
    /// but never past the call's deadline by more than [`DEADLINE_GRACE`].
    pub fn wait_limit(&self) -> Duration {
        match self.deadline {
            None => self.busy_timeout,
            Some(deadline) => {
                let left = deadline.saturating_duration_since(Instant::now());
                left.max(DEADLINE_GRACE).min(self.busy_timeout)
            }
        }
    }

    /// The state directory, created (0700) if needed.
    pub fn ensure_dir(&self) -> Result<PathBuf, StateError> {
        let dir = self.dir.clone().ok_or(StateError::NoLocation)?;
        create_private_dir(&dir)?;
        Ok(dir)
    }

    /// This instance's own directory (`<dir>/instances/<id>`), created if needed.
    pub fn instance_dir(&self) -> Result<PathBuf, StateError> {
        let dir = self.ensure_dir()?.join("instances").join(&self.instance);
        create_private_dir(&dir)?;
        Ok(dir)
    }
}

/// The mode of every state directory.
const PRIVATE_DIR_MODE: u32 = 0o700;
/// The mode of every state file.
const PRIVATE_FILE_MODE: u32 = 0o600;

/// Creates `dir` (0700, parents too) if needed, then makes sure it is ours and private: owned
/// by this user (through a symlink too: the directory it leads to counts) and tightened to
/// 0700. The checks and the chmod go through one open descriptor, so they concern the same
/// directory.
fn create_private_dir(dir: &Path) -> Result<(), StateError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
    let unusable = |source| StateError::unusable(dir, source);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR_MODE)
        .create(dir)
        .map_err(unusable)?;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir)
        .map_err(unusable)?;
    let meta = opened.metadata().map_err(unusable)?;
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(StateError::Unsafe {
            path: dir.to_owned(),
            reason: UnsafeReason::ForeignOwner(meta.uid()),
        });
    }
    if meta.mode() & 0o777 != PRIVATE_DIR_MODE {
        opened
            .set_permissions(std::fs::Permissions::from_mode(PRIVATE_DIR_MODE))
            .map_err(unusable)?;
    }
    probe_writable(dir).map_err(unusable)
}

/// Whether files can be created in `dir`: a directory we cannot write into is as useless as a
/// missing one, so find out now. The probe is created exclusively (never through a symlink
/// planted under its name) under a fresh random name, then removed.
fn probe_writable(dir: &Path) -> std::io::Result<()> {
    for _ in 0..8 {
        let probe = dir.join(format!(".probe-{}-{}", std::process::id(), random_suffix()?));
        match private_file_options().create_new(true).open(&probe) {
            Ok(_) => return std::fs::remove_file(&probe),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(std::io::ErrorKind::AlreadyExists, "every probe name tried was taken"))
}

/// Sixteen random hex digits.
fn random_suffix() -> std::io::Result<String> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Opening a state file for writing: mode 0600 if created, never through a symlink.
fn private_file_options() -> std::fs::OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).mode(PRIVATE_FILE_MODE).custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    options
}

/// Prepares the state database `path` before SQLite opens it: created 0600 if missing (SQLite
/// gives its `-wal` and `-shm` the database's mode), and it, `-wal` and `-shm` tightened to
/// 0600 when found looser. A symlink at any of the three names is refused.
///
/// None of the three is opened here, only looked at (`lstat`) and changed by name (`chmod`):
/// the process may already hold a SQLite connection to this database (dispatch keeps one while
/// a command opens its own), and SQLite's locks are POSIX record locks, which the kernel drops
/// for the whole process as soon as ANY descriptor of the file is closed. A plain handle
/// opened and closed here silently released the locks of the open connection, so another
/// process took the database for unused and reset its shared memory under it: SIGBUS,
/// "locking protocol" and STATE_ERROR when eight calls started at once. Changing modes by name
/// is safe here: the directory is private (0700) and ours, so nobody else can swap a name.
/// Creating a missing database opens a new file, which no connection can hold yet.
fn prepare_private_db(path: &Path) -> Result<(), StateError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let mut names = vec![path.to_owned()];
    for suffix in ["-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        names.push(PathBuf::from(name));
    }
    for (i, name) in names.iter().enumerate() {
        let unusable = |source| StateError::unusable(name, source);
        let meta = match std::fs::symlink_metadata(name) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && i > 0 => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                match private_file_options().create_new(true).open(name) {
                    // A new file: closing it drops no lock of any connection.
                    Ok(_) => continue,
                    // Another call created it meanwhile: look at what it made.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        std::fs::symlink_metadata(name).map_err(unusable)?
                    }
                    Err(e) => return Err(unusable(e)),
                }
            }
            Err(e) => return Err(unusable(e)),
        };
        if meta.file_type().is_symlink() {
            return Err(StateError::Unsafe { path: name.clone(), reason: UnsafeReason::Symlink });
        }
        if meta.mode() & 0o777 != PRIVATE_FILE_MODE {
            std::fs::set_permissions(name, std::fs::Permissions::from_mode(PRIVATE_FILE_MODE))
                .map_err(unusable)?;
        }
    }
    Ok(())
}

/// An open state database, migrated.
#[derive(Debug)]
pub struct StateDb {
    conn: Connection,
    path: PathBuf,
    config: StateConfig,
}

impl StateDb {
    /// Opens `<dir>/state.db`, sets WAL and the busy timeout, and applies every migration of
    /// `migrations` (in order) not applied yet, each in its own transaction.
    ///
    /// Opening is retried while it meets a busy database, up to the busy timeout: when several
    /// invocations start at once on a new state directory, switching to WAL and the first schema
    /// change can answer SQLITE_BUSY without consulting the busy handler (a snapshot that
    /// another connection's commit made stale), and an identical invocation must attach to the
    /// job, not fail with STATE_BUSY.
    ///
    /// Every wait, here and in every later use of the connection ([`StateDb::conn`] re-arms
    /// it), is bounded by [`StateConfig::wait_limit`]: a database another process keeps locked
    /// costs a call its budget at most (then UNAVAILABLE 12 `STATE_BUSY`), not the busy timeout.
    pub fn open(config: &StateConfig, migrations: &[Migration]) -> Result<StateDb, StateError> {
        let deadline = Instant::now() + config.wait_limit();
        let mut pause = Duration::from_millis(2);
        loop {
            match Self::open_once(config, migrations) {
                Err(StateError::Busy { .. }) if Instant::now() < deadline => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(50));
                }
                result => return result,
            }
        }
    }

    fn open_once(config: &StateConfig, migrations: &[Migration]) -> Result<StateDb, StateError> {
        let path = config.ensure_dir()?.join("state.db");
        let busy = config.wait_limit();
        let map = |e: rusqlite::Error| StateError::from_sqlite(e, &path, busy);
        prepare_private_db(&path)?;
        // A file path, no URI. (Not SQLITE_OPEN_NOFOLLOW: it refuses a symlink anywhere in the
        // path, a symlinked state directory of one's own too; the name itself was checked
        // above, in a directory only we can write.)
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&path, flags).map_err(map)?;
        conn.busy_timeout(busy).map_err(map)?;
        let mode: String =
            conn.query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0)).map_err(map)?;
        if mode != "wal" {
            return Err(StateError::Unopenable {
                path: path.clone(),
                source: rusqlite::Error::InvalidQuery,
            });
        }
        let mut db = StateDb { conn, path, config: config.clone() };
        db.migrate(migrations)?;
        Ok(db)
    }

    fn map(&self, error: rusqlite::Error) -> StateError {
        StateError::from_sqlite(error, &self.path, self.config.wait_limit())
    }

    /// Whether every migration of `migrations` is applied: a plain read, which a writer holding
    /// the database's lock does not block (WAL), so opening needs no lock in the usual case.
    fn all_applied(&self, migrations: &[Migration]) -> bool {
        let applied =
            self.conn.prepare("SELECT id FROM reftool_migrations").and_then(|mut stmt| {
                stmt.query_map([], |row| row.get::<_, String>(0))?
                    .collect::<Result<std::collections::BTreeSet<String>, _>>()
            });
        applied.is_ok_and(|applied| migrations.iter().all(|m| applied.contains(m.id)))
    }

    fn migrate(&mut self, migrations: &[Migration]) -> Result<(), StateError> {
        if self.all_applied(migrations) {
            return Ok(());
        }
        // In an immediate transaction, so that the busy handler applies to it too.
        self.conn
            .execute_batch(
                "BEGIN IMMEDIATE;
                 CREATE TABLE IF NOT EXISTS reftool_migrations (
                     id TEXT PRIMARY KEY, applied_at_ms INTEGER NOT NULL);
                 COMMIT;",
            )
            .map_err(|e| self.map(e))?;
        for migration in migrations {
            let (path, busy) = (self.path.clone(), self.config.wait_limit());
            let map = |e: rusqlite::Error| StateError::from_sqlite(e, &path, busy);
            let tx =
                self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(map)?;
            let applied: bool = tx
                .query_row(
                    "SELECT EXISTS(SELECT 1 FROM reftool_migrations WHERE id = ?1)",
                    [migration.id],
                    |row| row.get(0),
                )
                .map_err(map)?;
            if !applied {
                tx.execute_batch(migration.sql).map_err(map)?;
                tx.execute(
                    "INSERT INTO reftool_migrations (id, applied_at_ms) VALUES (?1, ?2)",
                    rusqlite::params![migration.id, now_ms()],
                )
                .map_err(map)?;
            }
            tx.commit().map_err(map)?;
        }
        Ok(())
    }

    /// The connection (part 2 keeps its job tables here), its busy timeout re-armed to
    /// [`StateConfig::wait_limit`] as of now.
    pub fn conn(&mut self) -> &mut Connection {
        self.rearm();
        &mut self.conn
    }

    /// The connection as it is armed (see [`StateDb::rearm`]).
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Bounds the connection's next waits by [`StateConfig::wait_limit`] as of now: call it
    /// before a write made late in the call with a connection borrowed earlier.
    pub fn rearm(&self) {
        let _ = self.conn.busy_timeout(self.config.wait_limit());
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Claims `key` for a call of `command` with the arguments `args_digest` (REQ-C-007: the
    /// first use of a key reserves it): a free key is reserved at once, in the same
    /// transaction that looked, so of several calls racing with one key exactly one reserves
    /// it; the others see its reservation. A reservation holds from the first use on, while
    /// the call runs (or waits paused) and after it answered, so a call with other arguments
    /// is refused at any time, and the first call's continuation (same arguments) goes on.
    /// Takes the write lock briefly, so a locked database answers STATE_BUSY before any work.
    pub fn idempotency_claim(
        &mut self,
        instance: &str,
        command: &str,
        key: &str,
        args_digest: &str,
    ) -> Result<KeyUse, StateError> {
        self.rearm();
        let (path, busy) = (self.path.clone(), self.config.wait_limit());
        let map = |e: rusqlite::Error| StateError::from_sqlite(e, &path, busy);
        let tx =
            self.conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(map)?;
        let row: Option<(String, String, bool)> = tx
            .query_row(
                "SELECT args_digest, data, pending FROM idempotency
                 WHERE instance = ?1 AND command = ?2 AND key = ?3",
                [instance, command, key],
                |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
            )
            .optional()
            .map_err(map)?;
        let answer = match row {
            None => {
                tx.execute(
                    "INSERT INTO idempotency
                     (instance, command, key, args_digest, data, created_at_ms, pending)
                     VALUES (?1, ?2, ?3, ?4, 'null', ?5, 1)",
                    rusqlite::params![instance, command, key, args_digest, now_ms()],
                )
                .map_err(map)?;
                KeyUse::Reserved
            }
            Some((digest, _, pending)) if digest != args_digest => {
                KeyUse::Conflict { in_progress: pending }
            }
            Some((_, _, true)) => KeyUse::InProgress,
            Some((_, data, false)) => {
                KeyUse::Finished(serde_json::from_str(&data).unwrap_or(Value::Null))
            }
        };
        tx.commit().map_err(map)?;
        Ok(answer)
    }

    /// Records a finished call: its reservation becomes the answer a repeat replays.
    pub fn idempotency_record(
        &mut self,
        instance: &str,
        command: &str,
        key: &str,
        args_digest: &str,
        data: &Value,
    ) -> Result<(), StateError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO idempotency
                 (instance, command, key, args_digest, data, created_at_ms, pending)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0)",
                rusqlite::params![instance, command, key, args_digest, data.to_string(), now_ms()],
            )
            .map_err(|e| self.map(e))?;
        Ok(())
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The conflict when a key is reused with other arguments: the call it belongs to finished,
/// or (`in_progress`) has not answered yet.
pub fn key_reused(key: &str, in_progress: bool) -> Failure {
    let message = if in_progress {
        format!(
            "idempotency key {key:?} is in use by a call with different arguments that has not \
             finished; nothing was done"
        )
    } else {
        format!(
            "idempotency key {key:?} was used before with different arguments; nothing was done"
        )
    };
    Failure::new(Exit::CONFLICT, "IDEMPOTENCY_KEY_REUSED", message)
        .suggestion("use a new idempotency key, or repeat the original arguments")
        .context(json!({"idempotency_key": key, "in_progress": in_progress}))
        .phase(Phase::Validation)
}

impl From<StateError> for Failure {
    fn from(error: StateError) -> Self {
        error.to_failure()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_ids_are_short_and_safe() {
        for good in ["default", "a", "ci-7", "A.b_c-9"] {
            assert!(validate_instance_id(good).is_ok(), "{good}");
        }
        let long = "x".repeat(65);
        for bad in ["", "-x", ".hidden", "a/b", "a b", "é", long.as_str(), "../x"] {
            assert!(validate_instance_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn migrations_apply_once_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let config = StateConfig {
            dir: Some(dir.path().join("state")),
            instance: DEFAULT_INSTANCE.into(),
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            deadline: None,
        };
        const EXTRA: &[Migration] =
            &[Migration { id: "0100_jobs", sql: "CREATE TABLE jobs (id TEXT PRIMARY KEY);" }];
        let all: Vec<Migration> = FRAMEWORK_MIGRATIONS.iter().chain(EXTRA).copied().collect();
        let mut db = StateDb::open(&config, &all).unwrap();
        drop(StateDb::open(&config, &all).unwrap());
        let applied: i64 = db
            .conn()
            .query_row("SELECT COUNT(*) FROM reftool_migrations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(applied, 3);
    }

    #[test]
    fn a_key_is_reserved_by_its_first_use_and_bound_to_its_arguments() {
        let dir = tempfile::tempdir().unwrap();
        let config = StateConfig {
            dir: Some(dir.path().join("state")),
            instance: DEFAULT_INSTANCE.into(),
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            deadline: None,
        };
        let mut db = StateDb::open(&config, FRAMEWORK_MIGRATIONS).unwrap();
        let claim = |db: &mut StateDb, digest: &str| {
            db.idempotency_claim("default", "import", "k", digest).unwrap()
        };
        assert_eq!(claim(&mut db, "a"), KeyUse::Reserved);
        // While the first call runs: its continuation goes on, other arguments are refused.
        assert_eq!(claim(&mut db, "a"), KeyUse::InProgress);
        assert_eq!(claim(&mut db, "b"), KeyUse::Conflict { in_progress: true });
        db.idempotency_record("default", "import", "k", "a", &json!({"effect": "created"}))
            .unwrap();
        // After it answered: the repeat replays, other arguments are still refused.
        assert_eq!(claim(&mut db, "a"), KeyUse::Finished(json!({"effect": "created"})));
        assert_eq!(claim(&mut db, "b"), KeyUse::Conflict { in_progress: false });
        // Keys are per instance and per command.
        assert_eq!(db.idempotency_claim("other", "import", "k", "b").unwrap(), KeyUse::Reserved);
        assert_eq!(db.idempotency_claim("default", "deploy", "k", "b").unwrap(), KeyUse::Reserved);
    }

    /// The byte of `-shm` every open SQLite connection holds a shared lock on (SQLite's
    /// "dead-man switch"): a process that can lock it exclusively takes the database for
    /// unused and resets its shared memory.
    const SHM_DMS_BYTE: i64 = 128;
    const LOCK_PROBE_ENV: &str = "REFTOOL_TEST_SHM_LOCK_PROBE";

    /// The other process of `a_second_open_keeps_the_first_connections_locks`: exits 0 when
    /// it could lock the dead-man byte exclusively, 1 when a connection still holds it.
    #[test]
    fn shm_lock_probe_process() {
        let Some(shm) = std::env::var_os(LOCK_PROBE_ENV) else { return };
        let file = std::fs::OpenOptions::new().read(true).write(true).open(shm).unwrap();
        let lock = libc::flock {
            l_type: libc::F_WRLCK as libc::c_short,
            l_whence: libc::SEEK_SET as libc::c_short,
            l_start: SHM_DMS_BYTE,
            l_len: 1,
            l_pid: 0,
        };
        let taken = nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_SETLK(&lock)).is_ok();
        std::process::exit(if taken { 0 } else { 1 });
    }

    /// Whether another process can take the dead-man byte of `shm` (so no connection of
    /// this process holds it).
    fn another_process_can_take(shm: &Path) -> bool {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["framework::state::tests::shm_lock_probe_process", "--exact", "-q"])
            .env(LOCK_PROBE_ENV, shm)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        status.success()
    }

    /// The root cause of SIGBUS and "locking protocol" under concurrent calls: opening the
    /// state database again must not drop the locks of a connection this process has open.
    #[test]
    fn a_second_open_keeps_the_first_connections_locks() {
        let dir = tempfile::tempdir().unwrap();
        let config = StateConfig {
            dir: Some(dir.path().join("state")),
            instance: DEFAULT_INSTANCE.into(),
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            deadline: None,
        };
        let mut first = StateDb::open(&config, FRAMEWORK_MIGRATIONS).unwrap();
        let _: i64 =
            first.conn().query_row("SELECT count(*) FROM idempotency", [], |r| r.get(0)).unwrap();
        let shm = dir.path().join("state/state.db-shm");
        assert!(!another_process_can_take(&shm), "an open connection holds the dead-man byte");
        let second = StateDb::open(&config, FRAMEWORK_MIGRATIONS).unwrap();
        assert!(
            !another_process_can_take(&shm),
            "opening the database again released the first connection's locks"
        );
        drop(second);
        assert!(!another_process_can_take(&shm), "closing the second keeps the first's");
        drop(first);
        // The probe itself can lock a byte nobody holds.
        let free = dir.path().join("free-shm");
        std::fs::write(&free, vec![0u8; 256]).unwrap();
        assert!(another_process_can_take(&free));
    }
}
