//! The `data` of the INCOMPLETE (14) response (REQ-F-082, docs/contract.md §4).
//!
//! `data = {state, job_id, progress {done, total?, unit?}, continue_command, cancel_command}`,
//! both commands shell-ready ([`super::quote`]): `sh -c "$continue_command"` runs exactly the
//! intended argv.
//!
//! - `running` ([`running`]): `continue_command` is `<tool…> job wait <id>`.
//! - `paused` ([`paused`]): `continue_command` is the original invocation verbatim, plus
//!   `--idempotency-key <key>` for a writer when the caller gave none. Pass the identity's
//!   derived key ([`super::identity::InvocationIdentity::derived_idempotency_key`]): the
//!   continuation then has the same identity as the first call, so it finds the same job and
//!   checkpoint. The global flags of `<tool…>` that the invocation does not carry itself are
//!   put in after argv\[0\]: an instance chosen by the environment (`REFTOOL_INSTANCE_ID`) is
//!   part of the work's identity, and a continuation run verbatim in another environment must
//!   still continue this work (REQ-F-082), not start it again in the default instance.
//! - `cancel_command` is `<tool…> job cancel <id>` in both states.
//!
//! `<tool…>` is the `tool` slice the framework passes: argv\[0\] as invoked, followed by
//! the global flags that select the same state, i.e. `--instance-id <id>` whenever an instance
//! other than the default is in force (also when it came from the environment: the command
//! must mean the same job wherever it is run). Those flags must be accepted before the
//! subcommand (clap `global = true`).

use std::ffi::{OsStr, OsString};

use serde::Serialize;

use super::identity::{has_flag, has_idempotency_flag};
use super::ids::JobId;
use super::progress::Progress;
use super::quote::quote_argv;

/// `data.state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IncompleteState {
    /// The work goes on in a background job.
    Running,
    /// The work stopped at a checkpoint and waits for its continuation.
    Paused,
}

/// `data` of an INCOMPLETE response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IncompleteData {
    /// Running or paused.
    pub state: IncompleteState,
    /// The job.
    pub job_id: String,
    /// The last progress report.
    pub progress: Progress,
    /// Run this verbatim to continue.
    pub continue_command: String,
    /// Run this verbatim to stop the work and discard its checkpoint.
    pub cancel_command: String,
}

fn with_tail(tool: &[OsString], tail: &[&str]) -> Vec<OsString> {
    let mut argv = tool.to_vec();
    argv.extend(tail.iter().map(OsString::from));
    argv
}

/// `data` for a job handed to the background.
pub fn running(tool: &[OsString], job_id: &JobId, progress: Progress) -> IncompleteData {
    let wait = with_tail(tool, &["job", "wait", job_id.as_str()]);
    IncompleteData {
        state: IncompleteState::Running,
        job_id: job_id.to_string(),
        progress,
        continue_command: quote_argv(wait),
        cancel_command: quote_argv(with_tail(tool, &["job", "cancel", job_id.as_str()])),
    }
}

/// `data` for work paused at a checkpoint. `writer_key`: the effective idempotency key of a
/// writing command (`None` for read-only work); appended only when `original_argv` has no
/// `--idempotency-key` already.
pub fn paused(
    original_argv: &[OsString],
    tool: &[OsString],
    job_id: &JobId,
    progress: Progress,
    writer_key: Option<&str>,
) -> IncompleteData {
    let mut argv = original_argv.to_vec();
    // `tool` is argv[0] and the global flags selecting this state: those the invocation does
    // not carry itself go in after argv[0] (`--instance-id` is never part of the identity's
    // arguments, so the continuation stays the identical invocation).
    let mut missing: Vec<OsString> = Vec::new();
    let mut globals = tool.get(1..).unwrap_or_default().iter();
    while let Some(flag) = globals.next() {
        let value = globals.next();
        let given =
            flag.to_str().is_some_and(|f| has_flag(original_argv.get(1..).unwrap_or_default(), f));
        if !given {
            missing.push(flag.clone());
            missing.extend(value.cloned());
        }
    }
    let at = argv.len().min(1);
    argv.splice(at..at, missing);
    if let Some(key) = writer_key
        && !has_idempotency_flag(original_argv.get(1..).unwrap_or_default())
    {
        argv.push("--idempotency-key".into());
        argv.push(key.into());
    }
    IncompleteData {
        state: IncompleteState::Paused,
        job_id: job_id.to_string(),
        progress,
        continue_command: quote_argv(&argv),
        cancel_command: quote_argv(with_tail(tool, &["job", "cancel", job_id.as_str()])),
    }
}

/// A one-sentence `error.message` for the INCOMPLETE response.
pub fn message(state: IncompleteState, budget_ms: Option<u64>, progress: &Progress) -> String {
    let reached = match budget_ms {
        Some(ms) if ms > 0 => format!("Call budget of {ms}ms reached"),
        _ => "The call was interrupted".to_owned(),
    };
    let unit = progress.unit.as_deref().unwrap_or("units");
    let how_far = match progress.total {
        Some(total) if total > 0 => format!("after {} of {total} {unit}", progress.done),
        _ => format!("after {} {unit}", progress.done),
    };
    match state {
        IncompleteState::Running => {
            format!("{reached} {how_far}; the work continues in the background")
        }
        IncompleteState::Paused => {
            format!("{reached} {how_far}; the state is saved, run continue_command")
        }
    }
}

