#!/usr/bin/env python
"""Wall time of the default partitioner's CLI against METIS's, the whole process each time.

For each graph and k, runs N interleaved repeats of

    partplan -q partition G -k K -o TMP/default.part                        (the default pipeline)
    partplan -q partition G -k K --engine metis --model graph -o TMP/metis.part

(interpreter start to exit, timed from outside with ``time.perf_counter``; the two alternate
which goes first in every repeat, so a burst of load on a shared machine hits both) and prints
the median and the best wall of each and their ratios (default / METIS), and the median CPU
seconds (user + system) of each — steadier than the wall on a shared machine. The target of the
planner's time budget: median ratio at most 2.5 on email-Enron, as-22july06 and astro-ph at
k = 16. The first repeat of each command is a warm-up (numba cache, OS file cache) and is not
counted unless ``--count-warmup``.

    python benchmarks/bench_cli_time.py                     # 3 graphs, k = 16, 5 repeats
    python benchmarks/bench_cli_time.py --ks 16 64 --repeats 7 --json cli-time.json
    python benchmarks/bench_cli_time.py --graphs email-Enron --partplan .venv/bin/partplan

``--partplan``: the command to run (default: the ``partplan`` script beside this Python, else
``python -m partplan``). ``--extra "--threads 1"``: options added to the default command only.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from partplan.bench.script import run
from partplan.jobs.args import positive_int

GRAPHS = ("email-Enron", "as-22july06", "astro-ph")


def partplan_command(given: str | None) -> list[str]:
    if given:
        return shlex.split(given)
    script = Path(sys.executable).with_name("partplan")
    return [str(script)] if script.exists() else [sys.executable, "-m", "partplan"]


# A user's installed package has its modules' bytecode; with PYTHONDONTWRITEBYTECODE set (some
# shells and CI images) every run would compile the modules that lack it from source (about 1.8 s
# on this 2-core VM, paid by both commands), so the children run without it and the warm-up
# repeat writes the bytecode.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system of the process and its children) of one run."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=CHILD_ENV)
    t = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res.returncode != 0:
        raise SystemExit(f"failed ({res.returncode}): {shlex.join(cmd)}\n{res.stderr}")
    return t, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def measure(pp: list[str], graph: str, k: int, repeats: int, tmp: Path, extra: list[str],
            count_warmup: bool) -> dict:
    cmds = {
        "default": pp + ["-q", "partition", graph, "-k", str(k), "-o", str(tmp / f"default.{k}.part")] + extra,
        "metis": pp + ["-q", "partition", graph, "-k", str(k), "--engine", "metis", "--model", "graph",
                       "-o", str(tmp / f"metis.{k}.part")],
    }
    times: dict[str, list[float]] = {"default": [], "metis": []}
    cpu: dict[str, list[float]] = {"default": [], "metis": []}
    for r in range(repeats + (0 if count_warmup else 1)):
        order = ("default", "metis") if r % 2 == 0 else ("metis", "default")
        got = {name: wall(cmds[name]) for name in order}
        if count_warmup or r > 0:
            for name, (t, c) in got.items():
                times[name].append(t)
                cpu[name].append(c)
    med = {name: statistics.median(ts) for name, ts in times.items()}
    best = {name: min(ts) for name, ts in times.items()}
    cpu_med = {name: statistics.median(cs) for name, cs in cpu.items()}
    ratios = [d / m for d, m in zip(times["default"], times["metis"])]
    return {"graph": graph, "k": k, "repeats": len(times["default"]), "times": times, "cpu": cpu,
            "median_s": med, "best_s": best, "cpu_median_s": cpu_med,
            "ratio_median": med["default"] / med["metis"], "ratio_best": best["default"] / best["metis"],
            "ratio_paired_median": statistics.median(ratios),
            "ratio_cpu_median": cpu_med["default"] / cpu_med["metis"],
            "commands": {name: shlex.join(c) for name, c in cmds.items()}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graphs", nargs="+", default=list(GRAPHS), help="dataset names or graph files")
    ap.add_argument("--ks", nargs="+", type=positive_int, default=[16])
    ap.add_argument("--repeats", type=positive_int, default=5, help="counted repeats of each command (default 5)")
    ap.add_argument("--partplan", help="the partplan command (default: the script beside this Python)")
    ap.add_argument("--extra", default="", help="options added to the default pipeline's command only")
    ap.add_argument("--count-warmup", action="store_true", help="count the first repeat too")
    ap.add_argument("--json", help="write the rows (every wall time included) to this file")
    args = ap.parse_args(argv)
    pp = partplan_command(args.partplan)
    rows = []
    print(f"{'graph':<14} {'k':>3} {'default med':>11} {'metis med':>9} {'ratio med':>9} "
          f"{'ratio best':>10} {'paired med':>10} {'cpu default':>11} {'cpu metis':>9} {'cpu ratio':>9}",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as d:
        for graph in args.graphs:
            for k in args.ks:
                row = measure(pp, graph, k, args.repeats, Path(d), shlex.split(args.extra), args.count_warmup)
                rows.append(row)
                print(f"{graph:<14} {k:>3} {row['median_s']['default']:>11.2f} {row['median_s']['metis']:>9.2f} "
                      f"{row['ratio_median']:>9.2f} {row['ratio_best']:>10.2f} {row['ratio_paired_median']:>10.2f} "
                      f"{row['cpu_median_s']['default']:>11.2f} {row['cpu_median_s']['metis']:>9.2f} "
                      f"{row['ratio_cpu_median']:>9.2f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    run(main)
