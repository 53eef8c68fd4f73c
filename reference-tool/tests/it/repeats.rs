//! Options in any position, and repeated (REQ-F-067, REQ-F-079): a global option means the
//! same before, between and after the command's words; a scalar option repeated with the same
//! value is accepted, with different values refused with ARG_ERROR 2 naming it.

use crate::support::Sandbox;

fn stdout_of(sandbox: &Sandbox, args: &[&str]) -> (i32, String) {
    let run = sandbox.command(args).output().unwrap();
    (run.status.code().unwrap_or(-1), String::from_utf8(run.stdout).unwrap())
}

#[test]
fn a_global_option_means_the_same_before_and_after_the_command() {
    let sandbox = Sandbox::new();
    let before = stdout_of(&sandbox, &["--output", "text", "version"]);
    let after = stdout_of(&sandbox, &["version", "--output", "text"]);
    let joined = stdout_of(&sandbox, &["version", "--output=text"]);
    assert_eq!(before.0, 0);
    assert!(before.1.starts_with("name: reftool"), "text, not JSON: {:?}", before.1);
    assert_eq!(before, after);
    assert_eq!(before, joined);
    let json = stdout_of(&sandbox, &["--output", "json", "version"]);
    assert!(json.1.starts_with('{'), "{:?}", json.1);
}

#[test]
fn the_same_value_twice_is_accepted_in_either_spelling_and_place() {
    let sandbox = Sandbox::new();
    let once = stdout_of(&sandbox, &["version", "--output", "text"]);
    for args in [
        &["--output", "text", "version", "--output", "text"][..],
        &["version", "--output=text", "--output", "text"],
        &["--output=text", "--output=text", "version"],
    ] {
        assert_eq!(stdout_of(&sandbox, args), once, "{args:?}");
    }
    let run = sandbox.run(&["version", "--timeout", "5s", "--timeout=5s"]);
    assert_eq!(run.exit, 0, "{}", run.stdout);
    assert_eq!(run.envelope()["meta"]["timeout_ms"], 5000);
}

#[test]
fn different_values_are_an_arg_error_naming_the_option() {
    let sandbox = Sandbox::new();
    for (args, option) in [
        (&["--output", "json", "version", "--output", "text"][..], "--output"),
        (&["version", "--output=text", "--output=json"], "--output"),
        (&["--timeout", "5s", "version", "--timeout", "6s"], "--timeout"),
        (&["migrate", "--db", "a.db", "--db", "b.db"], "--db"),
    ] {
        let run = sandbox.run(args);
        assert_eq!(run.exit, 2, "{args:?}: {}", run.stdout);
        run.envelope();
        assert_eq!(run.code(), "CONFLICTING_OPTION", "{args:?}");
        assert_eq!(run.json["error"]["phase"], "validation");
        let message = run.json["error"]["message"].as_str().unwrap();
        assert!(message.contains(option), "{args:?}: {message}");
        assert!(!sandbox.path().join("a.db").exists() && !sandbox.path().join("b.db").exists());
        assert!(!sandbox.state_dir().exists(), "nothing done for {args:?}");
    }
}

#[test]
fn values_after_the_separator_are_not_options() {
    let sandbox = Sandbox::new();
    // `--` ends the options: what follows is a positional, so this is a usage error about
    // an unexpected argument, not a conflict.
    let run = sandbox.run(&["version", "--output", "json", "--", "--output=text"]);
    assert_eq!(run.exit, 2);
    assert_ne!(run.code(), "CONFLICTING_OPTION");
}
