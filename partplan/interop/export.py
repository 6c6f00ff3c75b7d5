"""Export a plan's partition to other systems (partitions they wrote are read by
:mod:`partplan.io.foreign`).

Export (:func:`export_plan`, CLI ``partplan export PLAN --to dgl|pyg|metis OUT``)
writes only what can be written without DGL / PyG installed — see
docs/guide/plans.md, "Interop", for the exact file list. DGL's binary ``.dgl``
files (``graph.dgl``, ``node_feat.dgl``) are NOT written: DGL is not installable
here; its pipeline builds them from the exported assignment. torch is used
(lazily) only for PyG's ``.pt`` files.
"""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Iterator

import numpy as np

from .._atomic import discard_temp, write_error
from ..errors import BackendUnavailableError, PartitionError
from ..io.foreign import DGL_ETYPE, DGL_NTYPE, _torch


# ============================================================================ export
def _atomic_dir(out: Path):
    out = Path(out)
    if out.exists() and (out.is_file() or any(out.iterdir())):
        raise PartitionError(f"{out}: exists and is not empty; refusing to overwrite it")
    from .._atomic import clean_stale, make_parents, make_temp_dir
    make_parents(out)
    clean_stale(out)  # temp dirs of exports killed before their rename (judged by their writer's lock)
    return make_temp_dir(out)


def _finish(tmp: Path, out: Path) -> Path:
    """Put the finished folder ``tmp`` at ``out`` (new, or an empty folder the caller checked; a
    symbolic link to one is replaced as a link, its target left alone, as plans are)."""
    from .._atomic import release_temp, swap_dir
    os.chmod(tmp, 0o755)
    if out.is_symlink() or out.exists():
        swap_dir(tmp, out)
    else:
        os.replace(tmp, out)
    release_temp(tmp)
    return out


@contextlib.contextmanager
def _export_dir(out: Path) -> Iterator[Path]:
    """A fresh temporary folder beside ``out`` to write an export into; when the block ends it becomes
    ``out`` (:func:`_finish`). On any error it is removed and nothing is left at ``out``; a full disk
    or a read-only folder becomes one error naming ``out``."""
    tmp = _atomic_dir(out)
    try:
        yield tmp
        _finish(tmp, out)
    except (OSError, RuntimeError) as exc:
        discard_temp(tmp)
        err = write_error(out, exc)
        if err is None:
            raise
        raise err from None
    except BaseException:
        discard_temp(tmp)
        raise


def _plan_graph_parts(plan):
    """(part, per-row nnz, rebuilt scipy A) of a loaded Plan."""
    from ..runtime.validate import _rebuild
    A, _, pattern = _rebuild(plan)
    return plan.part, np.diff(A.indptr), A, pattern


def export_metis(part, path) -> Path:
    """One part id per line (METIS ``.part.K`` layout)."""
    from ..io.partfile import write_partition
    return write_partition(np.asarray(part, dtype=np.int64), path)


def _export_part_file(plan, path) -> Path:
    """The plan's row blocks as a partition file: a ``NAME.part.K`` whose K is not the plan's row
    blocks is refused (its reader would see other parts); a name without K when the last row blocks
    are empty gets a PartplanWarning (it reads back as max(id) + 1 parts)."""
    from ..io.partfile import check_part_k_name, partition_k_from_name
    b = int(plan.manifest.get("row_blocks") or plan.manifest["ranks"])
    check_part_k_name(path, b, k_is="the plan's row blocks are")
    top = int(plan.part.max()) + 1 if plan.part.size else 0
    if partition_k_from_name(path) is None and top < b:
        from ..io._common import warn_user
        warn_user(f"{path}: row blocks {top}..{b - 1} of the plan are empty, and a partition file without K in "
                  f"its name reads back as {top} parts: name it NAME.part.{b} to keep {b}")
    out = export_metis(plan.part, path)
    # a sidecar of an earlier partition of this name would lend the new file its layout, model and
    # provenance (and an owner file its owners): the exported file is a bare partition
    for stale in (out.with_name(out.name + ".json"), out.with_name(out.name + ".owner.npy")):
        if stale.is_file():
            stale.unlink()
    return out


