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
}
