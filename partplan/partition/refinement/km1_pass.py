"""Greedy connectivity passes: lower the total communication volume of a
partition of a symmetric graph read in row blocks, with exact gains, never
raising the bottleneck.

The volume model is the column-net hypergraph of the 1D layout: net ``w``
has the pins {u : A[u, w] ≠ 0} (row ``w`` of a symmetric pattern) and the
owner ``part[w]``; it sends one row to each part of its pins other than the
owner's, so the total volume is Σ_w |Λ_w \\ {part[w]}| (what
:func:`partplan.metrics.stats.analyze` counts).

:func:`km1_passes` keeps the pin count of every net in every part
(uint16[n, k], saturated at 65,535; the exact counts of the few nets with
65,535 pins or more in a side table of int64[nets, k], consulted when one
changes: the passes only ask whether a count is 0, 1 or above) and visits
the vertices in row order. A vertex ``v`` in part
``a`` may go to one of the ``candidates`` parts holding most of its
neighbours that has room for its weight; the move's change of the total
volume is exact: for every net ``w`` that ``v`` is a pin of, ``a`` leaves
Λ_w when ``v`` was its last pin there and the target ``b`` enters when it
had none (neither counts where the part is ``w``'s owner), and ``v``'s own
net changes owner. The best target that lowers the volume is taken at once
(counts and part weights updated), so later vertices see it. Passes repeat
until one lowers the volume by less than ``stop`` (a fraction), the next
one would (extrapolated from the last two: the removals fall by about the
same ratio from pass to pass, 0.12–0.17 at R-MAT 20 and 24), or ``passes``
ran.

A move must also leave every part's max(send, recv) at or below the
current maximum (send and recv per part are kept exactly, like the counts),
so the volume comes off the parts below the bottleneck and the maximum
never rises.

Every part's weight (row nnz) stays at or below
⌊(1 + ε)·⌈W / k⌉⌋ (:func:`~partplan.partition.objectives.eps_limit`) — the limit the distributed refinement
(:mod:`partplan.partition.refinement.distributed`) keeps — or, for a part already
above, never grows.

The distributed partitioner runs it in one process after the bottleneck
refinement (:mod:`partplan.partition.pipeline.mpi_worker`). Measured in
``docs/design/distributed.md``.

Memory: 2·n·k bytes of counts plus 8·k bytes per net of 65,535 pins or more
(refused above ``max_bytes``), about 28·n bytes of parts, weights and result, and one
block of rows. Each vertex costs O(k + deg · candidates).

Example::

    >>> from partplan.datasets.generators import rmat
    >>> from partplan.metrics.stats import analyze
    >>> g = rmat(10, seed=1)
    >>> start = np.arange(g.n) % 8
    >>> part = km1_passes(g, start, 8)
    >>> bool(analyze(g, part, 8).summary()["total_volume"] < analyze(g, start, 8).summary()["total_volume"])
    True
"""
from __future__ import annotations

import time

import numpy as np

from ..._kernels import njit
from ...errors import OptionError, PartitionError
from ..options import check_int, check_real
from ..objectives import eps_limit
from ..options import DEFAULT_IMBALANCE

#: most bytes of pin counts (2·n·k) by default
DEFAULT_MAX_BYTES = 4 << 30


#: a net's pin count per part saturates here in the uint16 counts (the exact counts of the nets
#: with this many pins or more are kept aside); at least 2, so "0, 1 or more" stays exact
_SAT = 65535


@njit
def _big_index(big, w):
    """Index of net ``w`` in the sorted ids ``big`` of the nets counted aside, or −1."""
    lo, hi = 0, big.size
    while lo < hi:
        mid = (lo + hi) // 2
        if big[mid] < w:
            lo = mid + 1
        else:
            hi = mid
    return lo if lo < big.size and big[lo] == w else -1


