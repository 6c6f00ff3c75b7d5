"""Helpers shared by the format modules: opening (gzip by magic bytes),
atomic writing, and fast integer-line formatting.

Nothing here knows a file format; each format module (``mtx``, ``edgelist``,
``metis``, ``hgr``, ``npz``, ``table``, ``graphtool``) uses these.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import os
from pathlib import Path
from typing import BinaryIO, Iterator

import numpy as np

from .._atomic import atomic_path
from ..errors import GraphFormatError

GZIP_MAGIC = b"\x1f\x8b"


def open_binary(path: str | os.PathLike) -> BinaryIO:
    """Open ``path`` for reading bytes; gzip is detected by its magic bytes
    (not only by the ``.gz`` name). Missing file -> GraphFormatError."""
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
        return gzip.GzipFile(fileobj=fh, mode="rb")  # type: ignore[return-value]
    return fh


def read_all(path: str | os.PathLike) -> bytes:
    """The whole (decompressed) content; gzip errors become GraphFormatError."""
    with open_binary(path) as fh:
        try:
            return fh.read()
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
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
