"""Adjacency normalizations of GNN layers, computed by the planner and stored
as the plan's matrix values (numpy only; no torch).

``Z = Â @ H`` with ``Â[i, j]`` the weight of the message j → i (PyG's edge
``(source j, target i)``). Both normalizations first add the *remaining* self
loops as PyG's ``add_remaining_self_loops`` does (weight 1 where a vertex has
none; an existing self loop keeps its weight), on ``A`` as given (weights
used when the graph has them):

* ``gcn``  — ``Â = D^-1/2 (A + I) D^-1/2``, ``D = diag(row sums of A + I)``
  (PyG ``GCNConv``'s default ``gcn_norm``: degree over incoming edges);
  stored as ``a_ij · (s_i · s_j)`` so a symmetric A gives a bitwise symmetric Â
  (then the backward pass reuses the forward program).
* ``mean`` — ``Â = D^-1 (A + I)`` (row-normalized: each vertex averages itself
  and its in-neighbours). Not symmetric, so plans get a separate backward.

A zero degree (only possible with zero weights) gives a zero row, as in PyG.

>>> import numpy as np
>>> from partplan import Graph
>>> g = Graph.from_edges([0, 1], [1, 2], symmetrize=True)          # path 0-1-2
>>> a = normalize_adjacency(g, "gcn").to_scipy().toarray()
>>> np.allclose(a[0], [1 / 2, 1 / np.sqrt(6), 0])
True
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import GraphFormatError, PartplanError
from ..graph import Graph

NORMALIZATIONS = ("gcn", "mean")


class NormalizationError(PartplanError):
    """An unknown normalization, or a plan without the one a job needs."""


def check_normalize(mode: str | None) -> str | None:
    """``mode`` if it is a known normalization (or None / "none" → None)."""
    if mode in (None, "none"):
        return None
    if mode not in NORMALIZATIONS:
        raise NormalizationError(f"unknown normalization {mode!r}; use one of {', '.join(NORMALIZATIONS)} or none")
    return mode


def with_self_loops(graph: Graph) -> sp.csr_matrix:
    """A + I with PyG's *remaining* self loops: weight 1 added only where
    A[i, i] is absent (float64 CSR, sorted, no duplicates)."""
    A = graph.to_scipy().astype(np.float64).tocsr()
    A.sum_duplicates()
    has = np.zeros(graph.n, dtype=bool)
    diag = graph.rows == graph.indices
    has[graph.rows[diag]] = True
    missing = np.flatnonzero(~has)
    eye = sp.csr_matrix((np.ones(missing.size), (missing, missing)), shape=A.shape)
    out = (A + eye).tocsr()
    out.sort_indices()
    return out


def normalize_adjacency(graph: Graph, mode: str) -> Graph:
    """The graph whose values are ``Â`` (see the module docstring); same vertex
    ids and name, ``directed`` kept."""
    mode = check_normalize(mode)
    if mode is None:
        return graph
    A = with_self_loops(graph)
    deg = np.asarray(A.sum(axis=1)).ravel()
    if (deg < 0).any():     # 1/sqrt(deg) undefined: PyG's gcn_norm gives NaN, a zero would be silent
        r = int(np.flatnonzero(deg < 0)[0])
        raise GraphFormatError(f"row {r}: its weights (self loop included) sum to {deg[r]:g} < 0: the "
                               f"{mode} normalization divides by that degree's "
                               f"{'square root' if mode == 'gcn' else 'value'}; give non-negative weights",
                               graph.name, field="data")
    rows = np.repeat(np.arange(graph.n, dtype=np.int64), np.diff(A.indptr))
    with np.errstate(divide="ignore"):
        if mode == "gcn":
            s = np.where(deg > 0, 1.0 / np.sqrt(deg), 0.0)
            vals = A.data * (s[rows] * s[A.indices])
        else:
            vals = A.data * np.where(deg > 0, 1.0 / deg, 0.0)[rows]
    return Graph(A.indptr.astype(np.int64), A.indices.astype(np.int64), vals, name=graph.name,
                 ids=graph.ids, vertex_weights=graph.vertex_weights, directed=graph.directed)
