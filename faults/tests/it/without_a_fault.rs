//! Without a fault (or with a name it does not know) the faulty binary is reftool.

use reftool_faults::FAULT_ENV;
use serde_json::Value;

use crate::support::{Sandbox, call};

fn data(stdout: &str) -> Value {
    serde_json::from_str::<Value>(stdout).unwrap()["data"].clone()
}

#[test]
fn the_manifest_is_reftools() {
    let sandbox = Sandbox::new();
    let reftool = reftool::commands::app().unwrap().manifest();
    let (exit, stdout) = call(&sandbox, None, &["manifest"]);
    assert_eq!(exit, 0);
    assert_eq!(data(&stdout), reftool);
    let mut unknown = sandbox.command(None, &["manifest"]);
    unknown.env(FAULT_ENV, "no-such-fault");
    let out = unknown.output().unwrap();
    assert_eq!(data(&String::from_utf8(out.stdout).unwrap()), reftool);
}

#[test]
fn a_fault_changes_what_its_rule_is_about() {
    let sandbox = Sandbox::new();
    let fault = Some(reftool_faults::Fault::ManifestWithoutSchemaVersion);
    let (exit, stdout) = call(&sandbox, fault, &["manifest"]);
    assert_eq!(exit, 0);
    assert!(data(&stdout).get("schema_version").is_none());
    let version = |fault| data(&call(&sandbox, fault, &["version"]).1);
    assert_eq!(version(fault), version(None));
}
