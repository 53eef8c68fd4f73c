//! reftool's integration tests: the real binary, real SQLite files, real signals.
//!
//! Every envelope reftool prints is snapshotted (volatile fields redacted: durations, etags,
//! temporary paths) and validated against the workspace's `schemas/`.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// A command's work returns the framework's `Failure` whole, as reftool's own commands do.
#![allow(clippy::result_large_err)]

mod support;

mod args;
mod budget;
mod busy_state;
mod deploy;
mod drop_table;
mod envelopes;
mod files;
mod hostile;
mod hostile_db;
mod hostile_input;
mod hostile_state;
mod idempotency;
mod jobs;
mod layers;
mod long_lines;
mod manifest;
mod migrate;
mod modes;
mod reliability;
mod reliability_heavy;
mod repeats;
mod signals;
mod state;
mod stdin_spool;
mod supervision;
mod writers;
