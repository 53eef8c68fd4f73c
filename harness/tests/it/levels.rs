//! The spec's conformance levels and §79 as verdicts: which scenarios decide each, and when a
//! claim is a pass, a fail or incomplete.

use conform::catalogue::Catalogue;
use conform::levels::{
    Claim, ClaimVerdict, KIT_CHECKS, KitStatus, Unselected, kit_checks, spec_level, verdicts,
};
use conform::outcome::{BaselineMark, ScenarioResult, SkipReason, Status};
use conform::scenario::{Declaration, Obligation};
use conform::summary::{RunFacts, RunSummary};

use crate::report::result;

fn claim<'a>(all: &'a [ClaimVerdict], name: &str) -> &'a ClaimVerdict {
    all.iter().find(|c| c.claim == name).unwrap_or_else(|| panic!("no claim {name}"))
}

fn verdict_words(all: &[ClaimVerdict]) -> Vec<(&str, Claim)> {
    all.iter().map(|c| (c.claim.as_str(), c.verdict)).collect()
}

fn pass(id: &str, requirement: &str) -> ScenarioResult {
    result(id, requirement, Obligation::Must, Status::Pass)
}

/// One passing `must` scenario for a Level 1, a Level 2 and a §79 requirement, then a pass for
/// every other scenario of the kit's checks (a level needs them all).
fn all_levels_pass() -> Vec<ScenarioResult> {
    let mut results = vec![
        pass("help-keeps-stdout-clean", "REQ-F-048"),
        pass("destructive-refuses-unconfirmed", "REQ-C-005"),
        pass("budget-flag-beats-env", "REQ-F-080"),
    ];
    let catalogue = Catalogue::embedded().expect("the catalogue loads");
    for check in &KIT_CHECKS {
        for id in check.scenarios {
            if results.iter().all(|r| r.id != *id) {
                let scenario = catalogue.get(id).unwrap_or_else(|| panic!("no scenario {id}"));
                results.push(pass(id, &scenario.requirement));
            }
        }
    }
    results
}

/// Every kit check names scenarios of the catalogue that are `must`, tagged `kit`, and whose
/// requirement sits at the kit's level for the check or below it (a kit check never decides a
/// level lower than the kit's).
#[test]
fn every_kit_check_is_made_of_kit_scenarios_at_its_level() {
    let catalogue = Catalogue::embedded().expect("the catalogue loads");
    assert_eq!(KIT_CHECKS.len(), 14);
    for check in &KIT_CHECKS {
        assert!(!check.scenarios.is_empty(), "{}", check.id);
        for id in check.scenarios {
            let scenario = catalogue.get(id).unwrap_or_else(|| panic!("{}: no {id}", check.id));
            assert_eq!(scenario.level, Obligation::Must, "{id}");
            assert!(scenario.tags.iter().any(|t| t == "kit"), "{id} is not tagged kit");
            assert!(
                spec_level(&scenario.requirement) <= check.level,
                "{id} ({}) sits above the kit's level {} for {}",
                scenario.requirement,
                check.level,
                check.id
            );
        }
    }
}

#[test]
fn kit_checks_read_like_the_kit_pass_fail_or_skip() {
    let mut results = all_levels_pass();
    assert!(kit_checks(&results).iter().all(|k| k.status == KitStatus::Pass));
    let status = |results: &[ScenarioResult], check: &str| {
        kit_checks(results).into_iter().find(|k| k.check == check).expect(check).status
    };
    // One scenario of four skipped: the check did not fully run.
    let at = results.iter().position(|r| r.id == "conflicting-repeats-are-arg-errors").unwrap();
    results[at].status = Status::Skip {
        reason: SkipReason::MissingKit { what: "`argument_order`".into(), profile: true },
    };
    assert_eq!(status(&results, "argument_order"), KitStatus::Skip);
    // A failure wins over a skip, and one the baseline expected still fails the kit's check.
    let other = results.iter().position(|r| r.id == "options-after-positionals-take-effect");
    results[other.unwrap()].status = Status::Fail;
    results[other.unwrap()].baseline =
        Some(BaselineMark::ExpectedFailure { reason: "known".into() });
    assert_eq!(status(&results, "argument_order"), KitStatus::Fail);
    // A scenario missing from the results altogether is a skip.
    results.retain(|r| r.id != "dry-run-changes-nothing");
    assert_eq!(status(&results, "dry_run_preview"), KitStatus::Skip);
    assert_eq!(status(&results, "help_off_stdout"), KitStatus::Pass);
}

