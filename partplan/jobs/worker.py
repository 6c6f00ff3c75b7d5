"""Running a registered job: :func:`execute` (here with every rank in this
process, on ``nprocs`` launched processes, or as one rank under torchrun)
and :func:`rank_main`, what each launched process runs.
"""
from __future__ import annotations

from ..runtime.launch import WorkerContext, resolve_device, start
from .registry import Job, get


def rank_main(cfg: dict) -> dict | None:
    """One process of the job ``cfg["job"]``: open the worker context (local:
    all ranks; else init the process group), run the job, write rank 0's
    report to ``cfg["result"]``, tear down. Rank 0 returns the report."""
    job = get(cfg["job"])
    with WorkerContext.open(cfg) as ctx:
        rep = job.run(ctx, cfg)
        ctx.write_result(cfg, rep)
        return rep


def execute(job: Job | str, cfg: dict, *, nprocs: int | None = None, threads: int | None = 1) -> dict | None:
    """Run ``job`` on ``cfg``: ``cfg["backend"]`` "local" runs every rank in
    this process; else ``nprocs`` processes are launched here (None: this
    process is one rank under torchrun). Returns the report (None on a
    non-zero torchrun rank). A job with its own ``start`` (a runtime API that
    checks and launches itself) is handed to it."""
    job = get(job) if isinstance(job, str) else job
    cfg = dict(cfg, job=job.name)
    if job.start is not None:
        return job.start(cfg, nprocs, threads)
    resolve_device(cfg.get("backend", "gloo"), cfg.get("device"))  # a bad device fails here, before any start
    if cfg.get("backend", "gloo") == "local":
        return rank_main(cfg)
    return start(cfg, nprocs, rank_main, timeout_s=float(cfg.get("timeout", 60.0)), threads=threads)
