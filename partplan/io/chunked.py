"""Chunked CSR: a graph stored as row chunks that a process can read alone.

For planning past one machine's memory. A chunked graph is a
**directory** (any name; ``NAME.chunked`` by convention)::

    NAME.chunked/
      header.json                 n, nnz, index dtype, chunk row ranges (below)
      chunk-00000.indptr.npy      int64[rows + 1], local: starts at 0, ends at the chunk's nnz
      chunk-00000.indices.npy     int64 (or int32) [nnz of the chunk]: GLOBAL column ids,
                                  strictly increasing inside each row (canonical CSR)
      chunk-00000.data.npy        float64[nnz of the chunk], only when "weighted"
      chunk-00001.indptr.npy ...

``header.json``::

    {"format": "partplan-chunked-csr", "version": 1,
     "n": 1024, "nnz": 30000, "index_dtype": "int64", "weighted": false,
     "directed": false, "name": "rmat-s10-ef16-seed0",
     "chunks": [{"row_lo": 0, "row_hi": 512, "nnz": 15000,
                 "indptr": "chunk-00000.indptr.npy", "indices": "chunk-00000.indices.npy",
                 "data": null}, ...]}

Chunk ``c`` holds rows ``[row_lo, row_hi)`` of ``A``; the chunks cover
``0..n`` in order without gap or overlap. The ``.npy`` files are plain numpy
arrays, so a reader can memory-map them or read a row slice at a byte offset
(:func:`read_chunk_rows` reads exactly the bytes of the rows it is asked for).

Every header field is checked before it is used (:func:`chunk_info`):
hostile sizes, chunk ranges that do not cover ``0..n`` or are not monotone,
file names that leave the directory, per-chunk nnz that do not add up; every
``.npy`` header is checked against the header and the file size before
anything is allocated, and the arrays read are checked (indptr monotone from 0
to the chunk's nnz, column ids in ``[0, n)`` and increasing inside rows).
Each problem is one :class:`~partplan.errors.GraphFormatError` naming the file
and the field.

Writers (:func:`write_chunked`, and :func:`partplan.datasets.chunked_gen.rmat_chunked`)
write into a temporary sibling directory and rename it into place.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import _atomic
from .._atomic import clean_stale, discard_temp, make_parents, make_temp_dir, release_temp
from .._kernels import HAVE_NUMBA, njit
from ..errors import GraphFormatError
from ..graph import Graph
from ._common import check_budget, drops_vertex_weights, npy_claim_problem, npy_header

FORMAT = "partplan-chunked-csr"
VERSION = 1
HEADER = "header.json"
INDEX_DTYPES = {"int64": np.dtype("<i8"), "int32": np.dtype("<i4")}
#: largest n / nnz a header may claim (2**48: far above any graph this
#: project plans, far below int64 overflow in offset arithmetic)
MAX_COUNT = 1 << 48
#: most chunks a header may list
MAX_CHUNKS = 1 << 20
MAX_NAME_CHARS = 4096   # a graph name: printed on every summary line
_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]+\.npy$")
_READ_BLOCK = 1 << 22   # bytes per read while streaming (fingerprint)


@dataclass(frozen=True)
class ChunkMeta:
    """One chunk of a chunked graph: rows ``[row_lo, row_hi)``, ``nnz``
    nonzeros, and the paths of its arrays (``data`` None for a pattern)."""

    index: int
    row_lo: int
    row_hi: int
    nnz: int
    indptr: Path
    indices: Path
    data: Path | None


@dataclass(frozen=True)
class ChunkInfo:
    """The checked header of a chunked graph (:func:`chunk_info`)."""

    path: Path
    n: int
    nnz: int
    index_dtype: np.dtype
    weighted: bool
    directed: bool
    name: str
    chunks: tuple[ChunkMeta, ...]

    @property
    def header(self) -> Path:
        """The header file (``path/header.json``), for error messages."""
        return self.path / HEADER

    @property
    def row_bounds(self) -> np.ndarray:
        """int64[chunks + 1]: first row of each chunk, then n."""
        return np.array([c.row_lo for c in self.chunks] + [self.n], dtype=np.int64)

    @property
    def chunk_nnz(self) -> np.ndarray:
        """int64[chunks]: nonzeros per chunk."""
        return np.array([c.nnz for c in self.chunks], dtype=np.int64)


@dataclass
class CSRRows:
    """Rows ``[lo, hi)`` of A: ``indptr`` int64[hi - lo + 1] from 0,
    ``indices`` int64 GLOBAL column ids, ``data`` float64 or None."""

    lo: int
    hi: int
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray | None

    @property
    def nnz(self) -> int:
        return int(self.indices.size)


def is_chunked(path) -> bool:
    """True when ``path`` is a directory holding a chunked graph's ``header.json``."""
    p = Path(path)
    return p.is_dir() and (p / HEADER).is_file()


