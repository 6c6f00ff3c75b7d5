"""partplan.nn.DistSpMM: the plan's SpMM as an autograd-aware torch.nn.Module, on
2 gloo processes (torch.multiprocessing, file rendezvous)."""
from __future__ import annotations

import json
import time
import traceback
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from partplan import Graph, build_plan, write_plan  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _directed(n=80, m=400, seed=5):
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    return Graph.from_edges(src, dst, rng.random(m) + 0.5, n=n, name="dsp-directed")


def _worker(rank, world, init_file, tmp):
    import torch.distributed as dist

    from partplan.errors import PlanError
    from partplan.nn import DistSpMM
    out = {}
    try:
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
        tmp = Path(tmp)
        # world size mismatch: one clear PlanError before any process group is created
        try:
            DistSpMM(tmp / "p4.plan")
            out["world_error"] = None
        except PlanError as exc:
            out["world_error"] = str(exc)
        n = int(np.load(tmp / "X.npy").shape[0])
        X = torch.from_numpy(np.load(tmp / "X.npy"))
        G = torch.from_numpy(np.load(tmp / "G.npy"))
        op = DistSpMM(tmp / "g.plan")                      # float32 by default
        try:
            op(X[op.in_ids])                              # float64 input into a float32 module
            out["dtype_error"] = None
        except PlanError as exc:
            out["dtype_error"] = str(exc)
        try:
            op(X[op.in_ids].long())                       # an integer input: cast it, no module move offered
            out["int_error"] = None
        except PlanError as exc:
            out["int_error"] = str(exc)
        errs = []
        for bad in (torch.empty(len(op.in_ids), 5, device="meta"), X[op.in_ids][:-1].float()):
            try:
                op(bad)
                errs.append(None)
            except PlanError as exc:
                errs.append(str(exc))
        out["device_error"], out["shape_error"] = errs
        z32 = op(X[op.in_ids].float())
        out["z32_dtype"] = str(z32.dtype)
        op = op.to(torch.float64)
        out["module_dtype"] = str(op.dtype)
        h = X[op.in_ids].clone().requires_grad_(True)
        Z = op(h)
        (Z * G[op.out_ids]).sum().backward()
        # local_edge_index: a scatter-add over [held rows; halo rows] gives the same rows
        ei, w = op.local_edge_index(), op.local_edge_weight()
        xext = torch.cat([X[op.in_ids], X[op.halo_ids]])
        zl = torch.zeros(len(op.out_ids), X.shape[1], dtype=torch.float64)
        zl.index_add_(0, ei[1], w[:, None] * xext[ei[0]])
        out["edge_index_err"] = float((zl - Z.detach()).abs().max()) if Z.numel() else 0.0
        out["edge_index_ok"] = bool(ei.dtype == torch.int64 and ei.shape[0] == 2
                                    and int(ei[0].max()) < len(op.in_ids) + len(op.halo_ids))
        np.savez(tmp / f"r{rank}.npz", in_ids=op.in_ids, out_ids=op.out_ids, Z=Z.detach().numpy(),
                 dH=h.grad.numpy(), z32=z32.numpy(), n=n)
        # the older name partplan.runtime.DistSpMM: the same module, forward / backward by hand
        from partplan.runtime import DistSpMM as Legacy
        leg = Legacy(tmp / "g.plan", dtype="float64")
        out["legacy_err"] = max(float((leg.forward(X[leg.in_ids]) - Z.detach()).abs().max()),
                                float((leg.backward(G[leg.out_ids]) - h.grad).abs().max()))
        # a plan without a backward program: forward works, backward is a clear error
        op_nb = DistSpMM(tmp / "nb.plan", dtype=torch.float64)
        h2 = X[op_nb.in_ids].clone().requires_grad_(True)
        z2 = op_nb(h2)
        try:
            z2.sum().backward()
            out["nobwd_error"] = None
        except PlanError as exc:
            out["nobwd_error"] = str(exc)
        dist.barrier()
    except BaseException:
        out["exception"] = traceback.format_exc()
    finally:
        (Path(tmp) / f"r{rank}.json").write_text(json.dumps(out))
        if dist.is_initialized():
            dist.destroy_process_group()


