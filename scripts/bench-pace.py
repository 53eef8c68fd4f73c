#!/usr/bin/env python3
"""Does the default `conform run` (no -j) hold on this machine, for tools unlike reftool?

The measurement behind conform's pace (harness/src/pace.rs) and its confirmed verdicts. For
each subject it runs the default `conform run` several times and prints, in one table: the
wall time of each run, the failures that stood (a correct subject has none, or only its known
defects), the flaky ones (failed beside the others, passed alone: reported, not counted), the
exit code, the pace's first and highest limit, the wall time of one `-j 4` run and the longest
scenario of that run (the floor of any run), and each default run's ratio to it.

Subjects (`--subjects`, comma-separated):
  reftool        the reference tool, native, mostly sleeping
  pyagent        the independent Python implementation (a 50 ms start-up of CPU per call)
  pyagent-burn   the same, every process burning 250 ms of CPU first (PYAGENT_STARTUP_BURN_MS)
  notes          the foreign-framework fixture: a 600 ms start-up, seconds-based flags, one
                 known defect (async-job-status-exits-14)
  kit            the spec kit's `good` fixture (Python) under the kit profile
  faketool       conform's own small Python fixture with a resumable role

`--beside N` adds N CPU-burning loops for the whole measurement; `--at-once K` runs K conform
runs of each subject at the same time (each round counts as K runs). Python resolves as
`.ci/run` does (the interpreter, not a version manager's shim). Not a test: its figures depend
on the machine. Build first: `cargo build -p conform -p reftool`.

    scripts/bench-pace.py --subjects pyagent,notes --runs 10
    scripts/bench-pace.py --subjects reftool --at-once 3 --runs 30 --no-j4
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYAGENT = ROOT / "tests/fixtures/tools/pyagent"
FOREIGN = ROOT / "tests/fixtures/tools/foreign"
KIT = ROOT / "harness/tests/fixtures/tools/kit"
FAKETOOL = ROOT / "harness/tests/fixtures/tools/faketool"

# Failures a subject is known to have (its one true defect), not counted as false failures.
KNOWN = {"notes": {"async-job-status-exits-14"}}


def python_first_on_path(env):
    """The interpreter itself first on PATH, as .ci/run does."""
    exe = Path(sys.executable).resolve()
    bindir = Path(tempfile.mkdtemp(prefix="bench-pace-python-"))
    (bindir / "python3").symlink_to(exe)
    env["PATH"] = f"{bindir}:{env.get('PATH', '')}"
    return bindir


def copy_profile(src, extra_env, workdir):
    """A copy of a profile beside copies of its fixtures, with lines added to [tool.env]."""
    dest = workdir / "conform.toml"
    for entry in src.parent.iterdir():
        if entry.is_file() and entry != src:
            shutil.copy(entry, workdir / entry.name)
    text = src.read_text()
    if extra_env:
        lines = "".join(f'{k} = "{v}"\n' for k, v in extra_env.items())
        if "[tool.env]\n" not in text:
            text = "[tool.env]\n" + lines + "\n" + text
        else:
            text = text.replace("[tool.env]\n", "[tool.env]\n" + lines, 1)
    dest.write_text(text)
    return dest


def faketool_profile(workdir):
    dest = workdir / "conform.toml"
    dest.write_text(
        '[tool]\nenv = { FAKETOOL_PACE_MS = "150" }\n\n'
        '[roles.resume_reader]\nargv = ["count", "--units", "10"]\n\n'
        '[kit]\nread = [["greet"], ["manifest"]]\ninvalid = [["greet", "--bogus"]]\n'
        'destructive = [{ argv = ["wipe"], dry_run_flag = "--dry-run" }]\n'
    )
    return dest


def subject(name, workdir, reftool):
    """(tool, profile, extra conform args, env additions) of a subject."""
    if name == "reftool":
        return reftool, ROOT / "reference-tool/conform.toml", [], {}
    if name == "pyagent":
        return PYAGENT / "pyagent.py", PYAGENT / "fixtures/conform.toml", [], {}
    if name == "pyagent-burn":
        profile = copy_profile(
            PYAGENT / "fixtures/conform.toml", {"PYAGENT_STARTUP_BURN_MS": "250"}, workdir
        )
        return PYAGENT / "pyagent.py", profile, [], {}
    if name == "notes":
        return FOREIGN / "notes", FOREIGN / "conform.toml", [], {"PATH_FIRST": str(FOREIGN)}
    if name == "kit":
        return KIT / "good", KIT / "conform.toml", [], {}
    if name == "faketool":
        return FAKETOOL, faketool_profile(workdir), [], {}
    raise SystemExit(f"unknown subject {name}")


def start(conform, tool, profile, extra, env, jobs):
    cmd = [str(conform), "run", str(tool), "--profile", str(profile), "--format", "json"]
    cmd += extra
    if jobs is not None:
        cmd += ["-j", str(jobs)]
    cwd = tempfile.mkdtemp(prefix="bench-pace-run-")
    out = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.DEVNULL)
    return proc, out, cwd, time.monotonic()


def finish(name, started_run):
    proc, out, cwd, started = started_run
    code = proc.wait()
    wall = time.monotonic() - started
    out.seek(0)
    raw = out.read()
    shutil.rmtree(cwd, ignore_errors=True)
    try:
        data = json.loads(raw)["data"]
    except (ValueError, KeyError):
        return {"wall": wall, "code": code, "error": True}
    scenarios = data["scenarios"]
    failed = {s["id"] for s in scenarios if s["status"] in ("fail", "error")}
    longest = max(scenarios, key=lambda s: s["duration_ms"])
    pace = data.get("pace") or {}
    return {
        "wall": wall,
        "code": code,
        "false": sorted(failed - KNOWN.get(name, set())),
        "flaky": data["confirmation"]["flaky"],
        "longest_ms": longest["duration_ms"],
        "longest_id": longest["id"],
        "unjudged": [
            "{} ({})".format(sid, next((g["reason"] for g in data["coverage"]["skip_reasons"]
                                        if sid in g["scenarios"]), "?"))
            for sid in data["coverage"]["unjudged_musts"]
        ],
        "first": pace.get("first"),
        "peak": pace.get("peak"),
        "error": False,
    }


class Burners:
    def __init__(self, count):
        self.procs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(count)]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()
        return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conform", type=Path, default=ROOT / "target/debug/conform")
    parser.add_argument("--reftool", type=Path, default=ROOT / "target/debug/reftool")
    parser.add_argument("--subjects", default="pyagent,pyagent-burn,notes,kit,faketool")
    parser.add_argument("--runs", type=int, default=10, help="default runs per subject")
    parser.add_argument("--at-once", type=int, default=1, help="conform runs at the same time")
    parser.add_argument("--beside", type=int, default=0, help="CPU-burning loops beside")
    parser.add_argument("--no-j4", action="store_true", help="skip the -j 4 reference run")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(130))
    base_env = dict(os.environ)
    bindir = python_first_on_path(base_env)
    print(f"cores: {os.cpu_count()}; loops beside: {args.beside}; at once: {args.at_once}; "
          f"load before: {open('/proc/loadavg').read().split()[:3]}", flush=True)
    print(f"{'subject':<13} {'run':>4} {'wall s':>7} {'exit':>4} {'false':>5} {'flaky':>5} "
          f"{'pace':>9} {'x longest':>9}  false failures / flaky", flush=True)
    summary = []
    with Burners(args.beside):
        for name in args.subjects.split(","):
            work = Path(tempfile.mkdtemp(prefix=f"bench-pace-{name}-"))
            tool, profile, extra, more = subject(name, work, args.reftool)
            env = dict(base_env)
            if "PATH_FIRST" in more:
                env["PATH"] = f"{more['PATH_FIRST']}:{env['PATH']}"
            floor, j4 = None, None
            if not args.no_j4:
                r = finish(name, start(args.conform, tool, profile, extra, env, 4))
                floor = r.get("longest_ms", 0) / 1000
                j4 = r["wall"]
                print(f"{name:<13} {'-j 4':>4} {r['wall']:7.1f} {r['code']:>4} "
                      f"{len(r.get('false', [])):>5} {len(r.get('flaky', [])):>5} {'':>9} "
                      f"{'':>9}  longest: {r.get('longest_id')} {floor:.1f} s", flush=True)
            walls, false_total, flaky_total, runs = [], 0, 0, 0
            while runs < args.runs:
                batch = [start(args.conform, tool, profile, extra, env, None)
                         for _ in range(args.at_once)]
                for started_run in batch:
                    runs += 1
                    r = finish(name, started_run)
                    if r["error"]:
                        print(f"{name:<13} {runs:>4} {r['wall']:7.1f} {r['code']:>4} no report",
                              flush=True)
                        false_total += 1
                        continue
                    walls.append(r["wall"])
                    false_total += len(r["false"])
                    flaky_total += len(r["flaky"])
                    ratio = f"{r['wall'] / floor:9.2f}" if floor else f"{'':>9}"
                    pace = f"{r['first']}..{r['peak']}" if r["first"] else "-"
                    print(f"{name:<13} {runs:>4} {r['wall']:7.1f} {r['code']:>4} "
                          f"{len(r['false']):>5} {len(r['flaky']):>5} {pace:>9} {ratio}  "
                          f"{' '.join(r['false'])} / {' '.join(r['flaky'])}"
                          + (f" / unjudged: {'; '.join(r['unjudged'])}" if r["unjudged"] else ""),
                          flush=True)
            if walls:
                walls.sort()
                summary.append((name, runs, false_total, flaky_total, walls[0],
                                walls[len(walls) // 2], walls[-1], j4, floor))
            shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(bindir, ignore_errors=True)
    print("\n| subject | default runs | false failures | flaky | default wall min / median / max s "
          "| -j 4 wall s | longest scenario s |")
    print("|---|---:|---:|---:|---|---:|---:|")
    for name, runs, false_total, flaky_total, lo, med, hi, j4, floor in summary:
        fmt = lambda v: f"{v:.1f}" if v else "-"  # noqa: E731
        print(f"| {name} | {runs} | {false_total} | {flaky_total} | "
              f"{lo:.1f} / {med:.1f} / {hi:.1f} | {fmt(j4)} | {fmt(floor)} |")


if __name__ == "__main__":
    main()