@njit
def _count_block(indptr, indices, lo, part, cnt, big, big_cnt, sat):
    """Add the pins of nets [lo, lo + rows) (row w holds the pins of net w) to ``cnt``
    (a net of ``big``: to ``big_cnt``, and its counts saturated at ``sat`` to ``cnt``)."""
    for r in range(indptr.size - 1):
        w = lo + r
        j = _big_index(big, w) if indptr[r + 1] - indptr[r] >= sat else -1
        if j < 0:
            for e in range(indptr[r], indptr[r + 1]):
                cnt[w, part[indices[e]]] += 1
        else:
            for e in range(indptr[r], indptr[r + 1]):
                big_cnt[j, part[indices[e]]] += 1
            for p in range(cnt.shape[1]):
                cnt[w, p] = min(big_cnt[j, p], sat)


@njit
def _move_block(indptr, indices, lo, part, cnt, big, big_cnt, sat, wts, loads, cap, send, recv, ncand, nb, touched,
                ds, dr, tl):
    """Visit the rows of one block in order; move each vertex to its best
    candidate part when that lowers the total volume and leaves every part's
    max(send, recv) at or below the current maximum. Returns (moves, volume
    removed)."""
    k = send.size
    top = 0
    for p in range(k):
        top = max(top, send[p], recv[p])
    moved = 0
    removed = 0
    for r in range(indptr.size - 1):
        v = lo + r
        a = part[v]
        wv = wts[r]
        nt = 0
        loop = 0
        for e in range(indptr[r], indptr[r + 1]):
            u = indices[e]
            if u == v:
                loop = 1
            p = part[u]
            if nb[p] == 0:
                touched[nt] = p
                nt += 1
            nb[p] += 1
        lam = -1                        # v's net's λ, counted when a candidate is first priced
        best, best_gain = -1, 0
        for _ in range(ncand):
            b, most = -1, 0
            for q in range(nt):         # the part with most neighbours not yet tried (ties: first seen)
                p = touched[q]
                if p != a and nb[p] > most:
                    b, most = p, nb[p]
            if b < 0:
                break
            nb[b] = -nb[b]              # tried
            if loads[b] + wv > cap:
                continue
            if lam < 0:
                lam = 0
                for p in range(k):
                    if cnt[v, p] > 0:
                        lam += 1
            gain, nl = _deltas(indptr, indices, r, v, a, b, loop, lam, part, cnt, ds, dr, tl)
            ok = gain > best_gain
            for q in range(nl):
                p = tl[q]
                if ok and max(send[p] + ds[p], recv[p] + dr[p]) > top:
                    ok = False
                ds[p] = 0
                dr[p] = 0
            if ok:
                best, best_gain = b, gain
        for q in range(nt):
            nb[touched[q]] = 0
        if best >= 0:
            gain, nl = _deltas(indptr, indices, r, v, a, best, loop, lam, part, cnt, ds, dr, tl)
            for q in range(nl):
                p = tl[q]
                send[p] += ds[p]
                recv[p] += dr[p]
                ds[p] = 0
                dr[p] = 0
            for e in range(indptr[r], indptr[r + 1]):
                w = indices[e]
                j = _big_index(big, w)
                if j < 0:
                    cnt[w, a] -= 1
                    cnt[w, best] += 1
                else:
                    big_cnt[j, a] -= 1
                    big_cnt[j, best] += 1
                    cnt[w, a] = min(big_cnt[j, a], sat)
                    cnt[w, best] = min(big_cnt[j, best], sat)
            part[v] = best
            loads[a] -= wv
            loads[best] += wv
            moved += 1
            removed += gain
            top = 0
            for p in range(k):
                top = max(top, send[p], recv[p])
    return moved, removed


