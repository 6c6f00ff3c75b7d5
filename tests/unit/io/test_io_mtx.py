"""Matrix Market reader / writer against scipy.io.mmread / mmwrite (the
oracle), plus every malformed-input error with file and line."""
from __future__ import annotations

import gzip

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from partplan import Graph
from partplan.errors import BackendUnavailableError, GraphFormatError
from partplan.io import read_graph, write_graph
from partplan.io.mtx import read_mtx, write_mtx


def expect_error(path, line, match):
    with pytest.raises(GraphFormatError) as ei:
        read_graph(path)
    assert ei.value.path == str(path) and ei.value.line == line, str(ei.value)
    assert match in str(ei.value), str(ei.value)


def rand_matrix(n, density, seed, *, integer=False):
    A = sp.random(n, n, density=density, random_state=seed, format="csr")
    A.data = np.round(A.data * 10 - 5) if integer else A.data - 0.5  # negative values are legal
    return A


@pytest.mark.parametrize("field", ["real", "integer", "pattern"])
@pytest.mark.parametrize("symmetry", ["general", "symmetric", "skew-symmetric"])
def test_matches_scipy_mmread(tmp_path, field, symmetry):
    if field == "pattern" and symmetry == "skew-symmetric":
        pytest.skip("not a valid combination")
    A = rand_matrix(60, 0.08, 3, integer=(field == "integer"))
    if symmetry == "symmetric":
        A = (A + A.T).tocsr()
    elif symmetry == "skew-symmetric":
        A = sp.triu(A, 1)
        A = (A - A.T).tocsr()
    p = tmp_path / "m.mtx"
    scipy.io.mmwrite(p, A, field=field, symmetry=symmetry)
    ref = sp.csr_matrix(scipy.io.mmread(p))
    g = read_graph(p)
    assert g.directed == (symmetry == "general")
    if field == "pattern":
        assert g.data is None
    got = g.to_scipy()
    ref.sort_indices()
    assert np.array_equal(got.indptr, ref.indptr) and np.array_equal(got.indices, ref.indices)
    if field != "pattern":
        assert np.array_equal(got.data, ref.data)


@pytest.mark.parametrize("symmetry", ["symmetric", "skew-symmetric"])
def test_symmetrize_makes_the_values_symmetric(tmp_path, symmetry):
    """symmetrize: the larger weight of the two directions (scipy's maximum(A, A^T)); a symmetric
    file is that already, a skew-symmetric one (x and -x) is not and was returned unchanged."""
    A = sp.triu(rand_matrix(40, 0.1, 5), 1)
    A = (A + A.T if symmetry == "symmetric" else A - A.T).tocsr()
    p = tmp_path / "m.mtx"
    scipy.io.mmwrite(p, A, symmetry=symmetry)
    ref = sp.csr_matrix(scipy.io.mmread(p))
    ref = ref.maximum(ref.T).tocsr()
    ref.sort_indices()
    got = read_graph(p, symmetrize=True).to_scipy()
    assert (got != got.T).nnz == 0
    assert np.array_equal(got.indptr, ref.indptr) and np.array_equal(got.indices, ref.indices)
    assert np.array_equal(got.data, ref.data)


def test_handwritten_symmetric_with_comments_duplicates_gz(tmp_path):
    text = ("%%MatrixMarket matrix coordinate integer symmetric\n"
            "% a comment\n%\n\n"
            "4 4 5\n"
            "2 1 3\n"
            "3 3 7\n"
            "% interior comment\n"
            "4 1 -2\n"
            "2 1 1\n"
            "4 2 5\n")
    p = tmp_path / "h.mtx.gz"
    with gzip.open(p, "wt") as f:
        f.write(text)
    g = read_graph(p)
    dense = np.zeros((4, 4))
    for i, j, v in [(2, 1, 3), (3, 3, 7), (4, 1, -2), (2, 1, 1), (4, 2, 5)]:  # by hand
        dense[i - 1, j - 1] += v
        if i != j:
            dense[j - 1, i - 1] += v
    assert np.array_equal(g.to_scipy().toarray(), dense)
    assert g.nnz == 7


