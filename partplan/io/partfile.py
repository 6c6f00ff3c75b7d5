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
non-negative integer and there must be exactly ``n`` of them. ``k`` is checked
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
from ..parts import as_part_ids
from ._common import gzip_corrupt_line, npy_claim_problem, npy_header
from .._atomic import atomic_path

TABLE_SUFFIXES = (".parquet", ".arrow", ".feather", ".csv")
_INT64_MAX = (1 << 63) - 1


def _suffixes(path: Path) -> str:
    """Lower-case file suffix without a trailing ``.gz``."""
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    return os.path.splitext(name)[1]


def partition_k_from_name(path: str | os.PathLike) -> int | None:
    """K from a METIS-style name ``<graph>.part.K`` (``None`` if the name has no K)."""
    m = re.search(r"\.part\.(\d+)$", Path(path).name)
    return int(m.group(1)) if m else None


def read_partition(path: str | os.PathLike, n: int, *, column: str | None = None) -> np.ndarray:
    """Read a partition file for a graph of ``n`` vertices; returns int64[n].

    Raises :class:`PartitionError` naming the file (and the line for text
    files, the column for tables) on: a missing or unreadable file, a token
    that is not an integer, more than one value on a line, a negative part id,
    or a count different from ``n``.
    """
    p = Path(path)
    if not p.is_file():
        raise PartitionError(f"{p}: no such partition file")
    suffix = _suffixes(p)
    if suffix == ".npy":
        part = _read_npy(p, n)
    elif suffix == ".pt":
        part = _read_pt(p)
    elif suffix in TABLE_SUFFIXES:
        part = _read_table(p, suffix, column)
    else:
        if column is not None:
            raise PartitionError(f"{p}: --column applies to table files ({', '.join(TABLE_SUFFIXES)}), "
                                 "not to a one-part-per-line text file")
        part = _read_text(p)
    if part.size != n:
        raise PartitionError(f"{p}: has {part.size} part ids but the graph has {n} vertices")
    return part


def _check_values(p: Path, arr: np.ndarray, what: str) -> np.ndarray:
    return as_part_ids(arr, where=f"{p}: ", what=what)


def load_npy(p: Path, n: int | None = None, what: str = "array") -> np.ndarray:
    """A ``.npy`` file, its header checked first (numpy allocates the shape a
    header claims): 1-D, numeric, no bigger than the file, and ``n`` long
    when given. Any problem -> PartitionError naming the file."""
    try:
        with open(p, "rb") as fh:
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
        return np.load(p, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise PartitionError(f"{p}: not a readable .npy array ({exc})") from None


def _read_npy(p: Path, n: int | None = None) -> np.ndarray:
    return _check_values(p, load_npy(p, n), "array")


def _read_pt(p: Path) -> np.ndarray:
    """A ``.pt`` node map: a 1-D integer tensor (or a one-entry dict of one),
    loaded with ``weights_only=True``."""
    try:
        import torch
    except ImportError:
        raise PartitionError(f"{p}: reading a .pt partition needs torch (pip install torch)") from None
    try:
        obj = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises pickle, zip and runtime errors alike
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise PartitionError(f"{p}: not a readable torch tensor file ({first})") from None
    if isinstance(obj, dict) and len(obj) == 1:
        obj = next(iter(obj.values()))
    if not isinstance(obj, torch.Tensor):
        raise PartitionError(f"{p}: expected a 1-D node map tensor, got a {type(obj).__name__}")
    if obj.dim() != 1:
        raise PartitionError(f"{p}: expected a 1-D node map, got shape {tuple(obj.shape)}"
                             + (" (an edge_index?)" if obj.dim() == 2 and obj.shape[0] == 2 else ""))
    if obj.is_complex() or obj.dtype == torch.bool:
        raise PartitionError(f"{p}: node map must hold integer part ids, got {obj.dtype}")
    arr = obj.detach().cpu().to(torch.float64 if obj.is_floating_point() else torch.int64).numpy()
    return _check_values(p, arr, "node map")


def _read_table(p: Path, suffix: str, column: str | None) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    try:
        if suffix == ".parquet":
            table = pq.read_table(p)
        elif suffix == ".csv":
            table = pcsv.read_csv(pa.input_stream(str(p), compression="detect"))
        else:
            table = feather.read_table(p)
        names = table.column_names      # (a binary file read as CSV: its "header" is not UTF-8)
    except (pa.ArrowException, OSError, UnicodeDecodeError) as exc:
        raise PartitionError(f"{p}: not a readable {suffix[1:]} table ({exc})") from exc
    if column is None:
        if len(names) == 1:
            column = names[0]
        elif "part" in names:
            column = "part"
        else:
            raise PartitionError(f"{p}: has columns {names}; name the partition column (--column)")
    if column not in names:
        raise PartitionError(f"{p}: no column {column!r} (columns: {names})")
    col = table.column(column)
    if col.null_count:
        v = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
        raise PartitionError(f"{p}: column {column!r} row {v} is null")
    if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type)):
        raise PartitionError(f"{p}: column {column!r} must hold integer part ids, got {col.type}")
    return _check_values(p, col.to_numpy(), f"column {column!r}")


