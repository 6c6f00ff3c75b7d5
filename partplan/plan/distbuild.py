"""The distributed 1D plan build: N processes build a plan together, none of
them holding the whole graph — the plan-building computations, each on the
arrays a process holds or received from its peers. The processes and their
exchanges are driven by the ``plan-build`` job (:mod:`partplan.jobs.build`,
``partplan plan --nprocs N``); nothing here communicates.

Input: a chunked graph (:mod:`partplan.io.chunked`) and a partition (``.npy``
is memory-mapped and only the slice a process needs is read; other partition
formats are read whole by each process). Output: the same plan directory
:func:`partplan.plan.build_plan` + :func:`partplan.plan.write_plan` write for
that graph and partition, **byte for byte** (shards, partition file and
manifest; ``created`` aside — pass ``created=False`` to both); the shards,
partition file and manifest go through the plan store's writer
(:func:`~partplan.plan.store.begin_plan_dir`,
:func:`~partplan.plan.store.write_shard`,
:func:`~partplan.plan.store.finish_plan_dir`).

Coverage: layout ``1d`` with conformal ownership (H rows held on ``part``),
``normalize`` (None, "gcn", "mean": each process turns its rows into Â's after
reading them, :func:`normalize_rows`), the backward program (``same_as``
forward when A equals its transpose, else a separate ``bwd`` program built from
A^T) — every option ``build_plan`` offers for the default layout except
``owner`` (decoupled ownership). The 1.5D and 2D layouts, whose ranks split a
row's nonzeros, move nonzeros instead of rows: :mod:`partplan.plan.distlayout`
(the same read stage, checks and manifest fields as here). A routed layout
takes the 1D path up to the halo requests, whose deliveries each process then
routes for the rows it owns (``_routed_programs`` of :mod:`partplan.jobs.build`).

Processes and plan ranks: N ≤ k processes. Process u builds the shards of a
contiguous run of plan ranks (parts) ``[b[u], b[u+1])`` (:func:`part_bounds`:
balanced by rows + nonzeros per part, at least one part each; every process
computes the same map from an all-gather of k counts). With N = k it is one
part per process; with N = 1 one process builds them all. Loops run over a
process's parts, never over vertices or edges.

Stages, on every process u of N (every exchange an all-to-all-v with
explicit split sizes, counts first, then payload, in rounds —
``exchange_rows`` of the runtime's comm):

1. **read** — the header, this process's contiguous run of chunks (balanced by
   nonzeros + rows, at least one chunk each, :func:`~partplan.io.chunked.process_rows`;
   rows ``[lo, hi)``) and ``part[lo:hi]``; everything checked, and the
   ranks agree on any error before going on (one error, raised on all ranks).
2. **shuffle** — vertex ids, degrees and parts, then the column ids (and
   values) of every row, go to the process of the row's part. Sources hold
   ascending disjoint row ranges and keep row order, so what arrives is, per
   part, already the global CSR order of the part's rows; a process holding
   several parts groups them by part with one stable counting sort.
3. **columns** — the distinct columns of the part's rows; ``part[j]`` of each
   is asked from the process holding row j (range lookup); the halo (remote
   columns, by owner then id) is requested from the owners, whose answers are
   the send lists (one all-to-all of (owner part, requesting part, id) for
   all parts of all processes); the local CSR columns are renumbered
   ``[own rows | halo]``.
4. **symmetry** — is A = A^T (pattern, and values)? Decided without a
   transpose by comparing, over all ranks, the sums of two keyed 64-bit
   hashes of every (i, j[, w]) with those of (j, i[, w]) (a false "symmetric"
   needs a 2^-128 collision). When A is not symmetric the nonzeros are
   shuffled once more, transposed, and the backward program is built from A^T
   like the forward one.
5. **write** — each rank writes its own shard into the plan's temporary
   directory; rank 0 gathers the counts (p × p volume matrix, sizes, loads,
   edge cut), writes ``partition.arrow`` (it holds ``part`` and ``perm``:
   O(n) on rank 0 only), the graph fingerprint (streamed from the chunk files
   in 4 MiB blocks) and the manifest, then renames the directory into place.

Every stage reports its peak RSS per process (``VmHWM``, reset between
stages through ``/proc/self/clear_refs`` where the kernel allows it,
:class:`Stages`). Each process carries ~380 MiB of torch + gloo, so use few
processes (N ≤ row blocks) on a small machine.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..errors import PartitionError, PlanError
from ..io.chunked import (ChunkInfo, chunk_info, process_rows, raise_not_symmetric, read_chunk_rows,
                          symmetry_hash_sums)
from ..metrics.cost import dtype_bytes, dtype_name
from ..metrics.stats import CommStats
from ..program.core import Program, matrix_to_pairs
from ..program.exchange import perm_by, segments, sort_small
from ..program.plan import RankPlan
from ..program.schema import FORMAT, FORMAT_VERSION
from ..program.steps import STEPS
from .._process import Stages  # noqa: F401 (the plan-build job's stage reports)


def first_error(errs: list) -> str | None:
    """The error every process raises when any has one (``errs``: one entry
    per process, None when fine): the first, prefixed with its rank when
    there are several processes; None when all are fine."""
    bad = [(r, e) for r, e in enumerate(errs) if e]
    if not bad:
        return None
    r, e = bad[0]
    return e if len(errs) == 1 else f"rank {r}: {e}"


# ----------------------------------------------------------------------------- helpers
_HASH_BLOCK = 1 << 18   # nonzeros hashed at a time


_GATHER_BLOCK = 1 << 20   # nonzeros gathered at a time (bounds the int64 positions)


_READ_BLOCK_NNZ = 1 << 22  # nonzeros read from the chunk files at a time


def _row_span(vstart: np.ndarray, a: int, b: int) -> tuple[int, int, int, int]:
    """Rows r0 .. r1-1 whose nonzeros (row r: ``[vstart[r], vstart[r+1])``)
    meet ``[a, b)`` (a < b), and how much of the first / last one lies outside."""
    r0 = int(np.searchsorted(vstart, a, side="right")) - 1
    r1 = int(np.searchsorted(vstart, b, side="left"))
    return r0, r1, a - int(vstart[r0]), int(vstart[r1]) - b


def gather_rows_fill(src: np.ndarray, starts: np.ndarray, vstart: np.ndarray):
    """``fill(dst, a, b)`` for :meth:`~partplan.runtime.comm.TorchComm.exchange_fill`: the virtual
    array ``concat(src[starts[r] : starts[r] + len_r] for r)`` (len_r =
    vstart[r+1] - vstart[r]), elements [a, b), gathered in blocks."""
    def fill(dst, a, b):
        for s in range(a, b, _GATHER_BLOCK):
            e = min(b, s + _GATHER_BLOCK)
            r0, r1, cut0, cut1 = _row_span(vstart, s, e)
            st = starts[r0:r1].copy()
            ln = np.diff(vstart[r0:r1 + 1])
            st[0] += cut0
            ln[0] -= cut0
            ln[-1] -= cut1
            np.take(src, segments(st, ln), out=dst[s - a:e - a])
    return fill


def _rows_of(ids: np.ndarray, vstart: np.ndarray, a: int, b: int) -> np.ndarray:
    """Row id of each nonzero ``a .. b-1`` (row r holds ``[vstart[r], vstart[r+1])``)."""
    r0, r1, cut0, cut1 = _row_span(vstart, a, b)
    ln = np.diff(vstart[r0:r1 + 1])
    ln[0] -= cut0
    ln[-1] -= cut1
    return np.repeat(ids[r0:r1], ln)


def _chunk_spans(info: ChunkInfo, lo: int, hi: int):
    """Per chunk meeting rows [lo, hi): (its nonzeros among them, row cuts: global rows cutting them
    into pieces of about :data:`_READ_BLOCK_NNZ` nonzeros, a piece of one heavier row on its own).
    Reads the chunk's indptr over those rows (O(rows))."""
    from ..io.chunked import _npy_slice
    for c in info.chunks:
        a, b = max(lo, c.row_lo), min(hi, c.row_hi)
        if a < b:
            ip = _npy_slice(c.indptr, np.dtype("<i8"), c.row_hi - c.row_lo + 1, a - c.row_lo, b - a + 1, "indptr")
            yield int(ip[-1] - ip[0]), row_cuts(ip, _READ_BLOCK_NNZ) + a


