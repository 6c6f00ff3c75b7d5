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
    bfs = fold = analytics = True
    bottleneck = False
    distributed_build = split_nonzeros = True

    def __init__(self, R: int, C: int):
        from .._args import check_int
        R = check_int(f"layout 2d:{R}x{C}: grid rows R", R, lo=1, hi=1 << 20, error=PartitionError)
        C = check_int(f"layout 2d:{R}x{C}: grid columns C", C, lo=1, hi=1 << 20, error=PartitionError)
        super().__init__(R * C)
        self.R, self.C = R, C

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

    # ---- the exchange's rules (the single-process and the distributed builders use them)
    def nz_rank(self, pi: np.ndarray, pj: np.ndarray) -> np.ndarray:
        """Rank multiplying a_ij: grid row of part[i], grid column of part[j]."""
        return (pi // self.C) * self.C + pj % self.C

    def h_source(self, u: int, pj: np.ndarray) -> np.ndarray:
        """Rank that sends H[j] to rank u: its owner part[j] (in u's grid column)."""
        return pj

    def a2a(self):
        """(group-rank of a rank, group size, members of u's group): the ``col`` groups."""
        R, C = self.R, self.C
        return (lambda r: r // C), R, (lambda u: np.arange(R, dtype=np.int64) * C + u % C)

    def held_block(self, u: int) -> int:
        """The part whose H rows (and output rows) rank u holds."""
        return u

    local_rows_held = False  # a rank's local CSR rows are the rows its nonzeros touch

    def stats_from(self, volumes: list, block_sizes: np.ndarray, *, f=128, dtype="float32", **cost):
        """The figures ``volumes`` would give from counts the program already
        holds: int64[p, p] rows moved by the expand (``volumes[0]``) and the
        fold (``volumes[1]``)."""
        from ..metrics.layouts import stats_2d
        return stats_2d(volumes[0] + volumes[1], self.R, self.C, f=f, dtype=dtype, **cost,
                        stages={"expand": volumes[0], "fold": volumes[1]})

    def fold_send(self, u: int, ri: np.ndarray, dest: np.ndarray, own_pos) -> tuple[dict, np.ndarray]:
        """Rank u's side of the fold: its partial rows ``ri`` (ascending) go
        to their owners ``dest`` = part[ri] in u's grid row. ``own_pos(ids)``:
        positions of u's own rows among the rows it holds. Returns (``self_src``,
        ``self_dst``, ``send_idx`` — by destination grid column, ids ascending
        —, ``send_counts`` per grid column; the positions in ``ri`` sent)."""
        C = self.C
        own = dest == u
        rem = np.flatnonzero(~own)
        dg = dest[rem] % C
        o = sort_small(dg, C)  # stable: ascending global id inside a destination
        return ({"self_src": np.flatnonzero(own).astype(np.int64), "self_dst": own_pos(ri[own]),
                 "send_idx": rem[o].astype(np.int64),
                 "send_counts": np.bincount(dg, minlength=C).astype(np.int64)}, rem)

    def fold_receive(self, senders: np.ndarray, ids: np.ndarray, held: np.ndarray) -> dict:
        """A rank's side of the fold from the partial rows it receives
        (``senders``, ``ids`` sorted by (sender, id); ``held``: its rows,
        ascending): ``recv_ids``, ``recv_pos`` (their positions in ``held``),
        ``recv_counts`` per sender's grid column."""
        return {"recv_ids": ids, "recv_pos": np.searchsorted(held, ids),
                "recv_counts": np.bincount(senders % self.C, minlength=self.C).astype(np.int64)}

    def fold_steps(self, prog: Program, sends: list[dict], recv_counts: list, recv_ids: list,
                   recv_pos: list, out_rows: list) -> None:
        """The fold's steps (gather, alltoallv in the ``row`` groups, two
        scatter-adds) from each rank's :meth:`fold_send`, the rows it receives
        (``recv_ids``: by sender, ids ascending; ``recv_counts`` per grid
        column; ``recv_pos`` their positions among its rows) and ``out_rows``
        (rows it holds)."""
        p = prog.p
        prog.add("gather", [{"idx": sends[r]["send_idx"]} for r in range(p)], src="partial", dst="fold_send")
        prog.add("alltoallv", [{"send_counts": sends[r]["send_counts"], "recv_counts": recv_counts[r],
                                "recv_ids": recv_ids[r]} for r in range(p)],
                 group="row", src="fold_send", dst="fold_recv", dst_row=0)
        prog.add("scatter_add", [{"idx": sends[r]["self_dst"], "src_idx": sends[r]["self_src"]} for r in range(p)],
                 src="partial", dst="out", zero=True)
        prog.add("scatter_add", [{"idx": recv_pos[r]} for r in range(p)], src="fold_recv", dst="out")
        for r in range(p):
            prog.size(r, "fold_send", len(sends[r]["send_idx"]))
            prog.size(r, "fold_recv", len(recv_ids[r]))
            prog.size(r, "out", int(out_rows[r]))

    def program(self, graph, part, *, owner=None, prefix="fwd"):
        self._conformal_only(owner)
        C, p = self.C, self.ranks
        pos, lists = positions(part, p)
        rows, cols = graph.rows, graph.indices
        unit = self.nonzero_ranks(rows, cols, part[rows], part[cols])
        grank, G, members = self.a2a()
        ex, _ = exchange(graph.n, p, rows, cols, graph.data, unit, lambda u, j: self.h_source(u, part[j]),
                         lists, pos, None, None, grank, G, members)
        prog = Program.empty(prefix, p)
        prog.set_io(lists, lists)
        exchange_steps(prog, ex, lists, "col", out="partial")
        # fold: partial row i on rank u goes to part[i] in u's grid row (group-rank = grid column)
        sends, f_rows, f_src = [], [], []
        for u in range(p):
            ri = ex[u]["row_ids"]
            dest = part[ri]
            snd, rem = self.fold_send(u, ri, dest, lambda ids: pos[ids])
            sends.append(snd)
            f_rows.append(ri[rem])
            f_src.append(np.full(rem.size, u, dtype=np.int64))
        # receive side: rows concatenated by sender, ids ascending; a stable sort by
        # destination keeps that (sender, id) order inside each receiver
        fr = np.concatenate(f_rows) if f_rows else np.zeros(0, np.int64)
        fs = np.concatenate(f_src) if f_src else np.zeros(0, np.int64)
        fd = part[fr]
        o = sort_small(fd, p)
        fb = unit_bounds(fd, p)
        fr, fs = fr[o], fs[o]
        recv = [self.fold_receive(fs[fb[r]:fb[r + 1]], fr[fb[r]:fb[r + 1]], lists[r]) for r in range(p)]
        self.fold_steps(prog, sends, [x["recv_counts"] for x in recv], [x["recv_ids"] for x in recv],
                        [x["recv_pos"] for x in recv], [len(x) for x in lists])
        return prog