# ----------------------------------------------------------------------------- header
def _int(h: dict, key: str, where: Path, field: str, lo: int = 0, hi: int = MAX_COUNT) -> int:
    v = h.get(key)
    if isinstance(v, bool) or not isinstance(v, int):
        raise GraphFormatError(f"must be an integer, got {v!r}", where, field=field)
    if not lo <= v <= hi:
        raise GraphFormatError(f"= {v} is out of range [{lo}, {hi}]", where, field=field)
    return v


def chunk_info(path) -> ChunkInfo:
    """Read and check ``path/header.json`` (no array is read).

    Raises GraphFormatError naming ``header.json`` and the field on: no such
    directory or header, invalid JSON, wrong format / version, n or nnz not
    integers in ``[0, 2**48]``, an unknown index dtype, chunks not a
    non-empty list (or more than 2**20 of them), a chunk's row range out of
    order / not covering ``0..n`` contiguously, per-chunk nnz not adding up
    to nnz, a file name that is not a plain ``*.npy`` name inside the
    directory, a weighted graph without data files (or a pattern with them).
    """
    p = Path(path)
    hf = p / HEADER
    if not p.is_dir():
        raise GraphFormatError("not a chunked graph directory (" + (
            "a file: a chunked graph is a directory; `partplan convert FILE DIR --chunks C` writes one"
            if p.exists() else "no such directory") + ")", p)
    if not hf.is_file():
        raise GraphFormatError(f"missing {HEADER} (not a chunked graph, or an interrupted write)", p)
    from ..errors import PlanError
    from ._common import open_regular
    from .trust import load_json
    fd, st = open_regular(hf, follow=False)
    with os.fdopen(fd, "rb") as fh:
        if st.st_size > 64 << 20:
            raise GraphFormatError(f"header is {st.st_size} bytes (more than 64 MiB)", hf)
        raw = fh.read(st.st_size + 1)
    try:   # nesting depth, integer length and NaN bounded before parsing
        h = load_json(raw, "header")
    except PlanError as exc:
        raise GraphFormatError(str(exc).removeprefix("header: "), hf) from None
    if not isinstance(h, dict):
        raise GraphFormatError("must be a JSON object", hf)
    if h.get("format") != FORMAT:
        raise GraphFormatError(f"must be {FORMAT!r}, got {h.get('format')!r}", hf, field="format")
    if h.get("version") != VERSION:
        raise GraphFormatError(f"= {h.get('version')!r} is not supported (supported: {VERSION})", hf,
                               field="version")
    n = _int(h, "n", hf, "n")
    nnz = _int(h, "nnz", hf, "nnz")
    dt = h.get("index_dtype")
    if not isinstance(dt, str) or dt not in INDEX_DTYPES:
        raise GraphFormatError(f"= {dt!r} is not one of {', '.join(INDEX_DTYPES)}", hf, field="index_dtype")
    for key in ("weighted", "directed"):
        if not isinstance(h.get(key), bool):
            raise GraphFormatError(f"must be true or false, got {h.get(key)!r}", hf, field=key)
    name = h.get("name", "graph")
    if not isinstance(name, str):
        raise GraphFormatError(f"must be a string, got {type(name).__name__}", hf, field="name")
    if len(name) > MAX_NAME_CHARS:
        raise GraphFormatError(f"is {len(name)} characters, more than the {MAX_NAME_CHARS} a graph name may have",
                               hf, field="name")
    from .trust import printable
    name = printable(name)    # printed by every command: control characters shown escaped, never obeyed
    if dt == "int32" and n > np.iinfo(np.int32).max:
        raise GraphFormatError(f"int32 cannot hold column ids of n = {n} vertices", hf, field="index_dtype")
    raw = h.get("chunks")
    if not isinstance(raw, list) or not raw or len(raw) > MAX_CHUNKS:
        raise GraphFormatError(f"must be a list of 1..{MAX_CHUNKS} chunk objects", hf, field="chunks")
    weighted = h["weighted"]
    chunks = []
    prev_hi, total = 0, 0
    for i, c in enumerate(raw):
        f = f"chunks[{i}]"
        if not isinstance(c, dict):
            raise GraphFormatError("must be an object", hf, field=f)
        lo = _int(c, "row_lo", hf, f + ".row_lo", 0, n)
        hi = _int(c, "row_hi", hf, f + ".row_hi", 0, n)
        if lo != prev_hi:
            raise GraphFormatError(f"= {lo} but the previous chunk ends at row {prev_hi} (chunks must cover "
                                   f"0..n in order, without gap or overlap)", hf, field=f + ".row_lo")
        if hi < lo:
            raise GraphFormatError(f"= {hi} is below row_lo = {lo} (row ranges must not decrease)", hf,
                                   field=f + ".row_hi")
        cnnz = _int(c, "nnz", hf, f + ".nnz", 0, nnz)
        if hi == lo and cnnz:   # no row to hold them: the readers skip such a chunk, the fingerprint would not
            raise GraphFormatError(f"= {cnnz} but the chunk has no rows (row_lo = row_hi = {lo})", hf,
                                   field=f + ".nnz")
        files = {}
        for key in ("indptr", "indices", "data"):
            v = c.get(key)
            if key == "data" and not weighted:
                if v is not None:
                    raise GraphFormatError("must be null for a pattern graph (weighted: false)", hf,
                                           field=f"{f}.data")
                files[key] = None
                continue
            if not isinstance(v, str) or not _NAME_RE.match(v) or v in (".npy", "..npy"):
                raise GraphFormatError(f"= {v!r} is not a plain *.npy file name inside the directory", hf,
                                       field=f"{f}.{key}")
            files[key] = p / v
        chunks.append(ChunkMeta(i, lo, hi, cnnz, files["indptr"], files["indices"], files["data"]))
        prev_hi, total = hi, total + cnnz
    if prev_hi != n:
        raise GraphFormatError(f"the last chunk ends at row {prev_hi}, not at n = {n}", hf,
                               field=f"chunks[{len(raw) - 1}].row_hi")
    if total != nnz:
        for c in chunks:   # name the chunk whose nnz its own indptr contradicts, when one does
            rows = c.row_hi - c.row_lo
            last = int(_npy_slice(c.indptr, np.dtype("<i8"), rows + 1, rows, 1, "indptr")[0])
            if last != c.nnz:
                raise GraphFormatError(f"chunks[{c.index}].nnz = {c.nnz}, but its indptr ends at {last}", hf,
                                       field=f"chunks[{c.index}].nnz")
        raise GraphFormatError(f"the chunks hold {total} nonzeros, the header says nnz = {nnz}", hf, field="nnz")
    return ChunkInfo(p, n, nnz, INDEX_DTYPES[dt], weighted, h["directed"], name, tuple(chunks))


