"""Entry point of a launched worker: ``python -m partplan.runtime.worker CONFIG.json``.

Runs ``config["entry"]`` (``module:function``, written by
:func:`partplan.runtime.launch.launch` from the worker function it was given)
in this rank through :func:`partplan.runtime.launch.run_rank`: the worker
context opened, ``function(ctx, config)``, rank 0's report written, the
context closed. The runtime keeps no table of job names: which function a
job's ranks run is the caller's choice (a job of :mod:`partplan.jobs`, or
the runtime's own ``run_spmm`` / ``run_probe``).
A user error ends with one line ``partplan: error: ...`` on stderr and exit
status 2.

A worker started by the launcher dies with it: the first thing it does is
``prctl(PR_SET_PDEATHSIG, SIGKILL)`` (Linux), then it checks that its parent
is still the launcher (``$PARTPLAN_LAUNCHER_PID``) — if the launcher died
before the prctl, the worker leaves at once.
"""
from __future__ import annotations

import importlib
import json
import os
import sys

from .._process import die_with_parent
from ..errors import PartplanError

#: bytes of a worker config (the launcher writes a few KiB: paths, options, the job spec)
WORKER_CONFIG_MAX_BYTES = 64 << 20


def run_entry(cfg: dict):
    """Import ``cfg["entry"]`` (``module:function``) and run it on ``cfg`` in
    this process's worker context (:func:`~partplan.runtime.launch.run_rank`)."""
    entry = cfg.get("entry")
    if not isinstance(entry, str) or entry.count(":") != 1:
        raise PartplanError(f"the worker config names no entry function (module:function), got {entry!r}")
    mod, fn = entry.split(":")
    try:
        func = getattr(importlib.import_module(mod), fn)
    except (ImportError, AttributeError) as exc:
        raise PartplanError(f"worker entry {entry}: {exc}") from None
    from .launch import run_rank
    return run_rank(func, cfg)


def die_with_launcher() -> bool:
    """Ask the kernel to SIGKILL this process when its parent (the launcher)
    dies, then close the race: if the parent is already another process
    (the launcher died first; we were re-parented), exit now with status 137.
    Returns True when the death signal is set (Linux with a launcher pid in
    ``$PARTPLAN_LAUNCHER_PID``), False when there is nothing to do."""
    want = os.environ.get("PARTPLAN_LAUNCHER_PID")
    if not want or not sys.platform.startswith("linux"):
        return False
    return die_with_parent(int(want))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from ..io.jsonfile import read_json_bytes
    try:   # the launcher's own file (options may be NaN / inf there): bounded, a regular file, then parsed
        if not argv:
            raise PartplanError("worker config (none given)")
        raw = read_json_bytes(argv[0], max_bytes=WORKER_CONFIG_MAX_BYTES, what="worker config")
        try:
            cfg = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise PartplanError(f"{argv[0]}: worker config: not valid JSON ({exc})") from None
    except PartplanError as exc:
        print(f"partplan: error: {exc}", file=sys.stderr, flush=True)
        return 2
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
    die_with_launcher()
    _exit_now(main())
