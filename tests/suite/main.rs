//! Workspace-level tests: one binary, one module per subject. The mutant matrix
//! (`mutants.rs`) is a target of its own (`mutants`, `harness = false`): it lists one test per
//! row, which a `#[test]` cannot.
mod campaign;
mod fixtures_paths;
mod lanes;
mod lifetime_bound;
mod portable_snapshots;
mod readme;
mod references;
mod reftool_catalogue;
mod reports;
mod schemas;
mod stall_bound;
