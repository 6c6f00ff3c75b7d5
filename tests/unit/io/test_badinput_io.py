"""Bad input to the readers (issue 12, "Bad input"): every class ends in ONE
PartplanError subclass naming the file and the line / field, decided before
the expensive work (no MemoryError, no traceback of gzip / zlib / numpy, no
silent acceptance).

Classes: a corrupt (not truncated) .gz for every reader that accepts .gz;
hostile header sizes (n = 10^10 in .mtx / .npz / METIS / .hgr / .gt, ids up
to 10^12 without relabelling) refused against the file length and the memory
budget (PARTPLAN_MAX_BYTES) before allocating; integers beyond 2^63 in every
text format; a symmetric .mtx holding both triangles; .npz errors naming the
file and the array; NaN / inf / negative values. The CLI turns each into
``partplan: error: ...`` with exit status 2 (tested in a fresh interpreter).
"""
from __future__ import annotations

import gzip
import io
import os
import tracemalloc
import zipfile
import zlib

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from partplan.errors import GraphFormatError, PartitionError, PartplanError, SizeLimitError
from partplan.io import read_graph, read_hypergraph, read_partition
from partplan.io._common import memory_budget, parse_bytes
from partplan.io.mtx import read_mtx

BIG = 2 ** 64 + 5          # beyond int64 (and uint64)
NEG_BIG = -(2 ** 63) - 1   # just below int64


def _rng_text_edges(n_lines=6000, seed=0):
    rng = np.random.default_rng(seed)
    e = rng.integers(0, 100_000, (n_lines, 2))
    return e


def _flip_middle(data: bytes, nbytes: int = 8) -> bytes:
    """Corrupt (do not truncate) a gzip file: invert bytes in the middle of
    the deflate stream; header and trailer stay intact."""
    b = bytearray(data)
    mid = len(b) // 2
    for i in range(mid, mid + nbytes):
        b[i] ^= 0xFF
    return bytes(b)


