//! The reports a person reads, end to end on the tools of this repository.
//!
//! - The terminal report: against reftool without a profile it is at most 40 lines, progress
//!   lines included, and says the profile's absence once; against reftool with its profile
//!   the report fits a screen (25 lines).
//! - The HTML page (`--html`) and the matrix (`conform matrix`), opened in a real browser:
//!   headless Chromium (Debian's `chromium`, which `.ci/run` installs), driven over the DevTools
//!   protocol by `tests/browser/check-page.mjs` (node, no package). The page must render
//!   without an error of the page's (an exception, a console error, a load its
//!   Content-Security-Policy refused), every failing scenario must have its timeline, every
//!   picture its text alternative, every link in the page its target, and a link into a folded
//!   scenario must show it. Each page is also checked by `html-validate` (npm, installed by
//!   `.ci/run` into `target/ci-node`). The screenshots and the pages are kept in
//!   `target/ci-artifacts/` for CI to keep.
//!
//! A browser test skips only when the browser cannot be installed on the machine, which
//! `.ci/run` then says by setting `CONFORM_NO_BROWSER` (and `CONFORM_NO_HTML_VALIDATOR` for
//! the validator) to the reason; without the browser and without that variable it fails,
//! saying how to install it. They run in nextest's `ci` lane.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use conform_workspace::{workspace_bin, workspace_root};
use serde_json::Value;

/// Variables of the caller's environment that would change what conform or reftool does.
const CALLER_ENV: &[&str] =
    &["AGENT_CALL_BUDGET_MS", "REFTOOL_FAULT", "REFTOOL_STATE_DIR", "REFTOOL_INSTANCE_ID", "CI"];

