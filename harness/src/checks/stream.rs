//! `stream = true`: stdout is a JSONL stream keeping REQ-O-004, read by [`crate::stream`].

use serde_json::json;

use super::{Check, Context, Judge};
use crate::exec::Termination;
use crate::observe::Observation;
use crate::outcome::Finding;
use crate::outcome::FindingKind;
use crate::scenario::{Expect, ProbeKind, Step};

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

// ---- the checks of this family ----

/// The `stream` check.
pub(super) const STREAM: Check = Check {
    defined_in: file!(),
    key: Some("stream"),
    active: |e| e.stream == Some(true),
    needs_response: false,
    judge: Judge::Observation(stream),
    holds: "stdout is a REQ-O-004 stream ([`stream`]): one JSON object a line, heartbeats ordinary, exactly one terminal line last (a `_summary`, exit 0; or a valid error envelope whose `meta.exit_code` is the exit), numbered `_seq` 1, 2, ... with `_count` / `meta.items_emitted` to match, or no `_seq` at all; one finding per broken rule, with its line; on a step with `probe = \"stream\"` or `\"stream-signal\"`",
    findings: &[FindingKind::Stream],
    cites: &["REQ-O-004"],
    value: || json!({"type": "boolean"}),
    validate: |_, site| {
        let probe = match site.step {
            Step::Run(r) => r.probe,
            _ => None,
        };
        if matches!(probe, Some(ProbeKind::Stream | ProbeKind::StreamSignal)) {
            Ok(())
        } else {
            Err(site
                .fail("`stream` checks a step with `probe = \"stream\"` or `\"stream-signal\"`"))
        }
    },
};

#[cfg(test)]
mod tests {
    use crate::checks::tests::*;

    #[test]
    fn stream_keeps_the_rules_of_a_jsonl_stream() {
        let e = expect(json!({ "stream": true }));
        let good = "{\"n\":1}\n{\"heartbeat\":true}\n{\"_summary\":true}\n";
        assert!(judge(&e, &exited(0, good)).is_empty());
        let found = judge(&e, &exited(3, good));
        assert_eq!(only(found).message, "line 3: a summary, but the exit is 3");
        let found = judge(&e, &exited(0, "{\"n\":1}\nnot json\n"));
        assert!(found.len() >= 2 && found.iter().all(|f| f.check == "stream"), "{found:#?}");
        assert_eq!(found[0].expected.as_deref(), Some("a JSONL stream keeping REQ-O-004"));
        // Killed at its deadline: the runner says so, the stream check does not repeat it.
        let killed = Parts {
            termination: Termination::TimedOut,
            stdout: b"{\"n\":1}\n".to_vec(),
            ..Parts::default()
        }
        .build();
        assert_eq!(names(&judge(&e, &killed)).iter().filter(|n| **n == "stream").count(), 1);
    }
}
