"""``partplan partition`` end to end (in-process through cli.main)."""
import json

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from partplan import Graph, analyze
from partplan.cli.main import main


@pytest.fixture
def mtx(tmp_path):
    pytest.importorskip("partplan.io", reason="needs partplan.io")
    from partplan import io as pio

    if not hasattr(pio, "read_graph"):
        pytest.skip("partplan.io.read_graph not available yet")
    rng = np.random.default_rng(0)
    n = 200
    src = rng.integers(0, n, 800)
    dst = (src + rng.integers(1, 15, 800)) % n
    A = sp.coo_matrix((np.ones(800), (src, dst)), shape=(n, n)).tocsr()
    A = ((A + A.T) > 0).astype(float)
    path = tmp_path / "g.mtx"
    scipy.io.mmwrite(str(path), A)
    return path


def test_help(capsys):
    with pytest.raises(SystemExit) as e:
        main(["partition", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--objective" in out and "--layout" in out


@pytest.mark.parametrize("args,match", [
    (["-k", "4", "--preset", "FOO"], "preset"),
    (["-k", "4", "--layout", "1.5d:3"], "divisible"),
    (["-k", "4", "--layout", "3d"], "unknown layout"),
    (["-k", "4", "--ownership-method", "lp"], "decoupled"),
])
def test_bad_options_fail_before_reading(capsys, args, match):
    assert main(["partition", "no-such-graph.mtx"] + args) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err and err.count("\n") == 1


def test_partition_to_npy_and_json(mtx, tmp_path, capsys):
    out = tmp_path / "g.npy"
    assert main(["partition", str(mtx), "-k", "4", "--preset", "DETERMINISTIC", "--objective", "total", "-o", str(out), "--json"]) == 0
    cap = capsys.readouterr()
    d = json.loads(cap.out)
    assert "partitioning with mtkahypar" in cap.err
    part = np.load(out)
    from partplan.io import read_graph

    g = read_graph(mtx)
    assert d["stats"]["total_volume"] == analyze(g, part, 4).total_volume
    assert d["info"]["backend"]["km1"] == d["stats"]["total_volume"]
    assert (tmp_path / "g.npy.json").is_file()


def test_partition_text_table_and_parquet(mtx, tmp_path, capsys):
    out = tmp_path / "g.parquet"
    assert main(["partition", str(mtx), "-k", "4", "--model", "graph", "-o", str(out), "-q"]) == 0
    cap = capsys.readouterr()
    assert "total_volume" in cap.out and cap.err == ""
    from partplan.partition import load_partition

    assert load_partition(out).backend == "metis"


def test_plan_output_or_clear_error(mtx, tmp_path, capsys):
    out = tmp_path / "g.plan"
    rc = main(["partition", str(mtx), "-k", "4", "--engine", "block", "-o", str(out), "-q"])
    try:
        import partplan.plan  # noqa: F401
        assert rc == 0 and out.exists()
    except ImportError:
        assert rc == 2 and "plans are not available" in capsys.readouterr().err
    rc = main(["partition", str(mtx), "-k", "4", "--engine", "block", "-o", str(tmp_path / "h.plan"),
               "--partition-only", "-q"])
    assert rc == 0 and (tmp_path / "h.npy").is_file()


def test_default_partition_is_the_same_on_one_core_and_all(mtx, tmp_path, capsys, monkeypatch):
    """``--threads 1`` and the default (all cores: 3 workers here, whatever the machine has)
    write the same partition file, and the JSON says how many workers ran."""
    from partplan.partition.pipeline import auto as pipeline

    monkeypatch.setattr(pipeline, "available_cores", lambda: 3)
    got = []
    for extra in (["--threads", "1"], []):
        out = tmp_path / f"g{len(got)}.npy"
        assert main(["partition", str(mtx), "-k", "4", "-o", str(out), "--json", *extra]) == 0
        d = json.loads(capsys.readouterr().out)
        got.append((np.load(out), d["info"]["auto"]["workers"]))
    assert np.array_equal(got[0][0], got[1][0])
    assert [w for _, w in got] == [1, 3]


def test_engine_prints_stay_off_json_stdout(tmp_path, capfd):
    """METIS prints diagnostics with C printf (a star whose hub outweighs a part: "***Cannot bisect a
    graph with 0 vertices!"), below sys.stdout; ``--json`` must still print one JSON record there."""
    from partplan.graph import Graph
    from partplan.io import write_npz

    rng = np.random.default_rng(0)
    g = Graph.from_edges(np.zeros(103, np.int64), rng.integers(0, 56, 103), n=56, symmetrize=True)
    write_npz(g, tmp_path / "star.npz")
    assert main(["partition", str(tmp_path / "star.npz"), "-k", "16", "--json",
                 "-o", str(tmp_path / "star.part")]) == 0
    cap = capfd.readouterr()
    d = json.loads(cap.out)                 # nothing but the record on stdout
    assert d["k"] == 16 and d["n"] == 56
    assert "***" in cap.err                 # METIS's lines went to stderr (else this test would not test it;
    #                                         under -q they go nowhere: test_quiet_silences_the_engines_own_...)


def _star(n_leaves: int, extra: int, seed: int = 0):
    """A hub (row 5) joined to every leaf, plus ``extra`` random edges among the leaves."""
    from partplan.graph import Graph

    rng = np.random.default_rng(seed)
    n = n_leaves + 1
    leaves = np.setdiff1d(np.arange(n), [5])
    src = np.concatenate([np.full(leaves.size, 5), rng.choice(leaves, extra)])
    dst = np.concatenate([leaves, rng.choice(leaves, extra)])
    keep = src != dst
    return Graph.from_edges(src[keep], dst[keep], n=n, symmetrize=True)


def test_unbalanceable_graph_warns_once_even_quiet_and_records_the_floor(tmp_path, capfd):
    """A row heavier than the ε-limit of one part: one warning line on stderr (also under -q), the
    floor in the JSON record, and the partition's compute imbalance never below that floor."""
    from partplan.io import read_partition, write_npz

    g = _star(300, 200)
    write_npz(g, tmp_path / "star.npz")
    k, eps = 8, 0.03
    nnz = np.diff(g.indptr)                                   # the oracle, from the CSR itself
    limit = int(np.floor((1 + eps) * -(-int(np.maximum(nnz, 1).sum()) // k)))
    assert nnz[5] > limit                                     # the instance cannot be balanced
    least = nnz[5] / (nnz.sum() / k) - 1
    for engine in ([], ["--engine", "metis", "--model", "graph"]):
        assert main(["partition", str(tmp_path / "star.npz"), "-k", str(k), "--json", "-q",
                     "-o", str(tmp_path / "star.part"), *engine]) == 0
        cap = capfd.readouterr()
        d = json.loads(cap.out)
        warn = [ln for ln in cap.err.splitlines() if ln.startswith("partplan: warning:")]
        assert len(warn) == 1 and "row 5 " in warn[0] and f"{limit} (ε = 0.03, {k} parts)" in warn[0]
        f = d["info"]["balance_floor"]
        assert (f["row"], f["row_weight"], f["limit"]) == (5, int(nnz[5]), limit)
        assert f["compute_imbalance_at_least"] == pytest.approx(least)
        loads = np.bincount(read_partition(tmp_path / "star.part", g.n), weights=nnz, minlength=k)
        assert loads.max() / loads.mean() - 1 >= least - 1e-12   # a floor no engine gets below


def _hub_with_empty_rows():
    """Row 0 has 29 nonzeros, row 1 one, rows 2..59 none: nnz 30, so the compute limit of one of
    2 parts is ⌊1.03 · 15⌋ = 15, while the balance limit (rows weigh at least 1) is ⌊1.03 · 44⌋ = 45."""
    return Graph.from_edges(np.r_[np.zeros(29, np.int64), 1], np.r_[np.arange(1, 30), 2], n=60,
                            symmetrize=False, name="hub")


def test_a_row_above_the_compute_limit_warns_where_the_balance_limit_holds(tmp_path, capfd):
    """Empty rows weigh 1 in the balance limit and 0 in compute: a hub within the first and above
    the second gets its own warning (even under -q) and a ``compute_floor`` record; the compute
    imbalance of the partition is never below it."""
    from partplan.io import read_partition, write_npz

    g = _hub_with_empty_rows()
    write_npz(g, tmp_path / "hub.npz")
    nnz = np.diff(g.indptr)                                    # the oracle, from the CSR itself
    compute_limit = int(np.floor(1.03 * -(-int(nnz.sum()) // 2)))
    assert int(nnz.max()) <= int(np.floor(1.03 * -(-int(np.maximum(nnz, 1).sum()) // 2)))  # balanceable
    assert (compute_limit, int(nnz[0])) == (15, 29)
    assert main(["partition", str(tmp_path / "hub.npz"), "-k", "2", "--json", "-q",
                 "-o", str(tmp_path / "hub.part")]) == 0
    cap = capfd.readouterr()
    warn = [ln for ln in cap.err.splitlines() if ln.startswith("partplan: warning:")]
    assert len(warn) == 1 and "row 0 has 29 nonzeros" in warn[0] and "compute limit of one part, 15" in warn[0]
    info = json.loads(cap.out)["info"]
    assert "balance_floor" not in info
    f = info["compute_floor"]
    assert (f["row"], f["row_nnz"], f["limit"]) == (0, 29, 15)
    assert f["compute_imbalance_at_least"] == pytest.approx(29 / 15 - 1)
    loads = np.bincount(read_partition(tmp_path / "hub.part", g.n), weights=nnz, minlength=2)
    assert loads.max() / loads.mean() - 1 >= f["compute_imbalance_at_least"] - 1e-12


def test_the_compute_floor_of_a_chunked_graph_is_the_loaded_graphs(tmp_path):
    """What ``--nprocs`` warns of (its processes balance row nnz): streamed from the chunks' indptr
    arrays, equal to the loaded graph's; none on a graph whose hub fits."""
    from partplan.io.chunked import write_chunked
    from partplan.partition.api import graph_compute_floor

    g = _hub_with_empty_rows()
    path = write_chunked(g, tmp_path / "hub.chunked", chunks=3)
    want = graph_compute_floor(g, 2, 0.03, vertex_weights=False)
    assert want is not None and (want["row"], want["row_nnz"], want["limit"]) == (0, 29, 15)
    assert graph_compute_floor(path, 2, 0.03) == want
    assert graph_compute_floor(g, 1, 0.03) is None
    fits = Graph.from_edges(np.r_[np.zeros(3, np.int64), 1], np.r_[np.arange(1, 4), 2], n=8, symmetrize=False)
    assert graph_compute_floor(fits, 2, 0.5) is None                   # 3 nonzeros ≤ ⌊1.5 · 2⌋


def test_balanceable_graph_has_no_floor_and_no_warning(mtx, tmp_path, capfd):
    assert main(["partition", str(mtx), "-k", "4", "--json", "-q", "-o", str(tmp_path / "g.part")]) == 0
    cap = capfd.readouterr()
    assert "balance_floor" not in json.loads(cap.out)["info"] and "warning" not in cap.err


@pytest.mark.parametrize("nnz,parts,eps,want", [
    ([10, 0, 0, 0, 0, 0, 0, 1, 1], 2, 0.0, (9, 10 / (12 / 2) - 1)),   # empty rows weigh 1 in the limit, 0 in compute
    ([7] + [1] * 12, 3, 0.0, None),                                   # ⌈19/3⌉ = 7: the row fits exactly
    ([8] + [1] * 12, 3, 0.0, (7, 8 / (20 / 3) - 1)),
    ([7, 7, 7, 7], 3, 0.03, None),                                    # no single row too heavy (packing is not judged)
])
def test_balance_floor_by_hand(nnz, parts, eps, want):
    from partplan.partition.objectives import balance_floor

    got = balance_floor(np.array(nnz), parts, eps)
    if want is None:
        assert got is None
    else:
        assert got["row"] == 0 and got["limit"] == want[0]
        assert got["compute_imbalance_at_least"] == pytest.approx(want[1])


def test_balance_floor_counts_row_blocks_not_ranks():
    """1.5D with c = 2: the rows are split into k / c blocks, and the ε-limit is that of a block."""
    from partplan.partition.api import partition

    g = _star(300, 200)
    nnz = np.diff(g.indptr)
    p = partition(g, 8, layout="1.5d:2")
    blocks = p.row_blocks
    assert blocks == 4
    limit = int(np.floor(1.03 * -(-int(np.maximum(nnz, 1).sum()) // blocks)))
    f = p.info["balance_floor"]
    assert f["limit"] == limit and f["row"] == 5
    loads = np.bincount(p.part, weights=nnz, minlength=blocks)
    assert loads.max() / loads.mean() - 1 >= f["compute_imbalance_at_least"] - 1e-12


def test_quiet_silences_the_engines_own_diagnostics(tmp_path, capfd):
    """METIS prints "***Cannot bisect a graph with 0 vertices!" (C printf) when k nears n: shown on
    stderr normally, and not at all under -q, where stderr holds only partplan's warning."""
    out = str(tmp_path / "kn.npy")
    args = ["partition", "power", "-k", "4000", "--engine", "metis", "--model", "graph", "-o", out]
    assert main(args) == 0
    assert "***" in capfd.readouterr().err                     # the engine's own lines, without -q
    assert main(["-q", *args]) == 0
    cap = capfd.readouterr()
    lines = cap.err.strip().splitlines()
    assert lines and all(ln.startswith("partplan: warning:") for ln in lines), cap.err
    assert "***" not in cap.out


@pytest.mark.parametrize("cmd", ["partition", "analyze"])
def test_an_output_onto_the_input_is_refused_and_the_input_kept(tmp_path, capsys, cmd):
    """-o naming the graph being read (by any name: here through a symlink) replaced the graph with
    the partition; refused before any work, the file unchanged. (An output of the input's own kind
    may replace it: test_convert_in_place_replaces_the_graph_atomically.)"""
    src = tmp_path / "g.txt"
    src.write_text("0 1\n1 2\n2 3\n3 0\n")
    (tmp_path / "link.txt").symlink_to(src)
    before = src.read_bytes()
    argv = {"partition": ["partition", str(src), "-k", "2", "-o", str(tmp_path / "link.txt")],
            "analyze": ["analyze", str(src), "--method", "metis", "-k", "2", "--save-partition",
                        str(tmp_path / "link.txt")]}[cmd]
    assert main(["-q", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is the input" in err[0], err
    assert src.read_bytes() == before


def test_an_empty_output_path_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["-q", "partition", "power", "-k", "4", "-o", ""]) == 2
    assert "argument -o/--output: an empty value" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_nprocs_refuses_a_graph_with_vertex_weights_before_any_process(tmp_path, capsys):
    """The distributed partitioner balances row nonzeros: a weighted METIS .graph came back 1.85 ×
    above the ε-limit of its weights without a word. One error, no process started."""
    lines = ["6 6 010"] + [f"{100 if i < 2 else 1} {(i - 1) % 6 + 1} {(i + 1) % 6 + 1}" for i in range(6)]
    (tmp_path / "cyc.graph").write_text("\n".join(lines) + "\n")
    assert main(["-q", "partition", str(tmp_path / "cyc.graph"), "-k", "2", "--nprocs", "2",
                 "-o", str(tmp_path / "p.npy")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "vertex weights" in err[0] and "--nprocs" in err[0], err
    assert not (tmp_path / "p.npy").exists()


def test_convert_in_place_replaces_the_graph_atomically(tmp_path, capsys):
    """A graph converted onto itself (here symmetrized) is read whole, then replaced atomically."""
    import scipy.sparse as sp
    from partplan.io import read_graph
    src = tmp_path / "g.txt"
    src.write_text("0 1\n1 2\n2 3\n")
    assert main(["-q", "convert", str(src), str(src), "--symmetrize"]) == 0
    g = read_graph(src)
    a = sp.csr_matrix((np.ones(3), ([0, 1, 2], [1, 2, 3])), shape=(4, 4))
    want = ((a + a.T) > 0).astype(np.int64)
    assert (abs(sp.csr_matrix((np.ones(g.nnz), g.indices, g.indptr), shape=(4, 4)) - want)).nnz == 0


@pytest.mark.parametrize("extra,needle", [
    (["--normalize", "gcn", "-o", "P/p.npy"], "--normalize gcn sets the values of a plan"),
    (["--normalize", "mean", "-o", "P/g.plan", "--partition-only"], "--partition-only writes the partition alone"),
    (["--nprocs", "2", "--normalize", "gcn", "-o", "P/p.npy"], "--normalize shapes a plan"),
    (["--nprocs", "2", "--shares", "-o", "P/p.npy"], "--shares shapes a plan"),
])
def test_plan_only_options_without_a_plan_are_refused(mtx, tmp_path, capsys, extra, needle):
    """--normalize and --shares shape a plan: with a partition output (or the distributed
    partitioner, which writes partitions) they were ignored; now one error, nothing written."""
    from tests.errlines import one_line, run_cli
    argv = ["partition", str(mtx), "-k", "2"] + [a.replace("P/", str(tmp_path) + "/") for a in extra]
    rc, _, err = run_cli(argv, capsys)
    one_line(rc, err, 2, needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.mtx"]


def test_an_edge_list_s_relabelled_ids_travel_with_the_partition(tmp_path, capsys):
    """Ids 5, 10, 20 of an edge list become rows 0..2: a table output carries each row's id in the
    file (column file_id, checked against the file's edges: the two endpoints of every edge are
    the ids of two rows), a text output warns that its lines follow the sorted ids, and partition
    readers ignore the column."""
    import pyarrow.csv as pcsv

    from partplan.io import read_graph
    from partplan.partition.api import load_partition

    src = tmp_path / "g.txt"
    src.write_text("10 20\n20 5\n5 10\n5 40\n")
    out = tmp_path / "p.csv"
    assert main(["-q", "partition", str(src), "-k", "2", "--preset", "fast", "-o", str(out)]) == 0
    t = pcsv.read_csv(out).to_pydict()
    assert t["file_id"] == [5, 10, 20, 40]
    g = read_graph(src)
    A = g.to_scipy().tocoo()
    ids = np.array(t["file_id"])
    assert {(int(ids[i]), int(ids[j])) for i, j in zip(A.row, A.col)} == {(10, 20), (20, 5), (5, 10), (5, 40)}
    assert load_partition(out, g).part.tolist() == t["part"]
    assert "relabelled" not in capsys.readouterr().err
    txt = tmp_path / "p.part"
    assert main(["-q", "partition", str(src), "-k", "2", "--preset", "fast", "-o", str(txt), "--json"]) == 0
    cap = capsys.readouterr()
    assert "warning: the vertex ids of" in cap.err and "file_id" in cap.err
    assert json.loads(cap.out)["ids_relabelled"] is True
    ident = tmp_path / "h.txt"
    ident.write_text("0 1\n1 2\n2 0\n")      # ids already 0..n-1: nothing to say
    assert main(["-q", "partition", str(ident), "-k", "2", "--preset", "fast", "-o", str(tmp_path / "h.part"),
                 "--json"]) == 0
    cap = capsys.readouterr()
    assert "relabelled" not in cap.err and json.loads(cap.out)["ids_relabelled"] is False


@pytest.mark.parametrize("extra,said", [
    (["--allow-overload", "--preset", "fast"], "allow_overload (--allow-overload) apply to the default pipeline"),
    (["--volume-tolerance", "0.1", "--engine", "random"], "volume_tolerance (--volume-tolerance) apply to bottleneck"),
])
def test_an_option_that_does_not_apply_is_named_by_its_flag_too(extra, said, tmp_path, capsys):
    from tests.errlines import run_cli
    rc, _, err = run_cli(["partition", "power", "-k", "4", "-o", str(tmp_path / "x.npy"), *extra], capsys)
    assert rc == 2 and said in err and len(err.strip().splitlines()) == 1
