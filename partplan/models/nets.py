"""Net-array utilities shared by the hypergraph models (vectorized numpy).

:func:`merge_identical_nets` collapses nets with the same pin *set* into one
net whose weight is the sum of their weights (the stochastic model samples the
same neighbourhood many times). Grouping uses two independent order-free
64-bit set hashes (sum of splitmix64 of the pins) plus the net size, then an
exact pin-by-pin check against each group's representative; the (practically
never taken) collision path regroups the offending groups exactly.
"""
from __future__ import annotations

import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def splitmix64(x: np.ndarray, salt: int = 0) -> np.ndarray:
    """uint64 splitmix64 finalizer of ``x + salt`` (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = np.asarray(x, dtype=np.int64).view(np.uint64) + np.uint64(salt) * _GOLDEN + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def net_of_pin(net_ptr: np.ndarray) -> np.ndarray:
    """int64[pins]: the net of every pin."""
    return np.repeat(np.arange(net_ptr.size - 1, dtype=np.int64), np.diff(net_ptr))


def sort_pins(net_ptr: np.ndarray, pins: np.ndarray) -> np.ndarray:
    """Pins sorted within each net (net order kept)."""
    order = np.lexsort((pins, net_of_pin(net_ptr)))
    return pins[order]


def merge_identical_nets(net_ptr: np.ndarray, pins: np.ndarray, weights: np.ndarray | None = None
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Merge nets with identical pin sets; pins within a net must be distinct.

    Returns (net_ptr, pins, weights) of the merged nets (pins sorted within
    each net, nets in order of first appearance); the weight of a merged net
    is the sum of the weights (default 1) of the nets it replaces, so the
    weights always sum to the input total.

    >>> ptr, pins, w = merge_identical_nets(np.array([0, 2, 4, 5]), np.array([3, 1, 1, 3, 2]))
    >>> ptr.tolist(), pins.tolist(), w.tolist()
    ([0, 2, 3], [1, 3, 2], [2, 1])
    """
    net_ptr = np.asarray(net_ptr, dtype=np.int64)
    pins = np.asarray(pins, dtype=np.int64)
    m = net_ptr.size - 1
    w = np.ones(m, dtype=np.int64) if weights is None else np.asarray(weights, dtype=np.int64)
    if m == 0:
        return net_ptr.copy(), pins.copy(), w.copy()
    sizes = np.diff(net_ptr)
    nop = net_of_pin(net_ptr)
    spins = sort_pins(net_ptr, pins)
    h1 = np.zeros(m, dtype=np.uint64)
    h2 = np.zeros(m, dtype=np.uint64)
    nonempty = sizes > 0
    if pins.size:
        starts = net_ptr[:-1][nonempty]
        h1[nonempty] = np.add.reduceat(splitmix64(spins, 1), starts)
        h2[nonempty] = np.add.reduceat(splitmix64(spins, 2), starts)
    order = np.lexsort((np.arange(m), h2, h1, sizes))
    s_sz, s_h1, s_h2 = sizes[order], h1[order], h2[order]
    new = np.ones(m, dtype=bool)
    new[1:] = (s_sz[1:] != s_sz[:-1]) | (s_h1[1:] != s_h1[:-1]) | (s_h2[1:] != s_h2[:-1])
    gid_sorted = np.cumsum(new) - 1
    group = np.empty(m, dtype=np.int64)
    group[order] = gid_sorted
    rep_sorted = order[np.flatnonzero(new)]          # smallest net id of each group (stable lexsort)
    rep = rep_sorted[group]                            # representative of each net
    # exact check: pin t of net e == pin t of rep[e]
    pos = np.arange(pins.size, dtype=np.int64) - net_ptr[nop]
    bad_pin = spins != spins[net_ptr[rep[nop]] + pos]
    if np.any(bad_pin):                                # hash collision: regroup those groups exactly
        bad_groups = np.unique(group[nop[bad_pin]])
        next_gid = int(group.max()) + 1
        for g in bad_groups.tolist():
            members = np.flatnonzero(group == g)
            seen: dict[tuple, int] = {}
            for e in members.tolist():
                key = tuple(spins[net_ptr[e]:net_ptr[e + 1]].tolist())
                if key not in seen:
                    seen[key] = next_gid
                    next_gid += 1
                group[e] = seen[key]
    # renumber groups by first appearance
    uniq, first = np.unique(group, return_index=True)
    first_order = np.argsort(first, kind="stable")
    renum = np.empty(uniq.size, dtype=np.int64)
    renum[first_order] = np.arange(uniq.size)
    gnew = renum[np.searchsorted(uniq, group)]
    reps = first[first_order]
    out_w = np.bincount(gnew, weights=w, minlength=uniq.size).astype(np.int64)
    out_sizes = sizes[reps]
    out_ptr = np.concatenate([[0], np.cumsum(out_sizes)]).astype(np.int64)
    take = np.repeat(net_ptr[reps], out_sizes) + (np.arange(out_ptr[-1]) - np.repeat(out_ptr[:-1], out_sizes))
    return out_ptr, spins[take], out_w
