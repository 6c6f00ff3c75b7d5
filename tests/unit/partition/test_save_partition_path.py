"""save_partition checks where it writes before writing, as `partplan partition -o` does: a
partition suffix, a NAME.part.K whose K is the partition's, an existing folder; nothing is left
behind by a refusal."""
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
    ("nodir/x.npy", OutputPathError, "nodir"),
    ("x.plan", PartitionError, "write_plan"),
])
def test_a_bad_output_is_refused_before_writing(tmp_path, p4, name, err, needle):
    _, p = p4
    with pytest.raises(err, match=needle):
        save_partition(p, tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_a_good_output_round_trips(tmp_path, p4):
    g, p = p4
    for name in ("x.part.4", "x.npy", "x.parquet", "x.part"):
        out = save_partition(p, tmp_path / name)
        back = load_partition(out, g)
        assert np.array_equal(back.part, p.part) and back.k == 4
