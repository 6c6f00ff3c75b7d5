from __future__ import annotations

import re

import numpy as np

from ..errors import PartitionError
from ..program.core import Group, Program
from ..program.exchange import exchange, positions
from .base import Layout, exchange_steps


class OneHalfD(Layout):
    """1.5D: ``ranks / c`` row blocks, each replicated on c consecutive ranks.

    A nonzero ``a_ij`` off the block diagonal (row block pi, column block pj ≠ pi) is multiplied by
    replica ``(pj − pi) mod c`` of block pi, the one that fetches block pj's rows; the block
    diagonal's nonzeros need no row from outside (every replica holds its block's rows), so they are
    split over the replicas in runs that even out the replicas' nonzero counts
    (:func:`diagonal_shares`). A partitioner keeps most nonzeros inside their block, so a diagonal
    kept on one replica would give it about c times the mean (email-Enron, 8 blocks, c = 4: 3.19 ×
    the mean nonzeros per rank; split, 1.02 ×).
    """

    name = "1.5d"
    replicas = True
    traversal_refusal = ("each row block lives on c ranks that sum their partial rows by an all-reduce: no single "
                         "owner per vertex and no owner-to-ghost exchange to traverse")
    distributed_build = split_nonzeros = True

    def __init__(self, ranks: int, c: int):
        from .._args import check_int
        super().__init__(ranks)
        c = check_int(f"layout 1.5d:{c}: replication factor c", c, lo=1, error=PartitionError)
        if self.ranks % c:
            raise PartitionError(f"layout 1.5d:{c}: {self.ranks} ranks are not divisible by c={c}")
        self.c = c

    @classmethod
    def _parse(cls, s, ranks, row_blocks):
        m = re.fullmatch(r"1\.5d:(\d+)", s)
        if not m:
            return None
        c = int(m.group(1))
        if c < 1:
            raise PartitionError(f"layout {s!r}: replication factor c must be >= 1")
        if ranks is None and row_blocks is not None:
            ranks = row_blocks * c
        return None if ranks is None else cls(ranks, c)

    @property
    def row_blocks(self) -> int:
        return self.ranks // self.c

    @property
    def params(self) -> dict:
        return {"c": self.c}

    @property
    def spec(self) -> str:
        return f"1.5d:{self.c}"

    @classmethod
    def spec_for(cls, params):
        return f"1.5d:{int(params['c'])}"

    def groups(self) -> list[Group]:
        b, c = self.row_blocks, self.c
        cols = [Group(f"col.{l}", tuple(int(x) * c + l for x in range(b))) for l in range(c)]
        reps = [Group(f"replica.{i}", tuple(range(i * c, i * c + c))) for i in range(b)]
        return cols + reps

    def volumes(self, graph, part, *, owner=None, f=128, dtype="float32", **cost):
        from ..metrics import analyze_15d
        self._conformal_only(owner)
        return analyze_15d(graph, part, self.c, f=f, dtype=dtype, b=self.row_blocks, **cost)

    # ---- the exchange's rules (the single-process and the distributed builders use them)
    def nz_rank(self, pi: np.ndarray, pj: np.ndarray) -> np.ndarray:
        """Rank multiplying a_ij (row block pi, column block pj): replica
        ``(pj − pi) mod c`` of block pi."""
        c = self.c
        return pi * c + (pj - pi) % c

    def nonzero_ranks(self, rows, cols, pi, pj):
        """int64[m]: the rank multiplying each nonzero (class doc): :meth:`nz_rank` off the block
        diagonal; on it, block pi's diagonal nonzeros in (row, column) order, cut into one run per
        replica of the sizes :func:`diagonal_shares` gives (so the rule needs every nonzero of the
        blocks it places: the distributed build applies it on the process that holds all of a block's
        ranks)."""
        unit = self.nz_rank(pi, pj)
        diag = np.flatnonzero(pi == pj)
        if self.c == 1 or diag.size == 0:
            return unit
        b, c = self.row_blocks, self.c
        off = np.bincount(np.delete(unit, diag), minlength=b * c).reshape(b, c)
        blk = pi[diag].astype(np.int64)
        share = diagonal_shares(off, np.bincount(blk, minlength=b))
        o = diag[np.lexsort((cols[diag], rows[diag], blk))]      # by block, then (row, column)
        unit[o] = np.searchsorted(np.cumsum(share.reshape(-1)), np.arange(o.size), side="right")
        return unit

    def h_source(self, u: int, pj: np.ndarray) -> np.ndarray:
        """Rank that sends H[j] (block pj) to rank u: u's replica of block pj."""
        return pj * self.c + u % self.c

    def a2a(self):
        """(group-rank of a rank, group size, members of u's group): the ``col`` groups."""
        b, c = self.row_blocks, self.c
        return (lambda r: r // c), b, (lambda u: np.arange(b, dtype=np.int64) * c + u % c)

    def held_block(self, u: int) -> int:
        """The row block whose H rows (and output rows) rank u holds."""
        return u // self.c

    local_rows_held = True

    def stats_from(self, volumes: list, block_sizes: np.ndarray, *, f=128, dtype="float32", **cost):
        """The figures ``volumes`` would give from counts the program already
        holds: ``volumes[0]`` the exchange's int64[p, p] rows moved;
        ``block_sizes`` the rows of each block."""
        from ..metrics.layouts import stats_15d
        return stats_15d(volumes[0], block_sizes, self.c, f=f, dtype=dtype, **cost)   # a rank's local CSR rows are all rows of its block

    def finish(self, prog: Program, ranks) -> None:
        """After the exchange: the replicas all-reduce their partial ``out``;
        replica 0 of each block writes the output (``ranks``: the global rank
        of each of the program's ranks)."""
        prog.add("allreduce", group="replica", buf="out")
        prog.writes_output = [self.writes_output(int(r)) for r in ranks]

    def writes_output(self, rank: int) -> bool:
        """Replica 0 of each row block (rank % c == 0) writes the block's rows."""
        return int(rank) % self.c == 0

    def program(self, graph, part, *, owner=None, prefix="fwd"):
        self._conformal_only(owner)
        b, p = self.row_blocks, self.ranks
        pos, lists = positions(part, b)
        rows, cols = graph.rows, graph.indices
        unit = self.nonzero_ranks(rows, cols, part[rows], part[cols])
        mine = [lists[self.held_block(r)] for r in range(p)]
        grank, G, members = self.a2a()
        ex, _ = exchange(graph.n, p, rows, cols, graph.data, unit, lambda u, j: self.h_source(u, part[j]),
                         mine, pos, pos, mine, grank, G, members)
        prog = Program.empty(prefix, p)
        prog.set_io(mine, mine)
        exchange_steps(prog, ex, mine, "col")
        self.finish(prog, range(p))
        return prog


def diagonal_shares(off: np.ndarray, diag: np.ndarray) -> np.ndarray:
    """int64[b, c]: how many of block i's ``diag[i]`` block-diagonal nonzeros each of its c replicas
    takes, given the off-diagonal nonzeros ``off[i, r]`` replica r multiplies already: water-filling,
    the lowest reachable maximum ``L`` of ``off + share`` (the least integer with
    Σ_r max(0, L − off[i, r]) ≥ diag[i]); the replicas below L fill to L − 1, and the rest goes one
    each to the lowest-numbered replicas that can take it.

    >>> diagonal_shares(np.array([[5, 1], [0, 0]]), np.array([6, 3])).tolist()
    [[1, 5], [2, 1]]
    """
    off = np.asarray(off, dtype=np.int64)
    diag = np.asarray(diag, dtype=np.int64)
    lo, hi = off.min(axis=1), off.max(axis=1) + diag          # filled(lo) <= diag <= filled(hi)

    def filled(level):
        return np.maximum(level[:, None] - off, 0).sum(axis=1)
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        ok = filled(mid) >= diag
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid + 1)
    share = np.maximum(lo[:, None] - 1 - off, 0)
    rest = diag - share.sum(axis=1)
    room = off <= lo[:, None] - 1
    share += room & (np.cumsum(room, axis=1) <= rest[:, None])
    return share


def stage_schedule(b: int, c: int) -> np.ndarray:
    """int64[S, b, c]: the source block replica l of block i fetches from at
    stage s (−1: nothing), in order of ring offset ``(q − i) mod b`` — the
    staged form of the 1.5D exchange (replica l of block i handles exactly the
    blocks q with ``(q − i) mod c == l``, so every block is fetched once)."""
    i = np.repeat(np.arange(b), b)
    d = np.tile(np.arange(b), b)
    q = (i + d) % b
    l = (q - i) % c
    order = np.lexsort((d, l, i))
    i, l, q = i[order], l[order], q[order]
    grp = i * c + l
    starts = np.flatnonzero(np.concatenate([[True], grp[1:] != grp[:-1]]))
    stage = np.arange(grp.size) - np.repeat(starts, np.diff(np.concatenate([starts, [grp.size]])))
    out = np.full((int(stage.max()) + 1 if stage.size else 0, b, c), -1, dtype=np.int64)
    out[stage, i, l] = q
    return out
