"""Graph.from_edges / from_scipy on what a user's script may hand them: every problem is one
GraphFormatError (or SizeLimitError) naming the field, before any allocation — never numpy's
TypeError, MemoryError or a silently dropped imaginary part."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from partplan.errors import GraphFormatError, SizeLimitError
from partplan.graph import Graph


@pytest.mark.parametrize("call, err, field, needle", [
    (lambda: Graph.from_edges([0, 1], [1, 2], n=3.5), GraphFormatError, "n", "integer >= 0"),
    (lambda: Graph.from_edges([0, 1], [1, 2], n=-1), GraphFormatError, "n", "integer >= 0"),
    (lambda: Graph.from_edges([0], [1], n=10 ** 13), SizeLimitError, "n", "memory budget"),
    (lambda: Graph.from_edges([0, 1], [1, 2], ["a", "b"]), GraphFormatError, "weight", "real numbers"),
    (lambda: Graph.from_edges([0, 1], [1, 0], np.array([1 + 1j, 2])), GraphFormatError, "weight", "real numbers"),
    (lambda: Graph.from_edges(np.array([0, 2 ** 63 + 5], np.uint64), [1, 2]), GraphFormatError, "src", "2^63"),
    (lambda: Graph.from_edges([0, 1], np.array([1.0, 1e19]), n=3), GraphFormatError, "dst", "2^63"),
    (lambda: Graph.from_scipy(sp.csr_matrix(np.array([[0, 1j], [1, 0]]))), GraphFormatError, "data", "real"),
])
def test_one_named_error(call, err, field, needle):
    with pytest.raises(err) as exc:
        call()
    assert exc.value.field == field and needle in str(exc.value)


def test_from_scipy_takes_a_dense_array_like():
    g = Graph.from_scipy([[0, 1], [1, 0]])
    assert g.n == 2 and g.nnz == 2 and g.indices.tolist() == [1, 0]


def test_a_numpy_integer_n_is_an_n():
    assert Graph.from_edges([0, 1], [1, 2], n=np.int64(5)).n == 5
