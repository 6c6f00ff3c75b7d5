"""Decoupled ownership of H rows: choose who sends each row (total volume never grows).

In 1D SpMM ``Z = A @ H`` the rows of A (compute) are split by ``part``. Row
``H[j]`` is needed by the parts that read it, R_j = {part[i] : A[i, j] != 0};
the assignment works on the sets

    Λ_j = R_j, or {part[j]} when no row reads column j     (λ_j = |Λ_j|)

Conformal ownership sends ``H[j]`` from ``part[j]`` (to R_j, plus nothing:
Σ_j (|R_j ∪ {part[j]}| − 1) rows). When H's rows may live elsewhere (layer-0
input features are static; a feature store; mini-batch training), any owner
``o_j ∈ Λ_j`` gives the same total volume Σ_j (λ_j − 1) — at most the
conformal one, smaller by one row for every column whose own part does not
read it (A without that diagonal entry) — and moves the load between ranks
(an owner ``part[j] ∉ R_j`` is accepted by :func:`owner_stats`; it sends to
all of R_j):

    send_p = Σ_{j : o_j = p} (λ_j − 1)
    recv_p = |{j : p ∈ Λ_j, o_j ≠ p}|

(Bisseling & Meesen, ETNA 2005; Uçar & Aykanat, SISC 2004). This module picks
owners to minimize the bottleneck:

* ``method="greedy"``: cut nets by decreasing λ_j to the part of Λ_j with
  the least send load, then single-net moves (push a net off the bottleneck,
  or, for "max-both", pull a net into it to cut its recv) while they strictly
  lower the bottleneck (Python loop over moves, numpy per move). Reaches the
  bound for "max-send"; for "max-both" single-net moves stall a few percent
  above it (measured ~7 %); use "lp" there.
* ``method="lp"``: the LP relaxation (min M s.t. Σ_p x_jp = 1, send_p ≤ M
  [, recv_p ≤ M]) solved by CBC through PuLP, rounded by argmax, then the
  same improvement moves.

:func:`owner_lower_bound` gives a bound on the best possible max: the average
load ⌈TV/k⌉ and max_j(λ_j − 1) for "max-send", plus ⌈LP optimum⌉ (solved by
HiGHS through ``scipy.optimize.linprog``) for "max-both".
:func:`owner_stats` counts the exchange under a given owner map, as a
:class:`partplan.CommStats` (:func:`partplan.metrics.analyze_owned`): exactly
what the plan sends — ``H[j]`` goes to the parts that *read* column j, so when
``o_j ≠ part[j]`` and no row of ``part[j]`` reads column j (A without that
diagonal entry) ``part[j]`` receives nothing and the exchange is one row
smaller than the model's Σ_j (λ_j − 1); the loads above are then upper bounds.
"""
from __future__ import annotations

import math
import time
import warnings

import numpy as np
import scipy.sparse as sp

from ...errors import BackendUnavailableError, PartitionError
from ...graph import Graph
from ...metrics.ownership import ConnectivitySets as _Nets
from ...metrics.ownership import owner_stats  # noqa: F401  (re-exported: partplan.owner_stats)
from ...parts import as_partition

from ..objectives import OWNER_OBJECTIVES, check_objective  # noqa: E402
from ...graph import check_graph  # noqa: E402

OWNER_METHODS = ("greedy", "lp")


# ------------------------------------------------------------------ greedy
def _cost(send, recv, objective):
    return send if objective == "max-send" else np.maximum(send, recv)


def _greedy_initial(nets: _Nets, objective: str) -> np.ndarray:
    """Cut nets by decreasing λ to the part of Λ_j with the lowest resulting cost."""
    k = nets.k
    owner = np.full(nets.n, -1, dtype=np.int64)
    single = nets.lam == 1
    owner[single] = nets.p[nets.ptr[:-1][single]]
    send = np.zeros(k, dtype=np.int64)
    recv = nets.deg - np.bincount(owner[single], minlength=k)   # not yet owned: every pin part receives
    cut = np.flatnonzero(~single)
    order = cut[np.argsort(-nets.lam[cut], kind="stable")]
    ptr, P, lam = nets.ptr, nets.p, nets.lam
    both = objective == "max-both"
    # one Python step per cut net (inherently sequential); numpy on the ≤ k candidates
    for j in order.tolist():
        cand = P[ptr[j]:ptr[j + 1]]
        w = lam[j] - 1
        if both:
            c = np.maximum(send[cand] + w, recv[cand] - 1)
            pick = cand[np.lexsort((send[cand], c))[0]]
        else:
            pick = cand[np.argmin(send[cand])]
        owner[j] = pick
        send[pick] += w
        recv[pick] -= 1
    return owner


