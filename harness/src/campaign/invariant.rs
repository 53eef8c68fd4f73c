//! Invariants: what must hold after every trial of a campaign, whatever its schedule did.
//!
//! Each is a pure function of what the trial recorded (its findings, its step records), so
//! that it can be unit-tested and replayed on stored evidence. Most are judged by the trial's
//! own scenario steps (the epilogue's `matches_calibrated`, the `verify`
//! oracle, the hold of every call, the sandbox sweep) and only *named* here
//! ([`classify`]); two more are judged here over every response of the trial
//! ([`progress_within_jobs`], [`envelopes`]).

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::outcome::{Ended, Finding, FindingKind, StepRecord};

use super::schedule::{EFFECT, FINISH, FINISH_LOOP};

/// One invariant of a campaign, each enforcing a sentence of the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Invariant {
    /// The effect oracle (`verify`) answers what it answered after the uninterrupted run.
    Effect,
    /// The continue loop ends in the response the work gives with `--budget 0`.
    FinalResponse,
    /// `progress.done` never goes back within one job.
    Progress,
    /// Every response is one valid envelope with a legal exit for its call.
    Envelope,
    /// Every call returned within its budget plus the measured slack.
    WithinBudget,
    /// Identical invocations at once attach to one job.
    OneJob,
    /// No process of the tool is left once the trial ends.
    NoProcessLeft,
    /// Nothing the trial left behind makes the next identical invocation fail.
    NextInvocation,
    /// A finding no other invariant names (its kind is in the evidence).
    Other,
}

impl Invariant {
    /// Every invariant, in report order.
    pub const ALL: [Invariant; 9] = [
        Invariant::Effect,
        Invariant::FinalResponse,
        Invariant::Progress,
        Invariant::Envelope,
        Invariant::WithinBudget,
        Invariant::OneJob,
        Invariant::NoProcessLeft,
        Invariant::NextInvocation,
        Invariant::Other,
    ];

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Invariant::Effect => "effect",
            Invariant::FinalResponse => "final-response",
            Invariant::Progress => "progress",
            Invariant::Envelope => "envelope",
            Invariant::WithinBudget => "within-budget",
            Invariant::OneJob => "one-job",
            Invariant::NoProcessLeft => "no-process-left",
            Invariant::NextInvocation => "next-invocation",
            Invariant::Other => "other",
        }
    }

    /// The requirement it enforces (the directory a kept failure is filed under).
    pub fn requirement(self) -> &'static str {
        match self {
            Invariant::Effect | Invariant::NextInvocation => "REQ-C-035",
            Invariant::FinalResponse | Invariant::Progress => "REQ-F-082",
            Invariant::Envelope => "REQ-F-004",
            Invariant::WithinBudget => "REQ-F-080",
            Invariant::OneJob | Invariant::NoProcessLeft | Invariant::Other => "REQ-F-081",
        }
    }

    /// The spec's sentence it enforces, in the project's words with the requirement id.
    pub fn sentence(self) -> &'static str {
        match self {
            Invariant::Effect => {
                "REQ-C-035: after kill -9 midway the identical invocation gives the result of an uninterrupted run, and a resumed writer commits no unit twice; REQ-F-081: after job cancel the identical invocation starts from the beginning"
            }
            Invariant::FinalResponse => {
                "REQ-F-082: running continue_command until the exit is not 14 ends with the response the work gives with --budget 0"
            }
            Invariant::Progress => {
                "REQ-F-082 / REQ-C-034: progress.done never decreases for one job, across continuations and resumes"
            }
            Invariant::Envelope => {
                "REQ-F-004 / REQ-F-001: stdout carries one envelope whose meta.exit_code is the process's exit, a standard or declared code"
            }
            Invariant::WithinBudget => {
                "REQ-F-080: a call never holds its caller past its budget (here: budget + start-up + slack, a resume command's next checkpoint)"
            }
            Invariant::OneJob => {
                "REQ-F-081: repeating an invocation whose job is running attaches to that job and never starts a second one"
            }
            Invariant::NoProcessLeft => {
                "REQ-F-081: a job ends (done, cancelled, lost) and leaves no worker running"
            }
            Invariant::NextInvocation => {
                "REQ-F-081 / REQ-C-035: nothing an interruption or a cancel leaves behind stops a later job, a continuation or the next identical invocation"
            }
            Invariant::Other => "a check of the trial's scenario steps",
        }
    }

    /// Whether a machine's load alone can make it fail (a bound on time): such a violation
    /// counts only once it is seen again with the trial alone on the machine.
    pub fn load_sensitive(self) -> bool {
        matches!(self, Invariant::WithinBudget | Invariant::NoProcessLeft)
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One broken invariant, with the evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// Which.
    pub invariant: Invariant,
    /// The step where it showed.
    pub step: Option<String>,
    /// What was wrong.
    pub message: String,
    /// What the spec wants, when it can be shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// What the tool did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actual: Option<String>,
    /// Whether it came from a bound on time (see [`Invariant::load_sensitive`]).
    pub load_sensitive: bool,
}

