//! `conform campaign`: seeded fault campaigns over §79's interruptions (`conform manual
//! campaign`).
//!
//! A campaign runs many *trials*. Each trial draws a [`schedule::Schedule`] from the seed and
//! its number (kills of the caller or of the detached worker at offsets uniform over the
//! calibrated work, signals, cancels, identical invocations at once, waits), writes it as an
//! ordinary scenario ([`schedule::to_scenario`]) and runs that scenario with conform's own
//! engine ([`crate::run::Engine`]: calibration, a sandbox per trial, real processes and
//! signals, the sweep), then judges what the trial recorded against the invariants
//! ([`invariant`]). The first violation that holds (a bound on time holds only once seen again
//! alone) stops the campaign unless `--keep-going`; it is shrunk to a minimal schedule that
//! still fails (shrinking, in this module), re-run to tell how often it reproduces, and reported with a
//! replay command; `--save-failures DIR` keeps it as a scenario file `conform run --scenarios
//! DIR` executes.
//!
//! Stages: [`schedule`] (pure) → trial (this module, through the run engine) → [`invariant`]
//! (pure) → shrink and reproduce (this module) → [`report`].

pub mod invariant;
pub mod report;
pub mod schedule;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::event::EventSender;
use crate::outcome::{Status, millis};
use crate::pace::Gate;
use crate::run::Engine;
use crate::scenario::Scenario;

use invariant::{Invariant, TrialVerdict};
use schedule::{Event, RoleShape, Schedule};

/// The roles a campaign interrupts, when the profile names them: the detaching ones (the
/// stdin one among them) and the resume-only ones.
pub const CAMPAIGN_ROLES: [&str; 5] =
    ["detach", "detach_stdin", "detach_only", "resume_reader", "resume_writer"];

/// The default length of a campaign: it stops at its first confirmed violation, or after this
/// long (see the manual for how it was chosen).
pub const DEFAULT_MINUTES: f64 = 2.5;

/// The default number of trials at once.
pub const DEFAULT_JOBS: usize = 4;

/// How often a minimal failure is re-run to tell how often it reproduces.
pub const REPRODUCE_RUNS: u32 = 10;

/// How long shrinking may take at most.
pub const SHRINK_LIMIT: Duration = Duration::from_secs(60);

/// How many runs a shrink candidate gets to fail again (its window may be narrow).
pub const SHRINK_ATTEMPTS: u32 = 8;

/// What a campaign is asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// The seed of every schedule.
    pub seed: u64,
    /// Stop after this many trials (of this partition).
    pub trials: Option<u64>,
    /// Stop starting trials after this long.
    pub duration: Duration,
    /// Trials at once.
    pub jobs: usize,
    /// `--partition k/n`: only trials `t` with `t % n == k - 1`.
    pub partition: Option<(u64, u64)>,
    /// Go on after the first confirmed violation.
    pub keep_going: bool,
    /// Shrink a failure (on by default).
    pub shrink: bool,
    /// Only these roles (empty: every campaign role the profile names).
    pub roles: Vec<String>,
    /// Replay this trial only (`--trial T` with `--seed S`).
    pub trial: Option<u64>,
    /// Replay this schedule only (`--replay FILE`).
    pub replay: Option<Schedule>,
    /// Where to keep each minimal failure as a scenario file.
    pub save_failures: Option<PathBuf>,
    /// Lines on stderr as trials end.
    pub progress: bool,
}

/// A role as the campaign found it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RoleReport {
    /// The role.
    pub role: String,
    /// D in milliseconds, when calibrated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibrated_ms: Option<u64>,
    /// Whether it detaches.
    pub detach: bool,
    /// Whether it resumes.
    pub resume: bool,
    /// Why the campaign leaves it out, when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_out: Option<String>,
}

/// One trial as run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrialRecord {
    /// Its number (with the seed, it names the schedule).
    pub trial: u64,
    /// What it did.
    pub schedule: Schedule,
    /// What it came to.
    pub verdict: TrialVerdict,
    /// How long it took.
    pub duration_ms: u64,
}

