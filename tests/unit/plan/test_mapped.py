"""store._Mapped.copy_checked: the copies, the whole file's xxh3_128 and the id maxima of one pass.

Oracles: xxhash over the file's bytes read with open(); numpy's max of the arrays read from the bytes."""
from __future__ import annotations

import numpy as np
import pytest
import xxhash

from partplan.plan.store import _Mapped


@pytest.mark.parametrize("step", [8, 4096, 1 << 20])
def test_copies_digest_and_maxima_match_independent_readings(tmp_path, monkeypatch, step):
    monkeypatch.setattr(_Mapped, "STEP", step)
    rng = np.random.default_rng(0)
    a = rng.integers(0, 1000, 5000).astype(np.int64)
    a[1234] = -7                                       # a negative id reads as >= 2^63
    b = rng.standard_normal(3001).astype(np.float32)
    c = rng.integers(0, 9, 77).astype(np.uint8)
    raw = b"HEAD" * 3 + a.tobytes() + b"gap!" + b.tobytes() + c.tobytes() + b"TAIL" * 5
    f = tmp_path / "x.bin"
    f.write_bytes(raw)
    m = _Mapped(f, "test file")
    buf = np.frombuffer(m.mm, dtype=np.uint8)
    va = buf[12:12 + a.nbytes].view(np.int64)
    vb = buf[16 + a.nbytes:16 + a.nbytes + b.nbytes].view(np.float32)
    vc = buf[16 + a.nbytes + b.nbytes:16 + a.nbytes + b.nbytes + c.size]
    views = [vc, va, vb]                               # not in file order
    copies, digest, maxima = m.copy_checked(views, digest=True, limits=[[], [(0, 1234), (1234, 5000)], []])
    assert digest == xxhash.xxh3_128_hexdigest(open(f, "rb").read())
    for got, want in zip(copies, (c, a, b)):
        assert got.flags.writeable and np.array_equal(got, want) and got.dtype == want.dtype
    assert maxima[1][0] == int(a[:1234].max()) and maxima[1][1] == int(a[1234:].view(np.uint64).max())
    assert maxima[1][1] >= 1 << 63
    # overlapping views (never in a file partplan wrote): the digest is still the whole file's
    _, digest2, _ = m.copy_checked([va, va[10:20]], digest=True)
    assert digest2 == digest
    # no digest asked: none computed
    assert m.copy_checked([va], digest=False)[1] is None
    del buf, va, vb, vc, views
