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

1. **Propose.** Each process picks up to ``per_round`` of its vertices:
   bottleneck moves from heavy parts (send or recv at least ``theta`` × the
   maximum), scored by the rows their own net sends plus their external
   degree, and repair moves from parts over the weight limit (the most
   weight per neighbour left behind in the part first). Targets are chosen in
   vertex order against virtual loads (each choice adds the candidate's estimated
   load to its target), so the candidates spread over the light parts; a
   part's price is its virtual load plus γ × the candidate's neighbours
   outside it. A vertex proposed and not moved has its score halved every
   second time (until it moves), so the same rejected candidates do not fill
   every round. Proposals are gathered on every process.
2. **Evaluate exactly.** A moved vertex is a pin of the nets of its row and
   owns its own net: the proposer sends (net, proposal) pairs to the nets'
   processes, which count the touched nets' pins per part and return each
   proposal's exact change of send and recv per part as if it moved alone
   (summed over processes). The pin counts per part of the largest local
   nets (the hubs', which most proposals touch) are kept and updated on every
   commit; the other nets are counted from their pins. Only pairs whose move
   changes the net's owner, empties a part of the net or enters a new one
   can change a figure, and only those are evaluated further.
3. **Select.** Every process runs the same filter: repairs first (least
   damage per weight), then bottleneck moves by gain; the maximum load
   max(send, recv) may not rise, a bottleneck move must lower
   Σ load² + γ·B·total volume and may fill its target up to
   ``(1 + slack)`` × the weight limit, a repair must land within the limit.
4. **Commit exactly.** Moves that share a net interact, so the selected set's
   combined change is recounted exactly from the touched nets' pin counts
   with all selected moves applied; if it breaks a rule, the set is halved
   and recounted. The committed change keeps send / recv exact.

After the rounds, repair rounds take every part back under the weight limit
(or under the engine's heaviest part, when that was above it); they may raise
the maximum load to just below that of the best state seen within the
limit. The result is the best state seen within it.

Every figure (send, recv, part weights) is recounted from scratch at the end and must equal the
maintained one (an internal error otherwise).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ...program.exchange import segments as _ranges
from ..context import DistributedRefineContext

#: pin-count matrix cells per block when counting nets (bounds memory: 64 MiB of int32)
_BLOCK_CELLS = 1 << 24
#: most cells of the kept pin counts of the large nets (64 MiB of int32 per process)
_BIG_CELLS = 1 << 24
#: nets with fewer pins than this are always counted from their pins
_BIG_MIN_PINS = 64


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


def net_counts(sl: RowSlice, part: np.ndarray, nets: np.ndarray, k: int) -> np.ndarray:
    """int32[len(nets), k]: pins of each local net (index into [lo, hi)) per part.
    Blocks of at most ``_BLOCK_CELLS`` cells and ``_BLOCK_CELLS`` pins (the
    hubs' nets hold most of the pins)."""
    out = np.zeros((nets.size, k), np.int32)
    lens_all = sl.colptr[nets + 1] - sl.colptr[nets]
    ends = np.cumsum(lens_all)
    s = 0
    while s < nets.size:
        e = min(nets.size, s + max(1, _BLOCK_CELLS // k))
        base = ends[s - 1] if s else 0
        e = max(s + 1, min(e, int(np.searchsorted(ends, base + _BLOCK_CELLS, side="right"))))
        t, lens = nets[s:e], lens_all[s:e]
        pins = sl.colidx[_ranges(sl.colptr[t], lens)]
        seg = np.repeat(np.arange(t.size, dtype=np.int64), lens)
        out[s:e] = np.bincount(seg * k + part[pins], minlength=t.size * k).reshape(t.size, k)
        s = e
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


def recount(comm, sl: RowSlice, part: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The exact send, recv and part weights (int64[k] each) of ``part``,
    counted from scratch over every process's rows. Collective."""
    s, r, _ = local_volume(sl, part, k)
    w = np.bincount(part[sl.lo:sl.hi], weights=sl.weight, minlength=k).astype(np.int64)
    return _allsum(comm, s), _allsum(comm, r), _allsum(comm, w)


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

    co, co2 = counts[tinv, o] > 0, counts[tinv, o2] > 0

    def after(r, before):   # r is a, b or another part whose count did not change
        return np.where(r == a, ca2 > 0, np.where(r == b, cb2 > 0, before))

    has_before = {"a": ca > 0, "b": cb > 0, "o": co, "o2": co2}
    has_after = {"a": ca2 > 0, "b": cb2 > 0, "o": after(o, co), "o2": after(o2, co2)}
    send_o, send_o2 = lam - has_before["o"], lam2 - has_after["o2"]
    parts = np.stack([a, b, o, o2], 1)
    drecv = np.stack([(has_after[x] & (r != o2)).astype(np.int64) - (has_before[x] & (r != o)).astype(np.int64)
                      for x, r in zip(("a", "b", "o", "o2"), parts.T)], 1)
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
    def __init__(self, comm, sl: RowSlice, part: np.ndarray, k: int, eps: float, ctx: DistributedRefineContext):
        self.comm, self.sl, self.part, self.k, self.ctx = comm, sl, part, k, ctx
        self.size, self.rank = comm.Get_size(), comm.Get_rank()
        self.bounds = np.array(comm.allgather(sl.lo) + [sl.n], np.int64)
        self.w = sl.weight
        mine = part[sl.lo:sl.hi]
        self.W = _allsum(comm, np.bincount(mine, weights=self.w, minlength=k).astype(np.int64))
        total = int(self.W.sum())
        wmax_local = int(self.w.max()) if self.w.size else 0
        self.wmax_vertex = int(comm.allreduce(wmax_local, op=_mpi_max()))
        self.Wmax = max(int(np.floor((1.0 + eps) * total / k)), int(np.ceil(total / k)))
        self.Wslack = int(np.floor(self.Wmax * (1.0 + ctx.slack)))
        self.Wfinal = max(self.Wmax, int(self.W.max()))
        self.load_cap = None   # repair moves may raise loads up to this (None: the current maximum)
        s, r, self.net_send = local_volume(sl, part, k)
        self.send, self.recv = _allsum(comm, s), _allsum(comm, r)
        self.ext = self._all_external_degrees()
        self._keep_big_nets()
        # rounds each local vertex was proposed and not moved since it last moved: every second one
        # halves its score, so the same rejected candidates do not fill every round's proposals
        self.fails = np.zeros(sl.rows, np.int8)

    def _keep_big_nets(self) -> None:
        """Keep the pin counts per part of the largest local nets (at least
        ``_BIG_MIN_PINS`` pins, at most ``_BIG_CELLS`` cells) and update them
        on every commit: a round touches the hubs' nets through most proposals'
        neighbours, and recounting a hub's pins each round costs its degree."""
        sl, k = self.sl, self.k
        size = np.diff(sl.colptr)
        cap = max(0, _BIG_CELLS // k)
        big = np.flatnonzero(size >= _BIG_MIN_PINS)
        if big.size > cap:
            big = big[np.argpartition(-size[big], cap - 1)[:cap]] if cap else big[:0]
            big.sort()
        self.big_pos = np.full(sl.rows, -1, np.int64)
        self.big_pos[big] = np.arange(big.size)
        self.big_counts = net_counts(sl, self.part, big, k)

    def _counts(self, t: np.ndarray) -> np.ndarray:
        """int32[len(t), k]: pins per part of the local nets ``t`` (kept counts for the large ones)."""
        pos = self.big_pos[t]
        kept = pos >= 0
        if not kept.any():
            return net_counts(self.sl, self.part, t, self.k)
        out = np.empty((t.size, self.k), np.int32)
        out[kept] = self.big_counts[pos[kept]]
        rest = np.flatnonzero(~kept)
        if rest.size:
            out[rest] = net_counts(self.sl, self.part, t[rest], self.k)
        return out

    def _all_external_degrees(self, block: int = 1 << 22) -> np.ndarray:
        """External degree of every local row, in blocks of about ``block`` nonzeros."""
        sl = self.sl
        out = np.zeros(sl.rows, np.int64)
        step = max(1, block // max(1, sl.indices.size // max(sl.rows, 1) + 1))
        for r0 in range(0, sl.rows, step):
            rows = np.arange(r0, min(sl.rows, r0 + step), dtype=np.int64)
            out[rows] = self._external_degree(rows)
        return out

    def _external_degree(self, rows: np.ndarray) -> np.ndarray:
        sl = self.sl
        lens = sl.indptr[rows + 1] - sl.indptr[rows]
        cols = sl.indices[_ranges(sl.indptr[rows], lens)]
        mine = np.repeat(self.part[sl.lo + rows], lens)
        seg = np.repeat(np.arange(rows.size), lens)
        return np.bincount(seg, weights=self.part[cols] != mine, minlength=rows.size).astype(np.int64)

    # ----------------------------------------------------------------- propose
    def _propose(self, theta: float, repair_only: bool):
        """This process's proposals: (vertex, from, to, weight, kind) with kind 0 for a
        bottleneck move (from a heavy part; may fill the target up to the slack limit)
        and 1 for a repair move (from a part over the weight limit, into room)."""
        sl, k, part, ctx = self.sl, self.k, self.part, self.ctx
        L = _load(self.send, self.recv)
        B = L.max()
        hs, hr, over = self.send >= theta * B, self.recv >= theta * B, self.W > self.Wmax
        a = part[sl.lo:sl.hi]
        deg = np.diff(sl.indptr)
        m = min(ctx.per_round, max(1, (1 << 22) // (k * self.size)))
        picks = []
        if over.any():   # repair: most weight per neighbour left behind in the part first
            score = np.where(over[a] & (self.w > 0), self.w / (1.0 + deg - self.ext), 0.0)
            picks.append((score, 1, m // 2 if not repair_only else m))
        if not repair_only:
            score = (np.where(hs[a], self.net_send, 0).astype(np.float64) + np.where(hr[a], self.ext, 0))
            picks.append((score, 0, m - (m // 2 if over.any() else 0)))
        us, kinds = [], []
        budget = max(1, ctx.pair_budget // self.size)
        damp = np.ldexp(1.0, -(self.fails.astype(np.int32) // 2))   # halved every second rejection
        for score, kind, cap in picks:
            score = score * damp
            cand = np.flatnonzero(score > 0)
            if cand.size > cap:
                cand = cand[np.argpartition(-score[cand], cap - 1)[:cap]]
            cand = cand[np.argsort(-score[cand], kind="stable")]
            cand = cand[deg[cand] <= budget // len(picks)]   # one hub alone never empties the pick
            cand = cand[np.cumsum(deg[cand]) <= budget // len(picks)] if cand.size else cand
            us.append(cand)
            kinds.append(np.full(cand.size, kind, np.int8))
        u = np.concatenate(us).astype(np.int64) if us else np.zeros(0, np.int64)
        kind = np.concatenate(kinds) if kinds else np.zeros(0, np.int8)
        # a vertex once, in vertex order: that mixes repairs and bottleneck moves, large and small,
        # before the targets are chosen (score order gave R-MAT 16 a 10 % higher maximum)
        u, first = np.unique(u, return_index=True)
        kind = kind[first]
        wu, au = self.w[u], a[u]
        b = self._targets(u, au, wu, kind, L)
        keep = b >= 0
        return ((sl.lo + u[keep]).astype(np.int64), au[keep].astype(np.int32), b[keep].astype(np.int32),
                wu[keep], kind[keep])

    def _targets(self, u, au, wu, kind, L) -> np.ndarray:
        """One target part per candidate (−1: none), chosen in candidate (vertex) order
        against virtual loads: each choice adds the candidate's estimated load
        (its net's sends, or its external degree) and its weight to the target
        (scaled by the process count: every process proposes at once) and, for
        a bottleneck move, takes them off its part (a repair's part is over
        the limit until its moves are selected: nothing is freed there), so the candidates spread over the light parts instead of all
        taking the lightest; the price of a part is its virtual load plus γ ×
        the candidate's neighbours outside it (the volume a move there adds).
        A repair goes where most of its neighbours are (the move adds the least
        volume, so the target's load grows least), then where weight and load,
        relative to their limits, add up least."""
        sl, k = self.sl, self.k
        lens = sl.indptr[u + 1] - sl.indptr[u]
        nb = self.part[sl.indices[_ranges(sl.indptr[u], lens)]]
        seg = np.repeat(np.arange(u.size), lens)
        inside = np.bincount(seg * k + nb, minlength=u.size * k).reshape(u.size, k)
        est = np.maximum(self.net_send[u], self.ext[u]).astype(np.float64) * self.size
        limit = np.where(kind == 1, self.Wmax, self.Wslack)
        Lv, Wv = L.astype(np.float64), self.W.astype(np.float64)
        gamma = self.ctx.gamma
        out = np.full(u.size, -1, np.int64)
        Bmax = max(float(L.max()), 1.0)
        for i in range(u.size):
            if kind[i] == 1:   # a repair: where most of its neighbours are, then the most weight and load room
                cost = Wv / self.Wmax + Lv / Bmax + gamma * (lens[i] - inside[i]) / Bmax
            else:
                cost = Lv + gamma * (lens[i] - inside[i])
            cost[au[i]] = np.inf
            cost[Wv + wu[i] > limit[i]] = np.inf
            b = int(np.argmin(cost))
            if not np.isfinite(cost[b]):
                continue
            out[i] = b
            Lv[b] += est[i]
            Wv[b] += wu[i] * self.size
            if kind[i] == 0:   # a bottleneck move frees its part for the next candidates
                Lv[au[i]] -= est[i]
                Wv[au[i]] -= wu[i] * self.size
        return out

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
        counts = self._counts(t)
        o = self.part[v]
        o2 = np.where(v == U[pid], B[pid], o)
        lam_t = (counts > 0).sum(1)
        # a pair changes send / recv only when its net's owner moves, or the move takes the last
        # pin out of a part or the first pin into one (most pairs do neither)
        a, b = A[pid], B[pid]
        live = np.flatnonzero((o != o2) | ((pin > 0) & ((counts[tinv, a] == 1) | (counts[tinv, b] == 0))))
        parts, drecv, so, so2 = _pair_deltas(counts, tinv[live], lam_t, a[live], b[live], o[live], o2[live],
                                             pin[live])
        pid, o, o2 = pid[live], o[live], o2[live]
        base = pid * k
        dS = (np.bincount(base + o, weights=-so, minlength=P * k)
              + np.bincount(base + o2, weights=so2, minlength=P * k)).astype(np.int64)
        dR = np.bincount((base[:, None] + parts).ravel(), weights=drecv.ravel(), minlength=P * k).astype(np.int64)
        dS, dR = _allsum(self.comm, dS).reshape(P, k), _allsum(self.comm, dR).reshape(P, k)
        return dS, dR, (t, tinv, counts)

    def _exact(self, U, A, B, v, pid, pin, chosen: np.ndarray, cache):
        """Exact send / recv change of moving every chosen proposal together, and
        the local nets' new sends (for the nets touched)."""
        k = self.k
        t, tinv, counts = cache
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
        pos = self.big_pos[t[ti]]
        big = (pos >= 0) & (pin[sel] > 0)
        moves = (pos[big], A[pid[sel]][big], B[pid[sel]][big])
        return d[:k], d[k:], (t[touched], ns1, moves)

    # ----------------------------------------------------------------- select
    def _select(self, U, A, B, Wu, kind, dS, dR):
        """The moves to commit, chosen the same way on every process from the
        proposals' exact single-move changes: repairs first (least damage per
        weight), then bottleneck moves by gain; each must keep every load at or
        below the current maximum."""
        send, recv, W = self.send.astype(np.float64), self.recv.astype(np.float64), self.W.copy()
        L = _load(send, recv)
        Bmax = L.max()
        cap = Bmax if self.load_cap is None else self.load_cap
        gamma = self.ctx.gamma
        L2 = np.maximum(send + dS, recv + dR)
        gain = (L * L - L2 * L2).sum(1) - gamma * Bmax * dS.sum(1)
        rep = np.flatnonzero(kind == 1)
        bot = np.flatnonzero((kind == 0) & (gain > 0))
        order = np.concatenate([rep[np.argsort(-gain[rep] / np.maximum(Wu[rep], 1), kind="stable")],
                                bot[np.argsort(-gain[bot], kind="stable")]])
        chosen = []
        for i in order:
            a, b, w = A[i], B[i], Wu[i]
            if kind[i] == 1:
                if W[a] <= self.Wmax or W[b] + w > self.Wmax:
                    continue
            elif W[b] + w > self.Wslack:
                continue
            nz = np.flatnonzero(dS[i] | dR[i])
            s2, r2 = send[nz] + dS[i, nz], recv[nz] + dR[i, nz]
            l2 = np.maximum(s2, r2)
            if l2.size and l2.max() > (cap if kind[i] == 1 else Bmax):
                continue
            if kind[i] == 0 and float((L[nz] ** 2).sum() - (l2 ** 2).sum()) - gamma * Bmax * float(dS[i].sum()) <= 0:
                continue
            send[nz], recv[nz], L[nz] = s2, r2, l2
            W[a] -= w
            W[b] += w
            chosen.append(i)
        return np.array(chosen, np.int64)

    def _over(self, W, cap):
        return int(np.maximum(W - cap, 0).sum())

    def _better(self, dS, dR, chosen, Wu, A, B) -> bool:
        """Does the exact combined change of the chosen moves keep the rules?"""
        s2, r2 = self.send + dS, self.recv + dR
        B0 = _load(self.send, self.recv).max()
        W2 = self.W.copy()
        np.add.at(W2, A[chosen], -Wu[chosen])
        np.add.at(W2, B[chosen], Wu[chosen])
        cap = B0 if self.load_cap is None else max(B0, self.load_cap)
        if _load(s2, r2).max() > cap or self._over(W2, self.Wslack) > self._over(self.W, self.Wslack):
            return False
        if self._over(W2, self.Wmax) < self._over(self.W, self.Wmax):
            return True
        return _phi(s2, r2, self.ctx.gamma, B0) < _phi(self.send, self.recv, self.ctx.gamma, B0)

    # ----------------------------------------------------------------- round
    def round(self, theta: float, repair_only: bool = False) -> int:
        """One propose / evaluate / select / commit round; returns the moves committed."""
        comm = self.comm
        got = comm.allgather(self._propose(theta, repair_only))
        U = np.concatenate([g[0] for g in got])
        if U.size == 0:
            return 0
        A = np.concatenate([g[1] for g in got]).astype(np.int64)
        B = np.concatenate([g[2] for g in got]).astype(np.int64)
        Wu = np.concatenate([g[3] for g in got]).astype(np.int64)
        kind = np.concatenate([g[4] for g in got])
        v, pid, pin = self._route(U, A, B, None)
        dS, dR, cache = self._evaluate(U, A, B, v, pid, pin)
        chosen = self._commit(U, A, B, Wu, v, pid, pin, cache, self._select(U, A, B, Wu, kind, dS, dR))
        mine = (U >= self.sl.lo) & (U < self.sl.hi)
        moved = np.zeros(U.size, bool)
        moved[chosen] = True
        f = self.fails
        f[U[mine & ~moved] - self.sl.lo] = np.minimum(f[U[mine & ~moved] - self.sl.lo], 60) + 1
        f[U[mine & moved] - self.sl.lo] = 0
        return int(chosen.size)

    def _commit(self, U, A, B, Wu, v, pid, pin, cache, chosen):
        """Apply the selected moves, halved until their exact combined change keeps the rules; returns
        the committed proposals."""
        while chosen.size:
            mask = np.zeros(U.size, bool)
            mask[chosen] = True
            eS, eR, (nets, ns, (bp, ba, bb)) = self._exact(U, A, B, v, pid, pin, mask, cache)
            if self._better(eS, eR, chosen, Wu, A, B):
                self.part[U[chosen]] = B[chosen]
                np.add.at(self.W, A[chosen], -Wu[chosen])
                np.add.at(self.W, B[chosen], Wu[chosen])
                self.send += eS
                self.recv += eR
                self.net_send[nets] = ns
                np.add.at(self.big_counts, (bp, ba), -1)
                np.add.at(self.big_counts, (bp, bb), 1)
                mine = U[chosen][(U[chosen] >= self.sl.lo) & (U[chosen] < self.sl.hi)] - self.sl.lo
                if mine.size:
                    self.ext[mine] = self._external_degree(mine)
                return chosen
            chosen = chosen[: chosen.size // 2]
        return chosen

    # ----------------------------------------------------------------- best state
    def feasible(self) -> bool:
        return int(self.W.max()) <= self.Wfinal

    def key(self) -> tuple[int, int]:
        return int(_load(self.send, self.recv).max()), int(self.send.sum())

    def snapshot(self):
        return (self.part.copy(), self.send.copy(), self.recv.copy(), self.W.copy(), self.key())

    def restore(self, snap) -> None:
        part, self.send, self.recv, self.W, _ = snap
        self.part[:] = part
        _, _, self.net_send = local_volume(self.sl, self.part, self.k)
        self.ext = self._all_external_degrees()
        self._keep_big_nets()


def _mpi_max():
    from mpi4py import MPI
    return MPI.MAX


def refine_distributed(comm, sl: RowSlice, part: np.ndarray, k: int, eps: float,
                       ctx: DistributedRefineContext | None = None, progress=None) -> RefineResult:
    """Refine ``part`` (int32[n], the same on every process; changed in place)
    for max(send, recv). Collective over ``comm``. Returns the exact figures
    before and after (recounted from scratch at the end).

    Bottleneck moves may fill a part up to ``(1 + slack)`` × the weight limit;
    repair moves then take parts back under it. The result is the best state
    seen (lowest max(send, recv), then total volume) whose heaviest part is
    within ⌊(1 + ε) W / k⌋, or within the input's heaviest part when that was
    already above."""
    ctx = ctx or DistributedRefineContext()
    t0 = time.perf_counter()
    r = _Refiner(comm, sl, part, k, eps, ctx)
    before = {"total_volume": int(r.send.sum()), "max_send": int(r.send.max()), "max_recv": int(r.recv.max()),
              "max_weight": int(r.W.max())}
    res = RefineResult(send=r.send, recv=r.recv, weights=r.W, before=before)
    best = r.snapshot() if r.feasible() else None
    idle, theta = 0, ctx.theta
    for i in range(ctx.rounds):
        if ctx.time_limit is not None and comm.bcast(time.perf_counter() - t0 > ctx.time_limit, root=0):
            break   # process 0's clock decides for all, so every process leaves at the same round
        moved = r.round(theta)
        res.rounds, res.moved = i + 1, res.moved + moved
        if r.feasible() and (best is None or r.key() < best[4]):
            best = r.snapshot()
        res.history.append((i, moved, *r.key()))
        if progress is not None and i % 10 == 0:
            progress(f"refine round {i}: moved {moved}, max(send, recv) {r.key()[0]}, total {r.key()[1]}")
        h = res.history
        if len(h) > ctx.stall_rounds and h[-1][2] > (1.0 - ctx.stall_gain) * h[-1 - ctx.stall_rounds][2]:
            break
        if moved == 0:
            idle += 1
            theta = max(0.5, theta - 0.1)
            if idle >= 4:
                break
        else:
            idle = 0
    # back under the weight limit; repairs may raise the maximum load up to just below the best
    # state within the limit, so a state they reach is still better than that one
    r.load_cap = None if best is None else best[4][0] - 1
    for _ in range(ctx.repair_rounds):
        if r.feasible() or r.round(ctx.theta, repair_only=True) == 0:
            break
    if r.feasible() and (best is None or r.key() <= best[4]):
        best = None   # the current state is the best feasible one
    # the kept counts of the state reached, against a recount (restore() recounts them anyway)
    kept = np.array_equal(r.big_counts, net_counts(sl, part, np.flatnonzero(r.big_pos >= 0), k))
    if best is not None:
        r.restore(best)
    s, rv, wts = recount(comm, sl, part, k)
    if not (np.array_equal(s, r.send) and np.array_equal(rv, r.recv) and np.array_equal(wts, r.W) and kept):
        raise RuntimeError("internal error: the refinement's maintained figures differ from the recount")
    res.send, res.recv, res.weights = s, rv, r.W
    res.seconds = time.perf_counter() - t0
    return res


__all__ = ["RowSlice", "DistributedRefineContext", "RefineResult", "refine_distributed", "local_volume", "net_counts",
           "recount"]
