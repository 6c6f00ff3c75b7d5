"""Loss and metrics over every rank's rows, for a training loop that runs one
process per rank (torch.distributed) — the sums a PyG loop takes for granted
on one process.

* :func:`global_mean` — this rank's share of the mean over the rows of all
  ranks (e.g. the training nodes): summed over the ranks, the shares are the
  global mean, so summed (or, with ``ddp=True``, averaged) gradients are the
  gradients of the single-process loss. A rank without rows contributes 0,
  never NaN.
* :func:`accuracy` — the fraction of correct predictions over all ranks' rows.
* :func:`shared_plan` — one rank partitions the graph and writes the plan, the
  others wait for it (and get its error if it fails).
* :func:`row_dropout` — dropout whose mask is a function of (seed, global row
  id, column) only: every rank drops what one process would, whichever rank
  holds the row (``F.dropout`` draws from each rank's own generator).

Without torch.distributed initialized the world is this process alone.
"""
from __future__ import annotations

import numpy as np
import torch

from ..errors import OptionError

__all__ = ["accuracy", "global_mean", "row_dropout", "shared_plan"]


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
    bad = _refused(lambda: _check_rows("global_mean", values, mask))
    sel = None if bad else (values if mask is None else values[mask])
    n = torch.tensor([0 if bad else sel.shape[0], int(bad is not None)], dtype=torch.int64,
                     device=_device_of(values))
    total, refused = (int(v) for v in _allreduce(n, group).tolist())
    _raise_if_refused("global_mean", bad, refused)
    scale = (_world(group) if ddp else 1) / max(total, 1)
    return sel.sum() * scale


def _refused(check) -> OptionError | None:
    """The OptionError ``check()`` raises (None when it passes): kept, so that the rank still meets
    its peers in the collective and every rank raises, instead of the peers waiting on it."""
    try:
        check()
    except OptionError as exc:
        return exc
    return None


def _raise_if_refused(what: str, mine: OptionError | None, refused: int) -> None:
    """After the collective: this rank's own refusal, or one naming the ranks' count that refused."""
    if mine is not None:
        raise mine
    if refused:
        raise OptionError(f"{what}: {refused} other rank(s) passed arguments it refuses (their error names them); "
                          f"this rank's were fine")


def _device_of(t) -> torch.device:
    return t.device if isinstance(t, torch.Tensor) else torch.device("cpu")


def _check_rows(what: str, values, mask) -> None:
    """``values`` a tensor with a first dimension; ``mask`` None or a bool tensor of one entry per
    row (an integer mask would index rows: 0/1 would pick rows 0 and 1, silently)."""
    if not isinstance(values, torch.Tensor) or values.dim() == 0:
        raise OptionError(f"{what}: values must be a tensor with one row per vertex, got "
                          f"{type(values).__name__}")
    if mask is not None and not (isinstance(mask, torch.Tensor) and mask.dtype == torch.bool
                                 and tuple(mask.shape) == tuple(values.shape[:1])):
        got = f"{mask.dtype} {tuple(mask.shape)}" if isinstance(mask, torch.Tensor) else type(mask).__name__
        raise OptionError(f"{what}: mask must be a bool tensor of one entry per row ({values.shape[0]}), got {got}")


def accuracy(pred: torch.Tensor, y: torch.Tensor, mask: torch.Tensor | None = None, *, group=None) -> float:
    """Fraction of rows with ``pred == y`` over all ranks' selected rows.

    ``pred`` : class ids, or logits / scores (rows × classes: ``argmax(1)`` is
    taken); ``y`` : class ids; ``mask`` : bool per row (None: every row).
    Returns a float in [0, 1] (NaN when no rank selects a row). Collective:
    every rank calls it.
    """
    def check():
        _check_rows("accuracy", pred, mask)
        if not isinstance(y, torch.Tensor) or y.shape != pred.shape[:1]:
            raise OptionError(f"accuracy: y must be a tensor of one class id per row ({pred.shape[0]}), got "
                              f"{tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__}")
    bad = _refused(check)
    right = seen = 0.0
    if bad is None:
        ok = (pred.argmax(dim=1) if pred.dim() > 1 else pred) == y
        if mask is not None:
            ok = ok[mask]
        right, seen = float(ok.sum()), float(ok.numel())
    c = torch.tensor([right, seen, float(bad is not None)], dtype=torch.float64, device=_device_of(pred))
    right, seen, refused = _allreduce(c, group).cpu().tolist()
    _raise_if_refused("accuracy", bad, int(refused))
    return right / seen if seen > 0 else float("nan")


