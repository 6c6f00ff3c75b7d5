"""The plan readers' check that a stored permutation is the block order of its partition
(``perm_by``, the oracle), and what the check holds: every rank of a loader runs it."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from partplan.plan.store import _is_block_order
from partplan.program.exchange import perm_by


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.uint16, np.uint64])
def test_block_order_check_agrees_with_perm_by(dtype):
    rng = np.random.default_rng(3)
    for n, k in ((1, 1), (7, 3), (500, 8), (2000, 64)):
        assign = rng.integers(0, k, n).astype(dtype)
        perm = perm_by(assign.astype(np.int64), int(assign.max()) + 1)
        assert _is_block_order(perm, assign)
        if n < 2:
            continue
        for _ in range(5):
            bad = perm.copy()
            i, j = rng.choice(n, 2, replace=False)
            bad[i], bad[j] = bad[j], bad[i]         # two rows swapped: still a permutation
            assert not _is_block_order(bad, assign)


def test_block_order_check_holds_no_n_sized_array():
    n, k = 2_000_000, 16
    assign = (np.arange(n, dtype=np.int64) * 7919) % k
    perm = perm_by(assign, k)
    tracemalloc.start()
    try:
        ok = _is_block_order(perm, assign)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert ok and peak < 1 << 20      # perm_by's own arrays: 16 MB and more


def test_block_order_check_takes_big_endian_arrays():
    assign = np.array([1, 0, 1, 2, 0, 2])
    perm = perm_by(assign, 3)
    assert _is_block_order(perm.astype(">i8"), assign.astype(">i4"))
    assert not _is_block_order(perm[::-1].astype(">i8"), assign.astype(">i4"))
