//! Stage: plan. Which scenarios of the catalogue run, and which are skipped before running and
//! why.
//!
//! `--only` and `--skip` each take a requirement id (`REQ-F-080`), a scenario id, a tag or a
//! role name;
//! several `--only` values add up, and `--skip` removes from the result. A value that matches
//! nothing in the catalogue is an invocation error (a typo must not silently run nothing).
//! A scenario needing a role the profile does not define is skipped with that reason, as is one
//! that selects instances when the profile says not how.

use crate::catalogue::Catalogue;
use crate::discover::Commands;
use crate::outcome::SkipReason;
use crate::profile::Profile;
use crate::scenario::{ProbeKind, Scenario, role_declaration};

/// One scenario of the plan.
#[derive(Debug, Clone)]
pub struct Planned<'c> {
    /// The scenario.
    pub scenario: &'c Scenario,
    /// Why it will not run, when known before running.
    pub skip: Option<SkipReason>,
}

/// A role the profile left out, played by another of its roles whose command declares what
/// the missing one needs: the scenarios of the missing role then run instead of being skipped.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RoleFill {
    /// The role the profile left out.
    pub role: String,
    /// The profile's role that plays it.
    pub by: String,
    /// The command they run.
    pub command: String,
}

/// Which roles may play a missing one, in order of preference. Only a role of the same kind
/// of work qualifies: a writer that takes `--idempotency-key` (a resumable writer, a detaching
/// one) is an idempotent writer as REQ-C-007 asks, whatever else it declares. A role whose
/// work is special (a failure, stdin, a stall, no interruption) plays no other, and no reader
/// plays a writer or the other way round: the scenarios compare effects.
const STAND_INS: &[(&str, &[&str])] = &[("idempotent_writer", &["resume_writer", "detach_only"])];

