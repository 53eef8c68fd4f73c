//! The I/O loop of one step: spawns the process, then drains its pipes, feeds its stdin and
//! enforces its deadlines with `poll(2)` until it has exited and its pipes are closed (or the
//! pipe grace is over), and finally reaps it.
//!
//! Two threads per step, both created before the process so that a failure to create them
//! leaves nothing running:
//! - the *waiter* blocks in `waitid(WEXITED | WNOWAIT)`: it learns of the exit without reaping,
//!   so the pid and process group id stay reserved for signals, then records the instant and
//!   writes a byte to a wake-up pipe that the pump polls;
//! - the *pump* owns everything else and reaps the process as its very last act, under the
//!   [`GroupState`] lock that every signal takes.
//!
//! Every descriptor is created close-on-exec, so steps started concurrently never inherit each
//! other's pipes; conform's own ends are non-blocking, so a read or write never stalls the loop.
//! Writing to a stdin whose reader is gone relies on SIGPIPE being ignored, as the Rust runtime
//! does for every Rust `main` (the error EPIPE then just closes our end).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{Id, WaitPidFlag, waitid};
use nix::unistd::pipe2;

use super::usage;
use super::{
    Captured, ExecError, Graces, GroupState, Invocation, LineSignal, Outcome, Program, SHELL,
    StdinMode, Termination, pid_of, terminal,
};

/// How much one `read` takes: a whole default pipe buffer.
const READ_CHUNK: usize = 64 * 1024;

/// Reads per stream per wake-up, so that a flooding stream cannot starve the deadline checks.
const READS_PER_WAKE: usize = 16;

/// The longest the loop sleeps without looking at the clock (it has nothing else to do then,
/// e.g. after SIGKILL while the kernel tears the process down).
const TICK: Duration = Duration::from_secs(1);

type Collected = Result<Outcome, ExecError>;

/// What the waiter learns of the exit.
struct Exited {
    /// When it saw it.
    at: Instant,
    /// What the process cost (see [`usage`]).
    usage: Option<usage::ProcessUsage>,
}