def test_writer_read_by_scipy(tmp_path):
    A = rand_matrix(40, 0.1, 5)
    g = Graph.from_scipy(A)
    p = write_mtx(g, tmp_path / "w.mtx")
    assert "general" in p.read_text().splitlines()[0]
    assert abs(sp.csr_matrix(scipy.io.mmread(p)) - A).max() == 0  # exact: shortest round-trip floats
    S = (A + A.T).tocsr()
    gs = Graph.from_scipy(S, directed=False)
    p = write_graph(gs, tmp_path / "s.mtx")
    assert "symmetric" in p.read_text().splitlines()[0]
    assert abs(sp.csr_matrix(scipy.io.mmread(p)) - S).max() == 0
    pat = Graph.from_scipy(A, pattern=True)
    p = write_graph(pat, tmp_path / "p.mtx.gz")
    back = read_graph(p)
    assert back.data is None and back.fingerprint == pat.fingerprint
    with pytest.raises(GraphFormatError, match="not symmetric"):
        write_mtx(g, tmp_path / "x.mtx", symmetric=True)


def test_reader_writer_round_trip_keeps_bytes_of_pattern(tmp_path):
    g = Graph.from_edges([0, 1, 2, 3], [1, 2, 3, 0], symmetrize=True, self_loops="add")
    p = write_graph(g, tmp_path / "c.mtx")
    h = read_mtx(p)
    assert h.fingerprint == g.fingerprint and not h.directed


HEAD = "%%MatrixMarket matrix coordinate real general\n"


@pytest.mark.parametrize("content,line,match", [
    ("", 1, "empty file"),
    ("3 3 1\n1 1 1\n", 1, "banner"),
    ("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n", 1, "dense 'array'"),
    ("%%MatrixMarket matrix coordinate real weird\n2 2 0\n", 1, "unknown symmetry"),
    ("%%MatrixMarket matrix coordinate foo general\n2 2 0\n", 1, "unknown field"),
    (HEAD + "% c\n3 4 1\n1 1 1\n", 3, "rectangular (3 x 4)"),
    (HEAD + "3 3\n", 2, "bad size line"),
    (HEAD + "3 3 2\n1 1 1.0\n", 3, "announces 2 entries, found 1"),
    (HEAD + "3 3 1\n1 1 1.0\n2 2 1.0\n", 4, "more entries than the 1 announced"),
    (HEAD + "3 3 2\n1 1 1.0\n4 1 1.0\n", 4, "out of range [1, 3]"),
    (HEAD + "3 3 2\n1 1 1.0\n0 1 1.0\n", 4, "1-based"),
    (HEAD + "3 3 2\n1 1 1.0\n2 1 nan\n", 4, "non-finite value"),
    (HEAD + "3 3 2\n1 1 1.0\n2 1 inf\n", 4, "non-finite value"),
    (HEAD + "3 3 2\n1 1 1.0\n2 1 x\n", 4, "bad token 'x'"),
    (HEAD + "3 3 2\n1 1 1.0\n2 1 -\n", 4, "bad token '-'"),     # a lone sign last: numpy reads 0
    ("%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n1 -\n", 4, "bad token '-'"),
    (HEAD + "3 3 2\n1 1 1.0\n2 1\n", 4, "expected 3 columns"),
    ("%%MatrixMarket matrix coordinate integer general\n3 3 2\n1 1 1\n2 1 2.5\n", 4, "non-integer value"),
    ("%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 1\n2 1 1\n", 4, "expected 2 columns"),
    ("%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 1\n2 2 1\n", 3, "diagonal"),
])
def test_errors_name_file_and_line(tmp_path, content, line, match):
    p = tmp_path / "bad.mtx"
    p.write_text(content)
    expect_error(p, line, match)


def test_complex_is_refused_clearly(tmp_path):
    p = tmp_path / "c.mtx"
    p.write_text("%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1 0\n")
    with pytest.raises(BackendUnavailableError, match="complex"):
        read_graph(p)


def test_symmetrize_does_not_double_a_symmetric_file(tmp_path):
    S = (rand_matrix(20, 0.2, 9) + rand_matrix(20, 0.2, 9).T).tocsr()
    p = tmp_path / "s.mtx"
    scipy.io.mmwrite(p, S, symmetry="symmetric")
    assert abs(read_graph(p, symmetrize=True).to_scipy() - S).max() < 1e-15