def _corrupt_deflate(data: bytes) -> bytes:
    """Flip bytes in the middle of the deflate stream at the first place (from
    the middle on) where zlib itself fails ("invalid distance", "invalid code
    lengths", ...): the zlib.error case, as opposed to a bad CRC."""
    for start in range(len(data) // 2, len(data) - 16, 7):
        b = bytearray(data)
        for i in range(start, start + 8):
            b[i] ^= 0xFF
        try:
            zlib.decompress(bytes(b), wbits=31)
        except zlib.error as exc:
            if "incorrect data check" not in str(exc) and "incomplete" not in str(exc):
                return bytes(b)
    raise AssertionError("no corrupting flip found")


def _gz(text: str) -> bytes:
    return gzip.compress(text.encode(), mtime=0)


def _bad_crc(data: bytes) -> bytes:
    b = bytearray(data)
    b[-8] ^= 0xFF  # CRC32 of the trailer
    return bytes(b)


def _texts():
    """A valid text of each gzip-capable format (tens of KiB, so the middle
    of the gzip file is deflate data), with how to read it."""
    e = _rng_text_edges()
    el = "".join(f"{a} {b}\n" for a, b in e)
    n = 100_000
    mtx = (f"%%MatrixMarket matrix coordinate pattern general\n{n} {n} {len(e)}\n"
           + "".join(f"{a + 1} {b + 1}\n" for a, b in e))
    nv = 3000  # a ring: vertex v lists v-1 and v+1
    metis = f"{nv} {nv}\n" + "".join(f"{(v - 1) % nv + 1} {(v + 1) % nv + 1}\n" for v in range(nv))
    hgr = f"{len(e)} {n}\n" + "".join(f"{a + 1} {b + 1}\n" for a, b in e)
    sq = f"{nv} {nv}\n" + "".join(f"{v + 1} {(v * 7) % nv + 1}\n" for v in range(nv))
    csv = "src,dst\n" + "".join(f"{a},{b}\n" for a, b in e)
    part = "".join(f"{int(v) % 7}\n" for v in e[:, 0])
    return {
        "g.txt.gz": (el, lambda p: read_graph(p), GraphFormatError),
        "g.mtx.gz": (mtx, lambda p: read_graph(p), GraphFormatError),
        "g.graph.gz": (metis, lambda p: read_graph(p), GraphFormatError),
        "h.hgr.gz": (hgr, lambda p: read_hypergraph(p), GraphFormatError),
        "sq.hgr.gz": (sq, lambda p: read_graph(p), GraphFormatError),
        "t.csv.gz": (csv, lambda p: read_graph(p), GraphFormatError),
        "g.part.7.gz": (part, lambda p: read_partition(p, len(e)), PartitionError),
    }


TEXTS = _texts()


# ------------------------------------------------------------------ corrupt .gz
@pytest.mark.parametrize("name", sorted(TEXTS))
@pytest.mark.parametrize("how", ["zlib-error", "flipped-middle", "bad-crc", "truncated"])
def test_corrupt_gzip_every_text_reader(tmp_path, name, how):
    text, read, err = TEXTS[name]
    p = tmp_path / name
    p.write_bytes(_gz(text))
    read(p)  # the intact file reads
    data = _gz(text)
    bad = {"zlib-error": _corrupt_deflate, "flipped-middle": _flip_middle, "bad-crc": _bad_crc,
           "truncated": lambda d: d[:len(d) * 3 // 4]}[how](data)
    p.write_bytes(bad)
    with pytest.raises(err) as ei:
        read(p)
    msg = str(ei.value)
    assert type(ei.value) is not PartplanError and isinstance(ei.value, PartplanError)
    assert str(p) in msg and ("gzip" in msg or "compress" in msg or "zlib" in msg), msg
    if err is GraphFormatError and not name.endswith(".csv.gz"):
        assert ei.value.path == str(p) and ei.value.line is not None, msg


def test_corrupt_gzip_graph_tool(tmp_path):
    from partplan import Graph
    from partplan.io import write_graph

    rng = np.random.default_rng(1)
    g = Graph.from_edges(rng.integers(0, 5000, 20000), rng.integers(0, 5000, 20000))
    p = write_graph(g, tmp_path / "g.gt.gz")
    assert read_graph(p).fingerprint == g.fingerprint
    p.write_bytes(_corrupt_deflate(p.read_bytes()))
    with pytest.raises(GraphFormatError, match="corrupt gzip stream") as ei:
        read_graph(p)
    assert ei.value.path == str(p)


@pytest.mark.parametrize("name", ["g.txt.gz", "g.mtx.gz", "g.graph.gz", "h.hgr.gz", "g.part.7.gz"])
def test_corrupt_gzip_line_is_where_the_bad_data_is(tmp_path, name):
    """The bytes flipped in the middle of the compressed file decode to a line
    in the middle of the text (uniform random lines compress uniformly): the
    error names that line, not the first line of the 32 MiB block."""
    text, read, err = TEXTS[name]
    nlines = text.count("\n")
    p = tmp_path / name
    p.write_bytes(_corrupt_deflate(_gz(text)))
    with pytest.raises(err, match="stops decompressing on this line") as ei:
        read(p)
    import re
    line = int(re.search(r":line (\d+)", str(ei.value)).group(1))
    assert 0.3 * nlines < line < 0.8 * nlines, (line, nlines)


# ------------------------------------------------------------------ hostile sizes
@pytest.fixture
def budget_1g(monkeypatch):
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", "1G")


def _refused_without_allocating(read, path, err=GraphFormatError):
    """``read(path)`` raises ``err`` and numpy allocated < 64 MiB meanwhile
    (numpy reports its buffers to tracemalloc)."""
    tracemalloc.start()
    try:
        with pytest.raises(err) as ei:
            read(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"allocated {peak} bytes before refusing"
    return ei.value


def test_mtx_header_n_1e10(tmp_path, budget_1g):
    for sym in ("general", "symmetric"):
        p = tmp_path / f"big_{sym}.mtx"
        p.write_text(f"%%MatrixMarket matrix coordinate pattern {sym}\n% c\n10000000000 10000000000 3\n"
                     "2 1\n3 2\n3 1\n")
        e = _refused_without_allocating(read_graph, p, SizeLimitError)
        assert e.path == str(p) and e.line == 3 and e.field == "M", str(e)
        assert "memory budget" in str(e) and "PARTPLAN_MAX_BYTES" in str(e)


def test_mtx_header_nnz_beyond_file_length(tmp_path):
    p = tmp_path / "nnz.mtx"
    p.write_text("%%MatrixMarket matrix coordinate real general\n3 3 10000000000\n1 2 1.0\n")
    e = _refused_without_allocating(read_graph, p)
    assert e.line == 2 and e.field == "NNZ" and "bytes" in str(e), str(e)
    # gzip: bounded by the most deflate can expand
    q = tmp_path / "nnz.mtx.gz"
    q.write_bytes(_gz(p.read_text()))
    e = _refused_without_allocating(read_graph, q)
    assert e.field == "NNZ" and "gzip" in str(e)


def test_budget_env_override_and_default(tmp_path, monkeypatch):
    p = tmp_path / "ok.mtx"
    p.write_text("%%MatrixMarket matrix coordinate pattern general\n1000 1000 1\n1 2\n")
    assert read_graph(p).n == 1000
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", "4KiB")   # 1001 row pointers alone need 8008 bytes
    with pytest.raises(SizeLimitError, match="above the memory budget of 4.0 KiB"):
        read_graph(p)
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", "lots")
    with pytest.raises(GraphFormatError, match="PARTPLAN_MAX_BYTES"):
        read_graph(p)
    monkeypatch.delenv("PARTPLAN_MAX_BYTES")
    phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert 0 < memory_budget() <= phys
    assert parse_bytes("512M") == 512 << 20 and parse_bytes("1.5G") == 3 << 29 and parse_bytes("77") == 77


def _npz_coo(path, shape, **arrays):
    base = dict(format=np.array("coo"), shape=np.array(shape), row=np.array([0, 1]), col=np.array([1, 2]),
                data=np.array([1.0, 2.0]))
    base.update(arrays)
    np.savez(path, **base)
    return path


def test_npz_shape_1e10(tmp_path, budget_1g):
    for fmt in ("coo", "csr", "dia"):
        p = tmp_path / f"big_{fmt}.npz"
        if fmt == "coo":
            _npz_coo(p, (10 ** 10, 10 ** 10))
        elif fmt == "csr":
            np.savez(p, format=np.array("csr"), shape=np.array((10 ** 10, 10 ** 10)), indices=np.array([1]),
                     indptr=np.array([0, 1]), data=np.array([1.0]))
        else:
            np.savez(p, format=np.array("dia"), shape=np.array((10 ** 10, 10 ** 10)), offsets=np.array([0]),
                     data=np.array([[1.0]]))
        e = _refused_without_allocating(read_graph, p, SizeLimitError)
        assert e.path == str(p) and e.field == "shape", str(e)


def test_npz_member_header_claims_huge_array(tmp_path):
    """numpy allocates the shape an .npy header claims before reading it: a
    member whose header says 10^10 values must be refused from the header."""
    p = _npz_coo(tmp_path / "lie.npz", (3, 3))
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": (10 ** 10,)})
    lie = buf.getvalue() + np.array([1.0, 2.0]).tobytes()
    q = tmp_path / "lie2.npz"
    with zipfile.ZipFile(p) as zin, zipfile.ZipFile(q, "w") as zout:
        for item in zin.infolist():
            zout.writestr(item, lie if item.filename == "data.npy" else zin.read(item))
    e = _refused_without_allocating(read_graph, q)
    assert e.path == str(q) and e.field == "data" and "10000000000" in str(e), str(e)


def test_edge_ids_1e12_without_relabelling(tmp_path, budget_1g):
    p = tmp_path / "ids.txt"
    p.write_text("# hashes\n0 5\n7 1000000000000\n3 4\n")
    e = _refused_without_allocating(lambda q: read_graph(q, relabel=False), p, SizeLimitError)
    assert e.path == str(p) and e.line == 3 and e.field == "dst", str(e)
    g = read_graph(p)  # relabelled: 6 distinct ids, originals kept
    assert g.n == 6 and g.ids.tolist() == [0, 3, 4, 5, 7, 10 ** 12]
    # tables too
    import pyarrow as pa
    import pyarrow.parquet as pq
    t = tmp_path / "ids.parquet"
    pq.write_table(pa.table({"src": [0, 7], "dst": [5, 10 ** 12]}), t)
    e = _refused_without_allocating(lambda q: read_graph(q, relabel=False), t, SizeLimitError)
    assert e.path == str(t)


def test_metis_hgr_gt_header_sizes(tmp_path, budget_1g):
    p = tmp_path / "big.graph"
    p.write_text("% c\n10000000000 1\n2\n1\n")
    e = _refused_without_allocating(read_graph, p)
    assert e.line == 2 and e.field == "n", str(e)
    p = tmp_path / "bigm.graph"
    p.write_text("2 10000000000\n2\n1\n")
    e = _refused_without_allocating(read_graph, p)
    assert e.line == 1 and e.field == "m", str(e)
    h = tmp_path / "big.hgr"
    h.write_text("1 10000000000\n1 2\n")
    e = _refused_without_allocating(read_hypergraph, h, SizeLimitError)
    assert e.line == 1 and e.field == "n", str(e)
    h.write_text("10000000000 2\n1 2\n")
    e = _refused_without_allocating(read_hypergraph, h)
    assert e.field == "m", str(e)
    g = tmp_path / "big.gt"
    g.write_bytes(b"\xe2\x9b\xbe gt" + bytes([1, 0]) + (0).to_bytes(8, "little") + b"\x00"
                  + (10 ** 10).to_bytes(8, "little") + b"\0" * 64)
    e = _refused_without_allocating(read_graph, g)
    assert e.field == "N" and "10000000000" in str(e), str(e)


# ------------------------------------------------------------------ integers beyond 2^63
OVERFLOW_CASES = [
    ("ovf.txt", f"0 1\n{BIG} 2\n", 2),
    ("ovf_neg.txt", f"0 1\n{NEG_BIG} 2\n", 2),
    ("ovf3.txt", f"0 1 1.0\n3 {BIG} 1.0\n", 2),
    ("ovf.mtx", f"%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n{BIG} 1\n", 4),
    ("ovf3.mtx", f"%%MatrixMarket matrix coordinate real general\n3 3 2\n1 2 1\n1 {BIG} 1\n", 4),
    ("ovf_size.mtx", f"%%MatrixMarket matrix coordinate pattern general\n{BIG} {BIG} 1\n1 2\n", 2),
    ("ovf_nnz.mtx", f"%%MatrixMarket matrix coordinate pattern general\n3 3 {BIG}\n1 2\n", 2),
    ("ovf_val.mtx", f"%%MatrixMarket matrix coordinate integer general\n3 3 1\n1 2 {BIG}\n", 3),
    ("ovf.graph", f"{BIG} 1\n2\n1\n", 1),
    ("ovf_w.graph", f"2 1 001\n2 {BIG}\n1 {BIG}\n", 2),
    ("ovf_adj.graph", f"2 1\n{BIG}\n1\n", 2),
    ("ovf.hgr", f"1 {BIG}\n1 2\n", 1),
    ("ovf_pin.hgr", f"1 2\n1 {BIG}\n", 2),
    ("ovf.csv", f"src,dst\n0,1\n{BIG},2\n", 3),
]


@pytest.mark.parametrize("name,text,line", OVERFLOW_CASES, ids=[c[0] for c in OVERFLOW_CASES])
def test_integers_beyond_int64(tmp_path, name, text, line):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(GraphFormatError) as ei:
        read_graph(p)
    e = ei.value
    assert e.path == str(p) and e.line == line, str(e)
    assert "64 bits" in str(e), str(e)


def test_partition_ids_beyond_int64(tmp_path, monkeypatch):
    p = tmp_path / "g.part.2"
    p.write_text(f"0\n{BIG}\n1\n")
    with pytest.raises(PartitionError, match=r"line 2: part id \d+ does not fit in 64 bits"):
        read_partition(p, 3)
    from partplan.io.foreign import read_cagnet_part_sizes
    q = tmp_path / "g.part-sizes"
    q.write_text(f"1 {BIG}\n")
    with pytest.raises(PartitionError, match="beyond 64 bits"):
        read_cagnet_part_sizes(q)
    q.write_text(f"1 {10 ** 12}\n")
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", "1G")
    with pytest.raises(PartitionError, match="memory budget"):
        read_cagnet_part_sizes(q)


# ------------------------------------------------------------------ symmetric .mtx with both triangles
SYM_HEAD = "%%MatrixMarket matrix coordinate {field} {sym}\n3 3 3\n"


@pytest.mark.parametrize("field,sym,body,line", [               # entries are on lines 3, 4, 5
    ("real", "symmetric", "2 1 1.0\n1 2 5.0\n3 1 2\n", 4),          # mirrored entries disagree
    ("real", "symmetric", "2 1 1.0\n1 2 1.0\n3 1 2\n", 4),          # agree: still summed twice
    ("pattern", "symmetric", "2 1\n3 3\n1 2\n", 5),
    ("integer", "skew-symmetric", "2 1 4\n1 2 -4\n3 1 2\n", 4),
    ("real", "symmetric", "1 2 1.0\n3 3 1\n2 1 5.0\n", 5),          # upper first, then lower
])
def test_symmetric_mtx_with_both_triangles(tmp_path, field, sym, body, line):
    p = tmp_path / "both.mtx"
    p.write_text(SYM_HEAD.format(field=field, sym=sym) + body)
    with pytest.raises(GraphFormatError) as ei:
        read_graph(p)
    e = ei.value
    assert e.path == str(p) and e.line == line and e.field == "symmetry", str(e)
    assert "line 3 holds" in str(e) and "one triangle" in str(e)


def test_symmetric_mtx_triangles_in_different_blocks(tmp_path):
    rows = [f"{i + 2} {i + 1}\n" for i in range(2000)]    # lower triangle, many lines
    text = ("%%MatrixMarket matrix coordinate pattern symmetric\n2100 2100 2001\n" + "".join(rows)
            + "5 9\n")                                     # one upper entry at the end: line 2003
    p = tmp_path / "late.mtx"
    p.write_text(text)
    with pytest.raises(GraphFormatError) as ei:
        read_mtx(p, block_bytes=4096)
    assert ei.value.line == 2003 and "(5, 9) is above the diagonal" in str(ei.value)


def test_symmetric_mtx_one_triangle_is_fine(tmp_path):
    A = sp.random(50, 50, density=0.1, random_state=4, format="csr")
    A = (A + A.T).tocsr()
    p = tmp_path / "lower.mtx"
    scipy.io.mmwrite(p, A, symmetry="symmetric")   # scipy writes the lower triangle
    ref = sp.csr_matrix(scipy.io.mmread(p))
    got = read_graph(p).to_scipy()
    assert abs(got - ref).max() == 0 and got.nnz == ref.nnz
    # the upper triangle alone (not what the spec says, but unambiguous) reads the same
    L = sp.tril(A).tocoo()
    upper = "".join(f"{j + 1} {i + 1} {float(v)!r}\n" for i, j, v in zip(L.row, L.col, L.data))
    q = tmp_path / "upper.mtx"
    q.write_text(f"%%MatrixMarket matrix coordinate real symmetric\n50 50 {L.nnz}\n{upper}")
    assert abs(read_graph(q).to_scipy() - ref).max() == 0
    # a 'general' file may list both directions
    r = tmp_path / "general.mtx"
    r.write_text("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 2 1\n2 1 5\n")
    assert read_graph(r).to_scipy().toarray().tolist() == [[0, 1], [5, 0]]


# ------------------------------------------------------------------ .npz errors name file and key
def _npz_csr(path, **over):
    arrs = dict(format=np.array("csr"), shape=np.array((3, 3)), indices=np.array([1, 2]),
                indptr=np.array([0, 1, 2, 2]), data=np.array([1.0, 2.0]))
    arrs.update(over)
    np.savez(path, **arrs)
    return path


NPZ_CASES = [
    ("index_out_of_range", dict(indices=np.array([1, 7])), "indices"),
    ("float_indices", dict(indices=np.array([1.0, 2.5])), "indices"),
    ("object_indices", dict(indices=np.array([1, "x"], dtype=object)), "indices"),
    ("short_indptr", dict(indptr=np.array([0, 1, 2])), "indptr"),
    ("bad_indptr", dict(indptr=np.array([0, 2, 1, 2])), "indptr"),
    ("string_data", dict(data=np.array(["a", "b"])), "data"),
    ("nan_data", dict(data=np.array([1.0, np.nan])), "data"),
    ("inf_data", dict(data=np.array([np.inf, 1.0])), "data"),
    ("shape_2d", dict(shape=np.array([[3, 3]])), "shape"),
    ("shape_rect", dict(shape=np.array([3, 4])), "shape"),
    ("shape_negative", dict(shape=np.array([-3, -3])), "shape"),
    ("shape_float", dict(shape=np.array([3.0, 3.0])), "shape"),
    ("complex_data", dict(data=np.array([1j, 2.0])), "data"),
]


@pytest.mark.parametrize("case,over,key", NPZ_CASES, ids=[c[0] for c in NPZ_CASES])
def test_npz_errors_name_file_and_key(tmp_path, case, over, key):
    p = _npz_csr(tmp_path / f"{case}.npz", **over)
    with pytest.raises(GraphFormatError) as ei:
        read_graph(p)
    e = ei.value
    assert e.path == str(p) and e.field == key, str(e)
    assert str(p) in str(e) and repr(key) in str(e)


def _npz_raw(path, **arrays):
    """An .npz written member by member (np.savez would refuse nothing, but save_npz checks)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for key, a in arrays.items():
            b = io.BytesIO()
            np.save(b, a, allow_pickle=False)
            z.writestr(key + ".npy", b.getvalue())
    return path


BSR_CASES = [   # a 4 x 4 matrix of 2 x 2 blocks; scipy's own check lets a decreasing indptr through to a crash
    ("decreasing_indptr", dict(indptr=np.array([0, 2, 1])), "indptr"),
    ("indptr_past_the_blocks", dict(indptr=np.array([0, 1, 3])), "indptr"),
    ("short_indptr", dict(indptr=np.array([0, 2])), "indptr"),
    ("block_column_out_of_range", dict(indices=np.array([0, 2])), "indices"),
    ("negative_block_column", dict(indices=np.array([0, -1])), "indices"),
    ("blocks_not_dividing_n", dict(data=np.ones((2, 3, 3))), "data"),
    ("two_dimensional_data", dict(data=np.ones((2, 4))), "data"),
]


@pytest.mark.parametrize("case,over,key", BSR_CASES, ids=[c[0] for c in BSR_CASES])
def test_npz_bsr_arrays_are_checked_before_scipy_sees_them(tmp_path, case, over, key):
    """A bsr .npz with a decreasing indptr ended in a segfault (scipy's csr_sort_indices)."""
    arrays = dict(format=np.array("bsr"), shape=np.array([4, 4]), data=np.ones((2, 2, 2)),
                  indices=np.array([0, 1]), indptr=np.array([0, 1, 2]))
    good = read_graph(_npz_raw(tmp_path / "good.npz", **arrays))
    assert good.nnz == 8 and good.n == 4
    p = _npz_raw(tmp_path / f"{case}.npz", **{**arrays, **over})
    with pytest.raises(GraphFormatError) as ei:
        read_graph(p)
    assert ei.value.path == str(p) and ei.value.field == key, str(ei.value)


@pytest.mark.parametrize("far", [2 ** 62, -2 ** 63, 4, -4])
def test_npz_dia_diagonals_outside_the_matrix_hold_nothing(tmp_path, far):
    """scipy reads offsets as 32-bit ints: 2^62 became the main diagonal (an error said "duplicate
    values", or -2^63 read as 0 silently). A diagonal outside the matrix holds nothing, as scipy
    writes it (save_npz of such a dia matrix): the oracle is scipy's own matrix without it."""
    data = np.arange(1.0, 9.0).reshape(2, 4)
    p = _npz_raw(tmp_path / "dia.npz", format=np.array("dia"), shape=np.array([4, 4]), data=data,
                 offsets=np.array([1, far]))
    want = sp.dia_matrix((data[:1], [1]), shape=(4, 4)).tocsr()
    assert abs(read_graph(p).to_scipy() - want).sum() == 0


@pytest.mark.parametrize("fmt", ["bsr", "dia"])
def test_npz_bsr_and_dia_values_count_against_the_budget(tmp_path, budget_1g, fmt):
    """The budget counted the first axis of 'data' (bsr: blocks, dia: diagonals), so one 12000 x
    12000 block in 140 kB inflated to gigabytes before anything was refused."""
    n = 12000
    if fmt == "bsr":
        arrays = dict(data=np.ones((1, n, n), np.bool_), indices=np.array([0]), indptr=np.array([0, 1]))
    else:
        arrays = dict(data=np.ones((9000, n), np.bool_), offsets=np.arange(9000))
    p = _npz_raw(tmp_path / f"{fmt}.npz", format=np.array(fmt), shape=np.array([n, n]), **arrays)
    e = _refused_without_allocating(read_graph, p, SizeLimitError)
    assert e.path == str(p) and e.field == "data", str(e)


def test_npz_corrupt_member_names_file_and_key(tmp_path):
    A = sp.random(400, 400, density=0.05, random_state=0, format="csr")
    for compressed in (True, False):
        p = tmp_path / f"c{int(compressed)}.npz"
        sp.save_npz(p, A, compressed=compressed)
        assert read_graph(p).nnz == A.nnz
        with zipfile.ZipFile(p) as z:
            info = z.getinfo("indices.npy")
            start = info.header_offset + 30 + len(info.filename) + len(info.extra)
        b = bytearray(p.read_bytes())
        mid = start + info.compress_size // 2
        for i in range(mid, mid + 8):
            b[i] ^= 0xFF
        p.write_bytes(bytes(b))
        with pytest.raises(GraphFormatError) as ei:
            read_graph(p)
        assert ei.value.path == str(p) and ei.value.field == "indices", str(ei.value)


def test_npz_scipy_coo_out_of_range_names_file(tmp_path):
    p = _npz_coo(tmp_path / "coo.npz", (3, 3), col=np.array([1, 3]))
    with pytest.raises(GraphFormatError) as ei:
        read_graph(p)
    assert ei.value.path == str(p) and ei.value.field == "col", str(ei.value)


# ------------------------------------------------------------------ NaN / inf / negative
NUMBER_CASES = [
    ("nan.txt", "0 1 1.0\n1 2 nan\n", 2, "weight"),
    ("inf.txt", "0 1 inf\n", 1, "weight"),
    ("neginf.txt", "0 1 -inf\n", 1, "weight"),
    ("negw.txt", "0 1 -0.5\n", 1, "weight"),
    ("nan.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 nan\n", 3, "value"),
    ("inf.mtx", "%%MatrixMarket matrix coordinate real symmetric\n2 2 1\n2 1 -inf\n", 3, "value"),
    ("overflow.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 1e400\n", 3, "value"),
    ("negsize.mtx", "%%MatrixMarket matrix coordinate real general\n-2 -2 1\n1 2 1\n", 2, "M"),
    ("negnnz.mtx", "%%MatrixMarket matrix coordinate real general\n2 2 -1\n", 2, "NNZ"),
    ("nan.csv", "src,dst,weight\n0,1,1\n1,2,nan\n", 3, "weight"),
]


@pytest.mark.parametrize("name,text,line,field", NUMBER_CASES, ids=[c[0] for c in NUMBER_CASES])
def test_nan_inf_negative_values(tmp_path, name, text, line, field):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(GraphFormatError) as ei:
        read_graph(p)
    e = ei.value
    assert e.path == str(p) and e.line == line and e.field == field, str(e)


@pytest.mark.parametrize("name,text,match", [
    ("neg.graph", "-2 1\n2\n1\n", "negative n or m"),
    ("negw.graph", "2 1 001\n2 -3\n1 -3\n", "edge weight -3; METIS edge weights are positive"),
    ("zerow.graph", "2 1 001\n2 0\n1 0\n", "edge weight 0; METIS edge weights are positive"),
    ("negvw.graph", "2 1 010\n-1 2\n1 1\n", "negative vertex weight"),
    ("neg.hgr", "1 -2\n1 2\n", "negative m or n"),
    ("negw.hgr", "1 2 1\n-4 1 2\n", "negative net weight"),
])
def test_negative_sizes_and_weights_metis_hgr(tmp_path, name, text, match):
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(GraphFormatError, match=match) as ei:
        read_hypergraph(p) if name.endswith(".hgr") else read_graph(p)
    assert ei.value.path == str(p) and ei.value.line is not None


def test_partition_file_bad_values(tmp_path):
    p = tmp_path / "g.part.2"
    p.write_text("0\n-1\n1\n")
    with pytest.raises(PartitionError, match="line 2: negative part id -1"):
        read_partition(p, 3)
    q = tmp_path / "g.npy"
    np.save(q, np.array([0, np.nan, 1]))
    with pytest.raises(PartitionError, match="g.npy"):
        read_partition(q, 3)


# ------------------------------------------------------------------ the CLI: exit 2, one line
# Each command line runs in a fresh interpreter (the cli_batch fixture of conftest.py: one
# process for all of a test's cases), so a MemoryError or a crash cannot pass unseen; the
# console script's own exit path is tested in test_cli_analyze.py.
def _bad_files(tmp_path):
    files = {}
    text, _, _ = TEXTS["g.mtx.gz"]
    p = tmp_path / "corrupt.mtx.gz"
    p.write_bytes(_corrupt_deflate(_gz(text)))
    files["corrupt-gzip"] = p
    p = tmp_path / "huge.mtx"
    p.write_text("%%MatrixMarket matrix coordinate pattern general\n10000000000 10000000000 2\n1 2\n2 1\n")
    files["n=1e10"] = p
    p = tmp_path / "ovf.txt"
    p.write_text(f"0 1\n1 {BIG}\n")
    files["int-overflow"] = p
    p = tmp_path / "both.mtx"
    p.write_text("%%MatrixMarket matrix coordinate real symmetric\n3 3 2\n2 1 1\n1 2 7\n")
    files["sym-both-triangles"] = p
    files["npz-bad-index"] = _npz_csr(tmp_path / "bad.npz", indices=np.array([1, 9]))
    return files


@pytest.mark.slow
@pytest.mark.dist
def test_cli_bad_inputs_exit_2_one_line(tmp_path, cli_batch):
    files = _bad_files(tmp_path)
    runs = cli_batch([["analyze", f, "-k", "2", "--method", "block"] for f in files.values()],
                     env={"PARTPLAN_MAX_BYTES": "2G"})
    for (label, f), (rc, out, err) in zip(files.items(), runs):
        assert rc == 2, (label, rc, err[-2000:])
        assert "Traceback" not in err and "Traceback" not in out, label
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("partplan: error: "), (label, err)
        assert f.name in lines[0], (label, lines[0])


@pytest.mark.slow
@pytest.mark.dist
def test_cli_convert_and_k_above_n(tmp_path, cli_batch):
    files = _bad_files(tmp_path)
    out = tmp_path / "out.graph"
    small = tmp_path / "small.mtx"
    small.write_text("%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n2 3\n")
    (rc, _, err), (rc2, _, err2) = cli_batch([["convert", files["n=1e10"], out],
                                              ["analyze", small, "-k", "100", "--method", "block"]],
                                             env={"PARTPLAN_MAX_BYTES": "2G"})
    assert rc == 2 and "Traceback" not in err, err[-2000:]
    assert err.count("\n") == 1 and "huge.mtx" in err and "memory budget" in err
    assert not out.exists()
    assert rc2 == 2 and "Traceback" not in err2
    assert err2.count("\n") == 1 and "k=100" in err2


# ------------------------------------------------------------------ found by fuzzing the readers
def test_gt_degree_beyond_64_bits_or_file(tmp_path):
    head = b"\xe2\x9b\xbe gt" + bytes([1, 0]) + (0).to_bytes(8, "little") + b"\x01" + (2).to_bytes(8, "little")
    for deg in (2 ** 64 - 1, 2 ** 40):
        p = tmp_path / "deg.gt"
        p.write_bytes(head + deg.to_bytes(8, "little") + b"\x01" * 16)
        with pytest.raises(GraphFormatError, match=f"out-degree {deg}") as ei:
            read_graph(p)
        assert ei.value.path == str(p) and ei.value.field == "degree"


def _set_zip_method(raw: bytes, member: str, method: int) -> bytes:
    """Set the compression method of ``member`` in its local header
    (``PK\\3\\4``: method at +8, name length at +26, name at +30) and in the
    central directory (``PK\\1\\2``: +10, +28, +46)."""
    b = bytearray(raw)
    for sig, m_off, n_off, name_off in ((b"PK\x03\x04", 8, 26, 30), (b"PK\x01\x02", 10, 28, 46)):
        at = b.find(sig)
        while at >= 0:
            nlen = int.from_bytes(b[at + n_off:at + n_off + 2], "little")
            if bytes(b[at + name_off:at + name_off + nlen]) == member.encode():
                b[at + m_off:at + m_off + 2] = method.to_bytes(2, "little")
            at = b.find(sig, at + 4)
    return bytes(b)


def test_npz_unsupported_zip_features_name_the_file(tmp_path):
    p = _npz_csr(tmp_path / "ok.npz")
    q = tmp_path / "method99.npz"
    q.write_bytes(_set_zip_method(p.read_bytes(), "data.npy", 99))   # zipfile: NotImplementedError
    with zipfile.ZipFile(q) as z, pytest.raises(NotImplementedError):
        z.read("data.npy")
    with pytest.raises(GraphFormatError) as ei:
        read_graph(q)
    assert ei.value.path == str(q) and ei.value.field == "data", str(ei.value)


def test_csv_non_utf8_header(tmp_path):
    p = tmp_path / "t.csv"
    p.write_bytes(b"\xc4src,dst\n0,1\n")
    with pytest.raises(GraphFormatError) as ei:
        read_graph(p)
    assert ei.value.path == str(p)


def test_corrupt_gzip_closes_the_file(tmp_path):
    import warnings
    text, _, _ = TEXTS["g.txt.gz"]
    p = tmp_path / "c.txt.gz"
    p.write_bytes(_corrupt_deflate(_gz(text)))
    import gc
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always", ResourceWarning)
        with pytest.raises(GraphFormatError):
            read_graph(p)
        gc.collect()
    assert not [x for x in w if issubclass(x.category, ResourceWarning)], [str(x.message) for x in w]


def _lying_npy(path, claimed: int, actual: int = 3):
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<i8", "fortran_order": False, "shape": (claimed,)})
    path.write_bytes(buf.getvalue() + np.arange(actual, dtype=np.int64).tobytes())
    return path


def test_partition_npy_header_claims_huge_array(tmp_path):
    p = _lying_npy(tmp_path / "lie.npy", 10 ** 11)
    e = _refused_without_allocating(lambda q: read_partition(q, 3), p, PartitionError)
    assert str(p) in str(e) and "100000000000" in str(e)
    ok = _lying_npy(tmp_path / "ok.npy", 3)
    assert read_partition(ok, 3).tolist() == [0, 1, 2]
    with pytest.raises(PartitionError, match="has 3 part ids but the graph has 4"):
        read_partition(ok, 4)


def test_dgl_node_map_npy_header_claims_huge_array(tmp_path):
    import json

    from partplan.io.foreign import read_dgl_partition
    cfg = {"graph_name": "t", "num_parts": 2, "num_nodes": 3, "node_map": "node_map.npy"}
    (tmp_path / "t.json").write_text(json.dumps(cfg))
    _lying_npy(tmp_path / "node_map.npy", 10 ** 11)
    e = _refused_without_allocating(lambda q: read_dgl_partition(q, 3), tmp_path, PartitionError)
    assert "node_map" in str(e) and "100000000000" in str(e)
    # ranges claiming 10^12 nodes: refused before np.repeat
    cfg["node_map"] = {"_N": [[0, 10 ** 12], [10 ** 12, 2 * 10 ** 12]]}
    cfg["num_nodes"] = None
    (tmp_path / "t.json").write_text(json.dumps(cfg))
    e = _refused_without_allocating(lambda q: read_dgl_partition(q, ids="dgl"), tmp_path, PartitionError)
    assert "memory budget" in str(e)
    e = _refused_without_allocating(lambda q: read_dgl_partition(q, 3, ids="dgl"), tmp_path, PartitionError)
    assert "cover 2000000000000 nodes but the graph has 3" in str(e)


@pytest.mark.parametrize("name, text, needle", [
    ("w.graph", "2 1 1\n2 9007199254740993\n1 9007199254740993\n", "line 2"),
    ("w.mtx", "%%MatrixMarket matrix coordinate integer general\n2 2 1\n1 2 9007199254740993\n", "line 3"),
])
def test_integer_weights_float64_cannot_hold_exactly_are_refused(tmp_path, name, text, needle):
    """Edge weights are float64 (graph.data): an integer weight of 2^53 + 1 would be read as 2^53 and
    written back so, exit 0; it is refused, naming the line."""
    from partplan.io import read_graph

    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(GraphFormatError) as exc:
        read_graph(path)
    assert needle in str(exc.value) and "2^53" in str(exc.value)


@pytest.mark.parametrize("kind", ["edge list", "csv"])
def test_a_gzip_that_inflates_past_the_budget_is_refused_as_it_is_read(tmp_path, monkeypatch, kind):
    """A 0.5 MB gzip that inflates to 134 M edges was read whole (3.6 GB) before the budget check
    at the end refused it, or died in a MemoryError traceback; the budget is checked a block at a
    time, so the read stops after a few blocks."""
    import gzip

    import pyarrow as pa

    from partplan.io.edgelist import read_edgelist
    from partplan.io.table import read_edge_table
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", "16M")
    body = (b"src,dst\n" + b"0,1\n" * 8_000_000) if kind == "csv" else b"0 1\n" * 8_000_000   # 1.5 GB as edges
    p = tmp_path / ("bomb.csv.gz" if kind == "csv" else "bomb.txt.gz")
    p.write_bytes(gzip.compress(body, 6))
    tracemalloc.start()
    pool = pa.default_memory_pool()
    before = pool.max_memory() or 0
    try:
        with pytest.raises(SizeLimitError, match="read so far") as ei:
            if kind == "csv":
                read_edge_table(p, format="csv")
            else:
                read_edgelist(p, block_bytes=1 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert ei.value.path == str(p)
    assert peak < 64 << 20 and (pool.max_memory() or 0) - before < 96 << 20, (peak, pool.max_memory())


def test_a_csv_column_whose_type_shows_late_is_read_as_that_type(tmp_path):
    """Column types come from the whole text (pyarrow's read_csv), not its first block: a 0.5
    weight after 300,000 integer weights is a weight, not a conversion error."""
    from partplan.io.table import read_edge_table
    rows = 300_000
    p = tmp_path / "late.csv"
    body = "src,dst,weight\n" + "".join(f"{i % 1000},{(i * 7) % 1000},1\n" for i in range(rows)) + "3,4,0.5\n"
    p.write_text(body)
    g = read_edge_table(p)
    assert g.data is not None and 0.5 in set(np.unique(g.data).tolist())
