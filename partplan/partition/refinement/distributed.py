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

**Coordinated moves.** When the single moves stop (the stall rule, or four
rounds without a move), a *phase* of coordinated moves runs (at most
``coordinated_phases`` of them, none on a graph with more than
``coordinated_max_nnz`` nonzeros, where they gained nothing for twice the time; the
single rounds go on after one that lowered the maximum or the total by more than
``phase_total_gain``, else the rounds end):

* **Pulls** (``pulls`` = 2, the default; 1: in every round, 0: none), until a
  round moves none (10 rounds at most): a vertex outside
  the heavy parts with at least half of its neighbours in one heavy part h
  moves into h (it leaves h's recv, and h's nets lose their pins outside: the
  satellites of a hub). A pull round also proposes the single moves; a pull
  whose target is full takes along the bottleneck move out of h (one of the
  round's proposals, gain or not) that makes room and gives the pair the
  largest summed gain, so the pair moves together or not at all.
* **Whole clusters** (``cluster_levels`` > 0; 0 by default: they lowered no
  maximum on the tuning graphs, docs/design/distributed.md): each process
  clusters its own rows in the heavy parts
  (:func:`local_clusters`: mutual-best matching along local edges within a
  part, level by level, clusters up to ``cluster_weight`` × the balance slack;
  no other process is involved), and from the coarsest level down each level
  gets up to two rounds in which whole clusters (two or more rows, one heavy
  part) move to a part they have neighbours in. A cluster is one proposal:
  its members' (net, proposal) pairs are summed per net (pins moving, owner
  moving), which the exact single-move arithmetic takes as it is, so the
  evaluate / select / commit steps are those of the single moves.

