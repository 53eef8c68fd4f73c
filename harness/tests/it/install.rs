//! conform installed and in CI: `cargo install` gives a binary that needs nothing beside it,
//! and the CI integrations a vendor copies (the GitHub Action `harness/ci/action.yml`, the
//! GitLab job and the shell step of the README) run conform with arguments conform accepts.
//!
//! The CI files are run, not just read: each shell step of the action runs under bash as
//! GitHub runs it, with a stand-in `conform` (and `cargo`) on PATH that records its argv, and
//! the recorded argv is parsed by conform's own `Cli`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use clap::{CommandFactory, Parser};
use conform::cli::{Cli, Command as Sub};

use crate::support::write_executable;

fn harness_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The workspace's target directory: the one the `conform` under test was built in.
fn target_dir() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_conform"));
    bin.parent().and_then(Path::parent).expect("target/<profile>/conform").to_path_buf()
}

/// One step of the action, as far as these tests need it.
#[derive(Debug, Default)]
struct Step {
    name: String,
    uses: Option<String>,
    condition: Option<String>,
    env: BTreeMap<String, String>,
    with: BTreeMap<String, String>,
    run: Option<String>,
}

/// The action's steps, read line by line: the file keeps to one layout (steps at four spaces,
/// their keys at six, maps and `run: |` blocks at eight), which this reader insists on.
fn action_steps(text: &str) -> Vec<Step> {
    let mut steps: Vec<Step> = Vec::new();
    let mut in_steps = false;
    let mut block: Option<&str> = None; // the key whose lines at eight spaces are being read
    for line in text.lines() {
        if line == "  steps:" {
            in_steps = true;
            continue;
        }
        if !in_steps {
            continue;
        }
        if let Some(name) = line.strip_prefix("    - name: ") {
            steps.push(Step { name: name.to_owned(), ..Step::default() });
            block = None;
            continue;
        }
        let step = steps.last_mut().expect("a step before its keys");
        if let Some(rest) = line.strip_prefix("        ").filter(|_| block.is_some()) {
            match block {
                Some("run") => {
                    let run = step.run.get_or_insert_with(String::new);
                    run.push_str(rest);
                    run.push('\n');
                }
                Some(map) => {
                    let (key, value) = rest.split_once(": ").expect("key: value");
                    let target = if map == "env" { &mut step.env } else { &mut step.with };
                    target.insert(key.to_owned(), value.to_owned());
                }
                None => unreachable!(),
            }
            continue;
        }
        if line.trim_start().starts_with('#') {
            block = None; // a comment between steps
            continue;
        }
        if line.trim().is_empty() {
            if block == Some("run") {
                step.run.get_or_insert_with(String::new).push('\n');
            }
            continue;
        }
        let key_line = line.strip_prefix("      ").expect("a step key at six spaces");
        block = None;
        let (key, value) = key_line.split_once(':').expect("key:");
        let value = value.trim();
        match key {
            "run" => {
                assert_eq!(value, "|", "run blocks are literal blocks");
                block = Some("run");
            }
            "env" => block = Some("env"),
            "with" => block = Some("with"),
            "uses" => step.uses = Some(value.to_owned()),
            "if" => step.condition = Some(value.to_owned()),
            "id" | "shell" => {}
            other => panic!("unexpected step key {other}"),
        }
    }
    steps
}

/// The action's inputs and their defaults.
fn action_inputs(text: &str) -> BTreeMap<String, String> {
    let mut inputs = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut in_inputs = false;
    for line in text.lines() {
        if line == "inputs:" {
            in_inputs = true;
            continue;
        }
        if in_inputs && !line.starts_with(' ') && !line.is_empty() {
            break;
        }
        if !in_inputs {
            continue;
        }
        if let Some(name) = line.strip_prefix("  ").and_then(|l| l.strip_suffix(':'))
            && !name.starts_with(' ')
        {
            current = Some(name.to_owned());
        } else if let Some(default) = line.strip_prefix("    default: ") {
            let default = default.trim_matches('"').to_owned();
            inputs.insert(current.clone().expect("an input before its default"), default);
        }
    }
    inputs
}

