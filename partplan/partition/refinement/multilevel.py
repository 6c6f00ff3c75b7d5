"""Coordinated moves for the bottleneck refinement: clusters of the partition's own coarsening.

Single-vertex FM (:mod:`.fm`) stalls where several parts tie at the max and
every single move changes a part's boundary by ±1 (meshes): lowering them
needs many vertices to move together. Here the current partition is
coarsened *within its parts* (the clustering of the fast mode,
:meth:`partplan.partition.refinement.vcycle._Level.coarsen`: heavy connectivity over shared
nets, clusters capped at the balance slack), and from the coarsest level down
every cluster of two or more vertices in a *hot* part (cost ≥ θ × the max)
tries to move, whole, to its best-connected part with room.

Gains are exact: a trial move applies the members one by one to the fine
state (pin counts, k×k volume matrix, send/recv; :func:`.fm.apply.apply_move`), reads
the potential Φ = Σ_p (send_p/M)^q + (recv_p/M)^q, and undoes them. No
coarse volume model is needed, so send/recv of conformal ownership stay exact
at every level; a trial costs O(Σ degrees of the members + k). A move is kept
when it lowers Φ + μ·ΔTV/M, does not raise the max cost, keeps the target
within the balance cap and the total volume within its limit (greedy: only
improving moves; the max never rises). ``deadline`` stops it between clusters.

With ``volume_precheck`` (the pipeline's cluster volume rounds), where the volume term dominates
(μ/M at least Φ: one more row of total volume outweighs any fall of Φ) a trial is first priced on
the total volume alone (:func:`_cluster_dtv`: the pin counts of the cluster's nets, O(Σ degrees of
the members)) and skipped where that Δ total volume alone rules the move out: the same moves are
kept, at a fraction of the trials' cost. An undone trial leaves the pin-count slots of its nets in
another order (a part's slot is swapped with the last when its count reaches 0), so FM run on the
same state afterwards could break ties otherwise: the refinement's own cluster stage, which goes
on with FM on its state, runs without the pre-check; the rounds build a fresh state each time.

The kernel takes the records of :mod:`.fm.records` (:class:`.fm.records.Topology`,
:class:`.fm.records.PinSlots`, :class:`.fm.records.VolumeState`, :class:`.fm.records.CostModel`,
:class:`.fm.records.Limits`) plus two of its own: :class:`Clusters` (the clusters
of one level and the order they are visited in) and :class:`ClusterOptions`.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..._kernels import monotonic
from .fm.apply import apply_move, apply_scratch
from .fm.costs import _cost, state_key
from .fm.jit import njit_rc_free
from .fm.records import CostModel, Limits
from .fm.slots import _cnt, count_neighbour_parts
from ..options import rng_seed

Clusters = namedtuple("Clusters", "cptr cmem order")
Clusters.__doc__ = """The clusters of one level: members of cluster c are cmem[cptr[c]:cptr[c+1]]
(vertices, all in one part); order: the order clusters are visited in."""
ClusterScratch = namedtuple("ClusterScratch", "A cnt touched tb hot mcnt mnets")
ClusterScratch.__doc__ = """Scratch of cluster_pass: A (:class:`.fm.records.ApplyScratch`), per part the
member counts of the neighbour parts (cnt), those parts (touched), the target parts (tb) and the
hot parts (hot); per net the cluster's members among its pins (mcnt, zero between calls of
:func:`_cluster_dtv`) and the nets counted (mnets)."""
ClusterOptions = namedtuple("ClusterOptions", "theta max_rounds min_gain min_size deadline volume_precheck")
ClusterOptions.__doc__ = """theta: clusters leave parts whose cost is >= theta × the max; max_rounds;
min_gain: a round must lower the max by more (relative) for another; min_size:
smallest cluster that moves (vertices); deadline: perf_counter seconds (< 0: none);
volume_precheck: price trials on the total volume first where it dominates (:func:`_cluster_dtv`;
the moves kept are the same either way)."""


@njit_rc_free
def _cluster_dtv(s0, s1, cmem, a, b, vptr, vidx, P, mcnt, mnets):
    """Δ total volume (rows of H) of moving the cluster cmem[s0:s1] (all in part a) to part b,
    from the pin counts P (:class:`.fm.records.PinSlots`) without applying it: the total volume is
    Σ_j (λ_j − 1) over the nets of A + I, and net j loses part a when all its pins there are
    members, gains part b when it has none there. A member u is a pin of the nets of its row of A
    and of its own net u. mcnt / mnets: :class:`ClusterScratch`'s (mcnt zero again on return)."""
    soff, lam, dense, spart, scnt = P
    nm = 0
    for s in range(s0, s1):
        u = cmem[s]
        for e in range(vptr[u], vptr[u + 1]):
            j = vidx[e]
            if j == u:
                continue          # a self loop: the own net, counted once below
            if mcnt[j] == 0:
                mnets[nm] = j
                nm += 1
            mcnt[j] += 1
        if mcnt[u] == 0:
            mnets[nm] = u
            nm += 1
        mcnt[u] += 1
    d = 0
    for i in range(nm):
        j = mnets[i]
        if _cnt(j, a, soff, lam, dense, spart, scnt) == mcnt[j]:
            d -= 1
        if _cnt(j, b, soff, lam, dense, spart, scnt) == 0:
            d += 1
        mcnt[j] = 0
    return d


