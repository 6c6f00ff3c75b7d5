"""Routed plans (routed:domain:D / routed:source:D): volumes on a hand-computed
example and against a brute-force count, execution == scipy on LocalComm (many
graphs, up to 64 virtual ranks as 16 × 4) and on gloo (4 processes as 2 × 2),
plan validation, and bytes per level measured == predicted."""
from __future__ import annotations

import json

import numpy as np
import pytest

from partplan import Graph, datasets
from partplan.cli.main import main
from partplan.metrics.topology import level_bytes, topology_metrics
from partplan.plan import build_plan, write_plan
from partplan.program.plan import manifest_volume
from partplan.runtime.validate import validate_plan
from partplan.layouts import layout_from_manifest
from partplan.layouts.routed import Routed, lanes, route_stages
from partplan.runtime import Executor, LocalComm
from partplan.topology import load_topology


def _rand_graph(n, m, seed, directed, weighted=False):
    rng = np.random.default_rng(seed)
    w = rng.integers(1, 5, m).astype(float) if weighted else None
    return Graph.from_edges(rng.integers(0, n, m), rng.integers(0, n, m), w, n=n, symmetrize=not directed)


# ----------------------------------------------------------------------------- hand-computed volumes
def _tiny():
    """8 vertices, rank r owns {2r, 2r+1}; domains {0,1} {2,3}. Row i reads column j:
    (4,0) (6,0) (7,0) (6,1) [domain 1 reads rank 0's rows], (2,0) [rank 1 reads rank 0], (0,6)."""
    rows, cols = [4, 6, 7, 6, 2, 0], [0, 0, 0, 1, 0, 6]
    return Graph.from_edges(rows, cols, n=8), np.arange(8) // 2


def _mat(entries):
    m = np.zeros((4, 4), dtype=np.int64)
    for (q, r), v in entries.items():
        m[q, r] = v
    return m


def test_domain_route_volumes_by_hand():
    g, part = _tiny()
    lay = Routed("domain", 4, 2)
    # 2 domains of 2: one remote domain < 2 ranks per domain, so L = 2 lanes: row j of domain pair
    # (d, e) uses local index (d + e + j mod 2) mod 2
    st = route_stages(g, part, lay)
    # (row 0, domain 1): lane 1 → monitors 1 → 3; (row 1, domain 1): lane 0 → monitors 0 → 2;
    # (row 6, domain 0): lane 1 → monitors 3 (its owner) → 1
    assert np.array_equal(st["A"], _mat({(0, 1): 1}))
    assert np.array_equal(st["B"], _mat({(1, 3): 1, (0, 2): 1, (3, 1): 1}))
    # C: monitor 3 → rank 2 (row 0; rank 3 reads it itself), monitor 2 → rank 3 (row 1),
    # monitor 1 → rank 0 (row 6), owner 0 → rank 1 (row 0, same domain)
    assert np.array_equal(st["C"], _mat({(3, 2): 1, (2, 3): 1, (1, 0): 1, (0, 1): 1}))
    m = topology_metrics(list(st.values()), load_topology("tree:2x2"), row_bytes=4, route="domain")
    lv = m["levels"][0]
    assert (lv["crossing_rows"], lv["crossing_messages"]) == (3, 3)   # distinct (row, domain); lanes of 2 pairs


def test_domain_route_one_message_per_domain_pair_without_lanes():
    """8 ranks as 4 domains of 2 (3 remote domains >= 2 ranks: one lane): monitor of (d, e) is d·2 + (d + e) mod 2."""
    # rank r owns rows 2r, 2r + 1; ranks 2, 3, 3, 6 read column 0 (rank 0); rank 0 reads column 14 (rank 7)
    g, part = Graph.from_edges([4, 6, 7, 12, 0], [0, 0, 0, 0, 14], n=16), np.arange(16) // 2
    st = route_stages(g, part, Routed("domain", 8, 2))
    # row 0 (rank 0, domain 0) to domains 1 (rank 2) and 1 (rank 3) and 3 (rank 6): monitors m(0,1) = 1,
    # m(0,3) = 1; receivers m(1,0) = 3, m(3,0) = 7. Row 14 (rank 7, domain 3) to domain 0: m(3,0) = 7, m(0,3) = 1
    assert np.array_equal(np.argwhere(st["A"]).tolist(), [[0, 1]]) and st["A"].sum() == 1   # row 0 once to 1
    assert {tuple(x) for x in np.argwhere(st["B"])} == {(1, 3), (1, 7), (7, 1)} and st["B"].sum() == 3
    assert {tuple(x) for x in np.argwhere(st["C"])} == {(3, 2), (7, 6), (1, 0)}


