"""PT-Scotch's distributed graph partitioner (``SCOTCH_dgraphPart``), one MPI
process per row block, through the 64-bit-integer build of Debian's package.

Scotch partitions the graph model (edge cut, not volume) of a symmetric
pattern; self loops are dropped because Scotch refuses them. Vertex weights
are the row nonzeros (the compute load), the balance ratio is ε.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from ..context import engine
from . import mpilibs
from .mpilibs import load_ptscotch

_NUM = ctypes.c_int64
_NUMP = ctypes.POINTER(ctypes.c_int64)
_STRAT_DEFAULT = 0


def ptscotch_part(comm, lo: int, indptr: np.ndarray, indices: np.ndarray, n: int, k: int, *, imbalance: float,
                  seed: int = 0) -> np.ndarray:
    """PT-Scotch's part (int32 in [0, k)) for rows ``[lo, lo + rows)`` of this
    process; the rows must be those of a symmetric pattern. Collective."""
    from mpi4py import MPI

    lib = load_ptscotch()
    rows = indptr.size - 1
    u = np.repeat(np.arange(lo, lo + rows, dtype=np.int64), np.diff(indptr))
    keep = indices != u
    cnt = np.bincount(u[keep] - lo, minlength=rows) if rows else np.zeros(0, np.int64)
    vert = np.zeros(rows + 1, np.int64)
    np.cumsum(cnt, out=vert[1:])
    edges = np.ascontiguousarray(indices[keep], dtype=np.int64)
    velo = np.ascontiguousarray(np.diff(indptr), dtype=np.int64)
    part = np.zeros(max(rows, 1), np.int64)
    graph = (ctypes.c_double * 64)()
    bound = (ctypes.c_double * 64)()
    strat = (ctypes.c_double * 16)()
    context = (ctypes.c_double * 16)()
    handle = ctypes.c_void_p(MPI._handleof(comm))
    if lib.SCOTCH_dgraphInit(graph, handle) != 0:
        raise RuntimeError("SCOTCH_dgraphInit failed")
    try:
        lib.SCOTCH_randomSeed(_NUM(int(seed)))
        context_ok = _deterministic_context(lib, context, seed)
        ptr = lambda a: a.ctypes.data_as(_NUMP)   # noqa: E731
        rc = lib.SCOTCH_dgraphBuild(graph, _NUM(0), _NUM(rows), _NUM(rows), ptr(vert), ptr(vert[1:]), ptr(velo),
                                    None, _NUM(edges.size), _NUM(edges.size), ptr(edges if edges.size else part),
                                    None, None)
        if rc != 0:
            raise RuntimeError("SCOTCH_dgraphBuild refused the graph")
        if lib.SCOTCH_stratInit(strat) != 0:
            raise RuntimeError("SCOTCH_stratInit failed")
        try:
            if lib.SCOTCH_stratDgraphMapBuild(strat, _NUM(_STRAT_DEFAULT), _NUM(comm.Get_size()), _NUM(k),
                                              ctypes.c_double(imbalance)) != 0:
                raise RuntimeError("SCOTCH_stratDgraphMapBuild failed")
            target = graph
            if context_ok and lib.SCOTCH_contextBindDgraph(context, graph, bound) == 0:
                target = bound
            try:
                if lib.SCOTCH_dgraphPart(target, _NUM(k), strat, ptr(part)) != 0:
                    raise RuntimeError("SCOTCH_dgraphPart failed")
            finally:
                if target is bound:
                    lib.SCOTCH_dgraphExit(bound)
        finally:
            lib.SCOTCH_stratExit(strat)
    finally:
        if context_ok:
            lib.SCOTCH_contextExit(context)
        lib.SCOTCH_dgraphExit(graph)
    out = part[:rows].astype(np.int32)
    if rows and (out.min() < 0 or out.max() >= k):
        raise RuntimeError("PT-Scotch returned a part outside [0, k)")
    return out


_OPTION_DETERMINISTIC, _OPTION_FIXED_SEED = 0, 1     # SCOTCH_OPTIONNUM* of scotch.h (Scotch 7)


def _deterministic_context(lib, context, seed: int) -> bool:
    """A Scotch 7 execution context with its deterministic and fixed-seed options on and the
    seed set (``SCOTCH_context*``): the same partition for the same graph, seed and process
    count (Debian's build is not compiled deterministic, so without it the threaded and
    parallel steps vary between runs). False on a Scotch without contexts (then as built)."""
    if not hasattr(lib, "SCOTCH_contextInit") or lib.SCOTCH_contextInit(context) != 0:
        return False
    ok = (lib.SCOTCH_contextOptionSetNum(context, ctypes.c_int(_OPTION_DETERMINISTIC), _NUM(1)) == 0
          and lib.SCOTCH_contextOptionSetNum(context, ctypes.c_int(_OPTION_FIXED_SEED), _NUM(1)) == 0
          and lib.SCOTCH_contextRandomClone(context) == 0)
    if not ok:
        lib.SCOTCH_contextExit(context)
        return False
    lib.SCOTCH_contextRandomSeed(context, _NUM(int(seed)))
    return True


@dataclass(frozen=True)
class PTScotchContext:
    """PT-Scotch (MPI processes only, symmetric patterns). No options: partplan sets the
    strategy's balance ratio (ε) and the seed."""


def _mpi_run(comm, rows, n: int, k: int, *, imbalance: float, seed: int, symmetric: bool, graph_path: str):
    """The registry's ``mpi_run``: PT-Scotch on this process's rows (symmetric patterns only). A
    process without rows (a chunked graph can hold an empty chunk) is left out of the call:
    PT-Scotch's distributed graph crashes (SIGSEGV) on a process with no vertex, and the rows'
    global numbering is the same without it."""
    from mpi4py import MPI

    if not symmetric:
        raise ValueError("PT-Scotch partitions symmetric patterns only; this graph is directed (use --engine zoltan)")
    have = rows.indptr.size > 1
    if comm.allreduce(0 if have else 1) == 0:
        return ptscotch_part(comm, rows.lo, rows.indptr, rows.indices, n, k, imbalance=imbalance, seed=seed)
    sub = comm.Split(0 if have else MPI.UNDEFINED, comm.Get_rank())
    if not have:
        return np.zeros(0, np.int32)
    try:
        return ptscotch_part(sub, rows.lo, rows.indptr, rows.indices, n, k, imbalance=imbalance, seed=seed)
    finally:
        sub.Free()


def _missing() -> list:
    return mpilibs.missing("ptscotch")


engine("ptscotch", ("graph",), None, PTScotchContext, mpi_run=_mpi_run, mpi_missing=_missing)

__all__ = ["ptscotch_part", "PTScotchContext"]
