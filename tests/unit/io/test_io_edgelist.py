"""Edge-list reader (partplan.io.edgelist): parsing against plain-Python
oracles, relabelling, weights, separators, comments, .gz, streaming over many
blocks, and every malformed-input error with its file and 1-based line."""
from __future__ import annotations

import gzip

import numpy as np
import pytest
import scipy.sparse as sp

from partplan.errors import BackendUnavailableError, GraphFormatError
from partplan.io import read_graph, write_graph
from partplan.io.edgelist import read_edgelist


def expect_error(path, line, *, match=None, **kw):
    with pytest.raises(GraphFormatError) as ei:
        read_graph(path, **kw)
    err = ei.value
    assert err.path == str(path)
    assert err.line == line, str(err)
    assert str(path) in str(err) and f"line {line}" in str(err)
    if match:
        assert match in str(err), str(err)
    return err


def oracle(text: str, weighted=False):
    """Plain-Python parse: (sorted distinct ids, set of (src, dst) or dict with summed weights)."""
    edges = {}
    for line in text.splitlines():
        s = line.strip()
        if not s or s[0] in "#%":
            continue
        toks = s.replace(",", " ").split()
        key = (int(toks[0]), int(toks[1]))
        edges[key] = edges.get(key, 0.0) + (float(toks[2]) if weighted else 1.0)
    ids = sorted({v for e in edges for v in e})
    return ids, edges


def graph_edges(g):
    ids = g.ids if g.ids is not None else np.arange(g.n)
    A = g.to_scipy().tocoo()
    return {(int(ids[r]), int(ids[c])): float(v) for r, c, v in zip(A.row, A.col, A.data)}


def test_snap_file_with_comments_relabels_and_keeps_ids(tmp_path):
    text = ("# Directed graph (each unordered pair of nodes is saved once): demo.txt\n"
            "# Nodes: 4 Edges: 5\n# FromNodeId\tToNodeId\n"
            "10\t20\n20\t30\n\n30\t10\n%  another comment\n10\t99999999999\n10\t20\n")
    p = tmp_path / "demo.txt"
    p.write_text(text)
    g = read_graph(p)
    ids, edges = oracle(text)
    assert g.ids.tolist() == ids == [10, 20, 30, 99999999999]
    assert g.n == 4 and g.directed
    assert set(graph_edges(g)) == set(edges)
    assert g.data is None
    # the duplicate 10->20 is summed by dedupe, kept without it
    assert read_graph(p, dedupe=False).nnz == 5


def test_contiguous_ids_are_not_relabelled(tmp_path):
    p = tmp_path / "c.el"
    p.write_text("0 1\n1 2\n2 0\n")
    g = read_graph(p)
    assert g.ids is None and g.n == 3
    A = g.to_scipy().toarray()
    assert A[0, 1] == A[1, 2] == A[2, 0] == 1 and A.sum() == 3


def test_no_relabel_uses_ids_as_rows(tmp_path):
    p = tmp_path / "one_based.txt"
    p.write_text("1 2\n2 3\n")
    g = read_graph(p, relabel=False)
    assert g.n == 4 and g.ids is None and g.row_nnz.tolist() == [0, 1, 1, 0]
    g = read_edgelist(p, n=10)
    assert g.n == 10
    expect_error_n = pytest.raises(GraphFormatError)
    with expect_error_n as ei:
        read_edgelist(p, n=3)
    assert ei.value.line == 2


def test_weights_commas_and_symmetrize(tmp_path):
    text = "5,7,0.5\n7,9,2\n# c\n9,5,1.25\n5,7,0.25\n"
    p = tmp_path / "w.csv"  # no header: a comma edge list
    p.write_text(text)
    g = read_graph(p)
    ids, edges = oracle(text, weighted=True)
    assert g.ids.tolist() == ids
    assert graph_edges(g) == edges
    s = read_graph(p, symmetrize=True)
    A = g.to_scipy()
    assert abs(s.to_scipy() - (A + A.T)).max() == 0  # weights of both directions summed (scipy oracle)
    assert not s.directed
    assert read_graph(p, weighted=False).data is None


def test_self_loop_and_isolated_options(tmp_path):
    p = tmp_path / "l.txt"
    p.write_text("0 0\n0 1\n3 3\n")
    g = read_graph(p, relabel=False)
    assert g.n == 4 and g.has_self_loops()
    r = read_graph(p, relabel=False, self_loops="remove")
    assert not r.has_self_loops() and r.nnz == 1
    a = read_graph(p, relabel=False, self_loops="add")
    assert a.to_scipy().diagonal().tolist() == [1, 1, 1, 1]
    d = read_graph(p, relabel=False, self_loops="remove", drop_isolated=True)
    assert d.n == 2 and d.ids.tolist() == [0, 1]


def test_gzip_and_tsv(tmp_path):
    text = "# c\n1\t2\t3.5\n2\t3\t1\n"
    p = tmp_path / "g.tsv.gz"
    with gzip.open(p, "wt") as f:
        f.write(text)
    g = read_graph(p)
    assert graph_edges(g) == oracle(text, weighted=True)[1]


def test_64bit_ids_exact_with_weights(tmp_path):
    big = 2 ** 62 + 3  # not representable in float64
    text = f"{big} {big + 2} 1.5\n{big + 2} 1 2\n"
    p = tmp_path / "big.txt"
    p.write_text(text)
    g = read_graph(p)
    assert g.ids.tolist() == [1, big, big + 2]
    assert graph_edges(g) == oracle(text, weighted=True)[1]