def shared_plan(data, path, *, reuse: bool = False, group=None, **plan_options) -> str:
    """Rank 0 partitions ``data`` (a PyG ``Data`` or anything
    :func:`partplan.plan_from_pyg` takes) for the job's world size and writes
    the plan to ``path``; every rank returns ``path`` once it is written.

    ``plan_options`` go to :func:`partplan.plan_from_pyg` (``normalize``,
    ``seed``, ``model``, ...). With ``reuse=True`` rank 0 keeps a plan already
    at ``path`` when it reads, is for this many ranks and the same
    ``normalize``, and was built for this graph: the manifest's
    ``graph.source_fingerprint`` is the matrix fingerprint of the graph
    :func:`partplan.plan_from_pyg` builds from ``data`` with the same
    ``flow`` / ``weight`` / ``normalize`` (:func:`partplan.interop.pyg.plan_graph`;
    edges, weights and vertex count, no partition computed); otherwise it
    partitions again and overwrites ``path``. Rank 0 alone decides, so the
    ranks never disagree; ``path`` must be on a filesystem every rank reads. On NCCL
    call ``torch.cuda.set_device`` first (the broadcast runs on the device). The ranks meet in one broadcast from rank 0
    (the process group's timeout applies): if rank 0 fails, every rank raises
    a :class:`~partplan.errors.PlanError` with its message instead of waiting.
    Without torch.distributed initialized the world is this process alone.

    With ``shares=True`` the plan is written with each rank's share of
    ``data`` (:mod:`partplan.nn.shares`); a reused plan gets its shares
    written again from ``data`` (its features may have changed).

    Example (each rank of ``torchrun --nproc-per-node 2``)::

        op = partplan.nn.Halo(partplan.nn.shared_plan(data, "g.plan", shares=True))
    """
    import torch.distributed as dist

    from ..errors import PlanError
    from ..interop import plan_from_pyg
    world = _world(group)
    rank = dist.get_rank(group) if world > 1 else 0
    err, failure = None, None
    if rank == 0:
        try:
            if not (reuse and _plan_for(path, world, data, plan_options)):
                plan_from_pyg(data, world, out=path, **plan_options)
            elif plan_options.get("shares"):   # the plan is kept; the shares are rewritten from this data
                from .shares import write_shares
                write_shares(path, data)
        except Exception as exc:  # noqa: BLE001 - every rank must hear of it, then rank 0 re-raises it
            err, failure = f"{type(exc).__name__}: {exc}", exc
    if world > 1:
        box = [err]
        dist.broadcast_object_list(box, src=dist.get_global_rank(group, 0) if group is not None else 0,
                                   group=group)
        err = box[0]
    if failure is not None:
        raise failure
    if err is not None:
        raise PlanError(f"rank 0 could not write the plan {str(path)!r}: {err}")
    return str(path)


def _plan_for(path, ranks: int, data, plan_options: dict) -> bool:
    """True when ``path`` holds a plan (its manifest reads) for ``ranks`` ranks,
    the normalization ``plan_options["normalize"]`` and the graph
    :func:`partplan.plan_from_pyg` builds from ``data`` with these options
    (:func:`partplan.plan.store.source_matches`: the matrix fingerprint,
    weights and vertex count included). The graph is built only when the
    cheap fields match; a graph that cannot be built raises (as
    :func:`plan_from_pyg` would)."""
    from ..errors import PartplanError
    from ..interop.pyg import plan_graph
    from ..plan.store import read_manifest, source_matches
    normalize = plan_options.get("normalize")
    try:
        m = read_manifest(path)
        if int(m["ranks"]) != ranks or m.get("normalize") != normalize:
            return False
    except (PartplanError, OSError, KeyError, TypeError, ValueError):
        return False
    g = plan_graph(data, normalize=normalize, flow=plan_options.get("flow", "source_to_target"),
                   weight=plan_options.get("weight"))
    return int(m["graph"].get("n", -1)) == g.n and source_matches(m, g)


def row_dropout(x: torch.Tensor, ids, p: float, seed: int, *, training: bool = True) -> torch.Tensor:
    """Dropout of the rows ``x`` (first dimension = rows) whose global ids are ``ids``: each entry
    kept with probability 1 − ``p`` by a hash of (``seed``, the row's global id, its column) and
    scaled by 1 / (1 − ``p``), so the same rows get the same mask on any rank and in one process
    (use another ``seed`` per layer and epoch). The identity when not ``training`` or ``p`` = 0.
    Autograd flows through the kept entries.

    x : a 1-D or 2-D tensor; ids : one global id per row (``op.local_ids`` of a ``Halo``, or
    ``torch.arange(n)`` in one process); p : in [0, 1); seed : an integer.

    >>> import torch
    >>> x = torch.ones(6, 4)
    >>> whole = row_dropout(x, torch.arange(6), 0.5, seed=3)
    >>> part = row_dropout(x[[4, 1]], torch.tensor([4, 1]), 0.5, seed=3)
    >>> bool(torch.equal(part, whole[[4, 1]]))
    True
    """
    from .._args import as_numpy, check_bool, check_int, check_real
    from .gcn import dropout_mask
    p = check_real("p", p, lo=0.0, hi=1.0, hi_open=True)
    seed = check_int("seed", seed, lo=-(1 << 63), hi=(1 << 63) - 1)
    training = check_bool("training", training)
    if not isinstance(x, torch.Tensor) or x.dim() not in (1, 2):
        raise OptionError(f"row_dropout: x must be a 1-D or 2-D tensor (rows first), got "
                          f"{type(x).__name__}{tuple(x.shape) if isinstance(x, torch.Tensor) else ''}")
    ids = as_numpy(ids, OptionError, "row_dropout: ids: ")
    if ids.shape != (x.shape[0],) or (ids.size and (ids.dtype.kind not in "iu" or int(ids.min()) < 0)):
        raise OptionError(f"row_dropout: ids must hold one global row id (an integer >= 0) per row of x "
                          f"({x.shape[0]}), got {ids.dtype} {ids.shape}")
    if not training or p == 0.0:
        return x
    width = 1 if x.dim() == 1 else x.shape[1]
    keep = torch.from_numpy(dropout_mask(ids.astype(np.int64), width, p, seed)).to(x.device)
    return x * keep.reshape(x.shape).to(x.dtype) * (1.0 / (1.0 - p))
