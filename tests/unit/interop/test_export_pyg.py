"""`partplan export --to pyg` holds the user's data: the ORIGINAL graph's edges
(never the normalized Â of a GCN plan) in PyG's direction, and with --data the
x, y and masks of every part — checked with torch_geometric's own loaders and
with a GCNConv run on the export (oracle: the plan's Â @ X)."""
import json

import numpy as np
import pytest

from partplan import Graph, PartitionError
from partplan.interop.export import export_plan, export_pyg
from partplan.plan import build_plan, load_plan, write_plan

torch = pytest.importorskip("torch")
pyg_dist = pytest.importorskip("torch_geometric.distributed")

K = 3


@pytest.fixture
def setup(tmp_path):
    rng = np.random.default_rng(1)
    n, m = 60, 300
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = src != dst                                        # no self loops: Â adds them all
    g = Graph.from_edges(dst[keep], src[keep], rng.random(keep.sum()) + 0.5, n=n, name="toy")
    part = rng.integers(0, K, n)
    gcn = write_plan(build_plan(g, part, K, normalize="gcn"), tmp_path / "gcn.plan")
    raw = write_plan(build_plan(g, part, K), tmp_path / "raw.plan")
    x = rng.standard_normal((n, 5)).astype(np.float32)
    y = rng.integers(0, 4, n)
    masks = rng.integers(0, 3, n)
    from partplan.nn.data import write_data
    data = write_data(tmp_path / "d.npz", x, y, masks == 0, masks == 1, masks == 2)
    return g, part, gcn, raw, data, (x, y, masks)


def _load(out, n_parts):
    """Every part through PyG's LocalGraphStore / LocalFeatureStore."""
    edges, nodes = [], []
    for r in range(n_parts):
        gs = pyg_dist.LocalGraphStore.from_partition(str(out), r)
        fs = pyg_dist.LocalFeatureStore.from_partition(str(out), r)
        (attr,) = gs.get_all_edge_attrs()
        ei, eid = gs.get_edge_index(attr), gs.get_edge_id(attr)
        w = fs.get_tensor(group_name=(None, None), attr_name="edge_attr")
        edges.append((eid.numpy(), ei[0].numpy(), ei[1].numpy(), w.numpy()))
        nodes.append((fs, fs.get_global_id(None).numpy()))
    eid = np.concatenate([e[0] for e in edges])
    order = np.argsort(eid)
    src, dst, w = (np.concatenate([e[i] for e in edges])[order] for i in (1, 2, 3))
    return eid[order], src, dst, w, nodes


def test_normalized_plan_exports_the_original_edges_and_data(setup, tmp_path):
    g, part, gcn, raw, data, (x, y, masks) = setup
    out = export_plan(gcn, "pyg", tmp_path / "pyg", graph=g, data=data)
    eid, src, dst, w, nodes = _load(out, K)
    assert eid.tolist() == list(range(g.nnz))               # A's edges, not Â's (nnz + n)
    # PyG: edge_index[0] = source j, [1] = target i of A[i, j] (Z = A @ H sums j into i)
    assert np.array_equal(dst, g.rows) and np.array_equal(src, g.indices)
    assert np.allclose(w, g.data)
    assert not np.any(src == dst)                           # no self loops added
    for r, (fs, ids) in enumerate(nodes):
        assert ids.tolist() == np.flatnonzero(part == r).tolist()
        get = lambda a: fs.get_tensor(group_name=None, attr_name=a).numpy()  # noqa: E731
        assert np.array_equal(get("x"), x[ids])
        assert np.array_equal(get("y"), y[ids])
        for i, name in enumerate(("train_mask", "val_mask", "test_mask")):
            assert get(name).dtype == np.bool_ and np.array_equal(get(name), masks[ids] == i)
    assert torch.load(out / "label.pt").tolist() == y.tolist()


def test_gcnconv_on_the_export_is_the_plans_matrix(setup, tmp_path):
    """GCNConv (which normalizes itself) on the exported edges computes Â @ X,
    the product the normalized plan performs — no double normalization."""
    from torch_geometric.nn import GCNConv

    from partplan.models.normalize import normalize_adjacency
    g, part, gcn, raw, data, (x, y, masks) = setup
    out = export_pyg(load_plan(gcn), tmp_path / "pyg", graph=g)
    _, src, dst, w, _ = _load(out, K)
    conv = GCNConv(x.shape[1], x.shape[1], bias=False)
    with torch.no_grad():
        conv.lin.weight.copy_(torch.eye(x.shape[1]))
    X = torch.from_numpy(x.astype(np.float64))
    conv = conv.double()
    got = conv(X, torch.from_numpy(np.stack([src, dst])), torch.from_numpy(w)).detach().numpy()
    want = normalize_adjacency(g, "gcn").to_scipy() @ x.astype(np.float64)
    assert np.allclose(got, want)


