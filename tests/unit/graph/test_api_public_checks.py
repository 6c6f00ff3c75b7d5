"""Public functions a script may call directly: the raw-CSR counters of ``partplan.metrics``, the models of ``partplan.models``, the α-β estimate, writers whose
output folder lies under a file, ``plan_from_pyg(out=)`` checked before the partition, and the
messages for a directory, a non-UTF-8 manifest or a networkx graph given where a file / matrix is
expected. Each asserts one named partplan error (never numpy's), and the counters' results against a
brute-force count."""
from __future__ import annotations

import io
import zipfile

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

import partplan
from partplan import Graph, metrics, models
from partplan.errors import GraphFormatError, OptionError, OutputPathError, PartitionError, PlanError


def _brute(indptr, indices, part, k):
    """vol[q, r]: distinct columns j of part q (owner part[j]) read by a row of part r != q."""
    n = len(indptr) - 1
    vol = np.zeros((k, k), dtype=np.int64)
    for j in range(n):
        readers = {part[i] for i in range(n) for t in range(indptr[i], indptr[i + 1]) if indices[t] == j}
        for r in readers - {part[j]}:
            vol[part[j], r] += 1
    return vol


def test_raw_csr_counters_match_brute_force():
    rng = np.random.default_rng(3)
    for t in range(30):
        n, k = int(rng.integers(2, 12)), int(rng.integers(1, 4))
        A = sp.random(n, n, density=0.3, random_state=t, format="csr")
        part = rng.integers(0, k, n)
        want = _brute(A.indptr, A.indices, part, k)
        vol, lam = metrics.volume_matrix(A.indptr, A.indices, part, k)
        assert np.array_equal(vol, want)
        assert np.array_equal(metrics.volume_matrix_unique(A.indptr, A.indices, part, k), want)
        assert int((lam - 1).sum()) == int(want.sum())
        j, r = metrics.needed_pairs(A.indptr, A.indices, part, k, n)
        got = set(zip(j.tolist(), r.tolist()))
        assert got == {(int(c), int(part[i])) for i in range(n) for c in A.indices[A.indptr[i]:A.indptr[i + 1]]}


@pytest.mark.parametrize("fn", [metrics.volume_matrix, metrics.volume_matrix_unique])
@pytest.mark.parametrize("part, k, err", [
    ([0, 2], 2, PartitionError),          # a part id >= k
    ([0, -1], 2, PartitionError),         # negative
    ([0], 2, PartitionError),             # one entry short
    ([0, 1], 0, PartitionError),          # k = 0
    ([0.0, 1.5], 2, PartitionError),      # not integers
])
def test_raw_csr_counters_refuse_bad_parts(fn, part, k, err):
    with pytest.raises(err):
        fn([0, 1, 2], [1, 0], part, k)


def test_raw_csr_counters_refuse_bad_csr():
    with pytest.raises(GraphFormatError, match="column id 5"):
        metrics.volume_matrix([0, 1, 2], [1, 5], [0, 1], 2)
    with pytest.raises(GraphFormatError, match="indptr"):
        metrics.volume_matrix([0, 3, 2], [1, 0], [0, 1], 2)
    with pytest.raises(GraphFormatError, match="column id 3"):
        metrics.needed_pairs([0, 1, 2], [1, 3], [0, 1], 2, 3)
    j, r = metrics.needed_pairs([0, 1, 2], [2, 2], [0, 1], 2, 3)     # 2 rows x 3 columns
    assert j.tolist() == [2, 2] and r.tolist() == [0, 1]


def test_models_check_their_arguments():
    g = Graph.from_edges([0, 1, 2, 3], [1, 2, 3, 0], symmetrize=True)
    for fn in (models.column_net, models.joint_net, models.metis_graph):
        with pytest.raises(OptionError, match="graph must be a partplan Graph"):
            fn(None)
    with pytest.raises(OptionError, match="net_weight"):
        models.column_net(g, net_weight=1.5)
    with pytest.raises(OptionError, match="net_weight"):
        models.column_net(g, net_weight=0)
    assert models.column_net(g, net_weight=np.int64(3)).net_weights.tolist() == [3] * 4
    for k in ("2", 0, 2.0, True):
        with pytest.raises(OptionError, match="k must be"):
            models.stochastic_hypergraph(g, k)
    with pytest.raises(OptionError, match="k=5 parts exceed n=4"):
        models.stochastic_hypergraph(g, 5)
    with pytest.raises(OptionError, match="theta"):
        models.stochastic_hypergraph(g, 2, theta="0.1")


