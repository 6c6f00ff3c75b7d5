"""Keep the heaps' keys current: evaluate every movable vertex when a pass (re)starts, and
after each move re-evaluate only the vertices whose best move may have changed.

After u moved from a to b (:func:`.apply.apply_move` lists the nets whose pin
counts crossed 0/1/2): the pins of every net of u that gained its first pin
in b are re-evaluated for target b alone (their gain towards b rose; a key
only rises), and the last pin left in a of a net that had two there is
re-evaluated fully (it can now leave for free). Decreases are lazy: an entry
is re-evaluated when it reaches the top (:mod:`.select`). Nets and vertices of more than ``big_deg`` nets
are skipped. When part a got room, up to :data:`.records.BL_WALK` vertices
waiting for it look again. Work (stats[3], stats[5]) is counted in work
units: the degrees (nets) of the vertices evaluated.
"""
from __future__ import annotations

from ...._kernels import monotonic
from .costs import _cost
from .gains import eval_moves
from .heaps import _hremove, _hset, _push_blocked
from .jit import njit_inline
from .records import BL_WALK, SEED_CHUNK, work_done


@njit_inline
def _queue(x, target, st, nv, W):
    """Vertex x joins the evaluation batch W.EV (target part, -1: all), stamped st; returns the
    new batch size."""
    W.S.stamp[x] = st
    W.EV.verts[nv] = x
    W.EV.only[nv] = target
    return nv + 1


@njit_inline
def _seed_batch(order, P, V, W):
    """The unlocked vertices whose own net spans more than one part, in ``order`` (int64[n]),
    into the batch W.EV (all targets); returns their number."""
    lam = P.lam
    locked = W.S.locked
    ev_v, ev_o = W.EV.verts, W.EV.only
    nv = 0
    for ii in range(V.part.shape[0]):
        u = order[ii]
        if lam[u] > 1 and not locked[u]:
            ev_v[nv] = u
            ev_o[nv] = -1
            nv += 1
    return nv


@njit_inline
def _eval_seed(nv, T, P, V, C, L, O, stats, W, cur):
    """Evaluate the batch W.EV[:nv] in chunks of :data:`SEED_CHUNK` vertices, the clock and the
    work looked at between them (a seed can take seconds); each chunk's work counts (stats[3])
    before it runs. Returns why it was cut short: 0 not, 3 time limit, 4 work limit."""
    vptr = T.vptr
    ev_v = W.EV.verts
    for c0 in range(0, nv, SEED_CHUNK):
        c1 = min(nv, c0 + SEED_CHUNK)
        for i in range(c0, c1):
            stats[3] += vptr[ev_v[i] + 1] - vptr[ev_v[i]]
        if O.work_limit >= 0 and work_done(stats) > O.work_limit:
            return 4
        eval_moves(W.EV, c0, c1, T, P, V, C, L, cur, W.X, W.F)
        if O.deadline >= 0:
            now = monotonic()
            if now > O.deadline:
                return 3
    return 0


@njit_inline
def _seed_heaps(T, P, V, C, L, O, order, stats, W, cur, widen, bl_n):
    """(Re)start: mark the hot parts (cost >= O.theta × cur.M; all with ``widen`` or "total";
    the set only grows in a pass), evaluate every unlocked vertex with a neighbouring part
    under ``cur`` (:class:`Current`) and file it in its part's heap (or out of it). Returns
    (cut, bl_n): cut 3 / 4 when the time / work limit stopped it (nothing filed)."""
    obj, alpha, brb = C.obj, C.alpha, C.brb
    send, recv, smsg, rmsg, part = V.send, V.recv, V.smsg, V.rmsg, V.part
    H, EV, hot, hb = W.H, W.EV, W.F.hot, W.S.hb
    for p in range(send.shape[0]):
        if obj == 0 or widen or _cost(obj, send[p], recv[p], smsg[p], rmsg[p], alpha, brb) >= O.theta * cur.M:
            hot[p] = True
    nv = _seed_batch(order, P, V, W)
    cut = _eval_seed(nv, T, P, V, C, L, O, stats, W, cur)
    if cut:
        return cut, bl_n
    stats[1] += nv
    for i in range(nv):
        u = EV.verts[i]
        bl_n = _push_blocked(u, EV.blocked[i], W.BL, bl_n)
        if EV.target[i] >= 0:
            hb[u] = EV.target[i]
            _hset(H, part[u], u, EV.gain[i])
        elif H.pos[u] >= 0:
            _hremove(H, part[u], u)
    return 0, bl_n


