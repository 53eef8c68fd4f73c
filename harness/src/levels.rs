//! Stage: levels. The spec's conformance levels as verdicts over a run, plus one for §79.
//!
//! The CLI Agent Spec lets a tool claim a **level**, not a percentage (its
//! `requirements/levels.md`): Level 1 ("agent-safe basics") is twelve named requirements,
//! Level 2 ("agent-reliable") adds every other `P0` requirement, Level 3 ("full spec") is every
//! requirement. Each level contains the ones below it. conform judges the part of each level
//! its catalogue checks, and says so: a `pass` is necessary for a claim, never sufficient.
//!
//! A scenario belongs to the level of its requirement ([`spec_level`], a table in code kept
//! with the spec's index: the Level 1 list, then the `P0` requirements, everything else Level
//! 3). A level's verdict looks at the `must` scenarios of its own and every lower level:
//!
//! * `fail`: one of them counts against conformance (failed, and no baseline expected it);
//! * `incomplete`: none failed, but one was skipped (the profile lacked a role or a kit probe
//!   kind), ended in a harness error, or was left out by `--only` / `--skip`, or the level has
//!   no `must` scenario at all: the claim cannot be made until those checks run;
//! * `pass`: every one of them ran and passed.
//!
//! `should` and `may` scenarios never decide a level. The same rule gives a separate verdict
//! for §79, "Work Outlives the Caller's Budget" ([`INTERRUPTION_REQUIREMENTS`]: REQ-C-033,
//! REQ-F-080, REQ-F-081, REQ-F-082, REQ-C-034, REQ-C-035): its requirements are `P1`, so they
//! sit in Level 3, and a tool may want to claim them on their own.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::outcome::{Counts, Level, ScenarioResult, Status};

/// The Level 1 requirements (the spec's list of twelve).
pub const LEVEL_1_REQUIREMENTS: [&str; 12] = [
    "REQ-F-001",
    "REQ-F-002",
    "REQ-F-003",
    "REQ-F-004",
    "REQ-F-006",
    "REQ-F-007",
    "REQ-F-008",
    "REQ-F-009",
    "REQ-F-010",
    "REQ-F-048",
    "REQ-C-004",
    "REQ-C-013",
];

/// The other `P0` requirements of the spec's index (`requirements/index.md`): Level 2. The
/// §79 requirements are `P1`, so Level 3.
pub const LEVEL_2_REQUIREMENTS: [&str; 39] = [
    "REQ-F-005",
    "REQ-F-011",
    "REQ-F-012",
    "REQ-F-013",
    "REQ-F-014",
    "REQ-F-015",
    "REQ-F-018",
    "REQ-F-019",
    "REQ-F-044",
    "REQ-F-045",
    "REQ-F-046",
    "REQ-F-047",
    "REQ-F-051",
    "REQ-F-052",
    "REQ-F-053",
    "REQ-F-054",
    "REQ-F-055",
    "REQ-F-056",
    "REQ-F-057",
    "REQ-F-062",
    "REQ-F-065",
    "REQ-F-068",
    "REQ-F-069",
    "REQ-C-001",
    "REQ-C-002",
    "REQ-C-003",
    "REQ-C-005",
    "REQ-C-006",
    "REQ-C-012",
    "REQ-C-021",
    "REQ-C-022",
    "REQ-C-025",
    "REQ-C-029",
    "REQ-O-001",
    "REQ-O-003",
    "REQ-O-021",
    "REQ-O-033",
    "REQ-O-047",
    "REQ-O-048",
];

/// The requirements of §79, "Work Outlives the Caller's Budget".
pub const INTERRUPTION_REQUIREMENTS: [&str; 6] =
    ["REQ-C-033", "REQ-F-080", "REQ-F-081", "REQ-F-082", "REQ-C-034", "REQ-C-035"];

/// The lowest spec level (1, 2 or 3) that includes a requirement.
pub fn spec_level(requirement: &str) -> u8 {
    if LEVEL_1_REQUIREMENTS.contains(&requirement) {
        1
    } else if LEVEL_2_REQUIREMENTS.contains(&requirement) {
        2
    } else {
        3
    }
}

/// The spec's name of a level.
pub fn level_name(level: u8) -> &'static str {
    match level {
        1 => "Level 1 (Agent-safe basics)",
        2 => "Level 2 (Agent-reliable)",
        _ => "Level 3 (Full spec)",
    }
}

/// The name of §79's claim.
pub const INTERRUPTION_NAME: &str = "§79 (Work Outlives the Caller's Budget)";

/// A claim's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Claim {
    /// Every `must` scenario of the group ran and passed.
    Pass,
    /// A `must` scenario of the group counts against conformance.
    Fail,
    /// None failed, but not all ran (or none exist): the claim cannot be made yet.
    Incomplete,
}

impl Claim {
    /// The lowercase word.
    pub fn as_str(self) -> &'static str {
        match self {
            Claim::Pass => "pass",
            Claim::Fail => "fail",
            Claim::Incomplete => "incomplete",
        }
    }
}

