"""Graph traversals on routed plans (issue 9's exchange through domain
monitors): BFS / WCC / SSSP / PageRank on LocalComm equal scipy / networkx and
the flat 1D plan exactly; the crossing messages of each level equal a count
made with numpy from the partition and the domain map (not from the code under
test) and are fewer than a flat plan's; one gloo p = 4 routed BFS validated."""
import json

import networkx as nx
import numpy as np
import pytest
import scipy.sparse.csgraph as cg

from partplan import Graph
from partplan.cli.main import main
from partplan.datasets.generators import rmat_edges
from partplan.plan import build_plan
from partplan.runtime import analytics as an
from partplan.runtime.bfs import BfsEngine, bfs_local
from partplan.runtime.comm import LocalComm
from partplan.runtime.graph500 import search_keys, validate_bfs_tree

SPECS = (("routed:domain:2", 4), ("routed:source:2", 4), ("routed:domain:2", 8), ("routed:domain:4", 8),
         ("routed:domain:2,4", 8), ("routed:source:2,4", 8))  # domain:4 on 8 ranks: 4 lanes per domain pair


def rmat(scale, directed, seed):
    s, d = rmat_edges(scale, seed=seed)
    g = Graph.from_edges(s, d, n=1 << scale, symmetrize=not directed,
                         self_loops="remove" if not directed else "keep")
    return s, d, g


def levels_of(g, root):
    L = cg.shortest_path(g.to_scipy(), unweighted=True, indices=root)
    return np.where(np.isinf(L), -1, L).astype(np.int64)


def full(ids, vals, n, dtype=float):
    out = np.zeros(n, dtype=dtype)
    for i, v in zip(ids, vals):
        out[i] = v
    return out


@pytest.mark.parametrize("directed", [False, True])
def test_routed_bfs_equals_scipy_and_the_flat_tree_in_every_direction(directed):
    s, d, g = rmat(10, directed, seed=3)
    roots = [int(r) for r in search_keys(s, d, g.n, 2, seed=5)]
    flat = {r: bfs_local(build_plan(g, np.arange(g.n) % 3, 3), r) for r in roots}
    for spec, p in SPECS:
        plan = build_plan(g, np.random.default_rng(p).integers(0, p, g.n), p, layout=spec)
        steps = [st for st in plan.manifest["programs"]["forward"]["steps"] if st["op"] == "alltoallv"]
        assert len(steps) >= 2  # a chain through the monitors, not one exchange
        for direction in ("top-down", "bottom-up", "auto"):
            eng = BfsEngine(plan.manifest, plan.ranks, LocalComm(p, plan.groups()), direction=direction)
            for root in roots:
                r = eng.search(root)
                assert np.array_equal(r.levels, levels_of(g, root))
                assert np.array_equal(r.parents, flat[root].parents), (spec, direction)
                assert validate_bfs_tree(s, d, root, r.parents, levels=r.levels, directed=directed).ok
                for lv in r.records:
                    assert lv.bytes == lv.bytes_measured == sum(lv.bytes_by_family.values())
                    assert lv.messages == sum(lv.messages_by_family.values()) == sum(lv.messages_per_rank)
                    assert lv.bytes <= min(lv.bytes_sparse, lv.bytes_dense)
                    assert set(lv.bytes_by_family) >= {"dom", "cross"}


def _level_pairs(g, part, lev, level):
    """(sender, reader) rank pairs of one level's frontier in a flat exchange: owner
    part[u] of a frontier vertex u → the rank part[v] of every out-neighbour v of u."""
    A = g.to_scipy().tocoo()
    u, v = A.row, A.col
    keep = (lev[u] == level) & (part[u] != part[v])
    return part[u][keep], part[v][keep]


