"""Shares and the neighbour loader on gloo processes.

p = 2 (and 4, slow): every rank's batches equal the one-rank loader's sample of the same seeds (a
plan of one rank: the single-process reference), the ranks' seeds of each step are the one-rank
loader's global batch, the sampled edges are the user's edges, bytes measured == predicted per
batch, and a batch's forward equals the same PyG model on the subgraph materialized in one process
from the user's Data. Halo built from the shares (no Data on the ranks) gives GATConv's and
GCNConv's single-process outputs and gradients (float64, <= 1e-10). README.md's two PyG blocks run
as written; a rank that stops iterating makes its peer fail within the loader's timeout."""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import traceback
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

pytestmark = [pytest.mark.dist]
ROOT = Path(__file__).resolve().parents[2]
FAN = [4, 3]
BATCH = 24


def _data(n=150, e=1100, seed=7):
    from torch_geometric.data import Data
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=g)
    ei = torch.cat([ei, ei[:, :50]], 1)
    return Data(edge_index=ei, num_nodes=n, x=torch.randn(n, 6, dtype=torch.float64, generator=g),
                y=torch.randint(0, 2, (n,), generator=g), train_mask=torch.rand(n, generator=g) < 0.5,
                test_mask=torch.rand(n, generator=g) < 0.3,
                edge_attr=torch.randn(ei.shape[1], 3, dtype=torch.float64, generator=g))


def _models():
    from torch_geometric.nn import GATConv, GCNConv, SAGEConv
    torch.manual_seed(3)
    return {"gat": GATConv(6, 4, heads=2, edge_dim=3).double(), "gcn": GCNConv(6, 4).double(),
            "sage": SAGEConv(6, 4).double()}


def _readme_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    return [b for b in blocks if "partplan.nn.Halo" in b] + [b for b in blocks if "NeighborLoader(" in b]


def _worker(rank, world, port, tmp):
    import torch.distributed as dist

    import partplan.nn
    tmp = Path(tmp)
    out = {}
    try:
        torch.set_num_threads(1)
        os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo")
        plan = tmp / f"p{world}.plan"
        loader = partplan.nn.NeighborLoader(plan, FAN, batch_size=BATCH, input_nodes="train_mask", seed=5)
        models = _models()
        batches = []
        for b in loader:
            o = models["sage"](b.x, b.edge_index)[:b.batch_size]
            batches.append({"n_id": b.n_id.tolist(), "e_id": b.e_id.tolist(), "ei": b.edge_index.tolist(),
                            "bs": b.batch_size, "x_ok": None, "out": o.detach().tolist(),
                            "pred": b.comm_bytes["predicted"].tolist(), "meas": b.comm_bytes["measured"].tolist()})
        out["batches"] = batches
        # Halo from the shares alone: layers' outputs and gradients
        op = partplan.nn.Halo(plan)
        res = {"local_ids": op.local_ids.tolist()}
        for name, conv in models.items():
            xr = op.x.clone().requires_grad_(True)
            kw = {"edge_attr": op.edge_attr} if name == "gat" else {}
            z = conv(op(xr), op.edge_index, **kw)[:op.num_local]
            z.pow(2).sum().backward()
            for p in conv.parameters():
                dist.all_reduce(p.grad)
            res[name] = {"out": z.detach().tolist(), "gx": xr.grad.tolist(),
                         "gw": torch.cat([p.grad.reshape(-1) for p in conv.parameters()]).tolist()}
            conv.zero_grad()
        out["halo"] = res
        if world == 2:   # README.md's PyG blocks, as written (fewer epochs)
            import torch.nn.functional as F  # noqa: F401 - the blocks import it themselves too
            ex_spec = __import__("importlib.util").util.spec_from_file_location("ex", ROOT / "examples" / "pyg_train.py")
            ex = __import__("importlib.util").util.module_from_spec(ex_spec)
            ex_spec.loader.exec_module(ex)
            os.chdir(tmp / "readme")
            ns = {"data": ex.load_data(), "GAT": ex.GAT, "print": lambda *a: out.setdefault("readme", a)}
            first, second = _readme_blocks()
            exec(compile(first.replace("range(50)", "range(3)").replace("dist.init_process_group(\"gloo\")", ""),  # noqa: S102
                         "README.md", "exec"), ns)
            exec(compile(second.replace("range(5)", "range(1)"), "README.md", "exec"), ns)  # noqa: S102
            out["readme_loader_steps"] = len(ns["loader"])
            # fanouts that differ between the ranks: one OptionError on each rank, before any batch
            from partplan.errors import OptionError
            try:
                partplan.nn.NeighborLoader(plan, [2, 1] if rank == 0 else [2], batch_size=BATCH, seed=5)
            except OptionError as exc:
                out["mismatch"] = str(exc)
            # an epoch set on one rank only: one OptionError on each rank, before any batch
            skew = partplan.nn.NeighborLoader(plan, FAN, batch_size=BATCH, seed=5)
            if rank == 1:
                skew.set_epoch(5)
            try:
                next(iter(skew))
            except OptionError as exc:
                out["epoch_skew"] = str(exc)
            from partplan.errors import PlanError
            # rank 1's share damaged: each rank says what, rank 0 too (not its first exchange's reset)
            try:
                partplan.nn.NeighborLoader(tmp / "bad.plan", FAN, batch_size=BATCH, seed=5, timeout=30)
            except PlanError as exc:
                out["bad_share"] = str(exc)
            # a rank that stops iterating: its peer ends within the timeout with one error (last: the
            # process group is out of step after it)
            lone = partplan.nn.NeighborLoader(plan, FAN, batch_size=BATCH, seed=1, timeout=3)
            if rank == 0:
                import time
                t0 = time.perf_counter()
                try:
                    next(iter(lone))
                except PlanError as exc:
                    out["lone"] = [str(exc), time.perf_counter() - t0]
    except BaseException:  # noqa: BLE001 - reported to the parent through the file
        out["exception"] = traceback.format_exc()
    finally:
        (tmp / f"r{rank}_{world}.json").write_text(json.dumps(out))
        os._exit(0)


