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


def ref_lp(G: nx.Graph, iterations: int, weighted: bool, exact: bool = False):
    """Synchronous label propagation; ``exact``: weights summed as the decimals they print as
    (Fractions), so sums that are equal in decimal arithmetic tie."""
    from fractions import Fraction
    lab, changed = list(range(G.number_of_nodes())), []
    for _ in range(iterations):
        new = list(lab)
        for v in G.nodes:
            score: dict = {}
            for u in G[v]:
                w = G[v][u]["weight"] if weighted else 1.0
                score[lab[u]] = score.get(lab[u], 0) + (Fraction(repr(w)) if exact else w)
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


def test_weighted_label_ties_do_not_depend_on_the_summation_order():
    """Weights 0.1 / 0.2 / 0.3 / 0.6 / 0.7: label sums that are equal as decimals (0.1 + 0.2 + 0.3 and
    0.6) differ in float64 by the order of their terms, which the kernels and a 2D plan's partial sums
    change: the label used to depend on --kernels and the layout (6 and 11 of 300 vertices). Every
    kernel set and layout now gives the labels of an exact (decimal) reference, ties to the smallest."""
    rng = np.random.default_rng(11)
    n = 300
    r = rng.integers(0, n, 3000)
    c = (r + rng.integers(1, 6, 3000)) % n
    key = np.unique(np.minimum(r, c) * n + np.maximum(r, c))      # each pair once, one decimal weight
    w = rng.choice([0.1, 0.2, 0.3, 0.6, 0.7], key.size)
    g = Graph.from_edges(key // n, key % n, w, n=n, symmetrize=True)
    G = nx_sym(g)
    ref, changed = ref_lp(G, 6, True, exact=True)
    assert ref_lp(G, 6, True)[0].tolist() != ref.tolist()   # the case: float sums alone pick other labels
    for layout, p in LAYOUTS:
        part = np.random.default_rng(p).integers(0, parse_layout(layout, p).row_blocks, n)
        plan = build_plan(g, part, p, layout=layout)
        for kernels in KERNELS:
            ids, lab, rec = lp_parts(plan.manifest, plan.ranks, LocalComm(p, with_world(plan.groups(), p)),
                                     iterations=6, weighted=True, kernels=kernels)
            assert np.array_equal(full(ids, lab, n, np.int64), ref), (layout, kernels)
            assert [x["changed"] for x in rec] == changed


@pytest.mark.parametrize("layout,p", LAYOUTS)
def test_matching_weight_overflow_is_one_error(layout, p):
    """Matched edges whose weights sum past float64's range made the matched weight inf (and a numpy
    warning) at exit 0; it is one error on every rank (a sum that stays finite is reported:
    test_community's 1e308 + 2)."""
    g = Graph.from_edges([0, 2, 4], [1, 3, 5], [1e308, 1e308, 1.0], n=6, symmetrize=True)
    plan = build_plan(g, np.arange(6) % parse_layout(layout, p).row_blocks, p, layout=layout)
    for kernels in KERNELS:
        with pytest.raises(PlanError, match="^matching: the matched edges' weights sum past .* no float64 value"):
            matching_parts(plan.manifest, plan.ranks, LocalComm(p, with_world(plan.groups(), p)), kernels=kernels)


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


# ----------------------------------------------------------------------------- overflow / non-finite values
def _spmm_overflow_case(tmp_path):
    """A 2D plan and float32 features whose products overflow on the ranks that
    hold vertex 1 as a column (one row of H near float32's largest value)."""
    g = GRAPHS["und"]
    H = np.ones((g.n, 3), dtype=np.float32)
    H[1] = -3e38
    np.save(tmp_path / "H.npy", H)
    write_plan(build_plan(g, np.arange(g.n) % 4, 4, layout="2d:2x2"), tmp_path / "g2.plan")
    return str(tmp_path / "g2.plan"), str(tmp_path / "H.npy")


def test_spmm_overflow_is_one_error_naming_rank_step_and_cause(tmp_path, capsys):
    from partplan.cli.main import main
    from partplan.runtime.interpreter import Executor
    from partplan.runtime.ops import NumpyOps
    plan_dir, h = _spmm_overflow_case(tmp_path)
    assert main(["run", "spmm", plan_dir, "--backend", "local", "--feature-file", h, "--repeat", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("partplan: error: rank ")
    assert "(spmm, step" in err[0] and "overflow" in err[0] and "float32" in err[0]
    # the executor's check on every layout: the first step and rank that made the value
    for layout, p in LAYOUTS:
        plan, comm = plan_of("und", layout, p)
        ex = Executor(plan.manifest, plan.ranks, comm, NumpyOps("float32"))
        H = np.ones((GRAPHS["und"].n, 2), dtype=np.float32)
        H[1] = 3e38
        ins = [np.ascontiguousarray(H[rp.in_ids("forward")]) for rp in plan.ranks]
        outs = ex.run("forward", ins)
        with pytest.raises(PlanError, match=r"^rank \d+: step fwd\.\d+ \(spmm, step \d+ of \d+\) of the forward "
                                            r"program made a non-finite value \(overflow"):
            ex.check_finite("forward", ins, outs)
        ins64 = [np.ones_like(x) for x in ins]
        ex.check_finite("forward", ins64, ex.run("forward", ins64))  # finite: nothing to say


@pytest.mark.parametrize("layout,p", LAYOUTS)
def test_sssp_pagerank_and_lp_overflow_are_one_error(layout, p):
    g = Graph.from_edges([0, 1, 2, 3, 5], [1, 2, 3, 4, 6], [1e308, 1e308, 1.0, 1.0, 2.0], n=8, symmetrize=False)
    plan = build_plan(g, np.arange(8) % parse_layout(layout, p).row_blocks, p, layout=layout)
    for kernels in KERNELS:
        with pytest.raises(PlanError, match=r"^rank \d+: SSSP relaxation of edge 1 -> 2 overflowed float64"):
            an.sssp_parts(plan.manifest, plan.ranks, LocalComm(p, plan.groups()), 0, kernels=kernels)
    ids, d, _ = an.sssp_parts(plan.manifest, plan.ranks, LocalComm(p, plan.groups()), 5)  # no overflow from 5
    assert full(ids, d, 8)[6] == 2.0
    for weighted, ok in ((True, False), (False, True)):  # the weights total 2e308 + 5: their sums could overflow
        if ok:
            lp_parts(plan.manifest, plan.ranks, LocalComm(p, plan.groups()), weighted=weighted)
        else:
            with pytest.raises(PlanError, match="^label propagation --weighted: the plan's edge weights sum past"):
                lp_parts(plan.manifest, plan.ranks, LocalComm(p, plan.groups()), weighted=weighted)
    g2 = Graph.from_edges([0, 0, 2], [1, 2, 3], [1e308, 1e308, 1.0], n=5, symmetrize=False)
    plan2 = build_plan(g2, np.arange(5) % parse_layout(layout, p).row_blocks, p, layout=layout)
    with pytest.raises(PlanError, match=r"^rank \d+: PageRank's out-weight sum .* of vertex 0 is not finite"):
        an.pagerank_parts(plan2.manifest, plan2.ranks, LocalComm(p, plan2.groups()))


@pytest.mark.dist
def test_gloo_spmm_overflow_ends_every_rank_with_the_same_line(tmp_path, capsys):
    from partplan.cli.main import main
    plan_dir, h = _spmm_overflow_case(tmp_path)
    assert main(["run", "spmm", plan_dir, "--nprocs", "4", "--feature-file", h, "--repeat", "1", "-q"]) == 2
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("partplan: error:")]
    assert len(err) == 1 and " | " not in err[0], err
    assert "(spmm, step" in err[0] and "overflow" in err[0]


# ----------------------------------------------------------------------------- gloo launches on 2D
@pytest.mark.dist
@pytest.mark.slow
def test_gloo_p4_every_new_2d_job_on_a_directed_plan(tmp_path, capsys):
    from partplan.cli.main import main
    g = GRAPHS["dir"]
    plan_dir = str(tmp_path / "d2.plan")
    write_plan(build_plan(g, np.random.default_rng(4).integers(0, 4, g.n), 4, layout="2d:2x2"), plan_dir)
    G = nx_sym(g)
    runs = {"pagerank": ["--tol", "1e-10"], "wcc": [], "sssp": ["--root", "0"], "lp": ["--iterations", "8"],
            "matching": []}
    for job, extra in runs.items():
        out = tmp_path / f"{job}.npy"
        assert main(["run", job, plan_dir, "--nprocs", "4", "--json", "--output", str(out), *extra]) == 0, job
        rep = json.loads(capsys.readouterr().out)
        assert rep["backend"] == "gloo" and rep["layout"].startswith("2d") and rep["bytes_match"], job
        got = np.load(out)
        if job == "pagerank":
            ref = nx.pagerank(nx_digraph(g), alpha=0.85, tol=1e-10)
            assert np.abs(got - np.array([ref[i] for i in range(g.n)])).sum() < 1e-9
        elif job == "wcc":
            assert np.array_equal(got, weak_smallest(g))
        elif job == "sssp":
            ref = cg.dijkstra(g.to_scipy(), indices=0)
            assert np.array_equal(np.isinf(got), np.isinf(ref))
            assert np.allclose(got[np.isfinite(ref)], ref[np.isfinite(ref)], rtol=1e-12, atol=0)
        elif job == "lp":
            assert np.array_equal(got, ref_lp(G, 8, False)[0])
        else:
            assert np.array_equal(got, ref_matching(G))
