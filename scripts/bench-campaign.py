#!/usr/bin/env python3
"""Does `conform campaign` catch the narrow-window faults, and leave correct tools alone?

The measurement behind issue 26's proof. For each subject it runs `conform campaign` N times,
each with a seed of its own (`--seed BASE+i`), and prints, in one table: campaigns run, how
many caught the fault (a confirmed violation: exit 80), the median number of trials and the
median time to the first violation over the campaigns that caught it, the campaigns' median
wall time, the invariants broken, and the minimal (shrunk) schedules seen with how often each
reproduced. A correct subject's line counts its violations instead: there must be none.

Subjects (`--subjects`, comma-separated; default all):
  reftool                        the reference tool (`target/debug/reftool`)
  reftool:<fault>                reftool-faulty with REFTOOL_FAULT=<fault>
  pyagent                        the independent Python implementation
  pyagent:<fault>                pyagent with PYAGENT_FAULT=<fault>
  faults                         shorthand: every narrow-window fault of both tools

The narrow-window faults (faults/src/narrow.rs, pyagent's faults.py): two-transaction-commit,
checkpoint-first, stale-checkpoint-totals, identity-check-then-create. Each splits one step in
two, 15 ms apart, so a single `conform run` catches it only sometimes.

The campaign's own size is its default (`conform campaign` without `--trials` or `--minutes`)
unless `--trials` or `--minutes` is given; `-j` passes through. A campaign stops at its first
confirmed violation unless `--keep-going`. The table is printed and written to `--out`
(default `target/bench-campaign.txt`); `--json` also keeps every campaign's report there.
Not a test: its figures depend on the machine. Build first:
`cargo build -p conform -p reftool -p reftool-faults`.

    scripts/bench-campaign.py --campaigns 20
    scripts/bench-campaign.py --subjects reftool:checkpoint-first,reftool --campaigns 5 --minutes 1
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYAGENT = ROOT / "tests/fixtures/tools/pyagent"
NARROW = (
    "two-transaction-commit",
    "checkpoint-first",
    "stale-checkpoint-totals",
    "identity-check-then-create",
)
# conform's exit codes: every invariant held; a confirmed violation; interrupted.
CONFORM_PASSED = 0
CONFORM_NOT_CONFORMANT = 80


def expand(subjects):
    """The subject names, with `faults` expanded."""
    out = []
    for name in subjects.split(","):
        name = name.strip()
        if name == "faults":
            out += [f"reftool:{f}" for f in NARROW] + [f"pyagent:{f}" for f in NARROW]
        elif name:
            out.append(name)
    return out


def profile_copy(src, fault_env, workdir):
    """A copy of the profile `src` in `workdir`, fixture paths made absolute, `fault_env`
    (name, value) added to `[tool.env]`."""
    text = src.read_text()

    def absolute(match):
        paths = re.findall(r'"([^"]*)"', match.group(1))
        fixed = [p if os.path.isabs(p) else str(src.parent / p) for p in paths]
        return "fixtures = [" + ", ".join(json.dumps(p) for p in fixed) + "]"

    text = re.sub(r"^fixtures = \[(.*)\]$", absolute, text, flags=re.M)
    if fault_env:
        line = f'{fault_env[0]} = "{fault_env[1]}"\n'
        if "[tool.env]\n" in text:
            text = text.replace("[tool.env]\n", "[tool.env]\n" + line, 1)
        else:
            text = "[tool.env]\n" + line + "\n" + text
    dest = workdir / "conform.toml"
    dest.write_text(text)
    return dest


def subject(name, args, workdir):
    """(tool, profile, fault or None) of a subject."""
    tool, _, fault = name.partition(":")
    if tool == "reftool":
        binary = args.target / ("reftool-faulty" if fault else "reftool")
        env = ("REFTOOL_FAULT", fault) if fault else None
        return binary, profile_copy(ROOT / "reference-tool/conform.toml", env, workdir), fault
    if tool == "pyagent":
        env = ("PYAGENT_FAULT", fault) if fault else None
        profile = profile_copy(PYAGENT / "fixtures/conform.toml", env, workdir)
        return PYAGENT / "pyagent.py", profile, fault
    raise SystemExit(f"unknown subject {name}")


def schedule_text(schedule):
    """A minimal schedule in one line: its role and events (the JSON the campaign reports)."""
    if not isinstance(schedule, dict):
        return str(schedule)
    events = []
    for event in schedule.get("events", []):
        if isinstance(event, dict) and "event" in event:
            fields = {k: v for k, v in event.items() if k != "event"}
            inner = ",".join(f"{k}={json.dumps(v, separators=(',', ':'))}"
                             for k, v in fields.items())
            events.append(f"{event['event']}({inner})")
        else:
            events.append(json.dumps(event, separators=(",", ":")))
    return f"{schedule.get('role', '?')}: " + "; ".join(events or ["(no event)"])


def run_campaign(args, tool, profile, seed):
    """One campaign: (exit code, its JSON report's data or None, wall seconds)."""
    argv = [str(args.conform), "campaign", str(tool), "--profile", str(profile),
            "--seed", str(seed), "--format", "json"]
    if args.trials:
        argv += ["--trials", str(args.trials)]
    if args.minutes:
        argv += ["--minutes", str(args.minutes)]
    if args.jobs:
        argv += ["-j", str(args.jobs)]
    if args.keep_going:
        argv.append("--keep-going")
    started = time.monotonic()
    done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    wall = time.monotonic() - started
    try:
        data = json.loads(done.stdout)["data"]
    except (ValueError, KeyError, TypeError):
        sys.stderr.write(f"no JSON report from {' '.join(argv)}:\n{done.stderr.decode()[-2000:]}\n")
        data = None
    return done.returncode, data, wall


def violated(trial):
    verdict = trial.get("verdict")
    if isinstance(verdict, dict):
        return verdict.get("verdict") == "violated"
    return verdict == "violated"


def first_violation_trials(data):
    """How many trials ran up to and including the first violated one (in trial order)."""
    trials = sorted(data.get("trials", []), key=lambda t: t.get("trial", 0))
    for i, trial in enumerate(trials, 1):
        if violated(trial):
            return i
    return None


def median(values):
    return statistics.median(values) if values else None


def fmt(value, unit=""):
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}{unit}"
    return f"{value}{unit}"


