"""Hierarchical partitioning: split across the top level of a topology first, then inside each domain.

For a tree with domain sizes ``S_0 < S_1 < ...`` (innermost first) on p ranks,
the graph is partitioned into ``p / S_last`` parts (the outermost domains),
each part's induced subgraph into ``S_last / S_{last-1}`` parts, and so on
down to single ranks; rank = the path of part ids (outermost digit first), so
part ids are hierarchical by construction. Each split is a real partitioner
call (METIS, or Mt-KaHyPar's hypergraph model) on the induced subgraph; the
loop runs over levels and domains, never over vertices.

The alternative is a flat k-way partition placed by :mod:`partplan.topology.mapping`;
``benchmarks/bench_topology.py`` measures both.

Examples
--------
>>> from partplan import datasets
>>> from partplan.topology import load_topology
>>> g = datasets.load("email-Enron")
>>> part = hierarchical_partition(g, load_topology("tree:2x4"))
>>> int(part.max()) + 1
8
"""
from __future__ import annotations

import numpy as np

from ..errors import PartitionError
from ..graph import Graph
from ..partition.options import DEFAULT_IMBALANCE


def _split(graph: Graph, k: int, method: str, seed: int, imbalance: float) -> np.ndarray:
    from ..partition import hypergraph, metis
    if k == 1:
        return np.zeros(graph.n, dtype=np.int64)
    if graph.n < k:
        return np.arange(graph.n, dtype=np.int64) % k
    if method == "metis":
        return np.asarray(metis(graph, k, seed=seed, imbalance=imbalance), dtype=np.int64)
    if method == "hypergraph":
        return np.asarray(hypergraph(graph, k, seed=seed, imbalance=imbalance), dtype=np.int64)
    raise PartitionError(f"hierarchical partitioning: unknown method {method!r} (metis or hypergraph)")


def hierarchical_partition(graph: Graph, topo, *, method: str = "metis", seed: int = 0,
                           imbalance: float = DEFAULT_IMBALANCE) -> np.ndarray:
    """int64[n] rank of each vertex on ``topo.ranks`` ranks (module doc).

    Every split balances the rows' weights in the whole graph (:attr:`Graph.balance_weights`: row
    nonzeros, at least 1 — not the induced subgraph's, which loses the edges that leave the domain)
    within ε_l = (1 + ε)^(1/L) - 1 for L splitting levels, so the levels compound to ε; a part still
    above the planner's ε-limit (a split engine's own slack) is repaired at the end
    (:func:`partplan.partition.refinement.rebalance.rebalance`)."""
    from ..partition.objectives import balance_cap
    from ..partition.refinement.rebalance import rebalance
    if not topo.levels:
        raise PartitionError(f"topology {topo.source} has no domain levels to partition along")
    sizes = [topo.ranks] + [lv.size for lv in reversed(topo.levels)] + [1]   # outermost first
    splits = sum(1 for outer, inner in zip(sizes[:-1], sizes[1:]) if outer // inner > 1)
    level_eps = (1.0 + imbalance) ** (1.0 / max(splits, 1)) - 1.0
    A = graph.to_scipy().tocsr()
    w = graph.balance_weights
    rank = np.zeros(graph.n, dtype=np.int64)      # rank offset of the current domain of each vertex
    for outer, inner in zip(sizes[:-1], sizes[1:]):
        fan = outer // inner
        new = rank.copy()
        for start in range(0, topo.ranks, outer):
            idx = np.flatnonzero(rank == start)
            if idx.size == 0:
                continue
            sub = A[idx][:, idx]
            g = Graph.from_scipy(sub, name=f"{graph.name}[{start}:{start + outer}]", vertex_weights=w[idx])
            new[idx] = start + _split(g, fan, method, seed, level_eps) * inner
        rank = new
    k = topo.ranks
    if np.bincount(rank, weights=w, minlength=k).max() > balance_cap(w, rank, k, imbalance)[1]:
        rank, _ = rebalance(graph, rank, k, imbalance=imbalance)
    return rank


__all__ = ["hierarchical_partition"]
