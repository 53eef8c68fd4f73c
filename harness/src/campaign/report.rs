//! A campaign's reports: progress lines, the human report, the JSON envelope (as `conform run
//! --format json` prints: one envelope whose `data` is the [`CampaignReport`] with a summary
//! beside it), JUnit, and the merge of partitions' JSON reports.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::invariant::{Invariant, TrialVerdict};
use super::schedule::KillTarget;
use super::{CampaignReport, TrialRecord};
use crate::exit;

/// How many bins the kill histogram has over the calibrated work.
pub const KILL_BINS: usize = 10;

/// The summary of a campaign: what its verdict rests on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// Trials run.
    pub trials: u64,
    /// Trials every invariant held in.
    pub held: u64,
    /// Trials with a violation.
    pub violated: u64,
    /// Trials whose schedule could not be carried out (no verdict).
    pub inconclusive: u64,
    /// Trials conform itself failed.
    pub errors: u64,
    /// Trials with a violation, per invariant.
    pub violations: BTreeMap<String, u64>,
    /// Kills, per tenth of the calibrated work they fell in (caller and worker together).
    pub kill_offsets: Vec<KillBin>,
    /// conform's exit code for the campaign.
    pub exit_code: u8,
}

/// One bin of the kill histogram.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KillBin {
    /// From this percent of the calibrated work...
    pub from_percent: u64,
    /// ...to this one.
    pub to_percent: u64,
    /// Kills of the caller.
    pub caller: u64,
    /// Kills of the detached worker.
    pub worker: u64,
}

/// The summary of these trials and failures (`roles` gives each role's calibrated D).
pub fn summarize(report: &CampaignReport) -> Summary {
    let calibrated: BTreeMap<&str, u64> = report
        .roles
        .iter()
        .filter_map(|r| r.calibrated_ms.map(|d| (r.role.as_str(), d.max(1))))
        .collect();
    let mut s = Summary {
        trials: report.trials.len() as u64,
        held: 0,
        violated: 0,
        inconclusive: 0,
        errors: 0,
        violations: BTreeMap::new(),
        kill_offsets: (0..KILL_BINS as u64)
            .map(|i| KillBin {
                from_percent: i * 10,
                to_percent: i * 10 + 10,
                caller: 0,
                worker: 0,
            })
            .collect(),
        exit_code: exit::SUCCESS,
    };
    for t in &report.trials {
        match &t.verdict {
            TrialVerdict::Held => s.held += 1,
            TrialVerdict::Violated { violations } => {
                s.violated += 1;
                let mut names: Vec<&str> = violations.iter().map(|v| v.invariant.name()).collect();
                names.sort_unstable();
                names.dedup();
                for name in names {
                    *s.violations.entry(name.to_owned()).or_default() += 1;
                }
            }
            TrialVerdict::Inconclusive { .. } => s.inconclusive += 1,
            TrialVerdict::Error { .. } => s.errors += 1,
        }
        let d = calibrated.get(t.schedule.role.as_str()).copied().unwrap_or(1);
        for (target, after) in t.schedule.kill_positions(report.startup_ms) {
            let bin = ((after * KILL_BINS as u64) / d).min(KILL_BINS as u64 - 1) as usize;
            match target {
                KillTarget::Caller => s.kill_offsets[bin].caller += 1,
                KillTarget::Worker => s.kill_offsets[bin].worker += 1,
            }
        }
    }
    let confirmed = report.failures.iter().any(|f| f.confirmed);
    s.exit_code = if report.interrupted {
        exit::INTERRUPTED
    } else if confirmed {
        exit::NOT_CONFORMANT
    } else if s.held == 0 && s.errors > 0 {
        exit::GENERAL_ERROR
    } else {
        exit::SUCCESS
    };
    s
}