def _improve(nets: _Nets, owner: np.ndarray, objective: str, deadline: float | None,
             max_iter: int = 100_000) -> np.ndarray:
    """Move single nets off the bottleneck part while that strictly lowers its
    cost without another part reaching the old maximum."""
    owner = owner.copy()
    send, recv = nets.loads(owner)
    pj, pp = nets.j, nets.p
    w_pair = nets.lam[pj] - 1
    keep = w_pair > 0
    pj, pp, w_pair = pj[keep], pp[keep], w_pair[keep]
    both = objective == "max-both"
    for _ in range(max_iter):
        if deadline is not None and time.perf_counter() > deadline:
            break
        cost = _cost(send, recv, objective)
        top = int(np.argmax(cost))
        m = cost[top]
        # push: a net owned by top goes to another part q of its Λ
        mask = (owner[pj] == top) & (pp != top)
        j, q, w = pj[mask], pp[mask], w_pair[mask]
        src = np.full(j.size, top)
        if both:
            # pull: a net whose Λ holds top, owned by q, comes to top (lowers top's recv)
            pull = (pp == top) & (owner[pj] != top)
            j = np.concatenate([j, pj[pull]])
            src = np.concatenate([src, owner[pj[pull]]])
            q = np.concatenate([q, np.full(int(pull.sum()), top)])
            w = np.concatenate([w, w_pair[pull]])
        if j.size == 0:
            break
        new_src = np.maximum(send[src] - w, recv[src] + 1) if both else send[src] - w
        new_q = np.maximum(send[q] + w, recv[q] - 1) if both else send[q] + w
        worst = np.maximum(new_src, new_q)
        i = int(np.argmin(worst))
        if worst[i] >= m:
            break
        jj, ss, qq, ww = int(j[i]), int(src[i]), int(q[i]), int(w[i])
        owner[jj] = qq
        send[ss] -= ww
        send[qq] += ww
        recv[ss] += 1
        recv[qq] -= 1
    return owner


# ---------------------------------------------------------------------- LP
def _lp_matrices(nets: _Nets, objective: str):
    """Matrix form of the LP over the cut nets' (net, part) pairs plus M (last column).

    min M  s.t.  Σ_p x_jp = 1 (each cut net);  Σ_j w_j x_jp − M ≤ 0 (send);
    [deg_p − Σ_j x_jp − M ≤ 0 (recv, "max-both")];  0 ≤ x ≤ 1.
    Uncut nets (λ = 1) have no choice and contribute nothing.
    """
    k = nets.k
    cut = nets.lam >= 2
    sel = cut[nets.j]
    pj, pp = nets.j[sel], nets.p[sel]
    w = (nets.lam[pj] - 1).astype(np.float64)
    nv = pj.size
    cut_ids, row_eq = np.unique(pj, return_inverse=True)
    A_eq = sp.csr_matrix((np.ones(nv), (row_eq, np.arange(nv))), shape=(cut_ids.size, nv + 1))
    b_eq = np.ones(cut_ids.size)
    A_send = sp.csr_matrix((w, (pp, np.arange(nv))), shape=(k, nv + 1)).tolil()
    A_send[:, nv] = -1.0
    blocks, rhs = [A_send.tocsr()], [np.zeros(k)]
    if objective == "max-both":
        deg_cut = np.bincount(pp, minlength=k).astype(np.float64)
        A_recv = sp.csr_matrix((-np.ones(nv), (pp, np.arange(nv))), shape=(k, nv + 1)).tolil()
        A_recv[:, nv] = -1.0
        blocks.append(A_recv.tocsr())
        rhs.append(-deg_cut)
    return pj, pp, A_eq, b_eq, sp.vstack(blocks).tocsr(), np.concatenate(rhs)