fn action_text() -> String {
    std::fs::read_to_string(harness_dir().join("ci/action.yml")).unwrap()
}

/// `${{ inputs.x }}` and the other expressions of a step's env, as GitHub would give them.
fn resolve(value: &str, inputs: &BTreeMap<String, String>, contexts: &[(&str, String)]) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${{ ") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find(" }}").expect("an expression ends") + start;
        let expr = &rest[start + 4..end];
        let resolved = match expr.strip_prefix("inputs.") {
            Some(name) => inputs.get(name).unwrap_or_else(|| panic!("no input {name}")).clone(),
            None => contexts
                .iter()
                .find(|(name, _)| *name == expr)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("an expression the test does not know: {expr}")),
        };
        out.push_str(&resolved);
        rest = &rest[end + 3..];
    }
    out.push_str(rest);
    out
}

/// A step's shell run as GitHub runs a `shell: bash` step, with `bin` first in PATH.
struct StepRun {
    code: Option<i32>,
    stdout: String,
    github_output: String,
    github_step_summary: String,
    github_path: String,
}

fn run_step(
    step: &Step,
    inputs: &BTreeMap<String, String>,
    contexts: &[(&str, String)],
    bin: &Path,
    extra_env: &[(&str, &str)],
    cwd: &Path,
) -> StepRun {
    let files = tempfile::tempdir().unwrap();
    let script = files.path().join("step.sh");
    std::fs::write(&script, step.run.as_deref().expect("a run step")).unwrap();
    let output = files.path().join("output");
    let summary = files.path().join("summary");
    let path_file = files.path().join("path");
    for f in [&output, &summary, &path_file] {
        std::fs::write(f, "").unwrap();
    }
    let mut cmd = Command::new("bash");
    cmd.args(["--noprofile", "--norc", "-eo", "pipefail"]).arg(&script).current_dir(cwd);
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut paths = vec![bin.to_path_buf()];
    paths.extend(std::env::split_paths(&path));
    cmd.env("PATH", std::env::join_paths(paths).unwrap())
        .env("GITHUB_OUTPUT", &output)
        .env("GITHUB_STEP_SUMMARY", &summary)
        .env("GITHUB_PATH", &path_file);
    for (key, value) in &step.env {
        cmd.env(key, resolve(value, inputs, contexts));
    }
    for (key, value) in extra_env {
        cmd.env(key, value);
    }
    let out = cmd.output().unwrap();
    let read = |p: &Path| std::fs::read_to_string(p).unwrap();
    StepRun {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        github_output: read(&output),
        github_step_summary: read(&summary),
        github_path: read(&path_file),
    }
}

/// A directory with stand-ins for `conform` and `cargo`: each writes its argv, NUL-separated,
/// to `$FAKE_ARGV` and exits `$FAKE_EXIT`; `conform` also writes a summary where
/// `--summary-md` points, as the real one does.
fn stand_ins() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let body = "#!/bin/sh\nprintf '%s\\0' \"$@\" > \"$FAKE_ARGV\"\nprev=\nfor a in \"$@\"; do\n  \
                if [ \"$prev\" = --summary-md ]; then printf '### stand-in summary\\n' > \"$a\"; fi\n  \
                prev=$a\ndone\nexit \"${FAKE_EXIT:-0}\"\n";
    write_executable(&dir.path().join("conform"), body);
    write_executable(&dir.path().join("cargo"), body);
    dir
}

fn recorded_argv(path: &Path) -> Vec<String> {
    let raw = std::fs::read(path).unwrap();
    raw.split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8(w.to_vec()).unwrap())
        .collect()
}

