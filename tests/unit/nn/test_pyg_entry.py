"""plan_from_pyg as PyG does it: self loops by add_remaining_self_loops for each
normalization, edge weights only when named, directed graphs partitioned with the
joint forward+backward model (recorded in the manifest). Oracles: GCNConv, a
mean-aggregating MessagePassing after PyG's add_remaining_self_loops, and the
exact volumes of metrics.analyze."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")
from torch_geometric.data import Data
from torch_geometric.nn import GCNConv, MessagePassing
from torch_geometric.utils import add_remaining_self_loops

import partplan
from partplan.runtime.validate import replay

N = 60


class Mean(MessagePassing):
    def __init__(self):
        super().__init__(aggr="mean")

    def forward(self, x, edge_index):
        return self.propagate(edge_index, x=x)


def _graph(seed=0, loops=50):
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, N, (2, 300), generator=g)
    v = torch.randint(0, N, (loops,), generator=g)
    ei = torch.cat([ei, torch.stack([v, v]), torch.stack([v[:10], v[:10]])], dim=1)  # loops, some duplicated
    x = torch.randn(N, 5, generator=g, dtype=torch.float64)
    return ei, x


def _gcnconv(x, ei, w=None):
    conv = GCNConv(5, 5, bias=False).double()
    with torch.no_grad():
        conv.lin.weight.copy_(torch.eye(5, dtype=torch.float64))
        return conv(x, ei, w).numpy()


def test_duplicated_self_loops_equal_gcnconv_and_mean():
    ei, x = _graph()
    plan = partplan.plan_from_pyg(Data(edge_index=ei, num_nodes=N), 2, normalize="gcn", model="baseline",
                                  dtype="float64")
    np.testing.assert_allclose(replay(plan, x.numpy()), _gcnconv(x, ei), rtol=0, atol=1e-12)
    plan = partplan.plan_from_pyg(Data(edge_index=ei, num_nodes=N), 2, normalize="mean", model="baseline",
                                  dtype="float64")
    ref = Mean()(x, add_remaining_self_loops(ei, num_nodes=N)[0]).numpy()
    np.testing.assert_allclose(replay(plan, x.numpy()), ref, rtol=0, atol=1e-12)
    # weighted: a duplicated loop keeps one weight (all copies of a loop weigh the same here)
    w = torch.rand(ei.size(1), dtype=torch.float64, generator=torch.Generator().manual_seed(1)) + 0.5
    loop = ei[0] == ei[1]
    w[loop] = ei[0, loop].double() / N + 0.25
    d = Data(edge_index=ei, num_nodes=N, edge_weight=w)
    plan = partplan.plan_from_pyg(d, 2, normalize="gcn", model="baseline", dtype="float64", weight="edge_weight")
    np.testing.assert_allclose(replay(plan, x.numpy()), _gcnconv(x, ei, w), rtol=0, atol=1e-12)
    # and without normalize the loops are the user's edges, summed as MessagePassing(aggr="add") does
    plan = partplan.plan_from_pyg(Data(edge_index=ei, num_nodes=N), 2, model="baseline", dtype="float64")
    ref = torch.zeros(N, 5, dtype=torch.float64).index_add_(0, ei[1], x[ei[0]]).numpy()
    np.testing.assert_allclose(replay(plan, x.numpy()), ref, rtol=0, atol=1e-12)


def test_edge_attr_is_not_a_weight_unless_named():
    ei, x = _graph(loops=0)
    ea = torch.rand(ei.size(1), dtype=torch.float64) + 0.5
    d = Data(edge_index=ei, num_nodes=N, edge_attr=ea)
    plan = partplan.plan_from_pyg(d, 2, normalize="gcn", model="baseline", dtype="float64")
    np.testing.assert_allclose(replay(plan, x.numpy()), _gcnconv(x, ei), rtol=0, atol=1e-12)   # GCNConv(x, ei)
    plan = partplan.plan_from_pyg(d, 2, normalize="gcn", model="baseline", dtype="float64", weight="edge_attr")
    np.testing.assert_allclose(replay(plan, x.numpy()), _gcnconv(x, ei, ea), rtol=0, atol=1e-12)
    d.edge_attr = torch.rand(ei.size(1), 4)          # multi-dimensional: accepted, not a weight
    assert partplan.plan_from_pyg(d, 2, model="baseline").manifest["graph"]["nnz"] > 0


def test_directed_default_minimizes_forward_plus_backward_and_is_recorded():
    ei, _ = _graph(loops=0)
    d = Data(edge_index=ei, num_nodes=N)
    g = partplan.from_pyg(d)
    assert not g.is_symmetric()
    plan = partplan.plan_from_pyg(d, 4, seed=0)
    m = plan.manifest
    assert m["model"] == "graph" or (m["model"], m["params"].get("nets")) == ("hypergraph", "joint")
    part = np.empty(N, dtype=np.int64)
    for r in plan.ranks:
        part[r.out_ids("forward")] = r.rank

    def both(p):   # rows sent forward plus backward, counted by brute force from the edge list
        s, t = ei.numpy()
        fwd = {(int(p[a]), int(p[b]), int(a)) for a, b in zip(s, t) if p[a] != p[b]}
        bwd = {(int(p[b]), int(p[a]), int(b)) for a, b in zip(s, t) if p[a] != p[b]}
        return len(fwd) + len(bwd)
    assert m["stats"]["total_volume"] + m["stats_backward"]["total_volume"] == both(part)
    metis = partplan.partition(g, 4, model="graph", seed=0)          # a candidate: never beaten by the choice
    assert both(part) <= both(metis.part)
    # an undirected graph keeps the default pipeline; a named model is used as given
    und = Data(edge_index=torch.cat([ei, ei.flip(0)], 1), num_nodes=N)
    assert partplan.plan_from_pyg(und, 2, seed=0).manifest["params"].get("nets") != "joint"
    assert partplan.plan_from_pyg(d, 2, model="hypergraph").manifest["model"] == "hypergraph"


def test_analyze_takes_a_partition_result():
    ei, _ = _graph(loops=0)
    g = partplan.from_pyg(Data(edge_index=ei, num_nodes=N))
    p = partplan.partition(g, 3, model="baseline", backend="block")
    a = partplan.analyze(g, p)
    b = partplan.analyze(g, np.asarray(p.part), 3)
    assert (a.total_volume, a.max_send, a.messages) == (b.total_volume, b.max_send, b.messages)
    # brute force: rows of vertex j sent to each other part holding a row that reads j
    A = g.to_scipy().tocoo()
    need = {(int(p.part[j]), int(p.part[i]), int(j)) for i, j in zip(A.row, A.col) if p.part[i] != p.part[j]}
    assert a.total_volume == len(need)
    p15 = partplan.partition(g, 4, model="baseline", backend="block", layout="1.5d:2")
    with pytest.raises(partplan.PartitionError, match="1.5d:2"):
        partplan.analyze(g, p15)
