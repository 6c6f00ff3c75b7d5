"""CommStats: every communication figure of one SpMM exchange, and ``analyze``."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..graph import Graph, check_graph
from ..errors import PartitionError
from ..parts import as_partition
from .cost import DEFAULT_ALPHA_S, DEFAULT_BETA_S_PER_BYTE, alpha_beta_time, check_cost, dtype_bytes, dtype_name
from .volume1d import check_volume_matrix_size, needed_pairs, volume_matrix


def imbalance(x: np.ndarray) -> float:
    """max / mean − 1 (0 for a perfectly balanced or all-zero vector)."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean() if x.size else 0.0
    return float(x.max() / mean - 1.0) if mean > 0 else 0.0


def per_part_summary(k: int, n: int, nnz: int, send, recv, compute_load, part_sizes=None) -> dict:
    """The figures of :meth:`CommStats.summary`, under its names, that per-part counts give (rows
    of H sent / received per part, row nonzeros per part, and with ``part_sizes`` rows per part):
    what is left where the k × k volume matrix is not counted.

    >>> per_part_summary(2, 4, 8, [1, 3], [2, 2], [2, 6])   # doctest: +NORMALIZE_WHITESPACE
    {'k': 2, 'n': 4, 'nnz': 8, 'total_volume': 4, 'max_send': 3, 'max_recv': 2, 'mean_volume': 2.0,
     'send_imbalance': 0.5, 'recv_imbalance': 0.0, 'compute_imbalance': 0.5, 'max_compute_load': 6}
    """
    send, recv = np.asarray(send, np.int64), np.asarray(recv, np.int64)
    load = np.asarray(compute_load, np.int64)
    out = {"k": int(k), "n": int(n), "nnz": int(nnz), "total_volume": int(send.sum()),
           "max_send": int(send.max(initial=0)), "max_recv": int(recv.max(initial=0)),
           "mean_volume": float(send.sum()) / int(k), "send_imbalance": imbalance(send),
           "recv_imbalance": imbalance(recv), "compute_imbalance": imbalance(load)}
    if part_sizes is not None:
        out["size_imbalance"] = imbalance(np.asarray(part_sizes, np.int64))
    out["max_compute_load"] = int(load.max(initial=0))
    return out


class PerRankVolume:
    """``send`` / ``recv`` (int64[p]: rows each rank sends / receives) of a
    class holding ``volume`` (int64[p, p], rows from rank q (row) to rank r
    (column)); shared by :class:`CommStats` and the routed plans' stats."""

    @property
    def send(self) -> np.ndarray:
        """int64[p]: rows each rank sends."""
        return self.volume.sum(axis=1)

    @property
    def recv(self) -> np.ndarray:
        """int64[p]: rows each rank receives."""
        return self.volume.sum(axis=0)


