"""Dynamic load balance of traversal levels: frontier stealing (FSteal),
ownership stealing on long sparse tails (OSteal) and hub caching.

**Load model.** On a 1D plan a top-down BFS level (or an SSSP round) on rank
i expands the frontier columns (own + ghost) of its CSC block of ``A^T``:
``l_i`` = the sum of their lengths (edges). Worker j processing x_ij of those
edges costs ``c_ij`` per edge (:func:`cost_matrix`: ``local`` on the diagonal,
``local + link cost`` off it, from a :class:`~partplan.topology.Topology`).
``load_max_over_mean`` = max/mean over ranks of ``c_ii·l_i`` (before),
``load_max_over_mean_after`` = max/mean over the active ranks of
``Σ_i c_ij a_ij`` with a_ij the edges actually moved (after range cutting).

**FSteal.** Per level the loads are all-gathered (one world all-reduce of
3·p float64); when ``max l >= t1`` and ``max l - min l >= t2`` every rank
solves the same assignment (:mod:`.steal_solve`) and checks, on multi-process
jobs, that all ranks got the same x. Victim i cuts its frontier column list
into contiguous ranges by degree prefix sums + ``np.searchsorted``
(:func:`cut_ranges`; columns are not split: the largest frontier column
bounds the balance) and ships to stealer j, per stolen column: its global
id (int64), length (int64, −1 for a cached hub), for SSSP its distance
(float64); then the rows of the non-cached columns (int32 positions in i's
block) and, for SSSP, their weights (float64). The stealer expands them and
returns one (row int32, value float64) per distinct row: the smallest
candidate parent id (BFS) or tentative distance (SSSP); the owner keeps
the minimum for its unvisited / improved rows — the same result as
expanding them itself. ``steal_bytes`` = those payloads, both ways (= the
comm counters' bytes of the steal exchange, checked).

**Hub cache.** Columns of vertices of degree > ``t4`` are replicated from
every rank's block to every other rank at engine set-up (``hub_cache_bytes``:
what all ranks hold in addition), so stealing them ships 16 bytes.

**OSteal** (:class:`OwnershipPolicy`): on tails (previous level shorter
than ``t3`` seconds) choose the number m of active ranks from a reduction
tree over the cheapest links minimizing ``κ·z_m + π·m`` (z_m = modeled
per-worker cost with m workers, κ seconds per cost unit and π seconds per
active rank per level fitted by non-negative least squares over the
previous levels); when the load per active rank reaches ``t1`` (work grew)
every rank takes part again.
Inactive ranks give their whole frontier to active ones (forced steal);
they still own their vertices' state (the merge of returned candidates),
which is cheap on a tail.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import PlanError
from .steal_solve import SOLVERS, solve, worker_costs

STEAL_MODES = ("none", "fsteal", "fsteal+osteal")


@dataclass
class StealConfig:
    """mode (:data:`STEAL_MODES`), solver, t1 (edges: min max-load that
    triggers), t2 (edges: min max − min), t3 (seconds: OSteal decides only
    after a level shorter than this), t4 (degree above which a vertex's
    adjacency is cached on every rank; 0 = no cache), costs (float64[p, p]
    or None = uniform: local 1, link 1), gap (MILP relative gap)."""

    mode: str = "fsteal"
    solver: str = "lp"
    t1: float = 1000.0
    t2: float = 500.0
    t3: float = 2e-3
    t4: float = 0.0
    costs: np.ndarray | None = None
    gap: float = 1e-3

    def check(self) -> "StealConfig":
        if self.mode not in STEAL_MODES:
            raise PlanError(f"--steal must be one of {', '.join(STEAL_MODES)}, got {self.mode!r}")
        if self.solver not in SOLVERS:
            raise PlanError(f"--steal-solver must be one of {', '.join(SOLVERS)}, got {self.solver!r}")
        for k in ("t1", "t2", "t3", "t4"):
            v = getattr(self, k)
            if not (np.isfinite(v) and v >= 0):
                raise PlanError(f"--{k} must be a finite number >= 0, got {v!r}")
        return self

    @classmethod
    def from_cfg(cls, cfg: dict, p: int) -> "StealConfig | None":
        """From a job config's ``steal`` dict (None = no balancer)."""
        s = cfg.get("steal")
        if not s:
            return None
        sc = cls(mode=s.get("mode", "fsteal"), solver=s.get("solver", "lp"),
                 t1=float(s.get("t1", 1000.0)), t2=float(s.get("t2", 500.0)), t3=float(s.get("t3", 2e-3)),
                 t4=float(s.get("t4", 0.0)), gap=float(s.get("gap", 1e-3)))
        sc.costs = cost_matrix(s.get("topology"), p, float(s.get("local_cost", 1.0)))
        return sc.check()


