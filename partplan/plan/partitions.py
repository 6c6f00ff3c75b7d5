"""The one partition reader every command uses (``partplan plan``,
``partplan analyze``, ``run graph500 --partition FILE``).

:func:`read_partition_file` takes any partition a user may hold and returns a
:class:`partplan.partition.Partition`:

- a partition saved by ``partplan partition`` (``.npy`` / text / ``.parquet``
  with partplan's metadata): :func:`partplan.partition.load_partition`, its
  layout, ranks and graph fingerprint kept;
- a bare file: METIS text ``.part.K`` (one id per line), ``.npy``, ``.pt``
  (a 1-D node map), a Parquet / Arrow / Feather / CSV column
  (:func:`partplan.io.partfile.read_partition` reads all of these);
- a partplan plan directory: the partition it was built from, with its layout
  (:func:`partplan.plan.store.load_plan_partition`: manifest, checksum, ids
  and the graph's fingerprint checked; the shards are not read);
- a PyG ``Partitioner`` folder (``node_map.pt`` inside), a DGL partition
  folder or config JSON, a DGL assignment folder, a CAGNET ``.part-sizes``
  file (:func:`partplan.io.foreign.read_partition_any`).

Every problem is one :class:`~partplan.errors.PartitionError` naming the file
(and the line of a text file): ids that are not integers (floats, NaN), a
negative id, a count other than the graph's ``n``, an id ``>= K`` (``K`` from
``k=``, else from a ``.part.K`` name), a tensor or array that is not 1-D.
A bare partition is described as ``model="external"`` on the 1d layout.
"""
from __future__ import annotations

import os
from pathlib import Path


from ..errors import PartitionError

#: bytes of a partition's JSON sidecar (its metadata: a few KiB; params and timings of any engine fit)
SIDECAR_MAX_BYTES = 64 << 20

__all__ = ["read_partition_file", "saved_partition_meta", "partition_provenance"]


def _is_partplan_saved(p: Path) -> bool:
    """Whether ``p`` was written by ``save_partition`` (a JSON sidecar, or
    partplan's metadata in a Parquet file)."""
    if p.is_dir():
        return False
    if p.with_name(p.name + ".json").is_file():
        return True
    if p.suffix.lower() == ".parquet":
        try:
            import pyarrow.parquet as pq
            md = pq.read_schema(p).metadata or {}
        except Exception:  # noqa: BLE001 - unreadable: the bare reader names the problem
            return False
        return b"partplan" in md
    return False


def _from_plan(p: Path, graph):
    """The partition of plan directory ``p`` (checked as :func:`partplan.plan.load_plan` checks it,
    shards not read) with the plan's layout, model and engine; its graph must be ``graph``."""
    from ..partition import Partition
    from ..partition.api import _layout_of
    from ..parts import as_partition
    from .store import load_plan_partition

    m, part, owner = load_plan_partition(p, graph)
    lay = _layout_of({"k": m["ranks"], "layout": m.get("layout", "1d"),
                      "layout_params": m.get("layout_params") or {}}, p / "manifest.json")
    part, _ = as_partition(part, graph.n, lay.row_blocks, source=str(p))
    text = {f: str(m.get(f) or "") for f in ("model", "backend", "objective")}
    params = dict(m.get("params") or {}) if isinstance(m.get("params"), dict) else {}
    if m.get("seed") is not None:
        params.setdefault("seed", m["seed"])          # the plan's provenance goes on to the plan built from it
    return Partition(part=part, k=lay.ranks, layout=lay.spec, layout_params=dict(m.get("layout_params") or {}),
                     model=text["model"] or "external", backend=text["backend"] or "external",
                     objective=text["objective"] or "total", params=params, timings={}, stats=None, owner=owner,
                     graph_fingerprint=graph.fingerprint,
                     # a plan built from a bare partition records no provenance: the plan built from it neither
                     info={"file": str(p), "plan": True, "provenance": any(text.values())})


