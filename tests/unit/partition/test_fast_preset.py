"""Fast preset (issue 12 item 3): METIS + km1 V-cycle refinement (partplan.partition.refinement.vcycle).

Oracles: Mt-KaHyPar's own km1 of the column-net hypergraph for the imported
partition (computed inside the C++ library), a brute-force Python count of
Σ_j (λ_j − 1) over the columns of A + I, METIS's own volume for the same graph
(the preset may never be worse), bincounts of the balance weights written out
here, and a second run (determinism).
"""
import math

import numpy as np
import pytest

import partplan
from partplan import Graph, analyze
from partplan.errors import OptionError, PartitionError
from partplan.partition.engines import metis
from partplan.partition.context import VCycleContext, resolve
from partplan.partition.refinement.vcycle import vcycle_refine


def rmat(scale, edge_factor=8, seed=0):
    """Small R-MAT (power law: many vertices on the cut, room for km1 gains)."""
    rng = np.random.default_rng(seed)
    m = edge_factor << scale
    src = np.zeros(m, np.int64)
    dst = np.zeros(m, np.int64)
    for bit in range(scale):
        r = rng.random(m)
        down = r >= 0.57 + 0.19          # c or d quadrant
        right = ((r >= 0.57) & (r < 0.76)) | (r >= 0.95)
        src |= down.astype(np.int64) << bit
        dst |= right.astype(np.int64) << bit
    keep = src != dst
    return Graph.from_edges(src[keep], dst[keep], n=1 << scale, symmetrize=True)


def grid(r, c):
    """An r×c 4-neighbour grid (a mesh: the band restriction applies)."""
    idx = np.arange(r * c).reshape(r, c)
    src = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    dst = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    return Graph.from_edges(src, dst, n=r * c, symmetrize=True)


def km1_brute(g: Graph, part, k) -> int:
    """Σ_j (λ_j − 1), net j = {i : A[i, j] != 0} ∪ {j}, by Python sets."""
    pins = [{j} for j in range(g.n)]
    for i in range(g.n):
        for j in g.indices[g.indptr[i]:g.indptr[i + 1]]:
            pins[j].add(i)
    return sum(len({int(part[i]) for i in p}) - 1 for p in pins)


def balance_ok(g, start, new, k, eps=0.03):
    w = np.maximum(g.row_nnz, 1)
    limit = math.floor((1 + eps) * math.ceil(w.sum() / k))
    heaviest_in = np.bincount(start, weights=w, minlength=k).max()
    return np.bincount(new, weights=w, minlength=k).max() <= max(limit, heaviest_in)


@pytest.fixture(scope="module")
def power_law():
    return rmat(11)


def test_km1_recounted_by_brute_force_and_mtkahypar(power_law):
    g, k = power_law, 8
    start = metis(g, k, seed=0)
    new, rep = vcycle_refine(g, start, k, seed=0)
    assert rep["before"]["total_volume"] == km1_brute(g, start, k)
    assert rep["after"]["total_volume"] == km1_brute(g, new, k) == analyze(g, new, k).total_volume
    assert rep["after"]["total_volume"] < rep["before"]["total_volume"]   # room on a power-law graph
    pytest.importorskip("mtkahypar")
    from partplan.models import column_net
    from partplan.partition.engines import mtk_context, mtk_hypergraph

    mtk, ctx = mtk_context(k, 0.03, "DETERMINISTIC")
    h = mtk_hypergraph(mtk, ctx, column_net(g))
    assert int(h.create_partitioned_hypergraph(ctx, k, new.tolist()).km1()) == rep["after"]["total_volume"]


@pytest.mark.parametrize("fine_every_cycle", [True, False])
def test_several_cycles_stay_exact(power_law, fine_every_cycle):
    g, k = power_law, 8
    start = metis(g, k, seed=4)
    ctx = VCycleContext(cycles=3, fine_every_cycle=fine_every_cycle, min_pin_shrink=0.0,
                        min_cycle_gain=0.0)                                 # coarsen even the hub nets
    new, rep = vcycle_refine(g, start, k, seed=4, context=ctx)
    assert len(rep["cycles"]) >= 2 and len(rep["cycles"][0]["levels"]) > 1
    assert rep["after"]["total_volume"] == km1_brute(g, new, k) <= km1_brute(g, start, k)
    assert balance_ok(g, start, new, k)


def test_directed_graph_counts_forward_nets():
    rng = np.random.default_rng(5)
    g = Graph.from_edges(rng.integers(0, 300, 1500), rng.integers(0, 300, 1500), n=300)
    assert not g.is_symmetric()
    start = np.random.default_rng(1).integers(0, 4, g.n)     # a poor start: much to gain
    new, rep = vcycle_refine(g, start, 4, imbalance=0.1)
    assert rep["after"]["total_volume"] == km1_brute(g, new, 4) < km1_brute(g, start, 4)
    assert balance_ok(g, start, new, 4, eps=0.1)


@pytest.mark.parametrize("k", [4, 16])
def test_mesh_band_path_exact_and_balanced(k):
    g = grid(60, 60)
    start = metis(g, k, seed=1)
    new, rep = vcycle_refine(g, start, k, seed=1)
    assert rep["cycles"][0]["band"] is not None and rep["cycles"][0]["band"] < g.n   # restricted to the cut
    assert rep["after"]["total_volume"] == analyze(g, new, k).total_volume <= analyze(g, start, k).total_volume
    assert balance_ok(g, start, new, k)


