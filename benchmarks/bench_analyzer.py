#!/usr/bin/env python
"""Throughput of the exact 1D analyzer (nonzeros per second, one thread).

Graph: Graph500 R-MAT (scale 16, edgefactor 16, A=.57 B=.19 C=.19),
symmetrized, deduplicated, self loops removed: about 1.8 M nonzeros on 65,536
rows. Partition: balanced random (every part talks to every part, the worst
case for the dedup pass). For k in (16, 64, 256) it times, best of
``--repeat`` runs:

- ``volume_matrix`` (mask)   — the analyzer's k×k volume matrix, dense-mask dedup;
- ``volume_matrix`` (sort path) — the same function forced onto its sort path
  (used when n·k is too large for the mask);
- ``volume_matrix_unique``   — the simplest correct pure-numpy baseline
  (``np.unique(axis=0)`` over (column, part) pairs), the peer every ratio is
  measured against (ratio = baseline seconds / seconds, > 1 is faster);
- ``analyze`` warm — the full :func:`partplan.analyze` (volume matrix, compute
  load, edge cut, all derived figures) on a graph whose symmetry check is cached;
- ``analyze`` cold — the same on a fresh :class:`Graph` object each run (pays the
  one-off symmetry check: one O(nnz) cursor pass, no transpose, see
  :func:`partplan._kernels.csr_pattern_is_symmetric`).

For a symmetric pattern ``analyze`` counts the volume row by row
(:func:`partplan._kernels.symmetric_volume`: column j = row j, a k-sized stamp
array deduplicates parts; no n·k mask) when numba is installed.

All variants must agree on the volume matrix (checked). BLAS/OpenMP thread
pools are pinned to one thread before numpy loads. Run: ``make bench`` or
``python benchmarks/bench_analyzer.py [--scale 16] [--ks 16 64 256] [--json]``.
"""
from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from partplan import Graph, analyze  # noqa: E402
from partplan.metrics import volume1d  # noqa: E402
from partplan.partition import random_partition  # noqa: E402
from partplan.bench.script import run  # noqa: E402
from partplan.jobs.args import nonneg_int, positive_int  # noqa: E402



def rmat_graph(scale: int, edgefactor: int, seed: int) -> Graph:
    """R-MAT graph from partplan.datasets when present, else a local vectorized
    Graph500 Kronecker generator (same distribution, not the same edges)."""
    try:
        from partplan.datasets.generators import rmat
    except ImportError:
        rmat = None
    if rmat is not None:
        return rmat(scale, edgefactor, seed=seed)
    rng = np.random.default_rng(seed)
    m, ab, c_norm, a_norm = edgefactor << scale, 0.57 + 0.19, 0.19 / (1 - 0.76), 0.57 / 0.76
    src = np.zeros(m, dtype=np.int64)
    dst = np.zeros(m, dtype=np.int64)
    for level in range(scale):  # loop over bit levels, not edges
        ii = rng.random(m) > ab
        jj = rng.random(m) > np.where(ii, c_norm, a_norm)
        src |= ii.astype(np.int64) << level
        dst |= jj.astype(np.int64) << level
    perm = rng.permutation(1 << scale)
    return Graph.from_edges(perm[src], perm[dst], n=1 << scale, symmetrize=True, self_loops="remove",
                            name=f"rmat-s{scale}-ef{edgefactor}-seed{seed}")


def best_of(fn, repeat: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def forced_sort(indptr, indices, part, k):
    saved = volume1d.MASK_LIMIT
    volume1d.MASK_LIMIT = -1
    try:
        return volume1d.volume_matrix(indptr, indices, part, k)
    finally:
        volume1d.MASK_LIMIT = saved


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", type=int, default=16)
    ap.add_argument("--edgefactor", type=int, default=16)
    ap.add_argument("--ks", type=positive_int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--repeat", type=positive_int, default=3)
    ap.add_argument("--seed", type=nonneg_int, default=1)
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    g = rmat_graph(args.scale, args.edgefactor, args.seed)
    gen_s = time.perf_counter() - t0
    ip, ix = g.indptr, g.indices
    rows = []
    for k in args.ks:
        part = random_partition(g.n, k, seed=args.seed)
        t_base, vol_base = best_of(lambda: volume1d.volume_matrix_unique(ip, ix, part, k), args.repeat)
        t_mask, (vol_mask, _) = best_of(lambda: volume1d.volume_matrix(ip, ix, part, k), args.repeat)
        t_uniq, (vol_uniq, _) = best_of(lambda: forced_sort(ip, ix, part, k), args.repeat)
        g.is_symmetric()  # warm the cache once
        analyze(g, part, k)   # compiles (first run) or loads the kernels: not in the timings
        t_warm, st = best_of(lambda: analyze(g, part, k), args.repeat)
        t_cold, _ = best_of(lambda: analyze(Graph(ip, ix, name=g.name), part, k), args.repeat)
        if not (np.array_equal(vol_base, vol_mask) and np.array_equal(vol_base, vol_uniq)
                and np.array_equal(vol_base, st.volume)):
            print(f"MISMATCH at k={k}: the variants disagree on the volume matrix", file=sys.stderr)
            return 1
        for name, t in (("volume_matrix (mask)", t_mask), ("volume_matrix (sort path)", t_uniq),
                        ("volume_matrix_unique (baseline)", t_base),
                        ("analyze (warm)", t_warm), ("analyze (cold)", t_cold)):
            rows.append({"k": k, "variant": name, "seconds": t, "nnz_per_s": g.nnz / t,
                         "speedup_vs_baseline": t_base / t, "total_volume": st.total_volume})

    meta = {"graph": g.name, "n": g.n, "nnz": g.nnz, "generate_s": gen_s, "repeat": args.repeat,
            "threads": 1, "numpy": np.__version__, "python": platform.python_version(),
            "machine": platform.machine(), "cpus": os.cpu_count()}
    if args.json:
        json.dump({**meta, "results": rows}, sys.stdout, indent=1)
        print()
        return 0
    print(f"{g.name}: n={g.n:,} nnz={g.nnz:,} (generated in {gen_s:.1f} s); best of {args.repeat}, "
          f"1 thread, numpy {np.__version__}")
    print(f"{'k':>4}  {'variant':<32} {'seconds':>9} {'M nnz/s':>9} {'vs baseline':>12}")
    for r in rows:
        print(f"{r['k']:>4}  {r['variant']:<32} {r['seconds']:>9.4f} {r['nnz_per_s'] / 1e6:>9.1f} "
              f"{r['speedup_vs_baseline']:>11.1f}x")
    return 0


if __name__ == "__main__":
    run(main)
