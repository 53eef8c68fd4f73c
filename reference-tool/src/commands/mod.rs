//! reftool's commands, each declared on the framework.
//!
//! | command | kind | work |
//! |---|---|---|
//! | `migrate` | mutating, no interruption | one transaction, honest TIMEOUT |
//! | `analyze FILE` | safe, `{detach, resume}` | CSV statistics, chunked |
//! | `digest FILE` | safe, `{resume}` | SHA-256 of a file, chunked |
//! | `import FILE --db DB` | mutating, `{resume}` | CSV rows into SQLite, chunk + checkpoint per transaction |
//! | `deploy SRC --to DEST` | mutating, `{detach}` | an archive of a directory, renamed into place |
//! | `build` | safe, `async` | an index of a source tree, as a background job |
//! | `job wait/status/cancel ID` | built-ins | the generic job runtime |
//!
//! Every unit of work sleeps `REFTOOL_PACE_MS` first, so small fixtures take seconds.

pub mod analyze;
pub mod build;
pub mod deploy;
pub mod digest;
pub mod import;
pub mod job;
pub mod manifest;
pub mod migrate;
pub mod version;
pub mod work;

use crate::framework::interrupt::runtime_migrations;
use crate::framework::{App, RegistrationError};

/// The reftool application: built-ins plus every command.
pub fn app() -> Result<App, RegistrationError> {
    let mut app = App::new(
        "reftool",
        env!("CARGO_PKG_VERSION"),
        "Reference CLI of the CLI Agent Spec contract",
    )?;
    app.add_state_migrations(&runtime_migrations());
    app.register(migrate::spec())?;
    app.register(analyze::spec())?;
    app.register(digest::spec())?;
    app.register(import::spec())?;
    app.register(deploy::spec())?;
    app.register(build::spec())?;
    for spec in job::specs() {
        app.register(spec)?;
    }
    Ok(app)
}
