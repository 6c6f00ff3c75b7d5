"""``train gcn``: full-batch (or sampled mini-batch) GCN training from a plan
— :func:`~partplan.nn.train.train_config` checks the plan, the data and the
options before any process starts, and every process runs
:func:`~partplan.nn.train.train_rank` (the same work as
:func:`~partplan.nn.train.train_gcn`)."""
from __future__ import annotations

from .args import job_config, nonneg_float, positive_int
from .registry import Job, register
from .spmm import render_keys

KEYS = ("ranks", "backend", "device", "kernels", "layout", "epochs", "train_acc", "val_acc", "test_acc", "epoch_s",
        "exchange_s", "spmm_s", "allreduce_s", "dense_s", "bytes_per_epoch_predicted", "bytes_per_epoch_measured",
        "batches", "rows_per_batch_mean", "bytes_per_batch_predicted_mean", "bytes_per_batch_measured_mean",
        "batch_s", "bytes_match")
_ARGS = ("plan", "data", "random_features", "classes", "epochs", "hidden", "layers", "lr", "weight_decay",
         "dropout", "seed", "dtype", "save", "sampler", "batch_size", "batches_per_epoch", "predictions")


def _arguments(s) -> None:
    s.add_argument("plan", metavar="PLAN", help="plan directory (built with --normalize gcn|mean)")
    s.add_argument("--data", metavar="D.npz|D.pt", help="x, y, train_mask, val_mask, test_mask in vertex order "
                   "(partplan's .npz, or a PyG Data saved with torch.save)")
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
    s.add_argument("--batch-size", type=positive_int, metavar="B",
                   help="seeds per batch of the neighbor sampler, in place of its spec's B")
    s.add_argument("--batches-per-epoch", type=positive_int, metavar="N",
                   help="mini-batches per epoch, with --sampler (default 10)")
    s.add_argument("--save", metavar="W.pt", help="write the trained weights (rank 0, atomic)")
    s.add_argument("--predictions", metavar="P.npy",
                   help="write the predicted class of every vertex: int64[n], vertex order (rank 0, atomic); "
                        "full-batch training only (not with --sampler)")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")


def _configure(args) -> dict:
    cfg = job_config(args, *_ARGS)
    cfg["progress"] = not args.quiet
    return cfg


def _prepare(cfg: dict, nprocs: int | None, threads: int | None) -> dict:
    from ..nn.train import train_config
    check_model_budget(cfg)
    return train_config(cfg, nprocs, threads)


def check_model_budget(cfg: dict) -> None:
    """The widths a user gives (``--classes``, ``--random-features``,
    ``--hidden``) against the memory budget (:mod:`partplan._budget`)
    before the data is read or any process starts: (n + the widest input) ×
    width × itemsize for activations, their gradients and the optimizer's
    state (4 copies), n from the plan's manifest."""
    from .._budget import check_array_bytes
    from ..plan.store import plan_rows
    n = plan_rows(cfg["plan"])
    itemsize = 8 if cfg.get("dtype") == "float64" else 4
    hidden = int(cfg.get("hidden") or 16)
    feats = int(cfg.get("random_features") or 0)
    if feats:
        check_array_bytes(n + hidden, feats, itemsize, f"--random-features {feats}", option="--random-features",
                          copies=4)
    check_array_bytes(n + max(feats, hidden), hidden, itemsize, f"--hidden {hidden}", option="--hidden", copies=4)
    if cfg.get("classes"):
        c = int(cfg["classes"])
        check_array_bytes(n + hidden, c, itemsize, f"--classes {c}", option="--classes", copies=4)


def _rank(ctx, cfg: dict) -> dict | None:
    from ..nn.train import train_rank
    return train_rank(ctx, cfg)


def _render(rep: dict) -> str:
    got = [v for v in rep["losses"] if v is not None]    # mini-batch: None for a batch without a training seed
    return render_keys(rep, KEYS) + (f"\nloss first / last  {got[0]:.4f} / {got[-1]:.4f}" if got else
                                     "\nloss               none (no batch held a training seed)")


register(Job(
    name="train-gcn", command="train", help="full-batch GCN (Kipf & Welling) on N processes",
    description="Train a GCN whose graph convolutions run the plan's exchange programs (forward Â @ H, "
                "backward Âᵀ @ G), weights replicated and their gradients all-reduced. The plan must be "
                "built with --normalize gcn (or mean).",
    examples="  partplan partition polblogs --symmetrize -k 4 --normalize gcn -o pb.plan\n"
             "  partplan datasets gcn-data polblogs -o pb.npz\n"
             "  partplan train gcn pb.plan --nprocs 4 --data pb.npz --epochs 200 --json\n"
             "  partplan partition polblogs --symmetrize -k 2 --normalize gcn -o pb2.plan\n"
             "  partplan train gcn pb2.plan --nprocs 2 --random-features 64 --classes 8 --epochs 20\n"
             "  partplan train gcn pb2.plan --nprocs 2 --data pb.npz --sampler neighbor:512:10,5 --epochs 5",
    add_arguments=_arguments, configure=_configure, prepare=_prepare, run=_rank, render=_render))
