"""Readers and writers at the edges of their formats: a comment ending an edge list's first line, a
gzip CSV recognized by its bytes with a header and comment lines before it, `.csv.gz` written
compressed (and without the temporary file's name in the gzip header), writers refusing what their
own readers refuse (METIS repeated neighbours and weights past 64 bits, non-canonical chunk rows), a
graph name that spans lines, outputs partplan cannot write refused before the input is read.
Oracles: the edges written by hand in each test, scipy, and the gzip header's bytes."""
from __future__ import annotations

import gzip

import numpy as np
import pytest

from partplan import Graph
from partplan.cli.main import main
from partplan.errors import GraphFormatError
from partplan.io import read_graph, write_graph


def _edges(g: Graph) -> list:
    return sorted(zip(g.rows.tolist(), g.indices.tolist()))


@pytest.mark.parametrize("first", ["0 1 # first edge", "0 1 % a, b", "0 1\t# tab then comment"])
def test_a_comment_ending_the_first_line_is_a_comment(tmp_path, first):
    p = tmp_path / "c.txt"
    p.write_text(first + "\n1 2\n")
    assert _edges(read_graph(p)) == [(0, 1), (1, 2)]


def test_a_gzip_csv_with_a_header_and_comment_lines_is_read_by_its_bytes(tmp_path):
    p = tmp_path / "h.csv"                                   # gzip bytes, a plain name
    p.write_bytes(gzip.compress(b"# exported by a tool\n% and a note\nsrc,dst\n1,2\n2,3\n"))
    g = read_graph(p)
    assert g.ids.tolist() == [1, 2, 3] and _edges(g) == [(0, 1), (1, 2)]
    bad = tmp_path / "bad.csv"
    bad.write_text("# one comment\nsrc,dst\n1,2\n2,-3\n")
    with pytest.raises(GraphFormatError, match=r"line 4.*negative vertex id -3"):   # counted from the file's top
        read_graph(bad)


def test_csv_gz_is_written_compressed_and_reproducibly(tmp_path):
    g = Graph.from_edges([0, 1], [1, 2], n=3)
    out = tmp_path / "q.csv.gz"
    write_graph(g, out)
    raw = out.read_bytes()
    assert raw[:2] == b"\x1f\x8b" and raw[3] & 0x08 == 0     # gzip, no file name stored (FNAME flag clear)
    assert gzip.decompress(raw).decode().splitlines()[0].replace('"', "") == "src,dst"
    assert _edges(read_graph(out)) == [(0, 1), (1, 2)]
    write_graph(g, out)
    assert out.read_bytes() == raw


def test_writers_refuse_what_their_readers_refuse(tmp_path):
    dup = Graph.from_edges([0, 0, 1, 1, 1, 2], [1, 1, 0, 0, 2, 1], n=3, dedupe=False)
    assert dup.nnz == 6 and dup.is_symmetric()
    with pytest.raises(GraphFormatError, match="neighbour twice"):
        write_graph(dup, tmp_path / "d.graph")
    assert not (tmp_path / "d.graph").exists()
    from partplan.io.chunked import write_chunked
    with pytest.raises(GraphFormatError, match="row 0 repeats a column"):
        write_chunked(dup, tmp_path / "d.chunked", chunks=2)
    assert not (tmp_path / "d.chunked").exists()
    big = Graph.from_edges([0, 1], [1, 0], n=2, weights=np.array([1e19, 1e19]))
    with pytest.raises(GraphFormatError, match="does not fit in 64 bits"):
        write_graph(big, tmp_path / "w.graph")


def test_a_graph_name_over_several_lines_stays_a_comment(tmp_path):
    g = Graph.from_edges([0], [1], n=2, name="a\n7 8")
    write_graph(g, tmp_path / "n.txt")
    assert _edges(read_graph(tmp_path / "n.txt")) == [(0, 1)]


