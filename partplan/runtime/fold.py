"""What the graph jobs share on 2D plans: partial rows reduced within the grid
row (the fold), after an expand along the grid column.

On an R × C plan (:class:`~partplan.layouts.TwoD`) rank (a, b) multiplies the
block of rows owned in grid row a × columns owned in grid column b: its rows
are **partial rows** (in-edges of a vertex from one grid column's vertices).
A job's step is then two exchanges, the one the 2D SpMM and BFS already make:

1. expand — the changed states of own vertices go to the ranks of the grid
   column that hold them as columns (the program's ``col`` alltoallv;
   :func:`~.traversal.exchange_chain`);
2. fold — each partial row's partial result goes to the row's owner in the
   grid row (the program's ``row`` alltoallv), which combines the partials.

:class:`FoldMin` is the fold of a minimum (WCC by propagation and pointer
jumping; SSSP folds its relaxed distances the same way in
:func:`~.analytics.sssp_parts`). :func:`sym_blocks` gives label propagation
and matching their symmetrized blocks: a directed plan's program of ``A^T``
and its forward program place the pair (v, u) — in-edge u → v and out-edge
v → u — on the **same** rank (grid row of v's owner, grid column of u's), so
the union of the two blocks, each neighbour once, is v's symmetrized partial
neighbourhood; the complex reductions (label counts, matching candidates)
combine those partials at the row's owner.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import PlanError
from .kernels import community as C
from .neighbours import SymGraph, union_pairs
from .traversal import exchange_chain, exchange_flags, rank_graph, traversal_program

BIG = np.iinfo(np.int64).max


def programs(manifest: dict) -> list[str]:
    """The programs a symmetrized job reads: ``A^T`` and, for a directed graph, ``A`` too."""
    prog = traversal_program(manifest)
    return [prog] if prog == "forward" else [prog, "forward"]


def _perm(ids: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Positions in ``ids`` of ``other`` (the same set of own rows, maybe in another order)."""
    o = np.argsort(ids, kind="stable")
    pos = o[np.searchsorted(ids, other, sorter=o)] if other.size else np.zeros(0, np.int64)
    if other.size != ids.size or not np.array_equal(ids[pos], other):
        raise PlanError("the forward and backward programs hold different rows")
    return pos


class FoldMin:
    """``m[v] = min(own[v], values of v's neighbours)`` on a 2D plan: the
    changed values expand along the grid column, each partial row's minimum
    folds along the grid row to the row's owner (sparse or dense per pair,
    :func:`~.traversal.exchange_flags`), which keeps the smallest. A directed
    plan reads both programs (in- and out-neighbours).

    ``decreasing``: the values only ever decrease (WCC labels), so a partial
    row is sent only when its minimum dropped below what it sent before — the
    owner's value already holds every earlier minimum. Otherwise every partial
    row with a neighbour is sent every call (pointer jumping's grandparents)."""

    def __init__(self, manifest, shards, X, *, decreasing: bool = False):
        self.rgs = [[rank_graph(manifest, rp, q) for rp in shards] for q in programs(manifest)]
        self.ids = [np.array(rg.ids, dtype=np.int64) for rg in self.rgs[0]]
        self.decreasing = decreasing
        self.perm, self.rows, self.cols, self.ext, self.self_src, self.self_dst, self.fold_pos = ([] for _ in range(7))
        self.sent = []
        for g in self.rgs:
            pm, rr, cc, ee, ss, sd, fp, sn = [], [], [], [], [], [], [], []
            for i, rg in enumerate(g):
                pos = _perm(self.ids[i], rg.ids)
                pm.append(X.asarray(pos, "int64"))
                rr.append(X.asarray(np.repeat(np.arange(rg.nrows, dtype=np.int64), np.diff(rg.indptr)), "int64"))
                cc.append(X.asarray(np.array(rg.indices, dtype=np.int64), "int64"))  # writable copies for torch
                ee.append(X.asarray(np.array(rg.ext_ids, dtype=np.int64), "int64"))
                ss.append(X.asarray(np.array(rg.self_src, dtype=np.int64), "int64"))
                sd.append(X.asarray(pos[rg.self_dst], "int64"))
                fp.append(X.asarray(pos[rg.fold_pos], "int64"))
                sn.append(X.full(rg.nrows, BIG, "int64"))
            for lst, v in zip((self.perm, self.rows, self.cols, self.ext, self.self_src, self.self_dst, self.fold_pos,
                               self.sent), (pm, rr, cc, ee, ss, sd, fp, sn)):
                lst.append(v)
        self.fams = list(dict.fromkeys([sg.family for g in self.rgs for sg in g[0].steps]
                                       + [g[0].fold.family for g in self.rgs]))
        self.full = [sum(int(sg.send_counts.sum()) for g in self.rgs for sg in g[i].steps) * 8
                     for i in range(len(self.ids))]

    def neighbour_min(self, comm, X, changed, vals, fams, what):
        """(m per local rank, float64 [bytes, bytes_sparse, bytes_dense, bytes per family of
        ``fams``…, messages per family…] of the expand and the fold)."""
        m = [X.copy(v) for v in vals]
        out = np.zeros(3 + 2 * len(fams))
        for k, g in enumerate(self.rgs):
            ck = [c[q] for c, q in zip(changed, self.perm[k])]
            vk = [v[q] for v, q in zip(vals, self.perm[k])]
            got, gv, st = exchange_chain(comm, [rg.steps for rg in g], ck, vk, what=what)
            pms, masks = [], []
            for i, rg in enumerate(g):
                e = self.ext[k][i]
                e[:rg.nl] = vk[i]
                seg = e[rg.nl:]
                seg[got[i]] = gv[i][got[i]]
                pm = C.seg_min(X, self.rows[k][i], e[self.cols[k][i]], X.full(rg.nrows, BIG, "int64"))
                if self.decreasing:
                    mask = pm < self.sent[k][i]
                    self.sent[k][i] = X.where(mask, pm, self.sent[k][i])
                else:
                    mask = pm < BIG
                mask[self.self_src[k][i]] = False  # own rows stay here
                pms.append(pm)
                masks.append(mask)
            fgot, fvals, fst = exchange_flags(comm, [rg.fold for rg in g], masks, pms,
                                              [rg.fold_pos.size for rg in g], what=f"{what}, fold")
            for s_ in (st, fst):
                out[:3] += [s_.bytes, s_.sparse_bytes, s_.dense_bytes]
                out[3:] += s_.family_vector(fams)
            for i in range(len(g)):
                X.minimum_at(m[i], self.self_dst[k][i], pms[i][self.self_src[k][i]])
                X.minimum_at(m[i], self.fold_pos[k][i][fgot[i]], fvals[i][fgot[i]])
        return m, out