/// Spawns the step and its pump; returns the pid and the pump's handle.
pub(super) fn start(
    invocation: &Invocation,
    graces: Graces,
    line_signal: Option<LineSignal>,
    group: Arc<Mutex<GroupState>>,
) -> Result<(u32, JoinHandle<Collected>), ExecError> {
    let what = invocation.program.describe();
    let mut command = match &invocation.program {
        Program::Argv(argv) => {
            let Some((program, args)) = argv.split_first() else {
                return Err(ExecError::new(
                    "spawn a step",
                    io::Error::new(io::ErrorKind::InvalidInput, "the argument vector is empty"),
                ));
            };
            let mut command = Command::new(program);
            command.args(args);
            command
        }
        Program::Shell(line) => {
            let mut command = Command::new(SHELL);
            command.arg("-c").arg(line);
            command
        }
    };
    command.env_clear().envs(&invocation.env).current_dir(&invocation.cwd).process_group(0);

    let (stdout_read, stdout_write) = nonblocking_pipe("stdout")?;
    let (stderr_read, stderr_write) = nonblocking_pipe("stderr")?;
    command.stdout(Stdio::from(stdout_write));
    command.stderr(Stdio::from(stderr_write));
    let stdin = match &invocation.stdin {
        StdinMode::Closed => {
            command.stdin(Stdio::null());
            StdinSide::Nothing
        }
        StdinMode::Bytes(data) => {
            let (read, write) = pipe_for("stdin")?;
            set_nonblocking(&write, "stdin")?;
            command.stdin(Stdio::from(read));
            if data.is_empty() {
                // Dropping our end now gives the tool end-of-file at once.
                StdinSide::Nothing
            } else {
                StdinSide::Feed { pipe: Some(File::from(write)), data: data.clone(), written: 0 }
            }
        }
        StdinMode::OpenPipe => {
            let (read, write) = pipe_for("stdin")?;
            command.stdin(Stdio::from(read));
            StdinSide::Hold(write)
        }
        StdinMode::Pty => {
            let pair = terminal::open().map_err(|e| ExecError::new("open a pseudo-terminal", e))?;
            set_nonblocking(&pair.master, "the pseudo-terminal")?;
            command.stdin(Stdio::from(pair.slave));
            StdinSide::Terminal { master: File::from(pair.master), draining: true }
        }
    };
    let (wake_read, wake_write) = pipe_for("exit notice")?;

    // Both threads exist before the process does.
    let (pid_tx, pid_rx) = mpsc::channel::<u32>();
    let (exit_tx, exit_rx) = mpsc::channel::<Exited>();
    thread::Builder::new()
        .name("conform-exec-waiter".to_owned())
        .spawn(move || {
            let Ok(pid) = pid_rx.recv() else { return };
            wait_for_exit(pid);
            let at = Instant::now();
            // Exited, not yet reaped: what it cost is still readable.
            let usage = usage::read(pid);
            if let Some(usage) = usage {
                usage::record(usage);
            }
            let _ = exit_tx.send(Exited { at, usage });
            // A byte, not just the close: the close alone would never be seen if some process
            // had inherited the write end.
            let _ = File::from(wake_write).write_all(b"x");
        })
        .map_err(|e| ExecError::new("start the exit waiter thread", e))?;
    let (pump_tx, pump_rx) = mpsc::channel::<Pump>();
    let pump = thread::Builder::new()
        .name("conform-exec-pump".to_owned())
        .spawn(move || match pump_rx.recv() {
            Ok(pump) => pump.run(),
            Err(_) => {
                Err(ExecError::new("pump the step", io::Error::other("the step never started")))
            }
        })
        .map_err(|e| ExecError::new("start the pump thread", e))?;

    let started = Instant::now();
    let child = command.spawn().map_err(|e| ExecError::new(format!("spawn {what}"), e))?;
    // The child's ends of the pipes and the terminal's slave live in `command`: close them in
    // conform, or end-of-file would never come.
    drop(command);
    let pid = child.id();
    let state = Pump {
        child,
        pid,
        started,
        timeout: invocation.timeout,
        graces,
        stdout: Stream::new(stdout_read, invocation.capture_limit),
        stderr: Stream::new(stderr_read, invocation.capture_limit),
        stdin,
        wake: Some(File::from(wake_read)),
        exit_rx,
        usage: None,
        group,
        line_signal,
        line_signal_sent_at: None,
    };
    // Neither send can fail: both threads are alive and waiting for exactly this message.
    let _ = pid_tx.send(pid);
    if let Err(mpsc::SendError(mut state)) = pump_tx.send(state) {
        state.signal_group(Signal::SIGKILL);
        let _ = state.reap();
        return Err(ExecError::new(
            "hand the step to its pump",
            io::Error::other("the pump thread is gone"),
        ));
    }
    Ok((pid, pump))
}

/// Blocks until `pid` has exited, without reaping it.
fn wait_for_exit(pid: u32) {
    loop {
        match waitid(Id::Pid(pid_of(pid)), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
            Err(Errno::EINTR) => continue,
            // Exited, or an error that will not change (the pump then reaps at once).
            _ => return,
        }
    }
}

/// A close-on-exec pipe (read end, write end).
fn pipe_for(what: &str) -> Result<(OwnedFd, OwnedFd), ExecError> {
    pipe2(OFlag::O_CLOEXEC).map_err(|e| ExecError::new(format!("create the {what} pipe"), e))
}

/// A close-on-exec pipe whose read end (conform's) does not block.
fn nonblocking_pipe(what: &str) -> Result<(OwnedFd, OwnedFd), ExecError> {
    let (read, write) = pipe_for(what)?;
    set_nonblocking(&read, what)?;
    Ok((read, write))
}

