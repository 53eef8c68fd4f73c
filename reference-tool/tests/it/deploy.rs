//! `deploy`'s archive under a killed worker and beside an existing destination: a partial
//! archive a killed worker left is removed by the next deploy of that destination (and a live
//! one's never), and a replaced destination keeps its permission bits.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::budget::assert_incomplete;
use crate::files::site;
use crate::support::{Run, Sandbox};

/// The partial archives in `dir` (every name with `.partial-`).
fn partials(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".partial-"))
        .map(|e| e.path())
        .collect()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// `deploy site --to out/site.rtar`, paced at 100 ms per file, handed off after 300 ms.
fn handed_off(sandbox: &Sandbox, src: &str) -> Run {
    let run = sandbox.run_env(
        &["deploy", src, "--to", "out/site.rtar", "--budget", "300ms"],
        &[("REFTOOL_PACE_MS", "100")],
    );
    assert_incomplete(&run, "running");
    run
}

fn job_id(run: &Run) -> String {
    run.json["data"]["job_id"].as_str().unwrap().to_owned()
}

/// Kills the worker of `id` and waits until it is gone.
fn kill_worker(sandbox: &Sandbox, id: &str) {
    let workers = sandbox.workers_of(Some(id));
    assert_eq!(workers.len(), 1, "one worker for {id}: {workers:?}");
    kill(Pid::from_raw(workers[0]), Signal::SIGKILL).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !sandbox.workers_of(Some(id)).is_empty() {
        assert!(Instant::now() < deadline, "the killed worker is still there");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_killed_deploys_partial_is_removed_by_the_next_deploy_and_the_destination_keeps_its_mode() {
    let sandbox = site(25);
    let out = sandbox.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let dest = out.join("site.rtar");
    std::fs::write(&dest, "secret\n").unwrap();
    std::fs::set_permissions(&dest, std::fs::Permissions::from_mode(0o600)).unwrap();

    let first = handed_off(&sandbox, "site");
    kill_worker(&sandbox, &job_id(&first));
    let left = partials(&out);
    assert_eq!(left.len(), 1, "the killed worker left its partial archive: {left:?}");
    assert_eq!(mode(&left[0]), 0o600, "a partial is never more readable than the destination");
    assert_eq!(std::fs::read_to_string(&dest).unwrap(), "secret\n", "DEST untouched");

    let again = sandbox.run(&["deploy", "site", "--to", "out/site.rtar", "--budget", "0"]);
    assert_eq!(again.exit, 0, "{}", again.stdout);
    assert!(partials(&out).is_empty(), "left: {:?}", partials(&out));
    assert!(std::fs::read_to_string(&dest).unwrap().starts_with("RTAR 1\n"));
    assert_eq!(mode(&dest), 0o600, "the replaced destination keeps its mode");
}

#[test]
fn a_new_destination_gets_a_new_files_mode() {
    let sandbox = site(3);
    let reference = sandbox.path().join("plain.txt");
    std::fs::write(&reference, "").unwrap();
    let run = sandbox.run(&["deploy", "site", "--to", "site.rtar"]);
    assert_eq!(run.exit, 0, "{}", run.stdout);
    assert_eq!(mode(&sandbox.path().join("site.rtar")), mode(&reference));
}

#[test]
fn a_live_deploys_partial_is_left_alone_by_another_deploy_of_the_destination() {
    let sandbox = site(25);
    std::fs::create_dir(sandbox.path().join("out")).unwrap();
    std::fs::create_dir(sandbox.path().join("other")).unwrap();
    std::fs::write(sandbox.path().join("other/one.txt"), "one").unwrap();
    let first = handed_off(&sandbox, "site");
    assert_eq!(partials(&sandbox.path().join("out")).len(), 1, "the live worker's partial");
    let other = sandbox.run(&["deploy", "other", "--to", "out/site.rtar", "--budget", "0"]);
    assert_eq!(other.exit, 0, "{}", other.stdout);
    let end = sandbox.run(&["job", "wait", &job_id(&first), "--budget", "0"]);
    assert_eq!(end.exit, 0, "the live deploy kept its partial and ended: {}", end.stdout);
    assert_eq!(end.json["data"]["files"], 26);
    assert!(partials(&sandbox.path().join("out")).is_empty());
}
