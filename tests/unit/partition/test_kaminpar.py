"""KaMinPar backend: its partition against its own reported edge cut (recomputed
independently with scipy), balance within ε, determinism, one clear error for
bad input; the METIS-text hand-off against the repo's METIS reader."""
import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("kaminpar")

from partplan.errors import BackendUnavailableError, OptionError, PartitionError  # noqa: E402
from partplan.graph import Graph  # noqa: E402
from partplan.partition.engines import run_backend  # noqa: E402
from partplan.partition.engines.kaminpar import CONTEXTS, kaminpar_graph, metis_text  # noqa: E402
from partplan.partition.api import partition  # noqa: E402


def _grid(r=30, c=30, extra=60, seed=1):
    rng = np.random.default_rng(seed)
    idx = np.arange(r * c).reshape(r, c)
    src = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel(), rng.integers(0, r * c, extra)])
    dst = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel(), rng.integers(0, r * c, extra)])
    return Graph.from_edges(src, dst, n=r * c, symmetrize=True, self_loops="remove", name="grid")


def _scipy_cut(g: Graph, part: np.ndarray) -> int:
    """Edge cut of the symmetrized pattern (each undirected edge weighted by its
    number of directed entries in A), computed from scratch with scipy."""
    A = sp.csr_matrix((np.ones(g.nnz), g.indices, g.indptr), shape=(g.n, g.n))
    A.data[:] = 1
    A.sum_duplicates()
    A.data[:] = 1
    S = sp.triu(A + A.T, k=1).tocoo()
    return int(S.data[part[S.row] != part[S.col]].sum())


@pytest.mark.parametrize("context", ["default", "fast", "strong", "largek", "terapart"])
@pytest.mark.parametrize("k", [2, 7, 16])
def test_own_edge_cut_and_balance(context, k):
    g = _grid()
    eps = 0.03
    part, cut = kaminpar_graph(g, k, imbalance=eps, context=context)
    assert part.shape == (g.n,) and part.min() >= 0 and part.max() < k
    assert cut == _scipy_cut(g, part)
    w = np.maximum(g.row_nnz, 1)
    loads = np.bincount(part, weights=w, minlength=k)
    assert loads.max() <= np.floor((1 + eps) * np.ceil(w.sum() / k)) + 1e-9
    # better than a random partition by a wide margin (it is optimizing the cut)
    rnd = np.random.default_rng(0).integers(0, k, g.n)
    assert cut < 0.5 * _scipy_cut(g, rnd)


def test_deterministic_for_a_seed():
    g = _grid()
    a, _ = kaminpar_graph(g, 8, seed=3)
    b, _ = kaminpar_graph(g, 8, seed=3)
    assert np.array_equal(a, b)


def test_metis_text_round_trip(tmp_path):
    from partplan.io.metis import read_metis
    from partplan.models import metis_graph

    g = _grid(6, 5, extra=4)
    xadj, adjncy, ew, vw = metis_graph(g)
    p = tmp_path / "g.graph"
    p.write_text(metis_text(xadj, adjncy, ew, vw))
    h = read_metis(p)
    A = sp.csr_matrix((ew, adjncy, xadj), shape=(g.n, g.n))
    B = sp.csr_matrix((h.data if getattr(h, "data", None) is not None else np.ones(h.nnz), h.indices, h.indptr),
                      shape=(g.n, g.n))
    assert (A != 0).sum() == (B != 0).sum() and ((A != 0) != (B != 0)).nnz == 0


def test_registry_and_planner():
    g = _grid()
    part, info = run_backend("kaminpar", g, 4, context="fast")
    assert info["edge_cut"] == _scipy_cut(g, part) and info["context"] == "fast"
    p = partition(g, 4, model="graph", backend="kaminpar", preset="eco")
    assert p.backend == "kaminpar" and p.stats.total_volume > 0
    assert p.info["backend"]["edge_cut"] == _scipy_cut(g, p.part)


@pytest.mark.parametrize("call, err", [
    (lambda g: kaminpar_graph(g, g.n + 1), PartitionError),
    (lambda g: kaminpar_graph(g, 0), PartitionError),
    (lambda g: kaminpar_graph(g, 4, context="nope"), BackendUnavailableError),
    (lambda g: kaminpar_graph(g, 4, threads=0), OptionError),
    (lambda g: kaminpar_graph(g, 4, imbalance=-0.1), PartitionError),
    (lambda g: run_backend("kaminpar", g, 4, recursive=True), BackendUnavailableError),
    (lambda g: partition(g, 4, backend="kaminpar", preset="QUALITY"), BackendUnavailableError),
    (lambda g: partition(g, 4, model="hypergraph", backend="kaminpar"), BackendUnavailableError),
])
def test_bad_input_one_clear_error(call, err):
    with pytest.raises(err):
        call(_grid(5, 5, extra=0))


def test_contexts_all_run():
    g = _grid(12, 12, extra=10)
    for c in CONTEXTS:
        part, cut = kaminpar_graph(g, 4, context=c)
        assert cut == _scipy_cut(g, part)


