//! `conform init TOOL`: a commented profile skeleton drafted from the tool's manifest.
//!
//! conform cannot know which arguments give a command seconds of work, so every role is
//! written commented out, under the commands whose declaration fits it (the same test the plan
//! applies, least dangerous first, framework built-ins left out: `"builtin": true`, the job
//! runtime, `manifest`, `version`, `help`), as argv arrays with `<ARGS>` where the vendor fills
//! in arguments. A role no command can fill gets one line saying why (for §79's roles: no
//! command makes the declaration, so its scenarios are not applicable). `[tool] command` names
//! the tool as it was given (a bare name stays one), so `conform run --profile` needs no TOOL.
//! A tool with no usable manifest gets no draft: exit 2, saying whether the manifest command
//! hung, failed or printed no JSON. The draft is a valid profile as it stands (`conform run` then
//! runs the static and quick checks), and each role a vendor uncomments unlocks its scenarios.
//! The kit's probes are drafted the same way: read and invalid probes as they are, and
//! commented, a destructive probe for the vendor's destructive command (by `danger_level`),
//! two stream probes (one interrupted) for a command that declares streaming, and an argument
//! order for a safe, plain command with a value-taking flag, moved around a global option that
//! offers `json`.

use std::fmt::Write as _;

use serde_json::Value;

use crate::discover::Commands;
use crate::scenario::role_declaration;
use crate::schemas::unwrap_manifest;

/// What a role's command must be, as a hint beside each candidate.
fn role_hint(role: &str) -> &'static str {
    match role {
        "detach" => "detach: true; give it at least about 2 s of work",
        "detach_stdin" => "detach: true, reading its input from stdin (give it as stdin_text)",
        "detach_only" => "detach: true, resume: false",
        "resume_reader" => "resume: true, detach: false, read-only",
        "resume_writer" => "resume: true, detach: false, writes; takes --idempotency-key",
        "stalling" => {
            "detach: true (the idle watchdog is the background job's); make its progress stop and its idle_timeout_ms short"
        }
        "async" => "async: true; its job must run for a few seconds",
        "idempotent_writer" => "writes and takes --idempotency-key; quick work",
        "failing" => {
            "detach: true; an input on which it fails with its own exit after seconds of work"
        }
        "short_lifetime" => {
            "interruption; set, in its env, the tool's own setting that makes it declare a max_lifetime_ms of a few seconds, shorter than its work (optional: without it the lifetime is not judged)"
        }
        "long_work" => {
            "optional: detach: true; an input whose uninterrupted work takes over 12 s (REQ-C-034's 10 s between progress reports); without it those scenarios are skipped, not unjudged"
        }
        "plain_slow" => {
            "no interruption; conform cuts it with --timeout, so give it seconds of work (a run under 1.2 s is skipped as too short)"
        }
        _ => "",
    }
}

/// The commands whose declaration suits a role (the plan's own test, so a drafted role is one
/// conform runs), built-ins left out: they are the framework's, not the vendor's work.
/// The least dangerous come first, since conform runs the one the vendor picks again and again.
fn candidates<'c>(role: &str, commands: &'c Commands) -> Vec<&'c str> {
    let rank = |danger: &str| match danger {
        "safe" => 0,
        "mutating" => 1,
        "destructive" => 2,
        _ => 3,
    };
    let mut found: Vec<(&str, u8)> = commands
        .by_path
        .iter()
        .filter(|(_, info)| !info.builtin)
        .filter(|(_, info)| match role_declaration(role) {
            Some(needs) => info.declares(needs),
            // A plain command outside the job runtime; never a destructive one, which conform
            // would run and cut short again and again.
            None => !info.interruptible() && !info.is_async && info.danger_level != "destructive",
        })
        .map(|(path, info)| (path.as_str(), rank(&info.danger_level)))
        .collect();
    found.sort_by_key(|(_, rank)| *rank);
    found.into_iter().map(|(path, _)| path).collect()
}

