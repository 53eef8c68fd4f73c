//! Schedules: what one trial of a campaign does to one role's work, drawn from a seed.
//!
//! A schedule is pure data: a role and a short list of [`Event`]s (calls with a budget, kills
//! of the caller or of the detached worker at an offset, cancels, identical invocations at
//! once, `job wait` / `job status`). Every trial then ends the same way (the *epilogue*): the
//! identical invocation, its `continue_command` run verbatim until the exit is not 14, and the
//! role's effect oracle. [`draw`] makes a schedule from `(seed, trial)` alone with a PRNG of
//! its own ([`Rng`], SplitMix64), so `--seed S --trial T` replays it anywhere;
//! [`shrink_candidates`] proposes smaller schedules; [`to_scenario`] writes one as an ordinary
//! scenario file that `conform run` executes.
//!
//! Offsets are milliseconds measured on this machine (from the role's calibrated duration D):
//! a replay on the same machine hits the same moment of the work.

use std::fmt;

use serde::{Deserialize, Serialize};

/// SplitMix64: a small, fast, well-mixed PRNG; enough for drawing schedules, and no dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for trial `trial` of the campaign seeded `seed`: each trial's stream is its
    /// own, so trials can run in any order, at once, or alone on replay.
    pub fn for_trial(seed: u64, trial: u64) -> Self {
        let mut r = Rng(seed ^ 0x6a09_e667_f3bc_c908);
        let mixed = r.next_u64() ^ trial.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        Rng(mixed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[lo, hi]` (`lo` when `hi <= lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo { lo } else { lo + self.next_u64() % (hi - lo + 1) }
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

/// A signal conform sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Sig {
    /// SIGKILL: the machine or the agent ends the process; nothing of it runs on.
    Kill,
    /// SIGTERM: a polite stop (a detaching command hands off at once, a resume command pauses).
    Term,
    /// SIGINT: Ctrl-C.
    Int,
}

impl Sig {
    /// The name a scenario's `signal` takes.
    pub fn name(self) -> &'static str {
        match self {
            Sig::Kill => "KILL",
            Sig::Term => "TERM",
            Sig::Int => "INT",
        }
    }
}

/// A call's budget, given as `AGENT_CALL_BUDGET_MS` so that every call of a trial is the
/// identical invocation however the tool counts `--budget` into a job's identity (the spec
/// keys on the normalized arguments and is silent on it, `docs/contract.md` §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "ms")]
pub enum Budget {
    /// 0: the budget switched off; the call runs to the end.
    Off,
    /// This many milliseconds.
    Ms(u64),
}

impl Budget {
    /// The value of `AGENT_CALL_BUDGET_MS`.
    pub fn env_value(self) -> String {
        match self {
            Budget::Off => "0".to_owned(),
            Budget::Ms(ms) => ms.max(1).to_string(),
        }
    }
}

/// One thing a trial does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "event")]
pub enum Event {
    /// The role's invocation, `copies` identical ones at once, with this budget; when
    /// `signal` is set, that signal goes to the caller's process group `after_ms` after its
    /// start (a caller killed, stopped or interrupted mid-work).
    Call {
        /// The budget of every copy.
        budget: Budget,
        /// How many identical invocations start at once (1: one).
        copies: u32,
        /// A signal to the caller's process group, and when.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signal: Option<(Sig, u64)>,
    },
    /// Wait `after_ms`, then SIGKILL every detached worker of the trial's sandbox.
    KillWorker {
        /// The wait, in milliseconds.
        after_ms: u64,
    },
    /// Wait `after_ms`, then run the last answered call's `cancel_command`.
    Cancel {
        /// The wait, in milliseconds.
        after_ms: u64,
    },
    /// `job wait <id>` of the last answered call's job, with this budget.
    Wait {
        /// Its budget.
        budget: Budget,
    },
    /// `job status <id>` of the last answered call's job (it never waits).
    Status,
}

