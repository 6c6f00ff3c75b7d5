"""Decoupled ownership, counted: the connectivity sets Λ_j of the column nets
and the exact exchange when row ``H[j]`` is sent by ``owner[j]`` (not ``part[j]``).

The owner *assignment* (greedy, LP) lives in :mod:`partplan.partition.refinement.ownership`;
what an assignment costs is a metric, asked by the layouts (1D ``volumes`` with
an ``owner``) and the partitioner alike.
"""
from __future__ import annotations

import numpy as np

from ..errors import PartitionError
from ..graph import Graph
from ..parts import as_partition
from .cost import DEFAULT_ALPHA_S, DEFAULT_BETA_S_PER_BYTE
from .stats import CommStats, analyze_owned
from .volume1d import needed_pairs
from ..graph import check_graph


class ConnectivitySets:
    """Connectivity sets of all nets as sorted (net, part) pairs."""

    def __init__(self, graph: Graph, part: np.ndarray, k: int):
        n = graph.n
        rj, rp = needed_pairs(graph.indptr, graph.indices, part, k, n)       # (column, reading part)
        lone = np.flatnonzero(np.bincount(rj, minlength=n) == 0)             # read by nobody: part[j] holds it
        j, p = np.concatenate([rj, lone]), np.concatenate([rp, part[lone]])
        order = np.lexsort((p, j))
        self.j, self.p = j[order], p[order]
        self.part = part
        self.n, self.k = n, k
        self.lam = np.bincount(self.j, minlength=n).astype(np.int64)          # λ_j
        self.ptr = np.concatenate([[0], np.cumsum(self.lam)]).astype(np.int64)
        self.tv = int((self.lam - 1).sum())
        self.deg = np.bincount(self.p, minlength=k).astype(np.int64)         # |{j : p ∈ Λ_j}|

    def check(self, owner: np.ndarray, source: str = "owner"):
        """Raise PartitionError unless owner[j] ∈ Λ_j ∪ {part[j]} for every j."""
        owner = np.asarray(owner)
        if owner.shape != (self.n,):
            raise PartitionError(f"{source} has {owner.size} entries but the graph has {self.n} vertices")
        if not np.issubdtype(owner.dtype, np.integer):
            raise PartitionError(f"{source} must hold integer part ids, got dtype {owner.dtype}")
        owner = owner.astype(np.int64)
        bad = (owner < 0) | (owner >= self.k)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise PartitionError(f"{source}[{j}] = {int(owner[j])} is not a part id in [0, {self.k})")
        hit = np.bincount(self.j, weights=(self.p == owner[self.j]), minlength=self.n)
        hit[owner == self.part] = 1
        if (hit == 0).any():
            j = int(np.flatnonzero(hit == 0)[0])
            lam = sorted(set(self.p[self.ptr[j]:self.ptr[j + 1]].tolist()) | {int(self.part[j])})
            raise PartitionError(f"{source}[{j}] = {int(owner[j])} is not in the connectivity set {lam} of column {j}")
        return owner

    def loads(self, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(send, recv) rows per part; an owner outside Λ_j (part[j] not reading j) sends to all λ_j."""
        inside = np.bincount(self.j, weights=(self.p == owner[self.j]), minlength=self.n) > 0
        send = np.bincount(owner, weights=self.lam - inside, minlength=self.k).astype(np.int64)
        recv = self.deg - np.bincount(owner[inside], minlength=self.k)
        return send, recv


def owner_stats(graph: Graph, part, owner, k: int | None = None, *, f: int = 128, dtype: str = "float32",
                alpha: float = DEFAULT_ALPHA_S, beta: float = DEFAULT_BETA_S_PER_BYTE, name: str = "",
                backward: bool = False) -> CommStats:
    """Exchange of ``A @ H`` when row ``H[j]`` is sent by part ``owner[j]``:
    :func:`partplan.metrics.analyze_owned` (volume[q, r] = rows q sends r, to
    the parts that read column j; compute load from ``part``;
    ``extra["ownership"] = "decoupled"``) after checking every ``owner[j]`` is
    in Λ_j (else :class:`PartitionError`). ``backward``: also the plan's backward pass (conformal,
    :func:`~partplan.metrics.stats.analyze_owned`)."""
    check_graph(graph)
    from .._args import check_bool
    backward = check_bool("backward", backward, error=PartitionError)   # "no" would be truthy
    part, k = as_partition(part, graph.n, k)
    owner = ConnectivitySets(graph, part, k).check(owner)
    return analyze_owned(graph, part, owner, k, f=f, dtype=dtype, alpha=alpha, beta=beta, name=name or graph.name,
                         backward=backward)


__all__ = ["ConnectivitySets", "owner_stats"]