/// Parses `conform ARGS` with conform's own parser, and checks every long flag is one of
/// `conform run`'s.
fn parse_as_conform(args: &[String]) -> Cli {
    let run = Cli::command();
    let run = run.find_subcommand("run").expect("conform has `run`");
    let longs: Vec<String> =
        run.get_arguments().filter_map(|a| a.get_long()).map(|l| format!("--{l}")).collect();
    for arg in args.iter().filter(|a| a.starts_with("--")) {
        let flag = arg.split('=').next().unwrap_or(arg);
        assert!(longs.iter().any(|l| l == flag), "`conform run` has no {flag}: {args:?}");
    }
    Cli::try_parse_from(std::iter::once("conform".to_owned()).chain(args.iter().cloned()))
        .unwrap_or_else(|e| panic!("conform refuses {args:?}: {e}"))
}

fn contexts(temp: &Path) -> Vec<(&'static str, String)> {
    vec![
        ("runner.temp", temp.display().to_string()),
        ("github.action_path", harness_dir().join("ci").display().to_string()),
    ]
}

/// The action's `Run conform` step, for several sets of inputs: conform's parser accepts what
/// it runs, the inputs land in the right flags, the summary reaches the job's page and the exit
/// code the step output; then `Verdict` fails the job on every code but 0, naming the code.
#[test]
fn the_action_runs_conform_as_conform_parses_it() {
    let text = action_text();
    let steps = action_steps(&text);
    let defaults = action_inputs(&text);
    let run_step_def = steps.iter().find(|s| s.name == "Run conform").expect("a Run conform step");
    let verdict = steps.iter().find(|s| s.name == "Verdict").expect("a Verdict step");
    let bin = stand_ins();
    let temp = tempfile::tempdir().unwrap();
    let argv_file = temp.path().join("argv");
    let cases: &[&[(&str, &str)]] = &[
        &[],
        &[("tool", "target/release/my tool"), ("profile", "ci/conform.toml")],
        &[("tool", "mytool"), ("args", "--only REQ-F-080 -j 4 --baseline base.toml")],
    ];
    for case in cases {
        let mut inputs = defaults.clone();
        for (k, v) in *case {
            inputs.insert((*k).to_owned(), (*v).to_owned());
        }
        for code in [0, 80, 81, 2, 1, 130] {
            let code_text = code.to_string();
            let env = [("FAKE_ARGV", argv_file.to_str().unwrap()), ("FAKE_EXIT", &code_text)];
            let ran = run_step(
                run_step_def,
                &inputs,
                &contexts(temp.path()),
                bin.path(),
                &env,
                temp.path(),
            );
            assert_eq!(ran.code, Some(0), "the run step records, never fails: {}", ran.stdout);
            assert_eq!(ran.github_output, format!("exit-code={code}\n"));
            assert_eq!(ran.github_step_summary, "### stand-in summary\n");
            let args = recorded_argv(&argv_file);
            let Sub::Run(run) = parse_as_conform(&args).command else {
                panic!("not a run: {args:?}")
            };
            let input = |k: &str| inputs[k].clone();
            assert_eq!(
                run.tool.map(|t| t.into_string().unwrap()).unwrap_or_default(),
                input("tool")
            );
            assert_eq!(
                run.profile.map(|p| p.display().to_string()).unwrap_or_default(),
                input("profile")
            );
            assert_eq!(run.junit.unwrap(), Path::new(&input("junit")));
            assert_eq!(run.summary_md.unwrap(), Path::new(&input("summary")));
            if input("args").contains("-j 4") {
                assert_eq!(
                    (run.jobs, run.only.as_slice()),
                    (Some(4), &["REQ-F-080".to_owned()][..])
                );
                assert_eq!(run.baseline.unwrap(), Path::new("base.toml"));
            }

            let mut contexts = contexts(temp.path());
            contexts.push(("steps.run.outputs.exit-code", code.to_string()));
            let judged = run_step(verdict, &inputs, &contexts, bin.path(), &[], temp.path());
            assert_eq!(judged.code, Some(code), "the verdict exits with conform's code");
            if code != 0 {
                let name = conform::exit::name(u8::try_from(code).unwrap());
                assert!(
                    judged.stdout.contains("::error") && judged.stdout.contains(name),
                    "{code}: {}",
                    judged.stdout
                );
            }
        }
    }
    let upload = steps.iter().find(|s| s.uses.is_some()).expect("an upload step");
    assert!(upload.uses.as_deref().unwrap().starts_with("actions/upload-artifact@"));
    assert_eq!(upload.with.get("path").map(String::as_str), Some("${{ inputs.junit }}"));
    assert_eq!(upload.condition.as_deref(), Some("${{ !cancelled() }}"), "uploaded on failure too");
    let order: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(order.last(), Some(&"Verdict"), "the job fails only after the report is kept");
}

