"""The FM passes: run passes until one gains too little, each pass a sequence of moves
rolled back to its best prefix.

A pass: (1) scale the potential by the pass's start value; (2) seed: every
movable vertex's best move goes into its part's heap (:mod:`.updates`); (3)
repeatedly select the best move (:mod:`.select`), apply it (:mod:`.apply`;
moves with a loss too) and re-evaluate the vertices it affects
(:mod:`.updates`), remembering the best *feasible* state (every load <= cap,
total volume <= vlimit; lexicographic max cost, Φ, total volume); (4) stop
after ``patience`` moves without a new best (or a limit) and roll back to the
best prefix. A move into a full part (up to cap_hard) is allowed only when it
lowers the bottleneck (:func:`.gains._best1`); the moves that follow are then
taken from the overloaded part's heap until it fits again, and undone when
nothing can leave it. The hot set (parts whose vertices may move) widens to
every part when the bottleneck leaves it or nothing around it can move.
"""
from __future__ import annotations

import numpy as np

from ...._kernels import monotonic
from .apply import apply_move, apply_scratch, roll_back
from .costs import _better, _refresh, state_key
from .gains import eval_moves
from .heaps import _hremove
from .jit import njit, njit_inline, njit_rc_free
from .records import (
    Current,
    EvalScratch,
    FMScratch,
    MoveBatch,
    PartFocus,
    PartHeaps,
    PassScratch,
    Waiting,
    work_done,
)
from .select import _best_heap, _bottleneck_left_hot, _select_move
from .updates import (
    _collect_crossings,
    _collect_waiting,
    _file_updates,
    _seed_heaps,
)


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
    every load <= cap count as best states. Gain updates after a move: see
    :mod:`.updates`.

    trace[p] = (seconds, value, kept, tried, why) per pass; why: 0 patience,
    1 no candidate, 2 move limit, 3 time limit, 4 work limit. Returns (passes,
    kept moves, tried moves, stopped: 0 converged / 1 time limit / 2 max passes
    / 3 work limit). Allocates the scratch (:class:`FMScratch`) and runs
    :func:`_fm_passes`."""
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


@njit_inline
def _pass_scale(C, V):
    """The scale of a pass's potential Φ: the current max cost (1 when 0); "total": the
    largest send or recv volume (rows of H, at least 1)."""
    send, recv = V.send, V.recv
    mx0, _ = state_key(C, V, 1.0)
    scale = mx0 if mx0 > 0 else 1.0
    if C.obj == 0:
        top = 0                       # (a loop: np.max needs numba's reference counting)
        for p in range(send.shape[0]):
            top = max(top, send[p], recv[p])
        scale = max(1.0, float(top))
    return scale


@njit_inline
def _reset_pass(V, W):
    """Start a pass: no part hot, no vertex locked, waiting lists and heaps empty, part p's
    heap segment sized to its vertex count."""
    part = V.part
    hot, bl_head, cnts, locked = W.F.hot, W.BL.head, W.S.cnts, W.S.locked
    pos, hoff, hsz = W.H.pos, W.H.hoff, W.H.hsz
    hot[:] = False
    locked[:] = False
    bl_head[:] = -1
    pos[:] = -1
    hsz[:] = 0
    cnts[:] = 0
    for v in range(part.shape[0]):
        cnts[part[v]] += 1
    hoff[0] = 0
    for p in range(cnts.shape[0]):
        hoff[p + 1] = hoff[p] + cnts[p]


@njit_inline
def _limit_hit(O, stats, since, nmoves, over_part):
    """Why the pass must end now (-1: it goes on): 0 ``patience`` moves without a new best
    (not while a part is overloaded), 2 the move limit, 3 the deadline (looked at every 16
    moves), 4 the work limit."""
    if since >= O.patience and over_part < 0:
        return 0
    if nmoves >= O.max_moves:
        return 2
    if O.deadline >= 0 and (nmoves & 15) == 0:
        now = monotonic()
        if now > O.deadline:
            return 3
    if O.work_limit >= 0 and work_done(stats) > O.work_limit:
        return 4
    return -1


@njit_rc_free
def _pass_moves(T, P, V, C, L, O, order, stats, W, inv, widen, st):
    """The moves of one pass (state reset by :func:`_reset_pass`), Φ scaled by 1 / inv; the
    records as in :func:`_fm`, W: :class:`FMScratch`. ``widen``: all parts hot from the
    start; ``st``: the last stamp used (W.S.stamp marks a vertex queued after move st).
    The moves are W.S.mv_v[:nmoves] (from parts W.S.mv_a), applied to V. Returns (nmoves,
    best_len: moves of the best feasible prefix, why: see the trace of :func:`_fm`,
    widen: whether the hot set widened to all parts, st)."""
    A, H, F, S = W.A, W.H, W.F, W.S
    obj, cap, vlimit, cap2, use_sink = C.obj, L.cap, L.vlimit, L.cap2, O.use_sink
    part, load, tot = V.part, V.load, V.tot
    k = V.vol.shape[0]
    mv_v, mv_a = S.mv_v, S.mv_a
    best0, best1 = state_key(C, V, inv)
    best2 = tot[0]
    M, nmax = _refresh(C, V, inv, cap, use_sink, F, cap2)
    relax = obj != 0
    nmoves = np.int64(0)   # int64 from the start (literal 0s make numba compile roll_back twice)
    best_len = 0
    since = 0
    why = 0
    over_part = -1
    ov_start = np.int64(0)
    bl_n = 0
    seed = True
    while True:
        if over_part < 0 and not seed and obj != 0:
            seed = _bottleneck_left_hot(C, V, F.hot, M)   # widen the hot set to the new bottleneck
        if seed:
            seed = False
            cut, bl_n = _seed_heaps(T, P, V, C, L, O, order, stats, W,
                                    Current(inv, M, nmax, relax and over_part < 0, tot[0]), widen, bl_n)
            if cut:
                why = cut
                break
        why = _limit_hit(O, stats, since, nmoves, over_part)
        if why >= 0:
            break
        # the overloaded part's heap, else the heap with the best top
        if over_part >= 0:
            hp = over_part
            if H.hsz[hp] == 0:
                # nothing can leave the overloaded part: undo the moves since it
                # was overloaded (their vertices stay locked) and go on
                nmoves = roll_back(mv_v, mv_a, nmoves, ov_start, T, P, V, A, False)
                over_part = -1
                M, nmax = _refresh(C, V, inv, cap, use_sink, F, cap2)
                since += 1
                continue
        else:
            hp = _best_heap(H, k)
            if hp < 0:
                if not widen:                   # nothing left around the hot parts: all parts
                    widen = True
                    seed = True
                    continue
                why = 1
                break
        cur = Current(inv, M, nmax, relax and over_part < 0, tot[0])
        u, b, bl_n = _select_move(hp, over_part, T, P, V, C, L, cur, stats, W, bl_n)
        if b < 0:
            continue
        _hremove(H, hp, u)
        a = part[u]
        mv_v[nmoves] = u
        mv_a[nmoves] = a
        nmoves += 1
        S.locked[u] = True
        apply_move(u, b, T, P, V, A, False)
        if load[b] > cap:
            if over_part < 0:
                ov_start = nmoves - 1
            over_part = b
        elif over_part >= 0 and load[over_part] <= cap:
            over_part = -1
        M, nmax = _refresh(C, V, inv, cap, use_sink, F, cap2)
        # gain updates (see .updates): one batch
        st += 1
        nv = _collect_crossings(a, b, st, T, V, O, W)
        if O.use_blocked:                       # part a got room: who waited for it looks again
            nv, bl_n = _collect_waiting(a, st, nv, T, V, L, W, bl_n)
        eval_moves(W.EV, np.int64(0), nv, T, P, V, C, L, Current(inv, M, nmax, relax, tot[0]), W.X, F)
        stats[2] += nv
        bl_n = _file_updates(nv, T, V, stats, W, bl_n)
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
    return nmoves, best_len, why, widen, st


@njit_rc_free
def _fm_passes(T, P, V, C, L, O, order, trace, stats, W):
    """The passes of :func:`_fm`, which allocates their scratch W (:class:`FMScratch`).
    Allocates nothing (compiled without reference counting). Returns what :func:`_fm` does."""
    obj, max_passes, tot = C.obj, O.max_passes, V.tot
    st = np.int64(0)   # typed int64 from the start: a literal 0 makes numba compile _pass_moves twice
    passes = 0
    widen_next = False
    kept_total = 0
    tried_total = 0
    stopped = 0
    t_start = monotonic()
    while passes < max_passes:
        passes += 1
        inv = 1.0 / _pass_scale(C, V)
        mxs, _ = state_key(C, V, inv)
        start0 = float(tot[0]) if obj == 0 else mxs
        _reset_pass(V, W)
        nmoves, best_len, why, widen, st = _pass_moves(T, P, V, C, L, O, order, stats, W, inv, widen_next, st)
        roll_back(W.S.mv_v, W.S.mv_a, nmoves, best_len, T, P, V, W.A, False)   # to the best prefix
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
            stopped = 1 if why == 3 else 3
            break
        if not val < start0 * (1.0 - O.min_gain):
            if widen or widen_next or passes >= max_passes:
                break
            widen_next = True      # the hot parts alone gave nothing: one more pass over all parts
            continue
        widen_next = False
        if passes >= max_passes:
            stopped = 2
    return passes, kept_total, tried_total, stopped
