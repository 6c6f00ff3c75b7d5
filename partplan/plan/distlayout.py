"""The distributed plan build of the layouts that split nonzeros by both
ends — 1.5D (``1.5d:c``) and 2D (``2d:RxC``): the computations of one
process, on the arrays it holds or received; the ``plan-build`` job
(:mod:`partplan.jobs.build`) drives the exchanges. Output: the plan
directory :func:`partplan.plan.build_plan` + :func:`partplan.plan.write_plan`
write for that graph, partition and layout, byte for byte.

Where :mod:`partplan.plan.distbuild` (1D) moves whole rows to their part's
process, a rank of these layouts multiplies the nonzeros ``a_ij`` whose row
block *and* column block select it (:meth:`Layout.nonzero_ranks
<partplan.layouts.onehalfd.OneHalfD.nonzero_ranks>`), so nonzeros move one by one:

1. **read** — rows ``[lo, hi)`` of the chunked graph and ``part[lo:hi]``
   (:func:`partplan.plan.distbuild.read_stage`).
2. **lookup** — ``part[j]`` of the distinct columns, asked from the
   processes holding those rows.
3. **shuffle** — every process builds the plan ranks of a contiguous run of
   row blocks (:func:`~partplan.plan.distbuild.part_bounds`, balanced by
   rows + nonzeros); the ids of each block's rows go to its process, and
   every nonzero ``(i, j, part[i]·b + part[j], a_ij)`` to the process of the
   rank that multiplies it, where a sort by (rank, i, j) puts each rank's
   nonzeros in global CSR order.
4. **programs** (stages ``columns`` and ``backward``) — each rank's side of the exchange from its nonzeros alone
   (:func:`partplan.program.exchange.receive_side`, the single-process
   builder's own code); its halo rows are asked from their source ranks,
   whose (requester, id)-sorted requests are their send lists; 2D ranks then
   send their partial rows' ids to the rows' owners (the fold,
   :meth:`~partplan.layouts.twod.TwoD.fold_send`), which order what arrives by
   (sender, id). The backward program is the same on the transposed
   nonzeros ``(j, i)``, when A ≠ A^T (pattern or values, decided by keyed
   hash sums as in the 1D build).
5. **write** — each process writes its ranks' shards; process 0 adds the
   manifest (counts gathered from every rank) and ``partition.arrow``.

Loops run over a process's ranks, never over vertices or edges. Memory per
process: its nonzeros as triples (12 bytes each when ids and keys fit int32,
else 24; plus 8 for values), the forward and the backward nonzeros never at
once, and a few length-n scratch arrays.
"""
from __future__ import annotations

import numpy as np

from ..program.core import Program
from ..layouts.base import exchange_steps
from ..program.exchange import receive_side, sort_small


def rank_process(lay, proc_of_block: np.ndarray) -> np.ndarray:
    """int64[p]: the process that builds each plan rank (its held block's)."""
    return proc_of_block[np.array([lay.held_block(r) for r in range(lay.ranks)], dtype=np.int64)]


def id_dtype(n: int, b: int) -> np.dtype:
    """The integer type of the shuffled triples: int32 when vertex ids and
    the keys part[i]·b + part[j] fit it, else int64."""
    return np.dtype(np.int32) if n < (1 << 31) and b * b < (1 << 31) else np.dtype(np.int64)


