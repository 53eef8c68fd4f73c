//! Hostile file-system surroundings, through the real binary: symlinks planted under the names
//! of the files reftool creates for itself (the state directory's write probe, the state
//! database, deploy's temporary archive), and a state directory that is too open or belongs to
//! another user.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::budget::{assert_incomplete, paced};
use crate::support::{Run, Sandbox};

/// Rows in the import fixture: 25 chunks of 100.
const ROWS: u64 = 2500;

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

fn keyed_migrate(sandbox: &Sandbox, key: &str) -> Run {
    if !sandbox.path().join("app.db").exists() {
        sandbox.fresh_db("app.db");
    }
    sandbox.run(&["migrate", "--db", "app.db", "--idempotency-key", key])
}

#[test]
fn a_symlink_planted_as_the_state_directory_probe_is_not_followed() {
    let sandbox = Sandbox::new();
    let state = sandbox.state_dir();
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    let victim = sandbox.path().join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    plant_for_every_pid(&state, &victim, |pid| format!(".probe-{pid}"));
    sandbox.fresh_db("app.db");
    let (run, pid) =
        run_with_pid(&sandbox, &["migrate", "--db", "app.db", "--idempotency-key", "k"]);
    assert!(coming_pids().contains(&pid), "pid {pid} was not covered");
    assert_eq!(run.exit, 0, "{}", run.stdout);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious", "the victim is untouched");
}

#[test]
fn a_symlink_planted_as_the_state_database_is_refused() {
    let sandbox = Sandbox::new();
    let state = sandbox.state_dir();
    std::fs::create_dir(&state).unwrap();
    let victim = sandbox.path().join("victim.db");
    std::fs::write(&victim, "").unwrap();
    std::os::unix::fs::symlink(&victim, state.join("state.db")).unwrap();
    let run = keyed_migrate(&sandbox, "k");
    assert_eq!((run.exit, run.code()), (4, "STATE_DIR_UNSAFE"), "{}", run.stdout);
    run.envelope();
    assert_eq!(std::fs::metadata(&victim).unwrap().len(), 0, "nothing was written through it");
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

/// Every path under `dir` whose mode is not 0700 (directories) or 0600 (anything else), and
/// every symlink.
fn loose_modes(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut loose = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let mode = meta.mode() & 0o777;
        let kind = meta.file_type();
        if kind.is_symlink() {
            loose.push((path, "symlink".into()));
        } else if kind.is_dir() {
            if mode != 0o700 {
                loose.push((path.clone(), format!("{mode:o}")));
            }
            loose.extend(loose_modes(&path));
        } else if mode != 0o600 {
            loose.push((path, format!("{mode:o}")));
        }
    }
    loose
}

fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().mode() & 0o777
}

#[test]
fn a_loose_state_directory_is_tightened_and_every_state_file_is_private() {
    let sandbox = Sandbox::new();
    let state = sandbox.state_dir();
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755)).unwrap();
    // A finished detached job (its worker's log), a paused reader (a file checkpoint), a paused
    // writer, and a job with a spooled stdin.
    sandbox.csv("data.csv", 45_000);
    let detached = paced(&sandbox, &["analyze", "data.csv", "--budget", "300ms"], &[]);
    assert_incomplete(&detached, "running");
    assert_eq!(mode_of(&state), 0o700, "tightened at the first call");
    let id = detached.json["data"]["job_id"].as_str().unwrap().to_owned();
    let waited = sandbox.run(&["job", "wait", &id, "--budget", "0"]);
    assert_eq!(waited.exit, 0, "{}", waited.stdout);
    let text: String = (1..=330_000u32).map(|n| format!("{n}\n")).collect();
    std::fs::write(sandbox.path().join("big.txt"), text).unwrap();
    let reader = paced(&sandbox, &["digest", "big.txt", "--budget", "300ms"], &[]);
    assert_incomplete(&reader, "paused");
    sandbox.csv("rows.csv", ROWS);
    let writer =
        paced(&sandbox, &["import", "rows.csv", "--db", "rows.db", "--budget", "300ms"], &[]);
    assert_incomplete(&writer, "paused");
    let mut cmd = sandbox.command(&["analyze", "-"]);
    cmd.stdin(Stdio::from(std::fs::File::open(sandbox.path().join("rows.csv")).unwrap()));
    let piped = sandbox.run_cmd(cmd);
    assert_eq!(piped.exit, 0, "{}", piped.stdout);

    let checkpoints = state.join("checkpoints");
    assert!(std::fs::read_dir(&checkpoints).unwrap().next().is_some(), "a checkpoint dir");
    let loose = loose_modes(&state);
    assert!(loose.is_empty(), "state paths not private: {loose:#?}");
    assert_eq!(mode_of(&state), 0o700);
}