/// The install step: from the action's own checkout by default (the path it names is the
/// `conform` package), from git at `version` when asked, refused without a repository; and
/// conform's bin directory goes on PATH for the next steps.
#[test]
fn the_action_installs_conform_from_its_checkout_or_from_git() {
    let text = action_text();
    let steps = action_steps(&text);
    let defaults = action_inputs(&text);
    let install = steps.iter().find(|s| s.name == "Install conform").expect("an install step");
    let bin = stand_ins();
    let temp = tempfile::tempdir().unwrap();
    let argv_file = temp.path().join("argv");
    let env = [("FAKE_ARGV", argv_file.to_str().unwrap())];
    let root = temp.path().join("conform");

    let ran = run_step(install, &defaults, &contexts(temp.path()), bin.path(), &env, temp.path());
    assert_eq!(ran.code, Some(0), "{}", ran.stdout);
    assert_eq!(ran.github_path, format!("{}/bin\n", root.display()));
    let args = recorded_argv(&argv_file);
    assert_eq!(args[..4], ["install", "--locked", "--root", root.to_str().unwrap()]);
    let at = args.iter().position(|a| a == "--path").expect("--path");
    let package = std::fs::read_to_string(Path::new(&args[at + 1]).join("Cargo.toml")).unwrap();
    assert!(package.contains("name = \"conform\""), "{package}");

    let mut inputs = defaults.clone();
    inputs.insert("version".into(), "v0.1.0".into());
    let ran = run_step(install, &inputs, &contexts(temp.path()), bin.path(), &env, temp.path());
    assert_eq!(ran.code, Some(2), "a version without a repository is refused");
    assert!(ran.stdout.contains("::error"), "{}", ran.stdout);

    inputs.insert("repository".into(), "https://example.org/conform.git".into());
    let ran = run_step(install, &inputs, &contexts(temp.path()), bin.path(), &env, temp.path());
    assert_eq!(ran.code, Some(0), "{}", ran.stdout);
    let args = recorded_argv(&argv_file);
    let git = args.iter().position(|a| a == "--git").expect("--git");
    assert_eq!(args[git + 1..], ["https://example.org/conform.git", "--rev", "v0.1.0", "conform"]);
}

