//! Hostile input against the job runtime, through the real binary: job ids that try to walk
//! out of the state directory or are empty, huge or not UTF-8; budgets negative, huge or
//! malformed, by flag and by environment; idempotency keys of 100 kB or full of shell syntax.
//! Every answer is one envelope with a clear code, nothing panics, and nothing is written
//! outside the sandbox's state directory (the sandbox tree is snapshotted, and `/tmp` is
//! checked for anything named after the inputs).

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use crate::support::{Run, Sandbox};

/// A well-formed job id that no job has.
const UNKNOWN_ID: &str = "job_0123456789abcdef0123456789abcdef";

/// Every path under `dir` (recursively) with its size, sorted; `skip` is left out.
fn tree(dir: &Path, skip: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.starts_with(skip) {
                continue;
            }
            let meta = entry.metadata().ok();
            out.push((
                path.clone(),
                meta.as_ref().map_or(0, |m| if m.is_dir() { 0 } else { m.len() }),
            ));
            if meta.is_some_and(|m| m.is_dir()) {
                out.extend(tree(&path, skip));
            }
        }
    }
    out.sort();
    out
}

/// Names in `/tmp` that contain `needle`.
fn tmp_names_with(needle: &str) -> Vec<String> {
    std::fs::read_dir("/tmp")
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains(needle))
                .collect()
        })
        .unwrap_or_default()
}

/// A marker unique to this test process and call, to name things in `/tmp` after.
fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("refrel-{name}-{}-{nanos}", std::process::id())
}

/// No panic report, no backtrace on stderr; one envelope on stdout.
fn assert_composed(run: &Run, what: &str) {
    for sign in ["panicked", "stack backtrace", "RUST_BACKTRACE"] {
        assert!(!run.stderr.contains(sign), "{what}: {sign} on stderr:\n{}", run.stderr);
    }
    run.envelope();
}

fn run_os(sandbox: &Sandbox, args: &[&OsStr]) -> Run {
    let mut cmd = sandbox.command(&[]);
    cmd.args(args);
    sandbox.run_cmd(cmd)
}

#[test]
fn hostile_job_ids_are_argument_errors_and_walk_nowhere() {
    let sandbox = Sandbox::new();
    let marker = unique("jobid");
    let before = tree(sandbox.path(), &sandbox.state_dir());
    let walk_to_tmp = format!("../../../../../../tmp/{marker}");
    let ten_kb = "a".repeat(10 * 1024);
    let ten_kb_job = format!("job_{}", "0".repeat(10 * 1024));
    let hostile: Vec<OsString> = vec![
        "../../etc/passwd".into(),
        walk_to_tmp.clone().into(),
        format!("{UNKNOWN_ID}/../../../../tmp/{marker}").into(),
        "".into(),
        ten_kb.into(),
        ten_kb_job.into(),
        OsString::from_vec(b"job_\xff\xfe0123456789abcdef0123456789abcd".to_vec()),
        OsString::from_vec(b"\xc3\x28".to_vec()),
        format!("{UNKNOWN_ID}\n").into(),
        UNKNOWN_ID.to_uppercase().replace("JOB_", "job_").into(),
        "job_*".into(),
        "-".into(),
    ];
    for verb in ["wait", "status", "cancel"] {
        for id in &hostile {
            let shown = id.to_string_lossy().chars().take(48).collect::<String>();
            let run = run_os(&sandbox, &[OsStr::new("job"), OsStr::new(verb), id]);
            assert_composed(&run, &format!("job {verb} {shown:?}"));
            assert_eq!(run.exit, 2, "job {verb} {shown:?}: {}", run.stdout);
            assert_eq!(run.json["error"]["phase"], "validation", "{shown:?}");
            assert!(
                run.stdout.len() < 16 * 1024,
                "the answer stays bounded: {} bytes",
                run.stdout.len()
            );
        }
        // The same with a budget on wait, and a well-formed unknown id: NOT_FOUND.
        let run = sandbox.run(&["job", verb, UNKNOWN_ID]);
        assert_composed(&run, verb);
        assert_eq!((run.exit, run.code()), (5, "JOB_NOT_FOUND"), "{}", run.stdout);
    }
    let run = sandbox.run(&["job", "wait", &walk_to_tmp, "--budget", "1s"]);
    assert_eq!(run.exit, 2, "{}", run.stdout);

    let after = tree(sandbox.path(), &sandbox.state_dir());
    assert_eq!(before, after, "nothing outside the state dir changed");
    assert!(tmp_names_with(&marker).is_empty(), "/tmp gained {:?}", tmp_names_with(&marker));
}

