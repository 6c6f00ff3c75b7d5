"""Per-rank compute of label propagation, matching and pointer jumping, as
twins: every function takes the kernel set ``X`` (:mod:`partplan.runtime.kernels`)
and runs numpy on the host for ``native`` or torch ops on the kernel set's
device for ``torch``. Edge lists are sorted by row (own position); results are
bitwise the same in both, except weighted label propagation, whose float64
per-label sums may round differently when the weights are not exactly
representable partial sums (integer weights are exact).
"""
from __future__ import annotations

import numpy as np

_BIG = np.iinfo(np.int64).max


def _is_torch(X) -> bool:
    return X.name == "torch"


def seg_min(X, rows, vals, own):
    """min(own[r], min of ``vals`` over the edges of row r) per row; ``rows``
    sorted (int64 edge rows), ``vals`` int64 per edge."""
    if _is_torch(X):
        out = own.clone()
        if rows.numel():
            out.scatter_reduce_(0, rows, vals, "amin")
        return out
    out = own.copy()
    if rows.size:
        st = np.flatnonzero(np.concatenate([[True], rows[1:] != rows[:-1]]))
        r = rows[st]
        out[r] = np.minimum(out[r], np.minimum.reduceat(vals, st))
    return out


def min_by_key(X, keys, vals):
    """(distinct keys ascending, the smallest value of each): int64 arrays."""
    if _is_torch(X):
        import torch
        if keys.numel() == 0:
            return keys, vals
        uk, inv = torch.unique(keys, return_inverse=True)
        out = torch.full((uk.numel(),), _BIG, dtype=vals.dtype, device=vals.device)
        out.scatter_reduce_(0, inv, vals, "amin")
        return uk, out
    if keys.size == 0:
        return keys, vals
    uk, inv = np.unique(keys, return_inverse=True)
    out = np.full(uk.size, _BIG, dtype=vals.dtype)
    np.minimum.at(out, inv, vals)
    return uk, out


def unique_inverse(X, a):
    """(sorted distinct values of ``a``, positions of a's entries among them)."""
    if _is_torch(X):
        import torch
        return torch.unique(a, return_inverse=True)
    return np.unique(a, return_inverse=True)


def positions(X, sorted_ids, order, want):
    """Positions in the own-id array of the global ids ``want`` (all held):
    ``sorted_ids`` = ids[order] ascending."""
    if _is_torch(X):
        import torch
        return order[torch.searchsorted(sorted_ids, want.contiguous())]
    return order[np.searchsorted(sorted_ids, want)]


def mode_label(X, rows, labels, weights, own):
    """One label-propagation step: per row, the label with the largest summed
    weight over the row's edges (``weights`` float64, 1 per edge unweighted),
    ties to the smallest label; rows without edges keep ``own``. ``rows``
    sorted, int64; ``labels`` int64 per edge."""
    return pick_mode(X, *label_sums(X, rows, labels, weights), own)


def first_available(X, rows, avail, nl: int):
    """Per row, the position of its first edge with ``avail`` set in edge-list
    order (-1 when none): int64[nl]. ``rows`` sorted."""
    if _is_torch(X):
        import torch
        e = rows.numel()
        pos = torch.arange(e, dtype=torch.int64, device=rows.device)
        out = torch.full((nl,), _BIG, dtype=torch.int64, device=rows.device)
        if e:
            out.scatter_reduce_(0, rows, torch.where(avail, pos, torch.full_like(pos, _BIG)), "amin")
        return torch.where(out == _BIG, torch.full_like(out, -1), out)
    out = np.full(nl, -1, dtype=np.int64)
    hit = np.flatnonzero(avail)
    if hit.size:
        r = rows[hit]
        first = np.concatenate([[True], r[1:] != r[:-1]])
        out[r[first]] = hit[first]
    return out


def next_available(X, indptr, cols, ext, rows, start, blocked: int):
    """For each row ``rows[k]``, the first edge position ≥ ``start[k]`` (in the
    row's edge range ``indptr``) whose column value ``ext[cols[e]]`` is not
    ``blocked``; −1 when none. Work: the edges scanned from ``start`` to the row end."""
    if _is_torch(X):
        import torch
        dev = cols.device
        k = rows.numel()
        if k == 0:
            return torch.zeros(0, dtype=torch.int64, device=dev)
        lens = (indptr[rows + 1] - start).clamp_(min=0)
        tot = int(lens.sum())
        out = torch.full((k,), _BIG, dtype=torch.int64, device=dev)
        if tot:
            which = torch.repeat_interleave(torch.arange(k, device=dev), lens, output_size=tot)
            off = torch.cumsum(lens, 0) - lens
            e = start[which] + torch.arange(tot, device=dev) - off[which]
            ok = ext[cols[e]] != blocked
            out.scatter_reduce_(0, which, torch.where(ok, e, torch.full_like(e, _BIG)), "amin")
        return torch.where(out == _BIG, torch.full_like(out, -1), out)
    k = rows.size
    out = np.full(k, -1, dtype=np.int64)
    if k == 0:
        return out
    lens = np.maximum(indptr[rows + 1] - start, 0)
    tot = int(lens.sum())
    if tot:
        which = np.repeat(np.arange(k), lens)
        off = np.cumsum(lens) - lens
        e = start[which] + np.arange(tot) - off[which]
        hit = np.flatnonzero(ext[cols[e]] != blocked)
        w = which[hit]
        first = np.concatenate([[True], w[1:] != w[:-1]]) if w.size else np.zeros(0, bool)
        out[w[first]] = e[hit[first]]
    return out