def test_source_route_volumes_by_hand():
    g, part = _tiny()
    st = route_stages(g, part, Routed("source", 4, 2))
    # rank q sends to e·2 + q mod 2: rank 0 → rank 2 (rows 0, 1), rank 3 → rank 1 (row 6)
    assert np.array_equal(st["B"], _mat({(0, 2): 2, (3, 1): 1}))
    assert np.array_equal(st["C"], _mat({(2, 3): 2, (1, 0): 1, (0, 1): 1}))
    flat = np.zeros((4, 4), np.int64)
    flat[0, 2], flat[0, 3], flat[3, 0], flat[0, 1] = 1, 2, 1, 1
    t = load_topology("tree:2x2")
    assert topology_metrics([flat], t, row_bytes=4)["levels"][0]["crossing_rows"] == 4    # per (row, rank)
    assert topology_metrics(list(st.values()), t, row_bytes=4)["levels"][0]["crossing_messages"] == 2  # (rank, domain)


@pytest.mark.parametrize("route", ["domain", "source"])
@pytest.mark.parametrize("p,D,directed", [(8, 2, True), (12, 3, False), (16, 4, True), (6, 1, False), (4, 4, True)])
def test_crossing_counts_against_brute_force(route, p, D, directed):
    g = _rand_graph(120, 500, p + D, directed)
    part = np.random.default_rng(p).integers(0, p, g.n)
    A = g.to_scipy().tocoo()
    need = {(int(j), int(part[i])) for i, j in zip(A.row, A.col) if part[i] != part[j]}   # (row of H, reader)
    dom = lambda r: r // D  # noqa: E731
    pairs = {(j, dom(r)) for j, r in need if dom(part[j]) != dom(r)}
    st = route_stages(g, part, Routed(route, p, D))
    t = load_topology(f"tree:{D}x{p // D}")
    m = topology_metrics(list(st.values()), t, row_bytes=1, route=route)["levels"][0]
    assert m["crossing_rows"] == len(pairs)
    if route == "domain":
        assert m["crossing_messages"] == len({(dom(part[j]), e) for j, e in pairs})
    else:
        assert m["crossing_messages"] == len({(int(part[j]), e) for j, e in pairs})
    flat = topology_metrics([np.asarray(__import__("partplan").analyze(g, part, p).volume)], t, row_bytes=1)
    assert flat["levels"][0]["crossing_rows"] == sum(1 for j, r in need if dom(part[j]) != dom(r))


def test_lanes_spread_two_big_domains_over_every_rank():
    """2 domains of 8: one remote domain, so 8 lanes; every rank sends a share of the crossing rows."""
    assert (lanes(16, 8), lanes(64, 4), lanes(8, 8), lanes(32, 4)) == (8, 1, 1, 1)
    g = _rand_graph(800, 12000, 5, False)
    part = np.random.default_rng(5).integers(0, 16, g.n)
    B = route_stages(g, part, Routed("domain", 16, 8))["B"]
    sent = B.sum(axis=1)
    assert np.all(sent > 0) and sent.max() < 0.2 * sent.sum()
    assert np.count_nonzero(B) == 16       # lane l of domain 0 ↔ lane l of domain 1


def test_monitors_are_spread_over_the_domain():
    """8 domains × 4: monitor of (d, e) is local index (d + e) mod 4, so every rank sends
    inter-domain rows, to at most ceil(8 / 4) = 2 target domains; no rank carries it all."""
    g = _rand_graph(600, 12000, 3, False)
    part = np.random.default_rng(3).integers(0, 32, g.n)
    B = route_stages(g, part, Routed("domain", 32, 4))["B"]
    assert np.flatnonzero(B.sum(axis=1)).size == 32
    assert np.count_nonzero(B, axis=1).max() == 2
    assert np.count_nonzero(B) == 8 * 7          # one message per ordered pair of distinct domains
    assert B.sum(axis=1).max() < 0.1 * B.sum()   # the busiest monitor sends < 10 % of the crossing rows


# ----------------------------------------------------------------------------- execution on LocalComm
def _run_local(plan, H, program="forward"):
    ex = Executor(plan.manifest, plan.ranks, LocalComm(plan.p, plan.groups()))
    outs = ex.run(program, [H[rp.in_ids(program)] for rp in plan.ranks])
    Z = np.zeros_like(H)
    for rp, o in zip(plan.ranks, outs):
        Z[rp.out_ids(program)] = o
    return Z, ex.comm


