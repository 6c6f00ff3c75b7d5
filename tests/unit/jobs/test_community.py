"""Pointer-jumping WCC, label propagation and matching against independent
references — scipy's connected components (smallest id), a plain numpy label
propagation with the tie rule, the sequential greedy matching in the stated
order and networkx's exact maximum weight matching — on 1D and routed plans,
p = 1, 3, 4, native and torch kernels (LocalComm); the CLI jobs; one gloo launch."""
from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest
import scipy.sparse.csgraph as cg

from partplan import Graph
from partplan.cli.main import main
from partplan.errors import PlanError
from partplan.layouts import parse_layout
from partplan.plan import build_plan, write_plan
from partplan.runtime.analytics import wcc_parts
from partplan.runtime.comm import LocalComm
from partplan.runtime.lp import lp_parts
from partplan.runtime.matching import matching_parts
from partplan.runtime.neighbours import with_world
from partplan.runtime.pointer_jump import wcc_pointer_jump_parts

LAYOUTS = [("1d", 1), ("1d", 3), ("routed:domain:2", 4)]
KERNELS = ["native", "torch"]


def random_graph(n, m, seed, *, directed, weights="int"):
    rng = np.random.default_rng(seed)
    s, d = rng.integers(0, n - 6, m), rng.integers(0, n - 6, m)  # ids >= n - 6 isolated
    w = None if weights is None else rng.integers(1, 5, m).astype(float)
    return Graph.from_edges(s, d, w, n=n, symmetrize=not directed)


@pytest.fixture(scope="module")
def graphs():
    return {"und": random_graph(150, 260, 1, directed=False), "dir": random_graph(150, 260, 2, directed=True),
            "dense": random_graph(120, 700, 3, directed=False), "dense_dir": random_graph(120, 700, 4, directed=True)}


_PLANS: dict = {}


def plan_of(g, key, layout, p):
    k = (key, layout, p)
    if k not in _PLANS:
        blocks = parse_layout(layout, p).row_blocks
        part = np.random.default_rng(p).integers(0, blocks, g.n)
        _PLANS[k] = build_plan(g, part, p, layout=layout)
    plan = _PLANS[k]
    return plan, LocalComm(p, with_world(plan.groups(), p))


def full(ids, vals, n):
    out = np.full(n, -7, dtype=np.int64)
    for i, v in zip(ids, vals):
        out[i] = v
    assert (out != -7).all()
    return out


def sym_edges(g):
    """Symmetrized (u, v, w) without self loops, each undirected pair once, w = the larger stored value."""
    A = g.to_scipy().tocoo()
    u, v, w = A.row.astype(np.int64), A.col.astype(np.int64), A.data.astype(float)
    a, b = np.minimum(u, v), np.maximum(u, v)
    keep = a != b
    a, b, w = a[keep], b[keep], w[keep]
    best = {}
    for x, y, z in zip(a.tolist(), b.tolist(), w.tolist()):
        best[(x, y)] = max(best.get((x, y), -np.inf), z)
    return best


def smallest_ids(g):
    nc, cl = cg.connected_components(g.to_scipy(), directed=True, connection="weak")
    sm = np.full(nc, g.n)
    np.minimum.at(sm, cl, np.arange(g.n))
    return sm[cl]


def numpy_lp(g, iterations, weighted):
    """Synchronous LP, written plainly: neighbours once (symmetrized), ties to the smallest label."""
    nbr: list[dict] = [{} for _ in range(g.n)]
    for (a, b), w in sym_edges(g).items():
        nbr[a][b] = w
        nbr[b][a] = w
    lab, changed = np.arange(g.n), []
    for _ in range(iterations):
        new = lab.copy()
        for v in range(g.n):
            if not nbr[v]:
                continue
            score: dict = {}
            for u, w in nbr[v].items():
                score[lab[u]] = score.get(lab[u], 0.0) + (w if weighted else 1.0)
            top = max(score.values())
            new[v] = min(lb for lb, s in score.items() if s == top)
        changed.append(int((new != lab).sum()))
        lab = new
        if changed[-1] == 0:
            break
    return lab, changed


