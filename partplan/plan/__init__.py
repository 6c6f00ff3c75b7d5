"""Communication plans: build (vectorized), store (Arrow IPC shards + JSON
manifest), load per rank (memory-mapped, checksummed) and validate.

A plan is an exchange program (:mod:`.program`): named groups and the ordered
steps of the forward and backward passes, with each rank's step arrays in its
own shard. Format: plans/SCHEMA.md. Guide: docs/plans.md.
"""
from .builder import Plan, RankPlan, build_plan
from .schema import FORMAT_VERSION
from .store import load_plan, read_manifest, write_plan


def __getattr__(name):  # validation replays plans through the runtime: it lives above it (partplan.validation)
    if name in ("replay", "replay_backward", "validate_plan"):
        from .. import validation
        return getattr(validation, name)
    raise AttributeError(name)


__all__ = ["FORMAT_VERSION", "Plan", "RankPlan", "build_plan", "load_plan", "read_manifest", "replay",
           "replay_backward", "validate_plan", "write_plan"]
