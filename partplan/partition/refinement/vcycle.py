"""Fast mode: km1 volume refinement of a METIS partition by V-cycles.

The planner's ``preset="fast"`` partitions the graph model with METIS and
then lowers the total communication volume — km1 of the column-net
hypergraph of A + I, Σ_j (λ_j − 1), which equals
:func:`partplan.analyze`'s ``total_volume`` — with :func:`vcycle_refine`:

0. **band**: only the pins of cut nets move; the rest of each part is
   contracted into one fixed vertex (km1 unchanged) — unless the band holds
   more than 80 % of the vertices (power-law graphs);
1. **coarsen within parts**: every vertex that is still alone joins the
   same-part cluster it is best connected to (level 0: by the two nets u and
   v surely share, O(pins); above: heavy connectivity Σ w_e / (|e| − 1) over
   shared nets of at most ``max_net`` pins), clusters capped at the balance
   slack; the hypergraph is contracted (single-pin nets dropped, identical
   nets merged, weights summed). Levels repeat until 20 vertices per part
   are left or a level keeps > 90 % of the vertices or of the pins (hub
   nets: then a level costs as much as the one below and gains nothing);
2. **refine coarse to fine**: on every level, label propagation with exact
   km1 gains Σ_{e ∋ u} w_e([Φ_e(a) = 1] − [Φ_e(b) = 0]) moves a vertex (a
   whole cluster on coarse levels — where single-vertex FM stalls) to its
   best part when the gain is positive and the target stays within the
   balance cap (zero-gain moves only when they leave the target lighter
   than the source); every move lowers km1, so volume never grows;
3. **V-cycles**: up to 3, with new clusters each time, while a cycle
   lowers km1 by ≥ 1 % (one when nothing could be coarsened).

Pin counts per net are the sparse slots of :mod:`partplan.partition.refinement.fm.slots`
(``_cnt``/``_inc``/``_dec``; memory O(pins), no n·k table); the label
propagation is :func:`partplan.partition.refinement.fm.labelprop._lp`. All hot loops
are numba kernels; Python loops run over levels and V-cycles only.

Balance: part weight (row nnz, at least 1) ≤ ⌊(1+ε)·⌈W/k⌉⌋, or the
heaviest input part when METIS's result already exceeds it
(:func:`partplan.partition.objectives.balance_cap`). Deterministic for a seed.

Example
-------
>>> import numpy as np
>>> from partplan import Graph
>>> g = Graph.from_edges(np.arange(99), np.arange(1, 100), symmetrize=True)
>>> part = np.arange(100) % 2                      # a bad start: every edge cut
>>> new, rep = vcycle_refine(g, part, 2, imbalance=0.03)
>>> rep["after"]["total_volume"] < rep["before"]["total_volume"]
True
"""
from __future__ import annotations

import time
from dataclasses import asdict, fields

import numpy as np

from ...errors import OptionError
from ...graph import Graph
from ...metrics.volume1d import volume_matrix
from ...parts import as_partition
from .fm.jit import HAVE_NUMBA, njit, njit_inline, njit_rc_free  # njit: cache=True, nogil=True (lanes.py)
from .fm.labelprop import LPOptions, LPScratch, NetLevel, _lp
from .fm.records import PinSlots
from ..context import VCycleContext
from ..rows import canonical_rows as _canonical_rows
from ..options import check_bool, check_imbalance, check_int, check_real, rng_seed
from ..options import DEFAULT_IMBALANCE


# ------------------------------------------------------------------ level 0
@njit
def _with_diagonal(n, ptr, idx):
    """Rows of a canonical CSR pattern with i inserted into row i (sorted) when missing."""
    cnt = np.zeros(n + 1, np.int64)
    for i in range(n):
        has = False
        for e in range(ptr[i], ptr[i + 1]):
            if idx[e] == i:
                has = True
                break
        cnt[i + 1] = ptr[i + 1] - ptr[i] + (0 if has else 1)
    out_ptr = np.cumsum(cnt)
    out = np.empty(out_ptr[n], np.int64)
    for i in range(n):
        o = out_ptr[i]
        put = False
        for e in range(ptr[i], ptr[i + 1]):
            j = idx[e]
            if not put and j >= i:
                if j != i:
                    out[o] = i
                    o += 1
                put = True
            out[o] = j
            o += 1
        if not put:
            out[o] = i
    return out_ptr, out