@njit
def _deltas(indptr, indices, r, v, a, b, loop, lam, part, cnt, ds, dr, tl):
    """Exact change of send / recv per part (into ``ds`` / ``dr``, parts listed in
    ``tl``) of moving v from a to b, and the total volume it removes."""
    nl = 0
    gain = 0
    for e in range(indptr[r], indptr[r + 1]):
        w = indices[e]
        if w == v:
            continue
        o = part[w]
        if a != o and cnt[w, a] == 1:      # a leaves net w
            gain += 1
            ds[o] -= 1
            dr[a] -= 1
            tl[nl] = o
            tl[nl + 1] = a
            nl += 2
        if b != o and cnt[w, b] == 0:      # b enters net w
            gain -= 1
            ds[o] += 1
            dr[b] += 1
            tl[nl] = o
            tl[nl + 1] = b
            nl += 2
    # v's own net: its owner goes from a to b; with A[v, v] != 0, v is also one of its pins
    ca, cb = cnt[v, a], cnt[v, b]
    a_after = ca - loop > 0
    lam2 = lam - (1 if loop == 1 and ca == 1 else 0) + (1 if loop == 1 and cb == 0 else 0)
    s_before = lam - (1 if ca > 0 else 0)
    s_after = lam2 - (1 if cb + loop > 0 else 0)
    gain += s_before - s_after
    ds[a] -= s_before
    ds[b] += s_after
    dr[a] += 1 if a_after else 0
    dr[b] -= 1 if cb > 0 else 0
    tl[nl] = a
    tl[nl + 1] = b
    nl += 2
    return gain, nl


