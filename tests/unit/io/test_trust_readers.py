"""Readers check before they touch.

Every file a reader opens must be a regular file, checked on the descriptor
of a non-blocking open (a FIFO never blocks a reader); an Arrow shard's
footer and message header are read before pyarrow builds arrays (compressed
buffers refused, declared lengths validated against the buffers); every size
a partition file declares is compared with n before it is parsed or
decompressed; ``.npy`` headers of every version numpy writes are read.

Oracles: numpy / pyarrow write the files (their own formats), the expected
counts are the test's own; a hang is turned into a failure by an alarm.
"""
from __future__ import annotations

import contextlib
import gzip
import io
import os
import signal
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import ipc

from partplan import Graph, PlanError
from partplan.errors import GraphFormatError, PartitionError
from partplan.io import read_graph, write_graph
from partplan.io.arrowcheck import IpcProblem, ipc_batches
from partplan.io.partfile import read_partition, text_limit
from partplan.plan import build_plan, load_plan, write_plan
from proctools import resign_shard


@contextlib.contextmanager
def no_hang(seconds=20):
    """Fail (instead of hanging the suite) when the block blocks."""
    def boom(*_):
        raise TimeoutError(f"blocked for {seconds} s")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _grid(r=5, c=5) -> Graph:
    idx = np.arange(r * c).reshape(r, c)
    src = np.concatenate([idx[:, :-1].ravel(), idx[:-1, :].ravel()])
    dst = np.concatenate([idx[:, 1:].ravel(), idx[1:, :].ravel()])
    return Graph.from_edges(src, dst, n=r * c, symmetrize=True, name="grid")


