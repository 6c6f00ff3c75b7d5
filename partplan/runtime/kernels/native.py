"""Host kernels of the graph jobs: numpy state arrays, the numba level
kernels of :mod:`partplan.runtime._bfs_kernels` (loops over a level's edges).

Every method has its twin of the same name and meaning in
:class:`~.torchk.TorchKernels`; arrays are numpy (bool, int64, float64, int32).
A graph view is the :class:`~partplan.runtime.traversal.RankGraph` itself.
"""
from __future__ import annotations

import numpy as np

from ...program.exchange import segments
from .. import _bfs_kernels as K

_DT = {"bool": np.bool_, "int32": np.int32, "int64": np.int64, "float64": np.float64}


class NativeKernels:
    """numpy + numba on the host (``device`` None)."""

    name = "native"
    device = None

    # ------------------------------------------------------------------ arrays
    def graph(self, rg):
        """The kernel view of a RankGraph: the RankGraph itself (numpy arrays)."""
        return rg

    def asarray(self, a, dtype: str | None = None) -> np.ndarray:
        """A host array (numpy, ``dtype`` one of bool / int32 / int64 / float64)."""
        return np.asarray(a) if dtype is None else np.asarray(a, dtype=_DT[dtype])

    def host(self, a) -> np.ndarray:
        """numpy array of ``a`` (no copy)."""
        return np.asarray(a)

    def zeros(self, n: int, dtype: str = "bool") -> np.ndarray:
        return np.zeros(int(n), dtype=_DT[dtype])

    def full(self, n: int, value, dtype: str) -> np.ndarray:
        return np.full(int(n), value, dtype=_DT[dtype])

    def astype(self, a, dtype: str) -> np.ndarray:
        return a.astype(_DT[dtype])

    def copy(self, a) -> np.ndarray:
        return a.copy()

    def flatnonzero(self, a) -> np.ndarray:
        """int64 positions of the true entries (ascending)."""
        return np.flatnonzero(a)

    def cat(self, parts: list) -> np.ndarray:
        return np.concatenate(parts)

    def where(self, cond, a, b):
        return np.where(cond, a, b)

    def minimum_at(self, dst, idx, vals) -> None:
        """dst[idx] = min(dst[idx], vals) with repeated indices (in place)."""
        np.minimum.at(dst, idx, vals)

    def l1(self, a, b) -> float:
        """sum |a − b| (a float)."""
        return float(np.abs(a - b).sum())

    def l1_dev(self, a, b):
        """sum |a − b| as a scalar of the kernel set (read with :meth:`host_scalars`)."""
        return np.abs(a - b).sum()

    def masked_sum(self, a, mask):
        """sum of ``a`` where ``mask`` (a scalar of the kernel set)."""
        return a[mask].sum()

    def host_scalars(self, vals: list) -> list:
        """Python floats of scalars of the kernel set (torch: one device → host copy for all)."""
        return [float(v) for v in vals]

    # ------------------------------------------------------------------ level kernels
    def top_down(self, gv, cols, visited):
        """Expand the frontier columns ``cols`` (ext positions, int64) of the CSC
        block: every row not ``visited`` gets the smallest global id among its
        frontier in-neighbours. Returns (new rows int64, edges examined = every
        edge of the columns, candidate parents int64[visited.size], −1 elsewhere)."""
        cand = np.full(visited.size, -1, dtype=np.int64)
        new, edges = K.top_down(gv.cindptr, gv.crows, np.asarray(cols, dtype=np.int64), gv.ext_ids, visited, cand)
        return new, int(edges), cand

    def bottom_up(self, gv, front_ext, visited):
        """Every row not ``visited`` scans its in-edges (sorted by global id) for
        the first frontier column (``front_ext`` bool over ext positions).
        Returns (new rows, edges scanned up to and including each first hit —
        the whole row when none —, candidate parents, −1 elsewhere)."""
        cand = np.full(visited.size, -1, dtype=np.int64)
        new, edges = K.bottom_up(gv.indptr, gv.indices, gv.ext_ids, visited, front_ext, cand)
        return new, int(edges), cand

    def relax(self, gv, cols, dist_ext, dist):
        """Bellman-Ford over columns ``cols``: dist[r] = min(dist[r], dist_ext[c] + w)
        (w = 1 on unweighted blocks), in place. Returns (changed bool[nl], edges examined)."""
        ch = np.zeros(dist.size, dtype=np.bool_)
        w = gv.cdata if gv.cdata is not None else np.zeros(0)
        edges = K.relax(gv.cindptr, gv.crows, w, np.asarray(cols, dtype=np.int64), dist_ext, dist, ch)
        return ch, int(edges)

    def min_over_rows(self, gv, ext_vals, own_vals):
        """min(own value, min over the row's columns of ``ext_vals``) per row."""
        out = own_vals.copy()
        nz = np.flatnonzero(np.diff(gv.indptr))
        if gv.indices.size:
            m = np.minimum.reduceat(ext_vals[gv.indices], gv.indptr[nz])
            out[nz] = np.minimum(out[nz], m)
        return out

    def min_from_changed(self, gv, ext_vals, own_vals, own_changed, ghost_got):
        """:meth:`min_over_rows` where only the columns whose value dropped since the last call can
        lower a row (every other column's value was taken then, and values only fall): the own
        columns ``own_changed`` and the ghosts ``ghost_got`` (bool over ``ext_vals[nl:]``) push
        their values along the block's CSC. Work: those columns' edges, not the block's (a label
        wave crossing a grid no longer costs every edge in every round); above a quarter of the
        edges, the whole block's segment minimum."""
        nl = own_vals.shape[0]
        cols = np.concatenate([np.flatnonzero(own_changed), nl + np.flatnonzero(ghost_got)])
        lens = gv.cindptr[cols + 1] - gv.cindptr[cols]
        if 4 * int(lens.sum()) > gv.indices.size:
            return self.min_over_rows(gv, ext_vals, own_vals)
        out = own_vals.copy()
        pos = segments(gv.cindptr[cols], lens)                                 # their edges
        if pos.size:
            np.minimum.at(out, gv.crows[pos], np.repeat(ext_vals[cols], lens))
        return out

    # ------------------------------------------------------------------ PageRank's Executor boundary
    def ops(self, comm, dtype: str = "float64"):
        """The Executor's array table: NumpyOps, or TorchOps (scipy SpMM) under TorchComm."""
        from ..ops import NumpyOps, TorchOps
        if hasattr(comm, "torch"):
            return TorchOps(dtype, str(comm.device), "auto")
        return NumpyOps(dtype)

    def to_ops(self, ops, a):
        """A state vector as an Executor input column (rows × 1)."""
        return ops.from_numpy(np.asarray(a)[:, None])

    def from_ops(self, ops, z) -> np.ndarray:
        """Column 0 of an Executor output as a state vector."""
        return ops.to_numpy(z)[:, 0]