impl Event {
    /// Whether the event is a call that answers a response later events can use (a job id,
    /// a cancel command): one with no SIGKILL into it.
    fn answers(&self) -> bool {
        matches!(self, Event::Call { signal, .. } if !matches!(signal, Some((Sig::Kill, _))))
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let budget = |b: &Budget| match b {
            Budget::Off => "budget 0".to_owned(),
            Budget::Ms(ms) => format!("budget {ms} ms"),
        };
        match self {
            Event::Call { budget: b, copies, signal } => {
                write!(f, "call ({})", budget(b))?;
                if *copies > 1 {
                    write!(f, " x{copies} at once")?;
                }
                if let Some((sig, after)) = signal {
                    write!(f, ", SIG{} to the caller at {after} ms", sig.name())?;
                }
                Ok(())
            }
            Event::KillWorker { after_ms } => write!(f, "kill -9 the worker {after_ms} ms later"),
            Event::Cancel { after_ms } => write!(f, "job cancel {after_ms} ms later"),
            Event::Wait { budget: b } => write!(f, "job wait ({})", budget(b)),
            Event::Status => write!(f, "job status"),
        }
    }
}

/// What the campaign knows of a role when it draws a schedule for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleShape {
    /// The role's name in the profile.
    pub name: String,
    /// Its command hands off to a detached job (`interruption.detach`).
    pub detach: bool,
    /// Its command resumes from checkpoints (`interruption.resume`).
    pub resume: bool,
    /// D, the calibrated `--budget 0` duration, in milliseconds.
    pub calibrated_ms: u64,
    /// The tool's measured start-up (its manifest command), in milliseconds.
    pub startup_ms: u64,
}

/// One trial's schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Schedule {
    /// The role whose work it interrupts.
    pub role: String,
    /// The events, in order; the epilogue follows them.
    pub events: Vec<Event>,
    /// The budget of the epilogue's identical invocation (its continue loop takes over).
    pub final_budget_ms: u64,
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.role)?;
        if self.events.is_empty() {
            write!(f, "(no event)")?;
        }
        for (i, e) in self.events.iter().enumerate() {
            if i > 0 {
                write!(f, "; ")?;
            }
            write!(f, "{e}")?;
        }
        write!(
            f,
            "; then the identical invocation ({} ms) continued to the end",
            self.final_budget_ms
        )
    }
}

impl Schedule {
    /// The offsets of the kills in the schedule, in milliseconds from the start of the call or
    /// wait they interrupt, with whom they hit (for the histogram of kill offsets).
    pub fn kills(&self) -> Vec<(KillTarget, u64)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Call { signal: Some((Sig::Kill, after)), .. } => {
                    Some((KillTarget::Caller, *after))
                }
                Event::KillWorker { after_ms } => Some((KillTarget::Worker, *after_ms)),
                _ => None,
            })
            .collect()
    }

    /// Where in the work each kill fell, roughly, in milliseconds of work: the offsets of a
    /// resume command's killed calls add up (each resumes where the last checkpoint left it),
    /// a detached job runs on through its hand-off budget and the waits after it, and a cancel
    /// starts the work again. `startup_ms` is taken off a call's offset (no work is done
    /// before the tool has started).
    pub fn kill_positions(&self, startup_ms: u64) -> Vec<(KillTarget, u64)> {
        let mut at = 0u64;
        let mut out = Vec::new();
        for e in &self.events {
            match e {
                Event::Call { signal: Some((sig, after)), .. } => {
                    at += after.saturating_sub(startup_ms);
                    if *sig == Sig::Kill {
                        out.push((KillTarget::Caller, at));
                    }
                }
                Event::Call { budget: Budget::Ms(ms), .. } => at += ms,
                Event::Call { .. } | Event::Status => {}
                Event::KillWorker { after_ms } => {
                    at += after_ms;
                    out.push((KillTarget::Worker, at));
                }
                Event::Cancel { .. } => at = 0,
                Event::Wait { budget: Budget::Ms(ms) } => at += ms,
                Event::Wait { .. } => {}
            }
        }
        out
    }

    /// The largest number of identical invocations at once.
    pub fn copies(&self) -> u32 {
        self.events
            .iter()
            .map(|e| match e {
                Event::Call { copies, .. } => *copies,
                _ => 1,
            })
            .max()
            .unwrap_or(1)
    }
}

/// Whom a kill hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KillTarget {
    /// The caller's process group (for a resume-only command, the work itself).
    Caller,
    /// The detached worker.
    Worker,
}

/// The budget the epilogue's call gets: a quarter of the work, at least 300 ms (conform's
/// `{budget}`), so the continue loop takes over and runs verbatim.
pub fn final_budget(shape: &RoleShape) -> u64 {
    (shape.calibrated_ms / 4).max(300).div_ceil(10) * 10
}

