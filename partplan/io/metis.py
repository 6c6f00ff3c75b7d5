"""METIS ``.graph`` reader and writer (METIS 5 manual, section 4.1.1).

Layout: optional ``%`` comment lines; a header ``n m [fmt [ncon]]``; then
exactly ``n`` vertex lines (comment lines excluded; an EMPTY line is a vertex
without neighbours). ``fmt`` has up to three 0/1 digits ``[vsize][vwgt][ewgt]``:
a vertex line is ``[size] [w_1 .. w_ncon] (neighbour [edge weight])*`` with
1-based neighbour ids. ``m`` counts undirected edges, each listed by both
endpoints, so the adjacency holds ``2 m`` entries.

Checked, each with file and line: header fields, number of vertex lines,
``2 m`` adjacency entries, ids in ``[1, n]``, no self loops and no repeated
neighbour (METIS rejects both), symmetric adjacency and equal weights on both
directions (the first asymmetric pair is named), positive edge weights,
non-negative vertex weights and vertex sizes (METIS's own rules).

Vertex sizes (fmt ``1xx``, used only by METIS's volume objective) are read
and dropped. With ``ncon > 1`` vertex weights, ``vertex_weight=c`` picks the
constraint to keep (a Graph holds one weight per vertex); without it the
reader refuses with :class:`~partplan.errors.BackendUnavailableError`.

Parsing uses the block tokenizer (:mod:`partplan.io._text`); record splitting
and all checks are vectorized with numpy. Writing formats all lines with
:func:`partplan.io._common.format_int_lines` (vectorized digits).
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import BackendUnavailableError, GraphFormatError
from ..graph import Graph, check_weight_total
from . import _text
from ._common import (atomic_output, check_budget, check_file_holds, check_int64, first_inexact_integer,
                      format_int_lines, graph_bytes, open_binary, stream_error_at)


def read_int_lines(p: Path, comments: bytes, block_bytes: int = _text.BLOCK_BYTES, *,
                   max_values: int | None = None, line_values: int | None = None, header: str = ""):
    """All integers of a text file with per-line counts and comment flags
    (line ``i`` of the arrays is file line ``i + 1``).

    Checked a block at a time, so a small compressed file that inflates to billions of numbers is
    refused early: ``max_values`` (the most the header allows; ``header`` says why) names the line
    where the count passes it, a line longer than ``line_values`` numbers can be (default
    ``max_values``; at least a block) is refused before it is parsed, and what has been read is
    kept within the memory budget."""
    block_bytes = _text.check_block_bytes(block_bytes)
    vals, counts, comm = [], [], []
    held = nvals = 0
    # a line holds at most per_line numbers of at most 21 characters and their separators (or is a
    # comment of any length up to a block): a longer one is refused before it is parsed (~12 bytes
    # per byte of a block and the line that ends it)
    per_line = max_values if line_values is None else line_values
    longest = None if per_line is None else min(_text.MAX_LINE_BYTES, max(block_bytes, 24 * per_line))
    with open_binary(p) as fh:
        for raw, line0 in _text.iter_raw_blocks(fh, 1, block_bytes, p, max_line_bytes=longest):
            blk = _text.scan_block(raw, line0, p, dtype=np.int64, comments=comments)
            if max_values is not None and nvals + blk.values.size > max_values:
                raise GraphFormatError(f"more numbers than the header allows ({max_values:,}: {header})", p,
                                       blk.line_of_value(max_values - nvals))
            nvals += blk.values.size
            held += 8 * blk.values.size + 9 * blk.counts.size
            check_budget(held, p, f"the {nvals:,} numbers read so far", line=blk.first_line + blk.counts.size - 1)
            vals.append(blk.values)
            counts.append(blk.counts)
            comm.append(blk.comment)
    if not counts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, bool)
    return (np.concatenate(vals) if len(vals) > 1 else vals[0],
            np.concatenate(counts) if len(counts) > 1 else counts[0],
            np.concatenate(comm) if len(comm) > 1 else comm[0])


def peek_header(p: Path, comments: bytes = b"%") -> tuple[list[int] | None, int]:
    """The integers of the first line that is neither blank nor a comment,
    and its 1-based number, read without parsing the rest of the file (None
    when that line is not all integers: the full parse then names the bad
    token). Lets a reader refuse hostile header sizes before the full parse."""
    no = 0
    with open_binary(p) as fh:
        while True:
            try:
                line = fh.readline()
            except GraphFormatError as exc:  # corrupt gzip stream
                raise stream_error_at(exc, p, no + 1) from None
            no += 1
            if not line:
                return None, no
            s = line.split(b"%", 1)[0].strip() if b"%" in comments else line.strip()
            if not s:
                continue
            toks = s.split()
            if not all(_text._INT_RE.match(t) for t in toks):
                return None, no
            return [int(t) for t in toks], no


def parse_fmt(fmt: int, p, line: int) -> tuple[bool, bool, bool]:
    """(vertex sizes, vertex weights, edge weights) from a METIS fmt field."""
    if fmt < 0 or fmt > 111 or any(ch not in "01" for ch in str(fmt)):
        raise GraphFormatError(f"fmt {fmt} must be up to three 0/1 digits", p, line, field="fmt")
    return fmt // 100 == 1, (fmt // 10) % 10 == 1, fmt % 10 == 1


def read_metis(path: str | os.PathLike, *, symmetrize: bool = False, self_loops: str = "keep",
               dedupe: bool = True, drop_isolated: bool = False, vertex_weight: int | None = None,
               name: str | None = None, check_symmetry: bool = True,
               block_bytes: int = _text.BLOCK_BYTES) -> Graph:
    """Read a METIS graph file into an undirected :class:`Graph` (see module doc).

    Edge weights become ``graph.data`` (float64); vertex weights
    ``graph.vertex_weights`` (int64). symmetrize is a no-op (METIS graphs are
    symmetric); self_loops / drop_isolated are applied after reading.
    """
    p = Path(path)
    bound = _check_header_sizes(p)
    vals, counts, comm = read_int_lines(p, b"%", block_bytes, max_values=bound,
                                        header="twice its fields, sizes, weights and 2 m adjacency entries")
    lines = np.flatnonzero(~comm)  # 0-based indices of non-comment lines
    nonblank = lines[counts[lines] > 0]
    if nonblank.size == 0:
        raise GraphFormatError("empty file (expected a header 'n m [fmt [ncon]]')", p, max(counts.size, 1))
    h = int(nonblank[0])
    hline = h + 1
    tok_start = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=tok_start[1:])
    head = vals[tok_start[h]:tok_start[h + 1]]
    if not 2 <= head.size <= 4:
        raise GraphFormatError(f"header must be 'n m [fmt [ncon]]', found {head.size} numbers", p, hline)
    n, m = int(head[0]), int(head[1])
    if n < 0 or m < 0:
        raise GraphFormatError("negative n or m in the header", p, hline)
    has_vsize, has_vw, has_ew = parse_fmt(int(head[2]) if head.size > 2 else 0, p, hline)
    ncon = int(head[3]) if head.size > 3 else (1 if has_vw else 0)
    if head.size > 3 and not has_vw:
        raise GraphFormatError("ncon given but fmt has no vertex weights", p, hline, field="ncon")
    if has_vw and ncon < 1:
        raise GraphFormatError("ncon must be >= 1", p, hline, field="ncon")
    if ncon > 1 and vertex_weight is None:
        raise BackendUnavailableError(
            f"{p}:line {hline}: {ncon} vertex weights per vertex (multi-constraint); partplan balances one: "
            "write the file with the one to keep (ncon 1), or choose it in Python with "
            "partplan.io.read_graph(path, vertex_weight=<0-based constraint index>)")
    if vertex_weight is not None and not (0 <= vertex_weight < max(ncon, 1)):
        raise GraphFormatError(f"vertex_weight={vertex_weight} but the file has {ncon} weights per vertex",
                               p, hline, field="ncon")
    vlines = lines[lines > h]  # candidate vertex lines (blank lines count)
    if vlines.size < n:
        raise GraphFormatError(f"header (line {hline}) says {n} vertices, found {vlines.size} vertex lines",
                               p, max(counts.size, 1))
    extra = vlines[n:]
    extra = extra[counts[extra] > 0]
    if extra.size:
        raise GraphFormatError(f"more than the {n} vertex lines announced in the header (line {hline})",
                               p, int(extra[0]) + 1)
    vlines = vlines[:n]
    c = counts[vlines]
    nhead = int(has_vsize) + ncon * int(has_vw)
    step = 2 if has_ew else 1
    rest = c - nhead
    bad = (rest < 0) | (rest % step != 0)
    if bad.any():
        v = int(np.flatnonzero(bad)[0])
        if rest[v] < 0:
            msg = f"vertex {v + 1} has {int(c[v])} numbers but fmt needs {nhead} before the neighbours"
        else:
            msg = f"vertex {v + 1}: odd number of neighbour / edge-weight numbers"
        raise GraphFormatError(msg, p, int(vlines[v]) + 1)
    # tokens of the vertex lines are contiguous in vals (comment lines hold none)
    t0 = int(tok_start[h + 1])
    toks = vals[t0:t0 + int(c.sum())]
    vid = np.repeat(np.arange(n, dtype=np.int64), c)
    vstart = np.zeros(n, dtype=np.int64)
    if n:
        np.cumsum(c[:-1], out=vstart[1:])
    pos = np.arange(toks.size, dtype=np.int64) - vstart[vid]
    off = pos - nhead
    is_nbr = (off >= 0) & (off % step == 0)
    src = vid[is_nbr]
    dst = toks[is_nbr] - 1
    line_of = vlines + 1  # 1-based line of vertex v

    def fail(msg, e):
        raise GraphFormatError(msg, p, int(line_of[src[e]]))

    out = (dst < 0) | (dst >= n)
    if out.any():
        e = int(np.flatnonzero(out)[0])
        fail(f"neighbour id {int(dst[e]) + 1} out of range [1, {n}]", e)
    if src.size != 2 * m:
        raise GraphFormatError(f"header (line {hline}) says {m} edges, so {2 * m} adjacency entries, "
                               f"found {src.size}", p, hline, field="m")
    loop = src == dst
    if loop.any():
        e = int(np.flatnonzero(loop)[0])
        fail(f"vertex {int(src[e]) + 1} lists itself (METIS graphs have no self loops)", e)
    w = None
    if has_ew:
        raw = toks[(off >= 0) & (off % 2 == 1)]
        e = first_inexact_integer(raw)
        if e is not None:   # float64 edge weights (graph.data) hold integers exactly up to 2^53
            fail(f"edge weight {int(raw[e])} is above 2^53: partplan holds edge weights as float64, which cannot "
                 f"hold it exactly", e)
        w = raw.astype(np.float64)
        neg = w <= 0
        if neg.any():    # as METIS checks them: an edge weight is > 0
            e = int(np.flatnonzero(neg)[0])
            fail(f"edge weight {int(w[e])}; METIS edge weights are positive", e)
    if has_vsize:      # dropped, but checked as METIS checks them: a size is >= 0
        vs = toks[pos == 0]
        if vs.size and vs.min() < 0:
            v = int(np.flatnonzero(vs < 0)[0])
            raise GraphFormatError(f"vertex {v + 1} has size {int(vs[v])}; METIS vertex sizes are >= 0", p,
                                   int(line_of[v]))
    vw = None
    if has_vw:
        pick = vertex_weight or 0
        vw = toks[pos == int(has_vsize) + pick]
        if vw.size and vw.min() < 0:
            v = int(np.flatnonzero(vw < 0)[0])
            raise GraphFormatError(f"negative vertex weight {int(vw[v])}", p, int(line_of[v]))
        check_weight_total(vw, p)
    key = src * n + dst
    order = np.argsort(key, kind="stable")
    ks = key[order]
    dup = np.flatnonzero(ks[1:] == ks[:-1])
    if dup.size:
        e = int(order[dup[0] + 1])
        fail(f"vertex {int(src[e]) + 1} lists neighbour {int(dst[e]) + 1} twice", e)
    if check_symmetry and src.size:
        # the keys have no duplicates: the lists are symmetric exactly when the reversed keys, sorted,
        # are the keys; then edge t_order[i] is the reverse of edge order[i] (two sorts: searching
        # the unsorted reversed keys one by one takes 10x as long at R-MAT 18)
        tkey = dst * n + src
        t_order = np.argsort(tkey, kind="stable")
        if not np.array_equal(tkey[t_order], ks):     # the first list (file order) missing a reverse
            idx = np.searchsorted(ks, tkey)
            idx[idx >= ks.size] = 0
            e = int(np.flatnonzero(ks[idx] != tkey)[0])
            fail(f"asymmetric adjacency: vertex {int(src[e]) + 1} lists {int(dst[e]) + 1} "
                 f"but vertex {int(dst[e]) + 1} does not list {int(src[e]) + 1}", e)
        if w is not None:
            wt = np.empty_like(w)
            wt[t_order] = w[order]
            diff = wt != w
            if diff.any():
                e = int(np.flatnonzero(diff)[0])
                fail(f"edge {int(src[e]) + 1}-{int(dst[e]) + 1} has weight {w[e]:g} here but "
                     f"{wt[e]:g} on vertex {int(dst[e]) + 1}'s line", e)
    g = Graph._from_coo(src, dst, w, n, dedupe=dedupe, name=name or _stem(p), vertex_weights=vw,
                        directed=False)
    if self_loops != "keep" or drop_isolated:
        g = g.normalize(self_loops=self_loops, dedupe=dedupe, drop_isolated=drop_isolated)
    return g


def _check_header_sizes(p: Path) -> int | None:
    """Before the full parse: ``n`` vertex lines need at least n bytes
    (``"\\n"``), ``2 m`` adjacency entries at least 4 m (``"1 "``), and the
    graph must fit in the memory budget. Returns a bound on the numbers the file may hold before
    the full parse (twice the header's, each vertex's size and weights, 2 m neighbours and their
    weights, and 4,096 more; None when the full parse will name a bad header)."""
    head, line = peek_header(p)
    if head is None or not 2 <= len(head) <= 4:
        return None  # the full parse names the problem
    n, m = head[0], head[1]
    for name, v in (("n", n), ("m", m)):
        check_int64(v, p, f"header field {name}", line=line, field=name)
    if n < 0 or m < 0:
        return None
    check_file_holds(n, 1, p, "n (vertex lines)", line=line, field="n")
    check_file_holds(2 * m, 2, p, "2 m (adjacency entries)", line=line, field="m")
    ew = len(head) > 2 and head[2] % 10 == 1
    check_budget(graph_bytes(n, 2 * m, weighted=ew), p, f"a graph of {n} vertices and {m} edges", line=line,
                 field="n" if graph_bytes(n, 0) >= graph_bytes(0, 2 * m) else "m")
    fmt = head[2] if len(head) > 2 else 0
    per_vertex = (fmt // 100 % 10) + (head[3] if len(head) > 3 else 1) * (fmt // 10 % 10)
    # twice that, and some: a file a little off goes to the full parse, which names its first bad line
    return 2 * (len(head) + n * max(per_vertex, 0) + 2 * m * (2 if ew else 1)) + 4096


def _stem(p: Path) -> str:
    name = p.name[:-3] if p.name.lower().endswith(".gz") else p.name
    return name.rsplit(".", 1)[0]


def write_metis(graph: Graph, path: str | os.PathLike, *, edge_weights: bool | None = None,
                vertex_weights: bool | None = None) -> Path:
    """Write an undirected graph as METIS ``.graph`` (atomic; ``.gz`` compressed).

    The pattern must be symmetric without self loops (normalize first:
    ``graph.normalize(symmetrize=True, self_loops="remove")``). Edge weights
    (default: when ``graph.data`` is set) must be positive integers and
    symmetric; vertex weights default to ``graph.vertex_weights``.
    """
    p = Path(path)
    if not graph.is_symmetric():
        raise GraphFormatError("METIS needs a symmetric (undirected) graph; "
                               "normalize(symmetrize=True) first", p)
    if graph.has_self_loops():
        raise GraphFormatError("METIS graphs cannot hold self loops; normalize(self_loops='remove') first", p)
    ew = graph.data is not None if edge_weights is None else edge_weights
    vw = graph.vertex_weights is not None if vertex_weights is None else vertex_weights
    if vw and graph.vertex_weights is None:
        raise GraphFormatError("vertex_weights=True but the graph has none", p)
    n, nnz = graph.n, graph.nnz
    deg = graph.row_nnz
    rows = graph.rows
    rep = np.flatnonzero((np.diff(graph.indices) <= 0) & (rows[1:] == rows[:-1])) if nnz > 1 else np.empty(0, int)
    if rep.size:   # duplicates kept (keep_duplicates) or unsorted rows: METIS lists each neighbour once
        v = int(rows[rep[0]])
        raise GraphFormatError(f"vertex {v} lists a neighbour twice (or out of order): METIS lists each neighbour "
                               f"once; merge the duplicates first", p, field="indices")
    if ew:
        data = graph.data if graph.data is not None else np.ones(nnz)
        if np.any(data != np.round(data)) or (data.size and data.min() <= 0):
            raise GraphFormatError("METIS edge weights must be positive integers (METIS refuses a weight of 0 "
                                   "or below, and a fraction): write another format (.mtx and .npz keep any "
                                   "weight), or, from Python, drop those entries or call write_metis(..., "
                                   "edge_weights=False)", p, field="data")
        if data.size and data.max() >= 2.0 ** 63:
            raise GraphFormatError(f"METIS edge weight {float(data.max()):.6g} does not fit in 64 bits", p,
                                   field="data")
        A = graph.to_scipy()
        if (A != A.T).nnz:
            raise GraphFormatError("METIS edge weights must be equal in both directions", p, field="data")
    per_line = int(vw) + deg * (2 if ew else 1)
    toks = np.empty(int(per_line.sum()), dtype=np.int64)
    start = np.zeros(n, dtype=np.int64)
    if n:
        np.cumsum(per_line[:-1], out=start[1:])
    if vw:
        toks[start] = graph.vertex_weights
    # position of each nonzero's neighbour token
    rank_in_row = np.arange(nnz, dtype=np.int64) - graph.indptr[:-1][graph.rows]
    npos = start[graph.rows] + int(vw) + rank_in_row * (2 if ew else 1)
    toks[npos] = graph.indices + 1
    if ew:
        toks[npos + 1] = data.astype(np.int64)
    fmt = ("1" if vw else "0") + ("1" if ew else "0")
    header = f"{n} {nnz // 2}" + (f" {int(fmt):03d}" if fmt != "00" else "") + "\n"
    body = format_int_lines(toks, per_line)
    with atomic_output(p) as fh:
        fh.write(header.encode())
        fh.write(body)
    return p
