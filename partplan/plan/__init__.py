"""Communication plans: build (vectorized), store (Arrow IPC shards + JSON
manifest), load per rank (memory-mapped, checksummed) and recount.

A plan is an exchange program (:mod:`partplan.program`): named groups and the ordered
steps of the forward and backward passes, with each rank's step arrays in its
own shard. Format: docs/reference/plan-format.md. Guide: docs/guide/plans.md.
"""
from ..program.plan import Plan, RankPlan
from .builder import build_plan
from ..program.schema import FORMAT_VERSION
from .store import load_plan, read_manifest, write_plan


__all__ = ["FORMAT_VERSION", "Plan", "RankPlan", "build_plan", "load_plan", "read_manifest",
           "write_plan"]
