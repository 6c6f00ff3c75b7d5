"""Canonical CSR rows: every row's column ids strictly increasing (sorted, no duplicates), what
the km1 gains (each pin counted once) and KaMinPar's lean ParHIP writer need."""
from __future__ import annotations

import numpy as np

from .._kernels import njit
from ..graph import Graph


@njit
def is_canonical(n, ptr, idx):
    """Every row's column ids strictly increasing (sorted, no duplicates)."""
    for i in range(n):
        for e in range(ptr[i] + 1, ptr[i + 1]):
            if idx[e] <= idx[e - 1]:
                return False
    return True


def canonical_rows(graph: Graph) -> tuple[np.ndarray, np.ndarray]:
    """(indptr, indices) with sorted, duplicate-free rows: the graph's own
    arrays when they already are (the readers' output), else a sorted copy
    (a Graph built directly from a raw CSR may list a column twice or out of
    order; the km1 gains count each pin once)."""
    ptr = np.asarray(graph.indptr, dtype=np.int64)
    idx = np.asarray(graph.indices, dtype=np.int64)
    if is_canonical(graph.n, ptr, idx):
        return ptr, idx
    import scipy.sparse as sp
    a = sp.csr_matrix((np.ones(idx.size, np.int8), idx, ptr), shape=(graph.n, graph.n))
    a.sum_duplicates()
    return a.indptr.astype(np.int64), a.indices.astype(np.int64)
