"""Independent oracle: the analyzer's total 1D volume equals Mt-KaHyPar's own
km1 (Σ_e (λ_e − 1), computed inside the C++ library) of the column-net
hypergraph for the same partition — both for partitions Mt-KaHyPar produces
and for foreign (random, METIS) partitions imported into it with
``create_partitioned_hypergraph``. DETERMINISTIC preset throughout."""
import numpy as np
import pytest

from partplan import Graph, analyze
from partplan.models import column_net
from partplan.partition import metis, random_partition
from partplan.partition.engines import mtk_context, mtk_hypergraph

mtkahypar = pytest.importorskip("mtkahypar")


def mtk_km1_of(graph: Graph, part: np.ndarray, k: int) -> int:
    """km1 as Mt-KaHyPar computes it for an imported partition."""
    mtk, ctx = mtk_context(k, 0.03, "DETERMINISTIC")
    h = mtk_hypergraph(mtk, ctx, column_net(graph))
    return int(h.create_partitioned_hypergraph(ctx, k, part.tolist()).km1())


def mtk_partition(graph: Graph, k: int, seed: int = 0, preset: str = "DETERMINISTIC"):
    mtk, ctx = mtk_context(k, 0.03, preset)
    mtkahypar.set_seed(seed)
    phg = mtk_hypergraph(mtk, ctx, column_net(graph)).partition(ctx)
    return np.asarray(phg.get_partition(), dtype=np.int64), int(phg.km1())


def random_graph(seed: int, n: int, m: int, directed: bool, loops: bool) -> Graph:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, m)
    dst = (src + rng.zipf(1.7, m)) % n  # local edges with a heavy tail of long ones
    return Graph.from_edges(src, dst, n=n, symmetrize=not directed, self_loops="keep" if loops else "remove")


CASES = [(0, 300, 1500, False, False, 4), (1, 500, 3000, True, False, 8), (2, 400, 2500, True, True, 16),
         (3, 1000, 6000, False, True, 32), (4, 200, 400, True, False, 3)]


@pytest.mark.parametrize("seed,n,m,directed,loops,k", CASES)
def test_total_volume_equals_mtkahypar_km1(seed, n, m, directed, loops, k):
    g = random_graph(seed, n, m, directed, loops)
    part, km1 = mtk_partition(g, k, seed)
    assert analyze(g, part, k).total_volume == km1
    # foreign partitions imported into Mt-KaHyPar
    rnd = random_partition(g.n, k, seed=seed)
    assert analyze(g, rnd, k).total_volume == mtk_km1_of(g, rnd, k)
    met = metis(g, k, seed=seed)
    assert analyze(g, met, k).total_volume == mtk_km1_of(g, met, k)


def test_backward_volume_is_km1_of_transpose():
    g = random_graph(7, 600, 4000, True, False)
    part = random_partition(g.n, 8, seed=7)
    s = analyze(g, part, 8, backward=True)
    assert s.backward.total_volume == mtk_km1_of(g.transpose(), part, 8)
    assert s.backward.total_volume != s.total_volume  # directed: the passes differ here


def _real(name: str) -> Graph:
    try:
        from partplan.datasets import load
        return load(name)
    except Exception as exc:  # noqa: BLE001 - dataset or its reader not available in this checkout
        pytest.skip(f"{name} not loadable here: {exc}")


# DETERMINISTIC takes ~25 s on email-Enron on a loaded 2-core box (DEFAULT ~7 s); the
# equality must hold for any partition, so Enron uses DEFAULT (its partition may vary
# between runs; the assertion does not depend on which one comes out).
@pytest.mark.slow
@pytest.mark.parametrize("name,preset", [("email-Enron", "DEFAULT"), ("delaunay_n15", "DETERMINISTIC")])
def test_km1_on_embedded_real_graphs(name, preset):
    g = _real(name)
    k = 16
    part, km1 = mtk_partition(g, k, preset=preset)
    s = analyze(g, part, k)
    assert s.total_volume == km1
    rnd = random_partition(g.n, k, seed=1)
    assert analyze(g, rnd, k).total_volume == mtk_km1_of(g, rnd, k)


def _local_graph_datasets() -> list[str]:
    try:
        from partplan import datasets
        return [d["name"] for d in datasets.list_datasets() if d["kind"] == "graph"]
    except Exception:  # noqa: BLE001 - registry not available in this checkout
        return []


# Issue 2's "done when": `partplan analyze` reproduces Mt-KaHyPar's km1 exactly on real
# datasets fetched with `partplan datasets fetch` (skipped for those not in the cache).
@pytest.mark.data
@pytest.mark.slow
@pytest.mark.parametrize("name", _local_graph_datasets() or ["(no registry)"])
def test_cli_analyze_reproduces_km1_on_fetched_datasets(name, tmp_path, capsys):
    import json

    from partplan.cli.main import main
    from partplan.io.partfile import write_partition

    try:
        from partplan import datasets
        if datasets.local_path(name) is None:
            pytest.skip(f"{name} not fetched (partplan datasets fetch {name})")
        if datasets.embedded_path(name) is not None:
            pytest.skip(f"{name} is embedded: covered by test_km1_on_embedded_real_graphs")
        if datasets.entry(name)["n"] > 100_000:
            pytest.skip(f"{name}: too large for the test suite's time budget")
        g = datasets.load_graph(name)
    except ImportError as exc:
        pytest.skip(f"datasets not available: {exc}")
    k = 16
    part, km1 = mtk_partition(g, k, preset="DEFAULT")
    pf = write_partition(part, tmp_path / f"{name}.part.{k}")
    assert main(["analyze", name, "--partition", str(pf), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["total_volume"] == km1 and d["k"] == k
    rnd = random_partition(g.n, k, seed=2)
    assert analyze(g, rnd, k).total_volume == mtk_km1_of(g, rnd, k)
