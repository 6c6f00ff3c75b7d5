"""The :class:`Graph`: a square sparse matrix ``A`` (n × n) in CSR arrays.

Row ``i`` of ``A`` lists the columns ``j`` of its stored entries (the structure: an entry
stored with value 0, as scipy keeps one, is a nonzero of the pattern like any other, and counts
in every figure). For 1D row-wise SpMM ``Z = A @ H`` the rank owning row ``i`` needs ``H[j]``
for every such ``j``.
A directed edge ``u -> v`` is stored as ``A[u, v]``; undirected graphs are stored
symmetric (both directions).

All arrays are 64-bit: ``indptr`` int64 (n + 1), ``indices`` int64 (nnz),
``data`` float64 (nnz) or ``None`` for a pattern (unweighted) matrix. The CSR is
canonical: column indices are sorted within each row, so the same graph always
has the same bytes and the same :attr:`Graph.fingerprint`.

Normalization (symmetrize, self loops, duplicates, isolated vertices) is one
vectorized pass; scipy.sparse does the sorting and summing.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import scipy.sparse as sp

from ._args import as_numpy, check_bool
from .errors import GraphFormatError, OptionError
from .parts import first_fraction, first_past_int64

SelfLoops = Literal["keep", "add", "remove"]


def _as_int64(name: str, a, where: str | None = None) -> np.ndarray:
    if hasattr(a, "detach") and hasattr(a, "cpu"):     # a torch tensor on any device (not the meta device)
        a = _numpy_of(a)
    try:
        arr = np.asarray(a)
    except ValueError as exc:          # a ragged list: numpy's "inhomogeneous shape"
        raise GraphFormatError(f"{name} must be a flat sequence of ids ({exc})", where, field=name) from None
    if arr.ndim != 1:
        raise GraphFormatError(f"{name} must be one-dimensional, got shape {arr.shape}", where, field=name)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.issubdtype(arr.dtype, np.floating):
            raise GraphFormatError(f"{name} must hold integer vertex ids, got dtype {arr.dtype}", where, field=name)
        e = first_fraction(arr)        # floats are taken when every value is a whole number
        if e >= 0:
            raise GraphFormatError(f"{name}[{e}] = {arr[e].item()} is not a whole number (vertex ids are integers)",
                                   where, field=name)
        _below_2_63(name, arr, where)
        arr = arr.astype(np.int64)
    elif arr.size and arr.dtype.kind == "u" and arr.dtype.itemsize >= 8:
        _below_2_63(name, arr, where)
    return np.ascontiguousarray(arr, dtype=np.int64)


def _below_2_63(name: str, arr: np.ndarray, where, what: str = "a vertex id") -> None:
    e = first_past_int64(arr)
    if e >= 0:
        raise GraphFormatError(f"{name}[{e}] = {arr[e].item()}: {what} of 2^63 or more", where, field=name)


def _check_n(n, where) -> int:
    """``n`` given by a caller: a non-negative integer whose row pointers (int64[n + 1]) fit the
    memory budget (:func:`partplan._budget.check_array_bytes`), checked before any allocation."""
    import numbers

    from ._budget import check_array_bytes
    n = _integer_scalar(n)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or int(n) < 0:
        raise GraphFormatError(f"n (the number of vertices) must be an integer >= 0, got {n!r}", where, field="n")
    check_array_bytes(int(n) + 1, 1, 8, f"a graph of n = {int(n)} vertices (its row pointers)", path=where,
                      field="n")
    return int(n)


def _integer_scalar(v):
    """A 0-d integer numpy array or torch tensor (``torch.tensor(3)``, ``np.int64(3)``) as a Python
    int, so that every count argument takes what the other takes; anything else unchanged (then
    checked by its caller)."""
    if isinstance(v, bool) or not hasattr(v, "__index__") or not hasattr(v, "shape") or tuple(v.shape) != ():
        return v
    dtype = str(getattr(v, "dtype", ""))
    if "int" not in dtype or "bool" in dtype:
        return v
    return int(v.__index__())


def _as_weights(weights, where, field: str = "weight") -> np.ndarray:
    """Edge weights as float64: real numbers only (a complex value would lose its imaginary part);
    torch tensors (any float dtype, bfloat16 included; with grad) taken as :func:`_numpy_of`."""
    w = _numpy_of(weights)
    if w.dtype.kind not in "biuf":
        raise GraphFormatError(f"edge weights must be real numbers, got dtype {w.dtype}", where, field=field)
    return w.astype(np.float64)


def _numpy_of(a) -> np.ndarray:
    """A numpy view / copy of ``a`` (:func:`partplan._args.as_numpy`: torch tensors on any device
    detached and moved to the CPU); a sparse or meta tensor is one GraphFormatError."""
    return as_numpy(a, GraphFormatError)


def _check_edge_weights(w: np.ndarray, source, field: str) -> None:
    """One GraphFormatError naming the first non-finite or negative edge weight."""
    if not np.all(np.isfinite(w)):
        e = int(np.flatnonzero(~np.isfinite(w))[0])
        raise GraphFormatError(f"edge {e} has a non-finite weight ({w[e]})", source, field=field)
    if w.size and w.min() < 0:
        e = int(np.flatnonzero(w < 0)[0])
        raise GraphFormatError(f"edge {e} has a negative weight ({w[e]})", source, field=field)


def _int_array(name: str, a) -> np.ndarray:
    """A CSR / weight array given to :class:`Graph` as int64: integer dtypes, or floats that hold
    whole numbers (``1.7`` would otherwise be cut to 1 without a word)."""
    arr = _numpy_of(a)
    bad = first_fraction(arr) if arr.dtype.kind == "f" and arr.size else -1
    if bad >= 0:
        raise GraphFormatError(f"{name}[{bad}] = {arr.flat[bad].item()!r} is not an integer", field=name)
    if arr.dtype.kind not in "biuf" and arr.size:
        raise GraphFormatError(f"{name} must hold integers, got dtype {arr.dtype}", field=name)
    if (arr.dtype.kind == "u" and arr.dtype.itemsize >= 8 or arr.dtype.kind == "f") and arr.size:
        _below_2_63(name, arr.ravel(), None, "a value")
    if arr.dtype.kind == "f" and arr.size and arr.min() < -2.0 ** 63:
        bad = int(np.flatnonzero(arr.ravel() < -2.0 ** 63)[0])
        raise GraphFormatError(f"{name}[{bad}] = {arr.flat[bad].item()!r}: a value below -2^63", field=name)
    return np.ascontiguousarray(arr, dtype=np.int64)


def _check_distinct_ids(ids: np.ndarray) -> None:
    """One GraphFormatError naming the first id two rows share: a relabelled graph's ids map each
    row back to one original vertex, and plans, shards and outputs are keyed by them."""
    if ids.size < 2 or bool(np.all(ids[1:] > ids[:-1])):     # relabelled ids come sorted: O(n)
        return
    order = np.argsort(ids, kind="stable")
    dup = np.flatnonzero(ids[order[1:]] == ids[order[:-1]])
    if dup.size:
        i, j = sorted((int(order[dup[0]]), int(order[dup[0] + 1])))
        raise GraphFormatError(f"ids[{i}] and ids[{j}] are both {int(ids[i])}: each row needs an id of its own",
                               field="ids")


def check_csr(indptr, indices, n_cols: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(indptr, indices) as int64 arrays of a checked CSR: 1-D, ``indptr`` from 0, non-decreasing,
    ending at nnz, column ids in [0, ``n_cols``) (None: the row count, a square matrix). One
    GraphFormatError naming the array otherwise. Rows need not be sorted."""
    indptr = _int_array("indptr", indptr)
    indices = _int_array("indices", indices)
    if indptr.ndim != 1 or indptr.size < 1:
        raise GraphFormatError("indptr must be a 1-D array of length n + 1", field="indptr")
    if indices.ndim != 1:
        raise GraphFormatError(f"indices must be a 1-D array of length nnz, got shape {indices.shape}",
                               field="indices")
    n = indptr.size - 1
    if indptr[0] != 0 or indptr[-1] != indices.size or (n and np.any(np.diff(indptr) < 0)):
        raise GraphFormatError("indptr must start at 0, be non-decreasing and end at nnz", field="indptr")
    cols = n if n_cols is None else n_cols
    if indices.size and (indices.min() < 0 or indices.max() >= cols):
        bad = int(np.flatnonzero((indices < 0) | (indices >= cols))[0])
        raise GraphFormatError(f"column id {int(indices[bad])} out of range [0, {cols})", field="indices")
    return indptr, indices


