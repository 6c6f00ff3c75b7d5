"""Device kernels of the graph jobs: pure torch ops, vectorized over a
level's edges, on any device (CPU or CUDA).

Every method has its twin of the same name and meaning in
:class:`~.native.NativeKernels` and gives bitwise the same result (see the
package docstring). Arrays are torch tensors on :attr:`TorchKernels.device`
(bool, int64, float64, int32); a graph view is a :class:`TorchGraph` (the
RankGraph's arrays copied to the device once, plus the row of every CSR edge).

Also :func:`packbits` / :func:`unpackbits`: numpy's default bit order (the
first entry is the most significant bit of its byte), so the dense frontier
bitmaps on the wire are byte for byte the host exchange's.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ..ops import readonly_tensor

BIG = torch.iinfo(torch.int64).max  # "no candidate" in the int64 minima
_DT = {"bool": torch.bool, "int32": torch.int32, "int64": torch.int64, "float64": torch.float64}
_WEIGHTS = (128, 64, 32, 16, 8, 4, 2, 1)
_SHIFTS = (7, 6, 5, 4, 3, 2, 1, 0)


def packbits(bits: torch.Tensor) -> torch.Tensor:
    """uint8[⌈n/8⌉] of a bool/0-1 tensor of n entries, like ``numpy.packbits``
    (bit order "big": entry 8k is bit 7 of byte k; the last byte zero-padded)."""
    n = bits.numel()
    b = bits.reshape(-1).to(torch.uint8)
    pad = (-n) % 8
    if pad:
        b = torch.cat([b, torch.zeros(pad, dtype=torch.uint8, device=b.device)])
    w = torch.tensor(_WEIGHTS, dtype=torch.uint8, device=b.device)
    return (b.reshape(-1, 8) * w).sum(dim=1, dtype=torch.int32).to(torch.uint8)


def unpackbits(buf: torch.Tensor, count: int) -> torch.Tensor:
    """bool[count] from the bytes of :func:`packbits` (``numpy.unpackbits(buf, count=count)``)."""
    s = torch.tensor(_SHIFTS, dtype=torch.uint8, device=buf.device)
    return ((buf.reshape(-1, 1) >> s) & 1).reshape(-1)[:count].to(torch.bool)


def u32_bytes(x: torch.Tensor) -> torch.Tensor:
    """uint8[4·k]: int64 values in [0, 2**32) as native-endian uint32 (``numpy.astype(uint32).view(uint8)``)."""
    x = x.to(torch.int64)
    return torch.where(x >= 2 ** 31, x - 2 ** 32, x).to(torch.int32).contiguous().view(torch.uint8)


def from_u32(buf: torch.Tensor) -> torch.Tensor:
    """int64 values of native-endian uint32 bytes (the inverse of :func:`u32_bytes`)."""
    return buf.clone().view(torch.int32).to(torch.int64) & 0xFFFFFFFF


def view_as(buf: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The bytes ``buf`` (uint8) reinterpreted as ``dtype`` (a copy: any offset)."""
    return buf.clone().view(dtype)


def _ranges(ptr: torch.Tensor, sel: torch.Tensor):
    """(edge positions of the ptr-ranges of ``sel`` concatenated, lengths, total)."""
    starts = ptr[sel]
    lens = ptr[sel + 1] - starts
    tot = int(lens.sum()) if sel.numel() else 0
    if tot == 0:
        return torch.zeros(0, dtype=torch.int64, device=ptr.device), starts, lens, 0
    return _gather_ranges(starts, lens, tot), starts, lens, tot


def _gather_ranges(starts: torch.Tensor, lens: torch.Tensor, tot: int) -> torch.Tensor:
    """Positions [starts[k], starts[k] + lens[k]) concatenated; ``tot`` = lens.sum() known on the host (no sync)."""
    offs = torch.cumsum(lens, 0) - lens
    return torch.repeat_interleave(starts - offs, lens, output_size=tot) + torch.arange(tot, device=starts.device)


