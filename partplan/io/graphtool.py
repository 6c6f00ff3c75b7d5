"""graph-tool binary ``.gt`` / ``.gt.gz`` reader: structure (:func:`read_gt`) and property maps
(:func:`read_gt_properties`).

Layout (graph-tool documentation, "The gt file format"):

====================  ===========================================================
magic                 6 bytes ``e2 9b be 20 67 74`` ("⛾ gt")
version               uint8 (1 is the only version)
endianness            uint8: 0 little, 1 big (applies to every number below)
comment               uint64 length + that many bytes
directed              uint8 (0 / 1)
N                     uint64 number of vertices
adjacency             per vertex: uint64 out-degree, then that many neighbour
                      ids of d bytes, d = 1 / 2 / 4 / 8 for N < 2^8 / 2^16 / 2^32 / else
property maps         uint64 count, then per map: uint8 key type (0 graph,
                      1 vertex, 2 edge), name (uint64 length + bytes), uint8
                      value type (index into :data:`VALUE_TYPES`), values
                      (1, N or E of them; strings and vectors length-prefixed)
====================  ===========================================================

An undirected graph lists each edge once (at one endpoint); the reader
returns it symmetrized (``directed=False``). Parallel edges and self loops
are kept as stored unless ``dedupe`` / ``self_loops`` say otherwise.

The records have variable length, so finding where each vertex's record
starts is inherently sequential: that one loop over vertices touches only
8-byte degree words (``int.from_bytes``); all neighbour ids are then gathered
with a single vectorized numpy index. Checked: magic, version, truncation,
neighbour ids in range.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import GraphFormatError
from ..graph import Graph
from .._kernels import njit
from ._common import check_budget, drops_vertex_weights, graph_bytes, read_all

MAGIC = b"\xe2\x9b\xbe gt"


def _width(n: int) -> int:
    return 1 if n < 2 ** 8 else 2 if n < 2 ** 16 else 4 if n < 2 ** 32 else 8


def _parse_structure(buf, p: Path):
    """Header + adjacency records: (directed, n, deg int64[n], start int64[n]
    byte offset of each neighbour list, d id width, end byte offset, byte order)."""
    if buf[:6] != MAGIC:
        raise GraphFormatError("not a graph-tool file (bad magic bytes)", p)
    if len(buf) < 8:
        raise GraphFormatError("truncated header", p)
    version, big = buf[6], buf[7]
    if version != 1:
        raise GraphFormatError(f"unsupported graph-tool format version {version}", p, field="version")
    if big not in (0, 1):
        raise GraphFormatError(f"bad endianness byte {big}", p, field="endianness")
    order = "big" if big else "little"
    pos = 8

    def u64(at: int, what: str) -> int:
        if at + 8 > len(buf):
            raise GraphFormatError(f"truncated file while reading {what} (byte {at})", p)
        return int.from_bytes(buf[at:at + 8], order)

    clen = u64(pos, "comment length")
    pos += 8 + clen
    if pos + 9 > len(buf):
        raise GraphFormatError("truncated header", p)
    if buf[pos] not in (0, 1):
        raise GraphFormatError(f"bad directed byte {buf[pos]} (0 or 1)", p, field="directed")
    directed = bool(buf[pos])
    pos += 1
    n = u64(pos, "vertex count")
    pos += 8
    d = _width(n)
    if 8 * n > len(buf) - pos:  # every vertex record holds at least its 8-byte degree
        raise GraphFormatError(f"truncated file or hostile header: vertex count N = {n} needs at least "
                               f"{8 * n} bytes of records, the file holds {max(len(buf) - pos, 0)} after the "
                               "header", p, field="N")
    check_budget(graph_bytes(n, 0, weighted=False), p, f"a graph of {n} vertices", field="N")
    deg = np.empty(n, dtype=np.int64)
    start = np.empty(n, dtype=np.int64)
    size = len(buf)
    # the sequential record chain, compiled (a Python loop per vertex takes minutes on 3·10^8 vertices); the
    # neighbour bytes are gathered below
    v, end = _record_chain(np.frombuffer(buf, dtype=np.uint8), pos, n, d, order == "big", deg, start)
    if v >= 0:
        at = int(end)
        if at + 8 > size:
            raise GraphFormatError(f"truncated adjacency at vertex {v} (byte {at})", p)
        k = int.from_bytes(buf[at:at + 8], order)
        raise GraphFormatError(f"truncated adjacency: vertex {v} has out-degree {k} but the file ends "
                               f"{size - at - 8} bytes after its degree (byte {at})", p, field="degree")
    return directed, n, deg, start, d, int(end), order


@njit
def _record_chain(raw, pos, n, d, big, deg, start):
    """Walk ``n`` vertex records (an 8-byte degree, then that many ``d``-byte neighbours) from byte
    ``pos`` of ``raw`` (uint8), filling ``deg`` and ``start`` (where each record's neighbours
    begin). Returns (−1, the byte after the last record), or (the vertex whose record the file cuts,
    the byte its record starts at); a degree too large for the bytes left (one beyond 63 bits
    too) is such a cut."""
    size = raw.size
    for v in range(n):
        if pos + 8 > size:
            return v, pos
        k = 0
        for b in range(8):
            byte = raw[pos + (b if big else 7 - b)]
            if k >> 55:                          # the shift would leave 64 bits: past any file
                return v, pos
            k = (k << 8) | byte
        left = size - pos - 8
        if k < 0 or (d > 0 and k > left // d):
            return v, pos
        deg[v] = k
        start[v] = pos + 8
        pos += 8 + k * d
    return -1, pos


def read_gt(path: str | os.PathLike, *, symmetrize: bool = False, self_loops: str = "keep",
            dedupe: bool = True, drop_isolated: bool = False, name: str | None = None) -> Graph:
    """Read a graph-tool binary file into a :class:`Graph` (property maps:
    :func:`read_gt_properties`). Undirected files give a symmetric graph."""
    p = Path(path)
    buf = read_all(p)
    directed, n, deg, start, d, _, order = _parse_structure(buf, p)
    dt = np.dtype(f"{'>' if order == 'big' else '<'}u{d}")
    nnz = int(deg.sum())
    src = np.repeat(np.arange(n, dtype=np.int64), deg)
    if nnz:
        first = np.zeros(n, dtype=np.int64)
        np.cumsum(deg[:-1], out=first[1:])
        within = np.arange(nnz, dtype=np.int64) - first[src]
        offs = start[src] + within * d
        raw = np.frombuffer(buf, dtype=np.uint8)
        if d == 1:
            dst = raw[offs].astype(np.int64)
        else:
            gathered = raw[offs[:, None] + np.arange(d)].reshape(-1)
            dst = np.frombuffer(gathered.tobytes(), dtype=dt).astype(np.int64)
    else:
        dst = np.zeros(0, dtype=np.int64)
    if dst.size and (dst.min() < 0 or dst.max() >= n):
        e = int(np.flatnonzero((dst < 0) | (dst >= n))[0])
        raise GraphFormatError(f"neighbour id {int(dst[e])} of vertex {int(src[e])} out of range [0, {n})", p)
    nm = name or p.name.split(".")[0]
    g = Graph._from_coo(src, dst, None, n, dedupe=dedupe, name=nm, directed=True)
    if not directed:
        g = g.normalize(symmetrize=True, self_loops=self_loops, dedupe=dedupe, drop_isolated=drop_isolated)
    elif symmetrize or self_loops != "keep" or drop_isolated:
        g = g.normalize(symmetrize=symmetrize, self_loops=self_loops, dedupe=dedupe, drop_isolated=drop_isolated)
    return g


# value type byte -> (name, numpy scalar code or None for variable-length); graph-tool's order
VALUE_TYPES = [("bool", "u1"), ("int16_t", "i2"), ("int32_t", "i4"), ("int64_t", "i8"), ("double", "f8"),
               ("long double", None), ("string", None), ("vector<bool>", "u1"), ("vector<int16_t>", "i2"),
               ("vector<int32_t>", "i4"), ("vector<int64_t>", "i8"), ("vector<double>", "f8"),
               ("vector<long double>", None), ("vector<string>", None), ("python::object", None)]
KEY_TYPES = ("graph", "vertex", "edge")


def read_gt_properties(path: str | os.PathLike, *, kinds=KEY_TYPES) -> dict:
    """The property maps of a graph-tool file: ``{"graph": {name: value},
    "vertex": {name: array[n]}, "edge": {name: array[E]}}`` (edges in file
    order: the adjacency records, each undirected edge once).

    Scalar numeric maps are numpy arrays (bool as ``bool``); ``string`` and
    ``python::object`` maps are lists of str / bytes; vector maps are lists of
    numpy arrays; ``long double`` maps (platform-dependent width on disk) are
    refused with a clear error.

    >>> from partplan.datasets import embedded_path          # doctest: +SKIP
    >>> props = read_gt_properties(embedded_path("polblogs"))  # doctest: +SKIP
    >>> props["vertex"]["value"][:4]                          # doctest: +SKIP
    array([0, 0, 0, 0], dtype=int16)
    """
    p = Path(path)
    buf = read_all(p)
    directed, n, deg, start, d, pos, order = _parse_structure(buf, p)
    e = int(deg.sum())
    bo = ">" if order == "big" else "<"
    size = len(buf)
    out = {k: {} for k in KEY_TYPES}

    def need(at, nbytes, what):
        if at + nbytes > size or nbytes < 0:
            raise GraphFormatError(f"truncated property map section while reading {what} (byte {at})", p,
                                   field="property maps")

    def u64(at, what):
        need(at, 8, what)
        return int.from_bytes(buf[at:at + 8], order)

    def string(at, what):
        ln = u64(at, what)
        need(at + 8, ln, what)
        return bytes(buf[at + 8:at + 8 + ln]), at + 8 + ln

    if pos == size:  # files without the property section
        return out
    count = u64(pos, "property map count")
    pos += 8
    for i in range(count):
        need(pos, 1, f"key type of property map {i}")
        key = buf[pos]
        if key > 2:
            raise GraphFormatError(f"property map {i}: bad key type {key} (0 graph, 1 vertex, 2 edge)", p,
                                   field="key type")
        raw_name, pos = string(pos + 1, f"name of property map {i}")
        name = raw_name.decode("utf-8", "replace")
        need(pos, 1, f"value type of property map {name!r}")
        vt = buf[pos]
        pos += 1
        if vt >= len(VALUE_TYPES):
            raise GraphFormatError(f"property map {name!r}: unknown value type {vt}", p, field="value type")
        tname, code = VALUE_TYPES[vt]
        count_vals = {0: 1, 1: n, 2: e}[key]
        where = f"{KEY_TYPES[key]} property {name!r} ({tname})"
        if tname == "long double" or tname == "vector<long double>":
            raise GraphFormatError(f"{where}: long double values are not supported", p, field="value type")
        if code is not None and not tname.startswith("vector"):
            w = np.dtype(code).itemsize
            need(pos, w * count_vals, where)
            vals = np.frombuffer(buf, dtype=np.dtype(bo + code), count=count_vals, offset=pos).copy()
            vals = vals.astype(bool) if tname == "bool" else vals.astype(vals.dtype.newbyteorder("="))
            pos += w * count_vals
        else:
            vals = []
            for _ in range(count_vals):  # variable-length records: a sequential chain, like the adjacency
                if tname in ("string", "python::object"):
                    s, pos = string(pos, where)
                    vals.append(s.decode("utf-8", "replace") if tname == "string" else s)
                elif tname == "vector<string>":
                    ln = u64(pos, where)
                    pos += 8
                    item = []
                    for _ in range(ln):
                        s, pos = string(pos, where)
                        item.append(s.decode("utf-8", "replace"))
                    vals.append(item)
                else:
                    ln = u64(pos, where)
                    w = np.dtype(code).itemsize
                    need(pos + 8, ln * w, where)
                    a = np.frombuffer(buf, dtype=np.dtype(bo + code), count=ln, offset=pos + 8)
                    vals.append(a.astype(bool) if tname == "vector<bool>" else a.astype(a.dtype.newbyteorder("=")))
                    pos += 8 + ln * w
        if KEY_TYPES[key] in kinds:
            out[KEY_TYPES[key]][name] = vals[0] if key == 0 else vals
    return out


@drops_vertex_weights(".gt")
def write_gt(graph: Graph, path: str | os.PathLike, *, comment: str = "written by partplan") -> Path:
    """Write the structure as a graph-tool ``.gt`` file (no property maps;
    gzip when named ``.gz``). Undirected graphs store each edge once (the
    ``u <= v`` half); used for tests and hand-offs to graph-tool. Edge weights other than 1 are
    not written: a :class:`~partplan.errors.PartplanWarning` says so."""
    from ._common import atomic_output, warn_user
    if graph.data is not None and not bool(np.all(graph.data == 1.0)):
        warn_user(f"{path}: the graph's edge weights are not written (partplan writes .gt without property maps; "
                  f".npz, .mtx, .graph and the edge formats keep them): reading it back gives every edge weight 1")

    p = Path(path)
    n = graph.n
    directed = graph.directed or not graph.is_symmetric()
    r, c = graph.rows, graph.indices
    if not directed:
        keep = r <= c
        r, c = r[keep], c[keep]
    deg = np.bincount(r, minlength=n).astype("<u8")
    d = _width(n)
    out = bytearray(MAGIC + bytes([1, 0]))
    cb = comment.encode()
    out += len(cb).to_bytes(8, "little") + cb + bytes([int(directed)]) + n.to_bytes(8, "little")
    # records: degree (8 bytes) + neighbours (d bytes each), assembled vectorized
    rec_len = 8 + deg.astype(np.int64) * d
    body = np.zeros(int(rec_len.sum()), dtype=np.uint8)
    rstart = np.zeros(n, dtype=np.int64)
    if n:
        np.cumsum(rec_len[:-1], out=rstart[1:])
        body[rstart[:, None] + np.arange(8)] = deg.view(np.uint8).reshape(n, 8)
        first = np.zeros(n, dtype=np.int64)
        np.cumsum(deg[:-1].astype(np.int64), out=first[1:])
        within = np.arange(r.size, dtype=np.int64) - first[r]
        offs = rstart[r] + 8 + within * d
        nb = c.astype(f"<u{d}").view(np.uint8).reshape(-1, d)
        body[offs[:, None] + np.arange(d)] = nb
    out += body.tobytes()
    out += (0).to_bytes(8, "little")  # no property maps
    with atomic_output(p) as fh:
        fh.write(bytes(out))
    return p
