//! `conform matrix MATRIX --html DIR`: several implementations of the contract side by side.
//!
//! A matrix file (TOML) names the implementations, each as a tool with its profile (run now,
//! one after the other, each by `conform run --format json --evidence all`) or as the JSON
//! report of an earlier run (`report`). `DIR` gets one page per implementation (its whole run:
//! [`crate::report::html::run_page`]), its JSON report beside it (what a later matrix can read
//! instead of running it again), and `index.html`: the scenarios as rows grouped by
//! requirement, the implementations as columns, each cell linking to that run's evidence and
//! timeline, the claims of each on top ([`crate::report::html::matrix`]).
//!
//! ```toml
//! title = "§79 across implementations"   # the page's heading (optional)
//!
//! [[tool]]
//! name = "reftool"
//! tool = "target/debug/reftool"           # a path (relative to this file) or a name on PATH
//! profile = "reference-tool/conform.toml" # relative to this file; none: no profile
//! args = ["-j", "8"]                      # more arguments of `conform run`
//!
//! [[tool]]
//! name = "notes"
//! tool = "tests/fixtures/tools/foreign/notes"
//! profile = "tests/fixtures/tools/foreign/conform.toml"
//! path = ["tests/fixtures/tools/foreign"] # put first on PATH for its run
//! env = { NOTES_PACE_MS = "120" }         # more environment for its run
//!
//! [[tool]]
//! name = "yesterday's reftool"
//! report = "reports/reftool.json"         # read, not run
//! ```
//!
//! A tool without `tool` runs its profile's `[tool] command`. The exit is 0 when every
//! implementation has its page, whatever their verdicts (the pages say them); 1 when a run
//! gave no report (its column says why); 2 for a matrix file that cannot be read.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Deserialize;
use serde_json::Value;

use crate::exit;
use crate::report::html::{self, Html, matrix::Column, view::RunView};

/// The largest JSON report a matrix reads.
pub const REPORT_LIMIT: u64 = 256 << 20;

/// A matrix file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixFile {
    /// The page's heading.
    #[serde(default)]
    pub title: Option<String>,
    /// The implementations, in the order of the columns.
    #[serde(rename = "tool", default)]
    pub tools: Vec<Entry>,
}

/// One implementation of a matrix file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Its name: the column's heading; its pages are named after it.
    pub name: String,
    /// The tool: a path relative to the matrix file (when it holds a `/`) or a name on PATH;
    /// none: the profile's `[tool] command`.
    #[serde(default)]
    pub tool: Option<String>,
    /// Its profile, relative to the matrix file; none: no profile.
    #[serde(default)]
    pub profile: Option<PathBuf>,
    /// More arguments of `conform run` (`-j 4`, `--allow-unjudged`).
    #[serde(default)]
    pub args: Vec<String>,
    /// Directories, relative to the matrix file, put first on PATH for its run.
    #[serde(default)]
    pub path: Vec<PathBuf>,
    /// More environment for its run.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The JSON report of an earlier run to read instead (relative to the matrix file).
    #[serde(default)]
    pub report: Option<PathBuf>,
}

/// A matrix file, read, with the directory its paths are relative to.
#[derive(Debug, Clone)]
pub struct Matrix {
    /// What it says.
    pub file: MatrixFile,
    /// Its directory.
    pub base: PathBuf,
}

/// Why a matrix could not be read or written (an implementation whose report is missing is no
/// error: its column says why).
#[derive(Debug, thiserror::Error)]
pub enum MatrixError {
    /// The matrix file could not be read.
    #[error("cannot read the matrix {}: {source}", path.display())]
    Read {
        /// The matrix file.
        path: PathBuf,
        /// Why.
        #[source]
        source: crate::input::InputError,
    },
    /// The matrix file is not a valid matrix.
    #[error("invalid matrix {}: {message}", path.display())]
    Invalid {
        /// The matrix file.
        path: PathBuf,
        /// What is wrong with it, for the person who wrote it.
        message: String,
    },
    /// A page or report could not be written.
    #[error("failed to write {}: {source}", path.display())]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// conform's own binary, which runs each implementation, could not be found.
    #[error("cannot find conform's own binary: {0}")]
    OwnBinary(#[source] std::io::Error),
}

impl Matrix {
    /// Reads and checks a matrix file.
    pub fn load(path: &Path) -> Result<Matrix, MatrixError> {
        let text = crate::input::read_text(path, crate::input::TEXT_LIMIT)
            .map_err(|source| MatrixError::Read { path: path.to_owned(), source })?;
        let invalid = |message: String| MatrixError::Invalid { path: path.to_owned(), message };
        let file: MatrixFile =
            toml::from_str(&text).map_err(|e| invalid(e.message().to_owned()))?;
        if file.tools.is_empty() {
            return Err(invalid("it names no `[[tool]]`".to_owned()));
        }
        let mut slugs = Vec::new();
        for entry in &file.tools {
            if entry.report.is_some()
                && (entry.tool.is_some() || entry.profile.is_some() || !entry.args.is_empty())
            {
                return Err(invalid(format!(
                    "`{}`: a `report` is read, not run: it takes no `tool`, `profile` or `args`",
                    entry.name
                )));
            }
            if entry.report.is_none() && entry.tool.is_none() && entry.profile.is_none() {
                return Err(invalid(format!(
                    "`{}` needs a `tool`, a `profile` or a `report`",
                    entry.name
                )));
            }
            let slug = slug(&entry.name);
            if slugs.contains(&slug) {
                return Err(invalid(format!("two tools are named `{slug}` in their pages' names")));
            }
            slugs.push(slug);
        }
        let base = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let base = std::fs::canonicalize(&base).unwrap_or(base);
        Ok(Matrix { file, base })
    }
}

/// The name of an implementation's files: its name in lowercase letters, digits and `-`.
pub fn slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        match c {
            'a'..='z' | '0'..='9' => out.push(c),
            'A'..='Z' => out.push(c.to_ascii_lowercase()),
            _ if !out.ends_with('-') && !out.is_empty() => out.push('-'),
            _ => {}
        }
    }
    let out = out.trim_end_matches('-').to_owned();
    if out.is_empty() { "tool".to_owned() } else { out }
}