def greedy_matching(g):
    """The sequential greedy matching over edges ordered by (weight desc, min id, max id)."""
    e = sorted(((-w, a, b) for (a, b), w in sym_edges(g).items() if w > 0))
    mate = np.full(g.n, -1)
    for _, a, b in e:
        if mate[a] < 0 and mate[b] < 0:
            mate[a], mate[b] = b, a
    return mate


def check_bytes(rec):
    assert rec and all(r["bytes"] == r["bytes_measured"] for r in rec)


# ----------------------------------------------------------------------------- pointer-jump WCC
@pytest.mark.parametrize("layout,p", LAYOUTS + [("2d:2x2", 4), ("2d:1x3", 3)])
@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("key", ["und", "dir"])
def test_pointer_jump_labels_are_scipys_components_smallest_id(graphs, key, kernels, layout, p):
    g = graphs[key]
    plan, comm = plan_of(g, key, layout, p)
    ids, lab, rec = wcc_pointer_jump_parts(plan.manifest, plan.ranks, comm, kernels=kernels)
    assert np.array_equal(full(ids, lab, g.n), smallest_ids(g))
    check_bytes(rec)
    if p > 1:  # the requests to the parents' owners are on the wire, and counted
        assert sum(r["bytes_requests"] for r in rec) > 0


def _path_and_grid():
    rng = np.random.default_rng(7)
    n = 256
    perm = rng.permutation(n)  # ids scattered along the path: no id order to exploit
    path = Graph.from_edges(perm[:-1], perm[1:], n=n, symmetrize=True)
    s = 16
    idx = np.arange(s * s).reshape(s, s)
    u = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    v = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    gp = rng.permutation(s * s)
    grid = Graph.from_edges(gp[u], gp[v], n=s * s, symmetrize=True)
    return path, grid


@pytest.mark.parametrize("kernels", KERNELS)
def test_pointer_jump_rounds_are_logarithmic_and_beat_propagation_on_a_long_path(kernels):
    path, grid = _path_and_grid()
    for name, g in (("path", path), ("grid", grid)):
        plan = build_plan(g, np.arange(g.n) % 3, 3)
        comm = LocalComm(3, with_world(plan.groups(), 3))
        ids, lab, rec = wcc_pointer_jump_parts(plan.manifest, plan.ranks, comm, kernels=kernels)
        assert np.array_equal(full(ids, lab, g.n), np.zeros(g.n, np.int64)), name
        assert len(rec) <= 2 * np.log2(g.n), (name, len(rec))
        check_bytes(rec)
        if name == "path":  # diameter 255 > 50
            _, _, rec2 = wcc_parts(plan.manifest, plan.ranks, LocalComm(3, plan.groups()), kernels=kernels)
            assert len(rec) < len(rec2)


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("directed", [False, True])
def test_propagation_spreads_through_each_ranks_own_components(kernels, directed):
    """A 40 x 40 grid (scattered ids) cut into 4 bands of rows: each round a label crosses the
    edges between parts and spreads through the rank's own component at once, so propagation
    takes about as many rounds as bands, not the grid's diameter (78); labels = scipy's
    components mapped to their smallest id, bytes counted = measured."""
    s, k = 40, 4
    idx = np.arange(s * s).reshape(s, s)
    u = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    v = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    keep = np.ones(u.size, bool)
    keep[np.arange(0, u.size, 7)] = False             # some holes: several components per band
    gp = np.random.default_rng(5).permutation(s * s)
    g = Graph.from_edges(gp[u[keep]], gp[v[keep]], n=s * s, symmetrize=not directed)
    part = np.empty(s * s, np.int64)
    part[gp] = np.arange(s * s) // (s * s // k)       # band b: grid rows 10b .. 10b + 9
    plan = build_plan(g, part, k)
    ids, lab, rec = wcc_parts(plan.manifest, plan.ranks, LocalComm(k, plan.groups()), kernels=kernels)
    nc, comp = cg.connected_components(g.to_scipy(), directed=True, connection="weak")
    low = np.full(nc, s * s)
    np.minimum.at(low, comp, np.arange(s * s))
    assert np.array_equal(full(ids, lab, g.n), low[comp])
    assert len(rec) <= 2 * k + 2, len(rec)
    check_bytes(rec)


