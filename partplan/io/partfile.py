"""Partition files: read and write ``part[v]`` (the part / rank of each vertex).

Formats, chosen by file name:

- text (anything else, e.g. METIS's ``graph.part.16``, ``.txt``; ``.gz``
  allowed): one integer part id per line, line ``v + 1`` holding vertex ``v``.
  Blank lines and lines starting with ``#`` or ``%`` are skipped.
- ``.npy``: a 1-D integer array (numpy, ``allow_pickle=False``).
- ``.pt``: a 1-D integer tensor (a PyG ``node_map.pt``; ``torch.load`` with
  ``weights_only=True``, never an arbitrary pickle). A (2, E) tensor, an
  ``edge_index`` passed by mistake, is refused ("expected a 1-D node map").
- ``.parquet`` / ``.arrow`` / ``.feather`` / ``.csv``: one column of a table
  (pyarrow); ``column`` names it, else the only column or the column ``part``.

Reading checks the file, not the number of parts: every entry must be a
non-negative integer and there must be exactly ``n`` of them. The file must
be a regular file (checked on the open descriptor before any read: a FIFO
never blocks), and every size it declares is compared with ``n`` before
anything is parsed or decompressed: a ``.npy`` header's shape, a Parquet
footer's row count and uncompressed column size, an Arrow / Feather file's
record-batch lengths and declared decompressed sizes, and the bytes of text
(plain, or gzip decompressed at most :func:`text_limit` bytes). ``k`` is checked
by :func:`partplan.parts.as_partition` (the caller knows it). Text is parsed by
pyarrow's CSV reader (multi-threaded C++); only when that fails is the file
re-read line by line to name the first bad line. Writing is atomic (temporary
file in the same folder, then ``os.replace``).

Examples
--------
>>> import numpy as np, tempfile, os
>>> d = tempfile.mkdtemp()
>>> p = write_partition(np.array([0, 1, 1, 0]), os.path.join(d, "g.part.2"))
>>> read_partition(p, 4).tolist()
[0, 1, 1, 0]
>>> partition_k_from_name(p)
2
"""
from __future__ import annotations

import gzip
import os
import re
import zlib
from pathlib import Path

import numpy as np

from ..errors import PartitionError
from ..parts import as_part_ids, first_fraction
from ._common import gzip_corrupt_line, npy_claim_problem, npy_header, without_bom
from .._args import check_path
from .._atomic import atomic_path

TABLE_SUFFIXES = (".parquet", ".arrow", ".feather", ".csv")
#: the ``schema`` of a partition's JSON sidecar (``PART.json``), written by the single-process and the
#: distributed partitioner alike: /1 stored k = row blocks; /2 stores k = ranks
SIDECAR_SCHEMA = "partplan.partition/2"
_INT64_MAX = (1 << 63) - 1


def _suffixes(path: Path) -> str:
    """Lower-case file suffix without a trailing ``.gz``."""
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    return os.path.splitext(name)[1]


def partition_k_from_name(path: str | os.PathLike) -> int | None:
    """K from a METIS-style name ``<graph>.part.K`` (``None`` if the name has no K)."""
    m = re.search(r"\.part\.(\d+)(?:\.gz)?$", Path(path).name)
    return int(m.group(1)) if m else None



def part_k_name_problem(path: str | os.PathLike, k: int, *, k_is: str = "the partition has") -> str | None:
    """Why ``path`` may not hold a partition of ``k`` parts: a METIS-style ``NAME.part.K`` whose K
    is not ``k`` (None: no K in the name, or the same K). One rule for every writer; ``k_is`` says
    where ``k`` comes from.

    >>> part_k_name_problem("g.part.8", 4)
    'the name says 8 parts (.part.8) but the partition has 4; name it g.part.4'
    """
    named = partition_k_from_name(path)
    if named is None or named == k:
        return None
    name = Path(path).name
    gz = ".gz" if name.lower().endswith(".gz") else ""
    stem = name[:len(name) - len(gz) - len(str(named))]
    return f"the name says {named} parts (.part.{named}) but {k_is} {k}; name it {stem}{k}{gz}"


