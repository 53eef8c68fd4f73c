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
//! The spec's own conformance kit verifies a level with fourteen checks; [`KIT_CHECKS`] names
//! the scenarios that make each; they sit at the kit's level or below it, so a level is never a
//! `pass` while one of the checks it needs did not run. [`kit_checks`] answers the kit's checks one by one (pass / fail /
//! skip), so a report reads like the kit's result for a vendor who knows that.
//!
//! `should` and `may` scenarios never decide a level. The same rule gives a separate verdict
//! for §79, "Work Outlives the Caller's Budget" ([`INTERRUPTION_REQUIREMENTS`]: REQ-C-033,
//! REQ-F-080, REQ-F-081, REQ-F-082, REQ-C-034, REQ-C-035): its requirements are `P1`, so they
//! sit in Level 3, and a tool may want to claim them on their own.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::outcome::{Counts, ScenarioResult, Status};
use crate::scenario::Obligation;

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
/// §79 requirements are `P1`, so Level 3. Checked against the index's priority column (51 `P0`
/// requirements: 33 framework, 12 command-contract, 6 opt-in) and against `levels.md`, whose
/// Level 2 holds 51 requirements: these twelve and thirty-nine.
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
    /// None failed, and the tool declares nothing the claim's requirements govern (§79 for a
    /// tool none of whose commands declares `interruption`): there is nothing to claim.
    #[serde(rename = "not-applicable")]
    NotApplicable,
}

impl Claim {
    /// The lowercase word.
    pub fn as_str(self) -> &'static str {
        match self {
            Claim::Pass => "pass",
            Claim::Fail => "fail",
            Claim::Incomplete => "incomplete",
            Claim::NotApplicable => "not-applicable",
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
    /// How many `must` scenarios of the claim were not judged: skipped (not as not
    /// applicable), harness errors, failures a baseline expected, and those `--only` /
    /// `--skip` left out.
    pub not_judged: usize,
    /// How many `must` scenarios of the claim do not apply to the tool (skipped because no
    /// command declares what they judge).
    #[serde(default)]
    pub not_applicable: usize,
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
    pub level: Obligation,
}

/// One check of the spec's own conformance kit (its `conformance/README.md`), the level the kit
/// tags it with, and the conform scenarios that make it: each does what the kit does, or more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KitCheck {
    /// The kit's id, e.g. `no_hang_stdin_closed`.
    pub id: &'static str,
    /// The kit's level for it.
    pub level: u8,
    /// conform's scenarios for it, all `must`.
    pub scenarios: &'static [&'static str],
}

/// Where conform follows the newer spec against the kit: every stored copy of the kit's
/// `conformance/run.py` takes exit codes 0 to 13, 79 to 125, 130 and 143 only and validates
/// manifests against a schema without `interruption`, while the newer REQ-F-001 adds 14
/// INCOMPLETE and REQ-C-033 puts `interruption` in the manifest. A vendor who runs both sees
/// the kit fail what conform passes there, and nowhere else: every other judgement of
/// conform's is the kit's or a stricter one. Reports print it beside the kit's checks.
pub const KIT_DIFFERENCE: &str = "conform follows the newer spec where every stored kit refuses it: exit 14 (INCOMPLETE, REQ-F-001) and `interruption` in the manifest (REQ-C-033)";

/// The kit's fourteen checks, in its order. A vendor who used the kit reads a conform report
/// through this table. Every scenario named here is a `must` scenario of the catalogue at the
/// kit's level or below it (a test keeps it so), so a level's verdict already waits for them.
pub const KIT_CHECKS: [KitCheck; 14] = [
    KitCheck {
        id: "no_hang_stdin_closed",
        level: 1,
        scenarios: &["read-probes-end-with-stdin-closed"],
    },
    KitCheck {
        id: "no_hang_stdin_open",
        level: 1,
        scenarios: &["read-probes-end-with-stdin-open"],
    },
    KitCheck { id: "json_envelope", level: 1, scenarios: &["read-probes-answer-one-envelope"] },
    KitCheck { id: "exit_code_contract", level: 1, scenarios: &["probe-exits-are-standard-codes"] },
    KitCheck { id: "stdout_no_ansi", level: 1, scenarios: &["read-probes-keep-ansi-off-stdout"] },
    KitCheck { id: "no_color_honored", level: 1, scenarios: &["no-color-is-honoured"] },
    KitCheck { id: "help_off_stdout", level: 1, scenarios: &["help-keeps-stdout-clean"] },
    KitCheck {
        id: "invalid_input_exit_2",
        level: 1,
        scenarios: &["invalid-probes-are-arg-errors"],
    },
    KitCheck {
        id: "dry_run_preview",
        level: 1,
        scenarios: &["dry-run-previews", "dry-run-changes-nothing"],
    },
    KitCheck {
        id: "destructive_refuses_unconfirmed",
        level: 2,
        scenarios: &["destructive-refuses-unconfirmed"],
    },
    KitCheck { id: "manifest_valid", level: 3, scenarios: &["manifest-valid"] },
    KitCheck {
        id: "argument_order",
        level: 3,
        scenarios: &[
            "global-option-means-the-same-anywhere",
            "global-option-value-survives-the-command",
            "conflicting-repeats-are-arg-errors",
            "options-after-positionals-take-effect",
        ],
    },
    KitCheck { id: "stream_contract", level: 3, scenarios: &["stream-lines-keep-the-contract"] },
    KitCheck { id: "stream_sigint", level: 3, scenarios: &["sigint-ends-the-stream-cancelled"] },
];

