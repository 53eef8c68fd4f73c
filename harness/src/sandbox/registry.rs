//! conform-wide sandbox state: which isolation is in force, the live sandboxes (and recently
//! ended ones, for attribution), the sweep of one sandbox, the clean-up on interruption and at
//! the end of the run. One lock guards it all; a sweep that judges orphans (as child
//! subreaper) holds it for one pass at a time, so that no sandbox can appear (and start a step)
//! in the middle of a pass's judgement. Nothing holds it while waiting for the kernel.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

use super::ISOLATION_VAR;
use super::cgroup::{self, Unavailable};
use super::procfs::{self, Me, Stat};
use super::sweep::{Catch, FoundBy, LeakedProcess, MAX_PASSES, PASS_PAUSE, marker_entry};

/// How many ended sandboxes are remembered for attributing orphans by their start time.
const ENDED_MEMORY: usize = 4096;

/// How conform finds every process of a sandbox beyond the marker (which always counts too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// Each sandbox has a cgroup (v2) of its own: every process its steps start is in it, and
    /// a leak is attributed exactly.
    Cgroup {
        /// conform's run group, under which the sandboxes' groups are made.
        run_group: PathBuf,
    },
    /// conform is a child subreaper: every orphan of the tool becomes conform's child, is
    /// found and killed, and is attributed when its working directory or start time tells.
    Subreaper {
        /// Why cgroups are not used.
        no_cgroup: Unavailable,
    },
    /// Neither: only processes carrying the marker are found.
    MarkerOnly {
        /// Why cgroups are not used.
        no_cgroup: Unavailable,
        /// Why conform could not become a child subreaper (`None`: it was told not to).
        no_subreaper: Option<Errno>,
    },
}

impl std::fmt::Display for Isolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Isolation::Cgroup { run_group } => {
                write!(f, "a cgroup per sandbox, under {}", run_group.display())
            }
            Isolation::Subreaper { no_cgroup } => {
                write!(
                    f,
                    "conform adopts the tool's orphans as child subreaper (no cgroups: {no_cgroup})"
                )
            }
            Isolation::MarkerOnly { no_cgroup, no_subreaper } => {
                write!(f, "the marker variable only (no cgroups: {no_cgroup}; no child subreaper")?;
                match no_subreaper {
                    Some(errno) => write!(f, ": {errno})"),
                    None => write!(f, ")"),
                }
            }
        }
    }
}

struct LiveSandbox {
    /// The directory, canonical, for comparing working directories.
    root: PathBuf,
    created_ticks: u64,
    group: Option<cgroup::ScenarioGroup>,
}

struct EndedSandbox {
    created_ticks: u64,
    ended_ticks: u64,
}

#[derive(Default)]
struct State {
    isolation: Option<Isolation>,
    base: Option<cgroup::Base>,
    run_group: Option<cgroup::RunGroup>,
    live: BTreeMap<String, LiveSandbox>,
    ended: VecDeque<EndedSandbox>,
    /// Leaks no sandbox can be charged with, for [`end_of_run`].
    unattributed: Vec<LeakedProcess>,
    /// Adopted children conform killed, to be reaped once they are zombies.
    reapable: BTreeSet<u32>,
    /// Sandboxes that left `live` and are still removing their cgroup: the run group closes
    /// only once none is left.
    ending: usize,
}

fn state() -> MutexGuard<'static, State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE
        .get_or_init(|| Mutex::new(State::default()))
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

