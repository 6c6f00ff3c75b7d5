"""``partplan run JOB ...``: execute a plan — one subcommand per job of the
registry (:mod:`partplan.jobs`) under ``run``: spmm, bfs, graph500,
pagerank, wcc, sssp.

``--nprocs N`` starts N local processes (gloo on CPU, NCCL on GPUs); started
by torchrun instead (RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT set), the
same command runs as one rank of that job::

    torchrun --nproc-per-node 4 -m partplan run spmm g.plan --json

``--backend local`` runs every rank in this process (LocalComm, exact).
``graph500`` generates, partitions and plans its graph here first
(:mod:`partplan.cli._graph500`); the job runs the searches on that plan.
``--kernels`` / ``--device`` pick the local compute and where buffers live;
the JSON report names both.
"""
from __future__ import annotations

from partplan.cli._common import add_job_commands, require_subcommand


def register(subparsers) -> None:
    p = subparsers.add_parser("run", help="execute a plan (SpMM, BFS, Graph500, PageRank, WCC, SSSP, label propagation, matching) and measure it",
                              description="Execute plans on torch.distributed (or every rank in this process).")
    sub = p.add_subparsers(dest="job", metavar="JOB")
    add_job_commands(sub, "run")
    from partplan.cli._graph500 import run_graph500
    sub.choices["graph500"].set_defaults(func=run_graph500)  # Graph500's set-up happens here, above the jobs
    require_subcommand(p, sub, "a job")