@dataclass
class CommStats(PerRankVolume):
    """Communication of one 1D row-wise SpMM ``Z = A @ H`` (forward) and, when
    A is not symmetric, of the backward ``A^T @ G`` (:attr:`backward`).

    Volumes are in rows of H (multiply by ``f · dtype_bytes`` for bytes);
    messages count (sender, receiver) pairs with non-zero volume; compute load
    counts nonzeros of A per part. Imbalance = max / mean − 1.
    """

    k: int
    n: int
    nnz: int
    f: int
    dtype: str
    volume: np.ndarray            # int64[k, k]: rows from q (row) to r (column)
    part_sizes: np.ndarray        # int64[k]: rows owned
    compute_load: np.ndarray      # int64[k]: nonzeros of A per part
    edge_cut: int                 # nonzeros a_ij with part[i] != part[j] (NOT volume)
    alpha: float = DEFAULT_ALPHA_S
    beta: float = DEFAULT_BETA_S_PER_BYTE
    backward: "CommStats | None" = None
    name: str = ""
    extra: dict = field(default_factory=dict)

    # derived (send / recv: PerRankVolume) -------------------------------------
    @property
    def total_volume(self) -> int:
        return int(self.volume.sum())

    @property
    def max_send(self) -> int:
        return int(self.send.max())

    @property
    def max_recv(self) -> int:
        return int(self.recv.max())

    @property
    def send_messages(self) -> np.ndarray:
        return np.count_nonzero(self.volume, axis=1)

    @property
    def recv_messages(self) -> np.ndarray:
        return np.count_nonzero(self.volume, axis=0)

    @property
    def messages(self) -> int:
        return int(np.count_nonzero(self.volume))

    @property
    def oblivious_recv(self) -> np.ndarray:
        """int64[k]: rows each part would receive under sparsity-oblivious 1D
        (CAGNET): the whole block H_q from every part q it needs anything from."""
        return (self.volume > 0).T.astype(np.int64) @ self.part_sizes

    @property
    def oblivious_volume(self) -> int:
        return int(self.oblivious_recv.sum())

    @property
    def row_bytes(self) -> int:
        """Bytes per row of H: f · dtype size."""
        return self.f * dtype_bytes(self.dtype)

    @property
    def rank_time(self) -> np.ndarray:
        """float64[k]: α-β estimate of each rank's seconds in the exchange."""
        return alpha_beta_time(self.send_messages, self.recv_messages, self.send * self.row_bytes,
                               self.recv * self.row_bytes, self.alpha, self.beta)

    @property
    def time_estimate(self) -> float:
        """Seconds of the exchange: max over ranks of α·msgs + β·bytes."""
        return float(self.rank_time.max())

    def summary(self) -> dict:
        """Scalar figures (JSON-ready)."""
        rb = self.row_bytes
        send, recv = self.send, self.recv
        return {
            "k": self.k, "n": self.n, "nnz": self.nnz, "f": self.f, "dtype": self.dtype,
            "total_volume": self.total_volume,
            "max_send": self.max_send, "max_recv": self.max_recv,
            "mean_volume": self.total_volume / self.k,
            "send_imbalance": imbalance(send), "recv_imbalance": imbalance(recv),
            "messages": self.messages,
            "max_send_messages": int(self.send_messages.max()),
            "max_recv_messages": int(self.recv_messages.max()),
            "compute_imbalance": imbalance(self.compute_load),
            "size_imbalance": imbalance(self.part_sizes),
            "max_compute_load": int(self.compute_load.max()),
            "edge_cut": self.edge_cut,
            "oblivious_volume": self.oblivious_volume,
            "oblivious_max_recv": int(self.oblivious_recv.max()),
            "total_bytes": self.total_volume * rb,
            "max_send_bytes": self.max_send * rb, "max_recv_bytes": self.max_recv * rb,
            "alpha_s": self.alpha, "beta_s_per_byte": self.beta,
            "time_estimate_s": self.time_estimate,
        }

    def to_dict(self, arrays: bool = True) -> dict:
        """All figures; with ``arrays`` also per-part lists and the k×k matrix."""
        d = {"name": self.name, **self.summary()}
        if arrays:
            d.update(send=self.send.tolist(), recv=self.recv.tolist(),
                     send_messages=self.send_messages.tolist(), recv_messages=self.recv_messages.tolist(),
                     compute_load=self.compute_load.tolist(), part_sizes=self.part_sizes.tolist(),
                     volume_matrix=self.volume.tolist())
        d["backward"] = None if self.backward is None else self.backward.to_dict(arrays)
        if self.extra:
            d["extra"] = self.extra
        return d

    def table(self) -> str:
        """A human-readable two-column table of :meth:`summary`."""
        alone = " (decoupled owners; backward not counted)" if self.extra.get("ownership") == "decoupled" \
            else " (= backward, A symmetric)"
        rows = [("pass", "forward A·H" + ("" if self.backward else alone))]
        rows += [(k, _fmt(v)) for k, v in self.summary().items()]
        if self.backward is not None:
            b = self.backward.summary()
            rows += [("backward " + k, _fmt(b[k])) for k in
                     ("total_volume", "max_send", "max_recv", "messages", "time_estimate_s")]
        w = max(len(r[0]) for r in rows)
        return "\n".join(f"{a:<{w}}  {b}" for a, b in rows)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _comm_stats(g: Graph, part: np.ndarray, k: int, vol: np.ndarray, cut: int | None, f: int, dtype: str,
                alpha: float, beta: float, name: str, extra: dict | None = None) -> CommStats:
    """The one place a CommStats is made: compute load (row nnz) and sizes from
    ``part``, the volume matrix as counted by the caller."""
    if cut is None:
        cut = int(np.count_nonzero(part[g.rows] != part[g.indices]))
    load = np.bincount(part, weights=g.row_nnz, minlength=k).astype(np.int64)
    sizes = np.bincount(part, minlength=k).astype(np.int64)
    return CommStats(k=k, n=g.n, nnz=g.nnz, f=f, dtype=dtype_name(dtype), volume=vol, part_sizes=sizes,
                     compute_load=load, edge_cut=int(cut), alpha=alpha, beta=beta, name=name,
                     extra=dict(extra or {}))


