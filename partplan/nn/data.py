"""Node-classification data for :mod:`partplan.nn.train`.

A data file ``D.npz`` holds, in the graph's original vertex order:

========== ================ ====================================================
``x``      float32/64 n × f node features
``y``      int64 n          class of each vertex (any value where no mask is set)
``train_mask`` / ``val_mask`` / ``test_mask``  bool n
========== ================ ====================================================

:func:`check_data` validates a file once, before a job starts (keys, shapes,
dtypes, NaN / inf features, labels of masked rows in ``[0, classes)``,
overlapping masks, stored members' CRC-32), naming the file and the field.
:func:`read_rows` gives one rank only its rows: from members stored uncompressed
(``np.savez``) it reads, straight out of the zip, only the windows of
:data:`partplan._rowio.WINDOW_BYTES` that hold one of its rows, and of each only the
bytes from its first row to its last (a rank whose rows are contiguous reads
``rows × f`` values; scattered rows make it read most windows, but it never holds
more than its rows and one window); compressed members (``np.savez_compressed``) are inflated as a
stream, a chunk of rows at a time, keeping only the rank's rows (said in
:func:`check_data`'s report as ``mmap: False``: every rank then spends the
CPU time of inflating the whole member, but never its memory).

Budgets: every member's shape and dtype are read from its ``.npy``
header and checked against ``n`` and against the zip's own record of the
member's size before any data is read; what one process keeps — the rows it
reads × the row's bytes — must fit :func:`data_budget`:
``$PARTPLAN_MAX_BYTES`` (or 80 % of the memory this process may use) shared
by the ranks on this machine (``$LOCAL_WORLD_SIZE``); :func:`check_data` checks an
even share of the ``$WORLD_SIZE`` processes (or the caller's ``keep_rows``) from
the header, and every read its own rows exactly. A small compressed file
that would inflate to gigabytes is refused with one :class:`DataError`
before anything is inflated.

A PyTorch Geometric ``Data`` saved with ``torch.save`` (``D.pt``) is read the
same way: its ``x``, ``y`` and the three masks, loaded safely
(:func:`partplan.io.pt.load_pt`: ``weights_only=True``, only PyG's classes
allowed) and checked by the same rules; a ``.pt`` file is read whole (no
memory map), once per process for repeated :func:`read_rows` calls.

:func:`labeled_dataset` builds such a file for a registered labeled graph
(polblogs); :func:`random_data` makes deterministic synthetic data for timing.
"""
from __future__ import annotations

import os
import zipfile
import zlib
from tokenize import TokenError
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..errors import PartplanError

KEYS = ("x", "y", "train_mask", "val_mask", "test_mask")
MASKS = ("train_mask", "val_mask", "test_mask")


def non_finite_problem(xs: np.ndarray, lo: int = 0) -> str | None:
    """What is wrong with feature rows ``xs`` (rows ``lo`` on of ``x``): its first non-finite entry,
    named by its index in ``x``; None when every entry is finite."""
    bad = ~np.isfinite(xs)
    if not bad.any():
        return None
    at = [int(i) for i in np.argwhere(bad)[0]]
    where = [at[0] + lo] + at[1:]
    return f"non-finite feature x[{', '.join(map(str, where))}] = {xs[tuple(at)]}"


def negative_label_problem(y: np.ndarray, labeled: np.ndarray) -> str | None:
    """The first vertex of a mask (``labeled``) whose label ``y`` is negative, else None."""
    neg = np.flatnonzero(labeled & (y < 0))
    return f"vertex {int(neg[0])} is in a mask but has label {int(y[neg[0]])} < 0" if neg.size else None


class DataError(PartplanError, ValueError):
    """A node-classification data file that cannot be used (names the file and field)."""

    def __init__(self, msg: str, path=None, field: str | None = None):
        where = f"{path}: " if path is not None else ""
        fld = f"field '{field}': " if field else ""
        super().__init__(f"{where}{fld}{msg}")


# ----------------------------------------------------------------------------- .pt (PyG Data)
_PT_CACHE: dict = {}


def _is_pt(p: Path) -> bool:
    return p.suffix.lower() == ".pt"


def _pt_arrays(p: Path) -> dict:
    """``x``, ``y`` and the masks of the PyG Data in ``p`` as numpy arrays (cached
    by path, size and mtime, so ranks in one process read the file once)."""
    return _pt_load(p)[0]


