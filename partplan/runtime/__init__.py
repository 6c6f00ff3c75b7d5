"""The runtime: one interpreter of plan exchange programs over two comm backends.

* :class:`Executor` (:mod:`.interpreter`) — runs a plan's forward / backward
  program; :class:`LocalComm` (p virtual ranks, numpy, the exact oracle) or
  :class:`TorchComm` (torch.distributed, gloo / NCCL).
* :func:`run_spmm` (:mod:`.spmm`) — ``Z = A @ H`` from a plan on p processes
  (spawned locally or under torchrun), measured bytes and times.
* :class:`DistSpMM` — the executor inside a user's own torch training loop.

torch is imported only by the torch parts; the numpy path runs without it.
"""
from .comm import Comm, CommError, LocalComm, TorchComm, init_distributed
from .interpreter import PHASES, Executor
from .ops import KERNELS, NumpyOps, TorchOps


def __getattr__(name):  # lazy: spmm imports the launcher
    if name in ("run_spmm", "DistSpMM", "replay", "local_executor"):
        from . import spmm
        return getattr(spmm, name)
    raise AttributeError(name)


__all__ = ["Comm", "CommError", "LocalComm", "TorchComm", "init_distributed", "Executor", "PHASES",
           "KERNELS", "NumpyOps", "TorchOps", "run_spmm", "DistSpMM", "replay", "local_executor"]
