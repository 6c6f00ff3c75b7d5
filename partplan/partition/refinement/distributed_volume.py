"""Distributed connectivity rounds: lower the total communication volume of a
1D partition without raising max(send, recv), each MPI process holding only
its row block and the pin counts of its own nets.

The objective and the rules are those of the one-process connectivity passes
(:mod:`partplan.partition.refinement.km1_pass`): every committed change lowers the
total volume Σ_w |Λ_w \\ {part[w]}|, leaves every part's max(send, recv) at or
below the current maximum, and keeps every part's weight (row nonzeros) at or
below ⌊(1 + ε)·⌈W / k⌉⌋ (:func:`~partplan.partition.objectives.eps_limit`), a part
already above never growing. The passes hold uint16[n, k] pin counts in one
process; these rounds hold what the bottleneck rounds hold
(:mod:`partplan.partition.refinement.distributed`: the rows, the pins of the
process's nets, the replicated int32[n] parts and the kept counts of its
largest nets), so the memory of every process is its share plus a bounded
buffer at any n × k. They also take directed patterns (the nets are the
columns), which the passes refuse.

A pass sweeps every process's rows in row order, a block per round:

1. **Propose.** The next rows with a neighbour outside their part (``ext`` >
   0, the external degrees of the pass's start), up to ``rows`` over all
   processes (at least one per process; at most ``_MOST_CELLS`` / (k ·
   ``targets``) rows: 2²² proposal cells) and the
   round's share of the pair budget; each proposes a move to each of the
   ``targets`` parts holding most of its
   row's neighbours among those (other than its own) with room for its
   weight. The number of rows adapts: halved after a commit that had to be
   halved (the moves interacted), a quarter more after one that went through
   whole.
2. **Evaluate exactly.** The bottleneck rounds' exchange: each proposal's
   exact change of send and recv per part as if it moved alone, summed over the
   processes that own its nets.
3. **Select.** Every process runs the same greedy filter
   (:func:`_select_volume`): by volume removed, at most one move per vertex,
   each kept when its target stays within the weight limit and no part's load
   (summed single changes) rises above the maximum so far (the round's,
   lowered by every kept move that lowers it, as the passes' cap follows their
   maximum after every move).
4. **Commit exactly.** The selected set's combined change is recounted from the
   touched nets with every selected move applied (moves that share a net
   interact); if it does not lower the total, raises the maximum or breaks the
   weight rule, the set is halved (the largest single gains kept) and recounted.

Passes repeat until one removes less than ``stop`` of the volume or ``passes``
ran. Every figure is recounted from scratch at the end and must equal the
maintained one (an internal error otherwise).

Example (one process; under ``mpirun`` each process passes its own rows)::

    >>> from mpi4py import MPI
    >>> from partplan.datasets.generators import rmat
    >>> from partplan.partition.refinement.distributed import RowSlice, recount
    >>> g = rmat(10, seed=1)
    >>> sl = RowSlice(0, g.n, g.n, g.indptr.astype(np.int64), g.indices.astype(np.int64),
    ...               g.indptr.astype(np.int64), g.indices.astype(np.int64))
    >>> part = (np.arange(g.n) % 8).astype(np.int32)
    >>> before = int(recount(MPI.COMM_SELF, sl, part, 8)[0].sum())
    >>> st = volume_rounds(MPI.COMM_SELF, sl, part, 8, 0.03)
    >>> st["volume_after"] < before
    True
"""
from __future__ import annotations

import time

import numpy as np

from ..._kernels import njit
from ...program.exchange import segments as _ranges
from ..context import DistributedRefineContext
from .distributed import RowSlice, _load, _mpi_min, _Refiner

#: rows proposed per round, over all processes, at most: fewer moves at once interact less
#: (R-MAT 18, k = 64, one process: 2,048 rows gave 2,077,876 total volume in 4.9 s where
#: 32,768 gave 2,089,130 in 7.7 s; docs/design/volume-passes.md)
DEFAULT_ROWS = 2048
#: most proposal cells (proposals × k) a round evaluates, over all processes: the exact
#: single-move changes are two int64[proposals, k] arrays summed over the processes
_MOST_CELLS = 1 << 22
#: rows proposed per process in the first round (then adapted, see ``_VolumeRefiner``)
_FIRST_ROWS = 1024


