"""Streaming tokenizer for numeric text formats (edge lists, Matrix Market
entries, METIS and hMetis lines).

The file is read in large byte blocks cut at line ends. Each block is parsed
in C by ``numpy.fromstring(..., sep=" ")`` (strtoll / strtod), and checked
with vectorized byte arithmetic: tokens per line (so the caller can verify
column counts or variable-length records) and which lines held only a
comment. No Python object is made per line or per token on this fast path.

``fromstring`` stops quietly at the first bad token in some cases ("- 2"
reads as -2, a blank block as [0], overflow saturates), so the fast path
compares the number of values it got with the number of tokens counted in the
bytes, and a token that is a lone sign ("-" last in a block reads as 0 with
the counts agreeing) sends the block to the slow path too. On any disagreement the block is re-read line by line
(:func:`locate_bad_token`), only to name the exact 1-based line and token in
the :class:`~partplan.errors.GraphFormatError`.
"""
from __future__ import annotations

import re
import warnings
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Iterator

import numpy as np

from ..errors import GraphFormatError
from ._common import MAX_GZIP_LINE_BYTES, stream_error_at, without_bom

BLOCK_BYTES = 1 << 25  # 32 MiB of text per block
MAX_BLOCK_BYTES = 1 << 31  # a caller's block: one read of at most 2 GiB (about 24 GiB to parse)
#: the longest line a text reader takes (a METIS adjacency line of 20 million neighbours is ~200 MB)
MAX_LINE_BYTES = MAX_GZIP_LINE_BYTES
#: the longest line of a format whose lines hold a few numbers (Matrix Market entries, edge lists)
SHORT_LINE_BYTES = 1 << 20
_INT_RE = re.compile(rb"[+-]?[0-9]+\Z")
_FLOAT_RE = re.compile(rb"[+-]?(?:[0-9]+\.?[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?"
                       rb"|nan|inf|infinity)\Z", re.IGNORECASE)
_I64_MAX = np.iinfo(np.int64).max
_I64_MIN = np.iinfo(np.int64).min


@dataclass
class Block:
    """One parsed block.

    values : all numbers of the block in reading order (int64 or float64).
    counts : int64[lines]: numbers on each line of the block.
    comment : bool[lines]: the line held a comment and no number.
    first_line : 1-based number of the block's first line in the file.
    text : the cleaned block bytes (only with ``scan_block(parse=False)``).
    """

    values: np.ndarray
    counts: np.ndarray
    comment: np.ndarray
    first_line: int
    text: bytes = b""

    def line_of_value(self, i: int) -> int:
        """1-based file line holding value ``i`` of this block."""
        ends = np.cumsum(self.counts)
        return self.first_line + int(np.searchsorted(ends, i, side="right"))

    def data_lines(self) -> np.ndarray:
        """File line numbers (1-based) of the lines that hold numbers."""
        return self.first_line + np.flatnonzero(self.counts > 0)


def check_block_bytes(block_bytes) -> int:
    """A reader's ``block_bytes`` (bytes of text read and parsed at a time) as an int in
    [1, MAX_BLOCK_BYTES]: 0 would read nothing, a float fails inside ``read``."""
    from .._args import check_int
    return check_int("block_bytes", block_bytes, lo=1, hi=MAX_BLOCK_BYTES)


def iter_raw_blocks(fh: BinaryIO, first_line: int = 1, block_bytes: int = BLOCK_BYTES,
                    path=None, max_line_bytes: int | None = None) -> Iterator[tuple[bytes, int]]:
    """Yield (bytes ending in a newline, 1-based line number of its first line); a UTF-8 byte-order
    mark opening the file (editors on Windows write one) is dropped. A line longer than
    ``max_line_bytes`` (None: :data:`MAX_LINE_BYTES`) is one GraphFormatError naming it, read no
    further: parsing a block takes about 12 bytes of memory per byte of text, so a gzip stream of
    a few MB that inflates to one line of gigabytes would otherwise take tens of gigabytes."""
    block_bytes = check_block_bytes(block_bytes)
    line = first_line
    first = first_line == 1
    most = MAX_LINE_BYTES if max_line_bytes is None else int(max_line_bytes)
    while True:
        try:
            chunk = fh.read(block_bytes)
            if not chunk:
                return
            rest = b""
            if not chunk.endswith(b"\n"):
                rest = fh.readline(most + 1)
        except GraphFormatError as exc:  # CheckedGzipFile: corrupt / truncated stream, name the line
            raise stream_error_at(exc, path, line) from None
        except (OSError, EOFError, zlib.error) as exc:
            raise GraphFormatError(f"corrupt or truncated compressed stream: {exc} "
                                   "(in the data from this line on)", path, line) from None
        if rest and not rest.endswith(b"\n") and len(chunk) - chunk.rfind(b"\n") - 1 + len(rest) > most:
            raise GraphFormatError(f"a line longer than {most:,} bytes (no line of this format is that long: a "
                                   f"corrupt file, or a compressed one that inflates to one endless line)", path,
                                   line + chunk.count(b"\n"))
        chunk += rest
        if not chunk.endswith(b"\n"):
            chunk += b"\n"
        if first:
            first = False
            chunk = without_bom(chunk)
        yield chunk, line
        line += chunk.count(b"\n")


_TRANS_COMMA = bytes.maketrans(b",", b" ")