def measure(name, args, keep):
    """Runs the subject's campaigns; its row of the table and its schedules."""
    with tempfile.TemporaryDirectory(prefix="bench-campaign-") as tmp:
        tool, profile, fault = subject(name, args, Path(tmp))
        runs = caught = errors = 0
        trials_to_first, ms_to_first, walls, trials_run = [], [], [], []
        invariants, schedules = Counter(), Counter()
        reproduced = {}
        violations_total = 0
        for i in range(args.campaigns):
            seed = args.seed + i
            code, data, wall = run_campaign(args, tool, profile, seed)
            runs += 1
            walls.append(wall)
            if data is None:
                errors += 1
                continue
            keep.append({"subject": name, "seed": seed, "exit_code": code, "report": data})
            summary = data.get("summary", {})
            trials_run.append(summary.get("trials", len(data.get("trials", []))))
            violations_total += summary.get("violated", 0)
            confirmed = [f for f in data.get("failures", []) if f.get("confirmed")]
            if code == CONFORM_NOT_CONFORMANT and confirmed:
                caught += 1
                n = first_violation_trials(data)
                if n is not None:
                    trials_to_first.append(n)
                if data.get("first_violation_ms") is not None:
                    ms_to_first.append(data["first_violation_ms"] / 1000)
                for failure in confirmed:
                    invariants[failure.get("invariant", "?")] += 1
                    text = schedule_text(failure.get("minimal"))
                    schedules[text] += 1
                    reproduced.setdefault(text, []).append(
                        f"{failure.get('reproduced', '?')}/{failure.get('reproduce_runs', '?')}"
                    )
            elif code not in (CONFORM_PASSED, CONFORM_NOT_CONFORMANT):
                errors += 1
            print(f"  {name} seed {seed}: exit {code}, {wall:.0f} s, "
                  f"{summary.get('trials', '?')} trials, {summary.get('violated', 0)} violated",
                  flush=True)
        row = {
            "subject": name,
            "fault": fault,
            "campaigns": runs,
            "caught": caught,
            "errors": errors,
            "median_trials_to_first": median(trials_to_first),
            "median_s_to_first": median(ms_to_first),
            "median_wall_s": median(walls),
            "median_trials": median(trials_run),
            "violations": violations_total,
            "invariants": dict(invariants),
            "schedules": {s: {"count": c, "reproduced": reproduced[s]}
                          for s, c in schedules.most_common()},
        }
        return row


def table(rows):
    lines = [
        "| subject | campaigns | caught | median trials to 1st | median s to 1st "
        "| median wall s | median trials | violated trials | errors | invariants |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        caught = f"{r['caught']}/{r['campaigns']}" if r["fault"] else "(correct)"
        invariants = ", ".join(f"{k} {v}" for k, v in sorted(r["invariants"].items())) or "-"
        lines.append(
            f"| {r['subject']} | {r['campaigns']} | {caught} | {fmt(r['median_trials_to_first'])} "
            f"| {fmt(r['median_s_to_first'])} | {fmt(r['median_wall_s'])} "
            f"| {fmt(r['median_trials'])} | {r['violations']} | {r['errors']} | {invariants} |"
        )
    lines.append("")
    for r in rows:
        if not r["fault"]:
            verdict = "0 violations" if r["violations"] == 0 else f"{r['violations']} VIOLATED"
            lines.append(f"{r['subject']} (correct): {verdict} in {r['campaigns']} campaigns")
            continue
        lines.append(f"{r['subject']}: minimal schedules")
        for text, seen in r["schedules"].items():
            lines.append(f"  {seen['count']}x  {text}  (reproduced {', '.join(seen['reproduced'])})")
        if not r["schedules"]:
            lines.append("  (none)")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conform", type=Path, default=ROOT / "target/debug/conform")
    parser.add_argument("--target", type=Path, default=ROOT / "target/debug",
                        help="where reftool and reftool-faulty are")
    parser.add_argument("--subjects", default="faults,reftool,pyagent")
    parser.add_argument("--campaigns", type=int, default=20, help="campaigns per subject")
    parser.add_argument("--seed", type=int, default=1000, help="the first campaign's seed")
    parser.add_argument("--trials", type=int, help="--trials of each campaign")
    parser.add_argument("--minutes", type=float, help="--minutes of each campaign")
    parser.add_argument("-j", "--jobs", type=int, help="-j of each campaign")
    parser.add_argument("--keep-going", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "target/bench-campaign.txt")
    parser.add_argument("--json", type=Path, help="also keep every campaign's report here")
    args = parser.parse_args()
    rows, keep = [], []
    started = time.monotonic()
    for name in expand(args.subjects):
        print(f"{name}: {args.campaigns} campaigns", flush=True)
        rows.append(measure(name, args, keep))
        # The table so far, so that an interrupted measurement keeps what it found.
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(table(rows))
    text = table(rows)
    print()
    print(text)
    print(f"({time.monotonic() - started:.0f} s in all; table in {args.out})")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "campaigns": keep}, indent=1))


if __name__ == "__main__":
    main()