def test_parhip_file_layout(tmp_path):
    """The ParHIP file read back with struct (independent of write_parhip's numpy views)."""
    import struct

    from partplan.models import metis_graph
    from partplan.partition.engines.kaminpar import write_parhip

    g = _grid(5, 4, extra=3)
    xadj, adjncy, ew, vw = metis_graph(g)
    p = tmp_path / "g.parhip"
    write_parhip(p, xadj, adjncy, ew, vw)
    raw = p.read_bytes()
    n, m = g.n, int(adjncy.size)
    assert len(raw) == 24 + 8 * (n + 1) + 8 * m + 8 * n + 8 * m
    version, n2, m2 = struct.unpack_from("<3Q", raw, 0)
    assert (version, n2, m2) == (0, n, m)
    off = struct.unpack_from(f"<{n + 1}Q", raw, 24)
    base = 24 + 8 * (n + 1)
    nb = struct.unpack_from(f"<{m}Q", raw, base)
    vws = struct.unpack_from(f"<{n}q", raw, base + 8 * m)
    ews = struct.unpack_from(f"<{m}q", raw, base + 8 * m + 8 * n)
    for v in range(n):
        lo, hi = (off[v] - base) // 8, (off[v + 1] - base) // 8
        assert list(nb[lo:hi]) == adjncy[xadj[v]:xadj[v + 1]].tolist()
        assert list(ews[lo:hi]) == ew[xadj[v]:xadj[v + 1]].tolist()
    assert list(vws) == vw.tolist()


@pytest.mark.parametrize("context", ["fast", "terapart"])
def test_parhip_and_metis_handoff_agree(context):
    """Both hand-offs give KaMinPar the same graph: same partition for the same seed, its own cut exact."""
    g = _grid(12, 10, extra=20)
    a, cut_a = kaminpar_graph(g, 6, seed=1, context=context, handoff="parhip")
    b, cut_b = kaminpar_graph(g, 6, seed=1, context=context, handoff="metis")
    assert np.array_equal(a, b) and cut_a == cut_b == _scipy_cut(g, a)
    with pytest.raises(BackendUnavailableError):
        kaminpar_graph(g, 6, handoff="xml")


@pytest.mark.parametrize("loops", [False, True])
def test_lean_parhip_equals_the_metis_graph_file(tmp_path, monkeypatch, loops):
    """The streaming writer (symmetric canonical graphs) writes the very bytes of write_parhip on
    metis_graph's arrays; small chunks so several chunk boundaries are crossed."""
    from partplan.models import metis_graph
    from partplan.partition.engines import kaminpar as kmod

    g = _grid(9, 7, extra=15)
    if loops:
        src = np.concatenate([np.repeat(np.arange(g.n), np.diff(g.indptr)), np.arange(0, g.n, 3)])
        dst = np.concatenate([g.indices, np.arange(0, g.n, 3)])
        g = Graph.from_edges(src, dst, n=g.n, symmetrize=True, name="loops")
        assert g.has_self_loops()
    monkeypatch.setattr(kmod, "LEAN_CHUNK", 17)
    vw = np.maximum(g.row_nnz, 1).astype(np.int64)
    assert kmod.write_parhip_lean(tmp_path / "lean", g, vw)
    kmod.write_parhip(tmp_path / "ref", *metis_graph(g))
    assert (tmp_path / "lean").read_bytes() == (tmp_path / "ref").read_bytes()
    directed = Graph.from_edges([0, 1, 2], [1, 2, 0], n=3, name="cycle")
    assert not kmod.write_parhip_lean(tmp_path / "d", directed, np.ones(3, np.int64))
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("k", [4, 7])
def test_zero_imbalance_runs_and_the_default_meets_the_exact_limit(k):
    """ε = 0: KaMinPar reads it as "no block weight set" and refused to run, so the default
    pipeline (whose starts include KaMinPar) failed; now KaMinPar runs, and the default's parts
    weigh at most ⌈W/k⌉ (the ε-limit at ε = 0), counted here from the balance weights."""
    g = _grid()
    w = np.maximum(np.diff(g.indptr), 1)
    part, _ = kaminpar_graph(g, k, imbalance=0.0)
    assert part.shape == (g.n,) and part.min() >= 0 and part.max() < k
    p = partition(g, k, imbalance=0.0)
    assert np.bincount(p.part, weights=w, minlength=k).max() <= -(-int(w.sum()) // k)


def test_hand_off_folders_of_killed_processes_are_removed(tmp_path, monkeypatch):
    """The native engines' hand-off folders live in the system's temporary folder; a worker killed
    inside one (an interrupted --nprocs run: a signal skips the with-block's exit) left a 14.5 MB
    graph behind (an audit). Each is now named by its process and the next hand-off removes those
    of dead processes, keeps those of live ones, and removes its own on exit, error or not."""
    import os
    import tempfile

    from partplan._atomic import scratch_dir
    from partplan.datasets import grid2d
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / ".partplan-kaminpar.tmp-999999999-deadbeef"        # no such pid
    live = tmp_path / f".partplan-kaminpar.tmp-{os.getppid()}-cafe1234"  # a running process's
    for d in (dead, live):
        d.mkdir()
        (d / "graph.parhip").write_bytes(b"x" * 100)
    part = partition(grid2d(10, 10), 4, model="graph", backend="kaminpar").part
    assert np.bincount(part, minlength=4).min() > 0
    assert not dead.exists() and live.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name]     # its own folder is gone too
    with pytest.raises(RuntimeError), scratch_dir("partplan-kaminpar") as d:
        assert d.parent == tmp_path
        raise RuntimeError("the engine failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name]
