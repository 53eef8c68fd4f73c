//! Finding (and killing) processes by the sandbox marker in their environment, through `/proc`.
//!
//! Everything read from `/proc` may vanish between two reads (the process exits) or be
//! unreadable (another user's process): such a process is skipped, never an error.

use std::fs;
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::{Pid, getpgrp};

use super::MARKER_VAR;

/// The kernel's clock ticks per second in `/proc/<pid>/stat` (USER_HZ): fixed at 100 by the
/// Linux ABI on every architecture conform runs on.
const USER_HZ: u64 = 100;

/// At most this many scan-and-kill passes per sweep.
const MAX_PASSES: usize = 20;

/// Pause between passes, so that killed processes are gone before the next look.
const PASS_PAUSE: Duration = Duration::from_millis(20);

/// A process that still carried a sandbox's marker.
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
    /// Its start time in clock ticks since boot: with the pid, the identity of a process.
    start_ticks: Option<u64>,
}

/// Finds every process (conform itself excluded) whose environment holds
/// `CONFORM_SANDBOX=<marker>`, without touching them.
pub fn scan(marker: &str) -> Vec<LeakedProcess> {
    let entry = format!("{MARKER_VAR}={marker}");
    let own_pid = std::process::id();
    let Ok(proc_dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let uptime = read_uptime();
    let mut found = Vec::new();
    for dir_entry in proc_dir.flatten() {
        let Some(pid) = dir_entry.file_name().to_str().and_then(|name| name.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == own_pid {
            continue;
        }
        let Ok(environ) = fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if !environ.split(|byte| *byte == 0).any(|variable| variable == entry.as_bytes()) {
            continue;
        }
        let stat = read_stat(pid);
        let cmdline = fs::read(format!("/proc/{pid}/cmdline"))
            .map(|raw| {
                raw.split(|byte| *byte == 0)
                    .filter(|arg| !arg.is_empty())
                    .map(|arg| String::from_utf8_lossy(arg).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let age = match (uptime, stat.map(|s| s.start_ticks)) {
            (Some(up), Some(ticks)) => {
                up.checked_sub(Duration::from_millis(ticks.saturating_mul(1000) / USER_HZ))
            }
            _ => None,
        };
        found.push(LeakedProcess {
            pid,
            pgid: stat.map(|s| s.pgid),
            cmdline,
            age,
            start_ticks: stat.map(|s| s.start_ticks),
        });
    }
    found
}

/// Scans, SIGKILLs every process found and its process group (never conform's own group),
/// and repeats until a pass finds nothing; returns each process found once.
pub(super) fn sweep(marker: &str) -> Vec<LeakedProcess> {
    let own_group = getpgrp();
    let mut leaked: Vec<LeakedProcess> = Vec::new();
    for _ in 0..MAX_PASSES {
        let alive = scan(marker);
        if alive.is_empty() {
            break;
        }
        for process in &alive {
            let Ok(raw_pid) = i32::try_from(process.pid) else {
                continue;
            };
            // ESRCH (already gone) or EPERM (not ours to kill) change nothing.
            let _ = kill(Pid::from_raw(raw_pid), Signal::SIGKILL);
            if let Some(group) = process.pgid.and_then(|g| i32::try_from(g).ok()) {
                if group > 1 && Pid::from_raw(group) != own_group {
                    let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
                }
            }
        }
        for process in alive {
            let seen =
                leaked.iter().any(|p| p.pid == process.pid && p.start_ticks == process.start_ticks);
            if !seen {
                leaked.push(process);
            }
        }
        std::thread::sleep(PASS_PAUSE);
    }
    leaked
}

/// The fields of `/proc/<pid>/stat` conform needs.
#[derive(Debug, Clone, Copy)]
struct Stat {
    pgid: u32,
    start_ticks: u64,
}

fn read_stat(pid: u32) -> Option<Stat> {
    let raw = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or parentheses itself:
    // the fields that follow start after the last ')'.
    let rest = raw.get(raw.rfind(')')? + 1..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): pgrp is field 5, starttime field 22.
    Some(Stat { pgid: fields.get(2)?.parse().ok()?, start_ticks: fields.get(19)?.parse().ok()? })
}

fn read_uptime() -> Option<Duration> {
    let raw = fs::read_to_string("/proc/uptime").ok()?;
    let seconds: f64 = raw.split_whitespace().next()?.parse().ok()?;
    Duration::try_from_secs_f64(seconds).ok()
}