After the rounds, repair rounds take every part back under the weight limit
(or under the engine's heaviest part, when that was above it); they may raise
the maximum load to just below that of the best state seen within the
limit. The result is the best state seen within it.

Every figure (send, recv, part weights) is recounted from scratch at the end and must equal the
maintained one (an internal error otherwise).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..._kernels import njit
from ...program.exchange import segments as _ranges
from ..context import DistributedRefineContext
from ..objectives import eps_limit
from ..options import rng_seed

#: most cells (rows × heavy parts) a pull round counts at once (bounds memory: 128 MiB of int64)
_BLOCK_CELLS = 1 << 24
#: most cells of the kept pin counts of the large nets: this many, or ``_BIG_SHARE`` × the
#: process's nonzeros when that is more (int32 cells: 1 per nonzero is half the bytes of
#: its int64 column ids)
_BIG_CELLS = 1 << 24
_BIG_SHARE = 1
#: nets with fewer pins than this are always counted from their pins
_BIG_MIN_PINS = 8


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
    phases: int = 0
    cluster_moved: int = 0


@njit
def _count_pins(colptr, colidx, part, nets, out):
    """Add the pins of local nets ``nets`` per part to the rows of ``out``."""
    for i in range(nets.size):
        w = nets[i]
        for e in range(colptr[w], colptr[w + 1]):
            out[i, part[colidx[e]]] += 1


@njit
def _scan_nets(colptr, colidx, part, lo, send, recv, net_send, seen, big_pos, big_counts, check, row, ext):
    """One pass over the local nets' pins. Each net's send (λ less its owner's part, when
    that holds a pin) into ``net_send``, summed into ``send`` at its owner's part, and one
    recv for every other part holding a pin; ``seen`` (int64[k], all −1): the last net that
    met each part. When ``big_pos`` has a slot per net, the kept pin counts of the nets with
    ``big_pos[w] >= 0``: added to ``big_counts`` (``check`` False), or counted into the
    scratch ``row`` (int64[k], zeros) and compared with them (``check`` True; returns False
    on a difference). When ``ext`` has a slot per net (a symmetric pattern: net w's pins
    are row w), each row's neighbours outside its part."""
    k = seen.size
    same = True
    with_ext = ext.size == colptr.size - 1
    with_big = big_pos.size == colptr.size - 1
    for w in range(colptr.size - 1):
        o = part[lo + w]
        pos = big_pos[w] if with_big else -1
        lam = 0
        own = 0
        out = 0
        for e in range(colptr[w], colptr[w + 1]):
            p = part[colidx[e]]
            if p != o:
                out += 1
            if pos >= 0:
                if check:
                    row[p] += 1
                else:
                    big_counts[pos, p] += 1
            if seen[p] != w:
                seen[p] = w
                lam += 1
                if p == o:
                    own = 1
                else:
                    recv[p] += 1
        net_send[w] = lam - own
        send[o] += lam - own
        if with_ext:
            ext[w] = out
        if pos >= 0 and check:
            for p in range(k):
                if row[p] != big_counts[pos, p]:
                    same = False
                row[p] = 0
    return same


@njit
def _external_rows(indptr, indices, part, lo, out):
    """Each local row's neighbours outside its own part."""
    for r in range(indptr.size - 1):
        a = part[lo + r]
        c = 0
        for e in range(indptr[r], indptr[r + 1]):
            if part[indices[e]] != a:
                c += 1
        out[r] = c


@njit
def _bottleneck_scores(a, heavy_s, heavy_r, net_send, ext, fails, rows_out, score_out):
    """The bottleneck candidates' scores in one pass over the rows: a row of a part heavy on
    send scores its net's send, one heavy on recv its external degree (both: the sum), halved
    every second rejection (``fails``); the rows with a positive score into ``rows_out`` /
    ``score_out`` in row order. Returns their number. (The same floats as the vectorized
    form: integers below 2⁵³ and exact powers of two.)"""
    m = 0
    for r in range(a.size):
        p = a[r]
        if heavy_s[p] or heavy_r[p]:
            x = float(net_send[r]) if heavy_s[p] else 0.0
            x = x + (float(ext[r]) if heavy_r[p] else 0.0)
            x = x * math.ldexp(1.0, -(int(fails[r]) // 2))
            if x > 0:
                rows_out[m] = r
                score_out[m] = x
                m += 1
    return m


@njit
def _pair_counts_of(colptr, colidx, part, nets, big_pos, big_counts, large, p0, p1, p2, c0, c1, c2):
    """For each pair i: the pins of local net ``nets[i]`` in parts ``p0[i]``, ``p1[i]`` and
    ``p2[i]``, read from the kept counts (``big_pos[w] >= 0``) or counted over the net's pins
    when it has fewer than ``large``; −1 in all three for a large net not kept (counted by
    the caller, once per net)."""
    for i in range(nets.size):
        w = nets[i]
        pos = big_pos[w]
        if pos >= 0:
            c0[i], c1[i], c2[i] = big_counts[pos, p0[i]], big_counts[pos, p1[i]], big_counts[pos, p2[i]]
        elif colptr[w + 1] - colptr[w] >= large:
            c0[i] = c1[i] = c2[i] = -1
        else:
            x0 = x1 = x2 = 0
            for e in range(colptr[w], colptr[w + 1]):
                p = part[colidx[e]]
                x0 += p == p0[i]
                x1 += p == p1[i]
                x2 += p == p2[i]
            c0[i], c1[i], c2[i] = x0, x1, x2


def net_counts(sl: RowSlice, part: np.ndarray, nets: np.ndarray, k: int) -> np.ndarray:
    """int32[len(nets), k]: pins of each local net (index into [lo, hi)) per part,
    counted over their pins (O(pins), no temporary beside the result)."""
    out = np.zeros((nets.size, k), np.int32)
    _count_pins(sl.colptr, sl.colidx, part, np.asarray(nets, np.int64), out)
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
    exact 1D volumes) and each local net's send (int32[rows]); one pass over
    the pins."""
    send, recv = np.zeros(k, np.int64), np.zeros(k, np.int64)
    net_send = np.zeros(sl.rows, np.int32)
    none = np.zeros(0, np.int64)
    _scan_nets(sl.colptr, sl.colidx, part, sl.lo, send, recv, net_send, np.full(k, -1, np.int64), none,
               np.zeros((0, k), np.int32), False, none, none)
    return send, recv, net_send


def recount(comm, sl: RowSlice, part: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The exact send, recv and part weights (int64[k] each) of ``part``,
    counted from scratch over every process's rows. Collective."""
    s, r, _ = local_volume(sl, part, k)
    w = np.bincount(part[sl.lo:sl.hi], weights=sl.weight, minlength=k).astype(np.int64)
    return _allsum(comm, s), _allsum(comm, r), _allsum(comm, w)


def pair_volume(comm, sl: RowSlice, part: np.ndarray, k: int) -> tuple[np.ndarray | None, int]:
    """(the volume matrix int64[k, k] — rows of H from part q (row) to part r (column) — in
    process 0, None in the others; the edge cut: nonzeros a_ij with part[i] != part[j]) of
    ``part``, counted over every process's nets. Each process holds one k × k matrix while the
    sum is reduced into process 0. Collective."""
    from mpi4py import MPI

    from ..._kernels import net_volume
    vol, cut = net_volume(sl.colptr, sl.colidx, part, k, sl.lo)
    cut = int(cut)
    total = np.empty_like(vol) if comm.Get_rank() == 0 else None
    comm.Reduce(vol, total, op=MPI.SUM, root=0)
    return total, int(comm.allreduce(cut, op=MPI.SUM))


def _allsum(comm, x: np.ndarray) -> np.ndarray:
    from mpi4py import MPI
    out = np.empty_like(x)
    comm.Allreduce(x, out, op=MPI.SUM)
    return out


@njit
def _pair_changes(ca, cb, co, co2, lam, a, b, o, o2, pin, pid, dS, dR):
    """Exact send / recv change of single moves on nets, summed per proposal. Pair ``i``: a
    move ``a[i] → b[i]`` of ``pin[i]`` pins of a net (0: the moved vertex only owns it) with
    ``ca`` / ``cb`` / ``co`` / ``co2`` pins in a, b, its owner's part before (``o``) and after
    (``o2``: ``b`` when the net's own vertex moves, else ``o``) and λ ``lam`` parts holding a
    pin. Its change of send (at o and o2) and of recv (at a and b) is added to row ``pid[i]``
    of ``dS`` / ``dR`` (int64[proposals, k])."""
    for i in range(a.size):
        ai, bi, oi, o2i, q = a[i], b[i], o[i], o2[i], pid[i]
        ca2, cb2 = ca[i] - pin[i], cb[i] + pin[i]
        lam2 = lam[i] - (1 if ca[i] > 0 and ca2 == 0 else 0) + (1 if cb[i] == 0 and cb2 > 0 else 0)
        hb_a, hb_b = ca[i] > 0, cb[i] > 0
        ha_a, ha_b = ca2 > 0, cb2 > 0
        ha_o2 = ha_a if o2i == ai else (ha_b if o2i == bi else co2[i] > 0)
        dS[q, oi] -= lam[i] - (1 if co[i] > 0 else 0)
        dS[q, o2i] += lam2 - (1 if ha_o2 else 0)
        # recv changes only in a and b: the owner's part is a when the net's own vertex moves (o2 = b),
        # else o2 = o, whose count and role do not change
        dR[q, ai] += (1 if ha_a and ai != o2i else 0) - (1 if hb_a and ai != oi else 0)
        if bi != ai:
            dR[q, bi] += (1 if ha_b and bi != o2i else 0) - (1 if hb_b and bi != oi else 0)


def _load(send, recv):
    return np.maximum(send, recv)


def local_clusters(sl: RowSlice, part: np.ndarray, maxw: int, seed: int = 0, max_levels: int = 8,
                   passes: int = 3, rows_in: np.ndarray | None = None,
                   block: int = 1 << 22) -> list[tuple[np.ndarray, int]]:
    """Clusters of this process's rows within their parts, coarsest level first: each
    level is (cid, count), cid int64[rows] the local cluster of each row. Level by
    level, clusters are matched in pairs along the local edges between rows of one
    part (both in ``[lo, hi)``: no other process is involved), a pair only when it
    weighs at most ``maxw`` (row weights: their nonzeros); each cluster takes the
    neighbour it shares the most rating with (an edge u–v rates 1/deg u + 1/deg v,
    the nets u and v themselves, so hubs join last; summed when clusters merge) and
    the mutual choices match (``passes`` times, among the unmatched). A level that
    shrinks the count by less than 5 % ends the hierarchy. ``rows_in`` (bool[rows]):
    only these rows are clustered (the others stay alone); the rows are read in blocks
    of about ``block`` nonzeros, and only the edges kept are held."""
    rows = sl.rows
    if rows < 2:
        return []
    deg = np.diff(sl.indptr)
    a = part[sl.lo:sl.hi]
    take = np.ones(rows, bool) if rows_in is None else rows_in
    xs, ys = [], []
    step = max(1, block // max(1, int(deg.mean()) if rows else 1))
    for r0 in range(0, rows, step):
        t = np.flatnonzero(take[r0:r0 + step]) + r0
        lens = deg[t]
        r = np.repeat(t, lens)
        c = sl.indices[_ranges(sl.indptr[t], lens)] - sl.lo
        ok = (c >= 0) & (c < rows)
        r, c = r[ok], c[ok]
        ok = (c != r) & take[c] & (a[r] == a[c])
        xs.append(np.minimum(r[ok], c[ok]))
        ys.append(np.maximum(r[ok], c[ok]))
    key = np.unique(np.concatenate(xs) * rows + np.concatenate(ys)) if xs else np.zeros(0, np.int64)
    del xs, ys
    x, y = key // rows, key % rows
    rng = np.random.default_rng(rng_seed(seed))
    rate = (1.0 / deg[x] + 1.0 / deg[y]) * (1.0 + 1e-6 * rng.random(x.size))   # ties broken at random
    cw = deg.astype(np.int64)
    cid = np.arange(rows, dtype=np.int64)
    n, levels = rows, []
    for _ in range(max_levels):
        mate = np.full(n, -1, np.int64)
        for _ in range(passes):
            ok = (mate[x] < 0) & (mate[y] < 0) & (cw[x] + cw[y] <= maxw)
            if not ok.any():
                break
            X, Y = np.concatenate([x[ok], y[ok]]), np.concatenate([y[ok], x[ok]])
            R = np.concatenate([rate[ok], rate[ok]])
            o = np.lexsort((-R, X))
            X, Y = X[o], Y[o]
            first = np.r_[True, X[1:] != X[:-1]]
            best = np.full(n, -1, np.int64)
            best[X[first]] = Y[first]
            xs = X[first]
            m = xs[best[best[xs]] == xs]
            mate[m] = best[m]
        matched = mate >= 0
        root = np.where(matched, np.minimum(np.arange(n), mate), np.arange(n))
        heads, new = np.unique(root, return_inverse=True)
        if heads.size > 0.95 * n:
            break
        cw = np.bincount(new, weights=cw, minlength=heads.size).astype(np.int64)
        cid = new[cid]
        x, y = new[x], new[y]
        keep = x != y
        x, y, rate = np.minimum(x[keep], y[keep]), np.maximum(x[keep], y[keep]), rate[keep]
        n = heads.size
        key, inv = np.unique(x * n + y, return_inverse=True)
        rate = np.bincount(inv, weights=rate, minlength=key.size)
        x, y = key // n, key % n
        levels.append((cid.copy(), n))
    return levels[::-1]


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
        self.Wmax = eps_limit(total, k, eps)
        self.Wslack = int(np.floor(self.Wmax * (1.0 + ctx.slack)))
        self.Wfinal = max(self.Wmax, int(self.W.max()))
        self.load_cap = None   # repair moves may raise loads up to this (None: the current maximum)
        s, r = self._scan()
        self.send, self.recv = _allsum(comm, s), _allsum(comm, r)
        # rounds each local vertex was proposed and not moved since it last moved: every second one
        # halves its score, so the same rejected candidates do not fill every round's proposals
        self.fails = np.zeros(sl.rows, np.int8)
        self._pull_at = 0
        self._slot = np.zeros(sl.rows, np.int64)   # scratch of _nets_of: a net's index among a round's nets

    def _scan(self, check: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """One pass over the local pins: this process's send / recv per part (returned),
        each net's send, the rows' external degrees and the kept counts of the large nets
        (:meth:`_keep_big_nets` chooses them). ``check``: the kept counts are compared with
        the pins instead of counted; ``self.kept_ok`` says whether they agreed."""
        sl, k = self.sl, self.k
        if not check:
            self._keep_big_nets()
        send, recv = np.zeros(k, np.int64), np.zeros(k, np.int64)
        self.net_send = np.zeros(sl.rows, np.int32)
        symmetric = sl.colptr is sl.indptr and sl.colidx is sl.indices
        ext = np.zeros(sl.rows if symmetric else 0, np.int64)
        self.kept_ok = _scan_nets(sl.colptr, sl.colidx, self.part, sl.lo, send, recv, self.net_send,
                                  np.full(k, -1, np.int64), self.big_pos, self.big_counts, check,
                                  np.zeros(k, np.int64), ext)
        if not check:
            self.ext = ext if symmetric else self._all_external_degrees()
        return send, recv

    def _keep_big_nets(self) -> None:
        """Choose the largest local nets whose pin counts per part are kept (at least
        ``_BIG_MIN_PINS`` pins, at most ``max(_BIG_CELLS, _BIG_SHARE × nonzeros)`` cells, the largest
        first) and update them
        on every commit: a round touches the hubs' nets through most proposals'
        neighbours, and recounting a hub's pins each round costs its degree."""
        sl, k = self.sl, self.k
        size = np.diff(sl.colptr)
        cap = max(0, max(_BIG_CELLS, _BIG_SHARE * sl.indices.size) // k)
        big = np.flatnonzero(size >= _BIG_MIN_PINS)
        if big.size > cap:
            big = big[np.argpartition(-size[big], cap - 1)[:cap]] if cap else big[:0]
            big.sort()
        self.big_pos = np.full(sl.rows, -1, np.int64)
        self.big_pos[big] = np.arange(big.size)
        self.big_counts = np.zeros((big.size, k), np.int32)   # counted by _scan

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

    def _all_external_degrees(self) -> np.ndarray:
        """External degree of every local row (one pass over the rows)."""
        sl = self.sl
        out = np.zeros(sl.rows, np.int64)
        _external_rows(sl.indptr, sl.indices, self.part, sl.lo, out)
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
        deg = self.w   # a row's nonzeros
        m = min(ctx.per_round, max(1, (1 << 22) // (k * self.size)))
        picks = []   # (rows with a positive score, their scores, kind, most), scored only in the parts concerned
        if over.any():   # repair: most weight per neighbour left behind in the part first
            rows = np.flatnonzero(over[a] & (self.w > 0))
            score = self.w[rows] / (1.0 + deg[rows] - self.ext[rows])
            score = score * np.ldexp(1.0, -(self.fails[rows].astype(np.int32) // 2))   # halved every second rejection
            keep = score > 0
            picks.append((rows[keep], score[keep], 1, m // 2 if not repair_only else m))
        if not repair_only:
            rows, score = np.empty(sl.rows, np.int64), np.empty(sl.rows, np.float64)
            c = _bottleneck_scores(a, hs, hr, self.net_send, self.ext, self.fails, rows, score)
            picks.append((rows[:c], score[:c], 0, m - (m // 2 if over.any() else 0)))
        us, kinds = [], []
        budget = max(1, ctx.pair_budget // self.size)
        for rows, score, kind, cap in picks:
            cand = np.arange(rows.size)
            if cand.size > cap:
                cand = cand[np.argpartition(-score[cand], cap - 1)[:cap]]
            cand = rows[cand[np.argsort(-score[cand], kind="stable")]]
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
        return ((sl.lo + u[keep]).astype(np.int64), np.arange(int(keep.sum()), dtype=np.int64),
                au[keep].astype(np.int32), b[keep].astype(np.int32), wu[keep], kind[keep])

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
        est = np.maximum(self.net_send[u], self.ext[u]).astype(np.float64)
        return self._choose(inside, lens, est, au, wu, kind, L)

    def _choose(self, inside, lens, est, au, wu, kind, L, adjacent: bool = False) -> np.ndarray:
        """The target loop of :meth:`_targets` for candidates (single vertices or clusters) with
        ``inside[i, p]`` neighbours in part p out of ``lens[i]``, estimated load ``est[i]``;
        ``adjacent``: only parts holding a neighbour."""
        est = est * self.size
        limit = np.where(kind == 1, self.Wmax, self.Wslack)
        Lv, Wv = L.astype(np.float64), self.W.astype(np.float64)
        gamma = self.ctx.gamma
        out = np.full(au.size, -1, np.int64)
        Bmax = max(float(L.max()), 1.0)
        for i in range(au.size):
            if kind[i] == 1:   # a repair: where most of its neighbours are, then the most weight and load room
                cost = Wv / self.Wmax + Lv / Bmax + gamma * (lens[i] - inside[i]) / Bmax
            else:
                cost = Lv + gamma * (lens[i] - inside[i])
            cost[au[i]] = np.inf
            cost[Wv + wu[i] > limit[i]] = np.inf
            if adjacent:
                cost[inside[i] == 0] = np.inf
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

    def _propose_clusters(self, cid: np.ndarray, nc: int, theta: float):
        """Whole-cluster proposals (one level of :func:`local_clusters`): clusters of two or
        more rows, all in one part that is heavy (send or recv ≥ θ × the maximum), scored
        by the sum of their members' single-move scores (boundary rows only score), the
        best ``per_round`` within the pair budget; the target is chosen like a single
        move's (:meth:`_choose`) among the parts the cluster has neighbours in, outside
        it. Returns (members, their proposal, from, to, weight, kind 0)."""
        sl, k, part, ctx = self.sl, self.k, self.part, self.ctx
        none = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32),
                np.zeros(0, np.int64), np.zeros(0, np.int8))
        if nc == 0:
            return none
        L = _load(self.send, self.recv)
        Bm = L.max()
        hs, hr = self.send >= theta * Bm, self.recv >= theta * Bm
        a = part[sl.lo:sl.hi].astype(np.int64)
        deg = self.w   # a row's nonzeros
        cmem = np.argsort(cid, kind="stable")
        size = np.bincount(cid, minlength=nc)
        cptr = np.zeros(nc + 1, np.int64)
        np.cumsum(size, out=cptr[1:])
        am = a[cmem]
        lo_p, hi_p = np.minimum.reduceat(am, cptr[:-1]), np.maximum.reduceat(am, cptr[:-1])
        vscore = np.where(hs[a], self.net_send, 0).astype(np.float64) + np.where(hr[a], self.ext, 0)
        score = np.bincount(cid, weights=vscore, minlength=nc)
        cdeg = np.bincount(cid, weights=deg, minlength=nc)
        cand = np.flatnonzero((size >= 2) & (lo_p == hi_p) & (score > 0))
        m = min(ctx.per_round, max(1, (1 << 22) // (k * self.size)))
        if cand.size > m:
            cand = cand[np.argpartition(-score[cand], m - 1)[:m]]
        cand = cand[np.argsort(-score[cand], kind="stable")]
        budget = max(1, ctx.pair_budget // self.size)
        cand = cand[np.cumsum(cdeg[cand] + size[cand]) <= budget]
        cand.sort()   # cluster order (the members' row order), like the single moves
        if cand.size == 0:
            return none
        j = np.repeat(np.arange(cand.size), size[cand])
        mem = cmem[_ranges(cptr[cand], size[cand])]
        lens = deg[mem]
        nbv = sl.indices[_ranges(sl.indptr[mem], lens)]
        seg = np.repeat(j, lens)
        loc = nbv - sl.lo
        inner = (loc >= 0) & (loc < sl.rows)
        inner[inner] = cid[loc[inner]] == cand[seg[inner]]
        seg, nbp = seg[~inner], part[nbv[~inner]].astype(np.int64)
        inside = np.bincount(seg * k + nbp, minlength=cand.size * k).reshape(cand.size, k)
        outl = np.bincount(seg, minlength=cand.size)
        est = np.bincount(j, weights=np.maximum(self.net_send[mem], self.ext[mem]), minlength=cand.size)
        wc = np.bincount(j, weights=self.w[mem], minlength=cand.size).astype(np.int64)
        ac = lo_p[cand]
        b = self._choose(inside, outl, est, ac, wc, np.zeros(cand.size, np.int8), L, adjacent=True)
        keep = b >= 0
        newid = np.cumsum(keep) - 1
        km = keep[j]
        return ((sl.lo + mem[km]).astype(np.int64), newid[j[km]].astype(np.int64), ac[keep].astype(np.int32),
                b[keep].astype(np.int32), wc[keep], np.zeros(int(keep.sum()), np.int8))

    def _propose_pulls(self, theta: float):
        """Pull proposals: a vertex outside the heavy parts (send or recv ≥ θ × the maximum)
        with most of its neighbours in one heavy part h moves into h (it leaves h's recv,
        and h's nets lose a pin outside; the satellites of a hub, say). Scored by its
        neighbours in h less those outside h (at least half of them, itself included, in h);
        the best ``per_round`` within the pair budget. Reads the rows of the boundary vertices
        of the light parts (at most 4 × the pair budget nonzeros per round: the rows in a
        window that moves on every round)."""
        sl, k, part, ctx = self.sl, self.k, self.part, self.ctx
        none = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32),
                np.zeros(0, np.int64), np.zeros(0, np.int8))
        L = _load(self.send, self.recv)
        hot = L >= theta * L.max()
        a = part[sl.lo:sl.hi]
        deg = self.w   # a row's nonzeros
        rows = np.flatnonzero(~hot[a] & (self.ext > 0))
        hp = np.flatnonzero(hot)
        cap = 4 * max(1, ctx.pair_budget // self.size)
        most = max(1, _BLOCK_CELLS // max(1, hp.size))   # rows × heavy parts counted at most
        if int(deg[rows].sum()) > cap or rows.size > most:   # a window of rows from where the last one ended
            rows = np.roll(rows, -int(np.searchsorted(rows, self._pull_at)))
            rows = np.sort(rows[: min(most, max(1, int(np.searchsorted(np.cumsum(deg[rows]), cap))))])
            self._pull_at = int(rows[-1]) + 1 if rows[-1] + 1 < sl.rows else 0
        if rows.size == 0:
            return none
        lens = deg[rows]
        nbp = part[sl.indices[_ranges(sl.indptr[rows], lens)]].astype(np.int64)
        seg = np.repeat(np.arange(rows.size), lens)
        hid = np.full(k, -1, np.int64)
        hid[hp] = np.arange(hp.size)
        inh = hid[nbp] >= 0
        cnt = np.bincount(seg[inh] * hp.size + hid[nbp[inh]], minlength=rows.size * hp.size).reshape(rows.size, -1)
        best = cnt.argmax(1)
        c = cnt[np.arange(rows.size), best]
        score = 2 * c - lens + 1   # at least half its neighbours (itself included) in h
        ok = np.flatnonzero((score > 0) & (c > 0))
        m = min(ctx.per_round, max(1, (1 << 22) // (k * self.size)))
        if ok.size > m:
            ok = ok[np.argpartition(-score[ok], m - 1)[:m]]
        ok = ok[np.argsort(-score[ok], kind="stable")]
        ok = ok[np.cumsum(lens[ok]) <= max(1, ctx.pair_budget // self.size)]
        ok.sort()
        u = rows[ok]
        b = hp[best[ok]]
        return ((sl.lo + u).astype(np.int64), np.arange(u.size, dtype=np.int64), a[u].astype(np.int32),
                b.astype(np.int32), self.w[u], np.zeros(u.size, np.int8))

    def clusters(self, theta: float) -> list[tuple[np.ndarray, int]]:
        """:func:`local_clusters` of the rows in the heavy parts (send or recv ≥ θ × the
        maximum: only their clusters are proposed), clusters up to ``cluster_weight`` × the
        balance slack (plus two average rows). Where these rows hold more than 4 × the pair
        budget's nonzeros, only their boundary rows, and of those the first within it."""
        avg = -(-int(self.W.sum()) // self.k)
        slack = max(self.Wmax - avg, 0)
        maxw = int(self.ctx.cluster_weight * slack + 2 * self.W.sum() / max(self.sl.n, 1)) + 1
        L = _load(self.send, self.recv)
        hot = L >= theta * L.max()
        rows_in = hot[self.part[self.sl.lo:self.sl.hi]]
        deg = np.diff(self.sl.indptr)
        cap = 4 * max(1, self.ctx.pair_budget // self.size)   # nonzeros read (the edges kept: fewer)
        if int(deg[rows_in].sum()) > cap:   # the boundary rows of the heavy parts, then the first of them
            rows_in &= self.ext > 0
            r = np.flatnonzero(rows_in)
            rows_in[r[np.cumsum(deg[r]) > cap]] = False
        return local_clusters(self.sl, self.part, maxw, seed=self.ctx.seed + self.rank, rows_in=rows_in)

    # ----------------------------------------------------------------- evaluate
    def _route(self, M, mp, P: int, grouped: bool):
        """(net, proposal, pins, owns) for this process's nets, from every proposer: the
        proposal's members that are pins of the net, and whether the net's own vertex is
        one of them (it moves the net's owner). ``M`` / ``mp``: the proposals' member
        vertices and their proposal; ``grouped``: a proposal may have several members
        (a cluster), whose pairs on one net are summed."""
        sl = self.sl
        idx = np.flatnonzero((M >= sl.lo) & (M < sl.hi))
        rows = M[idx] - sl.lo
        lens = sl.indptr[rows + 1] - sl.indptr[rows]
        v = sl.indices[_ranges(sl.indptr[rows], lens)]
        pp = np.repeat(mp[idx], lens)
        npin = int(lens.sum())
        if grouped:   # every member's pairs, then one pair per (net, proposal)
            v = np.concatenate([v, M[idx]])
            pp = np.concatenate([pp, mp[idx]])
            pin = np.concatenate([np.ones(npin, np.int64), np.zeros(idx.size, np.int64)])
            own = np.concatenate([np.zeros(npin, np.int64), np.ones(idx.size, np.int64)])
            key, inv = np.unique(v * P + pp, return_inverse=True)
            pin = np.bincount(inv, weights=pin, minlength=key.size).astype(np.int64)
            own = (np.bincount(inv, weights=own, minlength=key.size) > 0).astype(np.int64)
            v, pp = key // P, key % P
        else:         # a single vertex: its row's nets, and its own net unless it is a pin of it already
            selfloop = np.zeros(idx.size, bool)
            hit = v == np.repeat(M[idx], lens)
            selfloop[np.repeat(np.arange(idx.size), lens)[hit]] = True
            v = np.concatenate([v, M[idx][~selfloop]])
            pp = np.concatenate([pp, mp[idx][~selfloop]])
            pin = np.concatenate([np.ones(npin, np.int64), np.zeros(int((~selfloop).sum()), np.int64)])
            own = (v == M[pp]).astype(np.int64)
        # to each net's process, in the narrowest types that hold them (the exchange is most of
        # a round's bytes); a stable radix sort by process keeps each process's pairs in order
        dest = (np.searchsorted(self.bounds, v, side="right") - 1).astype(np.int16 if self.size < 1 << 15
                                                                           else np.int64)
        order = np.argsort(dest, kind="stable")
        cuts = np.searchsorted(dest[order], np.arange(self.size + 1))
        cols = (v.astype(np.int32) if self.sl.n < 1 << 31 else v, pp.astype(np.int32) if P < 1 << 31 else pp,
                pin.astype(np.int32), own.astype(np.int8))
        cols = [x[order] for x in cols]
        got = self.comm.alltoall([tuple(x[cuts[d]:cuts[d + 1]] for x in cols) for d in range(self.size)])
        return tuple(np.concatenate([g[i] for g in got]).astype(np.int64) for i in range(4))

    def _nets_of(self, loc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``np.unique(loc, return_inverse=True)`` for local net ids: by marking the
        nets in a scratch array of the rows (linear) when there are many pairs, by
        sorting when there are few."""
        rows = self.sl.rows
        if loc.size * 16 < rows:
            return np.unique(loc, return_inverse=True)
        seen = np.zeros(rows, bool)
        seen[loc] = True
        t = np.flatnonzero(seen)
        slot = self._slot
        slot[t] = np.arange(t.size, dtype=np.int64)
        return t, slot[loc]

    def _pair_counts(self, loc: np.ndarray, a: np.ndarray, b: np.ndarray, o: np.ndarray) -> list[np.ndarray]:
        """int64[pairs] each: the pins of local net ``loc[i]`` in parts ``a[i]``, ``b[i]`` and
        ``o[i]``, read from the kept counts of the large nets and counted from the pins of the
        others (one pass over each pair's net; a net not kept with max(``_BIG_MIN_PINS``, k)
        pins or more, when the kept counts are full, is counted once per round as a row)."""
        sl, part = self.sl, self.part
        three = [np.ascontiguousarray(p, np.int64) for p in (a, b, o)]
        out = [np.empty(loc.size, np.int64) for _ in range(3)]
        loc = np.ascontiguousarray(loc, np.int64)
        # a net not kept is counted over its pins for each pair up to max(_BIG_MIN_PINS, k) pins (a
        # row of counts costs k cells and its pins), above once per round as a row
        _pair_counts_of(sl.colptr, sl.colidx, part, loc, self.big_pos, self.big_counts, max(_BIG_MIN_PINS, self.k),
                        *three, *out)
        r = np.flatnonzero(out[0] < 0)   # large nets not kept: rows of pin counts, once per net
        if r.size:
            t, tinv = np.unique(loc[r], return_inverse=True)
            rows = net_counts(sl, part, t, self.k)
            for c, p in zip(out, three):
                c[r] = rows[tinv, p[r]]
        return out

    def _evaluate(self, A, B, v, pid, pin, own):
        k, P = self.k, A.size
        loc = v - self.sl.lo
        o = self.part[v]
        o2 = np.where(own > 0, B[pid], o)
        # a pair changes send / recv only when its net's owner moves, or the move takes the last
        # pins out of a part or the first pins into one (most pairs do neither); a pair's own
        # figures decide and give its deltas: its net's pins in a, b and the owner's part, and
        # its λ (the net's maintained send, plus one when the owner's part holds a pin)
        a, b = A[pid], B[pid]
        ca, cb, co = self._pair_counts(loc, a, b, o)
        live = np.flatnonzero((o != o2) | ((pin > 0) & ((ca == pin) | (cb == 0))))
        ca, cb, co, o, o2 = ca[live], cb[live], co[live], o[live], o2[live]
        lam = self.net_send[loc[live]].astype(np.int64) + (co > 0)
        co2 = np.where(o2 == o, co, cb)   # o2 is o, or b when the net's own vertex moves
        dS, dR = np.zeros((P, k), np.int64), np.zeros((P, k), np.int64)
        _pair_changes(ca, cb, co, co2, lam, a[live], b[live], o.astype(np.int64), o2.astype(np.int64),
                      pin[live], pid[live], dS, dR)
        dS, dR = _allsum(self.comm, dS), _allsum(self.comm, dR)
        return dS, dR, loc

    def _exact(self, A, B, v, pid, pin, own, chosen: np.ndarray, loc):
        """Exact send / recv change of moving every chosen proposal together, and
        the local nets' new sends (for the nets touched)."""
        k = self.k
        sel = np.flatnonzero(chosen[pid])
        t, ti = self._nets_of(loc[sel])
        counts = self._counts(t)
        after = counts.copy()
        psel, pins = pid[sel], pin[sel].astype(np.int32)
        np.add.at(after, (ti, A[psel]), -pins)
        np.add.at(after, (ti, B[psel]), pins)
        owner = self.part[self.sl.lo + t].astype(np.int64)
        owner2 = owner.copy()
        moved_owner = own[sel] > 0
        owner2[ti[moved_owner]] = B[psel[moved_owner]]
        s0, r0, _ = _contrib(counts, owner, k)
        s1, r1, ns1 = _contrib(after, owner2, k)
        d = _allsum(self.comm, np.concatenate([s1 - s0, r1 - r0]))
        pos = self.big_pos[t[ti]]
        big = (pos >= 0) & (pins > 0)
        moves = (pos[big], A[psel][big], B[psel][big], pins[big])
        return d[:k], d[k:], (t, ns1, moves)

    # ----------------------------------------------------------------- select
    def _select(self, A, B, Wu, kind, dS, dR, M):
        """The moves to commit, chosen the same way on every process from the
        proposals' exact single-move changes: repairs first (least damage per
        weight), then bottleneck moves by gain; each must keep every load at or
        below the current maximum. (``M``: the proposals' member vertices, for a
        selection that takes one proposal per vertex.)"""
        send, recv, W = self.send.astype(np.float64), self.recv.astype(np.float64), self.W.copy()
        L = _load(send, recv)
        Bmax = L.max()
        cap = Bmax if self.load_cap is None else self.load_cap
        gamma = self.ctx.gamma
        L2 = np.maximum(send + dS, recv + dR)
        gain = (L * L - L2 * L2).sum(1) - gamma * Bmax * dS.sum(1)
        rep = np.flatnonzero(kind == 1)
        bot = np.flatnonzero((kind != 1) & (gain > 0))
        order = np.concatenate([rep[np.argsort(-gain[rep] / np.maximum(Wu[rep], 1), kind="stable")],
                                bot[np.argsort(-gain[bot], kind="stable")]])
        chosen = []
        free = kind == 0   # bottleneck moves not chosen: a pull into a full part may take one along
        outs = None        # per part, its bottleneck moves out by gain (built at the first full target)
        for i in order:
            if kind[i] == 0 and not free[i]:   # taken along by a pull already
                continue
            a, b, w = A[i], B[i], Wu[i]
            if kind[i] == 1:
                if W[a] <= self.Wmax or W[b] + w > self.Wmax:
                    continue
            elif W[b] + w > self.Wslack:
                if kind[i] == 2:   # a pull into a full part: with a move out of it that makes the room
                    if outs is None:
                        o = np.flatnonzero(free)
                        o = o[np.lexsort((-gain[o], A[o]))]
                        cut = np.searchsorted(A[o], np.arange(self.k + 1))
                        outs = [o[cut[p]:cut[p + 1]] for p in range(self.k)]
                    j = self._partner(i, A, B, Wu, dS, dR, send, recv, L, W, Bmax, free, outs[b])
                    if j >= 0:
                        for x in (i, j):
                            nz = np.flatnonzero(dS[x] | dR[x])
                            send[nz] += dS[x, nz]
                            recv[nz] += dR[x, nz]
                            L[nz] = np.maximum(send[nz], recv[nz])
                            W[A[x]] -= Wu[x]
                            W[B[x]] += Wu[x]
                        chosen += [i, j]
                        free[j] = False
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
            free[i] = False
        return np.array(chosen, np.int64)

    def _partner(self, i, A, B, Wu, dS, dR, send, recv, L, W, Bmax, free, outs) -> int:
        """The bottleneck move out of pull ``i``'s full target (among the first 64 of
        ``outs``, its moves out by gain, still free) that makes room for it and gives the
        pair the largest gain (summed single changes: the commit recounts them), the
        maximum kept; −1: none."""
        b, w = B[i], Wu[i]
        j = outs[free[outs]][:64]
        if j.size == 0:
            return -1
        j = j[(W[b] + w - Wu[j] <= self.Wslack) & (W[B[j]] + Wu[j] <= self.Wslack) & (B[j] != A[i])]
        if j.size == 0:
            return -1
        s2 = send + dS[i] + dS[j]
        r2 = recv + dR[i] + dR[j]
        l2 = np.maximum(s2, r2)
        g = (L * L).sum() - (l2 * l2).sum(1) - self.ctx.gamma * Bmax * (dS[i].sum() + dS[j].sum(1))
        g[l2.max(1) > Bmax] = -np.inf
        x = int(np.argmax(g))
        return int(j[x]) if g[x] > 0 else -1

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
    def round(self, theta: float, repair_only: bool = False, clusters=None, pull: bool = False) -> int:
        """One propose / evaluate / select / commit round; returns the vertices moved.
        ``clusters``: one level of :func:`local_clusters` (cid, count): the round proposes
        whole clusters instead of single vertices; ``pull``: pull moves into the heavy parts."""
        comm = self.comm
        if clusters is not None:
            prop = self._propose_clusters(*clusters, theta)
        elif pull:   # pulls, and the single moves (a pull into a full part takes one out of it along)
            single, pulls = self._propose(theta, False), self._propose_pulls(theta)
            fresh = ~np.isin(pulls[0], single[0])
            prop = tuple(np.concatenate([x, y]) for x, y in zip(single[:1], (pulls[0][fresh],))) + \
                (np.arange(single[0].size + int(fresh.sum()), dtype=np.int64),) + \
                tuple(np.concatenate([x, y[fresh]]) for x, y in zip(single[2:5], pulls[2:5])) + \
                (np.concatenate([single[5], np.full(int(fresh.sum()), 2, np.int8)]),)
        else:
            prop = self._propose(theta, repair_only)
        got = comm.allgather(prop)
        off = np.cumsum([0] + [g[2].size for g in got])
        P = int(off[-1])
        if P == 0:
            return 0
        M = np.concatenate([g[0] for g in got]).astype(np.int64)
        mp = np.concatenate([g[1] + off[j] for j, g in enumerate(got)]).astype(np.int64)
        A = np.concatenate([g[2] for g in got]).astype(np.int64)
        B = np.concatenate([g[3] for g in got]).astype(np.int64)
        Wu = np.concatenate([g[4] for g in got]).astype(np.int64)
        kind = np.concatenate([g[5] for g in got])
        v, pid, pin, own = self._route(M, mp, P, grouped=clusters is not None)
        dS, dR, cache = self._evaluate(A, B, v, pid, pin, own)
        chosen = self._commit(M, mp, A, B, Wu, v, pid, pin, own, cache, self._select(A, B, Wu, kind, dS, dR, M))
        moved = np.zeros(P, bool)
        moved[chosen] = True
        if clusters is None and not pull:   # one member per proposal: M[i] is proposal i's vertex
            mine = (M >= self.sl.lo) & (M < self.sl.hi)
            f = self.fails
            f[M[mine & ~moved] - self.sl.lo] = np.minimum(f[M[mine & ~moved] - self.sl.lo], 60) + 1
            f[M[mine & moved] - self.sl.lo] = 0
        return int(moved[mp].sum())

    def _commit(self, M, mp, A, B, Wu, v, pid, pin, own, cache, chosen):
        """Apply the selected moves, halved until their exact combined change keeps the rules; returns
        the committed proposals."""
        while chosen.size:
            mask = np.zeros(A.size, bool)
            mask[chosen] = True
            eS, eR, (nets, ns, (bp, ba, bb, bc)) = self._exact(A, B, v, pid, pin, own, mask, cache)
            if self._better(eS, eR, chosen, Wu, A, B):
                go = mask[mp]
                self.part[M[go]] = B[mp[go]]
                np.add.at(self.W, A[chosen], -Wu[chosen])
                np.add.at(self.W, B[chosen], Wu[chosen])
                self.send += eS
                self.recv += eR
                self.net_send[nets] = ns
                np.add.at(self.big_counts, (bp, ba), -bc)
                np.add.at(self.big_counts, (bp, bb), bc)
                mine = M[go][(M[go] >= self.sl.lo) & (M[go] < self.sl.hi)] - self.sl.lo
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

    def recounted(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
        """send, recv and part weights (int64[k], summed over the processes) of the current parts
        counted from scratch, and whether every process's kept counts agreed with its pins.
        Collective."""
        s, rv = self._scan(check=True)
        wts = np.bincount(self.part[self.sl.lo:self.sl.hi], weights=self.sl.weight, minlength=self.k).astype(np.int64)
        kept = bool(self.comm.allreduce(int(self.kept_ok), op=_mpi_min()))
        return _allsum(self.comm, s), _allsum(self.comm, rv), _allsum(self.comm, wts), kept

    def check(self, s, rv, wts, kept: bool, what: str) -> None:
        """An internal error unless the maintained send, recv and weights equal the recounted
        ``s``, ``rv``, ``wts`` and the kept counts agreed (``kept``)."""
        if not (np.array_equal(s, self.send) and np.array_equal(rv, self.recv) and np.array_equal(wts, self.W)
                and kept):
            raise RuntimeError(f"internal error: {what} maintained figures differ from the recount")

    def snapshot(self):
        return (self.part.copy(), self.send.copy(), self.recv.copy(), self.W.copy(), self.key())

    def restore(self, snap) -> None:
        part, self.send, self.recv, self.W, _ = snap
        self.part[:] = part
        self._scan()


def _mpi_max():
    from mpi4py import MPI
    return MPI.MAX


def _mpi_min():
    from mpi4py import MPI
    return MPI.MIN


def _under_the_limit(r: _Refiner, best, ctx: DistributedRefineContext):
    """The result state (``best``, or the current one when None) taken under the weight limit
    ⌊(1 + ε)·⌈W / k⌉⌋ when the engine's partition left it above (the rounds then keep only the
    engine's heaviest part, ``Wfinal``): repair rounds that may raise max(send, recv) as far as they
    need — ε is the caller's constraint, the maximum the objective. Kept when they reach the
    limit; else the state before them stays. Returns the snapshot to restore (None: the current
    state). Collective."""
    W = r.W if best is None else best[3]
    if int(W.max()) <= r.Wmax:
        return best
    if int(r.W.max()) <= r.Wmax:   # the current state is within the limit, the best one above it
        return None
    if ctx.repair_rounds == 0:
        return best
    if best is not None:
        r.restore(best)
    before = r.snapshot()
    r.load_cap = np.inf
    for _ in range(ctx.repair_rounds):
        if int(r.W.max()) <= r.Wmax or r.round(ctx.theta, repair_only=True) == 0:
            break
    return None if int(r.W.max()) <= r.Wmax else before


def refine_distributed(comm, sl: RowSlice, part: np.ndarray, k: int, eps: float,
                       ctx: DistributedRefineContext | None = None, progress=None) -> RefineResult:
    """Refine ``part`` (int32[n], the same on every process; changed in place)
    for max(send, recv). Collective over ``comm``. Returns the exact figures
    before and after (recounted from scratch at the end).

    Bottleneck moves may fill a part up to ``(1 + slack)`` × the weight limit;
    repair moves then take parts back under it. The result is the best state
    seen (lowest max(send, recv), then total volume) whose heaviest part is
    within ⌊(1 + ε)·⌈W / k⌉⌋ (:func:`~partplan.partition.objectives.eps_limit`), or within the input's heaviest part when that was
    already above; then, if that state is above the limit, repair rounds take it under the limit
    when they can (raising the maximum as far as they must, :func:`_under_the_limit`)."""
    ctx = ctx or DistributedRefineContext()
    t0 = time.perf_counter()
    r = _Refiner(comm, sl, part, k, eps, ctx)
    before = {"total_volume": int(r.send.sum()), "max_send": int(r.send.max()), "max_recv": int(r.recv.max()),
              "max_weight": int(r.W.max())}
    res = RefineResult(send=r.send, recv=r.recv, weights=r.W, before=before)
    best = r.snapshot() if r.feasible() else None

    def out_of_time() -> bool:   # process 0's clock decides for all, so every process leaves at the same round
        return ctx.time_limit is not None and comm.bcast(time.perf_counter() - t0 > ctx.time_limit, root=0)

    def record(moved: int, kind: str = "") -> None:
        nonlocal best
        i = res.rounds
        res.rounds, res.moved = i + 1, res.moved + moved
        if r.feasible() and (best is None or r.key() < best[4]):
            best = r.snapshot()
        res.history.append((i, moved, *r.key()))
        if progress is not None and (i % 10 == 0 or kind):
            progress(f"refine round {i}: moved {moved}, max(send, recv) {r.key()[0]}, total {r.key()[1]}{kind}")

    idle, theta, start, phases = 0, ctx.theta, 0, 0
    nnz = int(comm.allreduce(int(sl.indices.size)))
    most_phases = ctx.coordinated_phases if nnz <= ctx.coordinated_max_nnz else 0
    while res.rounds < ctx.rounds and not out_of_time():
        moved = r.round(theta, pull=ctx.pulls == 1)
        record(moved)
        h = res.history
        stalled = len(h) - start > ctx.stall_rounds and \
            h[-1][2] > (1.0 - ctx.stall_gain) * h[-1 - ctx.stall_rounds][2]
        if moved == 0:
            idle += 1
            theta = max(0.5, theta - 0.1)
        else:
            idle = 0
        if not (stalled or idle >= 4):
            continue
        # the single moves stopped: a phase of coordinated moves (pulls, then whole clusters, the
        # coarsest first); the single moves go on from its result when it lowered the maximum or the total
        if phases >= most_phases:
            break
        phases += 1
        key0 = r.key()
        for _ in range(10 if ctx.pulls == 2 else 0):   # pulls (with singles) until a round moves none
            if res.rounds >= ctx.rounds or out_of_time():
                break
            moved = r.round(ctx.theta, pull=True)
            record(moved, " (pulls)")
            if moved == 0:
                break
        levels = r.clusters(ctx.theta) if ctx.cluster_levels else []
        nl = min(ctx.cluster_levels, int(comm.allreduce(len(levels), op=_mpi_max())))
        levels = levels[len(levels) - min(len(levels), nl):]
        for j in range(nl):   # the processes' levels aligned at the finest; a process without one proposes none
            level = levels[j - (nl - len(levels))] if j >= nl - len(levels) else (None, 0)
            for _ in range(2):
                if res.rounds >= ctx.rounds or out_of_time():
                    break
                moved = r.round(ctx.theta, clusters=level)
                res.cluster_moved += moved
                record(moved, f" (clusters, level {nl - j})")
                if moved == 0:
                    break
        res.phases = phases
        (max1, total1), (max0, total0) = r.key(), key0   # on: a lower maximum, or a total lower by the share
        if not (max1 < max0 or total1 < total0 - ctx.phase_total_gain * total0):
            break
        idle, theta, start = 0, ctx.theta, len(res.history)
    # back under the weight limit; repairs may raise the maximum load up to just below the best
    # state within the limit, so a state they reach is still better than that one
    r.load_cap = None if best is None else best[4][0] - 1
    for _ in range(ctx.repair_rounds):
        if r.feasible() or r.round(ctx.theta, repair_only=True) == 0:
            break
    if r.feasible() and (best is None or r.key() <= best[4]):
        best = None   # the current state is the best feasible one
    best = _under_the_limit(r, best, ctx)
    # every figure from scratch: the kept counts of the state reached and, in the same pass when
    # that state is the result, its send and recv (restore() recounts everything anyway)
    if best is None:
        s, rv, wts, kept = r.recounted()
    else:
        r._scan(check=True)
        kept = bool(comm.allreduce(int(r.kept_ok), op=_mpi_min()))
        r.restore(best)
        s, rv, wts = recount(comm, sl, part, k)
    r.check(s, rv, wts, kept, "the refinement's")
    res.send, res.recv, res.weights = s, rv, r.W
    res.seconds = time.perf_counter() - t0
    return res


__all__ = ["RowSlice", "DistributedRefineContext", "RefineResult", "refine_distributed", "local_volume", "net_counts",
           "recount"]
