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
from ..errors import GraphFormatError, SizeLimitError

GZIP_MAGIC = b"\x1f\x8b"
# what a corrupt / truncated gzip stream raises while being read: zlib.error
# (bad deflate data, e.g. flipped bytes), BadGzipFile (bad CRC / length,
# header), EOFError (truncated), OSError (anything else from the file)
GZIP_ERRORS = (zlib.error, gzip.BadGzipFile, EOFError, OSError)
# deflate expands at most ~1032:1; a .gz file of b bytes holds < this * b bytes
MAX_GZIP_RATIO = 1100
INT64_MAX = (1 << 63) - 1

# ---------------------------------------------------------------- sizes and the memory budget
ENV_MAX_BYTES = "PARTPLAN_MAX_BYTES"
DEFAULT_RAM_FRACTION = 0.8
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40,
          "tib": 1 << 40}


def _physical_memory() -> int | None:
    """Bytes this process may use: physical RAM, lowered by a cgroup limit
    (containers) and by ``RLIMIT_AS``; None when nothing is known."""
    cands = []
    try:
        cands.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        pass
    for f in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            txt = Path(f).read_text().strip()
        except OSError:
            continue
        if txt.isdigit() and int(txt) < (1 << 60):
            cands.append(int(txt))
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY and soft > 0:
            cands.append(soft)
    except (ImportError, ValueError, OSError):
        pass
    return min(cands) if cands else None


def parse_bytes(text: str) -> int:
    """``"123"``, ``"512M"``, ``"4GiB"``, ``"1.5T"`` -> bytes (ValueError if malformed)."""
    t = text.strip().lower().replace(" ", "")
    num = t.rstrip("kmgtib")
    unit = t[len(num):]
    if unit not in _UNITS or not num:
        raise ValueError(f"not a byte count: {text!r}")
    v = float(num) * _UNITS[unit]
    if not (v >= 0) or v == float("inf"):
        raise ValueError(f"not a byte count: {text!r}")
    return int(v)


def memory_budget() -> int:
    """Most bytes a reader may allocate for one graph: ``$PARTPLAN_MAX_BYTES``
    (``4G``, ``512MiB``, plain bytes) when set, else 80% of the memory this
    process may use (physical RAM, cgroup limit, ``RLIMIT_AS``)."""
    env = os.environ.get(ENV_MAX_BYTES)
    if env:
        try:
            return parse_bytes(env)
        except ValueError:
            raise GraphFormatError(f"bad memory budget {env!r} (expected bytes, e.g. 8G or 512MiB)",
                                   field=ENV_MAX_BYTES) from None
    mem = _physical_memory()
    return int(mem * DEFAULT_RAM_FRACTION) if mem else 1 << 62


def human_bytes(b: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if b < 1024 or unit == "PiB":
            return f"{b:.0f} {unit}" if unit == "B" else f"{b:.1f} {unit}"
        b /= 1024
    return f"{b:.1f} EiB"  # pragma: no cover


def graph_bytes(n: int, nnz: int, *, weighted: bool = True) -> int:
    """A lower bound on the bytes a :class:`~partplan.graph.Graph` of ``n``
    vertices and ``nnz`` nonzeros needs while it is built: int64 ``indptr``
    (n + 1) and, per nonzero, the COO row and column (int64) it is built from
    plus the CSR column (int64) and a float64 value when weighted."""
    return 8 * (int(n) + 1) + int(nnz) * (24 + (8 if weighted else 0))


def check_budget(nbytes: int, path, what: str, *, line: int | None = None, field: str | None = None) -> None:
    """Raise :class:`~partplan.errors.SizeLimitError` (naming the file, the
    line and the field) when ``what`` needs more than :func:`memory_budget`
    bytes. Called with sizes read from a header, BEFORE allocating."""
    budget = memory_budget()
    if nbytes > budget:
        raise SizeLimitError(f"{what} needs at least {human_bytes(nbytes)}, above the memory budget of "
                             f"{human_bytes(budget)} (raise it with {ENV_MAX_BYTES}=<bytes>, e.g. 64G)",
                             path, line, field=field)


def check_int64(value: int, path, what: str, *, line: int | None = None, field: str | None = None) -> int:
    """A header integer (a Python int) must fit in int64."""
    if not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise GraphFormatError(f"{what} {value} does not fit in 64 bits", path, line, field=field)
    return value


def input_size(path) -> tuple[int, bool]:
    """(bytes on disk, gzip-compressed?) of ``path``."""
    p = Path(path)
    try:
        size = p.stat().st_size
        with open(p, "rb") as fh:
            gz = fh.read(2) == GZIP_MAGIC
    except OSError:
        return 0, False
    return size, gz


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


def npy_header(fh) -> tuple[tuple, np.dtype, int]:
    """(shape, dtype, header length) of the ``.npy`` stream ``fh`` (at its
    start), read without the data. numpy allocates the shape a header claims
    before reading the data, so readers check it first. ValueError /
    EOFError on a bad header."""
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
    elif version == (2, 0):
        shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
    else:
        shape, _, dtype = np.lib.format._read_array_header(fh, version)
    return shape, dtype, fh.tell()


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
        try:
            return super().readline(size)
        except GZIP_ERRORS as exc:
            self._fail(exc)


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


def open_binary(path: str | os.PathLike, *, text: bool = True) -> BinaryIO:
    """Open ``path`` for reading bytes; gzip is detected by its magic bytes
    (not only by the ``.gz`` name) and read through :class:`CheckedGzipFile`
    (a corrupt stream -> GraphFormatError naming, for ``text`` files, the
    line where the data stops decompressing). Missing file ->
    GraphFormatError."""
    p = Path(path)
    try:
        fh = open(p, "rb")
    except FileNotFoundError:
        raise GraphFormatError("file not found", p) from None
    except IsADirectoryError:
        raise GraphFormatError("is a directory, not a graph file", p) from None
    except OSError as exc:
        raise GraphFormatError(f"cannot open: {exc.strerror or exc}", p) from None
    head = fh.read(2)
    fh.seek(0)
    if head == GZIP_MAGIC:
        return CheckedGzipFile(fh, p, text=text)  # type: ignore[return-value]
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
            # mtime=0: the same graph gives the same bytes
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz:
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
