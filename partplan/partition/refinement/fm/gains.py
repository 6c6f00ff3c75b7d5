"""Evaluate moves: the best target part of a vertex and the gain of moving it there.

A move of vertex u from part a to part b changes volumes only on u's nets:
a net left without a pin in a stops being sent to a (its sender part[j] sends
one row of H less), a net with a first pin in b is sent to b, and u's own net
changes its sender from a to b. :func:`_best1` finds these events once per
vertex (:func:`_scan_nets`), then per candidate target (:func:`_candidates`)
adds them up (:func:`_move_deltas`, rows of H and messages per part) and
prices them (:func:`_score_target`: ΔΦ, and whether an overloading move pays
for itself on the bottleneck). The records are those of :mod:`.records`.
"""
from __future__ import annotations

import numpy as np

from .costs import _cost, _phi
from .jit import njit_inline, njit_rc_free
from .slots import _cnt, _parts_of


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


@njit_inline
def _sort_targets(nt_c, max_targets, tbuf, tcnt):
    """Keep the max_targets candidates with the most pins of u's net (ties: lower part id) at
    tbuf[:max_targets] (partial selection sort); returns the number kept."""
    if nt_c > max_targets:
        for i in range(max_targets):
            bi = i
            for t in range(i + 1, nt_c):
                if tcnt[t] > tcnt[bi] or (tcnt[t] == tcnt[bi] and tbuf[t] < tbuf[bi]):
                    bi = t
            tbuf[i], tbuf[bi] = tbuf[bi], tbuf[i]
            tcnt[i], tcnt[bi] = tcnt[bi], tcnt[i]
        nt_c = max_targets
    return nt_c


@njit_inline
def _candidates(u, a, only, m, P, max_targets, X, F):
    """The target parts tried for vertex u of part a, into X.tbuf; returns their number (0:
    none). ``only`` >= 0: that part alone. Else the parts of u's own net (X.buf[:m]) where
    a or the part is hot, the max_targets with the most pins of the net, plus the sinks
    F.sink (adjacent or not: a vertex can leave a full part whose best-connected
    neighbours are full too)."""
    soff, lam, dense, spart, scnt = P
    buf, tbuf, tcnt = X.buf, X.tbuf, X.tcnt
    hot, sink = F.hot, F.sink
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
        return 0
    nt_c = _sort_targets(nt_c, max_targets, tbuf, tcnt)
    if only < 0:
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
    return nt_c


@njit_inline
def _scan_nets(u, a, nt_c, T, P, V, X):
    """One scan of u's nets (u in part a), independent of the target: the sender parts of the
    nets u is the last pin in a of (leave events, X.leave[:nl]) and, per net, a bitmask of
    the candidate targets X.tbuf[:nt_c] it already holds (X.emask[:ne]; -1 for u's own
    net, handled apart). Returns (nl, ne)."""
    vptr, vidx = T.vptr, T.vidx
    soff, lam, dense, spart, scnt = P
    part = V.part
    tbuf, leave, tpos, emask = X.tbuf, X.leave, X.tpos, X.emask
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
    return nl, ne


@njit_inline
def _message_deltas(k, vol, X):
    """Objective "weighted": the message-count deltas X.dsm/X.drm per part of the pair
    deltas X.dvol (rows of H q → r) of a move; clears X.dvol."""
    dvol, pairs, npairs, dsm, drm = X.dvol, X.pairs, X.npairs, X.dsm, X.drm
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


@njit_inline
def _move_deltas(u, a, b, t, nl, ne, m, ca_own, T, V, obj, X):
    """The volume changes of moving u from a to b = X.tbuf[t] into X (dS/dR rows of H per
    part, dsm/drm messages for "weighted"; the touched parts X.tl), from the leave events
    and net masks of :func:`_scan_nets`, the m parts of u's own net (X.buf) and ca_own (pins
    of u's own net in a). Returns (touched parts, Δ total volume in rows of H)."""
    vptr, vidx = T.vptr, T.vidx
    part, vol = V.part, V.vol
    leave, emask, buf, npairs = X.leave, X.emask, X.buf, X.npairs
    k = vol.shape[0]
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
        _message_deltas(k, vol, X)
    return nt, dtv


@njit_inline
def _score_target(nt, over, M, C, cost_cap, inv, V, X, F):
    """Price the deltas of :func:`_move_deltas` on the nt touched parts (and clear them):
    returns (ΔΦ, parts lowered from the max M, a part reaches M, a part's cost rises above
    cost_cap). Lowered/reach are counted for an overloading move (``over``) only."""
    obj, alpha, brb, q = C.obj, C.alpha, C.brb, C.q
    send, recv, smsg, rmsg = V.send, V.recv, V.smsg, V.rmsg
    dS, dR, dsm, drm, mark, tl = X.dS, X.dR, X.dsm, X.drm, X.mark, X.tl
    phic = F.phic
    tolM = 1e-9 * max(1.0, M)
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
    return dphi, lowered, reach, capped


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
    ("total": −Δtv − 10⁻³·ΔΦ; dimensionless). blk gets a better target refused
    by the balance cap (or -1)."""
    w, w2 = T.w, T.w2
    soff, lam, dense, spart, scnt = P
    part, load, load2 = V.part, V.load, V.load2
    obj, mu = C.obj, C.mu
    cap, cap_hard, vlimit, cost_cap, cap2 = L.cap, L.cap_hard, L.vlimit_hard, L.cost_cap, L.cap2
    inv, M, nmax, relax, tv = cur
    buf, tbuf = X.buf, X.tbuf
    k = V.vol.shape[0]
    a = part[u]
    blk = -1
    m = _parts_of(u, k, soff, lam, dense, spart, scnt, buf)
    nt_c = _candidates(u, a, only, m, P, L.max_targets, X, F)
    if nt_c == 0:          # no target (none hot, no sink): skip the scan of u's nets
        return -np.inf, -1, -1
    nl, ne = _scan_nets(u, a, nt_c, T, P, V, X)
    ca_own = _cnt(u, a, soff, lam, dense, spart, scnt)
    best_g = -np.inf
    best_b = -1
    best_blocked_g = -np.inf
    for t in range(nt_c):
        b = tbuf[t]
        over = load[b] + w[u] > cap or load2[b] + w2[u] > cap2
        nt, dtv = _move_deltas(u, a, b, t, nl, ne, m, ca_own, T, V, obj, X)
        dphi, lowered, reach, capped = _score_target(nt, over, M, C, cost_cap, inv, V, X, F)
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
