"""The torch kernels' shape for a GPU, checked on the CPU: per BFS level at most
one device → host copy (1D, 2D, routed) and a number of
dispatched kernels that does not grow with the graph; per PageRank iteration one copy; a GCN epoch's forward and
backward with none. Counted by partplan.runtime.opcount (a TorchDispatchMode
plus a TorchFunctionMode: every aten operator dispatched, and every call that
on CUDA would make the host wait). Results against independent oracles:
scipy.sparse.csgraph levels, Graph500's validator rules (partplan's
BfsValidator implements the five checks; networkx checks the tree edges),
networkx PageRank."""
import networkx as nx
import numpy as np
import pytest
import scipy.sparse.csgraph as cg
import torch

from partplan import Graph
from partplan.datasets.generators import rmat_edges
from partplan.plan import build_plan
from partplan.runtime.bfs import BfsEngine
from partplan.runtime.comm import LocalComm
from partplan.runtime.opcount import OpCounter

#: dispatched kernels per BFS level: at most KERNELS_RANK per local rank plus KERNELS_PEER
#: per (local rank, peer) of the exchange — constants of the code, not of the graph
KERNELS_RANK, KERNELS_PEER = 100, 40
#: a 2D level's rank does more alone (the block kernel, the owners' minimum, the fold's figures): per rank
KERNELS_RANK_2D = 160


def rmat_graph(scale, seed=1):
    s, d = rmat_edges(scale, seed=seed)
    return Graph.from_edges(s, d, n=1 << scale, symmetrize=True, self_loops="remove")


def scipy_levels(g, root):
    L = cg.shortest_path(g.to_scipy(), unweighted=True, indices=root)
    return np.where(np.isinf(L), -1, L).astype(np.int64)


def counted_search(eng, root):
    c = OpCounter()
    eng.level_hook = lambda depth, what: c.mark((depth, what))
    with c:
        res = eng.search(root)
    eng.level_hook = None
    levels = [s for s in c.sections if s.label[1] != "done"]
    assert len(levels) == len(res.records)
    return res, levels


def check_tree(g, root, res):
    """Graph500's rules on the parents, from the graph alone: the root is its own
    parent, every tree edge is a graph edge joining levels d and d + 1, the
    tree covers exactly the root's component (networkx)."""
    G = nx.from_scipy_sparse_array(g.to_scipy())
    G.remove_edges_from(nx.selfloop_edges(G))
    comp = nx.node_connected_component(G, root)
    par = res.parents
    assert par[root] == root
    assert set(np.flatnonzero(par >= 0).tolist()) == comp
    for v in comp - {root}:
        assert G.has_edge(int(par[v]), v) and res.levels[v] == res.levels[par[v]] + 1


@pytest.mark.parametrize("p,spec", [(1, "1d"), (3, "1d")])
def test_bfs_one_sync_per_level_and_a_bounded_number_of_kernels(p, spec):
    worst = {}
    for scale in (8, 11):
        g = rmat_graph(scale)
        plan = build_plan(g, np.random.default_rng(p).integers(0, p, g.n), p, layout=spec)
        roots = [int(r) for r in np.flatnonzero(np.diff(g.indptr))[[0, 7]]]
        for direction in ("auto", "top-down", "bottom-up"):
            eng = BfsEngine(plan.manifest, plan.ranks, LocalComm(p, plan.groups(), device="cpu"), kernels="torch",
                            direction=direction)
            for root in roots:
                res, levels = counted_search(eng, root)
                assert np.array_equal(res.levels, scipy_levels(g, root))
                check_tree(g, root, res)
                for s in levels:
                    assert len(s.syncs) <= 1, (scale, direction, s.label, s.syncs)
                    assert s.kernels <= KERNELS_RANK * p + KERNELS_PEER * p * (p - 1), (scale, s.label, s.kernels)
                worst[scale] = max(worst.get(scale, 0), max(s.kernels for s in levels))
    # the kernel count of a level is a property of the code path, not of n or the degrees: one rank runs
    # the same launches at any scale (every bottom-up round fires at both); with peers the count depends on
    # which peers send and in which mode (sparse / dense), within the stated bound at every scale
    if p == 1:
        assert worst[11] == worst[8], worst


