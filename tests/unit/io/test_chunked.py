"""Chunked graph input (issue 22): partplan/io/chunked.py and the streaming
R-MAT writer partplan/datasets/chunked_gen.py. Oracles: scipy row slices of
the in-memory graph, Graph.fingerprint, and the in-memory rmat()."""
from __future__ import annotations

import json

import numpy as np
import pytest

from partplan.datasets.chunked_gen import rmat_chunked
from partplan.datasets.generators import GeneratorParameterError, rmat
from partplan.errors import GraphFormatError
from partplan.graph import Graph
from partplan.io import read_graph
from partplan.io.chunked import (chunk_info, chunked_fingerprint, read_chunk_rows, read_chunked,
                                 write_chunked)


def _weighted(n=60, seed=4) -> Graph:
    rng = np.random.default_rng(seed)
    s, t = rng.integers(0, n, 400), rng.integers(0, n, 400)
    return Graph.from_edges(s, t, rng.random(400) + 0.5, n=n, name="w60")


@pytest.mark.parametrize("chunks", [1, 3, 7])
def test_roundtrip_and_row_slices_match_scipy(tmp_path, chunks):
    g = _weighted()
    p = write_chunked(g, tmp_path / "g.chunked", chunks=chunks)
    info = chunk_info(p)
    assert (info.n, info.nnz, info.weighted, info.directed, info.name) == (g.n, g.nnz, True, True, "w60")
    assert len(info.chunks) == chunks and info.row_bounds[0] == 0 and info.row_bounds[-1] == g.n
    h = read_chunked(p)
    assert h.fingerprint == g.fingerprint and np.array_equal(h.data, g.data)
    assert chunked_fingerprint(p) == g.fingerprint
    A = g.to_scipy()
    for lo, hi in [(0, g.n), (5, 41), (17, 18), (30, 30), (59, 60)]:
        r = read_chunk_rows(p, lo, hi)
        B = A[lo:hi]
        assert np.array_equal(r.indptr, B.indptr) and np.array_equal(r.indices, B.indices)
        assert np.array_equal(r.data, B.data)
    assert read_graph(p).fingerprint == g.fingerprint          # io dispatch hook


def test_rewrite_replaces_and_refuses_foreign_dir(tmp_path):
    g = rmat(6, seed=1)
    p = write_chunked(g, tmp_path / "g.chunked", chunks=2)
    write_chunked(g, p, chunks=3)
    assert len(chunk_info(p).chunks) == 3
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    with pytest.raises(GraphFormatError, match="refusing"):
        write_chunked(g, other, chunks=2)
    assert (other / "keep.txt").exists()
    assert not [x for x in tmp_path.iterdir() if x.name.startswith(".")]


@pytest.mark.parametrize("kw", [{}, {"symmetrize": False}, {"self_loops": "keep"},
                                {"self_loops": "add", "permute": False}, {"edgefactor": 3, "a": 0.45}])
def test_rmat_chunked_equals_rmat(tmp_path, kw):
    g = rmat(10, seed=7, **kw)
    p = rmat_chunked(10, seed=7, path=tmp_path / "r.chunked", chunks=5, **kw)
    h = read_chunked(p)
    assert h.fingerprint == g.fingerprint and h.nnz == g.nnz
    assert (h.name, h.directed, h.data is None) == (g.name, g.directed, True)


@pytest.mark.slow
def test_rmat_chunked_more_blocks_than_one(tmp_path):
    """scale 17: 2 M tuples = 2 generator blocks, so the per-block streams matter."""
    g = rmat(17, edgefactor=16, seed=2)
    p = rmat_chunked(17, seed=2, path=tmp_path / "r.chunked", chunks=4)
    assert chunked_fingerprint(p) == g.fingerprint


def test_rmat_chunked_bad_parameters(tmp_path):
    with pytest.raises(GeneratorParameterError, match="scale"):
        rmat_chunked(40, path=tmp_path / "x", chunks=2)
    with pytest.raises(GeneratorParameterError, match="chunks"):
        rmat_chunked(5, path=tmp_path / "x", chunks=0)
    assert not (tmp_path / "x").exists()


# ----------------------------------------------------------------------------- hostile headers / arrays
def _edit(p, fn):
    h = json.loads((p / "header.json").read_text())
    fn(h)
    (p / "header.json").write_text(json.dumps(h))


