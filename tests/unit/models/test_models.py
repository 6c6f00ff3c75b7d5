"""Models: graph model, column-net / joint nets, net merging, layouts — checked
against brute force (plain Python sets) and the analyzer."""
from collections import Counter

import numpy as np
import pytest

from partplan import Graph, PartitionError, analyze
from partplan.models import column_net, joint_net, merge_identical_nets, metis_graph
from partplan.models import nets as nets_mod


def random_digraph(n, m, seed):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    return Graph.from_edges(src, dst, n=n), src, dst


def brute_km1(net_list, weights, part):
    return sum(w * (len({int(part[v]) for v in pins}) - 1) for pins, w in zip(net_list, weights))


def nets_of(hg):
    return [hg.pins[hg.net_ptr[e]:hg.net_ptr[e + 1]].tolist() for e in range(hg.m)]


@pytest.mark.parametrize("seed", range(3))
def test_graph_model_by_definition(seed):
    g, src, dst = random_digraph(30, 90, seed)
    xadj, adjncy, ew, vw = metis_graph(g)
    arcs = {(int(s), int(d)) for s, d in zip(src, dst)}
    expect = {}
    for u, v in arcs:
        if u != v:
            key = (min(u, v), max(u, v))
            expect[key] = int((u, v) in arcs and (v, u) in arcs) + 1
    got = {}
    for u in range(g.n):
        for idx in range(xadj[u], xadj[u + 1]):
            v = int(adjncy[idx])
            assert v != u
            got[(u, v)] = int(ew[idx])
    for (u, v), w in expect.items():
        assert got[(u, v)] == w and got[(v, u)] == w
    assert len(got) == 2 * len(expect)
    rows = Counter(int(s) for s, d in arcs)
    assert vw.tolist() == [max(rows.get(u, 0), 1) for u in range(g.n)]


@pytest.mark.parametrize("seed", range(3))
def test_column_net_km1_is_volume(seed):
    g, _, _ = random_digraph(60, 240, seed)
    part = np.random.default_rng(seed).integers(0, 5, g.n)
    hg = column_net(g)
    assert hg.km1(part, 5) == analyze(g, part, 5, backward=False).total_volume
    assert brute_km1(nets_of(hg), hg.net_weights, part) == hg.km1(part, 5)


@pytest.mark.parametrize("merge", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_joint_net_km1_is_forward_plus_backward(seed, merge):
    g, src, dst = random_digraph(50, 200, seed)
    assert not g.is_symmetric()
    part = np.random.default_rng(seed + 7).integers(0, 4, g.n)
    hg = joint_net(g, merge=merge)
    s = analyze(g, part, 4, backward=True)
    assert hg.km1(part, 4) == s.total_volume + s.backward.total_volume
    # brute force from the edge list: forward nets = columns of A, backward = rows
    A = np.zeros((g.n, g.n), dtype=bool)
    A[src, dst] = True
    fw = sum(len({int(part[i]) for i in np.flatnonzero(A[:, j])} | {int(part[j])}) - 1 for j in range(g.n))
    bw = sum(len({int(part[i]) for i in np.flatnonzero(A[i2, :]) for i in [i]} | {int(part[i2])}) - 1
             for i2 in range(g.n))
    assert hg.km1(part, 4) == fw + bw
    vw = A.sum(axis=1) + A.sum(axis=0)
    assert hg.vertex_weights.tolist() == np.maximum(vw, 1).tolist()


def test_joint_net_merges_symmetric_nets_to_double_weight():
    g = Graph.from_edges([0, 1, 2], [1, 2, 3], symmetrize=True)
    hg = joint_net(g)
    assert hg.m == column_net(g).m and set(hg.net_weights.tolist()) == {2}


def _random_nets(seed, m=200):
    rng = np.random.default_rng(seed)
    pool = [sorted(rng.choice(30, size=rng.integers(1, 6), replace=False).tolist()) for _ in range(12)]
    nets = [rng.permutation(pool[i]).tolist() for i in rng.integers(0, 12, m)]
    w = rng.integers(1, 5, m)
    ptr = np.concatenate([[0], np.cumsum([len(x) for x in nets])])
    return nets, w, ptr, np.concatenate(nets)


@pytest.mark.parametrize("seed", range(3))
def test_merge_identical_nets_matches_counter(seed):
    nets, w, ptr, pins = _random_nets(seed)
    expect = Counter()
    for x, wi in zip(nets, w):
        expect[tuple(sorted(x))] += int(wi)
    p, q, mw = merge_identical_nets(ptr, pins, w)
    got = {tuple(q[p[i]:p[i + 1]].tolist()): int(mw[i]) for i in range(mw.size)}
    assert got == dict(expect)
    assert mw.sum() == w.sum()


def test_merge_survives_hash_collisions(monkeypatch):
    nets, w, ptr, pins = _random_nets(5)
    monkeypatch.setattr(nets_mod, "splitmix64", lambda x, salt=0: np.zeros(np.shape(x), dtype=np.uint64))
    p, q, mw = nets_mod.merge_identical_nets(ptr, pins, w)
    expect = Counter()
    for x, wi in zip(nets, w):
        expect[tuple(sorted(x))] += int(wi)
    got = {tuple(q[p[i]:p[i + 1]].tolist()): int(mw[i]) for i in range(mw.size)}
    assert got == dict(expect)


