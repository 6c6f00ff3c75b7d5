"""Who steals how much: the per-level work assignment of frontier stealing.

Rank i holds ``l_i`` frontier edges (int). Worker j processing x_ij of rank
i's edges costs ``c_ij`` per edge (``c_ii`` = local processing, ``c_ij``
(i ≠ j) = processing plus the link between i and j). The assignment solves

    min z   s.t.   z >= Σ_i c_ij x_ij   for every worker j in the active set,
                   Σ_j x_ij = l_i,      x_ij >= 0 integer (x_ij = 0 for inactive j).

Solvers (:data:`SOLVERS`): ``cbc`` (PuLP + CBC, exact MILP), ``highs``
(``scipy.optimize.milp``, exact MILP) and ``lp`` (the LP relaxation by
``scipy.optimize.linprog(method="highs")``, rounded row by row by largest
remainder). Rounding bound: each rounded entry exceeds its LP value by < 1
and only where the LP value is fractional, so worker j's cost grows by less
than Σ_{i: l_i > 0} c_ij; hence ``z_lp_rounded <= z_LP + max_j Σ_{i: l_i>0} c_ij
<= z_MILP + that`` (:func:`rounding_bound`).

Every rank calls :func:`solve` on the same all-gathered loads; the solvers
are deterministic (single thread), and the caller checks that all ranks got
the same answer.

Examples
--------
>>> import numpy as np
>>> c = np.array([[1.0, 2.0], [2.0, 1.0]])
>>> a = solve([9, 0], c, "highs")
>>> a.x.tolist(), a.z
([[6, 3], [0, 0]], 6.0)
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..errors import PlanError

SOLVERS = ("cbc", "highs", "lp")


@dataclass
class Assignment:
    """x[i, j] edges of rank i processed by worker j (int64[p, p], rows sum to
    the loads), z = its max worker cost, z_lp = the LP bound (when the solver
    computed it, else nan), solve seconds."""

    x: np.ndarray
    z: float
    z_lp: float
    solve_s: float
    solver: str


def worker_costs(x: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Modeled cost of every worker j: Σ_i c_ij x_ij (float64[p])."""
    return (np.asarray(x, dtype=np.float64) * c).sum(axis=0)


