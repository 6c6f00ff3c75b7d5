"""The planner's default pipeline ("auto"): what ``partition(graph, k)`` and
``partplan partition GRAPH -k K`` run when no model, backend or preset is given.

Its options are one :class:`~partplan.partition.context.PipelineContext` (defaults, units and
ranges there; :func:`partplan.partition.context.options_table` lists them). Chosen by measurement
on the TUNE half of ``benchmarks/bench_families.py`` (docs/design/planner.md):

1. **starts by size** (:func:`starts_by_size`): METIS and KaMinPar ("fast"),
   plus Mt-KaHyPar graph mode (DETERMINISTIC) on small graphs (≤ SMALL_NNZ
   nonzeros, where engine times are fixed costs); KaMinPar alone above
   METIS_MAX_NNZ (METIS's own allocation: 17.4 GiB on R-MAT 22), in its
   memory-efficient "terapart" context above TERAPART_NNZ;
   A start above the ε-limit (METIS and KaMinPar on skewed graphs at large k)
   is repaired first by :func:`partplan.partition.refinement.rebalance.rebalance` (rows
   least tied to their part move to neighbouring parts with room), kept when
   less overloaded;
2. **km1 V-cycle** (:func:`partplan.partition.refinement.vcycle.vcycle_refine`) on every
   start (``vcycle``); on large graphs (more than LARGE_PINS pins of A + I) on
   the kept start alone, one V-cycle (LARGE_VCYCLES);
3. the start kept: ε-balanced first, else the **least overloaded**; then the
   lowest max(send, recv), then total volume;
4. **bottleneck refinement** (:func:`partplan.partition.refinement.refine.refine`,
   max-both, exact; every start as balanced as the kept one is refined — side
   by side on several cores — and the lowest result kept, up to REFINE_ALL_NNZ
   nonzeros and not large; FM passes end after REFINE_PATIENCE moves without a new best state),
   its first round limited to ``refine_work`` work units per pin of A + I (None: by size,
   DEFAULT_REFINE_WORK, LARGE_REFINE_WORK on large graphs; at least
   REFINE_WORK_MIN, at most REFINE_WORK_MAX), with the total volume capped at
   (1 + ``volume_tolerance``) × the *lowest* total volume among the starts (or
   the start's own when already higher); then **refinement rounds**: the
   refinement restarted from its own result with the next seed, the lowest
   kept, ending after ROUND_PATIENCE rounds in a row without a lower max (at
   most ``refine_rounds``), all of them within ``rounds_work`` × the first
   round's work units (at least ROUNDS_WORK_MIN);
5. a **volume round**: km1 FM (refine objective "total") that
   lowers the total volume while no part's max(send, recv) rises above the
   refined max, within ``volume_work`` units per pin (0: off) — the bottleneck
   stays, the volume the refinement spent on it is partly given back;
6. **refine/volume cycles** (``refine_cycles``, default DEFAULT_REFINE_CYCLES = 3 up
   to LARGE_PINS pins, 1 above): the bottleneck refinement again from the volume round's
   result (another point of the same max, with the volume it gave back), then another volume
   round, while a cycle lowers the max. Chosen on TUNE (k = 16, 64: max(send, recv) x0.990, CLI
   wall x1.15 on 2 cores); held-out REPORT x0.985 (social, web, internet and collaboration graphs
   x0.95-0.99; meshes, power grid and R-MAT x0.99-1.00; no case higher), docs/design/planner.md;
7. **cluster volume rounds** (:func:`_cluster_volume_rounds`, CLUSTER_VOLUME_ROUNDS = 2, up to
   LARGE_PINS pins): whole clusters of the partition's own coarsening move where that lowers the
   potential with the total volume dominant (never above the round's starting total volume) and
   raises no part above the current max(send, recv), each round followed by a volume round — the
   coordinated moves the single-row km1 FM cannot find. Chosen on TUNE (total volume x0.993, max
   x0.9995, neither higher on any case); held out: docs/design/planner.md;
8. **never behind a start**: a start (after its V-cycle) at least as low on both max(send, recv)
   and total volume, and lower on one, replaces the refined partition (only one as balanced:
   no more overloaded, within the compute limit) — :func:`_no_worse_than_starts`.

**Graphs no partition can ε-balance** (a row heavier than a part's ε-limit,
:func:`partplan.partition.objectives.balance_floor`): by default the kept start is the least
overloaded one and no stage makes its heaviest part heavier. With ``allow_overload``
(``--allow-overload``) overloaded starts are not repaired, starts are ranked by max(send, recv)
and total volume alone, every start is refined, and the compute repair is skipped: parts may stay
above the limit as METIS or KaMinPar left them where that lowers max(send, recv). On graphs that
can be balanced the option changes nothing.

Rows with no nonzero in their row or their column (isolated vertices) are set aside first on a
graph without vertex weights (with them, a row weighs what the caller says and is partitioned with
the rest): the pipeline runs on the other rows, and the isolated ones are spread over the parts
(:func:`spread_isolated`). They carry no volume and no compute but weigh 1 in the balance, so
partitioned with the rest they let a part hold (1 + ε) × the mean balance weight in nonzeros alone
(compute imbalance 0.045 on R-MAT 23 at ε = 0.03; now that of the other rows). Each is a row of H,
though: they go where the fewest rows are, within the balance limit (:func:`fill_isolated`), so
a rank's rows of H stay near n / k (R-MAT 15, k = 16, 26 % of the rows isolated: 1.00x the mean
rows in the largest part, where filling the lightest balance weight first gave 3.0x).

A directed graph's rows with no nonzero in their row but some in their column (pages without
out-links) carry volume, so they stay in the partitioned graph; they too weigh 1 in the balance and
0 in compute, so every stage that keeps the balance limit alone can leave a part above ε in compute
(0.030-0.058 on generated directed graphs; 0.037 at k = 64 with 30 % such rows). On such graphs
each refined start is first brought within the compute limit ⌊(1+ε)·⌈nnz/k⌉⌋
(:func:`partplan.partition.refinement.rebalance.repair_compute`), the refinement, its rounds and the volume
round keep it beside the balance limit (refine's ``weights2``/``cap2``: :func:`compute_limit`),
and the same repair runs once more at the end (a no-op unless the refinement did not run).
Measured (benchmarks/bench_empty_rows.py, 30 generated cases): max(send, recv) ×0.947-1.050 of
the pipeline that ignores the compute limit (geometric means ×0.995 TUNE, ×1.006 REPORT); a repair
at the end alone had cost up to ×1.25.

**Cores** (``threads``; default: all this process may run on): each start's
km1 V-cycle runs beside the next start's engine, the refinements of the starts run side by
side (:mod:`partplan.partition.pipeline.lanes`; the compiled kernels release the GIL), and the Mt-KaHyPar
start uses that many threads. The work done does not depend on the count, only its wall time.

Every figure in the report is recomputed exactly from the partition
(:func:`partplan.metrics.volume1d.volume_matrix`). **Deterministic** for a seed,
on any machine, at any core count and under any load: METIS, KaMinPar with one thread,
Mt-KaHyPar DETERMINISTIC (the same partition at 1, 2 and 4 threads, tests/unit/partition/test_lanes.py) and the
V-cycle are, results of side-by-side pieces are taken in a fixed order, and the refinement's budget is *counted* work
(the nets of the vertices whose moves were evaluated: refine's ``work_limit``),
not seconds (a budget in seconds stopped rounds, and on R-MAT 15 or as-22july06 the first round,
at a machine-dependent move). A caller's ``time_limit`` (seconds) replaces the work limits; the
result then depends on the machine.
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Callable, NamedTuple

import numpy as np

from ...graph import Graph
from ...metrics.volume1d import volume_matrix
from ..engines import mtk_threads, run_backend
from ..context import FMContext, PipelineContext, RefineContext, VCycleContext, resolve
from ..heartbeat import _heartbeat
from .lanes import Lanes, Task, available_cores
from ..objectives import balance_cap, eps_limit

DEFAULT_STARTS = ("metis", "kaminpar")
START_OPTIONS = {"kaminpar": {"context": "fast"}, "mtkahypar": {"preset": "DETERMINISTIC"}}  # per start engine
# starts by size ("auto"): METIS's own allocation grows ~2.7 KiB per nonzero (17.4 GiB on R-MAT 22,
# 134 M nonzeros), so above METIS_MAX_NNZ only KaMinPar starts; above TERAPART_NNZ in its
# memory-efficient (compressed graph) context
METIS_MAX_NNZ = 16_000_000
# small graphs (engine times are fixed costs there): also a Mt-KaHyPar graph-mode start, whose
# km1 after the V-cycle is ~8 % lower on the power grid (k = 16) than either cheap start's
SMALL_NNZ = 50_000
# graphs of at most this many nonzeros refine every start as balanced as the kept one (side by side
# on several cores, lanes.py) and keep the lowest result; above it only the kept start. Every size
# that has two starts (docs/design/planner.md) — chosen on TUNE (max x0.974 at x0.99 of the wall on
# 2 cores), held-out REPORT x0.995 at x1.04; before, SMALL_NNZ (one core: twice the refinement's time)
REFINE_ALL_NNZ = METIS_MAX_NNZ
TERAPART_NNZ = 64_000_000
# the refinement's budget, in work units (refine.refine's ``work_limit``: counted, not timed, so the
# result is the same on every machine; a few million units per second here): the first round may spend
# ``refine_work`` units per pin of A + I (nnz + n), at least REFINE_WORK_MIN and at most
# REFINE_WORK_MAX; the rounds after it together ``rounds_work`` x what the first round spent, at
# least ROUNDS_WORK_MIN (the defaults: context.BudgetContext). Chosen on the TUNE half
# (docs/design/planner.md). REFINE_WORK_MAX = 8 units per pin up to ~310 M pins (R-MAT 23: 267 M),
# about 10-15 minutes here, near the start's own time at that size: 400 M units left R-MAT 23 at
# k = 64 one FM pass, max(send, recv) 1.34 M where a budget of the start time reached 0.95 M
REFINE_WORK_MIN = 2_000_000
REFINE_WORK_MAX = 2_500_000_000
ROUNDS_WORK_MIN = 2_000_000
# refinement rounds: the refinement restarted from its own result with the next seed (a new vertex
# order finds moves the converged order does not), at most ``refine_rounds`` in all, ending after
# ROUND_PATIENCE rounds in a row that do not lower (max(send, recv), total volume)
ROUND_PATIENCE = 2
# moves without a new best state before an FM pass of the max-both refinement ends (refine's
# default: 200). Under a work budget a longer pass explores further from the same start: on the
# TUNE half 1000 gave x0.991 on max(send, recv) (500: x0.993, 2000: x0.994), docs/design/planner.md
REFINE_PATIENCE = 1000
# refine/volume cycles: the volume round gives total volume back below the refinement's limit and
# leaves the partition at another point of the same max; the bottleneck refinement runs again from
# it (seed + 100 c, the same total-volume limit, within ``cycle_work`` x the work units the
# refinement spent, its rounds included), then another volume round; at most DEFAULT_REFINE_CYCLES
# cycles in all (``refine_cycles=None``) on graphs of at most LARGE_PINS pins (above: 1), ending at the
# first that does not lower max(send, recv). Chosen on TUNE (max x0.990, CLI wall x1.15 on 2 cores);
# held-out REPORT x0.985 (CLI x1.12); R-MAT 18 k = 64 x0.968 at x1.40 of the wall
DEFAULT_REFINE_CYCLES = 3
# large graphs: above LARGE_PINS pins of A + I (nnz + n) the stages after the engines cost a multiple
# of METIS's own time (webcrawl-150k, 1.3 M pins, k = 64: 8.4 x METIS's CPU seconds, the V-cycles of
# both starts 2.2 x alone), so there the pipeline keeps the start of the engines' own figures, gives it
# one V-cycle (LARGE_VCYCLES), refines it alone with LARGE_REFINE_WORK units per pin and runs one
# refine/volume cycle (docs/design/planner.md "Time that scales")
LARGE_PINS = 1_000_000
LARGE_VCYCLES = 1
LARGE_REFINE_WORK = 4.0
DEFAULT_REFINE_WORK = 8.0
# cluster volume rounds after the cycles (:func:`_cluster_volume_rounds`), up to LARGE_PINS pins: whole
# clusters move where that lowers the total volume under the current max(send, recv) (the max-both
# potential, exponent CLUSTER_VOLUME_Q, with the volume term weighted CLUSTER_VOLUME_MU: dominant),
# then a volume round; two rounds. Chosen on TUNE (k = 16, 64: total volume x0.993, max x0.9995,
# neither higher on any case; the stage took 9 % of the half's wall, 1-33 % per case, and doubled
# it on webcrawl-150k, hence not on large graphs; docs/design/planner.md)
CLUSTER_VOLUME_ROUNDS = 2
CLUSTER_VOLUME_MIN_GAIN = 0.001     # a round that lowers the total volume by less ends them
CLUSTER_VOLUME_Q = 16
CLUSTER_VOLUME_MU = 1e6
from ..objectives import AUTO_PRESET  # noqa: E402,F401  (re-exported)


def figures(graph: Graph, part: np.ndarray, k: int) -> dict:
    """max(send, recv), total volume and compute imbalance of ``part`` (exact, 1D forward)."""
    vol, _ = volume_matrix(graph.indptr, graph.indices, part, k)
    send, recv = vol.sum(axis=1), vol.sum(axis=0)
    load = np.bincount(part, weights=graph.row_nnz, minlength=k)
    return {"max_send_recv": int(np.maximum(send, recv).max()), "total_volume": int(send.sum()),
            "compute_imbalance": float(load.max() / load.mean() - 1.0) if load.mean() > 0 else 0.0}


def overload(graph: Graph, part: np.ndarray, k: int, imbalance: float) -> int:
    """How far the heaviest part (row nnz, at least 1) exceeds the planner's ε-limit (0: ε-balanced)."""
    w = graph.balance_weights
    _, limit = balance_cap(w, part, k, imbalance)
    return max(0, int(np.bincount(part, weights=w, minlength=k).max()) - limit)


