"""The one partition reader (partplan.plan.partitions.read_partition_file):
every format gives the same Partition; every bad input is one PartitionError
naming the file (and the line of a text file)."""
from __future__ import annotations

import numpy as np
import pytest

from partplan import Graph
from partplan.errors import PartitionError
from partplan.plan.partitions import read_partition_file

N = 12
PART = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2], dtype=np.int64)  # brute-force known answer


@pytest.fixture()
def graph():
    src = np.arange(N)
    return Graph.from_edges(src, (src + 1) % N, n=N, symmetrize=True, name="ring12")


def _write(path, arr):
    """Write ``arr`` in the format the name says, with the library each format belongs to."""
    name = path.name
    if name.endswith(".npy"):
        np.save(path, arr)
    elif name.endswith(".pt"):
        import torch
        torch.save(torch.as_tensor(arr), path)
    elif name.endswith(".parquet") or name.endswith(".csv"):
        import pyarrow as pa
        import pyarrow.csv as pcsv
        import pyarrow.parquet as pq
        t = pa.table({"part": arr})
        pq.write_table(t, path) if name.endswith(".parquet") else pcsv.write_csv(t, path)
    else:
        path.write_text("".join(f"{int(v)}\n" if float(v).is_integer() else f"{v}\n" for v in arr.tolist()))
    return path


FORMATS = ["g.part.3", "g.txt", "g.npy", "g.pt", "g.parquet", "g.csv"]


@pytest.mark.parametrize("name", FORMATS)
def test_every_format_reads_the_same(graph, tmp_path, name):
    if name.endswith(".pt"):
        pytest.importorskip("torch")
    P = read_partition_file(_write(tmp_path / name, PART), graph)
    assert P.part.tolist() == PART.tolist() and P.k == 3 and P.model == "external"


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("bad,what", [
    (np.append(PART, 0), "13"),                              # length != n
    (PART[:-1], "11"),
    (np.where(np.arange(N) == 4, -1, PART), "negative"),
    (np.where(np.arange(N) == 4, 0.5, PART), "integer"),     # a float id
    (np.where(np.arange(N) == 4, np.nan, PART), "integer"),  # NaN
])
def test_bad_inputs_are_one_error_naming_the_file(graph, tmp_path, name, bad, what):
    if name.endswith(".pt"):
        pytest.importorskip("torch")
    f = _write(tmp_path / name, bad)
    with pytest.raises(PartitionError) as ei:
        read_partition_file(f, graph)
    msg = str(ei.value)
    assert str(f) in msg and "\n" not in msg
    assert what in msg or (what == "integer" and "null" in msg and name.endswith(".csv")), msg  # CSV: NaN is null
    if name in ("g.part.3", "g.txt") and what in ("negative", "integer"):
        assert ":line 5:" in msg  # vertex 4 is on line 5


@pytest.mark.parametrize("name", FORMATS)
def test_a_binary_file_under_any_name_is_one_error(graph, tmp_path, name):
    """A .npy (or random bytes) renamed to another format: one PartitionError naming the file — a
    binary file read as CSV used to end in pyarrow's UnicodeDecodeError on its "header"."""
    f = tmp_path / name
    f.write_bytes(b"\x93NUMPY\x01\x00v\x00{'descr': '<i8', 'fortran_order': False, 'shape': (12,), }"
                  + b" " * 60 + b"\n")   # a .npy header alone: one CSV "header" line that is not UTF-8
    with pytest.raises(PartitionError) as ei:
        read_partition_file(f, graph)
    assert str(f) in str(ei.value)


def test_ids_out_of_range_for_k(graph, tmp_path):
    f = _write(tmp_path / "g.part.2", PART)  # ids up to 2 in a file named for 2 parts
    with pytest.raises(PartitionError, match=r"g\.part\.2: vertex 2 has part id 2 >= k=2"):
        read_partition_file(f, graph)
    f = _write(tmp_path / "h.npy", PART)
    with pytest.raises(PartitionError, match="h.npy: vertex 2 has part id 2 >= k=2"):
        read_partition_file(f, graph, k=2)
    with pytest.raises(PartitionError, match="more than the graph.s 12 vertices"):
        read_partition_file(_write(tmp_path / "big.npy", np.full(N, 20)), graph)