thread_local! {
    /// The sandbox whose cgroup this thread is in, to skip moving it there again.
    static ENTERED: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// The isolation in force (decided on first use: cgroups when available, else a child
/// subreaper; `CONFORM_ISOLATION=subreaper` or `=marker` decides otherwise).
pub fn isolation() -> Isolation {
    let mut st = state();
    decide(&mut st);
    st.isolation.clone().unwrap_or(Isolation::MarkerOnly {
        no_cgroup: Unavailable::NoUnifiedHierarchy,
        no_subreaper: None,
    })
}

fn decide(st: &mut State) {
    if st.isolation.is_some() {
        return;
    }
    let wanted = std::env::var(ISOLATION_VAR).ok().filter(|v| !v.is_empty() && v != "auto");
    let cgroups = match wanted {
        Some(value) => Err(Unavailable::TurnedOff { value }),
        None => try_cgroups(),
    };
    st.isolation = Some(match cgroups {
        Ok(base) => {
            for stale in base.remove_stale() {
                let killed = match stale.killed {
                    0 => String::new(),
                    n => format!(", and killed {n} process(es) still in it"),
                };
                eprintln!(
                    "conform: removed the cgroup {} of conform process {}, which is gone{killed}",
                    stale.path.display(),
                    stale.pid
                );
            }
            let run_group = base.run_path();
            st.base = Some(base);
            Isolation::Cgroup { run_group }
        }
        Err(no_cgroup) if std::env::var(ISOLATION_VAR).is_ok_and(|v| v == "marker") => {
            Isolation::MarkerOnly { no_cgroup, no_subreaper: None }
        }
        Err(no_cgroup) => become_subreaper(no_cgroup),
    });
}

/// Whether cgroups work here: the whole cycle once, on a trial group.
fn try_cgroups() -> Result<cgroup::Base, Unavailable> {
    let base = cgroup::Base::discover()?;
    let run = base.open_run()?;
    let trial = run.scenario("trial").and_then(|group| {
        let entered = group.enter_current_thread();
        group.release_own_threads();
        let _ = group.remove();
        entered.map_err(|e| Unavailable::Refused {
            action: "move a thread into the cgroup",
            path: group.path().to_path_buf(),
            error: e.to_string(),
        })
    });
    let closed = run.close();
    trial?;
    closed?;
    Ok(base)
}

fn become_subreaper(no_cgroup: Unavailable) -> Isolation {
    match nix::sys::prctl::set_child_subreaper(true) {
        Ok(()) => {
            start_reaper();
            Isolation::Subreaper { no_cgroup }
        }
        Err(errno) => Isolation::MarkerOnly { no_cgroup, no_subreaper: Some(errno) },
    }
}

/// As child subreaper conform must reap what it adopts, as init would, and at once: a tool
/// that checks whether its worker still runs (`kill(pid, 0)`) takes a zombie for alive. A
/// thread reaps every adopted zombie on each SIGCHLD (never a step: the driver reaps those).
fn start_reaper() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let Ok(mut signals) = signal_hook::iterator::Signals::new([signal_hook::consts::SIGCHLD])
        else {
            return;
        };
        let _ = std::thread::Builder::new().name("conform-reaper".into()).spawn(move || {
            for _ in signals.forever() {
                let me = procfs::me().pid;
                // The table is read without the lock; most SIGCHLDs are steps, which their
                // driver reaps.
                let zombies: Vec<(u32, Stat)> = procfs::pids()
                    .into_iter()
                    .filter_map(|pid| Some((pid, procfs::stat(pid)?)))
                    .filter(|(_, s)| s.ppid == me && s.is_dead())
                    .collect();
                if !zombies.is_empty() {
                    let mut st = state();
                    for (pid, seen) in zombies {
                        // Looked at again under the lock: only its holder reaps an adopted
                        // zombie, so the pid cannot be freed and reused from here on.
                        if let Some(stat) = procfs::stat(pid).filter(|s| {
                            s.start_ticks == seen.start_ticks && s.ppid == me && s.is_dead()
                        }) {
                            reap_if_adopted(&mut st, pid, &stat);
                        }
                    }
                }
            }
        });
    });
}

/// Says once on stderr that cgroups stopped working in the middle of the run.
fn warn_cgroup_failed(error: &Unavailable) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::SeqCst) {
        eprintln!(
            "conform: warning: a sandbox got no cgroup ({error}); falling back to the marker and a child subreaper"
        );
    }
}

