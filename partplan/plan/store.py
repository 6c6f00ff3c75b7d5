"""Write and read plan directories (Arrow IPC shards + JSON manifest).

pyarrow does the file format (``pyarrow.ipc`` file format, uncompressed so it can
be memory-mapped) and the memory mapping (``pyarrow.memory_map``); this module
only lays the arrays out, checksums them (sha256, hashlib) and checks what it
reads. Writing is atomic: everything goes to a temporary sibling directory that
is renamed into place at the end, so a reader never sees half a plan.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc

from .._atomic import clean_stale, temp_prefix
from ..errors import PlanError
from .builder import Plan, RankPlan
from .checks import check_fields, check_steps
from .steps import STEPS
from .schema import FORMAT, MANIFEST, PARTITION_FILE, REBUILD_HINT, SUPPORTED_VERSIONS, shard_name

_META_KEY = b"partplan"


# ----------------------------------------------------------------------------- arrow encoding
def _table(arrays: dict[str, np.ndarray], meta: dict) -> pa.RecordBatch:
    """One record batch, one row; each array is the single list of a large_list column."""
    cols, names = [], []
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        if a.dtype.kind in "iu":
            a = a.astype(np.int64, copy=False)
        elif a.dtype.kind == "f":
            a = a.astype(np.float64, copy=False)
        else:
            raise PlanError(f"field {name!r}: unsupported dtype {a.dtype}")
        offsets = pa.array(np.array([0, a.size], dtype=np.int64))
        cols.append(pa.LargeListArray.from_arrays(offsets, pa.array(a)))
        names.append(name)
    schema = pa.schema([pa.field(nm, c.type, nullable=False) for nm, c in zip(names, cols)],
                       metadata={_META_KEY: json.dumps(meta, sort_keys=True).encode()})
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _write_arrow(path: Path, arrays: dict, meta: dict) -> tuple[int, str]:
    batch = _table(arrays, meta)
    with pa.OSFile(str(path), "wb") as sink:
        with ipc.new_file(sink, batch.schema) as writer:
            writer.write_batch(batch)
    return path.stat().st_size, _sha256(path)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _read_arrow(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """(meta, arrays) from a shard, arrays zero-copy views of a memory map."""
    try:
        source = pa.memory_map(str(path), "r")
        reader = ipc.open_file(source)
        if reader.num_record_batches != 1:
            raise PlanError(f"{path}: expected 1 record batch, found {reader.num_record_batches}")
        batch = reader.get_batch(0)
        raw = (reader.schema.metadata or {}).get(_META_KEY)
        if raw is None:
            raise PlanError(f"{path}: schema metadata 'partplan' is missing (not a partplan shard)")
        meta = json.loads(raw)
        arrays = {}
        for name, col in zip(batch.schema.names, batch.columns):
            if not pa.types.is_large_list(col.type) or len(col) != 1:
                raise PlanError(f"{path}: field {name!r} is not a one-row large_list column")
            arrays[name] = col.values.to_numpy(zero_copy_only=True)
        return meta, arrays
    except PlanError:
        raise
    except (pa.ArrowException, OSError, ValueError, json.JSONDecodeError) as exc:
        raise PlanError(f"{path}: unreadable Arrow shard ({exc})") from exc


# ----------------------------------------------------------------------------- write
def write_plan(plan: Plan, path, *, created: str | None | bool = None) -> Path:
    """Write ``plan`` as a directory at ``path`` (atomically; replaces an existing plan).

    created : the manifest's creation time (ISO 8601 UTC). Default: now, or
        ``$SOURCE_DATE_EPOCH`` when set; ``False`` leaves it out. Shard and
        partition bytes never depend on it: two builds of the same input write
        identical shards and manifests that differ only in ``created``.
    Returns the plan directory path.
    """
    path = Path(path)
    if path.exists() and not (path / MANIFEST).is_file():
        if path.is_file() or any(path.iterdir()):
            raise PlanError(f"{path}: exists and is not a plan directory; refusing to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale(path)  # temp dirs of writers killed before their rename
    tmp = Path(tempfile.mkdtemp(prefix=temp_prefix(path), dir=path.parent))
    try:
        m = dict(plan.manifest)
        from .._version import __version__
        m["tool"] = {"name": "partplan", "version": __version__}
        if created is None:
            epoch = os.environ.get("SOURCE_DATE_EPOCH")
            now = (_dt.datetime.fromtimestamp(int(epoch), _dt.timezone.utc) if epoch
                   else _dt.datetime.now(_dt.timezone.utc))
            created = now.replace(microsecond=0).isoformat()
        if created is not False:
            m["created"] = created
        shards = []
        for rp in plan.ranks:
            name = shard_name(rp.rank)
            size, digest = _write_arrow(tmp / name, rp.arrays, rp.meta)
            shards.append({"rank": rp.rank, "file": name, "bytes": size, "sha256": digest,
                           **{k: v for k, v in rp.summary().items() if k != "rank"}})
        garr = {"part": plan.part}
        if plan.owner is not None:
            garr["owner"] = plan.owner
        if plan.perm is not None:
            garr["perm"] = plan.perm
        size, digest = _write_arrow(tmp / PARTITION_FILE, garr,
                                    {"graph_fingerprint": m["graph"]["fingerprint"], "k": m["k"]})
        m["partition_file"] = {"file": PARTITION_FILE, "bytes": size, "sha256": digest}
        m["shards"] = shards
        with open(tmp / MANIFEST, "w") as fh:
            json.dump(m, fh, indent=1, sort_keys=True, default=_json_default)
            fh.write("\n")
        os.chmod(tmp, 0o755)
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=temp_prefix(path, "old"), dir=path.parent))
            os.replace(path, old / "plan")
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    plan.manifest = m
    return path


def _json_default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    raise TypeError(f"not JSON-serializable: {type(o).__name__}")


# ----------------------------------------------------------------------------- read
def read_manifest(path) -> dict:
    """Parse and check ``PLAN/manifest.json`` (format, version, required fields)."""
    path = Path(path)
    mf = path / MANIFEST
    if not path.is_dir():
        raise PlanError(f"{path}: not a plan directory (no such directory)")
    if not mf.is_file():
        raise PlanError(f"{mf}: missing manifest (not a plan, or an interrupted write)")
    try:
        m = json.loads(mf.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PlanError(f"{mf}: not valid JSON ({exc})") from exc
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        raise PlanError(f"{mf}: field 'format' must be {FORMAT!r}, got {m.get('format') if isinstance(m, dict) else m!r}")
    v = m.get("format_version")
    if v not in SUPPORTED_VERSIONS:
        old = isinstance(v, int) and v < min(SUPPORTED_VERSIONS)
        raise PlanError(f"{mf}: field 'format_version' = {v!r} is not supported by this partplan "
                        f"(supported: {', '.join(map(str, SUPPORTED_VERSIONS))})"
                        + (f"; a version-{v} plan has no exchange program: {REBUILD_HINT}" if old else ""))
    _check_manifest_fields(m, mf)
    return m


def _check_manifest_fields(m: dict, mf: Path) -> None:
    """Types and cross-field consistency of a v2 manifest (one PlanError naming the field)."""
    def need(key, typ, where=m, name=None):
        name = name or key
        if key not in where:
            raise PlanError(f"{mf}: required field {name!r} is missing")
        val = where[key]
        if typ is int and (isinstance(val, bool) or not isinstance(val, int)):
            raise PlanError(f"{mf}: field {name!r} must be an integer, got {val!r}")
        if typ is not int and not isinstance(val, typ):
            raise PlanError(f"{mf}: field {name!r} must be {typ.__name__ if isinstance(typ, type) else typ}, "
                            f"got {type(val).__name__}")
        return val
    g = need("graph", dict)
    need("fingerprint", str, g, "graph.fingerprint")
    need("n", int, g, "graph.n")
    need("nnz", int, g, "graph.nnz")
    ranks = need("ranks", int)
    if ranks < 1:
        raise PlanError(f"{mf}: field 'ranks' must be >= 1, got {ranks}")
    k = need("k", int)
    if k != ranks:
        raise PlanError(f"{mf}: field 'k' = {k} differs from 'ranks' = {ranks} (k counts ranks)")
    need("layout", str)
    from ..errors import PartitionError
    from ..layouts import parse_layout
    try:
        lay = parse_layout(m["layout"], ranks)
    except PartitionError as exc:
        raise PlanError(f"{mf}: field 'layout': {exc}") from None
    if need("row_blocks", int) != lay.row_blocks:
        raise PlanError(f"{mf}: field 'row_blocks' = {m['row_blocks']} but layout {lay.spec} on {ranks} ranks "
                        f"has {lay.row_blocks}")
    from ..models.normalize import NORMALIZATIONS
    if m.get("normalize") is not None and m.get("normalize") not in NORMALIZATIONS:
        raise PlanError(f"{mf}: field 'normalize' = {m.get('normalize')!r} is not null or one of "
                        f"{', '.join(NORMALIZATIONS)}")
    groups = need("groups", list)
    want = [gg.to_json() for gg in lay.groups()]
    if groups != want:
        raise PlanError(f"{mf}: field 'groups' differs from the groups of layout {lay.spec} on {ranks} ranks")
    progs = need("programs", dict)
    if "forward" not in progs:
        raise PlanError(f"{mf}: field 'programs.forward' is missing")
    check_steps(m, mf)  # every step field by type, before anything indexes with them
    families = {gg.family for gg in lay.groups()}
    for name, pr in progs.items():
        if not isinstance(pr, dict):
            raise PlanError(f"{mf}: field 'programs.{name}' must be an object")
        if "same_as" in pr:
            if pr["same_as"] not in progs or "same_as" in progs[pr["same_as"]]:
                raise PlanError(f"{mf}: field 'programs.{name}.same_as' names no program")
            continue
        steps = need("steps", list, pr, f"programs.{name}.steps")
        need("prefix", str, pr, f"programs.{name}.prefix")
        for i, st in enumerate(steps):
            where = f"programs.{name}.steps[{i}]"
            if not isinstance(st, dict) or st.get("op") not in STEPS:
                raise PlanError(f"{mf}: field '{where}.op' is not a known step "
                                f"({', '.join(STEPS)})")
            if st.get("id") != f"{pr['prefix']}.{i}":
                raise PlanError(f"{mf}: field '{where}.id' must be {pr['prefix']}.{i!s}")
            if "group" in st and st["group"] not in families:
                raise PlanError(f"{mf}: field '{where}.group' = {st['group']!r} is no group family of "
                                f"layout {lay.spec} ({', '.join(sorted(families))})")
            arrs = need("arrays", list, st, f"{where}.arrays")
            req, opt = STEPS[st["op"]].arrays, STEPS[st["op"]].optional_arrays
            if not set(req) <= set(arrs) <= set(req) | set(opt):
                raise PlanError(f"{mf}: field '{where}.arrays' = {arrs} does not fit op {st['op']!r}")
            if STEPS[st["op"]].pairs:
                pairs = need("pairs", list, st, f"{where}.pairs")
                for pr_ in pairs:
                    if (not isinstance(pr_, list) or len(pr_) != 3 or
                            not all(isinstance(x, int) and not isinstance(x, bool) for x in pr_) or
                            not (0 <= pr_[0] < ranks and 0 <= pr_[1] < ranks and pr_[2] > 0)):
                        raise PlanError(f"{mf}: field '{where}.pairs' holds {pr_!r}, not "
                                        f"[src rank, dst rank, rows > 0]")
    shards = need("shards", list)
    if len(shards) != ranks:
        raise PlanError(f"{mf}: field 'shards' lists {len(shards)} shards for ranks = {ranks}")
    for i, e in enumerate(shards):
        if not isinstance(e, dict) or e.get("rank") != i or not isinstance(e.get("bytes"), int) \
                or not isinstance(e.get("sha256"), str):
            raise PlanError(f"{mf}: field 'shards[{i}]' must hold rank = {i}, bytes (int) and sha256 (str)")
    pf = need("partition_file", dict)
    if not isinstance(pf.get("bytes"), int) or not isinstance(pf.get("sha256"), str):
        raise PlanError(f"{mf}: field 'partition_file' must hold bytes (int) and sha256 (str)")
    check_fields(m, mf)  # descriptive fields by type and against each other; shard file names


def _check_file(path: Path, entry: dict, what: str, verify: bool):
    if not path.is_file():
        raise PlanError(f"{path}: {what} is missing (manifest lists it)")
    size = path.stat().st_size
    if size != entry.get("bytes"):
        kind = "truncated" if size < entry.get("bytes", 0) else "has extra bytes"
        raise PlanError(f"{path}: {what} {kind}: {size} bytes, manifest field 'bytes' says {entry.get('bytes')}")
    if verify:
        digest = _sha256(path)
        if digest != entry.get("sha256"):
            raise PlanError(f"{path}: {what} is corrupted: sha256 {digest[:16]}… does not match manifest "
                            f"field 'sha256' {str(entry.get('sha256'))[:16]}…")


def check_files(path, manifest: dict, *, verify: bool = False) -> None:
    """Every file the manifest lists (shards, partition file) is present with
    its recorded size; with ``verify`` also its sha256 (``partplan inspect``
    checks sizes only, ``validate`` checksums). One PlanError naming the file."""
    path = Path(path)
    for rank, entry in enumerate(manifest["shards"]):
        _check_file(path / entry.get("file", shard_name(rank)), entry, f"shard of rank {rank}", verify)
    pf = manifest["partition_file"]
    _check_file(path / pf.get("file", PARTITION_FILE), pf, "partition file", verify)


def _check_graph(m: dict, graph, where: Path):
    if graph is None:
        return
    fp = m["graph"].get("fingerprint")
    if fp != graph.fingerprint and m.get("normalize") and graph.fingerprint == m["graph"].get("source_fingerprint"):
        raise PlanError(f"{where / MANIFEST}: the plan multiplies the {m['normalize']}-normalized matrix of graph "
                        f"{graph.name!r}, not the graph itself: pass "
                        f"partplan.nn.normalize_adjacency(graph, {m['normalize']!r})")
    if fp != graph.fingerprint:
        raise PlanError(f"{where / MANIFEST}: field 'graph.fingerprint' {str(fp)[:16]}… does not match the "
                        f"given graph {graph.name!r} ({graph.fingerprint[:16]}…; n={graph.n}, nnz={graph.nnz} vs "
                        f"plan n={m['graph'].get('n')}, nnz={m['graph'].get('nnz')}): the plan was built for "
                        f"another graph")


def _peek_fingerprint(f: Path) -> str | None:
    """The graph fingerprint in a shard's schema metadata, or None if unreadable."""
    try:
        with pa.memory_map(str(f), "r") as src:
            raw = (ipc.open_file(src).schema.metadata or {}).get(_META_KEY)
        return json.loads(raw).get("graph_fingerprint") if raw else None
    except Exception:  # any damage: fall back to the size/checksum message
        return None


