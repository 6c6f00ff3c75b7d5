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
It stops when no pointer changes.

2D plans: the states expand along the grid column (both programs' for a
directed graph; the partial rows are the symmetrized union of the rank's two
blocks, :func:`~.fold.sym_blocks`); every
partial row keeps its first available edge of the block (scanning on when
its target is matched) and sends it when it moved — (row id, neighbour id,
weight) triples, 24 bytes, along the grid row to the row's owner (family
``row``, ``bytes_candidates``), which keeps each grid-row peer's latest
candidate and points at the best of them; a pointer's mutual check asks the
target's owner for its pointer of the same round (8 bytes each way, family
``world``, ``bytes_requests``). ``bytes_all_values`` in each
record is what sending every pointer along the same pairs would cost.
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import PlanError
from . import kernels as KT
from .kernels import community as C
from .neighbours import exchange_values, sym_graphs
from .traversal import check_layout, world_sum

MATCHED = -2   # a vertex's exchanged value once it is matched
NOBODY = -1    # an unmatched vertex with no available neighbour




def _matched_weight(comm, halves: list) -> float:
    """The matched weight from each local rank's sum of its matched edges' halves (each edge is
    seen from both ends: no overflow of 2 w); every rank stops with the same PlanError when it
    passes float64's range (the matching itself is exact, its weight has no float64 value)."""
    with np.errstate(over="ignore"):
        weight = float(world_sum(comm, halves)[0])
    if not np.isfinite(weight):
        raise PlanError(f"matching: the matched edges' weights sum past float64's largest finite value "
                        f"{np.finfo(np.float64).max:.4g}, so the matched weight has no float64 value; scale the "
                        f"weights down")
    return weight


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
    ``kernels`` as in :func:`~.analytics.wcc_parts`. A 2D plan needs a ``world`` group in the comm (:func:`~.neighbours.with_world`)."""
    if check_layout(manifest, "analytics", job="matching").fold:
        return _matching_2d(manifest, shards, comm, progress=progress, kernels=kernels)
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
        with np.errstate(over="ignore"):     # an overflow is _matched_weight's finding, not a warning
            wsum.append(np.array([float((X.host(wts[i][e]) / 2.0).sum()) if int(e.shape[0]) else 0.0]))
    weight = _matched_weight(comm, wsum)
    return ids, [X.host(v) for v in mate], weight, records


def _edge_of(X, rows, gid, nl: int, sel, mates):
    """Edge positions of the pairs (own row sel[k], neighbour mates[k])."""
    want = X.full(nl, -3, "int64")
    want[sel] = mates
    return X.flatnonzero(want[rows] == gid)


def _matching_2d(manifest: dict, shards, comm, *, progress, kernels):
    """:func:`matching_parts` on a 2D plan: partial candidates fold to the row's owner, mutual checks by request."""
    from .fold import sym_blocks
    from .neighbours import owner_map, reply, send_rows, to_owners
    from .pointer_jump import check_world
    check_world(comm)
    X = KT.for_comm(kernels, comm)
    n = int(manifest["graph"]["n"])
    sbs, fams = sym_blocks(manifest, shards)
    ids = [s.ids for s in sbs]
    fam_f = sbs[0].fold_family
    fams = list(dict.fromkeys(fams + ["world"]))
    own = X.asarray(owner_map(comm, ids, n), "int64")
    B = []  # per rank: block edges sorted by (row, order), row ranges, fold targets, owner table
    for sb, i, rank in zip(sbs, ids, comm.local):
        r, c, w, gc = sb.rows, sb.cols, sb.w, sb.gid
        gr = sb.row_ids[r]
        keep = w > 0
        r, c, w, gr, gc = r[keep], c[keep], w[keep], gr[keep], gc[keep]
        o = np.lexsort((np.maximum(gr, gc), np.minimum(gr, gc), -w, r))
        r, c, w, gc = r[o], c[o], w[o], gc[o]
        indptr = np.concatenate([[0], np.cumsum(np.bincount(r, minlength=sb.nrows))]).astype(np.int64)
        g = comm.member(fam_f, rank)
        me = g.ranks.index(rank) if g is not None else 0
        d = np.where(sb.own_pos >= 0, me, sb.dest)
        o2 = np.argsort(i, kind="stable")
        ncol = len(g.ranks) if g is not None else 1
        B.append({"rows": X.asarray(r, "int64"), "cols": X.asarray(c, "int64"), "w": X.asarray(w, "float64"),
                  "gid": X.asarray(gc, "int64"), "indptr": X.asarray(indptr, "int64"),
                  "rid": X.asarray(sb.row_ids, "int64"), "dest": X.asarray(d, "int64"),
                  "me": me, "ncol": ncol, "srt": X.asarray(o2, "int64"), "sids": X.asarray(i[o2], "int64"),
                  "first": X.asarray(np.where(np.diff(indptr) > 0, indptr[:-1], -1), "int64"),
                  "ext": X.full(sb.next_, NOBODY, "int64"),
                  # the owner's table: per own row and grid-row peer, that peer's candidate (weight, neighbour)
                  "tw": X.full(sb.nl * ncol, -np.inf, "float64"), "tu": X.full(sb.nl * ncol, -1, "int64")})
    st = [X.full(i.size, NOBODY, "int64") for i in ids]
    mate = [X.full(i.size, NOBODY, "int64") for i in ids]
    mw = [X.zeros(i.size, "float64") for i in ids]  # the matched edge's weight
    idx = [X.asarray(i, "int64") for i in ids]
    changed = [X.zeros(i.size, "bool") for i in ids]
    moved = [X.full(sb.nrows, True, "bool") for sb in sbs]  # partial candidates to (re)send
    full = int(world_sum(comm, [np.array([float(sb.full_value_bytes(8))]) for sb in sbs])[0])
    records, rnd = [], 0
    while True:
        t0 = time.perf_counter()
        sent0 = int(comm.sent_bytes.sum())
        nb = exchange_values(comm, sbs, changed, st, [b["ext"] for b in B], fams, what=f"matching round {rnd}", X=X)
        trip, dst = [], []
        for i, sb in enumerate(sbs):
            b = B[i]
            e = b["ext"]
            f = b["first"]
            has = f >= 0
            tv = X.where(has, e[b["cols"][X.where(has, f, 0 * f)]], f) if int(b["cols"].shape[0]) else f
            sel = X.flatnonzero(has & (tv == MATCHED))
            f = X.copy(f)
            f[sel] = C.next_available(X, b["indptr"], b["cols"], e, sel, f[sel], MATCHED)
            b["first"] = f
            mv = moved[i]
            mv[sel] = True
            rows_m = X.flatnonzero(mv)
            fm = f[rows_m]
            ok = fm >= 0
            safe = X.where(ok, fm, 0 * fm)
            wv = X.where(ok, b["w"][safe] if int(b["w"].shape[0]) else 0.0 * fm, X.full(int(fm.shape[0]), -np.inf,
                                                                                     "float64"))
            uv = X.where(ok, b["gid"][safe] if int(b["gid"].shape[0]) else fm, X.full(int(fm.shape[0]), -1, "int64"))
            trip.append(_stack3(X, b["rid"][rows_m], uv, wv))
            dst.append(b["dest"][rows_m])
            moved[i] = X.zeros(sb.nrows, "bool")
        recv, croutes, (fb, fmsg) = send_rows(comm, fam_f, dst, trip, what=f"matching round {rnd}, candidates")
        for i in range(len(sbs)):  # the owner updates its table and picks the best candidate of each row
            b, t, rt = B[i], recv[i], croutes[i]
            src = X.asarray(np.concatenate([np.full(rt.nself, rt.me, dtype=np.int64),
                                            np.repeat(np.arange(rt.recv.size, dtype=np.int64), rt.recv)]), "int64")
            pr = C.positions(X, b["sids"], b["srt"], t[:, 0])
            slot = pr * b["ncol"] + src
            b["tu"][slot] = t[:, 1]
            b["tw"][slot] = _as_f64(X, t[:, 2])
        new_ptr, new_w = [], []
        for i in range(len(sbs)):
            b = B[i]
            bu, bw = _best(X, b["tw"], b["tu"], idx[i], b["ncol"])
            new_ptr.append(X.where(st[i] == MATCHED, st[i], bu))
            new_w.append(bw)
        # mutual check: ask the owner of each target for its pointer of this round
        ask, askpos = [], []
        for i in range(len(sbs)):
            sel = X.flatnonzero(new_ptr[i] >= 0)
            askpos.append(sel)
            ask.append(new_ptr[i][sel].reshape(-1, 1))
        rq, routes, (qb, qm) = to_owners(comm, own, ask, what=f"matching round {rnd}, mutual check")
        ans = [new_ptr[i][C.positions(X, B[i]["sids"], B[i]["srt"], rq[i][:, 0])] for i in range(len(sbs))]
        back, (rb, rm) = reply(comm, routes, ans, what=f"matching round {rnd}, mutual check")
        new = []
        for i in range(len(sbs)):
            sel = askpos[i]
            mutual = back[i] == idx[i][sel]
            msel = sel[mutual]
            mate[i][msel] = new_ptr[i][msel]
            mw[i][msel] = new_w[i][msel]
            nst = X.copy(new_ptr[i])
            nst[msel] = MATCHED
            new.append(nst)
        changed = [a != b for a, b in zip(new, st)]
        st = new
        meas = int(comm.sent_bytes.sum()) - sent0
        kf, kw, F = fams.index(fam_f), fams.index("world"), len(fams)
        nb[0] += fb + qb + rb
        nb[3 + kf] += fb
        nb[3 + F + kf] += fmsg
        nb[3 + kw] += qb + rb
        nb[3 + F + kw] += qm + rm
        tot = world_sum(comm, [np.concatenate([[float(c.sum()), meas if i == 0 else 0, fb if i == 0 else 0,
                                                (qb + rb) if i == 0 else 0], nb if i == 0 else 0 * nb])
                               for i, c in enumerate(changed)])
        records.append({"round": rnd, "changed": int(tot[0]), "bytes": int(tot[4]), "bytes_measured": int(tot[1]),
                        "bytes_candidates": int(tot[2]), "bytes_requests": int(tot[3]),
                        "bytes_sparse": int(tot[5]), "bytes_dense": int(tot[6]), "bytes_all_values": full,
                        **_by_family(fams, tot[7:]), "time_s": time.perf_counter() - t0})
        if progress:
            progress(f"round {rnd}: {int(tot[0])} pointers changed")
        rnd += 1
        if tot[0] == 0:
            break
    with np.errstate(over="ignore"):         # an overflow is _matched_weight's finding, not a warning
        wsum = [np.array([float((X.host(v) / 2.0).sum())]) for v in mw]
    weight = _matched_weight(comm, wsum)
    return ids, [X.host(v) for v in mate], weight, records


