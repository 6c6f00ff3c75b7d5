"""scipy ``.npz`` sparse matrices (the ``scipy.sparse.save_npz`` format).

numpy reads the arrays and scipy builds the matrix; this module first checks
every array from its .npy header (sizes against what the file holds and the
memory budget, before numpy allocates what a header claims), then dtypes,
lengths and index ranges, and turns every failure (not a zip, a corrupt
member, missing arrays, a dense array file, a non-square matrix, NaN values)
into one :class:`~partplan.errors.GraphFormatError` naming the file and the
array at fault (``field``). Writing is atomic.

Pattern graphs (``data is None``) are stored with boolean data and read back
as patterns; weighted graphs as float64. Graph metadata (``ids``, vertex
weights, directedness) is not part of the scipy format and is not stored.
"""
from __future__ import annotations

import os
import zipfile
import zlib
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import GraphFormatError
from ..graph import Graph
from ._common import (atomic_output, check_budget, drops_vertex_weights, first_inexact_integer, graph_bytes,
                      npy_claim_problem, npy_header)

_NEEDED = {"csr": ("indices", "indptr", "data", "shape"), "csc": ("indices", "indptr", "data", "shape"),
           "coo": ("row", "col", "data", "shape"), "bsr": ("indices", "indptr", "data", "shape"),
           "dia": ("offsets", "data", "shape")}


# what zipfile / numpy raise on a damaged archive: bad zip or CRC, corrupt
# deflate data, truncation, an unsupported compression method or zip version
# (NotImplementedError), an "encrypted" flag (RuntimeError), bad .npy headers
_ZIP_ERRORS = (OSError, ValueError, zipfile.BadZipFile, EOFError, zlib.error, NotImplementedError, RuntimeError)


def _open_npz(p: Path):
    from ._common import open_regular
    fd, _ = open_regular(p)       # a regular file (never a FIFO's blocking open), then its first bytes:
    try:                          # numpy calls any file that is neither zip nor .npy a pickle it will not load
        head = os.pread(fd, 4, 0)
    finally:
        os.close(fd)
    if head[:2] != b"PK":
        raise GraphFormatError(f"not a scipy .npz file (an .npz is a zip archive; this file starts with "
                               f"{head!r})", p)
    try:
        z = np.load(p, allow_pickle=False)
    except _ZIP_ERRORS as exc:
        raise GraphFormatError(f"not a scipy .npz file ({exc})", p) from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise GraphFormatError("a plain .npy array, not a scipy sparse .npz", p)
    return z


def _peek(z, key: str, p: Path) -> tuple[tuple, np.dtype, int]:
    """(shape, dtype, bytes) of array ``key`` from its .npy header and the zip
    directory, without reading the data: numpy allocates the shape a member's
    header claims before reading it, so a hostile header (shape 10^10) is
    refused here, naming the key."""
    name = key + ".npy"
    try:
        info = z.zip.getinfo(name)
        with z.zip.open(name) as fh:
            shape, dtype, header_len = npy_header(fh)
    except KeyError:
        raise GraphFormatError(f"missing array {key!r}", p, field=key) from None
    except _ZIP_ERRORS + (AttributeError,) as exc:
        raise GraphFormatError(f"array {key!r} has a bad .npy header ({exc})", p, field=key) from None
    problem = npy_claim_problem(shape, dtype, info.file_size - header_len)
    if problem:
        raise GraphFormatError(f"array {key!r} {problem}", p, field=key)
    count = 1
    for d in shape:
        count *= int(d)
    return shape, dtype, count * dtype.itemsize


def _load(z, key: str, p: Path) -> np.ndarray:
    """Array ``key`` (already peeked); corrupt members name the key."""
    try:
        return z[key]
    except _ZIP_ERRORS + (KeyError,) as exc:
        raise GraphFormatError(f"cannot read array {key!r} ({exc})", p, field=key) from None


def _index_array(a: np.ndarray, key: str, p: Path, length: int | None = None) -> np.ndarray:
    if a.ndim != 1:
        raise GraphFormatError(f"array {key!r} must be one-dimensional, got shape {a.shape}", p, field=key)
    if a.size and not (np.issubdtype(a.dtype, np.integer) or a.dtype == np.bool_):
        raise GraphFormatError(f"array {key!r} must hold integers, got dtype {a.dtype}", p, field=key)
    if length is not None and a.size != length:
        raise GraphFormatError(f"array {key!r} has {a.size} entries, expected {length}", p, field=key)
    if a.dtype == np.uint64 and a.size and a.max() > np.iinfo(np.int64).max:
        raise GraphFormatError(f"array {key!r} holds a value beyond 64-bit signed range", p, field=key)
    return a.astype(np.int64, copy=False)


