"""Thin calls into the real partitioners.

- pymetis (METIS 5.1, graph model): :func:`metis`.
- mtkahypar (Mt-KaHyPar, hypergraph model, km1 objective): :func:`mtkahypar_hypergraph`.

Inputs are validated here because the engines check nothing (pymetis) or exit
the process (kahypar). Only the glue lives here; the engines do the work.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..errors import BackendUnavailableError, PartitionError
from ..graph import Graph
from ..hypergraph import Hypergraph
from ..models import column_net, metis_graph

_MTK = {}  # process-wide mtkahypar Initializer (initialize() may run once per process)

PRESETS = ("DEFAULT", "QUALITY", "HIGHEST_QUALITY", "DETERMINISTIC", "DETERMINISTIC_QUALITY", "LARGE_K")


def _check_k(n: int, k: int):
    if k < 1:
        raise PartitionError(f"k must be >= 1, got {k}")
    if k > n:
        raise PartitionError(f"k={k} parts exceed n={n} vertices")


def metis(graph: Graph, k: int, *, imbalance: float = 0.03, seed: int = 0,
          recursive: bool | None = None, vertex_weights: str = "nnz") -> np.ndarray:
    """pymetis ``part_graph`` on the symmetrized graph without self loops.

    ufactor is always set from ``imbalance`` (METIS's RB default is 0.1%).
    """
    import pymetis

    _check_k(graph.n, k)
    if k == 1:
        return np.zeros(graph.n, dtype=np.int64)
    xadj, adjncy, ew, vw = metis_graph(graph, vertex_weights=vertex_weights)
    opts = pymetis.Options(ufactor=max(1, int(round(imbalance * 1000))), seed=int(seed))
    try:
        res = pymetis.part_graph(k, adjacency=pymetis.CSRAdjacency(xadj, adjncy), vweights=vw,
                                 eweights=ew, recursive=recursive, options=opts)
    except RuntimeError as exc:  # pymetis turns every METIS error into this
        raise PartitionError(f"METIS failed on {graph.name} with k={k}: {exc}") from exc
    part = np.asarray(res.vertex_part, dtype=np.int64)
    if part.size != graph.n or part.min() < 0 or part.max() >= k:
        raise PartitionError(f"METIS returned an invalid partition for k={k}")
    return part


def mtk_initializer(threads: int = 1):
    """The process-wide mtkahypar initializer (thread count fixed at first call)."""
    import mtkahypar

    if "init" not in _MTK:
        _MTK["init"] = mtkahypar.initialize(int(threads))
        _MTK["threads"] = int(threads)
    elif _MTK["threads"] != int(threads):
        warnings.warn(f"mtkahypar already initialized with {_MTK['threads']} threads in this process; "
                      f"ignoring threads={threads}", RuntimeWarning, stacklevel=3)
    return _MTK["init"]


def mtk_context(k: int, imbalance: float, preset: str = "DEFAULT", objective: str = "km1", threads: int = 1):
    import mtkahypar

    if preset not in PRESETS:
        raise BackendUnavailableError(f"unknown mtkahypar preset {preset!r}; choose one of {', '.join(PRESETS)}")
    objectives = {"km1": mtkahypar.Objective.KM1, "cut": mtkahypar.Objective.CUT,
                  "soed": mtkahypar.Objective.SOED}
    if objective not in objectives:
        raise BackendUnavailableError(f"unknown mtkahypar objective {objective!r}; choose km1, cut or soed")
    mtk = mtk_initializer(threads)
    ctx = mtk.context_from_preset(getattr(mtkahypar.PresetType, preset))
    ctx.set_partitioning_parameters(int(k), float(imbalance), objectives[objective])
    ctx.logging = False
    return mtk, ctx


def mtk_hypergraph(mtk, ctx, hg: Hypergraph):
    """Hand a :class:`Hypergraph` to mtkahypar (list of numpy pin arrays)."""
    pin_lists = np.split(hg.pins, hg.net_ptr[1:-1]) if hg.m else []
    vw = hg.vertex_weights if hg.vertex_weights is not None else np.ones(hg.n, dtype=np.int64)
    nw = hg.net_weights if hg.net_weights is not None else np.ones(hg.m, dtype=np.int64)
    return mtk.create_hypergraph(ctx, hg.n, hg.m, pin_lists, vw.tolist(), nw.tolist())


def mtkahypar_hypergraph(hg: Hypergraph, k: int, *, imbalance: float = 0.03, seed: int = 0,
                         preset: str = "DEFAULT", objective: str = "km1", threads: int = 1) -> tuple[np.ndarray, int]:
    """Partition a hypergraph with Mt-KaHyPar; returns (part, its own km1).

    DEFAULT is not bit-reproducible across runs; DETERMINISTIC is.
    """
    import mtkahypar

    _check_k(hg.n, k)
    if k == 1:
        return np.zeros(hg.n, dtype=np.int64), 0
    mtk, ctx = mtk_context(k, imbalance, preset, objective, threads)
    mtkahypar.set_seed(int(seed))
    try:
        h = mtk_hypergraph(mtk, ctx, hg)
        phg = h.partition(ctx)
    except (mtkahypar.InvalidInputError, mtkahypar.InvalidParameterError,
            mtkahypar.UnsupportedOperationError, mtkahypar.SystemError) as exc:
        raise PartitionError(f"Mt-KaHyPar failed on {hg.name} with k={k}: {exc}") from exc
    return np.asarray(phg.get_partition(), dtype=np.int64), int(phg.km1())


def hypergraph(graph: Graph, k: int, **kw) -> np.ndarray:
    """Mt-KaHyPar on the column-net hypergraph of ``graph`` (minimizes 1D volume)."""
    part, _ = mtkahypar_hypergraph(column_net(graph), k, **kw)
    return part
