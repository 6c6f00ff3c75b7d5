"""A Halo whose rank cannot read its share: every rank says which, at once. Rank 1's share is
truncated; rank 1 raises the reader's error naming the file, and rank 0 — which read its own share —
raises a PlanError naming rank 1 and that error, instead of waiting out the timeout at its first
exchange (2 gloo processes)."""
from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

pytestmark = [pytest.mark.dist, pytest.mark.slow]


def _worker(rank, world, port, tmp, module="Halo"):
    import torch.distributed as dist

    from partplan.nn import DistSpMM, Halo
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    t0, out = time.perf_counter(), {}
    try:
        {"Halo": Halo, "DistSpMM": DistSpMM}[module](str(Path(tmp) / "g.plan"), timeout=30.0)
        out["error"] = None
    except Exception as exc:  # noqa: BLE001 - recorded for the test
        out["error"] = f"{type(exc).__name__}: {exc}"
    out["seconds"] = time.perf_counter() - t0
    Path(tmp, f"r{rank}.json").write_text(json.dumps(out))
    dist.destroy_process_group()


def test_a_rank_that_cannot_read_its_share_is_named_on_every_rank(tmp_path):
    import torch.multiprocessing as mp
    from torch_geometric.data import Data

    from partplan.interop import plan_from_pyg
    from partplan.nn.shares import share_name

    g = torch.Generator().manual_seed(0)
    ei = torch.randint(0, 60, (2, 300), generator=g)
    data = Data(edge_index=ei, x=torch.randn(60, 4, generator=g), num_nodes=60)
    plan_from_pyg(data, 2, seed=0, shares=True, out=tmp_path / "g.plan")
    share = tmp_path / "g.plan" / share_name(1)
    share.write_bytes(share.read_bytes()[:-100])
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    mp.start_processes(_worker, args=(2, port, str(tmp_path)), nprocs=2, join=True, start_method="spawn")
    r0, r1 = (json.loads((tmp_path / f"r{r}.json").read_text()) for r in range(2))
    assert r1["error"] and share_name(1) in r1["error"]
    assert r0["error"] and "rank 1 could not load its part of the plan" in r0["error"]
    assert share_name(1) in r0["error"]
    assert r0["seconds"] < 20.0        # not the 30 s timeout of a peer that never exchanges


def test_a_rank_that_cannot_read_its_shard_is_named_on_every_rank_of_distspmm(tmp_path):
    """The same for DistSpMM, whose rank 1 reads a truncated shard (its rank file)."""
    import torch.multiprocessing as mp
    from torch_geometric.data import Data

    from partplan.interop import plan_from_pyg

    g = torch.Generator().manual_seed(1)
    data = Data(edge_index=torch.randint(0, 60, (2, 300), generator=g), num_nodes=60)
    plan_from_pyg(data, 2, seed=0, out=tmp_path / "g.plan")
    shard = sorted((tmp_path / "g.plan").glob("rank-*1.arrow"))[0]
    shard.write_bytes(shard.read_bytes()[:-100])
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    mp.start_processes(_worker, args=(2, port, str(tmp_path), "DistSpMM"), nprocs=2, join=True,
                       start_method="spawn")
    r0, r1 = (json.loads((tmp_path / f"r{r}.json").read_text()) for r in range(2))
    assert r1["error"] and shard.name in r1["error"]
    assert r0["error"] and "rank 1 could not load its part of the plan" in r0["error"] and shard.name in r0["error"]
    assert r0["seconds"] < 20.0
