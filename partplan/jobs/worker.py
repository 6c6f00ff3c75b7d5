"""Running a registered job: :func:`execute` — the job's ``prepare`` here,
then its ``run(ctx, cfg)`` on every process of the job through the runtime's
one protocol (:func:`partplan.runtime.launch.start`: every rank in this
process with the local backend, ``nprocs`` launched processes, or this
process as one rank under torchrun).
"""
from __future__ import annotations

from ..runtime.launch import resolve_device, start
from .registry import Job, get


def execute(job: Job | str, cfg: dict, *, nprocs: int | None = None, threads: int | None = None) -> dict | None:
    """Run ``job`` on ``cfg``: ``job.prepare`` (checks, before any start), then
    ``job.run`` on every process — ``cfg["backend"]`` "local" runs every rank
    in this process; else ``nprocs`` processes are launched here (None: this
    process is one rank under torchrun). Returns the report (None on a
    non-zero torchrun rank). ``threads`` (per process) above the cores this
    process may use is one OptionError, before anything starts."""
    from .._budget import check_threads
    job = get(job) if isinstance(job, str) else job
    check_threads(threads)   # at most the cores: refused before anything starts
    cfg = dict(cfg, job=job.name)
    if job.prepare is not None:
        cfg = job.prepare(cfg, nprocs, threads)
    resolve_device(cfg.get("backend", "gloo"), cfg.get("device"))  # a bad device fails here, before any start
    return start(cfg, nprocs, job.run, timeout_s=float(cfg.get("timeout", 60.0)), threads=threads)
