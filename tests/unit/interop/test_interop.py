"""Interop: import hand-made files in each foreign layout (DGL, PyG, METIS, CAGNET)
and round-trip a plan's partition through every export."""
import json

import numpy as np
import pytest

from partplan import BackendUnavailableError, Graph, PartitionError
from partplan.io.foreign import (
    detect_kind, read_cagnet_part_sizes, read_dgl_partition, read_partition_any, read_pyg_partition)
from partplan.interop.export import export_dgl, export_metis, export_plan, export_pyg
from partplan.plan import build_plan, load_plan, write_plan

torch = pytest.importorskip("torch")


@pytest.fixture
def plan(tmp_path):
    rng = np.random.default_rng(0)
    n = 90
    g = Graph.from_edges(rng.integers(0, n, 400), rng.integers(0, n, 400), rng.random(400) + 1, n=n,
                         name="toy")
    part = rng.integers(0, 4, n)
    path = write_plan(build_plan(g, part, 4), tmp_path / "toy.plan")
    return g, part, load_plan(path), path


# ---------------------------------------------------------------- imports of hand-made files
def test_cagnet_part_sizes(tmp_path):
    f = tmp_path / "g.part-sizes"
    f.write_text("3\n2\n4\n")
    assert read_cagnet_part_sizes(f, 9).tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 2]
    assert read_partition_any(f, 9).tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 2]
    with pytest.raises(PartitionError, match="sum to 9 but the graph has 10"):
        read_partition_any(f, 10)
    f.write_text("3 -1")
    with pytest.raises(PartitionError, match="negative block size"):
        read_cagnet_part_sizes(f)
    f.write_text("3 x")
    with pytest.raises(PartitionError, match="'x' is not an integer"):
        read_cagnet_part_sizes(f)


def test_metis_part_file(tmp_path):
    f = tmp_path / "g.part.3"
    f.write_text("0\n2\n1\n2\n")
    assert read_partition_any(f, 4).tolist() == [0, 2, 1, 2]
    with pytest.raises(PartitionError):
        read_partition_any(f, 5)


def _dgl_config(tmp_path, node_map, num_nodes=5):
    cfg = {"graph_name": "test", "part_method": "metis", "num_parts": 2, "halo_hops": 1,
           "node_map": node_map, "edge_map": {"_N:_E:_N": [[0, 4], [4, 7]]},
           "ntypes": {"_N": 0}, "etypes": {"_N:_E:_N": 0}, "num_nodes": num_nodes, "num_edges": 7,
           "part-0": {"node_feats": "part0/node_feat.dgl", "edge_feats": "part0/edge_feat.dgl",
                      "part_graph": "part0/graph.dgl"}}
    (tmp_path / "test.json").write_text(json.dumps(cfg))
    return tmp_path / "test.json"


def test_dgl_reshuffled_ranges_with_orig_nids(tmp_path):
    # DGL new ids 0..2 are part 0, 3..4 part 1; new id -> original id:
    _dgl_config(tmp_path, {"_N": [[0, 3], [3, 5]]})
    np.save(tmp_path / "orig_nids.npy", np.array([4, 0, 2, 1, 3]))
    # original 4, 0, 2 -> part 0; original 1, 3 -> part 1
    assert read_dgl_partition(tmp_path, 5).tolist() == [0, 1, 0, 1, 0]
    assert read_partition_any(tmp_path, 5).tolist() == [0, 1, 0, 1, 0]
    assert read_partition_any(tmp_path / "test.json", 5).tolist() == [0, 1, 0, 1, 0]
    assert read_dgl_partition(tmp_path, ids="dgl").tolist() == [0, 0, 0, 1, 1]


def test_dgl_orig_nids_as_torch_file(tmp_path):
    _dgl_config(tmp_path, {"_N": [[0, 3], [3, 5]]})
    torch.save(torch.tensor([4, 0, 2, 1, 3]), tmp_path / "orig_nids.pt")
    assert read_dgl_partition(tmp_path, 5).tolist() == [0, 1, 0, 1, 0]


def test_dgl_without_mapping_is_a_clear_error(tmp_path):
    _dgl_config(tmp_path, {"_N": [[0, 3], [3, 5]]})
    with pytest.raises(PartitionError, match="reshuffled.*orig_nids.npy"):
        read_dgl_partition(tmp_path, 5)
    (tmp_path / "part0").mkdir()
    (tmp_path / "part0" / "orig_nids.dgl").write_bytes(b"\0")
    with pytest.raises(BackendUnavailableError, match="needs dgl"):
        read_dgl_partition(tmp_path, 5)


