//! Stage: exec. Runs one step of a scenario as a real process and captures what it did.
//!
//! Every step runs in its own process group with a bounded time and bounded capture, so a
//! hostile tool (one that hangs, floods stdout, ignores SIGTERM or forks away) cannot hold or
//! exhaust conform. This file fixes the interface between the driver and the rest of the
//! harness; the driver itself (spawning, pseudo-terminals, capture, kills) lives here too.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// What the step runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// An argument vector; `argv[0]` is the program (a path or a name looked up in `PATH`).
    Argv(Vec<OsString>),
    /// A command line run verbatim as `sh -c <line>`: how an agent runs `continue_command`.
    Shell(String),
}

/// How the step's standard input is wired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdinMode {
    /// Connected to `/dev/null`: reads see end-of-file at once.
    Closed,
    /// A pipe that receives these bytes and is then closed.
    Bytes(Vec<u8>),
    /// A pipe that is held open and never written, until the step ends (an agent that forgot
    /// to close stdin). A tool that waits for input hangs here.
    OpenPipe,
    /// A real pseudo-terminal: stdin is the pty's slave side, so `isatty(0)` is true.
    /// stdout and stderr stay pipes and are captured as usual.
    Pty,
}

/// Everything needed to run one step.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// What to run.
    pub program: Program,
    /// The complete environment of the process (it does not inherit conform's).
    pub env: BTreeMap<OsString, OsString>,
    /// The working directory.
    pub cwd: PathBuf,
    /// How stdin is wired.
    pub stdin: StdinMode,
    /// After this long the whole process group is killed (SIGTERM, then SIGKILL after a grace).
    pub timeout: Duration,
    /// At most this many bytes of stdout and, separately, of stderr are kept; the rest is read
    /// and counted but dropped, so the process never blocks on a full pipe.
    pub capture_limit: usize,
}

/// How the process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// It exited by itself with this code.
    Exited(i32),
    /// It was ended by this signal, not sent by conform.
    Signaled(i32),
    /// It outlived [`Invocation::timeout`] and conform killed its process group.
    TimedOut,
}

/// One captured output stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Captured {
    /// The first [`Invocation::capture_limit`] bytes.
    pub bytes: Vec<u8>,
    /// How many bytes the process wrote in all.
    pub total_len: u64,
}

impl Captured {
    /// Whether more was written than kept.
    pub fn truncated(&self) -> bool {
        self.total_len > self.bytes.len() as u64
    }
}

/// What one step did.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// How the process ended.
    pub termination: Termination,
    /// Its standard output.
    pub stdout: Captured,
    /// Its standard error.
    pub stderr: Captured,
    /// From spawn to the exit of the process conform started.
    pub elapsed: Duration,
    /// From spawn to end-of-file on both stdout and stderr. `None` when the pipes were still
    /// open when conform stopped waiting for them (some descendant kept them): the caller was
    /// not released.
    pub pipes_closed_after: Option<Duration>,
    /// The process id of the process conform started.
    pub pid: u32,
}

/// A fault of the driver itself (not of the tool under test).
#[derive(Debug, thiserror::Error)]
#[error("failed to {action}: {source}")]
pub struct ExecError {
    /// What was being attempted, e.g. "spawn /path/to/tool".
    pub action: String,
    /// The underlying error.
    #[source]
    pub source: std::io::Error,
}
