//! reftool's whole catalogue, run once per test run and read by every test that judges it.
//!
//! Three kinds of tests judge conform's verdicts on the whole catalogue against reftool: the
//! mutant matrix's `reftool::correct` row (nothing fails), and the per-scenario cases of
//! `tests/suite/reftool_catalogue.rs` (this scenario passes). Each used to run conform itself:
//! the row once, the cases once per scenario, ninety-odd runs that each calibrated their roles
//! afresh, most of the suite's time on CI's two cores. They ask one question of one run, so
//! [`reftool_whole_run`] runs it once and hands each the same report.
//!
//! Under nextest every test is a process of its own, so the run is shared through files:
//! the first test to ask claims `<target>/<profile>/shared-runs/<run id>/reftool-whole/` (an
//! atomic `create_dir`), runs conform and writes its report there; the others wait for it and
//! read it. The key is nextest's `NEXTEST_RUN_ID`, so a new `cargo nextest run` always runs
//! conform afresh, never reads a verdict of an earlier build. Without nextest (`cargo test`,
//! one process) the run is kept in memory for the process.
//!
//! A retry is a test's second attempt (`NEXTEST_ATTEMPT` above 1): there the caller runs its
//! own conform instead ([`first_attempt`]), so a verdict that a loaded machine bent once is
//! judged again by a run of its own, as before the run was shared.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::{workspace_bin, workspace_root};

/// Variables of the caller's environment that would change what conform or reftool does.
pub const CALLER_ENV: &[&str] = &[
    "AGENT_CALL_BUDGET_MS",
    "REFTOOL_FAULT",
    "REFTOOL_STATE_DIR",
    "REFTOOL_INSTANCE_ID",
    "REFTOOL_PACE_MS",
    "PYAGENT_FAULT",
    "CI",
];

/// conform's parallelism in the whole run: reftool is native and mostly sleeps.
pub const REFTOOL_CONFORM_JOBS: &str = "8";

/// A bound on one conform run; conform bounds every step itself, this only keeps a broken
/// harness from hanging the tests.
pub const RUN_LIMIT: Duration = Duration::from_secs(300);

/// What one conform run printed.
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// conform's exit code (`None`: ended by a signal).
    pub code: Option<i32>,
    /// Its stdout: with `--format json`, the report.
    pub stdout: String,
    pub stderr: String,
    /// How long the run took (the run's own time, also when another test made it).
    pub elapsed: Duration,
}

/// Whether this is the test's first attempt (always, outside nextest).
pub fn first_attempt() -> bool {
    std::env::var("NEXTEST_ATTEMPT").map_or(true, |a| a.trim() == "1")
}

/// `conform run reftool --profile reference-tool/conform.toml -j 8 --format json`: the whole
/// catalogue, run once per test run (see the module's docs).
pub fn reftool_whole_run() -> RunOutput {
    let args = reftool_whole_run_args();
    match std::env::var("NEXTEST_RUN_ID") {
        Ok(run_id) if !run_id.is_empty() => shared("reftool-whole", &run_id, &args),
        _ => {
            static IN_PROCESS: OnceLock<RunOutput> = OnceLock::new();
            IN_PROCESS.get_or_init(|| run_conform(&args, &scratch_dir("in-process"))).clone()
        }
    }
}

/// The arguments of the whole run.
pub fn reftool_whole_run_args() -> Vec<String> {
    let text = |p: &Path| p.to_str().expect("workspace paths are UTF-8").to_owned();
    vec![
        "run".into(),
        text(&workspace_bin("reftool")),
        "--profile".into(),
        text(&workspace_root().join("reference-tool").join("conform.toml")),
        "-j".into(),
        REFTOOL_CONFORM_JOBS.into(),
        "--format".into(),
        "json".into(),
    ]
}

