"""Overflow and non-finite values, agreed by every rank.

A value that overflows on one rank (a float32 SpMM whose products exceed
3.4e38, an SSSP distance past float64's range) must end the job the same way
on every rank: one ``PlanError`` naming the rank, the step and the cause,
raised by all of them — not an error on one rank and a dead-peer error on the
others. :func:`agree` is the collective that makes that possible: each local
rank offers its first problem as a few numbers (its own sort key first),
every rank learns the one with the smallest (key, rank), and builds the same
message from it. It costs one small world all-reduce when no rank has a
problem (the call every rank makes anyway), two when one has.
"""
from __future__ import annotations

import numpy as np

from ..errors import PlanError


def nonfinite(a) -> bool:
    """Whether the numpy array or torch tensor ``a`` holds a NaN or an infinity."""
    if hasattr(a, "detach"):
        import torch
        return bool(a.numel()) and not bool(torch.isfinite(a).all())
    a = np.asarray(a)
    return a.dtype.kind == "f" and a.size > 0 and not bool(np.isfinite(a).all())


def agree(comm, items: list, width: int) -> tuple[int, np.ndarray] | None:
    """Collective (every rank calls it, one item per local rank): ``items[i]``
    is None or a float64 vector of ``width`` numbers whose first is the
    problem's sort key (a non-negative integer below 2**40, e.g. a step or
    round index). Returns (rank, vector) of the problem with the smallest
    (key, rank) over all ranks, or None when no rank has one."""
    p = int(comm.world)
    keys = []
    for r, it in zip(comm.local, items):
        keys.append(np.array([-np.inf if it is None else -(float(it[0]) * p + r)]))  # max picks the smallest
    best = comm.allreduce_world(keys, "max")[0][0] if p > 1 else max(k[0] for k in keys)
    if not np.isfinite(best):
        return None
    key = int(round(-best))
    rank = key % p
    vecs = [np.asarray(it, dtype=np.float64) if (it is not None and r == rank) else np.zeros(width)
            for r, it in zip(comm.local, items)]
    if p > 1 and len(comm.local) == 1:
        vec = comm.allreduce_world(vecs, "sum")[0]
    else:
        vec = np.sum(np.stack(vecs), axis=0)
    return rank, vec


def raise_agreed(comm, items: list, width: int, message) -> None:
    """:func:`agree`, then one PlanError on every rank: ``message(rank, vector)``."""
    got = agree(comm, items, width)
    if got is not None:
        raise PlanError(message(*got))