/// One line per trial, for CI logs and terminals.
pub fn progress_line(t: &TrialRecord) -> String {
    let verdict = match &t.verdict {
        TrialVerdict::Held => "held".to_owned(),
        TrialVerdict::Violated { violations } => {
            let names: Vec<&str> = violations.iter().map(|v| v.invariant.name()).collect();
            let first = violations.first().map(|v| {
                let at = v.step.as_deref().unwrap_or("-");
                let actual = v.actual.as_deref().map(|a| format!(": {a}")).unwrap_or_default();
                format!(" (at `{at}`{actual})")
            });
            format!("VIOLATED {}{}", names.join(", "), first.unwrap_or_default())
        }
        TrialVerdict::Inconclusive { why } => format!("no verdict ({why})"),
        TrialVerdict::Error { message } => format!("error ({message})"),
    };
    crate::inert::line(&format!(
        "trial {:>4}  {:>6} ms  {verdict}  [{}]",
        t.trial, t.duration_ms, t.schedule
    ))
    .into_owned()
}

/// The human report.
pub fn human(report: &CampaignReport) -> String {
    let s = summarize(report);
    let mut out = String::new();
    let _ = writeln!(out, "conform campaign: {} (seed {})", report.tool, report.seed);
    if let Some((k, n)) = report.partition {
        let _ = writeln!(out, "partition {k}/{n}");
    }
    let _ = writeln!(out, "\nRoles");
    for r in &report.roles {
        let shape = match (r.detach, r.resume) {
            (true, true) => "detach + resume",
            (true, false) => "detach",
            (false, true) => "resume",
            (false, false) => "no interruption",
        };
        let d = r.calibrated_ms.map(|d| format!(", D = {d} ms")).unwrap_or_default();
        match &r.left_out {
            Some(why) => {
                let _ = writeln!(out, "  {} ({shape}{d}): left out, {why}", r.role);
            }
            None => {
                let _ = writeln!(out, "  {} ({shape}{d})", r.role);
            }
        }
    }
    let _ = writeln!(out, "\nKill offsets (share of the calibrated work; caller / worker)");
    let most = s.kill_offsets.iter().map(|b| b.caller + b.worker).max().unwrap_or(0).max(1);
    for b in &s.kill_offsets {
        let n = b.caller + b.worker;
        let bar = "#".repeat(((n * 30).div_ceil(most)) as usize);
        let _ = writeln!(
            out,
            "  {:>3}-{:<3}% {:>4} / {:<4} {bar}",
            b.from_percent, b.to_percent, b.caller, b.worker
        );
    }
    let _ = writeln!(out, "\nInvariants");
    for inv in Invariant::ALL {
        let n = s.violations.get(inv.name()).copied().unwrap_or(0);
        if n > 0 || inv != Invariant::Other {
            let verdict =
                if n == 0 { "held".to_owned() } else { format!("broken in {n} trial(s)") };
            let _ = writeln!(out, "  {:<16} {verdict}", inv.name());
        }
    }
    for f in &report.failures {
        let _ = writeln!(out, "\nViolation: {} ({})", f.invariant, f.sentence);
        let _ = writeln!(out, "  first seen: trial {} [{}]", f.trial.trial, f.trial.schedule);
        if let TrialVerdict::Violated { violations } = &f.trial.verdict
            && let Some(v) = violations.iter().find(|v| v.invariant == f.invariant)
        {
            let at = v.step.as_deref().map(|s| format!(" at step `{s}`")).unwrap_or_default();
            let _ = writeln!(out, "  {}{at}", crate::inert::line(&v.message));
            if let Some(e) = &v.expected {
                let _ = writeln!(out, "    expected: {}", crate::inert::line(e));
            }
            if let Some(a) = &v.actual {
                let _ = writeln!(out, "    actual:   {}", crate::inert::line(a));
            }
        }
        if !f.confirmed {
            let why =
                f.load.clone().unwrap_or_else(|| "not seen again with the trial alone".to_owned());
            let _ = writeln!(out, "  not confirmed (a bound on time): {why}");
            continue;
        }
        let _ = writeln!(
            out,
            "  minimal schedule ({} event(s), {} shrink runs): {}",
            f.minimal.events.len(),
            f.shrink_runs,
            f.minimal
        );
        let _ = writeln!(out, "  reproduces in {} of {} runs", f.reproduced, f.reproduce_runs);
        let _ = writeln!(out, "  replay the trial: {}", f.replay_trial);
        if let Some(file) = &f.schedule_file {
            let _ =
                writeln!(out, "  replay the minimal schedule: {} --replay {file}", report.command);
        }
        if let (Some(file), Some(run)) = (&f.scenario_file, &f.run_command) {
            let _ =
                writeln!(out, "  kept as a scenario: {file} (conform run TOOL --profile P {run})");
        }
    }
    let _ = writeln!(out, "\nSummary");
    let _ = writeln!(
        out,
        "  trials: {} ({} held, {} violated, {} without verdict, {} errors) in {:.1} s",
        s.trials,
        s.held,
        s.violated,
        s.inconclusive,
        s.errors,
        report.duration_ms as f64 / 1000.0
    );
    if let Some(ms) = report.first_violation_ms {
        let _ = writeln!(out, "  first violation after {:.1} s", ms as f64 / 1000.0);
    }
    let verdict = match s.exit_code {
        exit::SUCCESS => "no violation (exit 0)",
        exit::NOT_CONFORMANT => "VIOLATION (exit 80 NOT_CONFORMANT)",
        exit::INTERRUPTED => "interrupted (exit 130): what finished is above",
        _ => "no trial could be judged (exit 1)",
    };
    let stopped =
        if report.stopped_early { ", stopped at the first confirmed violation" } else { "" };
    let _ = writeln!(out, "  verdict: {verdict}{stopped}");
    out
}