def test_dgl_messages_name_the_bad_file_and_what_its_values_are(tmp_path):
    """A config that is no valid JSON is named with its error (not "found 0 configs"); an
    orig_nids of fractions is said to hold node ids (not part ids); a PyG node map holding a dict of
    several tensors says so."""
    (tmp_path / "g.json").write_text('{"num_parts": 2, ')
    with pytest.raises(PartitionError, match=r"g\.json: partition config: not valid JSON"):
        read_dgl_partition(tmp_path, 5)
    (tmp_path / "g.json").unlink()
    _dgl_config(tmp_path, {"_N": [[0, 3], [3, 5]]})
    np.save(tmp_path / "orig_nids.npy", np.array([4, 0, 2.5, 1, 3]))
    with pytest.raises(PartitionError, match="orig_nids must hold integer node ids: vertex 2 has 2.5"):
        read_dgl_partition(tmp_path, 5)
    torch.save({"a": torch.arange(3), "b": torch.arange(3)}, tmp_path / "node_map.pt")
    with pytest.raises(PartitionError, match=r"got a dict of 2 entries \('a', 'b'\)"):
        read_pyg_partition(tmp_path / "node_map.pt", 3)


def test_dgl_old_layouts(tmp_path):
    _dgl_config(tmp_path, "node_map.npy")                       # non-reshuffled: part per original id
    np.save(tmp_path / "node_map.npy", np.array([1, 0, 0, 1, 1]))
    assert read_partition_any(tmp_path, 5).tolist() == [1, 0, 0, 1, 1]
    _dgl_config(tmp_path, [3, 5])                                # oldest: range ends, no mapping needed with ids=dgl
    assert read_dgl_partition(tmp_path, ids="dgl").tolist() == [0, 0, 0, 1, 1]


def test_dgl_bad_configs(tmp_path):
    _dgl_config(tmp_path, {"_N": [[0, 3], [4, 5]]})
    np.save(tmp_path / "orig_nids.npy", np.arange(5))
    with pytest.raises(PartitionError, match="not contiguous"):
        read_dgl_partition(tmp_path)
    _dgl_config(tmp_path, {"_N": [[0, 3], [3, 5]], "_M": [[0, 1], [1, 2]]})
    with pytest.raises(BackendUnavailableError, match="heterogeneous"):
        read_dgl_partition(tmp_path)
    _dgl_config(tmp_path, {"_N": [[0, 5]]})
    with pytest.raises(PartitionError, match="1 ranges for num_parts = 2"):
        read_dgl_partition(tmp_path)


def test_pyg_node_map(tmp_path):
    torch.save(torch.tensor([2, 0, 1, 1]), tmp_path / "node_map.pt")
    (tmp_path / "META.json").write_text(json.dumps({"num_parts": 3, "is_hetero": False,
                                                     "node_types": None, "edge_types": None}))
    assert detect_kind(tmp_path) == "pyg"
    assert read_partition_any(tmp_path, 4).tolist() == [2, 0, 1, 1]
    assert read_partition_any(tmp_path / "node_map.pt", 4).tolist() == [2, 0, 1, 1]
    with pytest.raises(PartitionError, match="4 entries but the graph has 5"):
        read_pyg_partition(tmp_path, 5)
    (tmp_path / "bad.pt").write_bytes(b"not a torch file")
    with pytest.raises(PartitionError, match="bad.pt: not a readable torch tensor file"):
        read_partition_any(tmp_path / "bad.pt", 4)


def test_missing_path():
    with pytest.raises(PartitionError, match="no such partition file"):
        read_partition_any("/nonexistent/x.part", 3)


# ---------------------------------------------------------------- exports and round trips
def test_metis_round_trip(plan, tmp_path):
    g, part, p, path = plan
    out = export_plan(path, "metis", tmp_path / "toy.part.4")
    assert read_partition_any(out, g.n).tolist() == part.tolist()
    assert len(out.read_text().splitlines()) == g.n


def test_dgl_round_trip_and_config(plan, tmp_path):
    g, part, p, path = plan
    out = export_dgl(p, tmp_path / "dgl")
    cfg = json.loads((out / "toy.json").read_text())
    assert cfg["num_parts"] == 4 and cfg["num_nodes"] == g.n and cfg["num_edges"] == g.nnz
    ranges = np.array(cfg["node_map"]["_N"])
    assert ranges[0, 0] == 0 and np.all(ranges[1:, 0] == ranges[:-1, 1])
    assert (ranges[:, 1] - ranges[:, 0]).tolist() == np.bincount(part, minlength=4).tolist()
    erange = np.array(cfg["edge_map"]["_N:_E:_N"])
    # DGL puts an edge with its destination: A[i, j] (message j -> i) goes with part[i]
    assert (erange[:, 1] - erange[:, 0]).tolist() == np.bincount(part[g.rows], minlength=4).tolist()
    assert read_partition_any(out, g.n).tolist() == part.tolist()                    # JSON + orig_nids
    assert read_partition_any(out / "partition_assignment", g.n).tolist() == part.tolist()
    assert np.load(out / "node_map.npy").tolist() == part.tolist()
    assert not list(out.rglob("*.dgl"))                                              # documented: none written
    with pytest.raises(PartitionError, match="not empty"):
        export_dgl(p, out)


