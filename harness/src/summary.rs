//! Stage: summary. What a whole run comes to: counts by status, verdicts per requirement and
//! per obligation, the spec's level claims and the kit's checks ([`crate::levels`]), coverage,
//! baseline bookkeeping, and conform's exit code ([`crate::exit`]).
//!
//! It sits above the results ([`crate::outcome`]) and the level tables, and below the
//! reporters: everything it needs is computed here once, from the results and the few facts of
//! the run that are not in them ([`RunFacts`]), so no reporter recomputes a verdict.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::exit;
use crate::levels::{self, ClaimVerdict, KitCheckVerdict, Unselected};
use crate::outcome::{BaselineMark, Counts, ScenarioResult, Status};
use crate::pace::PaceSummary;
use crate::plan::RoleFill;
use crate::scenario::Obligation;

/// What a run knew besides its results.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunFacts<'a> {
    /// Catalogue scenarios that `--only` / `--skip` left out (a claim missing some of its
    /// scenarios is `incomplete`, never `pass`).
    pub unselected: &'a [Unselected],
    /// Whether `--baseline` was given.
    pub baseline_in_use: bool,
    /// Wall-clock time of the run.
    pub duration_ms: u64,
    /// Whether a signal interrupted the run (its unfinished scenarios are skipped as such).
    pub interrupted: bool,
    /// Whether some command of the manifest declares `interruption` (`None`: no manifest was
    /// read); with `Some(false)` §79's claim is not applicable.
    pub interruption_declared: Option<bool>,
    /// The strict gate (`--strict`, the profile's `[gate] strict`): a `should` scenario that
    /// failed unexpectedly makes the run not conformant too. The spec's level claims do not
    /// change: they are the spec's, this is the vendor's gate.
    pub strict: bool,
    /// How the pace went, when it decided how many scenarios ran at once (no `-j`).
    pub pace: Option<&'a PaceSummary>,
    /// The gate accepts `must` scenarios not judged for a reason the vendor can fix
    /// (`--allow-unjudged`, `[gate] allow_unjudged`): exit 0 instead of
    /// [`exit::UNJUDGED`].
    pub allow_unjudged: bool,
    /// Roles the profile left out that another of its roles played.
    pub role_fills: &'a [RoleFill],
}

/// A verdict over a group of scenarios (a requirement, a level).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Every scenario ran and passed.
    Pass,
    /// A scenario counts against conformance.
    Fail,
    /// Neither: something was skipped, or only non-`must` scenarios failed.
    Partial,
    /// Nothing ran.
    Skipped,
}

impl Verdict {
    /// The verdict of a group of results (see the module docs).
    pub fn of<'a>(results: impl IntoIterator<Item = &'a ScenarioResult>) -> Self {
        let mut any_ran = false;
        let mut all_passed = true;
        for r in results {
            if r.counts_against_conformance() {
                return Verdict::Fail;
            }
            any_ran |= r.status.ran();
            all_passed &= r.status == Status::Pass;
        }
        match (any_ran, all_passed) {
            (false, _) => Verdict::Skipped,
            (true, true) => Verdict::Pass,
            (true, false) => Verdict::Partial,
        }
    }

    /// The lowercase word.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Partial => "partial",
            Verdict::Skipped => "skipped",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The verdict on one requirement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequirementVerdict {
    /// The requirement id.
    pub requirement: String,
    /// Its verdict.
    pub verdict: Verdict,
    /// Its scenarios by status.
    pub counts: Counts,
}

/// The verdict on one level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LevelVerdict {
    /// The level.
    pub level: Obligation,
    /// Its verdict.
    pub verdict: Verdict,
    /// Its scenarios by status.
    pub counts: Counts,
}

/// Scenarios skipped for one reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkipGroup {
    /// The reason.
    pub reason: String,
    /// The scenarios skipped for it.
    pub scenarios: Vec<String>,
}

/// What the run could and could not judge.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// Scenarios that ran (pass, fail or error).
    pub run: usize,
    /// Scenarios skipped.
    pub skipped: usize,
    /// Skipped scenarios grouped by reason.
    pub skip_reasons: Vec<SkipGroup>,
    /// Profile roles that were missing (so their scenarios were skipped).
    pub roles_missing: Vec<String>,
    /// Roles the profile left out that another of its roles played.
    #[serde(default)]
    pub roles_filled: Vec<RoleFill>,
    /// `must` scenarios not judged for a reason the vendor can fix
    /// ([`crate::outcome::SkipReason::vendor_can_fix`]).
    #[serde(default)]
    pub unjudged_musts: Vec<String>,
}

