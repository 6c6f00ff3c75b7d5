"""Hand-checked and brute-force checks of the 1D analyzer."""
import numpy as np
import pytest

from partplan import Graph, PartitionError, analyze


def brute_force_volume(A_dense: np.ndarray, part: np.ndarray, k: int) -> np.ndarray:
    """vol[q, r] by the definition, with Python sets (independent of the code)."""
    n = A_dense.shape[0]
    vol = np.zeros((k, k), dtype=np.int64)
    for r in range(k):
        needed = set()
        for i in range(n):
            if part[i] == r:
                needed.update(np.flatnonzero(A_dense[i]).tolist())
        for j in needed:
            if part[j] != r:
                vol[part[j], r] += 1
    return vol


def test_path_graph_by_hand():
    g = Graph.from_edges([0, 1, 2], [1, 2, 3], symmetrize=True)
    s = analyze(g, np.array([0, 0, 1, 1]))
    # part 0 needs H[2] (edge 1-2), part 1 needs H[1]
    assert s.volume.tolist() == [[0, 1], [1, 0]]
    assert s.edge_cut == 2 and s.messages == 2
    assert s.oblivious_volume == 4  # each part gets the other's whole 2-row block


def test_volume_is_not_edge_cut_star():
    # star: centre 0 in part 0, 6 leaves in part 1 -> 6 cut edges each way,
    # but part 1 needs H[0] once and part 0 needs 6 rows.
    g = Graph.from_edges([0] * 6, list(range(1, 7)), symmetrize=True)
    s = analyze(g, np.array([0] + [1] * 6))
    assert s.edge_cut == 12
    assert s.volume[0, 1] == 1 and s.volume[1, 0] == 6


@pytest.mark.parametrize("seed", range(5))
def test_matches_brute_force_directed(seed):
    rng = np.random.default_rng(seed)
    n, k = 40, 5
    src, dst = rng.integers(0, n, 150), rng.integers(0, n, 150)
    g = Graph.from_edges(src, dst, n=n)
    part = rng.integers(0, k, n)
    part[:k] = np.arange(k)
    A = np.zeros((n, n), dtype=bool)
    A[src, dst] = True
    s = analyze(g, part, k, backward=True)
    assert np.array_equal(s.volume, brute_force_volume(A, part, k))
    assert np.array_equal(s.backward.volume, brute_force_volume(A.T, part, k))
    assert s.compute_load.tolist() == [int(A[part == r].sum()) for r in range(k)]


def test_bad_partitions_raise_clear_errors():
    g = Graph.from_edges([0, 1], [1, 2])
    with pytest.raises(PartitionError, match="3 vertices"):
        analyze(g, [0, 1])
    with pytest.raises(PartitionError, match="negative"):
        analyze(g, [0, -1, 1])
    with pytest.raises(PartitionError, match=">= k=2"):
        analyze(g, [0, 1, 2], k=2)
    with pytest.raises(PartitionError, match="exceed"):
        analyze(g, [0, 1, 2], k=4)


def test_symmetrize_is_idempotent_on_weights():
    g = Graph.from_edges([0, 1, 1], [1, 0, 2], weights=[2.0, 5.0, 3.0])
    s1 = g.normalize(symmetrize=True)
    dense = s1.to_scipy().toarray()
    assert dense.tolist() == [[0, 5, 0], [5, 0, 3], [0, 3, 0]]
    s2 = s1.normalize(symmetrize=True)
    assert np.array_equal(s2.to_scipy().toarray(), dense)
    assert not s1.directed