/// A violation kept: the trial that showed it, its minimal schedule, how often that
/// reproduces, and how to replay it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Failure {
    /// The invariant.
    pub invariant: Invariant,
    /// The spec sentence it enforces.
    pub sentence: String,
    /// The trial that showed it first.
    pub trial: TrialRecord,
    /// Whether it holds: a non-timing violation always; a timing one once seen again alone.
    pub confirmed: bool,
    /// The minimal schedule that still failed (the trial's own when shrinking found nothing
    /// smaller or was off).
    pub minimal: Schedule,
    /// Shrink runs made.
    pub shrink_runs: u32,
    /// Runs of the minimal schedule that failed the same invariant, of `reproduce_runs`.
    pub reproduced: u32,
    /// Runs of the minimal schedule made to tell.
    pub reproduce_runs: u32,
    /// `conform campaign ... --seed S --trial T`.
    pub replay_trial: String,
    /// The minimal schedule's file, for `conform campaign ... --replay FILE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_file: Option<String>,
    /// The scenario file kept (`--save-failures`), and the `conform run` that executes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario_file: Option<String>,
    /// `conform run ... --scenarios DIR --only ID`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_command: Option<String>,
    /// Why a timing violation was not confirmed: the machine was loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<String>,
}

/// What a campaign came to: the data of its JSON report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CampaignReport {
    /// The tool.
    pub tool: String,
    /// The campaign's command line without `--seed`, `--trial`, `--replay` (for replays).
    pub command: String,
    /// The seed.
    pub seed: u64,
    /// The tool's measured start-up (its manifest command), in milliseconds.
    pub startup_ms: u64,
    /// `[k, n]` of `--partition`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<(u64, u64)>,
    /// The roles and what the campaign did with each.
    pub roles: Vec<RoleReport>,
    /// Every trial, in the order they ended.
    pub trials: Vec<TrialRecord>,
    /// The violations kept.
    pub failures: Vec<Failure>,
    /// Wall time of the whole campaign.
    pub duration_ms: u64,
    /// Wall time until the first violation was seen (none: no violation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_violation_ms: Option<u64>,
    /// Whether Ctrl-C stopped it.
    pub interrupted: bool,
    /// Whether it stopped at a confirmed violation before its trials or time ran out.
    pub stopped_early: bool,
}

/// A campaign's engine: the run engine it borrows, the roles it interrupts.
struct Campaign<'a> {
    engine: &'a Engine,
    shapes: Vec<RoleShape>,
    /// Each role's calibrated exit.
    exits: std::collections::BTreeMap<String, i32>,
    /// The campaign's command line, for replay commands.
    command: String,
}

