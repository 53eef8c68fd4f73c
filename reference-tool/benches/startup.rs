//! Start-up time of `reftool manifest` and `reftool version`, next to `/bin/true` measured in
//! the same run, as medians and ratios.
//!
//! Run: `cargo bench -p reftool --bench startup` (cargo builds the binary with the bench
//! profile, i.e. optimized). `STARTUP_RUNS=200` changes the number of runs per subject.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn measure(program: &Path, args: &[&str], state: &Path, runs: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        let status = Command::new(program)
            .args(args)
            .env("REFTOOL_STATE_DIR", state)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let elapsed = started.elapsed();
        match status {
            Ok(status) if status.success() => times.push(elapsed),
            other => panic!("{} {args:?} failed: {other:?}", program.display()),
        }
    }
    times.sort();
    times
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() - 1) * p / 100]
}

fn main() {
    let runs: usize =
        std::env::var("STARTUP_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let reftool = Path::new(env!("CARGO_BIN_EXE_reftool"));
    let state = std::env::temp_dir().join(format!("reftool-bench-{}", std::process::id()));
    let baseline = measure(Path::new("/bin/true"), &[], &state, runs);
    let base = percentile(&baseline, 50);
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "start-up, {runs} runs each (binary: {})", reftool.display());
    let _ = writeln!(out, "{:<18} {:>10} {:>10} {:>8}", "subject", "median", "p90", "ratio");
    let _ = writeln!(
        out,
        "{:<18} {:>10.2?} {:>10.2?} {:>8}",
        "/bin/true",
        base,
        percentile(&baseline, 90),
        "1.0x"
    );
    for args in [&["manifest"][..], &["version"]] {
        let times = measure(reftool, args, &state, runs);
        let median = percentile(&times, 50);
        let ratio = median.as_secs_f64() / base.as_secs_f64().max(1e-9);
        let _ = writeln!(
            out,
            "{:<18} {:>10.2?} {:>10.2?} {:>7.1}x",
            format!("reftool {}", args.join(" ")),
            median,
            percentile(&times, 90),
            ratio
        );
    }
    let _ = std::fs::remove_dir_all(&state);
}