@pytest.mark.parametrize("spec,p,directed,weighted", [
    ("routed:domain:2", 8, True, True), ("routed:source:2", 8, True, False), ("routed:domain:4", 16, False, True),
    ("routed:source:4", 16, True, True), ("routed:domain:3", 9, False, False), ("routed:domain:1", 4, True, False),
    ("routed:domain:5", 5, True, False)])
def test_routed_plans_equal_scipy_on_localcomm(spec, p, directed, weighted):
    g = _rand_graph(300, 2500, p, directed, weighted)
    part = np.random.default_rng(p).integers(0, p, g.n)
    plan = build_plan(g, part, p, layout=spec)      # the builder cross-checks against the route model
    H = np.random.default_rng(1).standard_normal((g.n, 5))
    A = g.to_scipy()
    Z, comm = _run_local(plan, H)
    assert np.array_equal(Z, A @ H)                 # local CSRs keep scipy's order: bitwise
    pred = route_stages(g, part, layout_from_manifest(plan.manifest))
    assert np.array_equal(comm.sent_rows, sum(pred.values()))
    if directed:
        Zb, _ = _run_local(plan, H, "backward")
        assert np.allclose(Zb, A.T @ H, rtol=1e-13, atol=1e-13)


def test_64_virtual_ranks_16_domains_of_4_real_graph_bytes_per_level():
    g = datasets.load("email-Enron")
    from partplan.partition import metis
    part = metis(g, 64, seed=0)
    t = load_topology("tree:4x16")
    H = np.random.default_rng(2).standard_normal((g.n, 3))
    ref = g.to_scipy() @ H
    flat_rows = None
    for spec in ("1d", "routed:domain:4", "routed:source:4"):
        plan = build_plan(g, part, 64, layout=spec, f=3, dtype="float64")
        Z, comm = _run_local(plan, H)
        assert np.array_equal(Z, ref), spec
        steps = [m for m in ([plan.stats.volume] if spec == "1d" else plan.stats.stages.values())]
        topo = topology_metrics(steps, t, row_bytes=24)
        measured = level_bytes(comm.sent_bytes, t)
        assert measured["domain"] == topo["levels"][0]["crossing_bytes"]
        assert measured["local"] == topo["local_bytes"]
        assert np.array_equal(comm.sent_bytes, manifest_volume(plan.manifest) * 24)
        if spec == "1d":
            flat_rows = topo["levels"][0]["crossing_rows"]
        else:
            assert topo["levels"][0]["crossing_rows"] < flat_rows   # dedupe: rows cross once per domain


@pytest.mark.parametrize("spec,p,directed", [("routed:domain:2", 8, True), ("routed:source:4", 16, False)])
def test_routed_halo_counts_the_distinct_remote_columns(spec, p, directed):
    """``halo`` per rank: the distinct columns its rows read that another rank owns (brute force),
    not the rows it only forwards."""
    g = _rand_graph(300, 2500, p + 1, directed)
    part = np.random.default_rng(p).integers(0, p, g.n)
    plan = build_plan(g, part, p, layout=spec)
    A = g.to_scipy().tocsr()
    for r, rank in enumerate(plan.ranks):
        cols = np.unique(A[np.flatnonzero(part == r)].indices)
        assert rank.summary()["halo"] == np.count_nonzero(part[cols] != r) > 0, (r, rank.summary())


def test_a_routed_plan_recording_halo_0_validates(tmp_path):
    """A routed plan whose writer left ``halo`` uncounted (0) validates; any other wrong count is refused."""
    g = _rand_graph(200, 1500, 3, False)
    path = write_plan(build_plan(g, np.random.default_rng(3).integers(0, 4, g.n), 4, layout="routed:domain:2"),
                      tmp_path / "r.plan")
    mf = path / "manifest.json"
    m = json.loads(mf.read_text())
    for halo, ok in ((0, True), (1, False)):
        for e in m["shards"]:
            e["halo"] = halo
        mf.write_text(json.dumps(m))
        rep = validate_plan(path, g)
        assert rep["ok"] == ok, rep["checks"]
        assert ok or "shards[0].halo = 1" in json.dumps(rep["checks"])


def test_routed_plan_validates(tmp_path):
    g = _rand_graph(200, 1500, 9, True, True)
    part = np.random.default_rng(9).integers(0, 8, g.n)
    path = write_plan(build_plan(g, part, 8, layout="routed:domain:2"), tmp_path / "r.plan")
    rep = validate_plan(path, g)
    assert rep["ok"], rep["checks"]
    assert rep["backward"] == "separate"


