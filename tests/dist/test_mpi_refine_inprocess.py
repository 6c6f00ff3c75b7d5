"""The distributed refinement in this process on one MPI rank (``COMM_SELF``):
the kept pin counts of the large nets give exactly the moves that counting
every net's pins gives, and every figure equals the analyzer's recount."""
from __future__ import annotations

import numpy as np
import pytest

from partplan.metrics.stats import analyze


def _comm():
    mpi = pytest.importorskip("mpi4py.MPI", reason="mpi4py is not installed (make mpi)")
    return mpi.COMM_SELF


def _refine(g, start, k, **ctx):
    from partplan.partition.refinement.distributed import (
        DistributedRefineContext as RefineContext,
        RowSlice,
        refine_distributed,
    )
    indptr, indices = g.indptr.astype(np.int64), g.indices.astype(np.int64)
    sl = RowSlice(0, g.n, g.n, indptr, indices, indptr, indices)
    part = start.astype(np.int32).copy()
    res = refine_distributed(_comm(), sl, part, k, 0.03, RefineContext(**ctx))
    return part, res


@pytest.mark.parametrize("cells", [0, 16 * 40])   # no net kept; the 40 largest of those with 8+ pins kept
def test_kept_counts_give_the_same_moves_as_counting(monkeypatch, cells):
    from partplan.datasets.generators import rmat
    from partplan.partition.refinement import distributed as mod
    _comm()
    g = rmat(11, seed=5)
    k = 16
    start = (np.arange(g.n) * 7 % k).astype(np.int32)
    assert (np.diff(g.indptr) >= mod._BIG_MIN_PINS).sum() > 40   # both runs keep some nets, the second not all
    monkeypatch.setattr(mod, "_BIG_CELLS", 1 << 24)
    monkeypatch.setattr(mod, "_BIG_SHARE", 0)
    kept, res_kept = _refine(g, start, k, rounds=40)
    monkeypatch.setattr(mod, "_BIG_CELLS", cells)
    counted, res_counted = _refine(g, start, k, rounds=40)
    assert np.array_equal(kept, counted)
    s = analyze(g, kept, k)
    assert res_kept.send.tolist() == s.send.tolist() and res_kept.recv.tolist() == s.recv.tolist()
    assert max(s.send.max(), s.recv.max()) < max(res_kept.before["max_send"], res_kept.before["max_recv"])
    assert res_kept.moved > 0 and res_counted.moved == res_kept.moved


@pytest.mark.parametrize("what", ["kept", "send"])
def test_a_maintained_figure_that_drifts_is_caught_by_the_final_recount(monkeypatch, what):
    """The final pass recounts send / recv and the kept pin counts from the pins: a kept
    count or a send figure corrupted after a commit is an internal error, not a result."""
    from partplan.datasets.generators import rmat
    from partplan.partition.refinement import distributed as mod
    _comm()
    g = rmat(11, seed=5)
    k = 16
    start = (np.arange(g.n) * 7 % k).astype(np.int32)
    commit = mod._Refiner._commit

    def drifting(self, *args):
        chosen = commit(self, *args)
        if chosen.size:
            if what == "kept" and self.big_counts.size:
                self.big_counts[0, 0] += 1
            elif what == "send":
                self.send[0] += 1
        return chosen

    monkeypatch.setattr(mod._Refiner, "_commit", drifting)
    with pytest.raises(RuntimeError, match="differ from the recount"):
        _refine(g, start, k, rounds=5)


def _worker_run(tmp_path, g, k, **refine_context):
    """One MPI worker (:func:`partplan.partition.pipeline.mpi_worker.run`) on this process alone."""
    from partplan._atomic import create_npy
    from partplan.io.chunked import write_chunked
    from partplan.partition.pipeline import mpi_worker
    path = write_chunked(g, tmp_path / "g.chunked", chunks=2)
    out, ident = create_npy(tmp_path / "out.npy", np.int64, (g.n,))
    cfg = {"graph": str(path), "k": k, "imbalance": 0.03, "seed": 0, "engine": "stream", "refine": True,
           "refine_context": refine_context, "tmp": str(out), "ident": list(ident), "quiet": True}
    res = mpi_worker.run(cfg)
    return res, np.load(out)


