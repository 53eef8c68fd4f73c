//! Stage: scenario model. The declarative scenario files, parsed and checked.
//!
//! Every file under `scenarios/<REQUIREMENT>/<id>.toml` is compiled into the binary (see
//! `build.rs`) and parsed with `deny_unknown_fields`, so a typo in a scenario is an error
//! with its line and column, never a silently ignored key. The format itself is documented in
//! the crate docs (`lib.rs`), which are the manual; `schemas/scenario.json` describes the same
//! format as a JSON Schema, and a test keeps the two in agreement.
//!
//! One file per concept: [`model`] (the scenario, its steps and their `expect` tables, as
//! serde reads them) and [`template`] (the template and duration language of their strings).
//! Parsing a file, validating it and the whole catalogue are [`crate::catalogue`]'s, above the
//! checks, since each check owns what its `expect` key needs ([`crate::checks::Check`]).

pub mod model;
pub mod template;

pub use model::*;
pub use template::*;

pub use crate::embedded::SCENARIO_FILES;
pub use crate::schemas::SchemaName;

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col =
        before.rfind('\n').map_or(before.chars().count(), |i| before[i + 1..].chars().count()) + 1;
    (line, col)
}
