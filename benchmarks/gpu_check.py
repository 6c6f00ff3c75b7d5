#!/usr/bin/env python
"""The runtime on a machine with a GPU (run it whenever one is lent; commit the JSON under docs/results/).

Sections (each one records its own error instead of stopping the others):

* ``spmm_kernel`` — local SpMM GF/s, torch CSR on CUDA vs scipy on the host CPU.
* ``jobs_p1_nccl`` — every job (SpMM, BFS in each direction, PageRank, WCC by
  propagation and by pointer jumping, SSSP, label propagation, matching) on one NCCL rank with torch kernels on the GPU, against the CPU's
  native answers (LocalComm, numpy, numba).
* ``jobs_p4_local_gpu`` — the same jobs with 4 ranks in one process on the GPU
  (LocalComm on CUDA tensors: NCCL refuses two ranks on one GPU) on 1d, 2d and
  routed plans, against the CPU's answers.
* ``graph500`` — Kronecker scale ``--scale`` (default 20), p = 1: TEPS of the
  torch kernels on the GPU vs the native kernels on the host CPU vs NetworKit's
  BFS, same roots, harmonic means; GPU parents checked by Graph500's validator.
* ``gcn`` — DistGCN epoch (forward, loss, backward, Adam step) on the GPU vs
  ``torch_geometric.nn.GCNConv`` with the same sizes on the same GPU; losses vs
  the CPU run.
* ``gat_halo`` — a 2-layer PyG ``GATConv`` model through ``partplan.nn.LocalHalo`` (4 ranks of a
  1D plan on one GPU) vs single-GPU PyG on the whole graph: logits and gradients (float64), bytes
  sent vs predicted, epoch time (float32).
* ``throughput`` — the figures against their bandwidth floor, printed as a table
  (stderr) and kept in the JSON: Graph500 BFS GTEPS (torch kernels, p = 1,
  scale ``--scale``), PageRank edges/s per iteration and GCN epoch ms (each
  through its captured path on CUDA: one CUDA graph per iteration / epoch).
  Each floor is the bytes the kernel must move at minimum (formulas in
  :data:`FLOORS`) ÷ the memory bandwidth: ``--bandwidth-gbs``, else a known
  device's (H100 3350 GB/s, H200 4800 GB/s), else measured by a large copy on
  the device. ``--device cpu`` runs the table on the CPU with a measured
  bandwidth; without a GPU and without ``--device cpu`` the script says so and
  runs nothing.
* ``exchange_cpu`` — on the host's CPU cores over gloo: executor exchange vs a
  bare ``all_to_all_single`` by the same protocol (p = 4, f = 16 and 128), the
  α-β prediction, and the step with overlap vs in order (p = 2, f = 256; a
  METIS partition from ``--partitions DIR`` — ``email-Enron-P.npy``, made where
  the partitioners are installed — and contiguous row blocks of R-MAT 16, a
  high-volume case). LocalComm's exchange is synchronous, so overlap is measured
  on gloo only; NCCL with several ranks needs several GPUs.

Prints one JSON document (``--out FILE`` writes it too).
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from partplan.bench.script import run  # noqa: E402
from partplan.jobs.args import nonneg_int, positive_int  # noqa: E402


DEV, DEV0 = "cuda", "cuda:0"  # --device cpu: a dry run of every section on the CPU


def sync():
    import torch
    if DEV.startswith("cuda"):
        torch.cuda.synchronize()


def med(fn, repeat=9, sync=None):
    fn()
    ts = []
    for _ in range(repeat):
        if sync:
            sync()
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def section(out, name, fn):
    t0 = time.perf_counter()
    try:
        out[name] = fn()
    except Exception as exc:  # one section's failure must not cost the others
        out[name] = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-3000:]}
    print(f"[{name}] {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)


def block_part(n, k):
    return (np.arange(n, dtype=np.int64) * k) // max(n, 1)


def load_part(args, name, g, k):
    p = Path(args.partitions or "") / f"{name}-{k}.npy"
    if args.partitions and p.is_file():
        return np.load(p), "file (metis)"
    return block_part(g.n, k), "block"


# ----------------------------------------------------------------------------- jobs on one plan
def run_jobs(plan, comm_factory, kernels, *, roots):
    """Every job on ``plan``, each on a fresh comm from ``comm_factory()``: results in vertex order (numpy)."""

    def inputs():  # a fresh comm and the shards of its local ranks
        comm = comm_factory()
        return [plan.ranks[r] for r in comm.local], comm
    from partplan.runtime.analytics import pagerank_parts, sssp_parts, wcc_parts
    from partplan.runtime.lp import lp_parts
    from partplan.runtime.matching import matching_parts
    from partplan.runtime.pointer_jump import wcc_pointer_jump_parts
    from partplan.layouts import layout_from_manifest
    from partplan.runtime.bfs import BfsEngine
    m = plan.manifest
    n = m["graph"]["n"]
    res = {}
    lay = layout_from_manifest(plan.manifest)
    for direction in ("top-down", "bottom-up", "auto"):
        eng = BfsEngine(m, *inputs(), direction=direction, kernels=kernels)
        eng.search(int(roots[0]))
        t, out = [], []
        for r in roots:
            s = eng.search(int(r))
            t.append(s.time_s)
            out.append((s.parents, s.levels))
        res[f"bfs_{direction}"] = out
        res[f"bfs_{direction}_s"] = float(np.median(t))
    if lay.analytics:
        def full(ids, vals, fill):
            x = np.full(n, fill)
            for i, v in zip(ids, vals):
                x[np.asarray(i)] = np.asarray(v)
            return x
        ids, x, _ = pagerank_parts(m, *inputs(), kernels=kernels)
        res["pagerank"] = full(ids, x, np.nan)
        ids, lab, _ = wcc_parts(m, *inputs(), kernels=kernels)
        res["wcc"] = full(ids, lab, -1)
        ids, d, _ = sssp_parts(m, *inputs(), int(roots[0]), kernels=kernels)
        res["sssp"] = full(ids, d, np.nan)
    if lay.analytics or lay.fold:
        def full(ids, vals, fill):
            x = np.full(n, fill)
            for i, v in zip(ids, vals):
                x[np.asarray(i)] = np.asarray(v)
            return x
        # the comm factories carry a world group (with_world): pointer jumping's owner messages
        todo = [("wcc_pointer_jump", lambda: wcc_pointer_jump_parts(m, *inputs(), kernels=kernels))]
        if lay.analytics or m["graph"]["symmetric"]:  # 2D label propagation takes symmetric graphs
            todo.append(("lp", lambda: lp_parts(m, *inputs(), iterations=20, kernels=kernels)))
        if lay.analytics or m["graph"]["symmetric"]:  # 2D matching takes symmetric graphs too
            todo.append(("matching", lambda: matching_parts(m, *inputs(), kernels=kernels)))
        for name, fn in todo:
            fn()  # warm-up
            sync()
            t0 = time.perf_counter()
            out = fn()
            sync()
            res[f"{name}_s"] = time.perf_counter() - t0
            res[name] = full(out[0], out[1], -1)
            res[f"{name}_rounds"] = len(out[-1])
            res[f"{name}_bytes_match"] = all(r["bytes"] == r["bytes_measured"] for r in out[-1])
    return res


def compare_jobs(ref, got):
    out = {}
    for k, v in ref.items():
        if k.endswith("_s"):
            continue
        g = got.get(k)
        if k.endswith("_rounds"):
            out[k] = {"cpu": v, "gpu": g}
        elif k.endswith("_bytes_match"):
            out[k] = bool(v and g)
        elif k.startswith("bfs_"):
            out[k + "_equal"] = all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(v, g))
        elif k == "pagerank":
            out["pagerank_l1"] = float(np.abs(v - g).sum())
        else:
            out[k + "_equal"] = bool(np.array_equal(v, g))
    return out


def spmm_check(plan, ex, H, device):
    import torch
    A = None
    xs = [ex.ops.from_numpy(H[rp.in_ids("forward")]) for rp in plan.ranks if rp.rank in ex.comm.local]
    outs = ex.run("forward", xs)
    sync()
    Z = np.zeros_like(H)
    for rp, z in zip([plan.ranks[r] for r in ex.comm.local], outs):
        if rp.writes_output("forward"):
            Z[rp.out_ids("forward")] = ex.ops.to_numpy(z)
    return Z


def jobs_p1_nccl(args, graphs):
    import torch
    import torch.distributed as dist
    from partplan.plan import build_plan
    from partplan.program.plan import manifest_groups
    from partplan.runtime.comm import LocalComm, TorchComm
    from partplan.runtime.interpreter import Executor
    from partplan.runtime.neighbours import with_world
    from partplan.runtime.ops import TorchOps
    g = graphs["email-Enron"]
    plan = build_plan(g, np.zeros(g.n, dtype=np.int64), 1)
    roots = np.random.default_rng(0).choice(g.n, 4, replace=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    if DEV.startswith("cuda"):
        torch.cuda.set_device(0)
        dist.init_process_group("cpu:gloo,cuda:nccl", init_method="env://", rank=0, world_size=1,
                                device_id=torch.device(DEV0))
    else:
        dist.init_process_group("gloo", init_method="env://", rank=0, world_size=1)
    try:
        ref = run_jobs(plan, lambda: LocalComm(1, with_world(plan.groups(), 1)), "native", roots=roots)
        got = run_jobs(plan, lambda: TorchComm(with_world(manifest_groups(plan.manifest), 1), device=DEV0), "torch",
                       roots=roots)
        out = compare_jobs(ref, got)
        out.update({f"{k}_gpu": v for k, v in got.items() if k.endswith("_s")})
        out.update({f"{k}_cpu": v for k, v in ref.items() if k.endswith("_s")})
        H = np.random.default_rng(1).standard_normal((g.n, 32))
        ex = Executor(plan.manifest, plan.ranks, TorchComm(manifest_groups(plan.manifest), device=DEV0),
                      TorchOps("float64", DEV0, "torch"))
        Z = spmm_check(plan, ex, H, DEV0)
        ref_Z = g.to_scipy() @ H
        out["spmm_max_rel_err"] = float(np.abs(Z - ref_Z).max() / max(np.abs(ref_Z).max(), 1e-300))
        return out
    finally:
        dist.destroy_process_group()


def jobs_p4_local_gpu(args, graphs):
    from partplan.layouts import parse_layout
    from partplan.plan import build_plan
    from partplan.runtime.comm import LocalComm
    from partplan.runtime.neighbours import with_world
    from partplan.runtime.spmm import local_executor
    g = graphs["email-Enron"]
    roots = np.random.default_rng(0).choice(g.n, 4, replace=False)
    out = {}
    for spec in ("1d", "2d:2x2", "routed:domain:2"):
        lay = parse_layout(spec, 4)
        part, how = load_part(args, "email-Enron", g, lay.row_blocks)
        plan = build_plan(g, part, 4, layout=lay)
        ref = run_jobs(plan, lambda: LocalComm(4, with_world(plan.groups(), 4)), "native", roots=roots)
        got = run_jobs(plan, lambda: LocalComm(4, with_world(plan.groups(), 4), device=DEV), "torch", roots=roots)
        r = compare_jobs(ref, got)
        r.update({f"{k}_gpu": v for k, v in got.items() if k.endswith("_s")})
        r.update({f"{k}_cpu": v for k, v in ref.items() if k.endswith("_s")})
        H = np.random.default_rng(1).standard_normal((g.n, 32))
        ex = local_executor(plan, dtype="float64", device=DEV, kernels="torch")
        Z = spmm_check(plan, ex, H, "cuda")
        ref_Z = g.to_scipy() @ H
        r["spmm_max_rel_err"] = float(np.abs(Z - ref_Z).max() / max(np.abs(ref_Z).max(), 1e-300))
        r["partition"] = how
        out[spec] = r
    return out


# ----------------------------------------------------------------------------- Graph500
def graph500(args):
    from partplan import Graph
    from partplan.datasets.generators import rmat_edges
    from partplan.plan import build_plan
    from partplan.runtime.bfs import BfsEngine
    from partplan.runtime.comm import LocalComm
    from partplan.runtime.graph500 import BfsValidator, search_keys, teps_stats
    t0 = time.perf_counter()
    src, dst = rmat_edges(args.scale, 16, seed=0)
    g = Graph.from_edges(src, dst, n=1 << args.scale, symmetrize=True, self_loops="remove")
    plan = build_plan(g, np.zeros(g.n, dtype=np.int64), 1)
    setup_s = time.perf_counter() - t0
    roots = search_keys(src, dst, g.n, args.roots, 0)
    val = BfsValidator(src, dst, g.n, directed=False)
    out = {"scale": args.scale, "n": g.n, "nnz": g.nnz, "roots": int(roots.size), "setup_s": setup_s}
    runs = {}
    for name, comm, kern in (("torch_gpu", LocalComm(1, plan.groups(), device=DEV), "torch"),
                             ("native_cpu", LocalComm(1, plan.groups()), "native")):
        eng = BfsEngine(plan.manifest, plan.ranks, comm, kernels=kern)
        eng.search(int(roots[0]))  # untimed warm-up (compiles, allocations)
        runs[name] = [eng.search(int(r)) for r in roots]
    # TEPS edge counts from Graph500's validator on the GPU's trees (all five checks)
    checks = [val.check(int(r), res.parents, levels=res.levels) for r, res in zip(roots, runs["torch_gpu"])]
    nedge = [v.nedge for v in checks]
    out["gpu_all_valid"] = all(v.ok for v in checks)
    out["gpu_parents_equal_cpu"] = all(np.array_equal(a.parents, b.parents) and np.array_equal(a.levels, b.levels)
                                       for a, b in zip(runs["torch_gpu"], runs["native_cpu"]))
    for name, rs in runs.items():
        out[name] = {**teps_stats(nedge, [r.time_s for r in rs]), "median_s": float(np.median([r.time_s for r in rs]))}
    try:
        import networkit as nk
        G = nk.Graph(g.n, directed=False)
        A = g.to_scipy().tocoo()
        keep = A.row < A.col
        G.addEdges((A.row[keep].astype(np.uint64), A.col[keep].astype(np.uint64)))
        times = []
        for r in roots:
            t0 = time.perf_counter()
            nk.distance.BFS(G, int(r), storePaths=False).run()
            times.append(time.perf_counter() - t0)
        out["networkit"] = {"version": nk.__version__, "threads": nk.getCurrentNumberOfThreads(),
                            **teps_stats(nedge, times)}
        out["networkit"]["median_s"] = float(np.median(times))
    except Exception as exc:
        out["networkit"] = {"error": f"{type(exc).__name__}: {exc}"}
    for k in ("native_cpu", "networkit"):
        if "teps_harmonic_mean" in out.get(k, {}) and "teps_harmonic_mean" in out["torch_gpu"]:
            out[f"gpu_over_{k}_teps"] = out["torch_gpu"]["teps_harmonic_mean"] / out[k]["teps_harmonic_mean"]
    return out


# ----------------------------------------------------------------------------- throughput vs the floor
#: GB/s of known devices (HBM peak, vendor figures), matched in the device name
KNOWN_BANDWIDTH = (("H200", 4800.0), ("H100", 3350.0))
#: the minimum bytes each figure's kernel moves (what the floor divides by the bandwidth)
FLOORS = {
    "bfs": "per search: edges examined x 8 B (an int64 column index each) + n x 26 B (CSR pointer 8, parent 8, "
           "level 8, visited and frontier bits 2)",
    "pagerank": "per iteration: nnz x 16 B (float64 value + int64 column index) + n x 32 B (row pointer, x read, "
                "A^T y written, next x written)",
    "gcn": "per epoch (2 layers, A X precomputed): 2 x n f s (A X read forward and for W1's gradient) + 4 x n h s "
           "(hidden written, read by W2, its gradient written and read) + 2 x nnz (s + 8) (the SpMM forward and "
           "backward: a value and an int64 index per nonzero); s = dtype bytes",
}


def bandwidth_gbs(args):
    """(GB/s, how it was found): --bandwidth-gbs, a known device's figure, or a measured device copy."""
    import torch
    if args.bandwidth_gbs:
        return float(args.bandwidth_gbs), "--bandwidth-gbs"
    if DEV.startswith("cuda"):
        name = torch.cuda.get_device_name(0)
        for key, bw in KNOWN_BANDWIDTH:
            if key in name:
                return bw, f"known peak of {name}"
    nbytes = (1 << 30) if DEV.startswith("cuda") else (1 << 27)
    a = torch.empty(nbytes // 4, dtype=torch.float32, device=DEV).fill_(1.0)
    b = torch.empty_like(a)
    t = med(lambda: b.copy_(a), 5, sync)
    return 2 * nbytes / t / 1e9, f"measured: copy of {nbytes >> 20} MiB on {DEV} (read + write)"


def throughput(args):
    import torch
    from partplan import Graph
    from partplan.datasets.generators import rmat_edges
    from partplan.nn.gcn import DistGCN, PlanExchange, captured_epoch
    from partplan.nn.normalize import normalize_adjacency
    from partplan.plan import build_plan
    from partplan.runtime.analytics import pagerank_parts
    from partplan.runtime.bfs import BfsEngine
    from partplan.runtime.comm import LocalComm
    from partplan.runtime.graph500 import BfsValidator, search_keys, teps_stats
    from partplan.runtime.spmm import local_executor
    bw, how = bandwidth_gbs(args)
    B = bw * 1e9
    scale = args.scale
    src, dst = rmat_edges(scale, 16, seed=0)
    g = Graph.from_edges(src, dst, n=1 << scale, symmetrize=True, self_loops="remove")
    n, nnz = g.n, g.nnz
    plan = build_plan(g, np.zeros(n, dtype=np.int64), 1)
    out = {"device": DEV, "bandwidth_gbs": bw, "bandwidth_source": how, "scale": scale, "n": n, "nnz": nnz,
           "floors": FLOORS}
    rows = []
    # BFS: Graph500 TEPS (edges of the root's component, Graph500's count) vs the floor from the edges examined
    roots = search_keys(src, dst, n, args.roots, 0)
    val = BfsValidator(src, dst, n, directed=False)
    eng = BfsEngine(plan.manifest, plan.ranks, LocalComm(1, plan.groups(), device=DEV), kernels="torch")
    eng.search(int(roots[0]))
    res = [eng.search(int(r)) for r in roots]
    checks = [val.check(int(r), x.parents, levels=x.levels) for r, x in zip(roots, res)]  # all five rules
    nedge = [c.nedge for c in checks]
    times = [x.time_s for x in res]
    floor_t = [(x.edges_examined * 8 + n * 26) / B for x in res]
    st = teps_stats(nedge, times)
    fl = teps_stats(nedge, floor_t)
    out["bfs"] = {**st, "valid": all(c.ok for c in checks), "levels_mean": float(np.mean([len(x.records) for x in res])),
                  "floor_teps_harmonic_mean": fl["teps_harmonic_mean"],
                  "time_over_floor_median": float(np.median(np.array(times) / np.array(floor_t)))}
    rows.append(("BFS Graph500 (GTEPS, harmonic mean)", st["teps_harmonic_mean"] / 1e9, fl["teps_harmonic_mean"] / 1e9,
                 out["bfs"]["time_over_floor_median"]))
    # PageRank: edges per second per iteration (the captured iteration on CUDA)
    for _ in range(2):
        sync()
        t0 = time.perf_counter()
        _, _, rec = pagerank_parts(plan.manifest, plan.ranks, LocalComm(1, plan.groups(), device=DEV),
                                   kernels="torch", tol=1e-9, max_iter=200)
        sync()
        tot = time.perf_counter() - t0
    it_s = float(np.median([r["time_s"] for r in rec]))
    pf = (nnz * 16 + n * 32) / B
    out["pagerank"] = {"iterations": len(rec), "iteration_s_median": it_s, "run_s": tot,
                       "edges_per_s": nnz / it_s, "floor_edges_per_s": nnz / pf, "time_over_floor": it_s / pf}
    rows.append(("PageRank (G edges/s per iteration)", nnz / it_s / 1e9, nnz / pf / 1e9, it_s / pf))
    # GCN: epoch ms (forward, loss, backward, Adam), the captured epoch on CUDA
    f, hidden, classes = 128, 128, 16
    gn = normalize_adjacency(g, "gcn")
    gplan = build_plan(gn, np.zeros(n, dtype=np.int64), 1)
    ex = local_executor(gplan, dtype="float32", device=DEV, kernels="torch")
    xchg = PlanExchange(ex, phase_times=False)
    model = DistGCN(f, hidden, classes, layers=2, dropout=0.0, seed=0).to(DEV)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, capturable=DEV.startswith("cuda"))
    rng = np.random.default_rng(0)
    X = torch.from_numpy(rng.standard_normal((n, f)).astype(np.float32)).to(DEV)
    y = torch.from_numpy(rng.integers(0, classes, n)).to(DEV)
    ax = model.precompute(xchg, [X])
    step = captured_epoch(model, xchg, ax, [np.arange(n)], [y], opt)
    ts = []
    for _ in range(args.epochs):
        sync()
        t0 = time.perf_counter()
        step()
        sync()
        ts.append(time.perf_counter() - t0)
    ep = float(np.median(ts[2:] if len(ts) > 4 else ts))
    gf = (2 * n * f * 4 + 4 * n * hidden * 4 + 2 * gn.nnz * (4 + 8)) / B
    out["gcn"] = {"epoch_s_median": ep, "floor_s": gf, "time_over_floor": ep / gf, "captured": step.cap.captured,
                  "capture": step.cap.reason or "one CUDA graph per epoch", "f": f, "hidden": hidden,
                  "classes": classes, "loss_last": float(step())}
    rows.append(("GCN epoch (ms)", ep * 1e3, gf * 1e3, ep / gf))
    lines = [f"throughput on {DEV}: R-MAT scale {scale} (n {n}, nnz {nnz}); bandwidth {bw:.0f} GB/s ({how})",
             f"{'figure':<38} {'measured':>12} {'floor':>12} {'time/floor':>11}"]
    lines += [f"{name:<38} {m:>12.4g} {fv:>12.4g} {r:>10.1f}x" for name, m, fv, r in rows]
    lines += [f"  floor of {k}: {v}" for k, v in FLOORS.items()]
    out["table"] = lines
    print("\n".join(lines), file=sys.stderr, flush=True)
    return out


