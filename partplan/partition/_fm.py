"""Compiled kernels of the bottleneck refinement (:mod:`partplan.partition.refine`).

Everything here works on the column-net hypergraph of A + I without building
it: the nets of vertex v are row v of A (self loop skipped) plus v's own net;
the pins of net j are column j of A (row j of Aᵀ, self loop skipped) plus j.

Sparse pin counts, memory O(pins): net j gets ``cap_j = min(|pins_j|, k)``
slots at ``soff[j]``. When ``|pins_j| >= k`` the slots are a dense row indexed
by part (O(1) lookup, k <= |pins_j| cells); otherwise they hold the λ_j
(part, count) pairs of the net, unsorted (lookup scans λ_j < k entries).

State (exact, updated by :func:`apply_move` in O(deg v + λ_v)): part, pin counts,
λ_j, k×k volume matrix vol[q, r], send/recv per part, send/recv message
counts, total volume, part loads.

The FM pass (:func:`_fm`): every vertex's best move (over its ``max_targets``
best-connected parts) is kept in an indexed max-heap keyed by its gain in the
potential Φ = Σ_p φ(part p's loads) (module doc of refine.py). The top vertex
is re-evaluated against the current loads before it moves (lazy: loads of
other parts drift); after a move only the pins of nets whose pin counts
crossed 0/1/2 in the source or target part, and the pins of the moved
vertex's own net (its sender changed), are re-evaluated. Moves with a loss
are applied; the pass is rolled back to its best feasible prefix.

The kernels take their arrays grouped in named records
(:func:`collections.namedtuple`; numba compiles attribute access and tuple
unpacking of them, the arrays inside stay mutable; a scalar a kernel changes
is an array element, e.g. ``tot[0]``). Units: vertices = rows of A (the rows
of H a part owns), k parts, volumes in rows of H, loads in balance weight
(row nnz, at least 1 per row), times in seconds.

* :class:`Topology` — the graph: ``vptr, vidx`` (CSR of A: the nets of
  vertex v), ``tptr, tidx`` (CSR of Aᵀ: the pins of net j; the same arrays
  as vptr/vidx when A is symmetric), ``w`` (balance weight per vertex).
* :class:`PinSlots` — the sparse pin counts: ``soff`` (first slot of net j),
  ``lam`` (λ_j), ``dense`` (net j's slots are a row indexed by part),
  ``spart``/``scnt`` (part and pin count per slot).
* :class:`VolumeState` — the partition and its exact volumes: ``part``,
  ``load`` (per part), ``vol`` (k×k rows of H sent q → r), ``send``/``recv``
  (rows per part), ``smsg``/``rmsg`` (messages per part), ``tot`` =
  [total volume, messages].
* :class:`CostModel` — ``obj`` (an :data:`OBJ_CODES` value), ``alpha`` (s per
  message), ``brb`` (s per row of H: β × bytes per row), ``q`` (exponent of
  the potential), ``mu`` (weight of the total volume in a gain).
* :class:`Limits` — ``cap`` (balance cap of a best state), ``cap_hard`` (a
  bottleneck-lowering move may overload a part up to it), ``vlimit`` (total
  volume of a best state), ``vlimit_hard`` (no move may exceed it),
  ``max_targets`` (best-connected target parts tried per vertex) and
  ``cost_cap`` (no move may raise a part's cost above it; < 0: none).
* :class:`Current` — per evaluation: ``inv`` (1 / the pass's scale),
  ``M`` (current max cost), ``nmax`` (parts at it), ``relax`` (overloading
  moves allowed now), ``tv`` (current total volume).
* :class:`PartFocus` — per part: ``phic`` (its term of Φ), ``hot`` (its
  vertices may move), and ``sink`` (the two sink parts, -1: none).
* :class:`EvalScratch` — scratch of :func:`_best1` (k-, k²- and
  degree-sized buffers; zero / -1 between calls).
* :class:`ApplyScratch` — scratch and output of :func:`apply_move`: the
  nets whose counts crossed 0/1/2 (``crit``), the last pin left in a
  (``crita``), the first pin in b (``critb``), their counts ``ncrit``, ``buf``.
* :class:`MoveBatch` — vertices to evaluate (``verts``, ``only``: one
  target or -1) and the results (``gain``, ``target``, ``blocked``).
* :class:`PartHeaps` — one indexed max-heap per part (``heap, hkey, pos,
  hoff, hsz``); :class:`Waiting` — per part, the vertices whose best move
  into it was refused by the balance cap (linked lists ``head, nxt, vert``).
* :class:`PassOptions` — the FM pass options (see :func:`_fm`).

Without numba the same functions run as plain Python (correct, slow: only
for tiny graphs in environments without numba).
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import _cache  # noqa: F401  (numba's cache directory, set before numba is imported)
from .._kernels import monotonic

try:  # pragma: no cover - exercised by whichever environment runs the tests
    import numba

    HAVE_NUMBA = True
    # nogil: the default pipeline runs independent refinements and V-cycles side by side (lanes.py)
    njit = numba.njit(cache=True, nogil=True)
    njit_inline = numba.njit(cache=True, nogil=True, inline="always")
    # kernels that allocate nothing (every array comes in a record) compile without numba's
    # reference counting (NRT): with it, unpacking the records' arrays and the inlined helpers
    # cost an atomic incref/decref pair per array each time, 3.2 x the time of a move evaluation
    # (_best1) on a 6-regular graph at k = 16 (4.1 -> 1.3 us; docs/planner.md, session 35)
    njit_rc_free = numba.njit(cache=True, nogil=True, _nrt=False)
except ImportError:  # pragma: no cover
    HAVE_NUMBA = False

    def njit(f):
        return f

    njit_inline = njit_rc_free = njit

BL_WALK = 64      # waiting (blocked) entries re-examined per move when a part gets room
SEED_CHUNK = 4096  # vertices evaluated between two looks at the clock when a pass (re)starts
OBJ_CODES = {"total": 0, "max-send": 1, "max-recv": 2, "max-both": 3, "weighted": 4}


# ------------------------------------------------------------------ records
Topology = namedtuple("Topology", "vptr vidx tptr tidx w w2")
Topology.__doc__ = """The graph: CSR of A (vptr, vidx: the nets of a vertex), CSR of Aᵀ (tptr,
tidx: the pins of a net), w: balance weight per vertex (row nnz, >= 1), w2: a second weight per
vertex under its own cap (Limits.cap2; the compute load on graphs with empty rows)."""
PinSlots = namedtuple("PinSlots", "soff lam dense spart scnt")
PinSlots.__doc__ = """Sparse pin counts per net: first slot soff[j], λ_j = lam[j], dense[j]
(slots indexed by part) else (part spart[s], count scnt[s]) pairs."""
VolumeState = namedtuple("VolumeState", "part load vol send recv smsg rmsg tot load2")
VolumeState.__doc__ = """The partition (part per vertex, load and load2 (of w2) per part) and its exact volumes in
rows of H: vol[q, r] (k×k), send/recv and smsg/rmsg (messages) per part,
tot = [total volume, messages] (int64[2], updated in place)."""
CostModel = namedtuple("CostModel", "obj alpha brb q mu")
CostModel.__doc__ = """obj: OBJ_CODES value; alpha: seconds per message; brb: seconds per row
of H; q: exponent of the potential Φ; mu: weight of Δ(total volume)."""
Limits = namedtuple("Limits", "cap cap_hard vlimit vlimit_hard max_targets cost_cap cap2")
Limits.__doc__ = """Balance caps (weight per part: of a best state / of any state; cap2: of
load2 in every state, never relaxed), total
volume limits (rows of H: of a best state / of any move), target parts
tried per vertex (its max_targets best connected), cost_cap (no move may
raise a part's cost above it, e.g. the max(send, recv) a volume refinement
must keep; < 0: none)."""
Current = namedtuple("Current", "inv M nmax relax tv")
Current.__doc__ = """Per evaluation: inv = 1 / the pass's scale, M = the current max cost,
nmax = the parts at it, relax = overloading moves allowed, tv = total volume."""
PartFocus = namedtuple("PartFocus", "phic hot sink")
PartFocus.__doc__ = """phic[p]: part p's term of Φ; hot[p]: its vertices may move; sink: the
cheapest part with room and the part with the most room (-1: none)."""
EvalScratch = namedtuple("EvalScratch", "dS dR mark tl dsm drm dvol pairs npairs buf tbuf tcnt leave tpos emask")
EvalScratch.__doc__ = """Scratch of _best1: per-part volume and message deltas (dS, dR, dsm, drm),
touched parts (mark, tl), pair deltas of "weighted" (dvol, pairs, npairs),
the parts of u's net (buf), candidate targets (tbuf, tcnt, tpos), leave
events and per-net target masks (leave, emask)."""
ApplyScratch = namedtuple("ApplyScratch", "crit crita critb ncrit buf")
ApplyScratch.__doc__ = """Scratch and output of apply_move: nets whose counts crossed 0/1/2
(crit), whose last pin is left in a (crita), with a first pin in b (critb);
ncrit = their counts; buf: the parts of a net."""
MoveBatch = namedtuple("MoveBatch", "verts only gain target blocked")
MoveBatch.__doc__ = """Vertices to evaluate (only[i] >= 0: that target only) and the results:
gain, target (-1: none), blocked (a better target refused by the cap, or -1)."""
PartHeaps = namedtuple("PartHeaps", "heap hkey pos hoff hsz")
PartHeaps.__doc__ = """One indexed max-heap per part in one array: part p's heap is
heap[hoff[p] : hoff[p] + hsz[p]], keys hkey[u], pos[u] = u's local index (-1: none)."""
Waiting = namedtuple("Waiting", "head nxt vert")
Waiting.__doc__ = """Per part a linked list (head[p], nxt[e], vert[e]) of the vertices whose
best move into p was refused by the balance cap."""
PassScratch = namedtuple("PassScratch", "hb cnts locked stamp mv_v mv_a")
PassScratch.__doc__ = """Scratch of the FM passes: hb[u] (the target of u's heap entry), cnts (per
part), locked[u] and stamp[u] (per vertex), mv_v/mv_a (the moves of a pass and their source parts)."""
FMScratch = namedtuple("FMScratch", "X A H F EV ONE BL S")
FMScratch.__doc__ = """Everything the FM passes write besides the state, allocated once by _fm:
X (:class:`EvalScratch`), A (:class:`ApplyScratch`), H (:class:`PartHeaps`), F
(:class:`PartFocus`), EV and ONE (:class:`MoveBatch` of n + 1 and of 1 vertex), BL
(:class:`Waiting`), S (:class:`PassScratch`)."""
PassOptions = namedtuple("PassOptions", "patience max_passes min_gain max_moves deadline big_deg use_blocked "
                                        "full_updates theta use_sink work_limit")
