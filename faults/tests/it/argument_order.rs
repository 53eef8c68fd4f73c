//! The argument-order and stream faults each change reftool's behaviour the way their
//! scenario expects to see: each test runs the same call with and without the fault and
//! checks the difference.

use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use reftool_faults::Fault;
use serde_json::Value;

use crate::support::{Sandbox, call, lines, site};

fn data_len(stdout: &str) -> usize {
    let envelope: Value = serde_json::from_str(stdout).unwrap();
    envelope["data"].as_array().map_or(0, Vec::len)
}

#[test]
fn global_option_after_path_refused() {
    let sandbox = site(3);
    let args = ["files", "--output", "json", "--limit", "2", "site"];
    assert_eq!(call(&sandbox, None, &args).0, 0);
    assert_eq!(call(&sandbox, Some(Fault::GlobalOptionAfterPathRefused), &args).0, 2);
    let before = ["--output", "json", "files", "--limit", "2", "site"];
    assert_eq!(call(&sandbox, Some(Fault::GlobalOptionAfterPathRefused), &before).0, 0);
}

#[test]
fn subcommand_default_overrides_global() {
    let sandbox = site(3);
    let args = ["--output", "text", "files", "--limit", "2", "site"];
    let (exit, text) = call(&sandbox, None, &args);
    assert_eq!(exit, 0);
    assert!(text.starts_with("path="), "{text}");
    let (exit, json) = call(&sandbox, Some(Fault::SubcommandDefaultOverridesGlobal), &args);
    assert_eq!(exit, 0);
    assert!(json.starts_with('{'), "the value before the path is lost: {json}");
    let after = ["files", "--limit", "2", "site", "--output", "text"];
    assert_eq!(call(&sandbox, Some(Fault::SubcommandDefaultOverridesGlobal), &after).1, text);
}

#[test]
fn conflicting_repeat_last_wins() {
    let sandbox = site(3);
    let args = ["--output", "json", "files", "--limit", "2", "site", "--output", "text"];
    assert_eq!(call(&sandbox, None, &args).0, 2);
    let (exit, stdout) = call(&sandbox, Some(Fault::ConflictingRepeatLastWins), &args);
    assert_eq!(exit, 0);
    assert!(stdout.starts_with("path="), "the last value won: {stdout}");
}

#[test]
fn same_value_repeat_refused() {
    let sandbox = site(3);
    let args = ["--output", "json", "files", "--limit", "2", "site", "--output", "json"];
    assert_eq!(call(&sandbox, None, &args).0, 0);
    assert_eq!(call(&sandbox, Some(Fault::SameValueRepeatRefused), &args).0, 2);
}

#[test]
fn options_stop_at_positional() {
    let sandbox = site(3);
    let after = ["files", "site", "--limit", "2"];
    let before = ["files", "--limit", "2", "site"];
    assert_eq!(data_len(&call(&sandbox, None, &after).1), 2);
    assert_eq!(data_len(&call(&sandbox, Some(Fault::OptionsStopAtPositional), &after).1), 4);
    assert_eq!(data_len(&call(&sandbox, Some(Fault::OptionsStopAtPositional), &before).1), 2);
}

#[test]
fn stream_without_summary() {
    let sandbox = site(3);
    let args = ["files", "site", "--stream"];
    let last = |fault| lines(&call(&sandbox, fault, &args).1).last().cloned().unwrap();
    assert_eq!(last(None)["_summary"], true);
    let last = last(Some(Fault::StreamWithoutSummary));
    assert!(last.get("_summary").is_none(), "{last}");
    assert_eq!(last["_seq"], 4);
}

#[test]
fn stream_seq_skips() {
    let sandbox = site(3);
    let args = ["files", "site", "--stream"];
    let seqs = |fault| -> Vec<Value> {
        lines(&call(&sandbox, fault, &args).1).iter().map(|l| l["_seq"].clone()).collect()
    };
    assert_eq!(
        seqs(None),
        [1, 2, 3, 4].map(Value::from).into_iter().chain([Value::Null]).collect::<Vec<_>>()
    );
    assert_eq!(seqs(Some(Fault::StreamSeqSkips))[..4], [1, 2, 4, 5].map(Value::from));
}

/// A stream of 25 paced items, SIGINT after 3 lines: exit code and terminal line.
fn interrupted(sandbox: &Sandbox, fault: Option<Fault>) -> (i32, Value) {
    let mut cmd = sandbox.command(fault, &["files", "site", "--stream"]);
    cmd.env("REFTOOL_PACE_MS", "100");
    let mut child = cmd.spawn().unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    for _ in 0..3 {
        reader.read_line(&mut String::new()).unwrap();
    }
    kill(Pid::from_raw(i32::try_from(child.id()).unwrap()), Signal::SIGINT).unwrap();
    let mut rest = String::new();
    reader.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(1));
    (status.code().unwrap_or(-1), lines(&rest).last().cloned().unwrap())
}

#[test]
fn sigint_exits_1() {
    let sandbox = site(24);
    assert_eq!(interrupted(&sandbox, None).0, 130);
    let (exit, terminal) = interrupted(&sandbox, Some(Fault::SigintExits1));
    assert_eq!(exit, 1);
    assert_eq!(terminal["error"]["code"], "CANCELLED");
    assert_eq!(terminal["meta"]["exit_code"], 1);
}

#[test]
fn sigint_not_partial() {
    let sandbox = site(24);
    assert_eq!(interrupted(&sandbox, None).1["data"]["partial"], true);
    let (exit, terminal) = interrupted(&sandbox, Some(Fault::SigintNotPartial));
    assert_eq!(exit, 130);
    assert_eq!(terminal["data"]["partial"], false);
}
