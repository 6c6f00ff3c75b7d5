"""½-approximate maximum weight matching by locally dominant edges on the
symmetrized graph of a plan.

Edges are the symmetrized neighbour pairs (:class:`~.neighbours.SymGraph`,
self loops ignored) with weight = the matrix value (1 on an unweighted plan);
edges of weight ≤ 0 are never matched. They are ordered strictly: weight
descending, then min(u, v), then max(u, v). Every unmatched vertex points at
its first still-available neighbour in that order; two vertices pointing at
each other match (their edge dominates every edge at either end). Since the
order is strict, the result is unique and equals the greedy matching that
scans the edges in that order — at least half the maximum weight.

A round: the pointers that changed go to ghost holders (the plan's exchange,
sparse or dense per pair; value = the neighbour's global id, −2 once matched,
−1 when it has nobody left); every unmatched owner whose target points back
matches; every one whose target was matched moves on to its next available
neighbour (scanning on from the matched one: the edges before it were
taken already, so a round's work is the edges scanned, not the whole graph).
It stops when no pointer changes. ``bytes_all_values`` in each
record is what sending every pointer along the same pairs would cost.
"""
from __future__ import annotations

import time

import numpy as np

from . import kernels as KT
from .kernels import community as C
from .neighbours import exchange_values, sym_graphs
from .traversal import check_layout, world_sum

MATCHED = -2   # a vertex's exchanged value once it is matched
NOBODY = -1    # an unmatched vertex with no available neighbour


def _by_family(fams: list[str], v: np.ndarray) -> dict:
    F = len(fams)
    return {"bytes_by_family": {f: int(v[k]) for k, f in enumerate(fams)},
            "messages_by_family": {f: int(v[F + k]) for k, f in enumerate(fams)}}


def _ptr(X, first, gid):
    """Global id of each row's first available neighbour (−1 none)."""
    safe = X.where(first < 0, 0 * first, first)
    return X.where(first < 0, first, gid[safe]) if int(gid.shape[0]) else first


def matching_parts(manifest: dict, shards, comm, *, progress=None, kernels: str = "auto"):
    """Matching: (ids per local rank, int64 mate per local rank — −1 unmatched,
    numpy —, the matched weight as float64 (each edge once), round records).
    ``kernels`` as in :func:`~.analytics.wcc_parts`."""
    check_layout(manifest, "analytics")
    X = KT.for_comm(kernels, comm)
    sgs, fams = sym_graphs(manifest, shards)
    ids = [s.ids for s in sgs]
    order = []
    for s in sgs:  # per row: weight descending, then min(u, v), then max(u, v)
        u = s.ids[s.rows]
        order.append(np.lexsort((np.maximum(u, s.gid), np.minimum(u, s.gid), -s.w, s.rows)))
    keep = [o[s.w[o] > 0] for o, s in zip(order, sgs)]
    rows = [X.asarray(s.rows[k], "int64") for s, k in zip(sgs, keep)]
    cols = [X.asarray(s.cols[k], "int64") for s, k in zip(sgs, keep)]
    gid = [X.asarray(s.gid[k], "int64") for s, k in zip(sgs, keep)]
    wts = [X.asarray(s.w[k], "float64") for s, k in zip(sgs, keep)]
    idx = [X.asarray(i, "int64") for i in ids]
    indptr = [X.asarray(np.concatenate([[0], np.cumsum(np.bincount(s.rows[k], minlength=s.nl))]), "int64")
              for s, k in zip(sgs, keep)]
    ext = [X.full(s.next_, NOBODY, "int64") for s in sgs]
    first = [C.first_available(X, rows[i], X.full(int(rows[i].shape[0]), True, "bool"), s.nl)
             for i, s in enumerate(sgs)]
    st = [_ptr(X, first[i], gid[i]) for i in range(len(sgs))]
    mate = [X.full(s.nl, NOBODY, "int64") for s in sgs]
    changed = [a != NOBODY for a in st]
    full = int(world_sum(comm, [np.array([float(s.full_value_bytes(8))]) for s in sgs])[0])
    records, rnd = [], 0
    while True:
        t0 = time.perf_counter()
        sent0 = int(comm.sent_bytes.sum())
        nb = exchange_values(comm, sgs, changed, st, ext, fams, what=f"matching round {rnd}", X=X)
        new = []
        for i in range(len(sgs)):
            f = first[i]
            has = f >= 0
            if int(cols[i].shape[0]):                  # the target's value as of this round
                tv = X.where(has, ext[i][cols[i][X.where(has, f, 0 * f)]], f)
            else:
                tv = f
            free = st[i] >= 0                          # unmatched and pointing somewhere
            mutual = free & (tv == idx[i])
            mate[i] = X.where(mutual, st[i], mate[i])
            # a target matched elsewhere: move on from it (edges before it were taken already)
            sel = X.flatnonzero(free & ~mutual & (tv == MATCHED))
            f = X.copy(f)
            f[sel] = C.next_available(X, indptr[i], cols[i], ext[i], sel, f[sel], MATCHED)
            first[i] = f
            ptr = _ptr(X, f, gid[i])
            nst = X.where(mutual, X.full(sgs[i].nl, MATCHED, "int64"), X.where(free, ptr, st[i]))
            new.append(nst)
        changed = [a != b for a, b in zip(new, st)]
        st = new
        meas = int(comm.sent_bytes.sum()) - sent0
        tot = world_sum(comm, [np.concatenate([[float(c.sum()), meas if i == 0 else 0], nb if i == 0 else 0 * nb])
                               for i, c in enumerate(changed)])
        records.append({"round": rnd, "changed": int(tot[0]), "bytes": int(tot[2]), "bytes_measured": int(tot[1]),
                        "bytes_sparse": int(tot[3]), "bytes_dense": int(tot[4]), "bytes_all_values": full,
                        **_by_family(fams, tot[5:]), "time_s": time.perf_counter() - t0})
        if progress:
            progress(f"round {rnd}: {int(tot[0])} pointers changed")
        rnd += 1
        if tot[0] == 0:
            break
    # the weight of each matched own vertex's edge (its first available neighbour stayed its mate)
    wsum = []
    for i in range(len(sgs)):
        m = mate[i]
        sel = X.flatnonzero(m >= 0)
        e = _edge_of(X, rows[i], gid[i], sgs[i].nl, sel, m[sel])
        wsum.append(np.array([float(X.host(wts[i][e]).sum()) if int(e.shape[0]) else 0.0]))
    weight = float(world_sum(comm, wsum)[0]) / 2.0
    return ids, [X.host(v) for v in mate], weight, records


def _edge_of(X, rows, gid, nl: int, sel, mates):
    """Edge positions of the pairs (own row sel[k], neighbour mates[k])."""
    want = X.full(nl, -3, "int64")
    want[sel] = mates
    return X.flatnonzero(want[rows] == gid)
