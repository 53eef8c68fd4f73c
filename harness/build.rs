//! Embeds the declarative scenario files (`scenarios/<REQUIREMENT>/<id>.toml`) and the wire-format
//! JSON Schemas (`schemas/*.json`) into the binary, so `conform` runs from anywhere without the
//! repository beside it. The generated lists are sorted, so the catalogue order is stable.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let root = manifest_dir.parent().map(Path::to_path_buf).unwrap_or_default();
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());

    let scenarios_dir = root.join("scenarios");
    let schemas_dir = root.join("schemas");
    println!("cargo:rerun-if-changed={}", scenarios_dir.display());
    println!("cargo:rerun-if-changed={}", schemas_dir.display());

    let mut scenario_files = Vec::new();
    for requirement in sorted_entries(&scenarios_dir) {
        if !requirement.is_dir() {
            continue;
        }
        println!("cargo:rerun-if-changed={}", requirement.display());
        for file in sorted_entries(&requirement) {
            if file.extension().is_some_and(|e| e == "toml") {
                println!("cargo:rerun-if-changed={}", file.display());
                scenario_files.push(file);
            }
        }
    }
    let mut code = String::from(
        "/// Every scenario file: (path relative to `scenarios/`, contents).\n\
         pub static SCENARIO_FILES: &[(&str, &str)] = &[\n",
    );
    for file in &scenario_files {
        let rel = file.strip_prefix(&scenarios_dir).unwrap_or(file);
        let _ = writeln!(code, "    ({:?}, include_str!({:?})),", rel.display().to_string(), file);
    }
    code.push_str("];\n");

    let mut schema_files = Vec::new();
    for file in sorted_entries(&schemas_dir) {
        if file.extension().is_some_and(|e| e == "json") {
            println!("cargo:rerun-if-changed={}", file.display());
            schema_files.push(file);
        }
    }
    code.push_str(
        "/// Every wire-format schema: (file name in `schemas/`, contents).\n\
         pub static SCHEMA_FILES: &[(&str, &str)] = &[\n",
    );
    for file in &schema_files {
        let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let _ = writeln!(code, "    ({name:?}, include_str!({file:?})),");
    }
    code.push_str("];\n");

    if let Err(e) = std::fs::write(out_dir.join("embedded.rs"), code) {
        panic!("cannot write the embedded file list: {e}");
    }
}

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    entries.sort();
    entries
}
