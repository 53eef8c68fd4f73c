//! `progress_monotonic`: reported progress never goes back, across the scenario so far;
//! `stalls_below`: a continue loop's hops do not stay flat while the work goes on.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Check, Context, Judge, no_validation};
use crate::observe::Observation;
use crate::outcome::FindingKind;
use crate::outcome::{Finding, compact};
use crate::scenario::{Expect, Step};

/// `progress_monotonic`: over every observation of the scenario so far.
pub(super) fn progress_monotonic(
    expect: &Expect,
    _obs: &Observation,
    ctx: &Context<'_>,
) -> Vec<Finding> {
    if expect.progress_monotonic != Some(true) {
        return Vec::new();
    }
    progress_findings(ctx.history)
}

/// `data.progress.done` of every response, grouped by `data.job_id`, must never decrease. Each
/// finding names the step where it went back.
pub fn progress_findings(history: &[Observation]) -> Vec<Finding> {
    let mut last: BTreeMap<String, (u64, String)> = BTreeMap::new();
    let mut findings = Vec::new();
    for obs in history {
        let Some(r) = obs.response() else { continue };
        let Some(done) = r.pointer("/data/progress/done") else { continue };
        let job = r.pointer("/data/job_id").and_then(Value::as_str).unwrap_or("").to_owned();
        let Some(done) = done.as_u64() else {
            findings.push(
                Finding::new(
                    FindingKind::ProgressMonotonic,
                    "`data.progress.done` is not a whole number ≥ 0",
                )
                .actual(compact(done))
                .at_step(obs.record.name.clone()),
            );
            continue;
        };
        if let Some((before, at)) = last.get(&job)
            && done < *before
        {
            findings.push(
                Finding::new(
                    FindingKind::ProgressMonotonic,
                    format!("`data.progress.done` went back from {before} (step `{at}`) to {done}"),
                )
                .expected(format!("≥ {before}"))
                .actual(done.to_string())
                .at_step(obs.record.name.clone()),
            );
        }
        last.insert(job, (done, obs.record.name.clone()));
    }
    findings
}

/// `stalls_below`: over the hops of one continue step. REQ-F-082's agent loop counts a
/// continuation that exits 14 without a larger `data.progress.done` than the response before
/// it, and cancels at three; REQ-F-081 asks `job wait` for fresh progress. Stalls are judged
/// only when the loop ended with exit 0, proof that the work went on meanwhile (a loop ending
/// STALLED or lost had flat hops for a reason). A hop without a readable `done` is neither
/// growth nor a stall: other checks judge its shape.
pub(super) fn stalls_below(
    expect: &Expect,
    observations: &[&Observation],
    _facts: &super::StepFacts,
) -> Vec<Finding> {
    let Some(limit) = expect.stalls_below else { return Vec::new() };
    let Some(last) = observations.last() else { return Vec::new() };
    if last.exit_code() != Some(0) {
        return Vec::new();
    }
    let mut stalls: Vec<(String, u64)> = Vec::new();
    let mut before: Option<u64> = None;
    for obs in observations {
        if obs.exit_code() != Some(14) {
            continue;
        }
        let Some(done) = obs.response().and_then(|r| r.pointer("/data/progress/done")) else {
            continue;
        };
        let Some(done) = done.as_u64() else { continue };
        if before.is_some_and(|b| done <= b) {
            stalls.push((obs.record.name.clone(), done));
        }
        before = Some(done);
    }
    if stalls.len() < limit as usize {
        return Vec::new();
    }
    let list: Vec<String> =
        stalls.iter().map(|(step, done)| format!("`{step}` at {done}")).collect();
    vec![
        Finding::new(
            FindingKind::ProgressStalls,
            format!(
                "{} continuations showed no growth of `data.progress.done` while the work went on to succeed: an agent cancels at {limit}",
                stalls.len()
            ),
        )
        .expected(format!("fewer than {limit} flat continuations"))
        .actual(list.join(", ")),
    ]
}

/// One response of a continue step with a watch, on the scenario's clock: when its call
/// started and ended, and the `data.progress.done` it answered while the job ran (exit 14).
#[derive(Debug, Clone)]
struct Sighting {
    name: String,
    started_ms: u64,
    ended_ms: u64,
    done: u64,
}

