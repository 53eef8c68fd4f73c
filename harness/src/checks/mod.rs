//! Stage: checks. Judges what a step did against its `expect` table.
//!
//! Every check is a pure function of an [`Observation`] and a [`Context`] of plain data that
//! the step stage resolved before judging ([`Resolved`]: templates interpolated, durations
//! evaluated, command lines split into words by `sh`), so no check runs a process or reads the
//! runner's state. [`CHECKS`] is the one table from `expect` keys to check functions; its
//! order is the order of the findings. A check produces [`Finding`]s (data, never panics); one
//! whose subject is missing (no JSON on stdout, a pointer that is not there) says so as a
//! finding. The vocabulary is listed in the manual (crate docs, "Checks").
//!
//! Each check is one [`Check`] constant in its family module (`exit.rs`, `json.rs`,
//! `compare.rs`, `output.rs`, ...), beside its judge: its key, its value's schema, what holds,
//! what it cites, its validation. `conform explain ID` names the file of each check judging a
//! step; the step stage that runs the step and resolves its values is [`crate::step`] (a run
//! step's invocation: `harness/src/step/invoke.rs`).

mod compare;
mod exit;
mod generated;
mod json;
mod manifest;
mod output;
mod progress;
mod shape;
mod stream;
#[cfg(test)]
mod tests;

pub use generated::{expect_schema, manual_table};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

pub use compare::{Naming, core, locate_program, same_response};
pub use manifest::check_rule;
pub use output::PIPE_RELEASE_GRACE;
pub use progress::progress_findings;
pub use shape::{DeclaredEntry, declared_entries};

use crate::observe::{Observation, StdoutProblem};
use crate::outcome::{Finding, FindingKind, ReproCommand};
use crate::scenario::{Expect, Scenario, Step};

/// Everything a check may look at besides the observation, resolved by the step stage first.
#[derive(Debug)]
pub struct Context<'a> {
    /// Every template of the step's `expect` (pointer-check values and patterns),
    /// interpolated; by template text.
    pub texts: &'a BTreeMap<String, Result<String, String>>,
    /// Every duration expression of `expect` (`elapsed_max`, `elapsed_min`), evaluated.
    pub durations: &'a BTreeMap<String, Result<Duration, String>>,
    /// Every observation of the scenario so far, in order (this step's included).
    pub history: &'a [Observation],
    /// Index in `history` of each earlier step's last observation, by step name.
    pub last: &'a BTreeMap<String, usize>,
    /// The calibrated response of the role this step ran, with its sandbox root, or why none.
    pub calibrated: Result<(&'a Value, &'a Path), String>,
    /// The words `sh` makes of the command lines the checks asked for ([`lines_to_split`]).
    pub words: &'a BTreeMap<String, Result<Vec<String>, String>>,
    /// The file each word of those lines (and of the invocation) that may name a program names,
    /// when it names one ([`locate_program`]).
    pub programs: &'a BTreeMap<(Naming, String), Option<PathBuf>>,
    /// Whether the observation ran the manifest command (the profile's manifest arguments).
    pub manifest_command: bool,
    /// JSON pointers the role names in its `redact`: values the tool measures anew on every
    /// run, replaced before a response is compared with another.
    pub redact: &'a [String],
    /// The codes of the effective exit-code table of the command the observation invoked,
    /// when it invoked one of the manifest (for `exit_in_table`).
    pub declared_exits: Option<&'a std::collections::BTreeSet<i32>>,
}

impl Context<'_> {
    /// The interpolated template.
    pub fn text(&self, template: &str) -> Result<String, String> {
        self.texts.get(template).cloned().unwrap_or_else(|| Err(unresolved("template", template)))
    }

    /// The evaluated duration expression.
    pub fn duration(&self, expr: &str) -> Result<Duration, String> {
        self.durations
            .get(expr)
            .cloned()
            .unwrap_or_else(|| Err(unresolved("duration expression", expr)))
    }

    /// The words of a command line.
    pub fn words(&self, line: &str) -> Result<Vec<String>, String> {
        self.words.get(line).cloned().unwrap_or_else(|| Err(unresolved("command line", line)))
    }

    /// The last observation of an earlier step.
    pub fn last_of(&self, step: &str) -> Option<&Observation> {
        self.last.get(step).and_then(|&i| self.history.get(i))
    }
}

/// What a check says when the context lacks what it needs: the step stage enumerates its needs
/// with [`Expect::templates`], [`Expect::durations`] and [`lines_to_split`], so this is a bug of
/// conform, never of the tool.
fn unresolved(what: &str, text: &str) -> String {
    format!("conform did not resolve the {what} `{text}` before judging (a bug of conform)")
}

