"""Cluster moves (partition/refinement/multilevel.py) and hub spreading (partition/refinement/hubs.py), issue 12.

Oracles: send/recv counted by the definition with Python sets, scipy's A for
degrees, partplan.analyze (a separate O(nnz) count) for total volume; the
planted structure of the hub graphs says where the hubs must end.
"""
import math

import numpy as np
import pytest

from partplan import Graph, analyze
from partplan.errors import BackendUnavailableError, OptionError, PartplanError
from partplan.partition import api
from partplan.partition.refinement.hubs import find_hubs, spread_hubs
from partplan.partition.refinement.multilevel import cluster_moves
from partplan.partition.refinement.refine import _State, balance_cap, refine


def brute_send_recv(g, part, k):
    A = g.to_scipy().tocsc()
    send, recv = [0] * k, [0] * k
    for j in range(g.n):
        rows = A.indices[A.indptr[j]:A.indptr[j + 1]]
        needing = {int(part[i]) for i in rows} | {int(part[j])}
        send[int(part[j])] += len(needing) - 1
        for r in needing - {int(part[j])}:
            recv[r] += 1
    return np.array(send), np.array(recv)


def mesh(side):
    idx = np.arange(side * side).reshape(side, side)
    src = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    dst = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    return Graph.from_edges(src, dst, n=side * side, symmetrize=True)


def random_graph(n, m, seed, directed=False):
    rng = np.random.default_rng(seed)
    return Graph.from_edges(rng.integers(0, n, m), rng.integers(0, n, m), n=n, symmetrize=not directed)


