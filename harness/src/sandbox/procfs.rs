//! What conform reads of `/proc`: the process table, one process's status fields, environment,
//! command line, working directory and program, and conform's own identity.
//!
//! Everything read here may vanish between two reads (the process exits) or be unreadable
//! (another user's process): every reader returns `None` (or nothing) then, never an error.

use std::fs;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

/// The kernel's clock ticks per second in `/proc/<pid>/stat` (USER_HZ): fixed at 100 by the
/// Linux ABI on every architecture conform runs on.
pub(super) const USER_HZ: u64 = 100;

/// The kernel's flag of a process that is exiting (`include/linux/sched.h`).
const PF_EXITING: u64 = 0x4;

/// The fields of `/proc/<pid>/stat` conform needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Stat {
    /// The state letter (`R`, `S`, `Z`, ...).
    pub(super) state: u8,
    pub(super) ppid: u32,
    pub(super) pgid: u32,
    pub(super) sid: u32,
    /// Start time in clock ticks since boot: with the pid, the identity of a process (a pid
    /// may be reused, never with the same start time).
    pub(super) start_ticks: u64,
    /// The command name (at most 15 bytes, as the kernel keeps it).
    pub(super) comm: Vec<u8>,
    /// The kernel's flags of the process (`PF_*`).
    flags: u64,
}

impl Stat {
    /// Exited and not yet reaped (or being torn down): it holds nothing but its exit status.
    pub(super) fn is_dead(&self) -> bool {
        matches!(self.state, b'Z' | b'X' | b'x')
    }

    /// Dead, or already exiting (killed, say, and being torn down): nothing to find or kill.
    pub(super) fn is_gone(&self) -> bool {
        self.is_dead() || self.flags & PF_EXITING != 0
    }
}

/// The numeric entries of `/proc`: every process (not thread) id.
pub(super) fn pids() -> Vec<u32> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten().filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok())).collect()
}

pub(super) fn stat(pid: u32) -> Option<Stat> {
    parse_stat(&fs::read(format!("/proc/{pid}/stat")).ok()?)
}

fn parse_stat(raw: &[u8]) -> Option<Stat> {
    // The command name (field 2) is in parentheses and may hold spaces or parentheses itself:
    // it ends at the last ')'.
    let open = raw.iter().position(|b| *b == b'(')?;
    let close = raw.iter().rposition(|b| *b == b')')?;
    let comm = raw.get(open + 1..close)?.to_vec();
    let rest = std::str::from_utf8(raw.get(close + 1..)?).ok()?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `fields` starts at field 3 (state): ppid is field 4, pgrp 5, session 6, flags 9,
    // starttime 22.
    Some(Stat {
        state: *fields.first()?.as_bytes().first()?,
        ppid: fields.get(1)?.parse().ok()?,
        pgid: fields.get(2)?.parse().ok()?,
        sid: fields.get(3)?.parse().ok()?,
        start_ticks: fields.get(19)?.parse().ok()?,
        comm,
        flags: fields.get(6)?.parse().ok()?,
    })
}

/// The environment block a process was started with (NUL-separated `KEY=value` entries).
pub(super) fn environ(pid: u32) -> Option<Vec<u8>> {
    fs::read(format!("/proc/{pid}/environ")).ok()
}

/// Whether an environment block holds exactly this `KEY=value` entry.
pub(super) fn has_entry(environ: &[u8], entry: &[u8]) -> bool {
    environ.split(|byte| *byte == 0).any(|variable| variable == entry)
}

/// The command line (lossy UTF-8); empty for a kernel thread, a zombie or an unreadable one.
pub(super) fn cmdline(pid: u32) -> Vec<String> {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| {
            raw.split(|byte| *byte == 0)
                .filter(|arg| !arg.is_empty())
                .map(|arg| String::from_utf8_lossy(arg).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The working directory.
pub(super) fn cwd(pid: u32) -> Option<PathBuf> {
    fs::read_link(format!("/proc/{pid}/cwd")).ok()
}

/// The program file the process runs.
pub(super) fn exe(pid: u32) -> Option<PathBuf> {
    fs::read_link(format!("/proc/{pid}/exe")).ok()
}

/// The process a thread id belongs to.
pub(super) fn tgid(tid: u32) -> Option<u32> {
    let status = fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status.lines().find_map(|line| line.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
}

/// Whether a thread id is one of conform's own threads.
pub(super) fn is_own_thread(tid: u32) -> bool {
    fs::metadata(format!("/proc/self/task/{tid}")).is_ok()
}

/// Time since boot.
pub(super) fn uptime() -> Option<Duration> {
    let raw = fs::read_to_string("/proc/uptime").ok()?;
    let seconds: f64 = raw.split_whitespace().next()?.parse().ok()?;
    Duration::try_from_secs_f64(seconds).ok()
}

/// Time since boot in clock ticks, the unit of [`Stat::start_ticks`].
pub(super) fn uptime_ticks() -> Option<u64> {
    uptime().map(|up| u64::try_from(up.as_millis() * u128::from(USER_HZ) / 1000).unwrap_or(0))
}

/// How long a process that started at `start_ticks` has been running.
pub(super) fn age(start_ticks: u64) -> Option<Duration> {
    uptime()?.checked_sub(Duration::from_millis(start_ticks.saturating_mul(1000) / USER_HZ))
}

/// This boot's random id: a start time from another boot means nothing.
pub(super) fn boot_id() -> Option<String> {
    let raw = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(raw.trim().to_owned()).filter(|id| !id.is_empty())
}

/// The pid namespace conform lives in (`pid:[4026531836]`): a pid means something only in it.
pub(super) fn pid_namespace() -> Option<String> {
    fs::read_link("/proc/self/ns/pid").ok().map(|p| p.to_string_lossy().into_owned())
}

/// conform itself, read once.
#[derive(Debug, Clone)]
pub(super) struct Me {
    pub(super) pid: u32,
    pub(super) pgid: u32,
    pub(super) sid: u32,
    pub(super) start_ticks: u64,
    pub(super) exe: Option<PathBuf>,
    pub(super) comm: Vec<u8>,
}

/// conform's own pid, group, session, start time and program. Read once: conform never
/// changes its group or session.
pub(super) fn me() -> &'static Me {
    static ME: OnceLock<Me> = OnceLock::new();
    ME.get_or_init(|| {
        let pid = std::process::id();
        let stat = stat(pid);
        Me {
            pid,
            pgid: stat.as_ref().map_or(0, |s| s.pgid),
            sid: stat.as_ref().map_or(0, |s| s.sid),
            start_ticks: stat.as_ref().map_or(0, |s| s.start_ticks),
            exe: exe(pid),
            comm: stat.map(|s| s.comm).unwrap_or_default(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_name_with_spaces_and_parentheses_is_skipped_whole() {
        let raw = b"42 (a b) c)) S 7 42 41 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 123456 0 0";
        let stat = parse_stat(raw).unwrap();
        assert_eq!(stat.comm, b"a b) c)");
        assert_eq!((stat.state, stat.ppid, stat.pgid, stat.sid), (b'S', 7, 42, 41));
        assert_eq!(stat.start_ticks, 123456);
    }

    #[test]
    fn conform_knows_itself() {
        let me = me();
        assert_eq!(me.pid, std::process::id());
        assert_eq!(me.start_ticks, stat(me.pid).unwrap().start_ticks);
        assert_eq!(me.pgid, nix::unistd::getpgrp().as_raw().unsigned_abs());
    }
}
