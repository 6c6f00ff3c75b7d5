"""Edge tables through pyarrow: Parquet, Arrow IPC / Feather, CSV with a header.

Columns ``src, dst[, weight]`` (names configurable) hold one edge per row.
pyarrow reads the file (columnar, multi-threaded C++; only the needed columns
are loaded); this module checks the columns and hands numpy arrays to
:meth:`partplan.graph.Graph.from_edges`. Ids are 64-bit integers; by default
distinct ids are relabelled to 0..n-1 with ``graph.ids`` keeping the
originals.

Errors name the file and the column: missing column (the available ones are
listed), nulls (first null row; for CSV also its line), non-integer id
columns, uint64 ids beyond int64, negative ids, NaN / inf / negative weights.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
from pathlib import Path

import numpy as np

from ..errors import GraphFormatError
from ..graph import Graph
from ._common import check_edge_file, drops_vertex_weights, first_inexact_integer, format_name

TABLE_FORMATS = ("parquet", "arrow", "feather", "csv")


def _load(p: Path, fmt: str, columns: list[str], delimiter: str):
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.feather as feather
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    from ._common import check_budget, open_regular
    fd, st = open_regular(p)   # a regular file, checked before pyarrow opens it (a FIFO never blocks)
    try:
        if fmt == "parquet" and st.st_size:
            from .parquetcheck import ParquetProblem, declared_bytes
            try:
                with os.fdopen(os.dup(fd), "rb") as f:
                    md = pq.read_metadata(f)
            except (pa.ArrowException, OSError):
                md = None             # not Parquet: pyarrow's own error below names it
            footer = pages = 0
            if md is not None:
                try:
                    footer, pages = declared_bytes(fd, md, columns)
                except (ParquetProblem, pa.ArrowException, OSError, ValueError) as exc:
                    raise GraphFormatError(f"cannot read parquet table: {exc}", p) from None
            check_budget(footer, p, "the table's columns (footer, uncompressed)")
            check_budget(pages, p, "the table's pages (their headers, uncompressed)")
            if md is not None:   # the pages held while the graph is built from their rows (a 435 kB file
                from ._common import graph_bytes       # of 5·10^7 zstd rows holds 3.1 GB of them)
                check_budget(pages + graph_bytes(0, md.num_rows, weighted=len(columns) > 2), p,
                             f"the table's {md.num_rows:,} rows and the graph built from them")
        if fmt in ("arrow", "feather") and st.st_size:
            import mmap

            from .arrowcheck import IpcProblem, ipc_batches
            with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as mm:
                try:
                    claimed = sum(b.decompressed_bytes for b in ipc_batches(mm))
                except IpcProblem:
                    claimed = 0    # a stream or Feather v1 file: pyarrow's own checks below
            check_budget(claimed, p, "the table's record batches (decompressed)")
    finally:
        os.close(fd)
    try:
        if fmt == "parquet":
            schema = pq.read_schema(p)
            names = schema.names
            return pq.read_table(p, columns=[c for c in columns if c in names]), names, 0
        if fmt == "feather":
            t = feather.read_table(p)
            t.validate(full=True)
            return t, t.column_names, 0
        if fmt == "arrow":
            try:
                with pa.memory_map(str(p)) as src:
                    t = ipc.open_file(src).read_all()
            except pa.ArrowInvalid:
                with pa.memory_map(str(p)) as src:
                    t = ipc.open_stream(src).read_all()
            t.validate(full=True)
            return t, t.column_names, 0
        if fmt == "csv":
            _check_csv_rows(p, weighted=len(columns) > 2)
            src, skip = _csv_source(p, delimiter, columns)
            try:
                with src:
                    t = pacsv.read_csv(src, read_options=pacsv.ReadOptions(skip_rows=skip),
                                       parse_options=pacsv.ParseOptions(delimiter=delimiter),
                                       convert_options=pacsv.ConvertOptions(include_columns=None))
            except pa.ArrowInvalid as exc:
                if "Expected" in str(exc) and "columns" in str(exc):   # a row of another width: find its line
                    _raise_bad_csv_row(p, delimiter, columns, exc)
                raise
            return t, t.column_names, skip
    except FileNotFoundError:
        raise GraphFormatError("file not found", p) from None
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:  # ArrowInvalid, Memory (hostile metadata),
        # ..., and non-UTF-8 column names
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise GraphFormatError(f"cannot read {fmt} table: {msg}", p) from None
    raise GraphFormatError(f"unknown table format {fmt!r}", p)


def _check_csv_rows(p: Path, *, weighted: bool, block: int = 1 << 24) -> None:
    """The graph of a CSV file's rows (one per line, a lower bound on its edges' memory,
    :func:`~partplan.io._common.graph_bytes`) within the memory budget, counted a block at a time
    before pyarrow reads the table (it infers the column types from the whole text, and holds it):
    a small gzip that inflates to gigabytes of rows is refused after a budget's worth of them."""
    from ._common import GZIP_ERRORS, check_budget, graph_bytes, input_size, memory_budget, open_binary
    budget, rows = memory_budget(), 0
    size, gz = input_size(p)
    if not gz and graph_bytes(0, size // 4 + 1, weighted=weighted) <= budget:
        return          # a row takes 4 bytes at least ("0,1\n"): a plain file this small fits, uncounted
    with open_binary(p, text=False) as fh:
        while True:
            try:
                chunk = fh.read(block)
            except GZIP_ERRORS as exc:
                raise GraphFormatError(f"corrupt gzip stream ({exc})", p) from None
            if not chunk:
                return
            rows += chunk.count(b"\n")
            if graph_bytes(0, rows, weighted=weighted) > budget:
                check_budget(graph_bytes(0, rows, weighted=weighted), p, f"the {rows:,} rows read so far")


def _raise_bad_csv_row(p: Path, delimiter: str, columns: list[str], exc: Exception) -> None:
    """A CSV file pyarrow refused for a row of another width (``exc``): read it again in one thread
    (this path only), where pyarrow knows each row's line, and raise one GraphFormatError naming
    the first bad row's line — found on the raw bytes when the row is not UTF-8
    (:func:`_first_wide_line`), else ``exc``'s message, escaped, without a line."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    bad = []

    def first_bad(row):      # blank lines are rows here (so that rows are lines), skipped as the read did
        if not row.text.strip():
            return "skip"
        bad.append(row)
        return "error"
    src, skip = _csv_source(p, delimiter, columns)
    try:
        with src, _quiet_undecodable_rows(first_bad):
            pacsv.read_csv(src, read_options=pacsv.ReadOptions(skip_rows=skip, use_threads=False),
                           parse_options=pacsv.ParseOptions(delimiter=delimiter, invalid_row_handler=first_bad,
                                                            ignore_empty_lines=False))
    except pa.ArrowInvalid:
        pass
    if bad and bad[0].number is not None:
        row = bad[0]
        text = row.text if len(row.text) <= 40 else row.text[:40] + "..."
        raise GraphFormatError(f"expected {row.expected_columns} columns, found {row.actual_columns}: "
                               f"{text!r}", p, int(row.number)) from None
    found = _first_wide_line(p, delimiter, skip)
    if found is not None:
        line, want, got, raw = found
        text = raw[:40].decode("utf-8", "backslashreplace") + ("..." if len(raw) > 40 else "")
        raise GraphFormatError(f"expected {want} columns, found {got}: '{text}'", p, line) from None
    raise GraphFormatError(f"cannot read csv table: a row of another width than the header "
                           f"({str(exc).splitlines()[0].encode('ascii', 'backslashreplace').decode()[:120]})",
                           p) from None


_HOOK_LOCK = threading.Lock()


@contextlib.contextmanager
def _quiet_undecodable_rows(handler):
    """Within the block, the UnicodeDecodeError pyarrow meets when it decodes a row that is not
    UTF-8 for ``handler`` (before calling it) is dropped instead of printed by Python as "Exception
    ignored in: ... handler"; every other unraisable exception goes to the hook in place."""
    with _HOOK_LOCK:
        saved = sys.unraisablehook

        def hook(unraisable):
            if not (isinstance(unraisable.exc_value, UnicodeDecodeError) and unraisable.object is handler):
                saved(unraisable)
        sys.unraisablehook = hook
        try:
            yield
        finally:
            sys.unraisablehook = saved


def _first_wide_line(p: Path, delimiter: str, skip: int) -> tuple[int, int, int, bytes] | None:
    """(line, header's columns, the row's, its bytes) of the first data line whose count of
    ``delimiter`` differs from the header's (line ``skip`` + 1; blank lines skipped), counted on the
    raw bytes — for the rows pyarrow cannot hand to a handler (not UTF-8); None when every line has
    the header's width (a quoted delimiter, which this count does not know)."""
    from ._common import open_binary
    sep = delimiter.encode()
    want = None
    with open_binary(p, text=False) as fh:
        for no, line in enumerate(fh, 1):
            if no <= skip:
                continue
            row = line.rstrip(b"\r\n")
            if want is None:
                want = row.count(sep) + 1
            elif row.strip() and row.count(sep) + 1 != want:
                return no, want, row.count(sep) + 1, row
    return None


def _csv_source(p: Path, delimiter: str, columns: list[str]) -> tuple:
    """(what ``pyarrow.csv.read_csv`` reads, lines before the header): the file itself, or its gzip
    stream (by the magic bytes, whatever the name; inflated as it is read); the lines before the
    header are skipped when every one of them is blank or starts with ``#`` or ``%`` (comments, as
    the edge-list reader skips them) and the header is the first line that names the ``columns``
    (src and dst) — a header such as ``#src,dst`` naming its own columns is kept."""
    import pyarrow as pa

    from ._common import GZIP_ERRORS, input_size, open_binary
    gz = input_size(p)[1]
    with open_binary(p, text=False) as fh:     # gzip by its magic bytes, as every reader here
        try:
            head = fh.read(1 << 16)
        except GZIP_ERRORS as exc:
            raise GraphFormatError(f"corrupt gzip stream ({exc})", p) from None
    src = pa.CompressedInputStream(pa.OSFile(str(p)), "gzip") if gz else pa.OSFile(str(p))   # not by its name
    want = {c.encode() for c in columns[:2]}
    skip = 0
    for line in head.splitlines():
        names = {t.strip().strip(b'"') for t in line.split(delimiter.encode())}
        if want <= names:
            return src, skip
        s = line.strip()
        if s and s[:1] not in (b"#", b"%"):
            break
        skip += 1
    return src, 0


def _row_where(fmt: str, row: int, skip: int = 0) -> tuple[str, int | None]:
    """Message text and line number (CSV: header is line 1 after ``skip`` comment lines) of a
    0-based row."""
    return f"row {row}", (row + 2 + skip if fmt == "csv" else None)


def _ids(t, col: str, p: Path, fmt: str, skip: int = 0) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc

    arr = t.column(col)
    if arr.null_count:
        r = int(pc.index(pc.is_null(arr), True).as_py())
        what, line = _row_where(fmt, r, skip)
        raise GraphFormatError(f"null vertex id at {what}", p, line, field=col)
    typ = arr.type
    if not pa.types.is_integer(typ):
        detail = ""
        if pa.types.is_floating(typ):
            a = arr.to_numpy()
            bad = ~np.isfinite(a) | (a != np.floor(a))
            big = ~bad & (np.abs(a) >= 2.0 ** 63)
            if big.any():  # e.g. CSV ids beyond 2^63 that pyarrow parsed as double
                r = int(np.flatnonzero(big)[0])
                what, line = _row_where(fmt, r, skip)
                raise GraphFormatError(f"vertex id of about {float(a[r]):.6g} at {what} does not fit in 64 bits "
                                       f"(ids must lie in [0, 2^63))", p, line,
                                       field=col)
            if bad.any():
                r = int(np.flatnonzero(bad)[0])
                what, line = _row_where(fmt, r, skip)
                raise GraphFormatError(f"non-integer vertex id {float(a[r])!r} at {what}", p, line, field=col)
            detail = " (integral floats: cast the column to int64)"
        elif pa.types.is_string(typ) or pa.types.is_large_string(typ):
            detail = " (string ids: map them to integers first)"
        raise GraphFormatError(f"vertex ids must be integers, column has type {typ}{detail}", p, field=col)
    a = arr.to_numpy()
    if a.dtype == np.uint64 and a.size and a.max() > np.iinfo(np.int64).max:
        r = int(np.flatnonzero(a > np.iinfo(np.int64).max)[0])
        what, line = _row_where(fmt, r, skip)
        raise GraphFormatError(f"id {int(a[r])} at {what} does not fit in int64", p, line, field=col)
    a = a.astype(np.int64, copy=False)
    if a.size and a.min() < 0:
        r = int(np.flatnonzero(a < 0)[0])
        what, line = _row_where(fmt, r, skip)
        raise GraphFormatError(f"negative vertex id {int(a[r])} at {what}", p, line, field=col)
    return a


def read_edge_table(path: str | os.PathLike, *, format: str | None = None, src: str = "src",
                    dst: str = "dst", weight: str | None = "weight", weighted: bool | None = None,
                    delimiter: str = ",", symmetrize: bool = False, self_loops: str = "keep",
                    dedupe: bool = True, drop_isolated: bool = False, relabel: bool = True,
                    name: str | None = None) -> Graph:
    """Read an edge table (Parquet / Arrow IPC / Feather / CSV with header).

    format : "parquet" | "arrow" | "feather" | "csv"; default from the extension.
    src, dst, weight : column names. The weight column is used when present
        (``weighted=None``), required with ``weighted=True``, ignored with False.
    relabel : as in :func:`partplan.io.edgelist.read_edgelist`.
    """
    from ._edges import edges_to_graph

    p = Path(path)
    fmt = format or _format_of(p)
    if fmt not in TABLE_FORMATS:
        raise GraphFormatError(f"unknown table format {fmt!r} (expected one of {TABLE_FORMATS})", p)
    want = [src, dst] + ([weight] if weight and weighted is not False else [])
    t, names, skip = _load(p, fmt, want, delimiter)
    for col in (src, dst):
        if col not in names:
            raise GraphFormatError(f"missing column {col!r} (the table has {names}); name the edge columns "
                                   f"{src!r} and {dst!r} (from Python: read_graph(path, src=NAME, dst=NAME))", p,
                                   field=col)
    use_w = bool(weight) and weighted is not False and weight in names
    if weighted and not use_w:
        raise GraphFormatError(f"weighted=True but there is no column {weight!r} (the table has {names})",
                               p, field=weight or "weight")
    s = _ids(t, src, p, fmt, skip)
    d = _ids(t, dst, p, fmt, skip)
    w = None
    if use_w:
        import pyarrow as pa
        import pyarrow.compute as pc

        arr = t.column(weight)
        if arr.null_count:
            r = int(pc.index(pc.is_null(arr), True).as_py())
            what, line = _row_where(fmt, r, skip)
            raise GraphFormatError(f"null weight at {what}", p, line, field=weight)
        if not (pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)):
            raise GraphFormatError(f"weights must be numbers, column has type {arr.type}", p, field=weight)
        raw = arr.to_numpy()
        big = first_inexact_integer(raw)
        if big is not None:
            what, line = _row_where(fmt, big, skip)
            raise GraphFormatError(f"integer weight {int(raw[big])} at {what} is above 2^53: partplan holds "
                                   f"weights as float64, exact up to 2^53", p, line, field=weight)
        w = raw.astype(np.float64)
        bad = ~np.isfinite(w) | (w < 0)
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            what, line = _row_where(fmt, r, skip)
            kind = "negative" if np.isfinite(w[r]) else "non-finite"
            raise GraphFormatError(f"{kind} weight {float(w[r])!r} at {what}", p, line, field=weight)
    if s.size == 0:
        raise GraphFormatError("the edge table has no rows", p)
    return edges_to_graph(s, d, w, p, relabel=relabel, symmetrize=symmetrize, self_loops=self_loops,
                          dedupe=dedupe, drop_isolated=drop_isolated, name=name)


