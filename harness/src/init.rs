//! `conform init TOOL`: a commented profile skeleton drafted from the tool's manifest.
//!
//! conform cannot know which arguments give a command seconds of work, so every role is
//! written commented out, under the commands whose declaration fits it, with `<ARGS>` where the
//! vendor fills in arguments. The draft is a valid profile as it stands (`conform run` then
//! runs the static and quick checks), and each role a vendor uncomments unlocks its scenarios.
//! The kit's probes are drafted the same way: read and invalid probes as they are, and
//! commented, a destructive probe for a destructive command, two stream probes (one
//! interrupted) for a command that declares streaming, and an argument order for a safe,
//! plain command with a value-taking flag, moved around a global option that offers `json`.

use std::fmt::Write as _;

use serde_json::Value;

use crate::discover::{CommandInfo, Commands};
use crate::schemas::unwrap_manifest;

/// Which role a command's declaration suits, and why, in the order roles are listed.
fn roles_for(path: &str, info: &CommandInfo) -> Vec<(&'static str, &'static str)> {
    let mut roles = Vec::new();
    match (info.detach, info.resume) {
        (Some(true), Some(true)) => {
            roles.push(("detach", "detach: true; give it at least about 2 s of work"));
            roles.push((
                "stalling",
                "detach: true; make its progress stop and its idle_timeout_ms short",
            ));
        }
        (Some(true), _) => {
            roles.push(("detach", "detach: true; give it at least about 2 s of work"));
            roles.push(("detach_only", "detach: true, resume: false"));
        }
        (_, Some(true)) if info.writes() => {
            roles.push(("resume_writer", "resume: true, detach: false, writes"));
        }
        (_, Some(true)) => roles.push(("resume_reader", "resume: true, detach: false, read-only")),
        _ if info.is_async => {
            roles.push(("async", "async: true; its job must run for a few seconds"))
        }
        _ if !builtin(path) => {
            roles.push(("plain_slow", "no interruption; it must outlive a short --timeout"));
        }
        _ => {}
    }
    if info.writes() && info.flags.contains("idempotency-key") && !builtin(path) {
        roles.push(("idempotent_writer", "writes and takes --idempotency-key; quick work"));
    }
    roles
}

fn builtin(path: &str) -> bool {
    matches!(path, "manifest" | "version" | "help") || path == "job" || path.starts_with("job.")
}

/// The skeleton for a tool whose manifest response is `manifest`; `tool` is shown in comments.
pub fn skeleton(tool: &str, manifest: &Value) -> String {
    let commands = Commands::from_manifest(manifest);
    let version = unwrap_manifest(manifest)
        .get("schema_version")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let mut out = String::new();
    let _ =
        writeln!(out, "# conform profile for {tool}, drafted by `conform init` from its manifest");
    let _ = writeln!(out, "# (schema_version {version}, {} commands).", commands.by_path.len());
    out.push_str(
        "# As it stands it runs the static and quick checks. Uncomment a role, fill in <ARGS>\n\
         # (arguments that give the command seconds of work), fixtures and setup, and its\n\
         # scenarios run too. `conform manual profile` describes the roles and every key.\n\n\
         [tool]\n\
         # env = { MYTOOL_PACE_MS = \"100\" }      # for every invocation\n\
         # instance_flag = \"--instance-id\"        # or instance_env = \"MYTOOL_INSTANCE_ID\"\n",
    );
    let mut by_role: Vec<(&str, Vec<(String, &str)>)> = Vec::new();
    for (path, info) in &commands.by_path {
        for (role, why) in roles_for(path, info) {
            match by_role.iter_mut().find(|(r, _)| *r == role) {
                Some((_, list)) => list.push((path.clone(), why)),
                None => by_role.push((role, vec![(path.clone(), why)])),
            }
        }
    }
    for role in crate::profile::ROLE_NAMES {
        let Some((_, candidates)) = by_role.iter().find(|(r, _)| *r == role) else { continue };
        let _ = writeln!(out, "\n# Role `{role}`: candidates from the manifest:");
        for (path, why) in candidates {
            let _ = writeln!(out, "#   {path} ({why})");
        }
        let (path, _) = &candidates[0];
        let words: Vec<String> =
            path.split('.').map(|w| format!("{w:?}")).chain(["\"<ARGS>\"".to_owned()]).collect();
        let _ = writeln!(out, "# [roles.{role}]");
        let _ = writeln!(out, "# argv = [{}]", words.join(", "));
        let _ = writeln!(out, "# fixtures = [\"fixtures/<FILE>\"]   # relative to this file");
        let _ = writeln!(out, "# setup = [\"<shell command run in the sandbox first>\"]");
    }
    out.push_str("\n[kit]\n");
    let reads: Vec<String> = ["version", "manifest"]
        .iter()
        .filter(|c| commands.by_path.contains_key(**c))
        .map(|c| format!("[{c:?}]"))
        .collect();
    let _ = writeln!(out, "read = [{}]", reads.join(", "));
    let _ = writeln!(out, "invalid = [[\"manifest\", \"--conform-no-such-flag\"]]");
    let destructive: Vec<&String> = commands
        .by_path
        .iter()
        .filter(|(_, i)| i.danger_level == "destructive")
        .map(|(p, _)| p)
        .collect();
    if !destructive.is_empty() {
        let _ = writeln!(
            out,
            "# destructive = [{{ argv = [\"{}\", \"<ARGS>\"], dry_run_flag = \"--dry-run\" }}]   # never a confirmation flag",
            destructive[0].replace('.', "\", \"")
        );
        let _ = writeln!(
            out,
            "#   a probe may add setup = [\"...\"] (sh -c in the sandbox, the tool in $CONFORM_TOOL) and fixtures = [...] to make what it would destroy"
        );
    }
    draft_streams(&mut out, manifest);
    draft_argument_order(&mut out, manifest, &commands);
    out
}