/// The schedule of trial `trial` of the campaign seeded `seed` over these roles (one is
/// picked per trial, uniformly). Kills are drawn uniformly over the whole calibrated work;
/// several kills of one trial are placed so that their work adds up to less than the whole
/// (the trial ends with work still to do, which the epilogue finishes).
pub fn draw(seed: u64, trial: u64, roles: &[RoleShape]) -> Option<Schedule> {
    let mut rng = Rng::for_trial(seed, trial);
    let shape = roles.get(rng.range(0, roles.len().checked_sub(1)? as u64) as usize)?;
    let events =
        if shape.detach { detach_events(&mut rng, shape) } else { resume_events(&mut rng, shape) };
    Some(Schedule { role: shape.name.clone(), events, final_budget_ms: final_budget(shape) })
}

/// `n` points in `[0, span)`, sorted, as the gaps between them (the first from 0).
fn gaps(rng: &mut Rng, n: usize, span: u64) -> Vec<u64> {
    let mut points: Vec<u64> = (0..n).map(|_| rng.range(0, span.saturating_sub(1))).collect();
    points.sort_unstable();
    let mut last = 0;
    points
        .into_iter()
        .map(|p| {
            let gap = p - last;
            last = p;
            gap
        })
        .collect()
}

/// A resume-only command (the caller is the work): calls killed, stopped or interrupted at
/// offsets over the work, or paused by a budget; now and then two at once.
fn resume_events(rng: &mut Rng, shape: &RoleShape) -> Vec<Event> {
    let d = shape.calibrated_ms.max(1);
    let n = rng.range(1, 3) as usize;
    let mut events = Vec::new();
    for gap in gaps(rng, n, d * 95 / 100) {
        let roll = rng.unit();
        let event = if roll < 0.7 {
            Event::Call {
                budget: Budget::Off,
                copies: 1,
                signal: Some((Sig::Kill, shape.startup_ms + gap)),
            }
        } else if roll < 0.8 {
            let sig = if rng.chance(0.5) { Sig::Term } else { Sig::Int };
            Event::Call {
                budget: Budget::Off,
                copies: 1,
                signal: Some((sig, shape.startup_ms + gap)),
            }
        } else if roll < 0.9 {
            // Paused by its budget: a tiny one, or a fraction of the work.
            let budget =
                if rng.chance(0.3) { rng.range(1, 50) } else { rng.range(d / 10, d * 9 / 10) };
            Event::Call { budget: Budget::Ms(budget.max(1)), copies: 1, signal: None }
        } else {
            Event::Call {
                budget: Budget::Off,
                copies: rng.range(2, 3) as u32,
                signal: Some((Sig::Kill, shape.startup_ms + gap)),
            }
        };
        events.push(event);
    }
    events
}

/// A detaching command: hand-offs, then the worker killed, the job cancelled, waited on or
/// looked at; callers killed before their hand-off; identical invocations at once.
fn detach_events(rng: &mut Rng, shape: &RoleShape) -> Vec<Event> {
    let d = shape.calibrated_ms.max(1);
    let n = rng.range(1, 3) as usize;
    let mut events = Vec::new();
    for gap in gaps(rng, n, d * 85 / 100) {
        let copies = if rng.chance(0.35) { rng.range(2, 4) as u32 } else { 1 };
        let handoff =
            if rng.chance(0.3) { rng.range(1, 50) } else { rng.range(50, (d / 4).max(60)) };
        let roll = rng.unit();
        if roll < 0.45 {
            events.push(Event::Call { budget: Budget::Ms(handoff), copies, signal: None });
            events.push(Event::KillWorker { after_ms: gap.saturating_sub(handoff) });
        } else if roll < 0.65 {
            let sig = match rng.range(0, 3) {
                0 | 1 => Sig::Kill,
                2 => Sig::Term,
                _ => Sig::Int,
            };
            let budget = if rng.chance(0.5) { Budget::Off } else { Budget::Ms(d * 2 + 1000) };
            events.push(Event::Call {
                budget,
                copies: 1,
                signal: Some((sig, shape.startup_ms + gap)),
            });
        } else if roll < 0.8 {
            events.push(Event::Call { budget: Budget::Ms(handoff), copies, signal: None });
            events.push(Event::Cancel { after_ms: gap.saturating_sub(handoff) });
        } else {
            events.push(Event::Call { budget: Budget::Ms(handoff), copies, signal: None });
            if rng.chance(0.5) {
                events.push(Event::Status);
            } else {
                events.push(Event::Wait { budget: Budget::Ms(rng.range(1, (d / 3).max(2))) });
            }
        }
    }
    events
}

