"""Refine every balanced start, or only the kept one: the default pipeline with
``pipeline.REFINE_ALL_NNZ`` at its value (every graph with two starts) against 50,000 (session
30's: only graphs small enough for a Mt-KaHyPar start), both per case in one run.

    python benchmarks/bench_refine_starts.py --half tune|report [--threads 1] [--k 16 64]

Prints per (graph, k) max(send, recv), total volume and in-process wall of each variant, then
geometric means of new / old. Partitions do not depend on ``--threads`` (lanes.py); walls do:
on one core the second refinement is paid in full, on several it runs beside the first.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_families import REPORT, TUNE  # noqa: E402
from bench_refine import SYNTHETIC, load_instance  # noqa: E402

from partplan.bench.script import add_json_option, check_json_output, write_json  # noqa: E402
from partplan.bench.script import run as run_script  # noqa: E402
from partplan import datasets  # noqa: E402
from partplan.errors import OptionError  # noqa: E402
from partplan.jobs.args import positive_int  # noqa: E402

OLD_REFINE_ALL_NNZ = 50_000


def run(graphs, ks, threads):
    from partplan.partition.pipeline import auto as pipeline

    new_value = pipeline.REFINE_ALL_NNZ
    warm = load_instance("power")             # compiled kernels and engines loaded outside the walls
    pipeline.auto_partition(warm, 4, threads=threads)
    rows = []
    try:
        for name in graphs:
            g = load_instance(name)
            if g is None:
                raise OptionError(f"--graphs: {name} is not available (fetch it first: partplan fetch {name})")
            for k in ks:
                row = {"graph": name, "k": k}
                for variant, value in (("old", OLD_REFINE_ALL_NNZ), ("new", new_value)):
                    pipeline.REFINE_ALL_NNZ = value
                    t0 = time.perf_counter()
                    part, rep = pipeline.auto_partition(g, k, threads=threads)
                    f = pipeline.figures(g, part, k)
                    row[variant] = dict(f, wall=time.perf_counter() - t0, refined=rep.get("refined_starts"))
                rows.append(row)
                o, n = row["old"], row["new"]
                print(f"| {name} | {k} | {o['max_send_recv']} | {n['max_send_recv']} | {o['total_volume']} | "
                      f"{n['total_volume']} | {o['wall']:.2f} | {n['wall']:.2f} | {','.join(n['refined'] or [])} |",
                      flush=True)
    finally:
        pipeline.REFINE_ALL_NNZ = new_value
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--half", choices=("tune", "report", "both"), default="tune")
    ap.add_argument("--graphs", nargs="+", default=None)
    ap.add_argument("--k", nargs="+", type=positive_int, default=[16, 64])
    ap.add_argument("--threads", type=positive_int, default=None, help="cores (default: all)")
    add_json_option(ap)
    a = ap.parse_args(argv)
    check_json_output(a.json)
    graphs = a.graphs or {"tune": TUNE, "report": REPORT, "both": TUNE + REPORT}[a.half]
    for name in graphs:
        if name not in SYNTHETIC:
            datasets.info(name)           # an unknown name: a DatasetError (one line, exit 2)
    print("| graph | k | max old | max new | TV old | TV new | wall old s | wall new s | starts refined (new) |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = run(graphs, a.k, a.threads)
    gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))  # noqa: E731
    for key, label in (("max_send_recv", "max(send, recv)"), ("total_volume", "total volume"), ("wall", "wall")):
        print(f"{label} new / old: x{gm([r['new'][key] / r['old'][key] for r in rows]):.3f}")
    write_json(a.json, {"rows": rows}, argv)


if __name__ == "__main__":
    run_script(main)
