"""Distributed bottleneck refinement: lower max(send, recv) over the parts of
a 1D partition, with each MPI process holding only its row block.

The volume model is the column-net hypergraph: net ``v`` has the pins
{u : A[u, v] ≠ 0} (column ``v``) and the owner ``part[v]``; with Λ_v the set
of the pins' parts, ``part[v]`` sends Λ_v \\ {part[v]} one row each and every
part in Λ_v \\ {part[v]} receives one. Process ``p`` holds rows
``[lo, hi)`` (the nets its vertices are pins of) and the pins of nets
``[lo, hi)`` (its columns; the same arrays for a symmetric pattern), the
partition vector replicated (int32[n]: O(n) per process, like the streaming
partitioner), and the k-vectors send, recv and part weights.

One round:

1. **Propose.** Each process picks up to ``per_round`` of its vertices in
   heavy parts (send or recv within ``theta`` of the maximum, or over the
   weight limit), scored by the rows their own net sends and their external
   degree, each with one target: the least loaded feasible part among its
   neighbours' parts and the globally lightest one. Proposals are gathered.
2. **Evaluate exactly.** Each proposal's vertex is a pin of the nets of its
   row (and owns its own net): the proposer sends (net, proposal) pairs to
   the nets' processes, which count the touched nets' pins per part and
   return each proposal's exact change of send and recv per part as if it
   moved alone (summed over processes).
3. **Select.** Every process runs the same sequential filter in priority
   order: the part weight stays within the limit, the maximum load
   max(send, recv) does not rise, and Σ load² + γ·B·total volume falls.
4. **Commit exactly.** Moves that share a net interact, so the selected set's
   combined change is recounted exactly from the touched nets' pin counts
   with all selected moves applied; if it misses the criterion, the set is
   halved (lowest priority dropped) and recounted. The committed change
   keeps send / recv exact.

Every figure is recounted from scratch at the end and must equal the
maintained one (an internal error otherwise).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

#: pin-count matrix cells per block when counting nets (bounds memory: 64 MiB of int32)
_BLOCK_CELLS = 1 << 24


@dataclass
class RowSlice:
    """This process's share of A: rows ``[lo, hi)`` (global column ids) and
    the pins of nets ``[lo, hi)`` (``colptr`` / ``colidx``: the rows holding
    each column; the row arrays themselves for a symmetric pattern)."""

    lo: int
    hi: int
    n: int
    indptr: np.ndarray
    indices: np.ndarray
    colptr: np.ndarray
    colidx: np.ndarray

    @property
    def rows(self) -> int:
        return self.hi - self.lo

    @property
    def weight(self) -> np.ndarray:
        """int64[rows]: the compute load of each row (its nonzeros)."""
        return np.diff(self.indptr).astype(np.int64)


@dataclass(frozen=True)
class RefineContext:
    """Options of the distributed refinement.

    ``rounds``: most propose / commit rounds. ``per_round``: most proposals
    per process per round. ``theta``: a part is heavy when its send or recv is
    at least ``theta`` × the maximum. ``gamma``: price of one row of total
    volume in units of bottleneck rows moved off the maximum. ``time_limit``:
    seconds (None: no limit)."""

    rounds: int = 200
    per_round: int = 2048
    theta: float = 0.9
    gamma: float = 1.0
    time_limit: float | None = None
    seed: int = 0


@dataclass
class RefineResult:
    send: np.ndarray
    recv: np.ndarray
    weights: np.ndarray
    before: dict
    rounds: int = 0
    moved: int = 0
    seconds: float = 0.0
    history: list = field(default_factory=list)


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated index ranges [starts[i], starts[i] + lengths[i])."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    off = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    return off + np.arange(total, dtype=np.int64)


def net_counts(sl: RowSlice, part: np.ndarray, nets: np.ndarray, k: int) -> np.ndarray:
    """int32[len(nets), k]: pins of each local net (index into [lo, hi)) per part."""
    out = np.zeros((nets.size, k), np.int32)
    step = max(1, _BLOCK_CELLS // k)
    for s in range(0, nets.size, step):
        t = nets[s:s + step]
        lens = sl.colptr[t + 1] - sl.colptr[t]
        pins = sl.colidx[_ranges(sl.colptr[t], lens)]
        seg = np.repeat(np.arange(t.size, dtype=np.int64), lens)
        out[s:s + t.size] = np.bincount(seg * k + part[pins], minlength=t.size * k).reshape(t.size, k)
    return out


def _contrib(counts: np.ndarray, owner: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Send / recv per part of nets with these pin counts and owners, and each net's send."""
    present = counts > 0
    own_in = present[np.arange(owner.size), owner]
    net_send = present.sum(1) - own_in
    send = np.bincount(owner, weights=net_send, minlength=k).astype(np.int64)
    recv = present.sum(0).astype(np.int64) - np.bincount(owner, weights=own_in, minlength=k).astype(np.int64)
    return send, recv, net_send.astype(np.int32)


