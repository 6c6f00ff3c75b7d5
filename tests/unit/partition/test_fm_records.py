"""The refinement kernels (partplan.partition.refinement.fm, multilevel) take their state
in named records: short signatures, the records share the state's arrays, and
the record kernels agree with recounts and with one-vertex calls. The kernels
stay cut into phases: no function over 150 lines, no module over 800."""
import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import numpy as np
import pytest

from partplan import Graph
from partplan.partition.refinement import fm, multilevel
from partplan.partition.engines.baselines import random_partition
from partplan.partition.refinement.refine import _State

FM_MODULES = [importlib.import_module(f"{fm.__name__}.{m.name}") for m in pkgutil.iter_modules(fm.__path__)]


def random_graph(n, m, seed, directed=False):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    return Graph.from_edges(src, dst, n=n, symmetrize=not directed)


def _kernels(mod):
    for name, f in vars(mod).items():
        py = getattr(f, "py_func", None)           # a numba dispatcher
        if py is not None and py.__module__ == mod.__name__:
            yield name, py


def test_kernels_take_few_parameters():
    counts = {}
    for mod in (*FM_MODULES, multilevel):
        for name, py in _kernels(mod):
            counts[name] = len(inspect.signature(py).parameters)
    assert {"_fm", "_best1", "eval_moves", "apply_move", "cluster_pass", "state_key", "_lp"} <= set(counts)
    assert max(counts.values()) <= 12, counts
    assert counts["_fm"] <= 10 and counts["_best1"] <= 10 and counts["_lp"] <= 10


def test_kernels_cut_into_phases():
    """No function (compiled kernels included) over 150 lines, no module over 800, in the FM
    package and the modules built on it."""
    root = Path(fm.__file__).parent
    paths = [*sorted(root.glob("*.py")), *(root.parent / f"{m}.py" for m in ("vcycle", "multilevel",
                                                                             "rebalance"))]
    for path in paths:
        text = path.read_text()
        assert len(text.splitlines()) <= 800, path
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([d.lineno for d in node.decorator_list] + [node.lineno])
                assert node.end_lineno - first + 1 <= 150, f"{path.name}: {node.name}"
    assert fm._fm is fm.passes._fm and fm.apply_move is fm.apply.apply_move and fm._best1 is fm.gains._best1


def test_records_share_the_state_arrays():
    g = random_graph(60, 120, seed=1, directed=True)
    k = 5
    part = random_partition(g.n, k, seed=2).astype(np.int64)
    st = _State(g, part, k)
    w = np.maximum(g.row_nnz, 1).astype(np.int64)
    T, P, V = st.records(part, w)
    assert T.tptr is st.tptr and T.w is w and P.scnt is st.scnt and V.part is part and V.tot is st.tot
    assert T._fields == ("vptr", "vidx", "tptr", "tidx", "w", "w2")
    assert P._fields == ("soff", "lam", "dense", "spart", "scnt")
    assert V._fields == ("part", "load", "vol", "send", "recv", "smsg", "rmsg", "tot", "load2")
    assert T.w2 is w and V.load2 is st.load2 and st.cap2 == 2 ** 62     # no second weight: a cap never reached


@pytest.mark.parametrize("directed", [False, True])
def test_apply_move_keeps_the_state_exact(directed):
    """apply_move on the records: pin counts, volumes, messages and loads
    equal a recount after arbitrary moves (and back to the start state)."""
    from partplan.metrics.volume1d import volume_matrix

    rng = np.random.default_rng(7)
    g = random_graph(90, 200, seed=11, directed=directed)
    k = 6
    part = random_partition(g.n, k, seed=5).astype(np.int64)
    start = part.copy()
    st = _State(g, part, k)
    w = np.maximum(g.row_nnz, 1).astype(np.int64)
    T, P, V = st.records(part, w)
    A = fm.apply_scratch(int(np.diff(g.indptr).max()), k)
    assert isinstance(A, fm.ApplyScratch)
    moves = []
    for _ in range(200):
        u, b = int(rng.integers(g.n)), int(rng.integers(k))
        moves.append((u, int(part[u])))
        fm.apply_move(u, b, T, P, V, A, False)
        vol, _ = volume_matrix(g.indptr, g.indices, part, k)
        assert np.array_equal(st.vol, vol)
        assert st.tot[0] == vol.sum() and st.tot[1] == np.count_nonzero(vol)
        assert np.array_equal(st.smsg, np.count_nonzero(vol, axis=1))
        assert np.array_equal(st.rmsg, np.count_nonzero(vol, axis=0))
        assert np.array_equal(st.load, np.bincount(part, weights=w, minlength=k))
    for u, a in reversed(moves):
        fm.apply_move(u, a, T, P, V, A, False)
    assert np.array_equal(part, start)
    fresh = _State(g, start.copy(), k)
    for name in ("lam", "vol", "send", "recv", "smsg", "rmsg", "tot", "load"):
        assert np.array_equal(getattr(st, name), getattr(fresh, name)), name
    for j in range(g.n):            # sparse slots are unordered: compare the counts per part
        for p in range(k):
            assert fm._cnt(j, p, *st.pins()) == fm._cnt(j, p, *fresh.pins())