def row_cuts(indptr: np.ndarray, block: int) -> np.ndarray:
    """int64: row boundaries (0 and the row count included) cutting the rows of ``indptr`` (a CSR
    row pointer, any offset) into runs of about ``block`` nonzeros; a heavier row is a run alone."""
    rows = indptr.size - 1
    cuts = np.searchsorted(indptr, np.arange(int(indptr[0]), int(indptr[-1]), block), side="right") - 1
    return np.unique(np.concatenate([np.clip(cuts, 0, rows), [0, rows]])).astype(np.int64)


def _read_rows(graph_path, info: ChunkInfo, lo: int, hi: int):
    """Rows [lo, hi): (indptr int64 from 0, column ids — int32 when n < 2**31 —,
    values or None), read in pieces of about :data:`_READ_BLOCK_NNZ`
    nonzeros into preallocated arrays (each piece checked by
    :func:`read_chunk_rows`): never an int64 copy of the whole range."""
    spans = list(_chunk_spans(info, lo, hi))
    total = sum(m for m, _ in spans)
    idt = np.int32 if info.n < (1 << 31) else np.int64
    indices = np.empty(total, dtype=idt)
    data = np.empty(total, dtype=np.float64) if info.weighted else None
    indptr = np.zeros(hi - lo + 1, dtype=np.int64)
    at = 0
    for _, cuts in spans:
        for a, b in zip(cuts[:-1], cuts[1:]):
            a, b = int(a), int(b)
            r = read_chunk_rows(graph_path, a, b, info=info)
            m = r.indices.size
            indices[at:at + m] = r.indices
            if data is not None:
                data[at:at + m] = r.data
            indptr[a - lo + 1:b - lo + 1] = r.indptr[1:] - r.indptr[0] + at
            at += m
            del r
    if at != total:
        raise PlanError(f"internal: rows [{lo}, {hi}) hold {at} nonzeros, their indptr says {total}")
    return indptr, indices, data


def refuse_plan_partition(path) -> None:
    """One PartitionError when ``path`` is a plan directory: the distributed build reads bare and saved
    partitions; a plan as the partition is read by the one-process build, which checks it against
    the graph."""
    p = Path(path)
    if p.is_dir() and (p / "manifest.json").is_file():
        raise PartitionError(f"{p}: a plan directory as the partition is read by the one-process build "
                             f"(leave --nprocs out), which checks it against the graph")