/// Registers a new sandbox; with cgroups, makes its group and moves the calling thread in.
pub(super) fn register(marker: &str, root: &Path) {
    let mut st = state();
    decide(&mut st);
    let group = match (&st.isolation, &st.base) {
        (Some(Isolation::Cgroup { .. }), Some(base)) => {
            let base = base.clone();
            match scenario_group(&mut st, &base, marker) {
                Ok(group) => Some(group),
                Err(error) => {
                    warn_cgroup_failed(&error);
                    if st.live.is_empty() && st.ending == 0 {
                        // Nothing depends on the cgroups yet: leave them for good.
                        if let Some(run) = st.run_group.take() {
                            let _ = run.close();
                        }
                        st.isolation = Some(become_subreaper(error));
                    } else if nix::sys::prctl::set_child_subreaper(true).is_ok() {
                        start_reaper();
                    }
                    None
                }
            }
        }
        _ => None,
    };
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    let created_ticks = procfs::uptime_ticks().unwrap_or(0);
    st.live.insert(marker.to_owned(), LiveSandbox { root, created_ticks, group });
    ENTERED.with(|e| *e.borrow_mut() = Some(marker.to_owned()));
}

fn scenario_group(
    st: &mut State,
    base: &cgroup::Base,
    marker: &str,
) -> Result<cgroup::ScenarioGroup, Unavailable> {
    if st.run_group.is_none() {
        st.run_group = Some(base.open_run()?);
    }
    let Some(run) = &st.run_group else { return Err(Unavailable::NoUnifiedHierarchy) };
    let group = run.scenario(marker)?;
    if let Err(e) = group.enter_current_thread() {
        let _ = group.remove();
        return Err(Unavailable::Refused {
            action: "move a thread into the cgroup",
            path: group.path().to_path_buf(),
            error: e.to_string(),
        });
    }
    Ok(group)
}

/// Moves the calling thread into the sandbox's cgroup (when it has one and the thread is not
/// there already): what the thread starts from now on belongs to that sandbox.
pub(super) fn enter(marker: &str) {
    if ENTERED.with(|e| e.borrow().as_deref() == Some(marker)) {
        return;
    }
    let st = state();
    if let Some(group) = st.live.get(marker).and_then(|l| l.group.as_ref()) {
        let _ = group.enter_current_thread();
    }
    ENTERED.with(|e| *e.borrow_mut() = Some(marker.to_owned()));
}

/// Forgets an ended sandbox (after its last sweep): conform's threads leave its cgroup, which
/// is removed; after the last sandbox conform leaves its run group too.
pub(super) fn unregister(marker: &str) {
    let live = {
        let mut st = state();
        let Some(live) = st.live.remove(marker) else { return };
        // In the same breath as it leaves `live`, so that no orphan's start time is judged
        // without it.
        let ended_ticks = procfs::uptime_ticks().unwrap_or(u64::MAX);
        st.ended.push_back(EndedSandbox { created_ticks: live.created_ticks, ended_ticks });
        while st.ended.len() > ENDED_MEMORY {
            st.ended.pop_front();
        }
        st.ending += 1;
        live
    };
    ENTERED.with(|e| {
        let mut entered = e.borrow_mut();
        if entered.as_deref() == Some(marker) {
            *entered = None;
        }
    });
    // Moving threads waits for the kernel (an RCU grace period): not under the lock.
    if let Some(group) = &live.group {
        group.release_own_threads();
        for _ in 0..10 {
            // Busy only while a killed process is still being torn down.
            if group.remove().is_ok() {
                break;
            }
            std::thread::sleep(PASS_PAUSE);
        }
    }
    let mut st = state();
    st.ending = st.ending.saturating_sub(1);
    if st.live.is_empty() && st.ending == 0 {
        if let Some(run) = st.run_group.take() {
            if let Err(error) = run.close() {
                warn_cgroup_failed(&error);
            }
        }
    }
}

