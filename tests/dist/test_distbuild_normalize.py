"""The distributed plan build with ``normalize`` ("gcn", "mean"): each process turns its rows into
Â's (remaining self loops, degrees and "gcn"'s column scales from the processes holding those rows),
and the plan must be byte for byte the one-process ``build_plan(..., normalize=mode)`` +
``write_plan`` (the matrix is checked against scipy and PyG in tests/unit/models/test_normalize.py),
on every layout the distributed build covers, for a symmetric graph (backward = forward) and a
directed weighted graph with zero-weight entries and explicit self loops of any weight."""
from __future__ import annotations

import filecmp
import json
import os
from pathlib import Path

import numpy as np
import pytest

from partplan import Graph
from partplan.datasets.generators import rmat
from partplan.io.chunked import write_chunked
from partplan.layouts import parse_layout
from partplan.plan import build_plan, write_plan

pytest.importorskip("torch")
from partplan.jobs.build import build_distributed, build_plan_distributed  # noqa: E402
from partplan.runtime.comm import LocalComm  # noqa: E402


def _directed_weighted(scale: int, seed: int) -> Graph:
    """Scrambled R-MAT directions, weights drawn from {0, 1e-3, 0.5, 1, 2.25} (zeros: entries
    Â drops), and self loops on a third of the vertices, some of weight 0."""
    g = rmat(scale, 6, seed=seed)
    rng = np.random.default_rng(seed)
    loops = np.arange(0, g.n, 3)
    rows = np.concatenate([g.rows, loops])
    cols = np.concatenate([(g.indices * 7 + 3) % g.n, loops])
    w = rng.choice([0.0, 1e-3, 0.5, 1.0, 2.25], rows.size)
    return Graph.from_edges(rows, cols, n=g.n, weights=w)


def _graphs():
    return {"symmetric": rmat(8, 6, seed=2), "directed": _directed_weighted(8, 3)}


def _same_dir(a: Path, b: Path) -> None:
    fa, fb = sorted(os.listdir(a)), sorted(os.listdir(b))
    assert fa == fb
    bad = [f for f in fa if not filecmp.cmp(a / f, b / f, shallow=False)]
    assert not bad, f"files differ: {bad}"


def _reference(g, part, k, layout, mode, tmp: Path) -> Path:
    return write_plan(build_plan(g, part, k, layout=layout, f=16, normalize=mode), tmp / "ref.plan", created=False)


@pytest.mark.parametrize("mode", ["gcn", "mean"])
@pytest.mark.parametrize("layout,k", [("1d", 4), ("1.5d:2", 4), ("2d:2x2", 4), ("routed:domain:2", 4)])
def test_normalized_plan_byte_identical_in_process(tmp_path, layout, k, mode):
    for name, g in _graphs().items():
        sub = tmp_path / name
        sub.mkdir()
        part = np.random.default_rng(1).integers(0, parse_layout(layout, k).row_blocks, g.n)
        gp = write_chunked(g, sub / "g.chunked", chunks=3)
        ref = _reference(g, part, k, layout, mode, sub)
        build_plan_distributed(gp, part, k, sub / "d.plan", comm=LocalComm(1, []), layout=layout, f=16,
                               created=False, normalize=mode)
        _same_dir(ref, sub / "d.plan")
        m = json.loads((ref / "manifest.json").read_text())
        assert m["normalize"] == mode and m["graph"]["weighted"]
        # Â's nonzeros: A's of nonzero weight, plus a self loop on each row that stores no diagonal entry
        A = g.to_scipy().tocsr()
        A.sum_duplicates()
        rows = np.repeat(np.arange(g.n), np.diff(A.indptr))
        stores_diag = np.zeros(g.n, bool)
        stores_diag[rows[rows == A.indices]] = True
        assert m["graph"]["nnz"] == int(np.count_nonzero(A.data)) + int((~stores_diag).sum())
        assert m["backward"] == ("same-as-forward" if name == "symmetric" and mode == "gcn" else "separate")


def test_normalized_negative_degree_is_one_error(tmp_path):
    """A row whose weights sum below 0 is refused as the one-process build refuses it."""
    from partplan.errors import GraphFormatError
    g = Graph(np.array([0, 1, 3, 4]), np.array([1, 0, 2, 1]), np.array([1.0, 1.0, -5.0, 1.0]))
    gp = write_chunked(g, tmp_path / "g.chunked", chunks=2)
    with pytest.raises(GraphFormatError, match="row 1: its weights .* sum to -3 < 0"):
        build_plan(g, np.array([0, 0, 1]), 2, normalize="gcn")
    with pytest.raises(Exception, match="row 1: its weights .* sum to -3 < 0"):
        build_plan_distributed(gp, np.array([0, 0, 1]), 2, tmp_path / "d.plan", comm=LocalComm(1, []),
                               normalize="gcn")
    assert not (tmp_path / "d.plan").exists()


