//! The sandbox: its directory, its environment, fixtures, setup commands and the leak sweep,
//! against real processes and a real `/proc`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use conform::exec::{self, Program, Termination};
use conform::sandbox::{self, MARKER_VAR, Sandbox, SandboxError};

fn env_str(env: &BTreeMap<OsString, OsString>, key: &str) -> String {
    env.get(&OsString::from(key))
        .unwrap_or_else(|| panic!("{key} missing"))
        .to_str()
        .unwrap()
        .to_owned()
}

/// Whether `pid` is gone (or a zombie, which holds nothing but its exit status).
fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

#[test]
fn the_layout_exists_and_the_environment_points_into_it() {
    let sandbox = Sandbox::new().unwrap();
    let root = sandbox.root().to_path_buf();
    assert!(root.file_name().unwrap().to_str().unwrap().starts_with("conform-"));
    let env = sandbox.env();
    let keys: Vec<&str> = env.keys().map(|k| k.to_str().unwrap()).collect();
    assert_eq!(
        keys,
        [
            "CONFORM_SANDBOX",
            "HOME",
            "LANG",
            "PATH",
            "TMPDIR",
            "XDG_CACHE_HOME",
            "XDG_CONFIG_HOME",
            "XDG_DATA_HOME",
            "XDG_RUNTIME_DIR",
            "XDG_STATE_HOME",
        ]
    );
    for key in [
        "HOME",
        "TMPDIR",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_RUNTIME_DIR",
        "XDG_STATE_HOME",
    ] {
        let dir = env_str(&env, key);
        assert!(Path::new(&dir).starts_with(&root), "{key}={dir}");
        assert!(Path::new(&dir).is_dir(), "{key}={dir}");
    }
    assert!(sandbox.work().is_dir());
    assert_eq!(env_str(&env, "LANG"), "C.UTF-8");
    assert_eq!(env.get(&OsString::from("PATH")), std::env::var_os("PATH").as_ref());
    let marker = env_str(&env, MARKER_VAR);
    assert_eq!(marker, sandbox.marker());
    assert_eq!(marker.len(), 32);
    assert!(marker.chars().all(|c| c.is_ascii_hexdigit()));

    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(sandbox.runtime_dir()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[test]
fn every_sandbox_has_its_own_directory_and_marker() {
    let a = Sandbox::new().unwrap();
    let b = Sandbox::new().unwrap();
    assert_ne!(a.root(), b.root());
    assert_ne!(a.marker(), b.marker());
}

#[test]
fn a_step_sees_the_sandbox_environment_and_starts_in_work() {
    let sandbox = Sandbox::new().unwrap();
    let outcome = exec::run(&sandbox.invocation(Program::Shell(
        "echo \"$HOME|$TMPDIR|$CONFORM_SANDBOX|$(pwd)|${USER:-nouser}\"".to_owned(),
    )))
    .unwrap();
    let line = String::from_utf8(outcome.stdout.bytes).unwrap();
    let work = sandbox.work().canonicalize().unwrap();
    let expected = format!(
        "{}|{}|{}|{}|nouser\n",
        sandbox.home().display(),
        sandbox.tmp().display(),
        sandbox.marker(),
        work.display()
    );
    assert_eq!(line, expected);
}

#[test]
fn extra_variables_are_added_and_removed_but_the_marker_stays() {
    let mut sandbox = Sandbox::new().unwrap();
    sandbox.set_env("AGENT_CALL_BUDGET_MS", "2000");
    sandbox.set_env("LANG", "de_DE.UTF-8");
    sandbox.set_env(MARKER_VAR, "forged");
    sandbox.remove_env("XDG_RUNTIME_DIR");
    let env = sandbox.env();
    assert_eq!(env_str(&env, "AGENT_CALL_BUDGET_MS"), "2000");
    assert_eq!(env_str(&env, "LANG"), "de_DE.UTF-8");
    assert_eq!(env_str(&env, MARKER_VAR), sandbox.marker());
    assert!(!env.contains_key(&OsString::from("XDG_RUNTIME_DIR")));

    sandbox.remove_env("AGENT_CALL_BUDGET_MS");
    sandbox.remove_env(MARKER_VAR);
    let env = sandbox.env();
    assert!(!env.contains_key(&OsString::from("AGENT_CALL_BUDGET_MS")));
    assert_eq!(env_str(&env, MARKER_VAR), sandbox.marker());

    // Setting a removed default again brings it back.
    sandbox.set_env("XDG_RUNTIME_DIR", "/elsewhere");
    assert_eq!(env_str(&sandbox.env(), "XDG_RUNTIME_DIR"), "/elsewhere");
}

#[test]
fn fixtures_are_copied_into_work() {
    let sandbox = Sandbox::new().unwrap();
    let source = tempfile::tempdir().unwrap();
    std::fs::write(source.path().join("data.csv"), "a,b\n1,2\n").unwrap();
    std::fs::create_dir_all(source.path().join("tree/deeper")).unwrap();
    std::fs::write(source.path().join("tree/deeper/leaf.txt"), "leaf").unwrap();

    let landed = sandbox.copy_in(source.path().join("data.csv"), "input/data.csv").unwrap();
    assert_eq!(landed, sandbox.work().join("input/data.csv"));
    assert_eq!(std::fs::read_to_string(&landed).unwrap(), "a,b\n1,2\n");

    let landed = sandbox.copy_in(source.path().join("tree"), "/tree").unwrap();
    assert_eq!(landed, sandbox.work().join("tree"));
    assert_eq!(
        std::fs::read_to_string(sandbox.work().join("tree/deeper/leaf.txt")).unwrap(),
        "leaf"
    );
    // `..` cannot climb out of work/.
    let landed = sandbox.copy_in(source.path().join("data.csv"), "../../escape.csv").unwrap();
    assert!(landed.starts_with(sandbox.work()), "{}", landed.display());

    let missing = sandbox.copy_in(source.path().join("absent"), "x");
    assert!(matches!(missing, Err(SandboxError::Io { .. })));
}

#[test]
fn setup_commands_run_in_the_sandbox_and_failures_are_errors() {
    let sandbox = Sandbox::new().unwrap();
    let outcome = sandbox
        .run_setup(
            "mkdir -p state && echo ready > state/flag && echo \"$HOME\"",
            Duration::from_secs(30),
        )
        .unwrap();
    assert_eq!(outcome.termination, Termination::Exited(0));
    assert_eq!(std::fs::read_to_string(sandbox.work().join("state/flag")).unwrap(), "ready\n");

    let failed = sandbox.run_setup("echo nope >&2; exit 3", Duration::from_secs(30)).unwrap_err();
    match failed {
        SandboxError::SetupFailed { termination, stderr_tail, .. } => {
            assert_eq!(termination, Termination::Exited(3));
            assert_eq!(stderr_tail, "nope\n");
        }
        other => panic!("unexpected {other:?}"),
    }
    let timed_out = sandbox.run_setup("sleep 30", Duration::from_millis(300)).unwrap_err();
    assert!(matches!(
        timed_out,
        SandboxError::SetupFailed { termination: Termination::TimedOut, .. }
    ));
    assert!(sandbox.sweep().is_empty());
}

#[test]
fn the_sweep_finds_and_kills_a_setsid_sleep_started_in_a_step() {
    let sandbox = Sandbox::new().unwrap();
    let outcome = exec::run(
        &sandbox
            .invocation(Program::Shell("setsid sleep 100 </dev/null >/dev/null 2>&1 &".to_owned())),
    )
    .unwrap();
    assert_eq!(outcome.termination, Termination::Exited(0));

    // `setsid` may still be about to exec when the step ends: wait for the sleep to show up.
    let mut seen = Vec::new();
    for _ in 0..100 {
        seen = sandbox::scan(sandbox.marker());
        if seen.iter().any(|p| p.cmdline == ["sleep", "100"]) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(seen.len(), 1, "{seen:?}");
    let pid = seen[0].pid;
    assert!(!is_dead(pid));

    let leaked = sandbox.sweep();
    assert_eq!(leaked.len(), 1, "{leaked:?}");
    assert_eq!(leaked[0].pid, pid);
    assert_eq!(leaked[0].cmdline, ["sleep", "100"]);
    assert!(is_dead(pid), "the sweep killed it");
    assert!(sandbox.sweep().is_empty());
}

#[test]
fn the_sweep_matches_the_marker_exactly_and_spares_other_sandboxes() {
    // A thread that never enters a sandbox (so never sits in a sandbox's cgroup) starts the
    // lookalike, as a plain child of this process.
    let (to_helper, for_helper) = std::sync::mpsc::channel::<String>();
    let (to_test, from_helper) = std::sync::mpsc::channel();
    let helper = std::thread::spawn(move || {
        let marker = for_helper.recv().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let child = std::process::Command::new("sleep")
            .arg("100")
            .env_clear()
            .env(MARKER_VAR, marker)
            .current_dir(elsewhere.path())
            .spawn()
            .unwrap();
        to_test.send(child).unwrap();
    });
    let mine = Sandbox::new().unwrap();
    let other = Sandbox::new().unwrap();
    // A process whose marker only starts like mine.
    let longer = format!("{}0", mine.marker());
    to_helper.send(longer.clone()).unwrap();
    let mut lookalike = from_helper.recv().unwrap();
    helper.join().unwrap();
    exec::run(
        &other
            .invocation(Program::Shell("setsid sleep 100 </dev/null >/dev/null 2>&1 &".to_owned())),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));

    assert!(mine.sweep().is_empty());
    let found = sandbox::scan(&longer);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].pid, lookalike.id());
    let theirs = other.sweep();
    assert_eq!(theirs.len(), 1, "{theirs:?}");
    assert_eq!(theirs[0].cmdline, ["sleep", "100"]);
    assert!(!is_dead(lookalike.id()), "no sweep touched the lookalike");
    lookalike.kill().unwrap();
    lookalike.wait().unwrap();
}