#[test]
fn loose_state_database_files_are_tightened() {
    let sandbox = Sandbox::new();
    assert_eq!(keyed_migrate(&sandbox, "first").exit, 0);
    let db = sandbox.state_dir().join("state.db");
    // A connection of our own keeps the -wal and -shm in place between the calls.
    let holder = rusqlite::Connection::open(&db).unwrap();
    let _: i64 = holder.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0)).unwrap();
    let files: Vec<PathBuf> = ["state.db", "state.db-wal", "state.db-shm"]
        .iter()
        .map(|name| sandbox.state_dir().join(name))
        .collect();
    for file in &files {
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let run = keyed_migrate(&sandbox, "second");
    assert_eq!(run.exit, 0, "{}", run.stdout);
    for file in &files {
        assert_eq!(mode_of(file), 0o600, "{}", file.display());
    }
    drop(holder);
}

#[test]
fn a_state_directory_of_another_user_is_refused_directly_or_through_a_symlink() {
    let sandbox = Sandbox::new();
    let foreign = sandbox.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::set_permissions(&foreign, std::fs::Permissions::from_mode(0o700)).unwrap();
    nix::unistd::chown(&foreign, Some(65534.into()), Some(65534.into())).unwrap();
    let link = sandbox.path().join("link");
    std::os::unix::fs::symlink(&foreign, &link).unwrap();
    sandbox.fresh_db("app.db");
    for dir in [&foreign, &link] {
        let run = sandbox.run_env(
            &["migrate", "--db", "app.db", "--idempotency-key", "k"],
            &[("REFTOOL_STATE_DIR", dir.to_str().unwrap())],
        );
        assert_eq!((run.exit, run.code()), (4, "STATE_DIR_UNSAFE"), "{}", run.stdout);
        run.envelope();
        assert!(run.json["error"]["message"].as_str().unwrap().contains("65534"), "{}", run.stdout);
    }
    assert_eq!(std::fs::read_dir(&foreign).unwrap().count(), 0, "nothing was written there");
    let version: i64 = rusqlite::Connection::open(sandbox.path().join("app.db"))
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 0, "the work did not run");

    // A symlink to a directory of one's own is fine.
    let own = sandbox.path().join("own");
    std::fs::create_dir(&own).unwrap();
    let own_link = sandbox.path().join("own-link");
    std::os::unix::fs::symlink(&own, &own_link).unwrap();
    let run = sandbox.run_env(
        &["migrate", "--db", "app.db", "--idempotency-key", "k"],
        &[("REFTOOL_STATE_DIR", own_link.to_str().unwrap())],
    );
    assert_eq!(run.exit, 0, "{}", run.stdout);
    assert!(own.join("state.db").is_file());
}

/// The directory of job `id` under the sandbox's state.
fn job_dir_of(sandbox: &Sandbox, id: &str) -> PathBuf {
    std::fs::read_dir(sandbox.state_dir().join("jobs"))
        .unwrap()
        .flatten()
        .map(|instance| instance.path().join(id))
        .find(|dir| dir.is_dir())
        .unwrap_or_else(|| panic!("no directory for {id}"))
}

fn digest_sandbox() -> (Sandbox, String) {
    use sha2::Digest;
    let sandbox = Sandbox::new();
    let text: String = (1..=330_000u32).map(|n| format!("{n}\n")).collect();
    std::fs::write(sandbox.path().join("big.txt"), &text).unwrap();
    let truth = sha2::Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    (sandbox, truth)
}