PassOptions.__doc__ = """Options of the FM passes (see _fm): patience (moves), max_passes,
min_gain (relative), max_moves (per pass), deadline (perf_counter seconds,
< 0: none), big_deg (nets/vertices above it are not re-evaluated), use_blocked,
full_updates, theta (hot parts: cost >= theta × max), use_sink, work_limit
(work units, see :func:`work_done`; < 0: none — unlike the deadline, the same
on every machine)."""


@njit_inline
def work_done(stats):
    """Work units of the counters ``stats``: the summed degrees (nets) of the vertices whose moves
    were evaluated (stats[3:6]) plus what the caller charged for other stages (stats[6]).
    Deterministic: the work limits of the default pipeline count these, not seconds."""
    return stats[3] + stats[4] + stats[5] + stats[6]


# ------------------------------------------------------------------ slots
@njit_inline
def _cnt(j, p, soff, lam, dense, spart, scnt):
    b = soff[j]
    if dense[j]:
        return scnt[b + p]
    for s in range(b, b + lam[j]):
        if spart[s] == p:
            return scnt[s]
    return 0


@njit_inline
def _inc(j, p, soff, lam, dense, spart, scnt):
    b = soff[j]
    if dense[j]:
        c = scnt[b + p] + 1
        scnt[b + p] = c
        if c == 1:
            lam[j] += 1
        return c
    L = lam[j]
    for s in range(b, b + L):
        if spart[s] == p:
            scnt[s] += 1
            return scnt[s]
    spart[b + L] = p
    scnt[b + L] = 1
    lam[j] = L + 1
    return 1


@njit_inline
def _dec(j, p, soff, lam, dense, spart, scnt):
    b = soff[j]
    if dense[j]:
        c = scnt[b + p] - 1
        scnt[b + p] = c
        if c == 0:
            lam[j] -= 1
        return c
    L = lam[j]
    for s in range(b, b + L):
        if spart[s] == p:
            c = scnt[s] - 1
            if c == 0:
                last = b + L - 1
                spart[s] = spart[last]
                scnt[s] = scnt[last]
                lam[j] = L - 1
            else:
                scnt[s] = c
            return c
    return -1


