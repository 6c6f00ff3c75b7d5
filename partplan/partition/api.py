"""The planner's front door: :func:`partition` and the :class:`Partition` result.

``partition(graph, k, model=..., backend=..., objective=..., layout=...)``
builds a model (:mod:`partplan.models`), runs a real partitioner behind
:func:`partplan.partition.engines.run_backend`, optionally refines the
bottleneck (:mod:`partplan.partition.refinement.refine`) or picks decoupled owners
(:mod:`partplan.partition.refinement.ownership`), and measures the result exactly with
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

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import PartitionError
from ..graph import Graph
from ..metrics import CommStats, LayoutStats, analyze
from ..layouts import Layout, parse_layout, spec_from_params
from .engines import backend_names, default_backend, run_backend  # noqa: F401
from .objectives import OBJECTIVES, balance_cap, balance_floor, compute_floor_of, eps_limit, floor_of  # noqa: F401  (OBJECTIVES: re-exported by partplan.partition)
from .request import DEFAULT_OBJECTIVE, MODELS, OWNERSHIP, resolve  # noqa: F401
from .pipeline import stages
from .pipeline.stages import EXPLICIT_REFINE_WORK, LP_OWNERSHIP_MAX_BLOCKS  # noqa: F401  (documented here)
from .._args import check_path
from .._atomic import atomic_path
from ..io.partfile import SIDECAR_SCHEMA as SCHEMA
from .._process import peak_rss_bytes
from .heartbeat import HEARTBEAT_EVERY_S, HEARTBEAT_FIRST_S, _heartbeat  # noqa: F401  (re-exported)
from .options import DEFAULT_IMBALANCE

# derived from the backend registry (partplan.partition.engines.REGISTRY), the one list of engines
DEFAULT_BACKEND = {m: default_backend(m) for m in MODELS}
MODEL_BACKENDS = {m: backend_names(m) for m in MODELS}


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


def partition(graph: Graph | str | os.PathLike, k: int, *, model: str | None = None, backend: str | None = None,
              objective: str | None = None, layout: str = "1d", imbalance: float = DEFAULT_IMBALANCE, seed: int = 0,
              ownership: str = "conformal", nprocs: int | None = None, output: str | os.PathLike | None = None,
              **backend_options) -> Partition:
    """Partition ``graph`` for ``k`` ranks (see the module doc).

    Parameters
    ----------
    model : "graph" | "hypergraph" (default) | "stochastic" | "baseline".
    backend : engine; default per model (metis / mtkahypar / mtkahypar / random).
    objective : "total" (the partitioner's volume objective alone), or
        "max-send" | "max-recv" | "max-both" | "weighted" (bottleneck
        refinement by :func:`partplan.partition.refinement.refine.refine` afterwards; without a
        model, backend or preset, "max-send", "max-recv" and "weighted" refine the default
        pipeline's partition). Default (None): "max-both" for the hypergraph model with a 1D or 1.5D
        layout (:data:`DEFAULT_OBJECTIVE`), else "total".
    layout : "1d", "1.5d:c", "2d:RxC", "2d" or a Layout (see :func:`partplan.layouts.parse_layout`).
    imbalance : ε, compute balance: part weight ≤ (1+ε)·⌈W/k⌉ (weights = row nnz).
    seed : random seed (DEFAULT Mt-KaHyPar is still not bit-reproducible).
    ownership : "conformal" (row j of H lives with row j of A) or "decoupled"
        (owners chosen by :func:`partplan.partition.refinement.ownership.assign_owners`;
        total volume never higher, bottleneck lowered; 1D only).
    backend_options : typed, per engine — :func:`partplan.partition.engines.engine_schema`
        lists an engine's (e.g. mtkahypar: preset, metric, threads, handoff;
        kahypar: metric, ini, quality, timeout; metis: recursive; kaminpar:
        context, threads; auto: starts, vcycle, refine, ...), and
        :data:`partplan.partition.schema.GROUPS` the planner's (f, dtype,
        stats, progress), the models' (nets; sampler, theta, delta, ...) and
        the post-passes' (volume_tolerance, time_limit; alpha, beta with objective "weighted",
        whose α-β model the returned time estimates then use; hub_factor; ownership_method).
        All are checked before any work
        (:func:`partplan.partition.request.resolve`).
    nprocs : partition with this many MPI processes (:mod:`partplan.partition.pipeline.distributed`;
        ``graph`` may then be a chunked graph directory, which no process reads whole, or a graph
        file, written as chunks first): an engine of
        the registry that runs on MPI processes (``backend="zoltan"``, ``"ptscotch"``, ``"stream"``;
        None: chosen per graph), then the distributed max(send, recv) refinement and volume passes;
        1D only. The options it takes: the engine's own and ``time_limit``.
    output : with ``nprocs``, the ``.npy`` the processes write (and its JSON sidecar); None: a
        temporary file, read back into the result.

    The work runs as four stages (:mod:`partplan.partition.pipeline.stages`): model →
    engine → post-passes → measure; ``timings`` has their seconds and
    ``info["peak_rss_bytes"]`` the process's peak resident memory (VmHWM,
    bytes) at the end of each — a jump shows the stage that raised it.
    """
    if graph is None:       # resolve() lets None through for the CLI's checks before the read
        raise PartitionError("partition() needs a graph: a partplan Graph (or, with nprocs, a chunked graph "
                             "directory or a graph file), got None")
    req = resolve(graph, k, model=model, backend=backend, objective=objective, layout=layout,
                  imbalance=imbalance, seed=seed, ownership=ownership, options=backend_options, nprocs=nprocs)
    if req.nprocs is not None:
        return _partition_mpi(graph, req, output)
    if output is not None:
        raise PartitionError("output= is the .npy of partition(..., nprocs=N); save a partition with save_partition")
    w = stages.start(req)
    _say_balance_floor(graph, req, w.info)
    rss = w.info.setdefault("peak_rss_bytes", {})  # the process's peak RSS (VmHWM) after each stage, bytes
    w = stages.build_model(graph, req, w)
    rss["model"] = peak_rss_bytes()
    w = stages.run_engine(graph, req, w, heartbeat=_heartbeat, run=run_backend)
    rss["engine"] = peak_rss_bytes()
    w = stages.post_passes(graph, req, w)
    rss["post_passes"] = peak_rss_bytes()
    _say_over_epsilon(graph, req, w)
    stats, lstats = stages.measure(graph, req, w)
    rss["measure"] = peak_rss_bytes()
    w.info["layout"] = {key: v for key, v in req.lay.describe().items() if key != "groups"}
    return Partition(part=w.part, k=req.k, layout=req.lay.spec, layout_params=req.lay.params, model=req.model,
                     backend=w.backend, objective=req.objective, params=w.params, timings=w.timings, stats=stats,
                     owner=w.owner, graph_fingerprint=graph.fingerprint, layout_stats=lstats, info=w.info)


def _partition_mpi(graph, req, output) -> Partition:
    """``partition(..., nprocs=N)``: the distributed partitioner writes the partition, read back here."""
    import tempfile

    from .context import DistributedRefineContext
    from .pipeline.distributed import distributed_partition

    ctx = DistributedRefineContext(time_limit=req.groups["refine"].get("time_limit"), seed=req.seed)
    floor: dict = {}
    _say_balance_floor(graph, req, floor, vertex_weights=False)   # the processes balance row nnz
    with tempfile.TemporaryDirectory(prefix="partplan-mpi-") as tmp:
        out = Path(tmp) / "part.npy" if output is None else Path(output)
        res = distributed_partition(graph, req.k, nprocs=req.nprocs, output=out, engine=req.engine,
                                    imbalance=req.imbalance, seed=req.seed, context=ctx,
                                    engine_options=req.engine_opts, quiet=req.progress is None,
                                    progress=req.progress, f=req.f, dtype=req.dtype)
        part = np.load(out).astype(np.int64)
    if isinstance(graph, Graph):
        stats = analyze(graph, part, req.k, f=req.f, dtype=req.dtype) if req.want_stats else None
        fingerprint = graph.fingerprint
    else:
        from ..io.chunked import chunked_fingerprint, is_chunked
        stats = None
        fingerprint = res.get("graph_fingerprint") or (chunked_fingerprint(graph) if is_chunked(graph) else "")
    params = {"imbalance": req.imbalance, "seed": req.seed, "nprocs": req.nprocs, "engine": res["engine"],
              **req.engine_opts}
    over = distributed_over_epsilon(res, req.imbalance) if not floor else None
    if over is not None:
        _say_warning(req.progress, over_epsilon_message(over, req.k))
    return Partition(part=part, k=req.k, layout="1d", layout_params={}, model=res["model"], backend=res["backend"],
                     objective="max-both", params=params, timings=res["timings"], stats=stats, owner=None,
                     graph_fingerprint=fingerprint,
                     info={"distributed": res, **floor, **({"over_epsilon": over} if over else {})})


def distributed_over_epsilon(res: dict, imbalance: float) -> dict | None:
    """The distributed partitioner's result (its sidecar ``res``) above its limit ⌊(1+ε)·⌈nnz/k⌉⌋ on
    row nonzeros, where no row alone is (the caller checks the floors): the record of
    :func:`_say_over_epsilon` ("packing": the rows may not pack, or the repair rounds stopped
    short), or None when every part is within it."""
    load = np.asarray(res["compute_load"], dtype=np.int64)
    limit = eps_limit(int(load.sum()), load.size, imbalance)
    if load.size < 2 or int(load.max()) <= limit:
        return None
    return {"heaviest": int(load.max()), "limit": int(limit), "imbalance": imbalance, "backend": res["backend"],
            "why": "packing", "weights": "row nnz"}


def graph_floors(graph, parts: int, imbalance: float, *,
                 vertex_weights: bool = True) -> tuple[dict | None, dict | None]:
    """(balance floor, compute floor) of a :class:`Graph` or a chunked graph's path, its rows read
    once (a chunked graph's indptr arrays streamed chunk by chunk):

    - the balance floor, :func:`.objectives.balance_floor` on the graph's vertex weights when it
      has them and ``vertex_weights``, else row nnz (at least 1; the distributed partitioner
      balances row nnz alone), with ``weights`` naming which;
    - the compute floor, :func:`.objectives.compute_floor_of`, where the partitioner keeps the
      compute limit beside the balance limit and the balance floor does not already say so: the
      single-process pipeline on a graph without vertex weights and with empty rows
      (``vertex_weights`` True; :func:`.pipeline.auto.compute_limit_applies`), the distributed
      partitioner (``vertex_weights`` False) on any graph.

    Each None when no row alone is above its limit (both None for another kind of path)."""
    if isinstance(graph, Graph):
        weighted = vertex_weights and graph.vertex_weights is not None   # what ε bounds then
        nnz = graph.row_nnz
        floor = balance_floor(nnz, parts, imbalance, graph.balance_weights if weighted else None)
        cfloor = None
        from .pipeline.auto import compute_limit_applies
        if floor is None and nnz.size and (not vertex_weights or compute_limit_applies(graph)):
            row = int(np.argmax(nnz))
            cfloor = compute_floor_of(row, int(nnz[row]), int(graph.nnz), parts, imbalance)
    else:
        from ..io.chunked import chunk_info, is_chunked, row_nnz_sums
        if not is_chunked(graph):
            return None, None
        weighted, r = False, row_nnz_sums(chunk_info(graph))
        floor = floor_of(r["heaviest"], max(r["max_nnz"], 1), r["nnz"] + r["empty"], r["max_nnz"], r["nnz"],
                         parts, imbalance)
        cfloor = None if floor is not None else compute_floor_of(r["heaviest"], r["max_nnz"], r["nnz"], parts,
                                                                 imbalance)
    if floor is not None:
        floor["weights"] = "vertex weight" if weighted else "row nnz"
    return floor, cfloor


def graph_balance_floor(graph, parts: int, imbalance: float, *, vertex_weights: bool = True) -> dict | None:
    """The balance floor of :func:`graph_floors`."""
    return graph_floors(graph, parts, imbalance, vertex_weights=vertex_weights)[0]


def graph_compute_floor(graph, parts: int, imbalance: float, *, vertex_weights: bool = True) -> dict | None:
    """The compute floor of :func:`graph_floors`."""
    return graph_floors(graph, parts, imbalance, vertex_weights=vertex_weights)[1]


def _say_balance_floor(graph, req, info: dict, *, vertex_weights: bool = True) -> None:
    """A row heavier than the ε-limit of one part: no partition is within ε (every engine then
    returns one above it). Recorded in ``info["balance_floor"]`` (:func:`graph_balance_floor`)
    and said on ``progress`` before the work; not an error — a partition is still the answer.
    Likewise a row with more nonzeros than the compute limit the partitioner keeps beside the
    balance limit (:func:`graph_compute_floor`), in ``info["compute_floor"]``."""
    floor, cfloor = graph_floors(graph, req.b, req.imbalance, vertex_weights=vertex_weights)
    if floor is None:
        if cfloor is not None:
            info["compute_floor"] = cfloor
            if req.progress is not None:
                req.progress(f"no partition into {req.b} parts keeps compute within ε = {cfloor['imbalance']:g}: "
                             f"row {cfloor['row']} has {cfloor['row_nnz']} nonzeros, the compute limit of one part "
                             f"is {cfloor['limit']}")
        return
    info["balance_floor"] = floor
    if req.progress is not None:
        req.progress(f"no partition into {req.b} parts is within ε = {floor['imbalance']:g}: row {floor['row']} "
                     f"weighs {floor['row_weight']}, the limit of one part is {floor['limit']}")


def _say_over_epsilon(graph: Graph, req, w) -> None:
    """A partition above the ε-limit on its balance weights (row nnz, at least 1 per row, or the
    graph's own vertex weights) where no row alone is above it (that is the balance floor, said
    before the work). Recorded in ``info["over_epsilon"]`` with ``why``:

    - ``"engine"``: an explicit engine's result, returned as the engine left it (partplan repairs
      the balance only before its own passes: the default pipeline, the fast preset, a bottleneck
      objective);
    - ``"no packing"``: after partplan's repair, no row alone above the limit, and the rows cannot
      be packed into the parts within it (a 5-cycle in 2 parts: 3 rows of weight 2 in one part,
      limit 5), as the repair's exact search proved
      (:func:`~partplan.partition.refinement.rebalance.pack_rows`, graphs of up to 2,000 rows);
    - ``"packing"``: as "no packing", where that search did not run or reached its limit: the
      rows may not pack, or the repair stopped short.

    Said on ``progress``; the CLI prints it as a warning. Likewise, where partplan's passes keep
    the compute limit beside it (:func:`.pipeline.auto.compute_limit_applies`: rows without
    nonzeros weigh 1 in the balance, 0 in compute) and no row alone is above that limit, a part
    above it is recorded in ``info["over_compute_limit"]`` (:func:`over_compute_message`)."""
    _say_over_compute(graph, req, w)
    if "balance_floor" in w.info or req.b < 2:
        return
    weights = graph.balance_weights
    _, limit = balance_cap(weights, w.part, req.b, req.imbalance)
    heaviest = int(np.bincount(w.part, weights=weights, minlength=req.b).max())
    if heaviest <= limit:
        return
    own_passes = req.engine in ("auto", "fast") or req.bottleneck
    repairs = [w.info.get("rebalance") or {}] + [r.get("rebalance") or {} for r in
                                                  (w.info.get("auto") or {}).get("starts", [])]
    proved = any(r.get("packing") == "infeasible" for r in repairs)
    w.info["over_epsilon"] = {"heaviest": heaviest, "limit": int(limit), "imbalance": req.imbalance,
                              "backend": w.backend,
                              "why": ("no packing" if proved else "packing") if own_passes else "engine",
                              "vertex_weights": graph.vertex_weights is not None}
    _say_warning(req.progress, over_epsilon_message(w.info["over_epsilon"], req.b))


def _say_warning(progress, message: str) -> None:
    """A warning recorded in ``info``, said on ``progress`` too — unless that progress's caller
    prints the warnings itself (``progress.warnings_apart``, the CLI's: one line each, under -q too)."""
    if progress is not None and not getattr(progress, "warnings_apart", False):
        progress(message)


def _say_over_compute(graph: Graph, req, w) -> None:
    """See :func:`_say_over_epsilon`: the compute limit ⌊(1+ε)·⌈nnz/k⌉⌋ on row nonzeros, where
    partplan's own passes keep it (the default pipeline, the fast preset, the bottleneck refinement
    after an explicit engine) on a graph without vertex weights and with empty rows."""
    from .pipeline.auto import compute_limit_applies
    own_passes = req.engine in ("auto", "fast") or req.bottleneck
    if req.b < 2 or not own_passes or "compute_floor" in w.info or "balance_floor" in w.info \
            or not compute_limit_applies(graph):
        return
    nnz = graph.row_nnz.astype(np.int64)
    limit = eps_limit(int(nnz.sum()), req.b, req.imbalance)
    heaviest = int(np.bincount(w.part, weights=nnz, minlength=req.b).max())
    if heaviest > limit:
        w.info["over_compute_limit"] = {"heaviest": heaviest, "limit": int(limit), "imbalance": req.imbalance,
                                        "backend": w.backend}
        _say_warning(req.progress, over_compute_message(w.info["over_compute_limit"], req.b))


def over_compute_message(over: dict, parts: int) -> str:
    """One line for a user: the heaviest part's row nonzeros against the compute limit."""
    return (f"the heaviest of the {parts} parts holds {over['heaviest']} row nonzeros, above the compute limit "
            f"{over['limit']} (ε = {over['imbalance']:g}) that partplan keeps beside the balance limit on graphs "
            f"with empty rows: no row alone is above it, but the rows may not pack within both limits, or the "
            f"repair's passes stopped short")


def over_epsilon_message(over: dict, parts: int) -> str:
    """One line for a user: the heaviest part's weight against the ε-limit, and why it is above."""
    what = over.get("weights") or ("vertex weights" if over.get("vertex_weights") else "row nnz, at least 1 per row")
    head = (f"the heaviest of the {parts} parts weighs {over['heaviest']} ({what}), above the ε-limit "
            f"{over['limit']} (ε = {over['imbalance']:g}): ")
    if over["why"] == "no packing":
        return head + ("after partplan's balance repair; no row alone is above the limit, but the rows cannot be "
                       "packed into the parts within it (an exact search proved it)")
    if over["why"] == "packing":
        return head + ("after partplan's balance repair; no row alone is above the limit, but the rows may not "
                       "pack into the parts within it, or the repair's passes stopped short")
    return head + (f"{over['backend']}'s own balance, returned as it is (partplan repairs the balance before its "
                   f"own refinement: the default pipeline, --preset fast, a bottleneck objective)")


def compute_floor_message(floor: dict, parts: int) -> str:
    """One line for a user: the row with the most nonzeros against the compute limit of one part."""
    return (f"row {floor['row']} has {floor['row_nnz']} nonzeros, more than the compute limit of one part, "
            f"{floor['limit']} (row nonzeros, ε = {floor['imbalance']:g}, {parts} parts): no partition keeps every "
            f"part's compute within ε; compute imbalance is at least {floor['compute_imbalance_at_least']:.3f}")


def balance_floor_message(floor: dict, parts: int) -> str:
    """One line for a user: which row, its weight, the limit, and the bound on compute imbalance."""
    return (f"row {floor['row']} weighs {floor['row_weight']} ({floor.get('weights', 'row nnz')}), more than the "
            f"ε-limit of one part, "
            f"{floor['limit']} (ε = {floor['imbalance']:g}, {parts} parts): no partition is within ε; "
            f"compute imbalance is at least {floor['compute_imbalance_at_least']:.3f}")


# ------------------------------------------------------------- save / load
def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".json")