# ----------------------------------------------------------------------------- gloo
@pytest.mark.dist
@pytest.mark.slow
def test_gloo_p4_two_domains_of_two(tmp_path):
    from partplan.runtime.spmm import run_spmm
    g = _rand_graph(400, 3000, 11, True)
    part = np.random.default_rng(11).integers(0, 4, g.n)
    t = load_topology("tree:2x2")
    path = write_plan(build_plan(g, part, 4, layout="routed:domain:2", meta={"topology": {"description": t.describe()}}),
                      tmp_path / "r.plan")
    H = np.random.default_rng(5).standard_normal((g.n, 6))
    np.save(tmp_path / "H.npy", H)
    rep = run_spmm(path, nprocs=4, backend="gloo", features=tmp_path / "H.npy", output=tmp_path / "Z.npy",
                   repeat=1, kernel="scipy", timeout=30)
    assert np.array_equal(np.load(tmp_path / "Z.npy"), g.to_scipy() @ H)
    assert rep["bytes_match"]        # every (q, r) byte count measured == the manifest's pairs
    st = route_stages(g, part, Routed("domain", 4, 2))
    want = topology_metrics(list(st.values()), t, row_bytes=48)
    assert rep["bytes_measured"] == want["total_rows"] * 48
    # per level, from the 4 processes' own counters
    assert rep["bytes_by_level_measured"] == rep["bytes_by_level_predicted"] == \
        {"local": want["local_bytes"], "domain": want["levels"][0]["crossing_bytes"]}
    assert level_bytes(manifest_volume(json.loads((path / "manifest.json").read_text())) * 48, t)["domain"] == \
        want["levels"][0]["crossing_bytes"]