@pytest.mark.parametrize("spec", ["routed:domain:2", "routed:source:2"])
def test_routed_bfs_one_copy_per_level(spec):
    """A routed plan's exchange is a chain (owner → monitor → monitor → readers):
    the first step's counts ride on the level's copy; what each later step
    forwards is counted by the owners of the rows (per (step, sender, peer)
    slot) in the same copy and summed by the level's world sum — one copy per
    level, the same bytes as the native kernels."""
    g = rmat_graph(9)
    plan = build_plan(g, np.random.default_rng(0).integers(0, 4, g.n), 4, layout=spec)
    root = int(np.flatnonzero(np.diff(g.indptr))[2])
    for direction in ("auto", "top-down", "bottom-up"):
        eng = BfsEngine(plan.manifest, plan.ranks, LocalComm(4, plan.groups(), device="cpu"), kernels="torch",
                        direction=direction)
        assert len(eng.rgs[0].steps) >= 2
        res, levels = counted_search(eng, root)
        assert np.array_equal(res.levels, scipy_levels(g, root))
        check_tree(g, root, res)
        assert all(len(s.syncs) <= 1 for s in levels), [s.syncs for s in levels]
        ref = BfsEngine(plan.manifest, plan.ranks, LocalComm(4, plan.groups()), kernels="native",
                        direction=direction).search(root)
        assert [lv.bytes_per_rank for lv in res.records] == [lv.bytes_per_rank for lv in ref.records]
        assert all(lv.bytes == lv.bytes_measured for lv in res.records)


@pytest.mark.parametrize("spec,R,C", [("2d:2x2", 2, 2), ("2d:1x3", 1, 3)])
def test_2d_bfs_one_copy_per_level_and_a_bounded_number_of_kernels(spec, R, C):
    """A 2D level makes the expand (grid column), before bottom-up the visited
    sync and then the fold (grid row): the first two are sized by the last
    level's copy, the fold too (per pair a bitmap over the rows the holder may
    still propose, then the candidate ids of the last fold's flags) — one copy per level,
    whatever the direction. The kernels: a fixed number
    per local rank plus per (rank, peer) of the three exchanges — the same
    bound at every scale. Bottom-up sizes are exact (the senders of the visited
    sync count what it removes from each receiver): no padded work."""
    from partplan.runtime.kernels import torchk
    p = R * C
    bound = KERNELS_RANK_2D * p + KERNELS_PEER * p * ((R - 1) + 2 * (C - 1))
    worst = {}
    for scale in (7, 10):
        g = rmat_graph(scale)
        plan = build_plan(g, np.random.default_rng(p).integers(0, p, g.n), p, layout=spec)
        roots = [int(r) for r in np.flatnonzero(np.diff(g.indptr))[[0, 7]]]
        for direction in ("auto", "top-down", "bottom-up"):
            eng = BfsEngine(plan.manifest, plan.ranks, LocalComm(p, plan.groups(), device="cpu"), kernels="torch",
                            direction=direction)
            calls = []
            orig = eng.X.bottom_up_b

            def exact(gv, front, skip, sizes, best):
                rl = (gv.indptr[1:] - gv.indptr[:-1])[~skip]
                want = [int((~skip).sum())]
                for lo, c in torchk.bu_rounds():
                    e = (rl - lo).clamp(min=0) if c is None else (rl - lo).clamp(min=0, max=c)
                    want += [int((rl > lo).sum()), int(e.sum())]
                calls.append(tuple(sizes) == tuple(want))
                return orig(gv, front, skip, sizes, best)
            for root in roots:
                res, levels = counted_search(eng, root)
                assert np.array_equal(res.levels, scipy_levels(g, root))
                check_tree(g, root, res)
                for s in levels:
                    assert len(s.syncs) <= 1, (scale, direction, s.label, s.syncs)
                    assert s.kernels <= bound, (scale, s.label, s.kernels, bound)
                worst[scale] = max(worst.get(scale, 0), max(s.kernels for s in levels))
            if direction == "bottom-up":  # the sizes the host hands the bottom-up kernel (checked uncounted)
                eng.X.bottom_up_b = exact
                eng.search(roots[0])
                assert calls and all(calls)
    assert max(worst.values()) <= bound, worst


