"""Exact communication of 1D row-wise SpMM ``Z = A @ H`` for a row partition.

Rank r owns rows ``V_r = {v : part[v] = r}`` of A, H and Z. To compute its
rows it needs ``H[j]`` for every column j of ``A[V_r]``; row ``H[j]`` goes once
from ``part[j]`` to each other part that needs it (sparsity-aware
all-to-all-v). So the volume matrix is

``vol[q, r] = |{ j : part[j] = q != r, exists i in V_r with A[i, j] != 0 }|``   (rows of H)

and total volume = Σ_j (λ_j − 1) where λ_j counts the parts needing column j
together with its owner — exactly the connectivity−1 metric of the column-net
hypergraph with the diagonal as a pin.

Implementation: one vectorized pass over the nonzeros. Each nonzero gives the
key ``j·k + part[i]``; distinct keys are the (column, needing part) pairs. When
``n·k`` is small enough (≤ 2^28 bits of a bool mask) a scatter into a dense mask
deduplicates in O(nnz + n·k); otherwise ``np.unique`` sorts (O(nnz log nnz)).
No Python loop touches vertices or edges.
"""
from __future__ import annotations

import numpy as np

MASK_LIMIT = 1 << 28  # n*k cells (bytes) for the dense-mask dedup path


def needed_pairs(indptr: np.ndarray, indices: np.ndarray, row_part: np.ndarray, k: int,
                 n_cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (column j, part r) pairs such that some row of part r has a
    nonzero in column j. ``row_part`` is the part of every row. Returns int64
    arrays (j, r) sorted by j then r."""
    keys = indices * k
    keys += np.repeat(row_part, np.diff(indptr))
    if n_cols * k <= MASK_LIMIT:
        mask = np.zeros(n_cols * k, dtype=bool)
        mask[keys] = True
        flat = np.flatnonzero(mask)
    else:
        flat = np.unique(keys)
    j = flat // k
    return j, flat - j * k


def volume_matrix(indptr, indices, part: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(vol int64[k, k], lam int64[n]): rows of H sent from part q to part r,
    and each column's connectivity λ_j (parts needing it, owner included)."""
    n = part.size
    j, r = needed_pairs(indptr, indices, part, k, n)
    q = part[j]
    off = q != r
    vol = np.bincount(q[off] * k + r[off], minlength=k * k).reshape(k, k).astype(np.int64)
    lam = np.bincount(j[off], minlength=n).astype(np.int64) + 1
    return vol, lam


def volume_matrix_unique(indptr, indices, part: np.ndarray, k: int) -> np.ndarray:
    """The simplest correct pure-numpy form (np.unique over (j, part[i]) pairs):
    the baseline the benchmark compares :func:`volume_matrix` against."""
    rows = np.repeat(np.arange(part.size), np.diff(indptr))
    pairs = np.unique(np.stack([indices, part[rows]], axis=1), axis=0)
    q, r = part[pairs[:, 0]], pairs[:, 1]
    off = q != r
    vol = np.zeros((k, k), dtype=np.int64)
    np.add.at(vol, (q[off], r[off]), 1)
    return vol
