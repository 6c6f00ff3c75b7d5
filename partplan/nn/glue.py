"""Loss and metrics over every rank's rows, for a training loop that runs one
process per rank (torch.distributed) — the sums a PyG loop takes for granted
on one process.

* :func:`global_mean` — this rank's share of the mean over the rows of all
  ranks (e.g. the training nodes): summed over the ranks, the shares are the
  global mean, so summed (or, with ``ddp=True``, averaged) gradients are the
  gradients of the single-process loss. A rank without rows contributes 0,
  never NaN.
* :func:`accuracy` — the fraction of correct predictions over all ranks' rows.

Without torch.distributed initialized the world is this process alone.
"""
from __future__ import annotations

import torch

__all__ = ["accuracy", "global_mean"]


def _world(group=None) -> int:
    import torch.distributed as dist
    return dist.get_world_size(group) if dist.is_available() and dist.is_initialized() else 1


def _allreduce(t: torch.Tensor, group=None) -> torch.Tensor:
    import torch.distributed as dist
    if _world(group) > 1:
        dist.all_reduce(t, group=group)
    return t


def global_mean(values: torch.Tensor, mask: torch.Tensor | None = None, *, ddp: bool = False,
                group=None) -> torch.Tensor:
    """This rank's share of the mean of ``values[mask]`` over all ranks.

    Parameters
    ----------
    values : per-row values of this rank (e.g. ``F.cross_entropy(out, y,
        reduction="none")``), first dimension = rows.
    mask : bool per row (e.g. the training mask of this rank's rows), or None
        (every row).
    ddp : True when the gradients are averaged over the ranks
        (``DistributedDataParallel``): the share is scaled by the world size so
        that the averaged gradient is the global mean's. False when they are
        summed (an all-reduce of the gradients).
    group : the process group (default: the world).

    Returns a scalar tensor (autograd-aware): ``sum(values[mask]) / N`` with
    N = rows selected on all ranks together (one all-reduce of an int64). Its
    value differs per rank; the sum over the ranks is the global mean.
    """
    sel = values if mask is None else values[mask]
    n = torch.tensor([sel.shape[0]], dtype=torch.int64, device=values.device)
    total = int(_allreduce(n, group).item())
    scale = (_world(group) if ddp else 1) / max(total, 1)
    return sel.sum() * scale


def accuracy(pred: torch.Tensor, y: torch.Tensor, mask: torch.Tensor | None = None, *, group=None) -> float:
    """Fraction of rows with ``pred == y`` over all ranks' selected rows.

    ``pred`` : class ids, or logits / scores (rows × classes: ``argmax(1)`` is
    taken); ``y`` : class ids; ``mask`` : bool per row (None: every row).
    Returns a float in [0, 1] (NaN when no rank selects a row). Collective:
    every rank calls it.
    """
    if pred.dim() > 1:
        pred = pred.argmax(dim=1)
    ok = pred == y
    if mask is not None:
        ok = ok[mask]
    c = torch.tensor([float(ok.sum()), float(ok.numel())], dtype=torch.float64, device=pred.device)
    c = _allreduce(c, group).cpu()
    return float(c[0] / c[1]) if c[1] > 0 else float("nan")
