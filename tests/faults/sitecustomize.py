"""Test-only fault injection for launched workers (never imported by partplan).

A test puts this folder first on ``PYTHONPATH`` and sets ``KILL_AT_EXCHANGE``
to ``RANK:N[:METHOD]``: the worker of that rank SIGKILLs itself at its N-th
call of ``TorchComm.METHOD`` (default ``start``, the plan's all-to-all-v;
``exchange_rows`` for the distributed plan build) — a peer that dies in the
middle of a job; ``METHOD@FUNC`` counts only the calls made from a function
named FUNC. With ``FAULT_ACTION=pause`` it sleeps there instead (a
peer that hangs, or a job to interrupt at a known point). The patch is applied when ``partplan.runtime.comm`` is
first imported (an import hook; nothing is imported ahead of the worker).
"""
import importlib.abc
import importlib.util
import os
import signal
import sys

_SPEC = os.environ.get("KILL_AT_EXCHANGE", "")


def _patch(module) -> None:
    rank, count, *rest = _SPEC.split(":")
    if os.environ.get("RANK") != rank:
        return
    method, _, caller = (rest[0] if rest else "start").partition("@")
    cls = module.TorchComm
    orig = getattr(cls, method)
    seen = [0]

    def dying(self, *args, **kwargs):
        if caller and sys._getframe(1).f_code.co_name != caller:
            return orig(self, *args, **kwargs)
        seen[0] += 1
        if seen[0] >= int(count):
            if os.environ.get("FAULT_ACTION") == "pause":
                import time
                time.sleep(3600)
            os.kill(os.getpid(), signal.SIGKILL)
        return orig(self, *args, **kwargs)
    setattr(cls, method, dying)


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "partplan.runtime.comm":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)
        spec.loader.exec_module = exec_module
        return spec


if _SPEC:
    sys.meta_path.insert(0, _Hook())
