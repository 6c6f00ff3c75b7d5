"""save_partition checks where it writes before writing: a partition suffix, a NAME.part.K whose K
is the partition's, a folder that can be written (missing folders are created, as write_partition
and write_plan create them); nothing is left behind by a refusal."""
from __future__ import annotations

import numpy as np
import pytest

from partplan.errors import OutputPathError, PartitionError
from partplan.graph import Graph
from partplan.partition.api import load_partition, partition, save_partition


@pytest.fixture(scope="module")
def p4():
    g = Graph.from_edges(np.arange(29), np.arange(1, 30), n=30, symmetrize=True)
    return g, partition(g, 4, backend="block", model="baseline")


@pytest.mark.parametrize("name, err, needle", [
    ("x.part.8", PartitionError, "the name says 8 parts"),
    ("x.xyz", OutputPathError, "unknown partition file suffix"),
    ("nodir/x.xyz", OutputPathError, "unknown partition file suffix"),
    ("nodir/x.part.8", PartitionError, "the name says 8 parts"),
    ("x.plan", PartitionError, "write_plan"),
])
def test_a_bad_output_is_refused_before_writing(tmp_path, p4, name, err, needle):
    _, p = p4
    with pytest.raises(err, match=needle):
        save_partition(p, tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_is_a_file_is_refused(tmp_path, p4):
    _, p = p4
    (tmp_path / "f").write_text("")
    with pytest.raises(OutputPathError, match="is a file, not a directory"):
        save_partition(p, tmp_path / "f" / "x.npy")
    assert [q.name for q in tmp_path.iterdir()] == ["f"]


def test_bad_ids_leave_no_created_folder(tmp_path, p4):
    _, p = p4
    with pytest.raises(PartitionError, match="one integer id per row"):
        save_partition(p, tmp_path / "new" / "sub" / "x.npy", ids=np.arange(5))
    assert list(tmp_path.iterdir()) == []


def test_a_good_output_round_trips(tmp_path, p4):
    g, p = p4
    for name in ("x.part.4", "x.npy", "x.parquet", "x.part"):
        out = save_partition(p, tmp_path / name)
        back = load_partition(out, g)
        assert np.array_equal(back.part, p.part) and back.k == 4


def test_a_sidecar_beside_a_file_written_later_is_refused(tmp_path, p4):
    """The sidecar records its file's sha256: a partition file replaced by another writer (another
    tool, a copy) is not read with the old file's layout and provenance."""
    from partplan.io.partfile import write_partition
    g, p = p4
    path = save_partition(p, tmp_path / "x.part.4")
    assert np.array_equal(load_partition(path, graph=g).part, p.part)
    write_partition(p.part[::-1].copy(), path)                 # another partition, the same name
    with pytest.raises(PartitionError, match="describes another x.part.4"):
        load_partition(path, graph=g)
    (tmp_path / "x.part.4.json").unlink()                       # read as a bare partition
    assert np.array_equal(load_partition(path, graph=g).part, p.part[::-1])


def test_a_metis_export_over_a_saved_partition_leaves_no_stale_sidecar(tmp_path, p4, capsys):
    """`export --to metis OUT` over a partition saved with a 2D layout: OUT is the plan's bare
    partition (its plan is 1D), not the old layout lent by the old sidecar."""
    from partplan import build_plan, write_plan
    from tests.errlines import run_cli
    g, p = p4
    two = partition(g, 4, layout="2d:2x2", backend="block", model="baseline")
    save_partition(two, tmp_path / "x.part.4")
    write_plan(build_plan(g, p), tmp_path / "g.plan")
    rc, _, err = run_cli(["export", tmp_path / "g.plan", "--to", "metis", tmp_path / "x.part.4"], capsys)
    assert rc == 0, err
    assert not (tmp_path / "x.part.4.json").exists()
    back = load_partition(tmp_path / "x.part.4", graph=g)
    assert back.layout == "1d" and np.array_equal(back.part, p.part)


def test_gzip_partitions_are_the_same_bytes_every_time(tmp_path, p4):
    """A ``.gz`` partition holds no file name and mtime 0 (formats.md): the same partition, the
    same bytes, whatever the name and the time."""
    import time

    from partplan.io.partfile import write_partition
    _, p = p4
    write_partition(p.part, tmp_path / "a.part.gz")
    time.sleep(1.1)
    write_partition(p.part, tmp_path / "b.part.gz")
    a, b = (tmp_path / "a.part.gz").read_bytes(), (tmp_path / "b.part.gz").read_bytes()
    assert a == b
    assert a[3] & 0x08 == 0 and a[4:8] == b"\0\0\0\0"        # no FNAME flag, MTIME 0


def test_the_distributed_builds_metadata_reader_refuses_a_sidecar_of_another_file(tmp_path, p4):
    """`plan --nprocs` reads a saved partition's layout and provenance without its part array
    (saved_partition_meta, partition_provenance): a sidecar left beside a file written later is
    refused there too."""
    from partplan.io.partfile import write_partition
    from partplan.plan.partitions import partition_provenance, saved_partition_meta
    _, p = p4
    path = save_partition(p, tmp_path / "x.part.4")
    assert saved_partition_meta(path)["k"] == 4
    write_partition(p.part[::-1].copy(), path)
    for read in (saved_partition_meta, partition_provenance):
        with pytest.raises(PartitionError, match="describes another x.part.4"):
            read(path)


def test_the_k_of_a_15d_partitions_name_is_its_row_blocks(tmp_path, capsys):
    """NAME.part.K names the parts the file holds (its ids 0..K-1), as every reader reads K and as
    `export --to metis` names it. The writers named a 1.5D partition by its ranks: `partition -k 8
    --layout 1.5d:2 -o x.part.8` wrote ids 0..3, `export` of its plan refused .part.8, and a copy
    without its sidecar was planned as 8 ranks, 4 of them empty."""
    from partplan.io import write_graph
    from tests.errlines import one_line, run_cli
    g = Graph.from_edges(np.arange(59), np.arange(1, 60), n=60, symmetrize=True, name="path")
    write_graph(g, tmp_path / "g.npz")
    p = partition(g, 8, layout="1.5d:2", backend="block", model="baseline")
    with pytest.raises(PartitionError, match="name it y.part.4"):
        save_partition(p, tmp_path / "y.part.8")
    base = ["-q", "partition", tmp_path / "g.npz", "-k", "8", "--layout", "1.5d:2", "--engine", "random"]
    rc, _, err = run_cli(base + ["-o", tmp_path / "x.part.8"], capsys)
    one_line(rc, err, 2, "-k 8 --layout 1.5d:2 has 4", "name it x.part.4")
    assert run_cli(base + ["-o", tmp_path / "x.part.4"], capsys)[0] == 0
    assert sorted(set(np.loadtxt(tmp_path / "x.part.4", dtype=np.int64))) == [0, 1, 2, 3]
    rc, _, err = run_cli(["-q", "plan", tmp_path / "g.npz", "--partition", tmp_path / "x.part.4",
                          "-o", tmp_path / "x.plan"], capsys)
    assert rc == 0, err
    rc, _, err = run_cli(["-q", "export", tmp_path / "x.plan", "--to", "metis", tmp_path / "e.part.4"], capsys)
    assert rc == 0, err
    assert np.array_equal(np.loadtxt(tmp_path / "e.part.4", dtype=np.int64),
                          np.loadtxt(tmp_path / "x.part.4", dtype=np.int64))


def test_a_conformal_partition_saved_over_a_decoupled_one_takes_its_owner_file_away(tmp_path):
    """OUT.owner.npy belonged to the decoupled partition written there before; the conformal one
    replacing it leaves no owner file behind (its sidecar names none)."""
    from partplan.datasets import load_graph
    from partplan.partition.api import load_partition, partition, save_partition

    g = load_graph("power")
    out = tmp_path / "p.npy"
    save_partition(partition(g, 4, ownership="decoupled"), out)
    assert (tmp_path / "p.npy.owner.npy").is_file()
    conf = partition(g, 4)
    save_partition(conf, out)
    assert not (tmp_path / "p.npy.owner.npy").exists()
    back = load_partition(out, g)
    assert back.owner is None and np.array_equal(back.part, conf.part)
