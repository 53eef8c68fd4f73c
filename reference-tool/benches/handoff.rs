//! How precisely reftool keeps the call budget, and how fast it hands off and wakes:
//!
//! - detach overshoot: `analyze --budget 300ms` (a detached job), process exit minus 300 ms;
//! - resume overshoot: `digest --budget 300ms` (stops at its next checkpoint), the same;
//! - SIGTERM handoff: from the signal to the exit of `analyze --budget 30s`;
//! - wake: `job wait` exit minus the job's own end time (`ended_at_ms` in `result.json`).
//!
//! Target (docs/contract.md §3): budget + 50 ms. Run: `cargo bench -p reftool --bench handoff`;
//! `HANDOFF_RUNS=20` changes the number of runs per figure (default 8).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const BUDGET: Duration = Duration::from_millis(300);

struct Bench {
    exe: PathBuf,
    dir: PathBuf,
}

impl Bench {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.args(args)
            .current_dir(&self.dir)
            .env("REFTOOL_STATE_DIR", self.dir.join("state"))
            .env("REFTOOL_PACE_MS", "20")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        cmd
    }

    fn json(&self, args: &[&str]) -> (serde_json::Value, Duration) {
        let started = Instant::now();
        let out = self.command(args).output().expect("reftool runs");
        let took = started.elapsed();
        (serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null), took)
    }

    fn cancel(&self, answer: &serde_json::Value) {
        if let Some(id) = answer["data"]["job_id"].as_str() {
            let _ = self.command(&["job", "cancel", id]).output();
        }
    }
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted.get((sorted.len().saturating_sub(1)) * p / 100).copied().unwrap_or_default()
}

fn now_ms() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0)
}

fn report(out: &mut impl Write, name: &str, mut times: Vec<Duration>, reference: Duration) {
    times.sort();
    let median = percentile(&times, 50);
    let _ = writeln!(
        out,
        "{name:<22} {:>10.1?} {:>10.1?} {:>10.1?} {:>8.3}",
        median,
        percentile(&times, 90),
        times.last().copied().unwrap_or_default(),
        median.as_secs_f64() / reference.as_secs_f64().max(1e-9)
    );
}

fn main() {
    let runs: usize = std::env::var("HANDOFF_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(8);
    let dir = std::env::temp_dir().join(format!("reftool-handoff-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bench = Bench { exe: PathBuf::from(env!("CARGO_BIN_EXE_reftool")), dir: dir.clone() };
    let mut csv = String::from("n,square\n");
    for n in 1..=60_000u64 {
        csv.push_str(&format!("{n},{}\n", n * n));
    }
    std::fs::write(dir.join("data.csv"), &csv).expect("fixture");
    std::fs::write(dir.join("small.csv"), "n\n1\n2\n").expect("fixture");
    let big: String = (1..=400_000u32).map(|n| format!("{n}\n")).collect();
    std::fs::write(dir.join("big.txt"), big).expect("fixture");

    let mut detach = Vec::new();
    let mut resume = Vec::new();
    let mut sigterm = Vec::new();
    let mut wake = Vec::new();
    for i in 0..runs {
        // Each run its own file name, so no run attaches to the previous one's job.
        let name = format!("data-{i}.csv");
        std::fs::copy(dir.join("data.csv"), dir.join(&name)).expect("copy");
        let (answer, took) = bench.json(&["analyze", &name, "--budget", "300ms"]);
        detach.push(took.saturating_sub(BUDGET));
        bench.cancel(&answer);

        let name = format!("big-{i}.txt");
        std::fs::copy(dir.join("big.txt"), dir.join(&name)).expect("copy");
        let (answer, took) = bench.json(&["digest", &name, "--budget", "300ms"]);
        resume.push(took.saturating_sub(BUDGET));
        bench.cancel(&answer);

        let name = format!("term-{i}.csv");
        std::fs::copy(dir.join("data.csv"), dir.join(&name)).expect("copy");
        let child = bench.command(&["analyze", &name, "--budget", "30s"]).spawn().expect("spawn");
        std::thread::sleep(Duration::from_millis(200));
        let signalled = Instant::now();
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(0));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let out = child.wait_with_output().expect("wait");
        sigterm.push(signalled.elapsed());
        bench.cancel(&serde_json::from_slice(&out.stdout).unwrap_or_default());

        // A job ending about 200 ms after the wait starts.
        let name = format!("wake-{i}.csv");
        let rows: String = (1..=9_000u64).map(|n| format!("{n},{}\n", n * n)).collect();
        std::fs::write(dir.join(&name), format!("n,square\n{rows}")).expect("fixture");
        let (answer, _) = bench.json(&["analyze", &name, "--budget", "1ms"]);
        let Some(id) = answer["data"]["job_id"].as_str() else { continue };
        let (_, _) = bench.json(&["job", "wait", id, "--budget", "0"]);
        let exited = now_ms();
        let result = dir.join("state/jobs/n-default").join(id).join("result.json");
        let ended = std::fs::read(&result)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["ended_at_ms"].as_u64());
        if let Some(ended) = ended {
            let lag = u64::try_from(exited.saturating_sub(u128::from(ended))).unwrap_or(0);
            wake.push(Duration::from_millis(lag));
        }
    }
    let mut out = std::io::stdout().lock();
    let _ =
        writeln!(out, "handoff, {runs} runs each, budget {BUDGET:?} (target: overshoot < 50ms)");
    let _ = writeln!(
        out,
        "{:<22} {:>10} {:>10} {:>10} {:>8}",
        "figure", "median", "p90", "max", "÷budget"
    );
    report(&mut out, "detach overshoot", detach, BUDGET);
    report(&mut out, "resume overshoot", resume, BUDGET);
    report(&mut out, "SIGTERM to exit", sigterm, BUDGET);
    report(&mut out, "job end to wait exit", wake, BUDGET);
    let _ = remove(&dir);
}

fn remove(dir: &Path) -> std::io::Result<()> {
    std::fs::remove_dir_all(dir)
}
