"""PyTorch Geometric bridge: Graph.from_edge_index / from_pyg / plan_from_pyg,
the ``.pt`` reader (safe load) and ``.pt`` node-classification data.

The oracle is torch_geometric itself: a MessagePassing layer with
``aggr="add"`` whose message is ``edge_weight * x_j``, run in float64, and
``GCNConv`` (normalize=True) for the "gcn" plans.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tg = pytest.importorskip("torch_geometric")
from torch_geometric.data import Data  # noqa: E402
from torch_geometric.nn import GCNConv, MessagePassing  # noqa: E402

import partplan  # noqa: E402
from partplan import Graph  # noqa: E402
from partplan.cli.main import main  # noqa: E402
from partplan.errors import GraphFormatError, OptionError  # noqa: E402


class WeightedSum(MessagePassing):
    """sum over edges (j -> i) of w_e * x_j, PyG's flow convention."""

    def __init__(self, flow: str = "source_to_target"):
        super().__init__(aggr="add", flow=flow)

    def forward(self, x, edge_index, edge_weight):
        return self.propagate(edge_index, x=x, edge_weight=edge_weight)

    def message(self, x_j, edge_weight):
        return edge_weight.view(-1, 1) * x_j


def _directed(n=60, E=400, seed=0, dup=True):
    """A directed random graph with float64 weights, some duplicated edges and self loops."""
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, E), generator=g)
    if dup:
        ei = torch.cat([ei, ei[:, :25]], dim=1)  # duplicates: PyG sums them
    w = torch.rand(ei.size(1), generator=g, dtype=torch.float64) + 0.1
    x = torch.randn(n, 5, generator=g, dtype=torch.float64)
    return ei, w, x


def _pyg(ei, w, x, flow="source_to_target"):
    return WeightedSum(flow)(x, ei, w).numpy()


@pytest.mark.parametrize("flow", ["source_to_target", "target_to_source"])
def test_from_edge_index_matches_message_passing(flow):
    ei, w, x = _directed()
    assert not torch.equal(ei, ei.flip(0))  # really directed
    g = Graph.from_edge_index(ei, 60, edge_weight=w, flow=flow)
    Z = g.to_scipy() @ x.numpy()
    np.testing.assert_allclose(Z, _pyg(ei, w, x, flow), rtol=0, atol=1e-12)
    # and the two flows really differ on a directed graph
    other = "target_to_source" if flow == "source_to_target" else "source_to_target"
    assert not np.allclose(Z, _pyg(ei, w, x, other))


def test_from_edge_index_numpy_and_pattern_and_isolated_tail():
    ei, _, x = _directed(n=40, E=120, seed=1)
    x = torch.randn(50, 3, dtype=torch.float64)  # vertices 40..49 have no edges
    g = Graph.from_edge_index(ei.numpy(), 50)  # duplicated edges: weighted by multiplicity
    assert g.n == 50 and g.data is not None and g.data.max() >= 2
    ones = torch.ones(ei.size(1), dtype=torch.float64)
    np.testing.assert_allclose(g.to_scipy() @ x.numpy(), _pyg(ei, ones, x), rtol=0, atol=1e-12)
    # distinct edges without weights: a pattern matrix, same aggregation
    u = torch.unique(ei, dim=1)
    gu = Graph.from_edge_index(u, 50)
    assert gu.data is None and gu.nnz == u.size(1)
    np.testing.assert_allclose(gu.to_scipy() @ x.numpy(), _pyg(u, ones[: u.size(1)], x), rtol=0, atol=1e-12)
    assert Graph.from_edge_index(ei).n == int(ei.max()) + 1
    empty = Graph.from_edge_index(np.zeros((2, 0), dtype=np.int64), 3)
    assert empty.n == 3 and empty.nnz == 0


def test_from_edges_convention_is_target_to_source():
    """from_edges(src, dst) puts A[src, dst]: PyG's target_to_source with edge_index = [src, dst]."""
    ei, w, x = _directed(seed=2)
    g = Graph.from_edges(ei[0].numpy(), ei[1].numpy(), w.numpy(), 60)
    h = Graph.from_edge_index(ei, 60, edge_weight=w, flow="target_to_source")
    assert g.fingerprint == h.fingerprint