/// Baseline bookkeeping of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaselineSummary {
    /// Whether a baseline was in use.
    pub in_use: bool,
    /// Failures the baseline expected.
    pub expected_failures: Vec<String>,
    /// Failures it did not list.
    pub unexpected_failures: Vec<String>,
    /// Entries whose scenario passed.
    pub stale: Vec<String>,
}

/// The outcome of a whole run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSummary {
    /// All scenarios by status.
    pub counts: Counts,
    /// Verdicts per level, `must` first.
    pub levels: Vec<LevelVerdict>,
    /// Verdicts per requirement, sorted by requirement id.
    pub requirements: Vec<RequirementVerdict>,
    /// The spec's Level 1, 2 and 3, then §79 ([`crate::levels`]).
    pub claims: Vec<ClaimVerdict>,
    /// The spec kit's fourteen checks, each as this run answers it ([`crate::levels::kit_checks`]).
    #[serde(default)]
    pub kit_checks: Vec<KitCheckVerdict>,
    /// What could and could not be judged.
    pub coverage: Coverage,
    /// Baseline bookkeeping.
    pub baseline: BaselineSummary,
    /// Whether no scenario counts against conformance.
    pub conformant: bool,
    /// Whether the strict gate was on: a `should` that failed counted like a `must`
    /// ([`RunFacts::strict`]).
    #[serde(default)]
    pub strict: bool,
    /// Whether the gate accepted `must` scenarios not judged for a reason the vendor can fix
    /// ([`RunFacts::allow_unjudged`]).
    #[serde(default)]
    pub allow_unjudged: bool,
    /// conform's exit code for this run (see `exit`).
    pub exit_code: u8,
    /// Wall-clock time of the run.
    pub duration_ms: u64,
    /// Whether a signal interrupted the run: the report is partial.
    #[serde(default)]
    pub interrupted: bool,
    /// How the pace went, when it decided how many scenarios ran at once (no `-j`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace: Option<PaceSummary>,
    /// Verdicts that conform ran again alone before giving them (see
    /// [`ScenarioResult::wants_confirmation`]).
    #[serde(default)]
    pub confirmation: ConfirmationSummary,
}

/// The failures a run confirmed alone, and those that did not repeat.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfirmationSummary {
    /// Scenarios that failed beside the others and again alone: their failure stands.
    pub confirmed: Vec<String>,
    /// Scenarios that failed beside the others and passed alone: reported, not counted (the
    /// machine's load, or a fault that shows only under load).
    pub flaky: Vec<String>,
    /// Scenarios whose premise the run beside the others did not meet, run again alone.
    pub rerun_for_premise: Vec<String>,
}

