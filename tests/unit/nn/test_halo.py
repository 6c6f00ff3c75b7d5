"""partplan.nn.Halo / LocalHalo: PyG layers over a 1D plan's halo exchange.

The oracle is torch_geometric itself: each layer run single-process on the
whole graph (float64); the distributed run feeds every rank's local rows
through ``LocalHalo`` (LocalComm: every rank in this process) and must give
the same output rows, input gradients and summed weight gradients. Bytes
sent equal the plan's rows × f × itemsize, forward and (transposed) backward.
"""
from __future__ import annotations

import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")
from torch_geometric.nn import GATConv, GINConv, GraphConv, SAGEConv

from partplan.errors import PlanError
from partplan.interop import plan_from_pyg
from partplan.nn import LocalHalo

N, F_IN, F_OUT = 50, 6, 4


def directed_graph(seed: int = 0):
    """A directed random graph with duplicated edges, self loops and 3-column edge attributes (float64)."""
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, N, (2, 300), generator=g)
    ei = torch.cat([ei, ei[:, :10], torch.arange(5).repeat(2, 1)], dim=1)  # multi-edges and self loops
    ea = torch.randn(ei.size(1), 3, generator=g, dtype=torch.float64)
    x = torch.randn(N, F_IN, generator=g, dtype=torch.float64)
    return ei, ea, x


def layers():
    torch.manual_seed(0)
    return {"gat": GATConv(F_IN, F_OUT, heads=2, edge_dim=3).double(), "sage": SAGEConv(F_IN, F_OUT).double(),
            "gin": GINConv(torch.nn.Sequential(torch.nn.Linear(F_IN, 8), torch.nn.ReLU(),
                                               torch.nn.Linear(8, F_OUT))).double(),
            "graph": GraphConv(F_IN, F_OUT).double()}


def call(conv, x, ei, ea):
    return conv(x, ei, edge_attr=ea) if isinstance(conv, GATConv) else conv(x, ei)


@pytest.fixture(scope="module")
def graph():
    return directed_graph()


@pytest.fixture(scope="module", params=[2, 3])
def halo(request, graph):
    ei, _, _ = graph
    plan = plan_from_pyg({"edge_index": ei, "num_nodes": N}, request.param, seed=0)
    return plan, LocalHalo(plan, ei)


