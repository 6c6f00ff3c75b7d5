"""``plan-build``: the distributed plan build as a job — N processes build
the plan of a chunked graph together, each reading only its chunks
(``partplan plan GRAPH --partition P --nprocs N``, or the same command under
torchrun). The computations and the algorithm are
:mod:`partplan.plan.distbuild`'s (1D: rows move to their part's process) and
:mod:`partplan.plan.distlayout`'s (1.5D, 2D: nonzeros move to the rank that
multiplies them); a routed layout takes the 1D path up to the halo requests,
then each process routes the deliveries of the rows it owns
(:func:`_routed_programs`). This module drives the processes: their
exchanges (the runtime comm's ``exchange_rows`` / ``exchange_fill`` /
``allgather_object``) and their agreement on errors.

:func:`build_distributed` starts the job (the Python entry the CLI calls);
:func:`build_plan_distributed` is the work of one process on a comm (a
:class:`~partplan.runtime.comm.TorchComm`, or ``LocalComm(1, [])`` when one
process builds every rank).
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from .._atomic import discard_temp, write_error
from ..errors import PartplanError, PlanError
from ..metrics.cost import DEFAULT_ALPHA_S, DEFAULT_BETA_S_PER_BYTE, dtype_name
from ..plan import distbuild as D
from ..program.core import Program
from .registry import Job, register

DEFAULT_TIMEOUT_S = 120.0   # seconds a process of the distributed build waits on a peer (``plan --timeout``)


def agree(comm, err: str | None) -> None:
    """Every process raises the same PlanError when any process has an error
    (so no process waits in a collective the failed one never joins)."""
    msg = D.first_error(comm.allgather_object(err))
    if msg:
        raise PlanError(msg)


def _part_programs(comm, prefix: str, part_of, proc_of: np.ndarray, k: int, q_lo: int, q_hi: int,
                   lay=None, n: int = 0, stages: dict | None = None) -> list[tuple]:
    """(program, counts) of this process's parts. ``part_of(i)`` (part q_lo + i)
    returns ``in_ids``, ``row_nnz``, ``cols``, ``data`` (rows in global CSR
    order), and ``need``/``part_need`` (sorted distinct columns, their
    parts); parts are taken one at a time and their columns dropped once
    renumbered (only the int32 local columns stay). The halos are requested
    from their owners in one exchange of (owner·k + requester, id) pairs.
    A routed layout (``lay.routes``) routes those deliveries instead
    (:func:`_routed_programs`; ``stages[prefix]``: its step matrices)."""
    preps, keep = [], []
    for i in range(q_hi - q_lo):     # loop over this process's parts
        d = part_of(i)
        preps.append(D.prep(q_lo + i, d["in_ids"], d["row_nnz"], d["cols"], d["need"], d["part_need"], k))
        keep.append((d["in_ids"], d["row_nnz"], int(d["cols"].size), d["data"]))
        del d
    keys, ids, counts = D.halo_requests(preps, proc_of, k, comm.world)
    gk, _ = comm.exchange_rows(keys, counts, "halo requests")
    del keys
    gid, _ = comm.exchange_rows(ids, counts, "halo requests")
    del ids
    if lay is not None and lay.routes:
        out, stages[prefix] = _routed_programs(comm, lay, prefix, preps, keep, gk, gid, proc_of, n, (q_lo, q_hi))
        return out
    reqs = D.send_lists(gk, gid, k, q_lo, q_hi)
    return [D.finish_program(prefix, pr, ids_, rn, nz, dt, req, sc)
            for pr, (ids_, rn, nz, dt), (req, sc) in zip(preps, keep, reqs)]


def _routed_programs(comm, lay, prefix: str, preps: list, keep: list, gk: np.ndarray, gid: np.ndarray,
                     proc_of: np.ndarray, n: int, qr: tuple[int, int]) -> tuple[list[tuple], dict]:
    """The routed layout's programs of this process's ranks, from the
    deliveries of the rows it owns (``gk`` = owner·p + reader, ``gid`` = row):
    each process routes its own rows (:func:`~partplan.layouts.routed.route_deliveries`),
    every step's messages go to the processes of their senders and receivers,
    and each rank's buffer chain grows step by step as in
    :meth:`~partplan.layouts.routed.Routed.program`. Returns ((program,
    counts) per rank, {step name: int64[p, p] rows moved} over all processes
    on process 0, None on the others)."""
    from ..layouts.routed import route_deliveries
    from ..plan import distlayout as L
    p, N = lay.ranks, comm.world
    msgs = route_deliveries(gk.astype(np.int64) // p, gk.astype(np.int64) % p, gid.astype(np.int64), lay.route, p,
                            lay.sizes, n)
    got = comm.allgather_object([L.pair_counts(m.src, m.dst, p) for m in msgs.values()])   # sparse, per step
    used = {name: any(g[i][0].size for g in got) for i, name in enumerate(msgs)}
    stages = {name: L.dense_counts([g[i] for g in got], p) for i, name in enumerate(msgs)} \
        if comm.local[0] == 0 else None         # the manifest's matrices: process 0 only
    del got
    ranks = range(*qr)
    ids = [kp[0] for kp in keep]
    progs = [Program.empty(prefix, 1) for _ in ranks]
    for prog, x in zip(progs, ids):
        prog.set_io([x], [x])
    scratch = np.zeros(n, dtype=np.int64)
    held, step = "in", 0
    for name, m in msgs.items():      # loop over the route's steps
        if not used[name]:
            continue
        step += 1
        nxt, send = f"h{step}", f"s{step}"
        trip = np.stack([m.src, m.dst, m.j.astype(np.int64)], axis=1)
        outs = L.ByRank(comm.exchange_rows(*L.grouped(trip, proc_of[m.src], N), "route step")[0], 0, 1, qr)
        ins = L.ByRank(comm.exchange_rows(*L.grouped(trip, proc_of[m.dst], N), "route step")[0], 1, 0, qr)
        del trip
        for i, q in enumerate(ranks):    # loop over this process's ranks
            o = outs.of(q)                               # sent by q: by destination, then id
            g = ins.of(q)                                # received by q: by source, then id
            gath, a2a, rid = lay.step_arrays(m.family, o[:, 1], o[:, 2], g[:, 0], g[:, 2], ids[i], scratch)
            prog = progs[i]
            prog.add("copy", src=held, dst=nxt, dst_row=0)
            prog.size(0, send, len(o))
            prog.add("gather", [gath], src=held, dst=send)
            prog.add("alltoallv", [a2a], group=m.family, src=send, dst=nxt, dst_row=held)
            ids[i] = np.concatenate([ids[i], rid])
            prog.size(0, nxt, len(ids[i]))
        held = nxt
    out = []
    for i, (pr, (in_ids, row_nnz, nnz, data)) in enumerate(zip(preps, keep)):
        scratch[ids[i]] = np.arange(ids[i].size, dtype=np.int64)
        ext_of_local = np.concatenate([scratch[in_ids], scratch[pr["halo"]]])   # [own | halo] -> buffer row
        indptr = np.zeros(in_ids.size + 1, dtype=np.int64)
        np.cumsum(row_nnz, out=indptr[1:])
        d = {"indptr": indptr, "indices": ext_of_local[pr["lcol"]], "row_ids": in_ids}
        if data is not None:
            d["data"] = data
        progs[i].add("spmm", [d], src=held, dst="out")
        out.append((progs[i], {"rows": int(in_ids.size), "nnz": int(nnz)}))
    return out, stages


def _shuffle(comm, r: dict, k: int, p: int, u: int):
    """Stage 2: rows to the process of their part. Returns (Received,
    proc_of, (q_lo, q_hi)); drops the read rows from ``r``."""
    indptr, part_slice, lo = r["indptr"], r["part"], r["lo"]
    deg = np.diff(indptr)
    w = D.part_weights(part_slice, deg, k)
    pb = D.part_bounds(np.sum(np.array(comm.allgather_object(w.tolist()), dtype=np.int64), axis=0), p)
    q_lo, q_hi = int(pb[u]), int(pb[u + 1])
    proc_of = np.repeat(np.arange(p, dtype=np.int64), np.diff(pb))     # part -> process
    rows, vcounts, starts, vstart, ecounts = D.row_sends(part_slice, deg, indptr, lo, proc_of, k, p)
    del deg
    vrecv, _ = comm.exchange_rows(rows, vcounts, "row shuffle")
    del rows
    # the nonzeros of the sent rows, gathered round by round (never a whole send copy)
    indices, data = r.pop("indices"), r.pop("data")
    cols, _ = comm.exchange_fill(D.gather_rows_fill(indices, starts, vstart), ecounts, indices.dtype,
                                 "column shuffle")
    del indices
    if r["info"].weighted:
        data, _ = comm.exchange_fill(D.gather_rows_fill(data, starts, vstart), ecounts, np.float64, "value shuffle")
    del starts, vstart, indptr, r["indptr"]
    return D.Received(vrecv, cols, data, q_lo, q_hi), proc_of, (q_lo, q_hi)


def _ask_holders(comm, r: dict, need: np.ndarray, values: np.ndarray, what: str) -> np.ndarray:
    """``values[need]`` of a per-row array held in row ranges (``r["bounds"]``; this process's slice
    ``values`` of rows ``[r["lo"], r["hi"])``): each distinct column ``need`` (ascending) asked from the
    process holding its row, in two all-to-alls (ids, then answers)."""
    asked, asked_counts = comm.exchange_rows(need, D.lookup_counts(need, r["bounds"], comm.world), what)
    got, _ = comm.exchange_rows(D.lookup_answer(asked, values, r["lo"]), asked_counts, what)
    return got


def _columns(comm, r: dict, rc, proc_of, qr, k: int):
    """Stage 3: the parts of the distinct columns, the forward programs."""
    n = r["info"].n
    need = D.distinct(rc.cols, n)
    part_need = _ask_holders(comm, r, need, r["part"], "part lookup")
    fres = _part_programs(comm, "fwd", lambda i: rc.forward_part(i, need, part_need, n), proc_of, k, *qr,
                          lay=r["lay"], n=n, stages=r["route_stages"])
    return need, part_need, fres


def _backward(comm, r: dict, rc, need, part_need, proc_of, qr, k: int, backward):
    """Stage 4: symmetry; the backward programs from A^T when asked (``backward``
    True) or needed (None and A != A^T). Returns (bres or None, same, sym_pattern)."""
    sym_pattern, same = D.symmetry(comm.allgather_object(D.hash_sums(rc.in_r, rc.estart_r, rc.cols, rc.data)),
                                   r["info"], check_header=not r["header_on_A"])
    if backward is None:
        backward = not same
    bres = None
    if backward:
        rows, order, tcounts = D.transpose_sends(rc, need, part_need, proc_of, k, comm.world)
        trc, _ = comm.exchange_rows(rows, tcounts, "transpose")
        del rows
        tdata = comm.exchange_rows(rc.data[order], tcounts, "transpose")[0] if r["info"].weighted else None
        del order
        T = D.Transposed(trc, tdata, k, *qr)
        del trc, tdata
        bres = _part_programs(comm, "bwd", lambda i: T.backward_part(i, rc, r["info"].n), proc_of, k, *qr,
                              lay=r["lay"], n=r["info"].n, stages=r["route_stages"])
        del T
    rc.cols = rc.data = None
    return bres, same, sym_pattern


def build_plan_distributed(graph_path, partition, k: int, out, *, comm, layout: str = "1d",
                           f: int = 128, dtype: str = "float32", meta: dict | None = None,
                           backward: bool | None = None, alpha: float = DEFAULT_ALPHA_S,
                           beta: float = DEFAULT_BETA_S_PER_BYTE, created: str | None | bool = None,
                           normalize: str | None = None) -> dict:
    """Build and write the plan (layout 1d, 1.5d:c, 2d:RxC or routed:ROUTE:D) of a chunked
    graph with N = ``comm.world`` processes, N ≤ the layout's row blocks (each
    builds the shards of the plan ranks of a contiguous run of row blocks,
    :func:`~partplan.plan.distbuild.part_bounds`); call it on every process.
    The plan is byte for byte the one :func:`~partplan.plan.build_plan` +
    :func:`~partplan.plan.write_plan` write.

    graph_path : a chunked graph directory (:mod:`partplan.io.chunked`).
    partition : part[v] per vertex: a ``.npy`` file (only this process's slice
        is read), another partition file (read whole), or an int array. A
        partition saved by ``partplan partition`` carries its provenance
        (model, backend, objective, seed, params) into the manifest, as the
        one-process build records it.
    k : ranks of the plan (1d: parts), with at least N row blocks.
    out : the plan directory (written atomically by rank 0's rename; an
        existing plan there is replaced; anything else is refused).
    comm : the runtime's comm of this process (:meth:`WorkerContext.world_comm
        <partplan.runtime.launch.WorkerContext.world_comm>`: TorchComm, or
        ``LocalComm(1, [])`` for one process).
    layout : "1d", "1.5d:c", "2d:RxC" or "routed:ROUTE:D[,D1...]"; f, dtype, meta, backward, alpha, beta, created,
        normalize : as :func:`build_plan` / :func:`write_plan`. With ``normalize`` ("gcn", "mean") each
        process turns its rows into Â's right after reading them (:func:`_normalize`: the remaining
        self loops and the degrees are row-local; "gcn" asks the holders of its columns' rows for
        their degree scales), and process 0 streams Â's pattern fingerprint from the chunk files.

    Returns (on every process) a JSON-able dict: ``plan`` (path), ``rank``
    (this process), ``ranks`` (k, plan ranks), ``processes`` (N), ``parts``
    ([first, end) plan ranks built here), ``stages`` (this process's list of
    ``{stage, seconds, peak_rss_bytes}``), ``peak_rss_bytes`` (its maximum
    over stages, bytes) and, on process 0, ``per_rank`` (every process's
    stages, parts and peaks) and ``total_volume`` (rows).
    """
    st = D.Stages()
    u, p = comm.local[0], comm.world
    st.start("read")
    r, err = None, None
    try:
        from ..models.normalize import check_normalize
        normalize = check_normalize(normalize)
        from ..plan.partitions import partition_provenance
        # a saved partition's provenance (model, backend, objective, seed, params): the manifest records it as
        # the one-process build does (an explicit meta field wins)
        meta = {**partition_provenance(partition, verify=False), **(meta or {})}   # checked by build_distributed
        r = D.read_stage(graph_path, partition, layout, k, f, dtype, u, p)
    except PartplanError as exc:
        err = str(exc)
    agree(comm, err)
    source_fp, plan_fp = _graph_fingerprint(comm, graph_path, r["info"], partition, normalize)
    # the header's "directed": false speaks of A; Â's pattern is A's plus the diagonal, less A's zero
    # weights: only where A holds a zero is the header checked on A's rows, before they become Â's
    r["header_on_A"] = normalize is not None and not r["info"].directed and any(comm.allgather_object(
        r["data"] is not None and not bool(np.all(r["data"]))))
    if r["header_on_A"]:
        D.symmetry(comm.allgather_object(D.hash_sums(np.arange(r["lo"], r["hi"], dtype=np.int64), r["indptr"],
                                                     r["indices"], r["data"])), r["info"], check_header=True)
    if normalize is not None:
        _normalize(comm, r, normalize)
    nnz = sum(comm.allgather_object(int(r["indices"].size))) if normalize is not None else r["info"].nnz
    r["mx"] = D.PlanMatrix(plan_fp, source_fp, normalize, nnz, normalize is not None or r["info"].weighted)
    if normalize is not None:     # the stages that follow see Â: weighted, its nonzeros
        r["info"] = replace(r["info"], weighted=True, nnz=nnz)
    k = r["k"]
    st.stop()
    if r["lay"].split_nonzeros:
        return _build_nonzeros(comm, st, r, graph_path, partition, out, f, dtype, meta, backward, alpha, beta,
                               created)
    r["route_stages"] = {}
    st.start("shuffle")
    rc, proc_of, qr = _shuffle(comm, r, k, p, u)
    st.stop()
    st.start("columns")
    need, part_need, fres = _columns(comm, r, rc, proc_of, qr, k)
    st.stop()
    st.start("backward")
    bres, same, sym_pattern = _backward(comm, r, rc, need, part_need, proc_of, qr, k, backward)
    del rc, need, part_need
    st.stop()
    st.start("write")

    def make_manifest(mx, bmode, counts, bcounts):
        if r["lay"].routes:
            return _routed_manifest(r, fres, bres, counts, bcounts, bmode, sym_pattern, mx, f, dtype, meta,
                                    alpha, beta)
        return D.manifest(r["info"], r["lay"], fres[0][0], None if bres is None else bres[0][0], counts, bcounts,
                          bmode, sym_pattern, mx, f, dtype, meta, alpha, beta)
    return _write(comm, st, r, graph_path, partition, out, qr, fres, bres, same, make_manifest, created)


def _routed_manifest(r, fres, bres, counts, bcounts, bmode, sym_pattern, mx, f, dtype, meta, alpha, beta):
    """(the routed plan's manifest fields, its total volume) from the step
    matrices (``r["route_stages"]``) and the rows and nonzeros of each rank."""
    from ..layouts.routed import RoutedStats
    lay, rs = r["lay"], r["route_stages"]

    def side(prefix, prog, cnt):
        st = RoutedStats(lay.spec, lay.ranks, lay.D, lay.route, rs[prefix],
                         np.array([c["rows"] for c in cnt], dtype=np.int64),
                         np.array([c["nnz"] for c in cnt], dtype=np.int64), int(f), dtype_name(dtype), alpha, beta)
        return st, D.programs_json(prog, [m for m in rs[prefix].values() if m.any()])
    return D.assemble_manifest(r["info"], lay, side("fwd", fres[0][0], counts),
                               None if bres is None else side("bwd", bres[0][0], bcounts), bmode, sym_pattern, mx,
                               f, dtype, meta)


def _write_failure(out: Path, exc: BaseException) -> str:
    """The one line for a failed write of the plan ``out``: a partplan error as it is, an OSError
    (a full disk, a folder that turned read-only) naming the plan and its folder."""
    if isinstance(exc, OSError):
        return str(write_error(out, exc))
    return str(exc)


def _graph_fingerprint(comm, graph_path, info, partition, normalize: str | None) -> tuple[str, str]:
    """(the chunked graph's matrix fingerprint (values included), the fingerprint of the pattern the
    plan multiplies: A's, or A + I's under ``normalize``), streamed from the chunk files by process 0
    and sent to all. A's pattern fingerprint is checked against the one a saved partition names (its
    sidecar's ``graph_fingerprint``): a partition of another graph is one error on every process
    before any shard is built, as the one-process build refuses it."""
    from ..io.chunked import chunked_fingerprint, chunked_matrix_fingerprint
    from ..plan.partitions import saved_partition_meta
    u = comm.local[0]
    err, fps = None, None
    if u == 0:
        try:
            fp = chunked_fingerprint(graph_path, info=info)
            made_for = (saved_partition_meta(partition, verify=False) or {}).get("graph_fingerprint")
            if made_for and made_for != fp:
                err = f"{partition}: partition was made for graph {made_for}, not {fp} ({graph_path})"
            else:
                fps = (chunked_matrix_fingerprint(info, fp),
                       fp if normalize is None else D.normalized_fingerprint(graph_path, info))
        except (PartplanError, OSError) as exc:
            err = str(exc)
    got = comm.allgather_object((err, fps))
    agree(comm, got[0][0])
    return got[0][1]


def _normalize(comm, r: dict, mode: str) -> None:
    """This process's rows of A in ``r`` become Â's (``mode`` "gcn" or "mean";
    :func:`~partplan.plan.distbuild.normalize_rows`): the same rows, values and order the
    one-process :func:`~partplan.models.normalize.normalize_adjacency` gives them. "gcn" needs the
    degree scale of every column: asked from the process holding that column's row (the part
    lookup's exchange), O(distinct columns) here. A negative degree is one error on every process."""
    err, scale = None, None
    try:
        scale = D.normalize_rows(r, mode)
    except PartplanError as exc:
        err = str(exc)
    agree(comm, err)
    if mode != "gcn":
        D.set_normalized_values(r, mode, scale)
        return
    need = D.distinct(r["indices"], r["info"].n)
    D.set_normalized_values(r, mode, scale, need, _ask_holders(comm, r, need, scale, "scale lookup"))


def _write(comm, st, r: dict, graph_path, partition, out, qr, fres, bres, same, make_manifest, created) -> dict:
    """Stage 5: each process writes the shards of its plan ranks
    ``qr = (first, end)`` into rank 0's temporary directory; rank 0 writes
    partition.arrow and the manifest (``make_manifest(plan matrix, backward
    mode, counts, backward counts)`` → (manifest, total volume), counts per
    plan rank in rank order) and renames the directory into place (the plan
    store's writer)."""
    from ..plan.store import begin_plan_dir, finish_plan_dir
    u, p, lay, info = comm.local[0], comm.world, r["lay"], r["info"]
    k = lay.ranks
    out = Path(out)
    err, tmp = None, None
    if u == 0:
        try:
            tmp = str(begin_plan_dir(out))
        except (PartplanError, OSError) as exc:
            err = str(exc)
    got = comm.allgather_object((err, tmp))
    agree(comm, got[0][0])
    tmp = Path(got[0][1])
    mx = r["mx"]
    bmode = "separate" if bres is not None else ("same-as-forward" if same else "not-planned")
    err, entries = None, []
    try:
        entries = D.write_parts(tmp, qr, lay, fres, bres, bmode, mx.fingerprint, mx.normalize)
    except (PartplanError, OSError) as exc:
        err = _write_failure(out, exc)
    st.stop()
    fcnt = [c for _, c in fres]
    bcnt = None if bres is None else [c for _, c in bres]
    gathered = comm.allgather_object((err, entries, fcnt, bcnt, st.rows, st.baseline, list(qr)))
    errs = [g[0] for g in gathered]
    if any(errs):
        if u == 0:
            discard_temp(tmp)
        agree(comm, next(e for e in errs if e))
    result = {"plan": str(out), "rank": u, "ranks": k, "processes": p, "parts": list(qr), "stages": st.rows,
              "peak_rss_bytes": max(x["peak_rss_bytes"] for x in st.rows),
              "peak_rss_reset_per_stage": st.resettable, "baseline_rss_bytes": st.baseline}
    err = None
    if u == 0:
        try:
            st.start("manifest")
            # one row per plan rank, in rank order (processes hold ascending runs of ranks)
            shards = [e for g in gathered for e in g[1]]
            counts = [c for g in gathered for c in g[2]]
            bcounts = None if bres is None else [c for g in gathered for c in g[3]]
            m, result["total_volume"] = make_manifest(mx, bmode, counts, bcounts)
            finish_plan_dir(tmp, out, m, D.partition_arrays(partition, info.n, lay.row_blocks), shards,
                            created=created)
            st.stop()
            result["stages"] = st.rows
            result["peak_rss_bytes"] = max(x["peak_rss_bytes"] for x in st.rows)
        except (PartplanError, OSError) as exc:
            discard_temp(tmp)
            err = _write_failure(out, exc)
    agree(comm, comm.allgather_object(err)[0])
    if u == 0:
        result["per_rank"] = [{"rank": q, "parts": g[6], "stages": g[4],
                               "peak_rss_bytes": max(x["peak_rss_bytes"] for x in g[4]),
                               "baseline_rss_bytes": g[5]} for q, g in enumerate(gathered)]
        result["per_rank"][0].update(stages=result["stages"], peak_rss_bytes=result["peak_rss_bytes"])
    return result


# ----------------------------------------------------------------------------- 1.5D / 2D: nonzeros move
def _build_nonzeros(comm, st, r: dict, graph_path, partition, out, f, dtype, meta, backward, alpha, beta,
                    created) -> dict:
    """The stages of :mod:`partplan.plan.distlayout` (layouts whose ranks split
    a row's nonzeros: 1.5D, 2D) after the read stage."""
    from ..plan import distlayout as L
    lay, info = r["lay"], r["info"]
    u, N, n, b = comm.local[0], comm.world, r["info"].n, r["lay"].row_blocks
    st.start("lookup")
    indptr, part_slice, lo, hi = r.pop("indptr"), r["part"], r["lo"], r["hi"]
    deg = np.diff(indptr)
    cols = r.pop("indices")
    need = D.distinct(cols, n)
    part_need = _ask_holders(comm, r, need, part_slice, "part lookup")
    idt = L.id_dtype(n, b)
    pcol = part_need[np.searchsorted(need, cols)].astype(idt)
    del need, part_need
    sym_pattern, same = D.symmetry(comm.allgather_object(
        D.hash_sums(np.arange(lo, hi, dtype=np.int64), indptr, cols, r["data"])), info,
        check_header=not r["header_on_A"])
    if backward is None:
        backward = not same
    del indptr
    st.stop()
    st.start("shuffle")
    w = D.part_weights(part_slice, deg, b)
    pb = D.part_bounds(np.sum(np.array(comm.allgather_object(w.tolist()), dtype=np.int64), axis=0), N)
    proc_of_block = np.repeat(np.arange(N, dtype=np.int64), np.diff(pb))
    proc_of_rank = L.rank_process(lay, proc_of_block)
    qr = (int(np.searchsorted(proc_of_rank, u)), int(np.searchsorted(proc_of_rank, u, side="right")))
    b_lo, b_hi = int(pb[u]), int(pb[u + 1])
    got, _ = comm.exchange_rows(*L.grouped(np.stack([np.arange(lo, hi, dtype=np.int64), part_slice], axis=1),
                                           proc_of_block[part_slice], N), "held rows")
    # arrivals hold ascending ids (ascending sources, each in id order): a stable sort by block keeps that
    ob = D.sort_small(got[:, 1] - b_lo, b_hi - b_lo)
    held_ids = got[ob, 0]
    hb = np.searchsorted(got[ob, 1], np.arange(b_lo, b_hi + 1))
    del got, ob
    rows = np.repeat(np.arange(lo, hi, dtype=idt), deg)
    prow = np.repeat(part_slice.astype(idt), deg)
    del deg

    def held(q):
        blk = lay.held_block(q) - b_lo
        return held_ids[hb[blk]:hb[blk + 1]]

    def ship(i, j, pi, pj):
        trip, order, counts = L.nonzero_sends(lay, i, j, pi, pj, proc_of_rank, N, idt)
        got, _ = comm.exchange_rows(trip, counts, "nonzero shuffle")
        del trip
        vals = comm.exchange_rows(r["data"][order], counts, "value shuffle")[0] if info.weighted else None
        del order
        return L.RankNonzeros(lay, got, vals, *qr)
    nz = ship(rows, cols, prow, pcol)
    if not backward:
        del rows, cols, prow, pcol
        r["data"] = None
    st.stop()
    scratch = L.Scratch(n, lay.local_rows_held)
    st.start("columns")
    fres = _nz_programs(comm, lay, "fwd", nz, held, qr, proc_of_rank, scratch)
    del nz
    st.stop()
    st.start("backward")
    bres = None
    if backward:        # A^T's nonzeros (j, i) shipped once the forward ones are gone
        nz = ship(cols, rows, pcol, prow)
        del rows, cols, prow, pcol
        r["data"] = None
        bres = _nz_programs(comm, lay, "bwd", nz, held, qr, proc_of_rank, scratch)
        del nz
    del scratch
    st.stop()
    st.start("write")
    block_sizes = np.zeros(b, dtype=np.int64)
    block_sizes[b_lo:b_hi] = np.diff(hb)
    sizes = np.sum(np.array(comm.allgather_object(block_sizes.tolist()), dtype=np.int64), axis=0)
    cost = {"alpha": alpha, "beta": beta}

    def make_manifest(mx, bmode, counts, bcounts):
        def side(prog, cnt):
            mats = [L.dense_counts([c[m] for c in cnt], lay.ranks) for m in range(len(cnt[0]))]
            return lay.stats_from(mats, sizes, f=int(f), dtype=dtype, **cost), D.programs_json(prog, mats)
        return D.assemble_manifest(info, lay, side(fres[0][0], counts),
                                   None if bres is None else side(bres[0][0], bcounts), bmode, sym_pattern, mx, f,
                                   dtype, meta)
    return _write(comm, st, r, graph_path, partition, out, qr, fres, bres, same, make_manifest, created)


def _nz_programs(comm, lay, prefix: str, nz, held, qr, proc_of_rank: np.ndarray, scratch) -> list[tuple]:
    """(program, counts) of this process's plan ranks ``qr``; counts: per
    counting step, the rows each rank sends to this one (a sparse column of
    that step's volume matrix, :func:`~partplan.plan.distlayout.pair_counts`)."""
    from ..plan import distlayout as L
    p, N = lay.ranks, comm.world
    grank, G, _ = lay.a2a()
    exs, halo_req, fold_req, counts = [], [], [], []
    for q in range(*qr):        # loop over this process's ranks
        d, hq = nz.of(q), held(q)
        ex, hsrc, halo = L.receive(lay, q, d, hq, scratch)
        halo_req.append(L.keyed_pairs(hsrc, q, halo, p))
        cnt = [L.pair_counts(hsrc, np.full(hsrc.size, q), p)]
        snd = None
        if lay.fold:
            ri = ex["row_ids"]
            scratch.pmap[d["rows"]] = d["pi"]
            dest = scratch.pmap[ri]
            snd, rem = lay.fold_send(q, ri, dest, lambda ids, hq=hq: np.searchsorted(hq, ids))
            fold_req.append(L.keyed_pairs(dest[rem], q, ri[rem], p))
        exs.append((ex, snd))
        counts.append(cnt)
        del d
    got, _ = comm.exchange_rows(*L.route(halo_req, proc_of_rank, p, N), "halo requests")
    del halo_req
    asked = L.arrivals(got, p, qr)
    for i, q in enumerate(range(*qr)):
        t = asked.of(q)
        req, ids = t[:, 1], t[:, 2]
        hq = held(q)
        send_idx = np.searchsorted(hq, ids)
        if ids.size and (send_idx.max() >= hq.size or not np.array_equal(hq[send_idx], ids)):
            raise PlanError(f"internal error: rank {q} was asked for a row it does not hold")
        exs[i][0]["send_idx"] = send_idx
        exs[i][0]["send_counts"] = np.bincount(grank(req), minlength=G).astype(np.int64)
    del got, asked
    folds = [None] * len(exs)
    if lay.fold:
        got, _ = comm.exchange_rows(*L.route(fold_req, proc_of_rank, p, N), "fold")
        del fold_req
        came = L.arrivals(got, p, qr)
        del got
        for i, q in enumerate(range(*qr)):
            t = came.of(q)
            snd, ids = t[:, 1], t[:, 2]
            folds[i] = {"send": exs[i][1], **lay.fold_receive(snd, ids, held(q))}
            counts[i].append(L.pair_counts(snd, np.full(snd.size, q), p))
    out = []
    for i, q in enumerate(range(*qr)):
        out.append((L.program(lay, prefix, q, exs[i][0], held(q), folds[i]), counts[i]))
        exs[i] = None
    return out


# ----------------------------------------------------------------------------- the job
def run_build(ctx, cfg: dict) -> dict | None:
    """The ``plan-build`` job's work in this process (one of N; with the
    local backend this process builds every rank); process 0 returns the result."""
    res = build_plan_distributed(cfg["graph"], cfg["partition"], cfg["k"], cfg["out"], comm=ctx.world_comm(),
                                 layout=cfg.get("layout", "1d"), f=cfg.get("f", 128), dtype=cfg.get("dtype", "float32"), meta=cfg.get("meta"),
                                 backward=cfg.get("backward"), created=cfg.get("created"),
                                 normalize=cfg.get("normalize"))
    return res if ctx.leader else None


def _prepare(cfg: dict, nprocs: int | None, threads: int | None) -> dict:
    """k, ``nprocs`` (1 ≤ nprocs ≤ row blocks) and the normalization checked before any start."""
    from ..models.normalize import check_normalize
    D.check_nprocs(cfg["k"], nprocs, cfg.get("layout", "1d"))
    check_normalize(cfg.get("normalize"))
    return cfg


register(Job(name="plan-build", command=None, prepare=_prepare, run=run_build,
             help="build the plan of a chunked graph with N processes, any layout (partplan plan --nprocs N)"))


def build_distributed(graph_path, partition, k: int, out, *, nprocs: int | None = None, layout: str = "1d",
                      timeout_s: float = DEFAULT_TIMEOUT_S, f: int = 128, dtype: str = "float32", meta: dict | None = None,
                      backward: bool | None = None, created: str | None | bool = None,
                      normalize: str | None = None) -> dict | None:
    """Build the plan of ``graph_path`` (``layout``: any, default 1d) with
    ``nprocs`` (default and at most: the layout's row blocks on k ranks) local
    processes over gloo, or — ``nprocs`` None under torchrun — as
    one of torchrun's processes; returns process 0's result
    (:func:`build_plan_distributed`; None on the other torchrun ranks).

    ``partition``: a file path or an array (saved to a private temporary
    ``.npy`` first). timeout_s : seconds a process waits on a peer (a
    worker that dies ends the job in one error within that time). Raises a
    PlanError for a bad nprocs (before starting anything); a process's error
    ends every process with that one error."""
    from ..runtime.comm import CommError
    from ..runtime.launch import under_torchrun
    from .worker import execute
    if isinstance(partition, (str, os.PathLike)):
        from ..plan.partitions import saved_partition_meta
        saved = saved_partition_meta(partition)       # its sha256 checked here, once: the processes do not
        if saved is not None and saved.get("ownership") == "decoupled":   # its owners are not read here
            raise PlanError(f"{partition}: a partition with decoupled ownership (its owners in "
                            f"{saved.get('owner_file') or 'its owner column'}); the distributed build writes "
                            f"conformal plans: build it in one process (without --nprocs)")
    if nprocs is None and not under_torchrun():
        nprocs = D.check_nprocs(k, None, layout)
    work = None
    try:
        if not isinstance(partition, (str, os.PathLike)):
            work = Path(tempfile.mkdtemp(prefix="partplan-distbuild-"))
            np.save(work / "part.npy", np.asarray(partition))
            partition = work / "part.npy"
        cfg = {"backend": "gloo", "graph": str(graph_path), "partition": str(partition), "k": int(k),
               "layout": str(layout),
               "out": str(out), "f": f, "dtype": dtype, "meta": meta, "backward": backward, "created": created,
               "normalize": normalize,
               "timeout": float(timeout_s)}
        return execute("plan-build", cfg, nprocs=nprocs)
    except CommError as exc:  # the processes' one error (or each one's own)
        raise PlanError("distributed plan build failed: " + str(exc).removeprefix("the job failed — ")) from None
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
