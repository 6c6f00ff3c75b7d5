"""The tool commands (datasets, convert, export, demo) on what a user types wrong (found by a CLI
fuzzer): one ``partplan: error:`` line and exit 2 before any work or allocation, no file written,
the files already there untouched."""
from __future__ import annotations

import numpy as np
import pytest

from partplan import Graph
from partplan.io import write_graph
from tests.errlines import one_line, run_cli


def test_gcn_data_refuses_a_negative_seed_and_features_past_the_budget(tmp_path, capsys):
    out = tmp_path / "d.npz"
    rc, _, err = run_cli(["datasets", "gcn-data", "polblogs", "-o", out, "--seed", "-5"], capsys)
    one_line(rc, err, 2, "--seed")
    rc, _, err = run_cli(["datasets", "gcn-data", "polblogs", "-o", out, "--random-features", "999999999999"], capsys)
    one_line(rc, err, 2, "random features", "memory budget")
    assert not out.exists()


def test_rgg_size_check_counts_the_radius(tmp_path, capsys):
    out = tmp_path / "g.mtx"
    rc, _, err = run_cli(["datasets", "generate", "rgg", "-n", "200000", "--radius", "1.5", "-o", out], capsys)
    one_line(rc, err, 2, "--radius", "memory budget")
    assert not out.exists()
    rc, _, err = run_cli(["-q", "datasets", "generate", "rgg", "-n", "300", "--radius", "0.1", "-o", out], capsys)
    assert rc == 0, err
    # a --dim past the generator's bound, a radius whose power overflows a float: errors, not tracebacks
    for n, extra, needle in (("10", ["--radius", "1.5", "--dim", "100000"], "dim must be in"),
                             ("1000000000", ["--radius", "1e300", "--dim", "16"], "memory budget")):
        rc, _, err = run_cli(["datasets", "generate", "rgg", "-n", n, "-o", tmp_path / "x.mtx"] + extra, capsys)
        one_line(rc, err, 2, needle)


def test_dataset_cache_that_is_a_file_or_empty(tmp_path, capsys, monkeypatch):
    f = tmp_path / "afile"
    f.write_text("x")
    rc, _, err = run_cli(["datasets", "fetch", "power", "--cache", f], capsys)
    one_line(rc, err, 2, "afile", "not a directory")
    rc, _, err = run_cli(["datasets", "fetch", "power", "--cache", ""], capsys)
    one_line(rc, err, 2, "empty")
    monkeypatch.setenv("PARTPLAN_DATA", str(f))
    rc, _, err = run_cli(["datasets", "fetch", "power"], capsys)
    one_line(rc, err, 2, "PARTPLAN_DATA", "not a directory")
    assert f.read_text() == "x"


def test_export_to_metis_writes_a_partition_file_only(tmp_path, capsys):
    g = tmp_path / "g.mtx"
    write_graph(Graph.from_edges(np.arange(19), np.arange(1, 20), symmetrize=True), g)
    before = g.read_bytes()
    assert run_cli(["-q", "partition", g, "-k", "4", "-o", tmp_path / "g.part.4"], capsys)[0] == 0
    assert run_cli(["-q", "plan", g, "--partition", tmp_path / "g.part.4", "-o", tmp_path / "g.plan"], capsys)[0] == 0
    for bad in (g, tmp_path / "out"):
        rc, _, err = run_cli(["export", tmp_path / "g.plan", bad, "--to", "metis"], capsys)
        one_line(rc, err, 2, "partition file suffix")
    assert g.read_bytes() == before and not (tmp_path / "out").exists()
    rc, _, err = run_cli(["-q", "export", tmp_path / "g.plan", tmp_path / "e.part", "--to", "metis"], capsys)
    assert rc == 0, err
    assert np.loadtxt(tmp_path / "e.part", dtype=np.int64).size == 20
    (tmp_path / "folder").mkdir()
    rc, _, err = run_cli(["export", tmp_path / "g.plan", tmp_path / "folder", "--to", "metis"], capsys)
    one_line(rc, err, 2, "is a directory")
    rc, _, err = run_cli(["export", tmp_path / "g.plan", tmp_path / "m.plan", "--to", "metis"], capsys)
    one_line(rc, err, 2, "plan directory", "NAME.part.K")
    assert not (tmp_path / "m.plan").exists() and not any((tmp_path / "folder").iterdir())