def balanced(graph: Graph, part: np.ndarray, k: int, imbalance: float) -> bool:
    """Part weights (row nnz, at least 1) within the planner's ε-limit (objectives.balance_cap)."""
    return overload(graph, part, k, imbalance) == 0


def starts_by_size(graph: Graph) -> tuple[tuple[str, ...], dict]:
    """The default starts for ``graph``: METIS, KaMinPar ("fast") and Mt-KaHyPar (graph model; where
    its 32-bit weights hold the graph's) up to SMALL_NNZ nonzeros, METIS and KaMinPar up to METIS_MAX_NNZ,
    KaMinPar alone above (METIS's memory), in its "terapart" context above TERAPART_NNZ."""
    if graph.nnz <= SMALL_NNZ:
        return DEFAULT_STARTS + (("mtkahypar",) if _fits_c_int(graph) else ()), {}
    if graph.nnz <= METIS_MAX_NNZ:
        return DEFAULT_STARTS, {}
    return ("kaminpar",), ({"kaminpar": {"context": "terapart"}} if graph.nnz > TERAPART_NNZ else {})


def _fits_c_int(graph: Graph) -> bool:
    """Whether the graph model's vertex weights (the balance weights) fit Mt-KaHyPar's C ints (its
    start is left out where they do not; METIS and KaMinPar take 64-bit weights). Its edge weights
    are 1 or 2 per pattern edge, within them on every graph this start runs on (SMALL_NNZ)."""
    from ...errors import PartitionError
    from ..options import check_c_int_weights

    try:
        check_c_int_weights("Mt-KaHyPar", graph.name, vertex_weights=graph.balance_weights)
    except PartitionError:
        return False
    return True