/// The verdict on one claim: a spec level, or §79.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimVerdict {
    /// `level-1`, `level-2`, `level-3` or `interruption`.
    pub claim: String,
    /// Its name (`Level 1 (Agent-safe basics)`, ..., [`INTERRUPTION_NAME`]).
    pub name: String,
    /// The verdict.
    pub verdict: Claim,
    /// The requirements whose `must` scenarios ran (or were skipped) in this run, sorted.
    pub requirements: Vec<String>,
    /// Those `must` scenarios by status.
    pub counts: Counts,
    /// The ids of those that failed (and count against conformance).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<String>,
    /// How many `must` scenarios of the claim were not judged: skipped, harness errors,
    /// failures a baseline expected, and those `--only` / `--skip` left out.
    pub not_judged: usize,
    /// Why it is not a pass: the scenarios that failed, were skipped (with the reason) or ended
    /// in a harness error, one line each, then how many were not selected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reasons: Vec<String>,
}

/// A catalogue scenario left out of the run by `--only` / `--skip`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unselected {
    /// Its id.
    pub id: String,
    /// Its requirement.
    pub requirement: String,
    /// Its level.
    pub level: Level,
}

/// Checks of the spec's own conformance kit that conform has no scenario for yet, with the
/// level each belongs to. Until they exist no run can support a claim of that level, so the
/// level stays `incomplete` however well the tool does on the rest.
pub const UNCHECKED_KIT_CHECKS: [(u8, &str); 3] =
    [(3, "argument_order"), (3, "stream_contract"), (3, "stream_sigint")];

/// The verdicts on Level 1, 2 and 3, then §79's, for these results; `unselected` are the
/// catalogue's scenarios that did not run at all.
pub fn verdicts(results: &[ScenarioResult], unselected: &[Unselected]) -> Vec<ClaimVerdict> {
    let mut all: Vec<ClaimVerdict> = (1..=3)
        .map(|level| {
            let mut verdict = judge(
                format!("level-{level}"),
                level_name(level),
                results,
                unselected,
                |requirement| spec_level(requirement) <= level,
            );
            let unchecked: Vec<String> = UNCHECKED_KIT_CHECKS
                .iter()
                .filter(|(at, _)| *at <= level)
                .map(|(_, check)| format!("the kit's `{check}` check has no conform scenario yet"))
                .collect();
            if !unchecked.is_empty() && verdict.verdict == Claim::Pass {
                verdict.verdict = Claim::Incomplete;
            }
            verdict.reasons.extend(unchecked);
            verdict
        })
        .collect();
    all.push(judge(
        "interruption".to_owned(),
        INTERRUPTION_NAME,
        results,
        unselected,
        |requirement| INTERRUPTION_REQUIREMENTS.contains(&requirement),
    ));
    all
}

fn judge(
    claim: String,
    name: &str,
    results: &[ScenarioResult],
    unselected: &[Unselected],
    includes: impl Fn(&str) -> bool,
) -> ClaimVerdict {
    let mut counts = Counts::default();
    let mut requirements = BTreeSet::new();
    let mut failed = Vec::new();
    let mut failed_ids = Vec::new();
    let mut reasons = Vec::new();
    for r in results.iter().filter(|r| r.level == Level::Must && includes(&r.requirement)) {
        counts.add(r);
        requirements.insert(r.requirement.clone());
        match &r.status {
            _ if r.counts_against_conformance() => {
                failed_ids.push(r.id.clone());
                failed.push(format!("`{}` failed", r.id));
            }
            Status::Pass => {}
            Status::Fail => reasons.push(format!("`{}` failed as the baseline expected", r.id)),
            Status::Skip { reason } => reasons.push(format!("`{}` skipped: {reason}", r.id)),
            Status::Error { message } => {
                reasons.push(format!("`{}` could not be judged: {message}", r.id));
            }
        }
    }
    let left_out =
        unselected.iter().filter(|u| u.level == Level::Must && includes(&u.requirement)).count();
    match left_out {
        0 => {}
        1 => reasons.push("1 `must` scenario not selected (--only / --skip)".to_owned()),
        n => reasons.push(format!("{n} `must` scenarios not selected (--only / --skip)")),
    }
    if requirements.is_empty() && left_out == 0 {
        reasons.push("no `must` scenario checks it".to_owned());
    }
    let verdict = if !failed.is_empty() {
        Claim::Fail
    } else if !reasons.is_empty() {
        Claim::Incomplete
    } else {
        Claim::Pass
    };
    failed.append(&mut reasons);
    ClaimVerdict {
        claim,
        name: name.to_owned(),
        verdict,
        requirements: requirements.into_iter().collect(),
        counts,
        failed: failed_ids,
        not_judged: counts.skip + counts.error + counts.expected_fail + left_out,
        reasons: failed,
    }
}