@pytest.mark.parametrize("name", ["gat", "sage", "gin", "graph"])
def test_layers_through_halo_equal_single_process_pyg(graph, halo, name):
    ei, ea, x = graph
    _, op = halo
    conv = layers()[name]
    R = torch.randn(N, call(conv, x, ei, ea).shape[1], dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    xr = x.clone().requires_grad_(True)
    (call(conv, xr, ei, ea) * R).sum().backward()
    ref = call(conv, x, ei, ea).detach()
    ref_gw = [p.grad.clone() for p in conv.parameters()]
    conv.zero_grad()
    ids = [torch.from_numpy(v.local_ids) for v in op.ranks]
    xs = [x[i].clone().requires_grad_(True) for i in ids]
    outs = [call(conv, e, v.edge_index, ea[v.edge_ids])[:v.num_local] for e, v in zip(op(xs), op.ranks)]
    sum((o * R[i]).sum() for o, i in zip(outs, ids)).backward()   # weight grads summed over ranks
    assert sorted(np.concatenate([v.local_ids for v in op.ranks]).tolist()) == list(range(N))
    for o, xx, i in zip(outs, xs, ids):
        torch.testing.assert_close(o.detach(), ref[i], rtol=0, atol=1e-10)
        torch.testing.assert_close(xx.grad, xr.grad[i], rtol=0, atol=1e-10)
    for p, g in zip(conv.parameters(), ref_gw):
        torch.testing.assert_close(p.grad, g, rtol=0, atol=1e-10)


def test_edges_are_the_users_edges_by_id(graph, halo):
    ei, _, _ = graph
    _, op = halo
    # every user edge (duplicates and self loops too) appears on exactly one rank: its target's
    eids = np.concatenate([v.edge_ids.numpy() for v in op.ranks])
    assert sorted(eids.tolist()) == list(range(ei.size(1)))
    for v in op.ranks:
        ext = np.concatenate([v.local_ids, v.halo_ids])
        np.testing.assert_array_equal(ext[v.edge_index.numpy()], ei[:, v.edge_ids].numpy())
        assert (v.edge_index[1] < v.num_local).all()
        # the halo is exactly the remote sources of the local edges (brute force from the edge list)
        src = ei[0, v.edge_ids].numpy()
        assert set(v.halo_ids.tolist()) == set(src.tolist()) - set(v.local_ids.tolist())


def test_bytes_sent_equal_the_plans_rows_forward_and_backward(graph, halo):
    ei, _, x = graph
    _, op = halo
    p = len(op.ranks)
    # predicted from the partition alone: rows of v needed by rank r (an edge v -> target on r, v not on r)
    owner = np.full(N, -1)
    for v in op.ranks:
        owner[v.local_ids] = v.rank
    s, t = ei.numpy()
    need = {(int(owner[a]), int(owner[b]), int(a)) for a, b in zip(s, t) if owner[a] != owner[b]}
    rows = np.zeros((p, p), dtype=np.int64)
    for q, r, _ in need:
        rows[q, r] += 1
    for dtype in (torch.float64, torch.float32):
        op.comm.reset()
        xs = [x[torch.from_numpy(v.local_ids)].to(dtype).requires_grad_(True) for v in op.ranks]
        ext = op(xs)
        np.testing.assert_array_equal(op.comm.sent_bytes, rows * F_IN * (8 if dtype == torch.float64 else 4))
        np.testing.assert_array_equal(op.comm.sent_bytes, op.predicted_bytes(F_IN, dtype)["forward"])
        op.comm.reset()
        sum(e.sum() for e in ext).backward()
        np.testing.assert_array_equal(op.comm.sent_bytes, op.predicted_bytes(F_IN, dtype)["backward"])
        np.testing.assert_array_equal(op.comm.sent_bytes, rows.T * F_IN * (8 if dtype == torch.float64 else 4))
        # backward of sum: each local row's gradient = 1 + number of peers that received it
        for xx, v in zip(xs, op.ranks):
            sent = np.bincount(np.concatenate([[0], [a for q, r, a in need if q == v.rank]]).astype(np.int64),
                               minlength=N)
            sent[0] -= 1
            want = 1 + sent[v.local_ids]
            np.testing.assert_array_equal(xx.grad[:, 0].numpy(), want.astype(np.float64))


def test_refusals(graph):
    ei, _, x = graph
    plan = plan_from_pyg({"edge_index": ei, "num_nodes": N}, 2, seed=0)
    op = LocalHalo(plan, ei)
    with pytest.raises(PlanError, match="local rows"):
        op([x[:3], x[:3]])
    with pytest.raises(PlanError, match="floating-point"):
        op([torch.zeros(v.num_local, 2, dtype=torch.int64) for v in op.ranks])
    with pytest.raises(PlanError, match="one tensor per rank"):
        op([x])
    other = torch.stack([ei[1], ei[0]])     # the reversed graph: its sources are not the plan's halo
    with pytest.raises(PlanError, match="not built from this edge_index"):
        LocalHalo(plan, other)
    with pytest.raises(PlanError, match="outside"):
        LocalHalo(plan, ei + N)
    p15 = plan_from_pyg({"edge_index": ei, "num_nodes": N}, 4, seed=0, layout="1.5d:2")
    with pytest.raises(PlanError, match="1D plan"):
        LocalHalo(p15, ei)
    # the rows and edges pickle (process groups are not part of it)
    back = pickle.loads(pickle.dumps(op.ranks[0]))
    assert torch.equal(back.edge_index, op.ranks[0].edge_index)


def test_send_buffer_is_a_view_when_no_row_goes_to_two_peers(graph, halo):
    """Local rows are ordered as the send buffer lists them: at p = 2 the rows sent are
    ``x[:S]`` (no gather); at p = 3 rows sent to two peers need the gather. Either way the
    rows each peer receives are the plan's (checked against the global ids)."""
    plan, op = halo
    p = len(op.ranks)
    x = torch.arange(N, dtype=torch.float64).unsqueeze(1)          # each row holds its global id
    outs = op([x[torch.from_numpy(v.local_ids)] for v in op.ranks])
    for v, o in zip(op.ranks, outs):
        assert o[v.num_local:, 0].long().tolist() == v.halo_ids.tolist()
    if p == 2:
        assert all(v.contiguous_send for v in op.ranks)
    else:
        dup = [np.unique(v.idx).size < v.idx.size for v in op.ranks]
        assert any(dup) and [not d for d in dup] == [v.contiguous_send for v in op.ranks]


class _TwoAggregations(torch.nn.Module):
    """A custom layer with two propagates on one exchange, both of its input: sum and max
    aggregations (single hop each: exact through a Halo)."""

    def __init__(self):
        super().__init__()
        from torch_geometric.nn import MessagePassing

        class Agg(MessagePassing):
            def forward(self, x, ei):
                return self.propagate(ei, x=x)
        self.sum, self.max = Agg(aggr="add"), Agg(aggr="max")
        self.lin = torch.nn.Linear(2 * F_IN, F_OUT).double()

    def forward(self, x, ei):
        return self.lin(torch.cat([self.sum(x, ei), self.max(x * 2.0, ei)], dim=1))


def _chained(grad: bool):
    """A custom layer whose second propagate reads the first's output (two hops on one exchange)."""
    from torch_geometric.nn import MessagePassing

    class TwoHop(MessagePassing):
        def __init__(self):
            super().__init__(aggr="add")
            self.w = torch.nn.Parameter(torch.ones(F_IN, dtype=torch.float64))

        def forward(self, x, ei):
            h = self.propagate(ei, x=x * self.w if grad else x)
            return self.propagate(ei, x=h + 1.0 if grad else h)
    return TwoHop()


def test_a_second_hop_on_one_exchange_is_refused(graph, halo):
    """A layer that propagates twice over a Halo's edge_index without an exchange between gave wrong
    rows with exit 0 (TAGConv K=2 without normalization: 4.4 off PyG's): PyG's multi-hop layers
    by their settings, and any layer whose propagate reads an earlier propagate's output (the tensor
    itself, or in autograd). Two single-hop propagates of one exchange stay exact."""
    from torch_geometric.nn import APPNP, ARMAConv, MixHopConv, TAGConv
    ei, _, x = graph
    _, op = halo
    xs = op([x[torch.from_numpy(v.local_ids)] for v in op.ranks])
    v0 = op.ranks[0]
    torch.manual_seed(0)
    for conv in (TAGConv(F_IN, F_OUT, K=2, normalize=False), APPNP(K=2, alpha=0.1, normalize=False),
                 ARMAConv(F_IN, F_OUT, num_layers=2), MixHopConv(F_IN, F_OUT, powers=[0, 1, 2]),
                 _chained(True), _chained(False)):
        with pytest.raises(PlanError, match="hop|propagate"):
            conv.double()(xs[0], v0.edge_index)
    for conv in (TAGConv(F_IN, F_OUT, K=1, normalize=False).double(), _TwoAggregations()):
        ref = conv(x, ei).detach()
        for e, v in zip(xs, op.ranks):
            got = conv(e, v.edge_index)[:v.num_local]
            torch.testing.assert_close(got.detach(), ref[torch.from_numpy(v.local_ids)], rtol=0, atol=1e-10)


def test_the_hop_check_reads_sources_and_follows_self_looped_copies(graph, halo):
    """Layers that add their own self loops (GATConv) propagate over a copy of the Halo's
    edge_index: two of them without an exchange gave wrong rows (0.8 off PyG) and flow=
    'target_to_source' passed; both are refused now. PyG's bipartite idiom conv((op(h), h_local))
    reads the previous output only at the targets (local rows, exact) and stays allowed."""
    ei, _, x = graph
    _, op = halo
    torch.manual_seed(0)
    xs = op([x[torch.from_numpy(v.local_ids)] for v in op.ranks])
    v0 = op.ranks[0]
    g1, g2 = GATConv(F_IN, F_OUT).double(), GATConv(F_OUT, F_OUT).double()
    with pytest.raises(PlanError, match="previous propagate"):
        g2(g1(xs[0], v0.edge_index).relu(), v0.edge_index)
    with pytest.raises(PlanError, match="target_to_source"):
        GATConv(F_IN, F_OUT, flow="target_to_source").double()(xs[0], v0.edge_index)
    s1, s2 = SAGEConv(F_IN, F_OUT).double(), SAGEConv(F_OUT, F_OUT).double()
    ref = s2((s1(x, ei).relu(), s1(x, ei).relu()), ei).detach()
    h = [s1(e, v.edge_index)[:v.num_local].relu() for e, v in zip(xs, op.ranks)]
    for hx, hl, v in zip(op(h), h, op.ranks):
        got = s2((hx, hl), v.edge_index, size=(hx.size(0), v.num_local))
        torch.testing.assert_close(got.detach(), ref[torch.from_numpy(v.local_ids)], rtol=0, atol=1e-10)


def test_an_aggregate_without_gradient_is_followed_into_the_next_layer(graph, halo):
    """Features that need no gradient (the usual input) aggregated before a weight (SAGEConv's
    lin(aggregate)): the aggregate has no autograd node of its own, and two SAGE layers without an
    exchange gave wrong rows (0.11 off, weight gradients 1.2 off). It is found among the tensors
    autograd saved for the weight, as the same object that carries its mark."""
    _, _, x = graph
    _, op = halo
    torch.manual_seed(0)
    xs = op([x[torch.from_numpy(v.local_ids)] for v in op.ranks])     # no requires_grad
    v0 = op.ranks[0]
    s1, s2 = SAGEConv(F_IN, F_OUT).double(), SAGEConv(F_OUT, F_OUT).double()
    with pytest.raises(PlanError, match="previous propagate"):
        s2(s1(xs[0], v0.edge_index).relu(), v0.edge_index)
    hs = op([s1(e, v.edge_index)[:v.num_local].relu() for e, v in zip(xs, op.ranks)])   # with the exchange: fine
    s2(hs[0], v0.edge_index)


def test_gcn_on_a_sparse_adjacency_of_a_halos_edges_is_refused(graph, halo):
    """GCNConv normalizes by in-degrees; over a Halo partplan makes that exact for op.edge_index. A torch
    sparse adjacency of the same edges (PyG's adj_t, duplicates merged, or its transpose) would
    count each halo row's degree from this rank's edges only: wrong rows, no error. It is refused."""
    from torch_geometric.nn import GCNConv
    from torch_geometric.utils import to_torch_coo_tensor, to_torch_csr_tensor

    from partplan.errors import PlanError

    ei, _, x = graph
    _, op = halo
    v = op.ranks[0]
    h = op([x[torch.from_numpy(w.local_ids)] for w in op.ranks])[0]
    M = v.num_local + v.num_halo
    conv = GCNConv(F_IN, F_OUT).double()
    for adj in (to_torch_csr_tensor(v.edge_index.flip(0), size=(M, M)),
                to_torch_coo_tensor(v.edge_index, size=(M, M))):
        with pytest.raises(PlanError, match="sparse adjacency"):
            conv(h, adj)
    other = to_torch_csr_tensor(torch.stack([torch.arange(M), torch.arange(M)]),
                                torch.ones(M, dtype=torch.float64), size=(M, M))
    assert conv(h, other).shape == (M, F_OUT)          # another graph's adjacency: PyG's own gcn_norm


def test_a_second_hop_is_refused_on_a_rank_that_receives_no_rows():
    """The refusal is on every rank: a rank that receives no halo rows passed a second hop while its
    peers raised, and then waited out the timeout at its next exchange. Two directed cliques with
    edges only from the first into the second: the second's rank receives rows, the first's none."""
    from torch_geometric.nn import TAGConv
    a = torch.combinations(torch.arange(10), 2).t()
    ei = torch.cat([a, a.flip(0), a + 10, a.flip(0) + 10, torch.tensor([[0, 1, 2], [10, 11, 12]])], dim=1)
    plan = plan_from_pyg({"edge_index": ei, "num_nodes": 20}, 2, seed=0)
    op = LocalHalo(plan, ei)
    assert sorted(v.num_halo for v in op.ranks)[0] == 0 < sorted(v.num_halo for v in op.ranks)[1]
    x = torch.randn(20, F_IN, dtype=torch.float64)
    xs = op([x[torch.from_numpy(v.local_ids)] for v in op.ranks])
    conv = TAGConv(F_IN, F_OUT, K=2, normalize=False).double()
    for e, v in zip(xs, op.ranks):
        with pytest.raises(PlanError, match="hop"):
            conv(e, v.edge_index)