/// The step's responses that exit 14 with a readable `done` and a place on the timeline, with
/// whether each is watched.
fn sightings(observations: &[&Observation], facts: &super::StepFacts) -> Vec<(bool, Sighting)> {
    observations
        .iter()
        .enumerate()
        .filter(|(_, obs)| obs.exit_code() == Some(14))
        .filter_map(|(rank, obs)| {
            let done = obs.response()?.pointer("/data/progress/done")?.as_u64()?;
            let started_ms = obs.record.started_ms?;
            let sighting = Sighting {
                name: obs.record.name.clone(),
                started_ms,
                ended_ms: started_ms + obs.record.elapsed_ms,
                done,
            };
            Some((facts.watched.contains(&rank), sighting))
        })
        .collect()
}

/// The bound of a check, or a finding saying it could not be evaluated.
fn bound_of(
    expr: Option<&String>,
    facts: &super::StepFacts,
    kind: FindingKind,
) -> Result<u64, Vec<Finding>> {
    let Some(expr) = expr else { return Err(Vec::new()) };
    match facts.durations.get(expr) {
        Some(Ok(d)) => Ok(crate::outcome::millis(*d)),
        Some(Err(e)) => Err(vec![Finding::new(kind, format!("bound `{expr}`: {e}"))]),
        None => Err(vec![Finding::new(
            kind,
            format!("conform did not resolve the bound `{expr}` before judging (a bug of conform)"),
        )]),
    }
}

/// Every sighting as `name at t ms: done`, for a finding's evidence.
fn timeline(sightings: &[&Sighting]) -> String {
    let list: Vec<String> = sightings
        .iter()
        .map(|s| format!("`{}` {}–{} ms: {}", s.name, s.started_ms, s.ended_ms, s.done))
        .collect();
    list.join(", ")
}

/// `watched_progress_grows_within`: over the watched responses (`job status` beside the hops)
/// that exit 14. REQ-C-034: a command reports progress "at least once every 10 seconds of
/// work", and a detached job works all the while. A flat stretch is measured from the end of
/// the first look that saw a `done` to the start of the last look that saw it again (or less):
/// the job reported no growth within it for certain; one longer than the bound is a finding
/// with every look's times and values. Flat looks closer together are legal.
pub(super) fn watched_progress_grows_within(
    expect: &Expect,
    observations: &[&Observation],
    facts: &super::StepFacts,
) -> Vec<Finding> {
    let kind = FindingKind::ProgressCadence;
    let bound = match bound_of(expect.watched_progress_grows_within.as_ref(), facts, kind) {
        Ok(b) => b,
        Err(findings) => return findings,
    };
    let all = sightings(observations, facts);
    let watched: Vec<&Sighting> = all.iter().filter(|(w, _)| *w).map(|(_, s)| s).collect();
    let longest = longest_flat(&watched, |earlier, later| later.done <= earlier.done);
    match longest {
        Some((from, to, gap)) if gap > bound => vec![
            Finding::new(
                kind,
                format!(
                    "`data.progress.done` stayed at {} from `{}` to `{}`: {gap} ms without a larger report while the job ran",
                    from.done, from.name, to.name
                ),
            )
            .expected(format!("a larger done within every {bound} ms while the job runs"))
            .actual(timeline(&watched)),
        ],
        _ => Vec::new(),
    }
}

/// `waited_progress_grows_within`: over every response of the step that exits 14 (the hops
/// and the watched ones). REQ-F-081: `job wait` exits 14 "with a larger `data.progress.done`
/// while the job runs", with "fresh `data.progress`". Two hops (waits) answering the same
/// `done` (or less), the second starting more than the bound after the first ended, while a
/// watched response (`job status`) between them showed the job past that `done`, repeated
/// stale progress for longer than the bound while the job moved on: a finding, with every
/// response's times and values. A job whose own progress stays flat leaves flat waits legal
/// here (REQ-C-034's scenario judges the job).
pub(super) fn waited_progress_grows_within(
    expect: &Expect,
    observations: &[&Observation],
    facts: &super::StepFacts,
) -> Vec<Finding> {
    let kind = FindingKind::ProgressCadence;
    let bound = match bound_of(expect.waited_progress_grows_within.as_ref(), facts, kind) {
        Ok(b) => b,
        Err(findings) => return findings,
    };
    let all = sightings(observations, facts);
    let hops: Vec<&Sighting> = all.iter().filter(|(w, _)| !*w).map(|(_, s)| s).collect();
    let watched: Vec<&Sighting> = all.iter().filter(|(w, _)| *w).map(|(_, s)| s).collect();
    let moved_on = |earlier: &Sighting, later: &Sighting| {
        watched.iter().find(|w| {
            w.started_ms >= earlier.ended_ms
                && w.ended_ms <= later.started_ms
                && w.done > earlier.done
        })
    };
    let longest = longest_flat(&hops, |earlier, later| {
        later.done <= earlier.done && moved_on(earlier, later).is_some()
    });
    match longest {
        Some((from, to, gap)) if gap > bound => {
            let status = moved_on(from, to).map_or_else(String::new, |w| {
                format!(" while `{}` showed the job at {}", w.name, w.done)
            });
            let everything: Vec<&Sighting> = all.iter().map(|(_, s)| s).collect();
            vec![
                Finding::new(
                    kind,
                    format!(
                        "job wait answered `data.progress.done` {} from `{}` to `{}`, {gap} ms apart{status}",
                        from.done, from.name, to.name
                    ),
                )
                .expected(format!(
                    "a larger done within every {bound} ms while the job's own progress grows"
                ))
                .actual(timeline(&everything)),
            ]
        }
        _ => Vec::new(),
    }
}

