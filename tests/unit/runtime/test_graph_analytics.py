"""PageRank vs networkx, WCC vs scipy connected_components (weak), SSSP vs
scipy dijkstra — on LocalComm at several rank counts and on gloo p = 2
through the CLI; bad inputs."""
import json

import networkx as nx
import numpy as np
import pytest
import scipy.sparse.csgraph as cg

from partplan import Graph, PlanError
from partplan.cli.main import main
from partplan.plan import build_plan, write_plan
from partplan.runtime import analytics as an
from partplan.runtime.comm import LocalComm


def graph(directed, n=300, m=1200, seed=0, weighted=True):
    rng = np.random.default_rng(seed)
    w = rng.random(m) + 0.1 if weighted else None
    # a few isolated vertices and sinks (dangling) on purpose: ids >= n - 10 get no edges
    s, d = rng.integers(0, n - 10, m), rng.integers(0, n - 10, m)
    return Graph.from_edges(s, d, w, n=n, symmetrize=not directed)


def full(ids, vals, n, dtype=float):
    out = np.zeros(n, dtype=dtype)
    for i, v in zip(ids, vals):
        out[i] = v
    return out


def plan_of(g, p, seed=0):
    plan = build_plan(g, np.random.default_rng(seed).integers(0, p, g.n), p)
    return plan, LocalComm(p, plan.groups())


def nx_pagerank(g, tol):
    G = nx.from_scipy_sparse_array(g.to_scipy(), create_using=nx.DiGraph)
    ref = nx.pagerank(G, alpha=0.85, tol=tol)
    return np.array([ref[i] for i in range(g.n)])


@pytest.mark.parametrize("directed,weighted,p", [(False, False, 2), (True, True, 3), (True, False, 1)])
def test_pagerank_equals_networkx(directed, weighted, p):
    g = graph(directed, weighted=weighted)
    plan, comm = plan_of(g, p)
    ids, x, rec = an.pagerank_parts(plan.manifest, plan.ranks, comm, tol=1e-10)
    pr = full(ids, x, g.n)
    assert np.abs(pr - nx_pagerank(g, 1e-10)).sum() < 1e-9
    assert all(r["bytes"] == r["bytes_measured"] for r in rec)


@pytest.mark.parametrize("weights", [[1.0, -2.0, 1.0], [1.0, -1.0, 3.0]])
def test_pagerank_refuses_a_negative_edge_weight_on_every_rank(weights):
    """A negative weight makes an edge's share of its vertex's out-weight no probability (+1 and -1
    out of one vertex even make it dangling): one PlanError naming the weight, on every rank."""
    g = Graph(np.array([0, 1, 3, 3]), np.array([1, 0, 2]), np.array(weights))    # 0->1; 1->0, 1->2
    plan, comm = plan_of(g, 2)
    with pytest.raises(PlanError, match=f"PageRank needs non-negative edge weights.*weighs {min(weights):g}"):
        an.pagerank_parts(plan.manifest, plan.ranks, comm)


@pytest.mark.parametrize("directed,p", [(False, 3), (True, 2)])
def test_wcc_labels_are_the_smallest_id_of_scipys_weak_components(directed, p):
    g = graph(directed, seed=1, m=350)  # sparse: many components
    plan, comm = plan_of(g, p)
    ids, lab, rec = an.wcc_parts(plan.manifest, plan.ranks, comm)
    nc, cl = cg.connected_components(g.to_scipy(), directed=True, connection="weak")
    assert nc > 5
    smallest = np.full(nc, g.n)
    np.minimum.at(smallest, cl, np.arange(g.n))
    assert np.array_equal(full(ids, lab, g.n, np.int64), smallest[cl])
    assert all(r["bytes"] == r["bytes_measured"] <= min(r["bytes_sparse"], r["bytes_dense"]) for r in rec)


@pytest.mark.parametrize("directed,weighted,p", [(True, True, 3), (False, True, 2), (False, False, 2)])
def test_sssp_equals_dijkstra(directed, weighted, p):
    g = graph(directed, seed=2, weighted=weighted)
    plan, comm = plan_of(g, p)
    for root in (0, 5):
        ids, dist, rec = an.sssp_parts(plan.manifest, plan.ranks, comm, root)
        ref = cg.dijkstra(g.to_scipy(), indices=root)
        got = full(ids, dist, g.n)
        assert np.array_equal(np.isinf(got), np.isinf(ref))
        fin = np.isfinite(ref)
        assert np.allclose(got[fin], ref[fin], rtol=1e-12, atol=0)


