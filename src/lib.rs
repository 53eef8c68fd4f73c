//! Support code for the workspace-level tests in `tests/`.
//!
//! The root package exists so that `tests/` compiles (a virtual workspace never builds a root
//! `tests/`). It holds no product code: `conform` lives in `harness/`, `reftool` in
//! `reference-tool/`, and the two share nothing but the wire-format schemas in `schemas/`.

use std::path::{Path, PathBuf};

/// The workspace root (where this crate's `Cargo.toml` is).
pub fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Path of a binary built by this workspace (`conform`, `reftool`) in the same target profile
/// as the running test. `cargo test --workspace` and `cargo nextest run --workspace` build every
/// member's binaries before they run any test.
pub fn workspace_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("no current exe: {e}"));
    // target/<profile>/deps/<test>-<hash>  ->  target/<profile>/<name>
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| panic!("unexpected test binary location {}", exe.display()));
    profile_dir.join(name)
}

/// Reads and parses one of the wire-format schemas in `schemas/` by file name.
pub fn schema_json(file: &str) -> serde_json::Value {
    let path = workspace_root().join("schemas").join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}