@njit_inline
def count_neighbour_parts(u, vptr, vidx, part, skip, cnt, touched, nt):
    """Add u's neighbours (vidx[vptr[u]:vptr[u + 1]]) per part other than ``skip`` to ``cnt``; a part
    seen for the first time is appended to ``touched[nt:]``. Returns the new nt."""
    for e in range(vptr[u], vptr[u + 1]):
        p = part[vidx[e]]
        if p != skip:
            if cnt[p] == 0:
                touched[nt] = p
                nt += 1
            cnt[p] += 1
    return nt


@njit_inline
def _parts_of(j, k, soff, lam, dense, spart, scnt, out):
    """Write the parts of Λ_j into out; return their number."""
    b = soff[j]
    m = 0
    if dense[j]:
        for p in range(k):
            if scnt[b + p] > 0:
                out[m] = p
                m += 1
    else:
        for s in range(b, b + lam[j]):
            out[m] = spart[s]
            m += 1
    return m


@njit_rc_free
def build_slots(tptr, tidx, part, P, vol):
    """Fill the pin counts P (:class:`PinSlots`, zero) of every net (pins of net
    j: row j of Aᵀ without the diagonal, plus j) and the k×k volume matrix vol
    (rows of H, zero)."""
    soff, lam, dense, spart, scnt = P
    n = lam.shape[0]
    k = vol.shape[0]
    for j in range(n):
        _inc(j, part[j], soff, lam, dense, spart, scnt)
        for e in range(tptr[j], tptr[j + 1]):
            i = tidx[e]
            if i != j:
                _inc(j, part[i], soff, lam, dense, spart, scnt)
        o = part[j]
        b = soff[j]
        if dense[j]:
            for p in range(k):
                if scnt[b + p] > 0 and p != o:
                    vol[o, p] += 1
        else:
            for s in range(b, b + lam[j]):
                p = spart[s]
                if p != o:
                    vol[o, p] += 1


# ------------------------------------------------------------------ state
@njit_inline
def _addvol(q, r, d, V):
    """vol[q, r] += d (d = ±1) in the :class:`VolumeState` V; returns the
    change of the message count."""
    vol, send, recv, smsg, rmsg = V.vol, V.send, V.recv, V.smsg, V.rmsg
    old = vol[q, r]
    new = old + d
    vol[q, r] = new
    send[q] += d
    recv[r] += d
    if old == 0 and new > 0:
        smsg[q] += 1
        rmsg[r] += 1
        return 1
    if old > 0 and new == 0:
        smsg[q] -= 1
        rmsg[r] -= 1
        return -1
    return 0


@njit_rc_free
def apply_move(u, b, T, P, V, A, own_crit):
    """Move vertex u to part b, updating the state V (:class:`VolumeState`: part,
    loads, volumes, tot = [total volume, messages]) and the pin counts P
    (:class:`PinSlots`) exactly; T: :class:`Topology`. Into A
    (:class:`ApplyScratch`): the nets whose counts crossed 0/1/2 (and u's own
    net when ``own_crit``) in crit, those left with one pin in a in crita, those
    with a first pin in b in critb; ncrit = their counts."""
    vptr, vidx, w, w2 = T.vptr, T.vidx, T.w, T.w2
    soff, lam, dense, spart, scnt = P
    part, load, tot, load2 = V.part, V.load, V.tot, V.load2
    crit, crita, critb, ncrit_arr, buf = A
    k = V.vol.shape[0]
    a = part[u]
    if a == b:
        return
    nc = 0
    na = 0
    nb = 0
    for e in range(vptr[u], vptr[u + 1]):
        j = vidx[e]
        if j == u:
            continue
        o = part[j]
        c = False
        ca = _dec(j, a, soff, lam, dense, spart, scnt)
        if ca == 0:
            tot[1] += _addvol(o, a, -1, V)
            tot[0] -= 1
        if ca <= 1:
            c = True
        if ca == 1:
            crita[na] = j
            na += 1
        cb = _inc(j, b, soff, lam, dense, spart, scnt)
        if cb == 1:
            tot[1] += _addvol(o, b, 1, V)
            tot[0] += 1
            critb[nb] = j
            nb += 1
        if cb <= 2:
            c = True
        if c:
            crit[nc] = j
            nc += 1
    # own net: the sender changes from a to b
    m = _parts_of(u, k, soff, lam, dense, spart, scnt, buf)
    for i in range(m):
        p = buf[i]
        if p != a:
            tot[1] += _addvol(a, p, -1, V)
            tot[0] -= 1
    ca = _dec(u, a, soff, lam, dense, spart, scnt)
    cb = _inc(u, b, soff, lam, dense, spart, scnt)
    m = _parts_of(u, k, soff, lam, dense, spart, scnt, buf)
    for i in range(m):
        p = buf[i]
        if p != b:
            tot[1] += _addvol(b, p, 1, V)
            tot[0] += 1
    if own_crit or ca <= 1 or cb <= 2:
        crit[nc] = u
        nc += 1
    if ca == 1:
        crita[na] = u
        na += 1
    if cb == 1:
        critb[nb] = u
        nb += 1
    part[u] = b
    load[a] -= w[u]
    load[b] += w[u]
    load2[a] -= w2[u]
    load2[b] += w2[u]
    ncrit_arr[0] = nc
    ncrit_arr[1] = na
    ncrit_arr[2] = nb


@njit
def apply_scratch(maxdeg, k):
    """:class:`ApplyScratch` of :func:`apply_move` for vertices of at most
    ``maxdeg`` nets and k parts."""
    return ApplyScratch(np.zeros(maxdeg + 2, np.int64), np.zeros(maxdeg + 2, np.int64),
                        np.zeros(maxdeg + 2, np.int64), np.zeros(3, np.int64), np.zeros(k, np.int64))


# ------------------------------------------------------------------ costs
@njit_inline
def _cost(obj, S, R, sm, rm, alpha, brb):
    if obj == 1:
        return float(S)
    if obj == 2:
        return float(R)
    if obj == 4:
        return alpha * max(sm, rm) + brb * max(S, R)
    return float(max(S, R))


@njit_inline
def _pw(x, q):
    """x ** q for an integer q >= 1 (by squaring; much cheaper than pow)."""
    r = 1.0
    b = x
    e = q
    while e > 0:
        if e & 1:
            r *= b
        b *= b
        e >>= 1
    return r


@njit_inline
def _phi(obj, S, R, sm, rm, alpha, brb, inv, q):
    if obj == 1:
        return _pw(S * inv, q)
    if obj == 2:
        return _pw(R * inv, q)
    if obj == 4:
        return _pw(_cost(obj, S, R, sm, rm, alpha, brb) * inv, q)
    return _pw(S * inv, q) + _pw(R * inv, q)


