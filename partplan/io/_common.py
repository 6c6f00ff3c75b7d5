"""Helpers shared by the format modules: opening (gzip by magic bytes, with
corrupt streams turned into :class:`~partplan.errors.GraphFormatError`),
size checks against the file length and a memory budget (before any
allocation a header asks for), atomic writing, and fast integer-line
formatting.

Nothing here knows a file format; each format module (``mtx``, ``edgelist``,
``metis``, ``hgr``, ``npz``, ``table``, ``graphtool``) uses these.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import os
import zlib
from pathlib import Path
from typing import BinaryIO, Iterator

import numpy as np

from .._atomic import atomic_path
from ..errors import GraphFormatError, SizeLimitError  # noqa: F401 (SizeLimitError: the format modules import it here)

# the one budget rule lives in partplan._budget; re-exported here for the format modules
from .._budget import (  # noqa: F401
    DEFAULT_RAM_FRACTION,
    ENV_MAX_BYTES,
    _physical_memory,
    check_budget,
    human_bytes,
    memory_budget,
    parse_bytes,
)

GZIP_MAGIC = b"\x1f\x8b"
# what a corrupt / truncated gzip stream raises while being read: zlib.error
# (bad deflate data, e.g. flipped bytes), BadGzipFile (bad CRC / length,
# header), EOFError (truncated), OSError (anything else from the file)
GZIP_ERRORS = (zlib.error, gzip.BadGzipFile, EOFError, OSError)
# deflate expands at most ~1032:1; a .gz file of b bytes holds < this * b bytes
MAX_GZIP_RATIO = 1100
#: the longest line a whole-line read of a gzip stream returns (the text readers' longest line)
MAX_GZIP_LINE_BYTES = 1 << 28
INT64_MAX = (1 << 63) - 1


def without_bom(text: bytes) -> bytes:
    """``text`` without a UTF-8 byte-order mark at its start (editors on Windows write one)."""
    return text[3:] if text.startswith(b"\xef\xbb\xbf") else text

# ---------------------------------------------------------------- sizes and the memory budget


def graph_bytes(n: int, nnz: int, *, weighted: bool = True) -> int:
    """A lower bound on the bytes a :class:`~partplan.graph.Graph` of ``n``
    vertices and ``nnz`` nonzeros needs while it is built: per vertex the int64
    ``indptr`` and the row counts and their running sum it is made from (24
    bytes: measured 21 on a graph of 2·10^8 vertices and 2 edges) and, per
    nonzero, the COO row and column (int64) it is built from plus the CSR column
    (int64) and a float64 value when weighted."""
    return 24 * (int(n) + 1) + int(nnz) * (24 + (8 if weighted else 0))


def first_inexact_integer(values: np.ndarray) -> int | None:
    """Index of the first integer in ``values`` (an integer array) whose magnitude is above 2^53
    (float64, which holds every weight, holds every integer up to 2^53 exactly and rounds some
    above), else None (also for float arrays): what the METIS reader refuses, for the npz and table
    readers too. (Matrix Market values are parsed as float64, where 2^53 + 1 already reads as
    2^53: that reader refuses 2^53 itself.)"""
    if values.dtype.kind not in "iu" or values.dtype.itemsize < 8 or not values.size:
        return None    # narrower integers are exact in float64
    big = (values > 2 ** 53) | (values < -2 ** 53) if values.dtype.kind == "i" else values > 2 ** 53
    return int(np.flatnonzero(big.reshape(-1))[0]) if big.any() else None


def check_int64(value: int, path, what: str, *, line: int | None = None, field: str | None = None) -> int:
    """A header integer (a Python int) must fit in int64."""
    if not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise GraphFormatError(f"{what} {value} does not fit in 64 bits", path, line, field=field)
    return value


def input_size(path) -> tuple[int, bool]:
    """(bytes on disk, gzip-compressed?) of ``path``."""
    p = Path(path)
    try:
        fd, st = open_regular(p)
    except GraphFormatError:
        return 0, False
    try:
        return st.st_size, os.pread(fd, 2, 0) == GZIP_MAGIC
    except OSError:
        return 0, False
    finally:
        os.close(fd)


def check_file_holds(count: int, min_bytes: int, path, what: str, *, line: int | None = None,
                     field: str | None = None) -> None:
    """A header announcing ``count`` records of at least ``min_bytes`` bytes
    each is a lie when the file is shorter than that (for gzip: than the most
    its compressed length can expand to). Raises GraphFormatError naming the
    field before anything is allocated or parsed."""
    size, gz = input_size(path)
    if size == 0 and count == 0:
        return
    most = size * (MAX_GZIP_RATIO if gz else 1)
    if count * min_bytes > most:
        shown = f"{human_bytes(size)} ({'gzip' if gz else 'plain text'})"
        raise GraphFormatError(f"{what} = {count} needs at least {count * min_bytes} bytes of text, but the file "
                               f"has {shown}", path, line, field=field)


MAX_NPY_HEADER = 1 << 16    # bytes of a .npy header; numpy writes a few hundred


def npy_header(fh) -> tuple[tuple, np.dtype, int]:
    """(shape, dtype, header length) of the ``.npy`` stream ``fh`` (at its
    start), read without the data: any format version numpy writes (1.0,
    2.0, 3.0), the header at most :data:`MAX_NPY_HEADER` bytes and parsed as
    a literal (never evaluated). numpy allocates the shape a header claims
    before reading the data, so readers check it first. ValueError /
    EOFError on a bad header."""
    import ast
    import struct
    magic = fh.read(8)
    if len(magic) < 8:
        raise EOFError("shorter than a .npy header")
    if magic[:6] != b"\x93NUMPY":
        raise ValueError("not a .npy file (bad magic bytes)")
    major, minor = magic[6], magic[7]
    if (major, minor) not in ((1, 0), (2, 0), (3, 0)):
        raise ValueError(f".npy format version {major}.{minor} is not one numpy writes")
    size_bytes = 2 if major == 1 else 4
    raw = fh.read(size_bytes)
    if len(raw) < size_bytes:
        raise EOFError("shorter than a .npy header")
    hlen = struct.unpack("<H" if major == 1 else "<I", raw)[0]
    if hlen > MAX_NPY_HEADER:
        raise ValueError(f".npy header of {hlen} bytes (at most {MAX_NPY_HEADER})")
    text = fh.read(hlen)
    if len(text) < hlen:
        raise EOFError("truncated .npy header")
    try:
        d = ast.literal_eval(text.decode("utf8" if major == 3 else "latin1"))
    except (ValueError, SyntaxError, UnicodeDecodeError, MemoryError, RecursionError) as exc:
        raise ValueError(f"unreadable .npy header ({type(exc).__name__})") from None
    if not isinstance(d, dict) or set(d) != {"descr", "shape", "fortran_order"}:
        raise ValueError("a .npy header must hold exactly 'descr', 'fortran_order' and 'shape'")
    shape = d["shape"]
    if (not isinstance(shape, tuple) or len(shape) > 64
            or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 1 << 63 for x in shape)):
        raise ValueError(f"bad .npy shape {str(shape)[:80]}")
    if not isinstance(d["fortran_order"], bool):
        raise ValueError("bad .npy fortran_order")
    try:
        dtype = np.lib.format.descr_to_dtype(d["descr"])
    except (TypeError, ValueError, SyntaxError) as exc:   # numpy literal_evals some descr strings
        raise ValueError(f"bad .npy descr ({exc})") from None
    return shape, dtype, 8 + size_bytes + hlen


def npy_claim_problem(shape: tuple, dtype: np.dtype, available: int) -> str | None:
    """Why an array of ``shape``/``dtype`` cannot be in ``available`` bytes
    (or holds Python objects); None when it can."""
    if dtype.hasobject:
        return f"holds Python objects (dtype {dtype}), not numbers"
    count = 1
    for d in shape:
        count *= int(d)
    nbytes = count * dtype.itemsize
    if nbytes > available:
        return f"claims shape {tuple(shape)} ({nbytes} bytes) but the file holds only {max(available, 0)} bytes of it"
    return None


# ---------------------------------------------------------------- opening
class _StreamError(GraphFormatError):
    """A corrupt or truncated compressed stream (the reader that knows the
    current line re-raises it as a GraphFormatError naming the line)."""


class CheckedGzipFile(gzip.GzipFile):
    """A read-only :class:`gzip.GzipFile` whose read errors (flipped bytes in
    the deflate data -> ``zlib.error``, bad CRC or length -> ``BadGzipFile``,
    truncation -> ``EOFError``) are raised as one GraphFormatError naming the
    file, never as a traceback of the gzip module."""

    def __init__(self, fileobj, path, *, text: bool = True):
        super().__init__(fileobj=fileobj, mode="rb")
        self._pp_path = path
        self._pp_raw = fileobj
        self._pp_text = text

    def close(self):
        """Close the gzip layer AND the file under it (GzipFile leaves a
        ``fileobj`` it was given open)."""
        try:
            super().close()
        finally:
            self._pp_raw.close()

    def _fail(self, exc):
        kind = "truncated" if isinstance(exc, EOFError) else "corrupt"
        line = gzip_corrupt_line(self._pp_path) if self._pp_text else None
        where = " (the data stops decompressing on this line)" if line is not None else ""
        raise _StreamError(f"{kind} gzip stream: {exc}{where}", self._pp_path, line) from None

    def read(self, size=-1):
        try:
            return super().read(size)
        except GZIP_ERRORS as exc:
            self._fail(exc)

    def read1(self, size=-1):
        try:
            return super().read1(size)
        except GZIP_ERRORS as exc:
            self._fail(exc)

    def readinto(self, b):
        try:
            return super().readinto(b)
        except GZIP_ERRORS as exc:
            self._fail(exc)

    def peek(self, n):
        try:
            return super().peek(n)
        except GZIP_ERRORS as exc:
            self._fail(exc)

    def readline(self, size=-1):
        """A line, at most MAX_GZIP_LINE_BYTES of it when no ``size`` is given: a few MB of
        deflate data can inflate to one endless line, which a whole-line read would hold whole
        (a GraphFormatError, lineless: the caller names the line it was reading)."""
        bounded = size is None or size < 0
        try:
            line = super().readline(MAX_GZIP_LINE_BYTES + 1 if bounded else size)
        except GZIP_ERRORS as exc:
            self._fail(exc)
        if bounded and len(line) > MAX_GZIP_LINE_BYTES and not line.endswith(b"\n"):
            raise GraphFormatError(f"a line longer than {MAX_GZIP_LINE_BYTES:,} bytes in the decompressed stream "
                                   f"(no graph file has one: a corrupt file, or one that inflates to an endless "
                                   f"line)", self._pp_path)
        return line


def gzip_corrupt_line(path, chunk: int = 1 << 16) -> int | None:
    """1-based line on which the gzip file ``path`` stops decompressing: the
    line holding the first deflate code zlib rejects, or the line cut by a
    truncation. None when all the data decompresses and only the CRC /
    length trailer disagrees (the damage is then somewhere unknown). Streams
    the file through zlib counting newlines; the chunk in which zlib fails is
    replayed from a copy of the decompressor one input byte at a time, so no
    decoded byte is lost. Only called on the error path."""
    lines = 0
    d = zlib.decompressobj(wbits=31)
    try:
        with open(path, "rb") as fh:
            while True:
                raw = fh.read(chunk)
                if not raw:
                    return lines + 1 if not d.eof else None  # truncated inside a member
                while raw:
                    snap, snap_lines = d.copy(), lines
                    try:
                        out = d.decompress(raw)
                    except zlib.error as exc:
                        if "incorrect data check" in str(exc) or "incorrect length check" in str(exc):
                            return None
                        d, lines = snap, snap_lines
                        for i in range(len(raw)):  # replay byte by byte to the failing code
                            try:
                                lines += d.decompress(raw[i:i + 1]).count(b"\n")
                            except zlib.error as exc2:
                                if "incorrect" in str(exc2) and "check" in str(exc2):
                                    return None
                                return lines + 1
                        return lines + 1
                    lines += out.count(b"\n")
                    raw = b""
                    if d.eof:  # next gzip member, if any
                        raw = d.unused_data
                        if raw[:2] != GZIP_MAGIC:
                            return None  # trailing garbage: not a deflate problem
                        d = zlib.decompressobj(wbits=31)
    except OSError:
        return None


def stream_error_at(exc: GraphFormatError, path, line: int) -> GraphFormatError:
    """A corrupt-stream error from :class:`CheckedGzipFile` with a line:
    its own (where the data stops decompressing) or, when that is unknown,
    ``line`` (the first line of what the caller was reading)."""
    if exc.line is not None:
        return exc
    return GraphFormatError(f"{exc.problem} (in the data from this line on)", path, line)


# the kinds of file and the non-blocking regular-file open live in partplan._files (every layer's)
from .._files import _KINDS, file_kind, open_regular  # noqa: E402,F401


# what a file's first bytes say it is where partplan reads neither: (magic, what, how to get text)
OTHER_ENCODINGS = ((b"BZh", "bzip2-compressed", "bunzip2 it"), (b"\xfd7zXZ\x00", "xz-compressed", "unxz it"),
                   (b"\x28\xb5\x2f\xfd", "zstd-compressed", "unzstd it"),
                   (b"\xff\xfe", "UTF-16 text (little-endian byte order mark)", "save it as UTF-8"),
                   (b"\xfe\xff", "UTF-16 text (big-endian byte order mark)", "save it as UTF-8"))


def open_binary(path: str | os.PathLike, *, text: bool = True) -> BinaryIO:
    """Open ``path`` for reading bytes; gzip is detected by its magic bytes
    (not only by the ``.gz`` name) and read through :class:`CheckedGzipFile`
    (a corrupt stream -> GraphFormatError naming, for ``text`` files, the
    line where the data stops decompressing); bzip2, xz and zstd streams and UTF-16 text
    (:data:`OTHER_ENCODINGS`) -> GraphFormatError saying what the file is. A missing file or
    anything but a regular file (a FIFO, a device, a directory: :func:`open_regular`, checked
    before any read) -> GraphFormatError."""
    p = Path(path)
    fd, _ = open_regular(p)
    fh = os.fdopen(fd, "rb")
    head = fh.read(6)
    fh.seek(0)
    if head[:2] == GZIP_MAGIC:
        return CheckedGzipFile(fh, p, text=text)  # type: ignore[return-value]
    for magic, what, fix in OTHER_ENCODINGS:
        if head.startswith(magic):
            fh.close()
            raise GraphFormatError(f"the file is {what}; partplan reads plain text (UTF-8) or gzip: {fix} first", p)
    return fh


def read_all(path: str | os.PathLike) -> bytes:
    """The whole (decompressed) content of a binary file; gzip errors become
    GraphFormatError."""
    with open_binary(path, text=False) as fh:
        try:
            return fh.read()
        except GZIP_ERRORS as exc:
            raise GraphFormatError(f"corrupt gzip stream: {exc}", path) from None


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, *, compress: bool | None = None) -> Iterator[BinaryIO]:
    """Yield a binary file that becomes ``path`` only when the block ends
    without error (temporary file in the same folder, then ``os.replace``).
    ``compress`` None -> gzip when the name ends in ``.gz``."""
    p = Path(path)
    if compress is None:
        compress = p.name.lower().endswith(".gz")
    with atomic_path(p) as tmp, open(tmp, "wb") as raw:
        if compress:
            # mtime=0 and no file name (the temporary one would be stored): the same graph gives the
            # same bytes
            with gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz:
                yield gz  # type: ignore[misc]
        else:
            yield raw


def _ndigits(v: np.ndarray) -> np.ndarray:
    """Decimal digits of each non-negative int64 (0 has one digit)."""
    nd = np.ones(v.shape, dtype=np.int64)
    p = 10
    for _ in range(18):
        nd += v >= p
        p *= 10
    return nd


def format_int_lines(values: np.ndarray, counts: np.ndarray) -> bytes:
    """Text of lines holding integers: line ``i`` gets the next ``counts[i]``
    values of ``values`` separated by one space (a line with 0 values is
    empty). Vectorized digit placement (no Python loop over values); numbers
    may be negative.

    >>> format_int_lines(np.array([1, 23, -4]), np.array([2, 0, 1])).decode()
    '1 23\\n\\n-4\\n'
    """
    values = np.ascontiguousarray(values, dtype=np.int64)
    counts = np.ascontiguousarray(counts, dtype=np.int64)
    if int(counts.sum()) != values.size:
        raise ValueError("counts must sum to the number of values")
    nlines = counts.size
    # items: every value, plus one empty item for each empty line; each item
    # is followed by a separator (space, or newline after a line's last item).
    items_per_line = np.maximum(counts, 1)
    nitems = int(items_per_line.sum())
    line_of_item = np.repeat(np.arange(nlines), items_per_line)
    first_item = np.zeros(nlines, dtype=np.int64)
    np.cumsum(items_per_line[:-1], out=first_item[1:])
    is_value = np.ones(nitems, dtype=bool)
    is_value[first_item[counts == 0]] = False
    neg = values < 0
    mag = np.abs(values)
    width = np.zeros(nitems, dtype=np.int64)
    width[is_value] = _ndigits(mag) + neg
    last = np.zeros(nitems, dtype=bool)
    last[first_item + items_per_line - 1] = True
    end = np.cumsum(width + 1)  # position just after each separator
    buf = np.full(int(end[-1]) if nitems else 0, ord(" "), dtype=np.uint8)
    if nitems:
        buf[end[last] - 1] = ord("\n")
    vend = end[is_value] - 1  # separator position of each value
    vwidth = width[is_value]
    ndig = vwidth - neg
    rem = mag.copy()
    for k in range(19):
        live = ndig > k
        if not live.any():
            break
        buf[vend[live] - 1 - k] = (rem[live] % 10 + 48).astype(np.uint8)
        rem //= 10
    if neg.any():
        buf[vend[neg] - vwidth[neg]] = ord("-")
    del line_of_item
    return buf.tobytes()


def write_table_text(fh: BinaryIO, columns: dict[str, np.ndarray], *, chunk_rows: int = 1 << 21) -> None:
    """Write columns as space-separated text lines without a header, through
    pyarrow's CSV writer (C++, shortest round-trip float formatting), in
    chunks of ``chunk_rows`` rows so memory stays bounded."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    opts = pacsv.WriteOptions(include_header=False, delimiter=" ", quoting_style="none")
    nrows = len(next(iter(columns.values()))) if columns else 0
    for lo in range(0, nrows, chunk_rows):
        table = pa.table({k: v[lo:lo + chunk_rows] for k, v in columns.items()})
        sink = io.BytesIO()
        pacsv.write_csv(table, sink, opts)
        fh.write(sink.getvalue())


