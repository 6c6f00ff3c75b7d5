"""The planner's default pipeline ("auto"): what ``partition(graph, k)`` and
``partplan partition GRAPH -k K`` run when no model, backend or preset is given.

Chosen by measurement on the TUNE half of ``benchmarks/bench_families.py``
(docs/planner.md, "Planner v3"):

1. **starts**: each engine of ``starts`` (default METIS and KaMinPar "fast",
   both graph model, both cheap) partitions the graph;
2. **km1 V-cycle** (:func:`partplan.partition.fast.vcycle_refine`) on each
   start when ``vcycle`` (exact hypergraph gains, total volume down);
3. the start with the lowest (max(send, recv), total volume) is kept — the
   best start per graph, not one engine for all;
4. **bottleneck refinement** (:func:`partplan.partition.refine.refine`,
   max-both, exact) with a time budget of ``refine_factor`` × the time spent
   in 1–3 (at least ``refine_min_s``) and the total volume allowed to grow by
   ``volume_tolerance`` over the kept start's.

Every figure in the report is recomputed exactly from the partition
(:func:`partplan.metrics.volume1d.volume_matrix`). Deterministic for a seed
(METIS, KaMinPar with one thread, the V-cycle and the refinement are) unless
the refinement stops at its time limit rather than converging.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np

from ..errors import OptionError
from ..graph import Graph
from ..metrics.volume1d import volume_matrix
from .backends import get_backend, run_backend
from .objectives import balance_cap
from .options import check_bool, check_real

DEFAULT_STARTS = ("metis", "kaminpar")
START_OPTIONS = {"kaminpar": {"context": "fast"}}  # per start engine; others: none
DEFAULT_VOLUME_TOLERANCE = 0.03
DEFAULT_REFINE_FACTOR = 1.0
DEFAULT_REFINE_MIN_S = 0.2
from .objectives import AUTO_PRESET  # noqa: E402,F401  (re-exported)


def figures(graph: Graph, part: np.ndarray, k: int) -> dict:
    """max(send, recv), total volume and compute imbalance of ``part`` (exact, 1D forward)."""
    vol, _ = volume_matrix(graph.indptr, graph.indices, part, k)
    send, recv = vol.sum(axis=1), vol.sum(axis=0)
    load = np.bincount(part, weights=graph.row_nnz, minlength=k)
    return {"max_send_recv": int(np.maximum(send, recv).max()), "total_volume": int(send.sum()),
            "compute_imbalance": float(load.max() / load.mean() - 1.0) if load.mean() > 0 else 0.0}


def balanced(graph: Graph, part: np.ndarray, k: int, imbalance: float) -> bool:
    """Part weights (row nnz, at least 1) within the planner's ε-limit (objectives.balance_cap)."""
    w = np.maximum(graph.row_nnz, 1).astype(np.int64)
    _, limit = balance_cap(w, part, k, imbalance)
    return int(np.bincount(part, weights=w, minlength=k).max()) <= limit


def check_starts(starts) -> tuple[str, ...]:
    if isinstance(starts, str):
        starts = tuple(s for s in starts.replace("+", ",").split(",") if s)
    starts = tuple(starts)
    if not starts:
        raise OptionError("starts must name at least one graph-model engine")
    for s in starts:
        if "graph" not in get_backend(s).models:
            raise OptionError(f"start engine {s!r} does not partition the graph model")
    return starts


def auto_partition(graph: Graph, k: int, *, imbalance: float = 0.03, seed: int = 0,
                   starts=DEFAULT_STARTS, vcycle: bool = True, refine: bool = True,
                   refine_factor: float = DEFAULT_REFINE_FACTOR, refine_min_s: float = DEFAULT_REFINE_MIN_S,
                   volume_tolerance: float = DEFAULT_VOLUME_TOLERANCE, time_limit: float | None = None,
                   threads: int = 1, progress: Callable[[str], None] | None = None) -> tuple[np.ndarray, dict]:
    """Run the default pipeline (module doc); returns (part int64[n], report)."""
    from .fast import vcycle_refine

    starts = check_starts(starts)
    vcycle, refine = check_bool("vcycle", vcycle), check_bool("refine", refine)
    refine_factor = check_real("refine_factor", refine_factor)
    refine_min_s = check_real("refine_min_s", refine_min_s)
    volume_tolerance = check_real("volume_tolerance", volume_tolerance)
    say = progress or (lambda msg: None)
    t0 = time.perf_counter()
    cands = []
    for eng in starts:
        ts = time.perf_counter()
        opts = dict(START_OPTIONS.get(eng, {}))
        if eng == "kaminpar":
            opts["threads"] = threads
        part, _ = run_backend(eng, graph, k, imbalance=imbalance, seed=seed, graph=graph, **opts)
        te = time.perf_counter() - ts
        rep = {"engine": eng, "engine_s": te, "start": figures(graph, part, k)}
        if vcycle:
            tv = time.perf_counter()
            part, _ = vcycle_refine(graph, part, k, imbalance=imbalance, seed=seed)
            rep["vcycle_s"] = time.perf_counter() - tv
        rep["figures"] = figures(graph, part, k)
        say(f"start {eng}: max(send, recv) {rep['figures']['max_send_recv']}, "
            f"total volume {rep['figures']['total_volume']} ({time.perf_counter() - ts:.2f} s)")
        rep["balanced"] = bool(balanced(graph, part, k, imbalance))
        # an ε-balanced start first (refinement never worsens balance but does not repair it)
        cands.append((not rep["balanced"], rep["figures"]["max_send_recv"], rep["figures"]["total_volume"],
                      len(cands), part, rep))
    best = min(cands, key=lambda c: c[:4])
    part, chosen = best[4], best[5]["engine"]
    start_s = time.perf_counter() - t0
    report = {"starts": [c[5] for c in cands], "chosen": chosen, "start_s": start_s, "vcycle": vcycle,
              "refine": None}
    if refine and k > 1:
        from . import refine as refine_mod

        budget = max(refine_min_s, refine_factor * start_s) if time_limit is None else float(time_limit)
        say(f"refining max(send, recv) of the {chosen} start (time limit {budget:.1f} s)")
        part, rrep = refine_mod.refine(graph, part, k, objective="max-both", imbalance=imbalance, seed=seed,
                                       volume_tolerance=volume_tolerance, time_limit=budget, progress=progress)
        report["refine"] = rrep
    report["seconds"] = time.perf_counter() - t0
    return part, report