def test_streaming_many_blocks_matches_loadtxt(tmp_path):
    rng = np.random.default_rng(7)
    m = 20_000
    src = rng.integers(0, 2 ** 40, m)
    dst = rng.integers(0, 50_000, m)
    w = rng.random(m)
    p = tmp_path / "big.edges"
    with open(p, "w") as f:
        f.write("# generated\n")
        np.savetxt(f, np.column_stack([src, dst]), fmt="%d")
    # 4 KiB blocks: about a hundred block boundaries inside the file
    g = read_edgelist(p, block_bytes=1 << 12)
    ref_ids = np.unique(np.concatenate([src, dst]))
    assert np.array_equal(g.ids, ref_ids)
    inv = {v: i for i, v in enumerate(ref_ids.tolist())}
    A = sp.csr_matrix((np.ones(m), ([inv[s] for s in src.tolist()], [inv[d] for d in dst.tolist()])),
                      shape=(ref_ids.size, ref_ids.size))
    A.sum_duplicates()
    assert np.array_equal(g.indptr, A.indptr) and np.array_equal(g.indices, A.indices)
    # weighted (about 80 blocks of 8 KiB), compare with numpy's loadtxt
    p2 = tmp_path / "w.txt"
    with open(p2, "w") as f:
        np.savetxt(f, np.column_stack([dst, dst[::-1], w]), fmt=["%d", "%d", "%.17g"])
    ref = np.loadtxt(p2)
    g2 = read_edgelist(p2, block_bytes=1 << 13, dedupe=False)
    B = sp.coo_matrix((ref[:, 2], (ref[:, 0].astype(int), ref[:, 1].astype(int)))).tocsr()
    ids = g2.ids if g2.ids is not None else np.arange(g2.n)
    C = g2.to_scipy().tocoo()
    D = sp.coo_matrix((C.data, (ids[C.row], ids[C.col])), shape=B.shape).tocsr()
    assert abs(D - B).max() == 0 and g2.nnz == m


@pytest.mark.parametrize("content,line,match", [
    ("1 2\n3 x\n", 2, "bad token 'x'"),
    ("1 2\n3 4\n- 5\n", 3, "bad token '-'"),
    ("0 1\n1 -\n", 2, "bad token '-'"),     # a lone sign last in the file: numpy reads it as 0
    ("0 1\n1 +\n", 2, "bad token '+'"),
    ("0 1 1.5\n1 2 -\n", 2, "bad token '-'"),
    ("1 2 0x10\n", 1, "bad token '0x10'"),   # the first line's bad token, not its first one
    ("1 2\n3 1.5\n", 2, "bad token '1.5'"),
    ("# c\n1 2\n3 4 5\n", 3, "expected 2 columns, found 3"),
    ("1 2 1\n3 4\n", 2, "expected 3 columns, found 2"),
    ("1\n", 1, "expected 2 or 3 columns"),
    ("1 2\n\n-3 4\n", 3, "negative vertex id -3"),
    ("1 2 1.0\n2 3 -0.5\n", 2, "negative weight"),
    ("1 2 1.0\n2 3 nan\n", 2, "non-finite weight"),
    ("1 2 1.0\n2 3 inf\n", 2, "non-finite weight"),
    ("1 2 1\n2 3.5 1\n", 2, "bad token '3.5': expected an integer"),
    ("1 2\n99999999999999999999 1\n", 2, "does not fit in 64 bits"),
    ("1 2 1\n99999999999999999999 3 1\n", 2, "does not fit in 64 bits"),
    ("1 2 1\n2 3 abc\n", 2, "bad token 'abc': expected a number"),
    ("", 1, "no edges"),
    ("# only\n% comments\n\n", 3, "no edges"),
    ("1 2\n3 4 # fine trailing comment\n5 6 7\n", 3, "expected 2 columns"),
])
def test_errors_name_file_and_line(tmp_path, content, line, match):
    p = tmp_path / "bad.txt"
    p.write_text(content)
    expect_error(p, line, match=match)


def test_error_line_is_exact_far_into_a_gz_file_across_blocks(tmp_path):
    lines = [f"{i} {i + 1}" for i in range(50_000)]
    lines[41_234] = "41234 4x"
    p = tmp_path / "far.txt.gz"
    with gzip.open(p, "wt") as f:
        f.write("# header\n" + "\n".join(lines) + "\n")
    with pytest.raises(GraphFormatError) as ei:
        read_edgelist(p, block_bytes=1 << 12)
    assert ei.value.line == 41_234 + 2 and "'4x'" in str(ei.value)


def test_header_line_goes_to_table_reader_or_errors(tmp_path):
    p = tmp_path / "h.csv"
    p.write_text("src,dst,weight\n4,5,1.5\n5,6,2\n")
    g = read_graph(p)
    assert g.ids.tolist() == [4, 5, 6] and graph_edges(g) == {(4, 5): 1.5, (5, 6): 2.0}
    q = tmp_path / "h.txt"
    q.write_text("from to\n1 2\n")
    expect_error(q, 1, match="bad token 'from'")


def test_unknown_option_is_refused(tmp_path):
    p = tmp_path / "a.txt"
    p.write_text("1 2\n")
    with pytest.raises(BackendUnavailableError, match="'vertex_weight'"):
        read_graph(p, vertex_weight=0)


def test_write_edgelist_round_trip_with_original_ids(tmp_path):
    text = "100 200 0.1\n200 300 0.3333333333333333\n300 100 1e-300\n"
    p = tmp_path / "in.txt"
    p.write_text(text)
    g = read_graph(p)
    out = write_graph(g, tmp_path / "out.txt.gz")
    h = read_graph(out)
    assert graph_edges(h) == graph_edges(g) == oracle(text, weighted=True)[1]
    assert h.fingerprint == g.fingerprint