def _open_text(p: Path):
    return gzip.open(p, "rb") if p.name.lower().endswith(".gz") else open(p, "rb")


def _read_text(p: Path) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    # fast path: pyarrow's C++ CSV reader, one int64 column, blank lines skipped
    try:
        table = pcsv.read_csv(
            pa.input_stream(str(p), compression="detect"),
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
    return _read_text_slow(p)


def _read_text_slow(p: Path) -> np.ndarray:
    """Line-by-line parse that names the first bad line (only on odd input)."""
    out = []
    lineno = 0
    try:
        with _open_text(p) as fh:
            for lineno, raw in enumerate(fh, 1):
                s = raw.strip()
                if not s or s[:1] in (b"#", b"%"):
                    continue
                fields = s.split()
                if len(fields) != 1:
                    raise PartitionError(f"{p}:line {lineno}: expected one part id per line, "
                                         f"got {len(fields)} fields: {s[:40].decode(errors='replace')!r}")
                try:
                    v = int(fields[0])
                except ValueError:
                    raise PartitionError(f"{p}:line {lineno}: part id "
                                         f"{fields[0][:40].decode(errors='replace')!r} is not an integer") from None
                if v < 0:
                    raise PartitionError(f"{p}:line {lineno}: negative part id {v}")
                if v > _INT64_MAX:
                    raise PartitionError(f"{p}:line {lineno}: part id {v} does not fit in 64 bits")
                out.append(v)
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:  # zlib.error: corrupt deflate data
        at = gzip_corrupt_line(p) if p.name.lower().endswith(".gz") else None
        where = (f"line {at}: corrupt or truncated compressed file ({exc}); the data stops decompressing on "
                 "this line" if at is not None else
                 f"line {lineno + 1}: corrupt or truncated compressed file ({exc}) in the data from this line on")
        raise PartitionError(f"{p}:{where}") from None
    if not out:
        raise PartitionError(f"{p}: empty partition file (no part ids)")
    return np.asarray(out, dtype=np.int64)


def write_partition(part, path: str | os.PathLike) -> Path:
    """Write ``part`` atomically; format from the name (see module doc).

    Text: one id per line (``.gz`` compressed when the name ends in ``.gz``);
    ``.npy``: int64 array; ``.parquet``/``.arrow``/``.feather``/``.csv``: one
    int64 column ``part``. Returns the path written.
    """
    p = Path(path)
    arr = np.asarray(part)
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise PartitionError(f"{p}: a partition must be a 1-D integer array, got {arr.dtype} {arr.shape}")
    arr = arr.astype(np.int64, copy=False)
    suffix = _suffixes(p)
    if suffix in TABLE_SUFFIXES:
        import pyarrow as pa

        from .table import write_arrow_table
        return write_arrow_table(pa.table({"part": arr}), p, suffix[1:])
    with atomic_path(p) as tmp:
        if suffix == ".npy":
            with open(tmp, "wb") as fh:
                np.save(fh, arr, allow_pickle=False)
        else:
            text = ("\n".join(arr.astype(str).tolist()) + "\n").encode() if arr.size else b""
            opener = gzip.open if p.name.lower().endswith(".gz") else open
            with opener(tmp, "wb") as fh:
                fh.write(text)
    return p
