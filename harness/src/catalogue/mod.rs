//! The catalogue: scenario files parsed ([`crate::scenario`]'s model) and validated
//! (`validate.rs`, where each `expect` key's check says what it needs), their errors located
//! (file, line, column), the whole catalogue compiled into the binary.
//!
//! It sits above [`crate::checks`] (the layers of `harness/tests/it/layers.rs`): a check owns
//! its key's validation beside its judge.

mod validate;
pub use validate::MAX_ATTEMPTS;

use std::collections::BTreeSet;

use crate::scenario::{SCENARIO_FILES, Scenario, line_col};
use validate::validate;

/// A scenario file that does not parse or does not make sense.
#[derive(Debug, thiserror::Error)]
#[error("{file}{}: {message}", location.map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default())]
pub struct ScenarioError {
    /// The file, relative to `scenarios/`.
    pub file: String,
    /// 1-based line and column, when known.
    pub location: Option<(usize, usize)>,
    /// What is wrong.
    pub message: String,
}

/// Parses one scenario file (`rel` is its path relative to `scenarios/`) and checks it.
pub fn parse_scenario(rel: &str, text: &str) -> Result<Scenario, ScenarioError> {
    let scenario: Scenario = toml::from_str(text).map_err(|e| ScenarioError {
        file: rel.to_owned(),
        // Inside a step (an internally tagged table) toml knows only where the steps begin;
        // an unknown word is found where it is written.
        location: locate_unknown_variant(text, e.message())
            .or_else(|| e.span().map(|s| line_col(text, s.start))),
        message: e.message().trim().to_owned(),
    })?;
    let fail = |message: String| ScenarioError { file: rel.to_owned(), location: None, message };
    let (dir, stem) = match rel.rsplit_once('/') {
        Some((d, f)) => (d, f.strip_suffix(".toml").unwrap_or(f)),
        None => ("", rel.strip_suffix(".toml").unwrap_or(rel)),
    };
    if scenario.id != stem {
        return Err(fail(format!("id `{}` differs from the file name `{stem}`", scenario.id)));
    }
    if scenario.requirement != dir {
        return Err(fail(format!(
            "requirement `{}` differs from the directory `{dir}`",
            scenario.requirement
        )));
    }
    validate(&scenario).map_err(|message| ScenarioError {
        file: rel.to_owned(),
        location: locate_step(text, &message),
        message,
    })?;
    Ok(scenario)
}

/// Line and column of the value an "unknown variant `x`" error names, when it is written once.
fn locate_unknown_variant(text: &str, message: &str) -> Option<(usize, usize)> {
    let rest = message.split_once("unknown variant `")?.1;
    let word = format!("\"{}\"", &rest[..rest.find('`')?]);
    let at = text.find(&word)?;
    (text.matches(&word).count() == 1).then(|| line_col(text, at))
}

/// Line and column of the step an error names (``step `x`...``): its `name = "x"` line.
fn locate_step(text: &str, message: &str) -> Option<(usize, usize)> {
    let rest = message.strip_prefix("step `")?;
    let name = &rest[..rest.find('`')?];
    let pattern = format!(r#"(?m)^\s*name\s*=\s*["']{}["']"#, regex::escape(name));
    let found = regex::Regex::new(&pattern).ok()?.find(text)?;
    let start = found.start() + (found.as_str().len() - found.as_str().trim_start().len());
    Some(line_col(text, start))
}

/// The scenario catalogue compiled into the binary.
#[derive(Debug, Clone)]
pub struct Catalogue {
    /// Every scenario, in file order (sorted by requirement, then id).
    pub scenarios: Vec<Scenario>,
}

impl Catalogue {
    /// Parses every embedded scenario file; all problems are collected.
    pub fn embedded() -> Result<Self, Vec<ScenarioError>> {
        Self::from_files(SCENARIO_FILES.iter().copied())
    }

    /// Parses the given `(path relative to scenarios/, text)` pairs.
    pub fn from_files<'a>(
        files: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, Vec<ScenarioError>> {
        let mut scenarios = Vec::new();
        let mut errors = Vec::new();
        let mut ids = BTreeSet::new();
        for (rel, text) in files {
            match parse_scenario(rel, text) {
                Ok(s) => {
                    if !ids.insert(s.id.clone()) {
                        errors.push(ScenarioError {
                            file: rel.to_owned(),
                            location: None,
                            message: format!("scenario id `{}` is used twice", s.id),
                        });
                    }
                    scenarios.push(s);
                }
                Err(e) => errors.push(e),
            }
        }
        if errors.is_empty() { Ok(Self { scenarios }) } else { Err(errors) }
    }

    /// The scenario with this id.
    pub fn get(&self, id: &str) -> Option<&Scenario> {
        self.scenarios.iter().find(|s| s.id == id)
    }
}

/// The §79 audit's rule over the catalogue.
#[cfg(test)]
mod audit {
    /// The requirements whose scenarios the audit went through.
    const AUDITED: &[&str] = &[
        "REQ-F-080",
        "REQ-F-081",
        "REQ-F-082",
        "REQ-C-033",
        "REQ-C-034",
        "REQ-C-035",
        "REQ-C-007",
        "REQ-C-022",
        "REQ-F-069",
    ];

    fn audited_scenarios() -> Vec<crate::scenario::Scenario> {
        let catalogue = super::Catalogue::embedded().unwrap();
        catalogue
            .scenarios
            .into_iter()
            .filter(|s| AUDITED.contains(&s.requirement.as_str()))
            .collect()
    }

    #[test]
    fn every_audited_scenario_cites_the_requirement_behind_it() {
        let uncited: Vec<String> = audited_scenarios()
            .into_iter()
            .filter(|s| s.id != "manifest-valid")
            .filter(|s| {
                let notes = s.notes.as_deref().unwrap_or_default();
                !(notes.contains("REQ-") || notes.contains("docs/contract.md §"))
            })
            .map(|s| s.id)
            .collect();
        assert!(uncited.is_empty(), "scenarios whose notes cite no requirement: {uncited:?}");
    }

    #[test]
    fn no_scenario_requires_meta_idempotency_hit() {
        // REQ-C-007's criteria are `effect: "noop"` and the original data; the flag is only in
        // its wire example.
        let catalogue = super::Catalogue::embedded().unwrap();
        for s in &catalogue.scenarios {
            for e in s.steps.iter().filter_map(crate::scenario::Step::expect) {
                for check in &e.json {
                    assert!(
                        !check.pointer.contains("idempotency_hit"),
                        "{}: {}",
                        s.id,
                        check.pointer
                    );
                }
            }
        }
    }

    #[test]
    fn no_audited_scenario_needs_a_new_job_id_after_a_cancel() {
        // Ids derived from the invocation are legal: a restart after a cancel may keep the id.
        for s in audited_scenarios() {
            let cancels_at =
                s.steps.iter().position(|step| matches!(step, crate::scenario::Step::Cancel(_)));
            let Some(cancel) = cancels_at else { continue };
            for e in s.steps[cancel..].iter().filter_map(crate::scenario::Step::expect) {
                for check in e.json.iter().filter(|c| c.pointer == "/data/job_id") {
                    let wanted = serde_json::to_value(check).unwrap();
                    let differs = wanted.get("not_equals").is_some_and(|v| !v.is_null());
                    assert!(!differs, "{}: {wanted}", s.id);
                }
            }
        }
    }
}