@njit
def _transpose(n, m, ptr, idx):
    """CSR of the transpose of an n×m pattern (rows of the result sorted)."""
    cnt = np.zeros(m + 1, np.int64)
    for e in range(ptr[n]):
        cnt[idx[e] + 1] += 1
    tptr = np.cumsum(cnt)
    fill = tptr[:m].copy()
    tidx = np.empty(ptr[n], np.int64)
    for i in range(n):
        for e in range(ptr[i], ptr[i + 1]):
            j = idx[e]
            tidx[fill[j]] = i
            fill[j] += 1
    return tptr, tidx


# ------------------------------------------------------------------ pin counts
def _slots(eptr: np.ndarray, k: int):
    """Sparse pin-count slots (layout of :mod:`.fm.slots`): net e gets min(|e|, k) cells."""
    size = np.diff(eptr)
    dense = size >= k
    soff = np.zeros(size.size + 1, dtype=np.int64)
    np.cumsum(np.where(dense, k, size), out=soff[1:])
    return soff, dense, np.zeros(int(soff[-1]), np.int32), np.zeros(int(soff[-1]), np.int32)


@njit
def _count_pins(m, eptr, epin, nw, part, soff, lam, dense, spart, scnt):
    """Fill the pin counts of every net (the layout of ``fm.slots._inc``, in O(pins):
    a part → slot table replaces the scan of a sparse net's slots); return
    km1 = Σ w_e (λ_e − 1)."""
    km1 = 0
    k = 0
    for e in range(m):
        for x in range(eptr[e], eptr[e + 1]):
            k = max(k, part[epin[x]] + 1)
    where = -np.ones(k, np.int64)
    for e in range(m):
        b0 = soff[e]
        L = 0
        if dense[e]:
            for x in range(eptr[e], eptr[e + 1]):
                p = part[epin[x]]
                if scnt[b0 + p] == 0:
                    L += 1
                scnt[b0 + p] += 1
        else:
            for x in range(eptr[e], eptr[e + 1]):
                p = part[epin[x]]
                s = where[p]
                if s < 0:
                    where[p] = L
                    spart[b0 + L] = p
                    scnt[b0 + L] = 1
                    L += 1
                else:
                    scnt[b0 + s] += 1
            for s in range(b0, b0 + L):
                where[spart[s]] = -1
        lam[e] = L
        km1 += nw[e] * (L - 1)
    return km1


# ------------------------------------------------------------------ coarsening
@njit_inline
def _rate(u, v, r, pu, wu, maxw, part, fixed, root, cw, rating, touched, nt):
    """Add rating r to v's cluster as a partner of u (same part, free, room for
    u's weight wu); returns the new count of touched clusters."""
    if v == u or part[v] != pu or fixed[v]:
        return nt
    c = root[v]
    if cw[c] + wu > maxw:
        return nt
    if rating[c] == 0.0:
        touched[nt] = c
        nt += 1
    rating[c] += r
    return nt


@njit
def _cluster(n, vptr, vnet, eptr, epin, nw, vw, part, order, maxw, max_net, rating, touched, own, fixed):
    """Clusters within parts (heavy connectivity over shared nets); returns
    (coarse id per vertex, number of clusters). With ``own[0] >= -1`` (level
    0: own[u] = the net of column u of A + I, -1 if none): rate only the pins
    v of u's own net, by the two nets u and v surely share,
    w_own(u)/(|own(u)| − 1) + w_own(v)/(|own(v)| − 1) — O(pins) instead of
    O(Σ|e|²). Fixed vertices neither join nor are joined."""
    cid = -np.ones(n, np.int64)
    nc = _cluster_into(n, vptr, vnet, eptr, epin, nw, vw, part, order, maxw, max_net, rating, touched, own, fixed,
                       np.arange(n), vw.copy(), np.ones(n, np.int64), cid)
    return cid, nc