def check_weight_total(vw: np.ndarray, source=None) -> None:
    """Refuse vertex weights (int64[n], non-negative) whose balance weights (at least 1 each) sum
    past :data:`MAX_TOTAL_WEIGHT` — GraphFormatError naming ``source`` (a file) when given."""
    if vw.size and float(np.maximum(vw, 1).sum(dtype=np.float64)) > MAX_TOTAL_WEIGHT:
        raise GraphFormatError(f"vertex weights sum to more than 2^53 ({MAX_TOTAL_WEIGHT:,}): the balance limits "
                               "are computed in 64-bit integers and floats; scale them down", source,
                               field="vertex_weights")


CANONICAL_BLOCK = 1 << 22      # nonzeros checked at a time (bounded scratch on huge graphs)
#: the most the balance weights (vertex weights, at least 1 each) may sum to: ε-limits are computed
#: in floats and part loads in int64, both exact below 2^53
MAX_TOTAL_WEIGHT = 1 << 53


def _rows_sorted(indptr: np.ndarray, indices: np.ndarray) -> bool:
    """Column ids sorted within each row (a repeated id is an entry kept by ``dedupe=False``).
    Checked in blocks of CANONICAL_BLOCK nonzeros (scratch of a few bytes per nonzero of a block)."""
    nnz = indices.size
    for lo in range(0, max(nnz - 1, 0), CANONICAL_BLOCK):
        hi = min(lo + CANONICAL_BLOCK + 1, nnz)        # pairs (e, e + 1) for e in [lo, hi - 1)
        bad = indices[lo + 1:hi] < indices[lo:hi - 1]
        if not bad.any():
            continue
        # a pair whose second entry starts a row is no violation
        r0, r1 = np.searchsorted(indptr, [lo + 1, hi - 1], side="left")
        starts = indptr[r0:r1 + 1]
        starts = starts[(starts > lo) & (starts < hi)] - (lo + 1)
        bad[starts] = False
        if bad.any():
            return False
    return True