/// What a trial came to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "verdict")]
pub enum TrialVerdict {
    /// Every invariant held.
    Held,
    /// Some did not.
    Violated {
        /// What broke, first first.
        violations: Vec<Violation>,
    },
    /// The schedule could not be carried out as drawn (the job had ended before its worker
    /// kill or its cancel): no verdict either way.
    Inconclusive {
        /// Why.
        why: String,
    },
    /// conform itself failed.
    Error {
        /// How.
        message: String,
    },
}

/// The step a record belongs to: its name up to `#` (copies and hops are `step#n`).
pub fn step_of(record: &StepRecord) -> &str {
    record.name.split('#').next().unwrap_or(&record.name)
}

fn exit_of(record: &StepRecord) -> Option<i32> {
    match record.ended {
        Ended::Exited { code } => Some(code),
        _ => None,
    }
}

/// Names the invariant a finding of the trial's steps breaks, or says it only shows that the
/// schedule could not be carried out (`Err`). `records` are the trial's, `calibrated_exit`
/// the uninterrupted run's exit.
pub fn classify(
    finding: &Finding,
    records: &[StepRecord],
    calibrated_exit: i32,
) -> Result<Invariant, String> {
    let step = finding.step.as_deref().unwrap_or("");
    // A continue loop's hops are `finish-loop#1`, `#2`, ...: the loop is the step.
    let step_name = step.split('#').next().unwrap_or(step);
    let last_exit =
        |name: &str| records.iter().rev().find(|r| step_of(r) == name).and_then(exit_of);
    Ok(match finding.check {
        FindingKind::KillWorker => {
            return Err(format!("no worker to kill at step `{step}`: the job had ended"));
        }
        // A call that ended (its work done, or refused as it may be: stdin too slow for a
        // tiny budget) has no cancel command: nothing to cancel, no verdict.
        _ if step.starts_with("cancel-") && finding.message.contains("/data/cancel_command") => {
            return Err(format!("nothing to cancel at step `{step}`: the call had ended"));
        }
        FindingKind::Effect => Invariant::Effect,
        FindingKind::ProgressMonotonic => Invariant::Progress,
        FindingKind::Elapsed => Invariant::WithinBudget,
        FindingKind::SameValue => Invariant::OneJob,
        FindingKind::LeakedProcess | FindingKind::ProcessesAlive | FindingKind::SandboxLeft => {
            Invariant::NoProcessLeft
        }
        FindingKind::Schema
        | FindingKind::StdoutNotJson
        | FindingKind::StdoutNotUtf8
        | FindingKind::BudgetMeta
        | FindingKind::IncompleteRetryable => Invariant::Envelope,
        FindingKind::ContinueLoop => Invariant::NextInvocation,
        _ if step_name == FINISH || step_name == FINISH_LOOP => {
            let ended = last_exit(FINISH_LOOP).or_else(|| last_exit(FINISH));
            match ended {
                Some(code) if code == calibrated_exit => Invariant::FinalResponse,
                Some(_) | None => Invariant::NextInvocation,
            }
        }
        _ if step_name == EFFECT => Invariant::Effect,
        _ => Invariant::Other,
    })
}