/// The longest stretch between two sightings `earlier`, `later` (in order) for which
/// `flat(earlier, later)` holds, from the end of the first to the start of the second.
fn longest_flat<'s>(
    sightings: &[&'s Sighting],
    flat: impl Fn(&Sighting, &Sighting) -> bool,
) -> Option<(&'s Sighting, &'s Sighting, u64)> {
    let mut longest: Option<(&Sighting, &Sighting, u64)> = None;
    for (i, earlier) in sightings.iter().enumerate() {
        for later in &sightings[i + 1..] {
            if !flat(earlier, later) {
                continue;
            }
            let gap = later.started_ms.saturating_sub(earlier.ended_ms);
            if longest.is_none_or(|(_, _, g)| gap > g) {
                longest = Some((earlier, later, gap));
            }
        }
    }
    longest
}

// ---- the checks of this family ----

/// The `progress_monotonic` check.
pub(super) const PROGRESS_MONOTONIC: Check = Check {
    defined_in: file!(),
    key: Some("progress_monotonic"),
    active: |e| e.progress_monotonic == Some(true),
    needs_response: false,
    judge: Judge::Observation(progress_monotonic),
    holds: "`data.progress.done` never decreases across the scenario's responses, per `data.job_id`",
    findings: &[FindingKind::ProgressMonotonic],
    cites: &[],
    value: || json!({"type": "boolean"}),
    validate: no_validation,
};

/// The `stalls_below` check.
pub(super) const STALLS_BELOW: Check = Check {
    defined_in: file!(),
    key: Some("stalls_below"),
    active: |e| e.stalls_below.is_some(),
    needs_response: false,
    judge: Judge::Step(stalls_below),
    holds: "continue only: fewer than N hops exit 14 without a larger `data.progress.done` than the hop before, when the loop ends with exit 0 (REQ-F-082's agent loop cancels at 3 such stalls)",
    findings: &[FindingKind::ProgressStalls],
    cites: &["REQ-F-082"],
    value: || json!({"type": "integer", "minimum": 1}),
    validate: |_, site| {
        if matches!(site.step, Step::Continue(_)) {
            Ok(())
        } else {
            Err(site.fail("`stalls_below` belongs to continue steps"))
        }
    },
};

/// The `watched_progress_grows_within` check.
pub(super) const WATCHED_PROGRESS_GROWS_WITHIN: Check = Check {
    defined_in: file!(),
    key: Some("watched_progress_grows_within"),
    active: |e| e.watched_progress_grows_within.is_some(),
    needs_response: false,
    judge: Judge::Step(watched_progress_grows_within),
    holds: "continue with `watch` only: the watched responses that exit 14 (`job status` beside the hops) show a larger `data.progress.done` within every stretch longer than this duration expression, measured from the end of the look that first saw a done to the start of the last look that saw it again (REQ-C-034: a report at least every 10 s of work); the finding lists every look's times and done",
    findings: &[FindingKind::ProgressCadence],
    cites: &["REQ-C-034"],
    value: || json!({"type": "string"}),
    validate: watched_continue,
};

