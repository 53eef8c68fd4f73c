//! Hostile file-system surroundings, through the real binary: symlinks planted under the names
//! of the files reftool creates for itself (the state directory's write probe, the state
//! database, deploy's temporary archive), and a state directory that is too open or belongs to
//! another user.

use std::path::Path;

use crate::support::{Run, Sandbox};

/// The pids a process started now may get: every pid when the kernel has few (each is then
/// covered), else the next 20000 after the last one given.
fn coming_pids() -> std::ops::RangeInclusive<u32> {
    let read = |name: &str| -> u32 {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}")).unwrap().trim().parse().unwrap()
    };
    let max = read("pid_max");
    if max <= 65_536 {
        1..=max
    } else {
        let last = read("ns_last_pid");
        last + 1..=last + 20_000
    }
}

/// Symlinks `name(pid)` in `dir` to `victim` for every pid of [`coming_pids`].
fn plant_for_every_pid(dir: &Path, victim: &Path, name: impl Fn(u32) -> String) {
    for pid in coming_pids() {
        std::os::unix::fs::symlink(victim, dir.join(name(pid))).unwrap();
    }
}

/// Runs `args` in the sandbox: the run and the pid it had.
fn run_with_pid(sandbox: &Sandbox, args: &[&str]) -> (Run, u32) {
    let child = sandbox.command(args).spawn().unwrap();
    let pid = child.id();
    (sandbox.finish(child.wait_with_output().unwrap()), pid)
}

#[test]
fn a_symlink_planted_as_the_deploy_temporary_is_not_followed() {
    let sandbox = Sandbox::new();
    let site = sandbox.path().join("site");
    std::fs::create_dir(&site).unwrap();
    for (name, text) in [("a.txt", "alpha"), ("b.txt", "beta")] {
        std::fs::write(site.join(name), text).unwrap();
    }
    let out = sandbox.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let victim = sandbox.path().join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    plant_for_every_pid(&out, &victim, |pid| format!(".site.rtar.partial-{pid}"));
    let (run, pid) = run_with_pid(&sandbox, &["deploy", "site", "--to", "out/site.rtar"]);
    assert!(coming_pids().contains(&pid), "pid {pid} was not covered");
    assert_eq!(run.exit, 0, "{}", run.stdout);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious", "the victim is untouched");
    let dest = out.join("site.rtar");
    let meta = std::fs::symlink_metadata(&dest).unwrap();
    assert!(meta.file_type().is_file(), "the destination is a file, not a link: {meta:?}");
    assert!(std::fs::read_to_string(&dest).unwrap().starts_with("RTAR 1\n"));
    let left: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| !t.is_symlink()) && e.path() != dest)
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "no temporary file is left: {left:?}");
}