def read_part_slice(partition, n: int, k: int, lo: int, hi: int) -> np.ndarray:
    """part[lo:hi] as int64, checked as the one-process build checks a partition (integer ids,
    integral floats included, in [0, k)); ``partition`` is an array, a ``.npy`` path
    (memory-mapped, only the slice is read) or any other partition file the one partition reader
    takes but a plan directory (read whole, :func:`partplan.io.foreign.read_partition_any`)."""
    from ..parts import as_part_ids
    if isinstance(partition, (str, os.PathLike)):
        p = Path(partition)
        refuse_plan_partition(p)
        if p.suffix.lower() == ".npy":
            from ..io._common import npy_claim_problem, npy_header
            try:
                with open(p, "rb") as fh:
                    shape, dt, hl = npy_header(fh)
                    size = os.fstat(fh.fileno()).st_size
            except (OSError, ValueError, EOFError, SyntaxError) as exc:
                raise PartitionError(f"{p}: not a readable .npy array ({exc})") from None
            problem = npy_claim_problem(shape, dt, size - hl)
            if problem or len(shape) != 1 or dt.kind not in "iuf":
                raise PartitionError(f"{p}: must be a 1-D integer array" + (f" ({problem})" if problem else
                                     f", got shape {tuple(shape)} dtype {dt}"))
            if shape[0] != n:
                raise PartitionError(f"{p}: has {shape[0]} part ids but the graph has {n} vertices")
            where = f"{p}: "
            arr = as_part_ids(np.asarray(np.load(p, mmap_mode="r", allow_pickle=False)[lo:hi]), where=where,
                              what="array", offset=lo)
        else:
            from ..io.foreign import read_partition_any
            where = f"{p}: "
            arr = as_part_ids(read_partition_any(p, n)[lo:hi], where=where, what="partition", offset=lo)
    else:
        full = np.asarray(partition)
        if full.ndim != 1 or full.size != n:
            raise PartitionError(f"partition has {full.size} entries but the graph has {n} vertices")
        where = ""
        arr = as_part_ids(full[lo:hi], offset=lo)
    if arr.size and arr.max() >= k:     # (as_part_ids refused negative ids, named by their vertex)
        e = int(np.flatnonzero(arr >= k)[0])
        raise PartitionError(f"{where}vertex {lo + e} has part id {int(arr[e])} >= k={k}")
    return arr


def partition_ranks(partition, n: int, block: int = 1 << 22) -> int:
    """max(part) + 1 (at least 1) — the plan's ranks when none are given, as
    :func:`partplan.parts.as_partition` defaults them. A ``.npy`` file is
    memory-mapped and scanned in blocks of ``block`` entries (O(block)
    memory); other partition files / arrays are read whole. Values are checked
    as :func:`build_plan_distributed` checks them (integers ≥ 0, n entries)."""
    big = 1 << 62
    if isinstance(partition, (str, os.PathLike)):
        from ..io.partfile import partition_k_from_name
        named = partition_k_from_name(partition)
        if named is not None:     # a METIS NAME.part.K file: K parts, its ids below K (as the one-process build)
            read_part_slice(partition, n, named, 0, n)
            return named
    if not isinstance(partition, (str, os.PathLike)) or Path(partition).suffix.lower() != ".npy":
        s = read_part_slice(partition, n, big, 0, n)
        return max(int(s.max()) + 1 if s.size else 1, 1)
    top = -1
    for a in range(0, n, block):
        s = read_part_slice(partition, n, big, a, min(n, a + block))
        top = max(top, int(s.max()) if s.size else -1)
    return max(top + 1, 1)


def part_bounds(weight: np.ndarray, nprocs: int) -> np.ndarray:
    """int64[nprocs + 1]: process u builds the plan ranks (parts)
    ``[b[u], b[u+1])`` — contiguous runs, balanced by ``weight`` (int64[k],
    here rows + nonzeros per part), every process at least one part
    (needs ``nprocs <= k``). Deterministic: every process computes the same."""
    k = int(weight.size)
    if not 1 <= nprocs <= k:
        raise PlanError(f"internal: {nprocs} processes for {k} parts")
    cum = np.zeros(k + 1, dtype=np.float64)
    np.cumsum(weight, out=cum[1:])
    tgt = np.arange(nprocs + 1, dtype=np.float64) * cum[-1] / nprocs
    b = np.searchsorted(cum, tgt, side="left").astype(np.int64)
    b[0], b[-1] = 0, k
    ar = np.arange(nprocs + 1, dtype=np.int64)
    c = np.maximum.accumulate(np.clip(b - ar, 0, k - nprocs))   # b strictly increasing, b[u] >= u
    return c + ar


def prep(q: int, in_ids: np.ndarray, row_nnz: np.ndarray, cols: np.ndarray, need: np.ndarray,
          part_need: np.ndarray, k: int) -> dict:
    """Part q's halo (remote columns by owner part, then id), its recv counts
    (int64[k]), the local CSR columns ``[own rows | halo]`` and the edge cut.
    ``need`` = sorted distinct columns of the part's rows, ``part_need`` their parts."""
    nl = in_ids.size
    remote = part_need != q
    ridx = np.flatnonzero(remote)
    o = sort_small(part_need[ridx], k)            # by owner, then id (need is ascending)
    halo = need[ridx[o]]
    if need.size == 0 or int(need[-1]) < (1 << 31):
        halo = halo.astype(np.int32)                 # ids < 2**31: half the bytes (stored as int64 all the same)
    halo_part = part_need[ridx[o]].astype(np.int32 if k < (1 << 31) else np.int64)
    recv_counts = np.bincount(part_need[ridx], minlength=k).astype(np.int64)
    # local ids fit int32 when n < 2**31 (the shard stores them as int64 all the same)
    lid = np.empty(need.size, dtype=np.int32 if nl + halo.size < (1 << 31) else np.int64)
    own = np.flatnonzero(~remote)
    lid[own] = np.searchsorted(in_ids, need[own])
    lid[ridx[o]] = nl + np.arange(halo.size, dtype=np.int64)
    lcol = lid[np.searchsorted(need, cols)]
    del lid
    return {"q": q, "halo": halo, "halo_part": halo_part, "recv_counts": recv_counts, "lcol": lcol,
            "edge_cut": int(np.count_nonzero(lcol >= nl))}


