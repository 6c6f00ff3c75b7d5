"""Zoltan PHG on the column-net hypergraph, one MPI process per row block.

Each process hands Zoltan its rows ``[lo, hi)`` in compressed-vertex form:
vertex ``u`` is a pin of net ``v`` for every column ``v`` of row ``u`` and of
its own net ``u``, so net ``v`` = {v} ∪ {u : A[u, v] ≠ 0} and its (λ − 1) cut,
the objective PHG minimizes, is exactly the rows of H that ``v``'s owner
sends in a 1D SpMM (the total communication volume). Vertex weights are the
row nonzeros (the compute load the balance constraint is on).

Settings that matter (measured, ``docs/design/distributed.md``):
``PHG_EDGE_SIZE_THRESHOLD=1.0`` (by default PHG drops nets larger than 25 %
of n: exactly the power-law hubs whose volume matters most) and 32-bit
global ids (this build's ``ZOLTAN_ID_TYPE``), so n < 2**32.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from ..context import engine
from . import mpilibs
from .mpilibs import load_zoltan

_ZOLTAN_OK = 0
_COMPRESSED_VERTEX = 2
_ID = ctypes.c_uint
_IDP = ctypes.POINTER(_ID)
_INTP = ctypes.POINTER(ctypes.c_int)
_FLTP = ctypes.POINTER(ctypes.c_float)
_NUM_OBJ = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, _INTP)
_OBJ_LIST = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, _IDP, _IDP, ctypes.c_int,
                             _FLTP, _INTP)
_HG_SIZE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, _INTP, _INTP, _INTP, _INTP)
_HG_CS = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                          _IDP, _INTP, _IDP, _INTP)
MAX_N = (1 << 32) - 1


def _pins(lo: int, indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Compressed-vertex pins: row u's columns plus u itself (once), as (ptr int32, pins uint32)."""
    rows = indptr.size - 1
    u = np.arange(lo, lo + rows, dtype=np.int64)
    deg = np.diff(indptr)
    owner = np.repeat(u, deg)
    has_self = np.zeros(rows, bool)
    np.logical_or.at(has_self, owner[indices == owner] - lo, True)
    extra = ~has_self
    cnt = deg + extra
    ptr = np.zeros(rows + 1, np.int64)
    np.cumsum(cnt, out=ptr[1:])
    pins = np.empty(int(ptr[-1]), np.uint32)
    # each row's columns first, then its own id where it has no self loop
    pos = np.arange(indices.size, dtype=np.int64) - np.repeat(indptr[:-1], deg) + np.repeat(ptr[:-1], deg)
    pins[pos] = indices
    pins[ptr[1:][extra] - 1] = u[extra]
    return ptr, pins


