"""partplan.nn.global_mean / accuracy on one process (the world of one rank): the
oracle is torch's own mean and a count by hand; the multi-rank sums run in
tests/dist/test_pyg_examples.py."""
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F

import partplan.nn as pnn


def test_global_mean_is_the_mean_over_the_mask_and_never_nan():
    g = torch.Generator().manual_seed(0)
    logits, y = torch.randn(20, 3, generator=g, requires_grad=True), torch.randint(0, 3, (20,), generator=g)
    mask = torch.rand(20, generator=g) < 0.5
    loss = pnn.global_mean(F.cross_entropy(logits, y, reduction="none"), mask)
    ref = F.cross_entropy(logits[mask], y[mask])
    torch.testing.assert_close(loss, ref, rtol=1e-6, atol=0)
    loss.backward()
    grad = logits.grad.clone()
    logits.grad = None
    ref.backward()
    torch.testing.assert_close(grad, logits.grad)
    none = pnn.global_mean(F.cross_entropy(logits, y, reduction="none"), torch.zeros(20, dtype=torch.bool))
    assert float(none.detach()) == 0.0                       # a rank (here: the world) without training rows: 0, not NaN
    assert float(pnn.global_mean(torch.ones(4), ddp=True)) == 1.0   # world of one: ddp scales by 1


def test_accuracy_counts_by_hand():
    pred = torch.tensor([0, 1, 2, 1])
    y = torch.tensor([0, 1, 1, 1])
    assert pnn.accuracy(pred, y) == 0.75
    assert pnn.accuracy(torch.eye(3)[pred], y, torch.tensor([True, False, True, False])) == 0.5
    assert pnn.accuracy(pred, y, torch.zeros(4, dtype=torch.bool)) != pnn.accuracy(pred, y, torch.zeros(4, dtype=torch.bool))   # NaN


def test_shared_plan_on_one_process_writes_reuses_and_rebuilds(tmp_path):
    import json

    from partplan.errors import PartplanError
    ei = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 0]])
    path = tmp_path / "g.plan"
    assert pnn.shared_plan({"edge_index": ei, "num_nodes": 4}, path) == str(path)
    manifest = path / "manifest.json"
    assert json.loads(manifest.read_text())["graph"]["n"] == 4
    before = manifest.stat().st_mtime_ns
    pnn.shared_plan({"edge_index": ei, "num_nodes": 4}, path, reuse=True)          # kept
    assert manifest.stat().st_mtime_ns == before
    pnn.shared_plan({"edge_index": ei, "num_nodes": 5}, path, reuse=True)          # another graph: rebuilt
    assert json.loads(manifest.read_text())["graph"]["n"] == 5
    with pytest.raises(PartplanError):                                             # rank 0's own error
        pnn.shared_plan({"edge_index": torch.tensor([[0], [9]]), "num_nodes": 2}, tmp_path / "bad.plan")
    assert not (tmp_path / "bad.plan").exists()


def test_row_dropout_gives_every_split_of_the_rows_the_same_mask():
    """The mask is a function of (seed, global row id, column): rows split over 3 "ranks" in any
    order get exactly the one-process mask; the kept fraction is near 1 - p; gradients flow through
    the kept entries; not training is the identity."""
    from partplan.errors import OptionError
    n, f, p = 3000, 8, 0.3
    x = torch.randn(n, f, dtype=torch.float64, requires_grad=True)
    whole = pnn.row_dropout(x, torch.arange(n), p, seed=11)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(1))
    for ids in perm.tensor_split(3):
        torch.testing.assert_close(pnn.row_dropout(x[ids], ids, p, seed=11), whole[ids], rtol=0, atol=0)
    kept = (whole != 0).double().mean().item()
    assert abs(kept - (1 - p)) < 0.02
    assert torch.equal(whole[whole != 0], (x * (1.0 / (1 - p)))[whole != 0])
    whole.sum().backward()
    assert torch.equal(x.grad, (whole != 0).double() * (1.0 / (1 - p)))
    assert not torch.equal(pnn.row_dropout(x, torch.arange(n), p, seed=12), whole)     # another seed, another mask
    assert pnn.row_dropout(x, torch.arange(n), p, seed=11, training=False) is x
    one = pnn.row_dropout(torch.ones(n), torch.arange(n), p, seed=11)                   # 1-D: a column of its own
    assert one.shape == (n,)
    for args in ((x, torch.arange(n - 1), p, 1), (x, torch.arange(n), 1.0, 1), (x, -torch.arange(n), p, 1),
                 (x, torch.arange(n) * 1.5, p, 1), (x.detach().numpy(), torch.arange(n), p, 1)):
        with pytest.raises(OptionError):
            pnn.row_dropout(*args)
