"""The one ``--method`` table (partplan.bench.methods) behind analyze, demo and bench."""
import numpy as np
import pytest

from partplan import datasets
from partplan.errors import PartitionError
from partplan.models import column_net
from partplan.partition import engines as backends
from partplan.partition.engines import baselines
from partplan.bench.methods import METHODS, check_method_options, get_method, run_method


@pytest.fixture(scope="module")
def enron():
    return datasets.load("email-Enron")


def test_every_baseline_backend_is_a_method():
    assert set(backends.backend_names("baseline")) <= set(METHODS)
    assert {"metis", "hypergraph"} <= set(METHODS)


def test_baselines_equal_the_direct_calls(enron):
    n = enron.n
    assert np.array_equal(run_method(enron, "block", 8)[0], baselines.block_partition(n, 8))
    assert np.array_equal(run_method(enron, "striped", 8)[0], baselines.striped_partition(n, 8))
    assert np.array_equal(run_method(enron, "random", 8, seed=3)[0], baselines.random_partition(n, 8, 3))
    assert np.array_equal(run_method(enron, "degree-rr", 8)[0], baselines.degree_round_robin(enron, 8))


def test_metis_and_hypergraph_are_the_engines(enron):
    part, _ = run_method(enron, "metis", 4, seed=1, imbalance=0.05)
    assert np.array_equal(part, backends.metis(enron, 4, seed=1, imbalance=0.05))
    g = datasets.rmat(12, seed=1)        # Mt-KaHyPar's own km1 on a smaller graph than email-Enron
    part, info = run_method(g, "hypergraph", 4, seed=1, preset="DETERMINISTIC")
    hg = column_net(g)
    # Mt-KaHyPar's own km1 objective equals an independent numpy recount of Σ (λ_j − 1)
    pins_part = part[hg.pins]
    net_of_pin = np.repeat(np.arange(hg.m), np.diff(hg.net_ptr))
    lam = np.bincount(np.unique(np.stack([net_of_pin, pins_part]), axis=1)[0], minlength=hg.m)
    w = np.ones(hg.m, dtype=np.int64) if hg.net_weights is None else hg.net_weights
    assert info["km1"] == int((w * (lam - 1).clip(0)).sum())


def test_options_are_derived_and_checked():
    assert get_method("block").takes == frozenset()
    assert get_method("random").takes == {"seed"}
    assert get_method("metis").takes == {"seed", "imbalance"}
    assert "preset" in get_method("hypergraph").takes
    with pytest.raises(PartitionError, match="--seed has no effect with --method block"):
        check_method_options("block", {"seed"})
    with pytest.raises(PartitionError, match="unknown method 'nope'"):
        get_method("nope")
