"""Balance repair: move rows out of parts heavier than the planner's ε-limit.

Engines can return partitions that break the balance constraint on skewed
graphs at large k (METIS and KaMinPar on email-Enron at k = 256: heaviest part
1.34–1.55× the mean) although a balanced partition exists (Mt-KaHyPar finds
one). The refinement never makes balance worse but does not repair it, so the
default pipeline repairs every start that breaks ε with :func:`rebalance`
before its V-cycle, and keeps the repair when it is less overloaded.

Rule (greedy, deterministic, exact loads): the rows of overloaded parts are
visited in order of increasing *internal share* (neighbours in their own part
/ degree; ties by row id), so the rows least tied to their part go first. A
visited row of a part still above the limit L moves to the part, among its
neighbours' parts, with the most of its neighbours that has room
(load + w ≤ L; ties: the lighter part, then the lower id), else to the lightest
part if that has room, else it stays. Passes repeat while they move rows and
some part is above L (at most ``max_passes``). When they stop with a part above
L, the same passes visiting the lightest rows first (then by internal share),
from the input, are kept if they leave a lighter heaviest part: on small graphs
the rows least tied to their part can use up the room only lighter rows fit.
When both stop short on a graph of at most PACK_MAX_ROWS rows, an exact search
(:func:`pack_rows`) packs every part within L if it finds a packing that keeps
most rows in their parts (on tiny graphs, any packing), or proves that none
exists (``info["packing"]``: "found", "infeasible" or "not found" within its
counted limits).

Weights are the planner's: row nnz, at least 1 (:mod:`partplan.partition.objectives`);
L = ⌊(1+ε)·⌈W/k⌉⌋. A row heavier than what any part has room for stays. Where a
row is heavier than L (a balance floor: no partition is within L), the parts
still above that row's weight R then shed rows by the same rule into parts with
room up to R, and the exact search packs within R: the heaviest part of any
partition weighs at least R. The heaviest part never gets heavier, and no part
below L ends above max(L, R).

>>> import numpy as np
>>> from partplan import Graph
>>> g = Graph.from_edges([0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 0], n=6, symmetrize=True)
>>> part, info = rebalance(g, np.zeros(6, dtype=np.int64), 2, imbalance=0.0)
>>> np.bincount(part, minlength=2).tolist(), info["moved"]   # rows per part
([3, 3], 3)
"""
from __future__ import annotations

import numpy as np

from ..._kernels import njit
from ...graph import Graph
from .fm.slots import count_neighbour_parts
from ..objectives import balance_cap
from ..options import DEFAULT_IMBALANCE


@njit
def _pass(indptr, indices, w, part, load, limit, order, cnt, touched, anywhere=True):
    """One pass over ``order``; returns the rows moved. ``cnt`` int64[k] zeros, ``touched`` int64[k];
    ``anywhere`` False: a row moves only to its neighbours' parts (not to the lightest part)."""
    k = load.size
    moved = 0
    for v in order:
        p = part[v]
        if load[p] <= limit:
            continue
        nt = count_neighbour_parts(v, indptr, indices, part, p, cnt, touched, 0)
        best, bc = -1, -1
        for i in range(nt):
            t = touched[i]
            if load[t] + w[v] <= limit:
                if cnt[t] > bc or (cnt[t] == bc and (load[t] < load[best] or (load[t] == load[best] and t < best))):
                    best, bc = t, cnt[t]
            cnt[t] = 0
        if best < 0 and anywhere:
            light = 0
            for t in range(1, k):
                if load[t] < load[light]:
                    light = t
            if light != p and load[light] + w[v] <= limit:
                best = light
        if best >= 0:
            part[v] = best
            load[p] -= w[v]
            load[best] += w[v]
            moved += 1
    return moved


