"""Distributed BFS on plans: every direction and rank count on LocalComm
against scipy's unweighted shortest paths, the Graph500 validator on five
deliberately broken parent arrays, exact byte accounting, gloo p = 2 through
the CLI, bad inputs."""
import json

import numpy as np
import pytest
import scipy.sparse.csgraph as cg

from partplan import Graph, PlanError
from partplan.cli.main import main
from partplan.datasets.generators import rmat_edges
from partplan.plan import build_plan, write_plan
from partplan.runtime.bfs import BfsEngine, bfs_local
from partplan.runtime.comm import LocalComm
from partplan.runtime.graph500 import search_keys, teps_stats, validate_bfs_tree


def rmat_graph(scale=10, directed=False, seed=1):
    s, d = rmat_edges(scale, seed=seed)
    g = Graph.from_edges(s, d, n=1 << scale, symmetrize=not directed, self_loops="remove" if not directed else "keep")
    return s, d, g


def scipy_levels(g, root):
    L = cg.shortest_path(g.to_scipy(), unweighted=True, indices=root)
    return np.where(np.isinf(L), -1, L).astype(np.int64)


@pytest.mark.parametrize("directed", [False, True])
def test_every_direction_and_rank_count_matches_scipy_and_validates(directed):
    s, d, g = rmat_graph(10, directed)
    roots = search_keys(s, d, g.n, 3, seed=2)
    trees = {}
    for p in (1, 2, 3):
        part = np.random.default_rng(p).integers(0, p, g.n)
        plan = build_plan(g, part, p)
        for direction in ("top-down", "bottom-up", "auto"):
            eng = BfsEngine(plan.manifest, plan.ranks, LocalComm(p, plan.groups()), direction=direction)
            for root in roots:
                r = eng.search(int(root))
                assert np.array_equal(r.levels, scipy_levels(g, int(root)))
                v = validate_bfs_tree(s, d, int(root), r.parents, levels=r.levels, directed=directed)
                assert v.ok, v.messages
                for lv in r.records:
                    assert lv.bytes == lv.bytes_measured == sum(lv.bytes_per_rank)
                    assert lv.messages == sum(lv.messages_per_rank) and len(lv.bytes_per_rank) == p
                    assert lv.bytes <= min(lv.bytes_sparse, lv.bytes_dense)
                    assert lv.direction == direction or direction == "auto"
                trees.setdefault(int(root), set()).add(r.parents.tobytes())
    # the smallest-id-parent rule: one tree per root whatever the direction or rank count
    assert all(len(t) == 1 for t in trees.values())


@pytest.mark.parametrize("directed", [False, True])
def test_2d_grids_give_scipys_levels_and_the_1d_tree(directed):
    """2D top-down, bottom-up (candidates folded to the owner, the owner's visited bits
    synced back along the grid row) and auto: the 1D tree (smallest-id parent), exact bytes."""
    s, d, g = rmat_graph(10, directed, seed=6)
    root = int(search_keys(s, d, g.n, 1, seed=1)[0])
    tree = bfs_local(build_plan(g, np.arange(g.n) % 2, 2), root).parents
    td_edges = {}
    for spec, p in (("2d:2x2", 4), ("2d:2x3", 6), ("2d:3x1", 3), ("2d:1x3", 3), ("2d:1x2", 2)):
        plan = build_plan(g, np.random.default_rng(p).integers(0, p, g.n), p, layout=spec)
        for direction in ("top-down", "bottom-up", "auto"):
            r = bfs_local(plan, root, direction=direction)
            assert np.array_equal(r.levels, scipy_levels(g, root))
            assert np.array_equal(r.parents, tree), (spec, direction)
            assert validate_bfs_tree(s, d, root, r.parents, levels=r.levels, directed=directed).ok
            for lv in r.records:
                assert lv.bytes == lv.bytes_measured == sum(lv.bytes_per_rank) == sum(lv.bytes_by_family.values())
                assert lv.bytes <= min(lv.bytes_sparse, lv.bytes_dense)
            dirs = {lv.direction for lv in r.records}
            assert dirs == ({"top-down", "bottom-up"} if direction == "auto" else {direction})
            if direction == "top-down":
                td_edges[spec] = r.edges_examined
            if direction == "auto":
                assert r.edges_examined < 0.5 * td_edges[spec]


