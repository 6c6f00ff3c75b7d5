"""Golden plans (plans/golden/): the on-disk format is stable — a fresh build of
each case writes byte-identical shards — and every golden plan validates."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from partplan.plan import load_plan, write_plan
from partplan.runtime.validate import validate_plan
from partplan.plan.store import _read_arrow

ROOT = Path(__file__).resolve().parents[3] / "plans"
spec = importlib.util.spec_from_file_location("make_golden", ROOT / "make_golden.py")
make_golden = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make_golden)
NAMES = sorted(make_golden.cases())


@pytest.mark.parametrize("name", NAMES)
def test_golden_validates_and_is_reproduced(name, tmp_path):
    golden = ROOT / "golden" / f"{name}.plan"
    g, plan = make_golden.build(name)
    assert validate_plan(golden, g)["ok"]
    fresh = write_plan(plan, tmp_path / f"{name}.plan", created=False)
    # Same fields, same arrays, same metadata. (Bytes are compared in
    # test_plan_store.test_determinism_same_bytes within one pyarrow version;
    # another pyarrow release may lay out the same IPC file differently.)
    for f in sorted(golden.iterdir()):
        if f.name != "manifest.json":
            ma, aa = _read_arrow(f)
            mb, ab = _read_arrow(fresh / f.name)
            assert ma == mb and sorted(aa) == sorted(ab), f"{name}/{f.name}: fields changed (format drift)"
            for k in aa:
                assert np.array_equal(aa[k], ab[k]) and aa[k].dtype == ab[k].dtype, f"{name}/{f.name}:{k}"
    a, b = (json.loads((p / "manifest.json").read_text()) for p in (golden, fresh))
    for m in (a, b):
        m.pop("tool")
        m.pop("partition_file")
        for s in m["shards"]:
            s.pop("bytes"), s.pop("sha256")
    assert a == b


def test_path4_golden_by_hand():
    """Path 0-1-2-3, parts {0,1} | {2,3}: each rank sends its boundary row once."""
    p = load_plan(ROOT / "golden" / "path4-1d-k2.plan")
    assert [s["op"] for s in p.manifest["programs"]["forward"]["steps"]] == ["copy", "gather", "alltoallv", "spmm"]
    assert p.manifest["programs"]["backward"] == {"same_as": "forward"}
    assert p.manifest["groups"] == [{"name": "world", "ranks": [0, 1]}]
    assert p[0]["fwd.2.recv_ids"].tolist() == [2] and p[1]["fwd.2.recv_ids"].tolist() == [1]
    assert p[0]["fwd.in_ids"][p[0]["fwd.1.idx"]].tolist() == [1]
    assert p[1]["fwd.in_ids"][p[1]["fwd.1.idx"]].tolist() == [2]
    assert p.manifest["programs"]["forward"]["steps"][2]["pairs"] == [[0, 1, 1], [1, 0, 1]]
    # rank 0: rows 0, 1; row 0 reads col 1 (local 1), row 1 reads cols 0, 2 (local 0, halo slot 2)
    assert p[0]["fwd.3.indptr"].tolist() == [0, 1, 3] and p[0]["fwd.3.indices"].tolist() == [1, 0, 2]
    assert np.array_equal(p.part, [0, 0, 1, 1])


def test_version_1_plan_is_refused_with_the_rebuild_command():
    from partplan import PlanError
    old = Path(__file__).resolve().parents[2] / "data" / "path4-v1.plan"
    with pytest.raises(PlanError, match=r"format_version' = 1 .*partplan plan GRAPH --partition"):
        load_plan(old)


def test_schema_md_documents_every_field():
    from partplan.program.core import OP_ARRAYS
    from partplan.program.schema import FORMAT_VERSION, PARTITION_FIELDS
    text = (ROOT / "SCHEMA.md").read_text()
    assert f"version {FORMAT_VERSION}" in text
    for name in PARTITION_FIELDS:
        assert f"| `{name}` |" in text, name
    for op, (need, may) in OP_ARRAYS.items():
        assert f"`{op}`" in text, op
        for a in need + may:
            assert f"`{a}`" in text, (op, a)
    m = json.loads((ROOT / "golden" / "directed8-1d-k3.plan" / "manifest.json").read_text())
    for key in m:
        if key != "tool" or "`tool`" in text:
            assert f"`{key}`" in text, key
