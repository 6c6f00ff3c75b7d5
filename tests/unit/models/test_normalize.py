"""Â of the gcn / mean normalizations against scipy's own A + I and row sums (bit for bit: the plan's
values are these numbers), on weighted graphs with zero weights, explicit self loops (of weight 0
too) and duplicate entries; and the row-block property the distributed plan build relies on: Â's
rows computed from a run of A's rows alone are the whole computation's rows."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from partplan import Graph
from partplan.models.normalize import normalize_adjacency, row_sums, self_looped_rows


def _scipy_normalized(graph: Graph, mode: str):
    """Â by scipy: A (duplicates summed) + I on the rows storing no diagonal entry; scipy's sum drops
    zero entries; degrees by A.sum(axis=1)."""
    A = graph.to_scipy().astype(np.float64).tocsr()
    A.sum_duplicates()
    rows = np.repeat(np.arange(graph.n), np.diff(A.indptr))
    stores = np.zeros(graph.n, bool)
    stores[rows[rows == A.indices]] = True
    miss = np.flatnonzero(~stores)
    A = (A + sp.csr_matrix((np.ones(miss.size), (miss, miss)), shape=A.shape)).tocsr()
    A.sort_indices()
    deg = np.asarray(A.sum(axis=1)).ravel()
    rows = np.repeat(np.arange(graph.n), np.diff(A.indptr))
    with np.errstate(divide="ignore"):
        if mode == "gcn":
            s = np.where(deg > 0, 1.0 / np.sqrt(deg), 0.0)
            vals = A.data * (s[rows] * s[A.indices])
        else:
            vals = A.data * np.where(deg > 0, 1.0 / deg, 0.0)[rows]
    return A.indptr, A.indices, vals


def _graph(seed: int) -> Graph:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    m = int(rng.integers(0, 12 * n))             # dense rows too (sums of more than 8 terms)
    r, c = rng.integers(0, n, m), rng.integers(0, n, m)
    w = None if seed % 3 == 0 else (rng.random(m) if seed % 3 == 1 else
                                    rng.choice([0.0, -0.0, 1e-3, 0.5, 1.0, 2.25], m))
    return Graph.from_edges(r, c, n=n, weights=w)


@pytest.mark.parametrize("mode", ["gcn", "mean"])
def test_normalized_matrix_is_scipys_bit_for_bit(mode):
    for seed in range(60):
        g = _graph(seed)
        ip, ix, vals = _scipy_normalized(g, mode)
        got = normalize_adjacency(g, mode)
        assert np.array_equal(got.indptr, ip) and np.array_equal(got.indices, ix), seed
        assert got.data.tobytes() == np.asarray(vals, np.float64).tobytes(), seed


def test_zero_weight_self_loop_is_dropped_and_not_replaced():
    """A stored diagonal entry keeps its weight (PyG's remaining self loops), and scipy's sum drops
    an entry of weight 0: a row whose self loop weighs 0 ends without one."""
    g = Graph(np.array([0, 2, 3, 3]), np.array([0, 1, 1, ]), np.array([0.0, 2.0, 3.0]))
    a = normalize_adjacency(g, "mean").to_scipy().toarray()
    assert np.array_equal(a, [[0, 1, 0], [0, 1, 0], [0, 0, 1]])


def test_row_blocks_give_the_whole_computations_rows():
    """self_looped_rows and row_sums on a run of rows [lo, hi) (global column ids) give exactly
    those rows of the whole matrix's result: what each process of the distributed build computes."""
    for seed in range(1, 40, 3):
        g = _graph(seed)
        A = g.to_scipy().astype(np.float64).tocsr()
        A.sum_duplicates()
        whole = self_looped_rows(A.indptr.astype(np.int64), A.indices, A.data, 0)
        deg = row_sums(whole[0], whole[2])
        cuts = sorted({0, g.n, *np.random.default_rng(seed).integers(0, g.n + 1, 3).tolist()})
        for lo, hi in zip(cuts[:-1], cuts[1:]):
            a, b = A.indptr[lo], A.indptr[hi]
            ip, ix, v = self_looped_rows(A.indptr[lo:hi + 1].astype(np.int64) - a, A.indices[a:b], A.data[a:b], lo)
            wa, wb = whole[0][lo], whole[0][hi]
            assert np.array_equal(ip, whole[0][lo:hi + 1] - wa)
            assert np.array_equal(ix, whole[1][wa:wb]) and v.tobytes() == whole[2][wa:wb].tobytes()
            assert row_sums(ip, v).tobytes() == deg[lo:hi].tobytes()
