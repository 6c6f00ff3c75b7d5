"""What a PyG user hands ``Halo`` besides the plan: a Data over another vertex count is refused
(rows past the plan's n were silently dropped), GCNConv on a reordered or re-typed copy of a rank's
``edge_index`` is exact (it fell back to PyG's local degrees for the halo rows), and a layer with
``flow="target_to_source"`` is refused at its ``propagate`` (its output was silently wrong).
Oracle: torch_geometric's own layers on the whole graph in one process (float64)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")
from torch_geometric.data import Data
from torch_geometric.nn import GCNConv, MessagePassing
from torch_geometric.utils import (add_remaining_self_loops, add_self_loops, coalesce, remove_self_loops,
                                   sort_edge_index)

import partplan
from partplan.nn import LocalHalo

N = 30


def _data(extra_nodes: int = 0):
    gen = torch.Generator().manual_seed(0)
    ei = torch.randint(0, N, (2, 90), generator=gen)
    x = torch.randn(N + extra_nodes, 4, dtype=torch.float64, generator=gen)
    return Data(x=x, edge_index=ei, num_nodes=N + extra_nodes)


def _plan(d):
    return partplan.plan_from_pyg(Data(edge_index=d.edge_index, num_nodes=N), 2, seed=0)


@pytest.mark.parametrize("field", ["num_nodes", "x"])
def test_a_data_over_another_vertex_count_is_refused(field):
    d = _data()
    plan = _plan(d)
    if field == "num_nodes":
        bad = Data(x=d.x, edge_index=d.edge_index, num_nodes=N + 10)        # 10 isolated vertices more
        bad.x = None
    else:
        bad = Data(x=torch.randn(N - 5, 4), edge_index=d.edge_index)
    with pytest.raises(partplan.PlanError, match=f"{field}.*{N} vertices"):
        LocalHalo(plan, bad)
    LocalHalo(plan, d)                                                    # the plan's own data: accepted
    LocalHalo(plan, Data(x=d.x, edge_index=d.edge_index, y=torch.tensor([1])))   # graph-level y: left alone


@pytest.mark.parametrize("how", ["sorted", "int32", "reversed columns"])
def test_gcn_conv_on_a_reordered_or_retyped_copy_is_exact(how):
    d = _data()
    op = LocalHalo(_plan(d), d.edge_index)
    torch.manual_seed(0)
    conv = GCNConv(4, 3).double()
    want = conv(d.x, d.edge_index).detach()
    change = {"sorted": sort_edge_index, "int32": lambda e: e.int(), "reversed columns": lambda e: e.flip(1)}[how]
    xs = [d.x[torch.as_tensor(v.local_ids)] for v in op.ranks]
    for v, h in zip(op.ranks, op(xs)):
        ei = change(v.edge_index)
        assert ei is not v.edge_index and (how == "int32" or not torch.equal(ei, v.edge_index))
        got = conv(h, ei)[:v.num_local].detach()
        assert torch.allclose(got, want[torch.as_tensor(v.local_ids)], atol=1e-12), (how, v.rank)


def _looped():
    """``_data()`` with self loops added: one on vertices 0-9, two on 0-4, so that every rank's halo
    rows hold some."""
    d = _data()
    loops = torch.cat([torch.arange(10), torch.arange(5)]).repeat(2, 1)
    return Data(x=d.x, edge_index=torch.cat([d.edge_index, loops], dim=1), num_nodes=N)


_LOOP_COPIES = {   # what a user's forward does to the rank's edge_index, and the GCNConv it feeds
    "remove_self_loops": (lambda e, n: remove_self_loops(e)[0], {}),
    "remove_self_loops, no added loops": (lambda e, n: remove_self_loops(e)[0], {"add_self_loops": False}),
    "add_self_loops, no added loops": (lambda e, n: add_self_loops(e, num_nodes=n)[0], {"add_self_loops": False}),
    "add_remaining_self_loops, no added loops": (lambda e, n: add_remaining_self_loops(e, num_nodes=n)[0],
                                                 {"add_self_loops": False}),
    "removed then added, improved": (lambda e, n: add_self_loops(remove_self_loops(e)[0], num_nodes=n)[0],
                                     {"add_self_loops": False, "improved": True}),
}


@pytest.mark.parametrize("how", list(_LOOP_COPIES))
def test_gcn_conv_on_a_loop_utility_copy_is_exact(how):
    """PyG's loop utilities act on every vertex alike, so each halo row's self loops over the whole
    graph follow from the plan's counts: exact, where PyG's own gcn_norm counted each halo row's
    degree from this rank's edges."""
    d = _looped()
    op = LocalHalo(partplan.plan_from_pyg(d, 3, seed=0), d.edge_index)
    change, kw = _LOOP_COPIES[how]
    torch.manual_seed(0)
    conv = GCNConv(4, 3, **kw).double()
    want = conv(d.x, change(d.edge_index, N)).detach()
    xs = [d.x[torch.as_tensor(v.local_ids)] for v in op.ranks]
    for v, h in zip(op.ranks, op(xs)):
        got = conv(h, change(v.edge_index, h.size(0)))[:v.num_local].detach()
        assert torch.allclose(got, want[torch.as_tensor(v.local_ids)], atol=1e-12), (how, v.rank)