@pytest.mark.parametrize("kwargs,match,field", [
    (dict(edge_index=np.zeros((3, 4), dtype=np.int64)), r"shape \(2, E\)", "edge_index"),
    (dict(edge_index=np.zeros(4, dtype=np.int64)), r"shape \(2, E\)", "edge_index"),
    (dict(edge_index=np.zeros((2, 4))), "integer", "edge_index"),
    (dict(edge_index=np.array([[0, 5], [1, 2]]), num_nodes=5), "out of range", "edge_index"),
    (dict(edge_index=np.array([[0, -1], [1, 2]])), "negative vertex id", "edge_index"),
    (dict(edge_index=np.array([[0, 1], [1, 2]]), num_nodes=-3), "non-negative", "num_nodes"),
    (dict(edge_index=np.array([[0, 1], [1, 2]]), edge_weight=np.array([1.0, np.nan])), "non-finite",
     "edge_weight"),
    (dict(edge_index=np.array([[0, 1], [1, 2]]), edge_weight=np.array([1.0, -2.0])), "negative weight",
     "edge_weight"),
    (dict(edge_index=np.array([[0, 1], [1, 2]]), edge_weight=np.array([1.0, 2.0, 3.0])), r"shape \(2,\)",
     "edge_weight"),
])
def test_from_edge_index_bad_input(kwargs, match, field):
    ei = kwargs.pop("edge_index")
    with pytest.raises(GraphFormatError, match=match) as e:
        Graph.from_edge_index(ei, **kwargs)
    assert e.value.field == field


def test_from_edge_index_bad_flow():
    with pytest.raises(OptionError, match="flow"):
        Graph.from_edge_index(np.array([[0], [1]]), flow="both")


def test_from_pyg_equals_from_edge_index():
    ei, w, x = _directed(seed=3)
    d = Data(x=x, edge_index=ei, edge_weight=w)
    g = partplan.from_pyg(d, weight="edge_weight")
    assert g.fingerprint == Graph.from_edge_index(ei, 60, edge_weight=w).fingerprint
    np.testing.assert_allclose(g.to_scipy() @ x.numpy(), _pyg(ei, w, x), rtol=0, atol=1e-12)
    # weights only when asked: by default every edge weighs 1 (as GCNConv(x, edge_index) does)
    ones = torch.ones(ei.size(1), dtype=torch.float64)
    np.testing.assert_allclose(partplan.from_pyg(d).to_scipy() @ x.numpy(), _pyg(ei, ones, x), rtol=0, atol=1e-12)
    # a 1-D edge_attr is the weight when named; num_nodes comes from the Data (x has 70 rows here)
    d2 = Data(x=torch.zeros(70, 1), edge_index=ei, edge_attr=w)
    g2 = partplan.from_pyg(d2, weight="edge_attr")
    assert g2.n == 70 and g2.fingerprint == Graph.from_edge_index(ei, 70, edge_weight=w).fingerprint
    np.testing.assert_allclose(partplan.from_pyg(d2).to_scipy()[:60, :60] @ x.numpy(), _pyg(ei, ones, x),
                               rtol=0, atol=1e-12)
    # a wide edge_attr: accepted (left to the layers), refused only when named as the weight
    d3 = Data(edge_index=ei, edge_attr=torch.zeros(ei.size(1), 3), num_nodes=60)
    assert partplan.from_pyg(d3).fingerprint == Graph.from_edge_index(ei, 60).fingerprint
    plan = partplan.plan_from_pyg(d3, 2, model="baseline")
    assert plan.manifest["graph"]["n"] == 60
    with pytest.raises(GraphFormatError, match="edge_attr"):
        partplan.from_pyg(d3, weight="edge_attr")
    with pytest.raises(GraphFormatError, match="no edge_index"):
        partplan.from_pyg(Data(x=x))


def test_plan_from_pyg_replays_pyg_aggregation(tmp_path):
    from partplan.runtime.validate import replay, validate_plan
    ei, w, x = _directed(seed=4)
    d = Data(x=x, edge_index=ei, edge_weight=w)
    out = tmp_path / "g.plan"
    plan = partplan.plan_from_pyg(d, 3, out=out, model="baseline", dtype="float64", weight="edge_weight")
    np.testing.assert_allclose(replay(plan, x.numpy()), _pyg(ei, w, x), rtol=0, atol=1e-12)
    rep = validate_plan(out, partplan.from_pyg(d, weight="edge_weight"))
    assert rep["ok"], rep