# ----------------------------------------------------------------------------- GCN
def gcn(args, graphs):
    import torch
    from partplan.nn.gcn import DistGCN, PlanExchange
    from partplan.nn.normalize import normalize_adjacency
    from partplan.plan import build_plan
    from partplan.runtime.spmm import local_executor
    g = graphs["email-Enron"]
    gn = normalize_adjacency(g, "gcn")
    plan = build_plan(gn, np.zeros(g.n, dtype=np.int64), 1)
    f, hidden, classes, epochs = 128, 128, 16, args.epochs
    rng = np.random.default_rng(0)
    X = rng.standard_normal((g.n, f)).astype(np.float32)
    y = torch.from_numpy(rng.integers(0, classes, g.n))
    out = {"n": g.n, "nnz": g.nnz, "f": f, "hidden": hidden, "classes": classes}

    def ours(device, kernels):
        ex = local_executor(plan, dtype="float32", device=device, kernels=kernels)
        xchg = PlanExchange(ex)
        model = DistGCN(f, hidden, classes, layers=2, dropout=0.0, seed=0).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        ax = model.precompute(xchg, [torch.from_numpy(X).to(device)])
        ids = [np.arange(g.n)]
        yd = y.to(device)
        losses, times = [], []
        for ep in range(epochs):
            if device.startswith("cuda"):
                sync()
            t0 = time.perf_counter()
            opt.zero_grad()
            logits = model(xchg, ax, ids, epoch=ep)[0]
            loss = torch.nn.functional.cross_entropy(logits, yd)
            loss.backward()
            opt.step()
            if device.startswith("cuda"):
                sync()
            times.append(time.perf_counter() - t0)
            losses.append(float(loss))
        return losses, float(np.median(times[2:]))

    l_gpu, t_gpu = ours(DEV, "torch")
    l_cpu, t_cpu = ours("cpu", "native")
    out["partplan_epoch_s_gpu"] = t_gpu
    out["partplan_epoch_s_cpu"] = t_cpu
    out["loss_max_abs_diff_gpu_vs_cpu"] = float(np.max(np.abs(np.array(l_gpu) - np.array(l_cpu))))
    try:
        from torch_geometric.nn import GCNConv
        A = g.to_scipy().tocoo()
        ei = torch.from_numpy(np.vstack([A.col, A.row]).astype(np.int64)).to(DEV)  # source -> target

        class PyG(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.c1 = GCNConv(f, hidden, cached=True)
                self.c2 = GCNConv(hidden, classes, cached=True)

            def forward(self, x, ei):
                return self.c2(torch.relu(self.c1(x, ei)), ei)
        m = PyG().to(DEV)
        opt = torch.optim.Adam(m.parameters(), lr=0.01)
        xd, yd = torch.from_numpy(X).to(DEV), y.to(DEV)
        times = []
        for ep in range(epochs):
            sync()
            t0 = time.perf_counter()
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(xd, ei), yd)
            loss.backward()
            opt.step()
            sync()
            times.append(time.perf_counter() - t0)
        out["pyg_gcnconv_epoch_s_gpu"] = float(np.median(times[2:]))
        out["partplan_over_pyg"] = t_gpu / out["pyg_gcnconv_epoch_s_gpu"]
    except Exception as exc:
        out["pyg_error"] = f"{type(exc).__name__}: {exc}"
    return out


