"""Foreign partition folders and files that are damaged or crafted (found by a fuzzer): a sparse
node map, fractional or boolean DGL arrays (truncated to ids before), a symbolic link inside a
folder (followed outside it before), a pickle of Python objects (refused, never run, in one line)."""
from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pytest

from partplan import Graph
from partplan.errors import PartitionError
from partplan.plan.partitions import read_partition_file

torch = pytest.importorskip("torch")

GOOD = np.array([0, 0, 1, 1, 2, 2, 0, 1, 2, 0, 1, 2])


@pytest.fixture()
def g():
    return Graph.from_edges(np.arange(11), np.arange(1, 12), n=12)


def _pyg(d, node_map):
    d.mkdir()
    (d / "META.json").write_text(json.dumps({"num_parts": 3}))
    node_map(d / "node_map.pt")
    return d


def test_a_sparse_node_map(tmp_path, g):
    d = _pyg(tmp_path / "sparse", lambda f: torch.save(torch.tensor(GOOD).to_sparse(), f))
    with pytest.raises(PartitionError, match="sparse tensor"):
        read_partition_file(d, g)


@pytest.mark.parametrize("values", [np.arange(12) + 0.5, np.arange(12) % 2 == 0])
def test_dgl_arrays_are_ids_never_truncated(tmp_path, g, values):
    d = tmp_path / "dgl"
    d.mkdir()
    (d / "g.json").write_text(json.dumps({"num_parts": 3, "num_nodes": 12, "node_map": {"_N": [[0, 4], [4, 8], [8, 12]]}}))
    np.save(d / "orig_nids.npy", values)
    with pytest.raises(PartitionError, match="orig_nids must hold integer"):
        read_partition_file(d, g)
    old = tmp_path / "old"
    old.mkdir()
    (old / "g.json").write_text(json.dumps({"num_parts": 3, "node_map": "nm.npy"}))
    np.save(old / "nm.npy", GOOD + 0.9)
    with pytest.raises(PartitionError, match="node_map must hold integer"):
        read_partition_file(old, g)


def test_a_link_inside_a_folder_is_not_followed(tmp_path, g):
    outside = tmp_path / "outside.pt"
    torch.save(torch.tensor(GOOD), outside)
    d = _pyg(tmp_path / "linked", lambda f: os.symlink(outside, f))
    with pytest.raises(PartitionError, match="symbolic link inside a partition folder"):
        read_partition_file(d, g)
    plain = _pyg(tmp_path / "plain", lambda f: torch.save(torch.tensor(GOOD), f))
    assert np.array_equal(read_partition_file(plain, g).part, GOOD)


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def test_a_pickle_is_one_line_and_never_runs(tmp_path, g, capsys, monkeypatch):
    from partplan.io import write_graph
    from tests.errlines import one_line, run_cli

    monkeypatch.chdir(tmp_path)
    d = _pyg(tmp_path / "pick", lambda f: f.write_bytes(pickle.dumps(_Evil())))
    write_graph(g, tmp_path / "g.mtx")
    rc, _, err = run_cli(["analyze", tmp_path / "g.mtx", "--partition", d], capsys)
    line = one_line(rc, err, 2, "pick")
    assert ("Python objects" in line or "not a readable torch tensor file" in line) and "weights_only" not in line
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "PWNED").exists()
    torch.save({"m": _Evil()}, d / "node_map.pt")          # torch's own format holding an object
    rc, _, err = run_cli(["analyze", tmp_path / "g.mtx", "--partition", d], capsys)
    one_line(rc, err, 2, "Python objects beyond tensors")
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("sizes", ["4 1_2", "4 \u0661\u0662"])
def test_cagnet_sizes_are_ascii_integers(tmp_path, g, sizes):
    f = tmp_path / "p.part-sizes"
    f.write_text(sizes + "\n", encoding="utf-8")
    with pytest.raises(PartitionError, match="is not an integer"):
        read_partition_file(f, g)
    f.write_text("4 8\n")
    assert read_partition_file(f, g).part.tolist() == [0] * 4 + [1] * 8


@pytest.mark.parametrize("num_nodes", ["12", True, -1])
def test_a_dgl_num_nodes_must_be_a_count(tmp_path, g, num_nodes):
    d = tmp_path / "dgl"
    d.mkdir()
    (d / "g.json").write_text(json.dumps({"num_parts": 3, "num_nodes": num_nodes,
                                          "node_map": {"_N": [[0, 4], [4, 8], [8, 12]]}}))
    np.save(d / "orig_nids.npy", np.arange(12))
    with pytest.raises(PartitionError, match="'num_nodes' must be a vertex count"):
        read_partition_file(d, g)


def test_dgl_too_many_ranges_and_an_assignment_without_num_parts(tmp_path, g):
    d = tmp_path / "dgl"
    d.mkdir()
    (d / "g.json").write_text(json.dumps({"num_parts": 2, "num_nodes": 12,
                                          "node_map": {"_N": [[0, 4], [4, 8], [8, 12]]}}))
    np.save(d / "orig_nids.npy", np.arange(12))
    with pytest.raises(PartitionError, match="has 3 ranges for num_parts = 2"):
        read_partition_file(d, g)
    a = tmp_path / "assign"
    a.mkdir()
    (a / "partition_meta.json").write_text(json.dumps({"algo_name": "x"}))
    (a / "_N.txt").write_text("\n".join(map(str, GOOD)) + "\n")
    P = read_partition_file(a, g)                      # no declared count: the ids' largest + 1
    assert P.part.tolist() == GOOD.tolist() and P.k == 3


def test_compare_with_an_empty_name_is_refused(tmp_path, capsys):
    from partplan.plan import build_plan, write_plan
    from tests.errlines import one_line, run_cli

    gg = Graph.from_edges(np.arange(11), np.arange(1, 12), n=12, symmetrize=True)
    write_plan(build_plan(gg, GOOD), tmp_path / "g.plan")
    rc, _, err = run_cli(["run", "spmm", tmp_path / "g.plan", "--backend", "local", "--compare", "oblivious,,bare"],
                         capsys)
    one_line(rc, err, 2, "--compare", "empty name")
