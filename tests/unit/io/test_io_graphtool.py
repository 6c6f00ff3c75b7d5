"""graph-tool .gt reader: tiny files assembled here with ``struct`` from the
documented layout (independent of partplan's writer), both endiannesses and
id widths, the real Debian ``karate`` fixture and the embedded email-Enron,
and the error paths."""
from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

from partplan import Graph
from partplan.errors import GraphFormatError
from partplan.io import read_graph, write_graph

HERE = Path(__file__).resolve().parents[2]  # tests/
REPO = HERE.parent
MAGIC = b"\xe2\x9b\xbe gt"


def gt_bytes(adj, *, directed, big=False, comment=b"hand made", width=None, props=True):
    """The documented layout, written field by field."""
    e = ">" if big else "<"
    n = len(adj)
    if width is None:
        width = 1 if n < 2 ** 8 else 2 if n < 2 ** 16 else 4
    code = {1: "B", 2: "H", 4: "I", 8: "Q"}[width]
    out = MAGIC + bytes([1, int(big)]) + struct.pack(e + "Q", len(comment)) + comment
    out += bytes([int(directed)]) + struct.pack(e + "Q", n)
    for nbrs in adj:
        out += struct.pack(e + "Q", len(nbrs)) + b"".join(struct.pack(e + code, v) for v in nbrs)
    if props:
        out += struct.pack(e + "Q", 0)
    return out


def dense_from(adj, n, undirected):
    d = np.zeros((n, n))
    for u, nbrs in enumerate(adj):
        for v in nbrs:
            d[u, v] = 1
            if undirected:
                d[v, u] = 1
    return d


@pytest.mark.parametrize("big", [False, True])
def test_small_directed_and_undirected(tmp_path, big):
    adj = [[1, 2], [2], [], [0, 3]]
    for directed in (True, False):
        p = tmp_path / f"t{int(directed)}{int(big)}.gt"
        p.write_bytes(gt_bytes(adj, directed=directed, big=big))
        g = read_graph(p)
        assert g.n == 4 and g.directed == directed and g.data is None
        assert np.array_equal(g.to_scipy().toarray(), dense_from(adj, 4, not directed))


def test_two_byte_ids_and_gzip(tmp_path):
    n = 300  # >= 2**8: neighbour ids take 2 bytes
    rng = np.random.default_rng(5)
    adj = [sorted(set(rng.integers(0, n, 3).tolist())) for _ in range(n)]
    p = tmp_path / "w2.gt.gz"
    with gzip.open(p, "wb") as f:
        f.write(gt_bytes(adj, directed=True, big=True))
    g = read_graph(p)
    assert np.array_equal(g.to_scipy().toarray(), dense_from(adj, n, False))


def test_real_karate_fixture():
    # karate.gt.gz from Debian python3-graph-tool 2.45+ds-10 (graph_tool/collection), see tests/data/io/README.md
    g = read_graph(HERE / "data" / "io" / "karate.gt.gz")
    assert (g.n, g.nnz // 2) == (34, 78) and not g.directed and g.is_symmetric()
    assert g.row_nnz.max() == 17  # vertex 34 (the instructor / administrator): degree 17
    assert sorted(g.row_nnz.tolist())[-2:] == [16, 17]


def test_embedded_email_enron():
    p = REPO / "datasets" / "email-Enron.gt.gz"
    if not p.exists():
        pytest.skip("embedded dataset not present")
    g = read_graph(p, symmetrize=True, self_loops="remove")
    assert (g.n, g.nnz // 2) == (36_692, 183_831) and not g.has_self_loops()


def test_writer_round_trip(tmp_path):
    rng = np.random.default_rng(2)
    u = Graph.from_edges(rng.integers(0, 70, 300), rng.integers(0, 70, 300), symmetrize=True)
    d = Graph.from_edges(rng.integers(0, 70, 300), rng.integers(0, 70, 300))
    for g, name in ((u, "u.gt"), (d, "d.gt.gz")):
        h = read_graph(write_graph(g, tmp_path / name))
        assert h.fingerprint == g.fingerprint and h.directed == g.directed


def test_errors(tmp_path):
    p = tmp_path / "bad.gt"
    p.write_bytes(b"\x00" * 40)
    with pytest.raises(GraphFormatError, match="bad magic") as ei:
        read_graph(p)
    assert ei.value.path == str(p)
    good = gt_bytes([[1], [0]], directed=True)
    p.write_bytes(good[:-12])
    with pytest.raises(GraphFormatError, match="truncated"):
        read_graph(p)
    p.write_bytes(MAGIC + bytes([2, 0]) + good[8:])
    with pytest.raises(GraphFormatError, match="version 2"):
        read_graph(p)
    p.write_bytes(gt_bytes([[1], [5]], directed=True))
    with pytest.raises(GraphFormatError, match="neighbour id 5 of vertex 1 out of range"):
        read_graph(p)
    p.write_bytes(gt_bytes([[1], [0]], directed=2))          # the flag is one byte, 0 or 1
    with pytest.raises(GraphFormatError, match="bad directed byte 2") as ei:
        read_graph(p)
    assert ei.value.field == "directed"
    q = tmp_path / "broken.gt.gz"
    q.write_bytes(gzip.compress(good)[:-10])
    with pytest.raises(GraphFormatError):
        read_graph(q)