def format_name(path: str | os.PathLike) -> str:
    """Lower-case file name without a trailing ``.gz``."""
    name = Path(path).name.lower()
    return name[:-3] if name.endswith(".gz") else name


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def warn_user(message: str) -> None:
    """One :class:`~partplan.errors.PartplanWarning` attributed to the user's call (the CLI prints it
    as one ``partplan: warning:`` line)."""
    import warnings

    from ..errors import PartplanWarning
    warnings.warn(message, PartplanWarning, stacklevel=_user_stacklevel())


def _user_stacklevel() -> int:
    """``warnings.warn``'s stacklevel, for the function calling it, that names the first frame
    outside partplan (the user's call, however many partplan functions lie between)."""
    import sys

    f, level = sys._getframe(1), 1
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_PACKAGE_DIR + os.sep):
        f, level = f.f_back, level + 1
    return level


def drops_vertex_weights(fmt: str):
    """Decorator of a graph writer ``(graph, path, ...)`` whose format cannot hold vertex weights
    (every one but METIS): after the file is written, a :class:`~partplan.errors.PartplanWarning`
    when ``graph`` had some (a METIS ``.graph``'s), which the file then lacks."""
    import functools

    def wrap(write):
        @functools.wraps(write)
        def writer(graph, path, *args, **kwargs):
            out = write(graph, path, *args, **kwargs)
            if getattr(graph, "vertex_weights", None) is not None:
                warn_user(f"{path}: the graph's vertex weights are not written ({fmt} has no place for them; "
                          f"a METIS .graph keeps them): partitioning the file balances row nonzeros instead")
            return out
        return writer
    return wrap


