"""Stochastic hypergraph: samplers, Hoeffding batch count, merged nets and the
expected-volume evaluator, checked with plain-Python brute force."""
import math

import numpy as np
import pytest

from partplan import Graph
from partplan.models import (NeighborSampler, SaintNodeSampler, SaintRandomWalkSampler, expected_volume,
                             hoeffding_nets, make_sampler, stochastic_hypergraph)
from partplan.models.stochastic import batch_volume, hop_nets


def small_graph(seed=0, n=120, m=600):
    rng = np.random.default_rng(seed)
    return Graph.from_edges(rng.integers(0, n, m), rng.integers(0, n, m), n=n)


def edge_set(g):
    return {(int(i), int(j)) for i, j in zip(g.rows, g.indices)}


def brute_batch_volume(hops, part):
    vol = 0
    for rows, cols in hops:
        need = {}
        for i, j in zip(rows.tolist(), cols.tolist()):
            need.setdefault(j, set()).add(int(part[i]))
        for j, parts in need.items():
            vol += len(parts | {int(part[j])}) - 1
    return vol


def test_hoeffding_formula():
    for p, theta, delta in [(16, 0.1, 0.05), (64, 0.05, 0.01), (2, 1.0, 0.5), (1, 0.1, 0.1)]:
        assert hoeffding_nets(p, theta, delta) == math.ceil((p - 1) ** 2 / (2 * theta ** 2) * math.log(2 / delta))
    with pytest.raises(ValueError):
        hoeffding_nets(4, 0, 0.1)
    with pytest.raises(ValueError):
        hoeffding_nets(4, 0.1, 1.5)


def test_neighbor_sampler_respects_fanout_and_edges():
    g = small_graph(1)
    E = edge_set(g)
    hops = NeighborSampler(batch_size=10, fanouts=(3, 2)).sample(g, np.random.default_rng(0))
    assert len(hops) == 2
    frontier = set()
    for h, ((rows, cols), fan) in enumerate(zip(hops, (3, 2))):
        pairs = list(zip(rows.tolist(), cols.tolist()))
        assert len(pairs) == len(set(pairs))            # without replacement
        assert all(p in E for p in pairs)
        per_row = {}
        for i, j in pairs:
            per_row.setdefault(i, []).append(j)
        for i, js in per_row.items():
            deg = int(g.row_nnz[i])
            assert len(js) == min(deg, fan)
        if h == 0:
            assert len(set(rows.tolist())) <= 10
            frontier = set(rows.tolist()) | set(cols.tolist())
        else:
            assert set(rows.tolist()) <= frontier


@pytest.mark.parametrize("smp", [SaintNodeSampler(budget=40, layers=2), SaintRandomWalkSampler(roots=8, walk_length=3)])
def test_saint_samplers_give_induced_subgraphs(smp):
    g = small_graph(2)
    E = edge_set(g)
    hops = smp.sample(g, np.random.default_rng(3))
    rows, cols = hops[0]
    nodes = set(rows.tolist()) | set(cols.tolist())
    assert {(int(i), int(j)) for i, j in zip(rows, cols)} == {(i, j) for (i, j) in E if i in nodes and j in nodes}
    # every edge of the graph between two sampled nodes that has a row in the sample is present
    got = {(int(i), int(j)) for i, j in zip(rows, cols)}
    assert got <= E
    assert len(hops) == smp.layers


def test_hop_nets_by_definition():
    rows = np.array([0, 0, 1, 2, 2, 3])
    cols = np.array([1, 2, 2, 2, 3, 3])
    ptr, pins = hop_nets((rows, cols), 5)
    nets = {tuple(pins[ptr[e]:ptr[e + 1]].tolist()) for e in range(ptr.size - 1)}
    # col 1: rows {0} + owner 1; col 2: {0,1,2}; col 3: {2,3} (owner 3 already)
    assert nets == {(0, 1), (0, 1, 2), (2, 3)}


@pytest.mark.parametrize("spec", ["neighbor:8:3,2", "saint-node:30", "saint-rw:6:3"])
def test_stochastic_hypergraph_is_sum_of_sampled_batch_volumes(spec):
    g = small_graph(3)
    k, seed = 4, 11
    model = stochastic_hypergraph(g, k, spec, theta=0.5, delta=0.1, seed=seed, vertex_weights="unit", min_batches=1)
    hg = model.hypergraph
    need = math.ceil((k - 1) ** 2 / (2 * 0.5 ** 2) * math.log(2 / 0.1))
    assert model.required_nets == need
    assert model.sampled_nets >= need
    assert int(hg.net_weights.sum()) == model.sampled_nets
    # minimal: one batch fewer is not enough
    with pytest.raises(ValueError, match="Hoeffding"):
        stochastic_hypergraph(g, k, spec, theta=0.5, delta=0.1, seed=seed, max_batches=model.batches - 1,
                              min_batches=min(1, model.batches - 1))
    # replay the same batches (same seed, same sampler) and brute-force their volumes
    rng = np.random.default_rng(seed)
    smp = make_sampler(spec)
    batches = [smp.sample(g, rng) for _ in range(model.batches)]
    for pseed in range(3):
        part = np.random.default_rng(pseed).integers(0, k, g.n)
        assert hg.km1(part, k) == sum(brute_batch_volume(h, part) for h in batches)


def test_batch_volume_and_expected_volume():
    g = small_graph(4)
    k = 3
    part = np.arange(g.n) % k
    smp = NeighborSampler(batch_size=16, fanouts=(4, 4))
    hops = smp.sample(g, np.random.default_rng(5))
    total, send, recv = batch_volume(hops, part, k)
    assert total == brute_batch_volume(hops, part) == send.sum() == recv.sum()
    ev = expected_volume(g, part, smp, batches=20, seed=9)
    rng = np.random.default_rng(9)
    vols = [brute_batch_volume(smp.sample(g, rng), part) for _ in range(20)]
    assert ev["mean"] == pytest.approx(np.mean(vols))
    assert ev["volumes"].tolist() == vols


def test_make_sampler_errors():
    with pytest.raises(ValueError, match="unknown sampler"):
        make_sampler("foo")
    with pytest.raises(ValueError, match="bad sampler"):
        make_sampler("neighbor:x")
    assert make_sampler("neighbor:64:5,5").fanouts == (5, 5)


def test_default_batches_cover_the_graph():
    """Without min_batches, every vertex is drawn ~3 times in expectation as a seed."""
    from partplan.models.stochastic import coverage_batches
    g = small_graph(3)
    model = stochastic_hypergraph(g, 2, "neighbor:8:3,2", seed=1)
    assert model.batches >= math.ceil(3 * g.n / 8)
    assert coverage_batches(g, make_sampler("saint-node:30"), 3.0) == math.ceil(3 * g.n / 30)
