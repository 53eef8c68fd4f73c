//! `progress_monotonic`: reported progress never goes back, across the scenario so far.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Context;
use crate::observe::Observation;
use crate::outcome::FindingKind;
use crate::outcome::{Finding, compact};
use crate::scenario::Expect;

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
