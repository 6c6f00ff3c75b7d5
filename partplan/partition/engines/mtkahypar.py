"""Mt-KaHyPar: the hypergraph model (:func:`mtkahypar_hypergraph`, km1 / cut / soed) and graph
mode (:func:`mtkahypar_graph`, edge cut), its context and its registration (the hypergraph and
stochastic models' default)."""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from ..._atomic import scratch_dir
from ...errors import BackendUnavailableError, PartitionError
from ...graph import Graph
from ...hypergraph import Hypergraph
from ...models import column_net, metis_graph
from ..context import engine, option
from ..options import DEFAULT_IMBALANCE, MAX_THREADS, _check_k, check_c_int_weights, check_imbalance, engine_seed
from .handoff import pin_arrays, write_hmetis


_MTK = {}  # process-wide mtkahypar Initializer (initialize() may run once per process)

PRESETS = ("DEFAULT", "QUALITY", "HIGHEST_QUALITY", "DETERMINISTIC", "DETERMINISTIC_QUALITY", "LARGE_K")
METRICS = ("km1", "cut", "soed")


def check_preset(preset: str) -> str:
    """Mt-KaHyPar's preset name, normalized (``quality`` -> ``QUALITY``)."""
    p = str(preset).upper().replace("-", "_")
    if p not in PRESETS:
        raise BackendUnavailableError(f"unknown mtkahypar preset {preset!r}; "
                                      f"choose one of {', '.join(PRESETS)}")
    return p


def _mtk_preset(v):
    return check_preset(v)


@dataclass(frozen=True)
class MtKaHyParContext:
    """Mt-KaHyPar (hypergraph model; graph mode for the pipeline's start)."""

    cli_where: ClassVar[str] = "with --engine mtkahypar"
    preset: str = option("DEFAULT", "Mt-KaHyPar preset", choices=PRESETS, normalize=_mtk_preset)
    metric: str = option("km1", "the engine's objective (km1 = volume; graph mode: cut only)",
                         choices=METRICS)
    threads: int | None = option(None, "worker threads, fixed by the first Mt-KaHyPar call of a process (None: the "
                                 "count it has, else 1)", kind="int", lo=1, hi=MAX_THREADS, cli="--threads")
    handoff: str = option("arrays", "how the hypergraph reaches Mt-KaHyPar", choices=("arrays", "file"),
                          cli="--handoff")


def mtk_initializer(threads: int | None = None):
    """The process-wide mtkahypar initializer (thread count fixed at first call; ``None``: the
    count it already has, else 1 — the default pipeline's start may have set it to all cores)."""
    import mtkahypar

    if "init" not in _MTK:
        _MTK["threads"] = 1 if threads is None else int(threads)
        _MTK["init"] = mtkahypar.initialize(_MTK["threads"])
    elif threads is not None and _MTK["threads"] != int(threads):
        warnings.warn(f"mtkahypar already initialized with {_MTK['threads']} threads in this process; "
                      f"ignoring threads={threads}", RuntimeWarning, stacklevel=3)
    return _MTK["init"]


def mtk_threads() -> int | None:
    """Thread count mtkahypar was initialized with in this process (None: not yet)."""
    return _MTK.get("threads")


def mtk_context(k: int, imbalance: float, preset: str = "DEFAULT", objective: str = "km1",
                threads: int | None = None):
    import mtkahypar

    preset = check_preset(preset)
    objectives = {"km1": mtkahypar.Objective.KM1, "cut": mtkahypar.Objective.CUT,
                  "soed": mtkahypar.Objective.SOED}
    if objective not in objectives:
        raise BackendUnavailableError(f"unknown mtkahypar objective {objective!r}; choose km1, cut or soed")
    mtk = mtk_initializer(threads)
    ctx = mtk.context_from_preset(getattr(mtkahypar.PresetType, preset))
    ctx.set_partitioning_parameters(int(k), float(imbalance), objectives[objective])
    ctx.logging = False
    return mtk, ctx


def mtk_hypergraph(mtk, ctx, hg: Hypergraph, handoff: str = "arrays"):
    """Hand a :class:`Hypergraph` to mtkahypar: ``arrays`` (list of numpy pin
    views) or ``file`` (hMetis file in a temp dir). See :mod:`.handoff`."""
    if handoff == "arrays":
        vw = hg.vertex_weights if hg.vertex_weights is not None else np.ones(hg.n, dtype=np.int64)
        nw = hg.net_weights if hg.net_weights is not None else np.ones(hg.m, dtype=np.int64)
        return mtk.create_hypergraph(ctx, hg.n, hg.m, pin_arrays(hg), vw.tolist(), nw.tolist())
    if handoff == "file":
        with scratch_dir("partplan-mtk") as d:
            path = write_hmetis(hg, Path(d) / "model.hgr")
            return mtk.hypergraph_from_file(str(path), ctx)
    raise BackendUnavailableError(f"unknown hypergraph handoff {handoff!r}; use 'arrays' or 'file'")


