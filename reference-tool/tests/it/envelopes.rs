//! The plain envelope kinds: success, the framework's internal errors.

use crate::snapshot;
use crate::support::Sandbox;

#[test]
fn version_is_a_success_envelope() {
    let sandbox = Sandbox::new();
    let run = sandbox.run(&["version"]);
    assert_eq!(run.exit, 0);
    assert_eq!(run.json["data"]["version"], env!("CARGO_PKG_VERSION"));
    snapshot!("version", run);
}

#[test]
fn dash_dash_version_in_json_mode_is_the_same_envelope() {
    let sandbox = Sandbox::new();
    let flag = sandbox.run(&["--version"]);
    let command = sandbox.run(&["version"]);
    assert_eq!(flag.exit, 0);
    assert_eq!(flag.envelope()["data"], command.envelope()["data"]);
}
