"""``refine_partition``: the default pipeline's refinement of one given partition (what the
distributed partitioner runs in process 0 on a graph that fits), with a cap on every part's
row nonzeros kept beside the balance limit. Figures recounted by analyze()."""
from __future__ import annotations

import numpy as np
import pytest

from partplan import analyze
from partplan.datasets.generators import rmat
from partplan.graph import Graph
from partplan.partition.context import PipelineContext, resolve
from partplan.partition.pipeline.auto import compute_limit, refine_partition


def _load(g, part, k):
    return np.bincount(part, weights=g.row_nnz, minlength=k).astype(np.int64)


@pytest.fixture(scope="module")
def graph():
    return rmat(10, seed=4)


def test_a_bad_start_gets_a_lower_bottleneck_within_the_cap(graph):
    g, k = graph, 8
    start = np.random.default_rng(0).integers(0, k, g.n)       # every part near W / k: far from any cut
    nnz = g.row_nnz.astype(np.int64)
    cap = max(int(np.floor(1.02 * nnz.sum() / k)), int(_load(g, start, k).max()))
    ctx = resolve(PipelineContext, {"imbalance": 0.03, "seed": 1}, label="auto")
    out, rep = refine_partition(g, start, k, context=ctx, weight_cap=cap)
    before, after = analyze(g, start, k).summary(), analyze(g, out, k).summary()
    worst = lambda s: max(s["max_send"], s["max_recv"])   # noqa: E731
    assert (rep["before"]["max_send_recv"], rep["after"]["max_send_recv"]) == (worst(before), worst(after))
    assert rep["after"]["total_volume"] == after["total_volume"]
    assert worst(after) < worst(before) and after["total_volume"] < before["total_volume"]
    assert int(_load(g, out, k).max()) <= cap                 # tighter than the balance limit (ε = 0.03)
    vc = rep["vcycle"]                                        # the start's V-cycle: kept only within the cap
    assert set(vc) == {"figures", "seconds", "kept"} and vc["figures"]["total_volume"] < before["total_volume"]
    off, rep_off = refine_partition(g, start, k, context=resolve(PipelineContext, {"imbalance": 0.03, "seed": 1,
                                                                                  "vcycle": False}, label="auto"),
                                    weight_cap=cap)
    assert rep_off["vcycle"] is None and int(_load(g, off, k).max()) <= cap
    again, _ = refine_partition(g, start, k, context=ctx, weight_cap=cap)
    assert np.array_equal(out, again)                         # counted work: the same result each time


def test_the_cap_is_never_below_the_heaviest_start_part(graph):
    g, k = graph, 4
    start = np.zeros(g.n, np.int64)
    start[: g.n // 8] = 1
    start[g.n // 8: g.n // 4] = 2
    start[g.n // 4: 3 * g.n // 8] = 3                          # part 0 holds most of the weight
    heavy = int(_load(g, start, k).max())
    out, rep = refine_partition(g, start, k, weight_cap=1)    # below every part: the start's heaviest is the cap
    assert int(_load(g, out, k).max()) <= heavy
    worst = lambda p: max(analyze(g, p, k).summary()["max_send"], analyze(g, p, k).summary()["max_recv"])  # noqa
    assert worst(out) < worst(start)                          # and moves within it still lower the bottleneck


def test_compute_limit_takes_the_lower_of_both_limits():
    g = Graph.from_edges([0, 1, 2], [1, 2, 0], n=6, symmetrize=True)   # rows 3..5 have no nonzero
    part = np.array([0, 0, 1, 1, 2, 2])
    own = compute_limit(g, part, 3, 0.03)["cap2"]
    assert compute_limit(g, part, 3, 0.03, weight_cap=own + 5)["cap2"] == own
    assert compute_limit(g, part, 3, 0.03, weight_cap=own - 1)["cap2"] == own - 1
    full = Graph.from_edges([0, 1, 2], [1, 2, 0], n=3, symmetrize=True)
    assert compute_limit(full, np.array([0, 1, 2]), 3, 0.03) == {}
    assert compute_limit(full, np.array([0, 1, 2]), 3, 0.03, weight_cap=7)["cap2"] == 7
