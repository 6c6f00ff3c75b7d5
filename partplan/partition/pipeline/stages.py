"""The stages of ``partition()``: model → engine → post-passes → measure.

Each stage takes the checked :class:`~partplan.partition.request.Request`
and the :class:`Work` so far, and adds to it: the model object, the part
vector, the post-passes' reports, the owners, the timings (seconds per phase)
and the parameters a saved partition records. Nothing here validates user
input — :func:`partplan.partition.request.resolve` has done that before the
first stage runs.

The volume matrix of a partition (rows of H sent from part q to part r,
:func:`partplan.metrics.volume1d.volume_matrix`) is computed once per part
vector by :meth:`Work.volume` and handed on: the final 1D stats
(:func:`partplan.analyze` ``volume=``) and the 1.5D layout stats
(:func:`partplan.analyze_15d` ``volume=``) take it instead of counting again.
The post-passes in :mod:`.fast`, :mod:`.hubs`, :mod:`.refine`,
:mod:`.pipeline` and :mod:`.ownership` still count their own (their modules'
internal state).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ...graph import Graph
from ...metrics import analyze, volume1d
from ...metrics.cost import dtype_bytes
from ...models import column_net, joint_net, stochastic_hypergraph
from ..engines import run_backend
from ..context import HubsContext, PipelineContext, RefineContext, build
from ..objectives import AUTO_PRESET
from ..request import Request

# decoupled ownership: the LP (PuLP + CBC) reaches the bound within seconds up to
# this many row blocks (docs/design/refinement.md); above it the greedy pass is used
LP_OWNERSHIP_MAX_BLOCKS = 64
# the refinement's default budget after an explicit engine (--preset quality, --model hypergraph ...):
# counted work (refine's ``work_limit``: the nets of the vertices whose moves were evaluated), not
# seconds, so the result is the same on every machine and under any load. EXPLICIT_REFINE_WORK units
# per pin of A + I, at least EXPLICIT_REFINE_WORK_MIN, at most the default pipeline's REFINE_WORK_MAX.
# Before, the budget was the partitioning time (at least 2 s); on the TUNE graphs with Mt-KaHyPar
# the refinement converged within 1.4-39 units per pin (rmat14, k = 64), so 64 keeps those results
# and bounds large graphs the same way on every machine (docs/design/refinement.md, "Budget").
EXPLICIT_REFINE_WORK = 64
EXPLICIT_REFINE_WORK_MIN = 8_000_000


@dataclass
class Work:
    """What the stages have made so far (see the module doc)."""

    model_obj: object = None
    part: np.ndarray | None = None
    backend: str = ""
    owner: np.ndarray | None = None
    params: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    volume_reference: int | None = None
    _vol: tuple | None = None   # (part it was computed for, the matrix)

    def volume(self, graph: Graph, k: int) -> np.ndarray:
        """int64[k, k]: the volume matrix of the current ``part`` (counted once per part vector)."""
        if self._vol is None or self._vol[0] is not self.part:
            self._vol = (self.part, volume1d.volume_matrix(graph.indptr, graph.indices, self.part, k)[0])
        return self._vol[1]


def _engine_params(req: Request) -> dict:
    """The engine's options as the backends take them (``metric`` is their ``objective``)."""
    return {("objective" if key == "metric" else key): v for key, v in req.engine_opts.items()}


def start(req: Request) -> Work:
    """The parameters every partition records."""
    opts = _engine_params(req) if req.engine != "auto" else {}
    if req.engine == "auto" and "threads" in req.engine_opts:
        opts["threads"] = req.engine_opts["threads"]
    params = {"imbalance": float(req.imbalance), "seed": int(req.seed), "ranks": req.k, "f": req.f,
              "dtype": req.dtype, **{key: v for key, v in opts.items() if key != "ini"}}
    if "ini" in opts:
        params["ini"] = str(opts["ini"])
    return Work(params=params, backend=req.backend)


