"""METIS (pymetis, METIS 5.1) on the graph model: :func:`metis`, its context and its registration."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import BackendUnavailableError, PartitionError
from ...graph import Graph
from ...models import metis_graph
from ..context import engine, option
from ..options import C_INT_SEED, DEFAULT_IMBALANCE, _check_k, check_imbalance, engine_seed


#: the largest ufactor (thousandths of imbalance) METIS's recursive bisection gets (metis())
RB_MAX_UFACTOR = 100


@dataclass(frozen=True)
class MetisContext:
    """METIS (pymetis)."""

    recursive: bool | None = option(None, "recursive bisection instead of direct k-way", kind="bool")


def metis(graph: Graph, k: int, *, imbalance: float = DEFAULT_IMBALANCE, seed: int = 0,
          recursive: bool | None = None, vertex_weights: str = "nnz") -> np.ndarray:
    """pymetis ``part_graph`` on the symmetrized graph without self loops.

    ufactor is always set from ``imbalance`` (METIS's RB default is 0.1%), at most
    ``RB_MAX_UFACTOR`` for recursive bisection (pymetis's choice for k ≤ 8 unless ``recursive``
    says otherwise): its imbalance compounds over the bisection levels far past the ufactor
    (R-MAT 12, k = 8: ufactor 300 gave a heaviest part 1.76× the mean, 1000 gave 6.7×;
    email-Enron, k = 16, 1000: 13.6×), while at 100 both stayed within 0.1 % of the mean —
    inside any ε that asked for more. Direct k-way keeps the ufactor as given.
    """
    import pymetis

    _check_k(graph.n, k)
    check_imbalance(imbalance)
    if k == 1:
        return np.zeros(graph.n, dtype=np.int64)
    xadj, adjncy, ew, vw = metis_graph(graph, vertex_weights=vertex_weights)
    ufactor = max(1, int(round(imbalance * 1000)))
    if recursive or (recursive is None and k <= 8):      # pymetis's own rule for None
        ufactor = min(ufactor, RB_MAX_UFACTOR)
    opts = pymetis.Options(ufactor=ufactor, seed=metis_seed(seed))
    try:
        res = pymetis.part_graph(k, adjacency=pymetis.CSRAdjacency(xadj, adjncy), vweights=vw,
                                 eweights=ew, recursive=recursive, options=opts)
    except RuntimeError as exc:  # pymetis turns every METIS error into this
        why = ""
        if "unknown exception" in str(exc).lower():   # METIS's failed allocations reach Python this way
            why = (f" (n = {graph.n:,} vertices, {graph.nnz:,} nonzeros: most likely METIS could not allocate "
                   f"its memory, which grows with both; the default pipeline sets isolated vertices aside and "
                   f"starts from KaMinPar alone on large graphs)")
        raise PartitionError(f"METIS failed on {graph.name} with k={k}: {exc}{why}") from exc
    part = np.asarray(res.vertex_part, dtype=np.int64)
    if part.size != graph.n or part.min() < 0 or part.max() >= k:
        raise PartitionError(f"METIS returned an invalid partition for k={k}")
    return part


def metis_seed(seed: int) -> int:
    """The METIS seed of a partplan seed (:func:`~partplan.partition.options.engine_seed`, then one
    step away from 0): METIS seeds its generator with ``srand``, which reads 0 as 1, and takes -1
    for its own default (4321), so seeds 0 and 1 (and -1 and 4321) gave the same partition. Here
    s ≥ 0 → s + 1 and s < 0 → s - 1 (kept at the C int's ends): distinct seeds stay distinct, and
    seed 0 gives the partition METIS's 0 (= 1) gives.

    >>> metis_seed(0), metis_seed(1), metis_seed(-1), metis_seed(4320)
    (1, 2, -2, 4321)
    """
    s = engine_seed(seed)
    if 0 <= s < C_INT_SEED - 1:
        return s + 1
    return s - 1 if -C_INT_SEED < s < 0 else s


def _run(model_obj, k, *, imbalance, seed, graph=None, **opts):
    if not isinstance(model_obj, Graph):
        raise BackendUnavailableError("metis partitions graphs only (model='graph')")
    return metis(model_obj, k, imbalance=imbalance, seed=seed, **opts), {}


engine("metis", ("graph",), _run, MetisContext, default_for=("graph",))
