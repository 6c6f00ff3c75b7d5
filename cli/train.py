"""``partplan train gcn PLAN --nprocs N [...]``: train a GCN from a plan and measure it.

``--nprocs N`` starts N local processes (gloo on CPU, NCCL on GPUs); under
torchrun the same command runs as one rank::

    torchrun --nproc-per-node 4 -m partplan train gcn g.plan --data D.npz --json

``--backend local`` runs every rank in this process (LocalComm, exact).
"""
from __future__ import annotations

import argparse
import json
import sys

from partplan.cli._common import add_job_options, nonneg_float, positive_int, print_keys

_KEYS = ("ranks", "backend", "layout", "epochs", "train_acc", "val_acc", "test_acc", "epoch_s", "exchange_s",
         "spmm_s", "allreduce_s", "dense_s", "bytes_per_epoch_predicted", "bytes_per_epoch_measured", "batches",
         "rows_per_batch_mean", "bytes_per_batch_predicted_mean", "bytes_per_batch_measured_mean", "batch_s",
         "bytes_match")


def register(subparsers) -> None:
    p = subparsers.add_parser("train", help="train a GNN from a plan (distributed, measured)",
                              description="Train graph neural networks from plans on torch.distributed.")
    sub = p.add_subparsers(dest="model", metavar="MODEL")
    s = sub.add_parser(
        "gcn", help="full-batch GCN (Kipf & Welling) on N processes",
        description="Train a GCN whose graph convolutions run the plan's exchange programs (forward Â @ H, "
                    "backward Âᵀ @ G), weights replicated and their gradients all-reduced. The plan must be "
                    "built with --normalize gcn (or mean).",
        epilog="examples:\n"
               "  partplan partition polblogs --symmetrize -k 4 --normalize gcn -o pb.plan\n"
               "  partplan datasets gcn-data polblogs -o pb.npz\n"
               "  partplan train gcn pb.plan --nprocs 4 --data pb.npz --epochs 200 --json\n"
               "  partplan train gcn g.plan --nprocs 2 --random-features 64 --classes 8 --epochs 20\n"
               "  partplan train gcn g.plan --nprocs 2 --data D.npz --sampler neighbor:512:10,5 --epochs 5",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("plan", metavar="PLAN", help="plan directory (built with --normalize gcn|mean)")
    add_job_options(s)
    s.add_argument("--data", metavar="D.npz", help="x, y, train_mask, val_mask, test_mask in vertex order")
    s.add_argument("--random-features", type=positive_int, metavar="F", help="synthetic features (timing runs)")
    s.add_argument("--classes", type=positive_int, metavar="C", help="classes of the synthetic labels")
    s.add_argument("--epochs", type=positive_int, default=200, metavar="E", help="epochs (default 200)")
    s.add_argument("--hidden", type=positive_int, default=16, metavar="H", help="hidden width (default 16)")
    s.add_argument("--layers", type=positive_int, default=2, metavar="L", help="graph convolutions (default 2)")
    s.add_argument("--lr", type=float, default=0.01, help="Adam learning rate (default 0.01)")
    s.add_argument("--weight-decay", type=nonneg_float, default=5e-4, metavar="WD", help="L2 (default 5e-4)")
    s.add_argument("--dropout", type=float, default=0.5, metavar="P", help="dropout after hidden layers (0.5)")
    s.add_argument("--seed", type=int, default=0, help="weights / dropout / synthetic data seed (default 0)")
    s.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="compute type")
    s.add_argument("--sampler", metavar="SPEC",
                   help="mini-batch training: neighbor:B:f1,f2 (one fanout per layer), saint-node:BUDGET or "
                        "saint-rw:ROOTS:LEN (the stochastic model's samplers); default: full batch")
    s.add_argument("--batch-size", type=positive_int, metavar="B", help="seeds per batch (neighbor sampler)")
    s.add_argument("--batches-per-epoch", type=positive_int, default=10, metavar="N",
                   help="mini-batches per epoch (default 10)")
    s.add_argument("--save", metavar="W.pt", help="write the trained weights (rank 0, atomic)")
    s.add_argument("--kernel", choices=("auto", "scipy", "torch"), default="auto", help="local SpMM kernel")
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    s.set_defaults(func=run_gcn)
    p.set_defaults(func=lambda args: (p.print_help(), 1)[1])


def run_gcn(args) -> int:
    from partplan.nn.train import train_gcn
    rep = train_gcn(args.plan, nprocs=args.nprocs, backend=args.backend, data=args.data,
                    random_features=args.random_features, classes=args.classes, epochs=args.epochs,
                    hidden=args.hidden, layers=args.layers, lr=args.lr, weight_decay=args.weight_decay,
                    dropout=args.dropout, seed=args.seed, dtype=args.dtype, save=args.save,
                    timeout=args.timeout or 60.0, threads=args.threads, kernel=args.kernel,
                    progress=not args.quiet, sampler=args.sampler, batch_size=args.batch_size,
                    batches_per_epoch=args.batches_per_epoch)
    if rep is None:  # a non-zero rank under torchrun
        return 0
    if args.json:
        print(json.dumps(rep, indent=1))
    else:
        print_keys(rep, _KEYS)
        print(f"loss first / last  {rep['losses'][0]:.4f} / {rep['losses'][-1]:.4f}")
        if not rep["bytes_match"]:
            print("BYTES DIFFER between prediction and measurement", file=sys.stderr)
    return 0 if rep["bytes_match"] else 1
