"""Weakly connected components by hooking and pointer jumping (FastSV, the
Shiloach–Vishkin class): label = the smallest vertex id of the component,
in O(log n) rounds on paths and grids where min-label propagation needs as
many rounds as a path crosses parts (about the diameter when parts hold
scattered vertices, and on 2D plans).

1D and routed plans: the owner holds v's whole neighbourhood. 2D plans: the
grandparents expand along the grid column and each partial row's minimum
folds along the grid row to its owner (sparse or dense per pair, like BFS's
candidate fold), so step 2 is a two-step reduction there.

Every vertex v keeps a parent ``f[v]`` (a vertex id ≤ v of its component,
``f = id`` at the start) and its grandparent ``gf[v] = f[f[v]]``. A round:

1. the changed ``gf`` of own vertices go to ghost holders (the plan's
   exchange, :func:`~.neighbours.exchange_values`);
2. ``m[v] = min(gf[v], gf of v's neighbours)``;
3. stochastic hooking ``f[f[v]] ← min(f[f[v]], m[v])`` — a (f[v], m[v]) row to
   the owner of f[v] for every v with m[v] < gf[v] (one row per target: the
   smallest), :func:`~.neighbours.to_owners`;
4. aggressive hooking ``f[v] ← min(f[v], m[v])`` and shortcutting
   ``f[v] ← min(f[v], gf[v])``;
5. ``gf[v] ← f[f[v]]``: the distinct parents are asked of their owners
   (one int64 id each way, :func:`~.neighbours.reply`);

until no ``gf`` changes. Then every ``gf[v]`` is the smallest id of v's
component (the smallest vertex never moves and the trees are stars). A
round's ``bytes`` = neighbour exchange + hooking rows (16 bytes each) +
parent requests and replies (8 bytes each way); ``bytes_requests`` the last
two, counted under the ``world`` family in ``bytes_by_family``;
``bytes_all_values`` what sending every gf along the plan would cost.
"""
from __future__ import annotations

import time

import numpy as np

from ..errors import PlanError
from . import kernels as KT
from .fold import FoldMin
from .kernels import community as C
from .neighbours import WORLD, exchange_values, owner_map, reply, sym_graphs, to_owners
from .traversal import check_layout, world_sum

def _by_family(fams: list[str], v: np.ndarray) -> dict:
    F = len(fams)
    return {"bytes_by_family": {f: int(v[k]) for k, f in enumerate(fams)},
            "messages_by_family": {f: int(v[F + k]) for k, f in enumerate(fams)}}


def check_world(comm) -> None:
    """The owner messages need a ``world`` group over all ranks (:func:`~.neighbours.with_world`)."""
    for r in comm.local:
        if comm.member(WORLD, r) is None:
            raise PlanError("pointer jumping sends to any vertex's owner: the comm needs a 'world' group of all "
                            "ranks (partplan.runtime.neighbours.with_world)")


class _Flat:
    """1D / routed: the owner holds whole rows (:class:`~.neighbours.SymGraph`)."""

    def __init__(self, manifest, shards, X):
        self.sgs, self.fams = sym_graphs(manifest, shards)
        self.ids = [s.ids for s in self.sgs]
        self.rows = [X.asarray(s.rows, "int64") for s in self.sgs]
        self.cols = [X.asarray(s.cols, "int64") for s in self.sgs]
        self.ext = [X.asarray(s.ext_ids, "int64") for s in self.sgs]  # gf = id at the start: holders know it
        self.full = [s.full_value_bytes(8) for s in self.sgs]

    def neighbour_min(self, comm, X, changed, gf, fams, what):
        nb = exchange_values(comm, self.sgs, changed, gf, self.ext, self.fams, what=what, X=X)
        F = len(self.fams)
        out = np.zeros(3 + 2 * len(fams))
        out[:3] = nb[:3]
        for k, f in enumerate(self.fams):
            out[3 + fams.index(f)] += nb[3 + k]
            out[3 + len(fams) + fams.index(f)] += nb[3 + F + k]
        return [C.seg_min(X, self.rows[i], self.ext[i][self.cols[i]], gf[i]) for i in range(len(gf))], out