def check_costs(c, p: int) -> np.ndarray:
    """The cost matrix as float64[p, p] with positive finite entries, else one PlanError."""
    a = np.asarray(c, dtype=np.float64)
    if a.shape != (p, p):
        raise PlanError(f"steal cost matrix must be {p} x {p} (ranks), got shape {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        i, j = np.argwhere(~np.isfinite(a) | (a <= 0))[0]
        raise PlanError(f"steal cost matrix entry [{i}][{j}] = {a[i, j]!r}: every cost must be finite and > 0")
    return a


def _model(loads: np.ndarray, c: np.ndarray, active: np.ndarray):
    """Variables x_ij for rows with l_i > 0 and active columns j, then z.
    Returns (rows, cols, A_ub, A_eq) as dense-free sparse triplets."""
    import scipy.sparse as sp
    rows = np.flatnonzero(loads > 0)
    cols = np.flatnonzero(active)
    R, C = rows.size, cols.size
    nv = R * C + 1
    # worker constraints: Σ_i c_ij x_ij - z <= 0
    ii, jj = np.meshgrid(np.arange(R), np.arange(C), indexing="ij")
    var = (ii * C + jj).ravel()
    a_ub = sp.csr_matrix((np.concatenate([c[rows][:, cols].ravel(), -np.ones(C)]),
                          (np.concatenate([jj.ravel(), np.arange(C)]), np.concatenate([var, np.full(C, nv - 1)]))),
                         shape=(C, nv))
    a_eq = sp.csr_matrix((np.ones(R * C), (ii.ravel(), var)), shape=(R, nv))
    return rows, cols, a_ub, a_eq


def _scatter(p: int, rows, cols, xv) -> np.ndarray:
    x = np.zeros((p, p), dtype=np.int64)
    x[np.ix_(rows, cols)] = np.asarray(xv, dtype=np.int64).reshape(rows.size, cols.size)
    return x


def round_rows(xf: np.ndarray, loads: np.ndarray) -> np.ndarray:
    """Round each row of a nonnegative real matrix to integers summing to
    ``loads[i]`` by largest remainder (ties: lower column first)."""
    xf = np.maximum(np.asarray(xf, dtype=np.float64), 0.0)
    fl = np.floor(xf + 1e-9).astype(np.int64)
    need = np.asarray(loads, dtype=np.int64) - fl.sum(axis=1)
    frac = xf - fl
    order = np.argsort(-frac, axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(xf.shape[1])[None, :].repeat(xf.shape[0], 0), axis=1)
    # need may be negative only through float noise in the LP; take from the largest entries then
    add = (rank < np.maximum(need, 0)[:, None]).astype(np.int64)
    out = fl + add
    for i in np.flatnonzero(need < 0):  # loop over (rare) rows only
        k = -int(need[i])
        for j in np.argsort(-out[i], kind="stable")[:k]:
            out[i, j] -= 1
    return out


def rounding_bound(loads, c, active=None) -> float:
    """max_j Σ_{i: l_i > 0} c_ij over active j: lp-rounded z <= z_LP + this."""
    loads = np.asarray(loads)
    act = np.ones(c.shape[0], bool) if active is None else np.asarray(active, bool)
    return float(c[loads > 0][:, act].sum(axis=0).max()) if (loads > 0).any() else 0.0


def _lp(loads, c, active):
    from scipy.optimize import linprog
    p = c.shape[0]
    rows, cols, a_ub, a_eq = _model(loads, c, active)
    nv = a_ub.shape[1]
    obj = np.zeros(nv)
    obj[-1] = 1.0
    r = linprog(obj, A_ub=a_ub, b_ub=np.zeros(a_ub.shape[0]), A_eq=a_eq, b_eq=loads[rows].astype(np.float64),
                bounds=[(0, None)] * nv, method="highs")
    if r.status != 0:
        raise PlanError(f"steal LP failed: {r.message}")
    xf = np.zeros((p, p))
    xf[np.ix_(rows, cols)] = r.x[:-1].reshape(rows.size, cols.size)
    return xf, float(r.x[-1])


def _highs(loads, c, active, gap, time_limit):
    from scipy.optimize import Bounds, LinearConstraint, milp
    rows, cols, a_ub, a_eq = _model(loads, c, active)
    nv = a_ub.shape[1]
    obj = np.zeros(nv)
    obj[-1] = 1.0
    integ = np.ones(nv)
    integ[-1] = 0
    lo = loads[rows].astype(np.float64)
    r = milp(obj, integrality=integ, bounds=Bounds(0, np.inf),
             constraints=[LinearConstraint(a_ub, -np.inf, 0), LinearConstraint(a_eq, lo, lo)],
             options={"mip_rel_gap": gap, "time_limit": time_limit, "presolve": True})
    if r.x is None:
        raise PlanError(f"steal MILP (highs) found no solution: {r.message}")
    return _scatter(c.shape[0], rows, cols, np.rint(r.x[:-1]))


def _cbc(loads, c, active, gap, time_limit):
    import warnings

    import pulp
    rows, cols = np.flatnonzero(loads > 0), np.flatnonzero(active)
    prob = pulp.LpProblem("fsteal", pulp.LpMinimize)
    z = prob.add_variable("z", 0)
    x = {(i, j): prob.add_variable(f"x_{i}_{j}", 0, None, cat="Integer") for i in rows for j in cols}
    prob += z
    for j in cols:  # loops over ranks (model building)
        prob += pulp.lpSum(float(c[i, j]) * x[i, j] for i in rows) <= z
    for i in rows:
        prob += pulp.lpSum(x[i, j] for j in cols) == int(loads[i])
    with warnings.catch_warnings():
        # PuLP 3.3 flags PULP_CBC_CMD (its bundled CBC binary) as deprecated in favour of COIN_CMD,
        # which needs a system CBC; the bundled one is the one installed here (as partition/refinement/ownership.py)
        warnings.simplefilter("ignore", DeprecationWarning)
        st = prob.solve(pulp.PULP_CBC_CMD(msg=False, threads=1, gapRel=gap, timeLimit=time_limit))
    vals = [x[i, j].value() for i in rows for j in cols]
    if any(v is None for v in vals):
        raise PlanError(f"steal MILP (cbc) found no solution: status {pulp.LpStatus[st]}")
    return _scatter(c.shape[0], rows, cols, np.rint(vals))


def solve(loads, c, solver: str = "highs", *, active=None, gap: float = 1e-3,
          time_limit: float = 10.0, lp_bound: bool = False) -> Assignment:
    """The assignment for per-rank ``loads`` (edges) and costs ``c`` (see the
    module doc); ``active`` bool[p] restricts the workers (OSteal); ``gap``
    the MILP's relative gap (0 = proven optimum), ``lp_bound`` also solves the
    LP relaxation (for ``z_lp``; the ``lp`` solver always has it).

    Rows of x always sum to the loads exactly; an inactive worker gets nothing."""
    if solver not in SOLVERS:
        raise PlanError(f"steal solver must be one of {', '.join(SOLVERS)}, got {solver!r}")
    loads = np.asarray(loads, dtype=np.int64)
    p = loads.size
    c = check_costs(c, p)
    if (loads < 0).any():
        raise PlanError(f"steal loads must be >= 0, got {loads.tolist()}")
    act = np.ones(p, bool) if active is None else np.asarray(active, bool)
    if act.shape != (p,) or not act.any():
        raise PlanError("steal: the active worker set must be a nonempty bool[p]")
    t0 = time.perf_counter()
    z_lp = float("nan")
    if not (loads > 0).any():
        x = np.zeros((p, p), np.int64)
    elif solver == "lp":
        xf, z_lp = _lp(loads, c, act)
        x = round_rows(xf, loads)
    else:
        x = (_highs if solver == "highs" else _cbc)(loads, c, act, gap, time_limit)
        if lp_bound:
            z_lp = _lp(loads, c, act)[1]
    solve_s = time.perf_counter() - t0
    if not np.array_equal(x.sum(axis=1), loads) or (x < 0).any() or x[:, ~act].any():
        raise PlanError(f"steal solver {solver} returned an assignment that does not cover the loads")
    return Assignment(x, float(worker_costs(x, c).max()), z_lp, solve_s, solver)


__all__ = ["SOLVERS", "Assignment", "solve", "round_rows", "rounding_bound", "worker_costs", "check_costs"]