@pytest.mark.parametrize("edit, field", [
    (lambda h: h.update(n=-1), "n"),
    (lambda h: h.update(n=1 << 60), "n"),
    (lambda h: h.update(nnz="7"), "nnz"),
    (lambda h: h.update(format="other"), "format"),
    (lambda h: h.update(version=9), "version"),
    (lambda h: h.update(index_dtype="float32"), "index_dtype"),
    (lambda h: h.update(weighted="yes"), "weighted"),
    (lambda h: h.update(chunks=[]), "chunks"),
    (lambda h: h["chunks"][1].update(row_lo=h["chunks"][1]["row_lo"] + 1), "chunks[1].row_lo"),
    (lambda h: h["chunks"][0].update(row_hi=-3), "chunks[0].row_hi"),
    (lambda h: h["chunks"][-1].update(row_hi=h["chunks"][-1]["row_hi"] - 1), "chunks[2].row_hi"),
    (lambda h: h["chunks"][0].update(nnz=h["chunks"][0]["nnz"] + 1), "chunks[0].nnz"),   # its own indptr contradicts it
    (lambda h: h["chunks"][0].update(indices="../../etc/passwd.npy"), "chunks[0].indices"),
    (lambda h: h["chunks"][0].update(data="x.npy"), "chunks[0].data"),
])
def test_bad_header_fields_are_named(tmp_path, edit, field):
    p = write_chunked(rmat(6, seed=0), tmp_path / "g.chunked", chunks=3)
    _edit(p, edit)
    with pytest.raises(GraphFormatError) as ei:
        chunk_info(p)
    assert ei.value.field == field and "header.json" in str(ei.value)


def test_bad_arrays_are_named(tmp_path):
    g = rmat(6, seed=0)
    p = write_chunked(g, tmp_path / "g.chunked", chunks=2)
    c0 = chunk_info(p).chunks[0]
    good = np.load(c0.indices)
    for bad, what in [(np.where(np.arange(good.size) == 3, g.n + 5, good), "out of range"),
                      (good[::-1].copy(), "increasing")]:
        np.save(c0.indices, bad)
        with pytest.raises(GraphFormatError, match=what) as ei:
            read_chunk_rows(p, 0, g.n)
        assert ei.value.field == "indices" and "chunk-00000.indices.npy" in str(ei.value)
    np.save(c0.indices, good[:-1])                      # shorter than the header says
    with pytest.raises(GraphFormatError, match="shape") as ei:
        read_chunked(p)
    np.save(c0.indices, good)
    ip = np.load(c0.indptr)
    ip[2], ip[3] = ip[3], ip[2] - 1
    np.save(c0.indptr, ip)
    with pytest.raises(GraphFormatError, match="monotone") as ei:
        read_chunked(p)
    assert ei.value.field == "indptr"
    with open(c0.indptr, "wb") as fh:                    # a header claiming 8 TB
        np.lib.format.write_array_header_1_0(fh, {"descr": "<i8", "fortran_order": False,
                                                  "shape": (10 ** 12,)})
    with pytest.raises(GraphFormatError, match="claims shape"):
        read_chunked(p)
    c0.indptr.unlink()
    with pytest.raises(GraphFormatError, match="missing"):
        read_chunked(p)
    with pytest.raises(GraphFormatError, match="no such directory"):
        chunk_info(tmp_path / "nope")


def test_symmetry_hash_agrees_with_array_equal():
    """The keyed hash sums decide symmetry as the single-process builder does
    (values_symmetric: np.array_equal of A and A^T): -0.0 equals 0.0, a NaN
    equals nothing; sums over any split of the nonzeros add up."""
    from partplan import Graph
    from partplan.io.chunked import symmetry_hash_sums
    from partplan.plan.builder import values_symmetric

    def decide(g, splits=3):
        rows = np.repeat(np.arange(g.n), np.diff(g.indptr))
        tot = [0] * 8
        for part in np.array_split(np.arange(g.nnz), splits):
            s = symmetry_hash_sums(rows[part], g.indices[part], None if g.data is None else g.data[part])
            tot = [(a + b) % (1 << 64) for a, b in zip(tot, s)]
        pattern = tot[0:2] == tot[2:4]
        return pattern, pattern and (g.data is None or tot[4:6] == tot[6:8])

    src, dst = np.array([0, 1, 1, 2, 3, 0]), np.array([1, 0, 2, 1, 3, 3])
    for w, want in ((None, False), ([1.0, 1.0, 2.0, 2.0, 5.0, 7.0], False)):
        g = Graph.from_edges(src, dst, w, n=4, dedupe=False)
        assert decide(g)[0] is False and values_symmetric(g) is want
    s2, d2 = np.array([0, 1, 1, 2, 3]), np.array([1, 0, 2, 1, 3])
    for w in ([1.0, 1.0, 2.0, 2.0, 5.0], [0.0, -0.0, 2.0, 2.0, -0.0], [1.0, 1.0, 2.0, 3.0, 5.0]):
        g = Graph.from_edges(s2, d2, np.array(w), n=4, dedupe=False)
        pattern, values = decide(g)
        assert pattern and values == values_symmetric(g), w
    # graphs refuse NaN weights; the raw sums still never call NaN values symmetric
    nan = symmetry_hash_sums(np.array([0, 1]), np.array([1, 0]), np.array([np.nan, np.nan]))
    assert nan[0:2] == nan[2:4] and nan[4:6] != nan[6:8]