# ----------------------------------------------------------------------------- arrays
def _npy_slice(f: Path, dtype: np.dtype, length: int, start: int, count: int, field: str) -> np.ndarray:
    """``count`` elements from ``start`` of the 1-D .npy file ``f``, whose
    header must say ``dtype`` and ``length`` (checked against the file size
    before reading). Reads only those bytes (no memory map)."""
    from ._common import open_regular
    fd, _ = open_regular(f, follow=False, error=lambda problem: GraphFormatError(
        "file is missing (the header lists it)" if problem == "file not found" else problem, f, field=field))
    try:
        with os.fdopen(fd, "rb") as fh:   # a regular file of the folder itself: never through a link
            shape, dt, hl = npy_header(fh)
            size = os.fstat(fh.fileno()).st_size
            problem = npy_claim_problem(shape, dt, size - hl)
            if problem:
                raise GraphFormatError(problem, f, field=field)
            if len(shape) != 1 or shape[0] != length:
                raise GraphFormatError(f"shape {tuple(shape)} but the header needs ({length},)", f, field=field)
            if dt != dtype:
                raise GraphFormatError(f"dtype {dt} but the header needs {dtype}", f, field=field)
            fh.seek(hl + start * dtype.itemsize)
            out = np.fromfile(fh, dtype=dtype, count=count)
    except GraphFormatError:
        raise
    except (ValueError, OSError, EOFError, SyntaxError) as exc:
        raise GraphFormatError(f"not a readable .npy array ({exc})", f, field=field) from None
    if out.size != count:
        raise GraphFormatError(f"truncated: read {out.size} of {count} values", f, field=field)
    return out


