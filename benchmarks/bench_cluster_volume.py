"""The default pipeline with and without its cluster volume rounds (``pipeline.auto``:
``CLUSTER_VOLUME_ROUNDS`` at its value against 0), and a control with the rounds' volume rounds
but no cluster moves, all per case in one run.

    python benchmarks/bench_cluster_volume.py --half tune|report|generated|both [--k 16 64] [--json F]

Prints per (graph, k) max(send, recv), total volume and in-process wall of each variant, the
stage's own seconds and its cluster moves, then geometric means against "without" and the stage's
share of the wall without it. Graphs above ``LARGE_PINS`` pins (the web crawls) run the
large-graph schedule, which skips the stage: the variants are the same there.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_families import GENERATED, REPORT, TUNE, WEB, generated_graph, load_instance, web_graph  # noqa: E402

from partplan.bench.script import add_json_option, check_json_output, write_json  # noqa: E402
from partplan.bench.script import run as run_script  # noqa: E402
from partplan.errors import OptionError  # noqa: E402
from partplan.jobs.args import positive_int  # noqa: E402


def _graph(name: str):
    g = generated_graph(name) if name in GENERATED else web_graph(name) if name in WEB else load_instance(name)
    if g is None:
        raise OptionError(f"--graphs: {name} is not available (fetch it first: partplan datasets fetch {name})")
    return g


def _no_cluster_moves(*args, **kwargs) -> dict:
    """The control's stand-in for multilevel.cluster_moves: no cluster moves."""
    return {"levels": [], "moves": 0, "trials": 0, "member_moves": 0, "coarsen_s": 0.0, "seconds": 0.0,
            "stopped": "done"}


def run(graphs, ks):
    from partplan.partition.pipeline import auto as pipeline
    from partplan.partition.refinement import multilevel

    rounds, moves = pipeline.CLUSTER_VOLUME_ROUNDS, multilevel.cluster_moves
    pipeline.auto_partition(load_instance("power"), 4)      # compiled kernels and engines loaded outside the walls
    rows = []
    try:
        for name in graphs:
            g = _graph(name)
            for k in ks:
                if k > g.n:
                    continue
                row = {"graph": name, "k": k}
                for variant, value, fn in (("without", 0, moves), ("volume_only", rounds, _no_cluster_moves),
                                           ("with", rounds, moves)):
                    pipeline.CLUSTER_VOLUME_ROUNDS, multilevel.cluster_moves = value, fn
                    t0 = time.perf_counter()
                    part, rep = pipeline.auto_partition(g, k)
                    cv = rep.get("cluster_volume") or {}
                    row[variant] = dict(pipeline.figures(g, part, k), wall=time.perf_counter() - t0,
                                        stage_s=cv.get("seconds", 0.0), moves=cv.get("moves", []))
                rows.append(row)
                o, c, n = row["without"], row["volume_only"], row["with"]
                print(f"| {name} | {k} | {o['max_send_recv']} | {n['max_send_recv']} | {o['total_volume']} | "
                      f"{c['total_volume']} | {n['total_volume']} | {o['wall']:.2f} | {n['wall']:.2f} | "
                      f"{n['stage_s']:.2f} | {sum(n['moves'])} |", flush=True)
    finally:
        pipeline.CLUSTER_VOLUME_ROUNDS, multilevel.cluster_moves = rounds, moves
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--half", choices=("tune", "report", "generated", "both"), default="tune")
    ap.add_argument("--graphs", nargs="+", default=None)
    ap.add_argument("--k", nargs="+", type=positive_int, default=[16, 64])
    add_json_option(ap)
    a = ap.parse_args(argv)
    check_json_output(a.json)
    graphs = a.graphs or {"tune": TUNE, "report": REPORT, "generated": GENERATED, "both": TUNE + REPORT}[a.half]
    print("| graph | k | max without | max with | TV without | TV volume rounds only | TV with | wall without s | "
          "wall with s | stage s | cluster moves |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = run(graphs, a.k)
    gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))  # noqa: E731
    for v in ("volume_only", "with"):
        for key, label in (("max_send_recv", "max(send, recv)"), ("total_volume", "total volume")):
            print(f"{label} {v} / without: x{gm([r[v][key] / r['without'][key] for r in rows]):.4f}, "
                  f"higher in {sum(r[v][key] > r['without'][key] for r in rows)} of {len(rows)} cases")
    share = sum(r["with"]["stage_s"] for r in rows) / max(sum(r["without"]["wall"] for r in rows), 1e-9)
    print(f"the stage's seconds / the wall without it: {share:.3f}")
    write_json(a.json, {"rows": rows}, argv)


if __name__ == "__main__":
    run_script(main)