def test_routing_cuts_the_crossing_messages_of_every_level():
    """8 ranks in 4 domains of 2, a random-partitioned R-MAT graph: per level, the flat
    exchange sends one message per (owner, reader) rank pair with a frontier vertex
    between them; the domain route one per (domain, domain) pair, the source route
    one per (owner, reader domain) pair — counted here with numpy."""
    s, d, g = rmat(11, False, seed=7)
    p, D = 8, 2
    part = np.random.default_rng(0).integers(0, p, g.n)
    root = int(search_keys(s, d, g.n, 1, seed=2)[0])
    lev = levels_of(g, root)
    flat = bfs_local(build_plan(g, part, p), root, direction="top-down")
    runs = {route: bfs_local(build_plan(g, part, p, layout=f"routed:{route}:{D}"), root, direction="top-down")
            for route in ("domain", "source")}
    tot_flat_cross = tot_routed = 0
    for k, lv in enumerate(flat.records):
        q, r = _level_pairs(g, part, lev, k)
        pairs = np.unique(q * p + r)
        assert lv.messages == pairs.size  # the flat run's messages: one per (owner, reader) pair
        qq, rr = pairs // p, pairs % p
        inter = qq // D != rr // D
        flat_cross = int(inter.sum())
        dom_pairs = np.unique((qq // D * p + rr // D)[inter]).size
        src_pairs = np.unique((qq * p + rr // D)[inter]).size
        assert runs["domain"].records[k].messages_by_family["cross"] == dom_pairs
        assert runs["source"].records[k].messages_by_family["cross"] == src_pairs
        assert dom_pairs <= src_pairs <= flat_cross
        tot_flat_cross += flat_cross
        tot_routed += dom_pairs
    assert tot_routed < 0.5 * tot_flat_cross
    for run in runs.values():
        assert np.array_equal(run.parents, flat.parents)


@pytest.mark.parametrize("spec,p", [("routed:domain:2", 4), ("routed:source:2,4", 8)])
def test_routed_wcc_sssp_pagerank_equal_the_oracles(spec, p):
    rng = np.random.default_rng(p)
    n, m = 300, 420  # sparse: many weak components
    src, dst = rng.integers(0, n - 10, m), rng.integers(0, n - 10, m)
    g = Graph.from_edges(src, dst, rng.random(m) + 0.1, n=n)  # directed, weighted
    plan = build_plan(g, rng.integers(0, p, n), p, layout=spec)
    comm = LocalComm(p, plan.groups())
    ids, lab, rec = an.wcc_parts(plan.manifest, plan.ranks, comm)
    _, cl = cg.connected_components(g.to_scipy(), directed=True, connection="weak")
    smallest = np.full(cl.max() + 1, n)
    np.minimum.at(smallest, cl, np.arange(n))
    assert np.array_equal(full(ids, lab, n, np.int64), smallest[cl])
    assert all(r["bytes"] == r["bytes_measured"] == sum(r["bytes_by_family"].values()) for r in rec)
    assert rec[0]["messages_by_family"]["cross"] > 0
    root = int(src[0])
    ids, dist, rec = an.sssp_parts(plan.manifest, plan.ranks, comm, root)
    ref = cg.dijkstra(g.to_scipy(), indices=root)
    assert np.allclose(full(ids, dist, n), ref, rtol=1e-12, atol=0)
    assert all(r["bytes"] == r["bytes_measured"] == sum(r["bytes_by_family"].values()) for r in rec)
    ids, x, rec = an.pagerank_parts(plan.manifest, plan.ranks, comm, tol=1e-10)
    G = nx.from_scipy_sparse_array(g.to_scipy(), create_using=nx.DiGraph)
    ref = nx.pagerank(G, alpha=0.85, tol=1e-10)
    assert np.abs(full(ids, x, n) - np.array([ref[i] for i in range(n)])).sum() < 1e-9
    assert all(r["bytes"] == r["bytes_measured"] for r in rec)


@pytest.mark.dist
@pytest.mark.slow
def test_gloo_p4_routed_graph500_two_domains_of_two(capsys):
    """The one p = 4 gloo launch: 2 domains of 2, several roots, every tree validated."""
    assert main(["run", "graph500", "--scale", "9", "--nprocs", "4", "--layout", "routed:domain:2",
                 "--partition", "block", "--roots", "4", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["layout"] == "routed:domain:2" and rep["all_valid"] and len(rep["searches"]) == 4
    assert rep["bytes_match"] and rep["chosen_mode_le_other"]
    assert set(rep["bytes_by_family"]) == {"dom", "cross"} and rep["messages_by_family"]["cross"] > 0
    assert {lv["direction"] for s in rep["searches"] for lv in s["levels"]} == {"top-down", "bottom-up"}


class _PayloadCountingComm(LocalComm):
    """LocalComm that sums the real length of every payload handed to
    alltoallv (the bytes the buffers hold, not the counts the caller claims)."""

    payload = 0

    def alltoallv(self, family, sends, send_counts, recv_counts, outs, what=""):
        for r in self.local:
            if self.member(family, r) is not None:
                _PayloadCountingComm.payload += int(np.asarray(sends[r]).nbytes)
        return super().alltoallv(family, sends, send_counts, recv_counts, outs, what)


@pytest.mark.parametrize("directed", [False, True])
def test_reported_bytes_equal_the_payload_buffers(directed):
    """Per search, the bytes the BFS report claims (1D, 2D with fold and
    visited sync, routed chains; every direction) equal the lengths of the
    buffers actually passed to the comm."""
    _, _, g = rmat(9, directed, 2)
    for spec, p in (("1d", 4), ("2d:2x2", 4), ("2d:1x3", 3), ("routed:domain:2", 4), ("routed:source:2,4", 8)):
        plan = build_plan(g, np.random.default_rng(p).integers(0, p, g.n), p, layout=spec)
        for direction in ("top-down", "bottom-up", "auto"):
            eng = BfsEngine(plan.manifest, plan.ranks, _PayloadCountingComm(p, plan.groups()), direction=direction)
            _PayloadCountingComm.payload = 0
            r = eng.search(1)
            assert sum(lv.bytes for lv in r.records) == _PayloadCountingComm.payload, (spec, direction)


def test_a_routed_plan_with_no_cut_edge_runs():
    """No rank pair communicates: the routed chain has no step (found in review: it crashed)."""
    g = Graph.from_edges([0, 2], [1, 3], n=4, symmetrize=True)
    plan = build_plan(g, np.array([0, 0, 2, 2]), 4, layout="routed:domain:2")
    assert bfs_local(plan, 0).parents.tolist() == [0, 0, -1, -1]
    comm = LocalComm(4, plan.groups())
    ids, lab, _ = an.wcc_parts(plan.manifest, plan.ranks, comm)
    assert full(ids, lab, 4, np.int64).tolist() == [0, 0, 2, 2]
    ids, dist, _ = an.sssp_parts(plan.manifest, plan.ranks, comm, 2)
    assert full(ids, dist, 4).tolist() == [np.inf, np.inf, 0.0, 1.0]
