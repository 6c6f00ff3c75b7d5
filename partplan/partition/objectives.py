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


def check_planner_preset(preset, backend: str | None = None) -> str:
    """"fast", "auto" (the default pipeline), a Mt-KaHyPar preset name
    (normalized, e.g. "quality" -> "QUALITY") or, for ``backend="kaminpar"``
    (or a name only KaMinPar has, e.g. "strong"), a KaMinPar context; else
    :class:`~partplan.errors.BackendUnavailableError` (as Mt-KaHyPar's own check)."""
    from .kaminpar import CONTEXTS, check_context

    if backend == "kaminpar":
        return check_context(preset)
    if isinstance(preset, str) and preset.lower() in (FAST_PRESET, AUTO_PRESET):
        return preset.lower()
    from ..errors import BackendUnavailableError
    from .backends import PRESETS, check_preset
    try:
        return check_preset(preset)
    except BackendUnavailableError:
        if isinstance(preset, str) and preset.lower().replace("_", "-") in CONTEXTS:
            return check_context(preset)
        raise BackendUnavailableError(f"unknown mtkahypar preset {preset!r}; choose one of {', '.join(PRESETS)}; "
                                      f"or the planner's fast / auto; or (backend kaminpar) a KaMinPar context: "
                                      f"{', '.join(CONTEXTS)}") from None


def balance_cap(weights: np.ndarray, part: np.ndarray, k: int, imbalance: float) -> tuple[int, int]:
    """(cap, limit): the largest part weight a move may create, and the ε-limit
    ⌊(1+ε)·⌈W/k⌉⌋ (the planner's definition). cap = max(limit, heaviest input
    part) so an input that already violates ε never gets worse."""
    W = int(weights.sum())
    limit = int(np.floor((1.0 + imbalance) * -(-W // k)))
    heaviest = int(np.bincount(part, weights=weights, minlength=k).max()) if part.size else 0
    return max(limit, heaviest), limit