def test_a_chunk_without_rows_holds_no_nonzeros(tmp_path):
    """The readers skip a chunk without rows; one claiming nonzeros made the graph read differ from
    its header and from the fingerprint (which reads every chunk's indices)."""
    import json

    from partplan.errors import GraphFormatError
    from partplan.graph import Graph
    from partplan.io.chunked import chunk_info, write_chunked
    g = Graph.from_edges(np.arange(9), np.arange(1, 10), n=10, symmetrize=True)
    d = write_chunked(g, tmp_path / "g.chunked", chunks=2)
    h = json.loads((d / "header.json").read_text())
    lo = h["chunks"][1]["row_lo"]
    np.save(d / "z.indptr.npy", np.zeros(1, np.int64))
    np.save(d / "z.indices.npy", np.array([1, 2, 3], np.int64))
    h["chunks"].insert(1, {"row_lo": lo, "row_hi": lo, "nnz": 3, "indptr": "z.indptr.npy",
                           "indices": "z.indices.npy", "data": None})
    h["nnz"] += 3
    (d / "header.json").write_text(json.dumps(h))
    with pytest.raises(GraphFormatError) as exc:
        chunk_info(d)
    assert exc.value.field == "chunks[1].nnz" and "no rows" in str(exc.value)


def test_a_header_name_is_printed_escaped(tmp_path, capsys):
    import json

    from partplan.graph import Graph
    from partplan.io.chunked import chunk_info, write_chunked
    from tests.errlines import run_cli
    g = Graph.from_edges(np.arange(9), np.arange(1, 10), n=10, symmetrize=True)
    d = write_chunked(g, tmp_path / "g.chunked", chunks=2)
    h = json.loads((d / "header.json").read_text())
    h["name"] = "x\u001b[31mRED\n\rpartplan: error: fake"
    (d / "header.json").write_text(json.dumps(h))
    assert "\n" not in chunk_info(d).name and "\x1b" not in chunk_info(d).name
    rc, out, err = run_cli(["analyze", d, "--method", "block", "-k", "2"], capsys)
    assert rc == 0, err
    assert not any(line.startswith("partplan: error") for line in (out + err).splitlines())
    h["name"] = "n" * 5000
    (d / "header.json").write_text(json.dumps(h))
    rc, out, err = run_cli(["analyze", d, "--method", "block", "-k", "2"], capsys)
    assert rc == 2 and "header.json" in err and "name" in err and "characters" in err, err


def test_a_read_larger_than_the_memory_budget_is_refused_before_it_allocates(tmp_path, monkeypatch):
    """A header may claim n = 10^7 rows with a sparse indptr file of that length (its size check
    passes): the read is checked against the memory budget before the offsets, and again before the
    columns, as every other reader's header sizes are (an audit read it under a 1 MiB budget)."""
    from partplan.errors import SizeLimitError
    g = rmat(6, seed=0)
    p = write_chunked(g, tmp_path / "g.chunked", chunks=1)
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", "1M")
    assert read_chunked(p).fingerprint == g.fingerprint      # a graph inside the budget reads as before
    n = 10 ** 7
    h = json.loads((p / "header.json").read_text())
    h.update(n=n, nnz=0)
    h["chunks"][0].update(row_hi=n, nnz=0)
    (p / "header.json").write_text(json.dumps(h))
    ip = p / h["chunks"][0]["indptr"]
    with open(ip, "wb") as fh:                                 # all zeros, 80 MB long, no byte on disk
        np.lib.format.write_array_header_1_0(fh, {"descr": "<i8", "fortran_order": False, "shape": (n + 1,)})
        fh.truncate(fh.tell() + 8 * (n + 1))
    np.save(p / h["chunks"][0]["indices"], np.zeros(0, np.int64))
    with pytest.raises(SizeLimitError, match="memory budget") as ei:
        read_chunked(p)
    assert ei.value.field == "indptr"
    with pytest.raises(SizeLimitError, match="memory budget"):
        read_chunk_rows(p, 0, n)
    assert read_chunk_rows(p, 5, 10).nnz == 0                  # a range inside the budget still reads