/// `progress.done` over the trial's responses, in order, never goes back within one job
/// (`/data/job_id`). A cancel or a killed worker starts the count again: a restarted job may
/// carry the same id (ids derived from the invocation are legal) and a resumed one starts from
/// its last checkpoint, which may lie behind the last progress reported (`docs/contract.md`
/// §6). `restarts` are the steps before which that holds. The copies of one step
/// (`copy_steps`) run at once: each is compared with what came before the step, never with
/// each other (their order is not the order of their reports).
pub fn progress_within_jobs(
    records: &[StepRecord],
    restarts: &[String],
    copy_steps: &[String],
) -> Vec<Violation> {
    let mut seen: std::collections::BTreeMap<String, (u64, String)> = Default::default();
    let mut pending: std::collections::BTreeMap<String, (u64, String)> = Default::default();
    let mut out = Vec::new();
    let mut last_step = String::new();
    for r in records {
        let step = step_of(r).to_owned();
        if step != last_step {
            if copy_steps.contains(&last_step) {
                for (job, at) in std::mem::take(&mut pending) {
                    let keep = seen.get(&job).is_some_and(|(before, _)| *before >= at.0);
                    if !keep {
                        seen.insert(job, at);
                    }
                }
            }
            if restarts.contains(&step) {
                seen.clear();
            }
        }
        last_step = step.clone();
        let Some(env) = &r.envelope else { continue };
        let job = env.pointer("/data/job_id").and_then(Value::as_str);
        let done = env.pointer("/data/progress/done").and_then(Value::as_u64);
        let (Some(job), Some(done)) = (job, done) else { continue };
        if let Some((before, at)) = seen.get(job)
            && done < *before
        {
            out.push(Violation {
                invariant: Invariant::Progress,
                step: Some(r.name.clone()),
                message: format!(
                    "progress.done of job {job} went back from {before} (at {at}) to {done}"
                ),
                expected: Some(format!("at least {before}")),
                actual: Some(done.to_string()),
                load_sensitive: false,
            });
        }
        if copy_steps.contains(&step) {
            let entry = pending.entry(job.to_owned()).or_insert((done, r.name.clone()));
            if done > entry.0 {
                *entry = (done, r.name.clone());
            }
        } else {
            seen.insert(job.to_owned(), (done, r.name.clone()));
        }
    }
    out
}