def test_dist_spmm_gloo_directed(tmp_path):
    import torch.multiprocessing as mp
    g = _directed()
    A = g.to_scipy().astype(np.float64)
    assert (A != A.T).nnz > 0
    rng = np.random.default_rng(1)
    part = rng.integers(0, 2, g.n)
    plan = build_plan(g, part, 2)
    assert plan.manifest["backward"] == "separate"
    write_plan(plan, tmp_path / "g.plan")
    write_plan(build_plan(g, rng.integers(0, 4, g.n), 4), tmp_path / "p4.plan")
    write_plan(build_plan(g, part, 2, backward=False), tmp_path / "nb.plan")
    X = rng.standard_normal((g.n, 5))
    Gr = rng.standard_normal((g.n, 5))
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "G.npy", Gr)
    init = tmp_path / "rendezvous"
    mp.start_processes(_worker, args=(2, str(init), str(tmp_path)), nprocs=2, join=True, start_method="spawn")
    Zref, dHref = A @ X, A.T @ Gr
    for r in range(2):
        res = json.loads((tmp_path / f"r{r}.json").read_text())
        assert "exception" not in res, res["exception"]
        assert "p4.plan is for 4 ranks, this job has 2 (start it with --nproc-per-node 4)" in res["world_error"]
        assert "torch.float64" in res["dtype_error"] and "torch.float32" in res["dtype_error"]
        assert "g.plan" in res["dtype_error"]
        assert "cast the input" in res["int_error"] and ".to(torch.int64)" not in res["int_error"]
        assert "meta" in res["device_error"] and "cpu" in res["device_error"]
        assert "rows in_ids" in res["shape_error"]
        assert res["z32_dtype"] == "torch.float32" and res["module_dtype"] == "torch.float64"
        assert res["edge_index_ok"] and res["edge_index_err"] < 1e-12
        assert res["legacy_err"] == 0.0
        assert res["nobwd_error"] and "no backward program" in res["nobwd_error"]
        d = np.load(tmp_path / f"r{r}.npz")
        assert np.abs(d["Z"] - Zref[d["out_ids"]]).max() < 1e-10
        assert np.abs(d["dH"] - dHref[d["in_ids"]]).max() < 1e-10
        assert np.abs(d["z32"] - Zref[d["out_ids"]]).max() < 1e-4
    # every row computed once, every input row held once
    outs = np.concatenate([np.load(tmp_path / f"r{r}.npz")["out_ids"] for r in range(2)])
    assert np.array_equal(np.sort(outs), np.arange(g.n))


# ----------------------------------------------------------------------------- p = 4 against PyG's GCNConv
def _gcnconv_worker(rank, world, init_file, tmp):
    """One rank of a user's torchrun-style loop: the GCN layer Z = Â (X W) with
    DistSpMM, a loss, backward, the weight gradient all-reduced."""
    import torch.distributed as dist

    from partplan.nn import DistSpMM
    tmp = Path(tmp)
    try:
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
        X = torch.from_numpy(np.load(tmp / "X.npy"))
        G = torch.from_numpy(np.load(tmp / "G.npy"))
        W = torch.nn.Parameter(torch.from_numpy(np.load(tmp / "W.npy")))     # replicated weights
        op = DistSpMM(tmp / "gcn.plan", dtype=torch.float64)
        Z = op(X[op.in_ids] @ W)                                              # this rank's rows of Â X W
        (Z * G[op.out_ids]).sum().backward()
        dist.all_reduce(W.grad)                                               # what DDP does
        np.savez(tmp / f"g{rank}.npz", out_ids=op.out_ids, Z=Z.detach().numpy(), dW=W.grad.numpy())
        dist.barrier()
    except BaseException:
        (tmp / f"g{rank}.err").write_text(traceback.format_exc())
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def test_dist_spmm_p4_equals_gcnconv_on_a_directed_graph(tmp_path):
    pytest.importorskip("torch_geometric")
    import torch.multiprocessing as mp
    from torch_geometric.data import Data
    from torch_geometric.nn import GCNConv

    from partplan import plan_from_pyg
    rng = np.random.default_rng(11)
    n, m, f_in, f_out = 90, 500, 6, 4
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = src != dst
    pairs = np.unique(np.stack([src[keep], dst[keep]]), axis=1)             # no self loops, no duplicates
    ei = torch.from_numpy(pairs)
    rev = set(zip(pairs[1].tolist(), pairs[0].tolist()))
    assert sum((a, b) not in rev for a, b in zip(pairs[0].tolist(), pairs[1].tolist())) > 100  # directed
    indeg, outdeg = np.bincount(pairs[1], minlength=n), np.bincount(pairs[0], minlength=n)
    assert np.any(indeg != outdeg)
    X, G, W = rng.standard_normal((n, f_in)), rng.standard_normal((n, f_out)), rng.standard_normal((f_in, f_out))
    data = Data(x=torch.from_numpy(X), edge_index=ei, num_nodes=n)
    plan = plan_from_pyg(data, 4, normalize="gcn", out=tmp_path / "gcn.plan", model="baseline", backend="random",
                         seed=2)
    assert plan.manifest["ranks"] == 4
    for name, a in (("X", X), ("G", G), ("W", W)):
        np.save(tmp_path / f"{name}.npy", a)
    mp.start_processes(_gcnconv_worker, args=(4, str(tmp_path / "rdv"), str(tmp_path)), nprocs=4, join=True,
                       start_method="spawn")
    errs = [p.read_text() for p in tmp_path.glob("g*.err")]
    assert not errs, errs[0]
    # the oracle: PyG's own GCNConv (self loops, D^-1/2 from in-degree at the target, flow source_to_target)
    conv = GCNConv(f_in, f_out, bias=False).double()
    with torch.no_grad():
        conv.lin.weight.copy_(torch.from_numpy(W.T))
    ref = conv(data.x, data.edge_index)
    (ref * torch.from_numpy(G)).sum().backward()
    ref, dW_ref = ref.detach().numpy(), conv.lin.weight.grad.numpy().T
    outs = []
    for r in range(4):
        d = np.load(tmp_path / f"g{r}.npz")
        outs.append(d["out_ids"])
        assert np.abs(d["Z"] - ref[d["out_ids"]]).max() < 1e-10, r
        assert np.abs(d["dW"] - dW_ref).max() < 1e-10, r
    assert np.array_equal(np.sort(np.concatenate(outs)), np.arange(n))       # every row once
    # the transposed graph (the trap of issue 19) gives other rows: the comparison can fail
    with torch.no_grad():
        flipped = conv(data.x, data.edge_index.flip(0)).numpy()
    assert np.abs(flipped - ref).max() > 1e-3


