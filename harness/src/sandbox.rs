//! Stage: sandbox. A private directory and environment per scenario, and the search for
//! processes a scenario left behind.
//!
//! # What a sandbox is
//!
//! [`Sandbox::new`] makes a fresh temporary directory (`conform-XXXXXX` under the system's
//! temporary directory) holding:
//!
//! | path              | environment           | what for                                  |
//! |-------------------|-----------------------|-------------------------------------------|
//! | `home/`           | `HOME`                | the tool's per-user state (job directory) |
//! | `home/.config/`   | `XDG_CONFIG_HOME`     |                                           |
//! | `home/.local/share/` | `XDG_DATA_HOME`    |                                           |
//! | `home/.local/state/` | `XDG_STATE_HOME`   |                                           |
//! | `home/.cache/`    | `XDG_CACHE_HOME`      |                                           |
//! | `run/` (mode 0700) | `XDG_RUNTIME_DIR`    |                                           |
//! | `tmp/`            | `TMPDIR`              |                                           |
//! | `work/`           | (the working directory) | fixtures are copied here               |
//! | `conform-owner`   |                       | who made the sandbox (see below)          |
//!
//! The environment of every step ([`Sandbox::env`]) is built from scratch: those variables,
//! `PATH` as conform itself got it, `LANG=C.UTF-8`, the extra variables the profile or scenario
//! asked for ([`Sandbox::set_env`]), and last, so nothing can override it, the marker
//! `CONFORM_SANDBOX=<random id>` ([`MARKER_VAR`]). Nothing else of conform's environment is
//! passed on.
//!
//! # Leaks
//!
//! When the scenario is over, [`Sandbox::sweep`] finds every process the scenario left
//! running, SIGKILLs it (and, for a marked one, its process group; never conform's own) and
//! returns it as a [`LeakedProcess`] fact, so that the caller can report a leak as a finding.
//! The sweep repeats until a pass finds nothing new and everything caught is gone, so a
//! process that forks while being killed is caught too. Three nets, each noted in
//! [`LeakedProcess::found_by`]:
//!
//! 1. **A cgroup per sandbox**, where cgroups v2 are available (the unified hierarchy is
//!    mounted and conform may create groups in its own: typically as root). The thread that
//!    creates a sandbox (or calls [`Sandbox::enter`], or builds a step with
//!    [`Sandbox::invocation`]) sits in the sandbox's threaded cgroup, so every process it
//!    starts, and every descendant of those, however detached (setsid, double fork, a cleared
//!    environment), is in that cgroup, and is attributed to that sandbox exactly, with any
//!    number of scenarios at once (`-j N`). See `cgroup.rs` for the layout.
//! 2. **Child subreaper**, where cgroups are not available: conform marks itself with
//!    `PR_SET_CHILD_SUBREAPER`, so every orphan of the tool (a daemon's double fork, a
//!    grandchild whose parent exited) becomes conform's child instead of init's. An adopted
//!    orphan is told from a step by its process group and session (a step leads a group of
//!    its own in conform's session and can never leave it); conform kills it, and reaps it,
//!    as init would, at once on SIGCHLD when it ends by itself (only by pid, and never a
//!    step: the driver reaps its own). It is charged to the sandbox whose directory it works
//!    in, else to the only sandbox alive when it started; when neither tells (several
//!    sandboxes alive at its start, `-j N`, and it works elsewhere, e.g. a daemon that changed
//!    to `/`), it may be a worker another scenario still needs, so it is left alone until
//!    none of the sandboxes alive at its start lives, then killed as a leak of the run, not of
//!    a scenario, returned by [`end_of_run`] for the caller to report. An orphan that made a
//!    process group of its own without leaving conform's session looks like a step and is
//!    taken only while its sandbox is the only one alive. With `-j 1` every adoption is
//!    attributed exactly.
//! 3. **The marker**, always: every process a step starts inherits `CONFORM_SANDBOX=<id>`,
//!    and any process whose `/proc/<pid>/environ` holds the exact entry is the sandbox's,
//!    even one no longer descending from conform.
//!
//! [`isolation`] says which of the first two is in force (for a note of the run);
//! `CONFORM_ISOLATION=subreaper` ([`ISOLATION_VAR`]) skips cgroups, `=marker` both.
//! The scan tolerates processes that vanish mid-scan and processes it may not read (another
//! user's). Limits: a process running as another user is out of reach; with neither cgroups
//! nor the subreaper, one that cleared its environment is not found; a process that moves
//! itself to another cgroup (root can) leaves the first net; and what a tool has started by a
//! service outside conform's tree (a system daemon, `systemd-run`, `at`) is beyond every net.
//! After a SIGKILL of conform only the cgroup and the marker still find what it left (see
//! below): orphans that cleared their environment go to init then.
//!
//! Dropping a sandbox (or [`Sandbox::close`], which returns what could not be removed) always
//! sweeps, then removes the directory, unless [`Sandbox::keep`] was asked: then the directory
//! stays and its path is written to stderr. The removal ([`remove_tree`]) takes what a tool
//! may leave that `remove_dir_all` cannot: it unmounts what was mounted in the sandbox (never
//! descending into a mount, so a directory of the machine bind-mounted there is left
//! untouched), gives read-only directories back their owner's write permission, clears
//! immutable and append-only flags, follows no symbolic link, and removes the owner file last,
//! so that a sandbox it could not remove is still recognised, and removed, by the next run. A
//! removal that ran out of descriptors is tried again once the run is over
//! ([`remove_left_sandboxes`]).
//!
//! # Writes outside
//!
//! [`Places::look`], taken before and after each scenario, lists the entries directly inside
//! the places a tool may write to without being told (`/tmp`, conform's temporary directory,
//! the user's real home, ...); what changed between the looks is named in a note of the
//! scenario. What the look can and cannot see is in `outside.rs` and the manual.
//!
//! # Stale sandboxes
//!
//! A conform killed with SIGKILL leaves its sandboxes (and cgroups) behind. Every sandbox
//! holds an owner file ([`OWNER_FILE`]: conform's pid and start time, so a reused pid does
//! not pass for the owner). The first sandbox a conform makes in a directory removes there
//! every sandbox whose owner is gone, after killing what still carries its marker, and says
//! so on stderr ([`remove_stale_sandboxes`] does it on demand); run groups of conforms that
//! are gone are removed likewise, their processes killed. A sandbox of a live conform, a kept
//! one, or one without an owner file is never touched.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::exec::{self, Invocation, Outcome, Program, Termination};