@pytest.mark.parametrize("argv, needle", [
    (["grid2d", "--nx", "3", "--ny", "3", "--scale", "5"], "--scale does not apply to generator grid2d"),
    (["rmat", "--scale", "5", "--nx", "3", "--periodic"], "--nx, --periodic do not apply to generator rmat"),
    (["grid3d", "--nx", "2", "--ny", "2", "--nz", "2", "--seed", "3"], "--seed does not apply"),
    (["rmat", "--scale", "6", "--chunks", "2"], "names a mtx file"),
])
def test_generate_refuses_options_it_would_ignore_and_a_chunk_folder_named_as_a_file(tmp_path, capsys, argv,
                                                                                        needle):
    rc, _, err = run_cli(["datasets", "generate", *argv, "-o", tmp_path / "g.mtx"], capsys)
    one_line(rc, err, 2, needle)
    assert list(tmp_path.iterdir()) == []


def test_more_chunks_than_rows_is_refused(tmp_path, capsys):
    g = tmp_path / "g.mtx"
    write_graph(Graph.from_edges(np.arange(19), np.arange(1, 20), symmetrize=True), g)
    rc, _, err = run_cli(["convert", g, tmp_path / "c", "--chunks", "100"], capsys)
    one_line(rc, err, 2, "chunks = 100", "20 rows")
    rc, _, err = run_cli(["datasets", "generate", "rmat", "--scale", "2", "--chunks", "20", "-o", tmp_path / "r"],
                         capsys)
    one_line(rc, err, 2, "chunks")
    assert not (tmp_path / "c").exists() and not (tmp_path / "r").exists()
    rc, _, err = run_cli(["-q", "convert", g, tmp_path / "c", "--chunks", "20"], capsys)
    assert rc == 0, err


@pytest.mark.parametrize("args, needle", [(["--exec-ranks", "-1"], "--exec-ranks"),
                                          (["--train-ranks", "-2"], "--train-ranks"),
                                          (["--preset", "NOPE"], "NOPE")])
def test_demo_refuses_before_it_partitions(tmp_path, capsys, args, needle):
    out = tmp_path / "demo"
    rc, _, err = run_cli(["demo", "--out", out] + args, capsys)
    one_line(rc, err, 2, needle)
    assert "[demo]" not in err and not out.exists()


