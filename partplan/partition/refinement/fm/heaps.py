"""The priority structures of an FM pass: one indexed max-heap per part, and the waiting lists.

:class:`PartHeaps`: part p's heap lives in heap[hoff[p] : hoff[p] + hsz[p]]
(vertex ids), keyed by hkey[u] (the gain of u's best move, dimensionless);
pos[u] is u's local index in its part's heap (-1: not in a heap).
:class:`Waiting`: per part a linked list of the vertices whose best move into
it was refused by the balance cap (looked at again when the part gets room).
"""
from __future__ import annotations

from .jit import njit_rc_free


@njit_rc_free
def _hswap(heap, pos, base, i, j):
    """Swap the entries at local indices i and j of the heap starting at ``base``."""
    a = heap[base + i]
    b = heap[base + j]
    heap[base + i] = b
    heap[base + j] = a
    pos[b] = i
    pos[a] = j


@njit_rc_free
def _hup(heap, hkey, pos, base, i):
    """Sift the entry at local index i up while its key beats its parent's."""
    while i > 0:
        par = (i - 1) >> 1
        if hkey[heap[base + i]] > hkey[heap[base + par]]:
            _hswap(heap, pos, base, i, par)
            i = par
        else:
            break


@njit_rc_free
def _hdown(heap, hkey, pos, base, size, i):
    """Sift the entry at local index i down (heap of ``size`` entries)."""
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