def export_dgl(plan, out, *, graph_name: str | None = None) -> Path:
    """DGL partition config + mappings for ``plan`` (a loaded :class:`partplan.plan.Plan`).

    Writes: ``<graph_name>.json`` (DGL's range partition book: num_parts,
    num_nodes, num_edges, node_map / edge_map id ranges in the reshuffled
    numbering, ntypes, etypes, ``part-i`` file names), ``orig_nids.npy``
    (reshuffled id → original id), ``orig_eids.npy`` (reshuffled edge id →
    partplan edge id), ``node_map.npy`` (part of every original node),
    ``partition_assignment/{_N.txt,partition_meta.json}`` (input of DGL's
    distributed pipeline) and ``EXPORT.md``. Not written: ``part*/graph.dgl``,
    ``node_feat.dgl``, ``edge_feat.dgl`` (DGL binary formats; need dgl).
    """
    out = Path(out)
    norm = plan.manifest.get("normalize")
    if norm:   # its CSR is the normalized matrix (self loops added): DGL's edges would not be the graph's
        raise PartitionError(f"the plan multiplies the {norm}-normalized matrix (self loops added), not the "
                             f"graph's edges; export the DGL partition from a plan built without --normalize "
                             f"(the same partition), or export to pyg with --graph")
    part, row_nnz, A, _ = _plan_graph_parts(plan)
    k = _parts(plan)
    n = part.size
    name = graph_name or plan.manifest["graph"].get("name") or "graph"
    from ..io.trust import plain_name_problem, printable
    why = plain_name_problem(name)
    if why:  # the name becomes <name>.json inside `out`: never a path
        src = "graph_name" if graph_name else "the plan's graph.name"
        raise PartitionError(f"{src} = {printable(repr(name))[:80]} {why}")
    order = np.argsort(part, kind="stable")                   # new id → original id
    sizes = np.bincount(part, minlength=k)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    # DGL assigns an edge u -> v to the partition of its destination v; partplan's
    # nonzero A[i, j] is the message j -> i, so edge e belongs to part[i].
    erow = np.repeat(np.arange(n), row_nnz)
    eorder = np.argsort(part[erow], kind="stable")
    esizes = np.bincount(part[erow], minlength=k)
    estarts = np.concatenate([[0], np.cumsum(esizes)])
    cfg = {"graph_name": name, "part_method": "partplan", "num_parts": k, "halo_hops": 1,
           "num_nodes": int(n), "num_edges": int(A.nnz),
           "node_map": {DGL_NTYPE: [[int(starts[i]), int(starts[i + 1])] for i in range(k)]},
           "edge_map": {DGL_ETYPE: [[int(estarts[i]), int(estarts[i + 1])] for i in range(k)]},
           "ntypes": {DGL_NTYPE: 0}, "etypes": {DGL_ETYPE: 0}}
    for i in range(k):
        cfg[f"part-{i}"] = {"node_feats": f"part{i}/node_feat.dgl", "edge_feats": f"part{i}/edge_feat.dgl",
                            "part_graph": f"part{i}/graph.dgl"}
    with _export_dir(out) as tmp:
        (tmp / f"{name}.json").write_text(json.dumps(cfg, indent=4) + "\n")
        np.save(tmp / "orig_nids.npy", order.astype(np.int64))
        np.save(tmp / "orig_eids.npy", eorder.astype(np.int64))
        np.save(tmp / "node_map.npy", part.astype(np.int64))
        pa_dir = tmp / "partition_assignment"
        pa_dir.mkdir()
        np.savetxt(pa_dir / f"{DGL_NTYPE}.txt", part, fmt="%d")
        (pa_dir / "partition_meta.json").write_text(json.dumps({"num_parts": k, "algo_name": "partplan"}) + "\n")
        (tmp / "EXPORT.md").write_text(_DGL_NOTE.format(name=name, k=k))
    return out