def test_the_rounds_run_when_process_0_cannot_hold_the_graph(monkeypatch, tmp_path):
    """A graph under the bound whose whole-graph read fails in process 0 (MemoryError, OSError)
    gets the distributed rounds instead: it is still refined, and the figures are exact."""
    _comm()
    from partplan.datasets.generators import rmat
    import partplan.io.chunked as chunked
    g, k = rmat(10, seed=2), 4

    def no_room(*args, **kwargs):
        raise MemoryError("no room for the whole graph")
    monkeypatch.setattr(chunked, "read_chunked", no_room)
    res, part = _worker_run(tmp_path, g, k, rounds=20)
    assert res["gathered"].startswith("skipped: MemoryError") and res["refine"]["rounds"] > 0
    s = analyze(g, part, k).summary()
    assert (res["result"]["total_volume"], res["result"]["max_send"], res["result"]["max_recv"]) == \
        (s["total_volume"], s["max_send"], s["max_recv"])
    e = res["engine_result"]
    assert max(s["max_send"], s["max_recv"]) < max(e["max_send"], e["max_recv"])


def test_an_infinite_time_limit_is_no_limit_for_the_whole_graph_refinement(tmp_path):
    _comm()
    from partplan.datasets.generators import rmat
    g, k = rmat(9, seed=3), 4
    res, part = _worker_run(tmp_path, g, k, time_limit=float("inf"))
    assert isinstance(res["gathered"], dict) and res["refine"]["rounds"] == 0
    assert res["result"]["total_volume"] == analyze(g, part, k).summary()["total_volume"]


def test_a_graph_that_fits_is_never_behind_the_single_process_default(tmp_path):
    """One process holds both candidates of a graph that fits (the engine's partition refined whole,
    and the single-process default pipeline): the result is at most the default's max(send, recv)
    (``partition(g, k)``, recounted by analyze) and at most 3 % above its total volume; with
    ``gather_pipeline = 0`` only the engine's refined partition is a candidate."""
    _comm()
    from partplan import partition
    from partplan.datasets.generators import rmat
    g, k = rmat(10, seed=6), 8
    worst = lambda s: max(s["max_send"], s["max_recv"])   # noqa: E731
    d = analyze(g, partition(g, k).part, k).summary()
    (tmp_path / "on").mkdir()
    res, part = _worker_run(tmp_path / "on", g, k)
    s = analyze(g, part, k).summary()
    gathered = res["gathered"]
    assert gathered["kept"] in ("engine", "pipeline") and res["refine"]["rounds"] == 0
    assert (gathered["pipeline"]["max"], gathered["pipeline"]["total"]) == (worst(d), d["total_volume"])
    assert worst(s) <= worst(d) and s["total_volume"] <= 1.03 * d["total_volume"]
    assert (res["result"]["total_volume"], res["result"]["max_send"], res["result"]["max_recv"]) == \
        (s["total_volume"], s["max_send"], s["max_recv"])
    (tmp_path / "off").mkdir()
    off, part_off = _worker_run(tmp_path / "off", g, k, gather_pipeline=0)
    assert off["gathered"]["kept"] == "engine" and off["gathered"]["pipeline"].startswith("skipped")
    e = off["gathered"]["engine_refined"]
    s_off = analyze(g, part_off, k).summary()
    assert worst(s_off) <= e["max_after"] and s_off["total_volume"] <= e["total_after"]   # the passes never raise


@pytest.mark.parametrize("fails, error", [("refine_partition", MemoryError), ("auto_partition", MemoryError),
                                          ("auto_partition", "PartitionError")])
def test_one_candidate_that_cannot_be_held_leaves_the_other(monkeypatch, tmp_path, fails, error):
    """A MemoryError in one candidate's process (the engine's refinement, or the single-process
    pipeline), or a start engine's failure in the pipeline, leaves the other candidate kept, with
    the reason in the sidecar; the figures stay exact."""
    _comm()
    from partplan import errors
    from partplan.datasets.generators import rmat
    from partplan.partition.pipeline import auto
    g, k = rmat(9, seed=4), 4
    error = getattr(errors, error) if isinstance(error, str) else error

    def no_room(*args, **kwargs):
        raise error("no room")
    monkeypatch.setattr(auto, fails, no_room)
    res, part = _worker_run(tmp_path, g, k)
    gathered = res["gathered"]
    failed, other = ("engine_refined", "pipeline") if fails == "refine_partition" else ("pipeline", "engine_refined")
    assert gathered[failed].startswith(f"skipped: {error.__name__}") and isinstance(gathered[other], dict)
    assert gathered["kept"] == ("pipeline" if fails == "refine_partition" else "engine")
    assert res["refine"]["rounds"] == 0
    s = analyze(g, part, k).summary()
    assert (res["result"]["total_volume"], res["result"]["max_send"], res["result"]["max_recv"]) == \
        (s["total_volume"], s["max_send"], s["max_recv"])


