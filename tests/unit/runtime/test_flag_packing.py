"""The flag exchange's byte layout (exchange_flags, numpy path): the packing of every peer at once
against a per-peer reference (the bitmap or uint32 positions of each peer's segment, then its
values), and the unpacking of those bytes back to flags and values."""
from __future__ import annotations

import numpy as np
import pytest

from partplan.runtime.traversal import _pack_flags, _unpack_flags


def _reference(f, send_off, c, dn, vals):
    parts = []
    for j in range(c.size):
        lo, hi = send_off[j], send_off[j + 1]
        if c[j] == 0:
            continue
        fj = f[lo:hi]
        parts.append(np.packbits(fj) if dn[j] else np.flatnonzero(fj).astype("<u4").view(np.uint8))
        if vals is not None:
            parts.append(np.ascontiguousarray(vals[lo:hi][fj]).view(np.uint8))
    return np.concatenate(parts) if parts else np.zeros(0, np.uint8)


@pytest.mark.parametrize("vdt", [None, np.int64, np.float64, np.int32])
@pytest.mark.parametrize("seed", range(6))
def test_pack_matches_per_peer_bytes_and_unpacks(vdt, seed):
    rng = np.random.default_rng(seed)
    peers = int(rng.integers(1, 12))
    seg = rng.integers(0, 40, peers)
    seg[rng.random(peers) < 0.2] = 0                          # peers this rank sends nothing to
    send_off = np.concatenate([[0], np.cumsum(seg)]).astype(np.int64)
    f = rng.random(int(seg.sum())) < rng.choice([0.05, 0.5, 0.95])
    csum = np.concatenate([[0], np.cumsum(f, dtype=np.int64)])
    c = csum[send_off[1:]] - csum[send_off[:-1]]
    dn = (c > 0) & (rng.random(peers) < 0.5)
    vals = None if vdt is None else rng.integers(-10 ** 6, 10 ** 6, f.size).astype(vdt)
    w = 0 if vdt is None else np.dtype(vdt).itemsize
    buf = _pack_flags(f, send_off, c, dn, vals, w)
    assert buf.tobytes() == _reference(f, send_off, c, dn, vals).tobytes()
    # the receiver of these bytes (its segments = this rank's send segments)
    got, gv = _unpack_flags(buf, send_off, c, dn, f.size, None if vdt is None else np.dtype(vdt), w)
    assert np.array_equal(got, f)
    if vdt is not None:
        assert np.array_equal(gv[f], vals[f]) and not gv[~f].any()
