"""Baseline partitions (no optimization): random, contiguous block, striped,
degree-sorted round robin. All O(n) numpy."""
from __future__ import annotations

import numpy as np

from ..._args import INT_MAX, check_int
from ...errors import PartitionError
from ...graph import Graph, check_graph
from ..registry import Backend, register
from ..options import rng_seed


def _n_k(n, k) -> tuple[int, int]:
    """(n, k) checked: n rows >= 0 (within the memory a part vector of n takes), k >= 1 parts."""
    from ..._budget import check_array_bytes
    n = check_int("n", n, hi=INT_MAX, error=PartitionError)
    k = check_int("k", k, lo=1, error=PartitionError)
    check_array_bytes(n, 1, 8, "the part vector", option="n")
    return n, k


def random_partition(n: int, k: int, seed: int = 0) -> np.ndarray:
    """Balanced random: a random permutation cut into k near-equal groups."""
    n, k = _n_k(n, k)
    rng = np.random.default_rng(rng_seed(seed))
    return (np.arange(n, dtype=np.int64) * k // max(n, 1))[rng.permutation(n)]


def block_partition(n: int, k: int) -> np.ndarray:
    """Contiguous blocks of ⌈n/k⌉ or ⌊n/k⌋ rows (the CAGNET / DGL-free default)."""
    n, k = _n_k(n, k)
    return np.arange(n, dtype=np.int64) * k // max(n, 1)


def striped_partition(n: int, k: int) -> np.ndarray:
    """Vertex i → i mod k (Graph500 / HPCGraph cyclic)."""
    n, k = _n_k(n, k)
    return np.arange(n, dtype=np.int64) % k


def degree_round_robin(graph: Graph, k: int) -> np.ndarray:
    """Vertices sorted by decreasing nnz dealt round robin (balances load)."""
    check_graph(graph, error=PartitionError)
    k = check_int("k", k, lo=1, error=PartitionError)
    order = np.argsort(-graph.row_nnz, kind="stable")
    part = np.empty(graph.n, dtype=np.int64)
    part[order] = np.arange(graph.n, dtype=np.int64) % k
    return part


def _degree_rr(model_obj, k, *, imbalance, seed, graph=None):
    g = model_obj if isinstance(model_obj, Graph) else graph
    if g is None:
        raise PartitionError("degree-rr needs the graph (row nnz)")
    return degree_round_robin(g, k), {}



register(Backend("random", ("baseline",), frozenset(),
                 lambda m, k, *, imbalance, seed, graph=None: (random_partition(m.n, k, seed), {}),
                 default_for=("baseline",), schema={}))
register(Backend("block", ("baseline",), frozenset(),
                 lambda m, k, *, imbalance, seed, graph=None: (block_partition(m.n, k), {}), schema={}))
register(Backend("striped", ("baseline",), frozenset(),
                 lambda m, k, *, imbalance, seed, graph=None: (striped_partition(m.n, k), {}), schema={}))
register(Backend("degree-rr", ("baseline",), frozenset(), _degree_rr, schema={}))