/// Fills the roles the profile left out that another of its roles can play (see
/// `STAND_INS`): the stand-in's command must declare what the missing role needs
/// ([`role_declaration`]). Returns what was filled, for the coverage line.
pub fn fill_roles(profile: &mut Profile, commands: &Commands) -> Vec<RoleFill> {
    let mut filled = Vec::new();
    for (role, stand_ins) in STAND_INS {
        if profile.role(role).is_some() {
            continue;
        }
        let Some(needs) = role_declaration(role) else { continue };
        let found = stand_ins.iter().find_map(|by| {
            let stand_in = profile.role(by)?;
            let (command, info) = commands.command_for_args(&stand_in.argv)?;
            info.declares(needs).then(|| (*by, command.to_owned(), stand_in.clone()))
        });
        let Some((by, command, stand_in)) = found else { continue };
        if let Some(slot) = profile.file.roles.slot_mut(role) {
            *slot = Some(stand_in);
            filled.push(RoleFill { role: (*role).to_owned(), by: by.to_owned(), command });
        }
    }
    filled
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

/// Why a scenario cannot run, once the manifest's commands are known: first whether it applies
/// at all (some command makes each declaration it judges), then the profile's gaps
/// ([`static_skip`], a missing role naming the commands that could fill it), then whether each
/// role's command makes the declaration the role needs.
pub fn skip_with_manifest(
    s: &Scenario,
    profile: &Profile,
    commands: &Commands,
) -> Option<SkipReason> {
    for needs in s.declarations() {
        if commands.declaring(needs).is_empty() {
            let role = s.roles.iter().find(|r| role_declaration(r) == Some(needs)).cloned();
            let role = role.or_else(|| {
                let primary = s.primary_role().filter(|_| s.role_declares == Some(needs));
                primary.map(str::to_owned)
            });
            return Some(SkipReason::NotApplicable { needs, role });
        }
    }
    // Candidates to name: the vendor's commands, not the framework's built-ins.
    let owned = |paths: Vec<&str>| {
        paths
            .into_iter()
            .filter(|p| commands.by_path.get(*p).is_none_or(|info| !info.builtin))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    match static_skip(s, profile) {
        Some(SkipReason::MissingRoles { roles, profile, .. }) => {
            let candidates = roles
                .first()
                .and_then(|r| role_declaration(r))
                .map(|d| owned(commands.declaring(d)))
                .unwrap_or_default();
            return Some(SkipReason::MissingRoles { roles, profile, candidates });
        }
        Some(other) => return Some(other),
        None => {}
    }
    // Each role's own declaration, then what the scenario asks of its primary role beyond it.
    let primary = s.primary_role().zip(s.role_declares);
    let needs = s.roles.iter().filter_map(|r| Some((r.as_str(), role_declaration(r)?)));
    needs.chain(primary).find_map(|(name, needs)| {
        let role = profile.role(name)?;
        let (command, info) = commands.command_for_args(&role.argv)?;
        (!info.declares(needs)).then(|| SkipReason::RoleLacksDeclaration {
            role: name.to_owned(),
            command: command.to_owned(),
            needs,
            candidates: owned(commands.declaring(needs)),
        })
    })
}

/// Why a scenario cannot run with this profile, if it cannot.
pub fn static_skip(s: &Scenario, profile: &Profile) -> Option<SkipReason> {
    let has_profile = profile.path.is_some();
    let missing: Vec<String> =
        s.roles.iter().filter(|r| profile.role(r).is_none()).cloned().collect();
    // A lifetime to wait out needs a setting the spec does not ask of a tool: without the
    // role, the scenario is no gap of the vendor's ([`SkipReason::NoShortLifetime`]).
    if let [role] = missing.as_slice()
        && s.uses_max_lifetime()
        && s.primary_role() == Some(role.as_str())
    {
        return Some(SkipReason::NoShortLifetime {
            role: role.clone(),
            declared_ms: None,
            max_ms: u64::try_from(crate::discover::MAX_LIFETIME_WAIT.as_millis())
                .unwrap_or(u64::MAX),
        });
    }
    if !missing.is_empty() {
        return Some(SkipReason::MissingRoles {
            roles: missing,
            profile: has_profile,
            candidates: Vec::new(),
        });
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use serde_json::json;

    use super::*;
    use crate::catalogue::parse_scenario;
    use crate::scenario::Declaration;

    fn scenario(roles: &str, applies_to: &str) -> Scenario {
        let text = format!(
            "id = \"s\"\nrequirement = \"REQ-F-082\"\ncriterion = \"c\"\nlevel = \"must\"\n{roles}\n{applies_to}\n[[steps]]\naction = \"run\"\nname = \"a\"\nargs = [\"x\"]\n"
        );
        parse_scenario("REQ-F-082/s.toml", &text).expect("the scenario parses")
    }

    fn profile(text: &str) -> Profile {
        Profile::parse(Path::new("/nonexistent/conform.toml"), text).expect("the profile parses")
    }

    fn commands(manifest: serde_json::Value) -> Commands {
        Commands::from_manifest(&manifest)
    }

    #[test]
    fn a_declaration_no_command_makes_is_not_applicable_before_any_profile_gap() {
        let plain = commands(json!({"commands": {"convert": {"danger_level": "safe"}}}));
        let s = scenario("roles = [\"detach\"]", "");
        assert_eq!(
            skip_with_manifest(&s, &profile(""), &plain),
            Some(SkipReason::NotApplicable {
                needs: Declaration::Detach,
                role: Some("detach".into())
            })
        );
        let rule = scenario("", "applies_to = \"interruption\"");
        let reason = skip_with_manifest(&rule, &profile(""), &plain).expect("a skip");
        assert!(reason.is_not_applicable());
        assert_eq!(
            reason.to_string(),
            "not applicable: no command of the manifest declares `interruption`, so the rule has nothing to judge"
        );
    }

    /// A scenario about a detached job that also resumes (REQ-F-081: "with `resume: true`
    /// too") runs only on a `detach` role whose command declares both; a detach-only command
    /// rightly restarts from zero, and a tool with none such has nothing to judge.
    #[test]
    fn what_the_primary_role_must_declare_beyond_its_own_is_asked_of_its_command() {
        let s = scenario("roles = [\"detach\"]\nrole_declares = \"detach-resume\"", "");
        let only = commands(json!({"commands": {
            "archive": {"interruption": {"detach": true, "resume": false}}
        }}));
        let detach_only = profile("[roles.detach]\nargv = [\"archive\", \"f\"]\n");
        let reason = skip_with_manifest(&s, &detach_only, &only).expect("a skip");
        assert_eq!(
            reason,
            SkipReason::NotApplicable {
                needs: Declaration::DetachResume,
                role: Some("detach".into())
            }
        );
        let both = commands(json!({"commands": {
            "archive": {"interruption": {"detach": true, "resume": false}},
            "analyze": {"interruption": {"detach": true, "resume": true}}
        }}));
        let reason = skip_with_manifest(&s, &detach_only, &both).expect("a skip");
        assert!(!reason.is_not_applicable());
        assert_eq!(
            reason.to_string(),
            "the `detach` role runs `archive`, which does not declare `interruption` with `detach: true, resume: true`; point it at `analyze`"
        );
        let resumable = profile("[roles.detach]\nargv = [\"analyze\", \"f\"]\n");
        assert_eq!(skip_with_manifest(&s, &resumable, &both), None);
    }

    /// A manifest with one detaching command (`analyze`) and one plain (`convert`).
    fn one_detaching() -> Commands {
        commands(json!({"commands": {
            "analyze": {"interruption": {"detach": true, "resume": true}},
            "convert": {}
        }}))
    }

    #[test]
    fn a_missing_role_names_the_commands_that_could_fill_it() {
        let s = scenario("roles = [\"detach\"]", "");
        let reason = skip_with_manifest(&s, &profile(""), &one_detaching()).expect("a skip");
        assert_eq!(reason.missing_roles(), ["detach"]);
        assert_eq!(
            reason.to_string(),
            "profile names no `detach` role; the manifest's `analyze` could fill `detach` (`conform init` drafts it)"
        );
    }

    #[test]
    fn a_role_on_a_command_without_the_declaration_says_so() {
        let s = scenario("roles = [\"detach\"]", "");
        let on_convert = profile("[roles.detach]\nargv = [\"convert\", \"big.csv\"]\n");
        assert_eq!(
            skip_with_manifest(&s, &on_convert, &one_detaching())
                .map(|r| r.to_string()),
            Some(
                "the `detach` role runs `convert`, which does not declare `interruption` with `detach: true`; point it at `analyze`"
                    .to_owned()
            )
        );
        let on_analyze = profile("[roles.detach]\nargv = [\"analyze\", \"big.csv\"]\n");
        assert_eq!(skip_with_manifest(&s, &on_analyze, &one_detaching()), None);
    }
}
