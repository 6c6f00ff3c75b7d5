"""Topology metrics of an exchange: what crosses each domain level, what it costs.

Input: the exchange steps as int64[p, p] row matrices (one per alltoallv step,
rows sent q → r; a flat 1D exchange is one step, a routed plan three), a
:class:`~partplan.topology.Topology` and the bytes per row. Output
(:func:`topology_metrics`, the ``topology`` object of ``analyze --json`` and
of plan manifests):

* ``levels`` — per domain level, innermost outward: ``crossing_rows`` (rows
  sent between ranks in different domains of that level, summed over steps:
  for a flat plan one per (row, destination rank), for a routed plan one per
  (row, destination domain)), ``crossing_messages`` (nonzero (q, r) entries
  crossing it, summed over steps: (rank, rank) pairs for flat, (rank, domain)
  for ``source``, (domain, domain) for ``domain``) and ``crossing_bytes``;
* ``local_rows`` / ``local_bytes`` — rows moved inside innermost domains;
* ``cost`` — Σ_q,r vol(q, r) · cost(q, r) (rows × abstract cost);
* ``alpha_beta_s`` — Σ over steps of max over ranks of
  ``max(Σ_r α(q,r)·[m>0] + β(q,r)·bytes(q,r) sent, the same received)``:
  the exchange's modeled seconds with per-pair (per-level) α and β; with one
  α and β it is :func:`~partplan.metrics.cost.alpha_beta_time`'s model;
* ``busiest_rank`` / ``busiest_rank_rows`` — the rank sending plus receiving
  the most rows across the innermost level (for a matrix topology without
  levels: across any pair), and that count.

Examples
--------
>>> import numpy as np
>>> from partplan.topology import load_topology
>>> V = np.zeros((4, 4), np.int64); V[0, 2] = 3; V[0, 1] = 1
>>> m = topology_metrics([V], load_topology("tree:2x2"), row_bytes=4)
>>> m["levels"][0]["crossing_rows"], m["cost"], m["busiest_rank"]
(3, 31.0, 0)
"""
from __future__ import annotations

import numpy as np


def step_time(m: np.ndarray, alpha: np.ndarray, beta: np.ndarray, row_bytes: int) -> float:
    """Modeled seconds of one exchange step (module doc)."""
    if not m.any():
        return 0.0
    t = (m > 0) * alpha + m * (row_bytes * beta)
    return float(max(t.sum(axis=1).max(), t.sum(axis=0).max()))


def topology_metrics(steps: list[np.ndarray], topo, *, row_bytes: int, route: str = "flat") -> dict:
    """The ``topology`` object (module doc) of an exchange given as per-step row matrices."""
    p = topo.ranks
    steps = [np.asarray(s, dtype=np.int64) for s in steps]
    for s in steps:
        if s.shape != (p, p):
            from ..topology import TopologyError
            raise TopologyError(f"topology {topo.source} has {p} ranks, the exchange {s.shape[0]}")
    vol = np.zeros((p, p), dtype=np.int64)
    for s in steps:
        vol += s
    levels = []
    for i, lv in enumerate(topo.levels):
        cross = topo.crossing(i)
        rows = int(vol[cross].sum())
        levels.append({"name": lv.name, "domain_size": lv.size, "domains": p // lv.size,
                       "crossing_rows": rows,
                       "crossing_messages": int(sum(np.count_nonzero(s[cross]) for s in steps)),
                       "crossing_bytes": rows * row_bytes})
    if topo.levels:
        cross0 = topo.crossing(0)
    else:
        cross0 = ~np.eye(p, dtype=bool)
    local = int(vol[~cross0].sum() - np.trace(vol))
    xv = np.where(cross0, vol, 0)
    per_rank = xv.sum(axis=1) + xv.sum(axis=0)
    busiest = int(np.argmax(per_rank)) if p else 0
    return {"topology": topo.source or topo.kind, "route": route, "ranks": p, "row_bytes": int(row_bytes),
            "levels": levels, "local_rows": local, "local_bytes": local * row_bytes,
            "total_rows": int(vol.sum()),
            # the steps the program runs: a routed one leaves its empty steps out, the flat programs
            # (1d, 1.5d, 2d) keep every one, empty or not
            "steps": len(steps) if route == "flat" else sum(1 for s in steps if s.any()),
            "messages": int(sum(np.count_nonzero(s) for s in steps)),
            "busiest_rank": busiest, "busiest_rank_rows": int(per_rank[busiest]) if p else 0,
            "cost": float((vol * topo.cost).sum()),
            "alpha_beta_s": float(sum(step_time(s, topo.alpha, topo.beta, row_bytes) for s in steps))}


def level_bytes(sent_bytes: np.ndarray, topo) -> dict:
    """Bytes of a measured (or predicted) int64[p, p] byte matrix per level:
    ``{"local": ..., level name: crossing bytes, ...}`` (diagonal excluded)."""
    b = np.asarray(sent_bytes, dtype=np.int64)
    cross0 = topo.crossing(0) if topo.levels else ~np.eye(topo.ranks, dtype=bool)
    out = {"local": int(b[~cross0].sum() - np.trace(b))}
    for i, lv in enumerate(topo.levels):
        out[lv.name] = int(b[topo.crossing(i)].sum())
    return out


def exchange_steps(stats) -> list[np.ndarray]:
    """The per-step row matrices of a layout's stats: a routed plan's steps, 2D's expand and fold,
    else its one volume matrix."""
    stages = getattr(stats, "stages", None)
    if stages:
        return [np.asarray(m) for m in stages.values()]
    return [np.asarray(stats.volume)]


__all__ = ["topology_metrics", "level_bytes", "step_time", "exchange_steps"]
