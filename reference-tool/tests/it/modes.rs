//! Output modes and help: JSON off a terminal, text on one, help never on a piped stdout.

use std::io::Read;
use std::process::Stdio;

use crate::support::Sandbox;

#[test]
fn help_goes_to_stderr_when_stdout_is_not_a_terminal() {
    let sandbox = Sandbox::new();
    for args in [&["--help"][..], &["migrate", "--help"], &["manifest", "-h"]] {
        let run = sandbox.run(args);
        assert_eq!(run.exit, 0, "{args:?}");
        assert!(run.stdout.is_empty(), "{args:?}: {}", run.stdout);
        assert!(run.stderr.contains("Usage"), "{args:?}");
    }
}

#[test]
fn output_text_forces_readable_text() {
    let sandbox = Sandbox::new();
    let run = sandbox.command(&["--output", "text", "version"]).output().unwrap();
    let stdout = String::from_utf8(run.stdout).unwrap();
    assert!(stdout.contains("version: "), "{stdout}");
    assert!(serde_json::from_str::<serde_json::Value>(&stdout).is_err());

    let run = sandbox.command(&["--output", "text", "verson"]).output().unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(run.stdout.is_empty());
    assert!(String::from_utf8_lossy(&run.stderr).contains("error: UNKNOWN_COMMAND"));

    let run = sandbox.command(&["--output=text", "--version"]).output().unwrap();
    assert_eq!(
        String::from_utf8(run.stdout).unwrap(),
        format!("reftool {}\n", env!("CARGO_PKG_VERSION"))
    );
}

/// Runs reftool with stdout on a real pseudo-terminal and returns what it printed there.
fn on_a_terminal(sandbox: &Sandbox, args: &[&str], env: &[(&str, &str)]) -> String {
    let pty = nix::pty::openpty(None, None).unwrap();
    let mut cmd = sandbox.command(args);
    for (name, value) in env {
        cmd.env(name, value);
    }
    cmd.stdout(Stdio::from(pty.slave));
    let mut child = cmd.spawn().unwrap();
    drop(cmd);
    let status = child.wait().unwrap();
    assert!(status.code().is_some());
    let mut master = std::fs::File::from(pty.master);
    let mut buf = vec![0u8; 65536];
    // Everything was written before exit; one read gets it (the pty keeps it buffered).
    let n = master.read(&mut buf).unwrap_or(0);
    String::from_utf8_lossy(&buf[..n]).replace("\r\n", "\n")
}

#[test]
fn a_person_at_a_terminal_gets_text_unless_ci_or_no_color_or_output_json() {
    let sandbox = Sandbox::new();
    let text = on_a_terminal(&sandbox, &["version"], &[]);
    assert!(text.contains("version: "), "{text:?}");
    for env in [[("NO_COLOR", "1")], [("CI", "true")]] {
        let json = on_a_terminal(&sandbox, &["version"], &env);
        let value: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
        assert_eq!(value["ok"], true);
    }
    let json = on_a_terminal(&sandbox, &["version", "--output", "json"], &[]);
    assert!(serde_json::from_str::<serde_json::Value>(json.trim()).is_ok(), "{json:?}");
}
