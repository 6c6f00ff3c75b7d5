"""The graph jobs' kernel table (partplan.runtime.kernels): the torch kernels,
forced onto CPU tensors, against the native numba kernels — the same BFS
parents, levels and edges examined per level on 1d, 2d and routed plans in
every direction, on directed and undirected graphs; PageRank within 1e-12 L1,
identical WCC labels and SSSP distances; the steal hooks — on LocalComm
p = 1, 3, 4 (numpy comm and torch-tensor comm) and gloo p = 2; plus
independent oracles (scipy.sparse.csgraph levels / components / dijkstra,
networkx pagerank) and numpy's packbits for the wire format."""
import socket
from datetime import timedelta

import networkx as nx
import numpy as np
import pytest
import scipy.sparse.csgraph as cg
import torch

from partplan import Graph, PlanError
from partplan.datasets.generators import rmat_edges
from partplan.plan import build_plan
from partplan.runtime import analytics as an
from partplan.runtime import kernels as KT
from partplan.runtime.bfs import BfsEngine
from partplan.runtime.comm import LocalComm
from partplan.runtime.kernels.native import NativeKernels
from partplan.runtime.kernels.torchk import TorchKernels, from_u32, packbits, u32_bytes, unpackbits
from partplan.runtime.steal import Balancer, StealConfig, cost_matrix
from partplan.runtime.traversal import check_layout, rank_graph, traversal_program

BFS_PLANS = (("1d", 1), ("1d", 3), ("1d", 4), ("2d:2x2", 4), ("2d:1x3", 3), ("routed:domain:2", 4))


def rmat_graph(scale, directed, seed):
    s, d = rmat_edges(scale, seed=seed)
    return Graph.from_edges(s, d, n=1 << scale, symmetrize=not directed,
                            self_loops="remove" if not directed else "keep")


def weighted_graph(directed, n=300, m=1200, seed=0):
    rng = np.random.default_rng(seed)
    s, d = rng.integers(0, n - 10, m), rng.integers(0, n - 10, m)  # ids >= n - 10: isolated (dangling)
    return Graph.from_edges(s, d, rng.random(m) + 0.1, n=n, symmetrize=not directed)


def scipy_levels(g, root):
    L = cg.shortest_path(g.to_scipy(), unweighted=True, indices=root)
    return np.where(np.isinf(L), -1, L).astype(np.int64)


def assemble(ids, vals, n, fill=0.0):
    out = np.full(n, fill, dtype=np.asarray(vals[0]).dtype)
    for i, v in zip(ids, vals):
        out[i] = v
    return out


def plan_of(g, p, spec="1d", seed=None):
    part = np.random.default_rng(p if seed is None else seed).integers(0, p, g.n)
    return build_plan(g, part, p, layout=spec)


# ----------------------------------------------------------------------------- the table
def test_the_table_resolves_auto_by_device_and_refuses_native_on_cuda():
    assert KT.CHOICES == ("auto", "torch", "native")
    assert KT.resolve("auto", None) == "native" and KT.resolve("auto", torch.device("cpu")) == "native"
    assert KT.resolve("auto", "cuda:0") == "torch" and KT.resolve("auto", torch.device("cuda", 1)) == "torch"
    assert KT.resolve("torch", None) == "torch" and KT.resolve("native", "cpu") == "native"
    with pytest.raises(PlanError, match="host"):
        KT.resolve("native", "cuda:0")
    with pytest.raises(PlanError, match="kernels must be one of"):
        KT.resolve("gpu", None)
    assert isinstance(KT.make("auto"), NativeKernels)
    k = KT.make("torch")
    assert isinstance(k, TorchKernels) and k.device == torch.device("cpu")
    g = rmat_graph(6, False, 1)
    plan = plan_of(g, 2)
    with pytest.raises(PlanError, match="kernels must be one of"):
        BfsEngine(plan.manifest, plan.ranks, LocalComm(2, plan.groups()), kernels="cuda")
    with pytest.raises(PlanError, match="kernels must be one of"):
        an.wcc_parts(plan.manifest, plan.ranks, LocalComm(2, plan.groups()), kernels="numba")


