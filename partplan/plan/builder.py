"""Build a communication :class:`Plan` from a graph and a partition (vectorized).

One primitive, :func:`_exchange`, plans every layout. Each nonzero ``a_ij`` of
the matrix is given the rank (``unit``) that multiplies it, and each (rank,
column j) pair the rank that holds ``H[j]`` for it (``src``). From that:

* halo of a rank = distinct columns it reads but does not hold, ordered by
  source group-rank then global id (the order ``all_to_all_single`` delivers
  them in, so received rows land straight in the ghost tail of ``H_ext``);
* send lists of a rank = its local row positions each destination needs,
  grouped by destination group-rank, ascending global id inside a group
  (matching the receiver's halo order);
* local CSR = the rank's nonzeros, rows in ascending global id, columns renumbered
  into ``[held rows | halo]``. Within a row the nonzeros keep the global CSR
  order (ascending global column), so a local SpMM sums in exactly the order
  scipy's global ``A @ H`` does: 1D replay is bitwise identical.

Layouts (ranks ``p``):

* **1d** — rank r multiplies rows ``part == r``; ``H[j]`` is held by
  ``owner[j]`` (= ``part[j]`` when conformal).
* **1.5d** (c replicas, ``p = k·c``, rank ``i·c + l``) — replica l of block i
  multiplies the nonzeros whose column block q has ``(q − i) mod c == l``, reads
  ``H_q`` from replica ``(q, l)`` (its a2a group is the column group of replica
  index l), then the c replicas of block i all-reduce (sum) their partial rows —
  the schedule :func:`partplan.metrics.analyze_15d` counts.
* **2d** (``R × C = k`` grid, rank ``a·C + b``) — the nonzero ``a_ij`` is
  multiplied on (grid row of ``part[i]``, grid column of ``part[j]``); expand in
  the column group, local SpMM, fold the partial rows in the row group to
  ``part[i]`` — the schedule :func:`partplan.metrics.analyze_2d` counts.

Sorting is done by numpy (``argsort(kind="stable")`` — radix sort for small
integer keys), deduplication by a length-n bit mask or ``np.unique``, renumbering
by one scratch map of length n; the only Python loops run over ranks.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import BackendUnavailableError, PlanError
from ..graph import Graph
from ..metrics.cost import DEFAULT_ALPHA_S, DEFAULT_BETA_S_PER_BYTE, dtype_bytes
from ..metrics.layouts import LayoutStats
from ..metrics.stats import CommStats
from ..parts import as_partition
from .schema import FORMAT_VERSION, LAYOUTS



# ----------------------------------------------------------------------------- data classes
@dataclass
class RankPlan:
    """Everything rank ``rank`` needs, as named numpy arrays (see plans/SCHEMA.md).

    ``arrays`` maps field name → 1-D numpy array (int64, or float64 for
    ``data``/``bwd_data``); ``meta`` holds the shard's scalars (rank, ranks,
    layout, sizes). Arrays are read-only views of a memory map when loaded.
    Fields are also attributes: ``rp.send_idx``.
    """

    rank: int
    meta: dict
    arrays: dict[str, np.ndarray]

    def __getattr__(self, name: str) -> np.ndarray:
        arrays = self.__dict__.get("arrays")
        if arrays is not None and name in arrays:
            return arrays[name]
        raise AttributeError(name)

    def has(self, name: str) -> bool:
        return name in self.arrays

    @property
    def n_local(self) -> int:
        """Rows of H held by this rank (the head of ``H_ext``)."""
        return int(self.arrays["h_ids"].size)

    @property
    def n_halo(self) -> int:
        """Ghost rows received per forward exchange (the tail of ``H_ext``)."""
        return int(self.arrays["halo_ids"].size)

    @property
    def n_rows(self) -> int:
        """Rows of the local CSR (rows of Z, or partial rows, computed here)."""
        return int(self.arrays["row_ids"].size)

    def local_matrix(self, prefix: str = ""):
        """The local block as scipy CSR, shape (n_rows, n_local + n_halo)."""
        import scipy.sparse as sp
        a = self.arrays
        indptr, indices = a[prefix + "indptr"], a[prefix + "indices"]
        data = a[prefix + "data"] if (prefix + "data") in a else np.ones(indices.size)
        ncols = self.n_local + a[prefix + "halo_ids"].size if prefix == "" else \
            a["row_ids"].size + a[prefix + "halo_ids"].size
        return sp.csr_matrix((data, indices, indptr), shape=(indptr.size - 1, ncols))

    def summary(self) -> dict:
        a = self.arrays
        d = {"rank": self.rank, "rows": self.n_rows, "held": self.n_local, "halo": self.n_halo,
             "nnz": int(a["indices"].size), "send_rows": int(a["send_counts"].sum()),
             "recv_rows": int(a["recv_counts"].sum()),
             "send_msgs": int(np.count_nonzero(a["send_counts"])),
             "recv_msgs": int(np.count_nonzero(a["recv_counts"]))}
        if "fold_send_counts" in a:
            d["fold_send_rows"] = int(a["fold_send_counts"].sum())
            d["fold_recv_rows"] = int(a["fold_recv_counts"].sum())
        if "bwd_send_counts" in a:
            d["bwd_send_rows"] = int(a["bwd_send_counts"].sum())
            d["bwd_recv_rows"] = int(a["bwd_recv_counts"].sum())
        return d


@dataclass
class Plan:
    """A whole plan: the manifest, every rank's :class:`RankPlan`, and the global
    arrays (``part``, ``owner`` or None, ``perm`` old → new id, ``stats``)."""

    manifest: dict
    ranks: list[RankPlan]
    part: np.ndarray
    owner: np.ndarray | None = None
    perm: np.ndarray | None = None
    stats: Any = None
    timings: dict = field(default_factory=dict)

    @property
    def p(self) -> int:
        return len(self.ranks)

    def __getitem__(self, r: int) -> RankPlan:
        return self.ranks[r]


# ----------------------------------------------------------------------------- primitive
def _sort_small(keys: np.ndarray, bound: int) -> np.ndarray:
    """Stable argsort of non-negative integer keys < bound (radix sort when they
    fit in 16 bits — numpy picks radix sort for small integer dtypes)."""
    if bound <= np.iinfo(np.uint16).max:
        return np.argsort(keys.astype(np.uint16), kind="stable")
    if bound <= np.iinfo(np.uint32).max:
        return np.argsort(keys.astype(np.uint32), kind="stable")
    return np.argsort(keys, kind="stable")


def _bounds(sorted_keys: np.ndarray, p: int) -> np.ndarray:
    """int64[p + 1]: start of each value 0..p-1 in a sorted array."""
    return np.searchsorted(sorted_keys, np.arange(p + 1)).astype(np.int64)


def _exchange(n: int, p: int, rows: np.ndarray, cols: np.ndarray, data: np.ndarray | None,
              unit: np.ndarray, src_of, held: list[np.ndarray], hold_pos: np.ndarray,
              row_pos: np.ndarray | None, row_lists: list[np.ndarray] | None, grank, G: int,
              members, prefix: str = "", order=None, row_nnz: np.ndarray | None = None
              ) -> tuple[list[dict], np.ndarray]:
    """Plan one SpMM exchange.

    rows, cols, data : the nonzeros in global CSR order (rows ascending, then cols).
    unit : int64[nnz], rank multiplying each nonzero.
    src_of(u, j) : ranks holding H[j] for reader rank u (scalar u, array j).
    held : per-rank global ids of the H rows held (ascending) = head of H_ext.
    hold_pos : int64[n], position of row j among its holder's rows (the same on
        every replica in 1.5D).
    row_pos, row_lists : the local CSR rows of each rank (row_lists[u], global ids
        ascending) and each row's position in its list; None = the distinct rows
        of each rank's nonzeros.
    grank(r) : group-rank of global rank(s) r inside the a2a group; G its size;
        members(u) : global ranks of u's a2a group by group-rank.
    order : (perm, bounds) putting the nonzeros in unit order (None: computed
        here by a stable sort of ``unit``; perm None: already in unit order).
    row_nnz : nonzeros of each row when every nonzero of a row belongs to the
        same unit (1d): the local indptr is then a prefix sum, not a count.
    Returns (per-rank dict of arrays, int64[p, p] rows sent q → r).

    Memory stays O(n + nnz): per rank one scratch map of length n (columns →
    local ids) replaces any p × n table, so a rank's work is O(nnz_r + n) with a
    bit mask or O(nnz_r log nnz_r) with ``np.unique`` when n ≫ nnz_r.
    """
    # ---- order nonzeros by unit, stable: rows ascending, global CSR order inside rows
    if order is None:
        order = (_sort_small(unit, p), _unit_bounds(unit, p))
    perm, ub = order
    take = (lambda a: a) if perm is None else (lambda a: a[perm])
    c_s = take(cols)
    r_s = take(rows) if row_nnz is None else None
    d_s = None if data is None else take(data)
    seen = np.zeros(n, dtype=bool)
    colmap = np.zeros(n, dtype=np.int64)
    out, h_src, h_j = [], [], []
    for u in range(p):
        a0, a1 = ub[u], ub[u + 1]
        c = c_s[a0:a1]
        need = _distinct_cols(c, seen)
        src = src_of(u, need)
        rem = src != u
        rsrc, rj = src[rem], need[rem]
        g = grank(rsrc)
        o = _sort_small(g, G)                       # by source group-rank, then id
        halo, hsrc, hg = rj[o], rsrc[o], g[o]
        h_ids = held[u]
        nl = h_ids.size
        colmap[h_ids] = np.arange(nl, dtype=np.int64)
        colmap[halo] = nl + np.arange(halo.size, dtype=np.int64)
        lcol = colmap[c]
        if row_nnz is not None:
            rl = np.ascontiguousarray(row_lists[u], dtype=np.int64)
            indptr = np.zeros(rl.size + 1, dtype=np.int64)
            np.cumsum(row_nnz[rl], out=indptr[1:])
        else:
            r = r_s[a0:a1]
            if row_lists is None:
                rl = _distinct_cols(r, seen)
                colmap[rl] = np.arange(rl.size, dtype=np.int64)
                lr = colmap[r]
            else:
                rl = np.ascontiguousarray(row_lists[u], dtype=np.int64)
                lr = row_pos[r]
            indptr = np.zeros(rl.size + 1, dtype=np.int64)
            np.cumsum(np.bincount(lr, minlength=rl.size), out=indptr[1:])
        d = {prefix + "row_ids": rl, prefix + "halo_ids": halo, prefix + "indptr": indptr,
             prefix + "indices": lcol,
             prefix + "recv_counts": np.bincount(hg, minlength=G).astype(np.int64)}
        if d_s is not None:
            d[prefix + "data"] = d_s[a0:a1]
        out.append(d)
        h_src.append(hsrc)
        h_j.append(halo)
    # ---- send side. The halos are concatenated by receiver (ascending rank, hence
    # ascending group-rank) and inside a receiver by (source, id): a stable sort
    # by source alone yields each sender's rows grouped by destination, ids ascending.
    hs = np.concatenate(h_src) if h_src else np.zeros(0, np.int64)
    hj = np.concatenate(h_j) if h_j else np.zeros(0, np.int64)
    sj = hj[_sort_small(hs, p)]
    sb = _unit_bounds(hs, p)
    vol = np.stack([np.bincount(x, minlength=p) for x in h_src], axis=1).astype(np.int64) if p else \
        np.zeros((0, 0), np.int64)
    for u in range(p):
        out[u][prefix + "send_idx"] = hold_pos[sj[sb[u]:sb[u + 1]]]
        out[u][prefix + "send_counts"] = vol[u, members(u)]
    return out, vol


def _unit_bounds(unit: np.ndarray, p: int) -> np.ndarray:
    b = np.zeros(p + 1, dtype=np.int64)
    np.cumsum(np.bincount(unit, minlength=p), out=b[1:])
    return b


def _row_order(indptr: np.ndarray, lists: list[np.ndarray]):
    """(perm, bounds) putting nonzeros in the order of the rows of lists[0],
    lists[1], ... (perm None when that is already the CSR order)."""
    ro = np.concatenate(lists) if lists else np.zeros(0, np.int64)
    lengths = np.diff(indptr)[ro]
    nb = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(_seg_sums(lengths, [x.size for x in lists]), out=nb[1:])
    if ro.size and np.all(ro[1:] > ro[:-1]):
        return None, nb
    starts = np.zeros(ro.size, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    perm = np.repeat(indptr[ro] - starts, lengths)
    perm += np.arange(perm.size, dtype=np.int64)
    return perm, nb


def _seg_sums(x: np.ndarray, sizes) -> np.ndarray:
    """Sums of consecutive segments of x with the given sizes."""
    cs = np.concatenate([[0], np.cumsum(x)])
    ends = np.cumsum(sizes)
    return cs[ends] - cs[ends - np.asarray(sizes)]


def _distinct_cols(c: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """Sorted distinct values of ``c`` using the all-False scratch mask ``seen``
    (left all-False again); np.unique when the mask would cost more than a sort."""
    if c.size * 8 < seen.size:
        return np.unique(c)
    seen[c] = True
    out = np.flatnonzero(seen)
    seen[out] = False
    return out


# ----------------------------------------------------------------------------- layouts
def _positions(assign: np.ndarray, p: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """(pos int64[n]: index of v among the vertices with the same assign value,
    ids per value ascending)."""
    n = assign.size
    order = _sort_small(assign, p)
    b = _bounds(assign[order], p)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n, dtype=np.int64) - b[assign[order]]
    return pos, [order[b[r]:b[r + 1]] for r in range(p)]


def _coo(g: Graph):
    return g.rows, g.indices, g.data


def _plan_1d(g: Graph, part: np.ndarray, k: int, owner: np.ndarray | None, backward: bool):
    hold = part if owner is None else owner
    rpos, rlists = _positions(part, k)
    hpos, hlists = (rpos, rlists) if owner is None else _positions(owner, k)
    rows, cols, data = _coo(g)
    ident = lambda r: r  # noqa: E731  group-rank = global rank
    everyone = np.arange(k, dtype=np.int64)
    allr = lambda u: everyone  # noqa: E731
    order = _row_order(g.indptr, rlists)
    fwd, vol = _exchange(g.n, k, rows, cols, data, None, lambda u, j: hold[j],
                         hlists, hpos, rpos, rlists, ident, k, allr, order=order, row_nnz=g.row_nnz)
    for r in range(k):
        fwd[r]["h_ids"] = hlists[r]
        fwd[r]["a2a_group"] = np.arange(k, dtype=np.int64)
    bvol = None
    if backward:
        T = g.transpose()
        trows, tcols, tdata = _coo(T)
        bwd, bvol = _exchange(g.n, k, trows, tcols, tdata, None, lambda u, j: part[j],
                              rlists, rpos, rpos, rlists, ident, k, allr, prefix="bwd_",
                              order=_row_order(T.indptr, rlists), row_nnz=T.row_nnz)
        for r in range(k):
            bwd[r].pop("bwd_row_ids")  # same rows as forward (row_ids); G is held by part
            fwd[r].update(bwd[r])
    return fwd, vol, bvol


def _plan_15d(g: Graph, part: np.ndarray, b: int, c: int):
    p = b * c
    pos, lists = _positions(part, b)
    rows, cols, data = _coo(g)
    bi, bq = part[rows], part[cols]
    unit = bi * c + (bq - bi) % c
    fwd, vol = _exchange(g.n, p, rows, cols, data, unit,
                         lambda u, j: part[j] * c + u % c, [lists[r // c] for r in range(p)], pos,
                         pos, [lists[r // c] for r in range(p)], lambda r: r // c, b,
                         lambda u: np.arange(b, dtype=np.int64) * c + u % c)
    for r in range(p):
        i, l = divmod(r, c)
        d = fwd[r]
        d["h_ids"] = lists[i]
        d["a2a_group"] = np.arange(b, dtype=np.int64) * c + l
        d["reduce_group"] = np.arange(c, dtype=np.int64) + i * c
        # stage schedule: source blocks q with (q - i) mod c == l, nearest first
        qs = np.arange(b, dtype=np.int64)
        qs = qs[(qs - i) % c == l]
        qs = qs[np.argsort((qs - i) % b, kind="stable")]
        starts = np.concatenate([[0], np.cumsum(d["recv_counts"])])
        d["stage_src"] = qs
        d["stage_halo_start"] = np.where(qs == i, 0, starts[qs]).astype(np.int64)
        d["stage_halo_count"] = np.where(qs == i, 0, d["recv_counts"][qs]).astype(np.int64)
    return fwd, vol


def _plan_2d(g: Graph, part: np.ndarray, R: int, C: int):
    p = R * C
    pos, lists = _positions(part, p)
    rows, cols, data = _coo(g)
    grow, gcol = part // C, part % C
    unit = grow[rows] * C + gcol[cols]
    fwd, vol = _exchange(g.n, p, rows, cols, data, unit, lambda u, j: part[j],
                         lists, pos, None, None, lambda r: r // C, R,
                         lambda u: np.arange(R, dtype=np.int64) * C + u % C)
    # fold: partial row i on rank u goes to part[i] in u's row group (group-rank = col)
    fvol = np.zeros((p, p), dtype=np.int64)
    f_row = []
    for u in range(p):
        d = fwd[u]
        a, bcol = divmod(u, C)
        d["h_ids"] = lists[u]
        d["a2a_group"] = np.arange(R, dtype=np.int64) * C + bcol
        d["row_group"] = np.arange(C, dtype=np.int64) + a * C
        ri = d["row_ids"]
        dest = part[ri]
        self_ = dest == u
        d["fold_self_src"] = np.flatnonzero(self_).astype(np.int64)
        d["fold_self_dst"] = pos[ri[self_]]
        rem = np.flatnonzero(~self_)
        dg = gcol[ri[rem]]
        o = _sort_small(dg, C)  # stable: ascending global id inside a destination
        d["fold_send_idx"] = rem[o].astype(np.int64)
        d["fold_send_counts"] = np.bincount(dg, minlength=C).astype(np.int64)
        fvol[u] = np.bincount(dest[rem], minlength=p)
        f_row.append(ri[rem])
    # receive side: sent rows concatenated by sender (ascending rank = ascending
    # group-rank in the receiver's row group) with ids ascending; a stable sort by
    # destination gives each receiver its rows in source order, ids ascending.
    fr = np.concatenate(f_row) if f_row else np.zeros(0, np.int64)
    fd = part[fr]
    o = _sort_small(fd, p)
    fb = _unit_bounds(fd, p)
    recv_pos = pos[fr[o]]
    for r in range(p):
        a = r // C
        fwd[r]["fold_recv_counts"] = fvol[a * C:(a + 1) * C, r].copy()
        fwd[r]["fold_recv_idx"] = recv_pos[fb[r]:fb[r + 1]]
    return fwd, vol, fvol


# ----------------------------------------------------------------------------- public API
def _unpack(graph, part_or_partition, k, layout, layout_params, owner, meta):
    """Accept a plain part vector or the planner's Partition (duck-typed)."""
    info = {}
    if hasattr(part_or_partition, "part") and hasattr(part_or_partition, "k"):
        P = part_or_partition
        fp = getattr(P, "graph_fingerprint", None)
        if fp and fp != graph.fingerprint:
            raise PlanError(f"the partition was computed for another graph (fingerprint {fp[:16]}…, "
                            f"graph {graph.name!r} has {graph.fingerprint[:16]}…)")
        part = P.part
        k = P.k if k is None else k
        if layout == "1d" and getattr(P, "layout", "1d") != "1d":
            layout = P.layout
        if not layout_params:
            layout_params = dict(getattr(P, "layout_params", {}) or {})
        if owner is None:
            owner = getattr(P, "owner", None)
        for name in ("model", "backend", "objective"):
            info[name] = getattr(P, name, None)
        params = dict(getattr(P, "params", {}) or {})
        info["seed"] = params.get("seed")
        info["params"] = params
        info["partition_timings"] = dict(getattr(P, "timings", {}) or {})
    else:
        part = part_or_partition
    info.update(meta or {})
    return part, k, layout, dict(layout_params or {}), owner, info