def build_model(graph: Graph, req: Request, w: Work) -> Work:
    """Stage 1: the model object (the graph, a column-net / joint hypergraph, a stochastic one)."""
    t0 = time.perf_counter()
    w.model_obj, info = graph, w.info
    if req.model == "graph":
        info["model_size"] = {"n": graph.n, "nnz": graph.nnz}
    elif req.model == "hypergraph":
        nets = req.groups["hypergraph"].get("nets", "auto")
        use_joint = nets == "joint" or (nets == "auto" and not graph.is_symmetric())
        w.params["nets"] = "joint" if use_joint else "forward"
        req.say(f"building {'joint' if use_joint else 'column-net'} hypergraph")
        w.model_obj = joint_net(graph) if use_joint else column_net(graph)
    elif req.model == "stochastic":
        stoch = req.groups["stochastic"]
        req.say("sampling mini-batches for the stochastic hypergraph")
        sm = stochastic_hypergraph(graph, req.b, stoch.get("sampler"), seed=req.seed, progress=req.progress,
                                   **{key: v for key, v in stoch.items() if key != "sampler"})
        w.model_obj, info["stochastic"] = sm.hypergraph, sm.to_dict()
        w.params.update({key: (v if key != "sampler" else sm.sampler) for key, v in stoch.items()})
        w.params.setdefault("sampler", sm.sampler)
    if req.model in ("hypergraph", "stochastic"):
        m = w.model_obj
        info["model_size"] = {"n": m.n, "nets": m.m, "pins": m.num_pins}
    w.timings["model_s"] = time.perf_counter() - t0
    return w


def run_engine(graph: Graph, req: Request, w: Work, heartbeat=None, run=run_backend) -> Work:
    """Stage 2: the engine's partition into ``req.b`` row blocks (the default pipeline: its starts,
    V-cycles and refinement). ``heartbeat(progress, backend)``: a context manager around the
    engine call (heartbeat._heartbeat: "N s elapsed" lines); None: none. ``run``: the backend runner
    (:func:`~partplan.partition.engines.run_backend`)."""
    from contextlib import nullcontext

    if req.engine == "auto" and req.b > 1:
        return _run_auto(graph, req, w)
    t0 = time.perf_counter()
    if req.b == 1:  # one row block: nothing to partition (no engine call)
        w.part, binfo = np.zeros(graph.n, dtype=np.int64), {"note": "one row block: no partitioner call"}
    else:
        req.say(f"partitioning with {req.backend} into {req.b} parts")
        with (heartbeat or (lambda *a: nullcontext()))(req.progress, req.backend):
            w.part, binfo = run(req.backend, w.model_obj, req.b, imbalance=req.imbalance, seed=req.seed,
                                        graph=graph, **_engine_params(req))
    w.timings["partition_s"] = time.perf_counter() - t0
    w.info["backend"] = binfo
    return w


def _run_auto(graph: Graph, req: Request, w: Work) -> Work:
    from .auto import auto_partition

    opts = req.engine_opts
    req.say(f"default pipeline into {req.b} parts")  # auto_partition names the starts it runs (by size)
    ctx = build(PipelineContext, {**opts, "imbalance": req.imbalance, "seed": req.seed})  # resolve checked them
    w.part, rep = auto_partition(graph, req.b, context=ctx, progress=req.progress)
    w.timings["partition_s"] = rep["start_s"]
    w.timings["refine_s"] = rep["seconds"] - rep["start_s"]
    w.backend = rep["chosen"]
    w.info["refine"] = rep.pop("refine")
    w.info["auto"] = rep
    w.params.update({"preset": AUTO_PRESET,
                     **{key: v for key, v in opts.items() if key not in ("starts", "threads")}})
    w.params["starts"] = [r["engine"] for r in rep["starts"]]  # the ones run (by size, unless given)
    return w


def post_passes(graph: Graph, req: Request, w: Work) -> Work:
    """Stage 3: the balance repair before partplan's own passes, the fast preset's km1 V-cycle, hubs
    apart, bottleneck refinement, decoupled owners."""
    if req.b > 1 and (req.engine == "fast" or (req.bottleneck and req.engine != "auto")):
        _repair_balance(graph, req, w)
    if req.engine == "fast" and req.b > 1:
        _vcycle(graph, req, w)
        # its V-cycle balances row nnz with at least 1 per row: the compute limit before the
        # refinement, which keeps it (a repair after it moves rows past the refinement's volume
        # limit and raises its objective: polblogs k = 8 max-recv, total volume 3,255 -> 3,284)
        from .auto import end_compute_repair
        w.part, info = end_compute_repair(graph, w.part, req.b, req.imbalance, req.progress)
        if info is not None:
            w.info["compute_repair"] = info
    if req.bottleneck and req.backend == "mtkahypar" and req.model == "hypergraph":
        _hubs(graph, req, w)
    if req.bottleneck and req.engine == "auto" and req.objective != "max-both":
        # the pipeline refined max(send, recv); its report stays with the pipeline's
        w.info["auto"]["refine"] = w.info.pop("refine", None)
        _refine(graph, req, w, after_pipeline=True)
    elif req.bottleneck and req.engine != "auto":
        _refine(graph, req, w)
    if req.ownership == "decoupled":
        _ownership(graph, req, w)
    return w


