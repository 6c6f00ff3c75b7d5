"""Matrix Market ``.mtx`` (coordinate format) reader and writer.

Supported banner: ``%%MatrixMarket matrix coordinate <field> <symmetry>``
with field ``pattern`` / ``real`` / ``integer`` (``double`` accepted as real)
and symmetry ``general`` / ``symmetric`` / ``skew-symmetric``. Indices are
1-based. The size line ``M N NNZ`` must describe a square matrix and NNZ must
equal the number of entry lines; before any entry is read it is checked
against the file length and the graph against the memory budget
(:func:`partplan.io._common.check_budget`). Symmetric files store one
triangle (the lower; upper-only is read too) and every off-diagonal entry is
mirrored (skew: mirrored with the opposite sign), the same convention as
``scipy.io.mmread``; a symmetric file with entries on BOTH sides of the
diagonal is an error naming the line (mirroring would sum the pair, agreeing
or not). Duplicates are summed (``dedupe``),
explicit zeros are kept as structural entries. Matrix values may be negative;
NaN / inf are rejected. ``complex`` / ``hermitian`` and the dense ``array``
format are refused with a clear error.

Entries are parsed by the streaming block tokenizer :mod:`partplan.io._text`
(numpy's C parser), so large files load without a Python object per line;
the CSR is built by scipy via :class:`partplan.graph.Graph`.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import BackendUnavailableError, GraphFormatError
from ..graph import Graph
from . import _text
from ._common import (atomic_output, check_budget, check_file_holds, check_int64, drops_vertex_weights, graph_bytes,
                      open_binary,
                      stream_error_at, without_bom, write_table_text)



def _header(fh, p):
    """Parse banner, comments and size line. Returns (field, symmetry, M, N,
    NNZ, line number of the size line)."""
    try:
        banner = fh.readline()
    except GraphFormatError as exc:  # corrupt gzip stream
        raise stream_error_at(exc, p, 1) from None
    if not banner:
        raise GraphFormatError("empty file (expected a %%MatrixMarket banner)", p, 1)
    banner = without_bom(banner)
    toks = banner.decode("latin-1").split()
    if len(toks) < 5 or toks[0].lower() != "%%matrixmarket":
        raise GraphFormatError("missing '%%MatrixMarket matrix coordinate <field> <symmetry>' banner", p, 1)
    obj, fmt, field, sym = (t.lower() for t in toks[1:5])
    if obj != "matrix":
        raise GraphFormatError(f"object {obj!r} is not supported (only 'matrix')", p, 1)
    if fmt == "array":
        raise GraphFormatError("dense 'array' format is not a graph; convert it to 'coordinate'", p, 1)
    if fmt != "coordinate":
        raise GraphFormatError(f"unknown format {fmt!r} (expected 'coordinate')", p, 1)
    if field == "double":
        field = "real"
    if field == "complex" or sym == "hermitian":
        raise BackendUnavailableError(f"{p}:line 1: complex / hermitian Matrix Market files are not supported")
    if field not in ("pattern", "real", "integer"):
        raise GraphFormatError(f"unknown field {field!r} (expected pattern, real or integer)", p, 1)
    if sym not in ("general", "symmetric", "skew-symmetric"):
        raise GraphFormatError(f"unknown symmetry {sym!r} (expected general, symmetric or skew-symmetric)", p, 1)
    if field == "pattern" and sym == "skew-symmetric":
        raise GraphFormatError("a pattern matrix cannot be skew-symmetric", p, 1)
    no = 1
    while True:
        try:
            line = fh.readline()
        except GraphFormatError as exc:  # corrupt gzip stream
            raise stream_error_at(exc, p, no + 1) from None
        no += 1
        if not line:
            raise GraphFormatError("missing size line 'M N NNZ'", p, no - 1)
        s = line.strip()
        if not s or s.startswith(b"%"):
            continue
        parts = s.split()
        if len(parts) != 3 or not all(_text._INT_RE.match(t) for t in parts):
            raise GraphFormatError(f"bad size line {s.decode('latin-1')[:60]!r}: expected 'M N NNZ'", p, no)
        M, N, NNZ = (int(t) for t in parts)
        for name, v in zip(("M", "N", "NNZ"), (M, N, NNZ)):
            check_int64(v, p, f"size {name}", line=no, field=name)
            if v < 0:
                raise GraphFormatError(f"negative size {name} = {v} on the size line", p, no, field=name)
        if M != N:
            raise GraphFormatError(f"matrix is rectangular ({M} x {N}); a graph needs a square matrix", p, no)
        return field, sym, M, N, NNZ, no


def _check_sizes(p, field: str, sym: str, M: int, NNZ: int, line: int) -> None:
    """Before reading any entry: the file must be long enough for NNZ entry
    lines (``"i j\\n"`` is at least 4 bytes, with a value 6), and the graph the
    size line describes (M + 1 row pointers, NNZ entries, twice that for a
    symmetric file) must fit in the memory budget."""
    check_file_holds(NNZ, 4 if field == "pattern" else 6, p, "NNZ", line=line, field="NNZ")
    entries = NNZ * (1 if sym == "general" else 2)
    check_budget(graph_bytes(M, entries, weighted=field != "pattern"), p,
                 f"a {M} x {M} matrix with {entries} entries", line=line,
                 field="M" if graph_bytes(M, 0) >= graph_bytes(0, entries) else "NNZ")


def read_mtx(path: str | os.PathLike, *, symmetrize: bool = False, self_loops: str = "keep",
             dedupe: bool = True, drop_isolated: bool = False, name: str | None = None,
             block_bytes: int = _text.BLOCK_BYTES) -> Graph:
    """Read a Matrix Market coordinate file as a :class:`Graph` (see module doc).

    The graph is ``directed=False`` for symmetric / skew-symmetric files.
    ``pattern`` files give ``data=None``; others float64 values.
    """
    p = Path(path)
    with open_binary(p) as fh:
        field, sym, M, _, NNZ, size_line = _header(fh, p)
        _check_sizes(p, field, sym, M, NNZ, size_line)
        first_lower = first_upper = None   # (line, i, j) of the first entry below / above the diagonal
        ncols = 2 if field == "pattern" else 3
        dtype = np.int64 if ncols == 2 else np.float64
        rows, cols, vals = [], [], []
        got = 0
        last_line = size_line
        for raw, line0 in _text.iter_raw_blocks(fh, size_line + 1, block_bytes, p, max_line_bytes=_text.SHORT_LINE_BYTES):
            blk = _text.scan_block(raw, line0, p, dtype=dtype, comments=b"%", parse=ncols == 2)
            last_line = line0 + blk.counts.size - 1
            if not blk.counts.any():
                continue
            _text.check_columns(blk, (ncols,), p, "columns (row col" + ("" if ncols == 2 else " value") + ")")
            lines = blk.data_lines()
            nrows = lines.size
            if got + nrows > NNZ:
                raise GraphFormatError(f"more entries than the {NNZ} announced on the size line "
                                       f"(line {size_line})", p, int(lines[NNZ - got]))
            if ncols == 3:
                rec = _text.parse_columns(blk, p, (np.int64, np.int64, np.float64))
                i, j, x = np.ascontiguousarray(rec["c0"]), np.ascontiguousarray(rec["c1"]), rec["c2"].copy()
                bad = ~np.isfinite(x)
                if field == "integer":   # read as float64, which holds integers exactly below 2^53
                    bad |= (x != np.floor(x)) | (np.abs(x) >= 2.0 ** 53)
                if bad.any():
                    r = int(np.flatnonzero(bad)[0])
                    if not np.isfinite(x[r]):
                        what = "non-finite value"
                    elif x[r] != np.floor(x[r]):
                        what = "non-integer value in an integer matrix"
                    elif abs(x[r]) >= 2.0 ** 63:
                        what = "integer value beyond 64 bits in an integer matrix:"
                    else:
                        what = ("integer value of 2^53 or more in an integer matrix (partplan holds values as "
                                "float64, exact below 2^53):")
                    raise GraphFormatError(f"{what} {float(x[r])!r}", p, int(lines[r]), field="value")
                vals.append(x)
            else:
                v = blk.values.reshape(-1, 2)
                i, j = v[:, 0].copy(), v[:, 1].copy()
            out = (i < 1) | (i > M) | (j < 1) | (j > M)
            if out.any():
                r = int(np.flatnonzero(out)[0])
                raise GraphFormatError(f"entry ({int(i[r])}, {int(j[r])}) out of range [1, {M}] "
                                       "(indices are 1-based)", p, int(lines[r]))
            if sym == "skew-symmetric":
                diag = i == j
                if diag.any():
                    r = int(np.flatnonzero(diag)[0])
                    raise GraphFormatError("skew-symmetric matrix with a diagonal entry", p, int(lines[r]))
            if sym != "general":
                if first_lower is None and (lo := np.flatnonzero(i > j)).size:
                    first_lower = (int(lines[lo[0]]), int(i[lo[0]]), int(j[lo[0]]))
                if first_upper is None and (up := np.flatnonzero(i < j)).size:
                    first_upper = (int(lines[up[0]]), int(i[up[0]]), int(j[up[0]]))
                if first_lower is not None and first_upper is not None:
                    _both_triangles(p, sym, first_lower, first_upper)
            rows.append(i - 1)
            cols.append(j - 1)
            got += nrows
    if got != NNZ:
        raise GraphFormatError(f"size line (line {size_line}) announces {NNZ} entries, found {got}", p, last_line)
    r = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    c = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
    x = (np.concatenate(vals) if vals else np.zeros(0)) if ncols == 3 else None
    del rows, cols, vals
    if sym != "general":
        off = r != c
        r, c = np.concatenate([r, c[off]]), np.concatenate([c, r[off]])
        if x is not None:
            x = np.concatenate([x, (-x[off]) if sym == "skew-symmetric" else x[off]])
    g = Graph._from_coo(r, c, x, M, dedupe=dedupe, name=name or _stem(p), directed=(sym == "general"))
    if symmetrize and sym == "symmetric":
        symmetrize = False  # already symmetric, values included (a skew file's are not: symmetrized, |x|)
    if symmetrize or self_loops != "keep" or drop_isolated:
        g = g.normalize(symmetrize=symmetrize, self_loops=self_loops, dedupe=dedupe, drop_isolated=drop_isolated)
    return g


def _both_triangles(p, sym, lower, upper):
    """A symmetric file stores ONE triangle (the spec says the lower one;
    upper-only files are read too): entries on both sides of the diagonal
    would be mirrored twice (a pair (i, j), (j, i) summed, or disagreeing)."""
    later, first = (upper, lower) if upper[0] > lower[0] else (lower, upper)
    side = "above" if later is upper else "below"
    raise GraphFormatError(
        f"entry ({later[1]}, {later[2]}) is {side} the diagonal, but line {first[0]} holds ({first[1]}, "
        f"{first[2]}) on the other side: a {sym} Matrix Market file stores only one triangle (the lower, "
        "i >= j) and each entry is mirrored; declare the file 'general' if it lists both directions",
        p, later[0], field="symmetry")


def _stem(p: Path) -> str:
    name = p.name[:-3] if p.name.lower().endswith(".gz") else p.name
    return name.rsplit(".", 1)[0]


@drops_vertex_weights("Matrix Market")
def write_mtx(graph: Graph, path: str | os.PathLike, *, symmetric: bool | None = None,
              comment: str | None = None) -> Path:
    """Write ``graph`` as a Matrix Market coordinate file (atomic; gzip when
    the name ends in ``.gz``). Field: ``pattern`` when ``graph.data`` is None,
    else ``real``. symmetric : None = write the ``symmetric`` lower triangle
    when the matrix equals its transpose (pattern and values); True requires
    it; False always writes ``general``."""
    p = Path(path)
    A = graph.to_scipy()
    is_sym = graph.is_symmetric() and (graph.data is None or (A != A.T).nnz == 0)
    if symmetric and not is_sym:
        raise GraphFormatError("symmetric=True but the matrix is not symmetric", p)
    sym = is_sym if symmetric is None else bool(symmetric)
    r, c = graph.rows, graph.indices
    x = graph.data
    if sym:
        keep = r >= c
        r, c = r[keep], c[keep]
        x = None if x is None else x[keep]
    field = "pattern" if x is None else "real"
    cols = {"i": r + 1, "j": c + 1}
    if x is not None:
        cols["v"] = x
    head = f"%%MatrixMarket matrix coordinate {field} {'symmetric' if sym else 'general'}\n"
    if comment or graph.name:
        for line in (comment or graph.name).splitlines():
            head += f"% {line}\n"
    head += f"{graph.n} {graph.n} {r.size}\n"
    with atomic_output(p) as fh:
        fh.write(head.encode())
        write_table_text(fh, cols)
    return p

