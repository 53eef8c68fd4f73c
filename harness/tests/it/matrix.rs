//! `conform matrix` on JSON reports (no tool runs): the page of several implementations, a
//! page for each, every cell linking to its run's evidence, a report that cannot be read said
//! in its column, a matrix file that cannot be read refused. The matrix of this repository's
//! implementations from real runs is `tests/suite/reports.rs`' (the `ci` lane).

use std::path::Path;

use conform::outcome::Status;
use conform::report::json;
use conform::scenario::Obligation;

use crate::report::{result, sample_report, sample_results};
use crate::support::{code, conform};

/// Writes the JSON envelope of these results, as `conform run --format json` prints it.
fn write_report(path: &Path, results: Vec<conform::outcome::ScenarioResult>) {
    let envelope = json::envelope(&sample_report(results), json::Evidence::Failures);
    std::fs::write(path, format!("{envelope}\n")).unwrap();
}

#[test]
fn a_matrix_of_reports_links_every_cell_to_its_run() {
    let dir = tempfile::tempdir().unwrap();
    write_report(&dir.path().join("a.json"), sample_results());
    let mut passing: Vec<_> =
        sample_results().into_iter().filter(|r| r.status == Status::Pass).collect();
    // A scenario only this run has: the other column says it is not there.
    passing.push(result("only-in-b", "REQ-F-099", Obligation::Should, Status::Pass));
    write_report(&dir.path().join("b.json"), passing);
    std::fs::write(dir.path().join("broken.json"), "not a report").unwrap();
    let matrix = dir.path().join("matrix.toml");
    let entries = "[[tool]]\nname = \"Tool A\"\nreport = \"a.json\"\n\n[[tool]]\nname = \"tool b\"\nreport = \"b.json\"\n";
    std::fs::write(&matrix, format!("title = \"Two <tools>\"\n{entries}")).unwrap();
    let out_dir = dir.path().join("out");
    let out = conform().arg("matrix").arg(&matrix).arg("--html").arg(&out_dir).output().unwrap();
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let index = std::fs::read_to_string(out_dir.join("index.html")).unwrap();
    assert!(index.contains("<h1>Two &lt;tools&gt;</h1>"), "{index}");
    // Every scenario of either run is a row; each cell of a run that has it links into the
    // run's own page, where that anchor is.
    let page_a = std::fs::read_to_string(out_dir.join("tool-a.html")).unwrap();
    let page_b = std::fs::read_to_string(out_dir.join("tool-b.html")).unwrap();
    for r in sample_results() {
        assert!(index.contains(&format!("<th scope=\"row\"><code>{}</code></th>", r.id)));
        assert!(index.contains(&format!("<a href=\"tool-a.html#s-{}\"", r.id)), "{}", r.id);
        assert!(page_a.contains(&format!("id=\"s-{}\"", r.id)), "{}", r.id);
    }
    assert!(index.contains("<a href=\"tool-b.html#s-only-in-b\""), "{index}");
    assert!(page_b.contains("id=\"s-only-in-b\""));
    assert!(page_a.contains("<a href=\"index.html\">↑ the matrix</a>"), "each page leads back");
    // The claims of each, then the scenarios grouped by requirement; a cell says its status
    // in words, with why (a skip's reason, a finding) as its title.
    assert!(index.contains(">Level 1 (Agent-safe basics)</th>"), "{index}");
    assert!(index.contains("<th scope=\"rowgroup\" colspan=\"4\">REQ-F-099</th>"), "{index}");
    assert!(
        index.contains(
            "title=\"profile names no `detach` role\"><span class=\"status s-skip\">skip</span>"
        ),
        "{index}"
    );
    assert!(index.contains("<span class=\"status s-fail\">fail</span>"), "{index}");
    assert!(index.contains("<td>—</td>"), "a scenario not in a run: {index}");
    // The reports the pages were drawn from are kept beside them.
    assert!(out_dir.join("tool-a.json").is_file() && out_dir.join("tool-b.json").is_file());

    // A report that cannot be read: its column says why, and the exit says so.
    std::fs::write(
        &matrix,
        format!("{entries}[[tool]]\nname = \"broken\"\nreport = \"broken.json\"\n"),
    )
    .unwrap();
    let out = conform().arg("matrix").arg(&matrix).arg("--html").arg(&out_dir).output().unwrap();
    assert_eq!(code(&out), 1, "{}", String::from_utf8_lossy(&out.stderr));
    let index = std::fs::read_to_string(out_dir.join("index.html")).unwrap();
    assert!(index.contains("<td>no report: "), "{index}");
    assert!(index.contains("is not a JSON report"), "{index}");
}

#[test]
fn a_matrix_file_that_cannot_be_read_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (text, says) in [
        (
            "[[tool]]\nname = \"x\"\nreport = \"a.json\"\nfrobnicate = 1\n",
            "unknown field `frobnicate`",
        ),
        ("title = \"nothing\"\n", "names no `[[tool]]`"),
        ("[[tool]]\nname = \"x\"\n", "needs a `tool`, a `profile` or a `report`"),
        (
            "[[tool]]\nname = \"x\"\nreport = \"a.json\"\nprofile = \"p.toml\"\n",
            "a `report` is read, not run",
        ),
        (
            "[[tool]]\nname = \"A b\"\nreport = \"a.json\"\n[[tool]]\nname = \"a-b\"\nreport = \"b.json\"\n",
            "two tools are named `a-b`",
        ),
    ] {
        let matrix = dir.path().join("matrix.toml");
        std::fs::write(&matrix, text).unwrap();
        let out = conform()
            .arg("matrix")
            .arg(&matrix)
            .arg("--html")
            .arg(dir.path().join("out"))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(code(&out), 2, "{text}: {stderr}");
        assert!(stderr.contains(says), "{text}: {stderr}");
    }
    let out =
        conform().args(["matrix", "/nonexistent/matrix.toml", "--html", "out"]).output().unwrap();
    assert_eq!(code(&out), 2);
}
