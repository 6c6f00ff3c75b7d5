"""Graph model for METIS-style partitioners: undirected, no self loops.

``A + A^T`` pattern without the diagonal; edge weight = multiplicity in the
symmetrized pattern (1 or 2: both directions present); vertex weight = nnz of
the row (compute load, at least 1). Its edge cut over-estimates 1D volume.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import OptionError
from ..graph import Graph, check_graph


def model_vertex_weights(graph: Graph, vertex_weights: str) -> np.ndarray:
    """int64[n] vertex weights of a model: "nnz" — the graph's balance weights (its vertex weights when
    given, else row nonzeros, at least 1) — or "unit" (1 each)."""
    if not isinstance(vertex_weights, str):     # an array here would be compared element by element
        raise OptionError(f"vertex_weights must be 'nnz' or 'unit' (a graph's own weights are Graph.vertex_weights), "
                          f"not {type(vertex_weights).__name__}")
    if vertex_weights == "nnz":
        return graph.balance_weights
    if vertex_weights == "unit":
        return np.ones(graph.n, dtype=np.int64)
    raise OptionError(f"vertex_weights must be 'nnz' or 'unit', not {vertex_weights!r}")


def metis_graph(graph: Graph, *, vertex_weights: str = "nnz") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(xadj, adjncy, eweights, vweights) int64 arrays of the symmetrized graph."""
    n = check_graph(graph).n
    vw = model_vertex_weights(graph, vertex_weights)
    P = sp.csr_matrix((np.ones(graph.nnz, dtype=np.int64), graph.indices, graph.indptr), shape=(n, n))
    P.data[:] = 1
    P.sum_duplicates()
    P.data[:] = 1
    S = (P + P.T).tocsr()
    S.setdiag(0)
    S.eliminate_zeros()
    S.sort_indices()
    return S.indptr.astype(np.int64), S.indices.astype(np.int64), S.data.astype(np.int64), vw
