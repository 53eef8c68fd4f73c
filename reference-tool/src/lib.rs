//! # reftool
//!
//! The reference implementation of the CLI Agent Spec contract: a small framework where command
//! authors declare and the framework enforces ([`framework`]), and the `reftool` binary made of
//! real commands on it ([`commands`]).
//!
//! The interruption runtime ([`runtime`]: detached jobs, progress, checkpoints) is wired into
//! dispatch by [`framework::interrupt`], after the call budget ([`framework::budget`]); the
//! long-running commands (`analyze`,
//! `digest`, `import`, `deploy`, `build`) and the `job` built-ins are in [`commands`].
//! `reference-tool/conform.toml` is conform's profile for reftool.
//!
//! The source holds no test-only fault: the faulty reftools that prove `conform` can fail are
//! built from this library by the crate `faults/` (`reftool-faults`), so reftool's release
//! build and its test build are the same code. Its modules are ranked, none importing a module
//! above it (`tests/it/layers.rs`).
//!
//! Benchmarks (optimized builds): `cargo bench -p reftool --bench startup` (start-up against
//! `/bin/true`), `--bench handoff` (budget overshoot of a detached and a resume-only call,
//! SIGTERM handoff, `job wait` wake-up; target budget + 50 ms), `--bench wake` (the doorbell
//! wake-up alone), `--bench stream` (time to the first line of `files --stream` against the
//! whole list).

// `Failure` is the error response itself, built at most once per process; keeping it a plain
// struct (not boxed) keeps command code simple, and its size costs nothing measurable.
#![allow(clippy::result_large_err)]

pub mod commands;
pub mod duration;
pub mod framework;
pub mod runtime;