def load_rank(path, rank: int, *, manifest: dict | None = None, verify: bool = True) -> RankPlan:
    """Read only rank ``rank``'s shard (memory-mapped) after checking it against the manifest."""
    path = Path(path)
    m = manifest or read_manifest(path)
    if not 0 <= rank < m["ranks"]:
        raise PlanError(f"{path}: rank {rank} out of range [0, {m['ranks']})")
    entry = m["shards"][rank]
    f = path / entry.get("file", shard_name(rank))
    try:
        _check_file(f, entry, f"shard of rank {rank}", verify)
    except PlanError:
        other = _peek_fingerprint(f)
        if other is not None and other != m["graph"]["fingerprint"]:
            raise PlanError(f"{f}: shard was built for graph {other[:16]}… but {path / MANIFEST} field "
                            f"'graph.fingerprint' says {m['graph']['fingerprint'][:16]}… (manifest and shards "
                            f"come from different plans)") from None
        raise
    meta, arrays = _read_arrow(f)
    if meta.get("rank") != rank:
        raise PlanError(f"{f}: shard metadata field 'rank' = {meta.get('rank')!r}, expected {rank}")
    if meta.get("graph_fingerprint") != m["graph"]["fingerprint"]:
        raise PlanError(f"{f}: shard metadata field 'graph_fingerprint' differs from the manifest's "
                        f"(shard from another plan)")
    expected = set()
    for pr in m["programs"].values():
        if "same_as" in pr:
            continue
        expected |= {f"{pr['prefix']}.in_ids", f"{pr['prefix']}.out_ids"}
        for st in pr["steps"]:
            expected |= {f"{st['id']}.{a}" for a in st["arrays"]}
    for name in arrays:
        if name not in expected:
            raise PlanError(f"{f}: field {name!r} belongs to no step of the manifest's programs "
                            f"(shard from another plan?)")
    for name in sorted(expected):
        if name not in arrays:
            raise PlanError(f"{f}: field {name!r} (named by the manifest's programs) is missing")
    progs = meta.get("programs")
    if not isinstance(progs, dict) or any(
            not isinstance(progs.get(p_), dict) or not isinstance(progs[p_].get("buffers"), dict)
            for p_ in m["programs"]):
        raise PlanError(f"{f}: shard metadata field 'programs' lacks the buffer sizes of "
                        f"{', '.join(m['programs'])}")
    for p_, pm in progs.items():
        for b_, rows in pm["buffers"].items():
            if not isinstance(rows, int) or isinstance(rows, bool) or rows < 0:
                raise PlanError(f"{f}: shard metadata field 'programs.{p_}.buffers.{b_}' = {rows!r} "
                                f"is not a row count")
    return RankPlan(rank, meta, arrays)


def load_plan(path, rank: int | None = None, graph=None, *, verify: bool = True):
    """Load a plan directory.

    rank : None → the whole :class:`Plan` (every shard + partition.arrow);
        an int → only that rank's :class:`RankPlan` (reads manifest + one shard).
    graph : if given, its fingerprint must match the plan's (else PlanError).
    verify : check each file's sha256 (reads it once); sizes are always checked.

    Raises :class:`PlanError` naming the file and field on a missing or
    corrupted shard, truncation, unknown format version or another graph.
    """
    path = Path(path)
    m = read_manifest(path)
    _check_graph(m, graph, path)
    if rank is not None:
        return load_rank(path, int(rank), manifest=m, verify=verify)
    ranks = [load_rank(path, r, manifest=m, verify=verify) for r in range(m["ranks"])]
    pf = path / m["partition_file"].get("file", PARTITION_FILE)
    _check_file(pf, m["partition_file"], "partition file", verify)
    _, g = _read_arrow(pf)
    if "part" not in g or g["part"].size != m["graph"]["n"]:
        raise PlanError(f"{pf}: field 'part' missing or not of length n = {m['graph']['n']}")
    return Plan(m, ranks, g["part"], g.get("owner"), g.get("perm"))