def _pt_load(p: Path) -> tuple[dict, Any]:
    """(:func:`_pt_arrays`, the Data itself) of ``p``, cached together (the arrays share the
    tensors' memory)."""
    from ..errors import GraphFormatError
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key in _PT_CACHE:
        return _PT_CACHE[key]
    from ..io.pt import load_pt
    try:
        obj = load_pt(p)
    except GraphFormatError as exc:
        raise DataError(exc.problem, p) from None
    if not hasattr(obj, "edge_index") and not hasattr(obj, "x"):
        raise DataError(f"a tensor of shape {tuple(obj.shape)}, not a PyG Data; a data file holds "
                        f"{', '.join(KEYS)}", p)
    out, missing = {}, []
    for k in KEYS:
        v = getattr(obj, k, None)
        if v is None:
            missing.append(k)
            continue
        if not hasattr(v, "detach"):
            raise DataError(f"must be a tensor, got {type(v).__name__}", p, k)
        try:
            out[k] = v.detach().cpu().numpy()
        except (RuntimeError, TypeError) as exc:  # sparse or other layouts
            raise DataError(f"cannot be read as a dense array ({exc})", p, k) from None
    if missing:
        raise DataError(f"missing key(s) {', '.join(missing)}; a data file holds {', '.join(KEYS)}", p)
    _PT_CACHE.clear()  # keep one file's arrays only
    _PT_CACHE[key] = (out, obj)
    return out, obj


# ----------------------------------------------------------------------------- npz members
def _check_crc(zf: zipfile.ZipFile, name: str, path) -> None:
    """Read a stored (uncompressed) member once through zipfile, which compares
    its CRC-32 at the end: the member is then memory-mapped, and a memory map
    reads the bytes without any check (a flipped value would be trained on).
    Sequential, 8 MiB at a time."""
    try:
        with zf.open(name) as fh:
            while fh.read(8 << 20):
                pass
    except _ZIP_ERRORS as exc:
        raise DataError(f"corrupt zip member ({exc})", path, name[:-4]) from None


# what zipfile raises on a damaged archive: a bad local header (BadZipFile), a seek before the
# start (OSError), a truncated stream (EOFError), bad deflate data (zlib.error), an unknown
# compression method (NotImplementedError), an "encrypted" flag (RuntimeError)
_ZIP_ERRORS = (zipfile.BadZipFile, EOFError, OSError, zlib.error, NotImplementedError, RuntimeError,
               UnicodeDecodeError)   # a member name flagged UTF-8 that is not


def _read(fh, nbytes: int, path, key: str) -> bytes:
    """``nbytes`` of a member stream (fewer at its end); a damaged compressed member (a bad CRC
    found at its end, bad deflate data) is one DataError naming the file and the key."""
    try:
        return fh.read(nbytes)
    except _ZIP_ERRORS as exc:
        raise DataError(f"corrupt zip member ({exc})", path, key) from None


def _member_header(zf: zipfile.ZipFile, name: str, path, crc: bool = False):
    """(shape, dtype, fortran, data offset in the file or None if compressed). ``crc``: read a stored
    member once to check its CRC-32 (:func:`check_data` does, once per job: a rank's own reads
    then take only its rows)."""
    info = zf.getinfo(name)
    try:   # opening a member reads its local header: a bad magic, another name, an offset past the end
        with zf.open(name) as fh:
            try:
                version = np.lib.format.read_magic(fh)
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                    np.lib.format.read_array_header_2_0
                shape, fortran, dtype = read(fh)
            except (ValueError, SyntaxError, TokenError, TypeError) as exc:   # numpy parses the header dict
                raise DataError(f"not a .npy array ({exc})", path, name[:-4]) from None
            hdr_len = fh.tell()
    except _ZIP_ERRORS as exc:  # bad CRC, truncated member, unknown compression, encrypted
        raise DataError(f"corrupt zip member ({exc})", path, name[:-4]) from None
    dt = np.dtype(dtype)
    if dt.hasobject:
        raise DataError(f"dtype {dt} holds Python objects; not a data array", path, name[:-4])
    if any(int(d) < 0 for d in shape):
        raise DataError(f"negative dimension in shape {tuple(shape)}", path, name[:-4])
    if info.file_size != hdr_len + _nbytes(tuple(shape), dt):
        raise DataError(f"the zip records {info.file_size} bytes for this member but its header says shape "
                        f"{tuple(shape)} of {dt} ({hdr_len + _nbytes(tuple(shape), dt)} bytes with the header); "
                        f"the file is corrupt or crafted", path, name[:-4])
    offset = None
    if info.compress_type == zipfile.ZIP_STORED:
        if crc:
            _check_crc(zf, name, path)
        with open(zf.filename, "rb") as raw:
            raw.seek(info.header_offset)
            local = raw.read(30)
            fn_len = int.from_bytes(local[26:28], "little")
            ex_len = int.from_bytes(local[28:30], "little")
            offset = info.header_offset + 30 + fn_len + ex_len + hdr_len
    return tuple(shape), np.dtype(dtype), bool(fortran), offset