#[test]
fn hostile_instance_ids_are_argument_errors() {
    let sandbox = Sandbox::new();
    let marker = unique("instance");
    let before = tree(sandbox.path(), &sandbox.state_dir());
    let walk = format!("../../../../tmp/{marker}");
    let long = "i".repeat(10 * 1024);
    for instance in [walk.as_str(), "", ".hidden", "a/b", long.as_str(), "a b"] {
        let by_flag = sandbox.run(&["job", "status", UNKNOWN_ID, "--instance-id", instance]);
        assert_composed(&by_flag, instance);
        assert_eq!(by_flag.exit, 2, "--instance-id {:?}: {}", instance.get(..20), by_flag.stdout);
        let by_env =
            sandbox.run_env(&["job", "status", UNKNOWN_ID], &[("REFTOOL_INSTANCE_ID", instance)]);
        assert_composed(&by_env, instance);
        assert_eq!(
            by_env.exit,
            2,
            "REFTOOL_INSTANCE_ID={:?}: {}",
            instance.get(..20),
            by_env.stdout
        );
    }
    assert_eq!(before, tree(sandbox.path(), &sandbox.state_dir()));
    assert!(tmp_names_with(&marker).is_empty());
}

#[test]
fn hostile_budget_flags_are_argument_errors_and_start_nothing() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.path().join("small.csv"), "n,square\n1,1\n2,4\n").unwrap();
    let negative = ["-1", "-0", "-5s", "-500ms", "-9223372036854775808"];
    let huge = [
        "18446744073709551615",
        "18446744073709551616",
        "18446744073709551615ms",
        "99999999999999999999999999s",
        "1000000000h",
        "9999999999999999m",
    ];
    let malformed = ["soon", "", "1.5s", "1e3", "5 s", "0x10", "+5", "5ms5", "∞", "NaN", "5sec"];
    for budget in negative.iter().chain(&huge).chain(&malformed) {
        for args in [
            vec!["analyze", "small.csv", "--budget", budget],
            vec!["digest", "small.csv", "--budget", budget],
            vec!["job", "wait", UNKNOWN_ID, "--budget", budget],
        ] {
            let run = sandbox.run(&args);
            assert_composed(&run, budget);
            assert_eq!(run.exit, 2, "{args:?}: {}", run.stdout);
            assert_eq!(run.code(), "INVALID_DURATION", "{args:?}");
            assert_eq!(run.json["error"]["phase"], "validation");
        }
    }
    // Non-UTF-8 budget bytes.
    let run = run_os(
        &sandbox,
        &[
            OsStr::new("analyze"),
            OsStr::new("small.csv"),
            OsStr::new("--budget"),
            OsStr::from_bytes(b"5\xffs"),
        ],
    );
    assert_composed(&run, "non-UTF-8 budget");
    assert_eq!(run.exit, 2, "{}", run.stdout);
    let jobs = sandbox.state_dir().join("jobs");
    let started: Vec<_> = tree(&jobs, Path::new("/nonexistent"))
        .into_iter()
        .filter(|(p, _)| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("job_")))
        .collect();
    assert!(started.is_empty(), "no job was started: {started:?}");
}

#[test]
fn a_hostile_budget_variable_warns_and_the_default_applies() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.path().join("small.csv"), "n,square\n1,1\n2,4\n").unwrap();
    for value in [
        "-1",
        "-500",
        "soon",
        "",
        "1.5",
        "0x10",
        "18446744073709551616",
        "99999999999999999999999999",
        "1000000000000",
    ] {
        let run = sandbox.run_env(&["analyze", "small.csv"], &[("AGENT_CALL_BUDGET_MS", value)]);
        assert_composed(&run, value);
        assert_eq!(run.exit, 0, "AGENT_CALL_BUDGET_MS={value:?}: {}", run.stdout);
        assert_eq!(run.json["meta"]["budget_ms"], 30_000, "{value:?}");
        let codes: Vec<&str> = run.json["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|w| w["code"].as_str())
            .collect();
        assert_eq!(codes, ["BUDGET_ENV_INVALID"], "{value:?}: {}", run.stdout);
    }
    // Non-UTF-8 bytes in the variable.
    let mut cmd = sandbox.command(&["analyze", "small.csv"]);
    cmd.env("AGENT_CALL_BUDGET_MS", OsStr::from_bytes(b"5\xff"));
    let run = sandbox.run_cmd(cmd);
    assert_composed(&run, "non-UTF-8 variable");
    assert_eq!(run.exit, 0, "{}", run.stdout);
    assert_eq!(run.json["meta"]["budget_ms"], 30_000);
    assert_eq!(run.json["warnings"][0]["code"], "BUDGET_ENV_INVALID");
}

