//! conform's integration tests: one binary, one module per subject.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod exec;
mod hostile;
mod sandbox;
mod report;
mod cli;
mod engine;
mod profile;
mod scenarios;
mod support;
mod baseline;
mod snapshot;
mod discover;
mod kit_fixtures;
mod levels;