@njit_inline
def _collect_crossings(a, b, st, T, V, O, W):
    """After a move a -> b: the pins of the nets with a first pin in b (W.A.critb), for target b
    (where a or the pin's part is hot), and the last pin left in a of the nets in W.A.crita,
    all targets, into the batch (nets of >= O.big_deg pins skipped); returns the batch size."""
    vptr, tptr, tidx = T.vptr, T.tptr, T.tidx
    part = V.part
    big_deg = O.big_deg
    crita, critb, ncrit = W.A.crita, W.A.critb, W.A.ncrit
    locked, stamp, hot = W.S.locked, W.S.stamp, W.F.hot
    nv = 0
    for ci in range(ncrit[2] if big_deg > 0 else 0):   # first pin in b: target b got better
        j = critb[ci]
        if tptr[j + 1] - tptr[j] >= big_deg:
            continue
        for e in range(tptr[j], tptr[j + 1] + 1):
            x = tidx[e] if e < tptr[j + 1] else j
            if locked[x] or stamp[x] == st or part[x] == b or not (hot[b] or hot[part[x]]) \
                    or vptr[x + 1] - vptr[x] > big_deg:
                continue
            nv = _queue(x, b, st, nv, W)
    for ci in range(ncrit[1]):          # one pin left in a: it can now leave for free
        j = crita[ci]
        if tptr[j + 1] - tptr[j] >= big_deg:
            continue
        for e in range(tptr[j], tptr[j + 1] + 1):
            x = tidx[e] if e < tptr[j + 1] else j
            if part[x] == a:
                if not locked[x] and stamp[x] != st and vptr[x + 1] - vptr[x] <= big_deg:
                    nv = _queue(x, -1, st, nv, W)
                break
    return nv


@njit_inline
def _collect_waiting(a, st, nv, T, V, L, W, bl_n):
    """Part a got room: who waited for it looks again, for target a (at most :data:`BL_WALK`
    entries per move, newest first: walking the whole list after every move was O(n) per
    move; entries that still do not fit drop out and come back when their next evaluation
    is blocked again). Drops every list when the pool runs full. Returns (nv, bl_n)."""
    w = T.w
    part, load = V.part, V.load
    bl_head, bl_next, bl_vert = W.BL
    locked, stamp = W.S.locked, W.S.stamp
    room = L.cap - load[a]
    e = bl_head[a]
    walked = 0
    while e >= 0 and walked < BL_WALK:
        walked += 1
        x = bl_vert[e]
        e = bl_next[e]
        if locked[x] or part[x] == a or w[x] > room or stamp[x] == st:
            continue
        nv = _queue(x, a, st, nv, W)
    bl_head[a] = e
    if bl_n > bl_next.shape[0] - part.shape[0]:
        bl_head[:] = -1
        bl_n = 0
    return nv, bl_n


@njit_inline
def _file_updates(nv, T, V, stats, W, bl_n):
    """File the evaluated batch W.EV[:nv] in the heaps: a full evaluation sets the exact key
    (or removes the vertex), a one-target one only raises it; refused targets go to the
    waiting lists; stats[5] += the degrees (work units). Returns bl_n."""
    vptr, part = T.vptr, V.part
    H, EV, hb = W.H, W.EV, W.S.hb
    for i in range(nv):
        x = EV.verts[i]
        stats[5] += vptr[x + 1] - vptr[x]
        bl_n = _push_blocked(x, EV.blocked[i], W.BL, bl_n)
        t2 = EV.target[i]
        if EV.only[i] < 0:                  # full evaluation: exact key
            if t2 < 0:
                _hremove(H, part[x], x)
            else:
                hb[x] = t2
                _hset(H, part[x], x, EV.gain[i])
        elif t2 >= 0 and (H.pos[x] < 0 or EV.gain[i] > H.hkey[x]):
            hb[x] = t2                      # one target: raise the key only
            _hset(H, part[x], x, EV.gain[i])
        EV.only[i] = -1
    return bl_n
