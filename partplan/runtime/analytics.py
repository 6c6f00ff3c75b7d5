"""PageRank, weakly connected components and single-source shortest paths on
a plan's programs (see :mod:`.traversal` for the program of ``A^T``).

* :func:`pagerank` — networkx's conventions (``networkx.pagerank``): edge
  u → v for every nonzero A[u, v] with its weight, x₀ = 1/n, uniform
  teleport, dangling mass spread uniformly, ``x ← d·(Aᵀ D⁻¹ x + Σ_dangling x / n)
  + (1 − d)/n``, stop when ``‖x − x_prev‖₁ < n·tol``. The product ``Aᵀ y`` is the
  plan's program of ``A^T`` run by the :class:`~.interpreter.Executor` with f = 1
  (the out-weights ``A·1`` once by the forward program).
* :func:`wcc` — min-label propagation: label = smallest vertex id of the
  weak component; each round sends only the labels that changed (sparse or
  dense per pair, :func:`~.traversal.exchange_chain`) along ``A^T`` and, for a
  directed graph, ``A`` too.

All three run on 1D, routed and 2D plans (a routed exchange is a chain of
steps through the domain monitors; the changed labels / distances follow it;
on 2D the ``Executor`` runs PageRank's SpMM with its fold, and WCC / SSSP
expand along the grid column and fold partial minima along the grid row,
:mod:`.fold`).
* :func:`sssp` — Bellman-Ford over the frontier of changed distances
  (non-negative weights; unweighted plans use 1 per edge), inf = unreachable.

Each ``*_parts(manifest, shards, comm, ..., kernels=)`` is a plain function
over the local ranks' shards and a comm (per-rank compute from the kernel
table :mod:`.kernels`); the jobs ``pagerank`` / ``wcc`` / ``sssp``
(:mod:`partplan.jobs.analytics`) call them and write the outputs.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..errors import PartplanError, PlanError
from ..program.plan import manifest_volume
from . import kernels as KT
from .traversal import check_layout, exchange_chain, gather_global, rank_graph, traversal_program


class ConvergenceError(PartplanError):
    """An iterative job did not converge within its iteration limit."""


def _ops(comm, dtype="float64"):
    from .ops import NumpyOps, TorchOps
    if hasattr(comm, "torch"):
        return TorchOps(dtype, str(comm.device), "auto")
    return NumpyOps(dtype)


def _world_sum(comm, vals: list) -> np.ndarray:
    from .traversal import world_sum
    return world_sum(comm, vals)


def _order(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Positions in ``a`` of the ids ``b`` (both permutations of the same set)."""
    o = np.argsort(a, kind="stable")
    pos = o[np.searchsorted(a, b, sorter=o)]
    if not np.array_equal(a[pos], b):
        raise PlanError("the program's output rows are not the rows it holds (decoupled ownership?)")
    return pos


# ----------------------------------------------------------------------------- PageRank
def _refuse_negative_weights(manifest: dict, shards, comm) -> None:
    """One PlanError on every rank when a rank's matrix holds a negative edge weight: PageRank's
    walk leaves a vertex along each out-edge with the edge's share of its out-weight, which a
    negative weight makes no probability (weights +1 and −1 would even make the vertex dangling).
    Collective (:func:`~.finite.raise_agreed`)."""
    from .finite import raise_agreed
    from .traversal import program_parts
    spmm = program_parts(manifest, "forward")[1]["id"]
    bad = []
    for rp in shards:
        w = np.asarray(rp[f"{spmm}.data"]) if rp.has(f"{spmm}.data") else None
        bad.append(np.array([0.0, float(w.min())]) if w is not None and w.size and w.min() < 0 else None)
    raise_agreed(comm, bad, 2, lambda rank, v: (
        f"rank {rank}: PageRank needs non-negative edge weights (an edge carries its share of its vertex's "
        f"out-weight), and an edge of this plan weighs {v[1]:g}"))