def test_an_empty_input_path_is_not_the_current_directory(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for argv, needle in ((["convert", "", "x.npz"], "input path"), (["inspect", ""], "plan path is empty"),
                         (["plan", "", "--partition", "p.npy", "-o", "x.plan"], "graph path is empty")):
        rc, _, err = run_cli(argv, capsys)
        one_line(rc, err, 2, needle)
    write_graph(Graph.from_edges([0, 1], [1, 2]), tmp_path / "g.mtx")
    rc, _, err = run_cli(["inspect", tmp_path / "g.mtx"], capsys)
    one_line(rc, err, 2, "not a plan directory (a file)")


def test_chunked_rmat_prints_its_result_as_the_other_generators(tmp_path, capsys):
    import json

    rc, out, err = run_cli(["-q", "datasets", "generate", "rmat", "--scale", "5", "--chunks", "2", "-o",
                            tmp_path / "c", "--json"], capsys)
    assert rc == 0, err
    res = json.loads(out)
    from partplan.io import read_graph
    g = read_graph(tmp_path / "c")
    assert (res["n"], res["nnz"], res["edges"], res["fingerprint"]) == (g.n, g.nnz, g.nnz // 2, g.fingerprint)
    rc, out, err = run_cli(["-q", "datasets", "generate", "rmat", "--scale", "5", "--chunks", "2", "-o",
                            tmp_path / "d"], capsys)
    assert rc == 0 and "n=32" in out and "2 chunks" in out, (out, err)
    # a missing folder is refused as for a one-file output (it was created, with its parents)
    rc, out, err = run_cli(["datasets", "generate", "rmat", "--scale", "5", "--chunks", "2", "-o",
                            tmp_path / "no" / "such" / "r"], capsys)
    assert rc == 2 and "does not exist" in err and not (tmp_path / "no").exists()


def test_gcn_data_says_when_the_validation_set_is_short(tmp_path, capsys):
    rc, out, err = run_cli(["datasets", "gcn-data", "polblogs", "--train-per-class", "700", "--val", "100",
                            "-o", tmp_path / "d.npz"], capsys)
    assert rc == 0 and "warning: --val 100: only 0" in err, err


def test_gcn_data_says_when_a_class_is_short_and_no_test_vertex_is_left(tmp_path, capsys):
    """``--train-per-class`` above a class's size gave a smaller training set than asked and an
    empty test set at exit 0, with a warning about --val alone; each is said now (counted here
    from the written masks)."""
    rc, out, err = run_cli(["datasets", "gcn-data", "polblogs", "--train-per-class", "1000",
                            "-o", tmp_path / "d.npz"], capsys)
    assert rc == 0, err
    with np.load(tmp_path / "d.npz") as z:
        y, tr, te = z["y"], z["train_mask"], z["test_mask"]
    assert all((tr & (y == c)).sum() < 1000 for c in np.unique(y[tr])) and te.sum() == 0
    assert "--train-per-class 1000: classes 0, 1 have fewer labeled vertices" in err
    assert "no test vertices are left" in err
    rc, out, err = run_cli(["datasets", "gcn-data", "polblogs", "-o", tmp_path / "e.npz"], capsys)
    assert rc == 0 and "warning" not in err, err


def test_convert_to_hgr_says_it_wrote_a_model(tmp_path, capsys):
    """`convert g.mtx g.hgr` writes the column-net model, which reads back as a graph only when it
    has n nets: the output says how many nets it holds and what reads it (nothing said it before,
    and `convert g.hgr back.mtx` then failed)."""
    import json

    from tests.errlines import run_cli
    g = tmp_path / "iso.mtx"
    g.write_text("%%MatrixMarket matrix coordinate pattern general\n5 5 3\n1 2\n2 3\n3 1\n")
    rc, out, _ = run_cli(["convert", g, tmp_path / "iso.hgr"], capsys)
    assert rc == 0 and "3 column nets over 5 vertices" in out and "read as a graph it is not A" in out
    rc, out, _ = run_cli(["convert", g, tmp_path / "iso2.hgr", "--json"], capsys)
    assert rc == 0 and json.loads(out)["nets"] == 3      # columns 0, 1, 2 reach another row; 3 and 4 none


def test_convert_to_a_format_its_name_contradicts_is_refused(tmp_path, capsys):
    """`convert G out.npz --to mtx` wrote Matrix Market text into a .npz name, which every later
    reader took for an npz; an unknown output suffix names --to (not --from)."""
    g = tmp_path / "g.mtx"
    write_graph(Graph.from_edges(np.arange(5), np.arange(1, 6), symmetrize=True), g)
    rc, _, err = run_cli(["convert", g, tmp_path / "o.npz", "--to", "mtx"], capsys)
    one_line(rc, err, 2, "o.npz", "--to mtx into a name of a npz file")
    rc, _, err = run_cli(["convert", g, tmp_path / "o.dat"], capsys)
    one_line(rc, err, 2, "unknown graph file extension .dat", "--to FMT")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.mtx"]
    for name, fmt in (("o.dat", "mtx"), ("o.txt", "edgelist"), ("o2.mtx", "mtx")):
        rc, _, err = run_cli(["convert", g, tmp_path / name, "--to", fmt], capsys)
        assert rc == 0, err


def test_bench_that_runs_no_case_is_an_error_and_repeats_run_once(tmp_path, capsys):
    """`bench --k 1000` on a 256-vertex graph skipped every case and exited 0 with empty tables;
    a dataset, k or method given twice ran (and printed) twice."""
    rc, _, err = run_cli(["bench", "--datasets", "rmat8", "--k", "1000", "--methods", "block", "-q"], capsys)
    one_line(rc, err, 2, "no case ran", "k > n=256")
    rc, out, err = run_cli(["bench", "--datasets", "rmat8", "rmat8", "--k", "4", "4", "--methods", "block", "block",
                            "-q", "--json"], capsys)
    assert rc == 0, err
    import json
    assert len(json.loads(out)["rows"]) == 1


def test_rgg_takes_a_radius_or_a_mean_degree_not_both(tmp_path, capsys):
    """`generate rgg --radius R --avg-degree D` exited 0 and ignored --avg-degree."""
    rc, _, err = run_cli(["datasets", "generate", "rgg", "-n", "100", "--radius", "0.1", "--avg-degree", "5",
                          "-o", tmp_path / "r.mtx"], capsys)
    assert rc == 2 and "alternatives" in err and not (tmp_path / "r.mtx").exists()
    for extra in (["--radius", "0.1"], ["--avg-degree", "5"], []):
        rc, _, err = run_cli(["-q", "datasets", "generate", "rgg", "-n", "100", *extra, "-o", tmp_path / "r.mtx"],
                             capsys)
        assert rc == 0, err


def test_rgg_with_a_mean_degree_above_every_pair_is_the_complete_graph(tmp_path, capsys):
    """--avg-degree 1e308 overflowed the size pre-check (int(inf): a traceback, exit 1); a degree
    above n - 1 asks for every pair."""
    from partplan.io import read_graph
    rc, _, err = run_cli(["-q", "datasets", "generate", "rgg", "-n", "10", "--avg-degree", "1e308",
                          "-o", tmp_path / "r.npz"], capsys)
    assert rc == 0, err
    assert read_graph(tmp_path / "r.npz").nnz == 10 * 9


@pytest.mark.parametrize("code", ["ENOSPC", "EFBIG"])
def test_a_write_without_room_is_one_error_even_where_no_file_is_named(code, monkeypatch, capsys):
    """A write to an open handle that fails for lack of room (a full disk, a file-size limit)
    raises an OSError naming no file: one error line and exit 2, not a traceback."""
    import errno
    import os

    import partplan.datasets as ds
    from tests.errlines import run_cli

    def full(*a, **kw):
        raise OSError(getattr(errno, code), os.strerror(getattr(errno, code)))

    monkeypatch.setattr(ds, "list_datasets", full)
    rc, _, err = run_cli(["datasets", "list"], capsys)
    assert rc == 2 and err.strip().splitlines() == [
        f"partplan: error: a write failed: {os.strerror(getattr(errno, code))} (a full disk, a quota or a "
        f"file-size limit)"]


def test_dataset_names_are_case_insensitive_in_every_command(capsys):
    """`datasets info POWER` and `convert POWER` took the name in any case; `partition` and the
    other graph commands said it was no file and no dataset."""
    from tests.errlines import run_cli
    rc, out, err = run_cli(["analyze", "POWER", "--method", "block", "-k", "2", "--json"], capsys)
    assert rc == 0, err
    import json
    assert json.loads(out)["n"] == 4941


@pytest.mark.parametrize("argv", [["partition", "g.mtx", "-k", "4", "--bogus"], ["partition", "g.mtx", "-k"],
                                  ["run", "spmm"]])
def test_a_usage_error_is_said_once_under_torchrun(argv, monkeypatch, capsys):
    """Every torchrun rank parses the same arguments: rank 0 says the usage error, the others exit
    2 without it (each printed the same line)."""
    from tests.errlines import one_line, run_cli
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
    for rank in ("0", "1", "3"):
        monkeypatch.setenv("RANK", rank)
        rc, out, err = run_cli(argv, capsys)
        if rank == "0":
            one_line(rc, err, 2)
        else:
            assert rc == 2 and out == err == "", err
    monkeypatch.delenv("TORCHELASTIC_RUN_ID")          # RANK alone (another launcher): said
    rc, _, err = run_cli(argv, capsys)
    one_line(rc, err, 2)


@pytest.mark.parametrize("argv", [["run", "spmm", "x.plan", "--backend", "local", "--feature-file", ""],
                                  ["validate", "x.plan", "--graph", ""],
                                  ["analyze", "power", "--partition", "", "-k", "2"],
                                  ["run", "graph500", "--scale", "5", "--backend", "local", "--partition", ""]])
def test_an_empty_option_value_is_refused(argv, capsys, tmp_path, monkeypatch):
    """"" (a script's unset variable) was read as the current folder: a partition folder, the
    features file ".", or no graph at all (validate said "valid"); one line now, exit 2."""
    from tests.errlines import one_line, run_cli
    monkeypatch.chdir(tmp_path)
    rc, _, err = run_cli(argv, capsys)
    one_line(rc, err, 2, f"argument {argv[argv.index('') - 1]}", "an empty value")
