"""Plan builder: exchange lists against a brute-force oracle (Python sets), and the
one-process replay against scipy's A @ H for 1D, 1.5D and 2D."""
import numpy as np
import pytest

from partplan import Graph, PartitionError, PartplanError, PlanError, analyze, analyze_15d, analyze_2d
from partplan.plan import build_plan
from partplan.runtime.validate import replay, replay_backward
from partplan.program.plan import manifest_volume


class V:
    """The arrays of one gather → alltoallv → spmm exchange of a v2 program, by role."""

    def __init__(self, rp, pre="fwd"):
        a = rp.arrays
        self.h_ids, self.out_ids = a[f"{pre}.in_ids"], a[f"{pre}.out_ids"]
        self.send_idx, self.halo_ids = a[f"{pre}.1.idx"], a[f"{pre}.2.recv_ids"]
        self.send_counts, self.recv_counts = a[f"{pre}.2.send_counts"], a[f"{pre}.2.recv_counts"]
        self.indptr, self.indices, self.row_ids = a[f"{pre}.3.indptr"], a[f"{pre}.3.indices"], a[f"{pre}.3.row_ids"]
        self.n_rows = self.row_ids.size


def planned_volume(plan, program="forward"):
    """rows q → r summed over the program's alltoallv steps (from the manifest's pairs)."""
    return manifest_volume(plan.manifest, program)


def random_graph(n, m, seed, *, directed, weighted=False, integer=False):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    w = None
    if weighted:
        w = rng.integers(1, 5, m).astype(float) if integer else rng.random(m) + 0.1
    return Graph.from_edges(src, dst, w, n=n, symmetrize=not directed, name=f"rand{seed}")


def graphs():
    yield random_graph(60, 200, 1, directed=True)
    yield random_graph(60, 200, 2, directed=False)
    yield random_graph(80, 400, 3, directed=True, weighted=True)
    yield random_graph(50, 150, 4, directed=False, weighted=True, integer=True)
    # self loops kept, isolated vertices present
    yield Graph.from_edges([0, 1, 2, 3, 3, 7], [0, 2, 1, 3, 5, 2], n=9, name="tiny")


def parts(n, k, seed):
    """A random partition with one part left empty when k > 2."""
    rng = np.random.default_rng(seed)
    part = rng.integers(0, k, n)
    if k > 2:
        part[part == k - 1] = 0  # part k-1 is empty
    return part


# ------------------------------------------------------------------ brute-force oracle (sets)
def oracle_1d(g, part, holder, k):
    """Per rank: (halo ids in (holder, id) order, {dest: sorted ids sent})."""
    A = g.to_scipy().tolil()
    halo, send = {}, {q: {} for q in range(k)}
    for r in range(k):
        need = set()
        for i in range(g.n):
            if part[i] == r:
                need.update(A.rows[i])
        ghost = sorted((j for j in need if holder[j] != r), key=lambda j: (holder[j], j))
        halo[r] = ghost
        for j in ghost:
            send[holder[j]].setdefault(r, []).append(j)
    return halo, send


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_1d_lists_match_brute_force(k):
    for g in graphs():
        part = parts(g.n, k, k)
        plan = build_plan(g, part, k)
        halo, send = oracle_1d(g, part, part, k)
        for r in range(k):
            rp = V(plan[r])
            assert rp.row_ids.tolist() == [v for v in range(g.n) if part[v] == r]
            assert rp.halo_ids.tolist() == halo[r]
            got = rp.h_ids[rp.send_idx].tolist()
            want = [j for d in range(k) for j in send[r].get(d, [])]
            assert got == want
            assert rp.send_counts.tolist() == [len(send[r].get(d, [])) for d in range(k)]
            assert rp.recv_counts.tolist() == [sum(1 for j in halo[r] if part[j] == q) for q in range(k)]


@pytest.mark.parametrize("k", [2, 4, 6])
def test_1d_replay_bitwise_equal_to_scipy(k):
    rng = np.random.default_rng(k)
    for g in graphs():
        part = parts(g.n, k, 10 + k)
        plan = build_plan(g, part, k)
        H = rng.standard_normal((g.n, 3))
        assert np.array_equal(replay(plan, H), g.to_scipy() @ H)
        if not g.is_symmetric():
            G = rng.standard_normal((g.n, 2))
            assert np.array_equal(replay_backward(plan, G), g.to_scipy().T.tocsr() @ G)