def build_plan(graph: Graph, part_or_partition, k: int | None = None, *, layout: str = "1d",
               layout_params: dict | None = None, owner=None, f: int = 128, dtype: str = "float32",
               meta: dict | None = None, backward: bool | None = None,
               alpha: float = DEFAULT_ALPHA_S, beta: float = DEFAULT_BETA_S_PER_BYTE) -> Plan:
    """Build the communication plan of SpMM ``Z = A @ H`` for a partition.

    Parameters
    ----------
    graph : the matrix A (n × n).
    part_or_partition : int[n] row block of each vertex, or a planner
        ``Partition`` (its part, k, layout, layout_params, owner, model,
        backend, objective and params are used).
    k : number of row blocks (default max(part) + 1). Ranks: k (1d),
        k·c (1.5d), R·C == k (2d).
    layout : "1d" | "1.5d" | "2d"; layout_params: {} | {"c": c} | {"R": R, "C": C}.
    owner : int[n] "decoupled" ownership (1d only): rank holding row j of H;
        must be in the connectivity set of column j (a part reading it, or
        part[j]). None = conformal (owner = part).
    f, dtype : feature width (columns of H) and element type the plan is costed
        for (bytes = rows × f × itemsize); recorded in the manifest.
    meta : extra JSON-able manifest fields (model, backend, objective, seed, ...).
    backward : also plan ``A^T @ G`` (the GCN backward pass, G rows held by
        ``part``; 1d only); default when A is not symmetric or ownership is
        decoupled. With a symmetric A and conformal ownership the forward lists
        serve both passes.

    Returns a :class:`Plan` (write it with :func:`partplan.plan.write_plan`).

    Examples
    --------
    >>> import numpy as np
    >>> from partplan import Graph
    >>> g = Graph.from_edges([0, 1, 2], [1, 2, 3], symmetrize=True)   # path 0-1-2-3
    >>> plan = build_plan(g, np.array([0, 0, 1, 1]))
    >>> plan[0].send_idx.tolist(), plan[0].halo_ids.tolist()   # rank 0 sends H[1], gets H[2]
    ([1], [2])
    """
    t0 = time.perf_counter()
    part, k, layout, lp, owner, info = _unpack(graph, part_or_partition, k, layout, layout_params, owner, meta)
    if layout not in LAYOUTS:
        raise PlanError(f"unknown layout {layout!r}; choose one of {', '.join(LAYOUTS)}")
    if f < 1:
        raise ValueError(f"f (feature width) must be >= 1, got {f}")
    dtype_bytes(dtype)
    if layout == "2d":
        R, C = _grid(lp, k)
        k = R * C if k is None else k
        part, k = as_partition(part, graph.n, k)
        if R * C != k:
            raise PlanError(f"2d grid R×C = {R}×{C} = {R * C} must equal k = {k}")
        lp = {"R": R, "C": C}
    else:
        part, k = as_partition(part, graph.n, k)
    if owner is not None:
        if layout != "1d":
            raise PlanError("decoupled ownership (owner) is only planned for the 1d layout")
        owner, _ = as_partition(owner, graph.n, k, source="owner")
        if np.array_equal(owner, part):
            owner = None
        else:
            _check_owner(graph, part, owner, k)
    if backward and layout != "1d":
        raise BackendUnavailableError(f"backward (A^T) lists are planned for the 1d layout only, not {layout}; "
                                      f"plan A^T as its own graph (graph.transpose())")
    if backward is None:  # decoupled: G lives on part, H on owner — the forward lists do not fit
        backward = layout == "1d" and (not graph.is_symmetric() or owner is not None)
    t1 = time.perf_counter()
    if layout == "1d":
        ranks, vol, bvol = _plan_1d(graph, part, k, owner, backward)
        p = k
        st = _stats_from_plan(graph, part, k, vol, ranks, f, dtype, alpha, beta, conformal=owner is None)
        if backward:
            st.backward = _stats_from_plan(graph.transpose(), part, k, bvol, ranks, f, dtype, alpha, beta,
                                           prefix="bwd_")
        perm = _perm(part if owner is None else owner, k)
        lp = {}
    elif layout == "1.5d":
        c = int(lp.get("c", 1))
        if c < 1:
            raise PlanError(f"1.5d replication factor c must be >= 1, got {c}")
        lp = {"c": c}
        ranks, vol = _plan_15d(graph, part, k, c)
        p = k * c
        sizes = np.bincount(part, minlength=k)
        red = np.repeat(2 * (c - 1) * sizes // c if c > 1 else np.zeros(k, np.int64), c).astype(np.int64)
        st = LayoutStats("1.5d", p, (k, c), vol, red, f, dtype, alpha, beta)
        perm = _perm(part, k)
        backward = False
    else:
        ranks, vol, fvol = _plan_2d(graph, part, lp["R"], lp["C"])
        p = k
        st = LayoutStats("2d", p, (lp["R"], lp["C"]), vol + fvol, np.zeros(p, np.int64), f, dtype, alpha, beta)
        perm = _perm(part, k)
        backward = False
    t2 = time.perf_counter()
    rank_plans = []
    for r, arrays in enumerate(ranks):
        m = {"rank": r, "ranks": p, "layout": layout, "n_local": int(arrays["h_ids"].size),
             "n_rows": int(arrays["row_ids"].size), "n_halo": int(arrays["halo_ids"].size),
             "nnz": int(arrays["indices"].size), "format_version": FORMAT_VERSION,
             "graph_fingerprint": graph.fingerprint}
        rank_plans.append(RankPlan(r, m, arrays))
    manifest = {
        "format": "partplan-plan", "format_version": FORMAT_VERSION,
        "graph": {"fingerprint": graph.fingerprint, "name": graph.name, "n": graph.n, "nnz": graph.nnz,
                  "directed": bool(graph.directed), "symmetric": bool(graph.is_symmetric()),
                  "weighted": graph.data is not None},
        "k": int(k), "ranks": int(p), "layout": layout, "layout_params": lp,
        "ownership": "conformal" if owner is None else "decoupled",
        "backward": "separate" if backward else ("same-as-forward" if graph.is_symmetric() else "not-planned"),
        "model": info.get("model"), "backend": info.get("backend"), "objective": info.get("objective"),
        "seed": info.get("seed"), "params": info.get("params", {}),
        "f": int(f), "dtype": str(dtype), "row_bytes": int(f * dtype_bytes(dtype)),
        "topology": info.get("topology"),
        "stats": st.summary(),
        "columns_sorted_within_rows": False,
    }
    for key, val in info.items():
        if key not in manifest and key not in ("partition_timings",):
            manifest[key] = val
    if backward and isinstance(st, CommStats):
        manifest["stats_backward"] = st.backward.summary()
    timings = {"check_s": t1 - t0, "build_s": t2 - t1}
    return Plan(manifest, rank_plans, part, owner, perm, st, timings)


def _grid(lp: dict, k: int | None) -> tuple[int, int]:
    if "R" in lp and "C" in lp:
        return int(lp["R"]), int(lp["C"])
    if k is None:
        raise PlanError("2d layout needs layout_params={'R': R, 'C': C} (or k to pick a near-square grid)")
    R = int(np.sqrt(k))
    while k % R:
        R -= 1
    return R, k // R


def _check_owner(graph: Graph, part, owner, k):
    """owner[j] must be part[j] or a part with a nonzero in column j."""
    bad_mask = owner != part
    if not bad_mask.any():
        return
    from ..metrics.volume1d import needed_pairs
    j, r = needed_pairs(graph.indptr, graph.indices, part, k, graph.n)
    ok = np.zeros(graph.n, dtype=bool)
    hit = owner[j] == r
    ok[j[hit]] = True
    ok |= ~bad_mask
    if not ok.all():
        v = int(np.flatnonzero(~ok)[0])
        raise PlanError(f"owner[{v}] = {int(owner[v])} is not in the connectivity set of column {v} "
                        f"(no row of part {int(owner[v])} reads it, and part[{v}] = {int(part[v])})")


def _perm(assign: np.ndarray, p: int) -> np.ndarray:
    """old → new id: rank 0's rows first (ascending old id), then rank 1, ..."""
    order = _sort_small(assign, p)
    perm = np.empty(assign.size, dtype=np.int64)
    perm[order] = np.arange(assign.size, dtype=np.int64)
    return perm


def _stats_from_plan(g: Graph, part, k, vol, ranks, f, dtype, alpha, beta, prefix="",
                     conformal=True) -> CommStats:
    """CommStats from the plan's own count matrix (no second pass over the graph;
    with conformal ownership the edge cut is the number of halo-column nonzeros)."""
    load = np.array([ranks[r][prefix + "indices"].size for r in range(k)], dtype=np.int64)
    sizes = np.bincount(part, minlength=k).astype(np.int64)
    if conformal:
        cut = sum(int(np.count_nonzero(ranks[r][prefix + "indices"] >= sizes[r])) for r in range(k))
    else:
        cut = int(np.count_nonzero(part[g.rows] != part[g.indices]))
    return CommStats(k=k, n=g.n, nnz=g.nnz, f=f, dtype=str(dtype), volume=vol, part_sizes=sizes,
                     compute_load=load, edge_cut=cut, alpha=alpha, beta=beta,
                     name=g.name + (" (backward)" if prefix else ""))