def _key_span(row_max: int, label_min: int, label_max: int) -> int:
    """The multiplier of a combined (row, label) sort key that fits int64 (labels >= 0), else 0."""
    span = label_max + 1
    return span if label_min >= 0 and row_max >= 0 and (row_max + 1) * span < 2 ** 63 else 0


def label_sums(X, rows, labels, weights):
    """(row, label, summed weight) per distinct (row, label) pair, sorted by
    row then label: int64, int64, float64 arrays."""
    if _is_torch(X):
        import torch
        if rows.numel() == 0:
            return rows, labels, weights
        span = _key_span(*torch.stack([rows.max(), labels.min(), labels.max()]).tolist())   # one device sync
        if span:        # one sort of row * span + label: the same order as sorting by label, then row
            o = torch.argsort(rows * span + labels, stable=True)
        else:
            o1 = torch.argsort(labels, stable=True)
            o = o1[torch.argsort(rows[o1], stable=True)]
        r, lab, w = rows[o], labels[o], weights[o]
        brk = torch.ones(r.numel(), dtype=torch.bool, device=r.device)
        brk[1:] = (r[1:] != r[:-1]) | (lab[1:] != lab[:-1])
        gid = torch.cumsum(brk.to(torch.int64), 0) - 1
        sums = torch.zeros(int(gid[-1]) + 1, dtype=w.dtype, device=w.device).index_add_(0, gid, w)
        st = torch.nonzero(brk).reshape(-1)
        return r[st], lab[st], sums
    if rows.size == 0:
        return rows, labels, weights
    span = _key_span(int(rows.max()), int(labels.min()), int(labels.max()))
    # one stable sort of row * span + label, the order of lexsort((labels, rows)) (ties in input
    # order, so the sums add their terms in the same order): 10x faster on a round's edges
    o = np.argsort(rows * span + labels, kind="stable") if span else np.lexsort((labels, rows))
    r, lab, w = rows[o], labels[o], weights[o]
    st = np.flatnonzero(np.concatenate([[True], (r[1:] != r[:-1]) | (lab[1:] != lab[:-1])]))
    return r[st], lab[st], np.add.reduceat(w, st)


#: label sums within this fraction of a row's largest (in absolute value) tie. A float64 sum's
#: value depends on the order of its terms (the kernels', a 2D plan's partial sums) by far less —
#: about (terms) × 2^-53 of it for terms of one sign — so equal weight totals tie on every kernel
#: set and layout instead of the summation order picking the label; integer counts below 10^9
#: differ by more. (Terms that cancel can round by more than this: there the order can decide.)
TIE_RTOL = 1e-9


def pick_mode(X, gr, gl, sums, own):
    """Per row, the label of largest sum among its (row, label, sum) groups —
    ties (sums within :data:`TIE_RTOL` of the largest) to the smallest label;
    rows without groups keep ``own``. The groups come as :func:`label_sums`
    gives them: sorted by row, then label."""
    if _is_torch(X):
        import torch
        if gr.numel() == 0:
            return own.clone()
        rmax = torch.full((own.numel(),), -np.inf, dtype=sums.dtype, device=sums.device).scatter_reduce_(
            0, gr, sums, "amax")
        top = rmax[gr]
        cand = sums >= top - TIE_RTOL * top.abs()
        best = torch.full((own.numel(),), _BIG, dtype=torch.int64, device=sums.device).scatter_reduce_(
            0, gr[cand], gl[cand], "amin")
        return torch.where(best == _BIG, own, best)
    if gr.size == 0:
        return own.copy()
    rs = np.flatnonzero(np.concatenate([[True], gr[1:] != gr[:-1]]))  # groups of one row are contiguous
    rmax = np.maximum.reduceat(sums, rs)
    rowk = np.cumsum(np.concatenate([[False], gr[1:] != gr[:-1]]))
    top = rmax[rowk]
    cand = sums >= top - TIE_RTOL * np.abs(top)
    best = np.full(own.size, _BIG, dtype=np.int64)
    cs = np.flatnonzero(cand)
    first = cs[np.concatenate([[True], gr[cs][1:] != gr[cs][:-1]])]  # labels ascend inside a row: first = smallest
    best[gr[first]] = gl[first]
    return np.where(best == _BIG, own, best)