/// Identical invocations started at once (`copy_steps`, the steps with several copies) that
/// handed off (exit 14) name one job: repeating an invocation whose job runs attaches to it
/// (REQ-F-081). A copy that met the job's end answers its result, legally, and is left out.
pub fn one_job(records: &[StepRecord], copy_steps: &[String]) -> Vec<Violation> {
    let mut out = Vec::new();
    for step in copy_steps {
        let mut ids: Vec<&str> = records
            .iter()
            .filter(|r| step_of(r) == step && exit_of(r) == Some(crate::step::INCOMPLETE))
            .filter_map(|r| r.envelope.as_ref()?.pointer("/data/job_id")?.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        if ids.len() > 1 {
            out.push(Violation {
                invariant: Invariant::OneJob,
                step: Some(step.clone()),
                message: format!("identical invocations at once handed off to {} jobs", ids.len()),
                expected: Some("one job id".to_owned()),
                actual: Some(ids.join(", ")),
                load_sensitive: false,
            });
        }
    }
    out
}

/// Every response of the trial: one envelope (the schema's five keys), `meta.exit_code` equal
/// to the process's exit, an exit the spec allows (0-14, 79-125 declared, 128+N), `ok` true
/// exactly with exit 0. `schema_errors` says what the JSON Schema finds wrong in an envelope
/// (the caller passes [`crate::schemas::violations`]).
pub fn envelopes(
    records: &[StepRecord],
    schema_errors: &dyn Fn(&Value, i32) -> Vec<String>,
) -> Vec<Violation> {
    let mut out = Vec::new();
    for r in records {
        let Some(code) = exit_of(r) else { continue };
        let Some(env) = &r.envelope else { continue };
        let mut wrong = Vec::new();
        if !(0..=14).contains(&code) && !(79..=125).contains(&code) && !(129..=192).contains(&code)
        {
            wrong.push(format!("exit {code} is no standard or declarable code"));
        }
        match env.pointer("/meta/exit_code").and_then(Value::as_i64) {
            Some(meta) if meta == i64::from(code) => {}
            Some(meta) => {
                wrong.push(format!("meta.exit_code {meta} but the process exited {code}"))
            }
            None => wrong.push("no meta.exit_code".to_owned()),
        }
        if env.get("ok").and_then(Value::as_bool) != Some(code == 0) {
            wrong.push(format!("ok is {} with exit {code}", env.get("ok").unwrap_or(&Value::Null)));
        }
        wrong.extend(schema_errors(env, code));
        if !wrong.is_empty() {
            out.push(Violation {
                invariant: Invariant::Envelope,
                step: Some(r.name.clone()),
                message: format!("the response of `{}` is no valid envelope for its exit", r.name),
                expected: Some(
                    "one envelope valid against the schemas, meta.exit_code = exit".into(),
                ),
                actual: Some(wrong.join("; ")),
                load_sensitive: false,
            });
        }
    }
    out
}

/// The verdict of a trial from its findings (the steps' and the sweep's), its records, and
/// the restart points of its schedule; `harness_error` is conform's own failure.
pub fn judge(
    findings: &[Finding],
    records: &[StepRecord],
    restarts: &[String],
    copy_steps: &[String],
    calibrated_exit: i32,
    harness_error: Option<&str>,
    schema_errors: &dyn Fn(&Value, i32) -> Vec<String>,
) -> TrialVerdict {
    let mut violations = Vec::new();
    let mut inconclusive = None;
    for f in findings {
        match classify(f, records, calibrated_exit) {
            Ok(invariant) => violations.push(Violation {
                invariant,
                step: f.step.clone(),
                message: f.message.clone(),
                expected: f.expected.clone(),
                actual: f.actual.clone(),
                // A continue loop that ran out of its bound is a bound on time too.
                load_sensitive: invariant.load_sensitive()
                    || matches!(f.check, FindingKind::ContinueLoop | FindingKind::Elapsed),
            }),
            Err(why) => inconclusive = Some(why),
        }
    }
    violations.extend(progress_within_jobs(records, restarts, copy_steps));
    if !violations.iter().any(|v| v.invariant == Invariant::OneJob) {
        violations.extend(one_job(records, copy_steps));
    }
    violations.extend(envelopes(records, schema_errors));
    if !violations.is_empty() {
        return TrialVerdict::Violated { violations };
    }
    if let Some(message) = harness_error {
        return TrialVerdict::Error { message: message.to_owned() };
    }
    match inconclusive {
        Some(why) => TrialVerdict::Inconclusive { why },
        None => TrialVerdict::Held,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{Excerpt, Repro, ReproCommand, ReproStdin};
    use serde_json::json;

    fn record(name: &str, code: i32, envelope: Value) -> StepRecord {
        StepRecord {
            name: name.to_owned(),
            repro: Repro {
                env: Default::default(),
                command: ReproCommand::Argv(vec![]),
                stdin: ReproStdin::Closed,
                cwd: None,
            },
            ended: Ended::Exited { code },
            elapsed_ms: 10,
            pipes_closed_after_ms: Some(10),
            stdout: Excerpt::default(),
            stderr: Excerpt::default(),
            envelope: Some(envelope),
            started_ms: None,
            budget_ms: None,
            may_hold_ms: None,
            signal: None,
        }
    }

    fn incomplete(job: &str, done: u64) -> Value {
        json!({"ok": false, "data": {"job_id": job, "progress": {"done": done}}, "error": {"code": "INCOMPLETE"}, "warnings": [], "meta": {"exit_code": 14}})
    }

    fn none(_: &Value, _: i32) -> Vec<String> {
        Vec::new()
    }

    #[test]
    fn progress_may_not_go_back_within_a_job() {
        let records = vec![
            record("call-1", 14, incomplete("a", 5)),
            record("wait-2", 14, incomplete("a", 3)),
        ];
        let found = progress_within_jobs(&records, &[], &[]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].invariant, Invariant::Progress);
        assert_eq!(found[0].actual.as_deref(), Some("3"));
    }

    #[test]
    fn a_cancel_or_a_killed_worker_starts_the_count_again() {
        let records = vec![
            record("call-1", 14, incomplete("a", 5)),
            record("cancel-2", 0, json!({"ok": true})),
            record("finish", 14, incomplete("a", 1)),
        ];
        assert!(progress_within_jobs(&records, &["finish".to_owned()], &[]).is_empty());
        // Another job's progress is its own.
        let records = vec![
            record("call-1", 14, incomplete("a", 5)),
            record("finish", 14, incomplete("b", 1)),
        ];
        assert!(progress_within_jobs(&records, &[], &[]).is_empty());
    }

    #[test]
    fn copies_at_once_are_not_ordered_among_themselves() {
        let steps = ["call-1".to_owned()];
        let records = vec![
            record("call-1#1", 14, incomplete("a", 5)),
            record("call-1#2", 14, incomplete("a", 3)),
            record("finish", 14, incomplete("a", 4)),
        ];
        let found = progress_within_jobs(&records, &[], &steps);
        // Not the copies against each other; the run after them against the most they said.
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].step.as_deref(), Some("finish"));
    }

    #[test]
    fn copies_that_handed_off_name_one_job() {
        let steps = ["call-2".to_owned()];
        let ended = record("call-2#2", 0, json!({"ok": true}));
        let records = vec![record("call-2#1", 14, incomplete("a", 1)), ended.clone()];
        assert!(one_job(&records, &steps).is_empty());
        let records = vec![
            record("call-2#1", 14, incomplete("a", 1)),
            record("call-2#2", 14, incomplete("b", 1)),
        ];
        let found = one_job(&records, &steps);
        assert_eq!(found[0].invariant, Invariant::OneJob);
        assert_eq!(found[0].actual.as_deref(), Some("a, b"));
    }

    #[test]
    fn an_envelope_must_say_its_exit() {
        let good = record("call-1", 14, incomplete("a", 1));
        assert!(envelopes(&[good], &none).is_empty());
        let mut lying = incomplete("a", 1);
        lying["meta"]["exit_code"] = json!(0);
        let found = envelopes(&[record("call-1", 14, lying)], &none);
        assert_eq!(found[0].invariant, Invariant::Envelope);
        assert!(found[0].actual.as_deref().unwrap().contains("meta.exit_code 0"));
        let odd = envelopes(
            &[record("call-1", 42, json!({"ok": false, "meta": {"exit_code": 42}}))],
            &none,
        );
        assert!(odd[0].actual.as_deref().unwrap().contains("exit 42"));
    }

    #[test]
    fn findings_name_their_invariant() {
        let at = |kind, step: &str| Finding::new(kind, "x").at_step(step.to_owned());
        let finished = vec![record("finish-loop#1", 0, json!({}))];
        let c = |f: &Finding| classify(f, &finished, 0);
        assert_eq!(c(&at(FindingKind::Effect, EFFECT)), Ok(Invariant::Effect));
        assert_eq!(
            c(&at(FindingKind::CalibratedEquality, FINISH_LOOP)),
            Ok(Invariant::FinalResponse)
        );
        // A hop of the loop is the loop.
        assert_eq!(
            c(&at(FindingKind::CalibratedEquality, &format!("{FINISH_LOOP}#1"))),
            Ok(Invariant::FinalResponse)
        );
        assert_eq!(c(&at(FindingKind::SameValue, "call-1")), Ok(Invariant::OneJob));
        assert_eq!(c(&at(FindingKind::Elapsed, "call-1")), Ok(Invariant::WithinBudget));
        assert!(c(&at(FindingKind::KillWorker, "kill-2")).is_err());
        let no_cancel = Finding::new(FindingKind::JsonPointer, "no `/data/cancel_command`")
            .at_step("cancel-2".to_owned());
        assert!(c(&no_cancel).is_err());
        // The identical invocation that fails is the next-invocation invariant's.
        let failed = vec![record("finish-loop#1", 6, json!({}))];
        assert_eq!(
            classify(&at(FindingKind::CalibratedEquality, FINISH_LOOP), &failed, 0),
            Ok(Invariant::NextInvocation)
        );
    }

    #[test]
    fn a_trial_without_findings_held_and_one_without_its_worker_is_no_verdict() {
        assert_eq!(judge(&[], &[], &[], &[], 0, None, &none), TrialVerdict::Held);
        let f = Finding::new(FindingKind::KillWorker, "none").at_step("kill-2".to_owned());
        assert!(matches!(
            judge(&[f], &[], &[], &[], 0, None, &none),
            TrialVerdict::Inconclusive { .. }
        ));
    }
}