@pytest.mark.parametrize("how", ["a subset (DropEdge)", "coalesce"])
def test_gcn_conv_on_another_edge_set_over_the_halo_rows_is_refused(how):
    """A subset of a rank's edges or its coalesced copy is another edge set whose halo rows' degrees
    no rank holds: one PlanError, where PyG's own gcn_norm gave wrong rows silently. The whole graph's
    gcn_norm beside a live Halo is untouched."""
    d = _looped()
    op = LocalHalo(partplan.plan_from_pyg(d, 2, seed=0), d.edge_index)
    conv = GCNConv(4, 3).double()
    assert conv(d.x, d.edge_index[:, ::2]).shape == (N, 3)
    xs = [d.x[torch.as_tensor(v.local_ids)] for v in op.ranks]
    for v, h in zip(op.ranks, op(xs)):
        e = v.edge_index[:, ::2] if how.startswith("a subset") else coalesce(v.edge_index, num_nodes=h.size(0))
        with pytest.raises(partplan.PlanError, match="holds part of Halo rank"):
            conv(h, e)


def test_a_loop_utility_copy_equal_to_the_ranks_tensor_keeps_its_own_loop_counts():
    """Vertex 1's self loop is the graph's only one; rank 1 reads vertex 1 as a halo row and holds no
    loop, so remove_self_loops of its edge_index equals the tensor: the copy's counts (no loops) hold,
    not the Halo's (one)."""
    ei = torch.tensor([[1, 1, 0, 2, 3, 1], [1, 0, 1, 3, 2, 2]])
    part = np.array([0, 0, 1, 1])
    g = partplan.from_pyg({"edge_index": ei, "num_nodes": 4})
    op = LocalHalo(partplan.build_plan(g, part), ei)
    x = torch.randn(4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    for improved in (False, True):
        torch.manual_seed(0)
        conv = GCNConv(4, 3, add_self_loops=False, improved=improved).double()
        want = conv(x, remove_self_loops(ei)[0]).detach()
        for v, h in zip(op.ranks, op([x[torch.as_tensor(w.local_ids)] for w in op.ranks])):
            got = conv(h, remove_self_loops(v.edge_index)[0])[:v.num_local].detach()
            assert torch.allclose(got, want[torch.as_tensor(v.local_ids)], atol=1e-12), (improved, v.rank)


def test_untagged_copies_over_the_halo_rows_are_exact_or_refused_and_other_graphs_are_plain_pyg():
    """A loop utility applied to a clone (no tag): exact when GCNConv adds the loops itself, refused
    when it does not; a whole graph whose vertex count equals a rank's local + halo rows and whose
    targets are that rank's local ids is another graph: PyG's own gcn_norm, as without a Halo."""
    d = _looped()
    op = LocalHalo(partplan.plan_from_pyg(d, 3, seed=0), d.edge_index)
    torch.manual_seed(0)
    conv = GCNConv(4, 3).double()
    want = conv(d.x, add_self_loops(d.edge_index, num_nodes=N)[0]).detach()
    xs = [d.x[torch.as_tensor(v.local_ids)] for v in op.ranks]
    bare = GCNConv(4, 3, add_self_loops=False).double()
    for v, h in zip(op.ranks, op(xs)):
        e = add_self_loops(v.edge_index.clone(), num_nodes=h.size(0))[0]
        got = conv(h, e)[:v.num_local].detach()
        assert torch.allclose(got, want[torch.as_tensor(v.local_ids)], atol=1e-12), v.rank
        with pytest.raises(partplan.PlanError, match="self loops are not known"):
            bare(h, e)
    v = op.ranks[0]
    rows = v.num_local + v.num_halo
    gen = torch.Generator().manual_seed(5)
    other = torch.stack([torch.randint(0, rows, (40,), generator=gen), torch.randint(0, v.num_local, (40,),
                                                                                    generator=gen)])
    x = torch.randn(rows, 4, dtype=torch.float64, generator=gen)
    got = conv(x, other).detach()
    del op
    import gc
    gc.collect()
    assert torch.allclose(got, conv(x, other).detach(), atol=1e-14)


class _SumAtSources(MessagePassing):
    def __init__(self, flow):
        super().__init__(aggr="add", flow=flow)

    def forward(self, x, edge_index):
        return self.propagate(edge_index, x=x)


def test_a_layer_aggregating_at_the_sources_is_refused_and_the_other_flow_is_exact():
    d = _data()
    op = LocalHalo(_plan(d), d.edge_index)
    xs = [d.x[torch.as_tensor(v.local_ids)] for v in op.ranks]
    hs = op(xs)
    with pytest.raises(partplan.PlanError, match="target_to_source"):
        _SumAtSources("target_to_source")(hs[0], op.ranks[0].edge_index)
    want = _SumAtSources("source_to_target")(d.x, d.edge_index)
    for v, h in zip(op.ranks, hs):
        got = _SumAtSources("source_to_target")(h, v.edge_index)[:v.num_local]
        assert torch.allclose(got, want[torch.as_tensor(v.local_ids)], atol=1e-12)
    # the caller's own graph (not a Halo's edge_index) keeps PyG's behaviour under either flow
    other = torch.tensor([[0, 1], [1, 2]])
    out = _SumAtSources("target_to_source")(torch.eye(3, dtype=torch.float64), other)
    assert torch.equal(out, torch.tensor([[0.0, 1, 0], [0, 0, 1], [0, 0, 0]], dtype=torch.float64))


def test_edge_keys_are_a_multiset():
    from partplan.nn.halo import _edge_keys
    a = np.array([[0, 2, 1], [1, 0, 2]], np.int64)
    assert np.array_equal(_edge_keys(a, 3), _edge_keys(a[:, ::-1].copy(), 3))
    assert _edge_keys(np.array([[0], [3]], np.int64), 3) is None


def test_halo_arguments_are_checked_before_anything_else(tmp_path):
    """dtype="float32" was stored as a string (every call then refused with "the input has dtype
    torch.float32, this Halo was made for float32"), torch.int64 taken, and a bad timeout / device
    surfaced torch's or gloo's own errors: each is one PlanError naming the argument, before
    torch.distributed is even needed; a dtype name is taken as that torch dtype."""
    from partplan.errors import PlanError
    from partplan.nn.halo import _halo_options
    plan = partplan.plan_from_pyg(_data(), 2, out=tmp_path / "g.plan")
    for kw, needle in (({"dtype": torch.int64}, "dtype"), ({"dtype": "xx"}, "dtype"), ({"timeout": "x"}, "timeout"),
                       ({"timeout": -1}, "timeout"), ({"timeout": float("nan")}, "timeout"),
                       ({"device": "bogus"}, "device"), ({"device": "meta"}, "runs on cpu or cuda")):
        with pytest.raises(PlanError, match=needle):
            partplan.nn.Halo(tmp_path / "g.plan", **kw)
    if not torch.cuda.is_available():   # the device Halo would exchange on must exist here (as LocalHalo's)
        with pytest.raises(PlanError, match="no CUDA GPU"):
            partplan.nn.Halo(tmp_path / "g.plan", device="cuda")
    assert _halo_options("p", "float32", "cpu", None) == (torch.float32, torch.device("cpu"), 60.0)
    assert _halo_options("p", None, torch.device("cpu"), None)[1] == torch.device("cpu")
    assert _halo_options("p", np.float64, None, 5)[0] == torch.float64
    op = LocalHalo(plan, _data().edge_index)
    with pytest.raises(PlanError, match="dtype"):
        op.predicted_bytes(4, "xx")
    assert op.predicted_bytes(4, "float64")["forward"].sum() == 2 * op.predicted_bytes(4, torch.float32)["forward"].sum()


def test_plan_from_pyg_checks_the_shares_fields_before_writing(tmp_path):
    """A field the shares refuse (x one row short, a sparse x) ended the call after the plan was
    written: a new plan without shares was left behind, and an existing plan's shares were deleted."""
    from partplan.errors import PlanError
    good = _data()
    out = tmp_path / "g.plan"
    partplan.plan_from_pyg(good, 2, out=out, shares=True)
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    short, sparse = good.clone(), good.clone()
    short.x = good.x[:-1]
    sparse.x = good.x.to_sparse()
    for bad, needle in ((short, "field 'x'.*rows"), (sparse, "field 'x' is a .*sparse")):
        for target in (out, tmp_path / "new.plan"):
            with pytest.raises(PlanError, match=needle):
                partplan.plan_from_pyg(bad, 2, out=target, shares=True)
        assert not (tmp_path / "new.plan").exists()
        assert {f.name: f.read_bytes() for f in out.iterdir()} == before


def test_loop_utilities_without_num_nodes_are_exact_or_refused(tmp_path):
    """PyG's add_self_loops without num_nodes counts the vertices as the largest index + 1: on the
    whole graph the isolated vertices at the highest ids get no loop, on a rank other rows do (an
    audit saw the loss move 1.4995 -> 1.5094 at p = 2). Where that differs, the call on a Halo's
    edge_index is one PlanError naming num_nodes; with num_nodes, or on a graph where it does not
    differ, each rank's rows equal single-process PyG."""
    import torch_geometric.utils as pyg_utils    # looked up at each call, as a module's user code does
    from torch_geometric.nn import GCNConv

    from partplan.errors import PlanError
    torch.manual_seed(0)
    n = 80
    ei = torch.randint(0, 70, (2, 300))                      # vertices 70..79 have no edge
    x = torch.randn(n, 6)
    conv = GCNConv(6, 4, add_self_loops=False)
    for edges, refused in ((ei, True), (torch.cat([ei, torch.tensor([[79], [0]])], 1), False)):
        data = Data(edge_index=edges, x=x, num_nodes=n)
        plan = partplan.plan_from_pyg(data, 2, out=tmp_path / f"g{refused}.plan", seed=0)
        op = LocalHalo(plan, edges)
        xs = op([x[torch.from_numpy(v.local_ids)] for v in op.ranks])
        for name in ("add_self_loops", "add_remaining_self_loops"):
            util = getattr(pyg_utils, name)
            for kw, whole in (({}, {}), ({"num_nodes": None}, {"num_nodes": n})):
                want = conv(x, util(edges, **whole)[0]).detach()
                for v, xr in zip(op.ranks, xs):
                    args = {"num_nodes": xr.size(0)} if "num_nodes" in kw else {}
                    if refused and not args:
                        with pytest.raises(PlanError, match="num_nodes"):
                            util(v.edge_index, **args)
                        continue
                    got = conv(xr, util(v.edge_index, **args)[0])[:v.num_local].detach()
                    torch.testing.assert_close(got, want[torch.from_numpy(v.local_ids)], rtol=1e-5, atol=1e-6)


def test_a_pyg_layer_that_adds_its_own_loops_is_named_with_a_fix_its_caller_can_apply(tmp_path):
    """EGConv calls add_remaining_self_loops(edge_index) itself, without num_nodes: where that adds
    other loops on a rank than on the whole graph, the one PlanError names the layer and a fix in
    the data (its caller cannot pass num_nodes); with a loop on each vertex without edges the layer
    runs and equals single-process PyG on every rank's rows."""
    from torch_geometric.nn import EGConv

    from partplan.errors import PlanError
    torch.manual_seed(0)
    n = 60
    ei = torch.randint(0, 55, (2, 240))                      # vertices 55..59 have no edge
    x = torch.randn(n, 8)
    conv = EGConv(8, 8, aggregators=["sum"], num_heads=2, num_bases=2)
    data = Data(edge_index=ei, x=x, num_nodes=n)
    op = LocalHalo(partplan.plan_from_pyg(data, 2, out=tmp_path / "a.plan", seed=0), ei)
    xs = op([x[torch.from_numpy(v.local_ids)] for v in op.ranks])
    with pytest.raises(PlanError, match="EGConv calls it itself.*self loop in the data"):
        conv(xs[0], op.ranks[0].edge_index)
    loops = torch.arange(55, n).repeat(2, 1)
    fixed = torch.cat([ei, loops], 1)
    op = LocalHalo(partplan.plan_from_pyg(Data(edge_index=fixed, x=x, num_nodes=n), 2, out=tmp_path / "b.plan",
                                          seed=0), fixed)
    xs = op([x[torch.from_numpy(v.local_ids)] for v in op.ranks])
    want = conv(x, fixed).detach()
    for v, xr in zip(op.ranks, xs):
        got = conv(xr, v.edge_index)[:v.num_local].detach()
        torch.testing.assert_close(got, want[torch.from_numpy(v.local_ids)], rtol=1e-5, atol=1e-6)


def test_an_equal_copy_is_compared_once_then_followed(tmp_path, monkeypatch):
    """A copy of a Halo's edge_index (a GPU loop holds op.edge_index.to("cuda")) was copied back to
    the host and compared with the Halo's edges at every gcn_norm call; found equal once, it is
    tagged and followed (the checks at propagate and the loop counts too), until it changes in
    place or another Halo appears. The normalization stays PyG's on the whole graph."""
    from torch_geometric.nn import GCNConv

    import partplan.nn.halo as halo
    data = _data()
    plan = partplan.plan_from_pyg(data, 2, out=tmp_path / "g.plan", seed=0)
    op = LocalHalo(plan, data.edge_index)
    v = op.ranks[0]
    copy = v.edge_index.clone()
    compared = []
    real_sums, real_equal = halo._view_sums, torch.equal
    monkeypatch.setattr(halo, "_view_sums", lambda w: compared.append(w.rank) or real_sums(w))
    monkeypatch.setattr(torch, "equal", lambda a, b: compared.append(None) or real_equal(a, b))
    torch.manual_seed(0)
    conv = GCNConv(data.x.size(1), 3).to(data.x.dtype)
    xs = op([data.x[torch.from_numpy(w.local_ids)] for w in op.ranks])
    want = conv(data.x, data.edge_index).detach()[torch.from_numpy(v.local_ids)]
    for _ in range(3):
        got = conv(xs[0], copy)[:v.num_local].detach()
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert len(compared) == 1 and halo._hop_view(copy) is v      # compared once, then tagged
    other = torch.flip(copy, [0])                                 # another graph's edges: remembered too
    assert halo._view_of(other) is None
    seen = len(compared)
    assert halo._view_of(other) is None and len(compared) == seen
    copy[0, 0] = copy[0, 0]                                       # an in-place write: compared again
    assert halo._view_of(copy) is v and len(compared) > seen
    seen = len(compared)
    LocalHalo(plan, data.edge_index)                              # a new Halo (equal edges): every tag is stale
    halo._view_of(other)
    assert len(compared) > seen
    seen = len(compared)
    halo._view_of(copy)
    assert len(compared) > seen
    # found among the ranks of another row count only: "no Halo's" for that count, unknown for the rest
    fresh = v.edge_index.clone()
    assert halo._view_of(fresh, num_nodes=v.num_local + v.num_halo + 1) is None
    assert halo._tagged_copy(fresh) == (False, None) and halo._hop_view(fresh) is None    # a CPU copy: not compared
    assert halo._view_of(fresh) is v