def wcc_pointer_jump_parts(manifest: dict, shards, comm, *, progress=None, kernels: str = "auto",
                           max_rounds: int | None = None):
    """Weak components by pointer jumping: (ids per local rank, int64 labels per
    local rank — numpy —, round records). 1D, routed and 2D plans. ``kernels``
    as in :func:`~.analytics.wcc_parts`; ``max_rounds`` (default 2·⌈log2 n⌉ + 8,
    a bound the algorithm stays far below) guards against a broken plan."""
    lay = check_layout(manifest, "analytics", job="WCC by pointer jumping")
    check_world(comm)
    X = KT.for_comm(kernels, comm)
    n = int(manifest["graph"]["n"])
    nbr = FoldMin(manifest, shards, X) if lay.fold else _Flat(manifest, shards, X)
    fams = nbr.fams + ([] if WORLD in nbr.fams else [WORLD])  # the owner messages' family
    wk = fams.index(WORLD)
    ids = nbr.ids
    own = X.asarray(owner_map(comm, ids, n), "int64")
    srt = [np.argsort(i, kind="stable") for i in ids]
    sids = [X.asarray(i[o], "int64") for i, o in zip(ids, srt)]
    srt = [X.asarray(o, "int64") for o in srt]
    f = [X.copy(X.asarray(i, "int64")) for i in ids]
    gf = [X.copy(a) for a in f]
    changed = [X.zeros(i.size, "bool") for i in ids]
    full = int(world_sum(comm, [np.array([float(b)]) for b in nbr.full])[0])
    limit = max_rounds if max_rounds is not None else 2 * int(np.ceil(np.log2(max(n, 2)))) + 8
    records, rnd = [], 0
    while True:
        t0 = time.perf_counter()
        sent0 = int(comm.sent_bytes.sum())
        m, nb = nbr.neighbour_min(comm, X, changed, gf, fams, what=f"WCC pointer-jump round {rnd}")
        # stochastic hooking: f[f[v]] <- min(f[f[v]], m[v]) at the owner of f[v]
        req = []
        for i in range(len(ids)):
            sel = X.flatnonzero(m[i] < gf[i])
            t, v = C.min_by_key(X, f[i][sel], m[i][sel])
            req.append(_pairs(X, t, v))
        got, _, hb = to_owners(comm, own, req, what=f"WCC pointer-jump round {rnd}, hooking")
        for i in range(len(ids)):
            g = got[i]
            pos = C.positions(X, sids[i], srt[i], g[:, 0])
            X.minimum_at(f[i], pos, g[:, 1])
            f[i] = X.where(m[i] < f[i], m[i], f[i])
            f[i] = X.where(gf[i] < f[i], gf[i], f[i])
        # gf <- f[f]: ask the owners of the distinct parents
        inv, q = [], []
        for i in range(len(ids)):
            u, iv = C.unique_inverse(X, f[i])
            inv.append(iv)
            q.append(u.reshape(-1, 1))
        got, routes, qb = to_owners(comm, own, q, what=f"WCC pointer-jump round {rnd}, parents")
        ans = [f[i][C.positions(X, sids[i], srt[i], got[i][:, 0])] for i in range(len(ids))]
        back, rb = reply(comm, routes, ans, what=f"WCC pointer-jump round {rnd}, parents")
        new = [back[i][inv[i]] for i in range(len(ids))]
        changed = [a != b for a, b in zip(new, gf)]
        gf = new
        meas = int(comm.sent_bytes.sum()) - sent0
        reqb = hb[0] + qb[0] + rb[0]
        nb[3 + wk] += reqb
        nb[3 + len(fams) + wk] += hb[1] + qb[1] + rb[1]
        tot = world_sum(comm, [np.concatenate([[float(c.sum()), meas if i == 0 else 0, reqb if i == 0 else 0],
                                               nb if i == 0 else 0 * nb])
                               for i, c in enumerate(changed)])
        F = len(fams)
        records.append({"round": rnd, "changed": int(tot[0]), "bytes": int(tot[3] + tot[2]),
                        "bytes_measured": int(tot[1]), "bytes_requests": int(tot[2]),
                        "bytes_sparse": int(tot[4]), "bytes_dense": int(tot[5]),
                        "bytes_all_values": full,
                        **_by_family(fams, tot[6:6 + 2 * F]), "time_s": time.perf_counter() - t0})
        if progress:
            progress(f"round {rnd}: {int(tot[0])} grandparents changed")
        rnd += 1
        if tot[0] == 0:
            return ids, [X.host(v) for v in gf], records
        if rnd >= limit:
            raise PlanError(f"pointer jumping did not converge in {limit} rounds (a plan whose exchange does not "
                            f"reach every neighbour?)")


def _pairs(X, t, v):
    """(m, 2) int64 rows (t, v)."""
    if X.name == "torch":
        import torch
        return torch.stack([t, v], 1)
    return np.stack([t, v], 1)