/// Finds, kills and returns every process of one sandbox: those in its cgroup, those carrying
/// its marker, and (as child subreaper) the orphans attributed to it. Orphans that no sandbox
/// can be charged with are killed too and kept for [`end_of_run`].
pub(super) fn sweep(marker: &str) -> Vec<LeakedProcess> {
    let entry = marker_entry(marker);
    let mut mine = Catch::default();
    let mut of_the_run = Catch::default();
    for _ in 0..MAX_PASSES {
        let new = {
            let mut st = state();
            if adopting(&st) {
                // Judging orphans needs the whole state to stand still for the pass.
                pass(&mut st, marker, &entry, &mut mine, &mut of_the_run)
            } else {
                let members =
                    st.live.get(marker).and_then(|l| l.group.as_ref()).map(|g| g.members());
                drop(st);
                exact_pass(&members.unwrap_or_default(), &entry, &mut mine)
            }
        };
        if !new && mine.all_gone() && of_the_run.all_gone() {
            break;
        }
        std::thread::sleep(PASS_PAUSE);
    }
    let mut st = state();
    reap_known(&mut st);
    st.unattributed.extend(of_the_run.found);
    mine.found
}

/// One pass by the cgroup's members and the marker alone (no orphans to judge): nothing of the
/// shared state is needed, so no lock is held while the process table is read.
fn exact_pass(members: &[u32], entry: &[u8], mine: &mut Catch) -> bool {
    let me = procfs::me();
    let mut new = false;
    for &pid in members {
        if let Some(stat) = procfs::stat(pid).filter(|s| !s.is_gone()) {
            new |= mine.take(pid, &stat, FoundBy::Cgroup, false);
        }
    }
    for pid in procfs::pids().into_iter().filter(|pid| *pid != me.pid) {
        if !procfs::environ(pid).is_some_and(|env| procfs::has_entry(&env, entry)) {
            continue;
        }
        if let Some(stat) = procfs::stat(pid).filter(|s| !s.is_gone()) {
            new |= mine.take(pid, &stat, FoundBy::Marker, true);
        }
    }
    new
}

/// One look at the process table for `marker`'s sandbox; returns whether it caught anything
/// new.
fn pass(
    st: &mut State,
    marker: &str,
    entry: &[u8],
    mine: &mut Catch,
    of_the_run: &mut Catch,
) -> bool {
    let me = procfs::me();
    let mut new = false;
    if let Some(group) = st.live.get(marker).and_then(|l| l.group.as_ref()) {
        for pid in group.members() {
            if let Some(stat) = procfs::stat(pid).filter(|s| !s.is_gone()) {
                new |= mine.take(pid, &stat, FoundBy::Cgroup, false);
            }
        }
    }
    let adopting = adopting(st);
    let alone = st.live.len() == 1 && st.live.contains_key(marker);
    let others: Vec<Vec<u8>> =
        st.live.keys().filter(|m| *m != marker).map(|m| marker_entry(m)).collect();
    for pid in procfs::pids() {
        if pid == me.pid {
            continue;
        }
        let Some(stat) = procfs::stat(pid) else { continue };
        let child = stat.ppid == me.pid;
        if stat.is_dead() {
            if adopting && child {
                reap_if_adopted(st, pid, &stat);
            }
            continue;
        }
        if stat.is_gone() {
            continue;
        }
        let environ = procfs::environ(pid).unwrap_or_default();
        if procfs::has_entry(&environ, entry) {
            new |= mine.take(pid, &stat, FoundBy::Marker, true);
            continue;
        }
        if !adopting || !child || others.iter().any(|o| procfs::has_entry(&environ, o)) {
            continue;
        }
        if !is_adopted(pid, &stat, me, alone) {
            continue;
        }
        match owner_of(st, pid, &stat) {
            Owner::Sandbox(owner, found_by) if owner == marker => {
                new |= mine.take(pid, &stat, found_by, false);
                remember_for_reaping(st, pid, &stat, me);
            }
            // Another live sandbox's: its own sweep takes it.
            Owner::Sandbox(..) => {}
            // It may belong to a sandbox still running (a detached worker that scenario still
            // needs, say): only once none of those is left does it go, as a leak of the run.
            Owner::Run { live_candidates } if live_candidates.iter().all(|m| m == marker) => {
                new |= of_the_run.take(pid, &stat, FoundBy::OrphanOfTheRun, false);
                remember_for_reaping(st, pid, &stat, me);
            }
            Owner::Run { .. } => {}
        }
    }
    new
}