def _read_chunk_part(info: ChunkInfo, c: ChunkMeta, lo: int, hi: int, *, check: bool = True,
                     held: int = 0) -> CSRRows:
    """Rows [lo, hi) (inside chunk c) as CSRRows with global column ids. ``held``: bytes the caller
    already holds of this read; with this part's they must fit the memory budget, checked from the
    row offsets before the columns are read (a sparse .npy file is as long as its header says)."""
    rows = c.row_hi - c.row_lo
    check_budget(held + _range_bytes(info, hi - lo, 0), c.indptr, f"rows [{lo}, {hi}) of the chunked graph",
                 field="indptr")
    ip = _npy_slice(c.indptr, np.dtype("<i8"), rows + 1, lo - c.row_lo, hi - lo + 1, "indptr")
    if check:
        # the whole chunk's indptr endpoints: read the first and last value once
        first = _npy_slice(c.indptr, np.dtype("<i8"), rows + 1, 0, 1, "indptr")[0]
        last = _npy_slice(c.indptr, np.dtype("<i8"), rows + 1, rows, 1, "indptr")[0]
        if first != 0 or last != c.nnz:
            raise GraphFormatError(f"must start at 0 and end at the chunk's nnz = {c.nnz} (got {first} .. {last})",
                                   c.indptr, field="indptr")
        if ip.size > 1 and (np.any(np.diff(ip) < 0) or ip[0] < 0 or ip[-1] > c.nnz):
            raise GraphFormatError("offsets are not monotone within [0, nnz]", c.indptr, field="indptr")
    a, b = int(ip[0]), int(ip[-1])
    check_budget(held + _range_bytes(info, hi - lo, b - a), c.indices,
                 f"rows [{lo}, {hi}) of the chunked graph ({b - a:,} nonzeros)", field="indices")
    idx = _npy_slice(c.indices, info.index_dtype, c.nnz, a, b - a, "indices").astype(np.int64, copy=False)
    data = None
    if info.weighted:
        data = _npy_slice(c.data, np.dtype("<f8"), c.nnz, a, b - a, "data")
        if check and not np.all(np.isfinite(data)):
            raise GraphFormatError("holds NaN or inf", c.data, field="data")
    ip = ip - a
    if check and idx.size:
        if idx.min() < 0 or idx.max() >= info.n:
            e = int(np.flatnonzero((idx < 0) | (idx >= info.n))[0])
            raise GraphFormatError(f"column id {int(idx[e])} (entry {a + e}) out of range [0, {info.n})",
                                   c.indices, field="indices")
        inc = np.diff(idx) > 0
        starts = ip[1:-1]
        inc[starts[(starts > 0) & (starts < idx.size)] - 1] = True  # a row start may go down
        if not inc.all():
            e = int(np.flatnonzero(~inc)[0]) + 1
            raise GraphFormatError(f"column ids are not strictly increasing inside a row (entry {a + e}): "
                                   f"not canonical CSR", c.indices, field="indices")
    return CSRRows(lo, hi, ip, idx, data)


def _range_bytes(info: ChunkInfo, rows: int, nnz: int) -> int:
    """Bytes of ``rows`` rows holding ``nnz`` nonzeros as read: int64 offsets and column ids, the
    file's ids before their conversion, float64 values."""
    return 8 * (rows + 1) + nnz * (8 + info.index_dtype.itemsize + (8 if info.weighted else 0))


def read_chunk_rows(path, lo: int, hi: int, *, info: ChunkInfo | None = None, check: bool = True) -> CSRRows:
    """Rows ``[lo, hi)`` of a chunked graph (global column ids), reading only
    the chunks (and inside them only the bytes) those rows live in.

    ``info`` : a :func:`chunk_info` result to reuse (else the header is read).
    ``check`` : check the arrays read (indptr monotone, ids in range and
    increasing inside rows, finite data); the header is always checked.
    Memory: O(rows + nnz of the range), checked against the memory budget
    (:func:`partplan._budget.memory_budget`: SizeLimitError) before each read.
    """
    info = info or chunk_info(path)
    if isinstance(lo, bool) or isinstance(hi, bool) or not (0 <= int(lo) <= int(hi) <= info.n):
        raise GraphFormatError(f"row range [{lo}, {hi}) is not inside [0, {info.n}]", info.path / HEADER,
                               field="n")
    lo, hi = int(lo), int(hi)
    parts, held = [], 0
    for c in info.chunks:
        a, b = max(lo, c.row_lo), min(hi, c.row_hi)
        if a < b:
            parts.append(_read_chunk_part(info, c, a, b, check=check, held=held))
            held += _range_bytes(info, b - a, parts[-1].nnz)
    if not parts:
        return CSRRows(lo, hi, np.zeros(hi - lo + 1, np.int64), np.zeros(0, np.int64),
                       np.zeros(0) if info.weighted else None)
    if len(parts) == 1:
        r = parts[0]
        return CSRRows(lo, hi, r.indptr, r.indices, r.data)
    check_budget(2 * held, info.path, f"rows [{lo}, {hi}) of the chunked graph, joined from {len(parts)} chunks")
    offs = np.cumsum([0] + [q.nnz for q in parts])
    indptr = np.concatenate([parts[0].indptr[:1]] + [q.indptr[1:] + o for q, o in zip(parts, offs)])
    idx = np.concatenate([q.indices for q in parts])
    data = np.concatenate([q.data for q in parts]) if info.weighted else None
    return CSRRows(lo, hi, indptr, idx, data)


