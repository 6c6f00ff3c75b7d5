"""Synchronous label propagation on the symmetrized graph of a plan (1D,
routed and 2D plans).

Labels start as the vertex ids. In every iteration each vertex with at least
one neighbour (:class:`~.neighbours.SymGraph`: in- and out-neighbours, each
once, self loops ignored) takes the label that is most frequent among its
neighbours' labels of the previous iteration — or, ``weighted``, the label
whose neighbours' edge weights sum highest (sums within
:data:`~.kernels.community.TIE_RTOL` of the largest tie, whatever the
summation order, for weights of one sign) —, ties to the smallest label;
vertices without neighbours keep theirs. It stops after ``iterations`` or at
the first iteration that changes nothing.

1D and routed plans: the owner of v counts its neighbours' labels itself,
from its own rows and the ghosts' labels; an iteration sends only the labels
that changed in the previous one (the active-vertex queue, sparse or dense per
(rank, peer) pair, :func:`~.neighbours.exchange_values`). Each record also
gives ``bytes_all_values``: what sending every label (8 bytes, no positions)
along the same pairs would cost.

2D plans: the changed labels expand along the grid column (along both
programs' for a directed graph: the union of a rank's two blocks is its
symmetrized partial rows, :func:`~.fold.sym_blocks`); each rank counts the
labels of its partial rows (row, label, count) and sends
the counts of rows owned elsewhere in its grid row to their owner (24 bytes a
triple: row id, label, count as float64 — family ``row``), which sums the
partial counts and picks the mode: the seed's 2.5D reduction at the row-group
owner; the next expand broadcasts the new labels. A record's ``bytes`` is the
expand plus these triples (``bytes_counts``).
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import PlanError
from . import kernels as KT
from .kernels import community as C
from .neighbours import exchange_values, send_rows, sym_graphs
from .traversal import check_layout, world_sum


def _by_family(fams: list[str], v: np.ndarray) -> dict:
    F = len(fams)
    return {"bytes_by_family": {f: int(v[k]) for k, f in enumerate(fams)},
            "messages_by_family": {f: int(v[F + k]) for k, f in enumerate(fams)}}


def lp_parts(manifest: dict, shards, comm, *, iterations: int = 20, weighted: bool = False, progress=None,
             kernels: str = "auto"):
    """Label propagation: (ids per local rank, int64 labels per local rank —
    numpy —, iteration records). ``iterations`` ≥ 1 is the limit; ``weighted``
    sums edge weights (the plan's values; 1 when it has none) instead of
    counting neighbours. ``kernels`` as in :func:`~.analytics.wcc_parts`."""
    lay = check_layout(manifest, "analytics", job="label propagation")
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 1:
        raise PlanError(f"iterations must be an integer >= 1, got {iterations!r}")
    if lay.fold:
        return _lp_2d(manifest, shards, comm, iterations=iterations, weighted=weighted, progress=progress,
                      kernels=kernels)
    X = KT.for_comm(kernels, comm)
    sgs, fams = sym_graphs(manifest, shards)
    _check_weight_sum(comm, sgs, weighted)
    ids = [s.ids for s in sgs]
    rows = [X.asarray(s.rows, "int64") for s in sgs]
    cols = [X.asarray(s.cols, "int64") for s in sgs]
    w = [X.asarray(s.w if weighted else np.ones(s.w.size), "float64") for s in sgs]
    lab = [X.copy(X.asarray(i, "int64")) for i in ids]
    ext = [X.asarray(s.ext_ids, "int64") for s in sgs]  # labels = ids at the start: ghost holders know them
    changed = [X.zeros(s.nl, "bool") for s in sgs]
    full = int(world_sum(comm, [np.array([float(s.full_value_bytes(8))]) for s in sgs])[0])
    records = []
    for it in range(1, int(iterations) + 1):
        t0 = time.perf_counter()
        sent0 = int(comm.sent_bytes.sum())
        nb = exchange_values(comm, sgs, changed, lab, ext, fams, what=f"LP iteration {it}", X=X)
        new = [C.mode_label(X, rows[i], ext[i][cols[i]], w[i], lab[i]) for i in range(len(sgs))]
        changed = [a != b for a, b in zip(new, lab)]
        lab = new
        meas = int(comm.sent_bytes.sum()) - sent0
        tot = world_sum(comm, [np.concatenate([[float(c.sum()), meas if i == 0 else 0], nb if i == 0 else 0 * nb])
                               for i, c in enumerate(changed)])
        records.append({"iteration": it, "changed": int(tot[0]), "bytes": int(tot[2]), "bytes_measured": int(tot[1]),
                        "bytes_sparse": int(tot[3]), "bytes_dense": int(tot[4]), "bytes_all_values": full,
                        **_by_family(fams, tot[5:]), "time_s": time.perf_counter() - t0})
        if progress:
            progress(f"iteration {it}: {int(tot[0])} labels changed")
        if tot[0] == 0:
            break
    return ids, [X.host(v) for v in lab], records


def _lp_2d(manifest: dict, shards, comm, *, iterations: int, weighted: bool, progress, kernels):
    """:func:`lp_parts` on a 2D plan: partial label counts of the symmetrized
    partial rows (:func:`~.fold.sym_blocks`) reduced at the row's owner in the grid row."""
    from .fold import sym_blocks
    X = KT.for_comm(kernels, comm)
    sbs, fams = sym_blocks(manifest, shards)
    _check_weight_sum(comm, sbs, weighted)
    fam_f = sbs[0].fold_family
    ids = [s.ids for s in sbs]
    rows = [X.asarray(s.rows, "int64") for s in sbs]
    cols = [X.asarray(s.cols, "int64") for s in sbs]
    w = [X.asarray(s.w if weighted else np.ones(s.w.size), "float64") for s in sbs]
    ext = [X.asarray(s.ext_ids, "int64") for s in sbs]  # labels = ids at the start: column holders know them
    rid = [X.asarray(s.row_ids, "int64") for s in sbs]
    dest = [X.asarray(s.dest, "int64") for s in sbs]
    own_pos = [X.asarray(s.own_pos, "int64") for s in sbs]
    srt = [np.argsort(i, kind="stable") for i in ids]
    sids = [X.asarray(i[o], "int64") for i, o in zip(ids, srt)]
    srt = [X.asarray(o, "int64") for o in srt]
    lab = [X.copy(X.asarray(i, "int64")) for i in ids]
    changed = [X.zeros(i.size, "bool") for i in ids]
    full = int(world_sum(comm, [np.array([float(s.full_value_bytes(8))]) for s in sbs])[0])
    records = []
    for it in range(1, int(iterations) + 1):
        t0 = time.perf_counter()
        sent0 = int(comm.sent_bytes.sum())
        nb = exchange_values(comm, sbs, changed, lab, ext, fams, what=f"LP iteration {it}", X=X)
        trip, dst, mine = [], [], []
        for i in range(len(sbs)):
            e = ext[i]
            gr, gl, gs = C.label_sums(X, rows[i], e[cols[i]], w[i])
            here = own_pos[i][gr] >= 0
            mine.append((own_pos[i][gr[here]], gl[here], gs[here]))
            away = X.flatnonzero(~here)
            trip.append(_stack3(X, rid[i][gr[away]], gl[away], gs[away]))
            dst.append(dest[i][gr[away]])
        recv, _, (fb, fm) = send_rows(comm, fam_f, dst, trip, what=f"LP iteration {it}, counts")
        k = fams.index(fam_f)
        nb[0] += fb
        nb[3 + k] += fb
        nb[3 + len(fams) + k] += fm
        new = []
        for i in range(len(sbs)):
            t = recv[i]
            pr = C.positions(X, sids[i], srt[i], t[:, 0])
            r_all = X.cat([mine[i][0], pr])
            l_all = X.cat([mine[i][1], t[:, 1]])
            s_all = X.cat([mine[i][2], _as_f64(X, t[:, 2])])
            gr, gl, gs = C.label_sums(X, r_all, l_all, s_all)
            new.append(C.pick_mode(X, gr, gl, gs, lab[i]))
        changed = [a != b for a, b in zip(new, lab)]
        lab = new
        meas = int(comm.sent_bytes.sum()) - sent0
        tot = world_sum(comm, [np.concatenate([[float(c.sum()), meas if i == 0 else 0, fb if i == 0 else 0],
                                               nb if i == 0 else 0 * nb]) for i, c in enumerate(changed)])
        records.append({"iteration": it, "changed": int(tot[0]), "bytes": int(tot[3]), "bytes_measured": int(tot[1]),
                        "bytes_counts": int(tot[2]), "bytes_sparse": int(tot[4]), "bytes_dense": int(tot[5]),
                        "bytes_all_values": full, **_by_family(fams, tot[6:]), "time_s": time.perf_counter() - t0})
        if progress:
            progress(f"iteration {it}: {int(tot[0])} labels changed")
        if tot[0] == 0:
            break
    return ids, [X.host(v) for v in lab], records


def _check_weight_sum(comm, sgs, weighted: bool) -> None:
    """``weighted``: every rank stops with the same error when the weights'
    total passes float64's range (a label's weight sum could overflow; below
    it none can). Every rank computes the same world sum."""
    if not weighted:
        return
    with np.errstate(over="ignore"):     # an overflow is the finding below, not a warning
        tot = world_sum(comm, [np.array([float(np.abs(s.w).sum())]) for s in sgs])[0]
    if not np.isfinite(tot):
        raise PlanError("label propagation --weighted: the plan's edge weights sum past float64's largest finite "
                        f"value {np.finfo(np.float64).max:.4g}, so the label sums (every iteration's counting step) "
                        "could overflow; scale the weights down or run without --weighted")


def _stack3(X, a, b, s):
    """(m, 3) int64 rows (a, b, float64 bits of s)."""
    if X.name == "torch":
        import torch
        return torch.stack([a, b, s.contiguous().view(torch.int64)], 1)
    return np.stack([a, b, np.ascontiguousarray(s).view(np.int64)], 1)


def _as_f64(X, a):
    """The float64 values whose bits are the int64 ``a``."""
    if X.name == "torch":
        import torch
        return a.contiguous().view(torch.float64)
    return np.ascontiguousarray(a).view(np.float64)
