"""Graph ingest and export: one module per format, chosen by file extension.

- ``.mtx`` ``.mm`` -> ``mtx``: :func:`read_mtx` / :func:`write_mtx`
- ``.graph`` ``.metis`` -> ``metis``: :func:`read_metis` / :func:`write_metis`
- ``.hgr`` -> ``hgr``: :func:`read_hypergraph` / :func:`write_hypergraph`
  (:func:`read_graph` reads it as a matrix when m == n)
- ``.npz`` -> ``npz``: :func:`read_npz` / :func:`write_npz` (scipy.sparse)
- ``.parquet`` ``.pq`` / ``.arrow`` ``.ipc`` / ``.feather`` / ``.csv`` with a
  header -> edge tables: :func:`read_edge_table` / :func:`write_edge_table`
- ``.txt`` ``.edges`` ``.el`` ``.tsv`` ``.edgelist`` ``.snap`` (and ``.csv``
  without header) -> ``edgelist``: :func:`read_edgelist` / :func:`write_edgelist`
- ``.gt`` -> ``gt`` (graph-tool binary): :func:`read_gt` / :func:`write_gt`; property maps: :func:`read_gt_properties`
- ``.pt`` -> ``pt`` (PyTorch: a PyG ``Data`` or an ``edge_index`` tensor, safe
  ``weights_only`` load; read only): :func:`read_pt`

Text formats may carry ``.gz``. Partition files: :func:`read_partition` /
:func:`write_partition` (module ``partfile``). See docs/guide/formats.md.

Every reader raises :class:`~partplan.errors.GraphFormatError` naming the file
(and the 1-based line, or the column / array) on malformed input; writers are
atomic (temporary file in the target folder, then ``os.replace``).

Examples
--------
>>> import tempfile, os
>>> from partplan import Graph
>>> g = Graph.from_edges([0, 1, 2], [1, 2, 0], symmetrize=True)
>>> p = write_graph(g, os.path.join(tempfile.mkdtemp(), "tri.mtx"))
>>> h = read_graph(p)
>>> (h.n, h.nnz, h.fingerprint == g.fingerprint)
(3, 6, True)
"""
from __future__ import annotations

import inspect
import os
from pathlib import Path

from ..errors import BackendUnavailableError, GraphFormatError, OptionError
from ..graph import Graph
from ..hypergraph import Hypergraph
from ._common import format_name
from .edgelist import read_edgelist, write_edgelist
from .graphtool import read_gt, read_gt_properties, write_gt
from .hgr import read_hgr_graph, read_hypergraph, write_hypergraph
from .metis import read_metis, write_metis
from .mtx import read_mtx, write_mtx
from .npz import read_npz, write_npz
from .partfile import read_partition, write_partition
from .pt import read_pt
from .table import read_edge_table, write_edge_table
from ..graph import check_graph

EXTENSIONS: dict[str, str] = {
    "mtx": "mtx", "mm": "mtx",
    "graph": "metis", "metis": "metis",
    "hgr": "hgr",
    "npz": "npz",
    "parquet": "parquet", "pq": "parquet",
    "arrow": "arrow", "ipc": "arrow",
    "feather": "feather",
    "csv": "csv",
    "txt": "edgelist", "edges": "edgelist", "el": "edgelist", "tsv": "edgelist",
    "edgelist": "edgelist", "snap": "edgelist",
    "gt": "gt",
    "pt": "pt",
}
FORMATS = ("mtx", "metis", "hgr", "npz", "parquet", "arrow", "feather", "csv", "edgelist", "gt", "pt")
#: the formats :func:`write_graph` writes (``.hgr`` is a hypergraph's: :func:`write_hypergraph`; ``.pt`` is read only)
WRITE_FORMATS = ("mtx", "metis", "npz", "parquet", "arrow", "feather", "csv", "edgelist", "gt")
_BINARY = ("npz", "parquet", "arrow", "feather", "pt")


def detect_format(path: str | os.PathLike) -> str:
    """Format name of ``path`` from its extension (a trailing ``.gz`` is skipped)."""
    name = format_name(path)
    ext = name.rsplit(".", 1)[-1] if "." in name else ""
    fmt = EXTENSIONS.get(ext)
    if fmt is None:
        known = " ".join("." + e for e in EXTENSIONS)
        raise GraphFormatError(f"unknown graph file extension {('.' + ext) if ext else '(none)'}; known: "
                               f"{known} (or name the format: read_graph(path, format=...), "
                               f"partplan convert --from FMT)", path)
    if fmt in _BINARY and Path(path).name.lower().endswith(".gz"):
        raise GraphFormatError(f"{fmt} files are binary; .gz is only for text formats", path)
    return fmt


def _reader(fmt: str):
    from functools import partial

    return {
        "mtx": read_mtx, "metis": read_metis, "hgr": read_hgr_graph, "npz": read_npz, "gt": read_gt, "pt": read_pt,
        "edgelist": read_edgelist, "csv": _read_csv,
        "parquet": partial(read_edge_table, format="parquet"),
        "arrow": partial(read_edge_table, format="arrow"),
        "feather": partial(read_edge_table, format="feather"),
    }[fmt]


def _read_csv(path, **kw) -> Graph:
    """.csv: a header line -> edge table (pyarrow), else a comma edge list."""
    return read_edgelist(path, **kw)  # read_edgelist hands header files to read_edge_table


