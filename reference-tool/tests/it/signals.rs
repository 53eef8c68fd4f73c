//! SIGTERM (REQ-F-013): one cancellation envelope, exit 143, even with a second SIGTERM.

use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::snapshot;
use crate::support::Sandbox;

#[test]
fn sigterm_mid_work_gives_one_cancellation_envelope_and_143_and_rolls_back() {
    let sandbox = Sandbox::new();
    let db = sandbox.fresh_db("app.db");
    let mut cmd = sandbox.command(&["migrate", "--db", "app.db"]);
    cmd.env("REFTOOL_PACE_MS", "400");
    let child = cmd.spawn().unwrap();
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap());
    std::thread::sleep(Duration::from_millis(700));
    kill(pid, Signal::SIGTERM).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let _ = kill(pid, Signal::SIGTERM);
    let run = sandbox.finish(child.wait_with_output().unwrap());
    assert_eq!(run.exit, 143, "{} {}", run.stdout, run.stderr);
    assert_eq!(run.code(), "CANCELLED");
    assert_eq!(run.json["data"]["partial"], true);
    snapshot!("sigterm", run);
    let version: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 0);
}
