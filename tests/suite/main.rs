//! Workspace-level tests: one binary, one module per subject.
mod schemas;
mod readme;
mod reftool_catalogue;
mod mutants;
