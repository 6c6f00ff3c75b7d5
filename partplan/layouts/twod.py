from __future__ import annotations

import math
import re

import numpy as np

from ..errors import PartitionError
from ..program.core import Group, Program
from ..program.exchange import exchange, positions, sort_small, unit_bounds
from .base import Layout, exchange_steps


class TwoD(Layout):
    """2D checkerboard on an R × C grid (rank = row·C + col); ``part`` assigns
    vector entries (rows of H and Z) to the R·C ranks."""

    name = "2d"
    bfs = fold = True
    bottleneck = False

    def __init__(self, R: int, C: int):
        if int(R) < 1 or int(C) < 1:
            raise PartitionError(f"layout 2d:{R}x{C}: grid dimensions must be >= 1")
        super().__init__(int(R) * int(C))
        self.R, self.C = int(R), int(C)

    @classmethod
    def _parse(cls, s, ranks, row_blocks):
        m = re.fullmatch(r"2d:(\d+)x(\d+)", s)
        if m:
            R, C = int(m.group(1)), int(m.group(2))
            if R < 1 or C < 1:
                raise PartitionError(f"layout {s!r}: grid dimensions must be >= 1")
            n = ranks if ranks is not None else row_blocks
            if n is not None and R * C != n:
                raise PartitionError(f"layout {s!r}: grid {R}x{C} has {R * C} ranks, not {n}")
            return cls(R, C)
        if s == "2d":
            n = ranks if ranks is not None else row_blocks
            if n is None:
                raise PartitionError("layout '2d' needs the number of ranks (or give 2d:RxC)")
            R = max(1, math.isqrt(n))
            while n % R:
                R -= 1
            return cls(R, n // R)
        return None

    @property
    def params(self) -> dict:
        return {"R": self.R, "C": self.C}

    @property
    def spec(self) -> str:
        return f"2d:{self.R}x{self.C}"

    @classmethod
    def spec_for(cls, params):
        return f"2d:{int(params['R'])}x{int(params['C'])}"

    def groups(self) -> list[Group]:
        R, C = self.R, self.C
        cols = [Group(f"col.{b}", tuple(x * C + b for x in range(R))) for b in range(C)]
        rows = [Group(f"row.{a}", tuple(a * C + y for y in range(C))) for a in range(R)]
        return cols + rows

    def volumes(self, graph, part, *, owner=None, f=128, dtype="float32", **cost):
        from ..metrics import analyze_2d
        self._conformal_only(owner)
        return analyze_2d(graph, part, self.R, self.C, f=f, dtype=dtype, **cost)

    def program(self, graph, part, *, owner=None, prefix="fwd"):
        self._conformal_only(owner)
        R, C, p = self.R, self.C, self.ranks
        pos, lists = positions(part, p)
        rows, cols = graph.rows, graph.indices
        grow, gcol = part // C, part % C
        unit = grow[rows] * C + gcol[cols]
        ex, _ = exchange(graph.n, p, rows, cols, graph.data, unit, lambda u, j: part[j],
                         lists, pos, None, None, lambda r: r // C, R,
                         lambda u: np.arange(R, dtype=np.int64) * C + u % C)
        prog = Program.empty(prefix, p)
        prog.set_io(lists, lists)
        exchange_steps(prog, ex, lists, "col", out="partial")
        # fold: partial row i on rank u goes to part[i] in u's grid row (group-rank = grid column)
        self_src, self_dst, send_idx, send_counts, f_rows = [], [], [], [], []
        fvol = np.zeros((p, p), dtype=np.int64)
        for u in range(p):
            ri = ex[u]["row_ids"]
            dest = part[ri]
            own = dest == u
            self_src.append(np.flatnonzero(own).astype(np.int64))
            self_dst.append(pos[ri[own]])
            rem = np.flatnonzero(~own)
            dg = gcol[ri[rem]]
            o = sort_small(dg, C)  # stable: ascending global id inside a destination
            send_idx.append(rem[o].astype(np.int64))
            send_counts.append(np.bincount(dg, minlength=C).astype(np.int64))
            fvol[u] = np.bincount(dest[rem], minlength=p)
            f_rows.append(ri[rem])
        # receive side: rows concatenated by sender (ascending rank = ascending group-rank in
        # the receiver's grid row), ids ascending; a stable sort by destination keeps that order
        fr = np.concatenate(f_rows) if f_rows else np.zeros(0, np.int64)
        fd = part[fr]
        o = sort_small(fd, p)
        fb = unit_bounds(fd, p)
        recv_rows = fr[o]
        recv_ids = [recv_rows[fb[r]:fb[r + 1]] for r in range(p)]
        recv_counts = [fvol[(r // C) * C:(r // C + 1) * C, r].copy() for r in range(p)]
        prog.add("gather", [{"idx": send_idx[r]} for r in range(p)], src="partial", dst="fold_send")
        prog.add("alltoallv", [{"send_counts": send_counts[r], "recv_counts": recv_counts[r],
                                "recv_ids": recv_ids[r]} for r in range(p)],
                 group="row", src="fold_send", dst="fold_recv", dst_row=0)
        prog.add("scatter_add", [{"idx": self_dst[r], "src_idx": self_src[r]} for r in range(p)],
                 src="partial", dst="out", zero=True)
        prog.add("scatter_add", [{"idx": pos[recv_ids[r]]} for r in range(p)], src="fold_recv", dst="out")
        for r in range(p):
            prog.size(r, "fold_send", len(send_idx[r]))
            prog.size(r, "fold_recv", len(recv_ids[r]))
            prog.size(r, "out", len(lists[r]))
        return prog