@dataclass
class SymBlock(SymGraph):
    """One rank's symmetrized partial rows on a 2D plan: a :class:`~.neighbours.SymGraph`
    (so :func:`~.neighbours.exchange_values` expands values along every
    program's chain) whose ``rows`` index the block's **partial rows**.

    row_ids : global id of each partial row (the union over the programs read).
    dest : group-rank, in the fold's grid-row group, of each partial row's
        owner; −1 for the rank's own rows.
    own_pos : own position of each partial row the rank owns; −1 otherwise.
    """

    row_ids: np.ndarray = None
    dest: np.ndarray = None
    own_pos: np.ndarray = None

    @property
    def nrows(self) -> int:
        return int(self.row_ids.size)

    @property
    def fold_family(self) -> str:
        return self.rgs[0].fold.family


def sym_blocks(manifest: dict, shards) -> tuple[list[SymBlock], list[str]]:
    """The :class:`SymBlock` of every local rank of a 2D plan and the group
    families of the expand chains then the fold. Each (partial row, neighbour)
    pair once by global id (the larger weight when both directions are
    stored; 1 on an unweighted plan), self loops dropped."""
    progs = programs(manifest)
    out = []
    for rp in shards:
        rgs = [rank_graph(manifest, rp, q) for q in progs]
        ids = np.array(rgs[0].ids, dtype=np.int64)
        perms = [None] + [None if np.array_equal(rg.ids, ids) else _perm(ids, rg.ids) for rg in rgs[1:]]
        row_ids = np.unique(np.concatenate([rg.row_ids for rg in rgs]))
        dest = np.full(row_ids.size, -1, dtype=np.int64)
        own_pos = np.full(row_ids.size, -1, dtype=np.int64)
        offs = np.concatenate([[0], np.cumsum([rg.next_ for rg in rgs])]).astype(np.int64)
        ext = np.concatenate([rg.ext_ids for rg in rgs])
        rr, cc, ww = [], [], []
        for k, rg in enumerate(rgs):
            jr = np.searchsorted(row_ids, rg.row_ids)  # block row -> joined partial row
            d = np.full(rg.nrows, -1, dtype=np.int64)
            d[rg.fold.idx] = np.repeat(np.arange(rg.fold.send_counts.size), rg.fold.send_counts)
            dest[jr[rg.fold.idx]] = d[rg.fold.idx]
            sd = rg.self_dst if perms[k] is None else perms[k][rg.self_dst]
            own_pos[jr[rg.self_src]] = sd
            rk = np.repeat(np.arange(rg.nrows, dtype=np.int64), np.diff(rg.indptr))
            rr.append(jr[rk])
            cc.append(rg.indices + offs[k])
            ww.append(np.ones(rg.indices.size) if rg.data is None else np.asarray(rg.data, dtype=np.float64))
        r, c, g, w = union_pairs(np.concatenate(rr), np.concatenate(cc), np.concatenate(ww), ext, row_ids, rp.rank)
        out.append(SymBlock(ids, rgs, [int(x) for x in offs[:-1]], ext, r, c, g, w,
                            perms, row_ids=row_ids, dest=dest, own_pos=own_pos))
    fams = list(dict.fromkeys([sg.family for s in out[:1] for rg in s.rgs for sg in rg.steps]
                              + [s.fold_family for s in out[:1]]))
    return out, fams