def _repair_balance(graph: Graph, req: Request, w: Work) -> None:
    """Rows out of the parts above the ε-limit (:func:`~partplan.partition.refinement.rebalance.rebalance`)
    before partplan's own passes, which keep the heaviest part's weight but never lower it. An
    engine's balance is its own: METIS k-way can leave a part far above ε on small or star-like
    graphs, and the hypergraph model of a directed graph balances row + column nonzeros (the joint
    nets' vertex weights), not the row nonzeros ε bounds. Kept when less overloaded."""
    from .auto import overload, repair_overload

    before = overload(graph, w.part, req.b, req.imbalance)
    if before == 0:
        return
    fixed, w.info["rebalance"] = repair_overload(graph, w.part, req.b, req.imbalance, before)
    if fixed is not None:
        w.part, after = fixed, w.info["rebalance"]["overload_after"]
        moved = w.info["rebalance"]["moved"]
        req.say(f"the {req.backend} partition was above the balance limit by {before}; {moved} rows moved, now "
                f"{'within it' if after == 0 else f'above it by {after}'}")


def _vcycle(graph: Graph, req: Request, w: Work) -> None:
    """km1 (volume) V-cycle refinement of METIS's partition, exact gains (refinement/vcycle.py)."""
    from ..refinement.vcycle import vcycle_refine

    t0 = time.perf_counter()
    w.part, w.info["volume_refine"] = vcycle_refine(graph, w.part, req.b, imbalance=req.imbalance, seed=req.seed)
    w.timings["volume_refine_s"] = time.perf_counter() - t0
    w.params["preset"] = "fast"


def _hubs(graph: Graph, req: Request, w: Work) -> None:
    """Hubs apart (Mt-KaHyPar fixed vertices, hubs.py) before the refinement."""
    from ..refinement.hubs import spread_hubs

    ro = build(RefineContext, req.groups["refine"])      # the refinement's tolerance and α-β model
    factor = build(HubsContext, {k: v for k, v in req.groups["hubs"].items() if v is not None}).hub_factor
    if factor > 0:
        t0 = time.perf_counter()
        new, w.info["hubs"] = spread_hubs(
            graph, w.model_obj, w.part, req.b, imbalance=req.imbalance, seed=req.seed, factor=factor,
            volume_tolerance=ro.volume_tolerance, preset=req.engine_opts.get("preset", "DEFAULT"),
            threads=req.engine_opts.get("threads"), objective=req.objective, alpha=ro.alpha, beta=ro.beta,
            row_bytes=req.f * dtype_bytes(req.dtype))
        w.timings["hubs_s"] = time.perf_counter() - t0
        if w.info["hubs"]["kept"]:
            req.say(f"spread {w.info['hubs']['hubs']} hubs over distinct parts")
            w.volume_reference, w.part = w.info["hubs"]["before"]["total_volume"], new
    w.params["hub_factor"] = factor