def _volume(g, start, k, **kw):
    from partplan.partition.refinement.distributed import RowSlice
    from partplan.partition.refinement.distributed_volume import volume_rounds
    indptr, indices = g.indptr.astype(np.int64), g.indices.astype(np.int64)
    if g.is_symmetric():
        colptr, colidx = indptr, indices
    else:   # the nets are the columns: their pins are the rows holding them
        t = g.to_scipy().T.tocsr()
        colptr, colidx = t.indptr.astype(np.int64), t.indices.astype(np.int64)
    sl = RowSlice(0, g.n, g.n, indptr, indices, colptr, colidx)
    part = start.astype(np.int32).copy()
    return part, volume_rounds(_comm(), sl, part, k, 0.03, **kw)


@pytest.mark.parametrize("targets", [1, 2])
def test_volume_rounds_lower_the_total_and_never_the_bottleneck(targets):
    """The distributed connectivity rounds on one process: less total volume than the start, no
    higher max(send, recv), every part within the weight limit or no heavier than it was, and
    every figure equal to the analyzer's count of the result; against the one-process passes
    (the same objective and rules, moves in row order) they remove at least 80 % as much."""
    _comm()
    from partplan.datasets.generators import rmat
    from partplan.partition.objectives import eps_limit
    from partplan.partition.refinement.km1_pass import km1_passes
    g, k = rmat(12, seed=4), 16
    rng = np.random.default_rng(0)
    start = (np.arange(g.n) // -(-g.n // k)).astype(np.int32)   # row blocks, then a tenth shuffled
    mix = rng.random(g.n) < 0.1
    start[mix] = rng.integers(0, k, int(mix.sum()))
    s0 = analyze(g, start, k)
    part, st = _volume(g, start, k, targets=targets)
    s1 = analyze(g, part, k)
    worst = lambda s: int(max(s.send.max(), s.recv.max()))   # noqa: E731
    assert s1.summary()["total_volume"] < s0.summary()["total_volume"]
    assert worst(s1) <= worst(s0)
    w = np.diff(g.indptr)
    w0, w1 = np.bincount(start, weights=w, minlength=k), np.bincount(part, weights=w, minlength=k)
    assert np.all(w1 <= np.maximum(eps_limit(int(w.sum()), k, 0.03), w0))
    assert (st["volume_after"], st["max_load_after"]) == (s1.summary()["total_volume"], worst(s1))
    ref = analyze(g, km1_passes(g, start, k, eps=0.03), k).summary()["total_volume"]
    assert st["volume_before"] - st["volume_after"] >= 0.8 * (st["volume_before"] - ref)


def test_volume_rounds_take_a_directed_pattern():
    """A directed graph's nets are its columns: the rounds lower the total volume the analyzer
    counts (the one-process passes refuse such a graph)."""
    _comm()
    from partplan.graph import Graph
    rng = np.random.default_rng(5)
    n, k = 800, 8
    src, dst = rng.integers(0, n, 6000), (rng.zipf(1.6, 6000) - 1) % n
    g = Graph.from_edges(src, dst, n=n)
    assert not g.is_symmetric()
    start = rng.integers(0, k, n).astype(np.int32)
    s0 = analyze(g, start, k)
    part, st = _volume(g, start, k)
    s1 = analyze(g, part, k)
    assert s1.summary()["total_volume"] < s0.summary()["total_volume"]
    assert max(s1.send.max(), s1.recv.max()) <= max(s0.send.max(), s0.recv.max())
    assert st["volume_after"] == s1.summary()["total_volume"]


@pytest.mark.parametrize("where,k,expect", [("distributed", 4, "distributed"), ("auto", 4, "process 0"),
                                             ("auto", 256, "distributed"), ("process0", 256, "process 0")])
def test_the_passes_run_in_process_0_only_while_their_counts_fit_its_share(monkeypatch, tmp_path, where, k,
                                                                          expect):
    """``volume_passes = 'auto'``: process 0 holds the uint16[n, k] counts while 2·n·k bytes fit in
    8 bytes per nonzero of its rows (or the fixed buffer, set to none here); above, the rounds run
    over every process's rows. Either way the sidecar's figures are the analyzer's."""
    _comm()
    from partplan.datasets.generators import rmat
    from partplan.partition.pipeline import mpi_worker
    monkeypatch.setattr(mpi_worker, "PASS_BUFFER", 0)
    g = rmat(9, seed=3)
    assert (2 * g.n * 4 <= 8 * g.nnz) and (2 * g.n * 256 > 8 * g.nnz)
    res, part = _worker_run(tmp_path, g, k, gather_max_pins=0, rounds=10, volume_passes=where)
    assert res["km1"]["where"] == expect
    s = analyze(g, part, k).summary()
    assert (res["result"]["total_volume"], res["result"]["max_send"], res["result"]["max_recv"]) == \
        (s["total_volume"], s["max_send"], s["max_recv"])
    assert s["total_volume"] < res["refine"]["total_volume"]


@pytest.mark.parametrize("how", ["limit", "memory"])
def test_the_rounds_run_where_the_passes_in_process_0_cannot(monkeypatch, tmp_path, how):
    """'auto' with counts above the passes' own limit (``km1_pass.DEFAULT_MAX_BYTES``) chooses the
    rounds; passes in process 0 that fail (MemoryError) leave the rounds to run instead."""
    _comm()
    from partplan.datasets.generators import rmat
    from partplan.partition.refinement import km1_pass
    g, k = rmat(9, seed=3), 4
    if how == "limit":
        monkeypatch.setattr(km1_pass, "DEFAULT_MAX_BYTES", 2 * g.n * k - 1)
    else:
        def no_room(*args, **kwargs):
            raise MemoryError("no room for the counts")
        monkeypatch.setattr(km1_pass, "km1_passes", no_room)
    res, part = _worker_run(tmp_path, g, k, gather_max_pins=0, rounds=10)
    assert res["km1"]["where"] == "distributed"
    s = analyze(g, part, k).summary()
    assert res["result"]["total_volume"] == s["total_volume"] < res["refine"]["total_volume"]


@pytest.mark.parametrize("directed", [False, True])
def test_the_final_stats_are_the_analyzers_summary(directed):
    """The distributed partitioner's final figures (``stats`` of its sidecar and of
    ``--nprocs --json``), counted over the nets of one MPI rank, equal analyze()'s summary of
    the same partition — messages, edge cut, oblivious volume and bytes included — on a
    symmetric graph and a directed one (nets are columns: the transpose's rows)."""
    import scipy.sparse as sp

    from partplan import Graph
    from partplan.metrics.stats import analyze
    from partplan.partition.pipeline.mpi_worker import _final_stats
    from partplan.partition.refinement.distributed import RowSlice, recount
    comm = _comm()
    rng = np.random.default_rng(4)
    a = sp.random(300, 300, density=0.02, random_state=5, format="csr")
    a = (a if directed else a + a.T).tocsr()
    g = Graph.from_scipy(a, directed=directed)
    assert g.is_symmetric() is not directed
    k = 7
    part = rng.integers(0, k, g.n).astype(np.int32)
    indptr, indices = g.indptr.astype(np.int64), g.indices.astype(np.int64)
    t = sp.csr_matrix(a.T)
    t.sort_indices()
    sl = RowSlice(0, g.n, g.n, indptr, indices, t.indptr.astype(np.int64), t.indices.astype(np.int64))
    send, recv, weights = recount(comm, sl, part, k)
    got = _final_stats(comm, sl, part, k, g.nnz, send, recv, weights)
    ref = analyze(g, part.astype(np.int64), k).summary()
    assert got == ref
    assert got["messages"] > 0 and got["edge_cut"] > 0


def test_the_final_stats_leave_the_pair_figures_out_above_the_matrix_bound(monkeypatch):
    """Above the bound on the k × k matrix the final figures are the per-part ones (equal to the
    analyzer's), and ``stats_note`` says what is left out."""
    from partplan.datasets.generators import rmat
    from partplan.metrics.stats import analyze
    from partplan.partition.pipeline import mpi_worker
    from partplan.partition.refinement.distributed import RowSlice, recount
    comm = _comm()
    g = rmat(9, seed=2)
    k = 16
    part = (np.arange(g.n) * 5 % k).astype(np.int32)
    indptr, indices = g.indptr.astype(np.int64), g.indices.astype(np.int64)
    sl = RowSlice(0, g.n, g.n, indptr, indices, indptr, indices)
    monkeypatch.setattr(mpi_worker, "STATS_MATRIX_MAX_BYTES", 2 * k * k * 8 - 1)
    got = mpi_worker._final_stats(comm, sl, part, k, g.nnz, *recount(comm, sl, part, k))
    ref = analyze(g, part.astype(np.int64), k).summary()
    assert "messages" not in got and "edge cut" in got.pop("stats_note")
    assert got == {name: ref[name] for name in got}
