"""The engines' own limits, met before they run: negative seeds everywhere, 32-bit weights refused
by the engines that hold them in C ints (and left out of the default pipeline's starts), a
user's KaHyPar INI checked as text, no graph at all; and the balance an engine leaves: repaired
before partplan's own passes, said when an explicit engine's result stays above ε."""
from __future__ import annotations

import math

import numpy as np
import pytest

from partplan.errors import PartitionError
from partplan.graph import Graph
from partplan.partition.api import partition
from tests.errlines import one_line, run_cli


def _limit(graph: Graph, k: int, eps: float) -> int:
    """⌊(1 + ε)·⌈W / k⌉⌋ on the balance weights (row nnz, at least 1), recomputed here."""
    w = int(np.maximum(graph.row_nnz, 1).sum())
    return int((1 + eps) * -(-w // k))


def _heaviest(graph: Graph, part: np.ndarray, k: int) -> int:
    return int(np.bincount(part, weights=np.maximum(graph.row_nnz, 1), minlength=k).max())


def _path(n: int) -> Graph:
    return Graph.from_edges(np.arange(n - 1), np.arange(1, n), n=n, symmetrize=True)


@pytest.mark.parametrize("kw", [dict(backend="random"), dict(model="stochastic")])
def test_a_negative_seed_is_a_seed_for_every_engine(kw):
    g = _path(30)
    p = partition(g, 3, seed=-5, **kw)
    assert p.part.shape == (30,) and p.part.min() >= 0 and p.part.max() < 3
    if "model" not in kw:     # (the stochastic model's Mt-KaHyPar DEFAULT run is not reproducible)
        assert np.array_equal(p.part, partition(g, 3, seed=-5, **kw).part)


def test_no_graph_is_one_partition_error():
    with pytest.raises(PartitionError, match="needs a graph"):
        partition(None, 2)


def _heavy(n: int = 40, weight: int = 2 ** 30) -> Graph:
    """A path whose vertex weights sum past 2^31 (a METIS file's own weights can)."""
    g = _path(n)
    return Graph(g.indptr, g.indices, g.data, vertex_weights=np.full(n, weight, np.int64), name="heavy")


@pytest.mark.parametrize("kw", [dict(backend="kahypar"), dict(backend="mtkahypar"),
                                dict(backend="mtkahypar", model="graph")])
def test_32_bit_engines_refuse_weights_past_2_31_before_running(kw):
    pytest.importorskip("kahypar" if kw["backend"] == "kahypar" else "mtkahypar")
    with pytest.raises(PartitionError, match="32-bit weights"):
        partition(_heavy(), 4, threads=1, **kw) if kw["backend"] == "mtkahypar" else partition(_heavy(), 4, **kw)


def test_the_default_leaves_mtkahypar_out_where_its_weights_would_overflow():
    g = _heavy()
    p = partition(g, 4, threads=1)
    assert "mtkahypar" not in p.params["starts"] and "metis" in p.params["starts"]
    w = g.balance_weights
    limit = int((1 + 0.03) * -(-int(w.sum()) // 4))
    assert int(np.bincount(p.part, weights=w, minlength=4).max()) <= limit
    small = partition(_path(40), 4, threads=1)
    assert "mtkahypar" in small.params["starts"]          # the rule, not a removal of the start


def test_a_binary_kahypar_ini_is_one_error(tmp_path, capsys):
    pytest.importorskip("kahypar")
    ini = tmp_path / "junk.ini"
    ini.write_bytes(bytes(range(256)))
    with pytest.raises(PartitionError, match="not UTF-8"):
        partition(_path(20), 2, backend="kahypar", ini=str(ini))
    mtx = tmp_path / "p.mtx"
    mtx.write_text("%%MatrixMarket matrix coordinate pattern symmetric\n4 4 3\n2 1\n3 2\n4 3\n")
    rc, _, err = run_cli(["partition", mtx, "-k", "2", "--engine", "kahypar", "--kahypar-ini", ini,
                          "-o", tmp_path / "o.part"], capsys)
    one_line(rc, err, 2, "junk.ini", "UTF-8")
    assert not (tmp_path / "o.part").exists()
    rc, _, err = run_cli(["partition", mtx, "-k", "2", "--engine", "kahypar", "--kahypar-ini", tmp_path,
                          "-o", tmp_path / "o.part"], capsys)
    one_line(rc, err, 2, "directory")


def _directed_skewed(n: int = 2000, m: int = 10000) -> Graph:
    """Out-links from uniform rows to heavy-tailed targets: column nonzeros far from row nonzeros,
    so the joint hypergraph's weights (row + column) differ from what ε bounds (row)."""
    rng = np.random.default_rng(0)
    return Graph.from_edges(rng.integers(0, n, m), (rng.pareto(1.5, m) * 20).astype(np.int64) % n, n=n)


def test_the_hypergraph_model_of_a_directed_graph_ends_within_epsilon_when_refined():
    pytest.importorskip("mtkahypar")
    g = _directed_skewed()
    assert not g.is_symmetric()
    p = partition(g, 8, model="hypergraph", threads=1)           # max-both: repaired, then refined
    assert _heaviest(g, p.part, 8) <= _limit(g, 8, 0.03)
    assert "over_epsilon" not in p.info
    raw = partition(g, 8, model="hypergraph", objective="total", threads=1)   # the engine's own result
    assert _heaviest(g, raw.part, 8) > _limit(g, 8, 0.03), "the case: Mt-KaHyPar's joint weights above ε"
    assert raw.info["over_epsilon"]["heaviest"] == _heaviest(g, raw.part, 8)
    assert raw.info["over_epsilon"]["limit"] == _limit(g, 8, 0.03)
    assert raw.info["over_epsilon"]["why"] == "engine"


def _star(leaves: int) -> Graph:
    return Graph.from_edges(np.zeros(leaves, np.int64), np.arange(1, leaves + 1), n=leaves + 1, symmetrize=True)


def test_an_explicit_engine_above_epsilon_is_said_and_the_fast_preset_repairs_it(tmp_path, capsys):
    """A star of 30 leaves at k = 2: the hub (30) alone fits one part (limit ⌊1.03·30⌋ = 30), so a
    partition within ε exists; whatever METIS returns, the figures said are the partition's."""
    g = _star(30)
    limit = _limit(g, 2, 0.03)
    metis = partition(g, 2, model="graph")
    heaviest = _heaviest(g, metis.part, 2)
    assert heaviest > limit, "the case: METIS k-way above ε on the star"
    assert metis.info["over_epsilon"]["why"] == "engine" and metis.info["over_epsilon"]["heaviest"] == heaviest
    fast = partition(g, 2, preset="fast")
    assert _heaviest(g, fast.part, 2) <= limit and "over_epsilon" not in fast.info
    mtx = tmp_path / "star.mtx"
    lines = [f"{i + 2} 1" for i in range(30)]
    mtx.write_text("%%MatrixMarket matrix coordinate pattern symmetric\n31 31 30\n" + "\n".join(lines) + "\n")
    rc, _, err = run_cli(["partition", mtx, "-k", "2", "--model", "graph", "-q", "-o", tmp_path / "s.part"], capsys)
    assert rc == 0
    assert "above the ε-limit 30" in err and "metis's own balance" in err, err


def _cycle(n: int) -> Graph:
    return Graph.from_edges(np.arange(n), (np.arange(n) + 1) % n, n=n, symmetrize=True)


def test_above_epsilon_says_why():
    """A 5-cycle in 2 parts: no row alone is above the limit (5), but 5 rows of weight 2 do not
    pack into 2 parts of 5 — every partition has a part of 6 (not an engine's fault, and the repair's
    search proves it); a vertex weight above the limit is the balance floor, in the graph's own
    vertex weights."""
    g = _cycle(5)
    for kw in (dict(), dict(preset="fast")):
        p = partition(g, 2, **kw)
        assert _heaviest(g, p.part, 2) == 6 and p.info["over_epsilon"]["why"] == "no packing"
    assert partition(g, 2, model="graph").info["over_epsilon"]["why"] == "engine"
    path = _path(10)
    heavy = Graph(path.indptr, path.indices, path.data, vertex_weights=np.r_[100, np.ones(9, np.int64)])
    for kw in (dict(), dict(backend="metis")):     # a vertex weight above the limit: the balance floor
        info = partition(heavy, 2, **kw).info
        assert info["balance_floor"]["row"] == 0 and info["balance_floor"]["weights"] == "vertex weight"
        assert info["balance_floor"]["limit"] == 56 and "over_epsilon" not in info
        # the compute bound counts row nonzeros (the path's: at most 2 of 18, 9 per part): none here
        assert info["balance_floor"]["compute_imbalance_at_least"] == 0.0
    star_w = _star(40)                              # the hub: 40 of 80 nonzeros, 4 parts of 20 -> at least 1
    star_w = Graph(star_w.indptr, star_w.indices, star_w.data, vertex_weights=np.r_[100, np.ones(40, np.int64)])
    hub = partition(star_w, 4, model="graph").info["balance_floor"]
    assert hub["compute_imbalance_at_least"] == 40 / (80 / 4) - 1
    star = _star(40)                                # its hub's 40 nonzeros, but every vertex weighs 1
    star = Graph(star.indptr, star.indices, star.data, vertex_weights=np.ones(41, np.int64))
    assert "balance_floor" not in partition(star, 4, model="graph").info
    assert "over_epsilon" not in partition(_path(10), 2).info


def test_an_option_error_is_one_line(tmp_path, capsys):
    rc, _, err = run_cli(["partition", "email-Enron", "-k", "0", "-o", tmp_path / "o.part"], capsys)
    line = one_line(rc, err, 2, "-k", "partplan partition --help")
    assert "usage:" not in err.replace(line, "")


def test_ownership_options_keep_the_default_pipeline():
    """The owners are a post-pass after any engine: naming their method (even its default) must
    not switch the default pipeline for plain Mt-KaHyPar (not reproducible)."""
    rng = np.random.default_rng(3)
    g = Graph.from_edges(rng.integers(0, 200, 1200), rng.integers(0, 200, 1200), n=200, symmetrize=True,
                         self_loops="remove")
    a = partition(g, 6, seed=7, ownership="decoupled", ownership_method="lp", threads=1)
    b = partition(g, 6, seed=7, ownership="decoupled", threads=1)
    assert a.params.get("preset") == "auto" and b.params.get("preset") == "auto"
    assert np.array_equal(a.part, b.part) and np.array_equal(a.owner, b.owner)


@pytest.mark.parametrize("kw", [dict(preset="fast"),
                                dict(backend="metis", model="graph", objective="max-both"),
                                dict(backend="kaminpar", objective="max-both")])
def test_partplans_own_passes_keep_the_compute_limit_on_graphs_with_empty_rows(kw):
    """Rows without nonzeros weigh 1 in the balance and 0 in compute: the fast preset ends within the
    compute limit ⌊(1+ε)·⌈nnz/k⌉⌋ as the default pipeline does (it left a part at 2,582 against
    2,563), and the bottleneck refinement after an explicit engine whose start is within it stays
    within it. Oracle: the CSR's own row lengths."""
    rng = np.random.default_rng(7)
    n = 2000
    g = Graph.from_edges(rng.integers(0, n // 2, 20000), rng.integers(0, n, 20000), n=n)   # rows >= 1000 empty
    k = 8
    nnz = np.diff(g.indptr)
    assert (nnz == 0).sum() >= 900
    part = partition(g, k, **kw).part
    assert np.bincount(part, weights=nnz, minlength=k).max() <= int((1 + 0.03) * -(-int(nnz.sum()) // k))
    assert _heaviest(g, part, k) <= _limit(g, k, 0.03)


@pytest.mark.parametrize("k,recursive", [(4, None), (8, None), (16, True)])
def test_metis_recursive_bisection_keeps_a_large_epsilon(k, recursive):
    """METIS's recursive bisection (pymetis's choice for k <= 8) stops balancing at all above a
    ufactor of about 500: at ε = 1 (ufactor 1000) a graph of 2,000 rows put up to 14x the mean
    weight in one part. The heaviest part, counted here, is within ⌊(1+ε)·⌈W/k⌉⌋."""
    import math
    from partplan.datasets.generators import rmat
    g = rmat(12, seed=2)
    for eps in (0.5, 1.0):
        kw = {} if recursive is None else {"recursive": recursive}
        p = partition(g, k, backend="metis", imbalance=eps, **kw)
        w = np.maximum(g.row_nnz, 1)
        assert np.bincount(p.part, weights=w, minlength=k).max() <= math.floor((1 + eps) * -(-int(w.sum()) // k))


def test_a_compute_limit_the_pipeline_misses_is_said():
    """On a graph with empty rows the pipeline keeps the compute limit (row nonzeros) beside the
    balance limit; where its repair stops short it said nothing (58 nonzeros against the limit 57 at
    k = 7, ε = 0; 28 against 25 at k = 16). The miss is recorded and said; nonzeros counted here."""
    import math
    rng = np.random.default_rng(1)
    g = Graph.from_edges(rng.integers(0, 50, 400), rng.integers(0, 200, 400), n=200)   # rows 50.. empty
    said = []
    for k, eps in ((7, 0.0), (16, 0.03)):
        for kw in ({}, {"preset": "fast"}):
            p = partition(g, k, imbalance=eps, progress=said.append, **kw)
            heaviest = int(np.bincount(p.part, weights=g.row_nnz, minlength=k).max())
            limit = math.floor((1 + eps) * -(-int(g.nnz) // k))
            over = p.info.get("over_compute_limit")
            assert (over is not None) == (heaviest > limit)
            if over is not None:
                assert (over["heaviest"], over["limit"]) == (heaviest, limit)
                assert any("above the compute limit" in line for line in said)
    assert any("over_compute_limit" in partition(g, k, imbalance=eps).info for k, eps in ((7, 0.0), (16, 0.03)))


def test_the_stochastic_model_of_a_graph_without_edges_is_one_clear_error():
    """A graph of self loops only never samples a net of two pins; the error advised raising
    max_batches or theta, which cannot help."""
    from partplan.errors import OptionError
    for g in (Graph.from_edges(np.arange(10), np.arange(10), n=10), Graph.from_edges([0], [0], n=10)):
        with pytest.raises(OptionError, match="has none .*graph model"):
            partition(g, 2, model="stochastic")


# 15 rows, 37 nonzeros, rows 10-14 (0-based) without nonzeros but read by others: compute limit 13 at k = 3
_DIR15 = [(1, 5), (1, 8), (1, 15), (2, 1), (2, 6), (2, 8), (2, 12), (3, 1), (3, 5), (3, 7), (3, 12), (3, 14),
          (4, 10), (4, 11), (4, 15), (5, 1), (5, 5), (5, 7), (5, 8), (5, 11), (5, 14), (6, 2), (6, 3), (6, 6),
          (6, 12), (7, 11), (8, 1), (8, 8), (8, 12), (9, 2), (9, 5), (9, 7), (9, 9), (10, 5), (10, 7), (10, 14),
          (10, 15)]


@pytest.mark.parametrize("engine", ["kaminpar", "random", "block", "metis"])
def test_a_bottleneck_refinement_after_an_engine_keeps_the_compute_limit_or_says_so(engine):
    """On a graph with empty rows, the bottleneck refinement after an explicit engine keeps the
    compute limit, never worse than the engine's start; where a part stays above it,
    info["over_compute_limit"] says so (KaMinPar left 14 against 13, unsaid)."""
    r, c = np.array(_DIR15).T - 1
    g = Graph.from_edges(r, c, n=15)
    assert (g.row_nnz == 0).sum() == 5
    limit = math.floor(1.03 * math.ceil(g.nnz / 3))
    p = partition(g, 3, backend=engine, objective="max-both", seed=0)
    heaviest = int(np.bincount(p.part, weights=g.row_nnz, minlength=3).max())
    assert heaviest <= limit or p.info["over_compute_limit"]["heaviest"] == heaviest


def test_an_option_the_fast_preset_does_not_take_names_the_preset(tmp_path, capsys):
    rc, _, err = run_cli(["partition", "polblogs", "-k", "4", "--preset", "fast", "--threads", "2",
                          "-o", tmp_path / "x.npy"], capsys)
    one_line(rc, err, 2, "preset 'fast'", "does not take option(s) threads")
    assert not (tmp_path / "x.npy").exists()


def test_a_warning_is_said_once_with_progress_on(tmp_path, capsys):
    """Without -q the over-ε warning came twice: as a progress line and as the warning; the
    API's progress callback still gets it (API users have no warning line)."""
    g = _cycle(5)
    from partplan.io import write_graph
    write_graph(g, tmp_path / "c.mtx")
    rc, _, err = run_cli(["partition", tmp_path / "c.mtx", "-k", "2", "--model", "graph", "-o", tmp_path / "p.npy"],
                         capsys)
    assert rc == 0 and err.count("the heaviest of the 2 parts") == 1, err
    said = []
    partition(g, 2, model="graph", progress=said.append)
    assert sum("the heaviest of the 2 parts" in m for m in said) == 1


def test_metis_s_unknown_exception_says_what_it_most_likely_is(monkeypatch):
    """pymetis reports METIS's failed allocations as "Caught an unknown exception!": the error says
    the graph's size and what the default pipeline does instead."""
    import pymetis

    from partplan import Graph
    from partplan.errors import PartitionError
    from partplan.partition.engines.metis import metis

    def fail(*a, **kw):
        raise RuntimeError("Caught an unknown exception!")

    monkeypatch.setattr(pymetis, "part_graph", fail)
    g = Graph.from_edges([0, 1, 2], [1, 2, 3], n=6, symmetrize=True)
    with pytest.raises(PartitionError, match=r"n = 6 vertices, 6 nonzeros: most likely METIS could not allocate"):
        metis(g, 2)
