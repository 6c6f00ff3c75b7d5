"""Sparse pin counts per net (memory O(pins)).

Net j (column j of A plus j) gets ``cap_j = min(|pins_j|, k)`` slots at
``soff[j]``. When ``|pins_j| >= k`` the slots are a dense row indexed by part
(O(1) lookup, k <= |pins_j| cells); otherwise they hold the λ_j
(part, count) pairs of the net, unsorted (lookup scans λ_j < k entries).
Counts are pins (vertices); λ_j is the number of parts net j touches.
"""
from __future__ import annotations

from .jit import njit_inline, njit_rc_free


@njit_inline
def _cnt(j, p, soff, lam, dense, spart, scnt):
    """Pins of net j in part p."""
    b = soff[j]
    if dense[j]:
        return scnt[b + p]
    for s in range(b, b + lam[j]):
        if spart[s] == p:
            return scnt[s]
    return 0


@njit_inline
def _inc(j, p, soff, lam, dense, spart, scnt):
    """One more pin of net j in part p (λ_j grows when it is the first); returns its new count."""
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
    """One pin fewer of net j in part p (λ_j shrinks when it was the last); returns its new
    count (-1: p held no pin of a sparse net)."""
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
