"""Some rows of a stored array, a window at a time (partplan._rowio): the same rows as numpy's
fancy indexing, only the windows that hold wanted rows read, and a rank's data budget counted on
the rows it keeps (found by a memory audit: every rank read the whole feature file, twice, and
under torchrun a rank refused features its machine's ranks together could hold)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from partplan._rowio import read_rows_at, write_rows_at
from partplan.nn.data import DataError, check_data, read_rows, write_data


def _npy(tmp_path: Path, a: np.ndarray) -> tuple[Path, int]:
    p = tmp_path / "a.npy"
    np.save(p, a)
    return p, int(np.load(p, mmap_mode="r").offset)


@pytest.mark.parametrize("window", [1, 300, 4096, 1 << 20])
def test_read_rows_equals_fancy_indexing(tmp_path, window):
    rng = np.random.default_rng(window)
    a = rng.standard_normal((997, 5)).astype(np.float32)
    p, off = _npy(tmp_path, a)
    fd = os.open(p, os.O_RDONLY)
    try:
        for ids in (rng.integers(0, 997, 300), np.arange(997)[::-1], np.array([5, 5, 996, 0, 5]), np.zeros(0, int)):
            assert np.array_equal(read_rows_at(fd, off, a.shape, a.dtype, ids, window_bytes=window), a[ids])
    finally:
        os.close(fd)


def test_a_truncated_file_is_an_eof(tmp_path):
    a = np.ones((100, 4))
    p, off = _npy(tmp_path, a)
    with open(p, "r+b") as fh:
        fh.truncate(off + 50 * 32)
    fd = os.open(p, os.O_RDONLY)
    try:
        assert read_rows_at(fd, off, a.shape, a.dtype, np.arange(10)).shape == (10, 4)
        with pytest.raises(EOFError):
            read_rows_at(fd, off, a.shape, a.dtype, np.array([3, 70]))
    finally:
        os.close(fd)


def test_writers_of_disjoint_rows_make_the_whole_array(tmp_path):
    rng = np.random.default_rng(1)
    want = rng.standard_normal((1000, 3))
    p, off = _npy(tmp_path, np.zeros_like(want))
    owner = rng.integers(0, 3, 1000)
    for r in range(3):                  # three "ranks", each its scattered rows, small windows
        ids = rng.permutation(np.flatnonzero(owner == r))
        with open(p, "r+b") as fh:
            write_rows_at(fh, off, want.shape, want.dtype, ids, want[ids], window_bytes=512)
    assert np.array_equal(np.load(p), want)


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="reads counted by Linux's /proc/self/io")
def test_a_rank_reads_the_windows_of_its_rows_only(tmp_path):
    def rchar() -> int:
        return int(next(ln.split()[1] for ln in Path("/proc/self/io").read_text().splitlines()
                        if ln.startswith("rchar")))

    n, f = 40_000, 64                      # x: 10 MiB of float32
    x = np.arange(n * f, dtype=np.float32).reshape(n, f)
    y = np.arange(n) % 3
    m = np.arange(n)
    path = write_data(tmp_path / "d.npz", x, y, m < 10, (m >= 10) & (m < 20), m >= 20)
    ids = np.arange(1000, 1300)           # 300 contiguous rows: 75 KiB of x
    read_rows(path, ids[:1])               # the modules it imports once per process (numba's: 5 MB) read first
    before = rchar()
    got = read_rows(path, ids)
    read = rchar() - before
    assert np.array_equal(got["x"], x[ids]) and np.array_equal(got["y"], y[ids])
    assert read < 2 * 300 * f * 4 + (1 << 20), read      # was the whole member twice (20 MiB)


def test_data_budget_counts_the_rows_a_process_keeps(tmp_path, monkeypatch):
    n, f = 4000, 256                       # x: 4 MiB of float32
    m = np.arange(n)
    path = write_data(tmp_path / "d.npz", np.ones((n, f), np.float32), m % 2, m < 10, (m >= 10) & (m < 20), m >= 20)
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", str(6 << 20))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")            # 1.5 MiB per rank on this machine
    monkeypatch.setenv("WORLD_SIZE", "8")                  # a rank keeps about 1/8 of x: 0.5 MiB
    assert check_data(path, n).n == n
    monkeypatch.setenv("WORLD_SIZE", "4")                  # one machine: a quarter each, 1 MiB
    assert check_data(path, n).n == n
    monkeypatch.setenv("WORLD_SIZE", "1")                  # all of x in one of 4 local ranks: refused
    with pytest.raises(DataError, match="data budget"):
        check_data(path, n)
    assert check_data(path, n, keep_rows=1000).n == n      # a caller that keeps one share at a time
    with pytest.raises(DataError, match="data budget"):
        read_rows(path, np.arange(2000))                   # a read checks its own rows exactly


def test_scattered_rows_and_bad_arguments(tmp_path):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((5000, 7))
    p, off = _npy(tmp_path, a)
    fd = os.open(p, os.O_RDONLY)
    try:
        ids = rng.permutation(5000)[:1700]
        assert np.array_equal(read_rows_at(fd, off, a.shape, a.dtype, ids, window_bytes=2048), a[ids])
        for bad in ([5000], [-1]):
            with pytest.raises(IndexError, match="out of range"):
                read_rows_at(fd, off, a.shape, a.dtype, np.array(bad))
    finally:
        os.close(fd)
    with open(p, "r+b") as fh:
        with pytest.raises(ValueError, match="2 row ids but rows of shape"):
            write_rows_at(fh, off, a.shape, a.dtype, np.array([1, 2]), np.zeros((5, 7)))
        with pytest.raises(IndexError):
            write_rows_at(fh, off, a.shape, a.dtype, np.array([-1]), np.zeros((1, 7)))
    assert np.array_equal(np.load(p), a)


def test_pyg_export_counts_one_part_against_the_budget(tmp_path, monkeypatch):
    """export --to pyg with node data reads one part at a time: a budget that holds a part but not
    all of x is enough (it counted all of x)."""
    from partplan import Graph
    from partplan.interop.export import export_plan
    from partplan.plan import build_plan, write_plan

    n, f = 4000, 256
    g = Graph.from_edges(np.arange(n - 1), np.arange(1, n), symmetrize=True)
    m = np.arange(n)
    data = write_data(tmp_path / "d.npz", np.ones((n, f), np.float32), m % 2, m < 10, (m >= 10) & (m < 20), m >= 20)
    plan = write_plan(build_plan(g, m * 4 // n), tmp_path / "g.plan", created=False)
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", str(3 << 20))       # x: 3.9 MiB, a part: 1 MiB
    export_plan(plan, "pyg", tmp_path / "out", data=data)
    import torch
    feats = torch.load(tmp_path / "out" / "part_0" / "node_feats.pt")
    assert tuple(feats["feats"]["x"].shape) == (1000, f) and feats["global_id"].tolist() == list(range(1000))


def test_a_damaged_compressed_member_is_one_error(tmp_path):
    """A flipped byte inside a compressed (np.savez_compressed) member: zipfile's BadZipFile at the
    end of the stream was a traceback; it is the DataError a stored member's CRC gives."""
    import struct
    import zipfile

    n = 20000
    m = np.arange(n)
    p = tmp_path / "d.npz"
    np.savez_compressed(p, x=np.random.default_rng(0).standard_normal((n, 16)), y=m % 2, train_mask=m < 10,
                        val_mask=(m >= 10) & (m < 20), test_mask=m >= 20)
    assert check_data(p, n).n == n
    raw = bytearray(p.read_bytes())
    zi = zipfile.ZipFile(p).getinfo("x.npy")
    nl, el = struct.unpack("<HH", raw[zi.header_offset + 26:zi.header_offset + 30])
    raw[zi.header_offset + 30 + nl + el + zi.compress_size // 2] ^= 0x40
    p.write_bytes(bytes(raw))
    with pytest.raises(DataError, match="field 'x'.*corrupt zip member"):
        check_data(p, n)


def test_wide_rows_of_a_compressed_member_are_checked_a_few_at_a_time(tmp_path):
    """The value check inflated 65,536 rows at a time whatever their width: 36 rows of 16 M floats
    in a 2 MB file were one 2.1 GiB read. Rows are read a few MiB at a time (one row at least)."""
    import tracemalloc
    n, f = 6, 3_000_000                                 # 12 MB per row, 72 MB in all
    m = np.arange(n)
    p = tmp_path / "wide.npz"
    np.savez_compressed(p, x=np.zeros((n, f), np.float32), y=m % 2, train_mask=m < 2, val_mask=m == 2,
                        test_mask=m > 2)
    tracemalloc.start()
    try:
        assert check_data(p, n).f == f
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 100 << 20, peak                       # a few rows, not the 72 MB member (and its copy)


def test_a_peer_failing_before_the_output_is_named_leaves_no_temporary(tmp_path):
    """rank 0 reserves the output's temporary, then the all-reduce that names it to the others fails
    (a peer died reading its input): the temporary is removed (a 48 MB one stayed, found under
    torchrun)."""
    from partplan.runtime.launch import SharedOutput

    class DeadPeer:
        world = 2

        def allreduce_world(self, arrays, op):
            raise RuntimeError("Connection closed by peer")

    from partplan import _atomic

    with pytest.raises(RuntimeError, match="closed by peer"):
        SharedOutput.create(DeadPeer(), 0, tmp_path / "Z.npy", np.float64, (100, 3))
    assert list(tmp_path.iterdir()) == []
    assert not [k for k in _atomic._HELD if str(k).startswith(str(tmp_path))]   # its lock (and space) released
