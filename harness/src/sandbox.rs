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
//!
//! The environment of every step ([`Sandbox::env`]) is built from scratch: those variables,
//! `PATH` as conform itself got it, `LANG=C.UTF-8`, the extra variables the profile or scenario
//! asked for ([`Sandbox::set_env`]), and last, so nothing can override it, the marker
//! `CONFORM_SANDBOX=<random id>` ([`MARKER_VAR`]). Nothing else of conform's environment is
//! passed on.
//!
//! # Leaks
//!
//! Every process a scenario starts, and every descendant of those, inherits the marker. When
//! the scenario is over, [`Sandbox::sweep`] scans `/proc/<pid>/environ` of every process for the
//! exact marker entry, SIGKILLs each one found and its process group (never conform's own), and
//! returns them as [`LeakedProcess`] facts, so that the caller can report a leak as a finding.
//! The scan tolerates processes that vanish mid-scan and processes it may not read (another
//! user's); it repeats until a pass finds nothing new, so a process that forks while being
//! killed is caught too.
//!
//! Limits: a process that rewrote or cleared its own environment block (rare; some daemons do
//! it to change their title), or one that runs under another user and is unreadable, cannot be
//! recognised this way and is not found.
//!
//! Dropping a sandbox always sweeps, then removes the directory, unless [`Sandbox::keep`] was
//! asked: then the directory stays and its path is written to stderr.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::exec::{self, Invocation, Outcome, Program, Termination};

mod sweep;

pub use sweep::{LeakedProcess, scan};

/// The name of the marker variable every step's environment carries.
pub const MARKER_VAR: &str = "CONFORM_SANDBOX";

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

    /// A fresh sandbox under `parent`.
    pub fn new_in(parent: impl AsRef<Path>) -> Result<Self, SandboxError> {
        let parent = parent.as_ref();
        let dir = tempfile::Builder::new()
            .prefix("conform-")
            .tempdir_in(parent)
            .map_err(io_error(format!("create a sandbox directory in {}", parent.display())))?;
        let root = dir.path().to_path_buf();
        let sandbox = Sandbox {
            dir: Some(dir),
            root,
            marker: random_id()?,
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
    /// defaults of [`Invocation::new`] (stdin closed).
    pub fn invocation(&self, program: Program) -> Invocation {
        Invocation::new(program, self.env(), self.work())
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
    /// its path. Leaked processes are still killed.
    pub fn keep(&mut self) -> &Path {
        self.keep = true;
        &self.root
    }

    /// Finds, kills and returns every process still carrying this sandbox's marker (see the
    /// module docs). conform itself is never included.
    pub fn sweep(&self) -> Vec<LeakedProcess> {
        sweep::sweep(&self.marker)
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = self.sweep();
        if self.keep {
            if let Some(dir) = self.dir.take() {
                let kept = dir.keep();
                eprintln!("conform: kept the sandbox at {}", kept.display());
            }
        }
        // Otherwise dropping `dir` removes the directory.
    }
}

/// 128 random bits, hex.
fn random_id() -> Result<String, SandboxError> {
    let mut bytes = [0_u8; 16];
    fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(io_error("read /dev/urandom for the sandbox marker"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn copy_recursively(source: &Path, target: &Path) -> Result<(), SandboxError> {
    let meta = fs::metadata(source).map_err(io_error(format!("read {}", source.display())))?;
    if meta.is_dir() {
        fs::create_dir_all(target).map_err(io_error(format!("create {}", target.display())))?;
        let entries =
            fs::read_dir(source).map_err(io_error(format!("list {}", source.display())))?;
        for entry in entries {
            let entry = entry.map_err(io_error(format!("list {}", source.display())))?;
            copy_recursively(&entry.path(), &target.join(entry.file_name()))?;
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
