"""Distributed plan build (issue 22): N processes build a 1D plan together,
none of them holding the whole graph.

Input: a chunked graph (:mod:`partplan.io.chunked`) and a partition (``.npy``
is memory-mapped and only the slice a process needs is read; other partition
formats are read whole by each process). Output: the same plan directory
:func:`partplan.plan.build_plan` + :func:`partplan.plan.write_plan` write for
that graph and partition, **byte for byte** (shards, partition file and
manifest; ``created`` aside — pass ``created=False`` to both).

Coverage: layout ``1d`` with conformal ownership (H rows held on ``part``),
``normalize=None``, the backward program (``same_as`` forward when A equals its
transpose, else a separate ``bwd`` program built from A^T) — every option
``build_plan`` offers for the default layout except ``owner`` (decoupled
ownership) and ``normalize``. **1.5D and 2D layouts are not covered**: they
raise a :class:`PlanError` saying so.

Processes and plan ranks: N ≤ k processes. Process u builds the shards of a
contiguous run of plan ranks (parts) ``[b[u], b[u+1])`` (:func:`part_bounds`:
balanced by rows + nonzeros per part, at least one part each; every process
computes the same map from an all-gather of k counts). With N = k it is one
part per process; with N = 1 (:class:`SelfComm`) one process builds them all.
Loops run over a process's parts, never over vertices or edges.

Stages, on every process u of N (all exchanges are
``torch.distributed.all_to_all_single`` with explicit split sizes, gloo on
CPU; counts first, then payload, in rounds of at most 256 MiB per rank):

1. **read** — the header, this process's contiguous run of chunks (balanced by
   nonzeros; rows ``[lo, hi)``) and ``part[lo:hi]``; everything checked, and the
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
stages through ``/proc/self/clear_refs`` where the kernel allows it): see
:func:`build_plan_distributed`'s result.

Run it: under torchrun (``torchrun --nproc-per-node 4 -m partplan.plan.distbuild
GRAPH --partition PART -k 64 -o OUT.plan``: 4 processes, 64 plan ranks) or on
one machine with ``python -m partplan.plan.distbuild GRAPH --partition PART -k 64
-o OUT.plan --nprocs 2`` (:func:`launch_local`). Each process carries
~380 MiB of torch + gloo, so use few processes (N ≤ k) on a small machine.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import PartitionError, PartplanError, PlanError
from ..io.chunked import ChunkInfo, chunk_info, chunked_fingerprint, read_chunk_rows
from ..metrics.cost import DEFAULT_ALPHA_S, DEFAULT_BETA_S_PER_BYTE, dtype_bytes
from ..metrics.stats import CommStats
from ..program.exchange import perm_by, sort_small
from ..program.core import Program, matrix_to_pairs
from .._memory import current_rss_bytes, peak_rss_bytes  # noqa: F401 (re-exported: the benchmarks read them here)
from .._memory import reset_peak as _reset_peak
from ..program.schema import FORMAT, FORMAT_VERSION, MANIFEST, PARTITION_FILE, shard_name

#: bytes one rank sends per all-to-all round (larger payloads go in rounds)
ROUND_BYTES = 16 << 20


# ----------------------------------------------------------------------------- memory
class _Stages:
    """Wall time and peak RSS of each stage of this process."""

    def __init__(self):
        self.rows: list[dict] = []
        self.baseline = current_rss_bytes()   # interpreter + numpy/torch/gloo before any graph data
        self.resettable = _reset_peak()
        self.t = time.perf_counter()
        self.name = None

    def start(self, name: str) -> None:
        if self.resettable:
            _reset_peak()
        self.name, self.t = name, time.perf_counter()

    def stop(self) -> None:
        self.rows.append({"stage": self.name, "seconds": round(time.perf_counter() - self.t, 4),
                          "peak_rss_bytes": peak_rss_bytes()})


# ----------------------------------------------------------------------------- communication
_NP2TORCH = {np.dtype(np.int64): "int64", np.dtype(np.int32): "int32", np.dtype(np.float64): "float64"}


class SelfComm:
    """The one-process communicator (N = 1): every exchange returns its input."""

    rank, size = 0, 1

    def alltoallv(self, arr: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.ascontiguousarray(arr), np.asarray(counts, dtype=np.int64).copy()

    def alltoallv_fill(self, fill, counts: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
        counts = np.asarray(counts, dtype=np.int64).copy()
        out = np.empty(int(counts.sum()), dtype=dtype)
        if out.size:
            fill(out, 0, out.size)
        return out, counts

    def allgather(self, obj: Any) -> list:
        return [obj]


class TorchComm:
    """A thin numpy layer over ``torch.distributed`` (an initialized default
    process group or ``group``): all-to-all-v of row arrays in rounds of at
    most :data:`ROUND_BYTES` per rank, and all-gather of small JSON-able
    objects. Exceptions of the backend surface as PlanError naming the
    exchange."""

    def __init__(self, group=None):
        import torch
        import torch.distributed as dist
        self.torch, self.dist, self.group = torch, dist, group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)

    def _a2a(self, out, inp, osplit, isplit):
        self.dist.all_to_all_single(out, inp, [int(x) for x in osplit], [int(x) for x in isplit],
                                    group=self.group)

    def alltoallv(self, arr: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows ``arr[sum(counts[:j]) : sum(counts[:j+1])]`` go to rank j; returns
        (received rows in source-rank order, rows received from each rank)."""
        arr = np.ascontiguousarray(arr)

        def fill(dst, a, b):
            dst[...] = arr[a:b]
        return self._exchange(fill, counts, arr.dtype, arr.shape[1:], whole=arr)

    def alltoallv_fill(self, fill, counts: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
        """As :meth:`alltoallv` of a 1-D send array that is never materialized:
        ``fill(dst, a, b)`` writes its elements ``[a, b)`` into ``dst``; each
        round builds only its own piece (at most :data:`ROUND_BYTES`) and the
        received pieces go straight into the preallocated result."""
        return self._exchange(fill, counts, np.dtype(dtype), ())

    def _exchange(self, fill, counts, dtype, tail, whole=None) -> tuple[np.ndarray, np.ndarray]:
        torch = self.torch
        p = self.size
        counts = np.asarray(counts, dtype=np.int64)
        if dtype not in _NP2TORCH:
            raise PlanError(f"internal: alltoallv of dtype {dtype}")
        tdt = getattr(torch, _NP2TORCH[dtype])
        rc = torch.zeros(p, dtype=torch.int64)
        self._a2a(rc, torch.from_numpy(counts.copy()), [1] * p, [1] * p)
        rcounts = rc.numpy().copy()
        row_bytes = dtype.itemsize * int(np.prod(tail, dtype=np.int64)) if tail else dtype.itemsize
        mine = max(int(counts.sum()), int(rcounts.sum())) * row_bytes
        rounds = max(self.allgather(-(-mine // ROUND_BYTES) if mine else 1))
        out = np.empty((int(rcounts.sum()),) + tail, dtype=dtype) if rounds > 1 else None
        soff = np.concatenate([[0], np.cumsum(counts)])
        roff = np.concatenate([[0], np.cumsum(rcounts)])
        for i in range(rounds):  # loop over rounds: piece i of every segment
            s_lo = counts * i // rounds
            s_hi = counts * (i + 1) // rounds
            r_lo = rcounts * i // rounds
            r_hi = rcounts * (i + 1) // rounds
            if rounds == 1 and whole is not None:
                send = whole
            else:
                send = np.empty((int((s_hi - s_lo).sum()),) + tail, dtype=dtype)
                at = 0
                for j in range(p):
                    m = int(s_hi[j] - s_lo[j])
                    if m:
                        fill(send[at:at + m], int(soff[j] + s_lo[j]), int(soff[j] + s_hi[j]))
                    at += m
            recv = torch.empty((int((r_hi - r_lo).sum()),) + tail, dtype=tdt)
            self._a2a(recv, torch.from_numpy(send), r_hi - r_lo, s_hi - s_lo)
            del send
            rv = recv.numpy()
            if rounds == 1:
                out = rv
            else:
                pos = np.concatenate([[0], np.cumsum(r_hi - r_lo)])
                for j in range(p):
                    out[roff[j] + r_lo[j]: roff[j] + r_hi[j]] = rv[pos[j]:pos[j + 1]]
            del recv, rv
        return out, rcounts

    def allgather(self, obj: Any) -> list:
        res = [None] * self.size
        self.dist.all_gather_object(res, obj, group=self.group)
        return res


def _agree(comm, err: str | None) -> None:
    """Every rank raises the same PlanError when any rank has an error (so no
    rank waits in a collective the failed one never joins)."""
    errs = comm.allgather(err)
    bad = [(r, e) for r, e in enumerate(errs) if e]
    if bad:
        r, e = bad[0]
        raise PlanError(e if comm.size == 1 else f"rank {r}: {e}")


# ----------------------------------------------------------------------------- helpers
_HASH_BLOCK = 1 << 18   # nonzeros hashed at a time


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer on uint64 (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _pair_hash_sums(i: np.ndarray, j: np.ndarray, w: np.ndarray | None) -> list[int]:
    """[Σ h1(i,j), Σ h2(i,j), Σ h1(j,i), Σ h2(j,i)] mod 2**64, and the same
    four with the value bits of w mixed in (8 Python ints). Keyed by two fixed
    seeds; sums are order-independent, so ranks add theirs."""
    out = []
    with np.errstate(over="ignore"):
        iu, ju = i.astype(np.uint64), j.astype(np.uint64)
        wb = None if w is None else w.view(np.uint64)
        for with_w in (False, True):
            for a, b in ((iu, ju), (ju, iu)):
                for seed in (0x9E3779B97F4A7C15, 0xD1B54A32D192ED03):
                    h = _mix(_mix(a ^ np.uint64(seed)) + b)
                    if with_w and wb is not None:
                        h = _mix(h + wb)
                    out.append(int(h.sum(dtype=np.uint64)))
    return out


def _segments(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """int64 positions ``starts[0] .. starts[0]+lengths[0]-1, starts[1] ..``."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    off = np.zeros(lengths.size, dtype=np.int64)
    np.cumsum(lengths[:-1], out=off[1:])
    pos = np.repeat(starts - off, lengths)
    pos += np.arange(total, dtype=np.int64)
    return pos


_GATHER_BLOCK = 1 << 20   # nonzeros gathered at a time (bounds the int64 positions)
_READ_BLOCK_NNZ = 1 << 22  # nonzeros read from the chunk files at a time


def _row_span(vstart: np.ndarray, a: int, b: int) -> tuple[int, int, int, int]:
    """Rows r0 .. r1-1 whose nonzeros (row r: ``[vstart[r], vstart[r+1])``)
    meet ``[a, b)`` (a < b), and how much of the first / last one lies outside."""
    r0 = int(np.searchsorted(vstart, a, side="right")) - 1
    r1 = int(np.searchsorted(vstart, b, side="left"))
    return r0, r1, a - int(vstart[r0]), int(vstart[r1]) - b


def _gather_rows_fill(src: np.ndarray, starts: np.ndarray, vstart: np.ndarray):
    """``fill(dst, a, b)`` for :meth:`TorchComm.alltoallv_fill`: the virtual
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
            np.take(src, _segments(st, ln), out=dst[s - a:e - a])
    return fill


def _rows_of(ids: np.ndarray, vstart: np.ndarray, a: int, b: int) -> np.ndarray:
    """Row id of each nonzero ``a .. b-1`` (row r holds ``[vstart[r], vstart[r+1])``)."""
    r0, r1, cut0, cut1 = _row_span(vstart, a, b)
    ln = np.diff(vstart[r0:r1 + 1])
    ln[0] -= cut0
    ln[-1] -= cut1
    return np.repeat(ids[r0:r1], ln)


def _read_rows(graph_path, info: ChunkInfo, lo: int, hi: int):
    """Rows [lo, hi): (indptr int64 from 0, column ids — int32 when n < 2**31 —,
    values or None), read in pieces of about :data:`_READ_BLOCK_NNZ`
    nonzeros into preallocated arrays (each piece checked by
    :func:`read_chunk_rows`): never an int64 copy of the whole range."""
    from ..io.chunked import _npy_slice
    spans = []                                   # (a, b, row cuts)
    for c in info.chunks:
        a, b = max(lo, c.row_lo), min(hi, c.row_hi)
        if a < b:
            ip = _npy_slice(c.indptr, np.dtype("<i8"), c.row_hi - c.row_lo + 1, a - c.row_lo, b - a + 1, "indptr")
            cuts = np.searchsorted(ip, np.arange(int(ip[0]), int(ip[-1]), _READ_BLOCK_NNZ), side="right") - 1
            cuts = np.unique(np.concatenate([np.clip(cuts, 0, b - a), [0, b - a]])) + a
            spans.append((int(ip[-1] - ip[0]), cuts))
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


def _process_rows(info: ChunkInfo, p: int) -> np.ndarray:
    """int64[p + 1]: row boundaries of the processes — whole chunks, balanced
    by nonzeros when there are at least p chunks; equal row ranges otherwise."""
    if len(info.chunks) >= p:
        cum = np.concatenate([[0], np.cumsum(info.chunk_nnz)])
        tgt = np.arange(p + 1, dtype=np.float64) * info.nnz / p
        ci = np.clip(np.searchsorted(cum, tgt, side="left"), 0, len(info.chunks))
        ci[0], ci[-1] = 0, len(info.chunks)
        ci = np.maximum.accumulate(ci)
        return info.row_bounds[ci]
    return (np.arange(p + 1, dtype=np.int64) * info.n) // p


def _read_part_slice(partition, n: int, k: int, lo: int, hi: int) -> np.ndarray:
    """part[lo:hi] as int64, checked (integers in [0, k)); ``partition`` is an
    array, a ``.npy`` path (memory-mapped, only the slice is read) or any
    other partition file (read whole, :func:`partplan.io.read_partition`)."""
    if isinstance(partition, (str, os.PathLike)):
        p = Path(partition)
        if p.suffix.lower() == ".npy":
            from ..io._common import npy_claim_problem, npy_header
            try:
                with open(p, "rb") as fh:
                    shape, dt, hl = npy_header(fh)
                    size = os.fstat(fh.fileno()).st_size
            except (OSError, ValueError, EOFError, SyntaxError) as exc:
                raise PartitionError(f"{p}: not a readable .npy array ({exc})") from None
            problem = npy_claim_problem(shape, dt, size - hl)
            if problem or len(shape) != 1 or dt.kind not in "iu":
                raise PartitionError(f"{p}: must be a 1-D integer array" + (f" ({problem})" if problem else
                                     f", got shape {tuple(shape)} dtype {dt}"))
            if shape[0] != n:
                raise PartitionError(f"{p}: has {shape[0]} part ids but the graph has {n} vertices")
            arr = np.array(np.load(p, mmap_mode="r", allow_pickle=False)[lo:hi], dtype=np.int64)
            where = f"{p}: "
        else:
            from ..io.partfile import read_partition
            arr = read_partition(p, n)[lo:hi].astype(np.int64)
            where = f"{p}: "
    else:
        full = np.asarray(partition)
        if full.ndim != 1 or full.size != n:
            raise PartitionError(f"partition has {full.size} entries but the graph has {n} vertices")
        if full.size and full.dtype.kind not in "iu":
            raise PartitionError(f"partition must hold integer part ids, got dtype {full.dtype}")
        arr = np.array(full[lo:hi], dtype=np.int64)
        where = ""
    if arr.size and (arr.min() < 0 or arr.max() >= k):
        e = int(np.flatnonzero((arr < 0) | (arr >= k))[0])
        raise PartitionError(f"{where}vertex {lo + e} has part id {int(arr[e])} outside [0, k={k})")
    return arr


def partition_ranks(partition, n: int, block: int = 1 << 22) -> int:
    """max(part) + 1 (at least 1) — the plan's ranks when none are given, as
    :func:`partplan.parts.as_partition` defaults them. A ``.npy`` file is
    memory-mapped and scanned in blocks of ``block`` entries (O(block)
    memory); other partition files / arrays are read whole. Values are checked
    as :func:`build_plan_distributed` checks them (integers ≥ 0, n entries)."""
    big = 1 << 62
    if not isinstance(partition, (str, os.PathLike)) or Path(partition).suffix.lower() != ".npy":
        s = _read_part_slice(partition, n, big, 0, n)
        return max(int(s.max()) + 1 if s.size else 1, 1)
    top = -1
    for a in range(0, n, block):
        s = _read_part_slice(partition, n, big, a, min(n, a + block))
        top = max(top, int(s.max()) if s.size else -1)
    return max(top + 1, 1)


# ----------------------------------------------------------------------------- part -> process
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


# ----------------------------------------------------------------------------- programs of a process's parts
def _prep(q: int, in_ids: np.ndarray, row_nnz: np.ndarray, cols: np.ndarray, need: np.ndarray,
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


def _request_halos(comm, preps: list[dict], proc_of: np.ndarray, k: int, q_lo: int, q_hi: int
                   ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every part's halo requested from the owner parts' processes, in one
    all-to-all of (owner·k + requester, id) pairs. Returns, per part r of
    this process (q_lo ≤ r < q_hi), (requested ids grouped by requesting part
    in ascending order, ids ascending within a part; int64[k] counts per
    requesting part) — r's send list before mapping ids to local rows.

    No argsort: a part's halo is sorted by owner, so the send order (by
    destination process, then requesting part) is a concatenation of slices;
    what arrives for owner q comes from ascending sources, each sending its
    requesters in ascending order, so picking q's entries in arrival order
    already gives them by requester, ids ascending."""
    p = comm.size
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
    gk, _ = comm.alltoallv(keys, counts)
    del keys
    ids = np.concatenate(isl)
    del isl
    gid, _ = comm.alltoallv(ids, counts)
    del ids
    out = []
    for q in range(q_lo, q_hi):                                    # loop over this process's parts
        sel = np.flatnonzero((gk >= q * k) & (gk < (q + 1) * k))
        out.append((gid[sel], np.bincount(gk[sel] - q * k, minlength=k).astype(np.int64)))
    return out


def _finish(prefix: str, pr: dict, in_ids: np.ndarray, row_nnz: np.ndarray, nnz: int,
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


def _part_programs(comm, prefix: str, part_of, proc_of: np.ndarray, k: int, q_lo: int, q_hi: int,
                   n: int) -> list[tuple[Program, dict]]:
    """The programs of this process's parts. ``part_of(i)`` (part q_lo + i)
    returns ``in_ids``, ``row_nnz``, ``cols``, ``data`` (rows in global CSR
    order), and ``need``/``part_need`` (sorted distinct columns, their
    parts); parts are taken one at a time and their columns dropped once
    renumbered (only the int32 local columns stay)."""
    preps, keep = [], []
    for i in range(q_hi - q_lo):     # loop over this process's parts
        d = part_of(i)
        preps.append(_prep(q_lo + i, d["in_ids"], d["row_nnz"], d["cols"], d["need"], d["part_need"], k))
        keep.append((d["in_ids"], d["row_nnz"], int(d["cols"].size), d["data"]))
        del d
    reqs = _request_halos(comm, preps, proc_of, k, q_lo, q_hi)
    return [_finish(prefix, pr, ids, rn, nz, dt, req, sc)
            for pr, (ids, rn, nz, dt), (req, sc) in zip(preps, keep, reqs)]


def _lookup_parts(comm, need: np.ndarray, bounds: np.ndarray, part_slice: np.ndarray, lo: int) -> np.ndarray:
    """part[need] (need ascending), asked from the processes holding those rows."""
    holder = np.searchsorted(bounds, need, side="right") - 1
    counts = np.bincount(holder, minlength=comm.size).astype(np.int64)
    asked, asked_counts = comm.alltoallv(need, counts)
    answer = part_slice[asked - lo] if asked.size else np.zeros(0, np.int64)
    got, _ = comm.alltoallv(answer, asked_counts)
    return got


def _distinct(c: np.ndarray, n: int) -> np.ndarray:
    """Sorted distinct values of c (a length-n mask when cheaper than a sort)."""
    if c.size * 8 < n:
        return np.unique(c).astype(np.int64, copy=False)
    seen = np.zeros(n, dtype=bool)
    seen[c] = True
    return np.flatnonzero(seen)


# ----------------------------------------------------------------------------- public API
def build_plan_distributed(graph_path, partition, k: int, out, *, comm=None, layout: str = "1d",
                           f: int = 128, dtype: str = "float32", meta: dict | None = None,
                           backward: bool | None = None, alpha: float = DEFAULT_ALPHA_S,
                           beta: float = DEFAULT_BETA_S_PER_BYTE, created: str | None | bool = None) -> dict:
    """Build and write the 1D plan of a chunked graph with N = ``comm.size``
    processes, N ≤ k (each builds the shards of a contiguous run of plan
    ranks, :func:`part_bounds`); call it on every process.

    graph_path : a chunked graph directory (:mod:`partplan.io.chunked`).
    partition : part[v] per vertex: a ``.npy`` file (only this process's slice
        is read), another partition file (read whole), or an int array.
    k : ranks of the plan (parts), k ≥ N.
    out : the plan directory (written atomically by rank 0's rename; an
        existing plan there is replaced; anything else is refused).
    comm : :class:`TorchComm` (default when torch.distributed is initialized)
        or :class:`SelfComm` (one process).
    layout : only "1d"; f, dtype, meta, backward, alpha, beta, created : as
        :func:`build_plan` / :func:`write_plan`.

    Returns (on every process) a JSON-able dict: ``plan`` (path), ``rank``
    (this process), ``ranks`` (k, plan ranks), ``processes`` (N), ``parts``
    ([first, end) plan ranks built here), ``stages`` (this process's list of
    ``{stage, seconds, peak_rss_bytes}``), ``peak_rss_bytes`` (its maximum
    over stages, bytes) and, on process 0, ``per_rank`` (every process's
    stages, parts and peaks) and ``total_volume`` (rows).
    """
    from ..layouts import parse_layout
    if comm is None:
        import torch.distributed as dist
        comm = TorchComm() if dist.is_available() and dist.is_initialized() else SelfComm()
    st = _Stages()
    u, p = comm.rank, comm.size
    # ---------------------------------------------------------------- 1. read
    st.start("read")
    err, info, part_slice, bounds = None, None, None, None
    r_indptr = r_indices = r_data = None
    try:
        lay = parse_layout(layout, int(k))
        if not lay.distributed_build:
            raise PlanError(f"the distributed plan build covers layout 1d only, not {lay.spec} "
                            f"(build 1.5D / 2D plans with the single-process builder: partplan plan)")
        k = int(k)
        if p > k:
            raise PlanError(f"the distributed build needs processes <= plan ranks: {p} processes for "
                            f"k = {k} ranks (use at most {k} processes)")
        if not isinstance(f, (int, np.integer)) or isinstance(f, bool) or f < 1:
            raise PlanError(f"f (feature width) must be an integer >= 1, got {f!r}")
        dtype_bytes(dtype)
        info = chunk_info(graph_path)
        if k > info.n:
            raise PartitionError(f"k={k} parts exceed n={info.n} vertices")
        bounds = _process_rows(info, p)
        lo, hi = int(bounds[u]), int(bounds[u + 1])
        r_indptr, r_indices, r_data = _read_rows(graph_path, info, lo, hi)
        part_slice = _read_part_slice(partition, info.n, k, lo, hi)
    except PartplanError as exc:
        err = str(exc)
    _agree(comm, err)
    n, weighted = info.n, info.weighted
    st.stop()
    # ---------------------------------------------------------------- 2. shuffle rows to their part's process
    st.start("shuffle")
    deg = np.diff(r_indptr)
    w = np.bincount(part_slice, minlength=k).astype(np.int64) + \
        np.bincount(part_slice, weights=deg, minlength=k).astype(np.int64)
    pb = part_bounds(np.sum(np.array(comm.allgather(w.tolist()), dtype=np.int64), axis=0), p)
    q_lo, q_hi = int(pb[u]), int(pb[u + 1])
    proc_of = np.repeat(np.arange(p, dtype=np.int64), np.diff(pb))     # part -> process
    order = sort_small(part_slice, k)
    dest = proc_of[part_slice]
    vcounts = np.bincount(dest, minlength=p).astype(np.int64)
    vrecv, _ = comm.alltoallv(np.stack([order + lo, deg[order], part_slice[order]], axis=1), vcounts)
    # the nonzeros of the rows in `order`, gathered round by round (never a whole send copy)
    vstart = np.zeros(order.size + 1, dtype=np.int64)
    np.cumsum(deg[order], out=vstart[1:])
    starts = r_indptr[:-1][order]
    ecounts = np.bincount(dest, weights=deg, minlength=p).astype(np.int64)
    del deg, dest, order
    cols, _ = comm.alltoallv_fill(_gather_rows_fill(r_indices, starts, vstart), ecounts, r_indices.dtype)
    r_indices = None
    data = None
    if weighted:
        data, _ = comm.alltoallv_fill(_gather_rows_fill(r_data, starts, vstart), ecounts, np.float64)
    del r_indptr, r_indices, r_data, starts, vstart
    # rows as received: per source process, grouped by part, in global order within a part
    in_r, nnz_r, rpart_r = (np.ascontiguousarray(vrecv[:, c]) for c in range(3))
    del vrecv
    estart_r = np.zeros(in_r.size + 1, dtype=np.int64)                # nonzeros of received row r
    np.cumsum(nnz_r, out=estart_r[1:])
    if rpart_r.size and np.any(rpart_r[1:] < rpart_r[:-1]):
        # several parts here: group the rows by part (stable: sources hold
        # ascending row ranges, so each part's rows stay in global CSR order);
        # the nonzeros stay where they arrived and are gathered part by part
        o2 = sort_small(rpart_r - q_lo, q_hi - q_lo)
        in_ids, row_nnz, rpart, estart = in_r[o2], nnz_r[o2], rpart_r[o2], estart_r[:-1][o2]
        del o2
    else:
        in_ids, row_nnz, rpart, estart = in_r, nnz_r, rpart_r, None
    vofs = np.searchsorted(rpart, np.arange(q_lo, q_hi + 1))          # rows of each of my parts
    st.stop()
    # ---------------------------------------------------------------- 3. columns, halo, send lists
    st.start("columns")

    def part_nz(i: int):
        """(columns, values) of part q_lo + i's nonzeros in global CSR order."""
        a, b = vofs[i], vofs[i + 1]
        if estart is None:
            ea, eb = int(estart_r[a]), int(estart_r[b])
            return cols[ea:eb], None if data is None else data[ea:eb]
        pos = _segments(estart[a:b], row_nnz[a:b])
        return cols[pos], None if data is None else data[pos]

    need = _distinct(cols, n)
    part_need = _lookup_parts(comm, need, bounds, part_slice, lo)

    def fwd_part(i: int) -> dict:
        c, d = part_nz(i)
        nq = need if q_hi - q_lo == 1 else _distinct(c, n)
        return {"in_ids": in_ids[vofs[i]:vofs[i + 1]], "row_nnz": row_nnz[vofs[i]:vofs[i + 1]], "cols": c,
                "data": d, "need": nq,
                "part_need": part_need if q_hi - q_lo == 1 else part_need[np.searchsorted(need, nq)]}
    fres = _part_programs(comm, "fwd", fwd_part, proc_of, k, q_lo, q_hi, n)
    st.stop()
    # ---------------------------------------------------------------- 4. symmetry, backward program
    st.start("backward")
    mine = [0] * 8
    for a in range(0, max(cols.size, 1), _HASH_BLOCK):   # blocks bound the uint64 temporaries
        b = min(cols.size, a + _HASH_BLOCK)
        rows = _rows_of(in_r, estart_r, a, b) if b > a else np.zeros(0, np.int64)
        blk = _pair_hash_sums(rows, cols[a:b], None if data is None else data[a:b])
        mine = [(x + y) % (1 << 64) for x, y in zip(mine, blk)]
    sums = comm.allgather(mine)
    tot = [sum(int(s[i]) for s in sums) % (1 << 64) for i in range(8)]
    sym_pattern = tot[0:2] == tot[2:4]
    same = sym_pattern and (not weighted or tot[4:6] == tot[6:8])
    if backward is None:
        backward = not same
    bres = None
    if backward:
        # nonzeros in received order: (row, column) pairs are distinct, so the
        # (part, row j, column i) sort below does not depend on the send order
        rows = np.repeat(in_r, nnz_r)
        pcol = part_need[np.searchsorted(need, cols)]                 # A^T row j goes to part[j]
        tdest = proc_of[pcol]
        o = sort_small(tdest, p)
        tcounts = np.bincount(tdest, minlength=p).astype(np.int64)
        key = pcol * k + np.repeat(rpart_r, nnz_r)                     # (part of j)·k + part of i
        trc, _ = comm.alltoallv(np.stack([cols[o].astype(np.int64), rows[o], key[o]], axis=1), tcounts)
        tdata = comm.alltoallv(data[o], tcounts)[0] if weighted else None
        del pcol, tdest, o, key, rows
        tr = trc[:, 2] // k
        so = np.lexsort((trc[:, 1], trc[:, 0], tr))                    # by part, row j, column i
        t_rows, t_cols, t_part, tr = trc[so, 0], trc[so, 1], trc[so, 2] % k, tr[so]
        t_data = None if tdata is None else tdata[so]
        del trc, tdata, so
        tb = np.searchsorted(tr, np.arange(q_lo, q_hi + 1))
        del tr

        def bwd_part(i: int) -> dict:
            a, b = tb[i], tb[i + 1]
            ids = in_ids[vofs[i]:vofs[i + 1]]
            t_need, first = np.unique(t_cols[a:b], return_index=True)
            return {"in_ids": ids, "row_nnz": np.diff(np.searchsorted(t_rows[a:b], np.append(ids, n))),
                    "cols": t_cols[a:b], "data": None if t_data is None else t_data[a:b], "need": t_need,
                    "part_need": t_part[a:b][first]}
        bres = _part_programs(comm, "bwd", bwd_part, proc_of, k, q_lo, q_hi, n)
        del t_rows, t_cols, t_part, t_data
    del cols, data
    st.stop()
    # ---------------------------------------------------------------- 5. write shards, manifest
    st.start("write")
    res = _write(comm, st, info, graph_path, partition, out, lay, (q_lo, q_hi), fres, bres, same, sym_pattern,
                 backward, f, dtype, meta, alpha, beta, created)
    return res


def _write(comm, st, info, graph_path, partition, out, lay, qr, fres, bres, same, sym_pattern,
           backward, f, dtype, meta, alpha, beta, created) -> dict:
    """Stage 5: each process writes the shards of its parts (plan ranks
    ``qr = (q_lo, q_hi)``) into rank 0's temporary directory; rank 0 writes
    partition.arrow and the manifest and renames the directory into place."""
    from ..program.plan import RankPlan
    from .store import _json_default, _write_arrow
    from . import store as _store
    from .._atomic import clean_stale, temp_prefix
    u, p, k = comm.rank, comm.size, lay.ranks
    out = Path(out)
    err, tmp = None, None
    if u == 0:
        try:
            check = getattr(_store, "_check_target", None)
            if check is not None:
                check(out)
            elif out.exists() and not (out / MANIFEST).is_file() and (out.is_file() or any(out.iterdir())):
                raise PlanError(f"{out}: exists and is not a plan directory; refusing to overwrite it")
            out.parent.mkdir(parents=True, exist_ok=True)
            clean_stale(out)
            tmp = tempfile.mkdtemp(prefix=temp_prefix(out), dir=out.parent)
        except (PartplanError, OSError) as exc:
            err = str(exc)
    got = comm.allgather((err, tmp))
    _agree(comm, got[0][0])
    tmp = Path(got[0][1])
    fp = chunked_fingerprint(graph_path, info=info) if u == 0 else None
    fp = comm.allgather(fp)[0]
    bmode = "separate" if bres is not None else ("same-as-forward" if same else "not-planned")
    err, entries = None, []
    try:
        for i, q in enumerate(range(*qr)):    # loop over this process's parts
            fwd = fres[i][0]
            bwd = None if bres is None else bres[i][0]
            arrays = dict(fwd.arrays[0])
            progs = {"forward": {"prefix": "fwd", "buffers": fwd.buffers[0], "writes_output": True}}
            if bwd is not None:
                arrays.update(bwd.arrays[0])
                progs["backward"] = {"prefix": "bwd", "buffers": bwd.buffers[0], "writes_output": True}
            elif bmode == "same-as-forward":
                progs["backward"] = progs["forward"]
            rmeta = {"rank": q, "ranks": k, "layout": lay.spec, "format_version": FORMAT_VERSION,
                     "graph_fingerprint": fp, "programs": progs}
            rp = RankPlan(q, rmeta, arrays)
            name = shard_name(q)
            size, digest = _write_arrow(tmp / name, arrays, rmeta)
            entries.append({"rank": q, "file": name, "bytes": size, "sha256": digest,
                            **{kk: v for kk, v in rp.summary().items() if kk != "rank"}})
            del arrays, rp
            fwd.arrays[0].clear()          # written: this part's arrays are no longer needed
            if bwd is not None:
                bwd.arrays[0].clear()
    except (PartplanError, OSError) as exc:
        err = str(exc)
    st.stop()
    fcnt = [c for _, c in fres]
    bcnt = None if bres is None else [c for _, c in bres]
    gathered = comm.allgather((err, entries, fcnt, bcnt, st.rows, st.baseline, list(qr)))
    errs = [g[0] for g in gathered]
    if any(errs):
        if u == 0:
            shutil.rmtree(tmp, ignore_errors=True)
        _agree(comm, next(e for e in errs if e))
    result = {"plan": str(out), "rank": u, "ranks": k, "processes": p, "parts": list(qr), "stages": st.rows,
              "peak_rss_bytes": max(r["peak_rss_bytes"] for r in st.rows),
              "peak_rss_reset_per_stage": st.resettable, "baseline_rss_bytes": st.baseline}
    err = None
    if u == 0:
        try:
            st.start("manifest")
            # one row per plan rank, in rank order (processes hold ascending runs of ranks)
            per_part = [(None, e, fc, None if g[3] is None else g[3][i])
                        for g in gathered for i, (e, fc) in enumerate(zip(g[1], g[2]))]
            result["total_volume"] = _manifest(tmp, info, partition, lay, fres[0][0],
                                               None if bres is None else bres[0][0], per_part, bmode,
                                               sym_pattern, fp, f, dtype, meta, alpha, beta, created,
                                               _json_default, _write_arrow)
            os.chmod(tmp, 0o755)
            swap = getattr(_store, "_swap_in", None)
            if swap is not None:
                swap(tmp, out)
            elif out.exists():
                old = Path(tempfile.mkdtemp(prefix=temp_prefix(out, "old"), dir=out.parent))
                os.replace(out, old / "plan")
                os.replace(tmp, out)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(tmp, out)
            st.stop()
            result["stages"] = st.rows
            result["peak_rss_bytes"] = max(r["peak_rss_bytes"] for r in st.rows)
        except (PartplanError, OSError) as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            err = str(exc)
    _agree(comm, comm.allgather(err)[0])
    if u == 0:
        result["per_rank"] = [{"rank": r, "parts": g[6], "stages": g[4],
                               "peak_rss_bytes": max(x["peak_rss_bytes"] for x in g[4]),
                               "baseline_rss_bytes": g[5]} for r, g in enumerate(gathered)]
        result["per_rank"][0].update(stages=result["stages"], peak_rss_bytes=result["peak_rss_bytes"])
    return result


def _stats(k, n, nnz, f, dtype, alpha, beta, counts: list[dict], sizes: np.ndarray) -> CommStats:
    vol = np.array([c["recv_counts"] for c in counts], dtype=np.int64).T   # vol[q, u] = rows q → u
    load = np.array([c["nnz"] for c in counts], dtype=np.int64)
    cut = int(sum(c["edge_cut"] for c in counts))
    return CommStats(k=k, n=n, nnz=nnz, f=f, dtype=str(dtype), volume=vol, part_sizes=sizes,
                     compute_load=load, edge_cut=cut, alpha=alpha, beta=beta)


def _program_json(prog: Program, vol: np.ndarray) -> dict:
    steps = []
    for s in prog.steps:
        s = dict(s)
        if s["op"] == "alltoallv":
            s["pairs"] = matrix_to_pairs(vol)
        steps.append(s)
    return {"prefix": prog.prefix, "steps": steps}


def _manifest(tmp: Path, info: ChunkInfo, partition, lay, fwd, bwd, gathered, bmode, sym_pattern, fp, f,
              dtype, meta, alpha, beta, created, json_default, write_arrow) -> int:
    """Rank 0: partition.arrow and manifest.json, as write_plan writes them."""
    from .._version import __version__
    p = lay.ranks
    fcnts = [g[2] for g in gathered]
    sizes = np.array([c["rows"] for c in fcnts], dtype=np.int64)
    cost = {"alpha": alpha, "beta": beta}
    stf = _stats(p, info.n, info.nnz, int(f), dtype, alpha, beta, fcnts, sizes)
    programs = {"forward": _program_json(fwd, stf.volume)}
    stb = None
    if bwd is not None:
        stb = _stats(p, info.n, info.nnz, int(f), dtype, alpha, beta, [g[3] for g in gathered], sizes)
        programs["backward"] = _program_json(bwd, stb.volume)
    elif bmode == "same-as-forward":
        programs["backward"] = {"same_as": "forward"}
    info_meta = dict(meta or {})
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "graph": {"fingerprint": fp, "name": info.name, "n": info.n, "nnz": info.nnz,
                  "directed": bool(info.directed), "symmetric": bool(sym_pattern),
                  "weighted": bool(info.weighted), "source_fingerprint": fp},
        "normalize": None,
        "k": p, "ranks": p, "row_blocks": lay.row_blocks,
        "layout": lay.spec, "layout_params": lay.params,
        "groups": [g.to_json() for g in lay.groups()],
        "programs": programs,
        "ownership": "conformal",
        "backward": bmode,
        "model": info_meta.get("model"), "backend": info_meta.get("backend"),
        "objective": info_meta.get("objective"), "seed": info_meta.get("seed"),
        "params": info_meta.get("params", {}),
        "f": int(f), "dtype": str(dtype), "row_bytes": int(f * dtype_bytes(dtype)),
        "topology": info_meta.get("topology"),
        "stats": stf.summary(),
        "columns_sorted_within_rows": False,
    }
    del cost
    if stb is not None:
        manifest["stats_backward"] = stb.summary()
    for key, val in info_meta.items():
        if key not in manifest:
            manifest[key] = val
    m = dict(manifest)
    m["tool"] = {"name": "partplan", "version": __version__}
    from .store import stamp_created
    stamp_created(m, created)
    part = _read_part_slice(partition, info.n, p, 0, info.n)          # O(n), rank 0 only
    size, digest = write_arrow(tmp / PARTITION_FILE, {"part": part, "perm": perm_by(part, p)},
                               {"graph_fingerprint": fp, "k": p})
    del part
    m["partition_file"] = {"file": PARTITION_FILE, "bytes": size, "sha256": digest}
    m["shards"] = [g[1] for g in gathered]
    with open(tmp / MANIFEST, "w") as fh:
        json.dump(m, fh, indent=1, sort_keys=True, default=json_default)
        fh.write("\n")
    return stf.total_volume


# ----------------------------------------------------------------------------- launch
def check_nprocs(k, nprocs) -> int:
    """nprocs (default k) as an int, checked: 1 ≤ nprocs ≤ k. Raises PlanError."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise PlanError(f"k (plan ranks) must be an integer >= 1, got {k!r}")
    if nprocs is None:
        return int(k)
    if isinstance(nprocs, bool) or not isinstance(nprocs, (int, np.integer)) or nprocs < 1:
        raise PlanError(f"nprocs must be an integer >= 1, got {nprocs!r}")
    if nprocs > k:
        raise PlanError(f"{nprocs} processes for a plan of {k} ranks: the distributed build needs "
                        f"processes <= ranks (each process builds one or more whole ranks)")
    return int(nprocs)


def _init_from_env(timeout_s: float):
    """init_process_group("gloo") from PARTPLAN_DIST_INIT (a file:// store,
    set by :func:`launch_local`) or torchrun's env://."""
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    if dist.is_initialized():
        return
    init = os.environ.get("PARTPLAN_DIST_INIT")
    kw = {"timeout": _dt.timedelta(seconds=timeout_s)}
    if init:
        dist.init_process_group("gloo", init_method=init, rank=int(os.environ["RANK"]),
                                world_size=int(os.environ["WORLD_SIZE"]), **kw)
    else:
        missing = [v for v in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if v not in os.environ]
        if missing:
            raise PlanError(f"not started by torchrun or --nprocs: {', '.join(missing)} unset")
        dist.init_process_group("gloo", init_method="env://", **kw)


def launch_local(graph_path, partition, k: int, out, *, nprocs: int | None = None, timeout_s: float = 600.0,
                 f: int = 128, dtype: str = "float32", meta: dict | None = None,
                 backward: bool | None = None, created: str | None | bool = None) -> dict:
    """Run :func:`build_plan_distributed` in ``nprocs`` (default k; 1 ≤
    nprocs ≤ k) local processes (``python -m partplan.plan.distbuild``, gloo
    over a private file:// store) and return process 0's result.
    ``partition``: a file path or an array (saved to a temporary ``.npy``
    first). timeout_s : seconds for the build (+60 s to start). Raises
    PlanError for a bad nprocs (before starting anything) or quoting the first
    failing process's error."""
    nprocs = check_nprocs(k, nprocs)
    work = Path(tempfile.mkdtemp(prefix="partplan-distbuild-"))
    procs = []
    try:
        if not isinstance(partition, (str, os.PathLike)):
            np.save(work / "part.npy", np.asarray(partition))
            partition = work / "part.npy"
        cfg = {"graph": str(graph_path), "partition": str(partition), "k": int(k), "out": str(out), "f": f,
               "dtype": dtype, "meta": meta, "backward": backward, "created": created,
               "result": str(work / "result.json"), "timeout_s": timeout_s}
        (work / "config.json").write_text(json.dumps(cfg))
        env = dict(os.environ, WORLD_SIZE=str(nprocs), PARTPLAN_DIST_INIT=f"file://{work / 'store'}",
                   OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME=os.environ.get("GLOO_SOCKET_IFNAME", "lo"))
        for r in range(nprocs):
            procs.append(subprocess.Popen([sys.executable, "-m", "partplan.plan.distbuild", "--config",
                                           str(work / "config.json")], env=dict(env, RANK=str(r)),
                                          stdout=subprocess.DEVNULL, stderr=open(work / f"rank{r}.err", "w")))
        deadline = time.monotonic() + timeout_s + 60
        for pr in procs:
            pr.wait(timeout=max(1.0, deadline - time.monotonic()))
        bad = [(r, pr.returncode) for r, pr in enumerate(procs) if pr.returncode]
        if bad:
            msgs = []
            for r, rc in bad:
                lines = [ln for ln in (work / f"rank{r}.err").read_text().splitlines() if ln.strip()]
                last = lines[-1] if lines else f"exit status {rc}"
                msgs.append(last.removeprefix("partplan: error: "))
            raise PlanError("distributed plan build failed: " + msgs[0])
        return json.loads((work / "result.json").read_text())
    except subprocess.TimeoutExpired:
        raise PlanError(f"distributed plan build did not finish within {timeout_s + 60:.0f} s") from None
    finally:
        for pr in procs:
            if pr.poll() is None:
                pr.kill()
                pr.wait()
        shutil.rmtree(work, ignore_errors=True)


def _worker(cfg: dict) -> int:
    _init_from_env(float(cfg.get("timeout_s", 600.0)))
    import torch.distributed as dist
    try:
        res = build_plan_distributed(cfg["graph"], cfg["partition"], cfg["k"], cfg["out"],
                                     f=cfg.get("f", 128), dtype=cfg.get("dtype", "float32"),
                                     meta=cfg.get("meta"), backward=cfg.get("backward"),
                                     created=cfg.get("created"))
        if res["rank"] == 0 and cfg.get("result"):
            Path(cfg["result"]).write_text(json.dumps(res, indent=1))
    finally:
        dist.destroy_process_group()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m partplan.plan.distbuild",
                                 description="Distributed 1D plan build from a chunked graph (issue 22).")
    ap.add_argument("graph", nargs="?", help="chunked graph directory")
    ap.add_argument("--partition", help="partition file (.npy read by slices)")
    ap.add_argument("-k", type=int, help="ranks of the plan (>= processes)")
    ap.add_argument("-o", "--out", help="plan directory to write")
    ap.add_argument("--nprocs", type=int, help="start this many local processes, 1 <= N <= k "
                    "(else: running under torchrun, N = its world size)")
    ap.add_argument("--f", type=int, default=128)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--no-created", action="store_true", help="leave 'created' out of the manifest")
    ap.add_argument("--json", help="write rank 0's result (stages, peak RSS per rank) here")
    ap.add_argument("--config", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    try:
        if a.config:
            return _worker(json.loads(Path(a.config).read_text()))
        if not (a.graph and a.partition and a.k and a.out):
            ap.error("GRAPH, --partition, -k and -o are required")
        created = False if a.no_created else None
        if a.nprocs:
            res = launch_local(a.graph, a.partition, a.k, a.out, nprocs=a.nprocs, f=a.f, dtype=a.dtype,
                               created=created)
        else:
            res = _worker({"graph": a.graph, "partition": a.partition, "k": a.k, "out": a.out, "f": a.f,
                           "dtype": a.dtype, "created": created, "result": a.json})
            return res
        text = json.dumps(res, indent=1)
        if a.json:
            Path(a.json).write_text(text)
        print(text)
        return 0
    except PartplanError as exc:
        print(f"partplan: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
