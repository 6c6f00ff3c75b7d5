"""Apply a move to the exact state, and roll moves back.

One move of vertex u from part a to part b updates, in O(deg u + λ_u): the pin
counts of u's nets (:mod:`.slots`), λ_j, the k×k volume matrix vol[q, r]
(rows of H sent q → r), send/recv per part (rows of H), the send/recv
message counts, tot = [total volume (rows of H), messages], and the loads
(balance weight). Rolling back is moving again, to the recorded source part,
newest move first.
"""
from __future__ import annotations

import numpy as np

from .jit import njit, njit_inline, njit_rc_free
from .records import ApplyScratch
from .slots import _dec, _inc, _parts_of


@njit_inline
def _addvol(q, r, d, V):
    """vol[q, r] += d (d = ±1 rows of H) in the :class:`VolumeState` V; returns the
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


@njit_rc_free
def roll_back(moved_vertex, source_part, nmoves, keep, T, P, V, A, own_crit):
    """Undo the moves ``keep .. nmoves - 1`` of a pass, newest first: vertex
    moved_vertex[i] goes back to source_part[i] (:func:`apply_move`; the state V and
    the pin counts P exact again, A overwritten). Returns ``keep`` (the moves left)."""
    for i in range(nmoves - 1, keep - 1, -1):
        apply_move(moved_vertex[i], source_part[i], T, P, V, A, own_crit)
    return keep
