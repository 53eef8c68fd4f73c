//! What a parsed scenario must make sense of beyond its types: names, references to earlier
//! steps, keys that belong together or exclude each other. What an `expect` key needs is its
//! check's to say ([`crate::checks::Check::validate`]), so each check is defined in one place.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::checks::{self, Site};
use crate::scenario::{
    ProbeKind, ROLE_NAMES, Scenario, Step, Var, eval_duration, signal_by_name, template_vars,
    walk_template,
};

/// The most attempts a scenario may ask for: each is a whole run of it.
pub const MAX_ATTEMPTS: u32 = 50;

pub(super) fn validate(s: &Scenario) -> Result<(), String> {
    let id_ok = |v: &str| {
        !v.is_empty()
            && v.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    if !id_ok(&s.id) {
        return Err(format!("id `{}` must be lowercase letters, digits and dashes", s.id));
    }
    let req = regex::Regex::new(r"^REQ-[A-Z]-[0-9]{3}$").map_err(|e| e.to_string())?;
    if !req.is_match(&s.requirement) {
        return Err(format!("requirement `{}` is not like REQ-F-080", s.requirement));
    }
    if s.criterion.trim().is_empty() {
        return Err("criterion is empty".into());
    }
    if s.steps.is_empty() {
        return Err("a scenario needs at least one step".into());
    }
    if let Some(attempts) = s.attempts
        && !(1..=MAX_ATTEMPTS).contains(&attempts)
    {
        return Err(format!("attempts must be between 1 and {MAX_ATTEMPTS}, not {attempts}"));
    }
    let roles: BTreeSet<&str> = s.roles.iter().map(String::as_str).collect();
    for role in &roles {
        if !ROLE_NAMES.contains(role) {
            return Err(format!("unknown role `{role}` (known: {})", ROLE_NAMES.join(", ")));
        }
    }
    let mut seen: BTreeMap<&str, &Step> = BTreeMap::new();
    for step in &s.steps {
        let name = step.name();
        if !id_ok(name) {
            return Err(format!("step name `{name}` must be lowercase letters, digits and dashes"));
        }
        let refer = |other: &str, what: &str| -> Result<(), String> {
            if seen.contains_key(other) {
                Ok(())
            } else {
                Err(format!("step `{name}`: {what} `{other}` is not an earlier step"))
            }
        };
        for template in step.templates() {
            let mut bad = None;
            let _ = walk_template(template, |v| {
                if let Var::StepValue { step: other, .. } = v
                    && !seen.contains_key(other.as_str())
                {
                    bad = Some(other.clone());
                }
                Some(String::new())
            })
            .map_err(|e| format!("step `{name}`: {e}"))?;
            if let Some(other) = bad {
                refer(&other, "`{@...}` refers to")?;
            }
        }
        for expr in step.duration_exprs() {
            eval_duration(expr, |_| Some(Duration::ZERO))
                .map_err(|e| format!("step `{name}`: {e}"))?;
            for v in template_vars(expr) {
                if !matches!(v, Var::Calibration(_)) {
                    return Err(format!(
                        "step `{name}`: only calibration variables may appear in durations ({expr:?})"
                    ));
                }
            }
        }
        match step {
            Step::Run(r) => {
                if let Some(role) = &r.role
                    && !roles.contains(role.as_str())
                {
                    return Err(format!(
                        "step `{name}` uses role `{role}`, which the scenario does not list in `roles`"
                    ));
                }
                if r.role.is_none() && r.args.is_empty() && r.probe.is_none() && r.order.is_none() {
                    return Err(format!(
                        "step `{name}` names neither a role, a probe, an order nor args"
                    ));
                }
                let sources = [
                    ("role", r.role.is_some()),
                    ("probe", r.probe.is_some()),
                    ("order", r.order.is_some()),
                ];
                let named: Vec<&str> =
                    sources.iter().filter(|(_, set)| *set).map(|(k, _)| *k).collect();
                if let [first, second, ..] = named.as_slice() {
                    return Err(format!(
                        "step `{name}`: `{first}` and `{second}` exclude each other"
                    ));
                }
                if r.stdin.is_some() && r.stdin_text.is_some() {
                    return Err(format!(
                        "step `{name}`: `stdin` and `stdin_text` exclude each other"
                    ));
                }
                for (key, dir) in [("tool_dir", &r.tool_dir), ("cwd", &r.cwd)] {
                    if let Some(dir) = dir
                        && (dir.is_empty()
                            || dir.starts_with('/')
                            || dir.split('/').any(|part| part == ".." || part == "."))
                    {
                        return Err(format!(
                            "step `{name}`: `{key}` must be a relative path without . or .."
                        ));
                    }
                }
                if r.kit_hangs == Some(true)
                    && !matches!(r.probe, Some(k) if !matches!(k, ProbeKind::Stream | ProbeKind::StreamSignal))
                {
                    return Err(format!(
                        "step `{name}`: `kit_hangs` belongs to a step running non-stream kit probes"
                    ));
                }
                if r.count == Some(0) {
                    return Err(format!("step `{name}`: count must be at least 1"));
                }
                if let Some(k) = &r.kill_group {
                    signal_by_name(k.signal.as_deref().unwrap_or("TERM"))
                        .map_err(|e| format!("step `{name}`: {e}"))?;
                }
                if r.instance.is_some() && !s.tags.iter().any(|t| t == "instance") {
                    return Err(format!(
                        "step `{name}` selects an instance: tag the scenario `instance` so it is skipped without `instance_env`/`instance_flag`"
                    ));
                }
            }
            Step::Continue(c) | Step::Cancel(c) => {
                refer(&c.from, "`from`")?;
                if matches!(step, Step::Cancel(_)) && c.max_hops.is_some() {
                    return Err(format!("step `{name}`: `max_hops` belongs to continue steps"));
                }
                if !matches!(seen.get(c.from.as_str()), Some(Step::Run(_) | Step::Continue(_))) {
                    return Err(format!("step `{name}`: `from` must name a run or continue step"));
                }
            }
            Step::KillWorker(k) => {
                signal_by_name(k.signal.as_deref().unwrap_or("KILL"))
                    .map_err(|e| format!("step `{name}`: {e}"))?;
            }
            Step::Sleep(_) | Step::Shell(_) => {}
            Step::Verify(_) if s.roles.is_empty() => {
                return Err(format!("step `{name}`: a verify step needs the scenario's role"));
            }
            Step::Verify(v) => {
                if let Some(other) = &v.same_as {
                    refer(other, "`same_as`")?;
                    if !matches!(seen.get(other.as_str()), Some(Step::Verify(_))) {
                        return Err(format!("step `{name}`: `same_as` must name a verify step"));
                    }
                }
                for (key, other) in v
                    .when_ended
                    .iter()
                    .map(|o| ("`when_ended`", o))
                    .chain(v.unless_ended.iter().map(|o| ("`unless_ended`", o)))
                {
                    refer(other, key)?;
                    if !matches!(seen.get(other.as_str()), Some(Step::Run(_) | Step::Continue(_))) {
                        return Err(format!(
                            "step `{name}`: {key} must name run or continue steps"
                        ));
                    }
                }
            }
            Step::NoProcesses(_) => {}
            Step::ElapsedSince(e) => refer(&e.since, "`since`")?,
        }
        if let Some(e) = step.expect() {
            checks::validate(e, &Site { scenario: s, step, earlier: &seen })?;
        }
        if seen.insert(name, step).is_some() {
            return Err(format!("two steps are named `{name}`"));
        }
    }
    if s.uses_input() && s.primary_role().is_none() {
        return Err("the scenario uses `{input}` but names no role".into());
    }
    if s.needs_calibration() && s.primary_role().is_none() {
        return Err("the scenario uses calibration variables but names no role".into());
    }
    Ok(())
}
