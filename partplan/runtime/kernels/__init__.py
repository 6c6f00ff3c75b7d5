"""The per-rank compute of the graph jobs (BFS, PageRank, WCC, SSSP and the
frontier-stealing hooks), chosen from a table.

Two implementations with the same method names:

* ``native`` (:class:`~.native.NativeKernels`) — numba loops over a level's
  edges and numpy state arrays on the host (the CPU default);
* ``torch`` (:class:`~.torchk.TorchKernels`) — pure torch ops on any device
  (CPU or CUDA): top-down = the frontier columns' CSC ranges gathered with
  ``repeat_interleave`` and a ``scatter_reduce(amin)`` of their global ids,
  bottom-up = a masked segment minimum of edge positions (the first frontier
  in-edge in sorted order), SSSP relax and WCC row minima as
  ``scatter_reduce(amin)``. The state (visited, frontier, parents, levels,
  distances, labels, PageRank vectors) lives as tensors on the device and the
  frontier exchange packs positions / bitmaps / values there; only the counts
  (one int64 per peer) and the small per-level figures cross to the host.

Both give bitwise the same results: BFS parents are the smallest in-neighbour
global id in the frontier in every direction, ``edges_examined`` is counted
the same way (top-down: every edge of the frontier columns; bottom-up: the
edges scanned up to and including the first hit, the whole row without one),
SSSP adds the same float64 pair per edge and keeps the minimum, WCC labels are
integer minima. PageRank's SpMM runs through the plan's
:class:`~partplan.runtime.interpreter.Executor` (scipy on the host for
``native``, torch sparse CSR on the device for ``torch``); the two sum a row in
the same stored order.

``kernels`` = ``"auto"`` picks ``torch`` when the comm's device is CUDA and
``native`` otherwise; ``"native"`` with a CUDA device is an error (numba runs
on the host only).

>>> resolve("auto", None), resolve("torch", "cpu")
('native', 'torch')
"""
from __future__ import annotations

from ...errors import PlanError

CHOICES = ("auto", "torch", "native")


def device_type(device) -> str:
    """``"cpu"`` / ``"cuda"`` / ... of a torch device, device string or None (None: the host)."""
    if device is None:
        return "cpu"
    t = getattr(device, "type", None)
    return str(t) if t is not None else str(device).split(":", 1)[0]


def comm_device(comm):
    """The comm's torch device (``comm.device``), or None when it exchanges numpy arrays."""
    return getattr(comm, "device", None)


def resolve(kernels: str, device=None) -> str:
    """The implementation (``"torch"`` or ``"native"``) that ``kernels`` (one of
    :data:`CHOICES`) selects on ``device`` (a torch device, string, or None = host)."""
    if kernels not in CHOICES:
        raise PlanError(f"kernels must be one of {', '.join(CHOICES)}, got {kernels!r}")
    dt = device_type(device)
    if kernels == "auto":
        return "torch" if dt == "cuda" else "native"
    if kernels == "native" and dt != "cpu":
        raise PlanError(f"the native (numba) kernels run on the host; the job's device is {device} — "
                        f"use kernels 'torch' or 'auto'")
    return kernels


def make(kernels: str, device=None):
    """A kernel set (:class:`~.native.NativeKernels` or :class:`~.torchk.TorchKernels`)
    for ``kernels`` on ``device``; the torch set runs on ``device`` (None: CPU tensors)."""
    name = resolve(kernels, device)
    if name == "native":
        from .native import NativeKernels
        return NativeKernels()
    from .torchk import TorchKernels
    return TorchKernels(device)


def for_comm(kernels, comm):
    """:func:`make` on the comm's device; a kernel set passes through unchanged
    (after checking that it is on that device)."""
    if not isinstance(kernels, str):
        dev = comm_device(comm)
        if kernels.name == "torch" and dev is not None and str(kernels.device) != str(_torch_device(dev)):
            raise PlanError(f"the torch kernels run on {kernels.device} but the comm's device is {dev}")
        return kernels
    return make(kernels, comm_device(comm))


def _torch_device(dev):
    import torch
    return torch.device(dev)


__all__ = ["CHOICES", "resolve", "make", "for_comm", "comm_device", "device_type"]