/// Runs a campaign and returns its report (harness faults that make any campaign pointless,
/// no role to interrupt for instance, are `Err`).
pub fn run(
    engine: &Engine,
    options: &Options,
    tool_line: &str,
    command: &str,
) -> Result<CampaignReport, String> {
    let started = Instant::now();
    let events = EventSender::discarding();
    let (shapes, roles, exits) = prepare_roles(engine, options, &events)?;
    let campaign = Campaign { engine, shapes, exits, command: command.to_owned() };
    let mut report = CampaignReport {
        tool: tool_line.to_owned(),
        command: command.to_owned(),
        seed: options.seed,
        startup_ms: millis(engine.subject.startup),
        partition: options.partition,
        roles,
        trials: Vec::new(),
        failures: Vec::new(),
        duration_ms: 0,
        first_violation_ms: None,
        interrupted: false,
        stopped_early: false,
    };
    // A replay runs its one schedule again and again, up to `--trials` times, until it fails:
    // a failure of milliseconds shows in some runs only, and one green run proves nothing.
    let replays = options.trials.unwrap_or(u64::from(REPLAY_ATTEMPTS)) as usize;
    let fixed: Option<Vec<(u64, Schedule)>> = match (&options.replay, options.trial) {
        (Some(s), _) => Some(vec![(options.trial.unwrap_or(0), s.clone()); replays]),
        (None, Some(t)) => {
            let s = schedule::draw(options.seed, t, &campaign.shapes)
                .ok_or("no role to draw a schedule for")?;
            Some(vec![(t, s); replays])
        }
        (None, None) => None,
    };
    let found: Mutex<Vec<TrialRecord>> = Mutex::new(Vec::new());
    let first_violation: Mutex<Option<u64>> = Mutex::new(None);
    let stop = AtomicBool::new(false);
    let next = AtomicU64::new(0);
    let deadline = started + options.duration;
    let (k, n) = options.partition.unwrap_or((1, 1));
    std::thread::scope(|scope| {
        for _ in 0..options.jobs.max(1) {
            scope.spawn(|| {
                loop {
                    if stop.load(Ordering::SeqCst) || crate::interrupt::interrupted() {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let (trial, schedule) = match &fixed {
                        Some(list) => match list.get(i as usize) {
                            Some(pair) => pair.clone(),
                            None => break,
                        },
                        None => {
                            if options.trials.is_some_and(|max| i >= max)
                                || Instant::now() >= deadline
                            {
                                break;
                            }
                            let t = i * n + (k - 1);
                            match schedule::draw(options.seed, t, &campaign.shapes) {
                                Some(s) => (t, s),
                                None => break,
                            }
                        }
                    };
                    let record = campaign.trial(trial, schedule);
                    if crate::interrupt::interrupted() {
                        break;
                    }
                    if options.progress {
                        eprintln!("{}", report::progress_line(&record));
                    }
                    if let TrialVerdict::Violated { violations } = &record.verdict {
                        let mut first =
                            first_violation.lock().unwrap_or_else(PoisonError::into_inner);
                        first.get_or_insert(millis(started.elapsed()));
                        if !options.keep_going && violations.iter().any(|v| !v.load_sensitive) {
                            stop.store(true, Ordering::SeqCst);
                        }
                    }
                    found.lock().unwrap_or_else(PoisonError::into_inner).push(record);
                }
            });
        }
    });
    report.trials = found.into_inner().unwrap_or_else(PoisonError::into_inner);
    report.first_violation_ms =
        first_violation.into_inner().unwrap_or_else(PoisonError::into_inner);
    report.stopped_early = stop.load(Ordering::SeqCst);
    report.interrupted = crate::interrupt::interrupted();
    if !report.interrupted {
        report.failures = campaign.keep_failures(&report.trials, options);
    }
    report.interrupted = crate::interrupt::interrupted();
    report.duration_ms = millis(started.elapsed());
    Ok(report)
}

type Prepared = (Vec<RoleShape>, Vec<RoleReport>, std::collections::BTreeMap<String, i32>);

/// Calibrates the campaign roles the profile names and learns from the manifest whether each
/// detaches or resumes; a role too fast to interrupt or failing its calibration is left out,
/// and said so.
fn prepare_roles(
    engine: &Engine,
    options: &Options,
    events: &EventSender,
) -> Result<Prepared, String> {
    let profile = &engine.subject.profile;
    let wanted: Vec<&str> = match (&options.replay, options.roles.is_empty()) {
        (Some(s), _) => vec![s.role.as_str()],
        (None, true) => CAMPAIGN_ROLES.to_vec(),
        (None, false) => options.roles.iter().map(String::as_str).collect(),
    };
    // The roles calibrate at once (each run mostly waits on the tool's pace); the cache
    // keeps each calibration for the trials.
    std::thread::scope(|scope| {
        for name in &wanted {
            if profile.role(name).is_some() {
                scope.spawn(|| {
                    let _ = engine.calibration(&engine.calibrator, name, events, &Gate::Open);
                });
            }
        }
    });
    let mut shapes = Vec::new();
    let mut reports = Vec::new();
    let mut exits = std::collections::BTreeMap::new();
    for name in wanted {
        let Some(role) = profile.role(name) else {
            if !options.roles.is_empty() || options.replay.is_some() {
                return Err(format!("the profile names no role `{name}`"));
            }
            continue;
        };
        let info = engine.subject.commands.command_for_args(&role.argv).map(|(_, i)| i.clone());
        let detach = info.as_ref().and_then(|i| i.detach).unwrap_or(false);
        let resume = info.as_ref().and_then(|i| i.resume).unwrap_or(false);
        let mut report = RoleReport {
            role: name.to_owned(),
            calibrated_ms: None,
            detach,
            resume,
            left_out: None,
        };
        if !detach && !resume {
            report.left_out = Some("its command declares no interruption".to_owned());
            reports.push(report);
            continue;
        }
        match engine.calibration(&engine.calibrator, name, events, &Gate::Open) {
            Ok(c) => {
                report.calibrated_ms = Some(millis(c.duration));
                if c.interruptible() {
                    exits.insert(name.to_owned(), c.exit_code);
                    shapes.push(RoleShape {
                        name: name.to_owned(),
                        detach,
                        resume,
                        calibrated_ms: millis(c.duration),
                        startup_ms: millis(engine.subject.startup),
                    });
                } else {
                    report.left_out = Some(c.too_fast_reason().to_string());
                }
            }
            Err(e) => report.left_out = Some(format!("its calibration failed: {e}")),
        }
        reports.push(report);
    }
    if shapes.is_empty() {
        return Err(format!(
            "no role to interrupt: a campaign needs one of {} in the profile, calibrated long enough to interrupt",
            CAMPAIGN_ROLES.join(", ")
        ));
    }
    Ok((shapes, reports, exits))
}

impl Campaign<'_> {
    fn shape(&self, role: &str) -> Option<&RoleShape> {
        self.shapes.iter().find(|s| s.name == role)
    }

    /// Whether the machine is now too loaded to judge a bound on time: the tool's start-up
    /// (its manifest command), measured again, more than twice what it was at the start.
    fn machine_loaded(&self) -> Option<String> {
        let before = self.engine.subject.startup;
        let now =
            crate::discover::discover(&self.engine.subject.tool, &self.engine.subject.profile)
                .startup();
        (now > before * 2 + Duration::from_millis(100)).then(|| {
            format!(
                "the machine is loaded: the tool's start-up took {} ms now against {} ms at the campaign's start",
                millis(now),
                millis(before)
            )
        })
    }

    /// One trial: the schedule as a scenario, run by the engine, judged.
    fn trial(&self, trial: u64, schedule: Schedule) -> TrialRecord {
        let started = Instant::now();
        let verdict =
            match scenario_of(&schedule, "REQ-F-081", &format!("trial-{trial}"), "a trial") {
                Ok(scenario) => {
                    let result = self.engine.run_scenario(&scenario);
                    let restarts = schedule::restart_steps(&schedule);
                    let calibrated_exit = self.exits.get(&schedule.role).copied().unwrap_or(0);
                    let error = match &result.status {
                        // A wait or status of a call that ended before it handed off has
                        // no job to name: the schedule could not be carried out, no verdict.
                        Status::Error { message } if message.contains("no value for `{@") => {
                            return TrialRecord {
                                trial,
                                schedule,
                                verdict: TrialVerdict::Inconclusive {
                                    why: format!("no job to look at: {message}"),
                                },
                                duration_ms: millis(started.elapsed()),
                            };
                        }
                        Status::Error { message } => Some(message.as_str()),
                        Status::Skip { reason } => {
                            return TrialRecord {
                                trial,
                                schedule,
                                verdict: TrialVerdict::Inconclusive { why: reason.to_string() },
                                duration_ms: millis(started.elapsed()),
                            };
                        }
                        _ => None,
                    };
                    invariant::judge(
                        &result.findings,
                        &result.steps,
                        &restarts,
                        &copy_steps(&schedule),
                        calibrated_exit,
                        error,
                        &schema_errors,
                    )
                }
                Err(message) => TrialVerdict::Error { message },
            };
        TrialRecord { trial, schedule, verdict, duration_ms: millis(started.elapsed()) }
    }

    /// Whether this schedule still breaks `invariant` in one of up to `attempts` runs, `jobs`
    /// at once; returns the runs made too.
    fn fails(
        &self,
        schedule: &Schedule,
        invariant: Invariant,
        attempts: u32,
        jobs: usize,
    ) -> (bool, u32) {
        let hit = AtomicBool::new(false);
        let made = AtomicU64::new(0);
        std::thread::scope(|scope| {
            for _ in 0..jobs.max(1).min(attempts as usize) {
                scope.spawn(|| {
                    while !hit.load(Ordering::SeqCst) && !crate::interrupt::interrupted() {
                        if made.fetch_add(1, Ordering::SeqCst) >= u64::from(attempts) {
                            break;
                        }
                        let record = self.trial(0, schedule.clone());
                        if breaks(&record.verdict, invariant) {
                            hit.store(true, Ordering::SeqCst);
                        }
                    }
                });
            }
        });
        let runs = made.load(Ordering::SeqCst).min(u64::from(attempts)) as u32;
        (hit.load(Ordering::SeqCst), runs)
    }

    /// How many of `runs` runs of the schedule break `invariant`, `jobs` at once.
    fn reproduce(&self, schedule: &Schedule, invariant: Invariant, runs: u32, jobs: usize) -> u32 {
        let next = AtomicU64::new(0);
        let hits = AtomicU64::new(0);
        std::thread::scope(|scope| {
            for _ in 0..jobs.max(1).min(runs as usize) {
                scope.spawn(|| {
                    while next.fetch_add(1, Ordering::SeqCst) < u64::from(runs)
                        && !crate::interrupt::interrupted()
                    {
                        if breaks(&self.trial(0, schedule.clone()).verdict, invariant) {
                            hits.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                });
            }
        });
        hits.load(Ordering::SeqCst) as u32
    }

    /// Greedy shrinking: the first candidate ([`schedule::shrink_candidates`]) that still
    /// fails replaces the schedule, until none does or the time is up.
    fn shrink(&self, from: &Schedule, invariant: Invariant, jobs: usize) -> (Schedule, u32) {
        let started = Instant::now();
        let mut current = from.clone();
        let mut runs = 0;
        'outer: loop {
            for candidate in schedule::shrink_candidates(&current) {
                if started.elapsed() >= SHRINK_LIMIT || crate::interrupt::interrupted() {
                    break 'outer;
                }
                let (failed, made) = self.fails(&candidate, invariant, SHRINK_ATTEMPTS, jobs);
                runs += made;
                if failed {
                    current = candidate;
                    continue 'outer;
                }
            }
            break;
        }
        (current, runs)
    }

    /// The failures of the campaign: the first trial of each invariant broken, confirmed (a
    /// timing one seen again alone), shrunk, reproduced, kept.
    fn keep_failures(&self, trials: &[TrialRecord], options: &Options) -> Vec<Failure> {
        let mut kept: Vec<Failure> = Vec::new();
        let mut sorted: Vec<&TrialRecord> = trials.iter().collect();
        sorted.sort_by_key(|t| t.trial);
        // Each invariant a trial broke is kept once, from the first trial that broke it; a
        // violation no load can make comes first within a trial.
        let broken = sorted.into_iter().flat_map(|record| {
            let violations = match &record.verdict {
                TrialVerdict::Violated { violations } => violations.as_slice(),
                _ => &[],
            };
            let solid = violations.iter().filter(|v| !v.load_sensitive);
            let timing = violations.iter().filter(|v| v.load_sensitive);
            solid.chain(timing).map(move |v| (record, v))
        });
        for (record, first) in broken {
            let invariant = first.invariant;
            if kept.iter().any(|f| f.invariant == invariant) || crate::interrupt::interrupted() {
                continue;
            }
            // A bound on time holds only when the trial breaks it again alone, on a machine
            // that starts the tool about as fast as at the campaign's start.
            let mut load = None;
            let confirmed = !first.load_sensitive || {
                load = self.machine_loaded();
                load.is_none() && self.fails(&record.schedule, invariant, 3, 1).0
            };
            let jobs = if first.load_sensitive { 1 } else { options.jobs };
            let (minimal, shrink_runs) = if confirmed && options.shrink {
                self.shrink(&record.schedule, invariant, jobs)
            } else {
                (record.schedule.clone(), 0)
            };
            let reproduced = if confirmed {
                self.reproduce(&minimal, invariant, REPRODUCE_RUNS, jobs)
            } else {
                0
            };
            kept.push(Failure {
                invariant,
                sentence: invariant.sentence().to_owned(),
                trial: record.clone(),
                confirmed,
                minimal,
                shrink_runs,
                reproduced,
                reproduce_runs: if confirmed { REPRODUCE_RUNS } else { 0 },
                replay_trial: format!(
                    "{} --seed {} --trial {}",
                    self.command, options.seed, record.trial
                ),
                schedule_file: None,
                scenario_file: None,
                run_command: None,
                load,
            });
            if !options.keep_going && confirmed {
                break;
            }
        }
        for failure in &mut kept {
            if let Some(dir) = &options.save_failures {
                match self.save(failure, dir, options.seed) {
                    Ok(()) => {}
                    Err(e) => {
                        eprintln!("conform: failed to keep the failure in {}: {e}", dir.display())
                    }
                }
            }
        }
        kept
    }

    /// Writes the failure's minimal schedule (JSON, for `--replay`) and its scenario file
    /// (`DIR/<requirement>/<id>.toml`, for `conform run --scenarios DIR`).
    fn save(&self, failure: &mut Failure, dir: &Path, seed: u64) -> std::io::Result<()> {
        let requirement = failure.invariant.requirement();
        let id = failure_id(seed, failure.trial.trial, failure.invariant);
        let detach = self.shape(&failure.minimal.role).is_some_and(|s| s.detach);
        let text = schedule::to_scenario(
            &failure.minimal,
            detach,
            &schedule::ScenarioHeading {
                id: &id,
                requirement,
                criterion: &criterion_of(failure.invariant),
                origin: &format!(
                    "seed {seed}, trial {}, invariant {}; it broke the invariant in {} of {} runs here",
                    failure.trial.trial,
                    failure.invariant,
                    failure.reproduced,
                    failure.reproduce_runs
                ),
                attempts: kept_attempts(failure.reproduced, failure.reproduce_runs),
            },
        );
        let req_dir = dir.join(requirement);
        std::fs::create_dir_all(&req_dir)?;
        let scenario = req_dir.join(format!("{id}.toml"));
        std::fs::write(&scenario, text)?;
        let schedule_file = dir.join(format!("{id}.json"));
        let json = serde_json::to_string_pretty(&failure.minimal).map_err(std::io::Error::other)?;
        std::fs::write(&schedule_file, json + "\n")?;
        failure.scenario_file = Some(scenario.display().to_string());
        failure.schedule_file = Some(schedule_file.display().to_string());
        failure.run_command = Some(format!("--scenarios {} --only {id}", dir.display()));
        Ok(())
    }
}

/// The id of a kept failure's scenario.
pub fn failure_id(seed: u64, trial: u64, invariant: Invariant) -> String {
    format!("campaign-{seed}-{trial}-{}", invariant.name())
}

/// The most attempts a kept failure's scenario asks for: each is a whole run of the schedule
/// on the correct tool too.
pub const MOST_KEPT_ATTEMPTS: u32 = 20;
const _: () = assert!(MOST_KEPT_ATTEMPTS <= crate::catalogue::MAX_ATTEMPTS);

/// How many times a replay (`--replay`, `--seed S --trial T`) runs its schedule at most,
/// stopping at its first violation, when `--trials` does not say: as many as a kept failure
/// asks for at most.
pub const REPLAY_ATTEMPTS: u32 = MOST_KEPT_ATTEMPTS;

/// How many attempts a kept failure's scenario asks for (its `attempts`): enough that a failure
/// that broke the invariant in `reproduced` of `runs` runs here shows in 99 % of `conform run`s,
/// at half that rate (a vendor's CI machine is seldom as quiet as the one that found it, and a
/// narrow window needs a quiet one), and at most [`MOST_KEPT_ATTEMPTS`]. A failure seen in every
/// run needs one.
pub fn kept_attempts(reproduced: u32, runs: u32) -> u32 {
    if runs == 0 || reproduced >= runs {
        return 1;
    }
    let rate = f64::from(reproduced) / f64::from(runs) / 2.0;
    if rate <= 0.0 {
        return MOST_KEPT_ATTEMPTS;
    }
    let needed = (0.01f64.ln() / (1.0 - rate).ln()).ceil();
    (needed as u32).clamp(1, MOST_KEPT_ATTEMPTS)
}

/// The criterion of a kept failure's scenario.
fn criterion_of(invariant: Invariant) -> String {
    format!(
        "The work survives this schedule of interruptions with the invariant `{}` kept ({})",
        invariant.name(),
        invariant.sentence()
    )
}

/// Whether a trial's verdict breaks this invariant.
fn breaks(verdict: &TrialVerdict, invariant: Invariant) -> bool {
    matches!(verdict, TrialVerdict::Violated { violations } if violations.iter().any(|v| v.invariant == invariant))
}

/// The steps that start several identical invocations at once.
fn copy_steps(s: &Schedule) -> Vec<String> {
    s.events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e, Event::Call { copies, .. } if *copies > 1))
        .map(|(i, _)| format!("call-{}", i + 1))
        .collect()
}