/// The JSON report: one envelope, `data` the campaign and its summary.
pub fn envelope(report: &CampaignReport) -> Value {
    let s = summarize(report);
    let mut data = serde_json::to_value(report).unwrap_or(Value::Null);
    data["summary"] = serde_json::to_value(&s).unwrap_or(Value::Null);
    let error = match s.exit_code {
        exit::SUCCESS => Value::Null,
        exit::NOT_CONFORMANT => json!({
            "code": "NOT_CONFORMANT",
            "message": format!(
                "the campaign broke {}",
                report.failures.iter().filter(|f| f.confirmed).map(|f| f.invariant.name()).collect::<Vec<_>>().join(", ")
            ),
            "retryable": false,
        }),
        exit::INTERRUPTED => {
            json!({"code": "INTERRUPTED", "message": "interrupted; the report holds what finished", "retryable": true})
        }
        _ => {
            json!({"code": "GENERAL_ERROR", "message": "no trial could be judged", "retryable": false})
        }
    };
    json!({
        "ok": s.exit_code == exit::SUCCESS,
        "data": data,
        "error": error,
        "warnings": [],
        "meta": {"exit_code": s.exit_code, "duration_ms": report.duration_ms},
    })
}

/// JUnit XML: one test suite, one test case per invariant (failed when broken, with the
/// minimal schedule and the replay command).
pub fn junit(report: &CampaignReport) -> Result<String, String> {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let s = summarize(report);
    let mut suite = TestSuite::new(format!("campaign seed {}", report.seed));
    for inv in Invariant::ALL {
        let failure = report.failures.iter().find(|f| f.invariant == inv && f.confirmed);
        let status = match failure {
            Some(f) => {
                let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
                st.set_message(format!("broken in trial {}: {}", f.trial.trial, f.minimal));
                st.set_description(format!(
                    "{}\nminimal schedule: {}\nreproduces in {} of {} runs\nreplay: {}",
                    f.sentence, f.minimal, f.reproduced, f.reproduce_runs, f.replay_trial
                ));
                st
            }
            None if s.violations.contains_key(inv.name()) => {
                let mut st = TestCaseStatus::skipped();
                st.set_message("broken only under load; not seen again alone");
                st
            }
            None if inv == Invariant::Other => continue,
            None => TestCaseStatus::success(),
        };
        let mut case = TestCase::new(inv.name(), status);
        case.set_classname(inv.requirement());
        suite.add_test_case(case);
    }
    let mut junit = Report::new("conform campaign");
    junit.add_test_suite(suite);
    junit.to_string().map_err(|e| e.to_string())
}

