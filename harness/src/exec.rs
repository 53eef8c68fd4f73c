//! Stage: exec. Runs one step of a scenario as a real process and captures what it did.
//!
//! Every step runs in its own process group with a bounded time and bounded capture, so a
//! hostile tool (one that hangs, floods stdout, ignores SIGTERM or forks away) cannot hold or
//! exhaust conform. This file fixes the interface between the driver and the rest of the
//! harness; the driver itself (spawning, pseudo-terminals, capture, kills) lives here and in
//! the submodules `pump` (the I/O loop) and `terminal` (pseudo-terminals).
//!
//! # What a step guarantees
//!
//! A step is one [`Invocation`]: a program (an argument vector, or a command line run as
//! `/bin/sh -c <line>`), a complete environment, a working directory, a way to wire stdin, a
//! timeout and a capture limit. [`run`] executes it and returns an [`Outcome`]; [`spawn`] starts
//! it and returns a [`Running`] handle, for steps that run beside others or whose caller is
//! killed midway.
//!
//! - **Isolation.** The process starts in a process group of its own (its process group id is
//!   its pid, [`Outcome::pid`]), with exactly the environment of [`Invocation::env`] (nothing of
//!   conform's leaks in) and in [`Invocation::cwd`].
//! - **Stdin.** [`StdinMode::Closed`] is `/dev/null`. [`StdinMode::Bytes`] is a pipe fed by the
//!   driver without blocking and closed once everything is written, so a tool that never reads
//!   cannot stall conform. [`StdinMode::OpenPipe`] is a pipe held open, never written, until the
//!   step ends. [`StdinMode::Pty`] is the slave side of a fresh pseudo-terminal (`isatty(0)` is
//!   true; it is not made the controlling terminal, and its window size is 0×0); the driver
//!   keeps the master side open until the step ends and drains and drops whatever the tool
//!   writes to its terminal. Nobody types: a read from it waits. After the step, a descendant
//!   that kept the terminal as its stdin reads an error (the master is closed), no SIGHUP.
//! - **Capture.** stdout and stderr are pipes read until end-of-file. Of each, the first
//!   [`Invocation::capture_limit`] bytes are kept and the rest is counted
//!   ([`Captured::total_len`]) and dropped: the tool never blocks on a full pipe and conform's
//!   memory stays bounded whatever the tool prints. Bytes are kept as they came, UTF-8 or not.
//! - **Timeout.** When [`Invocation::timeout`] passes and the process has not exited, the whole
//!   process group gets SIGTERM, and SIGKILL after [`Graces::kill`] (default
//!   [`DEFAULT_KILL_GRACE`]), or at once when the leader exits earlier, so that a descendant
//!   ignoring SIGTERM dies as well. The termination is then [`Termination::TimedOut`], whatever
//!   the exit status was.
//! - **Exit.** A process that exits by itself gives [`Termination::Exited`]; one ended by a
//!   signal gives [`Termination::Signaled`] (also when the signal came from
//!   [`Running::kill_group`]: the caller knows what it sent). The process is always reaped.
//!   A normal exit does not kill the rest of the group: what the tool left running is found by
//!   the sandbox's sweep (`crate::sandbox`), which reports it as a leak.
//! - **Timing.** [`Outcome::elapsed`] runs from spawn to the exit of the process conform
//!   started. [`Outcome::pipes_closed_after`] runs from spawn to end-of-file on both stdout and
//!   stderr. After the exit the driver waits for end-of-file at most [`Graces::pipes`] (default
//!   [`DEFAULT_PIPE_GRACE`]); if a descendant still holds a pipe by then, the driver stops
//!   reading, closes its ends and reports `None`: the caller was not released. A detached
//!   grandchild can therefore never make a step hang.
//! - **Line signals.** [`spawn_watched`] also counts the newlines of stdout as the pump reads
//!   them (kept or not) and sends a [`LineSignal`] to the started process alone (not its group)
//!   once that many were read, at most once and never after the exit is known;
//!   [`Outcome::line_signal_sent_after`] says whether and when. Nothing else changes: the
//!   timeout, caps and graces are those of any step, and a stream ending before its line is
//!   never signalled.
//! - **Bounds.** A step therefore ends at the latest after `timeout + kill grace + pipe grace`
//!   (plus scheduling noise), and holds at most two capture buffers of `capture_limit` bytes.
//!
//! Faults of the driver itself (the program cannot be spawned, a pipe cannot be made) are an
//! [`ExecError`]; everything the tool did is data in the [`Outcome`].
//!
//! The driver is threads plus `poll(2)`: one thread per step pumps the pipes and enforces the
//! deadlines, and one blocks in `waitid(WNOWAIT)` to learn of the exit without reaping, so that
//! the process group id stays reserved (and signalling it stays safe) until the pump reaps the
//! leader at the very end. No async runtime.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