/// The scenario a schedule runs as.
fn scenario_of(
    s: &Schedule,
    requirement: &str,
    id: &str,
    origin: &str,
) -> Result<Scenario, String> {
    let heading = schedule::ScenarioHeading {
        id,
        requirement,
        criterion: "the work survives this schedule of interruptions",
        origin,
        attempts: 1,
    };
    let text = schedule::to_scenario(s, false, &heading);
    crate::catalogue::parse_scenario(&format!("{requirement}/{id}.toml"), &text)
        .map_err(|e| format!("the schedule makes no valid scenario: {e}"))
}

/// What the JSON Schemas find wrong in a response with this exit: the envelope's schema, and
/// an INCOMPLETE's (its `meta.budget_ms` optional: a relayed or status answer may leave it
/// out, `docs/contract.md` §9).
fn schema_errors(envelope: &serde_json::Value, exit: i32) -> Vec<String> {
    use crate::schemas::{SchemaName, violations};
    let schema = if exit == crate::step::INCOMPLETE {
        SchemaName::IncompleteJob
    } else {
        SchemaName::Envelope
    };
    violations(schema, envelope).unwrap_or_else(|e| vec![format!("schema unusable: {e}")])
}

/// Reads a schedule file (`--replay`): a schedule's JSON, or a campaign report's first
/// failure's minimal schedule.
pub fn read_schedule(path: &Path) -> Result<Schedule, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("failed to read {}: {e}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{} is no JSON: {e}", path.display()))?;
    let candidate = value.pointer("/data/failures/0/minimal").cloned().unwrap_or(value);
    serde_json::from_value(candidate)
        .map_err(|e| format!("{} holds no schedule: {e}", path.display()))
}

/// Shared by the CLI: the time a campaign takes by default, as a [`Duration`].
pub fn default_duration() -> Duration {
    Duration::from_secs_f64(DEFAULT_MINUTES * 60.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rarer_failure_asks_for_more_attempts_within_the_bounds() {
        assert_eq!(kept_attempts(10, 10), 1, "seen every time: once is enough");
        assert_eq!(kept_attempts(0, 0), 1, "not reproduced at all: nothing measured");
        // Half of 8 in 10 is 0.4: 1 - 0.6^10 > 0.99 > 1 - 0.6^9.
        assert_eq!(kept_attempts(8, 10), 10);
        assert!(kept_attempts(5, 10) > kept_attempts(8, 10));
        assert_eq!(kept_attempts(3, 10), MOST_KEPT_ATTEMPTS);
        assert_eq!(kept_attempts(0, 10), MOST_KEPT_ATTEMPTS);
    }
}
