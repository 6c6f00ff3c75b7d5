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