def test_pyg_round_trip_and_edges(plan, tmp_path):
    g, part, p, path = plan
    out = export_pyg(p, tmp_path / "pyg")
    assert read_partition_any(out, g.n).tolist() == part.tolist()
    meta = json.loads((out / "META.json").read_text())
    assert meta == {"num_parts": 4, "is_hetero": False, "node_types": None, "edge_types": None,
                    "node_offset": None, "is_sorted": True}
    A = g.to_scipy().tocoo()
    want = {(int(j), int(i), float(v)) for i, j, v in zip(A.row, A.col, A.data)}
    got = set()
    emap = torch.load(out / "edge_map.pt").numpy()
    for r in range(4):
        gr = torch.load(out / f"part_{r}" / "graph.pt")
        ef = torch.load(out / f"part_{r}" / "edge_feats.pt")
        nf = torch.load(out / f"part_{r}" / "node_feats.pt")
        assert gr["size"] == (g.n, g.n)
        assert np.all(part[gr["col"].numpy()] == r)            # PyG: edge goes with its destination (col)
        assert np.all(np.diff(gr["col"].numpy()) >= 0)         # sorted by col, as META says
        assert np.all(emap[gr["edge_id"].numpy()] == r)
        assert nf["global_id"].tolist() == np.flatnonzero(part == r).tolist()
        got |= {(int(a), int(b), float(v)) for a, b, v in
                zip(gr["row"].tolist(), gr["col"].tolist(), ef["feats"]["edge_attr"].tolist())}
    assert got == want


def test_export_unknown_target(plan, tmp_path):
    g, part, p, path = plan
    with pytest.raises(BackendUnavailableError, match="unknown export target"):
        export_plan(path, "gunrock", tmp_path / "x")
    assert export_metis(part, tmp_path / "a.npy").exists()


# ---------------------------------------------------------------- the real PyG loader
def test_pyg_export_loads_in_torch_geometric(plan, tmp_path):
    """The export loads in PyG's own LocalGraphStore / LocalFeatureStore
    .from_partition; oracle: the graph's edge list and the partition array."""
    pyg_dist = pytest.importorskip("torch_geometric.distributed")
    g, part, p, path = plan
    out = export_plan(path, "pyg", tmp_path / "pyg")
    A = g.to_scipy().tocoo()
    # PyG edge (row=src, col=dst) for every nonzero A[i, j] = message j -> i, with its weight
    want = sorted(zip(A.col.tolist(), A.row.tolist(), A.data.tolist()))
    got, all_eids, all_nodes = [], [], []
    for r in range(4):
        gs = pyg_dist.LocalGraphStore.from_partition(str(out), r)
        fs = pyg_dist.LocalFeatureStore.from_partition(str(out), r)
        assert gs.num_partitions == 4 and gs.partition_idx == r and gs.is_sorted is True
        assert gs.node_pb.tolist() == part.tolist()
        (attr,) = gs.get_all_edge_attrs()
        assert tuple(attr.size) == (g.n, g.n)
        ei = gs.get_edge_index(attr)
        eid = gs.get_edge_id(attr)
        src, dst = ei[0].numpy(), ei[1].numpy()
        assert src.size == eid.numel() > 0
        assert np.all(part[dst] == r)                          # a part holds the in-edges of its nodes
        assert np.all(np.diff(dst) >= 0)                       # is_sorted: by destination
        assert np.all(gs.edge_pb.numpy()[eid.numpy()] == r)
        nodes = fs.get_global_id(None).numpy()
        assert nodes.tolist() == np.flatnonzero(part == r).tolist()
        assert np.array_equal(fs.get_global_id((None, None)).numpy(), eid.numpy())
        w = fs.get_tensor(group_name=(None, None), attr_name="edge_attr").numpy()
        got += list(zip(src.tolist(), dst.tolist(), w.tolist()))
        all_eids.append(eid.numpy())
        all_nodes.append(nodes)
    assert sorted(got) == want                                 # every edge once, with its weight
    assert np.sort(np.concatenate(all_eids)).tolist() == list(range(g.nnz))
    assert np.sort(np.concatenate(all_nodes)).tolist() == list(range(g.n))
    # edge ids index the edges in the order PyG's edge_map does: edge e of part r
    # is the e-th nonzero of the CSR (row = target i, col = source j)
    ids = np.concatenate(all_eids)
    pairs = np.array([(d, s) for s, d, _ in got])
    order = np.argsort(ids)
    assert np.array_equal(pairs[order, 0], g.rows) and np.array_equal(pairs[order, 1], g.indices)
