"""Frontier stealing: the assignment MILP against brute force, LP rounding
within its proven bound, range cutting against a brute-force nearest cut,
OSteal decisions on a scripted load trace, and BFS (Graph500 checks, same
tree as without stealing) / SSSP (= scipy dijkstra) with stealing on
LocalComm and gloo p = 2."""
import itertools
import json

import numpy as np
import pytest
import scipy.sparse.csgraph as cg

from partplan import Graph
from partplan.cli.main import main
from partplan.plan import build_plan, write_plan
from partplan.runtime import analytics as an
from partplan.runtime.bfs import BfsEngine
from partplan.runtime.comm import LocalComm
from partplan.runtime.graph500 import BfsValidator
from partplan.cli._graph500 import graph500_graph
from partplan.runtime.steal import (Balancer, OwnershipPolicy, StealConfig, cost_matrix, cut_ranges, min_per_row,
                                    reduction_tree)
from partplan.runtime.steal_solve import round_rows, rounding_bound, solve, worker_costs


def compositions(total, k):
    """All k-tuples of non-negative integers summing to total."""
    for cuts in itertools.combinations(range(total + k - 1), k - 1):
        b = (-1,) + cuts + (total + k - 1,)
        yield [b[i + 1] - b[i] - 1 for i in range(k)]


def brute_force(loads, c):
    p = len(loads)
    best = np.inf
    for rows in itertools.product(*[list(compositions(int(l), p)) for l in loads]):
        best = min(best, worker_costs(np.array(rows), c).max())
    return best


def tiny_instances():
    rng = np.random.default_rng(7)
    for _ in range(12):
        p = int(rng.integers(2, 4))
        loads = rng.integers(0, 5 if p == 2 else 4, p)
        c = np.round(1 + 3 * rng.random((p, p)), 2)
        np.fill_diagonal(c, np.round(0.5 + rng.random(p), 2))
        yield loads, c


def test_milp_solvers_reach_the_brute_force_optimum_and_lp_rounding_stays_within_its_bound():
    n_checked = 0
    for loads, c in tiny_instances():
        opt = brute_force(loads, c)
        for solver in ("cbc", "highs"):
            a = solve(loads, c, solver, gap=0.0)
            assert np.array_equal(a.x.sum(axis=1), loads) and (a.x >= 0).all()
            assert a.z == pytest.approx(opt, abs=1e-9), (solver, loads.tolist(), c.tolist())
        lp = solve(loads, c, "lp")
        assert np.array_equal(lp.x.sum(axis=1), loads)
        assert lp.z_lp <= opt + 1e-9
        assert lp.z <= lp.z_lp + rounding_bound(loads, c) + 1e-9
        n_checked += 1
    assert n_checked == 12


def test_round_rows_keeps_row_sums_and_moves_each_entry_less_than_one():
    rng = np.random.default_rng(1)
    xf = rng.random((6, 5)) * 10
    loads = np.rint(xf.sum(axis=1)).astype(np.int64)
    xf *= (loads / xf.sum(axis=1))[:, None]
    x = round_rows(xf, loads)
    assert np.array_equal(x.sum(axis=1), loads)
    assert np.abs(x - xf).max() < 1.0


def test_inactive_workers_get_nothing_and_bad_costs_are_refused():
    c = cost_matrix(None, 4)
    a = solve([100, 50, 0, 7], c, "highs", active=np.array([True, False, True, False]))
    assert a.x[:, [1, 3]].sum() == 0 and np.array_equal(a.x.sum(axis=1), [100, 50, 0, 7])
    from partplan.errors import PlanError
    with pytest.raises(PlanError, match="cost matrix entry"):
        solve([1, 2], np.array([[1.0, 0.0], [1.0, 1.0]]))
    with pytest.raises(PlanError, match="solver"):
        solve([1, 2], np.ones((2, 2)), "gurobi")


