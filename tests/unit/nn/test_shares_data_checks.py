"""``partplan.write_shares`` / ``partplan shares`` on data that is not the plan's: a field with the
wrong number of rows, edges that are not the plan's graph (fewer, or repeated), a plan whose last
rank holds no rows. Oracles: the Data itself (numpy indexing) and the refusal's named field."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")
from torch_geometric.data import Data  # noqa: E402

import partplan  # noqa: E402
from partplan.errors import PlanError  # noqa: E402
from partplan.nn import LocalHalo  # noqa: E402
from partplan.nn.shares import write_shares  # noqa: E402

N = 40


def _data(seed=3):
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, N, (2, 160), generator=g)
    return Data(edge_index=ei, x=torch.randn(N, 4, generator=g), y=torch.randint(0, 3, (N,), generator=g),
                train_mask=torch.rand(N, generator=g) < 0.5, edge_attr=torch.randn(160, 2, generator=g))


@pytest.fixture(scope="module")
def plan_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("sharecheck") / "g.plan"
    partplan.plan_from_pyg(_data(), 2, out=path, seed=0)
    return path


def _copy(plan_dir, tmp_path):
    out = tmp_path / "p.plan"
    shutil.copytree(plan_dir, out)
    return out


@pytest.mark.parametrize("field,short", [("y", "y"), ("x", "x"), ("train_mask", "train_mask"),
                                         ("edge_attr", "edge_attr")])
def test_a_field_with_other_rows_is_refused_by_name(plan_dir, tmp_path, field, short):
    d = _data()
    d[field] = d[field][:-1]
    with pytest.raises(PlanError, match=f"^field '{short}': "):
        write_shares(_copy(plan_dir, tmp_path), d)


def test_fewer_edges_than_the_plan_are_another_graph(plan_dir, tmp_path):
    d = _data()
    d.edge_index = d.edge_index[:, ::2]
    d.edge_attr = d.edge_attr[::2]
    with pytest.raises(PlanError, match="is not the graph of plan"):
        write_shares(_copy(plan_dir, tmp_path), d)


def test_repeated_edges_are_other_multiplicities(plan_dir, tmp_path):
    d = _data()
    d.edge_index = torch.cat([d.edge_index, d.edge_index[:, :30]], 1)
    d.edge_attr = torch.cat([d.edge_attr, d.edge_attr[:30]], 0)
    with pytest.raises(PlanError, match="other multiplicities or weights"):
        write_shares(_copy(plan_dir, tmp_path), d)


def test_the_plans_own_data_is_accepted(plan_dir, tmp_path):
    d = _data()
    op = LocalHalo(write_shares(_copy(plan_dir, tmp_path), d))
    for v, sh in zip(op.ranks, op.shares):
        assert torch.equal(sh["node"]["y"], d.y[torch.from_numpy(v.local_ids)])


def test_a_rank_without_rows_gets_an_empty_share(tmp_path):
    """Every row on rank 0 of 2: rank 1's share holds no rows and no edges (an IndexError before)."""
    d = Data(edge_index=torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), x=torch.randn(4, 2))
    g = partplan.from_pyg({"edge_index": d.edge_index, "num_nodes": 4})
    path = partplan.write_plan(partplan.build_plan(g, np.zeros(4, dtype=np.int64), 2), tmp_path / "e.plan")
    op = LocalHalo(write_shares(path, d))
    assert [v.num_local for v in op.ranks] == [4, 0]
    assert op.shares[1]["node"]["x"].shape == (0, 2) and op.ranks[1].edge_index.shape == (2, 0)
    assert torch.equal(op.shares[0]["node"]["x"], d.x[torch.from_numpy(op.ranks[0].local_ids)])


