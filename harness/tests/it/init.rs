//! `conform init` on tools of three kinds (reftool, the Python pyagent, the foreign-framework
//! fixture): the draft names the tool, leaves built-ins out, writes argv arrays, says for every
//! role which command could fill it or why none can, and, unmodified, is a profile `conform run`
//! takes without a TOOL argument.

use std::path::{Path, PathBuf};

use crate::support::{code, conform, stdout_json};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// reftool beside this test binary (`target/<profile>/deps/it-*` -> `target/<profile>/reftool`):
/// a workspace test run builds it.
fn reftool() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap();
    dir.join("reftool").canonicalize().expect("build reftool first (cargo build -p reftool)")
}

/// PATH with the foreign fixture's directory first (its job commands name it bare).
fn path_with_foreign() -> String {
    let dir = workspace().join("tests/fixtures/tools/foreign");
    format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default())
}

/// `conform init TOOL` in `dir`, the draft written to `dir/conform.toml`; returns its text.
fn init(dir: &Path, tool: &str) -> String {
    let out = conform()
        .current_dir(dir)
        .env("PATH", path_with_foreign())
        .args(["init", tool, "--output", "conform.toml"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::read_to_string(dir.join("conform.toml")).unwrap()
}

/// `conform run --profile conform.toml` in `dir`, no TOOL: the draft's `[tool] command` runs.
fn run_draft(dir: &Path) -> (i32, serde_json::Value) {
    let out = conform()
        .current_dir(dir)
        .env("PATH", path_with_foreign())
        .args(["run", "--profile", "conform.toml", "--format", "json", "-j", "4"])
        .output()
        .unwrap();
    (code(&out), stdout_json(&out))
}

/// The candidate argv lines drafted under a role (`#   ["note", "add"]`).
fn candidates(draft: &str, role: &str) -> Vec<String> {
    let head = format!("# Role `{role}` (");
    let Some(start) = draft.find(&head) else { return Vec::new() };
    draft[start..]
        .lines()
        .skip(1)
        .map_while(|l| l.strip_prefix("#   "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn init_on_reftool_offers_every_reference_role_and_its_draft_runs() {
    let dir = tempfile::tempdir().unwrap();
    let tool = reftool();
    let draft = init(dir.path(), tool.to_str().unwrap());
    assert!(draft.contains(&format!("command = [{:?}]", tool.display().to_string())), "{draft}");
    // Each role of the reference profile runs a command the draft offers for it.
    let reference =
        conform::profile::Profile::load(&workspace().join("reference-tool/conform.toml")).unwrap();
    for (name, role) in reference.file.roles.by_name() {
        let command = &role.argv[0];
        let offered = candidates(&draft, name);
        assert!(
            offered.iter().any(|c| c.starts_with(&format!("[{command:?}"))),
            "role {name}: reference runs {command}, draft offers {offered:?}\n{draft}"
        );
    }
    // Built-ins are nobody's role, and the destructive probe is the destructive command.
    assert!(!draft.contains("#   [\"job\""), "{draft}");
    assert!(draft.contains("# destructive = [{ argv = [\"drop-table\", \"<ARGS>\"]"), "{draft}");
    let (exit, report) = run_draft(dir.path());
    // The draft's roles are commented out: its musts go unjudged, and the run says so.
    assert_eq!(exit, i32::from(conform::exit::UNJUDGED), "{report:#}");
}

#[test]
fn init_on_a_python_tool_drafts_a_profile_its_run_takes() {
    let dir = tempfile::tempdir().unwrap();
    let tool = workspace().join("tests/fixtures/tools/pyagent/pyagent.py");
    let draft = init(dir.path(), tool.to_str().unwrap());
    assert!(candidates(&draft, "resume_writer").contains(&"[\"load\"]".to_owned()), "{draft}");
    // The idle watchdog is a background job's: a resume-only command (checksum, load) cannot
    // stall out, so only the detaching count is offered for `stalling`.
    assert_eq!(candidates(&draft, "stalling"), ["[\"count\"]"], "{draft}");
    let (exit, report) = run_draft(dir.path());
    assert!(matches!(exit, 0 | 80 | 82), "{report:#}");
    // The draft is valid: nothing was refused as a profile problem.
    let problems: Vec<&serde_json::Value> = report["data"]["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["reason"].as_str().is_some_and(|r| r.starts_with("profile problem")))
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
}

/// Out of the edit lane (`.config/nextest.toml`): each takes ten seconds or more.
mod heavy {
    use super::*;

    #[test]
    fn init_on_a_foreign_framework_says_which_roles_cannot_exist_and_its_draft_runs() {
        let dir = tempfile::tempdir().unwrap();
        let draft = init(dir.path(), "notes");
        // A bare name stays bare: the profile works wherever `notes` is on PATH.
        assert!(draft.contains("command = [\"notes\"]"), "{draft}");
        // The framework's built-ins (`"builtin": true`) are left out of every role and probe.
        for builtin in ["cleanup", "audit-log", "completion"] {
            assert!(!draft.contains(&format!("[\"{builtin}\"")), "{builtin} offered:\n{draft}");
        }
        assert!(
            candidates(&draft, "idempotent_writer").contains(&"[\"note\", \"add\"]".to_owned())
        );
        assert!(
            draft.contains("# destructive = [{ argv = [\"note\", \"delete\", \"<ARGS>\"]"),
            "{draft}"
        );
        // No command declares interruption: the §79 roles say so instead of inviting a search.
        assert!(
            draft.contains(
                "# Role `detach`: none can fill it (no command declares `interruption` with `detach: true`: its scenarios are not applicable)."
            ),
            "{draft}"
        );
        // The plain_slow role gets the command that declares a --timeout of its own, not a quick
        // listing that ends before any timeout.
        assert_eq!(candidates(&draft, "plain_slow"), ["[\"export\"]"], "{draft}");
        let (exit, report) = run_draft(dir.path());
        // Its one true defect (job status exits 3) needs the async role, commented out here, and
        // so do the other musts that need roles: unjudged, not failed.
        assert_eq!(exit, i32::from(conform::exit::UNJUDGED), "{report:#}");
        let claims = report["data"]["claims"].as_array().unwrap();
        let interruption = claims.iter().find(|c| c["claim"] == "interruption").unwrap();
        assert_eq!(interruption["verdict"], "not-applicable", "{interruption:#}");
    }
}