mod cgroup;
mod outside;
mod procfs;
mod registry;
mod remove;
mod stale;
mod sweep;

pub use cgroup::Unavailable as CgroupUnavailable;
pub use outside::{ChangeKind, Look, OutsideChange, Places, ignore_outside};
pub use registry::{Isolation, end_of_run, isolation};
pub(crate) use registry::{kill_everything, release_everything};
pub use remove::{Left, remove_tree};
pub use stale::{OWNER_FILE, StaleSandbox, describe as describe_stale, remove_stale_sandboxes};
pub use sweep::{FoundBy, LeakedProcess, scan};

/// The name of the marker variable every step's environment carries.
pub const MARKER_VAR: &str = "CONFORM_SANDBOX";

/// The variable that chooses the isolation: unset (or `auto`) for cgroups where available,
/// `subreaper` to skip cgroups, `marker` to rely on the marker alone (see [`Isolation`]).
pub const ISOLATION_VAR: &str = "CONFORM_ISOLATION";

/// `PATH` given to steps when conform itself has none.
pub const FALLBACK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How much of a failed setup command's stderr an error quotes.
const SETUP_STDERR_TAIL: usize = 2000;

/// A fault while preparing or using a sandbox.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// A filesystem operation failed.
    #[error("failed to {action}: {source}")]
    Io {
        /// What was being attempted.
        action: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A directory to copy in holds more than conform copies.
    #[error(
        "{} holds more than {} files or {} MiB; give it a directory of its own with only what its probes need",
        dir.display(),
        limit.entries,
        limit.bytes / (1024 * 1024)
    )]
    TooLarge {
        /// The directory.
        dir: PathBuf,
        /// The bound it passed.
        limit: CopyLimit,
    },
    /// A fixture conform will not copy: no regular file or directory, or nested too deep.
    #[error("{} cannot be a fixture: {why}", path.display())]
    Unfit {
        /// The file.
        path: PathBuf,
        /// Why not.
        why: String,
    },
    /// The process driver failed (not the command it ran).
    #[error(transparent)]
    Exec(#[from] exec::ExecError),
    /// A setup command ran but did not succeed.
    #[error("failed to run setup command {command:?}: {termination:?}; stderr: {stderr_tail}")]
    SetupFailed {
        /// The command line.
        command: String,
        /// How it ended.
        termination: Termination,
        /// The end of what it wrote to stderr (lossy UTF-8).
        stderr_tail: String,
    },
}

