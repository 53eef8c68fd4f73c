//! `files`: a safe list command with pagination (REQ-F-018) that streams JSONL on `--stream`
//! (REQ-O-004) and answers SIGINT mid-stream with one CANCELLED envelope, exit 130 (REQ-F-069).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

use crate::support::{Sandbox, assert_valid};

/// A sandbox with `site/` holding `n` files `page-NN.html` (and one nested file).
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

/// Checks REQ-O-004's shape: items numbered 1.., then exactly one terminal line.
pub fn assert_stream(lines: &[Value], exit: i32) -> &Value {
    let (terminal, items) = lines.split_last().expect("a terminal line");
    for (i, item) in items.iter().enumerate() {
        assert_eq!(item["_seq"], i as u64 + 1, "{item}");
        assert!(item.get("_summary").is_none() && item.get("ok").is_none(), "{item}");
    }
    if terminal["_summary"] == true {
        assert_eq!(exit, 0);
        assert_eq!(terminal["_count"], items.len() as u64);
        assert!(terminal.get("_seq").is_none());
    } else {
        assert_valid("response-envelope.json", terminal);
        assert_eq!(terminal["ok"], false);
        assert_eq!(terminal["meta"]["exit_code"], exit);
        assert_eq!(terminal["meta"]["items_emitted"], items.len() as u64);
    }
    terminal
}

/// Reads `count` lines of a running child's stdout.
fn read_lines(child: &mut Child, count: usize) -> (BufReader<std::process::ChildStdout>, String) {
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut text = String::new();
    for _ in 0..count {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        text.push_str(&line);
    }
    (reader, text)
}

fn tree_of(dir: &Path) -> Vec<String> {
    let mut names = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            names.push(e.path().display().to_string());
            if e.file_type().unwrap().is_dir() {
                pending.push(e.path());
            }
        }
    }
    names.sort();
    names
}

#[test]
fn a_page_carries_its_items_and_pagination() {
    let sandbox = site(5);
    let run = sandbox.run(&["files", "site", "--limit", "3"]);
    assert_eq!(run.exit, 0, "{}", run.stdout);
    let envelope = run.envelope();
    let paths: Vec<&str> =
        envelope["data"].as_array().unwrap().iter().map(|i| i["path"].as_str().unwrap()).collect();
    assert_eq!(paths, ["deep/zz.txt", "page-01.html", "page-02.html"]);
    assert_eq!(envelope["data"][2]["bytes"], 2);
    let pagination = &envelope["meta"]["pagination"];
    assert_eq!(pagination["total"], 6);
    assert_eq!(pagination["returned"], 3);
    assert_eq!(pagination["truncated"], true);
    assert_eq!(pagination["has_more"], true);
    assert_eq!(pagination["next_cursor"], "page-02.html");

    let next = sandbox.run(&["files", "site", "--limit", "3", "--cursor", "page-02.html"]);
    let envelope = next.envelope();
    assert_eq!(envelope["data"][0]["path"], "page-03.html");
    assert_eq!(envelope["meta"]["pagination"]["truncated"], false);
    assert_eq!(envelope["meta"]["pagination"]["next_cursor"], Value::Null);
    assert_eq!(envelope["meta"]["pagination"]["returned"], 3);
}

#[test]
fn the_default_limit_is_100() {
    let sandbox = site(120);
    let run = sandbox.run(&["files", "site"]);
    let envelope = run.envelope();
    assert_eq!(envelope["data"].as_array().unwrap().len(), 100);
    assert_eq!(envelope["meta"]["pagination"]["total"], 121);
    for bad in ["0", "-1", "10001"] {
        let run = sandbox.run(&["files", "site", "--limit", bad]);
        assert_eq!(run.exit, 2, "--limit {bad}: {}", run.stdout);
        assert_eq!(run.code(), "INVALID_LIMIT");
    }
}