/// The `waited_progress_grows_within` check.
pub(super) const WAITED_PROGRESS_GROWS_WITHIN: Check = Check {
    defined_in: file!(),
    key: Some("waited_progress_grows_within"),
    active: |e| e.waited_progress_grows_within.is_some(),
    needs_response: false,
    judge: Judge::Step(waited_progress_grows_within),
    holds: "continue with `watch` only: no two hops that exit 14 (`job wait`) answer the same `data.progress.done` (or less) more than this duration expression apart while a watched response between them (`job status`) showed the job past it (REQ-F-081: `job wait` exits 14 with a larger done while the job runs); the finding lists every response's times and done",
    findings: &[FindingKind::ProgressCadence],
    cites: &["REQ-F-081"],
    value: || json!({"type": "string"}),
    validate: watched_continue,
};

/// The validation of the two checks over a watched continue loop.
fn watched_continue(_: &Expect, site: &super::Site<'_>) -> Result<(), String> {
    match site.step {
        Step::Continue(c) if !c.watch.is_empty() => Ok(()),
        _ => Err(site.fail("this check belongs to continue steps with a `watch`")),
    }
}

#[cfg(test)]
mod tests {
    use crate::checks::tests::*;

    #[test]
    fn progress_never_goes_back_within_a_job() {
        let at = |name: &'static str, job: &str, done: Value| {
            let r = envelope(json!({ "job_id": job, "progress": { "done": done } }));
            Parts { name, stdout: r.to_string().into_bytes(), ..Parts::default() }.build()
        };
        let e = expect(json!({ "progress_monotonic": true }));
        let world = World::default()
            .with("a", at("a", "j1", json!(3)))
            .with("b", at("b", "j2", json!(1)))
            .with("c", at("c", "j1", json!(3)));
        let current = world.history[2].clone();
        assert!(world.judge(&e, &current).is_empty());
        let world = world.with("d", at("d", "j1", json!(2))).with("e", at("e", "j1", json!(-1)));
        let current = world.history[4].clone();
        let found = world.judge(&e, &current);
        assert_eq!(found.len(), 2, "{found:#?}");
        assert_eq!(found[0].message, "`data.progress.done` went back from 3 (step `c`) to 2");
        assert_eq!(found[0].step.as_deref(), Some("d"), "named where it went back");
        assert_eq!(found[1].message, "`data.progress.done` is not a whole number ≥ 0");
        assert_eq!(found[1].step.as_deref(), Some("e"));
    }

    #[test]
    fn flat_hops_of_a_loop_that_succeeds_are_stalls() {
        // Hops `h#1`... answering 14 at each of `dones`, then one more ending with `exit`.
        const NAMES: [&str; 5] = ["h#1", "h#2", "h#3", "h#4", "h#5"];
        let hops = |dones: &[u64], exit: i32| {
            let mut runs: Vec<_> = dones
                .iter()
                .enumerate()
                .map(|(i, done)| {
                    let data = json!({ "state": "running", "progress": { "done": done } });
                    named_run(NAMES[i], 14, &envelope(data))
                })
                .collect();
            runs.push(named_run(NAMES[dones.len()], exit, &envelope(json!({ "rows": 9 }))));
            runs
        };
        let judged = |runs: &[_]| {
            let e = expect(json!({ "stalls_below": 3 }));
            check_all(&e, "h", &runs.iter().collect::<Vec<_>>(), &StepFacts::default())
        };
        let f = only(judged(&hops(&[5, 5, 5, 4], 0)));
        assert_eq!(f.check, "progress-stalls");
        assert_eq!(f.actual.as_deref(), Some("`h#2` at 5, `h#3` at 5, `h#4` at 4"));
        // Two stalls are below the limit; growth in between resets nothing but is no stall.
        assert!(judged(&hops(&[5, 5, 6, 6], 0)).is_empty());
        // A loop that did not end in success had its flat hops for a reason: not judged.
        assert!(judged(&hops(&[5, 5, 5, 5], 10)).is_empty());
    }

    /// A response of a watched loop: `name` ran from `start` for `took` ms and answered
    /// `done` with exit `code` (14: the job runs).
    fn sighted(name: &str, start: u64, took: u64, code: i32, done: u64) -> Observation {
        let data = json!({ "state": "running", "job_id": "j", "progress": { "done": done } });
        let mut obs = named_run("x", code, &envelope(data));
        obs.record.name = name.to_owned();
        obs.record.started_ms = Some(start);
        obs.record.elapsed_ms = took;
        obs
    }

    /// A loop of 1 s waits (`w#n`) each followed by a 50 ms status (`s#n`), every 1100 ms
    /// from 1000 ms: the waits answer `waits[n]`, the statuses `statuses[n]`; the last wait
    /// ends the work (exit 0).
    fn watched_loop(waits: &[u64], statuses: &[u64]) -> (Vec<Observation>, StepFacts) {
        let mut runs = Vec::new();
        let mut facts = StepFacts::default();
        for (n, (wait, status)) in waits.iter().zip(statuses).enumerate() {
            let at = 1000 + 1100 * n as u64;
            runs.push(sighted(&format!("w#{n}"), at, 1000, 14, *wait));
            facts.watched.insert(runs.len());
            runs.push(sighted(&format!("s#{n}"), at + 1000, 50, 14, *status));
        }
        let end = 1000 + 1100 * waits.len() as u64;
        runs.push(named_run("w#end", 0, &envelope(json!({ "rows": 9 }))));
        runs.last_mut().unwrap().record.started_ms = Some(end);
        facts.durations.insert("10s".into(), Ok(std::time::Duration::from_secs(10)));
        (runs, facts)
    }

    fn judged(key: &str, runs: &[Observation], facts: &StepFacts) -> Vec<Finding> {
        let e = expect(json!({ key: "10s" }));
        check_all(&e, "follow", &runs.iter().collect::<Vec<_>>(), facts)
    }

    #[test]
    fn a_job_status_flat_for_longer_than_the_bound_fails_and_shorter_flats_pass() {
        const KEY: &str = "watched_progress_grows_within";
        // Growth every third look (3.3 s): flat hops inside the bound are legal.
        let steady: Vec<u64> = (0..15).map(|n| n / 3).collect();
        let (runs, facts) = watched_loop(&steady, &steady);
        assert!(judged(KEY, &runs, &facts).is_empty());
        // Flat from the status of hop 2 (ends 4250 ms) to that of hop 12 (starts 15200 ms):
        // 10950 ms > 10 s. The waits are not looked at.
        let mut frozen: Vec<u64> = (0..15).map(|n| n.min(2)).collect();
        frozen[14] = 3;
        let (runs, facts) = watched_loop(&[0; 15], &frozen);
        let f = only(judged(KEY, &runs, &facts));
        assert_eq!(f.check, "progress-cadence");
        assert!(f.message.contains("stayed at 2 from `s#2` to `s#13`"), "{}", f.message);
        assert!(f.message.contains("12050 ms"), "{}", f.message);
        let actual = f.actual.unwrap();
        assert!(actual.contains("`s#0` 2000–2050 ms: 0"), "{actual}");
        assert!(!actual.contains("`w#"), "only the watched looks: {actual}");
        // Ten flat statuses 9900 ms apart (end to start): within the bound.
        let (runs, facts) = watched_loop(&[0; 11], &[[0; 10].as_slice(), &[1]].concat());
        assert!(judged(KEY, &runs, &facts).is_empty());
    }

    #[test]
    fn waits_repeating_a_done_past_the_bound_fail_only_while_the_job_moved_on() {
        const KEY: &str = "waited_progress_grows_within";
        let growing: Vec<u64> = (0..15).collect();
        // The waits follow the job: nothing to find.
        let (runs, facts) = watched_loop(&growing, &growing);
        assert!(judged(KEY, &runs, &facts).is_empty());
        // The waits freeze at 2 while the statuses grow: flat from `w#2` (ends 4200 ms) to
        // `w#14` (starts 16400 ms), 12200 ms.
        let frozen: Vec<u64> = (0..15).map(|n| n.min(2)).collect();
        let (runs, facts) = watched_loop(&frozen, &growing);
        let f = only(judged(KEY, &runs, &facts));
        assert_eq!(f.check, "progress-cadence");
        assert!(f.message.contains("answered `data.progress.done` 2 from `w#2` to `w#14`, 12200 ms apart while `s#3` showed the job at 3"), "{}", f.message);
        // A job whose own progress stays flat leaves flat waits legal here.
        let (runs, facts) = watched_loop(&frozen, &frozen);
        assert!(judged(KEY, &runs, &facts).is_empty());
        // Frozen for less than the bound: legal.
        let short: Vec<u64> = (0..15).map(|n| if n < 10 { n.min(2) } else { n }).collect();
        let (runs, facts) = watched_loop(&short, &growing);
        assert!(judged(KEY, &runs, &facts).is_empty());
    }
}