def _key(rep: dict, over_ok: bool = False) -> tuple:
    """Order of the starts: ε-balanced first, else the least overloaded (refinement never worsens
    balance but does not repair it); then max(send, recv) and total volume. Under
    ``allow_overload`` (``over_ok``) max(send, recv) and total volume alone."""
    f = rep["figures"]
    return (0 if over_ok else rep["overload"]), f["max_send_recv"], f["total_volume"]


def auto_partition(graph: Graph, k: int, *, context: PipelineContext | None = None,
                   progress: Callable[[str], None] | None = None, **options) -> tuple[np.ndarray, dict]:
    """Run the default pipeline (module doc); returns (part int64[n], report).

    context : a :class:`~partplan.partition.context.PipelineContext` (checked: built by
        :func:`~partplan.partition.context.resolve` or the preset
        :func:`~partplan.partition.context.auto`); None: the defaults.
    options : the context's options by name (imbalance, seed, starts, vcycle, threads, refine,
        volume_tolerance, allow_overload, refine_work, rounds_work, refine_rounds, volume_work,
        refine_cycles, cycle_work, time_limit), checked and applied over ``context``.
    progress : callable(str) or None: one line per step.

    ``threads`` (None: all this process may run on): the pipeline's independent pieces run side by
    side (:mod:`.lanes`) and the Mt-KaHyPar start uses that many threads: the partition is the same
    at any count. KaMinPar always runs on one thread (several KaMinPar threads are not
    reproducible; ``--engine kaminpar --threads N`` is the fast, non-deterministic path)."""
    ctx = resolve(PipelineContext, options, label="auto", base=context) if options or context is None else context
    empty = isolated_rows(graph)
    n_empty = int(empty.sum())
    # the other rows choose their own starts by size; with the caller's vertex weights an isolated
    # row weighs what they say (not 1), so it is partitioned with the rest
    if n_empty and graph.n - n_empty >= k and graph.vertex_weights is None:
        if progress:
            progress(f"{n_empty} isolated rows (no nonzero in row or column) set aside, "
                     f"spread over the parts at the end")
        part, report = auto_partition(without_rows(graph, empty), k, context=ctx, progress=progress)
        report["isolated_rows"] = n_empty
        return spread_isolated(graph, part, empty, k, ctx.imbalance), report
    t0 = time.perf_counter()
    sc = ctx.start
    workers = available_cores() if sc.threads is None else sc.threads
    lanes = Lanes(workers)
    over_ok = overload_allowed(graph, k, ctx)
    if over_ok and progress:
        progress("allow_overload: a row outweighs the ε-limit; parts may stay above it where the start "
                 "engine left them, the lowest max(send, recv) is kept")
    starts, start_opts = starts_by_size(graph) if sc.starts is None else (sc.starts, {})
    large = is_large(graph)
    started = [_start(graph, k, eng, _start_options(eng, start_opts, workers), ctx, progress, lanes,
                      repair=not over_ok, vcycle=bool(sc.vcycle) and not large) for eng in starts]
    parts, reps = map(list, zip(*(_started(*s, progress) for s in started)))
    best = min(range(len(reps)), key=lambda i: _key(reps[i], over_ok) + (i,))
    if sc.vcycle and large:       # large graphs: the kept start alone gets (one) V-cycle
        parts[best] = _vcycle(graph, parts[best], k, ctx.imbalance, ctx.seed, reps[best], progress, True,
                              cycles=LARGE_VCYCLES)
    for r in reps:
        r["balanced"] = r["overload"] == 0
    report = {"starts": reps, "chosen": reps[best]["engine"], "start_s": time.perf_counter() - t0,
              "vcycle": sc.vcycle, "refine": None, "workers": workers, "overload_allowed": over_ok}
    part = parts[best]
    if ctx.refine and k > 1:
        part = _refinement(graph, k, ctx, reps, parts, best, report, progress, lanes, over_ok)
        part, report["start_kept"] = _no_worse_than_starts(graph, k, part, parts, reps, ctx.imbalance, over_ok,
                                                           progress)
    if k > 1 and not over_ok:
        part, report["compute_repair"] = end_compute_repair(graph, part, k, ctx.imbalance, progress)
    report["seconds"] = time.perf_counter() - t0
    return part, report


