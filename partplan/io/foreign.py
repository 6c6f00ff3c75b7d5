"""Read partitions written by other systems.

One reader, :func:`read_partition_any`, detects the kind:

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
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..errors import BackendUnavailableError, PartitionError

DGL_NTYPE = "_N"


DGL_ETYPE = "_N:_E:_N"


# ============================================================================ import
def read_cagnet_part_sizes(path, n: int | None = None) -> np.ndarray:
    """CAGNET ``.part-sizes``: the sizes of contiguous row blocks → part[v]."""
    p = Path(path)
    try:
        tokens = _read_bytes(p).decode().split()
    except UnicodeDecodeError as exc:
        raise PartitionError(f"{p}: cannot read part sizes ({exc})") from exc
    sizes = []
    for t in tokens:
        if not (t.isascii() and t.lstrip("+-").isdigit()):    # int() also reads "1_2" and other scripts' digits
            raise PartitionError(f"{p}: block size {t!r} is not an integer")
        v = int(t)
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
    from ._common import human_bytes, memory_budget
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


def _integer_ids(path: Path, arr: np.ndarray, what: str, ids: str = "part id") -> np.ndarray:
    """``arr`` as int64 ids (``ids``: what they are, for the messages): integer dtypes (or floats
    holding whole numbers), non-negative, below 2^63 — never truncated (``0.5`` to 0, ``True`` to 1,
    2^64 − 1 to −1)."""
    from ..parts import as_part_ids
    return as_part_ids(arr, where=f"{path}: ", what=what, ids=ids)   # (a bool array is no integer dtype there)


def _load_pt(path: Path) -> np.ndarray:
    torch = _torch()
    from ._common import open_regular
    from .partfile import describe_loaded, load_torch_tensors, torch_tensor_in
    fd, _ = open_regular(path, error=lambda problem: PartitionError(f"{path}: {problem}"))
    with os.fdopen(fd, "rb") as fh:
        obj = load_torch_tensors(fh, path)
    if not isinstance(torch_tensor_in(obj), torch.Tensor):
        raise PartitionError(f"{path}: expected a 1-D tensor (or a one-entry dict of one), got "
                             f"{describe_loaded(obj)} (heterogeneous node maps are not supported)")
    obj = torch_tensor_in(obj)
    if obj.layout != torch.strided or obj.is_meta or obj.dim() != 1:
        raise PartitionError(f"{path}: expected a dense 1-D tensor, got layout {obj.layout}, shape "
                             f"{tuple(obj.shape)}{' (meta)' if obj.is_meta else ''}")
    if obj.is_floating_point() or obj.is_complex() or obj.dtype == torch.bool:
        raise PartitionError(f"{path}: expected integer ids, got {obj.dtype}")
    return obj.cpu().numpy().astype(np.int64)


def _refuse_links(folder: Path) -> None:
    """A partition folder's files are its own: a symbolic link among them (or in its
    ``partition_assignment/``) would have the reader open a file elsewhere; one PartitionError
    naming it."""
    for d in (folder, folder / "partition_assignment"):
        if not d.is_dir():     # (a linked partition_assignment/ is refused by the first scan)
            continue
        with os.scandir(d) as it:
            for e in it:
                if e.is_symlink():
                    raise PartitionError(f"{Path(e.path)}: a symbolic link inside a partition folder (partplan "
                                         f"reads the folder's own files only)")


def read_pyg_partition(path, n: int | None = None) -> np.ndarray:
    """PyG: a ``node_map.pt`` file or a Partitioner folder (META.json + node_map.pt)."""
    p = Path(path)
    if p.is_dir():
        _refuse_links(p)
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


_MAX_TEXT = 64 << 20   # bytes of a foreign config or size list (a config of 10^5 parts' ranges is ~4 MB)


def _read_bytes(path: Path, limit: int = _MAX_TEXT) -> bytes:
    """The bytes of the regular file ``path`` (non-blocking open, fstat before
    any read: a FIFO or a device never blocks), at most ``limit``."""
    from ._common import open_regular
    fd, st = open_regular(path, error=lambda problem: PartitionError(f"{path}: {problem}"))
    with os.fdopen(fd, "rb") as fh:
        if st.st_size > limit:
            raise PartitionError(f"{path}: {st.st_size} bytes, more than a partition description needs ({limit})")
        return fh.read(st.st_size + 1)   # (a read of n bytes allocates n up front)


def _read_json(path: Path) -> dict:
    """A foreign partition's JSON (:func:`partplan.io.jsonfile.read_json`: a regular file of at most
    ``_MAX_TEXT`` bytes, UTF-8, depth, integer length and NaN refused); one PartitionError naming the
    file."""
    from .jsonfile import read_json
    m = read_json(Path(path), max_bytes=_MAX_TEXT, what="partition config", error=PartitionError)
    if not isinstance(m, dict):
        raise PartitionError(f"{path}: expected a JSON object, got {type(m).__name__}")
    return m


def _exact_ints(values, cfg: Path, field: str) -> np.ndarray:
    """``values`` (nested lists from JSON) as int64, refusing fractions,
    booleans, strings and numbers beyond 64 bits instead of truncating them."""
    flat = np.asarray(values, dtype=object).ravel()
    ok = [isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < (1 << 63) for v in flat[:1 << 20]]
    if flat.size > (1 << 20) or not all(ok):
        bad = next((v for v, good in zip(flat, ok) if not good), None)
        raise PartitionError(f"{cfg}: field {field!r} must hold integers, got {str(bad)[:40]!r}")
    return np.asarray(values, dtype=np.int64)


def _dgl_config(path: Path) -> Path:
    if path.is_file():
        return path
    cands, unreadable = [], []
    for f in sorted(path.glob("*.json")):
        try:
            if f.name != "partition_meta.json" and "num_parts" in _read_json(f):
                cands.append(f)
        except PartitionError as exc:
            unreadable.append(exc)
    if not cands and unreadable:    # the config is most likely the JSON that could not be read: say why
        raise unreadable[0]
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
    if p.is_dir():
        _refuse_links(p)
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
    if num_nodes is not None and (isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 0):
        raise PartitionError(f"{cfg}: field 'num_nodes' must be a vertex count, got {str(num_nodes)[:40]!r}")
    node_map = m["node_map"]
    if isinstance(node_map, str):  # old layout: file with the part of every original id
        # a name from the file never becomes a path: only its last component, inside the config's folder
        base = Path(node_map).name
        from .trust import plain_name_problem, printable
        why = plain_name_problem(base)
        if why:
            raise PartitionError(f"{cfg}: field 'node_map' = {printable(repr(node_map))[:80]}: its file name {why}")
        f = root / base
        from .partfile import load_npy
        try:
            part = _integer_ids(f, load_npy(f, n, "node_map"), "node_map")
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
        k = m["num_parts"]
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= (1 << 24):
            raise PartitionError(f"{cfg}: field 'num_parts' must be an integer in [1, 2^24], got {str(k)[:40]!r}")
        if isinstance(ranges, list) and len(ranges) > k:     # (checked before the list is converted)
            raise PartitionError(f"{cfg}: field 'node_map' has {len(ranges)} ranges for num_parts = {k}")
        try:
            if not isinstance(ranges, list):
                raise ValueError
            if ranges and not isinstance(ranges[0], list):  # oldest form: end of each range
                ends = _exact_ints(ranges, cfg, "node_map").tolist()
                ranges = [[s, e] for s, e in zip([0] + ends[:-1], ends)]
            r = _exact_ints(ranges, cfg, "node_map").reshape(-1, 2)
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
        from ._common import human_bytes, memory_budget
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
                        from .partfile import load_npy
                        orig = _integer_ids(f, load_npy(f, new_part.size, "orig_nids"), "orig_nids", "node id")
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
    """DGL pipeline partition assignment: ``partition_meta.json`` + ``<ntype>.txt``.

    The text is read twice, a block at a time (:func:`_assignment_ids`): once to check every line
    (one integer part id in ``[0, num_parts)``) and count them, then, the count checked against
    ``n`` and the memory budget, into the array. A refusal holds one block, never the file."""
    p = Path(path)
    _refuse_links(p)
    meta = _read_json(p / "partition_meta.json")
    txts = sorted(p.glob("*.txt"))
    if len(txts) != 1:
        raise BackendUnavailableError(f"{p}: expected one <ntype>.txt (homogeneous graph), found {len(txts)}")
    k = meta.get("num_parts")
    if k is not None and (not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= (1 << 24)):
        raise PartitionError(f"{p / 'partition_meta.json'}: field 'num_parts' must be an integer in [1, 2^24], "
                             f"got {str(k)[:40]!r}")
    return _assignment_ids(txts[0], k, n, p / "partition_meta.json")


#: bytes of text parsed at a time by :func:`_assignment_ids` (and the longest line it takes)
_TEXT_BLOCK = 4 << 20


def _text_blocks(path: Path):
    """(first line number, bytes) of ``path`` (plain or gzip, by magic) in blocks of about
    :data:`_TEXT_BLOCK` bytes cut after a newline; a line longer than a block is refused."""
    from ..errors import GraphFormatError
    from ._common import GZIP_ERRORS, open_binary
    try:
        fh = open_binary(path, text=False)
    except GraphFormatError as exc:
        raise PartitionError(str(exc)) from None
    line, carry = 1, b""
    with fh:
        while True:
            try:
                chunk = fh.read(_TEXT_BLOCK)
            except GraphFormatError as exc:
                raise PartitionError(str(exc)) from None
            except GZIP_ERRORS as exc:
                raise PartitionError(f"{path}: cannot be read ({exc})") from None
            if not chunk:
                if carry:
                    yield line, carry
                return
            buf = carry + chunk
            cut = buf.rfind(b"\n") + 1
            if cut == 0:
                if len(buf) > _TEXT_BLOCK:
                    raise PartitionError(f"{path}:line {line}: longer than {_TEXT_BLOCK} bytes (expected one "
                                         f"part id per line)")
                carry = buf
                continue
            block, carry = buf[:cut], buf[cut:]
            yield line, block
            line += block.count(b"\n")


def _block_ids(path: Path, first: int, block: bytes) -> np.ndarray:
    """The part ids of one block of lines (blank and ``#`` / ``%`` lines skipped); one PartitionError
    naming the line otherwise (negative ids included)."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    try:
        table = pcsv.read_csv(pa.BufferReader(block), read_options=pcsv.ReadOptions(column_names=["part"]),
                              parse_options=pcsv.ParseOptions(delimiter=" "),
                              convert_options=pcsv.ConvertOptions(column_types={"part": pa.int64()}))
        col = table.column(0)
        if col.null_count == 0:
            arr = col.to_numpy()
            if not arr.size or arr.min() >= 0:
                return np.ascontiguousarray(arr, dtype=np.int64)
    except (pa.ArrowException, OSError, EOFError):
        pass
    from .partfile import _read_text_slow
    try:
        return _read_text_slow(path, block, first_line=first, allow_empty=True)
    except PartitionError:
        raise


def _assignment_ids(path: Path, k: int | None, n: int | None, meta: Path) -> np.ndarray:
    """The part ids of a DGL assignment text: pass 1 checks every block (ids in ``[0, k)``) and counts
    them in O(block) memory; then the count is checked against ``n`` and 8 × count against the memory
    budget, and pass 2 fills the array (a file that changed between the passes is refused)."""
    from ._common import check_budget
    count = 0
    for first, block in _text_blocks(path):
        ids = _block_ids(path, first, block)
        if k is not None and ids.size and int(ids.max()) >= k:
            bad = int(np.flatnonzero(ids >= k)[0])
            line = first + _line_of(block, bad)
            raise PartitionError(f"{path}:line {line}: part id {int(ids[bad])} >= num_parts = {k} of {meta.name}")
        count += int(ids.size)
        if n is not None and count > n:
            raise PartitionError(f"{path}: has more than {n} part ids but the graph has {n} vertices")
    if count == 0:
        raise PartitionError(f"{path}: empty partition file (no part ids)")
    if n is not None and count != n:
        raise PartitionError(f"{path}: has {count} part ids but the graph has {n} vertices")
    from ..errors import SizeLimitError
    try:
        check_budget(8 * count, path, f"{count} part ids")
    except SizeLimitError as exc:
        raise PartitionError(str(exc)) from None
    part = np.empty(count, dtype=np.int64)
    at = 0
    for first, block in _text_blocks(path):
        ids = _block_ids(path, first, block)
        if at + ids.size > count or (k is not None and ids.size and int(ids.max()) >= k):
            raise PartitionError(f"{path}: changed while it was read")
        part[at:at + ids.size] = ids
        at += ids.size
    if at != count:
        raise PartitionError(f"{path}: changed while it was read")
    return part


def _line_of(block: bytes, index: int) -> int:
    """0-based line (in ``block``) of the ``index``-th part id (blank and comment lines skipped)."""
    seen = -1
    for i, line in enumerate(block.split(b"\n")):
        s = line.strip()
        if s and s[:1] not in (b"#", b"%"):
            seen += 1
            if seen == index:
                return i
    return 0


def declared_parts(path) -> int | None:
    """The part count a partition folder or file declares besides its ids — ``num_parts`` of a PyG
    ``META.json``, a DGL config or a DGL assignment's ``partition_meta.json``, the number of blocks
    of a CAGNET ``.part-sizes`` — or None (a file of ids alone: its largest id + 1 counts). Trailing
    empty parts live only there: a plan exported with an empty last rank keeps its rank count when
    it is read back."""
    p = Path(path)
    if not p.exists():
        return None
    if p.is_dir():
        _refuse_links(p)
    kind = detect_kind(p)
    meta = None
    if kind == "pyg" and p.is_dir() and (p / "META.json").is_file():
        meta = p / "META.json"
    elif kind == "dgl-assignment":
        meta = p / "partition_meta.json"
    elif kind == "dgl":
        if p.is_dir() and (p / "partition_assignment" / "partition_meta.json").is_file() and \
                not list(p.glob("*.json")):
            meta = p / "partition_assignment" / "partition_meta.json"
        else:
            meta = _dgl_config(p)
    elif kind == "cagnet":       # one size per block (checked by read_cagnet_part_sizes)
        return len(_read_bytes(p).decode(errors="replace").split()) or None
    if meta is None:
        return None
    doc = _read_json(meta)
    if isinstance(doc, dict) and "num_parts" not in doc:     # declares none (the ids' largest + 1 counts)
        return None
    k = doc.get("num_parts") if isinstance(doc, dict) else None
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= (1 << 24):
        raise PartitionError(f"{meta}: field 'num_parts' must be an integer in [1, 2^24], got {str(k)[:40]!r}")
    return k


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


def read_partition_any(path, n: int, *, column: str | None = None) -> np.ndarray:
    """The part ids (int64[n]) of a partition file or folder of any kind that
    holds no partplan metadata (see the module doc; saved partplan partitions and
    plan folders are read by :func:`partplan.plan.partitions.read_partition_file`,
    which calls this for everything else): text (METIS ``.part.K``), ``.npy``,
    ``.pt``, Parquet / Arrow / Feather / CSV columns (``column``), a PyG
    ``Partitioner`` folder, a DGL partition folder or config JSON, a DGL
    assignment folder, a CAGNET ``.part-sizes`` file. Ids are not range-checked
    against a part count here. Raises PartitionError naming the file on bad input.
    """
    from .partfile import read_partition

    p = Path(path)
    if not p.exists():
        raise PartitionError(f"{p}: no such partition file or directory")
    if p.is_dir():
        _refuse_links(p)
    if p.is_dir() and (p / "node_map.pt").is_file():  # PyG Partitioner folder
        if (p / "META.json").is_file():
            meta = _read_json(p / "META.json")
            if isinstance(meta, dict) and meta.get("is_hetero"):
                raise PartitionError(f"{p / 'META.json'}: heterogeneous PyG partitions are not supported "
                                     f"(partplan graphs have one node type)")
        return read_partition(p / "node_map.pt", n)
    kind = detect_kind(p)
    if column is not None and (p.is_dir() or kind not in ("file", "pyg")):
        raise PartitionError(f"{p}: --column applies to Parquet/Arrow/CSV partition files only")
    if kind in ("file", "pyg"):  # text, .npy, .pt, tables
        return read_partition(p, n, column=column)
    if kind == "cagnet":
        return read_cagnet_part_sizes(p, n)
    return read_dgl_partition(p, n)  # folders and config JSON (assignment folders too)
