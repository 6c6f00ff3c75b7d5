"""Process mapping: place the k parts of a partition on the k ranks of a topology.

The objective is the topology cost ``Σ_a,b V[a, b] · C[π(a), π(b)]`` of the
k × k part volume matrix V (rows of H, :func:`partplan.analyze`) under the
placement π (part → rank) with the rank × rank cost C of a
:class:`~partplan.topology.Topology`. Methods (:func:`map_parts`):

* ``none`` — identity (part a on rank a);
* ``greedy`` — a greedy placement (the part with the most volume to the parts
  placed so far goes to the free rank adding the least cost), then pairwise
  swaps (:func:`swap_refine`) from it and from the identity; the better of the
  two, never worse than the identity;
* ``hierarchical`` — not a placement: the graph is partitioned again with
  :func:`partplan.topology.hierarchy.hierarchical_partition` (METIS across the outermost
  domains first, then inside each), kept only when its topology cost is not above the
  given partition's (which is kept otherwise, ``info["rejected"]`` saying why);
* ``steiner`` — Mt-KaHyPar's ``improve_mapping`` (Steiner-tree objective on
  the column-net hypergraph, target graph = the topology's complete cost
  graph): it moves vertices, so it returns a new partition, not a relabelling
  (k ≤ 64 for hypergraphs); kept, as ``hierarchical``, only when it costs no more.

:func:`brute_force_map` (all k! placements) is the optimality oracle for k ≤ 8.
Swap gains of all pairs come from one matrix product, kept up to date by a rank-1
update per swap; a round applies its gaining swaps best first, and rounds go on
until none gains (or a work limit for large k).

Examples
--------
>>> import numpy as np
>>> from partplan.topology import load_topology
>>> V = np.array([[0, 0, 9, 0], [0, 0, 0, 9], [9, 0, 0, 0], [0, 9, 0, 0]])   # 0↔2, 1↔3 talk
>>> C = load_topology("tree:2x2").cost
>>> perm = greedy_map(V, C)
>>> mapping_cost(V, C, np.arange(4)), mapping_cost(V, C, perm)
(360.0, 36.0)
"""
from __future__ import annotations

import itertools

import numpy as np

from ..errors import PartitionError
from ..partition.options import DEFAULT_IMBALANCE

MAP_METHODS = ("none", "greedy", "steiner", "hierarchical")


def mapping_cost(V, C, perm) -> float:
    """Σ V[a, b] · C[perm[a], perm[b]] (rows × cost)."""
    perm = np.asarray(perm)
    return float((np.asarray(V, dtype=np.float64) * np.asarray(C)[np.ix_(perm, perm)]).sum())


def _sym(V, C):
    W = np.asarray(V, dtype=np.float64)
    W = W + W.T
    np.fill_diagonal(W, 0.0)
    Cs = np.asarray(C, dtype=np.float64)
    Cs = (Cs + Cs.T) / 2.0
    np.fill_diagonal(Cs, 0.0)
    return W, Cs


#: the most entries of k × k matrices :func:`swap_refine` computes in all (a round's swap gains
#: about 8 k², a swap's update k²; about 5 s per 2·10^9 on one core): a search at k ≤ 1024 ends
#: before it (1,062 swaps in 27 rounds at k = 1024); at k = 2048 it stops after some hundreds of
#: swaps, where 20 k rounds of one k × k matrix product each took many minutes
SWAP_WORK = 2 * 10 ** 9
#: k × k float64 matrices the greedy mapping holds at once (W, C, P, M, the swap gains and their
#: temporaries): checked against the memory budget before it starts
MAP_MATRICES = 10


def _swap_gain(M, W, P, a, b):
    """The cost change of swapping the ranks of parts ``a`` and ``b`` (integers, or index arrays
    that broadcast: every pair at once): Σ_{x≠a,b} (W[a,x] − W[b,x])(P[b,x] − P[a,x]) for
    symmetric W, P with zero diagonals, read from M = W · P."""
    return M[a, b] + M[b, a] - M[a, a] - M[b, b] + 2.0 * W[a, b] * P[a, b]


