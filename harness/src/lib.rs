//! # conform
//!
//! The conformance suite for command-line tools that AI agents call. It drives a tool binary
//! through the acceptance criteria of the CLI Agent Spec, above all its section "Work Outlives
//! the Caller's Budget", and reports pass / fail / skip per criterion with evidence and the
//! exact command that reproduces each failure.
//!
//! These crate docs are conform's manual: how to run it, the profile a vendor writes, and the
//! scenario format the catalogue is written in. Each part is a file of `harness/docs/`, the one
//! text both of these docs and of `conform manual TOPIC` (the binary prints the same files).
//! (The TOML examples below are parsed by a test, so they stay true.)
//!
#![doc = include_str!("../docs/running.md")]
#![doc = include_str!("../docs/matrix.md")]
#![doc = include_str!("../docs/stages.md")]
#![doc = include_str!("../docs/levels.md")]
#![doc = include_str!("../docs/profile.md")]
#![doc = include_str!("../docs/scenarios.md")]
#![doc = include_str!("../docs/templates.md")]
#![doc = include_str!("../docs/checks.md")]
#![doc = include_str!("../docs/redaction.md")]
#![doc = include_str!("../docs/hostile.md")]
#![doc = include_str!("../docs/campaign.md")]

pub mod baseline;
pub mod calibrate;
pub mod campaign;
pub mod checks;
pub mod cli;
pub mod discover;
pub mod embedded;
pub mod event;
pub mod exec;
pub mod exit;
pub mod inert;
pub mod init;
pub mod input;
pub mod interrupt;
pub mod levels;
pub mod matrix;
pub mod observe;
pub mod outcome;
pub mod pace;
pub mod plan;
pub mod prepare;
pub mod profile;
pub mod redact;
pub mod report;
pub mod run;
pub mod sandbox;
pub mod scenario;
pub mod schemas;
pub mod snapshot;
pub mod step;
pub mod stream;
pub mod summary;
pub mod tool;