def pagerank_parts(manifest: dict, shards, comm, *, damping: float = 0.85, tol: float = 1e-6,
                   max_iter: int = 100, progress=None, kernels: str = "auto"):
    """PageRank on the local ranks: (ids per local rank, float64 values per
    local rank — numpy —, iteration records). ``kernels``
    (:data:`~partplan.runtime.kernels.CHOICES`): ``torch`` keeps the vectors
    on the comm's device and runs the SpMM there (torch sparse CSR through the
    Executor); ``native`` uses numpy vectors and the comm's default ops."""
    check_layout(manifest, "analytics", job="PageRank")
    if not 0 <= damping <= 1:
        raise PlanError(f"damping must be in [0, 1], got {damping}")
    if not tol > 0:
        raise PlanError(f"tol must be > 0, got {tol}")
    from .interpreter import Executor
    X = KT.for_comm(kernels, comm)
    ops = X.ops(comm)
    ex = Executor(manifest, shards, comm, ops)
    ex.phase_times = False  # no per-step device synchronize: PageRank reports no phase times
    prog = traversal_program(manifest)
    _refuse_negative_weights(manifest, shards, comm)
    n = int(manifest["graph"]["n"])
    ids = [np.asarray(rp.in_ids(prog), dtype=np.int64) for rp in shards]
    pos_out = [X.asarray(_order(i, np.asarray(rp.out_ids(prog))), "int64") for i, rp in zip(ids, shards)]
    fpos_in = [_order(i, np.asarray(rp.in_ids("forward"))) for i, rp in zip(ids, shards)]
    fpos_out = [X.asarray(_order(i, np.asarray(rp.out_ids("forward"))), "int64") for i, rp in zip(ids, shards)]
    ones = [X.to_ops(ops, X.full(fp.size, 1.0, "float64")) for fp in fpos_in]
    outw = []
    for i, z in enumerate(ex.run("forward", ones)):
        w = X.zeros(ids[i].size, "float64")
        w[fpos_out[i]] = X.from_ops(ops, z)
        outw.append(w)
    from .finite import raise_agreed
    bad = []
    for i, w in enumerate(outw):
        wh = X.host(w)
        k = np.flatnonzero(~np.isfinite(wh))
        bad.append(np.array([0.0, float(ids[i][k[0]])]) if k.size else None)
    raise_agreed(comm, bad, 2, lambda rank, v: (
        f"rank {rank}: PageRank's out-weight sum (step 'A·1' of the forward program) of vertex {int(v[1])} is not "
        f"finite (overflow of float64, or a non-finite edge weight); scale the weights down"))
    dang = [w == 0 for w in outw]
    inv = [X.where(d, 0.0, 1.0 / X.where(d, 1.0, w)) for w, d in zip(outw, dang)]
    x = [X.full(i.size, 1.0 / n, "float64") for i in ids]
    pred = int(manifest_volume(manifest, prog).sum()) * 8
    records = []
    # per iteration one device → host copy (torch kernels): the L1 change (the stop test) and the
    # dangling mass of the new vector (the next iteration's teleport term), then one world sum
    dsum = _world_sum(comm, [np.array([v]) for v in X.host_scalars([X.masked_sum(xi, d)
                                                                    for xi, d in zip(x, dang)])])[0]
    step = _captured_pagerank(ex, prog, ops, X, comm, x, dang, inv, pos_out, damping, n)
    for it in range(1, max_iter + 1):
        t0 = time.perf_counter()
        sent0 = int(comm.sent_bytes.sum())
        if step is not None:  # one CUDA graph per iteration (p = 1 on CUDA): x updated in place
            step()
            sc = step.scalars.tolist()
            new = x
        else:
            y = ex.run(prog, [X.to_ops(ops, xi * vi) for xi, vi in zip(x, inv)])
            new = []
            for i, yi in enumerate(y):
                a = X.zeros(ids[i].size, "float64")
                a[pos_out[i]] = X.from_ops(ops, yi)
                new.append(damping * (a + dsum / n) + (1.0 - damping) / n)
            sc = X.host_scalars([v for a, b, d in zip(new, x, dang) for v in (X.l1_dev(a, b), X.masked_sum(a, d))])
        meas = int(comm.sent_bytes.sum()) - sent0
        tot = _world_sum(comm, [np.array([sc[2 * i], meas if i == 0 else 0, sc[2 * i + 1]])
                                for i in range(len(new))])
        if not np.isfinite(tot[0]):  # every rank sees the same sum
            raise PlanError(f"PageRank iteration {it}: the L1 change is not finite (a non-finite value: overflow "
                            f"in A^T D^-1 x)")
        x, dsum = new, tot[2]
        records.append({"iteration": it, "l1_change": float(tot[0]), "bytes": pred,
                        "bytes_measured": int(tot[1]), "time_s": time.perf_counter() - t0})
        if progress:
            progress(f"iteration {it}: L1 change {tot[0]:.3e}")
        if tot[0] < n * tol:
            return ids, [X.host(v).copy() for v in x], records
    raise ConvergenceError(f"PageRank did not converge in {max_iter} iterations (L1 change "
                           f"{records[-1]['l1_change']:.3e} >= n·tol = {n * tol:.3e})")


