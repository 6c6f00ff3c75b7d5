"""scipy ``.npz`` sparse matrices (the ``scipy.sparse.save_npz`` format).

scipy does the reading and writing; this module turns every failure (not a
zip, missing arrays, a dense array file, a non-square matrix, NaN values)
into one :class:`~partplan.errors.GraphFormatError` naming the file and the
array at fault, and writes atomically.

Pattern graphs (``data is None``) are stored with boolean data and read back
as patterns; weighted graphs as float64. Graph metadata (``ids``, vertex
weights, directedness) is not part of the scipy format and is not stored.
"""
from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import GraphFormatError
from ..graph import Graph
from ._common import atomic_output

_NEEDED = {"csr": ("indices", "indptr", "data", "shape"), "csc": ("indices", "indptr", "data", "shape"),
           "coo": ("row", "col", "data", "shape"), "bsr": ("indices", "indptr", "data", "shape"),
           "dia": ("offsets", "data", "shape")}


def read_npz(path: str | os.PathLike, *, symmetrize: bool = False, self_loops: str = "keep",
             dedupe: bool = True, drop_isolated: bool = False, name: str | None = None) -> Graph:
    """Read a ``scipy.sparse.save_npz`` file as a :class:`Graph`."""
    p = Path(path)
    if not p.exists():
        raise GraphFormatError("file not found", p)
    try:
        z = np.load(p, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise GraphFormatError(f"not a scipy .npz file ({exc})", p) from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise GraphFormatError("a plain .npy array, not a scipy sparse .npz", p)
    with z:
        keys = set(z.files)
        if "format" not in keys:
            raise GraphFormatError(f"missing array 'format' (holds {sorted(keys)}); "
                                   "write it with scipy.sparse.save_npz", p, field="format")
        try:
            fmt = z["format"].item()
        except (ValueError, TypeError) as exc:
            raise GraphFormatError(f"bad 'format' array ({exc})", p, field="format") from None
        fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
        if fmt not in _NEEDED:
            raise GraphFormatError(f"unknown sparse format {fmt!r}", p, field="format")
        for k in _NEEDED[fmt]:
            if k not in keys:
                raise GraphFormatError(f"missing array {k!r} for a {fmt} matrix", p, field=k)
    try:
        A = sp.load_npz(p)
    except Exception as exc:  # scipy raises ValueError/TypeError/IndexError on inconsistent arrays
        raise GraphFormatError(f"inconsistent sparse arrays: {exc}", p) from None
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise GraphFormatError(f"matrix must be square, got shape {A.shape}", p, field="shape")
    A = sp.csr_matrix(A)
    pattern = A.dtype == np.bool_
    if not pattern:
        if np.iscomplexobj(A.data):
            raise GraphFormatError("complex values are not supported", p, field="data")
        if not np.all(np.isfinite(A.data)):
            raise GraphFormatError("values must be finite (found NaN or inf)", p, field="data")
    g = Graph.from_scipy(A, pattern=pattern, name=name or _stem(p))  # duplicates summed by scipy
    if symmetrize or self_loops != "keep" or drop_isolated:
        g = g.normalize(symmetrize=symmetrize, self_loops=self_loops, dedupe=dedupe, drop_isolated=drop_isolated)
    return g


def _stem(p: Path) -> str:
    return p.name.rsplit(".", 1)[0]


def write_npz(graph: Graph, path: str | os.PathLike, *, compressed: bool = True) -> Path:
    """Write ``graph`` with ``scipy.sparse.save_npz`` (atomic). Pattern graphs
    get boolean data so they read back as patterns."""
    p = Path(path)
    data = np.ones(graph.nnz, dtype=bool) if graph.data is None else graph.data
    A = sp.csr_matrix((data, graph.indices, graph.indptr), shape=(graph.n, graph.n))
    with atomic_output(p, compress=False) as fh:
        sp.save_npz(fh, A, compressed=compressed)
    return p
