"""The planner's objectives, presets and balance cap: one list, one check each.

``objective`` (``partition(..., objective=)``, ``refine(..., objective=)``,
``--objective``): "total" = the partitioner's volume alone; the others run
bottleneck refinement (:mod:`partplan.partition.refinement.refine`). Decoupled ownership
takes the subset :data:`OWNER_OBJECTIVES`. An unknown name is one
:class:`~partplan.errors.OptionError` wherever it is given.

``preset``: Mt-KaHyPar's presets (:data:`partplan.partition.engines.PRESETS`)
or the planner's own "fast" (METIS + km1 refinement, docs/design/refinement.md).
"""
from __future__ import annotations

import numpy as np

from ..errors import OptionError

OBJECTIVES = ("total", "max-send", "max-recv", "max-both", "weighted")
OWNER_OBJECTIVES = ("max-send", "max-both")
FAST_PRESET = "fast"
AUTO_PRESET = "auto"   # the default pipeline (partition/pipeline/auto.py)


def check_objective(objective, allowed=OBJECTIVES, what: str = "objective") -> str:
    """Return ``objective`` or raise :class:`OptionError` listing the choices.

    >>> check_objective("max-both")
    'max-both'
    """
    if not isinstance(objective, str) or objective not in allowed:
        raise OptionError(f"unknown {what} {objective!r}; choose one of {', '.join(allowed)}")
    return objective


def eps_limit(total_weight: int, k: int, imbalance: float) -> int:
    """The ε-limit of one part, ⌊(1+ε)·⌈W/k⌉⌋: the one balance limit of every partitioner in
    partplan. The single-process pipeline applies it to the balance weights (row nnz, at least 1
    per row, or the graph's vertex weights) and, on graphs without vertex weights and with empty
    rows, to the row nonzeros as well; the distributed
    partitioner (its refinement, connectivity passes and whole-graph refinement) to the row
    nonzeros. So a partition the single-process pipeline returns keeps the distributed limit too,
    unless no partition can (a row heavier than the limit).

    >>> eps_limit(19, 3, 0.0), eps_limit(100, 4, 0.03), eps_limit(101, 4, 0.03)
    (7, 25, 26)
    """
    return int(np.floor((1.0 + imbalance) * -(-int(total_weight) // k)))


def balance_cap(weights: np.ndarray, part: np.ndarray, k: int, imbalance: float) -> tuple[int, int]:
    """(cap, limit): the largest part weight a move may create, and the ε-limit
    ⌊(1+ε)·⌈W/k⌉⌋ (the planner's definition). cap = max(limit, heaviest input
    part) so an input that already violates ε never gets worse."""
    limit = eps_limit(int(weights.sum()), k, imbalance)
    heaviest = int(np.bincount(part, weights=weights, minlength=k).max()) if part.size else 0
    return max(limit, heaviest), limit


def balance_floor(row_nnz: np.ndarray, parts: int, imbalance: float,
                  weights: np.ndarray | None = None) -> dict | None:
    """Why no row partition into ``parts`` parts can be within the ε-limit because of one row, or
    None when no single row is heavier than that limit.

    The limit is the planner's ⌊(1+ε)·⌈W/k⌉⌋ on the balance weights (``weights``: the graph's own
    vertex weights; None: row nnz, at least 1 per row); a row heavier than it puts its part above the
    limit in every partition. (Rows that are each light enough but cannot be packed, e.g. four rows of
    7 into 3 parts of 10, are a bin-packing question and are not detected.) Returns {"row": the
    heaviest row (id), "row_weight": its weight, "limit": the ε-limit, "imbalance": ε,
    "compute_imbalance_at_least": a lower bound on the compute imbalance (row nonzeros) of every
    partition, max row nnz / (nnz / parts) − 1, or 0 when no row's nonzeros exceed a part's mean}.

    >>> balance_floor(np.array([9, 1, 1, 1, 1, 1, 1, 1]), 4, 0.03)["compute_imbalance_at_least"]
    1.25
    >>> balance_floor(np.array([2, 2, 2, 2]), 2, 0.03) is None
    True
    >>> balance_floor(np.array([1, 2, 2, 1]), 2, 0.03, weights=np.array([10, 1, 1, 1]))["compute_imbalance_at_least"]
    0.0
    """
    nnz = np.asarray(row_nnz, dtype=np.int64)
    if nnz.size == 0 or parts < 2:
        return None
    w = np.maximum(nnz, 1) if weights is None else np.asarray(weights, dtype=np.int64)
    row = int(np.argmax(w))
    return floor_of(row, int(w[row]), int(w.sum()), int(nnz.max()), int(nnz.sum()), parts, imbalance)


def floor_of(row: int, row_weight: int, total_weight: int, max_nnz: int, nnz: int, parts: int,
             imbalance: float) -> dict | None:
    """:func:`balance_floor` from the sums a reader can stream (a chunked graph's rows, chunk by
    chunk): the heaviest row's id and balance weight, the total balance weight, the most nonzeros of
    one row and the nonzeros in all."""
    if parts < 2:
        return None
    limit = eps_limit(total_weight, parts, imbalance)
    if row_weight <= limit:
        return None
    bound = max(0.0, float(max_nnz / (nnz / parts) - 1.0)) if nnz > 0 else 0.0
    return {"row": int(row), "row_weight": int(row_weight), "limit": limit, "imbalance": float(imbalance),
            "compute_imbalance_at_least": bound}


def compute_floor_of(row: int, max_nnz: int, nnz: int, parts: int, imbalance: float) -> dict | None:
    """Why no row partition into ``parts`` parts keeps every part's compute (row nonzeros) within
    the ε-limit ⌊(1+ε)·⌈nnz/k⌉⌋ because of one row, or None when no row has more nonzeros than it:
    {"row": the row with the most nonzeros (id), "row_nnz": its nonzeros, "limit": the compute
    limit, "imbalance": ε, "compute_imbalance_at_least": max row nnz / (nnz / parts) − 1}. On a
    graph without empty rows and vertex weights this is :func:`balance_floor` itself (the balance
    weights are the row nonzeros); with empty rows the balance limit counts them and can be above
    the compute limit that the pipeline and the distributed partitioner keep as well.

    >>> compute_floor_of(0, 29, 30, 2, 0.03)["limit"], compute_floor_of(0, 15, 30, 2, 0.03)
    (15, None)
    """
    if parts < 2 or nnz <= 0:
        return None
    limit = eps_limit(nnz, parts, imbalance)
    if max_nnz <= limit:
        return None
    return {"row": int(row), "row_nnz": int(max_nnz), "limit": limit, "imbalance": float(imbalance),
            "compute_imbalance_at_least": float(max_nnz / (nnz / parts) - 1.0)}
