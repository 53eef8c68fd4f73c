//! conform's integration tests: one binary, one module per subject.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod exec;
mod report;
mod baseline;
mod snapshot;
