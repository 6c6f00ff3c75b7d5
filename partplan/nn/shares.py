"""Per-rank data shares beside a 1D plan: each rank reads its own rows, edges
and features only.

A plan directory may hold one **share** per rank (``share-NNNNN.arrow``),
listed in the manifest's ``shares`` entry with its size and sha256 like a
plan shard, and its xxh3_128 (a fast checksum: :func:`read_share` checks it
while it copies the arrays, ``partplan validate`` checks the sha256).

Rank r's share holds, in :class:`partplan.nn.Halo`'s indexing:

=================== ==========================================================
``local_ids``       int64 [L]: global ids of the rank's rows, in ``op(x)`` order
``edge_index``      int64 [2, E_r]: every edge whose target is a local row;
                    sources index ``cat([local rows, halo rows])``
``edge_ids``        int64 [E_r]: each edge's column in the user's ``edge_index``
``halo_in_degree``  int64 [H]: in-edges of each halo row that are not self loops
``halo_loops``      int64 [H]: self loops of each halo row (both over the whole
                    graph: what ``gcn_norm`` needs to be exact through ``Halo``)
``node/NAME``       rows ``local_ids`` of every node field (``x``, ``y``, masks, ...)
``edge/NAME``       rows ``edge_ids`` of every edge field (``edge_attr``, ...)
=================== ==========================================================

Fields keep their dtype (float16/32/64, bfloat16, int8–64, uint8, bool) and
shape; the schema metadata records both, the rank, the plan's graph
fingerprint and its partition file's sha256, so a share of another rank or
another plan is refused. :func:`read_share` checks the file against the
manifest (size; xxh3_128, or sha256 for a share listed without one), then
every array against the plan's rows before it returns.

Writers (:func:`write_shares`) take a PyG ``Data`` in memory, or a chunked
graph (:mod:`partplan.io.chunked`, rows = targets) with a node data file
(:mod:`partplan.nn.data`, read by rows), and write one rank's share at a time:
besides its input, a writer holds one share plus one chunk. The plan
directory is replaced atomically (the plan's own files are hard-linked into
the new directory, never rewritten), so a failure leaves the old plan.
"""
from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np

from ..errors import OptionError, PlanError
from ..program.exchange import segments
from .rows import RankRows, exchange_step, positions

__all__ = ["SHARE_FIELDS", "write_shares", "read_share", "has_shares", "share_name"]

SHARE_FORMAT = "partplan-share"
SHARE_VERSION = 1
#: the arrays every share holds (besides node/... and edge/... fields)
SHARE_FIELDS = ("local_ids", "edge_index", "edge_ids", "halo_in_degree", "halo_loops")
_DTYPES = {"float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64", "uint8", "bool"}
_STORED = {"bool": np.uint8, "bfloat16": np.uint16}
_FIELD_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_META_KEY = b"partplan"
#: fields of a PyG Data that are the graph itself, never carried as node or edge fields
_GRAPH_KEYS = {"edge_index", "adj_t", "num_nodes", "num_edges"}


def share_name(rank: int) -> str:
    return f"share-{rank:05d}.arrow"


def has_shares(manifest: dict) -> bool:
    return isinstance(manifest.get("shares"), dict)


# ----------------------------------------------------------------------------- arrays in and out
def _numpy(t) -> tuple[np.ndarray, str]:
    """(numpy array, dtype name) of a torch tensor or array-like (bfloat16 as its uint16 bits)."""
    try:
        import torch
        if isinstance(t, torch.Tensor):
            t = t.detach()
            if t.layout != torch.strided or t.is_meta:
                raise PlanError(f"a {t.layout} / {t.device} tensor cannot be written to a share (dense CPU "
                                f"tensors only)")
            t = t.cpu()
            if t.dtype == torch.bfloat16:
                return t.contiguous().view(torch.int16).numpy().view(np.uint16), "bfloat16"
            return t.numpy(), str(t.dtype).replace("torch.", "")
    except ImportError:
        pass
    a = np.asarray(t)
    return a, a.dtype.name


def _to_tensor(a: np.ndarray, dtype: str):
    """A torch tensor over ``a`` (a writable copy already made by the reader)."""
    import torch
    if dtype == "bfloat16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    if dtype == "bool":
        return torch.from_numpy(a.astype(bool))
    return torch.from_numpy(a)


def _batch(arrays: dict[str, tuple[np.ndarray, str]], meta: dict):
    import pyarrow as pa
    cols, fields = [], []
    for name in sorted(arrays):
        a, _ = arrays[name]
        a = np.ascontiguousarray(a).reshape(-1)
        if a.dtype == np.bool_:
            a = a.view(np.uint8)
        offsets = pa.array(np.array([0, a.size], dtype=np.int64))
        col = pa.LargeListArray.from_arrays(offsets, pa.array(a))
        cols.append(col)
        fields.append(pa.field(name, col.type, nullable=False))
    schema = pa.schema(fields, metadata={_META_KEY: json.dumps(meta, sort_keys=True).encode()})
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _write_file(path: Path, arrays: dict, meta: dict) -> dict:
    import pyarrow as pa
    import pyarrow.ipc as ipc

    from ..plan.store import _digests
    batch = _batch(arrays, meta)
    with pa.OSFile(str(path), "wb") as sink:
        with ipc.new_file(sink, batch.schema) as w:
            w.write_batch(batch)
    return {"file": path.name, "bytes": path.stat().st_size, **_digests(path)}


# ----------------------------------------------------------------------------- what a share holds
def _plan_identity(m: dict) -> dict:
    """What ties a share to its plan: the graph's fingerprint and the partition file's sha256."""
    return {"graph_fingerprint": m["graph"]["fingerprint"], "partition_sha256": m["partition_file"]["sha256"]}


