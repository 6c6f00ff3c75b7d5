"""A user's own 2-layer GCN trained on p processes with partplan.nn.DistSpMM.

    torchrun --nproc-per-node 2 examples/torchrun_gcn.py --plan polblogs.plan

Rank 0 builds the plan when ``--plan`` does not exist yet (partition of the
PyG graph for this job's rank count, GCN normalization ``normalize="gcn"``),
then every rank loads only its own shard. Each layer is
``H' = Â (H W) + b`` with ``Â = D^-1/2 (A + I) D^-1/2`` — PyG's ``GCNConv`` —
where ``Â`` is applied by the plan's exchange program (``op(...)``) and its
gradient by the plan's backward program. Weight gradients are averaged by
``DistributedDataParallel`` (``--sync ddp``, the default) or summed by a
manual all-reduce (``--sync allreduce``); the loss is the mean cross-entropy
over all training vertices of the graph (every rank adds its share).

Data: a PyG ``Data`` (x, y, edge_index, train/val/test masks) — here polblogs
(undirected, identity features) from :func:`partplan.nn.data.labeled_dataset`;
replace :func:`load_data` with your own.

Rank 0 prints (and with ``--result`` writes) a JSON line with the final
train / val / test accuracy.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F


def load_data(name: str = "polblogs"):
    """A torch_geometric ``Data`` with x, y, edge_index (undirected, PyG's
    source → target) and train / val / test masks."""
    from torch_geometric.data import Data

    from partplan import datasets
    from partplan.nn.data import labeled_dataset
    d = labeled_dataset(name)
    g = datasets.load_graph(name).normalize(symmetrize=True, self_loops="remove")
    edge_index = torch.from_numpy(np.vstack([g.indices, g.rows]).astype(np.int64))  # A[target, source]
    return Data(x=torch.from_numpy(np.asarray(d["x"])), y=torch.from_numpy(d["y"]), edge_index=edge_index,
                train_mask=torch.from_numpy(d["train_mask"]), val_mask=torch.from_numpy(d["val_mask"]),
                test_mask=torch.from_numpy(d["test_mask"]), num_nodes=g.n)


def init_weights(in_dim: int, hidden: int, classes: int, seed: int, dtype=torch.float32) -> dict:
    """Glorot-uniform weights (``d_in × d_out``) and zero biases from ``seed`` —
    identical on every rank (and in the single-process reference)."""
    gen = torch.Generator().manual_seed(seed)

    def glorot(a, b):
        lim = float(np.sqrt(6.0 / (a + b)))
        return (torch.rand(a, b, generator=gen, dtype=torch.float64) * 2 * lim - lim).to(dtype)
    return {"W1": glorot(in_dim, hidden), "b1": torch.zeros(hidden, dtype=dtype),
            "W2": glorot(hidden, classes), "b2": torch.zeros(classes, dtype=dtype)}


class GCN(torch.nn.Module):
    """Two graph convolutions over the plan: ``op`` maps rows ``op.in_ids`` of
    ``H W`` to rows ``op.out_ids`` of ``Â H W``."""

    def __init__(self, op, weights: dict, dropout: float = 0.0):
        super().__init__()
        self.op = op
        self.W1, self.b1 = torch.nn.Parameter(weights["W1"].clone()), torch.nn.Parameter(weights["b1"].clone())
        self.W2, self.b2 = torch.nn.Parameter(weights["W2"].clone()), torch.nn.Parameter(weights["b2"].clone())
        self.dropout = dropout

    def forward(self, x):
        h = torch.relu(self.op(x @ self.W1) + self.b1)
        h = F.dropout(h, self.dropout, self.training)
        return self.op(h @ self.W2) + self.b2


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", required=True, help="plan directory (built by rank 0 when absent)")
    ap.add_argument("--dataset", default="polblogs")
    ap.add_argument("--epochs", type=int, default=100)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    ap.add_argument("--sync", choices=("ddp", "allreduce"), default="ddp")
    ap.add_argument("--result", help="rank 0 writes the final accuracies here (JSON)")
    ap.add_argument("--timeout", type=float, default=120.0)
    args = ap.parse_args(argv)

    import partplan
    from partplan.nn import DistSpMM
    from partplan.runtime import init_distributed

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    rank, world = init_distributed("gloo", timeout_s=args.timeout)
    dtype = getattr(torch, args.dtype)
    data = load_data(args.dataset)
    plan = Path(args.plan)
    if rank == 0 and not plan.exists():
        g = partplan.from_pyg(data)                      # A[target, source], PyG's default flow
        part = partplan.partition(g, world, seed=args.seed)
        partplan.write_plan(partplan.build_plan(g, part, normalize="gcn"), plan)
    dist.barrier()
    op = DistSpMM(plan, dtype=dtype, timeout=args.timeout)
    if op.manifest.get("normalize") != "gcn":
        raise SystemExit(f"{plan}: built with normalize={op.manifest.get('normalize')!r}; this GCN needs 'gcn'")
    if not np.array_equal(op.in_ids, op.out_ids):
        raise SystemExit(f"{plan}: layer 2 reads the rows layer 1 writes, so the plan must hold and compute "
                         f"the same rows on each rank (a conformal 1d plan)")
    ids = torch.from_numpy(op.in_ids)
    x, y = data.x[ids].to(dtype), data.y[ids]
    masks = {k: data[f"{k}_mask"][ids] for k in ("train", "val", "test")}
    n_train = int(data.train_mask.sum())

    torch.manual_seed(args.seed + rank)  # dropout masks differ per rank (different rows)
    model = GCN(op, init_weights(data.num_features, args.hidden, int(data.y.max()) + 1, args.seed, dtype),
                args.dropout)
    net = torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=False) \
        if args.sync == "ddp" else model
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    # DDP averages gradients over ranks: scale the local share of the global mean by world
    scale = world if args.sync == "ddp" else 1
    for _ in range(args.epochs):
        model.train()
        opt.zero_grad()
        out = net(x)
        loss = F.cross_entropy(out[masks["train"]], y[masks["train"]], reduction="sum") * (scale / n_train)
        loss.backward()
        if args.sync == "allreduce":
            for p in model.parameters():
                dist.all_reduce(p.grad)
        opt.step()
    model.eval()
    with torch.no_grad():
        pred = model(x).argmax(1)
    counts = torch.tensor([[int((pred[m] == y[m]).sum()), int(m.sum())] for m in masks.values()],
                          dtype=torch.float64)
    dist.all_reduce(counts)
    acc = {f"{k}_acc": float(c[0] / max(c[1], 1)) for k, c in zip(masks, counts)}
    if rank == 0:
        rep = {"ranks": world, "plan": str(plan), "epochs": args.epochs, "dtype": args.dtype, "sync": args.sync,
               **acc}
        print(json.dumps(rep), flush=True)
        if args.result:
            Path(args.result).write_text(json.dumps(rep))
    # free DDP's reducer (it holds the process group and sits in a reference cycle) on every rank
    # before the group goes: without it a gloo rank sometimes aborts at exit ("terminate called
    # without an active exception") after training finished
    del net, model, opt
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
