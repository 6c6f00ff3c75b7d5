"""A plan's rank count, partition file and graph as they come from outside: an empty part placed
last by ``--map greedy`` keeps the plan's ranks; a DGL / PyG / CAGNET partition's own part count
survives an export and a re-plan; a partition file rewritten with another plan's metadata or a
perm that is not the block order is refused; ``validate --graph`` with the plan's pattern but other
values says so instead of failing the plan; a normalized plan is not exported to DGL as if its
matrix were the graph. Oracles: the part vectors and counts written by the tests themselves."""
from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import pytest

from partplan import Graph
from partplan.cli.main import main
from partplan.errors import PlanError
from partplan.io import write_graph


def _graph(tmp_path, weights=None):
    rng = np.random.default_rng(4)
    src, dst = rng.integers(0, 40, 120), rng.integers(0, 40, 120)
    g = Graph.from_edges(src, dst, n=40, weights=weights if weights is None else weights(src.size), name="g")
    path = tmp_path / ("g.npz" if weights is None else "gw.npz")
    write_graph(g, path)
    return g, path


def _ranks(capsys, argv) -> int:
    assert main(["-q", *argv, "--json"]) == 0
    return int(json.loads(capsys.readouterr().out)["ranks"])


def test_map_greedy_keeps_the_ranks_of_a_partition_with_an_empty_part(tmp_path, capsys):
    _, g = _graph(tmp_path)
    part = np.arange(40) % 4
    part[part == 2] = 1                                        # part 2 empty: ids 0, 1, 3 -> 4 ranks
    np.save(tmp_path / "p.npy", part)
    for extra in ([], ["--route", "domain"]):
        assert _ranks(capsys, ["plan", str(g), "--partition", str(tmp_path / "p.npy"), "--topology", "tree:2x2",
                               "--map", "greedy", *extra, "-o", str(tmp_path / "m.plan")]) == 4


def test_a_foreign_partitions_own_part_count_survives_export_and_replan(tmp_path, capsys):
    _, g = _graph(tmp_path)
    np.save(tmp_path / "p.npy", np.arange(40) % 4)
    plan = str(tmp_path / "k5.plan")
    assert _ranks(capsys, ["plan", str(g), "--partition", str(tmp_path / "p.npy"), "-k", "5", "-o", plan]) == 5
    for to in ("dgl", "pyg"):
        assert main(["-q", "export", plan, "--to", to, str(tmp_path / f"e_{to}")]) == 0
        capsys.readouterr()
        assert _ranks(capsys, ["plan", str(g), "--partition", str(tmp_path / f"e_{to}"),
                               "-o", str(tmp_path / f"r_{to}.plan")]) == 5
    (tmp_path / "c.part-sizes").write_text("10 20 10 0\n")        # CAGNET: four blocks, the last empty
    assert _ranks(capsys, ["plan", str(g), "--partition", str(tmp_path / "c.part-sizes"),
                           "-o", str(tmp_path / "c.plan")]) == 4


def _rewrite_partition_file(plan_dir, change):
    import pyarrow as pa
    import pyarrow.ipc as ipc
    f = plan_dir / "partition.arrow"
    with pa.memory_map(str(f)) as src:
        r = ipc.open_file(src)
        b = r.get_batch(0)
        meta = json.loads(r.schema.metadata[b"partplan"])
        cols = {n: b.column(n).values.to_numpy().copy() for n in b.schema.names}
    change(cols, meta)
    t = pa.large_list(pa.int64())
    sch = pa.schema([pa.field(n, t) for n in cols], metadata={"partplan": json.dumps(meta, sort_keys=True)})
    with pa.OSFile(str(f), "wb") as s, ipc.new_file(s, sch) as w:
        w.write_batch(pa.record_batch([pa.array([v], type=t) for v in cols.values()], schema=sch))
    m = json.loads((plan_dir / "manifest.json").read_text())
    raw = f.read_bytes()
    m["partition_file"].update(bytes=len(raw), sha256=hashlib.sha256(raw).hexdigest())
    (plan_dir / "manifest.json").write_text(json.dumps(m, indent=1, sort_keys=True))


