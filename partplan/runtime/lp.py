"""Synchronous label propagation on the symmetrized graph of a plan.

Labels start as the vertex ids. In every iteration each vertex with at least
one neighbour (:class:`~.neighbours.SymGraph`: in- and out-neighbours, each
once, self loops ignored) takes the label that is most frequent among its
neighbours' labels of the previous iteration — or, ``weighted``, the label
whose neighbours' edge weights sum highest —, ties to the smallest label;
vertices without neighbours keep theirs. It stops after ``iterations`` or at
the first iteration that changes nothing.

1D and routed plans: the owner of v counts its neighbours' labels itself,
from its own rows and the ghosts' labels; an iteration sends only the labels
that changed in the previous one (the active-vertex queue, sparse or dense per
(rank, peer) pair, :func:`~.neighbours.exchange_values`). Each record also
gives ``bytes_all_values``: what sending every label (8 bytes, no positions)
along the same pairs would cost.
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import PlanError
from . import kernels as KT
from .kernels import community as C
from .neighbours import exchange_values, sym_graphs
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
    check_layout(manifest, "analytics")
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 1:
        raise PlanError(f"iterations must be an integer >= 1, got {iterations!r}")
    X = KT.for_comm(kernels, comm)
    sgs, fams = sym_graphs(manifest, shards)
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
