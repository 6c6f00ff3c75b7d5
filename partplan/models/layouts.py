"""Process layouts of distributed SpMM: 1D, 1.5D (replication c), 2D (R × C).

Rank counts: ``p`` ranks in all. 1D: p row blocks, rank r owns block r.
1.5D: ``b = p / c`` row blocks, block i replicated on the c ranks
``i·c .. i·c + c − 1`` (its replica group); replica l of block i fetches what
block i needs from blocks ``q ≡ i + l (mod c)``, one source block per stage
(:func:`stage_schedule`), and the replica group all-reduces the partial
results. 2D: a non-square R × C grid is allowed; rank = row·C + col; vector
entries (rows of H) are assigned by any p-way partition — striped ``v mod p``
(HPCGraph-GPU), contiguous blocks (CombBLAS), or a partitioner's output laid
over the grid. Volumes come from :func:`partplan.metrics.analyze_15d` /
:func:`partplan.metrics.analyze_2d`; this module only parses and describes.
"""
from __future__ import annotations

import re

import numpy as np

from ..errors import PartitionError

LAYOUTS = ("1d", "1.5d", "2d")


def parse_layout(spec: str, p: int | None = None) -> tuple[str, dict]:
    """``"1d"`` → ("1d", {}); ``"1.5d:c"`` → ("1.5d", {"c": c});
    ``"2d:RxC"`` → ("2d", {"R": R, "C": C}); ``"2d"`` with ``p`` given → the
    most square R × C = p grid (R ≤ C). Checks against ``p`` ranks when given.

    >>> parse_layout("1.5d:4", 16)
    ('1.5d', {'c': 4})
    >>> parse_layout("2d", 8)
    ('2d', {'R': 2, 'C': 4})
    """
    s = str(spec).strip().lower()
    if s in ("1d", "1"):
        return "1d", {}
    m = re.fullmatch(r"1\.5d:(\d+)", s)
    if m:
        c = int(m.group(1))
        if c < 1:
            raise PartitionError(f"layout {spec!r}: replication factor c must be >= 1")
        if p is not None and p % c:
            raise PartitionError(f"layout {spec!r}: {p} ranks are not divisible by c={c}")
        return "1.5d", {"c": c}
    m = re.fullmatch(r"2d:(\d+)x(\d+)", s)
    if m:
        R, C = int(m.group(1)), int(m.group(2))
        if R < 1 or C < 1:
            raise PartitionError(f"layout {spec!r}: grid dimensions must be >= 1")
        if p is not None and R * C != p:
            raise PartitionError(f"layout {spec!r}: grid {R}x{C} has {R * C} ranks, not {p}")
        return "2d", {"R": R, "C": C}
    if s == "2d" and p is not None:
        R = int(np.floor(np.sqrt(p)))
        while p % R:
            R -= 1
        return "2d", {"R": R, "C": p // R}
    raise PartitionError(f"unknown layout {spec!r}; use 1d, 1.5d:C (replication C) or 2d:RxC (grid)")


def row_blocks(layout: str, params: dict, p: int) -> int:
    """Row blocks the partitioner must produce for ``p`` ranks."""
    if layout == "1.5d":
        return p // params["c"]
    return p


def ranks(layout: str, params: dict, k: int) -> int:
    """Ranks of a layout with ``k`` row blocks."""
    return k * params["c"] if layout == "1.5d" else k


def replica_groups(b: int, c: int) -> np.ndarray:
    """int64[b, c]: ranks holding row block i (rank = i·c + l)."""
    return np.arange(b * c, dtype=np.int64).reshape(b, c)


def stage_schedule(b: int, c: int) -> np.ndarray:
    """int64[S, b, c]: the source block replica l of block i fetches from at
    stage s (−1: nothing at that stage). Replica l of block i handles exactly
    the blocks q with ``(q − i) mod c == l`` — the replica :func:`analyze_15d`
    charges — in order of ring offset ``(q − i) mod b``; so every block q is
    fetched once, and block i itself (stage 0 of replica 0) is local.
    S = ⌈b / c⌉ when c divides b."""
    i = np.repeat(np.arange(b), b)
    d = np.tile(np.arange(b), b)
    q = (i + d) % b
    l = (q - i) % c
    order = np.lexsort((d, l, i))
    i, l, q = i[order], l[order], q[order]
    grp = i * c + l
    starts = np.flatnonzero(np.concatenate([[True], grp[1:] != grp[:-1]]))
    stage = np.arange(grp.size) - np.repeat(starts, np.diff(np.concatenate([starts, [grp.size]])))
    out = np.full((int(stage.max()) + 1 if stage.size else 0, b, c), -1, dtype=np.int64)
    out[stage, i, l] = q
    return out


def grid_groups(R: int, C: int) -> tuple[np.ndarray, np.ndarray]:
    """(row_groups int64[R, C], col_groups int64[C, R]) of ranks on the grid."""
    g = np.arange(R * C, dtype=np.int64).reshape(R, C)
    return g, g.T.copy()


def describe(layout: str, params: dict, k: int) -> dict:
    """JSON-able summary: ranks, blocks, groups / schedule sizes."""
    if layout == "1.5d":
        c = params["c"]
        return {"layout": layout, "ranks": k * c, "row_blocks": k, "c": c,
                "replica_groups": replica_groups(k, c).tolist(), "stages": int(stage_schedule(k, c).shape[0])}
    if layout == "2d":
        return {"layout": layout, "ranks": k, "R": params["R"], "C": params["C"]}
    return {"layout": "1d", "ranks": k, "row_blocks": k}