def _captured_pagerank(ex, prog, ops, X, comm, x, dang, inv, pos_out, damping, n):
    """PageRank's iteration as one CUDA graph (:class:`~.capture.Captured`) where
    its shapes are static and nothing leaves the device: torch kernels on a
    CUDA device, one rank in a LocalComm (no collective to count). The step
    updates ``x[0]`` in place and writes [L1 change, dangling mass of the new
    vector] into ``step.scalars``; the iteration is the eager one's, op for op
    (the teleport term reads the dangling mass on the device). None elsewhere
    (the eager loop)."""
    from .comm import LocalComm
    if X.name != "torch" or KT.device_type(X.device) != "cuda" or len(x) != 1 or not isinstance(comm, LocalComm):
        return None
    import torch

    from .capture import Captured
    xs, dg, iv, po = x[0], dang[0], inv[0], pos_out[0]
    scalars = torch.zeros(2, dtype=torch.float64, device=xs.device)

    def body():
        y = ex.run(prog, [X.to_ops(ops, xs * iv)])
        a = torch.zeros_like(xs)
        a[po] = X.from_ops(ops, y[0])
        new = damping * (a + X.masked_sum(xs, dg) / n) + (1.0 - damping) / n
        scalars[0] = X.l1_dev(new, xs)
        scalars[1] = X.masked_sum(new, dg)
        xs.copy_(new)
    step = Captured(body, xs.device, state=[xs, scalars], outputs=lambda: [xs, scalars])
    step.scalars = scalars
    return step


def _families(rgs) -> list[str]:
    """Group families of the expand chains of ``rgs`` (first seen first): the same on every rank."""
    return list(dict.fromkeys(sg.family for rg in rgs for sg in rg.steps))


def _by_family(fams: list[str], v: np.ndarray) -> dict:
    F = len(fams)
    return {"bytes_by_family": {f: int(v[k]) for k, f in enumerate(fams)},
            "messages_by_family": {f: int(v[F + k]) for k, f in enumerate(fams)}}