def test_packbits_and_uint32_bytes_equal_numpys_wire_format():
    rng = np.random.default_rng(0)
    for n in list(range(0, 20)) + [63, 64, 65, 1000]:
        bits = rng.random(n) < 0.3
        got = packbits(torch.from_numpy(bits)).numpy()
        assert got.dtype == np.uint8 and np.array_equal(got, np.packbits(bits)), n
        assert np.array_equal(unpackbits(torch.from_numpy(got), n).numpy(), bits)
    x = np.array([0, 1, 255, 256, 70000, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1], dtype=np.int64)
    b = u32_bytes(torch.from_numpy(x)).numpy()
    assert np.array_equal(b, x.astype(np.uint32).view(np.uint8))
    assert np.array_equal(from_u32(torch.from_numpy(b)).numpy(), x)


def test_check_layout_asks_the_layouts_capabilities():
    g = rmat_graph(7, False, 2)
    assert check_layout(plan_of(g, 2).manifest, ("bfs", "analytics", "stealing")).name == "1d"
    assert check_layout(plan_of(g, 4, "2d:2x2").manifest, ("bfs", "analytics")).fold
    with pytest.raises(PlanError, match="frontier stealing cannot run .* 2d:2x2 .*use a 1d plan"):
        check_layout(plan_of(g, 4, "2d:2x2").manifest, ("analytics", "stealing"))
    with pytest.raises(PlanError, match="routed"):
        check_layout(plan_of(g, 4, "routed:domain:2").manifest, ("analytics", "stealing"))
    with pytest.raises(PlanError, match=r"^SSSP cannot run on this plan: its layout 1.5d:2 .*all-reduce.*--layout 1d"):
        check_layout(build_plan(g, np.arange(g.n) % 2, 4, layout="1.5d:2").manifest, "analytics", job="SSSP")
    with pytest.raises(PlanError, match="unknown layout capability"):
        check_layout(plan_of(g, 2).manifest, "1d")


# ----------------------------------------------------------------------------- level kernels, one block
@pytest.mark.parametrize("directed", [False, True])
def test_each_level_kernel_equals_native_on_random_states(directed):
    """top_down / bottom_up / relax / min_over_rows on every rank's block of a
    3-rank plan, random frontiers and visited sets: identical outputs and edge counts."""
    g = weighted_graph(directed, n=400, m=3000, seed=3)
    plan = plan_of(g, 3)
    prog = traversal_program(plan.manifest)
    N, T = NativeKernels(), TorchKernels()
    rng = np.random.default_rng(1)
    for rp in plan.ranks:
        rg = rank_graph(plan.manifest, rp, prog)
        gv = T.graph(rg)
        for q in (0.0, 0.05, 0.5, 1.0):
            front = rng.random(rg.next_) < q
            visited = rng.random(rg.nl) < q
            cols = np.flatnonzero(front)
            a = N.top_down(rg, cols, visited)
            b = T.top_down(gv, torch.from_numpy(cols), torch.from_numpy(visited))
            assert a[1] == b[1] == int(np.diff(rg.cindptr)[cols].sum())
            assert np.array_equal(np.sort(a[0]), b[0].numpy()) and np.array_equal(a[2], b[2].numpy())
            a = N.bottom_up(rg, front, visited)
            b = T.bottom_up(gv, torch.from_numpy(front), torch.from_numpy(visited))
            assert a[1] == b[1] and np.array_equal(np.sort(a[0]), b[0].numpy()) and np.array_equal(a[2], b[2].numpy())
            dext = np.where(rng.random(rg.next_) < 0.5, rng.random(rg.next_) * 5, np.inf)
            d0 = np.where(rng.random(rg.nl) < 0.5, rng.random(rg.nl) * 5, np.inf)
            da, db = d0.copy(), torch.from_numpy(d0.copy())
            ca, ea = N.relax(rg, cols, dext, da)
            cb, eb = T.relax(gv, torch.from_numpy(cols), torch.from_numpy(dext), db)
            assert ea == eb and np.array_equal(ca, cb.numpy()) and np.array_equal(da, db.numpy())
            lab = rng.integers(0, 1000, rg.next_)
            own = rng.integers(0, 1000, rg.nl)
            assert np.array_equal(N.min_over_rows(rg, lab, own),
                                  T.min_over_rows(gv, torch.from_numpy(lab), torch.from_numpy(own)).numpy())


