//! How many scenarios run at once when `-j` is not given: measured as the run goes, not
//! guessed from the tool's start-up alone.
//!
//! Scenarios mostly wait on the tool (its pacing, budgets, jobs), so many at once shorten a
//! run. But every call starts a process, and what one costs the machine differs by tool: a
//! Rust binary's start-up is a few milliseconds of CPU, a Python tool's fifty, a tool that
//! warms a cache at each call far more. Too many at once and the tool's own processes queue
//! for the CPU: a hand-off answers seconds after its budget, a cancel lands after the job
//! ended, a signal arrives before the handlers exist. The verdicts then describe the machine,
//! not the tool.
//!
//! So the number of scenarios in flight (the *limit*) follows two measurements:
//!
//! - **The tool's CPU per call**, from the manifest command's run at discovery: the first
//!   limit admits as many scenarios as the cores can start in about a tenth of a second
//!   ([`initial_limit`]), and never fewer than one per core.
//! - **How much its processes are stretched** as the run goes: every process conform starts
//!   is read as it exits ([`crate::exec::usage`]): how long it waited, runnable, for a CPU.
//!   That wait is what a loaded machine adds to every call, whoever loads it (the scenarios
//!   themselves, conform's own threads, another conform beside it, a build). Every [`TICK`]
//!   the pace looks at the processes that ended in it ([`next_limit`]): stretched (a median
//!   wait above [`DELAY_HIGH`]), the limit falls by a third at once; calm (below
//!   [`DELAY_LOW`]) while the limit is what holds scenarios back, it grows by a quarter;
//!   otherwise, or when too few processes ended to tell, it stays. This is how TCP finds the
//!   rate a path can carry, applied to a machine's cores.
//!
//! Scenarios already running are never stopped: the limit only holds back the next ones.
//! `-j N` fixes the number instead ([`Gate::Open`] with `N` workers), for a vendor who has
//! measured their own machine. The report says how the pace went ([`PaceSummary`]).

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::exec::usage::{self, UsageTotals};

/// The variable naming a file to which the pace appends what it saw at each tick.
pub const LOG_ENV: &str = "CONFORM_PACE_LOG";

/// How often the pace looks at the machine.
pub const TICK: Duration = Duration::from_millis(500);

/// The CPU a burst of admitted scenarios may ask of each core at once: the first limit lets
/// in as many scenarios as the cores can start the tool for in this much time.
pub const FIRST_BURST: Duration = Duration::from_millis(100);

/// The median wait for a CPU of the processes that ended in a tick above which they were
/// stretched: a tenth of `{slack}` ([`crate::calibrate::SLACK`]), which a scenario of a few
/// calls in a row would otherwise eat. Measured on a correct Python implementation on two
/// cores: 8 scenarios at once waited 27 ms (median) and failed nothing, 16 waited 240 ms and
/// 32 waited 480 ms, with two and six scenarios failing beside the others.
pub const DELAY_HIGH: Duration = Duration::from_millis(150);
/// The median wait below which the machine is calm.
pub const DELAY_LOW: Duration = Duration::from_millis(60);

/// Ticks the limit holds after it fell, so that the fall can show before it is judged again.
const HOLD_AFTER_FALL: u32 = 2;

/// How the scenarios of a run are let in.
pub enum Gate {
    /// As many at once as there are workers (`-j N`, or one at a time for a confirmation).
    Open,
    /// By the pace.
    Paced(Arc<Pace>),
}

impl Gate {
    /// Waits until one more scenario may run; the returned guard lets the next one in when
    /// dropped.
    pub fn admit(&self) -> Admitted<'_> {
        match self {
            Gate::Open => Admitted { pace: None },
            Gate::Paced(pace) => pace.admit(),
        }
    }
}

/// One scenario's place among those running (see [`Gate::admit`]).
pub struct Admitted<'a> {
    pace: Option<&'a Pace>,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        if let Some(pace) = self.pace {
            pace.release();
        }
    }
}

/// What the machine showed in one tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sample {
    /// The median wait for a CPU of the processes that ended in the tick (`None`: too few
    /// ended to tell).
    pub run_delay: Option<Duration>,
    /// How many ended.
    pub processes: u64,
}

impl Sample {
    /// Whether the machine stretched the processes.
    pub fn stretched(&self) -> bool {
        self.run_delay.is_some_and(|d| d > DELAY_HIGH)
    }

    /// Whether it was calm: processes ended and barely waited.
    pub fn calm(&self) -> bool {
        self.run_delay.is_some_and(|d| d < DELAY_LOW)
    }
}

/// The bounds of the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Bounds {
    /// Never fewer at once (one per core).
    pub floor: usize,
    /// Never more.
    pub ceiling: usize,
}

/// The next limit after a tick that showed `sample`, with `running` scenarios in flight.
pub fn next_limit(limit: usize, running: usize, sample: &Sample, bounds: Bounds) -> usize {
    let next = if sample.stretched() {
        // What runs now is already too much: a third less than that, not than the limit.
        running.min(limit) * 2 / 3
    } else if sample.calm() && running + 1 >= limit {
        limit + (limit / 4).max(1)
    } else {
        limit
    };
    next.clamp(bounds.floor, bounds.ceiling.max(bounds.floor))
}

