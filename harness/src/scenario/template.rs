//! The template and duration language of scenario strings: `{budget}`, `{@step/pointer}`,
//! `{{` / `}}`, and duration expressions (`2 * {budget} + {slack}`). The manual's
//! "Templates and durations" (`harness/docs/templates.md`) says what each variable is worth.

use std::time::Duration;

/// The calibration variables (see the manual for how each is derived).
pub const CALIBRATION_VARS: [&str; 10] = [
    "calibrated",
    "budget",
    "half_budget",
    "double_budget",
    "long_budget",
    "cadence",
    "slack",
    "startup",
    "idle_timeout",
    "max_lifetime",
];

/// The duration variable that needs no calibration: the margin on timing checks.
pub const CONSTANT_SLACK: &str = "slack";

/// The duration variable measured once per run, not per role: how long the tool's manifest
/// command took (its start-up and a quick answer), the base of "at once" for this tool.
pub const STARTUP: &str = "startup";

/// The duration variable read from the manifest, not calibrated: the idle timeout the
/// primary role's command declares when the manifest runs with the role's environment
/// (REQ-F-081's default of 300000 ms when it declares none).
pub const IDLE_TIMEOUT: &str = "idle_timeout";

/// The duration variable read from the manifest, not calibrated: the lifetime the primary
/// role's command declares when the manifest runs with the role's environment
/// (`interruption.max_lifetime_ms`, REQ-F-081's default of 3600000 ms when it declares none),
/// the bound on the whole work without `--timeout`.
pub const MAX_LIFETIME: &str = "max_lifetime";

/// The calibration-list variables that need no calibration run: each is a constant, measured
/// once per run, or read from the manifest.
pub const UNCALIBRATED_VARS: [&str; 4] = [CONSTANT_SLACK, STARTUP, IDLE_TIMEOUT, MAX_LIFETIME];

/// The variables that only make sense for work long enough to interrupt.
pub const INTERRUPTION_VARS: [&str; 3] = ["budget", "half_budget", "double_budget"];

/// A reference inside `{...}` in a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Var {
    /// `{budget}` and friends.
    Calibration(String),
    /// `{@step/json/pointer}`: a value of an earlier step's last response.
    StepValue {
        /// The step.
        step: String,
        /// The pointer (starting with `/`, or empty for the whole document).
        pointer: String,
    },
    /// `{sandbox}`: the scenario's sandbox root; `{work}`: its working directory; `{tool}`.
    Builtin(String),
}

/// Builtin template variables. `{input}` is the primary role's input file: the first word of
/// its argv that names a regular file in the sandbox's working directory (a scenario using it
/// is skipped when there is none).
pub const BUILTIN_VARS: [&str; 4] = ["sandbox", "work", "tool", "input"];

/// What a builtin variable is worth, in words (`conform explain` prints it).
pub fn builtin_formula(name: &str) -> Option<&'static str> {
    Some(match name {
        "sandbox" => "the scenario's sandbox root (a fresh temporary directory)",
        "work" => "the sandbox's working directory, where the tool runs",
        "tool" => "the tool's path",
        "input" => {
            "the primary role's input file: the first word of its argv naming a regular file in the working directory"
        }
        _ => return None,
    })
}

/// Every `{...}` reference of a template. `{{` and `}}` stand for literal braces.
pub fn template_vars(template: &str) -> Vec<Var> {
    let mut vars = Vec::new();
    let _ = walk_template(template, |v| {
        vars.push(v.clone());
        Some(String::new())
    });
    vars
}

