//! Wake-up latency of `job wait`: from the moment a job ends to the moment its waiter returns.
//!
//! A waiter blocks in `runtime::wake::wait_for_job`; a writer thread ends the job. Two ways:
//!
//! - **wake**: the writer prepares the outcome file exactly as the atomic write does (temp file,
//!   fsync) and the clock starts just before the `rename` that makes the end visible and the
//!   ring of the job's doorbells that follows it (as `JobStore::finish` does); this is the
//!   latency of the wake-up mechanism itself (target: median ≤ 5 ms; a 1 s poll gives ~500 ms).
//! - **finish()**: the clock starts when the writer calls `JobStore::finish` (write + fsyncs +
//!   rename + row commit): what a waiter sees end to end, dominated by the disk's fsync.
//! - **baseline**: the same thread hand-off through a Unix socket pair (one thread blocked in
//!   `read`, the other writes a byte). No mechanism can wake a waiter faster than the
//!   scheduler does; on a loaded machine this floor dominates, and the ratio shows what the
//!   job machinery adds on top of it.
//!
//! Run: `cargo bench -p reftool --bench wake` (`WAKE_RUNS` overrides the 50 runs).

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use reftool::runtime::doorbell;
use reftool::runtime::identity::InvocationIdentity;
use reftool::runtime::jobs::{
    Claim, DEFAULT_IDLE_TIMEOUT_MS, DEFAULT_MAX_LIFETIME_MS, JobOutcome, JobStore, NewJob,
    RESULT_FILE, ensure_schema,
};
use reftool::runtime::process::ProcessIdentity;
use reftool::runtime::wake::{WaitOutcome, wait_for_job};
use rusqlite::Connection;

const DEFAULT_RUNS: usize = 50;
/// How long the writer lets the waiter sleep before ending the job.
const SETTLE: Duration = Duration::from_millis(30);

fn open(store: &JobStore) -> Result<Connection> {
    let conn = Connection::open(store.state_dir().join("state.db"))?;
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    Ok(conn)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(idx).copied().unwrap_or_default()
}

fn main() -> Result<()> {
    let runs: usize =
        std::env::var("WAKE_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_RUNS);
    let tmp = tempfile::tempdir()?;
    let store = JobStore::new(tmp.path().join("state"));
    std::fs::create_dir_all(store.state_dir())?;
    ensure_schema(&open(&store)?)?;
    let me = ProcessIdentity::current()?;
    let mut wake = Vec::with_capacity(runs);
    let mut end_to_end = Vec::with_capacity(runs);
    for run in 0..2 * runs {
        let via_finish = run % 2 == 1;
        let identity = InvocationIdentity {
            command_path: "bench".into(),
            args: vec![run.to_string().into()],
            cwd: tmp.path().to_owned(),
            tool_version: "bench".into(),
            stdin_digest: None,
            idempotency_key: None,
            instance: "bench".into(),
        };
        let new = NewJob {
            identity,
            argv: vec!["bench".into()],
            owner: me,
            lifetime_ms: DEFAULT_MAX_LIFETIME_MS,
            idle_timeout_ms: DEFAULT_IDLE_TIMEOUT_MS,
            stdin_spool: None,
            extra: serde_json::Value::Null,
        };
        let Claim::Created(job) = store.create_or_attach(&open(&store)?, new)? else {
            bail!("run {run}: the job was not created");
        };
        let id = job.record.job_id.clone();
        let dir = job.dir.clone();
        let (started, returned) = std::thread::scope(|s| -> Result<(Instant, Instant)> {
            let writer = s.spawn(|| -> Result<Instant> {
                let conn = open(&store)?;
                let outcome = JobOutcome::finished(0, serde_json::json!({"ok": true}));
                if via_finish {
                    std::thread::sleep(SETTLE);
                    let started = Instant::now();
                    store.finish(&conn, "bench", &id, &outcome)?;
                    return Ok(started);
                }
                let tmp = dir.join(".result.json.bench");
                let mut file = std::fs::File::create(&tmp)?;
                file.write_all(&serde_json::to_vec_pretty(&outcome)?)?;
                file.sync_all()?;
                drop(file);
                std::thread::sleep(SETTLE);
                let started = Instant::now();
                std::fs::rename(&tmp, dir.join(RESULT_FILE))?;
                doorbell::ring(&dir);
                Ok(started)
            });
            let conn = open(&store)?;
            let out = wait_for_job(
                &store,
                &conn,
                "bench",
                &id,
                Some(Instant::now() + Duration::from_secs(30)),
            )?;
            let returned = Instant::now();
            if !matches!(out, WaitOutcome::Ended(_)) {
                bail!("run {run}: the waiter did not see the end");
            }
            let started = writer.join().map_err(|_| anyhow::anyhow!("writer panicked"))??;
            Ok((started, returned))
        })
        .with_context(|| format!("run {run}"))?;
        let latency = returned.saturating_duration_since(started);
        if via_finish { end_to_end.push(latency) } else { wake.push(latency) }
    }
    wake.sort();
    end_to_end.sort();
    let mut baseline = Vec::with_capacity(runs);
    for _ in 0..runs {
        use std::io::Read;
        let (mut a, mut b) = std::os::unix::net::UnixStream::pair()?;
        let latency = std::thread::scope(|s| -> Result<Duration> {
            let writer = s.spawn(move || -> Result<Instant> {
                std::thread::sleep(SETTLE);
                let started = Instant::now();
                a.write_all(b"x")?;
                Ok(started)
            });
            let mut byte = [0u8; 1];
            b.read_exact(&mut byte)?;
            let returned = Instant::now();
            let started = writer.join().map_err(|_| anyhow::anyhow!("writer panicked"))??;
            Ok(returned.saturating_duration_since(started))
        })?;
        baseline.push(latency);
    }
    baseline.sort();
    let mut out = std::io::stdout().lock();
    writeln!(out, "wake-up latency of job wait over {runs} runs (a doorbell FIFO per waiter)")?;
    for (label, v) in [
        ("wake (from the rename)", &wake),
        ("end to end (from finish())", &end_to_end),
        ("baseline (socket hand-off)", &baseline),
    ] {
        let median = percentile(v, 0.5);
        writeln!(
            out,
            "  {label:<30} median {:>8.3} ms  p90 {:>8.3} ms  max {:>8.3} ms  (1 s poll / median: {:.0}x)",
            median.as_secs_f64() * 1e3,
            percentile(v, 0.9).as_secs_f64() * 1e3,
            v.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
            0.5 / median.as_secs_f64().max(1e-6),
        )?;
    }
    let target = Duration::from_millis(5);
    let median = percentile(&wake, 0.5);
    let fsync = percentile(&end_to_end, 0.5).saturating_sub(median);
    writeln!(
        out,
        "  the difference ({:.3} ms) is the atomic write's fsyncs and the row commit",
        fsync.as_secs_f64() * 1e3
    )?;
    let floor = percentile(&baseline, 0.5);
    writeln!(
        out,
        "  wake median over the scheduler's floor: +{:.3} ms ({:.1}x the socket hand-off)",
        median.saturating_sub(floor).as_secs_f64() * 1e3,
        median.as_secs_f64() / floor.as_secs_f64().max(1e-6),
    )?;
    writeln!(out, "  target median <= 5 ms: {}", if median <= target { "met" } else { "MISSED" })?;
    Ok(())
}
