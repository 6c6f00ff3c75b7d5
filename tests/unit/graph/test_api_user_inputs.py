"""What a Python user's script hands the public API (found by an API fuzzer): the caller's arrays
are left alone, torch / numpy scalars and dtypes are taken as their values, and what partplan cannot
do right is one named error before any work — never a silent zero, a truncated float, another
graph's figures or numpy's MemoryError."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import partplan
from partplan import Graph
from partplan.errors import GraphFormatError, OptionError, PartitionError, PartplanWarning, SizeLimitError
from partplan.io import read_graph, write_graph
from partplan.metrics.cost import dtype_bytes


@pytest.mark.parametrize("cls", [sp.csr_matrix, sp.csr_array])
def test_from_scipy_leaves_the_callers_csr_alone(cls):
    A = cls((np.array([1., 2., 3.]), np.array([1, 1, 0]), np.array([0, 2, 3])), shape=(2, 2))
    before = (A.indptr.copy(), A.indices.copy(), A.data.copy())
    g = Graph.from_scipy(A)
    assert A.nnz == 3 and all(np.array_equal(x, y) for x, y in zip((A.indptr, A.indices, A.data), before))
    assert np.array_equal(sp.csr_matrix((g.data, g.indices, g.indptr), shape=(2, 2)).toarray(), A.toarray())


def test_raw_csr_out_of_order_is_sorted_with_its_values():
    rng = np.random.default_rng(0)
    for t in range(200):
        n = int(rng.integers(1, 9))
        M = sp.random(n, n, density=float(rng.random()), random_state=t, format="csr")
        perm_ind, perm_dat = M.indices.copy(), M.data.copy()
        for r in range(n):               # each row's entries in a random order
            a, b = M.indptr[r], M.indptr[r + 1]
            o = rng.permutation(b - a)
            perm_ind[a:b], perm_dat[a:b] = M.indices[a:b][o], M.data[a:b][o]
        given = perm_ind.copy()
        g = Graph(M.indptr, perm_ind, perm_dat)
        assert np.array_equal(perm_ind, given)                          # the caller's array unchanged
        assert np.array_equal(sp.csr_matrix((g.data, g.indices, g.indptr), shape=(n, n)).toarray(), M.toarray())
        assert g.fingerprint == Graph.from_scipy(M).fingerprint
    sym = Graph([0, 2, 3], [1, 0, 0])            # [[1, 1], [1, 0]] listed out of order: symmetric
    assert sym.is_symmetric() and sym.indices.tolist() == [0, 1, 0]


@pytest.mark.parametrize("field, args", [
    ("indptr", (np.array([0, 1.7, 2]), [1, 0])),
    ("indices", ([0, 1, 2], np.array([1.5, 0.0]))),
    ("vertex_weights", ([0, 1, 2], [1, 0], None, True, None, np.array([1.5, 2.0]))),
])
def test_constructor_refuses_fractions_it_would_cut(field, args):
    with pytest.raises(GraphFormatError) as exc:
        Graph(*args)
    assert exc.value.field == field and "not an integer" in str(exc.value)


def test_torch_inputs_are_taken_as_their_values():
    w = torch.tensor([1., 2.], requires_grad=True)
    assert Graph.from_edges(torch.tensor([0, 1]), torch.tensor([1, 0]), w).data.tolist() == [1., 2.]
    g = Graph.from_edge_index(torch.tensor([[0, 1], [1, 0]]), edge_weight=torch.tensor([0.5, 3.], dtype=torch.bfloat16))
    assert sorted(g.data.tolist()) == [0.5, 3.0]
    assert Graph.from_scipy(np.eye(2, dtype=np.float16)).data.tolist() == [1.0, 1.0]
    assert Graph.from_scipy(torch.eye(3, dtype=torch.bfloat16)).nnz == 3
    assert Graph.from_edges([0], [1], n=torch.tensor(3)).n == 3 == Graph.from_edges([0], [1], n=np.int32(3)).n
    with pytest.raises(GraphFormatError, match="sparse torch tensor"):
        Graph.from_scipy(torch.eye(2).to_sparse())
    with pytest.raises(GraphFormatError):
        Graph.from_edges([0], [1], n=torch.tensor(2.5))


@pytest.mark.parametrize("mode", ["gcn", "mean"])
def test_a_negative_degree_is_refused_by_the_normalization(mode):
    g = Graph.from_scipy(sp.csr_matrix(np.array([[0, -3.], [-3, 0]])))
    with pytest.raises(GraphFormatError, match="row 0: its weights .* sum to -2"):
        partplan.build_plan(g, [0, 1], normalize=mode)
    ok = Graph.from_scipy(sp.csr_matrix(np.array([[0, -0.5], [2., 0]])))   # negative values, positive degrees
    partplan.build_plan(ok, [0, 1], normalize=mode)


@pytest.mark.parametrize("ext", ["txt", "csv", "parquet"])
def test_edge_files_refuse_what_their_readers_refuse(tmp_path, ext):
    neg = Graph.from_scipy(sp.csr_matrix(np.array([[0, -3.], [1., 0]])))
    out = tmp_path / f"g.{ext}"
    with pytest.raises(GraphFormatError, match="negative weight"):
        write_graph(neg, out)
    with pytest.raises(GraphFormatError, match="without edges"):
        write_graph(Graph([0, 0, 0], []), out)
    assert not out.exists()
    write_graph(neg, tmp_path / "g.npz")     # formats that hold any value take it
    assert read_graph(tmp_path / "g.npz").data.min() == -3


def test_edge_files_warn_about_vertices_without_edges(tmp_path):
    g = Graph.from_edges([0, 4], [4, 2], n=7)            # vertices 1, 3, 5, 6 have no edge
    with pytest.warns(PartplanWarning, match="4 of the 7 vertices have no edge .* it has 3 vertices"):
        write_graph(g, tmp_path / "g.txt")
    assert read_graph(tmp_path / "g.txt").n == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_graph(Graph.from_edges([0, 1], [1, 2]), tmp_path / "h.txt")     # every vertex has an edge


def test_cli_prints_the_warning_as_one_line(tmp_path, capsys):
    from partplan.cli.main import main
    write_graph(Graph.from_edges([0, 4], [4, 2], n=7), tmp_path / "g.npz")
    assert main(["-q", "convert", str(tmp_path / "g.npz"), str(tmp_path / "g.txt")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("partplan: warning: ") and "4 of the 7 vertices" in err[0]


def test_analyze_refuses_a_partition_of_another_graph():
    g4 = Graph.from_edges(np.arange(3), np.arange(1, 4), symmetrize=True)
    other = Graph.from_edges([0, 0, 0], [1, 2, 3], symmetrize=True)     # same n, other edges
    p = partplan.partition(g4, 2)
    with pytest.raises(PartitionError, match="another graph"):
        partplan.analyze(other, p)
    assert partplan.analyze(g4, p).total_volume == partplan.analyze(g4, p.part, 2).total_volume


def test_dense_volume_matrices_are_checked_before_counting(monkeypatch):
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", "1M")       # a 300 x 300 int64 matrix (x2) is 1.4 MB
    n = 400
    g = Graph.from_edges(np.arange(n - 1), np.arange(1, n), n=n, symmetrize=True)
    for call in (lambda: partplan.analyze(g, np.arange(n) % 300),
                 lambda: partplan.analyze_2d(g, np.arange(n) % 300, 20, 15),
                 lambda: partplan.analyze_15d(g, np.arange(n) % 100, c=3)):
        with pytest.raises(SizeLimitError, match="PARTPLAN_MAX_BYTES"):
            call()
    partplan.analyze(g, np.arange(n) % 100)              # 100 x 100 fits


def test_15d_replication_beyond_the_budget_is_one_error():
    g4 = Graph.from_edges(np.arange(3), np.arange(1, 4), symmetrize=True)
    with pytest.raises(SizeLimitError, match="ranks"):
        partplan.analyze_15d(g4, [0, 0, 1, 1], c=10 ** 6)


def test_kaminpar_context_and_preset_are_one_option():
    A = sp.random(200, 200, density=.03, random_state=3, format="csr")
    g = Graph.from_scipy(A + A.T)
    with pytest.raises(OptionError, match="name two contexts"):
        partplan.partition(g, 4, backend="kaminpar", context="strong", preset="fast")
    a = partplan.partition(g, 4, backend="kaminpar", context="fast", preset="fast")
    b = partplan.partition(g, 4, backend="kaminpar", preset="fast")
    assert np.array_equal(a.part, b.part)


def test_stochastic_min_batches_above_max_is_refused():
    g = Graph.from_edges(np.arange(60), np.arange(1, 61), symmetrize=True)
    with pytest.raises(OptionError, match="min_batches=10 is above max_batches=5"):
        partplan.partition(g, 4, model="stochastic", theta=0.5, min_batches=10, max_batches=5)


def test_numpy_bools_and_torch_dtypes_are_their_values():
    g = Graph.from_edges(np.arange(30), np.arange(1, 31), symmetrize=True)
    assert np.array_equal(partplan.partition(g, 2, refine=np.True_).part, partplan.partition(g, 2, refine=True).part)
    assert [dtype_bytes(d) for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64)] == [2, 2, 4, 8]
    a, b = partplan.analyze(g, np.arange(31) % 2, dtype=torch.bfloat16), partplan.analyze(g, np.arange(31) % 2, dtype="bfloat16")
    assert a.total_volume == b.total_volume and a.max_send == b.max_send


def test_repeated_column_ids_keep_their_values_in_order_across_blocks(monkeypatch):
    import partplan.graph as G
    monkeypatch.setattr(G, "CANONICAL_BLOCK", 3)         # the sortedness check's block edges, reached
    g = Graph([0, 3, 3, 6], [1, 0, 1, 2, 2, 0], [5., 7., 9., 1., 2., 3.])
    assert g.indices.tolist() == [0, 1, 1, 0, 2, 2] and g.data.tolist() == [7., 5., 9., 3., 1., 2.]
    rng = np.random.default_rng(5)
    for t in range(300):
        n = int(rng.integers(1, 7))
        cnt = rng.integers(0, 5, n)
        ptr = np.r_[0, np.cumsum(cnt)]
        ind = rng.integers(0, n, int(ptr[-1]))
        dat = rng.standard_normal(ind.size)
        g = Graph(ptr, ind, dat)
        for r in range(n):                               # each row: its (column, value) pairs, stably sorted
            a, b = ptr[r], ptr[r + 1]
            o = np.argsort(ind[a:b], kind="stable")
            assert np.array_equal(g.indices[a:b], ind[a:b][o]) and np.array_equal(g.data[a:b], dat[a:b][o])


@pytest.mark.parametrize("writer, name", [("write_edgelist", "g.txt"), ("write_edge_table", "g.parquet"),
                                          ("write_edge_table", "g.csv")])
def test_the_edge_writers_themselves_refuse_and_warn(tmp_path, writer, name):
    import partplan.io as pio
    write = getattr(pio, writer)
    with pytest.raises(GraphFormatError, match="negative weight"):
        write(Graph.from_scipy(sp.csr_matrix(np.array([[0, -1.], [1., 0]]))), tmp_path / name)
    with pytest.raises(GraphFormatError, match="without edges"):
        write(Graph([0, 0], []), tmp_path / name)
    with pytest.warns(PartplanWarning, match="1 of the 3 vertices"):
        write(Graph.from_edges([0], [2], n=3), tmp_path / name)


def test_writing_vertex_weights_where_they_have_no_place_warns(tmp_path):
    from partplan.io.chunked import write_chunked
    g = Graph.from_edges([0, 1, 2], [1, 2, 3], symmetrize=True)
    gw = Graph(g.indptr, g.indices, vertex_weights=np.array([5, 1, 1, 1]), directed=False)
    for out in (tmp_path / "g.mtx", tmp_path / "g.npz"):
        with pytest.warns(PartplanWarning, match="vertex weights are not written"):
            write_graph(gw, out)
    with pytest.warns(PartplanWarning, match="vertex weights"):
        write_chunked(gw, tmp_path / "c", chunks=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_graph(gw, tmp_path / "g.graph")                  # METIS keeps them
        assert read_graph(tmp_path / "g.graph").vertex_weights.tolist() == [5, 1, 1, 1]
        write_graph(g, tmp_path / "h.mtx")                     # nothing to lose


def test_warnings_name_the_users_line_and_follow_a_refusal_never(tmp_path):
    """The warning points at the user's own call, whichever writer it called; a refused file gets no
    warning about what it would have lost."""
    import partplan.io as pio
    g = Graph.from_edges([0], [2], n=3)
    for write, name in ((pio.write_edgelist, "a.txt"), (pio.write_edge_table, "a.parquet"), (write_graph, "b.txt")):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            write(g, tmp_path / name)
        assert [w.filename for w in got] == [__file__], [(w.filename, w.lineno) for w in got]
    empty = Graph([0, 0, 0], [], vertex_weights=np.array([1, 2]))
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        with pytest.raises(GraphFormatError, match="without edges"):
            write_graph(empty, tmp_path / "c.txt")
    assert got == []
    with pytest.warns(PartplanWarning, match="vertex weights"):
        pio.write_npz(Graph([0, 1, 1], [1], vertex_weights=np.array([1, 2])), tmp_path / "d.npz")