/// Smaller schedules to try, most promising first: the schedule's shorter beginnings and
/// ends, shortest first (a crash's damage is done by the event that caused it and found by the
/// epilogue, so what came after it, or the calls before the one it interrupted, are often not
/// needed; a failure that reproduces rarely seldom gets there one event at a time within the
/// shrinking's minute), a call and the waits and calls after it merged into one call, each
/// event left out (with the wait, cancel or status that depends on a dropped call), fewer
/// identical invocations, each kill moved earlier (to half its offset).
pub fn shrink_candidates(s: &Schedule) -> Vec<Schedule> {
    let n = s.events.len();
    let mut out: Vec<Schedule> = Vec::new();
    // Lengths 1 to n - 2: one event shorter is among the single removals below.
    for len in 1..n.saturating_sub(1) {
        let beginning = s.events[..len].to_vec();
        let end = well_formed(s.events[n - len..].to_vec());
        for events in [beginning, end] {
            out.push(Schedule { events, ..s.clone() });
        }
    }
    // A run of hand-offs (a call, then the `job wait`s and single identical calls after it) as
    // one call with all their budgets, longest run first: the job runs about as long before the
    // next event, so a kill after them still lands near the same moment of the work, which
    // leaving any of them out would move.
    for (i, first) in s.events.iter().enumerate() {
        let Event::Call { budget: Budget::Ms(start), copies, signal: None } = first else {
            continue;
        };
        let mut budget = Budget::Ms(*start);
        let mut merged = Vec::new();
        for (j, next) in s.events.iter().enumerate().skip(i + 1) {
            budget = match (budget, next) {
                (Budget::Ms(sum), Event::Wait { budget: Budget::Ms(ms) })
                | (
                    Budget::Ms(sum),
                    Event::Call { budget: Budget::Ms(ms), copies: 1, signal: None },
                ) => Budget::Ms(sum + ms),
                (Budget::Ms(_), Event::Wait { budget: Budget::Off })
                | (Budget::Ms(_), Event::Call { budget: Budget::Off, copies: 1, signal: None }) => {
                    Budget::Off
                }
                _ => break,
            };
            let mut events = s.events.clone();
            events.splice(i..=j, [Event::Call { budget, copies: *copies, signal: None }]);
            merged.push(Schedule { events, ..s.clone() });
            if budget == Budget::Off {
                break;
            }
        }
        out.extend(merged.into_iter().rev());
    }
    for i in 0..s.events.len() {
        let mut events = s.events.clone();
        events.remove(i);
        let fixed = well_formed(events);
        if fixed.len() < s.events.len() {
            out.push(Schedule { events: fixed, ..s.clone() });
        }
    }
    for (i, e) in s.events.iter().enumerate() {
        if let Event::Call { copies, budget, signal } = e
            && *copies > 1
        {
            let mut events = s.events.clone();
            events[i] = Event::Call { copies: copies - 1, budget: *budget, signal: *signal };
            out.push(Schedule { events, ..s.clone() });
        }
    }
    for (i, e) in s.events.iter().enumerate() {
        let earlier = match e {
            Event::Call { signal: Some((sig, after)), budget, copies } if *after > 1 => {
                Event::Call { signal: Some((*sig, after / 2)), budget: *budget, copies: *copies }
            }
            Event::KillWorker { after_ms } if *after_ms > 1 => {
                Event::KillWorker { after_ms: after_ms / 2 }
            }
            _ => continue,
        };
        let mut events = s.events.clone();
        events[i] = earlier;
        out.push(Schedule { events, ..s.clone() });
    }
    // Each candidate once, in its first place; none without events: that is the uninterrupted
    // run the campaign calibrated on, and its runs would only spend the shrinking's minute.
    let mut unique: Vec<Schedule> = Vec::new();
    for c in out {
        if !c.events.is_empty() && !unique.contains(&c) {
            unique.push(c);
        }
    }
    unique
}

/// The events with every one that needs an answered call before it (a worker kill, a cancel,
/// a wait, a status) and has none left out.
fn well_formed(events: Vec<Event>) -> Vec<Event> {
    let mut answered = false;
    let mut out = Vec::new();
    for e in events {
        match &e {
            Event::Call { .. } => {
                answered = e.answers();
                out.push(e);
            }
            Event::KillWorker { .. }
            | Event::Cancel { .. }
            | Event::Wait { .. }
            | Event::Status
                if answered =>
            {
                out.push(e);
            }
            _ => {}
        }
    }
    out
}