def swap_refine(V, C, perm, *, max_rounds: int | None = None) -> np.ndarray:
    """Pairwise-swap local search from ``perm``: a round computes the cost change of swapping the
    ranks of every pair of parts (from M = W · P, W the symmetric volumes, P the costs between
    the parts' ranks) and applies, best first, every candidate swap whose change is still
    negative when its turn comes (each swap updates M by one rank-1 product and a column swap,
    k² work); it stops when no swap gains, after ``max_rounds`` rounds (default 20 k + 100), or
    when :data:`SWAP_WORK` matrix entries have been computed (large k). Exact for symmetric C (an
    asymmetric C is symmetrized for the search)."""
    W, Cs = _sym(V, C)
    perm = np.array(perm, dtype=np.int64)
    k = perm.size
    if k < 2:
        return perm
    rounds = max_rounds if max_rounds is not None else 20 * k + 100
    work_left = SWAP_WORK
    pairs = np.ogrid[:k, :k]                # every (a, b) at once, for _swap_gain
    P = Cs[np.ix_(perm, perm)]              # P[a, b] = cost between the ranks of parts a, b
    M = W @ P                               # M[a, b] = Σ_x W[a, x] P[x, b]
    for _ in range(rounds):
        work_left -= 8 * k * k
        delta = _swap_gain(M, W, P, pairs[0], pairs[1])
        np.fill_diagonal(delta, 0.0)
        tol = -1e-9 * max(1.0, float(np.abs(delta).max()))
        cand = np.flatnonzero(np.triu(delta, 1).ravel() < tol)
        if cand.size == 0:
            break
        cand = cand[np.argsort(delta.ravel()[cand], kind="stable")][:k]
        for a, b in zip(*np.unravel_index(cand, delta.shape)):
            if _swap_gain(M, W, P, a, b) >= tol:        # as it is now, after the swaps before it
                continue
            # parts a and b swap ranks: P' = S P S (S the transposition), M' = W P' = (M + u vᵀ) S
            M += np.outer(W[:, b] - W[:, a], P[a] - P[b])
            M[:, [a, b]] = M[:, [b, a]]
            P[[a, b]] = P[[b, a]]
            P[:, [a, b]] = P[:, [b, a]]
            perm[a], perm[b] = perm[b], perm[a]
            work_left -= k * k
            if work_left <= 0:
                return perm
        if work_left <= 0:
            break
    return perm


def greedy_map(V, C) -> np.ndarray:
    """Greedy placement then swaps; the best of that, identity + swaps and the identity (int64[k],
    part → rank), by the real (possibly asymmetric) cost."""
    W, Cs = _sym(V, C)
    k = W.shape[0]
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    perm = np.full(k, -1, dtype=np.int64)
    placed = np.zeros(k, dtype=bool)
    free = np.ones(k, dtype=bool)
    first = int(np.argmax(W.sum(axis=1)))
    perm[first] = int(np.argmin(Cs.sum(axis=1)))       # the most central rank
    placed[first] = True
    free[perm[first]] = False
    conn = W[:, first].copy()          # volume of each part to the parts placed so far (kept up to date)
    for _ in range(k - 1):
        a = int(np.argmax(np.where(placed, -1.0, conn)))
        # cost of a on each rank: Σ_b placed W[a, b] · C[perm[b], rank], over the b it talks to
        nz = np.flatnonzero(placed & (W[a] != 0))
        add = W[a, nz] @ Cs[perm[nz]] if nz.size else np.zeros(k)
        add[~free] = np.inf
        r = int(np.argmin(add))
        perm[a] = r
        placed[a] = True
        free[r] = False
        conn += W[:, a]
    # the searches run on the symmetrized costs, which an asymmetric C only approximates: the
    # identity itself is a candidate too, so the result is never worse than no mapping
    cands = [swap_refine(V, C, perm), swap_refine(V, C, np.arange(k)), np.arange(k, dtype=np.int64)]
    return min(cands, key=lambda c: mapping_cost(V, C, c))


def brute_force_map(V, C) -> tuple[np.ndarray, float]:
    """The optimal placement over all k! permutations (k ≤ 8): (perm, cost)."""
    k = np.asarray(V).shape[0]
    if k > 8:
        raise PartitionError(f"brute-force mapping is for k <= 8 (got {k})")
    best, best_c = None, np.inf
    for perm in itertools.permutations(range(k)):
        c = mapping_cost(V, C, perm)
        if c < best_c - 1e-12:
            best, best_c = np.array(perm, dtype=np.int64), c
    return best, float(best_c)


