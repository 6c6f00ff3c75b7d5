"""Entry point of a launched worker: ``python -m partplan.runtime.worker CONFIG.json``.

Runs the job named by ``config["job"]`` on this rank (the function named in
:data:`JOBS`); rank 0 writes the report to ``config["result"]``. A user error
ends with one line ``partplan: error: ...`` on stderr and exit status 2.
"""
from __future__ import annotations

import importlib
import json
import os
import sys

from ..errors import PartplanError

# job name -> "module:function" taking the config dict (one table; each job adds its line)
JOBS = {
    "spmm": "partplan.runtime.spmm:spmm_worker",
    "topoprobe": "partplan.runtime.probe:probe_worker",
    "train-gcn": "partplan.nn.train:train_worker",
    **{j: "partplan.runtime.graphjobs:graph_worker" for j in ("bfs", "graph500", "pagerank", "wcc", "sssp")},
}


def run_job(cfg: dict):
    """Run ``cfg["job"]`` on this rank (import its worker lazily)."""
    job = cfg.get("job", "spmm")
    if job not in JOBS:
        raise PartplanError(f"unknown job {job!r} (known: {', '.join(sorted(JOBS))})")
    mod, fn = JOBS[job].split(":")
    return getattr(importlib.import_module(mod), fn)(cfg)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as fh:
        cfg = json.load(fh)
    try:
        run_job(cfg)
    except PartplanError as exc:
        print(f"partplan: error: {exc}", file=sys.stderr, flush=True)
        return 2
    return 0


def _exit_now(code: int) -> None:
    """Leave without running C++ static destructors: after the process group is
    destroyed, torch/gloo threads torn down at interpreter exit can end a
    finished worker with ``terminate called without an active exception``
    (SIGABRT), seen intermittently after 4-process training runs. Everything
    the job writes is written (atomically) and flushed before this."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit_now(main())