def save_partition(p: Partition, path: str | os.PathLike, *, ids: np.ndarray | None = None) -> Path:
    """Write ``p`` atomically: ``.parquet`` (columns part [, owner]; the
    description in the schema metadata key ``partplan``), or ``.npy`` / any
    METIS-style text name (``.part``, ``g.part.16``) for the part array plus a
    JSON sidecar ``<name>.json`` (owner, if any, in ``<name>.owner.npy``). ``ids``: the graph
    file's id of every row where its reader relabelled them (``graph.ids``; int64[n]), written as
    the column ``file_id`` of a table output (``.parquet``, ``.csv``, ``.arrow``, ``.feather``;
    the readers ignore it); a text or ``.npy`` output holds one part per row, in row order. The path is
    checked first (:func:`partplan.io.outpath.check_output_file`: a partition suffix, a
    ``NAME.part.K`` whose K is ``p.row_blocks``, a folder that can be written; missing folders above
    it are created, as every partplan writer does); an OutputPathError / PartitionError names the
    problem before anything is written."""
    from .._atomic import make_parents
    from ..io.outpath import check_output_file, check_output_suffix
    from ..io.partfile import check_part_k_name, write_partition_to

    if not isinstance(p, Partition):
        raise PartitionError(f"save_partition writes a Partition (what partition() returns), got "
                             f"{type(p).__name__}; a bare part vector: partplan.write_partition(part, path)")
    path = Path(check_path("path", path, error=PartitionError))
    if path.name.lower().endswith(".plan"):
        raise PartitionError(f"{path}: save_partition writes a partition file; a plan directory is written by "
                             f"partplan.plan.write_plan (or `partplan plan`)")
    check_part_k_name(path, p.row_blocks)   # K: the parts in the file (as every reader reads K)
    check_output_suffix(path, "partition")  # a bad name creates no folder
    if ids is not None:
        ids = np.asarray(ids)
        if ids.shape != (p.n,) or not np.issubdtype(ids.dtype, np.integer):
            raise PartitionError(f"ids: one integer id per row expected ({p.n}), got {ids.dtype} {ids.shape}")
    meta = p.to_dict(arrays=False)
    make_parents(path)
    check_output_file(path, kind="partition")    # a known suffix, a writable folder: before any write
    if path.suffix.lower() == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        cols = {"part": p.part}
        if p.owner is not None:
            cols["owner"] = p.owner
        if ids is not None:
            from ..io.partfile import FILE_ID_COLUMN
            cols[FILE_ID_COLUMN] = ids.astype(np.int64)
        table = pa.table(cols).replace_schema_metadata({"partplan": json.dumps(meta)})
        with atomic_path(path) as tmp:
            pq.write_table(table, tmp)
        return path
    # every file written to its temporary first, then each replaces its name (part, owner, sidecar):
    # a failure in any (a full disk) removes all the temporaries and keeps every previous output
    own = path.with_name(path.name + ".owner.npy") if p.owner is not None else None
    if own is not None:
        meta["owner_file"] = own.name
    from ..datasets.registry import sha256_file
    with contextlib.ExitStack() as stack:
        side = stack.enter_context(atomic_path(_sidecar(path)))      # replaces its name last
        if own is not None:
            tmp_own = stack.enter_context(atomic_path(own))
            write_partition_to(p.owner, own, tmp_own)
            meta["owner_sha256"] = sha256_file(tmp_own)
        tmp_part = stack.enter_context(atomic_path(path))
        write_partition_to(p.part, path, tmp_part, ids=ids)
        meta["part_sha256"] = sha256_file(tmp_part)   # a sidecar left beside another file is refused
        side.write_text(json.dumps(meta, indent=1) + "\n")
    stale = path.with_name(path.name + ".owner.npy")
    if own is None and stale.is_file() and not stale.is_symlink():
        stale.unlink()     # the owners of the decoupled partition this one replaced (its sidecar no longer names them)
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


