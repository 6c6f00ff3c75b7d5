"""The plan format: what a communication plan *is*, independent of how it is
built, stored or run.

* :mod:`.core` — :class:`Program` (named groups, ordered steps, per-rank
  arrays) and :class:`Group`; the count matrices of a program.
* :mod:`.steps` — the step registry: one class per step op (its fields,
  arrays, phase, structure checks); the interpreter, the validator and the
  byte predictions all ask it.
* :mod:`.exchange` — the vectorized exchange lists (who sends which row to
  whom) the layouts turn into steps.
* :mod:`.schema` — format name, versions, file names.
* :mod:`.plan` — :class:`Plan` / :class:`RankPlan`: a plan as data.
* :mod:`.checks` — the one home of structure checks of manifests and shards
  (used by the store, the runtime and ``validate``).

This layer imports only the lower ones (io's trust helpers, metrics, errors).
"""
from .core import Group, Program
from .plan import Plan, RankPlan, manifest_groups, manifest_volume, program_steps
from .schema import FORMAT, FORMAT_VERSION
from .steps import STEPS

__all__ = ["FORMAT", "FORMAT_VERSION", "Group", "Plan", "Program", "RankPlan", "STEPS", "manifest_groups",
           "manifest_volume", "program_steps"]