#[test]
fn listing_the_working_directory_twice_prints_the_same_bytes_and_writes_nothing() {
    let sandbox = site(4);
    let before = tree_of(sandbox.path());
    for args in [&["files", "--output", "text"][..], &["files", "--limit", "3"]] {
        let mut cmd = sandbox.command(args);
        cmd.env("HOME", sandbox.path()).env_remove("REFTOOL_STATE_DIR");
        let first = cmd.output().unwrap();
        let second = cmd.output().unwrap();
        assert_eq!(first.status.code(), Some(0));
        if args.contains(&"text") {
            assert_eq!(first.stdout, second.stdout, "text output is deterministic");
            assert!(
                String::from_utf8_lossy(&first.stdout).contains("path=site/page-04.html bytes=4\n")
            );
        } else {
            let data = |o: &std::process::Output| {
                serde_json::from_slice::<Value>(&o.stdout).unwrap()["data"].clone()
            };
            assert_eq!(data(&first), data(&second));
        }
    }
    assert_eq!(tree_of(sandbox.path()), before, "files leaves no state in the cwd");
}

#[test]
fn options_mean_the_same_before_and_after_the_positional() {
    let sandbox = site(5);
    let data = |args: &[&str]| {
        let run = sandbox.run(args);
        assert_eq!(run.exit, 0, "{args:?}: {}", run.stdout);
        run.envelope()["data"].clone()
    };
    let after = data(&["files", "site", "--limit", "2"]);
    assert_eq!(after.as_array().unwrap().len(), 2);
    assert_eq!(data(&["files", "--limit", "2", "site"]), after);
    assert_eq!(data(&["--output", "json", "files", "--limit", "2", "site"]), after);
    assert_eq!(data(&["files", "--limit", "2", "site", "--output", "json"]), after);
    assert_eq!(data(&["files", "--limit", "2", "site", "--limit", "2"]), after);
    assert_ne!(data(&["files", "site"]), after);
    let run = sandbox.run(&["files", "--limit", "2", "site", "--limit", "3"]);
    assert_eq!(run.exit, 2);
    assert_eq!(run.code(), "CONFLICTING_OPTION");
    // The global option's alternate value is honoured wherever it stands.
    let text = |args: &[&str]| sandbox.command(args).output().unwrap().stdout;
    let before = text(&["--output", "text", "files", "--limit", "2", "site"]);
    assert!(
        before.starts_with(b"path=deep/zz.txt bytes=4\n"),
        "{}",
        String::from_utf8_lossy(&before)
    );
    assert_eq!(text(&["files", "--output", "text", "--limit", "2", "site"]), before);
    assert_eq!(text(&["files", "--limit", "2", "site", "--output=text"]), before);
}

#[test]
fn a_stream_numbers_its_items_and_ends_with_the_summary() {
    let sandbox = site(5);
    let run = sandbox.command(&["files", "site", "--stream", "--limit", "4"]).output().unwrap();
    let stdout = String::from_utf8(run.stdout).unwrap();
    let lines = lines(&stdout);
    let summary = assert_stream(&lines, run.status.code().unwrap());
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[0]["path"], "deep/zz.txt");
    assert_eq!(summary["_count"], 4);
    assert_eq!(summary["pagination"]["total"], 6);
    assert_eq!(summary["pagination"]["returned"], 4);
    assert_eq!(summary["pagination"]["has_more"], true);
}

#[test]
fn stream_lines_arrive_while_the_work_runs() {
    let sandbox = site(9);
    let started = Instant::now();
    let mut cmd = sandbox.command(&["files", "site", "--stream"]);
    cmd.env("REFTOOL_PACE_MS", "200");
    let mut child = cmd.spawn().unwrap();
    let (mut reader, first) = read_lines(&mut child, 1);
    let first_at = started.elapsed();
    let mut rest = String::new();
    reader.read_to_string(&mut rest).unwrap();
    let total = started.elapsed();
    assert!(child.wait().unwrap().success());
    assert_eq!(lines(&first)[0]["_seq"], 1);
    // 10 items at 200 ms: the first line comes ~0.2 s in, the last ~2 s in.
    assert!(first_at < total / 2, "first line at {first_at:?}, end at {total:?}");
    assert_stream(&lines(&format!("{first}{rest}")), 0);
}

