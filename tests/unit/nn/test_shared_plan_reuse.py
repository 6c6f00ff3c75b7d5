"""``shared_plan(data, path, reuse=True)`` keeps a plan only when it was built for
this graph (issue #50): another graph with the same n, ranks and normalize —
other edges, or the same edges read with other weights — is partitioned again.
The oracle for "the plan at path is the plan of this graph" is the matrix the
plan's shards multiply, compared with a scipy matrix built here from
``edge_index`` (and the PyG gcn_norm for normalized plans)."""
import numpy as np
import pytest
import scipy.sparse as sp

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")
from torch_geometric.data import Data
from torch_geometric.nn.conv.gcn_conv import gcn_norm

import partplan
import partplan.nn as pnn
from partplan.runtime.validate import _rebuild

N = 24


def _data(seed: int, weights: bool = False) -> Data:
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, N, (2, 80), generator=g)
    d = Data(edge_index=ei, num_nodes=N)
    if weights:
        d.edge_weight = torch.rand(ei.size(1), generator=g) + 0.5
    return d


def _dense(d: Data, weight: str | None, normalize: str | None) -> np.ndarray:
    w = None if weight is None else d[weight].double()
    ei = d.edge_index
    if normalize == "gcn":
        ei, w = gcn_norm(ei, w, N, add_self_loops=True, dtype=torch.float64)
    v = np.ones(ei.size(1)) if w is None else w.numpy()
    e = ei.numpy()
    return sp.coo_matrix((v, (e[1], e[0])), shape=(N, N)).toarray()


def _matrix(path) -> np.ndarray:
    return _rebuild(partplan.load_plan(path))[0].toarray()


@pytest.mark.parametrize("normalize", [None, "gcn"])
def test_reuse_rebuilds_for_another_graph_with_the_same_n(tmp_path, normalize):
    path = tmp_path / "g.plan"
    a, b = _data(0), _data(1)
    pnn.shared_plan(a, path, reuse=True, normalize=normalize, model="baseline", progress=False)
    assert np.allclose(_matrix(path), _dense(a, None, normalize))
    pnn.shared_plan(b, path, reuse=True, normalize=normalize, model="baseline", progress=False)
    assert np.allclose(_matrix(path), _dense(b, None, normalize))        # b's plan, not a's


def test_reuse_rebuilds_when_only_the_weights_differ(tmp_path):
    path = tmp_path / "g.plan"
    d = _data(2, weights=True)
    pnn.shared_plan(d, path, reuse=True, normalize="gcn", model="baseline", progress=False)
    assert np.allclose(_matrix(path), _dense(d, None, "gcn"))
    pnn.shared_plan(d, path, reuse=True, normalize="gcn", weight="edge_weight", model="baseline", progress=False)
    assert np.allclose(_matrix(path), _dense(d, "edge_weight", "gcn"))


def test_reuse_keeps_the_plan_of_the_same_graph_without_partitioning(tmp_path, monkeypatch):
    path = tmp_path / "g.plan"
    d = _data(3, weights=True)
    pnn.shared_plan(d, path, reuse=True, normalize="gcn", weight="edge_weight", model="baseline",
                    progress=False)
    before = (path / "manifest.json").read_bytes()

    def refuse(*a, **k):
        raise AssertionError("the plan was partitioned again")
    import partplan.partition.api as api
    monkeypatch.setattr(api, "partition", refuse)
    # an equal copy of the Data (a new object): the same graph, the plan is kept
    same = Data(edge_index=d.edge_index.clone(), num_nodes=N, edge_weight=d.edge_weight.clone())
    assert pnn.shared_plan(same, path, reuse=True, normalize="gcn", weight="edge_weight",
                           model="baseline") == str(path)
    assert (path / "manifest.json").read_bytes() == before
    # another graph with the same n: rebuilt (here the refusing partitioner says so)
    with pytest.raises(AssertionError, match="partitioned again"):
        pnn.shared_plan(_data(4), path, reuse=True, normalize="gcn", model="baseline")