fn set_nonblocking(fd: &OwnedFd, what: &str) -> Result<(), ExecError> {
    let flags = fcntl(fd, FcntlArg::F_GETFL)
        .map_err(|e| ExecError::new(format!("read the flags of {what}"), e))?;
    let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
    fcntl(fd, FcntlArg::F_SETFL(flags))
        .map_err(|e| ExecError::new(format!("make {what} non-blocking"), e))?;
    Ok(())
}

/// conform's side of the step's stdin.
enum StdinSide {
    /// `/dev/null`, or a pipe already closed.
    Nothing,
    /// Bytes still to write; the pipe is closed (set to `None`) once all are written or the
    /// reader is gone.
    Feed { pipe: Option<File>, data: Vec<u8>, written: usize },
    /// A pipe held open, never written, until the step ends.
    Hold(#[allow(dead_code, reason = "held only to keep the pipe open")] OwnedFd),
    /// The master side of the terminal: drained while the slave is open, held until the end.
    Terminal { master: File, draining: bool },
}

/// One captured output stream.
struct Stream {
    pipe: Option<File>,
    captured: Captured,
    limit: usize,
    closed_at: Option<Instant>,
    /// Newline bytes read so far.
    newlines: u64,
}

impl Stream {
    fn new(read: OwnedFd, limit: usize) -> Self {
        Stream {
            pipe: Some(File::from(read)),
            captured: Captured::default(),
            limit,
            closed_at: None,
            newlines: 0,
        }
    }

