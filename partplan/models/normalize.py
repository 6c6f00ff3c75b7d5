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
    A[i, i] is absent (float64 CSR, sorted, no duplicates; entries whose
    weight is 0 are dropped, as scipy's sum drops them)."""
    A = graph.to_scipy().astype(np.float64).tocsr()
    A.sum_duplicates()
    indptr, indices, data = self_looped_rows(A.indptr.astype(np.int64), A.indices, A.data, 0)
    return sp.csr_matrix((data, indices, indptr), shape=A.shape)


def self_looped_rows(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray | None,
                     row_lo: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows ``[row_lo, row_lo + len(indptr) - 1)`` of A + I with the remaining self loops, from those
    rows of a canonical CSR (columns strictly increasing in each row; global column ids; ``data``
    float64 or None for a pattern): (indptr int64 from 0, column ids in ``indices``' dtype, values
    float64). A row without a diagonal entry gets one of weight 1 in its sorted place; a row that has
    one keeps its weight; then every entry of weight 0 (±0.0) is dropped — the matrix scipy's
    ``A + I_missing`` gives. Each row depends on that row alone, so a process holding a run of rows
    computes exactly its rows of the whole matrix's result (the distributed plan build)."""
    rows = indptr.size - 1
    nnz = np.diff(indptr)
    row_of = np.repeat(np.arange(row_lo, row_lo + rows, dtype=np.int64), nnz)
    has = np.zeros(rows, dtype=bool)
    has[row_of[indices == row_of] - row_lo] = True
    missing = np.flatnonzero(~has)
    before = np.bincount(row_of[indices < row_of] - row_lo, minlength=rows)   # entries left of the diagonal
    at = indptr[:-1][missing] + before[missing]
    vals = np.ones(indices.size) if data is None else np.asarray(data, dtype=np.float64)
    indices = np.insert(indices, at, (missing + row_lo).astype(indices.dtype))
    vals = np.insert(vals, at, 1.0)
    count = nnz.copy()
    count[missing] += 1
    keep = vals != 0
    if not keep.all():
        row_new = np.repeat(np.arange(rows, dtype=np.int64), count)
        count = np.bincount(row_new[keep], minlength=rows)
        indices, vals = indices[keep], vals[keep]
    out_ptr = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(count, out=out_ptr[1:])
    return out_ptr, indices, vals


def row_sums(indptr: np.ndarray, data: np.ndarray) -> np.ndarray:
    """float64[rows]: each row's sum of ``data`` (0 for an empty row) — scipy's ``A.sum(axis=1)``
    (``np.add.reduceat`` over the non-empty rows), so a row's sum depends on that row's values
    alone and is the same bits in any process that holds the row."""
    out = np.zeros(indptr.size - 1, dtype=np.float64)
    full = np.flatnonzero(np.diff(indptr))
    if full.size:
        out[full] = np.add.reduceat(data, indptr[full])
    return out


def check_degrees(deg: np.ndarray, mode: str, row_lo: int, name) -> None:
    """Refuse a negative degree (row ``row_lo + i``): 1/sqrt(deg) or 1/deg of it is undefined (PyG's
    gcn_norm gives NaN; a zero would be silent)."""
    if (deg < 0).any():
        i = int(np.flatnonzero(deg < 0)[0])
        raise GraphFormatError(f"row {row_lo + i}: its weights (self loop included) sum to {deg[i]:g} < 0: the "
                               f"{mode} normalization divides by that degree's "
                               f"{'square root' if mode == 'gcn' else 'value'}; give non-negative weights",
                               name, field="data")


def degree_scale(deg: np.ndarray, mode: str) -> np.ndarray:
    """Per row: 1/sqrt(deg) ("gcn") or 1/deg ("mean"), 0 where the degree is 0."""
    with np.errstate(divide="ignore"):
        return np.where(deg > 0, 1.0 / (np.sqrt(deg) if mode == "gcn" else deg), 0.0)


def normalized_values(mode: str, indptr: np.ndarray, data: np.ndarray, row_scale: np.ndarray,
                      col_scale: np.ndarray | None) -> np.ndarray:
    """The values of Â on rows of A + I (``indptr``, ``data``): ``a_ij · (s_i · s_j)`` for "gcn"
    (``col_scale``: s_j of each entry's column; the product is commutative, so a symmetric A gives a
    bitwise symmetric Â), ``a_ij · (1/deg_i)`` for "mean" (``col_scale`` unused)."""
    per_entry = np.repeat(row_scale, np.diff(indptr))
    if mode == "gcn":
        return data * (per_entry * col_scale)
    return data * per_entry


def normalize_adjacency(graph: Graph, mode: str) -> Graph:
    """The graph whose values are ``Â`` (see the module docstring); same vertex
    ids and name, ``directed`` kept."""
    mode = check_normalize(mode)
    if mode is None:
        return graph
    A = with_self_loops(graph)
    deg = row_sums(A.indptr, A.data)
    check_degrees(deg, mode, 0, graph.name)
    s = degree_scale(deg, mode)
    vals = normalized_values(mode, A.indptr, A.data, s, s[A.indices] if mode == "gcn" else None)
    return Graph(A.indptr.astype(np.int64), A.indices.astype(np.int64), vals, name=graph.name,
                 ids=graph.ids, vertex_weights=graph.vertex_weights, directed=graph.directed)