/// The requirement a scenario made of a schedule files under, and its criterion.
pub struct ScenarioHeading<'a> {
    /// The scenario's id (a file name: lowercase letters, digits, dashes).
    pub id: &'a str,
    /// The requirement id the failure breaks (the directory of the file).
    pub requirement: &'a str,
    /// What must hold, in one sentence.
    pub criterion: &'a str,
    /// Where the schedule came from (seed, trial), for the notes.
    pub origin: &'a str,
    /// How many times a run tries the scenario (`attempts`; 1 writes none).
    pub attempts: u32,
}

/// The schedule as an ordinary scenario file: the events as steps (`run` with `count` and
/// `kill_group`, `sleep` + `kill-worker`, `sleep` + `cancel`, `job wait` / `job status` runs),
/// then the epilogue: the identical invocation, its `continue_command` loop expected to end in
/// the calibrated response, and the effect oracle. The oracle is read where the work first
/// ends: after every step that may end it (a call, a `job wait`, the settling run) a verify
/// step judges only when that step ended the work and none before it did, and the last one
/// only when none did (an identical invocation after completion starts fresh, and a writer
/// without an idempotency key may legally write again; docs/contract.md §6); a call of
/// several copies that ended the work leaves the effect unjudged (one copy may start afresh
/// after another ended it). With `one_job` (a detaching role's kept
/// failure) the first call's identical copies that hand off must name one job
/// (`same_among_handoffs`), as the campaign's own trials judge it
/// ([`super::invariant::one_job`]): a copy may legally answer without an id, refused while the
/// state is busy (STATE_BUSY under load) or ended with the work.
pub fn to_scenario(s: &Schedule, one_job: bool, heading: &ScenarioHeading<'_>) -> String {
    let q = |text: &str| toml_string(text);
    let mut out = String::new();
    out.push_str(&format!("id = {}\n", q(heading.id)));
    out.push_str(&format!("requirement = {}\n", q(heading.requirement)));
    out.push_str(&format!("criterion = {}\n", q(heading.criterion)));
    out.push_str("level = \"must\"\n");
    out.push_str(&format!("roles = [{}]\n", q(&s.role)));
    out.push_str("tags = [\"campaign\"]\n");
    if heading.attempts > 1 {
        out.push_str(&format!("attempts = {}\n", heading.attempts));
    }
    out.push_str(&format!(
        "notes = {}\n",
        q(&format!(
            "Kept from a conform campaign ({}): {s}. Every budget goes through AGENT_CALL_BUDGET_MS so that each call is the identical invocation however the tool keys its jobs (docs/contract.md §9); offsets are milliseconds measured on the machine that found it.",
            heading.origin
        ))
    ));
    let mut last_answered: Option<String> = None;
    // The steps so far that may have ended the work, for the effect read after each.
    let mut enders: Vec<String> = Vec::new();
    for (i, e) in s.events.iter().enumerate() {
        let n = i + 1;
        match e {
            Event::Call { budget, copies, signal } => {
                let name = format!("call-{n}");
                out.push_str(&format!(
                    "\n[[steps]]\naction = \"run\"\nname = {}\nrole = {}\nenv = {{ AGENT_CALL_BUDGET_MS = {} }}\n",
                    q(&name),
                    q(&s.role),
                    q(&budget.env_value())
                ));
                if *copies > 1 {
                    out.push_str(&format!("count = {copies}\n"));
                }
                if let Some((sig, after)) = signal {
                    out.push_str(&format!(
                        "kill_group = {{ after = \"{after}ms\", signal = \"{}\" }}\n",
                        sig.name()
                    ));
                }
                if *copies > 1 && signal.is_none() && one_job && i == 0 {
                    // Identical invocations at once attach to one job (REQ-F-081). Only
                    // the first call's job is surely far from its end; a later call's copies
                    // may legally meet a job that ends (the campaign judges them by their
                    // hand-offs alone, `invariant::one_job`).
                    out.push_str(&format!("expect = {{ same_among_handoffs = [\"{JOB_ID}\"] }}\n"));
                }
                out.push_str(&effect_when_ended(&name, &format!("{EFFECT}-{n}"), &enders));
                enders.push(name.clone());
                last_answered = e.answers().then_some(name);
            }
            Event::KillWorker { after_ms } => {
                out.push_str(&format!(
                    "\n[[steps]]\naction = \"sleep\"\nname = \"before-kill-{n}\"\nduration = \"{after_ms}ms\"\n\n[[steps]]\naction = \"kill-worker\"\nname = \"kill-{n}\"\nsignal = \"KILL\"\n"
                ));
            }
            Event::Cancel { after_ms } => {
                let Some(from) = &last_answered else { continue };
                out.push_str(&format!(
                    "\n[[steps]]\naction = \"sleep\"\nname = \"before-cancel-{n}\"\nduration = \"{after_ms}ms\"\n\n[[steps]]\naction = \"cancel\"\nname = \"cancel-{n}\"\nfrom = {}\n",
                    q(from)
                ));
            }
            Event::Wait { budget } => {
                let Some(from) = &last_answered else { continue };
                let name = format!("wait-{n}");
                out.push_str(&format!(
                    "\n[[steps]]\naction = \"run\"\nname = \"{name}\"\nargs = [\"job\", \"wait\", \"{{@{from}/data/job_id}}\"]\nenv = {{ AGENT_CALL_BUDGET_MS = {} }}\n",
                    q(&budget.env_value())
                ));
                out.push_str(&effect_when_ended(&name, &format!("{EFFECT}-{n}"), &enders));
                enders.push(name);
            }
            Event::Status => {
                let Some(from) = &last_answered else { continue };
                out.push_str(&format!(
                    "\n[[steps]]\naction = \"run\"\nname = \"status-{n}\"\nargs = [\"job\", \"status\", \"{{@{from}/data/job_id}}\"]\n"
                ));
            }
        }
    }
    // After a killed worker the identical invocation may first report the lost job
    // (JOB_LOST, REQ-F-081) before one starts the work again: one run, with the epilogue's
    // budget, lets it.
    if s.events.iter().any(|e| matches!(e, Event::KillWorker { .. })) {
        out.push_str(&format!(
            "\n[[steps]]\naction = \"run\"\nname = \"{SETTLE}\"\nrole = {}\nenv = {{ AGENT_CALL_BUDGET_MS = \"{}\" }}\n",
            q(&s.role),
            s.final_budget_ms
        ));
        out.push_str(&effect_when_ended(SETTLE, &format!("{EFFECT}-{SETTLE}"), &enders));
        enders.push(SETTLE.to_owned());
    }
    out.push_str(&format!(
        "\n[[steps]]\naction = \"run\"\nname = \"{FINISH}\"\nrole = {}\nenv = {{ AGENT_CALL_BUDGET_MS = \"{}\" }}\n",
        q(&s.role),
        s.final_budget_ms
    ));
    out.push_str(&format!(
        "\n[[steps]]\naction = \"continue\"\nname = \"{FINISH_LOOP}\"\nfrom = \"{FINISH}\"\nexpect = {{ matches_calibrated = true }}\n"
    ));
    out.push_str(&format!("\n[[steps]]\naction = \"verify\"\nname = \"{EFFECT}\"\n"));
    out.push_str(&unless_ended(&enders));
    out
}

