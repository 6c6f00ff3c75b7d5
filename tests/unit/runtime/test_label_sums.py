"""label_sums (label propagation's per-row label weights): groups sorted by row then label, each
sum adding its terms in input order — against a dict over the pairs, and on numpy bitwise against
the sums in lexsort's order, on numpy and torch, with labels that fit one combined sort key and labels that do not."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from partplan.runtime.kernels.community import label_sums


def _oracle(rows, labels, weights):
    acc: dict = {}
    for r, lab, w in zip(rows.tolist(), labels.tolist(), weights.tolist()):
        acc[(r, lab)] = acc.get((r, lab), 0.0) + w
    keys = sorted(acc)
    return [k[0] for k in keys], [k[1] for k in keys], [acc[k] for k in keys]


@pytest.mark.parametrize("label_hi", [7, 1 << 40, (1 << 62) - 1])
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_label_sums_against_a_dict(label_hi, backend):
    rng = np.random.default_rng(label_hi % 1000)
    m = 3000
    rows = rng.integers(0, 200, m)
    rows[:1000] = np.sort(rows[:1000])        # sorted and unsorted stretches
    labels = rng.integers(0, label_hi, m) if label_hi < 100 else rng.choice(
        np.array([0, 5, label_hi // 3, label_hi]), m)
    weights = rng.random(m) * 10 - 2
    want = _oracle(rows, labels, weights)
    if backend == "torch":
        torch = pytest.importorskip("torch")
        r, lab, s = label_sums(SimpleNamespace(name="torch"), *(torch.from_numpy(a) for a in (rows, labels, weights)))
        r, lab, s = r.numpy(), lab.numpy(), s.numpy()
    else:
        r, lab, s = label_sums(SimpleNamespace(name="numpy"), rows, labels, weights)
    assert r.tolist() == want[0] and lab.tolist() == want[1]
    np.testing.assert_allclose(s, want[2], rtol=1e-12, atol=1e-12)
    if backend == "numpy":        # each group's terms in input order (lexsort's, a stable sort): bitwise
        o = np.lexsort((labels, rows))
        st = np.flatnonzero(np.r_[True, (rows[o][1:] != rows[o][:-1]) | (labels[o][1:] != labels[o][:-1])])
        assert s.tolist() == np.add.reduceat(weights[o], st).tolist()