def _rows(src, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows [lo, hi) as int64 arrays (one compiled kernel for every source)."""
    ip, idx = src.rows(lo, hi)
    return np.asarray(ip, np.int64), np.asarray(idx, np.int64)


def km1_passes(path_or_graph, part, k: int, *, eps: float = DEFAULT_IMBALANCE, passes: int = 3, candidates: int = 4,
               stop: float = 0.001, max_bytes: int = DEFAULT_MAX_BYTES, block_rows: int = 1 << 16,
               symmetric: bool | None = None, progress=None, stats: dict | None = None) -> np.ndarray:
    """Greedy connectivity passes over a symmetric graph (see the module doc).

    Parameters
    ----------
    path_or_graph : a :class:`~partplan.Graph` or a chunked graph directory
        (read one block of rows at a time), with a symmetric pattern.
    part : int[n] parts in [0, k) (not modified).
    k : parts.
    eps : ε of the weight limit ⌊(1 + ε)·⌈W / k⌉⌋, W the nonzeros.
    passes : most passes (≥ 1). candidates : target parts tried per vertex.
    stop : end when a pass removes less than this fraction of the volume, or when the next
        pass would, extrapolated from the last two (r₂² / r₁).
    max_bytes : most bytes of pin counts (2·n·k, or 4·n·k); above, OptionError (before any work).
    block_rows : rows read at a time.
    symmetric : True when the caller has checked that the pattern is
        symmetric (the MPI worker hashes it); None: a graph in memory is
        checked, a chunked graph's header flag is taken.
    progress : callable(str) or None: one line per pass.
    stats : a dict to fill (or None): ``passes`` (per pass: moved, removed
        (rows of total volume), wall_s), ``count_bytes``, ``cap`` (the weight
        limit), ``volume_after`` (the total volume of the result).

    Returns int64[n]: the new parts.
    """
    from ..engines.stream import _source

    k = check_int("k", k, lo=1)
    eps = check_real("eps", eps, lo=0.0, hi=10.0, hi_open=True, error=PartitionError)
    passes = check_int("passes", passes, lo=1, hi=1000)
    candidates = min(check_int("candidates", candidates, lo=1, hi=1024), max(k - 1, 1))
    stop = check_real("stop", stop, lo=0.0, hi=1.0)
    block_rows = check_int("block_rows", block_rows, lo=1, hi=1 << 40)
    src = _source(path_or_graph)
    n = src.n
    if symmetric is None:   # a chunked graph's header flag; a graph in memory is checked
        symmetric = not src.info.directed if hasattr(src, "info") else src.g.is_symmetric()
    if not symmetric:
        raise PartitionError("km1_passes needs a symmetric pattern (row w holds the pins of net w); "
                             "this graph is directed")
    part = np.asarray(part)
    if part.shape != (n,) or part.dtype.kind not in "iu":
        raise PartitionError(f"part must be an integer array of shape ({n},), got {part.dtype} {part.shape}")
    if n and (int(part.min()) < 0 or int(part.max()) >= k):
        raise PartitionError(f"part ids must lie in [0, {k})")
    wts = src.degrees()            # row nonzeros: the weights, and the largest net (a row) bounds every count
    big = np.flatnonzero(wts >= _SAT).astype(np.int64)   # nets whose counts may saturate: counted aside too
    need = 2 * n * k + 8 * big.size * k
    if need > max_bytes:
        raise OptionError(f"the pin counts need {need / 2**30:.1f} GiB (2·n·k bytes, 8·k more per net of "
                          f"{_SAT} pins or more), "
                          f"above max_bytes = {max_bytes / 2**30:.1f} GiB")
    out = part.astype(np.int32)
    cnt = np.zeros((n, k), np.uint16)
    big_cnt = np.zeros((big.size, k), np.int64)
    for lo in range(0, n, block_rows):
        ip, idx = _rows(src, lo, min(n, lo + block_rows))
        _count_block(ip, idx, lo, out, cnt, big, big_cnt, _SAT)
    W = int(wts.sum())
    cap = eps_limit(W, k, eps)
    loads = np.bincount(out, weights=wts, minlength=k).astype(np.int64)
    nb, touched = np.zeros(k, np.int64), np.empty(k, np.int64)
    send, recv = np.zeros(k, np.int64), np.zeros(k, np.int64)
    for lo in range(0, n, block_rows):   # the start's send / recv per part (blockwise: no n×k temporary)
        c = cnt[lo:lo + block_rows] > 0
        owner = out[lo:lo + block_rows].astype(np.int64)
        own = c[np.arange(c.shape[0]), owner]
        send += np.bincount(owner, weights=c.sum(1) - own, minlength=k).astype(np.int64)
        recv += c.sum(0) - np.bincount(owner, weights=own, minlength=k).astype(np.int64)
    total = int(send.sum())
    top0 = int(max(send.max(), recv.max())) if k else 0
    ds, dr = np.zeros(k, np.int64), np.zeros(k, np.int64)
    records = []
    for ps in range(passes):
        t0 = time.perf_counter()
        moved = removed = 0
        for lo in range(0, n, block_rows):
            hi = min(n, lo + block_rows)
            ip, idx = _rows(src, lo, hi)
            tl = np.empty(4 * int(np.diff(ip).max(initial=0)) + 2, np.int64)   # ≤ 4 parts per net + 2
            m, g = _move_block(ip, idx, lo, out, cnt, big, big_cnt, _SAT, wts[lo:hi], loads, cap, send, recv,
                               candidates, nb, touched, ds, dr, tl)
            moved += int(m)
            removed += int(g)
        records.append({"pass": ps + 1, "moved": moved, "removed": removed,
                        "wall_s": round(time.perf_counter() - t0, 3)})
        if progress is not None:
            progress(f"km1 pass {ps + 1}/{passes}: moved {moved}, total volume -{removed}")
        total -= removed
        if removed <= stop * max(total + removed, 1):
            break
        if len(records) >= 2 and records[-2]["removed"] > 0 and \
                removed * removed / records[-2]["removed"] <= stop * max(total, 1):
            break   # the next pass, extrapolated from the last two (their ratio), would remove less than ``stop``
    if stats is not None:
        stats.update({"passes": records, "count_bytes": need, "cap": cap, "volume_after": total,
                      "max_load_before": top0, "max_load_after": int(max(send.max(), recv.max())) if k else 0})
    return out.astype(np.int64)


__all__ = ["DEFAULT_MAX_BYTES", "km1_passes"]
