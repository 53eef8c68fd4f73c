//! How the process ended: `exit`, `exit_not`, and the timeout every step is judged on.

use super::Context;
use crate::exec::Termination;
use crate::observe::Observation;
use crate::outcome::FindingKind;
use crate::outcome::{Finding, millis};
use crate::scenario::Expect;

/// `exit`: the exit code is this one (or one of a list).
pub(super) fn exit(expect: &Expect, obs: &Observation, _ctx: &Context<'_>) -> Vec<Finding> {
    let Some(spec) = &expect.exit else { return Vec::new() };
    let codes = spec.codes();
    if obs.exit_code().is_some_and(|c| codes.contains(&c)) {
        return Vec::new();
    }
    let ended = obs.record.ended.to_string();
    vec![
        Finding::new(FindingKind::ExitCode, format!("{ended}, expected {}", show_codes(&codes)))
            .expected(show_codes(&codes))
            .actual(ended),
    ]
}

/// `exit_not`: the process exited by itself, with none of these codes.
pub(super) fn exit_not(expect: &Expect, obs: &Observation, _ctx: &Context<'_>) -> Vec<Finding> {
    if expect.exit_not.is_empty() {
        return Vec::new();
    }
    let ended = obs.record.ended.to_string();
    match obs.exit_code() {
        Some(c) if expect.exit_not.contains(&c) => vec![
            Finding::new(FindingKind::ExitCode, format!("exit {c} is one it must not be"))
                .expected(format!("not {}", show_codes(&expect.exit_not)))
                .actual(ended),
        ],
        Some(_) => Vec::new(),
        None => vec![
            Finding::new(
                FindingKind::ExitCode,
                format!("the process did not exit by itself ({ended})"),
            )
            .expected(format!("an exit code other than {}", show_codes(&expect.exit_not)))
            .actual(ended),
        ],
    }
}

/// Always on: a step that outlived its limit was killed, whatever it expects.
pub(super) fn timeout(_expect: &Expect, obs: &Observation, _ctx: &Context<'_>) -> Vec<Finding> {
    if obs.outcome.termination != Termination::TimedOut {
        return Vec::new();
    }
    vec![
        Finding::new(
            FindingKind::Timeout,
            format!(
                "the step outlived its limit (the scenario's, or the profile's kit timeout_seconds) and its process group was killed after {} ms",
                millis(obs.outcome.elapsed)
            ),
        )
        .expected("the command ends by itself")
        .actual("still running at the limit"),
    ]
}

fn show_codes(codes: &[i32]) -> String {
    match codes {
        [one] => format!("exit {one}"),
        many => format!("exit in {many:?}"),
    }
}
