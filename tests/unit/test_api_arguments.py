"""The public functions' one validation layer: a wrong type, a bool or a fraction where a count
is meant, NaN / ±inf, a value out of range or a size past the memory budget is one partplan error
naming the argument — before any work, never numpy's, torch's or pathlib's own exception, and
never a result computed from the nonsense (a truncated k, a negative part id)."""
from __future__ import annotations

import re

import numpy as np
import pytest

import partplan
import partplan.models.stochastic
from partplan import Graph
from partplan.errors import PartplanError
from partplan.hypergraph import Hypergraph
from partplan.layouts import OneD, TwoD
from partplan.metrics import analyze, analyze_15d, analyze_2d
from partplan.partition.engines.baselines import (block_partition, degree_round_robin, random_partition,
                                                  striped_partition)

G = Graph.from_edges(np.arange(7), np.arange(1, 8), n=8, symmetrize=True)
PART = np.arange(8) % 4
H = Hypergraph(3, np.array([0, 2, 3]), np.array([0, 1, 2]))


def _circular() -> dict:
    d = {}
    d["self"] = d
    return d


CASES = {
    "analyze graph str": (lambda: analyze("abc", PART, 4), "graph must be a partplan Graph"),
    "analyze hypergraph": (lambda: analyze(H, PART, 4), "got Hypergraph"),
    "analyze k fraction": (lambda: analyze(G, PART, 4.9), "k must be an integer"),
    "analyze k inf": (lambda: analyze(G, PART, float("inf")), "k must be an integer"),
    "analyze k list": (lambda: analyze(G, PART, [4]), "k must be an integer"),
    "analyze alpha negative": (lambda: analyze(G, PART, 4, alpha=-5), "alpha"),
    "analyze beta nan": (lambda: analyze(G, PART, 4, beta=float("nan")), "beta"),
    "analyze dtype None": (lambda: analyze(G, PART, 4, dtype=None), "dtype"),
    "analyze_15d c bool": (lambda: analyze_15d(G, PART, True), "replication factor c"),
    "analyze_15d c float": (lambda: analyze_15d(G, PART, 2.0), "replication factor c"),
    "analyze_15d c huge": (lambda: analyze_15d(G, PART, 10 ** 18), "replication factor c"),
    "analyze_15d f": (lambda: analyze_15d(G, PART, 2, f=-7), "feature width"),
    "analyze_2d R str": (lambda: analyze_2d(G, PART, "abc", 2), "grid rows R"),
    "analyze_2d C fraction": (lambda: analyze_2d(G, PART, 2, 1.5), "grid columns C"),
    "build_plan graph None": (lambda: partplan.build_plan(None, PART, 4), "graph must be a partplan Graph"),
    "build_plan k fraction": (lambda: partplan.build_plan(G, PART, 4.9), "ranks \\(k\\) must be an integer"),
    "layout ranks bool": (lambda: OneD(True), "ranks"),
    "layout grid bool": (lambda: TwoD(True, 2), "ranks|R"),
    "block negative k": (lambda: block_partition(10, -1), "k must be an integer"),
    "block nan k": (lambda: block_partition(10, float("nan")), "k must be an integer"),
    "random fraction k": (lambda: random_partition(10, 2.5), "k must be an integer"),
    "striped zero k": (lambda: striped_partition(10, 0), "k must be an integer"),
    "striped negative n": (lambda: striped_partition(-3, 2), "n must be an integer"),
    "block huge n": (lambda: block_partition(10 ** 18, 2), "memory budget"),
    "degree-rr graph": (lambda: degree_round_robin("g", 2), "graph must be a partplan Graph"),
    "hypergraph n nan": (lambda: Hypergraph(float("nan"), np.array([0, 1]), np.array([0])), "n \\(vertices\\)"),
    "hypergraph n str": (lambda: Hypergraph("abc", np.array([0, 1]), np.array([0])), "n \\(vertices\\)"),
    "refine hypergraph": (lambda: partplan.refine(H, np.array([0, 1, 1]), 2), "got Hypergraph"),
    "write_graph hypergraph": (lambda: partplan.io.write_graph(H, "/tmp/x.mtx"), "got Hypergraph"),
    # found by an audit of the public API: numpy's / scipy's own errors, or an AttributeError, before
    "Graph 2-D indices": (lambda: Graph(np.array([0, 1, 2]), np.array([[1], [0]])), "indices must be a 1-D"),
    "from_edges ragged src": (lambda: Graph.from_edges([[1, 2], [3]], [1, 2]), "src must be a flat sequence"),
    "from_edges id 2^62 without n": (lambda: Graph.from_edges([2 ** 62], [1]), r"the largest id \+ 1"),
    "from_edges id 2^40 without n": (lambda: Graph.from_edges([2 ** 40], [1]), r"the largest id \+ 1"),
    "write_plan None": (lambda: partplan.write_plan(None, "/tmp/x.plan"), "plan must be a Plan"),
    "write_plan graph": (lambda: partplan.write_plan(G, "/tmp/x.plan"), "plan must be a Plan"),
    "write_plan path None": (lambda: partplan.write_plan(partplan.build_plan(G, PART, 4), None),
                             "path must be a file path"),
    "build_plan meta nan": (lambda: partplan.build_plan(G, PART, 4, meta={"x": float("nan")}), "meta: "),
    "build_plan meta object": (lambda: partplan.build_plan(G, PART, 4, meta={"x": object()}), "meta: "),
    "column_net weights array": (lambda: partplan.models.column_net(G, vertex_weights=np.ones(8)),
                                 "vertex_weights must be 'nnz' or 'unit'"),
    "stochastic weights bad": (lambda: partplan.models.stochastic.stochastic_hypergraph(G, 2, vertex_weights="x"),
                               "vertex_weights must be 'nnz' or 'unit'"),
    "build_plan meta circular": (lambda: partplan.build_plan(G, PART, 4, meta=_circular()), "holds itself"),
    "write_partition negative": (lambda: partplan.io.write_partition(np.array([0, -1]), "/tmp/neg.part"),
                                 "part id -1 at vertex 1 is negative"),
    "read_partition n None": (lambda: partplan.io.read_partition("/tmp/x.part", None), r"n \(the graph's"),
    "read_partition n str": (lambda: partplan.io.read_partition("/tmp/x.part", "3"), r"n \(the graph's"),
    "read_partition n -1": (lambda: partplan.io.read_partition("/tmp/x.part", -1), r"n \(the graph's"),
    # flags took any truthy object ("no" switched them on); a meta tensor, a list as meta, a string as
    # progress and a caller's volume matrix went through unchecked (found by an audit of the API)
    "from_edges symmetrize str": (lambda: Graph.from_edges([0, 1], [1, 0], symmetrize="no"), "symmetrize must be"),
    "Graph directed str": (lambda: Graph(np.array([0, 1, 2]), np.array([1, 0]), directed="no"), "directed must be"),
    "analyze backward str": (lambda: analyze(G, PART, 4, backward="no"), "backward must be"),
    "build_plan backward str": (lambda: partplan.build_plan(G, PART, 4, backward="no"), "backward must be"),
    "assign_owners return_info str": (lambda: partplan.assign_owners(G, PART, 4, return_info="no"),
                                      "return_info must be"),
    "grid2d periodic str": (lambda: partplan.datasets.grid2d(3, 3, periodic="no"), "periodic must be"),
    "from_edges meta tensor": (lambda: Graph.from_edges(__import__("torch").zeros(2, dtype=__import__("torch").long,
                                                                                  device="meta"), [1, 0]),
                               "meta device"),
    "analyze meta part": (lambda: analyze(G, __import__("torch").zeros(8, dtype=__import__("torch").long,
                                                                       device="meta"), 4), "meta device"),
    "build_plan meta list": (lambda: partplan.build_plan(G, PART, 4, meta=[1, 2]), "meta must be a dict"),
    "build_plan progress str": (lambda: partplan.build_plan(G, PART, 4, progress="yes"), "progress must be"),
    "analyze volume negative": (lambda: analyze(G, PART, 4, volume=-np.ones((4, 4), dtype=np.int64)),
                                "non-negative integers"),
    "analyze volume diagonal": (lambda: analyze(G, PART, 4, volume=np.eye(4, dtype=np.int64)), "zero diagonal"),
    "analyze volume float": (lambda: analyze(G, PART, 4, volume=np.zeros((4, 4))), "non-negative integers"),
    "owner_lower_bound time nan": (lambda: __import__("partplan.partition.refinement.ownership", fromlist=["x"])
                                   .owner_lower_bound(G, PART, 4, time_limit=float("nan")), "time_limit"),
    # a truthy string switched these on ("no" symmetrized, computed the backward pass, wrote weights,
    # downloaded); fractional / NaN hypergraph weights were truncated or numpy's error
    "normalize symmetrize str": (lambda: Graph.from_edges([0], [1]).normalize(symmetrize="no"),
                                 "symmetrize must be True or False"),
    "normalize dedupe 2": (lambda: G.normalize(dedupe=2), "dedupe must be True or False"),
    "owner_stats backward str": (lambda: partplan.owner_stats(G, PART, PART, 4, backward="no"),
                                 "backward must be True or False"),
    "write_hypergraph flag str": (lambda: partplan.write_hypergraph(H, "/nonexistent/h.hgr", net_weights="no"),
                                  "net_weights must be True or False"),
    "write_hypergraph graph": (lambda: partplan.write_hypergraph(G, "/nonexistent/h.hgr"),
                               "writes a partplan Hypergraph, got Graph"),
    "Hypergraph weight fraction": (lambda: Hypergraph(3, [0, 2, 3], [0, 1, 2], net_weights=[1.5, 1]),
                                   r"net_weights\[0\] = 1.5 is not an integer"),
    "Hypergraph weight nan": (lambda: Hypergraph(3, [0, 2, 3], [0, 1, 2], vertex_weights=[1, float("nan"), 1]),
                              r"vertex_weights\[1\] = nan is not an integer"),
    "datasets.load fetch str": (lambda: partplan.datasets.load("mdual", fetch="no"), "fetch must be True or False"),
    "datasets.load cache_dir int": (lambda: partplan.datasets.load("mdual", cache_dir=3), "cache_dir must be"),
    "save_partition ndarray": (lambda: partplan.save_partition(PART, "/nonexistent/p.npy"),
                               "save_partition writes a Partition"),
    "load_partition None": (lambda: partplan.load_partition(None), "path must be a file path"),
    "load_partition graph str": (lambda: partplan.load_partition("/nonexistent/p.npy", "g"),
                                 "graph must be a partplan Graph"),
    "refine progress int": (lambda: partplan.refine(G, PART, 4, progress=3), "progress must be"),
    "refine context str": (lambda: partplan.refine(G, PART, 4, context="x"), "context must be a RefineContext"),
    # pathlib's or the writer's own TypeError, or one at write_plan after the build
    "read_partition None": (lambda: partplan.read_partition(None, 8), "path must be a file path"),
    "read_hypergraph None": (lambda: partplan.read_hypergraph(None), "path must be a file path"),
    "write_hypergraph None": (lambda: partplan.write_hypergraph(H, None), "path must be a file path"),
    "validate_plan None": (lambda: partplan.validate_plan(None), "checks a plan directory"),
    "validate_plan Plan": (lambda: partplan.validate_plan(partplan.build_plan(G, PART, 4)), "write it first"),
    "write_graph bogus option": (lambda: partplan.write_graph(G, "/nonexistent/g.mtx", bogus=1),
                                 "option 'bogus' is not supported by the mtx writer"),
    "build_plan meta int key": (lambda: partplan.build_plan(G, PART, 4, meta={"a": {1: 2}}),
                                "meta: key 1 is not a string"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_argument_is_one_partplan_error_naming_it(name):
    call, match = CASES[name]
    with pytest.raises(PartplanError, match=match):
        call()


def test_a_numpy_integer_width_gives_figures_json_can_write(tmp_path):
    """f = np.int64(8) reached CommStats.f as a numpy integer: its JSON failed, and a plan built
    with it was refused by write_plan with an unrelated message. The figures equal f = 8's."""
    import json
    st = analyze(G, PART, 4, f=np.int64(8))
    assert type(st.f) is int and json.loads(json.dumps(st.to_dict())) == json.loads(
        json.dumps(analyze(G, PART, 4, f=8).to_dict()))
    path = partplan.write_plan(partplan.build_plan(G, PART, 4, f=np.int64(8)), tmp_path / "f.plan")
    assert partplan.load_plan(path).manifest["f"] == 8


def test_replay_refuses_features_of_another_row_count():
    from partplan.runtime.spmm import replay
    plan = partplan.build_plan(G, PART, 4)
    for bad in (np.ones((5, 2)), np.ones((8 + 7, 2)), None):
        with pytest.raises(PartplanError, match="H must be n × f"):
            replay(plan, bad)
    H8 = np.arange(16, dtype=np.float64).reshape(8, 2)
    assert np.allclose(replay(plan, H8), G.to_scipy() @ H8)


def test_expected_volume_needs_a_batch(tmp_path):
    from partplan.models.stochastic import expected_volume
    for bad in (0, -1, 10 ** 12, 2.5):
        with pytest.raises(PartplanError, match="batches"):
            expected_volume(G, PART, k=4, batches=bad)


def test_write_partition_onto_a_folder_or_no_path(tmp_path):
    from partplan.io.partfile import write_partition
    (tmp_path / "adir").mkdir()
    with pytest.raises(PartplanError, match="is a directory"):
        write_partition(PART, tmp_path / "adir")
    with pytest.raises(PartplanError, match="file path"):
        write_partition(PART, None)
    assert list((tmp_path / "adir").iterdir()) == []


def test_integer_arguments_may_be_any_integer_scalar():
    """numpy scalars, 0-d integer arrays and torch integer scalars are integers (operator.index);
    the figures are those of the plain int."""
    torch = pytest.importorskip("torch")
    want = analyze(G, PART, 4).total_volume
    for k in (np.int32(4), np.array(4), torch.tensor(4)):
        assert analyze(G, PART, k).total_volume == want
    assert analyze_15d(G, PART, np.int64(2)).p == 8


def test_layout_and_hypergraph_arrays_are_not_truncated():
    from partplan.layouts.onehalfd import OneHalfD
    for c in (2.5, True, "2"):
        with pytest.raises(PartplanError, match="replication factor c"):
            OneHalfD(8, c)
    with pytest.raises(PartplanError, match="net_ptr"):
        Hypergraph(3, np.array([0.0, 2.5]), np.array([0, 1]))
    with pytest.raises(PartplanError, match="pins"):
        Hypergraph(3, np.array([0, 2]), np.array([[0, 1]]))
    with pytest.raises(PartplanError, match="row blocks b"):
        analyze_15d(G, PART, 2, b=2.5)


def test_write_partition_creates_a_missing_folder(tmp_path):
    from partplan.io.partfile import write_partition
    out = write_partition(PART, tmp_path / "new" / "p.npy")
    assert np.array_equal(np.load(out), PART)


def test_save_partition_creates_a_missing_folder_as_the_other_writers(tmp_path):
    """save_partition refused a missing folder that write_partition and write_plan create."""
    p = partplan.partition(G, 2, model="graph")
    out = partplan.save_partition(p, tmp_path / "a" / "b" / "p.npy")
    assert np.array_equal(partplan.load_partition(out, G).part, p.part)
    plan = partplan.write_plan(partplan.build_plan(G, p.part, 2), tmp_path / "c" / "d" / "x.plan")
    assert plan.is_dir()


def test_analyze_backward_is_an_option_checked_for_every_partition():
    """A bad backward flag was a PartitionError, and a decoupled Partition took any truthy object."""
    from partplan.errors import OptionError
    decoupled = partplan.partition(G, 2, model="graph", ownership="decoupled")
    for part in (PART, decoupled):
        with pytest.raises(OptionError, match="backward must be True or False, got 'yes'"):
            analyze(G, part, backward="yes")


def test_build_plan_meta_takes_numpy_scalars():
    """numpy numbers are taken everywhere else (k, f, seed); in meta they were 'not JSON serializable'."""
    plan = partplan.build_plan(G, PART, 4, meta={"run": np.int64(3), "x": [np.float32(0.5), np.bool_(True)]})
    assert plan.manifest["run"] == 3 and type(plan.manifest["run"]) is int
    assert plan.manifest["x"] == [0.5, True] and type(plan.manifest["x"][1]) is bool


def test_float_ids_with_a_fraction_name_the_value():
    """Whole-number float ids are taken; one with a fraction blamed the dtype just accepted."""
    assert Graph.from_edges(np.array([0.0, 1.0]), np.array([1.0, 0.0])).nnz == 2
    with pytest.raises(PartplanError, match=r"src\[1\] = 0.5 is not a whole number"):
        Graph.from_edges(np.array([0.0, 0.5]), np.array([1.0, 0.0]))


@pytest.mark.parametrize("call,match", [
    (lambda: partplan.datasets.grid2d(10 ** 18, 4), "memory budget"),
    (lambda: partplan.datasets.grid3d(10 ** 18, 2, 2), "memory budget"),
    (lambda: partplan.datasets.random_geometric(10 ** 18), "memory budget"),
    (lambda: partplan.datasets.web_crawl(10 ** 18), "memory budget"),
    (lambda: partplan.datasets.rmat_edges(10, edgefactor=10 ** 18), "memory budget"),
    (lambda: partplan.datasets.rgg_radius(0, 5.0), "n must be >= 1"),
    (lambda: partplan.datasets.rgg_radius(100, -1.0), "avg_degree"),
])
def test_generators_refuse_sizes_before_allocating(call, match):
    with pytest.raises(PartplanError, match=match):
        call()


def test_nn_topology_and_plan_arguments(tmp_path):
    """The second layer of the API: an integer 0/1 mask indexed rows (global_mean gave 0.667 for a
    mean of 2.5), fractions were truncated (tree([2.7, 2]) had 4 ranks, load_plan(rank=1.5) gave rank
    1, DistGCN(1.5, ...) a 1 × 4 weight), a float part vector was cut to integers."""
    torch = pytest.importorskip("torch")
    import partplan.topology as topology
    from partplan.nn import DistGCN, accuracy, global_mean
    from partplan.partition.refinement.ownership import assign_owners
    from partplan.topology.mapping import map_parts

    v = torch.arange(6.0)
    assert float(global_mean(v, mask=torch.tensor([1, 0, 1, 1, 0, 1]).bool())) == 2.5
    plan = partplan.write_plan(partplan.build_plan(G, np.arange(8) % 2, 2), tmp_path / "a.plan")
    bad = [
        (lambda: global_mean(v, mask=torch.tensor([1, 0, 1, 1, 0, 1])), "mask must be a bool tensor"),
        (lambda: global_mean(v, mask=True), "mask must be a bool tensor"),
        (lambda: accuracy(torch.tensor([1, 2, 0]), 2.0), "y must be a tensor"),
        (lambda: topology.tree([2.7, 2]), "tree fanout"),
        (lambda: topology.tree(4), "tree fanouts"),
        (lambda: topology.parse_preset(None), "preset is a string"),
        (lambda: partplan.load_plan(plan, rank=1.5), "rank must be an integer"),
        (lambda: partplan.load_plan(plan, rank=True), "rank must be an integer"),
        (lambda: partplan.load_plan(None), "path must be a file path"),
        (lambda: partplan.load_plan(plan, graph=True), "graph must be a partplan Graph"),
        (lambda: DistGCN(1.5, 4, 2), "in_dim"),
        (lambda: DistGCN(8, 4, 2, layers=-1), "layers"),
        (lambda: DistGCN(8, 4, 2, dropout=1.5), "dropout"),
        (lambda: map_parts(G, np.arange(8) % 4 + 0.7, topology.load_topology("tree:2x2")), "integer part ids"),
        (lambda: map_parts(G, np.arange(8) % 4, None), "topo must be a partplan Topology"),
        (lambda: assign_owners(G, np.arange(8) % 2, 2, time_limit=float("nan")), "time_limit"),
    ]
    for call, match in bad:
        with pytest.raises(PartplanError, match=match):
            call()


def test_flags_links_levels_and_decoupled_backward(tmp_path):
    """Boolean flags take True / False (read_graph(symmetrize="no") had symmetrized); Link and Level
    check their numbers; a decoupled partition of a directed graph reports the plan's backward pass
    (conformal, A^T: brute force over the edges)."""
    import partplan.topology as topology
    from partplan.io import read_graph
    from partplan.topology.machine import Level, Link
    (tmp_path / "e.txt").write_text("0 1\n1 2\n2 0\n")
    for bad in ("no", None, [0], 1.5):
        with pytest.raises(PartplanError, match="symmetrize must be True or False"):
            read_graph(tmp_path / "e.txt", symmetrize=bad)
    for call, match in ((lambda: Link(float("nan"), 1e-10, 1.0), "link alpha"), (lambda: Level("a", -5), "size"),
                        (lambda: Level(None, 2), "name"), (lambda: topology.tree([2, 2], links=[None, None]), "links")):
        with pytest.raises(PartplanError, match=match):
            call()
    rng = np.random.default_rng(4)
    src, dst = rng.integers(0, 60, 300), rng.integers(0, 60, 300)
    g = Graph.from_edges(src, dst, n=60)
    p = partplan.partition(g, 4, ownership="decoupled")
    back: dict[int, set] = {}
    for i, j in {(int(a), int(b)) for a, b in zip(src, dst)}:
        back.setdefault(i, set()).add(int(p.part[j]))
    want = sum(len(r | {int(p.part[c])}) - 1 for c, r in back.items())
    assert p.stats.backward is not None and p.stats.backward.total_volume == want


@pytest.mark.parametrize("graph, needle", [
    ("scipy", "got scipy.csr_matrix (make it one with partplan.Graph.from_scipy)"),
    (12345, "got int"),
    ("/nonexistent/x.mtx", "which is neither"),
])
def test_partition_with_nprocs_names_a_graph_it_cannot_take(graph, needle):
    """partition(..., nprocs=N) of something that is no Graph, chunked folder or file: one
    PartitionError naming what it got, before any process starts (a scipy matrix raised TypeError)."""
    import scipy.sparse as sp

    from partplan import partition
    from partplan.errors import PartitionError
    with pytest.raises(PartitionError, match=re.escape(needle)):
        partition(sp.eye(5, format="csr") if graph == "scipy" else graph, 2, nprocs=2)


def test_unknown_option_names_and_choices_are_value_errors(tmp_path):
    """A typo such as imbalence= raised BackendUnavailableError, a NotImplementedError that
    `except ValueError` misses; it is an UnknownOptionError: both."""
    from partplan.errors import BackendUnavailableError
    for kw in (dict(imbalence=0.1), dict(model="hyper"), dict(ownership="yes")):
        with pytest.raises(ValueError) as e:
            partplan.partition(G, 4, **kw)
        assert isinstance(e.value, BackendUnavailableError)


def test_run_spmm_validate_and_halo_arguments(tmp_path):
    """run_spmm's dtype, features, seed and timeout, validate_plan's f and seed, LocalHalo's device and
    plan_from_pyg's flags: numpy's, pathlib's or torch's own error (or none: f=0 and seed=1.5
    validated as ok) before; one partplan error naming the argument now. Any integer is a seed."""
    from partplan.runtime.spmm import run_spmm
    path = partplan.write_plan(partplan.build_plan(G, PART, 4), tmp_path / "p.plan")
    for kw, match in ((dict(dtype="float99"), "dtype"), (dict(features=np.zeros((3, 3))), "features must be"),
                      (dict(seed=1.5), "seed must be"), (dict(timeout=0), "timeout")):
        with pytest.raises(PartplanError, match=match):
            run_spmm(path, backend="local", **kw)
    assert run_spmm(path, backend="local", seed=-(2 ** 70), repeat=1)["bytes_match"]
    for kw, match in ((dict(f=0), "f \\(feature columns"), (dict(seed=1.5), "seed must be")):
        with pytest.raises(PartplanError, match=match):
            partplan.validate_plan(path, G, **kw)
    torch = pytest.importorskip("torch")
    from partplan.nn import LocalHalo
    with pytest.raises(PartplanError, match="nonsense"):
        LocalHalo(path, torch.tensor([[0, 1], [1, 0]]), device="nonsense")
    from partplan.interop import plan_from_pyg
    for kw, match in ((dict(shares="no"), "shares must be"), (dict(progress="no"), "progress must be")):
        with pytest.raises(PartplanError, match=match):
            plan_from_pyg({"edge_index": torch.tensor([[0, 1], [1, 0]]), "num_nodes": 2}, 2, **kw)


def test_graph_labels_ids_and_reader_blocks(tmp_path):
    """A non-string name failed only when the graph was written; two rows with one id were taken
    (an id maps a row back to one vertex); a float id of 1e19 became a negative id with numpy's
    RuntimeWarning; block_bytes=0 read nothing; a list edge_attr under weight="auto" was said to
    have shape (); check_int above its upper bound named only the lower one."""
    import warnings

    from partplan._args import check_int
    from partplan.errors import GraphFormatError, OptionError
    from partplan.interop import from_pyg
    ip, ix = np.array([0, 1, 2]), np.array([1, 0])
    with pytest.raises(OptionError, match="name must be a string"):
        Graph(ip, ix, name=5)
    with pytest.raises(OptionError, match="name must be a string"):
        Graph.from_edges([0], [1], name=None)
    with pytest.raises(GraphFormatError, match=re.escape("ids[0] and ids[2] are both 7")):
        Graph(np.array([0, 0, 0, 0]), np.array([], np.int64), ids=[7, 1, 7])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for big in (1e19, -1e19):
            with pytest.raises(GraphFormatError, match="ids\\[1\\]"):
                Graph(ip, ix, ids=np.array([0.0, big]))
    assert Graph(ip, ix, ids=np.array([5.0, -3.0])).ids.tolist() == [5, -3]
    hgr = tmp_path / "h.hgr"
    hgr.write_text("1 2\n1 2\n")
    for bad in (0, -1, 1.5, "4"):
        with pytest.raises(OptionError, match="block_bytes must be an integer"):
            partplan.read_hypergraph(hgr, block_bytes=bad)
    assert partplan.read_hypergraph(hgr, block_bytes=1).pins.tolist() == [0, 1]
    edge_index = np.array([[0, 1], [1, 0]])
    g = from_pyg({"edge_index": edge_index, "edge_attr": [2.0, 3.0]}, weight="auto")
    assert g.to_scipy().toarray().tolist() == [[0.0, 3.0], [2.0, 0.0]]
    with pytest.raises(GraphFormatError, match=re.escape("shape (2, 2)")):
        from_pyg({"edge_index": edge_index, "edge_attr": [[1.0, 2.0], [3.0, 4.0]]}, weight="auto")
    with pytest.raises(OptionError, match=re.escape(f"in [0, {2 ** 62}]")):
        check_int("k", 2 ** 63)