@njit_rc_free
def state_key(C, V, inv):
    """(max cost, Φ) of the state V (:class:`VolumeState`) under the cost model C
    (:class:`CostModel`), Φ with the scale 1 / inv."""
    obj, alpha, brb, q = C.obj, C.alpha, C.brb, C.q
    send, recv, smsg, rmsg = V.send, V.recv, V.smsg, V.rmsg
    k = send.shape[0]
    mx = 0.0
    ph = 0.0
    for p in range(k):
        c = _cost(obj, send[p], recv[p], smsg[p], rmsg[p], alpha, brb)
        if c > mx:
            mx = c
        ph += _phi(obj, send[p], recv[p], smsg[p], rmsg[p], alpha, brb, inv, q)
    return mx, ph


@njit_rc_free
def _phis(obj, k, send, recv, smsg, rmsg, alpha, brb, inv, q, phic):
    for p in range(k):
        phic[p] = _phi(obj, send[p], recv[p], smsg[p], rmsg[p], alpha, brb, inv, q)


@njit_rc_free
def _better(obj, a0, a1, a2, b0, b1, b2):
    """Is state (max a0, Φ a1, tv a2) strictly better than (b0, b1, b2)?
    For "total" the tuple order is (tv, max, Φ)."""
    if obj == 0:
        x0, x1, x2, y0, y1, y2 = a2, a0, a1, b2, b0, b1
    else:
        x0, x1, x2, y0, y1, y2 = a0, a1, a2, b0, b1, b2
    t0 = 1e-12 * max(1.0, abs(y0))
    if x0 < y0 - t0:
        return True
    if x0 > y0 + t0:
        return False
    t1 = 1e-12 * max(1.0, abs(y1))
    if x1 < y1 - t1:
        return True
    if x1 > y1 + t1:
        return False
    return x2 < y2


# ------------------------------------------------------------------ evaluation
@njit_inline
def _touch(q, r, d, nt, obj, k, X):
    """Volume q -> r changes by d (rows): into the deltas of the
    :class:`EvalScratch` X; returns the new number of touched parts."""
    dS, dR, mark, tl, dvol, pairs, npairs = X.dS, X.dR, X.mark, X.tl, X.dvol, X.pairs, X.npairs
    if not mark[q]:
        mark[q] = True
        tl[nt] = q
        nt += 1
    if not mark[r]:
        mark[r] = True
        tl[nt] = r
        nt += 1
    dS[q] += d
    dR[r] += d
    if obj == 4:
        key = q * k + r
        if dvol[key] == 0:
            pairs[npairs[0]] = key
            npairs[0] += 1
        dvol[key] += d
    return nt


