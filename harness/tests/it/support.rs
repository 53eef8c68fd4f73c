//! Shared helpers of the scenario-engine tests: paths of the binary, fixtures and schemas.

use std::path::{Path, PathBuf};
use std::process::Output;

/// The `conform` binary of this build.
pub fn conform() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_conform"))
}

/// The fake tool fixture.
pub fn faketool() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tools/faketool")
}

/// The workspace's `schemas/` directory.
pub fn schema(file: &str) -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A draft-07 validator of a schema file.
pub fn validator(file: &str) -> jsonschema::Validator {
    jsonschema::draft7::new(&schema(file))
        .unwrap_or_else(|e| panic!("{file} does not compile: {e}"))
}

/// The errors of `instance` against a validator, one line each.
pub fn errors(v: &jsonschema::Validator, instance: &serde_json::Value) -> Vec<String> {
    v.iter_errors(instance).map(|e| format!("{}: {e}", e.instance_path())).collect()
}

/// stdout parsed as one JSON document.
pub fn stdout_json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The exit code (panics on a signal).
pub fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or_else(|| panic!("conform died by a signal: {:?}", out.status))
}

/// The status word of a scenario in a JSON report.
pub fn status_of<'a>(report: &'a serde_json::Value, id: &str) -> &'a str {
    report["data"]["scenarios"]
        .as_array()
        .and_then(|all| all.iter().find(|s| s["id"] == id))
        .and_then(|s| s["status"].as_str())
        .unwrap_or_else(|| panic!("no scenario {id} in the report"))
}

/// A profile for the fake tool in a temporary directory; `extra_env` goes to `[tool] env`.
pub fn fake_profile(dir: &Path, extra_env: &str) -> PathBuf {
    let path = dir.join("conform.toml");
    let text = format!(
        "[tool]\nenv = {{ FAKETOOL_PACE_MS = \"150\"{extra_env} }}\n\n\
         [roles.resume_reader]\nargv = [\"count\", \"--units\", \"10\"]\n\n\
         [kit]\nread = [[\"greet\"], [\"manifest\"]]\ninvalid = [[\"greet\", \"--bogus\"]]\n\
         destructive = [{{ argv = [\"wipe\"], dry_run_flag = \"--dry-run\" }}]\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Whether a process still runs: a zombie (killed, not yet reaped by whoever inherited it) does
/// not count. Waits up to two seconds for a dying process to go.
pub fn alive(pid: &str) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                stat.rsplit_once(')').map(|(_, rest)| rest.trim_start().chars().next())
            })
            .flatten();
        let running = matches!(state, Some(s) if s != 'Z' && s != 'X');
        if !running || std::time::Instant::now() >= deadline {
            return running;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Writes a script (or any file) and makes it executable: the small tools the tests run.
pub fn write_executable(path: &Path, body: impl AsRef<[u8]>) {
    std::fs::write(path, body).unwrap();
    let mut perms = std::fs::metadata(path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(path, perms).unwrap();
}

/// A profile's `[kit.argument_order]`: `files --limit 3` moved around `--output json|text`, with
/// `site` as the positional (the shape of reftool's own).
pub const ARGUMENT_ORDER_TOML: &str = r#"[kit.argument_order]
command_path = ["files"]
local_args = ["--limit", "3"]
global_flag = "--output"
value = "json"
alternate_value = "text"
positional = "site"
"#;

/// pyagent, the independent Python implementation in the workspace's fixtures, and a copy of
/// its profile (its fixtures beside it) edited by `edit`: the temporary directory holding the
/// copy, the tool, the profile.
pub fn pyagent_with(edit: impl Fn(&str) -> String) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tools/pyagent");
    let profile = root.join("fixtures/conform.toml");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let fixtures = std::fs::read_dir(profile.parent().expect("the profile's directory"))
        .expect("pyagent's fixtures");
    for entry in fixtures {
        let path = entry.expect("a fixture").path();
        if path.is_file() && path.file_name() != profile.file_name() {
            let name = path.file_name().expect("a file name");
            std::fs::copy(&path, dir.path().join(name)).expect("a fixture copied");
        }
    }
    let text = std::fs::read_to_string(&profile).expect("pyagent's profile");
    let copy = dir.path().join("conform.toml");
    std::fs::write(&copy, edit(&text)).expect("the profile's copy written");
    (dir, root.join("pyagent.py"), copy)
}
