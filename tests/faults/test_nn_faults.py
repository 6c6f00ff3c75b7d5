"""Faults on the torch surfaces (issue #53, part 3): Halo / LocalHalo / DistSpMM fed mismatched
tensors or a plan of another world size, per-rank shares swapped or taken from another plan of the
same graph, NeighborLoader on a plan without shares and with hostile ``input_nodes``. Each is one
PartplanError naming the plan or the argument, never a traceback. In this process (a one-rank gloo
group where torch.distributed is needed); the truncated / other-rank / other-graph shares are
tests/unit/nn/test_shares.py's."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket

import numpy as np
import pytest
import xxhash

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

import partplan  # noqa: E402
from partplan.errors import OptionError, PartplanError, PlanError  # noqa: E402
from partplan.nn import LocalHalo, NeighborLoader  # noqa: E402

N = 30


def _data(seed=1):
    from torch_geometric.data import Data
    g = torch.Generator().manual_seed(seed)
    return Data(edge_index=torch.randint(0, N, (2, 120), generator=g), num_nodes=N,
                x=torch.randn(N, 4, generator=g), train_mask=torch.rand(N, generator=g) < 0.5)


@pytest.fixture(scope="module")
def plans(tmp_path_factory):
    d = tmp_path_factory.mktemp("nnfaults")
    data = _data()
    partplan.plan_from_pyg(data, 2, out=d / "p2.plan", shares=True, seed=0)
    partplan.plan_from_pyg(data, 2, out=d / "p2b.plan", shares=True, seed=7, backend="random")
    partplan.plan_from_pyg(data, 1, out=d / "p1.plan", shares=True)
    partplan.plan_from_pyg(data, 1, out=d / "p1nos.plan")
    return d


@pytest.fixture(scope="module")
def world1():
    """A one-rank gloo group in this process (Halo and DistSpMM need torch.distributed)."""
    import torch.distributed as dist
    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store = dist.TCPStore("127.0.0.1", port, 1, True)
    dist.init_process_group("gloo", rank=0, world_size=1, store=store)
    yield
    dist.destroy_process_group()


def test_local_halo_refuses_mismatched_tensors(plans):
    op = LocalHalo(plans / "p2.plan")
    xs = [torch.randn(v.num_local, 4) for v in op.ranks]
    cases = {"rows": ([xs[0][:-1], xs[1]], "local rows"),
             "dtype": ([xs[0], xs[1].double()], "one dtype"),
             "int": ([xs[0].long(), xs[1].long()], "floating-point"),
             "device": ([xs[0].to("meta"), xs[1]], "device"),
             "columns": ([xs[0], torch.randn(xs[1].shape[0], 5)], "shape past the first"),
             "sparse": ([xs[0].to_sparse(), xs[1]], "dense rows"),
             "count": ([xs[0]], "one tensor per rank")}
    for name, (bad, word) in cases.items():
        with pytest.raises(PlanError, match=word):
            op(bad)
    assert [y.shape[0] for y in op(xs)] == [v.num_local + len(v.halo_ids) for v in op.ranks]


def test_halo_and_dist_spmm_refuse_a_plan_of_another_world_size_and_bad_inputs(plans, world1):
    from partplan.nn import Halo
    from partplan.runtime.dist_spmm import DistSpMM
    for cls in (Halo, DistSpMM):
        with pytest.raises(PlanError, match="is for 2 ranks, this job has 1"):
            cls(plans / "p2.plan")
    h = Halo(plans / "p1.plan", dtype=torch.float64)
    for bad, word in [(torch.randn(N, 4), "made for torch.float64"),
                      (torch.randn(N - 1, 4, dtype=torch.float64), "local rows"),
                      (torch.randn(N, 4, dtype=torch.float64).to_sparse(), "dense rows"),
                      (np.zeros((N, 4)), "torch.Tensor")]:
        with pytest.raises(PlanError, match=word):
            h(bad)
    s = DistSpMM(plans / "p1.plan")
    for bad, word in [(torch.randn(N, 4, dtype=torch.float64), "dtype"), (torch.randn(N - 1, 4), "shape"),
                      (torch.randn(N, 4, device="meta"), "is on meta")]:
        with pytest.raises(PlanError, match=word):
            s(bad)


def _resign_share(plan, rank, data):
    (plan / f"share-{rank:05d}.arrow").write_bytes(data)
    m = json.loads((plan / "manifest.json").read_text())
    m["shares"]["files"][rank].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest(),
                                          xxh3_128=xxhash.xxh3_128_hexdigest(data))
    (plan / "manifest.json").write_text(json.dumps(m))


def test_shares_swapped_between_ranks_or_from_another_partition_of_the_same_graph(plans, tmp_path):
    from partplan.nn.shares import read_share
    bad = tmp_path / "swapped.plan"
    shutil.copytree(plans / "p2.plan", bad)
    s0, s1 = ((plans / "p2.plan" / f"share-0000{r}.arrow").read_bytes() for r in (0, 1))
    _resign_share(bad, 0, s1)
    _resign_share(bad, 1, s0)
    for r in (0, 1):
        with pytest.raises(PlanError, match=f"share-0000{r}.arrow.*another rank"):
            read_share(bad, r)
    # the same graph partitioned otherwise: its shares (and their manifest entries) in this plan
    other = tmp_path / "other.plan"
    shutil.copytree(plans / "p2.plan", other)
    theirs = json.loads((plans / "p2b.plan" / "manifest.json").read_text())["shares"]
    m = json.loads((other / "manifest.json").read_text())
    m["shares"] = theirs
    (other / "manifest.json").write_text(json.dumps(m))
    for r in (0, 1):
        shutil.copyfile(plans / "p2b.plan" / f"share-0000{r}.arrow", other / f"share-0000{r}.arrow")
    with pytest.raises(PlanError, match="another plan"):
        LocalHalo(other)
    # a manifest entry whose size is not a count
    m["shares"]["files"][0]["bytes"] = None
    (other / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(PlanError, match=r"shares.files\[0\]"):
        read_share(other, 0)


def test_neighbor_loader_without_shares_and_with_hostile_input_nodes(plans):
    with pytest.raises(PlanError, match="no shares"):
        NeighborLoader(plans / "p1nos.plan", [2])
    hostile = [torch.tensor([-1, 2]), torch.tensor([N]), torch.tensor([2 ** 62]), torch.tensor([0.5]),
               torch.zeros(2, 2, dtype=torch.long), torch.tensor([True, False]), [1, 2, "x"], [[1], [1, 2]],
               np.array([2 ** 64 - 1], dtype=np.uint64), torch.tensor([float("nan")]),
               torch.tensor([1, 2], device="meta"), torch.tensor([1, 2]).to_sparse(), "no_such_field", "x"]
    for bad in hostile:
        with pytest.raises(PartplanError, match="input_nodes"):
            NeighborLoader(plans / "p1.plan", [2], input_nodes=bad)
    ok = NeighborLoader(plans / "p1.plan", [2], input_nodes=torch.tensor([], dtype=torch.long))
    assert list(ok) == []
    assert os.path.isdir(plans / "p1.plan")


def test_option_error_is_a_partplan_error():
    assert issubclass(OptionError, PartplanError)
