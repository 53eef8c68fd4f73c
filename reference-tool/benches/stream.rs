//! Time to the first line of `reftool files DIR --stream` against the time to the whole list
//! (the stream's summary, and the envelope of the same list without `--stream`), as medians
//! and ratios. Each item is paced (`REFTOOL_PACE_MS`), so the list takes a known while and the
//! first line must come after about one item's pace, not after all of them.
//!
//! Run: `cargo bench -p reftool --bench stream` (optimized). `STREAM_RUNS` (default 5),
//! `STREAM_ITEMS` (default 50) and `STREAM_PACE_MS` (default 20) change the figures.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// (first line, end of stdout) of one run.
fn run(reftool: &Path, dir: &Path, pace: u64, stream: bool) -> (Duration, Duration) {
    let mut args = vec!["files".to_owned(), dir.display().to_string(), "--limit".into()];
    args.push("10000".into());
    if stream {
        args.push("--stream".into());
    }
    let started = Instant::now();
    let mut child = Command::new(reftool)
        .args(&args)
        .env("REFTOOL_PACE_MS", pace.to_string())
        .env("REFTOOL_STATE_DIR", dir.join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", reftool.display()));
    let Some(stdout) = child.stdout.take() else { panic!("no stdout pipe") };
    let mut reader = BufReader::new(stdout);
    let mut first = String::new();
    let _ = reader.read_line(&mut first);
    let first_at = started.elapsed();
    let mut rest = Vec::new();
    let _ = reader.read_to_end(&mut rest);
    let end_at = started.elapsed();
    match child.wait() {
        Ok(status) if status.success() => (first_at, end_at),
        other => panic!("files failed: {other:?}"),
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let runs = env_or("STREAM_RUNS", 5).max(1);
    let items = env_or("STREAM_ITEMS", 50).max(1);
    let pace = env_or("STREAM_PACE_MS", 20);
    let reftool = Path::new(env!("CARGO_BIN_EXE_reftool"));
    let dir = std::env::temp_dir().join(format!("reftool-bench-stream-{}", std::process::id()));
    let tree = dir.join("tree");
    if let Err(e) = std::fs::create_dir_all(&tree) {
        panic!("cannot create {}: {e}", tree.display());
    }
    for i in 0..items {
        let _ = std::fs::write(tree.join(format!("file-{i:05}.txt")), i.to_string());
    }
    let mut stream_first = Vec::new();
    let mut stream_end = Vec::new();
    let mut plain_first = Vec::new();
    for _ in 0..runs {
        let (first, end) = run(reftool, &tree, pace, true);
        stream_first.push(first);
        stream_end.push(end);
        plain_first.push(run(reftool, &tree, pace, false).0);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let (first, end, plain) = (median(stream_first), median(stream_end), median(plain_first));
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "files --stream: {items} items at {pace} ms each, median of {runs} runs");
    let _ = writeln!(out, "{:<34} {:>10.1?}", "stream: first line", first);
    let _ = writeln!(out, "{:<34} {:>10.1?}", "stream: summary (whole list)", end);
    let _ = writeln!(out, "{:<34} {:>10.1?}", "no --stream: the envelope", plain);
    let _ = writeln!(
        out,
        "first line / whole list: {:.3} (1/{items} = {:.3} is the floor)",
        first.as_secs_f64() / end.as_secs_f64().max(1e-9),
        1.0 / items as f64
    );
}
