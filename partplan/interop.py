"""Import partitions from other systems and export a plan's partition to them.

Import (:func:`read_partition_any` detects the kind):

=====================  ======================================================
kind                   what is read
=====================  ======================================================
METIS ``.part.K``      one part id per line (:func:`partplan.io.read_partition`,
                       which also reads ``.npy`` and Parquet/Arrow/CSV columns)
DGL partition folder   ``<graph_name>.json`` (``num_parts``, ``num_nodes``,
                       ``node_map``) — ``node_map`` as per-type id ranges
                       ``{"_N": [[start, end), ...]}`` over DGL's *reshuffled*
                       ids (mapped back to original ids with ``orig_nids.npy``
                       or ``orig_nids.pt`` beside the JSON: the
                       ``return_mapping=True`` output of
                       ``dgl.distributed.partition_graph`` saved by the user),
                       or the old non-reshuffled form: a file name
                       (``node_map.npy``, part of every original id)
DGL assignment folder  ``partition_meta.json`` + ``_N.txt`` (one part per
                       line): the input of DGL's distributed partitioning
                       pipeline (``dispatch_data.py``)
PyG folder / ``.pt``   ``META.json`` + ``node_map.pt`` of
                       ``torch_geometric.distributed.Partitioner``
                       (``node_map[v]`` = part of original node v; torch.load)
CAGNET ``.part-sizes`` sizes of contiguous row blocks (whitespace separated):
                       rows ``[s_0 + … + s_{i-1}, … + s_i)`` go to part i
=====================  ======================================================

Export (:func:`export_plan`, CLI ``partplan export PLAN --to dgl|pyg|metis OUT``)
writes only what can be written without DGL / PyG installed — see
docs/plans.md, "Interop", for the exact file list. DGL's binary ``.dgl``
files (``graph.dgl``, ``node_feat.dgl``) are NOT written: DGL is not installable
here; its pipeline builds them from the exported assignment. torch is used
(lazily) only for PyG's ``.pt`` files.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from .errors import BackendUnavailableError, PartitionError
from .parts import as_partition

DGL_NTYPE = "_N"
DGL_ETYPE = "_N:_E:_N"


# ============================================================================ import
def read_metis_part(path, n: int) -> np.ndarray:
    """METIS partition file (``graph.part.K``): one part id per line."""
    from .io.partfile import read_partition
    return read_partition(path, n)


def read_cagnet_part_sizes(path, n: int | None = None) -> np.ndarray:
    """CAGNET ``.part-sizes``: the sizes of contiguous row blocks → part[v]."""
    p = Path(path)
    try:
        tokens = p.read_text().split()
    except (OSError, UnicodeDecodeError) as exc:
        raise PartitionError(f"{p}: cannot read part sizes ({exc})") from exc
    sizes = []
    for t in tokens:
        try:
            v = int(t)
        except ValueError:
            raise PartitionError(f"{p}: block size {t!r} is not an integer") from None
        if v < 0:
            raise PartitionError(f"{p}: negative block size {v}")
        sizes.append(v)
    if not sizes:
        raise PartitionError(f"{p}: no block sizes found")
    total = sum(sizes)
    if n is not None and total != n:
        raise PartitionError(f"{p}: block sizes sum to {total} but the graph has {n} vertices")
    if total > (1 << 63) - 1:
        raise PartitionError(f"{p}: block sizes sum to {total}, beyond 64 bits")
    from .io._common import human_bytes, memory_budget
    if 8 * total > memory_budget():
        raise PartitionError(f"{p}: block sizes sum to {total} vertices, needing {human_bytes(8 * total)}, above "
                             f"the memory budget of {human_bytes(memory_budget())} (PARTPLAN_MAX_BYTES)")
    return np.repeat(np.arange(len(sizes), dtype=np.int64), np.asarray(sizes, dtype=np.int64))


def _torch():
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is installed in this project's venv
        raise BackendUnavailableError("reading/writing PyG .pt files needs torch "
                                      "(pip install 'partplan[runtime]')") from exc
    return torch


def _load_pt(path: Path) -> np.ndarray:
    torch = _torch()
    try:
        obj = torch.load(str(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds (pickle, zip, runtime)
        raise PartitionError(f"{path}: cannot load as a torch tensor file ({exc})") from exc
    if isinstance(obj, dict) and len(obj) == 1:
        obj = next(iter(obj.values()))
    if not isinstance(obj, torch.Tensor):
        raise PartitionError(f"{path}: expected a tensor, got {type(obj).__name__} "
                             f"(heterogeneous node maps are not supported)")
    return obj.cpu().numpy().astype(np.int64)


def read_pyg_partition(path, n: int | None = None) -> np.ndarray:
    """PyG: a ``node_map.pt`` file or a Partitioner folder (META.json + node_map.pt)."""
    p = Path(path)
    if p.is_dir():
        meta = p / "META.json"
        if meta.is_file():
            m = _read_json(meta)
            if m.get("is_hetero"):
                raise BackendUnavailableError(f"{meta}: heterogeneous PyG partitions are not supported "
                                              f"(partplan graphs have one node type)")
        p = p / "node_map.pt"
        if not p.is_file():
            raise PartitionError(f"{p}: missing (not a PyG partition folder)")
    part = _load_pt(p)
    if n is not None and part.size != n:
        raise PartitionError(f"{p}: node_map has {part.size} entries but the graph has {n} vertices")
    return part


def _read_json(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PartitionError(f"{path}: not a readable JSON file ({exc})") from exc


def _dgl_config(path: Path) -> Path:
    if path.is_file():
        return path
    cands = []
    for f in sorted(path.glob("*.json")):
        try:
            if "num_parts" in json.loads(f.read_text()) and f.name != "partition_meta.json":
                cands.append(f)
        except (json.JSONDecodeError, UnicodeDecodeError, OSError):
            continue
    if len(cands) != 1:
        raise PartitionError(f"{path}: expected one DGL partition config (*.json with 'num_parts'), "
                             f"found {len(cands)}")
    return cands[0]


def read_dgl_partition(path, n: int | None = None, *, ids: str = "original") -> np.ndarray:
    """DGL partition folder (or its ``<graph_name>.json``) → part of every node.

    ids : "original" (default) — part of each ORIGINAL node id; for reshuffled
        partitions (node_map as id ranges) this needs ``orig_nids.npy`` or
        ``orig_nids.pt`` (new id → original id) beside the JSON.
        "dgl" — part of each node in DGL's reshuffled numbering (no mapping needed).
    """
    p = Path(path)
    if p.is_dir() and (p / "partition_meta.json").is_file():
        return read_dgl_assignment(p, n)
    if p.is_dir() and (p / "partition_assignment" / "partition_meta.json").is_file() and \
            not list(p.glob("*.json")):
        return read_dgl_assignment(p / "partition_assignment", n)
    cfg = _dgl_config(p)
    root = cfg.parent
    m = _read_json(cfg)
    for key in ("num_parts", "node_map"):
        if key not in m:
            raise PartitionError(f"{cfg}: field {key!r} is missing (not a DGL partition config)")
    num_nodes = m.get("num_nodes")
    node_map = m["node_map"]
    if isinstance(node_map, str):  # old layout: file with the part of every original id
        # a name from the file never becomes a path: only its last component, inside the config's folder
        base = Path(node_map).name
        from .plan.trust import plain_name_problem, printable
        why = plain_name_problem(base)
        if why:
            raise PartitionError(f"{cfg}: field 'node_map' = {printable(repr(node_map))[:80]}: its file name {why}")
        f = root / base
        from .io.partfile import load_npy
        try:
            part = load_npy(f, n, "node_map").astype(np.int64)
        except PartitionError as exc:
            raise PartitionError(f"{cfg}: field 'node_map' names {node_map!r}, which cannot be read ({exc})") \
                from None
    else:
        if isinstance(node_map, dict):
            if len(node_map) != 1:
                raise BackendUnavailableError(f"{cfg}: heterogeneous DGL partitions ({len(node_map)} node types) "
                                              f"are not supported")
            ranges = next(iter(node_map.values()))
        else:
            ranges = node_map
        try:
            if ranges and not isinstance(ranges[0], list):  # oldest form: end of each range
                ends = [int(e) for e in ranges]
                ranges = [[s, e] for s, e in zip([0] + ends[:-1], ends)]
            r = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)
        except (TypeError, ValueError) as exc:
            raise PartitionError(f"{cfg}: field 'node_map' is not a list of [start, end) ranges") from exc
        if r.shape[0] != m["num_parts"]:
            raise PartitionError(f"{cfg}: field 'node_map' has {r.shape[0]} ranges for num_parts = {m['num_parts']}")
        sizes = r[:, 1] - r[:, 0]
        if np.any(sizes < 0) or r[0, 0] != 0 or np.any(r[1:, 0] != r[:-1, 1]):
            raise PartitionError(f"{cfg}: field 'node_map' ranges are not contiguous from 0")
        total = int(r[-1, 1])
        for what, want in (("field 'num_nodes'", num_nodes), ("the graph", n)):
            if want is not None and total != want:  # before allocating what the ranges claim
                raise PartitionError(f"{cfg}: field 'node_map' ranges cover {total} nodes but {what} has {want}")
        from .io._common import human_bytes, memory_budget
        if 16 * total > memory_budget():
            raise PartitionError(f"{cfg}: field 'node_map' ranges cover {total} nodes, needing "
                                 f"{human_bytes(16 * total)}, above the memory budget (PARTPLAN_MAX_BYTES)")
        new_part = np.repeat(np.arange(r.shape[0], dtype=np.int64), sizes)
        if ids == "dgl":
            part = new_part
        elif ids == "original":
            orig = None
            for name in ("orig_nids.npy", "orig_nids.pt"):
                f = root / name
                if f.is_file():
                    if name.endswith(".npy"):
                        from .io.partfile import load_npy
                        orig = load_npy(f, new_part.size, "orig_nids").astype(np.int64)
                    else:
                        orig = _load_pt(f)
                    break
            if orig is None:
                if (root / "part0" / "orig_nids.dgl").is_file():
                    raise BackendUnavailableError(
                        f"{root}: the original-id mapping is only in DGL's binary part*/orig_nids.dgl, which "
                        f"needs dgl to read (not installable here); save it as orig_nids.npy "
                        f"(np.save of the return_mapping=True output) or pass ids='dgl'")
                raise PartitionError(f"{cfg}: node ids were reshuffled by DGL; put orig_nids.npy (new id → "
                                     f"original id, from partition_graph(..., return_mapping=True)) beside "
                                     f"the JSON, or read with ids='dgl'")
            if orig.size != new_part.size or not np.array_equal(np.sort(orig), np.arange(orig.size)):
                raise PartitionError(f"{root}: orig_nids is not a permutation of {new_part.size} ids")
            part = np.empty_like(new_part)
            part[orig] = new_part
        else:
            raise ValueError(f"ids must be 'original' or 'dgl', not {ids!r}")
    if num_nodes is not None and part.size != num_nodes:
        raise PartitionError(f"{cfg}: field 'num_nodes' = {num_nodes} but the node map covers {part.size} nodes")
    if n is not None and part.size != n:
        raise PartitionError(f"{cfg}: the DGL partition has {part.size} nodes but the graph has {n}")
    return part


def read_dgl_assignment(path, n: int | None = None) -> np.ndarray:
    """DGL pipeline partition assignment: ``partition_meta.json`` + ``<ntype>.txt``."""
    p = Path(path)
    meta = _read_json(p / "partition_meta.json")
    txts = sorted(p.glob("*.txt"))
    if len(txts) != 1:
        raise BackendUnavailableError(f"{p}: expected one <ntype>.txt (homogeneous graph), found {len(txts)}")
    from .io.partfile import read_partition
    if n is None:
        n = sum(1 for line in open(txts[0]) if line.strip())
    part = read_partition(txts[0], n)
    k = meta.get("num_parts")
    if k is not None and part.size and int(part.max()) >= int(k):
        raise PartitionError(f"{txts[0]}: part id {int(part.max())} >= num_parts = {k} of partition_meta.json")
    return part


def detect_kind(path) -> str:
    """'dgl' | 'dgl-assignment' | 'pyg' | 'cagnet' | 'file' (METIS text, .npy, tables)."""
    p = Path(path)
    name = p.name.lower()
    if p.is_dir():
        if (p / "node_map.pt").is_file():
            return "pyg"
        if (p / "partition_meta.json").is_file():
            return "dgl-assignment"
        return "dgl"
    if name.endswith(".pt"):
        return "pyg"
    if name.endswith(".json"):
        return "dgl"
    if name.endswith(".part-sizes") or name.endswith(".sizes"):
        return "cagnet"
    return "file"


def read_partition_any(path, n: int, *, kind: str | None = None) -> np.ndarray:
    """Read a partition of any supported kind (see module doc); returns int64[n].

    ``kind`` overrides detection ("metis"/"file", "dgl", "dgl-assignment",
    "pyg", "cagnet"). Raises PartitionError naming the file on bad input.
    """
    if not Path(path).exists():
        raise PartitionError(f"{path}: no such partition file or directory")
    kind = kind or detect_kind(path)
    if kind in ("file", "metis"):
        part = read_metis_part(path, n)
    elif kind == "dgl":
        part = read_dgl_partition(path, n)
    elif kind == "dgl-assignment":
        part = read_dgl_assignment(path, n)
    elif kind == "pyg":
        part = read_pyg_partition(path, n)
    elif kind == "cagnet":
        part = read_cagnet_part_sizes(path, n)
    else:
        raise BackendUnavailableError(f"unknown partition kind {kind!r}")
    part, _ = as_partition(part, n, source=str(path))
    return part


# ============================================================================ export
def _atomic_dir(out: Path):
    out = Path(out)
    if out.exists() and (out.is_file() or any(out.iterdir())):
        raise PartitionError(f"{out}: exists and is not empty; refusing to overwrite it")
    out.parent.mkdir(parents=True, exist_ok=True)
    from ._atomic import clean_stale, temp_prefix
    clean_stale(out)  # temp dirs of exports killed before their rename
    return Path(tempfile.mkdtemp(prefix=temp_prefix(out), dir=out.parent))


def _finish(tmp: Path, out: Path) -> Path:
    os.chmod(tmp, 0o755)
    if out.exists():
        out.rmdir()
    os.replace(tmp, out)
    return out


def _plan_graph_parts(plan):
    """(part, per-row nnz, rebuilt scipy A) of a loaded Plan."""
    from .validation import _rebuild
    A, _, pattern = _rebuild(plan)
    return plan.part, np.diff(A.indptr), A, pattern


def export_metis(part, path) -> Path:
    """One part id per line (METIS ``.part.K`` layout)."""
    from .io.partfile import write_partition
    return write_partition(np.asarray(part, dtype=np.int64), path)


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
    part, row_nnz, A, _ = _plan_graph_parts(plan)
    k = int(plan.manifest["k"])
    n = part.size
    name = graph_name or plan.manifest["graph"].get("name") or "graph"
    from .plan.trust import plain_name_problem, printable
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
    tmp = _atomic_dir(out)
    try:
        (tmp / f"{name}.json").write_text(json.dumps(cfg, indent=4) + "\n")
        np.save(tmp / "orig_nids.npy", order.astype(np.int64))
        np.save(tmp / "orig_eids.npy", eorder.astype(np.int64))
        np.save(tmp / "node_map.npy", part.astype(np.int64))
        pa_dir = tmp / "partition_assignment"
        pa_dir.mkdir()
        np.savetxt(pa_dir / f"{DGL_NTYPE}.txt", part, fmt="%d")
        (pa_dir / "partition_meta.json").write_text(json.dumps({"num_parts": k, "algo_name": "partplan"}) + "\n")
        (tmp / "EXPORT.md").write_text(_DGL_NOTE.format(name=name, k=k))
        return _finish(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


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
    if graph.fingerprint != want:
        hint = ""
        if norm and graph.fingerprint == g.get("fingerprint"):
            hint = f" (that is the {norm}-normalized matrix; pass the graph it was built from)"
        elif graph.n == n and not graph.is_symmetric():
            hint = " (was the plan built with --symmetrize?)"
        raise PartitionError(f"graph {graph.name!r} (fingerprint {graph.fingerprint[:16]}…, n={graph.n}, "
                             f"nnz={graph.nnz}) is not the graph of this plan (fingerprint {str(want)[:16]}…){hint}")
    if graph.n != n:  # pragma: no cover - a matching fingerprint has the same n
        raise PartitionError(f"graph {graph.name!r} has {graph.n} vertices, the plan {n}")
    return graph.to_scipy(), graph.data is None


def export_pyg(plan, out, *, graph=None, data=None) -> Path:
    """PyG ``torch_geometric.distributed.Partitioner`` layout for ``plan`` (homogeneous).

    Writes ``META.json`` (the keys PyG 2.8's ``Partitioner`` writes and
    ``torch_geometric.distributed.partition.load_partition_info`` /
    ``LocalGraphStore.from_partition`` read: ``num_parts``, ``node_types``,
    ``edge_types``, ``node_offset``, ``is_hetero``, ``is_sorted``),
    ``node_map.pt`` (int64[n]: part of each node), ``edge_map.pt``
    (int64[nnz]: part of each edge) and per part ``part_i/graph.pt`` (dict
    edge_id, row, col, size), ``node_feats.pt`` (global_id, feats) and
    ``edge_feats.pt`` (global_id, feats={'edge_attr': values or None}).

    The edges are those of the ORIGINAL graph A, never a normalized Â (a
    ``GCNConv`` normalizes again): ``graph`` (a :class:`partplan.Graph`) is
    checked against the manifest's ``graph.source_fingerprint`` (or
    ``graph.fingerprint``); without it, an unnormalized plan's own matrix is
    rebuilt (it is A), and a normalized plan is a PartitionError asking for it.
    Edge e is the e-th nonzero A[i, j] of the CSR, stored as PyG edge
    (row=j, col=i): PyG's ``edge_index[0]`` = source, ``[1]`` = target, and
    partplan's ``Z = A @ H`` sums the message j → i into row i (flow
    source_to_target). As in PyG's Partitioner (``ClusterData(sparse_format='csc')``),
    an edge goes with the partition of its ``col`` (destination) node i, and
    each part's edges are sorted by ``col`` (``is_sorted: true``).

    ``data`` : a partplan data file (``.npz``/``.pt``, :mod:`partplan.nn.data`,
    checked with ``check_data``): each part's ``node_feats.pt`` holds
    ``feats = {x, y, train_mask, val_mask, test_mask}`` of its nodes (rows by
    global id, in ``global_id`` order; LocalFeatureStore gives them by
    attribute name) and ``label.pt`` (y of every node) is written beside
    META.json, as PyG's distributed example does. Without data, ``x`` is None.
    """
    torch = _torch()
    out = Path(out)
    A, pattern = _source_matrix(plan, graph)
    part = plan.part
    k = int(plan.manifest["k"])
    n = part.size
    if data is not None:
        from .nn.data import check_data, read_rows
        check_data(data, n)
    row_nnz = np.diff(A.indptr)
    erow = np.repeat(np.arange(n, dtype=np.int64), row_nnz)    # i (target)
    ecol = A.indices.astype(np.int64)                          # j (source)
    emap = part[erow]                                          # PyG: edge goes with its destination
    tmp = _atomic_dir(out)
    try:
        (tmp / "META.json").write_text(json.dumps(PYG_META | {"num_parts": k}) + "\n")
        torch.save(torch.from_numpy(part.astype(np.int64)), tmp / "node_map.pt")
        torch.save(torch.from_numpy(emap.astype(np.int64)), tmp / "edge_map.pt")
        labels = np.zeros(n, dtype=np.int64) if data is not None else None
        for i in range(k):
            d = tmp / f"part_{i}"
            d.mkdir()
            eid = np.flatnonzero(emap == i)     # ascending, so erow[eid] (PyG's col) is sorted
            torch.save({"edge_id": torch.from_numpy(eid), "row": torch.from_numpy(ecol[eid]),
                        "col": torch.from_numpy(erow[eid]), "size": (n, n)}, d / "graph.pt")
            nodes = np.flatnonzero(part == i).astype(np.int64)
            feats = {"x": None}
            if data is not None:
                rows = read_rows(data, nodes)
                feats = {key: torch.from_numpy(np.ascontiguousarray(rows[key])) for key in
                         ("x", "y", "train_mask", "val_mask", "test_mask")}
                feats["y"] = feats["y"].long()
                labels[nodes] = feats["y"].numpy()
                for key in ("train_mask", "val_mask", "test_mask"):
                    feats[key] = feats[key].bool()
            torch.save({"global_id": torch.from_numpy(nodes), "feats": feats}, d / "node_feats.pt")
            attr = None if pattern else torch.from_numpy(np.asarray(A.data[eid], dtype=np.float64))
            torch.save({"global_id": torch.from_numpy(eid), "feats": {"edge_attr": attr}}, d / "edge_feats.pt")
        if labels is not None:
            torch.save(torch.from_numpy(labels), tmp / "label.pt")
        return _finish(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def export_plan(plan_path, to: str, out, *, graph_name: str | None = None, graph=None, data=None) -> Path:
    """Export the partition of the plan at ``plan_path`` to ``to`` = dgl | pyg | metis.

    ``graph`` (a :class:`partplan.Graph` or a graph file) and ``data`` (a data
    file) are for ``pyg`` only: see :func:`export_pyg`."""
    from .plan import load_plan
    if to not in ("dgl", "pyg", "metis"):
        raise BackendUnavailableError(f"unknown export target {to!r}; choose dgl, pyg or metis")
    if to != "pyg" and (graph is not None or data is not None):
        raise PartitionError(f"a graph and data are used by the pyg export only, not by {to}")
    plan = load_plan(plan_path)
    if to == "metis":
        return export_metis(plan.part, out)
    if to == "dgl":
        return export_dgl(plan, out, graph_name=graph_name)
    if graph is not None and not hasattr(graph, "fingerprint"):
        from .io import read_graph
        graph = read_graph(graph)
    return export_pyg(plan, out, graph=graph, data=data)
