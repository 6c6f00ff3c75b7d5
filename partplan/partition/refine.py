"""Bottleneck-volume refinement of a 1D row partition (conformal ownership).

No partitioner minimizes the *bottleneck* — the rank with the largest send or
receive volume, which sets the time of every all-to-all. This post-pass takes
any partition (typically Mt-KaHyPar's km1 result) and moves vertices so that
the worst rank's load drops, while

* compute balance stays within ε: part weight (row nnz, at least 1 per row)
  ≤ ⌊(1+ε)·⌈W/k⌉⌋, or, when the input already violates that, no part grows
  beyond the input's heaviest part (never worse than the input);
* total volume stays ≤ (1 + volume_tolerance) × the input's.

Algorithm (UMPa-style k-way FM, Deveci et al. JPDC 2015, adapted to the exact
column-net volume model used by :func:`partplan.analyze`):

* State: pin counts ``cnt[j, p]`` (rows of part p that are pins of net j =
  column j of A + I; dense int32 n×k), the k×k volume matrix
  ``vol[q, r]`` (rows of H part q sends part r), part loads. One move
  (v: a → b) updates them exactly in O(deg(v) + k²).
* Each step picks the bottleneck part(s) and evaluates, **as numpy array
  operations over all candidate moves at once**, the exact change of every
  part's send, recv and message counts for

  - every boundary vertex of the bottleneck part to every neighbouring part;
  - every row the bottleneck part receives, pulled into it.

  A move's gain is lexicographic: (new max cost over all parts, change of the
  potential Φ = Σ_p (cost_p / M₀)^8 which rewards lowering near-maximal parts
  when another part ties for the max, change of total volume, change of
  message count).
* The best feasible move is applied even when its gain is negative (so
  clusters of vertices can migrate one at a time), the vertex is locked for
  the pass, and the pass stops after ``patience`` moves without a new best
  state; the pass is then rolled back to its best prefix. Passes repeat
  until one brings no improvement or the time limit is hit.

Objectives (``cost_p`` per part; the optimized value is max_p cost_p):
``max-send`` send_p; ``max-recv`` recv_p; ``max-both`` max(send_p, recv_p);
``weighted`` α·max(send msgs, recv msgs) + β·bytes·max(send_p, recv_p) (the
α-β estimate of :class:`partplan.CommStats`); ``total`` total volume (primary)
with max-both as tie-break.

Directed graphs: the refinement optimizes the forward exchange ``A @ H``
(the backward ``A^T @ G`` is not part of the objective; see the report's
``backward`` figures from :func:`partplan.analyze` if you need them).

Volumes are in rows of H (bytes = rows × f × dtype size).
"""
from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from ..errors import BackendUnavailableError, PartitionError
from ..graph import Graph
from ..metrics.cost import DEFAULT_ALPHA_S, DEFAULT_BETA_S_PER_BYTE, alpha_beta_time, dtype_bytes
from ..metrics.volume1d import volume_matrix
from ..parts import as_partition

OBJECTIVES = ("total", "max-send", "max-recv", "max-both", "weighted")
MAX_CELLS = 1 << 26   # n·k cells of the dense int32 pin-count table (256 MiB)
_Q = 8                # exponent of the potential Φ
_EXACT = 256          # candidates evaluated with exact message counts per step


def check_objective(objective: str, allowed=OBJECTIVES) -> str:
    """Return ``objective`` or raise :class:`PartitionError` listing the choices."""
    if objective not in allowed:
        raise PartitionError(f"unknown objective {objective!r}; choose one of {', '.join(allowed)}")
    return objective


