"""The topology file and a saved partition's sidecar are read through the bounded JSON reader
(partplan._files.read_json): a FIFO, a nesting bomb or bad UTF-8 is one error of the reader's
caller naming the file, never a hang, a RecursionError or a UnicodeDecodeError. Oracles: the
standard library's json on the same text for what is accepted; os.mkfifo for the FIFO."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from partplan import Graph
from partplan.errors import PartitionError
from partplan.topology import TopologyError, load_topology


def _hostile(tmp_path, name):
    out = {}
    fifo = tmp_path / f"fifo-{name}"
    os.mkfifo(fifo)
    out["fifo"] = fifo
    deep = tmp_path / f"deep-{name}"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    out["deep"] = deep
    bad = tmp_path / f"bad-{name}"
    bad.write_bytes(b'{"a": "\xff\xfe"}')
    out["bad"] = bad
    nan = tmp_path / f"nan-{name}"
    nan.write_text('{"a": NaN}')
    out["nan"] = nan
    return out


@pytest.mark.parametrize("kind", ["fifo", "deep", "bad", "nan"])
def test_a_hostile_topology_file_is_one_topology_error(tmp_path, alarm, kind):
    path = _hostile(tmp_path, "t.json")[kind]
    with pytest.raises(TopologyError) as e:
        load_topology(str(path))
    assert path.name in str(e.value)


def test_a_topology_file_reads_as_the_standard_library_does(tmp_path):
    from partplan.topology import topology_from_json, tree, write_topology
    f = write_topology(tree([2, 2]), tmp_path / "t.json")
    ref = topology_from_json(json.loads(f.read_text()), source=str(f))
    t = load_topology(str(f))
    assert t.ranks == ref.ranks == 4 and t.describe() == ref.describe()


@pytest.mark.parametrize("kind", ["deep", "bad", "nan"])
def test_a_hostile_partition_sidecar_is_one_partition_error(tmp_path, alarm, kind):
    from partplan.partition import load_partition
    g = Graph.from_edges(np.arange(7), np.arange(1, 8), symmetrize=True)
    part = tmp_path / "g.part.2"
    part.write_text("\n".join(str(i % 2) for i in range(g.n)) + "\n")
    side = tmp_path / "g.part.2.json"
    side.write_bytes(_hostile(tmp_path, "s")[kind].read_bytes())
    with pytest.raises(PartitionError) as e:
        load_partition(part, g)
    assert side.name in str(e.value)