# ----------------------------------------------------------------------------- gloo on the host's cores
def exchange_cpu(args, graphs):
    """gloo on the host's cores: executor exchange vs the bare floor (same protocol), the α-β
    prediction, and the step with overlap vs in order, on a tuned partition (METIS, from
    --partitions) and on a high-volume one (contiguous row blocks of R-MAT 16)."""
    from partplan.datasets.generators import rmat
    from partplan.plan import build_plan, write_plan
    from partplan.runtime.spmm import run_spmm
    out = {"cpu_count": os.cpu_count()}
    keys = ("step_s", "step_sequential_s", "overlap_speedup", "gather_s", "exchange_s", "compute_s", "bare_a2a_s",
            "bare_a2a_back_to_back_s", "exchange_over_bare", "exchange_predicted_s", "exchange_over_predicted",
            "alpha_s", "beta_s_per_byte", "bytes_match", "bytes_measured")
    import partplan
    gs = {"email-Enron": graphs["email-Enron"],
          "rmat16": rmat(16, seed=1).normalize(symmetrize=True, self_loops="remove"),
          "delaunay_n15": partplan.datasets.load("delaunay_n15")}
    cases = [("email-Enron", "metis", 4, 16), ("email-Enron", "metis", 4, 128), ("email-Enron", "metis", 2, 256),
             ("rmat16", "block", 2, 256), ("rmat16", "block", 4, 64),
             # a low-degree mesh cut at random: the exchange is as large as the SpMM (overlap's case)
             ("delaunay_n15", "random", 2, 256)]
    if args.exchange_cases:
        cases = [c for c in cases if f"{c[0]}:{c[1]}:{c[2]}:{c[3]}" in args.exchange_cases]
    with tempfile.TemporaryDirectory() as d:
        for name, how, p, f in cases:
            g = gs[name]
            if how == "metis":
                part, got = load_part(args, name, g, p)
            elif how == "random":
                part, got = np.random.default_rng(0).integers(0, p, g.n), "random"
            else:
                part, got = block_part(g.n, p), "block"
            path = write_plan(build_plan(g, part, p), Path(d) / f"{name}-{how}-{p}.plan")
            r = run_spmm(path, nprocs=p, backend="gloo", f=f, repeat=args.repeat, overlap="on",
                         compare=["bare"], timeout=120)
            row = {k: r.get(k) for k in keys}
            tot = r["gather_s"] + r["exchange_s"] + r["compute_s"]
            row.update(partition=got, exchange_share=r["exchange_s"] / tot, compute_share=r["compute_s"] / tot,
                       overlapped_over_sequential=r["step_s"] / r["step_sequential_s"])
            out[f"{name}_{got.split()[0]}_p{p}_f{f}"] = row
    return out