def test_2d_bfs_on_an_r_by_1_grid_one_copy_per_level():
    """R × 1: the grid row has no peer, no fold and no sync — one copy per level, as 1D."""
    g = rmat_graph(8)
    plan = build_plan(g, np.random.default_rng(3).integers(0, 3, g.n), 3, layout="2d:3x1")
    eng = BfsEngine(plan.manifest, plan.ranks, LocalComm(3, plan.groups(), device="cpu"), kernels="torch")
    root = int(np.flatnonzero(np.diff(g.indptr))[0])
    res, levels = counted_search(eng, root)
    assert np.array_equal(res.levels, scipy_levels(g, root))
    assert all(len(s.syncs) <= 1 for s in levels), [s.syncs for s in levels]


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gloo_plans():
    g = rmat_graph(9, seed=5)
    root = int(np.flatnonzero(np.diff(g.indptr))[1])
    part = np.random.default_rng(4).integers(0, 4, g.n)
    return g, root, {spec: build_plan(g, part, 4, layout=spec) for spec in ("2d:2x2", "routed:domain:2")}


def _gloo_worker(rank, world, port, out):
    import torch.distributed as dist

    from partplan.runtime.comm import TorchComm
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        g, root, plans = _gloo_plans()
        res = {}
        for spec, plan in plans.items():
            for direction in ("auto", "bottom-up"):
                r = BfsEngine(plan.manifest, [plan.ranks[rank]], TorchComm(plan.groups(), timeout_s=60),
                              direction=direction, kernels="torch").search(root)
                key = f"{spec}_{direction}"
                res[key] = np.stack([r.parents, r.levels])
                res[key + "_bytes"] = np.array([[lv.bytes, lv.bytes_measured] for lv in r.records])
        np.savez(f"{out}/r{rank}.npz", **res)
    finally:
        dist.destroy_process_group()


@pytest.mark.dist
@pytest.mark.slow
def test_gloo_p4_2d_and_routed_torch_bfs_equal_native(tmp_path):
    """Over gloo (TorchComm, one rank per process), the 2D fold's carried sizes and
    the routed chain's owner-counted later steps (set up by reverse exchanges of
    the chain) give the native kernels' tree, levels and bytes."""
    import torch.multiprocessing as mp
    mp.spawn(_gloo_worker, args=(4, _free_port(), str(tmp_path)), nprocs=4, join=True)
    got = [np.load(tmp_path / f"r{r}.npz") for r in range(4)]
    g, root, plans = _gloo_plans()
    for spec, plan in plans.items():
        for direction in ("auto", "bottom-up"):
            ref = BfsEngine(plan.manifest, plan.ranks, LocalComm(4, plan.groups()), direction=direction,
                            kernels="native").search(root)
            key = f"{spec}_{direction}"
            for z in got:
                assert np.array_equal(z[key][0], ref.parents) and np.array_equal(z[key][1], ref.levels), key
            b = got[0][key + "_bytes"]  # rank 0's record: the world's figures
            assert np.array_equal(b[:, 0], b[:, 1]) and np.array_equal(b[:, 0], [lv.bytes for lv in ref.records])
    assert np.array_equal(ref.levels, scipy_levels(g, root))