/// An empty `progress.json` (what a crash can leave of an unsynced write) wedged the job:
/// continue, `--budget 0` and `job cancel` all answered INTERNAL_ERROR without naming the
/// file. Now a look at the job names the file, and the identical invocation replaces the job,
/// says so, resumes from the checkpoint and ends with the true digest.
#[test]
fn an_empty_progress_file_is_named_and_the_identical_invocation_gets_past_it() {
    let (sandbox, truth) = digest_sandbox();
    let first = paced(&sandbox, &["digest", "big.txt", "--budget", "400ms"], &[]);
    assert_incomplete(&first, "paused");
    let id = first.json["data"]["job_id"].as_str().unwrap().to_owned();
    let saved = first.json["data"]["progress"]["done"].as_u64().unwrap();
    let progress = job_dir_of(&sandbox, &id).join("progress.json");
    std::fs::write(&progress, "").unwrap();

    let status = sandbox.run(&["job", "status", &id]);
    assert_eq!((status.exit, status.code()), (1, "JOB_STATE_UNREADABLE"), "{}", status.stdout);
    status.envelope();
    assert!(status.json["error"]["context"]["file"].as_str().unwrap().ends_with("progress.json"));
    assert!(status.json["error"]["suggestion"].as_str().unwrap().contains("job cancel"));

    let again = paced(&sandbox, &["digest", "big.txt", "--budget", "400ms"], &[]);
    assert_incomplete(&again, "paused");
    let warning = &again.json["warnings"][0];
    assert_eq!(warning["code"], "JOB_STATE_UNREADABLE", "{}", again.stdout);
    assert!(warning["message"].as_str().unwrap().contains("progress.json"));
    assert_ne!(again.json["data"]["job_id"], id.as_str(), "a new job replaced it");
    let done = again.json["data"]["progress"]["done"].as_u64().unwrap();
    assert!(done >= saved, "resumed from the checkpoint: {done} < {saved}");
    let end = sandbox.run(&["digest", "big.txt", "--budget", "0"]);
    assert_eq!(end.exit, 0, "{}", end.stdout);
    assert_eq!(end.json["data"]["sha256"], truth.as_str());
}

/// `job cancel` gets past any unreadable file of a paused job (empty, torn, missing), and the
/// identical invocation then starts over and ends with every row once.
#[test]
fn job_cancel_gets_past_unreadable_job_files() {
    let sandbox = Sandbox::new();
    sandbox.csv("rows.csv", ROWS);
    for (i, (file, content)) in
        [("progress.json", Some("")), ("job.json", Some("{\"job_id\": ")), ("job.json", None)]
            .into_iter()
            .enumerate()
    {
        let db = format!("rows{i}.db");
        let args = ["import", "rows.csv", "--db", db.as_str(), "--budget", "300ms"];
        let first = paced(&sandbox, &args, &[]);
        assert_incomplete(&first, "paused");
        let id = first.json["data"]["job_id"].as_str().unwrap().to_owned();
        let path = job_dir_of(&sandbox, &id).join(file);
        match content {
            Some(text) => std::fs::write(&path, text).unwrap(),
            None => std::fs::remove_file(&path).unwrap(),
        }
        let cancel = sandbox.run(&["job", "cancel", &id]);
        assert_eq!(cancel.exit, 0, "{file} {content:?}: {}", cancel.stdout);
        assert_eq!(cancel.json["data"]["state"], "cancelled");
        let again = sandbox.run(&["import", "rows.csv", "--db", db.as_str(), "--budget", "0"]);
        assert_eq!(again.exit, 0, "{}", again.stdout);
        assert_eq!(again.json["data"]["rows"], ROWS);
        let (count, distinct): (i64, i64) = rusqlite::Connection::open(sandbox.path().join(&db))
            .unwrap()
            .query_row("SELECT count(*), count(DISTINCT _line) FROM rows", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!((count, distinct), (ROWS as i64, ROWS as i64), "{file} {content:?}");
    }
}

/// A checkpoint file that does not parse is discarded with a CHECKPOINT_DISCARDED warning
/// naming it, and the work starts over to the true result.
#[test]
fn an_unreadable_checkpoint_is_discarded_with_a_warning_naming_it() {
    let (sandbox, truth) = digest_sandbox();
    let first = paced(&sandbox, &["digest", "big.txt", "--budget", "300ms"], &[]);
    assert_incomplete(&first, "paused");
    let checkpoints = sandbox.state_dir().join("checkpoints");
    let instance = std::fs::read_dir(&checkpoints).unwrap().flatten().next().unwrap().path();
    let file = std::fs::read_dir(instance).unwrap().flatten().next().unwrap().path();
    std::fs::write(&file, "{\"fingerprint\": 3").unwrap();
    let end = sandbox.run(&["digest", "big.txt", "--budget", "0"]);
    assert_eq!(end.exit, 0, "{}", end.stdout);
    assert_eq!(end.json["data"]["sha256"], truth.as_str());
    let warning = &end.json["warnings"][0];
    assert_eq!(warning["code"], "CHECKPOINT_DISCARDED", "{}", end.stdout);
    let name = file.file_name().unwrap().to_str().unwrap();
    assert!(warning["message"].as_str().unwrap().contains(name), "{}", end.stdout);
}