# nogil (refinements run side by side, lanes.py); no reference counting: it allocates nothing
@njit_rc_free
def cluster_pass(T, P, V, C, L, CL, O, S, stats):
    """Greedy rounds of whole-cluster moves (CL: :class:`Clusters`; members
    cmem[cptr[c]:cptr[c+1]], all in one part; clusters visited in
    ``CL.order``). T, P, V, C: the records of :mod:`.fm.records` (P and V updated in
    place); L: :class:`.fm.records.Limits` (cap, vlimit, max_targets: target parts
    tried per cluster); O: :class:`ClusterOptions`; S: :class:`ClusterScratch`
    (it allocates nothing: compiled without reference counting). Returns the
    moves kept. stats[0] += trial moves, stats[1] += member moves applied
    (trials included); stats[2] = 1 when the deadline
    (perf_counter seconds, < 0: none) stopped it. A move must lower
    Φ + μ·ΔTV/M and must not raise the current max cost; where μ/M ≥ Φ a target whose Δ total
    volume alone rules it out (:func:`_cluster_dtv`: above the volume limit, or μ·ΔTV/M ≥ Φ) is
    not tried (the same moves are kept; stats count the trials made)."""
    vptr, vidx, w, w2 = T.vptr, T.vidx, T.w, T.w2
    part, load, send, recv, smsg, rmsg, tot = V.part, V.load, V.send, V.recv, V.smsg, V.rmsg, V.tot
    load2 = V.load2
    obj, alpha, brb, mu = C.obj, C.alpha, C.brb, C.mu
    cap, vlimit, max_targets, cap2 = L.cap, L.vlimit, L.max_targets, L.cap2
    cptr, cmem, order = CL
    theta, max_rounds, min_gain, min_size, deadline, volume_precheck = O
    k = V.vol.shape[0]
    nc = cptr.size - 1
    A, cnt, touched, tb, hot, mcnt, mnets = S
    kept = 0
    partial = np.bool_(False)   # the kernels' update mode, typed bool (a literal False compiles apply_move again)
    for rnd in range(max_rounds):
        M = state_key(C, V, 1.0)[0]
        if M <= 0:
            break
        inv = 1.0 / M
        start = M
        for p in range(k):
            hot[p] = _cost(obj, send[p], recv[p], smsg[p], rmsg[p], alpha, brb) >= theta * M
        mcur, phi0 = state_key(C, V, inv)
        moved = 0
        for ii in range(nc):
            if deadline >= 0 and (ii & 15) == 0:
                now = monotonic()
                if now > deadline:
                    stats[2] = 1
                    return kept + moved
            c = order[ii]
            s0 = cptr[c]
            s1 = cptr[c + 1]
            if s1 - s0 < min_size:
                continue
            a = part[cmem[s0]]
            if not hot[a]:       # clusters leave hot parts (pulling clusters in measured worse and slower)
                continue
            wc = 0
            wc2 = 0
            nt = 0
            for s in range(s0, s1):
                u = cmem[s]
                wc += w[u]
                wc2 += w2[u]
                nt = count_neighbour_parts(u, vptr, vidx, part, a, cnt, touched, nt)
            # the max_targets best-connected parts with room, ties by part id
            ntb = 0
            for t in range(nt):
                p = touched[t]
                if load[p] + wc <= cap and load2[p] + wc2 <= cap2:
                    tb[ntb] = p
                    ntb += 1
            for i in range(min(ntb, max_targets)):
                bi = i
                for t in range(i + 1, ntb):
                    if cnt[tb[t]] > cnt[tb[bi]] or (cnt[tb[t]] == cnt[tb[bi]] and tb[t] < tb[bi]):
                        bi = t
                tb[i], tb[bi] = tb[bi], tb[i]
            ntb = min(ntb, max_targets)
            for t in range(nt):
                cnt[touched[t]] = 0
            if ntb == 0:
                continue
            tv0 = tot[0]
            best_g = 1e-12 * max(1.0, phi0)
            best_b = np.int64(-1)   # int64, not a literal: numba would compile apply_move once more
            best_phi = phi0
            best_mx = mcur
            tol = 1e-9 * mcur        # relative: weighted costs are seconds (1e-4 and less)
            # volume dominant: one more row of total volume outweighs any fall of Φ (Φ1 >= 0)
            precheck = volume_precheck and mu * inv >= phi0
            for t in range(ntb):
                b = tb[t]
                if precheck:
                    d = _cluster_dtv(s0, s1, cmem, a, b, vptr, vidx, P, mcnt, mnets)
                    if tv0 + d > vlimit or mu * inv * d >= phi0:
                        continue     # g = Φ0 − Φ1 − μ·ΔTV/M <= 0, or over the volume limit
                for s in range(s0, s1):
                    apply_move(cmem[s], b, T, P, V, A, partial)
                mx1, phi1 = state_key(C, V, inv)
                dtv = tot[0] - tv0
                ok = tot[0] <= vlimit and mx1 <= mcur + tol
                for s in range(s1 - 1, s0 - 1, -1):
                    apply_move(cmem[s], a, T, P, V, A, partial)
                stats[0] += 1
                stats[1] += 2 * (s1 - s0)
                g = phi0 - phi1 - mu * inv * dtv
                if ok and g > best_g:
                    best_g = g
                    best_b = b
                    best_phi = phi1
                    best_mx = mx1
            if best_b >= 0:
                for s in range(s0, s1):
                    apply_move(cmem[s], best_b, T, P, V, A, partial)
                stats[1] += s1 - s0
                phi0 = best_phi
                mcur = best_mx
                moved += 1
        kept += moved
        if moved == 0:
            break
        if not state_key(C, V, 1.0)[0] < start * (1.0 - min_gain):
            break
    return kept