def test_bottom_up_rounds_and_the_engines_device_path_equal_native():
    """The torch bottom-up scans rows in rounds (BU_CHUNKS: a dense first chunk,
    then longer ones, then the rest): hub rows of hundreds of edges with sparse
    frontiers take every round; and one engine's reused device buffers give the
    native result search after search (1D p = 1 without exchange, p = 3 with)."""
    from partplan.runtime.kernels.torchk import BU_CHUNKS
    g = rmat_graph(10, False, seed=5)
    deg = np.diff(g.indptr)
    assert deg.max() > sum(BU_CHUNKS)
    plan = plan_of(g, 1)
    rg = rank_graph(plan.manifest, plan.ranks[0], traversal_program(plan.manifest))
    N, T = NativeKernels(), TorchKernels()
    gv = T.graph(rg)
    rng = np.random.default_rng(3)
    for q in (0.001, 0.01, 0.1):
        front = rng.random(rg.next_) < q
        visited = rng.random(rg.nl) < 0.2
        a = N.bottom_up(rg, front, visited)
        b = T.bottom_up(gv, torch.from_numpy(front), torch.from_numpy(visited))
        assert a[1] == b[1] and np.array_equal(np.sort(a[0]), b[0].numpy()) and np.array_equal(a[2], b[2].numpy())
    roots = [int(r) for r in np.flatnonzero(deg > 0)[[0, 5, 40]]]
    for p in (1, 3):
        plan = plan_of(g, p)
        for direction in ("auto", "bottom-up"):
            engs = [BfsEngine(plan.manifest, plan.ranks, LocalComm(p, plan.groups(), device=d), kernels=k,
                              direction=direction) for k, d in (("native", None), ("torch", "cpu"))]
            for root in roots + roots[:1]:
                a, b = (e.search(root) for e in engs)
                assert np.array_equal(a.parents, b.parents) and np.array_equal(a.levels, b.levels)
                assert [lv.to_json() | {"time_s": 0} for lv in a.records] == \
                    [lv.to_json() | {"time_s": 0} for lv in b.records]


