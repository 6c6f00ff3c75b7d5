"""Planning primitives shared by every layout (vectorized numpy).

:func:`exchange` plans one SpMM exchange. Each nonzero ``a_ij`` of the matrix
is given the rank (``unit``) that multiplies it, and each (rank, column j) pair
the rank that holds ``H[j]`` for it (``src``). From that:

* halo of a rank = distinct columns it reads but does not hold, ordered by
  source group-rank then global id (the order ``all_to_all_single`` delivers
  them in, so received rows land straight in the ghost tail of ``H_ext``);
* send lists of a rank = its local row positions each destination needs,
  grouped by destination group-rank, ascending global id inside a group
  (matching the receiver's halo order);
* local CSR = the rank's nonzeros, rows in ascending global id, columns
  renumbered into ``[held rows | halo]``. Within a row the nonzeros keep the
  global CSR order (ascending global column), so a local SpMM sums in exactly
  the order scipy's global ``A @ H`` does: 1D results are bitwise identical.

Sorting is done by numpy (``argsort(kind="stable")`` — radix sort for small
integer keys), deduplication by a length-n bit mask or ``np.unique``,
renumbering by one scratch map of length n; the only Python loops run over
ranks. Layout-specific use of these lives in :mod:`partplan.layouts`.
"""
from __future__ import annotations

import numpy as np


def sort_small(keys: np.ndarray, bound: int) -> np.ndarray:
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


def exchange(n: int, p: int, rows: np.ndarray, cols: np.ndarray, data: np.ndarray | None,
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
        order = (sort_small(unit, p), unit_bounds(unit, p))
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
        d, hsrc, halo = receive_side(
            u, c_s[a0:a1], None if r_s is None else r_s[a0:a1], None if d_s is None else d_s[a0:a1],
            src_of, held[u], grank, G, seen, colmap, row_list=None if row_lists is None else row_lists[u],
            row_pos=row_pos, row_nnz=row_nnz, prefix=prefix)
        out.append(d)
        h_src.append(hsrc)
        h_j.append(halo)
    # ---- send side. The halos are concatenated by receiver (ascending rank, hence
    # ascending group-rank) and inside a receiver by (source, id): a stable sort
    # by source alone yields each sender's rows grouped by destination, ids ascending.
    hs = np.concatenate(h_src) if h_src else np.zeros(0, np.int64)
    hj = np.concatenate(h_j) if h_j else np.zeros(0, np.int64)
    sj = hj[sort_small(hs, p)]
    sb = unit_bounds(hs, p)
    vol = np.stack([np.bincount(x, minlength=p) for x in h_src], axis=1).astype(np.int64) if p else \
        np.zeros((0, 0), np.int64)
    for u in range(p):
        out[u][prefix + "send_idx"] = hold_pos[sj[sb[u]:sb[u + 1]]]
        out[u][prefix + "send_counts"] = vol[u, members(u)]
    return out, vol



def receive_side(u: int, c: np.ndarray, r: np.ndarray | None, d: np.ndarray | None, src_of,
                 held_u: np.ndarray, grank, G: int, seen: np.ndarray, colmap: np.ndarray, *,
                 row_list: np.ndarray | None = None, row_pos: np.ndarray | None = None,
                 row_nnz: np.ndarray | None = None, prefix: str = "") -> tuple[dict, np.ndarray, np.ndarray]:
    """Rank u's side of :func:`exchange` from its own nonzeros alone — what a
    process of the distributed build computes for each rank it builds.

    c, r, d : rank u's nonzeros (columns, rows, values or None) in global CSR
        order (r unused when ``row_nnz`` is given).
    src_of, grank, G : as :func:`exchange`; held_u : the H rows u holds (ascending).
    seen, colmap : all-False bool[n] and int64[n] scratch (``seen`` left all-False).
    row_list : the local CSR rows (ascending; None: the distinct rows of the
        nonzeros); row_pos : int64[n] position of a row in ``row_list``;
        row_nnz : int64[n] nonzeros per row when every nonzero of a listed row
        is u's (the indptr is then a prefix sum).
    Returns (the rank's arrays less the send side, the source rank of each
    halo row, the halo's global ids)."""
    need = _distinct_cols(c, seen)
    src = src_of(u, need)
    rem = src != u
    rsrc, rj = src[rem], need[rem]
    g = grank(rsrc)
    o = sort_small(g, G)                       # by source group-rank, then id
    halo, hsrc, hg = rj[o], rsrc[o], g[o]
    nl = held_u.size
    colmap[held_u] = np.arange(nl, dtype=np.int64)
    colmap[halo] = nl + np.arange(halo.size, dtype=np.int64)
    lcol = colmap[c]
    if row_nnz is not None:
        rl = np.ascontiguousarray(row_list, dtype=np.int64)
        indptr = np.zeros(rl.size + 1, dtype=np.int64)
        np.cumsum(row_nnz[rl], out=indptr[1:])
    else:
        if row_list is None:
            rl = _distinct_cols(r, seen)
            colmap[rl] = np.arange(rl.size, dtype=np.int64)
            lr = colmap[r]
        else:
            rl = np.ascontiguousarray(row_list, dtype=np.int64)
            lr = row_pos[r]
        indptr = np.zeros(rl.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(lr, minlength=rl.size), out=indptr[1:])
    out = {prefix + "row_ids": rl, prefix + "halo_ids": halo, prefix + "indptr": indptr,
           prefix + "indices": lcol, prefix + "recv_counts": np.bincount(hg, minlength=G).astype(np.int64)}
    if d is not None:
        out[prefix + "data"] = d
    return out, hsrc, halo


def segments(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """int64 positions ``starts[0] .. starts[0]+lengths[0]-1, starts[1] ..``
    (concatenated index ranges, vectorized)."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    off = np.zeros(lengths.size, dtype=np.int64)
    np.cumsum(lengths[:-1], out=off[1:])
    pos = np.repeat(starts - off, lengths)
    pos += np.arange(total, dtype=np.int64)
    return pos


def unit_bounds(unit: np.ndarray, p: int) -> np.ndarray:
    b = np.zeros(p + 1, dtype=np.int64)
    np.cumsum(np.bincount(unit, minlength=p), out=b[1:])
    return b


def row_order(indptr: np.ndarray, lists: list[np.ndarray]):
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


def positions(assign: np.ndarray, p: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """(pos int64[n]: index of v among the vertices with the same assign value,
    ids per value ascending)."""
    n = assign.size
    order = sort_small(assign, p)
    b = _bounds(assign[order], p)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n, dtype=np.int64) - b[assign[order]]
    return pos, [order[b[r]:b[r + 1]] for r in range(p)]


def perm_by(assign: np.ndarray, p: int) -> np.ndarray:
    """old → new id: rank 0's rows first (ascending old id), then rank 1, ..."""
    order = sort_small(assign, p)
    perm = np.empty(assign.size, dtype=np.int64)
    perm[order] = np.arange(assign.size, dtype=np.int64)
    return perm