def _in_range(a: np.ndarray, n: int, key: str, p: Path) -> None:
    bad = (a < 0) | (a >= n)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise GraphFormatError(f"array {key!r} entry {i} = {int(a[i])} out of range [0, {n})", p, field=key)


def _matrix(fmt: str, arrs: dict, n: int, p: Path):
    """The scipy matrix of the arrays, after checking them (lengths, ranges,
    dtypes) so scipy never sees inconsistent input."""
    data = arrs["data"]
    if np.iscomplexobj(data):
        raise GraphFormatError("complex values are not supported", p, field="data")
    if not (data.dtype == np.bool_ or np.issubdtype(data.dtype, np.integer)
            or np.issubdtype(data.dtype, np.floating)):
        raise GraphFormatError(f"array 'data' must hold numbers, got dtype {data.dtype}", p, field="data")
    big = first_inexact_integer(data)
    if big is not None:
        raise GraphFormatError(f"integer value {int(data.reshape(-1)[big])} (entry {big}) is above 2^53: partplan "
                               f"holds values as float64, exact up to 2^53", p, field="data")
    if data.dtype != np.bool_ and data.size and not np.all(np.isfinite(data)):
        i = int(np.flatnonzero(~np.isfinite(data.reshape(-1)))[0])
        raise GraphFormatError(f"values must be finite (entry {i} is {data.reshape(-1)[i]})", p, field="data")
    if fmt in ("csr", "csc"):
        if data.ndim != 1:
            raise GraphFormatError(f"array 'data' must be one-dimensional, got shape {data.shape}", p, field="data")
        indptr = _index_array(arrs["indptr"], "indptr", p, n + 1)
        indices = _index_array(arrs["indices"], "indices", p, data.size)
        if indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != indices.size:
            raise GraphFormatError(f"array 'indptr' must start at 0, not decrease and end at the number of "
                                   f"entries ({indices.size})", p, field="indptr")
        _in_range(indices, n, "indices", p)
        cls = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
        return cls((data, indices, indptr), shape=(n, n))
    if fmt == "coo":
        if data.ndim != 1:
            raise GraphFormatError(f"array 'data' must be one-dimensional, got shape {data.shape}", p, field="data")
        row = _index_array(arrs["row"], "row", p, data.size)
        col = _index_array(arrs["col"], "col", p, data.size)
        _in_range(row, n, "row", p)
        _in_range(col, n, "col", p)
        return sp.coo_matrix((data, (row, col)), shape=(n, n))
    if fmt == "bsr":      # blocks of R x C: the CSR arrays of the block rows, checked as csr's are
        if data.ndim != 3 or 0 in data.shape[1:] or n % data.shape[1] or n % data.shape[2]:
            raise GraphFormatError(f"array 'data' of a bsr matrix must be (blocks, R, C) with R and C dividing "
                                   f"{n}, got shape {data.shape}", p, field="data")
        nb, R, C = data.shape
        indptr = _index_array(arrs["indptr"], "indptr", p, n // R + 1)
        indices = _index_array(arrs["indices"], "indices", p, nb)
        if indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != nb:
            raise GraphFormatError(f"array 'indptr' must start at 0, not decrease and end at the number of "
                                   f"blocks ({nb})", p, field="indptr")
        _in_range(indices, n // C, "indices", p)
        return sp.bsr_matrix((data, indices, indptr), shape=(n, n))
    offsets = _index_array(arrs["offsets"], "offsets", p)
    if data.ndim == 2 and data.shape[0] == offsets.size:
        # a diagonal outside the matrix holds nothing (scipy writes such files): left out, since
        # scipy casts offsets to 32-bit ints and would read 2^62 as the main diagonal
        inside = (offsets > -n) & (offsets < n)
        data, offsets = data[inside], offsets[inside]
    try:  # dia: rare; scipy checks the rest
        return sp.dia_matrix((data, offsets), shape=(n, n))
    except (ValueError, TypeError, IndexError) as exc:
        raise GraphFormatError(f"inconsistent {fmt} arrays: {exc}", p) from None


def read_npz(path: str | os.PathLike, *, symmetrize: bool = False, self_loops: str = "keep",
             dedupe: bool = True, drop_isolated: bool = False, name: str | None = None) -> Graph:
    """Read a ``scipy.sparse.save_npz`` file as a :class:`Graph`.

    Every array is checked from its .npy header before it is read (size
    against the bytes the file holds and against the memory budget,
    :func:`partplan.io._common.memory_budget`), then for dtype, length and
    range; every error names the file and the array (``field``)."""
    p = Path(path)
    if not p.exists():
        raise GraphFormatError("file not found", p)
    with _open_npz(p) as z:
        keys = set(z.files)
        if "format" not in keys:
            raise GraphFormatError(f"missing array 'format' (holds {sorted(keys)}); "
                                   "write it with scipy.sparse.save_npz", p, field="format")
        _peek(z, "format", p)
        try:
            fmt = _load(z, "format", p).item()
        except (ValueError, TypeError) as exc:
            raise GraphFormatError(f"bad 'format' array ({exc})", p, field="format") from None
        fmt = fmt.decode("utf-8", "replace") if isinstance(fmt, bytes) else str(fmt)
        if fmt not in _NEEDED:
            raise GraphFormatError(f"unknown sparse format {fmt!r}", p, field="format")
        for k in _NEEDED[fmt]:
            if k not in keys:
                raise GraphFormatError(f"missing array {k!r} for a {fmt} matrix", p, field=k)
        sizes = {k: _peek(z, k, p) for k in _NEEDED[fmt]}
        if len(sizes["shape"][0]) != 1 or sizes["shape"][0][0] != 2:
            raise GraphFormatError(f"array 'shape' must hold 2 numbers, got shape {sizes['shape'][0]}", p,
                                   field="shape")
        shape = _load(z, "shape", p)
        if not np.issubdtype(shape.dtype, np.integer):
            raise GraphFormatError(f"array 'shape' must hold integers, got dtype {shape.dtype}", p, field="shape")
        M, N = (int(v) for v in shape)
        if min(M, N) < 0:
            raise GraphFormatError(f"negative matrix size {(M, N)}", p, field="shape")
        if M != N:
            raise GraphFormatError(f"matrix must be square, got shape {(M, N)}", p, field="shape")
        arrays_bytes = sum(b for _, _, b in sizes.values())
        nnz = 1                 # the values stored (bsr: blocks x R x C, dia: diagonals x N), not the rows of 'data'
        for d in sizes["data"][0]:
            nnz *= int(d)
        check_budget(arrays_bytes + graph_bytes(M, nnz), p, f"a {M} x {M} matrix with {nnz} stored values",
                     field="shape" if graph_bytes(M, 0) > arrays_bytes else "data")
        arrs = {k: _load(z, k, p) for k in _NEEDED[fmt] if k not in ("format", "shape")}
    A = _matrix(fmt, arrs, M, p)
    del arrs
    A = sp.csr_matrix(A)
    pattern = A.dtype == np.bool_
    try:
        g = Graph.from_scipy(A, pattern=pattern, name=name or _stem(p))  # duplicates summed by scipy
    except GraphFormatError as exc:  # name the file
        raise GraphFormatError(exc.problem, p, field=exc.field) from None
    if symmetrize or self_loops != "keep" or drop_isolated:
        g = g.normalize(symmetrize=symmetrize, self_loops=self_loops, dedupe=dedupe, drop_isolated=drop_isolated)
    return g


def _stem(p: Path) -> str:
    return p.name.rsplit(".", 1)[0]


@drops_vertex_weights(".npz")
def write_npz(graph: Graph, path: str | os.PathLike, *, compressed: bool = True) -> Path:
    """Write ``graph`` with ``scipy.sparse.save_npz`` (atomic). Pattern graphs
    get boolean data so they read back as patterns."""
    p = Path(path)
    data = np.ones(graph.nnz, dtype=bool) if graph.data is None else graph.data
    A = sp.csr_matrix((data, graph.indices, graph.indptr), shape=(graph.n, graph.n))
    with atomic_output(p, compress=False) as fh:
        sp.save_npz(fh, A, compressed=compressed)
    return p
