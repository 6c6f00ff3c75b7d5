"""Select the next move of an FM pass: the heap to take it from, and a lazy re-evaluation.

Keys drift (other parts' loads and volumes change after every move), so the
top vertex of the chosen heap is re-evaluated against the current state
before it moves; it moves only when it is still the top of its heap and —
unless an overloaded part must be emptied first — no other heap's top beats
its new key.
"""
from __future__ import annotations

import numpy as np

from .costs import _cost
from .gains import eval_moves
from .heaps import _hremove, _hset, _push_blocked
from .jit import njit_inline


@njit_inline
def _best_heap(H, k):
    """The part whose heap (:class:`PartHeaps` H) has the best top key (-1: every heap empty)."""
    heap, hkey, hoff, hsz = H.heap, H.hkey, H.hoff, H.hsz
    hp = -1
    bestk = -np.inf
    for p in range(k):
        if hsz[p] > 0:
            kk = hkey[heap[hoff[p]]]
            if hp < 0 or kk > bestk:
                hp = p
                bestk = kk
    return hp


@njit_inline
def _bottleneck_left_hot(C, V, hot, M):
    """A part outside the hot set is at the max cost M (then the hot set must widen)."""
    obj, alpha, brb = C.obj, C.alpha, C.brb
    send, recv, smsg, rmsg = V.send, V.recv, V.smsg, V.rmsg
    left = False
    for p in range(send.shape[0]):
        if not hot[p] and _cost(obj, send[p], recv[p], smsg[p], rmsg[p], alpha, brb) >= M - 1e-9 * max(1.0, M):
            left = True
    return left


@njit_inline
def _still_on_top(hp, u, g, over_part, H, k):
    """After u's key in part hp's heap became g: u is still its heap's top and — without an
    overloaded part (over_part < 0) — no other heap's top key beats g."""
    heap, hkey, hoff, hsz = H.heap, H.hkey, H.hoff, H.hsz
    if heap[hoff[hp]] != u:       # its key dropped below another entry of its heap
        return False
    if over_part >= 0:
        return True
    for p in range(k):            # ... or below the top of another heap
        if p != hp and hsz[p] > 0 and hkey[heap[hoff[p]]] > g:
            return False
    return True


@njit_inline
def _select_move(hp, over_part, T, P, V, C, L, cur, stats, W, bl_n):
    """Re-evaluate the top vertex u of part hp's heap under ``cur`` (:class:`Current`) and
    re-file it (removed when it has no move; a refused better target puts it on that part's
    waiting list). Returns (u, target, bl_n): target -1 when u must not move now.
    stats[0] += 1 (moves tried), stats[4] += u's degree (work units)."""
    H, ONE = W.H, W.ONE
    vptr = T.vptr
    k = V.vol.shape[0]
    u = H.heap[H.hoff[hp]]
    stats[0] += 1
    stats[4] += vptr[u + 1] - vptr[u]
    ONE.verts[0] = u
    eval_moves(ONE, np.int64(0), np.int64(1), T, P, V, C, L, cur, W.X, W.F)
    g = ONE.gain[0]
    bb = ONE.target[0]
    bl_n = _push_blocked(u, ONE.blocked[0], W.BL, bl_n)
    if bb < 0:
        _hremove(H, hp, u)
        return u, -1, bl_n
    W.S.hb[u] = bb
    _hset(H, hp, u, g)
    if not _still_on_top(hp, u, g, over_part, H, k):
        return u, -1, bl_n
    return u, bb, bl_n