def rank_rows(name: str, m: dict, shard) -> tuple[np.ndarray, np.ndarray]:
    """(local_ids in Halo's order, halo_ids) of one rank of a 1D conformal plan."""
    v = RankRows(name, m, shard, exchange_step(name, m))
    return v.local_ids, v.halo_ids


#: fields PyG's node tasks hold one row per vertex and per edge: a wrong row count is an error
_NODE_FIELDS = ("x", "y", "pos", "train_mask", "val_mask", "test_mask")
_EDGE_FIELDS = ("edge_attr", "edge_weight")


def _graph_level(key: str, shape, n: int) -> bool:
    """A graph-level label (PyG's graph classification): ``y`` of one row on a graph of more than
    one vertex. Not a node field: not carried, not refused."""
    return key == "y" and n != 1 and len(shape) >= 1 and int(shape[0]) == 1


def _field_kind(data, key: str, val, n: int, e: int) -> str | None:
    """"node", "edge" or None (not carried) for a Data field, by the plan's ``n`` vertices and the
    data's ``e`` edges: ``x``, ``y``, ``pos`` and the train / val / test masks must have n rows and
    ``edge_attr`` / ``edge_weight`` e (one PlanError naming the field: PyG infers its ``num_nodes``
    from ``x``, so a short ``x`` would drop every node field), except a graph-level ``y``
    (:func:`_graph_level`, not carried); other fields by their rows (PyG's
    own verdict first), and a field of neither count (``edge_label_index``, ...) is not carried."""
    if key in _GRAPH_KEYS or not hasattr(val, "shape") or len(getattr(val, "shape", ())) == 0:
        return None
    rows = int(val.shape[0])
    for names, kind, want, what in ((_NODE_FIELDS, "node", n, "the plan's graph has {} vertices"),
                                    (_EDGE_FIELDS, "edge", e, "the data's edge_index has {} edges")):
        if key in names:
            if kind == "node" and _graph_level(key, val.shape, n):
                return None
            if rows != want:
                raise PlanError(f"field {key!r}: {rows} rows, {what.format(want)}")
            return kind
    for kind, test in (("node", "is_node_attr"), ("edge", "is_edge_attr")):
        fn = getattr(data, test, None)
        if callable(fn):
            try:
                if fn(key) and rows == (n if kind == "node" else e):
                    return kind
            except Exception:   # noqa: BLE001 - PyG's heuristics may raise on odd fields; decide by size below
                pass
    if callable(getattr(data, "is_node_attr", None)):
        return None   # a Data that said neither
    if key.startswith("edge_") and rows == e:
        return "edge"
    if rows == n:
        return "node"
    if rows == e:
        return "edge"
    return None


def _data_items(data) -> list:
    """(name, value) of every field of a PyG Data / dict / namespace."""
    if isinstance(data, dict):
        return list(data.items())
    if hasattr(data, "keys") and callable(data.keys):
        return [(k, data[k]) for k in data.keys()]
    return list(vars(data).items())


def _data_fields(data, n: int, e: int, skipped: list | None = None) -> tuple[dict, dict]:
    """(node fields, edge fields) of a PyG Data / dict / namespace: name -> tensor. ``skipped``
    collects (name, rows) of the array fields not carried (neither n nor e rows, nor graph-level)."""
    node, edge = {}, {}
    for key, val in _data_items(data):
        kind = _field_kind(data, key, val, n, e)
        if kind is None:
            shape = getattr(val, "shape", ())
            if (skipped is not None and key not in _GRAPH_KEYS and len(shape) >= 1
                    and not _graph_level(key, shape, n)):
                skipped.append((str(key), int(shape[0])))
            continue
        if not _FIELD_NAME.match(str(key)):
            raise PlanError(f"field {key!r}: a share's field names are letters, digits and _ (64 at most)")
        (node if kind == "node" else edge)[str(key)] = val
    return node, edge


def _edge_index(data, n: int) -> np.ndarray:
    """The data's ``edge_index`` as int64[2, E], its ids checked against the plan's ``n`` vertices."""
    from ..errors import GraphFormatError
    from ..io._pyg import edge_index_array
    ei = getattr(data, "edge_index", None) if not isinstance(data, dict) else data.get("edge_index")
    if ei is None:
        raise PlanError("the data has no edge_index")
    try:
        ei = edge_index_array(ei, "shares")
    except GraphFormatError as exc:
        raise PlanError(str(exc)) from None
    if ei.size and (ei.min() < 0 or ei.max() >= n):
        raise PlanError(f"edge_index holds vertex ids outside 0..{n - 1} (the plan's graph has {n} vertices)")
    return ei


def _checked_fields(data, n: int, e: int, skipped: list | None = None) -> tuple[dict, dict]:
    """:func:`_data_fields`, each field checked as a share stores it: a dense array or CPU-readable
    tensor of a dtype a share holds, and the values ``train gcn --data`` checks (finite ``x``, no
    negative label on a vertex of a mask; :func:`_check_values`) — one PlanError naming the field."""
    node, edge = _data_fields(data, n, e, skipped)
    for key, val in {**node, **edge}.items():
        try:
            import torch
            if isinstance(val, torch.Tensor):
                if val.is_meta:
                    raise PlanError(f"field {key!r} is a tensor on the meta device (a shape without values); a "
                                    f"share holds its rows' values")
                if val.layout != torch.strided:
                    raise PlanError(f"field {key!r} is a {val.layout} tensor; a share holds dense rows "
                                    f"({key}.to_dense())")
                dt = str(val.dtype).replace("torch.", "")
            else:
                dt = np.asarray(val).dtype.name
        except ImportError:
            dt = np.asarray(val).dtype.name
        if dt not in _DTYPES:
            raise PlanError(f"field {key!r} has dtype {dt}; a share holds {', '.join(sorted(_DTYPES))} (cast it "
                            f"first)")
    _check_values(node)
    return node, edge


