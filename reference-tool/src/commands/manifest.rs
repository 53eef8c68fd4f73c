//! `reftool manifest [--etag E]`: every command, generated from the registrations.

use serde_json::{Value, json};

use crate::framework::{CommandSpec, Exit, Failure, FlagSpec, SideEffects};

/// The declaration.
pub fn spec() -> CommandSpec {
    CommandSpec::new("manifest", "Print every command with its flags, exit codes and declared contracts", |ctx| {
        let manifest = ctx
            .manifest()
            .cloned()
            .ok_or_else(|| Failure::internal("the manifest was not provided to the command"))?;
        if let Some(etag) = ctx.args.text("etag")
            && manifest.get("etag").and_then(Value::as_str) == Some(etag)
        {
            ctx.set_meta("not_modified", json!(true));
            return Ok(Value::Null);
        }
        Ok(manifest)
    })
    .builtin()
    .flag(FlagSpec::string(
        "etag",
        "Etag of a manifest already held; when it is current, data is null and meta.not_modified is true",
    ))
    .exit(Exit::SUCCESS, "The manifest is returned, or is unchanged", false, SideEffects::None)
}