def zoltan_phg(comm, lo: int, indptr: np.ndarray, indices: np.ndarray, n: int, k: int, *, imbalance: float,
               seed: int = 0, debug_level: int = 0) -> np.ndarray:
    """Zoltan PHG's part (int32, values in [0, k)) for rows ``[lo, lo + rows)``
    of this process. Collective over ``comm`` (an mpi4py communicator)."""
    from mpi4py import MPI

    if n > MAX_N:
        raise ValueError(f"Zoltan's global ids are 32-bit here: n = {n} > {MAX_N}")
    lib = load_zoltan()
    rows = indptr.size - 1
    ptr, pins = _pins(lo, indptr, indices)
    if ptr[-1] >= 1 << 31:
        raise ValueError(f"{int(ptr[-1])} pins on one process: more than Zoltan's int offsets hold; use more processes")
    ptr32 = ptr.astype(np.int32)
    gids = np.arange(lo, lo + rows, dtype=np.uint32)
    wts = np.diff(indptr).astype(np.float32)
    if comm.allreduce(float(wts.sum())) == 0:     # no nonzero anywhere: Zoltan refuses all-zero weights (-2)
        wts = np.ones(rows, np.float32)

    def num_obj(_data, ierr):
        ierr[0] = _ZOLTAN_OK
        return rows

    def obj_list(_data, ngid, nlid, gid, lid, wdim, wgt, ierr):
        if rows:
            np.ctypeslib.as_array(gid, (rows,))[:] = gids
            np.ctypeslib.as_array(lid, (rows,))[:] = np.arange(rows, dtype=np.uint32)
            np.ctypeslib.as_array(wgt, (rows,))[:] = wts
        ierr[0] = _ZOLTAN_OK

    def hg_size(_data, nlists, npins, fmt, ierr):
        nlists[0], npins[0], fmt[0] = rows, int(ptr32[-1]), _COMPRESSED_VERTEX
        ierr[0] = _ZOLTAN_OK

    def hg_cs(_data, ngid, nvtx, npin, fmt, vtx_gid, vtx_ptr, pin_gid, ierr):
        if nvtx:
            np.ctypeslib.as_array(vtx_gid, (nvtx,))[:] = gids
            np.ctypeslib.as_array(vtx_ptr, (nvtx,))[:] = ptr32[:-1]
        if npin:
            np.ctypeslib.as_array(pin_gid, (npin,))[:] = pins
        ierr[0] = _ZOLTAN_OK

    cbs = [_NUM_OBJ(num_obj), _OBJ_LIST(obj_list), _HG_SIZE(hg_size), _HG_CS(hg_cs)]   # kept alive
    ver = ctypes.c_float()
    if lib.Zoltan_Initialize(0, None, ctypes.byref(ver)) != _ZOLTAN_OK:
        raise RuntimeError("Zoltan_Initialize failed")
    lib.Zoltan_Create.restype = ctypes.c_void_p
    lib.Zoltan_Create.argtypes = [ctypes.c_void_p]
    zz = lib.Zoltan_Create(ctypes.c_void_p(MPI._handleof(comm)))
    if not zz:
        raise RuntimeError("Zoltan_Create failed")
    zzp = ctypes.c_void_p(zz)
    try:
        params = {"DEBUG_LEVEL": str(debug_level), "LB_METHOD": "HYPERGRAPH", "HYPERGRAPH_PACKAGE": "PHG",
                  "LB_APPROACH": "PARTITION", "NUM_GID_ENTRIES": "1", "NUM_LID_ENTRIES": "1",
                  "NUM_GLOBAL_PARTS": str(k), "RETURN_LISTS": "PARTS", "OBJ_WEIGHT_DIM": "1",
                  "EDGE_WEIGHT_DIM": "0", "IMBALANCE_TOL": f"{1.0 + imbalance:.6f}",
                  "PHG_EDGE_SIZE_THRESHOLD": "1.0", "SEED": str(int(seed) % (1 << 31) + 1),
                  "CHECK_HYPERGRAPH": "0"}
        for key, val in params.items():
            if lib.Zoltan_Set_Param(zzp, key.encode(), val.encode()) != _ZOLTAN_OK:
                raise RuntimeError(f"Zoltan refused the parameter {key}={val}")
        lib.Zoltan_Set_Num_Obj_Fn(zzp, cbs[0], None)
        lib.Zoltan_Set_Obj_List_Fn(zzp, cbs[1], None)
        lib.Zoltan_Set_HG_Size_CS_Fn(zzp, cbs[2], None)
        lib.Zoltan_Set_HG_CS_Fn(zzp, cbs[3], None)
        changes, ngid, nlid = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        nimp, nexp = ctypes.c_int(), ctypes.c_int()
        imp_g, imp_l, exp_g, exp_l = _IDP(), _IDP(), _IDP(), _IDP()
        imp_p, imp_t, exp_p, exp_t = _INTP(), _INTP(), _INTP(), _INTP()
        rc = lib.Zoltan_LB_Partition(zzp, ctypes.byref(changes), ctypes.byref(ngid), ctypes.byref(nlid),
                                     ctypes.byref(nimp), ctypes.byref(imp_g), ctypes.byref(imp_l),
                                     ctypes.byref(imp_p), ctypes.byref(imp_t), ctypes.byref(nexp),
                                     ctypes.byref(exp_g), ctypes.byref(exp_l), ctypes.byref(exp_p),
                                     ctypes.byref(exp_t))
        if rc != _ZOLTAN_OK:
            raise RuntimeError(f"Zoltan_LB_Partition returned {rc}")
        part = np.full(rows, -1, np.int32)
        m = nexp.value
        if m:
            lids = np.ctypeslib.as_array(exp_l, (m,)).astype(np.int64)
            part[lids] = np.ctypeslib.as_array(exp_t, (m,))
        lib.Zoltan_LB_Free_Part(ctypes.byref(imp_g), ctypes.byref(imp_l), ctypes.byref(imp_p), ctypes.byref(imp_t))
        lib.Zoltan_LB_Free_Part(ctypes.byref(exp_g), ctypes.byref(exp_l), ctypes.byref(exp_p), ctypes.byref(exp_t))
    finally:
        lib.Zoltan_Destroy(ctypes.byref(zzp))
    if rows and (part.min() < 0 or part.max() >= k):
        raise RuntimeError("Zoltan left a row without a part in [0, k)")
    return part


@dataclass(frozen=True)
class ZoltanContext:
    """Zoltan PHG (MPI processes only). No options: partplan sets the partitioning approach, the
    net-size threshold (every net kept), ε and the seed."""


def _mpi_run(comm, rows, n: int, k: int, *, imbalance: float, seed: int, symmetric: bool, graph_path: str):
    """The registry's ``mpi_run``: Zoltan PHG on this process's rows (any pattern)."""
    if n > MAX_N:
        raise ValueError(f"n = {n} exceeds Zoltan's 32-bit global ids here; use --engine ptscotch or stream")
    return zoltan_phg(comm, rows.lo, rows.indptr, rows.indices, n, k, imbalance=imbalance, seed=seed)


def _missing() -> list:
    return mpilibs.missing("zoltan")


engine("zoltan", ("hypergraph",), None, ZoltanContext, mpi_run=_mpi_run, mpi_missing=_missing)

__all__ = ["zoltan_phg", "MAX_N", "ZoltanContext"]