@njit_rc_free
def _best1(u, only, T, P, V, C, L, cur, X, F):
    """Best move of vertex u: returns (gain, target, blocked target) (target -1:
    none); ``only`` >= 0 evaluates that one target part.

    T, P, V: :class:`Topology`, :class:`PinSlots`, :class:`VolumeState` (read
    only); C: :class:`CostModel`; L: :class:`Limits` (cap, cap_hard,
    vlimit_hard, max_targets); cur: :class:`Current` (inv, M, nmax, relax, tv);
    X: :class:`EvalScratch`; F: :class:`PartFocus` (phic, hot, sink).

    Candidates: the L.max_targets parts of u's own net best connected to u
    (with only < 0; source or target hot), plus the sinks. A target b is
    allowed when load_b + w_u <= cap, or — with ``relax`` — when
    load_b + w_u <= cap_hard and the move lowers the current max M of every
    one of the nmax parts at the max while no touched part reaches M (an
    overloading move must pay for itself on the bottleneck); never when the
    total volume would exceed vlimit_hard, nor when a touched part's cost
    would rise above L.cost_cap (>= 0). The gain is −ΔΦ − mu·inv·Δtv
    ("total": −Δtv − 10⁻³·ΔΦ). blk gets a better target refused by the
    balance cap (or -1)."""
    vptr, vidx, w, w2 = T.vptr, T.vidx, T.w, T.w2
    soff, lam, dense, spart, scnt = P
    part, load, vol, send, recv, smsg, rmsg = V.part, V.load, V.vol, V.send, V.recv, V.smsg, V.rmsg
    load2 = V.load2
    obj, alpha, brb, q, mu = C
    cap, cap_hard, vlimit, max_targets, cost_cap = L.cap, L.cap_hard, L.vlimit_hard, L.max_targets, L.cost_cap
    cap2 = L.cap2
    inv, M, nmax, relax, tv = cur
    dS, dR, mark, tl, dsm, drm = X.dS, X.dR, X.mark, X.tl, X.dsm, X.drm
    dvol, pairs, npairs, buf, tbuf, tcnt, leave, tpos, emask = (X.dvol, X.pairs, X.npairs, X.buf, X.tbuf, X.tcnt,
                                                                X.leave, X.tpos, X.emask)
    phic, hot, sink = F
    k = vol.shape[0]
    a = part[u]
    blk = -1
    m = _parts_of(u, k, soff, lam, dense, spart, scnt, buf)
    # candidate targets: parts of u's own net (its in-neighbours' parts), best connected first
    nt_c = 0
    if only >= 0:
        if only != a:
            tbuf[0] = only
            tcnt[0] = _cnt(u, only, soff, lam, dense, spart, scnt)
            nt_c = 1
    else:
        ha = hot[a]
        for i in range(m):
            p = buf[i]
            if p != a and (ha or hot[p]):
                tbuf[nt_c] = p
                tcnt[nt_c] = _cnt(u, p, soff, lam, dense, spart, scnt)
                nt_c += 1
    if nt_c == 0 and not (only < 0 and (sink[0] >= 0 or sink[1] >= 0)):
        return -np.inf, -1, -1
    if nt_c > max_targets:   # partial selection sort by count (desc), ties by part id
        for i in range(max_targets):
            bi = i
            for t in range(i + 1, nt_c):
                if tcnt[t] > tcnt[bi] or (tcnt[t] == tcnt[bi] and tbuf[t] < tbuf[bi]):
                    bi = t
            tbuf[i], tbuf[bi] = tbuf[bi], tbuf[i]
            tcnt[i], tcnt[bi] = tcnt[bi], tcnt[i]
        nt_c = max_targets
    if only < 0:
        # the sinks (the cheapest part with room, the part with the most room) are
        # candidates, adjacent or not: a vertex can leave a full part whose
        # best-connected neighbours are full too
        for si in range(2):
            sp = sink[si]
            if sp < 0 or sp == a or not (hot[a] or hot[sp]):
                continue
            dup = False
            for t in range(nt_c):
                if tbuf[t] == sp:
                    dup = True
            if not dup:
                tbuf[nt_c] = sp
                tcnt[nt_c] = 0
                nt_c += 1
    if nt_c == 0:          # no target (none hot, no sink): skip the scan of u's nets
        return -np.inf, -1, -1
    # one scan of u's nets: the leave events (independent of the target) and,
    # per net, a bitmask of the candidate targets it already holds
    for t in range(nt_c):
        tpos[tbuf[t]] = t
    nl = 0
    ne = 0
    for e in range(vptr[u], vptr[u + 1]):
        j = vidx[e]
        msk = 0
        if j == u:
            msk = -1                       # u's own net is handled below
        else:
            bj = soff[j]
            if dense[j]:
                if scnt[bj + a] == 1:
                    leave[nl] = part[j]
                    nl += 1
                for t in range(nt_c):
                    if scnt[bj + tbuf[t]] > 0:
                        msk |= 1 << t
            else:
                for sl in range(bj, bj + lam[j]):
                    ps = spart[sl]
                    if ps == a:
                        if scnt[sl] == 1:
                            leave[nl] = part[j]
                            nl += 1
                    else:
                        tp = tpos[ps]
                        if tp >= 0:
                            msk |= 1 << tp
        emask[ne] = msk
        ne += 1
    for t in range(nt_c):
        tpos[tbuf[t]] = -1
    ca_own = _cnt(u, a, soff, lam, dense, spart, scnt)
    best_g = -np.inf
    best_b = -1
    best_blocked_g = -np.inf
    tolM = 1e-9 * max(1.0, M)
    for t in range(nt_c):
        b = tbuf[t]
        over = load[b] + w[u] > cap or load2[b] + w2[u] > cap2
        nt = 0
        npairs[0] = 0
        dtv = -nl
        for i in range(nl):
            nt = _touch(leave[i], a, -1, nt, obj, k, X)
        vb = vptr[u]
        for ie in range(ne):
            if ((emask[ie] >> t) & 1) == 0:          # net gains its first pin in b
                nt = _touch(part[vidx[vb + ie]], b, 1, nt, obj, k, X)
                dtv += 1
        for i in range(m):
            p = buf[i]
            if p != a:
                nt = _touch(a, p, -1, nt, obj, k, X)
                dtv -= 1
            if p == a:
                if ca_own >= 2:
                    nt = _touch(b, a, 1, nt, obj, k, X)
                    dtv += 1
            elif p != b:
                nt = _touch(b, p, 1, nt, obj, k, X)
                dtv += 1
        if obj == 4:
            for i in range(npairs[0]):
                key = pairs[i]
                d = dvol[key]
                if d != 0:
                    qq = key // k
                    rr = key - qq * k
                    old = vol[qq, rr]
                    dm = (1 if old + d > 0 else 0) - (1 if old > 0 else 0)
                    dsm[qq] += dm
                    drm[rr] += dm
                dvol[key] = 0
        dphi = 0.0
        lowered = 0
        reach = False
        capped = False
        for i in range(nt):
            p = tl[i]
            S0, R0, sm0, rm0 = send[p], recv[p], smsg[p], rmsg[p]
            S1, R1, sm1, rm1 = S0 + dS[p], R0 + dR[p], sm0 + dsm[p], rm0 + drm[p]
            dphi += _phi(obj, S1, R1, sm1, rm1, alpha, brb, inv, q) - phic[p]
            if over or cost_cap >= 0:
                c0 = _cost(obj, S0, R0, sm0, rm0, alpha, brb)
                c1 = _cost(obj, S1, R1, sm1, rm1, alpha, brb)
                if cost_cap >= 0 and c1 > cost_cap and c1 > c0:
                    capped = True
                if over:
                    if c1 >= M - tolM:
                        reach = True
                    elif c0 >= M - tolM:
                        lowered += 1
            dS[p] = 0
            dR[p] = 0
            dsm[p] = 0
            drm[p] = 0
            mark[p] = False
        if obj == 0:
            g = -float(dtv) - 1e-3 * dphi
        else:
            g = -dphi - mu * inv * dtv
        if tv + dtv > vlimit or capped:
            continue
        if over and (not relax or load[b] + w[u] > cap_hard or load2[b] + w2[u] > cap2 or reach
                     or lowered < nmax):
            if g > best_blocked_g:
                best_blocked_g = g
                blk = b
            continue
        if g > best_g:
            best_g = g
            best_b = b
    if blk >= 0 and best_blocked_g <= best_g:
        blk = -1
    return best_g, best_b, blk


@njit_rc_free
def eval_moves(B, i0, i1, T, P, V, C, L, cur, X, F):
    """Best move of each vertex B.verts[i0:i1] of the :class:`MoveBatch` B
    (B.only[i] >= 0: that target only): B.gain[i], B.target[i] (-1: none),
    B.blocked[i] (a better target refused by the balance cap, or -1). The
    other records as in :func:`_best1`."""
    verts, only, out_g, out_b, out_blk = B
    for iv in range(i0, i1):
        u = verts[iv]
        out_g[iv], out_b[iv], out_blk[iv] = _best1(u, only[iv], T, P, V, C, L, cur, X, F)


# ------------------------------------------------------------------ heaps
# one indexed max-heap per part, stored in segments of one array: part p's
# heap lives in heap[hoff[p] : hoff[p] + hsz[p]]; pos[u] is u's local index.
@njit_rc_free
def _hswap(heap, pos, base, i, j):
    a = heap[base + i]
    b = heap[base + j]
    heap[base + i] = b
    heap[base + j] = a
    pos[b] = i
    pos[a] = j


@njit_rc_free
def _hup(heap, hkey, pos, base, i):
    while i > 0:
        par = (i - 1) >> 1
        if hkey[heap[base + i]] > hkey[heap[base + par]]:
            _hswap(heap, pos, base, i, par)
            i = par
        else:
            break


@njit_rc_free
def _hdown(heap, hkey, pos, base, size, i):
    while True:
        l = 2 * i + 1
        if l >= size:
            break
        c = l
        r = l + 1
        if r < size and hkey[heap[base + r]] > hkey[heap[base + l]]:
            c = r
        if hkey[heap[base + c]] > hkey[heap[base + i]]:
            _hswap(heap, pos, base, i, c)
            i = c
        else:
            break


