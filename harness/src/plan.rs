//! Stage: plan. Which scenarios of the catalogue run, and which are skipped before running and
//! why.
//!
//! `--only` and `--skip` each take a requirement id (`REQ-F-080`), a scenario id, a tag or a
//! role name;
//! several `--only` values add up, and `--skip` removes from the result. A value that matches
//! nothing in the catalogue is an invocation error (a typo must not silently run nothing).
//! A scenario needing a role the profile does not define is skipped with that reason, as is one
//! that selects instances when the profile says not how.

use crate::outcome::SkipReason;
use crate::profile::Profile;
use crate::scenario::{Catalogue, ProbeKind, Scenario};

/// One scenario of the plan.
#[derive(Debug, Clone)]
pub struct Planned<'c> {
    /// The scenario.
    pub scenario: &'c Scenario,
    /// Why it will not run, when known before running.
    pub skip: Option<SkipReason>,
}

/// A filter value that matches no scenario.
#[derive(Debug, thiserror::Error)]
#[error("`{flag} {value}` matches no scenario id, requirement, tag or role (see `conform list`)")]
pub struct FilterError {
    /// `--only` or `--skip`.
    pub flag: &'static str,
    /// The value given.
    pub value: String,
}

/// Whether a filter value selects a scenario: its id, its requirement, one of its tags, or one
/// of the roles it needs.
pub fn selects(value: &str, s: &Scenario) -> bool {
    s.id == value
        || s.requirement == value
        || s.tags.iter().any(|t| t == value)
        || s.roles.iter().any(|r| r == value)
}

/// Filters the catalogue and decides the static skips.
pub fn plan<'c>(
    catalogue: &'c Catalogue,
    only: &[String],
    skip: &[String],
    profile: &Profile,
) -> Result<Vec<Planned<'c>>, FilterError> {
    for (flag, values) in [("--only", only), ("--skip", skip)] {
        for value in values {
            if !catalogue.scenarios.iter().any(|s| selects(value, s)) {
                return Err(FilterError { flag, value: value.clone() });
            }
        }
    }
    Ok(catalogue
        .scenarios
        .iter()
        .filter(|s| only.is_empty() || only.iter().any(|v| selects(v, s)))
        .filter(|s| !skip.iter().any(|v| selects(v, s)))
        .map(|scenario| Planned { scenario, skip: static_skip(scenario, profile) })
        .collect())
}

/// Why a scenario cannot run with this profile, if it cannot.
pub fn static_skip(s: &Scenario, profile: &Profile) -> Option<SkipReason> {
    let has_profile = profile.path.is_some();
    let missing: Vec<String> =
        s.roles.iter().filter(|r| profile.role(r).is_none()).cloned().collect();
    if !missing.is_empty() {
        return Some(SkipReason::MissingRoles { roles: missing, profile: has_profile });
    }
    let no_kit =
        |what: &str| SkipReason::MissingKit { what: what.to_owned(), profile: has_profile };
    // A step whose kind has no probes runs nothing (the kit too judges a check on the probes
    // there are); only a scenario none of whose probe steps would run anything is skipped.
    let kinds = s.probe_kinds();
    if !kinds.is_empty() && kinds.iter().all(|k| profile.probe_argvs(*k).is_empty()) {
        let named: Vec<&str> = kinds
            .iter()
            .map(|kind| match kind {
                ProbeKind::DestructivePreview => "`destructive` probes",
                ProbeKind::StreamSignal => "`stream` probes with a `signal`",
                ProbeKind::Any => "`read`, `invalid` or `destructive` probes",
                ProbeKind::Read => "`read` probes",
                ProbeKind::Invalid => "`invalid` probes",
                ProbeKind::Destructive => "`destructive` probes",
                ProbeKind::Stream => "`stream` probes",
                ProbeKind::Manifest | ProbeKind::Help => "",
            })
            .filter(|w| !w.is_empty())
            .collect();
        let mut named = named;
        named.dedup();
        return Some(no_kit(&named.join(" nor ")));
    }
    let placements = s.placements();
    if !placements.is_empty() {
        match &profile.file.kit.argument_order {
            None => return Some(no_kit("`argument_order`")),
            Some(order) if order.positional.is_none() => {
                if let Some(p) = placements.iter().find(|p| p.needs_positional()) {
                    return Some(SkipReason::NoPositional { placement: p.as_str().to_owned() });
                }
            }
            Some(_) => {}
        }
    }
    if s.tags.iter().any(|t| t == "instance") && !profile.selects_instances() {
        return Some(SkipReason::NoInstanceSelection);
    }
    None
}