def scan_block(blk: bytes, first_line: int, path, *, dtype=np.int64, comments: bytes = b"#%",
               commas: bool = False, parse: bool = True) -> Block:
    """Parse one block (must end with a newline). See the module doc.

    comments : bytes that start a comment running to the end of the line.
    commas : treat ``,`` as whitespace (comma-separated files).
    parse : False = only count tokens per line; ``values`` is then empty and
        ``text`` holds the block with comments and commas blanked, for the
        caller's own parser (see :func:`parse_columns`).
    """
    if commas:
        blk = blk.translate(_TRANS_COMMA)
    b = np.frombuffer(blk, dtype=np.uint8)
    has_comment = any(blk.find(bytes([c])) >= 0 for c in comments)
    nl = np.flatnonzero(b == 10)
    nlines = nl.size
    comment_line = np.zeros(nlines, dtype=bool)
    if has_comment:
        b = b.copy()
        isc = np.zeros(b.size, dtype=bool)
        for c in comments:
            isc |= b == c
        cpos = np.flatnonzero(isc)
        ends = nl[np.searchsorted(nl, cpos)]  # the newline closing each comment
        mark = np.zeros(b.size + 1, dtype=np.int32)
        np.add.at(mark, cpos, 1)
        np.add.at(mark, ends, -1)
        blank = np.cumsum(mark[:-1]) > 0
        b[blank] = 32
        comment_line[np.unique(np.searchsorted(nl, cpos))] = True
        blk = b.tobytes()
    space = b <= 32
    start = ~space
    start[1:] &= space[:-1]
    line_start = np.empty(nlines, dtype=np.int64)
    if nlines:
        line_start[0] = 0
        line_start[1:] = nl[:-1] + 1
        counts = np.add.reduceat(start, line_start, dtype=np.int64)
    else:
        counts = np.zeros(0, dtype=np.int64)
    ntok = int(counts.sum())
    comment_line &= counts == 0
    if ntok == 0 or not parse:
        return Block(np.zeros(0, dtype=dtype), counts, comment_line, first_line, blk if ntok else b"")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            vals = np.fromstring(blk, dtype=dtype, sep=" ")
    except (ValueError, DeprecationWarning):
        vals = None
    sign = (b == 43) | (b == 45)   # "+" / "-": fromstring reads one with no digits as 0, one value per token
    lone_sign = bool(np.any(start & sign & np.append(space[1:], True)))
    if vals is None or vals.size != ntok or lone_sign:
        locate_bad_token(blk, first_line, path, dtype=dtype)
        raise GraphFormatError("unparsable numbers in this block", path, first_line)  # not reached
    if dtype == np.int64:
        sat = (vals == _I64_MAX) | (vals == _I64_MIN)
        if sat.any():
            i = int(np.flatnonzero(sat)[0])
            tok = _nth_token(blk, i)
            if int(tok) != int(vals[i]):
                raise GraphFormatError(f"integer {tok.decode(errors='replace')!r} does not fit in 64 bits",
                                       path, Block(vals, counts, comment_line, first_line).line_of_value(i))
    return Block(vals, counts, comment_line, first_line)


def _nth_token(blk: bytes, i: int) -> bytes:
    return blk.split()[i]


def locate_bad_token(blk: bytes, first_line: int, path, *, dtype=np.int64, kinds: tuple | None = None) -> None:
    """Slow path: walk the block line by line and raise GraphFormatError at
    the first token that is not a number of ``dtype`` (or, with ``kinds``, of
    the dtype of its column; the last kind covers further columns). Comments
    were already blanked by the caller."""
    kinds = kinds or (dtype,)
    for off, line in enumerate(blk.split(b"\n")):
        for col, tok in enumerate(line.split()):
            dt = kinds[min(col, len(kinds) - 1)]
            pat = _INT_RE if dt == np.int64 else _FLOAT_RE
            if not pat.match(tok):
                shown = tok.decode("utf-8", errors="replace")
                if len(shown) > 40:
                    shown = shown[:40] + "..."
                kind = "an integer" if dt == np.int64 else "a number"
                raise GraphFormatError(f"bad token {shown!r}: expected {kind}", path, first_line + off)
            if dt == np.int64 and not (_I64_MIN <= int(tok) <= _I64_MAX):
                raise GraphFormatError(f"integer {tok.decode()!r} does not fit in 64 bits", path,
                                       first_line + off)


def parse_columns(blk: Block, path, kinds: tuple) -> np.ndarray:
    """Parse a block scanned with ``parse=False`` whose lines all hold
    ``len(kinds)`` tokens, as a structured array with fields ``c0, c1, ...``
    of the given dtypes (exact int64 ids next to float weights), by numpy's C
    ``loadtxt``. Any failure -> the slow path names the line."""
    import io

    dt = [(f"c{i}", k) for i, k in enumerate(kinds)]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = np.loadtxt(io.BytesIO(blk.text), dtype=dt, comments=None, ndmin=1)
    except (ValueError, OverflowError, UserWarning):
        out = None
    if out is None or out.size != int(np.count_nonzero(blk.counts)):
        locate_bad_token(blk.text, blk.first_line, path, kinds=kinds)
        raise GraphFormatError("unparsable numbers in this block", path, blk.first_line)
    return out


def check_columns(blk: Block, allowed: tuple[int, ...], path, what: str = "columns") -> None:
    """Every line that holds numbers must hold one of ``allowed`` counts."""
    c = blk.counts
    bad = (c > 0) & ~np.isin(c, allowed)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        want = " or ".join(str(a) for a in allowed)
        raise GraphFormatError(f"expected {want} {what}, found {int(c[i])}", path, blk.first_line + i)