def finish_program(prefix: str, pr: dict, in_ids: np.ndarray, row_nnz: np.ndarray, nnz: int,
            data: np.ndarray | None, req: np.ndarray, send_counts: np.ndarray) -> tuple[Program, dict]:
    """Part pr['q']'s 1D exchange program (copy, gather, alltoallv, spmm) for
    plan rank q and its counts (recv_counts, edge_cut, nnz, rows)."""
    from ..layouts.base import exchange_steps  # the 1D layout's own step emitter (same JSON)
    nl = in_ids.size
    send_idx = np.searchsorted(in_ids, req)
    if nl < (1 << 31):
        send_idx = send_idx.astype(np.int32)          # stored as int64 all the same
    if req.size and (send_idx.max() >= nl or not np.array_equal(in_ids[send_idx], req)):
        raise PlanError(f"internal error: part {pr['q']} was asked for a row it does not hold")
    indptr = np.zeros(nl + 1, dtype=np.int64)
    np.cumsum(row_nnz, out=indptr[1:])
    ex = {"send_idx": send_idx, "send_counts": send_counts, "recv_counts": pr["recv_counts"],
          "halo_ids": pr["halo"], "indptr": indptr, "indices": pr["lcol"], "row_ids": in_ids}
    if data is not None:
        ex["data"] = data
    prog = Program.empty(prefix, 1)
    prog.set_io([in_ids], [in_ids])
    exchange_steps(prog, [ex], [in_ids], "world")
    return prog, {"recv_counts": pr["recv_counts"].tolist(), "edge_cut": pr["edge_cut"], "nnz": int(nnz),
                  "rows": int(nl)}


def distinct(c: np.ndarray, n: int) -> np.ndarray:
    """Sorted distinct values of c (a length-n mask when cheaper than a sort)."""
    if c.size * 8 < n:
        return np.unique(c).astype(np.int64, copy=False)
    seen = np.zeros(n, dtype=bool)
    seen[c] = True
    return np.flatnonzero(seen)


