"""hMetis .hgr reader / writer: hand-written files, round trips, Mt-KaHyPar's
own hMetis parser and km1 as independent oracles, the m == n graph view, and
every malformed-input error with file and line."""
from __future__ import annotations

import numpy as np
import pytest

from partplan import Graph, Hypergraph
from partplan.errors import BackendUnavailableError, GraphFormatError
from partplan.io import read_graph, read_hypergraph, write_graph, write_hypergraph

# hMETIS manual figure 3 style: 4 nets over 7 vertices, fmt 11
FIG = """% comment line
4 7 11
2 1 2
1 1 7 5 6
5 5 6 4
3 2 3 4

5
1
8
7
3
9
3
"""


def test_hand_written_fmt11(tmp_path):
    p = tmp_path / "fig.hgr"
    p.write_text(FIG)
    h = read_hypergraph(p)
    assert (h.n, h.m) == (7, 4)
    nets = [h.pins[h.net_ptr[e]:h.net_ptr[e + 1]].tolist() for e in range(h.m)]
    assert nets == [[0, 1], [0, 6, 4, 5], [4, 5, 3], [1, 2, 3]]
    assert h.net_weights.tolist() == [2, 1, 5, 3]
    assert h.vertex_weights.tolist() == [5, 1, 8, 7, 3, 9, 3]


def test_unweighted_and_net_weights_only(tmp_path):
    p = tmp_path / "u.hgr"
    p.write_text("2 3\n1 2\n2 3\n")
    h = read_hypergraph(p)
    assert h.net_weights is None and h.vertex_weights is None and h.pins.tolist() == [0, 1, 1, 2]
    p.write_text("2 3 1\n4 1 2\n6 2 3\n")
    assert read_hypergraph(p).net_weights.tolist() == [4, 6]
    p.write_text("2 3 10\n1 2\n2 3\n7\n8\n9\n")
    h = read_hypergraph(p)
    assert h.vertex_weights.tolist() == [7, 8, 9] and h.net_weights is None


def test_round_trip_and_mtkahypar_agrees(tmp_path):
    import mtkahypar

    rng = np.random.default_rng(11)
    n, m = 300, 250
    sizes = rng.integers(2, 9, m)  # mtkahypar drops single-pin nets on reading
    pins = np.concatenate([rng.choice(n, s, replace=False) for s in sizes])
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    hg = Hypergraph(n, ptr, pins, rng.integers(1, 6, m), rng.integers(1, 4, n))
    p = write_hypergraph(hg, tmp_path / "r.hgr")
    back = read_hypergraph(p)
    for a in ("net_ptr", "pins", "net_weights", "vertex_weights"):
        assert np.array_equal(getattr(back, a), getattr(hg, a)), a
    mtk = mtkahypar.initialize(1)
    ctx = mtk.context_from_preset(mtkahypar.PresetType.DEFAULT)
    mh = mtk.hypergraph_from_file(str(p), ctx, mtkahypar.FileFormat.HMETIS)
    assert (mh.num_nodes(), mh.num_edges(), mh.num_pins()) == (n, m, pins.size)
    for e in (0, 17, m - 1):
        assert sorted(mh.pins(e)) == sorted(hg.pins[ptr[e]:ptr[e + 1]].tolist())
        assert mh.edge_weight(e) == hg.net_weights[e]
    k = 4
    part = rng.integers(0, k, n)
    phg = mh.create_partitioned_hypergraph(ctx, k, part.tolist())
    assert phg.km1() == back.km1(part, k)
    # gz, weights off
    q = write_hypergraph(Hypergraph(n, ptr, pins), tmp_path / "r.hgr.gz")
    b2 = read_hypergraph(q)
    assert b2.net_weights is None and np.array_equal(b2.pins, pins)


def test_square_hgr_reads_as_column_net_matrix(tmp_path):
    p = tmp_path / "sq.hgr"
    p.write_text("3 3\n1 2\n2\n3 1\n")  # net j = column j
    g = read_graph(p)
    dense = np.zeros((3, 3))
    for j, pins in enumerate([[1, 2], [2], [3, 1]]):
        for i in pins:
            dense[i - 1, j] = 1
    assert np.array_equal(g.to_scipy().toarray(), dense)
    p.write_text("2 3\n1 2\n2 3\n")
    with pytest.raises(GraphFormatError, match="2 nets and 3 vertices"):
        read_graph(p)


def test_write_graph_refuses_hgr(tmp_path):
    with pytest.raises(BackendUnavailableError, match="write_hypergraph"):
        write_graph(Graph.from_edges([0], [1]), tmp_path / "g.hgr")


def test_writer_refuses_empty_nets(tmp_path):
    with pytest.raises(GraphFormatError, match="no pins"):
        write_hypergraph(Hypergraph(3, np.array([0, 2, 2]), np.array([0, 1])), tmp_path / "e.hgr")
    assert not (tmp_path / "e.hgr").exists()


@pytest.mark.parametrize("content,line,match", [
    ("", 1, "empty file"),
    ("3\n", 1, "header must be"),
    ("% c\n2 3 2\n1 2\n2 3\n", 2, "fmt 2"),
    ("2 3\n1 2\n", 2, "announces 2 net lines, found 1"),
    ("2 3\n1 2\n2 3\n1 3\n", 4, "unexpected line after the 2 nets"),
    ("2 3\n1 2\n2 4\n", 3, "pin 4 of net 2 out of range [1, 3]"),
    ("2 3\n1 2\n0 3\n", 3, "pin 0 of net 2"),
    ("2 3 1\n1 1 2\n5\n", 3, "net 2 has no pins"),
    ("2 3 1\n1 1 2\n-5 2\n", 3, "negative net weight"),
    ("2 3 10\n1 2\n2 3\n1\n2\n", 5, "announces 3 vertex-weight lines, found 2"),
    ("2 3 10\n1 2\n2 3\n1\n2 2\n3\n", 5, "must hold one number"),
    ("2 3 10\n1 2\n2 3\n1\n-2\n3\n", 5, "negative vertex weight"),
    ("2 3\n1 2\n2 y\n", 3, "bad token 'y'"),
    ("3 3 10\n1 2\n2 3\n1 3\n5\n6\n-\n", 7, "bad token '-'"),   # a lone sign last: numpy reads 0
])
def test_errors_name_file_and_line(tmp_path, content, line, match):
    p = tmp_path / "bad.hgr"
    p.write_text(content)
    with pytest.raises(GraphFormatError) as ei:
        read_hypergraph(p)
    assert ei.value.path == str(p) and ei.value.line == line, str(ei.value)
    assert match in str(ei.value), str(ei.value)