@pytest.mark.parametrize("obj", [1, 3, 4])
def test_eval_moves_batch_equals_single_evaluations(obj):
    """One batch over all vertices gives the same (gain, target, blocked) as
    one evaluation per vertex (a one-row batch)."""
    g = random_graph(50, 110, seed=3)
    k, q, mu = 5, 4, 0.05
    part = random_partition(g.n, k, seed=8).astype(np.int64)
    st = _State(g, part, k)
    w = np.maximum(g.row_nnz, 1).astype(np.int64)
    T, P, V = st.records(part, w)
    maxdeg = int(np.diff(g.indptr).max())
    X = fm.EvalScratch(np.zeros(k, np.int64), np.zeros(k, np.int64), np.zeros(k, np.bool_),
                        np.zeros(2 * k + 4, np.int64), np.zeros(k, np.int64), np.zeros(k, np.int64),
                        np.zeros(k * k, np.int64), np.zeros(2 * maxdeg + 4 * k + 8, np.int64),
                        np.zeros(1, np.int64), np.zeros(k, np.int64), np.zeros(k, np.int64),
                        np.zeros(k, np.int64), np.zeros(maxdeg + 1, np.int64), -np.ones(k, np.int64),
                        np.zeros(maxdeg + 1, np.int64))
    C = fm.CostModel(obj, 1e-6, 1e-9, q, mu)
    cap = int(w.sum() // k * 1.05)
    L = fm.Limits(cap, cap + 20, 10**9, 10**9, 3, -1.0, 2**62)
    F = fm.PartFocus(np.zeros(k), np.ones(k, np.bool_), -np.ones(2, np.int64))
    M, nmax = fm._refresh(C, V, 1.0, cap, True, F, 2**62)
    inv = 1.0 / M
    M, nmax = fm._refresh(C, V, inv, cap, True, F, 2**62)
    cur = fm.Current(inv, M, nmax, True, int(st.tot[0]))
    n = g.n
    B = fm.MoveBatch(np.arange(n, dtype=np.int64), -np.ones(n, np.int64), np.zeros(n), np.zeros(n, np.int64),
                      np.zeros(n, np.int64))
    fm.eval_moves(B, 0, n, T, P, V, C, L, cur, X, F)
    assert (B.target >= 0).any()
    one_g, one_b, one_k = np.zeros(1), np.zeros(1, np.int64), np.zeros(1, np.int64)
    for u in range(n):        # one vertex per call gives what the batch gave
        fm.eval_moves(fm.MoveBatch(np.array([u]), np.array([-1]), one_g, one_b, one_k), 0, 1, T, P, V, C, L,
                       cur, X, F)
        assert (one_g[0], one_b[0], one_k[0]) == (B.gain[u], B.target[u], B.blocked[u])


def test_hot_kernels_compile_without_reference_counting():
    """The kernels that allocate nothing run without numba's reference counting (an atomic
    incref/decref per array unpacked from a record: 3.2x the time of a move evaluation); the
    allocating shells (_fm, _cluster) keep it. A kernel that starts allocating fails to compile
    rather than running slowly."""
    if not fm.HAVE_NUMBA:
        pytest.skip("numba not installed")
    from partplan.partition.refinement import vcycle as fast

    rc_free = (fm._best1, fm.eval_moves, fm.apply_move, fm.state_key, fm._refresh, fm._fm_passes,
               fm.passes._pass_moves, fm.apply.roll_back, multilevel.cluster_pass, fast._lp, fast._cluster_into)
    assert all(f.targetoptions.get("_nrt") is False for f in rc_free)
    shells = (fm._fm, fast._cluster)
    assert all(f.targetoptions.get("_nrt", True) is not False for f in shells)
