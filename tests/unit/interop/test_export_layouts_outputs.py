"""Exports of plans whose ranks are not their parts, and export outputs that are links.

* a 1.5D plan's partition has its row blocks as parts (its k counts the replicas too): METIS, DGL
  and PyG exports all say so (oracle: the partition vector given to the builder);
* a routed plan has no ``ext`` buffer: its shards' ``halo`` is 0, as plan-format.md defines it
  (it read −held);
* an export onto a symbolic link to an empty folder replaces the link and leaves its target alone."""
from __future__ import annotations

import json
import os

import numpy as np

from partplan import Graph
from partplan.interop.export import export_dgl, export_pyg
from partplan.layouts import routed_layout
from partplan.plan import build_plan, load_plan, write_plan
from partplan.topology import load_topology

EDGES = [(0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4), (0, 4), (2, 6)]


def _graph() -> Graph:
    src, dst = zip(*EDGES)
    return Graph.from_edges(np.array(src), np.array(dst), n=8, symmetrize=True)


def test_15d_exports_have_the_row_blocks_as_parts(tmp_path):
    part = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    p = load_plan(write_plan(build_plan(_graph(), part, 4, layout="1.5d:2"), tmp_path / "g15.plan"))
    cfg = json.loads(next((export_dgl(p, tmp_path / "dgl")).glob("*.json")).read_text())
    assert cfg["num_parts"] == 2 and cfg["node_map"]["_N"] == [[0, 4], [4, 8]]
    meta = json.loads((export_pyg(p, tmp_path / "pyg") / "META.json").read_text())
    assert meta["num_parts"] == 2
    assert sorted(x.name for x in (tmp_path / "pyg").iterdir() if x.name.startswith("part_")) == ["part_0", "part_1"]


def test_routed_plans_record_their_halo(tmp_path):
    """A routed plan has no ext buffer; its manifest's halo is the distinct rows another rank owns
    that the rank's SpMM reads (brute force over the graph), not the rows it only forwards."""
    part = np.array([0, 0, 1, 1, 2, 2, 3, 3])
    lay = routed_layout("domain", 4, load_topology("tree:2x2"))
    g = _graph()
    plan = build_plan(g, part, 4, layout=lay)
    path = write_plan(plan, tmp_path / "rt.plan")
    shards = json.loads((path / "manifest.json").read_text())["shards"]
    A = g.to_scipy().tocsr()
    want = [int(np.count_nonzero(part[np.unique(A[part == r].indices)] != r)) for r in range(4)]
    assert [s["halo"] for s in shards] == want and sum(want) > 0
    assert all(s["held"] == 2 for s in shards)


def test_export_onto_a_link_to_an_empty_folder_replaces_the_link(tmp_path):
    part = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    p = load_plan(write_plan(build_plan(_graph(), part, 2), tmp_path / "g.plan"))
    (tmp_path / "target").mkdir()
    os.symlink(tmp_path / "target", tmp_path / "link")
    out = export_pyg(p, tmp_path / "link")
    assert out.is_dir() and not out.is_symlink() and (out / "META.json").is_file()
    assert list((tmp_path / "target").iterdir()) == []
