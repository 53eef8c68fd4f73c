//! What checkpoints cost a writer: `reftool import` of 200 000 CSV rows (no pacing, no budget,
//! a fresh database each run, its chunks committed with their checkpoints) against the same
//! rows inserted by one plain rusqlite transaction into the same table, reading the same file.
//! Throughput in rows per second, medians of 3 runs each, and their ratio. Target: ≥ 0.5.
//!
//! reftool's time is the whole process as a caller sees it (start-up, state database, job
//! record, checkpoints, the final response); the baseline's is the file read and the inserts.
//! A third subject commits the plain inserts in transactions of reftool's chunk size: what a
//! commit per chunk (each an fsync) would cost. reftool commits on its checkpoint cadence
//! instead (every chunk only when paced; unpaced, a few times a second and at a stop).
//!
//! Run: `cargo bench -p reftool --bench import` (`IMPORT_ROWS`, `IMPORT_RUNS` override).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;

const DEFAULT_ROWS: u64 = 200_000;
const DEFAULT_RUNS: usize = 3;
const TARGET_RATIO: f64 = 0.5;
/// reftool's rows per chunk (`commands::import::CHUNK_ROWS`), for the third subject.
const CHUNK_ROWS: u64 = reftool::commands::import::CHUNK_ROWS as u64;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// reftool imports `rows.csv` into `db`; its wall time.
fn reftool_import(exe: &Path, dir: &Path, db: &str, rows: u64) -> Result<Duration> {
    let started = Instant::now();
    let output = Command::new(exe)
        .args(["import", "rows.csv", "--db", db, "--budget", "0"])
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("REFTOOL_STATE_DIR", dir.join("state"))
        .env("REFTOOL_PACE_MS", "0")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()?;
    let took = started.elapsed();
    let json: Value = serde_json::from_slice(&output.stdout).context("no envelope")?;
    if json["meta"]["exit_code"] != 0 || json["data"]["rows"] != rows {
        bail!("reftool import did not import {rows} rows: {json}");
    }
    Ok(took)
}

/// The same rows into the same table by plain transactions of `per_tx` rows each (`None`: one
/// transaction for all); its wall time.
fn plain_import(csv: &Path, db: &Path, rows: u64, per_tx: Option<u64>) -> Result<Duration> {
    let started = Instant::now();
    let mut conn = rusqlite::Connection::open(db)?;
    let mut input = BufReader::new(std::fs::File::open(csv)?);
    let mut header = String::new();
    input.read_line(&mut header)?;
    let columns: Vec<String> =
        header.trim_end().split(',').map(|c| format!("\"{}\"", c.replace('"', "\"\""))).collect();
    conn.execute_batch(&format!(
        "CREATE TABLE rows (_line INTEGER PRIMARY KEY, {})",
        columns.iter().map(|c| format!("{c} TEXT")).collect::<Vec<_>>().join(", ")
    ))?;
    let insert = format!(
        "INSERT INTO rows (_line, {}) VALUES (?1, {})",
        columns.join(", "),
        (2..=columns.len() + 1).map(|i| format!("?{i}")).collect::<Vec<_>>().join(", ")
    );
    let mut lines = input.lines();
    let mut line_no: u64 = 0;
    let mut end = false;
    while !end {
        let tx = conn.transaction()?;
        let mut in_tx = 0u64;
        {
            let mut stmt = tx.prepare_cached(&insert)?;
            while per_tx.is_none_or(|n| in_tx < n) {
                let Some(line) = lines.next() else {
                    end = true;
                    break;
                };
                let line = line?;
                if line.trim().is_empty() {
                    continue;
                }
                line_no += 1;
                in_tx += 1;
                let values =
                    std::iter::once(rusqlite::types::Value::Integer(i64::try_from(line_no)?))
                        .chain(line.split(',').map(|f| rusqlite::types::Value::Text(f.to_owned())));
                stmt.execute(rusqlite::params_from_iter(values))?;
            }
        }
        tx.commit()?;
    }
    if line_no != rows {
        bail!("the baseline read {line_no} rows, not {rows}");
    }
    Ok(started.elapsed())
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times.get(times.len() / 2).copied().unwrap_or_default()
}

fn main() -> Result<()> {
    let rows: u64 = env_or("IMPORT_ROWS", DEFAULT_ROWS);
    let runs: usize = env_or("IMPORT_RUNS", DEFAULT_RUNS);
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_reftool"));
    let dir = tempfile::tempdir()?;
    let csv = dir.path().join("rows.csv");
    let mut text = String::from("n,label,double\n");
    for n in 1..=rows {
        text.push_str(&format!("{n},row {n},{}\n", n * 2));
    }
    std::fs::write(&csv, text)?;

    let (mut tool, mut plain, mut chunked) =
        (Vec::with_capacity(runs), Vec::with_capacity(runs), Vec::with_capacity(runs));
    for run in 0..runs {
        // Alternate, so drift on a shared machine hits all alike.
        let db = |name: &str| dir.path().join(format!("{name}{run}.db"));
        plain.push(plain_import(&csv, &db("plain"), rows, None)?);
        chunked.push(plain_import(&csv, &db("chunked"), rows, Some(CHUNK_ROWS))?);
        tool.push(reftool_import(&exe, dir.path(), &format!("tool{run}.db"), rows)?);
    }
    let (tool, plain, chunked) = (median(tool), median(plain), median(chunked));
    let rate = |d: Duration| rows as f64 / d.as_secs_f64().max(1e-9);
    let ratio = rate(tool) / rate(plain);

    let mut out = std::io::stdout().lock();
    writeln!(out, "import of {rows} rows, median of {runs} runs each")?;
    writeln!(out, "{:<34} {:>10} {:>14}", "subject", "time", "rows/s")?;
    writeln!(
        out,
        "{:<34} {:>10.2?} {:>14.0}",
        "plain rusqlite, one transaction",
        plain,
        rate(plain)
    )?;
    writeln!(out, "{:<34} {:>10.2?} {:>14.0}", "reftool import (checkpointed)", tool, rate(tool))?;
    writeln!(
        out,
        "{:<34} {:>10.2?} {:>14.0}",
        format!("plain rusqlite, {CHUNK_ROWS} rows/transaction"),
        chunked,
        rate(chunked)
    )?;
    writeln!(out, "throughput ratio reftool / plain: {ratio:.2} (target >= {TARGET_RATIO})")?;
    writeln!(
        out,
        "throughput ratio reftool / plain at a commit per chunk: {:.2}",
        rate(tool) / rate(chunked)
    )?;
    Ok(())
}