# ----------------------------------------------------------------------------- CLI
def test_cli_analyze_topology_json_and_inspect(tmp_path, capsys):
    assert main(["analyze", "email-Enron", "--method", "metis", "-k", "16", "--topology", "tree:4x4",
                 "--route", "domain", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)["topology"]
    assert d["route"] == "domain" and [lv["name"] for lv in d["levels"]] == ["domain"]
    for key in ("crossing_rows", "crossing_messages"):
        assert key in d["levels"][0]
    assert d["levels"][0]["crossing_messages"] <= 4 * 3
    for key in ("busiest_rank_rows", "cost", "alpha_beta_s"):
        assert key in d
    part = tmp_path / "p.npy"
    assert main(["analyze", "email-Enron", "--method", "metis", "-k", "16", "--save-partition", str(part),
                 "--json"]) == 0
    capsys.readouterr()
    out = tmp_path / "e.plan"
    assert main(["plan", "email-Enron", "--partition", str(part), "--topology", "tree:4x4", "--route", "domain",
                 "--map", "greedy", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["inspect", str(out)]) == 0
    text = capsys.readouterr().out
    assert "routed:domain:4" in text and "route=domain" in text and "crossing rows" in text
    m = json.loads((out / "manifest.json").read_text())
    assert m["topology"]["route"] == "domain" and m["topology"]["map"]["method"] == "greedy"
    assert m["topology"]["description"]["fanouts"] == [4, 4]


def test_cli_analyze_routed_layout_text(capsys):
    assert main(["analyze", "email-Enron", "--method", "block", "-k", "8", "--layout", "routed:source:2"]) == 0
    out = capsys.readouterr().out
    assert "routed layout 4x2 on p=8 ranks" in out and "step_B_rows" in out


# ----------------------------------------------------------------------------- nested (multi-level) routes
@pytest.mark.parametrize("route", ["domain", "source"])
@pytest.mark.parametrize("p,sizes,directed", [(8, [2, 4], True), (16, [2, 8], False), (24, [2, 6], True),
                                              (27, [3, 9], False)])
def test_nested_routes_exact_and_cross_each_outer_domain_once(route, p, sizes, directed, tmp_path):
    g = _rand_graph(300, 3000, p + sizes[1], directed, weighted=True)
    part = np.random.default_rng(p).integers(0, p, g.n)
    spec = f"routed:{route}:{','.join(map(str, sizes))}"
    plan = build_plan(g, part, p, layout=spec)          # cross-checked against the nested route model
    H = np.random.default_rng(2).standard_normal((g.n, 3))
    Z, comm = _run_local(plan, H)
    assert np.array_equal(Z, g.to_scipy() @ H)
    st = route_stages(g, part, layout_from_manifest(plan.manifest))
    assert np.array_equal(comm.sent_rows, sum(st.values()))
    # outer level: every (row, destination outer domain) pair crosses once, counted from the matrix
    A = g.to_scipy().tocoo()
    top = sizes[1]
    pairs = {(int(j), int(part[i]) // top) for i, j in zip(A.row, A.col) if part[i] // top != part[j] // top}
    t = load_topology(f"tree:{sizes[0]}x{sizes[1] // sizes[0]}x{p // sizes[1]}")
    m = topology_metrics(list(st.values()), t, row_bytes=1, route=route)
    assert m["levels"][1]["crossing_rows"] == len(pairs)
    want = {"B1", "C1.B", "C1.C"} | ({"A1.A", "A1.B", "A1.C"} if route == "domain" else set())
    assert set(st) == want | ({"C1.A"} if route == "domain" else set())
    if directed:
        Zb, _ = _run_local(plan, H, "backward")
        assert np.allclose(Zb, g.to_scipy().T @ H, rtol=1e-13, atol=1e-13)


def test_nested_route_validates_and_cli_routes_every_level(tmp_path, capsys):
    g = _rand_graph(200, 1500, 4, True)
    part = np.random.default_rng(4).integers(0, 8, g.n)
    path = write_plan(build_plan(g, part, 8, layout="routed:domain:2,4"), tmp_path / "n.plan")
    rep = validate_plan(path, g)
    assert rep["ok"], rep["checks"]
    assert main(["analyze", "email-Enron", "--method", "block", "-k", "16", "--topology", "tree:2x4x2",
                 "--route", "domain", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["layout"]["spec"] == "1d" and d["topology"]["steps"] == 7      # nested: A1.{A,B,C}, B1, C1.{A,B,C}
    assert main(["analyze", "email-Enron", "--method", "block", "-k", "16", "--topology", "tree:2x4x2",
                 "--route", "domain", "--route-level", "rack", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["topology"]["steps"] == 3


@pytest.mark.parametrize("spec,msg", [("routed:domain:4,2", "does not divide"), ("routed:domain:2,2", "levels repeat"),
                                      ("routed:domain:3", "does not divide"), ("routed:ring:2", "expected routed:")])
def test_bad_routed_specs(spec, msg):
    from partplan.errors import PartitionError
    from partplan.layouts import parse_layout
    with pytest.raises(PartitionError, match=msg):
        parse_layout(spec, 8)


@pytest.mark.parametrize("topo, route", [("tree:1x16", "domain"), ("tree:16x1", "domain"), ("tree:1x16", "source"),
                                         ("tree:4x4", "domain")])
def test_the_step_count_is_the_programs(tmp_path, capsys, topo, route):
    """topology.steps (inspect: "in N exchange step(s)") counts the exchange steps the plan runs: a
    route whose domains hold one rank, or one domain all ranks, leaves its empty steps out."""
    path = tmp_path / "r.plan"
    assert main(["-q", "partition", "polblogs", "-k", "16", "--preset", "fast", "--topology", topo, "--route", route,
                 "-o", str(path)]) == 0
    capsys.readouterr()
    m = json.loads((path / "manifest.json").read_text())
    ran = [s for s in m["programs"]["forward"]["steps"] if s["op"] == "alltoallv"]
    assert m["topology"]["steps"] == len(ran) == sum(1 for s in ran if any(r for _, _, r in s["pairs"]))


@pytest.mark.parametrize("layout", ["1d", "2d:1x2", "2d:2x1", "1.5d:2"])
def test_the_step_count_of_flat_programs_keeps_their_empty_steps(tmp_path, capsys, layout):
    """1D, 1.5D and 2D programs run every exchange step, empty or not (two components, one per
    block: nothing moves): topology.steps counts them as the program has them."""
    from partplan.io import write_graph
    g = Graph.from_edges(np.array([0, 1, 2, 4, 5, 6]), np.array([1, 2, 3, 5, 6, 7]), symmetrize=True)
    write_graph(g, tmp_path / "g.mtx")
    (tmp_path / "p.txt").write_text("0\n0\n0\n0\n1\n1\n1\n1\n")
    k = 4 if layout == "1.5d:2" else 2
    path = tmp_path / "f.plan"
    assert main(["-q", "plan", str(tmp_path / "g.mtx"), "--partition", str(tmp_path / "p.txt"), "--layout", layout,
                 "-k", str(k), "--topology", f"tree:1x{k}", "-o", str(path)]) == 0
    capsys.readouterr()
    m = json.loads((path / "manifest.json").read_text())
    ran = [s for s in m["programs"]["forward"]["steps"] if s["op"] == "alltoallv"]
    assert m["topology"]["steps"] == len(ran) >= 1 and m["topology"]["total_rows"] == 0