/// Two sandboxes whose steps run in turn from one thread: each sweep takes its own leftovers,
/// even those that cleared their environment, and only those.
#[test]
fn steps_of_two_sandboxes_from_one_thread_are_told_apart() {
    let first = Sandbox::new().unwrap();
    let second = Sandbox::new().unwrap();
    let tag = unique_digits();
    let _guards: Vec<KillOnDrop> =
        [301, 302, 303].iter().map(|s| KillOnDrop(format!("sleep {s}.{tag}"))).collect();
    let leave = |sandbox: &Sandbox, seconds: u32| {
        let line = format!(
            "setsid env -i sh -c 'exec sleep {seconds}.{tag}' </dev/null >/dev/null 2>&1 &"
        );
        let outcome = exec::run(&sandbox.invocation(Program::Shell(line))).unwrap();
        assert_eq!(outcome.termination, Termination::Exited(0));
    };
    leave(&first, 301);
    leave(&second, 302);
    leave(&first, 303);
    // `setsid` may still be about to exec when the step ends.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let started = || {
        [301, 302, 303].iter().all(|s| !processes_running(&format!("sleep {s}.{tag}")).is_empty())
    };
    while !started() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let argv = |leaks: &[sandbox::LeakedProcess]| {
        let mut all: Vec<String> = leaks.iter().map(|p| p.cmdline.join(" ")).collect();
        all.sort();
        all
    };
    assert_eq!(argv(&second.sweep()), [format!("sleep 302.{tag}")]);
    assert_eq!(argv(&first.sweep()), [format!("sleep 301.{tag}"), format!("sleep 303.{tag}")]);
    for s in [301, 302, 303] {
        assert!(processes_running(&format!("sleep {s}.{tag}")).is_empty());
    }
}