@pytest.mark.parametrize("directed", [False, True])
def test_plan_from_pyg_gcn_matches_gcnconv(directed):
    """normalize="gcn" = GCNConv's propagation (weight = I, no bias), directed or not."""
    from partplan.runtime.validate import replay
    from torch_geometric.utils import to_undirected
    ei, _, x = _directed(seed=5, dup=False)
    ei = torch.unique(ei[:, ei[0] != ei[1]], dim=1)
    if not directed:
        ei = to_undirected(ei, num_nodes=60)
    conv = GCNConv(5, 5, bias=False).double()
    with torch.no_grad():
        conv.lin.weight.copy_(torch.eye(5, dtype=torch.float64))
        ref = conv(x, ei).numpy()
    plan = partplan.plan_from_pyg(Data(x=x, edge_index=ei), 2, normalize="gcn", model="baseline",
                                  dtype="float64")
    np.testing.assert_allclose(replay(plan, x.numpy()), ref, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------------- .pt files
def test_pt_data_and_edge_index_read_graph(tmp_path):
    from partplan.io import read_graph
    ei, w, x = _directed(seed=6)
    torch.save(Data(x=x, edge_index=ei, edge_weight=w), tmp_path / "d.pt")
    torch.save(ei, tmp_path / "ei.pt")
    want = Graph.from_edge_index(ei, 60, edge_weight=w)
    assert read_graph(tmp_path / "d.pt").fingerprint == want.fingerprint
    g = read_graph(tmp_path / "ei.pt")
    assert g.fingerprint == Graph.from_edge_index(ei).fingerprint
    assert read_graph(tmp_path / "d.pt", flow="target_to_source").fingerprint == want.transpose().fingerprint


def test_pt_partition_through_cli(tmp_path, capsys):
    from partplan import analyze
    ei, w, x = _directed(seed=7)
    p = tmp_path / "g.pt"
    torch.save(Data(x=x, edge_index=ei, edge_weight=w, num_nodes=60), p)
    out = tmp_path / "g.npy"
    assert main(["partition", str(p), "-k", "2", "--model", "baseline", "-o", str(out)]) == 0
    capsys.readouterr()
    part = np.load(out)
    assert part.shape == (60,) and set(np.unique(part)) <= {0, 1}
    g = partplan.from_pyg(torch.load(p, weights_only=False))
    assert analyze(g, part).total_volume >= 0


class _Payload:
    def __init__(self):
        self.value = 42


@pytest.mark.parametrize("obj,match", [
    ({"a": _Payload()}, "refusing to unpickle"),
    ({"edge_index": torch.zeros(2, 3, dtype=torch.long)}, "not a PyG Data or edge_index tensor"),
    (torch.arange(5), "shape"),
])
def test_pt_refusals_are_one_cli_error(tmp_path, capsys, obj, match):
    p = tmp_path / "bad.pt"
    torch.save(obj, p)
    assert main(["partition", str(p), "-k", "2", "--model", "baseline", "-q"]) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("partplan: error:"), err
    assert match in err and "bad.pt" in err


def test_pt_refusal_never_runs_the_pickle(tmp_path):
    import os
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (os.mkdir, (str(marker),))

    p = tmp_path / "evil.pt"
    torch.save({"x": Evil()}, p)
    with pytest.raises(GraphFormatError, match="refusing to unpickle"):
        partplan.io.read_graph(p)
    assert not marker.exists()
    import pickle
    import warnings
    p.write_bytes(pickle.dumps(Evil(), protocol=4))   # a plain pickle: one error, no torch warning beside it
    with warnings.catch_warnings(record=True) as seen, pytest.raises(GraphFormatError, match="refusing to unpickle"):
        warnings.simplefilter("always")
        partplan.io.read_graph(p)
    assert not marker.exists() and not seen, [str(w.message) for w in seen]


@pytest.mark.parametrize("junk", [b"not a torch file at all",
                                  b"src,dst\n0,1\n1,\xff\n"])   # the unpickler's IndexError escaped before
def test_pt_garbage_file(tmp_path, junk):
    p = tmp_path / "junk.pt"
    p.write_bytes(junk)
    with pytest.raises(GraphFormatError, match="junk.pt"):
        partplan.io.read_graph(p)


# ----------------------------------------------------------------------------- .pt training data
def _labeled(n=60, seed=8):
    ei, _, x = _directed(n=n, seed=seed)
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (n,), generator=g)
    u = torch.rand(n, generator=g)
    return Data(x=x.float(), y=y, edge_index=ei, train_mask=u < 0.5, val_mask=(u >= 0.5) & (u < 0.75),
                test_mask=u >= 0.75)