def _read_saved(path: Path, graph: Graph | None) -> tuple[np.ndarray, np.ndarray | None, dict | None]:
    """(part, owner or None, partplan metadata or None) of a saved partition: Parquet (metadata in
    the schema) or any partition file with an optional ``.json`` sidecar."""
    from ..io.partfile import read_partition

    if not path.is_file():
        raise PartitionError(f"{path}: is a directory, not a partition file (save_partition writes one file)"
                             if path.is_dir() else f"{path}: no such partition file")
    owner = None
    if path.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except Exception as exc:  # pyarrow raises several types for bad files
            raise PartitionError(f"{path}: not a readable Parquet file ({exc})") from None
        raw = (table.schema.metadata or {}).get(b"partplan")
        meta = _meta_dict(raw, path) if raw else None
        if "part" not in table.column_names:
            raise PartitionError(f"{path}: no 'part' column")
        part = table.column("part").to_numpy().astype(np.int64)
        if "owner" in table.column_names:
            owner = table.column("owner").to_numpy().astype(np.int64)
        return part, owner, meta
    side = _sidecar(path)
    meta = _meta_dict(_sidecar_bytes(side), side) if side.is_file() else None
    if meta:     # a sidecar of another file first: its other fields describe that one
        _check_described(side, meta, "part_sha256", path)
    if meta and graph is not None and "n" in meta and meta["n"] != graph.n:
        raise PartitionError(f"{side}: field 'n' = {meta['n']} rows, but the graph {graph.name!r} has "
                             f"{graph.n} vertices (a partition of another graph)")
    n = meta["n"] if meta else (graph.n if graph is not None else None)
    if n is None:
        raise PartitionError(f"{path}: no sidecar {side.name}; pass the graph to read a bare partition")
    part = read_partition(path, n)
    if meta and meta.get("owner_file"):
        name = meta["owner_file"]
        if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
            raise PartitionError(f"{side}: field 'owner_file' must be a plain file name, got {name!r}")
        _check_described(side, meta, "owner_sha256", path.with_name(name))
        owner = read_partition(path.with_name(name), n)
    return part, owner, meta