fn io_error(action: impl Into<String>) -> impl FnOnce(io::Error) -> SandboxError {
    let action = action.into();
    move |source| SandboxError::Io { action, source }
}

/// A private directory and environment for one scenario (see the module docs).
#[derive(Debug)]
pub struct Sandbox {
    /// `None` once kept (the directory then outlives the sandbox).
    dir: Option<tempfile::TempDir>,
    root: PathBuf,
    marker: String,
    extra_env: BTreeMap<OsString, OsString>,
    removed_env: BTreeSet<OsString>,
    keep: bool,
}

impl Sandbox {
    /// A fresh sandbox under the system's temporary directory.
    pub fn new() -> Result<Self, SandboxError> {
        Self::new_in(std::env::temp_dir())
    }

    /// A fresh sandbox under `parent`. The first one in a directory first removes the stale
    /// sandboxes there (see the module docs). The calling thread moves into the sandbox's
    /// cgroup, when there are cgroups: the steps it starts are the sandbox's.
    pub fn new_in(parent: impl AsRef<Path>) -> Result<Self, SandboxError> {
        let parent = parent.as_ref();
        stale::remove_stale_once(parent);
        // Everything that can fail before the directory exists comes first: from the moment
        // it exists, a `Sandbox` owns it, whose removal outlasts a shortage of descriptors.
        let marker = random_id()?;
        let dir = tempfile::Builder::new()
            .prefix("conform-")
            .tempdir_in(parent)
            .map_err(io_error(format!("create a sandbox directory in {}", parent.display())))?;
        let root = dir.path().to_path_buf();
        let sandbox = Sandbox {
            dir: Some(dir),
            root,
            marker,
            extra_env: BTreeMap::new(),
            removed_env: BTreeSet::new(),
            keep: false,
        };
        for sub in [
            sandbox.home(),
            sandbox.work(),
            sandbox.tmp(),
            sandbox.config_home(),
            sandbox.data_home(),
            sandbox.state_home(),
            sandbox.cache_home(),
            sandbox.runtime_dir(),
        ] {
            fs::create_dir_all(&sub).map_err(io_error(format!("create {}", sub.display())))?;
        }
        let runtime = sandbox.runtime_dir();
        fs::set_permissions(&runtime, fs::Permissions::from_mode(0o700))
            .map_err(io_error(format!("restrict {}", runtime.display())))?;
        stale::write_owner(&sandbox.root, &sandbox.marker)
            .map_err(io_error(format!("write the owner file of {}", sandbox.root.display())))?;
        registry::register(&sandbox.marker, &sandbox.root);
        Ok(sandbox)
    }

    /// The sandbox's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `HOME` of every step.
    pub fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    /// The working directory of every step; fixtures land here.
    pub fn work(&self) -> PathBuf {
        self.root.join("work")
    }

    /// `TMPDIR` of every step.
    pub fn tmp(&self) -> PathBuf {
        self.root.join("tmp")
    }

    /// `XDG_CONFIG_HOME`.
    pub fn config_home(&self) -> PathBuf {
        self.home().join(".config")
    }

    /// `XDG_DATA_HOME`.
    pub fn data_home(&self) -> PathBuf {
        self.home().join(".local").join("share")
    }

    /// `XDG_STATE_HOME`.
    pub fn state_home(&self) -> PathBuf {
        self.home().join(".local").join("state")
    }

    /// `XDG_CACHE_HOME`.
    pub fn cache_home(&self) -> PathBuf {
        self.home().join(".cache")
    }

    /// `XDG_RUNTIME_DIR` (mode 0700, as the XDG spec wants).
    pub fn runtime_dir(&self) -> PathBuf {
        self.root.join("run")
    }

    /// The random id in [`MARKER_VAR`].
    pub fn marker(&self) -> &str {
        &self.marker
    }