def raise_not_symmetric(info: "ChunkInfo") -> None:
    """The header says ``"directed": false`` (the matrix is symmetric), and its chunks are not: one
    GraphFormatError naming the header's field (a plan would carry the wrong flag, and validate refuse it)."""
    raise GraphFormatError("\"directed\": false, but the chunks' matrix is not symmetric (set it to true, "
                           "or convert the graph with --symmetrize)", info.header, field="directed")


def read_chunked(path, *, symmetrize: bool = False, self_loops: str = "keep", dedupe: bool = True,
                 drop_isolated: bool = False, name: str | None = None) -> Graph:
    """The whole chunked graph as one in-memory :class:`Graph` (for graphs
    that fit; the distributed plan build reads chunks instead). Options as
    :func:`partplan.io.read_graph` (applied by :meth:`Graph.normalize` only
    when they change something)."""
    info = chunk_info(path)
    r = read_chunk_rows(path, 0, info.n, info=info)
    g = Graph(r.indptr, r.indices, r.data, directed=info.directed, name=name or info.name)
    if not info.directed and not g.is_symmetric():
        raise_not_symmetric(info)
    if symmetrize or self_loops != "keep" or drop_isolated:
        g = g.normalize(symmetrize=symmetrize, self_loops=self_loops, dedupe=dedupe, drop_isolated=drop_isolated)
    return g


def row_nnz_sums(info: ChunkInfo, block_rows: int = 1 << 20) -> dict:
    """What the balance floor needs of a chunked graph's rows, read chunk by chunk from the indptr
    arrays alone (``block_rows`` rows at a time): ``heaviest`` (the first row of the most nonzeros),
    ``max_nnz``, ``empty`` (rows without nonzeros) and ``nnz``."""
    best, best_row, empty = -1, 0, 0
    for c in info.chunks:
        rows = c.row_hi - c.row_lo
        for lo in range(0, rows, block_rows):
            cnt = min(block_rows, rows - lo)
            d = np.diff(_npy_slice(c.indptr, np.dtype("<i8"), rows + 1, lo, cnt + 1, "indptr"))
            if d.size and int(d.min()) < 0:
                raise GraphFormatError("offsets are not monotone", c.indptr, field="indptr")
            empty += int(np.count_nonzero(d == 0))
            if d.size and int(d.max()) > best:
                best, best_row = int(d.max()), c.row_lo + lo + int(np.argmax(d))
    return {"heaviest": best_row, "max_nnz": max(best, 0), "empty": empty, "nnz": info.nnz}


def chunked_fingerprint(path, *, info: ChunkInfo | None = None) -> str:
    """:attr:`Graph.fingerprint` of a chunked graph (sha256 of n, the global
    indptr and the indices as little-endian int64), streamed chunk by chunk
    in blocks of 4 MiB: memory O(block), never the whole graph. Reads every
    chunk once (indptr files, then indices files)."""
    info = info or chunk_info(path)
    h = hashlib.sha256()
    h.update(np.int64(info.n).astype("<i8").tobytes())
    step = _READ_BLOCK // 8
    off = 0
    for i, c in enumerate(info.chunks):
        rows = c.row_hi - c.row_lo
        first = 0 if i == 0 else 1          # the global indptr has one leading 0
        for s in range(first, rows + 1, step):
            blk = _npy_slice(c.indptr, np.dtype("<i8"), rows + 1, s, min(step, rows + 1 - s), "indptr")
            h.update((blk + off).astype("<i8").tobytes())
        off += c.nnz
    if info.n == 0 and not info.chunks:
        h.update(np.zeros(1, "<i8").tobytes())
    for c in info.chunks:
        for s in range(0, c.nnz, step):
            blk = _npy_slice(c.indices, info.index_dtype, c.nnz, s, min(step, c.nnz - s), "indices")
            h.update(blk.astype("<i8").tobytes())
    return h.hexdigest()


