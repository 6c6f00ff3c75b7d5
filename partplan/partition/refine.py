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
:mod:`partplan.partition._fm`; numba):

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

import numpy as np

from ..errors import OptionError
from ..graph import Graph
from ..metrics.cost import DEFAULT_ALPHA_S, DEFAULT_BETA_S_PER_BYTE, alpha_beta_time, check_width, dtype_bytes
from ..metrics.volume1d import volume_matrix
from ..parts import as_partition
from . import _fm
from .multilevel import cluster_moves
from .objectives import OBJECTIVES, balance_cap, check_objective  # noqa: F401  (re-exported)
from .options import check_bool, check_imbalance, check_int, check_real, rng_seed

_LAST_STATS = [0] * 8
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


def refine(graph: Graph, part, k: int | None = None, *, objective: str = "max-both",
           imbalance: float = 0.03, volume_tolerance: float = 0.05, seed: int = 0,
           time_limit: float | None = None, alpha: float = DEFAULT_ALPHA_S,
           beta: float = DEFAULT_BETA_S_PER_BYTE, f: int = 128, dtype: str = "float32",
           patience: int = 200, max_passes: int = 30, max_targets: int = 3, q: int = 16,
           mu: float = 0.05, overload: float = 0.02, big_degree: int | None = None, blocked: bool = True, full_updates: bool = False, hot: float = 0.9, sink: bool = True, volume_slack: float = 0.0,
           max_moves_per_pass: int | None = None,
           min_gain: float = 0.01, multilevel: bool = True, volume_reference: int | None = None,
           work_limit: int | None = None, max_cost: float | None = None,
           weights2: np.ndarray | None = None, cap2: int | None = None,
           progress=None) -> tuple[np.ndarray, dict]:
    """Lower the bottleneck communication of ``part`` (conformal ownership).

    Parameters
    ----------
    graph : the matrix A (rows = vertices).
    part : int[n] row partition into k parts (not modified).
    objective : "max-both" (default: max over parts of max(send, recv)),
        "max-send", "max-recv", "weighted" (α-β time of the worst rank) or
        "total" (total volume; km1 refinement with exact gains).
    imbalance : ε of the compute balance constraint (part weight = row nnz,
        at least 1 per row): weight ≤ ⌊(1+ε)·⌈W/k⌉⌋, never worse than the input.
    volume_tolerance : total volume may grow to (1 + tol) × the input's (or
        × ``volume_reference``, rows of H, when given: the partitioner's own
        volume when ``part`` was already changed, e.g. by
        :func:`partplan.partition.hubs.spread_hubs`).
    seed : seeds the order vertices enter the heap (deterministic for a seed).
    time_limit : seconds (None: none); a safety net — passes stop at
        convergence (``min_gain``). When it expires the running pass is
        rolled back to its best prefix. The result then depends on the
        machine and its load; ``work_limit`` does not.
    work_limit : work units (None: none): the summed degrees (nets) of the
        vertices whose moves were evaluated, plus ``ML_WORK_PER_PIN`` × (nnz + n)
        per cluster-move stage; counted, not timed, so a limit stops the
        refinement at the same move on every machine (about 2–6 M units per
        second here). The report's ``work`` is the units spent.
    alpha, beta, f, dtype : α-β model and row size (bytes) for "weighted" and
        the reported time estimate.
    patience : moves without a new best state before a pass ends.
    max_passes : at most this many passes.
    max_targets : target parts evaluated per vertex (its best-connected ones).
    q : exponent of the potential Φ (higher: closer to the plain max).
    mu : weight of Δ(total volume) in the gain, in units of 1/M₀.
    max_moves_per_pass : default n.
    big_degree : vertices with more nets get a new key only at a pass's start and
        at the top of their heap (default 4× the average degree, at least 64).
    sink : also try, per vertex, the cheapest part with room and the part with
        the most room (adjacent or not); not for ``objective="total"``.
    volume_slack : a pass may exceed the total-volume limit by this fraction of
        the input's volume in between (only states within the limit count).
    min_gain : a new pass starts only when the last one lowered the optimized
        value (max cost, or total volume for "total") by more than this fraction.
    multilevel : bottleneck objectives with ``max_passes`` > ``ML_FM_PASSES``:
        ``ML_FM_PASSES`` FM passes, then whole clusters of the partition's own
        coarsening move (:func:`partplan.partition.multilevel.cluster_moves`;
        coordinated moves single-vertex FM cannot find), then FM passes on to
        convergence (``max_passes`` in all). False: FM passes until
        convergence only.
    volume_reference : see ``volume_tolerance``.
    max_cost : ``objective="total"`` only: no move raises a part's
        max(send, recv) (rows of H) above this; None: no cap. With the current
        max(send, recv) it lowers the total volume without raising the
        bottleneck (the default pipeline's volume round). The bottleneck
        objectives never raise their max anyway.
    weights2, cap2 : a second weight per row (int64[n], ≥ 0) and its cap per part, kept in every
        state alongside the balance cap (never relaxed; at least the input's heaviest part). The
        default pipeline passes row nnz and the compute limit on graphs with empty rows, whose
        balance weight (1) and compute (0) differ (:func:`partplan.partition.pipeline.compute_limit`).
    progress : callable(str) or None: a heartbeat line while the compiled
        passes run (the mechanism of :func:`partplan.partition.partition`'s
        backends) and one line per refinement pass (value, moves kept/tried,
        why it ended) as each stage of passes returns.

    Returns
    -------
    (new_part int64[n], report) where report holds ``before``/``after``
    figures (rows of H; equal to :func:`partplan.analyze` of the forward
    pass), ``passes``, ``moves`` (kept), ``moves_tried``, ``seconds``,
    ``converged_s`` (when the last pass ended), ``stopped`` ("converged",
    "time limit", "max passes", "nothing to refine"), ``trace`` (per pass),
    ``balance_limit``, ``balance_cap``, ``volume_limit``, ``multilevel`` (the
    cluster moves' report, None when they did not run).

    Examples
    --------
    >>> import numpy as np
    >>> from partplan import Graph
    >>> g = Graph.from_edges([0, 1, 2, 3, 4], [1, 2, 3, 4, 5], symmetrize=True)
    >>> new, rep = refine(g, np.array([0, 1, 0, 1, 0, 1]), 2, imbalance=0.5, volume_tolerance=0.0)
    >>> rep["after"]["max_send_recv"] <= rep["before"]["max_send_recv"]
    True
    """
    from .heartbeat import _heartbeat

    if time_limit is not None:
        _load_kernels()
    t0 = time.perf_counter()
    check_objective(objective)
    part, k = as_partition(part, graph.n, k)
    imbalance = check_imbalance(imbalance)  # as partition() and the backends: a bad ε is a PartitionError
    volume_tolerance = check_real("volume_tolerance", volume_tolerance)
    volume_slack = check_real("volume_slack", volume_slack)
    if time_limit is not None and not (time_limit >= 0):
        raise OptionError(f"time_limit must be >= 0 seconds (or None), got {time_limit!r}")
    check_width(f)
    seed = rng_seed(seed)
    q, max_targets = check_int("q", q, lo=1, hi=64), check_int("max_targets", max_targets, lo=1, hi=60)
    patience, max_passes = check_int("patience", patience), check_int("max_passes", max_passes)
    max_moves_per_pass = check_int("max_moves_per_pass", max_moves_per_pass, lo=1, none_ok=True)
    big_degree = check_int("big_degree", big_degree, none_ok=True)
    mu, hot = check_real("mu", mu), check_real("hot", hot, hi=1.0)
    overload, min_gain = check_real("overload", overload, hi=1.0), check_real("min_gain", min_gain, hi=1.0)
    alpha, beta = check_real("alpha", alpha), check_real("beta", beta)
    blocked, full_updates, sink = (check_bool("blocked", blocked), check_bool("full_updates", full_updates),
                                   check_bool("sink", sink))
    volume_reference = check_int("volume_reference", volume_reference, none_ok=True)
    multilevel = check_bool("multilevel", multilevel)
    work_limit = check_int("work_limit", work_limit, none_ok=True)
    max_cost = check_real("max_cost", max_cost, none_ok=True)
    if max_cost is not None and objective != "total":
        raise OptionError(f"max_cost applies to objective='total' only, got objective={objective!r}")
    n = graph.n
    rb = f * dtype_bytes(dtype)
    w = graph.balance_weights
    cap, limit = balance_cap(w, part, k, imbalance)
    if (weights2 is None) != (cap2 is None):
        raise OptionError("weights2 and cap2 go together (a second weight per row and its cap per part)")
    if weights2 is not None:
        weights2 = _check_weights(weights2, n)
        cap2 = max(check_int("cap2", cap2), int(np.bincount(part, weights=weights2, minlength=k).max()))
    before = _figures(graph, part, k, w, alpha, beta, rb)
    ref_volume = before["total_volume"] if volume_reference is None else volume_reference
    # (capped: a huge tolerance means no limit, and the kernels count in int64)
    vlimit = int(min(np.floor(ref_volume * (1.0 + volume_tolerance)), VOLUME_LIMIT_MAX))
    out = part.copy()
    trace: list[dict] = []
    passes = kept = tried = 0
    stopped = "converged"
    build_s = 0.0
    work = 0
    ml_report = None
    if k == 1 or n == 0 or max_passes == 0:
        stopped = "nothing to refine"
    elif time_limit is not None and time_limit <= 0:
        stopped = "time limit"
    elif work_limit is not None and work_limit <= 0:
        stopped = "work limit"
    else:
        st = _State(graph, out, k, weights2, cap2)
        build_s = time.perf_counter() - t0
        T, P, V = st.records(out, w)
        C = _fm.CostModel(_fm.OBJ_CODES[objective], float(alpha), float(beta) * rb, int(q), float(mu))
        L = _fm.Limits(cap, cap + int(overload * cap), vlimit, vlimit + int(volume_slack * before["total_volume"]),
                       int(max_targets), -1.0 if max_cost is None else float(max_cost), st.cap2)
        order = np.random.default_rng(seed).permutation(n).astype(np.int64)
        mm = n if max_moves_per_pass is None else max(1, int(max_moves_per_pass))
        avg = graph.nnz / max(n, 1)
        big_deg = int(max(64, 4 * avg)) if big_degree is None else int(big_degree)
        deadline = -1.0 if time_limit is None else t0 + float(time_limit)
        stats = np.zeros(8, dtype=np.int64)
        # multilevel: ML_FM_PASSES FM passes, the cluster moves, then FM on to convergence
        # (within max_passes in all; the coarsening of the cluster stage does not look at the
        # clock, its moves do); else FM to convergence
        use_ml = multilevel and objective != "total" and max_passes > ML_FM_PASSES
        stages = (ML_FM_PASSES, max_passes) if use_ml else (max_passes,)
        code = 0
        for si, npasses in enumerate(stages):
            if si == 1:       # between the two FM stages: whole clusters move (multilevel.py)
                if code in (1, 3) or (deadline >= 0 and time.perf_counter() > deadline):
                    code = code if code in (1, 3) else 1
                    break
                stats[6] += int(ML_WORK_PER_PIN * (graph.nnz + n))
                if work_limit is not None and _fm.work_done(stats) > work_limit:
                    code = 3
                    break
                with _heartbeat(progress, None, label=f"refining {objective} (cluster moves)"):
                    ml_report = cluster_moves(graph, st, out, k, w, cap, vlimit, _fm.OBJ_CODES[objective],
                                              float(alpha), float(beta) * rb, int(q), float(mu), seed=seed,
                                              deadline=deadline)
                if progress is not None:
                    progress(f"refine cluster moves: {ml_report['moves']} of {ml_report['trials']} kept on "
                             f"{len(ml_report['levels'])} levels ({time.perf_counter() - t0:.2f} s)")
                if ml_report["stopped"] == "time limit":
                    code = 1
                    break
                # FM goes on to convergence whether or not a cluster moved (its one pass before
                # could not yet widen to all parts, see _fm)
                npasses = max_passes - passes
            tr = np.zeros((max(1, npasses), 5))
            ts = time.perf_counter() - t0
            O = _fm.PassOptions(int(patience), int(npasses), float(min_gain), mm, deadline, big_deg, bool(blocked),
                                bool(full_updates), float(hot), bool(sink) and objective != "total",
                                -1 if work_limit is None else int(work_limit))
            with _heartbeat(progress, None, label=f"refining {objective} (stage {si + 1})"):
                p_, k_, t_, code = _fm._fm(T, P, V, C, L, O, order, tr, stats)
            passes, kept, tried = passes + p_, kept + k_, tried + t_
            for i in range(min(p_, tr.shape[0])):
                trace.append({"seconds": round(ts + float(tr[i, 0]), 4), "value": float(tr[i, 1]),
                              "kept": int(tr[i, 2]), "tried": int(tr[i, 3]), "pass_end": PASS_END[int(tr[i, 4])],
                              "stage": si + 1})
                if progress is not None:
                    t = trace[-1]
                    progress(f"refine pass {len(trace)}: {objective} {t['value']:.0f}, "
                             f"{t['kept']}/{t['tried']} moves kept, ended by {t['pass_end']} "
                             f"({t['seconds']:.2f} s)")
        stopped = STOPPED[code]
        st.check(out)
        _LAST_STATS[:] = stats.tolist()
        work = int(_fm.work_done(stats))
    after = _figures(graph, out, k, w, alpha, beta, rb)
    seconds = time.perf_counter() - t0
    report = {"objective": objective, "k": k, "before": before, "after": after,
              "multilevel": ml_report,
              "passes": passes, "moves": kept, "moves_tried": tried, "seconds": seconds,
              "converged_s": trace[-1]["seconds"] if trace else 0.0, "build_s": build_s,
              "work": work,
              "stopped": stopped, "trace": trace,
              "balance_limit": limit, "balance_cap": cap, "volume_limit": vlimit,
              "compiled": _fm.HAVE_NUMBA,
              "params": {"imbalance": imbalance, "volume_tolerance": volume_tolerance, "seed": seed,
                         "time_limit": time_limit, "alpha": alpha, "beta": beta, "f": f, "dtype": dtype,
                         "patience": patience, "max_passes": max_passes, "max_targets": max_targets,
                         "q": q, "mu": mu, "min_gain": min_gain, "work_limit": work_limit, "max_cost": max_cost}}
    return out, report