_DGL_NOTE = """# partplan export for DGL ({name}, {k} parts)

Written: {name}.json (DGL partition config: RangePartitionBook node_map/edge_map
over the reshuffled ids, readable by dgl.distributed.load_partition_book),
orig_nids.npy (reshuffled node id -> original id), orig_eids.npy (reshuffled
edge id -> partplan edge id = position in the CSR of A; an edge A[i, j] is the
message j -> i and belongs to the partition of i), node_map.npy (part of every
original node id), partition_assignment/ (_N.txt + partition_meta.json: the
input of DGL's distributed partitioning pipeline, which builds graph.dgl).

NOT written: part*/graph.dgl, node_feat.dgl, edge_feat.dgl (DGL binary files;
dgl is needed to produce them). partplan's ghost-row exchange lists are not
representable in DGL's layout; use the partplan plan itself for that.
"""


# META.json of a homogeneous partition, as torch_geometric.distributed.Partitioner
# (PyG 2.8) writes it; ``is_sorted`` (edges sorted by destination) is read
# unconditionally by LocalGraphStore.from_partition.
PYG_META = {"num_parts": None, "node_types": None, "edge_types": None, "node_offset": None,
            "is_hetero": False, "is_sorted": True}


def _parts(plan) -> int:
    """Parts of the plan's partition: its row blocks (a 1.5D plan's k counts the replicas' ranks too)."""
    m = plan.manifest
    return int(m.get("row_blocks") or m["k"])


def _source_matrix(plan, graph):
    """(A as scipy CSR, pattern?) of the ORIGINAL graph of ``plan``: ``graph``
    checked against the manifest's source fingerprint, or (no graph) the
    plan's own matrix when the plan multiplies A itself (not normalized)."""
    m = plan.manifest
    g = m.get("graph", {})
    norm = m.get("normalize")
    want = g.get("source_fingerprint") or g.get("fingerprint")
    n = plan.part.size
    if graph is None:
        if norm:
            raise PartitionError(
                f"the plan multiplies the {norm}-normalized matrix (self loops added, {norm} values), not the "
                f"graph's edges; pass the original graph with --graph GRAPH (library: graph=) so the export "
                f"holds its edges (fingerprint {str(want)[:16]}…)")
        _, _, A, pattern = _plan_graph_parts(plan)
        return A, pattern
    from ..plan.store import source_matches
    if not source_matches(m, graph):
        raise PartitionError(f"graph {graph.name!r} (fingerprint {graph.matrix_fingerprint[:16]}…, n={graph.n}, "
                             f"nnz={graph.nnz}) is not the graph of this plan (fingerprint {str(want)[:16]}…)"
                             f"{_mismatch_hint(m, graph)}")
    if graph.n != n:  # pragma: no cover - a matching fingerprint has the same n
        raise PartitionError(f"graph {graph.name!r} has {graph.n} vertices, the plan {n}")
    return graph.to_scipy(), graph.data is None


def _mismatch_hint(m: dict, graph) -> str:
    """Why ``graph`` may not be the plan's input graph, in words (or "")."""
    g, norm, n = m.get("graph", {}), m.get("normalize"), m.get("graph", {}).get("n")
    if norm and graph.fingerprint == g.get("fingerprint"):
        return f" (that is the {norm}-normalized matrix; pass the graph it was built from)"
    weights = ("; edge weights count: a .pt Data is weighted only by the field named with --weight FIELD "
               "(library: weight=), read it as the plan was built")
    if not norm and graph.fingerprint == g.get("fingerprint"):
        return f" (same edges, other values: the plan's matrix is {'' if g.get('weighted') else 'un'}weighted{weights})"
    if graph.n == n and not graph.is_symmetric():
        return f" (was the plan built with --symmetrize?{weights})"
    return f" ({weights[2:]})" if graph.n == n else ""


def _is_pyg_data(graph) -> bool:
    """A PyG ``Data`` (or anything with an ``edge_index``) rather than a partplan Graph or a file."""
    return graph is not None and not hasattr(graph, "fingerprint") and not isinstance(graph, (str, os.PathLike)) \
        and (getattr(graph, "edge_index", None) is not None
             or (isinstance(graph, dict) and graph.get("edge_index") is not None))


