//! Running reftool in a sandbox and checking what it prints.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

/// A temporary home for one test: state directory and files. Dropping it kills every
/// detached worker still running on one of its jobs, so no test leaves a process behind.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        for pid in self.workers() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// What one run gave.
#[derive(Debug)]
pub struct Run {
    pub exit: i32,
    pub stdout: String,
    pub stderr: String,
    /// The envelope, with the sandbox path replaced by `[TMP]`.
    pub json: Value,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox { dir: tempfile::tempdir().unwrap() }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn state_dir(&self) -> PathBuf {
        self.path().join("state")
    }

    /// reftool with a clean environment pointing into the sandbox; stdin closed.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("reftool"));
        cmd.args(args)
            .current_dir(self.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.path())
            .env("REFTOOL_STATE_DIR", self.state_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.run_cmd(self.command(args))
    }

    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut cmd = self.command(args);
        for (name, value) in env {
            cmd.env(name, value);
        }
        self.run_cmd(cmd)
    }

    pub fn run_cmd(&self, mut cmd: Command) -> Run {
        let output = cmd.output().unwrap();
        self.finish(output)
    }

    pub fn finish(&self, output: Output) -> Run {
        let stdout = String::from_utf8(output.stdout).unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        let tmp = self.path().to_str().unwrap();
        let json = if stdout.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&stdout.replace(tmp, "[TMP]"))
                .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}): {stdout:?}"))
        };
        Run { exit: output.status.code().unwrap_or(-1), stdout, stderr, json }
    }

    /// The pids of the detached workers running jobs of this sandbox (their argv names a job
    /// directory inside it), optionally only those of one job.
    pub fn workers_of(&self, job_id: Option<&str>) -> Vec<i32> {
        let needle = self.path().to_string_lossy().into_owned();
        let mut pids = Vec::new();
        let Ok(entries) = std::fs::read_dir("/proc") else { return pids };
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if text.contains("__worker")
                && text.contains(&needle)
                && job_id.is_none_or(|id| text.contains(id))
            {
                pids.push(pid);
            }
        }
        pids
    }

    /// Every worker of this sandbox.
    pub fn workers(&self) -> Vec<i32> {
        self.workers_of(None)
    }

    /// A CSV file `n,square` with `rows` data rows (about 15 bytes each).
    pub fn csv(&self, name: &str, rows: u64) -> PathBuf {
        let mut text = String::from("n,square\n");
        for n in 1..=rows {
            text.push_str(&format!("{n},{}\n", n * n));
        }
        let path = self.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A SQLite database with one table, schema version 0.
    pub fn fresh_db(&self, name: &str) -> PathBuf {
        let path = self.path().join(name);
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE existing (x INTEGER)").unwrap();
        path
    }
}

fn schema_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas")
}

fn validator(name: &str) -> &'static jsonschema::Validator {
    static ENVELOPE: OnceLock<jsonschema::Validator> = OnceLock::new();
    static MANIFEST: OnceLock<jsonschema::Validator> = OnceLock::new();
    static INCOMPLETE: OnceLock<jsonschema::Validator> = OnceLock::new();
    static DESCRIPTOR: OnceLock<jsonschema::Validator> = OnceLock::new();
    let cell = match name {
        "response-envelope.json" => &ENVELOPE,
        "manifest-response.json" => &MANIFEST,
        "incomplete-response.json" => &INCOMPLETE,
        "job-descriptor.json" => &DESCRIPTOR,
        other => panic!("no validator for {other}"),
    };
    cell.get_or_init(|| {
        let path = schema_dir().join(name);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("schema {} is missing: {e}", path.display()));
        let schema: Value = serde_json::from_str(&text).unwrap();
        jsonschema::validator_for(&schema).unwrap()
    })
}

/// Panics unless `instance` is valid against `schemas/<name>`.
pub fn assert_valid(name: &str, instance: &Value) {
    let errors: Vec<String> = validator(name)
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{name}: {errors:#?}\n{instance:#}");
}

impl Run {
    /// The envelope is one JSON object, valid, consistent with the exit code.
    pub fn envelope(&self) -> &Value {
        assert_valid("response-envelope.json", &self.json);
        assert_eq!(self.json["meta"]["exit_code"], self.exit, "meta.exit_code is the exit");
        assert_eq!(self.json["ok"], self.exit == 0);
        assert!(self.json["meta"]["timeout_ms"].is_u64(), "meta.timeout_ms always: {}", self.json);
        assert_eq!(self.stdout.matches('\n').count(), 1, "one line on stdout: {:?}", self.stdout);
        &self.json
    }

    pub fn code(&self) -> &str {
        self.json["error"]["code"].as_str().unwrap_or("")
    }
}

/// Snapshots an envelope with the volatile fields redacted.
#[macro_export]
macro_rules! snapshot {
    ($name:expr, $run:expr) => {{
        let envelope = $run.envelope().clone();
        insta::assert_json_snapshot!($name, envelope, {
            ".meta.duration_ms" => "[duration_ms]",
            ".data.etag" => "[etag]",
        });
    }};
}