def declared_k(path: str | os.PathLike, column: str | None = None) -> int | None:
    """The part count a bare partition file declares: K of a METIS ``NAME.part.K`` name, else a PyG /
    DGL / CAGNET partition's own ``num_parts`` (not for a ``column`` of a table); None when it
    declares none (its parts are then max(id) + 1 at least)."""
    from ..io.foreign import declared_parts
    from ..io.partfile import partition_k_from_name

    named = partition_k_from_name(path)
    if named is None and column is None:
        named = declared_parts(Path(path))
    return named


# what a plan records of a bare partition whose part count is declared (read_partition_file's Partition)
EXTERNAL_PROVENANCE = {"model": "external", "backend": "external", "objective": "total", "seed": None, "params": {}}


def read_partition_file(path: str | os.PathLike, graph, *, column: str | None = None,
                        k: int | None = None, count_named: bool = False):
    """Read the partition in ``path`` for ``graph`` (a :class:`partplan.Graph`);
    returns a :class:`partplan.partition.Partition`.

    ``column`` names the column of a table file. ``k`` is the number of row
    blocks the ids must stay below (default: K of a ``NAME.part.K`` file name or
    a PyG / DGL / CAGNET partition's own part count — recorded as
    ``info["parts_declared"]`` — else the largest id + 1). A saved partplan
    partition keeps its own layout and ranks (and must match ``graph``'s
    fingerprint). ``count_named``: the caller names the rank count itself (``plan -k``), so ids
    that skip values are empty ranks it asked for (no warning). Raises
    :class:`~partplan.errors.PartitionError` naming the file on bad input.
    """
    from ..io.foreign import read_partition_any
    from ..partition import Partition, load_partition
    from ..parts import as_partition

    p = Path(path)
    if not p.exists():
        raise PartitionError(f"{p}: no such partition file or directory")
    if column is not None:
        part = read_table_column(p, graph.n, column)
    elif p.is_dir() and (p / "manifest.json").is_file():      # a plan: the partition it was built from
        P = _from_plan(p, graph)
        if k is not None and P.row_blocks > k:
            raise PartitionError(f"{p}: {P.row_blocks} row blocks, more than the {k} asked for")
        return P
    elif _is_partplan_saved(p):
        P = load_partition(p, graph)
        if k is not None and P.row_blocks > k:
            raise PartitionError(f"{p}: {P.row_blocks} row blocks, more than the {k} asked for")
        return P
    else:
        part = read_partition_any(p, graph.n)
    named = declared_k(p, column)
    if k is not None and named is not None and named != k:
        raise PartitionError(f"{p}: the name says K = {named} parts but {k} were asked for")
    part, b = as_partition(part, graph.n, k if k is not None else named, source=str(p))
    if k is None and named is None and not count_named:
        _say_skipped_ids(p, part, b)
    return Partition(part=part, k=b, layout="1d", layout_params={}, owner=None, timings={}, stats=None,
                     **{f: EXTERNAL_PROVENANCE[f] for f in ("model", "backend", "objective")}, params={},
                     graph_fingerprint=graph.fingerprint,
                     info={"file": str(p), "bare": True, **({"parts_declared": named} if named is not None else {})})


def read_table_column(path, n: int, column: str):
    """The part ids (int64[n]) in column ``column`` of the Parquet / Arrow / CSV partition file
    ``path``; one PartitionError for anything else."""
    from ..io.foreign import read_partition_any
    from ..io.partfile import TABLE_SUFFIXES, _suffixes
    p = Path(path)
    if not p.exists():
        raise PartitionError(f"{p}: no such partition file or directory")
    if p.is_dir() or _suffixes(p) not in TABLE_SUFFIXES:
        raise PartitionError(f"{p}: --column applies to Parquet/Arrow/CSV partition files only")
    return read_partition_any(p, n, column=column)