    /// Adds (or replaces) a variable of every later step's environment. The marker itself
    /// cannot be overridden.
    pub fn set_env(&mut self, key: impl Into<OsString>, value: impl Into<OsString>) {
        let key = key.into();
        self.removed_env.remove(&key);
        self.extra_env.insert(key, value.into());
    }

    /// Removes a variable from every later step's environment (one of the defaults too, e.g.
    /// `LANG`). The marker cannot be removed.
    pub fn remove_env(&mut self, key: impl AsRef<OsStr>) {
        self.extra_env.remove(key.as_ref());
        self.removed_env.insert(key.as_ref().to_owned());
    }

    /// The complete environment of a step in this sandbox.
    pub fn env(&self) -> BTreeMap<OsString, OsString> {
        let mut env: BTreeMap<OsString, OsString> = BTreeMap::new();
        let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from(FALLBACK_PATH));
        env.insert("PATH".into(), path);
        env.insert("HOME".into(), self.home().into());
        env.insert("TMPDIR".into(), self.tmp().into());
        env.insert("XDG_CONFIG_HOME".into(), self.config_home().into());
        env.insert("XDG_DATA_HOME".into(), self.data_home().into());
        env.insert("XDG_STATE_HOME".into(), self.state_home().into());
        env.insert("XDG_CACHE_HOME".into(), self.cache_home().into());
        env.insert("XDG_RUNTIME_DIR".into(), self.runtime_dir().into());
        env.insert("LANG".into(), "C.UTF-8".into());
        for key in &self.removed_env {
            env.remove(key);
        }
        env.extend(self.extra_env.clone());
        env.insert(MARKER_VAR.into(), self.marker.clone().into());
        env
    }

    /// A step in this sandbox: its environment, `work/` as the working directory, and the
    /// defaults of [`Invocation::new`] (stdin closed). Like [`Sandbox::enter`], puts the calling
    /// thread in the sandbox's cgroup: run the step from this thread.
    pub fn invocation(&self, program: Program) -> Invocation {
        self.enter();
        Invocation::new(program, self.env(), self.work())
    }

    /// Puts the calling thread in the sandbox's cgroup (when there are cgroups), so that the
    /// processes it starts from now on are this sandbox's. [`Sandbox::new`] does it for the
    /// thread that creates the sandbox; a thread that runs steps of several sandboxes in turn,
    /// or steps built without [`Sandbox::invocation`], calls it before each sandbox's steps.
    pub fn enter(&self) {
        registry::enter(&self.marker);
    }

    /// Copies a fixture file or directory (recursively) to `dest`, a path relative to `work/`
    /// (an absolute `dest` is taken relative to `work/` as well). Returns where it landed.
    pub fn copy_in(
        &self,
        source: impl AsRef<Path>,
        dest: impl AsRef<Path>,
    ) -> Result<PathBuf, SandboxError> {
        let source = source.as_ref();
        let relative: PathBuf = dest
            .as_ref()
            .components()
            .filter(|c| matches!(c, std::path::Component::Normal(_)))
            .collect();
        let target = self.work().join(relative);
        copy_recursively(source, &target)?;
        Ok(target)
    }

    /// Copies the contents of `dir` into `work/`, bounded by `limit`, and returns what it left
    /// out. A symbolic link is never followed nor copied (it could lead anywhere, and conform
    /// writes only what it made); neither are `.git` nor conform's own sandboxes (`conform-*`
    /// directories, which a `TMPDIR` inside `dir` puts there), nor a directory holding this
    /// sandbox. Anything else that is not a regular file or a directory is left out too.
    pub fn copy_dir_contents(
        &self,
        dir: &Path,
        limit: CopyLimit,
    ) -> Result<Vec<PathBuf>, SandboxError> {
        let mut budget = CopyBudget { limit, entries: 0, bytes: 0, dir: dir.to_path_buf() };
        let mut left_out = Vec::new();
        let root = fs::canonicalize(&self.root).unwrap_or_else(|_| self.root.clone());
        copy_tree(dir, &self.work(), &root, &mut budget, &mut left_out)?;
        Ok(left_out)
    }

    /// Runs a setup command line (`sh -c`) in the sandbox, stdin closed, bounded by `timeout`.
    /// A non-zero exit, a signal or a timeout is [`SandboxError::SetupFailed`].
    pub fn run_setup(&self, command: &str, timeout: Duration) -> Result<Outcome, SandboxError> {
        self.run_setup_with(command, &[], timeout)
    }

    /// [`Sandbox::run_setup`] with these variables added to the sandbox's environment.
    pub fn run_setup_with(
        &self,
        command: &str,
        env: &[(OsString, OsString)],
        timeout: Duration,
    ) -> Result<Outcome, SandboxError> {
        let mut invocation = self.invocation(Program::Shell(command.to_owned()));
        invocation.env.extend(env.iter().cloned());
        invocation.timeout = timeout;
        let outcome = exec::run(&invocation)?;
        if outcome.termination == Termination::Exited(0) {
            return Ok(outcome);
        }
        let stderr = &outcome.stderr.bytes;
        let tail = stderr.get(stderr.len().saturating_sub(SETUP_STDERR_TAIL)..).unwrap_or_default();
        Err(SandboxError::SetupFailed {
            command: command.to_owned(),
            termination: outcome.termination,
            stderr_tail: String::from_utf8_lossy(tail).into_owned(),
        })
    }

    /// Keeps the directory when the sandbox is dropped (for `--keep` and debugging); returns
    /// its path. Leaked processes are still killed. A kept sandbox has no owner file, so no
    /// later run takes it for a stale one.
    pub fn keep(&mut self) -> &Path {
        if !self.keep {
            stale::forget_owner(&self.root);
        }
        self.keep = true;
        &self.root
    }

    /// Finds, kills and returns every process of this sandbox still running: in its cgroup,
    /// carrying its marker, or adopted and attributed to it (see the module docs). conform
    /// itself, and its other sandboxes' processes, are never included.
    pub fn sweep(&self) -> Vec<LeakedProcess> {
        registry::sweep(&self.marker)
    }
}

