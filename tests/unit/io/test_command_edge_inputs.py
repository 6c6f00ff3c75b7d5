"""Inputs and outputs at the edges of the commands: an output path that is a FIFO (renaming onto it
would replace the pipe with a file), a file given where a chunked graph directory is read, a
manifest whose recorded shard size is negative, topology files that say a thing twice or price a
matrix's levels, a probe pair that could not be measured, a features file that is no .npy."""
from __future__ import annotations

import json
import os
import re

import pytest

import partplan
from partplan import Graph
from partplan.errors import GraphFormatError, OutputPathError, PlanError
from partplan.io.outpath import check_output_file


def test_an_output_that_is_a_fifo_is_refused(tmp_path):
    fifo = tmp_path / "ff.txt"
    os.mkfifo(fifo)
    with pytest.raises(OutputPathError, match="not a regular file"):
        check_output_file(fifo, kind="graph")
    assert fifo.exists() and not fifo.is_file()


def test_a_file_where_a_chunked_graph_is_read_says_so(tmp_path):
    from partplan.io.chunked import chunk_info
    f = tmp_path / "d.mtx"
    f.write_text("%%MatrixMarket matrix coordinate pattern general\n1 1 0\n")
    with pytest.raises(GraphFormatError, match="a file: a chunked graph is a directory"):
        chunk_info(f)
    with pytest.raises(GraphFormatError, match="no such directory"):
        chunk_info(tmp_path / "missing")


def test_a_negative_shard_size_in_the_manifest_is_named(tmp_path):
    g = Graph.from_edges([0, 1, 2], [1, 2, 0], symmetrize=True)
    out = partplan.write_plan(partplan.build_plan(g, [0, 1, 1], 2), tmp_path / "x.plan")
    mf = out / "manifest.json"
    m = json.loads(mf.read_text())
    m["shards"][0]["bytes"] = -1
    mf.write_text(json.dumps(m))
    with pytest.raises(PlanError, match=r"shards\[0\]' must hold rank = 0, bytes \(an int >= 0\)"):
        partplan.load_plan(out)


def _topo(tmp_path, text):
    f = tmp_path / "t.json"
    f.write_text(text)
    return f


def test_topology_files_refuse_duplicate_keys_empty_levels_and_priced_matrix_levels(tmp_path):
    """A key given twice (json keeps the last: a tree of fanouts [4, 1] read from a file that also
    says [2, 2]), an empty ``levels`` list where the fanouts have domain levels, and a matrix
    topology's level cost (the matrices hold the costs) are each one TopologyError."""
    from partplan.topology import load_topology
    from partplan.errors import PartplanError
    head = '{"format": "partplan.topology", "version": 1, '
    cases = [
        (head + '"kind": "tree", "ranks": 4, "fanouts": [2, 2], "fanouts": [4, 1]}', "appears twice"),
        (head + '"kind": "tree", "ranks": 4, "fanouts": [2, 2], "levels": []}', "'levels' is empty"),
        (head + '"kind": "matrix", "ranks": 2, "cost": [[0, 1], [1, 0]], "fanouts": [1, 2], '
                '"levels": [{"name": "node", "cost": 10}]}', "levels[0].cost"),
    ]
    for text, needle in cases:
        with pytest.raises(PartplanError, match=re.escape(needle)):
            load_topology(str(_topo(tmp_path, text)))
    ok = load_topology(str(_topo(tmp_path, head + '"kind": "tree", "ranks": 4, "fanouts": [2, 2]}')))
    assert ok.ranks == 4


def test_probe_warns_when_a_pair_was_not_measurable(monkeypatch, capsys, tmp_path):
    """A pair whose large message was no slower than the small one gets β = the floor: the report
    counts such pairs (link_matrices) and the command warns."""
    import numpy as np

    import partplan.runtime.probe as probe
    from tests.errlines import run_cli
    rt = np.array([[[0, 2e-5], [2e-5, 0]], [[0, 4e-5], [2e-5, 0]]])
    assert probe.link_matrices(rt, [8, 1008])[3] == 1
    assert probe.link_matrices(rt * [[[1]], [[3]]], [8, 1008])[3] == 0
    monkeypatch.setattr(probe, "run_probe", lambda *a, **kw: {
        "output": "x.json", "ranks": 2, "alpha_s": {"min": 1e-5, "max": 1e-5},
        "bandwidth_bytes_per_s": {"min": 1e9, "max": 1e15}, "beta_floored_pairs": 1})
    rc, out, err = run_cli(["topology", "probe", "--nprocs", "2", "-o", tmp_path / "p.json"], capsys)
    assert rc == 0 and "partplan: warning: 1 ordered rank pairs" in err and "1e-15 s/byte" in err
    # the bandwidth range leaves a floored pair's placeholder 1 / β out (it read 1,000,000 GB/s)
    beta = np.array([[0, probe.BETA_FLOOR, 2e-10], [probe.BETA_FLOOR, 0, 1e-10], [2e-10, 1e-10, 0]])
    off = ~np.eye(3, dtype=bool)
    assert probe._bandwidth(beta, off) == {"min": 1 / 2e-10, "max": 1 / 1e-10}
    only = np.array([[0, probe.BETA_FLOOR], [probe.BETA_FLOOR, 0]])
    assert probe._bandwidth(only, ~np.eye(2, dtype=bool)) == {"min": None, "max": None}
    monkeypatch.setattr(probe, "run_probe", lambda *a, **kw: {
        "output": "x.json", "ranks": 2, "alpha_s": {"min": 1e-5, "max": 1e-5},
        "bandwidth_bytes_per_s": {"min": None, "max": None}, "beta_floored_pairs": 2})
    rc, out, err = run_cli(["topology", "probe", "--nprocs", "2", "-o", tmp_path / "p.json"], capsys)
    assert rc == 0 and "bandwidth not measured" in out and "GB/s" not in out


def test_a_features_file_that_is_no_npy_is_named_without_numpys_pickle_hint(tmp_path):
    """numpy reads a file without the .npy magic as a pickle and answers with an allow_pickle hint;
    the features reader names the file as no .npy array (an .npz archive by name)."""
    import numpy as np

    from partplan.runtime.spmm import open_features
    junk = tmp_path / "junk.npy"
    junk.write_text("garbage text\n")
    with pytest.raises(PlanError, match="bad magic") as info:
        open_features(junk, 3)
    assert "pickle" not in str(info.value)
    np.savez(tmp_path / "z.npz", a=np.zeros((3, 2)))
    (tmp_path / "z.npz").rename(tmp_path / "z.npy")
    with pytest.raises(PlanError, match="an .npz archive"):
        open_features(tmp_path / "z.npy", 3)
    np.save(tmp_path / "h.npy", np.ones((3, 2), np.float32))
    assert open_features(tmp_path / "h.npy", 3).shape == (3, 2)