/// The command lines `continues_verbatim` compares as words: the response's
/// `data.continue_command`, after the observation's own line when it ran one through `sh`.
pub fn lines_to_split(expect: &Expect, obs: &Observation) -> Vec<String> {
    if expect.continues_verbatim != Some(true) {
        return Vec::new();
    }
    let Some(line) = obs.response().and_then(compare::continue_command) else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    if let ReproCommand::Shell(own) = &obs.record.repro.command {
        lines.push(own.clone());
    }
    lines.push(line.to_owned());
    lines
}

/// The owned maps behind a [`Context`], built by the step stage before any check runs.
#[derive(Debug, Clone, Default)]
pub struct Resolved {
    /// See [`Context::texts`].
    pub texts: BTreeMap<String, Result<String, String>>,
    /// See [`Context::durations`].
    pub durations: BTreeMap<String, Result<Duration, String>>,
    /// See [`Context::words`].
    pub words: BTreeMap<String, Result<Vec<String>, String>>,
    /// See [`Context::programs`].
    pub programs: BTreeMap<(Naming, String), Option<PathBuf>>,
    /// See [`Context::manifest_command`].
    pub manifest_command: bool,
    /// See [`Context::redact`].
    pub redact: Vec<String>,
    /// See [`Context::declared_exits`].
    pub declared_exits: Option<std::collections::BTreeSet<i32>>,
}

impl Resolved {
    /// Resolves everything the checks of `expect` need for `obs`: each template with `text`,
    /// each duration expression with `duration`, each command line with `split` (which may run
    /// `sh`; it is called only for [`lines_to_split`]), and the words of those lines and of the
    /// invocation that may name a program with `locate` (which may read the file system).
    pub fn new(
        expect: &Expect,
        obs: &Observation,
        text: impl Fn(&str) -> Result<String, String>,
        duration: impl Fn(&str) -> Result<Duration, String>,
        split: impl Fn(&str) -> Result<Vec<String>, String>,
        locate: impl Fn(&str, Naming) -> Option<PathBuf>,
    ) -> Self {
        let mut resolved = Resolved::default();
        for t in expect.templates() {
            resolved.texts.entry(t.to_owned()).or_insert_with(|| text(t));
        }
        for d in expect.durations() {
            resolved.durations.entry(d.to_owned()).or_insert_with(|| duration(d));
            // Its terms as measured values, so that a timing finding shows numbers, not names.
            resolved.texts.entry(d.to_owned()).or_insert_with(|| text(d));
        }
        for line in lines_to_split(expect, obs) {
            if let std::collections::btree_map::Entry::Vacant(entry) = resolved.words.entry(line) {
                let words = split(entry.key());
                entry.insert(words);
            }
        }
        let argv = match &obs.record.repro.command {
            ReproCommand::Argv(argv) if expect.continues_verbatim == Some(true) => argv.as_slice(),
            _ => &[],
        };
        let split_words = resolved.words.values().filter_map(|w| w.as_ref().ok());
        let candidates: Vec<(Naming, String)> = std::iter::once(argv)
            .chain(split_words.map(Vec::as_slice))
            .flat_map(compare::program_words)
            .map(|(naming, word)| (naming, word.clone()))
            .collect();
        for key in candidates {
            resolved.programs.entry(key).or_insert_with_key(|(naming, w)| locate(w, *naming));
        }
        resolved
    }

    /// The context of one observation: these maps with the scenario's state beside them.
    pub fn context<'a>(
        &'a self,
        history: &'a [Observation],
        last: &'a BTreeMap<String, usize>,
        calibrated: Result<(&'a Value, &'a Path), String>,
    ) -> Context<'a> {
        Context {
            texts: &self.texts,
            durations: &self.durations,
            history,
            last,
            calibrated,
            words: &self.words,
            programs: &self.programs,
            manifest_command: self.manifest_command,
            redact: &self.redact,
            declared_exits: self.declared_exits.as_ref(),
        }
    }
}

