"""1.5D and 2D layouts against nonzero-level simulations written here from the
definitions in partplan/metrics/layouts.py: every nonzero a_ij is assigned to
the rank that computes it, and we collect which rows of H that rank lacks
(and, for 2D, which partial rows of Z it must return). A numeric replay checks
that the simulated schedule really computes Z = A·H."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from partplan import Graph, PartitionError, analyze, analyze_15d, analyze_2d

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def edges_of(g: Graph):
    return list(zip(g.rows.tolist(), g.indices.tolist()))


# --------------------------------------------------------------------------- 1.5D
def simulate_15d(E, part, b, c):
    """Rank (i, l) = i·c + l holds block i's rows of A and H. Nonzero a_uv with
    part[u] = i is computed by replica l = (part[v] − i) mod c; if part[v] != i
    that rank receives H[v] from replica l of block part[v]."""
    p = b * c
    need = {}  # (src rank, dst rank) -> set of rows of H
    nnz_on = [0] * p
    for (u, v) in E:
        i, q = part[u], part[v]
        l = (q - i) % c
        rank = i * c + l
        nnz_on[rank] += 1
        if q != i:
            need.setdefault((q * c + l, rank), set()).add(v)
    vol = np.zeros((p, p), dtype=np.int64)
    for (s, d), rows in need.items():
        vol[s, d] = len(rows)
    return vol, nnz_on


@st.composite
def case_15d(draw):
    n = draw(st.integers(2, 20))
    m = draw(st.integers(0, 4 * n))
    src = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    dst = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    b = draw(st.integers(1, n))
    part = draw(st.lists(st.integers(0, b - 1), min_size=n, max_size=n))
    part[:b] = list(range(b))  # every block non-empty: b is inferred as max + 1
    c = draw(st.integers(1, 4))
    return Graph.from_edges(src, dst, n=n), part, b, c


@SETTINGS
@given(case_15d())
def test_15d_matches_simulation(case):
    g, part, b, c = case
    s = analyze_15d(g, np.array(part), c)
    vol, _ = simulate_15d(edges_of(g), part, b, c)
    assert s.p == b * c and s.shape == (b, c)
    assert s.volume.tolist() == vol.tolist()
    # the a2a moves exactly the 1D volume of the b blocks, spread over replicas
    assert s.volume.sum() == analyze(g, part, b).total_volume
    sizes = np.bincount(part, minlength=b)
    # ring all-reduce of each block's n_i partial rows over its c replicas: every replica sends every
    # chunk but its own twice (np.array_split's chunks: the first n_i mod c one row longer)
    expect = [2 * (int(sizes[i]) - len(ch)) for i in range(b)
              for ch in np.array_split(np.arange(int(sizes[i])), c)] if c > 1 else [0] * (b * c)
    assert s.reduce_rows.tolist() == expect
    for i in range(b):   # a block moves 2 (c - 1) n_i rows in all, whatever the chunking
        assert sum(expect[i * c:(i + 1) * c]) == 2 * (c - 1) * int(sizes[i])
    summ = s.summary()
    assert summ["total_volume"] == int(vol.sum())
    assert summ["max_send"] == int((vol.sum(1) + np.array(expect)).max())
    assert summ["reduce_messages_per_rank"] == (2 * (c - 1) if any(expect) else 0)


def test_15d_c1_is_1d():
    rng = np.random.default_rng(3)
    g = Graph.from_edges(rng.integers(0, 50, 300), rng.integers(0, 50, 300), n=50)
    part = rng.integers(0, 5, 50)
    part[:5] = np.arange(5)
    s = analyze_15d(g, part, 1)
    assert np.array_equal(s.volume, analyze(g, part, 5).volume)
    assert not s.reduce_rows.any()


# --------------------------------------------------------------------------- 2D
def simulate_2d(E, part, R, C):
    """Vector entry v on rank part[v] = (part[v] // C, part[v] % C); nonzero
    a_uv computed on rank (row of part[u], column of part[v]). Expand: that
    rank needs H[v] (from part[v]); fold: it owes a partial Z[u] to part[u]."""
    p = R * C
    expand, fold = {}, {}
    where = {}
    for (u, v) in E:
        rank = (part[u] // C) * C + part[v] % C
        where[(u, v)] = rank
        if rank != part[v]:
            expand.setdefault((part[v], rank), set()).add(v)
        if rank != part[u]:
            fold.setdefault((rank, part[u]), set()).add(u)
    vol = np.zeros((p, p), dtype=np.int64)
    for d in (expand, fold):
        for (s, t), rows in d.items():
            vol[s, t] += len(rows)
    return vol, expand, fold, where


def replay_2d(g, part, R, C, expand, fold, where, f=3, seed=0):
    """Numeric replay of the simulated schedule: every rank multiplies only with
    H rows it owns or received, partial Z rows go only along the fold sets."""
    n = g.n
    H = np.random.default_rng(seed).standard_normal((n, f))
    p = R * C
    have = [set(np.flatnonzero(np.asarray(part) == r).tolist()) for r in range(p)]
    for (s, t), rows in expand.items():
        assert rows <= have[s]
        have[t] |= rows
    partial = [dict() for _ in range(p)]
    A = g.to_scipy()
    for (u, v), rank in where.items():
        assert v in have[rank], "a rank multiplies with an H row it does not hold"
        partial[rank][u] = partial[rank].get(u, 0) + A[u, v] * H[v]
    Z = np.zeros((n, f))
    for rank in range(p):
        for u, val in partial[rank].items():
            if rank != part[u]:
                assert u in fold[(rank, part[u])], "a partial row travels outside the fold schedule"
            Z[u] += val
    assert np.allclose(Z, A @ H)


@st.composite
def case_2d(draw):
    R, C = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    p = R * C
    n = draw(st.integers(p, max(p, 22)))
    m = draw(st.integers(0, 4 * n))
    src = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    dst = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    part = draw(st.lists(st.integers(0, p - 1), min_size=n, max_size=n))
    return Graph.from_edges(src, dst, n=n), part, R, C


@SETTINGS
@given(case_2d())
def test_2d_matches_simulation(case):
    g, part, R, C = case
    s = analyze_2d(g, np.array(part), R, C)
    vol, expand, fold, where = simulate_2d(edges_of(g), part, R, C)
    assert s.volume.tolist() == vol.tolist()
    assert s.send.tolist() == vol.sum(1).tolist() and s.recv.tolist() == vol.sum(0).tolist()
    # message bound: expand stays in a grid column, fold in a grid row
    sm = np.count_nonzero(s.volume, axis=1)
    rm = np.count_nonzero(s.volume, axis=0)
    assert sm.max(initial=0) <= (R - 1) + (C - 1) and rm.max(initial=0) <= (R - 1) + (C - 1)
    for (src, dst) in zip(*np.nonzero(s.volume)):
        same_row, same_col = src // C == dst // C, src % C == dst % C
        assert same_row != same_col  # one grid line, never the rank itself
    replay_2d(g, part, R, C, expand, fold, where)


def test_2d_1xk_grid_is_1d_volume():
    # On a k×1 grid (R = k, C = 1) every nonzero a_uv is computed on part[u]'s rank and
    # nothing is folded: the exchange is exactly the 1D one.
    rng = np.random.default_rng(0)
    g = Graph.from_edges(rng.integers(0, 40, 200), rng.integers(0, 40, 200), n=40)
    part = rng.integers(0, 4, 40)
    s = analyze_2d(g, part, 4, 1)
    assert np.array_equal(s.volume, analyze(g, part, 4).volume)


def test_2d_grid_message_bound_on_larger_graph():
    rng = np.random.default_rng(1)
    n = 2000
    g = Graph.from_edges(rng.integers(0, n, 20000), rng.integers(0, n, 20000), n=n, symmetrize=True)
    R, C = 4, 8
    s = analyze_2d(g, rng.integers(0, R * C, n), R, C)
    assert np.count_nonzero(s.volume, axis=1).max() == (R - 1) + (C - 1)  # dense random graph: bound reached


def test_layout_errors():
    g = Graph.from_edges([0, 1], [1, 2])
    with pytest.raises(PartitionError, match="replication"):
        analyze_15d(g, [0, 0, 1], 0)
    with pytest.raises(PartitionError, match="grid"):
        analyze_2d(g, [0, 0, 0], 0, 2)
