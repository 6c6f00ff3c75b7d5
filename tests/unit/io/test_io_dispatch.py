"""read_graph / write_graph dispatch, atomic writes, the vectorized integer
line formatter, and the ``partplan convert`` command."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from partplan import Graph
from partplan.cli.main import main
from partplan.errors import BackendUnavailableError, GraphFormatError
from partplan.io import FORMATS, detect_format, read_graph, write_graph
from partplan.io._common import atomic_output, format_int_lines


@pytest.mark.parametrize("name,fmt", [
    ("a.mtx", "mtx"), ("a.MTX.gz", "mtx"), ("a.graph", "metis"), ("a.metis.gz", "metis"), ("a.hgr", "hgr"),
    ("a.npz", "npz"), ("a.parquet", "parquet"), ("a.arrow", "arrow"), ("a.feather", "feather"),
    ("a.csv", "csv"), ("a.txt.gz", "edgelist"), ("a.edges", "edgelist"), ("a.el", "edgelist"),
    ("a.tsv", "edgelist"), ("a.gt.gz", "gt"), ("a.gt", "gt"),
])
def test_detect_format(name, fmt):
    assert detect_format(name) == fmt and fmt in FORMATS


def test_unknown_extension_and_gz_binary():
    with pytest.raises(GraphFormatError, match="unknown graph file extension .xyz"):
        detect_format("g.xyz")
    with pytest.raises(GraphFormatError, match="binary"):
        detect_format("g.parquet.gz")
    with pytest.raises(GraphFormatError, match="unknown format 'nope'"):
        read_graph("g.txt", format="nope")


def test_format_argument_overrides_extension(tmp_path):
    p = tmp_path / "data.bin"
    p.write_text("%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n")
    g = read_graph(p, format="mtx")
    assert g.n == 2 and g.nnz == 1


def test_missing_file_is_one_clear_error(tmp_path):
    for name in ("none.mtx", "none.txt", "none.graph", "none.hgr", "none.gt", "none.npz", "none.parquet"):
        with pytest.raises(GraphFormatError, match="not found") as ei:
            read_graph(tmp_path / name)
        assert ei.value.path == str(tmp_path / name)


def test_every_writer_reader_pair_round_trips_a_matrix(tmp_path):
    """Each writable format against scipy: the pattern (and values where the
    format holds them) comes back exactly."""
    A = sp.random(25, 25, density=0.25, random_state=4, format="csr")
    A = (A + A.T).tocsr()
    A.setdiag(0)
    A.eliminate_zeros()
    A.data = np.ceil(A.data * 7)  # integer weights: METIS holds only integers
    g = Graph.from_scipy(A, directed=False)
    assert np.all(g.row_nnz > 0)  # edge formats cannot carry isolated vertices
    for ext in ("mtx", "mtx.gz", "graph", "graph.gz", "npz", "txt", "el.gz", "parquet", "arrow", "feather",
                "csv", "gt", "gt.gz"):
        p = write_graph(g, tmp_path / f"g.{ext}")
        h = read_graph(p)
        B = h.to_scipy()
        assert np.array_equal(B.indptr, A.indptr) and np.array_equal(B.indices, A.indices), ext
        if ext not in ("gt", "gt.gz"):  # .gt: structure only
            assert np.array_equal(B.data, A.data), ext


def test_atomic_write_keeps_old_file_on_failure(tmp_path):
    p = tmp_path / "keep.mtx"
    p.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_output(p) as fh:
            fh.write(b"partial")
            raise RuntimeError("boom")
    assert p.read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["keep.mtx"]
    # a writer refusing its input leaves nothing either
    with pytest.raises(GraphFormatError):
        write_graph(Graph.from_edges([0], [1]), tmp_path / "keep.graph")  # directed: METIS refuses
    assert sorted(os.listdir(tmp_path)) == ["keep.mtx"]


def test_format_int_lines_matches_python_formatting():
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 5, 200)
    vals = rng.integers(-10 ** 12, 10 ** 18, int(counts.sum()))
    vals[:3] = [0, 9, 10]
    text = format_int_lines(vals, counts).decode()
    it = iter(vals.tolist())
    expected = "".join(" ".join(str(next(it)) for _ in range(c)) + "\n" for c in counts.tolist())
    assert text == expected


def test_mtkahypar_style_unknown_option_is_refused(tmp_path):
    p = tmp_path / "a.mtx"
    p.write_text("%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n")
    with pytest.raises(BackendUnavailableError, match="relabel"):
        read_graph(p, relabel=False)


# -------------------------------------------------------------------- CLI
def test_convert_cli(tmp_path, capsys):
    src = tmp_path / "in.txt"
    src.write_text("# c\n5 6\n6 7\n7 5\n7 7\n")
    out = tmp_path / "out.mtx"
    rc = main(["convert", str(src), str(out), "--symmetrize", "--self-loops", "remove", "--json"])
    assert rc == 0
    info = json.loads(capsys.readouterr().out)
    A = sp.csr_matrix(scipy.io.mmread(out))
    assert (info["n"], info["nnz"]) == (3, 6) == (A.shape[0], A.nnz)
    assert info["relabelled"] and not info["directed"]
    assert info["fingerprint"] == read_graph(out).fingerprint
    rc = main(["convert", str(out), str(tmp_path / "out.graph")])
    assert rc == 0 and "fingerprint" in capsys.readouterr().out
    rc = main(["convert", str(out), str(tmp_path / "out.hgr")])
    assert rc == 0
    rc = main(["convert", str(src), str(tmp_path / "x.graph")])  # has a self loop: METIS refuses
    assert rc == 2
    err = capsys.readouterr().err
    assert "--symmetrize --self-loops remove" in err and "Traceback" not in err
    bad = tmp_path / "bad.txt"
    bad.write_text("1 2\n3 z\n")
    assert main(["convert", str(bad), str(tmp_path / "y.mtx")]) == 2
    assert f"{bad}:line 2" in capsys.readouterr().err


def test_convert_help(capsys):
    with pytest.raises(SystemExit) as ei:
        main(["convert", "--help"])
    assert ei.value.code == 0 and "--symmetrize" in capsys.readouterr().out