# ----------------------------------------------------------------------------- WCC
def wcc_parts(manifest: dict, shards, comm, *, progress=None, kernels: str = "auto"):
    """Weak components: (ids per local rank, int64 labels per local rank —
    numpy —, round records). Min-label propagation: each round the changed labels
    expand, every row takes the smallest label among its columns whose value dropped
    (:meth:`min_from_changed`), and the new labels spread through the rank's own
    components (:func:`_own_components`). ``kernels`` as in :func:`pagerank_parts`: the
    labels live on the comm's device with ``torch``. 2D plans: :func:`_wcc_2d`."""
    lay = check_layout(manifest, "analytics", job="WCC")
    X = KT.for_comm(kernels, comm)
    if lay.fold:
        return _wcc_2d(manifest, shards, comm, X, progress)
    prog = traversal_program(manifest)
    gs = [[rank_graph(manifest, rp, prog) for rp in shards]]
    if prog != "forward":  # directed: out-neighbours too (rows of A)
        fw = [rank_graph(manifest, rp, "forward") for rp in shards]
        for a, b in zip(gs[0], fw):
            if not np.array_equal(a.ids, b.ids):
                raise PlanError("the forward and backward programs hold different rows")
        gs.append(fw)
    gvs = [[X.graph(rg) for rg in g] for g in gs]
    fams = _families([rg for g in gs for rg in g[:1]])
    ids = [rg.ids for rg in gs[0]]
    lab = [X.asarray(i, "int64") for i in ids]
    ext = [[X.asarray(rg.ext_ids, "int64") for rg in g] for g in gs]  # labels of own + ghost columns
    changed = [X.full(i.size, True, "bool") for i in ids]
    comps = [_own_components(X, [g[i] for g in gs]) for i in range(len(ids))]
    records, rnd = [], 0
    while True:
        t0 = time.perf_counter()
        sent0 = int(comm.sent_bytes.sum())
        nbytes = np.zeros(3 + 2 * len(fams))
        new = [X.copy(lv) for lv in lab]
        for k, g in enumerate(gs):
            got, vals, st = exchange_chain(comm, [rg.steps for rg in g], changed, lab, what=f"WCC round {rnd}")
            nbytes += np.concatenate([[st.bytes, st.sparse_bytes, st.dense_bytes], st.family_vector(fams)])
            for i, rg in enumerate(g):
                e = ext[k][i]
                e[:rg.nl] = lab[i]
                e[rg.nl:][got[i]] = vals[i][got[i]]
                m = X.min_from_changed(gvs[k][i], e, lab[i], changed[i], got[i])
                new[i] = X.where(m < new[i], m, new[i])
        for i, (comp, ncomp) in enumerate(comps):
            if comp is not None:      # a label that reached a rank's own component reaches all of it
                low = X.full(ncomp, np.iinfo(np.int64).max, "int64")
                X.minimum_at(low, comp, new[i])
                new[i] = low[comp]
        changed = [a < b for a, b in zip(new, lab)]
        lab = new
        if _close_round(comm, changed, nbytes, sent0, fams, rnd, t0, records, progress) == 0:
            return ids, [X.host(v) for v in lab], records
        rnd += 1


