//! Workspace-level tests: one binary, one module per subject.
mod readme;
mod reftool_catalogue;
mod schemas;
