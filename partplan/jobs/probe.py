"""``topoprobe``: pairwise latency / bandwidth between the ranks, written as a
matrix topology — :func:`~partplan.runtime.probe.probe_config` checks the
options, every process runs :func:`~partplan.runtime.probe.probe_rank` (the
same work as :func:`~partplan.runtime.probe.run_probe`, which ``partplan
topology probe`` calls); no ``run`` subcommand of its own."""
from __future__ import annotations

from .registry import Job, register


def _prepare(cfg: dict, nprocs: int | None, threads: int | None) -> dict:
    from ..io.outpath import check_output_file
    from ..runtime.probe import probe_config
    if cfg.get("output") is not None:   # a folder it cannot write to ends the probe before it starts
        check_output_file(cfg["output"], kind="any")
    return probe_config(cfg, nprocs)


def _rank(ctx, cfg: dict) -> dict | None:
    from ..runtime.probe import probe_rank
    return probe_rank(ctx, cfg)


register(Job(name="topoprobe", command=None, help="measure pairwise latency and bandwidth (topology probe)",
             prepare=_prepare, run=_rank))
