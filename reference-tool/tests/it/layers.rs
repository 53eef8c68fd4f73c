//! The shape of reftool's code: every module of `reference-tool/src` uses only modules below
//! it in [`LAYERS`], so no module reaches up and no two modules import each other, directly
//! or around a circle.
//!
//! The test reads the code's own paths, `crate::...` and `super::...` (in `use` lines, their
//! `{...}` groups, and inline), and a `mod.rs`'s re-exports of its children, maps each to the
//! module it names (the longest module path it starts with) and fails on any reference to a
//! module of the same or a higher rank. A module is a file: `framework/interrupt/front.rs` is
//! `framework::interrupt::front`, a `mod.rs` is its directory's module. Test code (after
//! `#[cfg(test)]`, and the `*_tests.rs` files) may reach anywhere. Run it alone with
//! `cargo nextest run -p reftool layers`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// reftool's modules, lowest first: the runtime (which knows nothing of the framework), the
/// framework from its values up to dispatch, the commands, the crate root and the binary.
const LAYERS: &[&str] = &[
    "duration",
    // the interruption runtime
    "runtime::fsutil",
    "runtime::sha256",
    "runtime::warning",
    "runtime::ids",
    "runtime::process",
    "runtime::quote",
    "runtime::spool",
    "runtime::doorbell",
    "runtime::stop",
    "runtime::cancel",
    "runtime::identity",
    "runtime::progress",
    "runtime::checkpoint",
    "runtime::target",
    "runtime::jobs",
    "runtime::wake",
    "runtime::context",
    "runtime::incomplete",
    "runtime::worker",
    "runtime::parts",
    "runtime",
    // the framework: values, declarations, parsing, the stages of dispatch
    "framework::exit",
    "framework::stop",
    "framework::failure",
    "framework::modes",
    "framework::state",
    "framework::stream",
    "framework::context",
    "framework::envelope",
    "framework::budget",
    "framework::registry",
    "framework::options",
    "framework::cli",
    "framework::manifest",
    "framework::userdb",
    "framework::prepare",
    "framework::respond",
    "framework::interrupt::host",
    "framework::interrupt::store",
    "framework::interrupt::sweep",
    "framework::interrupt::limits",
    "framework::interrupt::answer",
    "framework::interrupt::async_start",
    "framework::interrupt::inline",
    "framework::interrupt::front",
    "framework::interrupt::job_builtins",
    "framework::interrupt::worker",
    "framework::interrupt",
    "framework::app",
    "framework",
    // the commands on the framework
    "commands::work",
    "commands::analyze",
    "commands::build",
    "commands::deploy",
    "commands::digest",
    "commands::drop_table",
    "commands::files",
    "commands::import",
    "commands::job",
    "commands::manifest",
    "commands::migrate",
    "commands::version",
    "commands",
    "lib",
    "main",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The module a file of `src/` is: `framework/interrupt/front.rs` is
/// `framework::interrupt::front`, `framework/mod.rs` is `framework`.
fn module_of(path: &Path) -> String {
    let rel = path.strip_prefix(src()).unwrap_or(path).with_extension("");
    let mut parts: Vec<String> =
        rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod") && parts.len() > 1 {
        parts.pop();
    }
    parts.join("::")
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

/// The identifier at the start of `text`.
fn ident(text: &str) -> &str {
    let end = text.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(text.len());
    &text[..end]
}

/// The path that starts `text` (`a::b::c`, stopping before a `{` group or anything else), and
/// the first identifier of each item of a `{...}` group that follows it.
fn path_and_group(text: &str) -> (Vec<&str>, Vec<&str>) {
    let mut segments = Vec::new();
    let mut rest = text;
    loop {
        let segment = ident(rest);
        if segment.is_empty() {
            break;
        }
        segments.push(segment);
        rest = &rest[segment.len()..];
        match rest.strip_prefix("::") {
            Some(after) => rest = after,
            None => return (segments, Vec::new()),
        }
    }
    let Some(group) = rest.strip_prefix('{') else { return (segments, Vec::new()) };
    let mut depth = 0;
    let mut items = Vec::new();
    let mut start = 0;
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&group[start..i]);
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    let firsts = items.iter().map(|item| ident(item.trim())).filter(|i| !i.is_empty()).collect();
    (segments, firsts)
}

