"""Every graph job on every layout it is defined on (issue #52): PageRank,
WCC (propagation and pointer jumping), SSSP, label propagation and matching
× {1d, 2d:2x2, 2d:1x3, routed:domain:2} × {native, torch} kernels on LocalComm,
on a directed and an undirected random graph made here, against independent
references — networkx's PageRank, scipy's weak components and Dijkstra, a
plain-Python label propagation and greedy matching over networkx graphs —;
the one-line refusals; one gloo launch per new 2D job."""
from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest
import scipy.sparse.csgraph as cg

from partplan import Graph, PlanError
from partplan.layouts import parse_layout
from partplan.plan import build_plan, write_plan
from partplan.runtime import analytics as an
from partplan.runtime.comm import LocalComm
from partplan.runtime.lp import lp_parts
from partplan.runtime.matching import matching_parts
from partplan.runtime.neighbours import with_world
from partplan.runtime.pointer_jump import wcc_pointer_jump_parts

LAYOUTS = [("1d", 3), ("2d:2x2", 4), ("2d:1x3", 3), ("routed:domain:2", 4)]
KERNELS = ["native", "torch"]


def make_graph(directed: bool) -> Graph:
    """70 vertices, a few isolated (ids >= 64), self loops and repeated pairs kept
    in the input, integer weights 1..6 (ties for LP and matching, distinct sums for SSSP)."""
    rng = np.random.default_rng(52 + directed)
    n, m = 70, 190
    s, d = rng.integers(0, 64, m), rng.integers(0, 64, m)
    w = rng.integers(1, 7, m).astype(float)
    return Graph.from_edges(s, d, w, n=n, symmetrize=not directed)


GRAPHS = {"dir": make_graph(True), "und": make_graph(False)}
_PLANS: dict = {}


def plan_of(key: str, layout: str, p: int):
    k = (key, layout, p)
    if k not in _PLANS:
        g = GRAPHS[key]
        part = np.random.default_rng(p).integers(0, parse_layout(layout, p).row_blocks, g.n)
        _PLANS[k] = build_plan(g, part, p, layout=layout)
    plan = _PLANS[k]
    return plan, LocalComm(p, with_world(plan.groups(), p))


def full(ids, vals, n, dtype=np.float64):
    out = np.full(n, -7, dtype=dtype)
    seen = np.zeros(n, bool)
    for i, v in zip(ids, vals):
        out[i] = v
        seen[i] = True
    assert seen.all()
    return out


def nx_digraph(g: Graph) -> nx.DiGraph:
    return nx.from_scipy_sparse_array(g.to_scipy(), create_using=nx.DiGraph)


def nx_sym(g: Graph) -> nx.Graph:
    """The symmetrized simple graph: each pair once, weight = the larger stored value, no self loops."""
    G = nx.Graph()
    G.add_nodes_from(range(g.n))
    A = g.to_scipy().tocoo()
    for u, v, w in zip(A.row.tolist(), A.col.tolist(), A.data.tolist()):
        if u != v and (not G.has_edge(u, v) or G[u][v]["weight"] < w):
            G.add_edge(u, v, weight=w)
    return G


def ref_lp(G: nx.Graph, iterations: int, weighted: bool):
    lab, changed = list(range(G.number_of_nodes())), []
    for _ in range(iterations):
        new = list(lab)
        for v in G.nodes:
            score: dict = {}
            for u in G[v]:
                score[lab[u]] = score.get(lab[u], 0.0) + (G[v][u]["weight"] if weighted else 1.0)
            if score:
                top = max(score.values())
                new[v] = min(x for x, s in score.items() if s == top)
        changed.append(sum(a != b for a, b in zip(new, lab)))
        lab = new
        if changed[-1] == 0:
            break
    return np.array(lab), changed


def ref_matching(G: nx.Graph) -> np.ndarray:
    mate = np.full(G.number_of_nodes(), -1)
    for _, a, b in sorted((-w, min(u, v), max(u, v)) for u, v, w in G.edges(data="weight")):
        if mate[a] < 0 and mate[b] < 0:
            mate[a], mate[b] = b, a
    return mate


def weak_smallest(g: Graph) -> np.ndarray:
    nc, cl = cg.connected_components(g.to_scipy(), directed=True, connection="weak")
    sm = np.full(nc, g.n)
    np.minimum.at(sm, cl, np.arange(g.n))
    return sm[cl]


def bytes_ok(rec):
    assert rec and all(r["bytes"] == r["bytes_measured"] for r in rec)