@pytest.mark.parametrize("k", [4, 32])
def test_never_worse_than_metis_and_balanced(power_law, k):
    g = power_law
    start = metis(g, k, seed=2)
    new, rep = vcycle_refine(g, start, k, seed=2)
    assert analyze(g, new, k).total_volume <= analyze(g, start, k).total_volume
    assert balance_ok(g, start, new, k)
    assert rep["max_balance_weight"] == np.bincount(new, weights=np.maximum(g.row_nnz, 1), minlength=k).max()


def test_deterministic_for_a_seed(power_law):
    g, k = power_law, 8
    start = metis(g, k, seed=0)
    a, _ = vcycle_refine(g, start, k, seed=3)
    b, _ = vcycle_refine(g, start.copy(), k, seed=3)
    assert np.array_equal(a, b)
    assert np.array_equal(start, metis(g, k, seed=0))    # the input is not modified


def test_partition_preset_fast(power_law):
    g, k = power_law, 16
    plain = partplan.partition(g, k, model="graph", backend="metis", seed=0)
    fast = partplan.partition(g, k, preset="fast", seed=0)
    assert fast.backend == "metis" and fast.params["preset"] == "fast"
    assert fast.stats.total_volume == km1_brute(g, fast.part, k)
    assert fast.stats.total_volume < plain.stats.total_volume
    assert fast.info["volume_refine"]["after"]["total_volume"] == fast.stats.total_volume
    assert balance_ok(g, plain.part, fast.part, k)
    again = partplan.partition(g, k, preset="fast", seed=0)
    assert np.array_equal(fast.part, again.part)


def test_bad_options():
    g = grid(5, 5)
    part = np.arange(25) % 2
    with pytest.raises(OptionError, match="rounds"):
        vcycle_refine(g, part, 2, context=resolve(VCycleContext, {"rounds": -1}, label="vcycle"))
    with pytest.raises(OptionError, match="cluster_weight"):
        vcycle_refine(g, part, 2, context=VCycleContext(cluster_weight=0))
    with pytest.raises(PartitionError, match="imbalance"):
        vcycle_refine(g, part, 2, imbalance=-0.1)
    new, rep = vcycle_refine(g, np.zeros(25, np.int64), 1)          # k = 1: nothing to do
    assert rep["after"]["total_volume"] == 0 and not new.any()


@pytest.mark.parametrize("kw, err", [
    (dict(seed="x"), OptionError), (dict(seed=1.5), OptionError), (dict(imbalance="0.1"), PartitionError),
    (dict(imbalance=math.inf), PartitionError), (dict(context=VCycleContext(cluster_weight=math.inf)), OptionError),
    (dict(context=VCycleContext(rounds=2 ** 63)), OptionError), (dict(context=VCycleContext(prune="yes")), OptionError),
    (dict(context={"rounds": 3}), OptionError)])
def test_bad_option_values_are_one_error_before_any_work(kw, err):
    """Found in review: these ended in numpy / numba exceptions. A context built by hand is
    checked field by field too."""
    g = grid(5, 5)
    with pytest.raises(err):
        vcycle_refine(g, np.arange(25) % 2, 2, **kw)


@pytest.mark.parametrize("kw", [dict(cluster_weight=math.inf), dict(rounds=2 ** 63), dict(prune="yes"),
                                dict(no_such_knob=1)])
def test_the_knobs_are_checked_by_their_context(kw):
    with pytest.raises(OptionError):
        resolve(VCycleContext, kw, label="vcycle")
    with pytest.raises(OptionError):
        vcycle_refine(None, np.arange(25) % 2, 2)


def test_negative_seed_is_valid_and_deterministic(power_law):
    """METIS takes any integer seed; the fast preset too (found in review: it crashed after METIS)."""
    a = partplan.partition(power_law, 4, preset="fast", seed=-1)
    b = partplan.partition(power_law, 4, preset="fast", seed=-1)
    assert np.array_equal(a.part, b.part)


def test_unsorted_or_duplicate_rows_give_exact_figures():
    """A Graph built from a raw CSR may list columns out of order or twice
    (found in review: the fast preset then mis-counted km1 or raised); the
    result and its figures equal analyze() of the canonical graph."""
    rng = np.random.default_rng(3)
    n = 80
    g = Graph.from_edges(rng.integers(0, n, 300), rng.integers(0, n, 300), n=n, symmetrize=True)
    rev = np.concatenate([g.indices[a:b][::-1] for a, b in zip(g.indptr[:-1], g.indptr[1:])])
    dup_ptr = np.concatenate([[0], np.cumsum(2 * np.diff(g.indptr))])
    dup = np.concatenate([np.repeat(g.indices[a:b], 2) for a, b in zip(g.indptr[:-1], g.indptr[1:])])
    part = rng.integers(0, 4, n)
    for raw in (Graph(g.indptr.copy(), rev, directed=False), Graph(dup_ptr, dup, directed=False)):
        new, rep = vcycle_refine(raw, part, 4, imbalance=0.5)
        assert rep["before"]["total_volume"] == km1_brute(g, part, 4) == analyze(g, part, 4).total_volume
        assert rep["after"]["total_volume"] == km1_brute(g, new, 4) <= rep["before"]["total_volume"]