def steiner_map(graph, part: np.ndarray, topo, *, imbalance: float = DEFAULT_IMBALANCE, seed: int = 0,
                preset: str = "DEFAULT", vcycles: int = 1) -> np.ndarray:
    """Mt-KaHyPar ``improve_mapping`` of ``part`` onto ``topo`` (Steiner-tree
    objective; see the module doc). Returns the new part → rank vector; one rank: ``part`` as it is.

    Reproducible for a seed when the process's Mt-KaHyPar pool has one thread
    (:func:`~partplan.partition.engines.mtkahypar.mtk_initializer`; the CLI sets one before any
    partitioning when ``--map steiner`` is asked). With more, the mapping differs from run to run;
    the DETERMINISTIC preset is reproducible there but its ``improve_mapping`` finds nothing (polblogs,
    tree:4x2: cost 14,350 kept, against 12,057 with DEFAULT)."""
    import mtkahypar

    from ..models import column_net
    from ..partition.engines import _mtk_errors, mtk_context, mtk_hypergraph
    from ..partition.options import engine_seed
    k = topo.ranks
    if k == 1:
        return np.asarray(part, dtype=np.int64).copy()
    if k > 64:
        raise PartitionError(f"--map steiner: Mt-KaHyPar maps hypergraphs onto at most 64 ranks, not {k}")
    mtk, ctx = mtk_context(k, imbalance, preset)
    ctx.set_mapping_parameters(int(k), float(imbalance))
    mtkahypar.set_seed(engine_seed(seed))
    Cs = (topo.cost + topo.cost.T) / 2.0
    a, b = np.triu_indices(k, 1)
    w = Cs[a, b]
    if np.any(w <= 0):
        raise PartitionError("--map steiner needs positive costs between distinct ranks")
    scale = 1.0 / float(w.min())
    try:
        tg = mtk.create_target_graph(ctx, k, int(a.size), list(zip(a.tolist(), b.tolist())),
                                     np.maximum(1, np.rint(w * scale)).astype(np.int64).tolist())
        h = mtk_hypergraph(mtk, ctx, column_net(graph))
        phg = h.create_partitioned_hypergraph(ctx, int(k), np.asarray(part, dtype=np.int64).tolist())
        phg.improve_mapping(tg, ctx, int(vcycles))
    except _mtk_errors() as exc:
        raise PartitionError(f"Mt-KaHyPar mapping failed: {exc}") from exc
    return np.asarray(phg.get_partition(), dtype=np.int64)


def map_parts(graph, part: np.ndarray, topo, method: str = "greedy", **kw) -> tuple[np.ndarray, dict]:
    """The partition placed on ``topo``'s ranks by ``method``: (new part vector,
    info with the cost before and after). ``part`` must have k = topo.ranks parts."""
    from ..metrics import analyze
    if method not in MAP_METHODS:
        raise PartitionError(f"unknown mapping {method!r}; use one of {', '.join(MAP_METHODS)}")
    from ..parts import as_part_ids
    from .machine import Topology
    if not isinstance(topo, Topology):
        raise PartitionError(f"map_parts: topo must be a partplan Topology (load_topology), got {type(topo).__name__}")
    part = as_part_ids(part, what="part")     # integers as they are (a float part vector is refused, not cut)
    k = topo.ranks
    if method == "greedy":     # before the volume matrix and the costs below are made
        from .._budget import check_array_bytes
        check_array_bytes(k, k, 8, "--map greedy's k × k matrices", option="--map", copies=MAP_MATRICES)
    V = analyze(graph, part, k, f=1, backward=False).volume
    before = mapping_cost(V, topo.cost, np.arange(k))
    if method == "none":
        return part, {"method": method, "cost_before": before, "cost_after": before}
    if method == "greedy":
        perm = greedy_map(V, topo.cost)
        new = perm[part]
    elif method == "hierarchical":
        from .hierarchy import hierarchical_partition
        new = hierarchical_partition(graph, topo, seed=int(kw.get("seed", 0)),
                                     imbalance=float(kw.get("imbalance", DEFAULT_IMBALANCE)))
    else:
        new = steiner_map(graph, part, topo, **kw)
        # Mt-KaHyPar balances the balance weights (row nnz, at least 1; column_net's vertex weights)
        # and may end above its bound: the input is kept then, and the info says so
        from ..partition.objectives import eps_limit
        w = graph.balance_weights
        eps = float(kw.get("imbalance", DEFAULT_IMBALANCE))
        allowed = max(int(np.bincount(part, weights=w, minlength=k).max()), eps_limit(int(w.sum()), k, eps))
        heaviest = int(np.bincount(new, weights=w, minlength=k).max())
        if heaviest > allowed:
            return part, {"method": method, "cost_before": before, "cost_after": before,
                          "rejected": f"Mt-KaHyPar's mapping puts {heaviest} (row nnz, at least 1 per row) in a "
                                      f"part, above the balance bound of {allowed}"}
    after = mapping_cost(analyze(graph, new, k, f=1, backward=False).volume, topo.cost, np.arange(k))
    if after > before:   # a new partition (hierarchical, steiner) that costs more: the given one is kept
        return part, {"method": method, "cost_before": before, "cost_after": before, "cost_rejected": after,
                      "rejected": f"its partition costs {after:.6g}, above the given partition's {before:.6g}"}
    return new, {"method": method, "cost_before": before, "cost_after": after}


__all__ = ["MAP_METHODS", "mapping_cost", "swap_refine", "greedy_map", "brute_force_map", "steiner_map", "map_parts"]