@njit_rc_free
def _cluster_into(n, vptr, vnet, eptr, epin, nw, vw, part, order, maxw, max_net, rating, touched, own, fixed,
                  root, cw, csize, cid):
    """The loops of :func:`_cluster` (which allocates): root[v] = v, cw = vw, csize = 1 and
    cid = -1 on entry; cid is written. Returns the number of clusters."""
    own_nets = own[0] >= -1
    for ii in range(n):
        u = order[ii]
        if root[u] != u or csize[u] > 1 or fixed[u]:
            continue
        pu = part[u]
        wu = vw[u]
        nt = 0
        eu = own[u] if own_nets else -1
        if eu >= 0 and eptr[eu + 1] - eptr[eu] > 1:
            su = eptr[eu + 1] - eptr[eu]
            ru = nw[eu] / (su - 1.0)
            for y in range(eptr[eu], eptr[eu + 1]):
                v = epin[y]
                ev = own[v]
                r = ru
                if ev >= 0 and eptr[ev + 1] - eptr[ev] > 1:
                    r += nw[ev] / (eptr[ev + 1] - eptr[ev] - 1.0)
                nt = _rate(u, v, r, pu, wu, maxw, part, fixed, root, cw, rating, touched, nt)
        if not own_nets:  # above level 0: heavy connectivity over all shared nets
            for x in range(vptr[u], vptr[u + 1]):
                e = vnet[x]
                s = eptr[e + 1] - eptr[e]
                if s < 2 or s > max_net:
                    continue
                r = nw[e] / (s - 1.0)
                for y in range(eptr[e], eptr[e + 1]):
                    nt = _rate(u, epin[y], r, pu, wu, maxw, part, fixed, root, cw, rating, touched, nt)
        best = -1
        br = 0.0
        for t in range(nt):
            c = touched[t]
            r = rating[c]
            rating[c] = 0.0
            if r > br or (r == br and cw[c] < cw[best]):
                best = c
                br = r
        if best >= 0:
            root[u] = best
            cw[best] += wu
            csize[best] += 1
    nc = 0
    for v in range(n):
        if root[v] == v:
            cid[v] = nc
            nc += 1
    for v in range(n):
        cid[v] = cid[root[v]]
    return nc


@njit
def _contract_nets(m, eptr, epin, nw, cid, nc, rnd):
    """Coarse nets: pins mapped to clusters, duplicates removed, single-pin
    nets dropped. Returns (ptr, pins, weights, hashes) of the kept nets and
    the new id of every net (-1: dropped)."""
    stamp = -np.ones(nc, np.int64)
    cptr = np.zeros(m + 1, np.int64)
    cpin = np.empty(eptr[m], np.int64)
    cw = np.empty(m, np.int64)
    ch = np.empty(m, np.uint64)
    newid = -np.ones(m, np.int64)
    pos = 0
    kept = 0
    for e in range(m):
        start = pos
        h = np.uint64(0)
        for y in range(eptr[e], eptr[e + 1]):
            c = cid[epin[y]]
            if stamp[c] != e:
                stamp[c] = e
                cpin[pos] = c
                pos += 1
                h += rnd[c]
        if pos - start < 2:
            pos = start
            continue
        cw[kept] = nw[e]
        ch[kept] = h
        newid[e] = kept
        kept += 1
        cptr[kept] = pos
    return cptr[:kept + 1].copy(), cpin[:pos].copy(), cw[:kept].copy(), ch[:kept].copy(), newid