impl RunSummary {
    /// Summarizes a run's results, given what the run knew besides them (stale baseline entries
    /// are read from the results' [`BaselineMark`]s).
    pub fn compute(results: &[ScenarioResult], facts: &RunFacts<'_>) -> Self {
        let RunFacts {
            unselected,
            baseline_in_use,
            duration_ms,
            interrupted,
            interruption_declared,
            strict,
            pace,
            allow_unjudged,
            role_fills,
        } = *facts;
        // Coverage is read off the results: the roles whose absence skipped a scenario.
        let roles_missing: Vec<String> = results
            .iter()
            .filter_map(|r| match &r.status {
                Status::Skip { reason } => Some(reason.missing_roles()),
                _ => None,
            })
            .flatten()
            .cloned()
            .collect::<std::collections::BTreeSet<String>>()
            .into_iter()
            .collect();
        let mut counts = Counts::default();
        let mut by_requirement: BTreeMap<&str, Vec<&ScenarioResult>> = BTreeMap::new();
        let mut by_level: BTreeMap<Obligation, Vec<&ScenarioResult>> = BTreeMap::new();
        let mut skip_reasons: Vec<SkipGroup> = Vec::new();
        let mut baseline =
            BaselineSummary { in_use: baseline_in_use, ..BaselineSummary::default() };
        for r in results {
            counts.add(r);
            by_requirement.entry(&r.requirement).or_default().push(r);
            by_level.entry(r.level).or_default().push(r);
            if let Status::Skip { reason } = &r.status {
                let reason = reason.to_string();
                match skip_reasons.iter_mut().find(|g| g.reason == reason) {
                    Some(group) => group.scenarios.push(r.id.clone()),
                    None => skip_reasons.push(SkipGroup { reason, scenarios: vec![r.id.clone()] }),
                }
            }
            match &r.baseline {
                Some(BaselineMark::ExpectedFailure { .. }) => {
                    baseline.expected_failures.push(r.id.clone());
                }
                Some(BaselineMark::Stale { .. }) => baseline.stale.push(r.id.clone()),
                Some(BaselineMark::Unexpected) => {
                    baseline.unexpected_failures.push(r.id.clone());
                }
                None => {}
            }
        }
        let group_counts = |group: &[&ScenarioResult]| {
            let mut c = Counts::default();
            group.iter().for_each(|r| c.add(r));
            c
        };
        let requirements = by_requirement
            .into_iter()
            .map(|(requirement, group)| RequirementVerdict {
                requirement: requirement.to_owned(),
                verdict: Verdict::of(group.iter().copied()),
                counts: group_counts(&group),
            })
            .collect();
        let levels = by_level
            .into_iter()
            .map(|(level, group)| LevelVerdict {
                level,
                verdict: Verdict::of(group.iter().copied()),
                counts: group_counts(&group),
            })
            .collect();
        let conformant = !results.iter().any(|r| {
            r.counts_against_conformance()
                || (strict && r.fails_the_strict_gate())
                || (r.level == Obligation::Must
                    && matches!(r.status, Status::Error { .. })
                    && !r.is_expected_failure())
        });
        let mut summary = RunSummary {
            counts,
            levels,
            requirements,
            claims: levels::verdicts(results, unselected, interruption_declared),
            kit_checks: levels::kit_checks(results),
            coverage: Coverage {
                run: counts.total - counts.skip,
                skipped: counts.skip,
                skip_reasons,
                roles_missing,
                roles_filled: role_fills.to_vec(),
                unjudged_musts: results
                    .iter()
                    .filter(|r| r.is_unjudged_must())
                    .map(|r| r.id.clone())
                    .collect(),
            },
            baseline,
            conformant,
            strict,
            allow_unjudged,
            exit_code: 0,
            duration_ms,
            interrupted,
            pace: pace.cloned(),
            confirmation: ConfirmationSummary::of(results),
        };
        summary.exit_code = exit_code(&summary);
        summary
    }

    /// Whether a scenario of this obligation failed (not counting expected failures).
    pub fn failed_at(&self, level: Obligation) -> bool {
        self.levels.iter().any(|l| l.level == level && l.counts.fail > 0)
    }

    /// Whether the baseline made the run fail (an unexpected failure or a stale entry).
    pub fn baseline_surprised(&self) -> bool {
        !self.baseline.stale.is_empty() || !self.baseline.unexpected_failures.is_empty()
    }
}

impl ConfirmationSummary {
    /// Read off the results' first runs.
    pub fn of(results: &[ScenarioResult]) -> Self {
        let mut summary = ConfirmationSummary::default();
        for r in results {
            let Some(first) = &r.first_run else { continue };
            let list = match (&first.status, &r.status) {
                (Status::Fail, Status::Fail) => &mut summary.confirmed,
                (Status::Fail, Status::Pass) => &mut summary.flaky,
                (Status::Skip { .. }, _) => &mut summary.rerun_for_premise,
                _ => continue,
            };
            list.push(r.id.clone());
        }
        summary
    }
}

/// conform's exit code for a finished run (the order is in [`crate::exit`]'s docs).
fn exit_code(summary: &RunSummary) -> u8 {
    // The strict gate counts a failed `should` as a failed `must`.
    let must_failed = summary.failed_at(Obligation::Must)
        || (summary.strict && summary.failed_at(Obligation::Should));
    // An interrupted run says so first: its verdicts cover only what finished.
    if summary.interrupted {
        exit::INTERRUPTED
    } else if must_failed {
        exit::NOT_CONFORMANT
    } else if summary.counts.error > 0 {
        exit::GENERAL_ERROR
    } else if summary.baseline_surprised() {
        exit::BASELINE_MISMATCH
    } else if !summary.coverage.unjudged_musts.is_empty() && !summary.allow_unjudged {
        exit::UNJUDGED
    } else {
        exit::SUCCESS
    }
}