def check_part_k_name(path: str | os.PathLike, k: int, *, k_is: str = "the partition has") -> None:
    """One :class:`PartitionError` naming ``path`` when :func:`part_k_name_problem` finds one: what
    every partition writer calls before it writes."""
    bad = part_k_name_problem(path, k, k_is=k_is)
    if bad:
        raise PartitionError(f"{path}: {bad}")


def read_partition(path: str | os.PathLike, n: int, *, column: str | None = None) -> np.ndarray:
    """Read a partition file for a graph of ``n`` vertices; returns int64[n].

    A table (Parquet / Arrow / Feather / CSV) gives its ``column`` (default: its only column, or
    ``part``); with a vertex-id column beside it (:data:`ID_COLUMNS`, any case) its rows may come in
    any order, each row's part going to its vertex (the ids: 0 … n−1, each once).

    Raises :class:`PartitionError` naming the file (and the line for text
    files, the column for tables) on: a missing or unreadable file, a token
    that is not an integer, more than one value on a line, a negative part id,
    or a count different from ``n``.
    """
    p = Path(check_path("path", path, error=PartitionError))
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise PartitionError(f"{p}: n (the graph's vertices) must be an integer >= 0, got {n!r}")
    n = int(n)
    with _open(p) as fh:
        suffix = _suffixes(p)
        if suffix == ".npy":
            part = _check_values(p, _load_npy_fh(fh, p, n, "array"), "array")
        elif suffix == ".pt":
            part = _read_pt(p, fh)
        elif suffix in TABLE_SUFFIXES:
            part = _read_table(p, suffix, column, fh, n)
        else:
            if column is not None:
                raise PartitionError(f"{p}: --column applies to table files ({', '.join(TABLE_SUFFIXES)}), "
                                     "not to a one-part-per-line text file")
            part = _read_text(p, fh, n)
    if part.size != n:
        raise PartitionError(f"{p}: has {part.size} part ids but the graph has {n} vertices")
    return part


def _open(p: Path):
    """``p`` opened for reading if it is a regular file (non-blocking open,
    fstat before any read); one PartitionError naming it otherwise."""
    from ._common import open_regular
    fd, _ = open_regular(p, error=lambda problem: PartitionError(
        f"{p}: no such partition file" if problem == "file not found" else f"{p}: {problem}"))
    return os.fdopen(fd, "rb")


def text_limit(n: int) -> int:
    """Most bytes of (decompressed) text a partition file of ``n`` vertices
    may hold: 64 per vertex (a 20-digit id, its newline and room for
    comments) plus 1 MiB."""
    return 64 * (int(n) + 1) + (1 << 20)


def _check_values(p: Path, arr: np.ndarray, what: str) -> np.ndarray:
    return as_part_ids(arr, where=f"{p}: ", what=what)


def load_npy(p: Path, n: int | None = None, what: str = "array") -> np.ndarray:
    """A ``.npy`` file, its header checked first (numpy allocates the shape a
    header claims): a regular file, 1-D, numeric, no bigger than the file,
    and ``n`` long when given. Any problem -> PartitionError naming the file."""
    with _open(Path(p)) as fh:
        return _load_npy_fh(fh, Path(p), n, what)


