//! The repository explains itself: no tracked text leads outside it. The contract's reading of
//! the spec and the design are in `docs/`; a citation of the contract names a section that
//! `docs/contract.md` has; a relative Markdown link resolves inside the repository. The spec
//! itself is cited by requirement id, as every scenario does.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use conform_workspace::workspace_root;
use regex::Regex;

/// Names of documents that live beside a working copy but not in it: a citation of one is a
/// reference a clone cannot follow.
const OUTSIDE: &[&str] =
    &["CONTRACT.md", "CONTRACT §", "DESIGN.md", "SPEC-SOURCES", "../shared", "shared/seeds"];

/// The text files of the repository, without build output and installed packages.
fn tracked_texts(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let Ok(kind) = entry.file_type() else { continue };
            if kind.is_dir() {
                if !matches!(name.as_ref(), "target" | ".git" | "node_modules" | "__pycache__") {
                    pending.push(path);
                }
            } else if kind.is_file()
                && ["rs", "md", "toml", "json", "py", "mjs", "sh", "txt", "yml", "yaml"]
                    .iter()
                    .any(|ext| path.extension().is_some_and(|e| e == *ext))
            {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The numbered sections of `docs/contract.md` (`## 9. Open points`).
fn contract_sections(root: &Path) -> BTreeSet<u32> {
    let text = std::fs::read_to_string(root.join("docs/contract.md")).expect("docs/contract.md");
    let heading = Regex::new(r"(?m)^## (\d+)\.").expect("regex");
    heading.captures_iter(&text).filter_map(|c| c[1].parse().ok()).collect()
}

#[test]
fn no_text_cites_a_document_outside_the_repository() {
    let root = workspace_root().canonicalize().expect("the workspace root");
    let sections = contract_sections(&root);
    assert!(sections.contains(&9) && sections.contains(&10), "sections: {sections:?}");
    let citation = Regex::new(r"docs/contract\.md\s*(?://[/!]?\s*)?§(\d+)").expect("regex");
    let link = Regex::new(r"\]\(([^)#\s]+)(?:#[^)]*)?\)").expect("regex");
    let this_file = root.join("tests/suite/references.rs");
    let mut failures = Vec::new();
    for path in tracked_texts(&root) {
        if path == this_file {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let shown = path.strip_prefix(&root).unwrap_or(&path).display().to_string();
        for name in OUTSIDE {
            if text.contains(name) {
                failures.push(format!("{shown}: cites {name}, which is not in the repository"));
            }
        }
        for found in citation.captures_iter(&text) {
            let section: u32 = found[1].parse().unwrap_or(0);
            if !sections.contains(&section) {
                failures
                    .push(format!("{shown}: cites docs/contract.md §{section}, which it lacks"));
            }
        }
        if path.extension().is_some_and(|e| e == "md") {
            for found in link.captures_iter(&text) {
                let target = &found[1];
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let resolved = path.parent().unwrap_or(&root).join(target);
                let inside = resolved.canonicalize().is_ok_and(|p| p.starts_with(&root));
                if !inside {
                    failures.push(format!(
                        "{shown}: links to {target}, which is not in the repository"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "references leading outside: {failures:#?}");
}