#[test]
fn an_idempotency_key_of_100_kb_gets_a_clear_answer_and_writes_nothing_outside() {
    let sandbox = Sandbox::new();
    std::fs::write(sandbox.path().join("rows.csv"), "n,label\n1,one\n2,two\n").unwrap();
    let marker = unique("key");
    let before = tree(sandbox.path(), &sandbox.state_dir());
    let key = format!("{marker}{}", "k".repeat(100 * 1024));
    let run = sandbox.run(&["import", "rows.csv", "--db", "r.db", "--idempotency-key", &key]);
    assert_composed(&run, "100 kB key");
    assert!(run.stdout.len() < 64 * 1024, "the answer does not echo the key whole");
    let after = tree(sandbox.path(), &sandbox.state_dir());
    match run.exit {
        2 => {
            assert_eq!(run.json["error"]["phase"], "validation", "{}", run.stdout);
            assert_eq!(before, after, "a refused call writes nothing");
        }
        0 => {
            // Accepted: the only new thing outside the state dir is the target database.
            let new: Vec<_> =
                after.iter().filter(|e| !before.contains(e)).map(|(p, _)| p).collect();
            assert!(
                new.iter().all(|p| p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("r.db"))),
                "{new:?}"
            );
        }
        other => panic!("a 100 kB key: exit {other}, neither refused nor accepted: {}", run.stdout),
    }
    assert!(tmp_names_with(&marker).is_empty(), "/tmp gained {:?}", tmp_names_with(&marker));
}

#[test]
fn shell_syntax_in_a_key_or_a_file_name_stays_data_in_the_continue_command() {
    let sandbox = Sandbox::new();
    let mut text = String::from("n,label\n");
    for n in 1..=1500 {
        text.push_str(&format!("{n},row {n}\n"));
    }
    let file = "rows $(touch pwned-file) `touch pwned-tick`.csv";
    std::fs::write(sandbox.path().join(file), text).unwrap();
    let key = "k'\"$(touch pwned-key);touch pwned-semi\\";
    let run = sandbox.run_env(
        &["import", file, "--db", "r.db", "--idempotency-key", key, "--budget", "200ms"],
        &[("REFTOOL_PACE_MS", "50")],
    );
    assert_composed(&run, "shell syntax");
    if run.exit == 2 {
        // A key with such characters may be refused; then the file name alone.
        assert_eq!(run.json["error"]["phase"], "validation");
    }
    let first = if run.exit == 2 {
        sandbox.run_env(
            &["import", file, "--db", "r.db", "--budget", "200ms"],
            &[("REFTOOL_PACE_MS", "50")],
        )
    } else {
        run
    };
    assert_eq!(first.exit, 14, "{}\n{}", first.stdout, first.stderr);
    let mut line = first.json["data"]["continue_command"].as_str().unwrap().to_owned();
    let mut last = first;
    for _ in 0..100 {
        let mut sh = std::process::Command::new("sh");
        sh.arg("-c").arg(&line).current_dir(sandbox.path()).env_clear();
        for (k, v) in sandbox.command(&[]).get_envs() {
            if let Some(v) = v {
                sh.env(k, v);
            }
        }
        sh.env("REFTOOL_PACE_MS", "50").stdin(std::process::Stdio::null());
        last = sandbox.finish(sh.output().unwrap());
        if last.exit != 14 {
            break;
        }
        line = last.json["data"]["continue_command"].as_str().unwrap().to_owned();
    }
    assert_eq!(last.exit, 0, "{}\n{}", last.stdout, last.stderr);
    assert_eq!(last.json["data"]["rows"], 1500);
    let pwned: Vec<_> = std::fs::read_dir(sandbox.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("pwned"))
        .collect();
    assert!(pwned.is_empty(), "the shell ran part of an argument: {pwned:?}");
}