STREAM_BYTES = 8 << 20   # bytes inflated at a time when a compressed member is streamed


def data_budget() -> int:
    """Bytes of data one process may hold: ``$PARTPLAN_MAX_BYTES`` (or 80 % of
    this process's memory, :func:`partplan.io._common.memory_budget`) divided
    by the ranks on this machine (``$LOCAL_WORLD_SIZE``, set by the launcher
    and torchrun; 1 otherwise)."""
    from ..errors import GraphFormatError
    from ..io._common import memory_budget
    try:
        total = memory_budget()
    except GraphFormatError as exc:
        raise DataError(exc.problem, field="PARTPLAN_MAX_BYTES") from None
    return total // _process_count("LOCAL_WORLD_SIZE")


def _process_count(name: str) -> int:
    """``$LOCAL_WORLD_SIZE`` / ``$WORLD_SIZE`` (set by the launcher and torchrun): at least 1, and 1
    when unset or not a count."""
    try:
        return max(1, int(os.environ.get(name, "1")))
    except ValueError:
        return 1


def _nbytes(shape: tuple, dtype: np.dtype) -> int:
    out = int(dtype.itemsize)
    for s in shape:
        out *= int(s)
    return out


def _check_budget(path, key: str, need: int, what: str) -> None:
    from ..io._common import human_bytes
    budget = data_budget()
    if need > budget:
        a, b = human_bytes(need), human_bytes(budget)
        if a == b:        # both round alike: say the bytes
            a, b = f"{need:,} B", f"{budget:,} B"
        raise DataError(f"{what} would take {a}, above this process's data budget of {b} "
                        f"(PARTPLAN_MAX_BYTES / LOCAL_WORLD_SIZE)", path, key)


