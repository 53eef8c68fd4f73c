//! One cgroup (v2) per sandbox, where the unified hierarchy is mounted and conform may write
//! to its own cgroup (typically as root; or in a delegated subtree).
//!
//! # Layout
//!
//! conform is in some cgroup `C` (from `/proc/self/cgroup`). While sandboxes live it moves
//! itself into a *run group* `C/conform-<pid>-<start ticks>` and gives each sandbox a
//! *scenario group* below it, `C/conform-<pid>-<start>/s-<marker>`, of type `threaded`.
//! Threaded groups are what lets one thread of conform sit in a scenario's group while the
//! other threads sit elsewhere: the thread that creates (or [`enters`](super::Sandbox::enter))
//! a sandbox moves into its group, and every process that thread forks from then on, and every
//! descendant of those, setsid'd, env-cleared, double-forked or not, starts in the scenario's
//! group. Nothing a tool does short of writing to the cgroup filesystem itself gets it out.
//!
//! When the sandbox ends, conform's own threads move back to the run group, whatever is left
//! in the scenario group is the scenario's leak, and the group is removed; when the last
//! sandbox ends, conform moves back to `C` and removes the run group. The name of the run
//! group holds conform's pid and start time, so that a later run can tell a group of a conform
//! that died (SIGKILL) from a live one's and clean it up ([`Base::remove_stale`]).
//!
//! The threaded mode needs `C` to be a plain domain cgroup (not threaded itself) in which
//! conform may create groups and move processes; anything else is [`Unavailable`] and conform
//! falls back to being a child subreaper (see the parent module).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::{Pid, gettid};

use super::procfs;

/// The prefix of run groups' names.
const RUN_PREFIX: &str = "conform-";

/// The prefix of scenario groups' names.
const SCENARIO_PREFIX: &str = "s-";

/// Why per-sandbox cgroups are not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// Turned off by the `CONFORM_ISOLATION` variable.
    #[error("turned off by {var}={value}", var = super::ISOLATION_VAR)]
    TurnedOff {
        /// The variable's value.
        value: String,
    },
    /// No cgroup v2 hierarchy, or conform is not in it.
    #[error("no cgroup v2 hierarchy is mounted")]
    NoUnifiedHierarchy,
    /// conform's own cgroup is not a plain domain (e.g. conform itself runs in a threaded one).
    #[error("conform's own cgroup {path} is of type `{kind}`, not a domain")]
    NotADomain {
        /// The cgroup.
        path: PathBuf,
        /// Its `cgroup.type`.
        kind: String,
    },
    /// The kernel refused an operation (no permission, a read-only mount, a limit).
    #[error("failed to {action} {path}: {error}")]
    Refused {
        /// What was attempted.
        action: &'static str,
        /// On what.
        path: PathBuf,
        /// The error, as the system put it.
        error: String,
    },
}

