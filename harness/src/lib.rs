//! # conform
//!
//! The conformance suite for command-line tools that AI agents call. It drives a tool binary
//! through the acceptance criteria of the CLI Agent Spec, above all its section "Work Outlives
//! the Caller's Budget", and reports pass / fail / skip per criterion with evidence.

pub mod exec;
pub mod sandbox;
