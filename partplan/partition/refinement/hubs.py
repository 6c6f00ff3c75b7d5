"""Spread the hubs of a partition over distinct parts, before bottleneck refinement.

A part holding a row of degree d receives up to d rows of H for it alone.
When two or more *hubs* — rows with more nonzeros than ``factor`` × TV/k, the
mean per-part volume — share a part, that part's receive volume is far above
the mean, and single-vertex refinement cannot fix it: moving a hub costs one
row of H for each neighbour it leaves behind, and its target part is full
(docs/design/refinement.md, "Diagnosis", as-22july06). Mt-KaHyPar can: the hubs are
put in distinct parts (each keeps its part when free, else takes the cheapest
free part by max(send, recv)), fixed there (Mt-KaHyPar's fixed vertices), and
one V-cycle of ``improve_partition`` (preset DEFAULT when the partition was
made with LARGE_K, whose deep multilevel scheme has no fixed vertices)
rebuilds the partition around them, moving their neighbourhoods with them.

The result is kept only when its total volume stays within
``(1 + volume_tolerance)`` × the input's, its heaviest part within the input's
balance cap, and the objective asked for (max(send, recv) by default) is
lower; otherwise the input is returned unchanged. Nothing runs (no cost) when fewer than two hubs share a
part. Mt-KaHyPar only: other engines have no fixed vertices with
``improve_partition``.

Example
-------
>>> import numpy as np
>>> from partplan import Graph
>>> from partplan.partition.refinement.hubs import find_hubs
>>> star = Graph.from_edges(np.zeros(40, int), np.arange(1, 41), symmetrize=True)
>>> find_hubs(star, np.arange(41) % 4, 4).tolist()
[0]
"""
from __future__ import annotations

import time

import numpy as np

from ...errors import OptionError, PartitionError
from ...graph import Graph
from ...hypergraph import Hypergraph
from ...metrics.cost import DEFAULT_ALPHA_S, DEFAULT_BETA_S_PER_BYTE
from ...metrics.volume1d import volume_matrix
from ..context import HubsContext, RefineContext
from ..objectives import check_objective
from ..options import check_real
from ..options import DEFAULT_IMBALANCE

DEFAULT_FACTOR = HubsContext.hub_factor


def _costs(graph: Graph, part: np.ndarray, k: int) -> tuple[int, np.ndarray]:
    """(total volume, max(send, recv) per part), rows of H."""
    vol, _ = volume_matrix(graph.indptr, graph.indices, part, k)
    return int(vol.sum()), np.maximum(vol.sum(axis=1), vol.sum(axis=0))


# the figure of refine's report each bottleneck objective lowers
_OBJECTIVE_FIGURE = {"max-both": "max_send_recv", "max-send": "max_send", "max-recv": "max_recv",
                     "weighted": "time_estimate_s"}


def _summary(fig: dict) -> dict:
    return {key: fig[key] for key in ("total_volume", "max_send_recv", "max_send", "max_recv", "time_estimate_s")}


def find_hubs(graph: Graph, part: np.ndarray, k: int, factor: float = DEFAULT_FACTOR) -> np.ndarray:
    """Rows with more than ``factor`` × TV/k nonzeros (TV: total volume of
    ``part``), at most k, densest first (ties by id)."""
    return _dense_rows(graph, _costs(graph, part, k)[0], k, factor)


def _dense_rows(graph: Graph, tv: int, k: int, factor: float) -> np.ndarray:
    nnz = graph.row_nnz
    top = np.argsort(-nnz, kind="stable")[:k]
    return top[nnz[top] > factor * tv / k].astype(np.int64)


