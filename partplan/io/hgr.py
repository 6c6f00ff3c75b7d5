"""hMetis ``.hgr`` hypergraph reader and writer (hMETIS 1.5 manual, sec. 3.1;
the format KaHyPar and Mt-KaHyPar read).

Layout: ``%`` comment lines anywhere; header ``m n [fmt]`` (NETS first, then
vertices); ``m`` net lines ``[net weight] pin pin ...`` with 1-based pins;
with fmt 10 or 11, then ``n`` lines each holding one vertex weight. fmt: 0 /
absent = unweighted, 1 = net weights, 10 = vertex weights, 11 = both. Blank
lines are skipped.

Checked, with file and line: header, number of net lines and of vertex-weight
lines, pins in ``[1, n]``, every net has at least one pin, weights
non-negative, nothing after the last expected line.

Also :func:`read_hgr_graph`: an ``.hgr`` with ``m == n`` read as the square
matrix whose column ``j`` holds the pins of net ``j`` (the inverse of the
column-net model, as in KaHyPar's ``*.mtx.hgr`` benchmark files).
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np

from ..errors import GraphFormatError, OptionError
from ..graph import Graph, check_weight_total
from ..hypergraph import Hypergraph
from . import _text
from ._common import atomic_output, format_int_lines
from ._common import check_budget, check_file_holds, check_int64
from .metis import peek_header, read_int_lines


def read_hypergraph(path: str | os.PathLike, *, name: str | None = None,
                    block_bytes: int = _text.BLOCK_BYTES) -> Hypergraph:
    """Read an hMetis ``.hgr`` file (see module doc) into a :class:`Hypergraph`
    with 0-based pins; net / vertex weights are None when the file has none."""
    from .._args import check_path
    p = Path(check_path("path", path))
    max_values, line_values = _check_header_sizes(p) or (None, None)
    vals, counts, _ = read_int_lines(p, b"%", block_bytes, max_values=max_values, line_values=line_values,
                                     header="twice m nets of at most n pins and a weight, n vertex weights")
    lines = np.flatnonzero(counts > 0)  # blank and comment lines are skipped
    if lines.size == 0:
        raise GraphFormatError("empty file (expected a header 'm n [fmt]')", p, max(counts.size, 1))
    tok_start = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=tok_start[1:])
    h = int(lines[0])
    hline = h + 1
    head = vals[tok_start[h]:tok_start[h + 1]]
    if head.size not in (2, 3):
        raise GraphFormatError(f"header must be 'm n [fmt]' (nets first), found {head.size} numbers", p, hline)
    m, n = int(head[0]), int(head[1])
    fmt = int(head[2]) if head.size == 3 else 0
    if m < 0 or n < 0:
        raise GraphFormatError("negative m or n in the header", p, hline)
    if fmt not in (0, 1, 10, 11):
        raise GraphFormatError(f"fmt {fmt} must be 0, 1, 10 or 11", p, hline, field="fmt")
    has_nw, has_vw = fmt in (1, 11), fmt in (10, 11)
    body = lines[1:]
    need = m + (n if has_vw else 0)
    if body.size < need:
        what = "net lines" if body.size < m else "vertex-weight lines"
        found = min(body.size, m) if body.size < m else body.size - m
        expect = m if body.size < m else n
        raise GraphFormatError(f"header (line {hline}) announces {expect} {what}, found {found}",
                               p, counts.size)
    if body.size > need:
        raise GraphFormatError(f"unexpected line after the {m} nets" + (f" and {n} vertex weights" if has_vw else "")
                               + f" announced in the header (line {hline})", p, int(body[need]) + 1)
    nets = body[:m]
    c = counts[nets]
    npins = c - int(has_nw)
    if np.any(npins < 1):
        e = int(np.flatnonzero(npins < 1)[0])
        raise GraphFormatError(f"net {e + 1} has no pins", p, int(nets[e]) + 1)
    t0 = int(tok_start[nets[0]]) if m else 0
    # net lines are contiguous among the token-holding lines
    toks = vals[t0:t0 + int(c.sum())]
    net_of = np.repeat(np.arange(m, dtype=np.int64), c)
    first = np.zeros(m, dtype=np.int64)
    if m:
        np.cumsum(c[:-1], out=first[1:])
    is_w = np.zeros(toks.size, dtype=bool)
    if has_nw:
        is_w[first] = True
    pins = toks[~is_w] - 1
    bad = (pins < 0) | (pins >= n)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        e = int(net_of[~is_w][i])
        raise GraphFormatError(f"pin {int(pins[i]) + 1} of net {e + 1} out of range [1, {n}]", p, int(nets[e]) + 1)
    nw = None
    if has_nw:
        nw = toks[first]
        if nw.size and nw.min() < 0:
            e = int(np.flatnonzero(nw < 0)[0])
            raise GraphFormatError(f"negative net weight {int(nw[e])}", p, int(nets[e]) + 1)
    vw = None
    if has_vw:
        vl = body[m:]
        if np.any(counts[vl] != 1):
            i = int(np.flatnonzero(counts[vl] != 1)[0])
            raise GraphFormatError(f"vertex-weight line must hold one number, found {int(counts[vl[i]])}",
                                   p, int(vl[i]) + 1)
        vw = vals[tok_start[vl]]
        if vw.size and vw.min() < 0:
            i = int(np.flatnonzero(vw < 0)[0])
            raise GraphFormatError(f"negative vertex weight {int(vw[i])}", p, int(vl[i]) + 1)
        check_weight_total(vw, p)
    ptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(npins, out=ptr[1:])
    return Hypergraph(n, ptr, pins, nw, vw, name=name or _stem(p))


def _check_header_sizes(p: Path) -> tuple[int, int] | None:
    """Before the full parse: ``m`` net lines need at least 2 m bytes
    (``"1\\n"``), ``n`` vertex-weight lines (fmt 1x) 2 n more, and ``n``
    vertices with ``m`` nets must fit in the memory budget. Returns bounds for the full parse (twice
    the numbers the file may hold and the most one line may hold, a net of n pins and its weight,
    and some), or None when the full parse will name a bad header."""
    head, line = peek_header(p)
    if head is None or len(head) not in (2, 3):
        return None  # the full parse names the problem
    m, n = head[0], head[1]
    for name, v in (("m", m), ("n", n)):
        check_int64(v, p, f"header field {name}", line=line, field=name)
    if m < 0 or n < 0:
        return None
    check_file_holds(m, 2, p, "m (net lines)", line=line, field="m")
    if len(head) == 3 and head[2] in (10, 11):
        check_file_holds(m + n, 2, p, "m + n (net and vertex-weight lines)", line=line, field="n")
    # vertex arrays (n + 1) and the net pointers (m + 1) and >= m pins
    check_budget(8 * (n + 1) + 8 * (m + 1) + 16 * m, p, f"a hypergraph of {n} vertices and {m} net(s)",
                 line=line, field="n" if n >= m else "m")
    return 2 * (len(head) + m * (n + 1) + n) + 4096, 2 * (n + 1) + 64   # slack: the full parse names a line a little off


def _stem(p: Path) -> str:
    name = p.name[:-3] if p.name.lower().endswith(".gz") else p.name
    return name.rsplit(".", 1)[0]


def write_hypergraph(hg: Hypergraph, path: str | os.PathLike, *, net_weights: bool | None = None,
                     vertex_weights: bool | None = None) -> Path:
    """Write ``hg`` as hMetis ``.hgr`` (atomic; gzip when named ``.gz``), e.g.
    to hand a model to the KaHyPar / Mt-KaHyPar command-line tools. Weights are
    written when present (or forced with the flags; missing ones as 1)."""
    from .._args import check_bool, check_path
    if not isinstance(hg, Hypergraph):
        raise OptionError(f"write_hypergraph writes a partplan Hypergraph, got {type(hg).__name__} (a Graph: "
                          f"write_graph, or its column-net model partplan.models.column_net(graph))")
    net_weights, vertex_weights = (None if v is None else check_bool(name, v) for name, v in (
        ("net_weights", net_weights), ("vertex_weights", vertex_weights)))   # "no" would be truthy
    p = Path(check_path("path", path))
    if np.any(np.diff(hg.net_ptr) < 1):
        e = int(np.flatnonzero(np.diff(hg.net_ptr) < 1)[0])
        raise GraphFormatError(f"net {e} has no pins; hMetis files cannot hold empty nets", p)
    has_nw = hg.net_weights is not None if net_weights is None else net_weights
    has_vw = hg.vertex_weights is not None if vertex_weights is None else vertex_weights
    sizes = np.diff(hg.net_ptr)
    if has_nw:
        nw = hg.net_weights if hg.net_weights is not None else np.ones(hg.m, dtype=np.int64)
        toks = np.empty(hg.num_pins + hg.m, dtype=np.int64)
        first = hg.net_ptr[:-1] + np.arange(hg.m)
        is_w = np.zeros(toks.size, dtype=bool)
        is_w[first] = True
        toks[first] = nw
        toks[~is_w] = hg.pins + 1
        counts = sizes + 1
    else:
        toks, counts = hg.pins + 1, sizes
    if has_vw:
        vw = hg.vertex_weights if hg.vertex_weights is not None else np.ones(hg.n, dtype=np.int64)
        toks = np.concatenate([toks, vw])
        counts = np.concatenate([counts, np.ones(hg.n, dtype=np.int64)])
    fmt = (10 if has_vw else 0) + (1 if has_nw else 0)
    header = f"{hg.m} {hg.n}" + (f" {fmt}" if fmt else "") + "\n"
    with atomic_output(p) as fh:
        fh.write(header.encode())
        fh.write(format_int_lines(toks, counts))
    return p


def read_hgr_graph(path: str | os.PathLike, *, symmetrize: bool = False, self_loops: str = "keep",
                   dedupe: bool = True, drop_isolated: bool = False, name: str | None = None) -> Graph:
    """Read an ``.hgr`` with as many nets as vertices as the square pattern
    matrix ``A[pin, j] = 1`` for every pin of net ``j`` (column-net view; net
    weights are dropped, vertex weights (fmt 10 / 11) kept as the graph's
    ``vertex_weights``). Raises GraphFormatError when ``m != n``."""
    hg = read_hypergraph(path, name=name)
    if hg.m != hg.n:
        raise GraphFormatError(f"hypergraph has {hg.m} nets and {hg.n} vertices; only m == n reads as a "
                               "square matrix (use partplan.io.read_hypergraph)", path)
    g = Graph.from_edges(hg.pins, hg.net_of_pin, None, n=hg.n, dedupe=dedupe, name=hg.name, source=str(path))
    if hg.vertex_weights is not None:
        g = dataclasses.replace(g, vertex_weights=hg.vertex_weights)
    return g.normalize(symmetrize=symmetrize, self_loops=self_loops, dedupe=dedupe, drop_isolated=drop_isolated)