def test_negative_weight_and_bad_root_are_refused():
    g = graph(True, seed=3)
    plan, comm = plan_of(g, 2)
    key = [k for k in plan.ranks[1].arrays if k.startswith("bwd.") and k.endswith(".data")][0]
    plan.ranks[1].arrays[key] = plan.ranks[1].arrays[key].copy()
    plan.ranks[1].arrays[key][3] = -2.0
    with pytest.raises(PlanError, match="non-negative"):
        an.sssp_parts(plan.manifest, plan.ranks, comm, 0)
    with pytest.raises(PlanError, match="root"):
        an.sssp_parts(plan.manifest, plan.ranks, comm, g.n)
    with pytest.raises(PlanError, match="damping"):
        an.pagerank_parts(plan.manifest, plan.ranks, comm, damping=1.5)
    with pytest.raises(an.ConvergenceError):
        an.pagerank_parts(plan.manifest, plan.ranks, comm, tol=1e-15, max_iter=3)


def _cli_plan(tmp_path):
    g = graph(True, seed=4)
    write_plan(build_plan(g, np.arange(g.n) % 2, 2), tmp_path / "g.plan")
    return g, str(tmp_path / "g.plan")


@pytest.mark.dist
def test_gloo_p2_pagerank_and_local_wcc_sssp_through_the_cli(tmp_path, capsys):
    """pagerank over gloo (wcc over gloo: test_jobs.py), wcc and sssp on the local backend."""
    g, plan = _cli_plan(tmp_path)
    assert main(["run", "pagerank", plan, "--nprocs", "2", "--tol", "1e-10", "--output", str(tmp_path / "pr.npy"),
                 "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["bytes_match"]
    assert np.abs(np.load(tmp_path / "pr.npy") - nx_pagerank(g, 1e-10)).sum() < 1e-9
    assert main(["run", "sssp", plan, "--backend", "local", "--root", "3", "--output", str(tmp_path / "d.npy")]) == 0
    ref = cg.dijkstra(g.to_scipy(), indices=3)
    d = np.load(tmp_path / "d.npy")
    assert np.array_equal(np.isinf(d), np.isinf(ref)) and np.allclose(d[np.isfinite(d)], ref[np.isfinite(ref)])
    assert main(["run", "wcc", plan, "--backend", "local", "--output", str(tmp_path / "wcc.npy")]) == 0
    nc, cl = cg.connected_components(g.to_scipy(), directed=True, connection="weak")
    lab = np.load(tmp_path / "wcc.npy")
    assert lab.dtype == np.int64 and np.unique(lab).size == nc
    assert main(["run", "sssp", plan, "--backend", "local", "--root", str(g.n)]) == 2
    assert main(["run", "pagerank", plan, "--backend", "local", "--output", str(tmp_path / "pr.txt")]) == 2


def test_real_graph_polblogs_bfs_pagerank_wcc():
    from partplan import datasets
    from partplan.runtime.bfs import bfs_local
    from partplan.runtime.graph500 import validate_bfs_tree
    g = datasets.load_graph("polblogs")
    plan, comm = plan_of(g, 3)
    for root in (0, 700):
        r = bfs_local(plan, root)
        L = cg.shortest_path(g.to_scipy(), unweighted=True, indices=root)
        assert np.array_equal(r.levels, np.where(np.isinf(L), -1, L).astype(np.int64))
        assert validate_bfs_tree(g.rows, g.indices, root, r.parents, levels=r.levels).ok
    ids, x, _ = an.pagerank_parts(plan.manifest, plan.ranks, comm, tol=1e-10)
    assert np.abs(full(ids, x, g.n) - nx_pagerank(g, 1e-10)).sum() < 1e-9
    ids, lab, _ = an.wcc_parts(plan.manifest, plan.ranks, comm)
    nc, cl = cg.connected_components(g.to_scipy(), directed=False)
    smallest = np.full(nc, g.n)
    np.minimum.at(smallest, cl, np.arange(g.n))
    assert np.array_equal(full(ids, lab, g.n, np.int64), smallest[cl])
