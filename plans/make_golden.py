#!/usr/bin/env python
"""Regenerate the small golden plans in plans/golden/ (run from the repository root).

The golden plans pin the on-disk format: tests/test_plan_golden.py rebuilds
each one from the inputs below and requires byte-identical shards. After a
deliberate format change (bump FORMAT_VERSION), rerun this script and commit
the result. Manifests are written without a creation time (``created=False``)
so the files are reproducible.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from partplan import Graph
from partplan.plan import build_plan, write_plan

HERE = Path(__file__).resolve().parent / "golden"


def grid(r: int, c: int) -> Graph:
    """r × c 4-neighbour grid, undirected, unweighted."""
    ids = np.arange(r * c).reshape(r, c)
    src = np.concatenate([ids[:, :-1].ravel(), ids[:-1, :].ravel()])
    dst = np.concatenate([ids[:, 1:].ravel(), ids[1:, :].ravel()])
    return Graph.from_edges(src, dst, n=r * c, symmetrize=True, name=f"grid{r}x{c}")


def cases():
    """name -> (graph, part, ranks, layout)."""
    path4 = Graph.from_edges([0, 1, 2], [1, 2, 3], symmetrize=True, name="path4")
    directed = Graph.from_edges([0, 0, 1, 2, 3, 4, 5, 6, 7, 7], [1, 5, 2, 3, 0, 6, 7, 4, 1, 7],
                                [1.0, 2.0, 0.5, 1.5, 3.0, 1.0, 2.5, 0.25, 4.0, 1.0], n=8, name="directed8")
    g44 = grid(4, 4)
    return {
        "path4-1d-k2": (path4, np.array([0, 0, 1, 1]), 2, "1d"),
        "directed8-1d-k3": (directed, np.array([0, 0, 1, 1, 2, 2, 0, 1]), 3, "1d"),
        "grid4x4-1.5d-b2c2": (g44, np.repeat([0, 1], 8), 4, "1.5d:2"),
        "grid4x4-2d-2x2": (g44, np.repeat([0, 1, 2, 3], 4), 4, "2d:2x2"),
        "directed8-2d-1x2": (directed, np.array([0, 0, 1, 1, 0, 1, 0, 1]), 2, "2d:1x2"),
    }


def build(name: str):
    g, part, k, layout = cases()[name]
    return g, build_plan(g, part, k, layout=layout, f=16, dtype="float32",
                         meta={"model": "golden", "backend": "fixed", "objective": "total", "seed": 0})


def main() -> int:
    HERE.mkdir(exist_ok=True)
    for name in cases():
        _, plan = build(name)
        write_plan(plan, HERE / f"{name}.plan", created=False)
        print(f"wrote {HERE / name}.plan")
    return 0


if __name__ == "__main__":
    sys.exit(main())
