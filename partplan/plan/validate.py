"""Check a plan and replay it in one process (pure numpy, the exact oracle).

:func:`replay` executes the plan the way the runtime will — per rank gather
``H[send_idx]`` → all-to-all-v (split sizes = counts in rows, received rows
written into the ghost tail of ``H_ext`` in source order) → local SpMM
(scipy CSR) → for 1.5D an all-reduce SUM in the replica group, for 2D a fold
(partial rows sent back in the row group and added at ``fold_recv_idx``).

:func:`validate_plan` runs the structural checks (counts transpose-consistent,
indices in range, every halo slot filled exactly once and used, ids
consistent between sender and receiver), rebuilds ``A`` from the shards and
compares its fingerprint with the manifest (or with ``graph``), then compares
the replay with scipy's ``A @ H``: bitwise for 1D with a random float64 H
(the local CSR keeps the global summation order), exactly with an
integer-valued H for every layout when A's values are integers (pattern or
integer weights; sums of small integers are exact in float64), else within
1e-12 relative.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import PlanError
from ..graph import Graph
from .builder import Plan, RankPlan
from .store import load_plan


# ----------------------------------------------------------------------------- replay
def _exchange(ranks: list[RankPlan], held: list[np.ndarray], prefix: str, idx_key: str,
              send_counts: str, recv_counts: str, group_key: str) -> list[np.ndarray]:
    """Simulate all_to_all_single in every group: returns each rank's received rows
    (source group-rank order). ``held[r]`` is the array rows are gathered from."""
    p = len(ranks)
    sendbuf, offs = [], []
    for r in range(p):
        a = ranks[r].arrays
        sendbuf.append(held[r][a[prefix + idx_key]])
        offs.append(np.concatenate([[0], np.cumsum(a[prefix + send_counts])]))
    out = []
    for r in range(p):
        a = ranks[r].arrays
        group = a[group_key]
        parts = []
        for g, s in enumerate(group):
            cnt = int(a[prefix + recv_counts][g])
            if cnt == 0:
                continue
            sg = np.flatnonzero(ranks[s].arrays[group_key] == r)
            if sg.size != 1:
                raise PlanError(f"rank {r}: receives from rank {int(s)} whose {group_key} does not list it once")
            sg = int(sg[0])
            sc = int(ranks[s].arrays[prefix + send_counts][sg])
            if sc != cnt:
                raise PlanError(f"rank {int(s)} sends {sc} rows to rank {r}, which expects {cnt} "
                                f"(field {prefix + send_counts} vs {prefix + recv_counts})")
            parts.append(sendbuf[s][offs[s][sg]:offs[s][sg] + cnt])
        width = held[r].shape[1:] if held[r].ndim > 1 else ()
        out.append(np.concatenate(parts) if parts else np.zeros((0, *width), dtype=held[r].dtype))
    return out


def replay(plan: Plan, H: np.ndarray) -> np.ndarray:
    """``Z = A @ H`` computed only through the plan (H: float[n, f]); returns Z[n, f]."""
    H = np.asarray(H)
    n = plan.part.size
    layout = plan.manifest["layout"]
    R = plan.ranks
    held = [H[rp.h_ids] for rp in R]
    halo = _exchange(R, held, "", "send_idx", "send_counts", "recv_counts", "a2a_group")
    partial = []
    for rp, h, x in zip(R, held, halo):
        H_ext = np.concatenate([h, x]) if x.size else h
        partial.append(rp.local_matrix() @ H_ext)
    Z = np.zeros((n,) + H.shape[1:], dtype=np.result_type(H.dtype, np.float64))
    if layout == "1d":
        for rp, z in zip(R, partial):
            Z[rp.row_ids] = z
    elif layout == "1.5d":
        done = set()
        for rp in R:
            grp = tuple(int(x) for x in rp.reduce_group)
            if grp in done:
                continue
            done.add(grp)
            total = partial[grp[0]].copy()
            for s in grp[1:]:
                if not np.array_equal(R[s].row_ids, rp.row_ids):
                    raise PlanError(f"ranks {grp[0]} and {s} of one reduce_group hold different row_ids")
                total += partial[s]
            Z[rp.row_ids] = total
    else:  # 2d fold
        recv = _exchange(R, partial, "", "fold_send_idx", "fold_send_counts", "fold_recv_counts", "row_group")
        for rp, z, got in zip(R, partial, recv):
            own = np.zeros((rp.n_local,) + H.shape[1:], dtype=Z.dtype)
            own[rp.fold_self_dst] += z[rp.fold_self_src]
            start = 0
            for cnt in rp.fold_recv_counts:
                cnt = int(cnt)
                own[rp.fold_recv_idx[start:start + cnt]] += got[start:start + cnt]
                start += cnt
            Z[rp.h_ids] = own
    return Z


def replay_backward(plan: Plan, G: np.ndarray) -> np.ndarray:
    """``A^T @ G`` through the backward lists of a 1D plan (G rows held by part)."""
    R = plan.ranks
    if not R or not R[0].has("bwd_indptr"):
        raise PlanError("this plan has no separate backward lists (A symmetric or not planned)")
    held = [G[rp.row_ids] for rp in R]
    halo = _exchange(R, held, "bwd_", "send_idx", "send_counts", "recv_counts", "a2a_group")
    out = np.zeros((plan.part.size,) + G.shape[1:])
    for rp, h, x in zip(R, held, halo):
        out[rp.row_ids] = rp.local_matrix("bwd_") @ np.concatenate([h, x])
    return out


# ----------------------------------------------------------------------------- checks
class _Report:
    def __init__(self):
        self.checks = []

    def add(self, name: str, problems: list[str], detail: str = ""):
        self.checks.append({"name": name, "ok": not problems, "detail": detail if not problems
                            else "; ".join(problems[:5]) + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else "")})


def _in_range(a, lo, hi):
    return a.size == 0 or (a.min() >= lo and a.max() < hi)


def _structure(plan: Plan, rep: _Report, prefix: str = ""):
    R, n = plan.ranks, plan.part.size
    bad_csr, bad_cnt, bad_halo, bad_ids = [], [], [], []
    for rp in R:
        a, r = rp.arrays, rp.rank
        rows = a["row_ids"]
        held = a["h_ids"] if not prefix else rows
        halo, ip, ix = a[prefix + "halo_ids"], a[prefix + "indptr"], a[prefix + "indices"]
        nl, nh = held.size, halo.size
        if ip.size != rows.size + 1 or (ip.size and (ip[0] != 0 or ip[-1] != ix.size or np.any(np.diff(ip) < 0))):
            bad_csr.append(f"rank {r}: {prefix}indptr is not a CSR pointer array of {rows.size} rows over "
                           f"{ix.size} nonzeros")
        if not _in_range(ix, 0, nl + nh):
            bad_csr.append(f"rank {r}: {prefix}indices outside [0, {nl + nh})")
        if (prefix + "data") in a and a[prefix + "data"].size != ix.size:
            bad_csr.append(f"rank {r}: {prefix}data has {a[prefix + 'data'].size} values for {ix.size} indices")
        sc, rc, grp = a[prefix + "send_counts"], a[prefix + "recv_counts"], a["a2a_group"]
        si = a[prefix + "send_idx"]
        if sc.size != grp.size or rc.size != grp.size:
            bad_cnt.append(f"rank {r}: {prefix}send/recv counts do not have one entry per a2a_group member")
            continue
        if np.any(sc < 0) or np.any(rc < 0):
            bad_cnt.append(f"rank {r}: negative {prefix}count")
        if sc.sum() != si.size:
            bad_cnt.append(f"rank {r}: sum({prefix}send_counts) = {int(sc.sum())} != len({prefix}send_idx) = {si.size}")
        if rc.sum() != nh:
            bad_cnt.append(f"rank {r}: sum({prefix}recv_counts) = {int(rc.sum())} != halo size {nh}")
        me = np.flatnonzero(grp == r)
        if me.size != 1 or sc[me[0]] or rc[me[0]]:
            bad_cnt.append(f"rank {r}: not in its a2a_group once, or sends to itself")
        if not _in_range(si, 0, nl):
            bad_cnt.append(f"rank {r}: {prefix}send_idx outside [0, {nl})")
        if not (_in_range(rows, 0, n) and _in_range(held, 0, n) and _in_range(halo, 0, n)):
            bad_ids.append(f"rank {r}: global ids outside [0, {n})")
            continue
        if np.any(np.diff(rows) <= 0) or np.any(np.diff(held) <= 0):
            bad_ids.append(f"rank {r}: row_ids / h_ids not strictly ascending")
        if np.unique(halo).size != nh or np.intersect1d(halo, held).size:
            bad_halo.append(f"rank {r}: {prefix}halo_ids repeat or overlap held rows")
        used = np.zeros(nh, dtype=bool)
        used[ix[(ix >= nl) & (ix < nl + nh)] - nl] = True
        if not used.all():
            bad_halo.append(f"rank {r}: {int((~used).sum())} halo slots never read by the local CSR")
    # cross-rank: counts transpose-consistent and the rows sent are the rows expected
    for rp in R:
        a, r = rp.arrays, rp.rank
        grp = a["a2a_group"]
        offs = np.concatenate([[0], np.cumsum(a[prefix + "recv_counts"])])
        for g, s in enumerate(grp):
            s = int(s)
            if s == r or not 0 <= s < len(R):
                continue
            b = R[s].arrays
            sg = np.flatnonzero(b["a2a_group"] == r)
            if sg.size != 1:
                bad_cnt.append(f"rank {s} is in rank {r}'s a2a_group but rank {r} is not in rank {s}'s")
                continue
            sg = int(sg[0])
            sent = int(b[prefix + "send_counts"][sg])
            want = int(a[prefix + "recv_counts"][g])
            if sent != want:
                bad_cnt.append(f"rank {s} sends {sent} rows to rank {r}, which expects {want}")
                continue
            so = int(b[prefix + "send_counts"][:sg].sum())
            s_held = b["h_ids"] if not prefix else b["row_ids"]
            ids = s_held[b[prefix + "send_idx"][so:so + sent]]
            if not np.array_equal(ids, a[prefix + "halo_ids"][offs[g]:offs[g] + want]):
                bad_halo.append(f"rows rank {s} sends to rank {r} are not the halo rows rank {r} expects "
                                f"from it")
    rep.add(prefix + "csr", bad_csr, "indptr/indices/data consistent and in range")
    rep.add(prefix + "counts", bad_cnt, "send counts of q to r equal recv counts of r from q; send_idx in range")
    rep.add(prefix + "halo", bad_halo, "every halo slot filled exactly once by the right row and read")
    rep.add(prefix + "ids", bad_ids, "global ids in range and ascending")


def _coverage(plan: Plan, rep: _Report):
    """Held rows: each vertex held once (1d, 2d) or once per replica (1.5d)."""
    m = plan.manifest
    n, p = plan.part.size, len(plan.ranks)
    c = int(m["layout_params"].get("c", 1)) if m["layout"] == "1.5d" else 1
    cnt = np.zeros(n, dtype=np.int64)
    for rp in plan.ranks:
        cnt[rp.h_ids] += 1
    probs = []
    if not np.all(cnt == c):
        v = int(np.flatnonzero(cnt != c)[0])
        probs.append(f"vertex {v} is held by {int(cnt[v])} ranks (expected {c})")
    if m["layout"] != "2d":
        cr = np.zeros(n, dtype=np.int64)
        for rp in plan.ranks:
            cr[rp.row_ids] += 1
        if not np.all(cr == c):
            v = int(np.flatnonzero(cr != c)[0])
            probs.append(f"row {v} is computed by {int(cr[v])} ranks (expected {c})")
    owner = plan.owner if plan.owner is not None else plan.part
    if m["layout"] == "1d":
        for rp in plan.ranks:
            if np.any(owner[rp.h_ids] != rp.rank) or np.any(plan.part[rp.row_ids] != rp.rank):
                probs.append(f"rank {rp.rank}: h_ids/row_ids disagree with partition.arrow")
                break
    rep.add("coverage", probs, f"every vertex held {'once' if c == 1 else f'{c} times'}; p = {p}")


def _rebuild(plan: Plan) -> sp.csr_matrix:
    """Global A from the shards' local CSRs (each nonzero multiplied exactly once)."""
    n = plan.part.size
    rr, cc, dd = [], [], []
    pattern = not plan.ranks[0].has("data") if plan.ranks else True
    for rp in plan.ranks:
        cols_g = np.concatenate([rp.h_ids, rp.halo_ids])
        ip, ix = rp.indptr, rp.indices
        rr.append(np.repeat(rp.row_ids, np.diff(ip)))
        cc.append(cols_g[ix])
        dd.append(np.ones(ix.size) if pattern else rp.data)
    r, c, d = (np.concatenate(x) if x else np.zeros(0) for x in (rr, cc, dd))
    A = sp.coo_matrix((d, (r.astype(np.int64), c.astype(np.int64))), shape=(n, n)).tocsr()
    return A, int(r.size), pattern


