//! `reftool version`: the tool's version (also `reftool --version` in JSON mode).

use serde_json::{Value, json};

use crate::framework::manifest::SCHEMA_VERSION;
use crate::framework::{App, CommandSpec, Exit, SideEffects};

/// The data of the version response.
pub fn data(app: &App) -> Value {
    let _ = app;
    version_data()
}

fn version_data() -> Value {
    json!({
        "name": "reftool",
        "version": env!("CARGO_PKG_VERSION"),
        "schema_version": SCHEMA_VERSION,
    })
}

/// The declaration.
pub fn spec() -> CommandSpec {
    CommandSpec::new("version", "Print the tool's version", |_ctx| Ok(version_data()))
        .builtin()
        .exit(Exit::SUCCESS, "The version is printed", false, SideEffects::None)
}