fn refused(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> Unavailable {
    let path = path.to_path_buf();
    move |e| Unavailable::Refused { action, path, error: e.to_string() }
}

/// Where conform's cgroups go: its own cgroup and the name of its run group.
#[derive(Debug, Clone)]
pub(super) struct Base {
    /// conform's cgroup when it started (absolute path under the mount).
    parent: PathBuf,
    /// `conform-<pid>-<start ticks>`.
    run_name: String,
}

impl Base {
    /// Finds the unified hierarchy and conform's cgroup in it, and checks that it is a domain.
    pub(super) fn discover() -> Result<Base, Unavailable> {
        let own =
            fs::read_to_string("/proc/self/cgroup").map_err(|_| Unavailable::NoUnifiedHierarchy)?;
        let relative = own
            .lines()
            .find_map(|line| line.strip_prefix("0::"))
            .ok_or(Unavailable::NoUnifiedHierarchy)?
            .to_owned();
        let mountinfo = fs::read_to_string("/proc/self/mountinfo")
            .map_err(|_| Unavailable::NoUnifiedHierarchy)?;
        let (root, mount_point) =
            unified_mount(&mountinfo).ok_or(Unavailable::NoUnifiedHierarchy)?;
        // The path in /proc/self/cgroup is relative to the hierarchy's root; the mount may
        // show a subtree of it.
        let inside = Path::new(&relative).strip_prefix(&root).unwrap_or(Path::new(&relative));
        let parent = mount_point.join(inside.strip_prefix("/").unwrap_or(inside));
        if !parent.join("cgroup.procs").exists() {
            return Err(Unavailable::NoUnifiedHierarchy);
        }
        // The root cgroup has no cgroup.type; every other is a domain unless made threaded.
        if let Ok(kind) = fs::read_to_string(parent.join("cgroup.type")) {
            let kind = kind.trim().to_owned();
            if kind != "domain" {
                return Err(Unavailable::NotADomain { path: parent, kind });
            }
        }
        let me = procfs::me();
        Ok(Base { parent, run_name: format!("{RUN_PREFIX}{}-{}", me.pid, me.start_ticks) })
    }

    /// The run group's path.
    pub(super) fn run_path(&self) -> PathBuf {
        self.parent.join(&self.run_name)
    }

    /// Creates the run group and moves conform (all its threads) into it.
    pub(super) fn open_run(&self) -> Result<RunGroup, Unavailable> {
        let path = self.run_path();
        match fs::create_dir(&path) {
            Ok(()) => {}
            // Left by an earlier cycle of this very process that could not remove it.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(refused("create the cgroup", &path)(e)),
        }
        let me = procfs::me();
        if let Err(e) = write_to(&path.join("cgroup.procs"), me.pid) {
            let _ = fs::remove_dir(&path);
            return Err(refused("move conform into the cgroup", &path)(e));
        }
        Ok(RunGroup { path, parent: self.parent.clone() })
    }

    /// Kills what is left in the run groups of conform processes that are gone (killed with
    /// SIGKILL, say) and removes the groups; the run groups of live conforms are never
    /// touched. Returns what was removed.
    pub(super) fn remove_stale(&self) -> Vec<StaleGroup> {
        let Ok(entries) = fs::read_dir(&self.parent) else {
            return Vec::new();
        };
        let mut removed = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name == self.run_name {
                continue;
            }
            let Some((pid, start)) = parse_run_name(name) else { continue };
            if procfs::stat(pid).is_some_and(|s| s.start_ticks == start) {
                continue;
            }
            let path = entry.path();
            let killed = empty_and_remove(&path);
            if !path.exists() {
                removed.push(StaleGroup { path, pid, killed });
            }
        }
        removed
    }
}

/// A run group of a conform that is gone, removed by a later run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StaleGroup {
    pub(super) path: PathBuf,
    pub(super) pid: u32,
    /// How many processes were still in it (now killed).
    pub(super) killed: usize,
}

/// `conform-<pid>-<start>` → (pid, start).
fn parse_run_name(name: &str) -> Option<(u32, u64)> {
    let (pid, start) = name.strip_prefix(RUN_PREFIX)?.split_once('-')?;
    Some((pid.parse().ok()?, start.parse().ok()?))
}