@pytest.mark.parametrize("what", ["graph_fingerprint", "k", "perm"])
def test_a_rewritten_partition_file_is_refused_though_its_checksum_was_redone(tmp_path, what):
    from partplan import build_plan, load_plan, write_plan
    g, _ = _graph(tmp_path)
    good = tmp_path / "a.plan"
    write_plan(build_plan(g, np.arange(40) % 4), good)
    load_plan(good)                                               # the untouched copy loads
    bad = tmp_path / "t.plan"
    shutil.copytree(good, bad)

    def change(cols, meta):
        if what == "perm":
            cols["perm"] = cols["perm"][::-1].copy()             # a permutation, not the block order
        else:
            meta[what] = "0" * 64 if what == "graph_fingerprint" else 99
    _rewrite_partition_file(bad, change)
    with pytest.raises(PlanError, match="field 'perm' is not the block order" if what == "perm"
                       else f"metadata field '{what}'"):
        load_plan(bad)


def test_validate_with_the_plans_pattern_but_other_values_names_the_graph(tmp_path, capsys):
    g, gpath = _graph(tmp_path)
    plan = tmp_path / "a.plan"
    np.save(tmp_path / "p.npy", np.arange(40) % 4)
    assert main(["-q", "plan", str(gpath), "--partition", str(tmp_path / "p.npy"), "-o", str(plan)]) == 0
    other = Graph(g.indptr, g.indices, np.arange(1, g.nnz + 1, dtype=np.float64), name="gw")
    write_graph(other, tmp_path / "gw.npz")
    capsys.readouterr()
    assert main(["validate", str(plan), "--graph", str(tmp_path / "gw.npz")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pattern but other values" in err[0], err
    assert main(["-q", "validate", str(plan), "--graph", str(gpath)]) == 0


def test_a_normalized_plan_is_not_exported_to_dgl_as_its_graph(tmp_path, capsys):
    _, gpath = _graph(tmp_path)
    np.save(tmp_path / "p.npy", np.arange(40) % 4)
    plan = str(tmp_path / "n.plan")
    assert main(["-q", "plan", str(gpath), "--partition", str(tmp_path / "p.npy"), "--normalize", "gcn",
                 "-o", plan]) == 0
    capsys.readouterr()
    assert main(["-q", "export", plan, "--to", "dgl", str(tmp_path / "nd")]) == 2
    assert "normalized matrix" in capsys.readouterr().err
    assert not (tmp_path / "nd").exists()


def test_a_normalized_plans_partition_is_its_input_graphs(tmp_path, capsys):
    """A plan of Â is a partition of A's rows: `plan A --partition Â.plan` (normalized again or not) and
    `analyze A --partition Â.plan` read it; before, the graph check asked for Â itself, which no
    CLI option gives. Another graph is still refused."""
    g, gpath = _graph(tmp_path)
    part = np.arange(40) % 4
    np.save(tmp_path / "p.npy", part)
    src = str(tmp_path / "n.plan")
    assert main(["-q", "plan", str(gpath), "--partition", str(tmp_path / "p.npy"), "--normalize", "gcn",
                 "-o", src]) == 0
    for extra in (["--normalize", "gcn"], []):
        out = tmp_path / f"again{len(extra)}.plan"
        assert main(["-q", "plan", str(gpath), "--partition", src, "-o", str(out)] + extra) == 0
        from partplan.plan import load_plan
        assert np.array_equal(load_plan(out).part, part)
    capsys.readouterr()
    assert main(["-q", "analyze", str(gpath), "--partition", src, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["k"] == 4
    other = Graph.from_edges([0, 1], [1, 2], n=40, name="other")
    write_graph(other, tmp_path / "o.npz")
    assert main(["-q", "plan", str(tmp_path / "o.npz"), "--partition", src, "-o", str(tmp_path / "x.plan")]) == 2
    assert "another graph" in capsys.readouterr().err
