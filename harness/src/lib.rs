//! # conform
//!
//! The conformance suite for command-line tools that AI agents call. It drives a tool binary
//! through the acceptance criteria of the CLI Agent Spec, above all its section "Work Outlives
//! the Caller's Budget", and reports pass / fail / skip per criterion with evidence.

pub mod baseline;
pub mod calibrate;
pub mod checks;
pub mod cli;
pub mod discover;
pub mod event;
pub mod exec;
pub mod exit;
pub mod outcome;
pub mod plan;
pub mod profile;
pub mod redact;
pub mod report;
pub mod run;
pub mod sandbox;
pub mod scenario;
pub mod schemas;
pub mod snapshot;