@pytest.mark.parametrize("c", [1, 2, 3])
@pytest.mark.parametrize("b", [2, 3, 4])
def test_15d_replay_and_volume(b, c):
    rng = np.random.default_rng(b * 10 + c)
    for g in graphs():
        if g.n < b:
            continue
        part = parts(g.n, b, b + c)
        plan = build_plan(g, part, b * c, layout=f"1.5d:{c}")
        assert plan.p == b * c
        Hi = rng.integers(-5, 6, (g.n, 3)).astype(float)
        ref = g.to_scipy()
        if np.all(ref.data == np.round(ref.data)):
            assert np.array_equal(replay(plan, Hi), ref @ Hi)   # integer sums are exact
        H = rng.standard_normal((g.n, 3))
        np.testing.assert_allclose(replay(plan, H), ref @ H, rtol=1e-12, atol=1e-12)
        # exchange volume = the analyzer's 1.5D volume (independent code path)
        va = analyze_15d(g, part, c).volume     # the analyzer sees max(part) + 1 blocks
        m = va.shape[0]
        vol = planned_volume(plan)
        assert np.array_equal(vol[:m, :m], va) and vol[m:].sum() == 0
        groups = {gr["name"]: gr["ranks"] for gr in plan.manifest["groups"]}
        for rp in plan.ranks:
            i, l = divmod(rp.rank, c)
            assert groups[f"replica.{i}"] == [i * c + x for x in range(c)]
            assert groups[f"col.{l}"] == [x * c + l for x in range(b)]


@pytest.mark.parametrize("R,C", [(1, 2), (2, 2), (2, 3), (3, 1)])
def test_2d_replay_and_volume(R, C):
    rng = np.random.default_rng(R * 7 + C)
    for g in graphs():
        k = R * C
        part = parts(g.n, k, k + 1)
        plan = build_plan(g, part, k, layout=f"2d:{R}x{C}")
        ref = g.to_scipy()
        Hi = rng.integers(-5, 6, (g.n, 2)).astype(float)
        if np.all(ref.data == np.round(ref.data)):
            assert np.array_equal(replay(plan, Hi), ref @ Hi)
        H = rng.standard_normal((g.n, 2))
        np.testing.assert_allclose(replay(plan, H), ref @ H, rtol=1e-12, atol=1e-12)
        assert np.array_equal(planned_volume(plan), analyze_2d(g, part, R, C).volume)
        if plan.manifest["backward"] == "separate":  # the A^T program of the same layout
            G = rng.standard_normal((g.n, 2))
            np.testing.assert_allclose(replay_backward(plan, G), ref.T.tocsr() @ G, rtol=1e-12, atol=1e-12)


