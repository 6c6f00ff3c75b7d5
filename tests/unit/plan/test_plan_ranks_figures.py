"""Issue #51, plans past one machine: the ranks of a plan follow from its
layout and the partition's parts (1.5d:c: parts x c; -k optional and checked),
and the printed volume figures name what they count (a 1.5D per-rank maximum
counts the replicas' all-reduce too, so it may exceed the exchange total)."""
from __future__ import annotations

import numpy as np
import pytest

from partplan.datasets import rmat
from partplan.errors import PartplanError, PlanError
from partplan.partition.api import partition, save_partition
from partplan.plan import build_plan
from partplan.plan.builder import plan_layout
from partplan.plan.figures import volume_line, volume_rows


@pytest.fixture(scope="module")
def g():
    return rmat(9)


def test_plan_layout_ranks_from_parts():
    assert plan_layout("1.5d:2", None, 16).ranks == 32
    assert plan_layout("1.5d:4", None, 3).ranks == 12
    assert plan_layout("1d", None, 16).ranks == 16
    assert plan_layout("2d", None, 16).spec == "2d:4x4"
    assert plan_layout("2d:2x3", None, 6).ranks == 6
    assert plan_layout("1.5d:2", 32, 16).row_blocks == 16           # a given k that agrees
    assert plan_layout("1d", 8, 5, exact=False).ranks == 8          # a bare array: its parts are only max + 1
    for lay, k, parts, want in (("1.5d:2", 16, 16, "use k = 32 or leave k out"),
                                ("1d", 8, 16, "use k = 16"),
                                ("2d:2x3", None, 16, "does not fit a partition of 16 parts")):
        with pytest.raises(PlanError, match=want):
            plan_layout(lay, k, parts)
    with pytest.raises(PartplanError, match="not divisible"):      # k the layout itself refuses
        plan_layout("1.5d:2", 15, 16)
    with pytest.raises(PlanError, match="has 8 row blocks"):
        plan_layout("1d", 8, 16, exact=False)


def test_saved_16_part_partition_on_15d_needs_no_k(g, tmp_path):
    """The reported case: a 16-part partition planned on 1.5d:2 gets 32 ranks; -k 16 is one clear error."""
    P = partition(g, 16, model="graph", seed=1)
    plan = build_plan(g, P, layout="1.5d:2")
    assert plan.manifest["ranks"] == 32 and plan.manifest["row_blocks"] == 16
    assert build_plan(g, P, 32, layout="1.5d:2").manifest["ranks"] == 32
    with pytest.raises(PlanError, match=r"k = 16 \(-k\) disagrees with the partition: it has 16 parts .* use k = 32"):
        build_plan(g, P, 16, layout="1.5d:2")
    bare = build_plan(g, P.part, layout="1.5d:2")                 # a bare array: max(part) + 1 parts
    assert bare.manifest["ranks"] == 32


def test_cli_plan_and_inspect_name_their_figures(g, tmp_path, capsys):
    from partplan.cli.main import main
    from partplan.io import write_graph
    gp = tmp_path / "g.npz"
    write_graph(g, gp)
    P = partition(g, 16, model="graph", seed=1)
    save_partition(P, tmp_path / "p16.npy")
    assert main(["plan", str(gp), "--partition", str(tmp_path / "p16.npy"), "--layout", "1.5d:2",
                 "-o", str(tmp_path / "a.plan"), "-q"]) == 0
    out, err = capsys.readouterr()
    assert "total volume" in out and "all-reduce" in out and "per rank" in out
    assert "its exchange + its all-reduce rows" in out
    assert main(["plan", str(gp), "--partition", str(tmp_path / "p16.npy"), "--layout", "1.5d:2", "-k", "16",
                 "-o", str(tmp_path / "b.plan"), "-q"]) == 2
    out, err = capsys.readouterr()
    assert "k = 16 (-k) disagrees with the partition" in err and "use k = 32" in err and "Traceback" not in err
    assert main(["inspect", str(tmp_path / "a.plan")]) == 0
    out, _ = capsys.readouterr()
    line = next(x for x in out.splitlines() if x.startswith("volumes"))
    assert "exchange between the 16 row blocks" in line and "all-reduce" in line


def test_a_maximum_above_its_total_says_why():
    from partplan import Graph
    n = 200                                                      # a path in 2 halves: 2 rows cross, 150 reduced
    g = Graph.from_edges(np.arange(n - 1), np.arange(1, n), symmetrize=True)
    P = (np.arange(n) >= n // 2).astype(np.int64)
    st = build_plan(g, P, layout="1.5d:4").manifest["stats"]
    assert st["max_send"] > st["total_volume"]                   # the reported shape of the figures
    line = volume_line({**st, "layout": "1.5d:4"})
    assert "so a maximum can exceed the exchange total" in line and "all-reduce" in line
    st1 = build_plan(g, P).manifest["stats"]
    assert st1["max_send"] <= st1["total_volume"]
    assert "at most the total" in volume_line({**st1, "layout": "1d"})
    labels = [a for a, _ in volume_rows({**st, "layout": "1.5d"}, prefix="1.5d:4 ")]
    assert labels == ["1.5d:4 total_volume", "1.5d:4 total_reduce_rows", "1.5d:4 max_send", "1.5d:4 max_recv"]