# ----------------------------------------------------------------------------- BFS engines
@pytest.mark.parametrize("directed", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_bfs_torch_equals_native_on_1d_2d_routed_in_every_direction(directed):
    g = rmat_graph(9, directed, seed=4)
    deg = np.diff(g.indptr)
    roots = [int(r) for r in np.flatnonzero(deg > 0)[[0, 17]]]
    ref = {r: scipy_levels(g, r) for r in roots}
    tree = {}
    for spec, p in BFS_PLANS:
        plan = plan_of(g, p, spec)
        for direction in ("top-down", "bottom-up", "auto"):
            engs = {k: BfsEngine(plan.manifest, plan.ranks, LocalComm(p, plan.groups()), direction=direction,
                                 kernels=k) for k in ("native", "torch")}
            assert engs["torch"].kernels == "torch" and engs["native"].kernels == "native"
            for root in roots:
                a, b = engs["native"].search(root), engs["torch"].search(root)
                assert np.array_equal(b.levels, ref[root]), (spec, direction)
                assert np.array_equal(a.parents, b.parents) and np.array_equal(a.levels, b.levels), (spec, direction)
                tree.setdefault(root, set()).add(b.parents.tobytes())
                assert [lv.direction for lv in a.records] == [lv.direction for lv in b.records]
                assert [lv.edges_examined for lv in a.records] == [lv.edges_examined for lv in b.records]
                # the same wire format: the same bytes per level and rank, all measured by the comm
                assert [lv.bytes_per_rank for lv in a.records] == [lv.bytes_per_rank for lv in b.records]
                assert [lv.mode for lv in a.records] == [lv.mode for lv in b.records]
                assert all(lv.bytes == lv.bytes_measured for lv in b.records)
    assert all(len(t) == 1 for t in tree.values())  # one tree per root: smallest-id parents everywhere


def test_bfs_torch_on_a_tensor_comm_equals_native():
    """LocalComm(device="cpu"): the exchange buffers themselves are torch tensors."""
    g = rmat_graph(9, True, seed=7)
    root = int(np.flatnonzero(np.diff(g.indptr))[5])
    for spec, p in (("1d", 3), ("2d:2x2", 4), ("routed:domain:2", 4)):
        plan = plan_of(g, p, spec)
        a = BfsEngine(plan.manifest, plan.ranks, LocalComm(p, plan.groups())).search(root)
        eng = BfsEngine(plan.manifest, plan.ranks, LocalComm(p, plan.groups(), device="cpu"), kernels="auto")
        assert eng.kernels == "native"  # auto on a CPU device
        eng = BfsEngine(plan.manifest, plan.ranks, LocalComm(p, plan.groups(), device="cpu"), kernels="torch")
        b = eng.search(root)
        assert np.array_equal(a.parents, b.parents) and np.array_equal(b.levels, scipy_levels(g, root))
        assert [lv.bytes for lv in a.records] == [lv.bytes for lv in b.records]
        assert all(lv.bytes == lv.bytes_measured for lv in b.records)


# ----------------------------------------------------------------------------- PageRank, WCC, SSSP
def nx_pagerank(g, tol):
    G = nx.from_scipy_sparse_array(g.to_scipy(), create_using=nx.DiGraph)
    ref = nx.pagerank(G, alpha=0.85, tol=tol)
    return np.array([ref[i] for i in range(g.n)])


@pytest.mark.parametrize("directed", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_analytics_torch_equal_native_and_the_oracles(directed):
    g = weighted_graph(directed, seed=1, m=700)
    pr_ref = nx_pagerank(g, 1e-10)
    nc, cl = cg.connected_components(g.to_scipy(), directed=True, connection="weak")
    first = np.full(nc, g.n)
    np.minimum.at(first, cl, np.arange(g.n))
    wcc_ref = first[cl]  # label = the smallest id of the component
    dj = cg.dijkstra(g.to_scipy(), indices=0)
    for spec, p, dev in (("1d", 1, None), ("1d", 3, None), ("routed:domain:2", 4, None), ("1d", 4, "cpu")):
        plan = plan_of(g, p, spec)
        out = {}
        for k in ("native", "torch"):
            comm = LocalComm(p, plan.groups(), device=dev if k == "torch" else None)
            out[k] = (an.pagerank_parts(plan.manifest, plan.ranks, comm, tol=1e-10, kernels=k),
                      an.wcc_parts(plan.manifest, plan.ranks, comm, kernels=k),
                      an.sssp_parts(plan.manifest, plan.ranks, comm, 0, kernels=k))
        (pa, wa, sa), (pb, wb, sb) = out["native"], out["torch"]
        x_a, x_b = assemble(*pa[:2], g.n), assemble(*pb[:2], g.n)
        assert np.abs(x_a - x_b).sum() <= 1e-12, spec
        assert np.abs(x_b - pr_ref).sum() < 1e-9
        assert [r["iteration"] for r in pa[2]] == [r["iteration"] for r in pb[2]]
        assert all(r["bytes"] == r["bytes_measured"] for r in pb[2])
        la, lb = assemble(*wa[:2], g.n, -1), assemble(*wb[:2], g.n, -1)
        assert lb.dtype == np.int64 and np.array_equal(la, lb) and np.array_equal(lb, wcc_ref)
        assert [(r["changed"], r["bytes"]) for r in wa[2]] == [(r["changed"], r["bytes"]) for r in wb[2]]
        assert all(r["bytes"] == r["bytes_measured"] for r in wb[2])
        da, db = assemble(*sa[:2], g.n), assemble(*sb[:2], g.n)
        assert np.array_equal(da, db)
        assert np.array_equal(np.isinf(db), np.isinf(dj)) and np.allclose(db[np.isfinite(dj)], dj[np.isfinite(dj)],
                                                                            rtol=1e-12, atol=0)
        assert [(r["changed"], r["edges_examined"], r["bytes"]) for r in sa[2]] == \
            [(r["changed"], r["edges_examined"], r["bytes"]) for r in sb[2]]
        assert all(r["bytes"] == r["bytes_measured"] for r in sb[2])


# ----------------------------------------------------------------------------- steal hooks
def test_steal_hooks_torch_equal_native():
    """BFS top-down and SSSP with frontier stealing (hub cache on): the torch
    kernels give the native results, edge counts and steal bytes."""
    p = 3
    g = rmat_graph(10, False, seed=2)
    rng = np.random.default_rng(4)
    part = np.where(rng.random(g.n) < 0.6, 0, rng.integers(0, p, g.n))  # skewed: rank 0 holds most
    plan = build_plan(g, part, p)
    sc = StealConfig(solver="lp", t1=30, t2=10, t4=40, costs=cost_matrix(None, p))
    root = int(np.argmax(np.diff(g.indptr)))
    res = {}
    for k in ("native", "torch"):
        comm = LocalComm(p, plan.groups())
        e = BfsEngine(plan.manifest, plan.ranks, comm, direction="top-down", kernels=k)
        e.balancer = Balancer(comm, e.rgs, g.n, sc)
        res[k] = e.search(root)
    a, b = res["native"], res["torch"]
    assert np.array_equal(a.parents, b.parents) and np.array_equal(b.levels, scipy_levels(g, root))
    ja, jb = [x.to_json() for x in a.records], [x.to_json() for x in b.records]
    assert any(x["steal_triggered"] and x["stolen_edges"] > 0 for x in jb)
    for key in ("edges_examined", "stolen_edges", "steal_bytes", "bytes"):
        assert [x[key] for x in ja] == [x[key] for x in jb], key
    assert all(x["steal_bytes"] == x["steal_bytes_measured"] for x in jb)

    gw = weighted_graph(True, n=400, m=3000, seed=5)
    part = np.where(rng.random(gw.n) < 0.5, 0, rng.integers(0, p, gw.n))
    plan = build_plan(gw, part, p)
    sc = StealConfig(solver="lp", t1=20, t2=10, t4=30, costs=cost_matrix(None, p))
    out = {k: an.sssp_parts(plan.manifest, plan.ranks, LocalComm(p, plan.groups()), 0, steal=sc, kernels=k)
           for k in ("native", "torch")}
    da, db = assemble(*out["native"][:2], gw.n), assemble(*out["torch"][:2], gw.n)
    ref = cg.dijkstra(gw.to_scipy(), indices=0)
    assert np.array_equal(da, db) and np.array_equal(np.isinf(db), np.isinf(ref))
    assert np.allclose(db[np.isfinite(ref)], ref[np.isfinite(ref)], rtol=1e-12, atol=0)
    ra, rb = out["native"][2], out["torch"][2]
    assert any(r["steal_triggered"] and r["stolen_edges"] > 0 for r in rb)
    assert [(r["edges_examined"], r["steal_bytes"]) for r in ra] == [(r["edges_examined"], r["steal_bytes"]) for r in rb]


# ----------------------------------------------------------------------------- gloo p = 2
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gloo_inputs():
    g = rmat_graph(9, True, seed=8)
    gw = weighted_graph(True, seed=2, m=800)
    root = int(np.flatnonzero(np.diff(g.indptr))[3])
    return g, gw, root, plan_of(g, 2), plan_of(g, 2, "2d:1x2"), plan_of(gw, 2)


def _gloo_worker(rank, world, port, out):
    import torch.distributed as dist

    from partplan.runtime.comm import TorchComm
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    try:
        g, gw, root, p1, p2, pw = _gloo_inputs()
        res = {}
        for name, plan, direction in (("bfs1d", p1, "auto"), ("bfs1d_bu", p1, "bottom-up"), ("bfs2d", p2, "auto")):
            e = BfsEngine(plan.manifest, [plan.ranks[rank]], TorchComm(plan.groups(), timeout_s=60),
                          direction=direction, kernels="torch")
            r = e.search(root)
            res[name] = np.stack([r.parents, r.levels])
            res[name + "_edges"] = np.array([lv.edges_examined for lv in r.records])
            res[name + "_bytes"] = np.array([[lv.bytes, lv.bytes_measured] for lv in r.records])
        comm = TorchComm(pw.groups(), timeout_s=60)
        sh = [pw.ranks[rank]]
        for name, (ids, vals, rec) in (("pr", an.pagerank_parts(pw.manifest, sh, comm, tol=1e-10, kernels="torch")),
                                       ("wcc", an.wcc_parts(pw.manifest, sh, comm, kernels="torch")),
                                       ("sssp", an.sssp_parts(pw.manifest, sh, comm, 0, kernels="torch"))):
            res[name + "_ids"], res[name] = ids[0], vals[0]
            res[name + "_bytes"] = np.array([[r["bytes"], r["bytes_measured"]] for r in rec])
        np.savez(f"{out}/r{rank}.npz", **res)
    finally:
        dist.destroy_process_group()


@pytest.mark.dist
@pytest.mark.slow
def test_gloo_p2_torch_kernels_equal_native_local(tmp_path):
    import torch.multiprocessing as mp
    mp.spawn(_gloo_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    got = [np.load(tmp_path / f"r{r}.npz") for r in range(2)]
    g, gw, root, p1, p2, pw = _gloo_inputs()
    for name, plan, direction in (("bfs1d", p1, "auto"), ("bfs1d_bu", p1, "bottom-up"), ("bfs2d", p2, "auto")):
        ref = BfsEngine(plan.manifest, plan.ranks, LocalComm(2, plan.groups()), direction=direction,
                        kernels="native").search(root)
        for z in got:  # every rank gathers the whole tree
            assert np.array_equal(z[name][0], ref.parents) and np.array_equal(z[name][1], ref.levels), name
        assert np.array_equal(ref.levels, scipy_levels(g, root))
        # per-level edges are summed over ranks: the same on both
        assert np.array_equal(got[0][name + "_edges"], [lv.edges_examined for lv in ref.records])
        assert np.array_equal(got[0][name + "_bytes"][:, 0], got[0][name + "_bytes"][:, 1])
        assert np.array_equal(got[0][name + "_bytes"][:, 0], [lv.bytes for lv in ref.records])
    comm = LocalComm(2, pw.groups())
    refs = {"pr": an.pagerank_parts(pw.manifest, pw.ranks, comm, tol=1e-10, kernels="native"),
            "wcc": an.wcc_parts(pw.manifest, pw.ranks, comm, kernels="native"),
            "sssp": an.sssp_parts(pw.manifest, pw.ranks, comm, 0, kernels="native")}
    for name, (ids, vals, rec) in refs.items():
        a = assemble(ids, vals, gw.n)
        b = assemble([z[name + "_ids"] for z in got], [z[name] for z in got], gw.n)
        if name == "pr":
            assert np.abs(a - b).sum() <= 1e-12
        else:
            assert np.array_equal(a, b), name
        assert np.array_equal(got[0][name + "_bytes"][:, 0], got[0][name + "_bytes"][:, 1])
        assert np.array_equal(got[0][name + "_bytes"][:, 0], [r["bytes"] for r in rec])


def test_monotonic_reads_the_clock_of_perf_counter():
    """The kernels' deadlines are perf_counter() seconds: the compiled clock read must fall between
    two perf_counter() reads around it (a different clock, or a wrong struct layout, would not)."""
    import time

    from partplan._kernels import monotonic

    monotonic()                      # the first call may load the kernel
    for _ in range(5):
        a = time.perf_counter()
        m = monotonic()
        b = time.perf_counter()
        assert a <= m <= b