def _check_described(side: Path, meta: dict, field: str, path: Path) -> None:
    """One PartitionError unless the file ``path`` is the one the sidecar's ``field`` (its sha256,
    written by :func:`save_partition`; sidecars without it are not checked) describes: a sidecar left
    beside a file written later (another tool's export) would otherwise lend it its layout, model
    and provenance."""
    want = meta.get(field)
    if want is None:
        return
    if not isinstance(want, str) or len(want) != 64:
        raise PartitionError(f"{side}: field {field!r} must be a sha256 (64 hex digits), got {want!r}")
    if path.is_file():
        from ..datasets.registry import sha256_file
        if sha256_file(path) != want.lower():
            raise PartitionError(f"{side}: it describes another {path.name} (field {field!r} is not the file's "
                                 f"sha256): the file was replaced after the sidecar was written; remove {side.name} "
                                 f"to read {path.name} as a bare partition (with the graph)")


def _sidecar_bytes(side: Path) -> bytes:
    """A sidecar's bytes, bounded and checked (regular file, 64 MiB, UTF-8, depth / NaN limits)."""
    from ..io.jsonfile import parse_json_bytes, read_json_bytes
    raw = read_json_bytes(side, max_bytes=64 << 20, what="partition sidecar", error=PartitionError)
    parse_json_bytes(raw, side, what="partition sidecar", error=PartitionError)
    return raw


