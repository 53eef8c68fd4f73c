//! A sandbox for the faulty binary: a temporary directory as cwd, HOME and state directory.

use std::path::Path;
use std::process::{Command, Stdio};

use reftool_faults::{FAULT_ENV, Fault};
use serde_json::Value;

/// See the module docs.
pub struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox { dir: tempfile::tempdir().unwrap() }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `reftool-faulty` with `fault` (or none), a clean environment pointing into the
    /// sandbox, stdin closed.
    pub fn command(&self, fault: Option<Fault>, args: &[&str]) -> Command {
        let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("reftool-faulty"));
        cmd.args(args)
            .current_dir(self.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.path())
            .env("REFTOOL_STATE_DIR", self.path().join("state"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(fault) = fault {
            cmd.env(FAULT_ENV, fault.name());
        }
        cmd
    }
}

/// Exit code and stdout of a call, with `fault` (or none).
pub fn call(sandbox: &Sandbox, fault: Option<Fault>, args: &[&str]) -> (i32, String) {
    let out = sandbox.command(fault, args).output().unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8(out.stdout).unwrap())
}

/// A sandbox with `site/`: `n` pages and `deep/zz.txt`.
pub fn site(n: usize) -> Sandbox {
    let sandbox = Sandbox::new();
    let site = sandbox.path().join("site");
    std::fs::create_dir_all(site.join("deep")).unwrap();
    for i in 1..=n {
        std::fs::write(site.join(format!("page-{i:02}.html")), "x".repeat(i)).unwrap();
    }
    std::fs::write(site.join("deep/zz.txt"), "deep").unwrap();
    sandbox
}

/// The JSON lines of a stream.
pub fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect()
}
