//! The shape of conform's code: every module of `harness/src` uses only modules below it in
//! [`LAYERS`], so the pipeline reads top to bottom and no stage calls back up into a later one.
//!
//! The test reads the code's own `crate::` paths (in `use` lines and inline), maps each to its
//! top-level module and fails on any reference to a module of the same or a higher rank: an
//! upward arrow or a circle. Anyone can run it alone with
//! `cargo nextest run -p conform layers`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// conform's modules, lowest first. Foundations (the process driver, embedded files, the
/// wire schemas, the input models, the result types) come first, then the stages in the order
/// a run goes through them, then the reporters and the binary's edge. The event stream sits
/// between the engine (which sends) and the reporters (which receive): it knows results and
/// the summary, never the engine.
const LAYERS: &[&str] = &[
    // foundations
    "inert",
    "input",
    "exec",
    "pace",
    "embedded",
    "redact",
    "exit",
    "schemas",
    "scenario",
    "outcome",
    "tool",
    "stream",
    "observe",
    "profile",
    // the stages of a run
    "sandbox",
    "interrupt",
    "prepare",
    "discover",
    // pure judges; each owns its `expect` key's validation, which the catalogue runs
    "checks",
    "catalogue",
    "plan",
    "calibrate",
    "step",
    "levels",
    "summary",
    "event",
    "run",
    // after the run: campaigns of runs, marks, reporters, the binary's edge
    "campaign",
    "baseline",
    "snapshot",
    "report",
    "matrix",
    "init",
    "cli",
    "lib",
    "main",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The top-level module a file of `src/` belongs to.
fn module_of(path: &Path) -> String {
    let rel = path.strip_prefix(src()).unwrap_or(path);
    let first = rel.components().next().map(|c| c.as_os_str().to_string_lossy().into_owned());
    first.unwrap_or_default().trim_end_matches(".rs").to_owned()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level modules a source text names through `crate::`, comments and tests left out
/// (a test module may reach anywhere).
fn referenced(text: &str) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or(text);
    let mut names = BTreeSet::new();
    for line in code.lines().filter(|l| !l.trim_start().starts_with("//")) {
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let name: String =
                rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                names.insert(name);
            }
        }
    }
    names
}

fn rank(module: &str) -> Option<usize> {
    LAYERS.iter().position(|m| *m == module)
}

#[test]
fn every_module_uses_only_modules_below_it() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    let mut upward = Vec::new();
    for file in &files {
        let module = module_of(file);
        let Some(own) = rank(&module) else {
            panic!("module `{module}` ({}) is not in LAYERS: give it its place", file.display());
        };
        let text = std::fs::read_to_string(file).unwrap();
        for used in referenced(&text) {
            if used == module {
                continue;
            }
            match rank(&used) {
                Some(r) if r < own => {}
                _ => upward.push(format!("{} ({module}) uses `{used}`", file.display())),
            }
        }
    }
    assert!(upward.is_empty(), "references to the same or a later layer:\n{}", upward.join("\n"));
}

#[test]
fn the_layer_check_sees_an_upward_reference() {
    // A check that cannot fail is a defect: a stage naming a later one is caught.
    let text = "use crate::exec::Program;\nfn f() { crate::run::Engine::new(); }\n// crate::cli\n";
    assert_eq!(referenced(text), BTreeSet::from(["exec".to_owned(), "run".to_owned()]));
    assert!(rank("run") > rank("discover"));
}

#[test]
fn run_stays_a_scheduler() {
    let lines = std::fs::read_to_string(src().join("run.rs")).unwrap().lines().count();
    assert!(lines < 450, "run.rs has {lines} lines: stage logic belongs in its stage's module");
}
