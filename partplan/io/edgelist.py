"""SNAP-style edge lists: one edge ``src dst [weight]`` per line.

- Separators: spaces / tabs, or commas (detected on the first data line).
- Comment lines start with ``#`` or ``%`` (a comment may also end a line).
- Ids: 64-bit integers, any range; by default the distinct ids are relabelled
  to 0..n-1 in sorted order and :attr:`Graph.ids` keeps the originals.
- Optional third column: a finite, non-negative float weight (all lines must
  have the same number of columns).
- ``.gz`` is read on the fly.

Streaming: the file is parsed in 32 MiB blocks by :mod:`partplan.io._text`
(numpy's C parser + vectorized checks); only numpy arrays are kept, never a
Python object per line. Graph building (relabel, CSR) is numpy/scipy in
:meth:`partplan.graph.Graph.from_edges`.

A first line that holds names instead of numbers (``src,dst``) is a header:
the file is then read as an edge table by :mod:`partplan.io.table`
(pyarrow), when it is comma- or tab-separated.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import GraphFormatError
from ..graph import Graph
from . import _text
from ._edges import _stem, edges_to_graph, relabel_ids  # noqa: F401  (re-exported)
from ._common import (atomic_output, check_budget, check_edge_file, drops_vertex_weights, graph_bytes, open_binary,
                      stream_error_at, without_bom, write_table_text)



def _data_part(line: bytes) -> bytes:
    """``line`` without its comment (from the first ``#`` or ``%``) and surrounding blanks."""
    cut = [i for i in (line.find(b"#"), line.find(b"%")) if i >= 0]
    return (line[:min(cut)] if cut else line).strip()


def _mm_banner(line: bytes) -> bool:
    """``%%MatrixMarket matrix coordinate|array ...``: the first line of a Matrix Market file."""
    t = line.lower().split()
    return len(t) >= 3 and t[0] == b"%%matrixmarket" and t[1] == b"matrix" and t[2] in (b"coordinate", b"array")


def _first_data_line(path) -> tuple[bytes | None, int]:
    """The first line that is neither blank nor a comment (its comment cut off), and its number."""
    no = 0
    with open_binary(path) as fh:
        try:
            for no, line in enumerate(fh, 1):
                if no == 1:
                    line = without_bom(line)
                if no == 1 and _mm_banner(line):   # a Matrix Market file: its size line is no edge
                    raise GraphFormatError("a Matrix Market file (%%MatrixMarket banner), not an edge list: "
                                           "name it .mtx or read it with format 'mtx' (--from mtx)", path, 1)
                s = _data_part(line)
                if s:
                    return s, no
        except GraphFormatError as exc:  # corrupt gzip stream: name the line reached
            raise stream_error_at(exc, path, no + 1) from None
    return None, no


def _looks_like_header(line: bytes) -> bool:
    toks = line.replace(b",", b" ").split()
    return bool(toks) and not all(_text._FLOAT_RE.match(t) for t in toks)


def read_edgelist(path: str | os.PathLike, *, symmetrize: bool = False, self_loops: str = "keep",
                  dedupe: bool = True, drop_isolated: bool = False, relabel: bool = True,
                  n: int | None = None, weighted: bool | None = None, name: str | None = None,
                  block_bytes: int = _text.BLOCK_BYTES) -> Graph:
    """Read an edge list file into a :class:`Graph` (edge ``src -> dst`` is
    ``A[src, dst]``).

    relabel : map the distinct ids to 0..n-1 (sorted) and keep the original
        ids in ``graph.ids``; with False ids are used as row numbers directly
        (they must be >= 0; ``n`` defaults to max id + 1). When relabelling
        finds the ids already 0..n-1, ``ids`` is left None.
    weighted : None = use a third column when present; False = ignore it;
        True = require it.
    n : number of vertices; implies ``relabel=False`` (ids must be < n).

    Raises GraphFormatError naming the file and the 1-based line for: bad
    token, wrong column count, negative id, negative / NaN / inf weight,
    empty file.

    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "g.txt")
    >>> _ = open(p, "w").write("# demo\\n10 20\\n20 30\\n")
    >>> g = read_edgelist(p)
    >>> g.n, g.nnz, g.ids.tolist()
    (3, 2, [10, 20, 30])
    """
    p = Path(path)
    if n is not None:
        relabel = False
    first, first_no = _first_data_line(p)
    if first is None:
        raise GraphFormatError("no edges: the file is empty or holds only comments", p, max(first_no, 1))
    if _looks_like_header(first):
        if b"," in first or b"\t" in first:
            from .table import read_edge_table
            delim = "," if b"," in first else "\t"
            return read_edge_table(p, format="csv", delimiter=delim, symmetrize=symmetrize,
                                   self_loops=self_loops, dedupe=dedupe, drop_isolated=drop_isolated,
                                   relabel=relabel, weighted=weighted, name=name)
        toks = first.replace(b",", b" ").split()
        tok = next(t for t in toks if not _text._FLOAT_RE.match(t)).decode(errors="replace")[:40]
        raise GraphFormatError(f"bad token {tok!r}: expected an integer vertex id "
                               "(a header line needs commas or tabs, read as an edge table)", p, first_no)
    commas = b"," in first
    ncols = len(first.replace(b",", b" ").split())
    if ncols not in (2, 3):
        raise GraphFormatError(f"expected 2 or 3 columns (src dst [weight]), found {ncols}", p, first_no)
    if weighted is True and ncols == 2:
        raise GraphFormatError("weighted=True but the edge list has no weight column", p, first_no)
    use_w = ncols == 3 and weighted is not False
    dtype = np.float64 if ncols == 3 else np.int64
    srcs, dsts, ws = [], [], []
    max_id = 0  # largest id checked against the memory budget so far (relabel=False)
    nread = 0   # edges read so far
    with open_binary(p) as fh:
        for raw, line0 in _text.iter_raw_blocks(fh, 1, block_bytes, p, max_line_bytes=_text.SHORT_LINE_BYTES):
            blk = _text.scan_block(raw, line0, p, dtype=dtype, commas=commas, parse=ncols == 2)
            if not blk.counts.any():
                continue
            _text.check_columns(blk, (ncols,), p)
            if ncols == 3:
                # exact int64 ids beside float weights: numpy's C loadtxt on the cleaned block
                rec = _text.parse_columns(blk, p, (np.int64, np.int64, np.float64))
                s, d, w = rec["c0"], rec["c1"], rec["c2"]
                if use_w:
                    bad = ~np.isfinite(w) | (w < 0)
                    if bad.any():
                        r = int(np.flatnonzero(bad)[0])
                        what = "negative" if np.isfinite(w[r]) else "non-finite"
                        raise GraphFormatError(f"{what} weight {float(w[r])!r}", p, int(blk.data_lines()[r]),
                                               field="weight")
                    ws.append(np.ascontiguousarray(w, dtype=np.float64))
                s, d = np.ascontiguousarray(s), np.ascontiguousarray(d)
            else:
                vals = blk.values.reshape(-1, 2)
                s, d = vals[:, 0].copy(), vals[:, 1].copy()
            neg = (s < 0) | (d < 0)
            if neg.any():
                r = int(np.flatnonzero(neg)[0])
                v = int(s[r]) if s[r] < 0 else int(d[r])
                raise GraphFormatError(f"negative vertex id {v}", p, int(blk.data_lines()[r]),
                                       field="src" if s[r] < 0 else "dst")
            if n is None and not relabel and s.size:
                # ids are row numbers: the largest one sets n; refuse it before allocating
                top = int(max(s.max(), d.max()))
                if top >= max_id:
                    r = int(np.flatnonzero((s == top) | (d == top))[0])
                    check_budget(graph_bytes(top + 1, 0), p, f"vertex id {top} without relabelling (n = id + 1)",
                                 line=int(blk.data_lines()[r]), field="src" if s[r] == top else "dst")
                    max_id = top
            if n is not None and not relabel:
                big = (s >= n) | (d >= n)
                if big.any():
                    r = int(np.flatnonzero(big)[0])
                    raise GraphFormatError(f"vertex id {max(int(s[r]), int(d[r]))} out of range [0, {n})",
                                           p, int(blk.data_lines()[r]))
            srcs.append(np.asarray(s, dtype=np.int64))
            dsts.append(np.asarray(d, dtype=np.int64))
            nread += s.size
            # the graph the edges so far make, checked as they come: a small compressed file can
            # inflate to billions of edges, refused here and not after all of them are held
            check_budget(graph_bytes(0 if relabel else max_id + 1, nread, weighted=use_w), p,
                         f"the {nread:,} edges read so far", line=blk.first_line + blk.counts.size - 1)
    if not srcs:
        raise GraphFormatError("no edges: the file holds only comments or blank lines", p, first_no)
    src = np.concatenate(srcs) if len(srcs) > 1 else srcs[0]
    del srcs
    dst = np.concatenate(dsts) if len(dsts) > 1 else dsts[0]
    del dsts
    w = (np.concatenate(ws) if len(ws) > 1 else ws[0]) if use_w else None
    return edges_to_graph(src, dst, w, p, n=n, relabel=relabel, symmetrize=symmetrize, self_loops=self_loops,
                          dedupe=dedupe, drop_isolated=drop_isolated, name=name)


@drops_vertex_weights("an edge list")
def write_edgelist(graph: Graph, path: str | os.PathLike, *, original_ids: bool = True,
                   weights: bool | None = None, header: str | None = None) -> Path:
    """Write ``src dst [weight]`` lines (atomic; gzip when the name ends in
    ``.gz``). original_ids : write ``graph.ids`` instead of row numbers when
    the graph was relabelled. weights : None = when the graph has data. A graph without edges or
    with a negative weight is refused and vertices without edges are warned about
    (:func:`partplan.io._common.check_edge_file`: the reader would refuse or drop them)."""
    p = Path(path)
    check_edge_file(graph, p, "edgelist")
    r, c = graph.rows, graph.indices
    if original_ids and graph.ids is not None:
        r, c = graph.ids[r], graph.ids[c]
    cols = {"s": r, "d": c}
    if (weights is None and graph.data is not None) or weights:
        cols["w"] = graph.data if graph.data is not None else np.ones(graph.nnz)
    title = "".join(f"# {line}\n" for line in str(header or graph.name).splitlines()) or "#\n"   # each line a comment
    with atomic_output(p) as fh:
        fh.write(f"{title}# n={graph.n} nnz={graph.nnz} "
                 f"{'directed' if graph.directed else 'undirected (both directions listed)'}\n".encode())
        write_table_text(fh, cols)
    return p