def _check_values(node: dict) -> None:
    """The values :func:`partplan.nn.data.check_data` refuses in a data file, refused in a Data's
    shares too: a non-finite feature in ``x``, a negative label ``y`` on a vertex of a mask."""
    from .data import MASKS, negative_label_problem, non_finite_problem
    if "x" in node:
        x = node["x"]
        if type(x).__module__.startswith("torch"):      # float16 / bfloat16 read as float32
            x = x.detach().cpu().float().numpy() if x.is_floating_point() else None
        else:
            x = np.asarray(x)
        problem = non_finite_problem(x) if x is not None and x.dtype.kind == "f" else None
        if problem:
            raise PlanError(f"field 'x': {problem}")
    if "y" in node:
        y, _ = _numpy(node["y"])
        masks = [_numpy(node[k])[0] for k in MASKS if k in node]
        if y.ndim == 1 and y.dtype.kind in "iu" and masks:
            labeled = np.zeros(y.shape[0], dtype=bool)
            for mk in masks:
                if mk.dtype == bool and mk.shape == labeled.shape:
                    labeled |= mk
            problem = negative_label_problem(y, labeled)
            if problem:
                raise PlanError(f"field 'y': {problem}")


def check_share_data(data, n: int) -> None:
    """What :func:`write_shares` refuses in a PyG ``data`` for a plan of ``n`` vertices — its
    ``edge_index``, each field's rows, name, layout and dtype — said before anything is written (one
    PlanError naming the field): ``plan_from_pyg(..., shares=True)`` checks it before the plan."""
    ei = _edge_index(data, n)
    _checked_fields(data, n, int(ei.shape[1]))


