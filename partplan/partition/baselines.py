"""Baseline partitions (no optimization): random, contiguous block, striped,
degree-sorted round robin. All O(n) numpy."""
from __future__ import annotations

import numpy as np

from ..graph import Graph


def random_partition(n: int, k: int, seed: int = 0) -> np.ndarray:
    """Balanced random: a random permutation cut into k near-equal groups."""
    rng = np.random.default_rng(seed)
    return (np.arange(n, dtype=np.int64) * k // max(n, 1))[rng.permutation(n)]


def block_partition(n: int, k: int) -> np.ndarray:
    """Contiguous blocks of ⌈n/k⌉ or ⌊n/k⌋ rows (the CAGNET / DGL-free default)."""
    return np.arange(n, dtype=np.int64) * k // max(n, 1)


def striped_partition(n: int, k: int) -> np.ndarray:
    """Vertex i → i mod k (Graph500 / HPCGraph cyclic)."""
    return np.arange(n, dtype=np.int64) % k


def degree_round_robin(graph: Graph, k: int) -> np.ndarray:
    """Vertices sorted by decreasing nnz dealt round robin (balances load)."""
    order = np.argsort(-graph.row_nnz, kind="stable")
    part = np.empty(graph.n, dtype=np.int64)
    part[order] = np.arange(graph.n, dtype=np.int64) % k
    return part
