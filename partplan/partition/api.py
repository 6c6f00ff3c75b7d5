"""The planner's front door: :func:`partition` and the :class:`Partition` result.

``partition(graph, k, model=..., backend=..., objective=..., layout=...)``
builds a model (:mod:`partplan.models`), runs a real partitioner behind
:func:`partplan.partition.backends.run_backend`, optionally refines the
bottleneck (:mod:`partplan.partition.refine`) or picks decoupled owners
(:mod:`partplan.partition.ownership`), and measures the result exactly with
:func:`partplan.analyze` (plus :func:`partplan.analyze_15d` /
:func:`partplan.analyze_2d` for those layouts).

``k`` is the number of **ranks** (processes). For ``layout="1.5d:c"`` the
rows are partitioned into ``k / c`` row blocks, each replicated on c ranks;
for ``"2d:RxC"`` into ``k = R·C`` parts laid over the grid (rank = row·C +
col). :attr:`Partition.k` is the number of ranks too (as in plans); the row
blocks are :attr:`Partition.row_blocks`.

Models × backends:

============  ==========================================================
model         backends
============  ==========================================================
graph         metis (default), mtkahypar (graph mode, edge cut)
hypergraph    mtkahypar (default), kahypar (subprocess)
stochastic    mtkahypar (default), kahypar
baseline      random (default), block, striped, degree-rr
============  ==========================================================

A baseline backend name always means the baseline model. For a directed
graph (A ≠ Aᵀ) the hypergraph model defaults to the joint forward+backward
nets (``nets="auto"``), so the optimized km1 is forward + backward volume.

Example
-------
>>> from partplan import Graph
>>> g = Graph.from_edges([0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0], symmetrize=True)
>>> p = partition(g, 2, model="baseline", backend="block")
>>> p.part.tolist(), p.stats.total_volume
([0, 0, 0, 1, 1, 1], 4)
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import BackendUnavailableError, OptionError, PartitionError
from .options import check_imbalance, check_real, check_seed
from ..graph import Graph
from ..metrics import CommStats, LayoutStats, analyze
from ..metrics.cost import DEFAULT_ALPHA_S, DEFAULT_BETA_S_PER_BYTE, check_width, dtype_bytes
from ..layouts import Layout, parse_layout, spec_from_params
from ..models import column_net, joint_net, stochastic_hypergraph
from .backends import backend_names, default_backend, run_backend
from .objectives import AUTO_PRESET, FAST_PRESET, OBJECTIVES, check_objective, check_planner_preset
from .pipeline import DEFAULT_STARTS
from .._atomic import atomic_path

MODELS = ("graph", "hypergraph", "stochastic", "baseline")
# default objective per model: the hypergraph model refines the bottleneck (max(send, recv)) since
# Mt-KaHyPar + refinement measured 1.15x plain Mt-KaHyPar's time (docs/refinement.md, "Defaults")
DEFAULT_OBJECTIVE = {"hypergraph": "max-both"}
OWNERSHIP = ("conformal", "decoupled")
# derived from the backend registry (partplan.partition.backends.REGISTRY), the one list of engines
DEFAULT_BACKEND = {m: default_backend(m) for m in MODELS}
MODEL_BACKENDS = {m: backend_names(m) for m in MODELS}
SCHEMA = "partplan.partition/2"  # /1 stored k = row blocks; /2 stores k = ranks


@dataclass
class Partition:
    """A row partition and how it was made (see the module doc)."""

    part: np.ndarray          # int64[n]: row block of each vertex
    k: int                    # number of ranks (processes)
    layout: str               # layout spec: "1d" | "1.5d:c" | "2d:RxC" (partplan.layouts)
    layout_params: dict       # {} | {"c": c} | {"R": R, "C": C}
    model: str                # "graph" | "hypergraph" | "stochastic" | "baseline"
    backend: str              # "metis" | "mtkahypar" | "kahypar" | "random" | "block" | "striped" | "degree-rr"
    objective: str            # "total" | "max-send" | "max-recv" | "max-both" | "weighted"
    params: dict              # imbalance, seed, preset, threads, ... (JSON-able)
    timings: dict             # seconds per phase (JSON-able)
    stats: CommStats | None   # 1D stats of `part` (decoupled ownership: H[j] sent by owner[j], forward pass)
    owner: np.ndarray | None  # decoupled ownership: int64[n] part holding row j of H; None = conformal
    graph_fingerprint: str
    layout_stats: LayoutStats | None = None   # 1.5D / 2D per-rank figures (None for 1D)
    info: dict = field(default_factory=dict)  # engine-reported objective, model sizes, refine report

    @property
    def n(self) -> int:
        return int(self.part.size)

    @property
    def ranks(self) -> int:
        """Processes (= k)."""
        return self.k

    @property
    def layout_obj(self) -> Layout:
        """The :class:`partplan.layouts.Layout` of this partition."""
        return parse_layout(self.layout, self.k)

    @property
    def row_blocks(self) -> int:
        """Parts of ``part``: k (1D, 2D) or k / c (1.5D)."""
        return self.layout_obj.row_blocks

    @property
    def ownership(self) -> str:
        return "conformal" if self.owner is None else "decoupled"

    def to_dict(self, arrays: bool = False) -> dict:
        """JSON-able description; with ``arrays`` also ``part`` (and ``owner``)."""
        d = {"schema": SCHEMA, "n": self.n, "k": self.k, "ranks": self.ranks, "row_blocks": self.row_blocks,
             "layout": self.layout,
             "layout_params": dict(self.layout_params), "model": self.model, "backend": self.backend,
             "objective": self.objective, "ownership": self.ownership, "params": _jsonable(self.params),
             "timings": _jsonable(self.timings), "graph_fingerprint": self.graph_fingerprint,
             "info": _jsonable(self.info),
             "stats": None if self.stats is None else self.stats.to_dict(arrays=False),
             "layout_stats": None if self.layout_stats is None else self.layout_stats.summary()}
        if arrays:
            d["part"] = self.part.tolist()
            d["owner"] = None if self.owner is None else self.owner.tolist()
        return d

    def save(self, path: str | os.PathLike) -> Path:
        return save_partition(self, path)

    def __repr__(self) -> str:
        vol = "" if self.stats is None else f", total_volume={self.stats.total_volume}"
        return (f"Partition(n={self.n}, k={self.k}, layout={self.layout!r}, model={self.model!r}, "
                f"backend={self.backend!r}, objective={self.objective!r}{vol})")


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    return str(x)


def _choose(value: str, allowed, what: str) -> str:
    if value not in allowed:
        raise BackendUnavailableError(f"unknown {what} {value!r}; choose one of {', '.join(allowed)}")
    return value


# decoupled ownership: the LP (PuLP + CBC) reaches the bound within seconds up to
# this many row blocks (docs/refinement.md); above it the greedy pass is used
LP_OWNERSHIP_MAX_BLOCKS = 64
# refinement's default time limit is the partitioning time, but at least this (s)
REFINE_MIN_SECONDS = 2.0


# heartbeat while a backend runs (seconds): first message, then every HEARTBEAT_EVERY_S
HEARTBEAT_FIRST_S = 2.0
HEARTBEAT_EVERY_S = 5.0


class _heartbeat:
    """Context manager: while the body runs, a daemon thread calls
    ``progress("partitioning with <backend>: N s elapsed")`` after
    HEARTBEAT_FIRST_S, then every HEARTBEAT_EVERY_S; no thread when ``progress``
    is None. The thread is stopped and joined on exit, error or not."""

    def __init__(self, progress, backend, label: str | None = None):
        self.progress, self.backend, self.thread = progress, backend, None
        self.label = f"partitioning with {backend}" if label is None else label

    def __enter__(self):
        if self.progress is None:
            return self
        import threading
        self.stop = threading.Event()
        t0 = time.perf_counter()

        def beat():
            wait = HEARTBEAT_FIRST_S
            while not self.stop.wait(wait):
                try:
                    self.progress(f"{self.label}: {time.perf_counter() - t0:.0f} s elapsed")
                except Exception:  # a broken progress callback must not kill the partition
                    return
                wait = HEARTBEAT_EVERY_S

        self.thread = threading.Thread(target=beat, name="partplan-heartbeat", daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.thread is not None:
            self.stop.set()
            self.thread.join()
        return False


AUTO_KEYS = ("starts", "vcycle", "refine", "refine_factor", "refine_min_s")


def _auto_layout(layout, k) -> bool:
    """The default pipeline refines the 1D volume of the row blocks: layouts where that counts."""
    try:
        lay = parse_layout(layout, k)
    except PartitionError:
        return False  # the caller's own check reports the bad layout
    return bool(lay.bottleneck and not lay.routes)


def partition(graph: Graph, k: int, *, model: str | None = None, backend: str | None = None,
              objective: str | None = None, layout: str = "1d", imbalance: float = 0.03, seed: int = 0,
              ownership: str = "conformal", **backend_options) -> Partition:
    """Partition ``graph`` for ``k`` ranks (see the module doc).

    Parameters
    ----------
    model : "graph" | "hypergraph" (default) | "stochastic" | "baseline".
    backend : engine; default per model (metis / mtkahypar / mtkahypar / random).
    objective : "total" (the partitioner's volume objective alone), or
        "max-send" | "max-recv" | "max-both" | "weighted" (bottleneck
        refinement by :func:`partplan.partition.refine.refine` afterwards).
        Default (None): "max-both" for the hypergraph model with a 1D or 1.5D
        layout (:data:`DEFAULT_OBJECTIVE`), else "total".
    layout : "1d", "1.5d:c", "2d:RxC", "2d" or a Layout (see :func:`partplan.layouts.parse_layout`).
    imbalance : ε, compute balance: part weight ≤ (1+ε)·⌈W/k⌉ (weights = row nnz).
    seed : random seed (DEFAULT Mt-KaHyPar is still not bit-reproducible).
    ownership : "conformal" (row j of H lives with row j of A) or "decoupled"
        (owners chosen by :func:`partplan.partition.ownership.assign_owners`;
        total volume unchanged, bottleneck lowered; 1D only).

    backend_options (all optional):
        preset, threads, handoff ("arrays" | "file"), metric ("km1" | "cut" |
        "soed": the engine's objective) — mtkahypar; ini, quality, timeout —
        kahypar; recursive — metis; nets ("auto" | "forward" | "joint") —
        hypergraph model; sampler, theta, delta, min_batches, max_batches —
        stochastic model; volume_tolerance, time_limit (default: the partitioning
        time, at least REFINE_MIN_SECONDS), alpha, beta —
        refinement; ownership_method ("greedy" | "lp"; default "lp" (PuLP + CBC)
        up to LP_OWNERSHIP_MAX_BLOCKS row blocks, else "greedy"); f, dtype — bytes in
        the stats; stats (bool, default True); progress (callable(str)).
    """
    opts = dict(backend_options)
    progress: Callable[[str], None] | None = opts.pop("progress", None)
    want_stats = bool(opts.pop("stats", True))
    f = check_width(opts.pop("f", 128))
    dtype = str(opts.pop("dtype", "float32"))
    dtype_bytes(dtype)  # an unknown dtype is an error now, not after partitioning
    nets = opts.pop("nets", "auto")
    stoch_keys = ("sampler", "theta", "delta", "min_batches", "max_batches")
    stoch = {key: opts.pop(key) for key in stoch_keys if key in opts}
    refine_keys = ("volume_tolerance", "time_limit", "alpha", "beta")
    refine_opts = {key: opts.pop(key) for key in refine_keys if key in opts}
    own_method = opts.pop("ownership_method", None)
    hub_factor = opts.pop("hub_factor", None)
    if "metric" in opts:
        opts["objective"] = opts.pop("metric")
    auto_opts = {key: opts.pop(key) for key in AUTO_KEYS if key in opts}
    # preset "fast": METIS + km1 refinement with exact hypergraph gains (docs/refinement.md);
    # for backend kaminpar the preset names KaMinPar's context
    if "preset" in opts:
        opts["preset"] = check_planner_preset(opts["preset"], backend=backend)
    # no model, backend or preset: the measured default pipeline (pipeline.py, docs/planner.md)
    auto = opts.get("preset") == AUTO_PRESET or (
        model is None and backend is None and "preset" not in opts and hub_factor is None and nets == "auto"
        and not stoch and objective in (None, "max-both") and own_method is None
        and _auto_layout(layout, k))
    if auto:
        opts.pop("preset", None)
        if model not in (None, "graph") or backend is not None or objective not in (None, "max-both"):
            raise BackendUnavailableError("preset 'auto' chooses its own engines (METIS / KaMinPar starts, "
                                          "max-both refinement); drop model, backend and objective")
        model, backend, objective = "graph", "metis", "max-both"
    elif auto_opts:
        raise BackendUnavailableError(f"option(s) {', '.join(auto_opts)} apply to the default pipeline "
                                      f"(preset 'auto') only")
    fast = opts.get("preset") == FAST_PRESET and backend != "kaminpar"
    if fast:
        opts.pop("preset")
        if model not in (None, "graph"):
            raise BackendUnavailableError(f"preset 'fast' partitions the graph model with METIS; it does not "
                                          f"apply to model={model!r}")
        model, backend = "graph", _choose(backend or "metis", ("metis",), "backend (preset 'fast' runs METIS)")
    model = "hypergraph" if model is None else model

    if not isinstance(graph, Graph):
        raise PartitionError(f"partition() needs a partplan Graph, got {type(graph).__name__}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise PartitionError(f"k must be an integer number of ranks, got {k!r}")
    k = int(k)
    if k < 1:
        raise PartitionError(f"k must be >= 1, got {k}")
    if backend is not None:
        _choose(backend, backend_names(), "backend")
        if backend in backend_names("baseline"):
            model = "baseline"
    _choose(model, MODELS, "model")
    if objective is None:
        objective = DEFAULT_OBJECTIVE.get(model, "total")
        lay_obj = parse_layout(layout, k)
        if not lay_obj.bottleneck or lay_obj.routes:  # refinement counts the 1D volume of the row blocks
            objective = "total"
    check_objective(objective)
    _choose(ownership, OWNERSHIP, "ownership")
    _choose(nets, ("auto", "forward", "joint"), "nets option")
    backend = backend or default_backend(model)
    if backend not in backend_names(model):
        raise BackendUnavailableError(f"backend {backend!r} does not partition the {model} model; "
                                      f"use one of {', '.join(backend_names(model))}")
    if nets != "auto" and model != "hypergraph":
        raise BackendUnavailableError(f"nets={nets!r} applies to model='hypergraph' only")
    if stoch and model != "stochastic":
        raise BackendUnavailableError(f"option(s) {', '.join(stoch)} apply to model='stochastic' only")
    if refine_opts and objective == "total":
        raise BackendUnavailableError(f"option(s) {', '.join(refine_opts)} apply to bottleneck objectives only")
    v = refine_opts.get("time_limit")
    if v is not None and not (isinstance(v, (int, float)) and v >= 0):
        raise OptionError(f"time_limit must be a number >= 0, got {v!r}")
    for key in ("volume_tolerance", "alpha", "beta"):
        if key in refine_opts:
            refine_opts[key] = check_real(key, refine_opts[key])
    if hub_factor is not None:
        hub_factor = check_real("hub_factor", hub_factor)
        if hub_factor > 0 and objective == "total":
            raise BackendUnavailableError("option hub_factor applies to bottleneck objectives only")
        if hub_factor > 0 and (backend != "mtkahypar" or model != "hypergraph"):
            raise BackendUnavailableError("option hub_factor needs backend mtkahypar on the hypergraph model "
                                          "(Mt-KaHyPar's fixed vertices)")
    if stoch:  # sampler spec, θ and δ: checked before any sampling
        from ..models.stochastic import hoeffding_nets, make_sampler
        make_sampler(stoch.get("sampler"))
        hoeffding_nets(2, stoch.get("theta", 0.1), stoch.get("delta", 0.05))
    lay_obj = parse_layout(layout, k)
    lparams = lay_obj.params
    b = lay_obj.row_blocks
    if b > graph.n:
        raise PartitionError(f"k={b} row blocks exceed n={graph.n} vertices")
    imbalance, seed = check_imbalance(imbalance), check_seed(seed)
    if objective != "total" and not lay_obj.bottleneck:
        raise BackendUnavailableError(f"bottleneck refinement counts 1D volume; layout {lay_obj.spec} cannot use "
                                      f"it (use layout 1d or 1.5d)")
    if ownership == "decoupled" and not lay_obj.supports_owner:
        raise BackendUnavailableError(f"decoupled ownership is implemented for the 1D layout only, not {lay_obj.spec}")

    say = progress or (lambda msg: None)
    timings: dict = {}
    info: dict = {}
    params = {"imbalance": float(imbalance), "seed": int(seed), "ranks": k, "f": f, "dtype": dtype,
              **{key: v for key, v in opts.items() if key != "ini"}}
    if "ini" in opts:
        params["ini"] = str(opts["ini"])

    # ---- model
    t0 = time.perf_counter()
    if model == "graph":
        model_obj = graph
        info["model_size"] = {"n": graph.n, "nnz": graph.nnz}
    elif model == "hypergraph":
        use_joint = nets == "joint" or (nets == "auto" and not graph.is_symmetric())
        params["nets"] = "joint" if use_joint else "forward"
        say(f"building {'joint' if use_joint else 'column-net'} hypergraph")
        model_obj = joint_net(graph) if use_joint else column_net(graph)
        info["model_size"] = {"n": model_obj.n, "nets": model_obj.m, "pins": model_obj.num_pins}
    elif model == "stochastic":
        say("sampling mini-batches for the stochastic hypergraph")
        sm = stochastic_hypergraph(graph, b, stoch.get("sampler"), seed=seed, progress=progress,
                                   **{key: v for key, v in stoch.items() if key != "sampler"})
        model_obj = sm.hypergraph
        info["stochastic"] = sm.to_dict()
        params.update({key: (v if key != "sampler" else sm.sampler) for key, v in stoch.items()})
        params.setdefault("sampler", sm.sampler)
        info["model_size"] = {"n": model_obj.n, "nets": model_obj.m, "pins": model_obj.num_pins}
    else:
        model_obj = graph
    timings["model_s"] = time.perf_counter() - t0

    # ---- partitioner
    t0 = time.perf_counter()
    if auto and b > 1:
        from .pipeline import auto_partition

        extra = set(opts) - {"threads"}
        if extra:  # never ignored silently
            raise BackendUnavailableError(f"the default pipeline does not take option(s) {', '.join(sorted(extra))}")

        say(f"default pipeline: starts {', '.join(auto_opts.get('starts', DEFAULT_STARTS))} into {b} parts")
        part, rep = auto_partition(graph, b, imbalance=imbalance, seed=seed, progress=progress,
                                   threads=opts.get("threads", 1), **auto_opts, **refine_opts)
        timings["partition_s"] = rep["start_s"]
        timings["refine_s"] = rep["seconds"] - rep["start_s"]
        backend = rep["chosen"]
        info["refine"] = rep.pop("refine")
        info["auto"] = rep
        params.update({"preset": AUTO_PRESET, **{key: v for key, v in auto_opts.items() if key != "starts"}})
        params["starts"] = list(auto_opts.get("starts", DEFAULT_STARTS))
        params.update(refine_opts)
    else:
        if b == 1:  # one row block: nothing to partition (no engine call)
            part, binfo = np.zeros(graph.n, dtype=np.int64), {"note": "one row block: no partitioner call"}
        else:
            say(f"partitioning with {backend} into {b} parts")
            with _heartbeat(progress, backend):
                part, binfo = run_backend(backend, model_obj, b, imbalance=imbalance, seed=seed, graph=graph,
                                          **opts)
        timings["partition_s"] = time.perf_counter() - t0
        info["backend"] = binfo
    if fast and b > 1:  # km1 (volume) V-cycle refinement of METIS's partition, exact gains (fast.py)
        from .fast import vcycle_refine

        t0 = time.perf_counter()
        part, info["volume_refine"] = vcycle_refine(graph, part, b, imbalance=imbalance, seed=seed)
        timings["volume_refine_s"] = time.perf_counter() - t0
        params["preset"] = "fast"

    # ---- hubs apart (Mt-KaHyPar fixed vertices, hubs.py), then bottleneck refinement
    volume_reference = None
    if objective != "total" and b > 1 and backend == "mtkahypar" and model == "hypergraph":
        from .hubs import DEFAULT_FACTOR, spread_hubs

        factor = DEFAULT_FACTOR if hub_factor is None else hub_factor
        if factor > 0:
            t0 = time.perf_counter()
            new, info["hubs"] = spread_hubs(
                graph, model_obj, part, b, imbalance=imbalance, seed=seed, factor=factor,
                volume_tolerance=refine_opts.get("volume_tolerance", 0.05), preset=opts.get("preset", "DEFAULT"),
                threads=opts.get("threads", 1), objective=objective,
                alpha=refine_opts.get("alpha", DEFAULT_ALPHA_S), beta=refine_opts.get("beta", DEFAULT_BETA_S_PER_BYTE),
                row_bytes=f * dtype_bytes(dtype))
            timings["hubs_s"] = time.perf_counter() - t0
            if info["hubs"]["kept"]:
                say(f"spread {info['hubs']['hubs']} hubs over distinct parts")
                volume_reference, part = info["hubs"]["before"]["total_volume"], new
        params["hub_factor"] = factor
    if objective != "total" and b > 1 and not auto:
        try:
            from . import refine as refine_mod
        except ImportError as exc:
            raise BackendUnavailableError("bottleneck refinement (partplan.partition.refine) is not "
                                          "available in this install") from exc
        if refine_opts.get("time_limit") is None:
            # default budget: the partitioner's own time (the planner's target is
            # refinement time <= Mt-KaHyPar time), at least REFINE_MIN_SECONDS
            refine_opts["time_limit"] = max(REFINE_MIN_SECONDS, timings["partition_s"])
        say(f"refining for {objective} (time limit {refine_opts['time_limit']:.1f} s)")
        t0 = time.perf_counter()
        part, report = refine_mod.refine(graph, part, b, objective=objective, imbalance=imbalance,
                                         seed=seed, f=f, dtype=dtype, volume_reference=volume_reference,
                                         progress=progress, **refine_opts)
        timings["refine_s"] = time.perf_counter() - t0
        info["refine"] = report
        params.update(refine_opts)

    # ---- decoupled ownership
    owner = None
    if ownership == "decoupled":
        try:
            from . import ownership as own_mod
        except ImportError as exc:
            raise BackendUnavailableError("decoupled ownership (partplan.partition.ownership) is not "
                                          "available in this install") from exc
        if own_method is None:  # the LP reaches the average-load bound; greedy stalls above it
            own_method = "lp" if b <= LP_OWNERSHIP_MAX_BLOCKS else "greedy"
        say(f"assigning owners ({own_mod.__name__.rsplit('.', 1)[-1]}, {own_method})")
        t0 = time.perf_counter()
        own_obj = "max-send" if objective in ("total", "max-send") else "max-both"
        owner = np.asarray(own_mod.assign_owners(graph, part, b, method=own_method, objective=own_obj),
                           dtype=np.int64)
        timings["ownership_s"] = time.perf_counter() - t0
        params["ownership_method"] = own_method

    # ---- exact stats
    stats = lstats = None
    if want_stats:
        t0 = time.perf_counter()
        stats = analyze(graph, part, b, f=f, dtype=dtype, name=f"{graph.name} {model}/{backend}")
        if owner is not None:  # the exchange actually planned: H[j] sent by owner[j] (forward pass)
            from .ownership import owner_stats

            info["conformal_stats"] = stats.summary()
            stats = owner_stats(graph, part, owner, b, f=f, dtype=dtype)
        if lay_obj.layout_stats:
            lstats = lay_obj.volumes(graph, part, f=f, dtype=dtype)
        timings["stats_s"] = time.perf_counter() - t0
    info["layout"] = {key: v for key, v in lay_obj.describe().items() if key != "groups"}
    return Partition(part=part, k=k, layout=lay_obj.spec, layout_params=lparams, model=model, backend=backend,
                     objective=objective, params=params, timings=timings, stats=stats, owner=owner,
                     graph_fingerprint=graph.fingerprint, layout_stats=lstats, info=info)


# ------------------------------------------------------------- save / load
def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def _atomic_text(path: Path, text: str):
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def save_partition(p: Partition, path: str | os.PathLike) -> Path:
    """Write ``p`` atomically: ``.parquet`` (columns part [, owner]; the
    description in the schema metadata key ``partplan``), or ``.npy`` / any
    METIS-style text name (``.part``, ``g.part.16``) for the part array plus a
    JSON sidecar ``<name>.json`` (owner, if any, in ``<name>.owner.npy``)."""
    from ..io.partfile import write_partition

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = p.to_dict(arrays=False)
    if path.suffix.lower() == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        cols = {"part": p.part}
        if p.owner is not None:
            cols["owner"] = p.owner
        table = pa.table(cols).replace_schema_metadata({"partplan": json.dumps(meta)})
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp)
        return path
    write_partition(p.part, path)
    if p.owner is not None:
        own = path.with_name(path.name + ".owner.npy")
        write_partition(p.owner, own)
        meta["owner_file"] = own.name
    _atomic_text(_sidecar(path), json.dumps(meta, indent=1) + "\n")
    return path


def _layout_of(meta: dict, path) -> Layout:
    """The layout a saved partition describes (schema /1 stored k = row blocks)."""
    try:
        k = int(meta["k"])
        spec = spec_from_params(meta.get("layout", "1d"), dict(meta.get("layout_params") or {}))
        if meta.get("schema", SCHEMA) == "partplan.partition/1":
            return parse_layout(spec, row_blocks=k)
        return parse_layout(spec, k)
    except (KeyError, TypeError, ValueError, PartitionError) as exc:
        raise PartitionError(f"{path}: partition metadata field 'k'/'layout' is not usable ({exc})") from None


def load_partition(path: str | os.PathLike, graph: Graph | None = None) -> Partition:
    """Read a partition written by :func:`save_partition`. With ``graph`` the
    fingerprint is checked and the stats are recomputed; without a sidecar
    (a bare partition file) ``graph`` is required and the partition is
    described as an external 1D one."""
    from ..io.partfile import read_partition
    from ..parts import as_partition

    path = Path(path)
    if not path.is_file():
        raise PartitionError(f"{path}: no such partition file")
    owner = None
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises several types for bad files
            raise PartitionError(f"{path}: not a readable Parquet file ({exc})") from None
        raw = (table.schema.metadata or {}).get(b"partplan")
        meta = json.loads(raw) if raw else None
        if "part" not in table.column_names:
            raise PartitionError(f"{path}: no 'part' column")
        part = table.column("part").to_numpy().astype(np.int64)
        if "owner" in table.column_names:
            owner = table.column("owner").to_numpy().astype(np.int64)
    else:
        side = _sidecar(path)
        meta = None
        if side.is_file():
            try:
                meta = json.loads(side.read_text())
            except json.JSONDecodeError as exc:
                raise PartitionError(f"{side}: line {exc.lineno}: bad JSON ({exc.msg})") from None
        n = meta["n"] if meta else (graph.n if graph is not None else None)
        if n is None:
            raise PartitionError(f"{path}: no sidecar {side.name}; pass the graph to read a bare partition")
        part = read_partition(path, n)
        if meta and meta.get("owner_file"):
            owner = read_partition(path.with_name(meta["owner_file"]), n)
    if meta is None:
        if graph is None:
            raise PartitionError(f"{path}: no partplan metadata; pass the graph to read a bare partition")
        meta = {"k": int(part.max()) + 1 if part.size else 1, "layout": "1d", "layout_params": {},
                "model": "external", "backend": "external", "objective": "total", "params": {},
                "timings": {}, "graph_fingerprint": graph.fingerprint, "info": {}}
    lay = _layout_of(meta, path)
    part, _ = as_partition(part, part.size, lay.row_blocks, source=str(path))
    stats = lstats = None
    if graph is not None:
        if meta.get("graph_fingerprint") and meta["graph_fingerprint"] != graph.fingerprint:
            raise PartitionError(f"{path}: partition was made for graph {meta['graph_fingerprint']}, "
                                 f"not {graph.fingerprint} ({graph.name})")
        if graph.n != part.size:
            raise PartitionError(f"{path}: {part.size} entries but the graph has {graph.n} vertices")
        params = meta.get("params", {})
        f, dtype = int(params.get("f", 128)), str(params.get("dtype", "float32"))
        b = lay.row_blocks
        if owner is not None:  # the exchange actually planned, as partition() reports it
            from .ownership import owner_stats
            stats = owner_stats(graph, part, owner, b, f=f, dtype=dtype)
        else:
            stats = analyze(graph, part, b, f=f, dtype=dtype, name=f"{graph.name} {meta.get('model')}/{meta.get('backend')}")
        if lay.layout_stats:
            lstats = lay.volumes(graph, part, f=f, dtype=dtype)
    k = lay.ranks
    meta["layout"] = lay.spec
    return Partition(part=part, k=k, layout=meta["layout"], layout_params=meta.get("layout_params", {}),
                     model=meta["model"], backend=meta["backend"], objective=meta["objective"],
                     params=meta.get("params", {}), timings=meta.get("timings", {}), stats=stats,
                     owner=owner, graph_fingerprint=meta.get("graph_fingerprint", ""),
                     layout_stats=lstats, info=meta.get("info", {}))