    /// Reads what is there (a bounded number of chunks); closes on end-of-file or error.
    fn drain(&mut self, buf: &mut [u8]) {
        let Some(pipe) = self.pipe.as_mut() else {
            return;
        };
        let mut reads = 0;
        while reads < READS_PER_WAKE {
            match pipe.read(buf) {
                Ok(0) => return self.close(),
                Ok(n) => {
                    reads += 1;
                    let chunk = buf.get(..n).unwrap_or_default();
                    let room = self.limit.saturating_sub(self.captured.bytes.len());
                    let kept = chunk.get(..room.min(n)).unwrap_or_default();
                    self.captured.bytes.extend_from_slice(kept);
                    self.captured.total_len += n as u64;
                    self.newlines += chunk.iter().filter(|&&b| b == b'\n').count() as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.close(),
            }
        }
    }

    fn close(&mut self) {
        self.pipe = None;
        self.closed_at = Some(Instant::now());
    }
}

/// What the poll set is made of.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Wake,
    Stdout,
    Stderr,
    Stdin,
    Terminal,
}

/// Everything one step's pump owns.
struct Pump {
    child: Child,
    pid: u32,
    started: Instant,
    timeout: Duration,
    graces: Graces,
    stdout: Stream,
    stderr: Stream,
    stdin: StdinSide,
    /// The read end of the waiter's wake-up pipe, until the exit is known.
    wake: Option<File>,
    exit_rx: Receiver<Exited>,
    /// What the process cost, once it exited.
    usage: Option<usage::ProcessUsage>,
    group: Arc<Mutex<GroupState>>,
    /// The signal to send once enough stdout lines were read.
    line_signal: Option<LineSignal>,
    /// When it was sent.
    line_signal_sent_at: Option<Instant>,
}

impl Pump {
    fn run(mut self) -> Collected {
        let mut buf = vec![0_u8; READ_CHUNK];
        let mut exited_at: Option<Instant> = None;
        let mut term_sent_at: Option<Instant> = None;
        let mut kill_sent = false;
        let timeout_at = self.started.checked_add(self.timeout);
        loop {
            let now = Instant::now();
            // Deadlines. The leader is not reaped yet, so its process group id is still ours.
            if exited_at.is_none() && term_sent_at.is_none() && timeout_at.is_some_and(|t| now >= t)
            {
                self.signal_group(Signal::SIGTERM);
                term_sent_at = Some(now);
            }
            let kill_at = term_sent_at.and_then(|t| t.checked_add(self.graces.kill));
            if term_sent_at.is_some()
                && !kill_sent
                && (exited_at.is_some() || kill_at.is_some_and(|t| now >= t))
            {
                // Also when the leader died of the SIGTERM: a descendant may have ignored it.
                self.signal_group(Signal::SIGKILL);
                kill_sent = true;
            }
            let pipes_give_up_at = exited_at.and_then(|t| t.checked_add(self.graces.pipes));
            if exited_at.is_some()
                && (self.pipes_closed() || pipes_give_up_at.is_none_or(|t| now >= t))
            {
                break;
            }

            let next = match exited_at {
                Some(_) => pipes_give_up_at,
                None if term_sent_at.is_none() => timeout_at,
                None if !kill_sent => kill_at,
                None => None,
            };
            let wait = next.map_or(TICK, |t| t.saturating_duration_since(now).min(TICK));
            // Round up, so the loop does not spin through the last sub-millisecond.
            let wait_ms = u16::try_from(wait.as_micros().div_ceil(1000)).unwrap_or(u16::MAX);

            let (ready, polled) = self.poll_once(PollTimeout::from(wait_ms));
            match polled {
                Ok(()) | Err(Errno::EINTR) => {}
                Err(errno) => {
                    self.signal_group(Signal::SIGKILL);
                    let _ = self.reap();
                    return Err(ExecError::new("poll the step's pipes", errno));
                }
            }
            for (slot, events) in ready {
                match slot {
                    Slot::Wake => {
                        self.wake = None;
                        let exited = self.exit_rx.recv().ok();
                        self.usage = exited.as_ref().and_then(|e| e.usage);
                        exited_at = Some(exited.map_or_else(Instant::now, |e| e.at));
                    }
                    Slot::Stdout => {
                        self.stdout.drain(&mut buf);
                        if exited_at.is_none() && term_sent_at.is_none() {
                            self.signal_after_lines();
                        }
                    }
                    Slot::Stderr => self.stderr.drain(&mut buf),
                    Slot::Stdin => self.feed(),
                    Slot::Terminal => self.drain_terminal(&mut buf, events),
                }
            }
        }

        let status = self.reap().map_err(|e| ExecError::new("reap the step", e))?;
        let termination = if term_sent_at.is_some() {
            Termination::TimedOut
        } else if let Some(code) = status.code() {
            Termination::Exited(code)
        } else if let Some(signal) = status.signal() {
            Termination::Signaled(signal)
        } else {
            return Err(ExecError::new(
                "read the step's exit status",
                io::Error::other(format!("neither a code nor a signal: {status:?}")),
            ));
        };
        let exited_at = exited_at.unwrap_or_else(Instant::now);
        let pipes_closed_after = match (self.stdout.closed_at, self.stderr.closed_at) {
            (Some(a), Some(b)) => Some(a.max(b).saturating_duration_since(self.started)),
            _ => None,
        };
        Ok(Outcome {
            termination,
            stdout: std::mem::take(&mut self.stdout.captured),
            stderr: std::mem::take(&mut self.stderr.captured),
            started: self.started,
            elapsed: exited_at.saturating_duration_since(self.started),
            pipes_closed_after,
            pid: self.pid,
            usage: self.usage,
            stdout_lines: self.stdout.newlines,
            line_signal_sent_after: self
                .line_signal_sent_at
                .map(|t| t.saturating_duration_since(self.started)),
        })
        // Dropping `self` closes every descriptor conform still holds: the read ends (a
        // descendant still writing gets EPIPE), the held stdin and the terminal's master.
    }