@njit
def _select_volume(order, A, B, Wu, dS, dR, send, recv, W, wmax, bmax, vid, taken, out, ratchet=True):
    """Greedy filter in ``order``: a move is kept when its vertex (``vid``: an index per
    proposal) has no kept move yet, its target's weight stays at or below ``wmax`` and no
    part's load after the kept moves' summed single changes exceeds ``bmax`` (with
    ``ratchet``, lowered to the largest load after each kept move); ``send`` / ``recv`` /
    ``W`` / ``taken`` are updated. The kept proposals go into ``out`` in order; returns
    their number."""
    k = send.size
    m = 0
    for x in range(order.size):
        i = order[x]
        a, b, w = A[i], B[i], Wu[i]
        if taken[vid[i]] or W[b] + w > wmax:
            continue
        ok = True
        for p in range(k):
            if dS[i, p] != 0 or dR[i, p] != 0:
                if max(send[p] + dS[i, p], recv[p] + dR[i, p]) > bmax:
                    ok = False
                    break
        if not ok:
            continue
        for p in range(k):
            send[p] += dS[i, p]
            recv[p] += dR[i, p]
        W[a] -= w
        W[b] += w
        taken[vid[i]] = True
        out[m] = i
        m += 1
        if ratchet:   # the maximum the kept moves reached caps the next ones (it never rises)
            top = 0
            for p in range(k):
                top = max(top, send[p], recv[p])
            bmax = min(bmax, top)
    return m