def refine_partition(graph: Graph, part: np.ndarray, k: int, *, context: PipelineContext | None = None,
                     weight_cap: int | None = None, engine: str = "given",
                     progress: Callable[[str], None] | None = None) -> tuple[np.ndarray, dict]:
    """What the pipeline does to its kept start, done to one given partition: the km1 V-cycle
    (``start.vcycle``; one V-cycle on a large graph, as the pipeline's kept start gets), then
    steps 4-7 of the module doc (the max-both refinement and its rounds, the volume round, the
    cycles, the cluster volume rounds). The distributed partitioner runs it in process 0 on a
    graph that fits (:mod:`partplan.partition.pipeline.mpi_worker`).

    part : int[n] in [0, k) (not modified). context : the pipeline's (its ``imbalance``, ``seed``,
    ``volume_tolerance``, ``start.vcycle`` and budget apply; its start engines do not).
    weight_cap : the most row nonzeros any part may hold (never below the heaviest part of
    ``part``), kept beside the balance limit by every refinement step (refine's ``cap2``); the
    V-cycle, which keeps only the balance limit, is dropped when its result breaks it. The total
    volume may grow to (1 + ``volume_tolerance``) × that of ``part`` (not of the V-cycle's result:
    what the V-cycle saves, the refinement may spend on the bottleneck; TUNE max 1.001 / total
    1.017 × the single-process default against 1.024 / 1.011, docs/design/distributed.md).
    engine : the start's name in the report.

    Returns (part int64[n], report): ``vcycle`` (its figures, seconds, whether it was kept; None
    when it did not run), ``refine``, ``volume_round``, ``cycles``, ``cluster_volume`` (as in
    :func:`auto_partition`'s report) and ``before`` / ``after`` (:func:`figures`)."""
    ctx = context if context is not None else resolve(PipelineContext, {}, label="auto")
    start = np.asarray(part, np.int64)
    before = figures(graph, start, k)
    rep = {"engine": engine, "figures": before, "overload": overload(graph, start, k, ctx.imbalance)}
    report: dict = {"before": before, "vcycle": None}
    if ctx.start.vcycle and k > 1:   # the km1 V-cycle every start gets, kept when it keeps weight_cap
        vc = dict(rep)
        cand = _vcycle(graph, start, k, ctx.imbalance, ctx.seed, vc, progress, True,
                       cycles=LARGE_VCYCLES if is_large(graph) else None)
        kept = weight_cap is None or heaviest_part(graph, cand, k) <= max(weight_cap, heaviest_part(graph, start, k))
        report["vcycle"] = {"figures": vc["figures"], "seconds": vc["vcycle_s"], "kept": kept}
        if kept:   # the figures stay the given partition's: its total volume is the refinement's reference
            start = np.asarray(cand, np.int64)
            rep["overload"] = overload(graph, start, k, ctx.imbalance)
    reps = [rep]
    out = _refinement(graph, k, ctx, reps, [start], 0, report, progress, Lanes(1), weight_cap=weight_cap) \
        if k > 1 else start
    report["after"] = figures(graph, out, k)
    return out, report


def heaviest_part(graph: Graph, part: np.ndarray, k: int) -> int:
    """The largest row-nonzero count of a part (what the distributed weight limit bounds)."""
    return int(np.bincount(part, weights=graph.row_nnz, minlength=k).max()) if k else 0


def is_large(graph: Graph) -> bool:
    """More than LARGE_PINS pins of A + I: the pipeline's large-graph schedule (module constants)."""
    return graph.nnz + graph.n > LARGE_PINS


def overload_allowed(graph: Graph, k: int, ctx: PipelineContext) -> bool:
    """``allow_overload`` is in force: asked for, and one row outweighs the ε-limit of a part
    (:func:`partplan.partition.objectives.balance_floor`), so no partition is ε-balanced."""
    from ..objectives import balance_floor

    return bool(ctx.allow_overload) and k > 1 and balance_floor(graph.row_nnz, k, ctx.imbalance, graph.balance_weights) is not None


def within_compute_limit(graph: Graph, part: np.ndarray, k: int, imbalance: float) -> bool:
    """Every part's compute (row nnz) within ⌊(1+ε)·⌈nnz/k⌉⌋ (always True where
    :func:`compute_limit_applies` is False: without empty rows the balance limit is the same, with
    vertex weights they alone are the balance)."""
    if not compute_limit_applies(graph):
        return True
    nnz = graph.row_nnz.astype(np.int64)
    return int(np.bincount(part, weights=nnz, minlength=k).max()) <= balance_cap(nnz, part, k, imbalance)[1]


def _no_worse_than_starts(graph, k, part, parts, reps, imbalance, over_ok, progress):
    """The refined ``part``, or the start (after its V-cycle) that is at least as good on both
    max(send, recv) and total volume and better on one — only a start as balanced (no more
    overloaded, within the compute limit on graphs with empty rows; any start under
    ``allow_overload``). The lowest (max, total volume) such start wins. Returns (part, the kept
    start's engine or None)."""
    f = figures(graph, part, k)
    have = (f["max_send_recv"], f["total_volume"])
    ov = overload(graph, part, k, imbalance)
    kept, best = None, have
    for i, r in enumerate(reps):
        g = (r["figures"]["max_send_recv"], r["figures"]["total_volume"])
        if not (g[0] <= have[0] and g[1] <= have[1] and g != have) or g >= best:
            continue
        if not over_ok and (r["overload"] > ov or not within_compute_limit(graph, parts[i], k, imbalance)):
            continue
        kept, best = i, g
    if kept is None:
        return part, None
    if progress:
        progress(f"the {reps[kept]['engine']} start (max(send, recv) {best[0]}, total volume {best[1]}) is "
                 f"below the refined partition ({have[0]}, {have[1]}) on both: kept")
    return parts[kept], reps[kept]["engine"]


def _refinement(graph, k, ctx: PipelineContext, reps, parts, best, report, progress, lanes,
                over_ok: bool = False, weight_cap: int | None = None) -> np.ndarray:
    """Steps 4-7 of the module doc on the starts: the refinement (with its rounds), the volume
    round, the cycles, the cluster volume rounds; their reports go to ``report``. ``weight_cap``:
    see :func:`compute_limit`. Returns the partition."""
    b = ctx.budget
    work = b.refine_work if b.refine_work is not None else (
        LARGE_REFINE_WORK if is_large(graph) else DEFAULT_REFINE_WORK)
    budget = Budget.of(graph, work, b.rounds_work, b.time_limit)
    part, report["refine"], i, report["refined_starts"], rctx = _refine_starts(
        graph, k, reps, parts, best, ctx, budget, progress, lanes, over_ok, weight_cap)
    report["chosen"] = reps[i]["engine"]
    if b.volume_work > 0:
        part, report["volume_round"] = _volume_round(graph, k, part, report["refine"], ctx, ctx.seed, budget,
                                                     progress, weight_cap)
        cycles = b.refine_cycles or (1 if is_large(graph) else DEFAULT_REFINE_CYCLES)
        if cycles > 1:
            part, report["cycles"] = _cycles(graph, k, part, report, ctx, rctx, budget, cycles, progress,
                                             weight_cap)
        if not is_large(graph):
            part, report["cluster_volume"] = _cluster_volume_rounds(graph, k, part, ctx, budget, progress,
                                                                    weight_cap)
    return part