def test_cut_ranges_cuts_at_the_nearest_prefix_sum():
    rng = np.random.default_rng(3)
    for _ in range(50):
        deg = rng.integers(0, 20, rng.integers(1, 30))
        k = int(rng.integers(1, 6))
        amounts = np.array(next(iter([rng.multinomial(int(deg.sum()), np.ones(k) / k)])))
        b = cut_ranges(deg, amounts)
        assert b[0] == 0 and b[-1] == deg.size and np.all(np.diff(b) >= 0)
        s = np.concatenate([[0], np.cumsum(deg)])
        t = np.cumsum(amounts)[:-1]
        for bk, tk in zip(b[1:-1], t):  # brute force: no prefix sum is nearer to the target
            assert abs(s[bk] - tk) == np.abs(s - tk).min()


def test_min_per_row():
    r, v = min_per_row(np.array([3, 1, 3, 1, 2]), np.array([5.0, 2.0, 4.0, 7.0, 1.0]))
    assert r.tolist() == [1, 2, 3] and v.tolist() == [2.0, 1.0, 4.0]


def test_reduction_tree_pairs_cheapest_links():
    sets = reduction_tree(cost_matrix("tree:2x2", 4))
    assert [s.tolist() for s in sets] == [[0, 1, 2, 3], [0, 2], [0]]
    c = cost_matrix("dgx1", 8)
    s1 = reduction_tree(c)[1]
    assert s1.size == 4
    for a in s1:  # every kept rank merged over a cheapest (2-NVLink) link
        off = np.delete(c[a], a)
        assert off.min() == 1.5


def test_osteal_decisions_on_a_scripted_trace():
    c = cost_matrix(None, 8)
    pol = OwnershipPolicy(c, t3=0.01, t1=1000)
    kappa, pi = 1e-7, 1e-3
    assert pol.decide(np.full(8, 100), None).all()  # no history: all ranks
    for z, m in ((1e5, 8), (5e4, 8), (200, 8)):  # busy levels: seconds = κ z + π m
        pol.record(z, m, kappa * z + pi * m)
    assert pol.decide(np.full(8, 10**6), 0.5).sum() == 8  # previous level long: no decision, all ranks
    tail = pol.decide(np.array([3, 0, 0, 0, 0, 0, 0, 0]), 0.005)  # short level, tiny load: one rank
    assert tail.sum() == 1 and tail[0]
    assert pol.decide(np.array([5, 0, 0, 0, 0, 0, 0, 0]), 0.5).sum() == 1  # long previous level: no decision
    assert pol.decide(np.array([999, 0, 0, 0, 0, 0, 0, 0]), 0.5).sum() == 1  # < t1 per active rank
    assert pol.decide(np.array([600, 400, 0, 0, 0, 0, 0, 0]), 0.5).sum() == 8  # work grew: all ranks again
    assert pol.decide(np.array([3, 0, 0, 0, 0, 0, 0, 0]), 0.005).sum() == 1
    big = pol.decide(np.full(8, 10**6), 0.004)  # short previous level but a large load
    assert big.sum() == 8
    pol2 = OwnershipPolicy(c, t3=0.01)
    for z, m in ((1e5, 8), (5e4, 8), (200, 8)):
        pol2.record(z, m, kappa * z)  # no per-rank overhead: never shrink
    assert pol2.decide(np.array([3, 0, 0, 0, 0, 0, 0, 0]), 0.005).sum() == 8


# ----------------------------------------------------------------------------- engines
@pytest.fixture(scope="module")
def rmat():
    src, dst, g = graph500_graph(11, 16, seed=1)
    return src, dst, g


def bfs_engine(g, part, p, steal=None):
    plan = build_plan(g, part, p)
    comm = LocalComm(p, plan.groups())
    e = BfsEngine(plan.manifest, plan.ranks, comm, direction="top-down")
    if steal is not None:
        e.balancer = Balancer(comm, e.rgs, g.n, steal)
    return e