def test_cli_names_the_data_file(plan_dir, tmp_path, capsys):
    from partplan.cli.main import main
    d = _data()
    d.y = d.y[:-1]
    torch.save(d, tmp_path / "short_y.pt")
    rc = main(["shares", str(_copy(plan_dir, tmp_path)), "--data", str(tmp_path / "short_y.pt"), "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("partplan: error:")
    assert "short_y.pt" in err and "field 'y'" in err


def test_the_data_of_a_plan_weighted_by_any_edge_field_is_accepted(tmp_path):
    d = _data()
    d.w = torch.rand(160, generator=torch.Generator().manual_seed(1)) + 0.1
    partplan.plan_from_pyg(d, 2, out=tmp_path / "w.plan", shares=True, seed=0, weight="w")
    op = LocalHalo(tmp_path / "w.plan")
    assert sum(v.num_local for v in op.ranks) == N


def test_the_data_of_a_symmetrized_plan_is_accepted(tmp_path):
    from partplan.plan import build_plan, write_plan
    d = _data()
    g = partplan.from_pyg(d).normalize(symmetrize=True)
    part = np.arange(N) % 2
    path = write_plan(build_plan(g, part, 2, meta={"symmetrized": True}), tmp_path / "s.plan")   # as --symmetrize
    op = LocalHalo(write_shares(path, d))
    assert torch.equal(op.shares[1]["node"]["x"], d.x[torch.from_numpy(op.ranks[1].local_ids)])
    half = write_plan(build_plan(g, part, 2), tmp_path / "u.plan")      # an undirected graph's own plan
    with pytest.raises(PlanError, match="is not the graph of plan"):     # one direction of each edge: not it
        write_shares(half, d)


def test_other_edge_and_link_fields_are_carried_or_left_as_pyg_says(plan_dir, tmp_path):
    d = _data()
    d.edge_mask = torch.rand(160) < 0.5                     # one per edge: an edge field
    d.edge_label_index = torch.randint(0, N, (2, 7))        # neither n nor e rows: not carried
    d.edge_label = torch.ones(7)
    from partplan.errors import PartplanWarning
    with pytest.warns(PartplanWarning, match=r"not written to the shares") as said:
        op = LocalHalo(write_shares(_copy(plan_dir, tmp_path), d))
    msg = str(said[0].message)
    assert "edge_label_index (2 rows)" in msg and "edge_label (7 rows)" in msg and "edge_mask" not in msg
    assert "edge_mask" in op.shares[0]["edge"] and "edge_label" not in op.shares[0]["edge"]
    assert torch.equal(op.shares[0]["edge"]["edge_mask"], d.edge_mask[op.ranks[0].edge_ids])


def test_a_graph_level_label_is_left_out_not_refused(plan_dir, tmp_path):
    """PyG's graph classification keeps one label per graph in ``y`` (one row): not a node field, so
    the shares carry the other fields and no ``y``."""
    d = _data()
    d.y = torch.tensor([2])
    plan = _copy(plan_dir, tmp_path)
    write_shares(plan, d)
    op = LocalHalo(plan)
    for sh in op.shares:
        assert "y" not in sh["node"] and "x" in sh["node"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_values_train_gcn_refuses_are_refused_in_the_shares_too(plan_dir, tmp_path, dtype):
    """A non-finite feature or a negative label on a masked vertex was written as is (the data-file
    paths of `train gcn --data` and `shares --node-data` refuse them): one PlanError naming the field
    and the entry. A meta tensor is named as such."""
    d = _data()
    d.x = d.x.to(dtype)
    d.x[5, 2] = float("nan")
    with pytest.raises(PlanError, match=r"field 'x': non-finite feature x\[5, 2\] = nan"):
        write_shares(_copy(plan_dir, tmp_path / "nan"), d)
    d = _data()
    d.train_mask[:] = True
    d.y[7] = -1
    with pytest.raises(PlanError, match="field 'y': vertex 7 is in a mask but has label -1"):
        write_shares(_copy(plan_dir, tmp_path / "neg"), d)
    d = _data()
    d.x = torch.empty(N, 4, device="meta")
    with pytest.raises(PlanError, match="meta device"):
        write_shares(_copy(plan_dir, tmp_path / "meta"), d)


def test_a_target_to_source_plan_is_named_as_such(tmp_path):
    """Shares read PyG's source -> target flow: plan_from_pyg refuses shares=True with the other flow
    before it writes anything, and shares for a plan built with it name the flow, not another graph."""
    from partplan.errors import OptionError
    data = _data()
    with pytest.raises(OptionError, match="source_to_target flow"):
        partplan.plan_from_pyg(data, 2, out=tmp_path / "a.plan", flow="target_to_source", shares=True, seed=0)
    assert not (tmp_path / "a.plan").exists()
    partplan.plan_from_pyg(data, 2, out=tmp_path / "b.plan", flow="target_to_source", seed=0)
    with pytest.raises(PlanError, match="flow='target_to_source'"):
        write_shares(tmp_path / "b.plan", data)
    other = Data(edge_index=torch.flip(data.edge_index, [0])[:, :-3], x=data.x, num_nodes=N)
    with pytest.raises(PlanError, match="is not the graph of plan"):     # really another graph
        write_shares(tmp_path / "b.plan", other)
    # the manifest does not keep the flow: a default-flow plan given flipped data names both causes
    partplan.plan_from_pyg(data, 2, out=tmp_path / "c.plan", seed=0)
    flipped = Data(edge_index=torch.flip(data.edge_index, [0]), x=data.x, num_nodes=N)
    with pytest.raises(PlanError, match="reversed.*or this data's edge_index is the plan's flipped"):
        write_shares(tmp_path / "c.plan", flipped)
