"""Communication plans: build (vectorized), store (Arrow IPC shards + JSON
manifest), load per rank (memory-mapped, checksummed), validate and replay.

Format: plans/SCHEMA.md. Guide: docs/plans.md.
"""
from .builder import Plan, RankPlan, build_plan
from .schema import FORMAT_VERSION
from .store import load_plan, read_manifest, write_plan
from .validate import replay, replay_backward, validate_plan

__all__ = ["FORMAT_VERSION", "Plan", "RankPlan", "build_plan", "load_plan", "read_manifest", "replay",
           "replay_backward", "validate_plan", "write_plan"]
