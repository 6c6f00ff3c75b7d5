"""What a Parquet file's pages declare, read from their headers before pyarrow
decompresses any of them.

A Parquet column chunk is a run of pages, each a Thrift ``PageHeader``
followed by its (possibly compressed) bytes. pyarrow allocates each page's
``uncompressed_page_size`` before decompressing it, and nothing ties that
figure to the footer's ``total_uncompressed_size``: a re-signed file can keep
an honest footer and ask for gigabytes per page. :func:`declared_page_bytes`
walks the page headers of the columns a reader will read (Thrift compact
protocol, bounds-checked, a few dozen bytes per page) so the reader can
compare what the pages declare with what the data can need.
"""
from __future__ import annotations

_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)
_MAX_DEPTH = 32          # nesting of structs / lists in one header (the format's own is below 5)
_MAX_PAGE_HEADER = 1 << 20   # bytes one page header may take (pyarrow's default limit is 16 MiB)


class ParquetProblem(ValueError):
    """A page header is malformed or declares impossible sizes (one line)."""


class _Compact:
    """A bounds-checked reader of Thrift's compact protocol over ``buf[pos:end]``."""

    def __init__(self, buf, pos: int, end: int):
        self.b, self.pos, self.end = buf, pos, end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise ParquetProblem(f"page header runs past its column chunk at byte {self.pos}")
        v = self.b[self.pos]
        self.pos += 1
        return v

    def varint(self) -> int:
        v = shift = 0
        for _ in range(10):
            c = self.byte()
            v |= (c & 0x7F) << shift
            if not c & 0x80:
                return v
            shift += 7
        raise ParquetProblem(f"varint longer than 10 bytes at byte {self.pos}")

    def zigzag(self) -> int:
        v = self.varint()
        return (v >> 1) ^ -(v & 1)

    def skip_bytes(self, n: int) -> None:
        if n < 0 or self.pos + n > self.end:
            raise ParquetProblem(f"a field of {n} bytes runs past its column chunk at byte {self.pos}")
        self.pos += n

    def skip(self, ttype: int, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise ParquetProblem("page header nested too deeply")
        if ttype in (_TRUE, _FALSE):
            return
        if ttype == _BYTE:
            self.skip_bytes(1)
        elif ttype in (_I16, _I32, _I64):
            self.varint()
        elif ttype == _DOUBLE:
            self.skip_bytes(8)
        elif ttype == _BINARY:
            self.skip_bytes(self.varint())
        elif ttype in (_LIST, _SET):
            h = self.byte()
            size, et = h >> 4, h & 0x0F
            if size == 15:
                size = self.varint()
            self._skip_items(size, [et], depth)
        elif ttype == _MAP:
            size = self.varint()
            if size:
                h = self.byte()
                self._skip_items(size, [h >> 4, h & 0x0F], depth)
        elif ttype == _STRUCT:
            self.fields(depth + 1)
        else:
            raise ParquetProblem(f"unknown Thrift type {ttype} at byte {self.pos}")

    def _skip_items(self, size: int, types: list[int], depth: int) -> None:
        if size > self.end - self.pos:   # every element takes at least one byte
            raise ParquetProblem(f"a list of {size} elements runs past its column chunk")
        for _ in range(size):
            for t in types:
                if t in (_TRUE, _FALSE):
                    self.skip_bytes(1)   # booleans inside lists take a byte each
                else:
                    self.skip(t, depth + 1)

    def fields(self, depth: int = 0, want: tuple = ()) -> dict:
        """Read one struct's fields; returns {field id: value} for the i32 fields in ``want``."""
        got: dict = {}
        fid = 0
        while True:
            h = self.byte()
            ttype = h & 0x0F
            if ttype == _STOP:
                return got
            delta = h >> 4
            fid = fid + delta if delta else self.zigzag()
            if fid in want and ttype == _I32:
                got[fid] = self.zigzag()
            else:
                self.skip(ttype, depth)


def _chunk_pages(buf, start: int, length: int, where: str) -> int:
    """Sum of ``uncompressed_page_size`` over the pages of one column chunk."""
    end = start + length
    if start < 0 or length < 0 or end > len(buf):
        raise ParquetProblem(f"{where}: column chunk [{start}, {end}) lies outside the file ({len(buf)} bytes)")
    total, pos = 0, start
    while pos < end:
        r = _Compact(buf, pos, min(end, pos + _MAX_PAGE_HEADER))
        try:
            h = r.fields(want=(2, 3))
        except ParquetProblem as exc:
            raise ParquetProblem(f"{where}: page header at byte {pos}: {exc}") from None
        if 2 not in h or 3 not in h:
            raise ParquetProblem(f"{where}: page header at byte {pos} lacks its sizes")
        raw, packed = h[2], h[3]
        if raw < 0 or packed < 0:
            raise ParquetProblem(f"{where}: page at byte {pos} declares a negative size ({raw}, {packed})")
        pos = r.pos + packed
        if pos > end:
            raise ParquetProblem(f"{where}: page at byte {r.pos} ({packed} bytes) runs past its column chunk")
        total += raw
    return total


def _value(r: _Compact, ttype: int, depth: int):
    """One Thrift value: ints, booleans, lists and structs ({field id: value}); strings and
    doubles are skipped (None)."""
    if depth > _MAX_DEPTH:
        raise ParquetProblem("footer nested too deeply")
    if ttype in (_TRUE, _FALSE):
        return ttype == _TRUE
    if ttype == _BYTE:
        return r.byte()
    if ttype in (_I16, _I32, _I64):
        return r.zigzag()
    if ttype in (_LIST, _SET):
        h = r.byte()
        size, et = h >> 4, h & 0x0F
        if size == 15:
            size = r.varint()
        if size > r.end - r.pos:
            raise ParquetProblem(f"a list of {size} elements runs past the footer")
        if et in (_TRUE, _FALSE):
            return [r.byte() == 1 for _ in range(size)]
        return [_value(r, et, depth + 1) for _ in range(size)]
    if ttype == _STRUCT:
        out: dict = {}
        fid = 0
        while True:
            h = r.byte()
            t = h & 0x0F
            if t == _STOP:
                return out
            fid = fid + (h >> 4) if h >> 4 else r.zigzag()
            out[fid] = _value(r, t, depth + 1)
    r.skip(ttype, depth)
    return None


def check_footer(buf, metadata) -> None:
    """The footer's size statistics against the schema: a column chunk's definition /
    repetition level histogram holds max level + 1 entries (or none). pyarrow's Python
    metadata (``row_group(g).column(j)``) aborts the process on any other count (a C++
    exception through a binding that does not catch it), so this runs first, with the
    levels of pyarrow's own reading of the schema. Encrypted footers are left to pyarrow."""
    n = len(buf)
    if n < 12 or bytes(buf[n - 4:n]) != b"PAR1":
        return
    flen = int.from_bytes(buf[n - 8:n - 4], "little")
    if flen > n - 12:
        raise ParquetProblem(f"footer of {flen} bytes does not fit the file ({n} bytes)")
    fmd = _value(_Compact(buf, n - 8 - flen, n - 8), _STRUCT, 0)
    sch = metadata.schema
    levels = [(sch.column(j).max_definition_level, sch.column(j).max_repetition_level)
              for j in range(len(sch))]
    groups = fmd.get(4) if isinstance(fmd.get(4), list) else []
    for g, rg in enumerate(groups):
        cols = rg.get(1) if isinstance(rg, dict) and isinstance(rg.get(1), list) else []
        for j, cc in enumerate(cols[:len(levels)]):
            md = cc.get(3) if isinstance(cc, dict) else None
            ss = md.get(16) if isinstance(md, dict) else None
            if not isinstance(ss, dict):
                continue
            for fid, top, what in ((3, levels[j][0], "definition"), (2, levels[j][1], "repetition")):
                h = ss.get(fid)
                if h is not None and (not isinstance(h, list) or len(h) not in (0, top + 1)):
                    size = len(h) if isinstance(h, list) else type(h).__name__
                    raise ParquetProblem(f"row group {g}, column {j}: the {what} level histogram holds {size} "
                                         f"entries, the schema's levels need {top + 1}")


def declared_page_bytes(buf, metadata, columns: list[int]) -> int:
    """Bytes the pages of ``columns`` (indices into the file's leaf columns)
    declare once decompressed, summed over every row group; ``buf`` is the
    whole file (bytes or an mmap), ``metadata`` its ``pyarrow`` FileMetaData.
    Raises :class:`ParquetProblem` on a malformed header or a page outside
    its chunk."""
    total = 0
    for g in range(metadata.num_row_groups):
        rg = metadata.row_group(g)
        for j in columns:
            if j >= rg.num_columns:
                continue
            c = rg.column(j)
            if c.num_values == 0 and rg.num_rows == 0:   # an empty row group: pyarrow reads no page of it
                continue
            start = c.data_page_offset
            if c.has_dictionary_page and c.dictionary_page_offset is not None and c.dictionary_page_offset > 0:
                start = min(start, c.dictionary_page_offset)
            total += _chunk_pages(buf, int(start), int(c.total_compressed_size),
                                  f"row group {g} column {c.path_in_schema!r}")
    return total


def _leaves(t) -> int:
    """Parquet leaf columns of an arrow type (a nested type has one per primitive inside)."""
    import pyarrow as pa
    if pa.types.is_struct(t):
        return sum(_leaves(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _leaves(t.key_type) + _leaves(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaves(t.value_type)
    return 1


def leaf_columns(metadata, names) -> list[int]:
    """Indices of the leaf columns under the top-level columns ``names`` (by the
    arrow schema's fields, in order: a name may hold dots)."""
    want, out, at = set(names), [], 0
    for f in metadata.schema.to_arrow_schema():
        n = _leaves(f.type)
        if f.name in want:
            out.extend(range(at, at + n))
        at += n
    return [i for i in out if i < metadata.num_columns]


def declared_bytes(fd: int, metadata, names) -> tuple[int, int]:
    """(footer, pages): the uncompressed bytes the columns ``names`` declare in
    the footer (``total_uncompressed_size``) and in their page headers, of the
    Parquet file open on ``fd`` (read through a read-only mmap)."""
    import mmap
    import os
    if os.fstat(fd).st_size:
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as mm:
            check_footer(mm, metadata)   # before any row_group(g).column(j): pyarrow aborts on some footers
    cols = leaf_columns(metadata, names)
    footer = sum(metadata.row_group(g).column(j).total_uncompressed_size
                 for g in range(metadata.num_row_groups) for j in cols if j < metadata.row_group(g).num_columns)
    if not cols or os.fstat(fd).st_size == 0:
        return footer, 0
    with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as mm:
        return footer, declared_page_bytes(mm, metadata, cols)
