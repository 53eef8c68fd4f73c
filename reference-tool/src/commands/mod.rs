//! reftool's commands, each declared on the framework.
//!
//! | command | kind | work |
//! |---|---|---|
//! | `migrate` | mutating, no interruption | one transaction, honest TIMEOUT |
//! | `analyze FILE` | safe, `{detach, resume}` | CSV statistics, chunked |
//! | `digest FILE` | safe, `{resume}` | SHA-256 of a file, chunked |
//! | `import FILE --db DB` | mutating, `{resume}` | CSV rows into SQLite, chunk + checkpoint per transaction |
//! | `deploy SRC --to DEST` | mutating, `{detach}` | an archive of a directory, renamed into place |
//! | `drop-table --db DB --table T` | destructive, no interruption | drops a table after confirmation; `--dry-run` previews |
//! | `build` | safe, `async` | an index of a source tree, as a background job |
//! | `files [DIR]` | safe list, `supports_streaming` | regular files under DIR, paginated; `--stream` writes JSONL |
//! | `job wait/status/cancel ID` | built-ins | the generic job runtime |
//!
//! Every unit of work sleeps `REFTOOL_PACE_MS` first, so small fixtures take seconds.

pub mod analyze;
pub mod build;
pub mod deploy;
pub mod digest;
pub mod drop_table;
pub mod files;
pub mod import;
pub mod job;
pub mod manifest;
pub mod migrate;
pub mod version;
pub mod work;

use crate::framework::interrupt::runtime_migrations;
use crate::framework::{App, CommandSpec, RegistrationError};
use crate::runtime::Parts;

pub use version::{NAME, VERSION};

/// What the tool is for.
pub const ABOUT: &str = "Reference CLI of the CLI Agent Spec contract";

/// The test knobs, when they hold valid limits, become the declarations of every
/// interruptible command, so the manifest says what is in force: `REFTOOL_IDLE_TIMEOUT_MS` its
/// `idle_timeout_ms` (what the watchdog does), `REFTOOL_MAX_LIFETIME_MS` its `max_lifetime_ms`
/// (what bounds the work without `--timeout`). A malformed value is refused when a command
/// runs (`framework::interrupt`).
fn with_test_knobs(mut spec: CommandSpec) -> CommandSpec {
    let knob = |name: &str| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|ms| (1..=86_400_000).contains(ms))
    };
    if let Some(interruption) = spec.interruption.as_mut() {
        if let Some(ms) = knob(crate::framework::interrupt::IDLE_TIMEOUT_ENV) {
            interruption.idle_timeout_ms = Some(ms);
        }
        if let Some(ms) = knob(crate::framework::interrupt::MAX_LIFETIME_ENV) {
            interruption.max_lifetime_ms = Some(ms);
        }
    }
    spec
}

/// Every command of reftool, the built-ins (`manifest`, `version`, `job ...`) included, in
/// the order they are registered.
pub fn specs() -> Vec<CommandSpec> {
    let mut specs = vec![manifest::spec(), version::spec(), migrate::spec(), drop_table::spec()];
    // analyze's FILE may be `-`: stdin, spooled within bounds before its job exists.
    let analyze = analyze::spec().reads_stdin("file");
    for spec in [analyze, digest::spec(), import::spec(), deploy::spec()] {
        specs.push(with_test_knobs(spec));
    }
    specs.push(build::spec());
    specs.push(files::spec());
    specs.extend(job::specs());
    specs
}

/// The reftool application: every command of [`specs`] on reftool's runtime parts.
pub fn app() -> Result<App, RegistrationError> {
    app_of(specs(), Parts::default())
}

/// A reftool application of `specs` on the runtime parts `parts`.
pub fn app_of(specs: Vec<CommandSpec>, parts: Parts) -> Result<App, RegistrationError> {
    let mut app = App::new(NAME, VERSION, ABOUT).with_parts(parts);
    app.add_state_migrations(&runtime_migrations());
    for spec in specs {
        app.register(spec)?;
    }
    Ok(app)
}
