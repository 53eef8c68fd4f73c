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
//! # What reftool promises under concurrency, kills and corruption
//!
//! Each promise names the module that keeps it and the test that attacks it.
//!
//! - **Many calls at once.** Any number of reftool processes may share one state directory
//!   and one target database, across instances too. The identical invocations share one job
//!   (the others attach, `runtime::jobs`). An idempotency key is reserved by its first use,
//!   before any work: a call with other arguments under it is refused (CONFLICT 6) while the
//!   first runs or waits paused and after it, and the first's continuation goes on
//!   (`framework::state`; `tests/it/idempotency.rs`, eight racing calls with one key in
//!   `reliability_heavy.rs`). One import fills a table at a time: another import of a table
//!   that an unfinished import holds is refused (CONFLICT 6 `TABLE_IN_USE`, nothing written),
//!   and an import answers success only when the table holds exactly its file's rows
//!   (`runtime::target`, `commands::import`; `tests/it/writers.rs`, twenty rounds of racing
//!   writers in `reliability_heavy.rs`). reftool never opens its state database outside
//!   SQLite, whose locks a plain descriptor closed in the same process would silently drop
//!   (`framework::state`).
//! - **A busy state database.** A call with a budget waits for a database another process
//!   keeps locked no longer than its budget (UNAVAILABLE 12 `STATE_BUSY`, retryable), `job
//!   status` not at all, and a detached worker waits it out rather than die with its job
//!   (`framework::state`, `runtime::wake`, `runtime::worker`; `tests/it/busy_state.rs`).
//! - **`kill -9` at any instant.** A writer's rows and the checkpoint recording them commit
//!   together, so its identical invocation neither loses nor repeats one; a reader resumes from
//!   its last checkpoint, never reporting below it; a checkpoint holds only for the input and
//!   the target it was taken on (a changed file, or a table dropped or refilled meanwhile,
//!   discards it with `CHECKPOINT_DISCARDED`); `digest` resumes its hash from its saved state;
//!   `deploy` only ever renames a complete archive into place, and the next deploy removes the
//!   partial archive a killed one left (`runtime::checkpoint`, `commands::*`; a hundred random
//!   kills over import and analyze in `reliability_heavy.rs`, `tests/it/deploy.rs`).
//! - **Damaged state.** Every state file is written to a temporary file, fsynced and renamed
//!   (progress included). A job file that is missing or does not parse all the same is named
//!   (`JOB_STATE_UNREADABLE` with its path); `job cancel` ends such a job and the identical
//!   invocation replaces it, resuming from its checkpoint; an unreadable checkpoint is
//!   discarded with a warning naming it; a state database that is no database is
//!   `STATE_DB_CORRUPT` (`runtime::jobs`; `tests/it/hostile_state.rs`).
//! - **Signals and limits.** SIGTERM hands a detached call off or pauses a resume-only one
//!   (REQ-F-013); SIGINT and SIGHUP end an interruptible call with the cancellation envelope
//!   (130, 129; REQ-F-069) whose `data` says where its job stands, its work saved or running
//!   on; a second SIGINT or SIGHUP during the cleanup after the first ends the process at once
//!   with 130 or 129 and nothing more on stdout (`runtime::cancel`); every command's exit codes
//!   list 130; a write past `ulimit -f` is an error envelope (`DB_WRITE_FAILED`), not SIGXFSZ; running
//!   out of file descriptors is `TOO_MANY_OPEN_FILES` with the limit
//!   (`tests/it/signals.rs`).
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