def _stats_1d(g: Graph, part: np.ndarray, k: int, f: int, dtype: str, alpha: float, beta: float,
              name: str, vol: np.ndarray | None = None) -> CommStats:
    from .._kernels import HAVE_NUMBA, symmetric_volume

    check_volume_matrix_size(k)
    if vol is not None:   # counted once by the caller (partition()'s stages hand it on)
        cut = None
    elif HAVE_NUMBA and g.is_symmetric():   # one sequential pass, no n×k mask (column j = row j)
        vol, cut = symmetric_volume(g.indptr, g.indices, part.astype(np.int32), k)  # half the cache
    else:
        vol, _ = volume_matrix(g.indptr, g.indices, part, k)
        cut = None
    return _comm_stats(g, part, k, vol, cut, f, dtype, alpha, beta, name)


def analyze_owned(graph: Graph, part, owner, k: int | None = None, *, f: int = 128, dtype: str = "float32",
                  alpha: float = DEFAULT_ALPHA_S, beta: float = DEFAULT_BETA_S_PER_BYTE,
                  name: str = "", backward: bool = False) -> CommStats:
    """Exact forward exchange of 1D SpMM when row ``H[j]`` is held by part
    ``owner[j]`` (decoupled ownership) instead of ``part[j]``: ``H[j]`` goes
    from ``owner[j]`` to every other part with a row reading column j —
    exactly what the plan sends (a part is not sent ``H[j]`` just because it
    computes row j). Compute load from ``part``; ``extra["ownership"] =
    "decoupled"``. ``backward``: also count the plan's backward pass, ``A^T @ G`` with each
    row's own part sending (the builder plans it conformal). ``owner`` is not checked against the
    connectivity sets here (:func:`partplan.metrics.ownership.owner_stats` does).

    >>> import numpy as np
    >>> from partplan import Graph
    >>> g = Graph.from_edges([1, 2], [0, 0], n=3)        # rows 1 and 2 read column 0
    >>> analyze_owned(g, np.array([0, 1, 2]), np.array([1, 1, 2]), 3).volume.tolist()
    [[0, 0, 0], [0, 0, 1], [0, 0, 0]]
    """
    check_graph(graph)
    f = check_cost(f, dtype, alpha, beta)
    part, k = as_partition(part, graph.n, k)
    owner, _ = as_partition(owner, graph.n, k, source="owner")
    check_volume_matrix_size(k)
    j, r = needed_pairs(graph.indptr, graph.indices, part, k, graph.n)   # (column, reading part)
    q = owner[j]
    off = q != r
    vol = np.bincount(q[off] * k + r[off], minlength=k * k).reshape(k, k).astype(np.int64)
    st = _comm_stats(graph, part, k, vol, None, f, dtype, alpha, beta, name, {"ownership": "decoupled"})
    if backward:     # the plan's backward program: A^T with the rows' own parts (owners send forward only)
        st.backward = _stats_1d(graph.transpose(), part, k, f, dtype, alpha, beta, name + " (backward)")
    return st


