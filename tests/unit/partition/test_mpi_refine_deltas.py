"""The distributed refinement's single-move volume deltas against a brute-force
recount of each net before and after the move (no MPI needed)."""
from __future__ import annotations

import numpy as np

from gridparts import pair_changes

from partplan.partition.refinement.distributed import _contrib, _ranges


def _net_figures(pin_parts, owner, k):
    send, recv = np.zeros(k, np.int64), np.zeros(k, np.int64)
    others = set(int(x) for x in pin_parts) - {int(owner)}
    send[owner] += len(others)
    for r in others:
        recv[r] += 1
    return send, recv


def test_pair_changes_equal_a_recount_of_each_net():
    rng = np.random.default_rng(7)
    k, m = 5, 3000
    counts, a, b, o, o2, pin, truth_s, truth_r = [], [], [], [], [], [], [], []
    for _ in range(m):
        pins = rng.integers(0, k, rng.integers(1, 6))
        owner_move = rng.random() < 0.3
        is_pin = 1 if not owner_move else int(rng.random() < 0.5)
        if is_pin:
            ai = int(pins[rng.integers(pins.size)])          # the moved vertex is one of the pins
        else:
            ai = int(rng.integers(k))
        bi = int((ai + rng.integers(1, k)) % k)
        oi = ai if owner_move else int(rng.integers(k))        # the owner moves with it, or stays
        o2i = bi if owner_move else oi
        after = pins.copy()
        if is_pin:
            after[np.flatnonzero(after == ai)[0]] = bi
        s0, r0 = _net_figures(pins, oi, k)
        s1, r1 = _net_figures(after, o2i, k)
        truth_s.append(s1 - s0)
        truth_r.append(r1 - r0)
        counts.append(np.bincount(pins, minlength=k))
        a.append(ai), b.append(bi), o.append(oi), o2.append(o2i), pin.append(is_pin)
    counts = np.array(counts, np.int32)
    a, b, o, o2, pin = (np.array(x, np.int64) for x in (a, b, o, o2, pin))
    t = np.arange(m)
    dS, dR = pair_changes(counts, t, a, b, o, o2, pin)
    assert np.array_equal(dS, np.array(truth_s)) and np.array_equal(dR, np.array(truth_r))


def test_pair_changes_sum_per_proposal():
    """A proposal's row is the sum of its pairs' changes (a vertex is a pin of many nets): pairs
    assigned to proposals at random give, per proposal, the sum of the one-pair rows."""
    rng = np.random.default_rng(9)
    k, m, props = 6, 1500, 40
    counts = rng.integers(0, 4, (m, k))
    counts[np.arange(m), rng.integers(0, k, m)] += 1            # every net has a pin
    t = np.arange(m)
    a = np.array([rng.choice(np.flatnonzero(c)) for c in counts])   # the mover is a pin in a
    b = (a + rng.integers(1, k, m)) % k
    own = rng.random(m) < 0.3
    o = np.where(own, a, rng.integers(0, k, m))
    o2 = np.where(own, b, o)
    pin = np.where(own, rng.integers(0, 2, m), 1)
    pid = rng.integers(0, props, m)
    one_s, one_r = pair_changes(counts, t, a, b, o, o2, pin)
    sum_s, sum_r = pair_changes(counts, t, a, b, o, o2, pin, pid)
    want_s, want_r = np.zeros((props, k), np.int64), np.zeros((props, k), np.int64)
    np.add.at(want_s, pid, one_s)
    np.add.at(want_r, pid, one_r)
    assert np.array_equal(sum_s, want_s) and np.array_equal(sum_r, want_r)
    assert np.abs(one_s).sum() > 0 and np.abs(one_r).sum() > 0


def test_contributions_sum_to_a_brute_force_count():
    rng = np.random.default_rng(3)
    k = 6
    nets = [rng.integers(0, k, rng.integers(0, 7)) for _ in range(400)]
    owner = rng.integers(0, k, len(nets))
    counts = np.array([np.bincount(p, minlength=k) for p in nets], np.int32)
    send, recv, net_send = _contrib(counts, owner, k)
    ts, tr = np.zeros(k, np.int64), np.zeros(k, np.int64)
    for p, q in zip(nets, owner):
        s, r = _net_figures(p, q, k)
        ts += s
        tr += r
    assert np.array_equal(send, ts) and np.array_equal(recv, tr)
    assert net_send.sum() == ts.sum()


def test_ranges_concatenates_index_ranges():
    out = _ranges(np.array([5, 0, 9]), np.array([2, 0, 3]))
    assert out.tolist() == [5, 6, 9, 10, 11]


def test_net_counts_in_small_blocks_equal_a_brute_force_count(monkeypatch):
    from partplan.datasets.generators import rmat
    from partplan.partition.refinement import distributed as mod
    g = rmat(10, seed=5)
    k = 8
    ip, ix = g.indptr.astype(np.int64), g.indices.astype(np.int64)
    sl = mod.RowSlice(0, g.n, g.n, ip, ix, ip, ix)
    part = (np.arange(g.n) * 3 % k).astype(np.int32)
    truth = np.zeros((g.n, k), np.int64)
    np.add.at(truth, (np.repeat(np.arange(g.n), np.diff(ip)), part[ix]), 1)
    nets = np.arange(g.n)[::-1].copy()                 # any order of nets
    for cells in (1 << 24, 100, 1):                    # one block; blocks bounded by pins; one net per block
        monkeypatch.setattr(mod, "_BLOCK_CELLS", cells)
        assert np.array_equal(mod.net_counts(sl, part, nets, k), truth[nets])


def test_the_selection_cap_falls_with_the_kept_moves():
    """The volume rounds' selection: the cap on every part's load starts at the round's maximum
    and, with ``ratchet``, falls to the largest load after each kept move (the one-process
    passes' rule), so a later move may not take a part back up to the old maximum."""
    from partplan.partition.refinement.distributed_volume import _select_volume
    k = 3
    send, recv = np.array([10, 8, 5], np.int64), np.array([9, 8, 5], np.int64)
    dS = np.zeros((2, k), np.int64)
    dR = np.zeros((2, k), np.int64)
    dS[0] = [-2, -1, 0]        # move 0: part 0 to 8, part 1 to 7: the maximum falls to 9 (recv of part 0)
    dS[1] = [0, 0, 5]          # move 1: part 2 to 10, the old maximum
    A, B, Wu = np.array([0, 1]), np.array([1, 2]), np.array([1, 1])
    for ratchet, want in ((True, [0]), (False, [0, 1])):
        out = np.empty(2, np.int64)
        m = _select_volume(np.array([0, 1]), A, B, Wu, dS, dR, send.copy(), recv.copy(), np.zeros(k, np.int64),
                           100, 10, np.array([0, 1]), np.zeros(2, np.bool_), out, ratchet)
        assert out[:m].tolist() == want
