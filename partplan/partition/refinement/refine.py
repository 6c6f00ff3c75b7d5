"""Bottleneck-volume refinement of a 1D row partition (conformal ownership).

No partitioner minimizes the *bottleneck* — the rank with the largest send or
receive volume, which sets the time of every all-to-all. This post-pass takes
any partition (typically Mt-KaHyPar's km1 result, or METIS's) and moves
vertices so that the worst rank's load drops, while

* compute balance stays within ε: part weight (row nnz, at least 1 per row)
  ≤ ⌊(1+ε)·⌈W/k⌉⌋, or, when the input already violates that, no part grows
  beyond the input's heaviest part (never worse than the input);
* total volume stays ≤ (1 + volume_tolerance) × the input's.

Model: the exact column-net volume of :func:`partplan.analyze` — net j =
column j of A plus the diagonal, sent by part[j] to every other part holding a
pin; send_p = Σ_{j ∈ p} (λ_j − 1), recv_p = |{j ∉ p : p ∈ Λ_j}|.

Algorithm: k-way FM with exact gains in a potential (compiled kernels in
:mod:`partplan.partition.refinement.fm`; numba):

* state: sparse per-net pin counts (memory O(pins); no n×k table), λ_j, the
  k×k volume matrix, send/recv volumes and message counts per part, loads;
  one move v: a → b updates it exactly in O(deg v + λ_v);
* the optimized value is max_p cost_p; the gain of a move is its exact
  change of the potential Φ = Σ_p (send_p/M₀)^q + (recv_p/M₀)^q (M₀ = the
  value at the start of the pass; q = 16 by default), a smooth maximum that
  also rewards lowering near-maximal parts when several tie for the max, plus
  ``mu``·Δ(total volume)/M₀; for "total" the gain is −Δ(total volume) first;
* every vertex's best move (to its ``max_targets`` best-connected parts) sits
  in an indexed max-heap; the top one is re-evaluated against the current loads
  before it moves (lazy); after a move only the pins of the nets whose pin
  counts crossed 0/1/2 in the source or target part — and of the moved vertex's
  own net, whose sender changed — are re-evaluated (incremental);
* moves with a loss are applied (so clusters can migrate one vertex at a
  time); a pass ends after ``patience`` moves without a new best *feasible*
  state (lexicographic: max cost, Φ, total volume) and is rolled back to its
  best prefix; passes repeat until one lowers the value by ≤ ``min_gain``
  (converged) — ``time_limit`` is only a safety net.

Objectives (``cost_p`` per part; the optimized value is max_p cost_p):
``max-send`` send_p; ``max-recv`` recv_p; ``max-both`` max(send_p, recv_p);
``weighted`` α·max(send msgs, recv msgs) + β·bytes·max(send_p, recv_p) (the
α-β estimate of :class:`partplan.CommStats`); ``total`` total volume (primary)
with the max-both potential as tie-break — with the exact hypergraph (km1)
gains this is a volume refinement (used by the "fast" preset on METIS).

Directed graphs: the refinement optimizes the forward exchange ``A @ H``
(the backward ``A^T @ G`` is not part of the objective).

Volumes are in rows of H (bytes = rows × f × dtype size).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ...errors import OptionError, PartitionError
from ...graph import Graph
from ...metrics.cost import alpha_beta_time, dtype_bytes
from ...metrics.volume1d import volume_matrix
from ...parts import as_partition
from . import fm as kernels
from ..context import RefineContext, resolve
from ..heartbeat import _heartbeat
from .multilevel import cluster_moves
from ..objectives import OBJECTIVES, balance_cap, check_objective  # noqa: F401  (re-exported)
from ..._seed import numpy_seed
from ..options import check_int
from ...graph import check_graph

PASS_END = ("patience", "no candidate", "move limit", "time limit", "work limit")
STOPPED = ("converged", "time limit", "max passes", "work limit")
# work units charged for one cluster-move stage, per pin of A + I (nnz + n): its coarsening and
# moves take about as long as FM evaluating that many nets (measured: 0.15-0.4 s per stage on
# email-Enron, copter2, cond-mat-2003 at 2-4 M units/s)
ML_WORK_PER_PIN = 1.0
# multilevel=True: FM passes before the cluster moves (after them: on to convergence)
ML_FM_PASSES = 1
VOLUME_LIMIT_MAX = 2 ** 60
_KERNELS_LOADED = False
_KERNELS_LOCK = threading.RLock()


def _load_kernels() -> None:
    """Load the compiled kernels once per process (numba's on-disk cache; ~0.3 s, or a compile on the
    very first run) before a time limit starts counting: otherwise the first refinement of a process
    loses that time to loading, stops at its limit instead of converging, and the result depends on
    the machine rather than the seed (delaunay_n15, k = 16: max 175 instead of 167)."""
    global _KERNELS_LOADED
    with _KERNELS_LOCK:     # refinements may start side by side (lanes.py): one loads, the others wait
        if not _KERNELS_LOADED:
            _KERNELS_LOADED = True      # (the grid's own refine() call re-enters: nothing to load)
            _grid_refine()


def _grid_refine() -> None:
    """A refinement of a small grid that reaches every kernel (:func:`_load_kernels`): big enough
    that the cluster-move stage loads its kernels too, with a time limit that does not bind, so
    that the code paths reading the clock are reached as well."""
    side = 16
    v = np.arange(side * side).reshape(side, side)
    src = np.concatenate([v[:, :-1].ravel(), v[:-1, :].ravel()])
    dst = np.concatenate([v[:, 1:].ravel(), v[1:, :].ravel()])
    grid = Graph.from_edges(src, dst, n=side * side, symmetrize=True)
    refine(grid, np.arange(side * side) % 6, 6, imbalance=0.5, time_limit=1e9)


def refine(graph: Graph, part, k: int | None = None, *, context: RefineContext | None = None,
           weights2: np.ndarray | None = None, cap2: int | None = None, progress=None,
           **options) -> tuple[np.ndarray, dict]:
    """Lower the bottleneck communication of ``part`` (conformal ownership).

    Parameters
    ----------
    graph : the matrix A (rows = vertices).
    part : int[n] row partition into k parts (not modified).
    context : a :class:`~partplan.partition.context.RefineContext` (checked: built by
        :func:`~partplan.partition.context.resolve`); None: the defaults.
    options : the context's options by name, checked and applied over ``context`` — the
        ``objective`` ("max-both", the default: max over parts of max(send, recv); "max-send",
        "max-recv", "weighted": α-β time of the worst rank; "total": km1 refinement with exact
        gains), ``imbalance`` (ε: part weight ≤ ⌊(1+ε)·⌈W/k⌉⌋, never worse than the input),
        ``volume_tolerance`` (total volume ≤ (1 + tol) × the input's, or × ``volume_reference``),
        ``seed``, ``time_limit`` (seconds; a safety net, the result then depends on the machine)
        or ``work_limit`` (counted work units: the same stop on every machine), ``max_cost``
        ("total" only: no part's max(send, recv) above it), ``alpha``/``beta``/``f``/``dtype``
        (α-β model) and the FM passes' knobs (patience, max_passes, q, mu, multilevel, ...).
        :func:`partplan.partition.context.options_table` lists them all with their defaults.
    weights2, cap2 : a second weight per row (int64[n], ≥ 0) and its cap per part, kept in every
        state alongside the balance cap (never relaxed; at least the input's heaviest part). The
        default pipeline passes row nnz and the compute limit on graphs with empty rows
        (:func:`partplan.partition.pipeline.auto.compute_limit`).
    progress : callable(str) or None: a heartbeat line while the compiled passes run and one
        line per refinement pass (value, moves kept/tried, why it ended).

    Returns
    -------
    (new_part int64[n], report) where report holds ``before``/``after`` figures (rows of H;
    equal to :func:`partplan.analyze` of the forward pass), ``passes``, ``moves`` (kept),
    ``moves_tried``, ``seconds``, ``converged_s`` (when the last pass ended), ``work`` (units
    spent), ``stopped`` ("converged", "time limit", "max passes", "work limit", "nothing to
    refine"), ``trace`` (per pass), ``balance_limit``, ``balance_cap``, ``volume_limit``,
    ``multilevel`` (the cluster moves' report, None when they did not run), ``params``.

    Examples
    --------
    >>> import numpy as np
    >>> from partplan import Graph
    >>> g = Graph.from_edges([0, 1, 2, 3, 4], [1, 2, 3, 4, 5], symmetrize=True)
    >>> new, rep = refine(g, np.array([0, 1, 0, 1, 0, 1]), 2, imbalance=0.5, volume_tolerance=0.0)
    >>> rep["after"]["max_send_recv"] <= rep["before"]["max_send_recv"]
    True
    """
    check_graph(graph, error=PartitionError)
    if context is not None and not isinstance(context, RefineContext):
        raise PartitionError(f"refine: context must be a RefineContext (partplan.partition.context.resolve) or None, "
                             f"got {type(context).__name__}")
    if progress is not None and not callable(progress):
        raise PartitionError(f"refine: progress must be None or a callable(str), got {progress!r}")
    ctx = resolve(RefineContext, options, label="refine", base=context) if options or context is None else context
    if ctx.time_limit is not None:
        _load_kernels()
    t0 = time.perf_counter()
    part, k = as_partition(part, graph.n, k)
    b = _bounds(graph, part, k, ctx, weights2, cap2)
    out, run = part.copy(), _Run(stopped=_nothing_to_refine(graph.n, k, ctx))
    if run.stopped is None:
        _search(graph, out, k, ctx, b, run, t0, progress)
    return out, _report(graph, out, k, ctx, b, run, t0)


class _Bounds(NamedTuple):
    """What a refinement keeps and reports, fixed at its start: balance weights ``w``, the cap a
    move may create and the ε-limit, the total-volume limit, the input's figures, bytes per row,
    the second weight and its cap, the numpy seed."""
    w: np.ndarray
    cap: int
    limit: int
    vlimit: int
    before: dict
    rb: int
    weights2: np.ndarray | None
    cap2: int | None
    seed: int


@dataclass
class _Run:
    """What the stages of passes did: the report's counters, trace and cluster-move report."""
    stopped: str | None = None
    trace: list = field(default_factory=list)
    passes: int = 0
    kept: int = 0
    tried: int = 0
    build_s: float = 0.0
    work: int = 0
    ml: dict | None = None
    vol: np.ndarray | None = None     # the volume matrix of the result, recounted by _State.check


def _bounds(graph: Graph, part: np.ndarray, k: int, ctx: RefineContext, weights2, cap2) -> _Bounds:
    """The refinement's limits (module doc) and the input's figures; checks the second weight."""
    w = graph.balance_weights
    cap, limit = balance_cap(w, part, k, ctx.imbalance)
    if (weights2 is None) != (cap2 is None):
        raise OptionError("weights2 and cap2 go together (a second weight per row and its cap per part)")
    if weights2 is not None:
        weights2 = _check_weights(weights2, graph.n)
        cap2 = max(check_int("cap2", cap2), int(np.bincount(part, weights=weights2, minlength=k).max()))
    rb = ctx.f * dtype_bytes(ctx.dtype)
    before = _figures(graph, part, k, w, ctx.alpha, ctx.beta, rb)
    ref_volume = before["total_volume"] if ctx.volume_reference is None else ctx.volume_reference
    # (capped: a huge tolerance means no limit, and the kernels count in int64)
    vlimit = int(min(np.floor(ref_volume * (1.0 + ctx.volume_tolerance)), VOLUME_LIMIT_MAX))
    return _Bounds(w, cap, limit, vlimit, before, rb, weights2, cap2, numpy_seed(ctx.seed))


def _nothing_to_refine(n: int, k: int, ctx: RefineContext) -> str | None:
    """Why no pass can run (the report's ``stopped``), or None."""
    if k == 1 or n == 0 or ctx.fm.max_passes == 0:
        return "nothing to refine"
    if ctx.time_limit is not None and ctx.time_limit <= 0:
        return "time limit"
    if ctx.work_limit is not None and ctx.work_limit <= 0:
        return "work limit"
    return None


def _search(graph: Graph, out: np.ndarray, k: int, ctx: RefineContext, b: _Bounds, run: _Run, t0: float,
            progress) -> None:
    """The stages of passes on ``out`` (in place): with ``multilevel``, ML_FM_PASSES FM passes, the
    cluster moves, then FM on to convergence (within max_passes in all; the coarsening of the
    cluster stage does not look at the clock, its moves do); else FM to convergence."""
    st = _State(graph, out, k, b.weights2, b.cap2)
    run.build_s = time.perf_counter() - t0
    records = st.records(out, b.w)
    fm, obj = ctx.fm, ctx.objective
    cost = kernels.CostModel(kernels.OBJ_CODES[obj], float(ctx.alpha), float(ctx.beta) * b.rb, int(fm.q), float(fm.mu))
    limits = kernels.Limits(b.cap, b.cap + int(fm.overload * b.cap), b.vlimit,
                        b.vlimit + int(fm.volume_slack * b.before["total_volume"]), int(fm.max_targets),
                        -1.0 if ctx.max_cost is None else float(ctx.max_cost), st.cap2)
    order = np.random.default_rng(b.seed).permutation(graph.n).astype(np.int64)
    deadline = -1.0 if ctx.time_limit is None else t0 + float(ctx.time_limit)
    stats = np.zeros(8, dtype=np.int64)
    use_ml = fm.multilevel and obj != "total" and fm.max_passes > ML_FM_PASSES
    code = 0
    for si, npasses in enumerate((ML_FM_PASSES, fm.max_passes) if use_ml else (fm.max_passes,)):
        if si == 1:       # between the two FM stages: whole clusters move (multilevel.py)
            stop = _cluster_stage(graph, st, out, k, ctx, b, run, stats, code, deadline, t0, progress)
            if stop is not None:
                code = stop
                break
            # FM goes on to convergence whether or not a cluster moved (its one pass before
            # could not yet widen to all parts, see partition/fm)
            npasses = fm.max_passes - run.passes
        opts = _pass_options(graph, ctx, npasses, deadline)
        code = _fm_stage(records, cost, limits, opts, order, stats, ctx, run, si, t0, progress)
    run.stopped = STOPPED[code]
    run.vol = st.check(out)
    run.work = int(kernels.work_done(stats))


def _pass_options(graph: Graph, ctx: RefineContext, npasses: int, deadline: float) -> kernels.PassOptions:
    """The kernels' options of one stage of ``npasses`` FM passes."""
    fm, n = ctx.fm, graph.n
    avg = graph.nnz / max(n, 1)
    big_deg = int(max(64, 4 * avg)) if fm.big_degree is None else int(fm.big_degree)
    mm = n if fm.max_moves_per_pass is None else max(1, int(fm.max_moves_per_pass))
    return kernels.PassOptions(int(fm.patience), int(npasses), float(fm.min_gain), mm, deadline, big_deg,
                           bool(fm.blocked), float(fm.hot), bool(fm.sink) and ctx.objective != "total",
                           -1 if ctx.work_limit is None else int(ctx.work_limit))


def _fm_stage(records, cost, limits, opts, order, stats, ctx: RefineContext, run: _Run, si: int, t0: float,
              progress) -> int:
    """One stage of FM passes (the compiled kernels); adds to ``run``; returns the kernels' stop code."""
    tr = np.zeros((max(1, opts.max_passes), 5))
    ts = time.perf_counter() - t0
    with _heartbeat(progress, None, label=f"refining {ctx.objective} (stage {si + 1})"):
        p_, k_, t_, code = kernels._fm(*records, cost, limits, opts, order, tr, stats)
    run.passes, run.kept, run.tried = run.passes + p_, run.kept + k_, run.tried + t_
    for i in range(min(p_, tr.shape[0])):
        run.trace.append({"seconds": round(ts + float(tr[i, 0]), 4), "value": float(tr[i, 1]),
                          "kept": int(tr[i, 2]), "tried": int(tr[i, 3]), "pass_end": PASS_END[int(tr[i, 4])],
                          "stage": si + 1})
        if progress is not None:
            t = run.trace[-1]
            progress(f"refine pass {len(run.trace)}: {ctx.objective} {t['value']:.0f}, "
                     f"{t['kept']}/{t['tried']} moves kept, ended by {t['pass_end']} ({t['seconds']:.2f} s)")
    return code


def _cluster_stage(graph, st, out, k, ctx: RefineContext, b: _Bounds, run: _Run, stats, code: int,
                   deadline: float, t0: float, progress) -> int | None:
    """The cluster moves between the FM stages (charged ML_WORK_PER_PIN units per pin); returns the
    stop code when the refinement ends here (time or work limit), else None."""
    if code in (1, 3) or (deadline >= 0 and time.perf_counter() > deadline):
        return code if code in (1, 3) else 1
    stats[6] += int(ML_WORK_PER_PIN * (graph.nnz + graph.n))
    if ctx.work_limit is not None and kernels.work_done(stats) > ctx.work_limit:
        return 3
    with _heartbeat(progress, None, label=f"refining {ctx.objective} (cluster moves)"):
        run.ml = cluster_moves(graph, st, out, k, b.w, b.cap, b.vlimit, kernels.OBJ_CODES[ctx.objective],
                               float(ctx.alpha), float(ctx.beta) * b.rb, int(ctx.fm.q), float(ctx.fm.mu), seed=b.seed,
                               deadline=deadline)
    if progress is not None:
        progress(f"refine cluster moves: {run.ml['moves']} of {run.ml['trials']} kept on "
                 f"{len(run.ml['levels'])} levels ({time.perf_counter() - t0:.2f} s)")
    return 1 if run.ml["stopped"] == "time limit" else None


def _report(graph: Graph, out: np.ndarray, k: int, ctx: RefineContext, b: _Bounds, run: _Run, t0: float) -> dict:
    """The refinement's report (:func:`refine`'s Returns)."""
    fm = ctx.fm
    after = _figures(graph, out, k, b.w, ctx.alpha, ctx.beta, b.rb, vol=run.vol)
    return {"objective": ctx.objective, "k": k, "before": b.before, "after": after, "multilevel": run.ml,
            "passes": run.passes, "moves": run.kept, "moves_tried": run.tried,
            "seconds": time.perf_counter() - t0,
            "converged_s": run.trace[-1]["seconds"] if run.trace else 0.0, "build_s": run.build_s,
            "work": run.work, "stopped": run.stopped, "trace": run.trace,
            "balance_limit": b.limit, "balance_cap": b.cap, "volume_limit": b.vlimit,
            "compiled": kernels.HAVE_NUMBA,
            "params": {"imbalance": ctx.imbalance, "volume_tolerance": ctx.volume_tolerance, "seed": b.seed,
                       "time_limit": ctx.time_limit, "alpha": ctx.alpha, "beta": ctx.beta, "f": ctx.f,
                       "dtype": ctx.dtype, "patience": fm.patience, "max_passes": fm.max_passes,
                       "max_targets": fm.max_targets, "q": fm.q, "mu": fm.mu, "min_gain": fm.min_gain,
                       "work_limit": ctx.work_limit, "max_cost": ctx.max_cost}}


CAP2_NONE = 2 ** 62        # the second weight's cap when there is none


def _check_weights(weights, n: int) -> np.ndarray:
    """``weights`` as int64[n], each ≥ 0, or one OptionError."""
    w = np.asarray(weights)
    if w.shape != (n,) or not np.issubdtype(w.dtype, np.integer) or (w.size and w.min() < 0):
        raise OptionError(f"weights2 must be {n} non-negative integers (one per row), got shape {w.shape}, "
                          f"dtype {w.dtype}")
    return w.astype(np.int64, copy=False)


class _State:
    """Arrays of the refinement state (see :mod:`.fm`); :meth:`records` groups
    them in the kernels' records."""

    def __init__(self, graph: Graph, part: np.ndarray, k: int, w2: np.ndarray | None = None,
                 cap2: int | None = None):
        n = graph.n
        self.vptr, self.vidx = graph.indptr, graph.indices
        if graph.is_symmetric():
            self.tptr, self.tidx = self.vptr, self.vidx
        else:
            T = graph.transpose()
            self.tptr, self.tidx = T.indptr, T.indices
        size = np.diff(self.tptr) + 1                       # pins of net j (+1 if no self loop: an upper bound)
        self.dense = size >= k
        capacity = np.where(self.dense, k, size)
        self.soff = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(capacity, out=self.soff[1:])
        self.spart = np.zeros(int(self.soff[-1]), dtype=np.int32)
        self.scnt = np.zeros(int(self.soff[-1]), dtype=np.int32)
        self.lam = np.zeros(n, dtype=np.int32)
        self.vol = np.zeros((k, k), dtype=np.int64)
        kernels.build_slots(self.tptr, self.tidx, part, self.pins(), self.vol)
        self.send = self.vol.sum(axis=1)
        self.recv = self.vol.sum(axis=0)
        nz = self.vol > 0
        self.smsg = nz.sum(axis=1).astype(np.int64)
        self.rmsg = nz.sum(axis=0).astype(np.int64)
        self.tot = np.array([int(self.send.sum()), int(nz.sum())], dtype=np.int64)
        self.load = np.bincount(part, weights=graph.balance_weights, minlength=k).astype(np.int64)
        # the second weight and its cap (none: the kernels check load2 against a cap never reached)
        self.w2, self.cap2 = w2, (CAP2_NONE if cap2 is None else int(cap2))
        self.load2 = self.load.copy() if w2 is None else np.bincount(part, weights=w2, minlength=k).astype(np.int64)

    def pins(self) -> kernels.PinSlots:
        """The pin counts as a :class:`.kernels.PinSlots` record (the same arrays)."""
        return kernels.PinSlots(self.soff, self.lam, self.dense, self.spart, self.scnt)

    def records(self, part: np.ndarray, w: np.ndarray) -> tuple:
        """(:class:`.kernels.Topology`, :class:`.kernels.PinSlots`, :class:`.kernels.VolumeState`)
        of the kernels: the same arrays, with ``part`` (int64[n], the partition
        the state was built from, updated in place by the kernels) and ``w``
        (int64[n] balance weight per vertex)."""
        return (kernels.Topology(self.vptr, self.vidx, self.tptr, self.tidx, w, w if self.w2 is None else self.w2),
                self.pins(),
                kernels.VolumeState(part, self.load, self.vol, self.send, self.recv, self.smsg, self.rmsg, self.tot,
                                self.load2))

    def check(self, part: np.ndarray) -> np.ndarray:
        """The incremental state must equal a recount (cheap, O(nnz)); returns the recount (the
        report's figures of the result are made from it, not from a second recount)."""
        vol, _ = volume_matrix(self.vptr, self.vidx, part, self.vol.shape[0])
        if not np.array_equal(vol, self.vol):
            raise RuntimeError("internal error: incremental volume matrix differs from a recount")
        return vol


def _figures(graph: Graph, part: np.ndarray, k: int, w: np.ndarray, alpha: float, beta: float,
             rb: int, vol: np.ndarray | None = None) -> dict:
    """The reported figures, recomputed from scratch (as :func:`partplan.analyze`); ``vol``: the
    volume matrix of ``part`` when already recounted (:meth:`_State.check`), else counted here."""
    if vol is None:
        vol, _ = volume_matrix(graph.indptr, graph.indices, part, k)
    send, recv = vol.sum(axis=1), vol.sum(axis=0)
    nz = vol > 0
    smsg, rmsg = nz.sum(axis=1), nz.sum(axis=0)
    rt = alpha_beta_time(smsg, rmsg, send * rb, recv * rb, alpha, beta)
    nnz_load = np.bincount(part, weights=graph.row_nnz, minlength=k)
    mean = nnz_load.mean()
    return {"total_volume": int(send.sum()), "max_send": int(send.max()), "max_recv": int(recv.max()),
            "max_send_recv": int(np.maximum(send, recv).max()),
            "messages": int(nz.sum()), "max_send_messages": int(smsg.max()),
            "max_recv_messages": int(rmsg.max()),
            "max_compute_load": int(nnz_load.max()),
            "compute_imbalance": float(nnz_load.max() / mean - 1.0) if mean > 0 else 0.0,
            "max_balance_weight": int(np.bincount(part, weights=w, minlength=k).max()),
            "time_estimate_s": float(rt.max())}