@njit
def _merge_identical(order, cptr, cpin, cw, ch, nc):
    """Merge nets with equal pin sets (candidates: equal size and hash, in
    ``order``); returns (ptr, pins, weights) with sorted pins per net."""
    m = cptr.size - 1
    mark = -np.ones(nc, np.int64)
    keep = np.zeros(m, np.bool_)
    w = cw.copy()
    i = 0
    while i < m:
        e0 = order[i]
        keep[e0] = True
        s0 = cptr[e0 + 1] - cptr[e0]
        for y in range(cptr[e0], cptr[e0 + 1]):
            mark[cpin[y]] = e0
        j = i + 1
        while j < m:
            e1 = order[j]
            if ch[e1] != ch[e0] or cptr[e1 + 1] - cptr[e1] != s0:
                break
            same = True
            for y in range(cptr[e1], cptr[e1 + 1]):
                if mark[cpin[y]] != e0:
                    same = False
                    break
            if same:
                w[e0] += cw[e1]
            else:
                keep[e1] = True     # a hash collision: kept as its own net (never merged wrongly)
            j += 1
        i = j
    nk = 0
    tot = 0
    for e in range(m):
        if keep[e]:
            nk += 1
            tot += cptr[e + 1] - cptr[e]
    optr = np.zeros(nk + 1, np.int64)
    opin = np.empty(tot, np.int64)
    ow = np.empty(nk, np.int64)
    r = 0
    for e in range(m):
        if keep[e]:
            s = cptr[e + 1] - cptr[e]
            opin[optr[r]:optr[r] + s] = cpin[cptr[e]:cptr[e + 1]]
            optr[r + 1] = optr[r] + s
            ow[r] = w[e]
            r += 1
    return optr, opin, ow


@njit_inline
def _add_pins(e, eptr, epin, inb, out, nout):
    """Append the pins of net e not yet in the band to out[nout:]; returns the new length."""
    for y in range(eptr[e], eptr[e + 1]):
        v = epin[y]
        if not inb[v]:
            inb[v] = True
            out[nout] = v
            nout += 1
    return nout


@njit
def _band(n, vptr, vnet, eptr, epin, lam, depth, activate_max):
    """Vertices within ``depth`` net-hops of a cut net's pins (bool[n]); nets
    with more than ``activate_max`` pins are not followed."""
    inb = np.zeros(n, np.bool_)
    front = np.empty(n, np.int64)
    nf = 0
    for e in range(eptr.size - 1):
        if lam[e] > 1:
            nf = _add_pins(e, eptr, epin, inb, front, nf)
    nxt = np.empty(n, np.int64)
    for _ in range(depth):
        nn = 0
        for i in range(nf):
            u = front[i]
            for x in range(vptr[u], vptr[u + 1]):
                e = vnet[x]
                if eptr[e + 1] - eptr[e] <= activate_max:
                    nn = _add_pins(e, eptr, epin, inb, nxt, nn)
        front, nxt = nxt, front
        nf = nn
    return inb