mod pump;
mod terminal;
pub mod usage;

/// What the step runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// An argument vector; `argv[0]` is the program (a path or a name looked up in `PATH`).
    Argv(Vec<OsString>),
    /// A command line run verbatim as `sh -c <line>`: how an agent runs `continue_command`.
    Shell(String),
}

impl Program {
    /// An argument vector from anything string-like: `Program::argv(["tool", "manifest"])`.
    pub fn argv<I, S>(args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Program::Argv(args.into_iter().map(Into::into).collect())
    }

    /// A short human description (the program name, or the shell line), for error messages.
    pub fn describe(&self) -> String {
        match self {
            Program::Argv(argv) => argv
                .first()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_else(|| "<empty argv>".to_owned()),
            Program::Shell(line) => format!("{SHELL} -c {line:?}"),
        }
    }
}

/// The shell that runs [`Program::Shell`] lines.
pub const SHELL: &str = "/bin/sh";

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

/// Default [`Invocation::timeout`] of [`Invocation::new`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Default [`Invocation::capture_limit`] of [`Invocation::new`]: 4 MiB per stream.
pub const DEFAULT_CAPTURE_LIMIT: usize = 4 << 20;

impl Invocation {
    /// A step with stdin closed, [`DEFAULT_TIMEOUT`] and [`DEFAULT_CAPTURE_LIMIT`]; adjust the
    /// public fields as needed.
    pub fn new(program: Program, env: BTreeMap<OsString, OsString>, cwd: PathBuf) -> Self {
        Invocation {
            program,
            env,
            cwd,
            stdin: StdinMode::Closed,
            timeout: DEFAULT_TIMEOUT,
            capture_limit: DEFAULT_CAPTURE_LIMIT,
        }
    }
}

/// Default [`Graces::kill`]: SIGTERM to SIGKILL after a timeout.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(1);

/// Default [`Graces::pipes`]: how long after the exit conform still waits for end-of-file on
/// stdout and stderr before it declares that the caller was not released.
pub const DEFAULT_PIPE_GRACE: Duration = Duration::from_secs(2);

/// The driver's patience, beside the step's own timeout. [`run`] and [`spawn`] use the defaults;
/// [`run_with`] and [`spawn_with`] take others (a scenario that measures release may want a
/// longer pipe grace, a test a shorter one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Graces {
    /// After the timeout's SIGTERM, how long the process group has before SIGKILL.
    pub kill: Duration,
    /// After the started process exits, how long conform keeps reading stdout and stderr while
    /// some descendant still holds them open.
    pub pipes: Duration,
}

impl Default for Graces {
    fn default() -> Self {
        Graces { kill: DEFAULT_KILL_GRACE, pipes: DEFAULT_PIPE_GRACE }
    }
}

/// How the process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// It exited by itself with this code.
    Exited(i32),
    /// It was ended by this signal, not sent by conform's timeout (a signal sent through
    /// [`Running::kill_group`] or [`Running::signal`] shows here too).
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
    /// When the process was spawned: the instant every duration of the outcome runs from.
    pub started: std::time::Instant,
    /// From spawn to the exit of the process conform started.
    pub elapsed: Duration,
    /// From spawn to end-of-file on both stdout and stderr. `None` when the pipes were still
    /// open when conform stopped waiting for them (some descendant kept them): the caller was
    /// not released.
    pub pipes_closed_after: Option<Duration>,
    /// The process id of the process conform started.
    pub pid: u32,
    /// What it cost the machine (its CPU time, its wait for a CPU), read as it exited; `None`
    /// where the kernel keeps no scheduler statistics.
    pub usage: Option<usage::ProcessUsage>,
    /// How many newline bytes the process wrote to stdout (kept or not).
    pub stdout_lines: u64,
    /// When the [`LineSignal`] of [`spawn_watched`] was sent, from spawn; `None` when there was
    /// none or the stream ended before its line.
    pub line_signal_sent_after: Option<Duration>,
}

/// A signal for the started process (not its group) once this many lines of stdout were read:
/// how an agent interrupts a stream it has seen enough of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineSignal {
    /// Lines (newline bytes) of stdout read before the signal goes.
    pub after_lines: u64,
    /// The signal.
    pub signal: Signal,
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

