"""Benchmark of bottleneck refinement and decoupled ownership (issue 4, item 3).

Starts from Mt-KaHyPar DEFAULT partitions of the column-net hypergraph and
reports, per instance and k: max(send, recv) after/before refinement, total
volume after/before, compute imbalance, refinement seconds / Mt-KaHyPar
seconds, and for decoupled ownership the max(send, recv) over the LP lower
bound. Run ``python benchmarks/bench_refine.py --help``; importable as
:func:`run_benchmark` (used by ``partplan bench``).

Timings are wall-clock on whatever machine runs it (single-threaded
Mt-KaHyPar unless ``--threads``); they are noisy on shared machines.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

from partplan.graph import Graph


# ----------------------------------------------------------------- generators
def rmat_graph(scale: int, edge_factor: int = 16, *, a=0.57, b=0.19, c=0.19, seed: int = 0) -> Graph:
    """Graph500-style R-MAT (2^scale vertices, edge_factor·2^scale edges),
    symmetrized, without self loops, duplicates or isolated vertices."""
    rng = np.random.default_rng(seed)
    m = edge_factor << scale
    src = np.zeros(m, dtype=np.int64)
    dst = np.zeros(m, dtype=np.int64)
    for _ in range(scale):
        r = rng.random(m)
        down = r >= a + b                       # quadrants c or d: src bit 1
        right = ((r >= a) & (r < a + b)) | (r >= a + b + c)
        src = 2 * src + down
        dst = 2 * dst + right
    perm = rng.permutation(1 << scale)
    return Graph.from_edges(perm[src], perm[dst], n=1 << scale, symmetrize=True, self_loops="remove",
                            drop_isolated=True, name=f"rmat{scale}")


def geometric_graph(n: int, knn: int = 9, extra: float = 0.01, *, seed: int = 0) -> Graph:
    """The notes' G1: n uniform points in the unit square, knn nearest
    neighbours, plus ``extra``·nnz random entries, randomly relabelled, symmetrized."""
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(seed)
    pts = rng.random((n, 2))
    _, nb = cKDTree(pts).query(pts, knn + 1)
    src = np.repeat(np.arange(n), knn)
    dst = nb[:, 1:].ravel()
    r = int(extra * src.size)
    src = np.concatenate([src, rng.integers(0, n, r)])
    dst = np.concatenate([dst, rng.integers(0, n, r)])
    perm = rng.permutation(n)
    return Graph.from_edges(perm[src], perm[dst], n=n, symmetrize=True, self_loops="remove",
                            name=f"geo{n}")