def _own_components(X, rgs) -> tuple:
    """(component of each own vertex as an X array, count) among the edges between a rank's own
    vertices (every program's: weak components), or (None, 0) when no two own vertices connect.
    A round's labels then spread over a whole component of a part at once, so WCC takes about as
    many rounds as a path crosses parts, not as it has vertices (an 800 x 800 grid at k = 16: 17
    rounds, against 1,599 for one hop per round)."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    nl = rgs[0].nl
    rows, cols = [], []
    for rg in rgs:
        r = np.repeat(np.arange(rg.nrows, dtype=np.int64), np.diff(rg.indptr))
        own = (rg.indices < nl) & (r < nl)
        rows.append(r[own])
        cols.append(rg.indices[own].astype(np.int64))
    r, c = np.concatenate(rows), np.concatenate(cols)
    if nl == 0 or not np.any(r != c):
        return None, 0
    ncomp, comp = connected_components(sp.csr_matrix((np.ones(r.size, np.int8), (r, c)), shape=(nl, nl)),
                                       directed=True, connection="weak")
    return (X.asarray(comp, "int64"), int(ncomp)) if ncomp < nl else (None, 0)


def _close_round(comm, changed, nbytes, sent0: int, fams, rnd: int, t0: float, records: list, progress) -> int:
    """End of a WCC round on every rank: one world sum of the labels changed, the bytes measured and the
    bytes counted (``nbytes``), its record appended; returns the labels changed over all ranks."""
    meas = int(comm.sent_bytes.sum()) - sent0
    tot = _world_sum(comm, [np.concatenate([[float(c.sum()), meas if i == 0 else 0],
                                            nbytes if i == 0 else 0 * nbytes])
                            for i, c in enumerate(changed)])
    records.append({"round": rnd, "changed": int(tot[0]), "bytes": int(tot[2]), "bytes_sparse": int(tot[3]),
                    "bytes_dense": int(tot[4]), "bytes_measured": int(tot[1]),
                    **_by_family(fams, tot[5:]), "time_s": time.perf_counter() - t0})
    if progress:
        progress(f"round {rnd}: {int(tot[0])} labels changed")
    return int(tot[0])


def _wcc_2d(manifest, shards, comm, X, progress):
    """WCC on a 2D plan: the changed labels expand along the grid column, each
    partial row's minimum — sent only when it dropped — folds along the grid
    row to the row's owner (:class:`~.fold.FoldMin`; both programs for a
    directed graph)."""
    from .fold import FoldMin
    nbr = FoldMin(manifest, shards, X, decreasing=True)
    fams, ids = nbr.fams, nbr.ids
    lab = [X.asarray(i, "int64") for i in ids]
    changed = [X.full(i.size, True, "bool") for i in ids]
    records, rnd = [], 0
    while True:
        t0 = time.perf_counter()
        sent0 = int(comm.sent_bytes.sum())
        new, nbytes = nbr.neighbour_min(comm, X, changed, lab, fams, what=f"WCC round {rnd}")
        changed = [a < b for a, b in zip(new, lab)]
        lab = new
        if _close_round(comm, changed, nbytes, sent0, fams, rnd, t0, records, progress) == 0:
            return ids, [X.host(v) for v in lab], records
        rnd += 1


# ----------------------------------------------------------------------------- SSSP
def sssp_parts(manifest: dict, shards, comm, root: int, *, progress=None, steal=None, kernels: str = "auto",
               balancer_out: list | None = None):
    """Distances from ``root``: (ids per local rank, float64 distances — numpy —,
    round records). ``steal``: a :class:`~.steal.StealConfig` (frontier
    stealing per round) or None. ``kernels`` as in :func:`pagerank_parts`."""
    lay = check_layout(manifest, ("analytics", "stealing") if steal is not None else "analytics", job="SSSP")
    X = KT.for_comm(kernels, comm)
    n = int(manifest["graph"]["n"])
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= int(root) < n:
        raise PlanError(f"root {root!r} is not a vertex id in [0, {n})")
    prog = traversal_program(manifest)
    gs = [rank_graph(manifest, rp, prog) for rp in shards]
    fams = _families(gs[:1])
    bad = []
    for rg in gs:
        if rg.cdata is not None and rg.cdata.size and rg.cdata.min() < 0:
            e = int(np.argmin(rg.cdata))
            c = int(np.searchsorted(rg.cindptr, e, side="right") - 1)
            bad.append(f"edge {int(rg.ext_ids[c])} -> {int(rg.row_ids[rg.crows[e]])} has weight {rg.cdata[e]:g}")
    flag = _world_sum(comm, [np.array([float(bool(bad))]) for _ in gs])[0]
    if bad:
        raise PlanError(f"SSSP needs non-negative edge weights: {bad[0]}")
    if flag > 0:
        raise PlanError("SSSP needs non-negative edge weights: another rank holds a negative one")
    if lay.fold:
        return _sssp_2d(gs, comm, X, root, fams, progress)
    gvs = [X.graph(rg) for rg in gs]
    dist = [X.full(rg.nl, np.inf, "float64") for rg in gs]
    dext = [X.full(rg.next_ - rg.nl, np.inf, "float64") for rg in gs]
    changed = [X.zeros(rg.nl, "bool") for rg in gs]
    for i, rg in enumerate(gs):
        for k in np.flatnonzero(rg.ids == root).tolist():
            dist[i][k] = 0.0
            changed[i][k] = True
    records, rnd, nchg = [], 0, 1.0
    bal = None
    if steal is not None:
        from .steal import Balancer
        bal = Balancer(comm, gs, n, steal, weighted=True)
        if balancer_out is not None:     # the job's report takes its hub figures
            balancer_out.append(bal)
    while nchg > 0:
        t0 = time.perf_counter()
        sent0 = int(comm.sent_bytes.sum())
        got, vals, st = exchange_chain(comm, [rg.steps for rg in gs], changed, dist, what=f"SSSP round {rnd}")
        edges, sout = 0, None
        for i in range(len(gs)):
            dext[i][got[i]] = vals[i][got[i]]
        if bal is not None:
            from .steal import sssp_relax
            res, sout = sssp_relax(bal, gs, changed, got, dist, dext, rnd, records[-1]["time_s"] if records else None,
                                   kernels=X)
            changed = [r[0] for r in res]
            edges = sum(r[1] for r in res)
        for i, rg in enumerate(gs if bal is None else []):
            cols = X.cat([X.flatnonzero(changed[i]), rg.nl + X.flatnonzero(got[i])])
            ch, e = X.relax(gvs[i], cols, X.cat([dist[i], dext[i]]), dist[i])
            edges += e
            changed[i] = ch
        meas = int(comm.sent_bytes.sum()) - sent0 - (0 if sout is None else sout.measured_local)
        fv = st.family_vector(fams)
        tot = _world_sum(comm, [np.concatenate([[float(c.sum()), edges if i == 0 else 0, st.bytes if i == 0 else 0,
                                                 meas if i == 0 else 0], fv if i == 0 else 0 * fv])
                                for i, c in enumerate(changed)])
        nchg = tot[0]
        records.append({"round": rnd, "changed": int(tot[0]), "edges_examined": int(tot[1]), "bytes": int(tot[2]),
                        "bytes_measured": int(tot[3]), **_by_family(fams, tot[4:]), "time_s": time.perf_counter() - t0,
                        **({} if sout is None else sout.info)})
        if progress:
            progress(f"round {rnd}: {int(tot[0])} distances changed")
        rnd += 1
    _sssp_overflow(comm, gs, [X.host(d) for d in dist], [X.host(d) for d in dext])
    return [rg.ids for rg in gs], [X.host(d) for d in dist], records


def _sssp_overflow(comm, gs, dist, dext, rows=None) -> None:
    """Collective: one PlanError on every rank if a relaxation overflowed
    float64 — an edge u → v whose column u has a finite distance while its
    row's distance (``rows``: 2D partial rows' best candidates; else the own
    distances) stayed infinite: d[u] + w went past float64's range."""
    from .finite import raise_agreed
    items = []
    for i, rg in enumerate(gs):
        tgt = dist[i] if rows is None else rows[i]
        col = np.concatenate([dist[i], dext[i]])
        r = np.repeat(np.arange(rg.nrows, dtype=np.int64), np.diff(rg.indptr))
        hit = np.flatnonzero(np.isfinite(col[rg.indices]) & np.isinf(tgt[r]))
        if hit.size:
            e = int(hit[0])
            w = 1.0 if rg.data is None else float(rg.data[e])
            items.append(np.array([0.0, float(rg.ext_ids[rg.indices[e]]), float(rg.row_ids[r[e]]),
                                   float(col[rg.indices[e]]), w]))
        else:
            items.append(None)
    raise_agreed(comm, items, 5, lambda rank, v: (
        f"rank {rank}: SSSP relaxation of edge {int(v[1])} -> {int(v[2])} overflowed float64 "
        f"(distance {v[3]:.4g} + weight {v[4]:.4g} is beyond {np.finfo(np.float64).max:.4g}); scale the weights down"))


