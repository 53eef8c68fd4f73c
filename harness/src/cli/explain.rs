//! `conform explain ID [TOOL] [--profile P]`: one scenario as conform will run it.
//!
//! Per step: what it runs (the argv, its environment), each variable's formula and, given a
//! tool, its value as `run` computes it (the manifest discovered, the primary role calibrated
//! with `--budget 0`), and the checks that judge the step, each with what holds when it passes
//! and the requirements it cites ([`crate::checks::Check`]). Values only a run knows (a value
//! of an earlier step's response, the sandbox's paths) are named as such.
//!
//! The walk from a criterion to the code: the scenario file (`scenarios/<REQ>/<id>.toml`),
//! this command, the check's family module in `harness/src/checks/`, the step stage
//! (`harness/src/step/invoke.rs` for a run step), and the reference tool's rule.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::calibrate::{self, Calibration, SLACK};
use crate::checks::{self, Check};
use crate::discover::Subject;
use crate::scenario::{
    CONSTANT_SLACK, Expect, IDLE_TIMEOUT, MAX_LIFETIME, STARTUP, Scenario, Step, UNCALIBRATED_VARS,
    Var, builtin_formula, eval_duration, template_vars, walk_template,
};

/// What `explain` knows of the tool, when it was given one.
pub struct Measured<'a> {
    /// The tool, its profile and its manifest, discovered as `run` does.
    pub subject: &'a Subject,
    /// The primary role's calibration, or why there is none.
    pub calibration: Option<Result<Calibration, String>>,
}

/// One variable the scenario uses.
#[derive(Debug, Serialize)]
pub struct Variable {
    /// `{budget}`.
    pub name: String,
    /// What it is worth, in words.
    pub formula: String,
    /// Its value for the tool (durations in milliseconds, `850 ms`), when known.
    pub value: Option<String>,
    /// Why there is no value yet, when there is none.
    pub known: Option<String>,
}

/// One check judging a step.
#[derive(Debug, Serialize)]
pub struct CheckLine {
    /// The `expect` key; `None` for the timeout every step is judged on.
    pub key: Option<&'static str>,
    /// The key's value in the scenario.
    pub value: Value,
    /// Its templates and duration expressions with the tool's values, when known.
    pub resolved: Vec<(String, String)>,
    /// What holds when it passes.
    pub holds: &'static str,
    /// The requirements it cites (the scenario's own first).
    pub cites: Vec<String>,
    /// The kinds of its findings.
    pub findings: Vec<&'static str>,
    /// The source file that defines it (its judge, validation and documentation).
    pub defined_in: &'static str,
}

/// One step.
#[derive(Debug, Serialize)]
pub struct StepLine {
    /// Its name.
    pub name: String,
    /// Its action.
    pub action: &'static str,
    /// What it runs or does, in words (for a run step: the argv, quoted for a shell).
    pub runs: String,
    /// The source file of the step stage that carries it out.
    pub code: &'static str,
    /// The argv of a run step, as conform builds it (unknown words in `{...}`).
    pub argv: Option<Vec<String>>,
    /// The environment it adds or removes (`NAME=value`, `-NAME`).
    pub env: Vec<String>,
    /// What must hold for the criterion to apply to the tool's choice.
    pub applies_when: Vec<CheckLine>,
    /// What must hold for the criterion to be judged at all.
    pub premise: Vec<CheckLine>,
    /// The checks that judge it.
    pub checks: Vec<CheckLine>,
}

/// The whole explanation.
#[derive(Debug, Serialize)]
pub struct Explanation<'a> {
    /// The scenario, as parsed.
    pub scenario: &'a Scenario,
    /// Its file, relative to the repository.
    pub file: String,
    /// The tool, when one was given.
    pub tool: Option<String>,
    /// The variables its steps use.
    pub variables: Vec<Variable>,
    /// Its steps, in order.
    pub steps: Vec<StepLine>,
    /// The scenario file's text.
    pub source: &'a str,
}

