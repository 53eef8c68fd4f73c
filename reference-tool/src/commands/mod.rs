//! reftool's commands, each declared on the framework. Part 2 adds the interruptible ones and
//! the `job` built-ins.

pub mod manifest;
pub mod migrate;
pub mod version;

use crate::framework::{App, RegistrationError};

/// The reftool application: built-ins plus every command.
pub fn app() -> Result<App, RegistrationError> {
    let mut app = App::new(
        "reftool",
        env!("CARGO_PKG_VERSION"),
        "Reference CLI of the CLI Agent Spec contract",
    )?;
    app.register(migrate::spec())?;
    Ok(app)
}