def test_pointer_jump_needs_a_world_group(graphs):
    plan = build_plan(graphs["und"], np.arange(graphs["und"].n) % 4, 4, layout="routed:domain:2")
    with pytest.raises(PlanError, match="world"):
        wcc_pointer_jump_parts(plan.manifest, plan.ranks, LocalComm(4, plan.groups()))


# ----------------------------------------------------------------------------- label propagation
# 2D label propagation and matching symmetrize a directed plan's blocks like 1D does
LAYOUTS_2D = [("2d:2x2", 4), ("2d:1x3", 3)]
LP_CASES = [(k, w, lay, p) for k, w in [("dense", False), ("dense", True), ("dense_dir", False)]
            for lay, p in LAYOUTS + LAYOUTS_2D]
MATCHING_CASES = [(k, lay, p) for k in ("dense", "dense_dir", "und") for lay, p in LAYOUTS + LAYOUTS_2D]


@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("key,weighted,layout,p", LP_CASES)
def test_lp_equals_the_numpy_reference(graphs, key, weighted, kernels, layout, p):
    g = graphs[key]
    plan, comm = plan_of(g, key, layout, p)
    ids, lab, rec = lp_parts(plan.manifest, plan.ranks, comm, iterations=12, weighted=weighted, kernels=kernels)
    ref, changed = numpy_lp(g, 12, weighted)
    assert np.array_equal(full(ids, lab, g.n), ref)
    assert [r["changed"] for r in rec] == changed
    check_bytes(rec)
    if p > 1:  # only changed labels travel: never more than the sparse or dense encoding of them
        assert all(r["bytes"] - r.get("bytes_counts", 0) <= min(r["bytes_sparse"], r["bytes_dense"]) for r in rec)
    if layout.startswith("2d") and p > 1:  # the partial counts travel along the grid row (2d:RxC, C > 1)
        assert sum(r["bytes_by_family"]["row"] for r in rec) == sum(r["bytes_counts"] for r in rec) > 0


def test_lp_refuses_a_bad_iteration_count_and_a_1_5d_plan(graphs):
    g = graphs["und"]
    plan, comm = plan_of(g, "und", "1d", 3)
    with pytest.raises(PlanError, match="iterations"):
        lp_parts(plan.manifest, plan.ranks, comm, iterations=0)
    p15 = build_plan(g, np.arange(g.n) % 2, 4, layout="1.5d:2")
    for fn in (lp_parts, matching_parts, wcc_pointer_jump_parts):
        with pytest.raises(PlanError, match="cannot run on this plan"):
            fn(p15.manifest, p15.ranks, LocalComm(4, with_world(p15.groups(), 4)))


# ----------------------------------------------------------------------------- matching
@pytest.mark.parametrize("kernels", KERNELS)
@pytest.mark.parametrize("key,layout,p", MATCHING_CASES)
def test_matching_equals_greedy_and_halves_networkx(graphs, key, kernels, layout, p):
    g = graphs[key]
    plan, comm = plan_of(g, key, layout, p)
    ids, mate, weight, rec = matching_parts(plan.manifest, plan.ranks, comm, kernels=kernels)
    ref = greedy_matching(g)
    got = full(ids, mate, g.n)
    assert np.array_equal(got, ref)
    w = sym_edges(g)
    ref_w = sum(w[(a, int(b))] for a, b in enumerate(ref) if b > a)
    assert weight == pytest.approx(ref_w, rel=1e-12)
    check_bytes(rec)
    if key == "und" and kernels == "native" and p == 3:
        G = nx.Graph()
        G.add_weighted_edges_from((a, b, x) for (a, b), x in w.items())
        best = sum(G[a][b]["weight"] for a, b in nx.max_weight_matching(G))
        assert weight >= 0.5 * best