def _stream(fh, shape: tuple, dtype: np.dtype, fortran: bool, rows: np.ndarray | None, path, key: str):
    """Read the array data that follows the header in ``fh`` a chunk at a time,
    keeping rows ``rows`` (all when None) of a 1-D or 2-D array."""
    n = int(shape[0]) if shape else 1
    want = np.arange(n) if rows is None else np.asarray(rows, dtype=np.int64)
    if want.size and (want.min() < 0 or want.max() >= n):
        raise DataError(f"row index out of range [0, {n})", path, key)
    out = np.empty((want.size,) + tuple(shape[1:]), dtype=dtype)
    order = np.argsort(want, kind="stable")
    sw = want[order]
    if len(shape) <= 1 or not fortran:
        row_b = _nbytes(tuple(shape[1:]), dtype)
        step = max(1, STREAM_BYTES // max(1, row_b))
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            buf = _read(fh, (hi - lo) * row_b, path, key)
            if len(buf) != (hi - lo) * row_b:
                raise DataError("truncated member (fewer bytes than its header's shape)", path, key)
            blk = np.frombuffer(buf, dtype=dtype).reshape((hi - lo,) + tuple(shape[1:]))
            a, b = np.searchsorted(sw, lo), np.searchsorted(sw, hi)
            out[order[a:b]] = blk[sw[a:b] - lo]
    else:  # column-major 2-D: a chunk of columns at a time
        col_b = n * dtype.itemsize
        f = int(shape[1])
        step = max(1, STREAM_BYTES // max(1, col_b))
        for lo in range(0, f, step):
            hi = min(f, lo + step)
            buf = _read(fh, (hi - lo) * col_b, path, key)
            if len(buf) != (hi - lo) * col_b:
                raise DataError("truncated member (fewer bytes than its header's shape)", path, key)
            blk = np.frombuffer(buf, dtype=dtype).reshape((hi - lo, n))
            out[:, lo:hi] = blk[:, want].T
    return out


def _member(path: Path, key: str, rows: np.ndarray | None = None) -> np.ndarray:
    """Array ``key`` of the npz (only ``rows`` of it when given): memory-mapped
    when stored, streamed when compressed; what is kept must fit :func:`data_budget`."""
    with zipfile.ZipFile(path) as zf:
        shape, dtype, fortran, offset = _member_header(zf, key + ".npy", path)
        if dtype.hasobject:
            raise DataError(f"dtype {dtype} holds Python objects; not a data array", path, key)
        if not shape:
            raise DataError("a scalar, not an array", path, key)
        row_b = _nbytes(tuple(shape[1:]), dtype)
        keep = row_b * (int(shape[0]) if rows is None else int(np.size(rows)))
        _check_budget(path, key, keep, f"{'all' if rows is None else np.size(rows)} rows of shape {shape}")
        if offset is not None and not fortran and rows is None:
            arr = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)
            return np.ascontiguousarray(arr)
        if offset is not None and not fortran:
            # some rows of a stored member: read a window at a time, only the windows that hold one of
            # them (a memory map's pages of every row touched would count in this process's memory,
            # scattered rows touching nearly all of them)
            from .._rowio import read_file_rows
            try:
                return read_file_rows(path, offset, shape, dtype, np.asarray(rows, dtype=np.int64))
            except IndexError:     # the reader's own range check
                raise DataError(f"row index out of range [0, {int(shape[0])})", path, key) from None
            except EOFError:
                raise DataError("truncated member (fewer bytes than its header's shape)", path, key) from None
        with zf.open(key + ".npy") as fh:
            version = np.lib.format.read_magic(fh)
            (np.lib.format.read_array_header_1_0 if version == (1, 0) else
             np.lib.format.read_array_header_2_0)(fh)
            return _stream(fh, shape, dtype, fortran, rows, path, key)


def _iter_rows(path: Path, key: str, shape: tuple, chunk_rows: int):
    """(first row, block) over all rows of the npz member ``key``, one block of
    ``chunk_rows`` rows at a time (plain reads of a stored member — a memory
    map's pages would stay counted in this process's memory — or a single
    inflating pass)."""
    with zipfile.ZipFile(path) as zf:
        shape, dtype, fortran, offset = _member_header(zf, key + ".npy", path)
        if offset is not None and not fortran:
            with open(path, "rb") as raw:
                raw.seek(offset)
                yield from _row_blocks(raw, shape, dtype, chunk_rows, path, key)
            return
        if fortran:  # a column-major member cannot be streamed by rows: bounded by the budget
            _check_budget(path, key, _nbytes(shape, dtype), f"the column-major member of shape {shape}")
            whole = _member(path, key)
            for lo in range(0, shape[0], chunk_rows):
                yield lo, whole[lo:lo + chunk_rows]
            return
        with zf.open(key + ".npy") as fh:
            version = np.lib.format.read_magic(fh)
            (np.lib.format.read_array_header_1_0 if version == (1, 0) else
             np.lib.format.read_array_header_2_0)(fh)
            yield from _row_blocks(fh, shape, dtype, chunk_rows, path, key)


def _row_blocks(fh, shape: tuple, dtype: np.dtype, chunk_rows: int, path, key: str):
    """(first row, block) of the row-major array data that follows in ``fh`` (a plain file at the
    member's data, or an inflating member stream), ``chunk_rows`` rows at a time, fewer where
    that many rows would exceed STREAM_BYTES (at least one row: wide rows are read one by one)."""
    row_b = _nbytes(tuple(shape[1:]), dtype)
    chunk_rows = max(1, min(int(chunk_rows), STREAM_BYTES // max(row_b, 1)))
    for lo in range(0, shape[0], chunk_rows):
        hi = min(shape[0], lo + chunk_rows)
        buf = _read(fh, (hi - lo) * row_b, path, key)
        if len(buf) != (hi - lo) * row_b:
            raise DataError("truncated member (fewer bytes than its header's shape)", path, key)
        yield lo, np.frombuffer(buf, dtype=dtype).reshape((hi - lo,) + tuple(shape[1:]))


@dataclass
class DataInfo:
    """What :func:`check_data` learnt: n, f, classes, mask sizes, dtype, mmap."""

    path: str
    n: int
    f: int
    classes: int
    dtype: str
    train: int
    val: int
    test: int
    mmap: bool

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def check_data(path, n: int, *, chunk_rows: int = 65536,
               graph_check: Callable[[Any], None] | None = None, keep_rows: int | None = None) -> DataInfo:
    """Validate ``D.npz`` (or a PyG ``D.pt``) for a graph of ``n`` vertices; raises :class:`DataError`.
    ``graph_check``: called with a ``.pt`` Data that has an ``edge_index`` (the caller's check that
    it is the plan's graph; its PartplanError becomes a DataError naming the file). ``keep_rows``:
    the most rows of x one process will keep (the largest part; the shares writer's largest share),
    checked against :func:`data_budget` from the header before anything is read; None: an even
    share of the ``$WORLD_SIZE`` processes (each read checks its own rows exactly)."""
    p = Path(path)
    if not p.is_file():
        raise DataError("no such data file", p)
    if _is_pt(p):
        arrs, obj = _pt_load(p)
        if graph_check is not None and getattr(obj, "edge_index", None) is not None:
            try:
                graph_check(obj)
            except DataError:
                raise
            except PartplanError as exc:
                raise DataError(str(exc), p, "edge_index") from None
        heads = {k: (tuple(a.shape), a.dtype, False, None) for k, a in arrs.items()}

        def get(key, rows=None):
            return arrs[key] if rows is None else arrs[key][rows]
    else:
        heads = _npz_heads(p)

        def get(key, rows=None):
            return _member(p, key, rows)

        def iter_x(rows_per_chunk):
            return _iter_rows(p, "x", heads["x"][0], rows_per_chunk)
        return _check_heads(p, n, heads, get, chunk_rows, iter_x, keep_rows)
    return _check_heads(p, n, heads, get, chunk_rows, keep_rows=keep_rows)


def _npz_heads(p: Path) -> dict:
    """(shape, dtype, fortran, offset) of every key of the npz, from the headers."""
    try:
        zf = zipfile.ZipFile(p)
    except _ZIP_ERRORS as exc:   # also NotImplementedError: a zip version zipfile does not read
        raise DataError(f"not an .npz (zip) file ({exc})", p) from None
    with zf:
        names = set(zf.namelist())
        missing = [k for k in KEYS if k + ".npy" not in names]
        if missing:
            raise DataError(f"missing key(s) {', '.join(missing)}; a data file holds {', '.join(KEYS)}", p)
        heads = {k: _member_header(zf, k + ".npy", p, crc=True) for k in KEYS}
    return heads


def _check_heads(p: Path, n: int, heads: dict, get, chunk_rows: int, iter_x=None,
                 keep_rows: int | None = None) -> DataInfo:
    shape, dt, _, off = heads["x"]
    if len(shape) != 2 or shape[0] != n:
        raise DataError(f"x must be an n × f array with n = {n} (the plan's graph), got shape {shape}", p, "x")
    if shape[1] < 1:
        raise DataError(f"x has no feature column (shape {tuple(shape)}): a model needs at least one", p, "x")
    if dt not in (np.float32, np.float64):
        order = (" (big-endian: save it little-endian)"
                 if dt.byteorder == ">" and dt.newbyteorder("<") in (np.float32, np.float64) else "")
        raise DataError(f"x has dtype {dt}; use float32 or float64{order}", p, "x")
    # from the header alone, before anything is inflated: the rows of x one process keeps (the
    # ranks of all machines together keep all of x; each read checks its own rows exactly)
    keep = -(-n // _process_count("WORLD_SIZE")) if keep_rows is None else int(keep_rows)
    _check_budget(p, "x", keep * _nbytes(tuple(shape[1:]), np.dtype(dt)),
                  f"{keep:,} of the {n:,} rows of the features x of shape {tuple(shape)} ({dt})")
    for k in ("y",) + MASKS:
        s, d, _, _ = heads[k]
        if s != (n,):
            raise DataError(f"must have shape ({n},), got {s}", p, k)
        if k == "y" and d.kind not in "iu":
            raise DataError(f"labels must be integers, got dtype {d}", p, k)
        if k != "y" and d != np.bool_:
            raise DataError(f"masks must be bool, got dtype {d}", p, k)
    if iter_x is not None:
        chunks = iter_x(chunk_rows)
    else:
        chunks = ((lo, get("x", np.arange(lo, min(n, lo + chunk_rows)))) for lo in range(0, n, chunk_rows))
    for lo, xs in chunks:  # NaN / inf scan, one chunk at a time (one inflating pass when compressed)
        problem = non_finite_problem(xs, lo)
        if problem:
            raise DataError(problem, p, "x")
    y = get("y").astype(np.int64)
    masks = {k: get(k) for k in MASKS}
    if not masks["train_mask"].any():
        raise DataError("no training vertex (train_mask is all False)", p, "train_mask")
    labeled = masks["train_mask"] | masks["val_mask"] | masks["test_mask"]
    problem = negative_label_problem(y, labeled)
    if problem:
        raise DataError(problem, p, "y")
    for a, b in ((0, 1), (0, 2), (1, 2)):
        both = masks[MASKS[a]] & masks[MASKS[b]]
        if both.any():
            raise DataError(f"vertex {int(np.flatnonzero(both)[0])} is in both {MASKS[a]} and {MASKS[b]}", p)
    classes = int(y[labeled].max()) + 1
    if classes > max(n, 2):  # a class id above n: labels are not 0..C-1 class indices
        v = int(np.flatnonzero(labeled & (y == classes - 1))[0])
        raise DataError(f"vertex {v} has label {classes - 1}, but labels must be class indices 0..C-1 with "
                        f"C <= n = {n}; relabel the classes", p, "y")
    if classes < 2:
        raise DataError("every masked vertex has label 0: a classifier needs labels of at least 2 classes", p, "y")
    used = np.unique(y[labeled])
    if used.size < classes:   # C = largest label + 1 logits, some never a label: often labels not 0..C-1
        from ..io._common import warn_user
        unused = np.setdiff1d(np.arange(classes), used)
        shown = ", ".join(str(c) for c in unused[:8].tolist()) + (", ..." if unused.size > 8 else "")
        warn_user(f"{p}: field 'y': {classes} classes (the largest label + 1), but no masked vertex has label "
                  f"{shown} ({unused.size} of them); the model keeps a logit for each")
    return DataInfo(str(p), n, int(shape[1]), classes, str(dt), int(masks["train_mask"].sum()),
                    int(masks["val_mask"].sum()), int(masks["test_mask"].sum()), off is not None)


def read_rows(path, ids: np.ndarray) -> dict:
    """Rows ``ids`` of every key: a stored (uncompressed) member read a window of rows at a time,
    only the windows that hold wanted rows (:mod:`partplan._rowio`); a compressed one streamed; a
    ``.pt`` Data loaded whole once and sliced. The file is checked by :func:`check_data` (its
    members' CRC-32 included) once per job, before any rank reads."""
    p = Path(path)
    ids = np.asarray(ids, dtype=np.int64)
    if _is_pt(p):
        arrs = _pt_arrays(p)
        out = {k: np.ascontiguousarray(arrs[k][ids]) for k in KEYS}
    else:
        out = {k: _member(p, k, ids) for k in KEYS}
    out["y"] = out["y"].astype(np.int64)
    return out


def write_data(path, x, y, train_mask, val_mask, test_mask) -> Path:
    """Write ``D.npz`` uncompressed (so ranks can memory-map their rows), atomically."""
    from .._atomic import atomic_path
    p = Path(path)
    if p.suffix != ".npz":
        raise DataError("the data file must be named .npz", p)
    if not p.parent.is_dir():
        raise DataError(f"directory {p.parent} does not exist", p)
    with atomic_path(p, suffix=".npz") as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, x=x, y=np.asarray(y, dtype=np.int64), train_mask=np.asarray(train_mask, bool),
                     val_mask=np.asarray(val_mask, bool), test_mask=np.asarray(test_mask, bool))
    return p


# ----------------------------------------------------------------------------- splits and datasets
def split_per_class(y: np.ndarray, eligible: np.ndarray, *, train_per_class: int = 20, val: int = 500,
                    seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Planetoid-style split: ``train_per_class`` random eligible vertices of
    each class, then ``val`` random others, the remaining eligible vertices
    are test (seeded; independent of any partition)."""
    rng = np.random.default_rng(seed)
    n = y.size
    cand = np.flatnonzero(eligible)
    order = cand[rng.permutation(cand.size)]
    train = np.zeros(n, dtype=bool)
    for c in np.unique(y[cand]):
        pick = order[y[order] == c][:train_per_class]
        train[pick] = True
    rest = order[~train[order]]
    valm = np.zeros(n, dtype=bool)
    valm[rest[:val]] = True
    test = eligible & ~train & ~valm
    return train, valm, test


def labeled_dataset(name: str, *, features: str = "identity", train_per_class: int = 20, val: int = 500,
                    seed: int = 0) -> dict:
    """x, y and masks of a registered labeled graph (``labels`` in the registry).

    features : "identity" (one-hot vertex id, n × n float32: the usual choice
    for polblogs, which has no attributes) or "random:F" (F deterministic
    random columns). Vertices without any edge carry no signal for a GCN and
    are left out of all three masks (266 of polblogs' 1,490).
    """
    from .. import datasets
    from ..io import read_gt_properties
    e = datasets.entry(name)
    lab = e.get("labels")
    if not lab:
        raise DataError(f"dataset {name!r} has no labels in the registry (labeled: "
                        f"{', '.join(x for x in datasets.names() if datasets.entry(x).get('labels'))})")
    path = datasets.embedded_path(name) or datasets.cached_path(name)
    if path is None:
        raise DataError(f"dataset {name!r} is not here; run `partplan datasets fetch {name}`")
    props = read_gt_properties(path, kinds=("vertex",))
    raw = np.asarray(props["vertex"][lab["vertex_property"]])
    if not np.array_equal(raw, np.round(raw)):
        raise DataError(f"dataset {name!r}: vertex property {lab['vertex_property']!r} is not integral")
    y = raw.astype(np.int64)
    g = datasets.load_graph(name)
    deg = np.diff(g.indptr) + np.bincount(g.indices, minlength=g.n)
    own = g.rows == g.indices
    deg = deg - 2 * np.bincount(g.rows[own], minlength=g.n)  # self loops are not links
    eligible = deg > 0
    x = feature_matrix(features, g.n, seed)
    tr, va, te = split_per_class(y, eligible, train_per_class=train_per_class, val=val, seed=seed)
    return {"x": x, "y": y, "train_mask": tr, "val_mask": va, "test_mask": te,
            "classes": lab.get("classes"), "eligible": int(eligible.sum())}


def feature_matrix(spec: str, n: int, seed: int = 0) -> np.ndarray:
    """"identity" (n × n one-hot) or "random:F" (n × F in [-1, 1), seeded) float32."""
    if spec == "identity":
        if n > 50_000:
            raise DataError(f"identity features for n = {n} would take {4 * n * n / 2**30:.1f} GiB; "
                            f"use random:F")
        return np.eye(n, dtype=np.float32)
    if spec.startswith("random:"):
        try:
            f = int(spec.split(":", 1)[1])
        except ValueError:
            f = 0
        if f < 1:
            raise DataError(f"bad feature spec {spec!r}; use random:F with F >= 1")
        from .._budget import check_array_bytes
        check_array_bytes(n, f, 4, f"random features ({n:,} vertices × {f:,} float32)", field="features")
        from ..runtime.spmm import random_rows
        return random_rows(np.arange(n), f, seed, "float32")
    raise DataError(f"unknown feature spec {spec!r}; use identity or random:F")


def random_data(ids: np.ndarray, f: int, classes: int, seed: int = 0, dtype="float32") -> dict:
    """Synthetic rows for timing runs: random features (row v depends only on
    (seed, v)), label = a hash of v mod classes, masks 60 / 20 / 20 % by hash.
    The same at any rank count."""
    from ..runtime.spmm import random_rows
    ids = np.asarray(ids, dtype=np.int64)
    h = random_rows(ids, 2, seed + 1, "float64")
    y = np.floor((h[:, 0] + 1) / 2 * classes).astype(np.int64).clip(0, classes - 1)
    u = (h[:, 1] + 1) / 2
    return {"x": random_rows(ids, f, seed, dtype), "y": y, "train_mask": u < 0.6,
            "val_mask": (u >= 0.6) & (u < 0.8), "test_mask": u >= 0.8}