/// A check of one observation.
pub type ObservationCheck = fn(&Expect, &Observation, &Context<'_>) -> Vec<Finding>;
/// A check of one observation's response (stdout as one JSON document).
pub type ResponseCheck = fn(&Expect, &Observation, &Value, &Context<'_>) -> Vec<Finding>;
/// A check of every observation of a step together (copies, hops).
pub type StepCheck = fn(&Expect, &[&Observation], &StepFacts) -> Vec<Finding>;

/// What the step stage knows of a step beside its observations, for the checks that judge
/// them together.
#[derive(Debug, Clone, Default)]
pub struct StepFacts {
    /// The commands the step's responses may answer for, with their declared INCOMPLETE
    /// entries ([`declared_entries`]), for `retryable_as_declared`.
    pub incomplete_entries: Vec<DeclaredEntry>,
    /// The ranks, among the step's observations, of the responses `job wait` or `job status`
    /// gave (the job runtime relaying a job's stored ending), for `budget_recorded`.
    pub relayed: std::collections::BTreeSet<usize>,
    /// The ranks of the responses a continue step's `watch` gave (`job status` beside the
    /// hops), for `watched_progress_grows_within` and `waited_progress_grows_within`.
    pub watched: std::collections::BTreeSet<usize>,
    /// The step's duration expressions, evaluated (the bounds of those two checks).
    pub durations: BTreeMap<String, Result<Duration, String>>,
}

/// What a check looks at, and its function.
#[derive(Clone, Copy)]
pub enum Judge {
    /// Each observation ([`check_one`]).
    Observation(ObservationCheck),
    /// Each observation's response ([`check_one`]); it does not run when stdout holds none.
    Response(ResponseCheck),
    /// All observations of the step at once ([`check_all`]).
    Step(StepCheck),
}

/// One check: everything about one `expect` key, in one place (as ripgrep's flags own their
/// docs and parsing). Each family module (`exit`, `json`, `compare`, ...) defines its checks
/// as constants beside their judge functions; [`CHECKS`] lists them. The manual's table of
/// checks (`harness/docs/checks.md`) and the `expect` part of `schemas/scenario.json` are
/// generated from this list ([`manual_table`], [`expect_schema`]) and a test fails on any
/// drift (`SNAPSHOTS=overwrite` rewrites them).
#[derive(Clone, Copy)]
pub struct Check {
    /// The source file that defines it (`harness/src/checks/json.rs`), for `conform explain`.
    pub defined_in: &'static str,
    /// The `expect` key that turns it on; `None` for a check every step gets (the timeout).
    pub key: Option<&'static str>,
    /// Whether `expect` turns it on.
    pub active: fn(&Expect) -> bool,
    /// Whether it needs stdout to hold one JSON document: when an active check does and stdout
    /// holds none, that is one finding for the observation, where the response checks start.
    pub needs_response: bool,
    /// What it looks at, and its function.
    pub judge: Judge,
    /// What holds when it passes, in the project's words (Markdown): the manual's row, the
    /// schema's description, what `conform explain` says of it.
    pub holds: &'static str,
    /// The kinds of the findings it reports.
    pub findings: &'static [FindingKind],
    /// The requirements it cites (`REQ-F-080`), beyond the scenario's own.
    pub cites: &'static [&'static str],
    /// The JSON Schema of its value in a scenario file (without its description).
    pub value: fn() -> Value,
    /// Its part of a scenario's validation, run when it is active: what the key needs of the
    /// scenario and of the earlier steps.
    pub validate: fn(&Expect, &Site<'_>) -> Result<(), String>,
}

/// Where an `expect` table sits, for its checks' part of a scenario's validation.
#[derive(Debug, Clone, Copy)]
pub struct Site<'a> {
    /// The scenario.
    pub scenario: &'a Scenario,
    /// The step whose `expect` it is.
    pub step: &'a Step,
    /// The steps before it, by name.
    pub earlier: &'a BTreeMap<&'a str, &'a Step>,
}

impl<'a> Site<'a> {
    /// A validation error of the step.
    pub fn fail(&self, what: impl std::fmt::Display) -> String {
        format!("step `{}`: {what}", self.step.name())
    }

    /// The earlier step `other`, which `what` names; an error when there is none.
    pub fn refer(&self, other: &str, what: &str) -> Result<&'a Step, String> {
        self.earlier
            .get(other)
            .copied()
            .ok_or_else(|| self.fail(format!("{what} `{other}` is not an earlier step")))
    }
}

/// The validation of a check whose key needs nothing of the scenario.
fn no_validation(_: &Expect, _: &Site<'_>) -> Result<(), String> {
    Ok(())
}