/// The manifest's command entries, by dot-separated path.
fn entries(manifest: &Value) -> Vec<(&String, &Value)> {
    unwrap_manifest(manifest)
        .get("commands")
        .and_then(Value::as_object)
        .map(|c| c.iter().collect())
        .unwrap_or_default()
}

/// Commented stream probes for the commands that declare streaming (the kit's stream_contract
/// and stream_sigint checks, Level 3).
fn draft_streams(out: &mut String, manifest: &Value) {
    let streaming: Vec<&String> = entries(manifest)
        .into_iter()
        .filter(|(_, e)| {
            ["supports_streaming", "streaming_default"]
                .iter()
                .any(|k| e.get(*k).and_then(Value::as_bool) == Some(true))
        })
        .map(|(p, _)| p)
        .collect();
    let Some(first) = streaming.first() else { return };
    let list: Vec<&str> = streaming.iter().map(|p| p.as_str()).collect();
    let _ = writeln!(
        out,
        "\n# Streams (REQ-O-004): commands that declare streaming: {}",
        list.join(", ")
    );
    let argv = format!("[{}, \"<ARGS>\", \"--stream\"]", words(first));
    let _ = writeln!(out, "# [[kit.stream]]\n# argv = {argv}");
    let _ = writeln!(
        out,
        "# [[kit.stream]]   # the same stream, interrupted: SIGINT after 3 lines\n# argv = {argv}\n# signal = \"INT\"\n# after_lines = 3"
    );
}

/// A commented `[kit.argument_order]`: a safe command with a local flag, moved around a global
/// option whose values include `json` (the kit's argument_order check, Level 3).
fn draft_argument_order(out: &mut String, manifest: &Value, commands: &Commands) {
    let Some((flag, values)) = unwrap_manifest(manifest)
        .get("flags")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .find_map(|(name, f)| {
            let values: Vec<&str> =
                f.get("enum_values")?.as_array()?.iter().filter_map(Value::as_str).collect();
            (values.contains(&"json") && values.len() > 1).then_some((name, values))
        })
    else {
        return;
    };
    // A value-taking local flag, an integer one (a limit) first: the placements pass it a value.
    let local_flag = |entry: &Value| -> Option<String> {
        let flags = entry.get("flags").and_then(Value::as_object)?;
        let takes_value = |f: &Value| f.get("type").and_then(Value::as_str) != Some("boolean");
        let kind = |f: &Value, k: &str| f.get("type").and_then(Value::as_str) == Some(k);
        flags
            .iter()
            .find(|(_, f)| kind(f, "integer"))
            .or_else(|| flags.iter().find(|(_, f)| takes_value(f)))
            .map(|(name, _)| name.clone())
    };
    // A safe command outside the job runtime (no interruption, not async), with such a flag.
    let Some((path, entry, local)) = entries(manifest).into_iter().find_map(|(path, entry)| {
        let info = commands.by_path.get(path)?;
        let plain = info.danger_level == "safe" && !info.interruptible() && !info.is_async;
        (plain && !builtin(path)).then(|| local_flag(entry)).flatten().map(|l| (path, entry, l))
    }) else {
        return;
    };
    let alternate = values.iter().find(|v| **v != "json").copied().unwrap_or("<OTHER>");
    let _ = writeln!(
        out,
        "\n# Argument order (REQ-F-067, REQ-F-079): a safe command and a local option, moved around --{flag}"
    );
    let _ = writeln!(out, "# [kit.argument_order]\n# command_path = [{}]", words(path));
    let _ = writeln!(out, "# local_args = [\"--{local}\", \"<VALUE>\"]");
    let _ = writeln!(
        out,
        "# global_flag = \"--{flag}\"\n# value = \"json\"\n# alternate_value = \"{alternate}\""
    );
    if let Some(name) = entry
        .get("positionals")
        .and_then(Value::as_array)
        .and_then(|p| p.first())
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
    {
        let _ = writeln!(out, "# positional = \"<{}>\"   # a value of it", name.to_uppercase());
    }
}

/// A command path as TOML string words: `job.wait` -> `"job", "wait"`.
fn words(path: &str) -> String {
    path.split('.').map(|w| format!("{w:?}")).collect::<Vec<_>>().join(", ")
}