fn adopting(st: &State) -> bool {
    match &st.isolation {
        Some(Isolation::Subreaper { .. }) => true,
        // A sandbox that got no cgroup made conform a subreaper as well.
        Some(Isolation::Cgroup { .. }) => st.live.values().any(|l| l.group.is_none()),
        _ => false,
    }
}

/// Whether a live child of conform is an orphan it adopted rather than a step it started.
///
/// A step is started in a process group of its own (pgid = pid) in conform's session, and as
/// a group leader it can never leave the session; conform starts nothing else outside its own
/// group. So a child in conform's own group is not a step's (a helper of the embedding
/// program), a child still running conform's program is a step between fork and exec, and a
/// child in another session, or in a group that is neither its own nor conform's, is certainly
/// adopted. A child that looks like a step (its own group, conform's session: an orphan that
/// made a group of its own without leaving the session) is taken only while `alone`, when no
/// other sandbox can have a step running.
fn is_adopted(pid: u32, stat: &Stat, me: &Me, alone: bool) -> bool {
    if stat.pgid == me.pgid {
        return false;
    }
    if me.exe.is_some() && procfs::exe(pid) == me.exe {
        return false;
    }
    let looks_like_a_step = stat.pgid == pid && stat.sid == me.sid;
    !looks_like_a_step || alone
}

enum Owner {
    Sandbox(String, FoundBy),
    /// None can be told; these of the sandboxes alive when it started still live.
    Run {
        live_candidates: Vec<String>,
    },
}

/// The sandbox an adopted orphan belongs to: the one whose directory it works in, else the
/// only one alive when it started; else none (the run's).
fn owner_of(st: &State, pid: u32, stat: &Stat) -> Owner {
    if let Some(cwd) = procfs::cwd(pid) {
        if let Some((marker, _)) = st.live.iter().find(|(_, l)| cwd.starts_with(&l.root)) {
            return Owner::Sandbox(marker.clone(), FoundBy::OrphanInSandbox);
        }
    }
    // Both clocks tick at 10 ms: a tick either side is a tie, and a tie is not a proof.
    let started = stat.start_ticks;
    let alive_then =
        |created: u64, ended: u64| created.saturating_sub(1) <= started && started <= ended + 1;
    let live_then: Vec<String> = st
        .live
        .iter()
        .filter(|(_, l)| alive_then(l.created_ticks, u64::MAX - 1))
        .map(|(marker, _)| marker.clone())
        .collect();
    let ended_then = st.ended.iter().filter(|e| alive_then(e.created_ticks, e.ended_ticks)).count();
    match (live_then.as_slice(), ended_then) {
        ([marker], 0) => Owner::Sandbox(marker.clone(), FoundBy::OrphanStartedAlone),
        _ => Owner::Run { live_candidates: live_then },
    }
}

/// Whether a child of conform is certainly not one of its steps, alive or dead: outside
/// conform's session, or in a group neither its own nor conform's, and not running conform's
/// program (a step that died between fork and exec). Only such a child may be reaped: a step's
/// leader is reaped by the driver that started it.
fn certainly_adopted(pid: u32, stat: &Stat, me: &Me) -> bool {
    let in_foreign_group = stat.pgid != pid && stat.pgid != me.pgid;
    (in_foreign_group || stat.sid != me.sid) && stat.comm != me.comm
}

/// Remembers a killed orphan for reaping once it is a zombie, if it may be reaped.
fn remember_for_reaping(st: &mut State, pid: u32, stat: &Stat, me: &Me) {
    if certainly_adopted(pid, stat, me) {
        st.reapable.insert(pid);
    }
}

/// Reaps a zombie child of conform when it is certainly an adopted orphan.
fn reap_if_adopted(st: &mut State, pid: u32, stat: &Stat) {
    if st.reapable.contains(&pid) || certainly_adopted(pid, stat, procfs::me()) {
        reap(pid);
        st.reapable.remove(&pid);
    }
}

/// Reaps the killed orphans that have become zombies.
fn reap_known(st: &mut State) {
    let me = procfs::me().pid;
    st.reapable.retain(|pid| match procfs::stat(*pid) {
        Some(s) if s.ppid == me && s.is_dead() => {
            reap(*pid);
            false
        }
        Some(s) => s.ppid == me,
        None => false,
    });
}

