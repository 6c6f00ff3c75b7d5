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
``n·k`` is small enough (≤ :data:`MASK_LIMIT` bytes of a bool mask, and at most
:data:`MASK_PER_NNZ` cells per nonzero) a scatter into a dense mask
deduplicates in O(nnz + n·k) (about 1 ns per cell, measured); otherwise the keys
are sorted (O(nnz log nnz), about 100 ns per key) and neighbours compared.
No Python loop touches vertices or edges. ``benchmarks/bench_analyzer.py``
times both paths against :func:`volume_matrix_unique`.
"""
from __future__ import annotations

import numpy as np

MASK_LIMIT = 1 << 28  # n*k cells (bytes) for the dense-mask dedup path
MASK_PER_NNZ = 64     # ... and at most this many cells per nonzero (+ 4 Mi): beyond, sorting is cheaper


def needed_pairs(indptr: np.ndarray, indices: np.ndarray, row_part: np.ndarray, k: int,
                 n_cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (column j, part r) pairs such that some row of part r has a
    nonzero in column j. ``row_part`` is the part of every row. Returns int64
    arrays (j, r) sorted by j then r."""
    keys = indices * k
    keys += np.repeat(row_part, np.diff(indptr))
    cells = n_cols * k
    if cells <= MASK_LIMIT and cells <= MASK_PER_NNZ * keys.size + (1 << 22):
        mask = np.zeros(n_cols * k, dtype=bool)
        mask[keys] = True
        flat = np.flatnonzero(mask)
    else:
        flat = _sorted_distinct(keys, n_cols * k)
    j = flat // k
    return j, flat - j * k


def _sorted_distinct(keys: np.ndarray, bound: int) -> np.ndarray:
    """Distinct values of ``keys`` (all in [0, bound)), ascending, as int64.

    Sort + neighbour comparison rather than ``np.unique``: numpy 2.4's
    ``np.unique`` was measured ~10x slower than ``np.sort`` on 1.8 M int64
    keys. Keys are narrowed to uint32 when ``bound`` allows (sort ~2x faster).
    """
    if keys.size == 0:
        return keys.astype(np.int64)
    s = keys.astype(np.uint32) if bound <= 1 << 32 else keys.copy()
    s.sort()
    flag = np.empty(s.size, dtype=bool)
    flag[0] = True
    np.not_equal(s[1:], s[:-1], out=flag[1:])
    return s[flag].astype(np.int64)


def check_volume_matrix_size(k: int, what: str = "parts", copies: int = 2) -> None:
    """The dense int64[k, k] volume matrix (and its count, a second k × k) within the memory budget
    (:func:`partplan._budget.check_array_bytes`), checked before anything is counted: at k = 50,000
    it would take 37 GiB. ``copies``: the k × k arrays alive at once. One SizeLimitError naming k
    otherwise."""
    from .._budget import check_array_bytes

    check_array_bytes(k, k, 8, f"the volume matrix of {k:,} {what} (rows of H from each to each)",
                      field="k", copies=copies)


def volume_matrix(indptr, indices, part: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(vol int64[k, k], lam int64[n]): rows of H sent from part q to part r,
    and each column's connectivity λ_j (parts needing it, owner included)."""
    check_volume_matrix_size(k)
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