def test_alpha_beta_time_checks_and_computes():
    got = metrics.alpha_beta_time([1, 2], [2, 0], [8, 0], [0, 16], alpha=1.0, beta=0.5)
    assert got.tolist() == [max(1, 2) * 1.0 + max(8, 0) * 0.5, max(2, 0) * 1.0 + max(0, 16) * 0.5]
    with pytest.raises(OptionError, match="alpha"):
        metrics.alpha_beta_time([1], [1], [1], [1], alpha=-1.0)
    with pytest.raises(OptionError, match="send_bytes"):
        metrics.alpha_beta_time([1], [1], [-1], [1])
    with pytest.raises(OptionError, match="one shape"):
        metrics.alpha_beta_time([1, 2], [1], [1], [1])


def test_writers_under_a_file_name_it(tmp_path):
    (tmp_path / "afile").write_text("x")
    g = Graph.from_edges([0, 1, 2], [1, 2, 0], symmetrize=True)
    plan = partplan.build_plan(g, [0, 1, 1], 2)
    calls = [lambda out: partplan.write_plan(plan, out), lambda out: partplan.io.write_partition([0, 1, 1], out),
             lambda out: partplan.io.write_graph(g, out)]
    for call, name in zip(calls, ("b.plan", "w.part", "g.mtx")):
        for out in (tmp_path / "afile" / name, tmp_path / "afile" / "deeper" / name):
            with pytest.raises(OutputPathError, match="afile is a file, not a directory"):
                call(out)
    assert (tmp_path / "afile").read_text() == "x"


def test_plan_from_pyg_checks_out_before_partitioning(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from torch_geometric.data import Data

    from partplan.interop.pyg import plan_from_pyg
    (tmp_path / "taken").write_text("keep")
    data = Data(edge_index=torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]]), num_nodes=4)
    import partplan.interop.pyg as pyg
    import partplan.partition.api as api
    early = lambda *a, **kw: pytest.fail("partitioned before checking out=")    # noqa: E731
    monkeypatch.setattr(api, "partition", early)
    monkeypatch.setattr(pyg, "_directed_partition", early)
    with pytest.raises(PlanError, match="not a plan directory"):
        plan_from_pyg(data, 2, out=tmp_path / "taken")
    (tmp_path / "afile").write_text("")
    with pytest.raises(OutputPathError, match="afile"):
        plan_from_pyg(data, 2, out=tmp_path / "afile" / "x.plan")
    assert (tmp_path / "taken").read_text() == "keep"


def test_messages_name_what_was_given(tmp_path):
    with pytest.raises(GraphFormatError, match="networkx.to_scipy_sparse_array"):
        Graph.from_scipy(nx.path_graph(4))
    with pytest.raises(OptionError, match="pattern"):
        Graph.from_scipy(sp.eye(3, format="csr"), pattern="no")
    with pytest.raises(PartitionError, match="is a directory, not a partition file"):
        partplan.load_partition(tmp_path)
    g = Graph.from_edges([0, 1, 2], [1, 2, 0], symmetrize=True)
    p = partplan.partition(g, 2, backend="metis", model="graph")
    with pytest.raises(PartitionError, match="k=5 given with a partition into 2 parts"):
        partplan.analyze(g, p, 5)
    assert partplan.analyze(g, p, 2).total_volume == partplan.analyze(g, p.part, 2).total_volume
    out = partplan.write_plan(partplan.build_plan(g, p.part, 2), tmp_path / "x.plan")
    (out / "manifest.json").write_bytes(b"\x00\x00\x00{" + b"\xff" * 20)
    with pytest.raises(PlanError) as info:
        partplan.load_plan(out)
    assert "codec" not in str(info.value)


def test_npz_member_header_with_mixed_key_types_is_refused(tmp_path):
    from partplan.nn.data import DataError, check_data
    buf = io.BytesIO()
    text = b"{b'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }"
    text += b" " * (-(10 + len(text) + 1) % 64) + b"\n"
    buf.write(b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + b"\x00" * 24)
    with zipfile.ZipFile(tmp_path / "d.npz", "w") as zf:
        for key in ("x", "y", "train_mask", "val_mask", "test_mask"):
            zf.writestr(key + ".npy", buf.getvalue())
    with pytest.raises(DataError, match="not a .npy array"):
        check_data(tmp_path / "d.npz", 3)