    /// One `poll(2)` over every live descriptor; returns which ones are ready and how.
    fn poll_once(&self, timeout: PollTimeout) -> (Vec<(Slot, PollFlags)>, Result<(), Errno>) {
        let mut watched: Vec<(Slot, &File, PollFlags)> = Vec::with_capacity(5);
        if let Some(wake) = &self.wake {
            watched.push((Slot::Wake, wake, PollFlags::POLLIN));
        }
        if let Some(pipe) = &self.stdout.pipe {
            watched.push((Slot::Stdout, pipe, PollFlags::POLLIN));
        }
        if let Some(pipe) = &self.stderr.pipe {
            watched.push((Slot::Stderr, pipe, PollFlags::POLLIN));
        }
        match &self.stdin {
            StdinSide::Feed { pipe: Some(pipe), .. } => {
                watched.push((Slot::Stdin, pipe, PollFlags::POLLOUT))
            }
            StdinSide::Terminal { master, draining: true } => {
                watched.push((Slot::Terminal, master, PollFlags::POLLIN))
            }
            _ => {}
        }
        let slots: Vec<Slot> = watched.iter().map(|(slot, _, _)| *slot).collect();
        let mut fds: Vec<PollFd<'_>> =
            watched.iter().map(|(_, file, events)| PollFd::new(file.as_fd(), *events)).collect();
        let polled = poll(&mut fds, timeout).map(|_| ());
        let ready = slots
            .into_iter()
            .zip(&fds)
            .filter_map(|(slot, fd)| {
                fd.revents().filter(|events| !events.is_empty()).map(|events| (slot, events))
            })
            .collect();
        (ready, polled)
    }

    fn pipes_closed(&self) -> bool {
        self.stdout.pipe.is_none() && self.stderr.pipe.is_none()
    }

    /// Writes what the pipe takes; closes it when everything is written or the reader is gone.
    fn feed(&mut self) {
        let StdinSide::Feed { pipe, data, written } = &mut self.stdin else {
            return;
        };
        let Some(file) = pipe.as_mut() else { return };
        loop {
            let rest = data.get(*written..).unwrap_or_default();
            if rest.is_empty() {
                *pipe = None;
                return;
            }
            match file.write(rest) {
                Ok(n) => *written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => {
                    *pipe = None;
                    return;
                }
            }
        }
    }

    /// Drops what the tool wrote to its terminal. On hang-up (every slave closed) or error the
    /// master is no longer polled, but stays open until the step ends.
    fn drain_terminal(&mut self, buf: &mut [u8], events: PollFlags) {
        let StdinSide::Terminal { master, draining } = &mut self.stdin else {
            return;
        };
        let hung_up = events.intersects(PollFlags::POLLHUP | PollFlags::POLLERR);
        for _ in 0..READS_PER_WAKE {
            match master.read(buf) {
                Ok(0) => {
                    *draining = false;
                    return;
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    *draining = !hung_up;
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // EIO: no slave is open any more.
                Err(_) => {
                    *draining = false;
                    return;
                }
            }
        }
        // A flood: keep draining, the next wake-up reads on.
    }

    /// Sends the line signal, once, when stdout has reached its line; only called before the
    /// leader is reaped (and before the exit is known), so the pid is still the step's.
    fn signal_after_lines(&mut self) {
        let Some(line_signal) = self.line_signal else { return };
        if self.line_signal_sent_at.is_none() && self.stdout.newlines >= line_signal.after_lines {
            let _ = kill(pid_of(self.pid), line_signal.signal);
            self.line_signal_sent_at = Some(Instant::now());
        }
    }

    /// Signals the whole process group; only called before the leader is reaped.
    fn signal_group(&self, signal: Signal) {
        // ESRCH (nobody left) and EPERM (a member changed credentials) change nothing here.
        let _ = killpg(pid_of(self.pid), signal);
    }

    /// Reaps the leader and marks the group as gone, under the lock every signal takes.
    fn reap(&mut self) -> io::Result<std::process::ExitStatus> {
        let mut state = self.group.lock().unwrap_or_else(PoisonError::into_inner);
        let status = self.child.wait();
        state.reaped = true;
        status
    }
}