/// The plain commands that show they may run long: `has_network_io: true` (long blocking
/// I/O, REQ-C-012) or a `timeout` flag of their own, which the `plain_slow` role's scenarios
/// pass. A quick command (a listing) cannot be the role: its run ends before any timeout.
fn long_running<'c>(found: &[&'c str], manifest: &Value) -> Vec<&'c str> {
    let commands = unwrap_manifest(manifest).get("commands");
    found
        .iter()
        .copied()
        .filter(|path| {
            let entry = commands.and_then(|c| c.get(*path));
            let network = entry.and_then(|e| e.get("has_network_io")) == Some(&Value::Bool(true));
            let timeout = entry.and_then(|e| e.pointer("/flags/timeout")).is_some();
            network || timeout
        })
        .collect()
}

/// A command path as a TOML array: `note.delete` -> `["note", "delete"]`.
fn argv_words(path: &str) -> String {
    format!("[{}]", words(path))
}

/// The skeleton for a tool whose manifest response is `manifest`; `tool` is how a profile
/// names it (`[tool] command`: a bare name looked up in PATH, or a path).
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
         [tool]\n",
    );
    // `conform run --profile conform.toml` then needs no TOOL argument.
    let _ = writeln!(out, "command = [{tool:?}]");
    out.push_str(
        "# env = { MYTOOL_PACE_MS = \"100\" }      # for every invocation\n\
         # instance_flag = \"--instance-id\"        # or instance_env = \"MYTOOL_INSTANCE_ID\"\n",
    );
    for role in crate::profile::ROLE_NAMES {
        let mut found = candidates(role, &commands);
        let mut caution = None;
        if role == "plain_slow" {
            match long_running(&found, manifest).as_slice() {
                [] if !found.is_empty() => {
                    caution = Some(
                        "# none of these declares has_network_io or a --timeout of its own: pick one whose work takes seconds",
                    );
                }
                [] => {}
                long => found = long.to_vec(),
            }
        }
        let Some(first) = found.first() else {
            // Say why the role stays empty, so nobody hunts for a command that cannot exist.
            let why = match role_declaration(role) {
                Some(needs) => format!(
                    "no command declares {}: its scenarios are not applicable",
                    needs.describe()
                ),
                None => {
                    "no command outside the built-ins, the job runtime and the destructive ones"
                        .to_owned()
                }
            };
            let _ = writeln!(out, "\n# Role `{role}`: none can fill it ({why}).");
            continue;
        };
        let _ =
            writeln!(out, "\n# Role `{role}` ({}): candidates from the manifest:", role_hint(role));
        for path in &found {
            let _ = writeln!(out, "#   {}", argv_words(path));
        }
        if let Some(caution) = caution {
            let _ = writeln!(out, "{caution}");
        }
        let _ = writeln!(out, "# [roles.{role}]");
        let _ = writeln!(out, "# argv = [{}, \"<ARGS>\"]", words(first));
        let _ = writeln!(out, "# fixtures = [\"fixtures/<FILE>\"]   # relative to this file");
        let _ = writeln!(out, "# setup = [\"<shell command run in the sandbox first>\"]");
        if matches!(role, "resume_writer" | "idempotent_writer" | "detach_only") {
            // The effect oracle: without it, a resume that writes a chunk twice or loses one
            // answers like a correct one.
            let _ = writeln!(
                out,
                "# verify = \"<shell command printing the state the work leaves, e.g. a row count, a distinct count and a sum>\""
            );
        }
    }
    out.push_str("\n[kit]\n");
    let reads: Vec<String> = ["version", "manifest"]
        .iter()
        .filter(|c| commands.by_path.contains_key(**c))
        .map(|c| format!("[{c:?}]"))
        .collect();
    let _ = writeln!(out, "read = [{}]", reads.join(", "));
    let _ = writeln!(out, "invalid = [[\"manifest\", \"--conform-no-such-flag\"]]");
    // The destructive probe is the vendor's own destructive command (its `danger_level`),
    // never a framework built-in such as a cleanup.
    let destructive: Vec<&String> = commands
        .by_path
        .iter()
        .filter(|(_, i)| i.danger_level == "destructive" && !i.builtin)
        .map(|(p, _)| p)
        .collect();
    if let Some(first) = destructive.first() {
        let _ = writeln!(
            out,
            "# destructive = [{{ argv = [{}, \"<ARGS>\"], dry_run_flag = \"--dry-run\" }}]   # never a confirmation flag",
            words(first)
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
        (plain && !info.builtin).then(|| local_flag(entry)).flatten().map(|l| (path, entry, l))
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
