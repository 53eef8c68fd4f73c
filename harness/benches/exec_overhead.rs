//! conform's own overhead per step: spawning `/bin/true` bare with
//! `std::process::Command::status()` against running the same through `exec::run` in a sandbox
//! environment (own process group, pipes for stdout and stderr, the poll loop, the exit waiter).
//!
//! `cargo bench -p conform --bench exec_overhead` prints the median of each (and of
//! `Command::output()`, the nearest bare equivalent with captured pipes), the difference, and
//! the ratio. The runs alternate, so that drift in the machine's load hits both sides alike.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use conform::exec::{self, Program, Termination};
use conform::sandbox::Sandbox;

/// Runs per side.
const RUNS: usize = 200;

/// Untimed runs per side first (page cache, allocator, thread stacks).
const WARM_UP: usize = 10;

const PROGRAM: &str = "/bin/true";

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort_unstable();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let sandbox = Sandbox::new()?;
    let invocation = sandbox.invocation(Program::argv([PROGRAM]));

    let bare = || -> Result<Duration, Box<dyn std::error::Error>> {
        let began = Instant::now();
        let status = Command::new(PROGRAM)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        let took = began.elapsed();
        if !status.success() {
            return Err(format!("{PROGRAM} failed: {status}").into());
        }
        Ok(took)
    };
    // The nearest bare equivalent of a captured step: stdout and stderr through pipes.
    let captured = || -> Result<Duration, Box<dyn std::error::Error>> {
        let began = Instant::now();
        let output = Command::new(PROGRAM).stdin(Stdio::null()).output()?;
        let took = began.elapsed();
        if !output.status.success() {
            return Err(format!("{PROGRAM} failed: {}", output.status).into());
        }
        Ok(took)
    };
    let driven = || -> Result<Duration, Box<dyn std::error::Error>> {
        let began = Instant::now();
        let outcome = exec::run(&invocation)?;
        let took = began.elapsed();
        if outcome.termination != Termination::Exited(0) {
            return Err(format!("{PROGRAM} through exec::run: {:?}", outcome.termination).into());
        }
        Ok(took)
    };

    for _ in 0..WARM_UP {
        bare()?;
        captured()?;
        driven()?;
    }
    let mut bare_samples = Vec::with_capacity(RUNS);
    let mut captured_samples = Vec::with_capacity(RUNS);
    let mut driven_samples = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        bare_samples.push(bare()?);
        captured_samples.push(captured()?);
        driven_samples.push(driven()?);
    }
    let bare_median = median(&mut bare_samples);
    let captured_median = median(&mut captured_samples);
    let driven_median = median(&mut driven_samples);
    let ratio = driven_median.as_secs_f64() / bare_median.as_secs_f64().max(f64::EPSILON);
    let leaked = sandbox.sweep();

    let mut out = std::io::stdout().lock();
    writeln!(out, "exec_overhead: {RUNS} runs of {PROGRAM} per side")?;
    writeln!(out, "  bare Command::status()   median {bare_median:>10.3?}")?;
    writeln!(out, "  bare Command::output()   median {captured_median:>10.3?}")?;
    writeln!(out, "  exec::run in a sandbox   median {driven_median:>10.3?}")?;
    // Signed: within noise the driven side can come out ahead.
    let overhead_us = (driven_median.as_secs_f64() - bare_median.as_secs_f64()) * 1e6;
    writeln!(out, "  overhead per step        {overhead_us:>+9.1}µs")?;
    writeln!(out, "  ratio exec::run / bare   {ratio:>10.2}")?;
    writeln!(out, "  processes left behind    {:>10}", leaked.len())?;
    Ok(())
}