def _cluster_volume_rounds(graph, k, part, ctx: PipelineContext, budget, progress,
                           weight_cap: int | None = None):
    """CLUSTER_VOLUME_ROUNDS rounds of whole-cluster moves for the total volume — the partition's
    own coarsening within its parts, every cluster of two or more rows tried on its best-connected
    part with room (:func:`partplan.partition.refinement.multilevel.cluster_moves`, the max-both
    potential with the volume term dominant: a move is kept when it lowers that potential, keeps
    the total volume at most the round's starting total and raises no part above the current
    max(send, recv)), each followed by a volume round (km1 FM under the same max). The coordinated
    moves single-row FM cannot find; the balance cap and, on graphs with empty rows, the compute
    limit hold. Stops early when a round lowers the total volume by less than
    CLUSTER_VOLUME_MIN_GAIN of it, or the caller's time limit is spent. Returns (part, report:
    ``before``/``after`` figures, cluster ``moves`` per round, ``seconds``, ``stopped``: "done" or
    "time limit")."""
    from ..objectives import balance_cap
    from ..refinement.fm import OBJ_CODES
    from ..refinement.multilevel import cluster_moves
    from ..refinement.refine import _State

    t0 = time.perf_counter()
    w = graph.balance_weights
    before = figures(graph, part, k)
    cur, moves, stopped = part.copy(), [], "done"
    for r in range(CLUSTER_VOLUME_ROUNDS):
        left = budget.left_s()
        if left is not None and left <= 0:
            stopped = "time limit"
            break
        lim = compute_limit(graph, cur, k, ctx.imbalance, weight_cap)
        st = _State(graph, cur, k, lim.get("weights2"), lim.get("cap2"))
        tv = int(st.vol.sum())
        cm = cluster_moves(graph, st, cur, k, w, balance_cap(w, cur, k, ctx.imbalance)[0], tv,
                           OBJ_CODES["max-both"], 0.0, 0.0, CLUSTER_VOLUME_Q, CLUSTER_VOLUME_MU,
                           seed=ctx.seed + 1000 + r, theta=0.0, max_rounds=1, max_targets=1,
                           deadline=-1.0 if left is None else time.perf_counter() + left, volume_precheck=True)
        moves.append(cm["moves"])
        if cm["stopped"] != "done":
            stopped = cm["stopped"]
        cur, v = _volume_round(graph, k, cur, {"after": figures(graph, cur, k)}, ctx, ctx.seed + 1000 + r,
                               budget, None, weight_cap)
        if v["after"]["total_volume"] > tv * (1.0 - CLUSTER_VOLUME_MIN_GAIN):
            break
    after = figures(graph, cur, k)
    if progress:
        progress(f"cluster volume rounds: total volume {before['total_volume']} -> {after['total_volume']}, "
                 f"max(send, recv) {before['max_send_recv']} -> {after['max_send_recv']} "
                 f"({time.perf_counter() - t0:.2f} s)")
    return cur, {"before": before, "after": after, "moves": moves, "seconds": time.perf_counter() - t0,
                 "stopped": stopped}


def compute_limit_applies(graph: Graph) -> bool:
    """Does the pipeline keep the compute limit (row nnz per part) beside the balance limit? Rows
    with no nonzero (read by others: isolated ones are set aside first) weigh 1 in the balance and
    0 in compute, so on a graph with such rows it does; without them the two limits are one. A
    graph with the caller's vertex weights is balanced by those alone: they say what a row costs
    (a heavy row with few nonzeros would otherwise make the two limits contradict each other)."""
    return graph.vertex_weights is None and bool((graph.row_nnz == 0).any())


def compute_limit(graph: Graph, part: np.ndarray, k: int, imbalance: float, weight_cap: int | None = None) -> dict:
    """refine's keywords that keep the compute limit (row nnz ≤ ⌊(1+ε)·⌈nnz/k⌉⌋ per part) beside
    the balance limit: {} when :func:`compute_limit_applies` is False. ``weight_cap`` (row nonzeros per
    part; the distributed partitioner's limit, :func:`refine_partition`): kept as well, the lower
    of the two when both apply."""
    applies = compute_limit_applies(graph)
    if not applies and weight_cap is None:
        return {}
    nnz = graph.row_nnz.astype(np.int64)
    caps = ([balance_cap(nnz, part, k, imbalance)[1]] if applies else []) + ([] if weight_cap is None else [weight_cap])
    return {"weights2": nnz, "cap2": min(caps)}


def isolated_rows(graph: Graph) -> np.ndarray:
    """bool[n]: rows with no nonzero in their row or their column (no compute, no volume)."""
    return (graph.row_nnz == 0) & (np.bincount(graph.indices, minlength=graph.n) == 0)


def without_rows(graph: Graph, drop: np.ndarray) -> Graph:
    """``graph`` without the isolated rows ``drop`` (:func:`isolated_rows`), the others renumbered
    in their order."""
    keep = ~drop
    new_id = np.cumsum(keep) - 1
    indptr = np.concatenate([[0], graph.indptr[1:][keep]])
    vw = None if graph.vertex_weights is None else graph.vertex_weights[keep]
    sub = Graph(indptr, new_id[graph.indices], graph.data, directed=graph.directed, name=graph.name,
                vertex_weights=vw)
    if "sym" in graph._cache:            # dropping isolated rows keeps the pattern's symmetry
        sub._cache["sym"] = graph._cache["sym"]
    return sub


def spread_isolated(graph: Graph, sub_part: np.ndarray, empty: np.ndarray, k: int, imbalance: float) -> np.ndarray:
    """The partition of ``graph`` (int64[n]): ``sub_part`` on the rows that are not ``empty``, the
    empty rows (no volume, no compute, balance weight 1 each, a row of H each) by
    :func:`fill_isolated`: the fewest rows of H per part that the ε-limit of the balance weights
    (row nnz, at least 1 per row, of the whole graph) lets them reach. No part's volume or compute
    load (row nnz) changes. The empty rows go, in id order, to the parts in id order
    (deterministic)."""
    w = graph.balance_weights[~empty]
    load = np.bincount(sub_part, weights=w, minlength=k).astype(np.int64)
    rows = np.bincount(sub_part, minlength=k).astype(np.int64)
    e = int(empty.sum())
    limit = eps_limit(int(w.sum()) + e, k, imbalance)
    part = np.empty(graph.n, np.int64)
    part[~empty] = sub_part
    part[empty] = np.repeat(np.arange(k), fill_isolated(load, rows, e, limit))
    return part