def nonzero_sends(lay, rows: np.ndarray, cols: np.ndarray, prow: np.ndarray, pcol: np.ndarray,
                  proc_of_rank: np.ndarray, nprocs: int, dtype: np.dtype
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(``triples`` [m, 3] of (row, column, part[row]·b + part[column]) of
    type ``dtype``, grouped by the process of the rank that multiplies the
    nonzero; ``order``, the same grouping of the nonzeros (for their values);
    ``counts`` per process). For A^T pass the columns as ``rows``."""
    b = lay.row_blocks
    dest = proc_of_rank[lay.nz_rank(prow.astype(np.int64), pcol.astype(np.int64))]   # its block's process
    o = sort_small(dest, nprocs)
    counts = np.bincount(dest, minlength=nprocs).astype(np.int64)
    del dest
    trip = np.empty((o.size, 3), dtype=dtype)
    trip[:, 0] = rows[o]
    trip[:, 1] = cols[o]
    trip[:, 2] = prow[o].astype(dtype) * b + pcol[o]
    return trip, o, counts


class RankNonzeros:
    """The nonzeros this process received, sorted by (rank, row, column) =
    global CSR order inside each rank; :meth:`of` gives one rank's."""

    def __init__(self, lay, trip: np.ndarray, data: np.ndarray | None, r_lo: int, r_hi: int):
        self.b = b = lay.row_blocks
        key = trip[:, 2].astype(np.int64)
        unit = lay.nonzero_ranks(trip[:, 0], trip[:, 1], key // b, key % b)   # this process holds its blocks' nonzeros
        del key
        o = np.lexsort((trip[:, 1], trip[:, 0], unit))
        self.bounds = np.searchsorted(unit[o], np.arange(r_lo, r_hi + 1))
        del unit
        self.rows, self.cols, self.key = trip[o, 0], trip[o, 1], trip[o, 2]
        self.data = None if data is None else data[o]
        self.r_lo = r_lo

    def of(self, u: int) -> dict:
        a, e = int(self.bounds[u - self.r_lo]), int(self.bounds[u - self.r_lo + 1])
        key = self.key[a:e].astype(np.int64)
        return {"rows": self.rows[a:e], "cols": self.cols[a:e], "pi": key // self.b, "pj": key % self.b,
                "data": None if self.data is None else self.data[a:e]}


class Scratch:
    """Length-n work arrays of one process (reused rank after rank)."""

    def __init__(self, n: int, rowpos: bool):
        self.seen = np.zeros(n, dtype=bool)
        self.colmap = np.zeros(n, dtype=np.int64)
        self.rowpos = np.zeros(n, dtype=np.int64) if rowpos else None   # layouts whose local rows are held rows
        self.pmap = np.zeros(n, dtype=np.int64)


def receive(lay, u: int, nz: dict, held_u: np.ndarray, s: Scratch) -> tuple[dict, np.ndarray, np.ndarray]:
    """Rank u's exchange arrays less the send side (:func:`receive_side`
    with the layout's rules), the source rank and id of each halo row."""
    grank, G, _ = lay.a2a()
    s.pmap[nz["cols"]] = nz["pj"]
    pmap = s.pmap

    def src_of(uu, need):
        return lay.h_source(uu, pmap[need])
    row_list = row_pos = None
    if lay.local_rows_held:
        row_list = held_u
        s.rowpos[held_u] = np.arange(held_u.size, dtype=np.int64)
        row_pos = s.rowpos
    return receive_side(u, nz["cols"], nz["rows"], nz["data"], src_of, held_u, grank, G, s.seen, s.colmap,
                        row_list=row_list, row_pos=row_pos)


def keyed_pairs(dst: np.ndarray, src_rank: int, ids: np.ndarray, p: int) -> np.ndarray:
    """int64[m, 2] of (dst·p + src_rank, id): requests from rank ``src_rank``."""
    return np.stack([dst.astype(np.int64) * p + src_rank, ids.astype(np.int64)], axis=1)


def grouped(rows: np.ndarray, dest: np.ndarray, nprocs: int) -> tuple[np.ndarray, np.ndarray]:
    """(``rows`` grouped by destination process ``dest``, stable; counts per
    process): what :meth:`~partplan.runtime.comm.TorchComm.exchange_rows` sends."""
    o = sort_small(dest, nprocs)
    return rows[o], np.bincount(dest, minlength=nprocs).astype(np.int64)


def route(pairs: list[np.ndarray], proc_of_rank: np.ndarray, p: int, nprocs: int
          ) -> tuple[np.ndarray, np.ndarray]:
    """(the keyed pairs grouped by the process of their destination rank, counts per process)."""
    allp = np.concatenate(pairs) if pairs else np.zeros((0, 2), np.int64)
    return grouped(allp, proc_of_rank[allp[:, 0] // p], nprocs)


class ByRank:
    """Triples (int64[m, 3]) sorted by (column ``a``, column ``b``, column 2)
    — e.g. (source, destination, id) by source — and the rows of each rank
    ``r`` of ``qr = (first, end)`` in column ``a`` (:meth:`of`): one sort,
    then a slice per rank."""

    def __init__(self, trip: np.ndarray, a: int, b: int, qr: tuple[int, int]):
        o = np.lexsort((trip[:, 2], trip[:, b], trip[:, a]))
        self.t = trip[o]
        self.bounds = np.searchsorted(self.t[:, a], np.arange(qr[0], qr[1] + 1))
        self.lo = qr[0]

    def of(self, r: int) -> np.ndarray:
        return self.t[self.bounds[r - self.lo]:self.bounds[r - self.lo + 1]]


def arrivals(got: np.ndarray, p: int, qr: tuple[int, int]) -> ByRank:
    """The keyed pairs (``dst·p + sender``, id) addressed to this process's
    ranks, as (dst, sender, id) triples sorted by (dst, sender, id)."""
    key = got[:, 0].astype(np.int64)
    return ByRank(np.stack([key // p, key % p, got[:, 1].astype(np.int64)], axis=1), 0, 1, qr)


def pair_counts(src: np.ndarray, dst: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray]:
    """(distinct ``src·p + dst`` keys, how often each occurs): a sparse int64[p, p] count matrix."""
    return np.unique(src.astype(np.int64) * p + dst, return_counts=True)


def dense_counts(parts: list, p: int) -> np.ndarray:
    """int64[p, p] sum of the sparse count matrices ``parts`` (:func:`pair_counts`)."""
    out = np.zeros(p * p, dtype=np.int64)
    for keys, cnt in parts:
        np.add.at(out, keys, cnt)
    return out.reshape(p, p)


def program(lay, prefix: str, u: int, ex: dict, held_u: np.ndarray, fold: dict | None) -> Program:
    """Rank u's program (one-rank :class:`Program`) with the layout's steps."""
    prog = Program.empty(prefix, 1)
    prog.set_io([held_u], [held_u])
    exchange_steps(prog, [ex], [held_u], "col", out="partial" if lay.fold else "out")
    if lay.fold:
        lay.fold_steps(prog, [fold["send"]], [fold["recv_counts"]], [fold["recv_ids"]], [fold["recv_pos"]],
                       [held_u.size])
    else:
        lay.finish(prog, [u])
    return prog