def _format_of(p: Path) -> str:
    ext = format_name(p).rsplit(".", 1)[-1]
    return {"pq": "parquet", "ipc": "arrow", "tsv": "csv"}.get(ext, ext)


def write_arrow_table(table, path: str | os.PathLike, fmt: str) -> Path:
    """Write a pyarrow ``table`` as ``fmt`` ("parquet", "arrow"/"feather" (Arrow
    IPC file) or "csv", gzip compressed when named ``.gz``) atomically; pyarrow does the encoding."""
    from ._common import atomic_output

    p = Path(path)
    if fmt not in ("parquet", "arrow", "feather", "csv"):
        raise GraphFormatError(f"unknown table format {fmt!r}", p)
    with atomic_output(p, compress=None if fmt == "csv" else False) as fh:   # CSV: gzip when named .gz
        write_table_to(table, fh, fmt)
    return p


def write_table_to(table, fh, fmt: str) -> None:
    """Encode a pyarrow ``table`` as ``fmt`` ("parquet", "arrow"/"feather" or "csv") into the open
    binary file ``fh`` (the caller owns the file and its atomic replacement)."""
    import pyarrow.csv as pacsv
    import pyarrow.feather as feather
    import pyarrow.parquet as pq
    if fmt == "parquet":
        pq.write_table(table, fh)
    elif fmt == "csv":
        pacsv.write_csv(table, fh)
    else:
        feather.write_feather(table, fh)


@drops_vertex_weights("an edge table")
def write_edge_table(graph: Graph, path: str | os.PathLike, *, format: str | None = None,
                     original_ids: bool = True) -> Path:
    """Write the edges (``src, dst[, weight]``) as Parquet / Arrow / Feather /
    CSV, chosen by extension; atomic (temp file + ``os.replace``). Refuses and warns as
    :func:`partplan.io._common.check_edge_file` says (what the table reader would refuse or drop)."""
    import pyarrow as pa

    p = Path(path)
    check_edge_file(graph, p, format or _format_of(p))
    r, c = graph.rows, graph.indices
    if original_ids and graph.ids is not None:
        r, c = graph.ids[r], graph.ids[c]
    cols = {"src": r, "dst": c}
    if graph.data is not None:
        cols["weight"] = graph.data
    return write_arrow_table(pa.table(cols), p, format or _format_of(p))