def _sorted_rows(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray | None):
    """(indices, data) with the column ids of each row sorted (a stable sort: repeated ids keep
    their order, and their values with them): copies, the caller's arrays are not changed."""
    n = indptr.size - 1
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    if n <= 1 << 31:      # one int64 key (row · n + column): a stable argsort, ~8x faster than lexsort
        rows *= n
        rows += indices
        order = np.argsort(rows, kind="stable")
    else:
        order = np.lexsort((indices, rows))
    del rows
    return indices[order], (None if data is None else data[order])


def check_graph(graph, name: str = "graph", error=OptionError) -> "Graph":
    """``graph`` when it is a :class:`Graph`, else one ``error`` naming the argument and what it got
    (a Hypergraph, a path, None, ...) before any of its attributes is read."""
    if not isinstance(graph, Graph):
        hint = (" (a Hypergraph: partition it with partplan.partition, or build its graph)"
                if type(graph).__name__ == "Hypergraph" else "")
        raise error(f"{name} must be a partplan Graph, got {type(graph).__name__}{hint}")
    return graph


@dataclass(frozen=True, eq=False)
class Graph:
    """A square sparse matrix / graph in canonical CSR form.

    Attributes
    ----------
    indptr : int64[n + 1] row pointers.
    indices : int64[nnz] column ids, sorted within each row (a raw CSR given out of order is
        sorted on construction, its values with it; the caller's arrays are not changed).
    data : float64[nnz] values, or None for a pattern matrix (all ones). Any finite real: a
        matrix for SpMM may hold negative values (a Laplacian); :meth:`from_edges` and
        :meth:`from_edge_index` build graphs and take edge weights >= 0, and the jobs that need
        them non-negative (SSSP, PageRank) refuse a negative one when they start.
    directed : False when the caller asserts ``A`` is symmetric (checked on
        construction from edges with ``symmetrize=True``); True otherwise.
    ids : int64[n] original vertex id of each row when the input ids were
        relabelled (non-contiguous ids), else None.
    vertex_weights : int64[n] or None: the weight each row counts for in the
        planner's balance (METIS vertex weights; e.g. memory per row for
        training from shares); None: the row's nonzeros.
    name : a label for tables and plans.

    ``Graph(indptr, indices, ...)`` keeps the caller's arrays when they are already int64 /
    float64, contiguous and sorted within rows (no copy, as scipy's ``csr_matrix((data, indices,
    indptr))``): the graph caches what it computes from them (:attr:`fingerprint`,
    :meth:`is_symmetric`), so treat them as read-only from then on, or pass copies.
    :meth:`from_scipy` and :meth:`from_edges` build arrays of their own.

    Examples
    --------
    >>> g = Graph.from_edges([0, 1, 2], [1, 2, 0], symmetrize=True)
    >>> g.n, g.nnz
    (3, 6)
    """

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray | None = None
    directed: bool = True
    ids: np.ndarray | None = None
    vertex_weights: np.ndarray | None = None
    name: str = "graph"
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    # ------------------------------------------------------------------ build
    def __post_init__(self):
        from ._args import check_bool
        if not isinstance(self.name, str):
            raise OptionError(f"name must be a string (a label for tables and plans), got "
                              f"{type(self.name).__name__}")
        object.__setattr__(self, "directed", check_bool("directed", self.directed, error=OptionError))
        indptr, indices = check_csr(self.indptr, self.indices)
        object.__setattr__(self, "indptr", indptr)
        object.__setattr__(self, "indices", indices)
        n = indptr.size - 1
        if self.data is not None:
            data = _numpy_of(self.data)
            if data.dtype.kind not in "biuf":     # a complex value would lose its imaginary part
                raise GraphFormatError(f"edge weights must be real numbers, got dtype {data.dtype}", field="data")
            data = np.ascontiguousarray(data, dtype=np.float64)
            if data.shape != indices.shape:
                raise GraphFormatError("data must have one value per nonzero", field="data")
            if not np.all(np.isfinite(data)):
                raise GraphFormatError("edge weights must be finite (found NaN or inf)", field="data")
            object.__setattr__(self, "data", data)
        if not _rows_sorted(indptr, indices):   # the canonical CSR (module doc): sorted within rows
            indices, data = _sorted_rows(indptr, indices, self.data)
            object.__setattr__(self, "indices", indices)
            object.__setattr__(self, "data", data)
        if self.ids is not None:
            ids = _int_array("ids", self.ids)
            if ids.shape != (n,):
                raise GraphFormatError("ids must have one entry per vertex", field="ids")
            _check_distinct_ids(ids)
            object.__setattr__(self, "ids", ids)
        if self.vertex_weights is not None:
            vw = _int_array("vertex_weights", self.vertex_weights)
            if vw.shape != (n,) or (vw.size and vw.min() < 0):
                raise GraphFormatError("vertex_weights must be n non-negative integers", field="vertex_weights")
            check_weight_total(vw)
            object.__setattr__(self, "vertex_weights", vw)

    @classmethod
    def from_scipy(cls, A: sp.spmatrix | sp.sparray, *, pattern: bool = False, **kw) -> "Graph":
        """Wrap a square scipy sparse matrix, or a dense 2-D array-like (copied, canonicalized;
        duplicates summed); its values must be real numbers."""
        from ._args import check_bool
        pattern = check_bool("pattern", pattern, error=OptionError)
        if not sp.issparse(A):
            if A is None or type(A).__module__.startswith("networkx"):
                hint = (" (a networkx graph: pass networkx.to_scipy_sparse_array(G))"
                        if A is not None else "")
                raise GraphFormatError(f"from_scipy takes a scipy sparse matrix or a dense 2-D array, got "
                                       f"{type(A).__name__}{hint}")
            A = _numpy_of(A)        # a dense torch tensor too (a sparse one is refused by name)
        if A.ndim != 2 or A.shape[0] != A.shape[1]:
            raise GraphFormatError(f"matrix must be square, got shape {A.shape}")
        if A.dtype.kind not in "biuf":
            raise GraphFormatError(f"matrix values must be real numbers, got dtype {A.dtype}", field="data")
        if A.dtype == np.float16:       # scipy.sparse has no float16
            A = A.astype(np.float32)
        A = sp.csr_matrix(A)            # a CSR input's own arrays, which are not summed / sorted in place:
        if not A.has_canonical_format:   # a copy first (a canonical one is copied once, below, by astype)
            A = A.copy()
            A.sum_duplicates()  # also sorts indices
        data = None if pattern else A.data.astype(np.float64)
        return cls(A.indptr.astype(np.int64), A.indices.astype(np.int64), data, **kw)

    @classmethod
    def from_edges(cls, src, dst, weights=None, n: int | None = None, *,
                   symmetrize: bool = False, self_loops: SelfLoops = "keep",
                   dedupe: bool = True, drop_isolated: bool = False,
                   relabel: bool = False, name: str = "graph",
                   source: str | None = None) -> "Graph":
        """Build a graph from edge arrays ``src[e] -> dst[e]`` (vectorized).

        Direction: edge ``e`` becomes the entry ``A[src[e], dst[e]] = weights[e]``
        (row ``src``, column ``dst``). In ``Z = A @ H`` row ``src`` therefore
        gathers ``H[dst]``: information flows from ``dst`` to ``src``. This is
        PyTorch Geometric's ``flow="target_to_source"`` for
        ``edge_index = [src, dst]``; for PyG's default flow (targets aggregate
        what sources send) use :meth:`from_edge_index`.

        Parameters
        ----------
        src, dst : integer vertex ids (any int dtype; 64-bit kept).
        weights : optional float edge weights (finite, >= 0).
        n : number of vertices; default ``max id + 1``. Ids must lie in [0, n).
        relabel : map the distinct ids (sorted) to 0..n'-1 and keep the
            original ids in :attr:`ids` (for non-contiguous ids).
        symmetrize, self_loops, dedupe, drop_isolated : see :meth:`normalize`.
        source : file name used in error messages.
        """
        from ._args import check_bool
        flags = {f: check_bool(f, v, error=OptionError) for f, v in (
            ("symmetrize", symmetrize), ("dedupe", dedupe), ("drop_isolated", drop_isolated), ("relabel", relabel))}
        symmetrize, dedupe, drop_isolated, relabel = flags.values()
        src = _as_int64("src", src, source)
        dst = _as_int64("dst", dst, source)
        if src.shape != dst.shape:
            raise GraphFormatError("src and dst must have the same length", source)
        w = None
        if n is not None:
            n = _check_n(n, source)
        if weights is not None:
            w = _as_weights(weights, source)
            if w.shape != src.shape:
                raise GraphFormatError("weights must have one value per edge", source, field="weight")
            _check_edge_weights(w, source, "weight")
        ids = None
        if relabel:
            ids, inv = np.unique(np.concatenate([src, dst]), return_inverse=True)
            src, dst = inv[: src.size].astype(np.int64), inv[src.size:].astype(np.int64)
            if n is not None and n != ids.size:
                raise GraphFormatError(f"n={n} given but the edges hold {ids.size} distinct ids", source)
            n = ids.size
        if src.size and min(src.min(), dst.min()) < 0:
            raise GraphFormatError("negative vertex id", source)
        top = int(max(src.max(), dst.max())) + 1 if src.size else 0
        if n is None:          # the largest id sets n: its row pointers checked against the budget first
            from ._budget import check_array_bytes
            check_array_bytes(top + 1, 1, 8, f"a graph of n = {top} vertices (the largest id + 1; its row "
                              f"pointers)", path=source, field="src" if int(src.max(initial=-1)) == top - 1 else "dst")
            n = top
        elif top > n:
            raise GraphFormatError(f"vertex id {top - 1} out of range [0, {n})", source)
        g = cls._from_coo(src, dst, w, n, dedupe=dedupe, ids=ids, name=name)
        return g.normalize(symmetrize=symmetrize, self_loops=self_loops, dedupe=dedupe,
                           drop_isolated=drop_isolated)

    @classmethod
    def from_edge_index(cls, edge_index, num_nodes: int | None = None, *, edge_weight=None,
                        flow: Literal["source_to_target", "target_to_source"] = "source_to_target",
                        name: str = "graph", source: str | None = None) -> "Graph":
        """Build ``A`` from a PyTorch Geometric ``edge_index`` so that ``Z = A @ H``
        is PyG's message passing with ``aggr="add"``.

        With the default ``flow="source_to_target"`` the edge
        ``edge_index[:, e] = (j, i)`` sends ``H[j]`` to target ``i``: the entry is
        ``A[i, j] = edge_weight[e]`` (row ``edge_index[1]``, column
        ``edge_index[0]``), so ``(A @ H)[i] = sum_e w_e H[j]`` exactly like
        ``MessagePassing`` returning ``edge_weight.view(-1, 1) * x_j``. With
        ``flow="target_to_source"`` it is the transpose (row ``edge_index[0]``).
        Duplicated edges are summed (PyG's scatter-add, as in ``GCNConv``):
        without ``edge_weight`` the result is a pattern matrix when every edge
        is distinct, else weighted with each entry's multiplicity. Self loops
        are kept as given (no normalization, no added loops).

        Parameters
        ----------
        edge_index : int array of shape (2, E): a torch tensor (any device) or
            a numpy array; vertex ids in ``[0, num_nodes)``.
        num_nodes : number of vertices n; default ``max id + 1`` (0 for no
            edges). Must be at least ``max id + 1``.
        edge_weight : optional float weights of shape (E,) (dimensionless
            multipliers of the messages), finite and >= 0. None: pattern
            matrix (all ones).
        flow : "source_to_target" (PyG's default) or "target_to_source".
        name : label of the graph; source : file name used in error messages.

        Raises
        ------
        GraphFormatError : wrong shape or dtype, ids out of range, a
            ``num_nodes`` below ``max id + 1``, non-finite or negative weights
            (the field is named: ``edge_index``, ``num_nodes`` or ``edge_weight``).

        Examples
        --------
        >>> g = Graph.from_edge_index(np.array([[0, 0], [1, 2]]), 3)  # 0 -> 1, 0 -> 2
        >>> g.to_scipy().toarray().astype(int).tolist()
        [[0, 0, 0], [1, 0, 0], [1, 0, 0]]
        """
        if flow not in ("source_to_target", "target_to_source"):
            raise OptionError(f"flow must be 'source_to_target' or 'target_to_source', not {flow!r}")
        ei = _numpy_of(edge_index)
        if ei.ndim != 2 or ei.shape[0] != 2:
            raise GraphFormatError(f"edge_index must have shape (2, E), got {tuple(ei.shape)}", source,
                                   field="edge_index")
        if ei.dtype.kind not in "iu":
            raise GraphFormatError(f"edge_index must hold integer vertex ids, got dtype {ei.dtype}", source,
                                   field="edge_index")
        if ei.dtype == np.uint64 and ei.size and int(ei.max()) >= 2 ** 63:
            e = int(np.flatnonzero((ei >= np.uint64(2 ** 63)).any(axis=0))[0])
            raise GraphFormatError(f"edge {e} has a vertex id of 2^63 or more ({ei[:, e].tolist()})", source,
                                   field="edge_index")
        ei = ei.astype(np.int64, copy=False)
        if ei.size and ei.min() < 0:
            e = int(np.flatnonzero((ei < 0).any(axis=0))[0])
            raise GraphFormatError(f"edge {e} has a negative vertex id ({ei[:, e].tolist()})", source,
                                   field="edge_index")
        top = int(ei.max()) + 1 if ei.size else 0
        if num_nodes is None:
            n = top
        else:
            nn_ = _numpy_of(num_nodes)
            if nn_.ndim != 0 or nn_.dtype.kind not in "iu" or int(nn_) < 0:
                raise GraphFormatError(f"num_nodes must be a non-negative integer, got {num_nodes!r}", source,
                                       field="num_nodes")
            n = int(nn_)
            if top > n:
                e = int(np.flatnonzero((ei >= n).any(axis=0))[0])
                raise GraphFormatError(f"edge {e} has vertex id {int(ei[:, e].max())} out of range "
                                       f"[0, {n}) (num_nodes = {n})", source, field="edge_index")
        w = None
        if edge_weight is not None:
            w = _numpy_of(edge_weight)
            if w.ndim == 2 and w.shape[1] == 1:
                w = w[:, 0]
            if w.shape != (ei.shape[1],):
                raise GraphFormatError(f"edge_weight must have shape ({ei.shape[1]},) (one per edge), got "
                                       f"{tuple(w.shape)}", source, field="edge_weight")
            if w.dtype.kind not in "fiub":
                raise GraphFormatError(f"edge_weight must be real numbers, got dtype {w.dtype}", source,
                                       field="edge_weight")
            w = w.astype(np.float64)
            _check_edge_weights(w, source, "edge_weight")
        row, col = (ei[1], ei[0]) if flow == "source_to_target" else (ei[0], ei[1])
        g = cls.from_edges(row, col, w, n, dedupe=True, name=name, source=source)
        if w is None and g.nnz != row.size:  # duplicates without weights: PyG adds them, so A counts them
            g = cls.from_edges(row, col, np.ones(row.size), n, dedupe=True, name=name, source=source)
        return g

    @classmethod
    def _from_coo(cls, r, c, d, n, *, dedupe, ids=None, name="graph", vertex_weights=None,
                  directed=True):
        """Canonical CSR from COO arrays. ``d`` None means pattern. With dedupe,
        scipy sums duplicates; without, a stable lexsort keeps every entry."""
        if dedupe:
            A = sp.csr_matrix((np.ones(r.size) if d is None else d, (r, c)), shape=(n, n))
            A.sum_duplicates()
            indptr, indices, data = A.indptr, A.indices, (None if d is None else A.data)
        else:
            order = np.lexsort((c, r))
            indices = c[order]
            data = None if d is None else d[order]
            indptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.bincount(r, minlength=n), out=indptr[1:])
        return cls(indptr.astype(np.int64), indices.astype(np.int64),
                   None if data is None else data.astype(np.float64), ids=ids, name=name,
                   vertex_weights=vertex_weights, directed=directed)

    # ------------------------------------------------------------- properties
    @property
    def n(self) -> int:
        """Number of vertices (rows)."""
        return self.indptr.size - 1

    @property
    def nnz(self) -> int:
        """Number of stored nonzeros (directed edges, self loops included)."""
        return int(self.indices.size)

    @property
    def row_nnz(self) -> np.ndarray:
        """int64[n]: nonzeros per row (out-degree; compute load of each row)."""
        return np.diff(self.indptr)

    @property
    def balance_weights(self) -> np.ndarray:
        """int64[n]: the planner's balance weight of each row — its ``vertex_weights`` when the graph
        has them, else its nonzeros — at least 1 (an empty row still owns a row of H). Every engine,
        model, refinement and ε-limit balances these; the compute load counts row nnz alone (on a
        graph without vertex weights the default pipeline keeps both limits:
        partplan.partition.pipeline.auto.compute_limit_applies). Computed on each call (not
        cached: n int64 more per graph)."""
        w = self.row_nnz if self.vertex_weights is None else self.vertex_weights
        return np.maximum(w, 1).astype(np.int64, copy=False)

    def with_balance(self, balance) -> "Graph":
        """This graph with the balance weights ``balance`` names (:attr:`balance_weights`, what every
        partitioner's ε-limit bounds): "nnz" (each row's nonzeros, at least 1: the SpMM's compute;
        any vertex weights dropped), "rows" (1 per row: the rows of H a rank holds), or n
        non-negative integers, one per vertex. The pattern and values are shared, not copied.

        >>> g = Graph.from_edges([0, 0, 1], [1, 2, 2], n=3)
        >>> g.with_balance("rows").balance_weights.tolist(), g.with_balance("nnz").balance_weights.tolist()
        ([1, 1, 1], [2, 1, 1])
        """
        import dataclasses
        if isinstance(balance, str):
            if balance == "nnz":
                return self if self.vertex_weights is None else dataclasses.replace(self, vertex_weights=None,
                                                                                     _cache={})
            if balance == "rows":
                return dataclasses.replace(self, vertex_weights=np.ones(self.n, dtype=np.int64), _cache={})
            raise OptionError(f"balance must be 'nnz', 'rows' or one integer weight per vertex, not {balance!r}")
        given = np.asarray(_numpy_of(balance))
        try:     # the constructor's rule for vertex weights: integers, or floats holding whole numbers
            w = _int_array("balance", given) if given.dtype.kind in "biuf" else None
        except GraphFormatError as exc:
            raise OptionError(str(exc)) from None
        if w is None or w.shape != (self.n,):
            raise OptionError(f"balance: one non-negative integer weight per vertex ({self.n}), got "
                              f"{given.dtype} {tuple(given.shape)}")
        if w.size and w.min() < 0:
            bad = int(np.argmin(w))
            raise OptionError(f"balance[{bad}] = {w[bad]}: a weight must be non-negative")
        return dataclasses.replace(self, vertex_weights=w, _cache={})

    @property
    def rows(self) -> np.ndarray:
        """int64[nnz]: row id of every nonzero (COO row array), cached."""
        if "rows" not in self._cache:
            self._cache["rows"] = np.repeat(np.arange(self.n, dtype=np.int64), self.row_nnz)
        return self._cache["rows"]

    @property
    def fingerprint(self) -> str:
        """sha256 hex of (n, indptr, indices) as little-endian int64: identifies
        the sparsity pattern a plan was built for (values are not hashed)."""
        if "fp" not in self._cache:
            h = hashlib.sha256()
            h.update(np.int64(self.n).astype("<i8").tobytes())
            h.update(self.indptr.astype("<i8", copy=False).tobytes())
            h.update(self.indices.astype("<i8", copy=False).tobytes())
            self._cache["fp"] = h.hexdigest()
        return self._cache["fp"]

    @property
    def matrix_fingerprint(self) -> str:
        """sha256 hex identifying the matrix itself, values included: equal to
        :attr:`fingerprint` when the graph is a pattern or every value is 1
        (the same matrix as the pattern), else a hash of the pattern
        fingerprint and the values (little-endian float64, CSR order). Two
        graphs with one pattern and different weights (a weighted and an
        unweighted reading of one file, a multigraph and its simple graph)
        differ; plans record it as ``graph.source_fingerprint``."""
        if "mfp" not in self._cache:
            d = self.data
            if d is None or bool(np.all(d == 1.0)):
                self._cache["mfp"] = self.fingerprint
            else:
                h = hashlib.sha256(b"partplan-matrix-v1:")
                h.update(self.fingerprint.encode())
                h.update(np.asarray(d, dtype="<f8").tobytes())
                self._cache["mfp"] = h.hexdigest()
        return self._cache["mfp"]

    def to_scipy(self) -> sp.csr_matrix:
        """The matrix as scipy CSR (ones where the graph is a pattern)."""
        data = self.data if self.data is not None else np.ones(self.nnz)
        return sp.csr_matrix((data, self.indices, self.indptr), shape=(self.n, self.n))

    def transpose(self) -> "Graph":
        """``A^T`` (the backward-pass matrix of a GCN layer)."""
        if "T" not in self._cache:
            At = self.to_scipy().T.tocsr()
            At.sort_indices()
            self._cache["T"] = Graph(At.indptr.astype(np.int64), At.indices.astype(np.int64),
                                     None if self.data is None else At.data, directed=self.directed,
                                     ids=self.ids, vertex_weights=self.vertex_weights,
                                     name=self.name + "^T")
        return self._cache["T"]

    def is_symmetric(self) -> bool:
        """True when the sparsity pattern equals its transpose. Cached; known
        without a check for graphs built symmetrized; otherwise one O(nnz)
        pass (:func:`partplan._kernels.csr_pattern_is_symmetric`, no
        transpose is built) when numba is available, else via the transpose."""
        if "sym" not in self._cache:
            from ._kernels import HAVE_NUMBA, csr_pattern_is_symmetric

            if "T" in self._cache or not HAVE_NUMBA:
                T = self.transpose()
                sym = np.array_equal(self.indptr, T.indptr) and np.array_equal(self.indices, T.indices)
            else:
                sym = csr_pattern_is_symmetric(self.indptr, self.indices)
            self._cache["sym"] = bool(sym)
        return self._cache["sym"]

    def has_self_loops(self) -> bool:
        return bool(np.any(self.indices == self.rows))

    # ---------------------------------------------------------- normalization
    def normalize(self, *, symmetrize: bool = False, self_loops: SelfLoops = "keep",
                  dedupe: bool = True, drop_isolated: bool = False) -> "Graph":
        """Return a normalized copy.

        symmetrize : pattern union of ``A`` and ``A^T``, result marked undirected.
            With dedupe, the weight of {u, v} is max(w_uv, w_vu), so
            symmetrizing twice (or a symmetric graph) changes nothing; without
            dedupe every entry is mirrored (a multigraph keeps its multiplicity).
        self_loops : "keep", "add" (GCN's A + I: set every diagonal entry,
            weight 1 where absent) or "remove".
        dedupe : collapse duplicate entries (weights summed).
        drop_isolated : remove vertices with no edge other than a self loop;
            :attr:`ids` then maps new rows to the old ids.
        """
        if self_loops not in ("keep", "add", "remove"):
            raise OptionError(f"self_loops must be 'keep', 'add' or 'remove', not {self_loops!r}")
        symmetrize, dedupe, drop_isolated = (check_bool(name, v) for name, v in (
            ("symmetrize", symmetrize), ("dedupe", dedupe), ("drop_isolated", drop_isolated)))
        pattern = self.data is None
        A = self.to_scipy()
        if dedupe:
            A.sum_duplicates()
        A = A.tocoo()
        r, c, d = A.row.astype(np.int64), A.col.astype(np.int64), A.data
        if symmetrize:
            off = r != c
            r, c, d = np.concatenate([r, c[off]]), np.concatenate([c, r[off]]), np.concatenate([d, d[off]])
            if pattern:
                d = np.ones(r.size)
            elif dedupe:
                # weight of {u, v} = max(w_uv, w_vu): idempotent, so a graph that is
                # already symmetric keeps its weights (no doubling)
                order = np.lexsort((c, r))
                r, c, d = r[order], c[order], d[order]
                first = np.ones(r.size, dtype=bool)
                first[1:] = (r[1:] != r[:-1]) | (c[1:] != c[:-1])
                starts = np.flatnonzero(first)
                d = np.maximum.reduceat(d, starts) if starts.size else d
                r, c = r[starts], c[starts]
        if self_loops == "remove":
            keep = r != c
            r, c, d = r[keep], c[keep], d[keep]
        elif self_loops == "add":
            has = np.zeros(self.n, dtype=bool)
            has[r[r == c]] = True
            miss = np.flatnonzero(~has)
            r, c, d = np.concatenate([r, miss]), np.concatenate([c, miss]), np.concatenate([d, np.ones(miss.size)])
        ids, vw = self.ids, self.vertex_weights
        n = self.n
        if drop_isolated:
            off = r != c
            used = np.zeros(n, dtype=bool)
            used[r[off]] = True
            used[c[off]] = True
            keep_e = used[r] & used[c]
            new_id = np.cumsum(used) - 1
            r, c, d = new_id[r[keep_e]], new_id[c[keep_e]], d[keep_e]
            old = np.flatnonzero(used)
            ids = old if ids is None else ids[old]
            vw = None if vw is None else vw[old]
            n = old.size
        g = Graph._from_coo(r, c, None if pattern else d, n, dedupe=dedupe, ids=ids,
                            name=self.name, vertex_weights=vw,
                            directed=self.directed and not symmetrize)
        if symmetrize and dedupe:     # symmetric by construction: no check needed later
            g._cache["sym"] = True
        return g

    def __repr__(self) -> str:
        kind = "directed" if self.directed else "undirected"
        w = "pattern" if self.data is None else "weighted"
        return f"Graph({self.name!r}, n={self.n}, nnz={self.nnz}, {kind}, {w})"
