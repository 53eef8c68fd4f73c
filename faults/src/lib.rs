//! # reftool-faults
//!
//! reftool with one rule of the contract broken: the faulty tools that prove `conform` can
//! fail (docs/design.md, "Sensitivity"). The workspace test `tests/suite/mutants.rs` runs `conform`
//! against each [`Fault`] and checks that the scenarios meant to catch it fail.
//!
//! # The faulty binary
//!
//! `reftool-faulty` is reftool, built from reftool's library, plus the fault named by
//! [`FAULT_ENV`] (`REFTOOL_FAULT=<name>`, see [`Fault::name`]); without it, or with an
//! unknown name, it behaves exactly as reftool. A detached job's worker is this binary again
//! (reftool's launcher re-executes the running binary) and inherits the variable, so the
//! worker is faulty too.
//!
//! ```sh
//! cargo build -p reftool-faults
//! REFTOOL_FAULT=env-beats-flag target/debug/reftool-faulty analyze data.csv --budget 1s
//! ```
//!
//! reftool's own source holds no fault: a fault acts where reftool can be entered from
//! outside, each variant of [`Fault`] says where (`Acts:`):
//!
//! - at the process boundary ([`boundary`]): argv in (a flag dropped, a value changed, the
//!   call refused before it runs), the answer out (the envelope's fields, the exit status, the
//!   bytes on stdout and stderr), stdin, the signal handlers, and the worker's process set-up;
//! - around an invocation, through reftool's own library ([`jobs`]): what a fault does to
//!   the job store or the state directory before or after the reference work (a `job cancel`
//!   that ends the job itself, a marker that stops the next job of an identity);
//! - through the runtime's parts reftool has as types ([`parts`]): the job naming (keys and
//!   ids), the progress sink, the worker launcher, given to the application where it is built
//!   ([`app`]);
//! - in a command's work, wrapped ([`commands`]): a checkpoint moved or kept before or after
//!   reftool's own work runs.

// `Failure` is reftool's error response, returned as it is by every command's work.
#![allow(clippy::result_large_err)]

pub mod boundary;
pub mod catalogue;
pub mod commands;
pub mod invocation;
pub mod jobs;
pub mod parts;

use std::ffi::OsString;
use std::io::Write;
use std::panic::AssertUnwindSafe;

use reftool::framework::app::internal_error_finish;
use reftool::framework::{App, Finished, Modes, RegistrationError};

pub use catalogue::{FAULT_ENV, Fault};

/// The faulty application: reftool's commands ([`commands::specs`]) on the runtime parts of
/// `fault` ([`parts::parts`]).
pub fn app(fault: Option<Fault>) -> Result<App, RegistrationError> {
    reftool::commands::app_of(commands::specs(fault), parts::parts(fault))
}

/// One invocation of the faulty binary: what to write and the exit status, whatever happens.
pub fn run(fault: Option<Fault>, argv: Vec<OsString>) -> Finished {
    let mode = Modes::detect(&argv).output;
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        let app = match app(fault) {
            Ok(app) => app,
            Err(e) => return internal_error_finish(mode, &format!("registration failed: {e}")),
        };
        // SigtermKillsTheCall: no handler, so SIGTERM keeps its default action.
        if fault != Some(Fault::SigtermKillsTheCall)
            && let Err(e) = app.install_signal_handlers()
        {
            let _ = writeln!(std::io::stderr().lock(), "reftool: no SIGTERM handler: {e}");
        }
        match fault {
            None => app.run(argv),
            Some(fault) => boundary::run(&app, fault, argv),
        }
    }))
    .unwrap_or_else(|_| internal_error_finish(mode, "panic outside the command's work"))
}