class _Level:
    """One hypergraph of the hierarchy: n vertices (weights vw; ``fixed`` ones
    never move), nets eptr/epin (weights nw), vertex→nets vptr/vnet; ``own[v]``
    = vertex v's own net at the finest level (else None); cid maps it to the
    next coarser level."""

    def __init__(self, vw, eptr, epin, nw, fixed, vptr=None, vnet=None, own=None):
        self.n, self.m = vw.size, eptr.size - 1
        self.vw, self.eptr, self.epin, self.nw, self.fixed, self.own = vw, eptr, epin, nw, fixed, own
        if vptr is None:
            vptr, vnet = _transpose(self.m, self.n, eptr, epin)
        self.vptr, self.vnet = vptr, vnet
        self.cid = None

    def contract(self, cid, nc, part, rng, merge=True):
        """The level whose vertices are the clusters ``cid`` (with their part)."""
        self.cid = cid
        vw = np.bincount(cid, weights=self.vw, minlength=nc).astype(np.int64)
        fixed = np.zeros(nc, np.bool_)
        fixed[cid[self.fixed]] = True
        rnd = rng.integers(1, 2 ** 62, size=nc, dtype=np.int64).astype(np.uint64) * np.uint64(2) + np.uint64(1)
        cptr, cpin, cw, ch, newid = _contract_nets(self.m, self.eptr, self.epin, self.nw, cid, nc, rnd)
        own = None
        if merge:
            order = np.lexsort((ch, np.diff(cptr))).astype(np.int64)
            cptr, cpin, cw = _merge_identical(order, cptr, cpin, cw, ch, nc)
        elif self.own is not None:            # one vertex per cluster (a restriction): keep own nets
            own = -np.ones(nc, np.int64)
            has = self.own >= 0
            own[cid[has]] = newid[self.own[has]]
        cpart = np.empty(nc, np.int64)
        cpart[cid] = part
        return _Level(vw, cptr, cpin, cw, fixed, own=own), cpart

    def coarsen(self, part, rng, maxw, max_net, own_rating=True, min_shrink=0.1, min_pin_shrink=0.0):
        """Cluster and contract (None when it shrinks by less than 10 %)."""
        order = rng.permutation(self.n).astype(np.int64)
        own = self.own if self.own is not None and own_rating else np.full(1, -2, np.int64)
        cid, nc = _cluster(self.n, self.vptr, self.vnet, self.eptr, self.epin, self.nw, self.vw, part, order,
                           maxw, max_net, np.zeros(self.n), np.zeros(self.n, np.int64), own, self.fixed)
        if nc > (1.0 - min_shrink) * self.n:
            return None, None
        lev, cpart = self.contract(cid, nc, part, rng)
        if lev.epin.size > (1.0 - min_pin_shrink) * self.epin.size:
            self.cid = None     # the pins barely shrink (hub nets): a level would cost as much as this one
            return None, None
        return lev, cpart

    def counts(self, part, k):
        """Pin counts of every net under ``part``: (slots tuple, km1)."""
        soff, dense, spart, scnt = _slots(self.eptr, k)
        lam = np.zeros(self.m, np.int32)
        km1 = _count_pins(self.m, self.eptr, self.epin, self.nw, part, soff, lam, dense, spart, scnt)
        return (soff, lam, dense, spart, scnt), int(km1)

    def refine(self, part, k, load, cap, rng, rounds, activate_max, dense_cand, counts=None, max_degree=1e18,
               prune=True):
        """Label propagation on this level: (km1 before, gain, moves); ``counts``:
        pin counts of ``part`` made before (:meth:`counts`)."""
        (soff, lam, dense, spart, scnt), km1 = self.counts(part, k) if counts is None else counts
        active = np.zeros(self.n, np.bool_)
        active[self.epin[np.repeat(lam > 1, np.diff(self.eptr))]] = True      # pins of cut nets
        order = rng.permutation(self.n).astype(np.int64)
        max_deg = int(min(2 ** 62, max(64.0, max_degree * self.vnet.size / max(self.n, 1))))
        gain, moves, evals = _lp(NetLevel(self.vptr, self.vnet, self.eptr, self.epin, self.nw, self.vw, self.fixed),
                                 PinSlots(soff, lam, dense, spart, scnt), part, load, order, active,
                                 LPOptions(cap, rounds, activate_max, dense_cand, max_deg, prune),
                                 LPScratch(np.zeros(k, np.int64), np.zeros(k, np.int64)))
        self.evals = int(evals)
        return km1, int(gain), int(moves)


def _level0(graph: Graph) -> _Level:
    """The column-net hypergraph of A + I (net j = column j of A plus j; unit weights)."""
    n = graph.n
    vptr, vnet = _with_diagonal(n, *_canonical_rows(graph))
    if graph.is_symmetric():
        eptr, epin = vptr, vnet
    else:
        eptr, epin = _transpose(n, n, vptr, vnet)
    return _Level(graph.balance_weights, eptr, epin, np.ones(n, np.int64),
                  np.zeros(n, np.bool_), vptr, vnet, own=np.arange(n, dtype=np.int64))