def validate_plan(path, graph: Graph | None = None, *, seed: int = 0, f: int = 4,
                  replay_check: bool = True) -> dict:
    """Validate the plan at ``path``; returns a report dict ``{"ok", "checks", ...}``.

    Raises :class:`PlanError` when the plan cannot be loaded (corrupted,
    truncated, missing shard, unknown version, another graph). Consistency
    failures are reported (``ok`` False) with the first offending ranks.
    """
    plan = load_plan(path, graph=graph)
    m = plan.manifest
    rep = _Report()
    _structure(plan, rep)
    if plan.ranks and plan.ranks[0].has("bwd_indptr"):
        _structure(plan, rep, prefix="bwd_")
    if all(c["ok"] for c in rep.checks if c["name"].endswith("ids")):
        _coverage(plan, rep)
    ok_struct = all(c["ok"] for c in rep.checks)
    if ok_struct:
        A, nnz_seen, pattern = _rebuild(plan)
        g2 = Graph.from_scipy(A, pattern=True)
        probs = []
        if nnz_seen != m["graph"]["nnz"] or g2.fingerprint != m["graph"]["fingerprint"]:
            probs.append(f"the shards hold {nnz_seen} nonzeros whose pattern fingerprint "
                         f"{g2.fingerprint[:16]}… differs from manifest graph.fingerprint "
                         f"{m['graph']['fingerprint'][:16]}… (nnz {m['graph']['nnz']})")
        rep.add("matrix", probs, "shards reassemble exactly the planned matrix (fingerprint match)")
        if replay_check and not probs:
            ref = graph.to_scipy() if graph is not None else A
            rng = np.random.default_rng(seed)
            n = plan.part.size
            integral = bool(np.all(ref.data == np.round(ref.data)))
            problems, details = [], []
            try:
                Hf = rng.standard_normal((n, f))
                Zf, Rf = replay(plan, Hf), ref @ Hf
                if m["layout"] == "1d":
                    if not np.array_equal(Zf, Rf):
                        problems.append(f"1d replay differs from scipy A @ H (max |diff| "
                                        f"{float(np.abs(Zf - Rf).max()):.3g}); expected bitwise equality")
                    else:
                        details.append("bitwise equal to scipy for random float64 H")
                else:
                    err = float(np.abs(Zf - Rf).max()) if n else 0.0
                    scale = float((abs(ref) @ np.abs(Hf)).max()) if n else 0.0
                    if err > 1e-12 * max(scale, 1.0):
                        problems.append(f"replay differs from scipy by {err:.3g} (scale {scale:.3g})")
                    details.append(f"float64 H: max |diff| {err:.2g}")
                if integral:
                    Hi = rng.integers(-8, 9, size=(n, f)).astype(np.float64)
                    if not np.array_equal(replay(plan, Hi), ref @ Hi):
                        problems.append("replay with integer-valued H is not exactly scipy's A @ H")
                    else:
                        details.append("exact for integer-valued H")
                if plan.ranks and plan.ranks[0].has("bwd_indptr"):
                    G = rng.standard_normal((n, f))
                    Gb, Tb = replay_backward(plan, G), ref.T.tocsr() @ G
                    if not np.array_equal(Gb, Tb):
                        problems.append(f"backward replay differs from scipy A^T @ G (max |diff| "
                                        f"{float(np.abs(Gb - Tb).max()):.3g}); expected bitwise equality")
                    else:
                        details.append("backward A^T @ G bitwise equal")
            except PlanError as exc:
                problems.append(str(exc))
            rep.add("replay", problems, "; ".join(details))
    ok = all(c["ok"] for c in rep.checks)
    return {"plan": str(Path(path)), "ok": ok, "layout": m["layout"], "ranks": m["ranks"], "k": m["k"],
            "n": m["graph"]["n"], "nnz": m["graph"]["nnz"], "graph_checked": graph is not None,
            "checks": rep.checks}