def test_wrong_shapes(graph, tmp_path):
    torch = pytest.importorskip("torch")
    ei = torch.randint(0, N, (2, 31))
    torch.save(ei, tmp_path / "ei.pt")
    with pytest.raises(PartitionError, match=r"ei\.pt: expected a 1-D node map, got shape \(2, 31\)"):
        read_partition_file(tmp_path / "ei.pt", graph)
    np.save(tmp_path / "m.npy", np.zeros((N, 2), np.int64))
    with pytest.raises(PartitionError, match=r"m\.npy: .*one-dimensional"):
        read_partition_file(tmp_path / "m.npy", graph)
    (tmp_path / "two.part.3").write_text("0 1\n" * N)
    with pytest.raises(PartitionError, match=r"two\.part\.3:line 1: expected one part id per line"):
        read_partition_file(tmp_path / "two.part.3", graph)
    with pytest.raises(PartitionError, match="no such partition file"):
        read_partition_file(tmp_path / "absent.npy", graph)


def test_saved_partition_keeps_its_layout(graph, tmp_path):
    from partplan.partition.api import partition, save_partition
    p = partition(graph, 4, model="baseline", backend="block", layout="1.5d:2")
    out = save_partition(p, tmp_path / "s.npy")
    P = read_partition_file(out, graph)
    assert P.layout == p.layout and P.k == 4 and P.part.tolist() == p.part.tolist()


@pytest.mark.parametrize("layout", ["1d", "1.5d:2", "2d:2x2"])
def test_a_plan_gives_the_partition_it_was_built_from(graph, tmp_path, layout):
    """A plan directory as --partition: its part (original vertex order), layout and ranks, the
    plan's checks applied; a plan of another graph or a bad checksum is one
    error naming the file."""
    from partplan.errors import PlanError
    from partplan.partition.api import partition
    from partplan.plan import build_plan, write_plan
    p = partition(graph, 4, model="baseline", backend="block", layout=layout)
    d = write_plan(build_plan(graph, p), tmp_path / "g.plan")
    P = read_partition_file(d, graph)
    assert P.part.tolist() == p.part.tolist() and P.layout == p.layout and P.ranks == p.ranks
    with pytest.raises(PartitionError, match="more than the 1 asked for"):
        read_partition_file(d, graph, k=1)
    with pytest.raises(PartitionError, match="--column"):
        read_partition_file(d, graph, column="part")
    other = Graph.from_edges(np.arange(N - 1), np.arange(1, N), n=N, symmetrize=True, name="path12")
    with pytest.raises(PlanError, match="another graph"):
        read_partition_file(d, other)
    f = d / "partition.arrow"
    raw = bytearray(f.read_bytes())
    raw[-20] ^= 0xFF                                # one flipped byte: the checksum says so
    f.write_bytes(bytes(raw))
    with pytest.raises(PlanError, match="partition.arrow"):
        read_partition_file(d, graph)


@pytest.mark.parametrize("sidecar, field", [
    ('{"n": "12"}', "'n'"),
    ('{"n": -1}', "'n'"),
    ('[1, 2]', "JSON object"),
    ('{"n": 12, "owner_file": "../elsewhere.npy"}', "'owner_file'"),
    ('{"n": 12, "owner_file": "/etc/passwd"}', "'owner_file'"),
    ('{"n": 12', "not valid JSON"),
])
def test_saved_partition_sidecar_is_checked(tmp_path, sidecar, field):
    """A saved partition's sidecar is input too: one PartitionError naming the sidecar and field;
    names from it are never paths."""
    from partplan.partition.api import load_partition
    f = tmp_path / "p.npy"
    np.save(f, np.arange(12) % 3)
    (tmp_path / "p.npy.json").write_text(sidecar)
    with pytest.raises(PartitionError, match=field) as ei:
        load_partition(f)
    assert ".json" in str(ei.value)


def test_a_plans_own_partition_file_points_to_the_plan_folder(tmp_path):
    """`--partition P.plan/partition.arrow` said only "has 1 part ids": the plan's file holds its
    arrays as one row. The refusal names the plan folder, which is read."""
    from partplan import build_plan, read_partition, write_plan
    g = Graph.from_edges([0, 1, 2, 3], [1, 2, 3, 0], symmetrize=True)
    path = write_plan(build_plan(g, np.array([0, 0, 1, 1]), 2), tmp_path / "c.plan")
    with pytest.raises(PartitionError, match="give the plan folder"):
        read_partition(path / "partition.arrow", 4)
