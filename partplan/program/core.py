"""Exchange programs: the ordered steps a plan's runtime executes.

A program is the same list of steps on every rank; what differs per rank are
the step's arrays (send positions, counts, the local CSR) and the sizes of the
named row buffers. Steps (``op``) and what they do on one rank, buffers being
2-D arrays of rows (``rows × f``):

=============  ===============================================================
``copy``       ``dst[dst_row : dst_row + rows(src)] = src``
``gather``     ``dst = src[idx]``                         (array ``idx``)
``alltoallv``  all-to-all-v in the rank's group of family ``group``: the rows
               of ``src`` go out grouped by destination group-rank
               (``send_counts``); ``sum(recv_counts)`` rows land, in source
               group-rank order, at ``dst[dst_row:]``.   (``send_counts``,
               ``recv_counts``, ``recv_ids``: global ids of the rows received,
               for validation)
``spmm``       ``dst = A_local @ src``, ``A_local`` = CSR (``indptr``,
               ``indices``, ``data`` or all ones), rows ``row_ids`` (global
               ids of the rows of ``dst``)
``allreduce``  ``buf = Σ buf`` over the rank's group of family ``group``
``scatter_add`` ``dst[idx] += src[src_idx]`` (``src_idx`` absent: all rows of
               ``src`` in order); with ``zero: true`` ``dst`` is zeroed first
=============  ===============================================================

``dst_row`` is an integer or the name of a buffer whose row count is the
offset (``"in"``: right after the rank's own rows). Every program reads buffer
``in`` (rows ``in_ids``) and leaves its result in ``out`` (rows ``out_ids``).
A rank that is not a member of any group of a step's family skips that step.
Groups are named ``FAMILY`` (one group) or ``FAMILY.i``; torch needs every
rank to create every group in the same order: the manifest's list order.

This module only holds the data model; layouts (:mod:`partplan.layouts`) make
programs and the runtime (:mod:`partplan.runtime`) executes them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .steps import STEPS, dst_start  # noqa: E402,F401  (dst_start: re-exported)

# op -> (arrays it must have, arrays it may have): a view of the step registry (partplan.program.steps)
OP_ARRAYS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    op: (cls.arrays, cls.optional_arrays) for op, cls in STEPS.items()}
PROGRAM_PREFIX = {"forward": "fwd", "backward": "bwd"}


@dataclass(frozen=True)
class Group:
    """A communication group: ``name`` (``family`` or ``family.i``) and its
    member global ranks in group-rank order."""

    name: str
    ranks: tuple[int, ...]

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    def to_json(self) -> dict:
        return {"name": self.name, "ranks": list(self.ranks)}


@dataclass
class Program:
    """One pass (forward or backward) of an exchange program.

    steps : the manifest's step list (JSON-able dicts with ``id``, ``op`` and
        op fields); the step ``id`` is the prefix of its array names.
    arrays : per rank, ``{"<step id>.<array>": ndarray}`` plus
        ``"<prefix>.in_ids"`` / ``"<prefix>.out_ids"``.
    buffers : per rank, rows of every named buffer.
    writes_output : per rank, whether its ``out`` rows are the copy written to a
        global output (1.5D replicas hold the same rows: replica 0 writes).
    """

    prefix: str
    steps: list[dict] = field(default_factory=list)
    arrays: list[dict] = field(default_factory=list)
    buffers: list[dict] = field(default_factory=list)
    writes_output: list[bool] = field(default_factory=list)

    @classmethod
    def empty(cls, prefix: str, p: int) -> "Program":
        return cls(prefix, [], [{} for _ in range(p)], [{} for _ in range(p)], [True] * p)

    @property
    def p(self) -> int:
        return len(self.arrays)

    def set_io(self, in_ids: list[np.ndarray], out_ids: list[np.ndarray]) -> None:
        for r in range(self.p):
            self.arrays[r][f"{self.prefix}.in_ids"] = np.asarray(in_ids[r], dtype=np.int64)
            self.arrays[r][f"{self.prefix}.out_ids"] = np.asarray(out_ids[r], dtype=np.int64)
            self.buffers[r]["in"] = int(len(in_ids[r]))
            self.buffers[r]["out"] = int(len(out_ids[r]))

    def add(self, op: str, per_rank: list[dict] | None = None, **fields) -> dict:
        """Append a step; ``per_rank[r]`` holds rank r's arrays for it."""
        if op not in STEPS:
            raise ValueError(f"unknown op {op!r}")
        step = {"id": f"{self.prefix}.{len(self.steps)}", "op": op, **fields}
        need, may = STEPS[op].arrays, STEPS[op].optional_arrays
        names = set()
        for r, arrs in enumerate(per_rank or [{}] * self.p):
            for key, a in arrs.items():
                if key not in need and key not in may:
                    raise ValueError(f"op {op}: unexpected array {key!r}")
                self.arrays[r][f"{step['id']}.{key}"] = np.ascontiguousarray(a)
                names.add(key)
        missing = [a for a in need if a not in names]
        if missing and self.p:
            raise ValueError(f"op {op}: missing arrays {missing}")
        step["arrays"] = sorted(names)
        self.steps.append(step)
        return step

    def size(self, r: int, name: str, rows: int) -> None:
        self.buffers[r][name] = int(rows)

    def pairs(self, groups: list[Group]) -> np.ndarray:
        """int64[p, p]: rows sent rank q → rank r over all alltoallv steps."""
        p = self.p
        vol = np.zeros((p, p), dtype=np.int64)
        for step in self.steps:
            if STEPS[step["op"]].pairs:
                vol += step_matrix(self, step, groups)
        return vol


def member_group(groups: list[Group], family: str, rank: int) -> Group | None:
    """The group of ``family`` that ``rank`` belongs to (None: not a member)."""
    for g in groups:
        if g.family == family and rank in g.ranks:
            return g
    return None


def step_matrix(prog: Program, step: dict, groups: list[Group]) -> np.ndarray:
    """int64[p, p] rows sent q → r by one alltoallv step (global ranks)."""
    p = prog.p
    vol = np.zeros((p, p), dtype=np.int64)
    key = f"{step['id']}.send_counts"
    for q in range(p):
        g = member_group(groups, step["group"], q)
        if g is None or key not in prog.arrays[q]:
            continue
        vol[q, list(g.ranks)] += prog.arrays[q][key]
    return vol


def matrix_to_pairs(vol: np.ndarray) -> list[list[int]]:
    """Nonzeros of a count matrix as ``[[src, dst, rows], ...]`` (row-major)."""
    q, r = np.nonzero(vol)
    return np.stack([q, r, vol[q, r]], axis=1).astype(np.int64).tolist()


def pairs_to_matrix(pairs, p: int) -> np.ndarray:
    vol = np.zeros((p, p), dtype=np.int64)
    for a, b, c in pairs:
        vol[a, b] += c
    return vol