impl ExecError {
    fn new(action: impl Into<String>, source: impl Into<std::io::Error>) -> Self {
        ExecError { action: action.into(), source: source.into() }
    }
}

/// Runs one step to its end (see the module docs for what that guarantees).
pub fn run(invocation: &Invocation) -> Result<Outcome, ExecError> {
    run_with(invocation, Graces::default())
}

/// [`run`] with other graces.
pub fn run_with(invocation: &Invocation, graces: Graces) -> Result<Outcome, ExecError> {
    spawn_with(invocation, graces)?.wait()
}

/// Starts one step and returns at once; the step is pumped in the background (its pipes are
/// drained, its timeout enforced) until [`Running::wait`] collects the outcome.
pub fn spawn(invocation: &Invocation) -> Result<Running, ExecError> {
    spawn_with(invocation, Graces::default())
}

/// [`spawn`] with other graces.
pub fn spawn_with(invocation: &Invocation, graces: Graces) -> Result<Running, ExecError> {
    start(invocation, graces, None)
}

/// [`spawn_with`], and the pump sends `line_signal` to the started process as soon as it has
/// read that many lines of stdout (counted as the bytes arrive, kept or not); the outcome says
/// whether and when it was sent. Caps, timeout and graces are those of any step.
pub fn spawn_watched(
    invocation: &Invocation,
    graces: Graces,
    line_signal: LineSignal,
) -> Result<Running, ExecError> {
    start(invocation, graces, Some(line_signal))
}

fn start(
    invocation: &Invocation,
    graces: Graces,
    line_signal: Option<LineSignal>,
) -> Result<Running, ExecError> {
    let group = Arc::new(Mutex::new(GroupState { reaped: false }));
    let (pid, pump) = pump::start(invocation, graces, line_signal, Arc::clone(&group))?;
    Ok(Running { pid, group, pump: Some(pump) })
}

/// Whether the started process has been reaped; guards every signal so that none can reach a
/// recycled pid or process group id.
#[derive(Debug)]
struct GroupState {
    reaped: bool,
}

/// A step in progress, from [`spawn`].
///
/// Dropping it without [`Running::wait`] abandons the step: its process group gets SIGKILL and
/// the background pump ends on its own within the pipe grace.
#[derive(Debug)]
pub struct Running {
    pid: u32,
    group: Arc<Mutex<GroupState>>,
    pump: Option<JoinHandle<Result<Outcome, ExecError>>>,
}

impl Running {
    /// The pid of the started process, which is also its process group id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends `signal` to the step's whole process group (what a terminal does to a foreground
    /// job, or an agent killing its own call). Descendants that moved to another process group
    /// or session are not reached, by design. A no-op once the step has been reaped.
    pub fn kill_group(&self, signal: Signal) -> Result<(), ExecError> {
        self.send(signal, true)
    }

    /// Sends `signal` to the started process only (e.g. SIGTERM to the front process of a
    /// detaching tool). A no-op once the step has been reaped.
    pub fn signal(&self, signal: Signal) -> Result<(), ExecError> {
        self.send(signal, false)
    }

    fn send(&self, signal: Signal, whole_group: bool) -> Result<(), ExecError> {
        let state = self.group.lock().unwrap_or_else(PoisonError::into_inner);
        if state.reaped {
            return Ok(());
        }
        let pid = pid_of(self.pid);
        let sent = if whole_group { killpg(pid, signal) } else { kill(pid, signal) };
        match sent {
            Ok(()) | Err(Errno::ESRCH) => Ok(()),
            Err(errno) => {
                Err(ExecError::new(format!("send {signal} to process {}", self.pid), errno))
            }
        }
    }

    /// Waits for the step to end (bounded by its timeout and the graces) and returns what it
    /// did.
    pub fn wait(mut self) -> Result<Outcome, ExecError> {
        let Some(pump) = self.pump.take() else {
            return Err(ExecError::new(
                "wait for the step",
                std::io::Error::other("the step was already collected"),
            ));
        };
        pump.join().unwrap_or_else(|_| {
            Err(ExecError::new(
                "wait for the step",
                std::io::Error::other("the driver thread panicked"),
            ))
        })
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.pump.is_some() {
            // An abandoned step must not run on: kill it; the pump then reaps it by itself.
            let _ = self.kill_group(Signal::SIGKILL);
        }
    }
}

/// A pid as nix wants it. Pids always fit in an i32 on Linux; a value that does not would be a
/// driver bug, and mapping it to an impossible pid makes every signal fail with ESRCH instead of
/// reaching some other process.
fn pid_of(pid: u32) -> Pid {
    Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX))
}