def test_2d_nonzero_goes_to_grid_cell_by_brute_force():
    g = random_graph(40, 160, 9, directed=True)
    R, C = 2, 3
    part = parts(g.n, R * C, 3)
    plan = build_plan(g, part, R * C, layout=f"2d:{R}x{C}")
    A = g.to_scipy().tocoo()
    for r, rp in enumerate(map(V, plan.ranks)):
        a, b = divmod(r, C)
        want = {(int(i), int(j)) for i, j in zip(A.row, A.col) if part[i] // C == a and part[j] % C == b}
        cols = np.concatenate([rp.h_ids, rp.halo_ids])
        got = {(int(rp.row_ids[x]), int(cols[y])) for x in range(rp.n_rows)
               for y in rp.indices[rp.indptr[x]:rp.indptr[x + 1]]}
        assert got == want


def test_plan_stats_equal_analyzer():
    for g in graphs():
        part = parts(g.n, 4, 5)
        plan = build_plan(g, part, 4)
        st = analyze(g, part, 4, backward=True)
        assert np.array_equal(planned_volume(plan), st.volume)     # the plan's own count pairs
        load = [V(rp).indices.size for rp in plan.ranks]
        assert load == st.compute_load.tolist()
        assert plan.manifest["stats"]["total_volume"] == st.total_volume
        if plan.manifest["backward"] == "separate":
            assert np.array_equal(planned_volume(plan, "backward"), st.backward.volume)


def test_decoupled_owner_sends_from_owner():
    g = random_graph(60, 300, 11, directed=False)
    k = 3
    part = parts(g.n, k, 1)
    # move each column to the smallest reading part different from part[j], when there is one
    A = g.to_scipy().tocsc()
    owner = part.copy()
    for j in range(g.n):
        readers = sorted({int(part[i]) for i in A.indices[A.indptr[j]:A.indptr[j + 1]]} - {int(part[j])})
        if readers and j % 2:
            owner[j] = readers[0]
    assert np.any(owner != part)
    plan = build_plan(g, part, k, owner=owner)
    assert plan.manifest["ownership"] == "decoupled"
    halo, send = oracle_1d(g, part, owner, k)
    for r in range(k):
        rp = V(plan[r])
        assert rp.h_ids.tolist() == [v for v in range(g.n) if owner[v] == r]
        assert rp.halo_ids.tolist() == halo[r]
        assert rp.h_ids[rp.send_idx].tolist() == [j for d in range(k) for j in send[r].get(d, [])]
    H = np.random.default_rng(0).standard_normal((g.n, 2))
    assert np.array_equal(replay(plan, H), g.to_scipy() @ H)
    G = np.random.default_rng(1).standard_normal((g.n, 2))
    assert np.array_equal(replay_backward(plan, G), g.to_scipy().T.tocsr() @ G)


def test_bad_owner_and_layout_errors():
    g = Graph.from_edges([0, 1, 2], [1, 2, 3], symmetrize=True)   # path 0-1-2-3
    part = np.array([0, 0, 1, 1])
    with pytest.raises(PlanError, match="connectivity set"):
        build_plan(g, part, 3, owner=np.array([2, 0, 1, 1]))       # part 2 never reads column 0
    with pytest.raises(PartplanError, match="unknown layout"):
        build_plan(g, part, layout="3d")
    with pytest.raises(PartplanError, match="has 4 ranks, not 2"):
        build_plan(g, part, 2, layout="2d:2x2")
    with pytest.raises(PartitionError):
        build_plan(g, np.array([0, 1]), 2)
    with pytest.raises(PlanError, match="not planned for layout 2d"):
        build_plan(g, part, 2, layout="2d:1x2", owner=np.array([0, 1, 1, 1]))
    with pytest.raises(PlanError, match="feature width"):
        build_plan(g, part, 2, f=0)


def test_path_graph_by_hand():
    g = Graph.from_edges([0, 1, 2], [1, 2, 3], symmetrize=True)   # path 0-1-2-3
    plan = build_plan(g, np.array([0, 0, 1, 1]))
    r0, r1 = V(plan[0]), V(plan[1])
    assert r0.halo_ids.tolist() == [2] and r1.halo_ids.tolist() == [1]
    assert r0.send_idx.tolist() == [1] and r1.send_idx.tolist() == [0]   # local positions
    assert r0.send_counts.tolist() == [0, 1] and r0.recv_counts.tolist() == [0, 1]
    # rank 0 rows 0: cols {1}; row 1: cols {0, 2} -> local [1], [0, 2] (2 = first halo slot)
    assert r0.indptr.tolist() == [0, 1, 3] and r0.indices.tolist() == [1, 0, 2]
    assert plan.perm.tolist() == [0, 1, 2, 3]


def test_partition_object_is_accepted():
    from partplan.partition.api import partition
    g = random_graph(80, 300, 5, directed=False)
    p = partition(g, 4, model="baseline", backend="block")
    plan = build_plan(g, p)
    assert plan.manifest["backend"] == "block" and plan.manifest["model"] == "baseline"
    assert np.array_equal(plan.part, p.part)
    other = random_graph(80, 300, 6, directed=False)
    with pytest.raises(PlanError, match="another graph"):
        build_plan(other, p)


# ------------------------------------------------------------------ property test (hypothesis)
from hypothesis import given, settings, strategies as st  # noqa: E402


@st.composite
def plan_cases(draw):
    n = draw(st.integers(2, 25))
    m = draw(st.integers(0, 80))
    src = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    dst = draw(st.lists(st.integers(0, n - 1), min_size=m, max_size=m))
    w = draw(st.lists(st.integers(1, 4), min_size=m, max_size=m))
    sym = draw(st.booleans())
    g = Graph.from_edges(np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64),
                         np.array(w, dtype=float), n=n, symmetrize=sym)
    layout = draw(st.sampled_from(["1d", "1.5d", "2d"]))
    if layout == "2d":
        R, C = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        b, lp = R * C, {"R": R, "C": C}
    else:
        b, lp = draw(st.integers(1, 4)), ({"c": draw(st.integers(1, 3))} if layout == "1.5d" else {})
    b = min(b, n) if layout != "2d" else b
    if b > n:
        b, layout, lp = n, "1d", {}
    part = np.array(draw(st.lists(st.integers(0, b - 1), min_size=n, max_size=n)), dtype=np.int64)
    return g, part, b, layout, lp


@settings(max_examples=60, deadline=None)
@given(plan_cases())
def test_property_replay_exact_with_integers(case):
    """Integer weights and integer H: every layout reproduces scipy exactly, and the
    exchange volume equals the analyzer's for that layout."""
    g, part, b, layout, lp = case
    spec = {"1d": "1d", "1.5d": f"1.5d:{lp.get('c')}", "2d": f"2d:{lp.get('R')}x{lp.get('C')}"}[layout]
    ranks = b * lp.get("c", 1)
    plan = build_plan(g, part, ranks, layout=spec)
    H = np.random.default_rng(0).integers(-3, 4, (g.n, 2)).astype(float)
    assert np.array_equal(replay(plan, H), g.to_scipy() @ H)
    if "backward" in plan.manifest["programs"]:
        assert np.array_equal(replay_backward(plan, H), g.to_scipy().T.tocsr() @ H)
    if layout == "1d":
        assert np.array_equal(planned_volume(plan), analyze(g, part, b).volume)
    elif layout == "2d":
        assert np.array_equal(planned_volume(plan), analyze_2d(g, part, lp["R"], lp["C"]).volume)
    else:
        assert planned_volume(plan).sum() == analyze(g, part, b).total_volume