@pytest.mark.parametrize("solver,topo,t4,mode", [("highs", None, 0, "fsteal"), ("lp", "tree:2x2", 64, "fsteal"),
                                                 ("cbc", "tree:2x2", 0, "fsteal"),
                                                 ("lp", None, 32, "fsteal+osteal")])
def test_bfs_with_stealing_is_valid_and_the_same_tree(rmat, solver, topo, t4, mode):
    src, dst, g = rmat
    p = 4
    part = np.random.default_rng(0).integers(0, p, g.n)
    if mode == "fsteal":  # a skewed partition: rank 0 holds most vertices
        part = np.where(np.random.default_rng(1).random(g.n) < 0.6, 0, part)
    sc = StealConfig(mode=mode, solver=solver, t1=50, t2=20, t3=10.0, t4=t4, costs=cost_matrix(topo, p))
    e0, e1 = bfs_engine(g, part, p), bfs_engine(g, part, p, sc)
    val = BfsValidator(src, dst, g.n)
    deg = np.bincount(src, minlength=g.n) + np.bincount(dst, minlength=g.n)
    roots = np.flatnonzero(deg > 0)[[3, 100]]
    trig = 0
    for root in roots:
        r0, r1 = e0.search(int(root)), e1.search(int(root))
        assert val.check(int(root), r1.parents, levels=r1.levels).ok
        assert np.array_equal(r0.parents, r1.parents) and np.array_equal(r0.levels, r1.levels)
        assert r0.edges_examined == r1.edges_examined
        for lv in (x.to_json() for x in r1.records):
            assert lv["bytes"] == lv["bytes_measured"]
            assert lv["steal_bytes"] == lv["steal_bytes_measured"]
            if lv["steal_triggered"]:
                trig += 1
                assert lv["load_max_over_mean_after"] >= 1.0
                if mode == "fsteal" and not lv.get("steal_cancelled"):
                    assert lv["stolen_edges"] > 0 and lv["steal_bytes"] > 0
                if mode == "fsteal":  # no level worse than before
                    assert lv["load_max_over_mean_after"] <= lv["load_max_over_mean"] + 1e-12
    assert trig > 0
    if t4:
        assert e1.balancer.hub.sum() > 0 and e1.balancer.hub_cache_bytes > 0
    if mode == "fsteal+osteal":
        act = [x.to_json()["active_ranks"] for x in r1.records]
        assert min(act) >= 1 and max(act) == p


def test_hub_cache_ships_fewer_bytes(rmat):
    src, dst, g = rmat
    p = 4
    part = np.where(np.random.default_rng(1).random(g.n) < 0.6, 0, np.random.default_rng(0).integers(0, p, g.n))
    root = int(np.flatnonzero(np.bincount(src, minlength=g.n))[3])
    got = {}
    for t4 in (0, 16):
        e = bfs_engine(g, part, p, StealConfig(solver="lp", t1=50, t2=20, t4=t4))
        got[t4] = sum(x.to_json()["steal_bytes"] for x in e.search(root).records)
    assert 0 < got[16] < got[0]


@pytest.mark.parametrize("directed,p", [(True, 3), (False, 4)])
def test_sssp_with_stealing_equals_dijkstra(directed, p):
    rng = np.random.default_rng(5)
    n, m = 400, 3000
    s, d = rng.integers(0, n, m), (rng.zipf(1.6, m) - 1) % n  # skewed in-degrees
    g = Graph.from_edges(s, d, rng.random(m) + 0.1, n=n, symmetrize=not directed)
    part = np.where(rng.random(n) < 0.5, 0, rng.integers(0, p, n))
    plan = build_plan(g, part, p)
    comm = LocalComm(p, plan.groups())
    sc = StealConfig(solver="highs", t1=20, t2=10, t4=30, costs=cost_matrix(None, p))
    ids, dist, rec = an.sssp_parts(plan.manifest, plan.ranks, comm, 0, steal=sc)
    got = np.zeros(n)
    for i, v in zip(ids, dist):
        got[i] = v
    ref = cg.dijkstra(g.to_scipy(), indices=0)
    assert np.array_equal(np.isinf(got), np.isinf(ref))
    assert np.allclose(got[np.isfinite(ref)], ref[np.isfinite(ref)], rtol=1e-12, atol=0)
    assert any(r["steal_triggered"] and r["stolen_edges"] > 0 for r in rec)
    assert all(r["bytes"] == r["bytes_measured"] and r["steal_bytes"] == r["steal_bytes_measured"] for r in rec)


