"""One MPI process of the distributed partitioner (run by :mod:`.launch` under ``mpirun``).

``python -m partplan.partition.mpi.worker CONFIG.json``. Each process reads
only its chunks of the chunked graph (a contiguous run of chunks balanced by
nonzeros), runs the engine on its row block, gathers the partition vector
(int32[n]: replicated, O(n)), refines max(send, recv) with
:func:`.refine.refine_distributed`, writes its slice of the output ``.npy``
(the launcher created it and renames it into place) and reports wall time
and peak RSS per stage. Any error is one ``partplan: error:`` line and an
MPI abort, so no process waits on a dead peer.
"""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np


def _die_with_mpirun() -> None:
    """SIGKILL this process when mpirun (its parent) dies."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal
    try:
        ctypes.CDLL(None).prctl(1, int(signal.SIGKILL), 0, 0, 0)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):   # pragma: no cover
        pass
    if os.getppid() == 1:
        os._exit(137)


def chunk_split(chunk_nnz: np.ndarray, rows: np.ndarray, nprocs: int) -> np.ndarray:
    """int64[nprocs + 1]: the first chunk of each process, contiguous runs
    balanced by nonzeros + rows (every process gets at least one chunk)."""
    c = chunk_nnz.size
    w = np.cumsum(chunk_nnz.astype(np.float64) + rows)
    cut = np.searchsorted(w, w[-1] * np.arange(1, nprocs) / nprocs, side="left") + 1 if c else np.zeros(0, int)
    j = np.arange(1, nprocs)
    cut = np.clip(cut, j, c - nprocs + j)
    cut = np.maximum.accumulate(cut - j) + j   # strictly increasing: every process at least one chunk
    return np.concatenate(([0], cut, [c])).astype(np.int64)


def _transpose(comm, bounds, lo, hi, indptr, indices):
    """The pins of nets [lo, hi): the rows holding each column, over all processes."""
    size = comm.Get_size()
    rows = np.repeat(np.arange(lo, hi, dtype=np.int64), np.diff(indptr))
    dest = np.searchsorted(bounds, indices, side="right") - 1
    order = np.argsort(dest, kind="stable")
    cuts = np.searchsorted(dest[order], np.arange(size + 1))
    out = [np.stack([indices[order][cuts[d]:cuts[d + 1]], rows[order][cuts[d]:cuts[d + 1]]]) for d in range(size)]
    got = np.concatenate(comm.alltoall(out), axis=1)
    col, row = got[0] - lo, got[1]
    o = np.lexsort((row, col))
    colptr = np.zeros(hi - lo + 1, np.int64)
    np.cumsum(np.bincount(col, minlength=hi - lo), out=colptr[1:])
    return colptr, row[o]


def _symmetric(comm, lo, indptr, indices, block: int = 1 << 22) -> bool:
    """True when the pattern equals its transpose (a hash of (u, v) summed
    over all nonzeros equals that of (v, u); a different pattern is missed with
    probability about 2**-64). Memory: O(block) beyond the rows."""
    from mpi4py import MPI

    def h(x, y):
        z = x * np.uint64(0x9E3779B97F4A7C15) ^ (y + np.uint64(0x632BE59BD9B4E019)) * np.uint64(0xC2B2AE3D27D4EB4F)
        z ^= z >> np.uint64(29)
        return z * np.uint64(0xBF58476D1CE4E5B9)

    a = np.zeros(2, np.uint64)
    rows = indptr.size - 1
    step = max(1, block // max(1, int(indptr[-1]) // max(rows, 1) + 1))
    with np.errstate(over="ignore"):
        for r0 in range(0, rows, step):
            r1 = min(rows, r0 + step)
            u = np.repeat(np.arange(lo + r0, lo + r1, dtype=np.uint64), np.diff(indptr[r0:r1 + 1]))
            v = indices[indptr[r0]:indptr[r1]].astype(np.uint64)
            a[0] += h(u, v).sum(dtype=np.uint64)
            a[1] += h(v, u).sum(dtype=np.uint64)
    tot = np.empty_like(a)
    comm.Allreduce(a, tot, op=MPI.SUM)
    return bool(tot[0] == tot[1])


class _Stages:
    def __init__(self):
        from ..._memory import peak_rss_bytes, reset_peak
        self._peak, self._reset = peak_rss_bytes, reset_peak
        self.stages: dict = {}
        self._t = time.perf_counter()
        self._reset()

    def done(self, name: str) -> None:
        now = time.perf_counter()
        self.stages[name] = {"wall_s": round(now - self._t, 4), "peak_rss_bytes": int(self._peak())}
        self._t = now
        self._reset()


def run(cfg: dict) -> dict:
    from mpi4py import MPI

    from ...io.chunked import chunk_info, read_chunk_rows
    from .refine import RefineContext, RowSlice, refine_distributed

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    st = _Stages()
    info = chunk_info(cfg["graph"])
    n, k, eps = info.n, int(cfg["k"]), float(cfg["imbalance"])
    rb = info.row_bounds
    split = chunk_split(info.chunk_nnz, np.diff(rb), size)
    bounds = rb[split]
    lo, hi = int(bounds[rank]), int(bounds[rank + 1])
    rows = read_chunk_rows(cfg["graph"], lo, hi, info=info)
    indptr, indices = rows.indptr.astype(np.int64), rows.indices.astype(np.int64)
    symmetric = _symmetric(comm, lo, indptr, indices)
    if symmetric:
        colptr, colidx = indptr, indices
    else:
        colptr, colidx = _transpose(comm, bounds, lo, hi, indptr, indices)
    st.done("read")
    engine = cfg["engine"]
    if engine == "auto":   # the measured default (docs/design/distributed.md)
        engine = "ptscotch" if symmetric else "zoltan"
    if engine == "zoltan":
        if n > (1 << 32) - 1:
            raise ValueError(f"n = {n} exceeds Zoltan's 32-bit global ids; use --engine stream")
        from .zoltan import zoltan_phg
        mine = zoltan_phg(comm, lo, indptr, indices, n, k, imbalance=eps, seed=int(cfg["seed"]))
    elif engine == "ptscotch":
        if not symmetric:
            raise ValueError("PT-Scotch partitions symmetric patterns only; this graph is directed "
                             "(use --engine zoltan)")
        from .ptscotch import ptscotch_part
        mine = ptscotch_part(comm, lo, indptr, indices, n, k, imbalance=eps, seed=int(cfg["seed"]))
    elif engine == "stream":
        full = None
        if rank == 0:
            from ..stream import stream_partition
            full = np.asarray(stream_partition(cfg["graph"], k, eps=eps, passes=3, seed=int(cfg["seed"])),
                              dtype=np.int32)
        full = comm.bcast(full, root=0)
        mine = full[lo:hi]
    else:
        raise ValueError(f"unknown distributed engine {engine!r}")
    counts = np.array(comm.allgather(hi - lo), np.int64)
    part = np.empty(n, np.int32)
    comm.Allgatherv(np.ascontiguousarray(mine, np.int32), [part, counts.tolist(), bounds[:-1].tolist(), MPI.INT])
    st.done("engine")
    sl = RowSlice(lo, hi, n, indptr, indices, colptr, colidx)
    ctx = RefineContext(rounds=int(cfg["rounds"]), time_limit=cfg.get("time_limit"), seed=int(cfg["seed"]))
    say = _progress(cfg) if rank == 0 else None
    res = refine_distributed(comm, sl, part, k, eps, ctx if cfg["refine"] else RefineContext(rounds=0),
                             progress=say)
    st.done("refine")
    from ..._atomic import open_npy
    ident = tuple(cfg["ident"]) if cfg.get("ident") else None
    out = open_npy(cfg["tmp"], np.int64, (n,), ident)
    out[lo:hi] = part[lo:hi]
    if hasattr(out, "flush"):
        out.flush()
    del out
    st.done("write")
    stages = comm.gather(st.stages, root=0)
    if rank != 0:
        return {}
    after = {"total_volume": int(res.send.sum()), "max_send": int(res.send.max()),
             "max_recv": int(res.recv.max()), "max_weight": int(res.weights.max())}
    return {"engine": engine, "nprocs": size, "n": n, "nnz": info.nnz, "k": k, "imbalance": eps,
            "symmetric": symmetric, "engine_result": res.before, "result": after,
            "send": res.send.tolist(), "recv": res.recv.tolist(), "compute_load": res.weights.tolist(),
            "refine": {"rounds": res.rounds, "moved": res.moved, "seconds": round(res.seconds, 3)},
            "row_bounds": bounds.tolist(), "stages": stages}


def _progress(cfg):
    if cfg.get("quiet"):
        return None

    def say(msg: str) -> None:
        print(f"partplan: {msg}", file=sys.stderr, flush=True)
    return say


def main(argv: list[str] | None = None) -> int:
    _die_with_mpirun()
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as fh:
        cfg = json.load(fh)
    from mpi4py import MPI
    try:
        result = run(cfg)
        if result:
            from ..._atomic import write_json_atomic
            write_json_atomic(result, cfg["report"])
    except Exception as exc:   # one line, then every process leaves
        print(f"partplan: error: rank {MPI.COMM_WORLD.Get_rank()}: {exc}", file=sys.stderr, flush=True)
        MPI.COMM_WORLD.Abort(2)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