impl Sandbox {
    /// Ends the sandbox: sweeps it, then removes its directory (unless kept) whatever the tool
    /// left in it (see `remove.rs`: read-only directories, immutable files, mounts). `Err` is
    /// what could not be removed, for the caller to report; a removal that ran short of
    /// conform's own descriptors is tried again by [`remove_left_sandboxes`] instead.
    pub fn close(mut self) -> Result<(), Left> {
        self.end()
    }

    fn end(&mut self) -> Result<(), Left> {
        let Some(dir) = self.dir.take() else { return Ok(()) };
        let _ = self.sweep();
        registry::unregister(&self.marker);
        // Disarmed: conform removes the directory itself.
        let root = dir.keep();
        if self.keep {
            eprintln!("conform: kept the sandbox at {}", root.display());
            return Ok(());
        }
        remove::remove_sandbox(&root)
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if let Err(left) = self.end() {
            eprintln!(
                "conform: failed to remove the sandbox {}: {}; the next conform run removes it",
                self.root.display(),
                crate::inert::line(&left.to_string())
            );
        }
    }
}

/// Once the run is over: removes the sandboxes whose removal ran short of conform's own
/// resources (descriptors under a low `ulimit -n`, with many scenarios at once), and returns
/// those that still stay (their owner files stay too: the next run removes them).
pub fn remove_left_sandboxes() -> Vec<Left> {
    remove::retry_pending()
}

