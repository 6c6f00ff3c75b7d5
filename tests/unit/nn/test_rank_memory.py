"""What a process of a distributed job holds beyond its share: the predictions gather and the
neighbour loader's sampler index (tracemalloc counts numpy's allocations)."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest


class _Rank1Comm:
    """The comm of process 1 of 2 (one rank per process): records the gather to rank 0."""
    world, local = 2, [1]

    def __init__(self):
        self.sent = None

    def exchange_rows(self, arr, counts, what=""):
        self.sent = (np.array(arr), np.array(counts))
        return np.zeros((0,) + arr.shape[1:], arr.dtype), np.zeros(self.world, np.int64)

    def allreduce_world(self, values, op="max"):      # what a whole-vector all-reduce would call
        return [np.array(v) for v in values]


def test_predictions_of_a_rank_other_than_0_hold_only_its_rows(tmp_path):
    from partplan.nn.train import _write_predictions
    n = 4_000_000                                  # float64[n] would be 32 MB
    ids, preds = [np.array([5, 9, 3_999_999])], [np.array([2, 0, 1])]
    comm = _Rank1Comm()
    tracemalloc.start()
    try:
        out = _write_predictions({"predictions": str(tmp_path / "p.npy"), "plan": "g.plan"}, comm, ids, preds, n, 1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert out is None and not (tmp_path / "p.npy").exists()
    assert peak < 1 << 20
    pairs, counts = comm.sent
    assert counts.tolist() == [3, 0] and pairs.tolist() == [[5, 2], [9, 0], [3_999_999, 1]]


def test_predictions_of_one_process_holding_every_rank(tmp_path):
    from partplan.nn.train import _write_predictions

    class _All:
        world, local = 2, [0, 1]
    # c = 1: each row held by one rank; c = 2: by both (1.5D replicas), each counting half
    path = _write_predictions({"predictions": str(tmp_path / "p.npy"), "plan": "g.plan"}, _All(),
                              [np.array([0, 2]), np.array([1])], [np.array([4, 1]), np.array([3])], 3, 1)
    assert path and np.load(path).tolist() == [4, 3, 1]
    path = _write_predictions({"predictions": str(tmp_path / "q.npy"), "plan": "g.plan"}, _All(),
                              [np.array([0, 1]), np.array([1, 0])], [np.array([4, 3]), np.array([3, 4])], 2, 2)
    assert np.load(path).tolist() == [4, 3]
    from partplan.errors import PlanError
    with pytest.raises(PlanError, match="no rank holds vertex 2"):
        _write_predictions({"predictions": str(tmp_path / "r.npy"), "plan": "g.plan"}, _All(),
                           [np.array([0]), np.array([1])], [np.array([1]), np.array([1])], 3, 1)
    assert not (tmp_path / "r.npy").exists()


def test_loader_index_holds_less_than_the_shares_edges_beside_them():
    """Building the sampler index drops the share's edge arrays as their sorted copies appear: beyond
    the share, the peak stays under 0.8 x its edge arrays (the index alone is 0.7 x: sources and edge
    ids int64, positions int32); keeping every input alive until the end took 1.1 x more."""
    from partplan.nn.loader import _Local
    rng = np.random.default_rng(0)
    L, H, E = 20_000, 30_000, 400_000
    tracemalloc.start()
    try:
        sh = {"local_ids": np.sort(rng.choice(500_000, L, replace=False)),
              "edge_index": np.stack([rng.integers(0, L + H, E), rng.integers(0, L, E)]),
              "edge_ids": np.sort(rng.choice(10 * E, E, replace=False))}
        want = [(int(t), int(s), int(e)) for s, t, e in zip(*sh["edge_index"], sh["edge_ids"])]
        rows = np.concatenate([sh["local_ids"], np.arange(500_000, 500_000 + H)])
        edges = sh["edge_index"].nbytes + sh["edge_ids"].nbytes
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        loc = _Local(sh, rows[L:])
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < 0.8 * edges, peak / edges
    # the index: in-edges by target (local position), edge ids ascending within a target, each
    # entry's position in the share's edge fields
    tgt = np.repeat(np.arange(L), np.diff(loc.ptr))
    got = list(zip(tgt.tolist(), loc.src.tolist(), loc.eid.tolist()))
    assert got == [(t, int(rows[s]), e) for t, e, s in sorted((t, e, s) for t, s, e in want)]
    assert [want[int(i)][2] for i in loc.edge_pos] == loc.eid.tolist()


def test_a_vertex_rank_0_finds_unheld_stops_every_rank(tmp_path):
    """Rank 0 alone sees the gathered rows; the vertex it finds no rank holds reaches the others by a
    world maximum, so they raise too instead of waiting in their next collective for rank 0."""
    from partplan.errors import PlanError
    from partplan.nn.train import _write_predictions

    class _Told(_Rank1Comm):
        def allreduce_world(self, values, op="max"):
            assert op == "max"
            return [np.maximum(np.array(values[0]), 7.0)]      # rank 0's: vertex 7 unheld
    with pytest.raises(PlanError, match="no rank holds vertex 7"):
        _write_predictions({"predictions": str(tmp_path / "p.npy"), "plan": "g.plan"}, _Told(),
                           [np.array([1])], [np.array([0])], 10, 1)
