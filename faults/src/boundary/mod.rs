//! Faults at the process boundary: what goes in (argv, stdin), what comes out (the answer,
//! the exit status, the bytes), and what [`crate::jobs`] does around the reference work.
//!
//! [`run`] is one invocation of a faulty reftool, in order: stdin ([`output::before_run`]),
//! a call refused before it runs ([`args::refusal`]), argv rewritten ([`args::rewrite`]),
//! the job store before ([`crate::jobs::before`]), reftool's own [`App::answer`], the answer
//! edited ([`answers::edit`]), the job store after ([`crate::jobs::after`]), and the bytes
//! ([`output::tamper`]).

pub mod answers;
pub mod args;
pub mod output;

use std::ffi::OsString;

use reftool::framework::{Answer, App, Finished};

use crate::Fault;
use crate::invocation::Call;

/// One invocation with `fault`.
pub fn run(app: &App, fault: Fault, argv: Vec<OsString>) -> Finished {
    let call = Call::parse(app, &argv);
    if let Some(exit) = output::before_run(fault, &call) {
        return Finished { stdout: Vec::new(), stderr: String::new(), exit };
    }
    let mut answer = match args::refusal(fault, &call) {
        Some(answer) => answer,
        None => {
            let argv = args::rewrite(fault, &call, argv);
            let kept = crate::jobs::before(fault, &call);
            let filter = output::SeqFilter::install_for(fault, &call);
            let answer = app.answer(argv);
            if let Some(filter) = filter {
                filter.finish();
            }
            crate::jobs::after(fault, &call, response(&answer), kept);
            answer
        }
    };
    answers::edit(fault, &call, &mut answer);
    output::tamper(fault, &call, answer.finish())
}

/// The response of an answer that has one.
fn response(answer: &Answer) -> Option<&reftool::framework::Response> {
    match answer {
        Answer::Response { response, .. } => Some(response),
        _ => None,
    }
}
