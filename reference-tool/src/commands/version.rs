//! `reftool version`: the tool's version (also `reftool --version` in JSON mode).

use serde_json::{Value, json};

use crate::framework::manifest::SCHEMA_VERSION;
use crate::framework::{CommandSpec, Exit, SideEffects};

/// The data of the version response (also answers `--version` in JSON mode).
pub fn data() -> Value {
    json!({
        "name": "reftool",
        "version": env!("CARGO_PKG_VERSION"),
        "schema_version": SCHEMA_VERSION,
    })
}

/// The declaration.
pub fn spec() -> CommandSpec {
    CommandSpec::new("version", "Print the tool's version", |_ctx| Ok(data())).builtin().exit(
        Exit::SUCCESS,
        "The version is printed",
        false,
        SideEffects::None,
    )
}
