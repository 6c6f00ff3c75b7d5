"""Check a plan: structure, counts, ids, the planned matrix, and a replay.

Every check runs the plan's own programs — there is one interpreter
(:class:`partplan.runtime.Executor`); here it runs on
:class:`~partplan.runtime.LocalComm` (all ranks in this process, numpy):

* ``structure`` — per step and rank: index arrays inside their buffers, CSR
  pointers valid, counts non-negative and summing to the buffer sizes;
* ``counts`` — every alltoallv step: what q sends r equals what r expects
  from q, and both equal the manifest's pairs (the executor's start-up check);
* ``ids`` — the global ids of the rows are pushed through the program: every
  received row is the one the receiver lists (``recv_ids``), every row a
  local SpMM reads was written, no received row goes unread, replicas reduce
  the same rows, folds add partial rows to the right rows, and each program
  ends with its ``out_ids``; outputs of the writing ranks cover every vertex
  exactly once;
* ``matrix`` — the nonzeros the SpMM steps multiply reassemble exactly the
  planned matrix (fingerprint of A, or of A^T for a separate backward);
* ``replay`` — ``A @ H`` through the program equals scipy's: bitwise for 1D
  with float64 H (local CSRs keep scipy's summation order), exactly with an
  integer-valued H when A's values are integers, else within 1e-12 relative;
  the backward program likewise against ``A^T @ G``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import PlanError
from ..graph import Graph
from .builder import Plan, program_steps
from .program import dst_start
from .store import load_plan


class _Report:
    def __init__(self):
        self.checks = []

    def add(self, name: str, problems: list[str], detail: str = ""):
        self.checks.append({"name": name, "ok": not problems, "detail": detail if not problems
                            else "; ".join(problems[:5]) + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else "")})


def _in_range(a, lo, hi):
    return a.size == 0 or (int(a.min()) >= lo and int(a.max()) < hi)


def _structure(plan: Plan, program: str) -> list[str]:
    probs = []
    for rp in plan.ranks:
        r, bufs = rp.rank, rp.buffers(program)
        pre = rp.prefix(program)
        if rp[pre + ".in_ids"].size != bufs.get("in") or rp[pre + ".out_ids"].size != bufs.get("out"):
            probs.append(f"rank {r}: {pre}.in_ids / out_ids lengths differ from buffers in / out")
        for st in program_steps(plan.manifest, program):
            sid, op = st["id"], st["op"]
            a = lambda k: rp[f"{sid}.{k}"]  # noqa: E731
            rows = lambda b: bufs.get(b, -1)  # noqa: E731
            unsized = [b for b in (st.get("src"), st.get("dst"), st.get("buf")) if b is not None and b not in bufs]
            if isinstance(st.get("dst_row"), str) and st["dst_row"] not in bufs:
                unsized.append(st["dst_row"])
            if unsized:
                probs += [f"rank {r}: {sid} names buffer {b!r} with no size in the shard" for b in unsized]
                continue
            if op == "gather":
                if not _in_range(a("idx"), 0, rows(st["src"])) or a("idx").size != rows(st["dst"]):
                    probs.append(f"rank {r}: {sid}.idx outside buffer {st['src']} or not {rows(st['dst'])} long")
            elif op == "copy":
                if st["dst_row"] + rows(st["src"]) > rows(st["dst"]):
                    probs.append(f"rank {r}: {sid} copies past the end of {st['dst']}")
            elif op == "alltoallv":
                sc, rc = a("send_counts"), a("recv_counts")
                start = dst_start(st, bufs)
                if np.any(sc < 0) or np.any(rc < 0):
                    probs.append(f"rank {r}: {sid}: negative count")
                elif int(sc.sum()) != rows(st["src"]) or start + int(rc.sum()) > rows(st["dst"]):
                    probs.append(f"rank {r}: {sid}: counts ({int(sc.sum())} sent, {int(rc.sum())} received) do "
                                 f"not fit buffers {st['src']} ({rows(st['src'])}) / {st['dst']} ({rows(st['dst'])})")
                elif "recv_ids" in st["arrays"] and a("recv_ids").size != int(rc.sum()):
                    probs.append(f"rank {r}: {sid}.recv_ids has {a('recv_ids').size} ids for {int(rc.sum())} rows")
            elif op == "spmm":
                ip, ix = a("indptr"), a("indices")
                nr = rows(st["dst"])
                if ip.size != nr + 1 or (ip.size and (ip[0] != 0 or ip[-1] != ix.size or np.any(np.diff(ip) < 0))):
                    probs.append(f"rank {r}: {sid}.indptr is not a CSR pointer array of {nr} rows over {ix.size} "
                                 f"nonzeros")
                if not _in_range(ix, 0, rows(st["src"])):
                    probs.append(f"rank {r}: {sid}.indices outside [0, {rows(st['src'])})")
                if "data" in st["arrays"] and a("data").size != ix.size:
                    probs.append(f"rank {r}: {sid}.data has {a('data').size} values for {ix.size} indices")
                if a("row_ids").size != nr:
                    probs.append(f"rank {r}: {sid}.row_ids has {a('row_ids').size} ids for {nr} rows")
            elif op == "scatter_add":
                idx = a("idx")
                srows = a("src_idx").size if "src_idx" in st["arrays"] else rows(st["src"])
                if not _in_range(idx, 0, rows(st["dst"])) or idx.size != srows or (
                        "src_idx" in st["arrays"] and not _in_range(a("src_idx"), 0, rows(st["src"]))):
                    probs.append(f"rank {r}: {sid}: scatter indices out of range or of the wrong length")
    return probs


def _id_walk(plan: Plan, program: str, n: int) -> tuple[list[str], tuple]:
    """Push global ids (int64, one column) through the program; see the module doc.
    Returns (problems, (rows, cols, data) of every multiplied nonzero)."""
    from ..runtime.comm import LocalComm
    probs = []
    R = plan.ranks
    comm = LocalComm(len(R), plan.groups())
    bufs = []
    for rp in R:
        b = {name: np.full((rows, 1), -1, dtype=np.int64) for name, rows in rp.buffers(program).items()}
        b["in"] = rp.in_ids(program).reshape(-1, 1).astype(np.int64)
        bufs.append(b)
    recv = [dict() for _ in R]  # buffer -> bool mask of rows written by an alltoallv
    trip = ([], [], [])
    for st in program_steps(plan.manifest, program):
        sid, op = st["id"], st["op"]
        if op == "copy":
            for b in bufs:
                src = b[st["src"]]
                b[st["dst"]][st["dst_row"]:st["dst_row"] + src.shape[0]] = src
        elif op == "gather":
            for rp, b in zip(R, bufs):
                b[st["dst"]] = b[st["src"]][rp[f"{sid}.idx"]]
        elif op == "alltoallv":
            starts = [dst_start(st, rp.buffers(program)) for rp in R]
            outs = [b[st["dst"]][s:s + int(rp[f"{sid}.recv_counts"].sum())] for rp, b, s in zip(R, bufs, starts)]
            comm.alltoallv(st["group"], [b[st["src"]] for b in bufs], [rp[f"{sid}.send_counts"] for rp in R],
                           [rp[f"{sid}.recv_counts"] for rp in R], outs, what=sid)
            for i, rp in enumerate(R):
                mask = recv[i].setdefault(st["dst"], np.zeros(bufs[i][st["dst"]].shape[0], dtype=bool))
                mask[starts[i]:starts[i] + outs[i].shape[0]] = True
            for rp, o in zip(R, outs):
                if comm.member(st["group"], rp.rank) is not None and "recv_ids" in st["arrays"] and \
                        not np.array_equal(o[:, 0], rp[f"{sid}.recv_ids"]):
                    probs.append(f"rank {rp.rank}: {sid}: the rows received are not {sid}.recv_ids (wrong rows "
                                 f"sent, or sent in another order)")
        elif op == "spmm":
            for i, (rp, b) in enumerate(zip(R, bufs)):
                ip, ix = rp[f"{sid}.indptr"], rp[f"{sid}.indices"]
                src_ids = b[st["src"]][:, 0]
                cols = src_ids[ix]
                if np.any(cols < 0):
                    probs.append(f"rank {rp.rank}: {sid} reads rows of {st['src']} that no step wrote")
                if st["src"] in recv[i]:
                    used = np.zeros(src_ids.size, dtype=bool)
                    used[ix] = True
                    unread = int(np.count_nonzero(recv[i][st["src"]] & ~used))
                    if unread:
                        probs.append(f"rank {rp.rank}: {unread} rows received into {st['src']} are never read")
                rows = rp[f"{sid}.row_ids"]
                trip[0].append(np.repeat(rows, np.diff(ip)))
                trip[1].append(cols)
                trip[2].append(rp[f"{sid}.data"] if rp.has(f"{sid}.data") else np.ones(ix.size))
                b[st["dst"]] = rows.reshape(-1, 1).astype(np.int64).copy()
        elif op == "allreduce":
            for rp, b in zip(R, bufs):
                g = comm.member(st["group"], rp.rank)
                if g is not None and not np.array_equal(b[st["buf"]], bufs[g.ranks[0]][st["buf"]]):
                    probs.append(f"rank {rp.rank}: {sid}: reduces rows other than rank {g.ranks[0]}'s "
                                 f"(group {g.name})")
        elif op == "scatter_add":
            for rp, b in zip(R, bufs):
                src = b[st["src"]]
                if f"{sid}.src_idx" in rp.arrays:
                    src = src[rp[f"{sid}.src_idx"]]
                dst, idx = b[st["dst"]], rp[f"{sid}.idx"]
                if st.get("zero"):
                    dst[:] = -1
                    dst[:, 0] = -2  # "zeroed, id unknown" until a row is added
                tgt = dst[idx, 0]
                known = tgt >= 0
                if np.any(src[:, 0][known] != tgt[known]):
                    probs.append(f"rank {rp.rank}: {sid} adds partial rows to other rows")
                dst[idx[~known], 0] = src[~known, 0]
    for i, rp in enumerate(R):
        out = bufs[i]["out"][:, 0].copy()
        zero_rows = out == -2  # zeroed by a scatter_add and never added to: an empty row, Z = 0
        out[zero_rows] = rp.out_ids(program)[zero_rows]
        if not np.array_equal(out, rp.out_ids(program)):
            probs.append(f"rank {rp.rank}: the {program} program ends with rows other than its out_ids")
    cover = np.zeros(n, dtype=np.int64)
    for rp in R:
        if rp.writes_output(program):
            ids = rp.out_ids(program)
            if _in_range(ids, 0, n):
                np.add.at(cover, ids, 1)
    if not np.all(cover == 1):
        v = int(np.flatnonzero(cover != 1)[0])
        probs.append(f"vertex {v} is written by {int(cover[v])} ranks' outputs (expected 1)")
    hold = np.zeros(n, dtype=bool)
    for rp in R:
        ids = rp.in_ids(program)
        if _in_range(ids, 0, n):
            hold[ids] = True
    if not hold.all():
        probs.append(f"vertex {int(np.flatnonzero(~hold)[0])} is an input row of no rank")
    return probs, trip


def _matrix(trip, n: int):
    r, c, d = (np.concatenate(x) if x else np.zeros(0) for x in trip)
    A = sp.coo_matrix((d, (r.astype(np.int64), c.astype(np.int64))), shape=(n, n)).tocsr()
    return A, int(r.size)


def _partition_agrees(plan: Plan) -> list[str]:
    """1d-style check against partition.arrow: rank r's outputs are part == r's rows."""
    probs = []
    lay = plan.layout
    per_block = lay.ranks // lay.row_blocks
    for rp in plan.ranks:
        out = rp.out_ids("forward")
        if not _in_range(out, 0, plan.part.size):
            continue
        want = rp.rank // per_block
        if np.any(plan.part[out] != want):
            probs.append(f"rank {rp.rank}: its output rows are not the rows with part == {want} in partition.arrow")
            break
    return probs


def _compare(Z, ref, exact: bool, what: str, problems: list, details: list, A=None, H=None):
    if exact:
        if not np.array_equal(Z, ref):
            problems.append(f"{what} differs from scipy (max |diff| {float(np.abs(Z - ref).max()):.3g}); "
                            f"expected bitwise equality")
        else:
            details.append(f"{what} bitwise equal to scipy")
    else:
        err = float(np.abs(Z - ref).max()) if Z.size else 0.0
        scale = float((abs(A) @ np.abs(H)).max()) if Z.size else 0.0
        if err > 1e-12 * max(scale, 1.0):
            problems.append(f"{what} differs from scipy by {err:.3g} (scale {scale:.3g})")
        details.append(f"{what}: max |diff| {err:.2g}")


def validate_plan(path, graph: Graph | None = None, *, seed: int = 0, f: int = 4,
                  replay_check: bool = True) -> dict:
    """Validate the plan at ``path``; returns a report dict ``{"ok", "checks", ...}``.

    Raises :class:`PlanError` when the plan cannot be loaded (corrupted,
    truncated, missing shard, unknown version, another graph). Consistency
    failures are reported (``ok`` False) with the first offending ranks.
    """
    from ..runtime.spmm import local_executor, replay
    if graph is not None:  # a normalized plan is checked against the normalized input graph
        from .store import read_manifest
        m0 = read_manifest(path)
        if m0.get("normalize") and graph.fingerprint == m0["graph"].get("source_fingerprint"):
            from ..nn.normalize import normalize_adjacency
            graph = normalize_adjacency(graph, m0["normalize"])
    plan = load_plan(path, graph=graph)
    m = plan.manifest
    n = m["graph"]["n"]
    rep = _Report()
    progs = [p for p in ("forward", "backward") if p in m["programs"] and "same_as" not in m["programs"][p]]
    struct = []
    for prog in progs:
        struct += _structure(plan, prog)
    rep.add("structure", struct, "indices, CSR pointers and counts fit their buffers")
    if struct:
        return _result(path, m, graph, rep)
    try:
        local_executor(plan)  # the executor's own start-up count check, all ranks
        rep.add("counts", [], "send q→r == recv r←q in every group and step, equal to the manifest's pairs")
    except PlanError as exc:
        rep.add("counts", [str(exc)])
        return _result(path, m, graph, rep)
    walks = {}
    ids_probs = []
    for prog in progs:
        try:
            pr, trip = _id_walk(plan, prog, n)
        except PlanError as exc:
            pr, trip = [str(exc)], ([], [], [])
        ids_probs += [f"{prog}: {x}" for x in pr]
        walks[prog] = trip
    ids_probs += _partition_agrees(plan)
    rep.add("ids", ids_probs, "every received row is the one listed, every read row written, outputs cover "
                              "each vertex once")
    if ids_probs:
        return _result(path, m, graph, rep)
    mprobs, mats = [], {}
    for prog in progs:
        A, seen = _matrix(walks[prog], n)
        mats[prog] = A
        g2 = Graph.from_scipy(A, pattern=True)
        want = m["graph"]["fingerprint"] if prog == "forward" else Graph.from_scipy(mats["forward"].T.tocsr(),
                                                                                   pattern=True).fingerprint
        if seen != m["graph"]["nnz"] or g2.fingerprint != want:
            mprobs.append(f"{prog}: the shards multiply {seen} nonzeros whose pattern fingerprint "
                          f"{g2.fingerprint[:16]}… is not the planned matrix's {want[:16]}… (nnz {m['graph']['nnz']})")
    rep.add("matrix", mprobs, "the SpMM steps multiply exactly the planned matrix (fingerprint match)")
    if not mprobs:
        from .checks import recount
        rep.add("manifest", recount(plan, mats), "per-shard summaries and stats equal a recount from the shards")
    if replay_check and not mprobs:
        ref = graph.to_scipy() if graph is not None else mats["forward"]
        rng = np.random.default_rng(seed)
        integral = bool(np.all(ref.data == np.round(ref.data)))
        problems, details = [], []
        one_d = plan.layout.name == "1d"
        for prog in ("forward", "backward"):
            if prog not in m["programs"]:
                continue
            A = ref if prog == "forward" else ref.T.tocsr()
            try:
                H = rng.standard_normal((n, f))
                _compare(replay(plan, H, prog), A @ H, one_d, f"{prog} replay", problems, details, A, H)
                if integral:
                    Hi = rng.integers(-8, 9, size=(n, f)).astype(np.float64)
                    _compare(replay(plan, Hi, prog), A @ Hi, True, f"{prog} integer replay", problems, details)
            except PlanError as exc:
                problems.append(str(exc))
        rep.add("replay", problems, "; ".join(details))
    return _result(path, m, graph, rep)


def _result(path, m, graph, rep) -> dict:
    ok = all(c["ok"] for c in rep.checks)
    return {"plan": str(Path(path)), "ok": ok, "layout": m["layout"], "ranks": m["ranks"], "k": m["k"],
            "n": m["graph"]["n"], "nnz": m["graph"]["nnz"], "graph_checked": graph is not None,
            "backward": m.get("backward"), "checks": rep.checks}


def replay_backward(plan: Plan, G: np.ndarray) -> np.ndarray:
    """``A^T @ G`` through the plan's backward program (LocalComm)."""
    from ..runtime.spmm import replay
    return replay(plan, G, "backward")


def __getattr__(name):
    if name == "replay":
        from ..runtime.spmm import replay
        return replay
    raise AttributeError(name)


def _rebuild(plan: Plan):
    """(A as scipy CSR, nonzeros multiplied, pattern?) reassembled from the forward program."""
    n = plan.part.size
    _, trip = _id_walk(plan, "forward", n)
    A, seen = _matrix(trip, n)
    pattern = not any("data" in st["arrays"] for st in program_steps(plan.manifest, "forward")
                      if st["op"] == "spmm")
    return A, seen, pattern