def chunked_matrix_fingerprint(info: ChunkInfo, fingerprint: str) -> str:
    """:attr:`Graph.matrix_fingerprint` of a chunked graph whose pattern
    fingerprint is ``fingerprint`` (:func:`chunked_fingerprint`): the same
    string for an unweighted graph or one whose values are all 1, else the
    hash of that fingerprint and the values (little-endian float64, CSR order),
    streamed in blocks of 4 MiB (one pass to see whether every value is 1,
    a second to hash them)."""
    if not info.weighted:
        return fingerprint
    step = _READ_BLOCK // 8

    def blocks():
        for c in info.chunks:
            if c.data is None:
                continue
            for s in range(0, c.nnz, step):
                yield _npy_slice(c.data, np.dtype("<f8"), c.nnz, s, min(step, c.nnz - s), "data")

    if all(bool(np.all(b == 1.0)) for b in blocks()):
        return fingerprint
    h = hashlib.sha256(b"partplan-matrix-v1:")
    h.update(fingerprint.encode())
    for b in blocks():
        h.update(np.asarray(b, dtype="<f8").tobytes())
    return h.hexdigest()


# ----------------------------------------------------------------------------- write
def chunk_file_names(i: int) -> dict[str, str]:
    return {k: f"chunk-{i:05d}.{k}.npy" for k in ("indptr", "indices", "data")}


class ChunkedWriter:
    """Write a chunked graph chunk by chunk into a temporary sibling
    directory; :meth:`commit` writes the header and renames the directory
    into place (replacing an existing chunked graph; refusing any other
    existing path). Used by :func:`write_chunked` and the streaming R-MAT
    generator. ``abort`` (or an exception inside ``with``) removes it."""

    def __init__(self, path, n: int, *, weighted: bool, directed: bool, name: str,
                 index_dtype: str = "int64"):
        self.path = Path(path)
        if self.path.exists() and not is_chunked(self.path):
            if self.path.is_file() or any(self.path.iterdir()):
                raise GraphFormatError("exists and is not a chunked graph directory; refusing to overwrite it",
                                       self.path)
        if index_dtype not in INDEX_DTYPES:
            raise GraphFormatError(f"index_dtype must be one of {', '.join(INDEX_DTYPES)}", self.path,
                                   field="index_dtype")
        make_parents(self.path)
        clean_stale(self.path)
        self.tmp = make_temp_dir(self.path)   # locked while this process writes it
        self.n, self.weighted, self.directed, self.name = int(n), bool(weighted), bool(directed), str(name)
        self.index_dtype = index_dtype
        self.chunks: list[dict] = []
        self.next_row = 0

    def add(self, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray | None = None) -> None:
        """Append the next chunk: rows ``[next_row, next_row + len(indptr) - 1)``, each row's column
        ids strictly increasing (canonical CSR, what the reader requires: duplicates merged)."""
        i = len(self.chunks)
        names = chunk_file_names(i)
        rows = int(indptr.size) - 1
        ind = np.asarray(indices)
        if ind.size > 1:
            starts = np.zeros(ind.size, bool)
            starts[np.asarray(indptr[:-1], dtype=np.int64)[np.diff(indptr) > 0] - int(indptr[0])] = True
            bad = np.flatnonzero((np.diff(ind) <= 0) & ~starts[1:])
            if bad.size:
                row = self.next_row + int(np.searchsorted(np.asarray(indptr) - int(indptr[0]), bad[0] + 1,
                                                          side="right")) - 1
                raise GraphFormatError(f"row {row} repeats a column (or is not sorted): a chunked graph holds "
                                       f"canonical CSR rows; merge the duplicates first", self.path,
                                       field="indices")
        try:
            np.save(self.tmp / names["indptr"], np.ascontiguousarray(indptr, dtype="<i8"))
            np.save(self.tmp / names["indices"],
                    np.ascontiguousarray(indices, dtype=INDEX_DTYPES[self.index_dtype]))
            if self.weighted:
                np.save(self.tmp / names["data"], np.ascontiguousarray(data, dtype="<f8"))
        except OSError as exc:   # a full disk, a quota, the folder gone: one error, the old graph untouched
            from .. import _atomic
            from ..errors import OutputPathError
            if exc.errno in _atomic._NO_SPACE:
                raise _atomic._space_error(self.path, exc) from None
            raise OutputPathError(f"{self.path}: chunk {i} could not be written ({exc.strerror or exc})") from None
        self.chunks.append({"row_lo": self.next_row, "row_hi": self.next_row + rows, "nnz": int(indices.size),
                            "indptr": names["indptr"], "indices": names["indices"],
                            "data": names["data"] if self.weighted else None})
        self.next_row += rows

    def commit(self) -> Path:
        h = {"format": FORMAT, "version": VERSION, "n": self.n, "nnz": int(sum(c["nnz"] for c in self.chunks)),
             "index_dtype": self.index_dtype, "weighted": self.weighted, "directed": self.directed,
             "name": self.name, "chunks": self.chunks}
        with open(self.tmp / HEADER, "w") as fh:
            json.dump(h, fh, indent=1)
            fh.write("\n")
        os.chmod(self.tmp, 0o755)
        chunk_info(self.tmp)            # what we wrote must read back
        try:
            if os.path.lexists(self.path):
                _atomic.swap_dir(self.tmp, self.path)   # the old graph stays in place on any failure
            else:
                os.rename(self.tmp, self.path)
        except OSError as exc:
            from ..errors import OutputPathError
            from .trust import printable
            raise OutputPathError(f"{self.path}: the new chunked graph could not be moved into place "
                                  f"({printable(exc.strerror or exc)}); the old one, if any, is unchanged") from None
        release_temp(self.tmp)
        return self.path

    def abort(self) -> None:
        discard_temp(self.tmp)

    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        if et is not None:
            self.abort()
        return False


