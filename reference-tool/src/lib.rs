//! # reftool
//!
//! The reference implementation of the CLI Agent Spec contract: a small framework where command
//! authors declare and the framework enforces, and the `reftool` binary made of real commands.

pub mod duration;
pub mod runtime;