def _entries(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(degree of each of ``rows``, the positions of their entries in the adjacency's indices, row
    after row): one arange per row, vectorized."""
    deg = np.diff(indptr)[rows]
    first = np.repeat(indptr[rows] - np.concatenate(([0], np.cumsum(deg)[:-1])), deg)
    return deg, first + np.arange(int(deg.sum()))


def _by_internal_share(indptr: np.ndarray, indices: np.ndarray, part: np.ndarray, rows: np.ndarray,
                       cost: np.ndarray | None = None) -> np.ndarray:
    """``rows`` in order of increasing internal share (neighbours in their own part / degree, over
    the adjacency ``indptr, indices``; ties by row id): the rows least tied to their part first;
    by increasing ``cost`` (int64[n]) first when given."""
    deg, idx = _entries(indptr, rows)
    same = part[indices[idx]] == np.repeat(part[rows], deg)
    inside = np.bincount(np.repeat(np.arange(rows.size), deg), weights=same, minlength=rows.size)
    keys = (rows, inside / np.maximum(deg, 1)) + (() if cost is None else (cost[rows],))
    return rows[np.lexsort(keys)]


# repair_compute: passes that move rows only to their neighbours' parts before any to the lightest
# part; on banded directed graphs (links to nearby ids, 26-38 % of rows empty, k = 16 and 64) the
# repair's cost in max(send, recv) fell from x1.03-1.44 (geometric mean x1.21) to x1.03-1.24 (x1.08)
NEAR_PASSES = 3


def _reader_parts(At: Graph, part: np.ndarray, rows: np.ndarray, k: int) -> np.ndarray:
    """int64[n]: for ``rows``, the number of parts holding rows that read them (their owner sends
    their H row to each of those but its own): what a move costs the part receiving it; 0 elsewhere."""
    deg, idx = _entries(At.indptr, rows)
    pairs = np.unique(np.repeat(rows, deg) * np.int64(k) + part[At.indices[idx]])   # (row, reading part)
    return np.bincount(pairs // k, minlength=At.n).astype(np.int64)


def _shed(indptr, indices, w, part, k, limit, rows, max_passes, cost=None, near_passes=0) -> tuple[np.ndarray, int, int]:
    """Passes of the rule (module doc) over ``rows`` (those of parts above ``limit``, weights ``w``,
    visited by increasing ``cost`` first when given; ``part`` changed in place) until no part is
    above it, a pass moves nothing or ``max_passes``; first up to ``near_passes`` passes that move
    rows only to their neighbours' parts (until one moves nothing). Returns (loads int64[k], rows
    moved, passes)."""
    load = np.bincount(part, weights=w, minlength=k).astype(np.int64)
    moved = passes = 0
    if (load > limit).any():
        order = _by_internal_share(indptr, indices, part, rows, cost)
        cnt, touched = np.zeros(k, np.int64), np.zeros(k, np.int64)
        indptr, indices = indptr.astype(np.int64), indices.astype(np.int64)
        near = far = 0                    # passes to neighbours' parts only / also to the lightest part
        while (load > limit).any() and far < max_passes:
            anywhere = near >= near_passes
            m = int(_pass(indptr, indices, w, part, load, limit, order, cnt, touched, anywhere))
            passes += 1
            moved += m
            if not anywhere:
                near = near + 1 if m > 0 else near_passes
            elif m == 0:
                break
            else:
                far += 1
    return load, moved, passes


def rebalance(graph: Graph, part: np.ndarray, k: int, *, imbalance: float = DEFAULT_IMBALANCE,
              max_passes: int = 3) -> tuple[np.ndarray, dict]:
    """Move rows out of parts above the ε-limit (module doc); returns (part int64[n], info).

    ``part`` is not modified. info: ``moved`` (rows), ``passes``, ``limit``,
    ``heaviest_before`` / ``heaviest_after`` (weights: row nnz, at least 1) and, when the exact
    packing ran, ``packing`` (:func:`pack_rows`)."""
    part = np.asarray(part, dtype=np.int64).copy()
    w = graph.balance_weights
    _, limit = balance_cap(w, part, k, imbalance)
    load = np.bincount(part, weights=w, minlength=k)
    info = {"moved": 0, "passes": 0, "limit": int(limit), "heaviest_before": int(load.max(initial=0))}
    rows = np.flatnonzero(load[part] > limit)                # rows of overloaded parts
    start = part.copy() if rows.size else part        # the input, for the second order below
    load, info["moved"], info["passes"] = _shed(graph.indptr, graph.indices, w, part, k, limit, rows, max_passes)
    if (load > limit).any():
        # stopped short: the rows least tied to their part may have used up the room that only
        # lighter rows fit (a part 2 over the limit, room 1 left in each other part, no row of
        # weight 1 left to move); the same rule visiting the lightest rows first, from the input,
        # is kept when its heaviest part is lighter (the pipeline's measure of overload)
        alt = start.copy()
        alt_load, moved, passes = _shed(graph.indptr, graph.indices, w, alt, k, limit, rows, max_passes,
                                        cost=w.astype(np.int64))
        if alt_load.max() < load.max():
            part, load, info["moved"], info["passes"] = alt, alt_load, moved, passes
    heavy = int(w.max(initial=0))
    if heavy > limit and load.max() > heavy:
        # a row heavier than L (a balance floor): no part can be within L, and rows heavier than L
        # fit no other part's room under L; the parts above that row's weight shed rows into any
        # part with room up to it (the heaviest part of any partition weighs at least that much)
        load, moved, passes = _shed(graph.indptr, graph.indices, w, part, k, heavy,
                                    np.flatnonzero(load[part] > heavy), max_passes)
        info["moved"], info["passes"] = info["moved"] + moved, info["passes"] + passes
    target = max(limit, heavy)
    if (load > target).any() and graph.n <= PACK_MAX_ROWS:
        packed = pack_rows(graph, start, k, target)
        info["packing"] = packed[1]
        if packed[0] is not None:
            part = packed[0]
            load = np.bincount(part, weights=w, minlength=k).astype(np.int64)
            info["moved"] = int((part != start).sum())
    info["heaviest_after"] = int(load.max(initial=0))
    return part, info


#: the most rows the exact packing (:func:`pack_rows`) is tried on
PACK_MAX_ROWS = 2_000
#: the most rows its fallbacks (best fit, the integer program), which may move many rows, are tried
#: on: tiny graphs, where such a packing is still one the refinement can work from (on larger
#: graphs the greedy passes' result, a little above the limit, keeps the engine's structure)
PACK_ANY_ROWS = 64
#: the candidates its search may look at, and the loads compared against them (a count, not seconds:
#: the result is the same on any machine)
PACK_NODE_LIMIT = 2_000_000
#: the branch-and-bound nodes of the integer program tried where the search reached its limit
PACK_MILP_NODES = 1_000
#: the most rows × parts (its binary variables) the integer program is tried on
PACK_MILP_CELLS = 1_000


@njit
def _pack_search(w, own, k, limit, node_limit, out):
    """Depth-first search for a packing of rows of weights ``w`` (int64, decreasing) into ``k``
    parts of weight at most ``limit``: each row tries its own part ``own[i]`` first (when ``own``
    has a slot per row), then the parts fullest first (best fit), skipping
    a part whose load equals one already tried for that row (the rows still to place see only the
    loads, so such parts are interchangeable), and a branch ends where the room that the lightest
    row still fits in is less than the rows left. ``out`` (int64[rows]): the parts, when found.
    Returns 1 found, 0 none exists, −1 ``node_limit`` placements tried."""
    n = w.size
    load = np.zeros(k, np.int64)
    suffix = np.zeros(n + 1, np.int64)
    for i in range(n - 1, -1, -1):
        suffix[i] = suffix[i + 1] + w[i]
    smallest = w[n - 1] if n else 0
    cand = np.zeros((n, k), np.int64)    # each depth's parts, fullest first (set on arrival)
    nxt = np.zeros(n, np.int64)
    nodes = 0
    i = 0
    with_own = own.size == n
    if n:
        cand[0, :] = np.arange(k)
        if with_own:
            _own_first(cand[0], own[0])
    while i >= 0:
        if i == n:
            return 1
        placed = False
        while nxt[i] < k:
            c = nxt[i]
            nxt[i] += 1
            p = cand[i, c]
            nodes += 1                            # every candidate looked at counts, tried or not
            if nodes > node_limit:
                return -1
            if load[p] + w[i] > limit:
                continue
            dup = False
            for t in range(c):
                if load[cand[i, t]] == load[p]:
                    dup = True
                    break
            nodes += c                            # and the loads compared against it
            if dup:
                continue
            load[p] += w[i]
            usable = 0
            for q in range(k):
                r = limit - load[q]
                if r >= smallest:
                    usable += r
            if usable < suffix[i + 1]:
                load[p] -= w[i]
                continue
            out[i] = p
            placed = True
            break
        if placed:
            i += 1
            if i < n:
                cand[i, :] = np.argsort(-load, kind="mergesort")   # fullest first, ties by id
                if with_own:
                    _own_first(cand[i], own[i])
                nxt[i] = 0
        else:
            i -= 1
            if i >= 0:
                load[out[i]] -= w[i]
    return 0


@njit
def _own_first(cand, p):
    """Move part ``p`` to the front of the candidate order ``cand`` (the others keep their order)."""
    at = 0
    for t in range(cand.size):
        if cand[t] == p:
            at = t
            break
    for t in range(at, 0, -1):
        cand[t] = cand[t - 1]
    cand[0] = p


def pack_rows(graph: Graph, part: np.ndarray, k: int, limit: int) -> tuple[np.ndarray | None, str]:
    """Every part within ``limit`` (balance weights: row nnz, at least 1), where the greedy passes
    stopped short on a small graph (tight packings: a part 2 above the limit and the room left in
    units no single move fits), after Martello and Toth's bound (:func:`bins_needed`) and the count
    of rows a part can hold (:func:`most_rows`) have not already shown that none exists: an exact
    search (:func:`_pack_search`, heaviest rows first) within PACK_NODE_LIMIT candidates looked at,
    where each row tries its own part first, so most rows stay;
    where that reaches its limit on a graph of at most PACK_ANY_ROWS rows, the same search by best
    fit alone, whose groups then take the parts that keep the most rows where they were (an
    assignment, :func:`scipy.optimize.linear_sum_assignment`); where that too reaches its limit,
    an integer program with the fewest rows moved (:func:`_pack_milp`, up to PACK_MILP_CELLS rows ×
    parts).

    ``part``: ids in [0, k) (a ValueError otherwise). Returns (the packed part int64[n], "found") or
    (None, why: "infeasible" — no packing within the limit exists — or "not found": the search
    reached its limit)."""
    w = graph.balance_weights.astype(np.int64)
    part = np.asarray(part)
    if part.shape != w.shape or (part.size and (int(part.min()) < 0 or int(part.max()) >= k)):
        raise ValueError(f"pack_rows: part must hold {w.size} ids in [0, {k})")
    if w.size and int(w.max()) > limit or bins_needed(w, limit) > k or most_rows(w, limit) * k < w.size:
        return None, "infeasible"
    from scipy.optimize import linear_sum_assignment

    part = np.asarray(part, np.int64)
    order = np.lexsort((np.arange(w.size), -w))          # heaviest first, ties by row id
    got = np.zeros(w.size, np.int64)
    found = int(_pack_search(w[order], part[order], int(k), int(limit), PACK_NODE_LIMIT, got))
    if found == 1:                                       # each row tried its own part first
        packed = np.empty(w.size, np.int64)
        packed[order] = got
        return packed, "found"
    if found == 0:
        return None, "infeasible"
    if w.size > PACK_ANY_ROWS:    # a packing that moves many rows would lose the input's structure
        return None, "not found"
    found = int(_pack_search(w[order], np.zeros(0, np.int64), int(k), int(limit), PACK_NODE_LIMIT, got))
    if found == 0:
        return None, "infeasible"
    if found == -1:
        return _pack_milp(w, part, k, limit) if w.size * k <= PACK_MILP_CELLS else (None, "not found")
    group = np.empty(w.size, np.int64)
    group[order] = got
    stay = np.zeros((k, k), np.int64)                    # rows of group g now in part p
    np.add.at(stay, (group, part), 1)
    g_of, p_of = linear_sum_assignment(stay, maximize=True)
    to_part = np.empty(k, np.int64)
    to_part[g_of] = p_of
    return to_part[group], "found"


def _pack_milp(w: np.ndarray, part: np.ndarray, k: int, limit: int) -> tuple[np.ndarray | None, str]:
    """:func:`pack_rows` by an integer program where its search reached its limit: a binary
    x[v, p] per row and part, each row in one part, each part's weight at most ``limit``, the
    fewest rows moved; HiGHS (:func:`scipy.optimize.milp`) within PACK_MILP_NODES nodes."""
    import scipy.sparse as sp
    from scipy.optimize import Bounds, LinearConstraint, milp

    n = w.size
    cost = np.ones((n, k))
    cost[np.arange(n), part] = 0.0
    cells = np.arange(n * k)
    one = sp.csr_matrix((np.ones(n * k), (cells // k, cells)), shape=(n, n * k))       # each row once
    cap = sp.csr_matrix((np.repeat(w.astype(np.float64), k), (cells % k, cells)), shape=(k, n * k))
    res = milp(cost.ravel(), integrality=np.ones(n * k), bounds=Bounds(0, 1),
               constraints=[LinearConstraint(one, 1, 1), LinearConstraint(cap, -np.inf, float(limit))],
               options={"node_limit": PACK_MILP_NODES})
    if res.status == 2:
        return None, "infeasible"
    if res.x is None:
        return None, "not found"
    packed = np.argmax(res.x.reshape(n, k), axis=1).astype(np.int64)
    if np.bincount(packed, weights=w, minlength=k).max() > limit:    # HiGHS's tolerance: never seen
        return None, "not found"
    return packed, "found"


def repair_compute(graph: Graph, part: np.ndarray, k: int, *, imbalance: float = DEFAULT_IMBALANCE,
                   max_passes: int = 3) -> tuple[np.ndarray, dict]:
    """Both of the planner's limits on a partition: **compute** (row nnz per part) within
    ⌊(1+ε)·⌈nnz/k⌉⌋ and the **balance weight** (row nnz, at least 1) within its ε-limit.

    The balance weight gives a row with no nonzero 1 and the compute load 0, so on a directed
    graph with many such rows (pages without out-links) a part holding few of them can be within
    the balance limit and above ε in compute (0.037 at k = 64 on a graph with 30 % of them).
    Two steps of the rule (module doc), each only when its limit is broken:

    1. rows with nonzeros leave the parts above the compute limit (weights: row nnz), those of
       lowest degree (row nnz + rows reading them: what a move can cost in volume) first;
    2. rows with no nonzero (no compute) leave the parts that step 1 pushed above the balance
       limit, those read by the fewest parts first, to the part holding most of the rows that
       read them (the columns of ``A``: its transpose's rows), where their H row costs no extra
       volume.

    Each step first moves rows only to their neighbours' parts (up to NEAR_PASSES passes), then
    also to the lightest part. The bottleneck is not modelled: as the pipeline's last step alone
    it raised max(send, recv) by x1.03-1.25 on banded directed graphs with 26-38 % empty rows
    (3-59 rows moved). The pipeline therefore repairs the starts and refines under both limits
    (refine's ``weights2``/``cap2``), and runs this at the end only as a safety net.

    Exact loads, deterministic; ``part`` is not modified. A row heavier than the room any part
    has stays (an unbalanceable input ends as close as the rule gets). Returns (part int64[n],
    info: ``moved`` (rows of each step), ``compute_limit``, ``balance_limit``, ``heaviest_before`` /
    ``heaviest_after`` (compute))."""
    part = np.asarray(part, dtype=np.int64).copy()
    nnz = graph.row_nnz.astype(np.int64)
    w = graph.balance_weights
    _, c_limit = balance_cap(nnz, part, k, imbalance)
    _, w_limit = balance_cap(w, part, k, imbalance)
    cload = np.bincount(part, weights=nnz, minlength=k).astype(np.int64)
    info = {"moved": [0, 0], "compute_limit": int(c_limit), "balance_limit": int(w_limit),
            "heaviest_before": int(cload.max(initial=0))}
    if (cload > c_limit).any():
        # a row's volume is at most its degree (the rows it reads + the rows reading it): cheap rows first
        indeg = np.bincount(graph.indices, minlength=graph.n)
        rows = np.flatnonzero((cload[part] > c_limit) & (nnz > 0))
        cload, info["moved"][0], _ = _shed(graph.indptr, graph.indices, nnz, part, k, c_limit, rows, max_passes,
                                           cost=nnz + indeg, near_passes=NEAR_PASSES)
    wload = np.bincount(part, weights=w, minlength=k)
    if (wload > w_limit).any():
        At = graph.transpose()
        rows = np.flatnonzero((wload[part] > w_limit) & (nnz == 0))
        _, info["moved"][1], _ = _shed(At.indptr, At.indices, w, part, k, w_limit, rows, max_passes,
                                       cost=_reader_parts(At, part, rows, k), near_passes=NEAR_PASSES)
    info["heaviest_after"] = int(cload.max(initial=0))
    return part, info


def most_rows(w: np.ndarray, limit: int) -> int:
    """The most rows of weights ``w`` one part of weight at most ``limit`` can hold: the lightest
    ones, as many as fit (k parts hold at most k times that many rows).

    >>> most_rows(np.array([2, 2, 2, 2]), 5)
    2
    """
    light = np.cumsum(np.sort(np.asarray(w, np.int64)))
    return int(np.searchsorted(light, int(limit), side="right"))


def bins_needed(w: np.ndarray, limit: int) -> int:
    """A lower bound on the parts of weight at most ``limit`` the rows of weights ``w`` (int, each
    at most ``limit``) need: Martello and Toth's L2 bound for bin packing — for every α ≤ limit / 2,
    the rows above limit − α each need a part of their own, those above limit / 2 too, and the rows
    of [α, limit / 2] fill what room those leave before opening more. At least ⌈Σw / limit⌉.

    >>> bins_needed(np.array([3, 3, 3]), 5), bins_needed(np.array([4, 4, 1, 1]), 5)
    (3, 2)
    """
    w = np.sort(np.asarray(w, np.int64))
    L = int(limit)
    if w.size == 0 or L <= 0:
        return 0
    best = -(-int(w.sum()) // L)
    prefix = np.concatenate([[0], np.cumsum(w)])
    big = w[2 * w > L]                                   # above L / 2: one part each
    n_big, sum_big = big.size, int(big.sum())
    first_big = w.size - n_big
    for a in np.unique(w[(w >= 0) & (2 * w <= L)]).tolist():
        j1 = n_big - int(np.searchsorted(big, L - a, side="right"))      # above L − α
        lo = int(np.searchsorted(w, a, side="left"))                    # [α, L/2]: rows lo .. first_big
        s3 = int(prefix[first_big] - prefix[lo])
        s2 = sum_big - int(big[big > L - a].sum())                        # J2: (L/2, L − α]
        n2 = n_big - j1
        room = n2 * L - s2
        best = max(best, j1 + n2 + max(0, -(-(s3 - room) // L)))
    return max(best, n_big)

