//! How punctually a call returns at its budget: over 30 calls with `--budget 300ms` on work
//! that takes seconds, the call's wall time (spawn to exit, as its caller sees it) minus the
//! budget, p50 / p95 / max. Target: p95 ≤ 10 ms (docs/contract.md §3 aims at budget + 50 ms).
//!
//! Three subjects, each its own fresh jobs (distinct file names, so no call attaches to
//! another's job):
//! - `analyze` (detach): the front spawns the worker, waits on the job, hands off `running`;
//! - `digest` (resume only): the work runs in the front and stops at its next safe point;
//! - `job wait` on a running job: the waiter's own budget.
//!
//! Beside them the spawn-to-exit time of `/bin/true`, the floor any call pays. Every job is
//! cancelled afterwards and the temporary state removed.
//!
//! Run: `cargo bench -p reftool --bench budget` (`BUDGET_CALLS` overrides the 30 calls).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

const DEFAULT_CALLS: usize = 30;
/// The budget every measured call gets.
const BUDGET: Duration = Duration::from_millis(300);
/// Pacing per unit: every job outlasts the whole measurement (a stop still lands at once:
/// the pacing sleep is a safe point).
const PACE_MS: &str = "1000";
/// Rows of the fixture: about 43 units of analyze, 11 of digest.
const ROWS: u64 = 45_000;
/// The target for p95 of the overshoot.
const TARGET_P95: Duration = Duration::from_millis(10);

struct Rig {
    dir: tempfile::TempDir,
    exe: PathBuf,
}

impl Rig {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.args(args)
            .current_dir(self.dir.path())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.dir.path())
            .env("REFTOOL_STATE_DIR", self.dir.path().join("state"))
            .env("REFTOOL_PACE_MS", PACE_MS)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        cmd
    }

    /// Runs `args`; its wall time and its envelope.
    fn timed(&self, args: &[&str]) -> Result<(Duration, Value, i32)> {
        let started = Instant::now();
        let output: Output = self.command(args).output()?;
        let took = started.elapsed();
        let json: Value = serde_json::from_slice(&output.stdout)
            .with_context(|| format!("{args:?} printed no envelope"))?;
        Ok((took, json, output.status.code().unwrap_or(-1)))
    }
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted.get(sorted.len().saturating_sub(1) * p / 100).copied().unwrap_or_default()
}

/// `took - budget` of each call, sorted (0 when a call came back early).
fn overshoot(mut times: Vec<Duration>) -> Vec<Duration> {
    for t in &mut times {
        *t = t.saturating_sub(BUDGET);
    }
    times.sort();
    times
}

fn write_fixture(dir: &Path, calls: usize) -> Result<()> {
    let mut text = String::from("n,square\n");
    for n in 1..=ROWS {
        text.push_str(&format!("{n},{}\n", n * n));
    }
    std::fs::write(dir.join("data.csv"), text)?;
    for i in 0..calls {
        std::os::unix::fs::symlink("data.csv", dir.join(format!("a{i}.csv")))?;
        std::os::unix::fs::symlink("data.csv", dir.join(format!("d{i}.csv")))?;
    }
    Ok(())
}

fn job_id(json: &Value) -> Result<String> {
    json["data"]["job_id"].as_str().map(str::to_owned).context("no job_id in the answer")
}

fn main() -> Result<()> {
    let calls: usize =
        std::env::var("BUDGET_CALLS").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_CALLS);
    let rig = Rig { dir: tempfile::tempdir()?, exe: PathBuf::from(env!("CARGO_BIN_EXE_reftool")) };
    write_fixture(rig.dir.path(), calls)?;
    let budget = format!("{}ms", BUDGET.as_millis());

    let mut floor = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        Command::new("/bin/true").stdin(Stdio::null()).status()?;
        floor.push(started.elapsed());
    }
    floor.sort();

    let mut jobs = Vec::new();
    let (mut detach, mut resume, mut waits) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..calls {
        let file = format!("a{i}.csv");
        let (took, json, exit) = rig.timed(&["analyze", &file, "--budget", &budget])?;
        if exit != 14 || json["data"]["state"] != "running" {
            bail!("analyze {file}: expected INCOMPLETE running, got exit {exit}: {json}");
        }
        let id = job_id(&json)?;
        detach.push(took);
        let (took, json, exit) = rig.timed(&["job", "wait", &id, "--budget", &budget])?;
        if exit != 14 {
            bail!("job wait {id}: expected 14, got {exit}: {json}");
        }
        waits.push(took);
        jobs.push(id);
    }
    for i in 0..calls {
        let file = format!("d{i}.csv");
        let (took, json, exit) = rig.timed(&["digest", &file, "--budget", &budget])?;
        if exit != 14 || json["data"]["state"] != "paused" {
            bail!("digest {file}: expected INCOMPLETE paused, got exit {exit}: {json}");
        }
        jobs.push(job_id(&json)?);
        resume.push(took);
    }
    let subjects = [
        ("analyze (detach)", overshoot(detach)),
        ("job wait (running)", overshoot(waits)),
        ("digest (resume only)", overshoot(resume)),
    ];

    for id in &jobs {
        let _ = rig.command(&["job", "cancel", id]).output();
    }

    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "call wall time minus its budget ({budget}), {calls} calls each, pacing {PACE_MS} ms/unit"
    )?;
    writeln!(
        out,
        "{:<22} {:>10} {:>10} {:>10} {:>14}",
        "subject", "p50", "p95", "max", "p95 / target"
    )?;
    writeln!(
        out,
        "{:<22} {:>10.2?} {:>10.2?} {:>10.2?} {:>14}",
        "/bin/true (whole run)",
        percentile(&floor, 50),
        percentile(&floor, 95),
        percentile(&floor, 100),
        "-"
    )?;
    for (name, sorted) in &subjects {
        let p95 = percentile(sorted, 95);
        writeln!(
            out,
            "{:<22} {:>10.2?} {:>10.2?} {:>10.2?} {:>13.2}x",
            name,
            percentile(sorted, 50),
            p95,
            percentile(sorted, 100),
            p95.as_secs_f64() / TARGET_P95.as_secs_f64()
        )?;
    }
    writeln!(out, "target: p95 <= {TARGET_P95:?} (ratio <= 1.00x)")?;
    Ok(())
}
