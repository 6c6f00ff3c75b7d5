"""METIS .graph reader / writer: hand-written files, round trips, Mt-KaHyPar's
own METIS parser as an independent oracle, the embedded real file, and every
malformed-input error with file and line."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from partplan import Graph
from partplan.errors import BackendUnavailableError, GraphFormatError
from partplan.io import read_graph, write_graph
from partplan.io.metis import read_metis, write_metis

REPO = Path(__file__).resolve().parents[3]

def manual_text():
    # a weighted fmt 011 file written from an explicit edge list (each edge on both lines)
    edges = {(1, 2): 1, (1, 3): 2, (1, 5): 1, (2, 3): 2, (2, 4): 1, (3, 4): 2, (3, 5): 3,
             (4, 5): 2, (4, 6): 2, (5, 6): 1, (6, 7): 5}
    vw = [4, 2, 5, 2, 1, 6, 3]
    adj = {v: [] for v in range(1, 8)}
    for (u, v), w in edges.items():
        adj[u].append((v, w))
        adj[v].append((u, w))
    lines = ["% weighted example", f"7 {len(edges)} 011"]
    for v in range(1, 8):
        lines.append(" ".join([str(vw[v - 1])] + [f"{u} {w}" for u, w in sorted(adj[v])]))
    return "\n".join(lines) + "\n", edges, vw


def test_weighted_fmt011_by_hand(tmp_path):
    text, edges, vw = manual_text()
    p = tmp_path / "m.graph"
    p.write_text(text)
    g = read_graph(p)
    assert not g.directed and g.n == 7 and g.nnz == 2 * len(edges)
    A = g.to_scipy()
    for (u, v), w in edges.items():
        assert A[u - 1, v - 1] == w and A[v - 1, u - 1] == w
    assert g.vertex_weights.tolist() == vw


def test_isolated_vertex_is_an_empty_line_and_comments_are_not(tmp_path):
    p = tmp_path / "iso.graph"
    p.write_text("% c\n4 2\n2\n1 4\n%between\n\n2\n")
    g = read_graph(p)
    assert g.n == 4 and g.row_nnz.tolist() == [1, 2, 0, 1]


def test_round_trip_and_mtkahypar_reads_our_file(tmp_path):
    import mtkahypar

    rng = np.random.default_rng(3)
    g = Graph.from_edges(rng.integers(0, 200, 900), rng.integers(0, 200, 900),
                         rng.integers(1, 9, 900).astype(float), symmetrize=True, self_loops="remove")
    g = Graph(g.indptr, g.indices, g.data, directed=False, vertex_weights=rng.integers(1, 5, g.n))
    p = write_metis(g, tmp_path / "r.graph")
    h = read_metis(p)
    assert h.fingerprint == g.fingerprint
    assert np.array_equal(h.data, g.data) and np.array_equal(h.vertex_weights, g.vertex_weights)
    mtk = mtkahypar.initialize(1)
    ctx = mtk.context_from_preset(mtkahypar.PresetType.DEFAULT)
    mg = mtk.graph_from_file(str(p), ctx, mtkahypar.FileFormat.METIS)
    assert mg.num_nodes() == g.n
    assert mg.num_edges() in (g.nnz, g.nnz // 2)  # mtkahypar counts directed or undirected edges
    for v in (0, 7, g.n - 1):
        assert mg.node_weight(v) == g.vertex_weights[v]
    # gz round trip, unweighted
    q = write_graph(Graph(g.indptr, g.indices, None, directed=False), tmp_path / "u.graph.gz")
    assert read_graph(q).fingerprint == g.fingerprint


def test_embedded_real_file_delaunay_n15():
    p = REPO / "datasets" / "delaunay_n15.graph.gz"
    if not p.exists():
        pytest.skip("embedded dataset not present")
    g = read_graph(p)
    assert (g.n, g.nnz // 2) == (32_768, 98_274)  # counts from datasets.md
    assert g.is_symmetric() and not g.has_self_loops()


def test_writer_refuses_directed_and_self_loops(tmp_path):
    d = Graph.from_edges([0, 1], [1, 2])
    with pytest.raises(GraphFormatError, match="symmetric"):
        write_metis(d, tmp_path / "d.graph")
    s = Graph.from_edges([0, 1], [1, 1], symmetrize=True)
    with pytest.raises(GraphFormatError, match="self loops"):
        write_metis(s, tmp_path / "s.graph")
    w = Graph.from_edges([0], [1], [0.5], symmetrize=True)
    with pytest.raises(GraphFormatError, match="integers"):
        write_metis(w, tmp_path / "w.graph")
    z = Graph.from_edges([0, 1], [1, 2], [0.0, 3.0], symmetrize=True)
    with pytest.raises(GraphFormatError, match="positive integers .METIS refuses a weight of 0"):
        write_metis(z, tmp_path / "z.graph")   # METIS's reader refuses it (programs/io.c: "must be positive")
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_multi_constraint_needs_a_choice(tmp_path):
    p = tmp_path / "mc.graph"
    p.write_text("3 2 010 2\n1 7 2\n2 8 1 3\n3 9 2\n")
    with pytest.raises(BackendUnavailableError, match="vertex_weight"):
        read_graph(p)
    assert read_graph(p, vertex_weight=1).vertex_weights.tolist() == [7, 8, 9]
    assert read_graph(p, vertex_weight=0).vertex_weights.tolist() == [1, 2, 3]


def test_vertex_sizes_are_skipped(tmp_path):
    p = tmp_path / "vs.graph"
    p.write_text("3 2 110\n9 1 2\n9 2 1 3\n9 3 2\n")
    g = read_graph(p)
    assert g.vertex_weights.tolist() == [1, 2, 3] and g.nnz == 4


@pytest.mark.parametrize("content,line,match", [
    ("", 1, "empty file"),
    ("% only a comment\n", 1, "empty file"),
    ("3\n", 1, "header must be"),
    ("3 2 2\n2\n1 3\n2\n", 1, "fmt 2"),
    ("3 2\n2\n1 3\n", 3, "found 2 vertex lines"),
    ("3 2\n2\n1 3\n2\n1\n", 5, "more than the 3 vertex lines"),
    ("3 2\n2\n1 4\n2\n", 3, "out of range [1, 3]"),
    ("3 2\n2\n1 0\n2\n", 3, "out of range"),
    ("3 3\n2\n1 3\n2\n", 1, "says 3 edges"),
    ("3 2\n2 3\n1\n2\n", 2, "asymmetric adjacency: vertex 1 lists 3"),
    ("3 2\n1 2\n1\n3\n", 2, "lists itself"),
    ("3 2\n2 2\n1 1\n\n", 2, "lists neighbour 2 twice"),
    ("3 2 1\n2 5\n1 5 3 1\n2 2\n", 3, "edge 2-3 has weight 1 here but 2"),
    ("3 2 1\n2 5\n1 5 3\n2 1\n", 3, "odd number"),
    ("3 2 1\n2 -5\n1 -5 3 1\n2 1\n", 2, "edge weight -5; METIS edge weights are positive"),
    ("3 2 1\n2 0\n1 0 3 1\n2 1\n", 2, "edge weight 0; METIS edge weights are positive"),
    ("3 2 10\n1 2\n-2 1 3\n1 2\n", 3, "negative vertex weight"),
    ("3 2 10\n1 2\n\n1 2\n", 3, "fmt needs 1"),
    ("3 2\n2\n1 x\n2\n", 3, "bad token 'x'"),
    ("3 1 10\n1 2\n1 1\n-\n", 4, "bad token '-'"),          # a lone sign last: numpy reads 0
    ("3 2 1\n2 5\n1 5 3 7\n2 -\n", 4, "bad token '-'"),
])
def test_errors_name_file_and_line(tmp_path, content, line, match):
    p = tmp_path / "bad.graph"
    p.write_text(content)
    with pytest.raises(GraphFormatError) as ei:
        read_graph(p)
    assert ei.value.path == str(p) and ei.value.line == line, str(ei.value)
    assert match in str(ei.value), str(ei.value)


@pytest.mark.parametrize("suffix, header", [(".graph.gz", b"4 2\n"), (".hgr.gz", b"2 4\n")])
def test_a_small_compressed_file_that_inflates_past_its_header_is_refused_early(tmp_path, suffix, header):
    """A 0.8 MB gzip whose header says 4 vertices but whose body holds 800 M numbers was read
    whole (3.4 GB, then a numpy MemoryError traceback). A line longer than the header allows, or
    more lines of numbers than it allows, is one GraphFormatError naming the line, read no further."""
    import gzip
    import tracemalloc

    from partplan.io.hgr import read_hypergraph
    one_line = header + b"1 2 " * 3_000_000 + b"\n"              # 12 MB on one line
    many_lines = header + b"1 2\n" * 3_000_000                   # 12 MB of short lines
    for body, needle, line in ((one_line, "a line longer than", 2), (many_lines, "more numbers than the header",
                                                                     None)):
        p = tmp_path / f"bomb{suffix}"
        p.write_bytes(gzip.compress(body, 1))
        tracemalloc.start()
        try:
            with pytest.raises(GraphFormatError, match=needle) as ei:     # blocks of 1 MiB, not 32
                (read_metis if suffix.startswith(".graph") else read_hypergraph)(p, block_bytes=1 << 20)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert ei.value.path == str(p) and (line is None or ei.value.line == line), str(ei.value)
        assert peak < len(body) * 6, peak        # not the ~12 bytes per byte of parsing all of it


def test_vertex_sizes_are_dropped_but_a_negative_one_is_refused_as_metis_refuses_it(tmp_path):
    """fmt 100: the first number of a vertex line is its size (METIS: >= 0). The sizes are dropped
    (the graph equals the one without them); a negative size names its vertex and line."""
    good = tmp_path / "s.graph"
    good.write_text("4 4 100\n0 2 4\n3 1 3\n3 2 4\n3 1 3\n")
    plain = tmp_path / "p.graph"
    plain.write_text("4 4\n2 4\n1 3\n2 4\n1 3\n")
    a, b = read_metis(good), read_metis(plain)
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
    bad = tmp_path / "b.graph"
    bad.write_text("% sizes\n4 4 100\n3 2 4\n3 1 3\n-1 2 4\n3 1 3\n")
    with pytest.raises(GraphFormatError, match=r"b\.graph:line 5: vertex 3 has size -1"):
        read_metis(bad)