def _sssp_2d(gs, comm, X, root, fams, progress):
    """SSSP on a 2D plan: the changed distances expand along the grid column;
    each rank relaxes the columns that changed into its partial rows' best
    candidates, and the candidates that improved fold along the grid row to
    the row's owner (float64 values, sparse or dense per pair), which keeps
    the smallest. A partial row's candidate only decreases, so the owner's
    distance holds every candidate sent before."""
    from .traversal import exchange_flags
    fams = list(dict.fromkeys(fams + [gs[0].fold.family]))
    gvs = [X.graph(rg) for rg in gs]
    dist = [X.full(rg.nl, np.inf, "float64") for rg in gs]
    dext = [X.full(rg.next_ - rg.nl, np.inf, "float64") for rg in gs]
    best = [X.full(rg.nrows, np.inf, "float64") for rg in gs]  # per partial row: the smallest candidate so far
    changed = [X.zeros(rg.nl, "bool") for rg in gs]
    ssrc = [X.asarray(np.array(rg.self_src, dtype=np.int64), "int64") for rg in gs]
    sdst = [X.asarray(np.array(rg.self_dst, dtype=np.int64), "int64") for rg in gs]
    fpos = [X.asarray(np.array(rg.fold_pos, dtype=np.int64), "int64") for rg in gs]
    for i, rg in enumerate(gs):
        for k in np.flatnonzero(rg.ids == root).tolist():
            dist[i][k] = 0.0
            changed[i][k] = True
    records, rnd, nchg = [], 0, 1.0
    while nchg > 0:
        t0 = time.perf_counter()
        sent0 = int(comm.sent_bytes.sum())
        got, vals, st = exchange_chain(comm, [rg.steps for rg in gs], changed, dist, what=f"SSSP round {rnd}")
        edges, masks = 0, []
        for i, rg in enumerate(gs):
            dext[i][got[i]] = vals[i][got[i]]
            cols = X.cat([X.flatnonzero(changed[i]), rg.nl + X.flatnonzero(got[i])])
            ch, e = X.relax(gvs[i], cols, X.cat([dist[i], dext[i]]), best[i])
            edges += e
            ch[ssrc[i]] = False  # own partial rows stay here
            masks.append(ch)
        fgot, fvals, fst = exchange_flags(comm, [rg.fold for rg in gs], masks, best,
                                          [rg.fold_pos.size for rg in gs], what=f"SSSP round {rnd}, fold")
        for i in range(len(gs)):
            new = X.copy(dist[i])
            X.minimum_at(new, sdst[i], best[i][ssrc[i]])
            X.minimum_at(new, fpos[i][fgot[i]], fvals[i][fgot[i]])
            changed[i] = new < dist[i]
            dist[i] = new
        meas = int(comm.sent_bytes.sum()) - sent0
        fv = st.family_vector(fams) + fst.family_vector(fams)
        nb = st.bytes + fst.bytes
        tot = _world_sum(comm, [np.concatenate([[float(c.sum()), edges if i == 0 else 0, nb if i == 0 else 0,
                                                 meas if i == 0 else 0], fv if i == 0 else 0 * fv])
                                for i, c in enumerate(changed)])
        nchg = tot[0]
        records.append({"round": rnd, "changed": int(tot[0]), "edges_examined": int(tot[1]), "bytes": int(tot[2]),
                        "bytes_measured": int(tot[3]), **_by_family(fams, tot[4:]),
                        "time_s": time.perf_counter() - t0})
        if progress:
            progress(f"round {rnd}: {int(tot[0])} distances changed")
        rnd += 1
    _sssp_overflow(comm, gs, [X.host(d) for d in dist], [X.host(d) for d in dext], [X.host(b) for b in best])
    return [rg.ids for rg in gs], [X.host(d) for d in dist], records


# ----------------------------------------------------------------------------- job bodies
# The jobs that run these algorithms (config, output file, report) live above the runtime, in
# partplan.jobs.analytics; this module only computes.
