"""partplan.nn.NeighborLoader on one rank (the multi-rank runs: tests/dist/test_loader_gloo.py).

Oracles: the user's Data (sampled edges are its edges: ``data.edge_index[:, e_id] ==
n_id[edge_index]``; fields by n_id / e_id), in-degrees counted with numpy, scipy's chi-square test
of uniform sampling, and PyG's layers on the whole graph (with every in-edge kept, a 2-layer model's
seed outputs on the batch equal the whole graph's)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

import partplan  # noqa: E402
from partplan.errors import OptionError  # noqa: E402
from partplan.nn import NeighborLoader  # noqa: E402


def _data(n=90, e=700, seed=2):
    from torch_geometric.data import Data
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=g)
    ei = torch.cat([ei, ei[:, :40], torch.tensor([[4, 4], [4, 4]])], 1)      # multi-edges, loops
    return Data(edge_index=ei, num_nodes=n, x=torch.randn(n, 5, dtype=torch.float64, generator=g),
                y=torch.randint(0, 3, (n,), generator=g), train_mask=torch.rand(n, generator=g) < 0.5,
                edge_attr=torch.randn(ei.shape[1], 2, dtype=torch.float64, generator=g))


@pytest.fixture(scope="module")
def one(tmp_path_factory):
    data = _data()
    path = tmp_path_factory.mktemp("loader") / "g1.plan"
    partplan.plan_from_pyg(data, 1, out=path, shares=True)
    return data, path


def test_batches_hold_edges_of_the_graph_and_fanouts_as_pyg_samples(one):
    data, path = one
    ei = data.edge_index.numpy()
    indeg = np.bincount(ei[1], minlength=data.num_nodes)
    fan = [3, 2]
    loader = NeighborLoader(path, fan, batch_size=16, input_nodes="train_mask", seed=4)
    seeds_seen = []
    assert len(loader) == -(-int(data.train_mask.sum()) // 16)
    for b in loader:
        n_id, e_id = b.n_id.numpy(), b.e_id.numpy()
        assert np.array_equal(ei[:, e_id], n_id[b.edge_index.numpy()])
        assert len(set(e_id.tolist())) == e_id.size                      # an edge copy at most once
        assert torch.equal(b.x, data.x[b.n_id]) and torch.equal(b.y, data.y[b.n_id])
        assert torch.equal(b.edge_attr, data.edge_attr[b.e_id])
        assert len(set(n_id.tolist())) == n_id.size
        bs = b.batch_size
        seeds_seen += n_id[:bs].tolist()
        assert data.train_mask[b.n_id[:bs]].all()
        # hop 0: each seed keeps min(fanout, in-degree) in-edges; hop 1: each node first met at hop 1
        tgt = n_id[b.edge_index[1].numpy()]
        cnt = np.bincount(tgt, minlength=data.num_nodes)
        hop1 = n_id[bs:bs + b.num_sampled_nodes[1]]
        assert np.array_equal(cnt[n_id[:bs]], np.minimum(indeg[n_id[:bs]], fan[0]))
        assert np.array_equal(cnt[hop1], np.minimum(indeg[hop1], fan[1]))
        assert cnt[n_id[bs + b.num_sampled_nodes[1]:]].sum() == 0        # the last hop is not expanded
        assert b.comm_bytes["predicted"].sum() == b.comm_bytes["measured"].sum() == 0   # one rank
    assert sorted(seeds_seen) == np.flatnonzero(data.train_mask.numpy()).tolist()


def test_sampling_is_uniform_without_replacement(one):
    """200 epochs of one seed of in-degree d > fanout: each in-edge copy is kept k/d of the time."""
    from scipy.stats import chisquare
    data, path = one
    ei = data.edge_index.numpy()
    indeg = np.bincount(ei[1], minlength=data.num_nodes)
    v = int(np.flatnonzero(indeg >= 9)[0])
    ins = np.flatnonzero(ei[1] == v)
    k = 3
    loader = NeighborLoader(path, [k], batch_size=1, seed=11)
    hits = {int(e): 0 for e in ins}
    for epoch in range(200):
        b = loader.sample(np.array([v]), epoch)
        assert b.e_id.numel() == k
        for e in b.e_id.tolist():
            hits[e] += 1
    obs = np.array(list(hits.values()))
    assert chisquare(obs, np.full(obs.size, 200 * k / ins.size)).pvalue > 1e-3


def test_same_seed_same_batches_other_seed_others(one):
    data, path = one
    a = [b.e_id for b in NeighborLoader(path, [4, 3], batch_size=20, seed=1)]
    b = [b.e_id for b in NeighborLoader(path, [4, 3], batch_size=20, seed=1)]
    c = [b.e_id for b in NeighborLoader(path, [4, 3], batch_size=20, seed=2)]
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(a, c))
    ld = NeighborLoader(path, [4, 3], batch_size=20, seed=1)
    e0 = [b.n_id for b in ld]
    e1 = [b.n_id for b in ld]                                          # the next epoch
    assert not all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(e0, e1))


def test_with_every_in_edge_a_two_layer_model_gives_the_whole_graphs_seed_outputs(one):
    from torch_geometric.nn import GATConv, SAGEConv
    data, path = one
    torch.manual_seed(0)
    c1, c2 = GATConv(5, 4, heads=2, edge_dim=2).double(), SAGEConv(8, 3).double()

    def model(x, ei, ea):
        h = c1(x, ei, ea).relu()
        return c2(h, ei)
    full = model(data.x, data.edge_index, data.edge_attr)
    for b in NeighborLoader(path, [-1, -1], batch_size=25, seed=0, shuffle=False):
        out = model(b.x, b.edge_index, b.edge_attr)[:b.batch_size]
        assert torch.allclose(out, full[b.n_id[:b.batch_size]], rtol=0, atol=1e-12)


def test_options_are_checked(one):
    _, path = one
    for bad in ([], [2, -3], 5, ["a"], None, "2"):
        with pytest.raises(OptionError):
            NeighborLoader(path, bad, batch_size=4)
    with pytest.raises(OptionError):
        NeighborLoader(path, [2], batch_size=0)
    with pytest.raises(OptionError, match="no bool node field"):
        NeighborLoader(path, [2], batch_size=4, input_nodes="x")
    with pytest.raises(OptionError, match=r"ints in \[0, "):
        NeighborLoader(path, [2], batch_size=4, input_nodes=torch.tensor([10 ** 9]))
    for bad, what in ((5, "shape ()"), ([[1, 2]], "shape (1, 2)"), (("paper", [1]), "got tuple"),
                      (np.array([0.5]), "dtype float64")):     # the shape or type, not the range, is wrong
        with pytest.raises(OptionError, match="a 1-D array of vertex ids") as err:
            NeighborLoader(path, [2], batch_size=4, input_nodes=bad)
        assert what in str(err.value), str(err.value)
    from partplan.errors import PlanError
    with pytest.raises(PlanError, match="takes the plan's path first"):   # PyG's order: the data first
        NeighborLoader({"edge_index": torch.zeros(2, 1, dtype=torch.long)}, [2], batch_size=4)
    with pytest.raises(OptionError, match="replace=True"):
        NeighborLoader(path, [2], batch_size=4, replace=True)
    with pytest.raises(OptionError, match="no option"):
        NeighborLoader(path, [2], batch_size=4, time_attr="t")
    NeighborLoader(path, [2], batch_size=4, replace=False, directed=True)     # PyG's defaults: accepted


def test_no_seeds_and_the_seed_range(one):
    """An empty id list is no seeds, as an all-False mask is (np.asarray([]) is float64 and was
    refused); a seed outside int64 repeated another seed's batches (its low 64 bits were hashed)."""
    _, path = one
    assert len(NeighborLoader(path, [2], batch_size=4, input_nodes=[])) == 0
    for seed in (2 ** 64, -2 ** 63 - 1, 1.5, True):
        with pytest.raises(OptionError, match="seed must be an integer"):
            NeighborLoader(path, [2], batch_size=4, seed=seed)


def test_sample_takes_distinct_integer_ids_in_range(one):
    """sample() with a repeated seed repeated its whole tree (each in-edge counted twice); a float
    seed was truncated; an id past n raised an IndexError."""
    data, path = one
    L = NeighborLoader(path, [-1], batch_size=4)
    for bad, msg in (([8, 8], "distinct seeds"), (np.array([3.7]), "vertex ids"), ([data.num_nodes], "vertex ids"),
                     ([[1, 2]], "vertex ids")):
        with pytest.raises(OptionError, match=msg):
            L.sample(bad)
    b = L.sample(torch.tensor([8, 3]))
    assert b.n_id[:2].tolist() == [8, 3] and b.batch_size == 2