def balance_cap(weights: np.ndarray, part: np.ndarray, k: int, imbalance: float) -> tuple[int, int]:
    """(cap, limit): the largest part weight a move may create, and the ε-limit
    ⌊(1+ε)·⌈W/k⌉⌋ (the planner's definition). cap = max(limit, heaviest input
    part) so an input that already violates ε never gets worse."""
    W = int(weights.sum())
    limit = int(np.floor((1.0 + imbalance) * -(-W // k)))
    heaviest = int(np.bincount(part, weights=weights, minlength=k).max()) if part.size else 0
    return max(limit, heaviest), limit


def _ranges(ptr: np.ndarray, idx: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(owner position, value) of all entries of CSR rows ``rows`` (vectorized gather)."""
    starts = ptr[rows]
    lens = ptr[rows + 1] - starts
    total = int(lens.sum())
    owner = np.repeat(np.arange(rows.size), lens)
    offs = np.cumsum(lens) - lens
    pos = np.arange(total) - np.repeat(offs, lens) + np.repeat(starts, lens)
    return owner, idx[pos]


class _Refiner:
    """Exact incremental state of one partition (see module doc)."""

    def __init__(self, graph: Graph, part: np.ndarray, k: int, objective: str, *, alpha: float,
                 beta: float, row_bytes: int):
        n = graph.n
        self.n, self.k, self.objective = n, k, objective
        self.alpha, self.beta, self.rb = alpha, beta, row_bytes
        pat = sp.csr_matrix((np.ones(graph.nnz, dtype=np.int8), graph.indices, graph.indptr), shape=(n, n))
        P = (pat + sp.identity(n, dtype=np.int8, format="csr")).tocsr()   # row v: nets containing v
        P.sum_duplicates()
        self.P_ptr, self.P_idx = P.indptr.astype(np.int64), P.indices.astype(np.int64)
        S = (P + P.T).tocsr()                                               # symmetric neighbourhood
        S.sum_duplicates()
        self.S_ptr, self.S_idx = S.indptr.astype(np.int64), S.indices.astype(np.int64)
        self.nnz = graph.row_nnz.astype(np.float64)
        self.w = np.maximum(graph.row_nnz, 1).astype(np.int64)                 # balance weights
        self.part = part.copy()
        net_of_pin = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.P_ptr))  # row v ...
        # ... is a pin of net P_idx: cnt[j, p] = #{v in p : j in row v of P}
        self.cnt = np.bincount(self.P_idx * k + self.part[net_of_pin], minlength=n * k) \
            .astype(np.int32).reshape(n, k)
        self.vol, _ = volume_matrix(graph.indptr, graph.indices, self.part, k)
        self.load = np.bincount(self.part, weights=self.w, minlength=k).astype(np.int64)
        self._refresh()

    # ---------------------------------------------------------------- costs
    def _refresh(self):
        v = self.vol
        self.send, self.recv = v.sum(axis=1), v.sum(axis=0)
        nz = v > 0
        self.smsg, self.rmsg = nz.sum(axis=1), nz.sum(axis=0)
        self.tv = int(self.send.sum())
        self.msgs = int(self.smsg.sum())

    def cost(self, send, recv, smsg, rmsg):
        """Per-part cost (last axis = parts) of the objective."""
        o = self.objective
        if o == "max-send":
            return send.astype(np.float64)
        if o == "max-recv":
            return recv.astype(np.float64)
        if o == "weighted":
            return alpha_beta_time(smsg, rmsg, send * self.rb, recv * self.rb, self.alpha, self.beta)
        return np.maximum(send, recv).astype(np.float64)          # max-both, total

    def potential(self, send, recv, smsg, rmsg, scale):
        o = self.objective
        if o == "max-send":
            x = (send / scale) ** _Q
        elif o == "max-recv":
            x = (recv / scale) ** _Q
        elif o == "weighted":
            x = (self.cost(send, recv, smsg, rmsg) / scale) ** _Q
        else:
            x = (send / scale) ** _Q + (recv / scale) ** _Q
        return x.sum(axis=-1)

    def key(self, scale) -> tuple:
        """Lexicographic value of the current state (smaller is better)."""
        c = self.cost(self.send, self.recv, self.smsg, self.rmsg)
        phi = float(self.potential(self.send, self.recv, self.smsg, self.rmsg, scale))
        if self.objective == "total":
            return (float(self.tv), float(c.max()), phi, self.msgs)
        return (float(c.max()), phi, float(self.tv), self.msgs)

    # ---------------------------------------------------------------- moves
    def move(self, v: int, b: int):
        """Move vertex v to part b, updating cnt, vol, loads exactly."""
        a = int(self.part[v])
        if a == b:
            return
        k, cnt, vol = self.k, self.cnt, self.vol
        J = self.P_idx[self.P_ptr[v]:self.P_ptr[v + 1]]
        other = J[J != v]
        o = self.part[other]
        leave = (cnt[other, a] == 1) & (o != a)
        join = cnt[other, b] == 0
        vol[:, a] -= np.bincount(o[leave], minlength=k)
        vol[:, b] += np.bincount(o[join], minlength=k)
        old = cnt[v] > 0
        old[a] = False
        vol[a, old] -= 1
        cnt[J, a] -= 1
        cnt[J, b] += 1
        new = cnt[v] > 0
        new[b] = False
        vol[b, new] += 1
        self.part[v] = b
        self.load[a] -= self.w[v]
        self.load[b] += self.w[v]
        self._refresh()

    def evaluate(self, v: np.ndarray, b: np.ndarray, scale: float, with_msgs: bool,
                 cost_objective: str | None = None):
        """Exact effect of each candidate move (v[c] → b[c]), vectorized.

        Returns (new max cost, ΔΦ, Δtotal volume, Δmessages) as arrays over c.
        """
        k, C = self.k, v.size
        s = self.part[v]
        ec, ej = _ranges(self.P_ptr, self.P_idx, v)
        es, eb = s[ec], b[ec]
        other = ej != v[ec]
        o = self.part[ej]
        leave = other & (self.cnt[ej, es] == 1) & (o != es)
        join = other & (self.cnt[ej, eb] == 0)
        # own net of v: old row (s -> p) removed, new row (b -> p) added
        crow = self.cnt[v].astype(np.int64)                      # C x k
        ar = np.arange(C)
        old = crow > 0
        old[ar, s] = False
        crow[ar, s] -= 1
        crow[ar, b] += 1
        new = crow > 0
        new[ar, b] = False
        oc, op = np.nonzero(old)
        nc, npp = np.nonzero(new)
        cc = np.concatenate([ec[leave], ec[join], oc, nc])
        qq = np.concatenate([o[leave], o[join], s[oc], b[nc]])
        rr = np.concatenate([es[leave], eb[join], op, npp])
        nl, nj = int(leave.sum()), int(join.sum())
        dd = np.concatenate([np.full(nl, -1, dtype=np.int64), np.ones(nj, dtype=np.int64),
                             np.full(oc.size, -1, dtype=np.int64), np.ones(nc.size, dtype=np.int64)])
        dsend = np.bincount(cc * k + qq, weights=dd, minlength=C * k).reshape(C, k)
        drecv = np.bincount(cc * k + rr, weights=dd, minlength=C * k).reshape(C, k)
        ns, nr = self.send + dsend, self.recv + drecv
        if with_msgs:
            key = (cc * k + qq) * k + rr
            uk, inv = np.unique(key, return_inverse=True)
            tot = np.bincount(inv, weights=dd)
            ucr, ur = np.divmod(uk, k)
            uc, uq = np.divmod(ucr, k)
            before = self.vol[uq, ur]
            dm = (before + tot > 0).astype(np.int64) - (before > 0)
            dsm = np.bincount(uc * k + uq, weights=dm, minlength=C * k).reshape(C, k)
            drm = np.bincount(uc * k + ur, weights=dm, minlength=C * k).reshape(C, k)
            nsm, nrm = self.smsg + dsm, self.rmsg + drm
            dmsg = dsm.sum(axis=1)
        else:
            nsm = nrm = None
            dmsg = np.zeros(C)
        if cost_objective is not None:   # a byte-only proxy (used to pre-rank "weighted")
            saved, self.objective = self.objective, cost_objective
        try:
            cost = self.cost(ns, nr, nsm, nrm)
            newmax = cost.max(axis=1)
            phi0 = self.potential(self.send, self.recv, self.smsg, self.rmsg, scale)
            dphi = self.potential(ns, nr, nsm, nrm, scale) - phi0
        finally:
            if cost_objective is not None:
                self.objective = saved
        dtv = dsend.sum(axis=1)
        self.last_delta = (dsend, drecv)
        return newmax, dphi, dtv, dmsg

    # ----------------------------------------------------------- candidates
    def candidates(self, parts: np.ndarray, locked: np.ndarray, limit: int, rng) -> tuple[np.ndarray, np.ndarray]:
        """Candidate moves (v, b): boundary vertices of ``parts`` to neighbouring
        parts, and rows those parts receive, pulled into the receiving part."""
        k, part = self.k, self.part
        inb = np.isin(part, parts) & ~locked
        mem = np.flatnonzero(inb)
        vs, bs = [], []
        if mem.size:
            ec, nb = _ranges(self.S_ptr, self.S_idx, mem)
            tp = part[nb]
            src = part[mem][ec]
            keep = tp != src
            pair = np.unique(mem[ec[keep]] * k + tp[keep])
            vs.append(pair // k)
            bs.append(pair % k)
        for a in parts:
            recv_rows = np.flatnonzero((self.cnt[:, a] > 0) & (part != a) & ~locked)
            vs.append(recv_rows)
            bs.append(np.full(recv_rows.size, a, dtype=np.int64))
        v = np.concatenate(vs) if vs else np.zeros(0, dtype=np.int64)
        b = np.concatenate(bs) if bs else np.zeros(0, dtype=np.int64)
        if v.size > limit:
            pick = np.sort(rng.choice(v.size, size=limit, replace=False))
            v, b = v[pick], b[pick]
        return v, b

    # -------------------------------------------------------------- figures
    def figures(self) -> dict:
        rt = alpha_beta_time(self.smsg, self.rmsg, self.send * self.rb, self.recv * self.rb,
                             self.alpha, self.beta)
        nnz_load = np.bincount(self.part, weights=self.nnz, minlength=self.k)   # as analyze()
        mean = nnz_load.mean()
        return {"total_volume": self.tv, "max_send": int(self.send.max()), "max_recv": int(self.recv.max()),
                "max_send_recv": int(np.maximum(self.send, self.recv).max()),
                "messages": self.msgs, "max_send_messages": int(self.smsg.max()),
                "max_recv_messages": int(self.rmsg.max()),
                "max_compute_load": int(nnz_load.max()),
                "compute_imbalance": float(nnz_load.max() / mean - 1.0) if mean > 0 else 0.0,
                "max_balance_weight": int(self.load.max()),
                "time_estimate_s": float(rt.max())}


def _independent_moves(R: _Refiner, v, b, dsend, drecv, dtv, order, first, scale, cap, vlimit,
                       limit: int) -> list[int]:
    """Candidates (in ``order``) that strictly improve the state when applied
    after ``first`` and after each other, with nets disjoint from all moves
    chosen so far (then their exact Δs are additive). Loads and the volume
    limit are re-checked on the running totals."""
    touched = np.zeros(R.n, dtype=bool)
    net = lambda u: R.P_idx[R.P_ptr[u]:R.P_ptr[u + 1]]
    touched[net(int(v[first]))] = True
    send = R.send + dsend[first]
    recv = R.recv + drecv[first]
    load = R.load.copy()
    load[R.part[v[first]]] -= R.w[v[first]]
    load[b[first]] += R.w[v[first]]
    tv = R.tv + dtv[first]
    total = R.objective == "total"

    def key3(s_, r_, tv_):
        c = R.cost(s_, r_, None, None)
        phi = float(R.potential(s_, r_, None, None, scale))
        return (float(tv_), float(c.max()), phi) if total else (float(c.max()), phi, float(tv_))

    cur = key3(send, recv, tv)
    out: list[int] = []
    for i in order[1:limit * 4]:
        u, bb = int(v[i]), int(b[i])
        if load[bb] + R.w[u] > cap or tv + dtv[i] > vlimit:
            continue
        nets = net(u)
        if touched[nets].any():
            continue
        s2, r2 = send + dsend[i], recv + drecv[i]
        k2 = key3(s2, r2, tv + dtv[i])
        if not k2 < cur:
            continue
        touched[nets] = True
        send, recv, tv, cur = s2, r2, tv + dtv[i], k2
        load[R.part[u]] -= R.w[u]
        load[bb] += R.w[u]
        out.append(int(i))
        if len(out) + 1 >= limit:
            break
    return out


def refine(graph: Graph, part, k: int | None = None, *, objective: str = "max-both",
           imbalance: float = 0.03, volume_tolerance: float = 0.05, seed: int = 0,
           time_limit: float | None = None, alpha: float = DEFAULT_ALPHA_S,
           beta: float = DEFAULT_BETA_S_PER_BYTE, f: int = 128, dtype: str = "float32",
           patience: int = 60, max_passes: int = 50, max_candidates: int | None = None,
           max_moves_per_pass: int | None = None, multi_moves: int = 32,
           min_gain: float = 0.002) -> tuple[np.ndarray, dict]:
    """Lower the bottleneck communication of ``part`` (conformal ownership).

    Parameters
    ----------
    graph : the matrix A (rows = vertices).
    part : int[n] row partition into k parts (not modified).
    objective : "max-both" (default: max over parts of max(send, recv)),
        "max-send", "max-recv", "weighted" (α-β time of the worst rank) or
        "total" (total volume).
    imbalance : ε of the compute balance constraint (part weight = row nnz,
        at least 1 per row): weight ≤ ⌊(1+ε)·⌈W/k⌉⌋, never worse than the input.
    volume_tolerance : total volume may grow to (1 + tol) × the input's.
    seed : seeds the candidate sampling (deterministic for a given seed).
    time_limit : seconds; stops after the pass running when it expires.
    alpha, beta, f, dtype : α-β model and row size (bytes) for "weighted" and
        the reported time estimate.
    patience : non-improving moves tolerated in a pass before rollback.
    max_candidates : candidate moves evaluated per step (sampled with ``seed``
        when more exist); default min(3000, max(400, 96000 // k)).
    min_gain : a new pass starts only when the last one lowered the optimized
        value (max cost, or total volume for "total") by more than this fraction.
    multi_moves : after the best move of a step, up to this many further
        strictly improving moves on disjoint nets are applied from the same
        evaluation (1 = classic one-move-per-step FM).

    Returns
    -------
    (new_part int64[n], report) where report holds ``before``/``after``
    figures (rows of H; equal to :func:`partplan.analyze` of the forward
    pass), ``passes``, ``moves`` (kept), ``moves_tried``, ``seconds``,
    ``balance_limit``, ``balance_cap``, ``volume_limit``, ``stopped``.

    Examples
    --------
    >>> import numpy as np
    >>> from partplan import Graph
    >>> g = Graph.from_edges([0, 1, 2, 3, 4], [1, 2, 3, 4, 5], symmetrize=True)
    >>> new, rep = refine(g, np.array([0, 1, 0, 1, 0, 1]), 2, imbalance=0.5, volume_tolerance=0.0)
    >>> rep["after"]["max_send_recv"] <= rep["before"]["max_send_recv"]
    True
    """
    t0 = time.perf_counter()
    check_objective(objective)
    part, k = as_partition(part, graph.n, k)
    if imbalance < 0 or volume_tolerance < 0:
        raise PartitionError("imbalance and volume_tolerance must be >= 0")
    if f < 1:
        raise PartitionError(f"f (feature width) must be >= 1, got {f}")
    if graph.n * k > MAX_CELLS:
        raise BackendUnavailableError(
            f"refine keeps a dense n×k pin-count table; n·k = {graph.n * k} exceeds {MAX_CELLS} cells "
            f"(~{MAX_CELLS * 4 >> 20} MiB). A sparse table for larger inputs is not implemented.")
    R = _Refiner(graph, part, k, objective, alpha=alpha, beta=beta, row_bytes=f * dtype_bytes(dtype))
    cap, limit = balance_cap(R.w, part, k, imbalance)
    before = R.figures()
    vlimit = int(np.floor(before["total_volume"] * (1.0 + volume_tolerance)))
    scale = max(float(R.cost(R.send, R.recv, R.smsg, R.rmsg).max()), 1e-12)
    scale_rows = max(float(np.maximum(R.send, R.recv).max()), 1.0)
    rng = np.random.default_rng(seed)
    if max_candidates is None:                # keeps the C×k evaluation arrays near 10^5 cells
        max_candidates = int(min(3000, max(400, 96_000 // k)))
    if max_moves_per_pass is None:
        max_moves_per_pass = max(200, graph.n // 4)
    passes = kept = tried = 0
    trace: list[tuple] = []
    stopped = "converged"
    if k == 1 or graph.n == 0:
        stopped = "nothing to refine"
    deadline = None if time_limit is None else t0 + float(time_limit)
    while stopped == "converged" and passes < max_passes:
        passes += 1
        locked = np.zeros(graph.n, dtype=bool)
        start_key = best_key = R.key(scale)
        moves: list[tuple[int, int, int]] = []
        best_len, since = 0, 0
        why = "patience"
        while since < patience and len(moves) < max_moves_per_pass:
            if deadline is not None and time.perf_counter() > deadline:
                stopped = why = "time limit"
                break
            c = R.cost(R.send, R.recv, R.smsg, R.rmsg)
            top = np.flatnonzero(c >= c.max() - 1e-12 * max(1.0, abs(c.max())))[:4]
            heavy = np.flatnonzero(R.load > cap)          # overloaded by an earlier move of this pass
            v, b = R.candidates(np.union1d(top, heavy), locked, max_candidates, rng)
            if v.size == 0:
                why = "no candidate"
                break
            # Δ overload Σ_p max(0, load_p − cap): moves that keep every part within
            # the cap rank first; when none exists the pass may overload a part
            # (then moves out of it rank first) — states count only when feasible
            s_ = R.part[v]
            ls, lb, wv = R.load[s_], R.load[b], R.w[v]
            dover = (np.maximum(ls - wv - cap, 0) - np.maximum(ls - cap, 0)
                     + np.maximum(lb + wv - cap, 0) - np.maximum(lb - cap, 0))
            if objective == "weighted":      # messages enter the cost: rank by bytes, then exact
                nm, dphi, dtv, _ = R.evaluate(v, b, scale_rows, False, cost_objective="max-both")
                ok = R.tv + dtv <= vlimit
                if not ok.any():
                    why = "volume limit"
                    break
                sel = np.flatnonzero(ok)[np.lexsort((dtv[ok], dphi[ok], nm[ok], dover[ok]))[:_EXACT]]
                v, b, dover = v[sel], b[sel], dover[sel]
            newmax, dphi, dtv, _ = R.evaluate(v, b, scale, objective == "weighted")
            dsend, drecv = R.last_delta
            ok = R.tv + dtv <= vlimit
            if not ok.any():
                why = "volume limit"
                break
            idx = np.flatnonzero(ok)
            if objective == "total":
                keys = (dphi[idx], newmax[idx], dtv[idx], dover[idx])
            else:
                keys = (dtv[idx], dphi[idx], newmax[idx], dover[idx])
            order = idx[np.lexsort(keys)]
            first = order[0]
            sel = ((newmax[order] == newmax[first]) & (dphi[order] == dphi[first])
                   & (dtv[order] == dtv[first]) & (dover[order] == dover[first]))
            tie = order[sel]
            if tie.size > 1:                 # last key: Δmessages, computed for the ties only
                tie = tie[:_EXACT]
                dmsg = R.evaluate(v[tie], b[tie], scale, True)[3]
                first = int(tie[int(np.argmin(dmsg))])
            step = [int(first)]
            feasible_now = not (R.load > cap).any()
            if objective != "weighted" and multi_moves > 1 and feasible_now and dover[first] <= 0:
                # further strictly improving moves on nets disjoint from those already
                # moved in this step: their exact Δs add up (module doc), so no re-evaluation
                step += _independent_moves(R, v, b, dsend, drecv, dtv, order, first, scale, cap,
                                           vlimit, multi_moves)
            for i in step:
                vv, bb = int(v[i]), int(b[i])
                moves.append((vv, int(R.part[vv]), bb))
                R.move(vv, bb)
                locked[vv] = True
                tried += 1
            key = R.key(scale)
            if key < best_key and not (R.load > cap).any():
                best_key, best_len, since = key, len(moves), 0
            else:
                since += len(step)
        for vv, a, _ in reversed(moves[best_len:]):
            R.move(vv, a)
        kept += best_len
        if len(moves) >= max_moves_per_pass:
            why = "move limit"
        trace.append({"seconds": round(time.perf_counter() - t0, 4), "value": best_key[0],
                      "kept": best_len, "tried": len(moves), "pass_end": why})
        # another pass only when this one lowered the primary value by > min_gain
        if not best_key[0] < start_key[0] * (1.0 - min_gain):
            break
    out_part = R.part
    after = R.figures()
    report = {"objective": objective, "k": k, "before": before, "after": after,
              "passes": passes, "moves": kept, "moves_tried": tried,
              "seconds": time.perf_counter() - t0, "stopped": stopped, "trace": trace,
              "balance_limit": limit, "balance_cap": cap, "volume_limit": vlimit,
              "params": {"imbalance": imbalance, "volume_tolerance": volume_tolerance, "seed": seed,
                         "time_limit": time_limit, "alpha": alpha, "beta": beta, "f": f, "dtype": dtype,
                         "patience": patience, "max_candidates": max_candidates}}
    return out_part, report