def _take(a: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``a[idx]`` for a 1-D ``a`` and an int64 index of any shape, by ``index_select``
    (on CPU several times faster than advanced indexing)."""
    return a.index_select(0, idx.reshape(-1)).view(idx.shape)


def nonzero_n(mask: torch.Tensor, count: int) -> torch.Tensor:
    """int64 positions (ascending) of the ``count`` true entries of ``mask``, the
    count known on the host: ``nonzero_static``, no device → host sync."""
    if count == 0:
        return torch.zeros(0, dtype=torch.int64, device=mask.device)
    return torch.nonzero_static(mask.reshape(-1), size=int(count)).reshape(-1)


# bottom-up scans each unvisited row in rounds: the first CHUNKS[0] edges of every
# row (one dense gather), then the next CHUNKS[1] edges of the rows longer than
# CHUNKS[0], ..., then the rest of the rows longer than sum(CHUNKS): the sizes of
# every round come from the host's running figures, so no round syncs
BU_CHUNKS = (8, 120)


def bu_rounds() -> list:
    """(first edge offset, edges or None = the rest) of every bottom-up round after the dense first one."""
    out, lo = [], BU_CHUNKS[0]
    for c in BU_CHUNKS[1:] + (None,):
        out.append((lo, c))
        if c is not None:
            lo += c
    return out


def bu_thresholds() -> list:
    """Row lengths above which a row takes part in each later bottom-up round."""
    return [lo for lo, _ in bu_rounds()]


@dataclass
class TorchGraph:
    """A RankGraph's arrays as int64 / float64 tensors on one device (names as
    in :class:`~partplan.runtime.traversal.RankGraph`); ``row_of`` = the block
    row of every CSR edge; ``fold_idx`` = ``fold.idx`` (2D)."""

    nl: int
    nrows: int
    ext_ids: torch.Tensor
    indptr: torch.Tensor
    indices: torch.Tensor
    row_of: torch.Tensor
    cindptr: torch.Tensor
    crows: torch.Tensor
    cdata: torch.Tensor | None
    self_src: torch.Tensor | None = None
    self_dst: torch.Tensor | None = None
    fold_pos: torch.Tensor | None = None
    fold_idx: torch.Tensor | None = None
    consts: dict = field(default_factory=dict)  # small constants and row lengths (TorchKernels._const)


class TorchKernels:
    """torch tensors on ``device`` (None: CPU)."""

    name = "torch"

    def __init__(self, device=None):
        self.device = torch.device("cpu") if device is None else torch.device(device)
        self._views: dict = {}

    # ------------------------------------------------------------------ arrays
    def _t(self, a, dtype=torch.int64) -> torch.Tensor | None:
        if a is None:
            return None
        return readonly_tensor(a).to(device=self.device, dtype=dtype)

    def graph(self, rg) -> TorchGraph:
        """The device copy of a RankGraph (made once per RankGraph and kernel set)."""
        key = id(rg)
        hit = self._views.get(key)
        if hit is not None and hit[0] is rg:
            return hit[1]
        t = self._t
        row_of = np.repeat(np.arange(rg.nrows, dtype=np.int64), np.diff(rg.indptr))
        gv = TorchGraph(rg.nl, rg.nrows, t(rg.ext_ids), t(rg.indptr), t(rg.indices), t(row_of), t(rg.cindptr),
                        t(rg.crows), t(rg.cdata, torch.float64), t(rg.self_src), t(rg.self_dst), t(rg.fold_pos),
                        None if rg.fold is None else t(rg.fold.idx))
        self._views[key] = (rg, gv)
        return gv

    def asarray(self, a, dtype: str | None = None) -> torch.Tensor:
        """A tensor on the device (from numpy or a tensor; ``dtype`` bool / int32 / int64 / float64)."""
        if isinstance(a, torch.Tensor):
            return a.to(device=self.device, dtype=None if dtype is None else _DT[dtype])
        return readonly_tensor(a).to(device=self.device, dtype=None if dtype is None else _DT[dtype])

    def host(self, a) -> np.ndarray:
        """numpy copy of a tensor (no copy for a CPU tensor)."""
        return a.detach().cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)

    def zeros(self, n: int, dtype: str = "bool") -> torch.Tensor:
        return torch.zeros(int(n), dtype=_DT[dtype], device=self.device)

    def full(self, n: int, value, dtype: str) -> torch.Tensor:
        return torch.full((int(n),), value, dtype=_DT[dtype], device=self.device)

    def astype(self, a, dtype: str) -> torch.Tensor:
        return a.to(_DT[dtype])

    def copy(self, a) -> torch.Tensor:
        return a.clone()

    def flatnonzero(self, a) -> torch.Tensor:
        """int64 positions of the true entries (ascending)."""
        return torch.nonzero(a.reshape(-1)).reshape(-1)

    def cat(self, parts: list) -> torch.Tensor:
        return torch.cat(parts)

    def where(self, cond, a, b):
        return torch.where(cond, a, b)

    def minimum_at(self, dst, idx, vals) -> None:
        """dst[idx] = min(dst[idx], vals) with repeated indices (in place)."""
        if idx.numel():
            dst.scatter_reduce_(0, idx, vals.to(dst.dtype), "amin")

    def l1(self, a, b) -> float:
        """sum |a − b| (a float)."""
        return float((a - b).abs().sum())

    def l1_dev(self, a, b) -> torch.Tensor:
        """sum |a − b| as a 0-dim tensor on the device (no sync)."""
        return (a - b).abs().sum()

    def masked_sum(self, a, mask) -> torch.Tensor:
        """sum of ``a`` where ``mask``, a 0-dim tensor on the device (no boolean indexing: no sync)."""
        return torch.where(mask, a, 0).sum()

    def host_scalars(self, vals: list) -> list:
        """Python floats of 0-dim device tensors: one device → host copy for all of them."""
        return torch.stack([v.to(torch.float64) for v in vals]).tolist() if vals else []

    # ------------------------------------------------------------------ level kernels
    def nonzero_n(self, mask, count: int) -> torch.Tensor:
        """Positions of the ``count`` true entries of ``mask`` (count known on the host: no sync)."""
        return nonzero_n(mask, count)

    def top_down(self, gv: TorchGraph, cols, visited):
        """Expand the frontier columns ``cols`` (ext positions, int64) of the CSC
        block: the CSC ranges of the columns are gathered with
        ``repeat_interleave``, every edge carries its column's global id (or
        int64 max when its row is ``visited``) and a ``scatter_reduce(amin)``
        per row keeps the smallest. Returns (new rows, edges examined = every
        edge of the columns, candidate parents int64[visited.size], −1 elsewhere)."""
        cols = cols.to(torch.int64)
        n = visited.numel()
        tot = int((gv.cindptr[cols + 1] - gv.cindptr[cols]).sum()) if cols.numel() else 0
        best = torch.empty(n, dtype=torch.int64, device=self.device)
        hit, best = self.top_down_x(gv, cols, tot, visited, best)
        return self.flatnonzero(hit), tot, torch.where(hit, best, -1)

    def top_down_x(self, gv: TorchGraph, cols, tot: int, visited, best):
        """:meth:`top_down` with no host sync: ``tot`` (the columns' edge count) is
        known on the host, ``best`` (int64[visited.size]) is scratch it overwrites.
        Returns (new rows as a bool mask, ``best``: the candidate parent of every
        new row, int64 max elsewhere)."""
        best.fill_(BIG)
        if tot:
            starts = _take(gv.cindptr, cols)
            lens = _take(gv.cindptr, cols + 1) - starts
            rows = _take(gv.crows, _gather_ranges(starts, lens, tot))
            g = torch.repeat_interleave(_take(gv.ext_ids, cols), lens, output_size=tot)
            best.scatter_reduce_(0, rows, g.masked_fill_(_take(visited, rows), BIG), "amin")
        return best < BIG, best

    def top_down_b(self, gv: TorchGraph, cols, bound: int, visited, best):
        """:meth:`top_down_x` when only an upper bound of the columns' edge count
        is known on the host (``bound`` ≥ the exact count: the exact one for own
        columns plus, for ghosts, the largest column lengths a peer could have
        flagged): the ranges are padded to ``bound`` by a dummy column whose
        edges carry int64 max — the identity of the minimum — so every shape is
        known on the host and nothing syncs. Returns (new rows as a bool mask,
        ``best``, the exact edge count as a 0-dim int64 tensor)."""
        best.fill_(BIG)
        nnz = gv.crows.numel()
        if bound == 0 or nnz == 0:
            return best < BIG, best, self._const(gv, "zero")
        starts = _take(gv.cindptr, cols)
        lens = _take(gv.cindptr, cols + 1) - starts
        tot = lens.sum()
        lens = torch.cat([lens, (bound - tot).reshape(1)])
        pos = _gather_ranges(torch.cat([starts, self._const(gv, "zero1")]), lens, bound).clamp_(max=nnz - 1)
        rows = _take(gv.crows, pos)
        g = torch.repeat_interleave(torch.cat([_take(gv.ext_ids, cols), self._const(gv, "big1")]), lens,
                                    output_size=bound)
        best.scatter_reduce_(0, rows, g.masked_fill_(_take(visited, rows), BIG), "amin")
        return best < BIG, best, tot

    def _const(self, gv: TorchGraph, what: str) -> torch.Tensor:
        """Small constant tensors on the device, made once per graph view (no per-level host → device copy)."""
        c = gv.consts
        if not c:
            dev = self.device
            c.update(zero=torch.zeros((), dtype=torch.int64, device=dev),
                     zero1=torch.zeros(1, dtype=torch.int64, device=dev),
                     big1=torch.full((1,), BIG, dtype=torch.int64, device=dev),
                     ar0=torch.arange(BU_CHUNKS[0], device=dev),
                     rlen=gv.indptr[1:] - gv.indptr[:-1])
            rl = c["rlen"]
            c["long"] = [rl > t for t in bu_thresholds()]
            # bottom_up_b's dummy row (index nrows, no edges)
            c["indptr1"] = torch.cat([gv.indptr, gv.indptr[-1:]])
            c["rlen1"] = torch.cat([rl, c["zero1"]])
            c["n1"] = torch.full((1,), gv.nrows, dtype=torch.int64, device=dev)
        return c[what]

    def bu_sizes(self, gv: TorchGraph, visited) -> tuple:
        """The host figures :meth:`bottom_up_x` takes (one device → host copy):
        (rows not ``visited``, then per later round of :data:`BU_CHUNKS` the
        unvisited rows longer than the round's start and their edges in the round)."""
        unv = ~visited
        rl = self._const(gv, "rlen")
        parts = [unv.sum()]
        for k, (lo, c) in enumerate(bu_rounds()):
            m = unv & self._const(gv, "long")[k]
            e = rl - lo if c is None else (rl - lo).clamp_(max=c)
            parts += [m.sum(), torch.where(m, e, 0).sum()]
        return tuple(int(x) for x in torch.stack(parts).tolist())

    def bottom_up(self, gv: TorchGraph, front_ext, visited):
        """Every row not ``visited`` looks for its first in-edge (in the block's
        order: ascending global id) whose column is in the frontier: a masked
        segment minimum of edge positions over the unvisited rows' CSR ranges
        (scanned in rounds: :data:`BU_CHUNKS`). Returns (new rows, edges scanned
        up to and including each first hit — the whole row when none —,
        candidate parents, −1 elsewhere)."""
        n = visited.numel()
        best = torch.empty(n, dtype=torch.int64, device=self.device)
        hit, best, edges = self.bottom_up_x(gv, front_ext, visited, self.bu_sizes(gv, visited), best)
        return self.flatnonzero(hit), int(edges), torch.where(hit, best, -1)

    def bottom_up_x(self, gv: TorchGraph, front_ext, visited, sizes: tuple, best):
        """:meth:`bottom_up` with no host sync: ``sizes`` (:meth:`bu_sizes`, kept
        on the host by the caller from the level figures) give every shape;
        ``best`` (int64[visited.size]) is scratch it overwrites. Rounds: the
        first ``BU_CHUNKS[0]`` edges of every unvisited row (one dense
        [rows × BU_CHUNKS[0]] gather), then each later round gathers the round's
        edges of every unvisited row long enough to have any — also of rows
        that already found a hit (a later hit is at a larger position, so the
        minimum keeps the first one): the work is bounded by the unvisited
        rows' edges and no round needs the size of a data-dependent subset.
        Returns (new rows as a bool mask, ``best``: candidate parents of the
        new rows, int64 max elsewhere, edges scanned as a 0-dim int64 tensor)."""
        best.fill_(BIG)
        nu = sizes[0]
        nnz = gv.indices.numel()
        if nu == 0 or nnz == 0:
            return best < BIG, best, self._const(gv, "zero")
        uv = nonzero_n(~visited, nu)
        starts = _take(gv.indptr, uv)
        lens = _take(self._const(gv, "rlen"), uv)
        k0 = BU_CHUNKS[0]
        ar = self._const(gv, "ar0")
        p2 = (starts[:, None] + ar).clamp_(max=nnz - 1)  # [nu, k0]: a row's edges side by side
        h = (ar < lens[:, None]) & _take(front_ext, _take(gv.indices, p2))
        m = (h * (k0 - ar).to(torch.int32)).amax(1)  # k0 − the first hit's offset; 0: no hit
        first = torch.full((visited.numel(),), BIG, dtype=torch.int64, device=self.device)
        first.index_copy_(0, uv, torch.where(m > 0, starts + (k0 - m), BIG))  # first hit (edge position)
        rl = self._const(gv, "rlen")
        for k, (lo, c) in enumerate(bu_rounds()):
            na, ta = sizes[1 + 2 * k], sizes[2 + 2 * k]
            if na == 0 or ta == 0:
                continue
            a = nonzero_n(~visited & self._const(gv, "long")[k], na)
            la = _take(rl, a) - lo
            if c is not None:
                la = la.clamp_(max=c)
            pos = _gather_ranges(_take(gv.indptr, a) + lo, la, ta)
            seg = torch.repeat_interleave(a, la, output_size=ta)
            first.scatter_reduce_(0, seg, torch.where(_take(front_ext, _take(gv.indices, pos)), pos, BIG), "amin")
        fu = _take(first, uv)
        found = fu < BIG
        edges = torch.where(found, fu - starts + 1, lens).sum()
        best.index_copy_(0, uv, torch.where(found, _take(gv.ext_ids, _take(gv.indices, torch.where(found, fu, 0))),
                                            BIG))
        return best < BIG, best, edges

    def bottom_up_b(self, gv: TorchGraph, front_ext, visited, bounds: tuple, best):
        """:meth:`bottom_up_x` when the host knows only upper bounds of the sizes
        (``bounds``: as :meth:`bu_sizes`, each ≥ the exact figure — on a 2D
        plan the rows not known visited at the end of the last level; the
        visited sync since may only remove rows): every row list is padded
        by ``nonzero_static`` with a dummy row (index ``visited.size``, no
        edges) and every round's edge ranges with a dummy range, so every shape
        is known on the host and nothing syncs; the dummy's slots are dropped.
        ``best`` is int64[visited.size + 1] scratch. Returns (new rows as a bool
        mask over ``visited``, ``best[:visited.size]``: candidate parents of the
        new rows, int64 max elsewhere, the exact edges scanned as a 0-dim tensor)."""
        best.fill_(BIG)
        n = visited.numel()
        nu = bounds[0]
        nnz = gv.indices.numel()
        if nu == 0 or nnz == 0:
            return best[:n] < BIG, best[:n], self._const(gv, "zero")
        ip1, rl1 = self._const(gv, "indptr1"), self._const(gv, "rlen1")
        uv = torch.nonzero_static(~visited, size=nu, fill_value=n).reshape(-1)  # padded by the dummy row n
        starts = _take(ip1, uv)
        lens = _take(rl1, uv)
        k0 = BU_CHUNKS[0]
        ar = self._const(gv, "ar0")
        p2 = (starts[:, None] + ar).clamp_(max=nnz - 1)
        h = (ar < lens[:, None]) & _take(front_ext, _take(gv.indices, p2))
        m = (h * (k0 - ar).to(torch.int32)).amax(1)
        first = torch.full((n + 1,), BIG, dtype=torch.int64, device=self.device)
        first.index_copy_(0, uv, torch.where(m > 0, starts + (k0 - m), BIG))
        for k, (lo, c) in enumerate(bu_rounds()):
            na, ta = bounds[1 + 2 * k], bounds[2 + 2 * k]
            if na == 0 or ta == 0:
                continue
            a = torch.nonzero_static(~visited & self._const(gv, "long")[k], size=na, fill_value=n).reshape(-1)
            la = (_take(rl1, a) - lo).clamp_(min=0)
            if c is not None:
                la = la.clamp_(max=c)
            la = torch.cat([la, (ta - la.sum()).reshape(1)])  # the dummy range takes the slack
            a = torch.cat([a, self._const(gv, "n1")])
            pos = _gather_ranges(_take(ip1, a) + lo, la, ta).clamp_(max=nnz - 1)
            seg = torch.repeat_interleave(a, la, output_size=ta)
            first.scatter_reduce_(0, seg, torch.where(_take(front_ext, _take(gv.indices, pos)), pos, BIG), "amin")
        first[n:].fill_(BIG)  # the dummy row's slot: whatever the padding wrote
        fu = _take(first, uv)
        found = fu < BIG
        edges = torch.where(found, fu - starts + 1, lens).sum()
        best.index_copy_(0, uv, torch.where(found, _take(gv.ext_ids, _take(gv.indices, torch.where(found, fu, 0))),
                                            BIG))
        best[n:].fill_(BIG)
        return best[:n] < BIG, best[:n], edges

    def relax(self, gv: TorchGraph, cols, dist_ext, dist):
        """Bellman-Ford over columns ``cols``: dist[r] = min(dist[r], dist_ext[c] + w)
        (w = 1 on unweighted blocks) by ``scatter_reduce(amin)``, in place.
        Returns (changed bool[nl], edges examined = every edge of the columns)."""
        cols = cols.to(torch.int64)
        pos, _, lens, tot = _ranges(gv.cindptr, cols)
        if tot == 0:
            return torch.zeros(dist.numel(), dtype=torch.bool, device=self.device), 0
        rows = gv.crows[pos]
        nd = torch.repeat_interleave(dist_ext[cols], lens, output_size=tot)
        nd = nd + (gv.cdata[pos] if gv.cdata is not None and gv.cdata.numel() else 1.0)
        best = dist.clone().scatter_reduce_(0, rows, nd, "amin")
        ch = best < dist
        dist.copy_(best)
        return ch, tot

    def min_over_rows(self, gv: TorchGraph, ext_vals, own_vals):
        """min(own value, min over the row's columns of ``ext_vals``) per row (segment min)."""
        out = own_vals.clone()
        if gv.indices.numel():
            out.scatter_reduce_(0, gv.row_of, ext_vals[gv.indices], "amin")
        return out

    def min_from_changed(self, gv: TorchGraph, ext_vals, own_vals, own_changed, ghost_got):
        """:meth:`min_over_rows` (one scatter over the block's edges on the device: selecting the
        changed columns' edges would cost a host sync per round)."""
        return self.min_over_rows(gv, ext_vals, own_vals)

    # ------------------------------------------------------------------ PageRank's Executor boundary
    def ops(self, comm, dtype: str = "float64"):
        """The Executor's array table: TorchOps on this device with torch sparse CSR SpMM."""
        from ..ops import TorchOps
        return TorchOps(dtype, str(self.device), "torch")

    def to_ops(self, ops, a):
        """A state vector as an Executor input column (rows × 1), on the device."""
        return a.to(ops.dtype).reshape(-1, 1).contiguous()

    def from_ops(self, ops, z):
        """Column 0 of an Executor output as a state vector (stays on the device)."""
        return z[:, 0]
