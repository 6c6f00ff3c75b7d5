"""`export_plan(..., graph=Data)`: PyG's Partitioner convention, checked with the
assertions PyG's own Partitioner makes on what it writes
(``data.edge_index[:, edge_id] == (row, col)``, ``data.edge_attr[edge_id] ==
edge_attr``), its edge-to-destination rule, and torch_geometric's loaders."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pyg_dist = pytest.importorskip("torch_geometric.distributed")
from torch_geometric.data import Data

import partplan
from partplan import PartitionError
from partplan.interop import export_plan

N, K = 40, 3


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("exp")
    g = torch.Generator().manual_seed(4)
    ei = torch.randint(0, N, (2, 200), generator=g)
    ei = torch.cat([ei, ei[:, :15], torch.tensor([[3, 3, 7], [3, 3, 7]])], dim=1)   # multi-edges, loops
    d = Data(edge_index=ei, num_nodes=N, edge_attr=torch.randn(ei.size(1), 4, generator=g),
             x=torch.randn(N, 5, generator=g), y=torch.randint(0, 3, (N,), generator=g),
             train_mask=torch.rand(N, generator=g) < 0.5)
    plan = partplan.plan_from_pyg(d, K, normalize="gcn", model="baseline", out=tmp / "g.plan")
    return tmp, d, plan


def test_export_holds_each_user_edge_once_with_pygs_ids(case):
    tmp, d, plan = case
    out = export_plan(tmp / "g.plan", "pyg", tmp / "with_attr", graph=d)
    E = d.edge_index.size(1)
    node_map = torch.load(out / "node_map.pt")
    edge_map = torch.load(out / "edge_map.pt")
    assert np.array_equal(node_map.numpy(), plan.part) and edge_map.numel() == E
    assert torch.equal(edge_map, node_map[d.edge_index[1]])        # an edge goes with its destination
    seen = []
    for r in range(K):
        gr = torch.load(out / f"part_{r}" / "graph.pt")
        ef = torch.load(out / f"part_{r}" / "edge_feats.pt")
        eid = gr["edge_id"]
        assert torch.equal(d.edge_index[:, eid], torch.stack((gr["row"], gr["col"])))   # PyG's assertion
        assert torch.equal(ef["global_id"], eid)
        assert torch.equal(d.edge_attr[eid, :], ef["feats"]["edge_attr"])               # PyG's assertion
        assert bool((gr["col"][1:] >= gr["col"][:-1]).all())                             # is_sorted
        seen.append(eid)
        fs = pyg_dist.LocalFeatureStore.from_partition(str(out), r)
        ids = fs.get_global_id(None)
        assert torch.equal(fs.get_tensor(group_name=None, attr_name="x"), d.x[ids])
        assert torch.equal(fs.get_tensor(group_name=None, attr_name="y"), d.y[ids])
        nf = torch.load(out / f"part_{r}" / "node_feats.pt")
        assert set(nf["feats"]) == {"x", "y", "train_mask"}                               # no None values
    assert torch.equal(torch.sort(torch.cat(seen)).values, torch.arange(E))             # each column once
    assert torch.equal(torch.load(out / "label.pt"), d.y)


def test_export_without_edge_attr_stores_no_none(case):
    tmp, d, _ = case
    bare = Data(edge_index=d.edge_index, num_nodes=N)
    out = export_plan(tmp / "g.plan", "pyg", tmp / "bare", graph=bare)
    for r in range(K):
        assert torch.load(out / f"part_{r}" / "edge_feats.pt") == {}
        nf = torch.load(out / f"part_{r}" / "node_feats.pt")
        assert nf["feats"] == {}
        fs = pyg_dist.LocalFeatureStore.from_partition(str(out), r)
        assert fs.get_all_tensor_attrs() == []           # PyG reports no edge_attr, no x
    other = Data(edge_index=d.edge_index.flip(0), num_nodes=N)
    with pytest.raises(PartitionError, match="not the graph of this plan"):
        export_plan(tmp / "g.plan", "pyg", tmp / "other", graph=other)
    with pytest.raises(PartitionError, match="PyG Data, a partplan Graph or a graph file"):
        export_plan(tmp / "g.plan", "pyg", tmp / "bad", graph=42)