def cost_matrix(topology=None, p: int = 1, local: float = 1.0) -> np.ndarray:
    """c[i, j] per edge: ``local`` on the diagonal, ``local + link cost`` off
    it; ``topology`` = a Topology, preset string or JSON path (its ``cost``
    matrix; checked for p ranks), or None (every link cost 1).

    >>> cost_matrix("tree:2x2", 4)[0].tolist()
    [1.0, 2.0, 11.0, 11.0]
    """
    if not local > 0:
        raise PlanError(f"local processing cost must be > 0, got {local}")
    if topology is None:
        link = np.ones((p, p))
    else:
        from ..topology import load_topology
        link = np.asarray(load_topology(topology, p).cost, dtype=np.float64)
    c = local + link
    np.fill_diagonal(c, local)
    return c


def cut_ranges(deg: np.ndarray, amounts: np.ndarray) -> np.ndarray:
    """Boundaries (int64[k+1]) cutting a column list of degrees ``deg`` into k
    contiguous ranges whose edge counts are nearest to ``amounts`` (summing to
    deg.sum()): range k = columns [b[k], b[k+1]). Each cut is at the prefix
    sum nearest the target (``np.searchsorted`` on the degree prefix sums).

    >>> cut_ranges(np.array([3, 1, 4, 1, 5]), np.array([4, 5, 5])).tolist()
    [0, 2, 4, 5]
    """
    deg = np.asarray(deg, dtype=np.int64)
    s = np.concatenate([[0], np.cumsum(deg)])
    t = np.cumsum(np.asarray(amounts, dtype=np.int64))[:-1]
    k = np.searchsorted(s, t, side="left")
    k = np.clip(k, 1, s.size - 1) if s.size > 1 else np.zeros_like(k)
    lo = np.maximum(k - 1, 0)
    pick = np.where(np.abs(s[lo] - t) <= np.abs(s[k] - t), lo, k)
    pick = np.maximum.accumulate(pick) if pick.size else pick
    return np.concatenate([[0], pick, [deg.size]]).astype(np.int64)