def local_volume(sl: RowSlice, part: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """This process's nets' send / recv per part (sum over processes = the
    exact 1D volumes) and each local net's send (int32[rows])."""
    send, recv = np.zeros(k, np.int64), np.zeros(k, np.int64)
    net_send = np.zeros(sl.rows, np.int32)
    step = max(1, _BLOCK_CELLS // k)
    for s in range(0, sl.rows, step):
        t = np.arange(s, min(sl.rows, s + step), dtype=np.int64)
        c = net_counts(sl, part, t, k)
        a, b, ns = _contrib(c, part[sl.lo + t], k)
        send += a
        recv += b
        net_send[t] = ns
    return send, recv, net_send


def _allsum(comm, x: np.ndarray) -> np.ndarray:
    from mpi4py import MPI
    out = np.empty_like(x)
    comm.Allreduce(x, out, op=MPI.SUM)
    return out


def _pair_deltas(counts, tinv, lam_t, a, b, o, o2, is_pin):
    """Exact send / recv change of single moves on nets (vectorized over pairs).
    ``counts``: int32[nets, k] pin counts before, ``tinv`` each pair's net row,
    ``lam_t`` each net's λ; ``a → b`` the move; ``o`` / ``o2`` the net's owner
    before / after; ``is_pin``: the moved vertex is a pin of the net."""
    m = a.size
    ca, cb = counts[tinv, a].astype(np.int64), counts[tinv, b].astype(np.int64)
    ca2, cb2 = ca - is_pin, cb + is_pin
    lam = lam_t[tinv]
    lam2 = lam - ((ca > 0) & (ca2 == 0)) + ((cb == 0) & (cb2 > 0))

    def has(r, after):
        c = counts[tinv, r] > 0
        if after:
            c = np.where(r == a, ca2 > 0, np.where(r == b, cb2 > 0, c))
        return c

    send_o, send_o2 = lam - has(o, False), lam2 - has(o2, True)
    parts = np.stack([a, b, o, o2], 1)
    drecv = np.stack([(has(r, True) & (r != o2)).astype(np.int64) - (has(r, False) & (r != o)).astype(np.int64)
                      for r in parts.T], 1)
    for j in range(1, 4):   # a part listed twice counts once
        dup = np.zeros(m, bool)
        for i in range(j):
            dup |= parts[:, j] == parts[:, i]
        drecv[dup, j] = 0
    return parts, drecv, send_o, send_o2


def _load(send, recv):
    return np.maximum(send, recv)


def _phi(send, recv, gamma, B):
    L = _load(send, recv).astype(np.float64)
    return float((L * L).sum() + gamma * B * send.sum())


class _Refiner:
    def __init__(self, comm, sl: RowSlice, part: np.ndarray, k: int, eps: float, ctx: RefineContext):
        self.comm, self.sl, self.part, self.k, self.ctx = comm, sl, part, k, ctx
        self.size, self.rank = comm.Get_size(), comm.Get_rank()
        self.bounds = np.array(comm.allgather(sl.lo) + [sl.n], np.int64)
        self.w = sl.weight
        mine = part[sl.lo:sl.hi]
        self.W = _allsum(comm, np.bincount(mine, weights=self.w, minlength=k).astype(np.int64))
        total = int(self.W.sum())
        wmax_local = int(self.w.max()) if self.w.size else 0
        self.wmax_vertex = int(comm.allreduce(wmax_local, op=_mpi_max()))
        self.Wmax = max(int(np.floor((1.0 + eps) * total / k)), int(np.ceil(total / k)) + self.wmax_vertex * 0)
        s, r, self.net_send = local_volume(sl, part, k)
        self.send, self.recv = _allsum(comm, s), _allsum(comm, r)
        self.rng = np.random.default_rng(ctx.seed * 7919 + self.rank)
        self.ext = self._external_degree(np.arange(sl.rows, dtype=np.int64))

    def _external_degree(self, rows: np.ndarray) -> np.ndarray:
        sl = self.sl
        lens = sl.indptr[rows + 1] - sl.indptr[rows]
        cols = sl.indices[_ranges(sl.indptr[rows], lens)]
        mine = np.repeat(self.part[sl.lo + rows], lens)
        seg = np.repeat(np.arange(rows.size), lens)
        return np.bincount(seg, weights=self.part[cols] != mine, minlength=rows.size).astype(np.int64)

    # ----------------------------------------------------------------- propose
    def _propose(self, theta: float):
        sl, k, part = self.sl, self.k, self.part
        L = _load(self.send, self.recv)
        B = L.max()
        hs, hr, over = self.send >= theta * B, self.recv >= theta * B, self.W > self.Wmax
        a = part[sl.lo:sl.hi]
        score = (np.where(hs[a], self.net_send, 0).astype(np.float64) + np.where(hr[a], self.ext, 0)
                 + np.where(over[a], self.w, 0))
        m = min(self.ctx.per_round, max(1, (1 << 22) // (k * self.size)))
        cand = np.flatnonzero(score > 0)
        if cand.size > m:
            cand = cand[np.argpartition(-score[cand], m - 1)[:m]]
        u = cand.astype(np.int64)
        wu = self.w[u]
        au = a[u]
        # target: the least loaded feasible part among the neighbours' parts and the lightest part
        room = self.Wmax - self.W
        lens = sl.indptr[u + 1] - sl.indptr[u]
        nb = part[sl.indices[_ranges(sl.indptr[u], lens)]]
        seg = np.repeat(np.arange(u.size), lens)
        light = np.argsort(L, kind="stable")
        glob = light[0] if light.size else 0
        seg = np.concatenate([seg, np.arange(u.size)])
        nb = np.concatenate([nb, np.full(u.size, glob, np.int32)])
        if u.size:
            alt = light[1] if light.size > 1 else glob
            seg = np.concatenate([seg, np.arange(u.size)])
            nb = np.concatenate([nb, np.full(u.size, alt, np.int32)])
        val = L[nb].astype(np.float64)
        bad = (nb == au[seg]) | (room[nb] < wu[seg])
        val[bad] = np.inf
        order = np.lexsort((val, seg))
        first = np.ones(order.size, bool)
        first[1:] = seg[order][1:] != seg[order][:-1]
        pick = order[first]
        ok = np.isfinite(val[pick])
        keep = seg[pick][ok]
        b = nb[pick][ok]
        prio = score[cand][keep] + self.rng.random(keep.size) * 1e-3
        return (sl.lo + u[keep]).astype(np.int64), au[keep].astype(np.int32), b.astype(np.int32), wu[keep], prio

    # ----------------------------------------------------------------- evaluate
    def _route(self, U, A, B, P):
        """(net, proposal, is_pin) pairs for this process's nets, from every proposer."""
        sl = self.sl
        mine = (U >= sl.lo) & (U < sl.hi)
        pid = np.flatnonzero(mine)
        rows = U[pid] - sl.lo
        lens = sl.indptr[rows + 1] - sl.indptr[rows]
        v = sl.indices[_ranges(sl.indptr[rows], lens)]
        pp = np.repeat(pid, lens)
        selfloop = np.zeros(pid.size, bool)
        hit = v == np.repeat(U[pid], lens)
        selfloop[np.repeat(np.arange(pid.size), lens)[hit]] = True
        v = np.concatenate([v, U[pid][~selfloop]])
        pp = np.concatenate([pp, pid[~selfloop]])
        pin = np.concatenate([np.ones(int(lens.sum()), np.int64), np.zeros(int((~selfloop).sum()), np.int64)])
        dest = np.searchsorted(self.bounds, v, side="right") - 1
        order = np.argsort(dest, kind="stable")
        cuts = np.searchsorted(dest[order], np.arange(self.size + 1))
        out = [np.stack([v[order][cuts[d]:cuts[d + 1]], pp[order][cuts[d]:cuts[d + 1]],
                         pin[order][cuts[d]:cuts[d + 1]]]) for d in range(self.size)]
        got = np.concatenate(self.comm.alltoall(out), axis=1)
        return got[0], got[1], got[2]

    def _evaluate(self, U, A, B, v, pid, pin):
        k, P = self.k, U.size
        t, tinv = np.unique(v - self.sl.lo, return_inverse=True)
        counts = net_counts(self.sl, self.part, t, k)
        o = self.part[v]
        o2 = np.where(v == U[pid], B[pid], o)
        lam_t = (counts > 0).sum(1)
        parts, drecv, so, so2 = _pair_deltas(counts, tinv, lam_t, A[pid], B[pid], o, o2, pin)
        base = pid * k
        dS = (np.bincount(base + o, weights=-so, minlength=P * k)
              + np.bincount(base + o2, weights=so2, minlength=P * k)).astype(np.int64)
        dR = np.bincount((base[:, None] + parts).ravel(), weights=drecv.ravel(), minlength=P * k).astype(np.int64)
        dS, dR = _allsum(self.comm, dS).reshape(P, k), _allsum(self.comm, dR).reshape(P, k)
        return dS, dR, (t, tinv, counts, o)

    def _exact(self, U, A, B, v, pid, pin, chosen: np.ndarray, cache):
        """Exact send / recv change of moving every chosen proposal together, and
        the local nets' new sends (for the nets touched)."""
        k = self.k
        t, tinv, counts, o = cache
        sel = chosen[pid]
        after = counts.copy()
        ti = tinv[sel]
        np.add.at(after, (ti, A[pid[sel]]), -pin[sel].astype(np.int32))
        np.add.at(after, (ti, B[pid[sel]]), pin[sel].astype(np.int32))
        owner = self.part[self.sl.lo + t].astype(np.int64)
        owner2 = owner.copy()
        moved_owner = sel & (v == U[pid])
        owner2[tinv[moved_owner]] = B[pid[moved_owner]]
        touched = np.zeros(t.size, bool)
        touched[ti] = True
        s0, r0, _ = _contrib(counts[touched], owner[touched], k)
        s1, r1, ns1 = _contrib(after[touched], owner2[touched], k)
        d = _allsum(self.comm, np.concatenate([s1 - s0, r1 - r0]))
        return d[:k], d[k:], (t[touched], ns1)

    # ----------------------------------------------------------------- select
    def _select(self, order, U, A, B, Wu, dS, dR):
        send, recv, W = self.send.astype(np.float64), self.recv.astype(np.float64), self.W.copy()
        L = _load(send, recv)
        Bmax = L.max()
        gamma = self.ctx.gamma
        chosen = []
        for i in order:
            a, b, w = A[i], B[i], Wu[i]
            if W[b] + w > self.Wmax and not (W[a] > self.Wmax):
                continue
            if W[b] + w > self.Wmax and W[b] + w >= W[a]:
                continue
            nz = np.flatnonzero(dS[i] | dR[i])
            s2, r2 = send[nz] + dS[i, nz], recv[nz] + dR[i, nz]
            L2 = np.maximum(s2, r2)
            if L2.size and L2.max() > Bmax:
                continue
            gain = float((L[nz] ** 2).sum() - (L2 ** 2).sum()) - gamma * Bmax * float(dS[i].sum())
            if W[a] > self.Wmax:
                gain += Bmax * Bmax
            if gain <= 0:
                continue
            send[nz], recv[nz], L[nz] = s2, r2, L2
            W[a] -= w
            W[b] += w
            chosen.append(i)
        return np.array(chosen, np.int64)

    def _better(self, dS, dR, chosen, Wu, A, B) -> bool:
        s2, r2 = self.send + dS, self.recv + dR
        B0 = _load(self.send, self.recv).max()
        W2 = self.W.copy()
        np.add.at(W2, A[chosen], -Wu[chosen])
        np.add.at(W2, B[chosen], Wu[chosen])
        over0 = np.maximum(self.W - self.Wmax, 0).sum()
        over1 = np.maximum(W2 - self.Wmax, 0).sum()
        if over1 > over0 or _load(s2, r2).max() > B0:
            return False
        if over1 < over0:
            return True
        return _phi(s2, r2, self.ctx.gamma, B0) < _phi(self.send, self.recv, self.ctx.gamma, B0)

    # ----------------------------------------------------------------- round
    def round(self, theta: float) -> int:
        comm, k = self.comm, self.k
        got = comm.allgather(self._propose(theta))
        U = np.concatenate([g[0] for g in got])
        if U.size == 0:
            return 0
        A = np.concatenate([g[1] for g in got]).astype(np.int64)
        B = np.concatenate([g[2] for g in got]).astype(np.int64)
        Wu = np.concatenate([g[3] for g in got]).astype(np.int64)
        prio = np.concatenate([g[4] for g in got])
        v, pid, pin = self._route(U, A, B, prio)
        dS, dR, cache = self._evaluate(U, A, B, v, pid, pin)
        order = np.argsort(-prio, kind="stable")
        chosen = self._select(order, U, A, B, Wu, dS, dR)
        while chosen.size:
            mask = np.zeros(U.size, bool)
            mask[chosen] = True
            eS, eR, (nets, ns) = self._exact(U, A, B, v, pid, pin, mask, cache)
            if self._better(eS, eR, chosen, Wu, A, B):
                self.part[U[chosen]] = B[chosen]
                np.add.at(self.W, A[chosen], -Wu[chosen])
                np.add.at(self.W, B[chosen], Wu[chosen])
                self.send += eS
                self.recv += eR
                self.net_send[nets] = ns
                mine = U[chosen][(U[chosen] >= self.sl.lo) & (U[chosen] < self.sl.hi)] - self.sl.lo
                if mine.size:
                    self.ext[mine] = self._external_degree(mine)
                return int(chosen.size)
            chosen = chosen[: chosen.size // 2]
        return 0


def _mpi_max():
    from mpi4py import MPI
    return MPI.MAX


def refine_distributed(comm, sl: RowSlice, part: np.ndarray, k: int, eps: float,
                       ctx: RefineContext | None = None, progress=None) -> RefineResult:
    """Refine ``part`` (int32[n], the same on every process; changed in place)
    for max(send, recv). Collective over ``comm``. Returns the exact figures
    before and after (recounted from scratch at the end)."""
    ctx = ctx or RefineContext()
    t0 = time.perf_counter()
    r = _Refiner(comm, sl, part, k, eps, ctx)
    before = {"total_volume": int(r.send.sum()), "max_send": int(r.send.max()), "max_recv": int(r.recv.max()),
              "max_weight": int(r.W.max())}
    res = RefineResult(send=r.send, recv=r.recv, weights=r.W, before=before)
    idle, theta = 0, ctx.theta
    for i in range(ctx.rounds):
        if ctx.time_limit is not None and time.perf_counter() - t0 > ctx.time_limit:
            break
        moved = r.round(theta)
        res.rounds, res.moved = i + 1, res.moved + moved
        res.history.append((i, moved, int(_load(r.send, r.recv).max()), int(r.send.sum())))
        if progress is not None and i % 10 == 0:
            progress(f"refine round {i}: moved {moved}, max(send, recv) {int(_load(r.send, r.recv).max())}, "
                     f"total {int(r.send.sum())}")
        if moved == 0:
            idle += 1
            theta = max(0.5, theta - 0.1)
            if idle >= 4:
                break
        else:
            idle = 0
    s, rv, _ = local_volume(sl, part, k)
    s, rv = _allsum(comm, s), _allsum(comm, rv)
    if not (np.array_equal(s, r.send) and np.array_equal(rv, r.recv)):
        raise RuntimeError("internal error: the refinement's maintained volumes differ from the recount")
    res.send, res.recv, res.weights = s, rv, r.W
    res.seconds = time.perf_counter() - t0
    return res


__all__ = ["RowSlice", "RefineContext", "RefineResult", "refine_distributed", "local_volume", "net_counts"]