/// 128 random bits, hex.
fn random_id() -> Result<String, SandboxError> {
    let mut bytes = [0_u8; 16];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(io_error("read /dev/urandom for the sandbox marker"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// How much [`Sandbox::copy_dir_contents`] copies at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyLimit {
    /// Files and directories.
    pub entries: usize,
    /// Bytes of the files together.
    pub bytes: u64,
}

/// What a copy has used of its limit so far.
struct CopyBudget {
    limit: CopyLimit,
    entries: usize,
    bytes: u64,
    dir: PathBuf,
}

impl CopyBudget {
    fn take(&mut self, bytes: u64) -> Result<(), SandboxError> {
        self.entries += 1;
        self.bytes = self.bytes.saturating_add(bytes);
        if self.entries > self.limit.entries || self.bytes > self.limit.bytes {
            return Err(SandboxError::TooLarge { dir: self.dir.clone(), limit: self.limit });
        }
        Ok(())
    }
}

/// The entries of `source` into `target` (an existing directory), without following links.
fn copy_tree(
    source: &Path,
    target: &Path,
    sandbox_root: &Path,
    budget: &mut CopyBudget,
    left_out: &mut Vec<PathBuf>,
) -> Result<(), SandboxError> {
    let entries = fs::read_dir(source).map_err(io_error(format!("list {}", source.display())))?;
    let mut entries: Vec<fs::DirEntry> = entries
        .collect::<Result<_, _>>()
        .map_err(io_error(format!("list {}", source.display())))?;
    entries.sort_by_key(fs::DirEntry::file_name);
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name();
        // `symlink_metadata`: the entry itself, never what a link points at.
        let meta =
            fs::symlink_metadata(&path).map_err(io_error(format!("read {}", path.display())))?;
        let holds_sandbox =
            fs::canonicalize(&path).is_ok_and(|real| sandbox_root.starts_with(&real));
        let ours = meta.is_dir()
            && (name == ".git" || name.to_string_lossy().starts_with("conform-") || holds_sandbox);
        if ours || !(meta.is_dir() || meta.is_file()) {
            left_out.push(path);
            continue;
        }
        let dest = target.join(&name);
        if meta.is_dir() {
            budget.take(0)?;
            fs::create_dir(&dest).map_err(io_error(format!("create {}", dest.display())))?;
            copy_tree(&path, &dest, sandbox_root, budget, left_out)?;
        } else {
            budget.take(meta.len())?;
            copy_file_new(&path, &dest)?;
        }
    }
    Ok(())
}

/// Copies a regular file to a path that must not exist yet (so nothing there, a link least of
/// all, is written through), keeping its permission bits.
fn copy_file_new(source: &Path, dest: &Path) -> Result<(), SandboxError> {
    let action = || format!("copy {} to {}", source.display(), dest.display());
    let mut from = fs::File::open(source).map_err(io_error(action()))?;
    let mode = from.metadata().map_err(io_error(action()))?.permissions().mode();
    let mut to = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dest)
        .map_err(io_error(action()))?;
    io::copy(&mut from, &mut to).map_err(io_error(action()))?;
    to.set_permissions(fs::Permissions::from_mode(mode & 0o777)).map_err(io_error(action()))?;
    Ok(())
}

/// How deep a fixture directory is copied at most: deeper is a link that leads back up.
const FIXTURE_DEPTH: usize = 64;

/// Copies a fixture: a regular file, or a directory of them (links the profile's files hold
/// are followed, as the vendor named them). A FIFO, a device or a socket is refused, since
/// copying one would block or never end (`/dev/zero`), and so is a tree deeper than
/// [`FIXTURE_DEPTH`] (a link to a directory above).
fn copy_recursively(source: &Path, target: &Path) -> Result<(), SandboxError> {
    copy_fixture(source, target, 0)
}

fn copy_fixture(source: &Path, target: &Path, depth: usize) -> Result<(), SandboxError> {
    let meta = fs::metadata(source).map_err(io_error(format!("read {}", source.display())))?;
    if depth > FIXTURE_DEPTH {
        return Err(SandboxError::Unfit {
            path: source.to_owned(),
            why: format!(
                "nested deeper than {FIXTURE_DEPTH} directories (a link leading back up?)"
            ),
        });
    }
    if !meta.is_dir() && !meta.is_file() {
        return Err(SandboxError::Unfit {
            path: source.to_owned(),
            why: format!(
                "a {}, not a regular file or a directory",
                crate::input::kind_of(meta.file_type())
            ),
        });
    }
    if meta.is_dir() {
        fs::create_dir_all(target).map_err(io_error(format!("create {}", target.display())))?;
        let entries =
            fs::read_dir(source).map_err(io_error(format!("list {}", source.display())))?;
        for entry in entries {
            let entry = entry.map_err(io_error(format!("list {}", source.display())))?;
            copy_fixture(&entry.path(), &target.join(entry.file_name()), depth + 1)?;
        }
    } else {
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(io_error(format!("create {}", parent.display())))?;
        }
        fs::copy(source, target).map_err(io_error(format!(
            "copy {} to {}",
            source.display(),
            target.display()
        )))?;
    }
    Ok(())
}