def _data_edges(plan, data, *, weight: str | None = None, symmetrize: bool = False):
    """(source, target, edge_attr or None, node features) of a PyG ``Data``, checked
    against the plan's graph: the graph :func:`partplan.plan_from_pyg` builds from
    ``data`` (``weight``, the plan's ``normalize``; ``symmetrize``: A + Aᵀ, as
    ``partplan partition --symmetrize`` built it) has the plan's source fingerprint."""
    from ..graph import _numpy_of
    from ..io._pyg import _attr
    from ..plan.store import source_matches
    from .pyg import plan_graph
    m = plan.manifest
    want = m.get("graph", {}).get("source_fingerprint") or m.get("graph", {}).get("fingerprint")
    n = plan.part.size
    g = plan_graph(data, normalize=m.get("normalize"), weight=weight)
    if symmetrize:
        g = g.normalize(symmetrize=True)
    if g.n != n or not source_matches(m, g):
        raise PartitionError(f"the Data's graph (n={g.n}, {g.nnz} distinct edges, fingerprint "
                             f"{g.matrix_fingerprint[:16]}…) is not the graph of this plan (n={n}, fingerprint "
                             f"{str(want)[:16]}…): pass the Data the plan was built from"
                             + (_mismatch_hint(m, g) if g.n == n else ""))
    ei = np.asarray(_numpy_of(_attr(data, "edge_index"))).astype(np.int64, copy=False)
    attr = _attr(data, "edge_attr")
    if attr is not None:
        attr = np.asarray(_numpy_of(attr))
        if attr.shape[:1] != (ei.shape[1],):
            raise PartitionError(f"edge_attr has {attr.shape[0] if attr.ndim else 0} rows, edge_index "
                                 f"{ei.shape[1]} columns")
    feats = {}
    for key in ("x", "y", "train_mask", "val_mask", "test_mask"):
        v = _attr(data, key)
        if v is not None and getattr(v, "shape", ())[:1] == (n,):
            feats[key] = np.asarray(_numpy_of(v))
    return ei[0], ei[1], attr, feats