@njit_rc_free
def _hset(H, p, u, key):
    """Insert u into part p's heap of the :class:`PartHeaps` H or change its key."""
    heap, hkey, pos, hoff, hsz = H
    base = hoff[p]
    i = pos[u]
    if i < 0:
        i = hsz[p]
        heap[base + i] = u
        pos[u] = i
        hsz[p] = i + 1
        hkey[u] = key
        _hup(heap, hkey, pos, base, i)
    else:
        old = hkey[u]
        hkey[u] = key
        if key > old:
            _hup(heap, hkey, pos, base, i)
        else:
            _hdown(heap, hkey, pos, base, hsz[p], i)


@njit_rc_free
def _hremove(H, p, u):
    """Remove u from part p's heap of the :class:`PartHeaps` H (if there)."""
    heap, hkey, pos, hoff, hsz = H
    i = pos[u]
    if i < 0:
        return
    base = hoff[p]
    last = hsz[p] - 1
    if i != last:
        _hswap(heap, pos, base, i, last)
    pos[u] = -1
    hsz[p] = last
    if i < last:
        _hup(heap, hkey, pos, base, i)
        _hdown(heap, hkey, pos, base, last, i)


# ------------------------------------------------------------------ FM
@njit_rc_free
def _sink(C, V, cap, use, sk, cap2):
    """sk[0] = the part with the lowest cost among those below the balance cap (and cap2),
    sk[1] = the part with the lowest load (-1: none, or ``use`` False)."""
    obj, alpha, brb = C.obj, C.alpha, C.brb
    send, recv, smsg, rmsg, load, load2 = V.send, V.recv, V.smsg, V.rmsg, V.load, V.load2
    k = send.shape[0]
    sk[0] = -1
    sk[1] = -1
    if not use:
        return
    bc = 0.0
    for p in range(k):
        if load[p] < cap and load2[p] < cap2:
            c = _cost(obj, send[p], recv[p], smsg[p], rmsg[p], alpha, brb)
            if sk[0] < 0 or c < bc:
                sk[0] = p
                bc = c
            if sk[1] < 0 or load[p] < load[sk[1]]:
                sk[1] = p


@njit_rc_free
def _refresh(C, V, inv, cap, use_sink, F, cap2):
    """After the state V changed: the per-part potentials F.phic, the sinks
    F.sink (:class:`PartFocus`), and (M, nmax) = the max cost and how many
    parts are at it."""
    obj, alpha, brb, q = C.obj, C.alpha, C.brb, C.q
    send, recv, smsg, rmsg = V.send, V.recv, V.smsg, V.rmsg
    k = send.shape[0]
    M, _ = state_key(C, V, inv)
    _phis(obj, k, send, recv, smsg, rmsg, alpha, brb, inv, q, F.phic)
    _sink(C, V, cap, use_sink, F.sink, cap2)
    nmax = 0
    for p in range(k):
        if _cost(obj, send[p], recv[p], smsg[p], rmsg[p], alpha, brb) >= M - 1e-9 * max(1.0, M):
            nmax += 1
    return M, nmax


@njit_rc_free
def _push_blocked(u, blk, BL, bl_n):
    """u waits for part blk (>= 0) in the :class:`Waiting` lists BL, whose
    first bl_n entries are used; returns the new bl_n."""
    bl_head, bl_next, bl_vert = BL
    bl_cap = bl_vert.shape[0]
    if blk >= 0 and bl_n < bl_cap:
        bl_vert[bl_n] = u
        bl_next[bl_n] = bl_head[blk]
        bl_head[blk] = bl_n
        return bl_n + 1
    return bl_n


@njit
def _fm(T, P, V, C, L, O, order, trace, stats):
    """Run FM passes until a pass improves the optimized value by <= O.min_gain
    (relative), O.max_passes, O.deadline (perf_counter seconds; <0: none) or
    O.work_limit (work units of ``stats``, :func:`work_done`; <0: none).

    T: :class:`Topology`; P: :class:`PinSlots` and V: :class:`VolumeState`
    (updated in place: the partition V.part is the result); C:
    :class:`CostModel`; L: :class:`Limits`; O: :class:`PassOptions`;
    order: int64[n], the order vertices are first evaluated in; trace:
    float64[passes, 5] (written); stats: int64[8] counters (added to).

    One heap per part (vertices of the part keyed by the gain of their best
    move). A move into a full part is allowed (up to cap_hard) only when it
    lowers the bottleneck (see _best1); the moves that follow are then taken
    from the overloaded part's heap until it fits again. Only states with
    every load <= cap count as best states.

    Gain updates after moving u from a to b (lazy for decreases: an entry is
    re-evaluated when it reaches the top): the pins of every net of u that
    gained its first pin in b are re-evaluated for target b (their gain for b
    rose); the last pin left in a of a net that had two there is re-evaluated
    fully. ``full_updates``: instead re-evaluate, for all targets, every pin of
    every net whose counts crossed 0/1/2 (slower; for comparison).

    trace[p] = (seconds, value, kept, tried, why) per pass; why: 0 patience,
    1 no candidate, 2 move limit, 3 time limit, 4 work limit. Returns (passes,
    kept moves, tried moves, stopped: 0 converged / 1 time limit / 2 max passes
    / 3 work limit)."""
    vptr, part, k = T.vptr, V.part, V.vol.shape[0]
    obj, max_moves = C.obj, O.max_moves
    n = part.shape[0]
    maxdeg = 1
    for v in range(n):
        d = vptr[v + 1] - vptr[v]
        if d > maxdeg:
            maxdeg = d
    X = EvalScratch(np.zeros(k, np.int64), np.zeros(k, np.int64), np.zeros(k, np.bool_),
                    np.zeros(2 * k + 4, np.int64), np.zeros(k, np.int64), np.zeros(k, np.int64),
                    np.zeros(k * k if obj == 4 else 1, np.int64),
                    np.zeros(2 * maxdeg + 4 * k + 8 if obj == 4 else 1, np.int64), np.zeros(1, np.int64),
                    np.zeros(k, np.int64), np.zeros(k, np.int64), np.zeros(k, np.int64),
                    np.zeros(maxdeg + 1, np.int64), -np.ones(k, np.int64), np.zeros(maxdeg + 1, np.int64))
    H = PartHeaps(np.zeros(n, np.int64), np.zeros(n, np.float64), -np.ones(n, np.int64), np.zeros(k + 1, np.int64),
                  np.zeros(k, np.int64))
    F = PartFocus(np.zeros(k, np.float64), np.zeros(k, np.bool_), -np.ones(2, np.int64))
    EV = MoveBatch(np.zeros(n + 1, np.int64), -np.ones(n + 1, np.int64), np.zeros(n + 1, np.float64),
                   np.zeros(n + 1, np.int64), np.zeros(n + 1, np.int64))
    ONE = MoveBatch(np.zeros(1, np.int64), -np.ones(1, np.int64), np.zeros(1, np.float64), np.zeros(1, np.int64),
                    np.zeros(1, np.int64))
    BL = Waiting(-np.ones(k, np.int64), np.zeros(4 * n + 16, np.int64), np.zeros(4 * n + 16, np.int64))
    S = PassScratch(np.zeros(n, np.int64), np.zeros(k, np.int64), np.zeros(n, np.bool_), np.zeros(n, np.int64),
                    np.zeros(max_moves, np.int64), np.zeros(max_moves, np.int64))
    W = FMScratch(X, apply_scratch(maxdeg, k), H, F, EV, ONE, BL, S)
    return _fm_passes(T, P, V, C, L, O, order, trace, stats, W)