def spmm_kernel(args, graphs):
    import torch
    from partplan.runtime.ops import TorchOps
    kern = []
    for name, g in graphs.items():
        A = g.to_scipy()
        for f in (64, 128):
            for dt in ("float32", "float64"):
                X = np.random.default_rng(0).standard_normal((g.n, f)).astype(dt)
                Ad = A.astype(dt)
                t_cpu = med(lambda: Ad @ X, 5)
                ops = TorchOps(dt, DEV, "torch")
                M = ops.matrix(A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data, A.shape)
                Xd = torch.from_numpy(X).to(DEV)
                o = ops.empty(g.n, f)
                t_gpu = med(lambda: ops.spmm(M, Xd, o), 20, sync)
                err = float(np.abs(o.cpu().numpy() - (A @ X.astype(np.float64))).max())
                gf = 2 * g.nnz * f / 1e9
                kern.append({"graph": name, "nnz": g.nnz, "f": f, "dtype": dt, "scipy_cpu_gflops": gf / t_cpu,
                             "torch_cuda_gflops": gf / t_gpu, "speedup": t_cpu / t_gpu, "max_abs_err": err})
    return kern


# ----------------------------------------------------------------------------- GAT through the halo
def gat_halo(args, graphs):
    """A 2-layer GAT (PyG ``GATConv``) through :class:`partplan.nn.LocalHalo` — 4 ranks of a 1D plan on
    one GPU — against single-GPU PyG on the whole graph: logits and gradients in float64, bytes sent vs
    predicted, and the epoch time (forward, loss, backward, Adam) in float32."""
    import torch
    from torch_geometric.nn import GATConv
    from partplan.interop.pyg import from_pyg
    from partplan.nn import LocalHalo
    from partplan.plan import build_plan
    g0 = graphs["email-Enron"]
    A = g0.to_scipy().tocoo()
    ei = torch.from_numpy(np.vstack([A.col, A.row]).astype(np.int64))  # source -> target
    n, p, f, hidden, heads, classes = g0.n, 4, 128, 32, 4, 16
    g = from_pyg({"edge_index": ei, "num_nodes": n})
    part, how = load_part(args, "email-Enron", g, p)
    plan = build_plan(g, part, p, f=f)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, f))
    y = torch.from_numpy(rng.integers(0, classes, n)).to(DEV)
    out = {"n": n, "nnz": int(ei.shape[1]), "p": p, "partition": how, "f": f, "hidden": hidden * heads,
           "classes": classes}

    def model(dtype):
        torch.manual_seed(0)
        return torch.nn.ModuleList([GATConv(f, hidden, heads=heads), GATConv(hidden * heads, classes)]).to(
            DEV, dtype)

    def full(m, x, eid):
        return m[1](torch.nn.functional.elu(m[0](x, eid)), eid)

    def dist(m, op, xs, eis):
        hs = [torch.nn.functional.elu(m[0](h, e)[:v.num_local]) for h, e, v in zip(op(xs), eis, op.ranks)]
        return [m[1](h, e)[:v.num_local] for h, e, v in zip(op(hs), eis, op.ranks)]

    op = LocalHalo(plan, ei, device=DEV0)
    ids = [torch.from_numpy(v.local_ids).to(DEV) for v in op.ranks]
    eis = [v.edge_index.to(DEV) for v in op.ranks]
    eid = ei.to(DEV)
    # exactness, float64: the same weights on both sides
    m = model(torch.float64)
    x = torch.from_numpy(X).to(DEV)
    xr = x.clone().requires_grad_(True)
    loss = torch.nn.functional.cross_entropy(full(m, xr, eid), y)
    loss.backward()
    ref = full(m, x, eid).detach()
    ref_gw = [q.grad.clone() for q in m.parameters()]
    m.zero_grad()
    xs = [x[i].clone().requires_grad_(True) for i in ids]
    op.comm.sent_bytes[:] = 0
    outs = dist(m, op, xs, eis)
    sent_fwd = op.comm.sent_bytes.copy()
    dl = sum(torch.nn.functional.cross_entropy(o, y[i], reduction="sum") for o, i in zip(outs, ids)) / n
    dl.backward()
    out["logits_max_abs_diff_f64"] = max(float((o.detach() - ref[i]).abs().max()) for o, i in zip(outs, ids))
    out["x_grad_max_abs_diff_f64"] = max(float((xx.grad - xr.grad[i]).abs().max()) for xx, i in zip(xs, ids))
    out["w_grad_max_abs_diff_f64"] = max(float((q.grad - r).abs().max()) for q, r in zip(m.parameters(), ref_gw))
    pred = op.predicted_bytes(f, torch.float64)["forward"] + op.predicted_bytes(hidden * heads, torch.float64)[
        "forward"]
    out["forward_bytes_match"] = bool(np.array_equal(sent_fwd, pred))
    out["forward_bytes"] = int(sent_fwd.sum())

    # time, float32
    def epochs(step):
        ts = []
        for _ in range(args.epochs):
            sync()
            t0 = time.perf_counter()
            step()
            sync()
            ts.append(time.perf_counter() - t0)
        return float(np.median(ts[2:]))

    x32 = torch.from_numpy(X.astype(np.float32)).to(DEV)
    m = model(torch.float32)
    opt = torch.optim.Adam(m.parameters(), lr=0.01)

    def step_full():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(full(m, x32, eid), y).backward()
        opt.step()
    xs32 = [x32[i] for i in ids]

    def step_halo():
        opt.zero_grad()
        outs = dist(m, op, xs32, eis)
        (sum(torch.nn.functional.cross_entropy(o, y[i], reduction="sum") for o, i in zip(outs, ids)) / n).backward()
        opt.step()
    out["pyg_gatconv_epoch_s_gpu"] = epochs(step_full)
    out["halo_p4_one_gpu_epoch_s"] = epochs(step_halo)
    out["halo_p4_over_pyg"] = out["halo_p4_one_gpu_epoch_s"] / out["pyg_gatconv_epoch_s_gpu"]
    return out