def fill_isolated(load: np.ndarray, rows: np.ndarray, e: int, limit: int) -> np.ndarray:
    """int64[k]: how many of ``e`` isolated rows (no volume, no compute, balance weight 1) each
    part gets, given each part's balance weight ``load`` and rows ``rows`` (int64[k]) without
    them: each row in turn goes to the part with the fewest rows (ties: lowest id) among those
    whose weight is below ``limit`` (the ε-limit); once none is, to the lightest part
    (:func:`water_fill`). Computed in closed form: the level L of rows the parts with room are
    raised to (a bisection over L), one more row each to the parts of lowest id that can take it.
    The rows of H a rank holds (its memory, its dense per-row work) are what these rows add to;
    with ``limit`` the ε-limit of the whole total W (the other rows' weights + e), as both callers
    take it, the room always holds all e rows (Σ max(limit − load, 0) ≥ k·limit − (W − e) ≥ e), so
    the balance weights stay within it; the lightest-part rule is for a smaller limit.

    >>> fill_isolated(np.array([10, 4, 4]), np.array([1, 4, 4]), 5, 12).tolist()
    [2, 2, 1]
    """
    load, rows = np.asarray(load, np.int64), np.asarray(rows, np.int64)
    room = np.maximum(int(limit) - load, 0)
    take = min(int(e), int(room.sum()))
    counts = np.zeros(load.size, np.int64)
    if take:
        def filled(level: int) -> np.ndarray:       # rows given to reach ``level`` rows, within the room
            return np.minimum(np.maximum(level - rows, 0), room)
        lo, hi = int(rows.min()), int(rows.max()) + take     # filled(lo).sum() == 0 < take <= filled(hi).sum()
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if filled(mid).sum() >= take:
                hi = mid
            else:
                lo = mid
        counts = filled(lo)                            # below ``take``; one more row each at level hi
        more = np.flatnonzero(filled(hi) > counts)[:take - int(counts.sum())]
        counts[more] += 1
    if e > take:
        counts += water_fill(load + counts, int(e) - take)
    return counts


def water_fill(load: np.ndarray, e: int) -> np.ndarray:
    """int64[k]: how many of ``e`` rows of weight 1 each part gets when each row in turn goes to
    the lightest part (ties: lowest id), given the parts' weights ``load`` (int64[k]) — computed
    in closed form: the lightest parts raised to one level, the rows left over one each to the
    raised parts of lowest id. No part ends above max(max(load), ⌈(Σ load + e) / k⌉)."""
    k = load.size
    order = np.lexsort((np.arange(k), load))
    low = load[order]
    prefix = np.concatenate([[0], np.cumsum(low)])
    need = np.arange(1, k + 1) * low - prefix[1:]        # to raise the j lowest parts to the j-th load
    j = int(np.searchsorted(need, e, side="right"))      # >= 1: need[0] == 0
    total = e + int(prefix[j])
    level, extra = divmod(total, j)
    counts = np.zeros(k, np.int64)
    counts[order[:j]] = level - low[:j]
    counts[np.sort(order[:j])[:extra]] += 1              # one more: the raised parts of lowest id
    return counts


def _start_options(eng, start_opts, workers) -> dict:
    """A start engine's options: START_OPTIONS, the size rule's, and its threads — Mt-KaHyPar
    DETERMINISTIC ``workers`` up to the cores there are (or the count its process-wide pool already
    has: the same partition at any count, tested); KaMinPar one thread (its default: several are not reproducible)."""
    opts = dict(START_OPTIONS.get(eng, {}), **start_opts.get(eng, {}))
    if eng == "mtkahypar" and opts.get("preset") == "DETERMINISTIC":
        opts["threads"] = mtk_threads() or min(workers, available_cores())
    return opts


def _start(graph, k, eng, opts, ctx: PipelineContext, progress, lanes, repair: bool = True, vcycle: bool = True):
    """One start: the engine (with a heartbeat), the balance repair when it broke ε (``repair``;
    False under ``allow_overload``), the km1 V-cycle when ``ctx`` asks for it (a task on ``lanes``:
    it runs beside the next start's engine); returns (the part or the V-cycle's task, report of
    the start)."""
    say = progress or (lambda msg: None)
    imbalance, seed = ctx.imbalance, ctx.seed
    ts = time.perf_counter()
    with _heartbeat(progress, eng):
        part, _ = run_backend(eng, graph, k, imbalance=imbalance, seed=seed, graph=graph, **opts)
    rep = {"engine": eng, "engine_s": time.perf_counter() - ts, "start": figures(graph, part, k),
           "overload": overload(graph, part, k, imbalance)}
    if rep["overload"] > 0 and repair:     # the engine broke ε: repair before the V-cycle (it keeps the cap)
        part, rep = _rebalance(graph, part, k, imbalance, rep, say)
    rep["figures"] = rep["start"]
    if vcycle:
        part = lanes.submit(_vcycle, graph, part, k, imbalance, seed, rep, progress)
    return part, rep


def _started(part, rep, progress):
    """A start's (part, report) once its V-cycle (if any) is done, said in the starts' order."""
    if isinstance(part, Task):
        part = part.result()
    if progress:
        secs = rep["engine_s"] + rep.get("rebalance", {}).get("seconds", 0.0) + rep.get("vcycle_s", 0.0)
        progress(f"start {rep['engine']}: max(send, recv) {rep['figures']['max_send_recv']}, "
                 f"total volume {rep['figures']['total_volume']} ({secs:.2f} s)")
    return part, rep


def work_units(graph: Graph, per_pin: float, lo: int = 1, hi: int | None = None) -> int:
    """A work limit (refine's ``work_limit`` units): ``per_pin`` units per pin of A + I (nnz + n),
    at least ``lo``, at most ``hi`` (None: no cap)."""
    units = max(lo, int(per_pin * (graph.nnz + graph.n)))
    return units if hi is None else min(hi, units)