/// How a kit check came out, in the kit's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KitStatus {
    /// Every scenario of the check ran and passed.
    Pass,
    /// One of them failed (a failure a baseline expected included: the kit has no baseline).
    Fail,
    /// None failed, but one did not run (skipped, a harness error, not selected, or not in
    /// this build's catalogue).
    Skip,
}

/// The outcome of one kit check over a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KitCheckVerdict {
    /// The kit's id.
    pub check: String,
    /// The kit's level for it.
    pub level: u8,
    /// pass / fail / skip.
    pub status: KitStatus,
    /// conform's scenarios for it.
    pub scenarios: Vec<String>,
}

/// The kit's checks as this run answers them.
pub fn kit_checks(results: &[ScenarioResult]) -> Vec<KitCheckVerdict> {
    KIT_CHECKS
        .iter()
        .map(|check| {
            let found: Vec<Option<&ScenarioResult>> =
                check.scenarios.iter().map(|id| results.iter().find(|r| r.id == *id)).collect();
            let status = if found.iter().flatten().any(|r| matches!(r.status, Status::Fail)) {
                KitStatus::Fail
            } else if found.iter().all(|r| r.is_some_and(|r| r.status == Status::Pass)) {
                KitStatus::Pass
            } else {
                KitStatus::Skip
            };
            KitCheckVerdict {
                check: check.id.to_owned(),
                level: check.level,
                status,
                scenarios: check.scenarios.iter().map(|s| (*s).to_owned()).collect(),
            }
        })
        .collect()
}

/// The verdicts on Level 1, 2 and 3, then §79's, for these results; `unselected` are the
/// catalogue's scenarios that did not run at all; `interruption_declared` says whether some
/// command of the manifest declares `interruption` (`None`: the manifest is unknown). §79 is
/// `not-applicable` when none does and none of its scenarios failed.
pub fn verdicts(
    results: &[ScenarioResult],
    unselected: &[Unselected],
    interruption_declared: Option<bool>,
) -> Vec<ClaimVerdict> {
    let mut all: Vec<ClaimVerdict> = (1..=3)
        .map(|level| {
            let group = Group {
                claim: format!("level-{level}"),
                name: level_name(level),
                not_applicable_because: None,
            };
            judge(group, results, unselected, |requirement| spec_level(requirement) <= level)
        })
        .collect();
    let group = Group {
        claim: "interruption".to_owned(),
        name: INTERRUPTION_NAME,
        not_applicable_because: (interruption_declared == Some(false))
            .then_some("no command of the manifest declares `interruption`"),
    };
    all.push(judge(group, results, unselected, |requirement| {
        INTERRUPTION_REQUIREMENTS.contains(&requirement)
    }));
    all
}

/// A claim being judged.
struct Group<'a> {
    claim: String,
    name: &'a str,
    /// Why the claim does not apply to this tool, when it does not.
    not_applicable_because: Option<&'static str>,
}

fn judge(
    group: Group<'_>,
    results: &[ScenarioResult],
    unselected: &[Unselected],
    includes: impl Fn(&str) -> bool,
) -> ClaimVerdict {
    let Group { claim, name, not_applicable_because } = group;
    let mut counts = Counts::default();
    let mut requirements = BTreeSet::new();
    let mut failed = Vec::new();
    let mut failed_ids = Vec::new();
    let mut reasons = Vec::new();
    let mut not_applicable = 0;
    for r in results.iter().filter(|r| r.level == Obligation::Must && includes(&r.requirement)) {
        counts.add(r);
        requirements.insert(r.requirement.clone());
        match &r.status {
            // A criterion the tool has nothing to be judged on keeps no claim from a verdict.
            Status::Skip { reason } if reason.is_not_applicable() => not_applicable += 1,
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
    let left_out = unselected
        .iter()
        .filter(|u| u.level == Obligation::Must && includes(&u.requirement))
        .count();
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
    } else if let Some(why) = not_applicable_because {
        // What could not be judged does not matter where there is nothing to claim.
        reasons = vec![why.to_owned()];
        Claim::NotApplicable
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
        not_judged: counts.skip - not_applicable + counts.error + counts.expected_fail + left_out,
        not_applicable,
        reasons: failed,
    }
}
