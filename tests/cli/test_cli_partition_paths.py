"""`partplan partition` and `convert`: outputs that would replace an input or could not be
completed are refused before any work, and the options that no distributed engine takes are named
as such. Every case runs in this process (no MPI process starts: each is refused first)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("scipy")

from partplan import Graph  # noqa: E402
from partplan.io import write_graph  # noqa: E402
from partplan.io.chunked import write_chunked  # noqa: E402
from tests.errlines import one_line, run_cli  # noqa: E402


def _ring(n: int = 40) -> Graph:
    i = np.arange(n)
    return Graph.from_edges(i, (i + 1) % n, n=n, symmetrize=True)


@pytest.fixture
def chunked(tmp_path):
    path = tmp_path / "g.chunked"
    write_chunked(_ring(), path, chunks=4)
    return path


@pytest.mark.parametrize("nprocs", [None, 2])
def test_an_output_over_a_chunk_of_the_input_is_refused(chunked, capsys, nprocs):
    victim = sorted(chunked.glob("chunk-*indices*"))[0]
    before = victim.read_bytes()
    extra = [] if nprocs is None else ["--nprocs", nprocs]
    rc, _, err = run_cli(["partition", chunked, "-k", 4, *extra, "-o", victim], capsys)
    one_line(rc, err, 2, victim.name, "input")
    assert victim.read_bytes() == before


@pytest.mark.parametrize("companion, extra", [(".json", []), (".json", ["--nprocs", "2"]),
                                              (".owner.npy", ["--ownership", "decoupled"])])
def test_a_sidecar_name_taken_by_a_folder_keeps_the_previous_output(tmp_path, capsys, companion, extra):
    g = tmp_path / "g.mtx"
    write_graph(_ring(), g)
    out = tmp_path / "p.npy"
    out.write_bytes(b"previous")
    (tmp_path / f"p.npy{companion}").mkdir()
    rc, _, err = run_cli(["partition", g, "-k", 4, *extra, "-o", out], capsys)
    one_line(rc, err, 2, f"p.npy{companion}", "directory")
    assert out.read_bytes() == b"previous"


def test_more_processes_than_rows_is_said_in_the_users_terms(tmp_path, capsys):
    g = tmp_path / "tiny.mtx"
    write_graph(_ring(3), g)
    rc, _, err = run_cli(["partition", g, "-k", 2, "--nprocs", 5, "-o", tmp_path / "p.npy"], capsys)
    line = one_line(rc, err, 2, "--nprocs 5", "3 rows")
    assert "chunk" not in line and ".tmp" not in line
    rc, _, err = run_cli(["partition", g, "-k", 4, "--nprocs", 5, "-o", tmp_path / "p.npy"], capsys)
    one_line(rc, err, 2, "-k 4", "3 vertices")     # the k check first


@pytest.mark.parametrize("flags, flag", [(["--metric", "cut"], "--metric"), (["--preset", "strong"], "--preset"),
                                         (["--threads", "2"], "--threads"),
                                         (["--engine", "zoltan", "--metric", "cut"], "--metric"),
                                         (["--kahypar-ini", "x.ini"], "--kahypar-ini")])
def test_options_no_distributed_engine_takes_are_named(tmp_path, capsys, flags, flag):
    g = tmp_path / "g.mtx"
    write_graph(_ring(), g)
    rc, _, err = run_cli(["partition", g, "-k", 4, "--nprocs", 2, *flags, "-o", tmp_path / "p.npy"], capsys)
    line = one_line(rc, err, 2, flag, "does not apply with --nprocs")
    assert "explicit --engine" not in line


def test_a_chunk_nnz_its_indptr_contradicts_is_named(chunked):
    from partplan.errors import GraphFormatError
    from partplan.io.chunked import chunk_info

    h = json.loads((chunked / "header.json").read_text())
    h["chunks"][1]["nnz"] = 5
    (chunked / "header.json").write_text(json.dumps(h))
    with pytest.raises(GraphFormatError) as exc:
        chunk_info(chunked)
    assert "chunks[1].nnz" in str(exc.value)


def test_convert_keep_duplicates_into_chunks_is_refused_before_the_read(tmp_path, capsys):
    src = tmp_path / "dup.txt"
    src.write_text("0 1\n0 1\n1 2\n")
    rc, _, err = run_cli(["convert", src, tmp_path / "out.chunked", "--chunks", 2, "--keep-duplicates"], capsys)
    one_line(rc, err, 2, "--keep-duplicates", "--chunks")
    assert not (tmp_path / "out.chunked").exists()


def test_convert_chunks_into_a_graph_file_name_is_refused(tmp_path, capsys):
    src = tmp_path / "g.txt"
    src.write_text("0 1\n1 2\n")
    rc, _, err = run_cli(["convert", src, tmp_path / "out.graph", "--chunks", 2], capsys)
    one_line(rc, err, 2, "out.graph", "out.chunked")
    assert not (tmp_path / "out.graph").exists()


def test_a_hypergraph_dataset_converts_to_hgr_and_is_refused_elsewhere(tmp_path, capsys):
    from partplan import datasets
    from partplan.errors import DatasetError
    from partplan.io import read_hypergraph

    name = next((n for n in datasets.names() if datasets.info(n).get("kind") == "hypergraph"), None)
    if name is None:
        pytest.skip("no hypergraph dataset registered")
    try:
        h = datasets.load(name)
    except DatasetError:
        pytest.skip(f"{name} is not fetched here")
    rc, _, err = run_cli(["convert", name, tmp_path / "h.hgr"], capsys)
    assert rc == 0, err
    back = read_hypergraph(tmp_path / "h.hgr")
    assert (back.n, back.m) == (h.n, h.m) and np.array_equal(back.pins, h.pins)
    for out in ("h.graph", "h.mtx"):
        rc, _, err = run_cli(["convert", name, tmp_path / out], capsys)
        one_line(rc, err, 2, "hypergraph dataset", ".hgr")
        assert not (tmp_path / out).exists()


@pytest.mark.parametrize("argv", [
    ["partition", "{g}", "-k", "2", "-o", "{long}.part.2"],
    ["convert", "{g}", "{long}.npz"],
    ["inspect", "{long}.plan"],
    ["plan", "{long}.mtx", "--partition", "{g}.part", "-o", "{tmp}/q.plan"],
    ["datasets", "generate", "grid2d", "--nx", "3", "--ny", "3", "-o", "{long}.mtx"],
])
def test_a_name_the_system_refuses_is_one_error_line(tmp_path, capsys, argv):
    """A path the operating system refuses (a name longer than 255 bytes) is one error line naming
    it and the system's reason, exit 2, whichever reader or writer meets it first."""
    g = tmp_path / "g.mtx"
    write_graph(_ring(), g)
    long = tmp_path / ("z" * 300)
    rc, _, err = run_cli([a.format(g=g, long=long, tmp=tmp_path) for a in argv], capsys)
    one_line(rc, err, 2, "z" * 300, "File name too long")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.mtx"]


def test_a_missing_file_of_the_install_keeps_its_traceback(monkeypatch, capsys):
    """Only a user's path is answered as one error line: a file missing inside partplan's own
    package (a fault of the install or of partplan) is not dressed as bad input."""
    import partplan
    from partplan.cli import main as cli_main

    def broken(args):
        open(Path(partplan.__file__).parent / "no-such-resource.json")
    monkeypatch.setattr(cli_main, "build_parser", lambda: _parser_running(broken))
    with pytest.raises(FileNotFoundError):
        cli_main.main(["x"])


def _parser_running(func):
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("cmd")
    p.set_defaults(func=func)
    return p
