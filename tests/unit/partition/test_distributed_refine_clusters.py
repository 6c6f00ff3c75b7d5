"""The distributed refinement's coordinated moves (``refinement/distributed.py``) in this
process on one MPI rank (``COMM_SELF``): the clusters of :func:`local_clusters`, whole-cluster
moves on a grid where single moves stop, pull moves with a partner out of a full part, and
every figure against a brute-force count of the column-net volumes."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gridparts import brute_volumes, grid, toothed


def _comm():
    mpi = pytest.importorskip("mpi4py.MPI", reason="mpi4py is not installed (make mpi)")
    return mpi.COMM_SELF


def _refine(a: sp.csr_matrix, start: np.ndarray, k: int, **ctx):
    from partplan.partition.refinement.distributed import DistributedRefineContext, RowSlice, refine_distributed
    n = a.shape[0]
    ip, ix = a.indptr.astype(np.int64), a.indices.astype(np.int64)
    sl = RowSlice(0, n, n, ip, ix, ip, ix)
    part = start.astype(np.int32).copy()
    res = refine_distributed(_comm(), sl, part, k, 0.03, DistributedRefineContext(**ctx))
    return part, res


def _check_exact(a, part, k, res):
    s, r, w = brute_volumes(a, part.astype(np.int64), k)
    assert res.send.tolist() == s.tolist() and res.recv.tolist() == r.tolist() and res.weights.tolist() == w.tolist()
    return int(max(s.max(), r.max()))


def test_local_clusters_are_connected_within_one_part_nested_and_capped():
    from scipy.sparse.csgraph import connected_components

    from partplan.partition.refinement.distributed import RowSlice, local_clusters
    a = grid(24)
    n, k = a.shape[0], 3
    part = toothed(24, k, 3)
    lo, hi = 100, 500   # a row block, as one of several processes holds it
    ip = (a.indptr[lo:hi + 1] - a.indptr[lo]).astype(np.int64)
    ix = a.indices[a.indptr[lo]:a.indptr[hi]].astype(np.int64)
    sl = RowSlice(lo, hi, n, ip, ix, ip, ix)
    maxw = 40
    levels = local_clusters(sl, part, maxw)
    assert len(levels) >= 3
    w = np.diff(ip)
    local = a[lo:hi][:, lo:hi]
    for cid, nc in levels:
        assert cid.shape == (hi - lo,) and cid.max() == nc - 1
        size = np.bincount(cid, minlength=nc)
        cw = np.bincount(cid, weights=w, minlength=nc)
        assert (cw[size >= 2] <= maxw).all()
        for c in np.flatnonzero(size >= 2)[:200]:
            m = np.flatnonzero(cid == c)
            assert np.unique(part[lo + m]).size == 1                  # one part
            assert connected_components(local[m][:, m], directed=False)[0] == 1   # connected by local rows
    for (coarse, _), (fine, nf) in zip(levels, levels[1:]):            # a finer cluster lies in one coarser
        owner = np.full(nf, -1)
        owner[fine] = coarse
        assert np.array_equal(owner[fine], coarse)


@pytest.mark.parametrize("nx,k,tooth", [(32, 2, 4), (48, 4, 4)])
def test_cluster_moves_lower_the_max_where_single_moves_stop(nx, k, tooth):
    a = grid(nx)
    start = toothed(nx, k, tooth)
    single, res0 = _refine(a, start, k, coordinated_phases=0)
    clustered, res1 = _refine(a, start, k, pulls=0, cluster_levels=8)
    m0, m1 = _check_exact(a, single, k, res0), _check_exact(a, clustered, k, res1)
    assert res0.cluster_moved == 0 and res1.cluster_moved > 0
    assert m1 < m0, (m0, m1)
    assert res1.weights.max() <= int(np.floor(1.03 * -(-int(res1.weights.sum()) // k)))


@pytest.mark.parametrize("knobs", [{"pulls": 1, "coordinated_phases": 0}, {}])   # every round; the phases
def test_pulls_take_a_hubs_satellites_into_its_full_part(knobs):
    """A hub in part 0 with satellites (its neighbours only) in the other parts: part 0
    receives every satellite's row. Pulling them in lowers it, but part 0 is full, so a
    pull has to take a move out of part 0 along."""
    nx, k, ns = 24, 4, 40
    g = grid(nx).tocoo()
    n0 = nx * nx
    hub, sats = n0, n0 + 1 + np.arange(ns)
    rows = np.concatenate([g.row, np.full(ns, hub), sats, [hub], sats])
    cols = np.concatenate([g.col, sats, np.full(ns, hub), [hub], sats])
    a = sp.csr_matrix((np.ones(rows.size, np.int64), (rows, cols)), shape=(n0 + 1 + ns,) * 2)
    a.sum_duplicates()
    a.sort_indices()
    i, j = np.divmod(np.arange(n0), nx)
    start = np.empty(a.shape[0], np.int64)
    start[:n0] = (i >= nx // 2) * 2 + (j >= nx // 2)
    start[hub] = 0
    start[sats] = 1 + np.arange(ns) % 3
    plain, res0 = _refine(a, start, k, pulls=0, coordinated_phases=0)
    pulled, res1 = _refine(a, start, k, **knobs)
    m0, m1 = _check_exact(a, plain, k, res0), _check_exact(a, pulled, k, res1)
    assert m1 < m0, (m0, m1)
    assert res1.weights.max() <= max(int(np.floor(1.03 * -(-int(res1.weights.sum()) // k))), int(res1.before["max_weight"]))


def test_group_deltas_equal_a_recount_of_each_net():
    """The rounds' exact changes with several pins of one net moving together (a cluster's members)."""
    from gridparts import pair_changes

    def figures(pins, owner, k):
        send, recv = np.zeros(k, np.int64), np.zeros(k, np.int64)
        others = set(int(x) for x in pins) - {int(owner)}
        send[owner] += len(others)
        for r in others:
            recv[r] += 1
        return send, recv

    rng = np.random.default_rng(11)
    k, m = 5, 2000
    counts, a, b, o, o2, pin, ts, tr = [], [], [], [], [], [], [], []
    for _ in range(m):
        pins = rng.integers(0, k, rng.integers(1, 8))
        ai = int(pins[rng.integers(pins.size)]) if rng.random() < 0.8 else int(rng.integers(k))
        bi = int((ai + rng.integers(1, k)) % k)
        c = int(rng.integers(0, (pins == ai).sum() + 1))      # how many of the net's pins in ai move
        moves_owner = rng.random() < 0.3
        oi = ai if moves_owner else int(rng.integers(k))
        o2i = bi if moves_owner else oi
        after = pins.copy()
        after[np.flatnonzero(after == ai)[:c]] = bi
        s0, r0 = figures(pins, oi, k)
        s1, r1 = figures(after, o2i, k)
        ts.append(s1 - s0)
        tr.append(r1 - r0)
        counts.append(np.bincount(pins, minlength=k))
        a.append(ai), b.append(bi), o.append(oi), o2.append(o2i), pin.append(c)
    counts = np.array(counts, np.int32)
    a, b, o, o2, pin = (np.array(x, np.int64) for x in (a, b, o, o2, pin))
    t = np.arange(m)
    dS, dR = pair_changes(counts, t, a, b, o, o2, pin)
    assert np.array_equal(dS, np.array(ts)) and np.array_equal(dR, np.array(tr))


def test_no_coordinated_phases_above_the_nonzero_bound():
    """``coordinated_max_nnz`` below the graph's nonzeros: the refinement is the single
    moves' (the same parts as ``coordinated_phases=0``), at or above: the phases run
    (the toothed grid's cluster moves, which single moves cannot make, lower the max)."""
    nx, k = 32, 2
    a = grid(nx)
    start = toothed(nx, k, 4)
    single, res0 = _refine(a, start, k, coordinated_phases=0, pulls=0, cluster_levels=8)
    capped, res1 = _refine(a, start, k, coordinated_max_nnz=a.nnz - 1, pulls=0, cluster_levels=8)
    open_, res2 = _refine(a, start, k, coordinated_max_nnz=a.nnz, pulls=0, cluster_levels=8)
    assert np.array_equal(single, capped) and res1.phases == 0
    assert res2.phases >= 1 and _check_exact(a, open_, k, res2) < _check_exact(a, capped, k, res1)
