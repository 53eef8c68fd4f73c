#!/usr/bin/env python3
"""How long `conform run` takes over reftool's whole catalogue at each `-j`, quiet and under load.

The measurement behind the default of `conform run -j` (see `default_jobs` in
harness/src/cli.rs). Scenarios mostly wait on the tool's pacing, so the wall time of a run
falls with `-j` towards its floor, the longest single scenario; this prints, side by side, the
wall time of each level quiet and with three CPU-burning loops beside it, the failures, and
the load average before each run (other builds on a shared machine count too), then two series
of runs at the default, quiet and under load, which the default must pass without a failure,
each against the longest scenario of the `-j 1` run (the longest one alone).

Run it by hand after `cargo build -p conform -p reftool`, from anywhere:

    scripts/bench-jobs.py                        # -j 1, 4, 8, 16 and the default; 10 runs
                                                 # at the default quiet, 10 under load
    scripts/bench-jobs.py --jobs 8,16 --series 0 # a quick look

"default" is a run without `-j`. Not a test: its figures depend on the machine.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BURNERS = 3


def load_average():
    with open("/proc/loadavg", encoding="ascii") as f:
        return " ".join(f.read().split()[:3])


class Burners:
    """Three `sh -c 'while :; do :; done'` loops, killed (by their own pids) on exit."""

    def __init__(self, count):
        self.count = count
        self.procs = []

    def __enter__(self):
        for _ in range(self.count):
            self.procs.append(subprocess.Popen(["sh", "-c", "while :; do :; done"]))
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        self.procs.clear()
        return False


def run_once(args, jobs):
    """One run of the whole catalogue: (wall seconds, failures, longest scenario ms, id)."""
    cmd = [str(args.conform), "run", str(args.reftool), "--profile", str(args.profile)]
    cmd += ["--format", "json"]
    if jobs != "default":
        cmd += ["-j", str(jobs)]
    with tempfile.TemporaryDirectory(prefix="bench-jobs-") as cwd:
        started = time.monotonic()
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, check=False)
        wall = time.monotonic() - started
    try:
        data = json.loads(out.stdout)["data"]
    except (ValueError, KeyError):
        sys.stderr.write(out.stderr.decode(errors="replace"))
        return wall, None, 0, "?", out.returncode
    scenarios = data["scenarios"]
    bad = [s["id"] for s in scenarios if s["status"] not in ("pass",)]
    longest = max(scenarios, key=lambda s: s["duration_ms"])
    if bad:
        sys.stderr.write(f"  -j {jobs}: not passed: {', '.join(bad)}\n")
    return wall, len(bad), longest["duration_ms"], longest["id"], out.returncode


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conform", type=Path, default=ROOT / "target/debug/conform")
    parser.add_argument("--reftool", type=Path, default=ROOT / "target/debug/reftool")
    parser.add_argument("--profile", type=Path, default=ROOT / "reference-tool/conform.toml")
    parser.add_argument("--jobs", default="1,4,8,16,default",
                        help="comma-separated levels; `default` runs without -j")
    parser.add_argument("--series", type=int, default=10,
                        help="loaded runs at the default, after the table")
    parser.add_argument("--no-quiet", action="store_true", help="only the loaded runs")
    args = parser.parse_args()
    # A Ctrl-C ends the burners through the context manager, not behind it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))

    print(f"cores: {os.cpu_count()}; burners: {BURNERS}; conform: {args.conform}", flush=True)
    header = f"{'-j':>8} {'quiet s':>8} {'load':>15} {'fail':>4} {'loaded s':>9} {'load':>15} {'fail':>4}  longest scenario (quiet; loaded)"
    print(header, flush=True)
    longest_seen = (0, "")
    alone = None
    for jobs in args.jobs.split(","):
        jobs = jobs.strip()
        row = f"{jobs:>8}"
        if args.no_quiet:
            row += f" {'-':>8} {'-':>15} {'-':>4}"
            longest = None
        else:
            load = load_average()
            wall, fails, ms, sid, _ = run_once(args, jobs)
            row += f" {wall:8.1f} {load:>15} {fails if fails is not None else 'ERR':>4}"
            longest = (ms, sid)
            longest_seen = max(longest_seen, longest)
            if jobs == "1":
                alone = ms / 1000
        with Burners(BURNERS):
            load = load_average()
            wall, fails, ms, sid, _ = run_once(args, jobs)
        row += f" {wall:9.1f} {load:>15} {fails if fails is not None else 'ERR':>4}"
        if longest:
            row += f"  {longest[0] / 1000:.1f} s {longest[1]}"
        row += f"; loaded: {ms / 1000:.1f} s {sid}"
        print(row, flush=True)
    if longest_seen[0]:
        print(f"longest single scenario: {longest_seen[0] / 1000:.1f} s ({longest_seen[1]})")
    if alone:
        print(f"longest scenario alone (-j 1): {alone:.1f} s")

    if args.series:
        for burners in (0, BURNERS):
            beside = f"{burners} burners beside each" if burners else "quiet"
            print(f"\n{args.series} runs at the default, {beside}", flush=True)
            walls, failed_runs = [], 0
            with Burners(burners):
                for n in range(args.series):
                    load = load_average()
                    wall, fails, _, _, code = run_once(args, "default")
                    walls.append(wall)
                    failed_runs += 1 if fails != 0 else 0
                    print(f"  run {n + 1:>2}: {wall:6.1f} s  fail {fails}  exit {code}  load {load}",
                          flush=True)
            ratio = f", max / longest alone {max(walls) / alone:.2f}" if alone else ""
            print(f"series ({beside}): min {min(walls):.1f} s, median "
                  f"{sorted(walls)[len(walls) // 2]:.1f} s, max {max(walls):.1f} s{ratio}, "
                  f"runs with a failure: {failed_runs} of {args.series}", flush=True)

if __name__ == "__main__":
    main()
