#!/usr/bin/env python
"""The distributed neighbour loader: bytes per epoch by partition, and seeds/s against PyG.

On a real graph (default email-Enron, embedded; PyG's source -> target reading of its symmetric
edges) with ``f`` random float32 features and half the vertices as seeds, one epoch of
``partplan.nn.NeighborLoader(plan, num_neighbors, batch_size)`` runs on p gloo processes for the
plans of three partitions of the same graph:

* **stochastic** — the stochastic hypergraph model (``model="stochastic"``, neighbour sampler
  with the loader's batch size and fanouts): minimizes the expected sampled volume;
* **metis** — METIS's graph model (edge cut);
* **random** — every vertex on a uniformly random rank.

Printed per partition: bytes moved per epoch over all ranks (the transport's count, equal to the
loader's prediction for every batch — checked), and the ratio to METIS's. Then the loader's
throughput (seeds/s over all ranks, the epoch's wall time) against the same loader on one process
over the whole graph and against PyG's own ``NeighborLoader`` on one process (same fanouts, batch
size and seeds), in the same run; PyG's sampler needs pyg-lib or torch-sparse, and where neither
installs the line says so.

Usage::

    python benchmarks/bench_loader.py [--graph email-Enron] [--p 2] [--f 64] [--batch 512] \\
        [--fanouts 10 5] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import tempfile
import time
from pathlib import Path

import numpy as np

from partplan.bench.script import run
from partplan.jobs.args import positive_int


def _data(name: str, f: int):
    import torch
    from torch_geometric.data import Data

    import partplan
    g = partplan.datasets.load(name)
    ei = torch.from_numpy(np.vstack([np.asarray(g.indices, dtype=np.int64),
                                     np.repeat(np.arange(g.n, dtype=np.int64), np.diff(g.indptr))]))
    rng = np.random.default_rng(0)
    return Data(edge_index=ei, num_nodes=g.n, x=torch.from_numpy(rng.standard_normal((g.n, f), dtype=np.float32)),
                y=torch.from_numpy(rng.integers(0, 4, g.n)), train_mask=torch.from_numpy(rng.random(g.n) < 0.5))


def _rank(rank, world, port, plan, fanouts, batch, out):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo")
    import partplan.nn
    loader = partplan.nn.NeighborLoader(plan, fanouts, batch_size=batch, input_nodes="train_mask", seed=0)
    moved, ok, seeds = 0, True, 0
    dist.barrier()
    t0 = time.perf_counter()
    for b in loader:
        moved += int(b.comm_bytes["measured"].sum())
        ok &= bool((b.comm_bytes["measured"] == b.comm_bytes["predicted"]).all())
        seeds += b.batch_size
    dist.barrier()
    wall = time.perf_counter() - t0
    Path(out).write_text(json.dumps({"moved": moved, "ok": ok, "seeds": seeds, "wall": wall}))
    dist.destroy_process_group()


def _epoch(plan: Path, p: int, fanouts, batch: int, tmp: Path) -> dict:
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_rank, args=(r, p, port, str(plan), fanouts, batch, str(tmp / f"r{r}.json")))
             for r in range(p)]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join()
    if any(pr.exitcode for pr in procs):
        raise SystemExit("a rank failed")
    rs = [json.loads((tmp / f"r{r}.json").read_text()) for r in range(p)]
    return {"bytes": sum(r["moved"] for r in rs), "predicted_equals_measured": all(r["ok"] for r in rs),
            "seeds": sum(r["seeds"] for r in rs), "wall_s": max(r["wall"] for r in rs)}


def _pyg_epoch(data, fanouts, batch: int) -> dict:
    """One epoch of PyG's own NeighborLoader on one process; {"unavailable": why} when PyG cannot sample
    here (its sampler needs pyg-lib or torch-sparse, which have no wheels for every torch)."""
    import torch
    from torch_geometric.loader import NeighborLoader
    torch.set_num_threads(1)
    loader = NeighborLoader(data, num_neighbors=list(fanouts), batch_size=batch, input_nodes=data.train_mask,
                            shuffle=True)
    t0 = time.perf_counter()
    try:
        seeds = sum(b.batch_size for b in loader)
    except ImportError as exc:
        return {"unavailable": str(exc)}
    return {"seeds": seeds, "wall_s": time.perf_counter() - t0}


def _one_process_epoch(plan: Path, fanouts, batch: int) -> dict:
    """partplan's loader on a plan of one rank: the whole graph in this process."""
    import torch
    import partplan.nn
    torch.set_num_threads(1)
    loader = partplan.nn.NeighborLoader(plan, fanouts, batch_size=batch, input_nodes="train_mask", seed=0)
    t0 = time.perf_counter()
    seeds = sum(b.batch_size for b in loader)
    return {"seeds": seeds, "wall_s": time.perf_counter() - t0}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--graph", default="email-Enron")
    ap.add_argument("--p", type=positive_int, default=2)
    ap.add_argument("--f", type=positive_int, default=64)
    ap.add_argument("--batch", type=positive_int, default=512)
    ap.add_argument("--fanouts", type=int, nargs="+", default=[10, 5])
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    import partplan
    data = _data(a.graph, a.f)
    print(f"{a.graph}: {data.num_nodes:,} vertices, {data.edge_index.shape[1]:,} edges, {a.f} float32 features, "
          f"{int(data.train_mask.sum()):,} seeds, batch {a.batch}, fanouts {a.fanouts}, p = {a.p}", flush=True)
    sampler = f"neighbor:{a.batch}:{','.join(map(str, a.fanouts))}"
    parts = {"stochastic": {"model": "stochastic", "sampler": sampler}, "metis": {"model": "graph"},
             "random": {"model": "baseline", "backend": "random"}}
    res = {}
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        for name, opts in parts.items():
            plan = tmp / f"{name}.plan"
            t0 = time.perf_counter()
            partplan.plan_from_pyg(data, a.p, out=plan, shares=True, seed=0, progress=False, **opts)
            res[name] = _epoch(plan, a.p, a.fanouts, a.batch, tmp)
            res[name]["plan_s"] = time.perf_counter() - t0
        partplan.plan_from_pyg(data, 1, out=tmp / "one.plan", shares=True, progress=False)
        one = _one_process_epoch(tmp / "one.plan", a.fanouts, a.batch)
    pyg = _pyg_epoch(data, a.fanouts, a.batch)
    print(f"{'partition':<11} {'MiB/epoch':>10} {'vs metis':>9} {'pred==meas':>10} {'seeds/s':>9}")
    for name, r in res.items():
        print(f"{name:<11} {r['bytes'] / 2 ** 20:>10.1f} {r['bytes'] / res['metis']['bytes']:>9.3f} "
              f"{str(r['predicted_equals_measured']):>10} {r['seeds'] / r['wall_s']:>9,.0f}")
    ours = res["stochastic"]["seeds"] / res["stochastic"]["wall_s"]
    mine1 = one["seeds"] / one["wall_s"]
    print(f"partplan at p = {a.p} (stochastic plan): {ours:,.0f} seeds/s; partplan on one process (whole graph): "
          f"{mine1:,.0f} seeds/s = {ours / mine1:.2f}x")
    if "unavailable" in pyg:
        print(f"PyG NeighborLoader: not run here ({pyg['unavailable']})")
    else:
        theirs = pyg["seeds"] / pyg["wall_s"]
        print(f"PyG NeighborLoader, one process: {theirs:,.0f} seeds/s; partplan at p = {a.p}: {ours / theirs:.2f}x")
    if a.json:
        Path(a.json).write_text(json.dumps({"graph": a.graph, "p": a.p, "f": a.f, "batch": a.batch,
                                            "fanouts": a.fanouts, "partitions": res, "one_process": one,
                                            "pyg": pyg}, indent=1))
    return 0 if all(r["predicted_equals_measured"] for r in res.values()) else 1


if __name__ == "__main__":
    run(main)
