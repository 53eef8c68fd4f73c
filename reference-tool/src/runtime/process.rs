//! Which process runs a job, identified so that a reused pid is never mistaken for it.
//!
//! A pid alone is not an identity: after the worker dies the kernel may hand its pid to an
//! unrelated process. [`ProcessIdentity`] pairs the pid with the process's start time (field 22
//! of `/proc/<pid>/stat`, in clock ticks since boot), which a new process with the same pid
//! cannot share. A zombie (exited, not yet reaped) counts as dead.

use std::io;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A process, as pid + start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessIdentity {
    /// The process id.
    pub pid: u32,
    /// Start time in clock ticks since boot (`/proc/<pid>/stat` field 22).
    pub start_time: u64,
}

/// Reads `(state, start_time)` of a pid from `/proc`; `None` if there is no such process.
fn stat_of(pid: u32) -> Option<(char, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or ')': split after
    // the last ')'.
    let after = &text[text.rfind(')')? + 1..];
    let mut fields = after.split_whitespace();
    let state = fields.next()?.chars().next()?;
    // `after` starts at field 3 (state); start time is field 22, i.e. 19 more fields on.
    let start_time = fields.nth(18)?.parse().ok()?;
    Some((state, start_time))
}

impl ProcessIdentity {
    /// The identity of a live process, `None` when it does not exist or is a zombie.
    pub fn of(pid: u32) -> Option<Self> {
        match stat_of(pid)? {
            ('Z' | 'X' | 'x', _) => None,
            (_, start_time) => Some(ProcessIdentity { pid, start_time }),
        }
    }

    /// The identity of the calling process.
    pub fn current() -> io::Result<Self> {
        Self::of(std::process::id())
            .ok_or_else(|| io::Error::other("failed to read /proc/self/stat"))
    }

    /// Whether this very process still runs (same pid AND same start time, not a zombie).
    pub fn is_alive(&self) -> bool {
        Self::of(self.pid) == Some(*self)
    }

    /// Sends `signal` if and only if this very process still runs. Returns whether it was sent.
    pub fn signal_if_alive(&self, signal: Signal) -> bool {
        let Ok(raw) = i32::try_from(self.pid) else {
            return false;
        };
        self.is_alive() && kill(Pid::from_raw(raw), signal).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_live_child_is_alive_and_a_reaped_one_is_not() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let ident = ProcessIdentity::of(child.id()).unwrap();
        assert!(ident.is_alive());
        child.kill().unwrap();
        // Before reaping it is a zombie: dead already.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while ident.is_alive() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!ident.is_alive(), "a zombie counts as dead");
        child.wait().unwrap();
        assert!(!ident.is_alive());
    }

    #[test]
    fn a_reused_pid_is_not_the_same_process() {
        let me = ProcessIdentity::current().unwrap();
        assert!(me.is_alive());
        // Same pid, another start time: what a reused pid looks like.
        let impostor = ProcessIdentity { pid: me.pid, start_time: me.start_time + 1 };
        assert!(!impostor.is_alive());
        assert!(!impostor.signal_if_alive(Signal::SIGKILL), "never signals a stranger");
        assert!(ProcessIdentity::of(u32::MAX).is_none());
    }
}