/// The first limit: as many scenarios as the cores can start the tool for in
/// [`FIRST_BURST`], given its CPU per call (`None`: not measured, one per core).
pub fn initial_limit(cpu_per_call: Option<Duration>, bounds: Bounds) -> usize {
    let cores = bounds.floor;
    let limit = match cpu_per_call {
        Some(cpu) => {
            let per_core = FIRST_BURST.as_micros() / cpu.as_micros().max(1);
            usize::try_from(per_core).unwrap_or(usize::MAX).saturating_mul(cores)
        }
        None => cores,
    };
    limit.clamp(bounds.floor, bounds.ceiling.max(bounds.floor))
}

/// How the pace went, for the report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaceSummary {
    /// The first limit.
    pub first: usize,
    /// The highest limit reached.
    pub peak: usize,
    /// The limit at the end.
    pub last: usize,
    /// Its ceiling.
    pub ceiling: usize,
    /// How often it fell because the machine was stretched.
    pub falls: u32,
    /// The tool's CPU per call it started from, in microseconds (`None`: not measured).
    pub cpu_per_call_us: Option<u64>,
    /// The mean wait for a CPU of every process the run counted, in microseconds (`None`:
    /// the kernel keeps no scheduler statistics, and the pace stayed at its first limit).
    pub mean_run_delay_us: Option<u64>,
}

struct State {
    limit: usize,
    running: usize,
    summary: PaceSummary,
    hold: u32,
    stopped: bool,
}

/// The pace of one run (see the module docs).
pub struct Pace {
    state: Mutex<State>,
    changed: Condvar,
    bounds: Bounds,
    started_with: UsageTotals,
}

impl Pace {
    /// A pace within `bounds`, starting from the tool's measured CPU per call.
    pub fn new(cpu_per_call: Option<Duration>, bounds: Bounds) -> Arc<Self> {
        let first = initial_limit(cpu_per_call, bounds);
        Arc::new(Pace {
            state: Mutex::new(State {
                limit: first,
                running: 0,
                summary: PaceSummary {
                    first,
                    peak: first,
                    last: first,
                    ceiling: bounds.ceiling,
                    falls: 0,
                    cpu_per_call_us: cpu_per_call.map(micros),
                    mean_run_delay_us: None,
                },
                hold: 0,
                stopped: false,
            }),
            changed: Condvar::new(),
            bounds,
            started_with: usage::totals(),
        })
    }

    /// The highest number of scenarios that can ever run at once: the number of workers.
    pub fn ceiling(&self) -> usize {
        self.bounds.ceiling
    }