def _load_npy_fh(fh, p: Path, n: int | None, what: str) -> np.ndarray:
    try:
        shape, dtype, header_len = npy_header(fh)
        size = os.fstat(fh.fileno()).st_size
    except (ValueError, OSError, EOFError, SyntaxError) as exc:
        raise PartitionError(f"{p}: not a readable .npy array ({exc})") from None
    problem = npy_claim_problem(shape, dtype, size - header_len)
    if problem:
        raise PartitionError(f"{p}: {what} {problem}")
    if len(shape) != 1:
        raise PartitionError(f"{p}: {what} must be one-dimensional, got shape {tuple(shape)}")
    if n is not None and shape[0] != n:
        ids = "part ids" if what == "array" else f"entries in {what}"
        raise PartitionError(f"{p}: has {shape[0]} {ids} but the graph has {n} vertices")
    try:
        fh.seek(0)
        return np.load(fh, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise PartitionError(f"{p}: not a readable .npy array ({exc})") from None


def load_torch_tensors(fh, p: Path):
    """``torch.load(fh, weights_only=True)`` on the CPU, torch's warnings silenced (its notes on the
    pickle protocol are no line of ours); a failure is one PartitionError naming ``p``
    (:func:`torch_load_problem`). Python objects beyond tensors are never loaded."""
    import warnings

    import torch
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.load(fh, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises pickle, zip and runtime errors alike
        raise PartitionError(f"{p}: {torch_load_problem(exc)}") from None


def torch_load_problem(exc: Exception) -> str:
    """What a failed ``torch.load(..., weights_only=True)`` says, in one line of partplan's: Python
    objects beyond tensors (a pickle, never loaded), or the file not a torch file — without torch's
    advice to load it with ``weights_only=False``."""
    text = str(exc)
    if "Unsupported global" in text or "GLOBAL" in text:
        return ("holds Python objects beyond tensors, which partplan does not load (a node map is a 1-D "
                "integer tensor saved with torch.save)")
    detail = text.split("WeightsUnpickler error:", 1)[1] if "WeightsUnpickler error:" in text else text
    first = next((ln.strip() for ln in detail.splitlines() if ln.strip()), type(exc).__name__)[:200]
    return f"not a readable torch tensor file ({first})"


def torch_tensor_in(obj):
    """What a ``.pt`` id map holds: the object, or the one value of a one-entry dict."""
    return next(iter(obj.values())) if isinstance(obj, dict) and len(obj) == 1 else obj


def describe_loaded(obj) -> str:
    """What ``torch.load`` gave, in a message: a dict by its size and first keys, else its type."""
    if isinstance(obj, dict):
        keys = ", ".join(repr(k)[:20] for k in list(obj)[:3]) + (", ..." if len(obj) > 3 else "")
        inner = "" if len(obj) != 1 else f" holding a {type(next(iter(obj.values()))).__name__}"
        return f"a dict of {len(obj)} entr{'y' if len(obj) == 1 else 'ies'} ({keys}){inner}"
    return f"a {type(obj).__name__}"


def _read_pt(p: Path, fh) -> np.ndarray:
    """A ``.pt`` node map: a 1-D integer tensor (or a one-entry dict of one),
    loaded with ``weights_only=True`` from the open file ``fh``."""
    try:
        import torch
    except ImportError:
        raise PartitionError(f"{p}: reading a .pt partition needs torch (pip install torch)") from None
    obj = load_torch_tensors(fh, p)
    if not isinstance(torch_tensor_in(obj), torch.Tensor):
        raise PartitionError(f"{p}: expected a 1-D node map tensor (or a one-entry dict of one), got "
                             f"{describe_loaded(obj)}")
    obj = torch_tensor_in(obj)
    if obj.layout != torch.strided:
        raise PartitionError(f"{p}: the node map is a sparse tensor ({obj.layout}); save a dense 1-D tensor")
    if obj.dim() != 1:
        raise PartitionError(f"{p}: expected a 1-D node map, got shape {tuple(obj.shape)}"
                             + (" (an edge_index?)" if obj.dim() == 2 and obj.shape[0] == 2 else ""))
    if obj.is_complex() or obj.dtype == torch.bool:
        raise PartitionError(f"{p}: node map must hold integer part ids, got {obj.dtype}")
    arr = obj.detach().cpu().to(torch.float64 if obj.is_floating_point() else torch.int64).numpy()
    return _check_values(p, arr, "node map")


def _read_table(p: Path, suffix: str, column: str | None, fh, n: int) -> np.ndarray:
    """One column of a Parquet / Arrow / Feather / CSV table in ``fh``; the
    sizes the file declares (rows, uncompressed bytes) are compared with
    ``n`` before any data is read or decompressed."""
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    from .parquetcheck import ParquetProblem, declared_bytes
    limit = text_limit(n)
    try:
        if suffix == ".parquet":
            pf = pq.ParquetFile(fh)
            names = pf.schema_arrow.names
            column = _pick_column(p, names, column)
            md = pf.metadata
            if md.num_rows != n:
                raise PartitionError(f"{p}: has {md.num_rows} part ids (its footer's num_rows) but the graph has "
                                     f"{n} vertices")
            wanted = [column] + [c for c in [_id_column(names, column)] if c is not None]
            try:
                footer, pages = declared_bytes(fh.fileno(), md, wanted)
            except ParquetProblem as exc:
                raise PartitionError(f"{p}: {exc}") from None
            for raw, where in ((footer, "its footer"), (pages, "its page headers")):
                if raw > limit * len(wanted):
                    said = (f"column {column!r} declares" if len(wanted) == 1 else
                            f"columns {', '.join(map(repr, wanted))} declare")
                    raise PartitionError(f"{p}: {said} {raw} uncompressed bytes in {where}, more than {n} part ids "
                                         f"need (at most {limit * len(wanted)})")
            table = pf.read(columns=wanted)
        elif suffix == ".csv":
            text = _bounded_text(p, fh, n)
            table = pcsv.read_csv(pa.BufferReader(text))
            if (column is None and table.num_rows + 1 == n and len(table.column_names) == 1
                    and re.fullmatch(r"\s*[+-]?\d+\s*", table.column_names[0])):
                # one line short, and its "header" an id: a file without a header (pandas' to_csv writes
                # the header "0" over n rows: that one keeps its header)
                table = pcsv.read_csv(pa.BufferReader(text), read_options=pcsv.ReadOptions(column_names=["part"]))
        else:
            table = _read_ipc(p, fh, n, feather)
        names = table.column_names      # (a binary file read as CSV: its "header" is not UTF-8)
    except PartitionError:
        raise
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        raise PartitionError(f"{p}: not a readable {suffix[1:]} table ({exc})") from exc
    column = _pick_column(p, names, column)
    part = _check_values(p, _numeric_column(p, table, column, "part ids"), f"column {column!r}")
    idcol = _id_column(names, column)
    if idcol is None or part.size != n:      # (a count other than n: the caller's one error)
        return part
    # a vertex-id column beside it (PyG / DGL / pandas tables: "vertex,part" in any row order): each
    # row's part goes to its vertex; the ids must be 0 .. n-1, each once
    raw = _numeric_column(p, table, idcol, "vertex ids")
    bad = first_fraction(raw) if raw.dtype.kind == "f" else -1
    out_of_range = (raw < 0) | (raw >= n)
    if bad < 0 and out_of_range.any():
        bad = int(np.flatnonzero(out_of_range)[0])
    if bad >= 0:
        raise PartitionError(f"{p}: column {idcol!r} row {bad} is vertex {raw[bad].item()!r}; the graph's vertices "
                             f"are 0 .. {n - 1}")
    ids = raw.astype(np.int64)
    seen = np.bincount(ids, minlength=n)
    if (seen != 1).any():
        v = int(np.flatnonzero(seen != 1)[0])
        said = "has no row for" if seen[v] == 0 else f"has {int(seen[v])} rows for"
        raise PartitionError(f"{p}: column {idcol!r} {said} vertex {v}; each of the {n} vertices must have one row")
    out = np.empty(n, dtype=np.int64)
    out[ids] = part
    return out


# a table's column of vertex ids, matched without case: its rows may come in any order
ID_COLUMNS = ("vertex", "vertex_id", "node", "node_id", "id", "v")


def _id_column(names: list, column: str) -> str | None:
    """The table's vertex-id column (:data:`ID_COLUMNS`, first match; never the part column), or None."""
    lower = {str(c).lower(): c for c in names if c != column}
    return next((lower[c] for c in ID_COLUMNS if c in lower), None)


def _numeric_column(p: Path, table, name: str, what: str) -> np.ndarray:
    """Column ``name`` of ``table`` as a numpy array: no nulls, an integer or floating type."""
    import pyarrow as pa
    col = table.column(name)
    if col.null_count:
        v = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
        raise PartitionError(f"{p}: column {name!r} row {v} is null")
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        raise PartitionError(f"{p}: column {name!r} must hold integer {what}, got {col.type}")
    return col.to_numpy()


def _pick_column(p: Path, names: list, column: str | None) -> str:
    if column is None:
        if len(names) == 1:
            return names[0]
        if "part" in names:
            return "part"
        raise PartitionError(f"{p}: has columns {names}; name the partition column (--column)")
    if column not in names:
        raise PartitionError(f"{p}: no column {column!r} (columns: {names})")
    return column


def _read_ipc(p: Path, fh, n: int, feather):
    """An Arrow IPC (Feather v2) file: its record batches' lengths and
    declared decompressed sizes checked against ``n`` first
    (:func:`partplan.io.arrowcheck.ipc_batches`), then read and validated."""
    import mmap

    import pyarrow as pa
    from pyarrow import ipc

    from .arrowcheck import IpcProblem, ipc_batches
    size = os.fstat(fh.fileno()).st_size
    if size == 0:
        raise PartitionError(f"{p}: empty file")
    mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        batches = ipc_batches(mm)
    except IpcProblem as exc:
        if bytes(mm[:6]) == b"FEA1":   # Feather v1: uncompressed columns, no larger than the file
            if size > 16 * (n + 1) + (1 << 20):
                raise PartitionError(f"{p}: {size} bytes, more than {n} part ids need") from None
            return feather.read_table(pa.py_buffer(mm))
        raise PartitionError(f"{p}: not a readable Arrow file ({exc})") from None
    rows = sum(b.rows for b in batches)
    if rows != n:
        hint = (f"; it is a plan's own partition file: give the plan folder {str(p.parent)!r} instead"
                if (p.parent / "manifest.json").is_file() else "")
        raise PartitionError(f"{p}: has {rows} part ids (its record batches' lengths) but the graph has "
                             f"{n} vertices{hint}")
    raw = sum(b.decompressed_bytes for b in batches)
    if raw > 16 * (n + 1) * max(1, len(ipc.open_file(pa.py_buffer(mm)).schema)) + (1 << 20):
        raise PartitionError(f"{p}: its record batches declare {raw} bytes, more than {n} part ids need")
    table = ipc.open_file(pa.py_buffer(mm)).read_all()
    table.validate(full=True)
    return table


def _bounded_text(p: Path, fh, n: int) -> bytes:
    """The (decompressed) text of ``fh``, at most :func:`text_limit` bytes:
    a plain file's size is compared with it before reading, a gzip stream is
    decompressed no further than it."""
    limit = text_limit(n)
    head = os.pread(fh.fileno(), 2, 0)
    if head != b"\x1f\x8b":
        size = os.fstat(fh.fileno()).st_size
        if size > limit:
            raise PartitionError(f"{p}: {size} bytes of text, more than a partition of {n} vertices needs "
                                 f"(at most {limit})")
        return fh.read()
    gz = gzip.GzipFile(fileobj=fh, mode="rb")
    parts, got = [], 0
    try:
        while got <= limit:   # in 4 MiB pieces: a read of n bytes would allocate n up front
            piece = gz.read(min(4 << 20, limit + 1 - got))
            if not piece:
                break
            parts.append(piece)
            got += len(piece)
        raw = b"".join(parts)
    except (OSError, EOFError, zlib.error) as exc:
        at = gzip_corrupt_line(p)
        where = (f"line {at}: corrupt or truncated compressed file ({exc}); the data stops decompressing on "
                 "this line" if at is not None else f"corrupt or truncated compressed file ({exc})")
        raise PartitionError(f"{p}:{where}") from None
    if len(raw) > limit:
        raise PartitionError(f"{p}: decompresses to more than {limit} bytes, more than a partition of {n} "
                             f"vertices needs (stopped there)")
    return raw


def _read_text(p: Path, fh, n: int) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    raw = _bounded_text(p, fh, n)
    raw = without_bom(raw)
    if re.search(rb"[xX_]", raw):   # 0x2, 1_0: spellings pyarrow or int() would take; the slow path names them
        return _read_text_slow(p, raw)
    # fast path: pyarrow's C++ CSV reader, one int64 column, blank lines skipped
    try:
        table = pcsv.read_csv(
            pa.BufferReader(raw),
            read_options=pcsv.ReadOptions(column_names=["part"]),
            parse_options=pcsv.ParseOptions(delimiter=" "),
            convert_options=pcsv.ConvertOptions(column_types={"part": pa.int64()}))
        arr = table.column(0).to_numpy()
        if table.column(0).null_count == 0:
            if arr.size and arr.min() < 0:
                pass  # slow path names the line (blank lines shift line numbers)
            else:
                return np.ascontiguousarray(arr, dtype=np.int64)
    except (pa.ArrowException, OSError, EOFError):
        pass
    return _read_text_slow(p, raw)


def _read_text_slow(p: Path, raw: bytes, *, first_line: int = 1, allow_empty: bool = False) -> np.ndarray:
    """Line-by-line parse that names the first bad line (only on odd input); ``raw`` starts at line
    ``first_line`` of the file (a block of it), ``allow_empty``: a block of no ids is no error."""
    out = []
    for lineno, line in enumerate(raw.split(b"\n"), first_line):
        s = line.strip()
        if not s or s[:1] in (b"#", b"%"):
            continue
        fields = s.split()
        if len(fields) != 1:
            raise PartitionError(f"{p}:line {lineno}: expected one part id per line, "
                                 f"got {len(fields)} fields: {s[:40].decode(errors='replace')!r}")
        try:
            if not re.fullmatch(rb"[+-]?\d+", fields[0]):
                raise ValueError(fields[0])
            v = int(fields[0])
        except ValueError:
            raise PartitionError(f"{p}:line {lineno}: part id "
                                 f"{fields[0][:40].decode(errors='replace')!r} is not an integer") from None
        if v < 0:
            raise PartitionError(f"{p}:line {lineno}: negative part id {v}")
        if v > _INT64_MAX:
            raise PartitionError(f"{p}:line {lineno}: part id {v} does not fit in 64 bits")
        out.append(v)
    if not out and not allow_empty:
        raise PartitionError(f"{p}: empty partition file (no part ids)")
    return np.asarray(out, dtype=np.int64)


def write_partition(part, path: str | os.PathLike) -> Path:
    """Write ``part`` atomically; format from the name (see module doc).

    Text: one id per line (``.gz`` compressed when the name ends in ``.gz``);
    ``.npy``: int64 array; ``.parquet``/``.arrow``/``.feather``/``.csv``: one
    int64 column ``part``. Returns the path written.
    """
    from .outpath import OutputPathError
    p = Path(check_path("path", path))
    if p.is_dir():          # checked before writing (a missing parent folder is created, as before)
        raise OutputPathError(f"{p}: is a directory; expected a file name")
    arr = _partition_array(part, p)
    with atomic_path(p) as tmp:
        write_partition_to(arr, p, tmp)
    return p


def _partition_array(part, p: Path) -> np.ndarray:
    arr = np.asarray(part)
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise PartitionError(f"{p}: a partition must be a 1-D integer array, got {arr.dtype} {arr.shape}")
    if arr.size and arr.min() < 0:      # the writer never writes what the reader refuses
        i = int(np.argmax(arr < 0))
        raise PartitionError(f"{p}: part id {int(arr[i])} at vertex {i} is negative")
    return arr.astype(np.int64, copy=False)


#: the column of a table output holding each row's id in the graph file it was read from, where the
#: reader relabelled the file's ids to rows 0..n-1 (``graph.ids``); readers of partitions ignore it
FILE_ID_COLUMN = "file_id"


def write_partition_to(part, path: str | os.PathLike, tmp: str | os.PathLike, *, ids=None) -> None:
    """Write ``part`` into the temporary ``tmp`` in the format ``path``'s name selects (see
    :func:`write_partition`); the caller replaces ``path`` with it (several outputs committed
    together, :func:`partplan.partition.api.save_partition`). ``ids`` (int64[n] or None): the
    graph file's id of every row (``graph.ids``), written beside the parts as the column
    :data:`FILE_ID_COLUMN` of a table output (other formats hold the parts alone)."""
    p = Path(path)
    arr = _partition_array(part, p)
    suffix = _suffixes(p)
    if suffix in TABLE_SUFFIXES:
        import pyarrow as pa

        from .table import write_table_to
        cols = {"part": arr}
        if ids is not None:
            cols[FILE_ID_COLUMN] = np.asarray(ids, np.int64)
        with open(tmp, "wb") as fh:
            write_table_to(pa.table(cols), fh, suffix[1:])
    elif suffix == ".npy":
        with open(tmp, "wb") as fh:
            np.save(fh, arr, allow_pickle=False)
    else:
        text = ("\n".join(arr.astype(str).tolist()) + "\n").encode() if arr.size else b""
        with open(tmp, "wb") as raw:
            if p.name.lower().endswith(".gz"):
                # mtime 0 and no file name (the temporary one would be stored): the same partition
                # gives the same bytes
                with gzip.GzipFile(filename="", fileobj=raw, mode="wb", compresslevel=6, mtime=0) as gz:
                    gz.write(text)
            else:
                raw.write(text)