@pytest.mark.parametrize("world", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_gloo_loader_and_halo_from_shares(tmp_path, world):
    import torch.multiprocessing as mp

    import partplan
    import partplan.nn
    data = _data()
    partplan.plan_from_pyg(data, 1, out=tmp_path / "p1.plan", shares=True)
    partplan.plan_from_pyg(data, world, out=tmp_path / f"p{world}.plan", shares=True, seed=0)
    (tmp_path / "readme").mkdir()
    if world == 2:   # a copy of the plan whose rank-1 share has one byte flipped
        shutil.copytree(tmp_path / "p2.plan", tmp_path / "bad.plan")
        share = sorted((tmp_path / "bad.plan").glob("share-*1.*"))[0]
        raw = bytearray(share.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        share.write_bytes(bytes(raw))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    mp.start_processes(_worker, args=(world, port, str(tmp_path)), nprocs=world, join=True, start_method="spawn")
    res = [json.loads((tmp_path / f"r{r}_{world}.json").read_text()) for r in range(world)]
    for r in res:
        assert "exception" not in r, r["exception"]
    if world == 2:
        assert "share" in res[1]["bad_share"] and "could not load" not in res[1]["bad_share"], res[1]["bad_share"]
        assert "rank 1 could not load its part of the plan" in res[0]["bad_share"], res[0]["bad_share"]
    ref = partplan.nn.NeighborLoader(tmp_path / "p1.plan", FAN, batch_size=BATCH, input_nodes="train_mask", seed=5)
    steps = ref._steps(0)
    ei = data.edge_index.numpy()
    sage = _models()["sage"]
    moved = 0
    for r in res:
        assert len(r["batches"]) == len(steps)
    for i, glob in enumerate(steps):
        seeds = []
        for r in res:
            b = r["batches"][i]
            n_id, e_id = np.array(b["n_id"], dtype=np.int64), np.array(b["e_id"], dtype=np.int64)
            bei = np.array(b["ei"], dtype=np.int64)            # int64 even when a rank's batch has no edges
            seeds += n_id[:b["bs"]].tolist()
            one = ref.sample(n_id[:b["bs"]], 0)                  # the single-process reference
            assert np.array_equal(one.n_id.numpy(), n_id) and np.array_equal(one.e_id.numpy(), e_id)
            assert np.array_equal(one.edge_index.numpy(), bei.reshape(2, -1))
            assert np.array_equal(ei[:, e_id], n_id[bei.reshape(2, -1)])
            assert b["pred"] == b["meas"]
            moved += sum(b["meas"])
            # the subgraph materialized from the user's Data in one process
            pos = {v: j for j, v in enumerate(n_id.tolist())}
            sub = torch.tensor([[pos[int(s)] for s in ei[0, e_id]], [pos[int(t)] for t in ei[1, e_id]]],
                               dtype=torch.int64).reshape(2, -1)
            want = sage(data.x[torch.from_numpy(n_id)], sub)[:b["bs"]].detach().numpy()
            np.testing.assert_allclose(np.array(b["out"]).reshape(want.shape), want, rtol=0, atol=1e-10)
        assert sorted(seeds) == sorted(glob.tolist())
    assert moved > 0
    # Halo from shares against the single-process layers
    models = _models()
    ids = []
    for name, conv in models.items():
        xr = data.x.clone().requires_grad_(True)
        kw = {"edge_attr": data.edge_attr} if name == "gat" else {}
        z = conv(xr, data.edge_index, **kw)
        z.pow(2).sum().backward()
        gw = torch.cat([p.grad.reshape(-1) for p in conv.parameters()]).numpy()
        for r in res:
            h = r["halo"]
            lid = np.array(h["local_ids"])
            np.testing.assert_allclose(np.array(h[name]["out"]), z.detach().numpy()[lid], rtol=0, atol=1e-10)
            np.testing.assert_allclose(np.array(h[name]["gx"]), xr.grad.numpy()[lid], rtol=0, atol=1e-10)
            np.testing.assert_allclose(np.array(h[name]["gw"]), gw, rtol=0, atol=1e-10)
            ids += lid.tolist() if name == "gat" else []
    assert sorted(ids) == list(range(data.num_nodes))
    if world == 2:
        (acc,) = res[0]["readme"]
        assert 0.0 <= acc <= 1.0
        assert res[0]["readme_loader_steps"] == res[1]["readme_loader_steps"] > 0
        assert all("another num_neighbors" in r.get("mismatch", "") for r in res), [r.get("mismatch") for r in res]
        assert all("iterate epochs 0 and 5" in r.get("epoch_skew", "") for r in res), [r.get("epoch_skew") for r in res]
        msg, secs = res[0]["lone"]
        assert "did not complete within 3 s" in msg and secs < 20, (msg, secs)