/// Replaces every `{...}` of `template` through `lookup`; `None` from lookup is an error
/// naming the reference.
pub fn walk_template(
    template: &str,
    mut lookup: impl FnMut(&Var) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(pos) = rest.find(['{', '}']) {
        out.push_str(&rest[..pos]);
        let c = &rest[pos..];
        if let Some(after) = c.strip_prefix("{{") {
            out.push('{');
            rest = after;
        } else if let Some(after) = c.strip_prefix("}}") {
            out.push('}');
            rest = after;
        } else if c.starts_with('}') {
            return Err(format!("unmatched `}}` in {template:?}"));
        } else {
            let Some(end) = c.find('}') else {
                return Err(format!("unclosed `{{` in {template:?}"));
            };
            let name = &c[1..end];
            let var = parse_var(name)?;
            match lookup(&var) {
                Some(v) => out.push_str(&v),
                None => return Err(format!("no value for `{{{name}}}`")),
            }
            rest = &c[end + 1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn parse_var(name: &str) -> Result<Var, String> {
    if let Some(step_ref) = name.strip_prefix('@') {
        let (step, pointer) = match step_ref.find('/') {
            Some(i) => (&step_ref[..i], &step_ref[i..]),
            None => (step_ref, ""),
        };
        if step.is_empty() {
            return Err(format!("`{{{name}}}` names no step"));
        }
        return Ok(Var::StepValue { step: step.to_owned(), pointer: pointer.to_owned() });
    }
    if CALIBRATION_VARS.contains(&name) {
        return Ok(Var::Calibration(name.to_owned()));
    }
    if BUILTIN_VARS.contains(&name) {
        return Ok(Var::Builtin(name.to_owned()));
    }
    Err(format!(
        "unknown variable `{{{name}}}` (known: {}, {}, and {{@step/pointer}})",
        CALIBRATION_VARS.map(|v| format!("{{{v}}}")).join(", "),
        BUILTIN_VARS.map(|v| format!("{{{v}}}")).join(", ")
    ))
}

/// A duration expression: terms joined by `+`; a term is a duration literal (`2s`, `1500ms`,
/// `1m`, bare milliseconds) or a variable `{name}`, optionally preceded by `N *`.
pub fn eval_duration(
    expr: &str,
    mut var: impl FnMut(&str) -> Option<Duration>,
) -> Result<Duration, String> {
    let mut total = Duration::ZERO;
    for term in expr.split('+') {
        let term = term.trim();
        let (factor, atom) = match term.split_once('*') {
            Some((n, a)) => {
                let n: u32 = n.trim().parse().map_err(|_| {
                    format!("`{}` in {expr:?} is not a whole-number factor", n.trim())
                })?;
                (n, a.trim())
            }
            None => (1, term),
        };
        let value = if let Some(name) = atom.strip_prefix('{').and_then(|a| a.strip_suffix('}')) {
            var(name).ok_or_else(|| format!("no value for `{{{name}}}` in {expr:?}"))?
        } else {
            parse_duration_literal(atom).ok_or_else(|| {
                format!("`{atom}` in {expr:?} is not a duration (e.g. 2s, 1500ms, 1m, {{budget}})")
            })?
        };
        total += value * factor;
    }
    Ok(total)
}

/// `5s`, `2000ms`, `1m`, or bare milliseconds.
pub fn parse_duration_literal(text: &str) -> Option<Duration> {
    let text = text.trim();
    let (digits, unit_ms) = if let Some(n) = text.strip_suffix("ms") {
        (n, 1)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1000)
    } else if let Some(n) = text.strip_suffix('m') {
        (n, 60_000)
    } else {
        (text, 1)
    };
    // Seconds may carry a decimal fraction (`0.75s`), as `[tool] budget_format = "seconds"`
    // writes them.
    if unit_ms == 1000
        && let Some((whole, fraction)) = digits.split_once('.')
        && !whole.is_empty()
        && (1..=3).contains(&fraction.len())
        && whole.bytes().chain(fraction.bytes()).all(|b| b.is_ascii_digit())
    {
        let ms = format!("{fraction:0<3}").parse::<u64>().ok()?;
        return Some(Duration::from_millis(whole.parse::<u64>().ok()?.checked_mul(1000)? + ms));
    }
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(Duration::from_millis(n.checked_mul(unit_ms)?))
}
