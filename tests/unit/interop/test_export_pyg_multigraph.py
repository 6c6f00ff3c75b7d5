"""``partplan export PLAN --to pyg DIR --graph D.pt`` on a multigraph (issue #50):
every column of the user's ``edge_index`` is exported once, with PyG's edge id
(the column), multi-edges and self loops kept, so that
``data.edge_index[:, edge_id] == (row, col)`` on every part — the invariant
torch_geometric's own Partitioner asserts. Read back with torch_geometric's
``LocalGraphStore`` / ``LocalFeatureStore``. The CLI runs in-process."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pyg_dist = pytest.importorskip("torch_geometric.distributed")
from torch_geometric.data import Data

import partplan
from partplan.cli.main import main
from partplan.interop import export_plan

N, K = 50, 3


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("multi")
    g = torch.Generator().manual_seed(7)
    ei = torch.randint(0, N, (2, 260), generator=g)
    # duplicated edges (some three times), a reversed copy, self loops twice
    ei = torch.cat([ei, ei[:, :30], ei[:, :5], ei[:, 40:50].flip(0), torch.tensor([[4, 4, 11], [4, 4, 11]])], 1)
    E = ei.size(1)
    r = torch.rand(N, generator=g)
    d = Data(edge_index=ei, num_nodes=N, edge_attr=torch.randn(E, 2, generator=g),
             x=torch.randn(N, 3, generator=g), y=torch.randint(0, 4, (N,), generator=g),
             train_mask=r < 0.5, val_mask=(r >= 0.5) & (r < 0.75), test_mask=r >= 0.75)
    torch.save(d, tmp / "d.pt")
    return tmp, d


def _check_parts(out, d: Data) -> None:
    E = d.edge_index.size(1)
    node_map = torch.load(out / "node_map.pt")
    assert torch.equal(torch.load(out / "edge_map.pt"), node_map[d.edge_index[1]])   # edge goes with its target
    seen = []
    for r in range(K):
        gr = torch.load(out / f"part_{r}" / "graph.pt")
        eid = gr["edge_id"]
        assert torch.equal(d.edge_index[:, eid], torch.stack((gr["row"], gr["col"])))   # PyG's assertion
        gs = pyg_dist.LocalGraphStore.from_partition(str(out), r)
        (attr,) = gs.get_all_edge_attrs()
        ei, gid = gs.get_edge_index(attr), gs.get_edge_id(attr)
        assert torch.equal(d.edge_index[:, gid], ei)
        fs = pyg_dist.LocalFeatureStore.from_partition(str(out), r)
        assert torch.equal(fs.get_tensor(group_name=(None, None), attr_name="edge_attr"), d.edge_attr[gid])
        ids = fs.get_global_id(None)
        assert torch.equal(fs.get_tensor(group_name=None, attr_name="x"), d.x[ids])
        seen.append(eid)
    allids = torch.cat(seen)
    assert allids.numel() == E                                             # multi-edges not merged
    assert torch.equal(torch.sort(allids).values, torch.arange(E))          # each user edge exactly once


@pytest.mark.parametrize("normalize", ["gcn", "none"])
def test_cli_export_of_a_pt_data_keeps_every_user_edge(case, tmp_path, capsys, normalize):
    tmp, d = case
    plan = tmp_path / "g.plan"
    assert main(["partition", str(tmp / "d.pt"), "-k", str(K), "--engine", "block", "--normalize", normalize,
                 "-o", str(plan), "-q"]) == 0
    out = tmp_path / "pyg"
    assert main(["export", str(plan), "--to", "pyg", str(out), "--graph", str(tmp / "d.pt"),
                 "--data", str(tmp / "d.pt"), "-q"]) == 0
    _check_parts(out, d)
    assert torch.equal(torch.load(out / "label.pt"), d.y)


def test_library_export_of_a_pt_path_and_of_a_plan_from_pyg(case, tmp_path):
    tmp, d = case
    plan = partplan.plan_from_pyg(d, K, normalize="gcn", model="baseline", out=tmp_path / "p.plan",
                                  progress=False)
    assert np.array_equal(plan.part, partplan.load_plan(tmp_path / "p.plan").part)
    _check_parts(export_plan(tmp_path / "p.plan", "pyg", tmp_path / "a", graph=str(tmp / "d.pt")), d)
    _check_parts(export_plan(tmp_path / "p.plan", "pyg", tmp_path / "b", graph=d), d)


def test_bare_edge_index_pt_is_exported_by_column(case, tmp_path, capsys):
    tmp, d = case
    torch.save(d.edge_index, tmp_path / "ei.pt")
    plan = tmp_path / "g.plan"
    assert main(["partition", str(tmp_path / "ei.pt"), "-k", str(K), "--engine", "block", "-o", str(plan),
                 "-q"]) == 0
    out = tmp_path / "pyg"
    assert main(["export", str(plan), "--to", "pyg", str(out), "--graph", str(tmp_path / "ei.pt"), "-q"]) == 0
    ids = []
    for r in range(K):
        gr = torch.load(out / f"part_{r}" / "graph.pt")
        assert torch.equal(d.edge_index[:, gr["edge_id"]], torch.stack((gr["row"], gr["col"])))
        ids.append(gr["edge_id"])
    assert torch.equal(torch.sort(torch.cat(ids)).values, torch.arange(d.edge_index.size(1)))


def test_another_data_is_refused_in_one_line(case, tmp_path, capsys):
    tmp, d = case
    plan = tmp_path / "g.plan"
    assert main(["partition", str(tmp / "d.pt"), "-k", str(K), "--engine", "block", "-o", str(plan), "-q"]) == 0
    other = Data(edge_index=d.edge_index[:, :-3], num_nodes=N)       # the self loops dropped
    torch.save(other, tmp_path / "other.pt")
    capsys.readouterr()
    assert main(["export", str(plan), "--to", "pyg", str(tmp_path / "o"), "--graph", str(tmp_path / "other.pt"),
                 "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("partplan: error: ") and "not the graph of this plan" in err[0]