class Budget(NamedTuple):
    """The refinement's limits while it runs: ``first`` (work units of each first round, None:
    none), ``share`` (the later rounds together: share × the kept first round's units, at least
    ROUNDS_WORK_MIN), ``deadline`` (perf_counter seconds for all of it, only when the caller gave a
    ``time_limit``: then the result depends on the machine; None: none)."""
    first: int | None
    share: float
    deadline: float | None

    @classmethod
    def of(cls, graph: Graph, work: float, share: float, time_limit: float | None) -> "Budget":
        if time_limit is not None:     # the caller's wall-clock limit replaces the work budget
            return cls(None, 0.0, time.perf_counter() + time_limit)
        return cls(work_units(graph, work, REFINE_WORK_MIN, REFINE_WORK_MAX), share, None)

    def left_s(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.perf_counter()

    def say(self, work: int | None) -> str:
        left = self.left_s()
        return f"time limit {left:.1f} s" if left is not None else f"work limit {work:,} units"


def max_context(ctx: PipelineContext) -> RefineContext:
    """The pipeline's max-both refinement (FM passes of REFINE_PATIENCE; refine's other defaults);
    each call sets its seed, volume limit and budget with :func:`dataclasses.replace`."""
    return RefineContext(objective="max-both", imbalance=ctx.imbalance, seed=ctx.seed,
                         fm=FMContext(patience=REFINE_PATIENCE))


def _refine_starts(graph, k, reps, parts, best, ctx: PipelineContext, budget: Budget, progress, lanes,
                   over_ok: bool = False, weight_cap: int | None = None):
    """Bottleneck refinement (max-both) of the kept start — on graphs of ≤ REFINE_ALL_NNZ nonzeros
    of every start as balanced as the kept one (side by side on ``lanes``), since a start's
    max before refinement does not rank its refined result — then more rounds of the best result
    (:func:`_more_rounds`) within the :class:`Budget`. Total volume at most
    (1 + volume_tolerance) × the lowest of the starts' (or the start's own when already higher).
    On a graph with empty rows each start is first brought within the compute limit
    (rebalance.repair_compute), and every refinement keeps it (:func:`compute_limit`).
    Returns (part, refine report, index of the start kept, engines refined, the kept start's
    refinement context: its volume limit)."""
    from ..refinement.rebalance import repair_compute

    say = progress or (lambda msg: None)
    tol0 = ctx.volume_tolerance
    low = min(r["figures"]["total_volume"] for r in reps)
    tied = [i for i in range(len(reps)) if (over_ok or reps[i]["overload"] == reps[best]["overload"]) and i != best]
    cands = [best] + (tied if graph.nnz <= REFINE_ALL_NNZ and not is_large(graph) else [])
    tasks = []
    for i in cands:
        start, tv = parts[i], reps[i]["figures"]["total_volume"]
        if compute_limit_applies(graph) and not over_ok:     # within the compute limit before the refinement keeps it
            start = repair_compute(graph, start, k, imbalance=ctx.imbalance)[0]
            tv = figures(graph, start, k)["total_volume"]
        ref, tol = (low, tol0) if tv <= low * (1 + tol0) else (tv, 0.0)
        rctx = replace(max_context(ctx), volume_reference=ref, volume_tolerance=tol)
        say(f"refining max(send, recv) of the {reps[i]['engine']} start ({budget.say(budget.first)})")
        said = progress if len(cands) == 1 or progress is None else (
            lambda msg, eng=reps[i]["engine"]: progress(f"{eng} start: {msg}"))
        tasks.append((i, rctx, lanes.submit(_refine_max, graph, start, k, replace(
            rctx, time_limit=budget.left_s(), work_limit=budget.first), said, weight_cap)))
    results = []
    for i, rctx, task in tasks:      # in the candidates' order, whichever ended first
        p_i, r_i = task.result()
        results.append((r_i["after"]["max_send_recv"], r_i["after"]["total_volume"], len(results), i, p_i, r_i,
                        rctx))
    *_, i, part, rrep, rctx = min(results, key=lambda t: t[:3])
    part, rrep = _more_rounds(graph, k, part, rrep, rctx, ctx.budget.refine_rounds, budget, progress, weight_cap)
    return part, rrep, i, [reps[j]["engine"] for j in cands], rctx


def _cycles(graph, k, part, report, ctx: PipelineContext, rctx: RefineContext, budget, cycles, progress,
            weight_cap: int | None = None):
    """Cycles 2.. of refinement + volume round (``refine_cycles``): the max-both refinement from
    the last volume round's result (seed + 100 c; ``rctx``: the first refinement's total-volume
    limit), within ``cycle_work`` x the work units the refinement spent (its rounds included; the
    seconds left under a caller's time limit), then a volume round. Ends at the first cycle that
    does not lower max(send, recv); the lowest (max(send, recv), total volume) is kept, and
    ``report["volume_round"]`` becomes the kept cycle's (its ``after``: the figures the cluster
    volume rounds start from, or the final ones where they do not run). Returns
    (part, report: ``trail`` of (max(send, recv), total volume) after each cycle, the first being
    the volume round's, ``kept`` (index in the trail), ``work`` units and ``seconds`` of the cycles)."""
    after = report["volume_round"]["after"]
    best = (after["max_send_recv"], after["total_volume"])
    trail, kept, work, t0 = [best], 0, 0, time.perf_counter()
    units = None if budget.first is None else max(1, int(ctx.budget.cycle_work * report["refine"]["work"]))
    cur = part
    for c in range(1, cycles):
        left = budget.left_s()
        if left is not None and left <= 0:
            break
        if progress:
            progress(f"refine/volume cycle {c + 1}: from max(send, recv) {trail[-1][0]}, total volume "
                     f"{trail[-1][1]} ({budget.say(units)})")
        seed = ctx.seed + 100 * c
        cur, r_c = _refine_max(graph, cur, k, replace(rctx, seed=seed, time_limit=left, work_limit=units), None,
                               weight_cap)
        cur, v_c = _volume_round(graph, k, cur, r_c, ctx, seed, budget, None, weight_cap)
        work += r_c["work"] + v_c["work"]
        got = (v_c["after"]["max_send_recv"], v_c["after"]["total_volume"])
        trail.append(got)
        if got < best:
            best, part, kept = got, cur, c
            report["volume_round"] = dict(v_c, cycle=c + 1)
        if got[0] >= trail[-2][0]:
            break
    if progress:
        progress(f"refine/volume cycles: max(send, recv) {' -> '.join(str(t[0]) for t in trail)}; kept: "
                 f"max(send, recv) {best[0]}, total volume {best[1]}")
    return part, {"trail": trail, "kept": kept, "work": work, "seconds": time.perf_counter() - t0}


def _more_rounds(graph, k, part, rrep, rctx: RefineContext, rounds, budget, progress, weight_cap: int | None = None):
    """Rounds 2.. of the refinement: restart it from its own result with seed + round (a new vertex
    order; ``rctx``: the first round's volume limit), keep the lowest (max(send, recv), total
    volume); stop after ``rounds`` in all, ROUND_PATIENCE rounds in a row without a lower one, or
    when the :class:`Budget` of the rounds is spent (work units; seconds only under a caller's time
    limit). Measured on both halves (docs/design/planner.md): up to 6 % off the max
    (delaunay_n15, k = 64: 98 -> 92), 0.3-0.8 % on the geometric means.
    Returns (part, report): the best round's report with the first round's ``before``, ``rounds``
    (max(send, recv) after each round) and the passes, moves, work and seconds of all rounds."""
    first, cur = rrep, part
    best = (rrep["after"]["max_send_recv"], rrep["after"]["total_volume"])
    trail, stall = [best[0]], 0
    passes, moves, seconds, work = rrep["passes"], rrep["moves"], rrep["seconds"], rrep["work"]
    work_left = None if budget.first is None else max(ROUNDS_WORK_MIN, int(budget.share * rrep["work"]))
    for r in range(1, rounds):
        left = budget.left_s()
        if (stall >= ROUND_PATIENCE or rrep["stopped"] == "nothing to refine"
                or (left is not None and left <= 0) or (work_left is not None and work_left <= 0)):
            break
        if progress:
            progress(f"refinement round {r + 1} (seed {rctx.seed + r}, {budget.say(work_left)})")
        cur, r_i = _refine_max(graph, cur, k, replace(rctx, seed=rctx.seed + r, time_limit=left, work_limit=work_left),
                               progress, weight_cap)
        passes, moves, seconds, work = (passes + r_i["passes"], moves + r_i["moves"], seconds + r_i["seconds"],
                                        work + r_i["work"])
        if work_left is not None:
            work_left -= r_i["work"]
        got = (r_i["after"]["max_send_recv"], r_i["after"]["total_volume"])
        trail.append(got[0])
        if got < best:
            best, part, rrep, stall = got, cur, r_i, 0
        else:
            stall += 1
    if len(trail) > 1 and progress:
        progress(f"refinement rounds: max(send, recv) {' -> '.join(map(str, trail))}")
    return part, dict(rrep, before=first["before"], rounds=trail, passes=passes, moves=moves, seconds=seconds,
                      work=work)


def _volume_round(graph, k, part, rrep, ctx: PipelineContext, seed, budget, progress, weight_cap: int | None = None):
    """km1 FM on the refined ``part`` (refine objective "total", never above its own total volume)
    with no part's max(send, recv) allowed above the refined max: ``volume_work`` units per pin of
    A + I (seconds left under a caller's time limit instead). Returns (part, report: the figures
    ``before``/``after`` (as refine's), work units, seconds, why it stopped)."""
    from ..refinement.refine import refine

    left = budget.left_s()
    units = None if left is not None else work_units(graph, ctx.budget.volume_work)
    if progress:
        progress(f"volume round: total volume at most max(send, recv) {rrep['after']['max_send_recv']} "
                 f"({budget.say(units)})")
    vctx = RefineContext(objective="total", imbalance=ctx.imbalance, seed=seed, volume_tolerance=0.0,
                         max_cost=rrep["after"]["max_send_recv"], time_limit=None if left is None else max(left, 0.0),
                         work_limit=units)
    new, vrep = refine(graph, part, k, context=vctx, **compute_limit(graph, part, k, ctx.imbalance, weight_cap))
    b, a = vrep["before"], vrep["after"]
    if progress:
        progress(f"volume round: total volume {b['total_volume']} -> {a['total_volume']}, "
                 f"max(send, recv) {b['max_send_recv']} -> {a['max_send_recv']} ({vrep['seconds']:.2f} s)")
    return new, {"before": b, "after": a, "work": vrep["work"], "seconds": vrep["seconds"],
                 "stopped": vrep["stopped"]}


def _refine_max(graph, part, k, rctx: RefineContext, progress, weight_cap: int | None = None):
    """One max-both refinement of ``part`` under ``rctx`` (total volume at most (1 + tol) ×
    ``volume_reference``, its time and work limits), keeping the compute limit on graphs with
    empty rows (and ``weight_cap``: :func:`compute_limit`); returns (part, refine report)."""
    from ..refinement.refine import refine

    return refine(graph, part, k, context=rctx, progress=progress,
                  **compute_limit(graph, part, k, rctx.imbalance, weight_cap))


def end_compute_repair(graph, part, k, imbalance, progress):
    """The compute limit (row nnz) as well as the balance limit (row nnz, at least 1) at the end
    (rebalance.repair_compute), on graphs with empty rows: the refinement keeps both, so this moves
    rows only when it did not run (``refine=False``, the fast preset's V-cycle alone) or could not
    start within them (a row heavier than the compute limit). Returns (part, report or None when
    nothing moved)."""
    from ..refinement.rebalance import repair_compute

    if not compute_limit_applies(graph):
        return part, None
    fixed, info = repair_compute(graph, part, k, imbalance=imbalance)
    if sum(info["moved"]) == 0:
        return part, None
    info["after"] = figures(graph, fixed, k)
    if progress:
        progress(f"compute repair: {info['moved'][0]} rows moved out of parts above the compute limit "
                 f"{info['compute_limit']:,}, {info['moved'][1]} rows with no nonzero to keep the balance "
                 f"limit; max(send, recv) {info['after']['max_send_recv']}")
    return fixed, info


def repair_overload(graph: Graph, part: np.ndarray, k: int, imbalance: float, before: int):
    """The balance repair (partition/rebalance.py) of a partition ``before`` (> 0) above the
    ε-limit: (the repaired part when it is less overloaded, else None; its info with ``seconds``,
    ``overload_before`` and ``overload_after``)."""
    from ..refinement.rebalance import rebalance

    tr = time.perf_counter()
    fixed, info = rebalance(graph, part, k, imbalance=imbalance)
    after = overload(graph, fixed, k, imbalance)
    info.update(seconds=time.perf_counter() - tr, overload_before=before, overload_after=after)
    return (fixed if after < before else None), info


def _rebalance(graph, part, k, imbalance, rep, say):
    """Balance repair of an overloaded start (:func:`repair_overload`); kept when less overloaded."""
    fixed, info = repair_overload(graph, part, k, imbalance, rep["overload"])
    rep["rebalance"] = info
    if fixed is not None:
        after = info["overload_after"]
        rep["overload"], rep["start"] = after, figures(graph, fixed, k)
        say(f"start {rep['engine']}: above the balance limit by {info['overload_before']}; "
            f"{info['moved']} rows moved, now {'balanced' if after == 0 else f'above it by {after}'}")
        return fixed, rep
    return part, rep


def _vcycle(graph, part, k, imbalance, seed, rep, progress, say_figures=False, cycles: int | None = None):
    """The km1 V-cycle of a start (with a heartbeat; at most ``cycles`` V-cycles, None: vcycle_refine's
    default); its time and figures go to ``rep``."""
    from ..refinement.vcycle import vcycle_refine

    tv = time.perf_counter()
    ctx = VCycleContext() if cycles is None else VCycleContext(cycles=cycles)
    with _heartbeat(progress, rep["engine"], f"km1 V-cycle on the {rep['engine']} start"):
        part, _ = vcycle_refine(graph, part, k, imbalance=imbalance, seed=seed, context=ctx)
    rep["vcycle_s"] = time.perf_counter() - tv
    rep["figures"] = f = figures(graph, part, k)
    if say_figures and progress is not None:
        progress(f"km1 V-cycle on the {rep['engine']} start: max(send, recv) {f['max_send_recv']}, "
                 f"total volume {f['total_volume']} ({rep['vcycle_s']:.2f} s)")
    return part