@pytest.mark.dist
@pytest.mark.slow
def test_gloo_p2_2d_graph500_validates_every_search(capsys):
    """2d:1x2: the fold, and before bottom-up levels its transpose (the visited sync), over gloo;
    the Graph500 report (1d over gloo: test_gloo_p2_directed_plan_parents_equal_local)."""
    assert main(["run", "graph500", "--scale", "9", "--nprocs", "2", "--layout", "2d:1x2", "--roots", "8",
                 "--partition", "block", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["layout"] == "2d:1x2" and rep["all_valid"] and rep["bytes_match"] and len(rep["searches"]) == 8
    assert {lv["direction"] for s in rep["searches"] for lv in s["levels"]} == {"top-down", "bottom-up"}
    assert rep["bytes_by_family"]["row"] > 0
    assert rep["chosen_mode_le_other"] and rep["teps_harmonic_mean"] > 0
    lv = rep["searches"][0]["levels"][0]
    assert {"level", "direction", "mode", "frontier", "edges_examined", "bytes", "time_s"} <= set(lv)


def test_direction_optimization_examines_few_edges():
    s, d, g = rmat_graph(13, seed=4)
    plan = build_plan(g, np.random.default_rng(0).integers(0, 2, g.n), 2)
    comm = LocalComm(2, plan.groups())
    td = BfsEngine(plan.manifest, plan.ranks, comm, direction="top-down")
    auto = BfsEngine(plan.manifest, plan.ranks, comm, direction="auto")
    e_td = e_auto = 0
    for root in search_keys(s, d, g.n, 4, seed=0):
        a, b = td.search(int(root)), auto.search(int(root))
        assert np.array_equal(a.parents, b.parents)
        e_td += a.edges_examined
        e_auto += b.edges_examined
        assert {lv.direction for lv in b.records} == {"top-down", "bottom-up"}
    assert e_auto <= 0.3 * e_td


def test_sparse_and_dense_modes_both_occur_and_are_the_cheaper():
    s, d, g = rmat_graph(11)
    plan = build_plan(g, np.arange(g.n) % 4, 4)
    r = bfs_local(plan, int(search_keys(s, d, g.n, 1)[0]), direction="top-down")
    modes = {lv.mode for lv in r.records}
    assert "sparse" in modes and ("dense" in modes or "mixed" in modes)


# ----------------------------------------------------------------------------- the validator
def _check(edges, root, parent, levels=None):
    e = np.array(edges)
    return validate_bfs_tree(e[:, 0], e[:, 1], root, np.array(parent), levels=levels).failed


SQUARE = [(0, 1), (1, 2), (2, 3), (0, 3)]        # BFS from 0: 1, 3 at level 1, 2 at level 2
DIAMOND = [(0, 1), (0, 2), (1, 2), (1, 3), (2, 3)]


def test_validator_accepts_a_true_tree():
    assert _check(SQUARE, 0, [0, 0, 1, 0]) == []
    assert _check(DIAMOND, 0, [0, 0, 0, 1], levels=[0, 1, 1, 2]) == []


def test_validator_check1_cycle():
    assert 1 in _check(SQUARE, 0, [0, 2, 1, 0])
    assert _check(SQUARE, 0, [1, 0, 1, 0]) == [1]      # the root is not its own parent


def test_validator_check2_tree_edge_inside_a_level():
    assert _check(DIAMOND, 0, [0, 0, 1, 1], levels=[0, 1, 1, 2]) == [2]


def test_validator_check3_edge_spans_two_levels():
    assert _check(SQUARE, 0, [0, 0, 1, 2]) == [3]      # 3 hangs below 2 although 0-3 is an edge


def test_validator_check4_component_not_spanned():
    assert _check(SQUARE, 0, [0, 0, 1, -1]) == [4]


def test_validator_check5_parent_not_an_edge():
    assert _check(SQUARE, 0, [0, 0, 0, 0]) == [5]      # (2, 0) is not an input edge


def test_teps_statistics_match_the_definitions():
    m, t = np.array([100.0, 200.0, 300.0]), np.array([1.0, 1.0, 2.0])
    st = teps_stats(m, t)
    teps = m / t
    hm = 3 / np.sum(1 / teps)
    assert st["teps_harmonic_mean"] == pytest.approx(hm)
    assert st["teps_harmonic_stddev"] == pytest.approx(np.sqrt(np.sum((1 / teps - 1 / hm) ** 2)) / 2 * hm ** 2)


# ----------------------------------------------------------------------------- CLI, gloo, bad input
@pytest.fixture
def plan_dir(tmp_path):
    s, d, g = rmat_graph(9, directed=True, seed=5)
    write_plan(build_plan(g, np.arange(g.n) % 2, 2), tmp_path / "g.plan")
    return tmp_path, g


@pytest.mark.dist
def test_gloo_p2_directed_plan_parents_equal_local(plan_dir, capsys):
    tmp, g = plan_dir
    assert main(["run", "bfs", str(tmp / "g.plan"), "--nprocs", "2", "--roots", "3",
                 "--output", str(tmp / "p.npz"), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["all_valid"] and rep["directed"] and rep["bytes_match"]
    assert main(["run", "bfs", str(tmp / "g.plan"), "--backend", "local", "--roots", "3",
                 "--output", str(tmp / "q.npz"), "--plot", str(tmp / "l.png")]) == 0
    a, b = np.load(tmp / "p.npz"), np.load(tmp / "q.npz")
    assert np.array_equal(a["roots"], b["roots"]) and np.array_equal(a["parents"], b["parents"])
    for root, par in zip(a["roots"], a["parents"]):
        lv = scipy_levels(g, int(root))
        assert np.array_equal(par >= 0, lv >= 0) and par[root] == root
    assert (tmp / "l.png").read_bytes()[:4] == b"\x89PNG"


def test_bad_inputs_are_one_clear_error(plan_dir, tmp_path, capsys):
    tmp, g = plan_dir
    plan = str(tmp / "g.plan")
    assert main(["run", "bfs", plan, "--backend", "local", "--root", str(g.n)]) == 2
    assert "--root" in capsys.readouterr().err
    assert main(["run", "bfs", plan, "--nprocs", "3"]) == 2
    assert "2 ranks" in capsys.readouterr().err
    assert main(["run", "bfs", plan, "--backend", "local", "--routed"]) == 2
    assert "--routed: " in (err := capsys.readouterr().err) and "not a routed one" in err
    assert main(["run", "bfs", plan, "--backend", "local", "--output", str(tmp / "x.npy")]) == 2
    assert ".npz" in capsys.readouterr().err
    s, d, g2 = rmat_graph(8)
    write_plan(build_plan(g2, np.arange(g2.n) % 2, 4, layout="1.5d:2"), tmp / "h.plan")
    assert main(["run", "bfs", str(tmp / "h.plan"), "--backend", "local"]) == 2
    assert "1.5d" in capsys.readouterr().err
    plan1 = build_plan(g2, np.zeros(g2.n, dtype=np.int64), 1)
    with pytest.raises(PlanError, match="root"):
        bfs_local(plan1, -1)
    with pytest.raises(PlanError, match="direction"):
        bfs_local(plan1, 0, direction="sideways")


def test_teps_stats_of_a_search_without_edges_is_zero_without_a_warning():
    """A root without edges traverses nothing: TEPS 0, and their harmonic mean is 0 (numpy's
    divide-by-zero warning is not printed)."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        st = teps_stats([0, 10], [0.5, 0.5])
    assert st["teps_harmonic_mean"] == 0.0 and st["teps_min"] == 0.0 and st["teps_max"] == 20.0


def test_graph500_says_how_to_give_a_layout_its_ranks(capsys):
    """`run graph500 --layout 2d:2x2 --backend local` without --nprocs said only "grid 2x2 has 4
    ranks, not 1"; the error now names the option that sets the count."""
    from tests.errlines import run_cli
    rc, _, err = run_cli(["run", "graph500", "--scale", "6", "--layout", "2d:2x2", "--backend", "local"], capsys)
    assert rc == 2 and "has 4 ranks, not 1" in err and "give --nprocs" in err and len(err.strip().splitlines()) == 1