def analyze(graph: Graph, part, k: int | None = None, *, f: int = 128, dtype: str = "float32",
            alpha: float = DEFAULT_ALPHA_S, beta: float = DEFAULT_BETA_S_PER_BYTE,
            backward: bool | None = None, name: str = "", volume: np.ndarray | None = None) -> CommStats:
    """Exact communication of 1D row-wise SpMM for ``part``.

    Parameters
    ----------
    graph : the matrix A.
    part : int[n], part (rank) of each row, in [0, k).
    k : number of parts; default max(part)+1.
    f : feature width (columns of H); dtype: its element type. Used for bytes.
    alpha, beta : α-β model (seconds per message, seconds per byte).
    backward : also analyze ``A^T @ G``; default: only when A is not symmetric
        (for symmetric A it is identical).
    volume : int64[k, k], the forward volume matrix of ``part`` when the caller
        has counted it already (:func:`partplan.metrics.volume1d.volume_matrix`);
        it is used as given (rows of H sent from part q to part r).

    Examples
    --------
    >>> import numpy as np
    >>> from partplan import Graph, analyze
    >>> g = Graph.from_edges([0, 1, 2], [1, 2, 3], symmetrize=True)   # path 0-1-2-3
    >>> s = analyze(g, np.array([0, 0, 1, 1]))
    >>> s.total_volume, s.max_send, s.messages
    (2, 1, 2)

    ``part`` may also be a partition result (:func:`partplan.partition`'s
    ``Partition``, anything with ``part`` and ``k``) of a 1D layout.
    """
    check_graph(graph)
    f = check_cost(f, dtype, alpha, beta)
    if backward is not None:
        from .._args import check_bool
        backward = check_bool("backward", backward)
    if not isinstance(part, np.ndarray) and hasattr(part, "part") and hasattr(part, "k"):
        fp = getattr(part, "graph_fingerprint", None)
        if fp and fp != graph.fingerprint:    # as the plan builder: its figures would be another graph's
            raise PartitionError(f"the partition was computed for another graph (fingerprint {fp[:16]}…, "
                                 f"graph {graph.name!r} has {graph.fingerprint[:16]}…)")
        if getattr(part, "layout_params", None):   # 1.5D / 2D: its .part holds row blocks, not ranks
            raise PartitionError(f"analyze counts 1D row-wise exchange; this partition's layout is "
                                 f"{getattr(part, 'layout', '?')!r} (its own .layout_stats holds that layout's "
                                 f"figures)")
        if k is not None and k != part.k:
            raise PartitionError(f"k={k} given with a partition into {part.k} parts (leave k out: the "
                                 f"partition's own is used)")
        k = int(part.k)
        owner = getattr(part, "owner", None)
        if owner is not None:   # decoupled: its owners send the rows of H, not the rows' parts
            return analyze_owned(graph, part.part, owner, k, f=f, dtype=dtype, alpha=alpha, beta=beta, name=name,
                                 backward=backward if backward is not None else not graph.is_symmetric())
        part = part.part
    part, k = as_partition(part, graph.n, k)
    if volume is not None:
        volume = _checked_volume(volume, k)
    st = _stats_1d(graph, part, k, f, dtype, alpha, beta, name, volume)
    if backward is None:
        backward = not graph.is_symmetric()
    if backward:
        st.backward = _stats_1d(graph.transpose(), part, k, f, dtype, alpha, beta, name + " (backward)")
    return st


def _checked_volume(volume, k: int) -> np.ndarray:
    """A caller's precounted forward volume matrix: int64[k, k] of non-negative integers with a
    zero diagonal (a part reads its own rows locally), or one PartitionError naming it."""
    a = np.asarray(volume)
    if a.shape != (k, k):
        raise PartitionError(f"volume matrix must be {k}x{k}, got shape {a.shape}")
    if a.dtype.kind not in "iu" or (a.size and int(a.min()) < 0) or np.diagonal(a).any():
        raise PartitionError(f"volume matrix must hold non-negative integers (rows of H) with a zero diagonal, "
                             f"got dtype {a.dtype}" + (f", min {a.min()}, diagonal sum {np.trace(a)}" if a.size else ""))
    return a.astype(np.int64, copy=False)