/// An implementation's report: the envelope, read or from its run.
fn report_of(matrix: &Matrix, entry: &Entry, conform: &Path) -> Result<Value, String> {
    if let Some(report) = &entry.report {
        let path = matrix.base.join(report);
        let text = crate::input::read_text(&path, REPORT_LIMIT)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        return serde_json::from_str(&text)
            .map_err(|e| format!("{} is not a JSON report: {e}", path.display()));
    }
    let mut command = Command::new(conform);
    command.arg("run");
    if let Some(tool) = &entry.tool {
        match tool.contains('/') {
            true => command.arg(matrix.base.join(tool)),
            false => command.arg(tool),
        };
    }
    if let Some(profile) = &entry.profile {
        command.arg("--profile").arg(matrix.base.join(profile));
    }
    command.args(["--format", "json", "--evidence", "all"]).args(&entry.args);
    if !entry.path.is_empty() {
        let mut dirs: Vec<PathBuf> = entry.path.iter().map(|d| matrix.base.join(d)).collect();
        dirs.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
        let joined = std::env::join_paths(dirs).map_err(|e| format!("`path`: {e}"))?;
        command.env("PATH", joined);
    }
    command.envs(&entry.env);
    // No conform.toml of the caller's directory is picked up: the entry names its profile.
    let cwd =
        tempfile::tempdir().map_err(|e| format!("failed to make a directory to run in: {e}"))?;
    command
        .current_dir(cwd.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child =
        command.spawn().map_err(|e| format!("failed to run {}: {e}", conform.display()))?;
    // Its progress lines, each after the implementation's name, while its report is read.
    let forward = child.stderr.take().map(|stderr| {
        let name = entry.name.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[{name}] {}", crate::inert::line(&line));
            }
        })
    });
    let out = child.wait_with_output().map_err(|e| format!("failed to wait for conform: {e}"))?;
    if let Some(thread) = forward {
        let _ = thread.join();
    }
    let exit = out.status.code().map_or_else(|| "by a signal".to_owned(), |c| c.to_string());
    let envelope: Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("`conform run` printed no report ({e}; exit {exit})"))?;
    if envelope["data"].is_null() {
        return Err(format!(
            "`conform run` gave no report (exit {exit}): {}",
            envelope.pointer("/error/message").and_then(Value::as_str).unwrap_or("no message")
        ));
    }
    Ok(envelope)
}

/// Runs (or reads) every implementation of `matrix` and writes the pages into `dir`; returns
/// the exit code (see the module docs). `conform` is the binary that runs each tool.
pub fn build(
    matrix: &Matrix,
    dir: &Path,
    conform: &Path,
    log: &mut dyn Write,
) -> Result<u8, MatrixError> {
    std::fs::create_dir_all(dir)
        .map_err(|source| MatrixError::Write { path: dir.to_owned(), source })?;
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|source| MatrixError::Write { path, source })
    };
    let total = matrix.file.tools.len();
    let mut runs: Vec<(String, String, Result<RunView, String>)> = Vec::new();
    for (n, entry) in matrix.file.tools.iter().enumerate() {
        let what = if entry.report.is_some() { "reading its report" } else { "running it" };
        let _ = writeln!(log, "conform matrix: {} ({} of {total}): {what}", entry.name, n + 1);
        let slug = slug(&entry.name);
        let page = format!("{slug}.html");
        let view = match report_of(matrix, entry, conform) {
            Ok(envelope) => {
                write(&format!("{slug}.json"), &format!("{envelope}\n"))?;
                RunView::from_envelope(envelope)
            }
            Err(why) => Err(why),
        };
        match &view {
            Ok(run) => {
                let mut page_of_run = html::run_page(run);
                let mut header = Html::default();
                header.push(Html::link("index.html", "↑ the matrix"));
                header.push(page_of_run.header.clone());
                page_of_run.header = header;
                write(&page, &page_of_run.render())?;
                let _ = writeln!(
                    log,
                    "conform matrix: {}: {} passed, {} failed, {} skipped",
                    entry.name, run.counts.pass, run.counts.fail, run.counts.skip
                );
            }
            Err(why) => {
                let _ = writeln!(log, "conform matrix: {}: no report: {why}", entry.name);
            }
        }
        runs.push((entry.name.clone(), page, view));
    }
    let columns: Vec<Column<'_>> = runs
        .iter()
        .map(|(name, page, run)| Column { name, page, run: run.as_ref().map_err(String::as_str) })
        .collect();
    let title = matrix.file.title.as_deref().unwrap_or("conform matrix");
    write("index.html", &html::matrix::page(title, &columns).render())?;
    let _ = writeln!(log, "conform matrix: wrote {}", dir.join("index.html").display());
    Ok(match runs.iter().all(|(_, _, run)| run.is_ok()) {
        true => exit::SUCCESS,
        false => exit::GENERAL_ERROR,
    })
}

/// The conform binary running now (what runs each implementation).
pub fn this_conform() -> Result<PathBuf, MatrixError> {
    std::env::current_exe().map_err(MatrixError::OwnBinary)
}
