//! `reftool files [DIR] [--limit N] [--cursor C] [--stream]`: the regular files under DIR
//! (default `.`), recursively, sorted by their path relative to DIR, as items
//! `{"path": "a/b.txt", "bytes": 12}`.
//!
//! Safe, a list command (REQ-F-018, REQ-F-019): at most `--limit` items (default
//! [`DEFAULT_LIMIT`]), `meta.pagination` = `{total, returned, truncated, has_more, next_cursor}`;
//! `next_cursor` (the last path returned) given as `--cursor` lists the following page.
//! Symbolic links are not followed and not listed. Every item is one unit of work
//! (`REFTOOL_PACE_MS`).
//!
//! `--stream` (REQ-O-004) writes each item as it is produced, one JSON line with `_seq`, then
//! the summary line; SIGINT ends it with a CANCELLED envelope, exit 130 (`framework::stream`).
//! Nothing is written anywhere: listing the same tree twice prints the same items.

use std::path::Path;

use serde_json::{Value, json};

use crate::framework::{CommandSpec, Ctx, Exit, Failure, FlagSpec, SideEffects, ValueType};

/// Items returned when `--limit` is not given (REQ-F-019).
pub const DEFAULT_LIMIT: u64 = 100;
/// The largest `--limit` accepted.
pub const MAX_LIMIT: u64 = 10_000;

/// The declaration.
pub fn spec() -> CommandSpec {
    CommandSpec::new(
        "files",
        "List the regular files under a directory, recursively, sorted by path, with their sizes",
        run,
    )
    .positional("dir", ValueType::String, false, "The directory to list (default: .)")
    .flag(FlagSpec::integer("limit", "Items per page, 1-10000 (default 100)"))
    .flag(FlagSpec::string("cursor", "Start after this path: a previous page's next_cursor"))
    .streaming(false, true)
    .exit(Exit::SUCCESS, "The files are listed", false, SideEffects::None)
    .exit(Exit::NOT_FOUND, "The directory does not exist", false, SideEffects::None)
    .exit(
        Exit::PRECONDITION,
        "The path is not a directory, or part of the tree cannot be read",
        false,
        SideEffects::None,
    )
}

/// One listed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Path relative to the listed directory, `/`-separated.
    pub path: String,
    /// Size in bytes.
    pub bytes: u64,
}

impl Entry {
    fn item(&self) -> Value {
        json!({"path": self.path, "bytes": self.bytes})
    }
}

fn unreadable(path: &Path, e: &std::io::Error) -> Failure {
    Failure::new(
        Exit::PRECONDITION,
        "UNREADABLE",
        format!("{} cannot be read: {e}", path.display()),
    )
}

/// Every regular file under `root`, sorted by relative path.
pub fn walk(root: &Path) -> Result<Vec<Entry>, Failure> {
    match std::fs::metadata(root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Failure::new(
                Exit::NOT_FOUND,
                "DIR_NOT_FOUND",
                format!("{} does not exist", root.display()),
            )
            .suggestion("pass an existing directory"));
        }
        Err(e) => return Err(unreadable(root, &e)),
        Ok(meta) if !meta.is_dir() => {
            return Err(Failure::new(
                Exit::PRECONDITION,
                "NOT_A_DIRECTORY",
                format!("{} is not a directory", root.display()),
            ));
        }
        Ok(_) => {}
    }
    let mut entries = Vec::new();
    let mut pending = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, prefix)) = pending.pop() {
        let listing = std::fs::read_dir(&dir).map_err(|e| unreadable(&dir, &e))?;
        for child in listing {
            let child = child.map_err(|e| unreadable(&dir, &e))?;
            let name = child.file_name().to_string_lossy().into_owned();
            let relative = if prefix.is_empty() { name } else { format!("{prefix}/{name}") };
            let meta = child.metadata().map_err(|e| unreadable(&child.path(), &e))?;
            if meta.is_dir() {
                pending.push((child.path(), relative));
            } else if meta.is_file() {
                entries.push(Entry { path: relative, bytes: meta.len() });
            }
        }
    }
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(entries)
}

fn limit_of(ctx: &Ctx) -> Result<u64, Failure> {
    let Some(text) = ctx.args.text("limit") else { return Ok(DEFAULT_LIMIT) };
    match text.parse::<u64>() {
        Ok(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        _ => {
            Err(Failure::arg("INVALID_LIMIT", format!("--limit must be 1-{MAX_LIMIT}, got {text}")))
        }
    }
}

fn run(ctx: &mut Ctx) -> Result<Value, Failure> {
    let limit = limit_of(ctx)?;
    let root = ctx.args.text("dir").unwrap_or(".").to_owned();
    let all = walk(Path::new(&root))?;
    let total = all.len() as u64;
    let after: Vec<&Entry> = match ctx.args.text("cursor") {
        Some(cursor) => all.iter().filter(|e| e.path.as_str() > cursor).collect(),
        None => all.iter().collect(),
    };
    let page: Vec<&Entry> = after.iter().copied().take(limit as usize).collect();
    let has_more = after.len() > page.len();
    let next_cursor = if has_more { page.last().map(|e| json!(e.path)) } else { None };
    ctx.set_meta(
        "pagination",
        json!({
            "total": total,
            "returned": page.len(),
            "truncated": has_more,
            "has_more": has_more,
            "next_cursor": next_cursor.unwrap_or(Value::Null),
        }),
    );
    let mut items = Vec::new();
    for entry in page {
        ctx.pace()?;
        if ctx.streaming() {
            ctx.emit(entry.item())?;
        } else {
            items.push(entry.item());
        }
    }
    Ok(if ctx.streaming() { Value::Null } else { Value::Array(items) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_only_sorted_by_relative_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("b/c")).unwrap();
        std::fs::write(root.join("b/c/z.txt"), "zz").unwrap();
        std::fs::write(root.join("a.txt"), "a").unwrap();
        std::fs::write(root.join("b/x"), "").unwrap();
        std::os::unix::fs::symlink(root.join("a.txt"), root.join("link")).unwrap();
        let entries = walk(root).unwrap();
        let listed: Vec<(&str, u64)> = entries.iter().map(|e| (e.path.as_str(), e.bytes)).collect();
        assert_eq!(listed, vec![("a.txt", 1), ("b/c/z.txt", 2), ("b/x", 0)]);
    }

    #[test]
    fn a_missing_directory_is_not_found_and_a_file_is_no_directory() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(walk(&dir.path().join("nope")).unwrap_err().exit, Exit::NOT_FOUND);
        std::fs::write(dir.path().join("f"), "").unwrap();
        assert_eq!(walk(&dir.path().join("f")).unwrap_err().code, "NOT_A_DIRECTORY");
    }
}