def _lt(X, a, b):
    return X.where(a < b, a, b)


def _best(X, tw, tu, v, ncol: int):
    """Per own row v, the best candidate (neighbour id, weight) of the table
    (rows × ``ncol`` entries; neighbour −1: none) in the strict order: weight
    descending, then min(v, u), then max(v, u). (−1, −inf) when none."""
    nl = int(v.shape[0])
    bu = X.full(nl, -1, "int64")
    bw = X.full(nl, -np.inf, "float64")
    for j in range(ncol):  # a loop over the grid row's ranks
        u, w = tu[j::ncol], tw[j::ncol]
        mn, mx = _lt(X, v, u), v + u - _lt(X, v, u)
        bmn, bmx = _lt(X, v, bu), v + bu - _lt(X, v, bu)
        tie = (w == bw) & ((mn < bmn) | ((mn == bmn) & (mx < bmx)))
        better = (u >= 0) & ((bu < 0) | (w > bw) | tie)
        bu = X.where(better, u, bu)
        bw = X.where(better, w, bw)
    return bu, bw


def _stack3(X, a, b, s):
    """(m, 3) int64 rows (a, b, float64 bits of s)."""
    if X.name == "torch":
        import torch
        return torch.stack([a, b, s.to(torch.float64).contiguous().view(torch.int64)], 1)
    return np.stack([a, b, np.ascontiguousarray(s, dtype=np.float64).view(np.int64)], 1)


def _as_f64(X, a):
    """The float64 values whose bits are the int64 ``a``."""
    if X.name == "torch":
        import torch
        return a.contiguous().view(torch.float64)
    return np.ascontiguousarray(a).view(np.float64)
