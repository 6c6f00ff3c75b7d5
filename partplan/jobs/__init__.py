"""Jobs: the layer above the runtime that names what can be run.

A job is a :class:`Job` in one registry (:mod:`.registry`): its name, CLI
arguments, output kind, ``prepare(cfg, nprocs, threads)`` (checks before any
process starts), ``run(ctx, cfg)`` on a
:class:`~partplan.runtime.launch.WorkerContext`, and ``render(report)``.
``partplan run`` / ``partplan train`` build their subcommands from it and
:func:`execute` runs a job — every job the same way: ``prepare`` here, then
``run`` on every process through :func:`partplan.runtime.launch.start`.
Families: :mod:`.spmm`, :mod:`.traversal` (bfs, graph500), :mod:`.analytics`
(pagerank, wcc, sssp), :mod:`.lp` (lp), :mod:`.matching` (matching), :mod:`.train` (train-gcn), :mod:`.probe` (topoprobe),
:mod:`.build` (plan-build: the distributed plan build).

Jobs use the runtime and read plans; they never import the partitioner or
the dataset generators (Graph500's graph and plan are prepared by the CLI,
:mod:`partplan.cli.graph500`), and the runtime never imports this package.
"""
from .registry import FAMILIES, Job, get, jobs, names, register, unregister


def execute(job, cfg: dict, *, nprocs: int | None = None, threads: int | None = None):
    """:func:`partplan.jobs.worker.execute` (imported on first use)."""
    from .worker import execute as _execute
    return _execute(job, cfg, nprocs=nprocs, threads=threads)


__all__ = ["FAMILIES", "Job", "execute", "get", "jobs", "names", "register", "unregister"]