/// Kills (by pid) whatever still runs `argv` when a test ends, passed or not, so that a failing
/// test leaves nothing behind either.
pub struct KillOnDrop(pub String);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for pid in processes_running(&self.0) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Digits no other process's command line holds.
pub fn unique_digits() -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    format!("{}{nanos:09}", std::process::id())
}

/// Every live process (zombies aside) whose command line, words joined by spaces, is `argv`.
pub fn processes_running(argv: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| !is_dead(*pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|raw| {
                let words: Vec<String> = raw
                    .split(|b| *b == 0)
                    .filter(|w| !w.is_empty())
                    .map(|w| String::from_utf8_lossy(w).into_owned())
                    .collect();
                words.join(" ") == argv
            })
        })
        .collect()
}

#[test]
fn dropping_a_sandbox_sweeps_and_removes_the_directory() {
    let sandbox = Sandbox::new().unwrap();
    let root = sandbox.root().to_path_buf();
    let marker = sandbox.marker().to_owned();
    exec::run(
        &sandbox
            .invocation(Program::Shell("setsid sleep 100 </dev/null >/dev/null 2>&1 &".to_owned())),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let before = sandbox::scan(&marker);
    assert_eq!(before.len(), 1, "{before:?}");
    drop(sandbox);
    assert!(!root.exists());
    assert!(sandbox::scan(&marker).is_empty());
    assert!(is_dead(before[0].pid));
}

#[test]
fn a_kept_sandbox_stays_on_disk() {
    let mut sandbox = Sandbox::new().unwrap();
    let root = sandbox.keep().to_path_buf();
    std::fs::write(sandbox.work().join("evidence"), "x").unwrap();
    drop(sandbox);
    assert!(root.join("work/evidence").exists());
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_sandbox_names_its_owner_and_a_kept_one_does_not() {
    let sandbox = Sandbox::new().unwrap();
    let owner = std::fs::read_to_string(sandbox.root().join(sandbox::OWNER_FILE)).unwrap();
    assert!(owner.contains(&format!("\npid {}\n", std::process::id())), "{owner}");
    assert!(owner.contains(&format!("\nmarker {}\n", sandbox.marker())), "{owner}");
    let mut kept = Sandbox::new().unwrap();
    let root = kept.keep().to_path_buf();
    assert!(!root.join(sandbox::OWNER_FILE).exists());
    drop(kept);
    std::fs::remove_dir_all(&root).unwrap();
}

/// An owner file like a real sandbox's, with another pid and start time.
fn owner_file_of(template: &str, pid: u32, start_ticks: u64, marker: &str) -> String {
    template
        .lines()
        .map(|line| match line.split_once(' ') {
            Some(("pid", _)) => format!("pid {pid}"),
            Some(("start", _)) => format!("start {start_ticks}"),
            Some(("marker", _)) => format!("marker {marker}"),
            _ => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// The start time (clock ticks since boot) of a process.
fn start_ticks_of(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = stat.rsplit_once(')').unwrap().1;
    rest.split_whitespace().nth(19).unwrap().parse().unwrap()
}

#[test]
fn stale_sandboxes_of_gone_conforms_are_removed_and_live_ones_stay() {
    let parent = tempfile::tempdir().unwrap();
    let template = {
        let probe = Sandbox::new().unwrap();
        std::fs::read_to_string(probe.root().join(sandbox::OWNER_FILE)).unwrap()
    };
    let me = std::process::id();
    let my_start = start_ticks_of(me);
    // A conform that ran and is gone.
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    let gone_start = start_ticks_of(gone_pid);
    gone.wait().unwrap();
    // A process carrying the stale sandbox's marker: killed with it.
    let stale_marker = "ab".repeat(16);
    let other_marker = "cd".repeat(16);
    let mut straggler = std::process::Command::new("sleep")
        .arg("100")
        .env(MARKER_VAR, &stale_marker)
        .spawn()
        .unwrap();
    let fake = |name: &str, owner: Option<String>| {
        let dir = parent.path().join(name);
        std::fs::create_dir_all(dir.join("work")).unwrap();
        std::fs::write(dir.join("work/evidence"), "x").unwrap();
        if let Some(text) = owner {
            std::fs::write(dir.join(sandbox::OWNER_FILE), text).unwrap();
        }
        dir
    };
    let dead =
        fake("conform-dead01", Some(owner_file_of(&template, gone_pid, gone_start, &stale_marker)));
    // This process's pid, but another start time: a pid reused since its conform died.
    let reused =
        fake("conform-reuse1", Some(owner_file_of(&template, me, my_start + 1, &other_marker)));
    let live = fake("conform-live01", Some(owner_file_of(&template, me, my_start, &other_marker)));
    let unowned = fake("conform-nofile", None);
    let garbled = fake("conform-garbl1", Some("conform sandbox owner v1\npid x\n".into()));
    let elsewhere = tempfile::tempdir().unwrap();
    let target = fake_outside(
        elsewhere.path(),
        &owner_file_of(&template, gone_pid, gone_start, &other_marker),
    );
    std::os::unix::fs::symlink(&target, parent.path().join("conform-link01")).unwrap();

    let removed = sandbox::remove_stale_sandboxes(parent.path());
    let mut paths: Vec<_> = removed.iter().map(|r| r.path.clone()).collect();
    paths.sort();
    assert_eq!(paths, [dead.clone(), reused.clone()]);
    let from_dead = removed.iter().find(|r| r.path == dead).unwrap();
    assert_eq!(from_dead.owner_pid, gone_pid);
    assert_eq!(from_dead.killed, 1, "{removed:?}");
    assert!(sandbox::describe_stale(from_dead).contains("conform-dead01"));
    assert!(!dead.exists() && !reused.exists());
    for kept in [&live, &unowned, &garbled] {
        assert!(kept.join("work/evidence").exists(), "{} was removed", kept.display());
    }
    assert!(target.join("work/evidence").exists(), "the symbolic link was followed");
    assert!(parent.path().join("conform-link01").exists());
    // The straggler was killed (it is this process's child: reap it).
    let status = straggler.wait().unwrap();
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(libc::SIGKILL));
    // A new sandbox in the directory does the same on its own, once.
    let again =
        fake("conform-dead02", Some(owner_file_of(&template, gone_pid, gone_start, &other_marker)));
    let fresh = Sandbox::new_in(parent.path()).unwrap();
    assert!(!again.exists());
    assert!(live.exists());
    drop(fresh);
}

fn fake_outside(dir: &Path, owner: &str) -> std::path::PathBuf {
    let target = dir.join("target");
    std::fs::create_dir_all(target.join("work")).unwrap();
    std::fs::write(target.join("work/evidence"), "x").unwrap();
    std::fs::write(target.join(sandbox::OWNER_FILE), owner).unwrap();
    target
}

/// Where cgroups are in force, a sandbox's group lives exactly as long as the sandbox, and
/// conform's run group as long as any sandbox.
#[test]
fn a_sandbox_cgroup_lives_as_long_as_the_sandbox() {
    let sandbox = Sandbox::new().unwrap();
    let sandbox::Isolation::Cgroup { run_group } = sandbox::isolation() else {
        eprintln!("no cgroups here ({}): nothing to check", sandbox::isolation());
        return;
    };
    let group = run_group.join(format!("s-{}", sandbox.marker()));
    assert!(group.is_dir(), "{}", group.display());
    let own = std::fs::read_to_string("/proc/thread-self/cgroup").unwrap();
    assert!(own.trim_end().ends_with(&format!("/s-{}", sandbox.marker())), "{own}");
    drop(sandbox);
    assert!(!group.exists());
    assert!(!run_group.exists(), "the run group outlived the last sandbox");
}