def export_pyg(plan, out, *, graph=None, data=None, weight: str | None = None, symmetrize: bool = False) -> Path:
    """PyG ``torch_geometric.distributed.Partitioner`` layout for ``plan`` (homogeneous).

    Writes ``META.json`` (the keys PyG's ``Partitioner`` writes and
    ``torch_geometric.distributed.partition.load_partition_info`` /
    ``LocalGraphStore.from_partition`` read: ``num_parts``, ``node_types``,
    ``edge_types``, ``node_offset``, ``is_hetero``, ``is_sorted``),
    ``node_map.pt`` (int64[n]: part of each node), ``edge_map.pt``
    (int64[E]: part of each edge, by edge id) and per part ``part_i/graph.pt``
    (dict edge_id, row, col, size), ``node_feats.pt`` (global_id, feats) and
    ``edge_feats.pt`` (global_id and ``feats={'edge_attr': ...}`` when the edges
    carry values; an empty dict otherwise, as PyG writes it). No attribute is
    stored as None.

    The edges are those of the ORIGINAL graph, never a normalized Â (a
    ``GCNConv`` normalizes again):

    * ``graph`` a PyG ``Data`` (checked against the plan's graph): PyG's own
      convention — every column of ``data.edge_index`` once (multi-edges
      and self loops kept), edge id = that column, ``row`` = source,
      ``col`` = target (so ``data.edge_index[:, edge_id] == (row, col)`` on
      every part, the invariant PyG's Partitioner keeps), ``edge_attr`` rows
      (any width) by edge id, and ``x``, ``y`` and the masks of the Data as
      node features. The Data is checked as :func:`partplan.plan_from_pyg`
      reads it: ``weight`` names the weight field the plan was built with
      (None: unweighted), ``symmetrize`` when the plan used A + Aᵀ;
    * ``graph`` a :class:`partplan.Graph` (checked against the manifest's
      ``graph.source_fingerprint``), or none for an unnormalized plan (its own
      matrix is A; a normalized plan without ``graph`` is a PartitionError):
      edge e is the e-th nonzero ``A[i, j]`` of the CSR (duplicates merged),
      stored as (row=j, col=i), ``edge_attr`` its value when A is weighted.

    As in PyG's Partitioner, an edge goes with the partition of its ``col``
    (destination) node and each part's edges are sorted by ``col`` (then by
    edge id; ``is_sorted: true``).

    ``data`` : a partplan data file (``.npz``/``.pt``, :mod:`partplan.nn.data`,
    checked with ``check_data``): each part's ``node_feats.pt`` holds
    ``feats = {x, y, train_mask, val_mask, test_mask}`` of its nodes (rows by
    global id, in ``global_id`` order; LocalFeatureStore gives them by
    attribute name) and ``label.pt`` (y of every node) is written beside
    META.json, as PyG's distributed example does.
    """
    torch = _torch()
    out = Path(out)
    part = plan.part
    k = _parts(plan)
    n = part.size
    node_feats = {}
    if _is_pyg_data(graph):
        src, dst, eattr, node_feats = _data_edges(plan, graph, weight=weight, symmetrize=symmetrize)
    else:
        if graph is not None and symmetrize:
            graph = graph.normalize(symmetrize=True)
        A, pattern = _source_matrix(plan, graph)
        dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(A.indptr))    # i (target)
        src = A.indices.astype(np.int64)                                     # j (source)
        eattr = None if pattern else np.asarray(A.data, dtype=np.float64)
    if data is not None:
        from ..nn.data import check_data, read_rows
        check_data(data, n, keep_rows=int(np.bincount(part, minlength=1).max()))   # one part at a time
    emap = part[dst]                                           # PyG: edge goes with its destination
    with _export_dir(out) as tmp:
        (tmp / "META.json").write_text(json.dumps(PYG_META | {"num_parts": k}) + "\n")
        torch.save(torch.from_numpy(part.astype(np.int64)), tmp / "node_map.pt")
        torch.save(torch.from_numpy(emap.astype(np.int64)), tmp / "edge_map.pt")
        labels = None
        if data is not None or "y" in node_feats:
            labels = np.zeros(n, dtype=np.int64)
        for i in range(k):
            d = tmp / f"part_{i}"
            d.mkdir()
            eid = np.flatnonzero(emap == i)
            eid = eid[np.argsort(dst[eid], kind="stable")]      # by col, then edge id
            torch.save({"edge_id": torch.from_numpy(eid), "row": torch.from_numpy(src[eid]),
                        "col": torch.from_numpy(dst[eid]), "size": (n, n)}, d / "graph.pt")
            nodes = np.flatnonzero(part == i).astype(np.int64)
            if data is not None:
                rows = read_rows(data, nodes)
                feats = {key: torch.from_numpy(np.ascontiguousarray(rows[key])) for key in
                         ("x", "y", "train_mask", "val_mask", "test_mask")}
            else:
                feats = {key: torch.from_numpy(np.ascontiguousarray(v[nodes])) for key, v in node_feats.items()}
            if "y" in feats:
                feats["y"] = feats["y"].long()
                labels[nodes] = feats["y"].numpy()
            for key in ("train_mask", "val_mask", "test_mask"):
                if key in feats:
                    feats[key] = feats[key].bool()
            torch.save({"global_id": torch.from_numpy(nodes), "feats": feats}, d / "node_feats.pt")
            ef = {}
            if eattr is not None:
                ef = {"global_id": torch.from_numpy(eid),
                      "feats": {"edge_attr": torch.from_numpy(np.ascontiguousarray(eattr[eid]))}}
            torch.save(ef, d / "edge_feats.pt")
        if labels is not None:
            torch.save(torch.from_numpy(labels), tmp / "label.pt")
    return out