/// The README's GitLab job and shell step: each `conform` line, run by `sh` with the stand-in,
/// gives arguments conform's parser accepts.
#[test]
fn the_readme_ci_snippets_run_conform_as_conform_parses_it() {
    let readme = std::fs::read_to_string(harness_dir().join("../README.md")).unwrap();
    let bin = stand_ins();
    let temp = tempfile::tempdir().unwrap();
    let argv_file = temp.path().join("argv");
    for marker in ["gitlab-ci", "shell-ci"] {
        let begin = format!("<!-- {marker}:begin");
        let start = readme.find(&begin).unwrap_or_else(|| panic!("no {begin} in the README"));
        let end = readme.find(&format!("<!-- {marker}:end -->")).expect("an end marker");
        let block = &readme[start..end];
        let lines: Vec<&str> = block
            .lines()
            .map(|l| l.trim_start().trim_start_matches("- "))
            .filter(|l| l.starts_with("conform "))
            .collect();
        assert!(!lines.is_empty(), "{marker}: no conform line");
        for line in lines {
            let _ = std::fs::remove_file(&argv_file);
            let path = std::env::var_os("PATH").unwrap_or_default();
            let mut paths = vec![bin.path().to_path_buf()];
            paths.extend(std::env::split_paths(&path));
            let out = Command::new("sh")
                .args(["-c", line])
                .env("PATH", std::env::join_paths(paths).unwrap())
                .env("FAKE_ARGV", &argv_file)
                .current_dir(temp.path())
                .output()
                .unwrap();
            assert!(out.status.success(), "{line}: {out:?}");
            let args = recorded_argv(&argv_file);
            let Sub::Run(run) = parse_as_conform(&args).command else { panic!("{line}") };
            assert!(run.junit.is_some() && run.summary_md.is_some(), "{marker}: {line}");
        }
    }
}

/// Out of the edit lane, and alone in CI: `cargo install` may relink `target/debug/conform` under the tests that run it, and takes both cores for a while.
mod alone {
    use super::*;

    /// `cargo install --path harness` into a temporary root, reusing the workspace's target
    /// directory (an incremental build of the dev profile), then that binary, run from an empty
    /// directory with no `scenarios/` or `schemas/` anywhere near it, passes a few of reftool's
    /// scenarios: the catalogue and the schemas are compiled in.
    #[test]
    fn an_installed_conform_needs_nothing_beside_it() {
        let target = target_dir();
        let reftool = target.join("debug/reftool");
        assert!(
            reftool.is_file(),
            "{} is missing: build the workspace first (cargo build --workspace)",
            reftool.display()
        );
        let root = tempfile::tempdir().unwrap();
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let started = Instant::now();
        let out = Command::new(cargo)
            .args(["install", "--debug", "--offline", "--locked", "--quiet", "--path"])
            .arg(harness_dir())
            .arg("--root")
            .arg(root.path())
            .env("CARGO_TARGET_DIR", &target)
            .output()
            .unwrap();
        let took = started.elapsed();
        assert!(
            out.status.success(),
            "cargo install failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        eprintln!("cargo install took {:.1} s", took.as_secs_f64());
        let bin = root.path().join("bin/conform");
        assert!(bin.is_file(), "no {}", bin.display());
        for dir in bin.ancestors().take(3) {
            assert!(!dir.join("scenarios").exists() && !dir.join("schemas").exists(), "{dir:?}");
        }

        let empty = tempfile::tempdir().unwrap();
        let out = Command::new(&bin).arg("--version").current_dir(empty.path()).output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{}\n", conform::cli::version_text())
        );

        let profile = harness_dir().join("../reference-tool/conform.toml");
        let only = [
            "manifest-valid",
            "unknown-flag-is-arg-error",
            "read-probes-answer-one-envelope",
            "budget-flag-exits-14-within-budget",
        ];
        let mut cmd = Command::new(&bin);
        cmd.arg("run").arg(&reftool).arg("--profile").arg(&profile);
        for id in only {
            cmd.args(["--only", id]);
        }
        let out = cmd.args(["--format", "json"]).current_dir(empty.path()).output().unwrap();
        let report = crate::support::stdout_json(&out);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{report:#}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let ran: Vec<(&str, &str)> = report["data"]["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["id"].as_str().unwrap(), s["status"].as_str().unwrap()))
            .collect();
        assert_eq!(ran.len(), only.len(), "{ran:?}");
        assert!(ran.iter().all(|(_, status)| *status == "pass"), "{ran:?}");
        assert_eq!(
            std::fs::read_dir(empty.path()).unwrap().count(),
            0,
            "the run left files behind"
        );
    }
}