def _lp_highs(nets: _Nets, objective: str, time_limit: float | None):
    from scipy.optimize import linprog

    pj, pp, A_eq, b_eq, A_ub, b_ub = _lp_matrices(nets, objective)
    c = np.zeros(pj.size + 1)
    c[-1] = 1.0
    opts = {} if time_limit is None else {"time_limit": float(time_limit)}
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq,
                  bounds=[(0, 1)] * pj.size + [(0, None)], method="highs", options=opts)
    if res.status != 0:
        raise PartitionError(f"HiGHS could not solve the ownership LP: {res.message}")
    return pj, pp, res.x[:-1], float(res.fun)


def _lp_cbc(nets: _Nets, objective: str, time_limit: float | None):
    """The same LP through PuLP / CBC (rows built from the sparse matrices)."""
    import pulp

    pj, pp, A_eq, b_eq, A_ub, b_ub = _lp_matrices(nets, objective)
    nv = pj.size
    prob = pulp.LpProblem("ownership", pulp.LpMinimize)
    x = [prob.add_variable(f"x{i}", 0, 1) for i in range(nv)]
    M = prob.add_variable("M", 0)
    allv = x + [M]
    prob += M
    for A, b, sense in ((A_eq, b_eq, "eq"), (A_ub, b_ub, "le")):
        A = A.tocsr()
        for r in range(A.shape[0]):
            cols = A.indices[A.indptr[r]:A.indptr[r + 1]]
            vals = A.data[A.indptr[r]:A.indptr[r + 1]]
            expr = pulp.LpAffineExpression(zip((allv[c] for c in cols), vals.tolist()))
            prob += (expr == b[r]) if sense == "eq" else (expr <= b[r])
    with warnings.catch_warnings():
        # PuLP 3.3 flags PULP_CBC_CMD (its bundled CBC binary) as deprecated in favour of
        # COIN_CMD, which needs a system CBC; the bundled one is the one installed here
        warnings.simplefilter("ignore", DeprecationWarning)
        solver = pulp.PULP_CBC_CMD(msg=False, timeLimit=None if time_limit is None else float(time_limit))
        status = prob.solve(solver)
    if pulp.LpStatus[status] != "Optimal":
        raise PartitionError(f"CBC did not solve the ownership LP to optimality: {pulp.LpStatus[status]}")
    vals = np.array([v.varValue or 0.0 for v in x])
    return pj, pp, vals, float(M.varValue)


def _round(nets: _Nets, pj, pp, xval) -> np.ndarray:
    """owner[j] = the part with the largest LP share (uncut nets: their only part)."""
    owner = np.full(nets.n, -1, dtype=np.int64)
    single = nets.lam == 1
    owner[single] = nets.p[nets.ptr[:-1][single]]
    order = np.lexsort((-xval, pj))               # per net, largest x first
    first = np.ones(order.size, dtype=bool)
    first[1:] = pj[order][1:] != pj[order][:-1]
    owner[pj[order][first]] = pp[order][first]
    return owner