/// A verify step after `step` that judges the effect only when `step` ended the work and
/// none of `before` had.
fn effect_when_ended(step: &str, name: &str, before: &[String]) -> String {
    format!(
        "\n[[steps]]\naction = \"verify\"\nname = {}\nwhen_ended = {}\n{}",
        toml_string(name),
        toml_string(step),
        unless_ended(before)
    )
}

/// The `unless_ended` line of a verify step (none when no step came before).
fn unless_ended(before: &[String]) -> String {
    if before.is_empty() {
        return String::new();
    }
    let names: Vec<String> = before.iter().map(|n| toml_string(n)).collect();
    format!("unless_ended = [{}]\n", names.join(", "))
}

/// The steps before which a job may legally report less progress than before: the first
/// step that runs the tool after a worker kill, a cancel or a signalled caller.
pub fn restart_steps(s: &Schedule) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = false;
    for (i, e) in s.events.iter().enumerate() {
        let n = i + 1;
        let name = match e {
            Event::Call { .. } => Some(format!("call-{n}")),
            Event::Wait { .. } => Some(format!("wait-{n}")),
            Event::Status => Some(format!("status-{n}")),
            Event::KillWorker { .. } | Event::Cancel { .. } => None,
        };
        if pending && let Some(name) = &name {
            out.push(name.clone());
            pending = false;
        }
        if matches!(
            e,
            Event::KillWorker { .. } | Event::Cancel { .. } | Event::Call { signal: Some(_), .. }
        ) {
            pending = true;
        }
    }
    if pending {
        out.extend([SETTLE.to_owned(), FINISH.to_owned()]);
    }
    out
}

