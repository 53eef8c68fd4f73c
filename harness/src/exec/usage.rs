//! What the processes conform started cost the machine: each one's CPU time and the time it
//! spent runnable but waiting for a CPU, read from `/proc` while it lies exited and not yet
//! reaped (the waiter learns of the exit with `WNOWAIT`, so the numbers are still there).
//!
//! The waiting time is how much the machine stretched the process: a tool whose start-up costs
//! 60 ms of CPU and waited 900 ms for a core answered 900 ms late, whatever its own code did.
//! The run's pace ([`crate::pace`]) reads the totals to decide how many scenarios may run at
//! once. Where `/proc/<pid>/schedstat` is missing (a kernel without scheduler statistics) the
//! process is not counted, and nothing else changes.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// The cost of one exited process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcessUsage {
    /// Time on a CPU (its main thread, as the scheduler counts it).
    pub cpu: Duration,
    /// Time it was ready to run and waited for a CPU.
    pub run_delay: Duration,
}

/// Sums over every process counted so far in this conform process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UsageTotals {
    /// Processes counted.
    pub processes: u64,
    /// Their CPU time.
    pub cpu: Duration,
    /// Their time waiting for a CPU.
    pub run_delay: Duration,
}

impl UsageTotals {
    /// What was counted between `earlier` and `self`.
    pub fn since(&self, earlier: &UsageTotals) -> UsageTotals {
        UsageTotals {
            processes: self.processes.saturating_sub(earlier.processes),
            cpu: self.cpu.saturating_sub(earlier.cpu),
            run_delay: self.run_delay.saturating_sub(earlier.run_delay),
        }
    }

    /// The mean time a process waited for a CPU (`None` when none was counted).
    pub fn mean_run_delay(&self) -> Option<Duration> {
        let n = u32::try_from(self.processes).ok().filter(|&n| n > 0)?;
        Some(self.run_delay / n)
    }

    /// The mean CPU time of a process (`None` when none was counted).
    pub fn mean_cpu(&self) -> Option<Duration> {
        let n = u32::try_from(self.processes).ok().filter(|&n| n > 0)?;
        Some(self.cpu / n)
    }
}

static PROCESSES: AtomicU64 = AtomicU64::new(0);
static CPU_NS: AtomicU64 = AtomicU64::new(0);
static RUN_DELAY_NS: AtomicU64 = AtomicU64::new(0);

/// How many of the latest waits [`waits_since`] can return.
const RECENT: usize = 512;

/// The latest waits, each with its process's number in the count (the first is 1).
static RECENT_WAITS: Mutex<VecDeque<(u64, Duration)>> = Mutex::new(VecDeque::new());

/// Reads the cost of `pid`, which must have exited and not been reaped yet.
pub fn read(pid: u32) -> Option<ProcessUsage> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).ok()?;
    parse_schedstat(&text)
}

/// `/proc/<pid>/schedstat`: nanoseconds on a CPU, nanoseconds waiting on a run queue, and the
/// number of time slices.
fn parse_schedstat(text: &str) -> Option<ProcessUsage> {
    let mut fields = text.split_ascii_whitespace().map(str::parse::<u64>);
    let cpu = fields.next()?.ok()?;
    let run_delay = fields.next()?.ok()?;
    Some(ProcessUsage {
        cpu: Duration::from_nanos(cpu),
        run_delay: Duration::from_nanos(run_delay),
    })
}

/// Adds one process to the totals.
pub fn record(usage: ProcessUsage) {
    let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let mut recent = RECENT_WAITS.lock().unwrap_or_else(PoisonError::into_inner);
    CPU_NS.fetch_add(ns(usage.cpu), Ordering::Relaxed);
    RUN_DELAY_NS.fetch_add(ns(usage.run_delay), Ordering::Relaxed);
    let number = PROCESSES.fetch_add(1, Ordering::Relaxed) + 1;
    if recent.len() == RECENT {
        recent.pop_front();
    }
    recent.push_back((number, usage.run_delay));
}

/// The waits for a CPU of the processes counted after the first `seen` (of those still
/// kept: the latest few hundred), oldest first, and how many were counted in all.
pub fn waits_since(seen: u64) -> (u64, Vec<Duration>) {
    let recent = RECENT_WAITS.lock().unwrap_or_else(PoisonError::into_inner);
    let counted = recent.back().map_or(seen, |(n, _)| *n);
    (counted, recent.iter().filter(|(n, _)| *n > seen).map(|(_, wait)| *wait).collect())
}

/// The totals so far.
pub fn totals() -> UsageTotals {
    UsageTotals {
        processes: PROCESSES.load(Ordering::Relaxed),
        cpu: Duration::from_nanos(CPU_NS.load(Ordering::Relaxed)),
        run_delay: Duration::from_nanos(RUN_DELAY_NS.load(Ordering::Relaxed)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_gives_cpu_and_waiting_time() {
        let usage = parse_schedstat("201066299 125498 4\n").expect("parsed");
        assert_eq!(usage.cpu, Duration::from_nanos(201_066_299));
        assert_eq!(usage.run_delay, Duration::from_nanos(125_498));
        assert_eq!(parse_schedstat("garbage"), None);
        assert_eq!(parse_schedstat(""), None);
    }

    #[test]
    fn totals_between_two_readings_are_their_difference() {
        let ms = Duration::from_millis;
        let before = UsageTotals { processes: 2, cpu: ms(100), run_delay: ms(10) };
        let after = UsageTotals { processes: 6, cpu: ms(300), run_delay: ms(410) };
        let window = after.since(&before);
        assert_eq!(window.processes, 4);
        assert_eq!(window.mean_cpu(), Some(ms(50)));
        assert_eq!(window.mean_run_delay(), Some(ms(100)));
        assert_eq!(UsageTotals::default().mean_run_delay(), None);
    }

    #[test]
    fn the_waits_since_a_count_are_those_of_later_processes() {
        let (before, _) = waits_since(u64::MAX);
        let (start, _) = waits_since(0);
        record(ProcessUsage { cpu: Duration::ZERO, run_delay: Duration::from_millis(7) });
        let (after, waits) = waits_since(start);
        assert!(after > start && before == u64::MAX);
        // Other tests of this binary may count processes too: ours is among the new ones.
        assert!(waits.contains(&Duration::from_millis(7)));
    }

    #[test]
    fn an_exited_child_can_be_read_before_it_is_reaped() {
        use nix::sys::wait::{Id, WaitPidFlag, waitid};
        let Ok(mut child) = std::process::Command::new("true").spawn() else { return };
        let pid = child.id();
        let waited = waitid(
            Id::Pid(nix::unistd::Pid::from_raw(pid as i32)),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT,
        );
        assert!(waited.is_ok());
        let read = read(pid);
        let _ = child.wait();
        // Kernels without scheduler statistics have no such file; this one does.
        if std::path::Path::new("/proc/self/schedstat").exists() {
            assert!(read.is_some());
        }
    }
}
