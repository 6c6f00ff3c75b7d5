"""Checking a partition vector ``part[v] in [0, k)`` once, with clear errors."""
from __future__ import annotations

import numpy as np

from ._args import as_numpy, check_int
from .errors import PartitionError


def _array(part, where: str, what: str) -> np.ndarray:
    """``part`` as numpy (:func:`partplan._args.as_numpy`: a torch tensor detached and on the CPU; a
    sparse one or one on the meta device, which holds no values, one PartitionError)."""
    return as_numpy(part, PartitionError, f"{where}{what}: ")


def as_part_ids(part, *, where: str = "", what: str = "partition", offset: int = 0,
                ids: str = "part id") -> np.ndarray:
    """Check that ``part`` is a one-dimensional array of integer part ids >= 0
    (integral floats accepted) and return it as contiguous int64. ``where``
    prefixes messages (e.g. "file.part: "); ``what`` names the array; ``offset``: the vertex
    id of ``part[0]`` (a slice of a longer partition), added to the vertex a message names;
    ``ids``: what the values are, in the messages ("node id" for an id map)."""
    arr = _array(part, where, what)
    if arr.ndim != 1:
        raise PartitionError(f"{where}{what} must be one-dimensional, got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        bad = first_fraction(arr) if np.issubdtype(arr.dtype, np.floating) else None
        if bad is not None and bad >= 0:     # name the vertex: a float array of whole numbers is accepted
            raise PartitionError(f"{where}{what} must hold integer {ids}s: vertex {offset + bad} has "
                                 f"{arr[bad].item()!r}")
        if bad is None:
            raise PartitionError(f"{where}{what} must hold integer {ids}s, got dtype {arr.dtype}")
        _below_int64(arr, where, what, offset)
        arr = arr.astype(np.int64)
    elif arr.size and arr.dtype.kind == "u" and arr.dtype.itemsize >= 8:
        _below_int64(arr, where, what, offset)
    arr = np.ascontiguousarray(arr, dtype=np.int64)
    if arr.size and arr.min() < 0:
        v = int(np.flatnonzero(arr < 0)[0])
        raise PartitionError(f"{where}{what}: vertex {offset + v} has negative {ids} {int(arr[v])}")
    return arr


def first_fraction(arr: np.ndarray) -> int:
    """The index (flat) of the first value of a float array that is no whole number (a fraction,
    NaN, ±inf), -1 when none: what a cast to int64 would cut without a word."""
    bad = ~np.isfinite(arr) | (arr != np.round(arr))
    return int(np.flatnonzero(bad)[0]) if bad.any() else -1


def first_past_int64(arr: np.ndarray) -> int:
    """The index of the first value of a uint64 or float array that a cast to int64 would wrap
    (2^63 and above), -1 when none: ids named as they are instead of as negative ones."""
    top = np.float64(2 ** 63) if arr.dtype.kind == "f" else np.uint64(2 ** 63)
    return int(np.flatnonzero(arr >= top)[0]) if arr.size and arr.max() >= top else -1


def _below_int64(arr: np.ndarray, where: str, what: str, offset: int = 0) -> None:
    v = first_past_int64(arr)
    if v >= 0:
        raise PartitionError(f"{where}{what}: vertex {offset + v} has part id {arr[v].item()}, beyond any part "
                             f"count (2^63 and above)")


def as_partition(part, n: int, k: int | None = None, *, source: str | None = None) -> tuple[np.ndarray, int]:
    """Validate ``part`` for a graph of ``n`` vertices; return (int64 array, k).

    k defaults to ``max(part) + 1``. Raises :class:`PartitionError` naming the
    first bad entry (wrong length, non-integer, negative, >= k) or k > n.
    """
    where = f"{source}: " if source else ""
    if not isinstance(part, np.ndarray) and hasattr(part, "part") and hasattr(part, "k"):
        raise PartitionError(f"{where}a partition result ({type(part).__name__}) where its part ids are asked "
                             f"for: pass its .part (the row blocks of a 1.5D / 2D layout)")
    arr = _array(part, where, "partition")
    if arr.ndim == 1 and arr.size != n:
        raise PartitionError(f"{where}partition has {arr.size} entries but the graph has {n} vertices")
    arr = as_part_ids(arr, where=where, what="partition")
    top = int(arr.max()) + 1 if arr.size else 0
    if k is None:
        if top > n:      # read as largest id + 1 parts: more parts than vertices (or past any count)
            v = int(np.argmax(arr))
            raise PartitionError(f"{where}vertex {v} has part id {int(arr[v])}: the ids give {top:,} parts "
                                 f"(largest id + 1), more than the graph's {n:,} vertices")
        k = max(top, 1)
    k = check_int(f"{where}k", k, lo=1, error=PartitionError)
    if top > k:
        v = int(np.flatnonzero(arr >= k)[0])
        raise PartitionError(f"{where}vertex {v} has part id {int(arr[v])} >= k={k}")
    if k > n:
        raise PartitionError(f"{where}k={k} parts exceed n={n} vertices")
    return arr, k
