"""The 1D analyzer against a brute-force definition written here with Python
sets and loops (hypothesis draws the graphs and partitions), and the two
deduplication paths of ``volume_matrix`` against each other."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from partplan import Graph, analyze
from partplan.metrics import volume1d
from partplan.metrics.cost import dtype_bytes


# --------------------------------------------------------------------------- brute force
def edge_set(src, dst, directed: bool, self_loops: str) -> set:
    """The nonzero pattern of A as a Python set of (row, column)."""
    E = set(zip(map(int, src), map(int, dst)))
    if not directed:
        E |= {(v, u) for u, v in E}
    if self_loops == "remove":
        E = {(u, v) for u, v in E if u != v}
    return E


def brute(E: set, part: list, k: int) -> dict:
    """Every 1D figure straight from the definitions (rows of H)."""
    n = len(part)
    vol = [[0] * k for _ in range(k)]
    for r in range(k):
        needed = {j for (i, j) in E if part[i] == r}
        for j in needed:
            if part[j] != r:
                vol[part[j]][r] += 1
    lam = {}
    for j in range(n):
        lam[j] = len({part[j]} | {part[i] for (i, jj) in E if jj == j})
    sizes = [sum(1 for v in range(n) if part[v] == r) for r in range(k)]
    load = [sum(1 for (i, j) in E if part[i] == r) for r in range(k)]
    send = [sum(vol[q][r] for r in range(k)) for q in range(k)]
    recv = [sum(vol[q][r] for q in range(k)) for r in range(k)]
    sm = [sum(1 for r in range(k) if vol[q][r]) for q in range(k)]
    rm = [sum(1 for q in range(k) if vol[q][r]) for r in range(k)]
    obl = [sum(sizes[q] for q in range(k) if vol[q][r]) for r in range(k)]
    return {"vol": vol, "sum_lambda_minus_1": sum(x - 1 for x in lam.values()), "sizes": sizes,
            "load": load, "send": send, "recv": recv, "send_msgs": sm, "recv_msgs": rm,
            "messages": sum(sm), "oblivious_recv": obl,
            "edge_cut": sum(1 for (i, j) in E if part[i] != part[j])}


@st.composite
def graph_and_partition(draw, max_n=24):
    n = draw(st.integers(1, max_n))
    m = draw(st.integers(0, 4 * n))
    src = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    dst = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    dup = draw(st.integers(0, m))  # repeat a prefix: duplicate edges in the input
    src, dst = src + src[:dup], dst + dst[:dup]
    directed = draw(st.booleans())
    self_loops = draw(st.sampled_from(["keep", "remove"]))
    k = draw(st.integers(1, n))
    part = draw(st.lists(st.integers(0, k - 1), min_size=n, max_size=n))
    return n, src, dst, directed, self_loops, k, part


SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(graph_and_partition())
def test_1d_figures_equal_brute_force(case):
    n, src, dst, directed, self_loops, k, part = case
    g = Graph.from_edges(src, dst, n=n, symmetrize=not directed, self_loops=self_loops)
    E = edge_set(src, dst, directed, self_loops)
    b = brute(E, part, k)
    s = analyze(g, np.array(part), k, backward=True, f=3, dtype="float64", alpha=2.0, beta=0.5)

    assert s.volume.tolist() == b["vol"]
    assert s.total_volume == b["sum_lambda_minus_1"]  # second definition: Σ_j (λ_j − 1)
    assert s.send.tolist() == b["send"] and s.recv.tolist() == b["recv"]
    assert s.max_send == max(b["send"]) and s.max_recv == max(b["recv"])
    assert s.send_messages.tolist() == b["send_msgs"] and s.recv_messages.tolist() == b["recv_msgs"]
    assert s.messages == b["messages"]
    assert s.compute_load.tolist() == b["load"]
    assert s.part_sizes.tolist() == b["sizes"]
    assert s.oblivious_recv.tolist() == b["oblivious_recv"]
    assert s.oblivious_volume == sum(b["oblivious_recv"])
    assert s.edge_cut == b["edge_cut"]
    # α-β: per rank α·max(msgs) + β·max(bytes), bytes = rows · f · 8
    t = [2.0 * max(b["send_msgs"][r], b["recv_msgs"][r]) + 0.5 * 24 * max(b["send"][r], b["recv"][r])
         for r in range(k)]
    assert s.time_estimate == pytest.approx(max(t))
    summ = s.summary()
    assert summ["total_bytes"] == 24 * sum(b["send"])
    mean_load = sum(b["load"]) / k
    assert summ["compute_imbalance"] == pytest.approx(max(b["load"]) / mean_load - 1 if mean_load else 0.0)
    # backward A^T·G: brute force on the transposed pattern
    bt = brute({(j, i) for (i, j) in E}, part, k)
    assert s.backward.volume.tolist() == bt["vol"]
    assert s.backward.compute_load.tolist() == bt["load"]


@SETTINGS
@given(graph_and_partition())
def test_backward_default_only_for_unsymmetric(case):
    n, src, dst, directed, self_loops, k, part = case
    g = Graph.from_edges(src, dst, n=n, symmetrize=not directed, self_loops=self_loops)
    E = edge_set(src, dst, directed, self_loops)
    s = analyze(g, np.array(part), k)
    symmetric = all((j, i) in E for (i, j) in E)
    assert (s.backward is None) == symmetric


@SETTINGS
@given(graph_and_partition(), st.integers(0, 3))
def test_sort_path_equals_mask_path(case, extra_parts):
    n, src, dst, directed, self_loops, k, part = case
    g = Graph.from_edges(src, dst, n=n, symmetrize=not directed, self_loops=self_loops)
    part = np.array(part)
    k = k + extra_parts  # empty trailing parts are legal in volume_matrix
    # small n·k: the default path is the dense mask
    assert n * k <= volume1d.MASK_LIMIT
    vm, lm = volume1d.volume_matrix(g.indptr, g.indices, part, k)
    saved = volume1d.MASK_LIMIT
    volume1d.MASK_LIMIT = -1  # forces the sort path
    try:
        vs, ls = volume1d.volume_matrix(g.indptr, g.indices, part, k)
    finally:
        volume1d.MASK_LIMIT = saved
    assert np.array_equal(vm, vs) and np.array_equal(lm, ls)
    assert np.array_equal(vm, volume1d.volume_matrix_unique(g.indptr, g.indices, part, k))


@pytest.mark.parametrize("seed", range(4))
def test_paths_agree_on_larger_graphs(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    n, m, k = 3000, 30000, [7, 64, 300, 1000][seed]
    g = Graph.from_edges(rng.integers(0, n, m), rng.zipf(1.5, m) % n, n=n)  # skewed columns
    part = rng.integers(0, k, n)
    vm, lm = volume1d.volume_matrix(g.indptr, g.indices, part, k)
    monkeypatch.setattr(volume1d, "MASK_LIMIT", -1)
    vs, ls = volume1d.volume_matrix(g.indptr, g.indices, part, k)
    assert np.array_equal(vm, vs) and np.array_equal(lm, ls)
    assert np.array_equal(vm, volume1d.volume_matrix_unique(g.indptr, g.indices, part, k))
    # λ from a scipy oracle: distinct parts per column = nonzero rows of the (part × column) count matrix
    import scipy.sparse as sp
    P = sp.csr_matrix((np.ones(g.nnz), (part[g.rows], g.indices)), shape=(k, n))
    P = P + sp.csr_matrix((np.ones(n), (part, np.arange(n))), shape=(k, n))  # owner is always in λ_j
    assert np.array_equal(lm, np.diff(P.tocsc().indptr))


def test_mask_path_is_skipped_when_sparse(monkeypatch):
    # the mask is chosen only for at most MASK_PER_NNZ cells per nonzero (+4 Mi)
    calls = []
    real = volume1d._sorted_distinct
    monkeypatch.setattr(volume1d, "_sorted_distinct", lambda keys, bound: calls.append(bound) or real(keys, bound))
    g = Graph.from_edges([0, 1], [1, 2], n=200_000)
    part = np.arange(200_000) % 64
    volume1d.volume_matrix(g.indptr, g.indices, part, 64)  # 12.8 M cells for 2 nonzeros
    assert calls == [200_000 * 64]
    calls.clear()
    volume1d.volume_matrix(g.indptr, g.indices, part % 2, 2)  # 0.4 M cells: mask
    assert calls == []


@pytest.mark.parametrize("bound", [50, 1 << 32, 1 << 40])
def test_sorted_distinct_matches_numpy_unique(bound):
    rng = np.random.default_rng(bound % 97)
    keys = rng.integers(0, bound, 5000)
    keys[:10] = bound - 1  # the largest value must survive the uint32 narrowing
    out = volume1d._sorted_distinct(keys, bound)
    assert out.dtype == np.int64
    assert out.tolist() == sorted(set(keys.tolist()))
    assert volume1d._sorted_distinct(np.zeros(0, dtype=np.int64), bound).size == 0


def test_dtype_bytes_and_bytes_figures():
    assert [dtype_bytes(d) for d in ("float32", "bfloat16", "float16", "float64", "int8")] == [4, 2, 2, 8, 1]
    g = Graph.from_edges([0, 1, 2], [1, 2, 3], symmetrize=True)
    s = analyze(g, [0, 0, 1, 1], f=10, dtype="bfloat16")
    assert s.summary()["total_bytes"] == 2 * 10 * 2
    assert s.summary()["max_send_bytes"] == 1 * 10 * 2


def test_numpy_and_torch_dtypes_are_taken_and_recorded_by_name(tmp_path):
    """analyze() and build_plan() take a numpy dtype or scalar type and a torch dtype as they take
    its name: the figures record the name, and the bytes are f × its size."""
    import torch

    from partplan import Graph, analyze, build_plan, load_plan, write_plan
    g = Graph.from_edges([0, 0, 0], [1, 2, 3], symmetrize=True)
    part = np.array([0, 1, 1, 1])
    for dt, name, size in ((np.float64, "float64", 8), (np.dtype("float16"), "float16", 2),
                           (torch.bfloat16, "bfloat16", 2), ("float32", "float32", 4)):
        s = analyze(g, part, 2, f=3, dtype=dt).summary()
        assert (s["dtype"], s["total_bytes"]) == (name, 4 * 3 * size), dt
    write_plan(build_plan(g, part, f=3, dtype=np.float64), tmp_path / "p.plan")
    m = load_plan(tmp_path / "p.plan").manifest
    assert (m["dtype"], m["row_bytes"]) == ("float64", 24)