    /// The limit now.
    pub fn limit(&self) -> usize {
        self.lock().limit
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn admit(&self) -> Admitted<'_> {
        let mut state = self.lock();
        while state.running >= state.limit && !state.stopped {
            state = self.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        state.running += 1;
        Admitted { pace: Some(self) }
    }

    fn release(&self) {
        let mut state = self.lock();
        state.running = state.running.saturating_sub(1);
        drop(state);
        self.changed.notify_all();
    }

    /// Takes one tick's sample into account.
    pub fn observe(&self, sample: &Sample) {
        let mut state = self.lock();
        if state.hold > 0 {
            state.hold -= 1;
            return;
        }
        let next = next_limit(state.limit, state.running, sample, self.bounds);
        if next < state.limit {
            state.summary.falls += 1;
            state.hold = HOLD_AFTER_FALL;
        }
        state.limit = next;
        state.summary.peak = state.summary.peak.max(next);
        state.summary.last = next;
        drop(state);
        self.changed.notify_all();
    }

    /// Starts the thread that samples the machine every [`TICK`] until [`Pace::stop`]. With
    /// [`LOG_ENV`] set to a file, each tick's sample and limit are appended to it (for whoever
    /// tunes the pace on their machine).
    pub fn start_sampling(self: &Arc<Self>) -> std::io::Result<JoinHandle<()>> {
        let pace = Arc::clone(self);
        let log = std::env::var_os(LOG_ENV)
            .and_then(|path| std::fs::OpenOptions::new().create(true).append(true).open(path).ok());
        std::thread::Builder::new().name("conform-pace".to_owned()).spawn(move || {
            let mut sampler = Sampler::new();
            let started = std::time::Instant::now();
            let mut log = log;
            loop {
                std::thread::sleep(TICK);
                if pace.lock().stopped {
                    return;
                }
                let sample = sampler.sample();
                pace.observe(&sample);
                if let Some(file) = log.as_mut() {
                    use std::io::Write;
                    let state = pace.lock();
                    let (limit, running) = (state.limit, state.running);
                    drop(state);
                    let _ = writeln!(
                        file,
                        "{} limit={limit} running={running} ended={} run_delay_ms={}",
                        started.elapsed().as_millis(),
                        sample.processes,
                        sample.run_delay.map_or("-".to_owned(), |d| d.as_millis().to_string()),
                    );
                }
            }
        })
    }

    /// Stops the sampling (any waiting admission goes through) and says how the pace went.
    pub fn stop(&self) -> PaceSummary {
        let mut state = self.lock();
        state.stopped = true;
        let counted = usage::totals().since(&self.started_with);
        state.summary.mean_run_delay_us = counted.mean_run_delay().map(micros);
        let summary = state.summary.clone();
        drop(state);
        self.changed.notify_all();
        summary
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Reads the processes that ended between two ticks.
struct Sampler {
    seen: u64,
}

/// Fewer processes than this ending in a tick tell nothing about their waits.
const FEW_PROCESSES: usize = 3;

impl Sampler {
    fn new() -> Self {
        Sampler { seen: usage::totals().processes }
    }

    fn sample(&mut self) -> Sample {
        let (counted, mut waits) = usage::waits_since(self.seen);
        self.seen = counted;
        let processes = waits.len() as u64;
        waits.sort_unstable();
        let run_delay = (waits.len() >= FEW_PROCESSES).then(|| waits[waits.len() / 2]);
        Sample { run_delay, processes }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: Bounds = Bounds { floor: 2, ceiling: 64 };
    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn sample(delay_ms: u64) -> Sample {
        Sample { run_delay: Some(ms(delay_ms)), processes: 10 }
    }

    #[test]
    fn the_first_limit_follows_the_cpu_a_call_costs() {
        // A Rust binary's 4 ms: 25 a core; a Python start-up's 50 ms: 2 a core; a tool that
        // burns 400 ms a call: one a core.
        assert_eq!(initial_limit(Some(ms(4)), BOUNDS), 50);
        assert_eq!(initial_limit(Some(ms(50)), BOUNDS), 4);
        assert_eq!(initial_limit(Some(ms(400)), BOUNDS), 2);
        assert_eq!(initial_limit(Some(Duration::ZERO), BOUNDS), 64);
        assert_eq!(initial_limit(None, BOUNDS), 2);
    }

    #[test]
    fn a_stretched_machine_cuts_what_runs_by_a_third() {
        assert_eq!(next_limit(30, 30, &sample(500), BOUNDS), 20);
        // Fewer running than the limit: the cut is from what runs.
        assert_eq!(next_limit(30, 9, &sample(500), BOUNDS), 6);
        // Never below one per core.
        assert_eq!(next_limit(3, 3, &sample(900), BOUNDS), 2);
    }

    #[test]
    fn a_calm_machine_grows_the_limit_only_while_it_holds_scenarios_back() {
        assert_eq!(next_limit(8, 8, &sample(5), BOUNDS), 10);
        assert_eq!(next_limit(8, 7, &sample(5), BOUNDS), 10);
        assert_eq!(next_limit(2, 2, &sample(5), BOUNDS), 3);
        assert_eq!(next_limit(8, 3, &sample(5), BOUNDS), 8);
        assert_eq!(next_limit(60, 60, &sample(0), BOUNDS), 64);
        // Neither calm nor stretched: it stays.
        assert_eq!(next_limit(8, 8, &sample(80), BOUNDS), 8);
    }

    #[test]
    fn a_tick_in_which_too_few_processes_ended_changes_nothing() {
        let nothing = Sample::default();
        assert!(!nothing.calm() && !nothing.stretched());
        assert_eq!(next_limit(4, 4, &nothing, BOUNDS), 4);
    }

    #[test]
    fn admissions_wait_for_the_limit_and_a_release_lets_the_next_in() {
        let pace = Pace::new(Some(ms(50)), Bounds { floor: 1, ceiling: 4 });
        assert_eq!(pace.limit(), 2);
        let gate = Gate::Paced(Arc::clone(&pace));
        let a = gate.admit();
        let _b = gate.admit();
        let admitted = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                let _c = gate.admit();
                admitted.store(true, std::sync::atomic::Ordering::SeqCst);
            });
            std::thread::sleep(ms(100));
            assert!(!admitted.load(std::sync::atomic::Ordering::SeqCst));
            drop(a);
        });
        assert!(admitted.load(std::sync::atomic::Ordering::SeqCst));
        let summary = pace.stop();
        assert_eq!((summary.first, summary.ceiling), (2, 4));
    }

    #[test]
    fn a_fall_holds_before_the_next_judgement() {
        let pace = Pace::new(Some(ms(1)), Bounds { floor: 1, ceiling: 30 });
        assert_eq!(pace.limit(), 30);
        let gate = Gate::Paced(Arc::clone(&pace));
        let running: Vec<_> = (0..30).map(|_| gate.admit()).collect();
        pace.observe(&sample(900));
        assert_eq!(pace.limit(), 20);
        // Held: the next two ticks do not cut again.
        pace.observe(&sample(900));
        pace.observe(&sample(900));
        assert_eq!(pace.limit(), 20);
        pace.observe(&sample(900));
        assert_eq!(pace.limit(), 13);
        drop(running);
        assert_eq!(pace.stop().falls, 2);
    }
}