def test_matching_ties_go_to_the_smaller_ids():
    # a 4-cycle of equal weights plus a self loop: the order (min id, max id) decides -> (0, 1) then (2, 3)
    g = Graph.from_edges([0, 1, 2, 3, 4], [1, 2, 3, 0, 4], n=6, symmetrize=True)
    plan = build_plan(g, np.array([0, 1, 0, 1, 0, 1]), 2)
    ids, mate, weight, _ = matching_parts(plan.manifest, plan.ranks, LocalComm(2, plan.groups()))
    assert full(ids, mate, 6).tolist() == [1, 0, 3, 2, -1, -1]
    assert weight == 2.0


@pytest.mark.parametrize("layout,p", [("1d", 2), ("2d:1x2", 2)])
def test_matching_weight_near_the_float_maximum_is_finite(layout, p):
    """Weights of 1e308: the matched weight 1e308 + 2 is finite (each edge is seen from both ends;
    twice 1e308 overflowed to inf before the halving)."""
    g = Graph.from_edges([0, 1, 2], [1, 2, 3], n=4, weights=np.array([1e308, 1e308, 2.0]), symmetrize=True)
    plan = build_plan(g, np.array([0, 1, 1, 0]), p, layout=layout)
    ids, mate, weight, _ = matching_parts(plan.manifest, plan.ranks, LocalComm(p, with_world(plan.groups(), p)))
    assert full(ids, mate, 4).tolist() == [1, 0, 3, 2]
    assert np.isfinite(weight) and weight == pytest.approx(1e308, rel=1e-15)


# ----------------------------------------------------------------------------- the CLI jobs
@pytest.fixture(scope="module")
def plan_dir(tmp_path_factory, graphs):
    d = tmp_path_factory.mktemp("community")
    g = graphs["dense"]
    write_plan(build_plan(g, np.arange(g.n) % 3, 3), d / "g.plan")
    write_plan(build_plan(g, np.arange(g.n) % 4, 4, layout="2d:2x2"), d / "g2.plan")
    write_plan(build_plan(g, np.arange(g.n) % 2, 4, layout="1.5d:2"), d / "g15.plan")
    return d, g