#[test]
fn requirements_sit_at_the_lowest_level_that_includes_them() {
    assert_eq!(spec_level("REQ-F-009"), 1);
    assert_eq!(spec_level("REQ-C-004"), 1);
    assert_eq!(spec_level("REQ-C-005"), 2);
    assert_eq!(spec_level("REQ-O-021"), 2);
    assert_eq!(spec_level("REQ-C-022"), 2);
    assert_eq!(spec_level("REQ-C-007"), 3);
    for r in ["REQ-C-033", "REQ-F-080", "REQ-F-081", "REQ-F-082", "REQ-C-034", "REQ-C-035"] {
        assert_eq!(spec_level(r), 3, "{r} is P1");
    }
}

#[test]
fn every_must_scenario_passing_passes_every_claim() {
    let all = verdicts(&all_levels_pass(), &[], None);
    assert_eq!(
        verdict_words(&all),
        [
            ("level-1", Claim::Pass),
            ("level-2", Claim::Pass),
            ("level-3", Claim::Pass),
            ("interruption", Claim::Pass)
        ]
    );
    // Levels contain the ones below them; §79 only its own requirements.
    assert!(claim(&all, "level-1").requirements.iter().all(|r| spec_level(r) == 1));
    assert!(claim(&all, "level-2").requirements.contains(&"REQ-C-005".to_owned()));
    assert!(claim(&all, "level-2").requirements.iter().all(|r| spec_level(r) <= 2));
    assert_eq!(claim(&all, "level-3").counts.pass, all_levels_pass().len());
    assert_eq!(claim(&all, "interruption").requirements, ["REQ-C-033", "REQ-F-080"]);
    assert!(all.iter().all(|c| c.reasons.is_empty()), "{all:#?}");
}

#[test]
fn a_failure_fails_its_level_and_every_level_above_only() {
    let mut results = all_levels_pass();
    results[1].status = Status::Fail;
    let all = verdicts(&results, &[], None);
    assert_eq!(
        verdict_words(&all),
        [
            ("level-1", Claim::Pass),
            ("level-2", Claim::Fail),
            ("level-3", Claim::Fail),
            ("interruption", Claim::Pass)
        ]
    );
    assert_eq!(claim(&all, "level-2").reasons, ["`destructive-refuses-unconfirmed` failed"]);
    assert_eq!(claim(&all, "level-2").failed, ["destructive-refuses-unconfirmed"]);
    assert_eq!(claim(&all, "level-2").not_judged, 0);
}

#[test]
fn a_skip_or_a_harness_error_leaves_a_claim_incomplete_and_a_failure_still_wins() {
    let mut results = all_levels_pass();
    results[0].status = Status::Skip {
        reason: SkipReason::MissingKit { what: "`read` probes".into(), profile: true },
    };
    results[2].status = Status::Error { message: "sandbox".into() };
    let all = verdicts(&results, &[], None);
    assert_eq!(claim(&all, "level-1").verdict, Claim::Incomplete);
    assert_eq!(
        claim(&all, "level-1").reasons,
        ["`help-keeps-stdout-clean` skipped: profile names no kit `read` probes"]
    );
    assert_eq!(claim(&all, "interruption").verdict, Claim::Incomplete);
    assert_eq!(claim(&all, "level-3").not_judged, 2);
    assert!(claim(&all, "level-3").failed.is_empty());
    results[1].status = Status::Fail;
    assert_eq!(claim(&verdicts(&results, &[], None), "level-3").verdict, Claim::Fail);
}

