"""Small compiled (numba) kernels shared by :class:`partplan.Graph` and the
analyzer, and the ``njit`` decorator of every kernel in the package. The
kernels here have a pure-numpy fallback at their call sites; ``njit`` is the
identity when numba is not installed (the kernels then run as Python, and the
callers here use their numpy paths instead, see :data:`HAVE_NUMBA`; the
partitioner's kernels, e.g. the distributed refinement's, run as Python).
"""
from __future__ import annotations

import sys
import time

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

# Linux: CLOCK_MONOTONIC, the clock of time.perf_counter(); struct timespec = two 64-bit integers
_CLOCK_MONOTONIC = 1


def _monotonic_intrinsic():
    """An intrinsic calling clock_gettime(CLOCK_MONOTONIC) by its symbol name: unlike a numba
    ``objmode`` block (compiled anew in every process, ~0.04 s each) it is cached with the kernel
    that calls it."""
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    @intrinsic
    def _clock(typingctx):
        def codegen(context, builder, signature, args):
            i64, f64 = ir.IntType(64), ir.DoubleType()
            ts_t = ir.LiteralStructType([i64, i64])
            fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(32), ts_t.as_pointer()])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "clock_gettime")
            ts = cgutils.alloca_once(builder, ts_t)
            builder.call(fn, [ir.Constant(ir.IntType(32), _CLOCK_MONOTONIC), ts])
            sec = builder.sitofp(builder.load(cgutils.gep_inbounds(builder, ts, 0, 0)), f64)
            nsec = builder.sitofp(builder.load(cgutils.gep_inbounds(builder, ts, 0, 1)), f64)
            return builder.fadd(sec, builder.fmul(nsec, ir.Constant(f64, 1e-9)))
        return types.float64(), codegen

    return _clock


if HAVE_NUMBA and sys.platform.startswith("linux") and sys.maxsize > 2 ** 32:
    _clock = _monotonic_intrinsic()

    @njit
    def monotonic():
        """Seconds of time.perf_counter()'s clock, readable inside compiled kernels (deadlines)."""
        return _clock()
elif HAVE_NUMBA:  # pragma: no cover - other systems: a numba objmode block (compiled per process)
    @njit
    def monotonic():
        """Seconds of time.perf_counter()'s clock, readable inside compiled kernels (deadlines)."""
        now = 0.0
        with numba.objmode(now="float64"):
            now = time.perf_counter()
        return now
else:  # pragma: no cover
    def monotonic():
        """Seconds of time.perf_counter()'s clock (plain Python without numba)."""
        return time.perf_counter()


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
def net_volume(ptr, idx, part, k, lo):
    """(vol int64[k, k], edge cut) of 1D row-wise SpMM over the nets ``lo, lo + 1, ...``: net
    ``lo + w`` is column ``lo + w``, owned by ``part[lo + w]``, its pins the rows
    ``idx[ptr[w]:ptr[w + 1]]`` that read it; H[lo + w] goes once to every other part holding a pin
    (deduplicated with a k-sized stamp array). The edge cut counts the pins outside their net's
    owner. One sequential pass over the pins; no n×k mask."""
    vol = np.zeros((k, k), np.int64)
    stamp = -np.ones(k, np.int64)
    cut = 0
    for w in range(ptr.size - 1):
        o = part[lo + w]
        for e in range(ptr[w], ptr[w + 1]):
            p = part[idx[e]]
            if p != o:
                cut += 1
                if stamp[p] != w:
                    stamp[p] = w
                    vol[o, p] += 1
    return vol, cut


@njit
def symmetric_volume(indptr, indices, part, k):
    """(vol int64[k, k], edge cut) of 1D row-wise SpMM for a *symmetric*
    pattern: column j = row j, so the parts needing H[j] are the distinct
    parts of row j, sent by part[j] (:func:`net_volume` over every row)."""
    return net_volume(indptr, indices, part, k, 0)


@njit
def block_order_mismatch(perm, assign, start):
    """The first vertex v whose ``perm[v]`` is not its id in block order — ``start[b]`` (where
    block b's rows begin) plus the count of vertices u < v with ``assign[u] == b`` — or -1 when
    ``perm`` is exactly :func:`partplan.program.exchange.perm_by` of ``assign``. Memory: one
    counter per block (``start``'s size), never n-sized (the plan readers check a stored
    permutation with it)."""
    seen = np.zeros(start.size, np.int64)
    for v in range(perm.size):
        b = assign[v]
        if perm[v] != start[b] + seen[b]:
            return v
        seen[b] += 1
    return -1