/// `argv[0]` plus `--instance-id <id>` when a non-default instance is in force.
pub fn tool_prefix(argv0: &OsStr, instance: Option<&str>) -> Vec<OsString> {
    let mut tool = vec![argv0.to_owned()];
    if let Some(id) = instance {
        tool.push("--instance-id".into());
        tool.push(id.into());
    }
    tool
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn printer(dir: &std::path::Path) -> OsString {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("my tool's \"bin\"");
        std::fs::write(&path, "#!/bin/sh\nprintf '%s\\0' \"$@\"\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.into_os_string()
    }

    fn run(line: &str) -> Vec<String> {
        let out = Command::new("sh").arg("-c").arg(line).output().unwrap();
        assert!(out.status.success(), "{line}");
        let mut v: Vec<String> =
            out.stdout.split(|b| *b == 0).map(|p| String::from_utf8(p.to_vec()).unwrap()).collect();
        v.pop();
        v
    }

    fn progress() -> Progress {
        Progress { done: 120, total: Some(980), unit: Some("bytes".into()) }
    }

    #[test]
    fn running_continues_with_job_wait_and_is_shell_exact() {
        let dir = tempfile::tempdir().unwrap();
        let tool = tool_prefix(&printer(dir.path()), Some("team a's"));
        let id = JobId::generate().unwrap();
        let data = running(&tool, &id, progress());
        assert_eq!(data.state, IncompleteState::Running);
        assert_eq!(
            run(&data.continue_command),
            ["--instance-id", "team a's", "job", "wait", id.as_str()]
        );
        assert_eq!(
            run(&data.cancel_command),
            ["--instance-id", "team a's", "job", "cancel", id.as_str()]
        );
        let json = serde_json::to_value(&data).unwrap();
        assert_eq!(json["state"], "running");
        assert_eq!(
            json["progress"],
            serde_json::json!({"done": 120, "total": 980, "unit": "bytes"})
        );
        let plain = running(&tool_prefix(OsStr::new("reftool"), None), &id, Progress::default());
        assert_eq!(plain.continue_command, format!("reftool job wait {id}"));
        assert_eq!(
            serde_json::to_value(&plain).unwrap()["progress"],
            serde_json::json!({"done": 0})
        );
    }

    #[test]
    fn paused_repeats_the_invocation_and_adds_a_writers_key_once() {
        let dir = tempfile::tempdir().unwrap();
        let exe = printer(dir.path());
        let argv: Vec<OsString> = vec![
            exe.clone(),
            "import".into(),
            "rows with 'quotes'.csv".into(),
            "--db".into(),
            "$HOME/x.db".into(),
        ];
        let id = JobId::generate().unwrap();
        let tool = tool_prefix(&exe, None);
        let reader = paused(&argv, &tool, &id, progress(), None);
        assert_eq!(
            run(&reader.continue_command),
            ["import", "rows with 'quotes'.csv", "--db", "$HOME/x.db"]
        );
        let writer = paused(&argv, &tool, &id, progress(), Some("ik-0123"));
        assert_eq!(
            run(&writer.continue_command),
            [
                "import",
                "rows with 'quotes'.csv",
                "--db",
                "$HOME/x.db",
                "--idempotency-key",
                "ik-0123"
            ]
        );
        let mut keyed = argv.clone();
        keyed.push("--idempotency-key=mine".into());
        let given = paused(&keyed, &tool, &id, progress(), Some("mine"));
        assert_eq!(given.continue_command.matches("idempotency-key").count(), 1);
        assert_eq!(run(&writer.cancel_command), ["job", "cancel", id.as_str()]);
        assert!(
            writer.continue_command.as_bytes().is_ascii() || !writer.continue_command.is_empty()
        );
    }

    #[test]
    fn paused_carries_an_instance_chosen_by_the_environment_once() {
        let dir = tempfile::tempdir().unwrap();
        let exe = printer(dir.path());
        let id = JobId::generate().unwrap();
        let argv: Vec<OsString> = vec![exe.clone(), "digest".into(), "big.txt".into()];
        // The instance came from the environment: the continuation names it.
        let from_env = paused(&argv, &tool_prefix(&exe, Some("team-a")), &id, progress(), None);
        assert_eq!(
            run(&from_env.continue_command),
            ["--instance-id", "team-a", "digest", "big.txt"]
        );
        // The invocation named it itself (either spelling): verbatim, named once.
        for flagged in [
            vec![
                exe.clone(),
                "digest".into(),
                "big.txt".into(),
                "--instance-id".into(),
                "team-a".into(),
            ],
            vec![exe.clone(), "--instance-id=team-a".into(), "digest".into(), "big.txt".into()],
        ] {
            let data = paused(&flagged, &tool_prefix(&exe, Some("team-a")), &id, progress(), None);
            let words = run(&data.continue_command);
            assert_eq!(words, flagged[1..].iter().map(|a| a.to_str().unwrap()).collect::<Vec<_>>());
        }
    }

    #[test]
    fn messages_say_how_far() {
        assert_eq!(
            message(
                IncompleteState::Paused,
                Some(30000),
                &Progress { done: 4000, total: Some(25000), unit: Some("rows".into()) }
            ),
            "Call budget of 30000ms reached after 4000 of 25000 rows; the state is saved, run continue_command"
        );
        assert!(
            message(IncompleteState::Running, None, &Progress::default()).contains("background")
        );
    }
}