/// The root and mount point of the first cgroup2 mount in `/proc/self/mountinfo`.
fn unified_mount(mountinfo: &str) -> Option<(PathBuf, PathBuf)> {
    mountinfo.lines().find_map(|line| {
        let (mount, fs) = line.split_once(" - ")?;
        if fs.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let fields: Vec<&str> = mount.split_whitespace().collect();
        Some((PathBuf::from(unescape(fields.get(3)?)), PathBuf::from(unescape(fields.get(4)?))))
    })
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
pub(super) fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| b == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok());
        match octal {
            Some(value) => {
                out.push(value);
                i += 4;
            }
            None => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// conform's run group while sandboxes live.
#[derive(Debug)]
pub(super) struct RunGroup {
    path: PathBuf,
    parent: PathBuf,
}

impl RunGroup {
    /// A threaded group for one sandbox.
    pub(super) fn scenario(&self, marker: &str) -> Result<ScenarioGroup, Unavailable> {
        let path = self.path.join(format!("{SCENARIO_PREFIX}{marker}"));
        fs::create_dir(&path).map_err(refused("create the cgroup", &path))?;
        if let Err(e) = write_to(&path.join("cgroup.type"), "threaded") {
            let _ = fs::remove_dir(&path);
            return Err(refused("make threaded the cgroup", &path)(e));
        }
        Ok(ScenarioGroup { path, run: self.path.clone() })
    }

    /// Moves conform back to the cgroup it came from and removes the run group (and scenario
    /// groups left in it, once empty). Fails only when conform could not move back; a group
    /// that cannot be removed yet (something still in it) stays, for a later close of this
    /// run or the clean-up of a later one.
    pub(super) fn close(self) -> Result<(), Unavailable> {
        let me = procfs::me();
        write_to(&self.parent.join("cgroup.procs"), me.pid)
            .map_err(refused("move conform back to", &self.parent))?;
        if let Ok(entries) = fs::read_dir(&self.path) {
            for entry in entries.flatten() {
                if entry.path().is_dir() {
                    let _ = fs::remove_dir(entry.path());
                }
            }
        }
        let _ = fs::remove_dir(&self.path);
        Ok(())
    }
}

/// One sandbox's threaded cgroup.
#[derive(Debug)]
pub(super) struct ScenarioGroup {
    path: PathBuf,
    run: PathBuf,
}

impl ScenarioGroup {
    /// The group's directory.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Moves the calling thread into the group: what it forks from now on starts there.
    pub(super) fn enter_current_thread(&self) -> io::Result<()> {
        write_to(&self.path.join("cgroup.threads"), gettid().as_raw())
    }

    /// Every process with a thread in the group, conform itself excluded.
    pub(super) fn members(&self) -> Vec<u32> {
        members(&self.path, procfs::me().pid)
    }

    /// Moves conform's own threads out of the group, back to the run group.
    pub(super) fn release_own_threads(&self) {
        for tid in threads(&self.path) {
            if procfs::is_own_thread(tid) {
                let _ = write_to(&self.run.join("cgroup.threads"), tid);
            }
        }
    }

    /// Removes the group; fails (`EBUSY`) while anything is in it.
    pub(super) fn remove(&self) -> io::Result<()> {
        fs::remove_dir(&self.path)
    }
}

/// The thread ids listed in a group's `cgroup.threads`.
fn threads(group: &Path) -> Vec<u32> {
    fs::read_to_string(group.join("cgroup.threads"))
        .map(|text| text.split_whitespace().filter_map(|t| t.parse().ok()).collect())
        .unwrap_or_default()
}

/// The processes with a thread in `group` (its own threads only, not its children's), `except`
/// aside.
fn members(group: &Path, except: u32) -> Vec<u32> {
    let mut pids: Vec<u32> =
        threads(group).into_iter().filter_map(procfs::tgid).filter(|pid| *pid != except).collect();
    pids.sort_unstable();
    pids.dedup();
    pids
}

/// SIGKILLs everything in a stale run group and its scenario groups, waits a little for it to
/// go, and removes the groups; returns how many processes it killed.
fn empty_and_remove(run: &Path) -> usize {
    let mut groups: Vec<PathBuf> = fs::read_dir(run)
        .map(|entries| entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect())
        .unwrap_or_default();
    groups.push(run.to_path_buf());
    let own = procfs::me().pid;
    let mut killed = std::collections::BTreeSet::new();
    for _ in 0..50 {
        let mut alive = false;
        for group in &groups {
            // A run group (domain) lists its processes in cgroup.procs; a threaded one only
            // in cgroup.threads.
            let mut pids = members(group, own);
            if let Ok(text) = fs::read_to_string(group.join("cgroup.procs")) {
                pids.extend(text.split_whitespace().filter_map(|t| t.parse::<u32>().ok()));
            }
            for pid in pids.into_iter().filter(|p| *p != own) {
                if procfs::stat(pid).is_some_and(|s| !s.is_gone()) {
                    alive = true;
                    if let Ok(raw) = i32::try_from(pid) {
                        let _ = kill(Pid::from_raw(raw), Signal::SIGKILL);
                    }
                    killed.insert(pid);
                }
            }
        }
        if !alive {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for group in &groups {
        let _ = fs::remove_dir(group);
    }
    killed.len()
}

/// Writes one value to a cgroup control file (which must exist: cgroupfs has no symlinks, and
/// nothing is created).
fn write_to(file: &Path, value: impl std::fmt::Display) -> io::Result<()> {
    let mut handle = fs::OpenOptions::new().write(true).open(file)?;
    handle.write_all(value.to_string().as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_group_names_carry_pid_and_start() {
        assert_eq!(parse_run_name("conform-123-456789"), Some((123, 456789)));
        assert_eq!(parse_run_name("conform-123"), None);
        assert_eq!(parse_run_name("conform-x-1"), None);
        assert_eq!(parse_run_name("other-1-2"), None);
    }

    #[test]
    fn the_unified_mount_is_found_among_others() {
        let info = "\
24 30 0:22 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
25 24 0:23 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
26 24 0:24 / /sys/fs/cgroup/uni\\040fied rw,relatime shared:9 - cgroup2 cgroup2 rw
";
        assert_eq!(
            unified_mount(info),
            Some((PathBuf::from("/"), PathBuf::from("/sys/fs/cgroup/uni fied")))
        );
        assert_eq!(unified_mount("24 30 0:22 / /x rw - tmpfs tmpfs rw\n"), None);
    }
}
