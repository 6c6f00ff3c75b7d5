"""A shard whose checksum was redone after an edit (a buggy writer, a hand edit) still has its ids
checked by every reader: ``in_ids`` / ``out_ids`` strictly ascending (plan-format.md; reversed
ones had given a wrong Z with exit 0) and every ``recv_ids`` inside [0, n) (the traversals read
them: an out-of-range one had crashed ``run bfs`` with numpy's error). And ``run bfs --plot`` is
checked as an output before the job (it was written after the whole job)."""
from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pytest

from partplan import Graph
from partplan.errors import PlanError
from partplan.plan import build_plan, load_plan, write_plan


@pytest.fixture(scope="module")
def plan_dir(tmp_path_factory):
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 37, 160), rng.integers(0, 37, 160)
    g = Graph.from_edges(src, dst, n=37, symmetrize=True)
    return write_plan(build_plan(g, np.arange(37) % 2, 2), tmp_path_factory.mktemp("ids") / "g.plan")


def _tamper(plan_dir, tmp_path, col, fn, rank=1):
    dst = tmp_path / "t.plan"
    shutil.copytree(plan_dir, dst)
    f = dst / f"rank-{rank:05d}.arrow"
    t = ipc.open_file(str(f)).read_all()
    meta = t.schema.metadata
    v = fn(np.array(t.column(col)[0].as_py()))
    t = t.set_column(t.schema.get_field_index(col), t.schema.field(col),
                     pa.array([v.tolist()], type=t.schema.field(col).type)).replace_schema_metadata(meta)
    with ipc.new_file(str(f), t.schema) as w:
        w.write_table(t)
    b = f.read_bytes()
    m = json.loads((dst / "manifest.json").read_text())
    for s in m["shards"]:
        if s["rank"] == rank:
            s["sha256"], s["bytes"] = hashlib.sha256(b).hexdigest(), len(b)
    (dst / "manifest.json").write_text(json.dumps(m))
    return dst


@pytest.mark.parametrize("col", ["fwd.in_ids", "fwd.out_ids"])
def test_ids_out_of_order_are_refused(plan_dir, tmp_path, col):
    bad = _tamper(plan_dir, tmp_path, col, lambda v: v[::-1].copy())
    with pytest.raises(PlanError, match=f"'{col}' is not strictly ascending"):
        load_plan(bad)


def test_received_ids_out_of_range_are_refused(plan_dir, tmp_path):
    def big(v):
        v = v.copy()
        v[-1] = 10 ** 9
        return v
    bad = _tamper(plan_dir, tmp_path, "fwd.2.recv_ids", big)
    with pytest.raises(PlanError, match="'fwd.2.recv_ids' holds ids outside"):
        load_plan(bad)


def test_bfs_plot_is_checked_before_the_job(plan_dir, tmp_path, capsys):
    from partplan.cli.main import main
    (tmp_path / "d").mkdir()
    rc = main(["-q", "run", "bfs", str(plan_dir), "--backend", "local", "--roots", "2", "--plot", str(tmp_path / "d")])
    err = capsys.readouterr().err
    assert rc == 2 and "is a directory; expected a file name" in err and "Traceback" not in err
