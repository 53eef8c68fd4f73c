//! `stream = true`: stdout is a JSONL stream keeping REQ-O-004, read by [`crate::stream`].

use super::Context;
use crate::exec::Termination;
use crate::observe::Observation;
use crate::outcome::Finding;
use crate::outcome::FindingKind;
use crate::scenario::Expect;

/// `stream = true`: one finding per broken rule of the stream. Being killed at the deadline is
/// the runner's `stream-deadline` finding, not repeated here.
pub(super) fn stream(expect: &Expect, obs: &Observation, _ctx: &Context<'_>) -> Vec<Finding> {
    if expect.stream != Some(true) {
        return Vec::new();
    }
    let mut problems = Vec::new();
    if obs.outcome.stdout.truncated() {
        problems.push(format!(
            "stdout is {} bytes, more than conform keeps: the end of the stream was not seen",
            obs.outcome.stdout.total_len
        ));
    }
    let parsed = crate::stream::parse(&obs.outcome.stdout.bytes);
    problems.extend(parsed.problems.iter().map(ToString::to_string));
    if obs.outcome.termination != Termination::TimedOut {
        let ended = crate::stream::exit_problems(&parsed, obs.outcome.termination);
        problems.extend(ended.iter().map(ToString::to_string));
    }
    problems
        .into_iter()
        .map(|message| {
            Finding::new(FindingKind::Stream, message)
                .expected("a JSONL stream keeping REQ-O-004")
                .actual(obs.record.stdout.text.chars().take(300).collect::<String>())
        })
        .collect()
}
