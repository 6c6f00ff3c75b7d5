"""A PyG model trained on p processes from a plan: GAT through ``partplan.nn.Halo``
or GCN through ``partplan.nn.DistSpMM``.

    torchrun --nproc-per-node 2 examples/pyg_train.py --model gat --plan pb-gat.plan
    torchrun --nproc-per-node 2 examples/pyg_train.py --model gcn --plan pb-gcn.plan

The glue from a PyG ``Data`` to distributed training is the block marked
``# glue`` in :func:`main` (12 lines, one statement each, the same for both
models; 5 of them exist only for the distribution); the models are
ordinary PyG code whose graph layers read ``op``:

* GAT: ``conv(op(h), op.edge_index)[:op.num_local]`` — ``op(h)`` appends the
  halo rows (the sources of this rank's incoming edges held by other ranks) by
  the plan's exchange, and its gradient goes back to their owners;
* GCN: ``op(h @ W)`` is ``Â (H W)`` (``Â`` = GCNConv's normalized adjacency,
  the plan built with ``normalize="gcn"``).

Rank 0 builds the plan when ``--plan`` holds none for this rank count
(:func:`partplan.nn.shared_plan`; the others wait for it); every rank then
reads only its own shard. The loss is the mean over
the training nodes of all ranks (:func:`partplan.nn.global_mean`) and the
accuracy counts every rank's test nodes (:func:`partplan.nn.accuracy`), so the
numbers do not depend on the rank count. Rank 0 prints a JSON line.

Data: :func:`load_data` returns a ``torch_geometric.data.Data`` (polblogs:
1,490 blogs, identity features, two classes); replace it with your own.
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch_geometric.nn import GATConv


def load_data():
    """polblogs as a PyG ``Data``: x (identity), y, edge_index (source → target), masks."""
    from torch_geometric.data import Data

    from partplan import datasets
    from partplan.nn.data import labeled_dataset
    d = labeled_dataset("polblogs")
    g = datasets.load_graph("polblogs").normalize(self_loops="remove")
    edge_index = torch.from_numpy(np.vstack([g.indices, g.rows]).astype(np.int64))  # A[target, source]
    return Data(x=torch.from_numpy(np.asarray(d["x"], dtype=np.float32)), y=torch.from_numpy(d["y"]).long(),
                edge_index=edge_index, num_nodes=g.n, train_mask=torch.from_numpy(d["train_mask"]),
                val_mask=torch.from_numpy(d["val_mask"]), test_mask=torch.from_numpy(d["test_mask"]))


class GAT(torch.nn.Module):
    """Two GATConv layers (``heads`` attention heads, then one) over ``op`` (a
    :class:`partplan.nn.Halo`, or anything with ``num_local``, ``edge_index``
    and ``op(h)``: the whole graph on one process)."""

    def __init__(self, op, d_in: int, hidden: int, classes: int, heads: int = 2):
        super().__init__()
        self.op = op
        self.conv1 = GATConv(d_in, hidden, heads=heads)
        self.conv2 = GATConv(hidden * heads, classes, heads=1)

    def forward(self, x):
        op = self.op
        h = F.elu(self.conv1(op(x), op.edge_index)[:op.num_local])
        return self.conv2(op(h), op.edge_index)[:op.num_local]


class GCN(torch.nn.Module):
    """Two graph convolutions ``H' = Â (H W) + b`` (PyG's ``GCNConv``: ``lin``
    without bias, then ``bias``), ``Â`` applied by ``op`` (a
    :class:`partplan.nn.DistSpMM` of a ``normalize="gcn"`` plan)."""

    def __init__(self, op, d_in: int, hidden: int, classes: int):
        super().__init__()
        self.op = op
        self.lin1, self.lin2 = torch.nn.Linear(d_in, hidden, bias=False), torch.nn.Linear(hidden, classes, bias=False)
        self.bias1, self.bias2 = torch.nn.Parameter(torch.zeros(hidden)), torch.nn.Parameter(torch.zeros(classes))

    def forward(self, x):
        h = torch.relu(self.op(self.lin1(x)) + self.bias1)
        return self.op(self.lin2(h)) + self.bias2


def build_model(name: str, op, data, hidden: int, dtype=torch.float32):
    """The model, with initial weights from the current torch seed (the same on every rank)."""
    classes = int(data.y.max()) + 1
    model = GAT(op, data.num_features, hidden, classes) if name == "gat" else GCN(op, data.num_features, hidden,
                                                                                  classes)
    return model.to(dtype)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("gat", "gcn"), default="gat")
    ap.add_argument("--plan", required=True, help="plan directory (built by rank 0 when absent)")
    ap.add_argument("--epochs", type=int, default=50)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--hidden", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    ap.add_argument("--result", help="rank 0 writes its JSON line here too")
    args = ap.parse_args(argv)
    import partplan
    import partplan.nn

    data, dtype, gat = load_data(), getattr(torch, args.dtype), args.model == "gat"
    torch.manual_seed(args.seed)                        # the same initial weights on every rank
    # glue: from a PyG Data to distributed training (12 lines)
    if not dist.is_initialized():
        dist.init_process_group("gloo")   # torchrun's environment
    plan = partplan.nn.shared_plan(data, args.plan, reuse=True, normalize=None if gat else "gcn")  # rank 0 plans
    op = partplan.nn.Halo(plan, data) if gat else partplan.nn.DistSpMM(plan, dtype=dtype)
    x, y, train, test = (t[op.local_ids] for t in (data.x.to(dtype), data.y, data.train_mask, data.test_mask))
    model = torch.nn.parallel.DistributedDataParallel(build_model(args.model, op, data, args.hidden, dtype))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    for _ in range(args.epochs):
        opt.zero_grad()
        partplan.nn.global_mean(F.cross_entropy(model(x), y, reduction="none"), train, ddp=True).backward()
        opt.step()
    acc = partplan.nn.accuracy(model(x), y, test)
    # end of glue
    if dist.get_rank() == 0:
        line = json.dumps({"model": args.model, "ranks": dist.get_world_size(), "epochs": args.epochs,
                           "test_acc": acc})
        print(line, flush=True)
        if args.result:
            with open(args.result, "w") as fh:
                fh.write(line)
    return acc


if __name__ == "__main__":
    main()
    dist.barrier()
    dist.destroy_process_group()
    sys.exit(0)