def test_outputs_partplan_does_not_write_are_refused_before_the_input_is_read(tmp_path, capsys):
    junk = tmp_path / "junk.txt"
    junk.write_text("this is not a graph\n")          # reading it would fail: the output is said first
    for argv in (["convert", str(junk), str(tmp_path / "o.pt")],
                 ["convert", str(junk), str(tmp_path / "o.bin"), "--to", "xyz"],
                 ["datasets", "generate", "rmat", "--scale", "6", "-o", str(tmp_path / "x.hgr")]):
        assert main(["-q", *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "junk" not in err[0].split(":")[1] and ("o." in err[0] or "x.hgr" in err[0]), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junk.txt"]


def test_uint64_ids_past_int64_are_said_as_such():
    with pytest.raises(GraphFormatError, match="2\\^63 or more"):
        Graph.from_edge_index(np.array([[0, 2 ** 63 + 5], [1, 0]], dtype=np.uint64))


def test_a_matrix_market_file_named_txt_is_not_read_as_an_edge_list(tmp_path):
    """Its banner is a comment to the edge-list reader and its size line an edge (4 -> 4, weight 3):
    refused, naming the format to use."""
    p = tmp_path / "mm.txt"
    p.write_text("%%MatrixMarket matrix coordinate pattern general\n4 4 3\n1 2\n2 3\n3 4\n")
    with pytest.raises(GraphFormatError, match="Matrix Market"):
        read_graph(p)
    assert _edges(read_graph(p, "mtx")) == [(0, 1), (1, 2), (2, 3)]


def test_a_partition_csv_without_a_header_counts_its_first_line(tmp_path):
    """n lines of ids: no header (the first id was taken as the column's name, one vertex short);
    a numeric header over n ids (pandas' ``to_csv`` writes "0") stays a header."""
    from partplan.errors import PartitionError
    from partplan.io.partfile import read_partition
    (tmp_path / "p.csv").write_text("0\n1\n1\n0\n")
    assert read_partition(tmp_path / "p.csv", 4).tolist() == [0, 1, 1, 0]
    assert read_partition(tmp_path / "p.csv", 3).tolist() == [1, 1, 0]          # header "0" over 3 ids
    assert read_partition(tmp_path / "p.csv", 3, column="0").tolist() == [1, 1, 0]
    with pytest.raises(PartitionError, match="part ids"):
        read_partition(tmp_path / "p.csv", 2)
    (tmp_path / "h.csv").write_text("part\n0\n1\n1\n")
    assert read_partition(tmp_path / "h.csv", 3).tolist() == [0, 1, 1]


def test_csv_header_lines_that_look_like_comments(tmp_path):
    """A header naming its own columns with '#' is the header; comment and blank lines before a
    header are skipped (line numbers still count them); a comment that only mentions Matrix Market
    is a comment."""
    from partplan.io.table import read_edge_table
    (tmp_path / "hs.csv").write_text("#src,dst\n0,1\n1,2\n2,3\n")
    g = read_edge_table(tmp_path / "hs.csv", format="csv", src="#src")
    assert _edges(g) == [(0, 1), (1, 2), (2, 3)]
    (tmp_path / "blank.txt").write_text("# c\n\n# d\nsrc,dst\n0,1\n1,2\n")
    assert _edges(read_graph(tmp_path / "blank.txt")) == [(0, 1), (1, 2)]
    (tmp_path / "bad.csv").write_text("# c\n\nsrc,dst\n1,2\n2,-3\n")
    with pytest.raises(GraphFormatError, match="line 5"):
        read_graph(tmp_path / "bad.csv")
    (tmp_path / "e.txt").write_text("%%MatrixMarket-like comment, not really\n0 1\n1 2\n")
    assert _edges(read_graph(tmp_path / "e.txt")) == [(0, 1), (1, 2)]


@pytest.mark.parametrize("token", ["0x2", "1_0"])
def test_a_partition_text_takes_decimal_ids_only(tmp_path, token):
    """pyarrow read 0x2 as 2 and int() read 1_0 as 10: now the line is named."""
    from partplan.errors import PartitionError
    from partplan.io.partfile import read_partition
    (tmp_path / "p.txt").write_text(f"0\n{token}\n1\n")
    with pytest.raises(PartitionError, match=f"line 2: part id '{token}' is not an integer"):
        read_partition(tmp_path / "p.txt", 3)


def test_an_edge_list_opening_with_a_byte_order_mark_is_read(tmp_path):
    p = tmp_path / "bom.txt"
    p.write_bytes(b"\xef\xbb\xbf0 1\n1 2\n")           # as Windows editors save UTF-8
    assert _edges(read_graph(p)) == [(0, 1), (1, 2)]


@pytest.mark.parametrize("name,encode,said", [
    ("g.txt", lambda b: __import__("bz2").compress(b), "bzip2-compressed"),
    ("g.mtx", lambda b: __import__("lzma").compress(b), "xz-compressed"),
    ("g.txt", lambda b: b.decode().encode("utf-16"), "UTF-16 text"),
    ("g.csv", lambda b: b"src,dst\n1,2\n".decode().encode("utf-16"), "UTF-16 text"),
])
def test_files_in_encodings_no_reader_takes_are_named_as_such(tmp_path, name, encode, said):
    """Compressed streams other than gzip and UTF-16 text: one error saying what the file is (the
    readers would otherwise report a bad token of compressed bytes or a wrong column count)."""
    p = tmp_path / name
    p.write_bytes(encode(b"%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 2\n" if name.endswith(".mtx")
                         else b"1 2\n2 3\n"))
    with pytest.raises(GraphFormatError, match=said) as e:
        read_graph(p)
    assert str(p) in str(e.value)


def test_duplicate_entries_summing_past_the_largest_float_name_the_file(tmp_path):
    """Every value in the file is finite; their sum (dedupe) is not: the error names the file and
    says why, and dedupe=False reads the entries apart."""
    p = tmp_path / "dup.mtx"
    p.write_text("%%MatrixMarket matrix coordinate real general\n3 3 3\n1 2 1e308\n1 2 1e308\n2 3 1\n")
    with pytest.raises(GraphFormatError, match="summed") as e:
        read_graph(p)
    assert str(e.value).startswith(str(p))
    assert read_graph(p, dedupe=False).nnz == 3
