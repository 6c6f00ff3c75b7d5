"""Grids and deliberately bad partitions of them, shared by the tests of the distributed
refinement (in one process and under mpirun)."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def grid(nx: int) -> sp.csr_matrix:
    """The 5-point grid nx × nx with its diagonal (row weights 3..5)."""
    one = sp.identity(nx, dtype=np.int64, format="csr")
    path = sp.diags([np.ones(nx - 1, np.int64)] * 2, [-1, 1], shape=(nx, nx), dtype=np.int64)
    a = (sp.kron(one, path) + sp.kron(path, one) + sp.identity(nx * nx, dtype=np.int64)).tocsr()
    a.sort_indices()
    return a


def toothed(nx: int, k: int, tooth: int) -> np.ndarray:
    """A balanced partition of the grid into k vertical stripes whose borders are square
    teeth ``tooth`` wide: bad, and every single move keeps a part's boundary or adds to it."""
    n = nx * nx
    i, j = np.divmod(np.arange(n), nx)
    order = np.lexsort((i, j + np.where((i // tooth) % 2 == 0, 0, tooth)))
    part = np.empty(n, np.int64)
    part[order] = np.arange(n) * k // n
    return part


def brute_volumes(a: sp.csr_matrix, part: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """send, recv and weights per part, counted from the pattern: net v (column v) holds
    the rows u with a[u, v] ≠ 0; its owner part[v] sends one row to each other part there."""
    n = a.shape[0]
    rows = np.repeat(np.arange(n), np.diff(a.indptr))
    key = np.unique(a.indices.astype(np.int64) * k + part[rows])   # (net, part holding a pin of it)
    net, q = key // k, key % k
    other = q != part[net]
    send = np.bincount(part[net[other]], minlength=k)
    recv = np.bincount(q[other], minlength=k)
    return send, recv, np.bincount(part, weights=np.diff(a.indptr), minlength=k).astype(np.int64)


def pair_changes(counts: np.ndarray, t: np.ndarray, a, b, o, o2, pin, pid=None) -> tuple[np.ndarray, np.ndarray]:
    """The distributed rounds' kernel (``_pair_changes``) on pairs: net ``t[i]`` with pin counts
    ``counts[t[i]]`` (int[nets, k]), move a → b of ``pin[i]`` pins, owner o → o2; summed into row
    ``pid[i]`` (default: one row per pair) of int64[rows, k] send and recv changes."""
    from partplan.partition.refinement.distributed import _pair_changes
    k = counts.shape[1]
    pid = np.arange(t.size) if pid is None else np.asarray(pid, np.int64)
    rows = int(pid.max()) + 1 if pid.size else 0
    c = counts.astype(np.int64)
    dS, dR = np.zeros((rows, k), np.int64), np.zeros((rows, k), np.int64)
    _pair_changes(c[t, a], c[t, b], c[t, o], c[t, o2], (c > 0).sum(1)[t], a, b, o, o2, pin, pid, dS, dR)
    return dS, dR