/// `conform <args>` in a fresh directory (no `conform.toml` of the caller's is picked up).
fn conform(args: &[&std::ffi::OsStr]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(workspace_bin("conform"));
    command.args(args).current_dir(dir.path());
    for name in CALLER_ENV {
        command.env_remove(name);
    }
    command.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Against a tool without a profile, the report (stdout) fits 30 lines and the progress on
/// stderr is one line per scenario that ran and one for all the skipped ones (once 313 lines
/// in all, 262 of them one reason three times): the profile's absence is said once, with
/// what to do, not once per scenario.
#[test]
fn without_a_profile_the_terminal_report_says_each_thing_once() {
    let reftool = workspace_bin("reftool");
    let out = conform(&["run".as_ref(), reftool.as_os_str()]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let report = stdout.lines().count();
    assert!(report <= 30, "{report} lines of report:\n{stdout}");
    let ran = stderr.lines().filter(|l| l.contains("] pass ") || l.contains("] fail ")).count();
    let skipped = stderr.lines().filter(|l| l.contains("] skip ")).count();
    assert_eq!(skipped, 1, "{stderr}");
    assert!((1..=20).contains(&ran), "{stderr}");
    assert_eq!(stderr.lines().count(), ran + skipped, "{stderr}");
    assert!(stdout.contains("no profile: "), "{stdout}");
    assert!(stdout.contains(&format!("`conform init {}` drafts one", reftool.display())));
    let sentence = "no profile (conform.toml), so no";
    assert!(!stdout.contains(sentence) && !stderr.contains(sentence), "{stderr}{stdout}");
    // `-v` gives every reason in full, each once.
    let verbose = conform(&["run".as_ref(), reftool.as_os_str(), "-v".as_ref()]);
    let stdout = text(&verbose.stdout);
    let detach = "no profile (conform.toml), so no `detach` role;";
    assert_eq!(stdout.matches(detach).count(), 1, "{stdout}");
}

/// The pages in a real browser: out of the edit lane (`.config/nextest.toml`), which has no
/// browser to count on.
mod heavy {
    use super::*;

    /// Where the artifacts go: `target/ci-artifacts/<what>`.
    pub fn artifacts(what: &str) -> PathBuf {
        let dir = workspace_root().join("target").join("ci-artifacts").join(what);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Chromium, or `None` when `.ci/run` could not install it (and said why).
    fn chromium() -> Option<PathBuf> {
        let candidates = [
            std::env::var_os("CONFORM_CHROMIUM").map(PathBuf::from),
            Some(PathBuf::from("/usr/bin/chromium")),
            Some(PathBuf::from("/usr/bin/chromium-browser")),
        ];
        if let Some(found) = candidates.into_iter().flatten().find(|p| p.is_file()) {
            return Some(found);
        }
        match std::env::var("CONFORM_NO_BROWSER") {
            Ok(why) => {
                eprintln!("SKIPPED: no Chromium on this machine and it cannot be installed: {why}");
                None
            }
            Err(_) => panic!(
                "no Chromium at /usr/bin/chromium: install it (`apt-get install -y chromium`, as .ci/run does) or, where it cannot be installed, set CONFORM_NO_BROWSER to the reason to skip this test"
            ),
        }
    }

    /// html-validate, or `None` when `.ci/run` could not install it (and said why).
    fn html_validate() -> Option<PathBuf> {
        let installed = workspace_root().join("target/ci-node/node_modules/.bin/html-validate");
        let found =
            std::env::var_os("CONFORM_HTML_VALIDATE").map(PathBuf::from).or(Some(installed));
        if let Some(found) = found.filter(|p| p.is_file()) {
            return Some(found);
        }
        match std::env::var("CONFORM_NO_HTML_VALIDATOR") {
            Ok(why) => {
                eprintln!("SKIPPED: no html-validate and it cannot be installed: {why}");
                None
            }
            Err(_) => panic!(
                "no html-validate at target/ci-node/node_modules/.bin: install it (`npm install --prefix target/ci-node html-validate@10`, as .ci/run does) or, where it cannot be installed, set CONFORM_NO_HTML_VALIDATOR to the reason to skip this check"
            ),
        }
    }

    /// The pages pass html-validate's recommended rules.
    pub fn validate(pages: &[PathBuf]) {
        let Some(validator) = html_validate() else { return };
        let out = Command::new(validator).args(pages).output().unwrap();
        assert!(
            out.status.success(),
            "html-validate refuses the page:\n{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }

    /// What the browser saw of `page` ([`check-page.mjs`]'s report), with the screenshots of
    /// these elements taken, and these fragments opened; `None` when skipped.
    pub fn in_browser(page: &Path, shots: &[(&str, PathBuf)], reveal: &[&str]) -> Option<Value> {
        in_browser_with(page, shots, reveal, None)
    }

    /// [`in_browser`], and the page's first screen kept as `top`.
    pub fn in_browser_with(
        page: &Path,
        shots: &[(&str, PathBuf)],
        reveal: &[&str],
        top: Option<&Path>,
    ) -> Option<Value> {
        let chromium = chromium()?;
        let script = workspace_root().join("tests/browser/check-page.mjs");
        let mut command = Command::new("node");
        command.arg(script).arg("--chromium").arg(chromium).arg("--page").arg(page);
        for (selector, file) in shots {
            command.arg("--shot").arg(format!("{selector}={}", file.display()));
        }
        for fragment in reveal {
            command.args(["--reveal", fragment]);
        }
        if let Some(top) = top {
            command.arg("--top").arg(top);
        }
        let out = command.output().unwrap();
        assert!(out.status.success(), "check-page failed:\n{}", text(&out.stderr));
        let seen: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("check-page said no JSON ({e}):\n{}", text(&out.stdout)));
        assert_eq!(seen["errors"], Value::Array(Vec::new()), "the page raised errors: {seen:#}");
        let checks = &seen["checks"];
        for (what, key) in [
            ("failing scenarios without a drawn timeline", "withoutTimeline"),
            ("pictures without a text alternative", "unlabelled"),
            ("links to nowhere", "nowhere"),
            ("ids given twice", "duplicateIds"),
        ] {
            assert_eq!(checks[key], Value::Array(Vec::new()), "{what}: {seen:#}");
        }
        for revealed in seen["revealed"].as_array().unwrap() {
            assert_eq!(revealed["shown"], true, "a link into a folded scenario hides it: {seen:#}");
        }
        for (shot, (_, file)) in seen["shots"].as_array().unwrap().iter().zip(shots) {
            assert!(shot.get("error").is_none(), "{shot}");
            assert!(std::fs::metadata(file).unwrap().len() > 1000, "{}", file.display());
        }
        Some(seen)
    }

    /// A check that cannot fail is a defect: on a broken page (a script the page's policy
    /// refuses, a failure without its timeline, a picture without its words, a link to nowhere,
    /// an id twice) the browser check sees each.
    #[test]
    fn the_browser_check_sees_a_broken_page() {
        let Some(chromium) = chromium() else { return };
        let dir = tempfile::tempdir().unwrap();
        let page = dir.path().join("broken.html");
        std::fs::write(
            &page,
            "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'\"><title>broken</title></head><body>\
             <article class=\"failure\"><h3 id=\"x\">FAIL x</h3><p>no timeline</p></article>\
             <svg role=\"img\" aria-labelledby=\"nothing\" width=\"10\" height=\"10\"></svg>\
             <a href=\"#nowhere\">here</a><p id=\"x\">twice</p><script>throw new Error('boom')</script></body></html>",
        )
        .unwrap();
        let script = workspace_root().join("tests/browser/check-page.mjs");
        let out = Command::new("node")
            .arg(script)
            .arg("--chromium")
            .arg(chromium)
            .arg("--page")
            .arg(&page)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
        let errors = seen["errors"].to_string();
        assert!(errors.contains("Content Security Policy"), "the refused script: {seen:#}");
        let checks = &seen["checks"];
        assert_eq!(checks["withoutTimeline"], serde_json::json!(["FAIL x"]), "{seen:#}");
        assert_eq!(checks["unlabelled"].as_array().unwrap().len(), 1, "{seen:#}");
        assert_eq!(checks["nowhere"], serde_json::json!(["nowhere"]), "{seen:#}");
        assert_eq!(checks["duplicateIds"], serde_json::json!(["x"]), "{seen:#}");
        // And the validator refuses it.
        if let Some(validator) = html_validate() {
            let out = Command::new(validator).arg(&page).output().unwrap();
            assert!(!out.status.success(), "html-validate let a broken page through");
            assert!(text(&out.stdout).contains("no-dup-id"), "{}", text(&out.stdout));
        }
    }

    /// A copy of reftool's profile with this fault in `[tool.env]`.
    fn faulty_profile(fault: &str, dir: &Path) -> PathBuf {
        let original = workspace_root().join("reference-tool").join("conform.toml");
        let mut profile: toml::Table =
            toml::from_str(&std::fs::read_to_string(&original).unwrap()).unwrap();
        let tool = profile.entry("tool").or_insert_with(|| toml::Table::new().into());
        let env =
            tool.as_table_mut().unwrap().entry("env").or_insert_with(|| toml::Table::new().into());
        env.as_table_mut().unwrap().insert("REFTOOL_FAULT".into(), fault.into());
        crate::fixtures_paths::absolute_fixtures(&mut profile, original.parent().unwrap());
        let path = dir.join("conform.toml");
        std::fs::write(&path, toml::to_string(&profile).unwrap()).unwrap();
        path
    }

    /// A §79 fault of reftool's, on its page: the failing scenario comes first, with its
    /// timeline drawn (the call that held its caller past its bound, hatched), its text
    /// alternative and its evidence; the screenshot of it is kept.
    #[test]
    fn a_fault_s_failing_timeline_renders_in_a_browser() {
        let dir = tempfile::tempdir().unwrap();
        let out_dir = artifacts("html");
        let mut pages = Vec::new();
        for (fault, scenario) in [
            ("job-wait-blocks", "job-wait-holds-its-caller-to-the-budget"),
            ("env-beats-flag", "budget-flag-beats-env"),
        ] {
            let profile = faulty_profile(fault, dir.path());
            let page = out_dir.join(format!("{fault}.html"));
            let out = conform(&[
                "run".as_ref(),
                workspace_bin("reftool-faulty").as_os_str(),
                "--profile".as_ref(),
                profile.as_os_str(),
                "--only".as_ref(),
                scenario.as_ref(),
                "--html".as_ref(),
                page.as_os_str(),
            ]);
            assert_eq!(out.status.code(), Some(80), "{}{}", text(&out.stdout), text(&out.stderr));
            let html = std::fs::read_to_string(&page).unwrap();
            let start = html.find(&format!("<div id=\"s-{scenario}\">")).unwrap();
            let article = &html[start..start + html[start..].find("</article>").unwrap()];
            assert!(article.contains("<svg class=\"timeline\" role=\"img\""), "{article}");
            if fault == "job-wait-blocks" {
                // The wait that held its caller: past its bound, hatched, and said so.
                assert!(article.contains("class=\"over\""), "{article}");
                assert!(article.contains("finding [elapsed]"), "{article}");
            }
            let shot = out_dir.join(format!("{fault}.png"));
            let seen = in_browser(&page, &[("article.failure", shot)], &[]);
            if let Some(seen) = seen {
                assert_eq!(seen["checks"]["failures"], 1, "{seen:#}");
            }
            pages.push(page);
        }
        validate(&pages);
    }

    /// Whole runs (reftool's catalogue, the matrix of every implementation): alone in CI.
    mod alone {
        use super::*;

        /// reftool's whole catalogue with its profile: the terminal report fits a screen, and the
        /// page of the whole run validates and renders; its size is kept beside it.
        #[test]
        fn reftool_s_whole_run_fits_a_screen_and_its_page_renders() {
            let out_dir = artifacts("html");
            let page = out_dir.join("reftool.html");
            let reftool = workspace_bin("reftool");
            let profile = workspace_root().join("reference-tool").join("conform.toml");
            let out = conform(&[
                "run".as_ref(),
                reftool.as_os_str(),
                "--profile".as_ref(),
                profile.as_os_str(),
                "-j".as_ref(),
                "8".as_ref(),
                "--html".as_ref(),
                page.as_os_str(),
            ]);
            let stdout = text(&out.stdout);
            assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
            assert!(stdout.lines().count() <= 25, "{} lines:\n{stdout}", stdout.lines().count());
            let size = std::fs::metadata(&page).unwrap().len();
            std::fs::write(out_dir.join("reftool.size"), format!("{size} bytes\n")).unwrap();
            // One page for the whole catalogue stays an artifact one opens: under 2 MB.
            assert!(size < 2_000_000, "the page of the whole catalogue weighs {size} bytes");
            validate(std::slice::from_ref(&page));
            let shot = out_dir.join("reftool-summary.png");
            if let Some(seen) = in_browser(
                &page,
                &[("#summary", shot)],
                &["s-job-wait-holds-its-caller-to-the-budget"],
            ) {
                assert_eq!(seen["checks"]["failures"], 0, "{seen:#}");
                assert!(seen["checks"]["pictures"].as_u64().unwrap() >= 90, "{seen:#}");
            }
        }

        /// The matrix of this repository's implementations (`matrix.toml`), from real runs: every
        /// page validates and renders, every cell links to a scenario of its run's page.
        #[test]
        fn the_matrix_of_this_repository_renders() {
            let out_dir = artifacts("matrix");
            // matrix.toml as it is, its paths made absolute, reftool this build's.
            let shipped = workspace_root().join("matrix.toml");
            let mut file: toml::Table =
                toml::from_str(&std::fs::read_to_string(&shipped).unwrap()).unwrap();
            for tool in file["tool"].as_array_mut().unwrap() {
                let tool = tool.as_table_mut().unwrap();
                for key in ["tool", "profile"] {
                    if let Some(path) = tool.get(key).and_then(|v| v.as_str()) {
                        let absolute = match path.ends_with("/reftool") {
                            true => workspace_bin("reftool"),
                            false => workspace_root().join(path),
                        };
                        tool.insert(key.into(), absolute.to_str().unwrap().into());
                    }
                }
                if let Some(dirs) = tool.get_mut("path").and_then(|v| v.as_array_mut()) {
                    for dir in dirs {
                        *dir =
                            workspace_root().join(dir.as_str().unwrap()).to_str().unwrap().into();
                    }
                }
            }
            let dir = tempfile::tempdir().unwrap();
            let matrix = dir.path().join("matrix.toml");
            std::fs::write(&matrix, toml::to_string(&file).unwrap()).unwrap();
            let mut command = Command::new(workspace_bin("conform"));
            command.arg("matrix").arg(&matrix).arg("--html").arg(&out_dir);
            for name in CALLER_ENV {
                command.env_remove(name);
            }
            let out = command.output().unwrap();
            assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
            let index = out_dir.join("index.html");
            let html = std::fs::read_to_string(&index).unwrap();
            let mut pages = vec![index.clone()];
            for name in ["reftool", "pyagent", "notes-foreign-framework", "kit-good"] {
                let page = out_dir.join(format!("{name}.html"));
                let text = std::fs::read_to_string(&page).unwrap();
                for link in html.split(&format!("<a href=\"{name}.html#")).skip(1) {
                    let anchor = &link[..link.find('"').unwrap()];
                    assert!(text.contains(&format!("id=\"{anchor}\"")), "{name}.html#{anchor}");
                }
                pages.push(page);
            }
            // reftool passes everything it is asked.
            assert!(!html.contains("no report"), "{html}");
            validate(&pages);
            let shot = out_dir.join("index.png");
            let top = out_dir.join("index-top.png");
            let reveal = ["s-job-wait-holds-its-caller-to-the-budget"];
            if let Some(seen) = in_browser_with(&index, &[("table.matrix", shot)], &[], Some(&top))
            {
                assert!(seen["checks"]["matrixCells"].as_u64().unwrap() > 300, "{seen:#}");
                // A cell's link opens the scenario folded in its run's page.
                in_browser(&out_dir.join("reftool.html"), &[], &reveal);
            }
        }
    }
}