#[test]
fn should_and_may_scenarios_and_expected_failures_never_fail_a_claim() {
    let mut results = all_levels_pass();
    results.push(result("advisory", "REQ-F-080", Obligation::Should, Status::Fail));
    results.push(result(
        "optional",
        "REQ-F-009",
        Obligation::May,
        Status::Skip { reason: SkipReason::NoInstanceSelection },
    ));
    assert!(
        verdicts(&results, &[], None)
            .iter()
            .filter(|c| c.claim != "level-3")
            .all(|c| c.verdict == Claim::Pass)
    );
    // A failure the baseline expected is known, not judged: the claim waits for its fix.
    results[2].status = Status::Fail;
    results[2].baseline = Some(BaselineMark::ExpectedFailure { reason: "issue 7".into() });
    let all = verdicts(&results, &[], None);
    assert_eq!(claim(&all, "interruption").verdict, Claim::Incomplete);
    assert_eq!(claim(&all, "level-1").verdict, Claim::Pass);
}

/// The strict gate (`--strict`, `[gate] strict`) makes a failed `should` fail the run (exit
/// 80, not conformant), unless a baseline expects it; the spec's claims stay as they were.
#[test]
fn the_strict_gate_fails_a_run_on_a_should_and_leaves_the_claims_alone() {
    let mut results = all_levels_pass();
    results.push(result("advisory", "REQ-F-080", Obligation::Should, Status::Fail));
    let lenient = RunSummary::compute(&results, &RunFacts::default());
    assert_eq!((lenient.exit_code, lenient.conformant, lenient.strict), (0, true, false));
    let strict = RunSummary::compute(&results, &RunFacts { strict: true, ..RunFacts::default() });
    assert_eq!((strict.exit_code, strict.conformant, strict.strict), (80, false, true));
    assert_eq!(strict.claims, lenient.claims);
    // A `should` failure the baseline expects is known, under the strict gate too.
    let last = results.len() - 1;
    results[last].baseline = Some(BaselineMark::ExpectedFailure { reason: "issue 9".into() });
    let strict = RunSummary::compute(&results, &RunFacts { strict: true, ..RunFacts::default() });
    assert_eq!((strict.exit_code, strict.conformant), (0, true));
}

#[test]
fn a_scenario_left_out_by_only_leaves_its_levels_incomplete() {
    let mut results = all_levels_pass();
    results.retain(|r| r.id != "invalid-probes-are-arg-errors");
    let unselected = [Unselected {
        id: "invalid-probes-are-arg-errors".into(),
        requirement: "REQ-F-002".into(),
        level: Obligation::Must,
    }];
    let all = verdicts(&results, &unselected, None);
    assert!(all[..3].iter().all(|c| c.verdict == Claim::Incomplete), "{all:#?}");
    assert_eq!(
        claim(&all, "level-1").reasons,
        ["1 `must` scenario not selected (--only / --skip)"]
    );
    assert_eq!(claim(&all, "level-1").not_judged, 1);
    assert_eq!(claim(&all, "interruption").verdict, Claim::Pass);
    // RunSummary carries the same verdicts once told what was left out.
    let summary = RunSummary::compute(&all_levels_pass(), &RunFacts::default());
    assert_eq!(claim(&summary.claims, "level-1").verdict, Claim::Pass);
    let facts = RunFacts { unselected: &unselected, ..RunFacts::default() };
    let summary = RunSummary::compute(&results, &facts);
    assert_eq!(claim(&summary.claims, "level-1").verdict, Claim::Incomplete);
}

#[test]
fn nothing_to_judge_is_incomplete_not_a_pass() {
    let all = verdicts(&[pass("budget-flag-beats-env", "REQ-F-080")], &[], None);
    assert_eq!(claim(&all, "level-1").verdict, Claim::Incomplete);
    assert_eq!(claim(&all, "level-1").reasons, ["no `must` scenario checks it"]);
    // A claim judges what ran: a real run reports every other scenario of the catalogue as a
    // result or as not selected, and those decide it (see the test above).
    assert_eq!(claim(&all, "level-3").verdict, Claim::Pass);
}

