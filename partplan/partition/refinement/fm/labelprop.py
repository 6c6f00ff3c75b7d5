"""Label propagation with exact km1 gains: the refinement of every level of the fast mode's
V-cycles (:mod:`partplan.partition.refinement.vcycle`).

A vertex u of part a moves to its best part b when the gain
Σ_{e ∋ u} w_e([Φ_e(a) = 1] − [Φ_e(b) = 0]) (km1, in weighted nets = rows of H
at the finest level) is positive and b stays within the balance cap —
zero-gain moves only when they leave b lighter than a was. Every move lowers
km1, so the volume never grows. Pin counts are the sparse slots of
:mod:`.slots` (:class:`.records.PinSlots`; int32 counts here).

Records: :class:`NetLevel` (the level's hypergraph), :class:`LPOptions`,
:class:`LPScratch`; the partition ``part`` (int64[n]) and ``load`` (int64[k],
balance weight per part) are updated in place.
"""
from __future__ import annotations

from collections import namedtuple

from .jit import njit_inline, njit_rc_free
from .slots import _cnt, _dec, _inc

NetLevel = namedtuple("NetLevel", "vptr vnet eptr epin nw vw fixed")
NetLevel.__doc__ = """One level's hypergraph: vptr/vnet (CSR: the nets of vertex v), eptr/epin
(CSR: the pins of net e), nw (weight per net: the fine nets merged into it), vw (balance weight
per vertex: row nnz summed over its cluster, >= 1 per row), fixed (bool per vertex: never moves)."""
LPOptions = namedtuple("LPOptions", "cap max_rounds activate_max dense_cand max_deg prune")
LPOptions.__doc__ = """cap: balance cap (weight per part); max_rounds: rounds over the vertices;
activate_max: nets with more pins wake none of them after a move; dense_cand: nets with >= k pins
add connectivity only to the candidates of the smaller nets; max_deg: vertices in more nets are
skipped; prune: skip vertices that can make no move of gain >= 0 (same result)."""
LPScratch = namedtuple("LPScratch", "conn touched")
LPScratch.__doc__ = """conn: int64[k] zeros, connectivity (summed net weights) of u to each part;
touched: int64[k], the parts with conn > 0."""


@njit_inline
def _cannot_gain(u, a, G, P):
    """u (of part a) can make no move of gain >= 0: gain(b) = leave + conn(b) - tot, so with
    leave = 0 (u is not the last pin in a of any of its nets) only a zero-gain move to a part in
    every net of u is possible, and none when one of u's nets lies inside a (λ = 1)."""
    vptr, vnet = G.vptr, G.vnet
    soff, lam, dense, spart, scnt = P
    inside = False
    leave = 0
    for x in range(vptr[u], vptr[u + 1]):
        e = vnet[x]
        if lam[e] == 1:
            inside = True
        elif _cnt(e, a, soff, lam, dense, spart, scnt) == 1:
            leave = 1
            break
    return inside and leave == 0


@njit_inline
def _connectivity(u, a, k, G, P, dense_cand, S):
    """One pass over u's nets (u in part a): tot = Σ w_e, leave = Σ w_e of the nets u is the last
    pin in a of, and conn[p] += w_e per other part p of each net (the parts into S.touched;
    dense nets skipped with ``dense_cand``). Returns (tot, leave, touched parts)."""
    vptr, vnet, nw = G.vptr, G.vnet, G.nw
    soff, lam, dense, spart, scnt = P
    conn, touched = S.conn, S.touched
    tot = 0
    leave = 0
    nt = 0
    for x in range(vptr[u], vptr[u + 1]):
        e = vnet[x]
        we = nw[e]
        tot += we
        L = lam[e]
        b0 = soff[e]
        if dense[e]:
            if scnt[b0 + a] == 1:
                leave += we
            if L == 1 or dense_cand:
                continue
            for p in range(k):
                if scnt[b0 + p] > 0 and p != a:
                    if conn[p] == 0:
                        touched[nt] = p
                        nt += 1
                    conn[p] += we
        elif L == 1:                 # only part a: one slot, u's own part
            if scnt[b0] == 1:
                leave += we
        else:                        # one pass over the (part, count) pairs
            for s in range(b0, b0 + L):
                p = spart[s]
                if p == a:
                    if scnt[s] == 1:
                        leave += we
                else:
                    if conn[p] == 0:
                        touched[nt] = p
                        nt += 1
                    conn[p] += we
    return tot, leave, nt