def _mixed_worker(rank, world, init_file, tmp):
    """Rank 1 passes rows one column narrower; then rank 1 opens another plan of the same
    partition (other edge weights)."""
    import torch.distributed as dist

    from partplan.errors import PlanError
    from partplan.nn import DistSpMM
    out = {}
    try:
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
        tmp = Path(tmp)
        X = torch.from_numpy(np.load(tmp / "X.npy"))
        op = DistSpMM(tmp / "g.plan", dtype=torch.float64, timeout=20)
        try:
            op(X[op.in_ids][:, : 5 - rank].contiguous())
            out["width_error"] = None
        except PlanError as exc:
            out["width_error"] = str(exc)
        try:
            DistSpMM(tmp / ("g.plan" if rank == 0 else "w.plan"), dtype=torch.float64, timeout=20)
            out["plan_error"] = None
        except PlanError as exc:
            out["plan_error"] = str(exc)
        # the loop's sums: a bad mask on rank 1 is one error on every rank (the peers waited on it)
        from partplan.errors import OptionError
        from partplan.nn import accuracy, global_mean
        vals, y = torch.ones(5), torch.zeros(5, dtype=torch.int64)
        for key, fn in (("mean", lambda m: global_mean(vals, m)), ("acc", lambda m: accuracy(y, y, m))):
            t0 = time.perf_counter()
            try:
                fn(torch.ones(5 - rank, dtype=torch.bool))
                out[f"{key}_error"] = None
            except OptionError as exc:
                out[f"{key}_error"] = [str(exc), time.perf_counter() - t0]
        out["mean_ok"] = float(global_mean(vals, torch.ones(5, dtype=torch.bool)))
    except BaseException:
        out["exception"] = traceback.format_exc()
    finally:
        (Path(tmp) / f"m{rank}.json").write_text(json.dumps(out))
        if dist.is_initialized():
            dist.destroy_process_group()


@pytest.mark.dist
@pytest.mark.slow
def test_ranks_that_disagree_on_the_width_or_the_plan_get_one_error_each(tmp_path):
    """Rows of another width on one rank came out as wrong numbers there and a gloo abort on the
    other; two plans of one partition (other weights) computed a mix of both with no error. Each is
    one PlanError on every rank now."""
    import torch.multiprocessing as mp
    g = _directed()
    part = np.random.default_rng(1).integers(0, 2, g.n)
    write_plan(build_plan(g, part, 2), tmp_path / "g.plan")
    heavier = Graph(g.indptr, g.indices, g.data * 2 + 1, name=g.name)
    write_plan(build_plan(heavier, part, 2), tmp_path / "w.plan")
    np.save(tmp_path / "X.npy", np.random.default_rng(2).standard_normal((g.n, 5)))
    mp.start_processes(_mixed_worker, args=(2, str(tmp_path / "rdv"), str(tmp_path)), nprocs=2, join=True,
                       start_method="spawn")
    for r in range(2):
        res = json.loads((tmp_path / f"m{r}.json").read_text())
        assert "exception" not in res, res["exception"]
        assert "different widths or dtypes" in res["width_error"] and "widths 4 to 5" in res["width_error"]
        assert "the ranks opened different plans" in res["plan_error"]
        for key in ("mean", "acc"):
            msg, secs = res[f"{key}_error"]
            assert ("mask must be a bool tensor" if r == 1 else "1 other rank(s) passed arguments") in msg, msg
            assert secs < 10, secs
        assert res["mean_ok"] == 0.5                  # 5 of the 10 selected rows' ones: this rank's share