def export_plan(plan_path, to: str, out, *, graph_name: str | None = None, graph=None, data=None,
                weight: str | None = None, symmetrize: bool = False) -> Path:
    """Export the partition of the plan at ``plan_path`` to ``to`` = dgl | pyg | metis.

    ``graph`` (a PyG ``Data``, a :class:`partplan.Graph` or a graph file) and
    ``data`` (a data file) are for ``pyg`` only: see :func:`export_pyg`. A
    ``.pt`` graph file is loaded as the PyG ``Data`` it holds (its own edges,
    multi-edges kept, edge ids = columns of its ``edge_index``; a bare
    ``edge_index`` tensor likewise); ``weight`` (a field of that Data) and
    ``symmetrize`` read it as the plan was built. Another graph file is read
    with :func:`partplan.io.read_graph` (``symmetrize``)."""
    from ..plan import load_plan
    if to not in ("dgl", "pyg", "metis"):
        raise BackendUnavailableError(f"unknown export target {to!r}; choose dgl, pyg or metis")
    if to != "pyg" and (graph is not None or data is not None):
        raise PartitionError(f"a graph and data are used by the pyg export only, not by {to}")
    if weight is not None and (graph is None or hasattr(graph, "fingerprint")):
        raise PartitionError(f"weight={weight!r} names a field of a PyG Data (or .pt file) given as graph")
    plan = load_plan(plan_path)
    if plan.owner is not None and not np.array_equal(plan.owner, plan.part):
        from ..io._common import warn_user
        warn_user(f"{plan_path}: a decoupled plan: its owners (the rank sending each row of H) are not exported, "
                  f"only the row blocks; a plan built from the export is conformal and moves other volumes "
                  f"(`partplan analyze GRAPH --partition {plan_path} --save-partition P.npy` keeps them)")
    if to == "metis":
        return _export_part_file(plan, out)
    empty = np.flatnonzero(np.bincount(plan.part, minlength=_parts(plan)) == 0) if to == "pyg" else []
    if len(empty):
        from ..io._common import warn_user
        shown = ", ".join(map(str, empty[:8].tolist())) + (", ..." if empty.size > 8 else "")
        warn_user(f"{plan_path}: row blocks {shown} hold no rows; they are exported as empty parts, which PyG's "
                  f"LocalFeatureStore.from_partition cannot load (a max() over no nodes)")
    if to == "dgl":
        return export_dgl(plan, out, graph_name=graph_name)
    if graph is not None and not hasattr(graph, "fingerprint") and not _is_pyg_data(graph):
        if not isinstance(graph, (str, os.PathLike)):
            raise PartitionError(f"graph must be a PyG Data, a partplan Graph or a graph file, not "
                                 f"{type(graph).__name__}")
        path = graph
        graph = _read_export_graph(path, plan.part.size, weight=weight, symmetrize=symmetrize)
        if _is_pyg_data(graph):   # its errors name the file it came from
            from ..errors import GraphFormatError
            try:
                return export_pyg(plan, out, graph=graph, data=data, weight=weight, symmetrize=symmetrize)
            except GraphFormatError as exc:
                if exc.path is not None:
                    raise
                raise GraphFormatError(exc.problem, path, exc.line, exc.field) from None
    return export_pyg(plan, out, graph=graph, data=data, weight=weight, symmetrize=symmetrize)


def _read_export_graph(path, n: int, *, weight: str | None, symmetrize: bool):
    """The graph file ``path`` for the pyg export: a ``.pt`` as the PyG Data it
    holds (a bare edge_index tensor as a Data of ``n`` vertices), any other
    format as a :class:`~partplan.Graph`."""
    from ..io import detect_format, read_graph
    if detect_format(path) != "pt":
        if weight is not None:
            raise PartitionError(f"weight={weight!r} names a field of a .pt PyG Data; {path} is not a .pt file")
        return read_graph(path, symmetrize=symmetrize)
    from ..io.pt import load_pt
    obj = load_pt(path)
    if not hasattr(obj, "edge_index"):
        if obj.ndim != 2 or obj.shape[0] != 2:
            from ..errors import GraphFormatError
            raise GraphFormatError(f"a tensor of shape {tuple(obj.shape)} where a graph is expected: a .pt "
                                   f"graph holds a PyG Data or an edge_index tensor of shape (2, E)", path,
                                   field="edge_index")
        if weight is not None:
            raise PartitionError(f"{path}: holds a bare edge_index tensor, no field {weight!r} to read weights from")
        top = int(obj.max()) + 1 if obj.numel() else 0
        obj = {"edge_index": obj, "num_nodes": max(n, top)}
    return obj