/// A criterion no command declares anything for keeps no claim from a verdict; §79 on a tool
/// without any interruption declaration is not applicable, unless one of its scenarios failed.
#[test]
fn not_applicable_skips_leave_claims_alone_and_section_79_can_be_not_applicable() {
    let not_applicable = || Status::Skip {
        reason: SkipReason::NotApplicable {
            needs: Declaration::Detach,
            role: Some("detach".into()),
        },
    };
    let mut results = all_levels_pass();
    results.push(result(
        "detach-hands-off-running",
        "REQ-F-082",
        Obligation::Must,
        not_applicable(),
    ));
    let all = verdicts(&results, &[], None);
    assert_eq!(claim(&all, "level-3").verdict, Claim::Pass, "{all:#?}");
    assert_eq!(claim(&all, "level-3").not_judged, 0);
    assert_eq!(claim(&all, "level-3").not_applicable, 1);
    assert_eq!(claim(&all, "interruption").verdict, Claim::Pass);
    // The manifest read and no command declaring interruption: nothing to claim, even with
    // another §79 scenario skipped for a missing role.
    results.push(result(
        "stalled-job-times-out",
        "REQ-F-081",
        Obligation::Must,
        Status::Skip {
            reason: SkipReason::MissingRoles {
                roles: vec!["stalling".into()],
                profile: true,
                candidates: Vec::new(),
            },
        },
    ));
    let all = verdicts(&results, &[], Some(false));
    let interruption = claim(&all, "interruption");
    assert_eq!(interruption.verdict, Claim::NotApplicable, "{interruption:#?}");
    assert_eq!(interruption.reasons, ["no command of the manifest declares `interruption`"]);
    assert_eq!(
        claim(&verdicts(&results, &[], Some(true)), "interruption").verdict,
        Claim::Incomplete
    );
    // A failure is news even where nothing is declared.
    results[2].status = Status::Fail;
    assert_eq!(claim(&verdicts(&results, &[], Some(false)), "interruption").verdict, Claim::Fail);
}

/// The README's table of the kit's checks says what [`KIT_CHECKS`] says, and every fixture and
/// fault it names exists.
#[test]
fn the_readme_kit_table_is_the_kit_checks() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let begin = readme.find("<!-- kit:begin").expect("README has the kit table");
    let end = readme.find("<!-- kit:end -->").expect("README closes the kit table");
    let rows: Vec<Vec<String>> = readme[begin..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| l.trim_matches('|').split(" | ").map(|c| c.trim().to_owned()).collect())
        .collect();
    let names = |cell: &str| -> Vec<String> {
        if cell.starts_with('(') {
            return Vec::new(); // not a kit fixture: said in words
        }
        cell.split(", ").map(|n| n.trim_matches('`').to_owned()).collect()
    };
    assert_eq!(rows.len(), KIT_CHECKS.len(), "{rows:#?}");
    let faults = std::fs::read_to_string(root.join("faults/src/catalogue.rs")).unwrap();
    let kit_dir = root.join("harness/tests/fixtures/tools/kit");
    for (row, check) in rows.iter().zip(&KIT_CHECKS) {
        assert_eq!(row.len(), 5, "{row:?}");
        assert_eq!(row[0], format!("`{}`", check.id));
        assert_eq!(row[1], check.level.to_string(), "{}", check.id);
        assert_eq!(names(&row[2]), check.scenarios, "{}", check.id);
        for fixture in names(&row[3]) {
            assert!(kit_dir.join(&fixture).is_file(), "{}: no kit fixture {fixture}", check.id);
        }
        let named = names(&row[4]);
        assert!(!named.is_empty(), "{}: no fault", check.id);
        for fault in named {
            assert!(
                faults.contains(&format!("= \"{fault}\"")),
                "{}: no reftool fault {fault}",
                check.id
            );
        }
    }
}