/// Every check, in the order its findings are reported.
pub const CHECKS: &[Check] = &[
    exit::EXIT,
    exit::EXIT_NOT,
    exit::TIMEOUT,
    exit::EXIT_IN_TABLE,
    json::EXIT_MATCHES_META,
    stream::STREAM,
    compare::SAME_STDOUT_AS,
    compare::STDOUT_DIFFERS_FROM,
    compare::SAME_DATA_AS,
    compare::DATA_DIFFERS_FROM,
    json::ENVELOPE,
    json::SCHEMA,
    json::JSON,
    compare::CONTINUES_VERBATIM,
    compare::DIFFERS_FROM,
    manifest::MANIFEST_RULES,
    compare::MATCHES_CALIBRATED,
    compare::ENDS_AS_CALIBRATED,
    compare::SAME_RESPONSE_AS,
    output::ELAPSED_MAX,
    output::ELAPSED_MIN,
    output::EXIT_AFTER_SIGNAL_MAX,
    output::PIPES_RELEASED,
    output::NO_ANSI,
    progress::PROGRESS_MONOTONIC,
    output::NO_PROSE,
    json::WARNINGS,
    shape::BUDGET_RECORDED,
    shape::RETRYABLE_AS_DECLARED,
    progress::STALLS_BELOW,
    progress::WATCHED_PROGRESS_GROWS_WITHIN,
    progress::WAITED_PROGRESS_GROWS_WITHIN,
    json::SAME,
    json::SAME_AMONG_HANDOFFS,
];

/// The check of an `expect` key.
pub fn check(key: &str) -> Option<&'static Check> {
    CHECKS.iter().find(|c| c.key == Some(key))
}

/// The checks `expect` turns on, in order (the timeout, which every step gets, included).
pub fn active(expect: &Expect) -> impl Iterator<Item = &'static Check> + '_ {
    CHECKS.iter().filter(move |c| (c.active)(expect))
}

/// Validates an `expect` table where it sits: each active check's part, in order.
pub fn validate(expect: &Expect, site: &Site<'_>) -> Result<(), String> {
    active(expect).try_for_each(|c| (c.validate)(expect, site))
}

/// Whether an active check of `expect` needs stdout to hold one JSON document.
pub fn needs_response(expect: &Expect) -> bool {
    CHECKS.iter().any(|c| c.needs_response && (c.active)(expect))
}

/// Judges one observation of a step (a copy, or the last hop of a loop) against `expect`.
pub fn check_one(expect: &Expect, obs: &Observation, ctx: &Context<'_>) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut response_checks_started = false;
    for check in CHECKS {
        match check.judge {
            Judge::Observation(judge) => {
                if (check.active)(expect) {
                    findings.extend(judge(expect, obs, ctx));
                }
            }
            Judge::Response(judge) => {
                let response = match &obs.json {
                    Ok(response) => response,
                    Err(problem) => {
                        if !response_checks_started && needs_response(expect) {
                            findings.push(stdout_finding(problem, obs));
                        }
                        response_checks_started = true;
                        continue;
                    }
                };
                response_checks_started = true;
                if (check.active)(expect) {
                    findings.extend(judge(expect, obs, response, ctx));
                }
            }
            Judge::Step(_) => {}
        }
    }
    let step = &obs.record.name;
    findings
        .into_iter()
        .map(|f| if f.step.is_some() { f } else { f.at_step(step.clone()) })
        .collect()
}

/// Judges the checks that look at all observations of one step together (`warnings`, `same`,
/// `stalls_below`, `budget_recorded`, `retryable_as_declared`).
pub fn check_all(
    expect: &Expect,
    step: &str,
    observations: &[&Observation],
    facts: &StepFacts,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    for check in CHECKS {
        if let Judge::Step(judge) = check.judge
            && (check.active)(expect)
        {
            findings
                .extend(judge(expect, observations, facts).into_iter().map(|f| f.at_step(step)));
        }
    }
    findings
}

pub(super) fn stdout_finding(problem: &StdoutProblem, obs: &Observation) -> Finding {
    let excerpt = obs.record.stdout.text.chars().take(300).collect::<String>();
    match problem {
        StdoutProblem::Empty => Finding::new(FindingKind::StdoutNotJson, "stdout is empty")
            .expected("one JSON envelope on stdout")
            .actual("nothing"),
        StdoutProblem::NotUtf8(at) => Finding::new(
            FindingKind::StdoutNotUtf8,
            format!("stdout is not UTF-8 (bad byte at offset {at})"),
        )
        .expected("one JSON envelope on stdout")
        .actual(excerpt),
        StdoutProblem::NotJson(e) => Finding::new(
            FindingKind::StdoutNotJson,
            format!("stdout is not one JSON document: {e}"),
        )
        .expected("one JSON envelope on stdout")
        .actual(excerpt),
        StdoutProblem::Truncated(n) => Finding::new(
            FindingKind::StdoutNotJson,
            format!("stdout is {n} bytes, more than conform keeps; not one envelope"),
        ),
        StdoutProblem::NoStreamTerminal => Finding::new(
            FindingKind::StdoutNotJson,
            "the stream has no terminal line (a `_summary` or an error envelope) to judge",
        )
        .expected("a stream ending in a terminal line")
        .actual(excerpt),
    }
}