def _members(cid: np.ndarray, nc: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR of the clusters: members of c are cmem[cptr[c]:cptr[c + 1]] (ascending ids)."""
    cmem = np.argsort(cid, kind="stable").astype(np.int64)
    cptr = np.zeros(nc + 1, np.int64)
    np.cumsum(np.bincount(cid, minlength=nc), out=cptr[1:])
    return cptr, cmem


def cluster_moves(graph, st, part: np.ndarray, k: int, w: np.ndarray, cap: int, vlimit: int, obj: int,
                  alpha: float, brb: float, q: int, mu: float, *, seed: int = 0, max_targets: int = 1,
                  theta: float = 0.9, max_rounds: int = 1, min_gain: float = 0.0, cluster_weight: float = 1.0,
                  coarse_vertices_per_part: int = 20, max_net: int = 16, min_size: int = 2,
                  max_levels: int = 64, deadline: float = -1.0, volume_precheck: bool = False) -> dict:
    """Coarsen ``part`` within its parts and run :func:`cluster_pass` from the
    coarsest level down to clusters of two or more vertices; ``part`` and the
    state ``st`` (:class:`partplan.partition.refinement.refine._State`) are updated in
    place. ``deadline``: time.perf_counter() seconds (< 0: none). ``volume_precheck``: see
    :class:`ClusterOptions` and the module doc (the same moves either way; the pin-count slots'
    order may differ; False: every trial is applied). Returns
    {"levels": [(clusters, moves kept)], "moves", "trials", "member_moves",
    "coarsen_s", "seconds", "stopped": "done" | "time limit"}."""
    import time

    from .vcycle import _level0

    t0 = time.perf_counter()
    rng = np.random.default_rng(rng_seed(seed))
    slack = max(cap - -(-int(w.sum()) // k), 0)
    maxw = int(cluster_weight * slack + 2 * w.sum() / max(graph.n, 1)) + 1
    maps = []                           # fine vertex -> cluster id, per level
    # only the level being coarsened is held (the maps keep what the passes need): on R-MAT 20 the
    # fine level A + I alive beside the next two levels was 0.25 GiB of the stage's peak
    lev, lpart, cur = _level0(graph), part.copy(), np.arange(graph.n, dtype=np.int64)
    while lev.n > coarse_vertices_per_part * k:
        nxt, npart = lev.coarsen(lpart, rng, maxw, max_net)
        if nxt is None:
            break
        cur = lev.cid[cur]
        maps.append((cur, nxt.n))
        lev, lpart = nxt, npart
    del lev
    t_coarse = time.perf_counter() - t0
    maxdeg = int(np.diff(st.vptr).max()) if graph.n else 0
    stats = np.zeros(3, np.int64)
    T, P, V = st.records(part, w)
    C = CostModel(obj, alpha, brb, q, mu)
    L = Limits(cap, cap, vlimit, vlimit, max_targets, -1.0, st.cap2)   # no overload, no volume slack, no cost cap
    O = ClusterOptions(theta, max_rounds, min_gain, min_size, float(deadline), bool(volume_precheck))
    S = ClusterScratch(apply_scratch(maxdeg, k), np.zeros(k, np.int64), np.zeros(k, np.int64),
                       np.zeros(k, np.int64), np.zeros(k, np.bool_),
                       *(np.zeros(graph.n if volume_precheck else 1, np.int64) for _ in range(2)))
    levels = []
    for cid, nc in list(reversed(maps))[:max_levels]:
        cptr, cmem = _members(cid, nc)
        order = rng.permutation(nc).astype(np.int64)
        kept = cluster_pass(T, P, V, C, L, Clusters(cptr, cmem, order), O, S, stats)
        levels.append((int(nc), int(kept)))
        if stats[2]:
            break
    return {"levels": levels, "moves": sum(m for _, m in levels), "trials": int(stats[0]), "member_moves": int(stats[1]),
            "coarsen_s": t_coarse, "seconds": time.perf_counter() - t0,
            "stopped": "time limit" if stats[2] else "done"}