def _gather_slices(ptr: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Positions ptr-slices [starts[k], starts[k] + lens[k]) concatenated (vectorized)."""
    tot = int(lens.sum())
    if tot == 0:
        return np.zeros(0, np.int64)
    off = np.concatenate([[0], np.cumsum(lens)[:-1]])
    return np.repeat(starts - off, lens) + np.arange(tot, dtype=np.int64)


def min_per_row(rows: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows, smallest value of each) — vectorized."""
    if rows.size == 0:
        return rows.astype(np.int64), vals.astype(np.float64)
    o = np.lexsort((vals, rows))
    r, v = rows[o], vals[o]
    first = np.concatenate([[True], r[1:] != r[:-1]])
    return r[first].astype(np.int64), v[first]


# ----------------------------------------------------------------------------- byte exchange
def exchange_bytes(comm, family: str, payloads: list[list[np.ndarray]], what: str) -> list[list[np.ndarray]]:
    """Every local rank sends ``payloads[i][j]`` (uint8) to group-rank j of the
    family; returns what each local rank received, per source group-rank."""
    from .traversal import _as_comm, _to_np
    sizes = [np.array([b.size for b in row], dtype=np.int64) for row in payloads]
    got = comm.exchange_counts(family, sizes)
    sends = [np.concatenate(row) if row else np.zeros(0, np.uint8) for row in payloads]
    outs = [np.empty(int(g.sum()), np.uint8) for g in got]
    torch_ = hasattr(comm, "torch")
    touts = [_as_comm(comm, o) for o in outs] if torch_ else outs
    comm.alltoallv(family, [_as_comm(comm, s) for s in sends], sizes, got, touts, what=what)
    if torch_:  # CPU tensors share the numpy buffers; CUDA ones are copied back
        outs = [_to_np(o) for o in touts] if comm.device.type == "cuda" else outs
    res = []
    for o, g in zip(outs, got):
        off = np.concatenate([[0], np.cumsum(g)])
        res.append([o[off[j]:off[j + 1]] for j in range(g.size)])
    return res


def _u8(*arrays) -> np.ndarray:
    parts = [np.ascontiguousarray(a).view(np.uint8) for a in arrays if a is not None]
    return np.concatenate(parts) if parts else np.zeros(0, np.uint8)


# ----------------------------------------------------------------------------- hub cache
@dataclass
class HubBlock:
    """Cached columns of one rank's block: sorted global ids, CSC pointers,
    row positions (int32, in that rank's block), weights or None."""

    gids: np.ndarray
    indptr: np.ndarray
    rows: np.ndarray
    w: np.ndarray | None

    @property
    def nbytes(self) -> int:
        return int(self.gids.nbytes + self.indptr.nbytes + self.rows.nbytes + (0 if self.w is None else self.w.nbytes))


def _hub_block(rg, hub: np.ndarray, weighted: bool) -> HubBlock:
    lens = np.diff(rg.cindptr)
    cols = np.flatnonzero(hub[rg.ext_ids] & (lens > 0))
    cols = cols[np.argsort(rg.ext_ids[cols], kind="stable")]
    pos = _gather_slices(rg.cindptr, rg.cindptr[cols], lens[cols])
    w = None if not weighted else (np.ones(pos.size) if rg.cdata is None else rg.cdata[pos])
    return HubBlock(rg.ext_ids[cols].astype(np.int64), np.concatenate([[0], np.cumsum(lens[cols])]).astype(np.int64),
                    rg.crows[pos].astype(np.int32), w)


def _pack_hub(b: HubBlock) -> np.ndarray:
    return _u8(np.array([b.gids.size, b.rows.size], np.int64), b.gids, b.indptr, b.rows, b.w)


def _unpack_hub(buf: np.ndarray, weighted: bool) -> HubBlock:
    nh, ne = buf[:16].view(np.int64).tolist()
    o = 16
    gids = buf[o:o + 8 * nh].view(np.int64); o += 8 * nh
    ptr = buf[o:o + 8 * (nh + 1)].view(np.int64); o += 8 * (nh + 1)
    rows = buf[o:o + 4 * ne].view(np.int32); o += 4 * ne
    w = buf[o:o + 8 * ne].view(np.float64) if weighted else None
    return HubBlock(gids, ptr, rows, w)


def build_hub_cache(comm, rgs, n: int, t4: float, weighted: bool):
    """(per local rank: {source rank: HubBlock}, hub bool[n], bytes held by all
    ranks in addition to their own blocks). Hubs: global degree (column
    lengths summed over ranks) > t4; t4 = 0 → no cache."""
    from .traversal import world_sum
    p = comm.world
    if t4 <= 0:
        return [dict() for _ in rgs], np.zeros(n, bool), 0
    vecs = [np.bincount(rg.ext_ids, weights=np.diff(rg.cindptr), minlength=n) for rg in rgs]
    hub = world_sum(comm, vecs) > t4
    blocks = [_hub_block(rg, hub, weighted) for rg in rgs]
    fam = rgs[0].expand.family
    packed = [_pack_hub(b) for b in blocks]
    got = exchange_bytes(comm, fam, [[packed[i] if j != rg.rank else np.zeros(0, np.uint8) for j in range(p)]
                                     for i, rg in enumerate(rgs)], "hub cache set-up")
    caches, held = [], 0
    for i, rg in enumerate(rgs):
        c = {j: _unpack_hub(got[i][j], weighted) for j in range(p) if j != rg.rank}
        held += sum(b.nbytes for b in c.values())
        caches.append(c)
    tot = world_sum(comm, [np.array([held if i == 0 else 0.0]) for i in range(len(rgs))])
    return caches, hub, int(tot[0])


# ----------------------------------------------------------------------------- OSteal
def reduction_tree(c: np.ndarray) -> list[np.ndarray]:
    """Nested active sets [all p ranks, ⌈p/2⌉, ..., 1]: each halving pairs
    every remaining rank with its cheapest remaining partner (link cost
    c[i, j] + c[j, i], ties lower id) and keeps the lower id of the pair."""
    cur = np.arange(c.shape[0])
    sets = [cur.copy()]
    while cur.size > 1:
        left, keep = list(cur), []
        while left:  # loop over ranks (p <= a few hundred)
            a = left.pop(0)
            if not left:
                keep.append(a)
                break
            cost = np.array([c[a, b] + c[b, a] for b in left])
            b = left.pop(int(np.argmin(cost)))
            keep.append(min(a, b))
        cur = np.array(sorted(keep))
        sets.append(cur.copy())
    return sets


@dataclass
class OwnershipPolicy:
    """Decides the active rank set per level from world-agreed figures (see
    the module doc). ``history``: (z, m, seconds) of past levels."""

    c: np.ndarray
    t3: float
    t1: float = 1000.0
    history: list = field(default_factory=list)

    def __post_init__(self):
        self.sets = reduction_tree(self.c)
        self.m_index = 0  # index into sets (0 = all ranks)

    @property
    def active(self) -> np.ndarray:
        a = np.zeros(self.c.shape[0], bool)
        a[self.sets[self.m_index]] = True
        return a

    def record(self, z: float, m: int, seconds: float) -> None:
        self.history.append((float(z), int(m), float(seconds)))

    def fit(self) -> tuple[float, float] | None:
        """(κ s per cost unit, π s per active rank) by NNLS over the history, or None (< 2 levels)."""
        if len(self.history) < 2:
            return None
        from scipy.optimize import nnls
        h = np.array(self.history[-32:], dtype=np.float64)
        coef, _ = nnls(h[:, [0, 1]], h[:, 2])
        return float(coef[0]), float(coef[1])

    def decide(self, loads: np.ndarray, prev_seconds: float | None) -> np.ndarray:
        """The active set (bool[p]) for a level with per-rank ``loads``."""
        if prev_seconds is None:  # a search's first level: every rank (the history is kept)
            self.m_index = 0
            return self.active
        m = self.sets[self.m_index].size
        if m < self.c.shape[0] and float(np.sum(loads)) / m >= self.t1:
            self.m_index = 0  # work grew (t1 edges per active rank): ownership back to every rank
            return self.active
        if prev_seconds >= self.t3:
            return self.active  # decisions only after a short level
        fit = self.fit()
        if fit is None:
            return self.active
        kappa, pi = fit
        total = float(np.sum(loads))
        loc = float(np.min(np.diag(self.c)))
        est = [kappa * np.ceil(total / s.size) * loc + pi * s.size for s in self.sets]
        est = np.array(est)
        # ties (within float noise of the fit): more ranks (lower index)
        self.m_index = int(np.flatnonzero(est <= est.min() * (1 + 1e-9) + 1e-15)[0])
        return self.active


# ----------------------------------------------------------------------------- the balancer
@dataclass
class LevelOutcome:
    """Per local rank: kept columns, (rows, values) computed by stealers for
    this rank's rows, edges this rank expanded for others; plus the level's
    world figures (``info``: the per-level JSON keys) and the bytes this
    process's comm counters saw for the steal exchange."""

    kept: list
    returned: list
    stolen_done: list
    info: dict
    measured_local: int = 0


class Balancer:
    """Frontier stealing for one engine (the local ranks ``rgs`` of ``comm``,
    a 1D plan). ``weighted`` = SSSP (values = distances + edge weights)."""

    def __init__(self, comm, rgs, n: int, cfg: StealConfig, *, weighted: bool = False):
        p = comm.world
        self.comm, self.rgs, self.cfg, self.p, self.weighted = comm, rgs, cfg.check(), p, weighted
        self.c = cfg.costs if cfg.costs is not None else cost_matrix(None, p)
        g = comm.member(rgs[0].expand.family, rgs[0].rank)
        if g is None or len(g.ranks) != p or list(g.ranks) != list(range(p)):
            raise PlanError("frontier stealing runs on 1d plans (one exchange group of all ranks)")
        self.family = rgs[0].expand.family
        t0 = time.perf_counter()
        self.caches, self.hub, self.hub_cache_bytes = build_hub_cache(comm, rgs, n, cfg.t4, weighted)
        self.hub_setup_s = time.perf_counter() - t0
        self.policy = OwnershipPolicy(self.c, cfg.t3, cfg.t1) if cfg.mode == "fsteal+osteal" else None
        self.prev_z = None

    def describe(self) -> dict:
        cf = self.cfg
        return {"mode": cf.mode, "solver": cf.solver, "t1": cf.t1, "t2": cf.t2, "t3": cf.t3, "t4": cf.t4,
                "hubs": int(self.hub.sum()), "hub_cache_bytes": self.hub_cache_bytes, "hub_setup_s": self.hub_setup_s}

    # -- one level
    def level(self, cols: list, colvals: list | None, what: str, prev_seconds: float | None = None) -> LevelOutcome:
        """Balance one level: ``cols[i]`` frontier columns (ext positions) of
        local rank i, ``colvals[i]`` their values (SSSP: distances; BFS: None
        = the global ids). ``prev_seconds``: the previous level's time on this
        process (OSteal's input; the max over ranks is used)."""
        from .traversal import world_sum
        comm, rgs, p, c = self.comm, self.rgs, self.p, self.c
        degs = [np.diff(rg.cindptr)[cl] for rg, cl in zip(rgs, cols)]
        vec = []
        for rg, d in zip(rgs, degs):
            v = np.zeros(3 * p)
            v[rg.rank] = d.sum()
            v[p + rg.rank] = d.max() if d.size else 0
            v[2 * p + rg.rank] = prev_seconds or 0.0
            vec.append(v)
        tot = world_sum(comm, vec)
        loads, maxdeg = tot[:p].astype(np.int64), tot[p:2 * p]
        prev = float(tot[2 * p:].max()) if prev_seconds is not None else None
        before = np.diag(c) * loads
        info = {"load_max_over_mean": _ratio(before), "active_ranks": p, "stolen_edges": 0, "steal_bytes": 0,
                "steal_bytes_measured": 0, "solve_s": 0.0, "steal_triggered": False}
        active = np.ones(p, bool)
        if self.policy is not None:
            active = self.policy.decide(loads, prev)
            info["active_ranks"] = int(active.sum())
        forced = bool(loads[~active].any())
        trig = self.cfg.mode != "none" and p > 1 and loads.max() > 0 and (   # no load: nothing to steal
            forced or (loads.max() >= self.cfg.t1 and loads.max() - loads.min() >= self.cfg.t2))
        if not trig:
            info["load_max_over_mean_after"] = _ratio(before[active]) if active.all() else _ratio(before)
            self._record(before.max(initial=0), active, prev)
            return LevelOutcome(list(cols), [None] * len(rgs), [0] * len(rgs), info)
        a = solve(loads, c, self.cfg.solver, active=active, gap=self.cfg.gap)
        self._check_same(a.x)
        info.update(steal_triggered=True, solve_s=a.solve_s, z_model=a.z)
        out = self._steal(cols, colvals, degs, a.x, what, None if forced else float(before.max()))
        if out is None:  # columns are not split: this cut would make the slowest worker slower; keep all
            info.update(steal_cancelled=True, load_max_over_mean_after=info["load_max_over_mean"])
            self._record(before.max(initial=0), active, prev)
            return LevelOutcome(list(cols), [None] * len(rgs), [0] * len(rgs), info)
        after = worker_costs(out.info.pop("moved"), c)
        lb = float((maxdeg * c.min(axis=1)).max())  # the largest frontier column goes to someone whole
        info.update(out.info, load_max_over_mean_after=_ratio(after[active]),
                    load_bound_max_over_mean=float(lb / max(after[active].mean(), 1e-300)))
        out.info = info
        self._record(after.max(initial=0), active, prev)
        return out

    def _record(self, z, active, prev):
        if self.policy is not None:
            if prev is not None and self.prev_z is not None:
                self.policy.record(self.prev_z[0], self.prev_z[1], prev)
            self.prev_z = (float(z), int(active.sum()))

    def _check_same(self, x: np.ndarray) -> None:
        if not hasattr(self.comm, "torch") or self.p == 1:
            return
        f = x.ravel().astype(np.float64)
        m = self.comm.allreduce_world([np.concatenate([f, -f])], "max")[0]
        if not (np.array_equal(m[:f.size], f) and np.array_equal(-m[f.size:], f)):
            raise PlanError("frontier stealing: ranks computed different assignments from the same loads")

    def _steal(self, cols, colvals, degs, x, what, cap: float | None) -> LevelOutcome | None:
        """Cut, check, ship, expand, return. ``cap``: cancel (None) when the
        cut's real max worker cost would exceed it (no level worse than before)."""
        from .traversal import world_sum
        comm, rgs, p = self.comm, self.rgs, self.p
        bounds, vec = [], []
        for i, rg in enumerate(rgs):
            r = rg.rank
            order = np.concatenate([[r], np.delete(np.arange(p), r)])  # keep first, then stealers by id
            b = cut_ranges(degs[i], x[r, order])
            s = np.concatenate([[0], np.cumsum(degs[i])])
            v = np.zeros(p * p)
            v[r * p + order] = s[b[1:]] - s[b[:-1]]
            bounds.append((order, b))
            vec.append(v)
        moved = world_sum(comm, vec).reshape(p, p)  # edges rank i's cut gives worker j (all ranks)
        if cap is not None and worker_costs(moved, self.c).max() > cap:
            return None
        kept, payloads, shipped = [], [], 0
        for i, rg in enumerate(rgs):
            order, b = bounds[i]
            row = [np.zeros(0, np.uint8)] * p
            for k, j in enumerate(order):  # loop over workers
                sl = slice(b[k], b[k + 1])
                if j == rg.rank:
                    kept.append(cols[i][sl])
                elif b[k + 1] > b[k]:
                    row[j] = self._pack(rg, cols[i][sl], None if colvals is None else colvals[i][sl])
            shipped += sum(int(q.size) for q in row)
            payloads.append(row)
        sent0 = int(comm.sent_bytes.sum())
        got = exchange_bytes(comm, self.family, payloads, f"{what}: stolen ranges")
        back, done = [], []
        for i, rg in enumerate(rgs):
            row, e = [], 0
            for j in range(p):
                if got[i][j].size == 0:
                    row.append(np.zeros(0, np.uint8))
                    continue
                rr, vv, ne = self._expand(got[i][j], self.caches[i].get(j))
                e += ne
                row.append(_u8(rr.astype(np.int32), vv.astype(np.float64)))
            back.append(row)
            done.append(e)
        shipped += sum(int(q.size) for row in back for q in row)
        got2 = exchange_bytes(comm, self.family, back, f"{what}: stolen results")
        meas = int(comm.sent_bytes.sum()) - sent0
        returned = []
        for i in range(len(rgs)):
            rs, vs = [], []
            for buf in got2[i]:
                k = buf.size // 12
                rs.append(buf[:4 * k].view(np.int32).astype(np.int64))
                vs.append(buf[4 * k:].view(np.float64))
            returned.append(min_per_row(np.concatenate(rs), np.concatenate(vs)) if rs else None)
        tot = world_sum(comm, [np.array([shipped, meas] if i == 0 else [0.0, 0.0]) for i in range(len(rgs))])
        movedm = moved
        stolen = int(movedm.sum() - np.trace(movedm))
        info = {"moved": movedm, "stolen_edges": stolen, "steal_bytes": int(tot[0]),
                "steal_bytes_measured": int(tot[1])}
        return LevelOutcome(kept, returned, done, info, meas)

    def _pack(self, rg, cs: np.ndarray, vals) -> np.ndarray:
        lens = np.diff(rg.cindptr)[cs]
        # a hub column is in the stealer's cache only where this block holds some of it (_hub_block
        # caches nonempty columns): an empty one is sent as an uncached column of length 0 (marked
        # cached, the stealer's lookup would expand another column)
        cached = self.hub[rg.ext_ids[cs]] & (lens > 0)
        unc = cs[~cached]
        pos = _gather_slices(rg.cindptr, rg.cindptr[unc], lens[~cached])
        w = None
        if self.weighted:
            w = np.ones(pos.size) if rg.cdata is None else rg.cdata[pos].astype(np.float64)
        return _u8(np.array([cs.size], np.int64), rg.ext_ids[cs].astype(np.int64),
                   np.where(cached, -1, lens).astype(np.int64),
                   None if vals is None else np.asarray(vals, np.float64), rg.crows[pos].astype(np.int32), w)

    def _expand(self, buf: np.ndarray, cache: HubBlock | None):
        """Stealer side: (victim rows, smallest value per row, edges expanded)."""
        k = int(buf[:8].view(np.int64)[0])
        o = 8
        gids = buf[o:o + 8 * k].view(np.int64); o += 8 * k
        lens = buf[o:o + 8 * k].view(np.int64); o += 8 * k
        vals = gids.astype(np.float64)
        if self.weighted:
            vals = buf[o:o + 8 * k].view(np.float64); o += 8 * k
        unc = lens >= 0
        ne = int(lens[unc].sum())
        rows_u = buf[o:o + 4 * ne].view(np.int32).astype(np.int64); o += 4 * ne
        w_u = buf[o:o + 8 * ne].view(np.float64) if self.weighted else None
        rows_l, vals_l = [rows_u], [np.repeat(vals[unc], lens[unc]) + (0 if w_u is None else w_u)]
        if (~unc).any():
            h = np.searchsorted(cache.gids, gids[~unc])
            hl = np.diff(cache.indptr)[h]
            pos = _gather_slices(cache.indptr, cache.indptr[h], hl)
            rows_l.append(cache.rows[pos].astype(np.int64))
            vals_l.append(np.repeat(vals[~unc], hl) + (0 if cache.w is None else cache.w[pos]))
        rows, v = np.concatenate(rows_l), np.concatenate(vals_l)
        r, m = min_per_row(rows, v)
        return r, m, int(rows.size)


def _ratio(costs: np.ndarray) -> float | None:
    costs = np.asarray(costs, dtype=np.float64)
    if costs.size == 0 or costs.mean() <= 0:
        return None
    return float(costs.max() / costs.mean())


__all__ = ["STEAL_MODES", "StealConfig", "Balancer", "LevelOutcome", "OwnershipPolicy", "reduction_tree",
           "cost_matrix", "cut_ranges", "min_per_row", "build_hub_cache", "exchange_bytes"]


# ----------------------------------------------------------------------------- engine hooks
def _kernels(bal: Balancer, kernels):
    """The kernel set of a hook: a given set, else one made for ``kernels`` on
    the balancer's comm and kept on the balancer (its device graph views too)."""
    from . import kernels as KT
    if not isinstance(kernels, str):
        return kernels
    cache = bal.__dict__.setdefault("_kernel_sets", {})
    if kernels not in cache:
        cache[kernels] = KT.for_comm(kernels, bal.comm)
    return cache[kernels]


def bfs_top_down(bal: Balancer, rgs, front, ghost, visited, depth: int, prev_seconds: float | None,
                 *, kernels="auto"):
    """One top-down 1D BFS level with stealing: per local rank (new own rows,
    edges this rank examined, candidate parents), and the LevelOutcome.

    ``kernels``: a name of :data:`~partplan.runtime.kernels.CHOICES` or a kernel
    set; the state arrays (``front``, ``ghost``, ``visited``) are that set's
    (numpy or device tensors) and so are the results. The balancer's cut and
    payloads run on the host (the frontier column lists cross once)."""
    X = _kernels(bal, kernels)
    gvs = [X.graph(rg) for rg in rgs]
    cols = [X.host(X.cat([X.flatnonzero(front[i]), rg.nl + X.flatnonzero(ghost[i])])) for i, rg in enumerate(rgs)]
    out = bal.level(cols, None, f"BFS level {depth}", prev_seconds)
    found = []
    for i, rg in enumerate(rgs):
        new, edges, cand = X.top_down(gvs[i], X.asarray(np.asarray(out.kept[i], np.int64)), visited[i])
        if out.returned[i] is not None and out.returned[i][0].size:
            r, v = out.returned[i]
            r, v = X.asarray(r, "int64"), X.asarray(v.astype(np.int64))
            ok = ~visited[i][r]
            r, v = r[ok], v[ok]
            cand[r] = X.where(cand[r] < 0, v, X.where(cand[r] < v, cand[r], v))
            new = X.flatnonzero(cand >= 0)
        found.append((new, edges + out.stolen_done[i], cand))
    return found, out


def sssp_relax(bal: Balancer, rgs, changed, got, dist, dext, rnd: int, prev_seconds: float | None,
               *, kernels="auto"):
    """One SSSP round's relaxation with stealing: per local rank (changed
    bool[nl], edges this rank examined), and the LevelOutcome. Updates
    ``dist`` in place (``dext`` must already hold the received distances).
    ``kernels`` as in :func:`bfs_top_down`."""
    X = _kernels(bal, kernels)
    gvs = [X.graph(rg) for rg in rgs]
    cols = [X.cat([X.flatnonzero(changed[i]), rg.nl + X.flatnonzero(got[i])]) for i, rg in enumerate(rgs)]
    dex = [X.cat([dist[i], dext[i]]) for i in range(len(rgs))]
    out = bal.level([X.host(c) for c in cols], [X.host(dex[i][c]) for i, c in enumerate(cols)],
                    f"SSSP round {rnd}", prev_seconds)
    res = []
    for i, rg in enumerate(rgs):
        ch, edges = X.relax(gvs[i], X.asarray(np.asarray(out.kept[i], np.int64)), dex[i], dist[i])
        if out.returned[i] is not None and out.returned[i][0].size:
            r, v = out.returned[i]
            r, v = X.asarray(r, "int64"), X.asarray(v, "float64")
            better = v < dist[i][r]
            dist[i][r[better]] = v[better]
            ch[r[better]] = True
        res.append((ch, edges + out.stolen_done[i]))
    return res, out


def steal_summary(cfg: dict, levels: list, bal: Balancer | None = None, plot_levels: list | None = None) -> dict:
    """The report's ``steal`` block from per-level entries (dicts): settings,
    triggered levels, geometric means of before/after balance on them, the
    worst after/before ratio, stolen edges, steal bytes, solve seconds; with
    ``cfg["steal"]["plot"]`` the PNG of ``plot_levels`` (default ``levels``)."""
    s = dict(cfg.get("steal") or {})
    s.pop("topology_obj", None)
    lv = [x for x in levels if x.get("steal_triggered")]
    gm = (lambda k: float(np.exp(np.mean(np.log([x[k] for x in lv])))) if lv else None)
    out = {**s, "levels_triggered": len(lv), "geomean_before": gm("load_max_over_mean"),
           "geomean_after": gm("load_max_over_mean_after"),
           "worst_after_over_before": max((x["load_max_over_mean_after"] / x["load_max_over_mean"] for x in lv),
                                          default=None),
           "stolen_edges": int(sum(x.get("stolen_edges", 0) for x in levels)),
           "steal_bytes": int(sum(x.get("steal_bytes", 0) for x in levels)),
           "steal_bytes_match": all(x.get("steal_bytes", 0) == x.get("steal_bytes_measured", 0) for x in levels),
           "solve_s": float(sum(x.get("solve_s", 0.0) for x in levels))}
    if bal is not None:
        out.update(hubs=int(bal.hub.sum()), hub_cache_bytes=bal.hub_cache_bytes)
    if s.get("plot"):
        from .steal_plot import plot_balance
        plot_balance({s.get("mode", "steal"): plot_levels or levels}, s["plot"], title=f"{cfg['job']}: per-level balance, "
                     f"{s.get('mode')} ({s.get('solver', 'lp')})")
    return out
