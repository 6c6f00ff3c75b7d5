"""Compile (or load) partplan's numba kernels once, before the test processes start.

numba caches compiled kernels per source tree (``partplan._cache``: ``$NUMBA_CACHE_DIR``,
``$PARTPLAN_CACHE/numba`` or ``~/.cache/partplan/numba``). On a fresh clone every kernel
compiles on its first call; without this step that first call comes from several processes at
once (the pytest-xdist workers, and each rank of a distributed test), which compile the same
kernels side by side. The Makefile runs this first: cold it takes a minute or two, warm a few
seconds (loading the cache). Tiny inputs; the paths the suite takes: the default partitioning
pipeline (hypergraph and graph models, refinement), rebalancing, the fast preset, streaming,
the analyzer, plan building and the native BFS / SSSP kernels.
"""
from __future__ import annotations

import sys
import time


def main() -> int:
    t0 = time.perf_counter()
    import numpy as np

    from partplan import Graph, analyze, datasets
    from partplan.partition.api import partition
    from partplan.partition.fast import warm_up
    from partplan.partition.rebalance import rebalance
    from partplan.partition.stream import stream_partition
    from partplan.plan import build_plan
    from partplan.runtime.analytics import sssp_parts
    from partplan.runtime.bfs import bfs_local
    from partplan.runtime.comm import LocalComm

    g = datasets.rmat(9, seed=1)
    warm_up()
    parts = [partition(g, 4, seed=0),                                     # hypergraph model, refinement
             partition(g, 4, model="graph", seed=0, objective="max-both")]
    stream_partition(g, 4)
    rebalance(g, np.where(np.arange(g.n) < g.n // 2, 0, np.arange(g.n) % 4), 4)   # part 0 overloaded
    for p in parts:
        analyze(g, p.part, 4)
    d = datasets.rmat(8, seed=2, symmetrize=False)                           # directed: the pattern check
    plan = build_plan(d, np.arange(d.n) % 2, 2)
    bfs_local(plan, 0)
    w = Graph.from_edges(d.rows, d.indices, np.random.default_rng(0).random(d.nnz) + 0.1, n=d.n)
    wplan = build_plan(w, np.arange(w.n) % 2, 2)
    sssp_parts(wplan.manifest, wplan.ranks, LocalComm(2, wplan.groups()), 0)
    print(f"partplan kernels ready ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