def test_cli_lp_matching_and_pointer_jump(plan_dir, capsys):
    d, g = plan_dir
    plan = str(d / "g.plan")
    assert main(["run", "wcc", plan, "--backend", "local", "--method", "pointer-jump", "--json",
                 "--output", str(d / "wcc.npy")]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["method"] == "pointer-jump" and rep["bytes_match"]
    assert rep["bytes_predicted"] == rep["bytes_measured"] > 0
    assert np.array_equal(np.load(d / "wcc.npy"), smallest_ids(g))
    assert main(["run", "lp", plan, "--backend", "local", "--iterations", "7", "--weighted", "--json",
                 "--output", str(d / "lp.npy")]) == 0
    rep = json.loads(capsys.readouterr().out)
    ref, changed = numpy_lp(g, 7, True)
    assert np.array_equal(np.load(d / "lp.npy"), ref)
    assert rep["changed"] == changed and rep["iterations"] == len(changed)
    assert rep["communities"] == np.unique(ref).size and rep["bytes_match"]
    assert main(["run", "matching", plan, "--backend", "local", "--output", str(d / "mate.npy")]) == 0
    out = capsys.readouterr().out
    mate = np.load(d / "mate.npy")
    assert np.array_equal(mate, greedy_matching(g))
    assert f"size               {int((mate >= 0).sum()) // 2}" in out
    assert main(["run", "wcc", plan, "--backend", "local", "--json"]) == 0  # propagate: the same keys
    rep = json.loads(capsys.readouterr().out)
    assert rep["method"] == "propagate" and rep["bytes_predicted"] == rep["bytes_measured"]


def test_cli_2d_plans_and_refusals(plan_dir, capsys):
    d, g = plan_dir
    assert main(["run", "wcc", str(d / "g2.plan"), "--backend", "local", "--method", "pointer-jump",
                 "--output", str(d / "pj2d.npy")]) == 0  # pointer jumping runs on 2D plans
    capsys.readouterr()
    assert np.array_equal(np.load(d / "pj2d.npy"), smallest_ids(g))
    assert main(["run", "lp", str(d / "g2.plan"), "--backend", "local", "--iterations", "7",
                 "--output", str(d / "lp2d.npy")]) == 0  # and so does label propagation (2.5D reduction)
    capsys.readouterr()
    assert np.array_equal(np.load(d / "lp2d.npy"), numpy_lp(g, 7, False)[0])
    assert main(["run", "matching", str(d / "g2.plan"), "--backend", "local", "--output", str(d / "m2d.npy")]) == 0
    capsys.readouterr()
    assert np.array_equal(np.load(d / "m2d.npy"), greedy_matching(g))
    assert main(["run", "lp", str(d / "g15.plan"), "--backend", "local"]) == 2
    err = capsys.readouterr().err
    assert "cannot run on this plan" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as e:
        main(["run", "wcc", str(d / "g.plan"), "--method", "jump"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["run", "lp", str(d / "g.plan"), "--iterations", "0"])
    assert e.value.code == 2


@pytest.mark.dist
def test_gloo_p3_pointer_jump_torch_kernels(plan_dir, capsys):
    d, g = plan_dir
    assert main(["run", "wcc", str(d / "g.plan"), "--nprocs", "3", "--method", "pointer-jump", "--kernels", "torch",
                 "--json", "--output", str(d / "pj3.npy")]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["backend"] == "gloo" and rep["kernels"] == "torch" and rep["bytes_match"]
    assert np.array_equal(np.load(d / "pj3.npy"), smallest_ids(g))


@pytest.mark.dist
@pytest.mark.slow
def test_gloo_p3_lp_and_p4_2d_matching(plan_dir, capsys):
    d, g = plan_dir
    assert main(["run", "lp", str(d / "g.plan"), "--nprocs", "3", "--json", "--output", str(d / "lp3.npy")]) == 0
    assert json.loads(capsys.readouterr().out)["bytes_match"]
    assert np.array_equal(np.load(d / "lp3.npy"), numpy_lp(g, 20, False)[0])
    assert main(["run", "matching", str(d / "g2.plan"), "--nprocs", "4", "--json",
                 "--output", str(d / "m3.npy")]) == 0
    assert json.loads(capsys.readouterr().out)["bytes_match"]
    assert np.array_equal(np.load(d / "m3.npy"), greedy_matching(g))


def test_every_plan_job_reports_the_same_byte_keys(plan_dir, capsys):
    d, _ = plan_dir
    plan = str(d / "g.plan")
    extra = {"sssp": ["--root", "0"], "bfs": ["--roots", "1"], "spmm": ["-f", "2"]}
    for job in ("spmm", "bfs", "pagerank", "wcc", "sssp", "lp", "matching"):
        assert main(["run", job, plan, "--backend", "local", "--json", *extra.get(job, [])]) == 0, job
        rep = json.loads(capsys.readouterr().out)
        assert rep["bytes_match"] is True, job
        assert rep["bytes_predicted"] == rep["bytes_measured"] > 0, job
        assert "bytes_total" not in rep and "bytes_measured_total" not in rep, job
