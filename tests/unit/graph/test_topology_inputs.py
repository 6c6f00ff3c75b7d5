"""Bad topology files, ``topology show -o``, a manifest's ``topology`` object, ``validate --seed /
--features`` and ``bench`` option values: one ``partplan: error:`` line, exit 2, before any work."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from partplan.errors import PlanError
from partplan.topology import TopologyError, load_topology
from tests.errlines import one_line, run_cli

MATRIX = {"kind": "matrix", "cost": [[0, 1], [1, 0]]}


# ----------------------------------------------------------------------------- 1. topology files
BAD_DOCS = [
    ({**MATRIX, "fanouts": "ab"}, "'fanouts'"),
    ({**MATRIX, "fanouts": 2}, "'fanouts'"),
    ({**MATRIX, "fanouts": [[1], [2]]}, "'fanouts'"),
    ({**MATRIX, "fanouts": [2.7, 1.2]}, "'fanouts'"),
    ({**MATRIX, "fanouts": [1, 2], "levels": [{"name": ["x"]}]}, "levels[0].name"),
    ({**MATRIX, "fanouts": [1, 2], "levels": [{"name": None}]}, "levels[0].name"),
    ({**MATRIX, "fanouts": [1, 2], "levels": [{"name": "n", "bogus": 1}]}, "bogus"),
    ({**MATRIX, "fanouts": [1, 2], "levels": [{"name": "n", "cost": "x"}]}, "levels[0].cost"),
    ({**MATRIX, "fanouts": [1, 2], "levels": [{"name": "a"}, {"name": "b"}]}, "2 levels for fanouts"),
    ({**MATRIX, "levels": [{"name": "n"}]}, "'fanouts' is missing"),
    ({**MATRIX, "fanouts": [1, 4]}, "multiply to 4"),
    ({**MATRIX, "symmetric": "false"}, "'symmetric'"),
    ({**MATRIX, "symmetric": 0}, "'symmetric'"),
    ({"kind": "matrix", "cost": [[0, True], [True, 0]]}, "cost[0][1]"),
    ({**MATRIX, "alpha": [[0, False], [False, 0]]}, "alpha[0][1]"),
    ({"kind": "tree", "fanouts": [2, 2], "levels": [{"name": "n", "size": 3}]}, "levels[0].size"),
    ({"kind": "tree", "fanouts": [2, 2], "levels": [{"name": "n", "size": True}]}, "levels[0].size"),
    ({"kind": "tree", "fanouts": [2, 2, 2], "levels": [{"name": "n", "size": 2}, {"name": "r", "size": 8}]},
     "levels[1].size"),
    ({"kind": "tree", "fanouts": [2, 2], "levels": [{"name": "n", "cost": True}]}, "levels[0].cost"),
    ({"kind": "tree", "fanouts": [2, 2], "local": {"alpha": False}}, "local.alpha"),
    # costs a float64 sum over ranks and rows overflows (the greedy map then put parts on one rank)
    ({"kind": "matrix", "cost": [[0, 1e308], [1e308, 0]]}, "cost[0][1]"),
    ({"kind": "tree", "fanouts": [2, 2], "levels": [{"name": "n", "cost": 1e306}]}, "levels[0].cost"),
    ({"kind": "matrix", "cost": [[0, 1], [1, 0, 3]]}, "row 1 has 3 entries"),
    ({"kind": "tree", "fanouts": [2, 2, 2], "levels": [{"name": "n"}, {"name": "n"}]}, "'n' is given twice"),
]


@pytest.mark.parametrize("doc,field", BAD_DOCS)
def test_bad_topology_file_is_one_line_naming_file_and_field(doc, field, tmp_path, capsys):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TopologyError) as e:
        load_topology(str(path))
    assert str(path) in str(e.value) and field in str(e.value)
    rc, out, err = run_cli(["topology", "show", path], capsys)
    one_line(rc, err, 2, str(path), field)


def test_matrix_levels_and_sizes_that_agree_are_read(tmp_path):
    path = tmp_path / "t.json"
    doc = {"kind": "matrix", "cost": (np.ones((4, 4)) - np.eye(4)).tolist(), "fanouts": [2, 2],
           "levels": [{"name": "node", "size": 2}], "symmetric": True}
    path.write_text(json.dumps(doc))
    t = load_topology(str(path))
    assert [(lv.name, lv.size) for lv in t.levels] == [("node", 2)]
    deep = tmp_path / "deep.json"   # sizes are the running products of the fanouts: 2, then 2 × 3
    deep.write_text(json.dumps({"kind": "tree", "fanouts": [2, 3, 2],
                                "levels": [{"name": "node", "size": 2}, {"name": "rack", "size": 6}]}))
    assert [lv.size for lv in load_topology(str(deep)).levels] == [2, 6]


# ----------------------------------------------------------------------------- 2. topology show -o
def test_show_output_path_is_checked_before_anything_is_written(tmp_path, capsys):
    (tmp_path / "empty_dir").mkdir()
    (tmp_path / "a_file").write_text("x")
    for out in (tmp_path / "empty_dir", tmp_path / "a_file" / "x.json", tmp_path / "missing" / "sub" / "x.json", ""):
        rc, _, err = run_cli(["topology", "show", "tree:2x2", "-o", out], capsys)
        one_line(rc, err, 2)
    assert not (tmp_path / "missing").exists()
    assert (tmp_path / "a_file").read_text() == "x"
    prev = tmp_path / "prev.json"          # a bad topology leaves the previous output as it was
    prev.write_text("previous")
    rc, _, err = run_cli(["topology", "show", "tree:2x", "-o", prev], capsys)
    one_line(rc, err, 2, "tree:2x")
    assert prev.read_text() == "previous"


# ----------------------------------------------------------------------------- 3. a manifest's topology object
@pytest.fixture(scope="module")
def routed_plan(tmp_path_factory):
    from partplan.cli.main import main
    d = tmp_path_factory.mktemp("rt")
    edges = [(0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4), (0, 4)]
    (d / "g.mtx").write_text("%%MatrixMarket matrix coordinate pattern general\n" + f"8 8 {len(edges)}\n"
                             + "".join(f"{a + 1} {b + 1}\n" for a, b in edges))
    np.save(d / "p4.npy", np.array([0, 0, 1, 1, 2, 2, 3, 3]))
    assert main(["plan", str(d / "g.mtx"), "--partition", str(d / "p4.npy"), "--topology", "tree:2x2",
                 "--route", "domain", "-o", str(d / "rt.plan"), "-q"]) == 0
    return d / "rt.plan"


def _corrupt(src: Path, dst: Path, edit) -> Path:
    import shutil
    shutil.copytree(src, dst)
    mf = dst / "manifest.json"
    m = json.loads(mf.read_text())
    edit(m["topology"])
    mf.write_text(json.dumps(m))
    return dst


BAD_OBJECTS = [
    (lambda t: t.__setitem__("cost", "x"), "topology.cost"),
    (lambda t: t.__setitem__("alpha_beta_s", True), "topology.alpha_beta_s"),
    (lambda t: t.__setitem__("busiest_rank", 1.5), "topology.busiest_rank"),
    (lambda t: t.__setitem__("map", "greedy"), "topology.map"),
    (lambda t: t.__setitem__("map", {"method": 3}), "topology.map.method"),
    (lambda t: t.pop("levels"), "topology.levels"),
    (lambda t: t.__setitem__("levels", {"name": "domain"}), "topology.levels"),
    (lambda t: t.__setitem__("levels", ["domain"]), "topology.levels[0]"),
    (lambda t: t["levels"][0].__setitem__("domains", "2"), "topology.levels[0].domains"),
    (lambda t: t["levels"][0].__setitem__("name", None), "topology.levels[0].name"),
    (lambda t: t.__setitem__("description", {**MATRIX, "fanouts": "ab"}), "topology.description"),
    (lambda t: t.__setitem__("description", 7), "topology.description"),
    (lambda t: t.__setitem__("description", {**MATRIX}), "topology.description"),   # 2 ranks, the plan has 4
]


@pytest.mark.parametrize("edit,field", BAD_OBJECTS)
def test_malformed_topology_object_is_refused(edit, field, routed_plan, tmp_path, capsys):
    from partplan.runtime.validate import validate_plan
    from partplan.program.checks import check_topology_object
    bad = _corrupt(routed_plan, tmp_path / "bad.plan", edit)
    m = json.loads((bad / "manifest.json").read_text())
    with pytest.raises(PlanError, match=re.escape(f"(field '{field}'")):
        check_topology_object(m["topology"], bad / "manifest.json", ranks=m["ranks"])
    with pytest.raises(PlanError, match=re.escape(f"(field '{field}'")):
        validate_plan(bad, replay_check=False)
    rc, _, err = run_cli(["validate", bad, "--no-replay"], capsys)
    one_line(rc, err, 2, str(bad / "manifest.json"), f"(field '{field}')")


@pytest.mark.parametrize("edit,field", BAD_OBJECTS[:-1])
def test_inspect_refuses_a_malformed_topology_object(edit, field, routed_plan, tmp_path, capsys):
    bad = _corrupt(routed_plan, tmp_path / "bad.plan", edit)
    rc, _, err = run_cli(["inspect", bad], capsys)
    one_line(rc, err, 2, "manifest.json", f"(field '{field}')")


def test_run_spmm_refuses_a_description_the_topology_reader_refuses(routed_plan, tmp_path, capsys):
    bad = _corrupt(routed_plan, tmp_path / "bad.plan", lambda t: t.__setitem__("description",
                                                                               {**MATRIX, "fanouts": "ab"}))
    rc, _, err = run_cli(["run", "spmm", bad, "--backend", "local", "-f", "2"], capsys)
    one_line(rc, err, 2, "'fanouts'")


def test_intact_topology_object_passes(routed_plan, capsys):
    rc, out, err = run_cli(["inspect", routed_plan], capsys)
    assert rc == 0 and "route=domain" in out, err
    rc, out, err = run_cli(["validate", routed_plan], capsys)
    assert rc == 0 and out.strip().endswith("valid"), err


# ----------------------------------------------------------------------------- 4. validate --seed / --features
@pytest.fixture(scope="module")
def path_plan(tmp_path_factory):
    from partplan.cli.main import main
    d = tmp_path_factory.mktemp("p4")
    (d / "g.mtx").write_text("%%MatrixMarket matrix coordinate pattern general\n4 4 3\n1 2\n2 3\n3 4\n")
    (d / "g.part.2").write_text("0\n0\n1\n1\n")
    assert main(["plan", str(d / "g.mtx"), "--partition", str(d / "g.part.2"), "-o", str(d / "g.plan"), "-q"]) == 0
    return d / "g.plan"


def test_validate_takes_negative_seeds_as_run_does(path_plan, capsys):
    for seed in ("-1", str(-(2 ** 70))):
        rc, out, err = run_cli(["validate", path_plan, "--seed", seed], capsys)
        assert rc == 0 and "Traceback" not in err and out.strip().endswith("valid"), err


def test_validate_features_are_held_to_the_memory_budget(path_plan, capsys, monkeypatch):
    rc, _, err = run_cli(["validate", path_plan, "--features", "2000000000"], capsys)
    one_line(rc, err, 2, "--features", "memory budget")
    # 4 rows × 100000 columns × 8 bytes × 3 copies = 9.6 MB: above a 1 MB budget, 4 columns are not
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", str(1 << 20))
    import partplan.runtime.validate as rv

    def no_load(*a, **k):
        raise AssertionError("the plan was loaded before the budget check")
    monkeypatch.setattr(rv, "load_plan", no_load)
    rc, _, err = run_cli(["validate", path_plan, "--features", "100000"], capsys)
    one_line(rc, err, 2, "--features", "memory budget")
    monkeypatch.undo()
    rc, out, err = run_cli(["validate", path_plan, "--features", "4"], capsys)
    assert rc == 0, err


# ----------------------------------------------------------------------------- 5. bench options
@pytest.mark.parametrize("opts,needle", [
    (["--imbalance", "-1"], "--imbalance"),
    (["--imbalance", "10"], "--imbalance"),
    (["--refine-time-limit", "-1"], "--refine-time-limit"),
    (["--stochastic", "polblogs", "--theta", "0"], "--theta"),
    (["--stochastic", "polblogs", "--theta", "nan"], "--theta"),
    (["--stochastic", "nonexist"], "--stochastic"),
    (["--stochastic", "rmat99"], "--stochastic"),
    (["--stochastic", "polblogs", "--sampler", "garbage"], "--sampler"),
    (["--stochastic", "polblogs", "--sampler", "neighbor:0"], "--sampler"),
    # options that act only beside another were ignored without it
    (["--sampler", "neighbor:10"], "--sampler applies with --stochastic NAME only"),
    (["--stochastic-k", "8", "--theta", "0.1"], "--stochastic-k, --theta apply with --stochastic NAME only"),
    (["--refine-time-limit", "3"], "not among the methods run"),
    (["--quick"], "give one of the two"),
])
def test_bench_bad_options_stop_before_any_benchmark(opts, needle, capsys, monkeypatch):
    import partplan.bench.planner as planner

    def no_run(*a, **k):
        raise AssertionError("a benchmark ran")
    monkeypatch.setattr(planner, "run_bench", no_run)
    rc, _, err = run_cli(["bench", "--datasets", "polblogs", "--k", "2", "--methods", "block", *opts, "--json"],
                         capsys)
    one_line(rc, err, 2, needle)


def test_a_15d_plan_takes_a_topology_of_its_ranks(tmp_path, capsys):
    """1.5D on b row blocks × c replicas runs on b·c ranks: ``plan --layout 1.5d:2 --topology``
    of a 4-part partition takes an 8-rank machine (it had been checked against the 4 parts, then
    the exchange against the 8 ranks, so no topology fitted both)."""
    part = tmp_path / "p.npy"
    np.save(part, np.arange(1490) % 4)
    rc, _, err = run_cli(["plan", "polblogs", "--partition", part, "--layout", "1.5d:2", "--topology", "tree:4x2",
                          "-o", tmp_path / "t.plan", "-q"], capsys)
    assert rc == 0, err
    m = json.loads((tmp_path / "t.plan" / "manifest.json").read_text())
    assert m["ranks"] == 8 and m["topology"]["ranks"] == 8 and m["topology"]["topology"] == "tree:4x2"


def test_decoupled_partitions_and_topologies(tmp_path, capsys):
    """With --ownership decoupled: --map / --route are one error before any partitioning (the
    mapping moved the parts but not the owners); a flat topology's figures in partition --json and
    analyze are the plan's own (its owners send: brute force from the manifest's pairs)."""
    rc, _, err = run_cli(["partition", "polblogs", "-k", "4", "--ownership", "decoupled", "--topology", "tree:2x2",
                          "--map", "greedy", "-o", tmp_path / "m.plan"], capsys)
    assert rc == 2 and "--ownership decoupled" in err and not (tmp_path / "m.plan").exists()
    rc, out, err = run_cli(["-q", "partition", "polblogs", "-k", "4", "--ownership", "decoupled", "--topology",
                            "tree:2x2", "-o", tmp_path / "d.plan", "--json"], capsys)
    assert rc == 0, err
    got = json.loads(out)["topology"]
    m = json.loads((tmp_path / "d.plan" / "manifest.json").read_text())
    V = np.zeros((4, 4), np.int64)
    for s in m["programs"]["forward"]["steps"]:
        if s["op"] == "alltoallv":
            for a, b, r in s["pairs"]:
                V[a, b] += r
    cost = sum(V[a, b] * (1 if a // 2 == b // 2 else 10) for a in range(4) for b in range(4) if a != b)
    assert got["cost"] == m["topology"]["cost"] == cost
    rc, out, err = run_cli(["-q", "analyze", "polblogs", "--partition", tmp_path / "d.plan", "--topology", "tree:2x2",
                            "--json"], capsys)
    assert rc == 0, err
    assert json.loads(out)["topology"]["cost"] == cost


def test_an_asymmetric_matrix_topology_round_trips_into_a_plan(tmp_path, capsys):
    doc = {"kind": "matrix", "cost": [[0, 1, 5, 7], [2, 0, 6, 4], [3, 8, 0, 1], [9, 2, 1, 0]],
           "fanouts": [2, 2], "levels": [{"name": "node"}], "symmetric": False}
    (tmp_path / "a.json").write_text(json.dumps(doc))
    t = load_topology(str(tmp_path / "a.json"))
    assert t.describe()["symmetric"] is False
    rc, _, err = run_cli(["-q", "partition", "polblogs", "-k", "4", "--topology", tmp_path / "a.json",
                          "-o", tmp_path / "a.plan"], capsys)
    assert rc == 0, err
    assert json.loads((tmp_path / "a.plan" / "manifest.json").read_text())["topology"]["description"]["symmetric"] is False


def test_a_2d_plans_topology_times_expand_and_fold_apart(tmp_path, capsys):
    """A 2D plan runs two exchange steps (expand, fold): its topology object counts 2 steps and the
    α-β time summed over them (topology.md §2), brute force from the manifest's pairs and tree:2x2's
    default links (cost 1 inside a domain of 2, 10 across; α = cost µs, β = cost · 0.1 ns/B)."""
    rc, _, err = run_cli(["-q", "partition", "polblogs", "-k", "4", "--layout", "2d", "--topology", "tree:2x2",
                          "-o", tmp_path / "t.plan"], capsys)
    assert rc == 0, err
    m = json.loads((tmp_path / "t.plan" / "manifest.json").read_text())
    C = np.array([[0 if a == b else (1 if a // 2 == b // 2 else 10) for b in range(4)] for a in range(4)], float)
    total = 0.0
    steps = [s for s in m["programs"]["forward"]["steps"] if s["op"] == "alltoallv"]
    for s in steps:
        V = np.zeros((4, 4))
        for a, b, r in s["pairs"]:
            V[a, b] += r
        msgs, B = (V > 0) * C * 1e-6, V * m["row_bytes"] * C * 1e-10
        total += max((msgs.sum(1) + B.sum(1)).max(), (msgs.sum(0) + B.sum(0)).max())
    assert len(steps) == 2 and m["topology"]["steps"] == 2
    assert m["topology"]["alpha_beta_s"] == pytest.approx(total, rel=1e-12)


def test_numbers_written_as_strings_and_other_loose_fields_are_refused(tmp_path):
    """float() took "1e-9" and numpy "1" as numbers; JSON true read as version 1; a level's
    name/size/fanout inside ``local`` were ignored; ``nvlinks`` was unchecked. One error each."""
    from partplan.topology import tree
    base = tree([2, 2]).describe()
    cases = {"beta": dict(base, local=dict(base["local"], beta="1e-9")),
             "version": dict(base, version=True),
             "version 1.0": dict(base, version=1.0),    # == 1 in Python, as "ranks": 64.0 is refused
             "local": dict(base, local=dict(base["local"], size=2)),
             "nvlinks": dict(base, nvlinks="garbage")}
    for what, doc in cases.items():
        p = tmp_path / f"{what}.json"
        p.write_text(json.dumps(doc))
        with pytest.raises(TopologyError, match=what.split()[0]):
            load_topology(str(p))
    m = {"format": "partplan.topology", "version": 1, "kind": "matrix", "ranks": 2, "cost": [[0, "1"], [1, 0]]}
    (tmp_path / "m.json").write_text(json.dumps(m))
    with pytest.raises(TopologyError, match="must be numbers"):
        load_topology(str(tmp_path / "m.json"))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(base))
    assert load_topology(str(good)).ranks == 4


def test_a_preset_cost_that_would_overflow_is_refused_before_the_read(tmp_path, capsys):
    rc, _, err = run_cli(["partition", tmp_path / "absent.mtx", "-k", 16, "--topology", "tree:4x4:1,1e308",
                          "--map", "greedy", "-o", tmp_path / "t.plan"], capsys)
    one_line(rc, err, 2, "1e+308")


def test_a_remapping_that_costs_more_keeps_the_given_partition(tmp_path, capsys):
    """--map hierarchical partitions again; when that costs more than the given partition on the
    topology (Σ V[a, b] · C[a, b], V counted here with scipy), the given one is kept, with a warning."""
    import scipy.sparse as sp

    from partplan import Graph
    from partplan.io import write_graph
    from partplan.partition.api import load_partition

    A = sp.random(400, 400, density=0.02, random_state=1, format="csr")
    A = sp.csr_matrix(((A + A.T) > 0).astype(float))
    A.setdiag(0)
    A.eliminate_zeros()
    A.sort_indices()
    g = Graph(A.indptr, A.indices, None, directed=False)
    write_graph(g, tmp_path / "r.mtx")
    C = load_topology("tree:4x4").cost

    def cost(part):
        rows = np.repeat(np.arange(g.n), np.diff(g.indptr))
        pairs = np.unique(np.stack([part[rows], g.indices]), axis=1)      # (reading part, row of H)
        pairs = pairs[:, part[pairs[1]] != pairs[0]]
        V = np.zeros((16, 16))
        np.add.at(V, (part[pairs[1]], pairs[0]), 1)
        return float((V * C).sum())

    rc, _, err = run_cli(["partition", tmp_path / "r.mtx", "-k", 16, "-q", "-o", tmp_path / "p.npy"], capsys)
    assert rc == 0, err
    given = load_partition(tmp_path / "p.npy").part
    rc, _, err = run_cli(["partition", tmp_path / "r.mtx", "-k", 16, "-q", "--topology", "tree:4x4", "--map",
                          "hierarchical", "--partition-only", "-o", tmp_path / "h.npy"], capsys)
    assert rc == 0, err
    got = load_partition(tmp_path / "h.npy").part
    assert cost(got) <= cost(given)
    if np.array_equal(got, given):
        assert "--map hierarchical not applied" in err


def test_a_large_tree_is_described_without_its_matrices():
    """A tree's rank × rank matrices are built when first read: `topology show tree:1000x1000`
    (10^6 ranks) describes it at once; reading its cost matrix is refused by the memory budget
    before anything is allocated (10^12 pairs)."""
    from partplan.cli.main import main
    from partplan.topology import load_topology
    from partplan.topology.machine import TopologyError
    t = load_topology("tree:1000x1000")
    assert t.ranks == 10 ** 6 and t.symmetric and t.describe()["fanouts"] == [1000, 1000]
    assert "1000 domains of 1000 ranks" in t.table()
    with pytest.raises(TopologyError, match="memory budget"):
        t.cost
    assert main(["topology", "show", "tree:1000x1000", "--json"]) == 0
    small = load_topology("tree:2x3")
    assert small.cost.tolist()[0] == [0.0, 1.0, 10.0, 10.0, 10.0, 10.0] and small.alpha[0, 1] == 1e-6


def test_the_budget_counts_the_figures_matrices_and_comes_first(monkeypatch, capsys):
    """analyze -k 2000 --topology tree:20x100 under a budget between the topology's own matrices
    (33 bytes per rank pair) and those of its figures too (105): refused before the partition is
    analyzed — it peaked at 2-3 × the budget past the old check; --map greedy's check comes before
    its volume matrix; a zero fanout says so in every command."""
    import partplan.topology.mapping as mapping
    from partplan.topology.machine import FIGURES_PAIR_BYTES, PAIR_BYTES
    pairs = 2000 * 2000
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", str(pairs * (PAIR_BYTES + FIGURES_PAIR_BYTES) // 2))
    assert pairs * PAIR_BYTES < pairs * (PAIR_BYTES + FIGURES_PAIR_BYTES) // 2
    rc, _, err = run_cli(["analyze", "power", "--method", "block", "-k", "2000", "--topology", "tree:20x100"], capsys)
    one_line(rc, err, 2, "of rank × rank matrices (the topology's and its figures')")
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", str(40 * 40 * 8 * mapping.MAP_MATRICES - 1))

    def no_volume(*a, **k):
        raise AssertionError("the volume matrix is made before the budget check")
    monkeypatch.setattr("partplan.metrics.analyze", no_volume)
    with pytest.raises(Exception, match="--map greedy's k × k matrices"):
        mapping.map_parts(None, np.arange(40), load_topology("tree:4x10"), "greedy")
    for argv in (["partition", "power", "-k", "16", "--topology", "tree:0x4", "-o", "x.npy"],
                 ["analyze", "power", "--method", "block", "-k", "16", "--topology", "tree:2x0x8"]):
        rc, _, err = run_cli(argv, capsys)
        one_line(rc, err, 2, "fanouts must be >= 1")