def _say_skipped_ids(p: Path, part, b: int) -> None:
    """A warning when a bare partition's ids (its part count read as the largest id + 1) skip
    values: each skipped id is a rank that would hold no rows."""
    import numpy as np

    empty = np.flatnonzero(np.bincount(part, minlength=b) == 0)
    if empty.size:
        from ..io._common import warn_user
        shown = ", ".join(str(i) for i in empty[:8].tolist()) + (", ..." if empty.size > 8 else "")
        warn_user(f"{p}: its part ids skip {shown}, so {empty.size} of its {b} ranks (largest id + 1) would hold "
                  f"no rows; number the parts 0..K-1, or name the count (-k, a NAME.part.K file) if empty ranks "
                  f"are meant")


def parts_known(P) -> bool:
    """Whether the Partition :func:`read_partition_file` returned knows its part count exactly (a saved
    partplan partition, whatever wrote it — ``partition``, or ``analyze --save-partition`` with its
    layout —, a plan, a declared K) rather than max(id) + 1 of a bare file; a layout and ranks asked
    for must then have exactly its row blocks, and its own layout is the default."""
    return not P.info.get("bare") or P.info.get("parts_declared") is not None


def saved_partition_meta(path, *, verify: bool = True) -> dict | None:
    """The metadata ``partplan partition`` saved with the partition file
    ``path`` (its ``.json`` sidecar, or a Parquet file's ``partplan`` schema
    key), read without the part array; None for a bare file (or an array).
    ``verify``: the sidecar's sha256 checked against the file (one read of it; False where the
    caller's launcher has checked it, as the distributed build's processes do)."""
    if not isinstance(path, (str, os.PathLike)):
        return None
    p = Path(path)
    if p.is_dir() or not p.exists() or not _is_partplan_saved(p):
        return None
    from ..partition.api import _meta_dict, _sidecar
    if p.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq
        raw = (pq.read_schema(p).metadata or {}).get(b"partplan")
        return _meta_dict(raw, p) if raw else None
    side = _sidecar(p)
    from ..io.jsonfile import parse_json_bytes, read_json_bytes
    raw = read_json_bytes(side, max_bytes=SIDECAR_MAX_BYTES, what="partition sidecar", error=PartitionError)
    parse_json_bytes(raw, side, what="partition sidecar", error=PartitionError)   # UTF-8, depth, NaN first
    meta = _meta_dict(raw, side)
    if verify:
        from ..partition.api import _check_described
        _check_described(side, meta, "part_sha256", p)   # a sidecar left beside a file written later
    return meta


def partition_provenance(path, *, verify: bool = True) -> dict:
    """The partition's provenance as :func:`partplan.plan.build_plan` records
    it in the manifest for a saved partition (``model``, ``backend``,
    ``objective``, ``seed``, ``params``), read from its saved metadata only
    (:func:`saved_partition_meta`; the part array is not read): what a
    distributed plan build (:func:`partplan.jobs.build.build_distributed`)
    writes, so both builds' manifests agree: the "external" provenance of a bare partition that
    declares its part count (:func:`declared_k`; the one-process build reads it as a Partition),
    else empty for a bare partition. ``verify`` as :func:`saved_partition_meta`'s."""
    meta = saved_partition_meta(path, verify=verify)
    if meta is None:
        declared = isinstance(path, (str, os.PathLike)) and Path(path).exists() and declared_k(path) is not None
        return dict(EXTERNAL_PROVENANCE, params={}) if declared else {}
    params = meta.get("params", {})
    if not isinstance(params, dict):
        raise PartitionError(f"{path}: partition metadata field 'params' must be a JSON object")
    # as load_partition + build_plan record them: the texts as str, the seed from the params
    return {"model": str(meta.get("model", "")), "backend": str(meta.get("backend", "")),
            "objective": str(meta.get("objective", "")), "seed": params.get("seed"), "params": dict(params)}
