"""``partplan partition`` under faults, in one process and with ``--nprocs 2`` (MPI): a full disk, an
output that is a directory, a symbolic link or a FIFO, a rank killed mid-run, a chunk truncated or
changed after it was written. Each ends in one ``partplan: error:`` line (exit 2), or a correct result;
never a traceback, a half-written output or a lost previous one."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from errlines import one_line, run_cli
from partplan.io.chunked import write_chunked
from partplan.metrics.stats import analyze

SUFFIXES = ("o.npy", "o.txt", "o.arrow", "o.csv", "o.part.gz")


def cli(args, cwd=None, env=None, timeout=180):
    r = subprocess.run([sys.executable, "-m", "partplan", "-q", *map(str, args)], capture_output=True,
                       text=True, timeout=timeout, cwd=cwd, env=env)
    return r.returncode, r.stdout, r.stderr


@pytest.fixture(scope="module")
def chunked(tmp_path_factory):
    from partplan.datasets.generators import rmat
    g = rmat(12, seed=3)
    return g, write_chunked(g, tmp_path_factory.mktemp("g") / "g.chunked", chunks=4)


def _need_mpi():
    from partplan.partition.engines.mpilibs import missing
    need = missing("stream")
    if need:
        pytest.skip(f"the MPI partitioner needs {', '.join(need)} (make mpi)")


# ----------------------------------------------------------------------------- one process
@pytest.mark.parametrize("leave,names", [(4096, SUFFIXES), (16384, ("o.npy", "o.arrow"))],
                         ids=["sidecar-does-not-fit", "partition-does-not-fit"])
def test_full_disk_keeps_the_previous_partition_and_sidecar(chunked, tmpfs, leave, names, capsys):
    """The partition, its sidecar (and owner array) are written as one group: a full disk while any of
    them is written leaves every previous file as it was and no temporary (4 KiB free: no room for the
    sidecar; 16 KiB: room for the sidecar, not for the 32 KiB partition)."""
    _, path = chunked
    d = tmpfs("size=256k")
    for name in names:
        (d / name).write_bytes(b"old")
        (d / f"{name}.json").write_bytes(b"old sidecar")
    tmpfs.fill(d, leave)
    before = sorted(p.name for p in d.iterdir())
    for name in names:
        rc, _, err = run_cli(["-q", "partition", path, "-k", 8, "-o", d / name], capsys)
        one_line(rc, err, 2, "not enough space")
        assert (d / name).read_bytes() == b"old" and (d / f"{name}.json").read_bytes() == b"old sidecar"
    assert sorted(p.name for p in d.iterdir()) == before


def test_partition_and_sidecar_written_together_agree(chunked, tmp_path, capsys):
    """The group write: the partition, its sidecar and the recount of the written partition agree."""
    import json
    g, path = chunked
    for name in SUFFIXES:
        rc, _, err = run_cli(["-q", "partition", path, "-k", 8, "-o", tmp_path / name], capsys)
        assert rc == 0, err
        from partplan.io.partfile import read_partition
        part = read_partition(tmp_path / name, g.n)
        side = json.loads((tmp_path / f"{name}.json").read_text())
        s = analyze(g, part, 8).summary()
        assert side["k"] == 8 and part.shape == (g.n,)
        assert side["stats"]["total_volume"] == s["total_volume"]


# ----------------------------------------------------------------------------- --nprocs 2
@pytest.mark.slow
@pytest.mark.dist
def test_nprocs_outputs_that_are_not_plain_files(chunked, tmp_path):
    """A directory and a FIFO are refused before any work (a FIFO is not replaced by a file, and
    never blocks the writer); a symbolic link is replaced by the partition (its target is never
    written)."""
    _need_mpi()
    g, path = chunked
    (tmp_path / "d.npy").mkdir()
    rc, _, err = cli(["partition", path, "-k", 8, "--nprocs", 2, "-o", tmp_path / "d.npy"])
    one_line(rc, err, 2, "d.npy", "directory")
    os.mkfifo(tmp_path / "fifo.npy")
    rc, _, err = cli(["partition", path, "-k", 8, "--nprocs", 2, "--engine", "stream", "-o", tmp_path / "fifo.npy"])
    one_line(rc, err, 2, "fifo.npy", "not a regular file")
    assert not (tmp_path / "fifo.npy").is_file()
    target = tmp_path / "target.npy"
    target.write_bytes(b"keep")
    (tmp_path / "link.npy").symlink_to(target)
    rc, _, err = cli(["partition", path, "-k", 8, "--nprocs", 2, "--engine", "stream", "-o", tmp_path / "link.npy"])
    assert rc == 0, err
    out = tmp_path / "link.npy"
    assert out.is_file() and not out.is_symlink()
    part = np.load(out)
    assert part.shape == (g.n,) and 0 <= part.min() and part.max() < 8
    assert target.read_bytes() == b"keep"


@pytest.mark.slow
@pytest.mark.dist
def test_nprocs_full_disk_keeps_the_previous_pair_or_writes_a_whole_new_one(chunked, tmpfs):
    """With the disk filled to several levels (no room for the partition; room for it but perhaps not
    for its sidecar; room for both), each run either fails with one line and leaves the previous
    partition and sidecar as they were, or writes both, and they agree with a recount."""
    import json
    _need_mpi()
    g, path = chunked
    d = tmpfs("size=512k")
    outcomes = set()
    for leave in (4096, 36864, 40960, 45056, 65536):
        for f in d.iterdir():
            f.unlink()
        (d / "o.npy").write_bytes(b"old")
        (d / "o.npy.json").write_bytes(b"old sidecar")
        tmpfs.fill(d, leave)
        rc, _, err = cli(["partition", path, "-k", 8, "--nprocs", 2, "--engine", "stream", "-o", d / "o.npy"])
        names = sorted(p.name for p in d.iterdir())
        assert names == ["o.npy", "o.npy.json", "pad"], (leave, names)
        if rc == 0:
            part = np.load(d / "o.npy")
            side = json.loads((d / "o.npy.json").read_text())
            assert side["result"]["total_volume"] == analyze(g, part, 8).summary()["total_volume"]
        else:
            one_line(rc, err, 2, "not enough space")
            assert (d / "o.npy").read_bytes() == b"old" and (d / "o.npy.json").read_bytes() == b"old sidecar"
        outcomes.add(rc)
    assert outcomes == {0, 2}   # the levels span both outcomes


@pytest.mark.slow
@pytest.mark.dist
@pytest.mark.parametrize("damage", ["truncated", "id out of range"])
def test_nprocs_damaged_chunk_is_one_error_naming_it(chunked, tmp_path, damage):
    import shutil
    _need_mpi()
    _, src = chunked
    path = tmp_path / "g.chunked"
    shutil.copytree(src, path)
    f = path / "chunk-00001.indices.npy"
    if damage == "truncated":
        os.truncate(f, f.stat().st_size // 3)
    else:
        a = np.load(f)
        a[len(a) // 2] = 10 ** 9
        np.save(f, a)
    rc, _, err = cli(["partition", path, "-k", 8, "--nprocs", 2, "--engine", "stream", "-o", tmp_path / "o.npy"])
    one_line(rc, err, 2, "chunk-00001.indices.npy")
    assert not (tmp_path / "o.npy").exists()


@pytest.mark.slow
@pytest.mark.dist
def test_nprocs_rank_killed_mid_run_is_one_error_and_nothing_left(chunked, tmp_path):
    """SIGKILL to one MPI rank while it works: the launcher says so in one line, writes nothing and
    leaves no process of the run behind."""
    _need_mpi()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from proctools import gone_within, live_pids
    _, path = chunked
    tag = f"PARTPLAN_TEST_TAG={tmp_path.name}"
    env = dict(os.environ, PARTPLAN_TEST_TAG=tmp_path.name)
    proc = subprocess.Popen([sys.executable, "-m", "partplan", "-q", "partition", str(path), "-k", "64", "--nprocs",
                             "2", "--engine", "stream", "-o", str(tmp_path / "k.npy")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ranks, worker = [], "partplan.partition.pipeline.mpi_worker"
    end = time.monotonic() + 60
    while time.monotonic() < end and len(ranks) < 2:
        ranks = [p for p in live_pids(cmdline=(worker,), environ=tag)     # not mpirun, not its guard
                 if Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[1:3] == [b"-m", worker.encode()]]
        time.sleep(0.05)
    assert len(ranks) == 2, f"the MPI ranks did not start: {ranks}"
    os.kill(max(ranks), signal.SIGKILL)
    _, err = proc.communicate(timeout=120)
    if proc.returncode == 0:   # the run had already finished its work: a correct result, then
        assert np.load(tmp_path / "k.npy").shape[0] > 0
        return
    one_line(proc.returncode, err, 2, "failed")
    assert not (tmp_path / "k.npy").exists()
    left = live_pids(cmdline=("partplan.partition.pipeline.mpi_worker",), environ=tag)
    assert gone_within(left, 10.0) == []