def check_edge_file(graph, path, fmt: str) -> None:
    """Before an edge file (edge list, edge table) of ``graph`` is written — their readers relabel
    the ids they find and refuse negative weights: refuse what its reader would refuse (no edge at
    all, a negative weight), and warn (:class:`~partplan.errors.PartplanWarning`) when vertices with
    no edge would be left out (the file read back has fewer vertices)."""
    keep = "write .npz, .mtx or .graph to keep them"
    if graph.nnz == 0:
        raise GraphFormatError(f"a graph without edges (n={graph.n}) cannot be written as an edge file "
                               f"({fmt}: its reader would find no edge); write .npz, .mtx or .graph", path)
    if graph.data is not None and graph.data.min() < 0:
        e = int(np.flatnonzero(graph.data < 0)[0])
        raise GraphFormatError(f"edge {e} has a negative weight ({graph.data[e]:g}), which the {fmt} reader "
                               f"refuses; write .npz or .mtx to keep it", path, field="weight")
    seen = np.zeros(graph.n, dtype=bool)
    seen[graph.indices] = True
    seen[graph.row_nnz > 0] = True
    missing = graph.n - int(seen.sum())
    if missing:
        warn_user(f"{path}: {missing:,} of the {graph.n:,} vertices have no edge and are not in the file (an "
                  f"edge file holds edges only): read back it has {graph.n - missing:,} vertices; {keep}")