/// The modules `module`'s source `text` names, comments and test code left out.
fn referenced(
    module: &str,
    text: &str,
    is_dir: bool,
    known: &BTreeSet<String>,
) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or(text);
    let code: String =
        code.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
    let own: Vec<&str> = if module == "lib" { Vec::new() } else { module.split("::").collect() };
    // The longest module `base::path` starts with (the base itself when nothing longer is one).
    let resolve = |base: &[&str], path: &[&str]| -> Option<String> {
        (0..=path.len()).rev().find_map(|n| {
            let name = [base, &path[..n]].concat().join("::");
            let name = if name.is_empty() { "lib".to_owned() } else { name };
            known.contains(&name).then_some(name)
        })
    };
    let mut names = BTreeSet::new();
    for (at, _) in code.match_indices("crate::").chain(code.match_indices("super::")) {
        let preceded = code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        if preceded {
            continue;
        }
        let after = &code[at..];
        let (mut path, group) = path_and_group(after);
        let mut base: Vec<&str> = Vec::new();
        if path.first() == Some(&"super") {
            base = own.clone();
            while path.first() == Some(&"super") {
                path.remove(0);
                base.pop();
            }
        } else {
            path.remove(0);
        }
        let mut paths = if path.is_empty() { Vec::new() } else { vec![path.clone()] };
        paths.extend(
            group.iter().filter(|g| **g != "self").map(|g| [path.clone(), vec![*g]].concat()),
        );
        names.extend(paths.iter().filter_map(|p| resolve(&base, p)));
    }
    if is_dir {
        // A directory module re-exports from its children: `pub use child::Item;`.
        for line in code.lines() {
            let line = line.trim_start();
            let Some(rest) = line
                .strip_prefix("pub use ")
                .or_else(|| line.strip_prefix("pub(crate) use "))
                .or_else(|| line.strip_prefix("use "))
            else {
                continue;
            };
            let child = [own.clone(), vec![ident(rest)]].concat().join("::");
            if known.contains(&child) {
                names.insert(child);
            }
        }
    }
    names.remove(module);
    names
}

fn rank(module: &str) -> Option<usize> {
    LAYERS.iter().position(|m| *m == module)
}

/// reftool's source files and their modules, test files left out.
fn modules() -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    files.sort();
    files
        .into_iter()
        .filter(|f| !f.to_string_lossy().ends_with("_tests.rs"))
        .map(|f| {
            let module = module_of(&f);
            (f, module)
        })
        .collect()
}

#[test]
fn every_module_uses_only_modules_below_it() {
    let modules = modules();
    let known: BTreeSet<String> = modules.iter().map(|(_, m)| m.clone()).collect();
    let mut upward = Vec::new();
    for (file, module) in &modules {
        let Some(own) = rank(module) else {
            panic!("module `{module}` ({}) is not in LAYERS: give it its place", file.display());
        };
        let is_dir = file.ends_with("mod.rs") || file.ends_with("lib.rs");
        let text = std::fs::read_to_string(file).unwrap();
        for used in referenced(module, &text, is_dir, &known) {
            match rank(&used) {
                Some(r) if r < own => {}
                _ => upward.push(format!("{} ({module}) uses `{used}`", file.display())),
            }
        }
    }
    assert!(upward.is_empty(), "references to the same or a higher layer:\n{}", upward.join("\n"));
}

#[test]
fn every_layer_is_a_module() {
    let known: BTreeSet<String> = modules().into_iter().map(|(_, m)| m).collect();
    let stale: Vec<&&str> = LAYERS.iter().filter(|m| !known.contains(**m)).collect();
    assert!(stale.is_empty(), "LAYERS names modules that do not exist: {stale:?}");
}

#[test]
fn the_layer_check_sees_an_upward_reference() {
    // A check that cannot fail is a defect: a runtime module naming the framework, a child
    // naming its parent through `super::`, and a group are all caught.
    let known: BTreeSet<String> = [
        "runtime::jobs",
        "runtime",
        "framework",
        "framework::app",
        "framework::interrupt",
        "framework::interrupt::front",
    ]
    .map(str::to_owned)
    .into();
    let text = "use crate::framework::app::App;\nfn f() { super::Host::new(); }\n// crate::x\n";
    let names = referenced("framework::interrupt::front", text, false, &known);
    assert_eq!(
        names,
        BTreeSet::from(["framework::app".to_owned(), "framework::interrupt".to_owned()])
    );
    let names =
        referenced("runtime::jobs", "use crate::{framework::App, runtime::x};", false, &known);
    assert_eq!(names, BTreeSet::from(["framework".to_owned(), "runtime".to_owned()]));
    assert!(rank("framework::app") > rank("runtime::jobs"));
}