def _device(text: str) -> str:
    """argparse type of --device: cuda, cuda:N or cpu."""
    if text in ("cuda", "cpu") or (text.startswith("cuda:") and text[5:].isdigit()):
        return text
    raise argparse.ArgumentTypeError(f"expected cuda, cuda:N or cpu, got {text!r}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=None,
                    help="Graph500 / throughput scale (2^scale vertices; default 20 on CUDA, 14 with --device cpu)")
    ap.add_argument("--bandwidth-gbs", type=float, default=None,
                    help="memory bandwidth for the floors (GB/s; default: H100 3350, H200 4800, else measured)")
    ap.add_argument("--roots", type=positive_int, default=16, help="Graph500 search keys")
    ap.add_argument("--validate", type=nonneg_int, default=4, help="searches checked by the Graph500 validator")
    ap.add_argument("--epochs", type=positive_int, default=20, help="GCN epochs timed")
    ap.add_argument("--repeat", type=positive_int, default=15, help="repeats of the gloo SpMM measurements")
    ap.add_argument("--partitions", help="folder of <graph>-<k>.npy partitions (else block partitions)")
    ap.add_argument("--only", nargs="*", help="sections to run (default: all)")
    ap.add_argument("--exchange-cases", nargs="*", help="exchange_cpu cases GRAPH:PARTITION:P:F (default: all)")
    ap.add_argument("--out", help="also write the JSON here")
    ap.add_argument("--device", type=_device, default="cuda", help="cuda (default) or cpu (a dry run of the script)")
    args = ap.parse_args(argv)
    global DEV, DEV0
    DEV, DEV0 = args.device, ("cuda:0" if args.device == "cuda" else args.device)
    if args.scale is None:
        args.scale = 20 if DEV.startswith("cuda") else 14
    import torch
    import partplan
    out = {"torch": torch.__version__, "cuda": torch.cuda.is_available(),
           "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
           "cpu_count": os.cpu_count(), "date": time.strftime("%Y-%m-%d")}
    if DEV.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_check: no GPU here (torch.cuda.is_available() is False); nothing run. "
              "`--device cpu` runs every section on the CPU (the throughput table with a measured bandwidth).",
              file=sys.stderr)
        out["no_gpu"] = True
        print(json.dumps(out, indent=1, default=str))
        return 0
    graphs = {"email-Enron": partplan.datasets.load("email-Enron")}
    from partplan.datasets.generators import rmat
    graphs["rmat18"] = rmat(18, seed=1).normalize(symmetrize=True, self_loops="remove")
    todo = [("jobs_p1_nccl", lambda: jobs_p1_nccl(args, graphs)),
            ("jobs_p4_local_gpu", lambda: jobs_p4_local_gpu(args, graphs)),
            ("graph500", lambda: graph500(args)),
            ("throughput", lambda: throughput(args)),
            ("gcn", lambda: gcn(args, graphs)),
            ("gat_halo", lambda: gat_halo(args, graphs)),
            ("exchange_cpu", lambda: exchange_cpu(args, graphs)),
            ("spmm_kernel", lambda: spmm_kernel(args, graphs))]
    for name, fn in todo:
        if args.only and name not in args.only:
            continue
        section(out, name, fn)
        if args.out:
            Path(args.out).write_text(json.dumps(out, indent=1, default=str))
    print(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    run(main)
