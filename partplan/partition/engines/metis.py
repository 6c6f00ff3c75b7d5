"""METIS (pymetis, METIS 5.1) on the graph model: :func:`metis`, its context and its registration."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import BackendUnavailableError, PartitionError
from ...graph import Graph
from ...models import metis_graph
from ..context import engine, option
from ..options import DEFAULT_IMBALANCE, _check_k, check_imbalance, engine_seed


@dataclass(frozen=True)
class MetisContext:
    """METIS (pymetis)."""

    recursive: bool | None = option(None, "recursive bisection instead of direct k-way", kind="bool")


def metis(graph: Graph, k: int, *, imbalance: float = DEFAULT_IMBALANCE, seed: int = 0,
          recursive: bool | None = None, vertex_weights: str = "nnz") -> np.ndarray:
    """pymetis ``part_graph`` on the symmetrized graph without self loops.

    ufactor is always set from ``imbalance`` (METIS's RB default is 0.1%).
    """
    import pymetis

    _check_k(graph.n, k)
    check_imbalance(imbalance)
    if k == 1:
        return np.zeros(graph.n, dtype=np.int64)
    xadj, adjncy, ew, vw = metis_graph(graph, vertex_weights=vertex_weights)
    opts = pymetis.Options(ufactor=max(1, int(round(imbalance * 1000))), seed=engine_seed(seed))
    try:
        res = pymetis.part_graph(k, adjacency=pymetis.CSRAdjacency(xadj, adjncy), vweights=vw,
                                 eweights=ew, recursive=recursive, options=opts)
    except RuntimeError as exc:  # pymetis turns every METIS error into this
        raise PartitionError(f"METIS failed on {graph.name} with k={k}: {exc}") from exc
    part = np.asarray(res.vertex_part, dtype=np.int64)
    if part.size != graph.n or part.min() < 0 or part.max() >= k:
        raise PartitionError(f"METIS returned an invalid partition for k={k}")
    return part


def _run(model_obj, k, *, imbalance, seed, graph=None, **opts):
    if not isinstance(model_obj, Graph):
        raise BackendUnavailableError("metis partitions graphs only (model='graph')")
    return metis(model_obj, k, imbalance=imbalance, seed=seed, **opts), {}


engine("metis", ("graph",), _run, MetisContext, default_for=("graph",))
