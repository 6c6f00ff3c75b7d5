"""Entry point of a launched worker: ``python -m partplan.runtime.worker CONFIG.json``.

Runs ``config["entry"]`` (``module:function``, written by
:func:`partplan.runtime.launch.launch` from the worker function it was given)
on ``config`` in this rank. The runtime keeps no table of job names: which
function a job's ranks run is the caller's choice (the job registry,
:mod:`partplan.jobs`, or the runtime's own ``run_spmm`` / ``run_probe``).
A user error ends with one line ``partplan: error: ...`` on stderr and exit
status 2.
"""
from __future__ import annotations

import importlib
import json
import os
import sys

from ..errors import PartplanError


def run_entry(cfg: dict):
    """Import ``cfg["entry"]`` (``module:function``) and run it on ``cfg``."""
    entry = cfg.get("entry")
    if not isinstance(entry, str) or entry.count(":") != 1:
        raise PartplanError(f"the worker config names no entry function (module:function), got {entry!r}")
    mod, fn = entry.split(":")
    try:
        func = getattr(importlib.import_module(mod), fn)
    except (ImportError, AttributeError) as exc:
        raise PartplanError(f"worker entry {entry}: {exc}") from None
    return func(cfg)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as fh:
        cfg = json.load(fh)
    try:
        run_entry(cfg)
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
