"""Some rows of a row-major array stored in a file (a ``.npy``, a stored ``.npz`` member), read or
written a window of rows at a time.

A rank that reads its rows of H through a memory map and fancy indexing touches every page that
holds one of them: with scattered ids, nearly all of the file's pages, and each counts in the
process's resident memory (its peak RSS: 713 MiB to read 83 MiB of rows of a 512 MiB H). Here a
rank reads, per window of WINDOW_BYTES of the file that holds wanted rows, only the bytes from the
first wanted row to the last one (``os.pread``), and writes its rows through a memory map of that
window alone, flushed and unmapped before the next: what it holds is its rows plus one window, and
a window with no wanted row is neither read nor mapped. Concurrent writers of disjoint rows of one
file stay correct (each writes only its rows' bytes; the page cache is shared).
"""
from __future__ import annotations

import os
from typing import Iterator

import numpy as np

WINDOW_BYTES = 8 << 20      # bytes of the file one window spans (at least one row)


def _check_ids(ids, n: int) -> np.ndarray:
    """``ids`` as int64, each in [0, n) (an IndexError naming the first one outside)."""
    ids = np.asarray(ids)
    if ids.size and ids.dtype.kind not in "iu":
        raise TypeError(f"row ids must be integers, got dtype {ids.dtype}")
    ids = ids.astype(np.int64, copy=False).ravel()
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        bad = int(ids[(ids < 0) | (ids >= n)][0])
        raise IndexError(f"row id {bad} out of range [0, {n})")
    return ids


def _windows(ids: np.ndarray, row_bytes: int, window_bytes: int) -> tuple[np.ndarray, np.ndarray, Iterator]:
    """(order, sorted ids, an iterator of (a, b): the wanted rows ``sorted[a:b]`` of one window)."""
    order = np.argsort(ids, kind="stable")
    sw = ids[order]
    step = max(1, window_bytes // max(1, row_bytes))
    block = sw // step
    starts = np.flatnonzero(np.r_[True, block[1:] != block[:-1]]) if sw.size else np.zeros(0, np.int64)
    ends = np.r_[starts[1:], sw.size].astype(np.int64)
    return order, sw, zip(starts.tolist(), ends.tolist())


def read_rows_at(fd: int, offset: int, shape: tuple, dtype, ids, *,
                 window_bytes: int = WINDOW_BYTES) -> np.ndarray:
    """Rows ``ids`` (any order, repeats allowed; IndexError outside [0, shape[0])) of the C-ordered
    array of ``shape`` / ``dtype`` whose data starts at byte ``offset`` of the open file ``fd``.
    Raises EOFError when the file ends before a wanted row."""
    dt = np.dtype(dtype)
    ids = _check_ids(ids, int(shape[0]))
    tail = tuple(int(s) for s in shape[1:])
    row_b = int(dt.itemsize * int(np.prod(tail, dtype=np.int64)))
    out = np.empty((ids.size,) + tail, dtype=dt)
    if row_b == 0 or ids.size == 0:
        return out
    order, sw, wins = _windows(ids, row_b, window_bytes)
    for a, b in wins:
        lo, hi = int(sw[a]), int(sw[b - 1]) + 1
        want = (hi - lo) * row_b
        buf = os.pread(fd, want, offset + lo * row_b)
        if len(buf) != want:
            raise EOFError(f"the file ends before row {hi - 1}")
        blk = np.frombuffer(buf, dtype=dt).reshape((hi - lo,) + tail)
        out[order[a:b]] = blk[sw[a:b] - lo]
    return out


def read_file_rows(path, offset: int, shape: tuple, dtype, ids, *, window_bytes: int = WINDOW_BYTES) -> np.ndarray:
    """:func:`read_rows_at` on the file ``path``, opened for the call (read-only) and closed."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        return read_rows_at(fd, offset, shape, dtype, ids, window_bytes=window_bytes)
    finally:
        os.close(fd)


def write_rows_at(fh, offset: int, shape: tuple, dtype, ids, rows, *, window_bytes: int = WINDOW_BYTES) -> None:
    """Set rows ``ids`` of the C-ordered array of ``shape`` / ``dtype`` at byte ``offset`` of the
    open file ``fh`` (read-write) to ``rows``: a memory map of one window at a time, flushed and
    unmapped before the next (the process holds one window of the file, not the pages of every
    row it wrote)."""
    dt = np.dtype(dtype)
    ids = _check_ids(ids, int(shape[0]))
    rows = np.asarray(rows)
    tail = tuple(int(s) for s in shape[1:])
    if rows.shape != (ids.size,) + tail:
        raise ValueError(f"{ids.size} row ids but rows of shape {rows.shape} (want {(ids.size,) + tail})")
    row_b = int(dt.itemsize * int(np.prod(tail, dtype=np.int64)))
    if row_b == 0 or ids.size == 0:
        return
    order, sw, wins = _windows(ids, row_b, window_bytes)
    for a, b in wins:
        lo, hi = int(sw[a]), int(sw[b - 1]) + 1
        m = np.memmap(fh, dtype=dt, mode="r+", offset=offset + lo * row_b, shape=(hi - lo,) + tail)
        m[sw[a:b] - lo] = rows[order[a:b]]
        m.flush()
        del m
