"""Costs of a state: per-part cost, the potential Φ, the best-state order, sinks.

cost_p by objective (:data:`.records.OBJ_CODES`): "max-send" send_p,
"max-recv" recv_p, "max-both" and "total" max(send_p, recv_p) (rows of H),
"weighted" α·max(send msgs, recv msgs) + β·bytes·max(send_p, recv_p)
(seconds). Φ = Σ_p φ(part p) with φ = (cost / scale)^q (max-both: the send
and recv terms apart), a smooth maximum; ``inv`` = 1 / scale.
"""
from __future__ import annotations

from .jit import njit_inline, njit_rc_free


@njit_inline
def _cost(obj, S, R, sm, rm, alpha, brb):
    """Cost of one part: S/R rows of H sent/received, sm/rm messages; alpha s per message,
    brb s per row of H (objective "weighted", seconds; else rows of H)."""
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
    """One part's term of Φ (dimensionless): its cost(s) times inv, to the power q."""
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
    """phic[p] = part p's term of Φ, for every part."""
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
