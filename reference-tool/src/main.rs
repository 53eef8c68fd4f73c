//! `reftool`: parse, run, write once, exit.

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use reftool::framework::app::internal_error_finish;
use reftool::framework::{Exit, Finished, Modes};

fn main() -> ExitCode {
    // A panic is reported on stderr only; stdout gets the GENERAL_ERROR envelope below.
    std::panic::set_hook(Box::new(|info| {
        let _ = writeln!(std::io::stderr().lock(), "reftool: internal error: {info}");
    }));
    let argv: Vec<OsString> = std::env::args_os().collect();
    // A detached worker leaves the caller's session and drops every inherited descriptor
    // before anything else opens a file (reftool::runtime::worker).
    if argv.get(1).is_some_and(|a| a == reftool::runtime::worker::WORKER_ARG)
        && let Err(e) = reftool::runtime::worker::detach_self()
    {
        let _ = writeln!(std::io::stderr().lock(), "reftool: worker failed to detach: {e}");
        return ExitCode::from(Exit::GENERAL_ERROR.code());
    }
    run(argv).write()
}

/// The invocation: what to write and the exit status, whatever happens.
fn run(argv: Vec<OsString>) -> Finished {
    let mode = Modes::detect(&argv).output;
    std::panic::catch_unwind(|| {
        let app = match reftool::commands::app() {
            Ok(app) => app,
            Err(e) => return internal_error_finish(mode, &format!("registration failed: {e}")),
        };
        if let Err(e) = app.install_signal_handlers() {
            let _ = writeln!(std::io::stderr().lock(), "reftool: no SIGTERM handler: {e}");
        }
        app.run(argv)
    })
    .unwrap_or_else(|_| internal_error_finish(mode, "panic outside the command's work"))
}
