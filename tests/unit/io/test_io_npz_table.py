"""scipy .npz and pyarrow edge tables (Parquet / Arrow / Feather / CSV):
round trips against scipy matrices / pyarrow-written files, and the error
paths (bad / missing arrays, missing column, nulls, non-integer ids, bad
weights) naming the file and the array or column."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from partplan import Graph
from partplan.errors import BackendUnavailableError, GraphFormatError
from partplan.io import read_graph, write_graph
from partplan.io.table import read_edge_table


# ------------------------------------------------------------------ npz
def test_npz_reads_scipy_files_of_every_sparse_format(tmp_path):
    A = sp.random(30, 30, density=0.2, random_state=1, format="csr")
    A.data -= 0.5
    for fmt in ("csr", "csc", "coo"):
        p = tmp_path / f"a_{fmt}.npz"
        sp.save_npz(p, A.asformat(fmt))
        g = read_graph(p)
        assert abs(g.to_scipy() - A).max() == 0


def test_npz_round_trip_weighted_and_pattern(tmp_path):
    A = sp.random(40, 40, density=0.1, random_state=2, format="csr")
    g = Graph.from_scipy(A)
    p = write_graph(g, tmp_path / "w.npz")
    assert abs(sp.load_npz(p) - A).max() == 0  # scipy reads our file
    h = read_graph(p)
    assert h.fingerprint == g.fingerprint and np.array_equal(h.data, g.data)
    pat = Graph.from_scipy(A, pattern=True)
    h = read_graph(write_graph(pat, tmp_path / "p.npz"))
    assert h.data is None and h.fingerprint == pat.fingerprint


def test_npz_errors(tmp_path):
    p = tmp_path / "junk.npz"
    p.write_bytes(b"not a zip at all")
    with pytest.raises(GraphFormatError, match="not a scipy .npz") as ei:
        read_graph(p)
    assert ei.value.path == str(p)
    q = tmp_path / "plain.npz"
    np.savez(q, a=np.arange(3))
    with pytest.raises(GraphFormatError, match="missing array 'format'") as ei:
        read_graph(q)
    assert ei.value.field == "format"
    r = tmp_path / "noidx.npz"
    np.savez(r, format=np.array("csr"), indptr=np.array([0, 1]), data=np.array([1.0]), shape=np.array([1, 1]))
    with pytest.raises(GraphFormatError, match="missing array 'indices'"):
        read_graph(r)
    s = tmp_path / "rect.npz"
    sp.save_npz(s, sp.random(3, 4, density=0.5, format="csr"))
    with pytest.raises(GraphFormatError, match="square"):
        read_graph(s)
    t = tmp_path / "nan.npz"
    sp.save_npz(t, sp.csr_matrix(np.array([[0, np.nan], [1.0, 0]])))
    with pytest.raises(GraphFormatError, match="finite"):
        read_graph(t)
    u = tmp_path / "bad.npz"
    np.savez(u, format=np.array("csr"), indptr=np.array([0, 5]), indices=np.array([0]), data=np.array([1.0]),
             shape=np.array([1, 1]))
    with pytest.raises(GraphFormatError, match="'indptr' must start at 0, not decrease and end at") as ei:
        read_graph(u)
    assert ei.value.path == str(u) and ei.value.field == "indptr"
    with pytest.raises(GraphFormatError, match="not found"):
        read_graph(tmp_path / "missing.npz")


# ---------------------------------------------------------------- tables
def edges_of(g):
    ids = g.ids if g.ids is not None else np.arange(g.n)
    A = g.to_scipy().tocoo()
    return {(int(ids[r]), int(ids[c])): float(v) for r, c, v in zip(A.row, A.col, A.data)}


SRC = np.array([10, 20, 30, 10, 2 ** 40], dtype=np.int64)
DST = np.array([20, 30, 10, 30, 10], dtype=np.int64)
W = np.array([0.5, 1.5, 2.0, 0.25, 3.0])
EXPECTED = {(int(s), int(d)): float(w) for s, d, w in zip(SRC, DST, W)}


@pytest.mark.parametrize("ext", ["parquet", "arrow", "feather", "csv"])
def test_tables_written_by_pyarrow(tmp_path, ext):
    t = pa.table({"src": SRC, "dst": DST, "weight": W, "other": np.arange(5)})
    p = tmp_path / f"e.{ext}"
    if ext == "parquet":
        pq.write_table(t, p)
    elif ext == "csv":
        pacsv.write_csv(t, p)
    else:
        feather.write_feather(t, p)
    g = read_graph(p)
    assert g.ids.tolist() == sorted(set(SRC.tolist()) | set(DST.tolist()))
    assert edges_of(g) == EXPECTED
    assert read_graph(p, weighted=False).data is None


def test_arrow_ipc_stream_and_custom_columns(tmp_path):
    t = pa.table({"from": pa.array(SRC.astype(np.uint64), pa.uint64()), "to": DST.astype(np.int32)})
    p = tmp_path / "s.arrow"
    with pa.OSFile(str(p), "wb") as sink, pa.ipc.new_stream(sink, t.schema) as w:
        w.write_table(t)
    g = read_graph(p, src="from", dst="to")
    assert set(edges_of(g)) == set(EXPECTED)


@pytest.mark.parametrize("ext", ["parquet", "arrow", "feather", "csv"])
def test_table_round_trip(tmp_path, ext):
    g = Graph.from_edges(SRC, DST, W, relabel=True)
    h = read_graph(write_graph(g, tmp_path / f"o.{ext}"))
    assert edges_of(h) == EXPECTED and h.fingerprint == g.fingerprint


def _parquet(tmp_path, **cols):
    p = tmp_path / "bad.parquet"
    pq.write_table(pa.table(cols), p)
    return p


def test_table_errors_name_the_column(tmp_path):
    p = _parquet(tmp_path, a=SRC, dst=DST)
    with pytest.raises(GraphFormatError, match=r"missing column 'src' \(the table has \['a', 'dst'\]\); name the "
                       r"edge columns 'src' and 'dst' \(from Python: read_graph\(path, src=NAME") as ei:
        read_graph(p)     # the CLI has no column options: the advice works for both
    assert ei.value.field == "src" and ei.value.path == str(p)
    p = _parquet(tmp_path, src=pa.array([1, None, 3]), dst=[1, 2, 3])
    with pytest.raises(GraphFormatError, match="null vertex id at row 1") as ei:
        read_graph(p)
    assert ei.value.field == "src"
    p = _parquet(tmp_path, src=[1.0, 2.5], dst=[1, 2])
    with pytest.raises(GraphFormatError, match="non-integer vertex id 2.5 at row 1"):
        read_graph(p)
    p = _parquet(tmp_path, src=["a", "b"], dst=[1, 2])
    with pytest.raises(GraphFormatError, match="must be integers.*string") as ei:
        read_graph(p)
    assert ei.value.field == "src"
    p = _parquet(tmp_path, src=pa.array([1, 2 ** 63 + 5], pa.uint64()), dst=[1, 2])
    with pytest.raises(GraphFormatError, match="does not fit in int64"):
        read_graph(p)
    p = _parquet(tmp_path, src=[1, 2], dst=[-1, 2])
    with pytest.raises(GraphFormatError, match="negative vertex id -1 at row 0") as ei:
        read_graph(p)
    assert ei.value.field == "dst"
    p = _parquet(tmp_path, src=[1, 2], dst=[1, 2], weight=[1.0, -2.0])
    with pytest.raises(GraphFormatError, match="negative weight") as ei:
        read_graph(p)
    assert ei.value.field == "weight"
    p = _parquet(tmp_path, src=[1, 2], dst=[1, 2], weight=[1.0, float("nan")])
    with pytest.raises(GraphFormatError, match="non-finite weight"):
        read_graph(p)
    p = _parquet(tmp_path, src=[1, 2], dst=[1, 2])
    with pytest.raises(GraphFormatError, match="weighted=True"):
        read_graph(p, weighted=True)
    p = _parquet(tmp_path, src=pa.array([], pa.int64()), dst=pa.array([], pa.int64()))
    with pytest.raises(GraphFormatError, match="no rows"):
        read_graph(p)


def test_csv_error_gives_line(tmp_path):
    p = tmp_path / "e.csv"
    p.write_text("src,dst\n1,2\n3,\n")
    with pytest.raises(GraphFormatError) as ei:
        read_graph(p)
    assert ei.value.line == 3 and ei.value.field == "dst"
    for text, line, found in (("src,dst\n1,2\n1,2,5\n", 3, 3), ("# c\nsrc,dst\n1,2\n\n#c\n3,4\n", 5, 1)):
        p.write_text(text)                      # a row of other width: its line (comments before the header count)
        with pytest.raises(GraphFormatError, match=f"expected 2 columns, found {found}") as ei:
            read_graph(p)
        assert ei.value.line == line, str(ei.value)
    q = tmp_path / "corrupt.parquet"
    q.write_bytes(b"PAR1 garbage")
    with pytest.raises(GraphFormatError, match="cannot read parquet"):
        read_graph(q)


def test_csv_row_of_other_width_and_not_utf8_names_its_line(tmp_path, capfd):
    """pyarrow cannot hand a row that is not UTF-8 to the bad-row handler (it printed "Exception
    ignored" and a traceback); the line is found on the raw bytes, its bytes escaped."""
    p = tmp_path / "e.csv"
    p.write_bytes(b"# c\nsrc,dst\n0,1\n\n\xf9,2,3\n")
    with pytest.raises(GraphFormatError, match=r"expected 2 columns, found 3: '\\xf9,2,3'") as ei:
        read_graph(p)
    assert ei.value.line == 5
    assert capfd.readouterr().err == ""


def test_table_unknown_option(tmp_path):
    p = _parquet(tmp_path, src=[1], dst=[2])
    with pytest.raises(BackendUnavailableError, match="'delimiterx'"):
        read_graph(p, delimiterx=";")
    assert read_edge_table(p).n == 2


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_integer_weights_float64_would_round_are_refused(tmp_path, dtype):
    """Weights are float64: an npz's or a table's integer above 2^53 would be rounded (2^60 + 1 read
    as 2^60) without a word; it is refused as the METIS reader refuses it, and 2^53 reads exactly."""
    ok = 2 ** 53
    for bad in (2 ** 60 + 1, 2 ** 53 + 1):
        A = sp.csr_matrix((np.array([bad, 5], dtype), (np.array([0, 1]), np.array([1, 0]))), shape=(2, 2))
        sp.save_npz(tmp_path / "w.npz", A)
        with pytest.raises(GraphFormatError, match=r"2\^53") as ei:
            read_graph(tmp_path / "w.npz")
        assert ei.value.field == "data" and str(bad) in str(ei.value)
        p = _parquet(tmp_path, src=[1, 2], dst=[2, 3], weight=pa.array([3, bad], pa.from_numpy_dtype(dtype)))
        with pytest.raises(GraphFormatError, match=r"2\^53") as ei:
            read_graph(p)
        assert ei.value.field == "weight" and "row 1" in str(ei.value)
    A = sp.csr_matrix((np.array([ok, 5], dtype), (np.array([0, 1]), np.array([1, 0]))), shape=(2, 2))
    sp.save_npz(tmp_path / "w.npz", A)
    assert int(read_graph(tmp_path / "w.npz").data.max()) == ok
    if dtype == np.int64:
        A.data[0] = -(2 ** 60)
        sp.save_npz(tmp_path / "w.npz", A)
        with pytest.raises(GraphFormatError, match=r"2\^53"):
            read_graph(tmp_path / "w.npz")