def check_nprocs(k, nprocs, layout="1d") -> int:
    """nprocs (default: the layout's row blocks on k ranks) as an int,
    checked: 1 ≤ nprocs ≤ row blocks (k for 1d). Raises PlanError."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise PlanError(f"k (plan ranks) must be an integer >= 1, got {k!r}")
    from ..layouts import parse_layout
    try:
        b = parse_layout(layout, int(k)).row_blocks
    except PartitionError as exc:
        raise PlanError(str(exc)) from None
    if nprocs is None:
        return int(b)
    if isinstance(nprocs, bool) or not isinstance(nprocs, (int, np.integer)) or nprocs < 1:
        raise PlanError(f"nprocs must be an integer >= 1, got {nprocs!r}")
    if nprocs > b:
        raise PlanError(f"{nprocs} processes for a plan of {b} row blocks ({k} ranks): the distributed build "
                        f"needs processes <= row blocks (each process builds the ranks of whole row blocks)")
    return int(nprocs)


def _stats(k, n, nnz, f, dtype, alpha, beta, counts: list[dict], sizes: np.ndarray) -> CommStats:
    vol = np.array([c["recv_counts"] for c in counts], dtype=np.int64).T   # vol[q, u] = rows q → u
    load = np.array([c["nnz"] for c in counts], dtype=np.int64)
    cut = int(sum(c["edge_cut"] for c in counts))
    return CommStats(k=k, n=n, nnz=nnz, f=f, dtype=dtype_name(dtype), volume=vol, part_sizes=sizes,
                     compute_load=load, edge_cut=cut, alpha=alpha, beta=beta)


def programs_json(prog: Program, matrices: list[np.ndarray]) -> dict:
    """The manifest's view of a program: its steps, each pair-counting step
    given the next of ``matrices`` (global rank × rank rows moved)."""
    steps, it = [], iter(matrices)
    for st in prog.steps:
        st = dict(st)
        if STEPS[st["op"]].pairs:
            m = next(it, None)
            if m is None:
                raise PlanError("internal error: more counting steps than count matrices")
            st["pairs"] = matrix_to_pairs(m)
        steps.append(st)
    return {"prefix": prog.prefix, "steps": steps}


# ----------------------------------------------------------------------------- 1. read
def read_stage(graph_path, partition, layout, k, f, dtype, u: int, p: int) -> dict:
    """Process u of p: the checked options and its rows — ``lay``, ``k``,
    ``info`` (the chunked graph's header), ``bounds`` (row boundaries of the
    processes), ``lo``/``hi``, ``indptr``/``indices``/``data`` of rows
    ``[lo, hi)`` and ``part`` (``part[lo:hi]``). Raises a PartplanError."""
    from ..layouts import parse_layout
    lay = parse_layout(layout, int(k))
    if not lay.distributed_build:
        raise PlanError(f"the distributed plan build does not cover layout {lay.spec} "
                        f"(build it with the single-process builder: partplan plan without --nprocs)")
    k = int(k)
    b = lay.row_blocks
    if p > b:
        raise PlanError(f"the distributed build needs processes <= row blocks: {p} processes for "
                        f"{b} row blocks of layout {lay.spec} on {k} ranks (use at most {b} processes)")
    if not isinstance(f, (int, np.integer)) or isinstance(f, bool) or f < 1:
        raise PlanError(f"f (feature width) must be an integer >= 1, got {f!r}")
    dtype_bytes(dtype)
    info = chunk_info(graph_path)
    if b > info.n:
        raise PartitionError(f"{b} row blocks exceed n={info.n} vertices")
    bounds = process_rows(info, p)
    lo, hi = int(bounds[u]), int(bounds[u + 1])
    indptr, indices, data = _read_rows(graph_path, info, lo, hi)
    part = read_part_slice(partition, info.n, b, lo, hi)
    return {"lay": lay, "k": k, "info": info, "bounds": bounds, "lo": lo, "hi": hi, "indptr": indptr,
            "indices": indices, "data": data, "part": part}


# ----------------------------------------------------------------------------- 1b. normalize
class PlanMatrix(NamedTuple):
    """What the manifest and the shards say of the matrix the plan multiplies: ``fingerprint`` (its
    pattern's, :attr:`~partplan.graph.Graph.fingerprint`), ``source_fingerprint`` (the input
    matrix's, values included: :attr:`~partplan.graph.Graph.matrix_fingerprint`), ``normalize``
    (None, "gcn" or "mean"), ``nnz`` and ``weighted`` (of the matrix multiplied)."""
    fingerprint: str
    source_fingerprint: str
    normalize: str | None
    nnz: int
    weighted: bool


_NORMALIZE_BLOCK_NNZ = 1 << 20   # nonzeros normalized at a time (bounds the temporaries: ~30 bytes each)


def normalize_rows(r: dict, mode: str) -> np.ndarray:
    """Replace this process's rows of A in ``r`` (read stage) by the same rows of A + I (the
    remaining self loops, :func:`partplan.models.normalize.self_looped_rows`) and return their degree
    scales (1/sqrt(deg) for "gcn", 1/deg for "mean"; float64[rows]). A negative degree raises the
    GraphFormatError the one-process :func:`~partplan.models.normalize.normalize_adjacency` raises.
    The values become Â's with :func:`set_normalized_values` once the scales of the columns are known.
    Runs of about :data:`_NORMALIZE_BLOCK_NNZ` nonzeros at a time go into arrays allocated once
    (every row is its own computation, so the runs give the whole computation's rows)."""
    from ..models.normalize import check_degrees, degree_scale, row_sums, self_looped_rows
    indptr, indices, data, lo = r["indptr"], r["indices"], r["data"], r["lo"]
    rows = indptr.size - 1
    out_ptr = np.zeros(rows + 1, dtype=np.int64)
    out_idx = np.empty(indices.size + rows, dtype=indices.dtype)   # at most one self loop more per row
    out_val = np.empty(indices.size + rows, dtype=np.float64)
    deg = np.empty(rows, dtype=np.float64)
    at = 0
    cuts = row_cuts(indptr, _NORMALIZE_BLOCK_NNZ)
    for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
        ea, eb = int(indptr[a]), int(indptr[b])
        ip, ix, v = self_looped_rows(indptr[a:b + 1] - ea, indices[ea:eb], None if data is None else data[ea:eb],
                                     lo + a)
        m = ix.size
        out_idx[at:at + m], out_val[at:at + m] = ix, v
        out_ptr[a + 1:b + 1] = ip[1:] + at
        deg[a:b] = row_sums(ip, v)
        at += m
    check_degrees(deg, mode, lo, r["info"].name)
    r.update(indptr=out_ptr, indices=out_idx[:at], data=out_val[:at])
    return degree_scale(deg, mode)


def set_normalized_values(r: dict, mode: str, scale: np.ndarray, need: np.ndarray | None = None,
                          need_scale: np.ndarray | None = None) -> None:
    """Â's values of this process's rows (``r`` after :func:`normalize_rows`), written over
    ``r["data"]`` in runs of about :data:`_NORMALIZE_BLOCK_NNZ` nonzeros. "gcn" needs each
    column's scale: ``need`` (the distinct columns, ascending) and ``need_scale`` (their scales)."""
    from ..models.normalize import normalized_values
    indptr, cols, data = r["indptr"], r["indices"], r["data"]
    cuts = row_cuts(indptr, _NORMALIZE_BLOCK_NNZ)
    for a, b in zip(cuts[:-1].tolist(), cuts[1:].tolist()):
        ea, eb = int(indptr[a]), int(indptr[b])
        col_scale = need_scale[np.searchsorted(need, cols[ea:eb])] if mode == "gcn" else None
        data[ea:eb] = normalized_values(mode, indptr[a:b + 1] - ea, data[ea:eb], scale[a:b], col_scale)


def normalized_fingerprint(graph_path, info: ChunkInfo) -> str:
    """:attr:`~partplan.graph.Graph.fingerprint` of A + I (the remaining self loops, entries of weight
    0 dropped: the pattern a normalized plan multiplies) of a chunked graph, streamed in pieces of
    about :data:`_READ_BLOCK_NNZ` nonzeros (two reads of the graph: indptr, then indices); memory
    O(piece + the largest chunk's rows)."""
    import hashlib

    from ..models.normalize import self_looped_rows

    def pieces():
        for _, cuts in _chunk_spans(info, 0, info.n):
            for a, b in zip(cuts[:-1], cuts[1:]):
                c = read_chunk_rows(graph_path, int(a), int(b), info=info)
                yield self_looped_rows(c.indptr - c.indptr[0], c.indices, c.data, int(a))

    h = hashlib.sha256()
    h.update(np.int64(info.n).astype("<i8").tobytes())
    h.update(np.zeros(1, "<i8").tobytes())          # the global indptr's leading 0
    off = 0
    for ip, _, _ in pieces():
        h.update((ip[1:] + off).astype("<i8").tobytes())
        off += int(ip[-1])
    for _, ix, _ in pieces():
        h.update(ix.astype("<i8").tobytes())
    return h.hexdigest()


# ----------------------------------------------------------------------------- 2. shuffle
def part_weights(part_slice: np.ndarray, deg: np.ndarray, k: int) -> np.ndarray:
    """int64[k]: rows + nonzeros of each part among this process's rows."""
    return (np.bincount(part_slice, minlength=k).astype(np.int64) +
            np.bincount(part_slice, weights=deg, minlength=k).astype(np.int64))


def row_sends(part_slice: np.ndarray, deg: np.ndarray, indptr: np.ndarray, lo: int, proc_of: np.ndarray,
              k: int, p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What this process sends in the shuffle: (``rows``: (vertex id, degree,
    part) per row grouped by destination process — the part's —, in part
    order; ``counts``: rows per process; ``starts`` and ``vstart``: where each
    sent row's nonzeros start in this process's CSR and in the virtual send
    array of :func:`gather_rows_fill`; ``ecounts``: nonzeros per process)."""
    order = sort_small(part_slice, k)
    dest = proc_of[part_slice]
    counts = np.bincount(dest, minlength=p).astype(np.int64)
    rows = np.stack([order + lo, deg[order], part_slice[order]], axis=1)
    vstart = np.zeros(order.size + 1, dtype=np.int64)
    np.cumsum(deg[order], out=vstart[1:])
    starts = indptr[:-1][order]
    ecounts = np.bincount(dest, weights=deg, minlength=p).astype(np.int64)
    return rows, counts, starts, vstart, ecounts


class Received:
    """The rows a process received in the shuffle (per source process, grouped
    by part, in global order within a part) and its view of them by part:
    ``in_r``, ``nnz_r``, ``rpart_r`` (vertex id, nonzeros, part of each
    received row), ``estart_r`` (where each row's nonzeros start in the
    received columns); ``in_ids``, ``row_nnz`` the rows grouped by part and
    ``vofs`` the rows of each part ``q_lo + i``: ``[vofs[i], vofs[i+1])``.
    ``cols`` / ``data``: the received nonzeros (dropped once used)."""

    def __init__(self, vrecv: np.ndarray, cols: np.ndarray, data: np.ndarray | None, q_lo: int, q_hi: int):
        self.q_lo, self.q_hi = q_lo, q_hi
        self.in_r, self.nnz_r, self.rpart_r = (np.ascontiguousarray(vrecv[:, c]) for c in range(3))
        self.cols, self.data = cols, data
        self.estart_r = np.zeros(self.in_r.size + 1, dtype=np.int64)   # nonzeros of received row r
        np.cumsum(self.nnz_r, out=self.estart_r[1:])
        if self.rpart_r.size and np.any(self.rpart_r[1:] < self.rpart_r[:-1]):
            # several parts here: group the rows by part (stable: sources hold
            # ascending row ranges, so each part's rows stay in global CSR order);
            # the nonzeros stay where they arrived and are gathered part by part
            o2 = sort_small(self.rpart_r - q_lo, q_hi - q_lo)
            self.in_ids, self.row_nnz, rpart = self.in_r[o2], self.nnz_r[o2], self.rpart_r[o2]
            self.estart = self.estart_r[:-1][o2]
        else:
            self.in_ids, self.row_nnz, rpart, self.estart = self.in_r, self.nnz_r, self.rpart_r, None
        self.vofs = np.searchsorted(rpart, np.arange(q_lo, q_hi + 1))   # rows of each of my parts

    def part_nz(self, i: int):
        """(columns, values) of part q_lo + i's nonzeros in global CSR order."""
        a, b = self.vofs[i], self.vofs[i + 1]
        cols, data = self.cols, self.data
        if self.estart is None:
            ea, eb = int(self.estart_r[a]), int(self.estart_r[b])
            return cols[ea:eb], None if data is None else data[ea:eb]
        pos = segments(self.estart[a:b], self.row_nnz[a:b])
        return cols[pos], None if data is None else data[pos]

    def forward_part(self, i: int, need: np.ndarray, part_need: np.ndarray, n: int) -> dict:
        """Part q_lo + i's rows and nonzeros for :func:`prep` (``need``,
        ``part_need``: the distinct columns of this process and their parts)."""
        c, d = self.part_nz(i)
        one = self.q_hi - self.q_lo == 1
        nq = need if one else distinct(c, n)
        a, b = self.vofs[i], self.vofs[i + 1]
        return {"in_ids": self.in_ids[a:b], "row_nnz": self.row_nnz[a:b], "cols": c, "data": d, "need": nq,
                "part_need": part_need if one else part_need[np.searchsorted(need, nq)]}


# ----------------------------------------------------------------------------- 3. columns
def lookup_counts(need: np.ndarray, bounds: np.ndarray, p: int) -> np.ndarray:
    """Columns ``need`` (ascending) asked from each process: the one holding their row."""
    holder = np.searchsorted(bounds, need, side="right") - 1
    return np.bincount(holder, minlength=p).astype(np.int64)


def lookup_answer(asked: np.ndarray, values: np.ndarray, lo: int) -> np.ndarray:
    """``values[asked]`` of a per-row array from this process's slice ``values[lo:hi]`` (``part``,
    a degree scale), in its dtype."""
    return values[asked - lo] if asked.size else values[:0]


def halo_requests(preps: list[dict], proc_of: np.ndarray, k: int, p: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every part's halo as requests to the owner parts' processes: (``keys``
    owner·k + requester, ``ids``, ``counts`` per process), in one send order
    for both arrays. Drops each prep's ``halo_part``.

    No argsort: a part's halo is sorted by owner, so the send order (by
    destination process, then requesting part) is a concatenation of slices;
    what arrives for owner q comes from ascending sources, each sending its
    requesters in ascending order, so picking q's entries in arrival order
    already gives them by requester, ids ascending (:func:`send_lists`)."""
    kdt = np.int32 if k * k < (1 << 31) else np.int64
    idt = np.result_type(*[pr["halo"].dtype for pr in preps]) if preps else np.dtype(np.int64)
    pb = np.searchsorted(proc_of, np.arange(p + 1))                # parts of process j: [pb[j], pb[j+1])
    cuts = [np.searchsorted(pr["halo_part"], pb) for pr in preps]  # halo_part ascending within a part
    counts = np.zeros(p, dtype=np.int64)
    ksl, isl = [np.zeros(0, kdt)], [np.zeros(0, idt)]
    for j in range(p):                                             # loop over processes, then parts
        for pr, c in zip(preps, cuts):
            a, b = int(c[j]), int(c[j + 1])
            if b > a:
                ksl.append(pr["halo_part"][a:b].astype(kdt) * k + pr["q"])
                isl.append(pr["halo"][a:b].astype(idt, copy=False))
                counts[j] += b - a
    keys = np.concatenate(ksl)
    del ksl
    for pr in preps:                                               # owners are in keys now
        del pr["halo_part"]
    ids = np.concatenate(isl)
    return keys, ids, counts


def send_lists(gk: np.ndarray, gid: np.ndarray, k: int, q_lo: int, q_hi: int
               ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per part r of this process (q_lo ≤ r < q_hi), from the requests
    received (keys ``gk``, ids ``gid``): (requested ids grouped by requesting
    part in ascending order, ids ascending within a part; int64[k] counts per
    requesting part) — r's send list before mapping ids to local rows."""
    out = []
    for q in range(q_lo, q_hi):                                    # loop over this process's parts
        sel = np.flatnonzero((gk >= q * k) & (gk < (q + 1) * k))
        out.append((gid[sel], np.bincount(gk[sel] - q * k, minlength=k).astype(np.int64)))
    return out


# ----------------------------------------------------------------------------- 4. symmetry, A^T
def hash_sums(in_r: np.ndarray, estart_r: np.ndarray, cols: np.ndarray, data: np.ndarray | None) -> list[int]:
    """This process's 8 keyed hash sums (:func:`~partplan.io.chunked.symmetry_hash_sums`) over its
    received nonzeros, in blocks (they bound the uint64 temporaries)."""
    mine = [0] * 8
    for a in range(0, max(cols.size, 1), _HASH_BLOCK):
        b = min(cols.size, a + _HASH_BLOCK)
        rows = _rows_of(in_r, estart_r, a, b) if b > a else np.zeros(0, np.int64)
        blk = symmetry_hash_sums(rows, cols[a:b], None if data is None else data[a:b])
        mine = [(x + y) % (1 << 64) for x, y in zip(mine, blk)]
    return mine


def symmetry(sums: list[list[int]], info: ChunkInfo, check_header: bool) -> tuple[bool, bool]:
    """(the pattern is symmetric, the matrix equals its transpose, values included) from every
    process's :func:`hash_sums`. With ``check_header``, a header that calls an asymmetric matrix
    undirected is refused (every process alike: the sums are the same everywhere); the header speaks
    of A, so the build checks it on A's rows and not on Â's, whose zero weights are dropped."""
    tot = [sum(int(s[i]) for s in sums) % (1 << 64) for i in range(8)]
    sym_pattern = tot[0:2] == tot[2:4]
    if check_header and not info.directed and not sym_pattern:
        raise_not_symmetric(info)
    return sym_pattern, sym_pattern and (not info.weighted or tot[4:6] == tot[6:8])


def transpose_sends(rc: Received, need: np.ndarray, part_need: np.ndarray, proc_of: np.ndarray, k: int, p: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The nonzeros of A^T this process sends: (``rows``: (column j, row i,
    part of j · k + part of i) per nonzero grouped by the process of part[j];
    ``order``: the order the values are sent in; ``counts`` per process).

    Nonzeros in received order: (row, column) pairs are distinct, so the
    (part, row j, column i) sort of :class:`Transposed` does not depend on
    the send order."""
    rows = np.repeat(rc.in_r, rc.nnz_r)
    pcol = part_need[np.searchsorted(need, rc.cols)]                 # A^T row j goes to part[j]
    tdest = proc_of[pcol]
    o = sort_small(tdest, p)
    counts = np.bincount(tdest, minlength=p).astype(np.int64)
    key = pcol * k + np.repeat(rc.rpart_r, rc.nnz_r)                 # (part of j)·k + part of i
    return np.stack([rc.cols[o].astype(np.int64), rows[o], key[o]], axis=1), o, counts


class Transposed:
    """The nonzeros of A^T received for this process's parts, sorted by (part,
    row j, column i); :meth:`backward_part` gives a part's rows for :func:`prep`."""

    def __init__(self, trc: np.ndarray, tdata: np.ndarray | None, k: int, q_lo: int, q_hi: int):
        tr = trc[:, 2] // k
        so = np.lexsort((trc[:, 1], trc[:, 0], tr))                    # by part, row j, column i
        self.rows, self.cols, self.part, tr = trc[so, 0], trc[so, 1], trc[so, 2] % k, tr[so]
        self.data = None if tdata is None else tdata[so]
        self.tb = np.searchsorted(tr, np.arange(q_lo, q_hi + 1))

    def backward_part(self, i: int, rc: Received, n: int) -> dict:
        a, b = self.tb[i], self.tb[i + 1]
        ids = rc.in_ids[rc.vofs[i]:rc.vofs[i + 1]]
        t_need, first = np.unique(self.cols[a:b], return_index=True)
        return {"in_ids": ids, "row_nnz": np.diff(np.searchsorted(self.rows[a:b], np.append(ids, n))),
                "cols": self.cols[a:b], "data": None if self.data is None else self.data[a:b], "need": t_need,
                "part_need": self.part[a:b][first]}


# ----------------------------------------------------------------------------- 5. write
def write_parts(tmp: Path, qr: tuple[int, int], lay, fres, bres, bmode: str, fp: str,
                normalize: str | None) -> list[dict]:
    """Write the shards of this process's parts (plan ranks ``qr = (q_lo,
    q_hi)``; ``fres`` / ``bres``: their forward / backward (program, counts))
    into ``tmp`` through the plan store; returns their manifest entries. Each
    part's arrays are dropped once written."""
    from .store import write_shard
    entries = []
    for i, q in enumerate(range(*qr)):    # loop over this process's parts
        fwd = fres[i][0]
        bwd = None if bres is None else bres[i][0]
        arrays = dict(fwd.arrays[0])
        progs = {"forward": {"prefix": "fwd", "buffers": fwd.buffers[0], "writes_output": fwd.writes_output[0]}}
        if bwd is not None:
            arrays.update(bwd.arrays[0])
            progs["backward"] = {"prefix": "bwd", "buffers": bwd.buffers[0], "writes_output": bwd.writes_output[0]}
        elif bmode == "same-as-forward":
            progs["backward"] = progs["forward"]
        rmeta = {"rank": q, "ranks": lay.ranks, "layout": lay.spec, "format_version": FORMAT_VERSION,
                 "graph_fingerprint": fp, "normalize": normalize, "programs": progs}
        entries.append(write_shard(tmp, RankPlan(q, rmeta, arrays)))
        del arrays
        fwd.arrays[0].clear()          # written: this part's arrays are no longer needed
        if bwd is not None:
            bwd.arrays[0].clear()
    return entries


def manifest(info: ChunkInfo, lay, fwd: Program, bwd: Program | None, counts: list, bcounts: list | None,
             bmode: str, sym_pattern: bool, mx: PlanMatrix, f: int, dtype, meta: dict | None, alpha: float,
             beta: float) -> tuple[dict, int]:
    """(the manifest ``write_plan`` writes for this 1D plan, less what the
    store adds — tool, created, partition file, shards —; the total volume in
    rows) from every part's counts (``counts`` / ``bcounts``: per plan rank,
    in rank order) and the programs of part 0 (their steps are every part's)."""
    p = lay.ranks
    sizes = np.array([c["rows"] for c in counts], dtype=np.int64)

    def side(prog, cnt):
        st = _stats(p, info.n, mx.nnz, int(f), dtype, alpha, beta, cnt, sizes)
        return st, programs_json(prog, [st.volume])
    return assemble_manifest(info, lay, side(fwd, counts), None if bwd is None else side(bwd, bcounts), bmode,
                             sym_pattern, mx, f, dtype, meta)


def assemble_manifest(info: ChunkInfo, lay, fwd: tuple, bwd: tuple | None, bmode: str, sym_pattern: bool,
                      mx: PlanMatrix, f: int, dtype, meta: dict | None) -> tuple[dict, int]:
    """(the manifest fields, the total volume in rows) from the forward
    (stats, program JSON) and the backward one (None: no backward program;
    ``same_as`` forward when ``bmode`` says so). Every layout's distributed
    build ends here."""
    programs = {"forward": fwd[1]}
    if bwd is not None:
        programs["backward"] = bwd[1]
    elif bmode == "same-as-forward":
        programs["backward"] = {"same_as": "forward"}
    m = manifest_fields(info, lay, programs, fwd[0].summary(), None if bwd is None else bwd[0].summary(), bmode,
                        sym_pattern, mx, f, dtype, meta)
    return m, int(np.asarray(fwd[0].volume).sum())


def manifest_fields(info: ChunkInfo, lay, programs: dict, stats: dict, stats_backward: dict | None,
                    bmode: str, sym_pattern: bool, mx: PlanMatrix, f: int, dtype, meta: dict | None) -> dict:
    """The manifest :func:`partplan.plan.build_plan` writes (less what the
    store adds) from its programs' JSON and the stats summaries."""
    info_meta = dict(meta or {})
    m = {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "graph": {"fingerprint": mx.fingerprint, "name": info.name, "n": info.n, "nnz": mx.nnz,
                  "directed": bool(info.directed), "symmetric": bool(sym_pattern),
                  "weighted": bool(mx.weighted), "source_fingerprint": mx.source_fingerprint},
        "normalize": mx.normalize,
        "k": lay.ranks, "ranks": lay.ranks, "row_blocks": lay.row_blocks,
        "layout": lay.spec, "layout_params": lay.params,
        "groups": [g.to_json() for g in lay.groups()],
        "programs": programs,
        "ownership": "conformal",
        "backward": bmode,
        "model": info_meta.get("model"), "backend": info_meta.get("backend"),
        "objective": info_meta.get("objective"), "seed": info_meta.get("seed"),
        "params": info_meta.get("params", {}),
        "f": int(f), "dtype": dtype_name(dtype), "row_bytes": int(f * dtype_bytes(dtype)),
        "topology": info_meta.get("topology"),
        "stats": stats,
        "columns_sorted_within_rows": False,
    }
    if stats_backward is not None:
        m["stats_backward"] = stats_backward
    for key, val in info_meta.items():
        if key not in m:
            m[key] = val
    return m


def partition_arrays(partition, n: int, k: int) -> dict:
    """``part`` and ``perm`` of the partition file (O(n): rank 0 only)."""
    part = read_part_slice(partition, n, k, 0, n)
    return {"part": part, "perm": perm_by(part, k)}