def assign_owners(graph: Graph, part, k: int | None = None, *, method: str = "greedy",
                  objective: str = "max-both", time_limit: float | None = None,
                  solver: str = "cbc", return_info: bool = False):
    """Owner part of every row of H (decoupled ownership), total volume unchanged.

    Parameters
    ----------
    part : int[n] row partition (compute), k parts.
    method : "greedy" (any size) or "lp" (LP relaxation by PuLP/CBC, rounded,
        then greedy improvement; for k ≤ 64 and up to ~20k cut nets).
    objective : "max-send" (max_p send_p) or "max-both" (max_p max(send_p, recv_p)).
    time_limit : seconds for the LP solver / the improvement loop.
    solver : LP engine for method="lp": "cbc" (PuLP + CBC, default) or
        "highs" (scipy.optimize.linprog; much faster to build on large inputs).
    return_info : also return a dict (seconds, LP value, bound, figures).

    Returns
    -------
    owner int64[n] with owner[j] ∈ Λ_j (see module doc) [, info].

    Examples
    --------
    >>> import numpy as np
    >>> from partplan import Graph
    >>> g = Graph.from_edges([0, 0, 0], [1, 2, 3], symmetrize=True)      # star, centre 0
    >>> part = np.array([0, 1, 1, 1])      # 4 cut nets, each between parts 0 and 1
    >>> owner = assign_owners(g, part, 2, objective="max-send")
    >>> owner.tolist()                     # each row of H held by the part that reads it
    [1, 0, 0, 0]
    >>> s = owner_stats(g, part, owner, 2)
    >>> s.total_volume, s.max_send                     # conformal (owner = part): 4 and 3
    (0, 0)
    """
    check_graph(graph, error=PartitionError)
    from ..._args import check_bool
    return_info = check_bool("return_info", return_info, error=PartitionError)
    if time_limit is not None:
        from ..options import check_real
        time_limit = check_real("time_limit", time_limit, error=PartitionError)
    t0 = time.perf_counter()
    if method not in OWNER_METHODS:
        raise PartitionError(f"unknown ownership method {method!r}; choose one of {', '.join(OWNER_METHODS)}")
    check_objective(objective, OWNER_OBJECTIVES, "ownership objective")
    if solver not in ("cbc", "highs"):
        raise PartitionError(f"unknown LP solver {solver!r}; choose cbc or highs")
    part, k = as_partition(part, graph.n, k)
    nets = _Nets(graph, part, k)
    deadline = None if time_limit is None else t0 + float(time_limit)
    info: dict = {"method": method, "objective": objective}
    if method == "greedy":
        # send-balanced start (measured better than a max(send, recv) greedy
        # start for "max-both": 385 vs 398 against an LP bound of 360)
        owner = _greedy_initial(nets, "max-send")
    else:
        try:
            import pulp  # noqa: F401
        except ImportError as exc:  # pragma: no cover - pulp is a dependency
            raise BackendUnavailableError("method='lp' needs PuLP (pip install pulp)") from exc
        if (nets.lam >= 2).any():
            solve = _lp_cbc if solver == "cbc" else _lp_highs
            pj, pp, xval, lpval = solve(nets, objective, time_limit)
            owner = _round(nets, pj, pp, xval)
            info["lp_value"] = lpval
        else:
            owner = nets.p[nets.ptr[:-1]].copy()
            info["lp_value"] = 0.0
    info["initial_max"] = int(_cost(*nets.loads(owner), objective).max())
    owner = _improve(nets, owner, objective, deadline)
    send, recv = nets.loads(owner)
    info.update(max_send=int(send.max()), max_recv=int(recv.max()),
                max_send_recv=int(np.maximum(send, recv).max()), total_volume=nets.tv,
                seconds=time.perf_counter() - t0)
    return (owner, info) if return_info else owner


def owner_lower_bound(graph: Graph, part, k: int | None = None, *, objective: str = "max-both",
                      method: str | None = None, time_limit: float | None = None) -> int:
    """A lower bound on min over owner maps of the max load (rows of H).

    "max-send": max(⌈TV/k⌉, max_j (λ_j − 1)) (average load; the biggest net
    must be sent whole by someone). "max-both": additionally ⌈LP optimum⌉ of
    the relaxation (HiGHS via scipy), which is tighter because a part's recv
    can only drop by the nets it owns. ``method`` = "average" skips the LP,
    "lp" forces it (default: "average" for max-send, "lp" for max-both).
    """
    check_graph(graph, error=PartitionError)
    check_objective(objective, OWNER_OBJECTIVES, "ownership objective")
    if method is None:
        method = "lp" if objective == "max-both" else "average"
    if method not in ("average", "lp"):
        raise PartitionError(f"unknown bound method {method!r}; choose average or lp")
    if time_limit is not None:
        from ..options import check_real
        time_limit = check_real("time_limit", time_limit, error=PartitionError)
    part, k = as_partition(part, graph.n, k)
    nets = _Nets(graph, part, k)
    bound = max(-(-nets.tv // k), int((nets.lam - 1).max()) if nets.n else 0)
    if method == "lp" and (nets.lam >= 2).any():
        _, _, _, val = _lp_highs(nets, objective, time_limit)
        bound = max(bound, int(math.ceil(val - 1e-6)))
    return int(bound)
