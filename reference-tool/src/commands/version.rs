//! `reftool version`: the tool's version (also `reftool --version` in JSON mode).

use serde_json::Value;

use crate::framework::manifest::version_data;
use crate::framework::{CommandSpec, Exit, SideEffects};

/// The tool's name.
pub const NAME: &str = "reftool";
/// The tool's version (part of every job's identity).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The data of the version response (also answers `--version` in JSON mode).
pub fn data() -> Value {
    version_data(NAME, VERSION)
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
