"""The planner's objectives, presets and balance cap: one list, one check each.

``objective`` (``partition(..., objective=)``, ``refine(..., objective=)``,
``--objective``): "total" = the partitioner's volume alone; the others run
bottleneck refinement (:mod:`partplan.partition.refine`). Decoupled ownership
takes the subset :data:`OWNER_OBJECTIVES`. An unknown name is one
:class:`~partplan.errors.OptionError` wherever it is given.

``preset``: Mt-KaHyPar's presets (:data:`partplan.partition.backends.PRESETS`)
or the planner's own "fast" (METIS + km1 refinement, docs/refinement.md).
"""
from __future__ import annotations

import numpy as np

from ..errors import OptionError

OBJECTIVES = ("total", "max-send", "max-recv", "max-both", "weighted")
OWNER_OBJECTIVES = ("max-send", "max-both")
FAST_PRESET = "fast"
AUTO_PRESET = "auto"   # the default pipeline (partition/pipeline.py)


def check_objective(objective, allowed=OBJECTIVES, what: str = "objective") -> str:
    """Return ``objective`` or raise :class:`OptionError` listing the choices.

    >>> check_objective("max-both")
    'max-both'
    """
    if not isinstance(objective, str) or objective not in allowed:
        raise OptionError(f"unknown {what} {objective!r}; choose one of {', '.join(allowed)}")
    return objective


def balance_cap(weights: np.ndarray, part: np.ndarray, k: int, imbalance: float) -> tuple[int, int]:
    """(cap, limit): the largest part weight a move may create, and the ε-limit
    ⌊(1+ε)·⌈W/k⌉⌋ (the planner's definition). cap = max(limit, heaviest input
    part) so an input that already violates ε never gets worse."""
    W = int(weights.sum())
    limit = int(np.floor((1.0 + imbalance) * -(-W // k)))
    heaviest = int(np.bincount(part, weights=weights, minlength=k).max()) if part.size else 0
    return max(limit, heaviest), limit