@njit_rc_free
def _fm_passes(T, P, V, C, L, O, order, trace, stats, W):
    """The passes of :func:`_fm`, which allocates their scratch W (:class:`FMScratch`).
    Allocates nothing (compiled without reference counting)."""
    X, A, H, F, EV, ONE, BL, S = W
    vptr, vidx, tptr, tidx, w, w2 = T
    soff, lam, dense, spart, scnt = P
    part, load, vol, send, recv, smsg, rmsg, tot, load2 = V
    obj, alpha, brb = C.obj, C.alpha, C.brb
    cap, vlimit, cap2 = L.cap, L.vlimit, L.cap2
    patience, max_passes, min_gain, max_moves, deadline = O.patience, O.max_passes, O.min_gain, O.max_moves, O.deadline
    big_deg, use_blocked, full_updates, theta, use_sink = O.big_deg, O.use_blocked, O.full_updates, O.theta, O.use_sink
    work_limit = O.work_limit
    n = part.shape[0]
    k = vol.shape[0]
    crit, crita, critb, ncrit = A.crit, A.crita, A.critb, A.ncrit
    heap, hkey, pos, hoff, hsz = H
    hot = F.hot
    ev_v, ev_o, ev_g, ev_b, ev_k = EV
    one_v, one_o, one_g, one_b, one_k = ONE
    bl_head, bl_next, bl_vert = BL
    bl_cap = bl_next.shape[0]
    hb, cnts, locked, stamp, mv_v, mv_a = S
    st = 0
    bl_n = 0
    passes = 0
    widen_next = False
    kept_total = 0
    tried_total = 0
    stopped = 0
    t_start = monotonic()
    while passes < max_passes:
        passes += 1
        mx0, _ = state_key(C, V, 1.0)
        scale = mx0 if mx0 > 0 else 1.0
        if obj == 0:
            top = 0                       # (a loop: np.max needs numba's reference counting)
            for p in range(k):
                top = max(top, send[p], recv[p])
            scale = max(1.0, float(top))
        inv = 1.0 / scale
        mxs, phs = state_key(C, V, inv)
        start0 = float(tot[0]) if obj == 0 else mxs
        best0, best1, best2 = mxs, phs, tot[0]
        M, nmax = _refresh(C, V, inv, cap, use_sink, F, cap2)
        relax = obj != 0
        hot[:] = False
        locked[:] = False
        bl_head[:] = -1
        bl_n = 0
        pos[:] = -1
        hsz[:] = 0
        cnts[:] = 0
        for v in range(n):
            cnts[part[v]] += 1
        hoff[0] = 0
        for p in range(k):
            hoff[p + 1] = hoff[p] + cnts[p]
        nmoves = 0
        best_len = 0
        since = 0
        why = 0
        over_part = -1
        ov_start = 0
        seed = True
        widen = widen_next
        while True:
            if over_part < 0 and not seed and obj != 0:
                # the bottleneck moved to a part outside the hot set: widen it
                for p in range(k):
                    if not hot[p] and _cost(obj, send[p], recv[p], smsg[p], rmsg[p], alpha, brb) >= M - 1e-9 * max(1.0, M):
                        seed = True
            if seed:
                # hot parts: cost >= theta * current max (the set only grows in a pass);
                # (re-)evaluate every unlocked vertex with a neighbouring part, one batch
                seed = False
                for p in range(k):
                    if obj == 0 or widen or _cost(obj, send[p], recv[p], smsg[p], rmsg[p], alpha, brb) >= theta * M:
                        hot[p] = True
                nv = 0
                for ii in range(n):
                    u = order[ii]
                    if lam[u] > 1 and not locked[u]:
                        ev_v[nv] = u
                        ev_o[nv] = -1
                        nv += 1
                # in chunks, with the clock checked between them (a seed can take seconds)
                cut = 0          # why the seed was cut short: 3 time limit, 4 work limit
                for c0 in range(0, nv, SEED_CHUNK):
                    c1 = min(nv, c0 + SEED_CHUNK)
                    for i in range(c0, c1):     # this chunk's work counts before it runs
                        stats[3] += vptr[ev_v[i] + 1] - vptr[ev_v[i]]
                    if work_limit >= 0 and work_done(stats) > work_limit:
                        cut = 4
                        break
                    eval_moves(EV, c0, c1, T, P, V, C, L, Current(inv, M, nmax, relax and over_part < 0, tot[0]),
                               X, F)
                    if deadline >= 0:
                        now = monotonic()
                        if now > deadline:
                            cut = 3
                            break
                if cut:
                    why = cut
                    stopped = 1 if cut == 3 else 3
                    break
                stats[1] += nv
                for i in range(nv):
                    u = ev_v[i]
                    bl_n = _push_blocked(u, ev_k[i], BL, bl_n)
                    if ev_b[i] >= 0:
                        hb[u] = ev_b[i]
                        _hset(H, part[u], u, ev_g[i])
                    elif pos[u] >= 0:
                        _hremove(H, part[u], u)
            if since >= patience and over_part < 0:
                why = 0
                break
            if nmoves >= max_moves:
                why = 2
                break
            if deadline >= 0 and (nmoves & 15) == 0:
                now = monotonic()
                if now > deadline:
                    why = 3
                    stopped = 1
                    break
            if work_limit >= 0 and work_done(stats) > work_limit:
                why = 4
                stopped = 3
                break
            # the overloaded part's heap, else the heap with the best top
            if over_part >= 0:
                hp = over_part
                if hsz[hp] == 0:
                    # nothing can leave the overloaded part: undo the moves since it
                    # was overloaded (their vertices stay locked) and go on
                    for i in range(nmoves - 1, ov_start - 1, -1):
                        apply_move(mv_v[i], mv_a[i], T, P, V, A, full_updates)
                    nmoves = ov_start
                    over_part = -1
                    M, nmax = _refresh(C, V, inv, cap, use_sink, F, cap2)
                    since += 1
                    continue
            else:
                hp = -1
                bestk = -np.inf
                for p in range(k):
                    if hsz[p] > 0:
                        kk = hkey[heap[hoff[p]]]
                        if hp < 0 or kk > bestk:
                            hp = p
                            bestk = kk
                if hp < 0:
                    if not widen:                   # nothing left around the hot parts: all parts
                        widen = True
                        seed = True
                        continue
                    why = 1
                    break
            u = heap[hoff[hp]]
            stats[0] += 1
            stats[4] += vptr[u + 1] - vptr[u]
            rl = relax and over_part < 0
            one_v[0] = u
            eval_moves(ONE, 0, 1, T, P, V, C, L, Current(inv, M, nmax, rl, tot[0]), X, F)
            g = one_g[0]
            bb = one_b[0]
            bl_n = _push_blocked(u, one_k[0], BL, bl_n)
            if bb < 0:
                _hremove(H, hp, u)
                continue
            hb[u] = bb
            _hset(H, hp, u, g)
            if heap[hoff[hp]] != u:       # its key dropped below another entry of its heap
                continue
            if over_part < 0:             # ... or below the top of another heap
                ok = True
                for p in range(k):
                    if p != hp and hsz[p] > 0 and hkey[heap[hoff[p]]] > g:
                        ok = False
                        break
                if not ok:
                    continue
            _hremove(H, hp, u)
            a = part[u]
            mv_v[nmoves] = u
            mv_a[nmoves] = a
            nmoves += 1
            locked[u] = True
            apply_move(u, bb, T, P, V, A, full_updates)
            if load[bb] > cap:
                if over_part < 0:
                    ov_start = nmoves - 1
                over_part = bb
            elif over_part >= 0 and load[over_part] <= cap:
                over_part = -1
            M, nmax = _refresh(C, V, inv, cap, use_sink, F, cap2)
            # gain updates (see the doc): collect one batch
            st += 1
            nv = 0
            if full_updates:
                for ci in range(ncrit[0]):
                    j = crit[ci]
                    for e in range(tptr[j], tptr[j + 1] + 1):
                        x = tidx[e] if e < tptr[j + 1] else j
                        if locked[x] or stamp[x] == st or vptr[x + 1] - vptr[x] > big_deg:
                            continue
                        stamp[x] = st
                        ev_v[nv] = x
                        ev_o[nv] = -1
                        nv += 1
            else:
                for ci in range(ncrit[2] if big_deg > 0 else 0):   # first pin in b: target b got better
                    j = critb[ci]
                    if tptr[j + 1] - tptr[j] >= big_deg:
                        continue
                    for e in range(tptr[j], tptr[j + 1] + 1):
                        x = tidx[e] if e < tptr[j + 1] else j
                        if locked[x] or stamp[x] == st or part[x] == bb or not (hot[bb] or hot[part[x]]) \
                                or vptr[x + 1] - vptr[x] > big_deg:
                            continue
                        stamp[x] = st
                        ev_v[nv] = x
                        ev_o[nv] = bb
                        nv += 1
                for ci in range(ncrit[1]):          # one pin left in a: it can now leave for free
                    j = crita[ci]
                    if tptr[j + 1] - tptr[j] >= big_deg:
                        continue
                    for e in range(tptr[j], tptr[j + 1] + 1):
                        x = tidx[e] if e < tptr[j + 1] else j
                        if part[x] == a:
                            if not locked[x] and stamp[x] != st and vptr[x + 1] - vptr[x] <= big_deg:
                                stamp[x] = st
                                ev_v[nv] = x
                                ev_o[nv] = -1
                                nv += 1
                            break
            if use_blocked:                         # part a got room: who waited for it looks again
                # (at most BL_WALK waiting entries per move, newest first: walking the whole
                # list after every move was O(n) per move; entries that still do not fit drop out
                # and come back when their next evaluation is blocked again)
                room = cap - load[a]
                e = bl_head[a]
                walked = 0
                while e >= 0 and walked < BL_WALK:
                    walked += 1
                    x = bl_vert[e]
                    e = bl_next[e]
                    if locked[x] or part[x] == a or w[x] > room or stamp[x] == st:
                        continue
                    stamp[x] = st
                    ev_v[nv] = x
                    ev_o[nv] = a
                    nv += 1
                bl_head[a] = e
                if bl_n > bl_cap - n:               # the pool runs full: drop it
                    bl_head[:] = -1
                    bl_n = 0
            eval_moves(EV, 0, nv, T, P, V, C, L, Current(inv, M, nmax, relax, tot[0]), X, F)
            stats[2] += nv
            for i in range(nv):
                x = ev_v[i]
                stats[5] += vptr[x + 1] - vptr[x]
                bl_n = _push_blocked(x, ev_k[i], BL, bl_n)
                t2 = ev_b[i]
                if ev_o[i] < 0:                     # full evaluation: exact key
                    if t2 < 0:
                        _hremove(H, part[x], x)
                    else:
                        hb[x] = t2
                        _hset(H, part[x], x, ev_g[i])
                elif t2 >= 0 and (pos[x] < 0 or ev_g[i] > hkey[x]):
                    hb[x] = t2                      # one target: raise the key only
                    _hset(H, part[x], x, ev_g[i])
                ev_o[i] = -1
            if over_part < 0 and tot[0] <= vlimit:
                mxn, phn = state_key(C, V, inv)
                if _better(obj, mxn, phn, tot[0], best0, best1, best2):
                    best0, best1, best2 = mxn, phn, tot[0]
                    best_len = nmoves
                    since = 0
                else:
                    since += 1
            else:
                since += 1
        # roll back to the best prefix
        for i in range(nmoves - 1, best_len - 1, -1):
            apply_move(mv_v[i], mv_a[i], T, P, V, A, full_updates)
        kept_total += best_len
        tried_total += nmoves
        now = monotonic()
        mxe, _ = state_key(C, V, 1.0)
        val = float(tot[0]) if obj == 0 else mxe
        if passes - 1 < trace.shape[0]:
            trace[passes - 1, 0] = now - t_start
            trace[passes - 1, 1] = val
            trace[passes - 1, 2] = best_len
            trace[passes - 1, 3] = nmoves
            trace[passes - 1, 4] = why
        if why == 3 or why == 4:
            break
        if not val < start0 * (1.0 - min_gain):
            if widen or widen_next or passes >= max_passes:
                break
            widen_next = True      # the hot parts alone gave nothing: one more pass over all parts
            continue
        widen_next = False
        if passes >= max_passes:
            stopped = 2
    return passes, kept_total, tried_total, stopped
