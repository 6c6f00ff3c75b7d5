"""One launch of 2 gloo processes for the PyG bridge. README.md's PyG training block and
examples/pyg_train.py (GAT through Halo, GCN through DistSpMM) train to within 1 point of
the same models trained single-process with plain PyG (GAT on the whole edge_index, GCN with
PyG's own gcn_norm; same initial weights, optimizer and epochs). partplan.nn.Halo: GATConv
(edge_dim, 2 heads), SAGEConv, GINConv and GraphConv through the halo exchange equal the single-process PyG layers (float64: output rows,
input gradients, all-reduced weight gradients); bytes sent equal the plan's prediction forward
and backward; rows of other widths or dtypes on the two ranks are one PlanError on both; a call
made by rank 0 alone ends within the timeout naming rank 1; DistSpMM
refuses gradients on a plan with replicated rows; both modules pickle."""
from __future__ import annotations

import importlib.util
import io
import json
import os
import re
import socket
import time
import traceback
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

# beyond `make check` (30 s); the PyG bridge's launch there is test_dist_spmm.py's p = 2 gloo one
pytestmark = [pytest.mark.dist, pytest.mark.slow]

TIMEOUT = 3.0
ROOT = Path(__file__).resolve().parents[2]
EPOCHS = 20


def _example():
    spec = importlib.util.spec_from_file_location("pyg_train_example", ROOT / "examples" / "pyg_train.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _readme_block() -> str:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    (block,) = [b for b in blocks if "partplan.nn.Halo" in b]
    return block


class Whole:
    """The whole graph on one process: what Halo is at p = 1."""

    def __init__(self, data):
        self.num_local, self.edge_index = data.num_nodes, data.edge_index

    def __call__(self, h):
        return h


def _reference(ex, data, name: str) -> float:
    import torch.nn.functional as F
    from torch_geometric.nn.conv.gcn_conv import gcn_norm
    dt = torch.float64
    if name == "gat":
        op = Whole(data)
    else:
        ei, w = gcn_norm(data.edge_index, num_nodes=data.num_nodes, add_self_loops=True)

        def op(h):
            return torch.zeros(data.num_nodes, h.shape[1], dtype=h.dtype).index_add_(0, ei[1], w[:, None].to(h.dtype)
                                                                                     * h[ei[0]])
    torch.manual_seed(1)
    model = ex.build_model(name, op, data, 8, dt)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = data.x.to(dt), data.y
    for _ in range(EPOCHS):
        opt.zero_grad()
        F.cross_entropy(model(x)[data.train_mask], y[data.train_mask]).backward()
        opt.step()
    pred = model(x).argmax(1)
    return float((pred[data.test_mask] == y[data.test_mask]).double().mean())




def _worker(rank, world, port, tmp):
    import torch.distributed as dist

    from partplan.errors import PartplanError, PlanError
    from partplan.nn import DistSpMM, Halo
    tmp = Path(tmp)
    out = {}
    try:
        torch.set_num_threads(1)
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        os.chdir(tmp / "readme")   # the README block writes g.plan in the current folder
        # README.md's PyG block as written (it initializes the process group), then the example's GAT and GCN
        ex = _example()
        data = ex.load_data()
        ns = {"data": data, "GAT": ex.GAT, "print": lambda *a: out.setdefault("readme", a)}
        torch.manual_seed(0)
        exec(compile(  # noqa: S102 - the README's own block, as tests/cli/test_docs.py runs the others
            _readme_block().replace("range(50)", f"range({EPOCHS})"), "README.md", "exec"), ns)
        # shared_plan: rank 0's failure reaches every rank (an edge id past num_nodes)
        from partplan.nn import shared_plan
        try:
            shared_plan({"edge_index": torch.tensor([[0], [5]]), "num_nodes": 2}, tmp / "bad.plan")
        except PartplanError as exc:
            out["shared_plan_error"] = [type(exc).__name__, str(exc)]
        for m in ("gat", "gcn"):
            out[m] = ex.main(["--model", m, "--plan", f"{tmp}/{m}.plan", "--epochs", str(EPOCHS),
                              "--dtype", "float64", "--seed", "1"])
        d = torch.load(tmp / "inputs.pt", weights_only=False)
        ei, ea, x, R = d["ei"], d["ea"], d["x"], d["R"]
        op = Halo(tmp / "g.plan", ei, dtype=torch.float64)
        ids = torch.from_numpy(op.local_ids)
        res = {"local_ids": op.local_ids, "halo_ids": op.halo_ids}
        for name, conv in d["layers"].items():
            kw = (lambda e: {"edge_attr": e}) if name == "gat" else (lambda e: {})
            op.comm.reset()
            xr = x[ids].clone().requires_grad_(True)
            ext = op(xr)
            fwd = op.comm.sent_bytes.copy()
            o = conv(ext, op.edge_index, **kw(ea[op.edge_ids]))[:op.num_local]
            op.comm.reset()
            (o * R[name][ids]).sum().backward()
            bwd = op.comm.sent_bytes.copy()
            pred = op.predicted_bytes(x.shape[1], torch.float64)
            out[f"{name}_bytes"] = bool((fwd[rank] == pred["forward"][rank]).all() and fwd.sum() > 0
                                        and (bwd[rank] == pred["backward"][rank]).all())
            for p in conv.parameters():
                dist.all_reduce(p.grad)
            res[f"{name}_out"] = o.detach().numpy()
            res[f"{name}_gx"] = xr.grad.numpy()
            res[f"{name}_gw"] = np.concatenate([p.grad.reshape(-1).numpy() for p in conv.parameters()])
        np.savez(tmp / f"r{rank}.npz", **res)
        # a saved model holding the modules pickles; the unpickled Halo says to build it again
        buf = io.BytesIO()
        torch.save(torch.nn.ModuleList([op, DistSpMM(tmp / "g.plan", dtype=torch.float64)]), buf)
        back = torch.load(io.BytesIO(buf.getvalue()), weights_only=False)
        out["pickled_rows"] = bool(np.array_equal(back[0].local_ids, op.local_ids))
        try:
            back[0](x[ids])
        except PlanError as exc:
            out["unpickled_error"] = str(exc)
        # 1.5d plan (every row on both ranks): gradients through DistSpMM are refused, forward is fine
        op15 = DistSpMM(tmp / "g15.plan", dtype=torch.float64)
        w = torch.ones(x.shape[1], 2, dtype=torch.float64, requires_grad=True)
        try:
            op15(x[torch.from_numpy(op15.in_ids)] @ w)
        except PlanError as exc:
            out["replicated_error"] = str(exc)
        with torch.no_grad():
            op15(x[torch.from_numpy(op15.in_ids)])
        # the ranks pass rows of other widths, then of other dtypes: one PlanError on both ranks (the
        # receive buffers are sized from a rank's own rows: wrong numbers or a gloo abort otherwise)
        for key, xr in (("width", x[ids] if rank == 0 else x[ids][:, :-1]),
                        ("dtype", x[ids] if rank == 0 else x[ids].float())):
            try:
                Halo(tmp / "g.plan", ei)(xr)
            except PlanError as exc:
                out[f"mismatch_{key}"] = str(exc)
        # rank 0 alone calls: ends within the timeout naming rank 1 (Halo, then DistSpMM)
        sub = Halo(tmp / "g.plan", ei, timeout=TIMEOUT)
        spmm = DistSpMM(tmp / "g.plan", dtype=torch.float64, timeout=TIMEOUT)
        dist.barrier()
        if rank == 0:
            for key, fn in (("halo", lambda: sub(x[ids])), ("spmm", lambda: spmm(x[torch.from_numpy(spmm.in_ids)]))):
                t0 = time.perf_counter()
                try:
                    fn()
                except PartplanError as exc:
                    out[f"subset_{key}"] = [str(exc), time.perf_counter() - t0]
            (tmp / "rank0_done").write_text("1")
        else:
            t0 = time.perf_counter()
            while not (tmp / "rank0_done").exists() and time.perf_counter() - t0 < 60:
                time.sleep(0.1)
    except BaseException:  # noqa: BLE001 - reported to the parent through the file
        out["exception"] = traceback.format_exc()
    finally:
        (tmp / f"r{rank}.json").write_text(json.dumps(out))
        # the subset calls left the groups out of step: end without a collective teardown
        os._exit(0)


def test_gloo_p2_pyg_layers_through_halo_equal_single_process(tmp_path):
    import torch.multiprocessing as mp

    from partplan import write_plan
    from partplan.interop import plan_from_pyg
    spec = importlib.util.spec_from_file_location("halo_cases", Path(__file__).parents[1] / "unit" / "nn" /
                                                  "test_halo.py")
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    call, directed_graph, layers = cases.call, cases.directed_graph, cases.layers

    ei, ea, x = directed_graph(seed=3)
    n = x.shape[0]
    write_plan(plan_from_pyg({"edge_index": ei, "num_nodes": n}, 2, seed=0), tmp_path / "g.plan")
    write_plan(plan_from_pyg({"edge_index": ei, "num_nodes": n}, 2, seed=0, layout="1.5d:2"),
               tmp_path / "g15.plan")
    convs = layers()
    gen = torch.Generator().manual_seed(2)
    R = {k: torch.randn(n, call(c, x, ei, ea).shape[1], generator=gen, dtype=torch.float64)
         for k, c in convs.items()}
    torch.save({"ei": ei, "ea": ea, "x": x, "R": R, "layers": convs}, tmp_path / "inputs.pt")
    ref = {}
    for k, c in convs.items():
        xr = x.clone().requires_grad_(True)
        o = call(c, xr, ei, ea)
        (o * R[k]).sum().backward()
        ref[k] = (o.detach().numpy(), xr.grad.numpy(), np.concatenate([p.grad.reshape(-1).numpy()
                                                                        for p in c.parameters()]))
    (tmp_path / "readme").mkdir()
    ex = _example()
    data = ex.load_data()
    for name, norm in (("gat", None), ("gcn", "gcn")):     # the example builds a plan only when absent
        write_plan(plan_from_pyg(data, 2, normalize=norm, model="graph", seed=0), tmp_path / f"{name}.plan")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    mp.start_processes(_worker, args=(2, port, str(tmp_path)), nprocs=2, join=True, start_method="spawn")
    res = [json.loads((tmp_path / f"r{r}.json").read_text()) for r in range(2)]
    for r in res:
        assert "exception" not in r, r["exception"]
    ids = []
    for rank, r in enumerate(res):
        d = np.load(tmp_path / f"r{rank}.npz")
        ids.append(d["local_ids"])
        for k, (o, gx, gw) in ref.items():
            assert r[f"{k}_bytes"], k
            np.testing.assert_allclose(d[f"{k}_out"], o[d["local_ids"]], rtol=0, atol=1e-10)
            np.testing.assert_allclose(d[f"{k}_gx"], gx[d["local_ids"]], rtol=0, atol=1e-10)
            np.testing.assert_allclose(d[f"{k}_gw"], gw, rtol=0, atol=1e-10)
        assert r["pickled_rows"] and "build it again" in r["unpickled_error"]
        assert "5" in r["shared_plan_error"][1] and not (tmp_path / "bad.plan").exists()
        assert "2 ranks" in r["replicated_error"] and "2x too large" in r["replicated_error"]
    assert sorted(np.concatenate(ids).tolist()) == list(range(n))
    assert res[1]["shared_plan_error"][0] == "PlanError" and "rank 0 could not write the plan" in \
        res[1]["shared_plan_error"][1] and res[1]["shared_plan_error"][1].endswith(res[0]["shared_plan_error"][1])
    # README block and examples/pyg_train.py against the same models trained single-process with PyG
    for name in ("gat", "gcn"):
        acc = _reference(ex, data, name)
        assert res[0][name] == res[1][name]                 # accuracy all-reduced: the same on every rank
        assert abs(res[0][name] - acc) <= 0.01, (name, res[0][name], acc)
    (acc,) = res[0]["readme"]
    assert 0.5 < acc <= 1.0                                 # the README block trains (two classes)
    assert (tmp_path / "readme" / "g.plan" / "manifest.json").exists()
    for r in res:
        assert "different sizes or dtypes" in r["mismatch_width"] and "values per row 5 to 6" in r["mismatch_width"]
        assert "dtypes float32, float64" in r["mismatch_dtype"], r["mismatch_dtype"]
    for key in ("halo", "spmm"):
        msg, secs = res[0][f"subset_{key}"]
        assert "rank 1 did not call it" in msg, msg
        assert secs < TIMEOUT + 5, secs