/// `files site --stream` paced at 100 ms an item, sent `signal` once `after` lines were read:
/// its exit code, every line it wrote, and how long it took to end after the signal.
fn signal_mid_stream(
    sandbox: &Sandbox,
    after: usize,
    signal: Signal,
) -> (Option<i32>, Vec<Value>, Duration) {
    let mut cmd = sandbox.command(&["files", "site", "--stream"]);
    cmd.env("REFTOOL_PACE_MS", "100");
    let mut child = cmd.spawn().unwrap();
    let (mut reader, head) = read_lines(&mut child, after);
    let sent = Instant::now();
    kill(Pid::from_raw(i32::try_from(child.id()).unwrap()), signal).unwrap();
    let mut rest = String::new();
    reader.read_to_string(&mut rest).unwrap();
    let code = child.wait().unwrap().code();
    (code, lines(&format!("{head}{rest}")), sent.elapsed())
}

#[test]
fn sigint_mid_stream_ends_it_with_one_cancellation_envelope_and_130() {
    let sandbox = site(25);
    let (code, lines, after_signal) = signal_mid_stream(&sandbox, 3, Signal::SIGINT);
    assert!(after_signal < Duration::from_secs(2), "stopped at once: {after_signal:?}");
    assert_eq!(code, Some(130));
    assert!(lines.len() < 26, "the stream stopped early: {} lines", lines.len());
    let terminal = assert_stream(&lines, 130);
    assert_eq!(terminal["error"]["code"], "CANCELLED");
    assert_eq!(terminal["data"]["partial"], true);
    assert_eq!(terminal["error"]["retryable"], false);
}

#[test]
fn a_stream_of_a_missing_directory_ends_on_its_error() {
    let sandbox = Sandbox::new();
    let run = sandbox.command(&["files", "nowhere", "--stream"]).output().unwrap();
    let code = run.status.code().unwrap();
    assert_eq!(code, 5);
    let lines = lines(&String::from_utf8(run.stdout).unwrap());
    assert_eq!(lines.len(), 1);
    let terminal = assert_stream(&lines, code);
    assert_eq!(terminal["error"]["code"], "DIR_NOT_FOUND");
    assert_eq!(terminal["meta"]["items_emitted"], 0);
}

#[test]
fn sigint_cancels_a_plain_command_too() {
    let sandbox = site(25);
    let mut cmd = sandbox.command(&["files", "site"]);
    cmd.env("REFTOOL_PACE_MS", "100");
    let child = cmd.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    kill(Pid::from_raw(i32::try_from(child.id()).unwrap()), Signal::SIGINT).unwrap();
    let run = sandbox.finish(child.wait_with_output().unwrap());
    assert_eq!(run.exit, 130, "{}", run.stdout);
    run.envelope();
    assert_eq!(run.code(), "CANCELLED");
    assert_eq!(run.json["data"]["partial"], true);
}

#[test]
fn the_manifest_declares_streaming_and_only_files_takes_stream() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["manifest"]);
    let files = &run.envelope()["data"]["commands"]["files"];
    assert_eq!(files["supports_streaming"], true);
    assert_eq!(files["danger_level"], "safe");
    assert!(files["flags"]["stream"].is_object(), "{files}");
    assert!(files["flags"].get("budget").is_none());
    for args in [&["version", "--stream"][..], &["--stream", "version"], &["migrate", "--stream"]] {
        let run = sandbox.run(args);
        assert_eq!(run.exit, 2, "{args:?}");
        run.envelope();
        assert_eq!(run.code(), "STREAMING_NOT_SUPPORTED", "{args:?}");
    }
}

#[test]
fn sigterm_and_the_timeout_end_a_stream_on_their_own_envelope() {
    let sandbox = site(25);
    let (code, lines_seen, _) = signal_mid_stream(&sandbox, 2, Signal::SIGTERM);
    assert_eq!(code, Some(143));
    let terminal = assert_stream(&lines_seen, 143).clone();
    assert_eq!(terminal["error"]["code"], "CANCELLED");

    let run = sandbox
        .command(&["files", "site", "--stream", "--timeout", "450ms"])
        .env("REFTOOL_PACE_MS", "100")
        .output()
        .unwrap();
    let exit = run.status.code().unwrap();
    assert_eq!(exit, 10);
    let lines = lines(&String::from_utf8(run.stdout).unwrap());
    assert_eq!(assert_stream(&lines, exit)["error"]["code"], "TIMEOUT");
}
