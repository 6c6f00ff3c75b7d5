"""The plan as data: :class:`Plan` (manifest, per-rank shards, global arrays) and
:class:`RankPlan` (one rank's named arrays), with readers of the manifest's programs."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import PlanError
from .core import Group


# ----------------------------------------------------------------------------- data classes
@dataclass
class RankPlan:
    """Everything rank ``rank`` needs, as named numpy arrays (see docs/reference/plan-format.md).

    ``arrays`` maps ``"<step id>.<name>"`` (and ``fwd.in_ids``, ``fwd.out_ids``,
    ``bwd.*``) to a 1-D numpy array; ``meta`` holds the shard's scalars (rank,
    ranks, layout, buffer sizes per program). Arrays are read-only views of a
    memory map when loaded.
    """

    rank: int
    meta: dict
    arrays: dict[str, np.ndarray]
    # structure problems found when the shard was read (partplan.program.checks.shard_problems): a
    # quarantined shard — reading an array through it raises the first one; the executor reports
    # them through its collective start-up check, so every rank of a job stops with the same error
    problems: list[str] = field(default_factory=list)

    def has(self, name: str) -> bool:
        return name in self.arrays

    def check(self) -> None:
        """Raise the first problem found when the shard was read (if any)."""
        if self.problems:
            more = f" (+{len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
            raise PlanError(self.problems[0] + more)

    def __getitem__(self, name: str) -> np.ndarray:
        if self.problems:
            self.check()
        return self.arrays[name]

    def prefix(self, program: str) -> str:
        """Array prefix of ``program`` ("forward" / "backward") on this rank."""
        m = self.meta.get("programs", {}).get(program)
        if m is None:
            raise PlanError(f"rank {self.rank}: the plan has no {program} program")
        return m["prefix"]

    def in_ids(self, program: str = "forward") -> np.ndarray:
        """Global ids of the input rows (``in`` buffer) of ``program``."""
        return self[self.prefix(program) + ".in_ids"]

    def out_ids(self, program: str = "forward") -> np.ndarray:
        """Global ids of the output rows (``out`` buffer) of ``program``."""
        return self[self.prefix(program) + ".out_ids"]

    def buffers(self, program: str = "forward") -> dict:
        return self.meta["programs"][program]["buffers"]

    def writes_output(self, program: str = "forward") -> bool:
        return bool(self.meta["programs"][program]["writes_output"])

    def summary(self, steps: list[dict] | None = None) -> dict:
        """Rows held / computed / received, nonzeros, a2a rows and messages (forward)."""
        a = self.arrays
        send = recv = nnz = halo = 0
        smsg = rmsg = 0
        for key, v in a.items():
            if key.startswith("fwd.") and key.endswith(".send_counts"):
                send += int(v.sum())
                smsg += int(np.count_nonzero(v))
            elif key.startswith("fwd.") and key.endswith(".recv_counts"):
                recv += int(v.sum())
                rmsg += int(np.count_nonzero(v))
            elif key.startswith("fwd.") and key.endswith(".indices"):
                nnz += int(v.size)
        bufs = self.meta["programs"]["forward"]["buffers"]
        held = int(bufs.get("in", 0))
        if "ext" in bufs:   # [own rows | halo rows]
            halo = int(bufs["ext"]) - held
        else:   # routed: the SpMM reads the last buffer, [own rows | every row received], forwarded ones too
            cols = [v for key, v in a.items() if key.startswith("fwd.") and key.endswith(".indices")]
            halo = int(np.count_nonzero(np.unique(np.concatenate(cols)) >= held)) if cols else 0
        return {"rank": self.rank, "held": held, "rows": int(bufs.get("out", 0)),
                "halo": halo, "nnz": nnz, "send_rows": send, "recv_rows": recv,
                "send_msgs": smsg, "recv_msgs": rmsg}


@dataclass
class Plan:
    """A whole plan: the manifest, every rank's :class:`RankPlan`, and the global
    arrays (``part`` row block per vertex, ``owner`` or None, ``perm`` old → new
    id, ``stats``)."""

    manifest: dict
    ranks: list[RankPlan]
    part: np.ndarray
    owner: np.ndarray | None = None
    perm: np.ndarray | None = None
    stats: Any = None
    timings: dict = field(default_factory=dict)

    @property
    def p(self) -> int:
        return len(self.ranks)

    def __getitem__(self, r: int) -> RankPlan:
        return self.ranks[r]

    def steps(self, program: str = "forward") -> list[dict]:
        return program_steps(self.manifest, program)

    def groups(self) -> list[Group]:
        return manifest_groups(self.manifest)


def program_steps(manifest: dict, program: str) -> list[dict]:
    """The step list of ``program`` (following ``same_as``)."""
    progs = manifest["programs"]
    if program not in progs:
        raise PlanError(f"the plan has no {program} program")
    pr = progs[program]
    if "same_as" in pr:
        pr = progs[pr["same_as"]]
    return pr["steps"]


def manifest_groups(manifest: dict) -> list[Group]:
    """The plan's groups, in creation order."""
    return [Group(g["name"], tuple(g["ranks"])) for g in manifest["groups"]]


def manifest_volume(manifest: dict, program: str = "forward") -> np.ndarray:
    """int64[p, p]: rows sent rank q → rank r by ``program``'s alltoallv steps (the manifest's pairs)."""
    from .core import pairs_to_matrix
    p = manifest["ranks"]
    from .steps import pair_steps
    vol = np.zeros((p, p), dtype=np.int64)
    for st in pair_steps(program_steps(manifest, program)):
        vol += pairs_to_matrix(st["pairs"], p)
    return vol