def spread_hubs(graph: Graph, hypergraph: Hypergraph, part: np.ndarray, k: int, *, imbalance: float = DEFAULT_IMBALANCE,
                seed: int = 0, factor: float = DEFAULT_FACTOR,
                volume_tolerance: float = RefineContext.volume_tolerance,
                preset: str = "DEFAULT", threads: int | None = None, objective: str = "max-both",
                alpha: float = DEFAULT_ALPHA_S, beta: float = DEFAULT_BETA_S_PER_BYTE,
                row_bytes: int = 512) -> tuple[np.ndarray, dict]:
    """Put the hubs of ``part`` in distinct parts and let Mt-KaHyPar rebuild
    around them (module doc). ``hypergraph``: the model ``part`` was made on
    (the column-net hypergraph of ``graph``). The result is kept only when it
    lowers ``objective`` (max-both / max-send / max-recv: rows of H; weighted:
    the α-β time of the busiest rank with ``alpha`` s per message, ``beta`` s
    per byte, ``row_bytes`` bytes per row). Returns (part, report);
    report["kept"] says whether the new partition replaced the input."""
    from ..engines import mtkahypar_hypergraph
    from .refine import _figures, balance_cap

    t0 = time.perf_counter()
    factor = check_real("hub factor", factor, lo=0.0, lo_open=True)
    volume_tolerance = check_real("volume_tolerance", volume_tolerance)
    key = check_objective(objective)
    if key == "total":
        raise OptionError("spread_hubs lowers a bottleneck objective; 'total' has none")
    part = np.asarray(part, dtype=np.int64)
    w = graph.balance_weights
    cap, _ = balance_cap(w, part, k, imbalance)
    tv0, c0 = _costs(graph, part, k)
    # a partition that sends nothing has no hubs to spread (and TV/k = 0 would make every row one)
    hubs = _dense_rows(graph, tv0, k, factor) if tv0 > 0 else np.zeros(0, dtype=np.int64)
    report = {"hubs": int(hubs.size), "factor": factor, "objective": key, "kept": False, "seconds": 0.0}
    if hubs.size < 2 or np.unique(part[hubs]).size == hubs.size:
        report["why"] = "no two hubs share a part"
        report["seconds"] = time.perf_counter() - t0
        return part, report
    free = np.ones(k, dtype=bool)
    target = np.empty(hubs.size, dtype=np.int64)
    cheapest = np.argsort(c0, kind="stable")
    for i, h in enumerate(hubs.tolist()):     # at most k hubs: a loop over hubs, not vertices
        p = int(part[h])
        if not free[p]:
            p = int(cheapest[free[cheapest]][0])
        free[p] = False
        target[i] = p
    start = part.copy()
    start[hubs] = target
    fixed = np.full(graph.n, -1, dtype=np.int64)
    fixed[hubs] = target
    if preset.upper().replace("-", "_") == "LARGE_K":     # deep multilevel: no fixed vertices in Mt-KaHyPar
        preset = "DEFAULT"
    try:
        new, _ = mtkahypar_hypergraph(hypergraph, k, imbalance=imbalance, seed=seed, preset=preset,
                                      threads=threads, initial=start, fixed=fixed)
    except PartitionError as exc:      # the partition in hand stays good: keep it, say why
        report.update(why=f"Mt-KaHyPar refused: {exc}", seconds=time.perf_counter() - t0)
        return part, report
    f0 = _figures(graph, part, k, w, alpha, beta, row_bytes)
    f1 = _figures(graph, new, k, w, alpha, beta, row_bytes)
    report.update(moved=int((start[hubs] != part[hubs]).sum()), before=_summary(f0), after=_summary(f1),
                  max_balance_weight=f1["max_balance_weight"], balance_cap=int(cap))
    if f1["total_volume"] > (1.0 + volume_tolerance) * tv0:
        report["why"] = "total volume above the tolerance"
    elif f1["max_balance_weight"] > cap:
        report["why"] = "balance cap exceeded"
    elif not f1[_OBJECTIVE_FIGURE[key]] < f0[_OBJECTIVE_FIGURE[key]]:
        report["why"] = f"{key} not lower"
    else:
        report["kept"] = True
        part = new
    report["seconds"] = time.perf_counter() - t0
    return part, report
