//! Leaked processes: what conform reports of each, finding them by the sandbox marker, and
//! killing them without ever hitting a process that merely reused a pid.

use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use super::MARKER_VAR;
use super::procfs::{self, Stat};

/// At most this many scan-and-kill passes per sweep.
pub(super) const MAX_PASSES: usize = 20;

/// Pause between passes, so that killed processes are gone before the next look.
pub(super) const PASS_PAUSE: Duration = Duration::from_millis(20);

/// How a leaked process was found (and so how sure its attribution to the sandbox is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoundBy {
    /// It carried the sandbox's marker variable.
    Marker,
    /// It was in the sandbox's cgroup: started, however indirectly, by one of its steps.
    Cgroup,
    /// An orphan conform adopted as child subreaper, working in the sandbox's directory.
    OrphanInSandbox,
    /// An orphan conform adopted as child subreaper, started while this sandbox was the only
    /// one alive.
    OrphanStartedAlone,
    /// An orphan conform adopted as child subreaper that cannot be told to one sandbox (it
    /// started while several were alive, and works elsewhere): a leak of the run.
    OrphanOfTheRun,
}

/// A process that outlived its scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeakedProcess {
    /// Its process id.
    pub pid: u32,
    /// Its process group id, when it could be read.
    pub pgid: Option<u32>,
    /// Its command line (lossy UTF-8); empty for a kernel-side or unreadable one.
    pub cmdline: Vec<String>,
    /// How long it had been running when it was found, when it could be read.
    pub age: Option<Duration>,
    /// How it was found.
    pub found_by: FoundBy,
    /// Its start time in clock ticks since boot: with the pid, the identity of a process.
    start_ticks: Option<u64>,
}

impl LeakedProcess {
    fn observe(pid: u32, stat: Option<&Stat>, found_by: FoundBy) -> Self {
        LeakedProcess {
            pid,
            pgid: stat.map(|s| s.pgid),
            cmdline: procfs::cmdline(pid),
            age: stat.and_then(|s| procfs::age(s.start_ticks)),
            found_by,
            start_ticks: stat.map(|s| s.start_ticks),
        }
    }

    fn is(&self, pid: u32, stat: &Stat) -> bool {
        self.pid == pid && self.start_ticks == Some(stat.start_ticks)
    }
}

/// `CONFORM_SANDBOX=<marker>`, as it appears in an environment block.
pub(super) fn marker_entry(marker: &str) -> Vec<u8> {
    format!("{MARKER_VAR}={marker}").into_bytes()
}

/// Finds every process (conform itself excluded) whose environment holds
/// `CONFORM_SANDBOX=<marker>`, without touching them.
pub fn scan(marker: &str) -> Vec<LeakedProcess> {
    let entry = marker_entry(marker);
    let own_pid = procfs::me().pid;
    procfs::pids()
        .into_iter()
        .filter(|pid| *pid != own_pid)
        .filter(|pid| procfs::environ(*pid).is_some_and(|env| procfs::has_entry(&env, &entry)))
        .map(|pid| LeakedProcess::observe(pid, procfs::stat(pid).as_ref(), FoundBy::Marker))
        .collect()
}

/// The processes one sweep has caught: each reported once, each killed as often as it is seen
/// (until it is gone).
#[derive(Debug, Default)]
pub(super) struct Catch {
    pub(super) found: Vec<LeakedProcess>,
}

impl Catch {
    /// Records (when new) and SIGKILLs a process; with `group_too` its process group as well
    /// (never conform's own). Returns whether it was new.
    pub(super) fn take(
        &mut self,
        pid: u32,
        stat: &Stat,
        found_by: FoundBy,
        group_too: bool,
    ) -> bool {
        let new = !self.found.iter().any(|p| p.is(pid, stat));
        if new {
            // Its command line first: once killed, it has none.
            self.found.push(LeakedProcess::observe(pid, Some(stat), found_by));
        }
        kill_exactly(pid, stat.start_ticks);
        if group_too && stat.pgid > 1 && stat.pgid != procfs::me().pgid {
            if let Ok(group) = i32::try_from(stat.pgid) {
                // ESRCH (already gone) or EPERM (not ours to kill) change nothing.
                let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
            }
        }
        new
    }

    /// Whether every process caught has exited (a zombie has).
    pub(super) fn all_gone(&self) -> bool {
        self.found.iter().all(|p| {
            procfs::stat(p.pid).is_none_or(|s| s.is_gone() || Some(s.start_ticks) != p.start_ticks)
        })
    }
}

/// SIGKILLs `pid` if it is still the process that started at `start_ticks` (a pid freed and
/// reused since it was read is somebody else's).
pub(super) fn kill_exactly(pid: u32, start_ticks: u64) {
    let Ok(raw) = i32::try_from(pid) else { return };
    if procfs::stat(pid).is_some_and(|s| s.start_ticks == start_ticks) {
        let _ = kill(Pid::from_raw(raw), Signal::SIGKILL);
    }
}

/// Kills every process carrying `marker` (and its group), pass after pass until none is left;
/// returns each once. Only the marker counts here: for sandboxes of conforms that are gone.
pub(super) fn kill_marked(marker: &str) -> Vec<LeakedProcess> {
    let entry = marker_entry(marker);
    let own_pid = procfs::me().pid;
    let mut catch = Catch::default();
    for _ in 0..MAX_PASSES {
        let mut new = false;
        for pid in procfs::pids().into_iter().filter(|pid| *pid != own_pid) {
            let Some(stat) = procfs::stat(pid).filter(|s| !s.is_gone()) else { continue };
            if procfs::environ(pid).is_some_and(|env| procfs::has_entry(&env, &entry)) {
                new |= catch.take(pid, &stat, FoundBy::Marker, true);
            }
        }
        if !new && catch.all_gone() {
            break;
        }
        std::thread::sleep(PASS_PAUSE);
    }
    catch.found
}