def test_pt_data_file_equals_npz(tmp_path):
    from partplan.nn.data import check_data, read_rows, write_data
    d = _labeled()
    torch.save(d, tmp_path / "d.pt")
    write_data(tmp_path / "d.npz", d.x.numpy(), d.y.numpy(), d.train_mask.numpy(), d.val_mask.numpy(),
               d.test_mask.numpy())
    a, b = check_data(tmp_path / "d.pt", 60), check_data(tmp_path / "d.npz", 60)
    for k in ("n", "f", "classes", "dtype", "train", "val", "test"):
        assert getattr(a, k) == getattr(b, k), k
    ids = np.array([5, 0, 59, 17])
    ra, rb = read_rows(tmp_path / "d.pt", ids), read_rows(tmp_path / "d.npz", ids)
    for k in ra:
        assert np.array_equal(ra[k], rb[k]) and ra[k].dtype == rb[k].dtype, k


def test_pt_data_file_errors(tmp_path):
    from partplan.nn.data import DataError, check_data
    d = _labeled()
    del d.val_mask
    torch.save(d, tmp_path / "nomask.pt")
    with pytest.raises(DataError, match="missing key.*val_mask"):
        check_data(tmp_path / "nomask.pt", 60)
    d = _labeled()
    d.x[3, 1] = float("nan")
    torch.save(d, tmp_path / "nan.pt")
    with pytest.raises(DataError, match=r"x\[3, 1\]"):
        check_data(tmp_path / "nan.pt", 60)
    torch.save({"a": _Payload()}, tmp_path / "obj.pt")
    with pytest.raises(DataError, match="refusing to unpickle"):
        check_data(tmp_path / "obj.pt", 60)
    with pytest.raises(DataError, match="n = 61"):
        check_data(tmp_path / "nan.pt", 61)


def test_train_gcn_with_pt_data_equals_npz(tmp_path, capsys):
    """The whole path: plan_from_pyg (gcn) + `train gcn --data d.pt` = the same run with the .npz."""
    import json

    from partplan.nn.data import write_data
    from partplan.nn.train import train_gcn
    from torch_geometric.utils import to_undirected
    d = _labeled()
    d.edge_index = to_undirected(d.edge_index, num_nodes=60)
    torch.save(d, tmp_path / "d.pt")
    write_data(tmp_path / "d.npz", d.x.numpy(), d.y.numpy(), d.train_mask.numpy(), d.val_mask.numpy(),
               d.test_mask.numpy())
    plan = tmp_path / "g.plan"
    partplan.plan_from_pyg(d, 2, normalize="gcn", out=plan, model="baseline")
    a = train_gcn(plan, backend="local", data=tmp_path / "d.pt", epochs=5, dropout=0.0, seed=1, dtype="float64")
    b = train_gcn(plan, backend="local", data=tmp_path / "d.npz", epochs=5, dropout=0.0, seed=1, dtype="float64")
    assert a["losses"] == b["losses"] and a["losses"][-1] < a["losses"][0]
    assert main(["train", "gcn", str(plan), "--backend", "local", "--data", str(tmp_path / "d.pt"),
                 "--epochs", "2", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["losses"]) == 2


def test_train_gcn_refuses_pt_data_of_another_graph_and_a_rank_count_not_the_plans(tmp_path, capsys):
    """`train gcn --data d.pt` reads x, y and the masks from the Data: its edge_index must be the
    plan's graph (another graph with the same vertex count trained without a word), and
    `--nprocs` must equal the plan's ranks with the local backend too (it trained on the plan's)."""
    from torch_geometric.utils import to_undirected
    d = _labeled()
    d.edge_index = to_undirected(d.edge_index, num_nodes=60)
    plan = tmp_path / "g.plan"
    partplan.plan_from_pyg(d, 2, normalize="gcn", out=plan, model="baseline")
    torch.save(d, tmp_path / "same.pt")
    other = d.clone()
    other.edge_index = to_undirected(torch.randint(0, 60, (2, 150), generator=torch.Generator().manual_seed(3)),
                                     num_nodes=60)
    torch.save(other, tmp_path / "other.pt")
    run = ["train", "gcn", str(plan), "--backend", "local", "--epochs", "1", "-q"]
    assert main(run + ["--data", str(tmp_path / "other.pt")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "other.pt" in err[0] and "is not the graph of plan" in err[0], err
    assert main(run + ["--data", str(tmp_path / "same.pt"), "--nprocs", "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the plan is for 2 ranks; --nprocs 3" in err[0], err
    assert main(run + ["--data", str(tmp_path / "same.pt"), "--nprocs", "2"]) == 0
