from __future__ import annotations

import numpy as np

from ..program.core import Group, Program
from ..program.exchange import exchange, positions, row_order
from .base import Layout, exchange_steps


class OneD(Layout):
    """1D row blocks: ``ranks`` row blocks, rank r holds block r.

    ``owner`` (decoupled ownership): rank holding row j of H, if not part[j]."""

    name = "1d"
    supports_owner = True
    bfs = analytics = stealing = gcn = exact_replay = True
    halo = rank_rows_are_part = True
    minibatch = routable = distributed_build = True
    layout_stats = False  # its volumes are the CommStats of analyze()

    @classmethod
    def _parse(cls, s, ranks, row_blocks):
        if s not in ("1d", "1"):
            return None
        n = ranks if ranks is not None else row_blocks
        return None if n is None else cls(n)

    def groups(self) -> list[Group]:
        return [Group("world", tuple(range(self.ranks)))]

    def volumes(self, graph, part, *, owner=None, f=128, dtype="float32", **cost):
        from ..metrics import analyze
        if owner is not None and not np.array_equal(owner, part):
            from ..metrics.ownership import owner_stats
            return owner_stats(graph, part, owner, self.ranks, f=f, dtype=dtype, **cost)
        return analyze(graph, part, self.ranks, f=f, dtype=dtype, backward=False, **cost)

    def program(self, graph, part, *, owner=None, prefix="fwd"):
        k = self.ranks
        rpos, rlists = positions(part, k)
        hold = part if owner is None else owner
        hpos, hlists = (rpos, rlists) if owner is None else positions(owner, k)
        everyone = np.arange(k, dtype=np.int64)
        ex, _ = exchange(graph.n, k, graph.rows, graph.indices, graph.data, None, lambda u, j: hold[j],
                         hlists, hpos, rpos, rlists, lambda r: r, k, lambda u: everyone,
                         order=row_order(graph.indptr, rlists), row_nnz=graph.row_nnz)
        prog = Program.empty(prefix, k)
        prog.set_io(hlists, rlists)
        exchange_steps(prog, ex, hlists, "world")
        return prog
