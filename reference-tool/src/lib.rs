//! # reftool
//!
//! The reference implementation of the CLI Agent Spec contract: a small framework where command
//! authors declare and the framework enforces ([`framework`]), and the `reftool` binary made of
//! real commands on it ([`commands`]).
//!
//! Start-up time is measured by `cargo bench -p reftool --bench startup` (it builds and uses
//! the release binary).

// `Failure` is the error response itself, built at most once per process; keeping it a plain
// struct (not boxed) keeps command code simple, and its size costs nothing measurable.
#![allow(clippy::result_large_err)]

pub mod commands;
pub mod duration;
pub mod framework;
pub mod runtime;