@pytest.mark.dist
@pytest.mark.slow
@pytest.mark.parametrize("mode,layout,k,nprocs", [("gcn", "1d", 8, 3), ("mean", "2d:2x2", 4, 2),
                                                  ("gcn", "1.5d:2", 8, 3)])
def test_normalized_plan_byte_identical_on_gloo(tmp_path, mode, layout, k, nprocs):
    """Several processes: "gcn"'s column scales come from the processes holding those rows."""
    g = _directed_weighted(9, 4)
    part = np.random.default_rng(2).integers(0, parse_layout(layout, k).row_blocks, g.n)
    gp = write_chunked(g, tmp_path / "g.chunked", chunks=5)
    ref = _reference(g, part, k, layout, mode, tmp_path)
    res = build_distributed(gp, part, k, tmp_path / "d.plan", nprocs=nprocs, layout=layout, f=16, created=False,
                            normalize=mode, timeout_s=240)
    assert res["processes"] == nprocs
    _same_dir(ref, tmp_path / "d.plan")


@pytest.mark.parametrize("layout", ["1d", "2d:2x2"])
def test_the_header_speaks_of_A_not_of_A_hat(tmp_path, layout):
    """A header's "directed": false is checked on A. An undirected 4-cycle whose weight is 0 one way
    (A symmetric in pattern, Â not: its zero is dropped) is planned as in one process; a header that
    calls a matrix undirected whose pattern is asymmetric only through a zero-weight entry is
    refused, as the one-process build and the build without --normalize refuse it."""
    from partplan.errors import GraphFormatError
    ip, ix = np.array([0, 2, 4, 6, 8]), np.array([1, 3, 0, 2, 1, 3, 0, 2])
    g = Graph(ip, ix, np.array([0.0, 1, 1, 1, 1, 1, 1, 1]), directed=False)
    part = np.array([0, 1, 0, 1])
    gp = write_chunked(g, tmp_path / "g.chunked", chunks=2)
    ref = _reference(g, part, 4 if layout != "1d" else 2, layout, "gcn", tmp_path)
    build_plan_distributed(gp, part, 4 if layout != "1d" else 2, tmp_path / "d.plan", comm=LocalComm(1, []),
                           layout=layout, f=16, created=False, normalize="gcn")
    _same_dir(ref, tmp_path / "d.plan")
    # (0, 2) stored with weight 0, (2, 0) absent: A's pattern is asymmetric
    bad = Graph(np.array([0, 3, 5, 7, 9]), np.array([1, 2, 3, 0, 2, 1, 3, 0, 2]),
                np.array([1.0, 0, 1, 1, 1, 1, 1, 1, 1]), directed=True)
    bp = write_chunked(bad, tmp_path / "bad.chunked", chunks=2)
    hdr = bp / "header.json"
    hdr.write_text(hdr.read_text().replace('"directed": true', '"directed": false'))
    assert '"directed": false' in hdr.read_text()
    for mode in (None, "gcn"):
        with pytest.raises(GraphFormatError, match='"directed": false'):
            build_plan_distributed(bp, part, 4 if layout != "1d" else 2, tmp_path / f"bad{mode}.plan",
                                   comm=LocalComm(1, []), layout=layout, f=16, created=False, normalize=mode)
        assert not (tmp_path / f"bad{mode}.plan").exists()


@pytest.mark.parametrize("mode", ["gcn", "mean"])
def test_normalized_in_runs_of_a_few_nonzeros(tmp_path, monkeypatch, mode):
    """The rows are normalized in runs of _NORMALIZE_BLOCK_NNZ nonzeros (bounded temporaries): runs
    of 5 (and rows heavier than that alone) give the same plan."""
    from partplan.plan import distbuild
    monkeypatch.setattr(distbuild, "_NORMALIZE_BLOCK_NNZ", 5)
    g = _directed_weighted(7, 5)
    part = np.random.default_rng(3).integers(0, 3, g.n)
    gp = write_chunked(g, tmp_path / "g.chunked", chunks=3)
    ref = _reference(g, part, 3, "1d", mode, tmp_path)
    build_plan_distributed(gp, part, 3, tmp_path / "d.plan", comm=LocalComm(1, []), f=16, created=False,
                           normalize=mode)
    _same_dir(ref, tmp_path / "d.plan")