class _VolumeRefiner(_Refiner):
    """The bottleneck rounds' exchange and exact commit, with the connectivity
    passes' proposals, selection and rules."""

    def __init__(self, comm, sl: RowSlice, part: np.ndarray, k: int, eps: float, ctx: DistributedRefineContext,
                 rows: int, targets: int):
        super().__init__(comm, sl, part, k, eps, ctx)
        self.cursor = 0        # the next local row a proposal may come from
        # rows proposed per round and process: halved when a commit had to be halved (the moves
        # interacted), grown by a quarter when one went through whole, within
        # [1, min(rows / processes, _MOST_CELLS / (k · processes · targets))]
        self.targets = max(1, min(targets, k - 1))
        self.most_rows = max(1, min(rows // self.size, _MOST_CELLS // (k * self.size * self.targets)))
        self.rows_per_round = min(self.most_rows, _FIRST_ROWS)

    def _propose(self, theta: float, repair_only: bool):
        """The next rows of the sweep with a neighbour outside their part, each with the
        ``targets`` parts holding most of its neighbours (other than its own, with room for
        its weight) as targets, one proposal each."""
        sl, k, part = self.sl, self.k, self.part
        budget = max(1, self.ctx.pair_budget // (self.size * self.targets))   # a row's pairs go out per target
        lo = self.cursor
        u = np.zeros(0, np.int64)
        while lo < sl.rows and u.size == 0:   # the next block holding a candidate
            hi = min(sl.rows, lo + 4 * self.rows_per_round)
            u = lo + np.flatnonzero(self.ext[lo:hi] > 0)
            if u.size == 0:
                lo = hi
        deg = self.w[u]
        u = u[: self.rows_per_round]
        take = np.cumsum(deg[: u.size]) <= budget
        take[:1] = True   # one row at least, however long: the sweep always moves on
        u = u[take]
        self.cursor = int(u[-1]) + 1 if u.size else sl.rows
        empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32),
                 np.zeros(0, np.int64), np.zeros(0, np.int8))
        if u.size == 0:
            return empty
        lens = sl.indptr[u + 1] - sl.indptr[u]
        nb = part[sl.indices[_ranges(sl.indptr[u], lens)]]
        seg = np.repeat(np.arange(u.size), lens)
        inside = np.bincount(seg * k + nb, minlength=u.size * k).reshape(u.size, k)
        au, wu = part[sl.lo + u].astype(np.int64), self.w[u]
        room = self.W[None, :] + wu[:, None] <= self.Wmax
        score = np.where(room, inside, -1)
        score[np.arange(u.size), au] = -1
        us, bs = [], []
        for _ in range(self.targets):   # the parts with most neighbours, one proposal each
            b = np.argmax(score, axis=1)
            best = score[np.arange(u.size), b]
            keep = np.flatnonzero(best > 0)
            us.append(keep)
            bs.append(b[keep])
            score[keep, b[keep]] = -1
        i = np.concatenate(us)
        b = np.concatenate(bs)
        i, b = i[np.argsort(i, kind="stable")], b[np.argsort(i, kind="stable")]
        return ((sl.lo + u[i]).astype(np.int64), np.arange(i.size, dtype=np.int64), au[i].astype(np.int32),
                b.astype(np.int32), wu[i], np.zeros(i.size, np.int8))

    def _select(self, A, B, Wu, kind, dS, dR, M):
        gain = -dS.sum(1)
        cand = np.flatnonzero(gain > 0)
        order = cand[np.argsort(-gain[cand], kind="stable")]
        out = np.empty(order.size, np.int64)
        _, vid = np.unique(M, return_inverse=True)   # a vertex's proposals: one kept at most
        m = _select_volume(order, A, B, Wu, dS, dR, self.send.copy(), self.recv.copy(), self.W.copy(),
                           self.Wmax, int(_load(self.send, self.recv).max()), vid.astype(np.int64),
                           np.zeros(vid.size, np.bool_), out)
        return out[:m]

    def _commit(self, M, mp, A, B, Wu, v, pid, pin, own, cache, chosen):
        done = super()._commit(M, mp, A, B, Wu, v, pid, pin, own, cache, chosen)
        if done.size < chosen.size:
            self.rows_per_round = max(1, self.rows_per_round // 2)
        elif chosen.size:
            self.rows_per_round = min(self.most_rows, self.rows_per_round + max(1, self.rows_per_round // 4))
        return done

    def _better(self, dS, dR, chosen, Wu, A, B) -> bool:
        """The combined change lowers the total, raises no load above the current maximum
        and takes no part above the weight limit (a part above never grows)."""
        if int(dS.sum()) >= 0:
            return False
        if int(_load(self.send + dS, self.recv + dR).max()) > int(_load(self.send, self.recv).max()):
            return False
        W2 = self.W.copy()
        np.add.at(W2, A[chosen], -Wu[chosen])
        np.add.at(W2, B[chosen], Wu[chosen])
        return bool(np.all(W2 <= np.maximum(self.Wmax, self.W)))


def volume_rounds(comm, sl: RowSlice, part: np.ndarray, k: int, eps: float,
                  ctx: DistributedRefineContext | None = None, *, passes: int = 3, stop: float = 0.001,
                  rows: int = DEFAULT_ROWS, targets: int = 2, progress=None) -> dict:
    """Lower the total volume of ``part`` (int32[n], the same on every process; changed in
    place) without raising max(send, recv) (see the module doc). Collective over ``comm``.

    Parameters
    ----------
    ctx : the bottleneck rounds' context (its ``pair_budget``, (net, proposal) pairs per
        round over all processes, and ``time_limit``, seconds from this call, are used).
    passes : most sweeps over the rows (≥ 1).
    stop : end when a pass removes less than this fraction of the volume.
    rows : most rows proposed per round, over all processes (at least one per process).
    targets : target parts proposed per vertex (those holding most of its neighbours).
    progress : callable(str) or None: one line per pass (process 0 passes one).

    Returns the stats the one-process passes return, and more: ``passes`` (per pass: rounds,
    moved, removed rows of total volume, wall_s), ``volume_before`` / ``volume_after``,
    ``max_load_before`` / ``max_load_after`` (rows of H), ``max_weight_after`` (nonzeros),
    ``cap`` (the weight limit), ``wall_s`` and ``where`` ("distributed").
    """
    ctx = ctx or DistributedRefineContext()
    if passes < 1 or rows < 1:
        raise ValueError("passes and rows must be at least 1")
    t0 = time.perf_counter()
    r = _VolumeRefiner(comm, sl, part, k, eps, ctx, rows, targets)
    vol0, max0 = int(r.send.sum()), int(_load(r.send, r.recv).max())
    out = {"passes": [], "volume_before": vol0, "max_load_before": max0, "cap": int(r.Wmax),
           "where": "distributed"}

    def out_of_time() -> bool:   # process 0's clock decides for all, so every process leaves at the same round
        return ctx.time_limit is not None and comm.bcast(time.perf_counter() - t0 > ctx.time_limit, root=0)

    for i in range(passes):
        r.cursor = 0
        if i:
            r._scan()   # fresh external degrees and kept counts for the sweep (the first: the start's)
        start, t1, rounds, moved = int(r.send.sum()), time.perf_counter(), 0, 0
        while not comm.allreduce(int(r.cursor >= sl.rows), op=_mpi_min()) and not out_of_time():
            moved += r.round(1.0)
            rounds += 1
        removed = start - int(r.send.sum())
        out["passes"].append({"pass": i + 1, "rounds": rounds, "moved": moved, "removed": removed,
                              "wall_s": round(time.perf_counter() - t1, 3)})
        if progress is not None:
            progress(f"volume pass {i + 1}: moved {moved} in {rounds} rounds, total volume "
                     f"{start:,} -> {int(r.send.sum()):,}, max(send, recv) {int(_load(r.send, r.recv).max()):,}")
        if removed < stop * max(start, 1) or out_of_time():
            break
    s, rv, wts, kept = r.recounted()
    r.check(s, rv, wts, kept, "the volume rounds'")
    out.update(volume_after=int(s.sum()), max_load_after=int(_load(s, rv).max()),
               max_weight_after=int(wts.max()), wall_s=round(time.perf_counter() - t0, 3))
    return out


__all__ = ["volume_rounds", "DEFAULT_ROWS"]