/// `conform <args>` in `cwd` with stdin closed and the caller's variables removed, bounded by
/// [`RUN_LIMIT`].
pub fn run_conform(args: &[String], cwd: &Path) -> RunOutput {
    std::fs::create_dir_all(cwd).unwrap_or_else(|e| panic!("{}: {e}", cwd.display()));
    let stdout_path = cwd.join("stdout");
    let stderr_path = cwd.join("stderr");
    let create =
        |p: &Path| std::fs::File::create(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut command = Command::new(workspace_bin("conform"));
    command
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(create(&stdout_path))
        .stderr(create(&stderr_path));
    for name in CALLER_ENV {
        command.env_remove(name);
    }
    let started = Instant::now();
    let mut child = command.spawn().unwrap_or_else(|e| panic!("conform does not start: {e}"));
    let status = loop {
        if let Some(status) = child.try_wait().unwrap_or_else(|e| panic!("waiting on conform: {e}"))
        {
            break status;
        }
        if started.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("conform {} ran longer than {RUN_LIMIT:?}", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    RunOutput {
        code: status.code(),
        stdout: read(&stdout_path),
        stderr: read(&stderr_path),
        elapsed: started.elapsed(),
    }
}

/// Where the shared runs live: beside the binaries of this build.
fn shared_root() -> PathBuf {
    let bin = workspace_bin("conform");
    bin.parent().expect("the binary has a directory").join("shared-runs")
}

/// A fresh directory of this process's own.
fn scratch_dir(what: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    shared_root().join(format!("{what}-{}-{nanos}", std::process::id()))
}

/// The run `name` of the test run `run_id`: made by the first test that asks, read by the
/// others. The files: `runner` (the pid of the test that runs it), `cwd/` (conform's working
/// directory, its stdout and stderr), and `result` (exit code and time), written last.
fn shared(name: &str, run_id: &str, args: &[String]) -> RunOutput {
    let run_dir = shared_root().join(run_id);
    std::fs::create_dir_all(&run_dir).unwrap_or_else(|e| panic!("{}: {e}", run_dir.display()));
    forget_old_runs(run_id);
    let dir = run_dir.join(name);
    let result = dir.join("result");
    match std::fs::create_dir(&dir) {
        Ok(()) => {
            std::fs::write(dir.join("runner"), std::process::id().to_string())
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            let out = run_conform(args, &dir.join("cwd"));
            let code = out.code.map_or_else(|| "signal".to_owned(), |c| c.to_string());
            let partial = dir.join("result.partial");
            std::fs::write(&partial, format!("{code}\n{}\n", out.elapsed.as_millis()))
                .and_then(|()| std::fs::rename(&partial, &result))
                .unwrap_or_else(|e| panic!("{}: {e}", result.display()));
            out
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let waited = Instant::now();
            while !result.is_file() {
                let runner = std::fs::read_to_string(dir.join("runner")).unwrap_or_default();
                let runner_gone = runner
                    .trim()
                    .parse::<u32>()
                    .is_ok_and(|pid| !Path::new("/proc").join(pid.to_string()).exists());
                // The test that ran it was killed (a timeout, a crash): run it here instead.
                if runner_gone && !result.is_file() {
                    return run_conform(args, &scratch_dir(name));
                }
                if waited.elapsed() > RUN_LIMIT + Duration::from_secs(60) {
                    panic!("the shared run {} never ended", dir.display());
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let text = std::fs::read_to_string(&result).unwrap_or_default();
            let mut lines = text.lines();
            let code = lines.next().and_then(|c| c.parse().ok());
            let millis = lines.next().and_then(|m| m.parse().ok()).unwrap_or(0);
            let read = |p: PathBuf| std::fs::read_to_string(p).unwrap_or_default();
            RunOutput {
                code,
                stdout: read(dir.join("cwd").join("stdout")),
                stderr: read(dir.join("cwd").join("stderr")),
                elapsed: Duration::from_millis(millis),
            }
        }
        Err(e) => panic!("{}: {e}", dir.display()),
    }
}

/// Removes the shared runs of earlier test runs (a day old or more: a run in progress beside
/// this one keeps its own).
fn forget_old_runs(run_id: &str) {
    let Ok(entries) = std::fs::read_dir(shared_root()) else { return };
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(24 * 3600));
        if old && entry.file_name() != run_id {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
