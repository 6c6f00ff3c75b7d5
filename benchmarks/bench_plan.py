#!/usr/bin/env python
"""Plan build time against the analyzer's time on the same partition (goal: ≤ 2×).

Graph: Graph500 R-MAT (default scale 16, edgefactor 16), symmetrized,
deduplicated, no self loops (~1.8 M nonzeros on 65,536 rows). For each k and
each partition (balanced random — every rank talks to every rank, the worst
case — contiguous block, and pymetis), it times, best of ``--repeat`` runs on
one thread:

- ``analyze``  — :func:`partplan.analyze` (the peer: exact 1D CommStats);
- ``build``    — :func:`partplan.plan.build_plan` (every rank's halo, send
  lists, local CSR with values remapped, counts, and the plan's own CommStats);
- ``write``    — :func:`partplan.plan.write_plan` (Arrow IPC shards + sha256);
- ``load r0``  — :func:`partplan.plan.load_plan` of rank 0 alone (checksum + mmap).

ratio = build / analyze (≤ 2 is the goal). The plan's volume matrix is checked
equal to the analyzer's. BLAS/OpenMP pools are pinned to one thread. On a
shared 2-core box the figures vary ±30 %: compare ratios from one run.

Run: ``python benchmarks/bench_plan.py [--scale 16] [--ks 16 64] [--repeat 5] [--json]``.
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from partplan import analyze  # noqa: E402
from partplan.datasets.generators import rmat  # noqa: E402
from partplan.partition import block_partition, metis, random_partition  # noqa: E402
from partplan.plan import build_plan, load_plan, write_plan  # noqa: E402
from partplan.bench.script import run  # noqa: E402
from partplan.jobs.args import positive_int  # noqa: E402

GOAL_RATIO = 2.0


def best(fn, repeat: int) -> tuple[float, object]:
    t, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        t = min(t, time.perf_counter() - t0)
    return t, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=16)
    ap.add_argument("--edgefactor", type=int, default=16)
    ap.add_argument("--ks", type=positive_int, nargs="+", default=[16, 64])
    ap.add_argument("--parts", nargs="+", default=["random", "block", "metis"],
                    choices=["random", "block", "metis"])
    ap.add_argument("--repeat", type=positive_int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    g = rmat(args.scale, args.edgefactor, seed=0)
    g.is_symmetric()   # cache the symmetry check (both sides would pay it once)
    g.rows             # and the COO row array both use
    rows = []
    tmp = tempfile.mkdtemp(prefix="bench_plan_")
    try:
        for k in args.ks:
            for kind in args.parts:
                part = {"random": lambda: random_partition(g.n, k, 0),
                        "block": lambda: block_partition(g.n, k),
                        "metis": lambda: metis(g, k, seed=0)}[kind]()
                ta, st = best(lambda: analyze(g, part, k), args.repeat)
                tb, plan = best(lambda: build_plan(g, part, k), args.repeat)
                assert np.array_equal(plan.stats.volume, st.volume), "plan volume != analyzer volume"
                path = os.path.join(tmp, f"k{k}-{kind}.plan")
                tw, _ = best(lambda: write_plan(plan, path), max(1, args.repeat // 2))
                tl, _ = best(lambda: load_plan(path, rank=0), args.repeat)
                size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
                rows.append({"k": k, "partition": kind, "total_volume": st.total_volume,
                             "analyze_s": ta, "build_s": tb, "ratio": tb / ta, "write_s": tw,
                             "load_rank0_s": tl, "plan_bytes": size})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    info = {"graph": g.name, "n": g.n, "nnz": g.nnz, "python": platform.python_version(),
            "numpy": np.__version__, "goal_ratio": GOAL_RATIO, "rows": rows}
    if args.json:
        print(json.dumps(info, indent=1))
    else:
        print(f"plan build vs analyze — {g.name}: n={g.n:,} nnz={g.nnz:,}, 1 thread, best of {args.repeat}")
        hdr = f"{'k':>4} {'partition':<9} {'volume':>10} {'analyze':>9} {'build':>9} {'ratio':>6} " \
              f"{'write':>8} {'load r0':>8} {'MB':>7}"
        print(hdr)
        for r in rows:
            print(f"{r['k']:>4} {r['partition']:<9} {r['total_volume']:>10,} {r['analyze_s'] * 1e3:>7.1f}ms "
                  f"{r['build_s'] * 1e3:>7.1f}ms {r['ratio']:>6.2f} {r['write_s'] * 1e3:>6.0f}ms "
                  f"{r['load_rank0_s'] * 1e3:>6.1f}ms {r['plan_bytes'] / 1e6:>7.1f}")
        worst = max(r["ratio"] for r in rows)
        print(f"worst build/analyze ratio {worst:.2f} (goal <= {GOAL_RATIO})")
    return 0


if __name__ == "__main__":
    run(main)