CAP2_NONE = 2 ** 62        # the second weight's cap when there is none


def _check_weights(weights, n: int) -> np.ndarray:
    """``weights`` as int64[n], each ≥ 0, or one OptionError."""
    w = np.asarray(weights)
    if w.shape != (n,) or not np.issubdtype(w.dtype, np.integer) or (w.size and w.min() < 0):
        raise OptionError(f"weights2 must be {n} non-negative integers (one per row), got shape {w.shape}, "
                          f"dtype {w.dtype}")
    return w.astype(np.int64, copy=False)


class _State:
    """Arrays of the refinement state (see :mod:`._fm`); :meth:`records` groups
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
        _fm.build_slots(self.tptr, self.tidx, part, self.pins(), self.vol)
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

    def pins(self) -> _fm.PinSlots:
        """The pin counts as a :class:`._fm.PinSlots` record (the same arrays)."""
        return _fm.PinSlots(self.soff, self.lam, self.dense, self.spart, self.scnt)

    def records(self, part: np.ndarray, w: np.ndarray) -> tuple:
        """(:class:`._fm.Topology`, :class:`._fm.PinSlots`, :class:`._fm.VolumeState`)
        of the kernels: the same arrays, with ``part`` (int64[n], the partition
        the state was built from, updated in place by the kernels) and ``w``
        (int64[n] balance weight per vertex)."""
        return (_fm.Topology(self.vptr, self.vidx, self.tptr, self.tidx, w, w if self.w2 is None else self.w2),
                self.pins(),
                _fm.VolumeState(part, self.load, self.vol, self.send, self.recv, self.smsg, self.rmsg, self.tot,
                                self.load2))

    def check(self, part: np.ndarray):
        """The incremental state must equal a recount (cheap, O(nnz))."""
        vol, _ = volume_matrix(self.vptr, self.vidx, part, self.vol.shape[0])
        if not np.array_equal(vol, self.vol):
            raise RuntimeError("internal error: incremental volume matrix differs from a recount")


def _figures(graph: Graph, part: np.ndarray, k: int, w: np.ndarray, alpha: float, beta: float,
             rb: int) -> dict:
    """The reported figures, recomputed from scratch (as :func:`partplan.analyze`)."""
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