CASES = [(k, lay, p) for k in GRAPHS for lay, p in LAYOUTS]


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("key,layout,p", CASES)
def test_pagerank(key, layout, p, kernels):
    g = GRAPHS[key]
    plan, comm = plan_of(key, layout, p)
    ids, x, rec = an.pagerank_parts(plan.manifest, plan.ranks, comm, tol=1e-10, kernels=kernels)
    ref = nx.pagerank(nx_digraph(g), alpha=0.85, tol=1e-10)
    assert np.abs(full(ids, x, g.n) - np.array([ref[i] for i in range(g.n)])).sum() < 1e-9
    bytes_ok(rec)


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("key,layout,p", CASES)
def test_wcc_both_methods(key, layout, p, kernels):
    g = GRAPHS[key]
    plan, comm = plan_of(key, layout, p)
    ref = weak_smallest(g)
    assert np.unique(ref).size > 3
    ids, lab, rec = an.wcc_parts(plan.manifest, plan.ranks, comm, kernels=kernels)
    assert np.array_equal(full(ids, lab, g.n, np.int64), ref)
    bytes_ok(rec)
    assert all(r["bytes"] <= min(r["bytes_sparse"], r["bytes_dense"]) for r in rec)
    ids, lab, rec = wcc_pointer_jump_parts(plan.manifest, plan.ranks, comm, kernels=kernels)
    assert np.array_equal(full(ids, lab, g.n, np.int64), ref)
    bytes_ok(rec)


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("key,layout,p", CASES)
def test_sssp(key, layout, p, kernels):
    g = GRAPHS[key]
    plan, comm = plan_of(key, layout, p)
    for root in (0, 11):
        ids, d, rec = an.sssp_parts(plan.manifest, plan.ranks, comm, root, kernels=kernels)
        ref = cg.dijkstra(g.to_scipy(), indices=root)
        got = full(ids, d, g.n)
        assert np.array_equal(np.isinf(got), np.isinf(ref))
        assert np.allclose(got[np.isfinite(ref)], ref[np.isfinite(ref)], rtol=1e-12, atol=0)
        bytes_ok(rec)
        if layout.startswith("2d") and p > 1:  # candidates fold along the grid row
            assert sum(r["bytes_by_family"]["row"] for r in rec) > 0


def test_refusals_name_the_job_the_layout_and_what_to_use():
    g = GRAPHS["und"]
    p15 = build_plan(g, np.arange(g.n) % 2, 4, layout="1.5d:2")
    comm = LocalComm(4, with_world(p15.groups(), 4))
    for fn, name in ((an.pagerank_parts, "PageRank"), (an.wcc_parts, "WCC"),
                     (wcc_pointer_jump_parts, "WCC by pointer jumping"), (lp_parts, "label propagation"),
                     (matching_parts, "matching"), (lambda *a, **k: an.sssp_parts(*a, 0, **k), "SSSP")):
        with pytest.raises(PlanError, match=rf"^{name} cannot run on this plan: its layout 1.5d:2 .*"
                                            r"plan the graph with --layout 1d, 2d:RxC or routed"):
            fn(p15.manifest, p15.ranks, comm)
    from partplan.runtime.steal import StealConfig
    plan, comm = plan_of("und", "2d:2x2", 4)
    with pytest.raises(PlanError, match="frontier stealing cannot run .* 2d:2x2 .*use a 1d plan"):
        an.sssp_parts(plan.manifest, plan.ranks, comm, 0, steal=StealConfig.from_cfg({"steal": {"mode": "fsteal"}}, 4))


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("key,layout,p", CASES)
def test_label_propagation(key, layout, p, kernels):
    g = GRAPHS[key]
    plan, comm = plan_of(key, layout, p)
    G = nx_sym(g)
    for weighted in (False, True):
        ids, lab, rec = lp_parts(plan.manifest, plan.ranks, comm, iterations=8, weighted=weighted, kernels=kernels)
        ref, changed = ref_lp(G, 8, weighted)
        assert np.array_equal(full(ids, lab, g.n, np.int64), ref)
        assert [r["changed"] for r in rec] == changed
        bytes_ok(rec)


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("key,layout,p", CASES)
def test_matching(key, layout, p, kernels):
    g = GRAPHS[key]
    plan, comm = plan_of(key, layout, p)
    G = nx_sym(g)
    ids, mate, weight, rec = matching_parts(plan.manifest, plan.ranks, comm, kernels=kernels)
    ref = ref_matching(G)
    assert np.array_equal(full(ids, mate, g.n, np.int64), ref)
    assert weight == pytest.approx(sum(G[a][b]["weight"] for a, b in enumerate(ref) if b > a), rel=1e-12)
    best = sum(G[a][b]["weight"] for a, b in nx.max_weight_matching(G))
    assert weight >= 0.5 * best
    bytes_ok(rec)