def test_gloo_p2_bfs_and_sssp_with_stealing_through_the_cli(tmp_path, capsys, rmat):
    src, dst, g = rmat
    part = np.where(np.random.default_rng(1).random(g.n) < 0.7, 0, 1)
    write_plan(build_plan(g, part, 2), tmp_path / "g.plan")
    plan = str(tmp_path / "g.plan")
    assert main(["run", "bfs", plan, "--nprocs", "2", "--roots", "3", "--direction", "top-down", "--steal",
                 "fsteal", "--steal-solver", "lp", "--t1", "50", "--t2", "20", "--t4", "64", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["all_valid"] and rep["bytes_match"]
    st = rep["steal"]
    assert st["levels_triggered"] > 0 and st["stolen_edges"] > 0 and st["steal_bytes_match"] and st["hubs"] > 0
    lv = rep["searches"][0]["levels"][1]
    for k in ("load_max_over_mean", "load_max_over_mean_after", "stolen_edges", "steal_bytes", "solve_s",
              "active_ranks"):
        assert k in lv
    assert main(["run", "sssp", plan, "--nprocs", "2", "--root", "3", "--steal", "fsteal+osteal", "--t1", "50",
                 "--t2", "20", "--output", str(tmp_path / "d.npy"), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    ref = cg.dijkstra(g.to_scipy(), indices=3)
    d = np.load(tmp_path / "d.npy")
    assert np.array_equal(np.isinf(d), np.isinf(ref)) and np.allclose(d[np.isfinite(d)], ref[np.isfinite(ref)])
    assert rep["steal"]["steal_bytes_match"]


def test_bad_steal_options_give_one_error(tmp_path, capsys, rmat):
    _, _, g = rmat
    write_plan(build_plan(g, np.arange(g.n) % 2, 2), tmp_path / "g.plan")
    plan = str(tmp_path / "g.plan")
    assert main(["run", "bfs", plan, "--backend", "local", "--steal", "fsteal", "--steal-topology", "tree:3x3"]) == 2
    err = capsys.readouterr().err
    assert "9 ranks" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as ex:
        main(["run", "bfs", plan, "--backend", "local", "--steal", "fsteal", "--t1", "-3"])
    assert ex.value.code == 2


@pytest.mark.parametrize("t1,t2", [(0, 0), (10**9, 0), (0, 10**9), ("max", "diff"), ("max", "diff+1")])
def test_triggers_t1_on_the_max_load_and_t2_on_max_minus_min(rmat, t1, t2):
    _, _, g = rmat
    p = 3
    plan = build_plan(g, np.random.default_rng(2).integers(0, p, g.n), p)
    comm = LocalComm(p, plan.groups())
    e = BfsEngine(plan.manifest, plan.ranks, comm)
    cols = [np.arange(rg.next_) for rg in e.rgs]  # every column: load = the block's nnz
    loads = np.array([rg.cindptr[-1] for rg in e.rgs])
    t1 = loads.max() if t1 == "max" else t1
    t2 = {"diff": loads.max() - loads.min(), "diff+1": loads.max() - loads.min() + 1}.get(t2, t2)
    bal = Balancer(comm, e.rgs, g.n, StealConfig(solver="lp", t1=float(t1), t2=float(t2)))
    out = bal.level(cols, None, "test")
    assert out.info["steal_triggered"] == bool(loads.max() >= t1 and loads.max() - loads.min() >= t2)
    assert out.info["load_max_over_mean"] == pytest.approx(loads.max() / loads.mean())


def test_every_process_computes_the_same_assignment():
    """Each rank solves on its own: the same loads give bit-identical x in another process."""
    import subprocess
    import sys
    code = ("import numpy as np, sys\n"
            "from partplan.runtime.steal_solve import solve\n"
            "from partplan.runtime.steal import cost_matrix\n"
            "rng = np.random.default_rng(11)\n"
            "out = []\n"
            "for p in (4, 8):\n"
            "    loads = rng.integers(0, 50000, p); c = cost_matrix('tree:4x%d' % (p // 4), p)\n"
            "    for s in ('cbc', 'highs', 'lp'):\n"
            "        out.append(solve(loads, c, s).x.ravel())\n"
            "sys.stdout.write(np.concatenate(out).tobytes().hex())\n")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    ns = {}
    exec(code.replace("sys.stdout.write(", "res = ("), ns)
    assert other == ns["res"] and len(other) > 0


@pytest.mark.parametrize("job", [["sssp", "--root", "0"], ["bfs", "--root", "0", "--direction", "top-down"]])
def test_thresholds_of_zero_never_steal_a_round_without_load(tmp_path, capsys, job):
    """--t1 0 --t2 0 (stealing on every round): a round where no rank has frontier edges (the path's
    last vertex) has nothing to steal; it crashed the report. The distances stay scipy's."""
    g = Graph.from_edges(np.array([0, 1, 2]), np.array([1, 2, 3]), n=4, name="p4")
    plan = str(tmp_path / "p4.plan")
    write_plan(build_plan(g, np.array([0, 0, 1, 1])), plan)
    assert main(["run", job[0], plan, "--backend", "local", *job[1:], "--steal", "fsteal", "--t1", "0", "--t2", "0",
                 "--json", "-q"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["steal"]["levels_triggered"] >= 1
    if job[0] == "sssp":
        import scipy.sparse as sp
        want = cg.dijkstra(sp.csr_matrix((np.ones(3), ([0, 1, 2], [1, 2, 3])), shape=(4, 4)), indices=0)
        assert rep["max_distance"] == float(np.max(want[np.isfinite(want)]))


def test_osteal_with_the_hub_cache_and_hub_columns_empty_in_a_block(tmp_path, capsys):
    """OSteal ships whole frontiers; a hub column that a block holds none of was marked cached, and the
    stealer's cache lookup then expanded another column: BFS trees failed Graph500's check 5 and SSSP
    distances came out shorter than the shortest paths (found by a fuzzer)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(7)
    n, m = 600, 4000
    r = rng.integers(0, 550, m)
    c = (r + rng.geometric(0.02, m)) % 550
    A = sp.coo_matrix((rng.integers(1, 6, m).astype(float), (r, c)), shape=(n, n)).tocsr()
    A.sum_duplicates()
    g = Graph.from_scipy(A)
    write_plan(build_plan(g, rng.integers(0, 3, n), 3), tmp_path / "g.plan")
    plan = str(tmp_path / "g.plan")
    assert main(["run", "sssp", plan, "--backend", "local", "--root", "7", "--steal", "fsteal+osteal", "--t4", "2",
                 "--output", str(tmp_path / "d.npy"), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["steal"]["hubs"] > 0 and rep["steal"]["hub_cache_bytes"] > 0     # as BFS reports them
    ref = cg.dijkstra(A, indices=7)
    d = np.load(tmp_path / "d.npy")
    assert np.array_equal(np.isinf(d), np.isinf(ref)) and np.allclose(d[np.isfinite(d)], ref[np.isfinite(ref)])
    assert main(["run", "bfs", plan, "--backend", "local", "--root", "334", "--direction", "top-down", "--steal",
                 "fsteal+osteal", "--t4", "3", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["all_valid"] and rep["steal"]["hubs"] > 0
