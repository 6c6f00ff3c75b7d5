"""Compile (or load) partplan's numba kernels once, before the test processes start.

numba caches compiled kernels per source tree (``partplan._cache``: ``$NUMBA_CACHE_DIR``,
``$PARTPLAN_CACHE/numba`` or ``~/.cache/partplan/numba``). On a fresh clone every kernel
compiles on its first call; without this step that first call comes from several processes at
once (the pytest-xdist workers, and each rank of a distributed test), which compile the same
kernels side by side. The Makefile runs this first: cold it takes about a minute on 2 cores,
warm a few seconds (loading the cache). Tiny inputs; the paths the suite takes.

numba compiles one kernel at a time in a process, so the work is split over two processes that
compile disjoint kernels: this one the refinement, whose FM kernel alone is about three quarters
of all the compile time (the refinement compiles it first, then its cluster moves), a child the
cluster moves (their coarsening and passes, compiled while this process is still on the FM
kernel, so that the refinement here loads them) and the rest (the fast preset's coarsening,
streaming and the connectivity passes, rebalancing, the analyzer, plan building, the native
BFS / SSSP kernels). Then the
default pipeline runs once here (hypergraph and graph models), which loads what both compiled and
compiles what is left.
"""
from __future__ import annotations

import subprocess
import sys
import time


def _refinement() -> None:
    """The FM passes and the cluster moves (refine's default objective)."""
    import numpy as np

    from partplan import datasets
    from partplan.partition.refinement.refine import refine

    g = datasets.rmat(9, seed=1)
    refine(g, np.arange(g.n) % 4, 4)


def _cluster_moves() -> None:
    """The refinement's cluster moves alone, with the state and limits refine() gives them."""
    import numpy as np

    from partplan import datasets
    from partplan.partition.refinement import refine as R
    from partplan.partition.context import RefineContext
    from partplan.partition.refinement import fm as kernels
    from partplan.partition.refinement.multilevel import cluster_moves

    g = datasets.rmat(9, seed=1)
    part = np.arange(g.n) % 4
    ctx = RefineContext()
    b = R._bounds(g, part, 4, ctx, None, None)
    out = part.astype(np.int64)
    st = R._State(g, out, 4, b.weights2, b.cap2)
    cluster_moves(g, st, out, 4, b.w, b.cap, b.vlimit, kernels.OBJ_CODES[ctx.objective], float(ctx.alpha),
                  float(ctx.beta) * b.rb, int(ctx.fm.q), float(ctx.fm.mu), seed=b.seed)
    kernels.work_done(np.zeros(8, dtype=np.int64))


def _rest() -> None:
    import numpy as np

    from partplan import Graph, analyze, datasets
    from partplan.partition.refinement.vcycle import warm_up
    from partplan.partition.refinement.km1_pass import km1_passes
    from partplan.partition.refinement.rebalance import rebalance
    from partplan.partition.engines.stream import stream_partition
    from partplan.plan import build_plan
    from partplan.runtime.analytics import sssp_parts
    from partplan.runtime.bfs import bfs_local
    from partplan.runtime.comm import LocalComm

    g = datasets.rmat(9, seed=1)
    warm_up()
    km1_passes(g, stream_partition(g, 4), 4)
    rebalance(g, np.where(np.arange(g.n) < g.n // 2, 0, np.arange(g.n) % 4), 4)   # part 0 overloaded
    analyze(g, np.arange(g.n) % 4, 4)
    d = datasets.rmat(8, seed=2, symmetrize=False)                           # directed: the pattern check
    plan = build_plan(d, np.arange(d.n) % 2, 2)
    bfs_local(plan, 0)
    w = Graph.from_edges(d.rows, d.indices, np.random.default_rng(0).random(d.nnz) + 0.1, n=d.n)
    wplan = build_plan(w, np.arange(w.n) % 2, 2)
    sssp_parts(wplan.manifest, wplan.ranks, LocalComm(2, wplan.groups()), 0)


def _pipeline() -> None:
    from partplan import analyze, datasets
    from partplan.partition.api import partition

    g = datasets.rmat(9, seed=1)
    for p in (partition(g, 4, seed=0),                                   # hypergraph model, refinement
              partition(g, 4, model="graph", seed=0, objective="max-both")):
        analyze(g, p.part, 4)


def main(argv: list[str]) -> int:
    if argv == ["--rest"]:
        _cluster_moves()
        _rest()
        return 0
    t0 = time.perf_counter()
    child = subprocess.Popen([sys.executable, __file__, "--rest"])
    try:
        _refinement()
    finally:
        rc = child.wait()
    _pipeline()
    print(f"partplan kernels ready ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
