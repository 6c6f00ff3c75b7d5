"""Which Halo a ``gcn_norm`` call belongs to: PyG's GCNConv through ``LocalHalo`` must equal
single-process PyG when several ranks' local ``edge_index`` tensors are equal (the lookup takes the
tensor itself first), an equal ``edge_index`` over another number of rows is another graph's
(PyG's own ``gcn_norm``), and a ``gcn_norm`` the caller imported by name is exact too.
The oracle is torch_geometric's own GCNConv on the whole graph (float64)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")
from torch_geometric.nn import GCNConv

import partplan
from partplan.nn import LocalHalo

# 4->0 (rank 0), 0->2 (rank 1), 5->4 twice (rank 2): ranks 0 and 1 hold equal local edge_index
# tensors [[2], [0]] whose halo rows have different in-degrees (2 and 1)
EI = torch.tensor([[4, 0, 5, 5], [0, 2, 4, 4]])
N = 6


def _halo():
    g = partplan.from_pyg({"edge_index": EI, "num_nodes": N})
    return LocalHalo(partplan.build_plan(g, np.array([0, 0, 1, 1, 2, 2])), EI)


def test_equal_edge_index_of_two_ranks_each_gets_its_own_degrees():
    op = _halo()
    assert torch.equal(op.ranks[0].edge_index, op.ranks[1].edge_index)
    torch.manual_seed(0)
    x = torch.randn(N, 3, dtype=torch.float64)
    conv = GCNConv(3, 2).double()
    want = conv(x, EI).detach()
    got = op([x[torch.from_numpy(v.local_ids)] for v in op.ranks])
    for v, h in zip(op.ranks, got):
        out = conv(h, v.edge_index)[:v.num_local].detach()
        assert torch.allclose(out, want[torch.from_numpy(v.local_ids)], atol=1e-12), v.rank


def test_a_copy_shared_by_ranks_with_different_degrees_is_refused():
    op = _halo()
    conv = GCNConv(3, 2).double()
    h = torch.randn(op.ranks[0].num_local + op.ranks[0].num_halo, 3, dtype=torch.float64)
    with pytest.raises(partplan.PlanError, match="own op.edge_index"):
        conv(h, op.ranks[0].edge_index.clone())


def test_an_equal_edge_index_over_other_rows_is_plain_pyg():
    op = _halo()
    assert op.ranks[0].num_local + op.ranks[0].num_halo == 3
    other = op.ranks[0].edge_index.clone()          # the same values, a 7-vertex graph of the caller's
    torch.manual_seed(1)
    conv = GCNConv(2, 2, bias=False).double()
    x = torch.randn(7, 2, dtype=torch.float64)
    A = torch.zeros(7, 7, dtype=torch.float64)
    A[other[1], other[0]] = 1.0
    A += torch.eye(7, dtype=torch.float64)
    d = A.sum(1).pow(-0.5)
    want = (d[:, None] * A * d[None, :]) @ conv.lin(x)
    assert torch.allclose(conv(x, other), want, atol=1e-12)


def test_gcn_norm_imported_by_name_before_the_halo_is_exact():
    import sys
    import types

    from torch_geometric.nn.conv import gcn_conv
    user = types.ModuleType("user_module_of_this_test")
    user.gcn_norm = gcn_conv.gcn_norm.__dict__.get("__wrapped__", gcn_conv.gcn_norm)
    sys.modules[user.__name__] = user
    try:
        torch.manual_seed(2)
        n = 30
        ei = torch.randint(0, n, (2, 120), generator=torch.Generator().manual_seed(3))
        plan = partplan.plan_from_pyg({"edge_index": ei, "num_nodes": n}, 2, seed=0)
        op = LocalHalo(plan, ei)
        x = torch.randn(n, 3, dtype=torch.float64)
        conv = GCNConv(3, 3, bias=False).double()
        want = conv(x, ei).detach()
        for v, h in zip(op.ranks, op([x[torch.from_numpy(v.local_ids)] for v in op.ranks])):
            e, w = user.gcn_norm(v.edge_index, num_nodes=v.num_local + v.num_halo, dtype=torch.float64)
            hw = conv.lin(h)
            out = torch.zeros_like(hw).index_add_(0, e[1], w[:, None] * hw[e[0]])[:v.num_local]
            assert torch.allclose(out.detach(), want[torch.from_numpy(v.local_ids)], atol=1e-12)
    finally:
        del sys.modules[user.__name__]
