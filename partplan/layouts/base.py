"""The layout base class: what every process layout of ``Z = A @ H`` answers.

:class:`Layout` lives apart from the concrete layouts so that both
:mod:`partplan.layouts` (1D, 1.5D, 2D and the registry :func:`~partplan.layouts.parse_layout`)
and :mod:`partplan.layouts.routed` (the routed 1D layout) build on it without importing
each other in a circle: ``layouts`` → ``routing`` → ``layout_base``.

Capabilities (class attributes) say what each layer may do with a plan of a
layout; callers ask them (``lay.bfs``, ``layout_class(spec).routes``) instead of
testing a layout string.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from ..errors import PartitionError, PlanError
from ..program.core import Group, Program

if TYPE_CHECKING:
    from ..graph import Graph


class Layout:
    """Base class: ``ranks`` processes. Subclasses set :attr:`name` and implement
    :meth:`_parse`, :attr:`row_blocks`, :meth:`groups`, :meth:`volumes`, :meth:`program`."""

    name: ClassVar[str] = ""
    # capabilities: what each layer may do with a plan of this layout (asked, never
    # inferred from the layout string outside this module)
    supports_owner: ClassVar[bool] = False   # decoupled ownership (an owner array apart from part)
    bfs: ClassVar[bool] = False              # BFS / Graph500 run on its program of A^T
    analytics: ClassVar[bool] = False        # PageRank, WCC, SSSP run on it
    stealing: ClassVar[bool] = False         # frontier / ownership stealing hooks
    routes: ClassVar[bool] = False           # the exchange is a chain of steps through domain monitors
    fold: ClassVar[bool] = False             # 2D: partial rows fold to their owner after the SpMM
    replicas: ClassVar[bool] = False         # 1.5D: row blocks replicated, partial sums all-reduced
    gcn: ClassVar[bool] = False              # DistGCN training (partplan train gcn)
    bottleneck: ClassVar[bool] = True        # max-volume objectives can be optimized for it
    exact_replay: ClassVar[bool] = False     # replay is bitwise scipy's A @ H (same summation order)
    minibatch: ClassVar[bool] = False        # mini-batch GCN training (sampled exchanges of 1D row blocks)
    routable: ClassVar[bool] = False         # a topology route (--route) or part → rank map (--map) applies
    layout_stats: ClassVar[bool] = True      # volumes() are its own figures, not the 1D CommStats of its blocks
    distributed_build: ClassVar[bool] = False  # the plan-build job builds its plan over N processes (chunked input)
    halo: ClassVar[bool] = False             # each rank's rows plus the rows it receives (nn.Halo, shares, loader)
    #: why graph traversals (BFS, PageRank, WCC, SSSP, ...) cannot run on it, for the refusal's one line
    traversal_refusal: ClassVar[str] = "no program of A^T to traverse"
    split_nonzeros: ClassVar[bool] = False   # a rank multiplies part of a row's nonzeros (chosen by both ends):
    #                                          the distributed build moves nonzeros (plan.distlayout), not rows
    rank_rows_are_part: ClassVar[bool] = False  # rank r's output rows are exactly the rows of part r

    def writes_output(self, rank: int) -> bool:
        """Whether rank ``rank``'s ``out`` rows are the copy written to a global output (every
        rank's, but where row blocks are replicated)."""
        return True

    def __init__(self, ranks: int):
        from .._args import check_int
        self.ranks = check_int(f"layout {self.name}: ranks", ranks, lo=1, error=PartitionError)

    # ---- description
    @property
    def row_blocks(self) -> int:
        """Row blocks of the partition (parts the partitioner produces)."""
        return self.ranks

    @property
    def params(self) -> dict:
        return {}

    @property
    def spec(self) -> str:
        """The string :func:`parse_layout` turns back into this layout."""
        return self.name

    @classmethod
    def spec_for(cls, params: dict) -> str:
        """The spec of this layout with :attr:`params` ``params`` (what a partition
        file of schema /1 recorded: the name, and the parameters apart)."""
        return cls.name

    def describe(self) -> dict:
        return {"layout": self.name, "spec": self.spec, "ranks": self.ranks, "row_blocks": self.row_blocks,
                **self.params, "groups": [g.to_json() for g in self.groups()]}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r}, ranks={self.ranks})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Layout) and (self.spec, self.ranks) == (other.spec, other.ranks)

    def __hash__(self) -> int:
        return hash((self.spec, self.ranks))

    # ---- to implement
    @classmethod
    def _parse(cls, s: str, ranks: int | None, row_blocks: int | None) -> "Layout | None":
        raise NotImplementedError

    def groups(self) -> list[Group]:
        """Every group with its member global ranks, in creation order."""
        raise NotImplementedError

    def volumes(self, graph: Graph, part, *, owner=None, f: int = 128, dtype: str = "float32", **cost):
        """Exact exchange figures of this layout for the row-block partition
        ``part`` (what ``metrics`` reports): CommStats (1d) or LayoutStats."""
        raise NotImplementedError

    def program(self, graph: Graph, part: np.ndarray, *, owner=None, prefix: str = "fwd") -> Program:
        """The exchange program of ``Z = A @ H`` (A = ``graph``) for ``part``."""
        raise NotImplementedError

    def nonzero_ranks(self, rows: np.ndarray, cols: np.ndarray, pi: np.ndarray, pj: np.ndarray) -> np.ndarray:
        """int64[m]: the rank multiplying each nonzero ``a_ij`` (``rows``, ``cols``: i and j;
        ``pi``, ``pj``: their blocks). Both plan builders use it; layouts whose rule needs only the
        blocks (``nz_rank``) return that."""
        return self.nz_rank(pi, pj)

    # ---- shared
    def _conformal_only(self, owner) -> None:
        """Layouts without decoupled ownership refuse an ``owner`` array."""
        if owner is not None and not self.supports_owner:
            raise PlanError(f"decoupled ownership is planned for the 1d layout only, not {self.spec}")

    def check_part(self, part: np.ndarray) -> None:
        if part.size and int(part.max()) >= self.row_blocks:
            raise PlanError(f"layout {self.spec} on {self.ranks} ranks has {self.row_blocks} row blocks, "
                            f"but the partition uses part {int(part.max())}")


__all__ = ["Layout"]


def exchange_steps(prog: Program, ex: list[dict], in_ids: list[np.ndarray], family: str,
                    out: str = "out") -> None:
    """copy in → ext, gather, alltoallv in ``family`` into ext's tail, spmm ext → ``out``."""
    p = prog.p
    prog.add("copy", src="in", dst="ext", dst_row=0)
    prog.add("gather", [{"idx": ex[r]["send_idx"]} for r in range(p)], src="in", dst="send")
    prog.add("alltoallv", [{"send_counts": ex[r]["send_counts"], "recv_counts": ex[r]["recv_counts"],
                            "recv_ids": ex[r]["halo_ids"]} for r in range(p)],
             group=family, src="send", dst="ext", dst_row="in")
    arrs = []
    for r in range(p):
        d = {"indptr": ex[r]["indptr"], "indices": ex[r]["indices"], "row_ids": ex[r]["row_ids"]}
        if "data" in ex[r]:
            d["data"] = ex[r]["data"]
        arrs.append(d)
    prog.add("spmm", arrs, src="ext", dst=out)
    for r in range(p):
        nl = len(in_ids[r])
        prog.size(r, "ext", nl + len(ex[r]["halo_ids"]))
        prog.size(r, "send", len(ex[r]["send_idx"]))
        prog.size(r, out, len(ex[r]["row_ids"]))