@njit_inline
def _dense_connectivity(u, a, k, nt, G, P, S):
    """``dense_cand``: the dense nets' (>= k pins) connectivity, added only for the candidates
    found in the sparse nets (exact gains for those); without any, the parts of u's first
    cut dense net are the candidates. Returns the number of touched parts."""
    vptr, vnet, nw = G.vptr, G.vnet, G.nw
    soff, lam, dense, scnt = P.soff, P.lam, P.dense, P.scnt
    conn, touched = S.conn, S.touched
    if nt == 0:
        for x in range(vptr[u], vptr[u + 1]):
            e = vnet[x]
            if dense[e] and lam[e] > 1:
                b0 = soff[e]
                for p in range(k):
                    if scnt[b0 + p] > 0 and p != a and conn[p] == 0:
                        touched[nt] = p
                        nt += 1
                        conn[p] = 0
                break
    for x in range(vptr[u], vptr[u + 1]):
        e = vnet[x]
        if dense[e] and lam[e] > 1:
            b0 = soff[e]
            we = nw[e]
            for t in range(nt):
                p = touched[t]
                if scnt[b0 + p] > 0:
                    conn[p] += we
    return nt


@njit_inline
def _best_target(a, wu, nt, tot, leave, cap, load, S):
    """The best of the nt touched parts for a vertex of weight wu in part a (clears S.conn):
    gain >= 0 within the cap, zero gain only towards a part lighter than a would be; ties:
    the lighter part. Returns (part, gain in weighted nets); part -1: none."""
    conn, touched = S.conn, S.touched
    best = -1
    bg = 0
    for t in range(nt):
        p = touched[t]
        g = leave + conn[p] - tot
        conn[p] = 0
        if g < 0 or load[p] + wu > cap or (g == 0 and load[p] + wu >= load[a]):
            continue
        if best < 0 or g > bg or (g == bg and load[p] < load[best]):
            best = p
            bg = g
    return best, bg


@njit_inline
def _move(u, a, b, G, P, part, load, active, activate_max):
    """Move u from a to b: pin counts, part and loads; wake the pins of nets whose count in b
    became 1 (their gain towards b rose; not those in b) and the last pin left in a of a net
    (it can now leave for free) — nets of at most ``activate_max`` pins."""
    vptr, vnet, eptr, epin, vw = G.vptr, G.vnet, G.eptr, G.epin, G.vw
    soff, lam, dense, spart, scnt = P
    for x in range(vptr[u], vptr[u + 1]):
        e = vnet[x]
        ca = _dec(e, a, soff, lam, dense, spart, scnt)
        cb = _inc(e, b, soff, lam, dense, spart, scnt)
        if eptr[e + 1] - eptr[e] > activate_max:
            continue
        if cb == 1:
            for y in range(eptr[e], eptr[e + 1]):
                v = epin[y]
                if part[v] != b:
                    active[v] = True
        elif ca == 1:
            for y in range(eptr[e], eptr[e + 1]):
                v = epin[y]
                if v != u and part[v] == a:
                    active[v] = True
                    break
    wu = vw[u]
    part[u] = b
    load[a] -= wu
    load[b] += wu
    active[u] = False


@njit_rc_free
def _lp(G, P, part, load, order, active, O, S):
    """Label propagation with exact km1 gains (see the module doc) on the level G
    (:class:`NetLevel`) with pin counts P (:class:`PinSlots` of ``part``, updated), the
    partition ``part`` (int64[n]) and ``load`` (int64[k], balance weight per part) updated
    in place; order: int64[n], the visiting order; O: :class:`LPOptions`; S:
    :class:`LPScratch` (k = S.conn.size parts).

    ``active[u]``: u is (re-)evaluated in the next round; after a move the
    pins of nets whose count in the target became 1 (their gain towards it
    rose) and of nets left with one pin in the source are activated.
    Returns (total gain in weighted nets, moves, evaluations)."""
    vptr, vw, fixed = G.vptr, G.vw, G.fixed
    n = vw.shape[0]
    k = S.conn.shape[0]
    gain_sum = 0
    moves = 0
    evals = 0
    for _ in range(O.max_rounds):
        moved = 0
        for ii in range(n):
            u = order[ii]
            if not active[u]:
                continue
            active[u] = False
            if fixed[u] or vptr[u + 1] - vptr[u] > O.max_deg:
                continue
            a = part[u]
            if O.prune and _cannot_gain(u, a, G, P):
                continue
            evals += 1
            tot, leave, nt = _connectivity(u, a, k, G, P, O.dense_cand, S)
            if O.dense_cand:
                nt = _dense_connectivity(u, a, k, nt, G, P, S)
            b, bg = _best_target(a, vw[u], nt, tot, leave, O.cap, load, S)
            if b < 0:
                continue
            _move(u, a, b, G, P, part, load, active, O.activate_max)
            gain_sum += bg
            moved += 1
        moves += moved
        if moved == 0:
            break
    return gain_sum, moves, evals