def test_pagerank_one_copy_per_iteration():
    from partplan.runtime import interpreter as I
    from partplan.runtime.analytics import pagerank_parts
    g = rmat_graph(8)
    G = nx.from_scipy_sparse_array(g.to_scipy(), create_using=nx.DiGraph)
    ref = nx.pagerank(G, alpha=0.85, tol=1e-10)
    ref = np.array([ref[i] for i in range(g.n)])
    per = {}
    for p in (1, 2):
        plan = build_plan(g, np.random.default_rng(p).integers(0, p, g.n), p)
        c = OpCounter()
        orig = I.Executor.run

        def run(self, *a, **k):
            c.mark("iteration")
            return orig(self, *a, **k)
        I.Executor.run = run
        try:
            with c:
                ids, x, rec = pagerank_parts(plan.manifest, plan.ranks, LocalComm(p, plan.groups(), device="cpu"),
                                             kernels="torch", tol=1e-10)
        finally:
            I.Executor.run = orig
        its = c.sections[1:-1]  # [0]: the out-weights (A·1); [-1]: the last iteration and the result copy
        assert len(its) == len(rec) - 1
        assert all(len(s.syncs) == 1 for s in its), [s.syncs for s in its]
        per[p] = max(s.kernels for s in its)
        got = np.zeros(g.n)
        for i, v in zip(ids, x):
            got[i] = v
        assert np.abs(got - ref).sum() < 1e-7
    assert per[2] <= 2 * per[1] + 6