def _restrict(fine: _Level, part, k, rng, depth, activate_max, max_share):
    """The band around the cut (:func:`_band`) with every other vertex of part p
    merged into one fixed vertex nb + p; km1 is unchanged. None when the band
    holds more than ``max_share`` of the vertices."""
    (soff, lam, dense, spart, scnt), km1 = fine.counts(part, k)
    inb = _band(fine.n, fine.vptr, fine.vnet, fine.eptr, fine.epin, lam, depth, activate_max)
    nb = int(inb.sum())
    if nb > max_share * fine.n:
        return None, ((soff, lam, dense, spart, scnt), km1), km1
    cid = np.empty(fine.n, np.int64)
    cid[inb] = np.arange(nb)
    cid[~inb] = nb + part[~inb]
    lev, rpart = fine.contract(cid, nb + k, part, rng, merge=False)
    lev.fixed[nb:] = True
    rpart[nb:] = np.arange(k)
    return lev, rpart, km1


def vcycle_refine(graph: Graph, part, k: int | None = None, *, imbalance: float = DEFAULT_IMBALANCE, seed: int = 0,
                  context: VCycleContext | None = None) -> tuple[np.ndarray, dict]:
    """Lower the total volume (km1) of ``part`` by V-cycles of label propagation.

    Parameters
    ----------
    graph : the matrix A (rows = vertices); nets are the columns of A + I.
    part : int[n] row partition into k parts (not modified).
    imbalance : ε: part weight (row nnz, at least 1) ≤ ⌊(1+ε)·⌈W/k⌉⌋, never
        worse than the input's heaviest part.
    seed : seeds the visiting orders and the net hashes (deterministic).
    context : the V-cycles' knobs (:class:`~partplan.partition.context.VCycleContext`: cycles,
        rounds, coarsening limits, band, pruning; each fixed by measurement); None: its defaults.

    Returns
    -------
    (new_part int64[n], report): ``before``/``after`` {"total_volume"} (rows of
    H: km1 of the start and of the result, counted on the hierarchy; equal to
    :func:`partplan.analyze`'s), ``cycles`` (per cycle: levels with
    (vertices, nets, pins, evaluations, moves, seconds), band size, km1 after,
    seconds), ``seconds``, ``balance_cap``, ``balance_limit``,
    ``max_balance_weight``.
    """
    from ..objectives import balance_cap

    t0 = time.perf_counter()
    if not isinstance(graph, Graph):
        raise OptionError(f"graph must be a partplan.Graph, got {type(graph).__name__}")
    part, k = as_partition(part, graph.n, k)
    imbalance = check_imbalance(imbalance)
    ctx = VCycleContext() if context is None else context
    if not isinstance(ctx, VCycleContext):
        raise OptionError(f"context must be a VCycleContext, got {type(ctx).__name__}")
    (cycles, min_cycle_gain, rounds, max_net, cluster_weight, coarse_vertices_per_part, min_shrink, min_pin_shrink,
     own_rating, activate_max, band, band_share, dense_candidates, max_degree, prune,
     fine_every_cycle) = (getattr(ctx, f.name) for f in fields(VCycleContext))
    for name, v in (("cycles", cycles), ("rounds", rounds), ("max_net", max_net), ("band", band),
                    ("coarse_vertices_per_part", coarse_vertices_per_part), ("activate_max", activate_max)):
        check_int(name, v)
    cluster_weight, band_share, max_degree = (check_real(name, v, lo=0.0, lo_open=True) for name, v in (
        ("cluster_weight", cluster_weight), ("band_share", band_share), ("max_degree", max_degree)))
    for name, v in (("min_cycle_gain", min_cycle_gain), ("min_shrink", min_shrink),
                    ("min_pin_shrink", min_pin_shrink)):
        check_real(name, v, hi=1.0, hi_open=True)
    for name, v in (("own_rating", own_rating), ("dense_candidates", dense_candidates), ("prune", prune),
                    ("fine_every_cycle", fine_every_cycle)):
        check_bool(name, v)
    rng = np.random.default_rng(rng_seed(seed))
    fine = _level0(graph)
    w = fine.vw
    cap, limit = balance_cap(w, part, k, imbalance)
    slack = max(cap - -(-int(w.sum()) // k), 0)
    maxw = int(cluster_weight * slack + 2 * w.sum() / max(graph.n, 1)) + 1
    out = part.copy()
    load = np.bincount(out, weights=w, minlength=k).astype(np.int64)
    before = after = None
    trace = []
    for c in range(cycles if k > 1 else 0):
        tc = time.perf_counter()
        top, tpart, km1 = _restrict(fine, out, k, rng, band, activate_max, band_share)
        if before is None:
            before = after = km1
        elif km1 != after:
            raise RuntimeError(f"internal error: km1 {km1} at the start of cycle {c} differs from {after}")
        reuse = None
        if top is None:       # no restriction: the counts just made serve level 0 if nothing is coarsened
            top, reuse, tpart = fine, tpart, out.copy()
        levels, parts = [top], [tpart]
        while levels[-1].n > coarse_vertices_per_part * k:
            lev, cpart = levels[-1].coarsen(parts[-1], rng, maxw, max_net, own_rating, min_shrink, min_pin_shrink)
            if lev is None:
                break
            levels.append(lev)
            parts.append(cpart)
        tc1 = time.perf_counter()
        moves = 0
        per_level = []
        km1 = after
        last = c == cycles - 1
        for i in range(len(levels) - 1, -1, -1):
            if i < len(levels) - 1:
                parts[i] = parts[i + 1][levels[i].cid]
            if i == 0 and len(levels) > 1 and not last and not fine_every_cycle:
                per_level.append((levels[0].n, levels[0].m, int(levels[0].epin.size), 0, 0, 0.0))
                continue      # the next cycle ends on this level anyway
            tl = time.perf_counter()
            km1_in, gain, mv = levels[i].refine(parts[i], k, load, cap, rng, rounds, activate_max,
                                                dense_candidates, reuse if len(levels) == 1 else None, max_degree,
                                                prune)
            if km1_in != km1:
                raise RuntimeError(f"internal error: km1 {km1_in} on level {i} differs from {km1} "
                                   "on the level above")
            km1 -= gain
            per_level.append((levels[i].n, levels[i].m, int(levels[i].epin.size), levels[i].evals, mv,
                              round(time.perf_counter() - tl, 4)))
            moves += mv
        out = parts[0] if levels[0] is fine else parts[0][fine.cid]      # fine.cid: the restriction
        for lev in [fine] + levels:
            lev.cid = None
        trace.append({"levels": per_level[::-1], "band": levels[0].n if levels[0] is not fine else None,
                      "moves": moves, "total_volume": km1, "coarsen_s": round(tc1 - tc, 4),
                      "seconds": round(time.perf_counter() - tc, 4)})
        prev, after = after, km1
        skipped = len(levels) > 1 and not last and not fine_every_cycle
        if after > prev * (1 - min_cycle_gain) and not skipped:    # a skipped finest level runs in the next cycle
            break
        if len(levels) == 1:    # nothing coarsened: another cycle would repeat converged label propagation
            break
    if before is None:
        before = after = _volume(graph, part, k)
    report = {"before": {"total_volume": before}, "after": {"total_volume": after}, "cycles": trace,
              "seconds": time.perf_counter() - t0, "balance_cap": cap, "balance_limit": limit,
              "max_balance_weight": int(load.max()),
              "compiled": HAVE_NUMBA,
              "params": {"imbalance": imbalance, "seed": seed, **asdict(ctx)}}
    return out, report


def _volume(graph: Graph, part: np.ndarray, k: int) -> int:
    vol, _ = volume_matrix(graph.indptr, graph.indices, part, k)
    return int(vol.sum())


def warm_up() -> float:
    """Compile (or load from numba's cache) the kernels; returns seconds."""
    t0 = time.perf_counter()
    g = Graph.from_edges(np.arange(199), np.arange(1, 200), symmetrize=True)
    vcycle_refine(g, np.arange(200) % 4, 4, context=VCycleContext(coarse_vertices_per_part=2))
    return time.perf_counter() - t0
