//! conform's integration tests: one binary, one module per subject.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod baseline;
mod cli;
mod discover;
mod engine;
mod exec;
mod foreign;
mod hostile;
mod init;
mod install;
mod kit_fixtures;
mod layers;
mod legal_choices;
mod levels;
mod matrix;
mod ordering_streams;
mod profile;
mod report;
mod sandbox;
mod scenarios;
mod snapshot;
mod support;
mod verdicts;
