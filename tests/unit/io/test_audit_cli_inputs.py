"""Inputs and outputs a CLI audit met: an output path that is a FIFO (renaming onto it would
replace the pipe with a file), a file given where a chunked graph directory is read, and a
manifest whose recorded shard size is negative."""
from __future__ import annotations

import json
import os

import pytest

import partplan
from partplan import Graph
from partplan.errors import GraphFormatError, OutputPathError, PlanError
from partplan.io.outpath import check_output_file


def test_an_output_that_is_a_fifo_is_refused(tmp_path):
    fifo = tmp_path / "ff.txt"
    os.mkfifo(fifo)
    with pytest.raises(OutputPathError, match="not a regular file"):
        check_output_file(fifo, kind="graph")
    assert fifo.exists() and not fifo.is_file()


def test_a_file_where_a_chunked_graph_is_read_says_so(tmp_path):
    from partplan.io.chunked import chunk_info
    f = tmp_path / "d.mtx"
    f.write_text("%%MatrixMarket matrix coordinate pattern general\n1 1 0\n")
    with pytest.raises(GraphFormatError, match="a file: a chunked graph is a directory"):
        chunk_info(f)
    with pytest.raises(GraphFormatError, match="no such directory"):
        chunk_info(tmp_path / "missing")


def test_a_negative_shard_size_in_the_manifest_is_named(tmp_path):
    g = Graph.from_edges([0, 1, 2], [1, 2, 0], symmetrize=True)
    out = partplan.write_plan(partplan.build_plan(g, [0, 1, 1], 2), tmp_path / "x.plan")
    mf = out / "manifest.json"
    m = json.loads(mf.read_text())
    m["shards"][0]["bytes"] = -1
    mf.write_text(json.dumps(m))
    with pytest.raises(PlanError, match=r"shards\[0\]' must hold rank = 0, bytes \(an int >= 0\)"):
        partplan.load_plan(out)