class _Source(Protocol):
    """Where a writer reads edges and fields from, one rank at a time (a Data in memory, or a chunked
    graph with a node data file)."""

    n: int
    e: int

    def rank_edges_of(self, r: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        """(int64[2, count]: source and target global ids, C-contiguous; int64[count]: edge ids
        ascending) of every edge whose target is a row of rank r (``count``, from :meth:`in_degrees`)."""

    def in_degrees(self) -> tuple[np.ndarray, np.ndarray]:
        """(non-loop in-edges, loops) per vertex, int64[n] each."""

    def node_rows(self, ids: np.ndarray) -> dict:
        """{field name: rows ``ids``} of every node field."""

    def edge_rows(self, eids: np.ndarray) -> dict:
        """{field name: rows ``eids``} of every edge field."""


class _DataSource:
    """A PyG Data in memory: edges grouped by the target's rank once (stable: edge ids ascending)."""

    def __init__(self, data, n: int, part: np.ndarray, p: int):
        ei = _edge_index(data, n)
        self.n, self.e = n, int(ei.shape[1])
        self.ei = ei
        skipped: list = []
        self.node, self.edge = _checked_fields(data, n, self.e, skipped)
        if skipped:   # carried by neither vertex nor edge: said, since a share then lacks them
            from ..io._common import warn_user
            warn_user("fields not written to the shares (their rows are neither the graph's "
                      f"{n} vertices nor its {self.e} edges): "
                      + ", ".join(f"{k} ({r} rows)" for k, r in skipped))
        owner = part[ei[1]]
        self.order = np.argsort(owner, kind="stable")
        self.bounds = np.searchsorted(owner[self.order], np.arange(p + 1))    # ranks without rows too

    def rank_edges_of(self, r: int, count: int):
        sel = self.order[self.bounds[r]:self.bounds[r + 1]]
        return np.ascontiguousarray(self.ei[:, sel]), sel.astype(np.int64)

    def in_degrees(self):
        loop = self.ei[0] == self.ei[1]
        return (np.bincount(self.ei[1, ~loop], minlength=self.n).astype(np.int64),
                np.bincount(self.ei[1, loop], minlength=self.n).astype(np.int64))

    def node_rows(self, ids):
        return {k: _take(v, ids) for k, v in self.node.items()}

    def edge_rows(self, eids):
        return {k: _take(v, eids) for k, v in self.edge.items()}


class _ChunkedSource:
    """A chunked CSR graph (row = target, as PyG's flow reads it: ``A[i, j]`` for the edge j -> i; edge id =
    the nonzero's position in the CSR) and an optional node data file read by rows."""

    def __init__(self, graph, data_file, n: int, part: np.ndarray):
        from ..io.chunked import chunk_info
        self.path = Path(graph)
        self.info = chunk_info(self.path)
        if self.info.n != n:
            raise PlanError(f"{self.path}: the chunked graph has {self.info.n} vertices, the plan {n}")
        self.n, self.e = n, int(self.info.nnz)
        self.part = part
        self.data_file = data_file
        if data_file is not None:   # one share at a time: the largest part's rows of x at most
            from .data import check_data
            check_data(data_file, n, keep_rows=int(np.bincount(part).max()) if part.size else 0)

    def check_graph(self, plan: Path, m: dict) -> None:
        """One PlanError unless the chunks are the graph the plan was built from (its source
        fingerprint; streamed, one pass over the chunks)."""
        from ..io.chunked import chunked_fingerprint, chunked_matrix_fingerprint
        from ..plan.store import source_fingerprints_match
        fp = chunked_fingerprint(self.path, info=self.info)
        if not source_fingerprints_match(m, fp, chunked_matrix_fingerprint(self.info, fp)):
            for _ in self._chunks(values=True):   # a damaged chunk is named with what is wrong in it
                pass
            raise PlanError(f"{self.path}: the chunked graph (n={self.n}, {self.e} nonzeros) is not the graph of plan "
                            f"{plan} (n={m['graph'].get('n')}, {m['graph'].get('nnz')} nonzeros in its matrix): "
                            f"pass the graph the plan was built from")

    def _chunks(self, values: bool = False):
        from ..io.chunked import read_chunk_rows
        base = 0
        for c in self.info.chunks:
            rows = read_chunk_rows(self.path, c.row_lo, c.row_hi, info=self.info)
            out = (c.row_lo, c.row_hi, base, np.asarray(rows.indptr, dtype=np.int64), np.asarray(rows.indices))
            yield out + ((rows.data,) if values else ())
            base += int(c.nnz)

    def rank_edges_of(self, r: int, count: int):
        ei = np.empty((2, count), dtype=np.int64)    # filled chunk by chunk: no list of pieces to join
        eids = np.empty(count, dtype=np.int64)
        weighted = self.info.weighted
        self._weights = np.empty(count, dtype=np.float64) if weighted else None
        at = 0
        for lo, hi, base, indptr, indices, data in self._chunks(values=True):
            mine = np.flatnonzero(self.part[lo:hi] == r)
            if not mine.size:
                continue
            cnt = indptr[mine + 1] - indptr[mine]
            pos = segments(indptr[mine], cnt)
            m = pos.size
            if at + m > count:
                raise PlanError(f"{self.path}: the chunks changed while the shares were written")
            ei[0, at:at + m] = indices[pos]
            ei[1, at:at + m] = np.repeat(mine + lo, cnt)
            eids[at:at + m] = pos + base
            if weighted:
                self._weights[at:at + m] = np.asarray(data)[pos]
            at += m
        if at != count:
            raise PlanError(f"{self.path}: the chunks changed while the shares were written")
        return ei, eids

    def edge_rows(self, eids):
        """A weighted chunked graph's values as the edge field ``edge_weight`` (rows of the last
        :meth:`rank_edges_of`, which ``eids`` are); none for a pattern."""
        w, self._weights = getattr(self, "_weights", None), None
        return {} if w is None else {"edge_weight": w}

    def in_degrees(self):
        nonloop = np.zeros(self.n, dtype=np.int64)
        loops = np.zeros(self.n, dtype=np.int64)
        for lo, hi, _, indptr, indices in self._chunks():
            rows = np.repeat(np.arange(lo, hi, dtype=np.int64), np.diff(indptr))
            loop = indices == rows
            loops[lo:hi] = np.bincount(rows[loop] - lo, minlength=hi - lo)
            nonloop[lo:hi] = np.diff(indptr) - loops[lo:hi]
        return nonloop, loops

    def node_rows(self, ids):
        if self.data_file is None:
            return {}
        from .data import read_rows
        return read_rows(self.data_file, ids)


def _take(v, rows: np.ndarray):
    import torch
    if isinstance(v, torch.Tensor):
        return v[torch.from_numpy(rows)]
    return np.asarray(v)[rows]


def _field_entry(a: np.ndarray, dtype: str, where: str) -> dict:
    if dtype not in _DTYPES:
        raise PlanError(f"field {where!r} has dtype {dtype}; a share holds "
                        f"{', '.join(sorted(_DTYPES))} (cast it first)")
    return {"dtype": dtype, "shape": [int(s) for s in a.shape]}


# ----------------------------------------------------------------------------- writer
def check_data_graph(plan, m: dict, data) -> None:
    """One PlanError unless the PyG Data ``data`` (with an ``edge_index``) is the graph of the plan
    at ``plan`` (manifest ``m``): :func:`_check_data_graph`."""
    from ..io._pyg import edge_index_array
    e = int(edge_index_array(data, "the data").shape[1])
    _check_data_graph(Path(plan), m, data, e)


def _reversed_fingerprint(data, norm) -> str | None:
    """The fingerprint of the plan graph that ``flow="target_to_source"`` builds from ``data`` (a
    row per edge source), to name that cause of a mismatch; None when it cannot be built."""
    from ..errors import GraphFormatError
    from ..interop.pyg import plan_graph
    from ..models.normalize import normalize_adjacency
    try:
        t = plan_graph(data, normalize=norm, flow="target_to_source")
    except (GraphFormatError, OptionError, ValueError, TypeError):
        return None
    return (normalize_adjacency(t, norm) if norm else t).fingerprint


def _check_data_graph(path: Path, m: dict, data, e: int) -> None:
    """One PlanError unless ``data`` (``e`` edges) is the graph the plan was built from: the source
    matrix's fingerprint (pattern and values: PyG's multi-edges sum into values) of its edges,
    unweighted or weighted by any of its fields with one value per edge (a plan built with
    ``weight=``), or, for a plan built with ``--symmetrize`` (its manifest's ``symmetrized``), the
    pattern of the symmetrized edges; the message says whether the edges differ or only their
    multiplicities or weights."""
    from ..errors import GraphFormatError
    from ..interop.pyg import plan_graph
    from ..models.normalize import normalize_adjacency
    from ..plan.store import source_matches
    norm = m.get("normalize")
    fields = [None] + [k for k, v in _data_items(data)
                       if k not in _GRAPH_KEYS and getattr(v, "shape", None) is not None
                       and tuple(v.shape) in ((e,), (e, 1))]
    g = None
    for weight in fields:
        try:
            cand = plan_graph(data, normalize=norm, weight=weight)
        except (GraphFormatError, OptionError, ValueError, TypeError):   # a field that is no weight: no candidate
            if weight is None:
                raise
            continue
        if source_matches(m, cand):
            return
        g = cand if weight is None else g
    mg = m["graph"]
    pattern = (normalize_adjacency(g, norm) if norm else g).fingerprint
    if pattern != mg.get("fingerprint") and m.get("symmetrized") is True:   # built with --symmetrize
        sym = g.normalize(symmetrize=True)
        if (normalize_adjacency(sym, norm) if norm else sym).fingerprint == mg.get("fingerprint"):
            return
    if pattern != mg.get("fingerprint") and _reversed_fingerprint(data, norm) == mg.get("fingerprint"):
        raise PlanError(f"the graph of plan {path} is this data's graph reversed: the plan was built with "
                        f"flow='target_to_source' (a row per edge source), or this data's edge_index is the plan's "
                        f"flipped; shares, Halo and NeighborLoader read PyG's source_to_target flow (a row per "
                        f"target): build the plan from this data with the default flow")
    if pattern != mg.get("fingerprint"):
        raise PlanError(f"the data's graph (n={g.n}, {g.nnz} distinct edges) is not the graph of plan {path} "
                        f"(n={mg.get('n')}): build the plan from this data, or pass the data the plan was built "
                        f"from")
    raise PlanError(f"the data has the edges of the graph of plan {path} but other multiplicities or weights "
                    f"(PyG sums multi-edges; a plan built with weight=FIELD needs that field): pass the data the "
                    f"plan was built from")


def write_shares(plan, data: Any = None, *, graph=None, features=None,
                 progress: Callable[[str, int, int], None] | None = None) -> Path:
    """Write every rank's share beside the 1D plan at ``plan`` (a plan directory).

    Parameters
    ----------
    plan : the plan directory (1D, conformal: what :class:`partplan.nn.Halo` takes).
    data : a PyG ``Data`` (or dict / namespace) with ``edge_index`` and its node
        fields (``x``, ``y``, masks, any field with one row per vertex) and edge
        fields (``edge_attr``, ... one row per edge, by edge id); or None with
        ``graph``.
    graph : a chunked graph directory (rows = targets; edge id = CSR position),
        instead of ``data``; ``features`` : a node data file (``.npz`` / ``.pt``,
        :mod:`partplan.nn.data`) whose ``x``, ``y`` and masks are read by rows.
    progress : called as ``progress("writing shares", done, total)``.

    Each rank's share is built and written alone (one share in memory at a
    time); the plan directory is replaced atomically. Returns the plan path.
    """
    from ..plan.store import load_plan_partition, load_rank
    path = Path(plan)
    m, part, owner = load_plan_partition(path)
    if owner is not None and not np.array_equal(owner, part):
        raise PlanError(f"{path}: shares need a conformal plan (each vertex's row and output on one rank)")
    n, p = int(m["graph"]["n"]), int(m["ranks"])
    if (data is None) == (graph is None):
        raise PlanError("write_shares takes either data (a PyG Data) or graph (a chunked graph directory)")
    src = _DataSource(data, n, part, p) if data is not None else _ChunkedSource(graph, features, n, part)
    if data is not None:
        _check_data_graph(path, m, data, src.e)
    elif m.get("symmetrized") is not True:   # (a plan of the symmetrized graph: its source is not the chunks')
        src.check_graph(path, m)
    ident = _plan_identity(m)
    nonloop, loops = src.in_degrees()
    indeg = nonloop + loops
    # the share of each rank, written into a fresh sibling directory that also links the plan's files
    from .._atomic import discard_temp
    from ..plan.store import begin_plan_dir
    tmp = begin_plan_dir(path)
    try:
        for entry in os.scandir(path):
            if entry.name.startswith("share-") or entry.name == "manifest.json":
                continue
            try:
                os.link(entry.path, tmp / entry.name)
            except OSError:
                import shutil
                shutil.copyfile(entry.path, tmp / entry.name)
        files, fields = [], {"node": {}, "edge": {}}
        for r in range(p):
            local_ids, halo_ids = rank_rows(str(path), m, load_rank(path, r, manifest=m))
            ei, eids = src.rank_edges_of(r, int(indeg[local_ids].sum()))
            pos = positions(n, local_ids, halo_ids)
            flat = ei.reshape(-1)                     # a view: ei is C-contiguous (its sources say so)
            assert flat.size == 0 or np.shares_memory(flat, ei)
            for lo in range(0, flat.size, 1 << 22):   # global ids -> Halo's positions, in place, by blocks
                flat[lo:lo + (1 << 22)] = pos[flat[lo:lo + (1 << 22)]]
            pos = None
            if ei.size and ei[0].min() < 0:
                e = int(eids[np.argmin(ei[0])])
                raise PlanError(f"{path}: rank {r}: edge {e} reads a row the plan does not send to this rank: "
                                f"the plan was not built from this graph (PyG's source -> target flow)")
            arrays = {"local_ids": (local_ids, "int64"), "edge_index": (ei, "int64"),
                      "edge_ids": (eids, "int64"), "halo_in_degree": (nonloop[halo_ids], "int64"),
                      "halo_loops": (loops[halo_ids], "int64")}
            meta_fields = {}
            for kind, rows in (("node", src.node_rows(local_ids)), ("edge", src.edge_rows(eids))):
                for key, val in rows.items():
                    a, dt = _numpy(val)
                    meta_fields[f"{kind}/{key}"] = _field_entry(a, dt, key)
                    fields[kind][key] = {"dtype": dt, "shape": [int(s) for s in a.shape[1:]]}
                    arrays[f"{kind}/{key}"] = (a, dt)
            meta = {"format": SHARE_FORMAT, "version": SHARE_VERSION, "rank": r, "ranks": p, "n": n,
                    "edges": src.e, "num_local": int(local_ids.size), "num_halo": int(halo_ids.size),
                    "num_edges": int(eids.size), "fields": meta_fields, **ident}
            files.append({"rank": r, **_write_file(tmp / share_name(r), arrays, meta)})
            arrays = None
            if progress is not None:
                progress("writing shares", r + 1, p)
        m2 = dict(m)
        m2["shares"] = {"format": SHARE_FORMAT, "version": SHARE_VERSION, "edges": src.e, "files": files,
                        "fields": fields, "source": "data" if data is not None else "chunked"}
        with open(tmp / "manifest.json", "w") as fh:
            from ..plan.store import manifest_text
            fh.write(manifest_text(m2))
        os.chmod(tmp, 0o755)
        from ..plan.store import _swap_in
        _swap_in(tmp, path)
    except OSError as exc:
        discard_temp(tmp)
        raise PlanError(f"{path}: the shares could not be written ({exc.strerror or exc}); the plan is "
                        f"unchanged") from None
    except BaseException:
        discard_temp(tmp)
        raise
    return path


# ----------------------------------------------------------------------------- reader
def read_share(plan, rank: int, *, manifest: dict | None = None, halo_ids: np.ndarray | None = None,
               local_ids: np.ndarray | None = None, verify: bool = True, strong: bool = False) -> dict:
    """Rank ``rank``'s share of the plan at ``plan``, checked: its file against
    the manifest's ``shares`` entry (size; with ``verify`` its checksum), its
    metadata (rank, plan identity), and every array (dtype, shape, ids in
    range, local rows equal to the plan's ``local_ids`` when given). Returns
    ``{"meta", "local_ids", "edge_index", "edge_ids", "halo_in_degree",
    "halo_loops", "node": {name: tensor}, "edge": {name: tensor}}``: the ids,
    edges and degrees as int64 numpy arrays, the fields as torch tensors
    (writable copies). One PlanError naming the file and field.

    The checksum is the entry's ``xxh3_128``, computed over the whole file in
    the same pass that copies the arrays out (each block hashed and its ids
    range-checked while it is in the cache), so a damaged byte anywhere is
    refused before anything is returned; ``strong`` (``partplan validate``)
    checks the ``sha256`` first as well, and an entry without ``xxh3_128``
    (shares written before it) the ``sha256`` alone."""
    from .._args import check_path
    from ..plan.store import _check_file, fast_digest, read_manifest
    path = Path(check_path("plan", plan, error=PlanError))
    m = manifest or read_manifest(path)
    entry = _share_entry(path, m, rank)
    rank, sh = entry["rank"], m["shares"]
    fast = fast_digest(entry, f"{path}: manifest field 'shares.files[{rank}]'")
    fast = fast if verify else None
    f = path / share_name(rank)
    what = f"share of rank {rank}"
    # the sha256 first where there is no xxh3_128, and under ``strong`` as well as it (validate checks
    # every checksum the manifest holds: a plan it passes is one every reader loads)
    mapped = _check_file(f, entry, what, verify and (fast is None or strong))

    def corrupted(digest):
        if fast is not None and digest != fast:
            raise PlanError(f"{f}: {what} is corrupted: xxh3_128 {digest} does not match manifest field "
                            f"'shares.files[{rank}].xxh3_128' {fast}")

    try:
        return _share_arrays(f, mapped, m, sh, rank, local_ids, halo_ids, fast is not None, corrupted)
    except PlanError:
        if fast is not None:   # a file that is not what the manifest lists says so, whatever broke first
            corrupted(mapped.xxh3_128())
        raise


def _share_entry(path: Path, m: dict, rank) -> dict:
    """The manifest's ``shares.files`` entry of ``rank``, checked (it names the rank's share file and
    holds its size and sha256); one PlanError naming the field."""
    from .._args import check_int
    sh = m.get("shares")
    if not isinstance(sh, dict) or not isinstance(sh.get("files"), list):
        raise PlanError(f"{path}: the plan has no shares (write them with plan_from_pyg(..., shares=True) "
                        f"or `partplan shares {path} --data D.pt`)")
    p = int(m["ranks"])
    rank = check_int("rank", rank, hi=max(p - 1, 0), error=PlanError)
    if not 0 <= rank < p or len(sh["files"]) != p:
        raise PlanError(f"{path}: manifest field 'shares.files' lists {len(sh['files'])} shares for {p} ranks")
    entry = sh["files"][rank]
    if not isinstance(entry, dict) or entry.get("file") != share_name(rank) or entry.get("rank") != rank:
        raise PlanError(f"{path}: manifest field 'shares.files[{rank}]' does not name {share_name(rank)}")
    size = entry.get("bytes")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0 or not isinstance(entry.get("sha256"), str):
        raise PlanError(f"{path}: manifest field 'shares.files[{rank}]' must hold bytes (a count) and sha256 "
                        f"(a string)")
    return entry


def check_share_files(plan, m: dict) -> int:
    """Every share the manifest lists is present with its recorded size (as
    :func:`partplan.plan.store.check_files` checks the shards; checksums: ``partplan validate``);
    returns how many. One PlanError naming the file or field."""
    from ..plan.store import _check_file
    if not has_shares(m):
        return 0
    path = Path(plan)
    for rank in range(int(m["ranks"])):
        entry = _share_entry(path, m, rank)
        _check_file(path / entry["file"], entry, f"share of rank {rank}", False)
    return int(m["ranks"])


def _share_arrays(f: Path, mapped, m: dict, sh: dict, rank: int, local_ids, halo_ids, digest: bool,
                  corrupted) -> dict:
    """:func:`read_share` past the file's size check: metadata, shapes, then one pass copying every
    array out (hashed when ``digest``: ``corrupted(hex)`` raises on a mismatch) and range-checking the ids."""
    from ..plan.store import _parse_arrow
    p, n = int(m["ranks"]), int(m["graph"]["n"])
    meta, arrays = _parse_arrow(f, mapped.buf, "share")
    want = {"format": SHARE_FORMAT, "version": SHARE_VERSION, "rank": rank, "ranks": p, "n": n,
            **_plan_identity(m)}
    for key, val in want.items():
        if meta.get(key) != val:
            raise PlanError(f"{f}: share metadata field {key!r} = {str(meta.get(key))[:40]!r}, expected "
                            f"{str(val)[:40]!r} (a share of another rank or another plan)")
    edges = sh.get("edges")
    ints = {k: meta.get(k) for k in ("num_local", "num_halo", "num_edges")}
    if not isinstance(edges, int) or any(not isinstance(v, int) or isinstance(v, bool) or v < 0
                                         for v in ints.values()) or meta.get("edges") != edges:
        raise PlanError(f"{f}: share metadata fields num_local / num_halo / num_edges / edges are not counts "
                        f"matching the manifest")
    L, H, E = ints["num_local"], ints["num_halo"], ints["num_edges"]
    shapes = {"local_ids": (L,), "edge_index": (2, E), "edge_ids": (E,), "halo_in_degree": (H,),
              "halo_loops": (H,)}
    fields = meta.get("fields")
    if not isinstance(fields, dict):
        raise PlanError(f"{f}: share metadata field 'fields' is missing")
    expected = set(shapes) | set(fields)
    extra, missing = set(arrays) - expected, expected - set(arrays)
    if extra or missing:
        raise PlanError(f"{f}: share arrays {sorted(extra | missing)[:3]} are not what its metadata lists")
    for key, shape in shapes.items():
        a = arrays[key]
        if a.dtype != np.int64 or a.size != math.prod(shape):
            raise PlanError(f"{f}: field {key!r} is not {math.prod(shape)} int64 values")
    if halo_ids is not None and halo_ids.size != H:
        raise PlanError(f"{f}: the share counts {H} halo rows, the plan's shard {halo_ids.size}")
    specs = {}
    for key, spec in fields.items():
        kind, _, name = key.partition("/")
        if kind not in ("node", "edge") or not _FIELD_NAME.match(name) or not isinstance(spec, dict):
            raise PlanError(f"{f}: share field {key[:70]!r} is not node/NAME or edge/NAME")
        dt, shape = spec.get("dtype"), spec.get("shape")
        if dt not in _DTYPES or not isinstance(shape, list) or not shape or any(
                not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in shape):
            raise PlanError(f"{f}: share field {key!r}: dtype / shape {str(spec)[:60]} not understood")
        rows = L if kind == "node" else E
        stored = np.dtype(_STORED.get(dt, dt))
        a = arrays[key]
        if shape[0] != rows or a.dtype != stored or a.size != math.prod(shape):   # Python ints: no wrap
            raise PlanError(f"{f}: share field {key!r} holds {a.size} {a.dtype} values, its metadata says "
                            f"{dt} {tuple(shape)} for {rows} rows")
        specs[key] = (kind, name, dt, shape)
    # one pass over the file: every array copied out, the copies hashed and their ids range-checked
    # a block at a time (an id is in [0, bound) when its value read as uint64 is below bound)
    bounds = {"local_ids": [((0, L), n)], "edge_index": [((0, E), L + H), ((E, 2 * E), L)],
              "edge_ids": [((0, E), edges)], "halo_in_degree": [((0, H), 1 << 63)],
              "halo_loops": [((0, H), 1 << 63)]}
    names = list(shapes) + list(specs)
    copies, digest, maxima = mapped.copy_checked(
        [arrays[k] for k in names], digest=digest,
        limits=[[r for r, _ in bounds.get(k, [])] for k in names])
    arrays = None
    corrupted(digest)
    problem = {"local_ids": f"field 'local_ids' holds ids outside [0, {n})",
               "edge_index": f"field 'edge_index' indexes rows outside the rank's {L} local and {H} halo rows",
               "edge_ids": f"field 'edge_ids' holds ids outside [0, {edges})",
               "halo_in_degree": "field 'halo_in_degree' holds negative counts",
               "halo_loops": "field 'halo_loops' holds negative counts"}
    for k, mx in zip(shapes, maxima):
        if any(v >= bound for v, (_, bound) in zip(mx, bounds[k])):
            raise PlanError(f"{f}: {problem[k]}")
    out: dict = {"meta": meta, "node": {}, "edge": {}}
    for k, c in zip(names, copies):
        if k in shapes:
            out[k] = c.reshape(shapes[k])
        else:
            kind, name, dt, shape = specs[k]
            if dt == "bool" and c.size and int(c.max()) > 1:      # stored as uint8: 0 or 1
                raise PlanError(f"{f}: share field {k!r} is bool but holds the byte {int(c.max())} (0 or 1)")
            out[kind][name] = _to_tensor(c.reshape(shape), dt)
    try:                                   # what the writer refuses, refused on reading too
        _check_values(out["node"])
    except PlanError as exc:
        raise PlanError(f"{f}: {exc}") from None
    if local_ids is not None and not np.array_equal(out["local_ids"], local_ids):
        raise PlanError(f"{f}: field 'local_ids' differs from the plan's rows of rank {rank} "
                        f"(a share of another plan)")
    return out


def validate_shares(plan, matrix=None, *, verify: bool = True) -> list[str]:
    """Problems of the plan's shares (empty: none), for ``partplan validate``: every share reads
    (:func:`read_share`: checksum, metadata, arrays), the edge ids of all shares together are
    ``0 .. E-1`` once each, and with ``matrix`` (the plan's ``A`` as scipy CSR, e.g. reassembled from
    its shards) each share edge (source -> target) is a nonzero ``A[target, source]``."""
    from ..plan.store import load_rank, read_manifest
    path = Path(plan)
    m = read_manifest(path)
    if not has_shares(m):
        return []
    problems: list[str] = []
    p, n = int(m["ranks"]), int(m["graph"]["n"])
    sh_m = m["shares"]
    for key, want in (("format", SHARE_FORMAT), ("version", SHARE_VERSION)):
        if sh_m.get(key) != want:
            problems.append(f"{path}: manifest field 'shares.{key}' is {str(sh_m.get(key))[:40]!r}, "
                            f"not this version's {want!r}")
    listed = sh_m.get("fields") if isinstance(sh_m.get("fields"), dict) else {}
    E = int(sh_m.get("edges", 0))
    seen = np.zeros(E, dtype=np.int64)
    # each vertex's in-edges (not self loops) and self loops, counted by its owner's share; every
    # share's halo counts are checked against them at the end (GCN's normalization reads them)
    in_deg, loops, halos = np.zeros(n, np.int64), np.zeros(n, np.int64), []
    have = None
    if matrix is not None:
        A = matrix.tocsr()
        have = np.repeat(np.arange(n, dtype=np.int64), np.diff(A.indptr)) * n + A.indices.astype(np.int64)
    for r in range(p):
        try:
            local_ids, halo_ids = rank_rows(str(path), m, load_rank(path, r, manifest=m))
            sh = read_share(path, r, manifest=m, local_ids=local_ids, halo_ids=halo_ids, verify=verify,
                            strong=True)
        except PlanError as exc:
            problems.append(str(exc))
            continue
        # the manifest's field list says what every share holds: the file's own metadata must agree
        got: dict = {"node": {}, "edge": {}}
        for key, spec in sh["meta"]["fields"].items():      # checked by read_share
            kind, _, name = key.partition("/")
            got[kind][name] = {"dtype": spec["dtype"], "shape": [int(x) for x in spec["shape"][1:]]}
        if {kind: listed.get(kind, {}) for kind in ("node", "edge")} != got:
            problems.append(f"{path}: manifest field 'shares.fields' lists {str(listed)[:120]}, the share of "
                            f"rank {r} holds {str(got)[:120]}")
        if have is not None:
            rows = np.concatenate([local_ids, halo_ids])
            tgt, src = rows[sh["edge_index"][1]], rows[sh["edge_index"][0]]
            missing = ~np.isin(tgt * n + src, have)
            if missing.any():
                e = int(np.flatnonzero(missing)[0])
                problems.append(f"rank {r}: share edge {int(sh['edge_ids'][e])} ({int(src[e])} -> {int(tgt[e])}) "
                                f"is no nonzero of the plan's matrix ({int(missing.sum())} such edges)")
        np.add.at(seen, sh["edge_ids"], 1)
        rows = np.concatenate([local_ids, halo_ids])
        src, tgt = rows[sh["edge_index"][0]], rows[sh["edge_index"][1]]
        loop = src == tgt
        in_deg += np.bincount(tgt[~loop], minlength=n)
        loops += np.bincount(tgt[loop], minlength=n)
        halos.append((r, halo_ids, sh["halo_in_degree"], sh["halo_loops"]))
    for r, ids, deg, lp in (halos if len(halos) == p else ()):     # owners' counts known when every share read
        for name, got, want in (("halo_in_degree", deg, in_deg[ids]), ("halo_loops", lp, loops[ids])):
            if not np.array_equal(got, want):
                i = int(np.flatnonzero(got != want)[0])
                problems.append(f"rank {r}: share field {name!r} says {int(got[i])} for halo row {int(ids[i])}, "
                                f"its owner's share holds {int(want[i])}")
    if not problems and (seen != 1).any():
        bad = np.flatnonzero(seen != 1)
        problems.append(f"edge {int(bad[0])} is in {int(seen[bad[0]])} shares ({bad.size} edge ids not in exactly "
                        f"one share)")
    return problems


def memory_weights(data: Any, *, activation_bytes: int = 0) -> np.ndarray:
    """Per-vertex balance weights for training from shares (``plan_from_pyg(..., balance=...)``): the
    bytes a rank holds for vertex v — its node fields' row (``node``) plus, per in-edge, the share's
    24 bytes (source, target, edge id), its edge fields' row and ``activation_bytes`` (what the model
    keeps per edge: e.g. 2 · 4 · hidden for a float32 message and its gradient) — in units of one
    in-edge's bytes: ``in_degree(v) + round(node / edge)``, int64[n].

    >>> import numpy as np
    >>> d = {"edge_index": np.array([[0, 1, 2], [1, 2, 1]]), "num_nodes": 3, "x": np.zeros((3, 12), np.float32)}
    >>> memory_weights(d, activation_bytes=24).tolist()   # 48-byte rows, 48 bytes per in-edge
    [1, 3, 2]
    """
    from ..io._pyg import _attr, edge_index_array
    ei = edge_index_array(data, "memory_weights")
    n = _attr(data, "num_nodes")
    n = int(n) if n is not None else (int(ei.max()) + 1 if ei.size else 0)
    node, edge = _data_fields(data, n, int(ei.shape[1]))
    row = sum(_numpy(v)[0][:1].nbytes for v in node.values())
    per_edge = 24 + sum(_numpy(v)[0][:1].nbytes for v in edge.values()) + int(activation_bytes)
    return np.bincount(ei[1], minlength=n).astype(np.int64) + int(round(row / per_edge))