def chunk_bounds_by_nnz(indptr: np.ndarray, chunks: int) -> np.ndarray:
    """int64[chunks + 1] row boundaries splitting rows into ``chunks``
    contiguous ranges of about equal nonzeros (monotone, 0 .. n); every chunk holds at least one
    row when there are at least ``chunks`` rows (a row holding most of the nonzeros would
    otherwise leave the chunks after it empty).

    >>> chunk_bounds_by_nnz(np.array([0, 1, 2, 12]), 2).tolist()      # the last row: 10 of 12
    [0, 2, 3]
    """
    n = indptr.size - 1
    nnz = int(indptr[-1])
    targets = (np.arange(chunks + 1, dtype=np.float64) * nnz / max(chunks, 1))
    b = np.searchsorted(indptr, targets, side="left").astype(np.int64)
    b = np.clip(b, 0, n)
    b[0], b[-1] = 0, n
    b = np.maximum.accumulate(b)
    if 0 < chunks <= n:     # at least one row each: within [j, n - chunks + j], then strictly increasing
        j = np.arange(chunks + 1, dtype=np.int64)
        b = np.maximum.accumulate(np.clip(b, j, n - chunks + j) - j) + j
    return b


def chunk_split(chunk_nnz: np.ndarray, rows: np.ndarray, nprocs: int) -> np.ndarray:
    """int64[nprocs + 1]: the first chunk of each of ``nprocs`` processes —
    contiguous runs balanced by nonzeros + rows, every process at least one
    chunk (needs at least ``nprocs`` chunks)."""
    c = chunk_nnz.size
    w = np.cumsum(chunk_nnz.astype(np.float64) + rows)
    cut = np.searchsorted(w, w[-1] * np.arange(1, nprocs) / nprocs, side="left") + 1 if c else np.zeros(0, int)
    j = np.arange(1, nprocs)
    cut = np.clip(cut, j, c - nprocs + j)
    cut = np.maximum.accumulate(cut - j) + j   # strictly increasing: every process at least one chunk
    return np.concatenate(([0], cut, [c])).astype(np.int64)


def process_rows(info: ChunkInfo, nprocs: int) -> np.ndarray:
    """int64[nprocs + 1]: the rows ``[b[u], b[u+1])`` process u of ``nprocs``
    reads — whole chunks (:func:`chunk_split` over the chunks that hold rows, so no process gets
    only empty ones) when at least ``nprocs`` chunks hold rows, equal row ranges otherwise. The
    distributed plan build and the MPI partitioner read their graphs this way."""
    rows = np.diff(info.row_bounds)
    full = np.flatnonzero(rows > 0)
    if full.size >= nprocs:
        first = chunk_split(info.chunk_nnz[full], rows[full], nprocs)[:-1]      # among the chunks with rows
        return np.append(info.row_bounds[full[first]], info.n).astype(np.int64)
    return (np.arange(nprocs + 1, dtype=np.int64) * info.n) // nprocs


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer on uint64 (wrapping arithmetic)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit
def _pattern_sums(i, j, out):
    """Items 0-3 of :func:`symmetry_hash_sums` (the pattern's) in one pass: the
    splitmix64 finalizer and the sums in wrapping uint64 arithmetic, like the
    vectorized form of the values' items."""
    s0 = np.uint64(0x9E3779B97F4A7C15)
    s1 = np.uint64(0xD1B54A32D192ED03)
    c1 = np.uint64(0xBF58476D1CE4E5B9)
    c2 = np.uint64(0x94D049BB133111EB)
    r30, r27, r31 = np.uint64(30), np.uint64(27), np.uint64(31)
    acc = np.zeros(4, np.uint64)
    for e in range(i.size):
        x, y = np.uint64(i[e]), np.uint64(j[e])
        for q in range(4):
            a = x if q < 2 else y
            b = y if q < 2 else x
            h = a ^ (s0 if q % 2 == 0 else s1)
            for _ in range(2):
                h = h ^ (h >> r30)
                h = h * c1
                h = h ^ (h >> r27)
                h = h * c2
                h = h ^ (h >> r31)
                if _ == 0:
                    h = h + b
            acc[q] += h
    for q in range(4):
        out[q] = acc[q]


