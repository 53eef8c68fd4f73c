//! How the process ended: `exit`, `exit_not`, and the timeout every step is judged on.

use serde_json::json;

use super::{Check, Context, Judge, no_validation};
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

/// The framework's table (REQ-F-001): 0 to 13, and 14 INCOMPLETE, which REQ-F-001 adds.
pub const STANDARD_EXITS: std::ops::RangeInclusive<i32> = 0..=14;
/// Command-specific codes, each declared by its command (REQ-F-001's reserved range, REQ-C-001).
pub const COMMAND_SPECIFIC_EXITS: std::ops::RangeInclusive<i32> = 79..=125;
/// What a framework's signal handlers exit with: 128 + SIGINT, 128 + SIGTERM (REQ-F-001 lets
/// only them emit 128 + N; REQ-F-013, REQ-F-069). The spec's kit accepts exactly these two.
pub const SIGNAL_EXITS: [i32; 2] = [130, 143];

/// `exit_in_table`: the process exited by itself with a code an agent may meet: the standard
/// table's, a signal handler's 130 or 143, or a command-specific code (79 to 125) that the
/// invoked command's effective exit-code table declares. The kit accepts 0 to 13, 79 to 125,
/// 130 and 143; conform accepts 14 with the newer REQ-F-001, and a command-specific code only
/// where it is declared, which is stricter.
pub(super) fn exit_in_table(expect: &Expect, obs: &Observation, ctx: &Context<'_>) -> Vec<Finding> {
    if expect.exit_in_table != Some(true) {
        return Vec::new();
    }
    let ended = obs.record.ended.to_string();
    let Some(code) = obs.exit_code() else {
        return vec![
            Finding::new(
                FindingKind::ExitCode,
                format!("the process did not exit by itself ({ended})"),
            )
            .expected("an exit code of the table")
            .actual(ended),
        ];
    };
    let declared = ctx.declared_exits.is_some_and(|codes| codes.contains(&code));
    let legal = STANDARD_EXITS.contains(&code)
        || SIGNAL_EXITS.contains(&code)
        || (COMMAND_SPECIFIC_EXITS.contains(&code) && declared);
    if legal {
        return Vec::new();
    }
    let why = if COMMAND_SPECIFIC_EXITS.contains(&code) {
        "a command-specific code the command does not declare in its exit_codes (nor the root table)"
    } else {
        "outside the table"
    };
    vec![
        Finding::new(FindingKind::ExitCode, format!("exit {code} is {why}"))
            .expected(
                "0 to 14, 130 or 143, or a command-specific code (79 to 125) the command declares",
            )
            .actual(ended),
    ]
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

// ---- the checks of this family ----

/// The `exit` check.
pub(super) const EXIT: Check = Check {
    defined_in: file!(),
    key: Some("exit"),
    active: |e| e.exit.is_some(),
    needs_response: false,
    judge: Judge::Observation(exit),
    holds: "the exit code is this one (or one of a list)",
    findings: &[FindingKind::ExitCode],
    cites: &[],
    value: || {
        json!({
            "oneOf": [
                {"type": "integer"},
                {"type": "array", "items": {"type": "integer"}, "minItems": 1}
            ]
        })
    },
    validate: no_validation,
};

/// The `exit_not` check.
pub(super) const EXIT_NOT: Check = Check {
    defined_in: file!(),
    key: Some("exit_not"),
    active: |e| !e.exit_not.is_empty(),
    needs_response: false,
    judge: Judge::Observation(exit_not),
    holds: "the process exited by itself with none of these codes",
    findings: &[FindingKind::ExitCode],
    cites: &[],
    value: || json!({"type": "array", "items": {"type": "integer"}}),
    validate: no_validation,
};

/// The `exit_in_table` check.
pub(super) const EXIT_IN_TABLE: Check = Check {
    defined_in: file!(),
    key: Some("exit_in_table"),
    active: |e| e.exit_in_table == Some(true),
    needs_response: false,
    judge: Judge::Observation(exit_in_table),
    holds: "the process exited by itself with a code of REQ-F-001's table (0 to 14), a signal handler's 130 or 143, or a command-specific code (79 to 125) that the invoked command declares in its effective exit-code table (its own `exit_codes` over the manifest's root table); the kit allows 0 to 13, 79 to 125, 130 and 143",
    findings: &[FindingKind::ExitCode],
    cites: &["REQ-C-001", "REQ-F-001"],
    value: || json!({"type": "boolean"}),
    validate: no_validation,
};

/// The timeout, which every step is judged on: no key turns it on or off.
pub(super) const TIMEOUT: Check = Check {
    defined_in: file!(),
    key: None,
    active: |_| true,
    needs_response: false,
    judge: Judge::Observation(timeout),
    holds: "the step ended by itself within its limit (conform kills its process group after it)",
    findings: &[FindingKind::Timeout],
    cites: &[],
    value: || json!({}),
    validate: no_validation,
};

#[cfg(test)]
mod tests {
    use crate::checks::tests::*;

    #[test]
    fn exit_holds_for_the_code_or_one_of_the_list() {
        assert!(judge(&expect(json!({ "exit": 0 })), &exited(0, "")).is_empty());
        assert!(judge(&expect(json!({ "exit": [0, 14] })), &exited(14, "")).is_empty());
        let f = only(judge(&expect(json!({ "exit": 0 })), &exited(2, "")));
        assert_eq!(
            (f.check.as_str(), f.message.as_str()),
            ("exit-code", "exit 2, expected exit 0")
        );
        let f = only(judge(&expect(json!({ "exit": [0, 14] })), &exited(1, "")));
        assert_eq!(f.expected.as_deref(), Some("exit in [0, 14]"));
        let signaled = Parts { termination: Termination::Signaled(9), ..Parts::default() }.build();
        assert_eq!(
            only(judge(&expect(json!({ "exit": 0 })), &signaled)).actual.as_deref(),
            Some("signal 9")
        );
    }

    #[test]
    fn exit_not_wants_an_exit_by_itself_with_another_code() {
        let e = expect(json!({ "exit_not": [1, 2] }));
        assert!(judge(&e, &exited(0, "")).is_empty());
        let f = only(judge(&e, &exited(2, "")));
        assert_eq!(f.message, "exit 2 is one it must not be");
        assert_eq!(f.expected.as_deref(), Some("not exit in [1, 2]"));
        let killed = Parts { termination: Termination::Signaled(15), ..Parts::default() }.build();
        assert_eq!(
            only(judge(&e, &killed)).message,
            "the process did not exit by itself (signal 15)"
        );
    }

    #[test]
    fn every_step_is_judged_on_its_timeout() {
        assert!(judge(&Expect::default(), &exited(1, "")).is_empty());
        let timed_out =
            Parts { termination: Termination::TimedOut, elapsed_ms: 3000, ..Parts::default() }
                .build();
        let f = only(judge(&Expect::default(), &timed_out));
        assert_eq!(f.check, "timeout");
        assert!(f.message.ends_with("killed after 3000 ms"));
    }

    /// REQ-F-001's table, the kit's signal exits, and a command-specific code only where its
    /// command declares it (the kit takes any code of 79 to 125; conform is stricter).
    #[test]
    fn exit_in_table_takes_the_table_signals_and_declared_codes() {
        let e = expect(json!({ "exit_in_table": true }));
        for code in [0, 2, 13, 14, 130, 143] {
            assert!(judge(&e, &exited(code, "{}")).is_empty(), "exit {code}");
        }
        for code in [15, 64, 78, 126, 127, 141, 255] {
            let f = only(judge(&e, &exited(code, "{}")));
            assert_eq!(f.message, format!("exit {code} is outside the table"));
        }
        let undeclared = only(judge(&e, &exited(80, "{}")));
        assert!(undeclared.message.contains("does not declare"), "{}", undeclared.message);
        let obs = exited(80, "{}");
        let mut resolved = Resolved::new(&e, &obs, text, duration, split, no_program);
        resolved.declared_exits = Some([0, 80].into_iter().collect());
        assert!(World::default().judge_with(&e, &obs, &resolved).is_empty());
        let killed = Parts { termination: Termination::TimedOut, ..Parts::default() }.build();
        assert_eq!(names(&judge(&e, &killed)), ["timeout", "exit-code"]);
    }
}
