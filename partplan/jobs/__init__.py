"""Jobs: the layer above the runtime that names what can be run.

A job is a :class:`Job` in one registry (:mod:`.registry`): its name, CLI
arguments, output kind, ``run(ctx, cfg)`` on a
:class:`~partplan.runtime.launch.WorkerContext`, and ``render(report)``.
``partplan run`` / ``partplan train`` build their subcommands from it and
:func:`execute` runs a job here, on launched processes or under torchrun.
Families: :mod:`.spmm`, :mod:`.traversal` (bfs, graph500), :mod:`.analytics`
(pagerank, wcc, sssp), :mod:`.train` (train-gcn), :mod:`.probe` (topoprobe).

Jobs may use the runtime, the partitioner and the dataset generators (Graph500
generates and partitions here); the runtime never imports this package.
"""
from .registry import FAMILIES, Job, get, jobs, names, register, unregister


def execute(job, cfg: dict, *, nprocs: int | None = None, threads: int | None = 1):
    """:func:`partplan.jobs.worker.execute` (imported on first use)."""
    from .worker import execute as _execute
    return _execute(job, cfg, nprocs=nprocs, threads=threads)


__all__ = ["FAMILIES", "Job", "execute", "get", "jobs", "names", "register", "unregister"]
