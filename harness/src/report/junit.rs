//! `--junit FILE`: JUnit XML for CI systems.
//!
//! One `<testsuite>` per requirement, one `<testcase>` per scenario (name = scenario id,
//! classname = requirement, with the level as a property). A failed scenario is a `<failure>`
//! whose message is its first finding and whose text holds every finding and the repro lines;
//! a harness error is an `<error>`; a skipped scenario is `<skipped>` with the reason. A
//! failure the baseline expected is reported as passed, with a `baseline` property saying so
//! (CI systems have no "expected failure"); a stale baseline entry is a `<failure>`, as it
//! fails the run.

use std::fmt::Write as _;
use std::time::Duration;

use quick_junit::{
    NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestRerun, TestSuite,
};

use super::human::steps_to_show;
use super::{Collector, RunReport, Sink};
use crate::event::{Event, ReportError, Reporter};
use crate::inert;
use crate::outcome::{BaselineMark, ScenarioResult, Status};

/// Writes JUnit XML when the run finishes.
pub struct JunitReporter {
    sink: Sink,
    collector: Collector,
}

impl JunitReporter {
    /// A reporter writing to `sink`.
    pub fn new(sink: Sink) -> Self {
        JunitReporter { sink, collector: Collector::default() }
    }
}

impl Reporter for JunitReporter {
    fn handle(&mut self, event: &Event) -> Result<(), ReportError> {
        match self.collector.record(event) {
            Some(report) => {
                let xml = render(&report)?;
                self.sink.write_all(&xml)
            }
            None => Ok(()),
        }
    }
}

/// The JUnit XML of a finished run.
pub fn render(report: &RunReport) -> Result<String, ReportError> {
    let mut junit = Report::new(format!("conform {}", report.info.tool));
    junit.set_time(Duration::from_millis(report.summary.duration_ms));
    for (requirement, group) in report.by_requirement() {
        let mut suite = TestSuite::new(requirement);
        // JUnit keeps properties per suite only: every suite carries the run's claims.
        for c in &report.summary.claims {
            suite.add_property(Property::new(format!("claim.{}", c.claim), c.verdict.as_str()));
        }
        if report.summary.interrupted {
            // conform was interrupted: these results are what finished, not the whole run.
            suite.add_property(Property::new("partial", "true"));
        }
        let time: u64 = group.iter().map(|r| r.duration_ms).sum();
        suite.set_time(Duration::from_millis(time));
        for r in group {
            suite.add_test_case(test_case(r));
        }
        junit.add_test_suite(suite);
    }
    // The XML writer strips escape sequences; what it lets through (a C1 control, a
    // bidirectional override) is made visible here, in whatever field it came.
    junit
        .to_string()
        .map(|xml| inert::text(&xml).into_owned())
        .map_err(|e| ReportError::new("serialize the JUnit report", std::io::Error::other(e)))
}

fn test_case(r: &ScenarioResult) -> TestCase {
    let status = match (&r.status, &r.baseline) {
        (_, Some(BaselineMark::ExpectedFailure { .. })) => TestCaseStatus::success(),
        (_, Some(BaselineMark::Stale { reason })) => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_type("stale-baseline")
                .set_message("the scenario passes but the baseline expects it to fail")
                .set_description(format!("baseline reason: {reason}"));
            s
        }
        (Status::Pass, _) => TestCaseStatus::success(),
        (Status::Fail, _) => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            let message = r
                .findings
                .first()
                .map_or_else(|| "failed".to_owned(), |f| inert::line(&f.message).into_owned());
            let ty = r.findings.first().map_or_else(|| "fail".to_owned(), |f| f.check.to_string());
            s.set_type(ty).set_message(message).set_description(failure_text(r));
            s
        }
        (Status::Skip { reason }, _) => {
            let mut s = TestCaseStatus::skipped();
            s.set_message(inert::line(&reason.to_string()).into_owned());
            s
        }
        (Status::Error { message }, _) => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
            s.set_type("harness-error")
                .set_message(inert::line(message).into_owned())
                .set_description(failure_text(r));
            s
        }
    };
    // A first run that failed beside the others and was confirmed or not alone: a rerun, as
    // nextest records a flaky test (`flakyFailure` on a pass, `rerunFailure` on a failure).
    let mut status = status;
    if let Some(first) = r.first_run.as_deref().filter(|f| f.status == Status::Fail) {
        let mut rerun = TestRerun::new(NonSuccessKind::Failure);
        let finding = first.findings.first();
        rerun
            .set_type(finding.map_or_else(|| "fail".to_owned(), |f| f.check.to_string()))
            .set_message(finding.map_or_else(
                || "failed beside the other scenarios".to_owned(),
                |f| format!("beside the other scenarios: {}", f.message),
            ))
            .set_time(Duration::from_millis(first.duration_ms));
        status.add_rerun(rerun);
    }
    let mut case = TestCase::new(r.id.as_str(), status);
    case.set_classname(r.requirement.as_str());
    case.set_time(Duration::from_millis(r.duration_ms));
    case.add_property(Property::new("level", r.level.as_str()));
    case.add_property(Property::new("criterion", r.criterion.as_str()));
    if let Some(BaselineMark::ExpectedFailure { reason }) = &r.baseline {
        case.add_property(Property::new("baseline", format!("expected failure: {reason}")));
    }
    case
}

/// Every finding, then the repro of the steps they name; what the tool wrote in it made
/// visible ([`inert::text`]) rather than left for the XML writer to strip.
fn failure_text(r: &ScenarioResult) -> String {
    let mut out = format!("{}\n", r.criterion);
    for finding in &r.findings {
        let _ = writeln!(out, "\n{finding}");
    }
    for step in steps_to_show(r) {
        let _ = writeln!(out, "\nreproduce `{}` ({}):\n  {}", step.name, step.ended, step.repro);
    }
    inert::text(&out).into_owned()
}