def _refine(graph: Graph, req: Request, w: Work, *, after_pipeline: bool = False) -> None:
    """Bottleneck refinement (refinement/refine.py); its default budget is counted work (EXPLICIT_REFINE_WORK
    units per pin), a caller's ``time_limit`` (seconds) replaces it. ``after_pipeline``: the
    refinement for a one-sided or weighted objective after the default pipeline, which spent part
    of that time limit already (this gets what is left) and whose own refinement time stays
    ``refine_s`` (this one's: ``objective_refine_s``)."""
    from ...errors import BackendUnavailableError
    try:
        from ..refinement import refine as refine_mod
    except ImportError as exc:
        raise BackendUnavailableError("bottleneck refinement (partplan.partition.refinement.refine) is not "
                                      "available in this install") from exc
    ro = dict(req.groups["refine"])
    if after_pipeline and ro.get("time_limit") is not None:
        ro["time_limit"] = max(0.0, float(ro["time_limit"]) - w.timings.get("refine_s", 0.0))
    if ro.get("time_limit") is None:
        ro["work_limit"] = explicit_work_limit(graph)
        req.say(f"refining for {req.objective} (work limit {ro['work_limit']:,} units)")
    else:
        req.say(f"refining for {req.objective} (time limit {ro['time_limit']:.1f} s)")
    ctx = build(RefineContext, {**ro, "objective": req.objective, "imbalance": req.imbalance, "seed": req.seed,
                                "f": req.f, "dtype": req.dtype, "volume_reference": w.volume_reference})
    from .auto import compute_limit     # graphs with empty rows: the compute limit too, never worse than the start's
    keep = compute_limit(graph, w.part, req.b, req.imbalance)
    t0 = time.perf_counter()
    w.part, w.info["refine"] = refine_mod.refine(graph, w.part, req.b, context=ctx, progress=req.progress, **keep)
    w.timings["objective_refine_s" if after_pipeline else "refine_s"] = time.perf_counter() - t0
    w.params.update(ro)


def explicit_work_limit(graph: Graph) -> int:
    """The refinement's default work limit after an explicit engine (units: nets evaluated)."""
    from .auto import REFINE_WORK_MAX, work_units

    return work_units(graph, EXPLICIT_REFINE_WORK, EXPLICIT_REFINE_WORK_MIN, REFINE_WORK_MAX)


def _ownership(graph: Graph, req: Request, w: Work) -> None:
    """Decoupled owners of H's rows (refinement/ownership.py); the LP up to LP_OWNERSHIP_MAX_BLOCKS row blocks."""
    from ...errors import BackendUnavailableError
    try:
        from ..refinement import ownership as own_mod
    except ImportError as exc:
        raise BackendUnavailableError("decoupled ownership (partplan.partition.refinement.ownership) is not "
                                      "available in this install") from exc
    method = req.groups["ownership"].get("ownership_method")
    if method is None:  # the LP reaches the average-load bound; greedy stalls above it
        method = "lp" if req.b <= LP_OWNERSHIP_MAX_BLOCKS else "greedy"
    req.say(f"assigning owners ({own_mod.__name__.rsplit('.', 1)[-1]}, {method})")
    t0 = time.perf_counter()
    own_obj = "max-send" if req.objective in ("total", "max-send") else "max-both"
    w.owner = np.asarray(own_mod.assign_owners(graph, w.part, req.b, method=method, objective=own_obj),
                         dtype=np.int64)
    w.timings["ownership_s"] = time.perf_counter() - t0
    w.params["ownership_method"] = method


def measure(graph: Graph, req: Request, w: Work) -> tuple:
    """Stage 4: exact stats (1D; owners' exchange; the layout's per-rank figures), from the
    volume matrix counted once. Returns (stats, layout_stats), both None without ``stats``."""
    if not req.want_stats:
        return None, None
    t0 = time.perf_counter()
    vol = w.volume(graph, req.b)
    # the caller's α-β model (objective "weighted": what the partition minimized) for the time estimates
    cost = {name: v for name in ("alpha", "beta") if (v := req.groups["refine"].get(name)) is not None}
    stats = analyze(graph, w.part, req.b, f=req.f, dtype=req.dtype, volume=vol,
                    name=f"{graph.name} {req.model}/{w.backend}", **cost)
    if w.owner is not None:  # the exchange actually planned: H[j] sent by owner[j] (forward pass)
        from ..refinement.ownership import owner_stats

        w.info["conformal_stats"] = stats.summary()
        stats = owner_stats(graph, w.part, w.owner, req.b, f=req.f, dtype=req.dtype,
                            backward=not graph.is_symmetric(), **cost)  # the plan's backward pass (conformal)
    lstats = None
    if req.lay.layout_stats:  # a bottleneck layout's figures are the row blocks' 1D volume, laid out
        extra = {"volume": vol} if req.lay.bottleneck else {}
        lstats = req.lay.volumes(graph, w.part, f=req.f, dtype=req.dtype, **extra, **cost)
    w.timings["stats_s"] = time.perf_counter() - t0
    return stats, lstats
