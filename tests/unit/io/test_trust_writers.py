"""Writers never lose the old output.

A plan (or a chunked graph) replacing an older one is exchanged in one step
(``renameat2(RENAME_EXCHANGE)``) or, where that is unavailable, moved in by a
two-step swap that puts the old folder back when the second rename fails —
failures injected here by monkeypatching ``os.rename`` / the exchange, never
by a product switch. Stale temporaries are judged by the ``flock`` their
writer holds: a live writer whose pid means nothing here (another pid
namespace) keeps its temporary.
"""
from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

import numpy as np
import pytest

from partplan import Graph, PlanError, _atomic
from partplan._atomic import atomic_path, clean_stale, rename_exchange, temp_prefix
from partplan.errors import OutputPathError
from partplan.io.chunked import read_chunked, write_chunked
from partplan.plan import build_plan, read_manifest, write_plan


def _grid(r=5, c=5) -> Graph:
    idx = np.arange(r * c).reshape(r, c)
    src = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    dst = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    return Graph.from_edges(src, dst, n=r * c, symmetrize=True, name="grid")


def _plan(tmp_path, k):
    g = _grid()
    return write_plan(build_plan(g, np.arange(g.n) * k // g.n, k), tmp_path / "g.plan")


def _snapshot(d: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def _leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith("."))


def test_rename_exchange_swaps_two_folders(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x").write_text("A")
    (b / "x").write_text("B")
    if not rename_exchange(a, b):
        pytest.skip("renameat2(RENAME_EXCHANGE) unavailable here")
    assert (a / "x").read_text() == "B" and (b / "x").read_text() == "A"
    with pytest.raises(FileNotFoundError):
        rename_exchange(a, tmp_path / "missing")


def test_replacing_a_plan_leaves_the_new_one_and_no_temporaries(tmp_path):
    _plan(tmp_path, 2)
    g = _grid()
    write_plan(build_plan(g, np.arange(g.n) * 3 // g.n, 3), tmp_path / "g.plan")
    assert read_manifest(tmp_path / "g.plan")["k"] == 3
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("exchange", ["unavailable", "fails"])
def test_failed_swap_keeps_the_old_plan(tmp_path, monkeypatch, exchange):
    path = _plan(tmp_path, 2)
    before = _snapshot(path)
    if exchange == "unavailable":
        monkeypatch.setattr(_atomic, "rename_exchange", lambda a, b: False)
    else:
        def broken(a, b):
            raise OSError(errno.EIO, "Input/output error")
        monkeypatch.setattr(_atomic, "rename_exchange", broken)
    real = os.rename

    def rename(src, dst, *a, **kw):   # the new plan's move into place fails (full disk, EIO, ...)
        if Path(dst) == path and Path(src).name.startswith(temp_prefix(path)):
            raise OSError(errno.EIO, "Input/output error")
        return real(src, dst, *a, **kw)
    monkeypatch.setattr(os, "rename", rename)
    g = _grid()
    with pytest.raises(PlanError, match="could not be moved into place.*old plan.*unchanged") as ei:
        write_plan(build_plan(g, np.arange(g.n) * 3 // g.n, 3), path)
    assert "\n" not in str(ei.value)
    assert _snapshot(path) == before and read_manifest(path)["k"] == 2
    assert _leftovers(tmp_path) == []


def test_two_step_swap_when_exchange_is_unavailable(tmp_path, monkeypatch):
    path = _plan(tmp_path, 2)
    monkeypatch.setattr(_atomic, "rename_exchange", lambda a, b: False)
    g = _grid()
    write_plan(build_plan(g, np.arange(g.n) * 3 // g.n, 3), path)
    assert read_manifest(path)["k"] == 3 and _leftovers(tmp_path) == []


def test_failed_swap_keeps_the_old_chunked_graph(tmp_path, monkeypatch):
    g = _grid()
    out = write_chunked(g, tmp_path / "g.chunks", chunks=2)
    before = _snapshot(out)
    monkeypatch.setattr(_atomic, "rename_exchange", lambda a, b: False)
    real = os.rename

    def rename(src, dst, *a, **kw):
        if Path(dst) == out and Path(src).name.startswith(temp_prefix(out)):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst, *a, **kw)
    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OutputPathError, match="could not be moved into place.*unchanged"):
        write_chunked(_grid(4, 4), out, chunks=3)
    assert _snapshot(out) == before and read_chunked(out).n == g.n
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("kind", ["dir", "file"])
def test_locked_temporary_of_a_foreign_pid_is_kept(tmp_path, kind):
    """A writer in another pid namespace: its pid runs nothing here, but it holds the lock."""
    target = tmp_path / "g.plan"
    tmp = tmp_path / f".g.plan.tmp-999999999-{'ab' * 8}"
    tmp.mkdir() if kind == "dir" else tmp.write_bytes(b"half")
    fd = os.open(tmp, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)
    try:
        assert clean_stale(target) == [] and tmp.exists()
    finally:
        os.close(fd)
    assert clean_stale(target) == [tmp] and not tmp.exists()   # lock released: its writer is gone


def test_a_shared_npy_output_removes_dead_writers_temporaries(tmp_path):
    """The shared .npy of `run spmm --output` (one temporary all ranks write): a launcher killed
    mid-run left its full-size temporary, and no later write of that output removed it."""
    from partplan._atomic import commit, create_npy
    out = tmp_path / "z.npy"
    dead = tmp_path / f".z.npy.tmp-999999999-{'cd' * 8}.npy"
    dead.write_bytes(b"\0" * 4096)
    tmp, ident = create_npy(out, np.float32, (3, 2))
    assert not dead.exists() and tmp.exists()
    commit(tmp, out, ident)
    assert np.load(out).shape == (3, 2) and _leftovers(tmp_path) == []


def test_writers_hold_the_lock_while_they_write(tmp_path):
    out = tmp_path / "x.npy"
    with atomic_path(out, suffix=".npy") as tmp:
        fd = os.open(tmp, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
        np.save(tmp, np.arange(3))
    assert np.load(out).tolist() == [0, 1, 2]
    assert str(tmp) not in _atomic._HELD       # released once in place


def test_replacing_a_symlinked_output_removes_only_the_link(tmp_path):
    """An output path that is a symbolic link to a folder: the new folder takes the link's place,
    the link's target is left as it was, and no temporary stays beside the output."""
    from partplan._atomic import swap_dir
    target = tmp_path / "target"
    target.mkdir()
    (target / "keep.txt").write_text("keep")
    link = tmp_path / "out"
    link.symlink_to(target)
    new = tmp_path / ".out.tmp-new"
    new.mkdir()
    (new / "new.txt").write_text("new")
    swap_dir(new, link)
    assert not link.is_symlink() and (link / "new.txt").read_text() == "new"
    assert (target / "keep.txt").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "target"]
