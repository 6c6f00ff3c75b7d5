"""The per-graph engine rule of ``--nprocs`` (partplan.partition.pipeline.engine_rule): boundaries of
choose_engine, and the figures graph_stats reads from a chunked graph."""
from __future__ import annotations

import numpy as np
import pytest

from partplan.partition.pipeline.engine_rule import (HUB_PART_BAND, HUB_TOP1_SHARE, SKEW_GINI, ZOLTAN_MAX_N,
                                                      choose_engine, graph_stats, hub_stall, stats_from_histogram)

ALL = {"zoltan", "ptscotch", "stream"}
LO, HI = HUB_PART_BAND


def st(top1=0.2, mop=0.5, n=10_000, symmetric=True, **kw):
    return {"n": n, "symmetric": symmetric, "top1pct_nnz_share": top1, "max_over_part": mop, **kw}


@pytest.mark.parametrize("top1, mop, stall", [
    (HUB_TOP1_SHARE, LO, True),                 # both edges inclusive
    (HUB_TOP1_SHARE, HI, True),
    (HUB_TOP1_SHARE - 1e-9, 2.0, False),        # just below the hub share
    (HUB_TOP1_SHARE, LO - 1e-9, False),         # the hub fits in one part
    (HUB_TOP1_SHARE, HI + 1e-9, False),         # the hub is the floor (as-22july06, k = 64)
    (0.386, 1.665, True),                       # as-22july06, k = 16 (TUNE)
    (0.272, 2.412, False),                      # email-Enron, k = 64 (TUNE)
])
def test_hub_stall_band(top1, mop, stall):
    assert hub_stall(st(top1, mop)) is stall
    assert choose_engine(st(top1, mop), ALL)[0] == ("stream" if stall else "zoltan")


@pytest.mark.parametrize("gini, engine", [
    (SKEW_GINI, "stream"),                      # inclusive
    (SKEW_GINI - 1e-9, "zoltan"),
    (0.851, "stream"),                          # R-MAT 15 (TUNE), k = 64: outside the hub band
    (0.730, "zoltan"),                          # email-Enron (TUNE)
])
def test_rmat_like_skew_runs_the_stream_whatever_is_installed(gini, engine):
    s = st(0.3, 11.5, gini=gini)
    assert choose_engine(s, ALL)[0] == engine
    if engine == "stream":
        assert choose_engine(s, {"ptscotch", "stream"})[0] == "stream"
        assert "Gini" in choose_engine(s, ALL)[1]


def test_without_k_no_stall():
    s = st(0.9, 2.0)
    del s["max_over_part"]
    assert not hub_stall(s)
    assert choose_engine(s, ALL)[0] == "zoltan"


def test_fallbacks_without_zoltan():
    assert choose_engine(st(), {"ptscotch", "stream"})[0] == "ptscotch"
    assert choose_engine(st(symmetric=False), {"ptscotch", "stream"})[0] == "stream"   # PT-Scotch: symmetric only
    assert choose_engine(st(), {"stream"})[0] == "stream"
    assert choose_engine(st(0.5, 2.0), {"ptscotch", "stream"})[0] == "stream"        # the stall band wins
    assert choose_engine(st(n=ZOLTAN_MAX_N), ALL)[0] == "zoltan"
    eng, why = choose_engine(st(n=ZOLTAN_MAX_N + 1), ALL)
    assert eng == "ptscotch" and "32-bit" in why


def test_directed_with_zoltan():
    assert choose_engine(st(symmetric=False), ALL)[0] == "zoltan"


def test_reason_is_one_line():
    for s in (st(), st(0.5, 2.0), st(symmetric=False)):
        for inst in (ALL, {"stream"}, {"ptscotch", "stream"}):
            eng, why = choose_engine(s, inst)
            assert eng in inst and why and "\n" not in why


def test_stats_from_histogram():
    # degrees 1, 1, 1, 4 (a star plus nothing else: nnz 7 is given, not derived)
    s = stats_from_histogram([0, 3, 0, 0, 1], n=4, nnz=7, symmetric=True, k=2)
    assert s["max_degree"] == 4 and s["max_over_part"] == 2.0 and s["empty_rows"] == 0
    assert s["top1pct_nnz_share"] == round(4 / 7, 4)
    even = stats_from_histogram([0, 0, 0, 10], n=10, nnz=30, symmetric=True)
    assert even["gini"] == 0.0 and even["share_above_4x"] == 0.0 and "k" not in even


def test_graph_stats_matches_the_graph(tmp_path):
    from partplan.datasets.generators import rmat
    from partplan.io.chunked import write_chunked
    g = rmat(10, seed=3)
    path = write_chunked(g, tmp_path / "g.chunked", chunks=4)
    s = graph_stats(path, 16, block=500)       # several row blocks per chunk
    deg = np.diff(g.indptr)
    assert s["n"] == g.n and s["nnz"] == int(deg.sum()) and s["max_degree"] == int(deg.max())
    assert s["symmetric"] is True
    d = np.sort(deg).astype(float)
    gini = 2 * np.sum(np.arange(1, d.size + 1) * d) / (d.size * d.sum()) - (d.size + 1) / d.size
    assert abs(s["gini"] - gini) < 1e-3
    assert s["max_over_part"] == round(deg.max() * 16 / g.n, 3)


def test_an_mpi_error_line_joined_with_another_ranks_is_one_error():
    """mpirun can join two ranks' error lines into one (no newline between them): the first rank's
    error alone is the reason."""
    from partplan.partition.pipeline.distributed import _reason
    joined = ("partplan: error: rank 1: PT-Scotch partitions symmetric patterns only (use --engine zoltan)"
              "partplan: error: rank 0: PT-Scotch partitions symmetric patterns only (use --engine zoltan)")
    assert _reason(["mpirun noise", joined], 2) == ("rank 1: PT-Scotch partitions symmetric patterns only "
                                                    "(use --engine zoltan)")