/// Explains `scenario` (its file `rel` under `scenarios/`, with text `source`), with the
/// tool's values when `measured` is given.
pub fn explain<'a>(
    scenario: &'a Scenario,
    rel: &str,
    source: &'a str,
    measured: Option<&Measured<'_>>,
) -> Explanation<'a> {
    let values = Values { scenario, measured };
    let steps = scenario.steps.iter().map(|step| values.step(step)).collect();
    Explanation {
        scenario,
        file: format!("scenarios/{rel}"),
        tool: measured.map(|m| m.subject.tool.argv().join(" ")),
        variables: values.variables(),
        steps,
        source,
    }
}

struct Values<'a> {
    scenario: &'a Scenario,
    measured: Option<&'a Measured<'a>>,
}

impl Values<'_> {
    fn calibration(&self) -> Option<&Calibration> {
        self.measured.and_then(|m| m.calibration.as_ref()).and_then(|c| c.as_ref().ok())
    }

    /// A duration variable's value, or why it has none yet.
    fn duration(&self, name: &str) -> Result<Duration, String> {
        if name == CONSTANT_SLACK {
            return Ok(SLACK);
        }
        let Some(measured) = self.measured else {
            return Err(
                "needs a tool: `conform explain ID TOOL --profile P` measures it as `run` does"
                    .into(),
            );
        };
        match name {
            STARTUP => Ok(measured.subject.startup),
            IDLE_TIMEOUT | MAX_LIFETIME => {
                Err("read from the manifest with the role's environment when the scenario runs"
                    .into())
            }
            _ => match &measured.calibration {
                Some(Ok(c)) => c.var(name).ok_or_else(|| format!("no variable `{{{name}}}`")),
                Some(Err(why)) => Err(format!("the calibration failed: {why}")),
                None => Err("the scenario names no role to calibrate".into()),
            },
        }
    }

    fn variables(&self) -> Vec<Variable> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for step in &self.scenario.steps {
            for template in step.templates() {
                for var in template_vars(template) {
                    let (name, formula) = match &var {
                        Var::Calibration(n) => {
                            (n.clone(), Calibration::formula(n).unwrap_or_default().to_owned())
                        }
                        Var::Builtin(n) => {
                            (n.clone(), builtin_formula(n).unwrap_or_default().to_owned())
                        }
                        Var::StepValue { .. } => continue,
                    };
                    if !seen.insert(name.clone()) {
                        continue;
                    }
                    let (value, known) = match &var {
                        Var::Calibration(n) => match self.duration(n) {
                            Ok(d) => (Some(format!("{} ms", d.as_millis())), None),
                            Err(why) => (None, Some(why)),
                        },
                        Var::Builtin(n) if n == "tool" && self.measured.is_some() => {
                            (self.measured.map(|m| m.subject.tool.path.display().to_string()), None)
                        }
                        _ => (None, Some("made when the scenario runs".to_owned())),
                    };
                    let formula = match (&var, self.calibration()) {
                        (Var::Calibration(n), Some(c))
                            if !UNCALIBRATED_VARS.contains(&n.as_str()) =>
                        {
                            format!(
                                "{formula}; D = {} ms (role `{}`)",
                                c.duration.as_millis(),
                                c.role
                            )
                        }
                        _ => formula,
                    };
                    out.push(Variable { name: format!("{{{name}}}"), formula, value, known });
                }
            }
        }
        out
    }

    /// A template with the values known substituted, the others left as written.
    fn text(&self, template: &str) -> String {
        walk_template(template, |var| {
            Some(match var {
                Var::Calibration(n) => match self.duration(n) {
                    Ok(d) => d.as_millis().to_string(),
                    Err(_) => format!("{{{n}}}"),
                },
                Var::Builtin(n) if n == "tool" => match self.measured {
                    Some(m) => m.subject.tool.path.display().to_string(),
                    None => "{tool}".into(),
                },
                Var::Builtin(n) => format!("{{{n}}}"),
                Var::StepValue { step, pointer } => format!("{{@{step}{pointer}}}"),
            })
        })
        .unwrap_or_else(|_| template.to_owned())
    }

    /// A duration expression's value, when every term is known.
    fn eval(&self, expr: &str) -> Option<Duration> {
        eval_duration(expr, |name| self.duration(name).ok()).ok()
    }

    /// A duration flag's value as the profile renders it, or the expression.
    fn flag_value(&self, expr: &str, budget: bool) -> String {
        match (self.eval(expr), self.measured) {
            (Some(d), Some(m)) => {
                let tool = &m.subject.profile.file.tool;
                if budget { tool.budget_format.render(d) } else { tool.timeout_format.render(d) }
            }
            _ => expr.to_owned(),
        }
    }

    fn step(&self, step: &Step) -> StepLine {
        let mut line = StepLine {
            name: step.name().to_owned(),
            action: step.action(),
            runs: String::new(),
            code: match step {
                Step::Run(_) => "harness/src/step/invoke.rs",
                Step::Continue(_) | Step::Cancel(_) => "harness/src/step/continuation.rs",
                Step::NoProcesses(_) | Step::ElapsedSince(_) => "harness/src/step/lifetime.rs",
                _ => "harness/src/step/mod.rs",
            },
            argv: None,
            env: Vec::new(),
            applies_when: Vec::new(),
            premise: Vec::new(),
            checks: step.expect().map(|e| self.checks(e)).unwrap_or_default(),
        };
        match step {
            Step::Run(r) => {
                let profile = self.measured.map(|m| &m.subject.profile);
                let mut argv = match self.measured {
                    Some(m) => m.subject.tool.argv(),
                    None => vec!["TOOL".to_owned()],
                };
                if let Some(role) = &r.role {
                    match profile.and_then(|p| p.role(role)) {
                        Some(found) => argv.extend(found.argv.iter().cloned()),
                        None => argv.push(format!("<role {role}'s argv>")),
                    }
                }
                if let Some(kind) = r.probe {
                    argv.push(format!("<each kit `{}` probe's argv>", kind.as_str()));
                }
                if let Some(order) = r.order {
                    argv.push(format!("<[kit.argument_order] placed {}>", order.as_str()));
                }
                argv.extend(r.args.iter().map(|a| self.text(a)));
                if let Some(instance) = &r.instance {
                    let tool = profile.map(|p| &p.file.tool);
                    match (
                        tool.and_then(|t| t.instance_flag.as_ref()),
                        tool.and_then(|t| t.instance_env.as_ref()),
                    ) {
                        (Some(flag), _) => argv.extend([flag.clone(), instance.clone()]),
                        (None, Some(var)) => line.env.push(format!("{var}={instance}")),
                        (None, None) => {
                            line.env
                                .push(format!("<instance `{instance}` as the profile selects it>"));
                        }
                    }
                }
                if let Some(b) = &r.budget {
                    argv.extend(["--budget".to_owned(), self.flag_value(b, true)]);
                }
                if let Some(t) = &r.timeout {
                    argv.extend(["--timeout".to_owned(), self.flag_value(t, false)]);
                }
                if let Some(role) = r.role.as_deref().and_then(|n| profile.and_then(|p| p.role(n)))
                {
                    line.env.extend(role.env.iter().map(|(k, v)| format!("{k}={v}")));
                }
                line.env.extend(r.env.iter().map(|(k, v)| format!("{k}={}", self.text(v))));
                line.env.extend(r.env_remove.iter().map(|k| format!("-{k}")));
                let count = r.count.filter(|&n| n > 1).map(|n| format!(" ({n} copies at once)"));
                line.runs = format!("{}{}", shell_words(&argv), count.unwrap_or_default());
                line.argv = Some(argv);
                line.applies_when =
                    r.applies_when.as_ref().map(|e| self.checks(e)).unwrap_or_default();
                line.premise = r.premise.as_ref().map(|e| self.checks(e)).unwrap_or_default();
            }
            Step::Continue(c) => {
                line.runs = format!(
                    "sh -c <data.continue_command of step `{}`'s last response>, again while it exits 14 (at most {} hops)",
                    c.from,
                    c.max_hops.unwrap_or(100)
                );
                if !c.watch.is_empty() {
                    let watch: Vec<String> = c.watch.iter().map(|a| self.text(a)).collect();
                    line.runs.push_str(&format!(
                        "; after each hop that exits 14, TOOL {} (`{}-watch#<hop>`)",
                        watch.join(" "),
                        c.name
                    ));
                }
                line.env.extend(c.env.iter().map(|(k, v)| format!("{k}={}", self.text(v))));
                line.premise = c.premise.as_ref().map(|e| self.checks(e)).unwrap_or_default();
            }
            Step::Cancel(c) => {
                line.runs =
                    format!("sh -c <data.cancel_command of step `{}`'s last response>", c.from);
            }
            Step::KillWorker(k) => {
                line.runs = format!(
                    "signal {} to the detached worker (a process of the sandbox that is no step's child)",
                    k.signal.as_deref().unwrap_or("KILL")
                );
            }
            Step::Sleep(s) => line.runs = format!("wait {}", self.shown_duration(&s.duration)),
            Step::Shell(s) => line.runs = format!("sh -c {:?}", self.text(&s.command)),
            Step::Verify(v) => {
                line.runs = match (&v.same_as, v.unlike_calibrated) {
                    (Some(other), _) => {
                        format!("the role's verify command answers as at step `{other}`")
                    }
                    (None, Some(true)) => {
                        "the role's verify command answers otherwise than after the calibration"
                            .into()
                    }
                    _ => "the role's verify command answers as after the calibration".into(),
                };
                if let Some(step) = &v.when_ended {
                    line.runs.push_str(&if self.scenario.runs_copies(step) {
                        format!(", never judged: step `{step}` runs copies at once, and one may start afresh after another ended the work")
                    } else {
                        format!(", judged only when step `{step}` ended the work")
                    });
                }
                if !v.unless_ended.is_empty() {
                    line.runs.push_str(&format!(
                        ", judged only when none of {} ended the work",
                        v.unless_ended
                            .iter()
                            .map(|s| format!("`{s}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
            Step::NoProcesses(n) => {
                line.runs = format!(
                    "no process of the sandbox alive within {}",
                    self.shown_duration(&n.within)
                );
            }
            Step::ElapsedSince(e) => {
                line.runs = format!(
                    "at most {} since step `{}` began",
                    self.shown_duration(&e.at_most),
                    e.since
                );
            }
        }
        line
    }

    /// A duration expression, with its value when known (`{budget} + {slack} = 2350 ms`).
    fn shown_duration(&self, expr: &str) -> String {
        match self.eval(expr) {
            Some(d) if template_vars(expr).is_empty() => format!("{} ms", d.as_millis()),
            Some(d) => format!("{expr} = {} ms", d.as_millis()),
            None => expr.to_owned(),
        }
    }

    fn checks(&self, expect: &Expect) -> Vec<CheckLine> {
        let table = serde_json::to_value(expect).unwrap_or_default();
        let durations: BTreeSet<&str> = expect.durations().into_iter().collect();
        checks::active(expect)
            .map(|check: &Check| {
                let value = check.key.map_or(Value::Null, |k| without_nulls(&table[k]));
                let mut resolved = Vec::new();
                strings(&value, &mut |s| {
                    if template_vars(s).is_empty() {
                        return;
                    }
                    let shown = if durations.contains(s) {
                        match self.eval(s) {
                            Some(d) => format!("{} = {} ms", self.text(s), d.as_millis()),
                            None => self.text(s),
                        }
                    } else {
                        self.text(s)
                    };
                    if shown != s {
                        resolved.push((s.to_owned(), shown));
                    }
                });
                let mut cites = vec![self.scenario.requirement.clone()];
                cites.extend(
                    check
                        .cites
                        .iter()
                        .filter(|c| **c != self.scenario.requirement)
                        .map(|c| (*c).to_owned()),
                );
                CheckLine {
                    key: check.key,
                    value,
                    resolved,
                    holds: check.holds,
                    cites,
                    findings: check.findings.iter().map(|k| k.as_str()).collect(),
                    defined_in: check.defined_in,
                }
            })
            .collect()
    }
}

/// A value without its unset (`null`) fields, as the scenario file has it.
fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Every string inside a JSON value.
fn strings(value: &Value, f: &mut impl FnMut(&str)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(items) => items.iter().for_each(|v| strings(v, f)),
        Value::Object(map) => map.values().for_each(|v| strings(v, f)),
        _ => {}
    }
}

/// Words as a shell would read them back (quoted where needed).
fn shell_words(words: &[String]) -> String {
    // A placeholder (`<role detach's argv>`) is shown as it is.
    let quote = |w: &String| {
        let plain = !w.is_empty()
            && w.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+{}".contains(c));
        if plain || (w.starts_with('<') && w.ends_with('>')) {
            w.clone()
        } else {
            format!("'{}'", w.replace('\'', r"'\''"))
        }
    };
    words.iter().map(quote).collect::<Vec<_>>().join(" ")
}

/// The explanation for people.
pub fn human(e: &Explanation<'_>) -> String {
    let s = e.scenario;
    let mut out = format!("{} ({}, {})\n  {}\n", s.id, s.requirement, s.level, s.criterion);
    out.push_str(&format!("  file: {}\n", e.file));
    if !s.roles.is_empty() {
        out.push_str(&format!("  roles: {}\n", s.roles.join(", ")));
    }
    if !s.tags.is_empty() {
        out.push_str(&format!("  tags: {}\n", s.tags.join(", ")));
    }
    if let Some(tool) = &e.tool {
        out.push_str(&format!("  tool: {tool}\n"));
    }
    if let Some(notes) = &s.notes {
        out.push_str(&format!("  notes: {}\n", notes.trim()));
    }
    if !e.variables.is_empty() {
        out.push_str("\nvariables\n");
        for v in &e.variables {
            let value = match (&v.value, &v.known) {
                (Some(value), _) => format!(" = {value}"),
                (None, Some(why)) => format!(" ({why})"),
                (None, None) => String::new(),
            };
            out.push_str(&format!("  {}{value}\n      {}\n", v.name, v.formula));
        }
    }
    for (i, step) in e.steps.iter().enumerate() {
        out.push_str(&format!("\nstep {}: {} ({})\n", i + 1, step.name, step.action));
        out.push_str(&format!("  runs: {}\n", step.runs));
        out.push_str(&format!("  code: {}\n", step.code));
        if !step.env.is_empty() {
            out.push_str(&format!("  env: {}\n", step.env.join(" ")));
        }
        for (title, lines) in [
            ("applies when", &step.applies_when),
            ("premise", &step.premise),
            ("checks", &step.checks),
        ] {
            if lines.is_empty() {
                continue;
            }
            out.push_str(&format!("  {title}:\n"));
            for c in lines.iter() {
                let head = match c.key {
                    Some(key) => format!("{key} = {}", compact(&c.value)),
                    None => "(timeout, every step)".to_owned(),
                };
                out.push_str(&format!("    {head}\n"));
                for (template, shown) in &c.resolved {
                    out.push_str(&format!("        {template:?} -> {shown}\n"));
                }
                out.push_str(&format!("        holds when {}\n", c.holds));
                out.push_str(&format!(
                    "        cites {}; findings {}; defined in {}\n",
                    c.cites.join(", "),
                    c.findings.join(", "),
                    c.defined_in
                ));
            }
        }
    }
    out.push_str(&format!("\nsource ({})\n\n{}", e.file, e.source));
    out
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// Measures what `explain` shows of a tool: its manifest discovered and the primary role
/// calibrated, as `run` does (nothing is calibrated when the scenario needs no calibration).
pub fn calibrate_for(
    subject: &Subject,
    scenario: &Scenario,
) -> Option<Result<Calibration, String>> {
    let role = scenario.primary_role()?;
    if !scenario.needs_calibration() && !scenario.needs_interruptible() {
        return None;
    }
    if subject.profile.role(role).is_none() {
        return Some(Err(format!("the profile has no role `{role}`")));
    }
    Some(calibrate::measure(subject, role, false))
}
