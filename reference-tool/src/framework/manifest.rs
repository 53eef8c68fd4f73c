//! `manifest`: the manifest generated from the registrations (REQ-O-041), never hand-written.
//!
//! The data is `{schema_version, framework_version, etag, flags, commands}`. `flags` holds the
//! global options every command accepts (`output`, `timeout`, `instance-id`); each command's
//! `flags` holds its own plus those the framework adds to it (`idempotency-key` on writers,
//! `budget` on interruptible commands). The etag is `sha256:<hex>` of the canonical JSON (keys
//! sorted, no spaces) of `{commands, flags}`: it changes exactly when a registration does.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::exit::Exit;
use super::registry::{CommandSpec, FlagSpec, Registry, StdoutKind};

/// Manifest schema version this framework writes.
pub const SCHEMA_VERSION: &str = "3.20";

/// What `version` answers (and `--version` in JSON mode): the tool's name and version, and
/// the manifest schema version it writes.
pub fn version_data(name: &str, version: &str) -> Value {
    json!({"name": name, "version": version, "schema_version": SCHEMA_VERSION})
}

/// The global options, as manifest flag entries.
pub fn global_flags() -> Value {
    json!({
        "output": {
            "type": "enum",
            "required": false,
            "enum_values": ["json", "text"],
            "description": "Response format; json when stdout is not a terminal or CI/NO_COLOR is set, text for a person at a terminal"
        },
        "timeout": {
            "type": "string",
            "required": false,
            "description": "Wall-clock limit of the whole work: 5s, 2000ms, 1m or milliseconds; 0 turns it off"
        },
        "instance-id": {
            "type": "string",
            "required": false,
            "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$",
            "description": "Instance whose state and jobs this call uses; default \"default\"",
            "env_vars": [{"name": "REFTOOL_INSTANCE_ID"}]
        }
    })
}

fn flag_entry(flag: &FlagSpec) -> Value {
    let mut entry = Map::new();
    entry.insert("type".into(), json!(flag.value_type.as_str()));
    entry.insert("required".into(), json!(flag.required));
    entry.insert("description".into(), json!(flag.description));
    if let Some(var) = &flag.env {
        entry.insert("env_vars".into(), json!([{"name": var}]));
    }
    Value::Object(entry)
}

/// One command's manifest entry.
pub fn command_entry(spec: &CommandSpec) -> Value {
    let mut entry = Map::new();
    entry.insert("description".into(), json!(spec.description));
    entry.insert("danger_level".into(), json!(spec.danger_level.as_str()));
    entry.insert("required_scopes".into(), json!(spec.required_scopes));
    let flags: Map<String, Value> =
        spec.flags.iter().map(|f| (f.name.clone(), flag_entry(f))).collect();
    entry.insert("flags".into(), Value::Object(flags));
    if !spec.positionals.is_empty() {
        let positionals: Vec<Value> = spec
            .positionals
            .iter()
            .map(|p| {
                json!({
                    "name": p.name,
                    "type": p.value_type.as_str(),
                    "required": p.required,
                    "description": p.description,
                })
            })
            .collect();
        entry.insert("positionals".into(), Value::Array(positionals));
    }
    let mut exits: Map<String, Value> = spec
        .exit_codes
        .iter()
        .map(|(exit, e)| {
            (
                exit.code().to_string(),
                json!({
                    "name": e.name,
                    "description": e.description,
                    "retryable": e.retryable,
                    "side_effects": e.side_effects,
                }),
            )
        })
        .collect();
    // REQ-F-069: the framework adds its SIGINT exit to every command's table, with the shape
    // the requirement gives it.
    exits.insert(
        Exit::SIGINT.code().to_string(),
        json!({
            "name": "CANCELLED",
            "description": "Cancelled by SIGINT: the cancellation envelope, after the command cleaned up",
            "retryable": false,
            "side_effects": "partial",
        }),
    );
    entry.insert("exit_codes".into(), Value::Object(exits));
    if spec.builtin {
        entry.insert("builtin".into(), json!(true));
    }
    if spec.is_async {
        entry.insert("async".into(), json!(true));
        entry.insert("job_descriptor_schema".into(), job_descriptor_schema());
    }
    if let Some(i) = &spec.interruption {
        let mut interruption = Map::new();
        interruption.insert("detach".into(), json!(i.detach));
        interruption.insert("resume".into(), json!(i.resume));
        if let Some(ms) = i.idle_timeout_ms {
            interruption.insert("idle_timeout_ms".into(), json!(ms));
        }
        if let Some(ms) = i.max_lifetime_ms {
            interruption.insert("max_lifetime_ms".into(), json!(ms));
        }
        entry.insert("interruption".into(), Value::Object(interruption));
    }
    if spec.streaming_default {
        entry.insert("streaming_default".into(), json!(true));
    }
    if spec.supports_streaming {
        entry.insert("supports_streaming".into(), json!(true));
    }
    if spec.stdout == StdoutKind::Protocol {
        entry.insert("stdout".into(), json!("protocol"));
    }
    Value::Object(entry)
}

/// The JSON Schema of the job descriptor an `async` command answers with (REQ-C-022): the
/// project's own `schemas/job-descriptor.json`, embedded so the two never drift.
pub fn job_descriptor_schema() -> Value {
    serde_json::from_str(include_str!("../../../schemas/job-descriptor.json"))
        .unwrap_or_else(|_| json!({"type": "object"}))
}

/// Keys sorted at every level, no whitespace.
pub fn canonical_json(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                let mut out = Map::new();
                for key in keys {
                    out.insert(key.clone(), sorted(&map[key]));
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// The manifest data.
pub fn manifest(registry: &Registry, framework_version: &str) -> Value {
    let commands: Map<String, Value> =
        registry.commands().map(|spec| (spec.path.clone(), command_entry(spec))).collect();
    let flags = global_flags();
    let hashed = json!({"commands": commands, "flags": flags});
    let digest = Sha256::digest(canonical_json(&hashed).as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    json!({
        "schema_version": SCHEMA_VERSION,
        "framework_version": framework_version,
        "etag": format!("sha256:{hex}"),
        "flags": flags,
        "commands": commands,
    })
}
