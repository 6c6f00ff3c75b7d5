"""The balance repair's exact packing: where the greedy passes stop short on a small graph, every
part ends within the ε-limit when the rows can be packed, and a partition above it is said to be
unpackable only when no packing exists (brute force over every subset)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import partplan
from partplan import Graph
from partplan.partition.refinement.rebalance import _pack_search, bins_needed, pack_rows


def _min_parts(w: list[int], limit: int) -> int:
    """The fewest parts of weight at most ``limit`` that hold every row (a DP over subsets)."""
    n = len(w)
    sums = [0] * (1 << n)
    for m in range(1, 1 << n):
        b = (m & -m).bit_length() - 1
        sums[m] = sums[m & (m - 1)] + w[b]
    best = [n + 1] * (1 << n)
    best[0] = 0
    for m in range(1, 1 << n):
        low, sub = m & -m, m
        while sub:
            if sub & low and sums[sub] <= limit:
                best[m] = min(best[m], best[m ^ sub] + 1)
            sub = (sub - 1) & m
    return best[(1 << n) - 1]


def test_the_search_and_the_bound_agree_with_brute_force():
    rng = np.random.default_rng(7)
    for _ in range(600):
        n, limit, k = int(rng.integers(1, 10)), int(rng.integers(2, 15)), int(rng.integers(1, 6))
        w = np.sort(rng.integers(1, limit + 1, n))[::-1].astype(np.int64)
        fewest = _min_parts(w.tolist(), limit)
        assert bins_needed(w, limit) <= fewest
        for own in (np.zeros(0, np.int64), rng.integers(0, k, n)):       # best fit; own part first
            out = np.zeros(n, np.int64)
            found = _pack_search(w, own, k, limit, 10 ** 7, out)
            assert found == (1 if fewest <= k else 0), (w, own, limit, k)
            if found == 1:
                assert out.min() >= 0 and out.max() < k
                assert np.bincount(out, weights=w, minlength=k).max() <= limit


# 15 rows, 47 nonzeros, k = 6, ε = 0.03: limit 8, room for one nonzero in all; METIS leaves 10
TIGHT = ([0, 5, 7, 11, 13, 17, 20, 24, 25, 28, 31, 35, 37, 40, 44, 47],
         [0, 2, 4, 8, 11, 1, 12, 0, 2, 4, 10, 3, 10, 0, 2, 4, 8, 5, 13, 14, 6, 9, 10, 12, 7, 0, 4, 8, 6, 9,
          13, 2, 3, 6, 10, 0, 11, 1, 6, 12, 5, 9, 13, 14, 5, 13, 14])


@pytest.mark.parametrize("options", [{"preset": "fast"}, {"backend": "metis", "objective": "max-both"}, {}])
def test_a_tight_packing_is_found(options):
    g = Graph(np.array(TIGHT[0]), np.array(TIGHT[1]))
    w = g.balance_weights
    limit = math.floor(1.03 * math.ceil(w.sum() / 6))
    assert _min_parts(sorted(w.tolist()), limit) <= 6           # a packing exists
    for seed in range(3):
        p = partplan.partition(g, 6, imbalance=0.03, seed=seed, **options)
        assert np.bincount(p.part, weights=w, minlength=6).max() <= limit, (options, seed)
        assert "over_epsilon" not in p.info


def test_pack_rows_keeps_rows_in_place_where_it_can():
    g = Graph(np.array(TIGHT[0]), np.array(TIGHT[1]))
    w = g.balance_weights
    start = np.array([0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 5, 0, 1])
    packed, why = pack_rows(g, start, 6, 8)
    assert why == "found" and np.bincount(packed, weights=w, minlength=6).max() <= 8
    assert (packed == start).sum() >= 6


def test_an_unpackable_partition_is_said_to_be_unpackable():
    """A 5-cycle in 2 parts at ε = 0: 5 rows of weight 2, limit 5 (two rows a part): no packing."""
    g = Graph.from_edges([0, 1, 2, 3, 4], [1, 2, 3, 4, 0], symmetrize=True)
    p = partplan.partition(g, 2, imbalance=0.0, preset="fast")
    assert p.info["over_epsilon"]["why"] == "no packing"
    assert pack_rows(g, p.part, 2, 5) == (None, "infeasible")


def test_more_rows_than_the_parts_can_hold_is_infeasible_at_once():
    """2,000 rows of weight 2, 900 parts of at most 5: two rows a part, 1,800 in all. The
    Martello-Toth bound (800 parts) does not see it; counting the rows a part holds does (the
    search spent 7 s and said "not found")."""
    from partplan.partition.refinement.rebalance import most_rows
    n = 2000
    g = Graph.from_edges(np.arange(n), (np.arange(n) + 1) % n, n=n, symmetrize=True)
    assert bins_needed(g.balance_weights, 5) <= 900 and most_rows(g.balance_weights, 5) == 2
    assert pack_rows(g, np.arange(n) % 900, 900, 5) == (None, "infeasible")
    assert partplan.partition(g, 900, preset="fast").info["over_epsilon"]["why"] == "no packing"


def test_pack_rows_refuses_ids_outside_its_parts():
    g = Graph(np.array(TIGHT[0]), np.array(TIGHT[1]))
    for bad in (np.full(15, -1), np.full(15, 6), np.zeros(14, np.int64)):
        with pytest.raises(ValueError, match="ids in"):
            pack_rows(g, bad, 6, 8)