def test_gcn_epoch_forward_backward_has_no_sync():
    from partplan.nn.gcn import DistGCN, PlanExchange
    from partplan.runtime.spmm import local_executor
    g = rmat_graph(8)
    for p in (1, 2):
        plan = build_plan(g, np.random.default_rng(p).integers(0, p, g.n), p)
        ex = local_executor(plan, dtype="float64", device="cpu", kernels="torch")
        xchg = PlanExchange(ex, phase_times=False)
        model = DistGCN(8, 16, 3, layers=3, dropout=0.0, seed=0, dtype=torch.float64)
        X = torch.randn(g.n, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        ids = [np.asarray(rp.in_ids("forward")) for rp in plan.ranks]
        ax = model.precompute(xchg, [X[i] for i in ids])
        y = torch.randint(0, 3, (g.n,), generator=torch.Generator().manual_seed(1))
        with OpCounter() as c:
            c.mark("epoch")
            out = model(xchg, ax, ids)
            loss = sum(torch.nn.functional.cross_entropy(o, y[i], reduction="sum") for o, i in zip(out, ids))
            loss.backward()
        assert c.sections[0].syncs == [], c.sections[0].syncs
        assert c.sections[0].kernels < 400


def test_opcount_flags_the_syncing_calls():
    a = torch.arange(10)
    with OpCounter() as c:
        c.mark("nonzero")
        torch.nonzero(a > 3)
        c.mark("static")
        torch.nonzero_static(a > 3, size=6)
        torch.repeat_interleave(a, a, output_size=45)
        c.mark("bool index")
        a[a > 3]
        c.mark("copies")
        a.sum().item()
        a.tolist()
        int(a[0])
        c.mark("unique")
        torch.unique(a)
        c.mark("repeat")
        torch.repeat_interleave(a, a)
    got = {s.label: s.syncs for s in c.sections}
    assert got["nonzero"] == ["aten::nonzero"] and got["static"] == []
    assert got["bool index"] == ["aten::index(bool)"]
    assert got["copies"] == ["item", "tolist", "__int__"]
    assert got["unique"] and got["repeat"]


def test_captured_is_the_step_itself_on_the_cpu():
    from partplan.runtime.capture import Captured
    x = torch.zeros(3)

    def body():
        x.add_(1)
    step = Captured(body, "cpu", state=[x], outputs=lambda: [x])
    for _ in range(3):
        step()
    assert not step.captured and step.reason == "eager on cpu"
    assert x.tolist() == [3.0, 3.0, 3.0]


def test_captured_epoch_is_the_eager_epoch_on_the_cpu():
    """On the CPU the captured epoch runs eagerly: the same losses as the plain loop."""
    from partplan.nn.gcn import DistGCN, PlanExchange, captured_epoch
    from partplan.runtime.spmm import local_executor
    g = rmat_graph(7)
    plan = build_plan(g, np.zeros(g.n, dtype=np.int64), 1)
    X = torch.randn(g.n, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    y = torch.randint(0, 3, (g.n,), generator=torch.Generator().manual_seed(1))
    ids = [np.arange(g.n)]
    losses = []
    for captured in (False, True):
        xchg = PlanExchange(local_executor(plan, dtype="float64", device="cpu", kernels="torch"))
        model = DistGCN(8, 16, 3, layers=2, dropout=0.0, seed=0, dtype=torch.float64)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        ax = model.precompute(xchg, [X])
        if captured:
            step = captured_epoch(model, xchg, ax, ids, [y], opt)
            losses.append([float(step()) for _ in range(4)])
            assert not step.cap.captured
        else:
            out = []
            for _ in range(4):
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(xchg, ax, ids)[0], y)
                loss.backward()
                opt.step()
                out.append(float(loss))
            losses.append(out)
    assert losses[0] == losses[1]


def test_small_collectives_of_a_cpu_comm_run_where_the_process_group_can(monkeypatch):
    """Under init_process_group("nccl") the default group has no CPU backend: a CPU comm's counts,
    checks and start-up flags (Halo, DistSpMM and NeighborLoader build on the CPU by default) go on
    the current GPU; under "cpu:gloo,cuda:nccl", gloo or without a GPU they stay on the CPU. (An
    audit read this path: a plain NCCL group raised "No backend type associated with device type
    cpu" at the first start-up check.)"""
    import torch
    import torch.distributed as dist

    from partplan.runtime.comm import collective_device
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    for config, want in (("cuda:nccl", torch.device("cuda", 1)), ("cpu:gloo,cuda:nccl", torch.device("cpu")),
                         ("cpu:gloo,cuda:gloo", torch.device("cpu"))):
        monkeypatch.setattr(dist, "get_backend_config", lambda c=config: c)
        assert collective_device("cpu") == want, config
        assert collective_device("cuda:0") == torch.device("cuda", 0)     # a GPU comm keeps its device
    monkeypatch.setattr(dist, "get_backend_config", lambda: "cuda:nccl")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert collective_device("cpu") == torch.device("cpu")


def test_the_probe_reads_its_clock_with_the_gpu_synchronized(monkeypatch):
    """NCCL's send and recv return once queued: the probe's round trip on a GPU buffer is timed
    between device synchronizations (else it measured the launch, from a code review); a CPU
    buffer is timed as it was."""
    from types import SimpleNamespace

    from partplan.runtime.probe import _pingpong
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: calls.append("sync"))
    dist = SimpleNamespace(send=lambda buf, dst: calls.append("send"), recv=lambda buf, src: calls.append("recv"))
    gpu = SimpleNamespace(device=torch.device("cuda", 0))
    _pingpong(dist, torch, gpu, 0, 0, 1, repeat=2)
    assert calls == ["sync", "send", "recv", "sync"] * 3
    calls.clear()
    _pingpong(dist, torch, torch.zeros(2), 1, 0, 1, repeat=1)     # the echoing rank: no clock, no sync
    _pingpong(dist, torch, torch.zeros(2), 0, 0, 1, repeat=1)
    assert calls == ["recv", "send"] * 2 + ["send", "recv"] * 2


def test_a_gpu_index_past_the_machines_gpus_is_refused(monkeypatch):
    """check_device (Halo, LocalHalo, run spmm) took "cuda:7" on a one-GPU machine (a review)."""
    from partplan.errors import PlanError
    from partplan.runtime.spmm import check_device
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert check_device("cuda:0") == "cuda:0" and check_device("cuda") == "cuda"
    with pytest.raises(PlanError, match=r"1 CUDA GPU\(s\), cuda:0 to cuda:0"):
        check_device("cuda:7")