def symmetry_hash_sums(i: np.ndarray, j: np.ndarray, w: np.ndarray | None) -> list[int]:
    """Whether a graph read in slices equals its transpose, without building
    it: ``[Σ h1(i,j), Σ h2(i,j), Σ h1(j,i), Σ h2(j,i)]`` mod 2**64 over the
    nonzeros (i, j), then the same four with the value bits of ``w`` mixed
    in (8 Python ints). Sums are order-independent, so processes add theirs
    (mod 2**64); the pattern is symmetric when items 0-1 equal items 2-3, the
    values too when items 4-5 equal 6-7 (a false "equal" needs a 2^-128
    collision). Keyed by two fixed seeds. Values compare as
    :func:`numpy.array_equal` does: −0.0 equals 0.0, and a NaN equals
    nothing (each NaN value adds 1 to item 4, so the sums differ)."""
    if w is None and HAVE_NUMBA:      # no values: the value sums are the pattern's
        sums = np.zeros(4, np.uint64)
        _pattern_sums(np.ascontiguousarray(i, np.int64), np.ascontiguousarray(j, np.int64), sums)
        out = [int(x) for x in sums]
        return out + out
    out = []
    with np.errstate(over="ignore"):
        iu, ju = i.astype(np.uint64), j.astype(np.uint64)
        for a, b in ((iu, ju), (ju, iu)):
            for seed in (0x9E3779B97F4A7C15, 0xD1B54A32D192ED03):
                out.append(int(_mix(_mix(a ^ np.uint64(seed)) + b).sum(dtype=np.uint64)))
        if w is None:                 # no values: the value sums are the pattern's
            return out + out
        wf = np.ascontiguousarray(w, dtype=np.float64) + 0.0     # -0.0 -> 0.0
        wb = wf.view(np.uint64)
        for a, b in ((iu, ju), (ju, iu)):
            for seed in (0x9E3779B97F4A7C15, 0xD1B54A32D192ED03):
                out.append(int(_mix(_mix(_mix(a ^ np.uint64(seed)) + b) + wb).sum(dtype=np.uint64)))
        out[4] = (out[4] + int(np.count_nonzero(np.isnan(wf)))) % (1 << 64)
    return out


@drops_vertex_weights("a chunked graph")
def write_chunked(graph: Graph, path, chunks: int = 4, *, index_dtype: str = "int64") -> Path:
    """Write ``graph`` as a chunked graph directory of ``chunks`` row chunks
    (about equal nonzeros each); atomic (temporary directory + rename).
    Graph metadata kept: name, directed, weighted; ``ids`` and vertex weights
    are not stored."""
    if isinstance(chunks, bool) or not isinstance(chunks, (int, np.integer)) or not 1 <= chunks <= MAX_CHUNKS:
        raise GraphFormatError(f"chunks must be an integer in [1, {MAX_CHUNKS}], got {chunks!r}", path,
                               field="chunks")
    if chunks > max(graph.n, 1):      # a chunk per row at most: more would be empty files
        raise GraphFormatError(f"chunks = {chunks} is more than the graph's {graph.n} rows (a chunk holds at "
                               f"least one row)", path, field="chunks")
    b = chunk_bounds_by_nnz(graph.indptr, int(chunks))
    with ChunkedWriter(path, graph.n, weighted=graph.data is not None, directed=graph.directed,
                       name=graph.name, index_dtype=index_dtype) as w:
        for c in range(int(chunks)):
            lo, hi = int(b[c]), int(b[c + 1])
            a, z = int(graph.indptr[lo]), int(graph.indptr[hi])
            w.add(graph.indptr[lo:hi + 1] - a, graph.indices[a:z],
                  None if graph.data is None else graph.data[a:z])
        return w.commit()


__all__ = ["ChunkInfo", "ChunkMeta", "CSRRows", "chunk_info", "read_chunk_rows", "read_chunked",
           "write_chunked", "chunked_fingerprint", "is_chunked", "ChunkedWriter", "chunk_bounds_by_nnz",
           "chunk_split", "process_rows", "symmetry_hash_sums"]