def _meta_dict(raw: bytes, where) -> dict:
    """The partplan metadata of a saved partition: a JSON object whose 'n' (rows) is an integer."""
    try:
        meta = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise PartitionError(f"{where}: line {exc.lineno}: bad JSON ({exc.msg})") from None
    except (UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise PartitionError(f"{where}: not valid JSON ({type(exc).__name__})") from None
    if not isinstance(meta, dict):
        raise PartitionError(f"{where}: partition metadata must be a JSON object")
    n = meta.get("n")
    if "n" in meta and (isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < 1 << 40):
        raise PartitionError(f"{where}: field 'n' must be a row count (0 <= n < 2**40), got {n!r}")
    params = meta.get("params", {})
    if not isinstance(params, dict):
        raise PartitionError(f"{where}: field 'params' must be a JSON object, got {type(params).__name__}")
    seed = params.get("seed")     # what a plan built from it records as its seed (a plan's manifest check)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise PartitionError(f"{where}: field 'params.seed' must be an integer, got {seed!r}")
    for key in ("model", "backend", "objective"):
        if meta.get(key) is not None and not isinstance(meta[key], str):
            raise PartitionError(f"{where}: field {key!r} must be a string, got {meta[key]!r}")
    return meta


def load_partition(path: str | os.PathLike, graph: Graph | None = None) -> Partition:
    """Read a partition written by :func:`save_partition`. With ``graph`` the
    fingerprint is checked and the stats are recomputed; without a sidecar
    (a bare partition file) ``graph`` is required and the partition is
    described as an external 1D one."""
    from ..parts import as_partition

    path = Path(check_path("path", path, error=PartitionError))
    if graph is not None and not isinstance(graph, Graph):
        raise PartitionError(f"load_partition: graph must be a partplan Graph or None, got {type(graph).__name__}")
    part, owner, meta = _read_saved(path, graph)
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
            from .refinement.ownership import owner_stats
            stats = owner_stats(graph, part, owner, b, f=f, dtype=dtype, backward=not graph.is_symmetric())
        else:
            stats = analyze(graph, part, b, f=f, dtype=dtype, name=f"{graph.name} {meta.get('model')}/{meta.get('backend')}")
        if lay.layout_stats:
            lstats = lay.volumes(graph, part, f=f, dtype=dtype)
    k = lay.ranks
    meta["layout"] = lay.spec
    return Partition(part=part, k=k, layout=meta["layout"], layout_params=meta.get("layout_params", {}),
                     model=str(meta.get("model", "")), backend=str(meta.get("backend", "")),
                     objective=str(meta.get("objective", "")),
                     params=meta.get("params", {}), timings=meta.get("timings", {}), stats=stats,
                     owner=owner, graph_fingerprint=meta.get("graph_fingerprint", ""),
                     layout_stats=lstats, info=meta.get("info", {}))
