"""``topoprobe``: pairwise latency / bandwidth between the ranks, written as a
matrix topology — :func:`~partplan.runtime.probe.run_probe`, started by
``partplan topology probe`` (no ``run`` subcommand of its own)."""
from __future__ import annotations

from .registry import Job, register


def _start(cfg: dict, nprocs: int | None, threads: int | None) -> dict | None:
    from ..runtime.probe import run_probe
    return run_probe(cfg["output"], nprocs=nprocs, backend=cfg.get("backend", "gloo"), small=cfg.get("small", 8),
                     large=cfg.get("large", 1 << 22), repeat=cfg.get("repeat", 5), timeout=cfg.get("timeout", 60.0))


def _rank(ctx, cfg: dict) -> dict | None:
    """One launched rank: the probe worker (``cfg`` as :func:`run_probe` wrote it)."""
    from ..runtime.probe import probe_worker
    return probe_worker(cfg)


register(Job(name="topoprobe", command=None, help="measure pairwise latency and bandwidth (topology probe)",
             run=_rank, start=_start))