@pytest.fixture
def plan(tmp_path):
    g = _grid()
    return g, write_plan(build_plan(g, np.arange(g.n) * 2 // g.n, 2), tmp_path / "g.plan")


def _rewrite(f: Path, compression=None) -> bytes:
    """The shard ``f`` written again by pyarrow (same schema and batch), optionally compressed."""
    with pa.memory_map(str(f)) as src:
        r = ipc.open_file(src)
        batch, schema = r.get_batch(0), r.schema
        sink = io.BytesIO()
        with ipc.new_file(sink, schema, options=ipc.IpcWriteOptions(compression=compression)) as w:
            w.write_batch(batch)
    return sink.getvalue()


# ----------------------------------------------------------------------------- non-regular files
def test_fifo_shard_is_refused_without_blocking(plan):
    _, path = plan
    shard = path / "rank-00001.arrow"
    shard.unlink()
    os.mkfifo(shard)
    with no_hang(), pytest.raises(PlanError, match="rank-00001.arrow.*FIFO"):
        load_plan(path, verify=False)


def test_fifo_graph_and_partition_are_refused_without_blocking(tmp_path):
    g = tmp_path / "g.mtx"
    os.mkfifo(g)
    with no_hang(), pytest.raises(GraphFormatError, match="FIFO"):
        read_graph(g)
    p = tmp_path / "p.part.2"
    os.mkfifo(p)
    with no_hang(), pytest.raises(PartitionError, match="p.part.2.*FIFO"):
        read_partition(p, 4)
    d = tmp_path / "d.npy"
    d.mkdir()
    with pytest.raises(PartitionError, match="directory"):
        read_partition(d, 4)


# ----------------------------------------------------------------------------- Arrow shards
def test_compressed_shard_is_refused_before_decompressing(plan):
    g, path = plan
    resign_shard(path, 0, _rewrite(path / "rank-00000.arrow", "zstd"))
    with pytest.raises(PlanError, match="rank-00000.arrow: its buffers are compressed"):
        load_plan(path, graph=g)


def test_array_longer_than_its_buffer_is_refused_not_a_crash(plan):
    """The values array of one column declares far more entries than its buffer holds
    (the header re-signed): validated before any value is read."""
    g, path = plan
    f = path / "rank-00000.arrow"
    data = bytearray(_rewrite(f))
    with pa.memory_map(str(f)) as src:
        b = ipc.open_file(src).get_batch(0)
        count = len(b.column(0).values)
    node = struct.pack("<qq", count, 0)           # FieldNode(length, null_count) of the first values array
    at = bytes(data).find(node)
    assert at > 0
    data[at:at + 16] = struct.pack("<qq", 1 << 40, 0)
    resign_shard(path, 0, bytes(data))
    with pytest.raises(PlanError, match="rank-00000.arrow"):
        load_plan(path, graph=g)


def test_ipc_batches_reads_what_pyarrow_wrote():
    t = pa.table({"a": np.arange(1000) % 7, "b": np.zeros(1000)})
    for comp in (None, "lz4", "zstd"):
        sink = io.BytesIO()
        with ipc.new_file(sink, t.schema, options=ipc.IpcWriteOptions(compression=comp)) as w:
            w.write_table(t, max_chunksize=300)
        got = ipc_batches(sink.getvalue())
        assert [b.rows for b in got] == [300, 300, 300, 100]
        assert all(b.compressed == (comp is not None) for b in got)
        assert sum(b.decompressed_bytes for b in got) >= 1000 * 16     # two 8-byte columns
    with pytest.raises(IpcProblem):
        ipc_batches(b"ARROW1\0\0" + b"\0" * 20 + b"ARROW1")


# ----------------------------------------------------------------------------- partition files
def test_npy_of_every_version_numpy_writes(tmp_path):
    part = np.array([0, 1, 1, 0, 2])
    for v in ((1, 0), (2, 0), (3, 0)):
        p = tmp_path / f"p{v[0]}.npy"
        with open(p, "wb") as fh:
            np.lib.format.write_array(fh, part, version=v)
        assert read_partition(p, 5).tolist() == part.tolist()


def test_npy_header_claiming_more_than_the_file_is_refused(tmp_path):
    p = tmp_path / "p.npy"
    np.save(p, np.zeros(4, dtype=np.int64))
    raw = p.read_bytes().replace(b"(4,)", b"(40000000000,)".ljust(4))
    p.write_bytes(raw)
    with pytest.raises(PartitionError, match="p.npy"):
        read_partition(p, 4)


def test_parquet_row_count_checked_before_reading(tmp_path, monkeypatch):
    p = tmp_path / "p.parquet"
    pq.write_table(pa.table({"part": np.zeros(11, dtype=np.int64)}), p)

    def no_read(*a, **kw):
        raise AssertionError("the data was read before the footer's row count was checked")
    monkeypatch.setattr(pq.ParquetFile, "read", no_read)
    with pytest.raises(PartitionError, match="has 11 part ids .*num_rows.* 10 vertices"):
        read_partition(p, 10)


def _lying_parquet(path: Path, n: int, name: str, claim: int = 134_217_727) -> None:
    """A zstd Parquet file of ``n`` zero int64s in one page whose header claims
    ``claim`` uncompressed bytes (a 4-byte varint, so no offset moves); its footer stays honest."""
    from partplan.io.parquetcheck import _Compact
    b = io.BytesIO()
    pq.write_table(pa.table({name: np.zeros(n, dtype=np.int64)}), b, compression="zstd", use_dictionary=False,
                   data_page_size=1 << 24, max_rows_per_page=n, write_batch_size=n)
    buf = bytearray(b.getvalue())
    c = pq.ParquetFile(io.BytesIO(bytes(buf))).metadata.row_group(0).column(0)
    r = _Compact(buf, c.data_page_offset, len(buf))
    assert r.byte() == 0x15 and r.varint() == 0 and r.byte() == 0x15   # field 1 (type: data page), field 2
    at = r.pos
    assert r.varint() >> 1 >= 8 * n and r.pos - at == 4
    z = claim << 1
    buf[at:at + 4] = bytes([z & 0x7F | 0x80, (z >> 7) & 0x7F | 0x80, (z >> 14) & 0x7F | 0x80, (z >> 21) & 0x7F])
    path.write_bytes(bytes(buf))


@pytest.mark.parametrize("codec", ["none", "snappy", "zstd"])
def test_parquet_page_headers_read_as_written(tmp_path, codec):
    from partplan.io.parquetcheck import declared_page_bytes
    n = 50_000
    schema = pa.schema([pa.field("a", pa.int64(), nullable=False), pa.field("b", pa.int32(), nullable=False)])
    t = pa.table({"a": np.arange(n), "b": np.arange(n, dtype=np.int32) % 7}, schema=schema)
    p = tmp_path / "t.parquet"
    pq.write_table(t, p, compression=codec, use_dictionary=False, row_group_size=20_000, data_page_size=4096)
    md = pq.read_metadata(p)
    assert md.num_row_groups == 3
    buf = p.read_bytes()
    # PLAIN, required columns: a page holds exactly its values (no level bytes)
    assert declared_page_bytes(buf, md, [0]) == 8 * n
    assert declared_page_bytes(buf, md, [1]) == 4 * n
    assert declared_page_bytes(buf, md, [0, 1]) == 12 * n


def test_parquet_page_header_claims_checked_before_decompressing(tmp_path, monkeypatch):
    p = tmp_path / "p.parquet"
    n = 200_000      # 1.6 MB of values: the page header's size takes the 4-byte varint rewritten
    _lying_parquet(p, n, "part")
    with pytest.raises(PartitionError, match=r"p.parquet: column 'part' declares 134217727 uncompressed bytes "
                                             r"in its page headers"):
        read_partition(p, n)
    d = tmp_path / "d.parquet"                          # a column name with a dot: still its own column
    _lying_parquet(d, n, "p.x")
    with pytest.raises(PartitionError, match=r"column 'p.x' declares 134217727 uncompressed bytes in its page"):
        read_partition(d, n, column="p.x")
    e = tmp_path / "e.parquet"
    _lying_parquet(e, n, "src")
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", str(64 << 20))
    with pytest.raises(GraphFormatError, match="e.parquet.*pages .*128.0 MiB"):
        read_graph(e, format="parquet", src="src", dst="src")
    ok = tmp_path / "ok.parquet"
    pq.write_table(pa.table({"part": np.zeros(1000, dtype=np.int64)}), ok, compression="zstd")
    assert read_partition(ok, 1000).sum() == 0          # the honest file still reads


def test_parquet_page_header_garbage_is_one_error(tmp_path):
    p = tmp_path / "p.parquet"
    pq.write_table(pa.table({"part": np.zeros(1000, dtype=np.int64)}), p)
    raw = bytearray(p.read_bytes())
    start = pq.read_metadata(p).row_group(0).column(0).data_page_offset
    raw[start:start + 24] = b"\x15" + b"\xff" * 23        # field 1 (i32), then a varint that never ends
    p.write_bytes(bytes(raw))
    with no_hang(), pytest.raises(PartitionError, match="p.parquet: .*row group 0 column 'part'.*varint longer"):
        read_partition(p, 1000)


def test_feather_batch_lengths_checked_before_decompressing(tmp_path):
    from pyarrow import feather
    p = tmp_path / "p.feather"
    feather.write_feather(pa.table({"part": np.zeros(5000, dtype=np.int64)}), p, compression="zstd")
    with pytest.raises(PartitionError, match="has 5000 part ids"):
        read_partition(p, 10)
    assert read_partition(p, 5000).sum() == 0       # the honest file still reads


def test_gzip_text_decompressed_no_further_than_n_allows(tmp_path):
    member = gzip.compress(b"0\n" * (1 << 20), compresslevel=9)   # 2 MiB of text per member
    p = tmp_path / "p.part.gz"
    p.write_bytes(member * 8)                                      # 16 MiB of text in a small file
    with pytest.raises(PartitionError, match="decompresses to more than"):
        read_partition(p, 10)
    assert text_limit(10) < (2 << 20)
    small = tmp_path / "s.part.gz"
    small.write_bytes(gzip.compress(b"# a comment\n1\n0\n1\n"))
    assert read_partition(small, 3).tolist() == [1, 0, 1]


def test_plain_text_larger_than_n_allows_is_refused_before_parsing(tmp_path):
    p = tmp_path / "p.txt"
    p.write_bytes(b"0\n" * (text_limit(3) // 2 + 1))
    with pytest.raises(PartitionError, match="bytes of text, more than a partition of 3 vertices needs"):
        read_partition(p, 3)


def test_graph_file_through_a_symlink_still_reads(tmp_path):
    """A user's own path may be a link (only a plan's files are refused through links)."""
    g = _grid(3, 3)
    write_graph(g, tmp_path / "g.mtx")
    (tmp_path / "link.mtx").symlink_to(tmp_path / "g.mtx")
    assert read_graph(tmp_path / "link.mtx").nnz == g.nnz


def test_chunk_array_through_a_symlink_is_refused(tmp_path):
    from partplan.io.chunked import read_chunked, write_chunked
    out = write_chunked(_grid(4, 4), tmp_path / "g.chunks", chunks=2)
    f = min(out.glob("*.npy"))
    target = tmp_path / "elsewhere.npy"
    f.rename(target)
    f.symlink_to(target)
    with pytest.raises(GraphFormatError, match="symbolic link"):
        read_chunked(out)


def test_fifo_edge_table_and_pt_graph_are_refused_without_blocking(tmp_path):
    for name in ("e.parquet", "g.pt"):
        os.mkfifo(tmp_path / name)
        with no_hang(), pytest.raises(GraphFormatError, match="FIFO"):
            read_graph(tmp_path / name)


def test_pt_graph_sizes_and_layouts_checked_before_building(tmp_path):
    torch = pytest.importorskip("torch")
    data_mod = pytest.importorskip("torch_geometric.data")
    ei = torch.tensor([[0, 1], [1, 2]])
    cases = {"huge_n.pt": (data_mod.Data(edge_index=ei, num_nodes=2 ** 62), "num_nodes"),
             "far_id.pt": (torch.tensor([[0, 2 ** 40], [1, 2]]), "memory budget"),
             "sparse.pt": (ei.to_sparse(), "sparse_coo tensor"),
             "meta.pt": (data_mod.Data(edge_index=torch.empty((2, 3), dtype=torch.long, device="meta"), num_nodes=3),
                         "meta tensor")}
    for name, (obj, needle) in cases.items():
        torch.save(obj, tmp_path / name)
        with pytest.raises(GraphFormatError, match=needle):
            read_graph(tmp_path / name)
    torch.save(data_mod.Data(edge_index=ei, num_nodes=3), tmp_path / "ok.pt")
    assert read_graph(tmp_path / "ok.pt").n == 3


# ----------------------------------------------------------------------------- endless lines
def _gz(path: Path, head: bytes, fill: bytes, count: int) -> Path:
    with gzip.GzipFile(path, "wb", compresslevel=9, mtime=0) as fh:
        fh.write(head)
        for _ in range(count):
            fh.write(fill * (1 << 16))
    return path


@pytest.mark.parametrize("name, head", [
    ("e.txt.gz", b"1 2\n"),                                                          # an edge list's line 2
    ("m.mtx.gz", b"%%MatrixMarket matrix coordinate pattern general\n3 3 2\n"),        # an entry line
])
def test_an_endless_line_is_refused_before_it_is_parsed(tmp_path, name, head):
    """A few kB of gzip inflating to one line of megabytes (parsing takes ~12 bytes per byte of
    text: a 2 MB file that inflated to 2 GiB of one line was killed at 24 GB): one error naming
    the line, at the line length no line of the format reaches."""
    from partplan.io import _text
    p = _gz(tmp_path / name, head, b"0", ((_text.BLOCK_BYTES + _text.SHORT_LINE_BYTES) >> 16) + 2)
    assert p.stat().st_size < 1 << 17
    with pytest.raises(GraphFormatError, match=r"line \d: a line longer than 1,048,576 bytes"):
        read_graph(p)


def test_an_endless_first_line_of_a_gzip_stream_is_refused(tmp_path, monkeypatch):
    """Whole-line reads of a gzip stream (a banner, a header, an edge list's first line) stop at
    MAX_GZIP_LINE_BYTES: a stream inflating to one endless first line is refused, not held."""
    from partplan.io import _common
    monkeypatch.setattr(_common, "MAX_GZIP_LINE_BYTES", 1 << 16)
    for name, head in (("b.mtx.gz", b"%%MatrixMarket matrix coordinate pattern general"), ("f.txt.gz", b"")):
        p = _gz(tmp_path / name, head, b"1", 4)
        with pytest.raises(GraphFormatError, match="a line longer than 65,536 bytes in the decompressed stream"):
            read_graph(p)


def test_the_budget_counts_the_rows_a_graph_is_built_from(tmp_path, monkeypatch):
    """A 60-byte Matrix Market file declaring 6·10^7 vertices: building its rows takes ~21 bytes
    per vertex (measured), beyond a 1 GB budget; the estimate of 8 per vertex let it through to
    a MemoryError traceback past the budget."""
    from partplan.errors import SizeLimitError
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", str(10 ** 9))
    p = tmp_path / "n.mtx"
    p.write_text("%%MatrixMarket matrix coordinate pattern general\n60000000 60000000 2\n1 2\n2 1\n")
    with pytest.raises(SizeLimitError, match="memory budget"):
        read_graph(p)


def test_a_byte_order_mark_opens_a_matrix_market_or_partition_file(tmp_path):
    """Editors on Windows write a UTF-8 byte-order mark; edge lists, CSV and METIS already took
    it, the Matrix Market banner and a text partition refused it."""
    bom = b"\xef\xbb\xbf"
    m = tmp_path / "g.mtx"
    m.write_bytes(bom + b"%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n2 1\n")
    g = read_graph(m)
    assert (g.n, g.nnz) == (3, 2)
    pt = tmp_path / "p.part"
    pt.write_bytes(bom + b"0\n1\n1\n")
    assert read_partition(pt, 3).tolist() == [0, 1, 1]


def test_a_file_that_is_no_zip_is_not_called_a_pickle(tmp_path):
    """numpy answers a non-zip .npz with its advice to load pickled data unsafely (allow_pickle);
    the reader says what the file is instead."""
    p = tmp_path / "h.npz"
    p.write_bytes(b"hello")
    with pytest.raises(GraphFormatError, match="an .npz is a zip archive; this file starts with") as e:
        read_graph(p)
    assert "pickle" not in str(e.value)


def test_a_parquet_tables_rows_are_counted_against_the_budget_before_it_is_read(tmp_path, monkeypatch):
    """A 44 kB zstd Parquet file of 5·10^6 rows: its pages and the graph built from its rows are
    checked against the budget from the footer's row count, before the table is read (a 435 kB
    file of 5·10^7 rows took 3.1 GB)."""
    from partplan.errors import SizeLimitError
    p = tmp_path / "big.parquet"
    z = np.zeros(5_000_000, np.int64)
    pq.write_table(pa.table({"src": z, "dst": z}), p, row_group_size=5_000_000, compression="zstd")
    assert p.stat().st_size < 1 << 17
    monkeypatch.setenv("PARTPLAN_MAX_BYTES", str(150 * 10 ** 6))
    with pytest.raises(SizeLimitError, match="5,000,000 rows and the graph built from them"):
        read_graph(p)
