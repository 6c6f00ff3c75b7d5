"""The generators refuse what would not fit the memory budget before any work, with the one
exception type the docs name (GeneratorParameterError: a DatasetError and a ValueError)."""
from __future__ import annotations

import time

import numpy as np
import pytest

from partplan import datasets as ds
from partplan.datasets.generators import GeneratorParameterError
from partplan.errors import DatasetError


@pytest.mark.parametrize("call", [lambda: ds.random_geometric(200_000, radius=5.0),
                                  lambda: ds.random_geometric(200_000, avg_degree=1e9),
                                  lambda: ds.rmat(36),
                                  lambda: ds.grid2d(10 ** 6, 10 ** 6)])
def test_oversized_requests_are_refused_before_any_work(call, monkeypatch):
    """A random geometric graph's pairs were not counted: a large radius ran into the pair search and a
    MemoryError (20 billion pairs); the size refusals were OptionErrors, which `except DatasetError`
    missed."""
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", str(1 << 30))
    t = time.perf_counter()
    with pytest.raises(GeneratorParameterError, match="memory budget") as e:
        call()
    assert isinstance(e.value, DatasetError) and time.perf_counter() - t < 2.0


def test_rmat_checks_self_loops_before_drawing():
    t = time.perf_counter()
    with pytest.raises(GeneratorParameterError, match="self_loops"):
        ds.rmat(22, self_loops="bogus")
    assert time.perf_counter() - t < 1.0


def test_a_chunked_rmat_counts_its_block_and_chunk(tmp_path, monkeypatch):
    """``rmat_chunked`` skipped the budget: scale 20 in one chunk took 2.27 GB under a 95 MiB budget.
    It now counts the permutation, one block of tuples and one chunk; more chunks fit."""
    from partplan.datasets.chunked_gen import rmat_chunked
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", str(200 << 20))
    with pytest.raises(GeneratorParameterError, match="memory budget"):
        rmat_chunked(20, path=tmp_path / "one", chunks=1)
    assert not (tmp_path / "one").exists()
    rmat_chunked(12, path=tmp_path / "ok", chunks=4)


def test_radius_is_a_number_not_a_bool():
    with pytest.raises(GeneratorParameterError, match="radius"):
        ds.random_geometric(10, radius=True)
    a = ds.random_geometric(300, radius=np.float32(0.1), seed=2)
    b = ds.random_geometric(300, radius=float(np.float32(0.1)), seed=2)
    assert a.nnz == b.nnz and ds.random_geometric(300, avg_degree=np.int64(3)).n == 300