@pytest.mark.parametrize("case", ["mesh", "random", "directed"])
def test_cluster_moves_keep_the_state_exact_and_the_constraints(case):
    g = {"mesh": lambda: mesh(24), "random": lambda: random_graph(500, 2000, 1),
         "directed": lambda: random_graph(500, 2500, 2, directed=True)}[case]()
    k = 6
    # a blocky start (rows in id order): on the mesh, strips whose boundaries clusters can move
    part = (np.arange(g.n) * k // g.n).astype(np.int64)
    w = np.maximum(g.row_nnz, 1).astype(np.int64)
    cap, _ = balance_cap(w, part, k, 0.1)
    tv0 = analyze(g, part, k, backward=False).total_volume
    vlimit = int(tv0 * 1.05)
    s0, r0 = brute_send_recv(g, part, k)
    st = _State(g, part, k)
    out = part.copy()
    rep = cluster_moves(g, st, out, k, w, cap, vlimit, 3, 0.0, 0.0, 16, 0.05, seed=0, max_rounds=3, max_targets=3)
    st.check(out)                                   # incremental k x k volume = a recount
    s1, r1 = brute_send_recv(g, out, k)
    assert np.array_equal(st.send, s1) and np.array_equal(st.recv, r1)
    assert int(st.tot[0]) == analyze(g, out, k, backward=False).total_volume <= vlimit
    assert np.bincount(out, weights=w, minlength=k).max() <= cap
    assert np.array_equal(st.load, np.bincount(out, weights=w, minlength=k))
    # improving moves that never raise the max
    assert np.maximum(s1, r1).max() <= np.maximum(s0, r0).max()
    assert rep["moves"] == sum(m for _, m in rep["levels"]) and rep["trials"] >= rep["moves"]


def test_refine_with_and_without_cluster_moves_report_exact_figures():
    g = mesh(30)
    k = 8
    part = (np.arange(g.n) * k // g.n).astype(np.int64)
    for ml in (True, False):
        new, rep = refine(g, part, k, imbalance=0.05, multilevel=ml, seed=3)
        s, r = brute_send_recv(g, new, k)
        assert rep["after"]["max_send_recv"] == int(np.maximum(s, r).max())
        assert rep["after"]["total_volume"] == int(s.sum()) <= math.floor(1.05 * rep["before"]["total_volume"])
        assert (rep["multilevel"] is not None) == ml
        assert rep["after"]["max_send_recv"] <= rep["before"]["max_send_recv"]
        assert [t["stage"] for t in rep["trace"]] == sorted(t["stage"] for t in rep["trace"])


def test_volume_reference_sets_the_limit():
    g = random_graph(300, 1500, 4)
    k = 4
    part = (np.arange(g.n) % k).astype(np.int64)      # round robin: huge volume, easy to lower
    tv_start = analyze(g, part, k, backward=False).total_volume
    ref = tv_start // 2
    new, rep = refine(g, part, k, volume_tolerance=0.1, volume_reference=ref)
    assert rep["volume_limit"] == math.floor(ref * 1.1)
    assert analyze(g, new, k, backward=False).total_volume <= rep["volume_limit"] or \
        rep["after"]["total_volume"] == rep["before"]["total_volume"]
    with pytest.raises(OptionError):
        refine(g, part, k, volume_reference=-1)


# ------------------------------------------------------------------ hubs
def two_hub_graph(seed=0, communities=4, size=100, hub_links=40, leaves=60):
    """``communities`` dense blocks joined by a few edges, and two hubs, each
    linked to ``hub_links`` vertices of every block and to ``leaves`` private
    degree-1 vertices. The hubs and their leaves sit in block 0; isolated
    vertices (weight 1, free to move) make every block weigh the same.
    Returns (graph, hub ids, block of each vertex) — a balanced partition."""
    rng = np.random.default_rng(seed)
    src, dst = [], []
    for c in range(communities):
        src.append(c * size + rng.integers(0, size, size * 4))
        dst.append(c * size + rng.integers(0, size, size * 4))
    n0 = communities * size
    src.append(rng.integers(0, n0, 10))
    dst.append(rng.integers(0, n0, 10))
    hubs = np.array([n0, n0 + 1])
    nxt = n0 + 2
    block = list(np.repeat(np.arange(communities), size)) + [0, 0]
    for h in hubs:
        for c in range(communities):
            nb = c * size + rng.choice(size, hub_links, replace=False)
            src.append(np.full(hub_links, h))
            dst.append(nb)
        src.append(np.full(leaves, h))
        dst.append(np.arange(nxt, nxt + leaves))
        block += [0] * leaves
        nxt += leaves
    g = Graph.from_edges(np.concatenate(src), np.concatenate(dst), n=nxt, symmetrize=True)
    bw = np.bincount(np.array(block), weights=np.maximum(g.row_nnz, 1), minlength=communities).astype(int)
    extra = bw.max() + 50 - bw                          # isolated vertices per block
    for c in range(communities):
        block += [c] * int(extra[c])
    n = len(block)
    src.append(np.array([n - 1]))                     # the graph's size: a self loop on the last vertex
    dst.append(np.array([n - 1]))
    g = Graph.from_edges(np.concatenate(src), np.concatenate(dst), n=n, symmetrize=True)
    return g, hubs, np.array(block, dtype=np.int64)


def test_find_hubs_by_the_definition():
    g, hubs, block = two_hub_graph()
    k = 4
    s, _ = brute_send_recv(g, block, k)
    deg = np.diff(g.to_scipy().tocsr().indptr)
    for factor in (0.5, 1.0, 2.0, 4.0):
        expect = [v for v in np.argsort(-deg, kind="stable")[:k] if deg[v] > factor * s.sum() / k]
        assert find_hubs(g, block, k, factor).tolist() == [int(v) for v in expect]
    assert set(find_hubs(g, block, k).tolist()) == set(hubs.tolist())


@pytest.mark.parametrize("seed", [0, 1])
def test_spread_hubs_puts_planted_hubs_apart(seed):
    from partplan.models import column_net

    g, hubs, block = two_hub_graph(seed)
    k = 4
    s0, r0 = brute_send_recv(g, block, k)
    new, rep = spread_hubs(g, column_net(g), block, k, imbalance=0.03, seed=seed, volume_tolerance=0.5)
    assert rep["kept"], rep
    assert new[hubs[0]] != new[hubs[1]]
    s1, r1 = brute_send_recv(g, new, k)
    assert s1.sum() <= 1.5 * s0.sum()
    assert rep["after"]["total_volume"] == int(s1.sum()) and rep["before"]["total_volume"] == int(s0.sum())
    assert np.maximum(s1, r1).max() < np.maximum(s0, r0).max()
    assert rep["after"]["max_send_recv"] == int(np.maximum(s1, r1).max())
    w = np.maximum(g.row_nnz, 1)
    cap, _ = balance_cap(w, block, k, 0.03)
    assert np.bincount(new, weights=w, minlength=k).max() <= cap
    # the same move refused by a tolerance it exceeds: the input comes back unchanged
    if s1.sum() > s0.sum():
        same, rep0 = spread_hubs(g, column_net(g), block, k, seed=seed, volume_tolerance=0.0)
        assert not rep0["kept"] and rep0["why"] == "total volume above the tolerance"
        assert np.array_equal(same, block)
    # nothing to do: hubs already apart, or fewer than two
    apart = block.copy()
    apart[hubs[1]] = 1
    same, rep2 = spread_hubs(g, column_net(g), apart, k)
    assert same is apart or np.array_equal(same, apart)
    assert not rep2["kept"] and rep2["why"] == "no two hubs share a part"


def test_partition_pipeline_spreads_hubs_within_the_volume_limit():
    g, hubs, _ = two_hub_graph(2)
    k = 4
    # the Mt-KaHyPar path (max-both): hubs apart first (the default pipeline has no hubs pass)
    p = api.partition(g, k, seed=0, volume_tolerance=0.5, model="hypergraph")
    assert p.params["hub_factor"] == 2.0
    h = p.info["hubs"]
    s, r = brute_send_recv(g, p.part, k)
    assert p.part[hubs[0]] != p.part[hubs[1]]
    if h["kept"]:        # the limit is relative to Mt-KaHyPar's own partition, not the spread one
        assert p.info["refine"]["volume_limit"] == math.floor(1.5 * h["before"]["total_volume"])
        assert int(s.sum()) <= p.info["refine"]["volume_limit"]
        assert int(np.maximum(s, r).max()) < h["before"]["max_send_recv"]
    else:                # Mt-KaHyPar put them apart itself
        assert h["why"] == "no two hubs share a part"
    assert p.stats.total_volume == int(s.sum())
    assert p.info["refine"]["after"]["max_send_recv"] == int(np.maximum(s, r).max())
    off = api.partition(g, k, seed=0, hub_factor=0)
    assert "hubs" not in off.info and off.params["hub_factor"] == 0.0


@pytest.mark.parametrize("kw, err", [
    ({"hub_factor": -1}, OptionError),
    ({"hub_factor": "x", "objective": "total"}, OptionError),
    ({"volume_tolerance": None}, OptionError),
    ({"hub_factor": float("nan")}, OptionError),
    ({"hub_factor": "two"}, OptionError),
    ({"hub_factor": 2.0, "objective": "total"}, BackendUnavailableError),
    ({"hub_factor": 2.0, "model": "graph"}, BackendUnavailableError),
    ({"hub_factor": 2.0, "backend": "kahypar"}, BackendUnavailableError),
])
def test_hub_factor_option_errors(kw, err):
    g, _, _ = two_hub_graph()
    with pytest.raises(err) as exc:
        api.partition(g, 4, **kw)
    assert isinstance(exc.value, PartplanError)
    assert ("hub_factor" if "hub_factor" in kw else "volume_tolerance") in str(exc.value)


def test_large_k_preset_spreads_hubs_with_default_vcycle():
    """Mt-KaHyPar's LARGE_K (deep multilevel) has no fixed vertices: the V-cycle runs DEFAULT."""
    from partplan.models import column_net

    g, hubs, block = two_hub_graph(3)
    new, rep = spread_hubs(g, column_net(g), block, 4, preset="LARGE_K", volume_tolerance=0.5)
    assert rep["kept"] and new[hubs[0]] != new[hubs[1]]
    p = api.partition(g, 4, preset="LARGE_K", seed=0)
    s, r = brute_send_recv(g, p.part, 4)
    assert p.stats.total_volume == int(s.sum())


def test_cluster_moves_never_raise_the_max_on_strips():
    """A case where a lower potential alone would raise the max (found in review)."""
    g = mesh(15)
    k = 8
    part = (np.arange(g.n) * k // g.n).astype(np.int64)
    w = np.maximum(g.row_nnz, 1).astype(np.int64)
    cap, _ = balance_cap(w, part, k, 0.1)
    s0, r0 = brute_send_recv(g, part, k)
    for seed in range(40):
        st = _State(g, part, k)
        out = part.copy()
        cluster_moves(g, st, out, k, w, cap, 10 ** 9, 3, 0.0, 0.0, 16, 0.05, seed=seed, max_rounds=3, max_targets=3)
        s1, r1 = brute_send_recv(g, out, k)
        assert np.maximum(s1, r1).max() <= np.maximum(s0, r0).max(), seed


def test_cluster_moves_stop_at_the_deadline_with_an_exact_state():
    g = mesh(20)
    k = 4
    part = (np.arange(g.n) % k).astype(np.int64)
    w = np.maximum(g.row_nnz, 1).astype(np.int64)
    st = _State(g, part, k)
    out = part.copy()
    rep = cluster_moves(g, st, out, k, w, 10 ** 9, 10 ** 9, 3, 0.0, 0.0, 16, 0.05, deadline=0.0)
    assert rep["stopped"] == "time limit" and rep["moves"] == 0
    st.check(out)
    assert np.array_equal(out, part)


@pytest.mark.parametrize("max_passes", [1, 2, 3, 5])
def test_multilevel_keeps_max_passes_and_converges(max_passes):
    g = mesh(21)
    k = 4
    part = np.random.default_rng(0).integers(0, k, g.n)
    new, rep = refine(g, part, k, imbalance=0.05, max_passes=max_passes)
    assert len(rep["trace"]) == rep["passes"] <= max_passes
    new, rep = refine(g, part, k, imbalance=0.05)          # default budget: FM ends by convergence
    assert rep["stopped"] == "converged"
    assert len(rep["trace"]) == rep["passes"] and rep["trace"][-1]["stage"] in (1, 2)


def test_huge_volume_tolerance_is_no_limit():
    g = random_graph(200, 800, 5)
    part = (np.arange(g.n) % 4).astype(np.int64)
    new, rep = refine(g, part, 4, volume_tolerance=1e17)
    s, r = brute_send_recv(g, new, 4)
    assert rep["after"]["total_volume"] == int(s.sum()) and rep["volume_limit"] >= int(s.sum())


def test_no_hubs_without_volume():
    """Disjoint cliques, one per part: nothing is sent, so no row is a hub (TV/k = 0)."""
    from partplan.models import column_net

    src, dst = [], []
    for c in range(4):
        idx = np.arange(c * 10, c * 10 + 10)
        a, b = np.meshgrid(idx, idx)
        src.append(a.ravel())
        dst.append(b.ravel())
    g = Graph.from_edges(np.concatenate(src), np.concatenate(dst), n=40, symmetrize=True)
    part = np.repeat(np.arange(4), 10)
    assert find_hubs(g, part, 4).size == 4           # by the definition every row exceeds 2 * 0 / 4 ...
    new, rep = spread_hubs(g, column_net(g), part, 4)  # ... but with nothing sent nothing is spread
    assert rep["hubs"] == 0 and not rep["kept"] and np.array_equal(new, part)


@pytest.mark.parametrize("objective", ["max-send", "max-recv", "weighted"])
def test_spread_hubs_keeps_only_what_lowers_the_objective_asked_for(objective):
    from partplan.models import column_net

    g, hubs, block = two_hub_graph(2)
    k = 4
    new, rep = spread_hubs(g, column_net(g), block, k, volume_tolerance=0.5, objective=objective)
    s0, s1 = analyze(g, block, k, backward=False), analyze(g, new, k, backward=False)
    value = {"max-send": lambda s: s.max_send, "max-recv": lambda s: s.max_recv,
             "weighted": lambda s: s.time_estimate}[objective]
    if rep["kept"]:
        assert value(s1) < value(s0)
    else:
        assert np.array_equal(new, block) and rep["why"] == f"{objective} not lower"
    with pytest.raises(OptionError):
        spread_hubs(g, column_net(g), block, k, objective="total")


def test_multilevel_fm_goes_on_after_the_cluster_stage():
    """FM's one pass before the cluster moves cannot widen to all parts yet; it must not
    end the refinement as 'converged' (found in review)."""
    for seed in range(6):
        g = random_graph(300, 1200, seed)
        part = np.random.default_rng(seed).integers(0, 5, g.n)
        _, rep = refine(g, part, 5, seed=seed)
        assert len(rep["trace"]) >= 2 and rep["trace"][-1]["stage"] == 2


@pytest.mark.parametrize("case", ["random", "directed", "loops"])
def test_cluster_volume_delta_is_the_recounted_change(case):
    """_cluster_dtv (the pre-check of the volume-dominant cluster moves) against the total volume
    recounted by analyze before and after the members move, on random clusters of one part."""
    from partplan.partition.refinement.multilevel import _cluster_dtv

    rng = np.random.default_rng({"random": 3, "directed": 4, "loops": 5}[case])
    n = 300
    src, dst = rng.integers(0, n, 1500), rng.integers(0, n, 1500)
    if case == "loops":                      # self loops: a row's own net appears in its row too
        src, dst = np.concatenate([src, np.arange(0, n, 3)]), np.concatenate([dst, np.arange(0, n, 3)])
    g = Graph.from_edges(src, dst, n=n, symmetrize=case != "directed")
    k = 5
    part = rng.integers(0, k, n).astype(np.int64)
    st = _State(g, part, k)
    _, P, _ = st.records(part, np.maximum(g.row_nnz, 1).astype(np.int64))
    tv0 = analyze(g, part, k, backward=False).total_volume
    mcnt, mnets = np.zeros(n, np.int64), np.zeros(n, np.int64)
    for _ in range(40):
        a = int(rng.integers(k))
        b = int((a + 1 + rng.integers(k - 1)) % k)
        members = rng.permutation(np.flatnonzero(part == a))[:int(rng.integers(1, 12))].astype(np.int64)
        d = _cluster_dtv(0, members.size, members, a, b, g.indptr, g.indices, P, mcnt, mnets)
        moved = part.copy()
        moved[members] = b
        assert d == analyze(g, moved, k, backward=False).total_volume - tv0
        assert not mcnt.any()                # the scratch is clean for the next call


def test_cluster_volume_precheck_keeps_the_same_moves_with_fewer_trials():
    """The pre-check only skips trials that could not be kept: the volume-dominant cluster moves
    (the pipeline's cluster volume rounds: all parts hot, mu 1e6) end in the same partition with
    it as without it, after fewer trials."""
    g = random_graph(2000, 9000, 7)
    k = 8
    part = (np.arange(g.n) * k // g.n).astype(np.int64)
    w = np.maximum(g.row_nnz, 1).astype(np.int64)
    cap, _ = balance_cap(w, part, k, 0.05)
    tv0 = analyze(g, part, k, backward=False).total_volume
    outs, reps = [], []
    for pre in (True, False):
        st, out = _State(g, part, k), part.copy()
        reps.append(cluster_moves(g, st, out, k, w, cap, tv0, 3, 0.0, 0.0, 16, 1e6, seed=1, theta=0.0,
                                  max_rounds=1, max_targets=1, volume_precheck=pre))
        outs.append(out)
    assert np.array_equal(outs[0], outs[1]) and reps[0]["moves"] == reps[1]["moves"] > 0
    assert reps[0]["trials"] < reps[1]["trials"]
    assert analyze(g, outs[0], k, backward=False).total_volume < tv0
