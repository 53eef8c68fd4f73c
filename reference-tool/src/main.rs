//! `reftool`: parse, run, write once, exit.

use std::io::Write;
use std::process::ExitCode;

use reftool::framework::app::internal_error_finish;
use reftool::framework::{Exit, Modes};

fn main() -> ExitCode {
    // A panic is reported on stderr only; stdout gets the GENERAL_ERROR envelope below.
    std::panic::set_hook(Box::new(|info| {
        let _ = writeln!(std::io::stderr().lock(), "reftool: internal error: {info}");
    }));
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // A detached worker leaves the caller's session and drops every inherited descriptor
    // before anything else opens a file (reftool::runtime::worker).
    if argv.get(1).is_some_and(|a| a == reftool::runtime::worker::WORKER_ARG)
        && let Err(e) = reftool::runtime::worker::detach_self()
    {
        let _ = writeln!(std::io::stderr().lock(), "reftool: worker failed to detach: {e}");
        return ExitCode::from(Exit::GENERAL_ERROR.code());
    }
    // Test-only faults (reftool::mutants); nothing without the `mutants` feature.
    if let Some(code) = reftool::mutants::before_run(&argv) {
        return ExitCode::from(code);
    }
    let mutant_argv = argv.clone();
    let mode = Modes::detect(&argv).output;
    let finished = std::panic::catch_unwind(|| {
        let app = match reftool::commands::app() {
            Ok(app) => app,
            Err(e) => return internal_error_finish(mode, &format!("registration failed: {e}")),
        };
        let sigterm_kills = reftool::mutants::active(reftool::mutants::Mutant::SigtermKillsTheCall);
        if let Err(e) = if sigterm_kills { Ok(()) } else { app.install_signal_handlers() } {
            let _ = writeln!(std::io::stderr().lock(), "reftool: no SIGTERM handler: {e}");
        }
        app.run(argv)
    })
    .unwrap_or_else(|_| internal_error_finish(mode, "panic outside the command's work"));
    let mut finished = finished;
    reftool::mutants::tamper_output(
        &mutant_argv,
        &mut finished.stdout,
        &mut finished.stderr,
        &mut finished.exit,
    );
    if !finished.stderr.is_empty() {
        let _ = std::io::stderr().lock().write_all(finished.stderr.as_bytes());
    }
    let mut stdout = std::io::stdout().lock();
    let written = stdout.write_all(&finished.stdout).and_then(|()| stdout.flush());
    if written.is_err() && finished.exit == Exit::SUCCESS.code() {
        return ExitCode::from(Exit::GENERAL_ERROR.code());
    }
    ExitCode::from(finished.exit)
}
