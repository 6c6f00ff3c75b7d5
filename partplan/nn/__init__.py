"""GNN training from plans.

* :mod:`.normalize` — adjacency normalizations (``gcn``, ``mean``) that the
  planner stores as plan values (numpy only).
* :mod:`.data` — node-classification data files (``x``, ``y``, masks) and
  labeled datasets (polblogs).
* :mod:`.gcn` — :class:`DistGCN` and the autograd function over the plan's
  exchange programs (torch).
* :class:`DistSpMM` (:mod:`partplan.runtime.dist_spmm`): ``Z = A @ H`` from a
  plan as an autograd-aware ``torch.nn.Module`` for your own torchrun script.
* :class:`Halo` (:mod:`.halo`): a 1D plan's local rows plus their halo rows
  (the plan's exchange, autograd-aware) for any PyG layer; :class:`LocalHalo`
  runs every rank in one process.
* :mod:`.shares` — each rank's share of a PyG ``Data`` beside a 1D plan
  (:func:`write_shares`, :func:`read_share`): what ``Halo(PATH)`` and the loader read.
* :class:`NeighborLoader` (:mod:`.loader`): PyG-style neighbour sampling over
  the shares for any model; remote neighbours by one all-to-all per hop.
* :func:`global_mean`, :func:`accuracy`, :func:`row_dropout` (:mod:`.glue`): the
  loss share, metrics over every rank's rows and dropout masks keyed on global
  row ids, for your own loop.
* :mod:`.train` — :func:`train_gcn`: full-batch and mini-batch training on p
  processes (gloo / NCCL) or p virtual ranks (LocalComm), measured.

torch is imported only by the torch parts.
"""
from .normalize import NORMALIZATIONS, NormalizationError, check_normalize, normalize_adjacency


def __getattr__(name):  # lazy: torch only when asked for
    if name in ("DistGCN", "PlanSpMM"):
        from . import gcn
        return getattr(gcn, name)
    if name == "DistSpMM":  # defined with the runtime it drives (partplan.runtime.dist_spmm)
        from ..runtime.dist_spmm import DistSpMM
        return DistSpMM
    if name in ("Halo", "LocalHalo", "HaloRank"):
        from . import halo
        return getattr(halo, name)
    if name == "NeighborLoader":
        from .loader import NeighborLoader
        return NeighborLoader
    if name in ("write_shares", "read_share"):
        from . import shares
        return getattr(shares, name)
    if name in ("global_mean", "accuracy", "shared_plan", "row_dropout"):
        from . import glue
        return getattr(glue, name)
    if name in ("train_gcn",):
        from . import train
        return getattr(train, name)
    raise AttributeError(name)


__all__ = ["NORMALIZATIONS", "NormalizationError", "check_normalize", "normalize_adjacency", "DistGCN",
           "PlanSpMM", "DistSpMM", "Halo", "LocalHalo", "HaloRank", "train_gcn",
           "global_mean", "accuracy", "shared_plan", "row_dropout", "NeighborLoader", "write_shares", "read_share"]