/// Merges the JSON reports of a partitioned campaign (`conform campaign merge`): their
/// trials and failures together, the longest time, one verdict.
pub fn merge(reports: &[CampaignReport]) -> Result<CampaignReport, String> {
    let Some(first) = reports.first() else { return Err("nothing to merge".to_owned()) };
    if let Some(other) = reports.iter().find(|r| r.seed != first.seed) {
        return Err(format!(
            "the reports come from different seeds ({} and {}): partitions of one campaign share its seed",
            first.seed, other.seed
        ));
    }
    let mut merged = first.clone();
    merged.partition = None;
    for r in &reports[1..] {
        merged.trials.extend(r.trials.iter().cloned());
        for f in &r.failures {
            if !merged.failures.iter().any(|m| m.invariant == f.invariant) {
                merged.failures.push(f.clone());
            }
        }
        merged.duration_ms = merged.duration_ms.max(r.duration_ms);
        merged.first_violation_ms = match (merged.first_violation_ms, r.first_violation_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        merged.interrupted |= r.interrupted;
        merged.stopped_early |= r.stopped_early;
    }
    merged.trials.sort_by_key(|t| t.trial);
    Ok(merged)
}

/// A campaign report from a JSON report file's text (the envelope `--format json` prints).
pub fn parse_report(text: &str) -> Result<CampaignReport, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| format!("no JSON: {e}"))?;
    let data = value.get("data").cloned().unwrap_or(value);
    serde_json::from_value(data).map_err(|e| format!("no campaign report: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::campaign::schedule::{Budget, Event, Schedule, Sig};
    use crate::campaign::{CampaignReport, RoleReport};

    fn report(seed: u64, trials: Vec<TrialRecord>) -> CampaignReport {
        CampaignReport {
            tool: "t".into(),
            startup_ms: 0,
            command: "conform campaign t".into(),
            seed,
            partition: None,
            roles: vec![RoleReport {
                role: "resume_writer".into(),
                calibrated_ms: Some(1000),
                detach: false,
                resume: true,
                left_out: None,
            }],
            trials,
            failures: vec![],
            duration_ms: 10,
            first_violation_ms: None,
            interrupted: false,
            stopped_early: false,
        }
    }

    fn trial(n: u64, kill_at: u64) -> TrialRecord {
        TrialRecord {
            trial: n,
            schedule: Schedule {
                role: "resume_writer".into(),
                events: vec![Event::Call {
                    budget: Budget::Off,
                    copies: 1,
                    signal: Some((Sig::Kill, kill_at)),
                }],
                final_budget_ms: 300,
            },
            verdict: TrialVerdict::Held,
            duration_ms: 5,
        }
    }

    #[test]
    fn kills_fall_in_the_tenth_of_the_work_they_hit() {
        let s = summarize(&report(1, vec![trial(0, 50), trial(1, 950), trial(2, 5000)]));
        assert_eq!(s.kill_offsets[0].caller, 1);
        assert_eq!(s.kill_offsets[9].caller, 2);
        assert_eq!(s.exit_code, exit::SUCCESS);
        assert_eq!(s.held, 3);
    }

    #[test]
    fn partitions_merge_into_one_campaign() {
        let a = report(7, vec![trial(0, 1), trial(2, 1)]);
        let b = report(7, vec![trial(1, 1)]);
        let merged = merge(&[a.clone(), b]).unwrap();
        assert_eq!(merged.trials.iter().map(|t| t.trial).collect::<Vec<_>>(), [0, 1, 2]);
        assert!(merge(&[a, report(8, vec![])]).is_err());
        let round = parse_report(&envelope(&merged).to_string()).unwrap();
        assert_eq!(round.trials.len(), 3);
    }
}
