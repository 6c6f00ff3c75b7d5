"""Device → host synchronizations and dispatched kernels per BFS level, on CPU.

The torch kernels (LocalComm on one device, here the CPU) are counted by
:class:`partplan.runtime.opcount.OpCounter` (torch's dispatcher: every kernel, and every op that
copies a device value to the host) with one section per level (``BfsEngine.level_hook``), after one
warm-up search. The properties hold on any device: on a GPU each sync is a host round trip, each
kernel a launch. ``tests/unit/runtime/test_device_shape.py`` asserts the bounds; this prints them.

    python benchmarks/bench_syncs.py                    # R-MAT 10, every layout, three directions
    python benchmarks/bench_syncs.py --scale 12 --json out/syncs.json
"""
from __future__ import annotations

import argparse
import json

import numpy as np

from partplan.bench.script import run
from partplan.jobs.args import nonneg_int

LAYOUTS = (("1d", 4), ("2d:2x2", 4), ("2d:1x3", 3), ("routed:domain:2", 4))


def count(scale: int, seed: int = 1) -> list[dict]:
    from partplan import Graph
    from partplan.datasets.generators import rmat_edges
    from partplan.plan import build_plan
    from partplan.runtime.bfs import BfsEngine
    from partplan.runtime.comm import LocalComm
    from partplan.runtime.opcount import OpCounter

    s, d = rmat_edges(scale, seed=seed)
    g = Graph.from_edges(s, d, n=1 << scale, symmetrize=True, self_loops="remove")
    root = int(np.flatnonzero(np.diff(g.indptr))[0])
    rows = []
    for spec, p in LAYOUTS:
        plan = build_plan(g, np.random.default_rng(p).integers(0, p, g.n), p, layout=spec)
        for direction in ("auto", "top-down", "bottom-up"):
            eng = BfsEngine(plan.manifest, plan.ranks, LocalComm(p, plan.groups(), device="cpu"), kernels="torch",
                            direction=direction)
            eng.search(root)    # warm-up: first-use allocations and caches are not a level's work
            c = OpCounter()
            eng.level_hook = lambda depth, what: c.mark((depth, what))
            with c:
                res = eng.search(root)
            levels = [x for x in c.sections if x.label[1] != "done"]
            rows.append({"layout": spec, "ranks": p, "direction": direction, "levels": len(levels),
                         "max_syncs_per_level": max(len(x.syncs) for x in levels),
                         "max_kernels_per_level": max(x.kernels for x in levels),
                         "mean_kernels_per_level": round(float(np.mean([x.kernels for x in levels])), 1),
                         "bytes": int(sum(r.bytes for r in res.records))})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=10, help="R-MAT scale (2^scale vertices)")
    ap.add_argument("--seed", type=nonneg_int, default=1)
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    rows = count(args.scale, args.seed)
    print(f"{'layout':16s} {'p':>2s} {'direction':9s} {'levels':>6s} {'syncs/level':>11s} {'kernels/level max':>17s} "
          f"{'mean':>6s} {'bytes':>8s}")
    for r in rows:
        print(f"{r['layout']:16s} {r['ranks']:2d} {r['direction']:9s} {r['levels']:6d} {r['max_syncs_per_level']:11d} "
              f"{r['max_kernels_per_level']:17d} {r['mean_kernels_per_level']:6.0f} {r['bytes']:8d}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"scale": args.scale, "seed": args.seed, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    run(main)
