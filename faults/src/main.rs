//! `reftool-faulty`: reftool with the fault `REFTOOL_FAULT` names (see the crate docs).

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use reftool::framework::Exit;
use reftool::runtime::worker::{WORKER_ARG, close_inherited_descriptors, detach_self};
use reftool_faults::Fault;

fn main() -> ExitCode {
    std::panic::set_hook(Box::new(|info| {
        let _ = writeln!(std::io::stderr().lock(), "reftool: internal error: {info}");
    }));
    let fault = Fault::from_env();
    let argv: Vec<OsString> = std::env::args_os().collect();
    if argv.get(1).is_some_and(|a| a == WORKER_ARG) {
        // WorkerInCallerGroup: the worker drops the caller's descriptors but stays in the
        // caller's session and process group.
        let detached = if fault == Some(Fault::WorkerInCallerGroup) {
            close_inherited_descriptors()
        } else {
            detach_self()
        };
        if let Err(e) = detached {
            let _ = writeln!(std::io::stderr().lock(), "reftool: worker failed to detach: {e}");
            return ExitCode::from(Exit::GENERAL_ERROR.code());
        }
    }
    reftool_faults::run(fault, argv).write()
}