def _check_opts(fn, fmt: str, opts: dict, what: str = "reader") -> None:
    target = fn.func if hasattr(fn, "func") else fn
    params = inspect.signature(target).parameters
    fixed = ("path", "format", "graph")      # given by read_graph / write_graph themselves
    for k in opts:
        if k not in params or k in fixed:
            names = sorted(p for p in params if p not in fixed + ("block_bytes",))
            raise BackendUnavailableError(f"option {k!r} is not supported by the {fmt} {what} "
                                          f"(its options: {', '.join(names) or 'none'})")


def read_graph(path: str | os.PathLike, format: str | None = None, *, symmetrize: bool = False,
               self_loops: str = "keep", dedupe: bool = True, drop_isolated: bool = False,
               **fmt_opts) -> Graph:
    """Read a graph file; the reader is chosen by ``format`` or the extension.

    Normalization (see :meth:`partplan.graph.Graph.normalize`):
    symmetrize : add ``A^T`` (no-op for files that are symmetric by format:
        METIS, symmetric .mtx, undirected .gt).
    self_loops : "keep" | "add" (A + I) | "remove".
    dedupe : sum duplicate entries (weights added).
    drop_isolated : remove vertices without edges (``graph.ids`` maps back).
    fmt_opts : format options, e.g. ``relabel=False`` (edge lists / tables),
        ``src="from", dst="to", weight="w"`` (tables), ``vertex_weight=0``
        (multi-constraint METIS). An option the format does not know raises
        :class:`~partplan.errors.BackendUnavailableError`.
    """
    from .._args import check_bool, check_path
    check_path("path", path)
    symmetrize, dedupe, drop_isolated = (check_bool(name, v) for name, v in (
        ("symmetrize", symmetrize), ("dedupe", dedupe), ("drop_isolated", drop_isolated)))
    if not isinstance(self_loops, str) or self_loops not in ("keep", "add", "remove"):
        raise OptionError(f"self_loops must be 'keep', 'add' or 'remove', not {self_loops!r}")
    if format is not None and not isinstance(format, str):
        raise OptionError(f"format must be a format name (str) or None, got {format!r}")
    if format is None and Path(path).is_dir() and (Path(path) / "header.json").is_file():  # chunked graph (io/chunked.py)
        from .chunked import read_chunked
        _check_opts(read_chunked, "chunked", fmt_opts)
        return read_chunked(path, symmetrize=symmetrize, self_loops=self_loops, dedupe=dedupe,
                            drop_isolated=drop_isolated, **fmt_opts)
    fmt = format or detect_format(path)
    if fmt not in FORMATS:
        raise GraphFormatError(f"unknown format {fmt!r} (known: {', '.join(FORMATS)})", path)
    fn = _reader(fmt)
    _check_opts(read_edgelist if fmt == "csv" else fn, fmt, fmt_opts)
    try:
        return fn(path, symmetrize=symmetrize, self_loops=self_loops, dedupe=dedupe, drop_isolated=drop_isolated,
                  **fmt_opts)
    except GraphFormatError as exc:
        if exc.path is not None or type(exc) is not GraphFormatError:
            raise
        # a check of the graph built from the file's entries (Graph's own): the file is the place
        problem = exc.problem
        if exc.field == "data" and "finite" in problem and dedupe:
            problem += ("; duplicate entries are summed (dedupe), and a sum can go past the largest float even "
                        "where every value in the file is finite")
        raise GraphFormatError(problem, path, exc.line, exc.field) from None


def write_graph(graph: Graph, path: str | os.PathLike, format: str | None = None, **opts) -> Path:
    """Write ``graph`` in the format of ``path``'s extension (or ``format``);
    atomic. ``.hgr`` is refused: write a hypergraph model with
    :func:`write_hypergraph` (e.g. ``write_hypergraph(column_net(g), path)``)."""
    check_graph(graph)
    from .._args import check_path
    check_path("path", path)
    fmt = format or detect_format(path)
    writers = {"mtx": write_mtx, "metis": write_metis, "npz": write_npz, "edgelist": write_edgelist,
               "gt": write_gt, "parquet": write_edge_table, "arrow": write_edge_table,
               "feather": write_edge_table, "csv": write_edge_table}
    if fmt == "hgr":
        raise BackendUnavailableError("write_graph does not write .hgr: build a hypergraph model "
                                      "(partplan.models.column_net) and call partplan.io.write_hypergraph")
    if fmt == "pt":
        raise BackendUnavailableError("write_graph does not write .pt graphs (read only); use .npz, .mtx, ...")
    if fmt not in writers:
        raise GraphFormatError(f"unknown format {fmt!r} (written: {', '.join(WRITE_FORMATS)})", path)
    _check_opts(writers[fmt], fmt, opts, "writer")   # one error naming the option, not the writer's TypeError
    if fmt in ("parquet", "arrow", "feather", "csv"):
        opts.setdefault("format", fmt)
    return writers[fmt](graph, path, **opts)


__all__ = ["read_graph", "write_graph", "detect_format", "read_hypergraph", "write_hypergraph",
           "read_mtx", "write_mtx", "read_metis", "write_metis", "read_npz", "write_npz",
           "read_edgelist", "write_edgelist", "read_edge_table", "write_edge_table", "read_gt", "read_gt_properties", "write_gt",
           "read_hgr_graph", "read_pt", "read_partition", "write_partition", "Graph", "Hypergraph", "FORMATS",
           "WRITE_FORMATS", "EXTENSIONS"]
