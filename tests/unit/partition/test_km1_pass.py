"""The greedy connectivity passes against the analyzer's exact 1D volumes (an
independent count): the volume they report removing is removed, the maximum
load never rises, every part stays within the weight limit."""
from __future__ import annotations

import numpy as np
import pytest

from partplan.datasets.generators import rmat
from partplan.errors import OptionError, PartitionError
from partplan.graph import Graph
from partplan.io.chunked import write_chunked
from partplan.metrics.stats import analyze
from partplan.partition.refinement.km1_pass import km1_passes


def _figures(g, part, k):
    s = analyze(g, part, k)
    return int(s.send.sum()), int(max(s.send.max(), s.recv.max()))


@pytest.mark.parametrize("loops", ["remove", "keep"])
@pytest.mark.parametrize("k", [4, 16])
def test_reported_gains_are_the_recounted_ones(loops, k):
    g = rmat(10, seed=2, self_loops=loops)
    start = (np.arange(g.n) * 5 % k).astype(np.int64)
    st: dict = {}
    part = km1_passes(g, start, k, stats=st, block_rows=300)
    total0, top0 = _figures(g, start, k)
    total1, top1 = _figures(g, part, k)
    removed = sum(r["removed"] for r in st["passes"])
    assert removed > 0 and total0 - total1 == removed and st["volume_after"] == total1
    assert st["max_load_before"] == top0 and st["max_load_after"] == top1 and top1 <= top0
    w0, w1 = (np.bincount(p, weights=np.diff(g.indptr), minlength=k) for p in (start, part))
    assert st["cap"] == int(np.floor(1.03 * -(-g.nnz // k)))
    assert (w1 <= np.maximum(w0, st["cap"])).all()   # within the limit, or (a part above it) not heavier


def test_chunked_graph_gives_the_in_memory_result(tmp_path):
    g = rmat(9, seed=4)
    path = write_chunked(g, tmp_path / "g.chunked", chunks=3)
    start = np.arange(g.n) % 8
    assert np.array_equal(km1_passes(path, start, 8, block_rows=100), km1_passes(g, start, 8, block_rows=77))


def test_refuses_directed_bad_parts_and_too_large_counts():
    g = Graph(np.array([0, 1, 1]), np.array([1]), directed=True)
    with pytest.raises(PartitionError, match="symmetric"):
        km1_passes(g, np.array([0, 1]), 2)
    u = rmat(6, seed=1)
    with pytest.raises(PartitionError, match=r"\[0, 4\)"):
        km1_passes(u, np.full(u.n, 4), 4)
    with pytest.raises(OptionError, match="max_bytes"):
        km1_passes(u, np.zeros(u.n, np.int64), 4, max_bytes=10)


def test_delta_buffer_holds_a_vertex_whose_every_net_loses_one_part_and_gains_another():
    # v = 0 in part 0 with neighbours in part 2 only; each neighbour's net has v as its only pin in part 0
    # and none in part 1: moving v to part 1 lists 4 parts per net (owner + 0, owner + 1) and 2 for its own
    from partplan.partition.refinement import km1_pass as mod
    deltas = getattr(mod._deltas, "py_func", mod._deltas)
    d = 6
    indptr = np.array([0, d], np.int64)
    indices = np.arange(1, d + 1, dtype=np.int64)
    part = np.array([0] + [2] * d, np.int32)
    cnt = np.zeros((d + 1, 3), np.uint16)
    cnt[1:, 0] = 1                       # net w (a neighbour of v): pin v in part 0
    cnt[0, 2] = d                        # v's own net: its neighbours, all in part 2
    ds, dr = np.zeros(3, np.int64), np.zeros(3, np.int64)
    tl = np.empty(4 * d + 2, np.int64)   # the size km1_passes allocates for a block whose largest row has d
    gain, nl = deltas(indptr, indices, 0, 0, 0, 1, 0, 1, part, cnt, ds, dr, tl)
    assert nl == 4 * d + 2 and gain == 0   # each net swaps part 0 for part 1; v's net: owner 0 -> 1, sends 1 -> 1
    assert ds.tolist() == [-1, 1, 0] and dr.tolist() == [-d, d, 0]


@pytest.mark.parametrize("sat", [2, 5, 40])
@pytest.mark.parametrize("loops", ["remove", "keep"])
def test_counts_saturated_with_exact_ones_aside_give_the_same_passes(monkeypatch, sat, loops):
    """Nets with ``_SAT`` pins or more keep saturated uint16 counts and exact ones aside
    (65,535 in use: R-MAT 24's hubs). With the threshold lowered, most of a small graph's
    nets are counted aside: the passes must move exactly as with every count exact (no
    net that large here), and report what the analyzer recounts."""
    from partplan.partition.refinement import km1_pass as mod
    g = rmat(11, seed=4, self_loops=loops)
    k = 8
    start = (np.arange(g.n) * 3 % k).astype(np.int64)
    assert int(np.diff(g.indptr).max()) < mod._SAT and (np.diff(g.indptr) >= sat).sum() > 20
    exact = km1_passes(g, start, k)
    monkeypatch.setattr(mod, "_SAT", sat)
    st: dict = {}
    aside = km1_passes(g, start, k, stats=st, block_rows=500)
    assert np.array_equal(exact, aside)
    total, top = _figures(g, aside, k)
    assert (total, top) == (st["volume_after"], st["max_load_after"])
    assert st["count_bytes"] == 2 * g.n * k + 8 * k * int((np.diff(g.indptr) >= sat).sum())


def test_the_passes_stop_when_the_next_one_would_remove_less_than_stop():
    """The removals fall by about one ratio from pass to pass: a third pass runs only when the
    second's removal, extrapolated by that ratio, is at least ``stop`` of the volume."""
    g, k = rmat(10, seed=1), 16
    start = np.arange(g.n) % k
    st: dict = {}
    part = km1_passes(g, start, k, stats=st)
    r = [p["removed"] for p in st["passes"]]
    after = analyze(g, part, k).summary()["total_volume"]
    assert len(r) == 2 and after == st["volume_after"]
    assert r[1] > 0.001 * (after + r[1])          # the second pass alone would not have stopped them
    assert r[1] ** 2 / r[0] <= 0.001 * after      # its extrapolation does
    more: dict = {}
    km1_passes(g, start, k, stats=more, stop=0.0)  # asked for, a third pass removes less than the second
    assert len(more["passes"]) == 3 and [p["removed"] for p in more["passes"][:2]] == r
    assert more["passes"][2]["removed"] < r[1]