def test_normalized_plan_without_graph_names_the_option(setup, tmp_path):
    g, part, gcn, raw, data, _ = setup
    with pytest.raises(PartitionError, match="--graph GRAPH"):
        export_plan(gcn, "pyg", tmp_path / "pyg")
    assert not (tmp_path / "pyg").exists()


def test_wrong_graph_is_refused(setup, tmp_path):
    from partplan.models.normalize import normalize_adjacency
    g, part, gcn, raw, data, _ = setup
    with pytest.raises(PartitionError, match="normalized matrix; pass the graph it was built from"):
        export_plan(gcn, "pyg", tmp_path / "a", graph=normalize_adjacency(g, "gcn"))
    other = Graph.from_edges(g.rows[1:], g.indices[1:], g.data[1:], n=g.n)
    with pytest.raises(PartitionError, match="is not the graph of this plan"):
        export_plan(raw, "pyg", tmp_path / "b", graph=other)
    with pytest.raises(PartitionError, match="pyg export only"):
        export_plan(raw, "dgl", tmp_path / "c", graph=g)


def test_unnormalized_plan_rebuilds_a_and_matches_the_graph(setup, tmp_path):
    g, part, gcn, raw, data, (x, y, masks) = setup
    a = export_plan(raw, "pyg", tmp_path / "a")             # A from the plan itself
    b = export_plan(raw, "pyg", tmp_path / "b", graph=g, data=data)
    ea, sa, da, wa, _ = _load(a, K)
    eb, sb, db, wb, nodes = _load(b, K)
    assert np.array_equal(sa, sb) and np.array_equal(da, db) and np.allclose(wa, wb)
    assert np.array_equal(da, g.rows) and np.array_equal(sa, g.indices)
    fs, ids = nodes[0]
    assert np.array_equal(fs.get_tensor(group_name=None, attr_name="x").numpy(), x[ids])


def test_bad_data_file(setup, tmp_path):
    from partplan.nn.data import DataError, write_data
    g, part, gcn, raw, data, (x, y, masks) = setup
    bad = write_data(tmp_path / "bad.npz", x[:-1], y[:-1], masks[:-1] == 0, masks[:-1] == 1, masks[:-1] == 2)
    with pytest.raises(DataError, match="n = 60"):
        export_plan(gcn, "pyg", tmp_path / "pyg", graph=g, data=bad)
    assert not (tmp_path / "pyg").exists()


def test_cli(setup, tmp_path, capsys):
    from partplan.cli.main import main
    g, part, gcn, raw, data, (x, y, masks) = setup
    from partplan.io import write_graph
    gfile = write_graph(g, tmp_path / "g.mtx")
    assert main(["export", str(gcn), "--to", "pyg", str(tmp_path / "no")]) != 0
    assert "--graph GRAPH" in capsys.readouterr().err
    assert main(["export", str(gcn), "--to", "pyg", str(tmp_path / "out"), "--graph", str(gfile),
                 "--data", str(data), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert "label.pt" in rep["files"] and "part_0/node_feats.pt" in rep["files"]
    eid, src, dst, w, _ = _load(tmp_path / "out", K)
    assert np.array_equal(dst, g.rows) and np.array_equal(src, g.indices)
    assert main(["export", str(gcn), "--to", "metis", str(tmp_path / "p.txt"), "--data", str(data)]) != 0


def test_export_temporary_is_held_by_its_writers_lock(tmp_path):
    """An export's temporary folder carries its writer's flock while it is written (so
    clean_stale never removes a live export's folder, whatever the pid namespace), and the
    lock is dropped once the folder is in place."""
    import fcntl
    import os

    from partplan import _atomic
    from partplan.interop.export import _atomic_dir, _finish
    out = tmp_path / "exp"
    tmp = _atomic_dir(out)
    fd = os.open(tmp, os.O_RDONLY)
    try:
        with pytest.raises(BlockingIOError):          # our shared lock blocks an exclusive one
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert _atomic.clean_stale(out) == [] and tmp.is_dir()
        (tmp / "META.json").write_text("{}")
        _finish(tmp, out)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)   # released
    finally:
        os.close(fd)
    assert (out / "META.json").is_file() and not tmp.exists()


def test_an_empty_part_is_named_since_pygs_feature_store_cannot_load_it(setup, tmp_path):
    """A plan with a row block that holds no rows exported silently; PyG's LocalFeatureStore
    then failed on that part. The export names the empty blocks."""
    g, part, *_ = setup
    holey = np.where(part == 1, 0, part)                    # block 1 of 3 holds no rows
    plan = write_plan(build_plan(g, holey, K), tmp_path / "holey.plan")
    from partplan.errors import PartplanWarning
    with pytest.warns(PartplanWarning, match="row blocks 1 hold no rows"):
        out = export_plan(plan, "pyg", tmp_path / "h")
    with pytest.raises(Exception):                          # the oracle: PyG's own loader on that part
        pyg_dist.LocalFeatureStore.from_partition(str(out), 1)
    pyg_dist.LocalFeatureStore.from_partition(str(out), 0)