def _plain(exc: BaseException) -> str:
    """Mt-KaHyPar's message without its terminal colour codes (ESC [ ... m)."""
    return re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()


def _mtk_errors():
    import mtkahypar

    return (mtkahypar.InvalidInputError, mtkahypar.InvalidParameterError,
            mtkahypar.UnsupportedOperationError, mtkahypar.SystemError)


def mtkahypar_hypergraph(hg: Hypergraph, k: int, *, imbalance: float = DEFAULT_IMBALANCE, seed: int = 0,
                         preset: str = "DEFAULT", objective: str = "km1", threads: int | None = None,
                         handoff: str = "arrays", initial: np.ndarray | None = None,
                         vcycles: int = 1, fixed: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Partition a hypergraph with Mt-KaHyPar; returns (part, its own km1).

    ``initial``: improve this partition with ``vcycles`` V-cycles instead of
    partitioning from scratch. ``fixed``: int[n], the part each vertex is
    fixed to (-1: free; Mt-KaHyPar's fixed vertices; with ``initial`` a
    fixed vertex must already be in its part there). DEFAULT is not bit-reproducible across runs;
    DETERMINISTIC is. ``threads`` is fixed by the first call in a process.
    """
    import mtkahypar

    _check_k(hg.n, k)
    check_imbalance(imbalance)
    check_c_int_weights("Mt-KaHyPar", hg.name, vertex_weights=hg.vertex_weights, net_weights=hg.net_weights)
    mtk, ctx = mtk_context(k, imbalance, preset, objective, threads)
    if k == 1:
        return np.zeros(hg.n, dtype=np.int64), 0
    mtkahypar.set_seed(engine_seed(seed))
    try:
        h = mtk_hypergraph(mtk, ctx, hg, handoff)
        if fixed is not None:
            h.add_fixed_vertices(np.asarray(fixed, dtype=np.int64).tolist(), int(k))
        if initial is not None:
            phg = h.create_partitioned_hypergraph(ctx, int(k), np.asarray(initial, dtype=np.int64).tolist())
            phg.improve_partition(ctx, int(vcycles))
        else:
            phg = h.partition(ctx)
    except _mtk_errors() as exc:
        raise PartitionError(f"Mt-KaHyPar failed on {hg.name} with k={k}: {_plain(exc)}") from exc
    return np.asarray(phg.get_partition(), dtype=np.int64), int(phg.km1())


def mtkahypar_graph(graph: Graph, k: int, *, imbalance: float = DEFAULT_IMBALANCE, seed: int = 0,
                    preset: str = "DEFAULT", threads: int | None = None) -> tuple[np.ndarray, int]:
    """Mt-KaHyPar graph mode (edge cut) on the METIS graph model; (part, cut)."""
    import mtkahypar

    _check_k(graph.n, k)
    check_imbalance(imbalance)
    mtk, ctx = mtk_context(k, imbalance, preset, "cut", threads)
    if k == 1:
        return np.zeros(graph.n, dtype=np.int64), 0
    xadj, adjncy, ew, vw = metis_graph(graph)
    src = np.repeat(np.arange(graph.n, dtype=np.int64), np.diff(xadj))
    keep = src < adjncy
    check_c_int_weights("Mt-KaHyPar (graph mode)", graph.name, vertex_weights=vw, edge_weights=ew[keep])
    edges = np.stack([src[keep], adjncy[keep]], axis=1)
    mtkahypar.set_seed(engine_seed(seed))
    try:
        h = mtk.create_graph(ctx, graph.n, int(edges.shape[0]), edges.tolist(), vw.tolist(), ew[keep].tolist())
        phg = h.partition(ctx)
    except _mtk_errors() as exc:
        raise PartitionError(f"Mt-KaHyPar (graph mode) failed on {graph.name} with k={k}: {_plain(exc)}") from exc
    return np.asarray(phg.get_partition(), dtype=np.int64), int(phg.cut())


def hypergraph(graph: Graph, k: int, **kw) -> np.ndarray:
    """Mt-KaHyPar on the column-net hypergraph of ``graph`` (minimizes 1D volume)."""
    part, _ = mtkahypar_hypergraph(column_net(graph), k, **kw)
    return part


def _run(model_obj, k, *, imbalance, seed, graph=None, **opts):
    if isinstance(model_obj, Graph):
        o = dict(opts)
        if o.pop("objective", "cut") != "cut" or o.pop("handoff", "arrays") != "arrays":
            raise BackendUnavailableError("mtkahypar graph mode takes objective 'cut' and arrays handoff only")
        part, cut = mtkahypar_graph(model_obj, k, imbalance=imbalance, seed=seed, **o)
        return part, {"cut": cut}
    part, km1 = mtkahypar_hypergraph(model_obj, k, imbalance=imbalance, seed=seed, **opts)
    return part, {"km1": km1}


engine("mtkahypar", ("graph", "hypergraph", "stochastic"), _run, MtKaHyParContext,
       options=("preset", "objective", "threads", "handoff"), default_for=("hypergraph", "stochastic"))