fn reap(pid: u32) {
    if let Ok(raw) = i32::try_from(pid) {
        let _ = waitpid(Pid::from_raw(raw), Some(WaitPidFlag::WNOHANG));
    }
}

/// Once every sandbox has ended: kills every orphan conform adopted that is still running
/// (with no sandbox alive, no step runs, so each is the tool's), and returns them with every
/// leak no single sandbox could be charged with during the run (`-j` without cgroups). The
/// caller reports them as leaks of the run. Does nothing while a sandbox lives.
pub fn end_of_run() -> Vec<LeakedProcess> {
    let mut of_the_run = Catch::default();
    for _ in 0..MAX_PASSES {
        let new = {
            let mut st = state();
            if !st.live.is_empty() || !adopting_at_all(&st) {
                break;
            }
            let me = procfs::me();
            let mut new = false;
            for pid in procfs::pids() {
                let Some(stat) = procfs::stat(pid).filter(|s| s.ppid == me.pid) else { continue };
                if stat.is_dead() {
                    reap_if_adopted(&mut st, pid, &stat);
                } else if !stat.is_gone() && is_adopted(pid, &stat, me, true) {
                    new |= of_the_run.take(pid, &stat, FoundBy::OrphanOfTheRun, false);
                    remember_for_reaping(&mut st, pid, &stat, me);
                }
            }
            new
        };
        if !new && of_the_run.all_gone() {
            break;
        }
        std::thread::sleep(PASS_PAUSE);
    }
    let mut st = state();
    reap_known(&mut st);
    let mut leaks = std::mem::take(&mut st.unattributed);
    leaks.extend(of_the_run.found);
    leaks
}

fn adopting_at_all(st: &State) -> bool {
    nix::sys::prctl::get_child_subreaper().unwrap_or(false)
        || matches!(st.isolation, Some(Isolation::Subreaper { .. }))
}

/// For conform's interruption: SIGKILLs, in one pass, every process of every live sandbox
/// (its cgroup's, those carrying its marker or one of `markers`) and, as child subreaper,
/// every child of conform outside its own process group. Returns how many it signalled.
pub(crate) fn kill_everything(markers: &[String]) -> usize {
    let st = state();
    let me = procfs::me();
    let entries: BTreeSet<Vec<u8>> =
        st.live.keys().chain(markers).map(|m| marker_entry(m)).collect();
    let mut doomed: BTreeMap<u32, (Stat, bool)> = BTreeMap::new();
    for group in st.live.values().filter_map(|l| l.group.as_ref()) {
        for pid in group.members() {
            if let Some(stat) = procfs::stat(pid).filter(|s| !s.is_gone()) {
                doomed.insert(pid, (stat, false));
            }
        }
    }
    let adopting = adopting_at_all(&st);
    for pid in procfs::pids().into_iter().filter(|pid| *pid != me.pid) {
        let Some(stat) = procfs::stat(pid).filter(|s| !s.is_gone()) else { continue };
        let environ = procfs::environ(pid).unwrap_or_default();
        if entries.iter().any(|e| procfs::has_entry(&environ, e)) {
            doomed.insert(pid, (stat, true));
        } else if adopting && stat.ppid == me.pid && stat.pgid != me.pgid {
            doomed.insert(pid, (stat, false));
        }
    }
    for (pid, (stat, group_too)) in &doomed {
        super::sweep::kill_exactly(*pid, stat.start_ticks);
        if *group_too && stat.pgid > 1 && stat.pgid != me.pgid {
            if let Ok(group) = i32::try_from(stat.pgid) {
                let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
            }
        }
    }
    doomed.len()
}

/// For conform's interruption, once everything is killed: conform's threads leave the
/// sandboxes' cgroups, which are removed, and conform leaves its run group.
pub(crate) fn release_everything() {
    let mut st = state();
    for group in st.live.values().filter_map(|l| l.group.as_ref()) {
        group.release_own_threads();
        let _ = group.remove();
    }
    if let Some(run) = st.run_group.take() {
        let _ = run.close();
    }
}
