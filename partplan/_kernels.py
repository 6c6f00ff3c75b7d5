"""Small compiled (numba) kernels shared by :class:`partplan.Graph` and the
analyzer. Every kernel has a pure-numpy fallback at its call site; ``njit``
is the identity when numba is not installed (the kernels then run as Python
and the callers use their numpy paths instead, see :data:`HAVE_NUMBA`).
"""
from __future__ import annotations

import numpy as np

from . import _cache  # noqa: F401  (numba's cache directory, set before numba is imported)

try:  # pragma: no cover - depends on the environment
    import numba

    HAVE_NUMBA = True
    njit = numba.njit(cache=True)
except ImportError:  # pragma: no cover
    HAVE_NUMBA = False

    def njit(f):
        return f


@njit
def csr_pattern_is_symmetric(indptr, indices):
    """Exact test that a CSR pattern with sorted, duplicate-free rows equals
    its transpose, in O(nnz) time and O(n) memory, without building Aᵀ.

    Walking rows i in increasing order, the entries (i, j) met in column j
    arrive in increasing i — exactly the order of row j of Aᵀ. So with one
    cursor per row, the pattern is symmetric iff every (i, j) finds i at
    cursor[j] (then advancing it) and every cursor ends at its row's end.
    """
    n = indptr.size - 1
    cursor = indptr[:-1].copy()
    for i in range(n):
        for e in range(indptr[i], indptr[i + 1]):
            j = indices[e]
            c = cursor[j]
            if c >= indptr[j + 1] or indices[c] != i:
                return False
            cursor[j] = c + 1
    for j in range(n):
        if cursor[j] != indptr[j + 1]:
            return False
    return True


@njit
def symmetric_volume(indptr, indices, part, k):
    """(vol int64[k, k], edge cut) of 1D row-wise SpMM for a *symmetric*
    pattern: column j = row j, so the parts needing H[j] are the distinct
    parts of row j (deduplicated with a k-sized stamp array), sent by
    part[j]. One sequential pass over the nonzeros; no n×k mask."""
    n = indptr.size - 1
    vol = np.zeros((k, k), np.int64)
    stamp = -np.ones(k, np.int64)
    cut = 0
    for j in range(n):
        o = part[j]
        stamp[o] = j
        for e in range(indptr[j], indptr[j + 1]):
            p = part[indices[e]]
            if p != o:
                cut += 1
                if stamp[p] != j:
                    stamp[p] = j
                    vol[o, p] += 1
    return vol, cut
