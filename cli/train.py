"""``partplan train MODEL PLAN --nprocs N [...]``: train a GNN from a plan and
measure it — one subcommand per job of the registry (:mod:`partplan.jobs`)
under ``train`` (``train-gcn`` is ``partplan train gcn``).

``--nprocs N`` starts N local processes (gloo on CPU, NCCL on GPUs); under
torchrun the same command runs as one rank::

    torchrun --nproc-per-node 4 -m partplan train gcn g.plan --data D.npz --json

``--backend local`` runs every rank in this process (LocalComm, exact).
"""
from __future__ import annotations

from partplan.cli._common import add_job_commands, require_subcommand


def register(subparsers) -> None:
    p = subparsers.add_parser("train", help="train a GNN from a plan (distributed, measured)",
                              description="Train graph neural networks from plans on torch.distributed.")
    sub = p.add_subparsers(dest="model", metavar="MODEL")
    add_job_commands(sub, "train")
    require_subcommand(p, sub, "a model")