/// Where a response names its job.
pub const JOB_ID: &str = "/data/job_id";
/// The run that lets a lost job be reported before the epilogue.
pub const SETTLE: &str = "settle";
/// The epilogue's identical invocation.
pub const FINISH: &str = "finish";
/// Its continue loop.
pub const FINISH_LOOP: &str = "finish-loop";
/// The effect oracle.
pub const EFFECT: &str = "effect";

/// A TOML basic string.
fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shapes() -> Vec<RoleShape> {
        vec![
            RoleShape {
                name: "detach".into(),
                detach: true,
                resume: true,
                calibrated_ms: 2500,
                startup_ms: 5,
            },
            RoleShape {
                name: "resume_writer".into(),
                detach: false,
                resume: true,
                calibrated_ms: 2500,
                startup_ms: 5,
            },
        ]
    }

    #[test]
    fn a_seed_and_a_trial_give_one_schedule() {
        let roles = shapes();
        for trial in 0..50 {
            assert_eq!(draw(7, trial, &roles), draw(7, trial, &roles));
        }
        let differ = (0..50).filter(|&t| draw(7, t, &roles) != draw(8, t, &roles)).count();
        assert!(differ > 40, "{differ}");
    }

    #[test]
    fn kill_offsets_cover_the_whole_work() {
        let roles = vec![shapes().remove(1)];
        let mut buckets = [0u32; 10];
        for trial in 0..2000 {
            let s = draw(1, trial, &roles).unwrap();
            let mut at = 0;
            for (_, after) in s.kills() {
                at += after.saturating_sub(5);
                buckets[(at * 10 / 2500).min(9) as usize] += 1;
            }
        }
        assert!(buckets[..9].iter().all(|&b| b > 100), "{buckets:?}");
    }

    #[test]
    fn a_resume_trial_never_kills_past_the_work() {
        let roles = vec![shapes().remove(1)];
        for trial in 0..500 {
            let s = draw(3, trial, &roles).unwrap();
            let work: u64 = s.kills().iter().map(|(_, after)| after - 5).sum();
            assert!(work < 2500, "{s}");
            assert!(!s.events.is_empty() && s.events.len() <= 3, "{s}");
        }
    }

    /// A schedule of the detach role with these events.
    fn detach(events: Vec<Event>) -> Schedule {
        Schedule { role: "detach".into(), events, final_budget_ms: 620 }
    }

    /// `copies` identical calls that hand off after `ms`.
    fn hand_off(ms: u64, copies: u32) -> Event {
        Event::Call { budget: Budget::Ms(ms), copies, signal: None }
    }

    #[test]
    fn shrinking_drops_events_and_what_depends_on_them() {
        let s = detach(vec![
            hand_off(40, 3),
            Event::KillWorker { after_ms: 800 },
            Event::Call { budget: Budget::Off, copies: 1, signal: Some((Sig::Kill, 400)) },
        ]);
        let candidates = shrink_candidates(&s);
        // The shortest beginning and end first; none one event short (dropping the first
        // or last event gives it), none the whole schedule.
        assert_eq!(candidates[0].events, s.events[..1]);
        assert_eq!(candidates[1].events, s.events[2..]);
        assert_eq!(candidates.iter().filter(|c| s.events.starts_with(&c.events)).count(), 2);
        // Dropping the first call drops the kill that needs its hand-off: that is the end
        // again, tried once.
        for (i, c) in candidates.iter().enumerate() {
            assert!(!candidates[..i].contains(c), "tried twice: {c}");
        }
        assert!(candidates.iter().any(|c| c.events.len() == 2));
        assert!(candidates.iter().any(|c| c.copies() == 2));
        assert!(candidates.iter().any(|c| c.kills().contains(&(KillTarget::Worker, 400))));
        assert!(candidates.iter().any(|c| c.kills().contains(&(KillTarget::Caller, 200))));
    }

    /// Minimal schedules of the stale totals that shrinking left at four events: a merged call
    /// keeps the worker's kill near the same moment of the work, and no run goes to a schedule
    /// without events.
    #[test]
    fn shrinking_merges_hand_offs_and_never_tries_nothing() {
        let kill = |after_ms| Event::KillWorker { after_ms };
        let wait = |ms| Event::Wait { budget: Budget::Ms(ms) };
        let has = |s: &Schedule, events: &[Event]| {
            shrink_candidates(s).iter().position(|c| c.events == events)
        };
        // pyagent's stale totals, seed 5018.
        let s = detach(vec![hand_off(659, 1), wait(260), hand_off(407, 4), kill(0)]);
        assert!(has(&s, &[hand_off(919, 1), hand_off(407, 4), kill(0)]).is_some());
        assert!(shrink_candidates(&s).iter().all(|c| !c.events.is_empty()));
        // reftool's stale totals, seed 5017: one call of all three budgets failed 3 of 24
        // replays, the call and its wait merged 0 of 24; the longest run comes first.
        let s = detach(vec![hand_off(7, 1), wait(862), hand_off(39, 1), kill(613)]);
        let one_call = has(&s, &[hand_off(908, 1), kill(613)]);
        let call_and_wait = has(&s, &[hand_off(869, 1), hand_off(39, 1), kill(613)]);
        assert!(one_call.is_some() && one_call < call_and_wait, "{one_call:?} {call_and_wait:?}");
        // A wait for the end of the job merges into a call that runs to the end.
        let s = detach(vec![hand_off(5, 2), Event::Wait { budget: Budget::Off }]);
        assert!(has(&s, &[Event::Call { budget: Budget::Off, copies: 2, signal: None }]).is_some());
        // A killed call is not a hand-off: nothing to merge its wait into.
        let killed = Event::Call { budget: Budget::Ms(5), copies: 1, signal: Some((Sig::Int, 3)) };
        let s = detach(vec![killed, wait(100)]);
        assert!(
            shrink_candidates(&s).iter().all(|c| c.events.len() < 2 || c.events[1] == wait(100))
        );
    }

    #[test]
    fn the_effect_is_judged_where_the_work_first_ends() {
        let s = Schedule {
            role: "resume_writer".into(),
            events: vec![
                Event::Call { budget: Budget::Off, copies: 1, signal: Some((Sig::Kill, 800)) },
                Event::KillWorker { after_ms: 10 },
                Event::Call { budget: Budget::Off, copies: 1, signal: None },
            ],
            final_budget_ms: 3000,
        };
        let heading = ScenarioHeading {
            id: "ended",
            requirement: "REQ-C-035",
            criterion: "c",
            origin: "a test",
            attempts: 1,
        };
        let text = to_scenario(&s, false, &heading);
        let parsed = crate::catalogue::parse_scenario("REQ-C-035/ended.toml", &text)
            .unwrap_or_else(|e| panic!("{text}\n{e:?}"));
        let verifies: Vec<(String, Option<String>, Vec<String>)> = parsed
            .steps
            .iter()
            .filter_map(|step| match step {
                crate::scenario::Step::Verify(v) => {
                    Some((v.name.clone(), v.when_ended.clone(), v.unless_ended.clone()))
                }
                _ => None,
            })
            .collect();
        let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            verifies,
            vec![
                ("effect-1".into(), Some("call-1".into()), vec![]),
                ("effect-3".into(), Some("call-3".into()), names(&["call-1"])),
                ("effect-settle".into(), Some(SETTLE.into()), names(&["call-1", "call-3"])),
                (EFFECT.into(), None, names(&["call-1", "call-3", SETTLE])),
            ],
            "{text}"
        );
    }

    #[test]
    fn a_schedule_is_an_ordinary_scenario() {
        let roles = shapes();
        for trial in 0..40 {
            let s = draw(11, trial, &roles).unwrap();
            let heading = ScenarioHeading {
                id: "campaign-11-0",
                requirement: "REQ-C-035",
                criterion: "the work survives every interruption of its schedule",
                origin: "seed 11, trial 0",
                attempts: 1 + trial as u32 % 3 * 9,
            };
            let text = to_scenario(&s, s.role == "detach", &heading);
            let parsed = crate::catalogue::parse_scenario("REQ-C-035/campaign-11-0.toml", &text);
            let Ok(parsed) = parsed else { panic!("{text}\n{parsed:?}") };
            let asked = (heading.attempts > 1).then_some(heading.attempts);
            assert_eq!(parsed.attempts, asked, "{text}");
        }
    }
}
